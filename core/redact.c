/*
 * core/redact.c - hiding the secrets of a composed deployment config
 * (weir_config_redact, used by `weir config`).
 *
 * In each plugin row's config, two sets of values become "***":
 *   - the ones every row gets (BUILTIN_SECRETS): api_key, and the headers
 *     Authorization, Proxy-Authorization, x-api-key and api-key (any case);
 *   - the ones the row's plugin marks `"secret": true` in its config schema.
 *     The plugin is resolved as the loader does and opened only to read its
 *     descriptor (its `init` never runs, as with `weir plugins`); a plugin
 *     that cannot be found or opened is passed over in silence: the built-in
 *     set still applies, and composing never depended on plugins.
 * The marks follow docs/schema.md ("secret").
 */
#include "common.h"
#include "host_int.h"
#include "schema.h"

#define MASK "***"

/* The marks every row gets, as a schema of the row's config. */
static const char builtin_secrets[] =
    "{\"properties\":{"
    "\"api_key\":{\"secret\":true},"
    "\"headers\":{\"properties\":{"
    "\"Authorization\":{\"secret\":true},"
    "\"Proxy-Authorization\":{\"secret\":true},"
    "\"x-api-key\":{\"secret\":true},"
    "\"api-key\":{\"secret\":true}}}}}";

/* The config schema of `plugin` (a row's name or path) as JSON (new), or
 * NULL when it cannot be resolved or opened, declares none, or does not
 * parse (the loader reports those when the deployment is loaded). */
static json_t *plugin_schema(const char *plugin, const json_t *plugin_path) {
    char *path = NULL;
    if (!plugin || weir__plugin_resolve(plugin, plugin_path, &path, NULL) != WEIR_OK)
        return NULL;
    weir__dl *dl = NULL;
    const weir_plugin_desc *desc = NULL;
    json_t *schema = NULL;
    if (weir__dl_open(path, &dl, &desc, NULL) == WEIR_OK && desc->config_schema)
        schema = weir__json_loads(desc->config_schema, JSON_DECODE_ANY, NULL);
    weir__dl_close(dl); /* the schema text lives in the file: parsed before */
    weir__free(path);
    return schema;
}

int weir_config_redact(json_t *config, weir_error *err) {
    if (!json_is_object(config))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_config_redact: the config is not an object");
    json_t *builtin = weir__json_loads(builtin_secrets, 0, NULL);
    if (!builtin)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    const json_t *plugin_path = json_object_get(config, "plugin_path");
    int rc = WEIR_OK;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(config, "plugins"), i, row) {
        json_t *cfg = json_object_get(row, "config");
        if (!cfg || rc != WEIR_OK)
            continue;
        json_t *schema = plugin_schema(json_string_value(json_object_get(row, "plugin")),
                                       plugin_path);
        if (weir__schema_redact(builtin, cfg, MASK) < 0 ||
            (schema && weir__schema_redact(schema, cfg, MASK) < 0))
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        json_decref(schema);
    }
    json_decref(builtin);
    return rc;
}
