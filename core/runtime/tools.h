/*
 * core/runtime/tools.h - the tool registry and the ordered parallel scheduler
 * (docs/tools.md).  Owner: core/runtime/tools.c
 * (registry, exec accessors, outcomes, background jobs),
 * core/engine/tool_scheduler.c, and core/base/pool.c (the worker pool).
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
/* New reference: [{name, description, parameters}] in registration order,
 * or NULL (out of memory).  Shared: the same array until the list changes
 * (add, update, remove), so the caller never changes it. */
json_t *weir__tools_schemas(const weir__tools *t);

/*
 * A live event out of the engine (core/engine/events.c): `type` and `data`
 * (stolen) to the agent's listeners and embedder.  Any thread.
 */
typedef void (*weir__live_fn)(void *ud, const char *type, json_t *data);

/* Where a body runs: its turn and step, and where its live events go. */
typedef struct weir__tool_site {
    weir__live_fn live; /* may be NULL */
    void *live_ud;
    int turn, step;
} weir__tool_site;

/* Everything the scheduler needs from the running step. */
typedef struct weir__tool_step {
    weir__tools *tools;
    const weir__hooks *hooks;
    weir__log *log;
    weir_agent *agent;        /* for hook listeners only (opaque), may be NULL */
    const char *session_id;   /* the agent's (borrowed), or NULL */
    weir__live_fn live;       /* the tool bodies' live events (tool/progress), or NULL */
    void *live_ud;
    weir_signal *signal;      /* the turn's signal */
    int turn, step;
    int max_parallel;         /* >= 1 */
    /* Hand a tool's additional context (borrowed) to the engine: anchored to
     * the running turn, or next-step outside one. */
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
 * The ignorable events of a background job (docs/tools.md, "Background
 * tools"): WEIR__JOB_QUEUED {turn, step, job_id, call_id, tool,
 * idempotency_key} before the job can start, then exactly one of
 * WEIR__JOB_RETURNED / WEIR__JOB_FAILED {turn, step, job_id, call_id, tool,
 * result:{content, is_error, error?}, delivered?:false} and
 * WEIR__JOB_CANCELLED {turn, step, job_id, call_id, tool,
 * effects:"not_rolled_back", cause, delivered?:false} (turn and step are the
 * call's).
 */
#define WEIR__JOB_QUEUED "job/queued"
#define WEIR__JOB_RETURNED "job/returned"
#define WEIR__JOB_FAILED "job/failed"
#define WEIR__JOB_CANCELLED "job/cancelled"

/*
 * Settle one finished job (`job` as weir__jobs_take gives it, borrowed) on
 * the driver thread: first the events its body appended are logged; for a
 * returned or failed job, tools/post-execute runs
 * on its result (payload as for a call, with the call's turn and step, plus
 * job_id; st->turn, st->step and st->signal are ignored, no signal), then
 * the job's terminal event is logged with the result post-execute returned
 * (the outcome follows its is_error).  A cancelled job runs no hook; its
 * result is dropped.  A job with "interrupted":true (a crash cut it:
 * weir__driver_recover_jobs) runs no hook either; its result is the
 * core's INTERRUPTED error.  With `deliver`, *message (new) is the service message
 * to queue, {role:"user", content:[text], source:{kind:"service",
 * name:"jobs", job_id, call_id, status}}, and *contexts (new, or NULL) the
 * additional contexts post-execute added; without it nothing is delivered
 * and the event says "delivered":false.  Errors as weir__tools_run (a log
 * append failing, memory).
 */
int weir__tools_settle_job(const weir__tool_step *st, const json_t *job, bool deliver,
                           json_t **message, json_t **contexts, weir_error *err);

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

/* api->tool_exec_progress: the live tool/progress event (plugin.h). */
int weir__tool_exec_progress(weir_tool_exec *exec, const json_t *progress);

/* ------------------------------------------------------------------------ */
/* Registry internals shared by tools.c and tool_scheduler.c                */
/* ------------------------------------------------------------------------ */

/*
 * Whether the plugin of row `plugin_id` registered event type `type` (the
 * host's registry, for api->tool_exec_append).  Thread-safe.
 */
typedef bool (*weir__event_check_fn)(const char *plugin_id, const char *type, void *ud);
/* Install the check (host creation; init time only).  Without one, any
 * valid type name that is not a core type is accepted. */
void weir__tools_set_event_check(weir__tools *t, weir__event_check_fn fn, void *ud);

/* The most events one execution may append (api->tool_exec_append). */
#define WEIR__TOOL_MAX_EVENTS 256

/* A registered tool: deep copies of the registered strings and schema. */
typedef struct weir__tool_def {
    const weir__tools *registry; /* the registry it belongs to */
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
    weir__live_fn live;   /* where tool/progress goes (the step's), or NULL */
    void *live_ud;
    int turn, step;       /* of the call's tool/call */
    const char *name;     /* the tool's name (borrowed) */
    const weir__tool_def *def; /* the tool being run */
    json_t *events;       /* owned: [{type, data}] from weir_tool_exec_append, or NULL */
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
    json_t *events; /* owned: [{type, data}] the body appended (committed with the result), or NULL */
} weir__tool_outcome;

/* Release the members (events included) and zero the struct. */
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
 * what it returned into `o` (a failure becomes a ToolError outcome); the
 * events the body appended go to o->events, whatever it returned.
 * Returns E_NOMEM only when allocation failed.  Thread-safe.
 */
int weir__tool_invoke(const weir__tool_def *def, const char *call_id, weir_signal *signal,
                      const json_t *args, weir__tool_outcome *o);
/* weir__tool_invoke with the call's idempotency key (borrowed, may be NULL),
 * attempt (1, or 2+ for a re-run after a crash) and site (borrowed, may be
 * NULL: tool_exec_progress is then WEIR_E_UNSUPPORTED). */
int weir__tool_invoke_keyed(const weir__tool_def *def, const char *call_id, const char *key,
                            int attempt, weir_signal *signal, const json_t *args,
                            const weir__tool_site *site, weir__tool_outcome *o);

/* ------------------------------------------------------------------------ */
/* Background jobs                                                           */
/* ------------------------------------------------------------------------ */

/*
 * Called on the job's worker thread once its body returned (also after a
 * cancel, and for a job cancelled before it started).  `result` is
 * {content, is_error, error?} (borrowed, valid for the call).  The job is
 * finished, but stays listed as active until weir__jobs_take hands it on, so
 * a job is always either active or taken, never neither.
 */
typedef void (*weir__job_done_fn)(const char *job_id, const char *call_id,
                                  const char *tool, const json_t *result, void *ud);

/* What a job answers: the call it was started for (all borrowed, copied). */
typedef struct weir__job_call {
    const char *job_id;    /* from weir__jobs_new_id */
    const char *call_id;
    const char *key;       /* the call's idempotency key, may be NULL */
    const char *arguments; /* the call's raw JSON text, may be NULL ("") */
    int turn, step;        /* of the call's tool/call */
} weir__job_call;

/*
 * A job table of at most `max_jobs` unfinished (queued or running) jobs
 * (agent.max_background_jobs; the scheduler refuses more, docs/tools.md).
 * Jobs run on its own pool of `max_jobs` threads.  `on_done` may be NULL.
 * Thread-safe.
 */
int weir__jobs_create(size_t max_jobs, weir__job_done_fn on_done, void *ud,
                      weir__jobs **out, weir_error *err);
/* Drain (weir__jobs_drain), then free, finished jobs not taken included. */
void weir__jobs_destroy(weir__jobs *j);
/* The table's max_jobs (0 for NULL). */
size_t weir__jobs_max(const weir__jobs *j);
/* How many jobs are queued or running now. */
size_t weir__jobs_unfinished(weir__jobs *j);
/* Write a new job id "job-<hex>" into buf (size >= 40); returns buf. */
char *weir__jobs_new_id(char *buf, size_t size);
/*
 * Start `def` (borrowed: the registry must outlive the table) with `args`
 * (borrowed, copied) as job call->job_id.  E_STATE once drained.
 */
int weir__jobs_submit(weir__jobs *j, const weir__tool_def *def, const weir__job_call *call,
                      const json_t *args, weir_error *err);
/* Fire the signal of a queued or running job with `cause` (NULL: "user");
 * E_NOT_FOUND when there is none (unknown, or already finished). */
int weir__jobs_cancel(weir__jobs *j, const char *job_id, const char *cause, weir_error *err);
/* Fire the signal of every queued or running job. */
void weir__jobs_cancel_all(weir__jobs *j, const char *cause);
/* New reference: ids of active jobs (queued, running, or finished and not
 * yet taken) in submit order. */
json_t *weir__jobs_active(weir__jobs *j);
/*
 * Take the job that finished first: a new object {job_id, call_id, tool,
 * arguments, turn, step, idempotency_key?, outcome:"returned"|"failed"|
 * "cancelled", cause? (cancelled: the signal's cause), result:{content,
 * is_error, error?} (cancelled: whatever the body returned, or the
 * not-started error), events? ([{type, data}] the body appended)}, or NULL
 * when no job is finished (or out of memory:
 * the job stays).  A taken job is no longer cancellable nor taken again,
 * but stays listed as active until weir__jobs_forget: its settlement (the
 * end event, the service message) comes first.
 */
json_t *weir__jobs_take(weir__jobs *j);
/* Drop the taken job `job_id` from the table (after its settlement). */
void weir__jobs_forget(weir__jobs *j, const char *job_id);
/* Cancel every job (cause "disposed") and wait until no body runs; queued
 * jobs finish cancelled without running.  Later submits fail. */
void weir__jobs_drain(weir__jobs *j);

/* Public-table implementations. */
const char *weir__tool_exec_call_id(const weir_tool_exec *exec);
weir_signal *weir__tool_exec_signal(const weir_tool_exec *exec);
const char *weir__tool_exec_idempotency_key(const weir_tool_exec *exec);
int weir__tool_exec_attempt(const weir_tool_exec *exec);
void weir__tool_exec_fail(weir_tool_exec *exec, const char *code, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
int weir__tool_exec_append(weir_tool_exec *exec, const char *type, const json_t *data,
                           weir_error *err);

#endif
