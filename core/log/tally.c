/*
 * core/log/tally.c - what a session log's events add up to (core/log/tally.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "continuation.h"
#include "surface.h"
#include "tally.h"

/* A non-negative integer member of `o`, or 0. */
static json_int_t count(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

void weir__tally_event(weir__tally *t, const json_t *ev) {
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *data = json_object_get(ev, "data");
    t->events++;
    const json_t *time = json_object_get(ev, "time");
    if (json_is_integer(time))
        t->last_time = json_integer_value(time);
    if (!type)
        return;
    json_int_t seq = json_integer_value(json_object_get(ev, "seq"));
    size_t at1 = seq >= 0 ? (size_t)seq + 1 : 0;
    if (!strcmp(type, "turn/start")) {
        t->turns++;
        t->open = true;
        json_int_t turn = json_integer_value(json_object_get(data, "turn"));
        if (turn > t->last_turn)
            t->last_turn = turn;
    } else if (!strcmp(type, "request/header")) {
        t->header = at1;
    } else if (!strcmp(type, "request/context")) {
        t->context = at1;
    } else if (!strcmp(type, WEIR__CONTINUATIONS_DROPPED)) {
        t->dropped = at1;
    } else if (!strcmp(type, "user/message")) {
        t->inputs[t->ninputs++ % WEIR__TALLY_INPUTS] = at1;
    } else if (!strcmp(type, "turn/end")) {
        t->open = false;
    } else if (!strcmp(type, "assistant/message") || !strcmp(type, "assistant/attempt")) {
        const json_t *usage = json_object_get(data, "usage");
        if (!json_is_object(usage))
            return;
        t->any = true;
        t->in += count(usage, "input_tokens");
        t->cached += count(usage, "cache_read_tokens");
        json_int_t written = count(usage, "cache_write_tokens");
        if (!written) /* only the per-TTL split was reported */
            written = count(usage, "cache_write_5m_tokens") + count(usage, "cache_write_1h_tokens");
        t->written += written;
        t->out += count(usage, "output_tokens");
        const json_t *usd = json_object_get(json_object_get(data, "cost"), "usd");
        if (json_is_number(usd) && json_number_value(usd) >= 0)
            t->usd += json_number_value(usd);
        else
            t->unpriced = true;
    }
}

json_t *weir__tally_json(const weir__tally *t) {
    json_t *o = json_pack("{s:I, s:I}", "events", t->events, "turns", t->turns);
    if (o && t->any &&
        json_object_set_new(o, "usage",
                            json_pack("{s:I, s:I, s:I, s:I}", "input_tokens", t->in,
                                      "cache_read_tokens", t->cached, "cache_write_tokens",
                                      t->written, "output_tokens", t->out)) != 0) {
        json_decref(o);
        return NULL;
    }
    if (o && t->any && !t->unpriced &&
        json_object_set_new(o, "cost", json_pack("{s:f}", "usd", t->usd)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

bool weir__tally_from(weir__tally *t, const json_t *data) {
    memset(t, 0, sizeof *t);
    const json_t *events = json_object_get(data, "events"), *turns = json_object_get(data, "turns");
    if (!json_is_integer(events) || !json_is_integer(turns) || json_integer_value(events) < 0 ||
        json_integer_value(turns) < 0)
        return false;
    t->events = json_integer_value(events);
    t->turns = json_integer_value(turns);
    const json_t *usage = json_object_get(data, "usage");
    if (usage) {
        if (!json_is_object(usage))
            return false;
        t->any = true;
        t->in = count(usage, "input_tokens");
        t->cached = count(usage, "cache_read_tokens");
        t->written = count(usage, "cache_write_tokens");
        t->out = count(usage, "output_tokens");
        const json_t *usd = json_object_get(json_object_get(data, "cost"), "usd");
        if (json_is_number(usd) && json_number_value(usd) >= 0)
            t->usd = json_number_value(usd);
        else
            t->unpriced = true;
    }
    return true;
}

/* The ascending seqs of the events the folds need besides the surface. */
static int cmp_seq(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static json_t *keep_json(const weir__tally *t) {
    size_t v[3 + WEIR__TALLY_INPUTS], n = 0;
    size_t have = t->ninputs < WEIR__TALLY_INPUTS ? t->ninputs : WEIR__TALLY_INPUTS;
    for (size_t i = 0; i < have; i++)
        v[n++] = t->inputs[i];
    if (t->header)
        v[n++] = t->header;
    if (t->context)
        v[n++] = t->context;
    if (t->dropped)
        v[n++] = t->dropped;
    qsort(v, n, sizeof *v, cmp_seq);
    json_t *keep = json_array();
    for (size_t i = 0; keep && i < n; i++) {
        if ((i > 0 && v[i] == v[i - 1]) || !v[i])
            continue;
        if (json_array_append_new(keep, json_integer((json_int_t)(v[i] - 1))) != 0) {
            json_decref(keep);
            keep = NULL;
        }
    }
    return keep;
}

json_t *weir__checkpoint_json(const weir__tally *t, size_t at, const weir__surface *s) {
    json_t *o = weir__tally_json(t);
    json_t *runs = weir__surface_runs(s), *keep = keep_json(t);
    if (!o || !runs || !keep ||
        json_object_set_new(o, "at", json_integer((json_int_t)at)) != 0 ||
        json_object_set_new(o, "last_turn", json_integer(t->last_turn)) != 0 ||
        json_object_set_new(o, "surface",
                            json_pack("{s:I, s:O}", "applied",
                                      (json_int_t)weir__surface_applied(s), "runs", runs)) != 0 ||
        json_object_set(o, "keep", keep) != 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(runs);
    json_decref(keep);
    return o;
}

int weir__checkpoint_verify(const json_t *data, const weir__tally *t, size_t at,
                            const weir__surface *s, char *msg, size_t size) {
    weir__tally said;
    if (!weir__tally_from(&said, data)) {
        snprintf(msg, size, "needs data.events and data.turns (integers >= 0)");
        return -1;
    }
    if (said.events != t->events || said.turns != t->turns || said.any != t->any ||
        (t->any && (said.unpriced != t->unpriced || said.in != t->in ||
                    said.cached != t->cached || said.written != t->written ||
                    said.out != t->out || (!t->unpriced && said.usd != t->usd)))) {
        json_t *sum = weir__tally_json(t);
        char *a = weir__json_dump(data), *b = sum ? weir__json_dump(sum) : NULL;
        snprintf(msg, size, "does not add up: it says %.200s, the log before it adds up to %.200s",
                 a ? a : "?", b ? b : "?");
        free(a);
        free(b);
        json_decref(sum);
        return -1;
    }
    if (!json_object_get(data, "at"))
        return 0; /* an older weir's: counts only */
    json_t *want = weir__checkpoint_json(t, at, s);
    if (!want) {
        snprintf(msg, size, "out of memory");
        return -1;
    }
    /* "at" is the writer's byte count, not checked: a store may serialize
     * lines its own way (PostgreSQL's jsonb) */
    static const char *const keys[] = {"last_turn", "surface", "keep"};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof keys / sizeof *keys; i++) {
        const json_t *a = json_object_get(data, keys[i]), *b = json_object_get(want, keys[i]);
        if (json_equal(a, b))
            continue;
        char *x = a ? weir__json_dump(a) : NULL, *y = weir__json_dump(b);
        snprintf(msg, size, "%s is %.160s, the log before it says %.160s", keys[i],
                 x ? x : "missing", y ? y : "?");
        free(x);
        free(y);
        rc = -1;
    }
    json_decref(want);
    return rc;
}

/* A non-negative integer, or -1. */
static json_int_t natural(const json_t *v) {
    return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
}

bool weir__checkpoint_resumable(const json_t *data, size_t *at, uint64_t *applied,
                                const json_t **runs, const json_t **keep) {
    const json_t *surface = json_object_get(data, "surface");
    json_int_t a = natural(json_object_get(data, "at"));
    json_int_t n = natural(json_object_get(surface, "applied"));
    const json_t *r = json_object_get(surface, "runs"), *k = json_object_get(data, "keep");
    if (a < 0 || n < 0 || natural(json_object_get(data, "last_turn")) < 0 || !json_is_array(r) ||
        !json_is_array(k))
        return false;
    size_t i;
    const json_t *v;
    json_array_foreach(r, i, v) {
        json_int_t first = natural(json_array_get(v, 0)), last = natural(json_array_get(v, 1));
        json_int_t ord = natural(json_array_get(v, 2));
        if (json_array_size(v) != 3 || first < 0 || last < first || ord < 0 || ord >= n)
            return false;
    }
    json_int_t prev = -1;
    json_array_foreach(k, i, v) {
        if (natural(v) <= prev)
            return false;
        prev = natural(v);
    }
    *at = (size_t)a;
    *applied = (uint64_t)n;
    *runs = r;
    *keep = k;
    return true;
}
