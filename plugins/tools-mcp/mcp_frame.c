/*
 * plugins/tools-mcp/mcp_frame.c - newline-delimited JSON-RPC frames (see
 * mcp_frame.h).
 */
#include "mcp_frame.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX ((size_t)16 << 20)

void mcp_frame_init(mcp_frame_reader *r, size_t max) {
    memset(r, 0, sizeof *r);
    r->max = max ? max : DEFAULT_MAX;
}

void mcp_frame_clear(mcp_frame_reader *r) {
    if (!r)
        return;
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
    r->skipping = false;
    r->dropped = 0;
}

size_t mcp_frame_pending(const mcp_frame_reader *r) {
    return r ? (r->skipping ? r->dropped : r->len) : 0;
}

static int emit_line(mcp_frame_fn fn, void *ud, const char *line, size_t n) {
    if (n && line[n - 1] == '\r')
        n--;
    size_t i = 0;
    while (i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    if (i == n)
        return 0; /* an empty line: nothing */
    json_error_t jerr;
    /* \u0000 in a string value is taken (jansson refuses it by default):
     * one bad string, such as a tool name, must not lose the whole message.
     * Whoever reads a string of a message checks for it (mcp_json_has_nul). */
    json_t *msg = json_loadb(line, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!json_is_object(msg)) {
        json_decref(msg);
        return fn(ud, MCP_FRAME_GARBAGE, NULL, line, n);
    }
    int rc = fn(ud, MCP_FRAME_MESSAGE, msg, NULL, n);
    json_decref(msg);
    return rc;
}

/* Append to the line buffer, growing it (never past max + 1). */
static int append(mcp_frame_reader *r, const char *s, size_t n) {
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap *= 2;
        if (cap > r->max + 1)
            cap = r->max + 1;
        char *b = realloc(r->buf, cap);
        if (!b)
            return -1;
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, s, n);
    r->len += n;
    return 0;
}

int mcp_frame_feed(mcp_frame_reader *r, const char *data, size_t n, mcp_frame_fn fn, void *ud) {
    size_t at = 0;
    while (at < n) {
        const char *nl = memchr(data + at, '\n', n - at);
        size_t piece = nl ? (size_t)(nl - (data + at)) : n - at;
        if (r->skipping) {
            r->dropped += piece;
        } else if (r->len + piece > r->max) {
            /* too long: drop what was held and skip to the end of the line */
            r->skipping = true;
            r->dropped = r->len + piece;
            r->len = 0;
        } else if (!nl || r->len) {
            if (append(r, data + at, piece) != 0) {
                r->len = 0;
                if (nl) {
                    at += piece + 1;
                    continue;
                }
                r->skipping = true;
                r->dropped = piece;
                return -1;
            }
        }
        if (!nl)
            break;
        at += piece + 1;
        int rc = 0;
        if (r->skipping) {
            rc = fn(ud, MCP_FRAME_TOO_LONG, NULL, NULL, r->dropped);
            r->skipping = false;
            r->dropped = 0;
        } else if (r->len) {
            rc = emit_line(fn, ud, r->buf, r->len);
            r->len = 0;
        } else {
            /* the whole line is in `data`: no copy */
            rc = emit_line(fn, ud, nl - piece, piece);
        }
        if (rc)
            return rc;
    }
    return 0;
}

char *mcp_frame_text(const json_t *v, bool newline) {
    /* measured, then written into a buffer that fits: jansson's fixed-buffer
     * writer cannot fail, so no key can go missing */
    size_t n = v ? json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
    char *text = n ? malloc(n + 2) : NULL;
    if (text && json_dumpb(v, text, n, JSON_COMPACT | JSON_ENCODE_ANY) != n) {
        free(text);
        return NULL;
    }
    if (text && newline)
        text[n++] = '\n';
    if (text)
        text[n] = '\0';
    return text;
}
