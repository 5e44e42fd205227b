/*
 * test_myplugin.c - unit tests of weir-myplugin.so (a window compaction)
 * with the weir test kit (weir/testkit.h), hook by hook: the kit's agent has
 * the route weir_tk_set_route gives and the history weir_tk_set_messages
 * gives; it has no session log, so its surface is empty (a whole session
 * with a log: weir_tk_run_turn, weir's docs/testing.md).
 *
 *   test_myplugin path/to/weir-myplugin.so
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

/* A kit with the plugin loaded as row "window" with `config` (JSON text). */
static weir_tk *kit(const char *config) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *cfg = json_loads(config, 0, NULL);
    weir_error err;
    int rc = weir_tk_load_file(tk, plugin_path, "window", cfg, &err);
    json_decref(cfg);
    if (rc != WEIR_OK)
        fail_msg("load: %s", err.text);
    return tk;
}

/* A history of one user message of `chars` characters (chars / 4 + 4 tokens). */
static void set_history(weir_tk *tk, size_t chars) {
    char *text = malloc(chars + 1);
    assert_non_null(text);
    memset(text, 'a', chars);
    text[chars] = '\0';
    json_t *msgs = json_pack("[{s:s, s:[{s:s, s:s}]}]", "role", "user", "content", "type", "text",
                             "text", text);
    free(text);
    assert_int_equal(weir_tk_set_messages(tk, msgs), WEIR_OK);
    json_decref(msgs);
}

static void set_window(weir_tk *tk, int window) {
    json_t *route = json_pack("{s:s, s:s, s:i}", "provider", "p", "model", "m", "context_window",
                              window);
    weir_error err;
    assert_int_equal(weir_tk_set_route(tk, route, &err), WEIR_OK);
    json_decref(route);
}

/* agent/pre-step with the default entering no message; asserts it enters.
 * weir_tk_invoke borrows the default (as weir_hook_invoke does). */
static void pre_step(weir_tk *tk) {
    json_t *args = json_pack("{s:s, s:i, s:i, s:[]}", "agent", "testkit", "turn", 1, "step", 1,
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

static const char *last_log(weir_tk *tk) {
    const json_t *logs = weir_tk_logs(tk);
    return json_string_value(json_object_get(json_array_get(logs, json_array_size(logs) - 1), "text"));
}

static void does_nothing_below_the_threshold(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    set_window(tk, 1000);
    set_history(tk, 400); /* 104 tokens of 1000 */
    pre_step(tk);
    assert_int_equal(json_array_size(weir_tk_logs(tk)), 0);
    weir_tk_destroy(tk);
}

static void does_nothing_without_a_window(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    set_history(tk, 40000); /* no route: the window is unknown */
    pre_step(tk);
    assert_int_equal(json_array_size(weir_tk_logs(tk)), 0);
    weir_tk_destroy(tk);
}

static void compacts_over_the_threshold(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"threshold_ratio\": 0.5}");
    set_window(tk, 100);
    set_history(tk, 400); /* 104 tokens > 50 */
    pre_step(tk);
    /* the kit's agent has no surface: nothing to stub, but the check ran */
    assert_string_equal(last_log(tk), "104 of 100 tokens: stubbed 0 tool results (0 in all)");
    weir_tk_destroy(tk);
}

static void rejects_a_bad_config(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    json_t *cfg = json_pack("{s:f}", "threshold_ratio", 1.5);
    weir_error err;
    assert_int_not_equal(weir_tk_load_file(tk, plugin_path, "window", cfg, &err), WEIR_OK);
    assert_non_null(strstr(err.text, "row 'window': config field 'threshold_ratio': expected a "
                                     "number from 0.1 to 1, got 1.5"));
    json_decref(cfg);
    weir_tk_destroy(tk);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/weir-myplugin.so\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(does_nothing_below_the_threshold),
        cmocka_unit_test(does_nothing_without_a_window),
        cmocka_unit_test(compacts_over_the_threshold),
        cmocka_unit_test(rejects_a_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
