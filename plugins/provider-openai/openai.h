/*
 * plugins/provider-openai/openai.h - the pure parts of provider-openai:
 * request translation (canonical request -> Chat Completions body) and the
 * streaming decoder (Chat Completions SSE data -> weir stream chunks).
 *
 * Neither part touches the host API table, so unit tests and fuzzers compile
 * openai_request.c, openai_decode.c and delta_scan.c directly.  All memory comes from
 * malloc and jansson (plugins never use the core allocators).  Symbols are
 * plugin-private (hidden visibility); the `openai_` prefix keeps them apart
 * from the anthropic plugin's when both are compiled into one test.
 */
#ifndef WEIR_PROVIDER_OPENAI_H
#define WEIR_PROVIDER_OPENAI_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "provider_cache.h"
#include "provider_options.h"

/* ------------------------------------------------------------------------ */
/* Request translation (openai_request.c)                                   */
/* ------------------------------------------------------------------------ */

/**
 * Translate a frozen model request {provider, model, max_tokens?,
 * temperature?, messages, tools?} (borrowed) into a Chat Completions body
 * with `stream:true` and `stream_options.include_usage`.
 * @param msg  on failure, a message naming the offending field
 *             ("messages[2].content[0]: ...").
 * @return new reference, or NULL (bad request, or out of memory: then msg
 *         says "out of memory").
 * Thread-safe (pure).
 */
json_t *openai_request_body(const json_t *request, char *msg, size_t msg_size);

/**
 * The same body as compact JSON text, built with `cache` (may be NULL): the
 * wire text of each message and of the tools array is taken from the cache
 * when the very object was translated before, and cached otherwise, so a
 * request costs O(new messages) (provider_cache.h).  The text is the same
 * with or without a cache.
 * @return malloc'd text the caller frees, or NULL with `msg` set as above.
 * Thread-safe (the cache is).
 */
char *openai_request_text(const json_t *request, pc_cache *cache, char *msg, size_t msg_size);

/**
 * The same text built in `memo->text` (the memo stays the caller's): the
 * longest prefix of messages the memo's last body was built from keeps its
 * text in place, and only the rest is added (provider_cache.h, pc_memo), so
 * the history a conversation's steps share is neither copied nor looked
 * up again.  The text is the same as openai_request_text's.
 * @return 0, or -1 with `msg` set as above (the memo is then reset).
 */
int openai_request_build(const json_t *request, pc_cache *cache, pc_memo *memo, char *msg,
                         size_t msg_size);

/**
 * openai_request_build with `extra` (may be NULL: the request's own
 * "options"): the options merged last into the body (provider_options.h),
 * the model table's rules applied (max_completion_tokens, temperature), and
 * extra->dropped_temperature set when a rule kept the call config's
 * temperature out.  An option that names a key of openai_owned_keys, or a
 * temperature option the model refuses, fails with `msg` naming it.
 */
int openai_request_build_ex(const json_t *request, pc_extra *extra, pc_cache *cache,
                            pc_memo *memo, char *msg, size_t msg_size);

/** What both bodies (Chat Completions and Responses) read first. */
typedef struct openai_begun {
    const char *model;           /* the request's model (borrowed) */
    const json_t *opts;          /* the options, NULL when none (borrowed) */
    const struct pc_model_entry *rules; /* the model table's rules, or NULL */
    json_t *messages, *tools;    /* the request's (borrowed; tools may be NULL) */
    const char *choice;          /* the tool_choice to send, or NULL */
} openai_begun;

/**
 * The checks both body builders start with, into *b: the request's model,
 * its options (extra's, else the request's) against the keys `owned` the
 * body writes itself, a temperature option the model refuses
 * (`taken`; `effort` names the option that allows it in the
 * message), the messages and tools, and the tool_choice (none without
 * tools).  Resets extra's counters.  0, or -1 with `msg`.
 */
int openai_request_begin(const json_t *request, pc_extra *extra, const char *const *owned,
                         bool (*taken)(const struct pc_model_entry *, const json_t *),
                         const char *effort, openai_begun *b, char *msg, size_t size);

/**
 * Whether a row whose base_url is `base_url` (borrowed; NULL: no) sends a
 * prompt_cache_key without being told: when its host is api.openai.com
 * (any port).  OpenAI documents the member (platform.openai.com/docs/
 * guides/prompt-caching); compatible servers may refuse a member they do not
 * know (Gemini's endpoint answers 400 "Invalid JSON payload received.
 * Unknown name \"prompt_cache_key\"").  Thread-safe (pure).
 */
bool openai_cache_key_default(const char *base_url);

/** The body members provider-openai writes itself (NULL-terminated): refused as options. */
extern const char *const openai_owned_keys[];

/**
 * A tool result's `content` (borrowed: a string or an array of text and
 * image blocks) as one text appended to `out`: texts joined by a blank
 * line, each image as "[image: <media type>]".  `where` names the block.
 * @return 0, or -1 with `msg` set (an unsupported block, out of memory).
 * Thread-safe (pure).
 */
struct pc_buf;
int openai_result_text(const json_t *content, const char *where, struct pc_buf *out, char *msg,
                       size_t msg_size);

/* ------------------------------------------------------------------------ */
/* Responses request (responses_request.c)                                  */
/* ------------------------------------------------------------------------ */

/**
 * The Responses body of a frozen model request (borrowed) built in
 * `memo->text` as openai_request_build_ex builds a Chat Completions body
 * (the same memo and cache rules, the same `extra`): input items, tools,
 * model, max_output_tokens, temperature, tool_choice, store false, include
 * ["reasoning.encrypted_content"] for a reasoning model, the options, stream
 * true (the mapping: responses_request.c).  A reasoning block goes back as
 * the item its continuation holds, verbatim, before the items after it.
 * @return 0, or -1 with `msg` naming the offending field (the memo is then
 *         reset).  Thread-safe (the cache is).
 */
int openai_responses_build(const json_t *request, pc_extra *extra, pc_cache *cache,
                           pc_memo *memo, char *msg, size_t msg_size);

/**
 * openai_responses_build without cache or memo, with `options` (borrowed,
 * may be NULL: the request's own) as the merged options.
 * @return malloc'd text the caller frees, or NULL with `msg` set.
 */
char *openai_responses_text(const json_t *request, const json_t *options, char *msg,
                            size_t msg_size);

/**
 * Whether `model` (borrowed) reasons for the Responses API: its model table
 * entry takes max_completion_tokens (o-series, gpt-5), or `options`
 * (borrowed, may be NULL) carry a `reasoning` object.  Then a request asks
 * for the encrypted reasoning.  Thread-safe (pure).
 */
bool openai_responses_reasons(const char *model, const json_t *options);

/**
 * The default of a row's `api`: true (responses) when `base_url` (borrowed;
 * NULL: the default) is OpenAI's own, "https://api.openai.com/v1" (with or
 * without a trailing '/'), false (chat) for any other: compatible servers
 * mostly speak only Chat Completions.  The config schema's if/then/else
 * says the same, so that `weir config` shows it (provider_host.c).
 * Thread-safe (pure).
 */
bool openai_responses_default(const char *base_url);

/** The body members the Responses builder writes itself (NULL-terminated). */
extern const char *const openai_responses_owned_keys[];

/* ------------------------------------------------------------------------ */
/* Stream decoder (openai_decode.c)                                         */
/* ------------------------------------------------------------------------ */

/**
 * Receives one stream chunk (steals `chunk`).  Return 0 to go on, non-zero
 * when the consumer wants no more chunks (e.g. the call was cancelled); the
 * decoder then stops producing chunks except the final `finish`.
 */
typedef int (*openai_emit_fn)(void *user_data, json_t *chunk);

/** Decoder state for one streamed response.  Not thread-safe. */
typedef struct openai_decoder openai_decoder;

/**
 * Create a decoder.  `provider` (copied) names the provider in failures.
 * @return a new decoder (free with openai_decoder_free), or NULL when out
 *         of memory.
 */
openai_decoder *openai_decoder_new(const char *provider, openai_emit_fn emit,
                                   void *user_data);

/**
 * The request's model (copied; NULL or "" for none): the `model` of the
 * continuation chunks the decoder emits (DeepSeek's reasoning_content,
 * Gemini's thought_signature; openai_decode.c).  Without a model no
 * continuation is emitted.  Call before the first event.
 * @return 0, or -1 when out of memory (the model is then unchanged).
 */
int openai_decoder_set_model(openai_decoder *d, const char *model);

/** Free a decoder.  NULL is a no-op. */
void openai_decoder_free(openai_decoder *d);

/**
 * Feed the data of one SSE event (`data`, `len` bytes, borrowed; need not be
 * NUL-terminated).  Hostile input never crashes: a malformed chunk ends the
 * stream with a TRANSPORT failure that quotes (escaped, at most 200 bytes)
 * the offending data.  Events after the finish are ignored.
 * @return 0 to keep reading, non-zero when the transfer should stop (the
 *         stream failed or the consumer stopped).  After `[DONE]` the return
 *         is 0 so a keep-alive connection can drain.
 */
int openai_decoder_event(openai_decoder *d, const char *data, size_t len);

/**
 * End of transfer.  Emits the finish chunk unless one was already emitted:
 * with `failure` (stolen, may be NULL) as an error finish (kind "aborted"
 * when `aborted` is true or its code is ABORTED); without a failure, a stream
 * that reported a finish_reason finishes normally (servers that omit
 * `[DONE]`), any other ends as TRANSPORT "stream ended before finish".
 * @return 0 when exactly one finish chunk was emitted, -1 when it could not
 *         be built (out of memory).
 */
int openai_decoder_end(openai_decoder *d, json_t *failure, bool aborted);

/** True once the finish chunk has been emitted (or given up on). */
bool openai_decoder_done(const openai_decoder *d);

/**
 * Whether chunks of the usual shape are read by the pull scanner
 * (delta_scan.h; the default, `fast` true) or every chunk is parsed with
 * jansson (`fast` false).  The emitted chunks are the same either way; tests
 * and fuzzers compare the two.  NULL is a no-op.
 */
void openai_decoder_set_fast(openai_decoder *d, bool fast);

/**
 * The canonical failure code (failure.c) of an OpenAI error's `type` and
 * `code` (borrowed, may be NULL), with the `message` for the
 * invalid_request_error that says the context is too long.  A static
 * string; "UNKNOWN" when nothing matches.  Thread-safe (pure).
 */
const char *openai_error_code(const char *type, const char *code, const char *message);

/* ------------------------------------------------------------------------ */
/* Responses stream decoder (responses_decode.c)                            */
/* ------------------------------------------------------------------------ */

/** Decoder state for one streamed Responses answer.  Not thread-safe. */
typedef struct responses_decoder responses_decoder;

/**
 * Create a decoder: `provider` (copied) names the provider in failures and
 * the continuations; `model` (copied; NULL or "": none) is the model of the
 * reasoning continuations (without one none is emitted).
 * @return a new decoder, or NULL when out of memory.
 */
responses_decoder *responses_decoder_new(const char *provider, const char *model,
                                         openai_emit_fn emit, void *user_data);

/** Free a decoder.  NULL is a no-op. */
void responses_decoder_free(responses_decoder *d);

/**
 * Feed one SSE event's data (`data`, `len` bytes, borrowed; the event's
 * `type` member names it, the SSE event name is not needed).  Unknown event
 * types are ignored; a malformed event ends the stream with a TRANSPORT
 * failure quoting it (escaped, at most 200 bytes).  Events after the finish
 * are ignored.
 * @return 0 to keep reading, non-zero when the transfer should stop.
 */
int responses_decoder_event(responses_decoder *d, const char *data, size_t len);

/**
 * End of transfer: emits the finish chunk unless one went out, with
 * `failure` (stolen, may be NULL) as an error finish ("aborted" when
 * `aborted`), else TRANSPORT "stream ended before finish".
 * @return 0 when exactly one finish chunk was emitted, -1 when out of memory.
 */
int responses_decoder_end(responses_decoder *d, json_t *failure, bool aborted);

/** True once the finish chunk has been emitted. */
bool responses_decoder_done(const responses_decoder *d);

/** The text of the block a server compaction comes back as. */
#define RESPONSES_COMPACT_TEXT "[the provider compacted the earlier turns of the conversation]"

/**
 * Decode the JSON answer of POST /responses/compact (`body`, `len` bytes,
 * borrowed; NULL: none) into chunks: one text block (RESPONSES_COMPACT_TEXT)
 * whose continuation {provider, model, data:{"compaction": "<the output
 * array's compact JSON>"}, prefix_bound:false} holds the returned items (the
 * user messages and the one encrypted compaction item) for the request
 * builder to send back verbatim, then the usage and a "stop" finish.  A
 * reply without exactly one compaction item with encrypted_content, or not
 * JSON, ends as malformed (TRANSPORT).  Nothing happens after the finish.
 * @return 0 (the finish, or its failure to build, is in the decoder).
 */
int responses_compact_reply(responses_decoder *d, const char *body, size_t len);

/**
 * The JSON body of POST /responses/compact for `request` on a Responses row:
 * {"model", "input", "prompt_cache_key"?} of `full` (borrowed: the streamed body the row would
 * send for it), as new text (owned; free), or NULL with `msg` set.
 */
char *openai_responses_compact_body(const char *full, size_t len, char *msg, size_t size);

#endif /* WEIR_PROVIDER_OPENAI_H */
