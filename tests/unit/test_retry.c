/*
 * tests/unit/test_retry.c - the retry plugin: its pure policy
 * (plugins/retry/retry_policy.c: delays, jitter bounds, Retry-After,
 * delegation, budgets, config validation) and, through the real host and
 * driver with provider-scripted, the retry loop (retry/wait before each
 * retry, no user re-admission, terminal codes, cancellation in backoff).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "harness_check.h"
#include "common.h"
#include "mock_llm.h"
#include "retry_breaker.h"
#include "retry_policy.h"
#include "schema.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* Parse `text` (a config object) into `cfg`; fails the test on error. */
static void parse_ok(const char *text, retry_config *cfg) {
    json_error_t je;
    json_t *config = text ? json_loads(text, 0, &je) : NULL;
    if (text && !config)
        fail_msg("bad test config: %s", je.text);
    char msg[256] = "";
    bool oom = true;
    if (retry_config_parse(config, cfg, &oom, msg, sizeof msg) != 0)
        fail_msg("retry_config_parse: %s", msg);
    assert_false(oom);
    json_decref(config);
}

/* The parse error for `text` (static buffer). */
static const char *parse_error(const char *text) {
    static char msg[256];
    json_t *config = json_loads(text, 0, NULL);
    assert_non_null(config);
    retry_config cfg;
    bool oom = true;
    msg[0] = '\0';
    assert_int_equal(retry_config_parse(config, &cfg, &oom, msg, sizeof msg), -1);
    assert_false(oom);
    assert_int_equal(cfg.nproviders, 0);
    assert_null(cfg.base.codes);
    json_decref(config);
    return msg;
}

/* The schema message for `text` (static buffer), "" when it validates. */
static const char *schema_error(const char *text) {
    static char msg[512];
    json_t *config = json_loads(text, 0, NULL);
    assert_non_null(config);
    msg[0] = '\0';
    weir__schema_validate_text(retry_config_schema, config, msg, sizeof msg);
    json_decref(config);
    return msg;
}

static json_t *failure(const char *code, json_int_t retry_after) {
    json_t *f = json_pack("{s:s, s:s, s:s}", "code", code, "message", "boom", "provider", "p");
    assert_non_null(f);
    if (retry_after != 0)
        json_object_set_new(f, "retry_after_ms", json_integer(retry_after));
    return f;
}

/* A normal-mode policy without jitter: initial 500, max 10000, 5 retries. */
static void plain_policy(retry_config *cfg) {
    parse_ok("{\"jitter_ratio\":0}", cfg);
}

/* ------------------------------------------------------------------------ */
/* Pure policy                                                               */
/* ------------------------------------------------------------------------ */

static void defaults_are_the_documented_ones(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok(NULL, &cfg);
    const retry_policy *p = retry_config_select(&cfg, "anything");
    assert_ptr_equal(p, &cfg.base);
    assert_int_equal(p->mode, RETRY_MODE_NORMAL);
    assert_int_equal(p->max_retries, 5);
    assert_int_equal(p->initial_delay_ms, 500);
    assert_int_equal(p->max_delay_ms, 10000);
    assert_true(p->jitter_ratio == 0.1);
    const char *want[] = {"EMPTY_RESPONSE", "RATE_LIMIT", "SERVER",
                          "TIMEOUT",        "TRANSPORT",  "OVERLOADED"};
    assert_int_equal(p->ncodes, 6);
    for (size_t i = 0; i < 6; i++)
        assert_string_equal(p->codes[i], want[i]);
    assert_int_equal(p->max_elapsed_ms, 120000);
    assert_true(p->breaker.enabled);
    assert_int_equal(p->breaker.failures, 8);
    assert_int_equal(p->breaker.window_ms, 60000);
    assert_int_equal(p->breaker.cooldown_ms, 30000);
    assert_int_equal(p->nfallback, 0);
    retry_config_clear(&cfg);
    retry_config_clear(NULL);
}

static void delays_double_and_cap(void **state) {
    (void)state;
    retry_config cfg;
    plain_policy(&cfg);
    const uint64_t want[] = {500, 1000, 2000, 4000, 8000, 10000, 10000};
    for (uint64_t retry = 1; retry <= 7; retry++)
        assert_int_equal(retry_backoff_ms(&cfg.base, retry, 0.5), want[retry - 1]);
    /* a huge retry number (always mode is unbounded) stays at the cap */
    assert_int_equal(retry_backoff_ms(&cfg.base, UINT64_MAX, 0.5), 10000);
    retry_config_clear(&cfg);
}

static void jitter_stays_within_bounds_for_rand_0_and_1(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok(NULL, &cfg); /* jitter 0.1 */
    assert_int_equal(retry_backoff_ms(&cfg.base, 1, 0.0), 450);
    assert_int_equal(retry_backoff_ms(&cfg.base, 1, 1.0), 550);
    assert_int_equal(retry_backoff_ms(&cfg.base, 1, 0.5), 500);
    assert_int_equal(retry_backoff_ms(&cfg.base, 3, 0.0), 1800);
    assert_int_equal(retry_backoff_ms(&cfg.base, 3, 1.0), 2200);
    /* at the cap the upper jitter bound is clipped, the lower one is not */
    assert_int_equal(retry_backoff_ms(&cfg.base, 6, 1.0), 10000);
    assert_int_equal(retry_backoff_ms(&cfg.base, 6, 0.0), 9000);
    /* draws outside [0, 1] are clamped */
    assert_int_equal(retry_backoff_ms(&cfg.base, 1, -3.0), 450);
    assert_int_equal(retry_backoff_ms(&cfg.base, 1, 7.0), 550);
    retry_config_clear(&cfg);
}

static void zero_delay_is_the_lower_jitter_bound(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok("{\"jitter_ratio\":1}", &cfg);
    assert_int_equal(retry_backoff_ms(&cfg.base, 1, 0.0), 0);
    assert_int_equal(retry_backoff_ms(&cfg.base, 1, 1.0), 1000);
    json_t *f = failure("SERVER", 0);
    retry_plan plan;
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0, 0.0, &plan), RETRY_WAIT);
    assert_int_equal(plan.retry, 1);
    assert_int_equal(plan.delay_ms, 0); /* still a retry, with no wait */
    assert_false(plan.from_retry_after);
    json_decref(f);
    retry_config_clear(&cfg);
}

static void retry_after_is_used_verbatim(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok(NULL, &cfg);
    json_t *f = failure("RATE_LIMIT", 1234);
    retry_plan plan;
    assert_int_equal(retry_decide(&cfg.base, f, 2, 0, 1.0, &plan), RETRY_WAIT);
    assert_int_equal(plan.retry, 3);
    assert_int_equal(plan.delay_ms, 1234); /* no jitter, no doubling */
    assert_true(plan.from_retry_after);
    json_decref(f);
    f = failure("RATE_LIMIT", 10000); /* exactly the cap is accepted */
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0, 0.0, &plan), RETRY_WAIT);
    assert_int_equal(plan.delay_ms, 10000);
    json_decref(f);
    /* zero, negative or non-numeric values are not a Retry-After */
    const char *invalid[] = {"0", "-5", "\"soon\"", "null"};
    for (size_t i = 0; i < 4; i++) {
        f = failure("RATE_LIMIT", 0);
        json_object_set_new(f, "retry_after_ms", json_loads(invalid[i], JSON_DECODE_ANY, NULL));
        assert_int_equal(retry_decide(&cfg.base, f, 0, 0, 0.5, &plan), RETRY_WAIT);
        assert_int_equal(plan.delay_ms, 500);
        assert_false(plan.from_retry_after);
        json_decref(f);
    }
    retry_config_clear(&cfg);
}

static void over_cap_retry_after_delegates_in_normal_mode(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok(NULL, &cfg);
    json_t *f = failure("RATE_LIMIT", 10001);
    retry_plan plan;
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0, 0.5, &plan), RETRY_DELEGATE);
    assert_int_equal(plan.verdict, RETRY_DELEGATE);
    json_decref(f);
    retry_config_clear(&cfg);
}

static void over_cap_retry_after_falls_back_to_backoff_in_always_mode(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok("{\"mode\":\"always\"}", &cfg);
    json_t *f = failure("RATE_LIMIT", 60000);
    retry_plan plan;
    assert_int_equal(retry_decide(&cfg.base, f, 1, 0, 0.5, &plan), RETRY_WAIT);
    assert_int_equal(plan.retry, 2);
    assert_int_equal(plan.delay_ms, 1000);
    assert_false(plan.from_retry_after);
    json_decref(f);
    retry_config_clear(&cfg);
}

static void non_retryable_codes_delegate(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok(NULL, &cfg);
    const char *codes[] = {"AUTH", "INVALID_REQUEST", "CONTEXT_WINDOW_EXCEEDED", "QUOTA",
                           "ABORTED", "UNKNOWN"};
    retry_plan plan;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        json_t *f = failure(codes[i], 0);
        assert_false(retry_policy_retryable(&cfg.base, codes[i]));
        assert_int_equal(retry_decide(&cfg.base, f, 0, 0, 0.5, &plan), RETRY_DELEGATE);
        json_decref(f);
    }
    json_t *nocode = json_pack("{s:s}", "message", "no code");
    assert_int_equal(retry_decide(&cfg.base, nocode, 0, 0, 0.5, &plan), RETRY_DELEGATE);
    assert_false(retry_policy_retryable(&cfg.base, NULL));
    json_decref(nocode);
    retry_config_clear(&cfg);

    /* always mode retries permanent failures too */
    parse_ok("{\"mode\":\"always\"}", &cfg);
    json_t *f = failure("AUTH", 0);
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0, 0.5, &plan), RETRY_WAIT);
    json_decref(f);
    retry_config_clear(&cfg);
}

static void empty_response_is_retried_by_default(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok(NULL, &cfg);
    json_t *f = failure("EMPTY_RESPONSE", 0);
    retry_plan plan;
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0, 0.5, &plan), RETRY_WAIT);
    assert_int_equal(plan.retry, 1);
    assert_int_equal(plan.delay_ms, 500);
    json_decref(f);
    retry_config_clear(&cfg);
}

/* Run failures through budgets + decide like the plugin does; count the waits. */
static int waits_until_delegated(const retry_config *cfg, retry_budgets *b, const char *agent,
                                 const char *provider, json_int_t turn, json_int_t step,
                                 int limit) {
    json_t *f = failure("SERVER", 0);
    int waits = 0;
    for (; waits < limit; waits++) {
        retry_counter *c = retry_budgets_get(b, agent, provider, "m", turn, step);
        assert_non_null(c);
        retry_plan plan;
        if (retry_decide(retry_config_select(cfg, provider), f, c->count, 0, 0.5, &plan) ==
            RETRY_DELEGATE)
            break;
        assert_int_equal(plan.retry, c->count + 1);
        c->count = plan.retry;
    }
    json_decref(f);
    return waits;
}

static void budget_is_exhausted_after_max_retries(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok("{\"max_retries\":3}", &cfg);
    retry_budgets b = {0};
    assert_int_equal(waits_until_delegated(&cfg, &b, "a1", "p", 1, 1, 100), 3);
    /* the budget stays spent within the step ... */
    assert_int_equal(waits_until_delegated(&cfg, &b, "a1", "p", 1, 1, 100), 0);
    /* ... a new step (or turn) starts a fresh one */
    assert_int_equal(waits_until_delegated(&cfg, &b, "a1", "p", 1, 2, 100), 3);
    assert_int_equal(waits_until_delegated(&cfg, &b, "a1", "p", 2, 2, 100), 3);
    /* another agent has its own */
    assert_int_equal(waits_until_delegated(&cfg, &b, "a2", "p", 2, 2, 100), 3);
    assert_int_equal(b.n, 2);
    retry_budgets_forget(&b, "a1");
    assert_int_equal(b.n, 1);
    assert_string_equal(b.v[0].agent, "a2");
    retry_budgets_clear(&b);
    retry_budgets_clear(NULL);
    retry_config_clear(&cfg);

    /* max_retries 0: never retried */
    parse_ok("{\"max_retries\":0}", &cfg);
    assert_int_equal(waits_until_delegated(&cfg, &b, "a1", "p", 1, 1, 100), 0);
    retry_budgets_clear(&b);
    retry_config_clear(&cfg);
}

static void always_mode_has_no_budget(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok("{\"mode\":\"always\",\"max_retries\":1}", &cfg);
    retry_budgets b = {0};
    assert_int_equal(waits_until_delegated(&cfg, &b, "a1", "p", 1, 1, 50), 50);
    retry_budgets_clear(&b);
    retry_config_clear(&cfg);
}

static void budgets_are_scoped_per_provider(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok("{\"max_retries\":4,\"initial_delay_ms\":7,\"providers\":{"
             "\"fast\":{\"max_retries\":1,\"retryable_codes\":[\"SERVER\",\"AUTH\"]},"
             "\"patient\":{\"mode\":\"always\"}}}",
             &cfg);
    assert_int_equal(cfg.nproviders, 2);
    const retry_policy *fast = retry_config_select(&cfg, "fast");
    const retry_policy *other = retry_config_select(&cfg, "other");
    assert_ptr_equal(other, &cfg.base);
    /* an override inherits what it does not set */
    assert_int_equal(fast->initial_delay_ms, 7);
    assert_int_equal(fast->max_delay_ms, 10000);
    assert_true(retry_policy_retryable(fast, "AUTH"));
    assert_false(retry_policy_retryable(fast, "TIMEOUT"));
    assert_true(retry_policy_retryable(retry_config_select(&cfg, "patient"), "TIMEOUT"));
    assert_int_equal(retry_config_select(&cfg, "patient")->mode, RETRY_MODE_ALWAYS);
    assert_int_equal(retry_config_select(&cfg, NULL)->mode, RETRY_MODE_NORMAL);

    retry_budgets b = {0};
    assert_int_equal(waits_until_delegated(&cfg, &b, "a", "fast", 1, 1, 100), 1);
    /* the same step on another provider has its own budget */
    assert_int_equal(waits_until_delegated(&cfg, &b, "a", "other", 1, 1, 100), 4);
    assert_int_equal(waits_until_delegated(&cfg, &b, "a", "fast", 1, 1, 100), 0);
    assert_int_equal(b.n, 2);
    retry_budgets_clear(&b);
    retry_config_clear(&cfg);
}

static void config_validation_rejects_bad_types(void **state) {
    (void)state;
    /* the descriptor's schema (the host validates with it before init) */
    assert_string_equal(schema_error("{}"), "");
    assert_string_equal(schema_error("{\"max_retries\":\"5\"}"),
                        "$.max_retries: expected integer, got string");
    assert_string_equal(schema_error("{\"max_retries\":-1}"),
                        "$.max_retries: -1 is less than the minimum 0");
    assert_string_equal(schema_error("{\"jitter_ratio\":2}"),
                        "$.jitter_ratio: 2 is greater than the maximum 1");
    assert_string_equal(schema_error("{\"mode\":\"sometimes\"}"),
                        "$.mode: value is not one of [\"normal\",\"always\"]");
    assert_string_equal(schema_error("{\"retryable_codes\":[\"SERVER\",3]}"),
                        "$.retryable_codes[1]: expected string, got integer");
    assert_string_equal(schema_error("{\"retries\":3}"), "$.retries: property is not allowed");
    assert_string_equal(schema_error("{\"providers\":{\"p\":{\"providers\":{}}}}"),
                        "$.providers.p.providers: property is not allowed");
    assert_string_equal(schema_error("{\"providers\":{\"p\":{\"max_delay_ms\":1.5}}}"),
                        "$.providers.p.max_delay_ms: expected integer, got number");

    /* the plugin's own parse says the same about the field */
    assert_string_equal(parse_error("{\"max_retries\":\"5\"}"),
                        "max_retries: expected a non-negative integer");
    assert_string_equal(parse_error("{\"initial_delay_ms\":-1}"),
                        "initial_delay_ms: expected a non-negative integer");
    assert_string_equal(parse_error("{\"max_delay_ms\":2.5}"),
                        "max_delay_ms: expected a non-negative integer");
    assert_string_equal(parse_error("{\"jitter_ratio\":1.5}"),
                        "jitter_ratio: expected a number from 0 to 1");
    assert_string_equal(parse_error("{\"mode\":\"sometimes\"}"),
                        "mode: expected \"normal\" or \"always\"");
    assert_string_equal(parse_error("{\"retryable_codes\":\"SERVER\"}"),
                        "retryable_codes: expected an array of failure codes");
    assert_string_equal(parse_error("{\"retryable_codes\":[\"SERVER\",\"\"]}"),
                        "retryable_codes[1]: expected a failure code string");
    assert_string_equal(parse_error("{\"providers\":[]}"),
                        "providers: expected an object of provider id -> policy");
    assert_string_equal(parse_error("{\"providers\":{\"p\":3}}"),
                        "providers.p: expected an object");
    assert_string_equal(parse_error("{\"providers\":{\"p\":{\"jitter_ratio\":\"x\"}}}"),
                        "providers.p.jitter_ratio: expected a number from 0 to 1");
    assert_string_equal(parse_error("[]"), "config: expected an object");
    /* 3.0 is an integer to the schema, so the parse takes it too */
    retry_config cfg;
    parse_ok("{\"max_retries\":3.0,\"retryable_codes\":[]}", &cfg);
    assert_int_equal(cfg.base.max_retries, 3);
    assert_int_equal(cfg.base.ncodes, 0);
    retry_config_clear(&cfg);
}

static void time_budget_stops_a_wait_that_would_end_past_it(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok("{\"jitter_ratio\":0,\"initial_delay_ms\":1000,\"max_delay_ms\":100000,"
             "\"max_retries\":10,\"max_elapsed_ms\":5000}",
             &cfg);
    json_t *f = failure("SERVER", 0);
    retry_plan plan;
    /* retry 3 waits 4000: from 1000 ms it ends at 5000, exactly the budget */
    assert_int_equal(retry_decide(&cfg.base, f, 2, 1000, 0.5, &plan), RETRY_WAIT);
    assert_int_equal(plan.delay_ms, 4000);
    assert_int_equal(plan.spent, RETRY_SPENT_NONE);
    /* from 1001 ms it would end past it: not started, though retries are left */
    assert_int_equal(retry_decide(&cfg.base, f, 2, 1001, 0.5, &plan), RETRY_DELEGATE);
    assert_int_equal(plan.spent, RETRY_SPENT_TIME);
    assert_int_equal(plan.delay_ms, 4000); /* the wait it did not start */
    /* already past the budget (a slow request) */
    assert_int_equal(retry_decide(&cfg.base, f, 0, 6000, 0.5, &plan), RETRY_DELEGATE);
    assert_int_equal(plan.spent, RETRY_SPENT_TIME);
    /* a Retry-After counts against it too */
    json_t *ra = failure("RATE_LIMIT", 3000);
    assert_int_equal(retry_decide(&cfg.base, ra, 0, 2500, 0.5, &plan), RETRY_DELEGATE);
    assert_int_equal(plan.spent, RETRY_SPENT_TIME);
    json_decref(ra);
    /* the other reasons keep their own names */
    assert_int_equal(retry_decide(&cfg.base, f, 10, 0, 0.5, &plan), RETRY_DELEGATE);
    assert_int_equal(plan.spent, RETRY_SPENT_RETRIES);
    json_t *auth = failure("AUTH", 0), *late = failure("RATE_LIMIT", 200000);
    assert_int_equal(retry_decide(&cfg.base, auth, 0, 0, 0.5, &plan), RETRY_DELEGATE);
    assert_int_equal(plan.spent, RETRY_SPENT_CODE);
    assert_int_equal(retry_decide(&cfg.base, late, 0, 0, 0.5, &plan), RETRY_DELEGATE);
    assert_int_equal(plan.spent, RETRY_SPENT_RETRY_AFTER);
    json_decref(auth);
    json_decref(late);
    retry_config_clear(&cfg);
    /* always mode has no time budget */
    parse_ok("{\"mode\":\"always\",\"max_elapsed_ms\":10}", &cfg);
    assert_int_equal(retry_decide(&cfg.base, f, 3, 999999, 0.5, &plan), RETRY_WAIT);
    retry_config_clear(&cfg);
    json_decref(f);
}

static void the_time_budget_is_kept_per_step_and_route(void **state) {
    (void)state;
    retry_budgets b = {0};
    retry_counter *c = retry_budgets_get(&b, "a", "p", "m1", 1, 1);
    c->count = 2;
    c->timed = true;
    c->first_ms = 77;
    /* another model of the same provider is another route */
    retry_counter *other = retry_budgets_get(&b, "a", "p", "m2", 1, 1);
    assert_int_equal(other->count, 0);
    assert_false(other->timed);
    c = retry_budgets_get(&b, "a", "p", "m1", 1, 1);
    assert_int_equal(c->count, 2);
    assert_true(c->timed);
    assert_int_equal(c->first_ms, 77);
    /* a new step starts both budgets afresh */
    c = retry_budgets_get(&b, "a", "p", "m1", 1, 2);
    assert_int_equal(c->count, 0);
    assert_false(c->timed);
    assert_non_null(retry_budgets_get(&b, "a", "p", NULL, 1, 2)); /* model unknown: "" */
    assert_int_equal(b.n, 3);
    retry_budgets_clear(&b);
}

/* Record `n` outcomes at time `t` (+ `step_ms` each) and return the last change. */
static retry_breaker_change feed(retry_breaker *b, const retry_breaker_cfg *cfg, int n,
                                 retry_breaker_outcome outcome, uint64_t *t, uint64_t step_ms) {
    retry_breaker_change ch = {0};
    for (int i = 0; i < n; i++) {
        uint64_t ticket = 0, left = 0;
        retry_breaker_change admit_ch;
        assert_int_equal(retry_breaker_admit_request(b, cfg, *t, &ticket, &left, &admit_ch),
                         BREAKER_PASS);
        assert_int_equal(retry_breaker_record(b, cfg, ticket, outcome, *t, &ch), 0);
        *t += step_ms;
    }
    return ch;
}

static void breaker_opens_after_consecutive_failures_within_the_window(void **state) {
    (void)state;
    retry_breaker_cfg cfg = {true, 3, 1000, 5000};
    retry_breakers bs = {0};
    retry_breaker *b = retry_breakers_get(&bs, "p");
    assert_non_null(b);
    uint64_t t = 10000;
    retry_breaker_change ch = feed(b, &cfg, 2, BREAKER_FAILED, &t, 100);
    assert_false(ch.changed);
    /* an answer (success or a non-retryable failure) ends the streak */
    feed(b, &cfg, 1, BREAKER_ANSWERED, &t, 100);
    assert_int_equal(b->streak, 0);
    /* a request without an outcome counts for nothing */
    feed(b, &cfg, 2, BREAKER_FAILED, &t, 100);
    feed(b, &cfg, 1, BREAKER_NONE, &t, 100);
    assert_int_equal(b->streak, 2);
    ch = feed(b, &cfg, 1, BREAKER_FAILED, &t, 100);
    assert_true(ch.changed);
    assert_int_equal(ch.to, BREAKER_OPEN);
    assert_int_equal(ch.failures, 3);
    assert_int_equal(ch.cooldown_ms, 5000);
    assert_string_equal(retry_breaker_state_name(ch.to), "open");
    assert_ptr_equal(retry_breakers_get(&bs, "p"), b);
    assert_int_equal(retry_breakers_get(&bs, "q")->state, BREAKER_CLOSED); /* per provider */
    retry_breakers_clear(&bs);
    retry_breakers_clear(NULL);
}

static void breaker_window_slides_over_the_last_failures(void **state) {
    (void)state;
    retry_breaker_cfg cfg = {true, 3, 1000, 5000};
    retry_breakers bs = {0};
    retry_breaker *b = retry_breakers_get(&bs, "p");
    uint64_t t = 0;
    /* failures at 0, 600, 1200: the three span 1200 > 1000, still closed */
    retry_breaker_change ch = feed(b, &cfg, 3, BREAKER_FAILED, &t, 600);
    assert_false(ch.changed);
    assert_int_equal(b->streak, 3);
    /* at 1300 the last three are 600, 1200, 1300: within 1000, it opens */
    t = 1300;
    ch = feed(b, &cfg, 1, BREAKER_FAILED, &t, 0);
    assert_true(ch.changed);
    assert_int_equal(ch.failures, 4);
    retry_breakers_clear(&bs);
}

static void breaker_half_opens_after_the_cooldown_for_exactly_one_probe(void **state) {
    (void)state;
    retry_breaker_cfg cfg = {true, 1, 1000, 5000};
    retry_breakers bs = {0};
    retry_breaker *b = retry_breakers_get(&bs, "p");
    uint64_t t = 100, ticket = 0, left = 0;
    retry_breaker_change ch = feed(b, &cfg, 1, BREAKER_FAILED, &t, 0);
    assert_int_equal(ch.to, BREAKER_OPEN);
    /* open: rejected with the cooldown left */
    assert_int_equal(retry_breaker_admit_request(b, &cfg, 1100, &ticket, &left, &ch),
                     BREAKER_REJECT);
    assert_int_equal(left, 4000);
    assert_false(ch.changed);
    /* a request that was in flight before it opened changes nothing now */
    assert_int_equal(retry_breaker_record(b, &cfg, 12345, BREAKER_ANSWERED, 1200, &ch), 0);
    assert_false(ch.changed);
    assert_int_equal(b->state, BREAKER_OPEN);
    /* the cooldown passed: one probe, reported as half_open */
    uint64_t probe = 0;
    assert_int_equal(retry_breaker_admit_request(b, &cfg, 5100, &probe, &left, &ch),
                     BREAKER_PROBE);
    assert_true(ch.changed);
    assert_int_equal(ch.to, BREAKER_HALF_OPEN);
    assert_int_equal(ch.failures, 1);
    /* every other request meanwhile is rejected, with no cooldown left to wait */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(retry_breaker_admit_request(b, &cfg, 5200, &ticket, &left, &ch),
                         BREAKER_REJECT);
        assert_int_equal(left, 0);
        assert_false(ch.changed);
    }
    /* a probe without an outcome hands its slot to the next request */
    assert_int_equal(retry_breaker_record(b, &cfg, probe, BREAKER_NONE, 5300, &ch), 0);
    assert_false(ch.changed);
    assert_int_equal(retry_breaker_admit_request(b, &cfg, 5400, &probe, &left, &ch),
                     BREAKER_PROBE);
    assert_false(ch.changed); /* already half-open */
    /* the probe answered: closed */
    assert_int_equal(retry_breaker_record(b, &cfg, probe, BREAKER_ANSWERED, 5500, &ch), 0);
    assert_true(ch.changed);
    assert_int_equal(ch.to, BREAKER_CLOSED);
    assert_int_equal(ch.failures, 0);
    assert_int_equal(retry_breaker_admit_request(b, &cfg, 5600, &ticket, &left, &ch),
                     BREAKER_PASS);
    retry_breakers_clear(&bs);
}

static void breaker_reopens_when_the_probe_fails(void **state) {
    (void)state;
    retry_breaker_cfg cfg = {true, 2, 1000, 5000};
    retry_breakers bs = {0};
    retry_breaker *b = retry_breakers_get(&bs, "p");
    uint64_t t = 0, probe = 0, left = 0;
    retry_breaker_change ch = feed(b, &cfg, 2, BREAKER_FAILED, &t, 10);
    assert_int_equal(ch.to, BREAKER_OPEN);
    assert_int_equal(retry_breaker_admit_request(b, &cfg, 6000, &probe, &left, &ch),
                     BREAKER_PROBE);
    assert_int_equal(retry_breaker_record(b, &cfg, probe, BREAKER_FAILED, 6100, &ch), 0);
    assert_true(ch.changed);
    assert_int_equal(ch.to, BREAKER_OPEN);
    assert_int_equal(ch.failures, 3);
    /* a fresh cooldown from the probe's failure */
    assert_int_equal(retry_breaker_admit_request(b, &cfg, 11000, &probe, &left, &ch),
                     BREAKER_REJECT);
    assert_int_equal(left, 100);
    assert_int_equal(retry_breaker_admit_request(b, &cfg, 11100, &probe, &left, &ch),
                     BREAKER_PROBE);
    retry_breakers_clear(&bs);
}

static void new_keys_are_validated_and_inherited(void **state) {
    (void)state;
    assert_string_equal(schema_error("{\"breaker\":false,\"max_elapsed_ms\":0,"
                                     "\"fallback\":[{\"provider\":\"b\",\"model\":\"m\"}]}"),
                        "");
    assert_string_equal(schema_error("{\"breaker\":{\"failures\":3}}"), "");
    assert_string_equal(schema_error("{\"max_elapsed_ms\":-1}"),
                        "$.max_elapsed_ms: -1 is less than the minimum 0");
    assert_non_null(strstr(schema_error("{\"breaker\":{\"failures\":0}}"), "$.breaker"));
    assert_non_null(strstr(schema_error("{\"breaker\":{\"open\":1}}"), "$.breaker"));
    assert_string_equal(schema_error("{\"fallback\":[{\"provider\":\"b\"}]}"),
                        "$.fallback[0].model: required property is missing");
    assert_string_equal(schema_error("{\"fallback\":[{\"provider\":\"b\",\"model\":\"m\","
                                     "\"x\":1}]}"),
                        "$.fallback[0].x: property is not allowed");

    assert_string_equal(parse_error("{\"max_elapsed_ms\":-1}"),
                        "max_elapsed_ms: expected a non-negative integer");
    assert_string_equal(parse_error("{\"breaker\":{\"failures\":0}}"),
                        "breaker.failures: expected an integer from 1 to 1000");
    assert_string_equal(parse_error("{\"breaker\":{\"cooldown_ms\":-5}}"),
                        "breaker.cooldown_ms: expected a non-negative integer");
    assert_string_equal(parse_error("{\"breaker\":\"on\"}"),
                        "breaker: expected false, true or {failures, window_ms, cooldown_ms}");
    assert_string_equal(parse_error("{\"fallback\":{}}"),
                        "fallback: expected an array of {provider, model}");
    assert_string_equal(parse_error("{\"providers\":{\"p\":{\"fallback\":[{\"provider\":\"\","
                                    "\"model\":\"m\"}]}}}"),
                        "providers.p.fallback[0]: expected {provider, model} (non-empty strings)");

    retry_config cfg;
    parse_ok("{\"max_elapsed_ms\":9000,\"breaker\":{\"failures\":3,\"cooldown_ms\":700},"
             "\"fallback\":[{\"provider\":\"b\",\"model\":\"mb\"},"
             "{\"provider\":\"c\",\"model\":\"mc\"}],"
             "\"providers\":{\"x\":{\"breaker\":{\"window_ms\":5}},\"y\":{\"breaker\":false,"
             "\"fallback\":[],\"max_elapsed_ms\":1}}}",
             &cfg);
    const retry_policy *base = &cfg.base, *x = retry_config_select(&cfg, "x"),
                       *y = retry_config_select(&cfg, "y");
    assert_int_equal(base->breaker.failures, 3);
    assert_int_equal(base->breaker.window_ms, 60000);
    assert_int_equal(base->breaker.cooldown_ms, 700);
    assert_int_equal(base->nfallback, 2);
    assert_string_equal(base->fallback[1].provider, "c");
    assert_string_equal(base->fallback[1].model, "mc");
    /* key by key for the breaker, the list as a whole for fallback */
    assert_true(x->breaker.enabled);
    assert_int_equal(x->breaker.failures, 3);
    assert_int_equal(x->breaker.window_ms, 5);
    assert_int_equal(x->breaker.cooldown_ms, 700);
    assert_int_equal(x->max_elapsed_ms, 9000);
    assert_int_equal(x->nfallback, 2);
    assert_string_equal(x->fallback[0].model, "mb");
    assert_false(y->breaker.enabled);
    assert_int_equal(y->nfallback, 0);
    assert_int_equal(y->max_elapsed_ms, 1);
    retry_config_clear(&cfg);
}

/* ------------------------------------------------------------------------ */
/* Through the host and driver                                               */
/* ------------------------------------------------------------------------ */

#define RETRY_ROW(cfg) "{\"id\":\"retry\",\"plugin\":\"retry\",\"config\":" cfg "}"

static const char *reason_kind(const dh *d, int turn_index) {
    const json_t *e = dh_find(d, "turn/end", turn_index);
    assert_non_null(e);
    return json_string_value(
        json_object_get(json_object_get(json_object_get(e, "data"), "reason"), "kind"));
}

static json_int_t int_field(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        fail_msg("%s is not an integer", key);
    return json_integer_value(v);
}

static const char *str_field(const json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    if (!s)
        fail_msg("%s is not a string", key);
    return s;
}

static void server_failures_are_retried_until_success(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"partial\",\"fail\":{\"code\":\"SERVER\",\"after_chunks\":1}},"
             "{\"fail\":{\"code\":\"SERVER\"}},"
             "{\"text\":\"Recovered.\",\"expect\":{\"messages_count\":1}}]}},"
             RETRY_ROW("{\"initial_delay_ms\":1,\"max_delay_ms\":4}") "]",
             NULL);
    dh_open(&d, "retry-ok");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "completed");
    dh_assert_types(&d, "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,"
                        "user/message,request/header,request/context,assistant/attempt,retry/wait,"
                        "retry/started,assistant/attempt,retry/wait,retry/started,"
                        "assistant/message,step/end,turn/end");
    assert_int_equal(dh_count(&d, "user/message"), 1); /* no re-admission */
    assert_int_equal(dh_count(&d, "drvtest/request"), 3);

    const json_t *r1 = dh_event_data(&d, "retry/wait", 0), *r2 = dh_event_data(&d, "retry/wait", 1);
    assert_int_equal(int_field(r1, "retry"), 1);
    assert_int_equal(int_field(r2, "retry"), 2);
    assert_int_equal(int_field(r1, "turn"), 1);
    assert_int_equal(int_field(r1, "step"), 1);
    assert_int_equal(int_field(r1, "max_retries"), 5);
    assert_string_equal(str_field(r1, "mode"), "normal");
    assert_string_equal(str_field(r1, "provider"), "scripted");
    assert_string_equal(str_field(json_object_get(r1, "failure"), "code"), "SERVER");
    assert_in_range(int_field(r1, "delay_ms"), 0, 4);
    assert_in_range(int_field(r2, "delay_ms"), 0, 4);
    /* one id for the step's retries, repeated by retry/started */
    assert_string_equal(str_field(r1, "retry_id"), str_field(r2, "retry_id"));
    const json_t *s2 = dh_event_data(&d, "retry/started", 1);
    assert_string_equal(str_field(s2, "retry_id"), str_field(r1, "retry_id"));
    assert_int_equal(int_field(s2, "retry"), 2);
    /* the failed partial output stays on its attempt, never in the history */
    assert_non_null(json_object_get(dh_event_data(&d, "assistant/attempt", 0), "failure"));
    json_t *msgs = weir_agent_messages(d.agent);
    char *text = json_dumps(msgs, JSON_COMPACT);
    assert_null(strstr(text, "partial"));
    assert_non_null(strstr(text, "Recovered."));
    free(text);
    json_decref(msgs);
    dh_teardown(&d);
}

static void retry_after_from_the_provider_is_the_delay(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"fail\":{\"code\":\"RATE_LIMIT\",\"retry_after_ms\":3}},"
             "{\"text\":\"ok\"}]}},"
             RETRY_ROW("{\"initial_delay_ms\":1,\"max_delay_ms\":50}") "]",
             NULL);
    dh_open(&d, "retry-after");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "completed");
    assert_int_equal(int_field(dh_event_data(&d, "retry/wait", 0), "delay_ms"), 3);
    dh_teardown(&d);
}

static void non_retryable_code_ends_the_turn_with_error(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"fail\":{\"code\":\"AUTH\",\"message\":\"bad key\"}},{\"text\":\"never\"}]}},"
             RETRY_ROW("{\"initial_delay_ms\":1}") "]",
             NULL);
    dh_open(&d, "retry-auth");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "error");
    const json_t *reason = json_object_get(dh_event_data(&d, "turn/end", 0), "reason");
    assert_string_equal(str_field(json_object_get(reason, "error"), "code"), "AUTH");
    assert_int_equal(dh_count(&d, "retry/wait"), 0);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 1);
    assert_int_equal(dh_count(&d, "drvtest/request"), 1);
    dh_teardown(&d);
}

static void exhausted_budget_ends_the_turn_with_the_last_failure(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
             "\"replies\":[{\"fail\":{\"code\":\"OVERLOADED\"}}]}},"
             RETRY_ROW("{\"max_retries\":2,\"initial_delay_ms\":1,\"max_delay_ms\":2}") "]",
             NULL);
    dh_open(&d, "retry-budget");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "error");
    /* 1 + max_retries requests */
    assert_int_equal(dh_count(&d, "drvtest/request"), 3);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 3);
    assert_int_equal(dh_count(&d, "retry/wait"), 2);
    assert_int_equal(dh_count(&d, "retry/started"), 2);
    dh_teardown(&d);
}

static void always_mode_lets_downstream_recovery_answer_first(void **state) {
    (void)state;
    dh d;
    /* "down" runs after retry in the chain: it retries the first failure itself
       and delegates the second, which the retry plugin then backs off */
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"fail\":{\"code\":\"AUTH\"}},{\"fail\":{\"code\":\"AUTH\"}},{\"text\":\"ok\"}]}},"
             RETRY_ROW("{\"mode\":\"always\",\"max_retries\":0,\"initial_delay_ms\":1,"
                       "\"max_delay_ms\":2}") ","
             "{\"id\":\"down\",\"plugin\":\"drvtest-hooks\",\"config\":{\"request_error\":"
             "{\"action\":\"retry\",\"times\":1}}}]",
             NULL);
    dh_open(&d, "retry-always");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "assistant/attempt"), 2);
    assert_int_equal(dh_count(&d, "retry/wait"), 1);
    const json_t *r = dh_event_data(&d, "retry/wait", 0);
    assert_string_equal(str_field(r, "mode"), "always");
    assert_null(json_object_get(r, "max_retries")); /* no budget in always mode */
    assert_int_equal(int_field(r, "retry"), 1);
    assert_string_equal(str_field(json_object_get(r, "failure"), "code"), "AUTH");
    dh_teardown(&d);
}

/* Cancel the turn as soon as the first retry/wait is durable. */
static void cancel_on_retry(dh *d, const json_t *event, bool durable) {
    if (durable && !strcmp(json_string_value(json_object_get(event, "type")), "retry/wait")) {
        d->count++;
        assert_int_equal(weir_agent_cancel(d->agent, "user", false), WEIR_OK);
    }
}

static void cancellation_during_backoff_aborts_without_another_request(void **state) {
    (void)state;
    dh d;
    /* a long backoff: only the cancellation can end the wait */
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"fail\":{\"code\":\"SERVER\"}},{\"text\":\"never\"}]}},"
             RETRY_ROW("{\"initial_delay_ms\":600000,\"max_delay_ms\":600000,"
                       "\"max_elapsed_ms\":1000000}") "]",
             NULL);
    d.on_event = cancel_on_retry;
    dh_open(&d, "retry-cancel");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(d.count, 1);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    assert_int_equal(dh_count(&d, "retry/wait"), 1);
    assert_int_equal(dh_count(&d, "retry/started"), 0);
    assert_int_equal(dh_count(&d, "drvtest/request"), 1);
    assert_int_equal(dh_count(&d, "assistant/message"), 0);
    assert_int_equal(dh_count(&d, "step/start"), 1);
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* Issue #11: time budget, breaker, fallback, composition                   */
/* ------------------------------------------------------------------------ */

#define FAKE_START 1000000u

/* Every test below runs on the host's fake clock: waits pass at once and
 * move it, and a test moves it past a cooldown itself. */
static int fake_clock(void **state) {
    (void)state;
    weir__clock_fake(FAKE_START);
    return 0;
}

static int real_clock(void **state) {
    (void)state;
    weir__clock_real();
    return 0;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *out = NULL;
    assert_true(vasprintf(&out, f, ap) >= 0);
    va_end(ap);
    return out;
}

/* A provider-openai row `id` pointed at the mock, model "m", no window probe. */
static char *openai_row(mock_llm *m, const char *id) {
    char *base = mock_llm_base_url(m);
    assert_non_null(base);
    char *row = fmt("{\"id\":\"%s\",\"plugin\":\"provider-openai\",\"config\":{"
                    "\"base_url\":\"%s/v1\",\"api_key\":\"k\",\"probe_windows\":false,"
                    "\"models\":{\"m\":{\"context_window\":100000,\"max_output\":256}}}}",
                    id, base);
    free(base);
    return row;
}

static mock_llm *start_mock(const char *script) {
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start(script, &m), 0);
    return m;
}

static const json_t *turn_error(const dh *d, int turn_index) {
    const json_t *e = dh_find(d, "turn/end", turn_index);
    assert_non_null(e);
    return json_object_get(json_object_get(json_object_get(e, "data"), "reason"), "error");
}

static void run_turn(dh *d, const char *text) {
    dh_send(d, text, WEIR_SEND_FOLLOWUP);
    dh_run(d);
}

/* The states of the recorded retry/breaker events, comma-joined (static buffer). */
static const char *breaker_states(const json_t *events) {
    static char out[512];
    size_t len = 0, i;
    const json_t *e;
    out[0] = '\0';
    json_array_foreach(events, i, e) {
        if (!json_object_get(e, "seq") ||
            strcmp(json_string_value(json_object_get(e, "type")), "retry/breaker") != 0)
            continue;
        const char *st = json_string_value(json_object_get(json_object_get(e, "data"), "state"));
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%s", len ? "," : "", st);
    }
    return out;
}

/* How many durable events of `type` the turn `turn` (1-based) holds. */
static int count_in_turn(const json_t *events, const char *type, json_int_t turn) {
    int n = 0;
    json_int_t cur = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(events, i, e) {
        const char *t = json_string_value(json_object_get(e, "type"));
        if (!json_object_get(e, "seq"))
            continue;
        if (!strcmp(t, "turn/start"))
            cur = json_integer_value(json_object_get(json_object_get(e, "data"), "turn"));
        else if (cur == turn && !strcmp(t, type))
            n++;
    }
    return n;
}

static void max_elapsed_ms_ends_a_sequence_that_has_retries_left(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
             "\"replies\":[{\"fail\":{\"code\":\"SERVER\",\"message\":\"upstream died\"}}]}},"
             RETRY_ROW("{\"max_retries\":10,\"initial_delay_ms\":1000,\"max_delay_ms\":100000,"
                       "\"jitter_ratio\":0,\"max_elapsed_ms\":5000,\"breaker\":false}") "]",
             NULL);
    dh_open(&d, "time-budget");
    run_turn(&d, "hi");
    /* waits of 1000 and 2000 ms end at 3000; the third (4000) would end past 5000 */
    assert_int_equal(dh_count(&d, "retry/wait"), 2);
    assert_int_equal(dh_count(&d, "drvtest/request"), 3);
    assert_int_equal(int_field(dh_event_data(&d, "retry/wait", 0), "elapsed_ms"), 0);
    assert_int_equal(int_field(dh_event_data(&d, "retry/wait", 1), "elapsed_ms"), 1000);
    assert_int_equal(int_field(dh_event_data(&d, "retry/wait", 1), "delay_ms"), 2000);
    assert_int_equal(int_field(dh_event_data(&d, "retry/wait", 1), "max_elapsed_ms"), 5000);
    assert_int_equal(weir__clock_ms(), FAKE_START + 3000); /* the waits ran on the host clock */
    assert_string_equal(reason_kind(&d, 0), "error");
    const json_t *e = turn_error(&d, 0);
    assert_string_equal(str_field(e, "code"), "SERVER"); /* the last failure ... */
    const char *msg = str_field(e, "message");           /* ... saying the time ran out */
    assert_non_null(strstr(msg, "the time budget is spent (max_elapsed_ms 5000: 3000 ms since "
                                "the first failure, 2 retries, and the next wait of 4000 ms "
                                "would end past it)"));
    assert_non_null(strstr(msg, "upstream died"));
    assert_string_equal(str_field(e, "provider"), "scripted");
    dh_teardown(&d);
}

/* breaker {failures:3}, max_retries 1, on the mock. */
static void breaker_opens_across_turns_fails_fast_and_the_probe_closes_it(void **state) {
    (void)state;
    mock_llm *m = start_mock("{\"requests\":[{\"fault\":\"server_error\"},{\"fault\":\"server_error\"},"
                             "{\"fault\":\"server_error\"},{\"text\":\"back again\"}]}");
    char *row = openai_row(m, "llm");
    char *rows = fmt("[%s," RETRY_ROW("{\"max_retries\":1,\"initial_delay_ms\":10,\"jitter_ratio\":0,"
                                      "\"breaker\":{\"failures\":3,\"window_ms\":60000,"
                                      "\"cooldown_ms\":30000}}") "]",
                     row);
    dh d;
    dh_setup(&d, rows, "{\"provider\":\"llm\",\"model\":\"m\"}");
    dh_open(&d, "breaker-turns");
    run_turn(&d, "one"); /* two failures: the retry budget ends the turn */
    assert_string_equal(str_field(turn_error(&d, 0), "code"), "SERVER");
    assert_int_equal(mock_llm_requests(m), 2);
    assert_string_equal(breaker_states(d.events), "");
    run_turn(&d, "two"); /* the third opens it; the retry fails at once */
    assert_int_equal(mock_llm_requests(m), 3);
    assert_string_equal(breaker_states(d.events), "open");
    const json_t *open = dh_event_data(&d, "retry/breaker", 0);
    assert_string_equal(str_field(open, "provider"), "llm");
    assert_int_equal(int_field(open, "failures"), 3);
    assert_int_equal(int_field(open, "cooldown_ms"), 30000);
    assert_int_equal(int_field(open, "turn"), 2);
    const json_t *e = turn_error(&d, 1);
    assert_string_equal(str_field(e, "code"), "OVERLOADED");
    assert_non_null(strstr(str_field(e, "message"), "provider 'llm': its circuit breaker is open "
                                                    "for 30.0 s more"));
    assert_string_equal(str_field(e, "breaker"), "open");
    run_turn(&d, "three"); /* open: fails at once, no request, no retry */
    assert_int_equal(mock_llm_requests(m), 3);
    assert_string_equal(str_field(turn_error(&d, 2), "code"), "OVERLOADED");
    assert_int_equal(count_in_turn(d.events, "retry/wait", 3), 0);
    assert_int_equal(count_in_turn(d.events, "assistant/attempt", 3), 1);
    weir__clock_advance(30000); /* the cooldown passes: one probe */
    run_turn(&d, "four");
    assert_int_equal(mock_llm_requests(m), 4);
    assert_string_equal(reason_kind(&d, 3), "completed");
    assert_string_equal(breaker_states(d.events), "open,half_open,closed");
    assert_int_equal(int_field(dh_event_data(&d, "retry/breaker", 1), "failures"), 3);
    assert_int_equal(int_field(dh_event_data(&d, "retry/breaker", 2), "failures"), 0);
    assert_int_equal(int_field(dh_event_data(&d, "retry/breaker", 2), "turn"), 4);
    dh_teardown(&d);
    mock_llm_stop(m);
    free(row);
    free(rows);
}

static void a_failed_probe_opens_the_breaker_again(void **state) {
    (void)state;
    mock_llm *m = start_mock("{\"loop\":true,\"requests\":[{\"fault\":\"overloaded\","
                             "\"retry_after\":\"\"}]}");
    char *row = openai_row(m, "llm");
    char *rows = fmt("[%s," RETRY_ROW("{\"max_retries\":0,\"breaker\":{\"failures\":2,"
                                      "\"cooldown_ms\":1000}}") "]",
                     row);
    dh d;
    dh_setup(&d, rows, "{\"provider\":\"llm\",\"model\":\"m\"}");
    dh_open(&d, "breaker-reopen");
    run_turn(&d, "one");
    run_turn(&d, "two");
    assert_int_equal(mock_llm_requests(m), 2);
    assert_string_equal(breaker_states(d.events), "open");
    weir__clock_advance(1000);
    run_turn(&d, "three"); /* the probe fails: open again, for a new cooldown */
    assert_int_equal(mock_llm_requests(m), 3);
    assert_string_equal(breaker_states(d.events), "open,half_open,open");
    assert_int_equal(int_field(dh_event_data(&d, "retry/breaker", 2), "failures"), 3);
    weir__clock_advance(999);
    run_turn(&d, "four");
    assert_int_equal(mock_llm_requests(m), 3); /* still open */
    assert_non_null(strstr(str_field(turn_error(&d, 3), "message"), "open for 0.0 s more"));
    weir__clock_advance(1);
    run_turn(&d, "five");
    assert_int_equal(mock_llm_requests(m), 4);
    assert_string_equal(breaker_states(d.events), "open,half_open,open,half_open,open");
    dh_teardown(&d);
    mock_llm_stop(m);
    free(row);
    free(rows);
}

/* A second agent on the dh's host, with its own event list. */
typedef struct agent2 {
    weir_agent *agent;
    json_t *events;
} agent2;

static void agent2_record(const json_t *event, bool durable, void *ud) {
    (void)durable;
    agent2 *a = ud;
    assert_int_equal(json_array_append_new(a->events, json_deep_copy(event)), 0);
}

static void agent2_open(dh *d, agent2 *a, const char *id) {
    a->events = json_array();
    weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
    o.session_id = id;
    o.on_event = agent2_record;
    o.user_data = a;
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_open(d->host, &o, &a->agent, &err) != WEIR_OK)
        fail_msg("weir_agent_open: %s", err.text);
}

static void agent2_turn(agent2 *a, const char *text) {
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_send_text(a->agent, text, WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    assert_int_equal(weir_agent_run_until_idle(a->agent, &err), WEIR_OK);
}

/* Close, check the log (weir_log_check, replay, derive == request), free. */
static void agent2_close(agent2 *a) {
    char *path = strdup(weir_agent_log_path(a->agent));
    json_t *msgs = weir_agent_messages(a->agent);
    weir_agent_close(a->agent);
    dh_check_log(path, msgs, false);
    json_decref(msgs);
    json_decref(a->events);
    free(path);
    memset(a, 0, sizeof *a);
}

static void the_breaker_is_shared_by_the_agents_of_one_host(void **state) {
    (void)state;
    mock_llm *m = start_mock("{\"requests\":[{\"fault\":\"server_error\"},{\"fault\":\"server_error\"},"
                             "{\"fault\":\"server_error\"},{\"text\":\"ok\"}]}");
    char *row = openai_row(m, "llm");
    char *rows = fmt("[%s," RETRY_ROW("{\"max_retries\":0,\"breaker\":{\"failures\":3,"
                                      "\"cooldown_ms\":30000}}") "]",
                     row);
    dh d;
    dh_setup(&d, rows, "{\"provider\":\"llm\",\"model\":\"m\"}");
    dh_open(&d, "shared-a");
    agent2 b;
    agent2_open(&d, &b, "shared-b");
    run_turn(&d, "a1");
    run_turn(&d, "a2");
    agent2_turn(&b, "b1"); /* the third failure is B's: B's log says it opened */
    assert_int_equal(mock_llm_requests(m), 3);
    assert_string_equal(breaker_states(b.events), "open");
    assert_string_equal(breaker_states(d.events), "");
    run_turn(&d, "a3"); /* A fails at once on B's breaker */
    assert_int_equal(mock_llm_requests(m), 3);
    assert_string_equal(str_field(turn_error(&d, 2), "code"), "OVERLOADED");
    weir__clock_advance(30000);
    run_turn(&d, "a4"); /* A's request is the probe, and closes it */
    assert_int_equal(mock_llm_requests(m), 4);
    assert_string_equal(reason_kind(&d, 3), "completed");
    assert_string_equal(breaker_states(d.events), "half_open,closed");
    assert_string_equal(breaker_states(b.events), "open");
    agent2_close(&b);
    dh_teardown(&d);
    mock_llm_stop(m);
    free(row);
    free(rows);
}

#define NCONC 4

static void *run_agent2(void *arg) {
    agent2_turn(arg, "go");
    return NULL;
}

/* Concurrent agents against a provider that is down: one transition to
 * open, and every attempt the breaker refused never reached the server. */
static void concurrent_agents_share_one_breaker_consistently(void **state) {
    (void)state;
    mock_llm *m = start_mock("{\"loop\":true,\"requests\":[{\"fault\":\"server_error\"}]}");
    char *row = openai_row(m, "llm");
    char *rows = fmt("[%s," RETRY_ROW("{\"max_retries\":3,\"initial_delay_ms\":1,"
                                      "\"max_delay_ms\":2,\"breaker\":{\"failures\":4,"
                                      "\"cooldown_ms\":600000}}") "]",
                     row);
    dh d;
    dh_setup(&d, rows, "{\"provider\":\"llm\",\"model\":\"m\"}");
    agent2 a[NCONC];
    pthread_t th[NCONC];
    for (int i = 0; i < NCONC; i++) {
        char id[32];
        snprintf(id, sizeof id, "conc-%d", i);
        agent2_open(&d, &a[i], id);
    }
    for (int i = 0; i < NCONC; i++)
        assert_int_equal(pthread_create(&th[i], NULL, run_agent2, &a[i]), 0);
    for (int i = 0; i < NCONC; i++)
        pthread_join(th[i], NULL);
    int opened = 0, attempts = 0, refused = 0;
    for (int i = 0; i < NCONC; i++) {
        size_t k;
        const json_t *e;
        json_array_foreach(a[i].events, k, e) {
            const char *t = json_string_value(json_object_get(e, "type"));
            const json_t *data = json_object_get(e, "data");
            if (!json_object_get(e, "seq"))
                continue;
            if (!strcmp(t, "retry/breaker"))
                opened += !strcmp(json_string_value(json_object_get(data, "state")), "open");
            if (!strcmp(t, "assistant/attempt")) {
                attempts++;
                refused += json_object_get(json_object_get(data, "failure"), "breaker") != NULL;
            }
        }
    }
    assert_int_equal(opened, 1);
    assert_int_equal(attempts - refused, mock_llm_requests(m));
    assert_true(refused >= 1);
    assert_in_range(mock_llm_requests(m), 4, NCONC * 4);
    for (int i = 0; i < NCONC; i++)
        agent2_close(&a[i]);
    dh_teardown(&d);
    mock_llm_stop(m);
    free(row);
    free(rows);
}

static const json_t *last_header_config(const dh *d) {
    const json_t *h = NULL;
    for (int i = 0; dh_find(d, "request/header", i); i++)
        h = dh_find(d, "request/header", i);
    assert_non_null(h);
    return json_object_get(json_object_get(json_object_get(h, "data"), "header"), "config");
}

static const json_t *last_of(const dh *d, const char *type) {
    const json_t *x = NULL;
    for (int i = 0; dh_find(d, type, i); i++)
        x = dh_find(d, type, i);
    assert_non_null(x);
    return json_object_get(x, "data");
}

static void fallback_answers_once_the_primary_is_spent(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
             "\"replies\":[{\"fail\":{\"code\":\"SERVER\",\"message\":\"primary down\"}}]}},"
             RETRY_ROW("{\"max_retries\":1,\"initial_delay_ms\":1,\"breaker\":false,"
                       "\"fallback\":[{\"provider\":\"backup\",\"model\":\"bm\"}]}") ","
             "{\"id\":\"backup\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"from the backup\",\"expect\":{\"messages_count\":1}},"
             "{\"text\":\"backup again\"}]}}]",
             NULL);
    dh_open(&d, "fallback");
    run_turn(&d, "hi");
    assert_string_equal(reason_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "user/message"), 1); /* the fallback re-admitted nothing */
    assert_int_equal(dh_count(&d, "retry/wait"), 1);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 2);
    const json_t *fb = dh_event_data(&d, "retry/fallback", 0);
    assert_string_equal(str_field(json_object_get(fb, "from"), "provider"), "scripted");
    assert_string_equal(str_field(json_object_get(fb, "from"), "model"), "demo");
    assert_string_equal(str_field(json_object_get(fb, "to"), "provider"), "backup");
    assert_string_equal(str_field(json_object_get(fb, "to"), "model"), "bm");
    assert_string_equal(str_field(fb, "reason"), "retries");
    assert_string_equal(str_field(json_object_get(fb, "failure"), "code"), "SERVER");
    /* the header and the context record the route really used */
    const json_t *cfg = last_header_config(&d);
    assert_string_equal(str_field(cfg, "provider"), "backup");
    assert_string_equal(str_field(cfg, "model"), "bm");
    assert_int_equal(int_field(cfg, "max_tokens"), 1024); /* the rest of the config stays */
    assert_string_equal(str_field(last_of(&d, "request/context"), "provider"), "backup");
    assert_string_equal(str_field(last_of(&d, "request/context"), "model"), "bm");
    /* the answer says which route answered; the failed attempts say theirs */
    const json_t *am = dh_event_data(&d, "assistant/message", 0);
    assert_string_equal(str_field(am, "provider"), "backup");
    assert_string_equal(str_field(am, "model"), "bm");
    assert_string_equal(str_field(dh_event_data(&d, "assistant/attempt", 0), "provider"),
                        "scripted");
    assert_string_equal(str_field(dh_event_data(&d, "assistant/attempt", 0), "model"), "demo");
    /* the next turn starts on the primary again, then falls back again */
    run_turn(&d, "again");
    assert_string_equal(reason_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "retry/fallback"), 2);
    assert_int_equal(count_in_turn(d.events, "request/header", 2), 2);
    const json_t *h2 = dh_find(&d, "request/header", 2); /* turn 2's first request */
    assert_string_equal(str_field(json_object_get(json_object_get(json_object_get(h2, "data"),
                                                                  "header"),
                                                  "config"),
                                  "provider"),
                        "scripted");
    assert_string_equal(str_field(last_of(&d, "assistant/message"), "provider"), "backup");
    dh_teardown(&d);
}

static void fallback_is_at_once_on_an_open_breaker(void **state) {
    (void)state;
    mock_llm *m = start_mock("{\"loop\":true,\"requests\":[{\"fault\":\"server_error\"}]}");
    char *row = openai_row(m, "llm");
    char *rows = fmt("[%s," RETRY_ROW("{\"max_retries\":5,\"initial_delay_ms\":1,"
                                      "\"breaker\":{\"failures\":2},"
                                      "\"fallback\":[{\"provider\":\"backup\",\"model\":\"bm\"}]}")
                     ",{\"id\":\"backup\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"loop\":true,\"replies\":[{\"text\":\"backup here\"}]}}]",
                     row);
    dh d;
    dh_setup(&d, rows, "{\"provider\":\"llm\",\"model\":\"m\"}");
    dh_open(&d, "fallback-breaker");
    run_turn(&d, "one"); /* two failures open it; the next retry is refused and falls back */
    assert_string_equal(reason_kind(&d, 0), "completed");
    assert_int_equal(mock_llm_requests(m), 2);
    assert_int_equal(dh_count(&d, "retry/wait"), 2);
    assert_string_equal(str_field(dh_event_data(&d, "retry/fallback", 0), "reason"), "breaker");
    assert_string_equal(
        str_field(json_object_get(dh_event_data(&d, "retry/fallback", 0), "failure"), "breaker"),
        "open");
    run_turn(&d, "two"); /* refused at once, no wait, no request: the backup answers */
    assert_string_equal(reason_kind(&d, 1), "completed");
    assert_int_equal(mock_llm_requests(m), 2);
    assert_int_equal(count_in_turn(d.events, "retry/wait", 2), 0);
    assert_int_equal(count_in_turn(d.events, "retry/fallback", 2), 1);
    assert_string_equal(str_field(last_of(&d, "assistant/message"), "provider"), "backup");
    assert_string_equal(str_field(last_header_config(&d), "provider"), "backup");
    dh_teardown(&d);
    mock_llm_stop(m);
    free(row);
    free(rows);
}

static void fallback_is_at_once_on_quota_and_routes_go_in_order(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"fail\":{\"code\":\"QUOTA\",\"message\":\"out of credit\"}}]}},"
             "{\"id\":\"second\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"fail\":{\"code\":\"AUTH\",\"message\":\"bad key\"}}]}},"
             "{\"id\":\"third\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"never\"}]}},"
             RETRY_ROW("{\"initial_delay_ms\":1,\"fallback\":[{\"provider\":\"scripted\","
                       "\"model\":\"demo\"},{\"provider\":\"second\",\"model\":\"s\"},"
                       "{\"provider\":\"third\",\"model\":\"t\"}]}") "]",
             NULL);
    dh_open(&d, "fallback-quota");
    run_turn(&d, "hi");
    /* QUOTA: the next route at once (the primary itself is skipped); AUTH on it
       is terminal: a fallback is for a route that is spent or down */
    assert_int_equal(dh_count(&d, "retry/wait"), 0);
    assert_int_equal(dh_count(&d, "retry/fallback"), 1);
    const json_t *fb = dh_event_data(&d, "retry/fallback", 0);
    assert_string_equal(str_field(fb, "reason"), "quota");
    assert_string_equal(str_field(json_object_get(fb, "to"), "provider"), "second");
    assert_string_equal(reason_kind(&d, 0), "error");
    assert_string_equal(str_field(turn_error(&d, 0), "code"), "AUTH");
    dh_teardown(&d);
}

static void a_fallback_route_without_a_provider_row_is_a_load_error(void **state) {
    (void)state;
    const char *cases[][2] = {
        {"{\"fallback\":[{\"provider\":\"scripted\",\"model\":\"m\"},"
         "{\"provider\":\"nope\",\"model\":\"m\"}]}",
         "plugin 'retry' (row 'retry'): fallback[1].provider: no provider row 'nope'"},
        {"{\"providers\":{\"scripted\":{\"fallback\":[{\"provider\":\"gone\",\"model\":\"m\"}]}}}",
         "plugin 'retry' (row 'retry'): providers.scripted.fallback[0].provider: no provider "
         "row 'gone'"},
        /* a row that is not a provider is no route either */
        {"{\"fallback\":[{\"provider\":\"retry\",\"model\":\"m\"}]}",
         "plugin 'retry' (row 'retry'): fallback[0].provider: no provider row 'retry'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_error_t je;
        json_t *rc = json_loads(cases[i][0], 0, &je);
        assert_non_null(rc);
        json_t *config = json_pack(
            "{s:{s:s, s:s}, s:[s, s], s:[{s:s, s:s, s:{s:[]}}, {s:s, s:s, s:o}]}", "agent",
            "provider", "scripted", "model", "demo", "plugin_path",
            getenv("WEIR_TEST_PLUGIN_DIR"), getenv("WEIR_TEST_DRIVER_PLUGIN_DIR"), "plugins",
            "id", "scripted", "plugin", "provider-scripted", "config", "replies", "id", "retry",
            "plugin", "retry", "config", rc);
        assert_non_null(config);
        weir_host *host = NULL;
        weir_error err;
        weir_error_clear(&err);
        int hrc = weir_host_create(config, &host, &err);
        assert_null(host);
        assert_string_equal(err.text, cases[i][1]);
        assert_int_equal(hrc, WEIR_E_PLUGIN_CONFIG);
        assert_string_equal(err.plugin, "retry");
        json_decref(config);
    }
    /* a route whose row comes after retry's is found */
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":[]}},"
             RETRY_ROW("{\"fallback\":[{\"provider\":\"later\",\"model\":\"m\"}]}") ","
             "{\"id\":\"later\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":[]}}]",
             NULL);
    dh_teardown(&d);
}

/*
 * Item 5: compaction's overflow recovery (max_overflow_retries 1) and retry
 * (max_retries 2) keep their own budgets in one step, whichever comes first
 * in the chain: RATE_LIMIT, overflow (compacted), RATE_LIMIT, RATE_LIMIT is
 * 1 + 2 + 1 requests, then the turn ends; the reply after is never asked for.
 */
static void compose_budgets(bool retry_first) {
    char a1[401];
    memset(a1, 'a', 400);
    a1[400] = '\0';
    const char *retry_row = RETRY_ROW("{\"max_retries\":2,\"initial_delay_ms\":1,"
                                      "\"max_delay_ms\":2,\"breaker\":false}");
    const char *compact_row =
        "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":"
        "{\"max_overflow_retries\":1}}";
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                     "\"models\":{\"demo\":{\"context_window\":1000,\"max_output\":100}},"
                     "\"replies\":[{\"text\":\"%s\"},"
                     "{\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\"}},"
                     "{\"fail\":{\"code\":\"CONTEXT_WINDOW_EXCEEDED\",\"message\":\"long\"}},"
                     "{\"text\":\"SUMMARY\"},"
                     "{\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\"}},"
                     "{\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"still slow\"}},"
                     "{\"text\":\"never\"}]}},%s,%s]",
                     a1, retry_first ? retry_row : compact_row,
                     retry_first ? compact_row : retry_row);
    dh d;
    dh_setup(&d, rows, NULL);
    free(rows);
    dh_open(&d, retry_first ? "compose-retry-first" : "compose-compact-first");
    run_turn(&d, "first question, long enough to be worth a summary");
    assert_string_equal(reason_kind(&d, 0), "completed");
    run_turn(&d, "second question");
    assert_string_equal(reason_kind(&d, 1), "error");
    assert_string_equal(str_field(turn_error(&d, 1), "code"), "RATE_LIMIT");
    assert_string_equal(str_field(turn_error(&d, 1), "message"), "still slow");
    assert_int_equal(count_in_turn(d.events, "assistant/attempt", 2), 1 + 2 + 1);
    assert_int_equal(count_in_turn(d.events, "retry/wait", 2), 2);
    assert_int_equal(count_in_turn(d.events, "compaction/start", 2), 1);
    assert_int_equal(count_in_turn(d.events, "step/start", 2), 1);
    json_t *msgs = weir_agent_messages(d.agent);
    char *text = json_dumps(msgs, JSON_COMPACT);
    assert_null(strstr(text, "never"));
    free(text);
    json_decref(msgs);
    dh_teardown(&d);
}

static void budgets_compose_with_compaction_retry_first(void **state) {
    (void)state;
    compose_budgets(true);
}

static void budgets_compose_with_compaction_compaction_first(void **state) {
    (void)state;
    compose_budgets(false);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_are_the_documented_ones),
        cmocka_unit_test(delays_double_and_cap),
        cmocka_unit_test(jitter_stays_within_bounds_for_rand_0_and_1),
        cmocka_unit_test(zero_delay_is_the_lower_jitter_bound),
        cmocka_unit_test(retry_after_is_used_verbatim),
        cmocka_unit_test(over_cap_retry_after_delegates_in_normal_mode),
        cmocka_unit_test(over_cap_retry_after_falls_back_to_backoff_in_always_mode),
        cmocka_unit_test(non_retryable_codes_delegate),
        cmocka_unit_test(empty_response_is_retried_by_default),
        cmocka_unit_test(budget_is_exhausted_after_max_retries),
        cmocka_unit_test(always_mode_has_no_budget),
        cmocka_unit_test(budgets_are_scoped_per_provider),
        cmocka_unit_test(config_validation_rejects_bad_types),
        cmocka_unit_test(server_failures_are_retried_until_success),
        cmocka_unit_test(retry_after_from_the_provider_is_the_delay),
        cmocka_unit_test(non_retryable_code_ends_the_turn_with_error),
        cmocka_unit_test(exhausted_budget_ends_the_turn_with_the_last_failure),
        cmocka_unit_test(always_mode_lets_downstream_recovery_answer_first),
        cmocka_unit_test(cancellation_during_backoff_aborts_without_another_request),
        cmocka_unit_test(time_budget_stops_a_wait_that_would_end_past_it),
        cmocka_unit_test(the_time_budget_is_kept_per_step_and_route),
        cmocka_unit_test(breaker_opens_after_consecutive_failures_within_the_window),
        cmocka_unit_test(breaker_window_slides_over_the_last_failures),
        cmocka_unit_test(breaker_half_opens_after_the_cooldown_for_exactly_one_probe),
        cmocka_unit_test(breaker_reopens_when_the_probe_fails),
        cmocka_unit_test(new_keys_are_validated_and_inherited),
#define FAKE(t) cmocka_unit_test_setup_teardown(t, fake_clock, real_clock)
        FAKE(max_elapsed_ms_ends_a_sequence_that_has_retries_left),
        FAKE(breaker_opens_across_turns_fails_fast_and_the_probe_closes_it),
        FAKE(a_failed_probe_opens_the_breaker_again),
        FAKE(the_breaker_is_shared_by_the_agents_of_one_host),
        FAKE(concurrent_agents_share_one_breaker_consistently),
        FAKE(fallback_answers_once_the_primary_is_spent),
        FAKE(fallback_is_at_once_on_an_open_breaker),
        FAKE(fallback_is_at_once_on_quota_and_routes_go_in_order),
        FAKE(a_fallback_route_without_a_provider_row_is_a_load_error),
        FAKE(budgets_compose_with_compaction_retry_first),
        FAKE(budgets_compose_with_compaction_compaction_first),
#undef FAKE
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
