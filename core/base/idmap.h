/*
 * core/base/idmap.h - a hash index from strings (plugin row ids, plugin names,
 * hook listener ids) to a pointer and a number.  Owner: core/base/idmap.c.
 *
 * Loading a deployment looks names up once per row; a list searched per row
 * makes loading quadratic in the rows (issue #8, item 10d), so config
 * composition, the host and the hook ordering look them up here instead:
 * O(1) expected per lookup, insertion and removal.
 *
 * Keys are borrowed: a key must stay valid and unchanged while it is in the
 * map (use a string the value owns).  Not thread-safe while it changes; a map
 * that no longer changes may be read from any number of threads.
 */
#ifndef WEIR_CORE_IDMAP_H
#define WEIR_CORE_IDMAP_H

#include "common.h"

typedef struct weir__idmap_slot {
    const char *key; /* borrowed; NULL = an empty slot */
    size_t hash;
    void *ptr;  /* the caller's, never dereferenced */
    size_t num; /* the caller's */
} weir__idmap_slot;

typedef struct weir__idmap {
    weir__idmap_slot *slots; /* cap slots, cap a power of two (or 0) */
    size_t n, cap;
} weir__idmap;

#define WEIR__IDMAP_INIT {NULL, 0, 0}

/* Free the slots (not the keys or values); the map is empty and usable again.
 * NULL is a no-op. */
void weir__idmap_free(weir__idmap *m);

/* The entry of `key` (borrowed, valid until the map next changes), or NULL. */
const weir__idmap_slot *weir__idmap_get(const weir__idmap *m, const char *key);

/*
 * Map `key` (borrowed) to `ptr` and `num`, replacing an existing entry's
 * values (the stored key pointer then stays the first one).  WEIR_OK, or
 * WEIR_E_NOMEM with the map unchanged.
 */
int weir__idmap_put(weir__idmap *m, const char *key, void *ptr, size_t num);

/* Remove `key`; false when it was not there. */
bool weir__idmap_del(weir__idmap *m, const char *key);

#endif
