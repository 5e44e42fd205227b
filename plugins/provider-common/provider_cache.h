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
 * pc_cache_release_due.
 *
 * Owners: a put is tagged with the owner its thread last named with
 * pc_cache_set_owner (the providers name the agent's cancellation signal in
 * prepare_call, which runs on the driver's thread before the request is
 * built).  pc_cache_bind_agent ties an agent to its owner (agent/created:
 * its call carries both), and pc_cache_release_agent drops every entry of
 * that owner at once (agent/disposed), so a closed agent's messages are
 * freed with its history, while the process goes on or sits idle (issue
 * #15: a closed agent releases everything it held, its cache entries
 * included).  A tag is only ever a reason to drop an entry early, never to
 * serve one: a wrong tag (a stale owner, a reused address) costs a miss,
 * never a wrong request.  What no tag covers (a put between binds, a
 * compaction call with a signal of its own) goes with the sweep that the
 * release also asks for.
 *
 * Memo: a bound agent also keeps its last request body (pc_memo), so the
 * next request copies only what is new in its history.
 *
 * Pure (no host API), thread-safe (one mutex; the critical sections are a
 * probe and a memcpy, or an agent's entries at its release; the owner is
 * thread-local).  Memory from malloc: per open agent a binding, the list
 * of its keys (at most about twice its entries) and its memo.
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
    size_t released;       /* entries dropped by pc_cache_release_agent */
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
 * A conversation's last request body and the messages it was built from, so
 * that the next request of the same conversation copies nothing of the
 * history the two share.  Between steps a history only grows, or a policy
 * rewrites part of it (compaction): the next body starts with the longest
 * prefix of the very same message objects (compared by identity, safe
 * because the memo holds a reference to each), whose text is already in
 * place, and only the messages after it are added (issue #15: the cost of a
 * step stays flat in the history's length).
 *
 * A memo is owned by one request at a time: pc_cache_memo_take hands the
 * owner's (pc_cache_set_owner) memo to the caller, who builds the body in
 * `text`, sends it and gives the memo back (pc_cache_memo_give).  Memory: the
 * last body, and two words per message, per bound agent (released with the
 * agent: pc_cache_release_agent).
 */
typedef struct pc_memo_entry {
    json_t *key; /* a message of the body, a reference held */
    size_t end;  /* a text length this message fixes (pc_memo_push: text.len just
                    after its text; a provider may keep another, PC_MEMO_NONE) */
    size_t side; /* side.len when it was pushed */
} pc_memo_entry;

/* An entry's `end` that is no place to resume at (pc_memo_push_at). */
#define PC_MEMO_NONE ((size_t)-1)

typedef struct pc_memo {
    pc_buf text;           /* the body; its first at[n - 1].end bytes stay valid */
    pc_buf side;           /* a second text the provider keeps beside it (anthropic:
                              the system prompt the messages gave) */
    pc_memo_entry *at;     /* the messages it was built from, in order */
    size_t n, cap;
    const void *owner;     /* pc_cache_set_owner's identity at the take */
} pc_memo;

/**
 * The memo of this thread's owner, taken out of `c` (a later take finds
 * none until it is given back), or a new, empty one when the owner has
 * none (or `c` is NULL, or the thread has no owner).
 * @return owned by the caller (pc_cache_memo_give or pc_memo_free), or
 *         NULL when out of memory.
 */
pc_memo *pc_cache_memo_take(pc_cache *c);

/**
 * Give `m` (taken with pc_cache_memo_take; ownership passes) back: kept for
 * its owner's bound agent, else freed (no agent bound to that owner, the
 * agent released since the take, or `c` NULL).  NULL `m` is a no-op.
 */
void pc_cache_memo_give(pc_cache *c, pc_memo *m);

/** Free `m`: its texts and its message references.  NULL is a no-op. */
void pc_memo_free(pc_memo *m);

/** How many of the messages of array `keys`, from the first, `m` was built
 * from (the same objects, in order). */
size_t pc_memo_common(const pc_memo *m, const json_t *keys);

/**
 * Keep the first `k` (<= m->n) messages and forget the others; cut `text`
 * to `text_len` and `side` to `side_len` (each at most its length).
 */
void pc_memo_keep(pc_memo *m, size_t k, size_t text_len, size_t side_len);

/**
 * Keep the longest prefix of the messages of array `keys` that `m` was built
 * from: `text` is cut just after the last of them (to empty when none; their
 * `end`s are text lengths after them, pc_memo_push), `side` to empty, and
 * the others are forgotten.  @return how many were kept.
 */
size_t pc_memo_keep_prefix(pc_memo *m, const json_t *keys);

/**
 * Note that the text of message `key` (a reference is taken) ends at
 * `m->text.len` now (pc_memo_push_at(m, key, m->text.len, m->side.len)).
 * @return 0, or -1 when out of memory (`m` unchanged).
 */
int pc_memo_push(pc_memo *m, json_t *key);

/** Note message `key` (a reference is taken) with `end` and `side` as its
 * entry's.  @return 0, or -1 when out of memory (`m` unchanged). */
int pc_memo_push_at(pc_memo *m, json_t *key, size_t end, size_t side);

/** A build into `m` failed: `msg` says why ("out of memory" when it is
 * still empty) and `m` is reset.  @return -1. */
int pc_memo_fail(pc_memo *m, char *msg, size_t size);

/** Forget everything but the allocations of the texts (after a failed build). */
void pc_memo_reset(pc_memo *m);

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

/**
 * Tag the puts this thread makes from now on with `owner` (an identity,
 * never dereferenced; NULL: untagged), in every cache of this plugin.
 * Thread-local; no allocation.
 */
void pc_cache_set_owner(const void *owner);

/**
 * Remember that `agent`'s puts are tagged `owner` (both identities, never
 * dereferenced; a later bind of the same agent replaces it).  @return 0, or
 * -1 when out of memory (the agent then has no binding: its entries go with
 * the sweeps).  `c` or `agent` NULL does nothing and returns 0.
 * Thread-safe.
 */
int pc_cache_bind_agent(pc_cache *c, const void *agent, const void *owner);

/**
 * `agent` is being disposed: drop every entry tagged with its owner now (the
 * key references the cache held go; the messages go with the agent's
 * history), forget the binding, and ask for a sweep before the next put (as
 * pc_cache_release_due).  O(table) when the agent was bound.  NULL `c` is a
 * no-op.  Thread-safe.
 */
void pc_cache_release_agent(pc_cache *c, const void *agent);

/** Drop the dead entries now (O(entries)).  NULL is a no-op.  Thread-safe. */
void pc_cache_sweep(pc_cache *c);

/** The counters (zeros for NULL). */
pc_cache_stats pc_cache_get_stats(pc_cache *c);

#endif /* WEIR_PROVIDER_CACHE_H */
