/*
 * core/base/util.c - clocks, ids and small JSON helpers shared by core files.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

int64_t weir__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t weir__mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The fake clock: off, or its current virtual time. */
static atomic_bool clock_fake;
static _Atomic uint64_t clock_fake_ms;

uint64_t weir__clock_ms(void) {
    if (atomic_load(&clock_fake))
        return atomic_load(&clock_fake_ms);
    return weir__mono_us() / 1000u;
}

void weir__clock_fake(uint64_t start_ms) {
    atomic_store(&clock_fake_ms, start_ms);
    atomic_store(&clock_fake, true);
}

void weir__clock_advance(uint64_t ms) { atomic_fetch_add(&clock_fake_ms, ms); }

void weir__clock_real(void) { atomic_store(&clock_fake, false); }

bool weir__clock_is_fake(void) { return atomic_load(&clock_fake); }

char *weir__random_id(char *buf, size_t size, const char *prefix) {
    unsigned char raw[8];
    /* one system call, no file descriptor (an id a turn: issue #15) */
    if (getrandom(raw, sizeof raw, GRND_NONBLOCK) != (ssize_t)sizeof raw) {
        static _Atomic uint64_t n; /* fall back to time, pid and a counter */
        uint64_t x = weir__mono_us() ^ ((uint64_t)getpid() << 32) ^ (atomic_fetch_add(&n, 1) << 48);
        memcpy(raw, &x, sizeof raw);
    }
    /* "<prefix>-<16 hex digits>", cut to `size` as snprintf would (without
     * its format parsing: a few thousand instructions an id) */
    static const char digits[] = "0123456789abcdef";
    char hex[2 * sizeof raw];
    for (size_t i = 0; i < sizeof raw; i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 15];
    }
    if (size == 0)
        return buf;
    size_t o = 0;
    for (const char *p = prefix ? prefix : ""; *p && o + 1 < size; p++)
        buf[o++] = *p;
    if (prefix && *prefix && o + 1 < size)
        buf[o++] = '-';
    for (size_t i = 0; i < sizeof hex && o + 1 < size; i++)
        buf[o++] = hex[i];
    buf[o] = '\0';
    return buf;
}

typedef struct dump_buf {
    char *s;
    size_t len, cap;
} dump_buf;

static int dump_grow(const char *buf, size_t size, void *ud) {
    dump_buf *d = ud;
    if (size >= d->cap - d->len) {
        size_t cap = d->cap;
        while (size >= cap - d->len)
            cap *= 2;
        char *grown = weir__realloc(d->s, cap);
        if (!grown)
            return -1;
        d->s = grown;
        d->cap = cap;
    }
    memcpy(d->s + d->len, buf, size);
    d->len += size;
    return 0;
}

char *weir__json_dump(const json_t *v) {
    if (!v)
        return NULL;
    dump_buf d = {weir__malloc(256), 0, 256};
    if (!d.s || weir__json_write(v, dump_grow, &d) != 0) {
        free(d.s);
        return NULL;
    }
    d.s[d.len] = '\0';
    return d.s;
}

static bool sole_at(const json_t *v, int depth) {
    if (!json_is_object(v) && !json_is_array(v))
        return true; /* scalars: never changed in place once built (see common.h) */
    if (v->refcount != 1 || depth > 64)
        return false;
    if (json_is_object(v)) {
        for (void *it = json_object_iter((json_t *)(uintptr_t)v); it;
             it = json_object_iter_next((json_t *)(uintptr_t)v, it))
            if (!sole_at(json_object_iter_value(it), depth + 1))
                return false;
    } else if (json_is_array(v)) {
        for (size_t i = 0, n = json_array_size(v); i < n; i++)
            if (!sole_at(json_array_get(v, i), depth + 1))
                return false;
    }
    return true;
}

bool weir__json_sole(const json_t *v) { return v && sole_at(v, 0); }

json_t *weir__json_copy_tree(const json_t *v) {
    if (!v)
        return NULL;
    if (!json_is_object(v) && !json_is_array(v))
        return json_incref((json_t *)(uintptr_t)v);
    json_t *out = json_is_object(v) ? json_object() : json_array();
    if (json_is_object(v)) {
        for (void *it = json_object_iter((json_t *)(uintptr_t)v); out && it;
             it = json_object_iter_next((json_t *)(uintptr_t)v, it))
            if (json_object_set_new(out, json_object_iter_key(it),
                                    weir__json_copy_tree(json_object_iter_value(it))) != 0) {
                json_decref(out);
                out = NULL;
            }
    } else {
        for (size_t i = 0, n = json_array_size(v); out && i < n; i++)
            if (json_array_append_new(out, weir__json_copy_tree(json_array_get(v, i))) != 0) {
                json_decref(out);
                out = NULL;
            }
    }
    return out;
}

bool weir__json_equal(const json_t *a, const json_t *b) {
    if (!a || !b)
        return a == b;
    return json_equal(a, b) != 0;
}

const char *weir__json_str(const json_t *obj, const char *key, const char *dflt) {
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : dflt;
}

json_int_t weir__json_int(const json_t *obj, const char *key, json_int_t dflt) {
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}
