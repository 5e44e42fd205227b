/*
 * core/hooks.h - the hook catalog and hook chains (DESIGN §4).
 *
 * The catalog (core/hook_catalog.c) is the one table of hook names, modes,
 * payload fields and result schemas; docs/hooks.md, `weir hooks` and result
 * validation all come from it.  Chains (core/hooks.c) are ordered at freeze
 * time: config order, then WEIR_ORDER_* placement, then before/after named
 * plugins (a cycle or unknown name is an error).  After freeze they are
 * read-only and may be invoked from any thread.
 */
#ifndef WEIR_CORE_HOOKS_H
#define WEIR_CORE_HOOKS_H

#include <stdio.h>

#include "common.h"

typedef enum weir__hook_mode {
    WEIR__HOOK_EMIT = 0,
    WEIR__HOOK_SERIAL = 1,
    WEIR__HOOK_WATERFALL = 2
} weir__hook_mode;

typedef struct weir__hook_def {
    const char *name;          /* "agent/pre-step" */
    weir__hook_mode mode;
    const char *payload;       /* human-readable payload fields */
    const char *result;        /* human-readable result / default */
    const char *result_schema; /* JSON Schema text for waterfall results, or NULL */
    const char *summary;       /* one line */
} weir__hook_def;

extern const weir__hook_def weir__hook_catalog[];
extern const size_t weir__hook_catalog_len;

/* Catalog entry by name, or NULL. */
const weir__hook_def *weir__hook_find(const char *name);

/* Write docs/hooks.md's content (generated from the catalog). */
int weir__hook_catalog_markdown(FILE *out);

typedef struct weir__hooks weir__hooks;

int weir__hooks_create(weir__hooks **out);
void weir__hooks_destroy(weir__hooks *h);

/*
 * Add a listener.  `owner_id` is the plugin row id (copied); `owner_index`
 * its position in the config (the base order).  Fails with E_NOT_FOUND for
 * an unknown hook name, E_TOO_LATE after freeze.
 */
int weir__hooks_add(weir__hooks *h, weir_plugin *owner, const char *owner_id,
                    size_t owner_index, const char *hook, weir_hook_fn fn,
                    const weir_hook_opts *opts, weir_error *err);

/* Remove every listener of `owner` (unwinding a failed init). */
void weir__hooks_remove_owner(weir__hooks *h, const weir_plugin *owner);

/*
 * Order every chain and make them read-only.  `ids` are all loaded plugin
 * ids (before/after must name one of them).
 */
int weir__hooks_freeze(weir__hooks *h, const char *const *ids, size_t nids,
                       weir_error *err);

/* Print each non-empty chain in order (for `weir hooks`). */
int weir__hooks_dump(const weir__hooks *h, FILE *out);

/*
 * The core's innermost default for a waterfall: returns a new reference, or
 * NULL after weir__call_fail-style failure (use the `call` to fail).
 */
typedef json_t *(*weir__hook_default_fn)(weir_call *call, const json_t *args,
                                         void *ctx);

/*
 * Invoke `hook` with `args` (borrowed).
 *   emit:      every listener; failures are logged and contained; returns json_null().
 *   serial:    listeners in order; the first failure stops and fails the call.
 *   waterfall: outermost first; `dflt` is the innermost (NULL = json_null()).
 * The waterfall result is validated against the catalog schema; an invalid
 * result fails with E_HOOK_RESULT naming the plugin that returned it.
 * Returns a new reference, or NULL with `err` filled (code, plugin, hook).
 * `agent` and `signal` may be NULL (reported by weir_call_agent/_signal).
 */
json_t *weir__hook_invoke(const weir__hooks *h, const char *hook,
                          weir_agent *agent, weir_signal *signal,
                          const json_t *args, weir__hook_default_fn dflt,
                          void *dflt_ctx, weir_error *err);

/* Number of listeners on `hook` (0 for unknown). */
size_t weir__hooks_count(const weir__hooks *h, const char *hook);

/* Public-table implementations. */
json_t *weir__call_next(weir_call *call);
void weir__call_fail(weir_call *call, const char *fmt, ...) WEIR_PRINTF(2, 3);
weir_agent *weir__call_agent(const weir_call *call);
weir_signal *weir__call_signal(const weir_call *call);

#endif
