/*
 * core/base/alloc.c - allocation wrappers with failure injection for tests, and
 * jansson's allocator (weir__json_loadb).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static atomic_long fail_at = -1; /* allocation number that starts failing */
static atomic_bool fail_once;      /* only that one fails */
static atomic_long counter = 0;

/* Whether this allocation is to fail.  A jansson allocation outside
 * weir's parses never fails only once: jansson's own functions report a
 * failure, but its parser may then write past its buffer (see below). */
static bool should_fail(bool jansson, bool parsing) {
    long at = atomic_load(&fail_at);
    long n = atomic_fetch_add(&counter, 1) + 1;
    if (at <= 0)
        return false;
    if (!atomic_load(&fail_once))
        return n >= at;
    return n == at && (!jansson || parsing);
}

void *weir__malloc(size_t n) {
    if (should_fail(false, false))
        return NULL;
    return malloc(n ? n : 1);
}

void *weir__calloc(size_t count, size_t n) {
    if (should_fail(false, false))
        return NULL;
    return calloc(count ? count : 1, n ? n : 1);
}

void *weir__realloc(void *p, size_t n) {
    if (should_fail(false, false))
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

/*
 * jansson's parser does not check every allocation: when its token buffer
 * cannot grow it goes on with what it has, so json_loadb can return a value
 * whose strings lost bytes (or read and write past that buffer).  Nothing
 * can make such a parse safe; what weir can do is never believe one.  Its
 * allocator for jansson counts the allocations that failed on this thread,
 * and a parse during which the count moved is thrown away
 * (weir__json_parse_end).  It is installed when libweir loads, unless the
 * host gave jansson allocators of its own (then those stay, and this check
 * goes with them).  Under failure injection an allocation that is to fail
 * inside weir's parse is counted as failed but made, so tests can fail a
 * parse without running jansson's parser out of memory.
 */
static _Thread_local unsigned long json_failures;
static _Thread_local int parsing; /* inside weir__json_parse_begin/end */

static void *json_alloc(size_t n) {
    if (atomic_load(&fail_at) > 0 && should_fail(true, parsing > 0)) {
        json_failures++;
        return parsing > 0 ? malloc(n) : NULL;
    }
    void *p = malloc(n);
    if (!p)
        json_failures++;
    return p;
}

__attribute__((constructor)) static void json_guard(void) {
    json_malloc_t m;
    json_free_t f;
    json_get_alloc_funcs(&m, &f);
    if (m == malloc && f == free)
        json_set_alloc_funcs(json_alloc, free);
}

/* A host that unloads libweir keeps a jansson that works. */
__attribute__((destructor)) static void json_unguard(void) {
    json_malloc_t m;
    json_free_t f;
    json_get_alloc_funcs(&m, &f);
    if (m == json_alloc)
        json_set_alloc_funcs(malloc, free);
}

unsigned long weir__json_parse_begin(void) {
    parsing++;
    return json_failures;
}

bool weir__json_parse_end(unsigned long mark) {
    parsing--;
    return json_failures == mark;
}

json_t *weir__json_loadb(const char *buf, size_t len, size_t flags, json_error_t *jerr) {
    json_error_t local;
    if (!jerr)
        jerr = &local;
    /* jansson leaves both alone when it fails before it starts (its buffer) */
    jerr->text[0] = '\0';
    jerr->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)json_error_unknown;
    unsigned long mark = weir__json_parse_begin();
    json_t *v = json_loadb(buf, len, flags, jerr);
    bool whole = weir__json_parse_end(mark);
    if (!whole || (!v && jerr->text[0] == '\0')) { /* NULL or not, memory ran out */
        json_decref(v);
        v = NULL;
        snprintf(jerr->text, sizeof jerr->text, "out of memory");
        jerr->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)json_error_out_of_memory;
    }
    return v;
}

json_t *weir__json_loads(const char *text, size_t flags, json_error_t *jerr) {
    return weir__json_loadb(text, text ? strlen(text) : 0, flags, jerr);
}

static json_malloc_t saved_malloc; /* jansson's allocators before injection */
static json_free_t saved_free;
static bool armed;

static long arm(long n, bool once) {
    long seen = atomic_exchange(&counter, 0);
    atomic_store(&fail_once, once);
    atomic_store(&fail_at, n > 0 ? n : -1);
    if (n > 0 && !armed) {
        json_get_alloc_funcs(&saved_malloc, &saved_free);
        json_set_alloc_funcs(json_alloc, free);
        armed = true;
    } else if (n <= 0 && armed) {
        json_set_alloc_funcs(saved_malloc, saved_free);
        armed = false;
    }
    return seen;
}

long weir__alloc_fail_after(long n) { return arm(n, false); }

long weir__alloc_fail_only(long n) { return arm(n, true); }
