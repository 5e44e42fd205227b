/*
 * fx_chain.c - fx-alpha, fx-beta, fx-gamma: one waterfall listener on
 * agent/pre-step (or config.hook) placed by the row config ({"order":n,
 * "before":[ids], "after":[ids], "log":file}) and one event type
 * "<name>/event" (or config.event), after claiming the event namespace
 * config.claim when given (docs/plugins.md, "Event types are namespaced"); it
 * fills each role of config.roles ([names], api->plugin_role).  init and fini
 * are recorded in config.log.  FX_NAME is set by CMake.
 */
#include "fx_util.h"

typedef struct chain_state {
    char *log;
    char **before;
    char **after;
} chain_state;

static void state_free(chain_state *st) {
    if (!st)
        return;
    free(st->log);
    fx_strv_free(st->before);
    fx_strv_free(st->after);
    free(st);
}

static json_t *pre_step(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    (void)user_data;
    return weir_next(call);
}

static int chain_init(weir_plugin *self, const weir_api *api, const json_t *config,
                      weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    chain_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err->text, sizeof err->text, "out of memory");
        return WEIR_E_NOMEM;
    }
    st->log = fx_log_path(config);
    st->before = fx_strv(json_object_get(config, "before"));
    st->after = fx_strv(json_object_get(config, "after"));
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.order = (int)json_integer_value(json_object_get(config, "order"));
    opts.before = (const char *const *)st->before;
    opts.after = (const char *const *)st->after;
    const char *hook = json_string_value(json_object_get(config, "hook"));
    int rc = weir_hook_register(self, hook ? hook : "agent/pre-step", pre_step, &opts);
    const char *claim = json_string_value(json_object_get(config, "claim"));
    if (rc == WEIR_OK && claim)
        rc = weir_event_namespace_claim(self, claim);
    const char *event = json_string_value(json_object_get(config, "event"));
    if (rc == WEIR_OK)
        rc = weir_event_type_register(self, event ? event : FX_NAME "/event", 0);
    size_t i;
    const json_t *role;
    json_array_foreach(json_object_get(config, "roles"), i, role) {
        if (rc == WEIR_OK)
            rc = weir_plugin_role(self, json_string_value(role));
    }
    if (rc != WEIR_OK) {
        state_free(st);
        return rc; /* the host reports the registration failure */
    }
    weir_plugin_set_data(self, st);
    fx_note(st->log, "init", weir_plugin_id(self));
    return WEIR_OK;
}

static void chain_fini(weir_plugin *self) {
    chain_state *st = weir_plugin_data(self);
    fx_note(st->log, "fini", weir_plugin_id(self));
    state_free(st);
}

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    .name = FX_NAME,
    .version = "1.0.0",
    .description = "chain-order fixture",
    .init = chain_init,
    .fini = chain_fini,
};

WEIR_PLUGIN_DEFINE(desc)
