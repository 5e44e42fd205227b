/*
 * test_myplugin.c - unit tests of weir-myplugin.so (a PII guard) with the
 * weir test kit (weir/testkit.h), hook by hook.
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

/* A kit with the plugin loaded as row "guard" with `config` (JSON text). */
static weir_tk *kit(const char *config) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *cfg = json_loads(config, 0, NULL);
    weir_error err;
    int rc = weir_tk_load_file(tk, plugin_path, "guard", cfg, &err);
    json_decref(cfg);
    if (rc != WEIR_OK)
        fail_msg("load: %s", err.text);
    return tk;
}

/* Invoke `hook` with `args` and the core default `dflt` (JSON texts).
 * weir_tk_invoke borrows the default (as weir_hook_invoke does). */
static json_t *invoke(weir_tk *tk, const char *hook, const char *args, const char *dflt) {
    json_t *a = json_loads(args, 0, NULL);
    assert_non_null(a);
    weir_error err;
    json_t *d = json_loads(dflt, 0, NULL);
    assert_non_null(d);
    json_t *r = weir_tk_invoke(tk, hook, a, d, &err);
    json_decref(a);
    json_decref(d);
    if (!r)
        fail_msg("%s: %s", hook, err.text);
    return r;
}

#define CALL(args) \
    "{\"agent\":\"testkit\",\"turn\":1,\"step\":1,\"call_id\":\"c1\",\"name\":\"shell\"," \
    "\"arguments\":" args ",\"idempotency_key\":\"s:1:1:c1\",\"attempt\":1"

static const char *kind_of(const json_t *r) {
    return json_string_value(json_object_get(r, "kind"));
}

static void denies_a_call_that_matches(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"deny_patterns\": [\"rm -rf\", \"DROP +TABLE\"]}");
    json_t *r = invoke(tk, "tools/pre-execute", CALL("{\"cmd\":\"rm -rf /\"}") "}",
                       "{\"kind\":\"allow\"}");
    assert_string_equal(kind_of(r), "deny");
    assert_string_equal(json_string_value(json_object_get(r, "reason")),
                        "the arguments match 'rm -rf'");
    json_decref(r);
    r = invoke(tk, "tools/pre-execute", CALL("{\"sql\":\"DROP  TABLE t\"}") "}",
               "{\"kind\":\"allow\"}");
    assert_string_equal(kind_of(r), "deny");
    json_decref(r);
    weir_tk_destroy(tk);
}

static void allows_other_calls(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"deny_patterns\": [\"rm -rf\"]}");
    json_t *r = invoke(tk, "tools/pre-execute", CALL("{\"cmd\":\"ls\"}") "}",
                       "{\"kind\":\"allow\"}");
    assert_string_equal(kind_of(r), "allow");
    json_decref(r);
    weir_tk_destroy(tk);
}

/* agent/admit of a send whose one text block is `text`: the admitted text,
 * or NULL when the input passes as it came (the caller frees *r). */
static const char *admit(weir_tk *tk, const char *text, json_t **r) {
    json_t *args = json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:[{s:s, s:s}]}}", "agent",
                             "testkit", "input_id", "i1", "mode", "followup", "origin", "send",
                             "message", "role", "user", "id", "m1", "content", "type", "text",
                             "text", text);
    json_t *dflt = json_pack("{s:s}", "kind", "admit");
    weir_error err;
    *r = weir_tk_invoke(tk, "agent/admit", args, dflt, &err);
    json_decref(args);
    json_decref(dflt);
    if (!*r)
        fail_msg("agent/admit: %s", err.text);
    assert_string_equal(kind_of(*r), "admit");
    const json_t *content = json_object_get(json_object_get(*r, "message"), "content");
    return json_string_value(json_object_get(json_array_get(content, 0), "text"));
}

static void redacts_emails_at_admission(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    json_t *r;
    assert_string_equal(admit(tk, "mail a.b@ex.com or c@d.org now", &r),
                        "mail [e-mail] or [e-mail] now");
    json_decref(r);
    assert_null(admit(tk, "no address here", &r)); /* passes as it came */
    json_decref(r);
    weir_tk_destroy(tk);
}

static void can_leave_emails(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"redact_emails\": false}");
    json_t *r;
    assert_null(admit(tk, "a@b.cc", &r));
    json_decref(r);
    weir_tk_destroy(tk);
}

static void rejects_a_bad_pattern(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    json_t *cfg = json_loads("{\"deny_patterns\": [\"ok\", \"(\"]}", 0, NULL);
    weir_error err;
    assert_int_not_equal(weir_tk_load_file(tk, plugin_path, "guard", cfg, &err), WEIR_OK);
    assert_non_null(strstr(err.text, "row 'guard': config field 'deny_patterns': item 1: not a "
                                     "regular expression"));
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
        cmocka_unit_test(denies_a_call_that_matches),
        cmocka_unit_test(allows_other_calls),
        cmocka_unit_test(redacts_emails_at_admission),
        cmocka_unit_test(can_leave_emails),
        cmocka_unit_test(rejects_a_bad_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
