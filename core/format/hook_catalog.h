/*
 * core/format/hook_catalog.h - the hook catalog: the one table of hook
 * names, modes, payload fields and result schemas (docs/hooks.md).
 * docs/hooks.md, `weir hooks` and the chains' result validation
 * (core/runtime/hooks.c) all come from it.  Owner: core/format/hook_catalog.c.
 */
#ifndef WEIR_CORE_HOOK_CATALOG_H
#define WEIR_CORE_HOOK_CATALOG_H

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

/* The catalog, in documentation order.  Static, thread-safe. */
extern const weir__hook_def weir__hook_catalog[];
extern const size_t weir__hook_catalog_len;

/* Catalog entry by name (borrowed, static), or NULL. Thread-safe. */
const weir__hook_def *weir__hook_find(const char *name);

/* "emit", "serial" or "waterfall" (static). Thread-safe. */
const char *weir__hook_mode_name(weir__hook_mode mode);

#endif
