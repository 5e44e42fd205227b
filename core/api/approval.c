/*
 * core/api/approval.c - what a plugin asks of the agent outside the hooks the
 * core raises: the embedder's approver (weir_agent_set_approver,
 * api->agent_approve), the session log's path (api->agent_log_path), and
 * catalog hooks a plugin raises itself (api->hook_invoke: agent/pre-compact
 * from a compaction plugin).
 */
#include <string.h>

#include "agent.h"
#include "hooks.h"

void weir_agent_set_approver(weir_agent *agent, weir_approval_fn fn, void *user_data) {
    if (!agent)
        return;
    agent->approver = fn;
    agent->approver_ud = fn ? user_data : NULL;
}

int weir__agent_approve(weir_agent *agent, const json_t *request, json_t **decision,
                        weir_error *err) {
    if (decision)
        *decision = NULL;
    if (!agent || !json_is_object(request) || !decision)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_approve: bad arguments");
    if (!agent->approver)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                         "no approver: the embedder cannot answer approval requests");
    json_t *d = NULL;
    int rc = agent->approver(agent, request, &d, agent->approver_ud);
    const char *what = json_string_value(json_object_get(d, "decision"));
    if (rc == WEIR_OK && (!what || (strcmp(what, "allow") != 0 && strcmp(what, "deny") != 0))) {
        json_decref(d);
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "the approver's answer has no decision \"allow\" or \"deny\"");
    }
    if (rc != WEIR_OK) {
        json_decref(d);
        return weir__err(err, rc, NULL, NULL, "the approver gave no answer: %s",
                         weir_strerror(rc));
    }
    *decision = d;
    return WEIR_OK;
}

const char *weir__agent_log_path(const weir_agent *agent) {
    return agent && agent->e.log ? weir__log_path(agent->e.log) : NULL;
}

/* The waterfall default of a plugin-raised hook: the caller's value. */
static json_t *given_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call;
    (void)args;
    return ctx ? json_incref((json_t *)ctx) : json_null();
}

int weir__agent_hook_invoke(weir_agent *agent, const char *hook, const json_t *args,
                            const json_t *dflt, json_t **result, weir_error *err) {
    if (result)
        *result = NULL;
    if (!agent || !hook || !json_is_object(args) || !result)
        return weir__err(err, WEIR_E_INVAL, NULL, hook, "hook_invoke: bad arguments");
    if (!weir__hook_find(hook))
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, hook, "unknown hook \"%s\"", hook);
    json_t *payload = json_copy((json_t *)(uintptr_t)args);
    if (payload && !json_object_get(payload, "agent"))
        json_object_set_new(payload, "agent", json_string(agent->e.id));
    if (!payload)
        return weir__err(err, WEIR_E_NOMEM, NULL, hook, "out of memory");
    weir_error e;
    weir_error_clear(&e);
    json_t *res = weir__hook_invoke(agent->e.hooks, hook, agent, &agent->e.signal, payload,
                                    given_default, (void *)(uintptr_t)dflt, &e);
    json_decref(payload);
    if (!res) {
        if (err)
            *err = e;
        return e.code ? (int)e.code : WEIR_E_HOOK_FAILED;
    }
    *result = res;
    return WEIR_OK;
}
