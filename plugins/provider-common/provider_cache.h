/*
 * plugins/provider-common/provider_cache.h - a provider's cache of request
 * pieces already translated and serialized, keyed by the identity of the
 * canonical JSON they came from.
 *
 * Why: the host hands providers the derived history as shared, read-only
 * message objects that keep their identity from step to step (docs/session-log.md,
 * weir_api->derive), so a message translated for step N is the very object
 * of step N+1.  Caching its wire text makes building a request O(new
 * messages) instead of O(history): the history is only copied, never
 * translated or serialized again.
 *
 * Identity is safe as a key because an entry holds a reference to its key:
 * the object cannot be freed, so its address cannot be reused, while the
 * entry lives.  The contract it relies on is the host's: a message handed
 * out by the host is never modified in place (a hook that wants another
 * message makes a new object, which is a new key).
 *
 * Bounds: at most `max_entries` entries and `max_bytes` bytes of text; when
 * a put would pass either, the whole cache is emptied first (simple, O(1)
 * amortized, and a working set that fits never thrashes).  Emptying drops
 * the references, so compacted-away messages are not pinned for long.
 *
 * Release: an entry whose key reference is the last one is dead (nobody
 * else holds the message, so nobody can ask for it again).  A sweep drops
 * the dead entries: before the table would grow (so it holds at most about
 * twice the live entries, O(1) amortized) and on the first put after
 * pc_cache_release_due, which the providers call when an agent is disposed
 * (agent/disposed): a closed agent's messages are freed with its history,
 * and its entries with the next request of any agent (issue #15: memory
 * stays flat in the number of sessions a process has run).
 *
 * Pure (no host API), thread-safe (one mutex; the critical sections are a
 * probe and a memcpy).  Memory from malloc.
 */
#ifndef WEIR_PROVIDER_CACHE_H
#define WEIR_PROVIDER_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "provider_common.h"

typedef struct pc_cache pc_cache;

/* What an entry's text is: one key may serve as only one of them (a request
 * whose messages array holds its own tools array must not read the tools'
 * text as a message's). */
#define PC_CACHE_MESSAGE 'm'
#define PC_CACHE_TOOLS 't'

/** Counters, for tests and benchmarks. */
typedef struct pc_cache_stats {
    size_t entries, bytes; /* now */
    size_t hits, misses;   /* since creation */
    size_t flushes;        /* times the bounds emptied it */
    size_t sweeps, swept;  /* sweeps run, dead entries they dropped */
} pc_cache_stats;

/**
 * A new, empty cache bounded by `max_entries` (> 0) and `max_bytes` (> 0).
 * @return owned by the caller (pc_cache_free), or NULL when out of memory
 *         or a bound is 0.
 */
pc_cache *pc_cache_new(size_t max_entries, size_t max_bytes);

/** Free the cache and drop every key reference.  NULL is a no-op. */
void pc_cache_free(pc_cache *c);

/**
 * Append the text cached for `key` (compared by identity) as `tag`
 * (PC_CACHE_*) to `out`.
 * @return 1 when it was cached and appended, 0 when it is not cached as
 *         `tag` (`out` unchanged), -1 when out of memory while appending
 *         (`out` may hold part of it).  `c` NULL is a miss.
 */
int pc_cache_get(pc_cache *c, const json_t *key, char tag, pc_buf *out);

/**
 * Cache `len` bytes of `text` (copied) for `key` (a reference is taken) as
 * `tag`.  A key already cached keeps its first text and tag.  A text larger than the byte
 * bound is not cached.  @return 0, or -1 when out of memory (the cache is
 * unchanged).  `c` NULL does nothing and returns 0.
 */
int pc_cache_put(pc_cache *c, json_t *key, char tag, const char *text, size_t len);

/**
 * Ask for a sweep before the next put (cheap: a flag; an agent was disposed,
 * its history is about to be freed).  NULL is a no-op.  Thread-safe.
 */
void pc_cache_release_due(pc_cache *c);

/** Drop the dead entries now (O(entries)).  NULL is a no-op.  Thread-safe. */
void pc_cache_sweep(pc_cache *c);

/** The counters (zeros for NULL). */
pc_cache_stats pc_cache_get_stats(pc_cache *c);

#endif /* WEIR_PROVIDER_CACHE_H */
