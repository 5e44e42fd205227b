/*
 * core/base/json_write.c - the core's JSON serializer: byte for byte what
 * json_dump_callback(v, cb, ud, JSON_COMPACT | JSON_PRESERVE_ORDER |
 * JSON_ENCODE_ANY) writes, at a fraction of its cost (issue #15: the log's
 * serialization was a sixth of a step).
 *
 * jansson hands its callback a few bytes at a time and formats every
 * integer with snprintf; this writer fills a stack buffer and calls `cb`
 * once per 4 KiB, copies runs of plain string bytes with one memcpy, and
 * formats integers itself.  The output is the same bytes:
 *   - object members in insertion order (jansson's order since 2.8), keys
 *     with their length (a key may hold a NUL, written as \u0000);
 *   - strings: '"' and '\\' and the control characters escaped as jansson
 *     escapes them (\b \f \n \r \t, else \u00XX in upper case), every other
 *     byte as it is, and a string that is not valid UTF-8 fails the write,
 *     as jansson's dump does (an overlong form, a surrogate, a code point
 *     past U+10FFFF, a truncated sequence);
 *   - integers in decimal; reals through jansson itself (json_dumpb of the
 *     one value: its %.17g, its locale handling and its exponent rules);
 *   - true, false, null.
 * A value nested deeper than WRITE_MAX_DEPTH (2,112) fails the write:
 * jansson's dump has no limit but fails a cycle; its parser refuses more
 * than 2,048 levels, so anything it parsed, inside an event, fits.
 * tests/unit/test_json_write.c and tests/fuzz/fuzz_json_write.c compare
 * the two on every value they build or parse.
 */
#include <stdint.h>
#include <string.h>

#include "common.h"

#define WRITE_CHUNK 4096
/* past jansson's parser limit (2048) plus an envelope's few levels: a value
 * jansson parsed, logged inside an event, is never too deep to write */
#define WRITE_MAX_DEPTH (2048 + 64)

typedef struct writer {
    json_dump_callback_t cb;
    void *ud;
    size_t len;
    int failed;
    char buf[WRITE_CHUNK];
} writer;

static void flush(writer *w) {
    if (w->len && !w->failed && w->cb(w->buf, w->len, w->ud) != 0)
        w->failed = 1;
    w->len = 0;
}

static void put(writer *w, const char *s, size_t n) {
    if (w->failed)
        return;
    if (n > WRITE_CHUNK - w->len) {
        flush(w);
        if (n > WRITE_CHUNK) { /* a long run goes to the callback as it is */
            if (!w->failed && w->cb(s, n, w->ud) != 0)
                w->failed = 1;
            return;
        }
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void put_char(writer *w, char c) {
    if (w->len == WRITE_CHUNK)
        flush(w);
    w->buf[w->len++] = c;
}

/* common.h; json_write, the warnings (text_escape.c) and http.c share it */
size_t weir__utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    size_t len;
    uint32_t c, min;
    if (n == 0)
        return 0;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2, c = s[0] & 0x1fu, min = 0x80;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3, c = s[0] & 0x0fu, min = 0x800;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4, c = s[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) /* a NUL ends a C string here too */
            return 0;
        c = (c << 6) | (s[i] & 0x3fu);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

static void put_string(writer *w, const char *str, size_t len) {
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *s = (const unsigned char *)str, *end = s + len;
    put_char(w, '"');
    while (s < end && !w->failed) {
        const unsigned char *run = s;
        while (s < end) {
            unsigned char c = *s;
            if (c >= 0x80) {
                uint32_t cp;
                size_t n = weir__utf8_decode(s, (size_t)(end - s), &cp);
                if (!n) {
                    w->failed = 1;
                    return;
                }
                s += n;
            } else if (c < 0x20 || c == '"' || c == '\\') {
                break;
            } else {
                s++;
            }
        }
        put(w, (const char *)run, (size_t)(s - run));
        if (s == end)
            break;
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (*s) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[*s >> 4];
            esc[5] = hex[*s & 0xF];
            n = 6;
        }
        put(w, esc, n);
        s++;
    }
    put_char(w, '"');
}

static void put_integer(writer *w, json_int_t v) {
    char tmp[24];
    char *p = tmp + sizeof tmp;
    /* the magnitude as unsigned, so the most negative value has one */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    put(w, p, (size_t)(tmp + sizeof tmp - p));
}

static void put_real(writer *w, const json_t *v) {
    char tmp[64];
    size_t n = json_dumpb(v, tmp, sizeof tmp, JSON_ENCODE_ANY | JSON_COMPACT);
    if (n == 0 || n > sizeof tmp) {
        w->failed = 1; /* NaN and infinities: jansson refuses them too */
        return;
    }
    put(w, tmp, n);
}

static void put_value(writer *w, const json_t *v, int depth) {
    if (w->failed)
        return;
    if (depth > WRITE_MAX_DEPTH) {
        w->failed = 1;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        put_char(w, '{');
        bool first = true;
        for (void *it = json_object_iter((json_t *)(uintptr_t)v); it && !w->failed;
             it = json_object_iter_next((json_t *)(uintptr_t)v, it)) {
            if (!first)
                put_char(w, ',');
            first = false;
            put_string(w, json_object_iter_key(it), json_object_iter_key_len(it));
            put_char(w, ':');
            put_value(w, json_object_iter_value(it), depth + 1);
        }
        put_char(w, '}');
        break;
    }
    case JSON_ARRAY: {
        put_char(w, '[');
        size_t n = json_array_size(v);
        for (size_t i = 0; i < n && !w->failed; i++) {
            if (i)
                put_char(w, ',');
            put_value(w, json_array_get(v, i), depth + 1);
        }
        put_char(w, ']');
        break;
    }
    case JSON_STRING:
        put_string(w, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        put_integer(w, json_integer_value(v));
        break;
    case JSON_REAL:
        put_real(w, v);
        break;
    case JSON_TRUE:
        put(w, "true", 4);
        break;
    case JSON_FALSE:
        put(w, "false", 5);
        break;
    case JSON_NULL:
        put(w, "null", 4);
        break;
    default:
        w->failed = 1;
    }
}

int weir__json_write(const json_t *v, json_dump_callback_t cb, void *ud) {
    if (!v || !cb)
        return -1;
    writer w; /* on the stack: a 4 KiB malloc per event cost more than the writing */
    w.cb = cb;
    w.ud = ud;
    w.len = 0;
    w.failed = 0;
    put_value(&w, v, 0);
    flush(&w);
    return w.failed ? -1 : 0;
}
