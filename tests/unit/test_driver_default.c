/*
 * tests/unit/test_driver_default.c - the built-in default deployment runs
 * the policy chain (issue #9 item 1): compaction-basic and retry come right
 * after the provider row, and a session on it compacts under pressure.
 *
 * The deployment is weir_config_compose() of no file (the scripted demo
 * route); only its session dir and the demo model's window are changed, the
 * window made small so that a few long prompts press on it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weir/weir.h>

#include "testutil.h"

/* The composed default deployment, sessions under `dir`. */
static json_t *default_deployment(const char *dir) {
    setenv("OPENAI_API_KEY", "", 1);
    setenv("ANTHROPIC_API_KEY", "", 1);
    setenv("WEIR_PLUGIN_PATH", wt_env("WEIR_TEST_PLUGIN_DIR"), 1); /* the built plugins */
    json_t *cfg = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_config_compose(NULL, 0, &cfg, &err) != WEIR_OK)
        fail_msg("compose: %s", err.text);
    json_object_set_new(json_object_get(cfg, "session"), "dir", json_string(dir));
    return cfg;
}

static void policy_rows_follow_the_provider(void **state) {
    (void)state;
    char *dir = wt_tmpdir("default");
    json_t *cfg = default_deployment(dir);
    const json_t *rows = json_object_get(cfg, "plugins");
    const char *want[] = {"provider-scripted", "compaction-basic", "retry", "system-prompt",
                          "tools-ffi"};
    assert_int_equal(json_array_size(rows), 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(rows, i), "plugin")),
                            want[i]);
    weir_host *host = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_host_create(cfg, &host, &err) != WEIR_OK)
        fail_msg("host: %s", err.text);
    weir_host_destroy(host);
    json_decref(cfg);
    wt_rmtree(dir);
    free(dir);
}

static void default_deployment_compacts(void **state) {
    (void)state;
    char *dir = wt_tmpdir("default");
    json_t *cfg = default_deployment(dir);
    json_t *demo = json_object_get(
        json_object_get(json_object_get(json_array_get(json_object_get(cfg, "plugins"), 0),
                                        "config"),
                        "models"),
        "demo");
    assert_non_null(demo);
    json_object_set_new(demo, "context_window", json_integer(1000));
    json_object_set_new(demo, "max_output", json_integer(50));
    weir_host *host = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_host_create(cfg, &host, &err) != WEIR_OK)
        fail_msg("host: %s", err.text);
    json_decref(cfg);
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_id = "pressed";
    weir_agent *agent = NULL;
    if (weir_agent_open(host, &opts, &agent, &err) != WEIR_OK)
        fail_msg("open: %s", err.text);
    for (int i = 0; i < 4; i++) {
        /* long prompts press on the window; the demo's short reply, as the
         * summary, shrinks them */
        char prompt[2048] = "Please keep in mind all of the following background: ";
        for (int k = 0; k < 8; k++)
            strcat(prompt, "the quick brown fox jumps over the lazy dog and keeps running. ");
        strcat(prompt, "Now say hello, then tell me what 2 to the power 10 is.");
        assert_int_equal(weir_agent_send_text(agent, prompt, WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
        if (weir_agent_run_until_idle(agent, &err) != WEIR_OK)
            fail_msg("turn %d: %s", i + 1, err.text);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s", weir_agent_log_path(agent));
    weir_agent_close(agent);
    weir_host_destroy(host);
    char *text = wt_read_file(path, NULL);
    assert_non_null(text);
    if (!strstr(text, "\"type\":\"compaction/end\"") || !strstr(text, "\"type\":\"compaction/summary\""))
        fail_msg("the default deployment never compacted under pressure:\n%s", text);
    free(text);
    json_t *report = NULL;
    assert_int_equal(weir_log_check(path, &report, &err), WEIR_OK);
    assert_true(json_is_true(json_object_get(report, "ok")));
    json_decref(report);
    wt_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(policy_rows_follow_the_provider),
        cmocka_unit_test(default_deployment_compacts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
