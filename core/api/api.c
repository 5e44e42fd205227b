/*
 * core/api/api.c - the weir_api table handed to every plugin's init.
 * Append-only, in the order of struct weir_api (weir/plugin.h).
 */
#include <string.h>

#include "agent.h"
#include "agent_context.h"
#include "failure.h"
#include "host_int.h"
#include "hooks.h"
#include "http.h"
#include "provenance.h"
#include "schema.h"
#include "cancel.h"
#include "store.h"
#include "tools.h"

static int api_http_sse(weir_stream *stream, const weir_http_request *req,
                        weir_sse_fn on_event, void *ud, weir_http_response *resp,
                        json_t **failure) {
    if (!stream)
        return WEIR_E_INVAL;
    /* one of the host's handles for this request: its kept connection is
     * reused by whichever agent asks next */
    weir__http_pool *pool = weir__stream_http_pool(stream);
    weir__http *h = NULL;
    int rc = weir__http_pool_take(pool, &h);
    if (rc != WEIR_OK) { /* as weir__http_sse leaves them on a failure before any byte */
        if (resp) {
            memset(resp, 0, sizeof *resp);
            resp->retry_after_ms = -1;
        }
        if (failure)
            *failure = NULL;
        if (failure && rc != WEIR_E_NOMEM)
            *failure = weir__failure_new(NULL, "UNKNOWN", "cannot create an HTTP handle: %s",
                                         weir_strerror(rc));
        return rc;
    }
    rc = weir__http_sse(h, weir__stream_signal(stream), req, on_event, ud, resp, failure);
    weir__http_pool_give(pool, h);
    return rc;
}

static json_t *api_failure_new(const char *provider, const char *code, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static json_t *api_failure_new(const char *provider, const char *code, const char *fmt,
                               ...) {
    va_list ap;
    va_start(ap, fmt);
    json_t *f = weir__failure_vnew(provider, code, fmt, ap);
    va_end(ap);
    return f;
}

/* The session id of the stream's agent (borrowed: the agent outlives its
 * streams). */
static const char *api_stream_session(weir_stream *stream) {
    return weir__stream_session(stream);
}

/* "<prefix>-<16 hex digits>" into buf (api->unique_id, ABI 1.12). */
static int api_unique_id(const char *prefix, char *buf, size_t size) {
    if (!prefix)
        prefix = "id";
    size_t n = strlen(prefix);
    bool ok = buf && n > 0 && n <= 32 && size >= n + 18;
    for (const char *p = prefix; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
             *p == '_' || *p == '.' || *p == '-';
    if (!ok) {
        if (buf && size)
            buf[0] = '\0';
        return WEIR_E_INVAL;
    }
    weir__random_id(buf, size, prefix);
    return WEIR_OK;
}

const weir_api *weir_host_api(void) { return &weir__api_table; }

const weir_api weir__api_table = {
    .abi_major = WEIR_ABI_MAJOR,
    .abi_minor = WEIR_ABI_MINOR,
    .struct_size = sizeof(weir_api),
    .plugin_id = weir__plugin_id,
    .plugin_set_data = weir__plugin_set_data,
    .plugin_data = weir__plugin_data,
    .log = weir__plugin_log,
    .hook_register = weir__plugin_hook_register,
    .next = weir__call_next,
    .call_fail = weir__call_fail,
    .call_agent = weir__call_agent,
    .call_signal = weir__call_signal,
    .signal_cancelled = weir__signal_cancelled,
    .signal_sleep = weir__signal_sleep,
    .agent_id = weir_agent_id,
    .agent_send = weir_agent_send,
    .agent_messages = weir_agent_messages,
    .agent_append = weir__agent_append,
    .event_type_register = weir__plugin_event_type_register,
    .provider_register = weir__plugin_provider_register,
    .stream_emit = weir__stream_emit,
    .stream_signal = weir__stream_signal,
    .http_sse = api_http_sse,
    .http_response_clear = weir__http_response_clear,
    .failure_from_http = weir__http_failure,
    .failure_new = api_failure_new,
    .tool_register = weir__plugin_tool_register,
    .tool_exec_call_id = weir__tool_exec_call_id,
    .tool_exec_signal = weir__tool_exec_signal,
    .tool_exec_fail = weir__tool_exec_fail,
    .schema_validate = weir__schema_validate,
    .strerror = weir_strerror,
    .status_name = weir_status_name,
    .agent_surface = weir__agent_surface,
    .agent_replace_generation = weir__agent_replace_generation,
    .agent_surface_replace = weir__agent_surface_replace,
    .agent_last_event = weir__agent_last_event,
    .agent_event = weir__agent_event,
    .agent_model_info = weir__agent_model_info,
    .agent_complete = weir__agent_complete,
    .agent_hook_register = weir__agent_hook_register,
    .tool_exec_idempotency_key = weir__tool_exec_idempotency_key,
    .tool_exec_attempt = weir__tool_exec_attempt,
    .agent_complete_stream = weir__agent_complete_stream,
    .http_get = weir__http_get,
    .clock_ms = weir__clock_ms,
    .provider_require = weir__plugin_provider_require,
    .stream_steering = weir__stream_steering,
    .tool_exec_progress = weir__tool_exec_progress,
    .tool_update = weir__plugin_tool_update,
    .tool_remove = weir__plugin_tool_remove,
    .tool_exec_append = weir__tool_exec_append,
    .agent_log_path = weir__agent_log_path,
    .hook_invoke = weir__agent_hook_invoke,
    .agent_approve = weir__agent_approve,
    .store_register = weir__plugin_store_register,
    .agent_event_peek = weir__agent_event_peek,
    .agent_event_ref = weir__agent_event_ref,
    .stream_session = api_stream_session,
    .plugin_role = weir__plugin_role,
    .agent_route = weir__agent_route,
    .agent_state = weir__plugin_agent_state,
    .unique_id = api_unique_id,
    .event_namespace_claim = weir__plugin_event_namespace_claim,
};

/* The wiring root: a host's plugins get this table, and its hook chains
 * write their provenance into the agent's log (core/api/provenance.c). */
static const weir__host_wiring wiring = {
    .api = &weir__api_table,
    .sink = weir__provenance_sink,
    .mark = weir__provenance_mark,
};

int weir_host_create(const json_t *config, weir_host **out, weir_error *err) {
    return weir__host_create(config, &wiring, out, err);
}
