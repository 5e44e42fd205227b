/*
 * core/api/agent_context.c - the `agent context` members of weir_api (see
 * core/api/agent_context.h): read the surface, commit a surface replacement,
 * look up logged events and model info, and make one direct model call
 * (a summarizer's) into a private collector.
 */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "agent_context.h"
#include "hooks.h"
#include "host_int.h"
#include "surface.h"

/* Any thread: the envelopes are read under the log's lock and held, so a
 * step's trim on the driver cannot release one from under the copy. */
json_t *weir__agent_surface(weir_agent *a) {
    json_t *events = a ? weir__log_surface_events(a->e.log) : NULL;
    json_t *out = events ? json_array() : NULL;
    size_t i;
    const json_t *ev;
    json_array_foreach(events, i, ev) {
        if (!out)
            break;
        json_t *msg = weir__derive_event_message(ev);
        json_t *node =
            json_pack("{s:I, s:s, s:o}", "seq", weir__json_int(ev, "seq", 0), "type",
                      weir__json_str(ev, "type", ""), "message", msg ? msg : json_null());
        if (json_array_append_new(out, node) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    json_decref(events);
    return out;
}

uint64_t weir__agent_replace_generation(weir_agent *a) {
    return a ? weir__log_replace_generation(a->e.log) : 0;
}

/* New reference: the seqs of the current nodes start_seq..end_seq (by
 * position), or [start_seq, end_seq] when they are not both current (the
 * log then names the bad one). */
static json_t *shadowed_seqs(const weir__surface *s, size_t start_seq, size_t end_seq) {
    size_t n = weir__surface_len(s), from = n, to = n;
    for (size_t i = 0; i < n; i++) {
        if (weir__surface_node(s, i) == start_seq)
            from = i;
        if (weir__surface_node(s, i) == end_seq)
            to = i;
    }
    json_t *out = json_array();
    if (from == n || to == n || from > to) {
        if (json_array_append_new(out, json_integer((json_int_t)start_seq)) != 0 ||
            (end_seq != start_seq &&
             json_array_append_new(out, json_integer((json_int_t)end_seq)) != 0)) {
            json_decref(out);
            return NULL;
        }
        return out;
    }
    for (size_t i = from; out && i <= to; i++) {
        if (json_array_append_new(out, json_integer((json_int_t)weir__surface_node(s, i))) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

int weir__agent_surface_replace(weir_agent *a, const char *type, const json_t *data,
                                size_t start_seq, size_t end_seq, const json_t *source_seqs,
                                size_t *seq_out, weir_error *err) {
    if (!a || !type || !json_is_object(data))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_surface_replace: NULL argument");
    if (strcmp(type, "user/message") != 0 && strcmp(type, "tool/result") != 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "agent_surface_replace: type '%s' cannot replace surface nodes "
                         "(only user/message or tool/result)",
                         type);
    json_t *op = json_pack("{s:s, s:I, s:I}", "op", "replace", "start_seq", (json_int_t)start_seq,
                           "end_seq", (json_int_t)end_seq);
    json_t *src = source_seqs ? json_incref((json_t *)(uintptr_t)source_seqs)
                              : shadowed_seqs(weir__log_surface(a->e.log), start_seq, end_seq);
    int rc = op && src
                 ? weir__engine_log(&a->e, type, data, op, src, seq_out, err)
                 : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_surface_replace: out of memory");
    json_decref(op);
    json_decref(src);
    return rc;
}

json_t *weir__agent_last_event(weir_agent *a, const char *type) {
    if (!a || !type)
        return NULL;
    size_t at1 = weir__log_latest(a->e.log, type); /* a type the log's folds follow */
    if (at1 != SIZE_MAX) {
        json_t *ev = at1 ? weir__log_event_ref(a->e.log, at1 - 1) : NULL;
        json_t *copy = ev ? json_deep_copy(ev) : NULL;
        json_decref(ev);
        return copy;
    }
    for (size_t seq = weir__log_count(a->e.log); seq-- > 0;) {
        json_t *ev = weir__log_event_ref(a->e.log, seq); /* any thread: held while copied */
        if (!ev)
            return NULL; /* out of memory, not an older match */
        bool match = strcmp(weir__json_str(ev, "type", ""), type) == 0;
        json_t *copy = match ? json_deep_copy(ev) : NULL;
        json_decref(ev);
        if (match)
            return copy;
    }
    return NULL;
}

const json_t *weir__agent_event_peek(weir_agent *a, size_t seq) {
    return a ? weir__log_event_lend(a->e.log, seq) : NULL;
}

json_t *weir__agent_event_ref(weir_agent *a, size_t seq) {
    return a ? weir__log_event_ref(a->e.log, seq) : NULL;
}

json_t *weir__agent_event(weir_agent *a, size_t seq) {
    json_t *ev = weir__agent_event_ref(a, seq);
    json_t *copy = ev ? json_deep_copy(ev) : NULL;
    json_decref(ev);
    return copy;
}

json_t *weir__agent_model_info(weir_agent *a, const char *provider, const char *model) {
    if (!a || !provider || !model)
        return NULL;
    const weir__provider_entry *pe = weir__host_provider(a->e.host, provider);
    return pe && pe->vt.model_info ? pe->vt.model_info(pe->self, model) : NULL;
}

int weir__agent_complete(weir_agent *a, const json_t *request, weir_signal *signal, json_t **result,
                         weir_error *err) {
    return weir__engine_complete(a ? &a->e : NULL, request, false, NULL, signal, result, err);
}

int weir__agent_complete_stream(weir_agent *a, const json_t *request, const json_t *context,
                                weir_signal *signal, json_t **result, weir_error *err) {
    return weir__engine_complete(a ? &a->e : NULL, request, true, context, signal, result, err);
}
