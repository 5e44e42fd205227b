/*
 * core/api/agent_context.h - what a plugin may read and change of an agent's
 * model context (the `agent context` members of weir_api, used by
 * compaction): the current surface, surface replacements, the last logged
 * event of a type, model info and a direct, unlogged model call (also one
 * through the llm/stream chain).
 * Owner: core/api/agent_context.c.  Everything here runs on the agent's driver
 * thread (where its hooks run) unless said otherwise.
 */
#ifndef WEIR_CORE_AGENT_CONTEXT_H
#define WEIR_CORE_AGENT_CONTEXT_H

#include "common.h"
#include "weir/host.h"

/*
 * New reference: [{seq, type, message|null}] for the current surface nodes in
 * order; message is a copy of the node's derived message (null when the
 * node contributes none).  NULL on NULL agent or out of memory.
 */
json_t *weir__agent_surface(weir_agent *agent);

/* Committed surface replacements of the agent's log; 0 for NULL. */
uint64_t weir__agent_replace_generation(weir_agent *agent);

/*
 * Append one `type` ("user/message" | "tool/result") event with `data`
 * (borrowed) and surface_op {op:"replace", start_seq, end_seq}.
 * `source_seqs` (borrowed, may be NULL: the replaced nodes) as the log wants
 * it.  WEIR_E_INVAL on bad arguments, WEIR_E_LOG_REJECTED (nothing changed)
 * when the log refuses it, WEIR_E_IO/NOMEM.  *seq_out may be NULL.
 */
int weir__agent_surface_replace(weir_agent *agent, const char *type, const json_t *data,
                                size_t start_seq, size_t end_seq, const json_t *source_seqs,
                                size_t *seq_out, weir_error *err);

/* New reference: a deep copy of the last envelope of `type`, or NULL. */
json_t *weir__agent_last_event(weir_agent *agent, const char *type);

/* New reference: a deep copy of envelope `seq`, or NULL when out of range. */
json_t *weir__agent_event(weir_agent *agent, size_t seq);

/* Borrowed: envelope `seq` itself (the log's, immutable, valid until the
 * current turn ends: weir__log_event_lend), or NULL when out of range or
 * out of memory. */
const json_t *weir__agent_event_peek(weir_agent *agent, size_t seq);

/* New reference: envelope `seq` itself (the log's, immutable; json_decref
 * it), or NULL when out of range or out of memory.  Any thread. */
json_t *weir__agent_event_ref(weir_agent *agent, size_t seq);

/*
 * New reference: the model_info of provider row `provider` for `model`
 * ({context_window, max_output}), or NULL when unknown.  Thread-safe as the
 * provider is.
 */
json_t *weir__agent_model_info(weir_agent *agent, const char *provider, const char *model);
/* api->agent_route (weir/plugin.h, ABI 1.12). */
json_t *weir__agent_route(weir_agent *agent, weir_error *err);

/*
 * One direct model call for `request` (borrowed {provider, model,
 * max_tokens?, messages, tools?}): prepare_call with the request minus
 * messages/tools as config, stream into a private, non-live collector,
 * release.  The messages' continuations are filtered for the request's
 * provider and model as the driver's (core/format/continuation.h; a stale one is
 * matched with the history by equality, the messages being copies).
 * Nothing is logged and no hook runs.  On WEIR_OK *result is new:
 * {message:{role:"assistant", content:[text blocks]}, usage?, finish}: the
 * text blocks (type and text only) of the stream's fold, weir__stream_assemble.
 * Errors: WEIR_E_INVAL, WEIR_E_NOT_FOUND (unknown provider), WEIR_E_PROVIDER
 * (prepare_call failed or the stream failed: err->text starts with the
 * failure code), WEIR_E_CANCELLED, WEIR_E_NOMEM.
 */
int weir__agent_complete(weir_agent *agent, const json_t *request, weir_signal *signal,
                         json_t **result, weir_error *err);

/*
 * weir__agent_complete through the agent's llm/stream chain: the listeners
 * get {agent, turn, step, purpose, request} (turn and step from `context`,
 * borrowed, may be NULL: the last turn and step 0; purpose from
 * context.purpose, default "maintenance") and the provider's stream is the
 * chain's default.  Still nothing is logged by the core (a listener may log,
 * and provenance records a hop that changed the result) and no live frame is
 * sent.  Errors as weir__agent_complete, plus the chain's own
 * (WEIR_E_HOOK_FAILED, WEIR_E_HOOK_RESULT) with err->hook "llm/stream".
 */
int weir__agent_complete_stream(weir_agent *agent, const json_t *request, const json_t *context,
                                weir_signal *signal, json_t **result, weir_error *err);

#endif
