/*
 * core/format/continuation.h - reasoning continuations: which of the opaque
 * provider blobs the derived history carries may go into a request
 * (docs/session-log.md, "Reasoning continuations"; issue #32 item 1).
 * Owner: core/format/continuation.c.
 *
 * A content block may carry a member "continuation":
 *   {"provider":P, "model":M, "data":{...strings...}, "prefix_bound"?:false}
 * set by the fold of the provider's `continuation` chunk (plugin.h).  It is
 * logged verbatim and sent back to the provider only when it is
 *   (a) well formed: an object; provider and model non-empty strings; data a
 *       non-empty object whose members are all strings; prefix_bound, when
 *       present, a boolean;
 *   (b) of the request's route: P and M equal the request's provider and
 *       model (request/context);
 *   (c) not stale: no surface node before its message was logged after it
 *       (a surface replace - a compaction, a tool result rewrite, a replaced
 *       system prompt - changed the prefix the provider bound it to).
 *       A continuation with "prefix_bound": false (DeepSeek's
 *       reasoning_content, plain text bound to no prefix) is never stale.
 * Otherwise it is dropped: a reasoning block is removed with it, any other
 * block (a tool_call) keeps everything but its "continuation" member.  An
 * assistant message left with no content by that is left out.  The reason
 * counted is the first of (a), (b), (c) that applies.
 *
 * All functions are pure and thread-safe; nothing they are given is changed.
 */
#ifndef WEIR_CORE_CONTINUATION_H
#define WEIR_CORE_CONTINUATION_H

#include "common.h"

typedef struct weir__surface weir__surface;

/* How many continuations a filter dropped, per reason. */
typedef struct weir__cont_dropped {
    size_t malformed; /* (a) */
    size_t route;     /* (b) */
    size_t prefix;    /* (c) */
} weir__cont_dropped;

/* Whether `c` (borrowed, may be NULL) is a well-formed continuation (a). */
bool weir__continuation_valid(const json_t *c);

/*
 * The staleness mask of `messages` (borrowed): the derivation of surface `s`
 * (borrowed; weir__surface_derive or weir__log_derive of the log whose
 * surface it is: those share each assistant message with its event, which
 * is how a message is matched with its node).  *out (weir__free it; NULL
 * when `messages` is empty) gets one bool per message, true for an
 * assistant message that some node before it on the surface has a higher
 * seq than (c).  A message matched with no node is not stale.  0, or -1
 * when out of memory (*out NULL).
 */
int weir__continuation_stale(const weir__surface *s, const json_t *messages, bool **out);

/*
 * The same mask for copies: `events` (borrowed) is the surface's envelopes
 * in order (weir__log_surface_events), and an assistant message matches the
 * node whose message is equal to it (a plugin's request holds copies of
 * the history's messages, not its objects).  0, or -1 when out of memory.
 */
int weir__continuation_stale_copies(const json_t *events, const json_t *messages, bool **out);

/*
 * New reference: `messages` (borrowed, read-only: an array of messages)
 * with every continuation that may not be sent (rules above) dropped, for
 * the route `provider` / `model` (NULL: no route, every continuation is
 * dropped for (b)).  `stale` (borrowed, may be NULL: none) holds one bool
 * per message (weir__continuation_stale).  When nothing is dropped the
 * result is `messages` itself (a new reference); otherwise a new array
 * sharing every unchanged message, the changed ones new objects that share
 * their unchanged blocks: read-only, as the log is.  *dropped (may be NULL)
 * gets the counts.  NULL when out of memory or `messages` is not an array.
 */
json_t *weir__continuation_filter(const json_t *messages, const char *provider,
                                  const char *model, const bool *stale,
                                  weir__cont_dropped *dropped);

/*
 * weir__continuation_stale and weir__continuation_filter in one: the
 * request's messages from `messages` (the derivation of `s`) for the route
 * of `context` (borrowed: request/context data {provider, model}, may be
 * NULL).  What the driver sends and what check_request rebuilds both come
 * from it, so derive == request holds.  New reference, or NULL when out of
 * memory.
 */
json_t *weir__continuation_apply(const json_t *messages, const weir__surface *s,
                                 const json_t *context, weir__cont_dropped *dropped);

/* The total of `d`'s counts. */
size_t weir__continuation_count(const weir__cont_dropped *d);

/*
 * New reference: the data of a request/continuations-dropped event,
 * {provider, model, count, reasons:{malformed?, route?, prefix?}} (a reason
 * only when its count is not 0; provider and model "" when NULL), or NULL
 * when nothing was dropped or out of memory.
 */
json_t *weir__continuation_event(const char *provider, const char *model,
                                 const weir__cont_dropped *d);

/* The durable, ignorable event the driver logs before a request that drops
 * continuations (when its data differs from the last one's). */
#define WEIR__CONTINUATIONS_DROPPED "request/continuations-dropped"

#endif
