/*
 * tests/fuzz/fuzz_mcp_frame.c - libFuzzer target for the JSON-RPC frame
 * reader of tools-mcp's stdio transport (plugins/tools-mcp/mcp_frame.c).
 *
 * Oracle: the input read in one feed and read in chunks (sizes drawn from
 * the input's first byte) must give the same frames in the same order
 * (kind, length, and the message re-serialized), whatever the line limit
 * (also drawn from the input); no frame is longer than the limit; the
 * reader never holds more than the limit.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct render {
    char *text;
    size_t len;
    size_t max;
} render;

static void put(render *r, const char *s, size_t n) {
    char *t = realloc(r->text, r->len + n + 1);
    if (!t)
        abort();
    r->text = t;
    memcpy(t + r->len, s, n);
    r->len += n;
}

static int collect(void *ud, mcp_frame_kind kind, json_t *msg, const char *text, size_t len) {
    render *r = ud;
    char head[64];
    int n = snprintf(head, sizeof head, "%d:%zu:", (int)kind, len);
    put(r, head, (size_t)n);
    if (kind == MCP_FRAME_MESSAGE) {
        if (!json_is_object(msg) || len > r->max)
            abort();
        char *s = json_dumps(msg, JSON_COMPACT | JSON_SORT_KEYS);
        if (!s)
            abort();
        put(r, s, strlen(s));
        free(s);
    } else if (kind == MCP_FRAME_GARBAGE) {
        if (!text || len > r->max)
            abort();
        put(r, text, len);
    } else if (len <= r->max) {
        abort(); /* too long means longer than the limit */
    }
    put(r, "\n", 1);
    return 0;
}

static void parse(const char *in, size_t len, unsigned seed, size_t max, render *out) {
    mcp_frame_reader fr;
    mcp_frame_init(&fr, max);
    out->max = max;
    size_t off = 0;
    while (off < len) {
        size_t chunk = len - off;
        if (seed) {
            seed = seed * 1103515245u + 12345u;
            chunk = 1 + (seed >> 16) % 17;
            if (chunk > len - off)
                chunk = len - off;
        }
        if (mcp_frame_feed(&fr, in + off, chunk, collect, out) != 0)
            abort(); /* the callback never stops it, and malloc does not fail here */
        if (fr.len > max + 1 || fr.cap > max + 1)
            abort();
        off += chunk;
    }
    mcp_frame_clear(&fr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    unsigned seed = data[0];
    size_t max = 1 + (size_t)data[1] * 4;
    const char *in = (const char *)data + 2;
    size_t len = size - 2;
    render a = {0}, b = {0};
    parse(in, len, 0, max, &a);
    parse(in, len, seed | 1u, max, &b);
    if (a.len != b.len || (a.len && memcmp(a.text, b.text, a.len) != 0))
        abort();
    free(a.text);
    free(b.text);
    return 0;
}
