/*
 * tests/unit/test_redact.c - hiding secrets: weir__schema_redact (the
 * "secret" marks of a schema, core/format/schema.c) and weir_config_redact (what
 * `weir config` prints, core/runtime/redact.c): the built-in set of every row, the
 * marks of a row's plugin schema (tests/plugins/fx_secret.c and the shipped
 * provider-openai), a plugin that cannot be found, and that reading a schema
 * never initialises the plugin.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "schema.h"
#include "testutil.h"
#include "weir/host.h"

static json_t *parse(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v)
        fail_msg("bad test JSON %s: %s", text, e.text);
    return v;
}

/* `value` redacted with `schema` is `want` after `count` replacements. */
static void expect_redact(const char *schema, const char *value, const char *want, int count) {
    json_t *s = parse(schema), *v = parse(value), *w = parse(want);
    assert_int_equal(weir__schema_redact(s, v, "***"), count);
    if (!json_equal(v, w)) {
        char *got = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
        fail_msg("%s with %s: got %s, want %s", value, schema, got, want);
    }
    json_decref(s);
    json_decref(v);
    json_decref(w);
}

static void schema_marks(void **state) {
    (void)state;
    /* properties, nested objects, additionalProperties, items */
    expect_redact("{\"properties\":{\"k\":{\"secret\":true},\"o\":{\"properties\":"
                  "{\"p\":{\"secret\":true}}}}}",
                  "{\"k\":\"sk-1\",\"u\":\"x\",\"o\":{\"p\":\"sk-2\",\"q\":\"y\"}}",
                  "{\"k\":\"***\",\"u\":\"x\",\"o\":{\"p\":\"***\",\"q\":\"y\"}}", 2);
    expect_redact("{\"additionalProperties\":{\"secret\":true}}", "{\"a\":\"1\",\"b\":{\"c\":2}}",
                  "{\"a\":\"***\",\"b\":\"***\"}", 2);
    expect_redact("{\"properties\":{\"t\":{\"items\":{\"secret\":true}}}}",
                  "{\"t\":[\"a\",\"\",null,\"b\"]}", "{\"t\":[\"***\",\"\",null,\"***\"]}", 2);
    /* member names match in any case (header names are case-blind) */
    expect_redact("{\"properties\":{\"headers\":{\"properties\":{\"Authorization\":"
                  "{\"secret\":true}}}}}",
                  "{\"headers\":{\"authorization\":\"Bearer x\",\"AUTHORIZATION\":\"y\","
                  "\"Authorization-Extra\":\"z\"}}",
                  "{\"headers\":{\"authorization\":\"***\",\"AUTHORIZATION\":\"***\","
                  "\"Authorization-Extra\":\"z\"}}",
                  2);
    /* a mark inside an anyOf/oneOf branch counts */
    expect_redact("{\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"null\"},{\"secret\":true}]}},"
                  "\"oneOf\":[{\"properties\":{\"b\":{\"secret\":true}}}]}",
                  "{\"a\":\"x\",\"b\":\"y\",\"c\":\"z\"}", "{\"a\":\"***\",\"b\":\"***\",\"c\":\"z\"}",
                  2);
    /* empty strings and nulls stay; the root value is never replaced; no marks */
    expect_redact("{\"properties\":{\"k\":{\"secret\":true}}}", "{\"k\":\"\"}", "{\"k\":\"\"}", 0);
    expect_redact("{\"secret\":true}", "{\"k\":\"x\"}", "{\"k\":\"x\"}", 0);
    expect_redact("true", "{\"k\":\"x\"}", "{\"k\":\"x\"}", 0);
    expect_redact("{\"properties\":{\"k\":{\"secret\":false}}}", "{\"k\":\"x\"}", "{\"k\":\"x\"}",
                  0);
    /* the value of a secret member need not be a string */
    expect_redact("{\"properties\":{\"k\":{\"secret\":true}}}", "{\"k\":{\"a\":1}}",
                  "{\"k\":\"***\"}", 1);
    assert_int_equal(weir__schema_redact(NULL, NULL, "***"), 0);
}

/* A composed config: rows of fx-secret, provider-openai, a plugin that does
 * not exist, a row without config. */
#define DEPLOYMENT \
    "{\"plugin_path\":[\"%s\",\"%s\"],\"plugins\":[" \
    "{\"id\":\"s\",\"plugin\":\"fx-secret\",\"config\":{\"log\":\"%s\",\"user\":\"u\"," \
    "\"password\":\"pw-1\",\"tokens\":[\"t-1\",\"t-2\"],\"db\":{\"host\":\"h\"," \
    "\"dsn\":\"dsn-1\"},\"vault\":{\"a\":\"v-1\"},\"auth\":\"a-1\",\"api_key\":\"k-1\"}}," \
    "{\"id\":\"p\",\"plugin\":\"provider-openai\",\"config\":{\"base_url\":\"http://x/v1\"," \
    "\"api_key\":\"sk-2\",\"headers\":{\"authorization\":\"Bearer sk-2\",\"X-Title\":\"t\"," \
    "\"Api-Key\":\"k-2\"}}}," \
    "{\"id\":\"m\",\"plugin\":\"no-such-plugin\",\"config\":{\"api_key\":\"k-3\"," \
    "\"password\":\"pw-3\",\"headers\":{\"X-API-KEY\":\"k-3\",\"x\":\"y\"}}}," \
    "{\"id\":\"e\",\"plugin\":\"fx-secret\",\"config\":{\"api_key\":\"\"}}," \
    "{\"id\":\"n\",\"plugin\":\"fx-secret\"}]}"

static json_t *deployment(const char *log) {
    char *text = NULL;
    int n = snprintf(NULL, 0, DEPLOYMENT, wt_env("WEIR_TEST_FIXTURE_DIR"),
                     wt_env("WEIR_TEST_PLUGIN_DIR"), log);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    snprintf(text, (size_t)n + 1, DEPLOYMENT, wt_env("WEIR_TEST_FIXTURE_DIR"),
             wt_env("WEIR_TEST_PLUGIN_DIR"), log);
    json_t *config = parse(text);
    free(text);
    return config;
}

static const json_t *row_config(const json_t *config, size_t i) {
    return json_object_get(json_array_get(json_object_get(config, "plugins"), i), "config");
}

static void expect_row(const json_t *config, size_t i, const char *want) {
    json_t *w = parse(want);
    const json_t *got = row_config(config, i);
    if (!json_equal(got, w)) {
        char *dump = json_dumps(got, JSON_COMPACT);
        fail_msg("row %zu: got %s, want %s", i, dump, want);
    }
    json_decref(w);
}

static void config_rows(void **state) {
    (void)state;
    char *dir = wt_tmpdir("redact");
    char log[4096];
    snprintf(log, sizeof log, "%s/init.log", dir);
    json_t *config = deployment(log);
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_config_redact(config, &err), WEIR_OK);
    /* fx-secret's own marks, and the built-in api_key */
    json_t *w = parse("{\"user\":\"u\",\"password\":\"***\",\"tokens\":[\"***\",\"***\"],"
                      "\"db\":{\"host\":\"h\",\"dsn\":\"***\"},\"vault\":{\"a\":\"***\"},"
                      "\"auth\":\"***\",\"api_key\":\"***\"}");
    json_object_set_new(w, "log", json_string(log));
    assert_true(json_equal(row_config(config, 0), w));
    json_decref(w);
    /* provider-openai's schema: api_key and the secret headers, in any case */
    expect_row(config, 1,
               "{\"base_url\":\"http://x/v1\",\"api_key\":\"***\",\"headers\":{"
               "\"authorization\":\"***\",\"X-Title\":\"t\",\"Api-Key\":\"***\"}}");
    /* a plugin that cannot be found: the built-in set only */
    expect_row(config, 2,
               "{\"api_key\":\"***\",\"password\":\"pw-3\",\"headers\":{\"X-API-KEY\":\"***\","
               "\"x\":\"y\"}}");
    expect_row(config, 3, "{\"api_key\":\"\"}");
    assert_null(row_config(config, 4));
    /* the plugin was opened, never initialised */
    assert_int_equal(access(log, F_OK), -1);
    json_decref(config);
    wt_rmtree(dir);
    free(dir);
}

/* A URL's userinfo is hidden in every string of the config, in and out of
 * rows: scheme, host, port, path and query stay (issue 31 item 6). */
static void config_url_userinfo(void **state) {
    (void)state;
    json_t *config = parse(
        "{\"session\":{\"store\":\"postgresql://weir:pg-secret@db:5432/weir?sslmode=require\"},"
        "\"plugins\":[{\"id\":\"p\",\"plugin\":\"no-such-plugin\",\"config\":{"
        "\"base_url\":\"http://u:sk-live-1@127.0.0.1:8080/v1\","
        "\"proxy\":\"https://tok-2@proxy.example/\","
        "\"args\":[\"--url\",\"git+ssh://me:pw-3@h/r.git\",\"see http://a:b@x and ftp://c:d@y/z\"],"
        "\"plain\":\"http://host/v1\",\"email\":\"me@example.com\",\"odd\":\"://u:p@h\","
        "\"done\":\"http://***@host/\",\"path\":\"http://host/a@b\","
        "\"two_at\":\"http://u@v:p@host:1\"}}]}");
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_config_redact(config, &err), WEIR_OK);
    json_t *want = parse(
        "{\"session\":{\"store\":\"postgresql://***@db:5432/weir?sslmode=require\"},"
        "\"plugins\":[{\"id\":\"p\",\"plugin\":\"no-such-plugin\",\"config\":{"
        "\"base_url\":\"http://***@127.0.0.1:8080/v1\","
        "\"proxy\":\"https://***@proxy.example/\","
        "\"args\":[\"--url\",\"git+ssh://***@h/r.git\",\"see http://***@x and ftp://***@y/z\"],"
        "\"plain\":\"http://host/v1\",\"email\":\"me@example.com\",\"odd\":\"://u:p@h\","
        "\"done\":\"http://***@host/\",\"path\":\"http://host/a@b\","
        "\"two_at\":\"http://***@host:1\"}}]}");
    if (!json_equal(config, want)) {
        char *got = json_dumps(config, JSON_COMPACT);
        fail_msg("got %s", got);
    }
    json_decref(want);
    json_decref(config);
}

static void config_bad_arguments(void **state) {
    (void)state;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_config_redact(NULL, &err), WEIR_E_INVAL);
    json_t *a = json_array();
    assert_int_equal(weir_config_redact(a, NULL), WEIR_E_INVAL);
    json_decref(a);
    /* no plugins at all: nothing to do */
    json_t *o = parse("{\"agent\":{\"model\":\"m\"}}");
    assert_int_equal(weir_config_redact(o, &err), WEIR_OK);
    json_decref(o);
}

/* The defaults the plugins' schemas give (weir_config_defaults, what `weir
 * config` prints): fx-secret's top-level "default" for a row that lacks the
 * member (a row without config gets one), provider-openai's api by its
 * if/then/else on base_url; a member given stays; a plugin that cannot be
 * found is passed over; nothing is initialised. */
static void config_defaults(void **state) {
    (void)state;
    char *dir = wt_tmpdir("defaults");
    char log[4096];
    snprintf(log, sizeof log, "%s/init.log", dir);
    json_t *config = deployment(log);
    json_t *rows = json_object_get(config, "plugins");
    json_array_append_new(rows, parse("{\"id\":\"q\",\"plugin\":\"provider-openai\"}"));
    json_array_append_new(rows, parse("{\"id\":\"r\",\"plugin\":\"provider-openai\",\"config\":"
                                      "{\"base_url\":\"http://x/v1\",\"api\":\"responses\"}}"));
    json_t *before = json_deep_copy(row_config(config, 2));
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_config_defaults(config, &err), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(row_config(config, 0), "user")), "u");
    assert_string_equal(json_string_value(json_object_get(row_config(config, 1), "api")), "chat");
    assert_true(json_equal(row_config(config, 2), before));
    expect_row(config, 3, "{\"api_key\":\"\",\"user\":\"nobody\"}");
    expect_row(config, 4, "{\"user\":\"nobody\"}");
    expect_row(config, 5, "{\"api\":\"responses\"}");
    expect_row(config, 6, "{\"base_url\":\"http://x/v1\",\"api\":\"responses\"}");
    assert_int_equal(access(log, F_OK), -1);
    json_decref(before);
    assert_int_equal(weir_config_defaults(NULL, &err), WEIR_E_INVAL);
    json_decref(config);
    wt_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schema_marks),
        cmocka_unit_test(config_rows),
        cmocka_unit_test(config_url_userinfo),
        cmocka_unit_test(config_bad_arguments),
        cmocka_unit_test(config_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
