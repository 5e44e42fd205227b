/*
 * core/log/session_log.c - the durable, append-only session log (docs/session-log.md).
 *
 * Every append is validated first (type, data, surface op), serialized into
 * the log's one reused line buffer, handed to the session store (core/log/store.h:
 * the file store writes it with a single write()), then committed to memory
 * (event array, surface, folds).  Memory for the commit is reserved before
 * the store's append, so a stored event is always committed and a failed
 * append changes nothing.  The file I/O, the writer's lock and the torn-tail
 * cut live in the store (core/log/store_file.c).
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "continuation.h"
#include "log_fold.h"
#include "session_log.h"
#include "store.h"
#include "tally.h"
#include "surface.h"
#include "weir/host.h"

struct weir__log {
    char *path; /* the file, or "<store>:<id>" for a store without files */
    weir__store_ref store;
    void *handle; /* the store's open session */
    uint64_t epoch; /* the writer's fencing epoch */
    char *line; /* the reused serialization buffer of append */
    size_t line_cap, wlen;
    bool readonly;
    atomic_bool fenced; /* the store answered WEIR_E_LEASE_LOST: no append again (read
                           without the lock by weir__log_lease_lost) */
    bool broken; /* a batch is in memory but not in the store: no append again */
    bool sync_owed; /* a deferred sync point (weir__log_defer_sync) not yet synced */
    size_t synced; /* count at the last sync that succeeded; SIZE_MAX: none since the open */
    weir__fsync policy;
    weir__type_known_fn known;
    void *known_ud;
    pthread_mutex_t mu_storage;
    pthread_mutex_t *mu; /* &mu_storage; a pointer so const accessors can lock */

    json_t **events; /* references; index == seq; NULL while released (weir__log_trim) */
    size_t count, cap;
    /* The lines of the envelopes a trim may release, to read them back:
     * line_len[seq] bytes at text + line_at[seq]; 0 for an envelope kept for
     * good (the request header and context the folds borrow).  Releasing a
     * message the surface holds frees nothing until a replace shadows it. */
    size_t *line_at;
    uint32_t *line_len;
    char *text;
    size_t text_len, text_cap;
    size_t trim_from;   /* the envelopes before it were released already */
    size_t trim_next;   /* [trim_from, trim_next): what the next trim releases */
    size_t *remade;     /* seqs read back since the last trim (released again by the next) */
    size_t remade_n, remade_cap;
    /* Envelopes lent this turn (weir__log_event_lend): lent[seq] has LENT
     * and seq is in lent_seqs until the turn's end (an idle trim); an
     * envelope read back from the store has FROM_STORE until released. */
    uint8_t *lent;
    size_t *lent_seqs;
    size_t lent_n, lent_cap;
    weir__surface *surface;
    /* An open that resumed from a checkpoint read no line before `base`
     * but the surface's and the kept ones (docs/session-log.md, "Resume
     * from a checkpoint"); any other older envelope is read back from the
     * store when asked (FROM_STORE in lent[]). */
    size_t base;
    weir__surface *base_surface; /* the surface it rebuilt (NULL: none) */

    /* folds */
    const json_t *header, *context; /* borrowed from events */
    int last_turn;
    bool turn_open, step_open;
    json_int_t open_turn, open_step; /* their numbers, while open */
    size_t turn_start_seq, step_start_seq;

    /* derivation cache (weir__log_derive) */
    json_t *derived;
    size_t derived_nodes;
    uint64_t derived_gen;

    /* what the events add up to (core/log/tally.h), and the checkpoints
     * that record it (docs/session-log.md, "Checkpoints") */
    weir__tally tally;
    size_t bytes;            /* of the log's accepted lines, newlines included */
    size_t checkpoint_at;    /* the offset of the last log/checkpoint line (0: none) */
    size_t checkpoint_every; /* bytes between checkpoints */

    /* observer delivery, in seq order, outside the lock */
    weir__log_observer_fn observer;
    void *observer_ud;
    size_t delivered;
    bool delivering;
};

static int refuse_append(const weir__log *log, weir_error *err);
static int sync_now(weir__log *log, weir_error *err);
static void keep_line(weir__log *log, size_t seq, const char *line, size_t n);
static bool keeps_line(const json_t *ev, size_t n);

#define LENT 1u
#define FROM_STORE 2u

static const char *const core_types[] = {
    "turn/start",     "turn/end",          "step/start",         "step/end",  "system/message",
    "user/message",   "assistant/message", "assistant/attempt",  "tool/call", "tool/result",
    "request/header", "request/context",   "agent/inbox/spliced"};

bool weir__log_is_core_type(const char *type) {
    for (size_t i = 0; type && i < sizeof core_types / sizeof *core_types; i++)
        if (strcmp(type, core_types[i]) == 0)
            return true;
    return false;
}

/* The line buffer's first size.  An idle trim keeps a buffer of this size
 * (freeing it would cost glibc a consolidation of its fast bins at the next
 * turn's first append, ~18 k instructions a turn) and frees a larger one. */
#define LINE_FIRST 4096

static void lock(const weir__log *log) { pthread_mutex_lock(log->mu); }
static void unlock(const weir__log *log) { pthread_mutex_unlock(log->mu); }

int weir__fsync_parse(const char *s, weir__fsync *out) {
    if (!out)
        return -1;
    if (!s || strcmp(s, "step") == 0)
        *out = WEIR__FSYNC_STEP;
    else if (strcmp(s, "always") == 0)
        *out = WEIR__FSYNC_ALWAYS;
    else if (strcmp(s, "none") == 0)
        *out = WEIR__FSYNC_NONE;
    else
        return -1;
    return 0;
}

/* --- validation and commit ---------------------------------------------- */

/* Whether the log accepts events of `type` (`ignorable` events always). */
static bool type_accepted(const weir__log *log, const char *type, bool ignorable) {
    return weir__log_is_core_type(type) || ignorable ||
           (log->known && log->known(type, log->known_ud));
}

/* Room for one more event; the surface's node array grows only for a
 * surface event (`surface`): another thread's append (a sender's
 * agent/inbox/spliced) must not move the array the driver reads unlocked
 * (weir__log_surface). */
static int reserve(weir__log *log, bool surface) {
    if (log->count == log->cap) {
        size_t cap = log->cap ? log->cap * 2 : 64;
        json_t **ev = weir__realloc(log->events, cap * sizeof *ev);
        if (!ev)
            return WEIR_E_NOMEM;
        log->events = ev;
        size_t *at = weir__realloc(log->line_at, cap * sizeof *at);
        if (!at)
            return WEIR_E_NOMEM;
        log->line_at = at;
        uint32_t *len = weir__realloc(log->line_len, cap * sizeof *len);
        if (!len)
            return WEIR_E_NOMEM;
        log->line_len = len;
        uint8_t *lent = weir__realloc(log->lent, cap * sizeof *lent);
        if (!lent)
            return WEIR_E_NOMEM;
        log->lent = lent;
        log->cap = cap;
    }
    return surface ? weir__surface_reserve(log->surface, 1) : WEIR_OK;
}

/* Push a validated envelope (steals it) after reserve(); cannot fail. */
static void commit(weir__log *log, json_t *ev) {
    log->line_len[log->count] = 0;
    log->lent[log->count] = 0;
    log->events[log->count++] = ev;
    json_t *lean = weir__surface_lean(ev);
    weir__surface_apply(log->surface, lean ? lean : ev);
    json_decref(lean);
    const char *type = weir__json_str(ev, "type", "");
    const json_t *data = json_object_get(ev, "data");
    int turn = (int)weir__json_int(data, "turn", 0);
    weir__tally_event(&log->tally, ev);
    if (strcmp(type, WEIR__LOG_CHECKPOINT) == 0)
        log->checkpoint_at = log->bytes; /* the lines before it */
    if (strcmp(type, "turn/start") == 0) {
        log->turn_open = true;
        log->step_open = false;
        log->open_turn = weir__json_int(data, "turn", -1);
        log->turn_start_seq = log->count - 1;
        if (turn > log->last_turn)
            log->last_turn = turn;
    } else if (strcmp(type, "turn/end") == 0) {
        log->turn_open = log->step_open = false;
    } else if (strcmp(type, "step/start") == 0) {
        log->step_open = true;
        log->open_step = weir__json_int(data, "step", -1);
        log->step_start_seq = log->count - 1;
    } else if (strcmp(type, "step/end") == 0) {
        log->step_open = false;
    } else if (strcmp(type, "request/header") == 0) {
        log->header = json_object_get(data, "header");
    } else if (strcmp(type, "request/context") == 0) {
        log->context = data;
    }
}

/* The request header fold reads request/header data: it must be canonical
 * (docs/session-log.md).  0 or -1 + msg. */
static int check_header(const json_t *data, char *msg, size_t size) {
    static const char *const reasons[] = {"initial", "resume", "change", "series"};
    const json_t *header = json_object_get(data, "header");
    const char *reason = weir__json_str(data, "reason", "");
    const json_t *starts = json_object_get(data, "starts_series");
    const json_t *tools = json_object_get(header, "tools");
    bool known = false;
    for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++)
        known = known || strcmp(reason, reasons[i]) == 0;
    const char *why = !json_is_object(header) ? "data.header must be an object"
                      : !json_is_object(json_object_get(header, "config"))
                          ? "data.header.config must be an object"
                      : tools && (!json_is_array(tools) || json_array_size(tools) == 0)
                          ? "data.header.tools must be a non-empty array when present"
                      : !known ? "data.reason must be \"initial\", \"resume\", \"change\" or \"series\""
                      : starts && !json_is_true(starts) ? "data.starts_series may only be true"
                                                        : NULL;
    if (!why)
        return 0;
    snprintf(msg, size, "request/header: %s", why);
    return -1;
}

/*
 * The fields the log's own folds (nesting, repair, the inbox, the checker)
 * read from core events: without them a log could be accepted but not
 * repaired into a valid one.  "turn"/"step" are integers 0..INT_MAX (the
 * folds keep them in an int), "start" an integer >= 0, "call_id" a
 * non-empty string, "reason" an object with a string "kind".  0 or -1 + msg.
 */
static int check_core_shape(const char *type, const json_t *data, char *msg, size_t size) {
    static const struct {
        const char *type;
        const char *fields[5];
    } shapes[] = {
        {"turn/start", {"turn"}},
        {"turn/end", {"turn", "reason"}},
        {"step/start", {"turn", "step"}},
        {"step/end", {"turn", "step"}},
        {"tool/call", {"turn", "step", "call_id", "name", "arguments"}},
        {"tool/result", {"turn", "step"}},
        {"assistant/message", {"turn", "step"}},
        {"assistant/attempt", {"turn", "step"}},
        {"request/context", {"provider", "model"}},
        {"agent/inbox/spliced", {"target", "start", "inserted"}},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        if (strcmp(type, shapes[i].type) != 0)
            continue;
        for (size_t f = 0; f < 5 && shapes[i].fields[f]; f++) {
            const char *name = shapes[i].fields[f];
            const json_t *v = json_object_get(data, name);
            const char *want = NULL;
            if (!strcmp(name, "turn") || !strcmp(name, "step"))
                want = json_is_integer(v) && json_integer_value(v) >= 0 &&
                               json_integer_value(v) <= INT_MAX
                           ? NULL
                           : "an integer from 0 to 2147483647";
            else if (!strcmp(name, "start"))
                want = json_is_integer(v) && json_integer_value(v) >= 0 ? NULL
                                                                         : "an integer >= 0";
            else if (!strcmp(name, "reason"))
                want = json_is_string(json_object_get(v, "kind")) ? NULL
                                                                  : "an object with a string kind";
            else if (!strcmp(name, "inserted"))
                want = json_is_array(v) ? NULL : "an array";
            else if (!strcmp(name, "call_id") || !strcmp(name, "provider") ||
                     !strcmp(name, "model") || !strcmp(name, "target"))
                want = json_is_string(v) && json_string_value(v)[0] ? NULL
                                                                    : "a non-empty string";
            else
                want = json_is_string(v) ? NULL : "a string";
            if (want) {
                snprintf(msg, size, "%s: data.%s must be %s", type, name, want);
                return -1;
            }
        }
        return 0;
    }
    return 0;
}

int weir__log_check_shape(const char *type, const json_t *data, char *msg, size_t size) {
    if (!type || !json_is_object(data)) {
        snprintf(msg, size, "%s: data must be an object", type ? type : "(no type)");
        return -1;
    }
    if (strcmp(type, "request/header") == 0 && check_header(data, msg, size) < 0)
        return -1;
    return check_core_shape(type, data, msg, size);
}

/* Validate an envelope read from disk or built by append.  0 or -1 + msg. */
int weir__log_check_envelope(const json_t *ev, char *msg, size_t size) {
    const json_t *seq = json_object_get(ev, "seq");
    const json_t *ign = json_object_get(ev, "ignorable");
    const char *type = weir__json_str(ev, "type", NULL);
    const char *why = !json_is_object(ev)                                ? "an event must be a JSON object"
                      : !json_is_integer(seq) || json_integer_value(seq) < 0 ? "seq must be an integer >= 0"
                      : !json_is_integer(json_object_get(ev, "time"))    ? "time must be an integer"
                      : !type || !*type                                  ? "type must be a non-empty string"
                                                                         : NULL;
    if (why) {
        snprintf(msg, size, "%s", why);
        return -1;
    }
    if (!json_is_object(json_object_get(ev, "data"))) {
        snprintf(msg, size, "%s: data must be an object", type);
        return -1;
    }
    if (ign && !json_is_true(ign)) {
        snprintf(msg, size, "%s: ignorable may only be true", type);
        return -1;
    }
    return 0;
}

static int plan_repair(weir__log *log, json_t *todo, const char *why, bool whole);

/* Whether the open step has a tool call without a result (crash repair's
 * fold); false when memory ran out: then the check is skipped, not the
 * event. */
static bool step_unanswered(const weir__log *log) {
    json_t *todo = json_array();
    bool left = todo && plan_repair((weir__log *)(uintptr_t)log, todo, NULL, false) == WEIR_OK &&
                json_array_size(todo) > 0;
    json_decref(todo);
    return left;
}

/* Turns and steps nest as `weir log --check` requires, and a step ends with
 * every tool call answered: an event that would make the log fail its own
 * check is refused, never written. */
static int check_nesting(const weir__log *log, const char *type, const json_t *data, bool live,
                         char *msg, size_t size) {
    json_int_t turn = weir__json_int(data, "turn", -1), step = weir__json_int(data, "step", -1);
    const char *why = NULL;
    if (strcmp(type, "turn/start") == 0) {
        if (log->turn_open)
            why = "a turn is open";
    } else if (strcmp(type, "turn/end") == 0 || strcmp(type, "step/start") == 0) {
        if (!log->turn_open)
            why = "no turn is open";
        else if (turn != log->open_turn)
            why = "it is not the open turn";
        else if (log->step_open)
            why = "a step is open";
    } else if (strcmp(type, "step/end") == 0) {
        if (!log->step_open)
            why = "no step is open";
        else if (turn != log->open_turn || step != log->open_step)
            why = "it is not the open step";
        else if (live && step_unanswered(log)) /* at open the checker's fold has it */
            why = "a tool call of the step has no tool/result";
    } else {
        return 0;
    }
    if (!why)
        return 0;
    char open[96] = "";
    if (log->step_open)
        snprintf(open, sizeof open,
                 " (turn %" JSON_INTEGER_FORMAT ", step %" JSON_INTEGER_FORMAT " is open)",
                 log->open_turn, log->open_step);
    else if (log->turn_open)
        snprintf(open, sizeof open, " (turn %" JSON_INTEGER_FORMAT " is open)", log->open_turn);
    if (step >= 0)
        snprintf(msg, size, "%s for turn %" JSON_INTEGER_FORMAT ", step %" JSON_INTEGER_FORMAT
                 ": %s%s", type, turn, step, why, open);
    else
        snprintf(msg, size, "%s for turn %" JSON_INTEGER_FORMAT ": %s%s", type, turn, why, open);
    return -1;
}

/* Whether `ev` may be the log's next event.  `built`: build_envelope made it
 * for this seq from a non-empty type and an object data, so its envelope and
 * seq hold by construction and only what it carries is checked. */
static int validate(const weir__log *log, const json_t *ev, bool built, char *msg, size_t size) {
    const json_t *ign = json_object_get(ev, "ignorable");
    const char *type = weir__json_str(ev, "type", NULL);
    if (!built && weir__log_check_envelope(ev, msg, size) < 0)
        return -1;
    if (!built && json_integer_value(json_object_get(ev, "seq")) != (json_int_t)log->count) {
        snprintf(msg, size, "seq must be %zu", log->count);
        return -1;
    }
    if (!type_accepted(log, type, ign != NULL)) {
        snprintf(msg, size, "unknown event type '%s' (not registered, not ignorable)", type);
        return -1;
    }
    if (weir__log_check_shape(type, json_object_get(ev, "data"), msg, size) < 0)
        return -1;
    char smsg[512];
    if (weir__surface_check(log->surface, ev, smsg, sizeof smsg) < 0) {
        snprintf(msg, size, "%s: %s", type, smsg);
        return -1;
    }
    return check_nesting(log, type, json_object_get(ev, "data"), built, msg, size);
}

/* --- open ---------------------------------------------------------------- */

json_t *weir__log_read_line(const char *buf, size_t len, size_t *off, size_t *n, bool *torn,
                            json_error_t *jerr) {
    json_error_t local;
    if (!jerr)
        jerr = &local;
    jerr->text[0] = '\0';
    jerr->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)json_error_unknown;
    const char *nl = memchr(buf + *off, '\n', len - *off);
    *n = nl ? (size_t)(nl - (buf + *off)) : len - *off;
    json_t *ev = NULL;
    if (*n > WEIR__LOG_LINE_MAX && nl) {
        snprintf(jerr->text, sizeof jerr->text, "line of %zu bytes is over the %zu MiB cap", *n,
                 WEIR__LOG_LINE_MAX >> 20);
        *off += *n + 1;
        *torn = false;
        return NULL;
    }
    if (*n <= WEIR__LOG_LINE_MAX)
        ev = weir__json_loadb(buf + *off, *n, JSON_REJECT_DUPLICATES, jerr);
    /* only a last line without its newline is torn: every append writes
     * whole lines, so a crash mid-write cuts before a newline; a complete
     * line that does not parse is corruption, never cut (nor is a line
     * that memory could not parse) */
    *torn = !nl;
    if (*torn) {
        json_decref(ev);
        ev = NULL;
    }
    *off += *n + (nl ? 1 : 0);
    return ev;
}

/* What open folds: each envelope the one reader accepts is committed, and
 * released at once when its line can bring it back (keep_line), so an open
 * holds the bytes of the log, not its trees (docs/session-log.md). */
typedef struct loader {
    weir__log *log;
    const char *buf;
    bool in_place; /* buf becomes the log's text (the file store's, weir__malloc'd) */
    size_t buf_off; /* where the lines read start in buf */
    size_t at;      /* and in the log (both 0 but when resuming from a checkpoint) */
    size_t good; /* bytes of the accepted lines, their newlines included */
    char msg[640];
    int rc; /* WEIR_OK, or why a line was refused (msg) */
} loader;

static bool load_one(json_t *ev, size_t off, size_t n, void *ud) {
    loader *ld = ud;
    weir__log *log = ld->log;
    if (validate(log, ev, false, ld->msg, sizeof ld->msg) < 0) {
        ld->rc = WEIR_E_LOG_CORRUPT;
        return false;
    }
    if (reserve(log, weir__is_surface_type(weir__json_str(ev, "type", ""))) != WEIR_OK) {
        ld->rc = WEIR_E_NOMEM;
        return false;
    }
    size_t seq = log->count;
    log->bytes = ld->at + off;
    commit(log, json_incref(ev));
    log->bytes = ld->at + off + n + 1;
    if (ld->in_place && keeps_line(ev, n)) {
        log->line_at[seq] = ld->buf_off + off;
        log->line_len[seq] = (uint32_t)n;
    } else if (!ld->in_place) {
        keep_line(log, seq, ld->buf + ld->buf_off + off, n);
    }
    if (log->line_len[seq] > 0) {
        json_decref(log->events[seq]);
        log->events[seq] = NULL;
    }
    ld->good = off + n + 1;
    return true;
}

int weir__log_refuse(const char *path, const json_t *report, weir_error *err) {
    const json_t *errors = json_object_get(report, "errors");
    size_t n = json_array_size(errors);
    const char *first = json_string_value(json_array_get(errors, 0));
    json_int_t line = weir__json_int(report, "error_line", 0);
    char head[32];
    int k = snprintf(head, sizeof head, "line %" JSON_INTEGER_FORMAT ": ", line);
    if (first && k > 0 && strncmp(first, head, (size_t)k) == 0)
        first += k; /* "FILE:LINE: what" says where once */
    else if (first && strncmp(first, "seq ", 4) == 0 && strstr(first, ": "))
        first = strstr(first, ": ") + 2;
    char more[96] = "";
    if (n > 1)
        snprintf(more, sizeof more, " (and %zu more: see weir log --check)", n - 1);
    /* what an older weir wrote, and weir_log_repair mends */
    const char *hint =
        first && strstr(first, " repeats one of step ") ? "; weir log --repair mends it" : "";
    return weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL, "%s:%" JSON_INTEGER_FORMAT ": %s%s%s",
                     path, line, first ? first : "invalid", more, hint);
}

/* The one reader's verdict on what a load read: WEIR_OK, or the error an
 * open answers (a line load_one refused, memory, a refused log). */
static int load_verdict(weir__log *log, int rc, const loader *ld, const json_t *report,
                        weir_error *err) {
    if (rc == WEIR_E_NOMEM && ld->rc == WEIR_E_LOG_CORRUPT) /* a line load_one refused */
        return weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL, "%s: seq %zu: %s", log->path,
                         log->count, ld->msg);
    if (rc == WEIR_E_NOMEM)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory",
                         log->path);
    if (rc == WEIR_OK && !json_is_true(json_object_get(report, "ok")))
        return weir__log_refuse(log->path, report, err);
    return rc;
}

/* Take the read buffer `buf` (`len` bytes, of which `good` were accepted
 * from `buf_off` on) as the log's text when the lines point into it, else
 * give it back; then cut a torn tail the writer found. */
static int load_done(weir__log *log, const loader *ld, char *buf, size_t len, int rc,
                     weir_error *err) {
    const weir_store *vt = log->store.vt;
    size_t good = ld->buf_off + ld->good;
    if (rc == WEIR_OK && ld->in_place && buf) {
        log->text = buf; /* weir__log_close frees it */
        log->text_len = good;
        log->text_cap = len + 1;
        buf = NULL;
    }
    if (buf)
        vt->buffer_free(log->store.self, buf);
    if (rc == WEIR_OK && good < len && !log->readonly) {
        weir__warn("weir: %s: dropped a torn last line (%zu bytes)", log->path, len - good);
        if (vt->truncate)
            rc = vt->truncate(log->store.self, log->handle, ld->at + ld->good, err);
    }
    return rc;
}

/* Read every line of the session and fold it. */
static int load_whole(weir__log *log, weir_error *err) {
    const weir_store *vt = log->store.vt;
    char *buf = NULL;
    size_t len = 0;
    json_t *report = NULL;
    int rc = vt->read(log->store.self, log->handle, 0, &buf, &len, err);
    /* the file store's buffer is weir__malloc'd and freed with weir__free:
     * it becomes the text the lines are read back from, not copied */
    loader ld = {.log = log, .buf = buf, .in_place = vt == weir__store_file().vt,
                 .rc = WEIR_OK};
    if (rc == WEIR_OK)
        rc = weir__log_check_each(buf, len, log->known, log->known_ud, load_one, &ld, &report,
                                  err);
    rc = load_verdict(log, rc, &ld, report, err);
    json_decref(report);
    return load_done(log, &ld, buf, len, rc, err);
}

/* --- resume from the last checkpoint (docs/session-log.md) --------------- */

/* load_from_checkpoint's answer when the session has no checkpoint to
 * start from, or what it read does not hold together: read it whole. */
#define RESUME_NO 1

/* An old envelope, never read since the open (seq < base, not kept), read
 * back from the store: a new reference, or NULL (out of memory, or the
 * store failed: the caller sees what it sees for memory). */
static json_t *read_back(const weir__log *log, size_t seq) {
    const weir_store *vt = log->store.vt;
    if (!vt->read_ranges)
        return NULL;
    uint64_t r[2] = {seq, seq};
    char *buf = NULL;
    size_t len = 0, off = 0, n;
    bool torn;
    if (vt->read_ranges(log->store.self, log->handle, r, 1, &buf, &len, NULL) != WEIR_OK)
        return NULL;
    json_t *ev = buf ? weir__log_read_line(buf, len, &off, &n, &torn, NULL) : NULL;
    vt->buffer_free(log->store.self, buf);
    if (ev && (json_integer_value(json_object_get(ev, "seq")) != (json_int_t)seq ||
               weir__log_check_envelope(ev, NULL, 0) < 0)) {
        json_decref(ev);
        ev = NULL;
    }
    return ev;
}

/* Free what a load put in the log, leaving it as open_common made it.
 * WEIR_E_NOMEM when a new surface could not be made. */
static int reset_loaded(weir__log *log) {
    memset(&log->tally, 0, sizeof log->tally);
    if (!log->events && !log->base_surface && weir__surface_len(log->surface) == 0)
        return WEIR_OK; /* nothing was loaded */
    for (size_t i = 0; i < log->count; i++)
        json_decref(log->events[i]);
    weir__free(log->events);
    weir__free(log->line_at);
    weir__free(log->line_len);
    weir__free(log->lent);
    weir__free(log->text);
    log->events = NULL;
    log->line_at = NULL;
    log->line_len = NULL;
    log->lent = NULL;
    log->text = NULL;
    log->text_len = log->text_cap = 0;
    log->count = log->cap = log->base = log->bytes = log->checkpoint_at = 0;
    weir__surface_destroy(log->surface);
    weir__surface_destroy(log->base_surface);
    log->surface = log->base_surface = NULL;
    log->header = log->context = NULL;
    log->last_turn = 0;
    log->turn_open = log->step_open = false;
    return weir__surface_create(&log->surface) == WEIR_OK ? WEIR_OK : WEIR_E_NOMEM;
}

typedef struct pre_line {
    size_t seq, off, n; /* its line: n bytes at off in the read buffer */
    json_t *ev;
} pre_line;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The ranges to read for checkpoint `data` at seq `cp`: its runs, its kept
 * seqs and [cp, end], sorted and merged, in *out (weir__free) of *n pairs. */
static bool resume_ranges(const json_t *runs, const json_t *keep, size_t cp, uint64_t **out,
                          size_t *n) {
    size_t max = json_array_size(runs) + json_array_size(keep) + 1, k = 0;
    uint64_t *v = weir__malloc(max * 2 * sizeof *v);
    if (!v)
        return false;
    size_t i;
    const json_t *x;
    json_array_foreach(runs, i, x) {
        v[2 * k] = (uint64_t)json_integer_value(json_array_get(x, 0));
        v[2 * k++ + 1] = (uint64_t)json_integer_value(json_array_get(x, 1));
    }
    json_array_foreach(keep, i, x) {
        v[2 * k] = v[2 * k + 1] = (uint64_t)json_integer_value(x);
        k++;
    }
    v[2 * k] = cp;
    v[2 * k++ + 1] = UINT64_MAX;
    qsort(v, k, 2 * sizeof *v, cmp_u64); /* by first */
    size_t m = 0;
    for (i = 0; i < k; i++) {
        if (m > 0 && (v[2 * m - 1] == UINT64_MAX || v[2 * i] <= v[2 * m - 1] + 1)) {
            if (v[2 * i + 1] > v[2 * m - 1])
                v[2 * m - 1] = v[2 * i + 1];
        } else {
            v[2 * m] = v[2 * i];
            v[2 * m++ + 1] = v[2 * i + 1];
        }
    }
    *out = v;
    *n = m;
    return true;
}

/* The line of `pre` (`np`, seq ascending) with seq `seq`, or NULL. */
static pre_line *pre_find(pre_line *pre, size_t np, size_t seq) {
    size_t lo = 0, hi = np;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pre[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < np && pre[lo].seq == seq ? &pre[lo] : NULL;
}

/* Put the old envelope `p` in the log at its seq, as a load would. */
static void keep_pre(weir__log *log, const loader *ld, pre_line *p) {
    size_t seq = p->seq;
    if (log->events[seq] || log->line_len[seq])
        return; /* in a run and kept */
    log->events[seq] = json_incref(p->ev);
    if (ld->in_place && keeps_line(p->ev, p->n)) {
        log->line_at[seq] = p->off;
        log->line_len[seq] = (uint32_t)p->n;
    } else if (!ld->in_place) {
        keep_line(log, seq, ld->buf + p->off, p->n);
    }
    if (log->line_len[seq] > 0) {
        json_decref(log->events[seq]);
        log->events[seq] = NULL;
    }
}

/*
 * Open from the session's last log/checkpoint: read its surface's runs, its
 * kept events and the lines from it on (one read_ranges), rebuild the
 * surface and the folds it names, and fold the rest with the one reader
 * seeded with them; that reader verifies the checkpoint against what was
 * rebuilt, so a checkpoint that does not hold sends the open back to the
 * whole session (RESUME_NO), never a wrong surface.
 */
static int load_from_checkpoint(weir__log *log, weir_error *err) {
    const weir_store *vt = log->store.vt;
    void *self = log->store.self;
    uint64_t cp64 = 0;
    if (!vt->find_last || !vt->read_ranges ||
        vt->find_last(self, log->handle, WEIR__LOG_CHECKPOINT, &cp64, NULL) != WEIR_OK ||
        cp64 == 0 || cp64 >= SIZE_MAX / 2)
        return RESUME_NO;
    size_t cp = (size_t)cp64;
    char *buf = NULL;
    size_t len = 0, off = 0, n, at = 0;
    bool torn;
    uint64_t one[2] = {cp64, cp64}, applied = 0;
    /* the checkpoint itself */
    int rc = vt->read_ranges(self, log->handle, one, 1, &buf, &len, err);
    if (rc != WEIR_OK)
        return rc == WEIR_E_NOMEM ? rc : RESUME_NO;
    json_t *cpev = buf ? weir__log_read_line(buf, len, &off, &n, &torn, NULL) : NULL;
    vt->buffer_free(self, buf);
    buf = NULL;
    const json_t *data = json_object_get(cpev, "data"), *runs = NULL, *keep = NULL;
    if (!cpev || weir__log_check_envelope(cpev, NULL, 0) < 0 ||
        json_integer_value(json_object_get(cpev, "seq")) != (json_int_t)cp ||
        strcmp(weir__json_str(cpev, "type", ""), WEIR__LOG_CHECKPOINT) != 0 ||
        !weir__checkpoint_resumable(data, &at, &applied, &runs, &keep) ||
        !weir__tally_from(&log->tally, data) || log->tally.events != (json_int_t)cp ||
        log->tally.open) {
        json_decref(cpev);
        return RESUME_NO;
    }
    uint64_t *ranges = NULL;
    size_t nranges = 0;
    if (!resume_ranges(runs, keep, cp, &ranges, &nranges)) {
        json_decref(cpev);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory",
                         log->path);
    }
    rc = vt->read_ranges(self, log->handle, ranges, nranges, &buf, &len, err);
    weir__free(ranges);
    if (rc != WEIR_OK) {
        json_decref(cpev);
        return rc == WEIR_E_NOMEM ? rc : RESUME_NO;
    }
    /* the lines before the checkpoint: the runs' and the kept ones */
    pre_line *pre = NULL;
    size_t np = 0, cap = 0;
    int verdict = WEIR_OK;
    off = 0;
    while (verdict == WEIR_OK && off < len) {
        size_t start = off;
        json_t *ev = weir__log_read_line(buf, len, &off, &n, &torn, NULL);
        json_int_t seq = ev ? json_integer_value(json_object_get(ev, "seq")) : -1;
        if (!ev || weir__log_check_envelope(ev, NULL, 0) < 0 ||
            weir__log_check_shape(weir__json_str(ev, "type", ""), json_object_get(ev, "data"),
                                  NULL, 0) < 0 ||
            seq < 0 || (np > 0 && (size_t)seq <= pre[np - 1].seq)) {
            json_decref(ev);
            verdict = RESUME_NO;
            break;
        }
        if ((size_t)seq >= cp) { /* the tail: the one reader's */
            json_decref(ev);
            off = start;
            break;
        }
        if (np == cap) {
            size_t c = cap ? 2 * cap : 64;
            pre_line *g = weir__realloc(pre, c * sizeof *g);
            if (!g) {
                json_decref(ev);
                verdict = WEIR_E_NOMEM;
                break;
            }
            pre = g;
            cap = c;
        }
        pre[np++] = (pre_line){.seq = (size_t)seq, .off = start, .n = n, .ev = ev};
    }
    size_t tail = off;
    if (verdict == WEIR_OK && tail >= len)
        verdict = RESUME_NO; /* the checkpoint's line must start the tail */
    /* the log's arrays cover every seq before the tail; zeroed pages that are
     * never written (the seqs not read) cost no memory */
    size_t c = 64;
    while (verdict == WEIR_OK && c < cp + 64)
        c *= 2;
    if (verdict == WEIR_OK &&
        (!(log->events = weir__calloc(c, sizeof *log->events)) ||
         !(log->line_at = weir__calloc(c, sizeof *log->line_at)) ||
         !(log->line_len = weir__calloc(c, sizeof *log->line_len)) ||
         !(log->lent = weir__calloc(c, sizeof *log->lent))))
        verdict = WEIR_E_NOMEM;
    if (verdict == WEIR_OK) {
        log->cap = c;
        log->count = cp; /* what reset_loaded releases if this read goes no further */
    }
    loader ld = {.log = log, .buf = buf, .in_place = vt == weir__store_file().vt,
                 .buf_off = tail, .at = at, .rc = WEIR_OK};
    /* the surface, run by run, with the ordinals the checkpoint gives */
    size_t i;
    const json_t *r;
    json_array_foreach(runs, i, r) {
        if (verdict != WEIR_OK)
            break;
        size_t first = (size_t)json_integer_value(json_array_get(r, 0));
        size_t last = (size_t)json_integer_value(json_array_get(r, 1));
        uint64_t ord = (uint64_t)json_integer_value(json_array_get(r, 2));
        pre_line *p = pre_find(pre, np, first);
        bool ended = false;
        for (; verdict == WEIR_OK && p && p < pre + np && p->seq <= last; p++) {
            json_t *lean = NULL;
            const json_t *ev = p->ev;
            if (!weir__is_surface_type(weir__json_str(ev, "type", "")))
                continue;
            if (ord >= applied) {
                verdict = RESUME_NO;
                break;
            }
            lean = weir__surface_lean(ev);
            int src = weir__surface_restore(log->surface, lean ? lean : ev, ord++);
            json_decref(lean);
            if (src != WEIR_OK)
                verdict = src == WEIR_E_NOMEM ? WEIR_E_NOMEM : RESUME_NO;
            else
                keep_pre(log, &ld, p);
            ended = p->seq == last;
        }
        const pre_line *head = pre_find(pre, np, first);
        if (verdict == WEIR_OK &&
            (!head || !weir__is_surface_type(weir__json_str(head->ev, "type", "")) || !ended))
            verdict = RESUME_NO; /* a run starts and ends with a surface event */
    }
    if (verdict == WEIR_OK) {
        weir__surface_restored(log->surface, applied);
        if (weir__surface_clone(log->surface, &log->base_surface) != WEIR_OK)
            verdict = WEIR_E_NOMEM;
    }
    /* the kept events, and the folds they stand for */
    const json_t *header_ev = NULL, *context_ev = NULL, *k;
    json_array_foreach(keep, i, k) {
        if (verdict != WEIR_OK)
            break;
        pre_line *p = pre_find(pre, np, (size_t)json_integer_value(k));
        if (!p) {
            verdict = RESUME_NO;
            break;
        }
        const char *type = weir__json_str(p->ev, "type", "");
        size_t at1 = p->seq + 1;
        if (!strcmp(type, "request/header")) {
            header_ev = p->ev;
            log->tally.header = at1;
        } else if (!strcmp(type, "request/context")) {
            context_ev = p->ev;
            log->tally.context = at1;
        } else if (!strcmp(type, WEIR__CONTINUATIONS_DROPPED)) {
            log->tally.dropped = at1;
        } else if (!strcmp(type, "user/message")) {
            log->tally.inputs[log->tally.ninputs++ % WEIR__TALLY_INPUTS] = at1;
        } else {
            verdict = RESUME_NO;
            break;
        }
        keep_pre(log, &ld, p); /* the request header and context for good: the folds
                                * borrow them */
    }
    if (verdict == WEIR_OK) {
        log->tally.last_turn = weir__json_int(data, "last_turn", 0);
        log->last_turn = (int)log->tally.last_turn;
        log->header = header_ev ? json_object_get(json_object_get(header_ev, "data"), "header")
                                : NULL;
        log->context = context_ev ? json_object_get(context_ev, "data") : NULL;
        log->count = log->base = cp;
        log->bytes = log->checkpoint_at = at;
    }
    /* the tail, from the checkpoint on, by the one reader seeded with that */
    json_t *report = NULL;
    if (verdict == WEIR_OK) {
        weir__log_seed seed = {.first = cp, .at = at, .tally = &log->tally,
                               .surface = log->surface, .header_ev = header_ev,
                               .context_ev = context_ev};
        rc = weir__log_check_each_from(buf + tail, len - tail, &seed, log->known, log->known_ud,
                                       load_one, &ld, &report, err);
        if ((rc == WEIR_OK && !json_is_true(json_object_get(report, "ok"))) ||
            ld.rc == WEIR_E_LOG_CORRUPT)
            verdict = RESUME_NO; /* the whole read says what is wrong, or that all is well */
        else if (rc == WEIR_OK && tail + ld.good < len)
            verdict = RESUME_NO; /* a torn tail: the whole read cuts it at its offset */
        else
            verdict = load_verdict(log, rc, &ld, report, err);
    }
    json_decref(report);
    for (size_t j = 0; j < np; j++)
        json_decref(pre[j].ev);
    weir__free(pre);
    json_decref(cpev);
    if (verdict != WEIR_OK) {
        vt->buffer_free(self, buf);
        return verdict;
    }
    return load_done(log, &ld, buf, len, WEIR_OK, err);
}

static int open_common(weir__store_ref store, const char *id, const char *path, bool readonly,
                       weir__fsync policy, weir__type_known_fn known, void *known_ud,
                       weir__log **out, weir_error *err) {
    if (!path || !*path || !out)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: path and out are required");
    *out = NULL;
    weir__log *log = weir__calloc(1, sizeof *log);
    if (!log || !(log->path = weir__strdup(path)) || weir__surface_create(&log->surface)) {
        if (log) {
            weir__free(log->path);
            weir__free(log);
        }
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory", path);
    }
    log->mu = &log->mu_storage;
    pthread_mutex_init(log->mu, NULL);
    log->synced = SIZE_MAX; /* what a crashed writer left may not be durable */
    log->store = store;
    log->readonly = readonly;
    log->policy = policy;
    log->known = known;
    log->known_ud = known_ud;
    const weir_store *vt = store.vt;
    int rc = vt->open(store.self, id, path, readonly ? WEIR_STORE_READONLY : 0, &log->handle,
                      &log->epoch, err);
    if (rc == WEIR_OK && (rc = load_from_checkpoint(log, err)) == RESUME_NO) {
        rc = reset_loaded(log) == WEIR_OK
                 ? load_whole(log, err)
                 : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory",
                             path);
    }
    if (rc != WEIR_OK) {
        weir__log_close(log);
        return rc;
    }
    log->delivered = log->count; /* loaded events are not observed */
    log->trim_from = log->trim_next = log->count; /* they were released as they were read */
    *out = log;
    return WEIR_OK;
}

/* The id of a log file: its base name without ".jsonl". */
static char *file_id(const char *path) {
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path ? path : "";
    size_t n = strlen(base);
    if (n > 6 && strcmp(base + n - 6, ".jsonl") == 0)
        n -= 6;
    return weir__asprintf("%.*s", (int)n, base);
}

int weir__log_open_store(const char *store_name, weir__store_ref store, const char *id,
                         const char *path, bool readonly, weir__fsync policy,
                         weir__type_known_fn known, void *known_ud, weir__log **out,
                         weir_error *err) {
    if (!store.vt || store.vt == weir__store_file().vt)
        return open_common(weir__store_file(), id, path, readonly, policy, known, known_ud, out,
                           err);
    char *name = weir__asprintf("%s:%s", store_name ? store_name : "store", id ? id : "");
    if (!name)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session %s: out of memory",
                         id ? id : "");
    int rc = open_common(store, id, name, readonly, policy, known, known_ud, out, err);
    weir__free(name);
    return rc;
}

int weir__log_open(const char *path, weir__fsync policy, weir__type_known_fn known, void *known_ud,
                   weir__log **out, weir_error *err) {
    char *id = file_id(path);
    int rc = id ? open_common(weir__store_file(), id, path, false, policy, known, known_ud, out,
                              err)
                : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory",
                            path ? path : "");
    weir__free(id);
    return rc;
}

int weir__log_open_readonly(const char *path, weir__log **out, weir_error *err) {
    char *id = file_id(path);
    int rc = id ? open_common(weir__store_file(), id, path, true, WEIR__FSYNC_NONE, NULL, NULL,
                              out, err)
                : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory",
                            path ? path : "");
    weir__free(id);
    return rc;
}

void weir__log_close(weir__log *log) {
    if (!log)
        return;
    /* what was appended is durable once the writer closes (fsync step and
     * always; none never syncs) */
    if (log->handle && !log->readonly && log->policy != WEIR__FSYNC_NONE && !log->broken)
        (void)sync_now(log, NULL);
    if (log->handle)
        log->store.vt->close(log->store.self, log->handle);
    weir__free(log->line);
    for (size_t i = 0; i < log->count; i++)
        json_decref(log->events[i]);
    weir__free(log->events);
    weir__free(log->line_at);
    weir__free(log->line_len);
    weir__free(log->text);
    weir__free(log->remade);
    weir__free(log->lent);
    weir__free(log->lent_seqs);
    weir__surface_destroy(log->surface);
    weir__surface_destroy(log->base_surface);
    json_decref(log->derived);
    if (log->mu)
        pthread_mutex_destroy(log->mu);
    weir__free(log->path);
    weir__free(log);
}

/* --- accessors ----------------------------------------------------------- */

const char *weir__log_path(const weir__log *log) { return log ? log->path : NULL; }

bool weir__log_lease_lost(weir__log *log) {
    /* no lock: an append holds it for a whole store round trip, and the
     * store, the handle and the epoch never change after the open */
    if (!log)
        return false;
    if (atomic_load(&log->fenced))
        return true;
    return log->store.vt && log->store.vt->lease_lost && log->handle &&
           log->store.vt->lease_lost(log->store.self, log->handle);
}

int weir__log_store_handle(weir__log *log, weir__store_ref *store, void **handle,
                           uint64_t *epoch, weir_error *err) {
    if (!log || !store || !handle || !epoch)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir__log_store_handle: NULL argument");
    lock(log);
    int rc = refuse_append(log, err);
    *store = log->store;
    *handle = log->handle;
    *epoch = log->epoch;
    unlock(log);
    return rc;
}

size_t weir__log_observed(const weir__log *log) {
    if (!log)
        return 0;
    lock(log);
    /* a frame delivering goes on until it has handed over every event */
    size_t n = log->delivering ? log->count : log->delivered;
    unlock(log);
    return n;
}

size_t weir__log_count(const weir__log *log) {
    if (!log)
        return 0;
    lock(log);
    size_t n = log->count;
    unlock(log);
    return n;
}

/* Push `seq` on the vector *v (*n of *cap); false when out of memory. */
static bool push_seq(size_t **v, size_t *n, size_t *cap, size_t seq) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        size_t *grown = weir__realloc(*v, c * sizeof *grown);
        if (!grown)
            return false;
        *v = grown;
        *cap = c;
    }
    (*v)[(*n)++] = seq;
    return true;
}

/* The envelope `seq` (< count), read back from its line when a trim
 * released it (then released again by the next trim); NULL when out of
 * memory.  With the lock held. */
static json_t *event_at(weir__log *log, size_t seq) {
    if (log->events[seq] || (log->line_len[seq] == 0 && seq >= log->base))
        return log->events[seq];
    json_t *ev = log->line_len[seq] > 0
                     ? weir__json_loadb(log->text + log->line_at[seq], log->line_len[seq],
                                        JSON_REJECT_DUPLICATES, NULL)
                     : read_back(log, seq);
    if (!ev)
        return NULL;
    if (log->line_len[seq] == 0)
        log->lent[seq] |= FROM_STORE;
    /* when out of memory it is kept until the log closes */
    (void)push_seq(&log->remade, &log->remade_n, &log->remade_cap, seq);
    log->events[seq] = ev;
    return ev;
}

const json_t *weir__log_event(const weir__log *log, size_t seq) {
    if (!log)
        return NULL;
    weir__log *l = (weir__log *)(uintptr_t)log; /* reading back fills the cache */
    lock(l);
    const json_t *ev = seq < l->count ? event_at(l, seq) : NULL;
    unlock(l);
    return ev;
}

const json_t *weir__log_event_lend(weir__log *log, size_t seq) {
    if (!log)
        return NULL;
    lock(log);
    const json_t *ev = seq < log->count ? event_at(log, seq) : NULL;
    if (ev && (log->line_len[seq] > 0 || (log->lent[seq] & FROM_STORE)) &&
        !(log->lent[seq] & LENT)) { /* a trim could release it */
        if (push_seq(&log->lent_seqs, &log->lent_n, &log->lent_cap, seq))
            log->lent[seq] |= LENT;
        else
            ev = NULL;
    }
    unlock(log);
    return ev;
}

bool weir__log_held(const weir__log *log, size_t seq) {
    if (!log)
        return false;
    lock(log);
    bool held = seq < log->count &&
                (seq >= log->base || log->events[seq] || log->line_len[seq] > 0);
    unlock(log);
    return held;
}

size_t weir__log_latest(const weir__log *log, const char *type) {
    if (!log || !type)
        return SIZE_MAX;
    lock(log);
    const weir__tally *t = &log->tally;
    size_t at1 = !strcmp(type, "request/header")              ? t->header
                 : !strcmp(type, "request/context")           ? t->context
                 : !strcmp(type, WEIR__CONTINUATIONS_DROPPED) ? t->dropped
                 : !strcmp(type, "user/message")
                     ? (t->ninputs ? t->inputs[(t->ninputs - 1) % WEIR__TALLY_INPUTS] : 0)
                     : SIZE_MAX;
    unlock(log);
    return at1;
}

size_t weir__log_base(const weir__log *log) {
    if (!log)
        return 0;
    lock(log);
    size_t base = log->base;
    unlock(log);
    return base;
}

weir__surface *weir__log_base_surface(const weir__log *log) {
    weir__surface *s = NULL;
    if (!log)
        return NULL;
    lock(log);
    int rc = log->base_surface ? weir__surface_clone(log->base_surface, &s)
                               : weir__surface_create(&s);
    unlock(log);
    return rc == WEIR_OK ? s : NULL;
}

json_t *weir__log_event_ref(const weir__log *log, size_t seq) {
    if (!log)
        return NULL;
    lock(log);
    json_t *ev = NULL;
    if (seq < log->count && log->events[seq])
        ev = json_incref(log->events[seq]);
    else if (seq < log->count && log->line_len[seq] > 0) /* released: the caller's alone */
        ev = weir__json_loadb(log->text + log->line_at[seq], log->line_len[seq],
                              JSON_REJECT_DUPLICATES, NULL);
    else if (seq < log->base) /* never read: from the store, the caller's alone */
        ev = read_back(log, seq);
    unlock(log);
    return ev;
}

/* Whether the envelope `ev` with a line of `n` bytes may be released for its
 * line: not the request header and context, which the folds borrow. */
static bool keeps_line(const json_t *ev, size_t n) {
    const char *type = weir__json_str(ev, "type", "");
    return n > 0 && n <= UINT32_MAX && strcmp(type, "request/header") != 0 &&
           strcmp(type, "request/context") != 0;
}

/* Keep the line of the envelope just committed at `seq` (its bytes without
 * the newline) so a trim may release the envelope; a no-op for the
 * envelopes kept for good, or when out of memory (then it is kept too). */
static void keep_line(weir__log *log, size_t seq, const char *line, size_t n) {
    if (!keeps_line(log->events[seq], n))
        return;
    if (log->text_len + n > log->text_cap) {
        size_t cap = log->text_cap ? log->text_cap : 4096;
        while (cap < log->text_len + n)
            cap *= 2;
        char *t = weir__realloc(log->text, cap);
        if (!t)
            return;
        log->text = t;
        log->text_cap = cap;
    }
    memcpy(log->text + log->text_len, line, n);
    log->line_at[seq] = log->text_len;
    log->line_len[seq] = (uint32_t)n;
    log->text_len += n;
}

const weir__surface *weir__log_surface(const weir__log *log) { return log ? log->surface : NULL; }

json_t *weir__log_surface_events(weir__log *log) {
    if (!log)
        return NULL;
    lock(log);
    size_t n = weir__surface_len(log->surface);
    json_t *out = json_array();
    for (size_t i = 0; out && i < n; i++) {
        /* the surface's own envelope, but the whole assistant/message (its
         * lean form has no stream) */
        json_t *ev = (json_t *)(uintptr_t)weir__surface_event(log->surface, i);
        if (!strcmp(weir__json_str(ev, "type", ""), "assistant/message"))
            ev = event_at(log, weir__surface_node(log->surface, i));
        if (!ev || json_array_append(out, ev) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    unlock(log);
    return out;
}

uint64_t weir__log_replace_generation(weir__log *log) {
    if (!log)
        return 0;
    lock(log);
    uint64_t gen = weir__surface_replace_generation(log->surface);
    unlock(log);
    return gen;
}

const json_t *weir__log_request_header(const weir__log *log) {
    if (!log)
        return NULL;
    lock(log);
    const json_t *h = log->header;
    unlock(log);
    return h;
}

const json_t *weir__log_request_context(const weir__log *log) {
    if (!log)
        return NULL;
    lock(log);
    const json_t *c = log->context;
    unlock(log);
    return c;
}

json_t *weir__log_request_context_copy(const weir__log *log, bool *oom) {
    *oom = false;
    if (!log)
        return NULL;
    lock(log);
    json_t *c = log->context ? json_deep_copy(log->context) : NULL;
    *oom = log->context && !c;
    unlock(log);
    return c;
}

bool weir__log_turn_open(const weir__log *log) {
    if (!log)
        return false;
    lock(log);
    bool open = log->turn_open;
    unlock(log);
    return open;
}

bool weir__log_open_step(const weir__log *log, int *turn, int *step, size_t *start_seq) {
    if (!log)
        return false;
    lock(log);
    bool open = log->turn_open && log->step_open;
    if (open && turn)
        *turn = (int)log->open_turn;
    if (open && step)
        *step = (int)log->open_step;
    if (open && start_seq)
        *start_seq = log->step_start_seq;
    unlock(log);
    return open;
}

int weir__log_last_turn(const weir__log *log) {
    if (!log)
        return 0;
    lock(log);
    int t = log->last_turn;
    unlock(log);
    return t;
}

bool weir__log_has_request_header(const weir__log *log) {
    return weir__log_request_header(log) != NULL;
}

void weir__log_set_observer(weir__log *log, weir__log_observer_fn fn, void *ud) {
    if (!log)
        return;
    lock(log);
    log->observer = fn;
    log->observer_ud = ud;
    unlock(log);
}

/* --- append -------------------------------------------------------------- */

/* The log's own reference to a value of an event: `v` itself when it is
 * handed over and nobody else holds a part of it; a copy of its objects and
 * arrays sharing its scalars when it comes from the core (whose scalars are
 * never changed in place, common.h); a deep copy of anything else. */
static json_t *take(const json_t *v, bool handover, bool sole_ok) {
    if (handover && sole_ok && weir__json_sole(v))
        return json_incref((json_t *)(uintptr_t)v);
    return handover ? weir__json_copy_tree(v) : json_deep_copy(v);
}

static json_t *build_envelope(size_t seq, const char *type, const json_t *data,
                              const json_t *surface_op, const json_t *source_seqs, uint32_t flags) {
    bool ignorable = (flags & WEIR_EVENT_IGNORABLE) != 0;
    bool core = (flags & WEIR__APPEND_HANDOVER) != 0;
    json_t *ev = json_object();
    if (!ev || json_object_set_new(ev, "seq", json_integer((json_int_t)seq)) ||
        json_object_set_new(ev, "time", json_integer(weir__now_ms())) ||
        json_object_set_new(ev, "type", json_string(type)) ||
        json_object_set_new(ev, "data", take(data, core, true)) ||
        (surface_op && json_object_set_new(ev, "surface_op", take(surface_op, core, false))) ||
        (source_seqs && json_object_set_new(ev, "source_seqs", take(source_seqs, core, false))) ||
        (ignorable && json_object_set_new(ev, "ignorable", json_true()))) {
        json_decref(ev);
        return NULL;
    }
    return ev;
}

/* weir__json_write into the log's reused line buffer. */
static int dump_into(const char *buf, size_t size, void *ud) {
    weir__log *log = ud;
    size_t need = log->wlen + size + 2; /* the newline and a NUL */
    if (need > log->line_cap) {
        size_t cap = log->line_cap ? log->line_cap : LINE_FIRST;
        while (cap < need)
            cap *= 2;
        char *grown = weir__realloc(log->line, cap);
        if (!grown)
            return -1;
        log->line = grown;
        log->line_cap = cap;
    }
    memcpy(log->line + log->wlen, buf, size);
    log->wlen += size;
    return 0;
}

/* Serialize `ev` as one line (its newline included) at the end of
 * log->line (`keep`: after what is there, a batch; else from the start), *n
 * bytes: no allocation once the buffer has grown to the longest batch.  On
 * failure the buffer holds what it held before. */
static bool serialize(weir__log *log, const json_t *ev, bool keep, size_t *n) {
    size_t start = keep ? log->wlen : 0;
    log->wlen = start;
    if (weir__json_write(ev, dump_into, log) != 0 ||
        (log->wlen == 0 && dump_into("", 0, log) != 0)) {
        log->wlen = start;
        return false;
    }
    log->line[log->wlen++] = '\n';
    log->line[log->wlen] = '\0';
    *n = log->wlen - start;
    return true;
}

/* Deliver committed events to the observer in seq order, outside the lock.
 * Called with the lock held; returns with it held. */
static void deliver(weir__log *log) {
    if (log->delivering)
        return; /* another call (or an outer frame of this one) is delivering */
    log->delivering = true;
    while (log->delivered < log->count) {
        json_t *ev = log->events[log->delivered++];
        weir__log_observer_fn fn = log->observer;
        void *ud = log->observer_ud;
        if (!fn)
            continue;
        json_incref(ev); /* a trim on another thread may release the log's reference */
        unlock(log);
        fn(ev, ud);
        json_decref(ev);
        lock(log);
    }
    log->delivering = false;
}

/* The refusal of an append to a log that cannot take one (read-only, fenced,
 * broken by a failed batch), or WEIR_OK.  With the lock held. */
static int refuse_append(const weir__log *log, weir_error *err) {
    if (log->readonly)
        return weir__err(err, WEIR_E_STATE, NULL, NULL, "session log %s: opened read-only",
                         log->path);
    if (log->fenced)
        return weir__err(err, WEIR_E_LEASE_LOST, NULL, NULL,
                         "session log %s: the lease was taken over by another writer; this writer "
                         "appends no more",
                         log->path);
    if (log->broken)
        return weir__err(err, WEIR_E_IO, NULL, NULL,
                         "session log %s: a batch of events could not be stored; the log takes "
                         "no more appends (close and reopen it)",
                         log->path);
    return WEIR_OK;
}

/*
 * Append one event with the lock held.  Alone (`batch` NULL) the line goes
 * to the store at once.  In a batch it is serialized after the batch's
 * earlier lines in log->line and committed to memory (so the next event of
 * the batch validates against it), and *batch counts it: the caller stores
 * the batch with one append (store_batch).
 */
static int append_locked(weir__log *log, const char *type, const json_t *data,
                         const json_t *surface_op, const json_t *source_seqs, uint32_t flags,
                         size_t *batch, size_t *seq_out, weir_error *err) {
    int rc = refuse_append(log, err);
    json_t *ev = NULL;
    char msg[640];
    if (rc != WEIR_OK)
        goto out;
    if (!type || !*type || !json_is_object(data)) {
        rc = weir__err(err, WEIR_E_LOG_REJECTED, NULL, NULL,
                       "session log %s: rejected an event: it needs a type and an object data",
                       log->path);
        goto out;
    }
    ev = build_envelope(log->count, type, data, surface_op, source_seqs, flags);
    if (!ev) {
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory (%s)",
                       log->path, type);
        goto out;
    }
    if (validate(log, ev, true, msg, sizeof msg) < 0) {
        rc = weir__err(err, WEIR_E_LOG_REJECTED, NULL, NULL, "session log %s: rejected %s",
                       log->path, msg);
        goto out;
    }
    size_t start = batch ? log->wlen : 0, n = 0;
    bool dumped = serialize(log, ev, batch != NULL, &n);
    if (dumped && n > WEIR__LOG_LINE_MAX) {
        log->wlen = start;
        rc = weir__err(err, WEIR_E_LOG_REJECTED, NULL, NULL,
                       "session log %s: rejected %s: its line of %zu bytes is over the %zu MiB cap",
                       log->path, type, n, WEIR__LOG_LINE_MAX >> 20);
        goto out;
    }
    if (!dumped || reserve(log, weir__is_surface_type(type)) != WEIR_OK) {
        log->wlen = start;
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory (%s)",
                       log->path, type);
        goto out;
    }
    if (!batch) {
        rc = log->store.vt->append(log->store.self, log->handle, log->epoch, log->count, 1,
                                   log->line, n,
                                   log->policy == WEIR__FSYNC_ALWAYS ? WEIR_STORE_DURABLE : 0,
                                   err);
        if (rc == WEIR_E_LEASE_LOST)
            log->fenced = true;
        if (rc != WEIR_OK)
            goto out;
    } else {
        ++*batch;
    }
    if (seq_out)
        *seq_out = log->count;
    size_t seq = log->count;
    commit(log, ev);
    log->bytes += n;
    ev = NULL;
    if (!batch && log->policy == WEIR__FSYNC_ALWAYS)
        log->synced = log->count; /* the store synced it (WEIR_STORE_DURABLE) */
    keep_line(log, seq, log->line + start, n - 1);
out:
    if (!batch)
        log->wlen = 0; /* the line is stored (or not): the buffer holds no batch */
    json_decref(ev);
    return rc;
}

/* Store the `count` events a batch committed to memory (the last `count`
 * of the log, serialized in log->line) with one store append.  When the
 * store refuses them, memory is ahead of the store: the log is broken (or
 * fenced) and takes no more appends.  With the lock held. */
static int store_batch(weir__log *log, size_t count, weir_error *err) {
    if (count == 0)
        return WEIR_OK;
    int rc = log->store.vt->append(log->store.self, log->handle, log->epoch, log->count - count,
                                   count, log->line, log->wlen,
                                   log->policy == WEIR__FSYNC_ALWAYS ? WEIR_STORE_DURABLE : 0,
                                   err);
    if (rc == WEIR_E_LEASE_LOST)
        log->fenced = true;
    else if (rc != WEIR_OK)
        log->broken = true;
    else if (log->policy == WEIR__FSYNC_ALWAYS)
        log->synced = log->count;
    log->wlen = 0;
    return rc;
}

int weir__log_append(weir__log *log, const char *type, const json_t *data, const json_t *surface_op,
                     const json_t *source_seqs, uint32_t flags, size_t *seq_out, weir_error *err) {
    if (!log || !type || !*type || !json_is_object(data))
        return weir__err(err, WEIR_E_LOG_REJECTED, NULL, NULL,
                         "session log: append needs a log, a type and an object data (type %s)",
                         type ? type : "(null)");
    lock(log);
    int rc = append_locked(log, type, data, surface_op, source_seqs, flags, NULL, seq_out, err);
    if (rc == WEIR_OK)
        deliver(log);
    unlock(log);
    return rc;
}

int weir__log_sync_durable(weir__log *log, weir_error *err) {
    if (!log)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: NULL log");
    return log->readonly ? WEIR_OK : sync_now(log, err);
}

int weir__log_sync(weir__log *log, weir_error *err) {
    if (!log)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: NULL log");
    if (log->policy == WEIR__FSYNC_NONE || log->readonly)
        return WEIR_OK;
    return sync_now(log, err);
}

/* Sync what the store holds, unless every event was synced already (a
 * clean fdatasync is still a system call and, on ext4, tens of µs). */
static int sync_now(weir__log *log, weir_error *err) {
    lock(log);
    int rc = WEIR_OK;
    if (log->synced != log->count)
        rc = log->store.vt->sync(log->store.self, log->handle, err);
    if (rc == WEIR_OK) {
        log->sync_owed = false;
        log->synced = log->count;
    }
    unlock(log);
    return rc;
}

/* Release the envelope `seq` when its line can bring it back.  With the lock held. */
static void release(weir__log *log, size_t seq) {
    if ((log->line_len[seq] > 0 || (log->lent[seq] & FROM_STORE)) && log->events[seq]) {
        json_decref(log->events[seq]);
        log->events[seq] = NULL;
        log->lent[seq] &= (uint8_t)~FROM_STORE;
    }
}

void weir__log_trim(weir__log *log, bool idle) {
    if (!log)
        return;
    lock(log);
    if (!idle) {
        /* The step before the one that ended: plugins read the envelopes of
         * the step that ended at the next step's start (compaction-basic's
         * meter in agent/pre-step), so those wait for the next step's trim.
         * A lent envelope waits for the turn's end. */
        for (size_t i = log->trim_from; i < log->trim_next; i++)
            if (!(log->lent[i] & LENT))
                release(log, i);
        log->trim_from = log->trim_next;
        log->trim_next = log->delivered;
    } else {
        /* the turn ended: what was lent and is behind the window goes */
        for (size_t k = 0; k < log->lent_n; k++) {
            size_t seq = log->lent_seqs[k];
            log->lent[seq] &= (uint8_t)~LENT;
            if (seq < log->trim_from)
                release(log, seq);
        }
        log->lent_n = 0;
    }
    for (size_t k = 0; k < log->remade_n; k++)
        if (!(log->lent[log->remade[k]] & LENT))
            release(log, log->remade[k]);
    log->remade_n = 0;
    if (idle && log->wlen == 0 && log->line_cap > LINE_FIRST) { /* no batch is being written */
        weir__free(log->line);
        log->line = NULL;
        log->line_cap = 0;
    }
    unlock(log);
}

size_t weir__log_line_buffer(const weir__log *log) {
    if (!log)
        return 0;
    lock(log);
    size_t n = log->line_cap;
    unlock(log);
    return n;
}

int weir__log_sync_point(weir__log *log, weir_error *err) {
    if (!log)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: NULL log");
    return log->policy == WEIR__FSYNC_STEP ? weir__log_sync(log, err) : WEIR_OK;
}

void weir__log_defer_sync(weir__log *log) {
    if (!log || log->policy != WEIR__FSYNC_STEP)
        return;
    lock(log);
    log->sync_owed = true;
    unlock(log);
}

int weir__log_pay_sync(weir__log *log, weir_error *err) {
    if (!log)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: NULL log");
    lock(log);
    bool owed = log->sync_owed;
    unlock(log);
    return owed ? weir__log_sync(log, err) : WEIR_OK;
}

void weir__log_set_checkpoint_every(weir__log *log, size_t bytes) {
    if (!log)
        return;
    lock(log);
    log->checkpoint_every = bytes ? bytes : WEIR__CHECKPOINT_BYTES;
    unlock(log);
}

int weir__log_tally_checkpoint(weir__log *log, weir_error *err) {
    if (!log)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: NULL log");
    lock(log);
    size_t every = log->checkpoint_every ? log->checkpoint_every : WEIR__CHECKPOINT_BYTES;
    int rc = WEIR_OK;
    if (!log->readonly && !log->tally.open && log->bytes - log->checkpoint_at >= every) {
        json_t *data = weir__checkpoint_json(&log->tally, log->bytes, log->surface);
        rc = data ? append_locked(log, WEIR__LOG_CHECKPOINT, data, NULL, NULL,
                                  WEIR_EVENT_IGNORABLE, NULL, NULL, err)
                  : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log: out of memory");
        json_decref(data);
        if (rc == WEIR_OK)
            deliver(log);
    }
    unlock(log);
    return rc;
}

/* --- derivation ---------------------------------------------------------- */

/* A new array holding new references to the elements of `arr` (no copy of
 * the elements), or NULL on allocation failure. */
static json_t *share(json_t *arr) {
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(arr, i, m) {
        if (!out || json_array_append(out, m) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

json_t *weir__log_derive(weir__log *log) {
    if (!log)
        return NULL;
    lock(log);
    json_t *out = NULL;
    uint64_t gen = weir__surface_replace_generation(log->surface);
    if (!log->derived || log->derived_gen != gen) {
        json_decref(log->derived);
        log->derived = json_array();
        log->derived_nodes = 0;
        log->derived_gen = gen;
    }
    /* the array is handed out as it is, so an append that follows must not
     * change one a caller still holds: the cache goes on in a copy then */
    bool more = log->derived && log->derived_nodes < weir__surface_len(log->surface);
    if (more && log->derived->refcount > 1) {
        json_t *copy = share(log->derived);
        if (copy) {
            json_decref(log->derived);
            log->derived = copy;
        }
    }
    if (log->derived && (!more || log->derived->refcount == 1) &&
        weir__surface_derive_into(log->surface, log->derived_nodes, log->derived,
                                  &log->derived_nodes) == WEIR_OK)
        out = json_incref(log->derived);
    unlock(log);
    return out;
}

/* --- repair -------------------------------------------------------------- */

/* The INTERRUPTED result of the tool/call envelope `call`; its text says
 * what cut the call: `why`, else a crash. */
static json_t *interrupted_result(const json_t *call, const char *why) {
    const json_t *d = json_object_get(call, "data");
    char text[256];
    /* a crash: the text of WEIR__TOOL_INTERRUPTED_TEXT (core/runtime/tools.h) */
    snprintf(text, sizeof text,
             "Error: %s: the tool may or may not have run; do not assume either",
             why ? why : "interrupted by a crash");
    return json_pack("{s:O?, s:O?, s:{s:s, s:[{s:s, s:s?, s:[{s:s, s:s}], s:b}]}, s:{s:s, s:s}}",
                     "turn", json_object_get(d, "turn"), "step", json_object_get(d, "step"),
                     "message", "role", "tool", "content", "type", "tool_result", "call_id",
                     weir__json_str(d, "call_id", NULL), "content", "type", "text", "text", text,
                     "is_error", 1,
                     "error", "name", "AbortError", "code", "INTERRUPTED");
}

/*
 * Collect the closers of the open last turn into `todo` ([type, data]
 * pairs).  Within the open step, by the tool-call fold (core/log/log_fold.h,
 * the one `weir log --check` and the driver's crash recovery use): every
 * tool_call of an assistant/message that was never dispatched (a crash
 * between the two) gets its tool/call and an interrupted result
 * (`why` says what cut it, NULL: a crash), every tool/call without a
 * tool/result an interrupted one; then, for `whole`, step/end and turn/end
 * {kind:"interrupted"}.  A closed step is left as it is: what it lacks the
 * checker reports as an error.
 */
static int plan_repair(weir__log *log, json_t *todo, const char *why, bool whole) {
    json_int_t turn = log->open_turn, step = log->step_open ? log->open_step : -1;
    size_t from = log->step_open ? log->step_start_seq : log->count;
    weir__call_fold f;
    bool oom = weir__call_fold_init(&f) != WEIR_OK;
    for (size_t i = from; !oom && i < log->count; i++) {
        /* an envelope the log holds: NULL is out of memory (open released
         * it), never "not this type" */
        const json_t *ev = event_at(log, i);
        oom = !ev || weir__call_fold_event(&f, i, ev, NULL, NULL) != WEIR_OK;
    }
    size_t k;
    json_t *x;
    json_array_foreach(f.wanted, k, x) { /* [id, seq, tool_call block] */
        if (oom)
            break;
        x = json_array_get(x, 2);
        json_t *call = json_pack("{s:I, s:I, s:s, s:s, s:s}", "turn", turn, "step", step,
                                 "call_id", weir__json_str(x, "id", ""), "name",
                                 weir__json_str(x, "name", ""), "arguments",
                                 weir__json_str(x, "arguments", "{}"));
        json_t *env = call ? json_pack("{s:O}", "data", call) : NULL;
        json_t *res = env ? interrupted_result(env, why) : NULL;
        json_decref(env);
        if (!res || json_array_append_new(todo, json_pack("[s,O]", "tool/call", call)) != 0 ||
            json_array_append_new(todo, json_pack("[s,O]", "tool/result", res)) != 0)
            oom = true;
        json_decref(call);
        json_decref(res);
    }
    json_array_foreach(f.pending, k, x) { /* [id, seq, tool/call envelope] */
        if (!oom && json_array_append_new(todo, json_pack("[s,o]", "tool/result",
                                                          interrupted_result(
                                                              json_array_get(x, 2), why))) != 0)
            oom = true;
    }
    weir__call_fold_free(&f);
    if (oom)
        return WEIR_E_NOMEM;
    if (!whole)
        return WEIR_OK;
    if (log->step_open && json_array_append_new(todo, json_pack("[s,{s:I,s:I}]", "step/end", "turn",
                                                                turn, "step", step)))
        return WEIR_E_NOMEM;
    if (json_array_append_new(todo, json_pack("[s,{s:I,s:{s:s}}]", "turn/end", "turn", turn,
                                              "reason", "kind", "interrupted")))
        return WEIR_E_NOMEM;
    return WEIR_OK;
}

/* weir__log_repair (whole) and weir__log_settle_calls. */
static int close_open(weir__log *log, const char *why, bool whole, bool *repaired,
                      weir_error *err) {
    if (repaired)
        *repaired = false;
    if (!log)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: NULL log");
    lock(log);
    bool open = whole ? log->turn_open : log->turn_open && log->step_open;
    json_t *todo = open ? json_array() : NULL;
    int rc = open && (!todo || plan_repair(log, todo, why, whole) != WEIR_OK) ? WEIR_E_NOMEM
                                                                            : WEIR_OK;
    unlock(log);
    if (rc != WEIR_OK) {
        json_decref(todo);
        return weir__err(err, rc, NULL, NULL, "session log %s: out of memory while %s",
                         log->path, whole ? "repairing" : "answering the step's tool calls");
    }
    if (!open || json_array_size(todo) == 0) {
        json_decref(todo);
        return WEIR_OK;
    }
    /* the closers are one batch: one store append (one write) for all */
    size_t i, batch = 0;
    json_t *item;
    lock(log);
    log->wlen = 0;
    json_array_foreach(todo, i, item) {
        const char *type = json_string_value(json_array_get(item, 0));
        bool surface = weir__is_surface_type(type);
        json_t *op = surface ? json_string("append") : NULL;
        rc = surface && !op ? weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory")
                            : append_locked(log, type, json_array_get(item, 1), op, NULL, 0,
                                            &batch, NULL, err);
        json_decref(op);
        if (rc != WEIR_OK)
            break;
    }
    /* what the batch committed is stored even when a later closer failed */
    weir_error serr;
    int src = store_batch(log, batch, rc == WEIR_OK ? err : &serr);
    if (rc == WEIR_OK)
        rc = src;
    if (src == WEIR_OK && batch > 0 && repaired)
        *repaired = true;
    if (src == WEIR_OK)
        deliver(log);
    unlock(log);
    json_decref(todo);
    if (rc == WEIR_OK && whole)
        rc = weir__log_sync_point(log, err);
    return rc;
}

int weir__log_repair(weir__log *log, bool *repaired, weir_error *err) {
    return close_open(log, NULL, true, repaired, err);
}

int weir__log_settle_calls(weir__log *log, const char *why, weir_error *err) {
    return close_open(log, why ? why : "the tool call was cut off", false, NULL, err);
}

/* A session id names a log file and a store row (weir/host.h). */
bool weir_session_id_valid(const char *id) {
    if (!id || !*id || *id == '.' || *id == '-' || *id == '_' || strlen(id) > 128)
        return false;
    for (const char *p = id; *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') ||
              ('0' <= *p && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
            return false;
    return true;
}
