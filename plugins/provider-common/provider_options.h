/*
 * plugins/provider-common/provider_options.h - provider options: the
 * `options` of a provider row, of its `models.<id>` entries and of the call
 * config (the agent/request result), merged into the request body last, and
 * the per-model rules of the model table that a request must keep
 * (docs/providers.md, "Options" and "Per-model rules").
 *
 * Not a plugin: each HTTP provider lists provider_options.c (and
 * model_table.c, which it reads) among its own sources; unit tests and
 * fuzzers compile it next to a provider's request file.  Pure: nothing here
 * touches the host API table.  All memory comes from malloc and jansson.
 */
#ifndef WEIR_PROVIDER_OPTIONS_H
#define WEIR_PROVIDER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "model_table.h"

/**
 * Prompt caching of provider-anthropic (`cache` of a row and of
 * models.<id>): 0 is the default, on with the 5-minute TTL.
 */
typedef enum pc_prompt_cache {
    PC_PROMPT_CACHE_5M = 0, /* cache_control {"type":"ephemeral"} (5 minutes) */
    PC_PROMPT_CACHE_1H,     /* cache_control {"type":"ephemeral","ttl":"1h"} */
    PC_PROMPT_CACHE_OFF,    /* no cache_control at all (`cache: false`) */
} pc_prompt_cache;

/**
 * What a request builder takes besides the frozen request, and what it
 * reports back.  {0} is "the request alone": its own `options` member, and
 * caching on (5 minutes) where the provider caches.
 * Not thread-safe (one per build).
 */
typedef struct pc_extra {
    /* in: the merged options (row, then models.<id>, then the call config;
     * borrowed), or NULL for the request's own "options" member */
    const json_t *options;
    /* out: the model's rule kept the call config's temperature out of the
     * body (the caller warns, once per row and model) */
    bool dropped_temperature;
    /* in: prompt caching (provider-anthropic; the others ignore it) */
    pc_prompt_cache cache;
    /* out: reasoning blocks whose continuation lacked the data the provider
     * needs (skipped; the caller says so once) */
    size_t skipped_continuations;
} pc_extra;

/**
 * Merge `over` onto `base` as a JSON Merge Patch (RFC 7396): members of
 * `over` replace those of `base`, objects merge member by member, and a null
 * member removes the key (from the merge and, for a key the provider writes
 * itself, such as max_tokens or temperature, from the body).  Either may be
 * NULL (nothing).  Neither is changed.
 * @return a new object (empty when both are NULL), or NULL when out of
 *         memory or when `base` or `over` is not an object.
 * Thread-safe (pure).
 */
json_t *pc_options_merge(const json_t *base, const json_t *over);

/**
 * Check options (borrowed; NULL is none): an object none of whose keys is
 * one of `owned` (NULL-terminated, static: the members the provider writes
 * itself), and whose `thinking`, when `model` (borrowed, may be NULL) has a
 * table entry, is a mode the model takes (pc_thinking_refusal).  `where`
 * names the options in the message ("options",
 * "config.models.gpt-5.options").
 * @return 0, or -1 with `msg` set: "<where>.<key>: ..." naming the key and,
 *         for a thinking mode, the model and the rule.
 * Thread-safe (pure).
 */
int pc_options_check(const json_t *options, const char *const *owned, const char *model,
                     const char *where, char *msg, size_t size);

/*
 * Append ,"key":value to the request body `out` for each member of the
 * merged `opts` (borrowed) that is not null (a null drops what the
 * provider would write).  0, or -1 with `msg` saying why (out of memory).
 */
struct pc_buf;
int pc_options_append(struct pc_buf *out, const json_t *opts, char *msg, size_t size);

#endif /* WEIR_PROVIDER_OPTIONS_H */
