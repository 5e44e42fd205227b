/*
 * examples/ratelimit-retry/test_ratelimit_retry.c - weir-ratelimit-retry.so
 * with the test kit (weir/testkit.h), hook by hook, on the kit's fake clock:
 * every wait passes at once and is checked in weir_tk_sleeps, never on the
 * wall clock.  The core default of agent/request-error is null (the failure
 * ends the step): every invocation passes NULL as the default.
 *
 *   test_ratelimit_retry path/to/weir-ratelimit-retry.so
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

/* A kit on the fake clock with the plugin loaded as row "retry". */
static weir_tk *kit(const char *config) {
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    assert_int_equal(weir_tk_clock_set(tk, 1000000), WEIR_OK);
    json_t *cfg = json_loads(config, 0, NULL);
    assert_non_null(cfg);
    weir_error err;
    int rc = weir_tk_load_file(tk, plugin_path, "retry", cfg, &err);
    json_decref(cfg);
    if (rc != WEIR_OK)
        fail_msg("load: %s", err.text);
    return tk;
}

/* agent/request-error for `failure` (JSON text) after `prior` failures:
 * true when the plugin says retry, false for null. */
static bool retries(weir_tk *tk, const char *failure, int prior) {
    json_t *f = json_loads(failure, 0, NULL);
    assert_non_null(f);
    json_t *priors = json_array();
    for (int i = 0; i < prior; i++)
        json_array_append(priors, f);
    json_t *args = json_pack("{s:s, s:i, s:i, s:s, s:O, s:o}", "agent", "testkit", "turn", 1,
                             "step", 1, "provider", "llm", "failure", f, "prior_failures", priors);
    json_decref(f);
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

/* The ms of the kit's sleep `i`, asserting it passed on the fake clock. */
static long long slept(weir_tk *tk, size_t i) {
    const json_t *s = json_array_get(weir_tk_sleeps(tk), i);
    assert_non_null(s);
    assert_true(json_is_true(json_object_get(s, "fake")));
    return (long long)json_integer_value(json_object_get(s, "ms"));
}

/* The status of the last ratelimit-retry/wait event. */
static const json_t *last_status(weir_tk *tk) {
    const json_t *evs = weir_tk_events(tk);
    const json_t *ev = json_array_get(evs, json_array_size(evs) - 1);
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "ratelimit-retry/wait");
    return json_object_get(json_object_get(ev, "data"), "status");
}

#define HOST "\"host\":\"api.example.com\""

static void waits_for_the_reset_of_an_exhausted_limit(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    assert_true(retries(tk, "{\"code\":\"RATE_LIMIT\",\"message\":\"429\"," HOST ","
                            "\"retry_after_ms\":50,\"rate_limit\":{"
                            "\"requests\":{\"limit\":500,\"remaining\":0,\"reset_ms\":1500},"
                            "\"tokens\":{\"limit\":9,\"remaining\":0,\"reset_ms\":2500},"
                            "\"raw\":{}}}", 0));
    assert_int_equal(slept(tk, 0), 2500); /* the later reset, not the Retry-After */
    assert_int_equal(weir_tk_clock_ms(tk), 1002500);
    const json_t *status = last_status(tk);
    assert_string_equal(json_string_value(json_object_get(status, "kind")), "waiting");
    assert_string_equal(json_string_value(json_object_get(status, "text")),
                        "rate limit of api.example.com: waiting {remaining} for its reset "
                        "(retry 1)");
    assert_int_equal(json_integer_value(json_object_get(status, "delay_ms")), 2500);
    weir_tk_destroy(tk);
}

static void a_limit_with_room_left_waits_the_retry_after(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    assert_true(retries(tk, "{\"code\":\"RATE_LIMIT\",\"message\":\"429\"," HOST ","
                            "\"retry_after_ms\":700,\"rate_limit\":{"
                            "\"requests\":{\"limit\":500,\"remaining\":3,\"reset_ms\":9000}}}", 0));
    assert_int_equal(slept(tk, 0), 700);
    const json_t *status = last_status(tk);
    assert_string_equal(json_string_value(json_object_get(status, "kind")), "retrying");
    assert_string_equal(json_string_value(json_object_get(status, "text")),
                        "RATE_LIMIT: retrying in {remaining} (retry 1)");
    weir_tk_destroy(tk);
}

static void backs_off_and_caps_the_wait(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"base_delay_ms\": 100, \"max_delay_ms\": 300, \"max_retries\": 5}");
    const char *f = "{\"code\":\"SERVER\",\"message\":\"500\"," HOST "}";
    for (int prior = 0; prior < 3; prior++)
        assert_true(retries(tk, f, prior));
    assert_int_equal(slept(tk, 0), 100);
    assert_int_equal(slept(tk, 1), 200);
    assert_int_equal(slept(tk, 2), 300); /* 400, capped */
    assert_true(retries(tk, "{\"code\":\"RATE_LIMIT\",\"message\":\"429\"," HOST ",\"rate_limit\":"
                            "{\"requests\":{\"remaining\":0,\"reset_ms\":60000}}}", 0));
    assert_int_equal(slept(tk, 3), 300);
    weir_tk_destroy(tk);
}

static void stops_at_max_retries_and_for_other_failures(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"max_retries\": 1, \"base_delay_ms\": 0}");
    assert_false(retries(tk, "{\"code\":\"SERVER\",\"message\":\"500\"," HOST "}", 1));
    assert_false(retries(tk, "{\"code\":\"AUTH\",\"message\":\"401\"," HOST "}", 0));
    assert_int_equal(json_array_size(weir_tk_sleeps(tk)), 0);
    weir_tk_destroy(tk);
}

static void the_bucket_of_each_host_refills_with_time(void **state) {
    (void)state;
    weir_tk *tk = kit("{\"burst\": 2, \"per_minute\": 6, \"base_delay_ms\": 0}");
    const char *a = "{\"code\":\"SERVER\",\"message\":\"500\",\"host\":\"a.example\"}";
    const char *b = "{\"code\":\"SERVER\",\"message\":\"500\",\"host\":\"b.example\"}";
    assert_true(retries(tk, a, 0));
    assert_true(retries(tk, a, 0));
    assert_false(retries(tk, a, 0)); /* a's bucket is empty */
    assert_true(retries(tk, b, 0));  /* b has its own */
    assert_int_equal(weir_tk_clock_advance(tk, 10000), WEIR_OK); /* 6 a minute: one token */
    assert_true(retries(tk, a, 0));
    assert_false(retries(tk, a, 0));
    weir_tk_destroy(tk);
}

static void a_cancel_ends_the_wait_without_a_retry(void **state) {
    (void)state;
    weir_tk *tk = kit("{}");
    weir_tk_cancel(tk, "user");
    assert_false(retries(tk, "{\"code\":\"SERVER\",\"message\":\"500\"," HOST "}", 0));
    weir_tk_destroy(tk);
}

static void a_bad_config_names_the_row_and_field(void **state) {
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
        fprintf(stderr, "usage: %s path/to/weir-ratelimit-retry.so\n", argv[0]);
        return 2;
    }
    plugin_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(waits_for_the_reset_of_an_exhausted_limit),
        cmocka_unit_test(a_limit_with_room_left_waits_the_retry_after),
        cmocka_unit_test(backs_off_and_caps_the_wait),
        cmocka_unit_test(stops_at_max_retries_and_for_other_failures),
        cmocka_unit_test(the_bucket_of_each_host_refills_with_time),
        cmocka_unit_test(a_cancel_ends_the_wait_without_a_retry),
        cmocka_unit_test(a_bad_config_names_the_row_and_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
