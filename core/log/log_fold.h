/*
 * core/log/log_fold.h - the tool-call fold of one step of a session log
 * (docs/session-log.md, docs/tools.md).  Owner: core/log/log_fold.c.
 *
 * Within a step, the model offers tool calls (the tool_call blocks of its
 * assistant/message events), the scheduler dispatches them (tool/call) and
 * each gets an answer (tool/result).  The fold reads a step's envelopes in
 * log order and keeps what is still unanswered:
 *   - wanted:  tool_call blocks never dispatched, in model order (a crash
 *              between the answer and the dispatch, or a call the step
 *              never reached);
 *   - pending: tool/calls without a tool/result, in log order (a crash
 *              while the tool ran).
 * The one fold serves the three readers of a step's calls: the driver's
 * crash recovery (which calls to answer or run again), the log's repair
 * (the interrupted results it appends) and `weir log --check` (what a
 * closed step left unanswered, and the ids a step repeats).
 *
 * An id the step already offered, or already dispatched, is not taken again
 * (the checker reports it); a tool/call takes its id off `wanted` (a call
 * dispatched before its message was logged is never wanted); a tool/result
 * takes the first pending tool/call with its call id.  Not thread-safe: one
 * fold, one reader.
 */
#ifndef WEIR_CORE_LOG_FOLD_H
#define WEIR_CORE_LOG_FOLD_H

#include "common.h"

/* The call_id a tool/result envelope answers: its first tool_result block's
 * call_id; NULL when it has none or when the event is a surface replace
 * (surface_op object), which rewrites history and answers no call.  Borrowed
 * from `ev`.  Thread-safe. */
const char *weir__log_result_call_id(const json_t *ev);

typedef struct weir__call_fold {
    /* [[id, seq, block], ...]: tool_call blocks (of the assistant/message
     * at seq) never dispatched, in model order */
    json_t *wanted;
    /* [[id, seq, envelope], ...]: tool/call envelopes (at seq) without a
     * tool/result, in log order */
    json_t *pending;
    json_t *offered, *called; /* {id: seq}: the ids the step offered, dispatched */
} weir__call_fold;

/* What a fold saw that a well-formed step never holds (the checker's
 * errors; the other readers pass no report function). */
typedef enum weir__call_fold_issue {
    WEIR__FOLD_REOFFERED,  /* a tool_call id the step already offered */
    WEIR__FOLD_REDISPATCHED, /* a tool/call id the step already dispatched */
    WEIR__FOLD_UNMATCHED,  /* a tool/result whose call id no pending tool/call has */
} weir__call_fold_issue;

typedef void (*weir__call_fold_report_fn)(void *ud, size_t seq, weir__call_fold_issue issue,
                                          const char *id);

/* An empty fold.  WEIR_OK or WEIR_E_NOMEM (nothing to release then). */
int weir__call_fold_init(weir__call_fold *f);

/* Empty the fold for the next step. */
void weir__call_fold_reset(weir__call_fold *f);

/* Release what the fold holds (a zeroed fold too). */
void weir__call_fold_free(weir__call_fold *f);

/*
 * Fold the envelope `ev` (borrowed; the fold keeps references to its
 * tool_call blocks and to a tool/call envelope), the event `seq` of the
 * step: assistant/message, tool/call and tool/result change the fold, any
 * other type is passed over.  `report` (may be NULL) hears each issue.
 * WEIR_OK or WEIR_E_NOMEM (the fold is then incomplete).
 */
int weir__call_fold_event(weir__call_fold *f, size_t seq, const json_t *ev,
                          weir__call_fold_report_fn report, void *ud);

#endif
