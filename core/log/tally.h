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

/* How many of the latest user/message events a checkpoint keeps: the input
 * ids a resumed inbox knows as delivered (docs/generations.md). */
#define WEIR__TALLY_INPUTS 32

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
    /* where the folds a resume needs stand (docs/session-log.md, "Resume
     * from a checkpoint"): the highest turn/start number, and seq + 1 (0:
     * none) of the latest request/header, request/context and
     * request/continuations-dropped, and of the last WEIR__TALLY_INPUTS
     * user/message events (a ring; `ninputs` counts every one) */
    json_int_t last_turn;
    size_t header, context, dropped;
    size_t inputs[WEIR__TALLY_INPUTS];
    size_t ninputs;
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

/* *t from a checkpoint's data (borrowed): false when it is not one.  Only
 * the counts: where the folds stand comes from the kept events. */
bool weir__tally_from(weir__tally *t, const json_t *data);

typedef struct weir__surface weir__surface;

/*
 * The data of the log/checkpoint the log writes when its events add up to
 * `t`, its line starts at byte `at` and its surface is `s` (new reference,
 * NULL when out of memory): weir__tally_json plus {at, last_turn,
 * surface: {applied, runs}, keep: [seq, ...]}, `keep` the ascending seqs of
 * the events the folds need besides the surface (the latest request/header,
 * request/context and request/continuations-dropped, the last
 * WEIR__TALLY_INPUTS user/message events).
 */
json_t *weir__checkpoint_json(const weir__tally *t, size_t at, const weir__surface *s);
/*
 * Whether checkpoint `data` (borrowed) is what the log before it adds up
 * to: 0, or -1 with what differs in `msg`.  "at" is not checked (a store
 * may serialize lines its own way); a checkpoint of an older weir (no
 * "at") is checked for its counts only.
 */
int weir__checkpoint_verify(const json_t *data, const weir__tally *t, size_t at,
                            const weir__surface *s, char *msg, size_t size);
/* Whether `data` carries what a resume starts from (at, last_turn,
 * surface, keep, well formed); then *at, *applied, *runs and *keep
 * (borrowed from data). */
bool weir__checkpoint_resumable(const json_t *data, size_t *at, uint64_t *applied,
                                const json_t **runs, const json_t **keep);

#endif
