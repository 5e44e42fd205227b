/*
 * examples/window-compaction/window_compaction.c - a window compaction,
 * built as weir-window-compaction.so; it fills the role "compaction".
 * agent/pre-step, when the context is over `threshold_ratio` of the route's
 * window: (1) every tool result of more than `stub_over_tokens` but the last
 * `keep_recent` surface nodes becomes a one-line stub; (2) if still over, a
 * model call (purpose "compaction") summarizes the turns before those nodes
 * and a user message with the summary replaces them (surface replaces).
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
    const char *type = json_string_value(json_object_get(node, "type"));
    return type ? type : "";
}

/* 1: stub the old, long tool results of `surface`. */
static void stub_old_results(const compaction *c, weir_agent *agent, const json_t *surface) {
    for (size_t i = 0; i + (size_t)c->keep_recent < json_array_size(surface); i++) {
        const json_t *node = json_array_get(surface, i);
        size_t tokens = weir_message_tokens(json_object_get(node, "message"));
        if (strcmp(type_of(node), "tool/result") != 0 || tokens <= (size_t)c->stub_over)
            continue;
        json_int_t seq = json_integer_value(json_object_get(node, "seq"));
        json_t *ev = weir_agent_event(agent, (size_t)seq); /* a copy: all but the text stays */
        json_t *data = json_object_get(ev, "data");
        json_t *content = json_object_get(json_object_get(data, "message"), "content");
        json_t *stub = json_pack("[{s:s, s:o}]", "type", "text", "text", json_sprintf(
                                     "[a tool result of about %zu tokens, removed]", tokens));
        weir_error err = {.text = "out of memory"}; /* a failed replace fills it */
        if (json_object_set_new(json_array_get(content, 0), "content", stub) != 0 ||
            weir_agent_surface_replace(agent, "tool/result", data, (size_t)seq, (size_t)seq,
                                       NULL, NULL, &err) != WEIR_OK)
            weir_log(c->self, WEIR_LOG_WARN, "cannot stub the tool result at seq %lld: %s",
                     (long long)seq, err.text);
        json_decref(ev);
    }
}

/* 2: summarize the turns before the last keep_recent nodes of `surface`. */
static void summarize_old_turns(const compaction *c, weir_call *call, const json_t *args,
                                const json_t *route, const json_t *surface) {
    size_t n = json_array_size(surface), from = 0, to = 0;
    while (from < n && !strcmp(type_of(json_array_get(surface, from)), "system/message"))
        from++; /* the system prompt stays */
    /* cut just before a user message: a tool call and its result stay together */
    for (size_t k = n - (size_t)c->keep_recent; k > from + 1 && !to; k--)
        if (!strcmp(type_of(json_array_get(surface, k)), "user/message"))
            to = k - 1;
    if (!to)
        return; /* nothing old enough to summarize */
    json_t *old = json_array(), *result = NULL;
    for (size_t i = from; old && i <= to; i++)
        json_array_append(old, json_object_get(json_array_get(surface, i), "message"));
    char *transcript = weir_transcript(old, 100000);
    json_decref(old);
    json_t *req = json_pack("{s:O?, s:O?, s:[{s:s, s:[{s:s, s:s+}]}]}", "provider",
                            json_object_get(route, "provider"), "model",
                            json_object_get(route, "model"), "messages", "role", "user",
                            "content", "type", "text", "text",
                            "Summarize this conversation for its continuation:\n\n",
                            transcript ? transcript : "");
    json_t *ctx = json_pack("{s:s}", "purpose", "compaction");
    weir_error err = {.text = "out of memory"};
    char *summary = NULL;
    if (req && ctx && transcript &&
        weir_agent_complete_stream(weir_call_agent(call), req, ctx, weir_call_signal(call),
                                   &result, &err) == WEIR_OK)
        summary = weir_message_text(json_object_get(result, "message"));
    json_t *data = json_pack("{s:O, s:O, s:{s:s, s:[{s:s, s:s+}]}}", "turn", /* NULL: no summary */
                             json_object_get(args, "turn"), "step", json_object_get(args, "step"),
                             "message", "role", "user", "content", "type", "text", "text",
                             "[summary of the earlier conversation]\n", summary);
    json_int_t a = json_integer_value(json_object_get(json_array_get(surface, from), "seq"));
    json_int_t b = json_integer_value(json_object_get(json_array_get(surface, to), "seq"));
    if (!data || weir_agent_surface_replace(weir_call_agent(call), "user/message", data,
                                            (size_t)a, (size_t)b, NULL, NULL, &err) != WEIR_OK)
        weir_log(c->self, WEIR_LOG_WARN, "cannot summarize seqs %lld..%lld: %s", (long long)a,
                 (long long)b, err.text);
    free(summary);
    free(transcript);
    json_decref(data);
    json_decref(ctx);
    json_decref(req);
    json_decref(result);
}

/* agent/pre-step (waterfall): compact before the step when the window is full. */
static json_t *on_pre_step(weir_call *call, const json_t *args, void *user_data) {
    const compaction *c = user_data;
    weir_agent *agent = weir_call_agent(call);
    json_t *route = weir_agent_route(agent, NULL); /* NULL before the first request */
    double limit = c->ratio * (double)json_integer_value(json_object_get(route, "context_window"));
    /* stub first; summarize only when that was not enough */
    for (int pass = 0; pass < 2 && limit > 0; pass++) {
        json_t *history = weir_agent_messages(agent), *surface = NULL;
        size_t used = weir_messages_tokens(history) +
                      weir_messages_tokens(json_object_get(args, "messages")); /* entering */
        json_decref(history);
        if ((double)used <= limit || !(surface = weir_agent_surface(agent)))
            break;
        if (pass == 0)
            stub_old_results(c, agent, surface);
        else if (json_array_size(surface) > (size_t)c->keep_recent)
            summarize_old_turns(c, call, args, route, surface);
        json_decref(surface);
    }
    json_decref(route);
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
    if (rc != WEIR_OK) /* fini does not run after a failed init */
        free(c);
    else
        weir_plugin_set_data(self, c);
    return rc;
}

static void fini(weir_plugin *self) { free(weir_plugin_data(self)); }

static const weir_plugin_desc window_compaction_desc = {
    WEIR_PLUGIN_HEADER_MIN(12), .name = "window-compaction", .version = "1.0.0",
    .description = "Example: stubs old tool results and summarizes old turns when the window fills",
    .init = init, .fini = fini};

WEIR_PLUGIN_DEFINE(window_compaction_desc)
