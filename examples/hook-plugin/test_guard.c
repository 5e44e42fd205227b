/*
 * examples/hook-plugin/test_guard.c - unit tests of weir-example-guard.so
 * with the plugin test kit (weir/testkit.h): no deployment, no provider.
 *
 *   test_example_guard path/to/weir-example-guard.so
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <weir/testkit.h>

static const char *plugin_path; /* argv[1] */

/* A kit with one row `id` of the plugin loaded with `config_text`. */
static weir_tk *kit_with(const char *id, const char *config_text) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *config = json_loads(config_text, 0, NULL);
    assert_non_null(config);
    weir_error err;
    int rc = weir_tk_load_file(tk, plugin_path, id, config, &err);
    json_decref(config);
    if (rc != WEIR_OK)
        fail_msg("load failed: %s", err.text);
    return tk;
}

/* Invoke `hook` with args and default given as JSON text; returns the result. */
static json_t *invoke(weir_tk *tk, const char *hook, const char *args_text,
                      const char *default_text) {
    json_t *args = json_loads(args_text, 0, NULL);
    assert_non_null(args);
    json_t *def = json_loads(default_text, 0, NULL);
    weir_error err;
    json_t *r = weir_tk_invoke(tk, hook, args, def, &err); /* borrows args and def */
    json_decref(def);
    json_decref(args);
    if (!r)
        fail_msg("%s failed: %s", hook, err.text);
    return r;
}

/* Assert that `value` serializes (sorted keys, compact) to `expected`. */
static void assert_json(const json_t *value, const char *expected) {
    char *text = json_dumps(value, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(text);
    assert_string_equal(text, expected);
    free(text);
}

#define CALL_ARGS(name)                                                                 \
    "{\"agent\":\"testkit\",\"turn\":1,\"step\":1,\"call_id\":\"c1\",\"name\":\"" name \
    "\",\"arguments\":\"{}\"}"

static void denies_a_listed_tool_without_running_the_chain(void **state) {
    (void)state;
    weir_tk *tk = kit_with("guard", "{\"deny\":[\"shell\"],\"reason\":\"no shell in CI\"}");
    json_t *r = invoke(tk, "tools/pre-execute", CALL_ARGS("shell"), "{\"kind\":\"allow\"}");
    assert_json(r, "{\"kind\":\"deny\",\"reason\":\"no shell in CI\"}");
    assert_int_equal(weir_tk_default_calls(tk), 0);
    assert_json(weir_tk_events(tk), "[{\"data\":{\"call_id\":\"c1\",\"name\":\"shell\"},"
                                    "\"type\":\"example-guard/denied\"}]");
    json_decref(r);
    weir_tk_destroy(tk);
}

static void allows_other_tools_through_the_chain(void **state) {
    (void)state;
    weir_tk *tk = kit_with("guard", "{\"deny\":[\"shell\"]}");
    json_t *r = invoke(tk, "tools/pre-execute", CALL_ARGS("read_file"), "{\"kind\":\"allow\"}");
    assert_json(r, "{\"kind\":\"allow\"}");
    assert_int_equal(weir_tk_default_calls(tk), 1);
    assert_int_equal(json_array_size(weir_tk_events(tk)), 0);
    json_decref(r);
    weir_tk_destroy(tk);
}

static void default_reason_when_none_is_configured(void **state) {
    (void)state;
    weir_tk *tk = kit_with("guard", "{\"deny\":[\"rm\"]}");
    json_t *r = invoke(tk, "tools/pre-execute", CALL_ARGS("rm"), "{\"kind\":\"allow\"}");
    assert_json(r, "{\"kind\":\"deny\",\"reason\":\"denied by policy\"}");
    json_decref(r);
    weir_tk_destroy(tk);
}

#define PRE_STEP_ARGS "{\"agent\":\"testkit\",\"turn\":1,\"step\":1,\"messages\":[]}"
#define ENTER_ONE                                                                      \
    "{\"kind\":\"enter\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"    \
    "\"text\",\"text\":\"hi\"}],\"source\":{\"kind\":\"cli\"}}]}"

static void tags_messages_entering_a_step(void **state) {
    (void)state;
    weir_tk *tk = kit_with("guard", "{\"tag\":\"ci\"}");
    json_t *r = invoke(tk, "agent/pre-step", PRE_STEP_ARGS, ENTER_ONE);
    assert_json(r, "{\"kind\":\"enter\",\"messages\":[{\"content\":[{\"text\":\"hi\",\"type\":"
                   "\"text\"}],\"role\":\"user\",\"source\":{\"kind\":\"cli\",\"tags\":"
                   "[\"ci\"]}}]}");
    json_decref(r);
    weir_tk_destroy(tk);
}

static void leaves_a_rejected_step_alone(void **state) {
    (void)state;
    weir_tk *tk = kit_with("guard", "{\"tag\":\"ci\"}");
    json_t *r = invoke(tk, "agent/pre-step", PRE_STEP_ARGS, "{\"kind\":\"reject\"}");
    assert_json(r, "{\"kind\":\"reject\"}");
    json_decref(r);
    weir_tk_destroy(tk);
}

/* Two rows: the outer row (first in config) sees the inner row's result. */
static void two_rows_compose_in_chain_order(void **state) {
    (void)state;
    weir_tk *tk = kit_with("base", "{\"tag\":\"base\"}");
    json_t *config = json_pack("{s:s}", "tag", "overlay");
    weir_error err;
    assert_int_equal(weir_tk_load_file(tk, plugin_path, "overlay", config, &err), WEIR_OK);
    json_decref(config);
    json_t *r = invoke(tk, "agent/pre-step", PRE_STEP_ARGS, ENTER_ONE);
    assert_json(json_object_get(json_object_get(json_array_get(json_object_get(r, "messages"),
                                                                0),
                                                 "source"),
                                 "tags"),
                "[\"overlay\",\"base\"]");
    json_decref(r);
    weir_tk_destroy(tk);
}

static void logs_its_policy_at_init(void **state) {
    (void)state;
    weir_tk *tk = kit_with("guard", "{\"deny\":[\"a\",\"b\"],\"tag\":\"x\"}");
    assert_json(weir_tk_logs(tk), "[{\"level\":\"info\",\"plugin\":\"guard\",\"text\":"
                                  "\"denying 2 tool(s), tagging messages x\"}]");
    weir_tk_destroy(tk);
}

static void rejects_a_config_of_the_wrong_shape(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *config = json_pack("{s:s}", "deny", "shell");
    weir_error err;
    assert_int_equal(weir_tk_load_file(tk, plugin_path, "guard", config, &err),
                     WEIR_E_PLUGIN_CONFIG);
    assert_string_equal(err.text, "plugin 'example-guard' (row 'guard'): invalid config: "
                                  "$.deny: expected array, got string");
    json_decref(config);
    weir_tk_destroy(tk);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/weir-example-guard.so\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(denies_a_listed_tool_without_running_the_chain),
        cmocka_unit_test(allows_other_tools_through_the_chain),
        cmocka_unit_test(default_reason_when_none_is_configured),
        cmocka_unit_test(tags_messages_entering_a_step),
        cmocka_unit_test(leaves_a_rejected_step_alone),
        cmocka_unit_test(two_rows_compose_in_chain_order),
        cmocka_unit_test(logs_its_policy_at_init),
        cmocka_unit_test(rejects_a_config_of_the_wrong_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
