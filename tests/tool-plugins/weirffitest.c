/*
 * tests/tool-plugins/weirffitest.c - libweirffitest.so: small C functions,
 * one per type tools-ffi supports, for tests/unit/test_tools_ffi.c.  Each
 * t_<type> returns its argument unchanged so range edges can be checked.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#define IDENTITY(name, type) \
    EXPORT type name(type v); \
    EXPORT type name(type v) { return v; }

IDENTITY(t_bool, bool)
IDENTITY(t_char, char)
IDENTITY(t_schar, signed char)
IDENTITY(t_uchar, unsigned char)
IDENTITY(t_short, short)
IDENTITY(t_ushort, unsigned short)
IDENTITY(t_int, int)
IDENTITY(t_uint, unsigned int)
IDENTITY(t_long, long)
IDENTITY(t_ulong, unsigned long)
IDENTITY(t_llong, long long)
IDENTITY(t_ullong, unsigned long long)
IDENTITY(t_size, size_t)
IDENTITY(t_ssize, ssize_t)
IDENTITY(t_i8, int8_t)
IDENTITY(t_i16, int16_t)
IDENTITY(t_i32, int32_t)
IDENTITY(t_i64, int64_t)
IDENTITY(t_u8, uint8_t)
IDENTITY(t_u16, uint16_t)
IDENTITY(t_u32, uint32_t)
IDENTITY(t_u64, uint64_t)
IDENTITY(t_float, float)
IDENTITY(t_double, double)

EXPORT uint64_t t_u64_max(void);
EXPORT uint64_t t_u64_max(void) { return UINT64_MAX; }

EXPORT bool t_not(bool v);
EXPORT bool t_not(bool v) { return !v; }

/* Mixed arguments: the sum of the numbers plus the string's length. */
EXPORT double t_mix(int8_t a, uint16_t b, float c, double d, const char *s, bool e);
EXPORT double t_mix(int8_t a, uint16_t b, float c, double d, const char *s, bool e) {
    return a + b + c + d + (double)strlen(s) + (e ? 1000 : 0);
}

static int void_calls;
EXPORT void t_void(void);
EXPORT void t_void(void) { void_calls++; }
EXPORT int t_void_calls(void);
EXPORT int t_void_calls(void) { return void_calls; }

EXPORT int t_divmod(int a, int b, int *quotient, int *remainder);
EXPORT int t_divmod(int a, int b, int *quotient, int *remainder) {
    if (b == 0)
        return -1;
    *quotient = a / b;
    *remainder = a % b;
    return 0;
}

EXPORT void t_minmax(double a, double b, double *lo, double *hi);
EXPORT void t_minmax(double a, double b, double *lo, double *hi) {
    *lo = a < b ? a : b;
    *hi = a < b ? b : a;
}

/* Strings: a malloc'd upper-cased copy (free with free()). */
EXPORT char *t_upper(const char *s);
EXPORT char *t_upper(const char *s) {
    char *d = strdup(s);
    for (char *p = d; p && *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return d;
}

/* A copy from a private allocator, released with t_release. */
static int released;
EXPORT char *t_custom(const char *s);
EXPORT char *t_custom(const char *s) {
    size_t n = strlen(s);
    char *block = malloc(n + 2);
    if (!block)
        return NULL;
    block[0] = 'X'; /* header byte: t_release checks and frees the block */
    memcpy(block + 1, s, n + 1);
    return block + 1;
}
EXPORT void t_release(void *p);
EXPORT void t_release(void *p) {
    char *block = (char *)p - 1;
    if (block[0] == 'X')
        released++;
    free(block);
}
EXPORT int t_released(void);
EXPORT int t_released(void) { return released; }

/* A static buffer ("none": never freed). */
EXPORT char *t_static(void);
EXPORT char *t_static(void) {
    static char buf[] = "static text";
    return buf;
}

EXPORT const char *t_greeting(int polite);
EXPORT const char *t_greeting(int polite) { return polite ? "good day" : "hi \"you\""; }

EXPORT char *t_null(void);
EXPORT char *t_null(void) { return NULL; }

/*
 * Buffers filled by the callee, n elements each, for the out-parameter
 * sizes of tools-ffi ("out": [{"name", "count", "max"}]).  They trust n, as
 * C functions do: the plugin must never pass a buffer shorter than n.
 */
EXPORT void t_fill(signed char *buf, int n);
EXPORT void t_fill(signed char *buf, int n) {
    for (int i = 0; i < n; i++)
        buf[i] = (signed char)(i % 7 - 3);
}

EXPORT int t_fill_ints(size_t n, int *buf);
EXPORT int t_fill_ints(size_t n, int *buf) {
    for (size_t i = 0; i < n; i++)
        buf[i] = (int)(i * i) - 1;
    return (int)n;
}

EXPORT void t_fill_doubles(double *buf, unsigned short n, double step);
EXPORT void t_fill_doubles(double *buf, unsigned short n, double step) {
    for (unsigned short i = 0; i < n; i++)
        buf[i] = i * step;
}

/* Four fixed values: a constant count. */
EXPORT void t_rgba(uint8_t *px);
EXPORT void t_rgba(uint8_t *px) {
    px[0] = 255;
    px[1] = 128;
    px[2] = 0;
    px[3] = 7;
}

/* snprintf-style: at most n bytes including the NUL; returns the full length. */
EXPORT int t_hello(char *buf, int n, const char *who);
EXPORT int t_hello(char *buf, int n, const char *who) {
    const char *parts[] = {"hello, ", who, "!"};
    int len = 0;
    for (size_t k = 0; k < 3; k++) {
        for (const char *p = parts[k]; *p; p++, len++)
            if (len < n - 1)
                buf[len] = *p;
    }
    if (n > 0)
        buf[len < n - 1 ? len : n - 1] = '\0';
    return len;
}

/* Exactly n characters and no NUL (strncpy style). */
EXPORT void t_letters(char *buf, int n);
EXPORT void t_letters(char *buf, int n) {
    for (int i = 0; i < n; i++)
        buf[i] = (char)('a' + i % 26);
}

/* The idempotency key tools-ffi passes (docs/tools.md): "<label>:<key>". */
EXPORT int t_keyed(char *buf, int n, const char *label, const char *key);
EXPORT int t_keyed(char *buf, int n, const char *label, const char *key) {
    return snprintf(buf, (size_t)n, "%s:%s", label, key ? key : "(null)");
}

/*
 * For tests/scripts/crash_tool_rerun.sh: append "<key>\n" to <dir>/ffi.log,
 * then wait (at most 20 s) until <dir>/gate exists; returns 1 once it does.
 */
EXPORT int t_book(const char *dir, const char *key);
EXPORT int t_book(const char *dir, const char *key) {
    char path[4096];
    snprintf(path, sizeof path, "%s/ffi.log", dir);
    FILE *f = fopen(path, "a");
    if (!f)
        return -1;
    fprintf(f, "%s\n", key ? key : "(null)");
    fclose(f);
    snprintf(path, sizeof path, "%s/gate", dir);
    for (int i = 0; i < 4000; i++) {
        if (access(path, F_OK) == 0)
            return 1;
        usleep(5000);
    }
    return 0;
}

/*
 * A background job's body for tests/scripts/serve_jobs.sh and
 * test_tools_ffi: sleep `ms` milliseconds (0 to 60000) and return it.  It
 * cannot see a cancel, as no tools-ffi function can.
 */
EXPORT int t_sleep_ms(int ms);
EXPORT int t_sleep_ms(int ms) {
    if (ms < 0 || ms > 60000)
        return -1;
    usleep((useconds_t)ms * 1000);
    return ms;
}
