/*
 * core/alloc.c - allocation wrappers with failure injection for tests.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static atomic_long fail_at = -1; /* allocation number that starts failing */
static atomic_long counter = 0;

static bool should_fail(void) {
    long at = atomic_load(&fail_at);
    long n = atomic_fetch_add(&counter, 1) + 1;
    return at > 0 && n >= at;
}

void *weir__malloc(size_t n) {
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *weir__calloc(size_t count, size_t n) {
    if (should_fail())
        return NULL;
    return calloc(count ? count : 1, n ? n : 1);
}

void *weir__realloc(void *p, size_t n) {
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void weir__free(void *p) { free(p); }

char *weir__strndup(const char *s, size_t n) {
    if (!s)
        return NULL;
    size_t len = strnlen(s, n);
    char *d = weir__malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *weir__strdup(const char *s) { return s ? weir__strndup(s, strlen(s)) : NULL; }

char *weir__vasprintf(const char *fmt, va_list ap) {
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(NULL, 0, fmt, cp);
    va_end(cp);
    if (n < 0)
        return NULL;
    char *s = weir__malloc((size_t)n + 1);
    if (!s)
        return NULL;
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *weir__asprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = weir__vasprintf(fmt, ap);
    va_end(ap);
    return s;
}

static void *json_alloc(size_t n) { return weir__malloc(n); }

long weir__alloc_fail_after(long n) {
    long seen = atomic_exchange(&counter, 0);
    atomic_store(&fail_at, n > 0 ? n : -1);
    if (n > 0)
        json_set_alloc_funcs(json_alloc, free);
    else
        json_set_alloc_funcs(malloc, free);
    return seen;
}
