/*
 * plugins/provider-common/provider_cache.c - identity-keyed cache of
 * translated request pieces (see provider_cache.h).
 *
 * An open-addressing table (linear probing, power-of-two size, at most half
 * full).  Entries are removed all at once (a flush) or by a sweep, which
 * rebuilds the table from the entries it keeps, so there are no tombstones.
 */
#include "provider_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    json_t *key; /* a held reference; NULL = empty */
    char *text;
    size_t len;
    char tag; /* PC_CACHE_* */
} slot;

struct pc_cache {
    pthread_mutex_t mu;
    slot *slots;
    size_t cap; /* power of two, or 0 before the first put */
    size_t max_entries, max_bytes;
    bool sweep_due; /* pc_cache_release_due: sweep before the next put */
    pc_cache_stats stats;
};

pc_cache *pc_cache_new(size_t max_entries, size_t max_bytes) {
    if (max_entries == 0 || max_bytes == 0)
        return NULL;
    pc_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    return c;
}

static size_t hash(const json_t *key, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)key;
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

/* The slot of `key`, or the empty slot where it would go (cap > 0). */
static slot *probe(const pc_cache *c, const json_t *key) {
    size_t i = hash(key, c->cap);
    while (c->slots[i].key && c->slots[i].key != key)
        i = (i + 1) & (c->cap - 1);
    return &c->slots[i];
}

static void clear_slots(pc_cache *c) {
    for (size_t i = 0; i < c->cap; i++) {
        if (c->slots[i].key) {
            json_decref(c->slots[i].key);
            free(c->slots[i].text);
            c->slots[i] = (slot){0};
        }
    }
    c->stats.entries = c->stats.bytes = 0;
}

/* An entry is dead when its key reference is the last one: nobody else holds
 * the message, so nobody can present it as a key again. */
static bool dead(const slot *s) {
    return __atomic_load_n(&s->key->refcount, __ATOMIC_ACQUIRE) <= 1;
}

/* Drop the dead entries (under the mutex).  The table is rebuilt from the
 * live ones at most a quarter full (at least 64 slots), so at least as many
 * puts as it holds come before a put would grow it (and sweep) again;
 * when that table cannot be allocated the whole cache is emptied instead
 * (always safe: the cache is only a cache). */
static void sweep(pc_cache *c) {
    c->sweep_due = false;
    c->stats.sweeps++;
    size_t live = 0;
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i].key && !dead(&c->slots[i]))
            live++;
    if (live == c->stats.entries)
        return;
    size_t cap = 64;
    while ((live + 1) * 4 > cap)
        cap *= 2;
    slot *slots = calloc(cap, sizeof *slots);
    if (!slots) {
        clear_slots(c);
        return;
    }
    slot *old = c->slots;
    size_t old_cap = c->cap;
    c->slots = slots;
    c->cap = cap;
    c->stats.entries = c->stats.bytes = 0;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i].key)
            continue;
        if (dead(&old[i])) {
            json_decref(old[i].key);
            free(old[i].text);
            c->stats.swept++;
        } else {
            *probe(c, old[i].key) = old[i];
            c->stats.entries++;
            c->stats.bytes += old[i].len;
        }
    }
    free(old);
}

void pc_cache_free(pc_cache *c) {
    if (!c)
        return;
    clear_slots(c);
    free(c->slots);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int pc_cache_get(pc_cache *c, const json_t *key, char tag, pc_buf *out) {
    if (!c || !key || !out)
        return 0;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (c->cap) {
        const slot *s = probe(c, key);
        if (s->key && s->tag == tag)
            rc = pc_buf_add(out, s->text, s->len) == 0 ? 1 : -1;
    }
    if (rc == 1)
        c->stats.hits++;
    else if (rc == 0)
        c->stats.misses++;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Double the table (or make the first one).  -1 when out of memory. */
static int grow(pc_cache *c) {
    size_t cap = c->cap ? c->cap * 2 : 64;
    slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    slot *old = c->slots;
    size_t old_cap = c->cap;
    c->slots = slots;
    c->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key)
            *probe(c, old[i].key) = old[i];
    free(old);
    return 0;
}

int pc_cache_put(pc_cache *c, json_t *key, char tag, const char *text, size_t len) {
    if (!c || !key || (!text && len))
        return 0;
    if (len > c->max_bytes)
        return 0;
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    if (len)
        memcpy(copy, text, len);
    copy[len] = '\0';
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (c->cap && probe(c, key)->key) {
        free(copy); /* already cached */
    } else {
        /* Dead entries go when an agent closed, and before the table would
         * grow (amortized O(1): growing costs O(cap) as well). */
        if (c->sweep_due || (c->cap && (c->stats.entries + 1) * 2 > c->cap))
            sweep(c);
        if (c->stats.entries + 1 > c->max_entries || c->stats.bytes + len > c->max_bytes) {
            clear_slots(c);
            c->stats.flushes++;
        }
        if ((c->stats.entries + 1) * 2 > c->cap && grow(c) != 0) {
            free(copy);
            rc = -1;
        } else {
            *probe(c, key) = (slot){json_incref(key), copy, len, tag};
            c->stats.entries++;
            c->stats.bytes += len;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void pc_cache_release_due(pc_cache *c) {
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->sweep_due = true;
    pthread_mutex_unlock(&c->mu);
}

void pc_cache_sweep(pc_cache *c) {
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    sweep(c);
    pthread_mutex_unlock(&c->mu);
}

pc_cache_stats pc_cache_get_stats(pc_cache *c) {
    pc_cache_stats s = {0};
    if (!c)
        return s;
    pthread_mutex_lock(&c->mu);
    s = c->stats;
    pthread_mutex_unlock(&c->mu);
    return s;
}
