/*
 * tests/unit/test_compaction_server.c - compaction-basic's `server`
 * strategy against the mock LLM (tests/support/mock_llm.c, loopback):
 * "server" in a chain whose route has no server compaction is a config error
 * naming the field and the row; a failed server compaction falls back to the
 * next strategy, logged; the default chain has no "server" where the route
 * offers none.  Every log is checked by dh_teardown.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "harness_check.h"
#include "mock_llm.h"
#include "testutil.h"

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *out = NULL;
    assert_true(vasprintf(&out, f, ap) >= 0);
    va_end(ap);
    return out;
}

static const char *end_kind(const dh *d, int n) {
    return json_string_value(
        json_object_get(json_object_get(dh_event_data(d, "turn/end", n), "reason"), "kind"));
}

/* A mock whose script is STEPS tool calls then an answer (records of about
 * 1,100 characters: the turn ends above the threshold of a 10,000-token
 * window), then the next turn's answer; the summary aside, and `extra` root
 * members ("" or ",\"compact_fail\":1"). */
#define STEPS 16
static mock_llm *start_mock(const char *extra) {
    json_t *reqs = json_array();
    for (int st = 1; st <= STEPS; st++) {
        char id[32], args[1400];
        snprintf(id, sizeof id, "call_%d", st);
        int n = snprintf(args, sizeof args, "{\"query\":\"record %d", st);
        while (n < 1100)
            n += snprintf(args + n, sizeof args - (size_t)n, "; and again, record %d", st);
        snprintf(args + n, sizeof args - (size_t)n, "\"}");
        json_array_append_new(reqs, json_pack("{s:[{s:s, s:s, s:s}]}", "tool_calls", "id", id,
                                              "name", "lookup", "arguments", args));
    }
    json_array_append_new(reqs, json_pack("{s:s}", "text", "done"));
    json_array_append_new(reqs, json_pack("{s:s}", "text", "went on"));
    json_t *script = json_pack("{s:o, s:{s:s, s:{s:s}}}", "requests", reqs, "aside",
                               "body_contains", "write a checkpoint of the conversation above",
                               "reply", "text", "## Current work\nThe lookups.");
    char *text = json_dumps(script, JSON_COMPACT);
    json_decref(script);
    size_t tl = strlen(text);
    char *full = fmt("%.*s%s}", (int)(tl - 1), text, extra);
    free(text);
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start(full, &m), 0);
    free(full);
    return m;
}

/* Open an agent on provider-openai (`api`) against `m` with compaction
 * config `compact`, and run two turns: gpt-5.1 reasons, so a pressure
 * compaction waits for a turn boundary (docs/compaction.md, "Thinking
 * models"): the second turn's first step compacts. */
static void run_openai(dh *d, mock_llm *m, const char *api, const char *compact) {
    char *base = mock_llm_base_url(m);
    char *rows = fmt("[{\"id\":\"p\",\"plugin\":\"provider-openai\",\"config\":{"
                     "\"base_url\":\"%s/v1\",\"api_key\":\"k\",\"probe_windows\":false,"
                     "\"api\":\"%s\",\"models\":{\"gpt-5.1\":{\"context_window\":10000,"
                     "\"max_output\":500}}}},"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":%s},"
                     "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
                     "[{\"name\":\"lookup\"}]}}]",
                     base, api, compact);
    free(base);
    dh_setup(d, rows, "{\"provider\":\"p\",\"model\":\"gpt-5.1\",\"max_tokens\":500}");
    free(rows);
    dh_open(d, "server");
    dh_send(d, "Look up the records, one per step.", WEIR_SEND_FOLLOWUP);
    dh_run(d);
    dh_send(d, "Go on.", WEIR_SEND_FOLLOWUP);
    dh_run(d);
}

/* "server" on a Chat Completions row: each compaction fails with the config
 * error (the field, the row, the model), nothing is replaced, and the turn
 * goes on. */
static void server_on_a_chat_completions_row_is_a_config_error(void **state) {
    (void)state;
    mock_llm *m = start_mock("");
    dh d;
    run_openai(&d, m, "chat", "{\"strategies\":[\"server\",\"summary\"]}");
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_string_equal(end_kind(&d, 1), "completed");
    int ends = dh_count(&d, "compaction/end");
    assert_true(ends >= 1);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_false(json_is_true(json_object_get(end, "ok")));
    assert_string_equal(json_string_value(json_object_get(end, "error")),
                        "config.strategies[0]: \"server\": provider row \"p\" (model \"gpt-5.1\") "
                        "has no server compaction (its model_info reports no "
                        "\"server_compaction\"; provider-openai rows with api \"responses\" have "
                        "one)");
    assert_string_equal(json_string_value(json_object_get(end, "strategy")), "none");
    assert_int_equal(dh_count(&d, "compaction/summary"), 0); /* the chain stopped there */
    assert_int_equal(dh_count(&d, "compaction/fallback"), 0);
    assert_int_equal(mock_llm_rejections(m), 0);
    dh_teardown(&d);
    mock_llm_stop(m);
}

/* The default chain on a Chat Completions row has no "server": it
 * summarizes, with no error. */
static void the_default_chain_has_server_only_where_the_route_offers_it(void **state) {
    (void)state;
    mock_llm *m = start_mock("");
    dh d;
    run_openai(&d, m, "chat", "{}");
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_true(dh_count(&d, "compaction/end") >= 1);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_true(json_is_true(json_object_get(end, "ok")));
    json_t *chain = json_pack("[s, s]", "summary", "prune");
    assert_true(json_equal(json_object_get(end, "strategies"), chain));
    json_decref(chain);
    dh_teardown(&d);
    mock_llm_stop(m);
}

/* POST /v1/responses/compact answers 500: the compaction logs
 * compaction/fallback {strategy:"server", error, next:"summary"} and the
 * summary compacts; nothing of the failed one is in the log's surface. */
static void a_failed_server_compaction_falls_back_to_the_summary(void **state) {
    (void)state;
    mock_llm *m = start_mock(",\"compact_fail\":1");
    dh d;
    run_openai(&d, m, "responses", "{\"strategies\":[\"server\",\"summary\",\"prune\"]}");
    assert_string_equal(end_kind(&d, 0), "completed");
    assert_string_equal(end_kind(&d, 1), "completed");
    assert_true(dh_count(&d, "compaction/end") >= 1);
    assert_int_equal(dh_count(&d, "compaction/fallback"), 1);
    const json_t *fb = dh_event_data(&d, "compaction/fallback", 0);
    const json_t *end = dh_event_data(&d, "compaction/end", 0);
    assert_string_equal(json_string_value(json_object_get(fb, "strategy")), "server");
    assert_string_equal(json_string_value(json_object_get(fb, "next")), "summary");
    const char *why = json_string_value(json_object_get(fb, "error"));
    if (!why || !strstr(why, "the server compaction failed: SERVER: The server had an error"))
        fail_msg("fallback error: %s", why ? why : "(none)");
    assert_string_equal(json_string_value(json_object_get(fb, "compaction_id")),
                        json_string_value(json_object_get(end, "compaction_id")));
    assert_true(json_is_true(json_object_get(end, "ok")));
    const char *used = json_string_value(json_object_get(end, "strategy"));
    assert_true(strncmp(used, "summary", 7) == 0);
    json_t *chain = json_pack("[s, s, s]", "server", "summary", "prune");
    assert_true(json_equal(json_object_get(end, "strategies"), chain));
    json_decref(chain);
    assert_int_equal(mock_llm_rejections(m), 0);
    dh_teardown(&d);
    mock_llm_stop(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(server_on_a_chat_completions_row_is_a_config_error),
        cmocka_unit_test(the_default_chain_has_server_only_where_the_route_offers_it),
        cmocka_unit_test(a_failed_server_compaction_falls_back_to_the_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
