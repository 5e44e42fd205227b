/*
 * tests/fuzz/fuzz_sse.c - libFuzzer target for the SSE parser (core/format/sse.c).
 *
 * Oracle: the input parsed in one feed and parsed in chunks (sizes drawn
 * from the input's first byte) must give the same events and the same
 * result; data handed to the callback is NUL-terminated at data_len.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct render {
    char *text;
    size_t len;
} render;

static int collect(void *ud, const char *event, const char *d, size_t n) {
    render *r = ud;
    if (d[n] != '\0')
        abort();
    size_t el = strlen(event);
    char *t = realloc(r->text, r->len + el + n + 3);
    if (!t)
        abort();
    r->text = t;
    memcpy(t + r->len, event, el);
    r->len += el;
    t[r->len++] = '|';
    memcpy(t + r->len, d, n);
    r->len += n;
    t[r->len++] = '\n';
    return 0;
}

/* Parse with chunk sizes from `seed` (0 = one feed); returns the result. */
static int parse(const char *in, size_t len, unsigned seed, size_t limit, render *out) {
    weir__sse *p;
    if (weir__sse_create(collect, out, &p) != WEIR_OK)
        abort();
    weir__sse_set_limit(p, limit);
    int rc = 0;
    size_t off = 0;
    while (off < len && rc == 0) {
        size_t chunk = len - off;
        if (seed) {
            seed = seed * 1103515245u + 12345u;
            chunk = 1 + (seed >> 16) % 17;
            if (chunk > len - off)
                chunk = len - off;
        }
        rc = weir__sse_feed(p, in + off, chunk);
        off += chunk;
    }
    if (rc == 0)
        rc = weir__sse_finish(p);
    weir__sse_destroy(p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    unsigned seed = data[0] | 1u;
    size_t limit = (data[0] & 0x80) ? 32 : WEIR__SSE_MAX_LINE;
    const char *in = (const char *)data + 1;
    size_t len = size - 1;
    render whole = {0}, chunked = {0};
    int rc1 = parse(in, len, 0, limit, &whole);
    int rc2 = parse(in, len, seed, limit, &chunked);
    if (rc1 != rc2 || whole.len != chunked.len ||
        (whole.len && memcmp(whole.text, chunked.text, whole.len) != 0))
        abort();
    free(whole.text);
    free(chunked.text);
    return 0;
}
