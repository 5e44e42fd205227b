/*
 * tests/unit/test_driver_errors.c - failed attempts, recovery, cancellation
 * and resume (DESIGN §3, §5; reference §7.1, §7.3, §3.7): request-error
 * retry without re-admitting users, cancellation winning over retry,
 * prefix finalization, a torn log tail, and a resumed open turn.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "testutil.h"

static const json_t *data_of(const dh *d, const char *type, int n) {
    const json_t *e = dh_find(d, type, n);
    assert_non_null(e);
    return json_object_get(e, "data");
}

static const json_t *turn_reason(const dh *d, int n) {
    return json_object_get(data_of(d, "turn/end", n), "reason");
}

#define FAIL_THEN_OK                                                                     \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["    \
    "{\"text\":\"partial\",\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\","  \
    "\"retry_after_ms\":5,\"after_chunks\":1}},"                                          \
    "{\"text\":\"recovered\",\"expect\":{\"messages_count\":1}}]}}"

static void request_error_retry_does_not_readmit_users(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             FAIL_THEN_OK ",{\"id\":\"retry\",\"plugin\":\"drvtest-hooks\",\"config\":"
                          "{\"request_error\":{\"action\":\"retry\",\"times\":1}}}]",
             NULL);
    dh_open(&d, "retry");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char *types = dh_types(&d, true);
    assert_string_equal(types,
                        "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,"
                        "user/message,request/header,request/context,assistant/attempt,"
                        "assistant/message,step/end,turn/end");
    free(types);
    const json_t *f = json_object_get(data_of(&d, "assistant/attempt", 0), "failure");
    assert_string_equal(json_string_value(json_object_get(f, "code")), "RATE_LIMIT");
    assert_string_equal(json_string_value(json_object_get(f, "provider")), "scripted");
    assert_int_equal(json_integer_value(json_object_get(f, "retry_after_ms")), 5);
    assert_string_equal(json_string_value(json_object_get(turn_reason(&d, 0), "kind")), "completed");
    /* the failed partial output is durable but never model-visible */
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 2);
    json_decref(msgs);
    dh_teardown(&d);
}

static void request_error_without_recovery_ends_turn_with_failure(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, FAIL_THEN_OK "]", NULL);
    dh_open(&d, "noretry");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *r = turn_reason(&d, 0);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "error");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r, "error"), "code")), "RATE_LIMIT");
    assert_int_equal(dh_count(&d, "assistant/message"), 0);
    dh_teardown(&d);
}

static void request_error_listener_failure_keeps_original_error(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             FAIL_THEN_OK ",{\"id\":\"retry\",\"plugin\":\"drvtest-hooks\",\"config\":"
                          "{\"request_error\":{\"action\":\"fail\"}}}]",
             NULL);
    dh_open(&d, "recoveryfails");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *r = turn_reason(&d, 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r, "error"), "code")), "RATE_LIMIT");
    assert_int_equal(dh_count(&d, "agent/error"), 1);
    dh_teardown(&d);
}

static void stream_middleware_failure_is_not_offered_to_recovery(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"never\"}]}},"
             "{\"id\":\"broken\",\"plugin\":\"drvtest-hooks\",\"config\":{\"stream_fail\":true}},"
             "{\"id\":\"retry\",\"plugin\":\"drvtest-hooks\",\"config\":"
             "{\"request_error\":{\"action\":\"retry\",\"times\":5}}}]",
             NULL);
    dh_open(&d, "middleware");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 1);
    assert_int_equal(dh_count(&d, "agent/error"), 1);
    const json_t *e = json_object_get(turn_reason(&d, 0), "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "UNKNOWN");
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")),
                           "llm/stream failed: "));
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")),
                           "drvtest: stream middleware broke"));
    dh_teardown(&d);
}

static void cancel_on_attempt(dh *d, const json_t *ev, bool durable) {
    if (durable && !strcmp(json_string_value(json_object_get(ev, "type")), "assistant/attempt"))
        assert_int_equal(weir_agent_cancel(d->agent, "hook:test", false), WEIR_OK);
}

static void retry_is_cancelled_by_cancel(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             FAIL_THEN_OK ",{\"id\":\"retry\",\"plugin\":\"drvtest-hooks\",\"config\":"
                          "{\"request_error\":{\"action\":\"retry\",\"times\":5}}}]",
             NULL);
    d.on_event = cancel_on_attempt;
    dh_open(&d, "retrycancel");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 1);
    assert_int_equal(dh_count(&d, "assistant/message"), 0);
    const json_t *r = turn_reason(&d, 0);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "aborted");
    assert_string_equal(json_string_value(json_object_get(r, "cause")), "hook:test");
    dh_teardown(&d);
}

/* Cancel at the first live frame matching d->ud ("start", "text-delta", ...). */
static void cancel_at_frame(dh *d, const json_t *ev, bool durable) {
    if (durable || strcmp(json_string_value(json_object_get(ev, "type")), "agent/assistant-stream"))
        return;
    const json_t *frame = json_object_get(json_object_get(ev, "data"), "frame");
    const char *ft = json_string_value(json_object_get(frame, "type"));
    const char *ct = json_string_value(json_object_get(json_object_get(frame, "chunk"), "type"));
    const char *want = d->ud;
    if ((!strcmp(ft, want) || (ct && !strcmp(ct, want))) && d->count++ == 0)
        assert_int_equal(weir_agent_cancel(d->agent, "user", false), WEIR_OK);
}

#define STREAMING_REPLY(extra)                                                          \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["   \
    "{\"reasoning\":\"think\",\"text\":\"Hello world\",\"chunks\":4" extra "}]}}]"

static void cancel_mid_stream_commits_interrupted_prefix(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, STREAMING_REPLY(""), NULL);
    d.on_event = cancel_at_frame;
    d.ud = "text-delta";
    dh_open(&d, "midstream");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *am = data_of(&d, "assistant/message", 0);
    assert_true(json_is_true(json_object_get(am, "interrupted")));
    char *content = json_dumps(json_object_get(json_object_get(am, "message"), "content"),
                               JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(content, "[{\"type\":\"reasoning\",\"text\":\"think\"},"
                                 "{\"type\":\"text\",\"text\":\"He\"}]");
    free(content);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 0);
    assert_string_equal(json_string_value(json_object_get(turn_reason(&d, 0), "kind")), "aborted");
    dh_teardown(&d);
}

static void cancel_mid_tool_call_drops_the_half_streamed_call(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             STREAMING_REPLY(",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
                             "\"arguments\":{\"q\":1}}]"),
             NULL);
    d.on_event = cancel_at_frame;
    d.ud = "tool-call-delta";
    dh_open(&d, "midtool");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *msg = json_object_get(data_of(&d, "assistant/message", 0), "message");
    assert_int_equal(json_array_size(json_object_get(msg, "content")), 2); /* reasoning + text */
    assert_int_equal(dh_count(&d, "tool/call"), 0);
    dh_teardown(&d);
}

static void cancel_before_content_logs_attempt_only(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, STREAMING_REPLY(""), NULL);
    d.on_event = cancel_at_frame;
    d.ud = "start";
    dh_open(&d, "beforecontent");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "assistant/message"), 0);
    const json_t *at = data_of(&d, "assistant/attempt", 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(at, "failure"), "code")), "ABORTED");
    assert_string_equal(json_string_value(json_object_get(turn_reason(&d, 0), "kind")), "aborted");
    dh_teardown(&d);
}

static void cancel_on_assistant_message(dh *d, const json_t *ev, bool durable) {
    if (durable && !strcmp(json_string_value(json_object_get(ev, "type")), "assistant/message"))
        assert_int_equal(weir_agent_cancel(d->agent, "parent", false), WEIR_OK);
}

static void cancel_before_dispatch_gives_every_call_a_synthetic_result(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"two calls\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
             "\"arguments\":{}},{\"id\":\"c2\",\"name\":\"lookup\",\"arguments\":{}}]}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\"}]}}]",
             NULL);
    d.on_event = cancel_on_assistant_message;
    dh_open(&d, "nodispatch");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "tool/call"), 2);
    assert_int_equal(dh_count(&d, "tool/result"), 2);
    for (int i = 0; i < 2; i++) {
        const json_t *e = json_object_get(data_of(&d, "tool/result", i), "error");
        assert_string_equal(json_string_value(json_object_get(e, "code")),
                            "ABORTED_BEFORE_DISPATCH");
    }
    const json_t *r = turn_reason(&d, 0);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "aborted");
    assert_string_equal(json_string_value(json_object_get(r, "cause")), "parent");
    dh_teardown(&d);
}

#define TWO_TURNS                                                                        \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["    \
    "{\"text\":\"one\"},{\"text\":\"two\",\"expect\":{\"messages_count\":3}}]}}]"

static void torn_log_tail_is_dropped_on_open(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, TWO_TURNS, NULL);
    dh_open(&d, "torn");
    dh_send(&d, "first", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char *path = strdup(dh_log(&d));
    json_t *before = weir_agent_messages(d.agent);
    dh_close(&d);
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs("{\"seq\":99,\"time\":1,\"type\":\"user/mes", f); /* a crash mid-write */
    fclose(f);
    dh_open(&d, "torn");
    json_t *after = weir_agent_messages(d.agent);
    assert_true(json_equal(before, after));
    dh_send(&d, "second", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *end = dh_find(&d, "turn/end", 1);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_object_get(end, "data"), "reason"), "kind")),
        "completed");
    json_decref(before);
    json_decref(after);
    free(path);
    dh_teardown(&d);
}

/* Copy the first `n` lines of `from` into `to`. */
static void copy_lines(const char *from, const char *to, int n) {
    char *text = wt_read_file(from, NULL);
    assert_non_null(text);
    char *p = text;
    for (int i = 0; i < n && p; i++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    assert_non_null(p);
    *p = '\0';
    assert_int_equal(wt_write_file(to, text), 0);
    free(text);
}

static int seq_of(const dh *d, const char *type) {
    return (int)json_integer_value(json_object_get(dh_find(d, type, 0), "seq"));
}

static void resumed_open_turn_is_closed_interrupted(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"calling\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
             "\"arguments\":{}}]},{\"text\":\"done\"},"
             "{\"text\":\"after resume\",\"expect\":{\"message_contains\":\"again\"}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\"}]}}]",
             NULL);
    dh_open(&d, "full");
    dh_send(&d, "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char *full = strdup(dh_log(&d));
    int upto = seq_of(&d, "tool/call") + 1; /* crash right after the tool/call */
    dh_close(&d);
    char open_path[4096];
    snprintf(open_path, sizeof open_path, "%s/crashed.jsonl", d.dir);
    copy_lines(full, open_path, upto);
    dh_check_log(open_path, NULL, true); /* an open turn is valid, reported as open */
    json_array_clear(d.events);
    dh_open(&d, "crashed");
    char *types = dh_types(&d, true);
    assert_string_equal(types, "tool/result,step/end,turn/end");
    free(types);
    const json_t *r = json_object_get(json_object_get(dh_find(&d, "turn/end", 0), "data"), "reason");
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "interrupted");
    dh_send(&d, "again", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *h = json_object_get(dh_find(&d, "request/header", 0), "data");
    assert_string_equal(json_string_value(json_object_get(h, "reason")), "resume");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(dh_find(&d, "turn/start", 0),
                                                                        "data"),
                                                        "turn")),
                     2);
    free(full);
    dh_teardown(&d);
}

static void unknown_provider_ends_turn_naming_it(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, "[]", "{\"provider\":\"nope\"}");
    dh_open(&d, "noprovider");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *e = json_object_get(turn_reason(&d, 0), "error");
    assert_string_equal(json_string_value(json_object_get(e, "message")),
                        "unknown provider 'nope': no plugin row with that id registered a "
                        "provider");
    /* cancellation-free failure before admission commits no user message */
    assert_int_equal(dh_count(&d, "user/message"), 0);
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_error_retry_does_not_readmit_users),
        cmocka_unit_test(request_error_without_recovery_ends_turn_with_failure),
        cmocka_unit_test(request_error_listener_failure_keeps_original_error),
        cmocka_unit_test(retry_is_cancelled_by_cancel),
        cmocka_unit_test(stream_middleware_failure_is_not_offered_to_recovery),
        cmocka_unit_test(cancel_mid_stream_commits_interrupted_prefix),
        cmocka_unit_test(cancel_mid_tool_call_drops_the_half_streamed_call),
        cmocka_unit_test(cancel_before_content_logs_attempt_only),
        cmocka_unit_test(cancel_before_dispatch_gives_every_call_a_synthetic_result),
        cmocka_unit_test(torn_log_tail_is_dropped_on_open),
        cmocka_unit_test(resumed_open_turn_is_closed_interrupted),
        cmocka_unit_test(unknown_provider_ends_turn_naming_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
