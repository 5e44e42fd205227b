/*
 * examples/pii-guard/test_pii_guard.c - weir-pii-guard.so with the test kit
 * (weir/testkit.h), hook by hook: agent/admit, tools/pre-execute, the config.
 *
 *   test_pii_guard path/to/weir-pii-guard.so
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <weir/testkit.h>

static const char *plugin_path; /* argv[1] */

/* A kit with the plugin loaded as row "pii" with `config` (JSON text). */
static weir_tk *kit(const char *config) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *cfg = json_loads(config, 0, NULL);
    assert_non_null(cfg);
    weir_error err;
    int rc = weir_tk_load_file(tk, plugin_path, "pii", cfg, &err);
    json_decref(cfg);
    if (rc != WEIR_OK)
        fail_msg("load: %s", err.text);
    return tk;
}

/* Invoke `hook` with `args` and the core default `dflt` (JSON texts; the kit
 * borrows the default). */
static json_t *invoke(weir_tk *tk, const char *hook, const char *args, const char *dflt) {
    json_t *a = json_loads(args, 0, NULL), *d = json_loads(dflt, 0, NULL);
    assert_non_null(a);
    assert_non_null(d);
    weir_error err;
    json_t *r = weir_tk_invoke(tk, hook, a, d, &err);
    json_decref(a);
    json_decref(d);
    if (!r)
        fail_msg("%s: %s", hook, err.text);
    return r;
}

/* agent/admit of a send whose one text block is `text`; the result. */
static json_t *admit(weir_tk *tk, const char *text) {
    json_t *msg = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "role", "user", "id", "m1", "content",
                            "type", "text", "text", text);
    json_t *args = json_pack("{s:s, s:s, s:s, s:s, s:O}", "agent", "testkit", "input_id", "i1",
                             "mode", "followup", "origin", "send", "message", msg);
    json_t *dflt = json_pack("{s:s}", "kind", "admit");
    weir_error err;
    json_t *r = weir_tk_invoke(tk, "agent/admit", args, dflt, &err);
    json_decref(msg);
    json_decref(args);
    json_decref(dflt);
    if (!r)
        fail_msg("agent/admit: %s", err.text);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "admit");
    return r;
}

static const char *admitted_text(const json_t *r) {
    const json_t *content = json_object_get(json_object_get(r, "message"), "content");
    return json_string_value(json_object_get(json_array_get(content, 0), "text"));
}

static void admission_replaces_every_address(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    json_t *r = admit(tk, "write to ann@example.com and bo.b@mail.example.org, today");
    assert_string_equal(admitted_text(r), "write to [email] and [email], today");
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "message"), "id")),
                        "m1"); /* the rewrite keeps the message's id */
    json_decref(r);
    weir_tk_destroy(tk);
}

static void admission_passes_a_clean_input(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    json_t *r = admit(tk, "no address here, not even @home or x@y");
    assert_null(json_object_get(r, "message")); /* the default, unchanged */
    json_decref(r);
    weir_tk_destroy(tk);
}

#define CALL(args) \
    "{\"agent\":\"testkit\",\"turn\":1,\"step\":1,\"call_id\":\"c1\",\"name\":\"shell\"," \
    "\"arguments\":" args ",\"idempotency_key\":\"s:1:1:c1\",\"attempt\":1}"

static void pre_execute_denies_a_match(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"deny_patterns\": [\"rm -rf\", \"DROP +TABLE\"]}");
    json_t *r = invoke(tk, "tools/pre-execute", CALL("{\"cmd\":\"rm -rf /\"}"),
                       "{\"kind\":\"allow\"}");
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "deny");
    assert_string_equal(json_string_value(json_object_get(r, "reason")),
                        "the arguments match deny_patterns[0]");
    json_decref(r);
    r = invoke(tk, "tools/pre-execute", CALL("{\"sql\":\"DROP  TABLE t\"}"),
               "{\"kind\":\"allow\"}");
    assert_string_equal(json_string_value(json_object_get(r, "reason")),
                        "the arguments match deny_patterns[1]");
    json_decref(r);
    weir_tk_destroy(tk);
}

static void pre_execute_allows_the_rest(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"deny_patterns\": [\"rm -rf\"]}");
    json_t *r = invoke(tk, "tools/pre-execute", CALL("{\"cmd\":\"ls -l\"}"),
                       "{\"kind\":\"allow\"}");
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "allow");
    json_decref(r);
    assert_int_equal(weir_tk_default_calls(tk), 1);
    weir_tk_destroy(tk);
}

/* A bad config fails the load with an error naming the row and the field. */
static void load_fails(const char *config, const char *text) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *cfg = json_loads(config, 0, NULL);
    weir_error err;
    assert_int_not_equal(weir_tk_load_file(tk, plugin_path, "pii", cfg, &err), WEIR_OK);
    if (!strstr(err.text, text))
        fail_msg("the error '%s' lacks '%s'", err.text, text);
    json_decref(cfg);
    weir_tk_destroy(tk);
}

static void a_bad_config_names_the_row_and_field(void **state) {
    (void)state;
    load_fails("{\"deny_patterns\": [\"ok\", \"(\"]}",
               "row 'pii': config field 'deny_patterns': item 1: not a regular expression");
    load_fails("{\"deny_patterns\": [1]}", "row 'pii': config field 'deny_patterns': item 0");
    load_fails("{\"deny_patterns\": \"rm\"}",
               "row 'pii': config field 'deny_patterns': expected an array, got a string");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/weir-pii-guard.so\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(admission_replaces_every_address),
        cmocka_unit_test(admission_passes_a_clean_input),
        cmocka_unit_test(pre_execute_denies_a_match),
        cmocka_unit_test(pre_execute_allows_the_rest),
        cmocka_unit_test(a_bad_config_names_the_row_and_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
