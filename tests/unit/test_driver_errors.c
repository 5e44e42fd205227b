/*
 * tests/unit/test_driver_errors.c - failed attempts, recovery, cancellation
 * and resume (docs/lifecycle.md, docs/session-log.md): request-error
 * retry without re-admitting users, cancellation winning over retry,
 * prefix finalization, a torn log tail, and a resumed open turn, including
 * its tool calls a crash cut (an idempotent tool runs again with its key,
 * any other gets an INTERRUPTED result).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
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
    /* lookup is not idempotent: it is not run again, and the model is told
     * it may have run */
    const json_t *res = json_object_get(dh_find(&d, "tool/result", 0), "data");
    assert_string_equal(json_string_value(json_object_get(json_object_get(res, "error"), "code")),
                        "INTERRUPTED");
    const json_t *block =
        json_array_get(json_object_get(json_object_get(res, "message"), "content"), 0);
    assert_true(json_is_true(json_object_get(block, "is_error")));
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(block, "content"), 0),
                                          "text")),
        "Error: interrupted by a crash: the tool may or may not have run; do not assume either");
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

/* The text of the first content block of tool/result event `ev`'s result. */
static const char *result_text(const json_t *ev) {
    const json_t *block = json_array_get(
        json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content"), 0);
    return json_string_value(
        json_object_get(json_array_get(json_object_get(block, "content"), 0), "text"));
}

/* tools/pre-execute listener of the agent: records "<call>:<attempt>:<key>". */
static json_t *pre_record_attempt(weir_call *call, const json_t *args, void *ud) {
    json_t *seen = ud;
    char buf[256];
    snprintf(buf, sizeof buf, "%s:%d:%s", json_string_value(json_object_get(args, "call_id")),
             (int)json_integer_value(json_object_get(args, "attempt")),
             json_string_value(json_object_get(args, "idempotency_key")));
    json_array_append_new(seen, json_string(buf));
    return weir_host_api()->next(call);
}

/*
 * A crash after book's tool/call (book is idempotent, lookup is not and was
 * never dispatched): the resume runs book again with the key its tool/call
 * logged (the session id it was written under, so renaming the file keeps
 * the key) through the agent's own tools/pre-execute, commits its real
 * result, and answers lookup INTERRUPTED.  A second crash during the re-run
 * is handled the same way: one more re-run, same key, attempt 3.
 */
static void resumed_idempotent_call_runs_again_with_its_key(void **state) {
    (void)state;
    char *rec = wt_tmpdir("rec");
    assert_non_null(rec);
    char book_log[4096], rows[8192];
    snprintf(book_log, sizeof book_log, "%s/book.log", rec);
    snprintf(rows, sizeof rows,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
             "\"replies\":[{\"text\":\"calling\",\"tool_calls\":["
             "{\"id\":\"c1\",\"name\":\"book\",\"arguments\":{\"seat\":1}},"
             "{\"id\":\"c2\",\"name\":\"lookup\",\"arguments\":{}}]},{\"text\":\"done\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
             "{\"name\":\"book\",\"idempotent\":true,\"reply\":\"booked\",\"record\":\"%s\"},"
             "{\"name\":\"lookup\"}]}}]",
             book_log);
    dh d;
    dh_setup(&d, rows, "{\"max_parallel_tool_calls\":1}");
    json_t *seen = json_array();
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = seen;
    weir_agent_hook h = {"tools/pre-execute", pre_record_attempt, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "full");
    dh_send(&d, "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char *full = strdup(dh_log(&d));
    /* serial: call c1, result c1, call c2, result c2; crash before result c1 */
    int upto = seq_of(&d, "tool/result");
    dh_close(&d);
    char open_path[4096];
    snprintf(open_path, sizeof open_path, "%s/crashed.jsonl", d.dir);
    copy_lines(full, open_path, upto);
    dh_check_log(open_path, NULL, true);
    json_array_clear(d.events);
    json_array_clear(seen);
    dh_open(&d, "crashed");
    char *types = dh_types(&d, true);
    assert_string_equal(types, "tool/rerun,tool/result,tool/call,tool/result,step/end,turn/end");
    free(types);
    const json_t *rerun = json_object_get(dh_find(&d, "tool/rerun", 0), "data");
    assert_string_equal(json_string_value(json_object_get(rerun, "call_id")), "c1");
    assert_string_equal(json_string_value(json_object_get(rerun, "idempotency_key")), "full:1:1:c1");
    assert_int_equal(json_integer_value(json_object_get(rerun, "attempt")), 2);
    assert_true(json_is_true(json_object_get(dh_find(&d, "tool/rerun", 0), "ignorable")));
    /* book's real result, in model order before lookup's */
    const json_t *r1 = dh_find(&d, "tool/result", 0);
    assert_string_equal(result_text(r1), "booked");
    assert_null(json_object_get(json_object_get(r1, "data"), "error"));
    const json_t *r2 = dh_find(&d, "tool/result", 1);
    assert_string_equal(
        result_text(r2),
        "Error: interrupted by a crash: the tool may or may not have run; do not assume either");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(r2, "data"), "error"), "code")),
                        "INTERRUPTED");
    /* lookup's tool/call was never logged: the resume logs it with its key */
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(dh_find(&d, "tool/call", 0), "data"),
                            "idempotency_key")),
                        "crashed:1:1:c2");
    char *seen_s = json_dumps(seen, JSON_COMPACT);
    assert_string_equal(seen_s, "[\"c1:2:full:1:1:c1\"]");
    free(seen_s);
    char *book = wt_read_file(book_log, NULL);
    assert_string_equal(book, "c1 full:1:1:c1 1\nc1 full:1:1:c1 2\n");
    free(book);
    dh_check(&d);
    /* the derived history carries book's real result */
    json_t *msgs = weir_agent_messages(d.agent);
    char *m = json_dumps(msgs, JSON_COMPACT);
    assert_non_null(strstr(m, "\"call_id\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"booked\"}]"));
    free(m);
    json_decref(msgs);

    /* a crash during the re-run: the log ends right after its tool/rerun */
    char *resumed = strdup(dh_log(&d));
    int rerun_seq = seq_of(&d, "tool/rerun");
    dh_close(&d);
    char again_path[4096];
    snprintf(again_path, sizeof again_path, "%s/again.jsonl", d.dir);
    copy_lines(resumed, again_path, rerun_seq + 1);
    dh_check_log(again_path, NULL, true);
    json_array_clear(d.events);
    dh_open(&d, "again");
    types = dh_types(&d, true);
    assert_string_equal(types, "tool/rerun,tool/result,tool/call,tool/result,step/end,turn/end");
    free(types);
    rerun = json_object_get(dh_find(&d, "tool/rerun", 0), "data");
    assert_string_equal(json_string_value(json_object_get(rerun, "idempotency_key")), "full:1:1:c1");
    assert_int_equal(json_integer_value(json_object_get(rerun, "attempt")), 3);
    assert_string_equal(result_text(dh_find(&d, "tool/result", 0)), "booked");
    book = wt_read_file(book_log, NULL);
    assert_string_equal(book, "c1 full:1:1:c1 1\nc1 full:1:1:c1 2\nc1 full:1:1:c1 3\n");
    free(book);
    free(resumed);
    free(full);
    dh_teardown(&d);
    json_decref(seen);
    wt_rmtree(rec);
    free(rec);
}

/*
 * A crash after book's tool/call (book is idempotent; lookup before it was
 * answered).  One allocation that fails while the open reads the cut step
 * back (memory is there again afterwards) may fail the open, but never
 * makes it answer book INTERRUPTED instead of running it again, and never
 * runs lookup again: a later open settles the turn as a whole one would.
 */
static void resume_survives_one_failed_allocation(void **state) {
    (void)state;
    char *rec = wt_tmpdir("rec");
    assert_non_null(rec);
    char book_log[4096], lookup_log[4096], rows[16384];
    snprintf(book_log, sizeof book_log, "%s/book.log", rec);
    snprintf(lookup_log, sizeof lookup_log, "%s/lookup.log", rec);
    snprintf(rows, sizeof rows,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
             "\"replies\":[{\"text\":\"calling\",\"tool_calls\":["
             "{\"id\":\"c1\",\"name\":\"lookup\",\"arguments\":{}},"
             "{\"id\":\"c2\",\"name\":\"book\",\"arguments\":{\"seat\":1}}]},"
             "{\"text\":\"done\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
             "{\"name\":\"book\",\"idempotent\":true,\"reply\":\"booked\",\"record\":\"%s\"},"
             "{\"name\":\"lookup\",\"record\":\"%s\"}]}}]",
             book_log, lookup_log);
    dh d;
    dh_setup(&d, rows, "{\"max_parallel_tool_calls\":1}");
    dh_open(&d, "full");
    dh_send(&d, "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char *full = strdup(dh_log(&d));
    /* serial: call c1, result c1, call c2, result c2; cut before result c2 */
    int upto = (int)json_integer_value(json_object_get(dh_find(&d, "tool/result", 1), "seq"));
    dh_close(&d);
    char path[4096];
    snprintf(path, sizeof path, "%s/cut.jsonl", d.dir);
    long k, used = 0;
    int failed = 0;
    for (k = 1; k < 50000; k++) {
        copy_lines(full, path, upto);
        assert_int_equal(wt_write_file(book_log, "c2 full:1:1:c2 1\n"), 0);
        assert_int_equal(wt_write_file(lookup_log, "c1 full:1:1:c1 1\n"), 0);
        weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
        o.session_id = "cut";
        weir_agent *a = NULL;
        weir_error err;
        weir_error_clear(&err);
        weir__alloc_fail_only(k);
        int rc = weir_agent_open(d.host, &o, &a, &err);
        used = weir__alloc_fail_after(-1);
        weir_agent_close(a);
        if (rc != WEIR_OK) {
            failed++;
            dh_check_log(path, NULL, true); /* valid, perhaps half settled */
            weir_error_clear(&err);
            a = NULL;
            if (weir_agent_open(d.host, &o, &a, &err) != WEIR_OK)
                fail_msg("k=%ld: the open after a failed one: %s", k, err.text);
            weir_agent_close(a);
        }
        dh_check_log(path, NULL, false);
        char *log = wt_read_file(path, NULL), *book = wt_read_file(book_log, NULL),
             *lookup = wt_read_file(lookup_log, NULL);
        if (!strstr(log, "\"call_id\":\"c2\",\"content\":[{\"type\":\"text\",\"text\":\"booked\"}]"))
            fail_msg("k=%ld (open rc %d): book was not run again: %s", k, rc, log);
        /* attempt 2, or 3 when the failed open logged its re-run and then
         * failed before the body ran */
        static const char rerun[] = "c2 full:1:1:c2 1\nc2 full:1:1:c2 ";
        if (strncmp(book, rerun, sizeof rerun - 1) != 0)
            fail_msg("k=%ld (rc %d): book did not run again with its key: %s", k, rc, book);
        if (strcmp(lookup, "c1 full:1:1:c1 1\n") != 0)
            fail_msg("k=%ld: lookup ran again after its result was logged: %s", k, lookup);
        free(log);
        free(book);
        free(lookup);
        if (used < k)
            break; /* the open no longer reaches the failing allocation */
    }
    assert_true(used < k);
    assert_true(failed > 0);
    free(full);
    dh_teardown(&d);
    wt_rmtree(rec);
    free(rec);
}

/* A call re-run WEIR__TOOL_MAX_RERUNS (3) times, each cut by a crash, is not
 * run again: a body that kills the process must not make the session
 * unopenable. */
static void idempotent_call_cut_three_times_is_interrupted(void **state) {
    (void)state;
    char *rec = wt_tmpdir("rec");
    assert_non_null(rec);
    char book_log[4096], rows[8192];
    snprintf(book_log, sizeof book_log, "%s/book.log", rec);
    snprintf(rows, sizeof rows,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"calling\",\"tool_calls\":["
             "{\"id\":\"c1\",\"name\":\"book\",\"arguments\":{}}]},{\"text\":\"done\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
             "{\"name\":\"book\",\"idempotent\":true,\"record\":\"%s\"}]}}]",
             book_log);
    dh d;
    dh_setup(&d, rows, NULL);
    dh_open(&d, "full");
    dh_send(&d, "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char *full = strdup(dh_log(&d));
    int call_seq = seq_of(&d, "tool/call");
    dh_close(&d);
    /* the log up to the tool/call, then three re-runs that never finished */
    char *text = wt_read_file(full, NULL);
    assert_non_null(text);
    char *p = text;
    for (int i = 0; i <= call_seq; i++)
        p = strchr(p, '\n') + 1;
    *p = '\0';
    size_t cap = strlen(text) + 2048;
    char *log = malloc(cap);
    snprintf(log, cap, "%s", text);
    for (int k = 0; k < 3; k++) {
        size_t used = strlen(log);
        snprintf(log + used, cap - used,
                 "{\"seq\":%d,\"time\":1,\"type\":\"tool/rerun\",\"data\":{\"turn\":1,\"step\":1,"
                 "\"call_id\":\"c1\",\"name\":\"book\",\"idempotency_key\":\"full:1:1:c1\","
                 "\"attempt\":%d},\"ignorable\":true}\n",
                 call_seq + 1 + k, k + 2);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/loop.jsonl", d.dir);
    assert_int_equal(wt_write_file(path, log), 0);
    free(log);
    free(text);
    dh_check_log(path, NULL, true);
    json_array_clear(d.events);
    dh_open(&d, "loop");
    char *types = dh_types(&d, true);
    assert_string_equal(types, "tool/result,step/end,turn/end");
    free(types);
    assert_string_equal(result_text(dh_find(&d, "tool/result", 0)),
                        "Error: interrupted by a crash: the tool may or may not have run; do not "
                        "assume either (it was run again 3 times after crashes and never finished)");
    char *book = wt_read_file(book_log, NULL);
    assert_string_equal(book, "c1 full:1:1:c1 1\n"); /* the first run only */
    free(book);
    free(full);
    dh_teardown(&d);
    wt_rmtree(rec);
    free(rec);
}

/* agent/request routes the call to a provider no row registered. */
static json_t *route_to_nope(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    (void)ud;
    json_t *c = weir_host_api()->next(call);
    if (!c)
        return c;
    json_t *out = json_deep_copy(c);
    json_decref(c);
    json_object_set_new(out, "provider", json_string("nope"));
    return out;
}

/* A route chosen at turn time (agent/request) that names no provider row
 * fails the turn, naming it (agent.provider itself is checked at load). */
static void unknown_provider_ends_turn_naming_it(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":"
             "{\"replies\":[{\"text\":\"unused\"}]}}]",
             NULL);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    weir_agent_hook h = {"agent/request", route_to_nope, &o};
    d.hooks = &h;
    d.nhooks = 1;
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

/* agent.provider naming no provider row is a load error: WEIR_E_CONFIG with
 * the closest row and the provider rows, before any session exists. */
static void unknown_agent_provider_is_a_load_error(void **state) {
    (void)state;
    char *dir = wt_tmpdir("noprov");
    assert_non_null(dir);
    json_t *cfg = json_pack("{s:{s:s, s:s}, s:{s:s}, s:[s], s:[{s:s, s:s, s:{s:s}}, "
                            "{s:s, s:s, s:{s:s}}]}",
                            "agent", "provider", "scriptd", "model", "demo", "session", "dir", dir,
                            "plugin_path", wt_env("WEIR_TEST_PLUGIN_DIR"), "plugins", "id",
                            "scripted", "plugin", "provider-scripted", "config", "script",
                            "builtin:demo", "id", "other", "plugin", "provider-scripted", "config",
                            "script", "builtin:demo");
    assert_non_null(cfg);
    weir_host *host = (weir_host *)1;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &host, &err), WEIR_E_CONFIG);
    assert_null(host);
    assert_string_equal(err.text, "agent.provider 'scriptd': no plugin row with that id "
                                  "registered a provider; did you mean 'scripted'? (provider "
                                  "rows: scripted, other)");
    /* far from every row: no suggestion, the rows still listed */
    json_object_set_new(json_object_get(cfg, "agent"), "provider", json_string("zzzz"));
    assert_int_equal(weir_host_create(cfg, &host, &err), WEIR_E_CONFIG);
    assert_string_equal(err.text, "agent.provider 'zzzz': no plugin row with that id registered "
                                  "a provider (provider rows: scripted, other)");
    json_decref(cfg);
    free(dir);
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
        cmocka_unit_test(resumed_idempotent_call_runs_again_with_its_key),
        cmocka_unit_test(idempotent_call_cut_three_times_is_interrupted),
        cmocka_unit_test(resume_survives_one_failed_allocation),
        cmocka_unit_test(unknown_provider_ends_turn_naming_it),
        cmocka_unit_test(unknown_agent_provider_is_a_load_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
