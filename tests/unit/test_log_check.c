/*
 * tests/unit/test_log_check.c - offline log checks (`weir log --check`) on
 * the sample logs in tests/data/logs/: a good log, broken logs with their
 * exact error strings, an open last turn, and weir_log_derive.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
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
        wt_write_file(path, "[1,2]\n{\"seq\":\"x\"}\nnot json\n"
                            "{\"seq\":0,\"type\":\"turn/end\",\"data\":{}}\n"
                            "{\"seq\":1,\"type\":\"x/y\",\"data\":{},\"surface_op\":\"append\"}\n"),
        0);
    json_t *r = NULL;
    weir_error err;
    assert_int_equal(weir_log_check(path, &r, &err), WEIR_OK);
    const char *want[] = {"line 1: not an event envelope (needs seq, type and data)",
                          "line 2: not an event envelope (needs seq, type and data)",
                          "line 3: invalid JSON: '[' or '{' expected near 'not'",
                          "seq 0: turn/end without an open turn",
                          "seq 0: turn/end needs reason.kind",
                          "seq 1: unknown event type 'x/y' is not ignorable",
                          "seq 1: surface_op is only allowed on surface types, not x/y"};
    expect_list(r, "errors", want, 7);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(good_log_passes),
        cmocka_unit_test(seq_gap_is_reported),
        cmocka_unit_test(tool_call_without_result_is_reported),
        cmocka_unit_test(step_outside_turn_is_reported),
        cmocka_unit_test(open_last_turn_is_reported_as_open),
        cmocka_unit_test(hostile_lines_are_errors_not_crashes),
        cmocka_unit_test(long_utf8_type_is_reported_not_oom),
        cmocka_unit_test(derive_reads_a_file),
        cmocka_unit_test(check_alloc_failure_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
