/*
 * tests/unit/test_tool_update.c - a row's tools after init (ABI 1.5
 * tool_update / tool_remove, core/runtime/tools.c): replaced in place, removed,
 * another row's never touched, a replaced definition kept for the calls
 * that hold it; tool_exec_progress without an agent.  tools-mcp's use of
 * them (list_changed, live tool/progress) is in test_tools_mcp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "tools.h"

static int answer(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    (void)exec, (void)args;
    *result = json_string(ud);
    return WEIR_OK;
}

static int safe(const json_t *args, void *ud) {
    (void)args, (void)ud;
    return 1;
}

static weir_tool tool(const char *name, const char *desc, const json_t *schema, const char *says) {
    weir_tool t = {sizeof(weir_tool), name, desc, schema, 0, answer, NULL, (void *)(uintptr_t)says};
    return t;
}

static char *names(const weir__tools *t) {
    json_t *s = weir__tools_schemas(t);
    static char buf[512];
    buf[0] = '\0';
    size_t i;
    const json_t *e;
    json_array_foreach(s, i, e) {
        strcat(buf, i ? "," : "");
        strcat(buf, json_string_value(json_object_get(e, "name")));
    }
    json_decref(s);
    return buf;
}

static const char *run(const weir__tool_def *d) {
    static char out[64];
    weir__tool_outcome o = {0};
    json_t *args = json_object();
    assert_int_equal(weir__tool_invoke(d, "c1", NULL, args, &o), WEIR_OK);
    json_decref(args);
    snprintf(out, sizeof out, "%s",
             json_string_value(json_object_get(json_array_get(o.content, 0), "text")));
    weir__tool_outcome_clear(&o);
    return out;
}

static void update_replaces_in_place_and_adds(void **state) {
    (void)state;
    weir__tools *t;
    assert_int_equal(weir__tools_create(&t), WEIR_OK);
    weir_error err;
    weir_tool a = tool("a", "first a", NULL, "a1"), b = tool("b", "b", NULL, "b1"),
              c = tool("c", "c", NULL, "c1");
    assert_int_equal(weir__tools_add(t, "p", &a, &err), WEIR_OK);
    assert_int_equal(weir__tools_add(t, "p", &b, &err), WEIR_OK);
    assert_int_equal(weir__tools_add(t, "q", &c, &err), WEIR_OK);
    const weir__tool_def *old_a = weir__tools_find(t, "a");
    /* replace a: same place, new description, schema and classifier */
    json_t *schema = json_pack("{s:s, s:{s:{s:s}}}", "type", "object", "properties", "x", "type",
                               "string");
    weir_tool a2 = tool("a", "second a", schema, "a2");
    a2.concurrency_safe = safe;
    assert_int_equal(weir__tools_update(t, "p", &a2, &err), WEIR_OK);
    json_decref(schema);
    assert_string_equal(names(t), "a,b,c");
    const weir__tool_def *new_a = weir__tools_find(t, "a");
    assert_ptr_not_equal(new_a, old_a);
    assert_string_equal(new_a->description, "second a");
    assert_non_null(json_object_get(new_a->parameters, "properties"));
    assert_true(weir__tool_parallel_safe(new_a, new_a->parameters));
    /* the old definition still runs (a call dispatched with it finishes) */
    assert_string_equal(run(old_a), "a1");
    assert_string_equal(run(new_a), "a2");
    /* update of a new name adds it at the end */
    weir_tool d = tool("d", "d", NULL, "d1");
    assert_int_equal(weir__tools_update(t, "p", &d, &err), WEIR_OK);
    assert_string_equal(names(t), "a,b,c,d");
    /* another row's tool is never replaced */
    weir_tool c2 = tool("c", "stolen", NULL, "c2");
    assert_int_equal(weir__tools_update(t, "p", &c2, &err), WEIR_E_DUPLICATE);
    assert_string_equal(err.text, "tool 'c' of plugin 'p' is already registered by plugin 'q'");
    assert_string_equal(run(weir__tools_find(t, "c")), "c1");
    /* a bad tool is refused as at registration, and the old one stays */
    weir_tool bad = tool("a", "x", NULL, "x");
    bad.execute = NULL;
    assert_int_equal(weir__tools_update(t, "p", &bad, &err), WEIR_E_INVAL);
    assert_string_equal(names(t), "a,b,c,d");
    assert_string_equal(run(weir__tools_find(t, "a")), "a2");
    weir__tools_destroy(t);
}

static void remove_only_own_tools(void **state) {
    (void)state;
    weir__tools *t;
    assert_int_equal(weir__tools_create(&t), WEIR_OK);
    weir_error err;
    weir_tool a = tool("a", "a", NULL, "a1"), b = tool("b", "b", NULL, "b1");
    assert_int_equal(weir__tools_add(t, "p", &a, &err), WEIR_OK);
    assert_int_equal(weir__tools_add(t, "q", &b, &err), WEIR_OK);
    const weir__tool_def *old_a = weir__tools_find(t, "a");
    assert_int_equal(weir__tools_remove(t, "q", "a", &err), WEIR_E_NOT_FOUND);
    assert_string_equal(err.text, "tool_remove: plugin 'q' has no tool 'a'");
    assert_int_equal(weir__tools_remove(t, "p", "zz", &err), WEIR_E_NOT_FOUND);
    assert_int_equal(weir__tools_remove(t, "p", "a", &err), WEIR_OK);
    assert_null(weir__tools_find(t, "a"));
    assert_string_equal(names(t), "b");
    assert_string_equal(run(old_a), "a1"); /* kept until destroy */
    /* and added again */
    assert_int_equal(weir__tools_update(t, "p", &a, &err), WEIR_OK);
    assert_string_equal(names(t), "b,a");
    weir__tools_destroy(t);
}

static int report(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    (void)args, (void)ud;
    json_t *p = json_pack("{s:i}", "progress", 1);
    int rc = weir__tool_exec_progress(exec, p);
    int bad = weir__tool_exec_progress(exec, json_string_value(p) ? p : NULL);
    json_decref(p);
    *result = json_sprintf("%d %d", rc, bad);
    return WEIR_OK;
}

/* Outside a session's step there is no agent to tell: UNSUPPORTED, never a crash. */
static void progress_without_agent(void **state) {
    (void)state;
    weir__tools *t;
    assert_int_equal(weir__tools_create(&t), WEIR_OK);
    weir_error err;
    weir_tool r = {sizeof(weir_tool), "r", "r", NULL, 0, report, NULL, NULL};
    assert_int_equal(weir__tools_add(t, "p", &r, &err), WEIR_OK);
    char want[32];
    snprintf(want, sizeof want, "%d %d", WEIR_E_UNSUPPORTED, WEIR_E_INVAL);
    assert_string_equal(run(weir__tools_find(t, "r")), want);
    assert_int_equal(weir__tool_exec_progress(NULL, NULL), WEIR_E_INVAL);
    weir__tools_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(update_replaces_in_place_and_adds),
        cmocka_unit_test(remove_only_own_tools),
        cmocka_unit_test(progress_without_agent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
