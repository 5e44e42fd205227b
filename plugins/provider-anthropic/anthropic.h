/*
 * plugins/provider-anthropic/anthropic.h - the pure parts of
 * provider-anthropic: request translation (canonical request -> Messages API
 * body) and the streaming decoder (Messages SSE events -> weir stream
 * chunks).
 *
 * Neither part touches the host API table, so unit tests and fuzzers compile
 * anthropic_request.c and anthropic_decode.c directly.  All memory comes
 * from malloc and jansson (plugins never use the core allocators).  Symbols
 * are plugin-private (hidden visibility).
 */
#ifndef WEIR_PROVIDER_ANTHROPIC_H
#define WEIR_PROVIDER_ANTHROPIC_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "provider_cache.h"
#include "provider_options.h"

/* ------------------------------------------------------------------------ */
/* Request translation (anthropic_request.c)                                */
/* ------------------------------------------------------------------------ */

/**
 * Translate a frozen model request {provider, model, max_tokens?,
 * temperature?, messages, tools?} (borrowed) into a Messages API body with
 * `stream:true`.  `default_max_tokens` is used when the request has no
 * max_tokens (the API requires one).
 * @param msg  on failure, a message naming the offending field.
 * @return new reference, or NULL (bad request, or "out of memory" in msg).
 * Thread-safe (pure).
 */
json_t *anthropic_request_body(const json_t *request, long default_max_tokens, char *msg,
                               size_t msg_size);

/**
 * The same body as compact JSON text, built with `cache` (may be NULL): each
 * message's translation (system text, tool results, other blocks) and the
 * tools' are taken from the cache when the very object was translated
 * before, and cached otherwise; merging consecutive messages of one role and
 * putting tool results first work on the cached pieces, so a request costs
 * O(new messages) (provider_cache.h).  The text is the same with or without
 * a cache.  @return malloc'd text the caller frees, or NULL with `msg` set.
 * Thread-safe (the cache is).
 */
char *anthropic_request_text(const json_t *request, long default_max_tokens, pc_cache *cache,
                             char *msg, size_t msg_size);

/**
 * The same body built in `memo` (pc_cache_memo_take; borrowed): its `text`
 * holds the body on success.  The body starts with the messages, so the
 * memo's last body keeps the text of the longest prefix of the same message
 * objects in place (up to the start of the last merged group it shares) and
 * only the rest is added: a request costs O(new messages), not O(history).
 * The text is byte for byte anthropic_request_text's.  @return 0, or -1 with
 * `msg` set and the memo reset.
 */
int anthropic_request_build(const json_t *request, long default_max_tokens, pc_cache *cache,
                            pc_memo *memo, char *msg, size_t msg_size);

/**
 * anthropic_request_build with `extra` (may be NULL: the request's own
 * "options", and no prompt caching): the options merged last into the body
 * (provider_options.h), and extra->cache's cache_control breakpoints.
 * An option that names a key of anthropic_owned_keys, or a `thinking` mode
 * the model's table entry refuses, fails with `msg` naming the key, the
 * model and the rule.
 */
int anthropic_request_build_ex(const json_t *request, pc_extra *extra, long default_max_tokens,
                               pc_cache *cache, pc_memo *memo, char *msg, size_t msg_size);

/** anthropic_request_text with `extra` (may be NULL), as anthropic_request_build_ex. */
char *anthropic_request_text_ex(const json_t *request, pc_extra *extra, long default_max_tokens,
                                pc_cache *cache, char *msg, size_t msg_size);

/** The body members provider-anthropic writes itself (NULL-terminated): refused as options. */
extern const char *const anthropic_owned_keys[];

/**
 * Whether a request to `model` (borrowed, may be NULL) with the merged
 * options `opts` (borrowed, may be NULL) thinks: its thinking.type is
 * "enabled" or "adaptive", or it sets none and the model's table entry
 * thinks unasked (PC_THINKING_ADAPTIVE_ON).  Thread-safe (pure).
 */
bool anthropic_thinking_on(const json_t *opts, const char *model);

/**
 * The thinking rules of Anthropic's "Building with extended thinking" that
 * a request must keep, on the merged options `opts` (borrowed; NULL: none):
 * no `temperature` option other than 1 while the model thinks; an
 * "enabled" thinking's budget_tokens an integer of at least 1024 and less
 * than `max_tokens` (0: not known, not checked).  `where` names the options
 * ("options", "config.models.claude-sonnet-4-5.options").
 * @return 0, or -1 with `msg` naming the field, the model and the values.
 * Thread-safe (pure).
 */
int anthropic_thinking_check(const json_t *opts, const char *model, long max_tokens,
                             const char *where, char *msg, size_t size);

/**
 * Parse a `cache` config value (borrowed; NULL: absent): absent or true ->
 * PC_PROMPT_CACHE_5M, false -> PC_PROMPT_CACHE_OFF, {"ttl":"5m"|"1h"} ->
 * the TTL.  @return 0, or -1 with `msg` naming `where` ("config.cache").
 * Thread-safe (pure).
 */
int anthropic_cache_parse(const json_t *v, const char *where, pc_prompt_cache *out, char *msg,
                          size_t size);

/* ------------------------------------------------------------------------ */
/* Stream decoder (anthropic_decode.c)                                      */
/* ------------------------------------------------------------------------ */

/**
 * Receives one stream chunk (steals `chunk`).  Return 0 to go on, non-zero
 * when the consumer wants no more chunks; the decoder then stops producing
 * chunks except the final `finish`.
 */
typedef int (*anthropic_emit_fn)(void *user_data, json_t *chunk);

/** Decoder state for one streamed response.  Not thread-safe. */
typedef struct anthropic_decoder anthropic_decoder;

/**
 * Create a decoder.  `provider` (copied) names the provider in failures.
 * @return a new decoder (free with anthropic_decoder_free), or NULL when out
 *         of memory.
 */
anthropic_decoder *anthropic_decoder_new(const char *provider, anthropic_emit_fn emit,
                                         void *user_data);

/**
 * Name the request's `model` (copied; NULL: none) in the `continuation`
 * chunks of thinking and redacted_thinking blocks (weir/plugin.h): the
 * plugin sets it to the request's model string exactly as sent.
 * @return 0, or -1 when out of memory (the model is unchanged).
 */
int anthropic_decoder_set_model(anthropic_decoder *d, const char *model);

/** Free a decoder.  NULL is a no-op. */
void anthropic_decoder_free(anthropic_decoder *d);

/**
 * Feed one SSE event: `event` is the event name ("" or NULL when absent;
 * used only when the data has no "type"), `data` (`len` bytes, borrowed,
 * need not be NUL-terminated) its data.  Hostile input never crashes: a
 * malformed event ends the stream with a TRANSPORT failure quoting (escaped,
 * at most 200 bytes) the offending data; an in-band `error` event ends it
 * with the classified failure.  Events after the finish are ignored.
 * @return 0 to keep reading, non-zero when the transfer should stop.
 */
int anthropic_decoder_event(anthropic_decoder *d, const char *event, const char *data,
                            size_t len);

/**
 * End of transfer.  Emits the finish chunk unless one was already emitted:
 * with `failure` (stolen, may be NULL) as an error finish (kind "aborted"
 * when `aborted` is true or its code is ABORTED); without one, as TRANSPORT
 * "stream ended before finish" (no message_stop arrived).
 * @return 0 when exactly one finish chunk was emitted, -1 when it could not
 *         be built (out of memory).
 */
int anthropic_decoder_end(anthropic_decoder *d, json_t *failure, bool aborted);

/** True once the finish chunk has been emitted (or given up on). */
bool anthropic_decoder_done(const anthropic_decoder *d);

#endif /* WEIR_PROVIDER_ANTHROPIC_H */
