/*
 * core/log/session_log.h - the durable, append-only session log (docs/session-log.md).
 *
 * JSON Lines, one envelope per line:
 *   {"seq":N,"time":ms,"type":"...","data":{...},
 *    "surface_op":"append"|{"op":"replace","start_seq":a,"end_seq":b},
 *    "source_seqs":[...], "ignorable":true}
 * seq is contiguous from 0.  A rejected append changes nothing (file, memory,
 * surface).  Appends are serialized by an internal mutex (thread-safe);
 * observers run after the append, outside the lock, in seq order.
 * Owner: core/log/session_log.c.
 */
#ifndef WEIR_CORE_SESSION_LOG_H
#define WEIR_CORE_SESSION_LOG_H

#include "common.h"
#include "store.h"
#include "tally.h"

/* The type of the summary the log writes at an interval (docs/session-log.md,
 * "Checkpoints"): durable and ignorable. */
#define WEIR__LOG_CHECKPOINT "log/checkpoint"

typedef struct weir__log weir__log;
typedef struct weir__surface weir__surface;

typedef enum weir__fsync {
    WEIR__FSYNC_STEP = 0, /* default: weir__log_sync() at request and step/turn ends */
    WEIR__FSYNC_ALWAYS = 1,
    WEIR__FSYNC_NONE = 2
} weir__fsync;

/*
 * Decides whether an unknown, non-ignorable type is acceptable (plugin event
 * types registered on the host).  May be NULL: only core types are known.
 */
typedef bool (*weir__type_known_fn)(const char *type, void *ud);

/* Whether `type` is one of the 13 core event types.  Thread-safe. */
bool weir__log_is_core_type(const char *type);

/* The field checks the log applies to a core event's `data` on append and
 * open (request/header shape; turn/step/call_id/reason/... of the others);
 * other types pass.  0, or -1 with `msg` "TYPE: data.FIELD must be ...".
 * Thread-safe. */
int weir__log_check_shape(const char *type, const json_t *data, char *msg, size_t size);

/* The longest line (one event) the log writes or reads: 64 MiB.  An append
 * whose line would be longer is rejected; a reader refuses a longer line. */
#define WEIR__LOG_LINE_MAX ((size_t)64 << 20)

/* The checks every event envelope passes, on append and on every read: an
 * object with an integer seq >= 0, an integer time, a non-empty string
 * type, an object data, and an ignorable that is absent or true.  0, or -1
 * with `msg` saying what is wrong.  Thread-safe. */
int weir__log_check_envelope(const json_t *ev, char *msg, size_t size);

/*
 * The whole log file at `path` into a new buffer (*buf, weir__free it; NUL
 * terminated; *len bytes) for a reader (no lock).  A missing file is
 * E_NOT_FOUND; anything but a regular file (a FIFO, /dev/zero, a directory)
 * is refused with E_IO naming it.
 */
int weir__log_read_file(const char *path, char **buf, size_t *len, weir_error *err);
/* The log file at `path` opened for reading (*fd, close it), with the
 * refusals of weir__log_read_file. */
int weir__log_open_read(const char *path, int *fd, weir_error *err);

/*
 * The one reader (core/log/log_check.c): fold the log buffer `buf` (`len`
 * bytes) with every rule a valid log keeps (envelopes, seq contiguity, core
 * fields, event types - core, ignorable, or accepted by `known` (may be
 * NULL) - turn/step nesting, tool calls and results, the surface) and
 * report {ok, events, errors[], open[]} in *report (new reference).  Open
 * (read-only or not), check, derive, print and resume all apply it, so they
 * agree on what a valid log is.  A first line that is not a log event ends
 * the read: the file is not a weir log.  `deep` adds the check that
 * re-deriving prefixes gives the same history (at the answers where the
 * log has doubled since the last, and at the end: linear; `weir log
 * --check` only).  WEIR_OK, or E_NOMEM.
 */
int weir__log_check_buffer(const char *buf, size_t len, weir__type_known_fn known, void *known_ud,
                           bool deep, json_t **report, weir_error *err);
/*
 * weir__log_check_buffer of the log file open on `fd`, read as a stream
 * from its start: the check holds the longest line and what the fold
 * keeps (the surface, and with `deep` one offset per envelope: the prefix
 * is read again from the file), never the file.  With `derived` (may be
 * NULL), a log without errors also gives the messages its surface derives
 * to (new reference), as weir__log_derive of the log opened would.  E_IO
 * when a read fails.
 */
int weir__log_check_fd(int fd, weir__type_known_fn known, void *known_ud, bool deep,
                       json_t **report, json_t **derived, weir_error *err);
/*
 * Called by weir__log_check_each for every envelope of a log that is valid
 * so far (no error found up to and with it), in order: `ev` (borrowed;
 * json_incref what you keep), its line at buf + `off` (`n` bytes, without
 * the newline).  false stops the read (out of memory): the check then fails
 * with E_NOMEM.
 */
typedef bool (*weir__log_each_fn)(json_t *ev, size_t off, size_t n, void *ud);
/* weir__log_check_buffer (not deep) that hands each valid envelope to
 * `each` as it reads it: what open folds, in the one pass that checks. */
int weir__log_check_each(const char *buf, size_t len, weir__type_known_fn known, void *known_ud,
                         weir__log_each_fn each, void *each_ud, json_t **report,
                         weir_error *err);

/*
 * Where the one reader starts when an open resumes from a checkpoint
 * (docs/session-log.md, "Resume from a checkpoint"): the lines before seq
 * `first` are not read, and what the reader's folds would hold after them
 * comes from here (all borrowed for the call).
 */
typedef struct weir__log_seed {
    size_t first;                 /* the seq of the first line read (the checkpoint) */
    size_t at;                    /* the byte offset of that line in the log */
    const weir__tally *tally;     /* what the events before it add up to */
    const weir__surface *surface; /* the surface they leave (the reader clones it) */
    const json_t *header_ev;      /* the latest request/header envelope, or NULL */
    const json_t *context_ev;     /* the latest request/context envelope, or NULL */
} weir__log_seed;
/* weir__log_check_each of `buf` (`len` bytes: the log from the seed's
 * line on): the report's events count the log from seq 0, its errors name
 * seqs and lines of the whole log, `each` gets offsets in `buf`. */
int weir__log_check_each_from(const char *buf, size_t len, const weir__log_seed *seed,
                              weir__type_known_fn known, void *known_ud, weir__log_each_fn each,
                              void *each_ud, json_t **report, weir_error *err);

/* What an open answers when the one reader's `report` is not ok:
 * E_LOG_CORRUPT "PATH:LINE: first error (and N more: see weir log
 * --check)".  Returns the code. */
int weir__log_refuse(const char *path, const json_t *report, weir_error *err);

/*
 * The line of a log buffer (`len` bytes) at *off, parsed: *off moves past it
 * and its newline, *n is its length.  A torn line (the last one without its
 * newline: what a crash mid-write leaves) sets *torn and returns NULL; so
 * does an unparsable line, with *torn false and `jerr` saying why (a
 * complete line is never torn: it is corruption).  The one rule every log
 * reader (open, check) applies.
 * @return a new reference, or NULL.
 */
json_t *weir__log_read_line(const char *buf, size_t len, size_t *off, size_t *n, bool *torn,
                            json_error_t *jerr);

/* Parse "always"|"step"|"none" (NULL = step). -1 on bad input. */
int weir__fsync_parse(const char *s, weir__fsync *out);


/*
 * Open `path` for appending: created if missing (mode 0600, missing parent
 * directories 0700; an existing directory that others can read gets a
 * warning on stderr).  The writer takes an exclusive OFD lock on the file
 * for as long as the log is open: a second writer, in this process or
 * another, fails at once with E_BUSY ("session ID is open for writing by
 * pid N").  Existing events are read by the one reader
 * (weir__log_check_buffer): any error fails with E_LOG_CORRUPT naming the
 * file and the line or seq; a torn last line is dropped (truncated) with a
 * warning on stderr - but never the file's only line unless it is the
 * start of a weir event: a file whose first line is not a log event is
 * refused, never rewritten.  Only regular files are opened.
 */
int weir__log_open(const char *path, weir__fsync policy, weir__type_known_fn known, void *known_ud,
                   weir__log **out, weir_error *err);
/*
 * weir__log_open (readonly false) or weir__log_open_readonly (true) on
 * `store` (core/log/store.h; the file store when store.vt is NULL or the file
 * store): session `id` whose file is `path`.  A store without files names
 * the log "<store_name>:<id>" in messages and weir__log_path.  An append
 * the store fences (WEIR_E_LEASE_LOST) fails, and so does every later
 * append of this log.
 */
int weir__log_open_store(const char *store_name, weir__store_ref store, const char *id,
                         const char *path, bool readonly, weir__fsync policy,
                         weir__type_known_fn known, void *known_ud, weir__log **out,
                         weir_error *err);
/* Read-only open for `weir log` (no lock, no repair, no create; a torn
 * tail is ignored silently and left in the file, so a live writer's log
 * reads as a consistent prefix; appends fail with E_STATE).  The same
 * reader and errors as weir__log_open. */
int weir__log_open_readonly(const char *path, weir__log **out, weir_error *err);
void weir__log_close(weir__log *log);

const char *weir__log_path(const weir__log *log);
/*
 * The writer's store, open session and lease epoch (borrowed, valid while
 * the log is open), for the store's inbox calls (core/api/store_ops.c).  Fails as
 * an append would (E_STATE read-only, E_LEASE_LOST fenced, E_IO broken),
 * with the outputs still set.
 */
int weir__log_store_handle(weir__log *log, weir__store_ref *store, void **handle,
                           uint64_t *epoch, weir_error *err);
/* Whether the writer's lease is known lost (an append was fenced, or the
 * store's lease_lost says so), without the log's lock, which an append
 * holds for a whole store round trip: any thread, never blocks on it. */
bool weir__log_lease_lost(weir__log *log);
size_t weir__log_count(const weir__log *log);
/*
 * Borrowed envelope for `seq`, or NULL (no such seq, or out of memory: for a
 * seq below the count NULL is always out of memory, never skip it).  The
 * log keeps the request header and context, and the surface's messages but
 * assistant/message (the surface keeps its own lean copy); any other
 * envelope it keeps as its line: those read at open are released as they
 * are read, those appended by a step end's weir__log_trim, and either is
 * read back when asked (the same JSON) and held until the next trim.  So
 * the pointer is valid until the next trim or the close: use it on the
 * driver thread, and json_incref what you keep.  Other threads:
 * weir__log_event_ref.
 */
const json_t *weir__log_event(const weir__log *log, size_t seq);
/* Borrowed: the envelope for `seq`, as weir__log_event, but valid until the
 * turn ends (the idle weir__log_trim): the step trims pass over it.  What
 * agent_event_peek hands a plugin.  NULL also when out of memory. */
const json_t *weir__log_event_lend(weir__log *log, size_t seq);
/*
 * Whether the log holds envelope `seq` (< count): every one, but after an
 * open that resumed from a checkpoint (docs/session-log.md, "Resume from a
 * checkpoint") the older ones it did not read (not on the surface, not
 * kept), which weir__log_event reads back from the store one at a time.
 * A fold that a checkpoint stands for (the inbox, the jobs, the last
 * continuation note) skips those.  Thread-safe.
 */
bool weir__log_held(const weir__log *log, size_t seq);
/* For the types the log's folds follow (request/header, request/context,
 * request/continuations-dropped, user/message): the seq + 1 of the latest
 * one, 0 when there is none; SIZE_MAX for any other type.  Thread-safe. */
size_t weir__log_latest(const weir__log *log, const char *type);
/* The seq of the checkpoint an open resumed from (every envelope from it
 * on is held), or 0 when the open read every line.  Thread-safe. */
size_t weir__log_base(const weir__log *log);
/* New reference: a copy of the surface the open rebuilt from a checkpoint
 * (sharing its events), or of an empty surface when it read every line:
 * where an independent fold of the held envelopes starts.  NULL when out
 * of memory.  Thread-safe. */
weir__surface *weir__log_base_surface(const weir__log *log);
/* New reference: the envelope for `seq`, as weir__log_event, or NULL; any
 * thread.  A released envelope is read back for the caller alone (the log
 * does not hold it), so a scan of the whole log through it holds one
 * envelope at a time. */
json_t *weir__log_event_ref(const weir__log *log, size_t seq);

/*
 * Append.  `data` borrowed (copied).  `surface_op` is required for surface
 * types (system/message, user/message, assistant/message, tool/result) and
 * forbidden otherwise (NULL); `source_seqs` optional (borrowed).  `flags`:
 * WEIR_EVENT_IGNORABLE, WEIR__APPEND_HANDOVER.  On success *seq_out (may be
 * NULL) is the new seq.  Fails with E_LOG_REJECTED (nothing changed) or E_IO.
 */
/* From the core: `data` is handed over (the caller releases its reference
 * right after the call and never touches the object again), and the
 * scalars of `data`, `surface_op` and `source_seqs` are never changed in
 * place (common.h).  When nothing else holds any part of `data`
 * (weir__json_sole) the log keeps it as it is; otherwise, and for
 * `surface_op` and `source_seqs`, it copies their objects and arrays and
 * shares their scalars.  Without the flag every value is deep-copied. */
#define WEIR__APPEND_HANDOVER 0x100u
int weir__log_append(weir__log *log, const char *type, const json_t *data, const json_t *surface_op,
                     const json_t *source_seqs, uint32_t flags, size_t *seq_out, weir_error *err);

/* Sync now whatever the policy (a read-only log: no-op): before what is
 * logged lets something else go, e.g. a store's queued inputs. */
int weir__log_sync_durable(weir__log *log, weir_error *err);
/* Release what the log need not hold.  With `idle` false (the driver, when
 * a step ends): the envelopes appended (and given to the observer) before
 * the last such trim that weir__log_event can read back from their lines
 * (the newest step's stay until the next trim: the plugins read them when
 * the next step starts), and those it read back since.  With `idle` true (the
 * driver, when a turn ends): every loan ends (weir__log_event_lend) and the
 * lent envelopes behind the window go, those read back, and the line buffer appends
 * serialize into when a long line grew it past its first 4 KiB (one of that
 * size stays); the newest step's envelopes stay.  Memory then grows by
 * the bytes of the log, not by its JSON trees (about 13 bytes a byte), in a
 * long turn as across turns.  Thread-safe. */
void weir__log_trim(weir__log *log, bool idle);
/* Bytes the reused line buffer holds now (0: none; at most 4 KiB after an
 * idle trim); for tests and benches.  Thread-safe. */
size_t weir__log_line_buffer(const weir__log *log);
/* fsync now (policy none: no-op). */
int weir__log_sync(weir__log *log, weir_error *err);
/* fsync when the policy is step (called at the points docs/session-log.md names); no-op for
 * always (every append is synced) and none. */
int weir__log_sync_point(weir__log *log, weir_error *err);
/* A sync point that may wait (policy step; a no-op otherwise): the next
 * sync pays it, whoever calls it, and weir__log_pay_sync pays it now
 * when it is still owed.  The driver defers the step-end sync point, so a
 * turn's last step and its end are one sync (docs/session-log.md).  (Not a
 * log/checkpoint: weir__log_tally_checkpoint writes those.) */
void weir__log_defer_sync(weir__log *log);
int weir__log_pay_sync(weir__log *log, weir_error *err);

/*
 * Called after every append with the envelope (borrowed, valid until the log
 * is closed), outside the log lock, strictly in seq order.  An observer may
 * append (the nested event is delivered after it returns).  When several
 * threads append at once, the thread already delivering also delivers the
 * others' events, so an append may return before its observer call.  Events
 * read at open are not observed.  Thread-safe.
 */
typedef void (*weir__log_observer_fn)(const json_t *event, void *ud);
void weir__log_set_observer(weir__log *log, weir__log_observer_fn fn, void *ud);
/* How many events the observer has been handed, or will be by the frame
 * delivering now (the seq after them): what a live event raised now
 * follows.  Any thread. */
size_t weir__log_observed(const weir__log *log);

/* The incremental surface of this log (borrowed; see core/format/surface.h).  Not
 * synchronized: read it only while no other thread appends (the driver,
 * which alone changes the surface).  Other threads: the two below. */
const weir__surface *weir__log_surface(const weir__log *log);
/* New reference: the envelopes of the surface's current nodes, in order
 * (the array holds a reference of each, so a trim cannot release them from
 * under the caller), read under the log's lock; any thread.  NULL when out
 * of memory. */
json_t *weir__log_surface_events(weir__log *log);
/* The surface's replacement count, read under the lock; any thread. */
uint64_t weir__log_replace_generation(weir__log *log);
/*
 * New reference: the derived messages (docs/providers.md), read-only: the
 * array is the log's derivation cache itself while the log is open, and the
 * messages are shared with the log's events (json_copy the array, or
 * json_deep_copy a message, to change it; once the log is closed a caller's
 * reference is the array's only one).  A later append never changes an
 * array a caller still holds: the cache goes on in a copy then.  The fold is
 * cached: a derive costs O(new nodes) when nobody kept the last array; a
 * replace rebuilds.  NULL on allocation failure.  Thread-safe.
 */
json_t *weir__log_derive(weir__log *log);
/* Borrowed latest request/header data.header and request/context data, or NULL. */
const json_t *weir__log_request_header(const weir__log *log);
const json_t *weir__log_request_context(const weir__log *log);
/* A copy (new reference) of the latest request/context data, made under the
 * log's lock (any thread), or NULL: none (*oom false) or out of memory. */
json_t *weir__log_request_context_copy(const weir__log *log, bool *oom);

/*
 * Crash repair: when the last turn is open (turn/start without turn/end),
 * append its closers in order: a synthetic tool/result (is_error, error
 * {name:"AbortError", code:"INTERRUPTED"}) for every tool/call of that turn
 * without one, step/end when a step is open, then turn/end {turn,
 * reason:{kind:"interrupted"}}.  *repaired (may be NULL) says whether
 * anything was appended.  Thread-safe (appends go through the log lock).
 * weir_agent_open answers the cut calls itself first (weir__driver_resume:
 * an idempotent tool's call runs again), with the same INTERRUPTED text for
 * the others, so this only closes the step and the turn there.
 */
int weir__log_repair(weir__log *log, bool *repaired, weir_error *err);
/*
 * The same answers for the open step only, without closing it: every
 * tool_call of the step that has no tool/result gets one (INTERRUPTED, its
 * text naming `why`), with its tool/call first when it was never logged.
 * For a step whose tool calls could not all run (the scheduler or the log
 * failed): then step/end may follow.  WEIR_OK when nothing was left to
 * answer.  Thread-safe.
 */
int weir__log_settle_calls(weir__log *log, const char *why, weir_error *err);
/* Highest turn number seen in turn/start events, 0 if none.  Thread-safe. */
int weir__log_last_turn(const weir__log *log);
/* Whether the last turn is open (turn/start without turn/end).  Thread-safe. */
bool weir__log_turn_open(const weir__log *log);
/* Whether a step of the open last turn is open; then *turn, *step and
 * *start_seq (each may be NULL) are its numbers and the seq of its
 * step/start (the log's folds: nothing is read back).  Thread-safe. */
bool weir__log_open_step(const weir__log *log, int *turn, int *step, size_t *start_seq);
/* Whether any request/header was ever logged (first request reason:
 * "initial" when false, "resume" when true).  Thread-safe. */
bool weir__log_has_request_header(const weir__log *log);

/*
 * Between turns, once `every` bytes (0: WEIR__CHECKPOINT_BYTES) of log
 * were written since the last log/checkpoint (or the log's start), the next
 * weir__log_tally_checkpoint writes one.  Any thread.
 */
void weir__log_set_checkpoint_every(weir__log *log, size_t every);
/*
 * Append a log/checkpoint (ignorable) holding what the log adds up to
 * (weir__tally_json) when it is due: no turn is open and the interval has
 * passed.  The driver calls it after each turn/end.  WEIR_OK when nothing
 * was due; else as weir__log_append.
 */
int weir__log_tally_checkpoint(weir__log *log, weir_error *err);

/* weir_log_summary (weir/host.h) of the log file open on `fd`, named
 * `what` in errors (core/log/summary.c). */
int weir__log_summary_fd(int fd, const char *what, json_t **out, weir_error *err);

#endif
