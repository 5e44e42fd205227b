/*
 * tests/unit/test_sdk.c - what a plugin author meets first (issue #14):
 * WEIR_PLUGIN_DEFINE wires the api table itself (a plugin whose init never
 * calls WEIR_PLUGIN_INIT_API loads and runs), the loader's message for a
 * file without the entry point names the macro, and plugin.h's call macros
 * are switched off by exactly the list that defines them.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host_int.h"
#include "testutil.h"
#include "weir/testkit.h"

static char *fixture(const char *name) {
    char *path = NULL;
    assert_true(asprintf(&path, "%s/weir-%s.so", wt_env("WEIR_TEST_FIXTURE_DIR"), name) > 0);
    return path;
}

/* fx-no-init-api: its init uses weir_plugin_id, weir_log and
 * weir_hook_register without WEIR_PLUGIN_INIT_API (it was SIGSEGV). */
static void plugin_without_init_api_loads_and_runs(void **state) {
    (void)state;
    char *path = fixture("fx-no-init-api");
    char *dir = wt_tmpdir("sdk");
    char *log = NULL;
    assert_true(asprintf(&log, "%s/calls.txt", dir) > 0);
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    json_t *cfg = json_pack("{s:s}", "log", log);
    weir_error err;
    weir_error_clear(&err);
    if (weir_tk_load_file(tk, path, "noapi", cfg, &err) != WEIR_OK)
        fail_msg("load: %s", err.text);
    json_decref(cfg);
    char *calls = wt_read_file(log, NULL);
    assert_non_null(calls);
    assert_string_equal(calls, "init:noapi\n");
    free(calls);
    const json_t *logs = weir_tk_logs(tk);
    assert_int_equal(json_array_size(logs), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(logs, 0), "text")),
                        "init without WEIR_PLUGIN_INIT_API");
    /* its listener runs, and weir_next reaches the default */
    json_t *args = json_pack("{s:s,s:i,s:i,s:[]}", "agent", "testkit", "turn", 1, "step", 1,
                             "messages");
    json_t *dflt = json_pack("{s:s,s:[]}", "kind", "enter", "messages");
    json_t *r = weir_tk_invoke(tk, "agent/pre-step", args, dflt, &err); /* borrowed */
    json_decref(dflt);
    if (!r)
        fail_msg("invoke: %s", err.text);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "enter");
    assert_int_equal(weir_tk_default_calls(tk), 1);
    json_decref(r);
    json_decref(args);
    weir_tk_destroy(tk);
    wt_rmtree(dir);
    free(dir);
    free(log);
    free(path);
}

/* The descriptor the host sees is WEIR_PLUGIN_DEFINE's copy: same header
 * and metadata, and an init of its own (the wrapper that sets the table). */
static void the_wired_descriptor_keeps_the_metadata(void **state) {
    (void)state;
    char *path = fixture("fx-no-init-api");
    json_t *info = NULL;
    weir_error err;
    assert_int_equal(weir_plugin_probe(path, &info, &err), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(info, "name")), "fx-no-init-api");
    assert_string_equal(json_string_value(json_object_get(info, "version")), "1.0.0");
    assert_string_equal(json_string_value(json_object_get(info, "description")),
                        "init without WEIR_PLUGIN_INIT_API");
    /* WEIR_PLUGIN_HEADER_MIN(0): it needs ABI 1.0 only (issue #36) */
    assert_string_equal(json_string_value(json_object_get(info, "abi")), "1.0");
    json_decref(info);
    free(path);
}

static void no_entry_point_names_the_macro(void **state) {
    (void)state;
    char *path = fixture("fx-no-entry");
    weir__dl *dl = NULL;
    const weir_plugin_desc *d = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__dl_open(path, &dl, &d, &err), WEIR_E_PLUGIN_ENTRY);
    assert_non_null(strstr(err.text, "WEIR_PLUGIN_DEFINE(descriptor)"));
    free(path);
}

/* Every name in `text` matching `pattern` (group 1), as a sorted list. */
static json_t *names(const char *text, const char *pattern) {
    regex_t re;
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE), 0);
    json_t *out = json_array();
    regmatch_t m[2];
    for (const char *p = text; regexec(&re, p, 2, m, 0) == 0; p += m[0].rm_eo)
        json_array_append_new(out, json_stringn(p + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so)));
    regfree(&re);
    return out;
}

/* plugin.h removes exactly the call macros it defines (so host.h and
 * testkit.h switch all of them off, whatever the include order). */
static void the_call_macros_are_undone_by_the_same_list(void **state) {
    (void)state;
    char *path = NULL;
    assert_true(asprintf(&path, "%s/include/weir/plugin.h", wt_env("WEIR_TEST_SOURCE_DIR")) > 0);
    char *text = wt_read_file(path, NULL);
    assert_non_null(text);
    const char *on = strstr(text, "#define WEIR__API_MACROS 1");
    const char *off = on ? strstr(on, "#undef WEIR__API_MACROS") : NULL;
    assert_non_null(off);
    char *defs = strndup(on, (size_t)(off - on));
    json_t *defined = names(defs, "^#define (weir_[a-z_]+)\\(\\.\\.\\.\\)");
    json_t *undone = names(off, "^#undef (weir_[a-z_]+)$");
    char *a = json_dumps(defined, 0), *b = json_dumps(undone, 0);
    assert_true(json_array_size(defined) >= 45);
    assert_string_equal(a, b);
    /* and every member of the table has its macro */
    for (size_t i = 0; i < json_array_size(defined); i++) {
        char member[96];
        snprintf(member, sizeof member, "(*%s)(", json_string_value(json_array_get(defined, i)) + 5);
        assert_non_null(strstr(text, member));
    }
    free(a);
    free(b);
    json_decref(defined);
    json_decref(undone);
    free(defs);
    free(text);
    free(path);
}

/* system-prompt/assemble: a section's order is an integer (issue #14 item
 * 14: a real order used to pass the schema and sort as 0). */
static const char *g_order; /* the order JSON the fixture's section gets */

static json_t *add_section(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    const weir_api *api = ud;
    json_t *r = api->next(call);
    json_t *out = json_deep_copy(r);
    json_decref(r);
    json_t *section = json_pack("{s:s, s:o, s:s}", "name", "x", "order",
                                json_loads(g_order, JSON_DECODE_ANY, NULL), "text", "hi");
    json_array_append_new(json_object_get(out, "sections"), section);
    return out;
}

static int section_init(weir_plugin *self, const weir_api *api, const json_t *config,
                        weir_error *err) {
    (void)config;
    (void)err;
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = (void *)(uintptr_t)api;
    return api->hook_register(self, "system-prompt/assemble", add_section, &opts);
}

static const weir_plugin_desc section_desc = {
    WEIR_PLUGIN_HEADER, .name = "section", .version = "1.0.0", .init = section_init,
};

static json_t *assemble(const char *order, weir_error *err) {
    g_order = order;
    weir_tk *tk = weir_tk_create();
    assert_int_equal(weir_tk_load(tk, &section_desc, "s", NULL, err), WEIR_OK);
    json_t *args = json_pack("{s:s, s:i, s:i, s:{s:[], s:[], s:{}}}", "agent", "testkit", "turn",
                             1, "step", 1, "assembly", "sections", "tools", "variables");
    json_t *r = weir_tk_invoke(tk, "system-prompt/assemble", args,
                               json_object_get(args, "assembly"), err);
    json_decref(args);
    weir_tk_destroy(tk);
    return r;
}

static void section_order_is_an_integer(void **state) {
    (void)state;
    weir_error err;
    json_t *r = assemble("-3", &err);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(r, "sections"), 0), "order")),
                     -3);
    json_decref(r);
    assert_null(assemble("1.5", &err));
    assert_int_equal(err.code, WEIR_E_HOOK_RESULT);
    assert_non_null(strstr(err.text, "order"));
    assert_null(assemble("\"1\"", &err));
    assert_int_equal(err.code, WEIR_E_HOOK_RESULT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plugin_without_init_api_loads_and_runs),
        cmocka_unit_test(the_wired_descriptor_keeps_the_metadata),
        cmocka_unit_test(no_entry_point_names_the_macro),
        cmocka_unit_test(the_call_macros_are_undone_by_the_same_list),
        cmocka_unit_test(section_order_is_an_integer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
