/*
 * core/tools.h - the tool registry and the ordered parallel scheduler
 * (docs/tools.md).  Owner: core/tools.c
 * (registry, exec accessors, outcomes, background jobs),
 * core/tool_scheduler.c, and core/pool.c (the worker pool).
 *
 * Thread-safety: the registry is filled during plugin init (one thread) and
 * read-only afterwards, when lookups and runs may come from any thread.
 * weir__tools_run is called by one agent's driver thread at a time per step.
 */
#ifndef WEIR_CORE_TOOLS_H
#define WEIR_CORE_TOOLS_H

#include "common.h"
#include "hooks.h"
#include "pool.h"
#include "session_log.h"

typedef struct weir__tools weir__tools;
typedef struct weir__jobs weir__jobs;

/* New empty registry with its (lazily started) body pool.  E_NOMEM. */
int weir__tools_create(weir__tools **out);
/* Join the pool's threads and free.  No run may be active.  NULL is a no-op. */
void weir__tools_destroy(weir__tools *t);
/*
 * Register `tool` for plugin `plugin_id` (both copied; user_data kept).
 * E_INVAL for a bad name/struct_size/flags/schema or a missing execute;
 * E_DUPLICATE names both plugins.  Not thread-safe (init time only).
 */
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
    /* Background jobs of the agent (borrowed), or NULL: WEIR_TOOL_BACKGROUND
     * tools then run in the foreground like any other tool. */
    weir__jobs *jobs;
} weir__tool_step;

/*
 * Run `calls` ([{id, name, arguments}] in model order, borrowed; arguments is
 * JSON text): tool/call before policy, ordered pre, concurrent bodies,
 * ordered post, tool/result in model order; synthetic ABORTED_BEFORE_DISPATCH
 * pairs on cancel (still WEIR_OK: the caller reads st->signal).
 * *concluded is set when a result concluded the turn.  A scheduler failure
 * (log append, accept_context, memory) returns that error after the running
 * bodies finished, and fabricates no results.  E_INVAL for malformed calls,
 * before anything is logged.  Returns only when no body is running.
 */
int weir__tools_run(const weir__tool_step *st, const json_t *calls,
                    bool *concluded, weir_error *err);

/*
 * Tools across a crash (docs/tools.md).  A re-run is recorded, before its
 * tools/pre-execute, as the ignorable event WEIR__TOOL_RERUN_EVENT
 * {turn, step, call_id, name, idempotency_key, attempt}; a call re-run this
 * many times already is not re-run again (a body that kills the process must
 * not make its session unopenable) and gets the INTERRUPTED result.
 */
#define WEIR__TOOL_RERUN_EVENT "tool/rerun"
#define WEIR__TOOL_MAX_RERUNS 3
/* The message of the INTERRUPTED error result (after "Error: "). */
#define WEIR__TOOL_INTERRUPTED_TEXT \
    "interrupted by a crash: the tool may or may not have run; do not assume either"

/*
 * Answer the calls a crash cut, in the given (model) order, on the open
 * step st->turn/st->step of a log being resumed.  `calls` (borrowed) is
 * [{id, name, arguments, call_seq?, idempotency_key?, reruns}]: call_seq
 * when the call's tool/call is in the log (else it is appended first),
 * idempotency_key as that tool/call logged it (else it is computed),
 * reruns = the WEIR__TOOL_RERUN_EVENTs already logged for it.  A call of a
 * WEIR_TOOL_IDEMPOTENT tool with reruns < WEIR__TOOL_MAX_RERUNS runs again
 * like any call (rerun event, argument checks, tools/pre-execute, the body
 * with attempt reruns + 2 and the same key, tools/post-execute, tool/result,
 * contexts, tools/result); background tools then run in the foreground
 * (st->jobs is ignored).  Every other call gets an error result
 * {name:"AbortError", code:"INTERRUPTED"} with WEIR__TOOL_INTERRUPTED_TEXT
 * (its tool/call first when that is missing); neither policy hook nor a body
 * runs for it, tools/result is emitted.  Errors as weir__tools_run.
 */
int weir__tools_resume(const weir__tool_step *st, const json_t *calls, weir_error *err);

/*
 * New string "<session id>:<turn>:<step>:<call id>" (free with weir__free),
 * the idempotency key of a call (plugin.h, tool_exec_idempotency_key);
 * `session_id` NULL counts as "".  NULL when out of memory.
 */
char *weir__tool_key(const char *session_id, int turn, int step, const char *call_id);

/*
 * After init (and during it): add or replace plugin `plugin_id`'s tool
 * (replaced in place), or remove it.  E_DUPLICATE when another plugin owns
 * the name (update), E_NOT_FOUND when the plugin has no such tool
 * (remove); else as weir__tools_add.  Thread-safe: lookups and schemas
 * lock the registry; a replaced or removed definition stays allocated
 * until destroy, so a call dispatched with it finishes with it.
 */
int weir__tools_update(weir__tools *t, const char *plugin_id, const weir_tool *tool,
                       weir_error *err);
int weir__tools_remove(weir__tools *t, const char *plugin_id, const char *name,
                       weir_error *err);

/*
 * The agent, turn and step of the bodies run on this thread until cleared
 * (agent NULL): the scheduler sets them around a body, and an execution
 * takes them (tool_exec_progress).  Thread-local.
 */
void weir__tool_site_set(weir_agent *agent, int turn, int step);
/* api->tool_exec_progress: the live tool/progress event (plugin.h). */
int weir__tool_exec_progress(weir_tool_exec *exec, const json_t *progress);

/* ------------------------------------------------------------------------ */
/* Registry internals shared by tools.c and tool_scheduler.c                */
/* ------------------------------------------------------------------------ */

/* A registered tool: deep copies of the registered strings and schema. */
typedef struct weir__tool_def {
    char *name;
    char *description;
    char *plugin_id;     /* the registering plugin row id */
    json_t *parameters;  /* owned; {"type":"object"} when none was given */
    uint32_t flags;      /* WEIR_TOOL_* (BACKGROUND, IDEMPOTENT) */
    int (*execute)(weir_tool_exec *exec, const json_t *args, json_t **result,
                   void *user_data);
    int (*concurrency_safe)(const json_t *args, void *user_data);
    void *user_data;
} weir__tool_def;

/* The tool named `name` (borrowed, valid until destroy), or NULL. */
const weir__tool_def *weir__tools_find(const weir__tools *t, const char *name);
/* The registry's worker pool for tool bodies (borrowed). */
weir__pool *weir__tools_pool(weir__tools *t);
/* true only when def->concurrency_safe(args) returned exactly 1. */
bool weir__tool_parallel_safe(const weir__tool_def *def, const json_t *args);

/* One execution of a body (the opaque type of plugin.h). */
struct weir_tool_exec {
    const char *call_id;  /* borrowed */
    weir_signal *signal;  /* borrowed, may be NULL */
    const char *key;      /* borrowed idempotency key, may be NULL */
    int attempt;          /* 1, or 2+ for a re-run after a crash */
    char *fail_code;      /* owned, set by weir_tool_exec_fail */
    char *fail_message;   /* owned, set by weir_tool_exec_fail */
    weir_agent *agent;    /* the call's agent (tool/progress), or NULL */
    int turn, step;       /* of the call's tool/call */
    const char *name;     /* the tool's name (borrowed) */
};

/*
 * The normalized outcome of one tool call: what becomes its tool/result.
 * content: an array of blocks (owned); error: {name, code, reason?} (owned)
 * or NULL.
 */
typedef struct weir__tool_outcome {
    json_t *content;
    bool is_error;
    bool concludes_turn;
    json_t *error;
} weir__tool_outcome;

/* Release the members and zero the struct. */
void weir__tool_outcome_clear(weir__tool_outcome *o);
/*
 * Replace `o` with an error outcome: content [{type:"text",text:"Error: <text>"}],
 * is_error, error {name, code, reason?} (reason omitted when NULL).
 * E_NOMEM on allocation failure (o is then cleared).
 */
int weir__tool_outcome_error(weir__tool_outcome *o, const char *name, const char *code,
                             const char *reason, const char *fmt, ...) WEIR_PRINTF(5, 6);
/* New reference {content, is_error, error?}, or NULL on allocation failure. */
json_t *weir__tool_outcome_json(const weir__tool_outcome *o);

/*
 * Parse `text` (NULL or "" = {}) and validate it against def's schema.
 * On success *args is a new reference.  Bad JSON or a schema mismatch fills
 * `o` with an INVALID_ARGUMENTS error naming the field and returns WEIR_OK
 * with *args NULL.  Returns E_NOMEM only when allocation failed.
 */
int weir__tool_parse_args(const weir__tool_def *def, const char *text, json_t **args,
                          weir__tool_outcome *o);

/*
 * Run def's body with `args` (borrowed) on the calling thread and normalize
 * what it returned into `o` (a failure becomes a ToolError outcome).
 * Returns E_NOMEM only when allocation failed.  Thread-safe.
 */
int weir__tool_invoke(const weir__tool_def *def, const char *call_id, weir_signal *signal,
                      const json_t *args, weir__tool_outcome *o);
/* weir__tool_invoke with the call's idempotency key (borrowed, may be NULL)
 * and attempt (1, or 2+ for a re-run after a crash). */
int weir__tool_invoke_keyed(const weir__tool_def *def, const char *call_id, const char *key,
                            int attempt, weir_signal *signal, const json_t *args,
                            weir__tool_outcome *o);

/* ------------------------------------------------------------------------ */
/* Background jobs                                                           */
/* ------------------------------------------------------------------------ */

/*
 * Called on the job's worker thread once the job finished (also after a
 * cancel).  `result` is {content, is_error, error?} (borrowed, valid for the
 * call).  The job is still listed as active while this runs and leaves the
 * list when it returned, so a job is always either active or delivered.
 */
typedef void (*weir__job_done_fn)(const char *job_id, const char *call_id,
                                  const char *tool, const json_t *result, void *ud);

/*
 * A job table.  Jobs run on its own pool of at most `max_jobs` threads
 * (more wait queued).  `on_done` may be NULL.  Thread-safe.
 */
int weir__jobs_create(size_t max_jobs, weir__job_done_fn on_done, void *ud,
                      weir__jobs **out, weir_error *err);
/* Cancel every job, wait for all of them (callbacks included), free. */
void weir__jobs_destroy(weir__jobs *j);
/*
 * Start `def` (borrowed: the registry must outlive the table) with `args`
 * (borrowed, copied) as a job for `call_id` whose idempotency key is `key`
 * (copied; may be NULL).  job_id receives "job-<hex>" (job_id_size at least
 * 40).
 */
int weir__jobs_submit(weir__jobs *j, const weir__tool_def *def, const char *call_id,
                      const char *key, const json_t *args, char *job_id, size_t job_id_size,
                      weir_error *err);
/* Fire one job's signal; E_NOT_FOUND when it is not active. */
int weir__jobs_cancel(weir__jobs *j, const char *job_id, weir_error *err);
/* Fire the signal of every active job. */
void weir__jobs_cancel_all(weir__jobs *j);
/* New reference: ids of active (queued or running) jobs in submit order. */
json_t *weir__jobs_active(weir__jobs *j);

/* Public-table implementations. */
const char *weir__tool_exec_call_id(const weir_tool_exec *exec);
weir_signal *weir__tool_exec_signal(const weir_tool_exec *exec);
const char *weir__tool_exec_idempotency_key(const weir_tool_exec *exec);
int weir__tool_exec_attempt(const weir_tool_exec *exec);
void weir__tool_exec_fail(weir_tool_exec *exec, const char *code, const char *fmt, ...)
    WEIR_PRINTF(3, 4);

#endif
