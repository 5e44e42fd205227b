/*
 * tests/unit/test_hooks.c - hook chains and the hook catalog (core/runtime/hooks.c,
 * core/format/hook_catalog.c): the three modes, failure propagation, ordering,
 * freeze, result validation, tracing, docs/hooks.md and allocation failure.
 * Plugins are fake pointers with ids; nothing is dlopen'ed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hooks.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* fixtures                                                                  */
/* ------------------------------------------------------------------------ */

#define PLUGIN(n) ((weir_plugin *)(uintptr_t)(0x1000u + (n)))
#define AGENT ((weir_agent *)(uintptr_t)0xa9e47u)
#define SIGNAL ((weir_signal *)(uintptr_t)0x5197au)

static const char *const IDS[] = {"a", "b", "c", "d", "e", "x"};
#define NIDS (sizeof IDS / sizeof IDS[0])

typedef enum kind {
    K_OK,        /* record, return json_null() */
    K_WRAP,      /* r = next(); return "<tag>(" r ")" or NULL when r is NULL */
    K_SHORT,     /* return "<tag>" without next */
    K_FAIL,      /* weir_call_fail("<tag> failed") and return NULL */
    K_NULL,      /* return NULL without a message */
    K_RECOVER,   /* r = next(); return r, or "recovered" when r is NULL */
    K_REFAIL,    /* r = next(); when NULL: fail with its own message */
    K_TWICE,     /* next() twice, return the second result */
    K_NEXT,      /* call next() (in a non-waterfall hook) and return its result */
    K_VALUE,     /* return a copy of beh.value */
    K_CHECK_CTX, /* check call_agent/call_signal, return next() */
} kind;

typedef struct beh {
    const char *tag;
    kind kind;
    json_t *value;
} beh;

static char order_log[512];

static void record(const char *tag) {
    size_t n = strlen(order_log);
    snprintf(order_log + n, sizeof order_log - n, "%s%s", n ? " " : "", tag);
}

static json_t *wrap(const char *tag, json_t *inner) {
    json_t *r = json_sprintf("%s(%s)", tag, json_string_value(inner));
    json_decref(inner);
    return r;
}

static json_t *listener(weir_call *call, const json_t *args, void *user_data) {
    const beh *b = user_data;
    assert_non_null(args);
    record(b->tag);
    json_t *r;
    switch (b->kind) {
    case K_OK:
        return json_null();
    case K_WRAP:
        r = weir__call_next(call);
        return r ? wrap(b->tag, r) : NULL;
    case K_SHORT:
        return json_string(b->tag);
    case K_FAIL:
        weir__call_fail(call, "%s failed", b->tag);
        return NULL;
    case K_NULL:
        return NULL;
    case K_RECOVER:
        r = weir__call_next(call);
        return r ? r : json_string("recovered");
    case K_REFAIL:
        r = weir__call_next(call);
        if (!r)
            weir__call_fail(call, "%s saw an inner failure", b->tag);
        return r;
    case K_TWICE:
        json_decref(weir__call_next(call));
        return weir__call_next(call);
    case K_NEXT:
        return weir__call_next(call);
    case K_VALUE:
        return json_deep_copy(b->value);
    case K_CHECK_CTX:
        assert_ptr_equal(weir__call_agent(call), AGENT);
        assert_ptr_equal(weir__call_signal(call), SIGNAL);
        return weir__call_next(call);
    }
    return NULL;
}

static int default_calls;

/* Core default returning the string "D". */
static json_t *default_d(weir_call *call, const json_t *args, void *ctx) {
    (void)call, (void)args, (void)ctx;
    default_calls++;
    record("D");
    return json_string("D");
}

/* Core default returning a copy of ctx (a json_t*). */
static json_t *default_value(weir_call *call, const json_t *args, void *ctx) {
    (void)call, (void)args;
    default_calls++;
    return json_deep_copy(ctx);
}

static json_t *default_fail(weir_call *call, const json_t *args, void *ctx) {
    (void)args, (void)ctx;
    weir__call_fail(call, "no provider configured");
    return NULL;
}

static json_t *args_obj;
static weir__hooks *H;

static int setup(void **state) {
    (void)state;
    order_log[0] = '\0';
    default_calls = 0;
    args_obj = json_pack("{s:s}", "agent", "s-1");
    assert_int_equal(weir__hooks_create(&H), WEIR_OK);
    weir__hooks_set_trace(H, NULL);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    weir__hooks_destroy(H);
    H = NULL;
    json_decref(args_obj);
    return 0;
}

/* Add a listener for plugin `id` (its config index is its position in IDS). */
static void add(const char *hook, const char *id, beh *b, int order, const char *const *before,
                const char *const *after) {
    size_t index = 0;
    while (index < NIDS && strcmp(IDS[index], id) != 0)
        index++;
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.order = order;
    o.before = before;
    o.after = after;
    o.user_data = b;
    weir_error err;
    int rc = weir__hooks_add(H, PLUGIN(index), id, index, hook, listener, &o, &err);
    if (rc)
        fail_msg("add %s on %s: %s", id, hook, err.text);
}

static void freeze(void) {
    weir_error err;
    int rc = weir__hooks_freeze(H, IDS, NIDS, &err);
    if (rc)
        fail_msg("freeze: %s", err.text);
}

static json_t *invoke(const char *hook, weir__hook_default_fn dflt, void *ctx, weir_error *err) {
    weir_error_clear(err);
    return weir__hook_invoke(H, hook, AGENT, SIGNAL, args_obj, dflt, ctx, err);
}

/* The chain dump as a malloc'd string. */
static char *dump(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(weir__hooks_dump(H, f), WEIR_OK);
    fclose(f);
    return text;
}

static void assert_dump(const char *want) {
    char *got = dump();
    assert_string_equal(got, want);
    free(got);
}

/* Capture what the code under test writes to fd 2. */
typedef struct capture {
    int saved;
    char path[256];
} capture;

static void capture_begin(capture *c) {
    snprintf(c->path, sizeof c->path, "/tmp/weir-test-hooks-%ld.err", (long)getpid());
    fflush(stderr);
    c->saved = dup(2);
    FILE *f = fopen(c->path, "w");
    assert_non_null(f);
    dup2(fileno(f), 2);
    fclose(f);
}

static char *capture_end(capture *c) {
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    char *text = wt_read_file(c->path, NULL);
    unlink(c->path);
    assert_non_null(text);
    return text;
}

/* ------------------------------------------------------------------------ */
/* emit and serial                                                           */
/* ------------------------------------------------------------------------ */

static void test_emit_runs_every_listener_in_order(void **state) {
    (void)state;
    beh a = {"a", K_OK, NULL}, b = {"b", K_SHORT, NULL}, c = {"c", K_NULL, NULL};
    add("agent/status", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "c", &c, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_t *r = invoke("agent/status", default_d, NULL, &err);
    assert_true(json_is_null(r));
    assert_string_equal(order_log, "a b c");
    assert_int_equal(default_calls, 0); /* emit has no default */
    assert_int_equal(err.code, WEIR_OK);
}

static void test_emit_failure_is_logged_and_contained(void **state) {
    (void)state;
    beh a = {"a", K_OK, NULL}, b = {"b", K_FAIL, NULL}, c = {"c", K_OK, NULL};
    add("agent/status", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "c", &c, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    capture cap;
    capture_begin(&cap);
    json_t *r = invoke("agent/status", NULL, NULL, &err);
    char *text = capture_end(&cap);
    assert_true(json_is_null(r));
    assert_int_equal(err.code, WEIR_OK);
    assert_string_equal(order_log, "a b c");
    assert_string_equal(text, "weir: hook agent/status: plugin b failed: b failed\n");
    free(text);
}

static void test_serial_stops_at_first_failure(void **state) {
    (void)state;
    beh a = {"a", K_OK, NULL}, b = {"b", K_FAIL, NULL}, c = {"c", K_OK, NULL};
    add("agent/created", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/created", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/created", "c", &c, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    assert_null(invoke("agent/created", NULL, NULL, &err));
    assert_string_equal(order_log, "a b");
    assert_int_equal(err.code, WEIR_E_HOOK_FAILED);
    assert_string_equal(err.plugin, "b");
    assert_string_equal(err.hook, "agent/created");
    assert_string_equal(err.text, "hook agent/created: plugin b failed: b failed");
}

static void test_serial_null_without_message(void **state) {
    (void)state;
    beh a = {"a", K_OK, NULL}, b = {"b", K_NULL, NULL};
    add("agent/turn-stopping", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/turn-stopping", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    assert_null(invoke("agent/turn-stopping", NULL, NULL, &err));
    assert_int_equal(err.code, WEIR_E_HOOK_FAILED);
    assert_string_equal(err.text, "hook agent/turn-stopping: plugin b failed: returned no result");
}

static void test_serial_all_succeed(void **state) {
    (void)state;
    beh a = {"a", K_OK, NULL}, b = {"b", K_SHORT, NULL};
    add("agent/created", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/created", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_t *r = invoke("agent/created", NULL, NULL, &err);
    assert_true(json_is_null(r));
    assert_string_equal(order_log, "a b");
}

static void test_next_outside_waterfall_fails(void **state) {
    (void)state;
    beh a = {"a", K_NEXT, NULL};
    add("agent/created", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    assert_null(invoke("agent/created", NULL, NULL, &err));
    assert_string_equal(err.text, "hook agent/created: plugin a failed: weir_next() is only valid "
                                  "in waterfall hooks (agent/created is serial)");
}

/* ------------------------------------------------------------------------ */
/* waterfall                                                                 */
/* ------------------------------------------------------------------------ */

/* tools/post-execute results ({content:[...]}) let a chain show its order:
 * each listener appends its tag on the way out. */
static json_t *wrap_content(const char *tag, json_t *inner) {
    json_t *content = json_object_get(inner, "content");
    json_array_append_new(content, json_string(tag));
    return inner;
}

static json_t *content_listener(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    const beh *b = user_data;
    record(b->tag);
    if (b->kind == K_SHORT)
        return json_pack("{s:[s]}", "content", b->tag);
    json_t *r = weir__call_next(call);
    return r ? wrap_content(b->tag, r) : NULL;
}

static json_t *content_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call, (void)args, (void)ctx;
    default_calls++;
    record("D");
    return json_pack("{s:[s]}", "content", "D");
}

static void add_content(const char *id, beh *b) {
    size_t index = (size_t)(id[0] - 'a');
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = b;
    assert_int_equal(weir__hooks_add(H, PLUGIN(index), id, index, "tools/post-execute",
                                     content_listener, &o, NULL),
                     WEIR_OK);
}

static void assert_content(const json_t *r, const char *want) {
    char *got = json_dumps(json_object_get(r, "content"), JSON_COMPACT);
    assert_string_equal(got, want);
    free(got);
}

static void test_waterfall_order_and_default_result(void **state) {
    (void)state;
    beh a = {"a", K_WRAP, NULL}, b = {"b", K_WRAP, NULL}, c = {"c", K_WRAP, NULL};
    add_content("a", &a);
    add_content("b", &b);
    add_content("c", &c);
    freeze();
    weir_error err;
    json_t *r = invoke("tools/post-execute", content_default, NULL, &err);
    assert_non_null(r);
    assert_string_equal(order_log, "a b c D");
    /* innermost appends first: D, then c, b, a on the way out */
    assert_content(r, "[\"D\",\"c\",\"b\",\"a\"]");
    json_decref(r);
}

static void test_waterfall_short_circuit_skips_rest_and_default(void **state) {
    (void)state;
    beh a = {"a", K_WRAP, NULL}, b = {"b", K_SHORT, NULL}, c = {"c", K_WRAP, NULL};
    add_content("a", &a);
    add_content("b", &b);
    add_content("c", &c);
    freeze();
    weir_error err;
    json_t *r = invoke("tools/post-execute", content_default, NULL, &err);
    assert_non_null(r);
    assert_string_equal(order_log, "a b");
    assert_int_equal(default_calls, 0);
    assert_content(r, "[\"b\",\"a\"]");
    json_decref(r);
}

static void test_waterfall_next_returns_default(void **state) {
    (void)state;
    json_t *dflt = json_pack("{s:s}", "kind", "allow");
    beh a = {"a", K_RECOVER, NULL};
    add("tools/pre-execute", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_t *r = invoke("tools/pre-execute", default_value, dflt, &err);
    assert_true(json_equal(r, dflt));
    assert_ptr_not_equal(r, dflt); /* a new reference from the default */
    assert_int_equal(default_calls, 1);
    json_decref(r);
    json_decref(dflt);
}

static void test_waterfall_empty_chain_runs_default(void **state) {
    (void)state;
    freeze();
    json_t *dflt = json_pack("{s:s}", "kind", "retry");
    weir_error err;
    json_t *r = invoke("agent/request-error", default_value, dflt, &err);
    assert_true(json_equal(r, dflt));
    json_decref(r);
    /* no default at all: json_null(), valid for agent/request-error */
    r = invoke("agent/request-error", NULL, NULL, &err);
    assert_true(json_is_null(r));
    json_decref(dflt);
}

static void test_waterfall_inner_failure_propagates(void **state) {
    (void)state;
    beh a = {"a", K_WRAP, NULL}, b = {"b", K_WRAP, NULL}, c = {"c", K_FAIL, NULL};
    add("agent/request", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/request", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/request", "c", &c, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    assert_null(invoke("agent/request", default_d, NULL, &err));
    assert_string_equal(order_log, "a b c");
    assert_int_equal(default_calls, 0);
    assert_int_equal(err.code, WEIR_E_HOOK_FAILED);
    assert_string_equal(err.plugin, "c");
    assert_string_equal(err.hook, "agent/request");
    assert_string_equal(err.text, "hook agent/request: plugin c failed: c failed");
}

static void test_waterfall_outer_failure_after_inner_failure(void **state) {
    (void)state;
    beh a = {"a", K_REFAIL, NULL}, b = {"b", K_NULL, NULL};
    add("agent/request", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/request", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    assert_null(invoke("agent/request", default_d, NULL, &err));
    assert_string_equal(err.plugin, "a");
    assert_string_equal(err.text, "hook agent/request: plugin a failed: a saw an inner failure");
}

static void test_waterfall_recovered_value_is_validated(void **state) {
    (void)state;
    beh a = {"a", K_RECOVER, NULL}, b = {"b", K_FAIL, NULL};
    add("tools/pre-execute", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("tools/pre-execute", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    /* a recovers with the string "recovered": the failure of b is gone and
     * the recovered value is validated like any other, naming a */
    assert_null(invoke("tools/pre-execute", default_d, NULL, &err));
    assert_string_equal(order_log, "a b");
    assert_int_equal(err.code, WEIR_E_HOOK_RESULT);
    assert_string_equal(err.plugin, "a");
    assert_string_equal(err.text,
                        "hook tools/pre-execute: plugin a returned an invalid result: $: matches "
                        "none of the oneOf branches (1: $: expected object, got string; 2: $: "
                        "expected object, got string)");
}

static json_t *recover_listener(weir_call *call, const json_t *args, void *user_data) {
    (void)args, (void)user_data;
    json_t *r = weir__call_next(call);
    if (r)
        return r;
    return json_pack("{s:s}", "kind", "allow");
}

static void test_waterfall_recovery_succeeds(void **state) {
    (void)state;
    beh b = {"b", K_FAIL, NULL};
    assert_int_equal(weir__hooks_add(H, PLUGIN(0), "a", 0, "tools/pre-execute", recover_listener,
                                     NULL, NULL),
                     WEIR_OK);
    add("tools/pre-execute", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_t *r = invoke("tools/pre-execute", default_d, NULL, &err);
    assert_non_null(r);
    assert_string_equal(weir__json_str(r, "kind", ""), "allow");
    assert_int_equal(err.code, WEIR_OK);
    assert_int_equal(default_calls, 0);
    json_decref(r);
}

static void test_waterfall_next_twice_reruns_inner_chain(void **state) {
    (void)state;
    beh a = {"a", K_TWICE, NULL}, b = {"b", K_WRAP, NULL};
    add("agent/request-error", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/request-error", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_t *r = invoke("agent/request-error", default_d, NULL, &err);
    assert_null(r); /* "b(D)" is not a valid result, but both runs happened */
    assert_string_equal(order_log, "a b D b D");
    assert_int_equal(default_calls, 2);
}

static void test_waterfall_default_failure(void **state) {
    (void)state;
    beh a = {"a", K_WRAP, NULL};
    add("agent/request", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    assert_null(invoke("agent/request", default_fail, NULL, &err));
    assert_int_equal(err.code, WEIR_E_HOOK_FAILED);
    assert_string_equal(err.plugin, "");
    assert_string_equal(err.text, "hook agent/request: core default failed: no provider configured");
}

static void test_waterfall_invalid_result_names_plugin(void **state) {
    (void)state;
    beh a = {"a", K_RECOVER, NULL};
    beh b = {"b", K_VALUE, json_pack("{s:s,s:i}", "provider", "mock", "model", 7)};
    add("agent/request", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/request", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    assert_null(invoke("agent/request", default_d, NULL, &err));
    assert_int_equal(err.code, WEIR_E_HOOK_RESULT);
    assert_string_equal(err.plugin, "a");
    assert_string_equal(err.hook, "agent/request");
    assert_string_equal(err.text, "hook agent/request: plugin a returned an invalid result: "
                                  "$.model: expected string, got integer");
    json_decref(b.value);
}

static void test_waterfall_invalid_default_result(void **state) {
    (void)state;
    freeze();
    json_t *bad = json_pack("{s:s}", "provider", "mock");
    weir_error err;
    assert_null(invoke("agent/request", default_value, bad, &err));
    assert_int_equal(err.code, WEIR_E_HOOK_RESULT);
    assert_string_equal(err.plugin, "");
    assert_string_equal(err.text, "hook agent/request: core default returned an invalid result: "
                                  "$.model: required property is missing");
    json_decref(bad);
}

static void test_waterfall_valid_result_passes(void **state) {
    (void)state;
    beh a = {"a", K_VALUE, json_pack("{s:s,s:[]}", "kind", "enter", "messages")};
    add("agent/pre-step", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_t *r = invoke("agent/pre-step", default_d, NULL, &err);
    assert_true(json_equal(r, a.value));
    json_decref(r);
    json_decref(a.value);
}

static void test_call_agent_and_signal(void **state) {
    (void)state;
    beh a = {"a", K_CHECK_CTX, NULL};
    add("agent/request-error", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_t *r = invoke("agent/request-error", NULL, NULL, &err);
    assert_true(json_is_null(r));
    assert_null(weir__call_agent(NULL));
    assert_null(weir__call_signal(NULL));
    assert_null(weir__call_next(NULL));
}

/* ------------------------------------------------------------------------ */
/* ordering                                                                  */
/* ------------------------------------------------------------------------ */

static beh quiet = {"q", K_OK, NULL};

static void test_order_first_middle_last(void **state) {
    (void)state;
    add("agent/status", "a", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "b", &quiet, WEIR_ORDER_LAST, NULL, NULL);
    add("agent/status", "c", &quiet, WEIR_ORDER_FIRST, NULL, NULL);
    add("agent/status", "d", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    assert_dump("agent/status (emit)\n"
                "  1. c  [first] before=- after=-\n"
                "  2. a  [middle] before=- after=-\n"
                "  3. d  [middle] before=- after=-\n"
                "  4. b  [last] before=- after=-\n");
}

static void test_order_config_then_registration(void **state) {
    (void)state;
    beh x1 = {"x1", K_OK, NULL}, x2 = {"x2", K_OK, NULL}, c1 = {"c1", K_OK, NULL};
    /* x is last in the config but registers first; c registers in between */
    add("agent/status", "x", &x1, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "c", &c1, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "x", &x2, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_decref(invoke("agent/status", NULL, NULL, &err));
    assert_string_equal(order_log, "c1 x1 x2");
}

static void test_order_before_after(void **state) {
    (void)state;
    static const char *const before_b[] = {"b", NULL};
    static const char *const after_c[] = {"c", NULL};
    add("agent/status", "a", &quiet, WEIR_ORDER_MIDDLE, NULL, after_c);
    add("agent/status", "b", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "c", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "d", &quiet, WEIR_ORDER_MIDDLE, before_b, NULL);
    freeze();
    assert_dump("agent/status (emit)\n"
                "  1. c  [middle] before=- after=-\n"
                "  2. a  [middle] before=- after=c\n"
                "  3. d  [middle] before=b after=-\n"
                "  4. b  [middle] before=- after=-\n");
}

static void test_order_constraint_overrides_placement(void **state) {
    (void)state;
    static const char *const before_a[] = {"a", NULL};
    add("agent/status", "a", &quiet, WEIR_ORDER_FIRST, NULL, NULL);
    add("agent/status", "b", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "c", &quiet, WEIR_ORDER_LAST, before_a, NULL);
    freeze();
    /* a waits for c; b, free, takes the first place (APR's tsort) */
    assert_dump("agent/status (emit)\n"
                "  1. b  [middle] before=- after=-\n"
                "  2. c  [last] before=a after=-\n"
                "  3. a  [first] before=- after=-\n");
}

static void test_order_ties_are_stable(void **state) {
    (void)state;
    static const char *const before_c[] = {"c", NULL};
    static const char *const after_x[] = {"x", NULL}; /* x has no listener here */
    add("agent/status", "a", &quiet, WEIR_ORDER_MIDDLE, NULL, after_x);
    add("agent/status", "b", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "c", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "d", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "e", &quiet, WEIR_ORDER_MIDDLE, before_c, NULL);
    freeze();
    /* only c moves, to just after e; everything else keeps config order */
    assert_dump("agent/status (emit)\n"
                "  1. a  [middle] before=- after=x\n"
                "  2. b  [middle] before=- after=-\n"
                "  3. d  [middle] before=- after=-\n"
                "  4. e  [middle] before=c after=-\n"
                "  5. c  [middle] before=- after=-\n");
}

static void test_order_cycle_names_plugins(void **state) {
    (void)state;
    static const char *const before_b[] = {"b", NULL};
    static const char *const before_c[] = {"c", NULL};
    static const char *const before_a[] = {"a", NULL};
    add("agent/status", "e", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "c", &quiet, WEIR_ORDER_MIDDLE, before_a, NULL);
    add("agent/status", "a", &quiet, WEIR_ORDER_MIDDLE, before_b, NULL);
    add("agent/status", "b", &quiet, WEIR_ORDER_MIDDLE, before_c, NULL);
    weir_error err;
    assert_int_equal(weir__hooks_freeze(H, IDS, NIDS, &err), WEIR_E_HOOK_ORDER);
    assert_string_equal(err.hook, "agent/status");
    assert_string_equal(err.plugin, "a");
    assert_string_equal(err.text,
                        "hook agent/status: before/after constraints form a cycle: a -> b -> c -> a");
    /* not frozen: invocation is refused */
    assert_null(invoke("agent/status", NULL, NULL, &err));
    assert_int_equal(err.code, WEIR_E_STATE);
}

static void test_order_self_reference_is_a_cycle(void **state) {
    (void)state;
    static const char *const after_a[] = {"a", NULL};
    add("agent/created", "a", &quiet, WEIR_ORDER_MIDDLE, NULL, after_a);
    weir_error err;
    assert_int_equal(weir__hooks_freeze(H, IDS, NIDS, &err), WEIR_E_HOOK_ORDER);
    assert_string_equal(err.text, "hook agent/created: before/after constraints form a cycle: a -> a");
}

static void test_order_unknown_id(void **state) {
    (void)state;
    static const char *const before_x[] = {"b", "nosuch", NULL};
    add("agent/status", "b", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("tools/result", "a", &quiet, WEIR_ORDER_MIDDLE, before_x, NULL);
    weir_error err;
    assert_int_equal(weir__hooks_freeze(H, IDS, NIDS, &err), WEIR_E_HOOK_ORDER);
    assert_string_equal(err.hook, "tools/result");
    assert_string_equal(err.plugin, "a");
    assert_string_equal(err.text,
                        "hook tools/result: plugin a asks to run before unknown plugin \"nosuch\"");
}

/* ------------------------------------------------------------------------ */
/* registration and freeze                                                   */
/* ------------------------------------------------------------------------ */

static void test_add_after_freeze_is_too_late(void **state) {
    (void)state;
    freeze();
    weir_error err;
    assert_int_equal(weir__hooks_add(H, PLUGIN(0), "a", 0, "agent/status", listener, NULL, &err),
                     WEIR_E_TOO_LATE);
    assert_string_equal(err.plugin, "a");
    assert_string_equal(err.text, "plugin a: cannot register on hook agent/status after the "
                                  "chains are frozen (only during init)");
    assert_int_equal(weir__hooks_freeze(H, IDS, NIDS, &err), WEIR_E_STATE);
}

static void test_add_unknown_hook(void **state) {
    (void)state;
    weir_error err;
    assert_int_equal(weir__hooks_add(H, PLUGIN(0), "a", 0, "agent/nope", listener, NULL, &err),
                     WEIR_E_NOT_FOUND);
    assert_string_equal(err.hook, "agent/nope");
    assert_string_equal(err.text,
                        "plugin a: unknown hook \"agent/nope\" (see `weir hooks --catalog`)");
    assert_int_equal(weir__hooks_add(H, PLUGIN(0), "a", 0, NULL, listener, NULL, &err),
                     WEIR_E_INVAL);
    assert_int_equal(weir__hooks_add(H, PLUGIN(0), "a", 0, "agent/status", NULL, NULL, &err),
                     WEIR_E_INVAL);
    weir_hook_opts bad = {0};
    assert_int_equal(weir__hooks_add(H, PLUGIN(0), "a", 0, "agent/status", listener, &bad, &err),
                     WEIR_E_INVAL);
    assert_int_equal(weir__hooks_count(H, "agent/status"), 0);
}

static void test_short_opts_struct_keeps_defaults(void **state) {
    (void)state;
    static const char *const before_zz[] = {"zz", NULL}; /* would fail freeze if read */
    weir_hook_opts o = {offsetof(weir_hook_opts, before), WEIR_ORDER_LAST, before_zz, NULL, NULL};
    assert_int_equal(weir__hooks_add(H, PLUGIN(0), "a", 0, "agent/status", listener, &o, NULL),
                     WEIR_OK);
    add("agent/status", "b", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    assert_dump("agent/status (emit)\n"
                "  1. b  [middle] before=- after=-\n"
                "  2. a  [last] before=- after=-\n");
}

/* A struct_size that ends inside a pointer field leaves that field at its
 * default: half a pointer is never read. */
static void test_opts_size_inside_a_field_skips_it(void **state) {
    (void)state;
    static const char *const before_zz[] = {"zz", NULL}; /* would fail freeze if read */
    weir_hook_opts o = {offsetof(weir_hook_opts, before) + sizeof(void *) / 2, WEIR_ORDER_LAST,
                        before_zz, NULL, NULL};
    assert_int_equal(weir__hooks_add(H, PLUGIN(0), "a", 0, "agent/status", listener, &o, NULL),
                     WEIR_OK);
    freeze();
    assert_dump("agent/status (emit)\n"
                "  1. a  [last] before=- after=-\n");
}

static void test_remove_owner_and_count(void **state) {
    (void)state;
    add("agent/status", "a", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/status", "b", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/created", "a", &quiet, WEIR_ORDER_MIDDLE, NULL, NULL);
    assert_int_equal(weir__hooks_count(H, "agent/status"), 2);
    assert_int_equal(weir__hooks_count(H, "agent/created"), 1);
    assert_int_equal(weir__hooks_count(H, "no/such"), 0);
    weir__hooks_remove_owner(H, PLUGIN(0));
    assert_int_equal(weir__hooks_count(H, "agent/status"), 1);
    assert_int_equal(weir__hooks_count(H, "agent/created"), 0);
    freeze();
    assert_dump("agent/status (emit)\n"
                "  1. b  [middle] before=- after=-\n");
}

static void test_invoke_argument_errors(void **state) {
    (void)state;
    weir_error err;
    assert_null(invoke("agent/status", NULL, NULL, &err));
    assert_int_equal(err.code, WEIR_E_STATE);
    assert_string_equal(err.text, "hook agent/status: chains are not frozen yet");
    freeze();
    assert_null(invoke("no/such", NULL, NULL, &err));
    assert_int_equal(err.code, WEIR_E_NOT_FOUND);
    assert_null(weir__hook_invoke(H, "agent/status", NULL, NULL, NULL, NULL, NULL, &err));
    assert_int_equal(err.code, WEIR_E_INVAL);
}

/* ------------------------------------------------------------------------ */
/* tracing                                                                   */
/* ------------------------------------------------------------------------ */

/* Replace every "us=<digits>" with "us=N" (in place: the text only shrinks). */
static void mask_us(char *s) {
    char *w = s;
    for (const char *r = s; *r;) {
        if (strncmp(r, "us=", 3) == 0 && r[3] >= '0' && r[3] <= '9') {
            r += 3;
            while (*r >= '0' && *r <= '9')
                r++;
            memcpy(w, "us=N", 4);
            w += 4;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

static void test_trace_lines(void **state) {
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    weir__hooks_set_trace(H, f);
    beh a = {"a", K_WRAP, NULL}, b = {"b", K_SHORT, NULL}, c = {"c", K_WRAP, NULL};
    beh s = {"s", K_OK, NULL}, t = {"t", K_FAIL, NULL};
    add_content("a", &a);
    add_content("c", &c);
    add("agent/created", "a", &s, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/created", "b", &t, WEIR_ORDER_MIDDLE, NULL, NULL);
    add("agent/request", "b", &b, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    json_decref(invoke("tools/post-execute", content_default, NULL, &err));
    assert_null(invoke("agent/created", NULL, NULL, &err));
    assert_null(invoke("agent/request", NULL, NULL, &err)); /* short-circuit, invalid */
    fclose(f);
    mask_us(text);
    assert_string_equal(text,
                        "weir-trace: tools/post-execute waterfall plugin=(default) outcome=ok us=N\n"
                        "weir-trace: tools/post-execute waterfall plugin=c outcome=next us=N\n"
                        "weir-trace: tools/post-execute waterfall plugin=a outcome=next us=N\n"
                        "weir-trace: agent/created serial plugin=a outcome=ok us=N\n"
                        "weir-trace: agent/created serial plugin=b outcome=failed us=N\n"
                        "weir-trace: agent/request waterfall plugin=b outcome=short-circuit us=N\n");
    free(text);
}

static void test_trace_from_environment(void **state) {
    (void)state;
    weir__hooks_destroy(H);
    setenv("WEIR_TRACE", "1", 1);
    assert_int_equal(weir__hooks_create(&H), WEIR_OK);
    unsetenv("WEIR_TRACE");
    beh a = {"a", K_OK, NULL};
    add("agent/disposed", "a", &a, WEIR_ORDER_MIDDLE, NULL, NULL);
    freeze();
    weir_error err;
    capture cap;
    capture_begin(&cap);
    json_decref(invoke("agent/disposed", NULL, NULL, &err));
    char *text = capture_end(&cap);
    mask_us(text);
    assert_string_equal(text, "weir-trace: agent/disposed emit plugin=a outcome=ok us=N\n");
    free(text);
}

/* ------------------------------------------------------------------------ */
/* concurrency                                                               */
/* ------------------------------------------------------------------------ */

/* Listener for the threaded test: no shared log. */
static json_t *quiet_wrap(weir_call *call, const json_t *args, void *user_data) {
    (void)args;
    json_t *r = weir__call_next(call);
    return r ? wrap_content(user_data, r) : NULL;
}

static json_t *quiet_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call, (void)args, (void)ctx;
    return json_pack("{s:[s]}", "content", "D");
}

static void *invoke_many(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; i++) {
        weir_error err;
        json_t *r = weir__hook_invoke(H, "tools/post-execute", NULL, NULL, args_obj,
                                      quiet_default, NULL, &err);
        if (!r)
            return (void *)1;
        char *got = json_dumps(json_object_get(r, "content"), JSON_COMPACT);
        int bad = strcmp(got, "[\"D\",\"b\",\"a\"]") != 0;
        free(got);
        json_decref(r);
        if (bad)
            return (void *)1;
    }
    return NULL;
}

static void test_invoke_from_many_threads(void **state) {
    (void)state;
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = (void *)"a";
    assert_int_equal(
        weir__hooks_add(H, PLUGIN(0), "a", 0, "tools/post-execute", quiet_wrap, &o, NULL), 0);
    o.user_data = (void *)"b";
    assert_int_equal(
        weir__hooks_add(H, PLUGIN(1), "b", 1, "tools/post-execute", quiet_wrap, &o, NULL), 0);
    freeze();
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, invoke_many, NULL), 0);
    int failures = 0;
    for (int i = 0; i < 4; i++) {
        void *rv;
        pthread_join(th[i], &rv);
        failures += rv != NULL;
    }
    assert_int_equal(failures, 0);
}

/* ------------------------------------------------------------------------ */
/* catalog                                                                   */
/* ------------------------------------------------------------------------ */

static void test_catalog_entries_are_consistent(void **state) {
    (void)state;
    assert_true(weir__hook_catalog_len >= 18);
    for (size_t i = 0; i < weir__hook_catalog_len; i++) {
        const weir__hook_def *d = &weir__hook_catalog[i];
        assert_ptr_equal(weir__hook_find(d->name), d); /* names are unique */
        assert_non_null(d->payload);
        assert_non_null(d->result);
        assert_non_null(d->summary);
        assert_true(strncmp(d->payload, "{agent", 6) == 0); /* agent always comes first */
        if (d->mode == WEIR__HOOK_WATERFALL) {
            json_error_t e;
            json_t *s = json_loads(d->result_schema, 0, &e);
            if (!s)
                fail_msg("%s: result schema: %s", d->name, e.text);
            json_decref(s);
        } else {
            assert_null(d->result_schema);
        }
    }
    assert_null(weir__hook_find("agent/nope"));
    assert_null(weir__hook_find(NULL));
    assert_string_equal(weir__hook_find("agent/pre-step")->payload,
                        "{agent, turn, step, messages:[user messages], native?}");
}

static char *catalog_text(bool markdown) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(weir_hook_catalog_write(f, markdown), WEIR_OK);
    fclose(f);
    return text;
}

static void test_catalog_plain_text(void **state) {
    (void)state;
    char *text = catalog_text(false);
    const char *want = "agent/turn-stopping (serial)\n"
                       "  The turn is about to end; a listener may steer to keep it going.\n"
                       "  payload: {agent, turn}\n"
                       "  result:  none; a listener that objects calls weir_agent_steer()\n";
    assert_non_null(strstr(text, want));
    for (size_t i = 0; i < weir__hook_catalog_len; i++)
        assert_non_null(strstr(text, weir__hook_catalog[i].name));
    free(text);
    assert_int_equal(weir_hook_catalog_write(NULL, false), WEIR_E_INVAL);
}

static void test_catalog_markdown_matches_docs(void **state) {
    (void)state;
    char *want = catalog_text(true);
    char *path = NULL;
    assert_true(asprintf(&path, "%s/docs/hooks.md", wt_env("WEIR_TEST_SOURCE_DIR")) > 0);
    char *have = wt_read_file(path, NULL);
    free(path);
    if (!have || strcmp(have, want) != 0) {
        free(have);
        free(want);
        fail_msg("docs/hooks.md is out of date with core/format/hook_catalog.c; regenerate it with:\n"
                 "    weir hooks --markdown > docs/hooks.md");
    }
    free(have);
    free(want);
}

/* ------------------------------------------------------------------------ */
/* allocation failure                                                        */
/* ------------------------------------------------------------------------ */

static json_t *alloc_listener(weir_call *call, const json_t *args, void *user_data) {
    (void)args, (void)user_data;
    json_t *r = weir__call_next(call);
    if (!r)
        return NULL;
    if (json_array_append_new(json_object_get(r, "content"), json_string("x"))) {
        json_decref(r);
        weir__call_fail(call, "out of memory");
        return NULL;
    }
    return r;
}

static json_t *alloc_default(weir_call *call, const json_t *args, void *ctx) {
    (void)args, (void)ctx;
    json_t *r = json_pack("{s:[]}", "content");
    if (!r)
        weir__call_fail(call, "out of memory");
    return r;
}

/* One full cycle; returns the first failing status (0 = all succeeded). */
static int alloc_cycle(void) {
    static const char *const before_b[] = {"b", NULL};
    static const char *const after_a[] = {"a", NULL};
    weir__hooks *h = NULL;
    int rc = weir__hooks_create(&h);
    if (rc)
        return rc;
    weir_hook_opts o1 = WEIR_HOOK_OPTS_INIT, o2 = WEIR_HOOK_OPTS_INIT;
    o1.before = before_b;
    o2.after = after_a;
    weir_error err;
    rc = weir__hooks_add(h, PLUGIN(1), "b", 1, "tools/post-execute", alloc_listener, NULL, &err);
    if (!rc)
        rc = weir__hooks_add(h, PLUGIN(0), "a", 0, "tools/post-execute", alloc_listener, &o1,
                             &err);
    if (!rc)
        rc = weir__hooks_add(h, PLUGIN(2), "c", 2, "tools/post-execute", alloc_listener, &o2,
                             &err);
    if (!rc)
        rc = weir__hooks_freeze(h, IDS, NIDS, &err);
    json_t *args = rc ? NULL : json_object();
    if (!rc && !args)
        rc = WEIR_E_NOMEM;
    if (!rc) {
        json_t *r = weir__hook_invoke(h, "tools/post-execute", NULL, NULL, args, alloc_default,
                                      NULL, &err);
        if (r) {
            assert_int_equal(json_array_size(json_object_get(r, "content")), 3);
            json_decref(r);
        } else {
            assert_int_equal(err.code, WEIR_E_HOOK_FAILED);
            assert_non_null(strstr(err.text, "out of memory"));
            rc = err.code;
        }
    }
    if (rc && rc != WEIR_E_HOOK_FAILED)
        assert_int_equal(rc, WEIR_E_NOMEM);
    json_decref(args);
    weir__hooks_destroy(h);
    if (!rc) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        assert_non_null(f);
        rc = weir_hook_catalog_write(f, true);
        fclose(f);
        free(text);
        if (rc)
            assert_int_equal(rc, WEIR_E_NOMEM);
    }
    return rc;
}

static void test_allocation_failure_loop(void **state) {
    (void)state;
    bool completed = false;
    for (long n = 1; n < 100000 && !completed; n++) {
        weir__alloc_fail_after(n);
        int rc = alloc_cycle();
        long used = weir__alloc_fail_after(-1);
        if (used < n) {
            assert_int_equal(rc, WEIR_OK); /* nothing failed: must succeed */
            completed = true;
        }
    }
    assert_true(completed);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_emit_runs_every_listener_in_order),
        T(test_emit_failure_is_logged_and_contained),
        T(test_serial_stops_at_first_failure),
        T(test_serial_null_without_message),
        T(test_serial_all_succeed),
        T(test_next_outside_waterfall_fails),
        T(test_waterfall_order_and_default_result),
        T(test_waterfall_short_circuit_skips_rest_and_default),
        T(test_waterfall_next_returns_default),
        T(test_waterfall_empty_chain_runs_default),
        T(test_waterfall_inner_failure_propagates),
        T(test_waterfall_outer_failure_after_inner_failure),
        T(test_waterfall_recovered_value_is_validated),
        T(test_waterfall_recovery_succeeds),
        T(test_waterfall_next_twice_reruns_inner_chain),
        T(test_waterfall_default_failure),
        T(test_waterfall_invalid_result_names_plugin),
        T(test_waterfall_invalid_default_result),
        T(test_waterfall_valid_result_passes),
        T(test_call_agent_and_signal),
        T(test_order_first_middle_last),
        T(test_order_config_then_registration),
        T(test_order_before_after),
        T(test_order_constraint_overrides_placement),
        T(test_order_ties_are_stable),
        T(test_order_cycle_names_plugins),
        T(test_order_self_reference_is_a_cycle),
        T(test_order_unknown_id),
        T(test_add_after_freeze_is_too_late),
        T(test_add_unknown_hook),
        T(test_short_opts_struct_keeps_defaults),
        T(test_opts_size_inside_a_field_skips_it),
        T(test_remove_owner_and_count),
        T(test_invoke_argument_errors),
        T(test_trace_lines),
        T(test_trace_from_environment),
        T(test_invoke_from_many_threads),
        T(test_catalog_entries_are_consistent),
        T(test_catalog_plain_text),
        T(test_catalog_markdown_matches_docs),
        T(test_allocation_failure_loop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
