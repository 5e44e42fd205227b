/*
 * core/log/inbox.h - the durable inbox (docs/generations.md).
 *
 * Two lists, next-turn and next-step, rebuilt by folding agent/inbox/spliced
 * events.  Every change appends its durable event first, then changes the
 * lists.  Thread-safe (own mutex).  Owner: core/log/inbox.c.
 *
 * Order.  Every queued message has an arrival number (the order its
 * insertion was logged).  A queued next-turn message is a barrier: next-step
 * input that arrived after it waits behind it, so later input never
 * overtakes an earlier boundary batch (docs/generations.md).  Input anchored to
 * the running turn (anchored steering, a tool's additional context) is
 * queued at the front of the waiting input and is never held back by a
 * barrier; it never outlives its turn (weir__inbox_hold_anchored).
 */
#ifndef WEIR_CORE_INBOX_H
#define WEIR_CORE_INBOX_H

#include "common.h"
#include "session_log.h"

typedef struct weir__inbox weir__inbox;

/* Live notifications: kind is "inserted", "discarded", "claimed" or "held"
 * (anchored input removed when its turn ended); `message` borrowed for the
 * call; `turn` is the claiming turn for "claimed", the anchor's turn for
 * "held" and 0 otherwise.  Called after the lists changed, outside the inbox
 * lock. */
typedef void (*weir__inbox_notify_fn)(const char *kind, const json_t *message, int turn, void *ud);

/*
 * Rebuild the lists from `log` (borrowed; must outlive the inbox): the fold
 * of its agent/inbox/spliced events.  Delivered ids = ids of user/message
 * events plus ids removed by splices without an outcome (claims); settled
 * ids = ids removed with an outcome (canceled, held).  Both are known: a
 * resubmission is acknowledged, never queued again.  A
 * malformed splice fails with E_LOG_CORRUPT "invalid persisted inbox splice
 * at session seq N".
 */
int weir__inbox_create(weir__log *log, weir__inbox **out, weir_error *err);
void weir__inbox_destroy(weir__inbox *ib);
void weir__inbox_set_notify(weir__inbox *ib, weir__inbox_notify_fn fn, void *ud);

/*
 * Append `message` (borrowed; must carry "id") to next-step (`next_step`) or
 * next-turn.  Same id + same content already queued, delivered or settled
 * (canceled, held): returns
 * WEIR_OK and sets *duplicate.  Same id, different content: E_DUPLICATE.
 * After weir__inbox_stop a new id is refused with E_STATE (a duplicate is
 * still acknowledged).
 */
int weir__inbox_add(weir__inbox *ib, const json_t *message, bool next_step, bool *duplicate,
                    weir_error *err);

/*
 * As weir__inbox_add, to next-step, anchored to the running turn `turn`:
 * queued before any input a barrier holds back (the splice carries
 * "anchor_turn").  E_STATE when `turn` is not the running turn
 * (weir__inbox_open_turn) or is past its fence (weir__inbox_close_turn).
 */
int weir__inbox_add_anchored(weir__inbox *ib, const json_t *message, int turn, bool *duplicate,
                             weir_error *err);

/*
 * Claim.  Between steps (`turn_boundary` false): the next-step input the
 * first queued next-turn message does not hold back.  At a turn boundary:
 * that, plus the first next-turn message, plus the next-step input that
 * arrived after it and before the following next-turn message.  One
 * pure-deletion splice per contiguous run.  *claimed: new reference array
 * in claim order.  Emits "claimed" per message.  Nothing changes on
 * failure; when memory runs out part way, the claim is what was taken
 * before (never input that would overtake what stays queued).
 */
int weir__inbox_claim(weir__inbox *ib, bool turn_boundary, int turn, json_t **claimed,
                      weir_error *err);

/* Discard everything (cancel without keep_inbox), next-step first: one
 * splice per non-empty list with outcome "canceled", then "discarded" per
 * message.  Canceled ids are settled: a resubmission is acknowledged, never
 * queued again. */
int weir__inbox_clear(weir__inbox *ib, weir_error *err);

/*
 * Remove the anchored input of turns <= `turn` (every anchored message when
 * `turn` is 0): one splice each with outcome "held", then "held" per
 * message.  Held ids, like canceled ones, are settled.
 */
int weir__inbox_hold_anchored(weir__inbox *ib, int turn, weir_error *err);

/*
 * Remove everything queued with outcome "held" (next-step first, one
 * splice per non-empty list), then "held" per message with turn 0: input
 * a shutdown could not remove, held by the next open.
 */
int weir__inbox_hold_all(weir__inbox *ib, weir_error *err);

/* The running turn anchored input may target (0: none). */
void weir__inbox_open_turn(weir__inbox *ib, int turn);

/*
 * The stop fence of `turn` at its final check: unless `force`, when
 * next-step input that continues the turn (claimable now and not only
 * `service` messages) is queued, returns false and changes nothing;
 * otherwise the turn takes no more anchored input and this returns true.
 * The check and the fence are one step under the inbox lock.
 */
bool weir__inbox_close_turn(weir__inbox *ib, int turn, bool force);

/*
 * Next-step input a claim between steps would take now; *ordinary (may be
 * NULL) says whether any of it is not a `service` message.
 */
size_t weir__inbox_pending(weir__inbox *ib, bool *ordinary);

/* From now on new input is refused (E_STATE); duplicates are acknowledged. */
void weir__inbox_stop(weir__inbox *ib);

/*
 * Whether input id `id` is queued, delivered or settled: 0 no, 1 with content equal
 * to `message` (borrowed; json_equal), -1 with other content, -2 when
 * memory ran out comparing them.
 */
int weir__inbox_known(weir__inbox *ib, const json_t *message);

/* Remember `message` (borrowed, with "id") as delivered, without a log
 * event (its user/message is logged by the caller).  E_NOMEM. */
int weir__inbox_remember(weir__inbox *ib, const json_t *message);

size_t weir__inbox_count(const weir__inbox *ib, bool next_step);

/*
 * weir__log_tally_checkpoint of the inbox's log, only while nothing is
 * queued, checked and written under the inbox lock: a resume from a
 * checkpoint rebuilds an empty inbox (docs/session-log.md, "Resume from a
 * checkpoint").  WEIR_OK when nothing was due or input is queued.
 */
int weir__inbox_checkpoint(weir__inbox *ib, weir_error *err);

#endif
