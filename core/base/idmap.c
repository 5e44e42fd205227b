/*
 * core/base/idmap.c - the string hash index (see idmap.h): open addressing with
 * linear probing, at most half full, FNV-1a hashes, and removal by shifting
 * the following entries back (no tombstones).
 */
#include <string.h>

#include "idmap.h"

#define MIN_CAP 16

static size_t hash_of(const char *s) {
    uint64_t h = 14695981039346656037ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    return (size_t)h;
}

/* The slot holding `key`, or the empty slot where it would go. */
static size_t probe(const weir__idmap *m, const char *key, size_t hash) {
    size_t mask = m->cap - 1, i = hash & mask;
    while (m->slots[i].key &&
           (m->slots[i].hash != hash || strcmp(m->slots[i].key, key) != 0))
        i = (i + 1) & mask;
    return i;
}

static int grow(weir__idmap *m) {
    size_t cap = m->cap ? m->cap * 2 : MIN_CAP;
    weir__idmap_slot *slots = weir__calloc(cap, sizeof *slots);
    if (!slots)
        return WEIR_E_NOMEM;
    weir__idmap bigger = {slots, m->n, cap};
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            slots[probe(&bigger, m->slots[i].key, m->slots[i].hash)] = m->slots[i];
    weir__free(m->slots);
    *m = bigger;
    return WEIR_OK;
}

void weir__idmap_free(weir__idmap *m) {
    if (!m)
        return;
    weir__free(m->slots);
    *m = (weir__idmap)WEIR__IDMAP_INIT;
}

const weir__idmap_slot *weir__idmap_get(const weir__idmap *m, const char *key) {
    if (!m || !key || m->n == 0)
        return NULL;
    const weir__idmap_slot *s = &m->slots[probe(m, key, hash_of(key))];
    return s->key ? s : NULL;
}

int weir__idmap_put(weir__idmap *m, const char *key, void *ptr, size_t num) {
    if (!m || !key)
        return WEIR_E_INVAL;
    size_t hash = hash_of(key);
    if (m->cap) {
        weir__idmap_slot *s = &m->slots[probe(m, key, hash)];
        if (s->key) {
            s->ptr = ptr;
            s->num = num;
            return WEIR_OK;
        }
    }
    if ((m->n + 1) * 2 > m->cap && grow(m) != WEIR_OK)
        return WEIR_E_NOMEM;
    m->slots[probe(m, key, hash)] = (weir__idmap_slot){key, hash, ptr, num};
    m->n++;
    return WEIR_OK;
}

bool weir__idmap_del(weir__idmap *m, const char *key) {
    if (!m || !key || m->n == 0)
        return false;
    size_t mask = m->cap - 1, i = probe(m, key, hash_of(key));
    if (!m->slots[i].key)
        return false;
    /* shift back each following entry that may not stay behind the hole */
    for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (weir__idmap_slot){0};
    m->n--;
    return true;
}
