/*
 * tests/unit/test_failure.c - canonical failures: the classification table
 * (core/format/failure.c), provider wording, and Retry-After parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failure.h"
#include "http.h"

/* The real bodies of each provider (as the mock server sends them). */
static const char openai_overflow[] =
    "{\"error\":{\"message\":\"This model's maximum context length is 128000 tokens. However, "
    "your messages resulted in 130000 tokens. Please reduce the length of the messages.\","
    "\"type\":\"invalid_request_error\",\"param\":\"messages\",\"code\":\"context_length_exceeded\"}}";
static const char anthropic_overflow[] =
    "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too "
    "long: 210000 tokens > 200000 maximum\"}}";

static json_t *classify(long status, const char *body) {
    weir_http_response r = {.status = status, .retry_after_ms = -1};
    r.body = (char *)(uintptr_t)body;
    r.body_len = body ? strlen(body) : 0;
    json_t *f = weir__failure_from_http("p1", &r);
    assert_non_null(f);
    return f;
}

static void expect_code(long status, const char *body, const char *code) {
    json_t *f = classify(status, body);
    if (strcmp(weir__json_str(f, "code", ""), code) != 0)
        fail_msg("status %ld body %s: got %s, want %s", status, body ? body : "(none)",
                 weir__json_str(f, "code", ""), code);
    json_decref(f);
}

static void test_failure_429_is_rate_limit_with_all_fields(void **state) {
    weir_http_response r = {.status = 429, .retry_after_ms = 2000};
    strcpy(r.request_id, "req_abc");
    char body[] = "{\"error\":{\"message\":\"Rate limit reached for requests\",\"type\":\"requests\","
                  "\"code\":\"rate_limit_exceeded\"}}";
    r.body = body;
    r.body_len = strlen(body);
    json_t *f = weir__failure_from_http("openai", &r);
    json_t *want = json_pack("{s:s,s:s,s:s,s:i,s:i,s:s}", "code", "RATE_LIMIT", "message",
                             "Rate limit reached for requests", "provider", "openai", "status",
                             429, "retry_after_ms", 2000, "request_id", "req_abc");
    assert_true(json_equal(f, want));
    json_decref(f);
    json_decref(want);
}

static void test_failure_429_with_quota_wording_is_quota(void **state) {
    expect_code(429, "{\"error\":{\"message\":\"You exceeded your current quota, please check "
                     "your plan\",\"type\":\"insufficient_quota\",\"code\":\"insufficient_quota\"}}",
                "QUOTA");
    expect_code(429, "{\"error\":{\"code\":\"insufficient_quota\"}}", "QUOTA");
    expect_code(429, "You have Exceeded Your Current Quota", "QUOTA");
    expect_code(429, "check your billing details", "QUOTA");
    expect_code(429,
                "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                "\"Your credit balance is too low to access the Anthropic API.\"}}",
                "QUOTA");
    expect_code(429, "{\"error\":{\"message\":\"slow down\"}}", "RATE_LIMIT");
    expect_code(429, NULL, "RATE_LIMIT");
}

static void test_failure_529_and_overloaded_error_are_overloaded(void **state) {
    expect_code(529, NULL, "OVERLOADED");
    expect_code(529, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
                     "\"Overloaded\"}}",
                "OVERLOADED");
    expect_code(503, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}", "OVERLOADED");
    /* Anthropic's in-band `event: error` body, classified without a status */
    expect_code(200, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
                     "\"Overloaded\"}}",
                "OVERLOADED");
    expect_code(0, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}", "OVERLOADED");
}

static void test_failure_5xx_is_server(void **state) {
    expect_code(500, "{\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}",
                "SERVER");
    expect_code(502, "<html>bad gateway</html>", "SERVER");
    expect_code(503, "{\"error\":{\"message\":\"The engine is currently overloaded, please try "
                     "again later\",\"type\":\"server_error\"}}",
                "SERVER");
    expect_code(599, NULL, "SERVER");
}

static void test_failure_401_and_403_are_auth(void **state) {
    expect_code(401, "{\"error\":{\"message\":\"Incorrect API key provided.\",\"code\":"
                     "\"invalid_api_key\"}}",
                "AUTH");
    expect_code(403, "{\"type\":\"error\",\"error\":{\"type\":\"permission_error\"}}", "AUTH");
    /* auth wins over wording that looks like overflow */
    expect_code(401, "context window", "AUTH");
}

static void test_failure_openai_overflow_is_context_window_exceeded(void **state) {
    json_t *f = classify(400, openai_overflow);
    assert_string_equal(weir__json_str(f, "code", ""), "CONTEXT_WINDOW_EXCEEDED");
    assert_string_equal(weir__json_str(f, "message", ""),
                        "This model's maximum context length is 128000 tokens. However, your "
                        "messages resulted in 130000 tokens. Please reduce the length of the "
                        "messages.");
    assert_int_equal(weir__json_int(f, "status", 0), 400);
    assert_string_equal(weir__json_str(f, "provider", ""), "p1");
    json_decref(f);
}

static void test_failure_anthropic_overflow_is_context_window_exceeded(void **state) {
    json_t *f = classify(400, anthropic_overflow);
    assert_string_equal(weir__json_str(f, "code", ""), "CONTEXT_WINDOW_EXCEEDED");
    assert_string_equal(weir__json_str(f, "message", ""),
                        "prompt is too long: 210000 tokens > 200000 maximum");
    json_decref(f);
}

static void test_failure_each_overflow_pattern_is_recognised(void **state) {
    expect_code(400, "{\"error\":{\"code\":\"context_length_exceeded\"}}", "CONTEXT_WINDOW_EXCEEDED");
    expect_code(400, "exceeds the Maximum Context Length", "CONTEXT_WINDOW_EXCEEDED");
    expect_code(400, "Prompt is too long", "CONTEXT_WINDOW_EXCEEDED");
    expect_code(400, "input exceeds the context window of this model", "CONTEXT_WINDOW_EXCEEDED");
    expect_code(413, "too many tokens in the request", "CONTEXT_WINDOW_EXCEEDED");
    expect_code(422, "Input is too long for requested model.", "CONTEXT_WINDOW_EXCEEDED");
    /* in-band (no HTTP error status) overflow */
    expect_code(200, anthropic_overflow, "CONTEXT_WINDOW_EXCEEDED");
}

static void test_failure_other_4xx_is_invalid_request(void **state) {
    expect_code(400, "{\"error\":{\"message\":\"Invalid 'messages[0].role'\"}}", "INVALID_REQUEST");
    expect_code(404, "{\"error\":{\"message\":\"The model does not exist\"}}", "INVALID_REQUEST");
    expect_code(413, "{\"type\":\"error\",\"error\":{\"type\":\"request_too_large\"}}",
                "INVALID_REQUEST");
    expect_code(422, NULL, "INVALID_REQUEST");
}

/* Gaps the table once had: each of these fell through to INVALID_REQUEST or
 * UNKNOWN, so a retry policy routed them wrongly. */
static void test_failure_timeout_payment_llamacpp_and_in_band_auth(void **state) {
    (void)state;
    expect_code(408, "Request Timeout", "TIMEOUT");
    expect_code(402, "{\"error\":{\"message\":\"Insufficient credits\",\"code\":402}}", "QUOTA");
    /* Anthropic sends an exhausted credit balance as a 400 */
    expect_code(400,
                "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                "\"Your credit balance is too low to access the Anthropic API.\"}}",
                "QUOTA");
    /* llama.cpp server */
    expect_code(400,
                "{\"error\":{\"code\":400,\"message\":\"the request exceeds the available "
                "context size, try increasing it\",\"type\":\"exceed_context_size_error\"}}",
                "CONTEXT_WINDOW_EXCEEDED");
    /* Anthropic in-band error events (no HTTP status of their own) */
    expect_code(200, "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\"}}", "AUTH");
    expect_code(0, "{\"type\":\"error\",\"error\":{\"type\":\"permission_error\"}}", "AUTH");
    expect_code(200, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
                     "\"message\":\"bad role\"}}",
                "INVALID_REQUEST");
}

static void test_failure_anything_else_is_unknown(void **state) {
    expect_code(0, NULL, "UNKNOWN");
    expect_code(302, "moved", "UNKNOWN");
    expect_code(200, "{\"type\":\"error\",\"error\":{\"type\":\"mystery\"}}", "UNKNOWN");
}

static void test_failure_message_from_json_error_message(void **state) {
    json_t *f = classify(500, "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}");
    assert_string_equal(weir__json_str(f, "message", ""), "boom");
    json_decref(f);
    f = classify(400, "{\"error\":\"plain string error\"}");
    assert_string_equal(weir__json_str(f, "message", ""), "plain string error");
    json_decref(f);
}

static void test_failure_message_truncates_a_raw_body_to_300_bytes(void **state) {
    char body[1001];
    memset(body, 'x', 1000);
    body[1000] = '\0';
    json_t *f = classify(502, body);
    const char *msg = weir__json_str(f, "message", "");
    assert_int_equal(strlen(msg), strlen("HTTP 502: ") + 300 + 3);
    assert_memory_equal(msg, "HTTP 502: xxx", 13);
    assert_string_equal(msg + strlen(msg) - 4, "x...");
    json_decref(f);
    f = classify(502, "short body");
    assert_string_equal(weir__json_str(f, "message", ""), "HTTP 502: short body");
    json_decref(f);
}

static void test_failure_message_for_an_empty_body(void **state) {
    json_t *f = classify(502, NULL);
    assert_string_equal(weir__json_str(f, "message", ""), "HTTP 502 with an empty body");
    json_decref(f);
    f = classify(0, NULL);
    assert_string_equal(weir__json_str(f, "message", ""), "no HTTP status received");
    assert_null(json_object_get(f, "status"));
    json_decref(f);
}

static void test_failure_invalid_utf8_body_keeps_the_ascii(void **state) {
    json_t *f = classify(500, "bad \xff\xfe bytes");
    assert_string_equal(weir__json_str(f, "code", ""), "SERVER");
    assert_string_equal(weir__json_str(f, "message", ""), "HTTP 500: bad ?? bytes");
    json_decref(f);
}

static void test_failure_optional_fields_are_left_out(void **state) {
    weir_http_response r = {.status = 500, .retry_after_ms = -1};
    json_t *f = weir__failure_from_http(NULL, &r);
    assert_non_null(f);
    assert_null(json_object_get(f, "retry_after_ms"));
    assert_null(json_object_get(f, "request_id"));
    assert_null(json_object_get(f, "provider"));
    assert_int_equal(json_object_size(f), 3); /* code, message, status */
    json_decref(f);
    f = weir__failure_from_http("p", NULL);
    assert_string_equal(weir__json_str(f, "code", ""), "UNKNOWN");
    assert_string_equal(weir__json_str(f, "message", ""), "no HTTP response");
    json_decref(f);
}

static void test_failure_new_keeps_canonical_codes_only(void **state) {
    json_t *f = weir__failure_new("anthropic", "EMPTY_RESPONSE", "no content in %d blocks", 0);
    json_t *want = json_pack("{s:s,s:s,s:s}", "code", "EMPTY_RESPONSE", "message",
                             "no content in 0 blocks", "provider", "anthropic");
    assert_true(json_equal(f, want));
    json_decref(f);
    json_decref(want);
    f = weir__failure_new(NULL, "NOT_A_CODE", "x");
    assert_string_equal(weir__json_str(f, "code", ""), "UNKNOWN");
    assert_null(json_object_get(f, "provider"));
    json_decref(f);
    f = weir__failure_new("p", NULL, "%s", "y");
    assert_string_equal(weir__json_str(f, "code", ""), "UNKNOWN");
    json_decref(f);
}

static void test_failure_code_valid_accepts_exactly_the_canonical_codes(void **state) {
    const char *codes[] = {"RATE_LIMIT", "OVERLOADED", "SERVER", "TIMEOUT",
                           "TRANSPORT", "EMPTY_RESPONSE", "CONTEXT_WINDOW_EXCEEDED", "QUOTA",
                           "AUTH", "INVALID_REQUEST", "ABORTED", "UNKNOWN", "IO"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        assert_true(weir__failure_code_valid(codes[i]));
    assert_false(weir__failure_code_valid("rate_limit"));
    assert_false(weir__failure_code_valid(""));
    assert_false(weir__failure_code_valid("MISSING_CREDENTIAL"));
    assert_false(weir__failure_code_valid(NULL));
}

static void test_failure_allocation_failures_return_null(void **state) {
    weir_http_response r = {.status = 429, .retry_after_ms = 10};
    strcpy(r.request_id, "rid");
    char body[] = "{\"error\":{\"message\":\"slow\"}}";
    r.body = body;
    r.body_len = strlen(body);
    for (long n = 1;; n++) {
        weir__alloc_fail_after(n);
        json_t *f = weir__failure_from_http("p", &r);
        weir__alloc_fail_after(-1);
        if (f) {
            assert_string_equal(weir__json_str(f, "message", ""), "slow");
            assert_int_equal(weir__json_int(f, "retry_after_ms", 0), 10);
            json_decref(f);
            break;
        }
    }
}

/* ---- Retry-After ---------------------------------------------------------- */

/* Sun, 06 Nov 1994 08:49:37 GMT */
#define NOW_MS (784111777LL * 1000)

static void test_retry_after_seconds(void **state) {
    assert_int_equal(weir__parse_retry_after("2", NOW_MS), 2000);
    assert_int_equal(weir__parse_retry_after(" 120 ", NOW_MS), 120000);
    assert_int_equal(weir__parse_retry_after("0", NOW_MS), 0);
}

static void test_retry_after_http_date(void **state) {
    assert_int_equal(weir__parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", NOW_MS), 10000);
    assert_int_equal(weir__parse_retry_after("Sunday, 06-Nov-94 08:50:37 GMT", NOW_MS), 60000);
    assert_int_equal(weir__parse_retry_after("Sun Nov  6 08:49:39 1994", NOW_MS), 2000);
    /* a date in the past means "now" */
    assert_int_equal(weir__parse_retry_after("Sat, 05 Nov 1994 08:49:37 GMT", NOW_MS), 0);
}

static void test_retry_after_invalid_values_are_minus_one(void **state) {
    const char *bad[] = {"", "   ", "abc", "-5", "+5", "1.5", "5s", "0x10",
                         "99999999999999999999", "Sun, 99 Foo 1994 99:99:99 GMT", "Sun"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (weir__parse_retry_after(bad[i], NOW_MS) != -1)
            fail_msg("\"%s\" parsed as %lld", bad[i], weir__parse_retry_after(bad[i], NOW_MS));
    assert_int_equal(weir__parse_retry_after(NULL, NOW_MS), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failure_429_is_rate_limit_with_all_fields),
        cmocka_unit_test(test_failure_429_with_quota_wording_is_quota),
        cmocka_unit_test(test_failure_529_and_overloaded_error_are_overloaded),
        cmocka_unit_test(test_failure_5xx_is_server),
        cmocka_unit_test(test_failure_401_and_403_are_auth),
        cmocka_unit_test(test_failure_openai_overflow_is_context_window_exceeded),
        cmocka_unit_test(test_failure_anthropic_overflow_is_context_window_exceeded),
        cmocka_unit_test(test_failure_each_overflow_pattern_is_recognised),
        cmocka_unit_test(test_failure_other_4xx_is_invalid_request),
        cmocka_unit_test(test_failure_timeout_payment_llamacpp_and_in_band_auth),
        cmocka_unit_test(test_failure_anything_else_is_unknown),
        cmocka_unit_test(test_failure_message_from_json_error_message),
        cmocka_unit_test(test_failure_message_truncates_a_raw_body_to_300_bytes),
        cmocka_unit_test(test_failure_message_for_an_empty_body),
        cmocka_unit_test(test_failure_invalid_utf8_body_keeps_the_ascii),
        cmocka_unit_test(test_failure_optional_fields_are_left_out),
        cmocka_unit_test(test_failure_new_keeps_canonical_codes_only),
        cmocka_unit_test(test_failure_code_valid_accepts_exactly_the_canonical_codes),
        cmocka_unit_test(test_failure_allocation_failures_return_null),
        cmocka_unit_test(test_retry_after_seconds),
        cmocka_unit_test(test_retry_after_http_date),
        cmocka_unit_test(test_retry_after_invalid_values_are_minus_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
