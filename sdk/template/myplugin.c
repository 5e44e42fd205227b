/*
 * myplugin.c - a weir plugin, made from weir's plugin template
 * (`weir new-plugin`): replace the hook with yours.
 *
 * What it does: caps the output budget of every model request.  On the
 * waterfall hook `agent/request` it lets the rest of the chain (and the
 * core default) choose the call config {provider, model, max_tokens?, ...},
 * then lowers `max_tokens` to the configured cap.
 *
 * Config (checked by the host against config_schema before init):
 *   {"max_tokens_cap": integer >= 1}   (required)
 *
 * Rules every plugin follows (see docs/sdk.md):
 *   - export nothing but weir_plugin_describe (WEIR_PLUGIN_DEFINE does it);
 *   - reach the host only through the api table (the weir_* macros);
 *   - register hooks, tools and event types only inside init;
 *   - `args` is borrowed and read-only; what weir_next() returns is a new
 *     reference that may be shared, so change a copy;
 *   - free per-row state in fini (fini does not run when init fails).
 */
#include <stdio.h>
#include <stdlib.h>

#include <weir/plugin.h>

static const char config_schema[] =
    "{\"type\":\"object\",\"required\":[\"max_tokens_cap\"],\"properties\":{"
    "\"max_tokens_cap\":{\"type\":\"integer\",\"minimum\":1}},"
    "\"additionalProperties\":false}";

/* Per-row state, owned by the row (plugin_set_data), freed in fini. */
typedef struct myplugin {
    json_int_t cap;
} myplugin;

/* agent/request (waterfall): args {agent, turn, step}; result: call config. */
static json_t *on_request(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    const myplugin *st = user_data;
    json_t *config = weir_next(call); /* the rest of the chain, then the default */
    if (!config)
        return NULL; /* an inner listener failed: pass the failure on */
    json_t *max = json_object_get(config, "max_tokens");
    if (json_is_integer(max) && json_integer_value(max) <= st->cap)
        return config; /* already within the cap: return it unchanged */
    json_t *out = json_deep_copy(config);
    json_decref(config);
    if (!out || json_object_set_new(out, "max_tokens", json_integer(st->cap)) != 0) {
        json_decref(out);
        weir_call_fail(call, "out of memory");
        return NULL;
    }
    return out;
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config,
                weir_error *err) {
    (void)api; /* the weir_* macros call it: WEIR_PLUGIN_DEFINE stored it */
    myplugin *st = malloc(sizeof *st);
    if (!st) {
        snprintf(err->text, sizeof err->text, "out of memory");
        return WEIR_E_NOMEM;
    }
    st->cap = json_integer_value(json_object_get(config, "max_tokens_cap"));
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.order = WEIR_ORDER_FIRST; /* outermost: have the last word */
    opts.user_data = st;
    int rc = weir_hook_register(self, "agent/request", on_request, &opts);
    if (rc != WEIR_OK) {
        free(st);
        return rc; /* the host reports which registration failed */
    }
    weir_plugin_set_data(self, st);
    return WEIR_OK;
}

static void fini(weir_plugin *self) {
    free(weir_plugin_data(self));
}

static const weir_plugin_desc myplugin_desc = {
    WEIR_PLUGIN_HEADER,
    .name = "myplugin",
    .version = "0.1.0",
    .description = "Template: caps max_tokens of every model request",
    .config_schema = config_schema,
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(myplugin_desc)
