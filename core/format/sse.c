/*
 * core/format/sse.c - incremental Server-Sent Events parser (WHATWG "event stream
 * interpretation"): bytes in any chunking, lines split on CR, LF or CRLF,
 * events dispatched on blank lines.
 */
#include <string.h>

#include "sse.h"

/* A growable byte buffer, always NUL-terminated once allocated. */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

struct weir__sse {
    weir_sse_fn on_event;
    void *ud;
    size_t limit;
    buf line;       /* the current, unterminated line */
    buf event;      /* event: value of the pending event */
    buf data;       /* joined data: values of the pending event */
    bool has_data;  /* a data: field was seen since the last dispatch */
    bool skip_lf;   /* the previous chunk ended in CR: a leading LF belongs to it */
    bool first_line; /* strip a UTF-8 BOM from the very first line */
    int stopped;    /* non-zero once stopped: the value every call returns */
};

static int buf_append(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = weir__realloc(b->p, cap);
        if (!p)
            return WEIR__SSE_NOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

static void buf_free(buf *b) {
    weir__free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int weir__sse_create(weir_sse_fn on_event, void *ud, weir__sse **out) {
    if (out)
        *out = NULL;
    if (!on_event || !out)
        return WEIR_E_INVAL;
    weir__sse *p = weir__calloc(1, sizeof *p);
    if (!p)
        return WEIR_E_NOMEM;
    p->on_event = on_event;
    p->ud = ud;
    p->limit = WEIR__SSE_MAX_LINE;
    p->first_line = true;
    *out = p;
    return WEIR_OK;
}

void weir__sse_destroy(weir__sse *p) {
    if (!p)
        return;
    buf_free(&p->line);
    buf_free(&p->event);
    buf_free(&p->data);
    weir__free(p);
}

void weir__sse_set_limit(weir__sse *p, size_t max_line) {
    if (p && max_line > 0)
        p->limit = max_line;
}

static int dispatch(weir__sse *p) {
    int rc = 0;
    if (p->has_data) {
        rc = p->on_event(p->ud, p->event.p ? p->event.p : "", p->data.p ? p->data.p : "",
                         p->data.len);
    }
    p->has_data = false;
    p->data.len = 0;
    if (p->data.p)
        p->data.p[0] = '\0';
    p->event.len = 0;
    if (p->event.p)
        p->event.p[0] = '\0';
    return rc;
}

/* Interpret one complete line (without its terminator). */
static int process_line(weir__sse *p, const char *s, size_t n) {
    if (p->first_line) {
        p->first_line = false;
        if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
            s += 3;
            n -= 3;
        }
    }
    if (n == 0)
        return dispatch(p);
    if (s[0] == ':')
        return 0; /* comment */
    const char *colon = memchr(s, ':', n);
    size_t name_len = colon ? (size_t)(colon - s) : n;
    const char *value = colon ? colon + 1 : s + n;
    size_t value_len = colon ? n - name_len - 1 : 0;
    if (value_len && value[0] == ' ') {
        value++;
        value_len--;
    }
    if (name_len == 5 && memcmp(s, "event", 5) == 0) {
        p->event.len = 0;
        return buf_append(&p->event, value, value_len);
    }
    if (name_len == 4 && memcmp(s, "data", 4) == 0) {
        size_t extra = value_len + (p->has_data ? 1 : 0);
        if (p->data.len + extra > p->limit)
            return WEIR__SSE_TOO_LONG;
        if (p->has_data && buf_append(&p->data, "\n", 1))
            return WEIR__SSE_NOMEM;
        p->has_data = true;
        return buf_append(&p->data, value, value_len);
    }
    return 0; /* id:, retry:, unknown fields */
}

/* Append to the pending line, enforcing the limit. */
static int line_append(weir__sse *p, const char *s, size_t n) {
    if (p->line.len + n > p->limit)
        return WEIR__SSE_TOO_LONG;
    return buf_append(&p->line, s, n);
}

/* Terminate the pending line (plus `n` more bytes of it in `s`). */
static int end_line(weir__sse *p, const char *s, size_t n) {
    if (p->line.len == 0) {
        if (n > p->limit)
            return WEIR__SSE_TOO_LONG;
        return process_line(p, s, n);
    }
    int rc = line_append(p, s, n);
    if (rc)
        return rc;
    rc = process_line(p, p->line.p, p->line.len);
    p->line.len = 0;
    p->line.p[0] = '\0';
    return rc;
}

int weir__sse_feed(weir__sse *p, const char *b, size_t len) {
    if (!p || (!b && len))
        return WEIR__SSE_INVAL;
    if (p->stopped)
        return p->stopped;
    while (len) {
        if (p->skip_lf) {
            p->skip_lf = false;
            if (b[0] == '\n') {
                b++;
                len--;
                continue;
            }
        }
        size_t i = 0;
        while (i < len && b[i] != '\r' && b[i] != '\n')
            i++;
        if (i == len) {
            int rc = line_append(p, b, len);
            if (rc)
                return p->stopped = rc;
            break;
        }
        bool cr = b[i] == '\r';
        int rc = end_line(p, b, i);
        if (rc)
            return p->stopped = rc;
        i++;
        if (cr) {
            if (i < len && b[i] == '\n')
                i++;
            else if (i == len)
                p->skip_lf = true;
        }
        b += i;
        len -= i;
    }
    return 0;
}

int weir__sse_finish(weir__sse *p) {
    if (!p)
        return WEIR__SSE_INVAL;
    if (p->stopped)
        return p->stopped;
    int rc = 0;
    if (p->line.len)
        rc = end_line(p, "", 0);
    if (!rc)
        rc = dispatch(p);
    p->skip_lf = false;
    return rc ? (p->stopped = rc) : 0;
}
