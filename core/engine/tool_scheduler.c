/*
 * core/engine/tool_scheduler.c - the ordered parallel tool scheduler (docs/tools.md):
 * "ordered pre, concurrent execute, ordered post".
 *
 * Everything but the bodies runs on the calling (driver) thread: the
 * tool/call append, argument checks, tools/pre-execute, tools/post-execute,
 * the tool/result append and additional contexts, all in model order.  Bodies
 * run on the registry's worker pool.  A run of parallel-safe calls shares a
 * rolling pool of st->max_parallel slots; an exclusive call waits for the
 * running bodies to finish and runs alone.  Results are committed as a
 * contiguous model-order prefix.
 *
 * weir__tools_resume runs the same machinery over the calls a crash cut:
 * their tool/call may already be logged, an idempotent tool's call runs
 * again (attempt 2+, the same key) and every other one gets its INTERRUPTED
 * result without a hook or a body.
 */
#include "tools.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "cancel.h"

#define RECEIPT_INSTRUCTION \
    "The job runs in the background; its result will arrive later. Do not repeat this call."

typedef enum slot_state {
    S_UNSTARTED = 0,
    S_RUNNING,   /* body dispatched, not yet collected */
    S_READY,     /* outcome known, not committed */
    S_COMMITTED
} slot_state;

typedef struct run run;

typedef struct slot {
    run *r;
    const char *id;          /* borrowed from calls */
    const char *name;        /* borrowed from calls */
    const char *job_id;      /* a background job's result being settled, or NULL */
    char *args_text;         /* owned */
    char *key;               /* idempotency key, owned */
    int attempt;             /* 1, or 2+ for a re-run after a crash */
    bool resume;             /* weir__tools_resume: a call a crash cut */
    bool logged;             /* resume: its tool/call is in the log (call_seq) */
    int reruns;              /* resume: re-runs already logged for it */
    json_t *args;            /* parsed + validated, owned; NULL when invalid */
    const weir__tool_def *def;
    bool prepared;           /* args parsed (and checked when def is known) */
    bool exclusive;          /* dispatched as an exclusive call */
    bool dispatched;         /* the body ran: tools/post-execute applies */
    bool done;               /* set by the worker under r->mu */
    int body_rc;             /* the worker's status (E_NOMEM only) */
    size_t call_seq;
    slot_state state;
    weir__tool_outcome out;
} slot;

struct run {
    const weir__tool_step *st;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t done_count;       /* bodies finished (under mu) */
    size_t collected;        /* bodies collected by the driver */
    slot *slots;
    size_t n, next, committed, running;
    bool excl_running, aborted, concluded;
    int failure;             /* first scheduler failure, or WEIR_OK */
    weir_error *err;
    json_t *agent_id;        /* for hook payloads */
};

static void fail(run *r, int code, const weir_error *e, const char *fmt, ...)
    WEIR_PRINTF(4, 5);

/* Record the first scheduler failure (copying `e` when given). */
static void fail(run *r, int code, const weir_error *e, const char *fmt, ...) {
    if (r->failure != WEIR_OK)
        return;
    r->failure = code;
    if (!r->err)
        return;
    if (e && e->code != WEIR_OK) {
        *r->err = *e;
        r->failure = e->code;
    } else {
        va_list ap;
        va_start(ap, fmt);
        weir__verr(r->err, code, NULL, NULL, fmt, ap);
        va_end(ap);
    }
}

/* ------------------------------------------------------------------------ */
/* Hooks                                                                     */
/* ------------------------------------------------------------------------ */

static json_t *pre_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call, (void)args, (void)ctx;
    return json_pack("{s:s}", "kind", "allow");
}

static json_t *post_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call, (void)ctx;
    return json_deep_copy(json_object_get(args, "result"));
}

/* A waterfall; without listeners the default runs directly. */
static json_t *waterfall(run *r, const char *hook, const json_t *args,
                         weir__hook_default_fn dflt, weir_error *e) {
    const weir__tool_step *st = r->st;
    if (!st->hooks || weir__hooks_count(st->hooks, hook) == 0) {
        json_t *v = dflt(NULL, args, NULL);
        if (!v)
            weir__err(e, WEIR_E_NOMEM, NULL, hook, "%s: out of memory", hook);
        return v;
    }
    return weir__hook_invoke(st->hooks, hook, st->agent, st->signal, args, dflt, NULL, e);
}

/* Base payload {agent, turn, step, call_id, name, arguments, idempotency_key,
 * attempt, job_id?}. */
static json_t *hook_args(run *r, const slot *s) {
    json_t *a = json_pack("{s:O, s:i, s:i, s:s, s:s, s:s, s:s, s:i}", "agent", r->agent_id,
                          "turn", r->st->turn, "step", r->st->step, "call_id", s->id, "name",
                          s->name, "arguments", s->args_text, "idempotency_key", s->key,
                          "attempt", s->attempt);
    if (a && s->job_id && json_object_set_new(a, "job_id", json_string(s->job_id)) != 0) {
        json_decref(a);
        a = NULL;
    }
    return a;
}

/* ------------------------------------------------------------------------ */
/* Log appends                                                               */
/* ------------------------------------------------------------------------ */

static int append_call(run *r, slot *s) {
    json_t *data = json_pack("{s:i, s:i, s:s, s:s, s:s, s:s}", "turn", r->st->turn, "step",
                             r->st->step, "call_id", s->id, "name", s->name, "arguments",
                             s->args_text, "idempotency_key", s->key);
    if (!data) {
        fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
        return WEIR_E_NOMEM;
    }
    weir_error e = {0};
    int rc = weir__log_append(r->st->log, "tool/call", data, NULL, NULL, WEIR__APPEND_HANDOVER,
                              &s->call_seq, &e);
    json_decref(data);
    if (rc != WEIR_OK)
        fail(r, rc, &e, "tools: appending tool/call failed");
    return rc;
}

/* The durable record of a re-run, written before its tools/pre-execute: a
 * crash during the re-run leaves the call open with one more of these. */
static int append_rerun(run *r, slot *s) {
    json_t *data = json_pack("{s:i, s:i, s:s, s:s, s:s, s:i}", "turn", r->st->turn, "step",
                             r->st->step, "call_id", s->id, "name", s->name,
                             "idempotency_key", s->key, "attempt", s->attempt);
    int rc = WEIR_E_NOMEM;
    if (data) {
        weir_error e = {0};
        rc = weir__log_append(r->st->log, WEIR__TOOL_RERUN_EVENT, data, NULL, NULL,
                              WEIR_EVENT_IGNORABLE, NULL, &e);
        if (rc != WEIR_OK)
            fail(r, rc, &e, "tools: appending %s failed", WEIR__TOOL_RERUN_EVENT);
    } else {
        fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
    }
    json_decref(data);
    return rc;
}

static int append_result(run *r, slot *s, size_t *seq) {
    const weir__tool_outcome *o = &s->out;
    /* the content's containers copied, its scalars shared: the log keeps
     * the data it is handed over (WEIR__APPEND_HANDOVER) */
    json_t *block = json_pack("{s:s, s:s, s:o}", "type", "tool_result", "call_id", s->id,
                              "content", weir__json_copy_tree(o->content));
    if (block && o->is_error && json_object_set_new(block, "is_error", json_true()) != 0) {
        json_decref(block);
        block = NULL;
    }
    json_t *data = block ? json_pack("{s:i, s:i, s:{s:s, s:[o]}}", "turn", r->st->turn,
                                     "step", r->st->step, "message", "role", "tool",
                                     "content", block)
                         : NULL;
    if (data && o->is_error && o->error && json_object_set(data, "error", o->error) != 0) {
        json_decref(data);
        data = NULL;
    }
    json_t *op = json_string("append");
    json_t *src = json_pack("[I]", (json_int_t)s->call_seq);
    int rc = WEIR_E_NOMEM;
    if (data && op && src) {
        weir_error e = {0};
        rc = weir__log_append(r->st->log, "tool/result", data, op, src, WEIR__APPEND_HANDOVER,
                              seq, &e);
        if (rc != WEIR_OK)
            fail(r, rc, &e, "tools: appending tool/result failed");
    } else {
        fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
    }
    json_decref(data);
    json_decref(op);
    json_decref(src);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Preparing, starting and running calls                                     */
/* ------------------------------------------------------------------------ */

/*
 * Whether `name` is a tool the session declared and then removed: once a
 * request was sent its header keeps every tool it sent (the prefix is
 * append-only) and lists the ones no longer offered in removed_tools
 * (docs/lifecycle.md, "The append-only prefix").
 */
static bool removed_tool(weir__log *log, const char *name) {
    const json_t *removed = json_object_get(weir__log_request_header(log), "removed_tools");
    size_t i;
    const json_t *v;
    json_array_foreach(removed, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return true;
    }
    return false;
}

/* Parse and check the arguments once; unknown and removed tools get their
 * error here, and a cut call that is not re-run its INTERRUPTED result. */
static void prepare(run *r, slot *s) {
    if (s->prepared)
        return;
    s->prepared = true;
    s->def = weir__tools_find(r->st->tools, s->name);
    int rc;
    if (s->resume && !(s->def && (s->def->flags & WEIR_TOOL_IDEMPOTENT) &&
                       s->reruns < WEIR__TOOL_MAX_RERUNS)) {
        s->def = NULL; /* no policy hook and no body for it */
        s->attempt = s->reruns + 1; /* the execution the crash cut */
        if (s->reruns > 0)
            rc = weir__tool_outcome_error(&s->out, "AbortError", "INTERRUPTED", NULL,
                                          "%s (it was run again %d time%s after crashes and "
                                          "never finished)",
                                          WEIR__TOOL_INTERRUPTED_TEXT, s->reruns,
                                          s->reruns == 1 ? "" : "s");
        else
            rc = weir__tool_outcome_error(&s->out, "AbortError", "INTERRUPTED", NULL, "%s",
                                          WEIR__TOOL_INTERRUPTED_TEXT);
    } else if (removed_tool(r->st->log, s->name)) {
        s->def = NULL; /* still registered when only the assembly dropped it */
        rc = weir__tool_outcome_error(&s->out, "UnknownTool", "TOOL_REMOVED", NULL,
                                      "tool '%s' was removed from this session's tools: it can "
                                      "no longer be called",
                                      s->name);
    } else if (!s->def)
        rc = weir__tool_outcome_error(&s->out, "UnknownTool", "UNKNOWN_TOOL", NULL,
                                      "unknown tool '%s'", s->name);
    else
        rc = weir__tool_parse_args(s->def, s->args_text, &s->args, &s->out);
    if (rc != WEIR_OK)
        fail(r, rc, NULL, "tools: out of memory");
}

/* Parallel only when the tool's classifier says exactly 1 (live). */
static bool classify(const slot *s) {
    return s->def && s->args && weir__tool_parallel_safe(s->def, s->args);
}

static void body_task(void *arg) {
    slot *s = arg;
    run *r = s->r;
    weir__tool_site site = {r->st->live, r->st->live_ud, r->st->turn, r->st->step};
    int rc = weir__tool_invoke_keyed(s->def, s->id, s->key, s->attempt, r->st->signal, s->args,
                                     &site, &s->out);
    pthread_mutex_lock(&r->mu);
    s->body_rc = rc;
    s->done = true;
    r->done_count++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* An allow with `arguments` (an object): the call runs with them, checked
 * as the model's were; invalid ones are its error result (false). */
static bool rewrite_args(slot *s, const json_t *arguments, int *rc) {
    if (!arguments)
        return true;
    char *text = weir__json_dump(arguments);
    json_t *args = NULL;
    *rc = text ? weir__tool_parse_args(s->def, text, &args, &s->out) : WEIR_E_NOMEM;
    if (*rc != WEIR_OK || !args) {
        weir__free(text);
        return false;
    }
    json_decref(s->args);
    s->args = args;
    weir__free(s->args_text);
    s->args_text = text;
    return true;
}

/* Whether a plugin or the embedder listens to `hook` for this step. */
static bool listened(const run *r, const char *hook) {
    return r->st->hooks && weir__hooks_count(r->st->hooks, hook) > 0;
}

/* tools/pre-execute; true when the call may run.  Otherwise s->out is set. */
static bool pre_execute(run *r, slot *s) {
    if (!listened(r, "tools/pre-execute")) /* the default: allow, arguments as they are */
        return r->failure == WEIR_OK;
    json_t *args = hook_args(r, s);
    if (!args) {
        fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
        return false;
    }
    weir_error e = {0};
    json_t *res = waterfall(r, "tools/pre-execute", args, pre_default, &e);
    json_decref(args);
    int rc = WEIR_OK;
    bool allow = false;
    const char *kind = weir__json_str(res, "kind", NULL);
    if (!res && e.code == WEIR_E_NOMEM)
        fail(r, WEIR_E_NOMEM, &e, "tools: out of memory");
    else if (!res)
        rc = weir__tool_outcome_error(&s->out, "HookError", "HOOK_FAILED", e.text,
                                      "tools/pre-execute failed: %s", e.text);
    else if (kind && strcmp(kind, "allow") == 0)
        allow = rewrite_args(s, json_object_get(res, "arguments"), &rc);
    else if (kind && strcmp(kind, "deny") == 0) {
        const char *reason = weir__json_str(res, "reason", "denied by policy");
        rc = weir__tool_outcome_error(&s->out, "ToolDenied", "DENIED", reason, "denied: %s",
                                      reason);
    } else
        rc = weir__tool_outcome_error(&s->out, "HookError", "HOOK_FAILED", NULL,
                                      "tools/pre-execute returned an unknown decision");
    json_decref(res);
    if (rc != WEIR_OK)
        fail(r, rc, NULL, "tools: out of memory");
    return allow && r->failure == WEIR_OK;
}

/* The receipt of a background call: its text is the JSON receipt object. */
static int receipt(slot *s, const char *job_id) {
    json_t *obj = json_pack("{s:s, s:s, s:s, s:s}", "status", "queued", "job_id", job_id,
                            "call_id", s->id, "instruction", RECEIPT_INSTRUCTION);
    char *text = obj ? weir__json_dump(obj) : NULL;
    json_decref(obj);
    if (!text)
        return WEIR_E_NOMEM;
    weir__tool_outcome_clear(&s->out);
    s->out.content = json_pack("[{s:s, s:s}]", "type", "text", "text", text);
    weir__free(text);
    return s->out.content ? WEIR_OK : WEIR_E_NOMEM;
}

/* Append the ignorable job event `type` with `data` (stolen). */
static int append_job_event(run *r, const char *type, json_t *data) {
    int rc = WEIR_E_NOMEM;
    if (data) {
        weir_error e = {0};
        rc = weir__log_append(r->st->log, type, data, NULL, NULL, WEIR_EVENT_IGNORABLE, NULL,
                              &e);
        if (rc != WEIR_OK)
            fail(r, rc, &e, "tools: appending %s failed", type);
    } else {
        fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
    }
    json_decref(data);
    return rc;
}

/*
 * A background call that pre-execute allowed: beyond max_background_jobs it
 * gets a JOB_LIMIT error result; else WEIR__JOB_QUEUED is logged (a job
 * whose intent could not be logged never starts), the job starts and the
 * call's result is the receipt.  A job that cannot start fails at once
 * (WEIR__JOB_FAILED, and the call's result says why).
 */
static void start_job(run *r, slot *s) {
    weir__jobs *jobs = r->st->jobs;
    size_t max = weir__jobs_max(jobs);
    if (weir__jobs_unfinished(jobs) >= max) {
        char why[200];
        snprintf(why, sizeof why,
                 "background job limit reached: %zu job%s running (agent.max_background_jobs); "
                 "wait for a job's result before starting another",
                 max, max == 1 ? " is" : "s are");
        if (weir__tool_outcome_error(&s->out, "ToolError", "JOB_LIMIT", why, "%s", why) !=
            WEIR_OK)
            fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
        return;
    }
    char job_id[48];
    weir__jobs_new_id(job_id, sizeof job_id);
    if (append_job_event(r, WEIR__JOB_QUEUED,
                         json_pack("{s:i, s:i, s:s, s:s, s:s, s:s}", "turn", r->st->turn, "step",
                                   r->st->step, "job_id", job_id, "call_id", s->id, "tool",
                                   s->name, "idempotency_key", s->key)) != WEIR_OK)
        return;
    weir__job_call call = {.job_id = job_id, .call_id = s->id, .key = s->key,
                           .arguments = s->args_text, .turn = r->st->turn, .step = r->st->step};
    weir_error e = {0};
    int rc = weir__jobs_submit(jobs, s->def, &call, s->args, &e);
    if (rc == WEIR_OK) {
        if (receipt(s, job_id) != WEIR_OK)
            fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
        return;
    }
    if (weir__tool_outcome_error(&s->out, "ToolError", "JOB_FAILED", e.text,
                                 "background job %s could not start: %s", job_id,
                                 e.text[0] ? e.text : weir_strerror(rc)) != WEIR_OK) {
        fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
        return;
    }
    json_t *res = weir__tool_outcome_json(&s->out);
    append_job_event(r, WEIR__JOB_FAILED,
                     res ? json_pack("{s:i, s:i, s:s, s:s, s:s, s:o}", "turn", r->st->turn,
                                     "step", r->st->step, "job_id", job_id, "call_id", s->id,
                                     "tool", s->name, "result", res)
                         : NULL);
}

/* Start call i: tool/call, checks, pre-execute, then dispatch or settle. */
static void start(run *r, slot *s, bool parallel) {
    if (!s->logged && append_call(r, s) != WEIR_OK)
        return;
    s->state = S_READY; /* unless dispatched below */
    if (s->out.content || r->failure != WEIR_OK)
        return; /* unknown tool, invalid arguments, or a cut call not re-run */
    if (s->resume && append_rerun(r, s) != WEIR_OK)
        return;
    if (!pre_execute(r, s))
        return;
    if (weir__signal_cancelled(r->st->signal)) {
        r->aborted = true;
        if (weir__tool_outcome_error(&s->out, "AbortError", "ABORTED_BEFORE_DISPATCH", NULL,
                                     "tool call aborted before dispatch") != WEIR_OK)
            fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
        return;
    }
    if ((s->def->flags & WEIR_TOOL_BACKGROUND) && r->st->jobs && !s->resume) {
        start_job(r, s);
        return;
    }
    s->state = S_RUNNING;
    s->dispatched = true;
    s->exclusive = !parallel;
    r->running++;
    if (s->exclusive)
        r->excl_running = true;
    if (s->def->flags & WEIR_TOOL_INLINE) {
        body_task(s); /* on this thread: done when it returns, collected as any body */
        return;
    }
    weir_error e = {0};
    int rc = weir__pool_submit(weir__tools_pool(r->st->tools), body_task, s, &e);
    if (rc != WEIR_OK) {
        s->state = S_READY;
        s->dispatched = false;
        r->running--;
        r->excl_running = false;
        fail(r, rc, &e, "tools: dispatching tool '%s' failed", s->name);
    }
}

/* Move finished bodies to READY (driver thread). */
static void collect(run *r) {
    pthread_mutex_lock(&r->mu);
    if (r->done_count != r->collected) {
        for (size_t i = r->committed; i < r->next; i++) {
            slot *s = &r->slots[i];
            if (s->state == S_RUNNING && s->done) {
                s->state = S_READY;
                r->running--;
                r->collected++;
                if (s->exclusive)
                    r->excl_running = false;
            }
        }
    }
    pthread_mutex_unlock(&r->mu);
}

/* Wait until some running body finished.  The wait looks again every
 * second: a wakeup the condition variable lost costs a second, never the
 * step. */
static void wait_any(run *r) {
    pthread_mutex_lock(&r->mu);
    while (r->done_count == r->collected) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------------------------ */
/* Committing                                                                */
/* ------------------------------------------------------------------------ */

/* tools/post-execute; returns the additional contexts (new ref) or NULL. */
static json_t *post_execute(run *r, slot *s) {
    if (!listened(r, "tools/post-execute")) /* the default: the result as it is, no contexts */
        return NULL;
    json_t *args = hook_args(r, s);
    json_t *res_obj = json_pack("{s:O, s:b}", "content", s->out.content, "is_error",
                                s->out.is_error);
    if (!args || !res_obj || json_object_set_new(args, "result", res_obj) != 0) {
        json_decref(args);
        fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
        return NULL;
    }
    weir_error e = {0};
    json_t *res = waterfall(r, "tools/post-execute", args, post_default, &e);
    json_decref(args);
    if (!res && e.code == WEIR_E_NOMEM) {
        fail(r, WEIR_E_NOMEM, &e, "tools: out of memory");
        return NULL;
    }
    json_t *content = json_object_get(res, "content");
    json_t *is_error = json_object_get(res, "is_error");
    json_t *ctxs = json_object_get(res, "additional_contexts");
    json_t *blocks = NULL;
    if (json_is_string(content))
        blocks = json_pack("[{s:s, s:O}]", "type", "text", "text", content);
    else if (json_is_array(content))
        blocks = json_incref(content);
    /* The shapes the hook catalog does not check: blocks and messages. */
    char why[96] = "";
    size_t i;
    json_t *v;
    json_array_foreach(blocks, i, v) {
        if (!json_is_object(v) || !json_is_string(json_object_get(v, "type"))) {
            snprintf(why, sizeof why, "content[%zu] is not a content block", i);
            break;
        }
    }
    json_array_foreach(json_is_array(ctxs) ? ctxs : NULL, i, v) {
        if (!why[0] && !json_is_object(v)) {
            snprintf(why, sizeof why, "additional_contexts[%zu] is not a message object", i);
            break;
        }
    }
    bool ok = res && json_is_object(res) && blocks && (!is_error || json_is_boolean(is_error)) &&
              (!ctxs || json_is_array(ctxs)) && !why[0];
    if (!ok) {
        bool got = res != NULL;
        json_decref(blocks);
        json_decref(res);
        int rc = !got ? weir__tool_outcome_error(&s->out, "HookError", "HOOK_FAILED", e.text,
                                                 "tools/post-execute failed: %s", e.text)
                 : why[0] ? weir__tool_outcome_error(&s->out, "HookError", "HOOK_FAILED", why,
                                                     "tools/post-execute returned an invalid "
                                                     "result for tool '%s': %s",
                                                     s->name, why)
                          : weir__tool_outcome_error(&s->out, "HookError", "HOOK_FAILED", NULL,
                                                     "tools/post-execute returned an invalid "
                                                     "result for tool '%s'",
                                                     s->name);
        if (rc != WEIR_OK)
            fail(r, rc, NULL, "tools: out of memory");
        return NULL;
    }
    json_decref(s->out.content);
    s->out.content = blocks;
    if (is_error)
        s->out.is_error = json_is_true(is_error);
    json_t *keep = json_incref(ctxs);
    json_decref(res);
    return keep;
}

/* The events the body appended (api->tool_exec_append), in their order,
 * ignorable, before its tools/post-execute and result. */
static int append_events(run *r, const json_t *events) {
    size_t i;
    const json_t *ev;
    json_array_foreach(events, i, ev) {
        weir_error e = {0};
        const char *type = weir__json_str(ev, "type", "");
        int rc = weir__log_append(r->st->log, type, json_object_get(ev, "data"), NULL, NULL,
                                  WEIR_EVENT_IGNORABLE, NULL, &e);
        if (rc != WEIR_OK) {
            fail(r, rc, &e, "tools: appending the tool's %s event failed", type);
            return rc;
        }
    }
    return WEIR_OK;
}

static void commit(run *r, slot *s) {
    if (s->body_rc != WEIR_OK) {
        fail(r, s->body_rc, NULL, "tools: tool '%s': out of memory", s->name);
        return;
    }
    int erc = append_events(r, s->out.events);
    json_decref(s->out.events);
    s->out.events = NULL;
    if (erc != WEIR_OK)
        return;
    json_t *ctxs = s->dispatched ? post_execute(r, s) : NULL;
    if (r->failure != WEIR_OK) {
        json_decref(ctxs);
        return;
    }
    size_t seq = 0;
    if (append_result(r, s, &seq) != WEIR_OK) {
        json_decref(ctxs);
        return;
    }
    s->state = S_COMMITTED;
    if (s->out.concludes_turn && !s->out.is_error)
        r->concluded = true;
    size_t i;
    json_t *m;
    json_array_foreach(ctxs, i, m) {
        if (!r->st->accept_context)
            break;
        weir_error e = {0};
        int rc = r->st->accept_context(r->st->ud, m, &e);
        if (rc != WEIR_OK) {
            fail(r, rc, &e, "tools: queueing an additional context failed");
            break;
        }
    }
    json_decref(ctxs);
    if (r->failure != WEIR_OK || !r->st->hooks ||
        weir__hooks_count(r->st->hooks, "tools/result") == 0)
        return;
    json_t *args = hook_args(r, s);
    json_t *res = weir__tool_outcome_json(&s->out);
    if (args && res && json_object_set_new(args, "seq", json_integer((json_int_t)seq)) == 0 &&
        json_object_set(args, "result", res) == 0)
        json_decref(weir__hook_invoke(r->st->hooks, "tools/result", r->st->agent,
                                      r->st->signal, args, NULL, NULL, NULL));
    json_decref(args);
    json_decref(res);
}

/* Commit the contiguous model-order prefix of settled calls. */
static void commit_ready(run *r) {
    while (r->failure == WEIR_OK && r->committed < r->next &&
           r->slots[r->committed].state == S_READY) {
        commit(r, &r->slots[r->committed]);
        if (r->failure == WEIR_OK)
            r->committed++;
    }
}

/* Start what may start now, in model order. */
static void fill(run *r) {
    size_t max = r->st->max_parallel >= 1 ? (size_t)r->st->max_parallel : 1;
    while (r->failure == WEIR_OK && !r->aborted && r->next < r->n) {
        if (weir__signal_cancelled(r->st->signal)) {
            r->aborted = true;
            break;
        }
        slot *s = &r->slots[r->next];
        prepare(r, s);
        if (r->failure != WEIR_OK)
            break;
        bool parallel = classify(s);
        if (parallel ? (r->excl_running || r->running >= max) : r->running > 0)
            break; /* pool full, or a barrier */
        r->next++;
        start(r, s, parallel);
        collect(r);
        commit_ready(r);
    }
}

/* Synthetic tool/call + tool/result for every call that never started. */
static void skip_unstarted(run *r) {
    for (size_t i = r->next; i < r->n && r->failure == WEIR_OK; i++) {
        slot *s = &r->slots[i];
        if (!s->logged && append_call(r, s) != WEIR_OK)
            return;
        if (weir__tool_outcome_error(&s->out, "AbortError", "ABORTED_BEFORE_DISPATCH", NULL,
                                     "tool call aborted before dispatch") != WEIR_OK) {
            fail(r, WEIR_E_NOMEM, NULL, "tools: out of memory");
            return;
        }
        size_t seq;
        if (append_result(r, s, &seq) != WEIR_OK)
            return;
        s->state = S_COMMITTED;
    }
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                               */
/* ------------------------------------------------------------------------ */

static int load_calls(run *r, const json_t *calls, bool resume, weir_error *err) {
    const char *session = r->st->session_id;
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        slot *s = &r->slots[i];
        s->r = r;
        s->id = weir__json_str(c, "id", NULL);
        s->name = weir__json_str(c, "name", NULL);
        if (!s->id || !s->name)
            return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                             "tools: call %zu has no string 'id' or 'name'", i);
        s->resume = resume;
        s->attempt = 1;
        if (resume) {
            json_t *seq = json_object_get(c, "call_seq");
            s->logged = json_is_integer(seq) && json_integer_value(seq) >= 0;
            s->call_seq = s->logged ? (size_t)json_integer_value(seq) : 0;
            json_int_t reruns = weir__json_int(c, "reruns", 0);
            s->reruns = reruns < 0 ? 0 : reruns > WEIR__TOOL_MAX_RERUNS ? WEIR__TOOL_MAX_RERUNS
                                                                         : (int)reruns;
            s->attempt = s->reruns + 2;
        }
        const char *key = resume ? weir__json_str(c, "idempotency_key", NULL) : NULL;
        s->key = key ? weir__strdup(key) : weir__tool_key(session, r->st->turn, r->st->step, s->id);
        if (!s->key)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "tools: out of memory");
        json_t *a = json_object_get(c, "arguments");
        if (json_is_string(a))
            s->args_text = weir__strdup(json_string_value(a));
        else if (!a || json_is_null(a))
            s->args_text = weir__strdup("");
        else if (json_is_object(a))
            s->args_text = weir__json_dump(a);
        else
            return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                             "tools: call '%s': 'arguments' must be JSON text", s->id);
        if (!s->args_text)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "tools: out of memory");
    }
    return WEIR_OK;
}

static void run_free(run *r) {
    for (size_t i = 0; r->slots && i < r->n; i++) {
        weir__free(r->slots[i].args_text);
        weir__free(r->slots[i].key);
        json_decref(r->slots[i].args);
        weir__tool_outcome_clear(&r->slots[i].out);
    }
    weir__free(r->slots);
    json_decref(r->agent_id);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

static int run_calls(const weir__tool_step *st, const json_t *calls, bool resume,
                     bool *concluded, weir_error *err) {
    if (concluded)
        *concluded = false;
    if (!st || !st->tools || !st->log || !json_is_array(calls))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "tools: invalid arguments");
    if (json_array_size(calls) == 0)
        return WEIR_OK;
    run r;
    memset(&r, 0, sizeof r);
    r.st = st;
    r.err = err;
    r.n = json_array_size(calls);
    if (pthread_mutex_init(&r.mu, NULL) != 0)
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL, "tools: mutex init failed");
    if (pthread_cond_init(&r.cv, NULL) != 0) {
        pthread_mutex_destroy(&r.mu);
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL, "tools: condvar init failed");
    }
    const char *agent_id = st->session_id;
    r.slots = weir__calloc(r.n, sizeof *r.slots);
    r.agent_id = agent_id ? json_string(agent_id) : json_null();
    if (!r.slots || !r.agent_id) {
        run_free(&r);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "tools: out of memory");
    }
    int rc = load_calls(&r, calls, resume, err);
    if (rc != WEIR_OK) {
        run_free(&r);
        return rc;
    }
    for (;;) {
        collect(&r);
        commit_ready(&r);
        if (r.failure != WEIR_OK)
            break;
        fill(&r);
        collect(&r);
        commit_ready(&r);
        if (r.failure != WEIR_OK)
            break;
        /* Nothing running: done, or free to start more (a body may have
         * finished after fill saw it running). */
        if (r.running == 0) {
            if (r.next == r.n || r.aborted)
                break;
            continue;
        }
        wait_any(&r);
    }
    /* Quiesce: never return while a body may still touch the run. */
    while (r.running > 0) {
        wait_any(&r);
        collect(&r);
    }
    if (r.failure == WEIR_OK && r.aborted)
        skip_unstarted(&r);
    if (concluded)
        *concluded = r.concluded;
    rc = r.failure;
    run_free(&r);
    return rc;
}

int weir__tools_run(const weir__tool_step *st, const json_t *calls, bool *concluded,
                    weir_error *err) {
    return run_calls(st, calls, false, concluded, err);
}

int weir__tools_resume(const weir__tool_step *st, const json_t *calls, weir_error *err) {
    return run_calls(st, calls, true, NULL, err);
}

/* ------------------------------------------------------------------------ */
/* Settling background jobs                                                  */
/* ------------------------------------------------------------------------ */

/* The texts of `content`'s text blocks joined with newlines (weir__free), or NULL. */
static char *joined_text(const json_t *content) {
    char *body = weir__strdup("");
    size_t i;
    const json_t *block;
    json_array_foreach(content, i, block) {
        const char *text = weir__json_str(block, "text", NULL);
        if (!text || !body)
            continue;
        char *joined = *body ? weir__asprintf("%s\n%s", body, text) : weir__strdup(text);
        weir__free(body);
        body = joined;
    }
    return body;
}

/* The service message that brings a settled job's outcome to the model. */
static json_t *job_message(const char *job_id, const char *call_id, const char *tool,
                           const char *kind, const char *cause, const weir__tool_outcome *o) {
    char *text;
    if (!strcmp(kind, "cancelled")) {
        text = weir__asprintf("Background job %s (tool %s, call %s) was cancelled (%s); "
                              "whatever it did is not rolled back.",
                              job_id, tool, call_id, cause && *cause ? cause : "user");
    } else {
        char *body = joined_text(o->content);
        text = body ? weir__asprintf("Background job %s (tool %s, call %s) %s:\n%s", job_id,
                                     tool, call_id,
                                     !strcmp(kind, "failed") ? "failed" : "finished", body)
                    : NULL;
        weir__free(body);
    }
    json_t *msg = text ? json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s, s:s, s:s, s:s}}", "role",
                                   "user", "content", "type", "text", "text", text, "source",
                                   "kind", "service", "name", "jobs", "job_id", job_id,
                                   "call_id", call_id, "status", kind)
                       : NULL;
    weir__free(text);
    return msg;
}

int weir__tools_settle_job(const weir__tool_step *st, const json_t *job, bool deliver,
                           json_t **message, json_t **contexts, weir_error *err) {
    if (message)
        *message = NULL;
    if (contexts)
        *contexts = NULL;
    const char *job_id = weir__json_str(job, "job_id", NULL);
    const char *call_id = weir__json_str(job, "call_id", NULL);
    const char *tool = weir__json_str(job, "tool", NULL);
    const char *outcome = weir__json_str(job, "outcome", NULL);
    json_t *result = json_object_get(job, "result");
    json_t *content = json_object_get(result, "content");
    if (!st || !st->log || !message || !contexts || !job_id || !call_id || !tool || !outcome ||
        !json_is_array(content))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "tools: invalid job to settle");
    weir__tool_step local = *st;
    local.turn = (int)weir__json_int(job, "turn", 0);
    local.step = (int)weir__json_int(job, "step", 0);
    run r;
    memset(&r, 0, sizeof r);
    r.st = &local;
    r.err = err;
    const char *agent_id = st->session_id;
    r.agent_id = agent_id ? json_string(agent_id) : json_null();
    slot s;
    memset(&s, 0, sizeof s);
    s.r = &r;
    s.id = call_id;
    s.name = tool;
    s.job_id = job_id;
    s.args_text = weir__strdup(weir__json_str(job, "arguments", ""));
    s.key = weir__strdup(weir__json_str(job, "idempotency_key", ""));
    s.attempt = 1;
    bool cancelled = !strcmp(outcome, "cancelled");
    const char *cause = weir__json_str(job, "cause", "user");
    if (!r.agent_id || !s.args_text || !s.key)
        fail(&r, WEIR_E_NOMEM, NULL, "tools: out of memory");
    json_t *ctxs = NULL;
    if (r.failure == WEIR_OK) /* what the body appended, first: it did run */
        append_events(&r, json_object_get(job, "events"));
    bool interrupted = json_is_true(json_object_get(job, "interrupted"));
    if (!cancelled && !interrupted && r.failure == WEIR_OK) {
        /* the result is the body's: tools/post-execute may change it, as for a call */
        s.out.content = json_incref(content);
        s.out.is_error = json_is_true(json_object_get(result, "is_error"));
        s.out.error = json_incref(json_object_get(result, "error"));
        s.dispatched = true;
        ctxs = post_execute(&r, &s);
    } else if (interrupted && r.failure == WEIR_OK) { /* a crash cut it: no hook, the core's result */
        s.out.content = json_incref(content);
        s.out.is_error = true;
        s.out.error = json_incref(json_object_get(result, "error"));
    }
    const char *kind = cancelled ? "cancelled" : s.out.is_error ? "failed" : "returned";
    const char *type = cancelled ? WEIR__JOB_CANCELLED
                       : s.out.is_error ? WEIR__JOB_FAILED
                                        : WEIR__JOB_RETURNED;
    if (r.failure == WEIR_OK) {
        json_t *data = json_pack("{s:i, s:i, s:s, s:s, s:s}", "turn", local.turn, "step",
                                 local.step, "job_id", job_id, "call_id", call_id, "tool", tool);
        json_t *res = cancelled ? NULL : weir__tool_outcome_json(&s.out);
        if (data && (cancelled ? json_object_set_new(data, "effects",
                                                     json_string("not_rolled_back")) != 0 ||
                                     json_object_set_new(data, "cause", json_string(cause)) != 0
                               : !res || json_object_set(data, "result", res) != 0)) {
            json_decref(data);
            data = NULL;
        }
        if (data && !deliver && json_object_set_new(data, "delivered", json_false()) != 0) {
            json_decref(data);
            data = NULL;
        }
        json_decref(res);
        append_job_event(&r, type, data);
    }
    if (r.failure == WEIR_OK && deliver) {
        *message = job_message(job_id, call_id, tool, kind, cause, &s.out);
        if (!*message)
            fail(&r, WEIR_E_NOMEM, NULL, "tools: out of memory");
    }
    if (r.failure == WEIR_OK && deliver)
        *contexts = json_incref(ctxs);
    json_decref(ctxs);
    weir__tool_outcome_clear(&s.out);
    weir__free(s.args_text);
    weir__free(s.key);
    json_decref(r.agent_id);
    if (r.failure != WEIR_OK) {
        json_decref(*message);
        *message = NULL;
    }
    return r.failure;
}
