/*
 * core/format/surface.c - the model-visible surface (docs/session-log.md).
 *
 * The surface is the ordered list of current surface nodes (events of the
 * four surface types).  An "append" op adds the event at the end; a replace
 * op removes a contiguous run of current nodes (by surface position) and puts
 * the new event in its place.  weir__surface_check() validates a candidate
 * envelope without changing anything, so a rejected append leaves no trace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "surface.h"

typedef struct node {
    size_t seq;
    uint64_t ord; /* its place among every surface event applied (weir__surface_runs) */
    json_t *event; /* reference held by the surface */
} node;

struct weir__surface {
    node *nodes;
    size_t len, cap;
    uint64_t replace_generation;
    uint64_t applied; /* surface events applied (or restored past) so far */
};

static const char *const surface_types[] = {"system/message", "user/message", "assistant/message",
                                            "tool/result"};
static const char *const surface_roles[] = {"system", "user", "assistant", "tool"};

static int surface_index(const char *type) {
    for (size_t i = 0; type && i < sizeof surface_types / sizeof *surface_types; i++)
        if (strcmp(type, surface_types[i]) == 0)
            return (int)i;
    return -1;
}

bool weir__is_surface_type(const char *type) { return surface_index(type) >= 0; }

int weir__surface_create(weir__surface **out) {
    if (!out)
        return WEIR_E_INVAL;
    *out = weir__calloc(1, sizeof **out);
    return *out ? WEIR_OK : WEIR_E_NOMEM;
}

void weir__surface_destroy(weir__surface *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->len; i++)
        json_decref(s->nodes[i].event);
    weir__free(s->nodes);
    weir__free(s);
}

int weir__surface_reserve(weir__surface *s, size_t extra) {
    if (!s)
        return WEIR_E_INVAL;
    if (s->len + extra <= s->cap)
        return WEIR_OK;
    size_t cap = s->cap ? s->cap * 2 : 16;
    while (cap < s->len + extra)
        cap *= 2;
    node *n = weir__realloc(s->nodes, cap * sizeof *n);
    if (!n)
        return WEIR_E_NOMEM;
    s->nodes = n;
    s->cap = cap;
    return WEIR_OK;
}

/* Position of `seq` among the current nodes, or -1. */
static long find_node(const weir__surface *s, json_int_t seq) {
    for (size_t i = 0; i < s->len; i++)
        if ((json_int_t)s->nodes[i].seq == seq)
            return (long)i;
    return -1;
}

long weir__surface_find(const weir__surface *s, size_t seq) {
    return s ? find_node(s, (json_int_t)seq) : -1;
}

json_t *weir__surface_swap(weir__surface *s, size_t i, json_t *event) {
    if (!s || i >= s->len || !event) {
        json_decref(event);
        return NULL;
    }
    json_t *old = s->nodes[i].event;
    s->nodes[i].event = event;
    return old;
}

static bool seqs_contain(const json_t *seqs, size_t seq) {
    size_t i;
    json_t *v;
    json_array_foreach(seqs, i, v) {
        if (json_integer_value(v) == (json_int_t)seq)
            return true;
    }
    return false;
}

/* Objects `a` and `b` have the same keys and equal values, except `skip`. */
static bool equal_except(json_t *a, json_t *b, const char *skip) {
    if (!json_is_object(a) || !json_is_object(b))
        return false;
    const char *key;
    json_t *v;
    size_t na = 0, nb = 0;
    json_object_foreach(a, key, v) {
        if (strcmp(key, skip) == 0)
            continue;
        na++;
        if (!json_equal(v, json_object_get(b, key)))
            return false;
    }
    json_object_foreach(b, key, v) {
        if (strcmp(key, skip) != 0)
            nb++;
    }
    return na == nb;
}

static int fail(char *msg, size_t size, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int fail(char *msg, size_t size, const char *fmt, ...) {
    if (msg && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int check_message(const json_t *data, int idx, char *msg, size_t size) {
    const json_t *m = json_object_get(data, "message");
    if (!json_is_object(m))
        return fail(msg, size, "%s needs data.message (an object)", surface_types[idx]);
    if (strcmp(weir__json_str(m, "role", ""), surface_roles[idx]) != 0)
        return fail(msg, size, "%s needs data.message.role \"%s\"", surface_types[idx],
                    surface_roles[idx]);
    const json_t *content = json_object_get(m, "content");
    if (!json_is_array(content))
        return fail(msg, size, "%s needs data.message.content (an array of blocks)",
                    surface_types[idx]);
    /* The fields the derivation, the checker and the providers rely on
     * (docs/providers.md); other block types (image, ...) pass as they are. */
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        const char *bt = weir__json_str(b, "type", NULL);
        const char *why = NULL;
        if (!bt)
            why = "must be an object with a string type";
        else if (!strcmp(bt, "text") || !strcmp(bt, "reasoning"))
            why = json_is_string(json_object_get(b, "text")) ? NULL : "needs a string text";
        else if (!strcmp(bt, "tool_call"))
            why = !*weir__json_str(b, "id", "") ? "needs a non-empty string id"
                  : !json_is_string(json_object_get(b, "name")) ? "needs a string name"
                  : !json_is_string(json_object_get(b, "arguments"))
                      ? "needs string arguments (the raw JSON text)"
                      : NULL;
        else if (!strcmp(bt, "tool_result"))
            why = !*weir__json_str(b, "call_id", "")                ? "needs a non-empty string call_id"
                  : !json_is_array(json_object_get(b, "content")) ? "needs a content array"
                                                                   : NULL;
        if (why)
            return fail(msg, size, "%s: data.message.content[%zu] %s", surface_types[idx], i,
                        why);
    }
    return 0;
}

static int cmp_seq(const void *a, const void *b) {
    json_int_t x = *(const json_int_t *)a, y = *(const json_int_t *)b;
    return (x > y) - (x < y);
}

/* The values of `src` (integers), sorted, into a new array (weir__free
 * it), or NULL when out of memory. */
static json_int_t *sorted_seqs(const json_t *src) {
    size_t n = json_array_size(src);
    json_int_t *v = weir__malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = json_integer_value(json_array_get(src, i));
    if (v)
        qsort(v, n, sizeof *v, cmp_seq);
    return v;
}

/* Whether the sorted `v` (`n` values) holds `seq`. */
static bool sorted_contain(const json_int_t *v, size_t n, json_int_t seq) {
    return bsearch(&seq, v, n, sizeof *v, cmp_seq) != NULL;
}

/* source_seqs: earlier seqs, none twice.  O(n log n): a compaction's
 * replace lists every seq it shadows, which can be hundreds of thousands. */
static int check_source_seqs(const json_t *src, json_int_t seq, char *msg, size_t size) {
    if (!json_is_array(src) || json_array_size(src) == 0)
        return fail(msg, size, "source_seqs must be a non-empty array of earlier seqs");
    size_t i, n = json_array_size(src);
    json_t *v;
    json_array_foreach(src, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= seq)
            return fail(msg, size, "source_seqs[%zu] is not an earlier seq", i);
    }
    json_int_t *sorted = sorted_seqs(src);
    for (size_t k = 1; sorted && k < n; k++)
        if (sorted[k] == sorted[k - 1]) {
            json_int_t twice = sorted[k];
            weir__free(sorted);
            return fail(msg, size, "source_seqs lists seq %" JSON_INTEGER_FORMAT " twice", twice);
        }
    if (sorted) {
        weir__free(sorted);
        return 0;
    }
    /* out of memory: the same check without the copy (quadratic, but never
     * calls a valid event invalid) */
    json_array_foreach(src, i, v) {
        for (size_t j = 0; j < i; j++)
            if (json_integer_value(json_array_get(src, j)) == json_integer_value(v))
                return fail(msg, size, "source_seqs lists seq %" JSON_INTEGER_FORMAT " twice",
                            json_integer_value(v));
    }
    return 0;
}

static int check_replace(const weir__surface *s, const json_t *event, const json_t *op, char *msg,
                         size_t size) {
    const json_t *a = json_object_get(op, "start_seq"), *b = json_object_get(op, "end_seq");
    if (!json_is_integer(a) || !json_is_integer(b))
        return fail(msg, size, "replace needs integer start_seq and end_seq");
    long start = find_node(s, json_integer_value(a)), end = find_node(s, json_integer_value(b));
    if (start < 0)
        return fail(msg, size,
                    "replace start_seq %" JSON_INTEGER_FORMAT " is not a current surface node",
                    json_integer_value(a));
    if (end < 0)
        return fail(msg, size,
                    "replace end_seq %" JSON_INTEGER_FORMAT " is not a current surface node",
                    json_integer_value(b));
    if (start > end)
        return fail(msg, size,
                    "replace start_seq %" JSON_INTEGER_FORMAT
                    " comes after end_seq %" JSON_INTEGER_FORMAT " in surface order",
                    json_integer_value(a), json_integer_value(b));
    const json_t *src = json_object_get(event, "source_seqs");
    json_int_t *sorted = src ? sorted_seqs(src) : NULL; /* NULL: out of memory, look linearly */
    size_t nsrc = json_array_size(src);
    for (long i = start; i <= end; i++) {
        json_int_t at = (json_int_t)s->nodes[i].seq;
        bool listed = src && (sorted ? sorted_contain(sorted, nsrc, at)
                                     : seqs_contain(src, s->nodes[i].seq));
        if (!listed) {
            weir__free(sorted);
            return fail(msg, size, "source_seqs must include shadowed seq %zu", s->nodes[i].seq);
        }
    }
    weir__free(sorted);
    bool new_result = strcmp(weir__json_str(event, "type", ""), "tool/result") == 0;
    bool old_result = false;
    for (long i = start; i <= end; i++)
        if (strcmp(weir__json_str(s->nodes[i].event, "type", ""), "tool/result") == 0)
            old_result = true;
    if (!new_result)
        return 0;
    /* A tool/result rewrite: one tool/result node, only message.content changes. */
    if (start != end || !old_result)
        return fail(msg, size, "a tool/result may only replace a single tool/result node");
    json_t *od = json_object_get(s->nodes[start].event, "data");
    json_t *nd = json_object_get(event, "data");
    if (!equal_except(od, nd, "message") ||
        !equal_except(json_object_get(od, "message"), json_object_get(nd, "message"), "content"))
        return fail(msg, size, "a tool/result rewrite may change only message.content");
    return 0;
}

int weir__surface_check(const weir__surface *s, const json_t *event, char *msg, size_t msg_size) {
    if (msg && msg_size)
        msg[0] = '\0';
    if (!s || !json_is_object(event))
        return fail(msg, msg_size, "not an event object");
    const char *type = weir__json_str(event, "type", "");
    int idx = surface_index(type);
    json_int_t seq = weir__json_int(event, "seq", -1);
    const json_t *op = json_object_get(event, "surface_op");
    const json_t *src = json_object_get(event, "source_seqs");
    if (idx < 0) {
        if (op)
            return fail(msg, msg_size, "surface_op is only allowed on surface types, not %s", type);
        if (src)
            return fail(msg, msg_size, "source_seqs is only allowed on surface types, not %s",
                        type);
        return 0;
    }
    if (!op)
        return fail(msg, msg_size, "%s needs surface_op", type);
    if (check_message(json_object_get(event, "data"), idx, msg, msg_size) < 0)
        return -1;
    if (src && check_source_seqs(src, seq, msg, msg_size) < 0)
        return -1;
    if (json_is_string(op) && strcmp(json_string_value(op), "append") == 0)
        return 0;
    if (json_is_object(op) && strcmp(weir__json_str(op, "op", ""), "replace") == 0)
        return check_replace(s, event, op, msg, msg_size);
    return fail(msg, msg_size, "surface_op must be \"append\" or {\"op\":\"replace\",...}");
}

json_t *weir__surface_lean(const json_t *ev) {
    const json_t *data = json_object_get(ev, "data");
    if (strcmp(weir__json_str(ev, "type", ""), "assistant/message") != 0 ||
        !json_object_get(data, "stream"))
        return NULL;
    json_t *lean = json_copy((json_t *)(uintptr_t)ev), *d = json_copy((json_t *)(uintptr_t)data);
    if (!lean || !d || json_object_del(d, "stream") != 0) {
        json_decref(lean);
        json_decref(d);
        return NULL;
    }
    if (json_object_set_new(lean, "data", d) != 0) { /* it takes d either way */
        json_decref(lean);
        return NULL;
    }
    return lean;
}

int weir__surface_apply(weir__surface *s, const json_t *event) {
    if (!s || !json_is_object(event))
        return WEIR_E_INVAL;
    if (!weir__is_surface_type(weir__json_str(event, "type", NULL)))
        return WEIR_OK;
    const json_t *op = json_object_get(event, "surface_op");
    long start = (long)s->len, end = start - 1; /* append: empty range at the end */
    if (json_is_object(op)) {
        start = find_node(s, weir__json_int(op, "start_seq", -1));
        end = find_node(s, weir__json_int(op, "end_seq", -1));
        if (start < 0 || end < start)
            return WEIR_E_INVAL;
    }
    size_t removed = (size_t)(end - start + 1);
    if (removed == 0 && weir__surface_reserve(s, 1) != WEIR_OK)
        return WEIR_E_NOMEM;
    for (long i = start; i <= end; i++)
        json_decref(s->nodes[i].event);
    if (removed != 1)
        memmove(&s->nodes[start + 1], &s->nodes[end + 1],
                (s->len - (size_t)end - 1) * sizeof *s->nodes);
    s->len = s->len + 1 - removed;
    s->nodes[start].seq = (size_t)weir__json_int(event, "seq", 0);
    s->nodes[start].ord = s->applied++;
    /* The surface keeps a reference: envelopes are never modified once logged. */
    s->nodes[start].event = json_incref((json_t *)(uintptr_t)event);
    if (removed)
        s->replace_generation++;
    return WEIR_OK;
}

json_t *weir__surface_runs(const weir__surface *s) {
    json_t *runs = s ? json_array() : NULL;
    for (size_t i = 0; runs && i < s->len;) {
        size_t j = i;
        while (j + 1 < s->len && s->nodes[j + 1].ord == s->nodes[j].ord + 1)
            j++;
        if (json_array_append_new(runs, json_pack("[I,I,I]", (json_int_t)s->nodes[i].seq,
                                                  (json_int_t)s->nodes[j].seq,
                                                  (json_int_t)s->nodes[i].ord)) != 0) {
            json_decref(runs);
            return NULL;
        }
        i = j + 1;
    }
    return runs;
}

uint64_t weir__surface_applied(const weir__surface *s) { return s ? s->applied : 0; }

int weir__surface_restore(weir__surface *s, const json_t *event, uint64_t ord) {
    if (!s || !json_is_object(event) || !weir__is_surface_type(weir__json_str(event, "type", NULL)))
        return WEIR_E_INVAL;
    if (weir__surface_reserve(s, 1) != WEIR_OK)
        return WEIR_E_NOMEM;
    node *n = &s->nodes[s->len++];
    n->seq = (size_t)weir__json_int(event, "seq", 0);
    n->ord = ord;
    n->event = json_incref((json_t *)(uintptr_t)event);
    if (ord >= s->applied)
        s->applied = ord + 1;
    return WEIR_OK;
}

int weir__surface_clone(const weir__surface *s, weir__surface **out) {
    if (!s || !out)
        return WEIR_E_INVAL;
    int rc = weir__surface_create(out);
    if (rc == WEIR_OK && (rc = weir__surface_reserve(*out, s->len)) != WEIR_OK) {
        weir__surface_destroy(*out);
        *out = NULL;
    }
    if (rc != WEIR_OK)
        return rc;
    for (size_t i = 0; i < s->len; i++) {
        (*out)->nodes[i] = s->nodes[i];
        json_incref((*out)->nodes[i].event);
    }
    (*out)->len = s->len;
    (*out)->applied = s->applied;
    (*out)->replace_generation = s->replace_generation;
    return WEIR_OK;
}

void weir__surface_restored(weir__surface *s, uint64_t applied) {
    if (s && applied > s->applied)
        s->applied = applied;
}

size_t weir__surface_len(const weir__surface *s) { return s ? s->len : 0; }

size_t weir__surface_node(const weir__surface *s, size_t i) {
    return s && i < s->len ? s->nodes[i].seq : (size_t)-1;
}

const json_t *weir__surface_event(const weir__surface *s, size_t i) {
    return s && i < s->len ? s->nodes[i].event : NULL;
}

uint64_t weir__surface_ord(const weir__surface *s, size_t i) {
    return s && i < s->len ? s->nodes[i].ord : 0;
}

uint64_t weir__surface_replace_generation(const weir__surface *s) {
    return s ? s->replace_generation : 0;
}

/* No blocks, or only text/reasoning blocks with empty text.  A reasoning
 * block that carries a continuation is content even with empty text: an
 * Anthropic redacted_thinking block (whose reply may hold nothing else) has
 * no text and goes back as received (docs/session-log.md, "Reasoning
 * continuations"; platform.claude.com/docs/en/build-with-claude/
 * extended-thinking, "Thinking redaction").  The request's filter leaves it
 * out when it may not be sent. */
static bool content_empty(const json_t *content) {
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *t = weir__json_str(b, "type", "");
        if ((strcmp(t, "text") != 0 && strcmp(t, "reasoning") != 0) ||
            *weir__json_str(b, "text", "") != '\0' ||
            (strcmp(t, "reasoning") == 0 && json_object_get(b, "continuation")))
            return false;
    }
    return true;
}

/* *out = the message `event` contributes, or NULL for none.  WEIR_E_NOMEM
 * only when a message is due but could not be built.  `share`: the message
 * shares the event's values (the event's own message object, or a user
 * message's content and source), read-only as the log is; else a deep
 * copy the caller may change. */
static int derive(const json_t *event, bool share, json_t **out) {
    *out = NULL;
    int idx = surface_index(weir__json_str(event, "type", NULL));
    const json_t *m = json_object_get(json_object_get(event, "data"), "message");
    if (idx < 0 || !json_is_object(m))
        return WEIR_OK;
    const json_t *content = json_object_get(m, "content");
    const json_t *source = json_object_get(m, "source");
    switch (idx) {
    case 0: /* system/message */
    case 2: /* assistant/message */
        if (content_empty(content))
            return WEIR_OK;
        *out = share ? json_incref((json_t *)(uintptr_t)m) : json_deep_copy(m);
        break;
    case 1: /* user/message: {role, content, source?}; the input id stays in the log */
        *out = json_object();
        if (*out &&
            (json_object_set_new(*out, "role", json_string("user")) ||
             json_object_set_new(*out, "content",
                                 share ? json_incref((json_t *)(uintptr_t)content)
                                       : json_deep_copy(content)) ||
             (source && json_object_set_new(*out, "source",
                                            share ? json_incref((json_t *)(uintptr_t)source)
                                                  : json_deep_copy(source))))) {
            json_decref(*out);
            *out = NULL;
        }
        break;
    default: /* tool/result */
        *out = share ? json_incref((json_t *)(uintptr_t)m) : json_deep_copy(m);
        break;
    }
    return *out ? WEIR_OK : WEIR_E_NOMEM;
}

json_t *weir__derive_event_message(const json_t *event) {
    json_t *m;
    derive(event, false, &m);
    return m;
}

int weir__derive_event_shared(const json_t *event, json_t **out) {
    if (!out)
        return WEIR_E_INVAL;
    return derive(event, true, out);
}

int weir__surface_derive_into(const weir__surface *s, size_t from, json_t *out, size_t *done) {
    if (!s || !json_is_array(out))
        return WEIR_E_INVAL;
    for (size_t i = from; i < s->len; i++) {
        json_t *m;
        if (derive(s->nodes[i].event, true, &m) != WEIR_OK)
            return WEIR_E_NOMEM;
        if (m && json_array_append_new(out, m) != 0)
            return WEIR_E_NOMEM;
        if (done)
            *done = i + 1;
    }
    return WEIR_OK;
}

json_t *weir__surface_derive(const weir__surface *s) {
    json_t *out = json_array();
    if (!out || weir__surface_derive_into(s, 0, out, NULL) != WEIR_OK) {
        json_decref(out);
        return NULL;
    }
    return out;
}
