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
#include "log_view.h"

/* Any thread: the envelopes are read under the log's lock and held, so a
 * step's trim on the driver cannot release one from under the copy. */
json_t *weir__agent_surface(weir_agent *a) {
    return a ? weir__log_surface_nodes(a->e.log) : NULL;
}

uint64_t weir__agent_replace_generation(weir_agent *a) {
    return a ? weir__log_replace_generation(a->e.log) : 0;
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
                              : weir__log_shadowed_seqs(a->e.log, start_seq, end_seq);
    int rc = op && src
                 ? weir__engine_log(&a->e, type, data, op, src, seq_out, err)
                 : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_surface_replace: out of memory");
    json_decref(op);
    json_decref(src);
    return rc;
}

json_t *weir__agent_last_event(weir_agent *a, const char *type) {
    return a ? weir__log_last_event(a->e.log, type) : NULL;
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
