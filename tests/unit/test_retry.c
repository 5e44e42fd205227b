/*
 * tests/unit/test_retry.c - the retry plugin: its pure policy
 * (plugins/retry/retry_policy.c: delays, jitter bounds, Retry-After,
 * delegation, budgets, config validation) and, through the real host and
 * driver with provider-scripted, the retry loop (llm/retry before each
 * retry, no user re-admission, terminal codes, cancellation in backoff).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "harness_check.h"
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
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0.0, &plan), RETRY_WAIT);
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
    assert_int_equal(retry_decide(&cfg.base, f, 2, 1.0, &plan), RETRY_WAIT);
    assert_int_equal(plan.retry, 3);
    assert_int_equal(plan.delay_ms, 1234); /* no jitter, no doubling */
    assert_true(plan.from_retry_after);
    json_decref(f);
    f = failure("RATE_LIMIT", 10000); /* exactly the cap is accepted */
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0.0, &plan), RETRY_WAIT);
    assert_int_equal(plan.delay_ms, 10000);
    json_decref(f);
    /* zero, negative or non-numeric values are not a Retry-After */
    const char *invalid[] = {"0", "-5", "\"soon\"", "null"};
    for (size_t i = 0; i < 4; i++) {
        f = failure("RATE_LIMIT", 0);
        json_object_set_new(f, "retry_after_ms", json_loads(invalid[i], JSON_DECODE_ANY, NULL));
        assert_int_equal(retry_decide(&cfg.base, f, 0, 0.5, &plan), RETRY_WAIT);
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
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0.5, &plan), RETRY_DELEGATE);
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
    assert_int_equal(retry_decide(&cfg.base, f, 1, 0.5, &plan), RETRY_WAIT);
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
        assert_int_equal(retry_decide(&cfg.base, f, 0, 0.5, &plan), RETRY_DELEGATE);
        json_decref(f);
    }
    json_t *nocode = json_pack("{s:s}", "message", "no code");
    assert_int_equal(retry_decide(&cfg.base, nocode, 0, 0.5, &plan), RETRY_DELEGATE);
    assert_false(retry_policy_retryable(&cfg.base, NULL));
    json_decref(nocode);
    retry_config_clear(&cfg);

    /* always mode retries permanent failures too */
    parse_ok("{\"mode\":\"always\"}", &cfg);
    json_t *f = failure("AUTH", 0);
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0.5, &plan), RETRY_WAIT);
    json_decref(f);
    retry_config_clear(&cfg);
}

static void empty_response_is_retried_by_default(void **state) {
    (void)state;
    retry_config cfg;
    parse_ok(NULL, &cfg);
    json_t *f = failure("EMPTY_RESPONSE", 0);
    retry_plan plan;
    assert_int_equal(retry_decide(&cfg.base, f, 0, 0.5, &plan), RETRY_WAIT);
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
        retry_counter *c = retry_budgets_get(b, agent, provider, turn, step);
        assert_non_null(c);
        retry_plan plan;
        if (retry_decide(retry_config_select(cfg, provider), f, c->count, 0.5, &plan) ==
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
                        "user/message,request/header,request/context,assistant/attempt,llm/retry,"
                        "llm/retry-started,assistant/attempt,llm/retry,llm/retry-started,"
                        "assistant/message,step/end,turn/end");
    assert_int_equal(dh_count(&d, "user/message"), 1); /* no re-admission */
    assert_int_equal(dh_count(&d, "drvtest/request"), 3);

    const json_t *r1 = dh_event_data(&d, "llm/retry", 0), *r2 = dh_event_data(&d, "llm/retry", 1);
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
    /* one id for the step's retries, repeated by llm/retry-started */
    assert_string_equal(str_field(r1, "retry_id"), str_field(r2, "retry_id"));
    const json_t *s2 = dh_event_data(&d, "llm/retry-started", 1);
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
    assert_int_equal(int_field(dh_event_data(&d, "llm/retry", 0), "delay_ms"), 3);
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
    assert_int_equal(dh_count(&d, "llm/retry"), 0);
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
    assert_int_equal(dh_count(&d, "llm/retry"), 2);
    assert_int_equal(dh_count(&d, "llm/retry-started"), 2);
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
    assert_int_equal(dh_count(&d, "llm/retry"), 1);
    const json_t *r = dh_event_data(&d, "llm/retry", 0);
    assert_string_equal(str_field(r, "mode"), "always");
    assert_null(json_object_get(r, "max_retries")); /* no budget in always mode */
    assert_int_equal(int_field(r, "retry"), 1);
    assert_string_equal(str_field(json_object_get(r, "failure"), "code"), "AUTH");
    dh_teardown(&d);
}

/* Cancel the turn as soon as the first llm/retry is durable. */
static void cancel_on_retry(dh *d, const json_t *event, bool durable) {
    if (durable && !strcmp(json_string_value(json_object_get(event, "type")), "llm/retry")) {
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
             RETRY_ROW("{\"initial_delay_ms\":600000,\"max_delay_ms\":600000}") "]",
             NULL);
    d.on_event = cancel_on_retry;
    dh_open(&d, "retry-cancel");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(d.count, 1);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    assert_int_equal(dh_count(&d, "llm/retry"), 1);
    assert_int_equal(dh_count(&d, "llm/retry-started"), 0);
    assert_int_equal(dh_count(&d, "drvtest/request"), 1);
    assert_int_equal(dh_count(&d, "assistant/message"), 0);
    assert_int_equal(dh_count(&d, "step/start"), 1);
    dh_teardown(&d);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
