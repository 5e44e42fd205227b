/*
 * test_myplugin.c - unit tests of weir-myplugin.so with the weir test kit
 * (weir/testkit.h): a fake host that loads the plugin, runs its init, and
 * invokes hooks through the real chain, without a deployment; and one whole
 * scripted turn in a real host (weir_tk_run_turn, weir's docs/testing.md).
 *
 *   test_myplugin path/to/weir-myplugin.so
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include <weir/testkit.h>

static const char *plugin_path; /* argv[1] */

#define REQUEST_ARGS "{\"agent\":\"testkit\",\"turn\":1,\"step\":1}"

/* A kit with the plugin loaded as row "cap" with config {"max_tokens_cap": 100}. */
static weir_tk *kit(void) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *config = json_pack("{s:i}", "max_tokens_cap", 100);
    weir_error err;
    int rc = weir_tk_load_file(tk, plugin_path, "cap", config, &err);
    json_decref(config);
    if (rc != WEIR_OK)
        fail_msg("load: %s", err.text);
    return tk;
}

/* agent/request with the core default returning `dflt` (JSON text). */
static json_t *request(weir_tk *tk, const char *dflt) {
    json_t *args = json_loads(REQUEST_ARGS, 0, NULL);
    json_t *def = json_loads(dflt, 0, NULL);
    weir_error err;
    /* everything is borrowed, as in weir_hook_invoke: release args and def */
    json_t *r = weir_tk_invoke(tk, "agent/request", args, def, &err);
    json_decref(def);
    json_decref(args);
    if (!r)
        fail_msg("agent/request: %s", err.text);
    return r;
}

static void caps_a_larger_budget(void **state) {
    (void)state;
    weir_tk *tk = kit();
    json_t *r = request(tk, "{\"provider\":\"p\",\"model\":\"m\",\"max_tokens\":4096}");
    assert_int_equal(json_integer_value(json_object_get(r, "max_tokens")), 100);
    assert_string_equal(json_string_value(json_object_get(r, "model")), "m");
    json_decref(r);
    weir_tk_destroy(tk);
}

static void sets_the_cap_when_no_budget_is_given(void **state) {
    (void)state;
    weir_tk *tk = kit();
    json_t *r = request(tk, "{\"provider\":\"p\",\"model\":\"m\"}");
    assert_int_equal(json_integer_value(json_object_get(r, "max_tokens")), 100);
    json_decref(r);
    weir_tk_destroy(tk);
}

static void keeps_a_smaller_budget(void **state) {
    (void)state;
    weir_tk *tk = kit();
    json_t *r = request(tk, "{\"provider\":\"p\",\"model\":\"m\",\"max_tokens\":10}");
    assert_int_equal(json_integer_value(json_object_get(r, "max_tokens")), 10);
    json_decref(r);
    weir_tk_destroy(tk);
}

static void rejects_a_config_without_a_cap(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    weir_error err;
    assert_int_equal(weir_tk_load_file(tk, plugin_path, "cap", NULL, &err),
                     WEIR_E_PLUGIN_CONFIG);
    assert_string_equal(err.text, "plugin 'myplugin' (row 'cap'): invalid config: "
                                  "$.max_tokens_cap: required property is missing");
    weir_tk_destroy(tk);
}

/* A whole turn: the plugin in a real host next to provider-scripted, which
 * plays the script; the request the provider got carries the cap. */
static void caps_the_request_of_a_scripted_turn(void **state) {
    (void)state;
    json_t *config = json_pack("{s:i}", "max_tokens_cap", 100);
    json_t *script = json_loads("{\"replies\": [{\"text\": \"Short answer.\", "
                                "\"expect\": {\"message_contains\": \"hello\"}}]}",
                                0, NULL);
    weir_tk_turn turn = WEIR_TK_TURN_INIT;
    turn.plugin = plugin_path;
    turn.id = "cap";
    turn.config = config;
    turn.script = script;
    turn.prompt = "hello";
    json_t *result = NULL;
    weir_error err;
    if (weir_tk_run_turn(&turn, &result, &err) != WEIR_OK)
        fail_msg("weir_tk_run_turn: %s", err.text);
    const json_t *end = json_object_get(result, "end");
    assert_string_equal(json_string_value(json_object_get(end, "kind")), "completed");
    assert_string_equal(json_string_value(json_object_get(end, "text")), "Short answer.");
    const json_t *requests = json_object_get(result, "requests");
    assert_int_equal(json_array_size(requests), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(requests, 0), "max_tokens")),
                     100);
    json_decref(result);
    json_decref(script);
    json_decref(config);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/weir-myplugin.so\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(caps_a_larger_budget),
        cmocka_unit_test(sets_the_cap_when_no_budget_is_given),
        cmocka_unit_test(keeps_a_smaller_budget),
        cmocka_unit_test(rejects_a_config_without_a_cap),
        cmocka_unit_test(caps_the_request_of_a_scripted_turn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
