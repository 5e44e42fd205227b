/*
 * weir/testkit.h - the plugin test kit: a fake host for unit-testing a
 * plugin's hooks without a deployment, a provider or a session log.
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
 *     json_t *r = weir_tk_invoke(tk, "tools/pre-execute", args,
 *                                json_pack("{s:s}", "kind", "allow"), &err);
 *     ... assert on r, weir_tk_events(tk), weir_tk_logs(tk) ...
 *     json_decref(r); json_decref(args); json_decref(cfg);
 *     weir_tk_destroy(tk);
 *
 * What the fake host does instead of a real agent:
 *   - weir_call_agent() returns a fake agent whose id is "testkit";
 *     weir_agent_messages() returns a copy of what weir_tk_set_messages()
 *     set (an empty array by default); weir_agent_append() records
 *     {type, data} in weir_tk_events() (the type must be registered by a
 *     loaded plugin, as in a real host); weir_agent_send() records
 *     {message, mode, input_id} in weir_tk_sent().
 *   - weir_log() lines are recorded as {plugin, level, text} in
 *     weir_tk_logs() instead of being printed.
 *   - weir_call_signal() returns the kit's signal; weir_tk_cancel() fires it.
 *   - weir_agent_complete() and weir_agent_hook_register() return
 *     WEIR_E_UNSUPPORTED (the kit runs no provider and has no per-agent
 *     chains); the latter is also logged.
 *   - Tools are registered into the real tool registry (so names and schemas
 *     are checked) but not run; providers are checked and accepted but not run;
 *     provider_require() is accepted without a check.
 * The chains freeze at the first weir_tk_invoke(); loading after that fails
 * with WEIR_E_TOO_LATE.
 *
 * A whole turn is weir_tk_run_turn(): the plugin under test in a real host
 * next to provider-scripted, one prompt, one script of model replies, and
 * the session log, the rendered system prompt and every request sent come
 * back to assert on (docs/testing.md).
 *
 * Thread-safety: a weir_tk is used from one thread at a time; two kits are
 * independent.  Link: libweir-testkit, the kit's own library (`weir::testkit`
 * in CMake, `pkg-config weir-testkit`); libweir does not export weir_tk_*.
 */
#ifndef WEIR_TESTKIT_H
#define WEIR_TESTKIT_H

/* A host-side header: libweir's own functions, not the plugin call macros
 * (plugin.h removes them if an earlier include defined them). */
#ifndef WEIR_NO_API_MACROS
#define WEIR_NO_API_MACROS
#endif

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
 * loaded plugins registered (ordered and frozen on the first call).
 * @param args            the payload (borrowed, must not be NULL).
 * @param default_result  waterfall only: what the core default returns
 *                        (steals the reference, even on error); NULL means
 *                        json null.  Ignored by emit and serial hooks.
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
                                json_t *default_result, weir_error *err) WEIR_WUR;

/**
 * How many times the core default ran in this kit's invocations (a chain
 * that short-circuits does not reach it).  0 for NULL.
 * Since: 0.1
 */
WEIR_API size_t weir_tk_default_calls(const weir_tk *tk);

/**
 * Set what weir_agent_route() returns to plugins (the kit's agent has no
 * log, so no request/context): a copy of `route` (borrowed, an object such
 * as {"provider":"p","model":"m","context_window":1000,"host":"h"}), or
 * NULL: WEIR_E_NOT_FOUND, as a real agent before its first request.
 * @return WEIR_OK, WEIR_E_INVAL (not an object) or WEIR_E_NOMEM.
 * Since: 0.1 (ABI 1.12)
 */
WEIR_API int weir_tk_set_route(weir_tk *tk, const json_t *route);

/**
 * Set what weir_agent_messages() returns to plugins.
 * @param messages  an array (copied deeply; borrowed).
 * @return WEIR_OK, WEIR_E_INVAL (not an array) or WEIR_E_NOMEM.
 * Since: 0.1
 */
WEIR_API int weir_tk_set_messages(weir_tk *tk, const json_t *messages);

/**
 * Plugin events appended through weir_agent_append(), in order:
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

/** Empty the events, logs and sent lists and reset the default counter. Since: 0.1 */
WEIR_API void weir_tk_clear(weir_tk *tk);

/**
 * Fire the kit's cancellation signal (what weir_call_signal() returns) with
 * `cause` (copied; NULL means "user").  Later invocations see it cancelled.
 * Since: 0.1
 */
WEIR_API void weir_tk_cancel(weir_tk *tk, const char *cause);

/* ------------------------------------------------------------------------ */
/* A scripted turn                                                           */
/* ------------------------------------------------------------------------ */

/**
 * What weir_tk_run_turn() runs.  Everything is borrowed for the call.
 * Since: 0.1
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
    const char *prompt;       /* the turn's user message (text); required */
    const json_t *deployment; /* NULL, or merged into the generated deployment: its
                                 `agent` and `session` keys replace the generated ones,
                                 its `plugins` rows follow the plugin under test, its
                                 `plugin_path` entries follow turn->plugin_path, any
                                 other key is set */
    const char *plugin_path;  /* a directory searched first for plugins by name, or NULL */
} weir_tk_turn;

#define WEIR_TK_TURN_INIT {sizeof(weir_tk_turn), NULL, NULL, NULL, NULL, NULL, NULL, NULL}

/**
 * Run one turn of a real agent: a host with the rows
 *   {"id":"scripted", "plugin":"provider-scripted", "config":script (with
 *    "models":{"scripted":{context_window:32768, max_output:4096}} unless
 *    the script has models)},
 *   {"id":turn->id, "plugin":turn->plugin, "config":turn->config}
 * (then `deployment`'s), agent options {provider:"scripted",
 * model:"scripted", max_tokens:1024}, a session in a fresh temporary
 * directory (removed before the call returns), `prompt` sent as a followup
 * and weir_agent_run_until_idle().  provider-scripted is found along the
 * plugin directories (weir_plugin_dirs(): next to libweir-testkit, which
 * is libweir's directory in an installed weir) after `plugin_path`.
 * @param result  receives a new reference:
 *   {"session_id": "testkit",
 *    "end": {turn, kind, failure?:{code, message}, text}   (weir_agent_last_turn),
 *    "system": the rendered system prompt (the last system/message's text), or null,
 *    "requests": [every request a provider was sent through llm/stream, as
 *                 the provider got it: {provider, model, max_tokens?, messages,
 *                 tools?, ...}],
 *    "log": [the session log's envelopes, in seq order],
 *    "events": [the live events, {type, data}, in delivery order]}
 * @return WEIR_OK whenever the turn ran, however it ended (look at
 *         result.end); else *result is NULL and `err` says why: WEIR_E_INVAL
 *         (no script or prompt, a script without a replies array, a bad
 *         struct_size), the host's load errors (WEIR_E_PLUGIN_*, WEIR_E_CONFIG:
 *         "plugin 'x' (row 'id') ..."), WEIR_E_IO (the temporary directory),
 *         WEIR_E_NOMEM.
 * Thread-safety: runs the agent on the calling thread; two calls are
 * independent.
 * Since: 0.1
 */
WEIR_API int weir_tk_run_turn(const weir_tk_turn *turn, json_t **result,
                              weir_error *err) WEIR_WUR;

#ifdef __cplusplus
}
#endif
#endif /* WEIR_TESTKIT_H */
