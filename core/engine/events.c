/*
 * core/engine/events.c - an agent's events on their way out: the live
 * events the engine raises and the durable ones its log takes, each to
 * its emit hook's listeners and to the embedder's callback, one at a time
 * and in order (docs/events.md).  core/engine/engine.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "otlp_export.h"

/* Feed a durable event to the span builder and its spans to the exporter
 * (docs/telemetry.md): never waits on the network. */
static void trace_event(weir__engine *eng, const json_t *event) {
    json_t *spans = NULL;
    weir_error e;
    if (weir_trace_add(eng->trace, event, &spans, &e) != WEIR_OK)
        weir__warn("weir: agent %s: telemetry: %s", eng->id, e.text);
    weir__otlp_exporter_push(eng->otel, spans);
    json_decref(spans);
}

/* Run the emit hook and the embedder's callback for one event. */
static void dispatch(weir__engine *eng, const char *hook, const json_t *args, const json_t *event,
                     bool durable) {
    if (durable && eng->trace)
        trace_event(eng, event);
    if (args && !json_is_null(args)) /* a queued delivery without arguments holds null */
        json_decref(weir__hook_invoke(eng->hooks, hook, eng->handle, &eng->signal, args, NULL, NULL, NULL));
    if (eng->on_event)
        eng->on_event(event, durable, eng->user_data);
}

/* Where a queued event goes in `pending`: a durable one (`after` its seq
 * + 1) before the live ones that wait for it, anything else at the end.
 * With event_mu held. */
static size_t queue_at(const weir__engine *eng, bool durable, size_t after) {
    size_t n = json_array_size(eng->pending);
    for (size_t i = 0; durable && i < n; i++) {
        const json_t *it = json_array_get(eng->pending, i);
        if (!json_is_true(json_object_get(it, "durable")) &&
            (size_t)json_integer_value(json_object_get(it, "after")) >= after)
            return i;
    }
    return n;
}

/* The head of `pending` when it may be delivered now (a live event waits
 * for the durable events raised before it), else NULL.  With event_mu. */
static json_t *ready(const weir__engine *eng) {
    json_t *it = json_array_get(eng->pending, 0);
    if (it && !json_is_true(json_object_get(it, "durable")) &&
        eng->durable_next < (size_t)json_integer_value(json_object_get(it, "after")))
        return NULL;
    return it;
}

/* A durable event before `after` was delivered.  With event_mu. */
static void delivered(weir__engine *eng, bool durable, size_t after) {
    if (durable && after > eng->durable_next)
        eng->durable_next = after;
}

/*
 * Deliver one event (args borrowed, may be NULL under memory pressure;
 * `event` NULL: a durable event nobody sees, which only counts).  Events
 * go out one at a time, in the order raised: durable ones in seq order
 * (`after` is the seq + 1), and a live one after every durable event the
 * log had taken when it was raised (`after`: weir__log_observed).
 * Deliveries never nest and never run with a lock held: an event raised
 * while another is being delivered (a callback that sends, or another
 * thread), or a live one whose durable events are still on their way, is
 * queued, and the frame delivering (or the one that delivers those durable
 * events) delivers it once its callback returns.
 */
static void deliver(weir__engine *eng, const char *hook, const json_t *args, const json_t *event,
                    bool durable, size_t after) {
    pthread_mutex_lock(&eng->event_mu);
    if (!eng->delivering && json_array_size(eng->pending) == 0 &&
        (durable || eng->durable_next >= after)) {
        if (!event) { /* nobody sees it: it only counts */
            delivered(eng, durable, after);
            pthread_mutex_unlock(&eng->event_mu);
            return;
        }
        eng->delivering = true;
        pthread_mutex_unlock(&eng->event_mu);
        dispatch(eng, hook, args, event, durable);
        pthread_mutex_lock(&eng->event_mu);
        delivered(eng, durable, after);
    } else {
        json_t *item = json_pack("{s:s, s:O?, s:O?, s:b, s:I}", "hook", hook, "args", args,
                                 "event", event, "durable", durable, "after",
                                 (json_int_t)after);
        if (!item || json_array_insert_new(eng->pending, queue_at(eng, durable, after), item) != 0) {
            weir__warn("weir: agent %s: out of memory, event %s dropped", eng->id, hook);
            delivered(eng, durable, after); /* what waits for it need not wait */
        }
        if (eng->delivering) {
            pthread_mutex_unlock(&eng->event_mu);
            return;
        }
        eng->delivering = true;
    }
    json_t *item;
    while ((item = ready(eng)) != NULL) {
        json_incref(item);
        json_array_remove(eng->pending, 0);
        pthread_mutex_unlock(&eng->event_mu);
        const json_t *ev = json_object_get(item, "event");
        bool dur = json_is_true(json_object_get(item, "durable"));
        if (json_is_object(ev)) /* null: a durable event nobody sees */
            dispatch(eng, json_string_value(json_object_get(item, "hook")),
                     json_object_get(item, "args"), ev, dur);
        pthread_mutex_lock(&eng->event_mu);
        delivered(eng, dur, (size_t)json_integer_value(json_object_get(item, "after")));
        json_decref(item);
    }
    eng->delivering = false;
    pthread_mutex_unlock(&eng->event_mu);
}

void weir__engine_live(weir__engine *eng, const char *type, json_t *data) {
    /* nothing can see a live event without on_event or a listener on its hook */
    if (!eng || !type || !data || (!eng->on_event && weir__hooks_count(eng->hooks, type) == 0)) {
        json_decref(data);
        return;
    }
    /* the hook's arguments only when a listener will read them */
    bool listened = weir__hooks_count(eng->hooks, type) > 0;
    json_t *args = listened ? json_object() : NULL;
    json_t *ev = json_object();
    if ((args || !listened) && ev &&
        (!args || (json_object_set_new(args, "agent", json_string(eng->id)) == 0 &&
                   json_object_update(args, data) == 0)) &&
        json_object_set_new(ev, "type", json_string(type)) == 0 &&
        json_object_set_new(ev, "time", json_integer(weir__now_ms())) == 0 &&
        json_object_set(ev, "data", data) == 0)
        deliver(eng, type, args, ev, false, weir__log_observed(eng->log));
    json_decref(args);
    json_decref(ev);
    json_decref(data);
}

void weir__engine_live_built(weir__engine *eng, const char *type, const json_t *ev) {
    if (eng && type && ev && eng->on_event)
        deliver(eng, type, NULL, ev, false, weir__log_observed(eng->log));
}

void weir__engine_on_durable(const json_t *event, void *ud) {
    weir__engine *eng = ud;
    size_t after = (size_t)weir__json_int(event, "seq", 0) + 1;
    bool hooked = weir__hooks_count(eng->hooks, "session/event") > 0;
    json_t *args = hooked ? json_pack("{s:s, s:O}", "agent", eng->id, "event", event) : NULL;
    /* unseen, it still counts: a live event raised after it waits for it */
    deliver(eng, "session/event", args, eng->on_event || hooked || eng->trace ? event : NULL, true,
            after);
    json_decref(args);
}

void weir__engine_on_inbox(const char *kind, const json_t *message, int turn, void *ud) {
    weir__engine *eng = ud;
    char type[64];
    snprintf(type, sizeof type, "agent/inbox/%s", kind);
    json_t *data = json_pack("{s:O}", "message", message);
    if (data && (strcmp(kind, "claimed") == 0 || strcmp(kind, "held") == 0))
        json_object_set_new(data, "turn", json_integer(turn));
    weir__engine_live(eng, type, data);
}

int weir__engine_log(weir__engine *eng, const char *type, const json_t *data,
                     const json_t *surface_op, const json_t *source_seqs, size_t *seq_out,
                     weir_error *err) {
    if (!eng)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent log: NULL agent");
    return weir__log_append(eng->log, type, data, surface_op, source_seqs, 0, seq_out, err);
}

bool weir__engine_check_requests(void) {
#ifndef NDEBUG
    return true;
#else
    const char *v = getenv("WEIR_CHECK_REQUESTS");
    return v && strcmp(v, "1") == 0;
#endif
}

