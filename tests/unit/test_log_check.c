/*
 * tests/unit/test_log_check.c - offline log checks (`weir log --check`) on
 * the sample logs in tests/data/logs/: a good log, broken logs with their
 * exact error strings, an open last turn, weir_log_derive, and
 * weir_log_each / weir_log_events.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <unistd.h>

#include "common.h"
#include "weir/host.h"
#include "session_log.h"
#include "store.h"
#include "testutil.h"

static json_t *check(const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/logs/%s", wt_env("WEIR_TEST_DATA_DIR"), name);
    json_t *report = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_log_check(path, &report, &err) != WEIR_OK)
        fail_msg("weir_log_check %s: %s", name, err.text);
    return report;
}

/* The report's `key` array equals `want` (n strings), with a readable failure. */
static void expect_list(const json_t *report, const char *key, const char *const *want, size_t n) {
    const json_t *list = json_object_get(report, key);
    char *text = json_dumps(list, JSON_INDENT(1));
    if (json_array_size(list) != n)
        fail_msg("%s: expected %zu entries, got %s", key, n, text);
    for (size_t i = 0; i < n; i++)
        if (strcmp(json_string_value(json_array_get(list, i)), want[i]) != 0)
            fail_msg("%s[%zu]: expected '%s', got %s", key, i, want[i], text);
    free(text);
}

static void good_log_passes(void **state) {
    (void)state;
    json_t *r = check("good.jsonl");
    expect_list(r, "errors", NULL, 0);
    expect_list(r, "open", NULL, 0);
    assert_true(json_is_true(json_object_get(r, "ok")));
    assert_int_equal(json_integer_value(json_object_get(r, "events")), 17);
    json_decref(r);
}

/* Issue #32 item 4: the prefix report of a clean log: every request extends
 * the previous one append-only. */
static void clean_log_prefix_is_append_only(void **state) {
    (void)state;
    json_t *r = check("good.jsonl");
    const json_t *p = json_object_get(r, "prefix");
    assert_non_null(p);
    assert_int_equal(json_integer_value(json_object_get(p, "requests")), 2);
    assert_int_equal(json_integer_value(json_object_get(p, "append_only")), 2);
    assert_int_equal(json_array_size(json_object_get(p, "breaks")), 0);
    json_decref(r);
}

/* Issue #32 item 4: a compaction's surface replace breaks the prefix; the
 * report names the first position that differs, the replace, the plugin
 * event it came during and the hook and plugin of the provenance record.
 * A break is a report, not an error. */
static void compaction_replace_is_a_named_prefix_break(void **state) {
    (void)state;
    json_t *r = check("prefix_break.jsonl");
    expect_list(r, "errors", NULL, 0);
    assert_true(json_is_true(json_object_get(r, "ok")));
    const json_t *p = json_object_get(r, "prefix");
    assert_int_equal(json_integer_value(json_object_get(p, "requests")), 3);
    assert_int_equal(json_integer_value(json_object_get(p, "append_only")), 2);
    const json_t *breaks = json_object_get(p, "breaks");
    assert_int_equal(json_array_size(breaks), 1);
    char *got = json_dumps(json_array_get(breaks, 0), JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(got, "{\"at\":\"messages[1]\",\"cause\":{\"op\":\"replace\",\"seq\":17,"
                             "\"type\":\"user/message\"},\"during\":{\"seq\":16,\"type\":"
                             "\"compaction/start\"},\"hook\":\"agent/pre-step\",\"plugin\":"
                             "\"compaction-basic@0.1.0\",\"request\":3,\"row\":\"compaction\","
                             "\"seq\":21}");
    free(got);
    json_decref(r);
}

/* The report's breaks, one compact sorted-key dump each (new). */
static char *breaks_text(const json_t *r) {
    char *got = json_dumps(json_object_get(json_object_get(r, "prefix"), "breaks"),
                           JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(got);
    return got;
}

/* Issue #32 item 1: the prefix report compares what was sent, the history
 * with the continuations the request/context in force dropped
 * (core/format/continuation.h).  A replace before a signed reasoning block (here
 * one that re-logs the first question as it was, seq 16) drops the block
 * from the next request: a break at the answer that carried it, where the
 * raw history reads append-only. */
static void a_stale_continuation_is_a_prefix_break(void **state) {
    (void)state;
    json_t *r = check("prefix_stale_continuation.jsonl");
    expect_list(r, "errors", NULL, 0);
    const json_t *p = json_object_get(r, "prefix");
    assert_int_equal(json_integer_value(json_object_get(p, "requests")), 3);
    assert_int_equal(json_integer_value(json_object_get(p, "append_only")), 2);
    char *got = breaks_text(r);
    assert_string_equal(got, "[{\"at\":\"messages[1]\",\"cause\":{\"op\":\"replace\","
                             "\"seq\":16,\"type\":\"user/message\"},\"request\":3,"
                             "\"seq\":18}]");
    free(got);
    json_decref(r);
}

/* An answer whose only block is reasoning of another model was never sent:
 * it takes no position, so a later replace breaks the prefix at the
 * position the replaced message had in the request. */
static void a_message_never_sent_takes_no_position(void **state) {
    (void)state;
    json_t *r = check("prefix_route_continuation.jsonl");
    expect_list(r, "errors", NULL, 0);
    const json_t *p = json_object_get(r, "prefix");
    assert_int_equal(json_integer_value(json_object_get(p, "requests")), 3);
    assert_int_equal(json_integer_value(json_object_get(p, "append_only")), 2);
    char *got = breaks_text(r);
    assert_string_equal(got, "[{\"at\":\"messages[1]\",\"cause\":{\"op\":\"replace\","
                             "\"seq\":16,\"type\":\"user/message\"},\"request\":3,"
                             "\"seq\":18}]");
    free(got);
    json_decref(r);
}

static void seq_gap_is_reported(void **state) {
    (void)state;
    json_t *r = check("gap.jsonl");
    const char *want[] = {"line 3: seq 3 breaks contiguity (expected 2)"};
    expect_list(r, "errors", want, 1);
    assert_true(json_is_false(json_object_get(r, "ok")));
    json_decref(r);
}

static void tool_call_without_result_is_reported(void **state) {
    (void)state;
    json_t *r = check("dangling_call.jsonl");
    const char *want[] = {"seq 5: tool/call 'c2' has no tool/result in step 1 of turn 1",
                          "derived history: tool_call 'c2' (message 0) has no tool result before "
                          "the next assistant message"};
    expect_list(r, "errors", want, 2);
    expect_list(r, "open", NULL, 0);
    assert_true(json_is_false(json_object_get(r, "ok")));
    json_decref(r);
}

static void step_outside_turn_is_reported(void **state) {
    (void)state;
    json_t *r = check("step_outside_turn.jsonl");
    const char *want[] = {"seq 0: step/start outside a turn"};
    expect_list(r, "errors", want, 1);
    json_decref(r);
}

static void open_last_turn_is_reported_as_open(void **state) {
    (void)state;
    json_t *r = check("open_turn.jsonl");
    expect_list(r, "errors", NULL, 0);
    const char *want[] = {"line 7: torn last line (46 bytes) ignored",
                          "turn 1 is open (turn/start at seq 0)",
                          "step 1 of turn 1 is open (step/start at seq 1)",
                          "seq 5: tool/call 'c1' has no tool/result yet"};
    expect_list(r, "open", want, 4);
    assert_true(json_is_true(json_object_get(r, "ok")));
    assert_int_equal(json_integer_value(json_object_get(r, "events")), 6);
    json_decref(r);
}

static void hostile_lines_are_errors_not_crashes(void **state) {
    (void)state;
    char *dir = wt_tmpdir("logcheck");
    char path[4200];
    snprintf(path, sizeof path, "%s/h.jsonl", dir);
    assert_int_equal(
        wt_write_file(path, "{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n"
                            "[1,2]\n{\"seq\":\"x\"}\nnot json\n"
                            "{\"seq\":1,\"type\":\"turn/end\",\"data\":{\"turn\":1,"
                            "\"reason\":{\"kind\":\"completed\"}}}\n"
                            "{\"seq\":1,\"time\":1,\"type\":\"turn/end\",\"data\":{}}\n"
                            "{\"seq\":2,\"time\":1,\"type\":\"x/y\",\"data\":{},"
                            "\"surface_op\":\"append\"}\n"),
        0);
    json_t *r = NULL;
    weir_error err;
    assert_int_equal(weir_log_check(path, &r, &err), WEIR_OK);
    const char *want[] = {"line 2: not a log event: an event must be a JSON object",
                          "line 3: not a log event: seq must be an integer >= 0",
                          "line 4: invalid JSON: '[' or '{' expected near 'not'",
                          "line 5: not a log event: time must be an integer",
                          "seq 1: turn/end: data.turn must be an integer from 0 to 2147483647",
                          "seq 1: turn/end for turn -1 but turn 1 is open",
                          "seq 1: turn/end needs reason.kind",
                          "seq 2: unknown event type 'x/y' is not ignorable",
                          "seq 2: surface_op is only allowed on surface types, not x/y"};
    expect_list(r, "errors", want, 9);
    json_decref(r);
    /* a file whose first line is not a log event is not a weir log at all */
    assert_int_equal(wt_write_file(path, "[1,2]\n{\"seq\":0,\"time\":1,\"type\":\"turn/start\","
                                         "\"data\":{\"turn\":1}}\n"),
                     0);
    assert_int_equal(weir_log_check(path, &r, &err), WEIR_OK);
    const char *foreign[] = {
        "not a weir session log: line 1 is not a log event (an event must be a JSON object)"};
    expect_list(r, "errors", foreign, 1);
    json_decref(r);
    snprintf(path, sizeof path, "%s/missing.jsonl", dir);
    assert_int_equal(weir_log_check(path, &r, &err), WEIR_E_NOT_FOUND);
    assert_null(r);
    wt_rmtree(dir);
    free(dir);
}

/* A message longer than the report's line buffer is cut at a character
 * boundary, never inside a UTF-8 sequence (which made the report fail). */
static void long_utf8_type_is_reported_not_oom(void **state) {
    (void)state;
    char *dir = wt_tmpdir("logcheck");
    char path[4200], type[1400], line[1600];
    snprintf(path, sizeof path, "%s/u.jsonl", dir);
    size_t at = 0;
    type[at++] = 'x'; /* shifts the cut into the middle of a two-byte character */
    while (at + 2 < sizeof type) {
        type[at++] = '\xc3';
        type[at++] = '\xa9'; /* e-acute */
    }
    type[at] = '\0';
    snprintf(line, sizeof line, "{\"seq\":0,\"time\":1,\"type\":\"%s\",\"data\":{}}\n", type);
    assert_int_equal(wt_write_file(path, line), 0);
    json_t *r = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_log_check(path, &r, &err), WEIR_OK);
    const json_t *errors = json_object_get(r, "errors");
    assert_int_equal(json_array_size(errors), 1);
    const char *text = json_string_value(json_array_get(errors, 0));
    assert_non_null(text);
    assert_memory_equal(text, "seq 0: unknown event type 'x\xc3\xa9", 30);
    assert_int_equal(strlen(text), 1022); /* 1023 bytes would end inside a character */
    json_decref(r);
    wt_rmtree(dir);
    free(dir);
}

/* weir_log_check of `text` written to a scratch file. */
static json_t *check_text(const char *text) {
    char *dir = wt_tmpdir("logcheck");
    char path[4200];
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    assert_int_equal(wt_write_file(path, text), 0);
    json_t *r = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_log_check(path, &r, &err) != WEIR_OK)
        fail_msg("weir_log_check: %s", err.text);
    wt_rmtree(dir);
    free(dir);
    return r;
}

#define EV_HEAD                                                                                    \
    "{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n"                                  \
    "{\"seq\":1,\"time\":1,\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}}\n"                       \
    "{\"seq\":2,\"time\":1,\"type\":\"request/header\",\"data\":{\"header\":{\"config\":{\"provider\":"       \
    "\"p\",\"model\":\"m\"}},\"reason\":\"initial\"}}\n"
#define EV_ASSISTANT(seq, ids)                                                                     \
    "{\"seq\":" #seq ",\"time\":1,\"type\":\"assistant/message\",\"surface_op\":\"append\",\"data\":"        \
    "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":[" ids "]}}}\n"
#define EV_CALL_BLOCK(id) "{\"type\":\"tool_call\",\"id\":\"" id "\",\"name\":\"f\",\"arguments\":\"{}\"}"
#define EV_CALL(seq, id)                                                                           \
    "{\"seq\":" #seq ",\"time\":1,\"type\":\"tool/call\",\"data\":{\"turn\":1,\"step\":1,\"call_id\":\"" id   \
    "\",\"name\":\"f\",\"arguments\":\"{}\"}}\n"
#define EV_RESULT(seq, id)                                                                         \
    "{\"seq\":" #seq ",\"time\":1,\"type\":\"tool/result\",\"surface_op\":\"append\",\"data\":{\"turn\":1,"   \
    "\"step\":1,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\","            \
    "\"call_id\":\"" id "\",\"content\":[]}]}}}\n"
#define EV_STEP_END(seq) "{\"seq\":" #seq ",\"time\":1,\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":1}}\n"

/* Every tool_call of a step's assistant message is dispatched as a tool/call
 * of that step: a closed step that lacks one is an error (the driver never
 * writes that; repair could not answer it inside a step), an open step
 * reports it as open (repair writes the call and an interrupted result). */
static void undispatched_tool_call_is_reported(void **state) {
    (void)state;
    json_t *r = check_text(EV_HEAD EV_ASSISTANT(3, EV_CALL_BLOCK("a") "," EV_CALL_BLOCK("b"))
                               EV_CALL(4, "b") EV_RESULT(5, "b") EV_STEP_END(6));
    const char *closed[] = {"seq 3: tool_call 'a' has no tool/call in step 1 of turn 1",
                            "derived history: tool_call 'a' (message 0) has no tool result "
                            "before the next assistant message"};
    expect_list(r, "errors", closed, 2);
    const char *open_turn[] = {"turn 1 is open (turn/start at seq 0)"};
    expect_list(r, "open", open_turn, 1);
    json_decref(r);

    r = check_text(EV_HEAD EV_ASSISTANT(3, EV_CALL_BLOCK("a") "," EV_CALL_BLOCK("b"))
                       EV_CALL(4, "b"));
    expect_list(r, "errors", NULL, 0);
    const char *open_step[] = {"turn 1 is open (turn/start at seq 0)",
                               "step 1 of turn 1 is open (step/start at seq 1)",
                               "seq 3: tool_call 'a' has no tool/call yet",
                               "seq 4: tool/call 'b' has no tool/result yet"};
    expect_list(r, "open", open_step, 4);
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
}

/* A call id names one call of its step: repeats are errors, whether in the
 * assistant message or among the tool/calls. */
static void repeated_call_ids_are_errors(void **state) {
    (void)state;
    json_t *r = check_text(EV_HEAD EV_ASSISTANT(3, EV_CALL_BLOCK("a") "," EV_CALL_BLOCK("a"))
                               EV_CALL(4, "a") EV_CALL(5, "a") EV_RESULT(6, "a") EV_STEP_END(7));
    const char *want[] = {"seq 3: tool_call id 'a' repeats one of step 1",
                          "seq 5: tool/call id 'a' repeats one of step 1",
                          "derived history: tool_call 'a' (message 0) has no tool result "
                          "before the next assistant message"};
    expect_list(r, "errors", want, 3);
    json_decref(r);
}

/* A call dispatched before the assistant message offers it is not wanted
 * again (repair would log it twice); a result a surface replace took away
 * is an error even while the turn is open (repair could not answer it). */
static void dispatch_order_and_replaced_results(void **state) {
    (void)state;
    json_t *r = check_text(EV_HEAD EV_CALL(3, "a") EV_ASSISTANT(4, EV_CALL_BLOCK("a")));
    expect_list(r, "errors", NULL, 0);
    const char *open_call[] = {"turn 1 is open (turn/start at seq 0)",
                               "step 1 of turn 1 is open (step/start at seq 1)",
                               "seq 3: tool/call 'a' has no tool/result yet"};
    expect_list(r, "open", open_call, 3);
    json_decref(r);

    r = check_text(EV_HEAD EV_ASSISTANT(3, EV_CALL_BLOCK("a")) EV_CALL(4, "a") EV_RESULT(5, "a")
                       "{\"seq\":6,\"time\":1,\"type\":\"tool/result\",\"surface_op\":{\"op\":\"replace\","
                       "\"start_seq\":5,\"end_seq\":5},\"source_seqs\":[5],\"data\":{\"turn\":1,\"step\":1,"
                       "\"message\":{\"role\":\"tool\",\"content\":[{\"type\":\"text\","
                       "\"text\":\"gone\"}]}}}\n");
    const char *gone[] = {"derived history: tool_call 'a' (message 0) has no tool result before "
                          "the next assistant message"};
    expect_list(r, "errors", gone, 1);
    json_decref(r);
}

static void derive_reads_a_file(void **state) {
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/logs/good.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    json_t *m = NULL;
    weir_error err;
    assert_int_equal(weir_log_derive(path, &m, &err), WEIR_OK);
    assert_int_equal(json_array_size(m), 5);
    const char *roles[] = {"system", "user", "assistant", "tool", "assistant"};
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(weir__json_str(json_array_get(m, i), "role", ""), roles[i]);
    assert_null(json_object_get(json_array_get(m, 1), "id"));
    json_decref(m);
}

/* The report of `text` (len bytes) read whole (weir__log_check_buffer)
 * and read as a stream from a file (weir_log_check), which must agree. */
static void same_report(const char *dir, const char *name, const char *text, size_t len) {
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    json_t *whole = NULL, *streamed = NULL;
    weir_error err;
    assert_int_equal(weir__log_check_buffer(text, len, NULL, NULL, true, &whole, &err), WEIR_OK);
    if (weir_log_check(path, &streamed, &err) != WEIR_OK)
        fail_msg("%s: %s", name, err.text);
    if (!json_equal(whole, streamed)) {
        char *a = json_dumps(whole, JSON_COMPACT), *b = json_dumps(streamed, JSON_COMPACT);
        fail_msg("%s: read whole %.400s\nas a stream %.400s", name, a, b);
    }
    json_decref(whole);
    json_decref(streamed);
    unlink(path);
}

/* Issue #34: a file's check holds each surface node as a stub and reads a
 * node's line again when it needs the node whole: a tool result rewrite
 * compares itself with the result it replaces (only message.content may
 * change), here one whose text outgrows the first read (4 KiB) and a
 * member longer than 96 bytes.  Read whole or as a stream, the reports
 * agree, and the file's check refuses the rewrite that changes the name. */
static void tool_result_rewrites_read_the_node_again(void **state) {
    (void)state;
    char *dir = wt_tmpdir("rewrite-check");
    char *pad = malloc(10001);
    assert_non_null(pad);
    memset(pad, 'p', 10000);
    pad[10000] = '\0';
    char name[200];
    memset(name, 'n', 150);
    name[150] = '\0';
    for (int bad = 0; bad < 2; bad++) {
        char *text = NULL;
        int n = asprintf(
            &text,
            EV_HEAD EV_ASSISTANT(3, EV_CALL_BLOCK("a")) EV_CALL(4, "a")
            "{\"seq\":5,\"time\":1,\"type\":\"tool/result\",\"surface_op\":\"append\",\"data\":"
            "{\"turn\":1,\"step\":1,\"name\":\"%s\",\"message\":{\"role\":\"tool\",\"content\":"
            "[{\"type\":\"tool_result\",\"call_id\":\"a\",\"content\":[{\"type\":\"text\","
            "\"text\":\"%s\"}]}]}}}\n"
            "{\"seq\":6,\"time\":1,\"type\":\"tool/result\",\"surface_op\":{\"op\":\"replace\","
            "\"start_seq\":5,\"end_seq\":5},\"source_seqs\":[5],\"data\":{\"turn\":1,\"step\":1,"
            "\"name\":\"%s%s\",\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
            "\"tool_result\",\"call_id\":\"a\",\"content\":[{\"type\":\"text\",\"text\":"
            "\"[pruned]\"}]}]}}}\n" EV_STEP_END(7),
            name, pad, name, bad ? "x" : "");
        assert_true(n > 0);
        same_report(dir, bad ? "bad.jsonl" : "good.jsonl", text, (size_t)n);
        char path[4300];
        snprintf(path, sizeof path, "%s/check.jsonl", dir);
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(text, 1, (size_t)n, f), (size_t)n);
        assert_int_equal(fclose(f), 0);
        json_t *r = NULL;
        weir_error err;
        assert_int_equal(weir_log_check(path, &r, &err), WEIR_OK);
        const char *refused[] = {
            "seq 6: a tool/result rewrite may change only message.content"};
        expect_list(r, "errors", bad ? refused : NULL, bad ? 1 : 0);
        json_decref(r);
        unlink(path);
        free(text);
    }
    free(pad);
    wt_rmtree(dir);
    free(dir);
}

/* Issue #34: `weir log --check` reads the file as a stream, holding the
 * longest line rather than the file, and says what it said when it read
 * the file whole: for every sample log; a line longer than the stream's
 * first window (1 MiB), checked deep (the prefix is read again from the
 * file); a torn last line; a line over the 64 MiB cap in the middle, and
 * as a torn last line. */
static void streamed_check_equals_whole_check(void **state) {
    (void)state;
    char *dir = wt_tmpdir("stream-check");
    static const char *const logs[] = {"good.jsonl", "open_turn.jsonl", "gap.jsonl",
                                       "dangling_call.jsonl", "step_outside_turn.jsonl",
                                       "prefix_break.jsonl", "dup_call_ids.jsonl"};
    char path[4200];
    for (size_t i = 0; i < sizeof logs / sizeof *logs; i++) {
        snprintf(path, sizeof path, "%s/logs/%s", wt_env("WEIR_TEST_DATA_DIR"), logs[i]);
        size_t len = 0;
        char *text = wt_read_file(path, &len);
        assert_non_null(text);
        same_report(dir, logs[i], text, len);
        free(text);
    }
    /* good.jsonl with its first user text made 3 MiB long */
    snprintf(path, sizeof path, "%s/logs/good.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    size_t len = 0;
    char *text = wt_read_file(path, &len);
    assert_non_null(text);
    json_t *lines = json_array();
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        assert_non_null(nl);
        *nl = '\0';
        json_array_append_new(lines, json_loads(p, 0, NULL));
    }
    free(text);
    size_t big = (size_t)3 << 20;
    char *x = malloc(big + 1);
    memset(x, 'x', big);
    x[big] = '\0';
    size_t i;
    json_t *ev;
    bool done = false;
    json_array_foreach(lines, i, ev) {
        if (!done && !strcmp(json_string_value(json_object_get(ev, "type")), "user/message")) {
            json_t *b = json_array_get(
                json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content"),
                0);
            json_object_set_new(b, "text", json_string(x));
            done = true;
        }
    }
    assert_true(done);
    free(x);
    size_t cap = 0, n = 0;
    char *out = NULL;
    FILE *mem = open_memstream(&out, &cap);
    json_array_foreach(lines, i, ev) {
        char *line = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fprintf(mem, "%s\n", line);
        free(line);
    }
    fclose(mem);
    n = strlen(out);
    json_decref(lines);
    same_report(dir, "big.jsonl", out, n);
    same_report(dir, "torn.jsonl", out, n - 40); /* the last line cut */
    /* a line over the cap: junk of 64 MiB + 10 bytes after the first line */
    size_t first = (size_t)(strchr(out, '\n') - out) + 1, junk = ((size_t)64 << 20) + 10;
    char *over = malloc(first + junk + 1 + (n - first));
    memcpy(over, out, first);
    memset(over + first, 'j', junk);
    over[first + junk] = '\n';
    memcpy(over + first + junk + 1, out + first, n - first);
    same_report(dir, "over.jsonl", over, first + junk + 1 + (n - first));
    same_report(dir, "over-torn.jsonl", over, first + junk); /* ends inside it */
    free(over);
    free(out);
    wt_rmtree(dir);
    free(dir);
}

static void check_alloc_failure_loop(void **state) {
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/logs/good.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    bool finished = false;
    for (long n = 1; !finished; n++) {
        json_t *r = NULL;
        weir_error err;
        weir__alloc_fail_after(n);
        int rc = weir_log_check(path, &r, &err);
        weir__alloc_fail_after(-1);
        if (rc == WEIR_OK) {
            assert_true(json_is_true(json_object_get(r, "ok")));
            finished = true;
        } else {
            assert_int_equal(rc, WEIR_E_NOMEM);
            assert_null(r);
        }
        json_decref(r);
    }
}

/* What a weir_log_each callback saw: the envelopes (new references). */
typedef struct handed {
    json_t *events;
    size_t stop_after; /* return false after this many (0: never) */
} handed;

static bool hand(json_t *ev, void *ud) {
    handed *h = ud;
    assert_int_equal(json_array_append(h->events, ev), 0); /* borrowed: kept by incref */
    return !h->stop_after || json_array_size(h->events) < h->stop_after;
}

/* The lines of the file at `path` parsed, its last `drop` lines left out. */
static json_t *file_lines(const char *path, size_t drop) {
    char *text = wt_read_file(path, NULL);
    assert_non_null(text);
    json_t *lines = json_array();
    for (char *p = text, *nl; *p && (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = '\0';
        json_t *ev = json_loads(p, JSON_REJECT_DUPLICATES, NULL);
        assert_non_null(ev);
        json_array_append_new(lines, ev);
    }
    free(text);
    while (drop-- > 0)
        json_array_remove(lines, json_array_size(lines) - 1);
    return lines;
}

/* Issue #34: weir_log_each hands the envelopes of a log the reader accepts,
 * in seq order, as they are in the file (and as weir_log_events collects
 * them); a torn last line is left out; a false from the callback stops it;
 * a refused log, a missing file or a directory is the error
 * weir_log_events gives, before any callback; bad arguments are INVAL. */
static void log_each_streams_the_events(void **state) {
    (void)state;
    char good[4200], path[4300];
    snprintf(good, sizeof good, "%s/logs/good.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    weir_error err;
    weir_error_clear(&err);
    json_t *want = file_lines(good, 0);
    assert_int_equal(json_array_size(want), 17);

    handed h = {json_array(), 0};
    assert_int_equal(weir_log_each(good, hand, &h, &err), WEIR_OK);
    assert_true(json_equal(h.events, want));
    for (size_t i = 0; i < json_array_size(h.events); i++) /* seq order */
        assert_int_equal(json_integer_value(json_object_get(json_array_get(h.events, i), "seq")),
                         i);
    json_t *all = NULL;
    assert_int_equal(weir_log_events(good, &all, &err), WEIR_OK);
    assert_true(json_equal(all, want));
    json_decref(all);
    json_decref(h.events);

    /* stop early: three calls, then nothing */
    h = (handed){json_array(), 3};
    assert_int_equal(weir_log_each(good, hand, &h, &err), WEIR_OK);
    assert_int_equal(json_array_size(h.events), 3);
    for (size_t i = 0; i < 3; i++)
        assert_true(json_equal(json_array_get(h.events, i), json_array_get(want, i)));
    json_decref(h.events);

    /* a torn last line (a crash's cut) is left out */
    char *dir = wt_tmpdir("log-each");
    char *text = wt_read_file(good, NULL);
    assert_non_null(text);
    size_t tlen = strlen(text);
    char *torn = malloc(tlen + 32);
    assert_non_null(torn);
    snprintf(torn, tlen + 32, "%s{\"seq\":17,\"tim", text);
    snprintf(path, sizeof path, "%s/torn.jsonl", dir);
    assert_int_equal(wt_write_file(path, torn), 0);
    h = (handed){json_array(), 0};
    assert_int_equal(weir_log_each(path, hand, &h, &err), WEIR_OK);
    assert_true(json_equal(h.events, want));
    json_decref(h.events);

    /* an empty log is a log of no events */
    snprintf(path, sizeof path, "%s/empty.jsonl", dir);
    assert_int_equal(wt_write_file(path, ""), 0);
    h = (handed){json_array(), 0};
    assert_int_equal(weir_log_each(path, hand, &h, &err), WEIR_OK);
    assert_int_equal(json_array_size(h.events), 0);

    /* refused: the error names the file and the line; nothing is handed */
    char gap[4200];
    snprintf(gap, sizeof gap, "%s/logs/gap.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    char named[4300];
    snprintf(named, sizeof named, "%s:3: seq 3 breaks contiguity (expected 2)", gap);
    assert_int_equal(weir_log_each(gap, hand, &h, &err), WEIR_E_LOG_CORRUPT);
    assert_string_equal(err.text, named);
    assert_int_equal(weir_log_events(gap, &all, &err), WEIR_E_LOG_CORRUPT);
    assert_string_equal(err.text, named);
    assert_null(all);
    /* a corrupt line after a valid head: still nothing handed */
    text[tlen - 1] = '\0'; /* the last line loses its newline, then more follows */
    snprintf(torn, tlen + 32, "%s\n{\"seq\":17,\n", text);
    snprintf(path, sizeof path, "%s/corrupt.jsonl", dir);
    assert_int_equal(wt_write_file(path, torn), 0);
    assert_int_equal(weir_log_each(path, hand, &h, &err), WEIR_E_LOG_CORRUPT);
    assert_non_null(strstr(err.text, "corrupt.jsonl:18: "));
    assert_int_equal(json_array_size(h.events), 0);

    /* no such file, not a regular file */
    snprintf(path, sizeof path, "%s/missing.jsonl", dir);
    assert_int_equal(weir_log_each(path, hand, &h, &err), WEIR_E_NOT_FOUND);
    assert_int_equal(weir_log_each(dir, hand, &h, &err), WEIR_E_IO);
    assert_int_equal(json_array_size(h.events), 0);

    /* bad arguments */
    assert_int_equal(weir_log_each(NULL, hand, &h, &err), WEIR_E_INVAL);
    assert_int_equal(weir_log_each(good, NULL, &h, &err), WEIR_E_INVAL);
    assert_int_equal(weir_log_each(good, NULL, NULL, NULL), WEIR_E_INVAL);
    assert_int_equal(json_array_size(h.events), 0);

    json_decref(h.events);
    json_decref(want);
    free(torn);
    free(text);
    wt_rmtree(dir);
    free(dir);
}

/* Issue #34: every allocation weir_log_events (weir_log_each collected)
 * makes may fail: it says E_NOMEM and gives nothing, or gives every event. */
static void log_events_alloc_failure_loop(void **state) {
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/logs/good.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    bool finished = false;
    for (long n = 1; !finished; n++) {
        json_t *events = NULL;
        weir_error err;
        weir__alloc_fail_after(n);
        int rc = weir_log_events(path, &events, &err);
        weir__alloc_fail_after(-1);
        if (rc == WEIR_OK) {
            assert_int_equal(json_array_size(events), 17);
            finished = true;
        } else {
            assert_int_equal(rc, WEIR_E_NOMEM);
            assert_null(events);
            assert_non_null(strstr(err.text, "out of memory"));
        }
        json_decref(events);
    }
}

/* Issue #31 item 1: a log an older weir wrote for a reply that repeated a
 * tool-call id is refused by the reader; weir_log_repair renames the repeat
 * in the message, its tool/call (and idempotency key) and its tool/result,
 * keeps the original beside it, and the log then checks and derives; a
 * second repair changes nothing, and a live writer's log is not touched. */
static void repair_mends_repeated_call_ids(void **state) {
    (void)state;
    char src[4200], path[4200], orig[4300];
    snprintf(src, sizeof src, "%s/logs/dup_call_ids.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    char *dir = wt_tmpdir("repair");
    snprintf(path, sizeof path, "%s/s1.jsonl", dir);
    snprintf(orig, sizeof orig, "%s.orig", path);
    size_t n = 0;
    char *before = wt_read_file(src, &n);
    assert_non_null(before);
    assert_int_equal(wt_write_file(path, before), 0);

    json_t *r = NULL;
    weir_error err;
    assert_int_equal(weir_log_check(path, &r, &err), WEIR_OK);
    assert_true(json_is_false(json_object_get(r, "ok")));
    json_decref(r);
    json_t *msgs = NULL;
    assert_int_equal(weir_log_derive(path, &msgs, &err), WEIR_E_LOG_CORRUPT);
    assert_non_null(strstr(err.text, "weir log --repair"));

    assert_int_equal(weir_log_repair(path, &r, &err), WEIR_OK);
    assert_int_equal(json_integer_value(json_object_get(r, "lines")), 3);
    const json_t *renamed = json_object_get(r, "renamed");
    assert_int_equal(json_array_size(renamed), 3);
    const json_int_t seqs[] = {7, 10, 11};
    for (size_t i = 0; i < 3; i++) {
        const json_t *x = json_array_get(renamed, i);
        assert_int_equal(json_integer_value(json_object_get(x, "seq")), seqs[i]);
        assert_string_equal(json_string_value(json_object_get(x, "was")), "c1");
        assert_string_equal(json_string_value(json_object_get(x, "id")), "c1_2");
    }
    assert_string_equal(json_string_value(json_object_get(r, "backup")), orig);
    json_decref(r);
    char *kept = wt_read_file(orig, NULL);
    assert_non_null(kept);
    assert_string_equal(kept, before); /* the original, byte for byte */
    free(kept);

    assert_int_equal(weir_log_check(path, &r, &err), WEIR_OK);
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    assert_int_equal(weir_log_derive(path, &msgs, &err), WEIR_OK);
    json_decref(msgs);
    char *after = wt_read_file(path, NULL);
    assert_non_null(strstr(after, "\"idempotency_key\":\"s1:1:1:c1_2\""));
    assert_non_null(strstr(after, "\"call_id\":\"c1_2\",\"content\":[{\"type\":\"text\","
                                  "\"text\":\"16\"}]"));

    /* nothing left to mend: the file is not rewritten */
    assert_int_equal(weir_log_repair(path, &r, &err), WEIR_OK);
    assert_int_equal(json_integer_value(json_object_get(r, "lines")), 0);
    assert_null(json_object_get(r, "backup"));
    json_decref(r);
    char *again = wt_read_file(path, NULL);
    assert_string_equal(again, after);
    free(again);
    free(after);

    /* a log with a writer is not repaired */
    assert_int_equal(wt_write_file(path, before), 0);
    weir__log *live = NULL;
    assert_int_equal(unlink(orig), 0);
    int rc = weir__log_open(path, WEIR__FSYNC_NONE, NULL, NULL, &live, &err);
    assert_int_equal(rc, WEIR_E_LOG_CORRUPT); /* the writer refuses it too */
    weir__store_ref fs = weir__store_file();
    void *h = NULL;
    uint64_t epoch = 0;
    assert_int_equal(fs.vt->open(fs.self, "s1", path, 0, &h, &epoch, &err), WEIR_OK);
    assert_int_equal(weir_log_repair(path, &r, &err), WEIR_E_BUSY);
    fs.vt->close(fs.self, h);
    assert_int_equal(weir_log_repair(path, &r, &err), WEIR_OK);
    json_decref(r);

    free(before);
    wt_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(good_log_passes),
        cmocka_unit_test(seq_gap_is_reported),
        cmocka_unit_test(clean_log_prefix_is_append_only),
        cmocka_unit_test(compaction_replace_is_a_named_prefix_break),
        cmocka_unit_test(a_stale_continuation_is_a_prefix_break),
        cmocka_unit_test(a_message_never_sent_takes_no_position),
        cmocka_unit_test(tool_call_without_result_is_reported),
        cmocka_unit_test(step_outside_turn_is_reported),
        cmocka_unit_test(open_last_turn_is_reported_as_open),
        cmocka_unit_test(hostile_lines_are_errors_not_crashes),
        cmocka_unit_test(long_utf8_type_is_reported_not_oom),
        cmocka_unit_test(undispatched_tool_call_is_reported),
        cmocka_unit_test(repeated_call_ids_are_errors),
        cmocka_unit_test(dispatch_order_and_replaced_results),
        cmocka_unit_test(derive_reads_a_file),
        cmocka_unit_test(check_alloc_failure_loop),
        cmocka_unit_test(streamed_check_equals_whole_check),
        cmocka_unit_test(tool_result_rewrites_read_the_node_again),
        cmocka_unit_test(repair_mends_repeated_call_ids),
        cmocka_unit_test(log_each_streams_the_events),
        cmocka_unit_test(log_events_alloc_failure_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
