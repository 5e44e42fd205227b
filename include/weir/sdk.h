/*
 * weir/sdk.h - the plugin author's helpers that need no host: filling a
 * weir_error, typed config readers, the token estimate and the running
 * token meter compaction-basic uses, a message's text and a bounded text
 * transcript for a summary call.  All static inline (only jansson and libc):
 * a plugin includes it after weir/plugin.h and links nothing more.  The
 * helpers that need the host (an agent's route and window, per-agent state,
 * unique ids) are members of the weir_api table (weir/plugin.h, ABI 1.12).
 * Docs: docs/sdk.md, "Helpers".
 *
 * Every function is reentrant; none keeps state of its own (a weir_meter
 * and a weir_config_reader are their caller's).
 */
#ifndef WEIR_SDK_H
#define WEIR_SDK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "weir/errors.h"
#include "weir/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * Fill `err` (may be NULL: nothing is written) with `code` and the printf
 * text (cut to fit); its plugin and hook are emptied.  Returns `code`, so
 * that `return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");` ends
 * an init.  Any thread.
 * Since: ABI 1.12
 */
static inline int weir_error_fill(weir_error *err, int code, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static inline int weir_error_fill(weir_error *err, int code, const char *fmt, ...) {
    if (!err)
        return code;
    memset(err, 0, sizeof *err);
    err->code = (weir_status)code;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ------------------------------------------------------------------------ */
/* Typed config readers                                                      */
/* ------------------------------------------------------------------------ */

/**
 * A reader of one row's config.  The first failed read fills `err` with
 * WEIR_E_PLUGIN_CONFIG, err->plugin = the row and a text naming the row and
 * the field ("row 'cap': config field 'max': expected an integer from 1 to
 * 100, got 0"); `status` keeps that code and every later read does nothing
 * and returns it, so an init reads every field and checks once.  `config`
 * and `row` are borrowed for the reader's life.
 * Since: ABI 1.12
 */
typedef struct weir_config_reader {
    const json_t *config; /* the row's config object, or NULL (all defaults) */
    const char *row;      /* the row id (weir_plugin_id(self)), or NULL */
    weir_error *err;      /* filled at the first failure; may be NULL */
    int status;           /* WEIR_OK, or the first failure's code */
} weir_config_reader;

/**
 * A reader of `config` (borrowed; NULL or an object, else the reader fails
 * at once) for row `row` (borrowed, may be NULL), failing into `err`.
 * Since: ABI 1.12
 */
static inline weir_config_reader weir_config_reader_init(const json_t *config, const char *row,
                                                         weir_error *err) {
    weir_config_reader r = {config, row, err, WEIR_OK};
    if (config && !json_is_object(config)) {
        r.status = weir_error_fill(err, WEIR_E_PLUGIN_CONFIG, "row '%s': config: expected an object",
                                   row ? row : "?");
        if (err)
            snprintf(err->plugin, sizeof err->plugin, "%s", row ? row : "");
    }
    return r;
}

/* The value of `field`, NULL when absent; false when the reader cannot read. */
static inline bool weir__config_get(weir_config_reader *r, const char *field, const void *out,
                                    const json_t **v) {
    *v = NULL;
    if (!r || r->status != WEIR_OK)
        return false;
    if (!field || !out) {
        r->status = weir_error_fill(r->err, WEIR_E_INVAL, "weir_config_*: NULL %s",
                                    field ? "out" : "field");
        return false;
    }
    *v = json_object_get(r->config, field);
    return true;
}

static inline int weir__config_fail(weir_config_reader *r, const char *field, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static inline int weir__config_fail(weir_config_reader *r, const char *field, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    r->status = weir_error_fill(r->err, WEIR_E_PLUGIN_CONFIG, "row '%s': config field '%s': %s",
                                r->row ? r->row : "?", field, what);
    if (r->err)
        snprintf(r->err->plugin, sizeof r->err->plugin, "%s", r->row ? r->row : "");
    return r->status;
}

/* What a JSON value is, for an error ("a string", "null", ...). */
static inline const char *weir__json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/**
 * *out = the string `field` (borrowed from the config: valid while it is),
 * or `dflt` when absent.  Returns r->status.
 * Since: ABI 1.12
 */
static inline int weir_config_string(weir_config_reader *r, const char *field, const char *dflt,
                                     const char **out) {
    const json_t *v;
    if (!weir__config_get(r, field, out, &v))
        return r ? r->status : WEIR_E_INVAL;
    if (!v)
        *out = dflt;
    else if (json_is_string(v))
        *out = json_string_value(v);
    else
        return weir__config_fail(r, field, "expected a string, got %s", weir__json_kind(v));
    return WEIR_OK;
}

/**
 * *out = the integer `field`, or `dflt` when absent; it must lie in
 * [min, max] (a default is not checked).  Returns r->status.
 * Since: ABI 1.12
 */
static inline int weir_config_int(weir_config_reader *r, const char *field, long long dflt,
                                  long long min, long long max, long long *out) {
    const json_t *v;
    if (!weir__config_get(r, field, out, &v))
        return r ? r->status : WEIR_E_INVAL;
    if (!v) {
        *out = dflt;
        return WEIR_OK;
    }
    if (!json_is_integer(v))
        return weir__config_fail(r, field, "expected an integer from %lld to %lld, got %s", min,
                                 max, weir__json_kind(v));
    long long x = (long long)json_integer_value(v);
    if (x < min || x > max)
        return weir__config_fail(r, field, "expected an integer from %lld to %lld, got %lld", min,
                                 max, x);
    *out = x;
    return WEIR_OK;
}

/**
 * *out = the number `field` (an integer or a real), or `dflt` when absent;
 * it must lie in [min, max].  Returns r->status.
 * Since: ABI 1.12
 */
static inline int weir_config_double(weir_config_reader *r, const char *field, double dflt,
                                     double min, double max, double *out) {
    const json_t *v;
    if (!weir__config_get(r, field, out, &v))
        return r ? r->status : WEIR_E_INVAL;
    if (!v) {
        *out = dflt;
        return WEIR_OK;
    }
    if (!json_is_number(v))
        return weir__config_fail(r, field, "expected a number from %g to %g, got %s", min, max,
                                 weir__json_kind(v));
    double x = json_number_value(v);
    if (!(x >= min && x <= max))
        return weir__config_fail(r, field, "expected a number from %g to %g, got %g", min, max, x);
    *out = x;
    return WEIR_OK;
}

/**
 * *out = the boolean `field`, or `dflt` when absent.  Returns r->status.
 * Since: ABI 1.12
 */
static inline int weir_config_bool(weir_config_reader *r, const char *field, bool dflt, bool *out) {
    const json_t *v;
    if (!weir__config_get(r, field, out, &v))
        return r ? r->status : WEIR_E_INVAL;
    if (!v)
        *out = dflt;
    else if (json_is_boolean(v))
        *out = json_is_true(v);
    else
        return weir__config_fail(r, field, "expected a boolean, got %s", weir__json_kind(v));
    return WEIR_OK;
}

/**
 * *out = the array `field` (borrowed from the config), or NULL when absent;
 * it must hold from `min_items` to `max_items` elements, and when
 * `item_type` is not -1 every element must be of that json_type
 * (JSON_STRING ...).  Returns r->status.
 * Since: ABI 1.12
 */
static inline int weir_config_array(weir_config_reader *r, const char *field, size_t min_items,
                                    size_t max_items, int item_type, const json_t **out) {
    const json_t *v;
    if (!weir__config_get(r, field, out, &v))
        return r ? r->status : WEIR_E_INVAL;
    *out = NULL;
    if (!v)
        return WEIR_OK;
    if (!json_is_array(v))
        return weir__config_fail(r, field, "expected an array, got %s", weir__json_kind(v));
    size_t n = json_array_size(v), i;
    if (n < min_items || n > max_items)
        return weir__config_fail(r, field, "expected %zu to %zu items, got %zu", min_items,
                                 max_items, n);
    const json_t *item;
    json_array_foreach(v, i, item) {
        if (item_type != -1 && (int)json_typeof(item) != item_type &&
            !(item_type == JSON_TRUE && json_is_boolean(item)))
            return weir__config_fail(r, field, "item %zu: unexpected %s", i,
                                     weir__json_kind(item));
    }
    *out = v;
    return WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* Token estimates                                                           */
/* ------------------------------------------------------------------------ */

/**
 * Estimated tokens of `chars` bytes of text: ceil(chars / 4).
 * Since: ABI 1.12
 */
static inline size_t weir_tokens_for_chars(size_t chars) {
    return chars / 4 + (chars % 4 != 0);
}

static inline size_t weir__str_len(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_length(v) : 0;
}

/* Characters of a block array (recursively), and images. */
static inline void weir__blocks_size(const json_t *blocks, size_t *chars, size_t *images) {
    size_t i;
    const json_t *b;
    json_array_foreach(blocks, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!type)
            continue;
        if (!strcmp(type, "text") || !strcmp(type, "reasoning"))
            *chars += weir__str_len(b, "text");
        else if (!strcmp(type, "tool_call"))
            *chars += weir__str_len(b, "name") + weir__str_len(b, "arguments") +
                      weir__str_len(b, "id");
        else if (!strcmp(type, "tool_result"))
            weir__blocks_size(json_object_get(b, "content"), chars, images);
        else if (!strcmp(type, "image"))
            (*images)++;
    }
}

/**
 * Estimated tokens of one message (borrowed; NULL or not an object: 0): the
 * text of its blocks (text, reasoning, tool_call name, id and arguments,
 * tool_result content, recursively) at four characters a token, 1000 per
 * image, plus 4 per message.  The estimate compaction-basic measures with.
 * Since: ABI 1.12
 */
static inline size_t weir_message_tokens(const json_t *message) {
    if (!json_is_object(message))
        return 0;
    size_t chars = 0, images = 0;
    weir__blocks_size(json_object_get(message, "content"), &chars, &images);
    return weir_tokens_for_chars(chars) + images * 1000 + 4;
}

/**
 * The sum of weir_message_tokens over an array of messages (borrowed, e.g.
 * what weir_agent_messages returns); 0 for anything else.
 * Since: ABI 1.12
 */
static inline size_t weir_messages_tokens(const json_t *messages) {
    size_t total = 0, i;
    const json_t *m;
    json_array_foreach(messages, i, m) total += weir_message_tokens(m);
    return total;
}

/* No blocks, or only text/reasoning blocks with empty text (the derive's rule). */
static inline bool weir__content_empty(const json_t *content) {
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        const char *t = json_string_value(json_object_get(b, "type"));
        const char *text = json_string_value(json_object_get(b, "text"));
        if (!t || (strcmp(t, "text") != 0 && strcmp(t, "reasoning") != 0) || (text && *text))
            return false;
    }
    return true;
}

/**
 * The price of a surface event of `type` (borrowed, may be NULL: 0)
 * carrying `message` (its data.message, borrowed): weir_message_tokens, or
 * 0 when the node adds no message to the derived history (a system or
 * assistant message whose content is empty or only empty text).
 * Since: ABI 1.12
 */
static inline size_t weir_event_tokens(const char *type, const json_t *message) {
    if (!type || !json_is_object(message))
        return 0;
    if ((!strcmp(type, "system/message") || !strcmp(type, "assistant/message")) &&
        weir__content_empty(json_object_get(message, "content")))
        return 0;
    return weir_message_tokens(message);
}

/**
 * Total tokens of a usage object {input_tokens, output_tokens,
 * cache_read_tokens, cache_write_tokens} (borrowed; negative or missing
 * members count 0).
 * Since: ABI 1.12
 */
static inline size_t weir_usage_tokens(const json_t *usage) {
    static const char *const keys[] = {"input_tokens", "output_tokens", "cache_read_tokens",
                                       "cache_write_tokens"};
    size_t total = 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        json_int_t v = json_integer_value(json_object_get(usage, keys[i]));
        if (v > 0)
            total += (size_t)v;
    }
    return total;
}

/* ------------------------------------------------------------------------ */
/* The running token meter                                                   */
/* ------------------------------------------------------------------------ */

/*
 * A running measurement of one agent's log, fed its envelopes in seq order
 * (weir_meter_apply: what weir_agent_event_ref returns), so that "how full
 * is the window" costs O(1) in the history's length: an append costs O(1),
 * a replace O(nodes replaced).  It mirrors the surface as a list of priced
 * nodes (indexed by seq): the estimate of all current nodes and of the
 * pinned ones, the usage baseline (the last assistant/message's real usage,
 * with the estimate of the nodes up to it), the last request/context and
 * request/header seqs.  weir_meter_tokens = the baseline's usage plus the
 * estimate of the nodes after it (the estimate of every node when a replace
 * at or before the baseline made it stale).  compaction-basic's meter.
 * The struct is the caller's (a per-agent state, usually); not thread-safe.
 */
typedef struct weir_meter_node {
    size_t tokens;
    long long prev, next; /* seqs of the neighbours in surface order, -1 at the ends */
    bool current, pinned;
} weir_meter_node;

typedef struct weir_meter {
    weir_meter_node *nodes; /* by seq, [0, next_seq); owned (weir_meter_clear) */
    size_t cap;
    size_t next_seq;      /* the seq the next applied envelope must have */
    long long head, tail; /* first and last current node, -1 when empty */
    size_t count;         /* current nodes */
    size_t total;         /* estimate of the current nodes */
    size_t pinned_tokens; /* estimate of the current pinned nodes */
    size_t pinned_count;
    bool baseline;        /* the usage baseline holds */
    long long baseline_seq;
    size_t baseline_usage;    /* weir_usage_tokens of its usage */
    size_t baseline_prefix;   /* estimate of the nodes up to and including it */
    uint64_t surface_version; /* bumped by every surface event */
    long long context_seq;    /* last request/context, -1 none */
    long long header_seq;     /* last request/header, -1 none */
} weir_meter;

/**
 * Whether a user message (borrowed) is pinned (counted in pinned_tokens);
 * `user_data` as given to weir_meter_apply.  NULL function: none is.
 */
typedef bool (*weir_meter_pinned_fn)(const json_t *message, void *user_data);

/** Make `m` an empty meter (no allocation; NULL is a no-op). Since: ABI 1.12 */
static inline void weir_meter_init(weir_meter *m) {
    if (!m)
        return;
    memset(m, 0, sizeof *m);
    m->head = m->tail = -1;
    m->baseline_seq = -1;
    m->context_seq = m->header_seq = -1;
}

/** Free what `m` holds and make it empty again (NULL-safe). Since: ABI 1.12 */
static inline void weir_meter_clear(weir_meter *m) {
    if (!m)
        return;
    free(m->nodes);
    weir_meter_init(m);
}

static inline bool weir__is_surface_type(const char *type) {
    return type && (!strcmp(type, "system/message") || !strcmp(type, "user/message") ||
                    !strcmp(type, "assistant/message") || !strcmp(type, "tool/result"));
}

static inline bool weir__meter_current(const weir_meter *m, long long seq) {
    return seq >= 0 && (size_t)seq < m->next_seq && m->nodes[seq].current;
}

static inline void weir__meter_unlink(weir_meter *m, long long seq) {
    weir_meter_node *n = &m->nodes[seq];
    if (n->prev >= 0)
        m->nodes[n->prev].next = n->next;
    else
        m->head = n->next;
    if (n->next >= 0)
        m->nodes[n->next].prev = n->prev;
    else
        m->tail = n->prev;
    m->total -= n->tokens;
    if (n->pinned) {
        m->pinned_tokens -= n->tokens;
        m->pinned_count--;
    }
    m->count--;
    n->current = false;
    n->prev = n->next = -1;
}

static inline void weir__meter_link(weir_meter *m, long long seq, long long prev, long long next) {
    weir_meter_node *n = &m->nodes[seq];
    n->prev = prev;
    n->next = next;
    n->current = true;
    if (prev >= 0)
        m->nodes[prev].next = seq;
    else
        m->head = seq;
    if (next >= 0)
        m->nodes[next].prev = seq;
    else
        m->tail = seq;
    m->total += n->tokens;
    if (n->pinned) {
        m->pinned_tokens += n->tokens;
        m->pinned_count++;
    }
    m->count++;
}

/**
 * Seed an empty meter from `surface` (borrowed: weir_agent_surface's nodes
 * {seq, type, message}, in surface order) as a fold of the log up to its
 * last surface event leaves it, so that a resumed session costs its surface,
 * not its history; then apply the events after the last node.
 * `last_usage` (borrowed, may be NULL): the usage of the last node when it
 * is an assistant/message (the baseline).  0 (an empty surface seeds
 * nothing); -1 when `surface` is malformed or `m` is NULL or not empty; -2
 * out of memory.
 * Since: ABI 1.12
 */
static inline int weir_meter_seed(weir_meter *m, const json_t *surface, const json_t *last_usage,
                                  weir_meter_pinned_fn pinned, void *user_data) {
    if (!m || m->next_seq != 0 || !json_is_array(surface))
        return -1;
    size_t max = 0, i;
    const json_t *node;
    json_array_foreach(surface, i, node) {
        const json_t *jseq = json_object_get(node, "seq");
        if (!json_is_integer(jseq) || json_integer_value(jseq) < 0 ||
            !weir__is_surface_type(json_string_value(json_object_get(node, "type"))))
            return -1;
        if ((size_t)json_integer_value(jseq) > max)
            max = (size_t)json_integer_value(jseq);
    }
    if (json_array_size(surface) == 0)
        return 0; /* nothing to seed: the fold starts at seq 0 */
    size_t cap = 256;
    while (cap <= max)
        cap *= 2;
    /* zeroed: every seq not on the surface is no current node */
    weir_meter_node *nodes = (weir_meter_node *)calloc(cap, sizeof *nodes);
    if (!nodes)
        return -2;
    free(m->nodes);
    m->nodes = nodes;
    m->cap = cap;
    m->next_seq = max + 1;
    json_array_foreach(surface, i, node) {
        size_t seq = (size_t)json_integer_value(json_object_get(node, "seq"));
        const char *type = json_string_value(json_object_get(node, "type"));
        const json_t *message = json_object_get(node, "message");
        weir_meter_node *n = &m->nodes[seq];
        if (n->current) { /* a seq twice */
            weir_meter_clear(m);
            return -1;
        }
        n->tokens = json_is_object(message) ? weir_event_tokens(type, message) : 0;
        n->pinned = !strcmp(type, "user/message") && pinned && json_is_object(message) &&
                    pinned(message, user_data);
        weir__meter_link(m, (long long)seq, m->tail, -1);
        m->surface_version++;
    }
    const json_t *last = json_array_get(surface, json_array_size(surface) - 1);
    if (json_is_object(last_usage) &&
        !strcmp(json_string_value(json_object_get(last, "type")), "assistant/message")) {
        m->baseline = true;
        m->baseline_seq = m->tail;
        m->baseline_usage = weir_usage_tokens(last_usage);
        m->baseline_prefix = m->total;
    }
    return 0;
}

/**
 * Apply log envelope `event` (borrowed) to `m`.  Envelopes must come in seq
 * order: one already applied (seq < next_seq) is skipped.  `pinned`
 * (may be NULL) decides which user messages are pinned.  0; -1 when the
 * envelope does not fit what the meter holds (a seq gap, a replace naming a
 * node that is not current) or `m` is NULL: the meter is then stale and the
 * caller starts it again from seq 0; -2 out of memory (stale too).
 * Since: ABI 1.12
 */
static inline int weir_meter_apply(weir_meter *m, const json_t *event, weir_meter_pinned_fn pinned,
                                   void *user_data) {
    const json_t *jseq = json_object_get(event, "seq");
    if (!m || !json_is_integer(jseq) || json_integer_value(jseq) < 0)
        return -1;
    size_t seq = (size_t)json_integer_value(jseq);
    if (seq < m->next_seq)
        return 0; /* already applied */
    if (seq > m->next_seq)
        return -1; /* a gap: the caller starts again */
    if (seq >= m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        weir_meter_node *grown = (weir_meter_node *)realloc(m->nodes, cap * sizeof *grown);
        if (!grown)
            return -2;
        m->nodes = grown;
        m->cap = cap;
    }
    weir_meter_node *n = &m->nodes[seq];
    memset(n, 0, sizeof *n);
    n->prev = n->next = -1;
    const char *type = json_string_value(json_object_get(event, "type"));
    const json_t *data = json_object_get(event, "data");
    if (type && !strcmp(type, "request/context"))
        m->context_seq = (long long)seq;
    else if (type && !strcmp(type, "request/header"))
        m->header_seq = (long long)seq;
    if (!weir__is_surface_type(type)) {
        m->next_seq = seq + 1;
        return 0;
    }
    const json_t *message = json_object_get(data, "message");
    n->tokens = weir_event_tokens(type, message);
    n->pinned = !strcmp(type, "user/message") && pinned && json_is_object(message) &&
                pinned(message, user_data);
    const json_t *op = json_object_get(event, "surface_op");
    long long prev = m->tail, next = -1;
    if (json_is_object(op)) {
        long long a = (long long)json_integer_value(json_object_get(op, "start_seq"));
        long long b = (long long)json_integer_value(json_object_get(op, "end_seq"));
        if (!weir__meter_current(m, a) || !weir__meter_current(m, b))
            return -1;
        /* walk a..b first, so a malformed range changes nothing */
        long long at = a;
        while (at >= 0 && at != b)
            at = m->nodes[at].next;
        if (at != b)
            return -1;
        prev = m->nodes[a].prev;
        next = m->nodes[b].next;
        if (m->baseline && a <= m->baseline_seq)
            m->baseline = false; /* replaced at or in front of the baseline: stale */
        for (at = a; at >= 0;) {
            long long following = m->nodes[at].next;
            weir__meter_unlink(m, at);
            if (at == b)
                break;
            at = following;
        }
    } else if (!json_is_string(op) || strcmp(json_string_value(op), "append") != 0) {
        return -1;
    }
    weir__meter_link(m, (long long)seq, prev, next);
    if (!strcmp(type, "assistant/message")) {
        const json_t *usage = json_object_get(data, "usage");
        m->baseline = json_is_object(usage) && next < 0;
        m->baseline_seq = (long long)seq;
        m->baseline_usage = m->baseline ? weir_usage_tokens(usage) : 0;
        m->baseline_prefix = m->total;
    }
    m->surface_version++;
    m->next_seq = seq + 1;
    return 0;
}

/** The measured tokens of the surface `m` mirrors (0 for NULL).  O(1). Since: ABI 1.12 */
static inline size_t weir_meter_tokens(const weir_meter *m) {
    if (!m)
        return 0;
    return m->baseline ? m->baseline_usage + (m->total - m->baseline_prefix) : m->total;
}

/* ------------------------------------------------------------------------ */
/* Text and transcripts                                                      */
/* ------------------------------------------------------------------------ */

/**
 * The text blocks of `message` (borrowed) joined with "\n": a new malloc'd
 * string (free it; "" for none or a NULL message), or NULL when out of
 * memory.
 * Since: ABI 1.12
 */
static inline char *weir_message_text(const json_t *message) {
    size_t len = 0, i;
    const json_t *b, *content = json_object_get(message, "content");
    json_array_foreach(content, i, b) {
        const char *t = json_string_value(json_object_get(b, "type"));
        if (t && !strcmp(t, "text"))
            len += json_string_length(json_object_get(b, "text")) + 1;
    }
    char *out = (char *)malloc(len + 1), *at = out;
    if (!out)
        return NULL;
    json_array_foreach(content, i, b) {
        const char *t = json_string_value(json_object_get(b, "type"));
        const json_t *text = json_object_get(b, "text");
        if (!t || strcmp(t, "text") != 0 || !json_is_string(text))
            continue;
        if (at != out)
            *at++ = '\n';
        memcpy(at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    *at = '\0';
    return out;
}

/* A growing string; `oom` sticks. */
typedef struct weir__sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} weir__sbuf;

static inline void weir__sbuf_putn(weir__sbuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = (char *)realloc(b->s, cap);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static inline void weir__sbuf_put(weir__sbuf *b, const char *s) {
    weir__sbuf_putn(b, s, strlen(s));
}

/* Blocks of one message as transcript lines. */
static inline void weir__transcript_blocks(weir__sbuf *b, const json_t *content) {
    size_t i;
    const json_t *blk;
    json_array_foreach(content, i, blk) {
        const char *t = json_string_value(json_object_get(blk, "type"));
        if (!t)
            continue;
        if (!strcmp(t, "text")) {
            const char *text = json_string_value(json_object_get(blk, "text"));
            if (text && *text) {
                weir__sbuf_put(b, text);
                weir__sbuf_put(b, "\n");
            }
        } else if (!strcmp(t, "tool_call")) {
            const char *name = json_string_value(json_object_get(blk, "name"));
            const char *args = json_string_value(json_object_get(blk, "arguments"));
            weir__sbuf_put(b, "[tool call ");
            weir__sbuf_put(b, name ? name : "?");
            weir__sbuf_put(b, "] ");
            weir__sbuf_put(b, args ? args : "");
            weir__sbuf_put(b, "\n");
        } else if (!strcmp(t, "tool_result")) {
            weir__sbuf_put(b, json_is_true(json_object_get(blk, "is_error")) ? "[tool error]\n"
                                                                             : "[tool result]\n");
            weir__transcript_blocks(b, json_object_get(blk, "content"));
        } else if (!strcmp(t, "image")) {
            weir__sbuf_put(b, "[image]\n");
        }
    }
}

/**
 * A plain-text transcript of `messages` (borrowed: an array of messages,
 * e.g. weir_agent_messages or a range of it), for a summary call whose
 * model should read the conversation as one text rather than replay it:
 * each message as "<role>:" and its blocks ("[tool call NAME] ARGS",
 * "[tool result]" or "[tool error]" then the result's text, "[image]";
 * reasoning is left out), messages separated by a blank line.  When
 * `max_chars` > 0 and the transcript is longer, its middle is cut (never
 * inside a UTF-8 sequence): the first quarter and the last three quarters
 * of `max_chars` bytes stay around "\n[... N characters left out ...]\n".
 * New malloc'd string (free it; "" for an empty or non-array `messages`),
 * NULL when out of memory.
 * Since: ABI 1.12
 */
static inline char *weir_transcript(const json_t *messages, size_t max_chars) {
    weir__sbuf b = {NULL, 0, 0, false};
    weir__sbuf_put(&b, "");
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (i)
            weir__sbuf_put(&b, "\n");
        weir__sbuf_put(&b, role ? role : "?");
        weir__sbuf_put(&b, ":\n");
        weir__transcript_blocks(&b, json_object_get(m, "content"));
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    if (max_chars == 0 || b.len <= max_chars)
        return b.s;
    size_t head = max_chars / 4, tail = max_chars - head;
    while (head > 0 && ((unsigned char)b.s[head] & 0xC0) == 0x80)
        head--; /* do not split a sequence */
    size_t from = b.len - tail;
    while (from < b.len && ((unsigned char)b.s[from] & 0xC0) == 0x80)
        from++;
    char note[96];
    int nn = snprintf(note, sizeof note, "\n[... %zu characters left out ...]\n", from - head);
    char *out = (char *)malloc(head + (size_t)nn + (b.len - from) + 1);
    if (out) {
        memcpy(out, b.s, head);
        memcpy(out + head, note, (size_t)nn);
        memcpy(out + head + (size_t)nn, b.s + from, b.len - from);
        out[head + (size_t)nn + (b.len - from)] = '\0';
    }
    free(b.s);
    return out;
}

#ifdef __cplusplus
}
#endif
#endif /* WEIR_SDK_H */
