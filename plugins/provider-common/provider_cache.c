/*
 * plugins/provider-common/provider_cache.c - identity-keyed cache of
 * translated request pieces (see provider_cache.h).
 *
 * An open-addressing table (linear probing, power-of-two size, at most half
 * full).  Entries are removed all at once (a flush), by a sweep, which
 * rebuilds the table from the entries it keeps, or one by one by an agent's
 * release (backward-shift deletion), so there are no tombstones.  The agent
 * bindings are a small array (one per open agent), each with the keys its
 * owner put (identities, never dereferenced: a key may be gone, its address
 * reused; a release checks the slot's owner), so a release costs
 * O(the agent's entries), not O(table).
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
    const void *owner; /* pc_cache_set_owner's identity at the put, or NULL */
} slot;

/* An agent, the owner its puts are tagged with, and the keys put so. */
typedef struct binding {
    const void *agent, *owner;
    const json_t **keys; /* identities only */
    size_t n, cap;
    bool partial; /* a key could not be recorded: the release scans the table */
    pc_memo *memo; /* the agent's last request body, or NULL (taken, or none yet) */
} binding;

struct pc_cache {
    pthread_mutex_t mu;
    slot *slots;
    size_t cap; /* power of two, or 0 before the first put */
    size_t max_entries, max_bytes;
    bool sweep_due; /* pc_cache_release_due: sweep before the next put */
    binding *bindings;
    size_t nbindings, bindings_cap;
    pc_cache_stats stats;
};

/* The owner of this thread's puts (pc_cache_set_owner), and where its
 * binding was last found (checked before use: bindings move).  Initial-exec:
 * the provider plugins are dlopen'ed, and these 16 bytes come from the
 * static TLS that glibc keeps for such modules, read without a call to
 * __tls_get_addr.  (The dynamic model's blocks also trip GCC 12's
 * LeakSanitizer on glibc 2.36: its exit-time scan can read a garbage range
 * for them and the tracer faults; tests/scripts/check_exports.sh refuses a
 * plugin that imports __tls_get_addr.) */
#define PC_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static PC_TLS const void *current_owner;
static PC_TLS size_t current_binding;

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
    for (size_t i = 0; i < c->nbindings; i++) {
        free(c->bindings[i].keys);
        pc_memo_free(c->bindings[i].memo);
    }
    free(c->bindings);
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

/* Move every entry into a new table of `cap` slots (a power of two, more
 * than twice the entries).  -1 when out of memory (the table is unchanged). */
static int rehash(pc_cache *c, size_t cap) {
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

/* Double the table (or make the first one).  -1 when out of memory. */
static int grow(pc_cache *c) { return rehash(c, c->cap ? c->cap * 2 : 64); }

/* The binding of `owner`, or NULL. */
static binding *owner_binding(pc_cache *c, const void *owner) {
    if (!owner)
        return NULL;
    size_t i = current_binding;
    if (i >= c->nbindings || c->bindings[i].owner != owner)
        for (i = 0; i < c->nbindings && c->bindings[i].owner != owner; i++) {
        }
    if (i == c->nbindings)
        return NULL;
    current_binding = i;
    return &c->bindings[i];
}

/* Whether `key` is cached for `owner`. */
static bool owned(const pc_cache *c, const json_t *key, const void *owner) {
    if (!c->cap)
        return false;
    const slot *s = probe(c, key);
    return s->key && s->owner == owner;
}

/* Note that this thread's owner put `key`.  A full list first drops the keys
 * no longer cached for the owner (swept, flushed) and grows only when at
 * least half of it is left, so it stays within twice the owner's entries
 * (amortized O(1)).  Out of memory: the binding is partial. */
static void record(pc_cache *c, const json_t *key) {
    binding *b = owner_binding(c, current_owner);
    if (!b || b->partial)
        return;
    bool grow_list = b->cap == 0;
    if (b->n == b->cap && b->cap) {
        size_t kept = 0;
        for (size_t i = 0; i < b->n; i++)
            if (owned(c, b->keys[i], b->owner) && b->keys[i] != key)
                b->keys[kept++] = b->keys[i];
        b->n = kept;
        grow_list = kept * 2 > b->cap;
    }
    if (grow_list) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        const json_t **grown = realloc(b->keys, cap * sizeof *grown);
        if (!grown) {
            b->partial = true;
            return;
        }
        b->keys = grown;
        b->cap = cap;
    }
    b->keys[b->n++] = key;
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
            *probe(c, key) = (slot){json_incref(key), copy, len, tag, current_owner};
            c->stats.entries++;
            c->stats.bytes += len;
            record(c, key);
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

void pc_cache_set_owner(const void *owner) { current_owner = owner; }

int pc_cache_bind_agent(pc_cache *c, const void *agent, const void *owner) {
    if (!c || !agent)
        return 0;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    size_t i = 0;
    while (i < c->nbindings && c->bindings[i].agent != agent)
        i++;
    if (i == c->nbindings && c->nbindings == c->bindings_cap) {
        size_t cap = c->bindings_cap ? c->bindings_cap * 2 : 8;
        binding *grown = realloc(c->bindings, cap * sizeof *grown);
        if (grown) {
            c->bindings = grown;
            c->bindings_cap = cap;
        } else {
            rc = -1;
        }
    }
    if (rc == 0 && i < c->nbindings) {
        /* a rebind: keys put under the old owner go with the sweeps */
        c->bindings[i].owner = owner;
        c->bindings[i].n = 0;
        c->bindings[i].partial = true;
        pc_memo_free(c->bindings[i].memo);
        c->bindings[i].memo = NULL;
    } else if (rc == 0) {
        c->bindings[c->nbindings++] = (binding){agent, owner, NULL, 0, 0, false, NULL};
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Empty slot `i` and close the gap: each later entry of its probe run that
 * may move moves back (backward-shift deletion), so probes stay correct
 * without tombstones.  Entries move only within the run that follows `i`,
 * into `i` or a later hole of it: a scan upwards that checks `i` again
 * misses none (a run that wraps to the start moves entries the scan has
 * checked already). */
static void remove_at(pc_cache *c, size_t i) {
    json_decref(c->slots[i].key);
    free(c->slots[i].text);
    c->stats.entries--;
    c->stats.bytes -= c->slots[i].len;
    size_t mask = c->cap - 1;
    for (size_t j = (i + 1) & mask; c->slots[j].key; j = (j + 1) & mask) {
        size_t home = hash(c->slots[j].key, c->cap);
        /* the entry at j may fill the hole at i unless its home lies in (i, j] */
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            c->slots[i] = c->slots[j];
            i = j;
        }
    }
    c->slots[i] = (slot){0};
}

void pc_cache_release_agent(pc_cache *c, const void *agent) {
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->sweep_due = true;
    size_t b = 0;
    while (agent && b < c->nbindings && c->bindings[b].agent != agent)
        b++;
    if (agent && b < c->nbindings) {
        binding gone = c->bindings[b];
        c->bindings[b] = c->bindings[--c->nbindings];
        pc_memo_free(gone.memo); /* its references first: the entries are then dead */
        if (gone.partial) {
            for (size_t i = 0; gone.owner && i < c->cap; i++) {
                while (c->slots[i].key && c->slots[i].owner == gone.owner) {
                    remove_at(c, i);
                    c->stats.released++;
                }
            }
        } else {
            for (size_t k = 0; k < gone.n; k++) {
                if (!owned(c, gone.keys[k], gone.owner))
                    continue; /* swept or flushed since, or listed twice */
                remove_at(c, (size_t)(probe(c, gone.keys[k]) - c->slots));
                c->stats.released++;
            }
        }
        free(gone.keys);
        /* a table the closed agents left mostly empty shrinks (to at most
         * a quarter full, as a sweep leaves it); out of memory: it stays */
        size_t cap = 64;
        while ((c->stats.entries + 1) * 4 > cap)
            cap *= 2;
        if (c->cap > cap * 2)
            (void)rehash(c, cap);
    }
    if (c->nbindings == 0) {
        free(c->bindings);
        c->bindings = NULL;
        c->bindings_cap = 0;
    }
    pthread_mutex_unlock(&c->mu);
}

pc_memo *pc_cache_memo_take(pc_cache *c) {
    pc_memo *m = NULL;
    if (c && current_owner) {
        pthread_mutex_lock(&c->mu);
        binding *b = owner_binding(c, current_owner);
        if (b) {
            m = b->memo;
            b->memo = NULL;
        }
        pthread_mutex_unlock(&c->mu);
    }
    if (!m && (m = calloc(1, sizeof *m)) != NULL)
        m->owner = current_owner;
    return m;
}

void pc_cache_memo_give(pc_cache *c, pc_memo *m) {
    if (!m)
        return;
    if (c && m->owner) {
        pthread_mutex_lock(&c->mu);
        binding *b = owner_binding(c, m->owner);
        if (b && !b->memo) {
            b->memo = m;
            m = NULL;
        }
        pthread_mutex_unlock(&c->mu);
    }
    pc_memo_free(m);
}

/* Drop the references of keys[from..n). */
static void memo_cut(pc_memo *m, size_t from) {
    for (size_t i = from; i < m->n; i++)
        json_decref(m->at[i].key);
    m->n = from;
}

void pc_memo_free(pc_memo *m) {
    if (!m)
        return;
    memo_cut(m, 0);
    free(m->at);
    free(m->text.p);
    free(m->side.p);
    free(m);
}

void pc_memo_reset(pc_memo *m) { pc_memo_keep(m, 0, 0, 0); }

int pc_memo_fail(pc_memo *m, char *msg, size_t size) {
    if (msg && size && !msg[0])
        PC_OOM(msg, size);
    pc_memo_reset(m);
    return -1;
}

size_t pc_memo_common(const pc_memo *m, const json_t *keys) {
    size_t count = json_array_size(keys), k = 0;
    while (m && k < m->n && k < count && m->at[k].key == json_array_get(keys, k))
        k++;
    return k;
}

/* Cut `b` to `len` bytes (at most its own), keeping the NUL after them. */
static void cut_text(pc_buf *b, size_t len) {
    if (len < b->len)
        b->len = len;
    if (b->p)
        b->p[b->len] = '\0';
}

void pc_memo_keep(pc_memo *m, size_t k, size_t text_len, size_t side_len) {
    if (!m)
        return;
    memo_cut(m, k < m->n ? k : m->n);
    cut_text(&m->text, text_len);
    cut_text(&m->side, side_len);
}

size_t pc_memo_keep_prefix(pc_memo *m, const json_t *keys) {
    size_t k = pc_memo_common(m, keys);
    pc_memo_keep(m, k, k ? m->at[k - 1].end : 0, 0);
    return k;
}

int pc_memo_push(pc_memo *m, json_t *key) {
    return m ? pc_memo_push_at(m, key, m->text.len, m->side.len) : -1;
}

int pc_memo_push_at(pc_memo *m, json_t *key, size_t end, size_t side) {
    if (!m || !key)
        return -1;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        pc_memo_entry *at = realloc(m->at, cap * sizeof *at);
        if (!at)
            return -1;
        m->at = at;
        m->cap = cap;
    }
    m->at[m->n++] = (pc_memo_entry){json_incref(key), end, side};
    return 0;
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
