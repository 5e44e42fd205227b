/*
 * tests/plugins/fx_util.h - helpers shared by the fixture plugins: a side
 * effect file (the row's `config.log`) that records init/fini/late calls so
 * tests can check what ran and in which order, and NULL-terminated id lists
 * read from the row config for before/after placement.
 */
#ifndef WEIR_FX_UTIL_H
#define WEIR_FX_UTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup */
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>

/* Append "<what>:<id>\n" to `log` (no-op when `log` is NULL). */
static inline void fx_note(const char *log, const char *what, const char *id) {
    if (!log || !*log)
        return;
    FILE *f = fopen(log, "a");
    if (!f)
        return;
    fprintf(f, "%s:%s\n", what, id);
    fclose(f);
}

/* NULL-terminated copy of a JSON array of strings, or NULL when absent. */
static inline char **fx_strv(const json_t *arr) {
    if (!json_is_array(arr))
        return NULL;
    char **v = calloc(json_array_size(arr) + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        v[i] = strdup(s ? s : "");
    }
    return v;
}

static inline void fx_strv_free(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* The row's config.log path (malloc'd copy) or NULL. */
static inline char *fx_log_path(const json_t *config) {
    const char *s = json_string_value(json_object_get(config, "log"));
    return s ? strdup(s) : NULL;
}

#endif
