/*
 * core/api/agent.c - the public agent object: opening (and resuming) its
 * session log and engine context, closing, the public send/cancel/steer
 * wrappers, running the driver until idle, and manual compaction.  Input
 * itself is core/engine/input.c, events core/engine/events.c and the
 * lifecycle core/engine/driver.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "event_catalog.h"
#include "host_int.h"

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
    a->e.options = json_object();
    if (!a->e.options)
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
        if (json_object_set(a->e.options, keys[i], v) != 0)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    json_int_t par = weir__json_int(agent, "max_parallel_tool_calls", 10);
    if (par < 1 || par > 1024)
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "agent.max_parallel_tool_calls: expected 1..1024");
    a->e.max_parallel = (int)par;
    json_int_t jobs = weir__json_int(agent, "max_background_jobs", 4);
    if (jobs < 1 || jobs > 256 ||
        (json_object_get(agent, "max_background_jobs") &&
         !json_is_integer(json_object_get(agent, "max_background_jobs"))))
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "agent.max_background_jobs: expected an integer 1..256");
    a->e.max_jobs = (int)jobs;
    json_int_t chars = weir__json_int(agent, "max_input_chars", WEIR_MAX_INPUT_CHARS);
    if (chars < 1 || chars > 1 << 30)
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "agent.max_input_chars: expected 1..%d", 1 << 30);
    a->e.max_input_chars = (int)chars;
    return WEIR_OK;
}

json_t *weir_agent_active_jobs(weir_agent *a) {
    return a && a->e.jobs ? weir__jobs_active(a->e.jobs) : NULL;
}

int weir_agent_cancel_job(weir_agent *a, const char *job_id, weir_error *err) {
    if (!a || !job_id)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_cancel_job: NULL argument");
    if (!a->e.jobs)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL, "no queued or running job '%.128s'",
                         job_id);
    return weir__jobs_cancel(a->e.jobs, job_id, "user", err);
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
    const json_t *header =
        opts && opts->struct_size >= offsetof(weir_agent_options, session_header) +
                                         sizeof opts->session_header
            ? opts->session_header
            : NULL;
    if (header && !json_is_object(header))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_agent_open: options.session_header must be an object");
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
    a->e.handle = a;
    a->e.host = host;
    a->e.hooks = weir__host_hooks(host);
    a->e.on_event = opts ? opts->on_event : NULL;
    a->e.user_data = opts ? opts->user_data : NULL;
    if (opts && opts->struct_size >= offsetof(weir_agent_options, on_wake) + sizeof opts->on_wake)
        a->e.on_wake = opts->on_wake;
    a->e.pending = json_array();
    a->e.native_owned = json_object();
    /* The agent's primitives, each undone by the ladder at the end (in the
     * reverse order) when a later one cannot be made; past them, a failure
     * closes the agent (weir_agent_close undoes what was opened). */
    const char *what = "event queue";
    pthread_mutexattr_t rec;
    pthread_mutexattr_init(&rec);
    pthread_mutexattr_settype(&rec, PTHREAD_MUTEX_RECURSIVE);
    bool send_mu = pthread_mutex_init(&a->e.send_mu, &rec) == 0;
    pthread_mutexattr_destroy(&rec);
    if (!send_mu)
        goto undo_objects;
    if (!a->e.pending || !a->e.native_owned || pthread_mutex_init(&a->e.event_mu, NULL) != 0)
        goto undo_send_mu;
    what = "mutex";
    if (pthread_mutex_init(&a->e.mu, NULL) != 0)
        goto undo_event_mu;
    what = "condvar";
    if (pthread_cond_init(&a->e.cv, NULL) != 0)
        goto undo_mu;
    what = "signal";
    if (weir__signal_init(&a->e.signal) != WEIR_OK)
        goto undo_cv;

    int rc = read_options(a, config, err);
    char idbuf[64];
    char *path = NULL;
    if (rc == WEIR_OK) {
        if (sid)
            a->e.id = weir__strdup(sid);
        else if (file)
            a->e.id = id_from_file(file);
        else
            a->e.id = weir__strdup(weir__random_id(idbuf, sizeof idbuf, "s"));
        if (!a->e.id)
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
    a->file_store = file_store;
    if (rc == WEIR_OK) {
        if (file) {
            path = weir__strdup(file);
            if (!path)
                rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        } else if (file_store) {
            rc = log_path_for(config, a->e.id, &path, err);
        }
    }
    if (rc == WEIR_OK)
        rc = weir__log_open_store(store_name, store, a->e.id, path, false, policy, type_known, host,
                                  &a->e.log, err);
    weir__free(path);
    /* Crash repair.  Tool calls a crash cut are answered (an idempotent
     * tool's re-run) once agent/created has made the hook chains final, so
     * the agent's own tools/pre-execute listeners see a re-run too. */
    bool resume_tools = false;
    bool fresh = rc == WEIR_OK && weir__log_count(a->e.log) == 0;
    if (rc == WEIR_OK) {
        weir__log_set_checkpoint_every(
            a->e.log, (size_t)weir__json_int(json_object_get(config, "session"), "checkpoint_bytes", 0));
        a->e.durable_next = weir__log_observed(a->e.log); /* the loaded events are not delivered */
        /* telemetry: the spans of the events this agent logs from now on */
        a->e.otel = weir__host_exporter(host);
        if (a->e.otel)
            rc = weir_trace_create(a->e.id, config, &a->e.trace, err);
    }
    if (rc == WEIR_OK) {
        weir__log_set_observer(a->e.log, weir__engine_on_durable, &a->e);
        a->e.resumed = weir__log_has_request_header(a->e.log);
        rc = weir__driver_resume_due(&a->e, &resume_tools, err);
    }
    if (rc == WEIR_OK && !resume_tools)
        rc = weir__log_repair(a->e.log, NULL, err);
    /* a new session's first event: the header the embedder gave */
    if (rc == WEIR_OK && fresh && header)
        rc = weir__log_append(a->e.log, WEIR__SESSION_START_EVENT, header, NULL, NULL,
                              WEIR_EVENT_IGNORABLE, NULL, err);
    if (rc == WEIR_OK) {
        a->e.turn = weir__log_last_turn(a->e.log);
        rc = weir__inbox_create(a->e.log, &a->e.inbox, err);
    }
    if (rc == WEIR_OK) {
        weir__inbox_set_notify(a->e.inbox, weir__engine_on_inbox, &a->e);
    }
    if (rc == WEIR_OK)
        rc = weir__jobs_create((size_t)a->e.max_jobs, weir__engine_on_job_done, &a->e, &a->e.jobs, err);
    if (rc == WEIR_OK && weir__hooks_derive(a->e.hooks, &a->own) != WEIR_OK)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    for (size_t i = 0; rc == WEIR_OK && i < nown; i++)
        rc = own_hook_ok(own[i].hook, "embedder", err)
                 ? weir__hooks_add(a->own, NULL, "embedder", 0, own[i].hook, own[i].fn,
                                   own[i].opts, err)
                 : WEIR_E_INVAL;
    if (rc != WEIR_OK)
        goto close_agent;
    /* agent/created (serial): a failing listener fails the open. */
    json_t *args = json_pack("{s:s, s:s}", "agent", a->e.id, "source",
                             fresh ? "startup" : "resume");
    a->opening = true; /* plugins may add the agent's own listeners now */
    json_t *res = args ? weir__hook_invoke(a->e.hooks, "agent/created", a, &a->e.signal, args, NULL,
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
        a->e.hooks = a->own;
    }
    /* live stream frames are built only when something can see them */
    a->e.stream_listened = weir__hooks_count(a->e.hooks, "agent/assistant-stream") > 0;
    a->e.stream_observed = a->e.on_event != NULL || a->e.stream_listened;
    if (resume_tools && (rc = weir__driver_resume(&a->e, err)) != WEIR_OK)
        goto close_created;
    /* Anchored input outlives no turn: a crash may have left some queued. */
    if ((rc = weir__inbox_hold_anchored(a->e.inbox, 0, err)) != WEIR_OK)
        goto close_created;
    /* Input a shutdown held without being able to log it (a full disk:
     * docs/generations.md) is held now, durably, never replayed. */
    if (file_store && weir__store_file_held(weir__log_path(a->e.log))) {
        if ((rc = weir__inbox_hold_all(a->e.inbox, err)) != WEIR_OK)
            goto close_created;
        weir_error e;
        if (weir__store_file_mark_held(weir__log_path(a->e.log), false, &e) != WEIR_OK)
            weir__warn("weir: %s", e.text);
    }
    /* Input queued in the log before a crash wakes the agent again. */
    a->e.wake = weir__inbox_count(a->e.inbox, false) > 0;
    /* Background jobs a crash cut are answered (their messages wake the
     * agent), never run again. */
    if ((rc = weir__driver_recover_jobs(&a->e, err)) != WEIR_OK)
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
    pthread_cond_destroy(&a->e.cv);
undo_mu:
    pthread_mutex_destroy(&a->e.mu);
undo_event_mu:
    pthread_mutex_destroy(&a->e.event_mu);
undo_send_mu:
    pthread_mutex_destroy(&a->e.send_mu);
undo_objects:
    json_decref(a->e.native_owned);
    json_decref(a->e.pending);
    weir__free(a);
    return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "cannot create the agent's %s", what);
}

void weir_agent_close(weir_agent *a) {
    if (!a)
        return;
    pthread_mutex_lock(&a->e.mu);
    a->e.closing = true;
    if (a->e.state == WEIR__AGENT_RUNNING || a->compacting)
        weir__signal_cancel(&a->e.signal, "disposed");
    while (a->driver_busy)
        pthread_cond_wait(&a->e.cv, &a->e.mu);
    pthread_mutex_unlock(&a->e.mu);
    /* Background jobs end with the agent: cancelled, waited for, and each
     * logged with its outcome, undelivered (docs/tools.md). */
    weir__jobs_drain(a->e.jobs);
    if (a->created && weir__driver_settle_jobs(&a->e, false, NULL) != WEIR_OK)
        weir__warn("weir: agent %s: could not log the end of its background jobs",
                   a->e.id);
    if (a->created) {
        json_t *args = json_pack("{s:s}", "agent", a->e.id);
        if (args)
            json_decref(
                weir__hook_invoke(a->e.hooks, "agent/disposed", a, NULL, args, NULL, NULL, NULL));
        json_decref(args);
    }
    /* the rows' agent_state blocks go after the listeners that may read them */
    weir__host_agent_gone(a->e.host, a);
    weir__jobs_destroy(a->e.jobs);
    weir__inbox_destroy(a->e.inbox);
    weir__log_close(a->e.log);
    weir_trace_destroy(a->e.trace);
    json_decref(a->e.options);
    weir__free(a->e.id);
    weir__signal_destroy(&a->e.signal);
    pthread_cond_destroy(&a->e.cv);
    pthread_mutex_destroy(&a->e.mu);
    pthread_mutex_destroy(&a->e.event_mu);
    pthread_mutex_destroy(&a->e.send_mu);
    json_decref(a->e.native_owned);
    json_decref(a->e.pending);
    weir__hooks_destroy(a->own); /* nothing invokes hooks any more */
    weir__free(a);
}

const char *weir_agent_id(const weir_agent *a) { return a ? a->e.id : NULL; }

const char *weir_agent_log_path(const weir_agent *a) {
    return a ? weir__log_path(a->e.log) : NULL;
}

/* ------------------------------------------------------------------------ */
/* Input                                                                     */
/* ------------------------------------------------------------------------ */

int weir_agent_send(weir_agent *a, const json_t *message, weir_send_mode mode,
                    const char *input_id, weir_error *err) {
    return weir__engine_send(a ? &a->e : NULL, message, mode, input_id, 0, WEIR__SEND_USER,
                             err);
}

int weir_agent_steer_turn(weir_agent *a, const json_t *message, int turn, const char *input_id,
                          weir_error *err) {
    if (turn <= 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_steer_turn: turn must be > 0");
    return weir__engine_send(a ? &a->e : NULL, message, WEIR_SEND_STEER, input_id, turn,
                             WEIR__SEND_USER, err);
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
    pthread_mutex_lock(&a->e.mu);
    if (a->compacting) { /* a manual compaction: cancel it (and drop input, as for a turn) */
        weir__signal_cancel(&a->e.signal, cause);
        if (!keep_inbox)
            a->e.wake = false;
        pthread_mutex_unlock(&a->e.mu);
        return keep_inbox ? WEIR_OK : weir__inbox_clear(a->e.inbox, NULL);
    }
    if (a->e.state != WEIR__AGENT_RUNNING) {
        pthread_mutex_unlock(&a->e.mu);
        return WEIR_OK; /* idle cancel is a no-op and arms nothing */
    }
    weir__signal_cancel(&a->e.signal, cause);
    if (!keep_inbox)
        a->e.wake = false;
    pthread_mutex_unlock(&a->e.mu);
    if (!keep_inbox)
        return weir__inbox_clear(a->e.inbox, NULL);
    return WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* Running                                                                   */
/* ------------------------------------------------------------------------ */

static void status(weir_agent *a, const char *s) {
    weir__engine_live(&a->e, "agent/status", json_pack("{s:s}", "status", s));
}

int weir_agent_run_until_idle(weir_agent *a, weir_error *err) {
    if (!a)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_run_until_idle: NULL agent");
    pthread_mutex_lock(&a->e.mu);
    while (a->driver_busy) /* another thread drives: wait for it */
        pthread_cond_wait(&a->e.cv, &a->e.mu);
    a->driver_busy = true;
    int rc = WEIR_OK;
    for (;;) {
        /* never call into the inbox with `mu` held: its observers may cancel */
        bool closing = a->e.closing;
        pthread_mutex_unlock(&a->e.mu);
        /* finished background jobs first: their results wake the agent */
        if (!closing && (rc = weir__driver_settle_jobs(&a->e, true, err)) != WEIR_OK) {
            pthread_mutex_lock(&a->e.mu);
            break;
        }
        bool queued = !closing && weir__inbox_count(a->e.inbox, false) > 0;
        bool any = queued || (!closing && weir__inbox_count(a->e.inbox, true) > 0);
        pthread_mutex_lock(&a->e.mu);
        if (a->e.closing || !(queued || a->e.wake))
            break;
        if (!any) {
            /* a wake whose input a claim already took (a send that raced
             * the claim, a job's result settled by a turn): no turn for
             * nothing.  Input that lands now sets the latch again after
             * its insert, so looking once more loses no wake. */
            a->e.wake = false;
            continue;
        }
        if (a->e.state == WEIR__AGENT_IDLE) {
            a->e.state = WEIR__AGENT_RUNNING;
            weir__signal_reset(&a->e.signal);
            pthread_mutex_unlock(&a->e.mu);
            status(a, "running");
        } else {
            weir__signal_reset(&a->e.signal);
            pthread_mutex_unlock(&a->e.mu);
        }
        rc = weir__driver_turn(&a->e, err);
        pthread_mutex_lock(&a->e.mu);
        if (rc != WEIR_OK)
            break;
    }
    if (a->e.state == WEIR__AGENT_RUNNING) {
        a->e.state = WEIR__AGENT_IDLE;
        pthread_mutex_unlock(&a->e.mu);
        status(a, "idle");
        pthread_mutex_lock(&a->e.mu);
    }
    a->driver_busy = false;
    pthread_cond_broadcast(&a->e.cv);
    pthread_mutex_unlock(&a->e.mu);
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
                         hook, a->e.id);
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
    pthread_mutex_lock(&a->e.mu);
    while (a->driver_busy) /* a turn is running: compaction waits for it */
        pthread_cond_wait(&a->e.cv, &a->e.mu);
    if (a->e.closing) {
        pthread_mutex_unlock(&a->e.mu);
        return weir__err(err, WEIR_E_STATE, NULL, "agent/compact", "session %s is closing",
                         a->e.id);
    }
    a->driver_busy = true;
    a->compacting = true;
    weir__signal_reset(&a->e.signal);
    pthread_mutex_unlock(&a->e.mu);
    weir_error local, *e = err ? err : &local;
    weir_error_clear(e);
    int rc = WEIR_OK;
    if (weir__log_turn_open(a->e.log)) {
        rc = weir__err(err, WEIR_E_STATE, NULL, "agent/compact",
                       "session %s: turn %d is open; compaction runs between turns", a->e.id,
                       weir__log_last_turn(a->e.log));
    } else {
        json_t *text = instructions ? json_string(instructions) : NULL;
        json_t *args = json_pack("{s:s, s:i, s:o*}", "agent", a->e.id, "turn",
                                 weir__log_last_turn(a->e.log), "instructions", text);
        if (instructions && !text)
            rc = weir__err(err, WEIR_E_INVAL, NULL, "agent/compact",
                           "instructions: not valid UTF-8");
        else if (!args)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, "agent/compact", "out of memory");
        else if (!(*result = weir__hook_invoke(a->e.hooks, "agent/compact", a, &a->e.signal, args,
                                               compact_default, NULL, e)))
            rc = e->code != WEIR_OK ? (int)e->code : WEIR_E_NOMEM;
        json_decref(args);
    }
    pthread_mutex_lock(&a->e.mu);
    a->driver_busy = false;
    a->compacting = false;
    pthread_cond_broadcast(&a->e.cv);
    pthread_mutex_unlock(&a->e.mu);
    return rc;
}

/* Public: a deep copy, so the caller may change the messages too. */
json_t *weir_agent_messages(weir_agent *a) {
    json_t *shared = a ? weir__log_derive(a->e.log) : NULL;
    json_t *copy = shared ? json_deep_copy(shared) : NULL;
    json_decref(shared);
    return copy;
}

int weir__agent_append(weir_agent *a, const char *type, const json_t *data, weir_error *err) {
    if (!a || !type || !data)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_append: NULL argument");
    if (!weir__host_event_type(a->e.host, type, NULL))
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                         "agent_append: event type '%s' is not registered by any plugin", type);
    return weir__log_append(a->e.log, type, data, NULL, NULL, WEIR_EVENT_IGNORABLE, NULL, err);
}

