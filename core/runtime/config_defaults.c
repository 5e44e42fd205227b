/*
 * core/runtime/config_defaults.c - the defaults a composed deployment config
 * leaves to its plugins, filled in from their config schemas
 * (weir_config_defaults, used by `weir config`; docs/schema.md, "Defaults").
 *
 * A schema gives a member's default with the JSON Schema annotation
 * `"default"` on its `properties` entry, at the top level of the row's
 * config, and may make defaults depend on the rest of the config with
 * `if` / `then` / `else` (JSON Schema 2020-12, "Keywords for Applying
 * Subschemas Conditionally"): the defaults of `then` apply when the config
 * is valid against `if` (weir's schema subset, docs/schema.md), else those
 * of `else`.  Only members the config lacks are set; nothing else changes.
 * The core's own telemetry section gets its defaults here too
 * (docs/telemetry.md).
 */
#include <stdint.h>

#include "common.h"
#include "host_int.h"
#include "otlp.h"
#include "schema.h"

/* Set in `cfg` each member of `props` (borrowed; may be NULL) that has a
 * "default" and that `cfg` lacks.  0, or -1 when out of memory. */
static int fill(json_t *cfg, const json_t *props) {
    const char *key;
    json_t *sub;
    /* read only: jansson's iteration takes a non-const object */
    json_object_foreach((json_t *)(uintptr_t)props, key, sub) {
        const json_t *dflt = json_object_get(sub, "default");
        if (!dflt || json_object_get(cfg, key))
            continue;
        json_t *copy = json_deep_copy(dflt);
        if (!copy || json_object_set_new(cfg, key, copy) != 0)
            return -1;
    }
    return 0;
}

/* The defaults of `schema` (borrowed) into the row's config `cfg`. */
static int row_defaults(json_t *cfg, const json_t *schema) {
    const json_t *cond = json_object_get(schema, "if");
    const json_t *branch = NULL;
    if (json_is_object(cond)) {
        char msg[256];
        bool holds = weir__schema_validate(cond, cfg, msg, sizeof msg) == 0;
        branch = json_object_get(schema, holds ? "then" : "else");
    }
    if (fill(cfg, json_object_get(schema, "properties")) != 0)
        return -1;
    return fill(cfg, json_object_get(branch, "properties"));
}

/* The telemetry section's defaults (docs/telemetry.md): shown, never
 * composed, so a deployment's config_hash does not change with them; the
 * endpoint and the service name stay unset (the OTEL_* variables give them). */
static int telemetry_defaults(json_t *config) {
    json_t *tel = json_object_get(config, "telemetry");
    if (tel && !json_is_object(tel))
        return 0;
    json_t *dflt = json_pack("{s:b, s:b, s:i, s:i, s:i}", "enabled", 0, "capture_content", 0,
                             "max_queue", WEIR__OTLP_MAX_QUEUE, "batch_ms", WEIR__OTLP_BATCH_MS,
                             "timeout_ms", WEIR__OTLP_TIMEOUT_MS);
    int rc = dflt ? 0 : -1;
    if (rc == 0 && !tel) {
        rc = json_object_set(config, "telemetry", dflt);
    } else if (rc == 0) {
        rc = json_object_update_missing(tel, dflt);
    }
    json_decref(dflt);
    return rc;
}

int weir_config_defaults(json_t *config, weir_error *err) {
    if (!json_is_object(config))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_config_defaults: the config is not an object");
    if (telemetry_defaults(config) != 0)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    const json_t *plugin_path = json_object_get(config, "plugin_path");
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(config, "plugins"), i, row) {
        json_t *cfg = json_object_get(row, "config");
        if (!json_is_object(row) || (cfg && !json_is_object(cfg)))
            continue;
        json_t *schema = weir__plugin_config_schema(
            json_string_value(json_object_get(row, "plugin")), plugin_path);
        if (!schema)
            continue;
        json_t *own = cfg ? json_incref(cfg) : json_object();
        int rc = own ? row_defaults(own, schema) : -1;
        if (rc == 0 && !cfg && json_object_size(own) > 0)
            rc = json_object_set(row, "config", own);
        json_decref(own);
        json_decref(schema);
        if (rc != 0)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    return WEIR_OK;
}
