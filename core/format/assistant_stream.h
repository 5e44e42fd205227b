/*
 * core/format/assistant_stream.h - a model call's stream as the session log keeps
 * it (docs/session-log.md, "The stream"), and the assistant message folded
 * from it.  Owner: core/format/assistant_stream.c.
 *
 * A stream is the chunks a provider emitted (plugin.h, weir_provider),
 * each with the "time" (epoch ms) it arrived.  assistant/message and
 * assistant/attempt embed it in the compact timed form: runs of deltas of
 * one block packed into one record, the time of each chunk kept as an
 * offset.  weir__stream_expand gives the chunks back exactly, and reads the
 * raw chunk arrays of older logs as they are.  All functions are pure and
 * thread-safe.
 */
#ifndef WEIR_CORE_ASSISTANT_STREAM_H
#define WEIR_CORE_ASSISTANT_STREAM_H

#include "common.h"

/*
 * New reference: the compact timed form of `chunks` (borrowed, an array of
 * chunk objects), or NULL when out of memory (or `chunks` is not an array).
 * Records, in stream order:
 *   {"type":"text-chunks","index":I,"time0":T,"dt":[ms...],"texts":[s...]}
 *   {"type":"reasoning-chunks", same fields}
 *   {"type":"tool-call-chunks","index":I,"time0":T,"dt":[...],"id"?,"name"?,
 *    "args":[s...]}
 *   {"type":"chunk","time"?:T,"chunk":{...the chunk without its time}}
 * A run holds consecutive deltas of one block index, each exactly
 * {type, index, text | arguments_delta, time} (a tool call's first delta
 * may add id and name); delta boundaries are kept (one text per chunk),
 * dt[k] is chunk k's time minus time0 (the run's first time).  Anything
 * else is a "chunk" record.  weir__stream_expand(compact(c)) equals c.
 */
json_t *weir__stream_compact(const json_t *chunks);

/* True when `stream` is an array of well-formed compact records (an empty
 * array is both forms). */
bool weir__stream_is_compact(const json_t *stream);

/*
 * New reference: the chunks of a logged stream.  A compact stream is
 * expanded; any other array (the raw chunk arrays older logs hold) is
 * returned as it is (a deep copy).  NULL when
 * `stream` is not an array, or out of memory.
 */
json_t *weir__stream_expand(const json_t *stream);

/* The assistant message folded from chunks. */
typedef struct weir__assembled {
    json_t *message;    /* new: {role:"assistant", content:[...]} */
    json_t *usage;      /* borrowed from a chunk, or NULL */
    json_t *calls;      /* new: [{id, name, arguments}] */
    const char *finish; /* borrowed finish kind, or NULL */
    json_t *failure;    /* borrowed failure of an error/aborted finish, or NULL */
    bool visible;       /* non-empty text or reasoning */
} weir__assembled;

/*
 * Fold `chunks` (borrowed; borrowed members of *out point into it) into
 * *out.  `with_calls`: keep tool_call blocks (never kept after a
 * max-tokens finish).  A tool call whose stream has no id gets one derived
 * from its block (index and the time of its first chunk), so the same
 * stream always folds into the same message.  A `continuation` chunk sets
 * its block's "continuation" member to a copy of the chunk's (the last one
 * wins; an unseen index opens a reasoning block); a reasoning block with
 * one is kept even when its text is empty (not `visible` then).  The
 * request filter (core/format/continuation.h) judges it; the fold keeps it as it
 * came.  0, or -1 when out of memory
 * (nothing to release).  The caller releases out->message and out->calls.
 */
int weir__stream_assemble(const json_t *chunks, bool with_calls, weir__assembled *out);

/*
 * Give every tool_call block of `content` (borrowed, changed in place; an
 * assistant message's content) an id no other block of it has: the first
 * block with an id keeps it, a repeat becomes "<id>_<n>" (n = 2, 3, ...),
 * an empty id "call_<n>", each n the smallest whose name no block holds.
 * The same content is always renamed the same way.  `renamed` (borrowed,
 * may be NULL) gets one {block, was, id} per renamed block.  0, or -1 when
 * out of memory (the blocks renamed so far keep their new ids).
 */
int weir__calls_unique(json_t *content, json_t *renamed);

#endif
