/*
 * core/format/surface.h - the model-visible surface and message derivation
 * (docs/session-log.md).  Pure functions plus an incremental fold.
 *
 * Surface types: system/message, user/message, assistant/message and
 * tool/result.  Each needs surface_op "append" or {"op":"replace",
 * "start_seq","end_seq"} and data.message {role matching the type,
 * content:[blocks]}; other types may carry neither surface_op nor
 * source_seqs.  A replace removes the current nodes start..end (by surface
 * position; start == end is one node; both must be current; start may not
 * come after end) and puts the new event in their place; its source_seqs
 * must list every shadowed node.  A tool/result used as a replacement may
 * replace exactly one tool/result node and change only data.message.content.
 * source_seqs, when present, is a non-empty array of unique earlier seqs.
 *
 * A surface is not thread-safe; the log serializes access to its own.
 * Owner: core/format/surface.c.
 */
#ifndef WEIR_CORE_SURFACE_H
#define WEIR_CORE_SURFACE_H

#include "common.h"

typedef struct weir__surface weir__surface;

/* Whether `type` (may be NULL) is one of the four surface types. */
bool weir__is_surface_type(const char *type);

/* New empty surface in *out (free with weir__surface_destroy).  WEIR_OK,
 * WEIR_E_INVAL or WEIR_E_NOMEM. */
int weir__surface_create(weir__surface **out);
/* Drop the node references and free.  NULL is a no-op. */
void weir__surface_destroy(weir__surface *s);

/*
 * Validate `event` (a full envelope, borrowed) against the current surface
 * without changing it (rules above; non-surface events pass unless they
 * carry surface_op/source_seqs).  0, or -1 with a message in `msg` (may be
 * NULL).
 */
int weir__surface_check(const weir__surface *s, const json_t *event, char *msg, size_t msg_size);
/* Apply a validated event (borrowed; the surface keeps a reference, so the
 * envelope must not change afterwards).  Non-surface events are ignored.
 * WEIR_OK, WEIR_E_INVAL (not applicable) or WEIR_E_NOMEM (unless reserved). */
int weir__surface_apply(weir__surface *s, const json_t *event);

/* New reference: what a surface need keep of an assistant/message, the
 * envelope without data.stream (the timed chunks only the log's readers
 * want), sharing the rest; NULL for any other event, one without a stream,
 * or when out of memory (keep the whole one then).  Pure; thread-safe. */
json_t *weir__surface_lean(const json_t *ev);

/* Number of current nodes; seq of node i ((size_t)-1 when out of range);
 * number of committed replaces. */
size_t weir__surface_len(const weir__surface *s);
size_t weir__surface_node(const weir__surface *s, size_t i);
uint64_t weir__surface_replace_generation(const weir__surface *s);

/*
 * The surface as runs, for a checkpoint (docs/session-log.md, "Resume from
 * a checkpoint").  Every applied surface event has an ordinal, its place
 * among all surface events applied (0, 1, ...); a run is a stretch of
 * current nodes whose ordinals follow each other, so it is exactly "the
 * surface events whose seqs lie in [first, last]": none between them was
 * shadowed.  New reference: [[first_seq, last_seq, first_ordinal], ...] in
 * surface order ([] for an empty surface), NULL when out of memory.
 */
json_t *weir__surface_runs(const weir__surface *s);
/* How many surface events were applied: the next one's ordinal. */
uint64_t weir__surface_applied(const weir__surface *s);
/*
 * Rebuild a surface from a checkpoint's runs: append `event` (borrowed; a
 * reference is kept) as the last node with ordinal `ord`, taking no op into
 * account (the checkpoint says it is current).  Then
 * weir__surface_restored(applied) sets the next ordinal.  WEIR_E_INVAL for
 * an event of another type, WEIR_E_NOMEM.
 */
int weir__surface_restore(weir__surface *s, const json_t *event, uint64_t ord);
void weir__surface_restored(weir__surface *s, uint64_t applied);
/* A new surface in *out with the nodes (their events shared), ordinals and
 * counts of `s`.  WEIR_E_INVAL, WEIR_E_NOMEM. */
int weir__surface_clone(const weir__surface *s, weir__surface **out);
/* Borrowed: the envelope node i holds (what weir__surface_apply was given),
 * or NULL when out of range. */
const json_t *weir__surface_event(const weir__surface *s, size_t i);
/* Node i's place among every surface event applied (0 when out of range). */
uint64_t weir__surface_ord(const weir__surface *s, size_t i);
/* The position of the node with `seq`, or -1. */
long weir__surface_find(const weir__surface *s, size_t seq);
/*
 * Put `event` (a reference the surface takes; same seq) in node i's place
 * and return the one it held (the caller's reference now), or NULL when i
 * is out of range (then `event` is released).  For a reader that holds its
 * nodes in a lighter form than their events (core/log/log_check.c) and
 * brings one back whole for a check that reads it.
 */
json_t *weir__surface_swap(weir__surface *s, size_t i, json_t *event);

/*
 * New reference: the message an event contributes, or NULL for none.
 * system/message and assistant/message: data.message, none when its content
 * is empty (no blocks, or only text/reasoning blocks with empty text);
 * user/message: {role:"user", content, source?} (the input id is dropped);
 * tool/result: data.message; any other type: none.  Pure; thread-safe.
 */
json_t *weir__derive_event_message(const json_t *event);
/* As weir__derive_event_message into *out (NULL for none), but the message
 * shares the event's values (read-only, as the log is), as
 * weir__surface_derive's do.  WEIR_OK, or WEIR_E_NOMEM when a message is
 * due but could not be built. */
int weir__derive_event_shared(const json_t *event, json_t **out);
/* New reference: all derived messages in surface order (NULL on NOMEM).
 * Unlike weir__derive_event_message's deep copy, the messages here (and of
 * weir__surface_derive_into) share the events' values: read-only, as the
 * log is. */
json_t *weir__surface_derive(const weir__surface *s);

/* Make room for `extra` more nodes so that the next weir__surface_apply()
 * calls (up to `extra` appends) cannot fail.  WEIR_OK or WEIR_E_NOMEM. */
int weir__surface_reserve(weir__surface *s, size_t extra);
/*
 * Append to `out` (an array, borrowed) the messages of surface nodes
 * [from, len).  *done (may be NULL) is advanced past each node whose message
 * was appended (or that contributes none), so a caller can resume after a
 * WEIR_E_NOMEM.  Used by the log's derivation cache.
 */
int weir__surface_derive_into(const weir__surface *s, size_t from, json_t *out, size_t *done);

#endif
