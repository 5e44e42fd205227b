/*
 * core/log/tally.h - what a session log's events add up to: its events,
 * turns, whether its last turn is open, its last time, and the usage and
 * cost its model calls reported.  The log keeps one as it commits, writes
 * it into its `log/checkpoint` events, the checker verifies each checkpoint
 * against its own, and `weir sessions` (weir_log_summary) adds the tail of
 * a log to the last checkpoint's (docs/session-log.md, "Checkpoints").
 * Owner: core/log/tally.c.
 */
#ifndef WEIR_CORE_TALLY_H
#define WEIR_CORE_TALLY_H

#include "common.h"

typedef struct weir__tally {
    json_int_t events;    /* envelopes folded */
    json_int_t turns;     /* turn/start events */
    bool open;            /* the last turn/start has no turn/end yet */
    json_int_t last_time; /* the time of the last envelope */
    /* usage of assistant/message and assistant/attempt events: uncached
     * input, cache read, cache write (the per-TTL split when no total),
     * output; the sum of their cost.usd */
    bool any;             /* some event reported usage */
    bool unpriced;        /* some event reported usage without a cost */
    json_int_t in, cached, written, out;
    double usd;
} weir__tally;

/* The log's default interval between checkpoints: 4 MiB of log. */
#define WEIR__CHECKPOINT_BYTES ((size_t)4 << 20)

/* Add one envelope (borrowed). */
void weir__tally_event(weir__tally *t, const json_t *ev);

/*
 * A checkpoint's data for `t` (new reference, NULL when out of memory):
 * {events, turns, usage?: {input_tokens, cache_read_tokens,
 * cache_write_tokens, output_tokens}, cost?: {usd}}, usage only when some
 * event reported it, cost only when every such event was priced.  A
 * checkpoint is written between turns: `open` and `last_time` are not in it.
 */
json_t *weir__tally_json(const weir__tally *t);

/* *t from a checkpoint's data (borrowed): false when it is not one. */
bool weir__tally_from(weir__tally *t, const json_t *data);

#endif
