/*
 * weir/testkit.h - the plugin test kit: unit-test a plugin one hook at a
 * time against a fake agent with a real session log, or one or more whole
 * turns through a real host.  Kit version 0.2 (the Since notes below).
 *
 * A weir_tk loads one or more plugins (a descriptor linked into the test, or
 * a built .so by path), runs their `init` with a weir_api table whose hook
 * registry, chain ordering, result validation and `weir_next()` are the real
 * ones from libweir, and lets the test invoke any catalog hook:
 *
 *     weir_tk *tk = weir_tk_create();
 *     weir_error err;
 *     json_t *cfg = json_pack("{s:[s]}", "deny", "rm");
 *     weir_tk_load_file(tk, "build/lib/weir/plugins/weir-guard.so", "guard", cfg, &err);
 *     json_t *args = json_pack("{s:s,s:i,s:i,s:s,s:s,s:s}", "agent", "testkit",
 *                              "turn", 1, "step", 1, "call_id", "c1", "name", "rm",
 *                              "arguments", "{}");
 *     json_t *allow = json_pack("{s:s}", "kind", "allow");
 *     json_t *r = weir_tk_invoke(tk, "tools/pre-execute", args, allow, &err);
 *     ... assert on r, weir_tk_log(tk), weir_tk_events(tk), weir_tk_logs(tk) ...
 *     json_decref(r); json_decref(allow); json_decref(args); json_decref(cfg);
 *     weir_tk_destroy(tk);
 *
 * The fake agent (what weir_call_agent() returns; its id is "testkit") has a
 * real session log: libweir's own log on the memory store, with its surface,
 * derivation and checks (opened when first used; the memory store keeps its
 * lines until the process exits).  The test seeds it with
 * events (weir_tk_seed) or from a log file (weir_tk_seed_log), gives it a
 * route (weir_tk_set_route) and reads it back (weir_tk_log).  Inside a hook:
 *   - weir_agent_surface(), weir_agent_replace_generation(),
 *     weir_agent_surface_replace(), weir_agent_last_event(),
 *     weir_agent_event(), _event_ref() and _event_peek() read and change that
 *     log as on a real agent; weir_agent_messages() is its derived history
 *     (unless weir_tk_set_messages() set a fixed array);
 *     weir_agent_model_info() answers for the route's provider and model
 *     with the route's other keys ({context_window, max_output, ...});
 *   - weir_agent_append() appends to the log (the type must be registered
 *     by a loaded plugin, as in a real host) and records {type, data} in
 *     weir_tk_events(); weir_agent_send() records {message, mode, input_id}
 *     in weir_tk_sent();
 *   - weir_agent_complete() and weir_agent_complete_stream() answer from
 *     weir_tk_set_script()'s replies, matched by the call's purpose, and
 *     record each request in weir_tk_requests(); weir_hook_invoke() runs
 *     the kit's own chain of the hook;
 *   - weir_log() lines are recorded as {plugin, level, text} in
 *     weir_tk_logs() instead of being printed;
 *   - weir_call_signal() returns the kit's signal; weir_tk_cancel() fires
 *     it; weir_signal_sleep() on it is recorded in weir_tk_sleeps(), and
 *     after weir_tk_clock_set() it and weir_clock_ms() run on a fake clock:
 *     a sleep advances the clock and returns at once;
 *   - weir_agent_hook_register() returns WEIR_E_UNSUPPORTED (the kit has no
 *     per-agent chains) and is logged; weir_agent_log_path() is NULL.
 *   - Tools are registered into the real tool registry (so names and schemas
 *     are checked) but not run; providers are checked and accepted but not run;
 *     provider_require() is accepted without a check.
 * The chains freeze at the first weir_tk_invoke(); loading after that fails
 * with WEIR_E_TOO_LATE.
 *
 * Whole turns are weir_tk_run_turn(): the plugin under test in a real host
 * next to provider-scripted, one prompt or several, one script of model
 * replies (matched by purpose: a compaction's summary call or a step), and
 * the session log, the rendered system prompt, every request sent and every
 * turn's end come back to assert on (docs/testing.md).
 *
 * Ownership: one rule, weir_hook_invoke()'s: everything passed in is
 * borrowed (weir_tk_invoke's default result too, since 0.2), every json_t *
 * returned is a new reference unless its doc says borrowed.
 *
 * Thread-safety: a weir_tk is used from one thread at a time; two kits are
 * independent, except the fake clock, which is process-wide: one kit at a
 * time owns it.  Link: libweir-testkit, the kit's own library
 * (`weir::testkit` in CMake, `pkg-config weir-testkit`); libweir does not
 * export weir_tk_*.
 *
 * Versions: 0.1 the fake host, weir_tk_run_turn.  0.2 (test kit v2): the
 * fake agent's real log (weir_tk_seed, weir_tk_seed_log, weir_tk_set_route,
 * weir_tk_log), scripted direct calls (weir_tk_set_script,
 * weir_tk_requests), the fake clock (weir_tk_clock_*, weir_tk_sleeps),
 * several turns and a fake clock in weir_tk_run_turn (weir_tk_turn's
 * prompts, fake_clock, clock_start_ms), and weir_tk_invoke borrows its
 * default result (0.1 stole it: a 0.1 caller that passed a new reference
 * now releases it itself).
 */
#ifndef WEIR_TESTKIT_H
#define WEIR_TESTKIT_H

/* A host-side header: libweir's own functions, not the plugin call macros
 * (plugin.h removes them if an earlier include defined them). */
#ifndef WEIR_NO_API_MACROS
#define WEIR_NO_API_MACROS
#endif

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "weir/errors.h"
#include "weir/export.h"
#include "weir/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A fake host (opaque). */
typedef struct weir_tk weir_tk;

/**
 * Create an empty kit.
 * @return a new kit (free with weir_tk_destroy), or NULL when out of memory.
 * Since: 0.1
 */
WEIR_API weir_tk *weir_tk_create(void) WEIR_WUR;

/**
 * Run every loaded plugin's `fini` in reverse load order, unload the files
 * opened by weir_tk_load_file() and free everything.  NULL is a no-op.
 * Since: 0.1
 */
WEIR_API void weir_tk_destroy(weir_tk *tk);

/**
 * Load a plugin from its descriptor (linked into the test: pass
 * `weir_plugin_describe()`), as one `plugins` row with id `id`.  The
 * descriptor header is checked as the loader checks it, `config` is
 * validated against the descriptor's config_schema, then `init` runs.
 * @param desc    borrowed; must outlive the kit.
 * @param id      the row id (copied), unique within the kit.
 * @param config  the row's config (borrowed); NULL means {}.
 * @return WEIR_OK; WEIR_E_INVAL, WEIR_E_PLUGIN_ABI, WEIR_E_PLUGIN_CONFIG,
 *         WEIR_E_PLUGIN_INIT (err->text "plugin 'N' (row 'ID') init failed:
 *         ..."), WEIR_E_DUPLICATE (id reused), WEIR_E_TOO_LATE (after the
 *         first invoke) or WEIR_E_NOMEM, with `err` filled.  On failure
 *         nothing the plugin registered stays.
 * Since: 0.1
 */
WEIR_API int weir_tk_load(weir_tk *tk, const weir_plugin_desc *desc, const char *id,
                          const json_t *config, weir_error *err) WEIR_WUR;

/**
 * Like weir_tk_load(), for a built plugin file: dlopen()s `path` with the
 * real loader (same checks and messages as a deployment).
 * @param path  a path to weir-<name>.so (borrowed).
 * @return as weir_tk_load(), plus WEIR_E_PLUGIN_OPEN / WEIR_E_PLUGIN_ENTRY.
 * Since: 0.1
 */
WEIR_API int weir_tk_load_file(weir_tk *tk, const char *path, const char *id,
                               const json_t *config, weir_error *err) WEIR_WUR;

/**
 * Invoke `hook` (a catalog name) as the core would, through the chain the
 * loaded plugins registered (ordered and frozen on the first call), with
 * weir_call_agent() the kit's fake agent and weir_call_signal() its signal.
 * @param args            the payload (borrowed, must not be NULL).
 * @param default_result  waterfall only: what the core default returns
 *                        (borrowed, as weir_hook_invoke's `dflt`; the kit
 *                        holds its own reference while the chain runs);
 *                        NULL means json null.  Ignored by emit and serial
 *                        hooks.  Since 0.2 borrowed; 0.1 stole it.
 * Invoking "agent/disposed" then releases the rows' weir_agent_state blocks
 * of the kit's agent, as a host does when an agent is closed.
 * @return a new reference: the chain's (validated) result for a waterfall,
 *         json null for emit and serial; or NULL with `err` filled:
 *         WEIR_E_HOOK_FAILED (err->plugin = the failing row),
 *         WEIR_E_HOOK_RESULT, WEIR_E_NOT_FOUND (unknown hook),
 *         WEIR_E_HOOK_ORDER (bad before/after at freeze), WEIR_E_INVAL.
 * Since: 0.1
 */
WEIR_API json_t *weir_tk_invoke(weir_tk *tk, const char *hook, const json_t *args,
                                const json_t *default_result, weir_error *err) WEIR_WUR;

/**
 * How many times the core default ran in this kit's invocations (a chain
 * that short-circuits does not reach it).  0 for NULL.
 * Since: 0.1
 */
WEIR_API size_t weir_tk_default_calls(const weir_tk *tk);

/**
 * Set what weir_agent_messages() returns to plugins, instead of the log's
 * derived history (the default since 0.2).
 * @param messages  an array (copied deeply; borrowed).
 * @return WEIR_OK, WEIR_E_INVAL (not an array) or WEIR_E_NOMEM.
 * Since: 0.1
 */
WEIR_API int weir_tk_set_messages(weir_tk *tk, const json_t *messages);

/**
 * Plugin events appended through weir_agent_append(), in order (they are in
 * weir_tk_log() too, with their seqs):
 * [{"type":..., "data":...}].  Borrowed; valid until weir_tk_clear() or
 * weir_tk_destroy().  NULL for a NULL kit.
 * Since: 0.1
 */
WEIR_API const json_t *weir_tk_events(const weir_tk *tk);

/**
 * Lines logged through weir_log(), in order:
 * [{"plugin":row id, "level":"error"|"warning"|"info"|"debug", "text":...}].
 * Borrowed, as weir_tk_events().
 * Since: 0.1
 */
WEIR_API const json_t *weir_tk_logs(const weir_tk *tk);

/**
 * Messages queued through weir_agent_send(), in order:
 * [{"message":..., "mode":"followup"|"steer"|"inject", "input_id":string|null}].
 * Borrowed, as weir_tk_events().
 * Since: 0.1
 */
WEIR_API const json_t *weir_tk_sent(const weir_tk *tk);

/**
 * Empty the events, logs, sent, requests and sleeps lists and reset the
 * default counter.  The log stays.
 * Since: 0.1
 */
WEIR_API void weir_tk_clear(weir_tk *tk);

/**
 * Fire the kit's cancellation signal (what weir_call_signal() returns) with
 * `cause` (copied; NULL means "user").  Later invocations see it cancelled.
 * Since: 0.1
 */
WEIR_API void weir_tk_cancel(weir_tk *tk, const char *cause);

/* ------------------------------------------------------------------------ */
/* The fake agent's log and route (Since 0.2)                                */
/* ------------------------------------------------------------------------ */

/**
 * Append `events` to the fake agent's log, in order, through the log's own
 * checks (shapes, surface ops, sources, as the core's appends).
 * @param events  borrowed: [{type, data, surface_op?, source_seqs?}], as
 *                the log's envelopes have them (docs/session-log.md); core
 *                types (user/message, assistant/message, tool/call,
 *                tool/result, request/header, ...: docs/events.md) and the
 *                types of the loaded plugins.  A surface type without a
 *                surface_op is appended ("append").  An event's seq is its
 *                position in the log.
 * @return WEIR_OK; WEIR_E_INVAL (not an array, an entry without a type or an
 *         object data: err names events[i]); the log's refusal
 *         (WEIR_E_LOG_REJECTED, "weir_tk_seed: events[i] (TYPE): ...");
 *         WEIR_E_NOMEM.  The events before a refused one stay.
 * Since: 0.2
 */
WEIR_API int weir_tk_seed(weir_tk *tk, const json_t *events, weir_error *err) WEIR_WUR;

/**
 * Make the fake agent's log a copy of the session log file `path` (say, one
 * a real run left): its whole lines, checked by the log's reader as it opens
 * them (a torn last line is left out).  Load the plugins whose event types
 * the file holds first.  Only while the kit's log is empty.
 * @return WEIR_OK; WEIR_E_INVAL; WEIR_E_STATE (the log has events already);
 *         the reader's errors (WEIR_E_IO, WEIR_E_LOG_CORRUPT naming the line).
 * Since: 0.2
 */
WEIR_API int weir_tk_seed_log(weir_tk *tk, const char *path, weir_error *err) WEIR_WUR;

/**
 * Route the fake agent: weir_agent_model_info(provider, model) answers the
 * route's other keys, and a `request/context` {provider, model,
 * context_window?} is appended when it differs from the last one, as the
 * driver logs it before a request (compaction reads the route from it).
 * @param route  borrowed: {provider, model, context_window?, max_output?, ...}.
 * @return WEIR_OK; WEIR_E_INVAL (no provider or model, a context_window that
 *         is not a positive integer); the log's errors; WEIR_E_NOMEM.
 * Since: 0.2
 */
WEIR_API int weir_tk_set_route(weir_tk *tk, const json_t *route, weir_error *err) WEIR_WUR;

/**
 * The fake agent's log: its envelopes {seq, time, type, data, surface_op?,
 * source_seqs?, ignorable?} in seq order (docs/session-log.md).
 * @return a new reference, or NULL for a NULL kit or out of memory.
 * Since: 0.2
 */
WEIR_API json_t *weir_tk_log(weir_tk *tk) WEIR_WUR;

/**
 * Script the fake agent's direct model calls (weir_agent_complete,
 * weir_agent_complete_stream: a compaction's summary).
 * @param script  borrowed: {"replies": [...], "loop"?: bool}; a reply is
 *                {purpose?, text?, finish?, usage?, fail?:{code, message?}}.
 *                A call of purpose P (complete_stream's context.purpose, e.g.
 *                "compaction"; "maintenance" when it has none) takes the first
 *                unused reply whose purpose is P, else the first unused reply
 *                without a purpose; `loop` starts over when none is left.
 *                A call answers {message:{role:"assistant", content:[{type:
 *                "text", text}]}, finish (default "stop"), usage?}; a `fail`
 *                reply, or none left, is WEIR_E_PROVIDER with err->text
 *                "CODE: message".  Without a script the calls return
 *                WEIR_E_UNSUPPORTED.
 * @return WEIR_OK; WEIR_E_INVAL (naming replies[i]); WEIR_E_NOMEM.
 * Since: 0.2
 */
WEIR_API int weir_tk_set_script(weir_tk *tk, const json_t *script, weir_error *err) WEIR_WUR;

/**
 * The direct model calls the plugins made, in order: [{"purpose", "request"}].
 * Borrowed, as weir_tk_events().
 * Since: 0.2
 */
WEIR_API const json_t *weir_tk_requests(const weir_tk *tk);

/* ------------------------------------------------------------------------ */
/* The fake clock (Since 0.2)                                                */
/* ------------------------------------------------------------------------ */

/**
 * Run the host clock on a fake clock set to `ms`: weir_clock_ms() returns
 * it, and weir_signal_sleep() advances it by the sleep and returns at once
 * (WEIR_E_CANCELLED when the signal fired).  The clock is process-wide: it
 * belongs to this kit until weir_tk_clock_real() or weir_tk_destroy(), and
 * it covers weir_tk_run_turn's hosts too.
 * @return WEIR_OK; WEIR_E_INVAL; WEIR_E_BUSY (another kit owns it).
 * Since: 0.2
 */
WEIR_API int weir_tk_clock_set(weir_tk *tk, uint64_t ms);

/**
 * Move the fake clock on by `ms` (a timer's deadline passing).
 * @return WEIR_OK; WEIR_E_INVAL; WEIR_E_STATE (this kit does not own the
 *         fake clock).
 * Since: 0.2
 */
WEIR_API int weir_tk_clock_advance(weir_tk *tk, uint64_t ms);

/** The host clock now (weir_clock_ms()), fake or real.  Since: 0.2 */
WEIR_API uint64_t weir_tk_clock_ms(const weir_tk *tk);

/** Back to the real clock, when this kit owns the fake one.  Since: 0.2 */
WEIR_API void weir_tk_clock_real(weir_tk *tk);

/**
 * The sleeps plugins asked for on the kit's signal (weir_call_signal()),
 * in order: [{"ms": N, "fake": bool}] (fake: it passed at once on the fake
 * clock; false: it slept for real).  Borrowed, as weir_tk_events().
 * Since: 0.2
 */
WEIR_API const json_t *weir_tk_sleeps(const weir_tk *tk);

/* ------------------------------------------------------------------------ */
/* A scripted turn                                                           */
/* ------------------------------------------------------------------------ */

/**
 * What weir_tk_run_turn() runs.  Everything is borrowed for the call.
 * Since: 0.1; the members from `prompts` on since 0.2 (a 0.1 struct_size
 * runs one prompt on the real clock).
 */
typedef struct weir_tk_turn {
    uint32_t struct_size;     /* sizeof(weir_tk_turn) (WEIR_TK_TURN_INIT) */
    const char *plugin;       /* the plugin under test: a path (with a '/') to its
                                 weir-<name>.so, or a name found along plugin_path;
                                 NULL: none (only provider-scripted and `deployment`) */
    const char *id;           /* its row id; NULL: "plugin" */
    const json_t *config;     /* its row config; NULL: {} */
    const json_t *script;     /* the script: provider-scripted's config with its replies
                                 inline, {"replies":[...], "loop"?, "models"?, ...}
                                 (docs/testing.md); required */
    const char *prompt;       /* the turn's user message (text); required unless
                                 `prompts` is set */
    const json_t *deployment; /* NULL, or merged into the generated deployment: its
                                 `agent` and `session` keys replace the generated ones,
                                 its `plugins` rows follow the plugin under test, its
                                 `plugin_path` entries follow turn->plugin_path, any
                                 other key is set */
    const char *plugin_path;  /* a directory searched first for plugins by name, or NULL */
    /* Since 0.2 */
    const json_t *prompts;    /* NULL, or an array of strings: one turn each, in order,
                                 on the same agent (instead of `prompt`) */
    bool fake_clock;          /* run on the fake clock (weir_tk_clock_set), starting at
                                 clock_start_ms: sleeps pass at once; when the clock is
                                 fake already (a kit owns it) it runs on that one */
    uint64_t clock_start_ms;
} weir_tk_turn;

#define WEIR_TK_TURN_INIT                                                                 \
    {sizeof(weir_tk_turn), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, 0}

/**
 * Run one turn, or several, of a real agent: a host with the rows
 *   {"id":"scripted", "plugin":"provider-scripted", "config":script (with
 *    "models":{"scripted":{context_window:32768, max_output:4096}} unless
 *    the script has models)},
 *   {"id":turn->id, "plugin":turn->plugin, "config":turn->config}
 * (then `deployment`'s), agent options {provider:"scripted",
 * model:"scripted", max_tokens:1024}, a session in a fresh temporary
 * directory (removed before the call returns), each prompt sent as a
 * followup and weir_agent_run_until_idle() after each.  provider-scripted
 * is found along the plugin directories (weir_plugin_dirs(): next to
 * libweir-testkit, which is libweir's directory in an installed weir)
 * after `plugin_path`.
 * @param result  receives a new reference:
 *   {"session_id": "testkit",
 *    "end": the last turn's {turn, kind, failure?:{code, message}, text}
 *           (weir_agent_last_turn),
 *    "ends": [every turn's end, in order] (since 0.2),
 *    "clock_ms": the fake clock when the run ended (fake_clock only; since 0.2),
 *    "system": the rendered system prompt (the last system/message's text), or null,
 *    "requests": [every request a provider was sent through llm/stream, as
 *                 the provider got it: {provider, model, max_tokens?, messages,
 *                 tools?, ...}],
 *    "log": [the session log's envelopes, in seq order],
 *    "events": [the live events, {type, data}, in delivery order]}
 * @return WEIR_OK whenever the turns ran, however they ended (look at
 *         result.ends); else *result is NULL and `err` says why: WEIR_E_INVAL
 *         (no script, no prompt nor prompts, prompts not an array of strings,
 *         a script without a replies array, a bad struct_size), the host's
 *         load errors (WEIR_E_PLUGIN_*, WEIR_E_CONFIG: "plugin 'x' (row 'id')
 *         ..."), WEIR_E_IO (the temporary directory), WEIR_E_NOMEM.
 * Thread-safety: runs the agent on the calling thread; two calls are
 * independent (except a fake clock, which is process-wide).
 * Since: 0.1
 */
WEIR_API int weir_tk_run_turn(const weir_tk_turn *turn, json_t **result,
                              weir_error *err) WEIR_WUR;

#ifdef __cplusplus
}
#endif
#endif /* WEIR_TESTKIT_H */
