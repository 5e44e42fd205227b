/*
 * tests/sdk/no_define_plugin.c - a plugin that forgot WEIR_PLUGIN_DEFINE: it
 * calls the weir_* macros, which need the hidden api pointer only
 * WEIR_PLUGIN_DEFINE defines.  It must not link, and the linker's message
 * must name the macro ("undefined reference to
 * `weir__plugin_api_set_by_WEIR_PLUGIN_DEFINE'"), with or without -z defs
 * (a hidden symbol cannot stay undefined in a shared object).
 * tests/scripts/sdk_plugin_setup.sh and sdk_install.sh build it.
 */
#include <weir/plugin.h>

static int no_define_init(weir_plugin *self, const weir_api *api, const json_t *config,
                          weir_error *err) {
    (void)api;
    (void)config;
    (void)err;
    weir_log(self, WEIR_LOG_INFO, "never runs");
    return WEIR_OK;
}

/* Referenced so that the compiler keeps init and its use of the macros. */
const weir_plugin_desc fx_no_define_desc = {
    WEIR_PLUGIN_HEADER,
    .name = "fx-no-define",
    .version = "1.0.0",
    .description = "forgot WEIR_PLUGIN_DEFINE",
    .init = no_define_init,
};
