/*
 * fx_no_init_api.c - a plugin whose init never calls WEIR_PLUGIN_INIT_API:
 * WEIR_PLUGIN_DEFINE sets the table before init runs, so the weir_* macros
 * work from init's first line (issue #14 item 9: this used to be SIGSEGV).
 * It registers an agent/pre-step listener and records "init:<id>" in
 * config.log through weir_plugin_id().
 */
#include "fx_util.h"

static json_t *pre_step(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    (void)user_data;
    return weir_next(call);
}

static int no_api_init(weir_plugin *self, const weir_api *api, const json_t *config,
                       weir_error *err) {
    (void)api; /* on purpose: no WEIR_PLUGIN_INIT_API(api) */
    (void)err;
    fx_note(json_string_value(json_object_get(config, "log")), "init", weir_plugin_id(self));
    weir_log(self, WEIR_LOG_DEBUG, "init without WEIR_PLUGIN_INIT_API");
    return weir_hook_register(self, "agent/pre-step", pre_step, NULL);
}

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER_MIN(0), /* it uses 1.0 members only: any 1.x host loads it */
    .name = "fx-no-init-api",
    .version = "1.0.0",
    .description = "init without WEIR_PLUGIN_INIT_API",
    .init = no_api_init,
};

WEIR_PLUGIN_DEFINE(desc)
