/*
 * tests/unit/test_driver_provenance.c - decision provenance and the fault
 * policy per row (docs/hooks.md, "Provenance", "Fault policy"): every
 * decision kind in one log with its row, pass-through hops logging nothing
 * (and "pass" under session.provenance "all"), "off" logging none;
 * on_error "skip", max_failures quarantine (and `weir hooks`' dump), and
 * budget_ms measured on the hop's own time; the keys' validation at load.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "testutil.h"

/* The hook/decision events' data, in log order (borrowed from the dh). */
static const json_t *decision(const dh *d, int n) {
    const json_t *e = dh_find(d, "hook/decision", n);
    return e ? json_object_get(e, "data") : NULL;
}

static const char *str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

/* The first decision `kind` (NULL when none); *count gets how many there are. */
static const json_t *find_kind(const dh *d, const char *kind, int *count) {
    const json_t *first = NULL, *v;
    *count = 0;
    for (int i = 0; (v = decision(d, i)); i++)
        if (!strcmp(str(v, "decision"), kind) && (*count)++ == 0)
            first = v;
    return first;
}

/* Decision `kind` was logged, by row `row` on `hook`. */
static const json_t *expect_kind(const dh *d, const char *kind, const char *row,
                                 const char *hook) {
    int n = 0;
    const json_t *v = find_kind(d, kind, &n);
    if (!v)
        fail_msg("no hook/decision %s", kind);
    assert_string_equal(str(v, "row"), row);
    assert_string_equal(str(v, "hook"), hook);
    assert_string_equal(str(v, "plugin"), "drvtest-hooks@0.1.0");
    assert_true(json_is_integer(json_object_get(v, "turn")));
    assert_true(json_is_integer(json_object_get(v, "step")));
    assert_true(json_is_integer(json_object_get(v, "latency_us")));
    return v;
}

/*
 * One turn that makes every decision kind: step 1's pre-step rewrites the
 * input (enter); agent/request: router rewrites what `fixed` answers
 * without weir_next() (rewrite, short-circuit); the first attempt fails and
 * `retry` retries; the tool calls: `gate` allows look without asking further
 * and denies rm; look's result is replaced by `replace` and `inject` adds a
 * context; at the end `steer` steers once and step 3's pre-step is rejected.
 */
#define EVERY_KIND                                                                         \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["      \
    "{\"text\":\"partial\",\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\","    \
    "\"retry_after_ms\":5,\"after_chunks\":1}},"                                            \
    "{\"text\":\"Looking.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"look\","             \
    "\"arguments\":{}},{\"id\":\"c2\",\"name\":\"rm\",\"arguments\":{}}]},"                 \
    "{\"text\":\"done\"}]}},"                                                               \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                 \
    "[{\"name\":\"look\",\"reply\":\"seen\"},{\"name\":\"rm\"}]}},"                         \
    "{\"id\":\"enter\",\"plugin\":\"drvtest-hooks\",\"config\":{\"pre_step\":"              \
    "{\"action\":\"rewrite\",\"text\":\"rewritten\",\"step\":1}}},"                         \
    "{\"id\":\"reject\",\"plugin\":\"drvtest-hooks\",\"config\":{\"pre_step\":"             \
    "{\"action\":\"reject\",\"reason\":\"enough\",\"step\":3}}},"                           \
    "{\"id\":\"router\",\"plugin\":\"drvtest-hooks\",\"config\":{\"request_model\":"        \
    "\"demo\"}},"                                                                           \
    "{\"id\":\"fixed\",\"plugin\":\"drvtest-hooks\",\"config\":{\"request_fixed\":"         \
    "{\"provider\":\"scripted\",\"model\":\"demo\"}}},"                                     \
    "{\"id\":\"retry\",\"plugin\":\"drvtest-hooks\",\"config\":{\"request_error\":"         \
    "{\"action\":\"retry\",\"times\":1}}},"                                                 \
    "{\"id\":\"gate\",\"plugin\":\"drvtest-hooks\",\"config\":{\"tool_gate\":"              \
    "{\"allow\":\"look\",\"deny\":\"rm\"}}},"                                               \
    "{\"id\":\"inject\",\"plugin\":\"drvtest-hooks\",\"config\":{\"post_inject\":"          \
    "\"see also\"}},"                                                                       \
    "{\"id\":\"replace\",\"plugin\":\"drvtest-hooks\",\"config\":{\"post_replace\":"        \
    "\"replaced\"}},"                                                                       \
    "{\"id\":\"steer\",\"plugin\":\"drvtest-hooks\",\"config\":{\"turn_stopping_steer\":"   \
    "{\"text\":\"one more\",\"times\":1}}}]"

static void run_every_kind(dh *d, const char *session, const char *id) {
    dh_setup_session(d, EVERY_KIND, NULL, session);
    dh_open(d, id);
    dh_send(d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(d);
    const json_t *end = dh_find(d, "turn/end", 0);
    assert_non_null(end);
    assert_string_equal(str(json_object_get(json_object_get(end, "data"), "reason"), "kind"),
                        "blocked");
}

static void every_decision_kind_is_logged_with_its_row(void **state) {
    (void)state;
    dh d;
    run_every_kind(&d, NULL, "every");
    const json_t *v = expect_kind(&d, "enter", "enter", "agent/pre-step");
    assert_int_equal(json_integer_value(json_object_get(v, "step")), 1);
    v = expect_kind(&d, "reject", "reject", "agent/pre-step");
    assert_string_equal(str(v, "detail"), "enough");
    assert_int_equal(json_integer_value(json_object_get(v, "step")), 3);
    v = expect_kind(&d, "rewrite", "router", "agent/request");
    assert_string_equal(str(v, "detail"), "scripted/demo");
    expect_kind(&d, "short-circuit", "fixed", "agent/request");
    expect_kind(&d, "retry", "retry", "agent/request-error");
    expect_kind(&d, "allow", "gate", "tools/pre-execute");
    v = expect_kind(&d, "deny", "gate", "tools/pre-execute");
    assert_string_equal(str(v, "detail"), "drvtest gate");
    expect_kind(&d, "replace", "replace", "tools/post-execute");
    expect_kind(&d, "inject", "inject", "tools/post-execute");
    v = expect_kind(&d, "steer", "steer", "agent/turn-stopping");
    assert_int_equal(json_integer_value(json_object_get(v, "turn")), 1);
    /* one decision each where the hop runs once */
    static const char *const once[] = {"enter", "reject", "retry", "allow", "deny",
                                       "replace", "inject", "steer"};
    for (size_t i = 0; i < sizeof once / sizeof once[0]; i++) {
        int n = 0;
        find_kind(&d, once[i], &n);
        assert_int_equal(n, 1);
    }
    /* the pass-through hops (record's llm/stream, the rows that asked
     * weir_next() and passed its value on) logged nothing */
    const json_t *e;
    for (int i = 0; (e = decision(&d, i)); i++) {
        assert_string_not_equal(str(e, "row"), "record");
        assert_string_not_equal(str(e, "decision"), "pass");
    }
    dh_teardown(&d); /* weir_log_check accepts the hook/decision events */
}

static void provenance_off_logs_no_decision(void **state) {
    (void)state;
    dh d;
    run_every_kind(&d, "{\"provenance\":\"off\"}", "off");
    assert_int_equal(dh_count(&d, "hook/decision"), 0);
    dh_teardown(&d);
}

#define ONE_REPLY                                                                          \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["      \
    "{\"text\":\"one\"},{\"text\":\"two\"},{\"text\":\"three\"}]}}"

static void pass_through_hops_log_nothing_unless_all(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ONE_REPLY "]", NULL);
    dh_open(&d, "quiet");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "hook/decision"), 0);
    dh_teardown(&d);

    dh_setup_session(&d, ONE_REPLY "]", NULL, "{\"provenance\":\"all\"}");
    dh_open(&d, "all");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    int n = 0;
    const json_t *v = find_kind(&d, "pass", &n);
    assert_non_null(v);
    assert_int_equal(n, dh_count(&d, "hook/decision"));
    assert_string_equal(str(v, "row"), "record");
    assert_string_equal(str(v, "hook"), "llm/stream");
    dh_teardown(&d);
}

/* Rows whose agent/request listener fails its first `fails` calls. */
static void setup_flaky(dh *d, const char *policy, int fails) {
    char rows[1024];
    snprintf(rows, sizeof rows,
             ONE_REPLY ",{\"id\":\"flaky\",\"plugin\":\"drvtest-hooks\",%s"
                       "\"config\":{\"request_fail\":%d,\"request_model\":\"demo\"}}]",
             policy, fails);
    dh_setup(d, rows, NULL);
}

static const char *turn_kind(const dh *d, int n) {
    const json_t *end = dh_find(d, "turn/end", n);
    assert_non_null(end);
    return str(json_object_get(json_object_get(end, "data"), "reason"), "kind");
}

static void on_error_skip_passes_a_failing_listener_over(void **state) {
    (void)state;
    dh d;
    setup_flaky(&d, "", 1); /* on_error "fail", the default: the turn fails */
    dh_open(&d, "fail");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(turn_kind(&d, 0), "error");
    dh_teardown(&d);

    setup_flaky(&d, "\"on_error\":\"skip\",", 1);
    dh_open(&d, "skip");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(turn_kind(&d, 0), "completed");
    int n = 0;
    const json_t *v = find_kind(&d, "skip", &n);
    assert_int_equal(n, 1);
    assert_string_equal(str(v, "row"), "flaky");
    assert_string_equal(str(v, "hook"), "agent/request");
    assert_string_equal(str(v, "detail"), "drvtest: request failure 1");
    dh_teardown(&d);
}

static void max_failures_quarantines_the_row(void **state) {
    (void)state;
    dh d;
    setup_flaky(&d, "\"on_error\":\"skip\",\"max_failures\":2,", 100);
    dh_open(&d, "quarantine");
    for (int t = 0; t < 3; t++) {
        dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
        dh_run(&d);
        assert_string_equal(turn_kind(&d, t), "completed");
    }
    /* two failures (skipped), then the row is passed over: no third call */
    int n = 0;
    find_kind(&d, "skip", &n);
    assert_int_equal(n, 2);
    assert_int_equal(dh_count(&d, "hook/quarantined"), 1);
    const json_t *q = json_object_get(dh_find(&d, "hook/quarantined", 0), "data");
    assert_string_equal(str(q, "row"), "flaky");
    assert_int_equal(json_integer_value(json_object_get(q, "failures")), 2);
    assert_string_equal(str(q, "error"), "drvtest: request failure 2");
    /* weir hooks (the live host's dump) says so */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(weir_host_dump_hooks(d.host, f), WEIR_OK);
    fclose(f);
    assert_non_null(strstr(text, "flaky  drvtest-hooks 0.1.0  [middle] before=- after=- "
                                 "on_error=skip max_failures=2  QUARANTINED"));
    free(text);
    dh_teardown(&d);

    /* on_error "fail": the failing turn quarantines, the next one runs */
    setup_flaky(&d, "\"max_failures\":1,", 100);
    dh_open(&d, "failq");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(turn_kind(&d, 0), "error");
    dh_send(&d, "again", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(turn_kind(&d, 1), "completed");
    assert_int_equal(dh_count(&d, "hook/quarantined"), 1);
    dh_teardown(&d);
}

static void budget_ms_warns_about_a_slow_hop_by_its_own_time(void **state) {
    (void)state;
    dh d;
    /* outer's budget (1 s) is half of what the slow row inside it sleeps
     * (2 s): its own time excludes what weir_next() took, so only `slow` is
     * reported.  The margins hold on a loaded machine and under valgrind. */
    dh_setup(&d,
             ONE_REPLY ",{\"id\":\"outer\",\"plugin\":\"drvtest-hooks\",\"budget_ms\":1000,"
                       "\"config\":{\"request_model\":\"demo\"}},"
                       "{\"id\":\"slow\",\"plugin\":\"drvtest-hooks\",\"budget_ms\":5,"
                       "\"config\":{\"request_sleep_ms\":2000}}]",
             NULL);
    dh_open(&d, "slow");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(turn_kind(&d, 0), "completed");
    assert_int_equal(dh_count(&d, "hook/slow"), 1);
    const json_t *s = json_object_get(dh_find(&d, "hook/slow", 0), "data");
    assert_string_equal(str(s, "row"), "slow");
    assert_string_equal(str(s, "hook"), "agent/request");
    assert_int_equal(json_integer_value(json_object_get(s, "budget_ms")), 5);
    assert_true(json_integer_value(json_object_get(s, "latency_us")) >= 2000000);
    dh_teardown(&d);
}

static int compose_text(const char *text, weir_error *err) {
    char *dir = wt_tmpdir("prov");
    char path[4096];
    snprintf(path, sizeof path, "%s/c.json", dir);
    assert_int_equal(wt_write_file(path, text), 0);
    const char *files[] = {path};
    json_t *out = NULL;
    weir_error_clear(err);
    int rc = weir_config_compose(files, 1, &out, err);
    json_decref(out);
    remove(path);
    rmdir(dir);
    free(dir);
    return rc;
}

static void policy_keys_are_validated_at_load(void **state) {
    (void)state;
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"plugins\":[{\"id\":\"a\",\"plugin\":\"x\",\"on_error\":\"ignore\"}]}",
         "$.plugins[0].on_error: must be \"fail\" or \"skip\", got \"ignore\""},
        {"{\"plugins\":[{\"id\":\"a\",\"plugin\":\"x\",\"max_failures\":0}]}",
         "$.plugins[0].max_failures: must be an integer >= 1, got 0"},
        {"{\"plugins\":[{\"id\":\"a\",\"plugin\":\"x\",\"budget_ms\":\"5\"}]}",
         "$.plugins[0].budget_ms: expected an integer >= 1, got a string"},
        {"{\"plugins\":[{\"id\":\"a\",\"plugin\":\"x\",\"budget_ms\":86400001}]}",
         "$.plugins[0].budget_ms: must be at most 86400000"},
        {"{\"session\":{\"provenance\":\"some\"}}",
         "$.session.provenance: must be \"decisions\", \"all\" or \"off\", got \"some\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        weir_error err;
        assert_int_equal(compose_text(bad[i].text, &err), WEIR_E_CONFIG);
        if (!strstr(err.text, bad[i].want))
            fail_msg("got:  %s\nwant: %s", err.text, bad[i].want);
    }
    /* an embedder's config that skipped the composer is refused by the host */
    json_t *cfg = json_pack("{s:[{s:s, s:s, s:s}]}", "plugins", "id", "a", "plugin", "x",
                            "on_error", "maybe");
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "on_error must be \"fail\" or \"skip\""));
    json_decref(cfg);
    cfg = json_pack("{s:{s:s}}", "session", "provenance", "most");
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "session.provenance"));
    json_decref(cfg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_decision_kind_is_logged_with_its_row),
        cmocka_unit_test(provenance_off_logs_no_decision),
        cmocka_unit_test(pass_through_hops_log_nothing_unless_all),
        cmocka_unit_test(on_error_skip_passes_a_failing_listener_over),
        cmocka_unit_test(max_failures_quarantines_the_row),
        cmocka_unit_test(budget_ms_warns_about_a_slow_hop_by_its_own_time),
        cmocka_unit_test(policy_keys_are_validated_at_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
