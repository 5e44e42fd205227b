/*
 * test_myplugin.c - unit tests of weir-myplugin.so (a rate-limit-aware
 * retry) with the weir test kit (weir/testkit.h), hook by hook.  The core
 * default of agent/request-error is null (the failure ends the step), so
 * every invocation passes NULL as the default.
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

/* A kit with the plugin loaded as row "retry" with `config` (JSON text). */
static weir_tk *kit(const char *config) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *cfg = json_loads(config, 0, NULL);
    weir_error err;
    int rc = weir_tk_load_file(tk, plugin_path, "retry", cfg, &err);
    json_decref(cfg);
    if (rc != WEIR_OK)
        fail_msg("load: %s", err.text);
    return tk;
}

/* agent/request-error for a failure `code` of `host` (NULL: none) after
 * `prior` failures: true when the plugin says retry, false for null. */
static bool retries(weir_tk *tk, const char *code, const char *host, int prior) {
    json_t *failure = json_pack("{s:s, s:s, s:i}", "code", code, "message", "m",
                                "retry_after_ms", 1);
    if (host)
        json_object_set_new(failure, "host", json_string(host));
    json_t *priors = json_array();
    for (int i = 0; i < prior; i++)
        json_array_append(priors, failure);
    json_t *args = json_pack("{s:s, s:i, s:i, s:s, s:o, s:o}", "agent", "testkit", "turn", 1,
                             "step", 1, "provider", "llm", "failure", failure, "prior_failures",
                             priors);
    weir_error err;
    json_t *r = weir_tk_invoke(tk, "agent/request-error", args, NULL, &err);
    json_decref(args);
    if (!r)
        fail_msg("agent/request-error: %s", err.text);
    bool retry = json_is_object(r);
    if (retry)
        assert_string_equal(json_string_value(json_object_get(r, "kind")), "retry");
    else
        assert_true(json_is_null(r));
    json_decref(r);
    return retry;
}

static void retries_a_rate_limit_until_the_budget_is_spent(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"max_retries\": 2, \"base_delay_ms\": 0}");
    assert_true(retries(tk, "RATE_LIMIT", "api.example.com", 0));
    assert_true(retries(tk, "SERVER", "api.example.com", 1));
    assert_false(retries(tk, "RATE_LIMIT", "api.example.com", 2));
    weir_tk_destroy(tk);
}

static void does_not_retry_other_failures(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    assert_false(retries(tk, "AUTH", "api.example.com", 0));
    assert_false(retries(tk, "CONTEXT_WINDOW_EXCEEDED", "api.example.com", 0));
    weir_tk_destroy(tk);
}

static void each_host_has_its_bucket(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"burst\": 2, \"per_minute\": 1, \"base_delay_ms\": 0}");
    assert_true(retries(tk, "RATE_LIMIT", "a.example", 0));
    assert_true(retries(tk, "RATE_LIMIT", "a.example", 0));
    assert_false(retries(tk, "RATE_LIMIT", "a.example", 0)); /* empty */
    assert_true(retries(tk, "RATE_LIMIT", "b.example", 0));  /* another host */
    weir_tk_destroy(tk);
}

static void a_failure_without_host_takes_the_routes(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"burst\": 1, \"per_minute\": 1}");
    json_t *route = json_pack("{s:s, s:s, s:s}", "provider", "llm", "model", "m", "host",
                              "a.example");
    weir_error err;
    assert_int_equal(weir_tk_set_route(tk, route, &err), WEIR_OK);
    json_decref(route);
    assert_true(retries(tk, "TRANSPORT", NULL, 0));         /* a.example's token */
    assert_false(retries(tk, "RATE_LIMIT", "a.example", 0)); /* the same bucket */
    weir_tk_destroy(tk);
}

static void rejects_a_bad_config(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    json_t *cfg = json_pack("{s:i}", "burst", 0);
    weir_error err;
    assert_int_not_equal(weir_tk_load_file(tk, plugin_path, "retry", cfg, &err), WEIR_OK);
    assert_non_null(strstr(err.text, "row 'retry': config field 'burst': expected an integer "
                                     "from 1 to 10000, got 0"));
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
        cmocka_unit_test(retries_a_rate_limit_until_the_budget_is_spent),
        cmocka_unit_test(does_not_retry_other_failures),
        cmocka_unit_test(each_host_has_its_bucket),
        cmocka_unit_test(a_failure_without_host_takes_the_routes),
        cmocka_unit_test(rejects_a_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
