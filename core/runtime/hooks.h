/*
 * core/runtime/hooks.h - the hook chains (docs/hooks.md).
 *
 * The catalog (core/format/hook_catalog.h) is the one table of hook names, modes,
 * payload fields and result schemas; docs/hooks.md, `weir hooks` and result
 * validation all come from it.  Chains (core/runtime/hooks.c) are ordered at freeze
 * time: WEIR_ORDER_* placement, then config order, then registration order,
 * then before/after named plugins (a cycle or unknown name is an error).
 * After freeze they are read-only and may be invoked from any thread.
 *
 * Ownership in every invocation: `args` is borrowed and read-only for
 * listeners and the default; every listener and the default return a new
 * reference (or NULL = failure); weir__call_next() and weir__hook_invoke()
 * return new references the caller must json_decref().
 */
#ifndef WEIR_CORE_HOOKS_H
#define WEIR_CORE_HOOKS_H

#include <stdio.h>

#include "common.h"
#include "weir/host.h"
#include "hook_catalog.h"


typedef struct weir__hooks weir__hooks;

/*
 * New empty chains (one per catalog hook) in *out; parses the catalog's
 * result schemas and reads WEIR_TRACE once (non-empty and not "0" = trace
 * to stderr).  Returns WEIR_OK, E_INVAL or E_NOMEM.  Destroy with
 * weir__hooks_destroy (NULL is a no-op).  Not thread-safe until frozen.
 */
int weir__hooks_create(weir__hooks **out);
void weir__hooks_destroy(weir__hooks *h);

/*
 * Test hook: send the trace to `out` (borrowed; NULL turns tracing off).
 * Call before freeze; not thread-safe.
 */
void weir__hooks_set_trace(weir__hooks *h, FILE *out);

/*
 * Add a listener.  `owner` is only compared (remove_owner); `owner_id` is
 * the plugin row id (copied); `owner_index` its position in the config (the
 * base order).  `opts` (may be NULL = WEIR_HOOK_OPTS_INIT) is copied up to
 * its struct_size, including the before/after lists.  Fails with E_INVAL,
 * E_NOT_FOUND for an unknown hook name, E_TOO_LATE after freeze, E_NOMEM.
 * Not thread-safe (registration happens during init).
 */
int weir__hooks_add(weir__hooks *h, weir_plugin *owner, const char *owner_id,
                    size_t owner_index, const char *hook, weir_hook_fn fn,
                    const weir_hook_opts *opts, weir_error *err);

/* Remove every listener of `owner` (unwinding a failed init).  A no-op
 * after freeze.  Not thread-safe. */
void weir__hooks_remove_owner(weir__hooks *h, const weir_plugin *owner);

/*
 * Order every chain and make them read-only.  `ids` (borrowed) are all
 * loaded plugin ids; before/after must name one of them.  Errors:
 * E_HOOK_ORDER naming the hook, the registering plugin and the unknown id,
 * or the plugin ids of a cycle ("a -> b -> a", a runs before b);
 * E_STATE when already frozen; E_NOMEM.  On error nothing is frozen.
 */
int weir__hooks_freeze(weir__hooks *h, const char *const *ids, size_t nids,
                       weir_error *err);

/*
 * An agent's own chains over the frozen host chains `base` (borrowed; it
 * must outlive the result): empty and open for weir__hooks_add (owner_id
 * names who registered; before/after are refused: an agent's listeners run
 * around the deployment's chain, not inside its order).  Freeze with
 * weir__hooks_freeze_derived, which merges each hook's chain as: the
 * agent's WEIR_ORDER_FIRST listeners (outermost), then the host chain, then
 * the agent's other listeners (innermost), each group by order then
 * registration.  Invoke and destroy it like any chains.  E_INVAL when
 * `base` is not frozen host chains, E_NOMEM.
 */
int weir__hooks_derive(const weir__hooks *base, weir__hooks **out);
int weir__hooks_freeze_derived(weir__hooks *h, weir_error *err);

/*
 * Print each non-empty chain in order (for `weir hooks`):
 *   agent/request (waterfall)
 *     1. router  [first] before=audit after=-
 * Returns WEIR_OK, E_INVAL or E_IO.  Thread-safe after freeze.
 */
int weir__hooks_dump(const weir__hooks *h, FILE *out);

/*
 * What `weir hooks` prints after a listener's row id: `describe` writes it
 * for row `row_id` into `buf` (`size` bytes, NUL-terminated; left empty,
 * nothing is printed).  `ctx` is the caller's.
 */
typedef void (*weir__hooks_describe_fn)(const char *row_id, char *buf, size_t size,
                                        const void *ctx);

/*
 * weir__hooks_dump() with each row described (`describe` may be NULL: as
 * weir__hooks_dump):
 *   agent/compact (waterfall)
 *     1. compaction  compaction-basic 0.3.0  roles=compaction  [middle] before=- after=-
 * Thread-safe after freeze.
 */
int weir__hooks_dump_rows(const weir__hooks *h, FILE *out, weir__hooks_describe_fn describe,
                          const void *ctx);

/*
 * The core's innermost default for a waterfall: returns a new reference, or
 * NULL after weir__call_fail(call, ...) (the failure names "core default").
 * `args` is borrowed.
 */
typedef json_t *(*weir__hook_default_fn)(weir_call *call, const json_t *args,
                                         void *ctx);

/*
 * Invoke `hook` with `args` (borrowed, must not be NULL).
 *   emit:      every listener; a listener that calls weir_call_fail() and
 *              returns NULL is logged to stderr ("weir: hook H: plugin P
 *              failed: MSG") and contained; returns json_null().
 *   serial:    listeners in order; the first NULL return stops and fails the
 *              call with E_HOOK_FAILED; returns json_null() on success.
 *   waterfall: outermost first; `dflt` is the innermost (NULL = json_null()).
 *              The result is validated against the catalog schema; an
 *              invalid result fails with E_HOOK_RESULT naming the outermost
 *              listener's plugin (or "core default" for an empty chain).
 * A failure fills `err` with code E_HOOK_FAILED, err->plugin = the plugin
 * whose listener failed (empty for the core default) and err->hook.
 * Returns a new reference, or NULL with `err` filled.  Other errors:
 * E_INVAL, E_NOT_FOUND (unknown hook), E_STATE (not frozen yet).
 * `agent` and `signal` (borrowed, may be NULL) are what weir_call_agent()
 * and weir_call_signal() report.  Thread-safe after freeze: all state of
 * an invocation lives on the caller's stack.
 */
json_t *weir__hook_invoke(const weir__hooks *h, const char *hook,
                          weir_agent *agent, weir_signal *signal,
                          const json_t *args, weir__hook_default_fn dflt,
                          void *dflt_ctx, weir_error *err);

/*
 * weir__hook_invoke() that also says who made a waterfall's result:
 * *author (borrowed from the chain, valid while the hooks live) is the row
 * id of the innermost listener whose returned value is not the one its
 * weir_next() gave it (a listener passing its successor's result on is not
 * the author), or NULL for the core default.  NULL on failure.
 */
json_t *weir__hook_invoke_author(const weir__hooks *h, const char *hook, weir_agent *agent,
                                 weir_signal *signal, const json_t *args,
                                 weir__hook_default_fn dflt, void *dflt_ctx,
                                 const char **author, weir_error *err);

/*
 * weir__hook_invoke_author() for a hook whose default is the core's own code
 * (it builds its result from the core's state, calling no plugin): a result
 * that no listener made is the default's and is not validated against the
 * hook's schema (the per-step cost, issue #15).  A listener's result is
 * validated as always.  `author` may be NULL.
 */
json_t *weir__hook_invoke_core(const weir__hooks *h, const char *hook, weir_agent *agent,
                               weir_signal *signal, const json_t *args,
                               weir__hook_default_fn dflt, void *dflt_ctx, const char **author,
                               weir_error *err);

/*
 * Decision provenance and the fault policy (docs/hooks.md, "Provenance",
 * "Fault policy").
 *
 * A row's policy (its config keys on_error, max_failures, budget_ms) is set
 * with weir__hooks_set_policy after the row's init registered its listeners
 * and before the freeze; an agent's own listeners of that row (registered
 * in agent/created) take it too.  Failure counts and quarantine live for the
 * rest of the process (atomics: invocations on any thread).
 */
typedef struct weir__hook_policy {
    bool skip;             /* on_error "skip" (else "fail") */
    unsigned max_failures; /* quarantine after this many consecutive failures; 0 = never */
    unsigned budget_ms;    /* warn about a hop slower than this; 0 = no budget */
} weir__hook_policy;

typedef enum weir__provenance {
    WEIR__PROVENANCE_OFF = 0,
    WEIR__PROVENANCE_DECISIONS = 1, /* the default */
    WEIR__PROVENANCE_ALL = 2        /* pass-through hops too ("pass") */
} weir__provenance;

/* What one hop reports (every pointer borrowed, valid during the call). */
typedef struct weir__hook_record {
    const char *type;     /* "hook/decision", "hook/quarantined" or "hook/slow" */
    const char *hook;     /* the hook's name */
    const char *row;      /* the listener's row id */
    weir_plugin *owner;   /* the row's instance, NULL for an embedder's listener */
    const char *decision; /* hook/decision: the decision (docs/hooks.md) */
    const char *detail;   /* a short reason, or NULL */
    const json_t *args;   /* the invocation's payload (turn, step) */
    uint64_t latency_us;  /* the hop's own time, without the inner hops */
    unsigned failures;    /* hook/quarantined: the consecutive failures */
    unsigned budget_ms;   /* hook/slow: the row's budget */
} weir__hook_record;

/* Appends `rec` to `agent`'s log (never called with a NULL agent, and never
 * from an emit hook: session/event runs inside the log's delivery). */
typedef void (*weir__hook_sink_fn)(weir_agent *agent, const weir__hook_record *rec);
/* A counter that a steer from inside agent/turn-stopping moves. */
typedef size_t (*weir__hook_mark_fn)(weir_agent *agent);

/* Set on the host's chains before any agent derives its own (not
 * thread-safe; derived chains copy it). */
void weir__hooks_set_provenance(weir__hooks *h, weir__provenance level, weir__hook_sink_fn sink,
                                weir__hook_mark_fn mark);

/* Give row `row`'s listeners a policy (copied).  E_TOO_LATE after the
 * freeze, E_NOMEM, E_INVAL. */
int weir__hooks_set_policy(weir__hooks *h, const char *row, const weir__hook_policy *policy);

/* Whether row `row` is quarantined (thread-safe). */
bool weir__hooks_quarantined(const weir__hooks *h, const char *row);

/*
 * The decision a waterfall hop's result stands for (static string);
 * `args` is the invocation's payload, `next_extra` is the length of additional_contexts in what weir_next()
 * returned (tools/post-execute), `short_circuit` whether the listener did
 * not call weir_next().  core/runtime/hooks.c.
 */
const char *weir__hook_decision(const weir__hook_def *def, const json_t *args,
                                const json_t *result, bool short_circuit, size_t next_extra);

/* Number of listeners on `hook` (0 for unknown). */
size_t weir__hooks_count(const weir__hooks *h, const char *hook);

/*
 * Public-table implementations (valid only inside a listener, on its own
 * `call`).  weir__call_next: waterfall only; runs the rest of the chain and
 * the default and returns its result (new reference), or NULL when an inner
 * hop failed.  Calling it again from the same listener re-runs the inner
 * chain.  In emit/serial hooks, or from the default, it records a failure
 * and returns NULL.  weir__call_fail records why the running listener
 * failed (it should then return NULL).
 */
json_t *weir__call_next(weir_call *call);
void weir__call_fail(weir_call *call, const char *fmt, ...) WEIR_PRINTF(2, 3);
/* The invocation's agent / signal (borrowed), or NULL. */
weir_agent *weir__call_agent(const weir_call *call);
weir_signal *weir__call_signal(const weir_call *call);

#endif
