/*
 * tests/unit/test_config.c - deployment config composition (docs/plugins.md, docs/cli.md):
 * composition rules, ${VAR} expansion, validation messages, hostile input,
 * the built-in default deployment, and allocation failure.
 *
 * Data files live in tests/data/config/; the tests chdir there so error
 * messages carry the short file names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "testutil.h"
#include "weir/host.h"

/* ---- helpers --------------------------------------------------------------- */

static int setup_dir(void **state) {
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/config", wt_env("WEIR_TEST_DATA_DIR"));
    assert_int_equal(chdir(dir), 0);
    setenv("HOME", "/home/tester", 1);
    unsetenv("NOT_EXPANDED");
    unsetenv("WEIR_MODEL");
    unsetenv("WEIR_SESSION_DIR");
    unsetenv("OPENAI_BASE_URL");
    unsetenv("ANTHROPIC_BASE_URL");
    setenv("WEIR_PLUGIN_PATH", "", 1);
    setenv("OPENAI_API_KEY", "", 1);
    setenv("ANTHROPIC_API_KEY", "", 1);
    return 0;
}

/* Compose the NULL-terminated list of files; returns the status. */
static int compose(json_t **out, weir_error *err, ...) {
    const char *files[16];
    size_t n = 0;
    va_list ap;
    va_start(ap, err);
    for (const char *f; (f = va_arg(ap, const char *)) != NULL && n < 16;)
        files[n++] = f;
    va_end(ap);
    weir_error_clear(err);
    return weir_config_compose(files, n, out, err);
}

/* Compose must fail with `code` and exactly `message`. */
static void expect_error(int code, const char *message, const char *f1, const char *f2) {
    json_t *out = (json_t *)1;
    weir_error err;
    int rc = compose(&out, &err, f1, f2, (const char *)NULL);
    if (strcmp(err.text, message) != 0)
        fprintf(stderr, "got:  %s\nwant: %s\n", err.text, message);
    assert_int_equal(rc, code);
    assert_int_equal(err.code, code);
    assert_null(out);
    assert_string_equal(err.text, message);
}

/* `got` must equal the JSON in `want` (printed on mismatch). */
static void assert_json(const json_t *got, const char *want) {
    json_error_t je;
    json_t *w = json_loads(want, 0, &je);
    if (!w)
        fail_msg("bad expected JSON: %s", je.text);
    if (!json_equal(got, w)) {
        char *g = json_dumps(got, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fprintf(stderr, "got:  %s\nwant: %s\n", g, want);
        free(g);
    }
    assert_true(json_equal(got, w));
    json_decref(w);
}

/* The ids of the composed rows joined with ',' (e.g. "openai,prompt,math"). */
static void assert_ids(const json_t *cfg, const char *want) {
    char buf[512] = "";
    const json_t *rows = json_object_get(cfg, "plugins");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        if (i)
            strcat(buf, ",");
        strcat(buf, json_string_value(json_object_get(json_array_get(rows, i), "id")));
    }
    assert_string_equal(buf, want);
}

static const json_t *row(const json_t *cfg, const char *id) {
    const json_t *rows = json_object_get(cfg, "plugins");
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(rows, i), "id")), id) ==
            0)
            return json_array_get(rows, i);
    fail_msg("no row %s", id);
    return NULL;
}

/* ---- composition ------------------------------------------------------------ */

static void test_base_alone_composes_unchanged(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", NULL), WEIR_OK);
    assert_json(cfg,
                "{\"agent\":{\"provider\":\"openai\",\"model\":\"gpt-4o-mini\","
                "\"max_tokens\":4096,\"max_parallel_tool_calls\":10},"
                "\"session\":{\"dir\":\"/var/lib/weir/sessions\",\"fsync\":\"step\"},"
                "\"plugin_path\":[\"/opt/weir/plugins\"],\"plugins\":["
                "{\"id\":\"openai\",\"plugin\":\"provider-openai\",\"config\":{"
                "\"base_url\":\"https://api.openai.com/v1\",\"api_key\":\"sk-base\"}},"
                "{\"id\":\"prompt\",\"plugin\":\"system-prompt\","
                "\"config\":{\"text\":\"You are a careful assistant.\"}},"
                "{\"id\":\"math\",\"plugin\":\"tools-ffi\",\"config\":{\"tools\":[]}}]}");
    json_decref(cfg);
}

static void test_overlay_replaces_row_config_and_plugin(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", "replace.json", NULL), WEIR_OK);
    assert_ids(cfg, "openai,prompt,math");
    assert_json(row(cfg, "prompt"), "{\"id\":\"prompt\",\"plugin\":\"system-prompt\","
                                    "\"config\":{\"text\":\"Be brief.\"}}");
    /* a relative plugin path is relative to the file that gives it */
    char want[4200], *dir = realpath(wt_env("WEIR_TEST_DATA_DIR"), NULL);
    assert_non_null(dir);
    snprintf(want, sizeof want,
             "{\"id\":\"openai\",\"plugin\":\"%s/config/custom/provider.so\",\"config\":{"
             "\"base_url\":\"https://api.openai.com/v1\",\"api_key\":\"sk-base\"}}",
             dir);
    free(dir);
    assert_json(row(cfg, "openai"), want);
    json_decref(cfg);
}

static void test_overlay_appends_new_rows(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", "append.json", NULL), WEIR_OK);
    assert_ids(cfg, "openai,prompt,math,retry,trace");
    assert_json(row(cfg, "retry"),
                "{\"id\":\"retry\",\"plugin\":\"retry\",\"config\":{\"max_retries\":5}}");
    assert_json(row(cfg, "trace"), "{\"id\":\"trace\",\"plugin\":\"trace\",\"config\":{}}");
    json_decref(cfg);
}

static void test_before_after_placement(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", "place.json", NULL), WEIR_OK);
    /* compact before prompt, local after openai, existing math moved first */
    assert_ids(cfg, "math,openai,local,compact,prompt");
    assert_json(row(cfg, "math"),
                "{\"id\":\"math\",\"plugin\":\"tools-ffi\",\"config\":{\"tools\":[]}}");
    json_decref(cfg);
}

static void test_disabled_removes_row(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", "disable.json", NULL), WEIR_OK);
    assert_ids(cfg, "openai,prompt");
    json_decref(cfg);
    /* in a base file, a disabled row is simply not added */
    assert_int_equal(compose(&cfg, &err, "disable.json", NULL), WEIR_OK);
    assert_ids(cfg, "");
    json_decref(cfg);
}

static void test_agent_session_merge_key_by_key(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", "agent-session.json", NULL), WEIR_OK);
    assert_json(json_object_get(cfg, "agent"),
                "{\"provider\":\"openai\",\"model\":\"gpt-4.1\",\"max_tokens\":4096,"
                "\"max_parallel_tool_calls\":10,\"temperature\":0.5}");
    assert_json(json_object_get(cfg, "session"),
                "{\"dir\":\"/var/lib/weir/sessions\",\"fsync\":\"always\"}");
    /* plugin_path is replaced, and its empty entries dropped */
    assert_json(json_object_get(cfg, "plugin_path"), "[\"/a\",\"/b\"]");
    json_decref(cfg);
}

static void test_later_files_win_in_order(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", "replace.json", "append.json",
                             "place.json", "disable.json", NULL),
                     WEIR_OK);
    assert_ids(cfg, "openai,local,compact,prompt,retry,trace");
    assert_json(json_object_get(row(cfg, "prompt"), "config"), "{\"text\":\"Be brief.\"}");
    json_decref(cfg);
}

/* ---- expansion ---------------------------------------------------------------- */

static void test_var_expansion_set_default_and_escape(void **state) {
    (void)state;
    setenv("WEIR_TEST_MODEL", "m1", 1);
    unsetenv("WEIR_TEST_UNSET_DIR");
    unsetenv("WEIR_TEST_UNSET_PATH");
    setenv("WEIR_TEST_EMPTY", "", 1);
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", "vars.json", NULL), WEIR_OK);
    assert_string_equal(weir__json_str(json_object_get(cfg, "agent"), "model", ""), "m1");
    /* default used, then ~/ becomes $HOME/ */
    assert_string_equal(weir__json_str(json_object_get(cfg, "session"), "dir", ""),
                        "/home/tester/sessions");
    /* a relative directory is relative to the file's (the cwd here, see setup_dir) */
    char cwd[2048], want[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(want, sizeof want, "[\"%s/pre-m1-post\"]", cwd);
    assert_json(json_object_get(cfg, "plugin_path"), want);
    assert_json(json_object_get(row(cfg, "prompt"), "config"),
                "{\"text\":\"costs $5, $ alone, ${HOME} literal\","
                "\"list\":[\"was-empty\",\"x\"],\"${WEIR_TEST_MODEL}\":\"keys stay\"}");
    json_decref(cfg);
    unsetenv("WEIR_TEST_MODEL");
    unsetenv("WEIR_TEST_EMPTY");
}

/* ---- relative plugin_path directories (issue #8, item 10c) ------------------ */

static void test_relative_plugin_path_is_relative_to_the_file(void **state) {
    (void)state;
    char cwd[2048], want[16384];
    assert_non_null(getcwd(cwd, sizeof cwd));
    json_t *cfg;
    weir_error err;
    /* each ':'-separated piece on its own; absolute pieces and "" stay; "." and
     * "./a" lose their "./"; the value of a variable is resolved too */
    assert_int_equal(compose(&cfg, &err, "relative-path.json", NULL), WEIR_OK);
    snprintf(want, sizeof want,
             "[\"%s/plugins\",\"%s/a:/abs::%s/b\",\"%s\",\"/opt/p\",\"%s/rel/x\"]", cwd,
             cwd, cwd, cwd, cwd);
    assert_json(json_object_get(cfg, "plugin_path"), want);
    json_decref(cfg);
    /* the file named by a relative path with directories: "./" is not kept */
    assert_int_equal(chdir(".."), 0);
    assert_int_equal(compose(&cfg, &err, "./config/relative-path.json", NULL), WEIR_OK);
    assert_int_equal(chdir("config"), 0);
    assert_string_equal(json_string_value(json_array_get(json_object_get(cfg, "plugin_path"), 0)),
                        strcat(strcpy(want, cwd), "/plugins"));
    json_decref(cfg);
    /* the built-in default keeps a relative $WEIR_PLUGIN_PATH as it is */
    setenv("WEIR_PLUGIN_PATH", "rel/plugins", 1);
    assert_int_equal(compose(&cfg, &err, NULL), WEIR_OK);
    assert_json(json_object_get(cfg, "plugin_path"), "[\"rel/plugins\"]");
    json_decref(cfg);
    setenv("WEIR_PLUGIN_PATH", "", 1);
}

/* ---- agent and session defaults, "default" (issue #14 item 2) ------------- */

static void test_agent_and_session_start_from_the_defaults(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    /* an overlay alone (no session object): the documented defaults */
    assert_int_equal(compose(&cfg, &err, "disable.json", NULL), WEIR_OK);
    assert_json(json_object_get(cfg, "agent"), "{\"max_tokens\":4096,\"max_parallel_tool_calls\":10}");
    assert_json(json_object_get(cfg, "session"),
                "{\"dir\":\"/home/tester/.local/state/weir/sessions\",\"fsync\":\"step\"}");
    json_decref(cfg);
    setenv("WEIR_SESSION_DIR", "/srv/sessions", 1);
    assert_int_equal(compose(&cfg, &err, "disable.json", NULL), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(cfg, "session"), "dir")),
                        "/srv/sessions");
    json_decref(cfg);
    unsetenv("WEIR_SESSION_DIR");
    /* what a file gives wins, key by key; HOME is not needed for a given dir */
    assert_int_equal(compose(&cfg, &err, "agent-session.json", NULL), WEIR_OK);
    assert_json(json_object_get(cfg, "session"),
                "{\"dir\":\"/home/tester/.local/state/weir/sessions\",\"fsync\":\"always\"}");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(cfg, "agent"),
                                                        "max_tokens")),
                     4096);
    json_decref(cfg);
    char *home = strdup(getenv("HOME"));
    unsetenv("HOME");
    assert_int_equal(compose(&cfg, &err, "base.json", NULL), WEIR_OK);
    json_decref(cfg);
    setenv("HOME", home, 1);
    free(home);
}

static void test_default_names_the_built_in_deployment(void **state) {
    (void)state;
    json_t *cfg, *plain;
    weir_error err;
    assert_int_equal(compose(&plain, &err, NULL), WEIR_OK);
    assert_int_equal(compose(&cfg, &err, WEIR_CONFIG_DEFAULT_NAME, NULL), WEIR_OK);
    assert_true(json_equal(cfg, plain));
    json_decref(cfg);
    /* default, then an overlay: the default's rows with the overlay's changes */
    assert_int_equal(compose(&cfg, &err, "default", "agent-session.json", NULL), WEIR_OK);
    assert_ids(cfg, "scripted,compaction,retry,prompt,math");
    assert_string_equal(json_string_value(json_object_get(json_object_get(cfg, "agent"), "model")),
                        "gpt-4.1");
    json_decref(cfg);
    json_decref(plain);
    /* an error in the default names it, not a file */
    char *home = strdup(getenv("HOME"));
    unsetenv("HOME");
    assert_int_equal(compose(&cfg, &err, "default", NULL), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "config (built-in default): $.session.dir"));
    setenv("HOME", home, 1);
    free(home);
}

static void test_unset_var_without_default_names_var_file_and_path(void **state) {
    (void)state;
    unsetenv("OPENAI_API_KEY");
    expect_error(WEIR_E_CONFIG,
                 "config b.json: $.plugins[0].config.api_key: variable OPENAI_API_KEY is not "
                 "set",
                 "base.json", "b.json");
    setenv("OPENAI_API_KEY", "sk-env", 1);
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose(&cfg, &err, "base.json", "b.json", NULL), WEIR_OK);
    assert_string_equal(weir__json_str(json_object_get(row(cfg, "openai"), "config"),
                                       "api_key", ""),
                        "sk-env");
    json_decref(cfg);
    setenv("OPENAI_API_KEY", "", 1);
}

static void test_malformed_var_reference(void **state) {
    (void)state;
    expect_error(WEIR_E_CONFIG,
                 "config malformed-var.json: $.session.dir: malformed variable reference "
                 "\"${WEIR_TEST MODEL}\" (expected ${NAME} or ${NAME:-default}; write $$ "
                 "for a literal $)",
                 "malformed-var.json", NULL);
    expect_error(WEIR_E_CONFIG,
                 "config unterminated-var.json: $.agent.model: malformed variable reference "
                 "\"${WEIR_TEST_MODEL:-abc\" (no closing '}')",
                 "unterminated-var.json", NULL);
}

static void test_expand_reports_bad_references_directly(void **state) {
    (void)state;
    static const struct {
        const char *text, *message;
    } cases[] = {
        {"${}", "config t: $[0]: malformed variable reference \"${}\" (expected ${NAME} or "
                "${NAME:-default}; write $$ for a literal $)"},
        {"${1A}", "config t: $[0]: malformed variable reference \"${1A}\" (expected ${NAME} "
                  "or ${NAME:-default}; write $$ for a literal $)"},
        {"x${", "config t: $[0]: malformed variable reference \"${\" (expected ${NAME} or "
                "${NAME:-default}; write $$ for a literal $)"},
        {"${A:-${B}}", "config t: $[0]: malformed variable reference \"${A:-${B}}\" (a "
                       "default cannot contain another ${...})"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v = json_pack("[s]", cases[i].text);
        weir_error err;
        weir_error_clear(&err);
        assert_int_equal(weir__config_expand(v, "t", &err), WEIR_E_CONFIG);
        assert_string_equal(err.text, cases[i].message);
        json_decref(v);
    }
    json_t *v = json_pack("{s:s,s:[s]}", "a", "$", "b", "$$$$x$");
    weir_error err;
    assert_int_equal(weir__config_expand(v, NULL, &err), WEIR_OK);
    assert_json(v, "{\"a\":\"$\",\"b\":[\"$$x$\"]}");
    json_decref(v);
    assert_int_equal(weir__config_expand(NULL, "t", &err), WEIR_E_INVAL);
}

static void test_var_value_must_be_utf8(void **state) {
    (void)state;
    setenv("WEIR_TEST_BYTES", "\xff\xfe", 1);
    json_t *v = json_pack("[s]", "${WEIR_TEST_BYTES}");
    weir_error err;
    assert_int_equal(weir__config_expand(v, "t", &err), WEIR_E_CONFIG);
    assert_string_equal(err.text, "config t: $[0]: variable WEIR_TEST_BYTES is not valid UTF-8");
    json_decref(v);
    unsetenv("WEIR_TEST_BYTES");
}

/* ---- errors ------------------------------------------------------------------- */

static void test_unknown_top_level_key(void **state) {
    (void)state;
    expect_error(WEIR_E_CONFIG,
                 "config unknown-key.json: $: unknown top-level key \"plugin\"; did you mean "
                 "\"plugins\"? (known: agent, session, telemetry, plugin_path, plugins, $schema, comment)",
                 "unknown-key.json", NULL);
}

static void test_parse_error_gives_line_and_column(void **state) {
    (void)state;
    expect_error(WEIR_E_CONFIG,
                 "config parse-error.json:4:3: string or '}' expected near '}'",
                 "base.json", "parse-error.json");
}

static void test_duplicate_keys_rejected(void **state) {
    (void)state;
    expect_error(WEIR_E_CONFIG,
                 "config duplicate-keys.json:1:32: duplicate object key near '\"model\"'",
                 "duplicate-keys.json", NULL);
}

static void test_missing_file_is_io_error(void **state) {
    (void)state;
    expect_error(WEIR_E_IO, "config no-such.json: cannot open: No such file or directory",
                 "base.json", "no-such.json");
    expect_error(WEIR_E_IO, "config .: cannot read: Is a directory", ".", NULL);
}

static void test_duplicate_ids(void **state) {
    (void)state;
    expect_error(WEIR_E_CONFIG,
                 "config duplicate-ids.json: $.plugins[2].id: duplicate plugin id \"a\" (also "
                 "at $.plugins[0])",
                 "duplicate-ids.json", NULL);
}

static void test_unknown_before_after_id(void **state) {
    (void)state;
    expect_error(WEIR_E_CONFIG,
                 "config unknown-anchor.json: $.plugins[0].after: unknown plugin id \"nosuch\"",
                 "base.json", "unknown-anchor.json");
}

static void test_type_errors_name_file_and_path(void **state) {
    (void)state;
    static const struct {
        const char *file, *message;
    } cases[] = {
        {"root-array.json", "config root-array.json: $: the root must be an object, not an "
                            "array"},
        {"bad-fsync.json", "config bad-fsync.json: $.session.fsync: must be \"always\", "
                           "\"step\" or \"none\", got \"sometimes\""},
        {"bad-parallel.json", "config bad-parallel.json: $.agent.max_parallel_tool_calls: "
                              "must be an integer >= 1, got 0"},
        {"bad-provider.json", "config bad-provider.json: $.agent.provider: expected a "
                              "string, got an integer"},
        {"bad-id.json", "config bad-id.json: $.plugins[1].id: \"has space\" is not a valid "
                        "plugin id (use letters, digits, '_', '.', '-')"},
        {"bad-row-key.json", "config bad-row-key.json: $.plugins[0]: unknown key \"confg\" "
                             "(known: id, plugin, config, disabled, before, after, on_error, "
                             "max_failures, budget_ms, share_roles)"},
        {"new-without-plugin.json", "config new-without-plugin.json: $.plugins[0]: new "
                                    "plugin id \"fresh\" needs a \"plugin\""},
        {"bad-types.json", "config bad-types.json: $.plugins[0].plugin: expected a string, "
                           "got an array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(WEIR_E_CONFIG, cases[i].message, "base.json", cases[i].file);
}

static void test_validate_checks_sections_directly(void **state) {
    (void)state;
    static const struct {
        const char *json, *message;
    } cases[] = {
        {"{\"agent\":[]}", "config c: $.agent: expected an object, got an array"},
        {"{\"session\":{\"dir\":false}}", "config c: $.session.dir: expected a string, got a "
                                          "boolean"},
        {"{\"plugin_path\":\"/x\"}", "config c: $.plugin_path: expected an array of strings, "
                                     "got a string"},
        {"{\"plugin_path\":[\"/x\",1.5]}", "config c: $.plugin_path[1]: expected a string, "
                                           "got a number"},
        {"{\"plugins\":{}}", "config c: $.plugins: expected an array, got an object"},
        {"{\"plugins\":[null]}", "config c: $.plugins[0]: expected an object, got null"},
        {"{\"plugins\":[{\"plugin\":\"x\"}]}", "config c: $.plugins[0]: missing \"id\""},
        {"{\"plugins\":[{\"id\":\"\"}]}", "config c: $.plugins[0].id: \"\" is not a valid "
                                          "plugin id (use letters, digits, '_', '.', '-')"},
        {"{\"plugins\":[{\"id\":\"a\",\"config\":[]}]}", "config c: $.plugins[0].config: "
                                                          "expected an object, got an array"},
        {"{\"plugins\":[{\"id\":\"a\",\"disabled\":1}]}", "config c: $.plugins[0].disabled: "
                                                           "expected a boolean, got an integer"},
        {"{\"plugins\":[{\"id\":\"a\",\"before\":\"b\",\"after\":\"c\"}]}",
         "config c: $.plugins[0]: \"before\" and \"after\" cannot both be given"},
        {"{\"agent\":{\"max_tokens\":\"9\"}}", "config c: $.agent.max_tokens: expected an "
                                               "integer >= 1, got a string"},
        {"{\"$schema\":1}", "config c: $.$schema: expected a string, got an integer"},
        {"{\"plugins\":[{\"id\":\"a\",\"share_roles\":\"retry\"}]}",
         "config c: $.plugins[0].share_roles: expected an array of role names, got a string"},
        {"{\"plugins\":[{\"id\":\"a\",\"share_roles\":[\"retry\",7]}]}",
         "config c: $.plugins[0].share_roles[1]: expected a string, got an integer"},
        {"{\"plugins\":[{\"id\":\"a\",\"share_roles\":[\"Retry\"]}]}",
         "config c: $.plugins[0].share_roles[0]: \"Retry\" is not a role name "
         "([a-z0-9][a-z0-9._-]*, at most 31 characters)"},
        {"{\"plugins\":[{\"id\":\"a\",\"share_roles\":[\"retry\",\"retry\"]}]}",
         "config c: $.plugins[0].share_roles[1]: role \"retry\" is listed twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v = json_loads(cases[i].json, 0, NULL);
        assert_non_null(v);
        weir_error err;
        weir_error_clear(&err);
        assert_int_equal(weir__config_validate(v, "c", &err), WEIR_E_CONFIG);
        assert_string_equal(err.text, cases[i].message);
        json_decref(v);
    }
}

static void test_merge_rejects_self_placement_and_bad_overlays(void **state) {
    (void)state;
    json_t *base = json_loads("{\"plugins\":[{\"id\":\"a\",\"plugin\":\"x\"}]}", 0, NULL);
    json_t *over = json_loads("{\"plugins\":[{\"id\":\"a\",\"after\":\"a\"}]}", 0, NULL);
    weir_error err;
    assert_int_equal(weir__config_merge(base, over, "o", &err), WEIR_E_CONFIG);
    assert_string_equal(err.text,
                        "config o: $.plugins[0].after: row \"a\" cannot be placed after itself");
    assert_int_equal(weir__config_merge(base, NULL, "o", &err), WEIR_E_INVAL);
    /* merge checks its overlay itself */
    json_t *bad = json_loads("{\"plugins\":[{\"id\":7}]}", 0, NULL);
    assert_int_equal(weir__config_merge(base, bad, "o", &err), WEIR_E_CONFIG);
    assert_string_equal(err.text, "config o: $.plugins[0].id: expected a string, got an integer");
    json_decref(bad);
    json_decref(base);
    json_decref(over);
}

/* An overlay row gives share_roles to an existing row and to a new one. */
static void test_merge_keeps_share_roles(void **state) {
    (void)state;
    json_t *base = json_loads("{\"plugins\":[{\"id\":\"a\",\"plugin\":\"x\"}]}", 0, NULL);
    json_t *over = json_loads("{\"plugins\":[{\"id\":\"a\",\"share_roles\":[\"retry\"]},"
                              "{\"id\":\"b\",\"plugin\":\"y\",\"share_roles\":[\"retry\"]}]}",
                              0, NULL);
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__config_merge(base, over, "o", &err), WEIR_OK);
    const json_t *rows = json_object_get(base, "plugins");
    assert_int_equal(json_array_size(rows), 2);
    for (size_t i = 0; i < 2; i++) {
        const json_t *share = json_object_get(json_array_get(rows, i), "share_roles");
        assert_int_equal(json_array_size(share), 1);
        assert_string_equal(json_string_value(json_array_get(share, 0)), "retry");
    }
    json_decref(base);
    json_decref(over);
}

static void test_null_arguments(void **state) {
    (void)state;
    json_t *cfg;
    weir_error err;
    const char *files[] = {"base.json", NULL};
    assert_int_equal(weir_config_compose(NULL, 1, &cfg, &err), WEIR_E_INVAL);
    assert_int_equal(weir_config_compose(files, 1, NULL, &err), WEIR_E_INVAL);
    assert_int_equal(weir_config_compose(files, 2, &cfg, &err), WEIR_E_INVAL);
    assert_null(cfg);
    assert_int_equal(weir__config_validate(NULL, NULL, NULL), WEIR_E_CONFIG);
}

/* ---- hostile input -------------------------------------------------------------- */

/* Write `text` as <dir>/<name> and compose it after base.json; returns status. */
static int compose_text(const char *dir, const char *name, const char *text, json_t **out,
                        weir_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(wt_write_file(path, text), 0);
    return compose(out, err, "base.json", path, NULL);
}

/* agent and session take only their documented keys, as plugin rows do: a
 * typo is a load error naming the file and the key, with the closest key. */
static void test_agent_and_session_keys_are_checked(void **state) {
    (void)state;
    char *dir = wt_tmpdir("config");
    assert_non_null(dir);
    json_t *cfg = (json_t *)1;
    weir_error err;
    assert_int_equal(compose_text(dir, "typo.json", "{\"agent\":{\"max_token\":100}}", &cfg, &err),
                     WEIR_E_CONFIG);
    assert_null(cfg);
    char want[1024];
    snprintf(want, sizeof want,
             "config %s/typo.json: $.agent: unknown key \"max_token\"; did you mean "
             "\"max_tokens\"? (known: provider, model, max_tokens, temperature, "
             "max_parallel_tool_calls, max_background_jobs, max_input_chars)",
             dir);
    assert_string_equal(err.text, want);
    assert_int_equal(compose_text(dir, "far.json", "{\"agent\":{\"colour\":\"red\"}}", &cfg, &err),
                     WEIR_E_CONFIG);
    snprintf(want, sizeof want,
             "config %s/far.json: $.agent: unknown key \"colour\" (known: provider, model, "
             "max_tokens, temperature, max_parallel_tool_calls, max_background_jobs, "
             "max_input_chars)",
             dir);
    assert_string_equal(err.text, want);
    assert_int_equal(compose_text(dir, "sess.json", "{\"session\":{\"fysnc\":\"none\"}}", &cfg,
                                  &err),
                     WEIR_E_CONFIG);
    snprintf(want, sizeof want,
             "config %s/sess.json: $.session: unknown key \"fysnc\"; did you mean \"fsync\"? "
             "(known: dir, fsync, store, checkpoint_bytes, provenance)",
             dir);
    assert_string_equal(err.text, want);
    /* every documented key is taken */
    assert_int_equal(
        compose_text(dir, "all.json",
                     "{\"agent\":{\"provider\":\"p\",\"model\":\"m\",\"max_tokens\":1,"
                     "\"temperature\":0.5,\"max_parallel_tool_calls\":2,"
                     "\"max_background_jobs\":3,\"max_input_chars\":4},\"session\":{\"dir\":"
                     "\"/tmp\",\"fsync\":\"none\",\"store\":\"file\",\"checkpoint_bytes\":5,"
                     "\"provenance\":\"all\"}}",
                     &cfg, &err),
        WEIR_OK);
    json_decref(cfg);
    assert_string_equal(weir__config_suggest("max_token", (const char *const[]){"model", "max_tokens"}, 2),
                        "max_tokens");
    assert_null(weir__config_suggest("x", (const char *const[]){"model"}, 1));
    assert_null(weir__config_suggest(NULL, (const char *const[]){"model"}, 1));
    wt_rmtree(dir);
    free(dir);
}

static char *nested(size_t depth) {
    char *s = malloc(depth * 2 + 64);
    assert_non_null(s);
    size_t n = (size_t)sprintf(s, "{\"agent\":{\"x\":");
    for (size_t i = 0; i < depth; i++)
        s[n++] = '[';
    for (size_t i = 0; i < depth; i++)
        s[n++] = ']';
    strcpy(s + n, "}}");
    return s;
}

static void test_hostile_input_gives_errors(void **state) {
    (void)state;
    char *dir = wt_tmpdir("config");
    assert_non_null(dir);
    json_t *cfg = NULL;
    weir_error err;

    static const char *const bad[] = {
        "", "42", "null", "\"str\"", "[]", "{\"plugins\":7}", "{\"agent\":{\"provider\":{}}}",
        "{\"plugins\":[[],{}]}", "{\"session\":{\"fsync\":null}}", "{\"a\":\x01}",
        "\xff\xfe{}", "{\"plugins\":[{\"id\":\"x\",\"plugin\":\"p\",\"before\":7}]}",
        "{\"comment\":1,\"$schema\":{}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = compose_text(dir, "bad.json", bad[i], &cfg, &err);
        assert_int_equal(rc, WEIR_E_CONFIG);
        assert_null(cfg);
        assert_non_null(strstr(err.text, "bad.json"));
    }

    /* nesting the parser accepts but the expander refuses */
    char *deep = nested(1500);
    assert_int_equal(compose_text(dir, "deep.json", deep, &cfg, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, ": nested deeper than 1024 levels"));
    free(deep);
    /* nesting the parser refuses */
    deep = nested(100000);
    assert_int_equal(compose_text(dir, "deeper.json", deep, &cfg, &err), WEIR_E_CONFIG);
    free(deep);

    /* a huge string full of escapes and references */
    size_t big = 1u << 22;
    char *text = malloc(big + 64);
    assert_non_null(text);
    size_t n = (size_t)sprintf(text, "{\"agent\":{\"model\":\"");
    for (size_t i = 0; i < big / 2; i++)
        text[n++] = '$';
    n += (size_t)sprintf(text + n, "${WEIR_TEST_HUGE:-d}\"}}");
    unsetenv("WEIR_TEST_HUGE");
    assert_int_equal(compose_text(dir, "huge.json", text, &cfg, &err), WEIR_OK);
    const char *model = weir__json_str(json_object_get(cfg, "agent"), "model", "");
    assert_int_equal(strlen(model), big / 4 + 1);
    assert_int_equal(model[big / 4], 'd');
    json_decref(cfg);

    /* a huge invalid id: the message is truncated, not overflowed */
    n = (size_t)sprintf(text, "{\"plugins\":[{\"id\":\"");
    for (size_t i = 0; i < big / 2; i++)
        text[n++] = '!';
    strcpy(text + n, "\"}]}");
    assert_int_equal(compose_text(dir, "long-id.json", text, &cfg, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "long-id.json: $.plugins[0].id: \"!!!"));
    free(text);

    wt_rmtree(dir);
    free(dir);
}

/* ---- the built-in default deployment ---------------------------------------------- */

static const char default_tail[] =
    "{\"id\":\"compaction\",\"plugin\":\"compaction-basic\",\"config\":{}},"
    "{\"id\":\"retry\",\"plugin\":\"retry\",\"config\":{}},"
    "{\"id\":\"prompt\",\"plugin\":\"system-prompt\","
    "\"config\":{\"text\":\"You are a careful assistant.\"}},"
    "{\"id\":\"math\",\"plugin\":\"tools-ffi\",\"config\":{\"tools\":[{\"library\":"
    "\"libm.so.6\",\"symbol\":\"pow\",\"prototype\":\"double pow(double x, double y)\","
    "\"description\":\"x raised to the power y\",\"inline\":true}]}}]}";

static void check_default(const char *raw_head, const char *composed_head) {
    char want[4096];
    json_t *raw = weir_config_default();
    assert_non_null(raw);
    snprintf(want, sizeof want, "%s%s", raw_head, default_tail);
    assert_json(raw, want);
    json_decref(raw);

    json_t *cfg;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_config_compose(NULL, 0, &cfg, &err), WEIR_OK);
    snprintf(want, sizeof want, "%s%s", composed_head, default_tail);
    assert_json(cfg, want);
    json_decref(cfg);
}

static void test_default_deployment_openai(void **state) {
    (void)state;
    setenv("OPENAI_API_KEY", "sk-openai", 1);
    setenv("ANTHROPIC_API_KEY", "sk-anthropic", 1);
    check_default(
        "{\"agent\":{\"provider\":\"openai\",\"model\":\"${WEIR_MODEL:-gpt-4o-mini}\","
        "\"max_tokens\":4096,\"max_parallel_tool_calls\":10},"
        "\"session\":{\"dir\":\"${WEIR_SESSION_DIR:-~/.local/state/weir/sessions}\","
        "\"fsync\":\"step\"},\"plugin_path\":[\"${WEIR_PLUGIN_PATH:-}\"],\"plugins\":["
        "{\"id\":\"openai\",\"plugin\":\"provider-openai\",\"config\":{"
        "\"base_url\":\"${OPENAI_BASE_URL:-https://api.openai.com/v1}\","
        "\"api_key\":\"${OPENAI_API_KEY}\"}},",
        "{\"agent\":{\"provider\":\"openai\",\"model\":\"gpt-4o-mini\","
        "\"max_tokens\":4096,\"max_parallel_tool_calls\":10},"
        "\"session\":{\"dir\":\"/home/tester/.local/state/weir/sessions\","
        "\"fsync\":\"step\"},\"plugin_path\":[],\"plugins\":["
        "{\"id\":\"openai\",\"plugin\":\"provider-openai\",\"config\":{"
        "\"base_url\":\"https://api.openai.com/v1\","
        "\"api_key\":\"sk-openai\"}},");
    setenv("OPENAI_API_KEY", "", 1);
    setenv("ANTHROPIC_API_KEY", "", 1);
}

static void test_default_deployment_anthropic(void **state) {
    (void)state;
    unsetenv("OPENAI_API_KEY");
    setenv("ANTHROPIC_API_KEY", "sk-anthropic", 1);
    setenv("WEIR_MODEL", "claude-opus-4-1", 1);
    setenv("WEIR_SESSION_DIR", "/srv/sessions", 1);
    setenv("WEIR_PLUGIN_PATH", "/opt/p", 1);
    check_default(
        "{\"agent\":{\"provider\":\"anthropic\",\"model\":\"${WEIR_MODEL:-claude-sonnet-4-5}\","
        "\"max_tokens\":4096,\"max_parallel_tool_calls\":10},"
        "\"session\":{\"dir\":\"${WEIR_SESSION_DIR:-~/.local/state/weir/sessions}\","
        "\"fsync\":\"step\"},\"plugin_path\":[\"${WEIR_PLUGIN_PATH:-}\"],\"plugins\":["
        "{\"id\":\"anthropic\",\"plugin\":\"provider-anthropic\",\"config\":{"
        "\"base_url\":\"${ANTHROPIC_BASE_URL:-https://api.anthropic.com}\","
        "\"api_key\":\"${ANTHROPIC_API_KEY}\"}},",
        "{\"agent\":{\"provider\":\"anthropic\",\"model\":\"claude-opus-4-1\","
        "\"max_tokens\":4096,\"max_parallel_tool_calls\":10},"
        "\"session\":{\"dir\":\"/srv/sessions\",\"fsync\":\"step\"},"
        "\"plugin_path\":[\"/opt/p\"],\"plugins\":["
        "{\"id\":\"anthropic\",\"plugin\":\"provider-anthropic\",\"config\":{"
        "\"base_url\":\"https://api.anthropic.com\","
        "\"api_key\":\"sk-anthropic\"}},");
    setenv("OPENAI_API_KEY", "", 1);
    setenv("ANTHROPIC_API_KEY", "", 1);
    unsetenv("WEIR_MODEL");
    unsetenv("WEIR_SESSION_DIR");
    setenv("WEIR_PLUGIN_PATH", "", 1);
}

static void test_default_deployment_scripted(void **state) {
    (void)state;
    setenv("OPENAI_API_KEY", "", 1);
    unsetenv("ANTHROPIC_API_KEY");
    check_default(
        "{\"agent\":{\"provider\":\"scripted\",\"model\":\"demo\","
        "\"max_tokens\":4096,\"max_parallel_tool_calls\":10},"
        "\"session\":{\"dir\":\"${WEIR_SESSION_DIR:-~/.local/state/weir/sessions}\","
        "\"fsync\":\"step\"},\"plugin_path\":[\"${WEIR_PLUGIN_PATH:-}\"],\"plugins\":["
        "{\"id\":\"scripted\",\"plugin\":\"provider-scripted\","
        "\"config\":{\"script\":\"builtin:demo\",\"models\":{\"demo\":"
        "{\"context_window\":32768,\"max_output\":4096}}}},",
        "{\"agent\":{\"provider\":\"scripted\",\"model\":\"demo\","
        "\"max_tokens\":4096,\"max_parallel_tool_calls\":10},"
        "\"session\":{\"dir\":\"/home/tester/.local/state/weir/sessions\","
        "\"fsync\":\"step\"},\"plugin_path\":[],\"plugins\":["
        "{\"id\":\"scripted\",\"plugin\":\"provider-scripted\","
        "\"config\":{\"script\":\"builtin:demo\",\"models\":{\"demo\":"
        "{\"context_window\":32768,\"max_output\":4096}}}},");
    /* without HOME, ~/ cannot be expanded */
    char *home = strdup(getenv("HOME"));
    unsetenv("HOME");
    expect_error(WEIR_E_CONFIG,
                 "config (built-in default): $.session.dir: cannot expand \"~/\": HOME is not "
                 "set",
                 NULL, NULL);
    setenv("HOME", home, 1);
    free(home);
    setenv("ANTHROPIC_API_KEY", "", 1);
}

/* ---- allocation failure ------------------------------------------------------------- */

static void alloc_loop(const char *const *files, size_t nfiles) {
    for (long n = 1;; n++) {
        json_t *cfg = NULL;
        weir_error err;
        weir_error_clear(&err);
        weir__alloc_fail_after(n);
        int rc = weir_config_compose(files, nfiles, &cfg, &err);
        weir__alloc_fail_after(-1);
        if (rc == WEIR_OK) {
            assert_non_null(cfg);
            json_decref(cfg);
            assert_true(n > 1);
            return;
        }
        if (rc != WEIR_E_NOMEM)
            fail_msg("allocation %ld: %s (%s)", n, weir_status_name(rc), err.text);
        assert_null(cfg);
    }
}

static void test_alloc_failure_loop(void **state) {
    (void)state;
    setenv("WEIR_TEST_MODEL", "m1", 1);
    setenv("WEIR_TEST_EMPTY", "", 1);
    setenv("OPENAI_API_KEY", "sk-loop", 1);
    static const char *const files[] = {"base.json",  "replace.json", "append.json",
                                        "place.json", "disable.json", "agent-session.json",
                                        "vars.json",  "b.json",       "relative-path.json"};
    alloc_loop(files, sizeof files / sizeof files[0]);
    alloc_loop(NULL, 0);
    setenv("OPENAI_API_KEY", "", 1);
    unsetenv("WEIR_TEST_MODEL");
    unsetenv("WEIR_TEST_EMPTY");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_base_alone_composes_unchanged, setup_dir),
        cmocka_unit_test_setup(test_overlay_replaces_row_config_and_plugin, setup_dir),
        cmocka_unit_test_setup(test_overlay_appends_new_rows, setup_dir),
        cmocka_unit_test_setup(test_before_after_placement, setup_dir),
        cmocka_unit_test_setup(test_disabled_removes_row, setup_dir),
        cmocka_unit_test_setup(test_agent_session_merge_key_by_key, setup_dir),
        cmocka_unit_test_setup(test_later_files_win_in_order, setup_dir),
        cmocka_unit_test_setup(test_var_expansion_set_default_and_escape, setup_dir),
        cmocka_unit_test_setup(test_relative_plugin_path_is_relative_to_the_file, setup_dir),
        cmocka_unit_test_setup(test_agent_and_session_start_from_the_defaults, setup_dir),
        cmocka_unit_test_setup(test_default_names_the_built_in_deployment, setup_dir),
        cmocka_unit_test_setup(test_unset_var_without_default_names_var_file_and_path,
                               setup_dir),
        cmocka_unit_test_setup(test_malformed_var_reference, setup_dir),
        cmocka_unit_test_setup(test_expand_reports_bad_references_directly, setup_dir),
        cmocka_unit_test_setup(test_var_value_must_be_utf8, setup_dir),
        cmocka_unit_test_setup(test_unknown_top_level_key, setup_dir),
        cmocka_unit_test_setup(test_agent_and_session_keys_are_checked, setup_dir),
        cmocka_unit_test_setup(test_parse_error_gives_line_and_column, setup_dir),
        cmocka_unit_test_setup(test_duplicate_keys_rejected, setup_dir),
        cmocka_unit_test_setup(test_missing_file_is_io_error, setup_dir),
        cmocka_unit_test_setup(test_duplicate_ids, setup_dir),
        cmocka_unit_test_setup(test_unknown_before_after_id, setup_dir),
        cmocka_unit_test_setup(test_type_errors_name_file_and_path, setup_dir),
        cmocka_unit_test_setup(test_validate_checks_sections_directly, setup_dir),
        cmocka_unit_test_setup(test_merge_rejects_self_placement_and_bad_overlays, setup_dir),
        cmocka_unit_test_setup(test_merge_keeps_share_roles, setup_dir),
        cmocka_unit_test_setup(test_null_arguments, setup_dir),
        cmocka_unit_test_setup(test_hostile_input_gives_errors, setup_dir),
        cmocka_unit_test_setup(test_default_deployment_openai, setup_dir),
        cmocka_unit_test_setup(test_default_deployment_anthropic, setup_dir),
        cmocka_unit_test_setup(test_default_deployment_scripted, setup_dir),
        cmocka_unit_test_setup(test_alloc_failure_loop, setup_dir),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
