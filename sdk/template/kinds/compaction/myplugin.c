/*
 * myplugin.c - a window compaction, made from weir's plugin template
 * (`weir new-plugin --kind compaction`): make the policy yours.
 *
 * Before each step (agent/pre-step) it estimates the context, the derived
 * history plus the messages entering (weir_messages_tokens), against the
 * route's window (weir_agent_route).  Over threshold_ratio of the window it
 * stubs old tool results: each tool/result node of the surface, but the
 * last keep_recent nodes, with more than stub_over_chars characters of
 * result text is replaced (weir_agent_surface_replace) by a one-line stub.
 * To summarize old turns too: weir_transcript() of their messages, one
 * weir_agent_complete() call, and a replace of their nodes by one
 * user/message (weir's docs/sdk.md, "Helpers").
 * Config: {"threshold_ratio": 0.8, "keep_recent": 6, "stub_over_chars": 2000}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>
#include <weir/sdk.h>

typedef struct myplugin {
    weir_plugin *self;
    double ratio;
    long long keep_recent, stub_over;
} myplugin;

/* Per agent (weir_agent_state): freed by the host when the agent goes. */
typedef struct agent_stats {
    long long stubbed;
} agent_stats;

/* Characters of result text in a tool message. */
static size_t result_chars(const json_t *message) {
    size_t chars = 0, i, j;
    const json_t *block, *part;
    json_array_foreach(json_object_get(message, "content"), i, block)
        json_array_foreach(json_object_get(block, "content"), j, part)
            chars += json_string_length(json_object_get(part, "text"));
    return chars;
}

/* Replace tool/result node `seq` by a stub of its `chars` characters. */
static int stub_node(weir_agent *agent, json_int_t seq, size_t chars, weir_error *err) {
    json_t *ev = weir_agent_event_ref(agent, (size_t)seq);
    json_t *data = json_deep_copy(json_object_get(ev, "data"));
    json_decref(ev);
    char text[96];
    snprintf(text, sizeof text, "[tool result of %zu characters removed to save context]", chars);
    size_t i;
    json_t *block;
    json_array_foreach(json_object_get(json_object_get(data, "message"), "content"), i, block) {
        if (json_object_set_new(block, "content",
                                json_pack("[{s:s, s:s}]", "type", "text", "text", text)) != 0) {
            json_decref(data);
            return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
        }
    }
    if (!data)
        return weir_error_fill(err, WEIR_E_NOMEM, "no tool/result at seq %lld", (long long)seq);
    int rc = weir_agent_surface_replace(agent, "tool/result", data, (size_t)seq, (size_t)seq, NULL,
                                        NULL, err);
    json_decref(data);
    return rc;
}

/* Stub the old tool results of `agent`; returns how many. */
static long long stub_old_results(const myplugin *st, weir_agent *agent) {
    json_t *surface = weir_agent_surface(agent);
    size_t n = json_array_size(surface), i;
    long long stubbed = 0;
    for (i = 0; i + (size_t)st->keep_recent < n; i++) {
        const json_t *node = json_array_get(surface, i);
        const char *type = json_string_value(json_object_get(node, "type"));
        size_t chars = result_chars(json_object_get(node, "message"));
        if (!type || strcmp(type, "tool/result") != 0 || chars <= (size_t)st->stub_over)
            continue;
        weir_error err;
        if (stub_node(agent, json_integer_value(json_object_get(node, "seq")), chars, &err) != 0) {
            weir_log(st->self, WEIR_LOG_WARN, "cannot stub a tool result: %s", err.text);
            break;
        }
        stubbed++;
    }
    json_decref(surface);
    return stubbed;
}

/* agent/pre-step (waterfall): compact before the step when the window is full. */
static json_t *on_pre_step(weir_call *call, const json_t *args, void *user_data) {
    const myplugin *st = user_data;
    weir_agent *agent = weir_call_agent(call);
    json_t *route = weir_agent_route(agent, NULL); /* NULL before the first request */
    json_int_t window = json_integer_value(json_object_get(route, "context_window"));
    json_decref(route);
    if (window > 0) {
        json_t *history = weir_agent_messages(agent);
        size_t used = weir_messages_tokens(history) +
                      weir_messages_tokens(json_object_get(args, "messages"));
        json_decref(history);
        if ((double)used > st->ratio * (double)window) {
            agent_stats *stats = weir_agent_state(st->self, agent, sizeof *stats, NULL);
            long long n = stub_old_results(st, agent);
            if (stats)
                stats->stubbed += n;
            weir_log(st->self, WEIR_LOG_INFO, "%zu of %lld tokens: stubbed %lld tool results (%lld "
                     "in all)", used, (long long)window, n, stats ? stats->stubbed : n);
        }
    }
    return weir_next(call); /* the step goes on with what the rest of the chain says */
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config,
                weir_error *err) {
    (void)api;
    weir_config_reader rd = weir_config_reader_init(config, weir_plugin_id(self), err);
    myplugin *st = calloc(1, sizeof *st);
    if (!st)
        return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
    st->self = self;
    weir_config_double(&rd, "threshold_ratio", 0.8, 0.1, 1.0, &st->ratio);
    weir_config_int(&rd, "keep_recent", 6, 0, 1000, &st->keep_recent);
    weir_config_int(&rd, "stub_over_chars", 2000, 100, 10000000, &st->stub_over);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = st;
    int rc = rd.status ? rd.status : weir_hook_register(self, "agent/pre-step", on_pre_step, &opts);
    if (rc != WEIR_OK) {
        free(st);
        return rc;
    }
    weir_plugin_set_data(self, st);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { free(weir_plugin_data(self)); }

static const weir_plugin_desc myplugin_desc = {
    WEIR_PLUGIN_HEADER_MIN(12),
    .name = "myplugin",
    .version = "0.1.0",
    .description = "Template: stubs old tool results when the context window fills",
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(myplugin_desc)
