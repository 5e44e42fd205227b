/*
 * core/format/config.h - deployment config composition (docs/plugins.md, docs/cli.md).
 * Public entry points (weir_config_compose, weir_config_default) are in
 * weir/host.h.  Owner: core/format/config.c.  The rules are in docs/config.md.
 *
 * Every error is WEIR_E_CONFIG (WEIR_E_NOMEM on allocation failure) with a
 * message "config FILE: JSON-PATH: what is wrong"; `file` may be NULL
 * ("(config)" is shown then).  All functions are thread-safe on distinct
 * values; expansion reads the environment.
 */
#ifndef WEIR_CORE_CONFIG_H
#define WEIR_CORE_CONFIG_H

#include "common.h"

/*
 * Expand ${VAR} and ${VAR:-default} (unset or empty VAR) and $$ (one '$') in
 * every string value of `v`, in place; keys are never expanded, nor the
 * top-level `$schema` and `comment` members when `v` is an object.  An unset
 * variable without default, a malformed `${`, or a value that is not UTF-8 is
 * an error naming the variable and the JSON path ("config b.json:
 * $.plugins[0].config.api_key: variable OPENAI_API_KEY is not set").
 * `v` is borrowed and modified.
 */
int weir__config_expand(json_t *v, const char *file, weir_error *err);

/*
 * Merge overlay `over` (one validated file, from `file`) into the composed
 * config `base`, in place: agent/session merge key by key (later wins),
 * plugin_path is replaced, plugin rows merge by id (an existing id gets the
 * row's config and plugin; a new id is appended or placed `before`/`after`
 * an existing id; `disabled: true` removes the row).  Both are borrowed;
 * values of `over` become shared with `base` (not copied).  On error `base`
 * is valid but partly merged.
 */
int weir__config_merge(json_t *base, json_t *over, const char *file, weir_error *err);

/*
 * Validate the shape of one config file or of a composed config: the root is
 * an object with known top-level keys only, section and row types, row keys
 * and ids (unique, [A-Za-z0-9_.-]+), session.fsync always|step|none,
 * agent.max_tokens and agent.max_parallel_tool_calls integers >= 1.  A row
 * without `plugin` is accepted (an overlay may only change a config).
 * `config` is borrowed.
 */
/*
 * The word of `list` (n entries, borrowed) closest to `word`: at most one
 * edit away for a word under 6 characters, else at most two (an edit
 * inserts, deletes or replaces a character, or swaps two neighbours); NULL
 * when none is that close.  For "did you mean" in config errors.
 */
const char *weir__config_suggest(const char *word, const char *const *list, size_t n);
int weir__config_validate(const json_t *config, const char *file, weir_error *err);

/*
 * true when `role` (may be NULL) is a policy role name: [a-z0-9][a-z0-9._-]*,
 * 1 to 31 characters (api->plugin_role, a row's "share_roles";
 * docs/plugins.md, "Roles").  Thread-safe.
 */
bool weir__role_name_valid(const char *role);

#endif
