/*
 * cli/run.c - `weir run` and `weir resume`: open (or resume) a session,
 * send the prompt (or read a REPL), and print the answer as it streams.
 *
 * Output: assistant text to stdout as it streams, tool activity (one line
 * per call, "[tool] pow {"x":2,"y":10} -> 1024"; on a terminal, a running tool's
 * progress on one status line until its result), the status lines of any
 * plugin's events (the `status` contract, docs/plugins.md "Status lines":
 * the retry plugin's "weir: retrying in 2.0 s (RATE_LIMIT 429, retry 2/5)",
 * counting down on one line on a terminal, its breaker and fallback
 * notices, compaction-basic's "weir: compacting 12 messages…"), and errors
 * to stderr.  With --json
 * every live and durable event is one JSON line on stdout and nothing else
 * (docs/cli.md).  SIGINT cancels the running turn and, for one prompt
 * (cause disposed), exits 130 once the turn is closed; in the REPL (cause
 * user) the next prompt follows.  A second SIGINT in the same turn, or one while idle
 * outside the REPL, exits 130 at once; in the REPL two while idle quit with 0.  SIGTERM
 * (SIGHUP) cancels the running turn (cause disposed) and exits 143 (129)
 * once it is closed (at once while idle).  Any second terminating signal in
 * the turn a first one cancelled quits at once with 128 + its number, as a
 * second Ctrl-C does: a hook that ignores the cancel cannot hold the
 * process until SIGKILL.  The signal handler only writes
 * the signal's number to a pipe; a watcher thread calls weir_agent_cancel().
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

typedef struct run_state {
    bool json;
    bool in_text;      /* assistant text printed since the last newline */
    json_t *calls;     /* call_id -> {name, arguments} for tool lines */
    bool turn_failed;  /* the last turn ended in error or was aborted */
    bool status;       /* stderr is a terminal: show plugins' status lines */
    bool shown;        /* a plugin's status line (no countdown) is showing */
    bool waiting;      /* the "weir: waiting for ..." status line is showing */
    bool progress;     /* a running tool's progress line is showing */
    bool color;        /* colour on stderr: a terminal and no NO_COLOR */
    bool default_used; /* the deployment starts from the built-in default */
    bool no_provider;  /* the deployment sets no agent.provider */
    const weir_cli_files *files; /* the -c files (a hint reads them as written) */
    json_t *pending;   /* --json: events before the session event, or NULL once it is out */
    json_t *held;      /* weir's warning lines held while a line of text streams */
    bool requested;    /* a request/header was logged: something reached a model */
    bool blocked;      /* a turn was blocked by a plugin (a decision worth keeping) */
    weir_cli_usage usage; /* the running turn's usage and cost (its attempts summed) */
    weir_agent *agent;
    /* What the turn waits for now (a terminal only): the status line says it,
     * for how long and the limit, redrawn by the ticker every second. */
    int wait_kind;        /* WAIT_* */
    char wait_what[160];  /* "the model", "tool pow and its hooks" */
    uint64_t wait_since;  /* CLOCK_MONOTONIC ms: when this wait began */
    long wait_drawn_s;    /* the seconds the showing line says */
    long stream_limit_s;  /* the provider row's stream idle limit; 0: unknown */
    long hook_limit_s;    /* hooks-shell's hook timeout (largest row); 0: no row */
    long prestep_limit_s; /* the same for UserPromptSubmit (agent/pre-step) */
    /* A plugin's status with a countdown (a retry's wait) on one stderr
     * line (a terminal only): a thread redraws it while the driver's thread
     * sleeps in the plugin.  The same thread redraws the wait line. */
    pthread_mutex_t mu;  /* held by on_event and by the ticker: the fields above and below, stderr */
    pthread_cond_t cv;
    pthread_t ticker;
    bool ticker_started, ticker_quit;
    bool counting;       /* the countdown line is showing */
    uint64_t deadline_ms; /* CLOCK_MONOTONIC, when the wait ends */
    char count_text[256]; /* the status text, escaped, with its {remaining} */
    char count_line[320]; /* the line as first printed */
} run_state;

/* ------------------------------------------------------------------------ */
/* Event printing                                                            */
/* ------------------------------------------------------------------------ */

static void print_json(const json_t *event) {
    char *s = weir_cli_json_line(event);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
    }
}

/* Whether `s` has nothing but white space (or nothing). */
static bool blank(const char *s) {
    return s[strspn(s, " \t\r\n\v\f")] == '\0';
}

/* The string value of `v`, or `dflt`. */
static const char *str_or(const json_t *v, const char *dflt) {
    const char *s = json_string_value(v);
    return s ? s : dflt;
}

static const char *type_of(const json_t *event) {
    const char *t = json_string_value(json_object_get(event, "type"));
    return t ? t : "";
}

/* SGR `code` on stderr when colour is on ("" otherwise). */
static const char *sgr(const run_state *st, const char *code) { return st->color ? code : ""; }
#define SGR_DIM "\033[2m"
#define SGR_RED "\033[31m"
#define SGR_OFF "\033[0m"

/* The text blocks of a content array, joined (malloc'd; NULL: no memory). */
static char *content_text(const json_t *content) {
    size_t len = 0, i;
    const json_t *b;
    json_array_foreach(content, i, b) len += json_string_length(json_object_get(b, "text"));
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    len = 0;
    json_array_foreach(content, i, b) {
        const json_t *t = json_object_get(b, "text");
        memcpy(out + len, json_string_value(t) ? json_string_value(t) : "", json_string_length(t));
        len += json_string_length(t);
    }
    out[len] = '\0';
    return out;
}

/* The length of `s`'s first `len` bytes, at most `max`, backed off to a
 * character boundary (never inside a UTF-8 sequence). */
static size_t cut_utf8(const char *s, size_t len, size_t max) {
    if (len <= max)
        return len;
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

#define TOOL_ARGS_SHOWN 160   /* bytes of a call's arguments on its line */
#define TOOL_RESULT_SHOWN 200 /* bytes of a result's first line on it */

/*
 * One line for a tool call and its result: "[tool] NAME ARGS -> RESULT",
 * the arguments cut at TOOL_ARGS_SHOWN bytes ("…"), the result's first line
 * at TOOL_RESULT_SHOWN, each on a character boundary; when more is hidden,
 * "… (+N lines, M bytes)" (N more lines, M bytes in all; "(M bytes)" for a
 * single line).  The whole result is in the log (weir log).  An error
 * result reads "-> error: TEXT", the leading "Error: "s of TEXT dropped.
 */
static void tool_line(run_state *st, const json_t *call, const json_t *block) {
    const char *args = str_or(json_object_get(call, "arguments"), "");
    size_t alen = strlen(args), ashown = cut_utf8(args, alen, TOOL_ARGS_SHOWN);
    bool is_error = json_is_true(json_object_get(block, "is_error"));
    char *all = content_text(json_object_get(block, "content"));
    const char *text = all ? all : "(out of memory)";
    /* the core says "Error: " before a failure's message, which may say it again */
    while (is_error && (!strncmp(text, "Error: ", 7) || !strncmp(text, "error: ", 7)))
        text += 7;
    size_t tlen = strlen(text);
    while (tlen > 0 && (text[tlen - 1] == '\n' || text[tlen - 1] == '\r'))
        tlen--; /* a final newline is no line of its own */
    size_t first = strcspn(text, "\n");
    if (first > tlen)
        first = tlen;
    size_t lines = 1;
    for (size_t i = first; i < tlen; i++)
        lines += text[i] == '\n';
    size_t shown = cut_utf8(text, first, TOOL_RESULT_SHOWN);
    while (shown > 0 && text[shown - 1] == '\r')
        shown--;
    char more[96] = "";
    if (lines > 1)
        snprintf(more, sizeof more, "\xe2\x80\xa6 (+%zu line%s, %zu bytes)", lines - 1,
                 lines == 2 ? "" : "s", tlen);
    else if (shown < tlen)
        snprintf(more, sizeof more, "\xe2\x80\xa6 (%zu bytes)", tlen);
    weir_cli_say(sgr(st, SGR_DIM), sgr(st, SGR_OFF), "[tool] %s %.*s%s -> %s%.*s%s",
                 str_or(json_object_get(call, "name"), "?"), (int)ashown, args,
                 ashown < alen ? "\xe2\x80\xa6" : "", is_error ? "error: " : "", (int)shown,
                 text, more);
    free(all);
}

/* End the streamed line of text (if one is open), then print the warnings
 * held while it streamed. */
static void end_text_line(run_state *st) {
    if (st->in_text) {
        fputc('\n', stdout);
        fflush(stdout);
        st->in_text = false;
    }
    if (json_array_size(st->held)) {
        size_t i;
        const json_t *line;
        json_array_foreach(st->held, i, line) fprintf(stderr, "%s\n", json_string_value(line));
        fflush(stderr);
        json_array_clear(st->held);
    }
}

static uint64_t mono_ms(void);
/* The signal (SIGINT, SIGTERM, SIGHUP) whose cancel the running turn got, or
 * 0: the turn/end line says "interrupted by Ctrl-C" then (the watcher sets
 * it, run_prompt clears it). */
static atomic_int cancel_signal;

enum {
    WAIT_NONE,    /* nothing (idle, or another line shows what goes on) */
    WAIT_MODEL,   /* the provider: a first token, or the next chunk */
    WAIT_PRESTEP, /* the agent/pre-step hooks (hooks-shell: UserPromptSubmit) */
    WAIT_HOOKS    /* hooks and tools between the model's answer and the next step */
};

/*
 * Draw the status line of the current wait: "weir: waiting for the model…
 * 12 s (stream idle limit 300 s)"; the seconds from 1 s on, the limit when
 * the deployment says it (a terminal only).
 */
static void waiting_draw(run_state *st, uint64_t now) {
    long secs = now > st->wait_since ? (long)((now - st->wait_since) / 1000u) : 0;
    long limit = st->wait_kind == WAIT_MODEL     ? st->stream_limit_s
                 : st->wait_kind == WAIT_PRESTEP ? st->prestep_limit_s
                                                 : st->hook_limit_s;
    char when[32] = "", lim[64] = "";
    if (secs >= 1)
        snprintf(when, sizeof when, " %ld s", secs);
    if (limit > 0)
        snprintf(lim, sizeof lim, " (%s %ld s)",
                 st->wait_kind == WAIT_MODEL ? "stream idle limit" : "hook timeout", limit);
    fprintf(stderr, "\r\033[K%sweir: waiting for %s\xe2\x80\xa6%s%s%s", sgr(st, SGR_DIM),
            st->wait_what, when, lim, sgr(st, SGR_OFF));
    fflush(stderr);
    st->waiting = true;
    st->wait_drawn_s = secs;
}

/* From now on the turn waits for `what` (`kind`: WAIT_*); the ticker shows
 * it once a second has passed.  WAIT_NONE: no wait to show. */
static void wait_set(run_state *st, int kind, const char *what) {
    st->wait_kind = kind;
    snprintf(st->wait_what, sizeof st->wait_what, "%s", what ? what : "");
    st->wait_since = mono_ms();
    st->wait_drawn_s = -1;
}

/* The one status line while the first token is awaited (a terminal only),
 * drawn at once. */
static void waiting_show(run_state *st) {
    wait_set(st, WAIT_MODEL, "the model");
    if (!st->status || st->shown)
        return;
    if (!st->waiting) /* else it replaces the line of the wait before */
        end_text_line(st);
    waiting_draw(st, st->wait_since);
}

static void waiting_clear(run_state *st) {
    if (st->waiting) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        st->waiting = false;
    }
}

/* A running tool's progress (tool/progress, e.g. an MCP server's) on one status line. */
static void progress_show(run_state *st, const json_t *data) {
    if (!st->status || st->shown)
        return;
    waiting_clear(st);
    end_text_line(st);
    const json_t *p = json_object_get(data, "progress");
    const json_t *total = json_object_get(p, "total");
    char amount[64];
    if (json_is_number(total))
        snprintf(amount, sizeof amount, "%g/%g", json_number_value(json_object_get(p, "progress")),
                 json_number_value(total));
    else
        snprintf(amount, sizeof amount, "%g", json_number_value(json_object_get(p, "progress")));
    char msg[96], name[128];
    weir_cli_esc(msg, sizeof msg, json_string_value(json_object_get(p, "message")));
    weir_cli_esc(name, sizeof name, str_or(json_object_get(data, "name"), "?"));
    fprintf(stderr, "\r\033[K%s[tool] %s: %s%s%s%s", sgr(st, SGR_DIM), name, amount,
            msg[0] ? " " : "", msg, sgr(st, SGR_OFF));
    fflush(stderr);
    st->progress = true;
}

static void progress_clear(run_state *st) {
    if (st->progress) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        st->progress = false;
    }
}

/*
 * weir's warnings and plugin log lines (weir_set_warn_handler), at a line
 * boundary: held while a line of the answer streams (end_text_line prints
 * them), else printed after the status line showing is erased (the ticker
 * draws a wait line again).  `line` is escaped already.
 */
static void on_warn(const char *line, void *ud) {
    run_state *st = ud;
    pthread_mutex_lock(&st->mu);
    if (st->in_text && st->held && json_array_append_new(st->held, json_string(line)) == 0) {
        pthread_mutex_unlock(&st->mu);
        return;
    }
    if (st->waiting || st->progress || st->counting || st->shown)
        fputs("\r\033[K", stderr);
    st->waiting = st->progress = false;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    pthread_mutex_unlock(&st->mu);
}

static void status_show(run_state *st, const json_t *status);

static void on_live(run_state *st, const json_t *event) {
    const json_t *status = weir_cli_event_status(event);
    if (status) {
        status_show(st, status);
        return;
    }
    if (!strcmp(type_of(event), "tool/progress")) {
        progress_show(st, json_object_get(event, "data"));
        return;
    }
    if (strcmp(type_of(event), "agent/assistant-stream") != 0)
        return;
    const json_t *frame = json_object_get(json_object_get(event, "data"), "frame");
    const char *ft = str_or(json_object_get(frame, "type"), "");
    const json_t *chunk = json_object_get(frame, "chunk");
    const char *ct = str_or(json_object_get(chunk, "type"), "");
    if (!strcmp(ft, "end")) {
        waiting_clear(st);
        wait_set(st, WAIT_NONE, NULL);
        end_text_line(st);
        return;
    }
    /* Only the answer itself (text or a tool call) ends the wait: the start
     * frame, sent when the request begins, and the frames that carry no
     * answer (usage, finish) leave the line and its seconds as they are.
     * Reasoning is the model at work: the line stays and says so. */
    if (!strcmp(ft, "chunk") && !strcmp(ct, "reasoning-delta") && st->wait_kind == WAIT_MODEL &&
        !st->in_text && strcmp(st->wait_what, "the model (thinking)") != 0) {
        snprintf(st->wait_what, sizeof st->wait_what, "%s", "the model (thinking)");
        if (st->waiting)
            waiting_draw(st, mono_ms());
    }
    if (strcmp(ft, "chunk") != 0 || (strcmp(ct, "text-delta") && strcmp(ct, "tool-call-delta")))
        return;
    waiting_clear(st);
    /* a silent stream from here shows as a wait for the model, from its last
     * delta (not in the middle of a line of text) */
    wait_set(st, WAIT_MODEL, "the model");
    if (!strcmp(ct, "text-delta")) {
        const char *t = json_string_value(json_object_get(chunk, "text"));
        if (t && *t) {
            fputs(t, stdout);
            fflush(stdout);
            st->in_text = true;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Status lines of plugins' events (docs/plugins.md, "Status lines")        */
/* ------------------------------------------------------------------------ */

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The countdown thread: redraws the line every 100 ms until told to stop. */
static void *ticker_main(void *arg) {
    run_state *st = arg;
    pthread_mutex_lock(&st->mu);
    while (!st->ticker_quit) {
        if (st->counting) {
            uint64_t now = mono_ms();
            uint64_t left = st->deadline_ms > now ? st->deadline_ms - now : 0;
            char line[320];
            fprintf(stderr, "\r\033[K%s",
                    weir_cli_status_line(line, sizeof line, st->count_text, (long long)left));
            fflush(stderr);
        } else if (st->wait_kind != WAIT_NONE && !st->shown && !st->progress &&
                   !st->in_text) {
            /* a wait a second old or more, redrawn when its seconds change */
            uint64_t now = mono_ms();
            long secs = now > st->wait_since ? (long)((now - st->wait_since) / 1000u) : 0;
            if (secs >= 1 && (!st->waiting || secs != st->wait_drawn_s))
                waiting_draw(st, now);
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&st->cv, &st->mu, &until);
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* The wait is over (any next event): the countdown line becomes the retry's
 * line.  st->mu held. */
static void countdown_stop(run_state *st) {
    if (st->counting) {
        st->counting = false;
        fprintf(stderr, "\r\033[K%s\n", st->count_line);
        fflush(stderr);
    }
}

/* Start the thread that redraws the countdown and wait lines; false when it
 * could not start.  st->mu held (the thread waits for it). */
static bool ticker_start(run_state *st) {
    if (!st->ticker_started) {
        st->ticker_quit = false;
        st->counting = false;
        st->ticker_started = pthread_create(&st->ticker, NULL, ticker_main, st) == 0;
    }
    return st->ticker_started;
}

/* No wait to show any more (the prompt is done): its line goes.  Takes st->mu. */
static void wait_stop(run_state *st) {
    pthread_mutex_lock(&st->mu);
    st->wait_kind = WAIT_NONE;
    waiting_clear(st);
    pthread_mutex_unlock(&st->mu);
}

static void countdown_end(run_state *st) {
    if (!st->ticker_started)
        return;
    pthread_mutex_lock(&st->mu);
    countdown_stop(st);
    st->ticker_quit = true;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->ticker, NULL);
    st->ticker_started = false;
}

/*
 * An event's status (the contract of docs/plugins.md, "Status lines"):
 * {kind, text, delay_ms?, done?}.  A notice is a line of its own, on a
 * terminal or not.  Any other kind is a status line: with a countdown
 * (delay_ms) it counts down on a terminal and then stays as first printed,
 * and off a terminal it is printed once; without one it shows on a terminal
 * only, until the next line replaces it; done:true replaces it with its
 * text (the outcome), on a terminal only.  Called with st->mu held.
 */
static void status_show(run_state *st, const json_t *status) {
    const char *kind = str_or(json_object_get(status, "kind"), "");
    const char *text = json_string_value(json_object_get(status, "text"));
    const json_t *d = json_object_get(status, "delay_ms");
    long long delay = json_is_integer(d) && json_integer_value(d) > 0 ? json_integer_value(d) : 0;
    bool done = json_is_true(json_object_get(status, "done"));
    char esc[256], line[320];
    weir_cli_esc(esc, sizeof esc, text ? text : "");
    weir_cli_status_line(line, sizeof line, esc, delay);
    bool notice = !strcmp(kind, "notice");
    if (!notice && !st->status && !delay)
        return; /* a passing state: a terminal's business */
    if (st->shown) { /* the line showing is replaced */
        fputs("\r\033[K", stderr);
        st->shown = false;
    }
    waiting_clear(st);
    progress_clear(st);
    end_text_line(st);
    if (notice || !st->status || done) {
        if (esc[0])
            fprintf(stderr, "%s\n", line);
        fflush(stderr);
        return;
    }
    if (!text || !esc[0])
        return;
    if (delay && ticker_start(st)) {
        snprintf(st->count_text, sizeof st->count_text, "%s", esc);
        snprintf(st->count_line, sizeof st->count_line, "%s", line);
        st->deadline_ms = mono_ms() + (uint64_t)delay;
        st->counting = true;
        fputs(line, stderr);
        fflush(stderr);
        pthread_cond_signal(&st->cv);
        return;
    }
    if (delay) { /* no thread to count down: the line, once */
        fprintf(stderr, "%s\n", line);
        return;
    }
    fputs(line, stderr);
    fflush(stderr);
    st->shown = true;
}

/* A turn failure about the provider route (the deployment names none, or
 * one no row registered): say how to get one. */
static void provider_hint(const run_state *st, const char *code, const char *message) {
    if (strcmp(code, "UNKNOWN") != 0 ||
        (!st->no_provider && strncmp(message, "unknown provider '", 18) != 0))
        return;
    if (st->default_used)
        fputs("weir: hint: the deployment needs a provider row for it (docs/config.md)\n",
              stderr);
    else
        fputs("weir: hint: the deployment has no provider row for this turn; start from the "
              "built-in one with -c default -c FILE, or add a row (docs/config.md)\n",
              stderr);
}

/*
 * A provider that cannot reach its server names the row ("the base_url of
 * row 'local'"): say where that row's base_url comes from, read from the -c
 * files as written (the last file that sets it wins), so the variable to set
 * is the right one: local.json reads LOCAL_BASE_URL, the built-in default
 * OPENAI_BASE_URL.
 */
static void base_url_hint(const run_state *st, const char *message) {
    const char *at = strstr(message, "the base_url of row '");
    if (!at || !st->files)
        return;
    at += strlen("the base_url of row '");
    size_t idlen = strcspn(at, "'");
    char from[512] = "", where[256] = "";
    size_t nfiles = st->files->n ? st->files->n : 1;
    for (size_t i = 0; i < nfiles; i++) {
        const char *file = st->files->n ? st->files->files[i] : WEIR_CONFIG_DEFAULT_NAME;
        bool builtin = !strcmp(file, WEIR_CONFIG_DEFAULT_NAME);
        json_t *doc = builtin ? weir_config_default() : json_load_file(file, 0, NULL);
        size_t r;
        const json_t *row;
        json_array_foreach(json_object_get(doc, "plugins"), r, row) {
            const char *id = json_string_value(json_object_get(row, "id"));
            const char *url =
                json_string_value(json_object_get(json_object_get(row, "config"), "base_url"));
            if (id && url && strlen(id) == idlen && !strncmp(id, at, idlen)) {
                snprintf(from, sizeof from, "%s", url);
                snprintf(where, sizeof where, "%s", builtin ? "the built-in default" : file);
            }
        }
        json_decref(doc);
    }
    const char *var = strstr(from, "${");
    if (!var)
        return; /* a URL written as it is: the message says it */
    var += 2;
    int vlen = (int)strcspn(var, ":}");
    weir_cli_say(NULL, NULL,
                 "weir: hint: row '%.*s' takes its base_url from %s (%s): set %.*s to the "
                 "server's URL",
                 (int)idlen, at, from, where, vlen, var);
}

/* Durable events that print nothing: the waiting line stays up. */
static bool silent_type(const char *type) {
    return !strcmp(type, "step/start") || !strcmp(type, "tool/call") ||
           !strcmp(type, "user/message") || !strcmp(type, "system/message") ||
           !strncmp(type, "request/", 8) || !strncmp(type, "agent/", 6);
}

static void on_durable(run_state *st, const json_t *event) {
    const char *type = type_of(event);
    const json_t *data = json_object_get(event, "data");
    /* any plugin's status line (docs/plugins.md, "Status lines") */
    const json_t *status = weir_cli_event_status(event);
    const char *status_kind = str_or(json_object_get(status, "kind"), "");
    /* a surface replace (a tool result a compaction pruned to a stub): no
     * tool ran, nothing to print */
    bool replaced = json_is_object(json_object_get(event, "surface_op"));
    if (!silent_type(type))
        waiting_clear(st);
    /* what the turn waits for after this event (the status line) */
    if (!strcmp(type, "turn/start")) {
        wait_set(st, WAIT_PRESTEP, "the agent/pre-step hooks");
    } else if (!strcmp(type, "assistant/message") ||
               (!strcmp(type, "tool/result") && !replaced)) {
        wait_set(st, WAIT_HOOKS, "hooks and tools");
    } else if (!strcmp(type, "step/end")) {
        wait_set(st, WAIT_HOOKS, "the hooks");
    } else if (!strcmp(type, "tool/call")) {
        char what[160];
        char name[112];
        weir_cli_esc(name, sizeof name, str_or(json_object_get(data, "name"), "?"));
        snprintf(what, sizeof what, "tool %s and its hooks", name);
        wait_set(st, WAIT_HOOKS, what);
    } else if (!strcmp(type, "turn/end") || (status && strcmp(status_kind, "notice") != 0)) {
        wait_set(st, WAIT_NONE, NULL); /* idle, or a line of its own */
    }
    if (status) {
        status_show(st, status);
    } else if (!strcmp(type, "step/start")) {
        waiting_show(st);
    } else if (!strcmp(type, "tool/call")) {
        json_object_set_new(st->calls, str_or(json_object_get(data, "call_id"), ""),
                            json_pack("{s:O, s:O}", "name", json_object_get(data, "name"),
                                      "arguments", json_object_get(data, "arguments")));
    } else if (!strcmp(type, "tool/result") && !replaced) {
        const json_t *block =
            json_array_get(json_object_get(json_object_get(data, "message"), "content"), 0);
        const char *id = json_string_value(json_object_get(block, "call_id"));
        const json_t *call = json_object_get(st->calls, id ? id : "");
        progress_clear(st);
        end_text_line(st);
        tool_line(st, call, block);
    } else if (!strcmp(type, "turn/start")) {
        st->turn_failed = false;
        memset(&st->usage, 0, sizeof st->usage);
    } else if (!strcmp(type, "assistant/message") || !strcmp(type, "assistant/attempt")) {
        weir_cli_usage_add(&st->usage, data);
    } else if (!strcmp(type, "turn/end")) {
        const json_t *reason = json_object_get(data, "reason");
        const char *kind = str_or(json_object_get(reason, "kind"), "");
        end_text_line(st);
        if (!strcmp(kind, "error")) {
            const json_t *e = json_object_get(reason, "error");
            const char *code = str_or(json_object_get(e, "code"), "UNKNOWN");
            /* IO: the log could not be written; the run's own error says so, once */
            if (strcmp(code, "IO") != 0) {
                weir_cli_say(sgr(st, SGR_RED), sgr(st, SGR_OFF), "weir: turn failed: %s: %s", code,
                             str_or(json_object_get(e, "message"), ""));
                provider_hint(st, code, str_or(json_object_get(e, "message"), ""));
                if (!strcmp(code, "TRANSPORT"))
                    base_url_hint(st, str_or(json_object_get(e, "message"), ""));
            }
            st->turn_failed = true;
        } else if (!strcmp(kind, "aborted")) {
            /* in plain words: a signal the user sent, else who cancelled
             * (a hook's reason; "user" and "disposed" say nothing more) */
            int sig = atomic_load(&cancel_signal);
            const char *cause = str_or(json_object_get(reason, "cause"), "user");
            if (sig)
                weir_cli_say(NULL, NULL, "weir: interrupted by %s",
                             sig == SIGINT ? "Ctrl-C" : sig == SIGHUP ? "SIGHUP" : "SIGTERM");
            else if (!strcmp(cause, "user") || !strcmp(cause, "disposed"))
                weir_cli_say(NULL, NULL, "weir: turn cancelled");
            else
                weir_cli_say(NULL, NULL, "weir: turn cancelled (%s)", cause);
            st->turn_failed = true;
        } else if (!strcmp(kind, "blocked")) {
            /* the row whose agent/pre-step listener rejected, and its reason */
            const char *by = json_string_value(json_object_get(reason, "plugin"));
            const char *why = json_string_value(json_object_get(reason, "reason"));
            weir_cli_say(sgr(st, SGR_RED), sgr(st, SGR_OFF), "weir: turn blocked by %s%s%s%s",
                         by ? "plugin " : "a plugin", by ? by : "", why ? ": " : "",
                         why ? why : "");
            st->turn_failed = true;
        } else if (!strcmp(kind, "max-tokens")) {
            fprintf(stderr, "weir: the answer hit max_tokens\n");
        }
        if (st->usage.any) { /* one line per turn: what it used and cost */
            char line[256];
            fprintf(stderr, "%susage: %s%s\n", sgr(st, SGR_DIM),
                    weir_cli_usage_line(line, sizeof line, &st->usage), sgr(st, SGR_OFF));
        }
    }
}

static void on_event(const json_t *event, bool durable, void *ud) {
    run_state *st = ud;
    if (durable && !strcmp(type_of(event), "request/header"))
        st->requested = true;
    if (durable && !strcmp(type_of(event), "turn/end") &&
        !strcmp(str_or(json_object_get(json_object_get(json_object_get(event, "data"), "reason"),
                                       "kind"),
                       ""),
                "blocked"))
        st->blocked = true;
    if (st->json) {
        if (st->pending) /* the session event comes first: held until it is out */
            json_array_append_new(st->pending, json_deep_copy(event));
        else
            print_json(event);
        if (durable && !strcmp(type_of(event), "turn/end")) {
            const char *kind = json_string_value(json_object_get(
                json_object_get(json_object_get(event, "data"), "reason"), "kind"));
            st->turn_failed = kind && (!strcmp(kind, "error") || !strcmp(kind, "aborted") ||
                                       !strcmp(kind, "blocked"));
        }
        return;
    }
    pthread_mutex_lock(&st->mu); /* the ticker draws nothing meanwhile */
    countdown_stop(st);          /* any next event: the wait is over */
    if (durable)
        on_durable(st, event);
    else
        on_live(st, event);
    pthread_mutex_unlock(&st->mu);
}

/* Whether `row`'s plugin (a name or a path) is `name` ("provider-openai"
 * matches ".../weir-provider-openai.so" too). */
static bool row_plugin_is(const json_t *row, const char *name) {
    const char *p = json_string_value(json_object_get(row, "plugin"));
    if (!p)
        return false;
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    if (!strncmp(base, "weir-", 5))
        base += 5;
    size_t n = strlen(name);
    return !strncmp(base, name, n) && (!base[n] || !strcmp(base + n, ".so"));
}

/*
 * The limits the wait line names, from the deployment: the stream idle
 * limit of the agent's provider row (its stream_idle_timeout_ms; the
 * shipped HTTP providers' default is 300 s, docs/providers.md), and
 * hooks-shell's hook timeout (a row's `timeout`, else Claude Code's 600 s,
 * 30 s for UserPromptSubmit; docs/hooks-shell.md).  0: not known.
 */
static void wait_limits(run_state *st, const json_t *config) {
    const char *provider =
        json_string_value(json_object_get(json_object_get(config, "agent"), "provider"));
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(config, "plugins"), i, row) {
        const json_t *cfg = json_object_get(row, "config");
        const char *id = json_string_value(json_object_get(row, "id"));
        if (provider && id && !strcmp(id, provider)) {
            const json_t *ms = json_object_get(cfg, "stream_idle_timeout_ms");
            if (json_is_integer(ms) && json_integer_value(ms) > 0)
                st->stream_limit_s = (long)((json_integer_value(ms) + 999) / 1000);
            else if (row_plugin_is(row, "provider-openai") ||
                     row_plugin_is(row, "provider-anthropic"))
                st->stream_limit_s = 300;
        }
        if (row_plugin_is(row, "hooks-shell")) {
            const json_t *t = json_object_get(cfg, "timeout");
            long hook = json_is_number(t) && json_number_value(t) > 0
                            ? (long)json_number_value(t) : 600;
            long pre = json_is_number(t) && json_number_value(t) > 0 ? hook : 30;
            if (hook > st->hook_limit_s)
                st->hook_limit_s = hook;
            if (pre > st->prestep_limit_s)
                st->prestep_limit_s = pre;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Signals: handler -> pipe -> watcher thread -> weir_agent_cancel           */
/* ------------------------------------------------------------------------ */

static int sig_pipe[2] = {-1, -1};
static atomic_bool turn_running;  /* a prompt is being sent or run */
static atomic_uint turn_seq;      /* counts the prompts run */
static atomic_int quit_signal;    /* exit 128 + this once the turn is closed */
static weir_agent *sig_agent;
static bool sig_repl;             /* a SIGINT in the REPL cancels the turn only */
static atomic_uint idle_ctrl_c;   /* REPL: Ctrl-C's while idle since the last line */

/* "SIGTERM" for SIGTERM, and so on for the signals the watcher takes. */
static const char *sig_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM";
}

static void on_signal(int sig) {
    int saved = errno;
    char c = (char)sig;
    if (write(sig_pipe[1], &c, 1) < 0) {
        /* nothing to do: the pipe is full, a wake is already pending */
    }
    errno = saved;
}

/*
 * A cancel may land just before the agent starts its turn (it is then a
 * no-op): while a cancel is pending it is repeated every 200 ms until that
 * prompt is done.
 *
 * On a store with leases (a shared store: the lease has an epoch) the
 * watcher also wakes every 200 ms while a prompt runs to ask whether the
 * lease was taken over (weir_agent_lease_lost: the store's heartbeat saw
 * it): then it cancels the turn at once, which appends nothing more
 * anyway, instead of streaming on until the next append is refused; the
 * prompt then exits 4 (run_prompt).
 */
static atomic_bool lease_stopped; /* the watcher cancelled the turn: the lease is lost */

static void *sig_watcher(void *arg) {
    (void)arg;
    const char *cause = NULL; /* the pending cancel */
    unsigned cancel_seq = 0, sig_seq = 0;
    bool sig_seen = false; /* a terminating signal in turn sig_seq */
    bool leased = weir_agent_lease_epoch(sig_agent) > 0;
    for (;;) {
        struct pollfd p = {.fd = sig_pipe[0], .events = POLLIN};
        int n = poll(&p, 1, cause || leased ? 200 : -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 && leased && atomic_load(&turn_running) &&
                !atomic_load(&lease_stopped) && weir_agent_lease_lost(sig_agent)) {
                atomic_store(&lease_stopped, true);
                weir_agent_cancel(sig_agent, "disposed", true);
            }
            if (n == 0 && cause && atomic_load(&turn_running) &&
                atomic_load(&turn_seq) == cancel_seq)
                weir_agent_cancel(sig_agent, cause, false);
            else
                cause = NULL;
            continue;
        }
        char c;
        if (read(sig_pipe[0], &c, 1) != 1 || c == 0)
            break; /* shutdown */
        bool running = atomic_load(&turn_running);
        unsigned seq = atomic_load(&turn_seq);
        /* A second terminating signal (SIGINT, SIGTERM, SIGHUP, in any mix)
         * in the turn a first one cancels quits at once: a hook or tool that
         * ignores the cancel must not hold the process until SIGKILL.  The
         * log stays valid: every event is one whole line, written before
         * the next starts, so _exit leaves the turn open, and the next open
         * closes it as interrupted (a torn last line is dropped). */
        if (running && sig_seen && sig_seq == seq) {
            weir_cli_line_restore();
            fprintf(stderr, "\nweir: %s again: quitting now; the turn stays open in the log "
                            "(the next open closes it as interrupted)\n",
                    sig_name(c));
            _exit(128 + c);
        }
        if (c == SIGTERM || c == SIGHUP) {
            if (!running) {
                weir_cli_line_restore();
                _exit(128 + c);
            }
            atomic_store(&quit_signal, c);
            fprintf(stderr, "\nweir: terminating: cancelling the turn (%s; a second signal "
                            "quits at once)\n",
                    sig_name(c));
            cause = "disposed";
        } else {
            if (!running && sig_repl) {
                /* the REPL while idle (the terminal in cooked mode, or the
                 * REPL quitting): counted with the line editor's Ctrl-C's,
                 * the first says how to quit, a second quits as /quit does */
                if (atomic_fetch_add(&idle_ctrl_c, 1) > 0) {
                    weir_cli_line_restore();
                    fputs("\n", stderr);
                    _exit(WEIR_EXIT_OK);
                }
                fputs("\nweir: press Ctrl-C again or type /quit to quit\n> ", stderr);
                continue;
            }
            if (!running) {
                weir_cli_line_restore();
                fputs("\n", stderr);
                _exit(128 + SIGINT);
            }
            if (!sig_repl)
                atomic_store(&quit_signal, SIGINT);
            fputs("\nweir: cancelling (press Ctrl-C again to quit)\n", stderr);
            /* quitting disposes of the turn; in the REPL the user only cancels it */
            if (!cause || cancel_seq != seq)
                cause = sig_repl ? "user" : "disposed";
        }
        sig_seen = true;
        sig_seq = seq;
        cancel_seq = seq;
        atomic_store(&cancel_signal, c);
        weir_agent_cancel(sig_agent, cause, false);
    }
    return NULL;
}

static bool sig_start(weir_agent *agent, bool repl_mode, pthread_t *th) {
    if (pipe(sig_pipe) != 0)
        return false;
    sig_agent = agent;
    sig_repl = repl_mode;
    if (pthread_create(th, NULL, sig_watcher, NULL) != 0) {
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        return false;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* the REPL's read goes on after an idle Ctrl-C */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    return true;
}

/* The REPL has quit (the user asked to): a Ctrl-C while the agent closes is
 * ignored, so the exit code stays 0; elsewhere it ends the process (130). */
static void sig_stop(pthread_t th) {
    signal(SIGINT, sig_repl ? SIG_IGN : SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    char c = 0;
    if (write(sig_pipe[1], &c, 1) == 1)
        pthread_join(th, NULL);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                  */
/* ------------------------------------------------------------------------ */

/* 128 + the signal that ends the process (SIGINT, SIGTERM, SIGHUP), or 0. */
static int quit_code(void) {
    int sig = atomic_load(&quit_signal);
    return sig ? 128 + sig : 0;
}

static int run_prompt(weir_agent *agent, run_state *st, const char *prompt) {
    weir_error err;
    weir_error_clear(&err);
    atomic_store(&cancel_signal, 0);
    atomic_fetch_add(&turn_seq, 1);
    atomic_store(&turn_running, true);
    if (weir_agent_send_text(agent, prompt, WEIR_SEND_FOLLOWUP, &err) != WEIR_OK) {
        atomic_store(&turn_running, false);
        return weir_cli_fail("send", &err);
    }
    int rc = quit_code() ? WEIR_OK /* a signal before the turn: no turn */
                         : weir_agent_run_until_idle(agent, &err);
    atomic_store(&turn_running, false);
    wait_stop(st);
    if (rc == WEIR_OK && (atomic_load(&lease_stopped) || weir_agent_lease_lost(agent))) {
        /* the watcher cancelled the turn: another writer has the session */
        err.code = WEIR_E_LEASE_LOST;
        snprintf(err.text, sizeof err.text,
                 "session %s: the lease was taken over by another writer; this run cancelled "
                 "its turn and appended nothing more",
                 weir_agent_id(agent));
        rc = WEIR_E_LEASE_LOST;
    }
    if (rc != WEIR_OK)
        return weir_cli_fail("run", &err);
    if (quit_code())
        return quit_code();
    return st->turn_failed ? WEIR_EXIT_FAIL : WEIR_EXIT_OK;
}

static const char repl_help[] =
    "Type a message and press Enter; it is sent as one turn.  Commands:\n"
    "  /help            this text\n"
    "  /session         the session id and its log file (weir log ID reads it)\n"
    "  /compact [TEXT]  compact the context now (TEXT: extra instructions)\n"
    "  /quit            quit (so do Ctrl-D, and Ctrl-C twice on an empty line)\n"
    "  //TEXT           send a message that starts with '/'\n"
    "Ctrl-C cancels the running turn.  Editing: Left/Right, Home/End (Ctrl-A/E),\n"
    "Up/Down (the history of this REPL), Ctrl-U/K/W (erase), Ctrl-L (clear).\n";

/* /compact [TEXT] in the REPL: as `weir compact`, Ctrl-C cancels it. */
static int repl_compact(weir_agent *agent, const char *instructions) {
    weir_error err;
    weir_error_clear(&err);
    json_t *result = NULL;
    atomic_fetch_add(&turn_seq, 1);
    atomic_store(&turn_running, true);
    int rc = weir_agent_compact(agent, *instructions ? instructions : NULL, &result, &err);
    atomic_store(&turn_running, false);
    if (rc != WEIR_OK) {
        rc = weir_cli_fail("compact", &err);
        return rc > WEIR_EXIT_FAIL && rc != WEIR_EXIT_IO ? WEIR_EXIT_FAIL : rc;
    }
    fflush(stdout);
    weir_cli_print_compact(result);
    fflush(stdout);
    json_decref(result);
    return WEIR_EXIT_OK;
}

/* One line of the REPL (edited on a terminal, else read plainly); a
 * WEIR_CLI_LINE_* code, the line in *out. */
static int repl_read(weir_cli_line **ed, const char *prompt, char **out) {
    *out = NULL;
    if (*ed) {
        int r = weir_cli_line_read(*ed, prompt, 2, out);
        if (r != WEIR_CLI_LINE_ERROR)
            return r;
        weir_cli_line_free(*ed); /* the terminal refused raw mode: read plainly */
        *ed = NULL;
    }
    fputs(prompt, stderr);
    size_t cap = 0;
    ssize_t n = getline(out, &cap, stdin);
    if (n < 0) {
        free(*out);
        *out = NULL;
        fputc('\n', stderr);
        return WEIR_CLI_LINE_EOF;
    }
    while (n > 0 && ((*out)[n - 1] == '\n' || (*out)[n - 1] == '\r'))
        (*out)[--n] = '\0';
    return WEIR_CLI_LINE_OK;
}

/* The REPL: 0 when the user quits (/quit, Ctrl-D, Ctrl-C twice while
 * idle), else the I/O error or the signal that ended it.  A failed turn is
 * reported and the next prompt follows. */
static int repl(weir_agent *agent, run_state *st) {
    weir_cli_line *ed = weir_cli_line_new(STDIN_FILENO, STDERR_FILENO);
    const char *prompt = st->color ? "\033[1m>\033[0m " : "> ";
    fputs("weir: /help lists the commands; /quit or Ctrl-D quits\n", stderr);
    int rc = WEIR_EXIT_OK;
    atomic_store(&idle_ctrl_c, 0);
    for (;;) {
        char *line = NULL;
        int r = repl_read(&ed, prompt, &line);
        if (r == WEIR_CLI_LINE_EOF)
            break;
        if (r == WEIR_CLI_LINE_INTERRUPT) {
            if (atomic_fetch_add(&idle_ctrl_c, 1) > 0)
                break; /* a second Ctrl-C while idle: quit */
            fputs("weir: press Ctrl-C again or type /quit to quit\n", stderr);
            continue;
        }
        atomic_store(&idle_ctrl_c, 0);
        if (blank(line)) {
            free(line);
            continue;
        }
        weir_cli_line_history_add(ed, line);
        const char *cmd = line[0] == '/' && line[1] != '/' ? line + 1 : NULL;
        size_t clen = cmd ? strcspn(cmd, " \t") : 0;
        const char *arg = cmd ? cmd + clen + strspn(cmd + clen, " \t") : NULL;
        bool quit = false;
        if (!cmd) {
            rc = run_prompt(agent, st, line[0] == '/' ? line + 1 : line);
        } else if (clen == 4 && !strncmp(cmd, "quit", 4)) {
            quit = true;
        } else if (clen == 4 && !strncmp(cmd, "help", 4)) {
            fputs(repl_help, stderr);
        } else if (clen == 7 && !strncmp(cmd, "session", 7)) {
            weir_cli_say(NULL, NULL, "weir: session %s (%s)", weir_agent_id(agent),
                         weir_agent_log_path(agent));
        } else if (clen == 7 && !strncmp(cmd, "compact", 7)) {
            rc = repl_compact(agent, arg);
        } else {
            weir_cli_say(NULL, NULL, "weir: unknown command /%.*s (/help lists them)", (int)clen,
                         cmd);
        }
        free(line);
        if (quit || rc > WEIR_EXIT_FAIL)
            break; /* /quit, an I/O error, or a signal that quits */
    }
    weir_cli_line_free(ed);
    return rc > WEIR_EXIT_FAIL ? rc : WEIR_EXIT_OK;
}

/* All of stdin as one prompt (malloc'd), or NULL. */
static char *read_stdin(void) {
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, stdin)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    if (!buf)
        return NULL;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    buf[len] = '\0';
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Resuming: the conversation so far, and the deployment it was created with */
/* ------------------------------------------------------------------------ */

#define RECAP_PROMPTS 3   /* the REPL shows the turns of the last this many prompts */
#define RECAP_CHARS 160   /* each line cut to about this many bytes */

/* One recap line on stderr: "  WHO: TEXT" ("  WHO TEXT" when `who` ends
 * in a tool's name), the text on one line and cut. */
static void recap_line(const run_state *st, const char *who, bool tool, const char *text) {
    char cut[RECAP_CHARS + 8];
    size_t n = strlen(text);
    bool more = n > RECAP_CHARS;
    if (more) {
        n = RECAP_CHARS;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--; /* never inside a UTF-8 sequence */
    }
    snprintf(cut, sizeof cut, "%.*s%s", (int)n, text, more ? "\xe2\x80\xa6" : "");
    weir_cli_say(sgr(st, SGR_DIM), sgr(st, SGR_OFF), "  %s%s %s", who, tool ? "" : ":", cut);
}

/*
 * The REPL on a session that has turns: the last RECAP_PROMPTS prompts and
 * what answered them, one compact line each on stderr ("  user: ...",
 * "  assistant: ...", "  assistant -> TOOL ARGS"), from the model-visible
 * messages (a compacted part shows as its summary).
 */
static void recap(const run_state *st, weir_agent *agent) {
    json_t *msgs = weir_agent_messages(agent);
    size_t n = json_array_size(msgs), from = n, prompts = 0, i, j;
    const json_t *m, *b;
    for (i = n; i-- > 0 && prompts < RECAP_PROMPTS;) {
        const char *role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
        if (role && !strcmp(role, "user")) {
            prompts++;
            from = i;
        }
    }
    if (!prompts) {
        json_decref(msgs);
        return;
    }
    weir_cli_say(NULL, NULL, "weir: the conversation so far (the last %zu prompt%s; `weir log %s` "
                             "prints it all):",
                 prompts, prompts == 1 ? "" : "s", weir_agent_id(agent));
    for (i = from; i < n; i++) {
        m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role || (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0))
            continue; /* tool results and system messages: the answer says enough */
        const json_t *content = json_object_get(m, "content");
        if (json_is_string(content))
            recap_line(st, role, false, json_string_value(content));
        json_array_foreach(content, j, b) {
            const char *type = str_or(json_object_get(b, "type"), "");
            if (!strcmp(type, "text")) {
                recap_line(st, role, false, str_or(json_object_get(b, "text"), ""));
            } else if (!strcmp(type, "tool_call")) {
                char who[160];
                char name[112];
                snprintf(who, sizeof who, "%s -> %s", role,
                         weir_cli_esc(name, sizeof name, str_or(json_object_get(b, "name"), "?")));
                recap_line(st, who, true, str_or(json_object_get(b, "arguments"), ""));
            }
        }
    }
    json_decref(msgs);
}

/* "-c a.json -c b.json", or "the built-in deployment" for no files, into buf. */
static const char *files_text(const json_t *files, char *buf, size_t size) {
    size_t len = 0, i;
    const json_t *f;
    buf[0] = '\0';
    json_array_foreach(files, i, f) {
        if (len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s-c %s", i ? " " : "",
                                    str_or(f, "?"));
    }
    if (!len)
        snprintf(buf, size, "the built-in deployment");
    return buf;
}

/* The members of array `a` (strings) that `b` lacks, joined with ", ". */
static const char *missing(const json_t *a, const json_t *b, char *buf, size_t size) {
    size_t len = 0, i, j;
    const json_t *x, *y;
    buf[0] = '\0';
    json_array_foreach(a, i, x) {
        bool found = false;
        json_array_foreach(b, j, y) found = found || json_equal(x, y);
        if (!found && len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", str_or(x, "?"));
    }
    return buf;
}

/* Whether the -c files of headers `a` and `b` are the same files: each
 * pair names the same path once a relative one is taken from the header's
 * cwd (`default` is itself). */
static bool same_files(const json_t *a, const json_t *b) {
    const json_t *fa = json_object_get(json_object_get(a, "deployment"), "files");
    const json_t *fb = json_object_get(json_object_get(b, "deployment"), "files");
    if (!json_is_array(fa) || !json_is_array(fb) || json_array_size(fa) != json_array_size(fb))
        return false;
    const char *ca = str_or(json_object_get(a, "cwd"), ""), *cb = str_or(json_object_get(b, "cwd"), "");
    for (size_t i = 0; i < json_array_size(fa); i++) {
        const char *x = str_or(json_array_get(fa, i), ""), *y = str_or(json_array_get(fb, i), "");
        bool xabs = x[0] == '/' || !strcmp(x, WEIR_CONFIG_DEFAULT_NAME);
        bool yabs = y[0] == '/' || !strcmp(y, WEIR_CONFIG_DEFAULT_NAME);
        char px[4096], py[4096];
        snprintf(px, sizeof px, "%s%s%s", xabs ? "" : ca, xabs ? "" : "/", x);
        snprintf(py, sizeof py, "%s%s%s", yabs ? "" : cb, yabs ? "" : "/", y);
        if (strcmp(px, py) != 0)
            return false;
    }
    return true;
}

/*
 * Say on stderr, before any turn, how this run's deployment differs from
 * the one session `id` recorded when it was created (its session/start
 * header): the -c files, the provider and model, the plugin rows, the
 * config's hash.  Nothing when they agree, or when the session recorded
 * none (an older weir's log).
 */
static void deployment_diff(const char *id, const json_t *was, const json_t *now) {
    const json_t *dw = json_object_get(was, "deployment"), *dn = json_object_get(now, "deployment");
    if (!json_is_object(dw) || !json_is_object(dn))
        return;
    const json_t *hw = json_object_get(dw, "config_hash"), *hn = json_object_get(dn, "config_hash");
    bool same = same_files(was, now);
    if (same && json_equal(hw, hn))
        return;
    char fw[1024], fn[1024];
    files_text(json_object_get(dw, "files"), fw, sizeof fw);
    files_text(json_object_get(dn, "files"), fn, sizeof fn);
    const char *cwd = str_or(json_object_get(was, "cwd"), NULL);
    if (same)
        weir_cli_say(NULL, NULL,
                     "weir: session %s was created with the same files (%s%s%s), but the "
                     "deployment they compose has changed since",
                     id, fw, cwd ? ", in " : "", cwd ? cwd : "");
    else
        weir_cli_say(NULL, NULL, "weir: session %s was created with %s%s%s%s; this run uses %s",
                     id, fw, cwd ? " (in " : "", cwd ? cwd : "", cwd ? ")" : "", fn);
    cwd = NULL;
    static const char *const keys[] = {"provider", "model"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *a = json_object_get(dw, keys[i]), *b = json_object_get(dn, keys[i]);
        if (!json_equal(a, b) && (a || b))
            weir_cli_say(NULL, NULL, "weir:   %s: %s -> %s", keys[i], str_or(a, "(none)"),
                         str_or(b, "(none)"));
    }
    char gone[512], added[512];
    missing(json_object_get(dw, "rows"), json_object_get(dn, "rows"), gone, sizeof gone);
    missing(json_object_get(dn, "rows"), json_object_get(dw, "rows"), added, sizeof added);
    if (gone[0])
        weir_cli_say(NULL, NULL, "weir:   plugin rows no longer here: %s (their tools are gone)",
                     gone);
    if (added[0])
        weir_cli_say(NULL, NULL, "weir:   plugin rows added: %s", added);
    if (!json_equal(hw, hn))
        weir_cli_say(NULL, NULL, "weir:   config hash: %s -> %s", str_or(hw, "?"), str_or(hn, "?"));
    if (!same)
        weir_cli_say(NULL, NULL,
                     "weir: hint: `weir resume --same-config %s` reuses the files it was created "
                     "with",
                     id);
}

/* The session/start header session `path` recorded (a log file when
 * `config` keeps files; else the session of that name in `host`'s store),
 * or NULL (none, or unreadable: the open says why).  New reference. */
static json_t *recorded_header(const json_t *config, const weir_host *host, const char *path) {
    const char *store =
        json_string_value(json_object_get(json_object_get(config, "session"), "store"));
    weir_error err;
    weir_error_clear(&err);
    json_t *header = NULL;
    if (!store || !strcmp(store, "file")) {
        json_t *sum = NULL;
        if (weir_log_summary(path, &sum, &err) == WEIR_OK)
            header = json_incref(json_object_get(sum, "header"));
        json_decref(sum);
        return header;
    }
    /* another store: the session's id is the log name's stem */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    char id[256];
    snprintf(id, sizeof id, "%.*s", (int)(n > 6 ? n - 6 : n), base);
    json_t *events = NULL;
    if (weir_host_log_events(host, id, &events, &err) == WEIR_OK) {
        const json_t *first = json_array_get(events, 0);
        if (!strcmp(str_or(json_object_get(first, "type"), ""), "session/start"))
            header = json_incref(json_object_get(first, "data"));
    }
    json_decref(events);
    return header;
}

/*
 * --same-config: the -c files the session recorded, into *files (strings
 * borrowed from `header` or malloc'd in `owned`, which the caller frees): a
 * relative file is taken from the directory the session was created in.
 * Usage error when it recorded none.
 */
static int recorded_files(const char *target, const json_t *header, weir_cli_files *files,
                          char **owned) {
    const json_t *list = json_object_get(json_object_get(header, "deployment"), "files");
    const char *cwd = json_string_value(json_object_get(header, "cwd"));
    if (!json_is_array(list)) {
        weir_cli_say(NULL, NULL,
                     "weir resume: --same-config: session %s records no deployment (an older "
                     "weir created it); give its -c files",
                     target);
        return WEIR_EXIT_USAGE;
    }
    files->n = 0;
    size_t i;
    const json_t *f;
    json_array_foreach(list, i, f) {
        const char *name = json_string_value(f);
        if (!name || weir_cli_add_file(files, "weir resume", (char *)(uintptr_t)name) != WEIR_EXIT_OK)
            return WEIR_EXIT_USAGE;
        if (name[0] != '/' && strcmp(name, WEIR_CONFIG_DEFAULT_NAME) != 0 && cwd) {
            if (asprintf(&owned[files->n - 1], "%s/%s", cwd, name) < 0) {
                owned[files->n - 1] = NULL;
                fprintf(stderr, "weir: out of memory\n");
                return WEIR_EXIT_FAIL;
            }
            files->files[files->n - 1] = owned[files->n - 1];
        }
    }
    return WEIR_EXIT_OK;
}

/*
 * --same-config: find the session as the given -c files say (`target`,
 * `kind`: *at, its log path, malloc'd), read the deployment it recorded,
 * and make *files those files (recorded_files).  The host that reads a
 * store's session says nothing of the demo provider.  Exit code.
 */
static int same_config_files(weir_cli_files *files, const char *target, weir_cli_target kind,
                             char **at, char **owned) {
    *at = NULL;
    json_t *config = NULL;
    int rc = weir_cli_compose(files->files, files->n, &config);
    if (rc != WEIR_EXIT_OK)
        return rc;
    char *newest = NULL;
    if (kind == WEIR_CLI_LAST && (rc = weir_cli_session_newest(config, &newest)) == WEIR_EXIT_OK) {
        target = newest;
        kind = WEIR_CLI_ID;
    }
    if (rc == WEIR_EXIT_OK)
        rc = weir_cli_session_path(config, target, kind, at);
    free(newest);
    const char *store =
        json_string_value(json_object_get(json_object_get(config, "session"), "store"));
    weir_host *host = NULL;
    json_t *header = NULL;
    if (rc == WEIR_EXIT_OK && (!store || !strcmp(store, "file"))) {
        header = recorded_header(config, NULL, *at); /* a log file: no host needed */
        json_decref(config);
    } else if (rc == WEIR_EXIT_OK && (rc = weir_cli_host(config, false, &host)) == WEIR_EXIT_OK) {
        header = recorded_header(weir_host_config(host), host, *at); /* config went to the host */
    } else if (rc != WEIR_EXIT_OK) {
        json_decref(config);
    }
    weir_host_destroy(host);
    if (rc == WEIR_EXIT_OK) {
        weir_cli_files again = {0};
        rc = recorded_files(*at, header, &again, owned);
        for (size_t i = 0; rc == WEIR_EXIT_OK && i < again.n; i++)
            if (!owned[i] && !(again.files[i] = owned[i] = strdup(again.files[i]))) {
                fprintf(stderr, "weir: out of memory\n"); /* `header` goes: own every name */
                rc = WEIR_EXIT_FAIL;
            }
        if (rc == WEIR_EXIT_OK)
            *files = again;
    }
    json_decref(header);
    if (rc != WEIR_EXIT_OK) {
        free(*at);
        *at = NULL;
    }
    return rc;
}

static const char run_help[] =
    "usage: weir run [-c FILE]... [-s SESSION_ID | --log PATH] [--json]\n"
    "                [-m MODEL] [--provider ID] [PROMPT]\n"
    "\n"
    "Send PROMPT to the agent and stream the answer to stdout; tool activity\n"
    "and errors go to stderr, and so does the session first: \"weir: session ID\n"
    "(LOG)\" (`weir log ID`, `weir resume ID`, `weir compact ID` take it).\n"
    "After each turn stderr has its token usage, and its cost when the model's\n"
    "price is known: \"usage: in 12,345 \xc2\xb7 cached 10,000 \xc2\xb7 written 2,000 \xc2\xb7 out 456 \xc2\xb7\n"
    "$0.0123\" (uncached input, cache read, cache write, output tokens).\n"
    "Without PROMPT: a REPL (one message per line; /help, /session, /compact,\n"
    "/quit) when stdin is a terminal, else all of stdin is the prompt; an empty\n"
    "prompt is a usage error.  A new session records the deployment it was\n"
    "created with (the -c files, a hash of the config, the cwd); one in which\n"
    "nothing reached the model (a config error, no provider) is not kept.\n"
    "\n"
    "  -c, --config FILE   deployment config (repeat to overlay; without -c, or with\n"
    "                      -c default first: the built-in deployment)\n"
    "  -s, --session ID    session id, [A-Za-z0-9][A-Za-z0-9._-]{0,127} (the log\n"
    "                      is <session.dir>/<ID>.jsonl); an existing session is\n"
    "                      resumed; one writer at a time (a live one: exit 4)\n"
    "      --log PATH      the session log file itself (instead of -s)\n"
    "      --json          print every event as one JSON line on stdout, the\n"
    "                      live {\"type\":\"session\",\"data\":{session_id, log}} first\n"
    "  -m, --model MODEL   the agent's model (agent.model) for this run\n"
    "      --provider ID   the agent's provider: the id of a plugin row of the\n"
    "                      deployment (agent.provider), for this run\n"
    "\n"
    "Before the first turn stderr names the route (not with --json):\n"
    "\"weir: model gpt-4o-mini, provider openai (provider-openai at\n"
    "https://api.openai.com/v1)\".\n"
    "\n"
    "Ctrl-C (SIGINT) cancels the running turn (cause disposed; stderr says\n"
    "\"weir: interrupted by Ctrl-C\") and quits (exit 130) once it is closed;\n"
    "in the REPL it cancels the turn only (cause user),\n"
    "and Ctrl-C twice while no turn runs quits (exit 0, as /quit and Ctrl-D).\n"
    "SIGTERM (SIGHUP) cancels the running turn (cause disposed) and exits 143\n"
    "(129).  A second signal of these three while the cancelled turn closes\n"
    "quits at once (exit 128 + its number), the turn left open in the log for\n"
    "the next open to close as interrupted.  Colour on a terminal only;\n"
    "NO_COLOR turns it off.\n"
    "\n"
    "Waits: a provider stream silent for 300 s fails its attempt (the\n"
    "provider row's stream_idle_timeout_ms; the retry plugin may try again),\n"
    "and a hooks-shell hook may run 600 s (the row's timeout; 30 s for\n"
    "UserPromptSubmit) before it is killed.  On a terminal the status line on\n"
    "stderr says what the turn waits for, for how long, and the limit:\n"
    "\"weir: waiting for the model... 42 s (stream idle limit 300 s)\",\n"
    "\"weir: waiting for tool Bash and its hooks... 12 s (hook timeout 600 s)\".\n"
    "exit codes: 0 ok, 1 the turn failed, was cancelled or was blocked by a\n"
    "            plugin, 2 usage (nothing is written),\n"
    "            3 configuration or plugin error, 4 I/O error (also a session\n"
    "            log that cannot be written), 129 SIGHUP, 130 SIGINT, 143 SIGTERM\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY WEIR_CLI_HELP_ENV_COLOR;

static const char resume_help[] =
    "usage: weir resume [-c FILE]... [--same-config] [--json] [-m MODEL] [--provider ID]\n"
    "                   ID|FILE|--last [PROMPT]\n"
    "\n"
    "Reopen session ID (or a log file path).  A turn left open by a crash is\n"
    "closed as interrupted.  With PROMPT (or a REPL on a terminal) the\n"
    "conversation goes on; otherwise the session is only repaired.  The REPL\n"
    "first shows the last prompts and their answers.  ID may be the start of\n"
    "one session's id (a start several share is an error that lists them).\n"
    "A session remembers the deployment it was created with: resuming with\n"
    "another says what differs (files, provider, model, plugin rows, config)\n"
    "on stderr before the turn.\n"
    "\n"
    "  -c, --config FILE   deployment config (repeat to overlay; without -c, or with\n"
    "                      -c default first: the built-in deployment)\n"
    "      --last          the newest session of the session folder, instead of ID\n"
    "      --same-config   open it with the -c files it was created with (a relative\n"
    "                      one from the directory it was created in)\n"
    "      --json          print every event as one JSON line on stdout\n"
    "  -m, --model MODEL   the agent's model (agent.model) from now on\n"
    "      --provider ID   the agent's provider (a plugin row id) from now on\n"
    "\n"
    "SIGINT, SIGTERM and SIGHUP cancel the running turn and quit, as for weir\n"
    "run; a second one quits at once.\n"
    "exit codes: 0 ok, 1 the turn failed or was cancelled, 2 usage (also an\n"
    "            ambiguous ID prefix, an empty PROMPT), 3 configuration or plugin\n"
    "            error, 4 I/O error (no such session, a session log that cannot\n"
    "            be written), 129 SIGHUP, 130 SIGINT, 143 SIGTERM\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY WEIR_CLI_HELP_ENV_COLOR;

/*
 * One stderr line naming the route the turns take: "weir: model M, provider
 * P (PLUGIN at BASE_URL)" (the base URL without userinfo and query, which
 * may carry secrets; none when the row has no base_url).
 */
static void route_say(const json_t *config) {
    const json_t *agent = json_object_get(config, "agent");
    const char *provider = json_string_value(json_object_get(agent, "provider"));
    const char *model = json_string_value(json_object_get(agent, "model"));
    const char *plugin = NULL, *url = NULL;
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(config, "plugins"), i, row) {
        const char *id = json_string_value(json_object_get(row, "id"));
        if (provider && id && !strcmp(id, provider)) {
            plugin = json_string_value(json_object_get(row, "plugin"));
            url = json_string_value(json_object_get(json_object_get(row, "config"), "base_url"));
        }
    }
    if (plugin) { /* a path names its file only */
        const char *slash = strrchr(plugin, '/');
        plugin = slash ? slash + 1 : plugin;
    }
    char where[320] = "";
    if (url && *url) {
        const char *host = strstr(url, "://");
        host = host ? host + 3 : url;
        size_t hostlen = strcspn(host, "/?#");
        const char *at = memchr(host, '@', hostlen);
        const char *rest = at ? at + 1 : host;
        snprintf(where, sizeof where, " at %.*s%.*s", (int)(host - url), url,
                 (int)strcspn(rest, "?#"), rest);
    }
    weir_cli_say(NULL, NULL, "weir: model %s, provider %s (%s%s)", model ? model : "(none)",
                 provider ? provider : "(none)", plugin ? plugin : "no such plugin row", where);
}

static int run_common(int argc, char **argv, bool resume) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"session", required_argument, NULL, 's'},
                                              {"log", required_argument, NULL, 'L'},
                                              {"json", no_argument, NULL, 'j'},
                                              {"model", required_argument, NULL, 'm'},
                                              {"provider", required_argument, NULL, 'P'},
                                              {"last", no_argument, NULL, 'l'},
                                              {"same-config", no_argument, NULL, 'S'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    const char *session = NULL, *log = NULL;
    const char *cmd = resume ? "weir resume" : "weir run";
    bool last = false, same_config = false;
    run_state st = {0};
    int ch;
    while ((ch = getopt_long(argc, argv, resume ? "c:m:h" : "c:s:m:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'm':
        case 'P':
            if (!*optarg || blank(optarg)) {
                fprintf(stderr, "%s: --%s: expected a non-empty %s\n", cmd,
                        ch == 'm' ? "model" : "provider", ch == 'm' ? "model name" : "row id");
                return WEIR_EXIT_USAGE;
            }
            *(ch == 'm' ? &files.model : &files.provider) = optarg;
            break;
        case 'c':
            if (weir_cli_add_file(&files, "weir", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 's':
        case 'L':
            if (resume) {
                fputs(resume_help, stderr);
                return WEIR_EXIT_USAGE;
            }
            if (session || log) {
                fprintf(stderr, "weir run: give one of -s ID and --log PATH\n");
                return WEIR_EXIT_USAGE;
            }
            *(ch == 's' ? &session : &log) = optarg;
            break;
        case 'j':
            st.json = true;
            break;
        case 'l':
        case 'S':
            if (!resume) {
                fputs(run_help, stderr);
                return WEIR_EXIT_USAGE;
            }
            *(ch == 'l' ? &last : &same_config) = true;
            break;
        case 'h':
            fputs(resume ? resume_help : run_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(resume ? resume_help : run_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    int rest = argc - optind;
    int ids = resume && !last; /* the arguments before PROMPT: resume's ID */
    if (resume && rest < ids) {
        fprintf(stderr, "weir resume: missing session ID (or --last)\n\n%s", resume_help);
        return WEIR_EXIT_USAGE;
    }
    if (rest > ids + 1) {
        fprintf(stderr, "weir %s: too many arguments (quote the prompt)\n",
                resume ? "resume" : "run");
        return WEIR_EXIT_USAGE;
    }
    const char *target = resume ? (last ? NULL : argv[optind]) : session ? session : log;
    weir_cli_target kind = resume ? (last ? WEIR_CLI_LAST : WEIR_CLI_ID_OR_PATH)
                           : session ? WEIR_CLI_ID
                                     : WEIR_CLI_PATH;
    const char *prompt = rest > ids ? argv[argc - 1] : NULL;
    /* an empty message is refused before anything opens (a provider's API
     * refuses a request without one): a usage error writes nothing */
    if (prompt && blank(prompt)) {
        fprintf(stderr, "%s: the prompt is empty (give some text, or no PROMPT for a REPL)\n",
                cmd);
        return WEIR_EXIT_USAGE;
    }
    /* a piped prompt is read before anything opens: a usage error writes nothing */
    char *piped = NULL;
    if (!prompt && !resume && !isatty(STDIN_FILENO)) {
        piped = read_stdin();
        if (!piped || blank(piped)) {
            free(piped);
            fprintf(stderr, "weir run: no prompt (give PROMPT or pipe it on stdin)\n");
            return WEIR_EXIT_USAGE;
        }
        prompt = piped;
    }

    char *owned[64] = {0}; /* --same-config: the recorded files made absolute */
    char *at = NULL;       /* --same-config: the session's log, found as -c says */
    if (same_config) {
        int rc = same_config_files(&files, target, kind, &at, owned);
        if (rc != WEIR_EXIT_OK) {
            for (size_t i = 0; i < 64; i++)
                free(owned[i]);
            free(piped);
            return rc;
        }
        target = at; /* the same log, under the deployment it recorded */
        kind = WEIR_CLI_PATH;
    }
    char *path = NULL;
    weir_host *host = NULL;
    int rc = weir_cli_session_host(&files, target, kind, resume ? "weir resume" : NULL, &path,
                                   &host);
    free(at);
    if (rc != WEIR_EXIT_OK) {
        for (size_t i = 0; i < 64; i++)
            free(owned[i]);
        free(piped);
        return rc;
    }
    struct stat sb;
    bool existed = path && stat(path, &sb) == 0; /* else this run creates the log */
    /* the deployment the session was created with (its session/start) */
    json_t *was = path ? recorded_header(weir_host_config(host), host, path) : NULL;
    json_t *header = NULL; /* this run's deployment: a new session records it */
    if ((rc = weir_cli_session_header(&files, weir_host_config(host), &header)) != WEIR_EXIT_OK) {
        for (size_t i = 0; i < 64; i++)
            free(owned[i]);
        json_decref(was);
        weir_host_destroy(host);
        free(path);
        free(piped);
        return rc;
    }
    char *created = NULL;                        /* the log this run created */
    char created_id[160] = "";                   /* and its session's id */
    const char *nc = getenv("NO_COLOR"), *term = getenv("TERM");
    st.color = !st.json && isatty(STDERR_FILENO) && !(nc && *nc) && !(term && !strcmp(term, "dumb"));
    st.default_used = weir_cli_default_used(&files);
    st.files = &files;
    st.no_provider = !json_is_string(
        json_object_get(json_object_get(weir_host_config(host), "agent"), "provider"));
    st.pending = st.json ? json_array() : NULL;
    st.calls = json_object();
    st.held = json_array();
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.cv, NULL);
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_file = path;
    opts.on_event = on_event;
    opts.user_data = &st;
    opts.session_header = header;
    weir_agent *agent = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (!st.json) /* warnings at a line boundary, never inside a streamed line */
        weir_set_warn_handler(on_warn, &st);
    if (weir_agent_open(host, &opts, &agent, &err) != WEIR_OK) {
        rc = weir_cli_fail("open session", &err);
    } else {
        st.agent = agent;
        st.status = !st.json && isatty(STDERR_FILENO);
        if (st.status) { /* the wait line's redraws; without the thread, no seconds */
            wait_limits(&st, weir_host_config(host));
            pthread_mutex_lock(&st.mu);
            ticker_start(&st);
            pthread_mutex_unlock(&st.mu);
        }
        if (!existed) {
            created = strdup(weir_agent_log_path(agent));
            snprintf(created_id, sizeof created_id, "%s", weir_agent_id(agent));
        }
        if (!st.json) {
            weir_cli_say(NULL, NULL, "weir: session %s (%s)", weir_agent_id(agent),
                         weir_agent_log_path(agent));
            route_say(weir_host_config(host));
            if (was) /* before the turn: what this deployment changes */
                deployment_diff(weir_agent_id(agent), was, header);
            if (existed && !prompt && isatty(STDIN_FILENO))
                recap(&st, agent);
        } else { /* the live session event first, then what opening logged */
            json_t *ev = json_pack("{s:s, s:I, s:{s:s, s:s}}", "type", "session", "time",
                                   (json_int_t)wall_ms(), "data", "session_id",
                                   weir_agent_id(agent), "log", weir_agent_log_path(agent));
            print_json(ev);
            json_decref(ev);
            json_t *held = st.pending;
            st.pending = NULL;
            size_t i;
            const json_t *e;
            json_array_foreach(held, i, e) print_json(e);
            json_decref(held);
            if (was) /* on stderr, as off --json */
                deployment_diff(weir_agent_id(agent), was, header);
        }
        /* a shared store's queued input (weir send) goes first, when this
         * run goes on to run turns (docs/fleet.md) */
        weir_error ierr;
        weir_error_clear(&ierr);
        if ((prompt || isatty(STDIN_FILENO)) &&
            weir_agent_take_store_inbox(agent, NULL, &ierr) != WEIR_OK)
            weir_cli_say(NULL, NULL,
                         "weir: session %s: the store's queued input stays queued: %s",
                         weir_agent_id(agent), ierr.text);
        pthread_t th;
        bool sig = sig_start(agent, !prompt && isatty(STDIN_FILENO), &th);
        if (prompt) {
            rc = run_prompt(agent, &st, prompt);
        } else if (isatty(STDIN_FILENO)) {
            rc = repl(agent, &st);
        } else {
            rc = WEIR_EXIT_OK; /* resume without input: the open repaired the log */
        }
        if (sig)
            sig_stop(th);
        wait_stop(&st);
        weir_agent_close(agent);
        countdown_end(&st);
    }
    weir_set_warn_handler(NULL, NULL);
    end_text_line(&st); /* the warnings still held, if any */
    /* A session this run created in which nothing reached a model goes
     * again: a refused prompt, a turn that failed before its first request
     * (no provider, a hook's error), one cancelled before it.  A turn a
     * plugin blocked stays: its decision is on record. */
    if (created && !st.requested && !st.blocked && stat(created, &sb) == 0 &&
        S_ISREG(sb.st_mode) && unlink(created) == 0 && !st.json)
        weir_cli_say(NULL, NULL, "weir: session %s not kept: nothing reached the model",
                     created_id);
    free(created);
    for (size_t i = 0; i < 64; i++)
        free(owned[i]);
    json_decref(was);
    json_decref(header);
    free(piped);
    json_decref(st.pending);
    json_decref(st.held);
    pthread_cond_destroy(&st.cv);
    pthread_mutex_destroy(&st.mu);
    json_decref(st.calls);
    weir_host_destroy(host);
    free(path);
    return rc;
}

int weir_cmd_run(int argc, char **argv) { return run_common(argc, argv, false); }

int weir_cmd_resume(int argc, char **argv) { return run_common(argc, argv, true); }
