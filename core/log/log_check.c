/*
 * core/log/log_check.c - offline session log checks and derivation
 * (`weir log --check`, `weir log --derive`; docs/session-log.md).
 *
 * The checker reads the file tolerantly (it reports what a strict open would
 * refuse) and re-folds the surface itself.  Errors name the seq (or the line
 * when the seq is unknown); an open last turn is reported in "open".
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "assistant_stream.h"
#include "log_fold.h"
#include "log_stream.h"
#include "session_log.h"
#include "store.h"
#include "continuation.h"
#include "surface.h"

/* A log file read as a stream (core/log/log_stream.h). */
typedef weir__log_stream log_stream;

typedef struct checker {
    json_t *errors, *open;
    const char *buf; /* the log read (NULL: read from `file`) */
    size_t len;
    log_stream *file;    /* the log file read as a stream, or NULL */
    size_t *lines;   /* deep: the offset in buf of each accepted envelope's line */
    size_t accepted; /* how many envelopes were accepted */
    weir__log_each_fn each; /* handed every envelope while no error is found (may be NULL) */
    void *each_ud;
    weir__surface *surface;
    bool oom;
    bool turn_open, step_open;
    json_int_t turn, step;
    size_t turn_seq, step_seq;
    weir__tally tally;     /* what the envelopes so far add up to (core/log/tally.h) */
    weir__call_fold fold;  /* the open step's tool calls (core/log/log_fold.h) */
    json_t *header_ev, *context_ev; /* the latest request/header and request/context */
    const json_t *header;  /* latest request/header data.header (of header_ev) */
    const json_t *context; /* latest request/context data (of context_ev) */
    weir__type_known_fn known; /* plugin event types (may be NULL) */
    void *known_ud;
    bool deep; /* re-derive prefixes (weir log --check) */
    bool thin; /* the surface holds thin envelopes (thin_event): a file's check that
                * derives nothing for its caller */
    size_t derived_upto; /* the prefix the last re-derivation folded (deep) */
    size_t line, error_line; /* the line read, the line of the first error */
    size_t at_base; /* the byte offset in the log of what is read (a seeded read) */
    size_t line_at; /* the byte offset in the log of the line being checked */
    size_t first;   /* the seq of the first line read (0, or a seed's) */
    /* the prefix report (deep; docs/session-log.md, "The append-only prefix") */
    size_t requests, append_only; /* requests seen, those that extended the previous */
    json_t *breaks;               /* the report's prefix.breaks */
    json_t *prev_msgs;            /* the previous request's messages: the first prev_len of
                                   * this array (shared with its events; it only grows) */
    size_t prev_len;
    json_t *prev_header;          /* its request/header envelope */
    json_int_t prev_seq;          /* the seq of its answer, -1 before the first */
    /* what the last request derived and sent, grown in place while the
     * surface only appends and the route stays (sent_messages) */
    json_t *sent_derived, *sent_msgs;
    size_t sent_nodes;
    uint64_t sent_gen;
    char *sent_route;
    json_t *recent; /* envelopes since then that may explain a break: surface events,
                     * request/header, hook/... provenance and plugin events */
} checker;

static void note(checker *c, json_t *list, const char *fmt, ...) WEIR_PRINTF(3, 4);
static json_t *held_event(const checker *c, const json_t *ev);
static void note(checker *c, json_t *list, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (w >= (int)sizeof buf) { /* truncated: never end inside a UTF-8 sequence */
        size_t k = sizeof buf - 2; /* the last byte kept */
        while (k > 0 && ((unsigned char)buf[k] & 0xC0) == 0x80)
            k--;
        unsigned char lead = (unsigned char)buf[k];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (k + need > sizeof buf - 1)
            buf[k] = '\0';
    }
    if (list == c->errors && !c->error_line)
        c->error_line = c->line ? c->line : 1;
    if (json_array_append_new(list, json_string(buf)) != 0)
        c->oom = true;
}

static bool is(const char *type, const char *name) { return strcmp(type, name) == 0; }

/* Report what the closing step left unanswered: assistant tool_calls never
 * dispatched as a tool/call, and tool/calls without a tool/result. */
static void close_step(checker *c) {
    size_t i;
    json_t *p;
    json_array_foreach(c->fold.wanted, i, p) {
        note(c, c->errors,
             "seq %" JSON_INTEGER_FORMAT ": tool_call '%s' has no tool/call in step %" JSON_INTEGER_FORMAT
             " of turn %" JSON_INTEGER_FORMAT,
             json_integer_value(json_array_get(p, 1)), json_string_value(json_array_get(p, 0)),
             c->step, c->turn);
    }
    json_array_foreach(c->fold.pending, i, p) {
        note(c, c->errors,
             "seq %" JSON_INTEGER_FORMAT
             ": tool/call '%s' has no tool/result in step %" JSON_INTEGER_FORMAT
             " of turn %" JSON_INTEGER_FORMAT,
             json_integer_value(json_array_get(p, 1)), json_string_value(json_array_get(p, 0)),
             c->step, c->turn);
    }
    weir__call_fold_reset(&c->fold);
    c->step_open = false;
}

static void check_turns(checker *c, size_t seq, const char *type, const json_t *data) {
    json_int_t turn = weir__json_int(data, "turn", -1), step = weir__json_int(data, "step", -1);
    if (is(type, "turn/start")) {
        if (c->turn_open)
            note(c, c->errors, "seq %zu: turn/start while turn %" JSON_INTEGER_FORMAT " is open",
                 seq, c->turn);
        if (c->step_open)
            close_step(c);
        c->turn_open = true;
        c->turn = turn;
        c->turn_seq = seq;
    } else if (is(type, "turn/end")) {
        if (!c->turn_open)
            note(c, c->errors, "seq %zu: turn/end without an open turn", seq);
        else if (turn != c->turn)
            note(c, c->errors,
                 "seq %zu: turn/end for turn %" JSON_INTEGER_FORMAT
                 " but turn %" JSON_INTEGER_FORMAT " is open",
                 seq, turn, c->turn);
        if (c->step_open) {
            note(c, c->errors, "seq %zu: turn/end while step %" JSON_INTEGER_FORMAT " is open", seq,
                 c->step);
            close_step(c);
        }
        if (!json_is_string(json_object_get(json_object_get(data, "reason"), "kind")))
            note(c, c->errors, "seq %zu: turn/end needs reason.kind", seq);
        c->turn_open = false;
    } else if (is(type, "step/start")) {
        if (!c->turn_open)
            note(c, c->errors, "seq %zu: step/start outside a turn", seq);
        else if (turn != c->turn)
            note(c, c->errors,
                 "seq %zu: step/start for turn %" JSON_INTEGER_FORMAT
                 " inside turn %" JSON_INTEGER_FORMAT,
                 seq, turn, c->turn);
        if (c->step_open) {
            note(c, c->errors, "seq %zu: step/start while step %" JSON_INTEGER_FORMAT " is open",
                 seq, c->step);
            close_step(c);
        }
        c->step_open = true;
        c->step = step;
        c->step_seq = seq;
    } else if (is(type, "step/end")) {
        if (!c->step_open)
            note(c, c->errors, "seq %zu: step/end without an open step", seq);
        else if (step != c->step || (c->turn_open && turn != c->turn))
            note(c, c->errors,
                 "seq %zu: step/end (turn %" JSON_INTEGER_FORMAT ", step %" JSON_INTEGER_FORMAT
                 ") does not match the open step (turn %" JSON_INTEGER_FORMAT
                 ", step %" JSON_INTEGER_FORMAT ")",
                 seq, turn, step, c->turn, c->step);
        close_step(c);
    }
}

/* The envelope whose line starts at `off` in the buffer or the file (NULL
 * when it cannot be read again: out of memory or a read error). */
static json_t *reread(checker *c, log_stream *r, size_t off) {
    size_t o = off, n;
    bool torn;
    json_error_t jerr;
    if (!r)
        return weir__log_read_line(c->buf, c->len, &o, &n, &torn, &jerr);
    const char *p;
    size_t len;
    uint64_t start;
    while (weir__log_stream_line(r, &p, &len, &start)) {
        if (start < off)
            continue;
        if (start > off || !p)
            return NULL;
        o = 0;
        return weir__log_read_line(p, len, &o, &n, &torn, &jerr);
    }
    return NULL;
}

/* The surface derivation of the first `upto` envelopes, read afresh from
 * their lines and folded, equals `now`, byte for byte when serialized. */
static bool prefix_deterministic(checker *c, size_t upto, const json_t *now) {
    weir__surface *s = NULL;
    if (weir__surface_create(&s) != WEIR_OK) {
        c->oom = true;
        return true;
    }
    log_stream again, *r = NULL;
    if (c->file) { /* the prefix read afresh from the file, in one pass */
        weir__log_stream_init(&again, c->file->fd, 0);
        r = &again;
    }
    for (size_t i = 0; i < upto && i < c->accepted && !c->oom; i++) {
        json_t *ev = reread(c, r, c->lines[i]);
        if (!ev)
            c->oom = true; /* it parsed when it was first read */
        json_t *held = ev ? held_event(c, ev) : NULL;
        if (ev && (!held || (weir__surface_check(s, held, NULL, 0) == 0 &&
                             weir__surface_apply(s, held) != WEIR_OK)))
            c->oom = true;
        json_decref(held);
        json_decref(ev);
    }
    if (r)
        weir__log_stream_free(r);
    json_t *fresh = weir__surface_derive(s);
    char *a = weir__json_dump(now), *b = weir__json_dump(fresh);
    bool same = !a || !b || strcmp(a, b) == 0;
    if (!a || !b || !fresh)
        c->oom = true;
    free(a);
    free(b);
    json_decref(fresh);
    weir__surface_destroy(s);
    return same;
}

/* Note an error when the surface so far does not derive as the first
 * `upto` envelopes folded afresh (`seq`: the envelope that asks). */
static void rederive(checker *c, size_t seq, size_t upto) {
    c->derived_upto = upto;
    json_t *now = weir__surface_derive(c->surface);
    if (!now)
        c->oom = true;
    else if (!prefix_deterministic(c, upto, now))
        note(c, c->errors, "seq %zu: re-deriving the history from the log prefix differs", seq);
    json_decref(now);
}

/* --- the thin surface of `weir log --check` -------------------------------
 * A check of a file holds the surface, which for a session that never
 * compacts is its whole history.  What the checks read of it is the
 * structure (roles, block types, ids, surface ops) and the equality of
 * messages, so a file's check holds each surface event thin: a string over
 * THIN_STRING bytes becomes a stand-in equal exactly when the strings are
 * (its length and 64-bit FNV-1a), and an event that is not a tool/result
 * keeps data.message alone (a tool/result rewrite must keep its other
 * members). */
#define THIN_STRING 96

static json_t *thin_value(json_t *v) {
    if (json_is_string(v) && json_string_length(v) > THIN_STRING) {
        size_t n = json_string_length(v);
        const unsigned char *p = (const unsigned char *)json_string_value(v);
        uint64_t h = 1469598103934665603u;
        for (size_t i = 0; i < n; i++)
            h = (h ^ p[i]) * 1099511628211u;
        char buf[64];
        snprintf(buf, sizeof buf, "\x01thin:%zu:%016llx", n, (unsigned long long)h);
        return json_string(buf);
    }
    json_t *out = json_is_object(v) ? json_object() : json_is_array(v) ? json_array() : NULL;
    if (!out)
        return json_incref(v);
    const char *key;
    json_t *x;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, key, x) {
            if (json_object_set_new(out, key, thin_value(x)) != 0) {
                json_decref(out);
                return NULL;
            }
        }
    } else {
        json_array_foreach(v, i, x) {
            if (json_array_append_new(out, thin_value(x)) != 0) {
                json_decref(out);
                return NULL;
            }
        }
    }
    return out;
}

/* The envelope a thin surface holds for surface event `ev` (new reference),
 * or NULL when out of memory. */
static json_t *thin_event(const json_t *ev) {
    const json_t *data = json_object_get(ev, "data");
    json_t *d = is(weir__json_str(ev, "type", ""), "tool/result")
                    ? thin_value((json_t *)(uintptr_t)data)
                    : json_pack("{s:o}", "message",
                                thin_value(json_object_get(data, "message")));
    json_t *out = d ? json_pack("{s:O, s:O, s:o}", "seq", json_object_get(ev, "seq"), "type",
                                json_object_get(ev, "type"), "data", d)
                    : NULL;
    static const char *const keep[] = {"surface_op", "source_seqs"};
    for (size_t i = 0; out && i < 2; i++) {
        json_t *v = json_object_get(ev, keep[i]);
        if (v && json_object_set(out, keep[i], v) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

/* What the check's surface holds of surface event `ev` (new reference):
 * thin, or without its stream (check_stream read it). */
static json_t *held_event(const checker *c, const json_t *ev) {
    if (c->thin && weir__is_surface_type(weir__json_str(ev, "type", "")))
        return thin_event(ev);
    json_t *lean = weir__surface_lean(ev);
    return lean ? lean : json_incref((json_t *)(uintptr_t)ev);
}

static void check_assistant(checker *c, size_t seq, const char *type) {
    if (!c->step_open)
        note(c, c->errors, "seq %zu: %s outside a step", seq, type);
    if (!c->header) {
        note(c, c->errors, "seq %zu: %s without a prior request/header", seq, type);
    } else {
        const json_t *cfg = json_object_get(c->header, "config");
        bool provider =
            weir__json_str(cfg, "provider", NULL) || weir__json_str(c->context, "provider", NULL);
        bool model =
            weir__json_str(cfg, "model", NULL) || weir__json_str(c->context, "model", NULL);
        if (!provider || !model)
            note(c, c->errors, "seq %zu: the request header fold has no provider and model", seq);
    }
    if (!is(type, "assistant/message"))
        return;
    /* the prefix before this answer, once the log has doubled since the last
     * re-derivation: each folds the whole prefix afresh, and the doubling
     * keeps their sum within twice the log (check_end re-derives the whole) */
    size_t upto = c->accepted - 1;
    if (c->deep && upto >= 2 * c->derived_upto)
        rederive(c, seq, upto);
}

/* An issue of the step's tool-call fold: an error. */
static void fold_issue(void *ud, size_t seq, weir__call_fold_issue issue, const char *id) {
    checker *c = ud;
    if (issue == WEIR__FOLD_UNMATCHED)
        note(c, c->errors,
             "seq %zu: tool/result for call_id '%s' matches no tool/call of its step", seq, id);
    else /* a tool result could answer either */
        note(c, c->errors, "seq %zu: %s id '%s' repeats one of step %" JSON_INTEGER_FORMAT, seq,
             issue == WEIR__FOLD_REDISPATCHED ? "tool/call" : "tool_call", id, c->step);
}

static void check_tools(checker *c, size_t seq, const char *type, const json_t *ev) {
    if (is(type, "assistant/message") && !c->step_open)
        return; /* reported by check_assistant */
    if (is(type, "tool/call") && !c->step_open) {
        note(c, c->errors, "seq %zu: tool/call outside a step", seq);
        return;
    }
    if (weir__call_fold_event(&c->fold, seq, ev, fold_issue, c) != WEIR_OK)
        c->oom = true;
}

/*
 * weir log --check: an assistant/message whose stream is in the compact
 * timed form folds back into its message and usage exactly
 * (docs/session-log.md, "The stream").  The raw streams of older logs are
 * read as they are and not compared (some hold none).
 */
static void check_stream(checker *c, size_t seq, const json_t *data) {
    const json_t *stream = json_object_get(data, "stream");
    if (json_array_size(stream) == 0 || !weir__stream_is_compact(stream))
        return;
    json_t *chunks = weir__stream_expand(stream);
    weir__assembled m;
    if (!chunks ||
        weir__stream_assemble(chunks, !json_is_true(json_object_get(data, "interrupted")),
                              &m) != 0) {
        c->oom = true;
        json_decref(chunks);
        return;
    }
    const json_t *usage = json_object_get(data, "usage");
    if (!json_equal(m.message, json_object_get(data, "message")))
        note(c, c->errors, "seq %zu: assistant/message: the message does not rebuild from its stream",
             seq);
    else if ((m.usage || usage) && !json_equal(m.usage, usage))
        note(c, c->errors, "seq %zu: assistant/message: the usage is not its stream's", seq);
    json_decref(m.message);
    json_decref(m.calls);
    json_decref(chunks);
}

/* ------------------------------------------------------------------------ */
/* The prefix report                                                         */
/* ------------------------------------------------------------------------ */

/* Whether `type` is a plugin's event (not the core's, not provenance). */
static bool plugin_type(const char *type) {
    return !weir__log_is_core_type(type) && strncmp(type, "hook/", 5) != 0 &&
           strncmp(type, "request/", 8) != 0;
}

/* The first index at which the arrays `a` and `b` differ (the shorter's
 * length when one is a prefix of the other), or -1 when equal. */
/* The first index where the first `na` elements of array `a` and array `b`
 * differ, the shorter length when one is a prefix of the other, or -1 when
 * they are equal. */
static long first_difference(const json_t *a, size_t na, const json_t *b) {
    size_t nb = json_array_size(b);
    for (size_t i = 0; i < na && i < nb; i++)
        if (!json_equal(json_array_get(a, i), json_array_get(b, i)))
            return (long)i;
    return na == nb ? -1 : (long)(na < nb ? na : nb);
}

/*
 * The index in `derived` (the surface's derivation, borrowed) of message
 * `index` of the request made from it (weir__continuation_apply for
 * `context`), which leaves out an assistant message with nothing left to
 * send; -1 when there is none or out of memory.
 */
static long derived_index(const checker *c, const json_t *derived, long index) {
    bool *stale = NULL;
    if (weir__continuation_stale(c->surface, derived, &stale) != 0)
        return -1;
    const char *provider = weir__json_str(c->context, "provider", NULL);
    const char *model = weir__json_str(c->context, "model", NULL);
    long k = 0, found = -1;
    for (size_t j = 0; found < 0 && j < json_array_size(derived); j++) {
        json_t *one = json_array();
        if (!one || json_array_append(one, json_array_get(derived, j)) != 0) {
            json_decref(one);
            break;
        }
        json_t *sent = weir__continuation_filter(one, provider, model, stale ? &stale[j] : NULL,
                                                 NULL);
        bool kept = json_array_size(sent) > 0;
        json_decref(sent);
        json_decref(one);
        if (!sent)
            break;
        if (kept && k++ == index)
            found = (long)j;
    }
    weir__free(stale);
    return found;
}

/* The surface envelope that contributes message `index` of the derived
 * history (borrowed), or NULL (also when out of memory: the break is then
 * reported without its cause, never as an error). */
static const json_t *message_event(const checker *c, long index) {
    long k = 0;
    if (index < 0)
        return NULL;
    for (size_t i = 0; i < weir__surface_len(c->surface); i++) {
        const json_t *ev = weir__surface_event(c->surface, i);
        json_t *m = weir__derive_event_message(ev);
        bool contributes = m != NULL;
        json_decref(m);
        if (contributes && k++ == index)
            return ev;
    }
    return NULL;
}

/* Name the hook, plugin and row that made `cause` in `brk`: the first
 * provenance record after it since the previous request (a hop records its
 * decision when it returns), else the last one before it; and the plugin
 * event last before it ("during"). */
static void attribute(checker *c, json_t *brk, const json_t *cause, const char *hook) {
    json_int_t at = weir__json_int(cause, "seq", -1);
    const json_t *before = NULL, *after = NULL, *during = NULL;
    size_t i;
    const json_t *ev;
    json_array_foreach(c->recent, i, ev) {
        const char *type = weir__json_str(ev, "type", "");
        json_int_t seq = weir__json_int(ev, "seq", -1);
        const json_t *d = json_object_get(ev, "data");
        bool record = strncmp(type, "hook/", 5) == 0 &&
                      (!hook || strcmp(weir__json_str(d, "hook", ""), hook) == 0);
        if (record && seq < at)
            before = ev;
        else if (record && seq > at && !after)
            after = ev;
        else if (seq < at && plugin_type(type))
            during = ev;
    }
    const json_t *rec = json_object_get(after ? after : before, "data");
    int bad = 0;
    if (hook || rec)
        bad |= json_object_set_new(brk, "hook", json_string(hook ? hook : weir__json_str(rec, "hook", "?")));
    if (rec)
        bad |= json_object_set_new(brk, "plugin", json_string(weir__json_str(rec, "plugin", "?"))) |
               json_object_set_new(brk, "row", json_string(weir__json_str(rec, "row", "?")));
    if (during)
        bad |= json_object_set_new(brk, "during",
                                   json_pack("{s:I, s:s}", "seq", weir__json_int(during, "seq", 0),
                                             "type", weir__json_str(during, "type", "")));
    if (bad)
        c->oom = true;
}

/* Whether `ev` is a system-update system/message (core/engine/driver.c). */
static bool system_update(const json_t *ev) {
    const json_t *m = json_object_get(json_object_get(ev, "data"), "message");
    return is(weir__json_str(ev, "type", ""), "system/message") &&
           is(weir__json_str(json_object_get(m, "source"), "kind", ""), "system-update");
}

/*
 * The request answered at `seq` (the header so far and the surface before
 * the answer) against the previous one: append-only when the config and
 * tools are equal and the previous messages are a prefix of its messages.
 * Otherwise a break names the first position that differs, the event that
 * caused it and the hook (attribute).  The messages are what was sent: the
 * derivation with the continuations the request/context in force dropped
 * (weir__continuation_apply, as the driver's request_messages), so a route
 * change or a replace that made a continuation stale is a break where the
 * request changed, and a message never sent takes no position.
 */
/*
 * The surface's derivation (*derived) and the messages a request sends
 * (*msgs), as weir__continuation_apply gives them, both borrowed from the
 * checker.  Derived once, then grown in place by the nodes appended since
 * (*grown) while no replace happened and the route is the same: a new
 * message at the end is never stale and the older ones filter as before,
 * so the last request's messages are a prefix of these and a long
 * session's check costs each message once, not once a request.  false
 * when out of memory.
 */
static bool sent_messages(checker *c, const json_t **derived, const json_t **msgs,
                          bool *grown) {
    const weir__surface *s = c->surface;
    uint64_t gen = weir__surface_replace_generation(s);
    const char *provider = weir__json_str(c->context, "provider", NULL);
    const char *model = weir__json_str(c->context, "model", NULL);
    char *route = weir__asprintf("%s\n%s", provider ? provider : "", model ? model : "");
    if (!route)
        return false;
    bool ok = true;
    *grown = c->sent_derived && gen == c->sent_gen && !strcmp(route, c->sent_route);
    if (*grown) {
        size_t from = json_array_size(c->sent_derived);
        ok = weir__surface_derive_into(s, c->sent_nodes, c->sent_derived, &c->sent_nodes) ==
             WEIR_OK;
        json_t *fresh = ok ? json_array() : NULL;
        for (size_t i = from; fresh && i < json_array_size(c->sent_derived); i++)
            if (json_array_append(fresh, json_array_get(c->sent_derived, i)) != 0)
                ok = false;
        json_t *kept = fresh ? weir__continuation_filter(fresh, provider, model, NULL, NULL) : NULL;
        ok = ok && kept && json_array_extend(c->sent_msgs, kept) == 0;
        json_decref(kept);
        json_decref(fresh);
        weir__free(route);
    } else {
        json_decref(c->sent_derived);
        json_decref(c->sent_msgs);
        weir__free(c->sent_route);
        c->sent_route = route;
        c->sent_gen = gen;
        c->sent_nodes = weir__surface_len(s);
        c->sent_derived = weir__surface_derive(s);
        json_t *applied = c->sent_derived
                              ? weir__continuation_apply(c->sent_derived, s, c->context, NULL)
                              : NULL;
        c->sent_msgs = applied ? json_copy(applied) : NULL; /* never the derivation itself */
        json_decref(applied);
        ok = c->sent_msgs != NULL;
    }
    if (!ok) { /* start again next time */
        json_decref(c->sent_derived);
        c->sent_derived = NULL;
        return false;
    }
    *derived = c->sent_derived;
    *msgs = c->sent_msgs; /* grows in place: a request's are its first messages */
    return true;
}

static void prefix_request(checker *c, size_t seq) {
    const json_t *derived = NULL, *msgs = NULL;
    bool grown = false;
    if (!sent_messages(c, &derived, &msgs, &grown)) {
        c->oom = true;
        return;
    }
    const json_t *header = c->header, *prev = json_object_get(
                                          json_object_get(c->prev_header, "data"), "header");
    c->requests++;
    char at[64] = "";
    const json_t *cause = NULL;
    const char *hook = NULL;
    long i;
    if (c->prev_seq < 0) {
        /* the first request extends nothing */
    } else if (!json_equal(json_object_get(prev, "config"), json_object_get(header, "config"))) {
        snprintf(at, sizeof at, "config");
        cause = c->header_ev;
        hook = "agent/request";
    } else if ((i = first_difference(json_object_get(prev, "tools"),
                                     json_array_size(json_object_get(prev, "tools")),
                                     json_object_get(header, "tools"))) >= 0) {
        snprintf(at, sizeof at, "tools[%ld]", i);
        cause = c->header_ev;
        hook = "system-prompt/assemble";
    } else if (!(grown && c->prev_msgs == msgs) && /* grown from it: a prefix */
               (i = first_difference(c->prev_msgs, c->prev_len, msgs)) >= 0 &&
               (size_t)i < c->prev_len) {
        const json_t *m = json_array_get(c->prev_msgs, (size_t)i);
        if (i == 0 && is(weir__json_str(m, "role", ""), "system"))
            snprintf(at, sizeof at, "system");
        else
            snprintf(at, sizeof at, "messages[%ld]", i);
        const json_t *node = message_event(c, derived_index(c, derived, i));
        if (node && weir__json_int(node, "seq", -1) > c->prev_seq)
            cause = node;
        size_t k;
        const json_t *ev;
        json_array_foreach(c->recent, k, ev) { /* else the first replace since */
            if (!cause && json_is_object(json_object_get(ev, "surface_op")))
                cause = ev;
        }
        if (cause && system_update(cause))
            hook = "system-prompt/assemble";
    }
    if (!*at) {
        c->append_only++;
    } else {
        json_t *brk = json_pack("{s:I, s:I, s:s}", "request", (json_int_t)c->requests, "seq",
                                (json_int_t)seq, "at", at);
        if (brk && cause) {
            const json_t *op = json_object_get(cause, "surface_op");
            json_object_set_new(brk, "cause",
                                json_pack("{s:I, s:s, s:s}", "seq",
                                          weir__json_int(cause, "seq", 0), "type",
                                          weir__json_str(cause, "type", ""), "op",
                                          json_is_object(op) ? "replace"
                                          : op               ? "append"
                                                             : "none"));
            attribute(c, brk, cause, hook);
        }
        if (!brk || json_array_append_new(c->breaks, brk) != 0)
            c->oom = true;
    }
    json_decref(c->prev_msgs);
    c->prev_msgs = json_incref(c->sent_msgs); /* msgs */
    c->prev_len = json_array_size(msgs);
    json_decref(c->prev_header);
    c->prev_header = json_incref(c->header_ev);
    c->prev_seq = (json_int_t)seq;
    json_array_clear(c->recent);
}

/* Keep `ev` for the next request's report when it may explain a break. */
static void prefix_note(checker *c, json_t *ev, const char *type) {
    if ((json_object_get(ev, "surface_op") || is(type, "request/header") ||
         strncmp(type, "hook/", 5) == 0 || plugin_type(type)) &&
        json_array_append(c->recent, ev) != 0)
        c->oom = true;
}

/* The report's "prefix" member (new), or NULL on NOMEM. */
static json_t *prefix_report(const checker *c) {
    return json_pack("{s:I, s:I, s:O}", "requests", (json_int_t)c->requests, "append_only",
                     (json_int_t)c->append_only, "breaks", c->breaks);
}

/* One envelope, already known to be an object with seq, type and data. */
/* A log/checkpoint records what the log before it adds up to and where
 * its folds stand: the checker's own, to the byte (a checkpoint is derived
 * from the log, never a source of its own). */
static void check_checkpoint(checker *c, size_t seq, const json_t *data) {
    char msg[640];
    if (weir__checkpoint_verify(data, &c->tally, c->line_at, c->surface, msg, sizeof msg) < 0)
        note(c, c->errors, "seq %zu: %s %s", seq, WEIR__LOG_CHECKPOINT, msg);
    else if (c->turn_open && json_object_get(data, "at"))
        note(c, c->errors, "seq %zu: %s inside turn %" JSON_INTEGER_FORMAT, seq,
             WEIR__LOG_CHECKPOINT, c->turn);
}

static void check_event(checker *c, size_t seq, json_t *ev) {
    const char *type = weir__json_str(ev, "type", "");
    const json_t *data = json_object_get(ev, "data");
    char msg[512];
    if (!weir__log_is_core_type(type) && !json_is_true(json_object_get(ev, "ignorable")) &&
        !(c->known && c->known(type, c->known_ud)))
        note(c, c->errors, "seq %zu: unknown event type '%s' is not ignorable", seq, type);
    if (weir__log_check_shape(type, data, msg, sizeof msg) < 0)
        note(c, c->errors, "seq %zu: %s", seq, msg);
    if (is(type, WEIR__LOG_CHECKPOINT))
        check_checkpoint(c, seq, data);
    weir__tally_event(&c->tally, ev);
    check_turns(c, seq, type, data);
    check_tools(c, seq, type, ev);
    if (is(type, "assistant/message") || is(type, "assistant/attempt"))
        check_assistant(c, seq, type);
    if (c->deep && is(type, "assistant/message"))
        check_stream(c, seq, data);
    bool answer = is(type, "assistant/attempt") ||
                  (is(type, "assistant/message") && json_is_string(json_object_get(ev, "surface_op")));
    if (c->deep && c->header && answer && !c->oom)
        prefix_request(c, seq);
    else if (c->deep && !c->oom)
        prefix_note(c, ev, type);
    json_t *held = held_event(c, ev); /* checked as held: thin against thin */
    if (!held)
        c->oom = true;
    else if (weir__surface_check(c->surface, held, msg, sizeof msg) < 0)
        note(c, c->errors, "seq %zu: %s", seq, msg);
    else if (weir__surface_apply(c->surface, held) != WEIR_OK)
        c->oom = true;
    json_decref(held);
    if (is(type, "request/header")) {
        json_decref(c->header_ev);
        c->header_ev = json_incref(ev);
        c->header = json_object_get(data, "header");
    } else if (is(type, "request/context")) {
        json_decref(c->context_ev);
        c->context_ev = json_incref(ev);
        c->context = data;
    }
}

/* Whether `id` is the first element of a pair in `list`. */
static bool listed(const json_t *list, const char *id) {
    size_t i;
    const json_t *p;
    json_array_foreach(list, i, p) {
        if (is(json_string_value(json_array_get(p, 0)), id))
            return true;
    }
    return false;
}

/* Every tool_call of an assistant message has a tool result before the next
 * assistant message, or before the end.  At the end of an open last turn
 * the open step's calls may still lack one (repair answers those: they are
 * in `wanted` or `pending`); any other is an error, e.g. a result a surface
 * replace took away. */
static void check_derived(checker *c) {
    json_t *msgs = weir__surface_derive(c->surface);
    if (!msgs) {
        c->oom = true;
        return;
    }
    json_t *want = json_array(); /* [[id, message index], ...] */
    size_t n = json_array_size(msgs);
    for (size_t i = 0; want && i <= n; i++) {
        const json_t *m = json_array_get(msgs, i);
        const char *role = weir__json_str(m, "role", "");
        size_t k;
        json_t *b;
        if (i == n || is(role, "assistant")) {
            json_array_foreach(want, k, b) {
                const char *id = json_string_value(json_array_get(b, 0));
                if (i == n && c->turn_open &&
                    (listed(c->fold.wanted, id) || listed(c->fold.pending, id)))
                    continue;
                note(c, c->errors,
                     "derived history: tool_call '%s' (message %" JSON_INTEGER_FORMAT
                     ") has no tool result before the next assistant message",
                     json_string_value(json_array_get(b, 0)),
                     json_integer_value(json_array_get(b, 1)));
            }
            json_array_clear(want);
        }
        json_array_foreach(json_object_get(m, "content"), k, b) {
            const char *bt = weir__json_str(b, "type", "");
            if (is(role, "assistant") && is(bt, "tool_call") &&
                json_array_append_new(
                    want, json_pack("[s,I]", weir__json_str(b, "id", ""), (json_int_t)i)) != 0)
                c->oom = true;
            if (is(bt, "tool_result")) {
                const char *id = weir__json_str(b, "call_id", "");
                size_t w;
                json_t *x;
                json_array_foreach(want, w, x) {
                    if (is(json_string_value(json_array_get(x, 0)), id)) {
                        json_array_remove(want, w);
                        break;
                    }
                }
            }
        }
    }
    if (!want)
        c->oom = true;
    json_decref(want);
    json_decref(msgs);
}

static void check_end(checker *c) {
    if (c->turn_open) {
        note(c, c->open, "turn %" JSON_INTEGER_FORMAT " is open (turn/start at seq %zu)", c->turn,
             c->turn_seq);
        if (c->step_open)
            note(c, c->open,
                 "step %" JSON_INTEGER_FORMAT " of turn %" JSON_INTEGER_FORMAT
                 " is open (step/start at seq %zu)",
                 c->step, c->turn, c->step_seq);
        size_t i;
        json_t *p;
        json_array_foreach(c->fold.wanted, i, p) {
            note(c, c->open, "seq %" JSON_INTEGER_FORMAT ": tool_call '%s' has no tool/call yet",
                 json_integer_value(json_array_get(p, 1)), json_string_value(json_array_get(p, 0)));
        }
        json_array_foreach(c->fold.pending, i, p) {
            note(c, c->open, "seq %" JSON_INTEGER_FORMAT ": tool/call '%s' has no tool/result yet",
                 json_integer_value(json_array_get(p, 1)), json_string_value(json_array_get(p, 0)));
        }
    } else if (c->step_open) {
        close_step(c);
    }
    size_t n = c->accepted;
    if (c->deep && n > c->derived_upto)
        rederive(c, n - 1, n);
    check_derived(c);
}

/* Whether `line` (n bytes) is what weir writes first: the start of the
 * event with seq 0 (weir__json_dump keeps the envelope's key order). */
static bool starts_like_event(const char *line, size_t n) {
    static const char head[] = "{\"seq\":0,\"time\":";
    return memcmp(line, head, n < sizeof head - 1 ? n : sizeof head - 1) == 0;
}

/* Count an accepted envelope; deep, keep where its line starts. */
static bool push_line(checker *c, size_t off) {
    if (c->deep) {
        if ((c->accepted & (c->accepted - 1)) == 0) { /* 0, 1, 2, 4, ...: full */
            size_t cap = c->accepted ? 2 * c->accepted : 1;
            size_t *grown = weir__realloc(c->lines, cap * sizeof *grown);
            if (!grown)
                return false;
            c->lines = grown;
        }
        c->lines[c->accepted] = off;
    }
    c->accepted++;
    return true;
}

/* The next line of the log, from the buffer or the file's stream: *p
 * (NULL: a line over the cap, skipped) and *n bytes, its newline included
 * when it has one; *start its offset.  false at the end (or on a read
 * error of the file: c->file->failed). */
static bool next_line(checker *c, size_t *off, const char **p, size_t *n, size_t *start) {
    if (c->file) {
        uint64_t at;
        if (!weir__log_stream_line(c->file, p, n, &at))
            return false;
        *start = (size_t)at;
        return true;
    }
    if (*off >= c->len)
        return false;
    const char *nl = memchr(c->buf + *off, '\n', c->len - *off);
    *start = *off;
    *p = c->buf + *off;
    *n = nl ? (size_t)(nl - *p) + 1 : c->len - *off;
    *off += *n;
    return true;
}

static void check_lines(checker *c) {
    size_t off = 0, line = c->first, expected = c->first, start, chunk;
    const char *p;
    while (next_line(c, &off, &p, &chunk, &start)) {
        c->line = ++line;
        size_t n, o = 0;
        bool torn;
        json_error_t jerr;
        json_t *ev = NULL;
        if (p) {
            ev = weir__log_read_line(p, chunk, &o, &n, &torn, &jerr);
        } else { /* over the cap (a file read as a stream): as weir__log_read_line says it */
            torn = c->file->cut;
            n = torn ? chunk : chunk - 1;
            snprintf(jerr.text, sizeof jerr.text, "line of %zu bytes is over the %zu MiB cap", n,
                     WEIR__LOG_LINE_MAX >> 20);
            jerr.text[JSON_ERROR_TEXT_LENGTH - 1] = (char)json_error_unknown;
        }
        if (!ev && !torn && json_error_code(&jerr) == json_error_out_of_memory) {
            c->oom = true; /* not the line's fault: never call it invalid */
            break;
        }
        char msg[512];
        if (torn && line == 1 && !c->first && !(p && starts_like_event(p, n))) {
            note(c, c->errors, "not a weir session log: its only line is not a log event");
            break;
        }
        if (torn) {
            note(c, c->open, "line %zu: torn last line (%zu bytes) ignored", line, n);
            break;
        }
        if (!ev || weir__log_check_envelope(ev, msg, sizeof msg) < 0) {
            if (line == 1 && !c->first) { /* never take another file for a damaged log */
                note(c, c->errors, "not a weir session log: line 1 is not a log event (%s)",
                     ev ? msg : jerr.text);
                json_decref(ev);
                break;
            }
            if (ev)
                note(c, c->errors, "line %zu: not a log event: %s", line, msg);
            else
                note(c, c->errors, "line %zu: invalid JSON: %s", line, jerr.text);
            json_decref(ev);
            continue;
        }
        size_t seq = (size_t)json_integer_value(json_object_get(ev, "seq"));
        if (seq != expected)
            note(c, c->errors, "line %zu: seq %zu breaks contiguity (expected %zu)", line, seq,
                 expected);
        expected = seq + 1;
        c->line_at = c->at_base + start;
        if (!push_line(c, start))
            c->oom = true;
        else
            check_event(c, seq, ev);
        if (c->each && !c->oom && json_array_size(c->errors) == 0 &&
            !c->each(ev, start, n, c->each_ud))
            c->oom = true;
        json_decref(ev); /* the surface keeps what it needs */
        if (c->oom)
            break;
    }
}

static int check(const char *buf, size_t len, log_stream *file, const weir__log_seed *seed,
                 weir__type_known_fn known, void *known_ud, bool deep, weir__log_each_fn each,
                 void *each_ud, json_t **report, json_t **derived, weir_error *err) {
    if ((!buf && !file) || !report)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log check: buffer and report are required");
    *report = NULL;
    checker c = {0};
    c.file = file;
    int failed = 0;
    c.known = known;
    c.known_ud = known_ud;
    c.deep = deep;
    c.thin = file && !derived;
    c.each = each;
    c.each_ud = each_ud;
    c.buf = buf;
    c.len = len;
    c.errors = json_array();
    c.open = json_array();
    c.breaks = json_array();
    c.recent = json_array();
    c.prev_seq = -1;
    if (!c.errors || !c.open || weir__call_fold_init(&c.fold) != WEIR_OK || !c.breaks ||
        !c.recent ||
        (seed ? weir__surface_clone(seed->surface, &c.surface) : weir__surface_create(&c.surface)))
        c.oom = true;
    if (seed) { /* deep never is: it re-derives from seq 0 */
        c.first = c.accepted = seed->first;
        c.at_base = seed->at;
        c.tally = *seed->tally;
        c.turn = seed->tally->last_turn;
        c.header_ev = json_incref((json_t *)(uintptr_t)seed->header_ev);
        c.context_ev = json_incref((json_t *)(uintptr_t)seed->context_ev);
        c.header = json_object_get(json_object_get(c.header_ev, "data"), "header");
        c.context = json_object_get(c.context_ev, "data");
    }
    if (!c.oom) {
        check_lines(&c);
        if (file && file->failed) /* a read error, or memory for the window */
            failed = file->failed;
        else
            check_end(&c);
    }
    size_t events = c.accepted;
    if (derived && !c.oom && !failed && json_array_size(c.errors) == 0 &&
        !(*derived = weir__surface_derive(c.surface)))
        c.oom = true;
    weir__surface_destroy(c.surface);
    weir__free(c.lines);
    json_decref(c.header_ev);
    json_decref(c.context_ev);
    weir__call_fold_free(&c.fold);
    json_t *r = c.oom || failed
                    ? NULL
                    : json_pack("{s:b, s:I, s:O, s:O, s:I}", "ok", json_array_size(c.errors) == 0,
                                "events", (json_int_t)events, "errors", c.errors, "open", c.open,
                                "error_line", (json_int_t)c.error_line);
    if (r && deep && json_object_set_new(r, "prefix", prefix_report(&c)) != 0) {
        json_decref(r);
        r = NULL;
    }
    json_decref(c.errors);
    json_decref(c.open);
    json_decref(c.breaks);
    json_decref(c.recent);
    json_decref(c.prev_msgs);
    json_decref(c.sent_derived);
    json_decref(c.sent_msgs);
    weir__free(c.sent_route);
    json_decref(c.prev_header);
    if (!r && derived) {
        json_decref(*derived);
        *derived = NULL;
    }
    if (failed && failed != ENOMEM)
        return weir__err(err, WEIR_E_IO, NULL, NULL, "log check: read: %s", strerror(failed));
    if (!r)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log check: out of memory");
    *report = r;
    return WEIR_OK;
}

int weir__log_check_buffer(const char *buf, size_t len, weir__type_known_fn known, void *known_ud,
                           bool deep, json_t **report, weir_error *err) {
    return check(buf, len, NULL, NULL, known, known_ud, deep, NULL, NULL, report, NULL, err);
}

int weir__log_check_each(const char *buf, size_t len, weir__type_known_fn known, void *known_ud,
                         weir__log_each_fn each, void *each_ud, json_t **report,
                         weir_error *err) {
    return check(buf, len, NULL, NULL, known, known_ud, false, each, each_ud, report, NULL, err);
}

int weir__log_check_each_from(const char *buf, size_t len, const weir__log_seed *seed,
                              weir__type_known_fn known, void *known_ud, weir__log_each_fn each,
                              void *each_ud, json_t **report, weir_error *err) {
    if (!seed || !seed->tally || !seed->surface)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log check: a seed needs its folds");
    return check(buf, len, NULL, seed, known, known_ud, false, each, each_ud, report, NULL, err);
}

int weir__log_check_fd(int fd, weir__type_known_fn known, void *known_ud, bool deep,
                       json_t **report, json_t **derived, weir_error *err) {
    if (fd < 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log check: no file");
    if (derived)
        *derived = NULL;
    log_stream r;
    weir__log_stream_init(&r, fd, 0);
    int rc = check(NULL, 0, &r, NULL, known, known_ud, deep, NULL, NULL, report, derived, err);
    weir__log_stream_free(&r);
    return rc;
}
