/*
 * core/api/agent.h - struct weir_agent: the public agent object around its
 * engine context (core/engine/engine.h).  Named on the api floor only.
 * Owner: core/api/agent.c (open/close/send/cancel/run), with
 * core/api/approval.c, agent_context.c, generation.c, store_ops.c and
 * turn_outcome.c.
 */
#ifndef WEIR_CORE_AGENT_H
#define WEIR_CORE_AGENT_H

#include "engine.h"

/*
 * One conversation: the engine context the lifecycle runs on (first, so
 * that the engine's `handle` and the agent are the same object), and what
 * only the api floor reads.  `driver_busy` and `compacting` are under
 * e.mu.
 */
struct weir_agent {
    weir__engine e;
    weir__hooks *own;          /* the agent's own chains (derived), or NULL */
    bool opening;              /* inside agent/created: plugins may add own listeners */
    bool file_store;           /* the log is the built-in file store's (its hold marker) */
    bool created;              /* agent/created succeeded: close emits agent/disposed */
    bool driver_busy;          /* a thread is inside weir_agent_run_until_idle or _compact */
    bool compacting;           /* inside weir_agent_compact: cancel and close fire the signal */
    weir_approval_fn approver; /* weir_agent_set_approver, or NULL */
    void *approver_ud;
};

/*
 * api->agent_hook_register (plugin.h): add `self`'s listener to the agent's
 * own chains; only while `agent/created` runs for it.  Logs failures.
 */
int weir__agent_hook_register(weir_plugin *self, weir_agent *agent, const char *hook,
                              weir_hook_fn fn, const weir_hook_opts *opts);

/* api->agent_append: a plugin's own event type, ignorable, into the log. */
int weir__agent_append(weir_agent *agent, const char *type, const json_t *data,
                       weir_error *err);

/* core/api/approval.c: api->agent_approve, agent_log_path, hook_invoke. */
int weir__agent_approve(weir_agent *agent, const json_t *request, json_t **decision,
                        weir_error *err);
const char *weir__agent_log_path(const weir_agent *agent);
int weir__agent_hook_invoke(weir_agent *agent, const char *hook, const json_t *args,
                            const json_t *dflt, json_t **result, weir_error *err);

#endif
