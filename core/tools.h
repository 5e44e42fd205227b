/*
 * core/tools.h - the tool registry and the ordered parallel scheduler
 * (DESIGN §7, reference §4.2).  Owner: core/tools.c (registry, exec
 * accessors, worker pool, background jobs) and core/tool_scheduler.c.
 */
#ifndef WEIR_CORE_TOOLS_H
#define WEIR_CORE_TOOLS_H

#include "common.h"
#include "hooks.h"
#include "session_log.h"

typedef struct weir__tools weir__tools;

int weir__tools_create(weir__tools **out);
void weir__tools_destroy(weir__tools *t);
/* Register (copies).  E_DUPLICATE names both plugins. */
int weir__tools_add(weir__tools *t, const char *plugin_id, const weir_tool *tool,
                    weir_error *err);
/* New reference: [{name, description, parameters}] in registration order. */
json_t *weir__tools_schemas(const weir__tools *t);

/* Everything the scheduler needs from the running step. */
typedef struct weir__tool_step {
    weir__tools *tools;
    const weir__hooks *hooks;
    weir__log *log;
    weir_agent *agent;
    weir_signal *signal;      /* the turn's signal */
    int turn, step;
    int max_parallel;         /* >= 1 */
    /* Queue an additional context message (borrowed) on the next-step inbox. */
    int (*accept_context)(void *ud, const json_t *message, weir_error *err);
    void *ud;
} weir__tool_step;

/*
 * Run `calls` ([{id, name, arguments}] in model order, borrowed): tool/call
 * before policy, ordered pre, concurrent bodies, ordered post, tool/result in
 * model order; synthetic ABORTED_BEFORE_DISPATCH pairs on cancel.
 * *concluded is set when a result concluded the turn.  A scheduler failure
 * returns an error and fabricates no results.
 */
int weir__tools_run(const weir__tool_step *st, const json_t *calls,
                    bool *concluded, weir_error *err);

/* Public-table implementations. */
const char *weir__tool_exec_call_id(const weir_tool_exec *exec);
weir_signal *weir__tool_exec_signal(const weir_tool_exec *exec);
void weir__tool_exec_fail(weir_tool_exec *exec, const char *code, const char *fmt, ...)
    WEIR_PRINTF(3, 4);

#endif
