/*
 * tests/unit/test_otlp.c - OpenTelemetry GenAI spans (docs/telemetry.md):
 * the span builder over a fixture log (tests/data/otlp/s1.jsonl: two
 * turns, a tool call, a rate-limited attempt the retry plugin retried),
 * the usage mapping, content capture, span events, the telemetry settings
 * (config over OTEL_* variables), the config checks and the exporter's
 * bounded queue against a collector that never answers.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "otlp.h"
#include "otlp_export.h"
#include "weir/host.h"

static json_t *fixture_events(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/otlp/s1.jsonl", getenv("WEIR_TEST_DATA_DIR"));
    json_t *events = NULL;
    weir_error err;
    assert_int_equal(weir_log_events(path, &events, &err), WEIR_OK);
    return events;
}

/* All spans of `events` under session `sid` and deployment `config`. */
static json_t *build(const json_t *events, const char *sid, const json_t *config) {
    weir_trace *t = NULL;
    weir_error err;
    assert_int_equal(weir_trace_create(sid, config, &t, &err), WEIR_OK);
    json_t *all = json_array();
    size_t i;
    json_t *ev, *spans;
    json_array_foreach(events, i, ev) {
        assert_int_equal(weir_trace_add(t, ev, &spans, &err), WEIR_OK);
        json_array_extend(all, spans);
        json_decref(spans);
    }
    assert_int_equal(weir_trace_finish(t, &spans, &err), WEIR_OK);
    json_array_extend(all, spans);
    json_decref(spans);
    weir_trace_destroy(t);
    return all;
}

static const json_t *attr(const json_t *span, const char *key) {
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(span, "attributes"), i, a) {
        if (strcmp(json_string_value(json_object_get(a, "key")), key) == 0)
            return json_object_get(a, "value");
    }
    return NULL;
}

static const char *astr(const json_t *span, const char *key) {
    return json_string_value(json_object_get(attr(span, key), "stringValue"));
}

static const char *aint(const json_t *span, const char *key) {
    return json_string_value(json_object_get(attr(span, key), "intValue"));
}

static size_t count_op(const json_t *spans, const char *op) {
    size_t n = 0, i;
    const json_t *s;
    json_array_foreach(spans, i, s) n +=
        astr(s, "gen_ai.operation.name") && strcmp(astr(s, "gen_ai.operation.name"), op) == 0;
    return n;
}

static const json_t *find(const json_t *spans, const char *name, size_t nth) {
    size_t i;
    const json_t *s;
    json_array_foreach(spans, i, s) {
        if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0 && nth-- == 0)
            return s;
    }
    return NULL;
}

static void test_fixture_spans(void **state) {
    (void)state;
    json_t *events = fixture_events();
    json_t *spans = build(events, "s1", NULL);
    assert_int_equal(json_array_size(spans), 7);
    assert_int_equal(count_op(spans, "invoke_agent"), 2);
    assert_int_equal(count_op(spans, "chat"), 4);
    assert_int_equal(count_op(spans, "execute_tool"), 1);
    const json_t *turn1 = find(spans, "invoke_agent weir", 0);
    const json_t *turn2 = find(spans, "invoke_agent weir", 1);
    assert_non_null(turn1);
    assert_non_null(turn2);
    assert_string_equal(aint(turn1, "weir.turn"), "1");
    assert_int_equal(json_integer_value(json_object_get(turn1, "kind")), 1);
    assert_null(json_object_get(turn1, "parentSpanId"));
    assert_string_not_equal(json_string_value(json_object_get(turn1, "traceId")),
                            json_string_value(json_object_get(turn2, "traceId")));
    /* turn 1's usage: the two answered attempts (10 + 10 in, 5 + 5 out) */
    assert_string_equal(aint(turn1, "gen_ai.usage.input_tokens"), "20");
    assert_string_equal(aint(turn1, "gen_ai.usage.output_tokens"), "10");
    /* the retry plugin's decision, with its provenance, as a span event */
    const json_t *ev = json_array_get(json_object_get(turn1, "events"), 0);
    assert_string_equal(json_string_value(json_object_get(ev, "name")), "weir.hook.decision");
    assert_string_equal(astr(ev, "weir.plugin"), "retry@0.2.0");
    assert_string_equal(astr(ev, "weir.decision"), "retry");
    assert_string_equal(astr(ev, "weir.hook"), "agent/request-error");
    /* every chat and tool span is under its turn's invoke_agent */
    size_t i;
    const json_t *s;
    int failed = 0;
    json_array_foreach(spans, i, s) {
        if (s == turn1 || s == turn2)
            continue;
        const json_t *parent = strcmp(aint(s, "weir.turn"), "1") == 0 ? turn1 : turn2;
        assert_string_equal(json_string_value(json_object_get(s, "parentSpanId")),
                            json_string_value(json_object_get(parent, "spanId")));
        assert_string_equal(json_string_value(json_object_get(s, "traceId")),
                            json_string_value(json_object_get(parent, "traceId")));
        assert_string_equal(astr(s, "gen_ai.conversation.id"), "s1");
        if (json_integer_value(json_object_get(json_object_get(s, "status"), "code")) == 2) {
            failed++;
            assert_string_equal(astr(s, "error.type"), "RATE_LIMIT");
            assert_string_equal(aint(s, "weir.attempt"), "1");
            assert_int_equal(json_integer_value(json_object_get(s, "kind")), 3);
        }
    }
    assert_int_equal(failed, 1);
    /* the retried attempt is attempt 2 of its step */
    const json_t *retried = find(spans, "chat test-model", 2);
    assert_string_equal(aint(retried, "weir.attempt"), "2");
    const json_t *tool = find(spans, "execute_tool pow", 0);
    assert_non_null(tool);
    assert_string_equal(astr(tool, "gen_ai.tool.call.id"), "call_1");
    assert_string_equal(astr(tool, "gen_ai.tool.type"), "function");
    /* without a deployment the row id names the provider */
    assert_string_equal(astr(find(spans, "chat test-model", 0), "gen_ai.provider.name"), "llm");
    /* no content without the opt-in */
    char *text = json_dumps(spans, JSON_COMPACT);
    assert_null(strstr(text, "gen_ai.output.messages"));
    assert_null(strstr(text, "1024"));
    free(text);
    json_decref(spans);
    json_decref(events);
}

/* The same events give the same spans; another session other ids. */
static void test_deterministic_ids(void **state) {
    (void)state;
    json_t *events = fixture_events();
    json_t *a = build(events, "s1", NULL), *b = build(events, "s1", NULL);
    json_t *c = build(events, "other", NULL);
    assert_true(json_equal(a, b));
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *x = json_array_get(a, i), *y = json_array_get(c, i);
        assert_string_not_equal(json_string_value(json_object_get(x, "spanId")),
                                json_string_value(json_object_get(y, "spanId")));
        assert_string_not_equal(json_string_value(json_object_get(x, "traceId")),
                                json_string_value(json_object_get(y, "traceId")));
    }
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(events);
}

static void test_provider_and_content(void **state) {
    (void)state;
    json_t *events = fixture_events();
    json_t *config =
        json_pack("{s:{s:b, s:s}, s:[{s:s, s:s, s:{s:s}}]}", "telemetry", "capture_content", 1,
                  "service_name", "svc", "plugins", "id", "llm", "plugin", "provider-openai",
                  "config", "base_url", "https://api.deepseek.com/v1");
    json_t *spans = build(events, "s1", config);
    const json_t *chat = find(spans, "chat test-model", 0);
    assert_string_equal(astr(chat, "gen_ai.provider.name"), "deepseek");
    const json_t *turn1 = find(spans, "invoke_agent svc", 0);
    assert_non_null(turn1);
    assert_string_equal(astr(turn1, "gen_ai.agent.name"), "svc");
    json_t *in = json_loads(astr(turn1, "gen_ai.input.messages"), 0, NULL);
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_array_get(in, 0), "parts"), 0), "content")),
        "What is 2 to the 10th?");
    json_decref(in);
    const char *out = astr(find(spans, "chat test-model", 2), "gen_ai.output.messages");
    assert_non_null(out);
    assert_non_null(strstr(out, "It is 1024."));
    assert_non_null(strstr(out, "\"finish_reason\":\"stop\""));
    const json_t *tool = find(spans, "execute_tool pow", 0);
    assert_string_equal(astr(tool, "gen_ai.tool.call.arguments"), "{\"x\":2,\"y\":10}");
    assert_non_null(strstr(astr(tool, "gen_ai.tool.call.result"), "1024"));
    json_t *req = NULL;
    weir_trace *t = NULL;
    weir_error err;
    assert_int_equal(weir_trace_create("s1", config, &t, &err), WEIR_OK);
    req = weir_trace_request(t, spans);
    weir_trace_destroy(t);
    const json_t *rs = json_array_get(json_object_get(req, "resourceSpans"), 0);
    assert_string_equal(astr(json_object_get(rs, "resource"), "service.name"), "svc");
    assert_int_equal(json_array_size(json_object_get(
                         json_array_get(json_object_get(rs, "scopeSpans"), 0), "spans")),
                     json_array_size(spans));
    json_decref(req);
    json_decref(spans);
    json_decref(config);
    json_decref(events);
}

/* Usage in the conventions' sense: input counts cached and written tokens. */
static void test_usage_and_compaction(void **state) {
    (void)state;
    json_t *events = json_pack(
        "[{s:i, s:I, s:s, s:{s:i}},"
        " {s:i, s:I, s:s, s:{s:s, s:i, s:i}},"
        " {s:i, s:I, s:s, s:{s:i, s:i, s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i}, s:[]}},"
        " {s:i, s:I, s:s, s:{s:i, s:i, s:{s:s, s:[]}}, s:{s:s, s:i, s:i}, s:[i, i]}]",
        "seq", 0, "time", (json_int_t)1000, "type", "turn/start", "data", "turn", 3, "seq", 1,
        "time", (json_int_t)1001, "type", "compaction/start", "data", "strategy", "summary",
        "tokens_before", 900, "threshold", 800, "seq", 2, "time", (json_int_t)1050, "type",
        "assistant/message", "data", "turn", 3, "step", 1, "provider", "a", "model", "claude-x",
        "usage", "input_tokens", 100, "cache_read_tokens", 50, "cache_write_tokens", 25,
        "output_tokens", 10, "reasoning_tokens", 4, "stream", "seq", 3, "time", (json_int_t)1060,
        "type", "user/message", "data", "turn", 3, "step", 1, "message", "role", "user", "content",
        "surface_op", "op", "replace", "start_seq", 0, "end_seq", 1, "source_seqs", 0, 2);
    assert_non_null(events);
    json_t *config =
        json_pack("{s:[{s:s, s:s}]}", "plugins", "id", "a", "plugin", "provider-anthropic");
    json_t *spans = build(events, "u", config);
    assert_int_equal(json_array_size(spans), 2); /* the chat, the open turn */
    const json_t *chat = find(spans, "chat claude-x", 0);
    assert_string_equal(astr(chat, "gen_ai.provider.name"), "anthropic");
    assert_string_equal(aint(chat, "gen_ai.usage.input_tokens"), "175");
    assert_string_equal(aint(chat, "gen_ai.usage.cache_read.input_tokens"), "50");
    assert_string_equal(aint(chat, "gen_ai.usage.cache_creation.input_tokens"), "25");
    assert_string_equal(aint(chat, "gen_ai.usage.output_tokens"), "10");
    assert_string_equal(aint(chat, "gen_ai.usage.reasoning.output_tokens"), "4");
    assert_string_equal(json_string_value(json_object_get(chat, "startTimeUnixNano")),
                        "1001000000");
    const json_t *turn = find(spans, "invoke_agent weir", 0);
    assert_true(json_is_true(json_object_get(attr(turn, "weir.turn.open"), "boolValue")));
    assert_string_equal(json_string_value(json_object_get(turn, "endTimeUnixNano")), "1060000000");
    const json_t *evs = json_object_get(turn, "events");
    assert_int_equal(json_array_size(evs), 2);
    const json_t *start = json_array_get(evs, 0), *replace = json_array_get(evs, 1);
    assert_string_equal(json_string_value(json_object_get(start, "name")), "weir.compaction");
    assert_string_equal(astr(start, "weir.compaction.strategy"), "summary");
    assert_string_equal(aint(start, "weir.compaction.tokens_before"), "900");
    assert_string_equal(json_string_value(json_object_get(replace, "name")), "weir.compaction");
    assert_string_equal(aint(replace, "weir.compaction.replaced"), "2");
    assert_string_equal(aint(replace, "weir.compaction.end_seq"), "1");
    json_decref(spans);
    json_decref(config);
    json_decref(events);
}

/* A compaction's summary is content: in the span event only with the opt-in. */
static void test_compaction_summary_is_content(void **state) {
    (void)state;
    json_t *events =
        json_pack("[{s:i, s:I, s:s, s:{s:i}}, {s:i, s:I, s:s, s:{s:s, s:s, s:i}}]", "seq", 0,
                  "time", (json_int_t)1000, "type", "turn/start", "data", "turn", 1, "seq", 1,
                  "time", (json_int_t)1001, "type", "compaction/summary", "data", "compaction_id",
                  "c1", "summary", "the private summary", "summary_tokens", 12);
    for (int content = 0; content < 2; content++) {
        json_t *config = json_pack("{s:{s:b}}", "telemetry", "capture_content", content);
        json_t *spans = build(events, "c", config);
        const json_t *ev = json_array_get(json_object_get(json_array_get(spans, 0), "events"), 0);
        assert_string_equal(astr(ev, "weir.compaction.compaction_id"), "c1");
        assert_string_equal(aint(ev, "weir.compaction.summary_tokens"), "12");
        if (content)
            assert_string_equal(astr(ev, "weir.compaction.summary"), "the private summary");
        else
            assert_null(attr(ev, "weir.compaction.summary"));
        json_decref(spans);
        json_decref(config);
    }
    json_decref(events);
}

static void test_alloc_failure_loop(void **state) {
    (void)state;
    json_t *events = fixture_events();
    json_t *config = json_pack("{s:{s:b}}", "telemetry", "capture_content", 1);
    json_t *want = build(events, "s1", config);
    for (long n = 1;; n++) {
        weir_trace *t = NULL;
        weir_error err;
        json_t *all = json_array();
        weir__alloc_fail_after(n);
        int rc = weir_trace_create("s1", config, &t, &err);
        size_t i;
        json_t *ev, *spans;
        json_array_foreach(events, i, ev) {
            if (rc != WEIR_OK)
                break;
            if ((rc = weir_trace_add(t, ev, &spans, &err)) == WEIR_OK) {
                json_array_extend(all, spans);
                json_decref(spans);
            }
        }
        if (rc == WEIR_OK && (rc = weir_trace_finish(t, &spans, &err)) == WEIR_OK) {
            json_array_extend(all, spans);
            json_decref(spans);
        }
        weir__alloc_fail_after(-1);
        weir_trace_destroy(t);
        if (rc == WEIR_OK) { /* a failure is reported, never a span lost */
            if (!json_equal(all, want))
                fail_msg("allocation %ld failed and the spans differ", n);
            json_decref(all);
            break;
        } else {
            assert_int_equal(rc, WEIR_E_NOMEM);
        }
        json_decref(all);
        assert_true(n < 100000);
    }
    json_decref(want);
    json_decref(config);
    json_decref(events);
}

static void clear_env(void) {
    unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    unsetenv("OTEL_EXPORTER_OTLP_HEADERS");
    unsetenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS");
    unsetenv("OTEL_SERVICE_NAME");
}

static void test_settings(void **state) {
    (void)state;
    clear_env();
    weir__otlp_settings s;
    weir_error err;
    assert_int_equal(weir__otlp_settings_resolve(NULL, &s, &err), WEIR_OK);
    assert_false(s.enabled);
    assert_string_equal(s.url, "http://localhost:4318/v1/traces");
    assert_string_equal(s.service_name, "weir");
    assert_int_equal(s.max_queue, WEIR__OTLP_MAX_QUEUE);
    weir__otlp_settings_free(&s);
    /* the general variable gets /v1/traces; the traces one is used as is */
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/", 1);
    setenv("OTEL_EXPORTER_OTLP_HEADERS", "a=1, b = two ,c=x=y", 1);
    setenv("OTEL_SERVICE_NAME", "env-svc", 1);
    assert_int_equal(weir__otlp_settings_resolve(NULL, &s, &err), WEIR_OK);
    assert_string_equal(s.url, "https://collector:4318/v1/traces");
    assert_string_equal(weir__json_str(s.headers, "b", NULL), "two");
    assert_string_equal(weir__json_str(s.headers, "c", NULL), "x=y");
    assert_string_equal(s.service_name, "env-svc");
    weir__otlp_settings_free(&s);
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9/custom", 1);
    assert_int_equal(weir__otlp_settings_resolve(NULL, &s, &err), WEIR_OK);
    assert_string_equal(s.url, "http://traces:9/custom");
    weir__otlp_settings_free(&s);
    /* the config wins over the variables */
    json_t *config =
        json_pack("{s:{s:b, s:s, s:s, s:{s:s}, s:i}}", "telemetry", "enabled", 1, "endpoint",
                  "http://cfg:1", "service_name", "cfg-svc", "headers", "a", "9", "max_queue", 7);
    assert_int_equal(weir__otlp_settings_resolve(config, &s, &err), WEIR_OK);
    assert_true(s.enabled);
    assert_string_equal(s.url, "http://cfg:1/v1/traces");
    assert_string_equal(s.service_name, "cfg-svc");
    assert_string_equal(weir__json_str(s.headers, "a", NULL), "9");
    assert_string_equal(weir__json_str(s.headers, "b", NULL), "two");
    assert_int_equal(s.max_queue, 7);
    weir__otlp_settings_free(&s);
    json_decref(config);
    /* an embedder's uncomposed config is checked too */
    config = json_pack("{s:{s:i}}", "telemetry", "batch_ms", 0);
    assert_int_equal(weir__otlp_settings_resolve(config, &s, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "telemetry.batch_ms"));
    json_decref(config);
    /* a variable that is not valid names itself */
    clear_env();
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", 1);
    assert_int_equal(weir__otlp_settings_resolve(NULL, &s, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "OTEL_EXPORTER_OTLP_ENDPOINT"));
    clear_env();
    setenv("OTEL_EXPORTER_OTLP_HEADERS", "novalue", 1);
    assert_int_equal(weir__otlp_settings_resolve(NULL, &s, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "OTEL_EXPORTER_OTLP_HEADERS"));
    clear_env();
}

static void expect_config_error(const char *text, const char *where) {
    json_t *config = json_loads(text, 0, NULL);
    assert_non_null(config);
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__config_validate(config, "t.json", &err), WEIR_E_CONFIG);
    if (!strstr(err.text, where))
        fail_msg("'%s' does not name %s", err.text, where);
    assert_null(strstr(err.text, "hush")); /* a header value is never shown */
    json_decref(config);
}

static void test_config_checks(void **state) {
    (void)state;
    expect_config_error("{\"telemetry\": {\"endpoint\": \"collector:4318\"}}",
                        "$.telemetry.endpoint: expected an http:// or https:// URL");
    expect_config_error("{\"telemetry\": {\"endpoint\": \"ftp://x\"}}", "$.telemetry.endpoint");
    expect_config_error("{\"telemetry\": {\"endpont\": \"http://x\"}}",
                        "did you mean \"endpoint\"");
    expect_config_error("{\"telemetry\": {\"enabled\": \"yes\"}}", "$.telemetry.enabled");
    expect_config_error("{\"telemetry\": {\"max_queue\": 0}}", "$.telemetry.max_queue");
    expect_config_error("{\"telemetry\": {\"headers\": {\"a\": 1}}}", "$.telemetry.headers.a");
    expect_config_error("{\"telemetry\": {\"headers\": {\"a\": \"hush\\r\\nX: y\"}}}",
                        "$.telemetry.headers.a");
    expect_config_error("{\"telemetry\": []}", "$.telemetry");
    json_t *ok = json_loads("{\"telemetry\": {\"enabled\": true, \"endpoint\": "
                            "\"https://otel.example:4318\", \"headers\": {\"a\": \"b\"}, "
                            "\"capture_content\": false, \"max_queue\": 10, \"batch_ms\": 5, "
                            "\"timeout_ms\": 100, \"service_name\": \"x\"}}",
                            0, NULL);
    weir_error err;
    assert_int_equal(weir__config_validate(ok, "t.json", &err), WEIR_OK);
    json_decref(ok);
}

/* A socket that accepts and never answers; returns its port. */
static int blackhole(int *fd) {
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(*fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(*fd, 16), 0);
    assert_int_equal(getsockname(*fd, (struct sockaddr *)&a, &len), 0);
    return ntohs(a.sin_port);
}

static char warned[4096];
static void on_warn(const char *line, void *ud) {
    (void)ud;
    strncat(warned, line, sizeof warned - strlen(warned) - 1);
}

/* A full queue drops and counts; pushing never waits on the collector; the
 * drops are reported without the URL's credentials. */
static void test_exporter_bounded(void **state) {
    (void)state;
    clear_env();
    int fd;
    int port = blackhole(&fd);
    char url[64];
    snprintf(url, sizeof url, "http://user:sekret@127.0.0.1:%d", port);
    warned[0] = '\0';
    weir_set_warn_handler(on_warn, NULL);
    json_t *config =
        json_pack("{s:{s:b, s:s, s:i, s:i, s:i}}", "telemetry", "enabled", 1, "endpoint", url,
                  "max_queue", 3, "batch_ms", 10000, "timeout_ms", 200);
    weir__otlp_settings s;
    weir_error err;
    assert_int_equal(weir__otlp_settings_resolve(config, &s, &err), WEIR_OK);
    weir__otlp_exporter *x = NULL;
    assert_int_equal(weir__otlp_exporter_create(&s, &x, &err), WEIR_OK);
    assert_null(s.url); /* taken */
    uint64_t t0 = weir__mono_us();
    for (int i = 0; i < 5; i++) {
        json_t *spans = json_pack("[{s:s}, {s:s}]", "name", "a", "name", "b");
        weir__otlp_exporter_push(x, spans);
        assert_int_equal(json_array_size(spans), 0); /* moved */
        json_decref(spans);
    }
    uint64_t took = weir__mono_us() - t0;
    uint64_t queued, sent, dropped;
    weir__otlp_exporter_counts(x, &queued, &sent, &dropped);
    assert_int_equal(queued, 3);
    assert_int_equal(dropped, 7);
    assert_int_equal(sent, 0);
    assert_true(took < 100000); /* 10 pushes, never a network wait */
    t0 = weir__mono_us();
    weir__otlp_exporter_destroy(x); /* one last try, bounded by timeout_ms */
    assert_true(weir__mono_us() - t0 < 5000000);
    weir_set_warn_handler(NULL, NULL);
    if (!strstr(warned, "span(s) dropped") || !strstr(warned, "http://***@127.0.0.1:") ||
        strstr(warned, "sekret"))
        fail_msg("the drop report: %s", warned);
    json_decref(config);
    close(fd);
}

/* Closing after a failed export drops what is queued without a second wait
 * on the collector. */
static void test_exporter_close_after_failure(void **state) {
    (void)state;
    clear_env();
    int fd;
    int port = blackhole(&fd);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    json_t *config = json_pack("{s:{s:b, s:s, s:i, s:i}}", "telemetry", "enabled", 1, "endpoint",
                               url, "batch_ms", 600000, "timeout_ms", 100);
    weir__otlp_settings s;
    weir_error err;
    assert_int_equal(weir__otlp_settings_resolve(config, &s, &err), WEIR_OK);
    weir__otlp_exporter *x = NULL;
    assert_int_equal(weir__otlp_exporter_create(&s, &x, &err), WEIR_OK);
    warned[0] = '\0';
    weir_set_warn_handler(on_warn, NULL);
    /* a full batch (512) wakes the thread: that export fails */
    json_t *spans = json_array();
    for (int i = 0; i < 512; i++)
        json_array_append_new(spans, json_pack("{s:i}", "n", i));
    weir__otlp_exporter_push(x, spans);
    json_decref(spans);
    uint64_t dropped = 0;
    for (int i = 0; i < 500 && dropped < 512; i++) {
        usleep(20000);
        weir__otlp_exporter_counts(x, NULL, NULL, &dropped);
    }
    assert_int_equal(dropped, 512);
    spans = json_pack("[{s:s}]", "name", "late");
    weir__otlp_exporter_push(x, spans);
    json_decref(spans);
    weir__otlp_exporter_destroy(x);
    weir_set_warn_handler(NULL, NULL);
    if (!strstr(warned, "1 span(s) dropped (513 so far)") ||
        !strstr(warned, "closing after a failed export"))
        fail_msg("the close: %s", warned);
    json_decref(config);
    close(fd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_spans),
        cmocka_unit_test(test_deterministic_ids),
        cmocka_unit_test(test_provider_and_content),
        cmocka_unit_test(test_usage_and_compaction),
        cmocka_unit_test(test_compaction_summary_is_content),
        cmocka_unit_test(test_alloc_failure_loop),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_config_checks),
        cmocka_unit_test(test_exporter_bounded),
        cmocka_unit_test(test_exporter_close_after_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
