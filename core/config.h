/*
 * core/config.h - deployment config composition (DESIGN §9).
 * Public entry points (weir_config_compose, weir_config_default) are in
 * weir/host.h.  Owner: core/config.c.
 */
#ifndef WEIR_CORE_CONFIG_H
#define WEIR_CORE_CONFIG_H

#include "common.h"

/*
 * Expand ${VAR} and ${VAR:-default} in every string of `v` (in place).
 * `file` names the source for errors ("unset variable FOO in a.json at $.x").
 */
int weir__config_expand(json_t *v, const char *file, weir_error *err);

/*
 * Merge overlay `over` (from `file`) into composed config `base` (in place),
 * following DESIGN §9: agent/session merge key by key, plugin rows by id
 * (replace config, append, before/after placement, disabled removes).
 */
int weir__config_merge(json_t *base, const json_t *over, const char *file,
                       weir_error *err);

/* Validate the composed shape (known top-level keys, row fields, ids unique). */
int weir__config_validate(const json_t *config, const char *file, weir_error *err);

#endif
