/*
 * tests/unit/test_compaction_long.c - compaction-basic over long sessions
 * (issue #35, Done-when): 60 steps against the mock LLM's Anthropic Messages
 * and OpenAI Responses APIs (tests/support/mock_llm.c, loopback), compacted
 * under pressure with the default chains (Anthropic's on the server: the
 * compact_20260112 edit; OpenAI's a summary, since /v1/responses/compact is
 * dearer: bench_strategies) and with OpenAI's server-first chain, then a
 * recall of a shadowed tool result.  Apart from test_compaction so that the
 * two run side by side within their timeouts.  Every log is checked by
 * dh_teardown
 * (weir_log_check, replay, derive == request).
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

static void run_text(dh *d, const char *text) {
    dh_send(d, text, WEIR_SEND_FOLLOWUP);
    dh_run(d);
}

static const char *first_text(const json_t *messages, size_t i) {
    return json_string_value(json_object_get(
        json_array_get(json_object_get(json_array_get(messages, i), "content"), 0), "text"));
}

/* The text of the first tool_result block of a tool/result envelope. */
static const char *result_text(const json_t *ev) {
    const json_t *block = json_array_get(
        json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content"), 0);
    return json_string_value(
        json_object_get(json_array_get(json_object_get(block, "content"), 0), "text"));
}

/* The tool/result envelope of call `id` (the original, not a replace). */
static const json_t *result_of(const dh *d, const char *id) {
    size_t i;
    const json_t *e;
    json_array_foreach(d->events, i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        const json_t *block = json_array_get(
            json_object_get(json_object_get(json_object_get(e, "data"), "message"), "content"),
            0);
        const char *call = json_string_value(json_object_get(block, "call_id"));
        bool original = !json_is_object(json_object_get(e, "surface_op")); /* not a replace */
        if (type && !strcmp(type, "tool/result") && original && call && !strcmp(call, id))
            return e;
    }
    return NULL;
}

#define LONG_STEPS 20 /* steps a turn: 19 tool calls and an answer */
#define LONG_TURNS 3

/* Issue #35, Done-when: a 60-step session against the mock's Anthropic
 * Messages or OpenAI Responses API compacts at least twice under pressure
 * with the default chain (Anthropic's compacts on the server, OpenAI's
 * summarizes), or, `server`, OpenAI's server-first chain, and no error; then the model recalls a shadowed tool result
 * (the text is the original's) and an id that does not exist (a tool error,
 * the turn goes on). */
static void long_session(const char *provider, bool server) {
    bool openai = !strcmp(provider, "openai");
    /* Anthropic compacts on its server only from 50,000 input tokens on (the
     * compact_20260112 trigger's minimum), so its session runs in a larger
     * window with larger records, and keeps a short tail (so that what it
     * compacts reaches the minimum, twice in 60 steps) */
    const char *model = openai ? "gpt-5.1" : "claude-sonnet-4-6";
    int record_chars = openai ? 1100 : 3800, window = openai ? 12000 : 66000;
    json_t *reqs = json_array();
    for (int t = 1; t <= LONG_TURNS; t++)
        for (int st = 1; st <= LONG_STEPS; st++) {
            if (st == LONG_STEPS) {
                json_array_append_new(reqs, json_pack("{s:s}", "text", "part done"));
                continue;
            }
            char id[32], args[4000];
            snprintf(id, sizeof id, "call_%d_%d", t, st);
            /* about 1,100 characters: a step adds about 550 tokens (the
             * call and its echo), so that a compaction shadows thousands of
             * tokens and the checkpoint (with its recall ids) shrinks them */
            int n = snprintf(args, sizeof args,
                             "{\"query\":\"record %d of part %d: the owner, the last change, the "
                             "open issues and the files it touches, with their sizes and tests",
                             st, t);
            while (n < record_chars)
                n += snprintf(args + n, sizeof args - (size_t)n, "; and again, record %d", st);
            snprintf(args + n, sizeof args - (size_t)n, "\"}");
            json_array_append_new(reqs, json_pack("{s:[{s:s, s:s, s:s}]}", "tool_calls", "id", id,
                                                  "name", "lookup", "arguments", args));
        }
    json_array_append_new(reqs, json_pack("{s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}", "tool_calls",
                                          "id", "r1", "name", "recall", "arguments",
                                          "{\"id\":\"call_1_3\"}", "id", "r2", "name", "recall",
                                          "arguments", "{\"id\":\"seq:999999\"}"));
    json_array_append_new(reqs, json_pack("{s:s}", "text", "recalled"));
    json_t *script = json_pack("{s:o, s:{s:s, s:{s:s}}}", "requests", reqs, "aside",
                               "body_contains", "write a checkpoint of the conversation above",
                               "reply", "text",
                               "## Primary request and intent\nLook up the records.\n"
                               "## Current work\nThe lookups.");
    char *text = json_dumps(script, JSON_COMPACT);
    json_decref(script);
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start(text, &m), 0);
    free(text);
    char *base = mock_llm_base_url(m);
    char *rows = fmt("[{\"id\":\"p\",\"plugin\":\"provider-%s\",\"config\":{"
                     "\"base_url\":\"%s%s\",\"api_key\":\"k\"%s,"
                     "\"models\":{\"%s\":{\"context_window\":%d,\"max_output\":500}}}},"
                     "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":{%s}},"
                     "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
                     "[{\"name\":\"lookup\"}]}}]",
                     provider, base, openai ? "/v1" : "",
                     openai ? ",\"probe_windows\":false,\"api\":\"responses\"" : "",
                     model, window,
                     !openai  ? "\"keep_recent_tokens\":1000"
                     : server ? "\"strategies\":[\"server\",\"summary\",\"prune\"]"
                              : "");
    free(base);
    char *agent = fmt("{\"provider\":\"p\",\"model\":\"%s\",\"max_tokens\":500}", model);
    dh d;
    dh_setup(&d, rows, agent);
    free(rows);
    free(agent);
    dh_open(&d, "long");
    for (int t = 1; t <= LONG_TURNS; t++) {
        char *ask = fmt("Look up records 1 to %d of part %d, one per step.", LONG_STEPS - 1, t);
        run_text(&d, ask);
        free(ask);
        if (strcmp(end_kind(&d, t - 1), "completed") != 0) {
            char *why = json_dumps(dh_event_data(&d, "turn/end", t - 1), JSON_COMPACT);
            fail_msg("%s: turn %d: %s", provider, t, why);
        }
    }
    assert_int_equal(dh_count(&d, "assistant/message"), LONG_STEPS * LONG_TURNS);
    int compactions = dh_count(&d, "compaction/end");
    if (compactions < 2)
        fail_msg("%s: %d compactions in %d steps", provider, compactions, LONG_STEPS * LONG_TURNS);
    for (int i = 0; i < compactions; i++) {
        const json_t *end = dh_event_data(&d, "compaction/end", i);
        if (!json_is_true(json_object_get(end, "ok")))
            fail_msg("compaction %d: %s", i, json_string_value(json_object_get(end, "error")));
        /* the durable record: both compact on the server (OpenAI POST
         * /v1/responses/compact, Anthropic the compact_20260112 edit) */
        const char *used = json_string_value(json_object_get(end, "strategy"));
        const char *want = server ? "server" : "summary";
        if (strncmp(used, want, strlen(want)) != 0)
            fail_msg("%s: compaction %d used %s", provider, i, used);
        json_t *chain = server ? json_pack("[s, s, s]", "server", "summary", "prune")
                               : json_pack("[s, s]", "summary", "prune");
        assert_true(json_equal(json_object_get(end, "strategies"), chain));
        json_decref(chain);
        assert_true(json_integer_value(json_object_get(end, "cache_invalidated_tokens")) > 0);
        assert_true(json_integer_value(json_object_get(end, "tokens_after")) <
                    json_integer_value(json_object_get(end, "tokens_before")));
        assert_true(json_array_size(json_object_get(end, "shadowed")) > 0);
    }
    /* call_1_3's result was shadowed by the first compaction, and its
     * checkpoint lists it */
    const json_t *orig = result_of(&d, "call_1_3");
    assert_non_null(orig);
    const json_t *first = dh_event_data(&d, "compaction/end", 0);
    size_t i;
    const json_t *v;
    bool shadowed = false;
    json_array_foreach(json_object_get(first, "shadowed"), i, v) {
        shadowed = shadowed ||
                   json_integer_value(v) == json_integer_value(json_object_get(orig, "seq"));
    }
    assert_true(shadowed);
    char *listed = fmt("- seq:%lld: tool result of call call_1_3",
                       (long long)json_integer_value(json_object_get(orig, "seq")));
    const json_t *sum = dh_find(&d, "compaction/summary", 0);
    const json_t *cp = NULL;
    json_array_foreach(d.events, i, v) { /* the checkpoint replace cites the summary first */
        if (!cp && json_integer_value(json_array_get(json_object_get(v, "source_seqs"), 0)) ==
                       json_integer_value(json_object_get(sum, "seq")) &&
            json_is_object(json_object_get(v, "surface_op")))
            cp = v;
    }
    assert_non_null(cp);
    json_t *cpm = json_pack("[O]", json_object_get(json_object_get(cp, "data"), "message"));
    assert_non_null(strstr(first_text(cpm, 0), listed));
    json_decref(cpm);
    free(listed);

    /* the recall turn */
    run_text(&d, "What did record 3 of part 1 say, exactly?");
    assert_string_equal(end_kind(&d, LONG_TURNS), "completed");
    const json_t *r1 = result_of(&d, "r1"), *r2 = result_of(&d, "r2");
    assert_non_null(r1);
    assert_non_null(r2);
    assert_string_equal(result_text(r1), result_text(orig));
    assert_non_null(strstr(result_text(orig), "record 3 of part 1"));
    const json_t *b2 = json_array_get(
        json_object_get(json_object_get(json_object_get(r2, "data"), "message"), "content"), 0);
    assert_true(json_is_true(json_object_get(b2, "is_error")));
    assert_non_null(strstr(result_text(r2), "no message or tool result has the id \"seq:999999\""));
    assert_int_equal(dh_count(&d, "compaction/recall"), 1);
    /* each server compaction was one request (OpenAI: POST
     * /v1/responses/compact; Anthropic: context_management's compaction
     * edit), and the requests after the first one send its item or block
     * back as the mock returned it (the mock refuses one it did not issue) */
    long compacts = 0, after = 0, total = mock_llm_requests(m);
    for (long k = 0; k < total; k++) {
        char *path = mock_llm_request_path(m, k), *body = mock_llm_request_body(m, k);
        if (path && body &&
            (openai ? !strcmp(path, "/v1/responses/compact")
                    : strstr(body, "\"type\":\"compact_20260112\"") != NULL))
            compacts++;
        else if (compacts > 0 && body &&
                 strstr(body, openai ? "{\"type\":\"compaction\",\"id\":\"cmp_item_0\","
                                       "\"encrypted_content\":\"encc"
                                     : "{\"type\":\"compaction\",\"content\":\"Summary of the "))
            after++;
        free(path);
        free(body);
    }
    assert_int_equal(compacts, server ? dh_count(&d, "compaction/end") : 0); /* recall's too */
    assert_true(server ? after > 0 : after == 0);
    assert_int_equal(mock_llm_rejections(m), 0);
    assert_int_equal(mock_llm_expect_failures(m), 0);
    dh_teardown(&d);
    mock_llm_stop(m);
}


static void a_60_step_anthropic_session_compacts_and_recalls(void **state) {
    (void)state;
    long_session("anthropic", true); /* the default chain: server first */
}

static void a_60_step_openai_session_compacts_and_recalls(void **state) {
    (void)state;
    long_session("openai", false); /* the default chain: summary, prune */
}

static void a_60_step_openai_session_compacts_on_the_server_and_recalls(void **state) {
    (void)state;
    long_session("openai", true); /* [server, summary, prune] */
}


int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_60_step_anthropic_session_compacts_and_recalls),
        cmocka_unit_test(a_60_step_openai_session_compacts_and_recalls),
        cmocka_unit_test(a_60_step_openai_session_compacts_on_the_server_and_recalls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
