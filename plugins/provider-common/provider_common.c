/*
 * plugins/provider-common/provider_common.c - decoder output and request
 * translation helpers shared by the HTTP provider plugins (see
 * provider_common.h).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup */
#endif
#include "provider_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOW_BYTES 200 /* bytes of malformed input quoted in the failure */

/* ------------------------------------------------------------------------ */
/* Decoder output                                                           */
/* ------------------------------------------------------------------------ */

int pc_out_init(pc_out *o, const char *provider, const char *fallback, const char *unit,
                pc_emit_fn emit, void *user_data) {
    o->provider = strdup(provider ? provider : fallback);
    if (!o->provider)
        return -1;
    o->unit = unit;
    o->emit = emit;
    o->user_data = user_data;
    return 0;
}

void pc_out_clear(pc_out *o) {
    if (o)
        free(o->provider);
}

char *pc_show_bytes(const char *p, size_t n) {
    size_t shown = n < SHOW_BYTES ? n : SHOW_BYTES;
    char *out = malloc(shown * 4 + 4);
    if (!out)
        return NULL;
    char *o = out;
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\') {
            *o++ = '\\';
            *o++ = '\\';
        } else if (c >= 0x20 && c < 0x7f) {
            *o++ = (char)c;
        } else {
            o += sprintf(o, "\\x%02x", c);
        }
    }
    if (shown < n)
        o += sprintf(o, "...");
    *o = '\0';
    return out;
}

const char *pc_not_json(const char *body, size_t len) {
    if (!body || !len)
        return "an empty body";
    if (len >= 2 && (unsigned char)body[0] == 0x1f && (unsigned char)body[1] == 0x8b)
        return "gzip data";
    json_t *root = json_loadb(body, len, 0, NULL);
    if (root) {
        json_decref(root);
        return NULL;
    }
    size_t i = 0;
    while (i < len && strchr(" \t\r\n", body[i]) && body[i])
        i++;
    return i < len && body[i] == '<' ? "an HTML page" : "a body that is not JSON";
}

void pc_set_new(json_t **obj, const char *key, json_t *value) {
    if (*obj && json_object_set_new(*obj, key, value) != 0) {
        json_decref(*obj);
        *obj = NULL;
    } else if (!*obj) {
        json_decref(value);
    }
}

json_t *pc_failure(const pc_out *o, const char *code, const char *message) {
    return json_pack("{s:s,s:s,s:s}", "code", code, "message", message, "provider",
                     o->provider);
}

int pc_put(pc_out *o, json_t *chunk) {
    if (!chunk) {
        pc_fail(o, "UNKNOWN", "out of memory while decoding the stream");
        return -1;
    }
    if (o->refused || o->done) {
        json_decref(chunk);
        return -1;
    }
    if (o->emit(o->user_data, chunk) != 0) {
        o->refused = true;
        return -1;
    }
    return 0;
}

void pc_finish(pc_out *o, const char *kind, json_t *failure) {
    if (o->done) {
        json_decref(failure);
        return;
    }
    o->done = true;
    json_t *reason = failure ? json_pack("{s:s,s:o}", "kind", kind, "failure", failure)
                             : json_pack("{s:s}", "kind", kind);
    json_t *chunk = reason ? json_pack("{s:s,s:o}", "type", "finish", "reason", reason) : NULL;
    if (!chunk) {
        o->lost = true;
        return;
    }
    o->emit(o->user_data, chunk);
}

void pc_fail(pc_out *o, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pc_finish(o, "error", pc_failure(o, code, msg));
}

void pc_malformed(pc_out *o, const char *why, const char *data, size_t len) {
    char *shown = pc_show_bytes(data, len);
    pc_fail(o, "TRANSPORT", "malformed stream %s (%s): %s", o->unit, why, shown ? shown : "");
    free(shown);
}

json_t *pc_parse(pc_out *o, const char *data, size_t len) {
    json_error_t jerr;
    json_t *root = json_loadb(data, len, 0, &jerr);
    if (!root)
        pc_malformed(o, "invalid JSON", data, len);
    return root;
}

int pc_block_start(pc_out *o, const char *block_type, int *index) {
    if (o->nblocks >= PC_MAX_BLOCKS) {
        pc_fail(o, "TRANSPORT", "malformed stream: more than %d content blocks", PC_MAX_BLOCKS);
        return -1;
    }
    *index = o->nblocks++;
    return pc_put(o, json_pack("{s:s,s:i,s:s}", "type", "block-start", "index", *index,
                               "block_type", block_type));
}

int pc_block_end(pc_out *o, int index, bool empty_tool_call) {
    if (empty_tool_call &&
        pc_put(o, json_pack("{s:s,s:i,s:s}", "type", "tool-call-delta", "index", index,
                            "arguments_delta", "{}")) != 0)
        return -1;
    return pc_put(o, json_pack("{s:s,s:i}", "type", "block-end", "index", index));
}

void pc_inband_error(pc_out *o, const char *code, const char *type, const char *message) {
    pc_fail(o, code, "in-band error from the provider: %s%s%s", type ? type : "",
            type ? ": " : "", message ? message : "(no message)");
}

int pc_end(pc_out *o, json_t *failure, bool aborted) {
    if (!o) {
        json_decref(failure);
        return -1;
    }
    if (!o->done) {
        if (failure && json_is_object(failure)) {
            if (!json_object_get(failure, "provider"))
                json_object_set_new(failure, "provider", json_string(o->provider));
            const char *code = json_string_value(json_object_get(failure, "code"));
            if (code && strcmp(code, "ABORTED") == 0)
                aborted = true;
            pc_finish(o, aborted ? "aborted" : "error", failure);
            failure = NULL;
        } else if (aborted) {
            pc_finish(o, "aborted", pc_failure(o, "ABORTED", "the call was cancelled"));
        } else {
            pc_fail(o, "TRANSPORT", "stream ended before finish");
        }
    }
    json_decref(failure);
    return o->lost ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Secrets                                                                  */
/* ------------------------------------------------------------------------ */

#define SCRUB_MAX_DEPTH 64
#define MASK_MIN 3   /* '*' or '.' in a row that stand for the hidden part of a key */
#define MASK_SHOWN 4 /* bytes of the secret a masked echo must show */

int pc_secrets_add(pc_secrets *s, const char *value) {
    if (!value || !value[0])
        return 0;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], value) == 0)
            return 0;
    char **v = realloc(s->v, (s->n + 1) * sizeof *v);
    if (!v)
        return -1;
    s->v = v;
    if (!(v[s->n] = strdup(value)))
        return -1;
    s->n++;
    return 0;
}

void pc_secrets_clear(pc_secrets *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* A byte of a key-like word: [A-Za-z0-9_-] (ASCII, whatever the locale). */
static bool word_byte(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '_' || c == '-';
}

static bool mask_byte(char c) { return c == '*' || c == '.'; }

/* First occurrence of `k` (klen > 0 bytes) in [p, end), or NULL. */
static const char *find_bytes(const char *p, const char *end, const char *k, size_t klen) {
    while ((size_t)(end - p) >= klen) {
        const char *c = memchr(p, k[0], (size_t)(end - p) - klen + 1);
        if (!c)
            return NULL;
        if (memcmp(c, k, klen) == 0)
            return c;
        p = c + 1;
    }
    return NULL;
}

/* Mark bytes [from, to) of a `len`-byte text in *hit (allocated on first
 * use).  -1 when out of memory. */
static int mark(unsigned char **hit, size_t len, size_t from, size_t to) {
    if (!*hit && !(*hit = calloc(len, 1)))
        return -1;
    memset(*hit + from, 1, to - from);
    return 0;
}

/* Mark the occurrences of `k` in `t`: all of them, or the whole-word ones
 * for a short secret.  Overlapping occurrences are all marked. */
static int mark_plain(const char *t, size_t len, const char *k, size_t klen,
                      unsigned char **hit) {
    const char *end = t + len;
    for (const char *p = find_bytes(t, end, k, klen); p; p = find_bytes(p + 1, end, k, klen)) {
        size_t at = (size_t)(p - t);
        bool whole = (at == 0 || !word_byte(t[at - 1])) &&
                     (at + klen == len || !word_byte(t[at + klen]));
        if ((klen >= PC_SECRET_SHORT || whole) && mark(hit, len, at, at + klen) != 0)
            return -1;
    }
    return 0;
}

/* Mark the masked echoes of `k`: a word made of a prefix of `k`, a run of
 * MASK_MIN or more mask bytes and a suffix of `k`, showing at least
 * MASK_SHOWN (and fewer than klen) bytes of it. */
static int mark_masked(const char *t, size_t len, const char *k, size_t klen,
                       unsigned char **hit) {
    size_t i = 0;
    while (i < len) {
        if (!mask_byte(t[i])) {
            i++;
            continue;
        }
        size_t ms = i, me = i;
        while (me < len && mask_byte(t[me]))
            me++;
        i = me;
        size_t hs = ms, te = me;
        while (hs > 0 && word_byte(t[hs - 1]))
            hs--;
        while (te < len && word_byte(t[te]))
            te++;
        size_t head = ms - hs, tail = te - me;
        if (me - ms < MASK_MIN || head + tail < MASK_SHOWN || head + tail >= klen ||
            memcmp(t + hs, k, head) != 0 || memcmp(t + me, k + klen - tail, tail) != 0)
            continue;
        if (mark(hit, len, hs, te) != 0)
            return -1;
    }
    return 0;
}

int pc_scrub(const pc_secrets *s, const char *text, size_t len, char **out, size_t *out_len) {
    *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!s || !s->n || !text || !len)
        return 0;
    unsigned char *hit = NULL;
    for (size_t i = 0; i < s->n; i++) {
        size_t klen = strlen(s->v[i]);
        if (mark_plain(text, len, s->v[i], klen, &hit) != 0 ||
            (klen >= PC_SECRET_SHORT && mark_masked(text, len, s->v[i], klen, &hit) != 0)) {
            free(hit);
            return -1;
        }
    }
    if (!hit)
        return 0;
    const size_t rlen = sizeof PC_REDACTED - 1;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += !hit[i] ? 1 : i == 0 || !hit[i - 1] ? rlen : 0;
    char *o = malloc(n + 1);
    if (!o) {
        free(hit);
        return -1;
    }
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        if (!hit[i]) {
            o[j++] = text[i];
        } else if (i == 0 || !hit[i - 1]) { /* one marker per run of secret bytes */
            memcpy(o + j, PC_REDACTED, rlen);
            j += rlen;
        }
    }
    o[j] = '\0';
    free(hit);
    *out = o;
    if (out_len)
        *out_len = j;
    return 0;
}

static int scrub_value(const pc_secrets *s, json_t *v, int depth) {
    if (depth > SCRUB_MAX_DEPTH)
        return -1;
    int rc = 0;
    if (json_is_string(v)) {
        char *text;
        size_t n;
        if (pc_scrub(s, json_string_value(v), json_string_length(v), &text, &n) != 0)
            return json_string_set(v, PC_REDACTED) == 0 ? 0 : -1;
        if (text && json_string_setn(v, text, n) != 0)
            rc = json_string_set(v, PC_REDACTED) == 0 ? 0 : -1;
        free(text);
    } else if (json_is_object(v)) {
        const char *key;
        json_t *member;
        json_object_foreach(v, key, member) {
            if (scrub_value(s, member, depth + 1) != 0)
                rc = -1;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *elem;
        json_array_foreach(v, i, elem) {
            if (scrub_value(s, elem, depth + 1) != 0)
                rc = -1;
        }
    }
    return rc;
}

int pc_scrub_json(const pc_secrets *s, json_t *v) {
    if (!s || !s->n || !v)
        return 0;
    return scrub_value(s, v, 0);
}

/* ------------------------------------------------------------------------ */
/* Request translation                                                      */
/* ------------------------------------------------------------------------ */

int pc_bad(char *msg, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (msg && size)
        vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return -1;
}

int pc_buf_add(pc_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int pc_buf_str(pc_buf *b, const char *s, size_t n) {
    if (pc_buf_add(b, "\"", 1) != 0)
        return -1;
    size_t run = 0; /* the start of the bytes that need no escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        char esc[8];
        size_t len = 2;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default: len = (size_t)snprintf(esc, sizeof esc, "\\u%04X", (unsigned)c); break;
        }
        if (pc_buf_add(b, s + run, i - run) != 0 || pc_buf_add(b, esc, len) != 0)
            return -1;
        run = i + 1;
    }
    return pc_buf_add(b, s + run, n - run) || pc_buf_add(b, "\"", 1) ? -1 : 0;
}

int pc_buf_piece(pc_buf *b, const char *s) {
    if (!s[0])
        return 0;
    if (b->len && pc_buf_add(b, "\n\n", 2) != 0)
        return -1;
    return pc_buf_add(b, s, strlen(s));
}

/* jansson (2.14) ignores the callback's failure while it writes an object's
 * key and goes on, so a dump whose buffer could not grow for a key would
 * report success without the key's bytes (not JSON): the first failure
 * sticks, every later write fails too, and the caller checks it. */
typedef struct buf_sink {
    pc_buf *b;
    bool failed;
} buf_sink;

static int buf_dump(const char *s, size_t n, void *ud) {
    buf_sink *k = ud;
    if (!k->failed && pc_buf_add(k->b, s, n) != 0)
        k->failed = true;
    return k->failed ? -1 : 0;
}

int pc_buf_json(pc_buf *b, const json_t *v, char *msg, size_t size) {
    size_t mark = b->len; /* written straight into the buffer: no text of its own */
    buf_sink k = {b, false};
    if (v && json_dump_callback(v, buf_dump, &k, JSON_COMPACT | JSON_ENCODE_ANY) == 0 && !k.failed)
        return 0;
    b->len = mark;
    if (b->p)
        b->p[mark] = '\0';
    return PC_OOM(msg, size);
}

json_t *pc_body_from_text(char *text, char *msg, size_t size) {
    if (!text)
        return NULL;
    json_t *body = json_loads(text, 0, NULL);
    free(text);
    if (!body)
        PC_OOM(msg, size);
    return body;
}

const char *pc_message_role(const json_t *m, size_t i, char *where, size_t where_size,
                            const json_t **content, char *msg, size_t size) {
    snprintf(where, where_size, "messages[%zu]", i);
    const char *role = json_string_value(json_object_get(m, "role"));
    *content = json_object_get(m, "content");
    if (!role || !json_is_array(*content)) {
        pc_bad(msg, size, "%s: needs a string \"role\" and a \"content\" array", where);
        return NULL;
    }
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
        strcmp(role, "tool")) {
        pc_bad(msg, size, "%s: unknown role \"%s\"", where, role);
        return NULL;
    }
    return role;
}

const char *pc_block_type(const json_t *block) {
    return json_string_value(json_object_get(block, "type"));
}

int pc_tool_choice(const json_t *request, const char **choice, char *msg, size_t size) {
    const json_t *v = json_object_get(request, "tool_choice");
    const char *cs = json_string_value(v);
    *choice = NULL;
    if (v && !json_is_null(v) &&
        (!cs || (strcmp(cs, "auto") && strcmp(cs, "none") && strcmp(cs, "required"))))
        return pc_bad(msg, size, "tool_choice: expected \"auto\", \"none\" or \"required\"");
    *choice = cs;
    return 0;
}

const char *pc_request_check(const json_t *request, char *msg, size_t size) {
    if (msg && size)
        msg[0] = '\0';
    if (!json_is_object(request)) {
        pc_bad(msg, size, "request: expected an object");
        return NULL;
    }
    const char *model = json_string_value(json_object_get(request, "model"));
    json_t *max_tokens = json_object_get(request, "max_tokens");
    json_t *temperature = json_object_get(request, "temperature");
    if (!model || !model[0]) {
        pc_bad(msg, size, "model: expected a non-empty string");
        return NULL;
    }
    if (max_tokens && !json_is_null(max_tokens) &&
        (!json_is_integer(max_tokens) || json_integer_value(max_tokens) < 1)) {
        pc_bad(msg, size, "max_tokens: expected a positive integer");
        return NULL;
    }
    if (temperature && !json_is_null(temperature) && !json_is_number(temperature)) {
        pc_bad(msg, size, "temperature: expected a number");
        return NULL;
    }
    return model;
}

/* A new empty array to translate the array `in` into; NULL with `msg`
 * "<what>: expected an array" or "out of memory". */
static json_t *pc_array_for(const json_t *in, const char *what, char *msg, size_t size) {
    if (!json_is_array(in)) {
        pc_bad(msg, size, "%s: expected an array", what);
        return NULL;
    }
    json_t *out = json_array();
    if (!out)
        PC_OOM(msg, size);
    return out;
}

int pc_image_fields(const json_t *block, const char *where, const char **media,
                    const char **data, char *msg, size_t size) {
    *media = json_string_value(json_object_get(block, "media_type"));
    *data = json_string_value(json_object_get(block, "data"));
    if (!*media || !*data)
        return pc_bad(msg, size, "%s: image needs string \"media_type\" and \"data\"", where);
    return 0;
}

json_t *pc_translate_tools(const json_t *tools, const char *schema_key, bool wrap_function,
                           char *msg, size_t size) {
    json_t *out = pc_array_for(tools, "tools", msg, size);
    if (!out)
        return NULL;
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        json_t *desc = json_object_get(t, "description");
        json_t *params = json_object_get(t, "parameters");
        if (!name || (desc && !json_is_string(desc)) || (params && !json_is_object(params))) {
            pc_bad(msg, size,
                   "tools[%zu]: needs a string \"name\", a string \"description\" and an object "
                   "\"parameters\"",
                   i);
            json_decref(out);
            return NULL;
        }
        json_t *fn = json_pack("{s:s}", "name", name);
        if (fn && ((desc && json_object_set(fn, "description", desc) != 0) ||
                   json_object_set_new(fn, schema_key,
                                       params ? json_incref(params)
                                              : json_pack("{s:s,s:{}}", "type", "object",
                                                          "properties")) != 0)) {
            json_decref(fn);
            fn = NULL;
        }
        json_t *entry = fn && wrap_function
                            ? json_pack("{s:s,s:o}", "type", "function", "function", fn)
                            : fn;
        if (!entry || json_array_append_new(out, entry) != 0) {
            PC_OOM(msg, size);
            json_decref(out);
            return NULL;
        }
    }
    return out;
}
