/*
 * fx_secret.c - declares a config_schema that marks secrets ("secret": true,
 * docs/schema.md): `password`, every element of `tokens`, `db.dsn`, any
 * member of `vault`, and `auth` through an anyOf branch; `user` is not
 * secret, and its default is "nobody" (weir_config_defaults).  init records "init:<id>" in config.log: weir_config_redact opens
 * the plugin to read the schema but must never initialise it.
 */
#include "fx_util.h"

static int secret_init(weir_plugin *self, const weir_api *api, const json_t *config,
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
    .name = "fx-secret",
    .version = "1.0.0",
    .description = "secret-schema fixture",
    .config_schema = "{\"type\":\"object\",\"properties\":{"
                     "\"user\":{\"type\":\"string\",\"default\":\"nobody\"},"
                     "\"log\":{\"type\":\"string\"},"
                     "\"password\":{\"type\":\"string\",\"secret\":true},"
                     "\"tokens\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"secret\":true}},"
                     "\"db\":{\"type\":\"object\",\"properties\":{"
                     "\"host\":{\"type\":\"string\"},\"dsn\":{\"type\":\"string\",\"secret\":true}}},"
                     "\"vault\":{\"type\":\"object\",\"additionalProperties\":{\"secret\":true}},"
                     "\"auth\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"string\",\"secret\":true}]}"
                     "}}",
    .init = secret_init,
};

WEIR_PLUGIN_DEFINE(desc)
