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
    bool spill; /* the surface holds stubs (stub_event): a file's check that derives
                 * nothing for its caller */
    json_t *interned[5]; /* spill: the four surface types and "append", shared by the stubs */
    char *rbuf;          /* spill: a node's line read again (read_at) */
    size_t rcap;
    size_t derived_upto; /* the prefix the last re-derivation point folded (deep) */
    struct redo *redos;  /* the re-derivation points, checked at the end (verify_redos) */
    size_t nredos;
    size_t line, error_line; /* the line read, the line of the first error */
    size_t at_base; /* the byte offset in the log of what is read (a seeded read) */
    size_t line_at; /* the byte offset in the log of the line being checked */
    size_t first;   /* the seq of the first line read (0, or a seed's) */
    /* the prefix report (deep; docs/session-log.md, "The append-only prefix") */
    size_t requests, append_only; /* requests seen, those that extended the previous */
    json_t *breaks;               /* the report's prefix.breaks */
    size_t prev_len;              /* how many messages the previous request sent */
    json_t *prev_header;          /* its request/header envelope */
    json_int_t prev_seq;          /* the seq of its answer, -1 before the first */
    /* what the last request sent, one hash a message, grown in place while
     * the surface only appends and the route stays (sent_messages) */
    struct sent_msg *sent;
    size_t sent_len, sent_cap, sent_nodes;
    json_int_t sent_max; /* the highest seq of the nodes before sent_nodes */
    uint64_t sent_gen;
    char *sent_route;
    bool sent_ok;
    size_t *recent_at; /* where the line of each of `recent` starts (spill: node_event) */
    size_t recent_cap;
    json_t *recent; /* envelopes since then that may explain a break: surface events,
                     * request/header, hook/... provenance and plugin events */
} checker;

static void note(checker *c, json_t *list, const char *fmt, ...) WEIR_PRINTF(3, 4);
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

/* --- the surface a file's check holds -------------------------------------
 * A check of a file holds the surface, which for a session that never
 * compacts is its whole history.  It holds each node as a stub: its seq,
 * type and surface_op, and where its line starts (AT_KEY); whatever the
 * check reads of a node's message it reads again from the file, one node at
 * a time (node_event).  The prefix report compares messages by a 64-bit
 * hash of their bytes (struct sent_msg), so nothing holds a message for
 * longer than it takes to hash it. */
#define AT_KEY "\x01" "at"

/* A message a request sent: the hash of its bytes, the seq and surface
 * position of the node it derives from, and whether it is a system one. */
typedef struct sent_msg {
    uint64_t hash;
    size_t seq, node;
    bool system;
} sent_msg;

/* A re-derivation point: the prefix of `upto` envelopes, asked for at `seq`
 * (on `line`), and the hash of its surface's nodes (nodes_hash). */
typedef struct redo {
    size_t upto, seq, line;
    uint64_t nodes;
} redo;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211u;
    return h;
}
#define FNV_BASIS 1469598103934665603u

/* The shared string `name` of the stubs (borrowed), or NULL. */
static json_t *interned(checker *c, const char *name) {
    static const char *const names[] = {"system/message", "user/message", "assistant/message",
                                        "tool/result", "append"};
    for (size_t i = 0; i < 5; i++)
        if (is(name, names[i])) {
            if (!c->interned[i])
                c->interned[i] = json_string(names[i]);
            return c->interned[i];
        }
    return NULL;
}

/* The stub a spilling check holds for surface event `ev`, whose line starts
 * at `off` (new reference), or NULL when out of memory. */
static json_t *stub_event(checker *c, const json_t *ev, size_t off) {
    json_t *type = interned(c, weir__json_str(ev, "type", ""));
    json_t *op = json_object_get(ev, "surface_op");
    if (json_is_string(op) && is(json_string_value(op), "append"))
        op = interned(c, "append");
    if (!type || !op)
        return NULL;
    return json_pack("{s:O, s:O, s:O, s:I}", "seq", json_object_get(ev, "seq"), "type", type,
                     "surface_op", op, AT_KEY, (json_int_t)off);
}

/* The envelope whose line starts at file offset `off`, read again (new
 * reference), or NULL (c->file->failed says why, or out of memory). */
static json_t *read_at(checker *c, size_t off) {
    size_t have = 0;
    for (;;) {
        if (have == c->rcap) {
            size_t cap = c->rcap ? 2 * c->rcap : 4096;
            char *grown = cap <= WEIR__LOG_LINE_MAX + 1 ? weir__realloc(c->rbuf, cap) : NULL;
            if (!grown) {
                c->oom = true;
                return NULL;
            }
            c->rbuf = grown;
            c->rcap = cap;
        }
        ssize_t got = pread(c->file->fd, c->rbuf + have, c->rcap - have, (off_t)(off + have));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            c->file->failed = errno;
            return NULL;
        }
        bool nl = memchr(c->rbuf + have, '\n', (size_t)got) != NULL;
        have += (size_t)got;
        if (nl || got == 0)
            break;
    }
    size_t o = 0, n;
    bool torn;
    json_error_t jerr;
    json_t *ev = weir__log_read_line(c->rbuf, have, &o, &n, &torn, &jerr);
    if (!ev && json_error_code(&jerr) == json_error_out_of_memory)
        c->oom = true;
    else if (!ev) /* it parsed when it was read first: the file changed */
        c->file->failed = EIO;
    return ev;
}

/* The whole envelope of surface node `held` (a stub, or what the surface
 * holds), new reference, or NULL (out of memory or a read error). */
static json_t *node_event(checker *c, const json_t *held) {
    const json_t *at = json_object_get(held, AT_KEY);
    if (!at)
        return json_incref((json_t *)(uintptr_t)held);
    /* a node appended since the last request is still in c->recent (found
     * by its line: a damaged log may repeat a seq) */
    size_t off = (size_t)json_integer_value(at);
    for (size_t i = json_array_size(c->recent); i-- > 0;)
        if (c->recent_at[i] == off)
            return json_incref(json_array_get(c->recent, i));
    return read_at(c, off);
}

/* What the check's surface holds of event `ev` (new reference), which
 * starts at `off`: its stub (spill), or `ev` without its stream
 * (check_stream read it). */
static json_t *held_event(checker *c, const json_t *ev, size_t off) {
    if (c->spill)
        return stub_event(c, ev, off);
    json_t *lean = weir__surface_lean(ev);
    return lean ? lean : json_incref((json_t *)(uintptr_t)ev);
}

/* Check `ev` (whose line starts at `off`) against surface `s` and apply it:
 * -1 with `msg` when the surface refuses it, else 0 (c->oom when out of
 * memory).  A spilling check brings back whole the node a tool/result
 * rewrite compares itself with. */
static int surface_fold(checker *c, weir__surface *s, const json_t *ev, size_t off, char *msg,
                        size_t size) {
    const char *type = weir__json_str(ev, "type", "");
    if (!c->spill) {
        json_t *held = held_event(c, ev, off);
        int rc = held ? weir__surface_check(s, held, msg, size) : 0;
        if (!held || (rc == 0 && weir__surface_apply(s, held) != WEIR_OK))
            c->oom = true;
        json_decref(held);
        return rc;
    }
    const json_t *op = json_object_get(ev, "surface_op");
    long at = -1;
    json_t *stub = NULL;
    if (is(type, "tool/result") && json_is_object(op) && weir__json_int(op, "start_seq", -1) >= 0 &&
        (at = weir__surface_find(s, (size_t)weir__json_int(op, "start_seq", -1))) >= 0) {
        json_t *whole = node_event(c, weir__surface_event(s, (size_t)at));
        if (!whole) {
            c->oom = c->oom || !c->file->failed;
            return 0;
        }
        stub = weir__surface_swap(s, (size_t)at, whole);
    }
    int rc = weir__surface_check(s, ev, msg, size);
    if (stub)
        json_decref(weir__surface_swap(s, (size_t)at, stub));
    if (rc == 0 && weir__is_surface_type(type)) {
        json_t *held = stub_event(c, ev, off);
        if (!held || weir__surface_apply(s, held) != WEIR_OK)
            c->oom = true;
        json_decref(held);
    }
    return rc;
}

/* The hash of surface `s`'s nodes: each one's seq and place. */
static uint64_t nodes_hash(const weir__surface *s) {
    uint64_t h = FNV_BASIS;
    for (size_t i = 0; i < weir__surface_len(s); i++) {
        uint64_t v[2] = {weir__surface_node(s, i), weir__surface_ord(s, i)};
        h = fnv(h, v, sizeof v);
    }
    return h;
}

/* A re-derivation point at `seq`: the prefix of `upto` envelopes, checked
 * at the end (verify_redos) against the surface folded now. */
static void rederive(checker *c, size_t seq, size_t upto) {
    c->derived_upto = upto;
    if ((c->nredos & (c->nredos - 1)) == 0) { /* 0, 1, 2, 4, ...: full */
        redo *grown = weir__realloc(c->redos, (c->nredos ? 2 * c->nredos : 1) * sizeof *grown);
        if (!grown) {
            c->oom = true;
            return;
        }
        c->redos = grown;
    }
    c->redos[c->nredos++] = (redo){upto, seq, c->line, nodes_hash(c->surface)};
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

/* Fold the log again from its first line, in one pass, and note an error
 * where a re-derivation point's prefix folds to other nodes than the check
 * held there: the derived history is its nodes' messages, so the same
 * nodes derive the same bytes.  A spilling check lets its own surface go
 * first (every point hashed it), so it never holds two. */
static void verify_redos(checker *c) {
    if (!c->nredos || c->oom)
        return;
    if (c->spill) {
        weir__surface_destroy(c->surface);
        c->surface = NULL;
    }
    weir__surface *s = NULL;
    if (weir__surface_create(&s) != WEIR_OK) {
        c->oom = true;
        return;
    }
    log_stream again, *r = NULL;
    if (c->file) {
        weir__log_stream_init(&again, c->file->fd, 0);
        r = &again;
    }
    size_t k = 0;
    char msg[512];
    for (size_t i = 0; k < c->nredos && !c->oom; i++) {
        for (; k < c->nredos && c->redos[k].upto == i; k++) {
            if (nodes_hash(s) == c->redos[k].nodes)
                continue;
            c->line = c->redos[k].line;
            note(c, c->errors, "seq %zu: re-deriving the history from the log prefix differs",
                 c->redos[k].seq);
        }
        if (k == c->nredos || i >= c->accepted)
            break;
        json_t *ev = reread(c, r, c->lines[i]);
        if (!ev) { /* it parsed when it was first read */
            if (!c->file || !c->file->failed)
                c->oom = true;
            break;
        }
        surface_fold(c, s, ev, c->lines[i], msg, sizeof msg);
        json_decref(ev);
        if (c->file && c->file->failed)
            break;
    }
    if (r)
        weir__log_stream_free(r);
    weir__surface_destroy(s);
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
    /* a re-derivation point: the prefix before this answer, once the log
     * has doubled since the last one (check_end adds the whole log;
     * verify_redos folds the log once more for all of them) */
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
static long tools_difference(const json_t *a, const json_t *b) {
    size_t na = json_array_size(a), nb = json_array_size(b);
    for (size_t i = 0; i < na && i < nb; i++)
        if (!json_equal(json_array_get(a, i), json_array_get(b, i)))
            return (long)i;
    return na == nb ? -1 : (long)(na < nb ? na : nb);
}

/* The first index at which the first `na` messages of `a` and the `nb` of
 * `b` differ (the shorter length when one is a prefix of the other), or -1
 * when they are equal. */
static long first_difference(const sent_msg *a, size_t na, const sent_msg *b, size_t nb) {
    for (size_t i = 0; i < na && i < nb; i++)
        if (a[i].hash != b[i].hash)
            return (long)i;
    return na == nb ? -1 : (long)(na < nb ? na : nb);
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

/* Whether `ev` (an envelope, or a surface stub read again) is a
 * system-update system/message (core/engine/driver.c). */
static bool system_update(checker *c, const json_t *ev) {
    if (!is(weir__json_str(ev, "type", ""), "system/message"))
        return false;
    json_t *whole = node_event(c, ev);
    const json_t *m = json_object_get(json_object_get(whole, "data"), "message");
    bool update = is(weir__json_str(json_object_get(m, "source"), "kind", ""), "system-update");
    json_decref(whole);
    return update;
}

/* Add to c->sent what surface node i sends under the route
 * (provider, model): its message, unless it derives none or the request's
 * continuation filter leaves it out (weir__continuation_apply: an assistant
 * message is stale when a node before it has a higher seq).  false when
 * out of memory or the node cannot be read again. */
static bool sent_node(checker *c, size_t i, const char *provider, const char *model) {
    const json_t *held = weir__surface_event(c->surface, i);
    json_int_t seq = weir__json_int(held, "seq", 0);
    const char *type = weir__json_str(held, "type", "");
    bool stale = is(type, "assistant/message") && c->sent_max > seq;
    if (seq > c->sent_max)
        c->sent_max = seq;
    json_t *ev = node_event(c, held), *m = NULL;
    if (!ev || weir__derive_event_shared(ev, &m) != WEIR_OK) {
        json_decref(ev);
        return false;
    }
    json_t *one = m ? json_pack("[o]", m) : NULL;
    json_t *kept = one ? weir__continuation_filter(one, provider, model, &stale, NULL) : NULL;
    bool ok = !m || kept;
    const json_t *out = json_array_get(kept, 0);
    char *bytes = out ? weir__json_dump(out) : NULL;
    if (out && !bytes)
        ok = false;
    if (bytes && c->sent_len == c->sent_cap) {
        size_t cap = c->sent_cap ? 2 * c->sent_cap : 64;
        sent_msg *grown = weir__realloc(c->sent, cap * sizeof *grown);
        if (grown) {
            c->sent = grown;
            c->sent_cap = cap;
        } else {
            ok = false;
        }
    }
    if (ok && bytes)
        c->sent[c->sent_len++] = (sent_msg){fnv(FNV_BASIS, bytes, strlen(bytes)), (size_t)seq, i,
                                            is(weir__json_str(out, "role", ""), "system")};
    weir__free(bytes);
    json_decref(kept);
    json_decref(one);
    json_decref(ev);
    return ok;
}

/*
 * What the request answered now sends (c->sent): the surface's derivation
 * with the continuations the request/context in force drops, as the
 * driver's request_messages.  Hashed once, then grown in place by the nodes
 * appended since (*grown) while no replace happened and the route is the
 * same: a new message at the end is never stale and the older ones filter
 * as before, so the last request's messages are a prefix of these and a
 * long session's check costs each message once, not once a request.  When
 * it cannot grow, the last request's messages go to *prev (the caller
 * frees them).  false when out of memory or a read error.
 */
static bool sent_messages(checker *c, bool *grown, sent_msg **prev) {
    const weir__surface *s = c->surface;
    uint64_t gen = weir__surface_replace_generation(s);
    const char *provider = weir__json_str(c->context, "provider", NULL);
    const char *model = weir__json_str(c->context, "model", NULL);
    char *route = weir__asprintf("%s\n%s", provider ? provider : "", model ? model : "");
    *prev = NULL;
    if (!route)
        return false;
    *grown = c->sent_ok && gen == c->sent_gen && !strcmp(route, c->sent_route);
    if (*grown) {
        weir__free(route);
    } else {
        *prev = c->sent;
        c->sent = NULL;
        c->sent_len = c->sent_cap = c->sent_nodes = 0;
        c->sent_max = -1;
        weir__free(c->sent_route);
        c->sent_route = route;
        c->sent_gen = gen;
    }
    c->sent_ok = false; /* until every node is in: start again next time */
    for (; c->sent_nodes < weir__surface_len(s); c->sent_nodes++)
        if (!sent_node(c, c->sent_nodes, provider, model))
            return false;
    c->sent_ok = true;
    return true;
}

/*
 * The request answered at `seq` (the header so far and the surface before
 * the answer) against the previous one: append-only when the config and
 * tools are equal and the previous messages are a prefix of its messages.
 * Otherwise a break names the first position that differs, the event that
 * caused it and the hook (attribute).  The messages are what was sent
 * (sent_messages), so a route change or a replace that made a continuation
 * stale is a break where the request changed, and a message never sent
 * takes no position.
 */
static void prefix_request(checker *c, size_t seq) {
    bool grown = false;
    sent_msg *prev = NULL;
    if (!sent_messages(c, &grown, &prev)) {
        weir__free(prev);
        if (!c->file || !c->file->failed)
            c->oom = true;
        return;
    }
    const json_t *header = c->header, *prev_header = json_object_get(
                                          json_object_get(c->prev_header, "data"), "header");
    c->requests++;
    char at[64] = "";
    const json_t *cause = NULL;
    const char *hook = NULL;
    long i;
    if (c->prev_seq < 0) {
        /* the first request extends nothing */
    } else if (!json_equal(json_object_get(prev_header, "config"), json_object_get(header, "config"))) {
        snprintf(at, sizeof at, "config");
        cause = c->header_ev;
        hook = "agent/request";
    } else if ((i = tools_difference(json_object_get(prev_header, "tools"),
                                     json_object_get(header, "tools"))) >= 0) {
        snprintf(at, sizeof at, "tools[%ld]", i);
        cause = c->header_ev;
        hook = "system-prompt/assemble";
    } else if (!grown && /* grown from it: a prefix */
               (i = first_difference(prev, c->prev_len, c->sent, c->sent_len)) >= 0 &&
               (size_t)i < c->prev_len) {
        if (i == 0 && prev[0].system)
            snprintf(at, sizeof at, "system");
        else
            snprintf(at, sizeof at, "messages[%ld]", i);
        const json_t *node = (size_t)i < c->sent_len
                                 ? weir__surface_event(c->surface, c->sent[i].node)
                                 : NULL;
        if (node && weir__json_int(node, "seq", -1) > c->prev_seq)
            cause = node;
        size_t k;
        const json_t *ev;
        json_array_foreach(c->recent, k, ev) { /* else the first replace since */
            if (!cause && json_is_object(json_object_get(ev, "surface_op")))
                cause = ev;
        }
        if (cause && system_update(c, cause))
            hook = "system-prompt/assemble";
    }
    weir__free(prev);
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
    c->prev_len = c->sent_len;
    json_decref(c->prev_header);
    c->prev_header = json_incref(c->header_ev);
    c->prev_seq = (json_int_t)seq;
    json_array_clear(c->recent);
}

/* Keep `ev` for the next request's report when it may explain a break. */
static void prefix_note(checker *c, json_t *ev, const char *type) {
    if (!json_object_get(ev, "surface_op") && !is(type, "request/header") &&
        strncmp(type, "hook/", 5) != 0 && !plugin_type(type))
        return;
    size_t n = json_array_size(c->recent);
    if (n == c->recent_cap) {
        size_t cap = c->recent_cap ? 2 * c->recent_cap : 16;
        size_t *grown = weir__realloc(c->recent_at, cap * sizeof *grown);
        if (!grown) {
            c->oom = true;
            return;
        }
        c->recent_at = grown;
        c->recent_cap = cap;
    }
    if (json_array_append(c->recent, ev) != 0)
        c->oom = true;
    else
        c->recent_at[n] = c->line_at - c->at_base;
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
    if (surface_fold(c, c->surface, ev, c->line_at - c->at_base, msg, sizeof msg) < 0)
        note(c, c->errors, "seq %zu: %s", seq, msg);
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
    json_t *want = json_array(); /* [[id, message index], ...] */
    size_t n = weir__surface_len(c->surface), index = 0;
    for (size_t i = 0; want && i <= n && !c->oom; i++) {
        json_t *ev = NULL, *m = NULL;
        if (i < n) { /* node i's message, read again when the surface holds a stub */
            ev = node_event(c, weir__surface_event(c->surface, i));
            if (!ev || weir__derive_event_shared(ev, &m) != WEIR_OK) {
                c->oom = c->oom || !c->file || !c->file->failed;
                json_decref(ev);
                break;
            }
            if (!m) { /* it contributes no message */
                json_decref(ev);
                continue;
            }
        }
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
                    want, json_pack("[s,I]", weir__json_str(b, "id", ""), (json_int_t)index)) != 0)
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
        index++;
        json_decref(m);
        json_decref(ev);
    }
    if (!want)
        c->oom = true;
    json_decref(want);
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
    verify_redos(c);
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
    c.spill = file && !derived;
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
        if (!file || !file->failed)
            check_end(&c); /* a spilling check reads node lines again here */
        if (file && file->failed) /* a read error, or memory for the window */
            failed = file->failed;
    }
    size_t events = c.accepted;
    if (derived && !c.oom && !failed && json_array_size(c.errors) == 0 &&
        !(*derived = weir__surface_derive(c.surface)))
        c.oom = true;
    weir__surface_destroy(c.surface);
    weir__free(c.lines);
    weir__free(c.redos);
    weir__free(c.recent_at);
    weir__free(c.rbuf);
    for (size_t i = 0; i < 5; i++)
        json_decref(c.interned[i]);
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
    weir__free(c.sent);
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
