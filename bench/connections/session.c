/*
 * bench/connections/session.c - connection reuse across the steps of a real
 * agent session: one turn of 10 steps (9 model responses that each call the
 * tools-ffi `pow` tool, then a final text answer) through the public agent
 * API, with provider-openai talking to the in-process mock LLM server.
 *
 * The model "bench" is not in the row's `models`, so provider-openai's
 * window probe asks the mock once (GET /v1/models, answered with a
 * max_model_len) on a connection of its own before the first step; the
 * model calls must share one other connection.
 *
 * Prints "session_steps=10 tcp_connects=<n> ratio=<n>/1 requests=10 ...
 * window_probe=1" (tcp_connects and requests: those of the model calls) and
 * exits 1 when the turn did not take exactly 10 steps, did not complete, did
 * not get 9 successful pow results, the probe was not the one GET it should
 * be, or the model calls used more than one TCP connection; 2 on setup
 * errors.
 *
 * Plugins come from $WEIR_TEST_PLUGIN_DIR (set by ctest), else from
 * <dir of this executable>/../lib/weir/plugins (the build tree layout).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "weir/host.h"

#include "mock_llm.h"
#include "testutil.h"

#define STEPS 10

typedef struct counts {
    int steps;       /* step/start events */
    int results;     /* tool/result events that are not errors */
    char end[32];    /* turn/end reason.kind */
} counts;

static void on_event(const json_t *event, bool durable, void *ud) {
    counts *c = ud;
    if (!durable)
        return;
    const char *type = json_string_value(json_object_get(event, "type"));
    if (type && strcmp(type, "step/start") == 0)
        c->steps++;
    if (type && strcmp(type, "tool/result") == 0) {
        const json_t *msg = json_object_get(json_object_get(event, "data"), "message");
        const json_t *block = json_array_get(json_object_get(msg, "content"), 0);
        c->results += !json_is_true(json_object_get(block, "is_error"));
    }
    if (type && strcmp(type, "turn/end") == 0) {
        const json_t *reason = json_object_get(json_object_get(event, "data"), "reason");
        const char *kind = json_string_value(json_object_get(reason, "kind"));
        snprintf(c->end, sizeof c->end, "%s", kind ? kind : "?");
        if (!kind || strcmp(kind, "completed") != 0) {
            char *why = json_dumps(reason, JSON_COMPACT);
            fprintf(stderr, "turn/end: %s\n", why ? why : "?");
            free(why);
        }
    }
}

/* The built plugins' directory (malloc'd), or NULL. */
static char *plugin_dir(void) {
    const char *env = getenv("WEIR_TEST_PLUGIN_DIR");
    if (env && *env)
        return strdup(env);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) { /* <build>/bin/bench_... -> <build> */
        char *slash = strrchr(exe, '/');
        if (!slash)
            return NULL;
        *slash = '\0';
    }
    size_t size = strlen(exe) + sizeof "/lib/weir/plugins";
    char *dir = malloc(size);
    if (dir)
        snprintf(dir, size, "%s/lib/weir/plugins", exe);
    return dir;
}

/* The mock script: STEPS - 1 responses each asking for one pow call, then text. */
static json_t *script(void) {
    json_t *requests = json_array();
    for (int i = 1; requests && i < STEPS; i++) {
        char id[16], args[32];
        snprintf(id, sizeof id, "call_%d", i);
        snprintf(args, sizeof args, "{\"x\":2,\"y\":%d}", i);
        if (json_array_append_new(requests,
                                  json_pack("{s:[{s:s,s:s,s:s}]}", "tool_calls", "id", id,
                                            "name", "pow", "arguments", args)) != 0) {
            json_decref(requests);
            return NULL;
        }
    }
    if (requests &&
        json_array_append_new(requests, json_pack("{s:s}", "text", "2^1 .. 2^9 = 2 .. 512.")) != 0) {
        json_decref(requests);
        return NULL;
    }
    /* the window probe's answer (a vLLM-style model list) */
    return requests ? json_pack("{s:o,s:[{s:s,s:i}]}", "requests", requests, "models", "id",
                                "bench", "max_model_len", 32768)
                    : NULL;
}

/* The deployment: provider-openai at the mock, tools-ffi with libm's pow. */
static json_t *deployment(const char *plugins, const char *base_url, const char *sessions) {
    char openai[4096], ffi[4096], url[256];
    snprintf(openai, sizeof openai, "%s/weir-provider-openai.so", plugins);
    snprintf(ffi, sizeof ffi, "%s/weir-tools-ffi.so", plugins);
    snprintf(url, sizeof url, "%s/v1", base_url);
    return json_pack("{s:{s:s,s:s,s:i,s:i}, s:{s:s,s:s}, s:[], s:["
                     "{s:s,s:s,s:{s:s,s:s}},"
                     "{s:s,s:s,s:{s:[{s:s,s:s,s:s,s:s}]}}]}",
                     "agent", "provider", "openai", "model", "bench", "max_tokens", 1024,
                     "max_parallel_tool_calls", 4, "session", "dir", sessions, "fsync", "none",
                     "plugin_path", "plugins", "id", "openai", "plugin", openai, "config",
                     "base_url", url, "api_key", "bench", "id", "math", "plugin", ffi, "config",
                     "tools", "library", "libm.so.6", "symbol", "pow", "prototype",
                     "double pow(double x, double y)", "description", "x raised to the power y");
}

/* One turn through the agent API; 0 or 2 (message on stderr). */
static int run_session(weir_host *host, counts *c) {
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.on_event = on_event;
    opts.user_data = c;
    weir_agent *agent = NULL;
    weir_error err = {0};
    if (weir_agent_open(host, &opts, &agent, &err) != WEIR_OK ||
        weir_agent_send_text(agent, "What are the powers of two up to 2^9?", WEIR_SEND_FOLLOWUP,
                             &err) != WEIR_OK ||
        weir_agent_run_until_idle(agent, &err) != WEIR_OK) {
        fprintf(stderr, "agent: %s\n", err.text);
        weir_agent_close(agent);
        return 2;
    }
    weir_agent_close(agent);
    return 0;
}

int main(void) {
    char *plugins = plugin_dir();
    char *sessions = wt_tmpdir("bench-session");
    json_t *s = script();
    char *text = s ? json_dumps(s, JSON_COMPACT) : NULL;
    json_decref(s);
    mock_llm *mock = NULL;
    if (!plugins || !sessions || !text || mock_llm_start(text, &mock)) {
        fprintf(stderr, "bench_session_connections: setup failed\n");
        free(text);
        free(plugins);
        if (sessions)
            wt_rmtree(sessions);
        free(sessions);
        return 2;
    }
    free(text);
    char *base = mock_llm_base_url(mock);
    json_t *config = base ? deployment(plugins, base, sessions) : NULL;
    free(base);
    free(plugins);
    weir_host *host = NULL;
    weir_error err = {0};
    counts c = {0, 0, ""};
    int rc = 2;
    if (!config)
        fprintf(stderr, "bench_session_connections: out of memory\n");
    else if (weir_host_create(config, &host, &err) != WEIR_OK)
        fprintf(stderr, "weir_host_create: %s\n", err.text);
    else
        rc = run_session(host, &c);
    weir_host_destroy(host);
    json_decref(config);
    long accepted = mock_llm_connections(mock);
    long requests = mock_llm_requests(mock);
    /* the probe: request 0, on a connection of its own */
    char *first = mock_llm_request_path(mock, 0);
    long probes = first && strcmp(first, "/v1/models") == 0;
    free(first);
    accepted -= probes;
    requests -= probes;
    mock_llm_stop(mock);
    wt_rmtree(sessions);
    free(sessions);
    if (rc)
        return rc;
    printf("session_steps=%d tcp_connects=%ld ratio=%ld/1 requests=%ld tool_results=%d "
           "turn_end=%s window_probe=%ld\n",
           c.steps, accepted, accepted, requests, c.results, c.end, probes);
    return c.steps != STEPS || c.results != STEPS - 1 || strcmp(c.end, "completed") != 0 ||
                   accepted > 1 || probes != 1 || requests != STEPS
               ? 1
               : 0;
}
