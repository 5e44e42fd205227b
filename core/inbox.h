/*
 * core/inbox.h - the durable inbox (DESIGN §6, reference §3.5 and §5.1).
 *
 * Two lists, next-turn and next-step, rebuilt by folding agent/inbox/spliced
 * events.  Every change appends its durable event first, then changes the
 * lists.  Thread-safe (own mutex).  Owner: core/inbox.c.
 */
#ifndef WEIR_CORE_INBOX_H
#define WEIR_CORE_INBOX_H

#include "common.h"
#include "session_log.h"

typedef struct weir__inbox weir__inbox;

/* Live notifications: kind is "inserted", "discarded" or "claimed";
 * `message` borrowed for the call; `turn` is the claiming turn for "claimed"
 * and 0 otherwise.  Called after the lists changed, outside the inbox lock. */
typedef void (*weir__inbox_notify_fn)(const char *kind, const json_t *message, int turn, void *ud);

/*
 * Rebuild the lists from `log` (borrowed; must outlive the inbox): the fold
 * of its agent/inbox/spliced events.  Delivered ids = ids of user/message
 * events plus ids removed by non-canceled splices (claims).  A malformed
 * splice fails with E_LOG_CORRUPT "invalid persisted inbox splice at session
 * seq N".
 */
int weir__inbox_create(weir__log *log, weir__inbox **out, weir_error *err);
void weir__inbox_destroy(weir__inbox *ib);
void weir__inbox_set_notify(weir__inbox *ib, weir__inbox_notify_fn fn, void *ud);

/*
 * Append `message` (borrowed; must carry "id") to next-step (`next_step`) or
 * next-turn.  Same id + same content already queued or delivered: returns
 * WEIR_OK and sets *duplicate.  Same id, different content: E_DUPLICATE.
 */
int weir__inbox_add(weir__inbox *ib, const json_t *message, bool next_step, bool *duplicate,
                    weir_error *err);

/*
 * Claim: all next-step messages, plus one next-turn message when
 * `turn_boundary`.  One pure-deletion splice per list.  *claimed: new
 * reference array (next-step first).  Emits "claimed" per message.
 * Nothing changes on failure; if the next-step batch was claimed but the
 * next-turn message cannot be (memory), the claim is that batch alone and
 * the next-turn message stays queued.
 */
int weir__inbox_claim(weir__inbox *ib, bool turn_boundary, int turn, json_t **claimed,
                      weir_error *err);

/* Discard everything (cancel without keep_inbox), next-step first: one
 * splice per non-empty list with outcome "canceled", then "discarded" per
 * message.  Canceled ids are not delivered and may be sent again. */
int weir__inbox_clear(weir__inbox *ib, weir_error *err);

size_t weir__inbox_count(const weir__inbox *ib, bool next_step);

#endif
