/*
 * tests/unit/test_log_fold.c - the tool-call fold of one step
 * (core/log/log_fold.h), the one the driver's crash recovery, the log's repair
 * and `weir log --check` read: what it keeps wanted and pending, in which
 * order, and the issues it reports.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"
#include "log_fold.h"

/* An assistant/message envelope offering the calls `ids` (NULL-ended). */
static json_t *offer(const char *const *ids) {
    json_t *content = json_array();
    json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", "calling"));
    for (size_t i = 0; ids[i]; i++)
        json_array_append_new(content, json_pack("{s:s, s:s, s:s, s:s}", "type", "tool_call", "id",
                                                 ids[i], "name", "echo", "arguments", "{}"));
    return json_pack("{s:s, s:{s:{s:s, s:o}}}", "type", "assistant/message", "data", "message",
                     "role", "assistant", "content", content);
}

static json_t *call(const char *id) {
    return json_pack("{s:s, s:{s:i, s:i, s:s, s:s, s:s}}", "type", "tool/call", "data", "turn", 1,
                     "step", 1, "call_id", id, "name", "echo", "arguments", "{}");
}

static json_t *result(const char *id) {
    return json_pack("{s:s, s:{s:{s:s, s:[{s:s, s:s, s:[]}]}}}", "type", "tool/result", "data",
                     "message", "role", "tool", "content", "type", "tool_result", "call_id", id,
                     "content");
}

static void on_issue(void *ud, size_t seq, weir__call_fold_issue issue, const char *id) {
    static const char *const names[] = {"reoffered", "redispatched", "unmatched"};
    json_array_append_new(ud, json_pack("[I,s,s]", (json_int_t)seq, names[issue], id));
}

/* Fold `ev` (stolen) as event `seq`, issues into `issues` (may be NULL). */
static void fold(weir__call_fold *f, size_t seq, json_t *ev, json_t *issues) {
    assert_non_null(ev);
    assert_int_equal(weir__call_fold_event(f, seq, ev, issues ? on_issue : NULL, issues), WEIR_OK);
    json_decref(ev);
}

/* The ids and seqs of `list` ([[id, seq, ...], ...]) as "id@seq ...". */
static void expect_ids(const json_t *list, const char *want) {
    char got[256] = "";
    size_t i;
    const json_t *x;
    json_array_foreach(list, i, x) {
        size_t n = strlen(got);
        snprintf(got + n, sizeof got - n, "%s%s@%" JSON_INTEGER_FORMAT, n ? " " : "",
                 json_string_value(json_array_get(x, 0)), json_integer_value(json_array_get(x, 1)));
    }
    assert_string_equal(got, want);
}

/* Offered, dispatched, answered: what is left is wanted (model order) and
 * pending (log order), each with the block or envelope it came from. */
static void folds_a_step(void **state) {
    (void)state;
    weir__call_fold f;
    assert_int_equal(weir__call_fold_init(&f), WEIR_OK);
    json_t *issues = json_array();
    fold(&f, 3, offer((const char *const[]){"a", "b", "c", "d", NULL}), issues);
    fold(&f, 4, json_pack("{s:s, s:{}}", "type", "request/header", "data"), issues); /* passed over */
    fold(&f, 5, call("b"), issues);
    fold(&f, 6, call("a"), issues);
    expect_ids(f.wanted, "c@3 d@3");
    expect_ids(f.pending, "b@5 a@6");
    fold(&f, 7, result("b"), issues);
    expect_ids(f.pending, "a@6");
    /* the entries carry the tool_call block, the tool/call envelope */
    const json_t *block = json_array_get(json_array_get(f.wanted, 0), 2);
    assert_string_equal(json_string_value(json_object_get(block, "type")), "tool_call");
    assert_string_equal(json_string_value(json_object_get(block, "id")), "c");
    const json_t *env = json_array_get(json_array_get(f.pending, 0), 2);
    assert_string_equal(json_string_value(json_object_get(env, "type")), "tool/call");
    assert_string_equal(json_string_value(json_object_get(json_object_get(env, "data"), "call_id")),
                        "a");
    assert_int_equal(json_array_size(issues), 0);
    /* the next step starts empty */
    weir__call_fold_reset(&f);
    assert_int_equal(json_array_size(f.wanted), 0);
    assert_int_equal(json_array_size(f.pending), 0);
    fold(&f, 9, offer((const char *const[]){"a", NULL}), issues);
    expect_ids(f.wanted, "a@9");
    assert_int_equal(json_array_size(issues), 0);
    json_decref(issues);
    weir__call_fold_free(&f);
    weir__call_fold_free(&f); /* a freed fold is zeroed */
}

/* A tool/call logged before its message (the scheduler dispatched before
 * the message was committed) is never wanted. */
static void a_call_before_its_message_is_not_wanted(void **state) {
    (void)state;
    weir__call_fold f;
    assert_int_equal(weir__call_fold_init(&f), WEIR_OK);
    fold(&f, 1, call("x"), NULL);
    fold(&f, 2, offer((const char *const[]){"x", "y", NULL}), NULL);
    expect_ids(f.wanted, "y@2");
    expect_ids(f.pending, "x@1");
    fold(&f, 3, result("x"), NULL);
    fold(&f, 4, call("y"), NULL);
    fold(&f, 5, result("y"), NULL);
    expect_ids(f.wanted, "");
    expect_ids(f.pending, "");
    weir__call_fold_free(&f);
}

/* What a well-formed step never holds is reported and not taken again; a
 * surface replace's tool/result answers no call. */
static void reports_repeats_and_strays(void **state) {
    (void)state;
    weir__call_fold f;
    assert_int_equal(weir__call_fold_init(&f), WEIR_OK);
    json_t *issues = json_array();
    fold(&f, 1, offer((const char *const[]){"a", "a", NULL}), issues);
    fold(&f, 2, offer((const char *const[]){"a", "b", NULL}), issues);
    fold(&f, 3, call("a"), issues);
    fold(&f, 4, call("a"), issues);
    fold(&f, 5, result("a"), issues);
    fold(&f, 6, result("a"), issues);
    fold(&f, 7, result("zz"), issues);
    json_t *replace = result("b");
    json_object_set_new(replace, "surface_op", json_pack("{s:s, s:i, s:i}", "op", "replace",
                                                         "start_seq", 1, "end_seq", 1));
    assert_null(weir__log_result_call_id(replace));
    fold(&f, 8, replace, issues);
    expect_ids(f.wanted, "b@2");
    expect_ids(f.pending, "");
    json_t *want = json_pack("[[i,s,s], [i,s,s], [i,s,s], [i,s,s], [i,s,s]]", 1, "reoffered", "a", 2,
                             "reoffered", "a", 4, "redispatched", "a", 6, "unmatched", "a", 7,
                             "unmatched", "zz");
    if (!json_equal(issues, want)) {
        char *text = json_dumps(issues, 0);
        fail_msg("issues: %s", text);
    }
    json_decref(want);
    json_decref(issues);
    weir__call_fold_free(&f);
}

/* The call id a tool/result answers: its first tool_result block's. */
static void result_call_id(void **state) {
    (void)state;
    json_t *r = result("c1");
    assert_string_equal(weir__log_result_call_id(r), "c1");
    json_decref(r);
    json_t *none = json_pack("{s:s, s:{s:{s:[{s:s, s:s}]}}}", "type", "tool/result", "data",
                             "message", "content", "type", "text", "text", "no result block");
    assert_null(weir__log_result_call_id(none));
    json_decref(none);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(folds_a_step),
        cmocka_unit_test(a_call_before_its_message_is_not_wanted),
        cmocka_unit_test(reports_repeats_and_strays),
        cmocka_unit_test(result_call_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
