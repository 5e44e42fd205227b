/*
 * examples/window-compaction/window_compaction.c - a window compaction,
 * built as weir-window-compaction.so; it fills the role "compaction".
 *
 * agent/pre-step: when the context (the derived history plus the messages
 * entering the step) is over `threshold_ratio` of the route's window, it
 *   1. stubs old tool results: every tool/result node but the last
 *      `keep_recent` surface nodes, of more than `stub_over_tokens`
 *      (estimated), gets a one-line stub for content (a surface replace);
 *   2. if still over, summarizes the old turns: the nodes before the turn
 *      that holds the last `keep_recent` nodes go, as a transcript, to one
 *      model call (purpose "compaction"), and one user message holding the
 *      summary replaces them.
 * Config: {"threshold_ratio": 0.8, "keep_recent": 6, "stub_over_tokens": 500}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>
#include <weir/sdk.h>

typedef struct compaction {
    weir_plugin *self;
    double ratio;
    long long keep_recent, stub_over;
} compaction;

static const char *type_of(const json_t *node) {
    return json_string_value(json_object_get(node, "type"));
}

/* Estimated tokens of the next request. */
static size_t context_tokens(weir_agent *agent, const json_t *args) {
    json_t *history = weir_agent_messages(agent);
    size_t used = weir_messages_tokens(history) +
                  weir_messages_tokens(json_object_get(args, "messages"));
    json_decref(history);
    return used;
}

/* 1: stub the old, long tool results of `surface`. */
static void stub_old_results(const compaction *c, weir_agent *agent, const json_t *surface) {
    size_t n = json_array_size(surface);
    for (size_t i = 0; i + (size_t)c->keep_recent < n; i++) {
        const json_t *node = json_array_get(surface, i);
        size_t tokens = weir_message_tokens(json_object_get(node, "message"));
        if (strcmp(type_of(node), "tool/result") != 0 || tokens <= (size_t)c->stub_over)
            continue;
        json_int_t seq = json_integer_value(json_object_get(node, "seq"));
        json_t *ev = weir_agent_event(agent, (size_t)seq); /* its data, content aside, stays */
        char stub[96];
        snprintf(stub, sizeof stub, "[a tool result of about %zu tokens, removed]", tokens);
        json_t *block = json_pack("{s:s, s:[{s:s, s:s}]}", "type", "tool_result", "content",
                                  "type", "text", "text", stub);
        json_t *msg = json_object_get(json_object_get(ev, "data"), "message");
        json_t *old = json_array_get(json_object_get(msg, "content"), 0);
        weir_error err;
        int rc = WEIR_E_NOMEM;
        if (block && old && json_object_update_missing(block, old) == 0 &&
            json_object_set_new(msg, "content", json_pack("[O]", block)) == 0)
            rc = weir_agent_surface_replace(agent, "tool/result", json_object_get(ev, "data"),
                                            (size_t)seq, (size_t)seq, NULL, NULL, &err);
        if (rc != WEIR_OK)
            weir_log(c->self, WEIR_LOG_WARN, "cannot stub the tool result at seq %lld: %s",
                     (long long)seq, rc == WEIR_E_NOMEM ? "out of memory" : err.text);
        json_decref(block);
        json_decref(ev);
    }
}

/* 2: summarize the turns before the last keep_recent nodes of `surface`. */
static void summarize_old_turns(const compaction *c, weir_call *call, const json_t *args,
                                const json_t *surface) {
    weir_agent *agent = weir_call_agent(call);
    size_t n = json_array_size(surface), from = 0, to = 0;
    while (from < n && !strcmp(type_of(json_array_get(surface, from)), "system/message"))
        from++; /* the system prompt stays */
    /* cut before a user message: a tool call and its result stay together */
    for (size_t k = n > (size_t)c->keep_recent ? n - (size_t)c->keep_recent : 0; k > from + 1 && !to; k--)
        if (!strcmp(type_of(json_array_get(surface, k)), "user/message"))
            to = k - 1;
    if (!to)
        return; /* nothing old enough to summarize */
    json_t *old = json_array(), *route = weir_agent_route(agent, NULL), *result = NULL;
    for (size_t i = from; old && i <= to; i++)
        json_array_append(old, json_object_get(json_array_get(surface, i), "message"));
    char *transcript = weir_transcript(old, 100000);
    json_t *req = json_pack("{s:O?, s:O?, s:i, s:[{s:s, s:[{s:s, s:s+}]}]}", "provider",
                            json_object_get(route, "provider"), "model",
                            json_object_get(route, "model"), "max_tokens", 1024, "messages",
                            "role", "user", "content", "type", "text", "text",
                            "Summarize this conversation for its continuation:\n\n",
                            transcript ? transcript : "");
    json_t *ctx = json_pack("{s:s}", "purpose", "compaction");
    weir_error err = {0};
    int rc = req && ctx && transcript ? weir_agent_complete_stream(agent, req, ctx,
                                            weir_call_signal(call), &result, &err)
                                      : WEIR_E_NOMEM;
    char *summary = rc == WEIR_OK ? weir_message_text(json_object_get(result, "message")) : NULL;
    json_t *data = json_pack("{s:O, s:O, s:{s:s, s:[{s:s, s:s+}]}}", "turn",
                             json_object_get(args, "turn"), "step", json_object_get(args, "step"),
                             "message", "role", "user", "content", "type", "text", "text",
                             "[summary of the earlier conversation]\n", summary ? summary : "");
    json_int_t a = json_integer_value(json_object_get(json_array_get(surface, from), "seq"));
    json_int_t b = json_integer_value(json_object_get(json_array_get(surface, to), "seq"));
    if (summary && data)
        rc = weir_agent_surface_replace(agent, "user/message", data, (size_t)a, (size_t)b, NULL,
                                        NULL, &err);
    if (rc != WEIR_OK || !summary || !data)
        weir_log(c->self, WEIR_LOG_WARN, "cannot summarize seqs %lld..%lld: %s", (long long)a,
                 (long long)b, rc == WEIR_OK || rc == WEIR_E_NOMEM ? "out of memory" : err.text);
    free(summary);
    free(transcript);
    json_decref(data);
    json_decref(ctx);
    json_decref(req);
    json_decref(result);
    json_decref(route);
    json_decref(old);
}

/* agent/pre-step (waterfall): compact before the step when the window is full. */
static json_t *on_pre_step(weir_call *call, const json_t *args, void *user_data) {
    const compaction *c = user_data;
    weir_agent *agent = weir_call_agent(call);
    json_t *route = weir_agent_route(agent, NULL); /* NULL before the first request */
    double limit = c->ratio * (double)json_integer_value(json_object_get(route, "context_window"));
    json_decref(route);
    for (int pass = 0; pass < 2 && limit > 0 && (double)context_tokens(agent, args) > limit; pass++) {
        json_t *surface = weir_agent_surface(agent);
        if (pass == 0)
            stub_old_results(c, agent, surface);
        else
            summarize_old_turns(c, call, args, surface);
        json_decref(surface);
    }
    return weir_next(call); /* the step goes on with what the rest of the chain says */
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    (void)api;
    int rc = weir_plugin_role(self, "compaction"); /* first: the host names a second row */
    if (rc != WEIR_OK)
        return rc;
    weir_config_reader rd = weir_config_reader_init(config, weir_plugin_id(self), err);
    compaction *c = calloc(1, sizeof *c);
    if (!c)
        return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
    c->self = self;
    weir_config_double(&rd, "threshold_ratio", 0.8, 0.1, 1.0, &c->ratio);
    weir_config_int(&rd, "keep_recent", 6, 1, 1000, &c->keep_recent);
    weir_config_int(&rd, "stub_over_tokens", 500, 10, 10000000, &c->stub_over);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = c;
    rc = rd.status ? rd.status : weir_hook_register(self, "agent/pre-step", on_pre_step, &opts);
    if (rc != WEIR_OK) {
        free(c);
        return rc;
    }
    weir_plugin_set_data(self, c);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { free(weir_plugin_data(self)); }

static const weir_plugin_desc window_compaction_desc = {
    WEIR_PLUGIN_HEADER_MIN(12),
    .name = "window-compaction",
    .version = "1.0.0",
    .description = "Example: stubs old tool results and summarizes old turns when the window fills",
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(window_compaction_desc)
