/*
 * core/agent.c - one conversation: opening (and resuming) its session log,
 * input from any thread (send, cancel), the wake latch, running the driver
 * until idle, and event delivery.  The lifecycle itself is core/driver.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "host_int.h"

/* ------------------------------------------------------------------------ */
/* Event delivery                                                            */
/* ------------------------------------------------------------------------ */

/* Run the emit hook and the embedder's callback for one event. */
static void dispatch(weir_agent *a, const char *hook, const json_t *args, const json_t *event,
                     bool durable) {
    if (args && !json_is_null(args)) /* a queued delivery without arguments holds null */
        json_decref(weir__hook_invoke(a->hooks, hook, a, &a->signal, args, NULL, NULL, NULL));
    if (a->on_event)
        a->on_event(event, durable, a->user_data);
}

/* Where a queued event goes in `pending`: a durable one (`after` its seq
 * + 1) before the live ones that wait for it, anything else at the end.
 * With event_mu held. */
static size_t queue_at(const weir_agent *a, bool durable, size_t after) {
    size_t n = json_array_size(a->pending);
    for (size_t i = 0; durable && i < n; i++) {
        const json_t *it = json_array_get(a->pending, i);
        if (!json_is_true(json_object_get(it, "durable")) &&
            (size_t)json_integer_value(json_object_get(it, "after")) >= after)
            return i;
    }
    return n;
}

/* The head of `pending` when it may be delivered now (a live event waits
 * for the durable events raised before it), else NULL.  With event_mu. */
static json_t *ready(const weir_agent *a) {
    json_t *it = json_array_get(a->pending, 0);
    if (it && !json_is_true(json_object_get(it, "durable")) &&
        a->durable_next < (size_t)json_integer_value(json_object_get(it, "after")))
        return NULL;
    return it;
}

/* A durable event before `after` was delivered.  With event_mu. */
static void delivered(weir_agent *a, bool durable, size_t after) {
    if (durable && after > a->durable_next)
        a->durable_next = after;
}

/*
 * Deliver one event (args borrowed, may be NULL under memory pressure;
 * `event` NULL: a durable event nobody sees, which only counts).  Events
 * go out one at a time, in the order raised: durable ones in seq order
 * (`after` is the seq + 1), and a live one after every durable event the
 * log had taken when it was raised (`after`: weir__log_observed).
 * Deliveries never nest and never run with a lock held: an event raised
 * while another is being delivered (a callback that sends, or another
 * thread), or a live one whose durable events are still on their way, is
 * queued, and the frame delivering (or the one that delivers those durable
 * events) delivers it once its callback returns.
 */
static void deliver(weir_agent *a, const char *hook, const json_t *args, const json_t *event,
                    bool durable, size_t after) {
    pthread_mutex_lock(&a->event_mu);
    if (!a->delivering && json_array_size(a->pending) == 0 &&
        (durable || a->durable_next >= after)) {
        if (!event) { /* nobody sees it: it only counts */
            delivered(a, durable, after);
            pthread_mutex_unlock(&a->event_mu);
            return;
        }
        a->delivering = true;
        pthread_mutex_unlock(&a->event_mu);
        dispatch(a, hook, args, event, durable);
        pthread_mutex_lock(&a->event_mu);
        delivered(a, durable, after);
    } else {
        json_t *item = json_pack("{s:s, s:O?, s:O?, s:b, s:I}", "hook", hook, "args", args,
                                 "event", event, "durable", durable, "after",
                                 (json_int_t)after);
        if (!item || json_array_insert_new(a->pending, queue_at(a, durable, after), item) != 0) {
            weir__warn("weir: agent %s: out of memory, event %s dropped", a->id, hook);
            delivered(a, durable, after); /* what waits for it need not wait */
        }
        if (a->delivering) {
            pthread_mutex_unlock(&a->event_mu);
            return;
        }
        a->delivering = true;
    }
    json_t *item;
    while ((item = ready(a)) != NULL) {
        json_incref(item);
        json_array_remove(a->pending, 0);
        pthread_mutex_unlock(&a->event_mu);
        const json_t *ev = json_object_get(item, "event");
        bool dur = json_is_true(json_object_get(item, "durable"));
        if (json_is_object(ev)) /* null: a durable event nobody sees */
            dispatch(a, json_string_value(json_object_get(item, "hook")),
                     json_object_get(item, "args"), ev, dur);
        pthread_mutex_lock(&a->event_mu);
        delivered(a, dur, (size_t)json_integer_value(json_object_get(item, "after")));
        json_decref(item);
    }
    a->delivering = false;
    pthread_mutex_unlock(&a->event_mu);
}

void weir__agent_live(weir_agent *a, const char *type, json_t *data) {
    /* nothing can see a live event without on_event or a listener on its hook */
    if (!a || !type || !data || (!a->on_event && weir__hooks_count(a->hooks, type) == 0)) {
        json_decref(data);
        return;
    }
    /* the hook's arguments only when a listener will read them */
    bool listened = weir__hooks_count(a->hooks, type) > 0;
    json_t *args = listened ? json_object() : NULL;
    json_t *ev = json_object();
    if ((args || !listened) && ev &&
        (!args || (json_object_set_new(args, "agent", json_string(a->id)) == 0 &&
                   json_object_update(args, data) == 0)) &&
        json_object_set_new(ev, "type", json_string(type)) == 0 &&
        json_object_set_new(ev, "time", json_integer(weir__now_ms())) == 0 &&
        json_object_set(ev, "data", data) == 0)
        deliver(a, type, args, ev, false, weir__log_observed(a->log));
    json_decref(args);
    json_decref(ev);
    json_decref(data);
}

static void on_durable(const json_t *event, void *ud) {
    weir_agent *a = ud;
    size_t after = (size_t)weir__json_int(event, "seq", 0) + 1;
    bool hooked = weir__hooks_count(a->hooks, "session/event") > 0;
    json_t *args = hooked ? json_pack("{s:s, s:O}", "agent", a->id, "event", event) : NULL;
    /* unseen, it still counts: a live event raised after it waits for it */
    deliver(a, "session/event", args, a->on_event || hooked ? event : NULL, true, after);
    json_decref(args);
}

static void on_inbox(const char *kind, const json_t *message, int turn, void *ud) {
    weir_agent *a = ud;
    char type[64];
    snprintf(type, sizeof type, "agent/inbox/%s", kind);
    json_t *data = json_pack("{s:O}", "message", message);
    if (data && (strcmp(kind, "claimed") == 0 || strcmp(kind, "held") == 0))
        json_object_set_new(data, "turn", json_integer(turn));
    weir__agent_live(a, type, data);
}

int weir__agent_log(weir_agent *a, const char *type, const json_t *data,
                    const json_t *surface_op, const json_t *source_seqs, size_t *seq_out,
                    weir_error *err) {
    if (!a)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent log: NULL agent");
    return weir__log_append(a->log, type, data, surface_op, source_seqs, 0, seq_out, err);
}

bool weir__agent_check_requests(void) {
#ifndef NDEBUG
    return true;
#else
    const char *v = getenv("WEIR_CHECK_REQUESTS");
    return v && strcmp(v, "1") == 0;
#endif
}

/* ------------------------------------------------------------------------ */
/* Open / close                                                              */
/* ------------------------------------------------------------------------ */

static bool type_known(const char *type, void *ud) {
    return weir__host_event_type(ud, type, NULL);
}

/* "<session.dir>/<id>.jsonl", with a leading "~/" expanded from $HOME. */
static int log_path_for(const json_t *config, const char *id, char **out, weir_error *err) {
    const json_t *session = json_object_get(config, "session");
    const char *dir = weir__json_str(session, "dir", NULL);
    if (!dir || !*dir)
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "session.dir is not set in the deployment config");
    if (dir[0] == '~' && (dir[1] == '/' || dir[1] == '\0')) {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                             "session.dir '%s' needs $HOME, which is not set", dir);
        *out = weir__asprintf("%s%s/%s.jsonl", home, dir + 1, id);
    } else {
        *out = weir__asprintf("%s/%s.jsonl", dir, id);
    }
    return *out ? WEIR_OK : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
}

/* The id of an explicit log file: its base name without ".jsonl". */
static char *id_from_file(const char *file) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t n = strlen(base);
    if (n > 6 && strcmp(base + n - 6, ".jsonl") == 0)
        n -= 6;
    return weir__strndup(base, n);
}

static int read_options(weir_agent *a, const json_t *config, weir_error *err) {
    const json_t *agent = json_object_get(config, "agent");
    if (agent && !json_is_object(agent))
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL, "agent: expected an object");
    a->options = json_object();
    if (!a->options)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    static const char *const keys[] = {"provider", "model", "max_tokens", "temperature"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(agent, keys[i]);
        if (!v)
            continue;
        bool ok = i < 2 ? json_is_string(v) : i == 2 ? json_is_integer(v) : json_is_number(v);
        if (!ok || (i == 2 && json_integer_value(v) <= 0))
            return weir__err(err, WEIR_E_CONFIG, NULL, NULL, "agent.%s: invalid value",
                             keys[i]);
        if (json_object_set(a->options, keys[i], v) != 0)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    json_int_t par = weir__json_int(agent, "max_parallel_tool_calls", 10);
    if (par < 1 || par > 1024)
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "agent.max_parallel_tool_calls: expected 1..1024");
    a->max_parallel = (int)par;
    json_int_t jobs = weir__json_int(agent, "max_background_jobs", 4);
    if (jobs < 1 || jobs > 256 ||
        (json_object_get(agent, "max_background_jobs") &&
         !json_is_integer(json_object_get(agent, "max_background_jobs"))))
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "agent.max_background_jobs: expected an integer 1..256");
    a->max_jobs = (int)jobs;
    json_int_t chars = weir__json_int(agent, "max_input_chars", WEIR_MAX_INPUT_CHARS);
    if (chars < 1 || chars > 1 << 30)
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "agent.max_input_chars: expected 1..%d", 1 << 30);
    a->max_input_chars = (int)chars;
    return WEIR_OK;
}

/*
 * A background job's body returned (on its worker thread).  The driver
 * settles its result (weir__driver_settle_jobs: tools/post-execute, the
 * durable job/returned|failed|cancelled, the service message): at the
 * running turn's next request boundary, or, while the agent is idle, in
 * the next weir_agent_run_until_idle, which the wake latch and on_wake ask
 * for.  The live job/finished event tells observers it is coming.
 */
static void on_job_done(const char *job_id, const char *call_id, const char *tool,
                        const json_t *result, void *ud) {
    weir_agent *a = ud;
    weir__agent_live(a, "job/finished",
                     json_pack("{s:s, s:s, s:s, s:b}", "job_id", job_id, "call_id", call_id,
                               "tool", tool, "is_error",
                               json_is_true(json_object_get(result, "is_error"))));
    pthread_mutex_lock(&a->mu);
    a->wake = true;
    pthread_cond_broadcast(&a->cv);
    bool closing = a->closing;
    pthread_mutex_unlock(&a->mu);
    if (!closing && a->on_wake)
        a->on_wake(a->user_data);
}

json_t *weir_agent_active_jobs(weir_agent *a) {
    return a && a->jobs ? weir__jobs_active(a->jobs) : NULL;
}

int weir_agent_cancel_job(weir_agent *a, const char *job_id, weir_error *err) {
    if (!a || !job_id)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_cancel_job: NULL argument");
    if (!a->jobs)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL, "no queued or running job '%.128s'",
                         job_id);
    return weir__jobs_cancel(a->jobs, job_id, "user", err);
}

/* agent/created is not an agent's own hook: it has run when the own chains
 * start.  False with `err` filled. */
static bool own_hook_ok(const char *hook, const char *who, weir_error *err) {
    if (hook && strcmp(hook, "agent/created") == 0) {
        weir__err(err, WEIR_E_INVAL, who, hook,
                  "%s: agent/created cannot be an agent's own hook (it has run when the "
                  "agent's own listeners start)",
                  who);
        return false;
    }
    return true;
}

int weir_agent_open(weir_host *host, const weir_agent_options *opts, weir_agent **out,
                    weir_error *err) {
    if (!host || !out)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_open: NULL argument");
    *out = NULL;
    /* 0.1's first struct ended at user_data: it has no hooks */
    if (opts && opts->struct_size < offsetof(weir_agent_options, hooks))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_agent_open: options struct_size %u is too small",
                         (unsigned)opts->struct_size);
    bool has_hooks = opts && opts->struct_size >= offsetof(weir_agent_options, nhooks) +
                                                      sizeof opts->nhooks;
    const weir_agent_hook *own = has_hooks ? opts->hooks : NULL;
    size_t nown = has_hooks ? opts->nhooks : 0;
    if (nown && !own)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_agent_open: options.nhooks is %zu but hooks is NULL", nown);
    const json_t *config = weir_host_config(host);
    const char *sid = opts ? opts->session_id : NULL;
    const char *file = opts ? opts->session_file : NULL;
    if (sid && !weir_session_id_valid(sid))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "session id '%.200s': expected [A-Za-z0-9][A-Za-z0-9._-]{0,127}", sid);
    weir__fsync policy;
    const char *fs = weir__json_str(json_object_get(config, "session"), "fsync", NULL);
    if (weir__fsync_parse(fs, &policy) != 0)
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "session.fsync '%s': expected always, step or none", fs);

    weir_agent *a = weir__calloc(1, sizeof *a);
    if (!a)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    a->host = host;
    a->hooks = weir__host_hooks(host);
    a->on_event = opts ? opts->on_event : NULL;
    a->user_data = opts ? opts->user_data : NULL;
    if (opts && opts->struct_size >= offsetof(weir_agent_options, on_wake) + sizeof opts->on_wake)
        a->on_wake = opts->on_wake;
    a->pending = json_array();
    a->native_owned = json_object();
    /* The agent's primitives, each undone by the ladder at the end (in the
     * reverse order) when a later one cannot be made; past them, a failure
     * closes the agent (weir_agent_close undoes what was opened). */
    const char *what = "event queue";
    pthread_mutexattr_t rec;
    pthread_mutexattr_init(&rec);
    pthread_mutexattr_settype(&rec, PTHREAD_MUTEX_RECURSIVE);
    bool send_mu = pthread_mutex_init(&a->send_mu, &rec) == 0;
    pthread_mutexattr_destroy(&rec);
    if (!send_mu)
        goto undo_objects;
    if (!a->pending || !a->native_owned || pthread_mutex_init(&a->event_mu, NULL) != 0)
        goto undo_send_mu;
    what = "mutex";
    if (pthread_mutex_init(&a->mu, NULL) != 0)
        goto undo_event_mu;
    what = "condvar";
    if (pthread_cond_init(&a->cv, NULL) != 0)
        goto undo_mu;
    what = "signal";
    if (weir__signal_init(&a->signal) != WEIR_OK)
        goto undo_cv;

    int rc = read_options(a, config, err);
    char idbuf[64];
    char *path = NULL;
    if (rc == WEIR_OK) {
        if (sid)
            a->id = weir__strdup(sid);
        else if (file)
            a->id = id_from_file(file);
        else
            a->id = weir__strdup(weir__random_id(idbuf, sizeof idbuf, "s"));
        if (!a->id)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    /* session.store: the file store unless the deployment names another */
    const char *store_name = weir__json_str(json_object_get(config, "session"), "store", NULL);
    weir__store_ref store = weir__store_file();
    if (rc == WEIR_OK && weir__store_lookup(host, store_name, &store) != WEIR_OK)
        rc = weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                       "session.store: plugin row '%s' provides no session store (a store is "
                       "\"file\", \"memory\" or the id of a row that registered one)",
                       store_name);
    bool file_store = store.vt == weir__store_file().vt;
    if (rc == WEIR_OK) {
        if (file) {
            path = weir__strdup(file);
            if (!path)
                rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        } else if (file_store) {
            rc = log_path_for(config, a->id, &path, err);
        }
    }
    if (rc == WEIR_OK)
        rc = weir__log_open_store(store_name, store, a->id, path, false, policy, type_known, host,
                                  &a->log, err);
    weir__free(path);
    /* Crash repair.  Tool calls a crash cut are answered (an idempotent
     * tool's re-run) once agent/created has made the hook chains final, so
     * the agent's own tools/pre-execute listeners see a re-run too. */
    bool resume_tools = false;
    if (rc == WEIR_OK) {
        a->durable_next = weir__log_observed(a->log); /* the loaded events are not delivered */
        weir__log_set_observer(a->log, on_durable, a);
        a->resumed = weir__log_has_request_header(a->log);
        rc = weir__driver_resume_due(a, &resume_tools, err);
    }
    if (rc == WEIR_OK && !resume_tools)
        rc = weir__log_repair(a->log, NULL, err);
    if (rc == WEIR_OK) {
        a->turn = weir__log_last_turn(a->log);
        rc = weir__inbox_create(a->log, &a->inbox, err);
    }
    if (rc == WEIR_OK) {
        weir__inbox_set_notify(a->inbox, on_inbox, a);
    }
    if (rc == WEIR_OK)
        rc = weir__jobs_create((size_t)a->max_jobs, on_job_done, a, &a->jobs, err);
    if (rc == WEIR_OK && weir__hooks_derive(a->hooks, &a->own) != WEIR_OK)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    for (size_t i = 0; rc == WEIR_OK && i < nown; i++)
        rc = own_hook_ok(own[i].hook, "embedder", err)
                 ? weir__hooks_add(a->own, NULL, "embedder", 0, own[i].hook, own[i].fn,
                                   own[i].opts, err)
                 : WEIR_E_INVAL;
    if (rc != WEIR_OK)
        goto close_agent;
    /* agent/created (serial): a failing listener fails the open. */
    json_t *args = json_pack("{s:s, s:s}", "agent", a->id, "source",
                             weir__log_count(a->log) > 0 ? "resume" : "startup");
    a->opening = true; /* plugins may add the agent's own listeners now */
    json_t *res = args ? weir__hook_invoke(a->hooks, "agent/created", a, &a->signal, args, NULL,
                                           NULL, err)
                       : (weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory"), NULL);
    a->opening = false;
    json_decref(args);
    if (!res) {
        rc = err ? (int)err->code : WEIR_E_HOOK_FAILED;
        goto close_agent;
    }
    json_decref(res);
    bool any = false;
    for (size_t k = 0; k < weir__hook_catalog_len && !any; k++)
        any = weir__hooks_count(a->own, weir__hook_catalog[k].name) > 0;
    if (!any) { /* the host's chains serve as they are */
        weir__hooks_destroy(a->own);
        a->own = NULL;
    } else if ((rc = weir__hooks_freeze_derived(a->own, err)) != WEIR_OK) {
        goto close_created;
    } else {
        a->hooks = a->own;
    }
    /* live stream frames are built only when something can see them */
    a->stream_listened = weir__hooks_count(a->hooks, "agent/assistant-stream") > 0;
    a->stream_observed = a->on_event != NULL || a->stream_listened;
    if (resume_tools && (rc = weir__driver_resume(a, err)) != WEIR_OK)
        goto close_created;
    /* Anchored input outlives no turn: a crash may have left some queued. */
    if ((rc = weir__inbox_hold_anchored(a->inbox, 0, err)) != WEIR_OK)
        goto close_created;
    /* Input queued in the log before a crash wakes the agent again. */
    a->wake = weir__inbox_count(a->inbox, false) > 0;
    /* Background jobs a crash cut are answered (their messages wake the
     * agent), never run again. */
    if ((rc = weir__driver_recover_jobs(a, err)) != WEIR_OK)
        goto close_created;
    a->created = true;
    *out = a;
    return WEIR_OK;

close_created:
    a->created = true; /* agent/created ran: close emits agent/disposed */
close_agent:
    weir_agent_close(a);
    return rc;

undo_cv:
    pthread_cond_destroy(&a->cv);
undo_mu:
    pthread_mutex_destroy(&a->mu);
undo_event_mu:
    pthread_mutex_destroy(&a->event_mu);
undo_send_mu:
    pthread_mutex_destroy(&a->send_mu);
undo_objects:
    json_decref(a->native_owned);
    json_decref(a->pending);
    weir__free(a);
    return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "cannot create the agent's %s", what);
}

void weir_agent_close(weir_agent *a) {
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->closing = true;
    if (a->state == WEIR__AGENT_RUNNING || a->compacting)
        weir__signal_cancel(&a->signal, "disposed");
    while (a->driver_busy)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    /* Background jobs end with the agent: cancelled, waited for, and each
     * logged with its outcome, undelivered (docs/tools.md). */
    weir__jobs_drain(a->jobs);
    if (a->created && weir__driver_settle_jobs(a, false, NULL) != WEIR_OK)
        weir__warn("weir: agent %s: could not log the end of its background jobs",
                   a->id);
    if (a->created) {
        json_t *args = json_pack("{s:s}", "agent", a->id);
        if (args)
            json_decref(
                weir__hook_invoke(a->hooks, "agent/disposed", a, NULL, args, NULL, NULL, NULL));
        json_decref(args);
    }
    weir__jobs_destroy(a->jobs);
    weir__inbox_destroy(a->inbox);
    weir__log_close(a->log);
    json_decref(a->options);
    weir__free(a->id);
    weir__signal_destroy(&a->signal);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->event_mu);
    pthread_mutex_destroy(&a->send_mu);
    json_decref(a->native_owned);
    json_decref(a->pending);
    weir__hooks_destroy(a->own); /* nothing invokes hooks any more */
    weir__free(a);
}

const char *weir_agent_id(const weir_agent *a) { return a ? a->id : NULL; }

const char *weir_agent_log_path(const weir_agent *a) {
    return a ? weir__log_path(a->log) : NULL;
}

/* ------------------------------------------------------------------------ */
/* Input                                                                     */
/* ------------------------------------------------------------------------ */

/* New reference: {role:"user", content:[blocks], source, id}, or NULL + err. */
static json_t *normalize_message(const json_t *m, weir_send_mode mode, const char *input_id,
                                 weir_error *err) {
    if (!json_is_object(m)) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "message: expected an object");
        return NULL;
    }
    const char *role = weir__json_str(m, "role", "user");
    if (strcmp(role, "user") != 0) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "message.role: expected \"user\", got \"%s\"",
                  role);
        return NULL;
    }
    const json_t *content = json_object_get(m, "content");
    const json_t *source = json_object_get(m, "source");
    if (source && !json_is_object(source)) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "message.source: expected an object");
        return NULL;
    }
    if (json_is_array(content)) {
        size_t i;
        const json_t *b;
        json_array_foreach(content, i, b) {
            if (!json_is_string(json_object_get(b, "type"))) {
                weir__err(err, WEIR_E_INVAL, NULL, NULL,
                          "message.content[%zu]: expected a block with a \"type\"", i);
                return NULL;
            }
        }
    } else if (!json_is_string(content)) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL,
                  "message.content: expected a string or an array of blocks");
        return NULL;
    }
    const char *mid = input_id ? input_id : weir__json_str(m, "id", NULL);
    char idbuf[64];
    if (!mid)
        mid = weir__random_id(idbuf, sizeof idbuf, "in");
    else if (!*mid) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "input id: must not be empty");
        return NULL;
    }
    json_t *out = json_pack("{s:s}", "role", "user");
    if (out && json_is_string(content))
        json_object_set_new(out, "content",
                            json_pack("[{s:s, s:O}]", "type", "text", "text", content));
    else if (out)
        json_object_set_new(out, "content", json_deep_copy(content));
    /* the caller's source (e.g. {"pinned":true}) keeps its fields; a kind
     * it does not give is the mode's */
    json_t *src = source ? json_deep_copy(source) : json_object();
    if (src && !json_is_string(json_object_get(src, "kind")))
        json_object_set_new(src, "kind",
                            json_string(mode == WEIR_SEND_FOLLOWUP ? "human" : "steer"));
    if (out && src)
        json_object_set_new(out, "source", src);
    else
        json_decref(src);
    if (out)
        json_object_set_new(out, "id", json_string(mid));
    if (!out || !json_object_get(out, "content") || !json_object_get(out, "source") ||
        !json_object_get(out, "id")) {
        json_decref(out);
        weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        return NULL;
    }
    return out;
}

/* Characters (code points) of the message's text blocks. */
/* Code points of a UTF-8 string (NULL: 0). */
static size_t utf8_chars(const char *t) {
    size_t n = 0;
    for (; t && *t; t++)
        n += ((unsigned char)*t & 0xC0) != 0x80;
    return n;
}

size_t weir__message_text_chars(const json_t *message) {
    const json_t *content = json_object_get(message, "content");
    if (json_is_string(content)) /* the short form, before normalization */
        return utf8_chars(json_string_value(content));
    size_t n = 0, i;
    const json_t *b;
    json_array_foreach(content, i, b) n += utf8_chars(weir__json_str(b, "text", NULL));
    return n;
}

/* Only text blocks (native steering carries no attachments). */
static bool text_only(const json_t *msg) {
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(msg, "content"), i, b) {
        if (strcmp(weir__json_str(b, "type", ""), "text") != 0)
            return false;
    }
    return true;
}

/* An identical resubmission: nothing is queued; say so live. */
static void acknowledge(weir_agent *a, const json_t *msg) {
    weir__agent_live(a, "agent/inbox/acknowledged",
                     json_pack("{s:O, s:b}", "message", msg, "duplicate", 1));
}

void weir__agent_wake(weir_agent *a) {
    pthread_mutex_lock(&a->mu);
    a->wake = true;
    pthread_cond_broadcast(&a->cv);
    weir_wake_fn fn = a->closing ? NULL : a->on_wake;
    pthread_mutex_unlock(&a->mu);
    if (fn)
        fn(a->user_data);
}

/* Live steering/<what> {input_id, turn, step, ...extra} (extra stolen, may be NULL). */
static void steering_event(weir_agent *a, const char *what, const json_t *msg,
                           const weir_stream *st, json_t *extra) {
    char type[48];
    snprintf(type, sizeof type, "steering/%s", what);
    json_t *data = json_pack("{s:s, s:i, s:i}", "input_id", weir__json_str(msg, "id", ""),
                             "turn", st ? st->turn : 0, "step", st ? st->step : 0);
    if (data && extra && json_object_update(data, extra) != 0) {
        json_decref(data);
        data = NULL;
    }
    json_decref(extra);
    weir__agent_live(a, type, data);
}

typedef enum native_outcome { NATIVE_NONE, NATIVE_REFUSED, NATIVE_OWNED, NATIVE_UNKNOWN } native_outcome;

/*
 * Offer a steer to the provider streaming the running turn's request
 * (send_mu held).  Eligible: nothing queued before it (later input never
 * overtakes an earlier boundary batch) and only text.  NATIVE_NONE when no
 * window is open.
 */
static native_outcome try_native(weir_agent *a, json_t *msg) {
    if (!text_only(msg) || weir__inbox_count(a->inbox, false) > 0 ||
        weir__inbox_count(a->inbox, true) > 0)
        return NATIVE_NONE;
    const char *id = weir__json_str(msg, "id", "");
    pthread_mutex_lock(&a->mu);
    const weir__provider_entry *pe = a->closing ? NULL : a->native_pe;
    weir_stream *st = a->native_stream;
    /* pending before the call, so that the provider may report on it from
     * inside steer_live (stream_steering "accepted") */
    bool kept = pe && json_object_set(a->native_owned, id, msg) == 0;
    if (pe && kept)
        a->native_busy++;
    pthread_mutex_unlock(&a->mu);
    if (!pe)
        return NATIVE_NONE;
    if (!kept) { /* out of memory: use the queue */
        weir__warn("weir: agent %s: out of memory offering input %s natively", a->id, id);
        return NATIVE_NONE;
    }
    weir_error e;
    weir_error_clear(&e);
    int r = pe->vt.steer_live(pe->self, st, msg, &e);
    native_outcome out = r == 0 ? NATIVE_REFUSED : r == 1 ? NATIVE_OWNED : NATIVE_UNKNOWN;
    /* owned, or unknown: it stays remembered, so that a resubmission never
     * replays it; a refusal had no effect */
    pthread_mutex_lock(&a->mu);
    if (out == NATIVE_REFUSED)
        json_object_del(a->native_owned, id);
    pthread_mutex_unlock(&a->mu);
    if (out == NATIVE_OWNED)
        steering_event(a, "owned", msg, st, json_pack("{s:O, s:s}", "message", msg, "provider",
                                                       pe->id));
    else if (out == NATIVE_UNKNOWN)
        steering_event(a, "unknown", msg, st,
                       json_pack("{s:O, s:s, s:s, s:s}", "message", msg, "provider", pe->id,
                                 "route", "native", "error",
                                 e.text[0] ? e.text
                                 : r < 0   ? "steer_live failed"
                                           : "steer_live gave an indeterminate answer"));
    pthread_mutex_lock(&a->mu);
    a->native_busy--;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return out;
}

/* How a send is made: the embedder's, the core's own (no caps, never native
 * steering), or a shared store's queued input (caps, never native steering:
 * its row goes only once the input is in the log). */
typedef enum send_kind { SEND_USER, SEND_INTERNAL, SEND_STORED } send_kind;

/*
 * Every send: `anchor` > 0 anchors a steer to that running turn; `kind`
 * as above.
 */
static int send_common(weir_agent *a, const json_t *message, weir_send_mode mode,
                       const char *input_id, int anchor, send_kind kind, weir_error *err) {
    bool internal = kind == SEND_INTERNAL;
    if (!a || !message)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_send: NULL argument");
    if (mode != WEIR_SEND_FOLLOWUP && mode != WEIR_SEND_STEER && mode != WEIR_SEND_INJECT)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_send: invalid mode %d",
                         (int)mode);
    json_t *msg = normalize_message(message, mode, input_id, err);
    if (!msg)
        return err ? (int)err->code : WEIR_E_INVAL;
    const char *id = weir__json_str(msg, "id", "");
    bool wakes = mode != WEIR_SEND_INJECT;
    bool next_step = mode != WEIR_SEND_FOLLOWUP;
    int rc = WEIR_OK;
    bool dup = false, queued = false;
    pthread_mutex_lock(&a->send_mu);
    /* Identity first: an identical resubmission is acknowledged whatever
     * else holds (a cap, the shutdown's fence). */
    pthread_mutex_lock(&a->mu);
    const json_t *owned = json_object_get(a->native_owned, id);
    int known = owned ? (json_equal(owned, msg) ? 1 : -1) : 0;
    /* Decide "waking after abort" before inserting: waking
     * input sent while the running turn is cancelled goes to the next turn. */
    if (wakes && anchor == 0 && a->state == WEIR__AGENT_RUNNING &&
        weir__signal_cancelled(&a->signal))
        next_step = false;
    bool closing = a->closing;
    size_t nowned = json_object_size(a->native_owned);
    pthread_mutex_unlock(&a->mu);
    if (!known)
        known = weir__inbox_known(a->inbox, msg);
    if (known == -2) {
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    } else if (known < 0) {
        rc = weir__err(err, WEIR_E_DUPLICATE, NULL, NULL,
                       "inbox: input id '%s' was already used with different content", id);
    } else if (known > 0) {
        dup = true;
    } else if (closing) {
        rc = weir__err(err, WEIR_E_STATE, NULL, NULL, "agent %s is closing", a->id);
    } else if (!internal) {
        size_t chars = weir__message_text_chars(msg);
        size_t nqueued = weir__inbox_count(a->inbox, false) + weir__inbox_count(a->inbox, true) +
                         nowned;
        if (a->ids_accepted >= WEIR_MAX_INPUT_IDS)
            rc = weir__err(err, WEIR_E_LIMIT, NULL, NULL,
                           "input '%s' refused: this agent took %d input ids, its limit; "
                           "reopen the session (or start a new one) to go on",
                           id, WEIR_MAX_INPUT_IDS);
        else if (nqueued >= WEIR_MAX_QUEUED_INPUTS)
            rc = weir__err(err, WEIR_E_LIMIT, NULL, NULL,
                           "input '%s' refused: %zu inputs are queued, the limit is %d; wait "
                           "for the agent to take some",
                           id, nqueued, WEIR_MAX_QUEUED_INPUTS);
        else if (chars > (size_t)a->max_input_chars)
            rc = weir__err(err, WEIR_E_LIMIT, NULL, NULL,
                           "input '%s' refused: its text has %zu characters, the limit is %d "
                           "(agent.max_input_chars)",
                           id, chars, a->max_input_chars);
    }
    if (rc == WEIR_OK && !dup) {
        native_outcome no = kind == SEND_USER && anchor == 0 && mode == WEIR_SEND_STEER &&
                                    next_step
                                ? try_native(a, msg)
                                : NATIVE_NONE;
        if (no == NATIVE_OWNED || no == NATIVE_UNKNOWN) {
            a->ids_accepted++;
        } else {
            rc = anchor > 0 ? weir__inbox_add_anchored(a->inbox, msg, anchor, &dup, err)
                            : weir__inbox_add(a->inbox, msg, next_step, &dup, err);
            queued = rc == WEIR_OK && !dup;
            if (queued && !internal)
                a->ids_accepted++;
        }
    }
    if (rc == WEIR_OK && dup)
        acknowledge(a, msg);
    pthread_mutex_unlock(&a->send_mu);
    json_decref(msg);
    if (queued && wakes)
        weir__agent_wake(a);
    return rc;
}

int weir_agent_send(weir_agent *a, const json_t *message, weir_send_mode mode,
                    const char *input_id, weir_error *err) {
    return send_common(a, message, mode, input_id, 0, SEND_USER, err);
}

int weir__agent_send_internal(weir_agent *a, const json_t *message, weir_send_mode mode,
                              const char *input_id, weir_error *err) {
    return send_common(a, message, mode, input_id, 0, SEND_INTERNAL, err);
}

int weir__agent_send_stored(weir_agent *a, const json_t *message, weir_send_mode mode,
                            const char *input_id, weir_error *err) {
    return send_common(a, message, mode, input_id, 0, SEND_STORED, err);
}

bool weir__agent_input_fits(const weir_agent *a, const json_t *message) {
    return a && weir__message_text_chars(message) <= (size_t)a->max_input_chars;
}


int weir_agent_steer_turn(weir_agent *a, const json_t *message, int turn, const char *input_id,
                          weir_error *err) {
    if (turn <= 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_steer_turn: turn must be > 0");
    return send_common(a, message, WEIR_SEND_STEER, input_id, turn, SEND_USER, err);
}

int weir__agent_add_context(weir_agent *a, const json_t *message, int turn, weir_error *err) {
    bool dup = false;
    pthread_mutex_lock(&a->send_mu);
    int rc = weir__inbox_add_anchored(a->inbox, message, turn, &dup, err);
    pthread_mutex_unlock(&a->send_mu);
    return rc;
}

/* Native input the provider owns, by id (lock `mu` held); borrowed or NULL. */
static json_t *owned_input(weir_agent *a, const char *id) {
    return id ? json_object_get(a->native_owned, id) : NULL;
}

int weir__stream_steering(weir_stream *s, const char *input_id, const char *what,
                          weir_error *err) {
    if (!s || !s->agent || !input_id || !what)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "stream_steering: NULL argument");
    weir_agent *a = s->agent;
    bool applied = strcmp(what, "applied") == 0, refused = strcmp(what, "refused") == 0;
    if (!applied && !refused && strcmp(what, "accepted") != 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "stream_steering: '%s': expected accepted, applied or refused", what);
    if ((applied || refused) && (!s->live || !pthread_equal(s->thread, pthread_self())))
        return weir__err(err, WEIR_E_STATE, NULL, NULL,
                         "stream_steering(%s): only inside the lifecycle request's stream, on "
                         "its thread",
                         what);
    pthread_mutex_lock(&a->mu);
    json_t *msg = json_incref(owned_input(a, input_id));
    if (msg && (applied || refused))
        json_object_del(a->native_owned, input_id);
    pthread_mutex_unlock(&a->mu);
    if (!msg)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                         "stream_steering: no native input '%s' is pending", input_id);
    int rc = WEIR_OK;
    if (applied) {
        /* model-visible means logged: the input enters the log where the
         * provider confirmed the model took it */
        json_t *data = json_pack("{s:i, s:i, s:O}", "turn", s->turn, "step", s->step, "message",
                                 msg);
        json_t *op = json_string("append");
        rc = data && op ? weir__log_append(a->log, "user/message", data, op, NULL, 0, NULL, err)
                        : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        json_decref(data);
        json_decref(op);
        if (rc == WEIR_OK && weir__inbox_remember(a->inbox, msg) != WEIR_OK)
            weir__warn("weir: agent %s: out of memory remembering input %s", a->id,
                       input_id);
        if (rc == WEIR_OK)
            steering_event(a, "applied", msg, s, NULL);
    } else if (refused) {
        /* the provider's own definite refusal: the request-boundary queue */
        bool dup = false;
        steering_event(a, "refused", msg, s, NULL);
        pthread_mutex_lock(&a->send_mu);
        rc = weir__inbox_add(a->inbox, msg, true, &dup, err);
        pthread_mutex_unlock(&a->send_mu);
        if (rc == WEIR_OK && !dup)
            weir__agent_wake(a);
    } else {
        steering_event(a, "accepted", msg, s, NULL);
    }
    json_decref(msg);
    return rc;
}

int weir_agent_send_text(weir_agent *a, const char *text, weir_send_mode mode,
                         weir_error *err) {
    if (!a || !text)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_send_text: NULL argument");
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", text);
    if (!m)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory (or text is not UTF-8)");
    int rc = weir_agent_send(a, m, mode, NULL, err);
    json_decref(m);
    return rc;
}

int weir_agent_cancel(weir_agent *a, const char *cause, bool keep_inbox) {
    if (!a)
        return WEIR_E_INVAL;
    if (!cause)
        cause = "user";
    if (strcmp(cause, "user") != 0 && strcmp(cause, "parent") != 0 &&
        strcmp(cause, "disposed") != 0 && strncmp(cause, "hook:", 5) != 0)
        return WEIR_E_INVAL;
    pthread_mutex_lock(&a->mu);
    if (a->compacting) { /* a manual compaction: cancel it (and drop input, as for a turn) */
        weir__signal_cancel(&a->signal, cause);
        if (!keep_inbox)
            a->wake = false;
        pthread_mutex_unlock(&a->mu);
        return keep_inbox ? WEIR_OK : weir__inbox_clear(a->inbox, NULL);
    }
    if (a->state != WEIR__AGENT_RUNNING) {
        pthread_mutex_unlock(&a->mu);
        return WEIR_OK; /* idle cancel is a no-op and arms nothing */
    }
    weir__signal_cancel(&a->signal, cause);
    if (!keep_inbox)
        a->wake = false;
    pthread_mutex_unlock(&a->mu);
    if (!keep_inbox)
        return weir__inbox_clear(a->inbox, NULL);
    return WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* Running                                                                   */
/* ------------------------------------------------------------------------ */

static void status(weir_agent *a, const char *s) {
    weir__agent_live(a, "agent/status", json_pack("{s:s}", "status", s));
}

int weir_agent_run_until_idle(weir_agent *a, weir_error *err) {
    if (!a)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_run_until_idle: NULL agent");
    pthread_mutex_lock(&a->mu);
    while (a->driver_busy) /* another thread drives: wait for it */
        pthread_cond_wait(&a->cv, &a->mu);
    a->driver_busy = true;
    int rc = WEIR_OK;
    for (;;) {
        /* never call into the inbox with `mu` held: its observers may cancel */
        bool closing = a->closing;
        pthread_mutex_unlock(&a->mu);
        /* finished background jobs first: their results wake the agent */
        if (!closing && (rc = weir__driver_settle_jobs(a, true, err)) != WEIR_OK) {
            pthread_mutex_lock(&a->mu);
            break;
        }
        bool queued = !closing && weir__inbox_count(a->inbox, false) > 0;
        pthread_mutex_lock(&a->mu);
        if (a->closing || !(queued || a->wake))
            break;
        if (a->state == WEIR__AGENT_IDLE) {
            a->state = WEIR__AGENT_RUNNING;
            weir__signal_reset(&a->signal);
            pthread_mutex_unlock(&a->mu);
            status(a, "running");
        } else {
            weir__signal_reset(&a->signal);
            pthread_mutex_unlock(&a->mu);
        }
        rc = weir__driver_turn(a, err);
        pthread_mutex_lock(&a->mu);
        if (rc != WEIR_OK)
            break;
    }
    if (a->state == WEIR__AGENT_RUNNING) {
        a->state = WEIR__AGENT_IDLE;
        pthread_mutex_unlock(&a->mu);
        status(a, "idle");
        pthread_mutex_lock(&a->mu);
    }
    a->driver_busy = false;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return rc;
}

int weir__agent_hook_register(weir_plugin *self, weir_agent *a, const char *hook,
                              weir_hook_fn fn, const weir_hook_opts *opts) {
    if (!self)
        return WEIR_E_INVAL;
    if (!a || !hook || !fn) {
        weir__plugin_log(self, WEIR_LOG_ERROR,
                         "agent_hook_register: agent, hook name and function are required");
        return WEIR_E_INVAL;
    }
    if (!a->opening || !a->own) {
        weir__plugin_log(self, WEIR_LOG_ERROR,
                         "agent_hook_register(%s): only inside agent/created, for the agent "
                         "being created (session %s)",
                         hook, a->id);
        return WEIR_E_TOO_LATE;
    }
    weir_error e;
    weir_error_clear(&e);
    int rc = own_hook_ok(hook, self->id, &e)
                 ? weir__hooks_add(a->own, self, self->id, self->index, hook, fn, opts, &e)
                 : WEIR_E_INVAL;
    if (rc != WEIR_OK)
        weir__plugin_log(self, WEIR_LOG_ERROR, "agent_hook_register: %s", e.text);
    return rc;
}

static json_t *compact_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call;
    (void)args;
    (void)ctx;
    return json_pack("{s:s, s:s}", "kind", "declined", "message",
                     "no plugin compacts (add compaction-basic to the deployment)");
}

int weir_agent_compact(weir_agent *a, const char *instructions, json_t **result,
                       weir_error *err) {
    if (result)
        *result = NULL;
    if (!a || !result)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_agent_compact: NULL agent or result");
    pthread_mutex_lock(&a->mu);
    while (a->driver_busy) /* a turn is running: compaction waits for it */
        pthread_cond_wait(&a->cv, &a->mu);
    if (a->closing) {
        pthread_mutex_unlock(&a->mu);
        return weir__err(err, WEIR_E_STATE, NULL, "agent/compact", "session %s is closing",
                         a->id);
    }
    a->driver_busy = true;
    a->compacting = true;
    weir__signal_reset(&a->signal);
    pthread_mutex_unlock(&a->mu);
    weir_error local, *e = err ? err : &local;
    weir_error_clear(e);
    int rc = WEIR_OK;
    if (weir__log_turn_open(a->log)) {
        rc = weir__err(err, WEIR_E_STATE, NULL, "agent/compact",
                       "session %s: turn %d is open; compaction runs between turns", a->id,
                       weir__log_last_turn(a->log));
    } else {
        json_t *text = instructions ? json_string(instructions) : NULL;
        json_t *args = json_pack("{s:s, s:i, s:o*}", "agent", a->id, "turn",
                                 weir__log_last_turn(a->log), "instructions", text);
        if (instructions && !text)
            rc = weir__err(err, WEIR_E_INVAL, NULL, "agent/compact",
                           "instructions: not valid UTF-8");
        else if (!args)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, "agent/compact", "out of memory");
        else if (!(*result = weir__hook_invoke(a->hooks, "agent/compact", a, &a->signal, args,
                                               compact_default, NULL, e)))
            rc = e->code != WEIR_OK ? (int)e->code : WEIR_E_NOMEM;
        json_decref(args);
    }
    pthread_mutex_lock(&a->mu);
    a->driver_busy = false;
    a->compacting = false;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return rc;
}

/* Public: a deep copy, so the caller may change the messages too. */
json_t *weir_agent_messages(weir_agent *a) {
    json_t *shared = a ? weir__log_derive(a->log) : NULL;
    json_t *copy = shared ? json_deep_copy(shared) : NULL;
    json_decref(shared);
    return copy;
}

int weir__agent_append(weir_agent *a, const char *type, const json_t *data, weir_error *err) {
    if (!a || !type || !data)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_append: NULL argument");
    if (!weir__host_event_type(a->host, type, NULL))
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                         "agent_append: event type '%s' is not registered by any plugin", type);
    return weir__log_append(a->log, type, data, NULL, NULL, WEIR_EVENT_IGNORABLE, NULL, err);
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

weir__http_pool *weir__stream_http_pool(weir_stream *s) {
    return s ? weir__host_http_pool(s->agent->host) : NULL;
}

weir_signal *weir__stream_signal(weir_stream *s) { return s ? &s->agent->signal : NULL; }

bool weir__stream_observed(const weir_stream *s) {
    return s && s->agent && s->agent->stream_observed;
}

void weir__stream_frame(weir_stream *s, json_t *frame) {
    if (!s || !frame || !weir__stream_observed(s)) {
        json_decref(frame);
        return;
    }
    json_object_set_new(frame, "attempt_id", json_string(s->attempt_id));
    json_object_set_new(frame, "revision", json_integer((json_int_t)s->revision));
    weir__agent_live(s->agent, "agent/assistant-stream", json_pack("{s:o}", "frame", frame));
}

/* Whether `j` is held by its container alone, so it may be changed in place. */
static bool held_once(const json_t *j) { return j && j->refcount == 1; }

/*
 * The live event of one chunk frame, {type, time, data: {frame: {type:
 * "chunk", index, time, chunk, attempt_id, revision}}}, as weir__stream_frame
 * builds it.  A stream has many chunks and the event is borrowed by what it
 * is delivered to, so with no hook listener (on_event only) the stream keeps
 * the one it built last and refills its index, times and chunk in place
 * while nothing else holds any part of it (a receiver that kept a reference,
 * or a delivery queued behind another, gets a new one).
 */
static void chunk_frame(weir_stream *s, json_int_t index, int64_t now, json_t *c) {
    weir_agent *a = s->agent;
    if (a->stream_listened) {
        weir__stream_frame(s, json_pack("{s:s, s:I, s:I, s:O}", "type", "chunk", "index", index,
                                        "time", (json_int_t)now, "chunk", c));
        return;
    }
    json_t *ev = s->frame_ev, **at = s->frame_at; /* at: data, frame, index, time, ev time */
    if (!(held_once(ev) && held_once(at[0]) && held_once(at[1]) && held_once(at[2]) &&
          held_once(at[3]) && held_once(at[4])) ||
        json_integer_set(at[2], index) != 0 || json_integer_set(at[3], (json_int_t)now) != 0 ||
        json_integer_set(at[4], (json_int_t)now) != 0 ||
        json_object_set(at[1], "chunk", c) != 0) {
        json_decref(s->frame_ev);
        ev = json_pack("{s:s, s:I, s:{s:{s:s, s:I, s:I, s:O, s:s, s:I}}}", "type",
                       "agent/assistant-stream", "time", (json_int_t)now, "data", "frame",
                       "type", "chunk", "index", index, "time", (json_int_t)now, "chunk", c,
                       "attempt_id", s->attempt_id, "revision", (json_int_t)s->revision);
        s->frame_ev = ev;
        at[0] = json_object_get(ev, "data");
        at[1] = json_object_get(at[0], "frame");
        at[2] = json_object_get(at[1], "index");
        at[3] = json_object_get(at[1], "time");
        at[4] = json_object_get(ev, "time");
        if (!ev)
            return;
    }
    if (a->on_event)
        deliver(a, "agent/assistant-stream", NULL, ev, false, weir__log_observed(a->log));
}

int weir__stream_emit(weir_stream *s, json_t *chunk) {
    const char *type = json_string_value(json_object_get(chunk, "type"));
    if (!s || !json_is_object(chunk) || !type) {
        json_decref(chunk);
        return WEIR_E_INVAL;
    }
    if (weir__signal_cancelled(&s->agent->signal)) {
        json_decref(chunk);
        return WEIR_E_CANCELLED;
    }
    if (s->finished) { /* nothing follows finish */
        json_decref(chunk);
        return WEIR_E_STATE;
    }
    bool finish = strcmp(type, "finish") == 0; /* `type` goes with `chunk` if it is copied */
    /* the chunk is handed over: kept as it is when nothing else holds a part of it */
    json_t *c = chunk;
    if (!weir__json_sole(chunk)) {
        c = json_deep_copy(chunk);
        json_decref(chunk);
    }
    int64_t now = weir__now_ms();
    if (!c || json_object_set_new(c, "time", json_integer(now)) != 0 ||
        json_array_append(s->chunks, c) != 0) {
        json_decref(c);
        return WEIR_E_NOMEM;
    }
    if (finish)
        s->finished = true;
    size_t index = json_array_size(s->chunks) - 1;
    if (s->live && s->agent->stream_observed)
        chunk_frame(s, (json_int_t)index, now, c);
    json_decref(c);
    return WEIR_OK;
}

void weir__stream_release(weir_stream *s) {
    if (!s)
        return;
    json_decref(s->chunks);
    s->chunks = NULL;
    json_decref(s->frame_ev);
    s->frame_ev = NULL;
}
