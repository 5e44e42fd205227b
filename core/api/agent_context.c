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

/* The host of URL `url` (lower case, no port, no brackets), new malloc'd
 * string, or NULL when it has none or memory ran out. */
static char *url_host(const char *url) {
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *at = p + strcspn(p, "/?#");
    for (const char *q = p; q < at; q++)
        if (*q == '@')
            p = q + 1; /* user info */
    const char *end;
    if (*p == '[') {
        p++;
        end = strchr(p, ']');
        if (!end || end > at)
            return NULL;
    } else {
        end = p + strcspn(p, ":/?#");
    }
    if (end <= p)
        return NULL;
    char *out = weir__malloc((size_t)(end - p) + 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < (size_t)(end - p); i++)
        out[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] - 'A' + 'a' : p[i]);
    out[end - p] = '\0';
    return out;
}

json_t *weir__agent_route(weir_agent *a, weir_error *err) {
    if (!a) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_route: NULL agent");
        return NULL;
    }
    bool oom;
    json_t *ctx = weir__log_request_context_copy(a->e.log, &oom);
    const char *provider = weir__json_str(ctx, "provider", NULL);
    const char *model = weir__json_str(ctx, "model", NULL);
    if (!provider || !model) {
        json_decref(ctx);
        if (oom)
            weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_route: out of memory");
        else
            weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                      "agent_route: agent %s has made no request yet", a->e.id);
        return NULL;
    }
    json_t *route = json_pack("{s:s, s:s}", "provider", provider, "model", model);
    json_t *info = weir__agent_model_info(a, provider, model);
    const json_t *cw = json_object_get(info, "context_window");
    if (!json_is_integer(cw))
        cw = json_object_get(ctx, "context_window");
    const json_t *mo = json_object_get(info, "max_output");
    const char *base_url =
        weir__json_str(weir__host_row_config(a->e.host, provider), "base_url", NULL);
    char *host = base_url ? url_host(base_url) : NULL;
    bool ok = route != NULL && (!base_url || host || !*base_url);
    if (ok && json_is_integer(cw) && json_integer_value(cw) > 0)
        ok = json_object_set_new(route, "context_window", json_integer(json_integer_value(cw))) == 0;
    if (ok && json_is_integer(mo) && json_integer_value(mo) > 0)
        ok = json_object_set_new(route, "max_output", json_integer(json_integer_value(mo))) == 0;
    if (ok && base_url)
        ok = json_object_set_new(route, "base_url", json_string(base_url)) == 0;
    if (ok && host)
        ok = json_object_set_new(route, "host", json_string(host)) == 0;
    weir__free(host);
    json_decref(info);
    json_decref(ctx);
    if (!ok) {
        json_decref(route);
        weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_route: out of memory");
        return NULL;
    }
    return route;
}

int weir__agent_complete(weir_agent *a, const json_t *request, weir_signal *signal, json_t **result,
                         weir_error *err) {
    return weir__engine_complete(a ? &a->e : NULL, request, false, NULL, signal, result, err);
}

int weir__agent_complete_stream(weir_agent *a, const json_t *request, const json_t *context,
                                weir_signal *signal, json_t **result, weir_error *err) {
    return weir__engine_complete(a ? &a->e : NULL, request, true, context, signal, result, err);
}
