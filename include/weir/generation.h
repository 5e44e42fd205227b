/*
 * weir/generation.h - host-facing generations (docs/generations.md).
 *
 * A generation tracker turns an agent's event stream into the correlation
 * events a host program needs to match answers with its inputs: one
 * generation per turn that claimed input, with
 *   generation.started   {generation_id, initial_input_id, call_id?, turn}
 *   assistant.message    {generation_id, input_ids, accepted_input_ids, text, turn, step}
 *                        (provisional: it may precede tool calls or more requests)
 *   generation.finished  {generation_id, input_ids, accepted_input_ids, text,
 *                         active_job_ids, disposition:"manager_turn_finished", reason}
 *   generation.failed    {..., error_type, error_message, reason, durable?}
 *   generation.detached  {..., cancellation:"unconfirmed", reason}
 *   input.queued         {input_id, delivery:"new_turn"|"request_boundary", source, generation_id?}
 *   input.delivered      {input_id, delivery, source, generation_id}
 *   input.unknown        {input_id, delivery, source, generation_id, reason}
 *   input.discarded      {input_id, source, reason:"canceled"}
 *   input.held           {input_id, source, reason:"shutdown", durable?}
 * Each event is handed to the callback as {"type", "time", "data"}.
 * Every generation ends with exactly one finished/failed/detached.  When
 * the session log cannot be written, the agent's live agent/error with
 * fatal:true ends its turn (no turn/end can follow): the generation fails
 * there, error_type "IO", and that event carries "durable":false (the log
 * does not record the end; a resume closes the turn as interrupted).
 *
 * The tracker is an observer: it never drives the agent.  The embedder
 * calls weir_generation_tracker_feed() from its weir_agent_options.on_event
 * with every event, in the order the agent delivers them.
 *
 * Thread-safety: every function may be called from any thread; calls are
 * serialized by the tracker's own mutex.  The callback runs with that mutex
 * held, on the thread that called feed() or shutdown(); it must not call
 * back into the same tracker.
 */
#ifndef WEIR_GENERATION_H
#define WEIR_GENERATION_H

#include <stdbool.h>

#include <jansson.h>

#include "weir/errors.h"
#include "weir/export.h"
#include "weir/host.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weir_generation_tracker weir_generation_tracker;

/**
 * Receives one host-facing event.
 * @param event      borrowed for the call: {"type", "time", "data"}.
 * @param user_data  as given to weir_generation_tracker_create().
 */
typedef void (*weir_generation_event_fn)(const json_t *event, void *user_data);

/**
 * Create a tracker.
 * @param cb   called for every generation.* and input.* event (not NULL).
 * @param out  receives the tracker; the caller owns it
 *             (weir_generation_tracker_destroy).
 * @return WEIR_OK, WEIR_E_INVAL (NULL argument) or WEIR_E_NOMEM.
 * Since: 0.1
 */
WEIR_API int weir_generation_tracker_create(weir_generation_event_fn cb, void *user_data,
                                            weir_generation_tracker **out,
                                            weir_error *err) WEIR_WUR;

/**
 * Feed one agent event, exactly as the agent's on_event received it.
 * @param event    borrowed.  Durable: the log envelope {seq,time,type,data};
 *                 live: {type,time,data}.  Events the tracker does not use
 *                 are ignored.
 * @param durable  as on_event received it.
 * @return WEIR_OK; WEIR_E_INVAL when `tracker` or `event` is NULL or the
 *         event has no string "type"; WEIR_E_NOMEM when an event could not
 *         be built (the tracker's state stays consistent: the event that
 *         failed is not emitted).
 * Since: 0.1
 */
WEIR_API int weir_generation_tracker_feed(weir_generation_tracker *tracker, const json_t *event,
                                          bool durable);

/**
 * Shut down: stop the agent's work and report its unconsumed input as held.
 * From this call on, every input the agent discards is reported
 * input.held (removed, never replayed) instead of input.discarded.  The
 * running turn (if any) is cancelled with cause "disposed" and the agent's
 * inbox is cleared durably, so a later resume does not replay it.  The
 * cancelled turn's turn/end, fed as usual, closes its generation with
 * generation.detached.  Afterwards stop sending to the agent, wait for its
 * driver, and close it.  When the log cannot take the inbox's removal,
 * the input still queued is reported input.held with "durable":false and
 * the error is returned; the log still holds that input, but it is never
 * replayed: with the file store an empty `<log>.held` file records the hold
 * and the next open holds the input durably (docs/generations.md).
 * @param agent  the agent this tracker observes (borrowed, not NULL).
 * @return WEIR_OK, WEIR_E_INVAL, or the inbox's error (I/O).
 * Since: 0.1
 */
WEIR_API int weir_generation_tracker_shutdown(weir_generation_tracker *tracker, weir_agent *agent,
                                              weir_error *err) WEIR_WUR;

/**
 * The turn the open generation `generation_id` is running, for anchored
 * steering (weir_agent_steer_turn), or 0 when that generation is not open
 * or is between turns (it then takes no anchored steering: the request is
 * stale or unavailable).  Any thread.
 * Since: 0.1
 */
WEIR_API int weir_generation_tracker_turn(weir_generation_tracker *tracker,
                                          const char *generation_id);

/** Free the tracker (emits nothing).  NULL is a no-op. Since: 0.1 */
WEIR_API void weir_generation_tracker_destroy(weir_generation_tracker *tracker);

#ifdef __cplusplus
}
#endif
#endif /* WEIR_GENERATION_H */
