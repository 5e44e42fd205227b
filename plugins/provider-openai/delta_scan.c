/*
 * plugins/provider-openai/delta_scan.c - the pull scanner of one Chat
 * Completions stream chunk (delta_scan.h).
 *
 * One pass over the bytes, no tree: members the decoder reads are decoded
 * into the scanner's buffer, every other value is validated and skipped.
 * The buffer is sized to the chunk before the pass (a decoded string plus
 * its NUL is never longer than its quoted text), so pointers into it stay
 * valid.  Any doubt is a decline: the caller's jansson path then decides,
 * so the scanner never has to reproduce an error message.
 */
#include "delta_scan.h"

#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const unsigned char *p, *end;
    char *out; /* next free byte of the scanner's buffer */
} cursor;

static void ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Skip whitespace, then take `ch` when it is next. */
static bool take(cursor *c, unsigned char ch) {
    ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static int hex4(const unsigned char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = p[i];
        v <<= 4;
        if (h >= '0' && h <= '9')
            v |= h - '0';
        else if (h >= 'a' && h <= 'f')
            v |= h - 'a' + 10;
        else if (h >= 'A' && h <= 'F')
            v |= h - 'A' + 10;
        else
            return -1;
    }
    return v;
}

/* Length of the strict UTF-8 sequence at p (what jansson accepts: no
 * overlongs, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char b = p[0];
    size_t n;
    uint32_t cp;
    if (b < 0xC2)
        return 0; /* continuation byte or overlong two-byte lead */
    if (b < 0xE0)
        n = 2, cp = b & 0x1F;
    else if (b < 0xF0)
        n = 3, cp = b & 0x0F;
    else if (b < 0xF5)
        n = 4, cp = b & 0x07;
    else
        return 0;
    if ((size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

static char *put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/*
 * A string at the cursor (after whitespace).  With `dst`, decode it into the
 * buffer and set *dst; without, only validate it.  `*escaped` (may be NULL)
 * tells whether it held a backslash.
 */
static bool string(cursor *c, openai_scan_str *dst, bool *escaped) {
    if (!take(c, '"'))
        return false;
    char *start = c->out, *o = c->out;
    bool esc = false;
    for (;;) {
        if (c->p >= c->end)
            return false;
        unsigned char b = *c->p;
        if (b == '"') {
            c->p++;
            break;
        }
        if (b < 0x20)
            return false;
        if (b < 0x80 && b != '\\') { /* a run of plain ASCII, copied at once */
            const unsigned char *q = c->p + 1;
            while (q < c->end && *q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\')
                q++;
            if (dst) {
                memcpy(o, c->p, (size_t)(q - c->p));
                o += q - c->p;
            }
            c->p = q;
            continue;
        }
        if (b >= 0x80) {
            size_t n = utf8_len(c->p, c->end);
            if (!n)
                return false;
            if (dst) {
                memcpy(o, c->p, n);
                o += n;
            }
            c->p += n;
            continue;
        }
        esc = true;
        if (c->end - c->p < 2)
            return false;
        unsigned char e = c->p[1];
        c->p += 2;
        char plain;
        switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
            if (c->end - c->p < 4)
                return false;
            int u = hex4(c->p);
            c->p += 4;
            if (u <= 0 || (u >= 0xDC00 && u <= 0xDFFF))
                return false; /* \u0000 (refused without JSON_ALLOW_NUL), lone low half */
            uint32_t cp = (uint32_t)u;
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u')
                    return false;
                int lo = hex4(c->p + 2);
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return false;
                c->p += 6;
                cp = 0x10000 + (((uint32_t)u - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            }
            if (dst)
                o = put_utf8(o, cp);
            continue;
        }
        default:
            return false;
        }
        if (dst)
            *o++ = plain;
    }
    if (escaped)
        *escaped = esc;
    if (dst) {
        *o++ = '\0';
        dst->p = start;
        dst->len = (size_t)(o - start) - 1;
        c->out = o;
    }
    return true;
}

/*
 * A number at the cursor.  *is_int and *value for an integer of at most 18
 * digits; a fraction without exponent of at most 300 digits is a
 * non-integer; anything else (an exponent, more digits) declines, as do
 * numbers jansson could refuse (overflow).
 */
static bool number(cursor *c, bool *is_int, int64_t *value) {
    ws(c);
    const unsigned char *p = c->p;
    bool neg = false;
    if (p < c->end && *p == '-')
        neg = true, p++;
    if (p >= c->end || *p < '0' || *p > '9')
        return false;
    int64_t v = 0;
    int digits = 0;
    if (*p == '0') {
        p++;
        digits = 1;
    } else {
        while (p < c->end && *p >= '0' && *p <= '9') {
            if (++digits > 18)
                return false;
            v = v * 10 + (*p++ - '0');
        }
    }
    bool integer = true;
    if (p < c->end && *p == '.') {
        integer = false;
        p++;
        if (p >= c->end || *p < '0' || *p > '9')
            return false;
        while (p < c->end && *p >= '0' && *p <= '9')
            if (++digits > 300)
                return false;
            else
                p++;
    }
    if (p < c->end && (*p == 'e' || *p == 'E'))
        return false;
    c->p = p;
    *is_int = integer;
    *value = neg ? -v : v;
    return true;
}

static bool literal(cursor *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* `null` is next: take it. */
static bool null_next(cursor *c) {
    ws(c);
    return c->p < c->end && *c->p == 'n' && literal(c, "null", 4);
}

static bool skip_value(cursor *c, int depth);

/* The body of an object or array being skipped, its opener taken. */
static bool skip_members(cursor *c, int depth, bool object) {
    unsigned char close = object ? '}' : ']';
    if (take(c, close))
        return true;
    for (;;) {
        if (object && (!string(c, NULL, NULL) || !take(c, ':')))
            return false;
        if (!skip_value(c, depth))
            return false;
        if (take(c, close))
            return true;
        if (!take(c, ','))
            return false;
    }
}

static bool skip_value(cursor *c, int depth) {
    ws(c);
    if (c->p >= c->end)
        return false;
    bool is_int;
    int64_t v;
    switch (*c->p) {
    case '"': return string(c, NULL, NULL);
    case '{':
    case '[':
        if (depth >= OPENAI_SCAN_MAX_DEPTH)
            return false;
        return skip_members(c, depth + 1, *c->p++ == '{');
    case 't': return literal(c, "true", 4);
    case 'f': return literal(c, "false", 5);
    case 'n': return literal(c, "null", 4);
    default: return number(c, &is_int, &v);
    }
}

/*
 * Iterate an object's members: call first with *first true after the '{'
 * is taken; returns 1 with the member name (raw bytes, no escapes) in
 * *key and *klen and the cursor after ':', 0 at the closing '}', -1 to decline.
 */
static int member(cursor *c, bool *first, const char **key, size_t *klen) {
    if (*first) {
        *first = false;
        if (take(c, '}'))
            return 0;
    } else {
        if (take(c, '}'))
            return 0;
        if (!take(c, ','))
            return -1;
    }
    ws(c);
    const unsigned char *k = c->p + 1;
    bool escaped;
    if (!string(c, NULL, &escaped) || escaped)
        return -1;
    *key = (const char *)k;
    *klen = (size_t)(c->p - 1 - k); /* c->p is past the closing quote */
    return take(c, ':') ? 1 : -1;
}

static bool is_key(const char *key, size_t klen, const char *name) {
    size_t n = strlen(name);
    return klen == n && memcmp(key, name, n) == 0;
}

/* A member the decoder reads: a second one declines (jansson keeps the last). */
static bool once(unsigned *seen, unsigned bit) {
    if (*seen & bit)
        return false;
    *seen |= bit;
    return true;
}

/* null or a string. */
static bool opt_string(cursor *c, openai_scan_str *dst) {
    dst->p = NULL;
    dst->len = 0;
    if (null_next(c))
        return true;
    return string(c, dst, NULL);
}

/* null or a non-negative integer. */
static bool opt_count(cursor *c, int64_t *out, bool *present) {
    *out = 0;
    *present = false;
    if (null_next(c))
        return true;
    bool is_int;
    if (!number(c, &is_int, out) || !is_int || *out < 0)
        return false;
    *present = true;
    return true;
}

/* {<name>: count, ...} details object, or null. */
static bool details(cursor *c, const char *name, int64_t *out, bool *present) {
    *out = 0;
    *present = false;
    if (null_next(c))
        return true;
    if (!take(c, '{'))
        return false;
    bool first = true;
    unsigned seen = 0;
    const char *key;
    size_t klen;
    int r;
    while ((r = member(c, &first, &key, &klen)) == 1) {
        if (is_key(key, klen, name)) {
            if (!once(&seen, 1) || !opt_count(c, out, present))
                return false;
        } else if (!skip_value(c, 1)) {
            return false;
        }
    }
    return r == 0;
}

static bool usage(cursor *c, openai_scan_delta *d) {
    if (!take(c, '{'))
        return false;
    d->has_usage = true;
    bool first = true, has;
    unsigned seen = 0;
    const char *key;
    size_t klen;
    int r;
    while ((r = member(c, &first, &key, &klen)) == 1) {
        bool ok;
        if (is_key(key, klen, "prompt_tokens"))
            ok = once(&seen, 1) && opt_count(c, &d->prompt_tokens, &has);
        else if (is_key(key, klen, "completion_tokens"))
            ok = once(&seen, 2) && opt_count(c, &d->completion_tokens, &has);
        else if (is_key(key, klen, "prompt_tokens_details"))
            ok = once(&seen, 4) &&
                 details(c, "cached_tokens", &d->cached_tokens, &d->has_cached);
        else if (is_key(key, klen, "completion_tokens_details"))
            ok = once(&seen, 8) &&
                 details(c, "reasoning_tokens", &d->reasoning_tokens, &d->has_reasoning);
        else if (is_key(key, klen, "prompt_cache_hit_tokens")) /* DeepSeek */
            ok = once(&seen, 16) && opt_count(c, &d->cache_hit_tokens, &d->has_cache_hit);
        else
            ok = skip_value(c, 1);
        if (!ok)
            return false;
    }
    return r == 0;
}

static bool tool_call(cursor *c, openai_scan_call *t) {
    memset(t, 0, sizeof *t);
    if (!take(c, '{'))
        return false;
    bool first = true;
    unsigned seen = 0;
    const char *key;
    size_t klen;
    int r;
    while ((r = member(c, &first, &key, &klen)) == 1) {
        bool ok;
        if (is_key(key, klen, "index")) {
            bool is_int;
            ok = once(&seen, 1) && number(c, &is_int, &t->index) && is_int;
            t->has_index = true;
        } else if (is_key(key, klen, "id")) {
            ok = once(&seen, 2) && opt_string(c, &t->id);
        } else if (is_key(key, klen, "function")) {
            ok = once(&seen, 4);
            if (ok && !null_next(c)) {
                bool ffirst = true;
                unsigned fseen = 0;
                int fr;
                ok = take(c, '{');
                while (ok && (fr = member(c, &ffirst, &key, &klen)) != 0) {
                    if (fr < 0)
                        ok = false;
                    else if (is_key(key, klen, "name"))
                        ok = once(&fseen, 1) && opt_string(c, &t->name);
                    else if (is_key(key, klen, "arguments"))
                        ok = once(&fseen, 2) && opt_string(c, &t->args);
                    else
                        ok = skip_value(c, 3);
                }
            }
        } else if (is_key(key, klen, "extra_content")) {
            /* Gemini's thought_signature: rare (a call's first delta), read
             * by the jansson path (openai_decode.c) */
            ok = false;
        } else {
            ok = skip_value(c, 2);
        }
        if (!ok)
            return false;
    }
    return r == 0;
}

static bool tool_calls(cursor *c, openai_scan *s) {
    if (!take(c, '['))
        return false;
    if (take(c, ']'))
        return true;
    for (;;) {
        if (s->delta.ncalls == s->calls_cap) {
            size_t cap = s->calls_cap ? s->calls_cap * 2 : 4;
            if (cap > 4096)
                return false;
            openai_scan_call *grown = realloc(s->calls, cap * sizeof *grown);
            if (!grown)
                return false;
            s->calls = grown;
            s->calls_cap = cap;
        }
        if (!tool_call(c, &s->calls[s->delta.ncalls]))
            return false;
        s->delta.ncalls++;
        if (take(c, ']'))
            return true;
        if (!take(c, ','))
            return false;
    }
}

static bool delta(cursor *c, openai_scan *s) {
    openai_scan_delta *d = &s->delta;
    if (!take(c, '{'))
        return false;
    d->has_delta = true;
    bool first = true;
    unsigned seen = 0;
    const char *key;
    size_t klen;
    int r;
    while ((r = member(c, &first, &key, &klen)) == 1) {
        bool ok;
        if (is_key(key, klen, "content"))
            ok = once(&seen, 1) && opt_string(c, &d->content);
        else if (is_key(key, klen, "reasoning_content"))
            ok = once(&seen, 2) && opt_string(c, &d->reasoning_content);
        else if (is_key(key, klen, "reasoning"))
            ok = once(&seen, 4) && opt_string(c, &d->reasoning);
        else if (is_key(key, klen, "tool_calls"))
            ok = once(&seen, 8) && (null_next(c) || tool_calls(c, s));
        else
            ok = skip_value(c, 3);
        if (!ok)
            return false;
    }
    return r == 0;
}

static bool choices(cursor *c, openai_scan *s) {
    if (!take(c, '['))
        return false;
    if (take(c, ']'))
        return true;
    if (!take(c, '{'))
        return false;
    s->delta.has_choice = true;
    bool first = true;
    unsigned seen = 0;
    const char *key;
    size_t klen;
    int r;
    while ((r = member(c, &first, &key, &klen)) == 1) {
        bool ok;
        if (is_key(key, klen, "delta"))
            ok = once(&seen, 1) && (null_next(c) || delta(c, s));
        else if (is_key(key, klen, "finish_reason"))
            ok = once(&seen, 2) && opt_string(c, &s->delta.finish_reason);
        else
            ok = skip_value(c, 2);
        if (!ok)
            return false;
    }
    /* Exactly one choice: a second one (n > 1) is the jansson path's. */
    return r == 0 && take(c, ']');
}

bool openai_scan_chunk(openai_scan *s, const char *data, size_t len) {
    if (!s || !data)
        return false;
    if (len + 1 > s->buf_cap) {
        size_t cap = s->buf_cap ? s->buf_cap : 256;
        while (cap < len + 1)
            cap *= 2;
        char *grown = realloc(s->buf, cap);
        if (!grown)
            return false;
        s->buf = grown;
        s->buf_cap = cap;
    }
    memset(&s->delta, 0, sizeof s->delta);
    s->delta.calls = s->calls;
    cursor c = {(const unsigned char *)data, (const unsigned char *)data + len, s->buf};
    if (!take(&c, '{'))
        return false;
    bool first = true;
    unsigned seen = 0;
    const char *key;
    size_t klen;
    int r;
    while ((r = member(&c, &first, &key, &klen)) == 1) {
        bool ok;
        if (is_key(key, klen, "error"))
            ok = false; /* in-band errors are rare: the jansson path reports them */
        else if (is_key(key, klen, "usage"))
            ok = once(&seen, 1) && (null_next(&c) || usage(&c, &s->delta));
        else if (is_key(key, klen, "choices"))
            ok = once(&seen, 2) && (null_next(&c) || choices(&c, s));
        else
            ok = skip_value(&c, 1);
        if (!ok)
            return false;
    }
    if (r != 0)
        return false;
    ws(&c);
    s->delta.calls = s->calls;
    return c.p == c.end;
}

void openai_scan_clear(openai_scan *s) {
    if (!s)
        return;
    free(s->buf);
    free(s->calls);
    memset(s, 0, sizeof *s);
}
