/*
 * core/format/assistant_stream.c - the compact timed form of a model call's stream
 * (docs/session-log.md, "The stream"), its exact expansion, and the fold of
 * chunks into an assistant message (docs/session-log.md: the logged message is
 * re-buildable from the logged stream).
 */
#include "assistant_stream.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Compact form                                                              */
/* ------------------------------------------------------------------------ */

typedef enum run_kind { R_NONE = 0, R_TEXT, R_REASONING, R_TOOL } run_kind;

static const char *record_type(run_kind k) {
    return k == R_TEXT ? "text-chunks" : k == R_REASONING ? "reasoning-chunks" : "tool-call-chunks";
}

static const char *delta_type(run_kind k) {
    return k == R_TEXT ? "text-delta" : k == R_REASONING ? "reasoning-delta" : "tool-call-delta";
}

/* The payload member of a delta of kind k ("text" or "arguments_delta"). */
static const char *delta_key(run_kind k) { return k == R_TOOL ? "arguments_delta" : "text"; }

/* A chunk's members as the packing reads them (borrowed), in one pass. */
typedef struct chunk_view {
    run_kind kind; /* what it can be packed into; R_NONE: a "chunk" record */
    json_int_t index, time;
    const json_t *delta, *id, *name;
} chunk_view;

/* The run kind a chunk can be packed into: exactly {type, index, text |
 * arguments_delta, time} (a tool call delta may add string id and name);
 * R_NONE otherwise. */
static chunk_view view_of(const json_t *c) {
    chunk_view v = {R_NONE, 0, 0, NULL, NULL, NULL};
    const json_t *type = NULL, *index = NULL, *time = NULL, *text = NULL, *args = NULL;
    size_t other = 0;
    for (void *it = json_object_iter((json_t *)(uintptr_t)c); it;
         it = json_object_iter_next((json_t *)(uintptr_t)c, it)) {
        const char *key = json_object_iter_key(it);
        const json_t *val = json_object_iter_value(it);
        if (!strcmp(key, "type"))
            type = val;
        else if (!strcmp(key, "index"))
            index = val;
        else if (!strcmp(key, "time"))
            time = val;
        else if (!strcmp(key, "text"))
            text = val;
        else if (!strcmp(key, "arguments_delta"))
            args = val;
        else if (!strcmp(key, "id"))
            v.id = val;
        else if (!strcmp(key, "name"))
            v.name = val;
        else
            other++;
    }
    v.index = json_is_integer(index) ? json_integer_value(index) : 0;
    v.time = json_is_integer(time) ? json_integer_value(time) : 0;
    const char *t = json_string_value(type);
    run_kind k = !t                              ? R_NONE
                 : !strcmp(t, "text-delta")      ? R_TEXT
                 : !strcmp(t, "reasoning-delta") ? R_REASONING
                 : !strcmp(t, "tool-call-delta") ? R_TOOL
                                                 : R_NONE;
    v.delta = k == R_TOOL ? args : text;
    if (k == R_NONE || other || !json_is_integer(index) || !json_is_integer(time) ||
        !json_is_string(v.delta) || (k == R_TOOL ? text != NULL : args != NULL))
        return v;
    if (k != R_TOOL ? v.id || v.name
                    : (v.id && !json_is_string(v.id)) || (v.name && !json_is_string(v.name)))
        return v;
    v.kind = k;
    return v;
}

/* {"type":"chunk","time"?,"chunk"}: the chunk without its integer time
 * (its containers copied, its scalars shared: the record is logged as it is). */
static json_t *chunk_record(const json_t *c) {
    json_t *time = json_object_get(c, "time");
    bool timed = json_is_integer(time);
    json_t *rec = json_object(), *rest = json_object();
    int rc = rec && rest ? json_object_set_new(rec, "type", json_string("chunk")) : -1;
    if (rc == 0 && timed)
        rc = json_object_set(rec, "time", time);
    for (void *it = json_object_iter((json_t *)(uintptr_t)c); rc == 0 && it;
         it = json_object_iter_next((json_t *)(uintptr_t)c, it)) {
        const char *key = json_object_iter_key(it);
        if (!(timed && !strcmp(key, "time")))
            rc = json_object_set_new(rest, key,
                                     weir__json_copy_tree(json_object_iter_value(it)));
    }
    if (rc == 0)
        rc = json_object_set_new(rec, "chunk", rest);
    else
        json_decref(rest);
    if (rc != 0) {
        json_decref(rec);
        return NULL;
    }
    return rec;
}

/* A new run record {type, index, time0, dt:[0]} (key order of the log). */
static json_t *run_record(run_kind k, json_int_t index, json_int_t time0) {
    json_t *rec = json_object(), *dt = json_array();
    if (!rec || !dt || json_array_append_new(dt, json_integer(0)) != 0 ||
        json_object_set_new(rec, "type", json_string(record_type(k))) != 0 ||
        json_object_set_new(rec, "index", json_integer(index)) != 0 ||
        json_object_set_new(rec, "time0", json_integer(time0)) != 0) {
        json_decref(dt);
        json_decref(rec);
        return NULL;
    }
    if (json_object_set_new(rec, "dt", dt) != 0) { /* it takes dt either way */
        json_decref(rec);
        return NULL;
    }
    return rec;
}

json_t *weir__stream_compact(const json_t *chunks) {
    if (!json_is_array(chunks))
        return NULL;
    json_t *out = json_array();
    json_t *run = NULL, *run_dt = NULL, *run_list = NULL; /* the open run (borrowed from out) */
    run_kind kind = R_NONE;
    json_int_t index = 0, time0 = 0;
    size_t i;
    const json_t *c;
    json_array_foreach(chunks, i, c) {
        if (!out)
            break;
        chunk_view v = view_of(c);
        run_kind k = v.kind;
        bool joins = k != R_NONE && run && k == kind && v.index == index &&
                     (k != R_TOOL || (!v.id && !v.name));
        int rc = 0;
        if (joins) {
            rc = json_array_append_new(run_dt, json_integer(v.time - time0)) |
                 json_array_append(run_list, (json_t *)(uintptr_t)v.delta);
        } else if (k != R_NONE) {
            json_t *rec = run_record(k, v.index, v.time);
            if (rec && k == R_TOOL &&
                ((v.id && json_object_set(rec, "id", (json_t *)(uintptr_t)v.id) != 0) ||
                 (v.name && json_object_set(rec, "name", (json_t *)(uintptr_t)v.name) != 0))) {
                json_decref(rec);
                rec = NULL;
            }
            json_t *list = rec ? json_array() : NULL;
            if (list && json_array_append(list, (json_t *)(uintptr_t)v.delta) != 0) {
                json_decref(list);
                list = NULL;
            }
            if (rec && json_object_set_new(rec, k == R_TOOL ? "args" : "texts", list) != 0) {
                json_decref(rec);
                rec = NULL;
            }
            rc = rec ? json_array_append_new(out, rec) : -1;
            run = rc == 0 ? rec : NULL;
            run_dt = json_object_get(run, "dt");
            run_list = list;
            kind = k;
            index = v.index;
            time0 = v.time;
        } else {
            json_t *rec = chunk_record(c);
            rc = rec ? json_array_append_new(out, rec) : -1;
            run = NULL;
        }
        if (rc != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

/* A run record's dt (integers) and texts/args (strings), of one length >= 1. */
static bool run_ok(const json_t *r, const char *list) {
    const json_t *dt = json_object_get(r, "dt"), *v = json_object_get(r, list);
    size_t n = json_array_size(dt), i;
    const json_t *x;
    if (!json_is_array(dt) || !json_is_array(v) || n == 0 || json_array_size(v) != n ||
        !json_is_integer(json_object_get(r, "index")) ||
        !json_is_integer(json_object_get(r, "time0")))
        return false;
    json_array_foreach(dt, i, x) if (!json_is_integer(x)) return false;
    json_array_foreach(v, i, x) if (!json_is_string(x)) return false;
    return true;
}

static bool record_ok(const json_t *r) {
    const char *type = weir__json_str(r, "type", "");
    if (!strcmp(type, "text-chunks") || !strcmp(type, "reasoning-chunks"))
        return json_object_size(r) == 5 && run_ok(r, "texts");
    if (!strcmp(type, "tool-call-chunks")) {
        const json_t *id = json_object_get(r, "id"), *name = json_object_get(r, "name");
        return (!id || json_is_string(id)) && (!name || json_is_string(name)) &&
               json_object_size(r) == 5u + (id != NULL) + (name != NULL) && run_ok(r, "args");
    }
    if (!strcmp(type, "chunk")) {
        const json_t *time = json_object_get(r, "time");
        return json_is_object(json_object_get(r, "chunk")) && (!time || json_is_integer(time)) &&
               json_object_size(r) == 2u + (time != NULL);
    }
    return false;
}

bool weir__stream_is_compact(const json_t *stream) {
    if (!json_is_array(stream))
        return false;
    size_t i;
    const json_t *r;
    json_array_foreach(stream, i, r) if (!json_is_object(r) || !record_ok(r)) return false;
    return true;
}

/* Append the chunks of run record `r` of kind k to `out`. */
static int expand_run(json_t *out, const json_t *r, run_kind k) {
    const json_t *dt = json_object_get(r, "dt");
    const json_t *v = json_object_get(r, k == R_TOOL ? "args" : "texts");
    json_int_t index = weir__json_int(r, "index", 0), time0 = weir__json_int(r, "time0", 0);
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        json_t *c = json_pack("{s:s, s:I}", "type", delta_type(k), "index", index);
        if (c && k == R_TOOL && i == 0) {
            json_t *id = json_object_get(r, "id"), *name = json_object_get(r, "name");
            if ((id && json_object_set(c, "id", id) != 0) ||
                (name && json_object_set(c, "name", name) != 0)) {
                json_decref(c);
                c = NULL;
            }
        }
        if (!c || json_object_set(c, delta_key(k), x) != 0 ||
            json_object_set_new(c, "time",
                                json_integer(time0 + json_integer_value(json_array_get(dt, i)))) !=
                0 ||
            json_array_append_new(out, c) != 0) {
            json_decref(c);
            return -1;
        }
    }
    return 0;
}

json_t *weir__stream_expand(const json_t *stream) {
    if (!json_is_array(stream))
        return NULL;
    if (!weir__stream_is_compact(stream))
        return json_deep_copy(stream); /* the raw form of older logs, as it is */
    json_t *out = json_array();
    size_t i;
    const json_t *r;
    json_array_foreach(stream, i, r) {
        if (!out)
            break;
        const char *type = weir__json_str(r, "type", "");
        int rc;
        if (!strcmp(type, "chunk")) {
            json_t *c = json_deep_copy(json_object_get(r, "chunk"));
            json_t *time = json_object_get(r, "time");
            rc = c && (!time || json_object_set(c, "time", time) == 0)
                     ? json_array_append_new(out, c)
                     : (json_decref(c), -1);
        } else {
            rc = expand_run(out, r,
                            !strcmp(type, "text-chunks")        ? R_TEXT
                            : !strcmp(type, "reasoning-chunks") ? R_REASONING
                                                                : R_TOOL);
        }
        if (rc != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

/* ------------------------------------------------------------------------ */
/* Folding chunks into a message                                             */
/* ------------------------------------------------------------------------ */

/*
 * The fold's state: each block in the order first seen, its JSON object
 * (the message's content block), the time of its first chunk, and the text
 * and arguments its deltas add, gathered in buffers and set as strings once
 * at the end (one copy of each byte, where a string per delta was O(n^2)).
 */
typedef struct fold_buf {
    char *p;
    size_t len, cap;
    bool used;
} fold_buf;

typedef struct fold_block {
    json_int_t index, first;
    json_t *b; /* the content block (owned) */
    fold_buf text, args;
} fold_block;

typedef struct fold {
    fold_block *v;
    size_t n, cap;
} fold;

static void fold_free(fold *f) {
    for (size_t i = 0; i < f->n; i++) {
        json_decref(f->v[i].b);
        weir__free(f->v[i].text.p);
        weir__free(f->v[i].args.p);
    }
    weir__free(f->v);
}

/* The block of `index` (created with `type` on first sight, its first
 * time the chunk's), or NULL when out of memory. */
static fold_block *block_for(fold *f, json_int_t index, const char *type, const json_t *chunk) {
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].index == index)
            return &f->v[i];
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4;
        fold_block *v = weir__realloc(f->v, cap * sizeof *v);
        if (!v)
            return NULL;
        f->v = v;
        f->cap = cap;
    }
    json_t *b = !strcmp(type, "tool_call")
                    ? json_pack("{s:s, s:s, s:s, s:s}", "type", "tool_call", "id", "", "name", "",
                                "arguments", "")
                    : json_pack("{s:s, s:s}", "type", type, "text", "");
    if (!b)
        return NULL;
    fold_block *fb = &f->v[f->n++];
    memset(fb, 0, sizeof *fb);
    fb->index = index;
    fb->first = weir__json_int(chunk, "time", 0);
    fb->b = b;
    return fb;
}

/* Append the C string `more` to the block's member `key` (through `buf`):
 * the member is created (empty) on first use, so it keeps its place among
 * the block's keys (block_for creates a block's own member empty).  0 or -1
 * (out of memory). */
static int append_str(fold_block *fb, fold_buf *buf, const char *key, const char *more) {
    if (!buf->used) {
        if (!json_object_get(fb->b, key) && json_object_set_new(fb->b, key, json_string("")) != 0)
            return -1;
        buf->used = true;
    }
    size_t n = strlen(more);
    if (buf->len + n + 1 > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 64;
        while (cap < buf->len + n + 1)
            cap *= 2;
        char *p = weir__realloc(buf->p, cap);
        if (!p)
            return -1;
        buf->p = p;
        buf->cap = cap;
    }
    memcpy(buf->p + buf->len, more, n);
    buf->len += n;
    buf->p[buf->len] = '\0';
    return 0;
}

/* Set the gathered strings on their blocks. */
static int fold_finish(fold *f) {
    for (size_t i = 0; i < f->n; i++) {
        fold_block *fb = &f->v[i];
        if ((fb->text.used &&
             json_object_set_new(fb->b, "text", json_stringn(fb->text.p, fb->text.len)) != 0) ||
            (fb->args.used && json_object_set_new(fb->b, "arguments",
                                                  json_stringn(fb->args.p, fb->args.len)) != 0))
            return -1;
    }
    return 0;
}

/* A call id for a server that sent none: "call-" and 16 hex digits of a
 * hash of the block's index and first time, so a stream always folds into
 * the same message. */
static json_t *derived_call_id(const char *key, json_int_t time) {
    char src[96];
    snprintf(src, sizeof src, "%s:%lld", key, (long long)time);
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *p = src; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 1099511628211ULL;
    }
    char id[32];
    snprintf(id, sizeof id, "call-%016llx", (unsigned long long)h);
    return json_string(id);
}

/* Whether `id` is the id of a tool_call block of `content` other than
 * block `except`, or one of the ids `taken` already holds. */
static bool id_used(const json_t *content, size_t except, const json_t *taken, const char *id) {
    if (json_object_get(taken, id))
        return true;
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        if (i != except && !strcmp(weir__json_str(b, "type", ""), "tool_call") &&
            !strcmp(weir__json_str(b, "id", ""), id))
            return true;
    }
    return false;
}

int weir__calls_unique(json_t *content, json_t *renamed) {
    if (!json_is_array(content))
        return 0;
    json_t *taken = json_object(); /* the ids kept so far, in block order */
    if (!taken)
        return -1;
    int rc = 0;
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        if (strcmp(weir__json_str(b, "type", ""), "tool_call"))
            continue;
        const char *id = weir__json_str(b, "id", "");
        char *fresh = NULL;
        if (!*id || json_object_get(taken, id)) {
            /* "<id>_<n>" (n from 2), or "call_<n>" for an empty id: the
             * characters every provider accepts in an id; an n whose name
             * another block holds, or will hold, is skipped */
            for (unsigned n = 2; rc == 0 && !fresh; n++) {
                fresh = weir__asprintf("%s_%u", *id ? id : "call", n);
                if (!fresh)
                    rc = -1;
                else if (id_used(content, i, taken, fresh)) {
                    weir__free(fresh);
                    fresh = NULL;
                }
            }
            if (rc == 0 &&
                ((renamed && json_array_append_new(
                                 renamed, json_pack("{s:I, s:s, s:s}", "block", (json_int_t)i,
                                                    "was", id, "id", fresh)) != 0) ||
                 json_object_set_new(b, "id", json_string(fresh)) != 0))
                rc = -1;
            id = weir__json_str(b, "id", "");
        }
        if (rc == 0 && json_object_set_new(taken, id, json_true()) != 0)
            rc = -1;
        weir__free(fresh);
        if (rc != 0)
            break;
    }
    json_decref(taken);
    return rc;
}

int weir__stream_assemble(const json_t *chunks, bool with_calls, weir__assembled *out) {
    memset(out, 0, sizeof *out);
    fold f = {NULL, 0, 0};
    int rc = 0;
    size_t i;
    const json_t *c;
    json_array_foreach(chunks, i, c) {
        if (rc != 0)
            break;
        const char *type = weir__json_str(c, "type", "");
        json_int_t index = weir__json_int(c, "index", 0);
        fold_block *b = NULL;
        if (!strcmp(type, "block-start")) {
            const char *bt = weir__json_str(c, "block_type", "text");
            if (strcmp(bt, "text") && strcmp(bt, "reasoning") && strcmp(bt, "tool_call"))
                continue;
            rc = block_for(&f, index, bt, c) ? 0 : -1;
        } else if (!strcmp(type, "text-delta") || !strcmp(type, "reasoning-delta")) {
            b = block_for(&f, index, type[0] == 't' ? "text" : "reasoning", c);
            rc = b ? append_str(b, &b->text, "text", weir__json_str(c, "text", "")) : -1;
        } else if (!strcmp(type, "tool-call-delta")) {
            b = block_for(&f, index, "tool_call", c);
            if (!b) {
                rc = -1;
                continue;
            }
            const char *id = weir__json_str(c, "id", NULL), *name = weir__json_str(c, "name", NULL);
            if (id && *id)
                json_object_set_new(b->b, "id", json_string(id));
            if (name && *name)
                json_object_set_new(b->b, "name", json_string(name));
            rc = append_str(b, &b->args, "arguments", weir__json_str(c, "arguments_delta", ""));
        } else if (!strcmp(type, "continuation")) {
            /* the provider's opaque continuation of block `index` (plugin.h):
             * kept verbatim, the last one wins; the request filter
             * (core/format/continuation.c) judges it, not the fold.  A block not
             * seen yet (a redacted_thinking block has no deltas) opens as
             * reasoning. */
            const json_t *cont = json_object_get(c, "continuation");
            if (!cont || json_is_null(cont))
                continue;
            b = block_for(&f, index, "reasoning", c);
            rc = b && json_object_set_new(b->b, "continuation", weir__json_copy_tree(cont)) == 0
                     ? 0
                     : -1;
        } else if (!strcmp(type, "usage")) {
            out->usage = json_object_get(c, "usage");
        } else if (!strcmp(type, "finish")) {
            const json_t *reason = json_object_get(c, "reason");
            out->finish = weir__json_str(reason, "kind", NULL);
            out->failure = json_object_get(reason, "failure");
        }
    }
    if (rc == 0)
        rc = fold_finish(&f);
    if (out->finish && !strcmp(out->finish, "max-tokens"))
        with_calls = false; /* never dispatched: keep the history free of dangling calls */
    json_t *content = json_array();
    out->calls = json_array();
    if (rc != 0 || !content || !out->calls)
        goto fail;
    for (i = 0; i < f.n; i++) {
        json_t *b = f.v[i].b;
        const char *bt = weir__json_str(b, "type", "");
        if (!strcmp(bt, "tool_call")) {
            if (!with_calls)
                continue;
            if (!*weir__json_str(b, "arguments", ""))
                json_object_set_new(b, "arguments", json_string("{}"));
            if (!*weir__json_str(b, "id", "")) { /* some servers send no call ids */
                char key[32];
                snprintf(key, sizeof key, "%lld", (long long)f.v[i].index);
                if (json_object_set_new(b, "id", derived_call_id(key, f.v[i].first)) != 0)
                    goto fail;
            }
        } else if (!*weir__json_str(b, "text", "")) {
            /* empty text/reasoning blocks carry nothing, but a reasoning
             * block's continuation (a redacted or empty thinking block) goes
             * back to the provider */
            if (strcmp(bt, "reasoning") || !json_object_get(b, "continuation"))
                continue;
        } else {
            out->visible = true;
        }
        if (json_array_append(content, b) != 0)
            goto fail;
    }
    /* one id per call: a server that repeats an id in one reply (call_0 in
     * every response, two tool_use blocks with one id) gets distinct ones,
     * the same on every fold of the stream (docs/session-log.md) */
    if (weir__calls_unique(content, NULL) != 0)
        goto fail;
    json_array_foreach(content, i, c) {
        if (strcmp(weir__json_str(c, "type", ""), "tool_call"))
            continue;
        if (json_array_append_new(out->calls,
                                  json_pack("{s:O, s:O, s:O}", "id", json_object_get(c, "id"),
                                            "name", json_object_get(c, "name"), "arguments",
                                            json_object_get(c, "arguments"))) != 0)
            goto fail;
    }
    out->message = json_pack("{s:s, s:o}", "role", "assistant", "content", content);
    content = NULL;
    if (!out->message)
        goto fail;
    fold_free(&f);
    return 0;
fail:
    json_decref(content);
    fold_free(&f);
    json_decref(out->calls);
    out->calls = NULL;
    return -1;
}
