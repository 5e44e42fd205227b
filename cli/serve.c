/*
 * cli/serve.c - `weir serve --stdio`: the stdio JSONL protocol for host
 * programs (docs/stdio-protocol.md).
 *
 * Commands come one JSON object per line on stdin; events go one JSON
 * object per line on stdout, and nothing else does (diagnostics go to
 * stderr).  Threads: the main thread reads and validates commands and
 * sends them to the agent; a driver thread runs weir_agent_run_until_idle()
 * whenever a command woke it.  Every stdout line is written whole under
 * `out_mu`.  End of input is a shutdown: the running turn is cancelled
 * (generation.detached) and queued input is reported input.held.  SIGTERM
 * and SIGINT are a shutdown too: their handler only writes the signal's
 * number to a pipe, which the main thread polls next to stdin (read with
 * read(2), not stdio, so that the poll sees all of it); serve then exits
 * 128 + the signal.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weir/generation.h>

#include "cli.h"

#define MAX_LINE (1u << 20) /* longer command lines are refused */
#define MAX_INPUT_ID 128

typedef struct serve {
    bool all_events;  /* --events all: the agent's own events too */
    weir_agent *agent;
    weir_generation_tracker *tracker;
    pthread_mutex_t out_mu; /* stdout */
    pthread_mutex_t mu;     /* the fields below */
    pthread_cond_t cv;
    bool work;        /* a command woke the agent */
    bool stopping;    /* shutdown began: the driver thread exits */
    bool driver_done; /* the driver thread left its loop */
    bool broken;      /* the agent cannot go on (log I/O failure) */
    int broken_status; /* ... and the status it stopped with */
    bool compact;     /* a compact command waits for the agent to be idle, or runs */
    bool compact_running;       /* ... runs (a cancel then cancels it, not drops it) */
    long compact_line;          /* its line on stdin */
    char *compact_instructions; /* its instructions (owned), or NULL */
    int signal;                 /* the SIGTERM or SIGINT that shut serve down, or 0 */
    long approval_seq;          /* approval requests asked so far */
    char approval_id[32];       /* the one waiting for its approve command, or "" */
    json_t *approval_answer;    /* its answer once the command came (owned), or NULL */
} serve;

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

/* Write one event as one line on stdout. */
static void put(serve *s, const json_t *event) {
    char *line = weir_cli_json_line(event);
    if (!line) {
        fprintf(stderr, "weir serve: out of memory, an event was dropped\n");
        return;
    }
    pthread_mutex_lock(&s->out_mu);
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    pthread_mutex_unlock(&s->out_mu);
    free(line);
}

static json_int_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Serve's own events are flat: {"type", "time", ...fields}.  Steals `fields`. */
static void put_own(serve *s, const char *type, json_t *fields) {
    json_t *ev = json_pack("{s:s, s:I}", "type", type, "time", now_ms());
    if (ev && fields && json_object_update(ev, fields) == 0)
        put(s, ev);
    else
        fprintf(stderr, "weir serve: out of memory, a %s event was dropped\n", type);
    json_decref(ev);
    json_decref(fields);
}

/* {"type":"error","time","line"?,"input_id"?,"message"}; line 0 = none. */
static void put_error(serve *s, long line, const char *input_id, const char *fmt, ...)
    WEIR_PRINTF(4, 5);
static void put_error(serve *s, long line, const char *input_id, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *f = json_object();
    if (f && line > 0)
        json_object_set_new(f, "line", json_integer(line));
    if (f && input_id)
        json_object_set_new(f, "input_id", json_string(input_id));
    json_t *m = json_string(msg);
    if (f && json_object_set_new(f, "message", m ? m : json_string("invalid input")) != 0) {
        json_decref(f);
        f = NULL;
    }
    put_own(s, "error", f);
}

static void on_generation(const json_t *event, void *ud) { put(ud, event); }

static void wake_driver(serve *s);

/* The agent has waking work nobody sent on stdin (a background job's
 * result): run the driver for it (weir_agent_options.on_wake). */
static void on_wake(void *ud) { wake_driver(ud); }

static void on_event(const json_t *event, bool durable, void *ud) {
    serve *s = ud;
    if (s->all_events)
        put(s, event);
    /* any plugin's status line (docs/plugins.md, "Status lines"):
     * {"type":"status","time","event","seq"?,"status":{kind, text, ...}} */
    const json_t *status = weir_cli_event_status(event);
    if (status) {
        json_t *f = json_pack("{s:O, s:O}", "event", json_object_get(event, "type"), "status",
                              status);
        if (f && durable)
            json_object_set(f, "seq", json_object_get(event, "seq"));
        put_own(s, "status", f);
    }
    if (weir_generation_tracker_feed(s->tracker, event, durable) == WEIR_E_NOMEM)
        fprintf(stderr, "weir serve: out of memory while tracking generations\n");
}

/* ------------------------------------------------------------------------ */
/* The driver thread                                                         */
/* ------------------------------------------------------------------------ */

/* Answer a pending compact command that will not run (caller holds mu). */
static void drop_compact(serve *s, const char *why) {
    if (!s->compact || s->compact_running)
        return;
    put_error(s, s->compact_line, NULL, "compact: %s", why);
    free(s->compact_instructions);
    s->compact_instructions = NULL;
    s->compact = false;
}

/* A compact command, once the agent is idle: {"type":"compaction",
 * "time","line","result":{kind, message?, ...}}, or an error event. */
static void run_compact(serve *s, long line, const char *instructions) {
    json_t *result = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_compact(s->agent, instructions, &result, &err) != WEIR_OK) {
        put_error(s, line, NULL, "compact: %s", err.text);
        return;
    }
    put_own(s, "compaction", json_pack("{s:I, s:o}", "line", (json_int_t)line, "result", result));
}

static void *driver_main(void *arg) {
    serve *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->work && !s->compact && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping)
            break;
        s->work = false;
        pthread_mutex_unlock(&s->mu);
        weir_error err;
        weir_error_clear(&err);
        int rc = weir_agent_run_until_idle(s->agent, &err);
        if (rc != WEIR_OK)
            put_error(s, 0, NULL, "the agent stopped: %s: %s", weir_status_name(rc), err.text);
        pthread_mutex_lock(&s->mu);
        if (rc != WEIR_OK) {
            s->broken = true;
            s->broken_status = rc;
            drop_compact(s, "the agent stopped after an error");
            break;
        }
        if (s->compact && !s->work && !s->stopping) { /* idle: between turns */
            long line = s->compact_line;
            char *instructions = s->compact_instructions;
            s->compact_instructions = NULL;
            s->compact_running = true;
            pthread_mutex_unlock(&s->mu);
            run_compact(s, line, instructions);
            free(instructions);
            pthread_mutex_lock(&s->mu);
            s->compact = s->compact_running = false;
        }
    }
    drop_compact(s, "dropped by the shutdown");
    s->driver_done = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void wake_driver(serve *s) {
    pthread_mutex_lock(&s->mu);
    s->work = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/*
 * Shutdown: cancel the running turn, report queued input as held, and wait
 * for the driver thread.  A turn may start between a cancel and the inbox
 * clearing; cancelling again until the driver is done stops it too.
 */
static void stop_driver(serve *s, pthread_t th) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    weir_error err;
    weir_error_clear(&err);
    if (weir_generation_tracker_shutdown(s->tracker, s->agent, &err) != WEIR_OK)
        put_error(s, 0, NULL, "shutdown: %s", err.text);
    pthread_mutex_lock(&s->mu);
    while (!s->driver_done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 200 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT && !s->driver_done) {
            pthread_mutex_unlock(&s->mu);
            weir_agent_cancel(s->agent, "disposed", false);
            pthread_mutex_lock(&s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    pthread_join(th, NULL); /* the driver answered or dropped any compact command */
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

/* The first member of `cmd` not listed in `allowed` (NULL-terminated), or NULL. */
static const char *unknown_key(json_t *cmd, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach(cmd, key, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(key, *a) == 0;
        if (!ok)
            return key;
    }
    return NULL;
}

static bool blank(const char *text) {
    for (; *text; text++)
        if (*text != ' ' && *text != '\t' && *text != '\r' && *text != '\n')
            return false;
    return true;
}

static void cmd_send(serve *s, long line, json_t *cmd) {
    static const char *const keys[] = {"op",   "input_id", "text", "message",
                                       "mode", "target_generation_id", NULL};
    const json_t *jid = json_object_get(cmd, "input_id");
    const char *input_id = json_string_value(jid);
    const char *bad = unknown_key(cmd, keys);
    if (bad) {
        put_error(s, line, input_id, "send: unknown field \"%.64s\"", bad);
        return;
    }
    if (jid && (!input_id || !*input_id || json_string_length(jid) > MAX_INPUT_ID ||
                strlen(input_id) != json_string_length(jid))) {
        put_error(s, line, NULL, "send: input_id: expected a string of 1 to %d characters",
                  MAX_INPUT_ID);
        return;
    }
    const json_t *text = json_object_get(cmd, "text");
    json_t *message = json_object_get(cmd, "message");
    if ((text != NULL) == (message != NULL)) {
        put_error(s, line, input_id, "send: expected exactly one of \"text\" and \"message\"");
        return;
    }
    if (text && (!json_is_string(text) || blank(json_string_value(text)))) {
        put_error(s, line, input_id, "send: text: expected a non-blank string");
        return;
    }
    if (message && !json_is_object(message)) {
        put_error(s, line, input_id, "send: message: expected an object");
        return;
    }
    const json_t *jmode = json_object_get(cmd, "mode");
    const char *mode = jmode ? json_string_value(jmode) : "followup";
    weir_send_mode m;
    if (mode && !strcmp(mode, "followup")) {
        m = WEIR_SEND_FOLLOWUP;
    } else if (mode && !strcmp(mode, "steer")) {
        m = WEIR_SEND_STEER;
    } else if (mode && !strcmp(mode, "inject")) {
        m = WEIR_SEND_INJECT;
    } else {
        put_error(s, line, input_id, "send: mode: expected \"followup\", \"steer\" or \"inject\"");
        return;
    }
    /* anchored steering: the open generation's running turn, or refused */
    const json_t *jgen = json_object_get(cmd, "target_generation_id");
    int anchor = 0;
    if (jgen) {
        const char *gen = json_string_value(jgen);
        if (m != WEIR_SEND_STEER) {
            put_error(s, line, input_id, "send: target_generation_id: only with mode \"steer\"");
            return;
        }
        if (!gen || strlen(gen) != json_string_length(jgen) || !*gen) {
            put_error(s, line, input_id, "send: target_generation_id: expected a string");
            return;
        }
        anchor = weir_generation_tracker_turn(s->tracker, gen);
        if (anchor <= 0) {
            put_error(s, line, input_id,
                      "send: generation \"%.64s\" is not running (finished, between turns or "
                      "unknown): anchored steering refused",
                      gen);
            return;
        }
    }
    pthread_mutex_lock(&s->mu);
    bool broken = s->broken;
    pthread_mutex_unlock(&s->mu);
    if (broken) {
        put_error(s, line, input_id, "send: the agent stopped after an error; shut down");
        return;
    }
    json_t *msg = message ? json_incref(message)
                          : json_pack("{s:s, s:O}", "role", "user", "content", text);
    weir_error err;
    weir_error_clear(&err);
    int rc = !msg      ? WEIR_E_NOMEM
             : anchor ? weir_agent_steer_turn(s->agent, msg, anchor, input_id, &err)
                      : weir_agent_send(s->agent, msg, m, input_id, &err);
    json_decref(msg);
    if (rc != WEIR_OK) {
        put_error(s, line, input_id, "send: %s", err.text[0] ? err.text : weir_strerror(rc));
        return;
    }
    if (m != WEIR_SEND_INJECT)
        wake_driver(s);
}

static void cmd_compact(serve *s, long line, json_t *cmd) {
    static const char *const keys[] = {"op", "instructions", NULL};
    const char *bad = unknown_key(cmd, keys);
    if (bad) {
        put_error(s, line, NULL, "compact: unknown field \"%.64s\"", bad);
        return;
    }
    const json_t *ji = json_object_get(cmd, "instructions");
    if (ji && (!json_is_string(ji) || strlen(json_string_value(ji)) != json_string_length(ji))) {
        put_error(s, line, NULL, "compact: instructions: expected a string");
        return;
    }
    char *copy = ji ? strdup(json_string_value(ji)) : NULL;
    if (ji && !copy) {
        put_error(s, line, NULL, "compact: out of memory");
        return;
    }
    pthread_mutex_lock(&s->mu);
    bool busy = s->compact, broken = s->broken || s->driver_done;
    if (broken) {
        pthread_mutex_unlock(&s->mu);
        free(copy);
        put_error(s, line, NULL, "compact: the agent stopped after an error; shut down");
        return;
    }
    if (!busy) {
        s->compact = true;
        s->compact_line = line;
        s->compact_instructions = copy;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (busy) {
        free(copy);
        put_error(s, line, NULL, "compact: a compaction is already pending");
    }
}

static void cmd_cancel(serve *s, long line, json_t *cmd) {
    static const char *const keys[] = {"op", "cause", "keep_inbox", NULL};
    const char *bad = unknown_key(cmd, keys);
    if (bad) {
        put_error(s, line, NULL, "cancel: unknown field \"%.64s\"", bad);
        return;
    }
    const json_t *jcause = json_object_get(cmd, "cause");
    const json_t *jkeep = json_object_get(cmd, "keep_inbox");
    const char *cause = jcause ? json_string_value(jcause) : "user";
    if (!cause || strlen(cause) > 200 || (jcause && strlen(cause) != json_string_length(jcause))) {
        put_error(s, line, NULL, "cancel: cause: expected a string");
        return;
    }
    if (jkeep && !json_is_boolean(jkeep)) {
        put_error(s, line, NULL, "cancel: keep_inbox: expected true or false");
        return;
    }
    pthread_mutex_lock(&s->mu);
    drop_compact(s, "cancelled before it started");
    if (s->approval_id[0] && !s->approval_answer) { /* the waiting approval: denied */
        s->approval_answer = json_pack("{s:s, s:s}", "decision", "deny", "reason", "cancelled");
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    int rc = weir_agent_cancel(s->agent, cause, json_is_true(jkeep));
    if (rc == WEIR_E_INVAL)
        put_error(s, line, NULL,
                  "cancel: cause \"%s\": expected \"user\", \"parent\", \"hook:<reason>\" or "
                  "\"disposed\"",
                  cause);
    else if (rc != WEIR_OK)
        put_error(s, line, NULL, "cancel: %s", weir_strerror(rc));
}

/* {"op":"cancel_job","job_id"}: the job's job.cancelled follows once its
 * body returned; an error event when no such job is queued or running. */
static void cmd_cancel_job(serve *s, long line, json_t *cmd) {
    static const char *const keys[] = {"op", "job_id", NULL};
    const char *bad = unknown_key(cmd, keys);
    if (bad) {
        put_error(s, line, NULL, "cancel_job: unknown field \"%.64s\"", bad);
        return;
    }
    const json_t *jid = json_object_get(cmd, "job_id");
    const char *job_id = json_string_value(jid);
    if (!job_id || !*job_id || json_string_length(jid) > MAX_INPUT_ID ||
        strlen(job_id) != json_string_length(jid)) {
        put_error(s, line, NULL, "cancel_job: job_id: expected a string of 1 to %d characters",
                  MAX_INPUT_ID);
        return;
    }
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_cancel_job(s->agent, job_id, &err) != WEIR_OK)
        put_error(s, line, NULL, "cancel_job: %s", err.text);
}

/* Every op a command line may give, for the errors that list them (and
 * serve_help lists each with its fields). */
#define SERVE_OPS                                                                          \
    "\"send\", \"cancel\", \"cancel_job\", \"compact\", \"approve\" or \"shutdown\""

/* {"op":"approve","request_id","decision":"allow"|"deny","reason"?}: the
 * answer to the approval.requested event that is waiting. */
static void cmd_approve(serve *s, long line, json_t *cmd) {
    static const char *const keys[] = {"op", "request_id", "decision", "reason", NULL};
    const char *bad = unknown_key(cmd, keys);
    const char *id = json_string_value(json_object_get(cmd, "request_id"));
    const char *d = json_string_value(json_object_get(cmd, "decision"));
    json_t *reason = json_object_get(cmd, "reason");
    if (bad) {
        put_error(s, line, NULL, "approve: unknown field \"%.64s\"", bad);
        return;
    }
    if (!id || !d || (strcmp(d, "allow") != 0 && strcmp(d, "deny") != 0) ||
        (reason && !json_is_string(reason))) {
        put_error(s, line, NULL, "approve: expected request_id, decision \"allow\" or \"deny\" "
                                 "and an optional reason string");
        return;
    }
    pthread_mutex_lock(&s->mu);
    bool waiting = s->approval_id[0] && !strcmp(s->approval_id, id) && !s->approval_answer;
    if (waiting) {
        s->approval_answer = json_pack("{s:s}", "decision", d);
        if (s->approval_answer && reason)
            json_object_set(s->approval_answer, "reason", reason);
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (!waiting)
        put_error(s, line, NULL, "approve: no approval request \"%.64s\" is waiting", id);
}

/* The agent's approver (weir_agent_set_approver): an approval.requested
 * event, then wait for its approve command; a cancel or the shutdown
 * answers deny. */
static int approve(weir_agent *agent, const json_t *request, json_t **decision, void *ud) {
    serve *s = ud;
    (void)agent;
    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->approval_id[0]) {
        pthread_mutex_unlock(&s->mu);
        return WEIR_E_CANCELLED;
    }
    snprintf(s->approval_id, sizeof s->approval_id, "approval-%ld", ++s->approval_seq);
    json_t *fields = json_deep_copy(request);
    if (fields)
        json_object_set_new(fields, "request_id", json_string(s->approval_id));
    pthread_mutex_unlock(&s->mu);
    put_own(s, "approval.requested", fields);
    pthread_mutex_lock(&s->mu);
    while (!s->approval_answer && !s->stopping)
        pthread_cond_wait(&s->cv, &s->mu);
    *decision = s->approval_answer;
    s->approval_answer = NULL;
    s->approval_id[0] = '\0';
    pthread_mutex_unlock(&s->mu);
    return *decision ? WEIR_OK : WEIR_E_CANCELLED;
}

/* Handle one command line.  Returns false for a shutdown. */
static bool handle(serve *s, long line, const char *buf, size_t len) {
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r'))
        i++;
    if (i == len)
        return true; /* blank lines are ignored */
    json_error_t je;
    json_t *cmd = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!cmd) {
        put_error(s, line, NULL, "invalid JSON at column %d: %s", je.column, je.text);
        return true;
    }
    bool go_on = true;
    const char *op = json_string_value(json_object_get(cmd, "op"));
    if (!json_is_object(cmd))
        put_error(s, line, NULL, "expected a JSON object");
    else if (!op)
        put_error(s, line, NULL,
                  "missing \"op\" (" SERVE_OPS ")");
    else if (!strcmp(op, "send"))
        cmd_send(s, line, cmd);
    else if (!strcmp(op, "cancel"))
        cmd_cancel(s, line, cmd);
    else if (!strcmp(op, "compact"))
        cmd_compact(s, line, cmd);
    else if (!strcmp(op, "cancel_job"))
        cmd_cancel_job(s, line, cmd);
    else if (!strcmp(op, "approve"))
        cmd_approve(s, line, cmd);
    else if (!strcmp(op, "shutdown")) {
        static const char *const keys[] = {"op", NULL};
        const char *bad = unknown_key(cmd, keys);
        if (bad)
            put_error(s, line, NULL, "shutdown: unknown field \"%.64s\"", bad);
        else
            go_on = false;
    } else
        put_error(s, line, NULL, "unknown op \"%.64s\" (expected " SERVE_OPS ")", op);
    json_decref(cmd);
    return go_on;
}

/* ------------------------------------------------------------------------ */
/* Input: stdin and the signal pipe                                          */
/* ------------------------------------------------------------------------ */

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int saved = errno;
    char c = (char)sig;
    if (write(sig_pipe[1], &c, 1) < 0) {
        /* nothing to do: the pipe is full, a shutdown is already pending */
    }
    errno = saved;
}

/* The pipe and the handlers for SIGTERM and SIGINT; false when no pipe. */
static bool sig_start(void) {
    if (pipe(sig_pipe) != 0)
        return false;
    for (int i = 0; i < 2; i++)
        (void)fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return true;
}

/* Back to the default actions: a second signal ends the process at once. */
static void sig_default(void) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
}

/* ------------------------------------------------------------------------ */
/* weir serve                                                                */
/* ------------------------------------------------------------------------ */

static const char serve_help[] =
    "usage: weir serve --stdio [-c FILE]... [-s SESSION_ID | --log PATH]\n"
    "                  [--events generations|all]\n"
    "\n"
    "Serve one agent over stdin/stdout for a host program: one JSON command per\n"
    "line on stdin, one JSON event per line on stdout (docs/stdio-protocol.md).\n"
    "Commands:\n"
    "  {\"op\":\"send\",\"input_id\"?,\"text\"|\"message\",\n"
    "   \"mode\"?:\"followup\"|\"steer\"|\"inject\",\"target_generation_id\"?}\n"
    "  {\"op\":\"cancel\",\"cause\"?,\"keep_inbox\"?}\n"
    "  {\"op\":\"cancel_job\",\"job_id\"}   (a background job; job.cancelled follows)\n"
    "  {\"op\":\"compact\",\"instructions\"?}  (once idle; a compaction event)\n"
    "  {\"op\":\"approve\",\"request_id\",\"decision\":\"allow\"|\"deny\",\"reason\"?}\n"
    "                               (answers the approval.requested event that waits)\n"
    "  {\"op\":\"shutdown\"}            (end of input is a shutdown too)\n"
    "\n"
    "  -c, --config FILE   deployment config (repeat to overlay; default: built in)\n"
    "  -s, --session ID    session id, [A-Za-z0-9][A-Za-z0-9._-]{0,127}; an existing\n"
    "                      session is resumed; one writer at a time (a live one:\n"
    "                      exit 4)\n"
    "      --log PATH      the session log file itself (instead of -s)\n"
    "      --events all    also print the agent's own events (default: only the\n"
    "                      generation.* and input.* events)\n"
    "\n"
    "SIGTERM and SIGINT shut down as {\"op\":\"shutdown\"} does (a second one ends\n"
    "the process at once).\n"
    "\n"
    "exit codes: 0 ok, 1 the agent stopped after an error, 2 usage,\n"
    "            3 configuration or plugin error, 4 I/O error (also when the\n"
    "            session log could not be written), 130 SIGINT, 143 SIGTERM\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY;

/* The command loop: read until shutdown, end of input or a signal. */
static void serve_loop(serve *s) {
    char *buf = NULL;
    size_t cap = 0;
    long line = 0, len;
    bool too_long;
    weir_cli_lines in = WEIR_CLI_LINES_INIT(STDIN_FILENO, sig_pipe[0]);
    while ((len = weir_cli_lines_read(&in, MAX_LINE, &buf, &cap, &too_long)) >= 0) {
        line++;
        if (too_long)
            put_error(s, line, NULL, "line too long (more than %u bytes)", MAX_LINE);
        else if (!handle(s, line, buf ? buf : "", (size_t)len))
            break;
    }
    if (len == WEIR_CLI_LINE_SIGNAL) /* a signal asked for a shutdown */
        s->signal = in.signal;
    free(buf);
}

static int serve_agent(serve *s, weir_host *host, const char *path) {
    weir_error err;
    weir_error_clear(&err);
    if (weir_generation_tracker_create(on_generation, s, &s->tracker, &err) != WEIR_OK)
        return weir_cli_fail("serve", &err);
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_file = path;
    opts.on_event = on_event;
    opts.on_wake = on_wake;
    opts.user_data = s;
    if (weir_agent_open(host, &opts, &s->agent, &err) != WEIR_OK) {
        weir_generation_tracker_destroy(s->tracker);
        return weir_cli_fail("open session", &err);
    }
    weir_agent_set_approver(s->agent, approve, s);
    put_own(s, "session.ready", json_pack("{s:s, s:s}", "session_id", weir_agent_id(s->agent),
                                          "log", weir_agent_log_path(s->agent)));
    s->work = true; /* input queued before a crash wakes the agent */
    pthread_t th;
    int rc = WEIR_EXIT_OK;
    if (pthread_create(&th, NULL, driver_main, s) != 0) {
        fprintf(stderr, "weir serve: cannot start the driver thread\n");
        rc = WEIR_EXIT_FAIL;
    } else {
        serve_loop(s);
        if (s->signal)
            sig_default();
        stop_driver(s, th);
        if (s->broken)
            rc = s->broken_status == WEIR_E_IO ? WEIR_EXIT_IO : WEIR_EXIT_FAIL;
    }
    weir_agent_close(s->agent);
    json_t *closed = json_pack("{s:s}", "status", rc == WEIR_EXIT_OK ? "completed" : "error");
    if (closed && s->signal)
        json_object_set_new(closed, "signal",
                            json_string(s->signal == SIGINT ? "SIGINT" : "SIGTERM"));
    put_own(s, "session.closed", closed);
    if (rc == WEIR_EXIT_OK && s->signal)
        rc = 128 + s->signal;
    weir_generation_tracker_destroy(s->tracker);
    return rc;
}

int weir_cmd_serve(int argc, char **argv) {
    static const struct option longopts[] = {{"stdio", no_argument, NULL, 'S'},
                                              {"config", required_argument, NULL, 'c'},
                                              {"session", required_argument, NULL, 's'},
                                              {"log", required_argument, NULL, 'L'},
                                              {"events", required_argument, NULL, 'e'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    const char *session = NULL, *log = NULL;
    bool stdio = false;
    serve s = {0};
    int ch;
    while ((ch = getopt_long(argc, argv, "c:s:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'S':
            stdio = true;
            break;
        case 'c':
            if (weir_cli_add_file(&files, "weir serve", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 's':
        case 'L':
            if (session || log) {
                fprintf(stderr, "weir serve: give one of -s ID and --log PATH\n");
                return WEIR_EXIT_USAGE;
            }
            *(ch == 's' ? &session : &log) = optarg;
            break;
        case 'e':
            if (!strcmp(optarg, "all")) {
                s.all_events = true;
            } else if (strcmp(optarg, "generations") != 0) {
                fprintf(stderr, "weir serve: --events: expected \"generations\" or \"all\"\n");
                return WEIR_EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(serve_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(serve_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    if (!stdio || optind != argc) {
        fprintf(stderr, "weir serve: %s\n\n%s",
                stdio ? "unexpected argument" : "--stdio is the only transport; give it",
                serve_help);
        return WEIR_EXIT_USAGE;
    }
    json_t *config = NULL;
    int rc = weir_cli_compose(files.files, files.n, &config);
    if (rc != WEIR_EXIT_OK)
        return rc;
    char *path = NULL;
    if ((session || log) &&
        (rc = weir_cli_session_path(config, session ? session : log,
                                    session ? WEIR_CLI_ID : WEIR_CLI_PATH, &path)) != WEIR_EXIT_OK) {
        json_decref(config);
        return rc;
    }
    weir_host *host = NULL;
    if ((rc = weir_cli_host(config, files.n == 0, &host)) != WEIR_EXIT_OK) {
        free(path);
        return rc;
    }
    signal(SIGPIPE, SIG_IGN); /* a host that went away: writes fail, input ends */
    if (!sig_start())
        fprintf(stderr, "weir serve: no signal pipe: SIGTERM and SIGINT end the process\n");
    pthread_mutex_init(&s.out_mu, NULL);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    rc = serve_agent(&s, host, path);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    pthread_mutex_destroy(&s.out_mu);
    weir_host_destroy(host);
    free(path);
    return rc;
}
