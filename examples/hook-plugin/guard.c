/*
 * examples/hook-plugin/guard.c - an example approval plugin, built as
 * weir-example-guard.so.
 *
 * Config: {"deny"?: [tool names], "reason"?: "...", "tag"?: "..."}.
 *   tools/pre-execute  a call to a tool named in `deny` is answered
 *                      {"kind":"deny","reason":R} without running the rest of
 *                      the chain (R = `reason`, default "denied by policy"),
 *                      and an `example-guard/denied` {call_id, name} event is
 *                      appended to the session; other calls pass through.
 *   agent/pre-step     when `tag` is set, every message entering the step
 *                      gets `tag` appended to its source.tags.
 * Several rows of this plugin may coexist (each with its own config).
 *
 * It reaches the host only through the weir_api table (weir/plugin.h) and
 * owns one struct per row, freed in fini.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>

static const char config_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"deny\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":1}},"
    "\"reason\":{\"type\":\"string\"},"
    "\"tag\":{\"type\":\"string\",\"minLength\":1}},"
    "\"additionalProperties\":false}";

#define DENIED_EVENT "example-guard/denied"

/* One row's state: its own copy of the config. */
typedef struct guard {
    json_t *deny;  /* array of strings */
    char *reason;
    char *tag;     /* NULL: no tagging */
} guard;

static void guard_free(guard *g) {
    if (!g)
        return;
    json_decref(g->deny);
    free(g->reason);
    free(g->tag);
    free(g);
}

static bool denied(const guard *g, const char *name) {
    size_t i;
    const json_t *v;
    json_array_foreach(g->deny, i, v) {
        if (strcmp(json_string_value(v), name) == 0)
            return true;
    }
    return false;
}

static json_t *on_pre_execute(weir_call *call, const json_t *args, void *user_data) {
    const guard *g = user_data;
    const char *name = json_string_value(json_object_get(args, "name"));
    if (!name || !denied(g, name))
        return weir_next(call);
    /* Short-circuit: the rest of the chain and the default do not run. */
    json_t *data = json_pack("{s:O?,s:s}", "call_id", json_object_get(args, "call_id"),
                             "name", name);
    weir_error err;
    int rc = data ? weir_agent_append(weir_call_agent(call), DENIED_EVENT, data, &err)
                  : WEIR_E_NOMEM;
    json_decref(data);
    if (rc != WEIR_OK) {
        weir_call_fail(call, "cannot record the denial of '%s': %s", name,
                       rc == WEIR_E_NOMEM ? "out of memory" : err.text);
        return NULL;
    }
    return json_pack("{s:s,s:s}", "kind", "deny", "reason", g->reason);
}

/* Append `tag` to message.source.tags (creating both); 0 or -1. */
static int tag_message(json_t *msg, const char *tag) {
    json_t *source = json_object_get(msg, "source");
    if (!json_is_object(source)) {
        source = json_object();
        if (json_object_set_new(msg, "source", source) != 0)
            return -1;
    }
    json_t *tags = json_object_get(source, "tags");
    if (!json_is_array(tags)) {
        tags = json_array();
        if (json_object_set_new(source, "tags", tags) != 0)
            return -1;
    }
    return json_array_append_new(tags, json_string(tag));
}

static json_t *on_pre_step(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    const guard *g = user_data;
    json_t *res = weir_next(call);
    if (!res)
        return NULL;
    const char *kind = json_string_value(json_object_get(res, "kind"));
    if (!kind || strcmp(kind, "enter") != 0)
        return res; /* "reject": nothing enters, nothing to tag */
    /* What weir_next returned may be shared: change a copy. */
    json_t *out = json_deep_copy(res);
    json_decref(res);
    json_t *messages = json_object_get(out, "messages");
    size_t i;
    json_t *m;
    int rc = out ? 0 : -1;
    json_array_foreach(messages, i, m) {
        if (rc == 0 && json_is_object(m))
            rc = tag_message(m, g->tag);
    }
    if (rc != 0) {
        json_decref(out);
        weir_call_fail(call, "out of memory tagging messages");
        return NULL;
    }
    return out;
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config,
                weir_error *err) {
    (void)api; /* the weir_* macros call it: WEIR_PLUGIN_DEFINE stored it */
    /* config_schema has been checked by the host: the types are right. */
    const json_t *deny = json_object_get(config, "deny");
    const char *reason = json_string_value(json_object_get(config, "reason"));
    const char *tag = json_string_value(json_object_get(config, "tag"));
    guard *g = calloc(1, sizeof *g);
    if (g) {
        g->deny = deny ? json_deep_copy(deny) : json_array();
        g->reason = strdup(reason ? reason : "denied by policy");
        g->tag = tag ? strdup(tag) : NULL;
    }
    if (!g || !g->deny || !g->reason || (tag && !g->tag)) {
        guard_free(g);
        snprintf(err->text, sizeof err->text, "out of memory");
        return WEIR_E_NOMEM;
    }
    weir_plugin_set_data(self, g);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = g;
    int rc = weir_event_type_register(self, DENIED_EVENT, WEIR_EVENT_IGNORABLE);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "tools/pre-execute", on_pre_execute, &opts);
    if (rc == WEIR_OK && g->tag)
        rc = weir_hook_register(self, "agent/pre-step", on_pre_step, &opts);
    if (rc != WEIR_OK) {
        /* fini does not run after a failed init: free here. */
        weir_plugin_set_data(self, NULL);
        guard_free(g);
        return rc;
    }
    weir_log(self, WEIR_LOG_INFO, "denying %zu tool(s)%s%s", json_array_size(g->deny),
             g->tag ? ", tagging messages " : "", g->tag ? g->tag : "");
    return WEIR_OK;
}

static void fini(weir_plugin *self) {
    guard_free(weir_plugin_data(self));
}

static const weir_plugin_desc guard_desc = {
    WEIR_PLUGIN_HEADER,
    .name = "example-guard",
    .version = "1.0.0",
    .description = "Example: deny tools by name, tag messages entering a step",
    .config_schema = config_schema,
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(guard_desc)
