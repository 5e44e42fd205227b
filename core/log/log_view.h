/*
 * core/log/log_view.h - what a plugin reads of a session log through its
 * agent, as JSON: the surface's nodes with their derived messages, the last
 * envelope of a type, and the seqs a surface replacement shadows.  One
 * implementation for the real agent (core/api/agent_context.c) and the test
 * kit's fake agent (sdk/testkit/testkit.c).  Owner: core/log/log_view.c.
 */
#ifndef WEIR_CORE_LOG_VIEW_H
#define WEIR_CORE_LOG_VIEW_H

#include "session_log.h"

/*
 * New reference: [{seq, type, message|null}] for the current surface nodes
 * in order; message is a copy of the node's derived message (null when the
 * node contributes none).  NULL on a NULL log or out of memory.  Any thread
 * (the envelopes are read under the log's lock and held while copied).
 */
json_t *weir__log_surface_nodes(weir__log *log);

/*
 * New reference: a deep copy of the last envelope of `type`, or NULL (none,
 * NULL arguments, out of memory).  Any thread.
 */
json_t *weir__log_last_event(weir__log *log, const char *type);

/*
 * New reference: the seqs of the current surface nodes start_seq..end_seq
 * (by position), or [start_seq, end_seq] when they are not both current (the
 * log then names the bad one when a replace gives them as its sources).
 * NULL when out of memory.  The driver's thread (reads the surface).
 */
json_t *weir__log_shadowed_seqs(const weir__log *log, size_t start_seq, size_t end_seq);

#endif
