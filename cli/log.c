/*
 * cli/log.c - `weir log ID|FILE [--json|--derive|--check]`: print a
 * session log as a readable transcript, its events as JSON lines, its
 * derived messages, or its check report.
 * Every mode reads through the one log reader (weir_log_derive,
 * weir_log_check, weir_log_each): a log it refuses is reported, not printed
 * (exit 1).  A torn last line is skipped.  A log file is read as a stream:
 * the transcript, --json and --why hold an event at a time (the transcript
 * also the tool names by call id, --why one turn's decisions), never the
 * file.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* ------------------------------------------------------------------------ */
/* Transcript                                                                */
/* ------------------------------------------------------------------------ */

static const char *str_or(const json_t *v, const char *dflt) {
    const char *s = json_string_value(v);
    return s ? s : dflt;
}

static const json_t *get(const json_t *o, const char *k) { return json_object_get(o, k); }

/* Print the content blocks of a message after `who: `. */
static void print_message(FILE *out, const char *who, const json_t *message, const char *suffix) {
    size_t i;
    const json_t *b;
    bool any = false;
    json_array_foreach(get(message, "content"), i, b) {
        const char *type = str_or(get(b, "type"), "");
        if (!strcmp(type, "text")) {
            fprintf(out, "%s: %s%s\n", who, str_or(get(b, "text"), ""), suffix);
        } else if (!strcmp(type, "reasoning")) {
            fprintf(out, "%s (reasoning): %s\n", who, str_or(get(b, "text"), ""));
        } else if (!strcmp(type, "tool_call")) {
            fprintf(out, "%s -> %s %s\n", who, str_or(get(b, "name"), "?"),
                    str_or(get(b, "arguments"), ""));
        } else if (!strcmp(type, "image")) {
            fprintf(out, "%s: [image %s]\n", who, str_or(get(b, "media_type"), ""));
        } else {
            continue;
        }
        any = true;
    }
    if (!any)
        fprintf(out, "%s: (no content)%s\n", who, suffix);
}

/* The usage of the transcript's turn and of the whole session. */
typedef struct usage_totals {
    weir_cli_usage turn, session;
    long long turns; /* turns with usage */
} usage_totals;

/* "usage: ..." for the turn that just ended, when it reported any. */
static void print_turn_usage(FILE *out, usage_totals *u) {
    char line[256];
    if (u->turn.any)
        fprintf(out, "usage: %s\n", weir_cli_usage_line(line, sizeof line, &u->turn));
    weir_cli_usage_sum(&u->session, &u->turn);
    u->turns += u->turn.any;
    memset(&u->turn, 0, sizeof u->turn);
}

/* The session's totals, after the last event (a turn left open adds its part). */
static void print_total_usage(FILE *out, usage_totals *u) {
    print_turn_usage(out, u);
    char line[256];
    if (u->session.any)
        fprintf(out, "total usage (%lld turn%s): %s\n", u->turns, u->turns == 1 ? "" : "s",
                weir_cli_usage_line(line, sizeof line, &u->session));
}

/* One line of the transcript about what happened besides the conversation,
 * "(...)", escaped as a whole (its text comes from plugins and servers). */
static void note(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(FILE *out, const char *fmt, ...) {
    char msg[2048], esc[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(out, "(%s)\n", weir_cli_esc(esc, sizeof esc, msg));
}

/* `v` as compact JSON, cut to about 100 bytes on a character boundary
 * ("…" after a cut), into `buf`. */
static const char *brief_json(char *buf, size_t size, const json_t *v) {
    char *s = weir_cli_json_line(v);
    const char *t = s ? s : "?";
    size_t len = strlen(t), n = len < 100 ? len : 100;
    while (n < len && n > 0 && ((unsigned char)t[n] & 0xC0) == 0x80)
        n--;
    snprintf(buf, size, "%.*s%s", (int)n, t, n < len ? "\xe2\x80\xa6" : "");
    free(s);
    return buf;
}

static long long int_of(const json_t *o, const char *k) {
    return (long long)json_integer_value(json_object_get(o, k));
}

/*
 * A readable line for an event of weir or a shipped plugin that is not a
 * message (docs/cli.md, "weir log"); false when `type` is none of them.
 */
static bool print_known(FILE *out, const char *type, const json_t *d) {
    char a[32], b[32], c[32], j[256];
    const char *hook = str_or(get(d, "hook"), "?"), *plugin = str_or(get(d, "plugin"), "?"),
               *row = str_or(get(d, "row"), "?");
    const json_t *f = get(d, "failure");
    if (!strcmp(type, "compaction/start")) {
        if (get(d, "threshold"))
            note(out, "compacting (%s): %s tokens, over the threshold %s of %s",
                 str_or(get(d, "trigger"), "?"), weir_cli_grouped(a, sizeof a, int_of(d, "tokens")),
                 weir_cli_grouped(b, sizeof b, int_of(d, "threshold")),
                 weir_cli_grouped(c, sizeof c, int_of(d, "context_window")));
        else
            note(out, "compacting (%s): %s tokens", str_or(get(d, "trigger"), "?"),
                 weir_cli_grouped(a, sizeof a, int_of(d, "tokens")));
    } else if (!strcmp(type, "compaction/end")) {
        long long s = int_of(d, "summaries"), p = int_of(d, "pruned");
        if (json_is_true(get(d, "ok")))
            note(out, "compacted: %s \xe2\x86\x92 %s tokens (%lld summar%s, %lld pruned)",
                 weir_cli_grouped(a, sizeof a, int_of(d, "tokens_before")),
                 weir_cli_grouped(b, sizeof b, int_of(d, "tokens_after")), s, s == 1 ? "y" : "ies",
                 p);
        else
            note(out, "compaction failed: %s",
                 json_is_string(get(d, "error")) ? json_string_value(get(d, "error"))
                                                 : str_or(get(get(d, "error"), "message"), "?"));
    } else if (!strcmp(type, "compaction/summary")) {
        note(out, "compaction summary: %zu events, %s tokens \xe2\x86\x92 %s tokens (by %s/%s)",
             json_array_size(get(d, "shadowed_seqs")),
             weir_cli_grouped(a, sizeof a, int_of(d, "shadowed_tokens")),
             weir_cli_grouped(b, sizeof b, int_of(d, "summary_tokens")),
             str_or(get(d, "provider"), "?"), str_or(get(d, "model"), "?"));
    } else if (!strcmp(type, "compaction/prune")) {
        note(out, "compaction pruned the tool result at seq %lld: %s characters, %s \xe2\x86\x92 %s tokens",
             int_of(d, "seq"), weir_cli_grouped(a, sizeof a, int_of(d, "pruned_chars")),
             weir_cli_grouped(b, sizeof b, int_of(d, "shadowed_tokens")),
             weir_cli_grouped(c, sizeof c, int_of(d, "tokens_after")));
    } else if (!strcmp(type, "compaction/breaker")) {
        note(out, "compaction stopped for this turn (%s)", str_or(get(d, "reason"), "?"));
    } else if (!strcmp(type, "compaction/pinned-over-threshold")) {
        note(out, "compaction cannot help: %lld pinned messages (%s tokens) reach the threshold %s",
             int_of(d, "pinned_messages"), weir_cli_grouped(a, sizeof a, int_of(d, "pinned_tokens")),
             weir_cli_grouped(b, sizeof b, int_of(d, "threshold")));
    } else if (!strcmp(type, "hook/decision")) {
        if (get(d, "detail"))
            note(out, "hook %s: plugin %s (row %s) decided %s: %s", hook, plugin, row,
                 str_or(get(d, "decision"), "?"), brief_json(j, sizeof j, get(d, "detail")));
        else
            note(out, "hook %s: plugin %s (row %s) decided %s", hook, plugin, row,
                 str_or(get(d, "decision"), "?"));
    } else if (!strcmp(type, "hook/quarantined")) {
        note(out, "hook %s: plugin %s (row %s) passed over from now on after %lld failures: %s",
             hook, plugin, row, int_of(d, "failures"),
             json_is_string(get(d, "error")) ? json_string_value(get(d, "error"))
                                             : brief_json(j, sizeof j, get(d, "error")));
    } else if (!strcmp(type, "hook/slow")) {
        note(out, "hook %s: plugin %s (row %s) took %s ms (budget %lld ms)", hook, plugin, row,
             weir_cli_grouped(a, sizeof a, int_of(d, "latency_us") / 1000), int_of(d, "budget_ms"));
    } else if (!strcmp(type, "retry/wait") || !strcmp(type, "llm/retry")) {
        /* retry's events; llm/... is how the retry plugin of ABI 1.11 and
         * before named them: old logs read the same */
        note(out, "retrying in %.1f s (%s, retry %lld): %s",
             (double)int_of(d, "delay_ms") / 1000.0, str_or(get(f, "code"), "?"),
             int_of(d, "retry"), str_or(get(f, "message"), ""));
    } else if (!strcmp(type, "retry/started") || !strcmp(type, "llm/retry-started")) {
        note(out, "retry %lld started", int_of(d, "retry"));
    } else if (!strcmp(type, "retry/fallback") || !strcmp(type, "llm/fallback")) {
        note(out, "falling back from %s/%s to %s/%s (%s, %s)",
             str_or(get(get(d, "from"), "provider"), "?"), str_or(get(get(d, "from"), "model"), "?"),
             str_or(get(get(d, "to"), "provider"), "?"), str_or(get(get(d, "to"), "model"), "?"),
             str_or(get(f, "code"), "?"), str_or(get(d, "reason"), "?"));
    } else if (!strcmp(type, "retry/breaker") || !strcmp(type, "llm/breaker")) {
        note(out, "provider %s: circuit breaker %s (%lld consecutive failures)",
             str_or(get(d, "provider"), "?"), str_or(get(d, "state"), "?"), int_of(d, "failures"));
    } else if (!strcmp(type, "tool/rerun")) {
        note(out, "tool %s (call %s) runs again after a crash (attempt %lld)",
             str_or(get(d, "name"), "?"), str_or(get(d, "call_id"), "?"), int_of(d, "attempt"));
    } else if (!strcmp(type, "job/queued")) {
        note(out, "job %s: tool %s runs in the background", str_or(get(d, "job_id"), "?"),
             str_or(get(d, "tool"), "?"));
    } else if (!strcmp(type, "job/returned") || !strcmp(type, "job/failed")) {
        note(out, "job %s: tool %s %s", str_or(get(d, "job_id"), "?"), str_or(get(d, "tool"), "?"),
             !strcmp(type, "job/failed") ? "failed" : "returned");
    } else if (!strcmp(type, "job/cancelled")) {
        note(out, "job %s: tool %s cancelled (%s)", str_or(get(d, "job_id"), "?"),
             str_or(get(d, "tool"), "?"), str_or(get(d, "cause"), "?"));
    } else if (!strcmp(type, "log/checkpoint")) {
        note(out, "checkpoint: %s events, %lld turns before it",
             weir_cli_grouped(a, sizeof a, int_of(d, "events")), int_of(d, "turns"));
    } else if (!strcmp(type, "request/continuations-dropped")) {
        note(out, "the request to %s/%s leaves out %lld reasoning continuations %s",
             str_or(get(d, "provider"), "?"), str_or(get(d, "model"), "?"), int_of(d, "count"),
             brief_json(j, sizeof j, get(d, "reasons")));
    } else {
        return false;
    }
    return true;
}

/* The suffix of a message that replaces others (a compaction's summary, a
 * pruned tool result): " (replaces seq A)", " (replaces seq A-B)". */
static const char *replaced(char *buf, size_t size, const json_t *ev) {
    const json_t *op = get(ev, "surface_op");
    buf[0] = '\0';
    if (json_is_object(op)) {
        long long a = int_of(op, "start_seq"), b = int_of(op, "end_seq");
        if (a == b)
            snprintf(buf, size, " (replaces seq %lld)", a);
        else
            snprintf(buf, size, " (replaces seq %lld-%lld)", a, b);
    }
    return buf;
}

static void print_event(FILE *out, const json_t *ev, json_t *calls, usage_totals *u) {
    const char *type = str_or(get(ev, "type"), "");
    const json_t *d = get(ev, "data");
    if (!strcmp(type, "assistant/message") || !strcmp(type, "assistant/attempt"))
        weir_cli_usage_add(&u->turn, d);
    if (!strcmp(type, "turn/start")) {
        fprintf(out, "--- turn %lld\n", (long long)json_integer_value(get(d, "turn")));
    } else if (!strcmp(type, "turn/end")) {
        const json_t *r = get(d, "reason");
        const json_t *e = get(r, "error");
        fprintf(out, "--- turn %lld ended: %s", (long long)json_integer_value(get(d, "turn")),
                str_or(get(r, "kind"), "?"));
        char code[64], msg[1024]; /* plugin text: escaped, the line stays one */
        if (e)
            fprintf(out, " (%s: %s)", weir_cli_esc(code, sizeof code, str_or(get(e, "code"), "?")),
                    weir_cli_esc(msg, sizeof msg, str_or(get(e, "message"), "")));
        if (get(r, "cause"))
            fprintf(out, " (%s)", str_or(get(r, "cause"), ""));
        fputc('\n', out);
        print_turn_usage(out, u);
    } else if (!strcmp(type, "system/message")) {
        print_message(out, "system", get(d, "message"), "");
    } else if (!strcmp(type, "user/message")) {
        char who[64], rep_[48];
        snprintf(who, sizeof who, "user%s", replaced(rep_, sizeof rep_, ev));
        print_message(out, who, get(d, "message"), "");
    } else if (!strcmp(type, "assistant/message")) {
        print_message(out, "assistant", get(d, "message"),
                      json_is_true(get(d, "interrupted")) ? " [interrupted]" : "");
    } else if (!strcmp(type, "assistant/attempt")) {
        const json_t *f = get(d, "failure");
        char code[64], msg[1024];
        fprintf(out, "(attempt failed: %s: %s)\n",
                weir_cli_esc(code, sizeof code, str_or(get(f, "code"), "?")),
                weir_cli_esc(msg, sizeof msg, str_or(get(f, "message"), "")));
    } else if (!strcmp(type, "tool/call")) {
        json_object_set_new(calls, str_or(get(d, "call_id"), ""), json_deep_copy(get(d, "name")));
    } else if (!strcmp(type, "tool/result")) {
        const json_t *block = json_array_get(get(get(d, "message"), "content"), 0);
        const char *name = str_or(get(calls, str_or(get(block, "call_id"), "")), "?");
        char who[192], rep_[48];
        snprintf(who, sizeof who, "tool %s%s%s", name,
                 json_is_true(get(block, "is_error")) ? " (error)" : "",
                 replaced(rep_, sizeof rep_, ev));
        print_message(out, who, block, "");
    } else if (!strcmp(type, "request/header")) {
        const json_t *c = get(get(d, "header"), "config");
        fprintf(out, "(request: %s/%s, %s)\n", str_or(get(c, "provider"), "?"),
                str_or(get(c, "model"), "?"), str_or(get(d, "reason"), "?"));
    } else if (print_known(out, type, d)) {
        /* printed */
    } else if (strchr(type, '/') && strncmp(type, "step/", 5) && strncmp(type, "agent/", 6) &&
               strncmp(type, "request/", 8)) {
        /* another plugin's event: "NAME: REST {data}", its type's first
         * part being the plugin's name by convention */
        char j[256];
        const char *slash = strchr(type, '/');
        note(out, "%.*s: %s %s", (int)(slash - type), type, slash + 1, brief_json(j, sizeof j, d));
    }
}

/* The session read from the host's session.store instead of a log file
 * (session.store names a plugin row or "memory"), or NULL. */
static weir_host *src_host;
static const char *src_id;

/* Each event of the log in seq order, handed to `fn` (false: stop): a log
 * file through the streaming reader (weir_log_each: it holds the longest
 * line, never the file), a store's session through its collected events
 * (the store keeps no file to stream).  Nothing is handed from a log the
 * reader refuses. */
static int each_event(const char *path, weir_log_event_fn fn, void *ud, weir_error *err) {
    if (!src_host)
        return weir_log_each(path, fn, ud, err);
    json_t *events = NULL;
    int rc = weir_host_log_events(src_host, src_id, &events, err);
    size_t i;
    json_t *ev;
    if (rc == WEIR_OK)
        json_array_foreach(events, i, ev) if (!fn(ev, ud)) break;
    json_decref(events);
    return rc;
}

/* --json: the event as one line. */
static bool print_json(json_t *ev, void *ud) {
    (void)ud;
    json_dumpf(ev, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    return true;
}

/* The exit status of a failed read: 4 for I/O, else 1. */
static int read_failed(weir_error *err) {
    int rc = weir_cli_fail("log", err);
    return rc == WEIR_EXIT_IO ? rc : WEIR_EXIT_FAIL;
}

static int read_derive(const char *path, json_t **msgs, weir_error *err) {
    return src_host ? weir_host_log_derive(src_host, src_id, msgs, err)
                    : weir_log_derive(path, msgs, err);
}

static int read_check(const char *path, json_t **report, weir_error *err) {
    return src_host ? weir_host_log_check(src_host, src_id, report, err)
                    : weir_log_check(path, report, err);
}

/* What the transcript carries from event to event. */
typedef struct transcript_state {
    json_t *calls; /* call_id -> tool name of every tool/call so far (a result
                    * that replaces an older one names a call of another step) */
    usage_totals u;
} transcript_state;

static bool transcript_event(json_t *ev, void *ud) {
    transcript_state *t = ud;
    print_event(stdout, ev, t->calls, &t->u);
    return true;
}

/* The transcript, event by event as the reader hands them: a log it
 * refuses is not printed. */
static int transcript(const char *path) {
    transcript_state t = {.calls = json_object()};
    if (!t.calls)
        return WEIR_EXIT_FAIL;
    weir_error err;
    weir_error_clear(&err);
    int rc = WEIR_EXIT_OK;
    if (each_event(path, transcript_event, &t, &err) != WEIR_OK)
        rc = read_failed(&err);
    else
        print_total_usage(stdout, &t.u);
    json_decref(t.calls);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --check's prefix report                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The prefix report (docs/session-log.md, "The append-only prefix"): a
 * summary line, then one line per break naming the request, the first
 * position that differs, the event that caused it, the plugin event it came
 * during and the hook (plugin, row) the provenance records name.  A break
 * is a report, not an error: it never changes the exit status.
 */
static void print_prefix(const json_t *prefix) {
    if (!prefix)
        return;
    const json_t *breaks = get(prefix, "breaks");
    size_t n = json_array_size(breaks);
    printf("prefix: %lld requests, %lld append-only, %zu break%s\n",
           (long long)json_integer_value(get(prefix, "requests")),
           (long long)json_integer_value(get(prefix, "append_only")), n, n == 1 ? "" : "s");
    size_t i;
    const json_t *b;
    char e1[256], e2[256], e3[256], e4[256];
    json_array_foreach(breaks, i, b) {
        const json_t *cause = get(b, "cause"), *during = get(b, "during");
        printf("prefix break: request %lld (answered at seq %lld): %s differs",
               (long long)json_integer_value(get(b, "request")),
               (long long)json_integer_value(get(b, "seq")),
               weir_cli_esc(e1, sizeof e1, str_or(get(b, "at"), "?")));
        if (cause)
            printf(", caused by seq %lld %s (%s)", (long long)json_integer_value(get(cause, "seq")),
                   weir_cli_esc(e1, sizeof e1, str_or(get(cause, "type"), "?")),
                   str_or(get(cause, "op"), "?"));
        if (during)
            printf(" during %s (seq %lld)",
                   weir_cli_esc(e2, sizeof e2, str_or(get(during, "type"), "?")),
                   (long long)json_integer_value(get(during, "seq")));
        if (get(b, "hook"))
            printf(", hook %s", weir_cli_esc(e3, sizeof e3, str_or(get(b, "hook"), "?")));
        if (get(b, "plugin"))
            printf(" by plugin %s (row %s)", weir_cli_esc(e4, sizeof e4, str_or(get(b, "plugin"), "?")),
                   weir_cli_esc(e2, sizeof e2, str_or(get(b, "row"), "?")));
        fputc('\n', stdout);
    }
}

/* ------------------------------------------------------------------------ */
/* --why SEQ                                                                 */
/* ------------------------------------------------------------------------ */

static bool int_at(const json_t *data, const char *key, long long *out) {
    const json_t *v = get(data, key);
    if (!json_is_integer(v))
        return false;
    *out = (long long)json_integer_value(v);
    return true;
}

/* What --why keeps of the log as the reader hands it: the event asked
 * about, what its turn and step are read from, and the hook/decision events
 * that may have shaped it (one turn's, never the log). */
typedef struct why_scan {
    long long seq;        /* the event asked about */
    long long want_turn;  /* -1: the first pass; else the turn whose decisions are kept */
    size_t n;             /* events handed */
    json_t *target;       /* the event at seq (new reference), once found */
    json_t *window;       /* the latest event with a turn >= 0 and those after it with
                           * a turn (a scan back from the target stops at it) */
    bool started;         /* a turn/start with a turn was seen (the first pass) */
    long long start_turn; /* the latest one's turn */
    json_t *decisions;    /* hook/decision events since it (or since the turn/start of
                           * want_turn), oldest first */
    bool oom;
} why_scan;

static bool why_event(json_t *ev, void *ud) {
    why_scan *w = ud;
    w->n++;
    if (json_integer_value(get(ev, "seq")) == w->seq) {
        w->target = json_incref(ev);
        return false; /* nothing after it shaped it */
    }
    const json_t *d = get(ev, "data");
    const char *type = str_or(get(ev, "type"), "");
    long long t = -1;
    bool has_turn = int_at(d, "turn", &t), keep = true;
    if (has_turn && w->want_turn < 0) {
        if (t >= 0)
            json_array_clear(w->window);
        keep = json_array_append(w->window, ev) == 0;
    }
    if (!strcmp(type, "turn/start") && has_turn && (w->want_turn < 0 || t == w->want_turn)) {
        json_array_clear(w->decisions); /* a scan back from the target stops here */
        w->started = true;
        w->start_turn = t;
    } else if (!strcmp(type, "hook/decision") && has_turn &&
               (w->want_turn < 0 || t == w->want_turn)) {
        keep = keep && json_array_append(w->decisions, ev) == 0;
    }
    w->oom = !keep;
    return keep;
}

/*
 * The hook/decision events that shaped the event at `seq`, newest first
 * (docs/hooks.md, "Provenance"): those before it in its turn, of its step
 * or turn-level (step 0, and system-prompt/assemble, whose one assembly
 * serves every step of the turn); of any step when the event has a turn but no
 * step (turn/end).  An event without a turn (request/header) takes the
 * turn and step of the latest event before it that has one.  The log is
 * read as a stream up to the event: the decisions since the latest
 * turn/start are kept; when that turn/start is not of the event's turn (a
 * turn number out of line), a second pass keeps those of its turn.
 */
static int why(const char *path, long long seq, bool as_json) {
    weir_error err;
    weir_error_clear(&err);
    why_scan w = {.seq = seq, .want_turn = -1, .window = json_array(), .decisions = json_array()};
    int rc = WEIR_OK;
    if (w.window && w.decisions)
        rc = each_event(path, why_event, &w, &err);
    else
        w.oom = true;
    /* the turn and step of the event, or of the latest before it with a turn */
    long long turn = -1, step = -1;
    bool any_step = false;
    size_t k = json_array_size(w.window); /* k: the target */
    for (size_t i = k + 1; w.target && i-- > 0 && turn < 0;) {
        const json_t *d = get(i == k ? w.target : json_array_get(w.window, i), "data");
        if (!int_at(d, "turn", &turn))
            continue;
        if (!int_at(d, "step", &step))
            any_step = i == k; /* turn/end: every step; turn/start: turn-level */
        if (step < 0)
            step = 0;
    }
    if (rc == WEIR_OK && !w.oom && w.target && turn >= 0 &&
        !(w.started && w.start_turn == turn)) {
        /* the decisions held are not all of the turn's: read them again */
        why_scan again = {.seq = seq, .want_turn = turn, .decisions = w.decisions};
        json_array_clear(w.decisions);
        rc = each_event(path, why_event, &again, &err);
        json_decref(again.target);
        w.oom |= again.oom;
    }
    json_decref(w.window);
    if (rc != WEIR_OK || w.oom) {
        json_decref(w.target);
        json_decref(w.decisions);
        if (rc == WEIR_OK)
            fprintf(stderr, "weir log: %s: out of memory\n", path);
        return rc == WEIR_OK ? WEIR_EXIT_FAIL : read_failed(&err);
    }
    if (!w.target) {
        fprintf(stderr, "weir log: no event at seq %lld (the log has %zu events)\n", seq, w.n);
        json_decref(w.decisions);
        return WEIR_EXIT_FAIL;
    }
    if (!as_json)
        printf("decisions before seq %lld (%s, turn %lld, %s %lld), newest first:\n", seq,
               str_or(get(w.target, "type"), "?"), turn, any_step ? "any step up to" : "step",
               step);
    size_t shown = 0;
    for (size_t i = json_array_size(w.decisions); turn >= 0 && i-- > 0;) {
        const json_t *ev = json_array_get(w.decisions, i);
        const json_t *d = get(ev, "data");
        long long t = -1, s = 0;
        if (!int_at(d, "turn", &t) || t != turn)
            continue; /* another turn's */
        int_at(d, "step", &s);
        /* the system prompt is assembled once per turn, for its first step */
        if (!any_step && s != step && s != 0 &&
            strcmp(str_or(get(d, "hook"), ""), "system-prompt/assemble") != 0)
            continue;
        shown++;
        if (as_json) {
            json_dumpf(ev, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
            fputc('\n', stdout);
            continue;
        }
        printf("  seq %lld  step %lld  %s  %s  row %s (%s)  %lld us",
               (long long)json_integer_value(get(ev, "seq")), s, str_or(get(d, "hook"), "?"),
               str_or(get(d, "decision"), "?"), str_or(get(d, "row"), "?"),
               str_or(get(d, "plugin"), "?"), (long long)json_integer_value(get(d, "latency_us")));
        char detail[1024];
        if (get(d, "detail"))
            printf("  %s", weir_cli_esc(detail, sizeof detail, str_or(get(d, "detail"), "")));
        fputc('\n', stdout);
    }
    if (!as_json && !shown)
        printf("  (none: only the core defaults and pass-through hops)\n");
    json_decref(w.target);
    json_decref(w.decisions);
    return WEIR_EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* --otlp [FILE|-]                                                           */
/* ------------------------------------------------------------------------ */

/* What --otlp carries from event to event: the span builder and its spans. */
typedef struct otlp_state {
    weir_trace *trace;
    json_t *spans;
    weir_error err;
    bool failed;
} otlp_state;

static bool otlp_take(otlp_state *o, json_t *spans) {
    if (!spans || json_array_extend(o->spans, spans) != 0) {
        json_decref(spans);
        weir_error_clear(&o->err);
        snprintf(o->err.text, sizeof o->err.text, "out of memory");
        o->failed = true;
        return false;
    }
    json_decref(spans);
    return true;
}

static bool otlp_event(json_t *ev, void *ud) {
    otlp_state *o = ud;
    json_t *spans = NULL;
    if (weir_trace_add(o->trace, ev, &spans, &o->err) != WEIR_OK) {
        o->failed = true;
        return false;
    }
    return otlp_take(o, spans);
}

/* The session's spans as one OTLP/JSON ExportTraceServiceRequest
 * (docs/telemetry.md), written to `out` ("-": stdout). */
static int otlp(const char *path, const char *session, const json_t *config, const char *out) {
    otlp_state o = {.spans = json_array()};
    weir_error_clear(&o.err);
    if (!o.spans || weir_trace_create(session, config, &o.trace, &o.err) != WEIR_OK) {
        json_decref(o.spans);
        return weir_cli_fail("log", &o.err);
    }
    weir_error err;
    weir_error_clear(&err);
    int rc = WEIR_EXIT_OK;
    json_t *tail = NULL;
    if (each_event(path, otlp_event, &o, &err) != WEIR_OK)
        rc = read_failed(&err);
    else if (o.failed || weir_trace_finish(o.trace, &tail, &o.err) != WEIR_OK || !otlp_take(&o, tail))
        rc = weir_cli_fail("log", &o.err);
    json_t *req = rc == WEIR_OK ? weir_trace_request(o.trace, o.spans) : NULL;
    if (rc == WEIR_OK && !req) {
        fprintf(stderr, "weir log: out of memory\n");
        rc = WEIR_EXIT_FAIL;
    }
    if (req) {
        FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
        if (!f || json_dumpf(req, f, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0 ||
            fputc('\n', f) == EOF || (f != stdout && fclose(f) != 0) || (f == stdout && fflush(f) != 0)) {
            fprintf(stderr, "weir log: cannot write %s\n", out);
            rc = WEIR_EXIT_IO;
        }
    }
    json_decref(req);
    json_decref(o.spans);
    weir_trace_destroy(o.trace);
    return rc;
}

/* ------------------------------------------------------------------------ */

static const char log_help[] =
    "usage: weir log [-c FILE]... ID|FILE [--json|--derive|--check|--repair|--why SEQ [--json]\n"
    "                                      |--otlp [OUT|-]]\n"
    "\n"
    "Print a session log as a readable transcript, each turn's token usage\n"
    "(\"usage: in N \xc2\xb7 cached N \xc2\xb7 written N \xc2\xb7 out N \xc2\xb7 $C\", the cost when the\n"
    "model's price was known) and the session's total at the end.  ID names\n"
    "<session.dir>/<ID>.jsonl of the deployment (-c, or the built-in default:\n"
    "$WEIR_SESSION_DIR or ~/.local/state/weir/sessions); an argument with a '/'\n"
    "or ending in .jsonl is a file path.  When the deployment's session.store\n"
    "names another store (a plugin row such as store-postgres, or \"memory\"), ID\n"
    "is read from that store, with the same reader and the same checks.\n"
    "\n"
    "  --json     print the session's events, one JSON object per line\n"
    "  --derive   print the derived model-visible messages as one JSON array\n"
    "  --check    check the log's invariants (seq, nesting, tool results,\n"
    "             derive == request); an open last turn is reported, not an error\n"
    "  --repair   mend a log an older weir wrote that the reader now refuses (a\n"
    "             reply that repeated a tool-call id); the original is kept as\n"
    "             FILE.orig, a log with nothing to mend is left untouched (file\n"
    "             store only; takes the writer's lock)\n"
    "  --why SEQ  print the hook decisions (hook/decision) that shaped the event at\n"
    "             SEQ, newest first: those before it in its turn, of its step or\n"
    "             turn-level (docs/hooks.md, \"Provenance\"); with --json as events\n"
    "  --otlp [OUT|-]  write the session's OpenTelemetry GenAI spans (invoke_agent,\n"
    "             chat, execute_tool) as one OTLP/JSON ExportTraceServiceRequest to OUT\n"
    "             (default -, stdout): the spans the live exporter sends, made\n"
    "             after the fact (telemetry.capture_content and service_name of the\n"
    "             deployment apply; docs/telemetry.md)\n"
    "\n"
    "exit codes: 0 ok, 1 the check found errors (or the reader refused the log),\n"
    "            2 usage, 3 configuration error,\n"
    "            4 I/O error (no such log)\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY;

int weir_cmd_log(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"derive", no_argument, NULL, 'd'},
                                              {"check", no_argument, NULL, 'k'},
                                              {"repair", no_argument, NULL, 'r'},
                                              {"json", no_argument, NULL, 'j'},
                                              {"why", required_argument, NULL, 'w'},
                                              {"otlp", no_argument, NULL, 'o'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    int mode = 0, ch;
    long long why_seq = -1;
    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&files, "weir", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'd':
        case 'k':
        case 'r':
        case 'j':
        case 'o':
            if (mode && mode != ch) {
                fprintf(stderr, "weir log: --json, --derive, --check, --repair and --otlp "
                                "exclude each other\n");
                return WEIR_EXIT_USAGE;
            }
            mode = ch;
            break;
        case 'w': {
            char *end = NULL;
            why_seq = strtoll(optarg, &end, 10);
            if (!*optarg || *end || why_seq < 0) {
                fprintf(stderr, "weir log: --why needs a seq (an integer >= 0), got '%s'\n",
                        optarg);
                return WEIR_EXIT_USAGE;
            }
            break;
        }
        case 'h':
            fputs(log_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(log_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    if (why_seq >= 0 && mode && mode != 'j') {
        fprintf(stderr, "weir log: --why goes with --json only\n");
        return WEIR_EXIT_USAGE;
    }
    if (why_seq >= 0 && mode == 'o') {
        fprintf(stderr, "weir log: --why goes with --json only\n");
        return WEIR_EXIT_USAGE;
    }
    /* --otlp takes an optional OUT after the session */
    if (argc - optind != 1 && !(mode == 'o' && argc - optind == 2)) {
        fprintf(stderr, "weir log: expected one session ID or FILE\n\n%s", log_help);
        return WEIR_EXIT_USAGE;
    }
    const char *otlp_out = argc - optind == 2 ? argv[optind + 1] : "-";
    json_t *config = NULL;
    int rc = weir_cli_compose(files.files, files.n, &config);
    if (rc != WEIR_EXIT_OK)
        return rc;
    char *path = NULL;
    rc = weir_cli_session_path(config, argv[optind], WEIR_CLI_ID_OR_PATH, &path);
    if (rc != WEIR_EXIT_OK) {
        json_decref(config);
        return rc;
    }
    /* a session in another store (session.store: a plugin row, "memory") is
     * read through the deployment's host; an explicit file never is */
    const char *store =
        json_string_value(json_object_get(json_object_get(config, "session"), "store"));
    weir_host *host = NULL;
    json_t *deployment = NULL;
    if (store && strcmp(store, "file") != 0 && weir_session_id_valid(argv[optind])) {
        free(path);
        size_t n = strlen(store) + strlen(argv[optind]) + 2;
        if (!(path = malloc(n))) {
            json_decref(config);
            return WEIR_EXIT_FAIL;
        }
        snprintf(path, n, "%s:%s", store, argv[optind]); /* as weir run names it */
        if ((rc = weir_cli_host(config, false, &host)) != WEIR_EXIT_OK) { /* takes config */
            free(path);
            return rc;
        }
        src_host = host;
        src_id = argv[optind];
    } else {
        deployment = config; /* --otlp reads it; released at the end */
    }
    struct stat sb;
    if (!host && stat(path, &sb) != 0) {
        fprintf(stderr, "weir log: no session log at %s\n", path);
        free(path);
        json_decref(deployment);
        return WEIR_EXIT_IO;
    }
    weir_error err;
    weir_error_clear(&err);
    if (mode == 'r' && host) {
        fprintf(stderr, "weir log: --repair mends log files; session %s is in store '%s'\n",
                argv[optind], store);
        rc = WEIR_EXIT_USAGE;
    } else if (mode == 'r') {
        json_t *report = NULL;
        if (weir_log_repair(path, &report, &err) != WEIR_OK) {
            rc = weir_cli_fail("log", &err);
        } else {
            size_t i;
            const json_t *v;
            json_array_foreach(json_object_get(report, "renamed"), i, v)
                printf("seq %lld: tool call id '%s' is now '%s'\n",
                       (long long)json_integer_value(json_object_get(v, "seq")),
                       json_string_value(json_object_get(v, "was")),
                       json_string_value(json_object_get(v, "id")));
            const char *backup = json_string_value(json_object_get(report, "backup"));
            if (backup)
                printf("%s: repaired (%lld lines); the original is %s\n", path,
                       (long long)json_integer_value(json_object_get(report, "lines")), backup);
            else
                printf("%s: nothing to repair\n", path);
            json_decref(report);
        }
    } else if (mode == 'o') {
        /* the session id seeds the span ids: the file's name without
         * .jsonl (an ID prefix resolved to it, or a path), the ID in a store */
        char *sid = NULL;
        if (!host) {
            const char *base = strrchr(path, '/');
            base = base ? base + 1 : path;
            size_t n = strlen(base);
            sid = strndup(base, n > 6 && strcmp(base + n - 6, ".jsonl") == 0 ? n - 6 : n);
        }
        if (!host && !sid) {
            fprintf(stderr, "weir log: out of memory\n");
            rc = WEIR_EXIT_FAIL;
        } else {
            rc = otlp(path, sid ? sid : argv[optind],
                      host ? weir_host_config(host) : deployment, otlp_out);
        }
        free(sid);
    } else if (why_seq >= 0) {
        rc = why(path, why_seq, mode == 'j');
    } else if (mode == 'j') {
        if (each_event(path, print_json, NULL, &err) != WEIR_OK)
            rc = read_failed(&err);
    } else if (mode == 'd') {
        json_t *msgs = NULL;
        if (read_derive(path, &msgs, &err) != WEIR_OK) {
            rc = weir_cli_fail("log", &err);
        } else {
            json_dumpf(msgs, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
            fputc('\n', stdout);
            json_decref(msgs);
        }
    } else if (mode == 'k') {
        json_t *report = NULL;
        if (read_check(path, &report, &err) != WEIR_OK) {
            rc = weir_cli_fail("log", &err);
        } else {
            bool ok = json_is_true(json_object_get(report, "ok"));
            printf("%s: %s (%lld events)\n", path, ok ? "ok" : "FAILED",
                   (long long)json_integer_value(json_object_get(report, "events")));
            size_t i;
            const json_t *v;
            json_array_foreach(json_object_get(report, "open"), i, v) {
                char *s = json_is_string(v) ? NULL : weir_cli_json_line(v);
                printf("open: %s\n", s ? s : json_string_value(v));
                free(s);
            }
            json_array_foreach(json_object_get(report, "errors"), i, v) {
                char *s = json_is_string(v) ? NULL : weir_cli_json_line(v);
                printf("error: %s\n", s ? s : json_string_value(v));
                free(s);
            }
            print_prefix(json_object_get(report, "prefix"));
            json_decref(report);
            rc = ok ? WEIR_EXIT_OK : WEIR_EXIT_FAIL;
        }
    } else {
        rc = transcript(path);
    }
    free(path);
    json_decref(deployment);
    weir_host_destroy(host);
    src_host = NULL;
    return rc;
}
