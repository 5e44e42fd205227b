/*
 * fx_late_register.c - registers nothing in init; its fini tries
 * hook_register (too late) and records "late:<status name>" in config.log.
 */
#include "fx_util.h"

static json_t *pre_step(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    (void)user_data;
    return weir_next(call);
}

static int late_init(weir_plugin *self, const weir_api *api, const json_t *config,
                     weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    char *log = fx_log_path(config);
    if (!log) {
        snprintf(err->text, sizeof err->text, "config.log is required");
        return WEIR_E_INVAL;
    }
    weir_plugin_set_data(self, log);
    return WEIR_OK;
}

static void late_fini(weir_plugin *self) {
    char *log = weir_plugin_data(self);
    int rc = weir_hook_register(self, "agent/pre-step", pre_step, NULL);
    char what[64];
    snprintf(what, sizeof what, "late-%d", rc);
    fx_note(log, what, weir_plugin_id(self));
    free(log);
}

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    .name = "fx-late-register",
    .version = "1.0.0",
    .description = "registration-after-init fixture",
    .init = late_init,
    .fini = late_fini,
};

WEIR_PLUGIN_DEFINE(desc)
