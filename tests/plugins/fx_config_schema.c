/*
 * fx_config_schema.c - declares a config_schema ({"count": integer,
 * required; "log": string}).  init records "init:<id>" in config.log, which
 * must not happen when the config is invalid.
 */
#include "fx_util.h"

static int schema_init(weir_plugin *self, const weir_api *api, const json_t *config,
                       weir_error *err) {
    (void)err;
    WEIR_PLUGIN_INIT_API(api);
    char *log = fx_log_path(config);
    fx_note(log, "init", weir_plugin_id(self));
    free(log);
    return WEIR_OK;
}

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    .name = "fx-config-schema",
    .version = "1.0.0",
    .description = "config-schema fixture",
    .config_schema = "{\"type\":\"object\","
                     "\"properties\":{\"count\":{\"type\":\"integer\"},"
                     "\"log\":{\"type\":\"string\"}},"
                     "\"required\":[\"count\"],\"additionalProperties\":false}",
    .init = schema_init,
};

WEIR_PLUGIN_DEFINE(desc)
