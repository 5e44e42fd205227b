/*
 * plugins/provider-openai/delta_scan.h - the fast path of the stream
 * decoder: a pull scanner over the bytes of one Chat Completions chunk that
 * extracts the few fields openai_decode.c reads, without building a jansson
 * tree.
 *
 * It accepts only what it can decode with certainty exactly as
 * json_loadb(data, len, 0) followed by openai_decode.c's field reads would:
 * a strict JSON object (RFC 8259 grammar, strict UTF-8 as jansson checks
 * it, exact string unescaping with surrogate pairs), every field it reads of
 * the type the decoder wants.  Anything else makes it decline, and the
 * caller takes the jansson path: an `error` member, more than one choice,
 * a duplicated member it reads, an escaped member name, a tool call with
 * `extra_content` (Gemini's thought signature), a number with an
 * exponent or too many digits, \u0000, nesting deeper than
 * OPENAI_SCAN_MAX_DEPTH, a field of an unexpected type, invalid JSON.
 *
 * Not a public API: plugin-private (hidden visibility), compiled into
 * provider-openai, its unit test and its fuzzers.  Not thread-safe (one
 * scanner per decoder).  All memory comes from malloc.
 */
#ifndef WEIR_PROVIDER_OPENAI_DELTA_SCAN_H
#define WEIR_PROVIDER_OPENAI_DELTA_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Values nested deeper than this (in skipped members) make the scan decline. */
#define OPENAI_SCAN_MAX_DEPTH 64

/**
 * A decoded string: `p` NUL-terminated valid UTF-8 without NUL bytes,
 * `len` bytes, borrowed from the scanner (valid until its next scan or
 * clear); `p` NULL when the member was absent or null.
 */
typedef struct openai_scan_str {
    const char *p;
    size_t len;
} openai_scan_str;

/** One delta.tool_calls[] entry. */
typedef struct openai_scan_call {
    bool has_index;     /* `index` was present (an integer) */
    int64_t index;      /* its value */
    openai_scan_str id; /* id, function.name, function.arguments */
    openai_scan_str name;
    openai_scan_str args;
} openai_scan_call;

/** The fields of one chunk, as openai_decode.c reads them. */
typedef struct openai_scan_delta {
    bool has_usage; /* `usage` present and not null */
    int64_t prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens;
    bool has_cached, has_reasoning; /* the details members were present */
    int64_t cache_hit_tokens;       /* DeepSeek's usage.prompt_cache_hit_tokens */
    bool has_cache_hit;             /* ... was present (not null) */
    bool has_choice;                /* choices held exactly one object */
    bool has_delta;                 /* choices[0].delta present and not null */
    openai_scan_str reasoning_content, reasoning, content;
    openai_scan_call *calls; /* borrowed from the scanner; ncalls entries */
    size_t ncalls;
    openai_scan_str finish_reason;
} openai_scan_delta;

/**
 * A scanner: its buffers are reused from one chunk to the next, so a
 * stream of small chunks allocates only while they grow.  {0} is empty.
 */
typedef struct openai_scan {
    char *buf; /* decoded strings (owned) */
    size_t buf_cap;
    openai_scan_call *calls; /* owned */
    size_t calls_cap;
    openai_scan_delta delta; /* the last accepted chunk */
} openai_scan;

/**
 * Scan one event's data (`data`, `len` bytes, borrowed; need not be
 * NUL-terminated).
 * @return true with s->delta filled (its strings borrowed from `s`), or
 *         false when the jansson path must decode this chunk (unusual or
 *         invalid input, or out of memory); s->delta is then unspecified.
 */
bool openai_scan_chunk(openai_scan *s, const char *data, size_t len);

/** Free what `s` owns and empty it.  NULL is a no-op. */
void openai_scan_clear(openai_scan *s);

#endif /* WEIR_PROVIDER_OPENAI_DELTA_SCAN_H */
