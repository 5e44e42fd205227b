/*
 * examples/window-compaction/test_window_compaction.c -
 * weir-window-compaction.so with the test kit (weir/testkit.h), hook by
 * hook: the kit's agent has a real session log (weir_tk_seed), a route
 * (weir_tk_set_route) and scripted summary calls (weir_tk_set_script); the
 * test reads the log back (weir_tk_log) to see what was replaced.
 *
 *   test_window_compaction path/to/weir-window-compaction.so
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weir/testkit.h>

static const char *plugin_path; /* argv[1] */

/* A kit with the plugin loaded as row "window" with `config` (JSON text),
 * routed to a model of `window` tokens (0: no route). */
static weir_tk *kit(const char *config, int window) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *cfg = json_loads(config, 0, NULL);
    assert_non_null(cfg);
    weir_error err;
    int rc = weir_tk_load_file(tk, plugin_path, "window", cfg, &err);
    json_decref(cfg);
    if (rc != WEIR_OK)
        fail_msg("load: %s", err.text);
    if (window > 0) {
        json_t *route = json_pack("{s:s, s:s, s:i}", "provider", "p", "model", "m",
                                  "context_window", window);
        assert_int_equal(weir_tk_set_route(tk, route, &err), WEIR_OK);
        json_decref(route);
    }
    return tk;
}

/* `n` copies of `c`, malloc'd. */
static char *repeat(char c, size_t n) {
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* Seed `turns` turns, each: a user message of `user_chars` characters
 * (turn i's starts with "turn i:"), a tool call, its result of
 * `result_chars` characters, an answer: four surface nodes a turn. */
static void seed(weir_tk *tk, int turns, size_t user_chars, size_t result_chars) {
    char *result = repeat('r', result_chars);
    json_t *events = json_array();
    for (int t = 1; t <= turns; t++) {
        char *user = repeat('u', user_chars), id[16];
        memcpy(user, "turn ", 5);
        user[5] = (char)('0' + t);
        user[6] = ':';
        snprintf(id, sizeof id, "c%d", t);
        json_array_append_new(events, json_pack(
            "{s:s, s:{s:i, s:i, s:{s:s, s:[{s:s, s:s}], s:s, s:{s:s}}}}", "type", "user/message",
            "data", "turn", t, "step", 1, "message", "role", "user", "content", "type", "text",
            "text", user, "id", id, "source", "kind", "human"));
        json_array_append_new(events, json_pack(
            "{s:s, s:{s:i, s:i, s:{s:s, s:[{s:s, s:s, s:s, s:s}]}, s:[]}}", "type",
            "assistant/message", "data", "turn", t, "step", 1, "message", "role", "assistant",
            "content", "type", "tool_call", "id", id, "name", "cat", "arguments", "{}", "stream"));
        json_array_append_new(events, json_pack(
            "{s:s, s:{s:i, s:i, s:s, s:s, s:s}}", "type", "tool/call", "data", "turn", t, "step",
            1, "call_id", id, "name", "cat", "arguments", "{}"));
        json_array_append_new(events, json_pack(
            "{s:s, s:{s:i, s:i, s:{s:s, s:[{s:s, s:s, s:[{s:s, s:s}]}]}}}", "type", "tool/result",
            "data", "turn", t, "step", 1, "message", "role", "tool", "content", "type",
            "tool_result", "call_id", id, "content", "type", "text", "text", result));
        json_array_append_new(events, json_pack(
            "{s:s, s:{s:i, s:i, s:{s:s, s:[{s:s, s:s}]}, s:[]}}", "type", "assistant/message",
            "data", "turn", t, "step", 2, "message", "role", "assistant", "content", "type",
            "text", "text", "done", "stream"));
        free(user);
    }
    free(result);
    weir_error err;
    if (weir_tk_seed(tk, events, &err) != WEIR_OK)
        fail_msg("seed: %s", err.text);
    json_decref(events);
}

/* agent/pre-step with no message entering; asserts the step enters. */
static void pre_step(weir_tk *tk) {
    json_t *args = json_pack("{s:s, s:i, s:i, s:[]}", "agent", "testkit", "turn", 4, "step", 1,
                             "messages");
    json_t *dflt = json_pack("{s:s, s:[]}", "kind", "enter", "messages");
    weir_error err;
    json_t *r = weir_tk_invoke(tk, "agent/pre-step", args, dflt, &err);
    json_decref(args);
    json_decref(dflt);
    if (!r)
        fail_msg("agent/pre-step: %s", err.text);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "enter");
    json_decref(r);
}

/* The replace events of the kit's log of `type`, in order (new reference). */
static json_t *replaces(weir_tk *tk, const char *type) {
    json_t *log = weir_tk_log(tk), *out = json_array();
    size_t i;
    json_t *ev;
    json_array_foreach(log, i, ev) {
        const json_t *op = json_object_get(json_object_get(ev, "surface_op"), "op");
        const char *ev_type = json_string_value(json_object_get(ev, "type"));
        if (json_is_string(op) && !strcmp(json_string_value(op), "replace") && ev_type &&
            !strcmp(ev_type, type))
            json_array_append(out, ev);
    }
    json_decref(log);
    return out;
}

static const char *first_text(const json_t *ev) {
    const json_t *block = json_array_get(
        json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content"), 0);
    const json_t *inner = json_object_get(block, "content"); /* a tool result's */
    return json_string_value(json_object_get(inner ? json_array_get(inner, 0) : block, "text"));
}

static void below_the_threshold_nothing_changes(void **state) {
    (void)state;
    weir_tk *tk = kit("{}", 100000);
    seed(tk, 3, 40, 4000); /* about 3,100 tokens of 100,000 */
    pre_step(tk);
    json_t *r = replaces(tk, "tool/result");
    assert_int_equal(json_array_size(r), 0);
    json_decref(r);
    assert_int_equal(json_array_size(weir_tk_requests(tk)), 0);
    weir_tk_destroy(tk);
}

static void without_a_route_nothing_changes(void **state) {
    (void)state;
    weir_tk *tk = kit("{}", 0);
    seed(tk, 3, 40, 40000); /* large, but the window is unknown */
    pre_step(tk);
    json_t *r = replaces(tk, "tool/result");
    assert_int_equal(json_array_size(r), 0);
    json_decref(r);
    weir_tk_destroy(tk);
}

static void over_it_old_tool_results_become_stubs(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"threshold_ratio\": 0.5, \"keep_recent\": 2}", 5000);
    seed(tk, 3, 40, 4000); /* 3 x 1,000 tokens of results > 2,500 */
    pre_step(tk);
    json_t *r = replaces(tk, "tool/result");
    assert_int_equal(json_array_size(r), 2); /* turn 3's result is among the last 2 nodes */
    assert_string_equal(first_text(json_array_get(r, 0)),
                        "[a tool result of about 1004 tokens, removed]");
    const json_t *block = json_array_get(json_object_get(json_object_get(json_object_get(
        json_array_get(r, 1), "data"), "message"), "content"), 0);
    assert_string_equal(json_string_value(json_object_get(block, "call_id")), "c2");
    json_decref(r);
    /* stubbing was enough: no summary */
    assert_int_equal(json_array_size(weir_tk_requests(tk)), 0);
    weir_tk_destroy(tk);
}

static void still_over_it_old_turns_are_summarized(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"threshold_ratio\": 0.5, \"keep_recent\": 2}", 5000);
    json_t *script = json_pack("{s:[{s:s, s:s}]}", "replies", "purpose", "compaction", "text",
                               "the user read three files");
    weir_error err;
    assert_int_equal(weir_tk_set_script(tk, script, &err), WEIR_OK);
    json_decref(script);
    seed(tk, 3, 4000, 4000); /* the user messages alone are 3,000 tokens */
    pre_step(tk);
    const json_t *reqs = weir_tk_requests(tk);
    assert_int_equal(json_array_size(reqs), 1);
    const json_t *req = json_array_get(reqs, 0);
    assert_string_equal(json_string_value(json_object_get(req, "purpose")), "compaction");
    const json_t *asked = json_array_get(
        json_object_get(json_object_get(req, "request"), "messages"), 0);
    const char *prompt = json_string_value(
        json_object_get(json_array_get(json_object_get(asked, "content"), 0), "text"));
    assert_non_null(prompt);
    assert_non_null(strstr(prompt, "turn 1:"));
    assert_non_null(strstr(prompt, "turn 2:"));
    assert_null(strstr(prompt, "turn 3:")); /* the last turn stays as it is */
    json_t *r = replaces(tk, "user/message");
    assert_int_equal(json_array_size(r), 1);
    const json_t *ev = json_array_get(r, 0);
    assert_string_equal(first_text(ev),
                        "[summary of the earlier conversation]\nthe user read three files");
    const json_t *op = json_object_get(ev, "surface_op");
    /* from turn 1's prompt (seq 0 is the route's request/context) */
    assert_int_equal(json_integer_value(json_object_get(op, "start_seq")), 1);
    assert_int_equal(json_integer_value(json_object_get(op, "end_seq")), 10); /* turn 2's answer */
    json_decref(r);
    weir_tk_destroy(tk);
}

static void a_failed_summary_changes_nothing_more(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"threshold_ratio\": 0.5, \"keep_recent\": 2}", 5000);
    json_t *script = json_pack("{s:[{s:s, s:{s:s}}]}", "replies", "purpose", "compaction", "fail",
                               "code", "OVERLOADED");
    weir_error err;
    assert_int_equal(weir_tk_set_script(tk, script, &err), WEIR_OK);
    json_decref(script);
    seed(tk, 3, 4000, 4000);
    pre_step(tk); /* the step still enters */
    assert_int_equal(json_array_size(weir_tk_requests(tk)), 1);
    json_t *r = replaces(tk, "user/message");
    assert_int_equal(json_array_size(r), 0);
    json_decref(r);
    const json_t *logs = weir_tk_logs(tk);
    const char *line = json_string_value(
        json_object_get(json_array_get(logs, json_array_size(logs) - 1), "text"));
    assert_non_null(line);
    assert_non_null(strstr(line, "cannot summarize seqs 1..10: OVERLOADED"));
    weir_tk_destroy(tk);
}

static void a_bad_config_names_the_row_and_field(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    json_t *cfg = json_pack("{s:f}", "threshold_ratio", 1.5);
    weir_error err;
    assert_int_not_equal(weir_tk_load_file(tk, plugin_path, "window", cfg, &err), WEIR_OK);
    assert_non_null(strstr(err.text, "row 'window': config field 'threshold_ratio': expected a "
                                     "number from 0.1 to 1, got 1.5"));
    json_decref(cfg);
    cfg = json_pack("{s:s}", "keep_recent", "six");
    assert_int_not_equal(weir_tk_load_file(tk, plugin_path, "window", cfg, &err), WEIR_OK);
    assert_non_null(strstr(err.text, "row 'window': config field 'keep_recent': expected an "
                                     "integer from 1 to 1000, got a string"));
    json_decref(cfg);
    weir_tk_destroy(tk);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/weir-window-compaction.so\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(below_the_threshold_nothing_changes),
        cmocka_unit_test(without_a_route_nothing_changes),
        cmocka_unit_test(over_it_old_tool_results_become_stubs),
        cmocka_unit_test(still_over_it_old_turns_are_summarized),
        cmocka_unit_test(a_failed_summary_changes_nothing_more),
        cmocka_unit_test(a_bad_config_names_the_row_and_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
