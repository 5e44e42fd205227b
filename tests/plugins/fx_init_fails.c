/*
 * fx_init_fails.c - registers a listener, then fails init with its own
 * message.  Its fini records "fini:<id>" in config.log, which must never
 * happen (an instance whose init failed is not finalised).
 */
#include "fx_util.h"

static char log_path[4096];

static json_t *pre_step(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    (void)user_data;
    return weir_next(call);
}

static int fails_init(weir_plugin *self, const weir_api *api, const json_t *config,
                      weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    const char *log = json_string_value(json_object_get(config, "log"));
    snprintf(log_path, sizeof log_path, "%s", log ? log : "");
    fx_note(log_path, "init", weir_plugin_id(self));
    int rc = weir_hook_register(self, "agent/pre-step", pre_step, NULL);
    if (rc != WEIR_OK)
        return rc;
    snprintf(err->text, sizeof err->text, "backend unreachable (fixture)");
    return WEIR_E_IO;
}

static void fails_fini(weir_plugin *self) {
    fx_note(log_path, "fini", weir_plugin_id(self));
}

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    .name = "fx-init-fails",
    .version = "1.0.0",
    .description = "init-failure fixture",
    .init = fails_init,
    .fini = fails_fini,
};

WEIR_PLUGIN_DEFINE(desc)
