/*
 * plugins/provider-common/provider_common.h - the pure parts shared by the
 * HTTP provider plugins (provider-openai, provider-anthropic): the chunk
 * output of a stream decoder (blocks, failures, the one finish chunk) and
 * the helpers of request translation.
 *
 * Not a plugin: each provider lists provider_common.c among its own sources,
 * so every symbol here is plugin-private (hidden visibility).  Nothing here
 * touches the host API table; unit tests and fuzzers compile this file next
 * to a provider's request and decoder files.  All memory comes from malloc
 * and jansson (plugins never use the core allocators).
 */
#ifndef WEIR_PROVIDER_COMMON_H
#define WEIR_PROVIDER_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "weir/export.h"

/* ------------------------------------------------------------------------ */
/* Decoder output                                                           */
/* ------------------------------------------------------------------------ */

#define PC_MAX_BLOCKS 4096 /* hostile streams cannot grow the state without bound */

/**
 * Receives one stream chunk (steals `chunk`); 0 to go on, non-zero when the
 * consumer wants no more chunks.  Same type as openai_emit_fn and
 * anthropic_emit_fn.
 */
typedef int (*pc_emit_fn)(void *user_data, json_t *chunk);

/**
 * Where a decoder's chunks go, and the state every decoder shares: the
 * canonical block count and whether the one finish chunk went out.  Embedded
 * in each provider's decoder.  Not thread-safe.
 */
typedef struct pc_out {
    char *provider;   /* names the provider in failures (owned) */
    const char *unit; /* "chunk" or "event": malformed input is a "stream <unit>" */
    pc_emit_fn emit;
    void *user_data;
    int nblocks;  /* canonical blocks started so far */
    bool refused; /* the consumer refused a chunk: only the finish goes on */
    bool done;    /* the finish was emitted (or could not be built) */
    bool lost;    /* the finish could not be built (out of memory) */
} pc_out;

/**
 * Fill `o`: `provider` (copied; `fallback` when NULL), `unit` (static
 * string), `emit` and `user_data` (borrowed).
 * @return 0, or -1 when out of memory (nothing to clear then).
 */
int pc_out_init(pc_out *o, const char *provider, const char *fallback, const char *unit,
                pc_emit_fn emit, void *user_data);

/** Free what `o` owns.  NULL is a no-op. */
void pc_out_clear(pc_out *o);

/** Set obj[key] = value (stolen); on failure drop *obj (NULL stays NULL). */
void pc_set_new(json_t **obj, const char *key, json_t *value);

/** A failure object {code, message, provider} (new reference, NULL on OOM). */
json_t *pc_failure(const pc_out *o, const char *code, const char *message);

/**
 * Hand a chunk (stolen) to the consumer.  NULL (out of memory) finishes the
 * stream with a failure; a refusal stops every chunk but the finish.
 * @return 0 when the chunk was taken, -1 otherwise.
 */
int pc_put(pc_out *o, json_t *chunk);

/**
 * Emit the one finish chunk: `failure` (stolen) makes it an error/aborted
 * finish of `kind`, otherwise a plain `kind`.  It goes out even after a
 * consumer refusal; a second call only drops `failure`.
 */
void pc_finish(pc_out *o, const char *kind, json_t *failure);

/** Finish with a failure of `code` whose message is printf-formatted. */
void pc_fail(pc_out *o, const char *code, const char *fmt, ...) WEIR_PRINTF(3, 4);

/**
 * Finish with TRANSPORT "malformed stream <unit> (<why>): <data>", the data
 * (borrowed, `len` bytes) quoted escaped and cut at 200 bytes.
 */
void pc_malformed(pc_out *o, const char *why, const char *data, size_t len);

/**
 * A printable rendering of the first 200 bytes of `p` (`n` bytes, need not
 * be NUL-terminated): printable ASCII as is, '\\' doubled, every other byte
 * as \xNN, "..." when bytes were left out.  Malloc'd (the caller frees
 * it), or NULL when out of memory.
 */
char *pc_show_bytes(const char *p, size_t n);

/**
 * What a body that should be JSON (a GET of the window probe) is instead,
 * said without quoting it (the probe's log never shows the server's text):
 * "an empty body", "gzip data" (it starts 1f 8b), "an HTML page" (its first
 * byte after white space is '<'), "a body that is not JSON", or NULL when
 * it parses as JSON.  `body` (borrowed, `len` bytes) may be NULL when len
 * is 0.  A static string.  Thread-safe (pure).
 */
const char *pc_not_json(const char *body, size_t len);

/**
 * Parse one event's data (borrowed, `len` bytes, need not be
 * NUL-terminated).  @return a new reference, or NULL after finishing with
 * "malformed ... (invalid JSON)".
 */
json_t *pc_parse(pc_out *o, const char *data, size_t len);

/**
 * Start canonical block number *index (set before the block-start chunk is
 * emitted) of `block_type`.  More than PC_MAX_BLOCKS blocks finish the
 * stream as malformed.  @return 0, or -1 when the stream stopped.
 */
int pc_block_start(pc_out *o, const char *block_type, int *index);

/**
 * End canonical block `index`; `empty_tool_call` (a tool call that never got
 * arguments) first sends arguments "{}" so its arguments are JSON text.
 * @return 0, or -1 when the stream stopped.
 */
int pc_block_end(pc_out *o, int index, bool empty_tool_call);

/**
 * Finish with an in-band error of canonical `code`: "in-band error from the
 * provider: <type>: <message>" (type and message borrowed, may be NULL).
 */
void pc_inband_error(pc_out *o, const char *code, const char *type, const char *message);

/**
 * End of transfer, for a decoder that has nothing of its own to finish:
 * unless the finish went out, `failure` (stolen, may be NULL; its provider
 * is filled in) makes an error finish ("aborted" when `aborted` or its code
 * is ABORTED), `aborted` alone an ABORTED one, nothing TRANSPORT "stream
 * ended before finish".  `o` NULL only drops `failure`.
 * @return 0 when exactly one finish chunk went out, -1 when it could not be
 *         built (out of memory) or `o` is NULL.
 */
int pc_end(pc_out *o, json_t *failure, bool aborted);

/* ------------------------------------------------------------------------ */
/* Secrets                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * A provider's configured secrets (the API key, the values of secret
 * headers) are scrubbed from every text that comes from the server before it
 * leaves the provider: each occurrence becomes PC_REDACTED.  What counts as
 * an occurrence (docs/providers.md, "Secrets"):
 *   - a secret of PC_SECRET_SHORT bytes or more: every occurrence, wherever
 *     it stands (inside a longer word too); overlapping occurrences, and
 *     occurrences of different secrets that touch or overlap, become one
 *     PC_REDACTED;
 *   - a shorter secret: only where it stands as a whole word (the bytes
 *     around it are not [A-Za-z0-9_-]), so that a key such as "test" or
 *     "EMPTY" does not blank "testing" or "EMPTYING" out of a message;
 *   - a masked echo of a secret of PC_SECRET_SHORT bytes or more, the way
 *     servers quote a key they refuse ("sk-abc1***...***wxyz"): a word made
 *     of a prefix of the secret, three or more '*' or '.', and a suffix of
 *     the secret, with at least 4 bytes of the secret showing.
 * Matching is byte-exact and case-sensitive.  Empty secrets are ignored.
 */

/** What an occurrence of a secret becomes. */
#define PC_REDACTED "[redacted]"

/** Secrets shorter than this (bytes) are scrubbed as whole words only. */
#define PC_SECRET_SHORT 8

/** A set of secrets; {0} is empty.  Not thread-safe while it changes. */
typedef struct pc_secrets {
    char **v; /* owned copies */
    size_t n;
} pc_secrets;

/**
 * Add a copy of `value` (borrowed; NULL, "" and a value already in the set
 * add nothing).  @return 0, or -1 when out of memory.
 */
int pc_secrets_add(pc_secrets *s, const char *value);

/** Free what `s` holds and empty it.  NULL is a no-op. */
void pc_secrets_clear(pc_secrets *s);

/**
 * Scrub `len` bytes of `text` (borrowed, need not be NUL-terminated).
 * @param out      receives NULL when `text` holds no secret (nothing to do),
 *                 else the scrubbed text (malloc'd, NUL-terminated; the
 *                 caller frees it), its length in *out_len (may be NULL).
 * @return 0, or -1 when out of memory (*out NULL).
 * Thread-safe on a set that does not change.
 */
int pc_scrub(const pc_secrets *s, const char *text, size_t len, char **out, size_t *out_len);

/**
 * Scrub every string value inside `v` (borrowed, modified in place: object
 * members and array elements, 64 levels deep; keys are left alone).  A
 * string that cannot be scrubbed for lack of memory becomes PC_REDACTED.
 * @return 0, or -1 when out of memory left a secret in `v`.
 */
int pc_scrub_json(const pc_secrets *s, json_t *v);

/* ------------------------------------------------------------------------ */
/* Request translation                                                      */
/* ------------------------------------------------------------------------ */

/** Fill `msg` (may be NULL) with the printf-formatted text; always -1. */
int pc_bad(char *msg, size_t size, const char *fmt, ...) WEIR_PRINTF(3, 4);

/** pc_bad with "out of memory". */
#define PC_OOM(msg, size) pc_bad(msg, size, "out of memory")

/** A growable NUL-terminated string; {0} is empty.  The owner frees `p`. */
typedef struct pc_buf {
    char *p;
    size_t len, cap;
} pc_buf;

/** Append `n` bytes of `s`.  @return 0, or -1 when out of memory. */
int pc_buf_add(pc_buf *b, const char *s, size_t n);

/**
 * Append a non-empty piece, separated from earlier ones by a blank line
 * (an empty piece adds nothing).  @return 0, or -1 when out of memory.
 */
int pc_buf_piece(pc_buf *b, const char *s);

/**
 * Append `n` bytes of UTF-8 text `s` as a JSON string, quotes included,
 * escaped as jansson's compact output escapes it ('"', '\\', the control
 * characters; nothing else), so a body written with it is the body jansson
 * would dump.  @return 0, or -1 when out of memory.
 */
int pc_buf_str(pc_buf *b, const char *s, size_t n);

/** Append the compact JSON text of `v` (borrowed; any JSON value).
 * @return 0, or -1 with `msg` "out of memory". */
int pc_buf_json(pc_buf *b, const json_t *v, char *msg, size_t size);

/** Parse a request body built as text (`text` malloc'd, freed here; NULL
 * passes through).  @return new reference, or NULL (`msg` "out of memory"
 * when the text did not parse: bodies are built valid). */
json_t *pc_body_from_text(char *text, char *msg, size_t size);

/**
 * The role of canonical message `m` (messages[i]) after the checks both
 * providers make: a string role of system/user/assistant/tool and a
 * "content" array (*content, borrowed).  `where` receives "messages[i]".
 * @return the role (borrowed), or NULL with `msg` naming messages[i].
 */
const char *pc_message_role(const json_t *m, size_t i, char *where, size_t where_size,
                            const json_t **content, char *msg, size_t size);

/** A block's "type" (borrowed), or NULL. */
const char *pc_block_type(const json_t *block);

/**
 * Check the common members of a frozen model request (borrowed): an object
 * with a non-empty "model", "max_tokens" a positive integer and
 * "temperature" a number when present and not null.  Clears `msg` first.
 * @return the model (borrowed from `request`), or NULL with `msg` set.
 */
const char *pc_request_check(const json_t *request, char *msg, size_t size);

/**
 * The request's "tool_choice": *choice is "auto", "none", "required"
 * (borrowed from `request`) or NULL (absent or null).
 * @return 0, or -1 with `msg` set for any other value.
 */
int pc_tool_choice(const json_t *request, const char **choice, char *msg, size_t size);

/**
 * The media type and data (borrowed from `block`) of a canonical image block.
 * @return 0, or -1 with `msg` naming `where`.
 */
int pc_image_fields(const json_t *block, const char *where, const char **media,
                    const char **data, char *msg, size_t size);

/**
 * Translate canonical tools [{name, description?, parameters?}] (borrowed)
 * into [{name, description?, <schema_key>}] (parameters default to an empty
 * object schema), each wrapped as {"type":"function","function":{...}} when
 * `wrap_function`.  @return new reference, or NULL with `msg` set.
 */
json_t *pc_translate_tools(const json_t *tools, const char *schema_key, bool wrap_function,
                           char *msg, size_t size);

#endif /* WEIR_PROVIDER_COMMON_H */
