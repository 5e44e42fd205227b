/*
 * tests/unit/test_testkit.c - the plugin test kit (weir/testkit.h): static
 * and file loading, the real registry behind it (ordering, validation,
 * failures), the fake agent's records, and allocation failure; kit 0.2: the
 * fake agent's real log (seeds, route, surface replace), scripted direct
 * calls by purpose, the fake clock, compaction-basic and retry one hook at
 * a time, several turns and purpose matching in weir_tk_run_turn.
 *
 * The plugins here are descriptors linked into the test.  Tests are built
 * with WEIR_NO_API_MACROS, so they call the table directly (g_api->...).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"
#include "common.h"
#include "host_int.h"
#include "testutil.h"
#include "weir/testkit.h"

static const weir_api *g_api; /* the table the last init received */

/* --- helpers ------------------------------------------------------------- */

static void assert_json(const json_t *value, const char *expected) {
    char *text = json_dumps(value, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        fail_msg("cannot serialize %p (expected %s)", (const void *)value, expected);
    assert_string_equal(text, expected);
    free(text);
}

static json_t *parse(const char *text) {
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(v);
    return v;
}

/* A JSON value that lives until the process ends (a config passed inline). */
static const json_t *parse_borrow(const char *text) {
    static json_t *kept[16];
    static size_t n;
    json_t *v = parse(text);
    assert_true(n < sizeof kept / sizeof kept[0]);
    kept[n++] = v;
    return v;
}

/* weir_tk_invoke borrows its default (since kit 0.2): invoke with a default
 * given as JSON text, released here. */
static json_t *invoke(weir_tk *tk, const char *hook, const json_t *args, const char *dflt,
                      weir_error *err) {
    json_t *d = dflt ? parse(dflt) : NULL;
    json_t *r = weir_tk_invoke(tk, hook, args, d, err);
    if (d) /* borrowed: the kit kept no reference (the result may be the default itself) */
        assert_int_equal(d->refcount, r == d ? 2 : 1);
    json_decref(d);
    return r;
}

#define PRE_EXEC_ARGS                                                                   \
    "{\"agent\":\"testkit\",\"turn\":1,\"step\":1,\"call_id\":\"c1\",\"name\":\"ls\"," \
    "\"arguments\":\"{}\"}"

/* --- fixture plugins ----------------------------------------------------- */

/* "marker": on tools/pre-execute appends its row id to result.seen; config
 * {"order"?: n, "fail"?: bool, "bad"?: bool}. */
static json_t *marker_pre_execute(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    const char *id = ud;
    json_t *r = g_api->next(call);
    if (!r)
        return NULL;
    json_t *out = json_deep_copy(r);
    json_decref(r);
    json_t *seen = json_object_get(out, "seen");
    if (!seen)
        json_object_set_new(out, "seen", seen = json_array());
    json_array_append_new(seen, json_string(id));
    return out;
}

static json_t *failing_pre_execute(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    g_api->call_fail(call, "row %s refuses", (const char *)ud);
    return NULL;
}

static json_t *bad_pre_execute(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    (void)args;
    (void)ud;
    return json_pack("{s:s}", "kind", "maybe");
}

static int marker_init(weir_plugin *self, const weir_api *api, const json_t *config,
                       weir_error *err) {
    (void)err;
    g_api = api;
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.order = (int)json_integer_value(json_object_get(config, "order"));
    opts.user_data = (void *)(uintptr_t)api->plugin_id(self); /* valid for the row's life */
    weir_hook_fn fn = json_is_true(json_object_get(config, "fail")) ? failing_pre_execute
                      : json_is_true(json_object_get(config, "bad")) ? bad_pre_execute
                                                                     : marker_pre_execute;
    return api->hook_register(self, "tools/pre-execute", fn, &opts);
}

static const weir_plugin_desc marker_desc = {
    WEIR_PLUGIN_HEADER,
    .name = "marker",
    .version = "1.0.0",
    .description = "test kit fixture: marks the pre-execute result",
    .config_schema = "{\"type\":\"object\",\"properties\":{\"order\":{\"type\":\"integer\"},"
                     "\"fail\":{\"type\":\"boolean\"},\"bad\":{\"type\":\"boolean\"}},"
                     "\"additionalProperties\":false}",
    .init = marker_init,
};

/* "agentish": exercises the fake agent on agent/pre-step. */
static json_t *agentish_pre_step(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    (void)ud;
    weir_agent *agent = g_api->call_agent(call);
    json_t *msgs = g_api->agent_messages(agent);
    json_t *data = json_pack("{s:s,s:I,s:b}", "agent", g_api->agent_id(agent), "n",
                             (json_int_t)json_array_size(msgs), "cancelled",
                             g_api->signal_cancelled(g_api->call_signal(call)));
    json_decref(msgs);
    weir_error err;
    int rc = g_api->agent_append(agent, "agentish/seen", data, &err);
    json_decref(data);
    if (rc != WEIR_OK) {
        g_api->call_fail(call, "%s", err.text);
        return NULL;
    }
    json_t *hello = json_pack("{s:s,s:[{s:s,s:s}]}", "role", "user", "content", "type", "text",
                              "text", "again");
    rc = g_api->agent_send(agent, hello, WEIR_SEND_STEER, "in-1", &err);
    json_decref(hello);
    /* An unregistered type is refused, as by a real host. */
    json_t *empty = json_object();
    int unknown = g_api->agent_append(agent, "agentish/unknown", empty, &err);
    json_decref(empty);
    g_api->log(NULL, WEIR_LOG_INFO, "ignored: no instance");
    if (rc != WEIR_OK || unknown != WEIR_E_NOT_FOUND) {
        g_api->call_fail(call, "send %d, unknown append %d", rc, unknown);
        return NULL;
    }
    return g_api->next(call);
}

static weir_plugin *g_agentish_self;

static int agentish_init(weir_plugin *self, const weir_api *api, const json_t *config,
                         weir_error *err) {
    (void)config;
    (void)err;
    g_api = api;
    g_agentish_self = self;
    api->log(self, WEIR_LOG_WARN, "hello %d", 42);
    int rc = api->event_type_register(self, "agentish/seen", 0);
    if (rc == WEIR_OK)
        rc = api->hook_register(self, "agent/pre-step", agentish_pre_step, NULL);
    return rc;
}

static const weir_plugin_desc agentish_desc = {
    WEIR_PLUGIN_HEADER,
    .name = "agentish",
    .version = "1.0.0",
    .description = "test kit fixture: uses the fake agent",
    .init = agentish_init,
};

/* "storeish": registers a session store (a store plugin under test). */
static int st_open(void *self, const char *id, const char *path, uint32_t flags, void **handle,
                   uint64_t *epoch, weir_error *err) {
    (void)self, (void)id, (void)path, (void)flags, (void)handle, (void)epoch, (void)err;
    return WEIR_E_UNSUPPORTED;
}
static int st_read(void *self, void *handle, uint64_t from, char **buf, size_t *len,
                   weir_error *err) {
    (void)self, (void)handle, (void)from, (void)buf, (void)len, (void)err;
    return WEIR_E_UNSUPPORTED;
}
static void st_free(void *self, char *buf) { (void)self, (void)buf; }
static int st_append(void *self, void *handle, uint64_t epoch, uint64_t first, size_t count,
                     const char *lines, size_t len, uint32_t flags, weir_error *err) {
    (void)self, (void)handle, (void)epoch, (void)first, (void)count, (void)lines, (void)len,
        (void)flags, (void)err;
    return WEIR_E_UNSUPPORTED;
}
static int st_sync(void *self, void *handle, weir_error *err) {
    (void)self, (void)handle, (void)err;
    return WEIR_OK;
}
static void st_close(void *self, void *handle) { (void)self, (void)handle; }

static int storeish_init(weir_plugin *self, const weir_api *api, const json_t *config,
                         weir_error *err) {
    (void)config, (void)err;
    static const weir_store store = {.struct_size = sizeof store, .open = st_open,
                                     .read = st_read, .buffer_free = st_free,
                                     .append = st_append, .sync = st_sync, .close = st_close};
    return api->store_register(self, &store, NULL);
}

static const weir_plugin_desc storeish_desc = {
    WEIR_PLUGIN_HEADER, .name = "storeish", .version = "1.0.0", .init = storeish_init,
};

/* "initfail": registers a hook, then fails init. */
static int initfail_init(weir_plugin *self, const weir_api *api, const json_t *config,
                         weir_error *err) {
    (void)config;
    api->hook_register(self, "tools/pre-execute", bad_pre_execute, NULL);
    api->event_type_register(self, "initfail/event", 0);
    snprintf(err->text, sizeof err->text, "no licence key");
    return WEIR_E_PLUGIN_CONFIG;
}

static const weir_plugin_desc initfail_desc = {
    WEIR_PLUGIN_HEADER, .name = "initfail", .version = "1.0.0", .init = initfail_init,
};

/* "badhook": init ignores a failed registration on an unknown hook. */
static int badhook_init(weir_plugin *self, const weir_api *api, const json_t *config,
                        weir_error *err) {
    (void)config;
    (void)err;
    api->hook_register(self, "tools/no-such-hook", bad_pre_execute, NULL);
    return WEIR_OK;
}

static const weir_plugin_desc badhook_desc = {
    WEIR_PLUGIN_HEADER, .name = "badhook", .version = "1.0.0", .init = badhook_init,
};

/* "finilog": fini records its row id in order. */
static char g_fini_order[64];

static void finilog_fini(weir_plugin *self) {
    strcat(g_fini_order, g_api->plugin_id(self));
}

static int finilog_init(weir_plugin *self, const weir_api *api, const json_t *config,
                        weir_error *err) {
    (void)self;
    (void)config;
    (void)err;
    g_api = api;
    return WEIR_OK;
}

static const weir_plugin_desc finilog_desc = {
    WEIR_PLUGIN_HEADER, .name = "finilog", .version = "1.0.0",
    .init = finilog_init, .fini = finilog_fini,
};

/* --- tests --------------------------------------------------------------- */

static int load(weir_tk *tk, const weir_plugin_desc *d, const char *id, const char *config,
                weir_error *err) {
    json_t *c = config ? parse(config) : NULL;
    int rc = weir_tk_load(tk, d, id, c, err);
    json_decref(c);
    return rc;
}


/* "ctxish" (kit 0.2): on agent/compact reads the fake agent's context and
 * replaces the first tool result, reporting what it saw:
 * {kind:"compacted", nodes, window, route, messages, seq}. */
static json_t *ctxish_compact(weir_call *call, const json_t *args, void *ud) {
    (void)args, (void)ud;
    weir_agent *agent = g_api->call_agent(call);
    json_t *surface = g_api->agent_surface(agent);
    json_t *info = g_api->agent_model_info(agent, "p", "m");
    json_t *route = g_api->agent_last_event(agent, "request/context");
    json_t *msgs = g_api->agent_messages(agent);
    json_int_t first_tool = -1;
    size_t i;
    const json_t *node;
    json_array_foreach(surface, i, node) {
        if (first_tool < 0 && !strcmp(json_string_value(json_object_get(node, "type")),
                                      "tool/result"))
            first_tool = json_integer_value(json_object_get(node, "seq"));
    }
    size_t seq = 0;
    weir_error err;
    weir_error_clear(&err);
    json_t *data = json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s, s:[{s:s, s:s}]}]}}", "turn", 1,
                             "step", 1, "message", "role", "tool", "content", "type",
                             "tool_result", "call_id", "c1", "content", "type", "text", "text",
                             "[pruned]");
    int rc = first_tool >= 0 ? g_api->agent_surface_replace(agent, "tool/result", data,
                                                            (size_t)first_tool,
                                                            (size_t)first_tool, NULL, &seq,
                                                            &err)
                             : WEIR_E_NOT_FOUND;
    json_t *r = json_pack("{s:s, s:I, s:O?, s:O?, s:I, s:I, s:I, s:s}", "kind", "compacted",
                          "nodes", (json_int_t)json_array_size(surface), "window",
                          json_object_get(info, "context_window"), "route",
                          json_object_get(route, "data"), "messages",
                          (json_int_t)json_array_size(msgs), "seq", (json_int_t)seq,
                          "generation", (json_int_t)g_api->agent_replace_generation(agent),
                          "message", rc == WEIR_OK ? "replaced" : err.text);
    json_decref(data);
    json_decref(surface);
    json_decref(info);
    json_decref(route);
    json_decref(msgs);
    return r;
}

/* "asker" (kit 0.2): on agent/compact makes one direct call of purpose
 * args.instructions (complete_stream) and one without (complete), and
 * sleeps 25 s on the call's signal; returns both texts. */
static json_t *asker_compact(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    weir_agent *agent = g_api->call_agent(call);
    json_t *req = json_pack("{s:s, s:s, s:[]}", "provider", "p", "model", "m", "messages");
    json_t *ctx = json_pack("{s:s}", "purpose",
                            json_string_value(json_object_get(args, "instructions")));
    json_t *a = NULL, *b = NULL;
    weir_error err;
    weir_error_clear(&err);
    int ra = g_api->agent_complete_stream(agent, req, ctx, g_api->call_signal(call), &a, &err);
    char why[sizeof err.text];
    snprintf(why, sizeof why, "%s", err.text);
    int rb = g_api->agent_complete(agent, req, g_api->call_signal(call), &b, &err);
    int rs = g_api->signal_sleep(g_api->call_signal(call), 25000);
    const json_t *ta = json_object_get(json_array_get(json_object_get(json_object_get(a,
                                       "message"), "content"), 0), "text");
    const json_t *tb = json_object_get(json_array_get(json_object_get(json_object_get(b,
                                       "message"), "content"), 0), "text");
    json_t *r = json_pack("{s:s, s:s, s:s, s:i}", "kind", "compacted", "message",
                          ra == WEIR_OK ? json_string_value(ta) : why, "second",
                          rb == WEIR_OK ? json_string_value(tb) : err.text, "slept", rs);
    json_decref(a);
    json_decref(b);
    json_decref(req);
    json_decref(ctx);
    return r;
}

static int ctxish_init(weir_plugin *self, const weir_api *api, const json_t *config,
                       weir_error *err) {
    (void)err;
    g_api = api;
    bool ask = json_is_true(json_object_get(config, "ask"));
    return api->hook_register(self, "agent/compact", ask ? asker_compact : ctxish_compact,
                              NULL);
}

static const weir_plugin_desc ctxish_desc = {
    WEIR_PLUGIN_HEADER, .name = "ctxish", .version = "1.0.0", .init = ctxish_init,
};


/* "blocker" (kit 0.2): blocks every agent/pre-compact a plugin raises. */
static json_t *blocker_pre_compact(weir_call *call, const json_t *args, void *ud) {
    (void)call, (void)args, (void)ud;
    return json_pack("{s:s, s:s}", "kind", "block", "reason", "not now");
}

static int blocker_init(weir_plugin *self, const weir_api *api, const json_t *config,
                        weir_error *err) {
    (void)config, (void)err;
    return api->hook_register(self, "agent/pre-compact", blocker_pre_compact, NULL);
}

static const weir_plugin_desc blocker_desc = {
    WEIR_PLUGIN_HEADER, .name = "blocker", .version = "1.0.0", .init = blocker_init,
};

static void test_load_gives_the_plugin_a_full_table(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    weir_error err;
    assert_int_equal(load(tk, &marker_desc, "m1", NULL, &err), WEIR_OK);
    assert_int_equal(g_api->abi_major, WEIR_ABI_MAJOR);
    assert_int_equal(g_api->abi_minor, WEIR_ABI_MINOR);
    assert_int_equal(g_api->struct_size, sizeof(weir_api));
    assert_true(WEIR_API_HAS(g_api, status_name));
    assert_string_equal(g_api->strerror(WEIR_E_NOMEM), weir_strerror(WEIR_E_NOMEM));
    /* the members that read an agent are the kit's own: its agent has no log */
    assert_ptr_not_equal((void *)g_api->agent_event_ref, (void *)weir__api_table.agent_event_ref);
    assert_ptr_not_equal((void *)g_api->agent_event_peek,
                         (void *)weir__api_table.agent_event_peek);
    assert_null(g_api->agent_event_ref(NULL, 0));
    assert_null(g_api->agent_event_peek(NULL, 0));
    weir_tk_destroy(tk);
}

/* ABI 1.8: stream_session names the agent whose call a stream carries (the
 * session id, borrowed from the agent), and NULL for no stream. */
/* A store plugin loads under the test kit, which has no host to keep its
 * store in: the registration's checks run, and it succeeds. */
static void test_a_store_plugin_loads(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    assert_non_null(tk);
    weir_error err;
    assert_int_equal(weir_tk_load(tk, &storeish_desc, "pgish", NULL, &err), WEIR_OK);
    weir_tk_destroy(tk);
}

static void test_stream_session_is_the_agents_id(void **state) {
    (void)state;
    assert_true(WEIR_API_HAS(&weir__api_table, stream_session));
    assert_non_null(weir__api_table.stream_session);
    assert_null(weir__api_table.stream_session(NULL));
    struct weir_agent agent;
    memset(&agent, 0, sizeof agent);
    char id[] = "session-42";
    agent.e.id = id;
    agent.e.handle = &agent;
    struct weir_stream stream;
    memset(&stream, 0, sizeof stream);
    stream.engine = &agent.e;
    assert_ptr_equal(weir__api_table.stream_session(&stream), id);
    assert_string_equal(weir__api_table.stream_session(&stream), weir_agent_id(&agent));
}

static void test_waterfall_runs_the_chain_in_order_then_the_default(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &marker_desc, "a", NULL, &err), WEIR_OK);
    assert_int_equal(load(tk, &marker_desc, "b", "{\"order\":-10}", &err), WEIR_OK);
    assert_int_equal(load(tk, &marker_desc, "c", NULL, &err), WEIR_OK);
    json_t *args = parse(PRE_EXEC_ARGS);
    json_t *r = invoke(tk, "tools/pre-execute", args, "{\"kind\":\"allow\"}", &err);
    /* b is FIRST (outermost), then a, c in config order; the innermost marks first. */
    assert_json(r, "{\"kind\":\"allow\",\"seen\":[\"c\",\"a\",\"b\"]}");
    assert_int_equal(weir_tk_default_calls(tk), 1);
    json_decref(r);
    json_decref(args);
    weir_tk_destroy(tk);
}

static void test_empty_chain_returns_the_default(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    json_t *args = parse(PRE_EXEC_ARGS);
    json_t *r = invoke(tk, "tools/pre-execute", args, "{\"kind\":\"allow\"}", &err);
    assert_json(r, "{\"kind\":\"allow\"}");
    json_decref(r);
    /* A NULL default is json null, which agent/request-error accepts. */
    r = invoke(tk, "agent/request-error", args, NULL, &err);
    assert_true(json_is_null(r));
    assert_int_equal(weir_tk_default_calls(tk), 2);
    json_decref(r);
    json_decref(args);
    weir_tk_destroy(tk);
}

static void test_invalid_result_names_the_outermost_row(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &marker_desc, "liar", "{\"bad\":true}", &err), WEIR_OK);
    json_t *args = parse(PRE_EXEC_ARGS);
    assert_null(invoke(tk, "tools/pre-execute", args, NULL, &err));
    assert_int_equal(err.code, WEIR_E_HOOK_RESULT);
    assert_string_equal(err.plugin, "liar");
    assert_string_equal(err.hook, "tools/pre-execute");
    json_decref(args);
    weir_tk_destroy(tk);
}

static void test_listener_failure_names_the_row(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &marker_desc, "outer", NULL, &err), WEIR_OK);
    assert_int_equal(load(tk, &marker_desc, "inner", "{\"fail\":true}", &err), WEIR_OK);
    json_t *args = parse(PRE_EXEC_ARGS);
    assert_null(invoke(tk, "tools/pre-execute", args, "{\"kind\":\"allow\"}", &err));
    assert_int_equal(err.code, WEIR_E_HOOK_FAILED);
    assert_string_equal(err.plugin, "inner");
    assert_string_equal(err.text, "hook tools/pre-execute: plugin inner failed: row inner refuses");
    assert_int_equal(weir_tk_default_calls(tk), 0);
    json_decref(args);
    weir_tk_destroy(tk);
}

static void test_invoke_checks_its_arguments(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    json_t *args = parse("{}");
    assert_null(invoke(tk, "no/such-hook", args, "1", &err));
    assert_int_equal(err.code, WEIR_E_NOT_FOUND);
    assert_string_equal(err.text, "unknown hook \"no/such-hook\"");
    assert_null(invoke(tk, "tools/pre-execute", NULL, "1", &err));
    assert_int_equal(err.code, WEIR_E_INVAL);
    assert_null(invoke(NULL, "tools/pre-execute", args, NULL, &err));
    assert_int_equal(err.code, WEIR_E_INVAL);
    json_decref(args);
    weir_tk_destroy(tk);
}

static void test_loading_after_the_first_invoke_is_too_late(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    json_t *args = parse("{}");
    json_t *r = invoke(tk, "agent/status", args, NULL, &err);
    assert_true(json_is_null(r));
    assert_int_equal(load(tk, &marker_desc, "late", NULL, &err), WEIR_E_TOO_LATE);
    assert_string_equal(err.text,
                        "weir_tk_load: row 'late' loaded after the first weir_tk_invoke");
    json_decref(args);
    weir_tk_destroy(tk);
}

static void test_load_checks_ids_and_descriptors(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &marker_desc, "twice", NULL, &err), WEIR_OK);
    assert_int_equal(load(tk, &marker_desc, "twice", NULL, &err), WEIR_E_DUPLICATE);
    assert_string_equal(err.text, "plugin row id 'twice' is used twice");
    assert_int_equal(load(tk, &marker_desc, "bad id", NULL, &err), WEIR_E_INVAL);
    assert_int_equal(load(tk, NULL, "x", NULL, &err), WEIR_E_INVAL);
    weir_plugin_desc future = marker_desc;
    future.abi_minor = WEIR_ABI_MINOR + 1;
    assert_int_equal(load(tk, &future, "future", NULL, &err), WEIR_E_PLUGIN_ABI);
    char want[200];
    snprintf(want, sizeof want,
             "plugin row 'future' was built for ABI %d.%d; this host provides ABI %d.%d",
             WEIR_ABI_MAJOR, WEIR_ABI_MINOR + 1, WEIR_ABI_MAJOR, WEIR_ABI_MINOR);
    assert_string_equal(err.text, want);
    weir_tk_destroy(tk);
}

static void test_config_is_checked_against_the_schema(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &marker_desc, "m", "{\"order\":\"first\"}", &err),
                     WEIR_E_PLUGIN_CONFIG);
    assert_string_equal(err.text, "plugin 'marker' (row 'm'): invalid config: $.order: "
                                  "expected integer, got string");
    assert_string_equal(err.plugin, "m");
    weir_tk_destroy(tk);
}

static void test_failed_init_is_wrapped_and_unregistered(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &initfail_desc, "lic", NULL, &err), WEIR_E_PLUGIN_INIT);
    assert_string_equal(err.text, "plugin 'initfail' (row 'lic') init failed: no licence key");
    /* Its listener is gone: the default answers. */
    json_t *args = parse(PRE_EXEC_ARGS);
    json_t *r = invoke(tk, "tools/pre-execute", args, "{\"kind\":\"allow\"}", &err);
    assert_json(r, "{\"kind\":\"allow\"}");
    json_decref(r);
    json_decref(args);
    weir_tk_destroy(tk);
}

static void test_ignored_registration_failure_fails_the_load(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &badhook_desc, "bh", NULL, &err), WEIR_E_NOT_FOUND);
    assert_string_equal(err.text,
                        "plugin 'badhook' (row 'bh'): plugin bh: unknown hook "
                        "\"tools/no-such-hook\" (see `weir hooks --catalog`)");
    weir_tk_destroy(tk);
}

static void test_fake_agent_records_events_sends_and_logs(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &agentish_desc, "ag", NULL, &err), WEIR_OK);
    json_t *msgs = parse("[{\"role\":\"user\",\"content\":[]},{\"role\":\"user\",\"content\":[]}]");
    assert_int_equal(weir_tk_set_messages(tk, msgs), WEIR_OK);
    assert_int_equal(weir_tk_set_messages(tk, json_object_get(msgs, "x")), WEIR_E_INVAL);
    json_decref(msgs);
    json_t *args = parse("{\"agent\":\"testkit\",\"turn\":1,\"step\":1,\"messages\":[]}");
    json_t *r = invoke(tk, "agent/pre-step", args, "{\"kind\":\"enter\",\"messages\":[]}", &err);
    assert_json(r, "{\"kind\":\"enter\",\"messages\":[]}");
    assert_json(weir_tk_events(tk), "[{\"data\":{\"agent\":\"testkit\",\"cancelled\":false,"
                                    "\"n\":2},\"type\":\"agentish/seen\"}]");
    assert_json(weir_tk_sent(tk), "[{\"input_id\":\"in-1\",\"message\":{\"content\":[{\"text\":"
                                  "\"again\",\"type\":\"text\"}],\"role\":\"user\"},\"mode\":"
                                  "\"steer\"}]");
    assert_json(weir_tk_logs(tk),
                "[{\"level\":\"warning\",\"plugin\":\"ag\",\"text\":\"hello 42\"}]");
    json_decref(r);
    weir_tk_clear(tk);
    assert_int_equal(json_array_size(weir_tk_events(tk)), 0);
    assert_int_equal(json_array_size(weir_tk_sent(tk)), 0);
    assert_int_equal(json_array_size(weir_tk_logs(tk)), 0);
    assert_int_equal(weir_tk_default_calls(tk), 0);
    /* The kit's signal is the one listeners see. */
    weir_tk_cancel(tk, NULL);
    r = invoke(tk, "agent/pre-step", args, "{\"kind\":\"reject\"}", &err);
    assert_json(r, "{\"kind\":\"reject\"}");
    assert_json(json_object_get(json_array_get(weir_tk_events(tk), 0), "data"),
                "{\"agent\":\"testkit\",\"cancelled\":true,\"n\":2}");
    json_decref(r);
    json_decref(args);
    weir_tk_destroy(tk);
}

static void test_registering_after_init_is_refused_and_logged(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(load(tk, &agentish_desc, "ag", NULL, &err), WEIR_OK);
    weir_tk_clear(tk);
    assert_int_equal(g_api->hook_register(g_agentish_self, "agent/pre-step", bad_pre_execute,
                                          NULL),
                     WEIR_E_TOO_LATE);
    assert_int_equal(g_api->event_type_register(g_agentish_self, "agentish/late", 0),
                     WEIR_E_TOO_LATE);
    assert_json(json_object_get(json_array_get(weir_tk_logs(tk), 0), "text"),
                "\"plugin 'ag': hook_register called after init\"");
    assert_int_equal(json_array_size(weir_tk_logs(tk)), 2);
    weir_tk_destroy(tk);
}

static void test_destroy_runs_fini_in_reverse_load_order(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    g_fini_order[0] = '\0';
    assert_int_equal(load(tk, &finilog_desc, "x", NULL, &err), WEIR_OK);
    assert_int_equal(load(tk, &finilog_desc, "y", NULL, &err), WEIR_OK);
    assert_int_equal(load(tk, &finilog_desc, "z", NULL, &err), WEIR_OK);
    weir_tk_destroy(tk);
    assert_string_equal(g_fini_order, "zyx");
    weir_tk_destroy(NULL);
}

static void test_load_file_uses_the_real_loader(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    char path[1024];
    snprintf(path, sizeof path, "%s/weir-fx-alpha.so", wt_env("WEIR_TEST_FIXTURE_DIR"));
    assert_int_equal(weir_tk_load_file(tk, path, "alpha", NULL, &err), WEIR_OK);
    snprintf(path, sizeof path, "%s/weir-fx-abi-major.so", wt_env("WEIR_TEST_FIXTURE_DIR"));
    assert_int_equal(weir_tk_load_file(tk, path, "major", NULL, &err), WEIR_E_PLUGIN_ABI);
    assert_int_equal(weir_tk_load_file(tk, "/nonexistent/weir-x.so", "x", NULL, &err),
                     WEIR_E_PLUGIN_OPEN);
    assert_string_equal(err.text, "plugin file not found: /nonexistent/weir-x.so");
    json_t *args = parse("{\"agent\":\"testkit\",\"turn\":1,\"step\":1,\"messages\":[]}");
    json_t *r = invoke(tk, "agent/pre-step", args, "{\"kind\":\"reject\"}", &err);
    assert_json(r, "{\"kind\":\"reject\"}");
    assert_int_equal(weir_tk_default_calls(tk), 1);
    json_decref(r);
    json_decref(args);
    weir_tk_destroy(tk);
}

/* One full cycle; returns WEIR_OK or the first failure. */
static int alloc_cycle(void) {
    weir_tk *tk = weir_tk_create();
    if (!tk)
        return WEIR_E_NOMEM;
    weir_error err;
    json_t *args = json_loads(PRE_EXEC_ARGS, 0, NULL);
    json_t *dflt = json_pack("{s:s}", "kind", "allow");
    int rc = args && dflt ? WEIR_OK : WEIR_E_NOMEM;
    if (rc == WEIR_OK)
        rc = weir_tk_load(tk, &marker_desc, "a", NULL, &err);
    if (rc == WEIR_OK)
        rc = weir_tk_load(tk, &agentish_desc, "b", NULL, &err);
    if (rc == WEIR_OK) {
        json_t *r = weir_tk_invoke(tk, "tools/pre-execute", args, dflt, &err);
        rc = r ? WEIR_OK : err.code;
        json_decref(r);
    }
    json_decref(dflt);
    json_decref(args);
    weir_tk_destroy(tk);
    return rc;
}

/* Kit 0.2's log: seed, route, a hook that reads and replaces, the log read
 * back; returns WEIR_OK or the first failure. */
#define LOG_SEED                                                                              \
    "[{\"type\":\"user/message\",\"data\":{\"turn\":1,\"step\":1,\"message\":{\"role\":"   \
    "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"go\"}],\"id\":\"in-1\","           \
    "\"source\":{\"kind\":\"human\"}}}},{\"type\":\"assistant/message\",\"data\":{\"turn\":"   \
    "1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_call\"," \
    "\"id\":\"c1\",\"name\":\"cat\",\"arguments\":\"{}\"}]},\"stream\":[]}},{\"type\":"     \
    "\"tool/call\",\"data\":{\"turn\":1,\"step\":1,\"call_id\":\"c1\",\"name\":\"cat\","   \
    "\"arguments\":\"{}\"}},{\"type\":\"tool/result\",\"data\":{\"turn\":1,\"step\":1,"     \
    "\"message\":{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"call_id\":"   \
    "\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"abc\"}]}]}}}]"

static int alloc_cycle_log(void) {
    weir_tk *tk = weir_tk_create();
    if (!tk)
        return WEIR_E_NOMEM;
    weir_error err;
    weir_error_clear(&err);
    json_t *seed = json_loads(LOG_SEED, 0, NULL);
    json_t *route = json_pack("{s:s, s:s, s:i}", "provider", "p", "model", "m",
                              "context_window", 100);
    json_t *args = json_pack("{s:s, s:i}", "agent", "testkit", "turn", 1);
    int rc = seed && route && args ? WEIR_OK : WEIR_E_NOMEM;
    if (rc == WEIR_OK)
        rc = weir_tk_load(tk, &ctxish_desc, "ctx", NULL, &err);
    if (rc == WEIR_OK)
        rc = weir_tk_seed(tk, seed, &err);
    if (rc == WEIR_OK)
        rc = weir_tk_set_route(tk, route, &err);
    if (rc == WEIR_OK) {
        json_t *r = weir_tk_invoke(tk, "agent/compact", args, NULL, &err);
        rc = !r ? (int)err.code
             : strcmp(json_string_value(json_object_get(r, "message")), "replaced") == 0
                 ? WEIR_OK
                 : WEIR_E_NOMEM; /* the hook's own calls ran out */
        json_decref(r);
    }
    json_t *log = rc == WEIR_OK ? weir_tk_log(tk) : NULL;
    if (rc == WEIR_OK && json_array_size(log) != 6)
        rc = log ? WEIR_E_STATE : WEIR_E_NOMEM;
    json_decref(log);
    json_decref(args);
    json_decref(route);
    json_decref(seed);
    weir_tk_destroy(tk);
    return rc;
}

/* Run `cycle` with its n-th allocation failing, n = 1, 2, ... until it
 * makes fewer than n: then nothing failed and it must succeed. */
static void fail_each_allocation(int (*cycle)(void)) {
    bool completed = false;
    for (long n = 1; n < 100000 && !completed; n++) {
        weir__alloc_fail_after(n);
        int rc = cycle();
        long used = weir__alloc_fail_after(-1);
        if (used < n) {
            assert_int_equal(rc, WEIR_OK); /* nothing failed: must succeed */
            completed = true;
        }
    }
    assert_true(completed);
}

static void test_allocation_failures_in_the_log_are_clean(void **state) {
    (void)state;
    fail_each_allocation(alloc_cycle_log);
}

static void test_allocation_failures_are_clean(void **state) {
    (void)state;
    fail_each_allocation(alloc_cycle);
}

/* --- a scripted turn (weir_tk_run_turn) ----------------------------------- */

static const json_t *event_of(const json_t *log, const char *type, int n) {
    size_t i;
    const json_t *ev;
    json_array_foreach(log, i, ev) {
        if (strcmp(json_string_value(json_object_get(ev, "type")), type) == 0 && n-- == 0)
            return ev;
    }
    return NULL;
}

/* Run one turn with the shipped plugin `plugin` (a name) as row `id`. */
static json_t *turn(const char *plugin, const char *id, const char *config, const char *script,
                    const char *deployment, const char *prompt, int expect_rc, weir_error *err) {
    json_t *cfg = config ? parse(config) : NULL;
    json_t *scr = script ? parse(script) : NULL;
    json_t *dep = deployment ? parse(deployment) : NULL;
    weir_tk_turn t = WEIR_TK_TURN_INIT;
    t.plugin = plugin;
    t.id = id;
    t.config = cfg;
    t.script = scr;
    t.deployment = dep;
    t.prompt = prompt;
    t.plugin_path = wt_env("WEIR_TEST_PLUGIN_DIR");
    json_t *result = NULL;
    weir_error_clear(err);
    int rc = weir_tk_run_turn(&t, &result, err);
    if (rc != expect_rc)
        fail_msg("weir_tk_run_turn: %d (%s), expected %d", rc, err->text, expect_rc);
    json_decref(cfg);
    json_decref(scr);
    json_decref(dep);
    return result;
}

/* The system prompt a plugin renders, the request the provider got, the log. */
static void test_run_turn_gives_the_log_the_system_prompt_and_the_requests(void **state) {
    (void)state;
    weir_error err;
    json_t *r = turn("system-prompt", "prompt", "{\"text\":\"You are terse.\"}",
                     "{\"replies\":[{\"text\":\"Fine.\",\"expect\":{\"message_contains\":\"hello\"}}]}",
                     NULL, "hello there", WEIR_OK, &err);
    assert_non_null(r);
    assert_json(json_object_get(r, "end"),
                "{\"kind\":\"completed\",\"text\":\"Fine.\",\"turn\":1}");
    assert_string_equal(json_string_value(json_object_get(r, "system")), "You are terse.");
    assert_string_equal(json_string_value(json_object_get(r, "session_id")), "testkit");
    const json_t *requests = json_object_get(r, "requests");
    assert_int_equal(json_array_size(requests), 1);
    const json_t *req = json_array_get(requests, 0);
    assert_string_equal(json_string_value(json_object_get(req, "provider")), "scripted");
    assert_string_equal(json_string_value(json_object_get(req, "model")), "scripted");
    assert_json(json_object_get(req, "messages"),
                "[{\"content\":[{\"text\":\"You are terse.\",\"type\":\"text\"}],\"role\":"
                "\"system\"},{\"content\":[{\"text\":\"hello there\",\"type\":\"text\"}],"
                "\"role\":\"user\",\"source\":{\"kind\":\"human\"}}]");
    const json_t *log = json_object_get(r, "log");
    /* the prompt is queued (the inbox splice), then the turn runs */
    assert_string_equal(json_string_value(json_object_get(json_array_get(log, 0), "type")),
                        "agent/inbox/spliced");
    assert_non_null(event_of(log, "turn/start", 0));
    assert_non_null(event_of(log, "system/message", 0));
    assert_non_null(event_of(log, "assistant/message", 0));
    const json_t *last = json_array_get(log, json_array_size(log) - 1);
    assert_string_equal(json_string_value(json_object_get(last, "type")), "turn/end");
    for (size_t i = 0; i < json_array_size(log); i++) /* seq order */
        assert_int_equal(json_integer_value(json_object_get(json_array_get(log, i), "seq")), i);
    /* the live events: the prompt queued, ..., the status going idle last */
    const json_t *events = json_object_get(r, "events");
    assert_string_equal(json_string_value(json_object_get(json_array_get(events, 0), "type")),
                        "agent/inbox/inserted");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(events, json_array_size(events) - 1),
                                            "data"),
                            "status")),
                        "idle");
    json_decref(r);
}

/* A plugin's hooks in a turn with a tool: example-guard denies the call,
 * tags the entering message and logs its own event; the second request
 * carries the denial. */
static void test_run_turn_with_a_tool_and_a_policy(void **state) {
    (void)state;
    weir_error err;
    json_t *r = turn(
        "example-guard", "guard",
        "{\"deny\":[\"pow\"],\"reason\":\"no maths\",\"tag\":\"checked\"}",
        "{\"replies\":[{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"pow\",\"arguments\":"
        "{\"x\":2,\"y\":3}}]},{\"text\":\"Denied, then.\",\"expect\":{\"last_role\":\"tool\"}}]}",
        "{\"plugins\":[{\"id\":\"math\",\"plugin\":\"tools-ffi\",\"config\":{\"tools\":[{"
        "\"library\":\"libm.so.6\",\"symbol\":\"pow\",\"prototype\":\"double pow(double x, "
        "double y)\",\"description\":\"x to the y\"}]}}]}",
        "2^3?", WEIR_OK, &err);
    assert_non_null(r);
    const json_t *end = json_object_get(r, "end");
    assert_string_equal(json_string_value(json_object_get(end, "kind")), "completed");
    assert_string_equal(json_string_value(json_object_get(end, "text")), "Denied, then.");
    const json_t *log = json_object_get(r, "log");
    assert_non_null(event_of(log, "example-guard/denied", 0));
    const json_t *user = json_object_get(json_object_get(event_of(log, "user/message", 0), "data"),
                                         "message");
    assert_json(json_object_get(json_object_get(user, "source"), "tags"), "[\"checked\"]");
    const json_t *requests = json_object_get(r, "requests");
    assert_int_equal(json_array_size(requests), 2);
    assert_int_equal(json_array_size(json_object_get(json_array_get(requests, 0), "tools")), 1);
    const json_t *msgs = json_object_get(json_array_get(requests, 1), "messages");
    char *text = json_dumps(json_array_get(msgs, json_array_size(msgs) - 1), JSON_COMPACT);
    assert_non_null(strstr(text, "no maths"));
    free(text);
    assert_json(json_object_get(r, "system"), "null"); /* no system prompt row */
    json_decref(r);
}

/* A failed turn is a result, not an error of the call. */
static void test_run_turn_reports_a_failed_turn(void **state) {
    (void)state;
    weir_error err;
    json_t *r = turn(NULL, NULL, NULL,
                     "{\"replies\":[{\"fail\":{\"code\":\"OVERLOADED\",\"message\":\"busy\"}}]}",
                     NULL, "hi", WEIR_OK, &err);
    assert_json(json_object_get(r, "end"),
                "{\"failure\":{\"code\":\"OVERLOADED\",\"message\":\"busy\"},\"kind\":\"error\","
                "\"text\":\"\",\"turn\":1}");
    assert_int_equal(json_array_size(json_object_get(r, "requests")), 1);
    json_decref(r);
    /* an exhausted script, and the agent options a deployment overrides */
    r = turn(NULL, NULL, NULL, "{\"replies\":[]}", "{\"agent\":{\"max_tokens\":77}}", "hi",
             WEIR_OK, &err);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_object_get(r, "end"), "failure"),
                                          "message")),
        "script exhausted (0 replies)");
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(r, "requests"), 0), "max_tokens")),
                     77);
    json_decref(r);
}

static void test_run_turn_checks_its_arguments_and_reports_load_errors(void **state) {
    (void)state;
    weir_error err;
    json_t *r = turn("system-prompt", NULL, NULL, NULL, NULL, "hi", WEIR_E_INVAL, &err);
    assert_null(r);
    assert_non_null(strstr(err.text, "a script {\"replies\":[...]}"));
    assert_null(turn(NULL, NULL, NULL, "{\"replies\":{}}", NULL, "hi", WEIR_E_INVAL, &err));
    assert_null(turn(NULL, NULL, NULL, "{\"replies\":[]}", NULL, NULL, WEIR_E_INVAL, &err));
    assert_null(turn(NULL, NULL, NULL, "{\"replies\":[]}", "[1]", "hi", WEIR_E_INVAL, &err));
    weir_tk_turn t = WEIR_TK_TURN_INIT;
    t.struct_size = 4;
    json_t *out = json_null();
    assert_int_equal(weir_tk_run_turn(&t, &out, &err), WEIR_E_INVAL);
    assert_null(out);
    assert_int_equal(weir_tk_run_turn(NULL, &out, NULL), WEIR_E_INVAL);
    /* the plugin under test fails to load: the host's message */
    assert_null(turn("no-such-plugin", "x", NULL, "{\"replies\":[]}", NULL, "hi",
                     WEIR_E_PLUGIN_OPEN, &err));
    assert_non_null(strstr(err.text, "plugin 'no-such-plugin' not found"));
    assert_null(turn("system-prompt", "p", "{\"order\":\"first\"}", "{\"replies\":[]}", NULL,
                     "hi", WEIR_E_PLUGIN_CONFIG, &err));
    assert_non_null(strstr(err.text, "$.order: expected integer"));
}


/* --- kit 0.2: the fake agent's real log ---------------------------------- */

/* A turn's worth of events: a user message, an assistant message calling
 * `n` tools, each call and its result of `size` characters. */
static json_t *tool_events(int n, size_t size) {
    char *big = malloc(size + 1);
    assert_non_null(big);
    for (size_t i = 0; i < size; i++)
        big[i] = (char)('a' + (int)(i % 26));
    big[size] = '\0';
    json_t *calls = json_array();
    for (int i = 0; i < n; i++) {
        char id[16];
        snprintf(id, sizeof id, "c%d", i + 1);
        json_array_append_new(calls, json_pack("{s:s, s:s, s:s, s:s}", "type", "tool_call",
                                               "id", id, "name", "cat", "arguments", "{}"));
    }
    json_t *events = json_pack(
        "[{s:s, s:{s:i, s:i, s:{s:s, s:[{s:s, s:s}], s:s, s:{s:s}}}},"
        " {s:s, s:{s:i, s:i, s:{s:s, s:o}, s:[]}}]",
        "type", "user/message", "data", "turn", 1, "step", 1, "message", "role", "user",
        "content", "type", "text", "text", "read the files", "id", "in-1", "source", "kind",
        "human", "type", "assistant/message", "data", "turn", 1, "step", 1, "message", "role",
        "assistant", "content", calls, "stream");
    for (int i = 0; i < n; i++) {
        char id[16];
        snprintf(id, sizeof id, "c%d", i + 1);
        json_array_append_new(events, json_pack("{s:s, s:{s:i, s:i, s:s, s:s, s:s}}", "type",
                                                "tool/call", "data", "turn", 1, "step", 1,
                                                "call_id", id, "name", "cat", "arguments",
                                                "{}"));
        json_array_append_new(
            events,
            json_pack("{s:s, s:{s:i, s:i, s:{s:s, s:[{s:s, s:s, s:[{s:s, s:s}]}]}}}", "type",
                      "tool/result", "data", "turn", 1, "step", 1, "message", "role", "tool",
                      "content", "type", "tool_result", "call_id", id, "content", "type",
                      "text", "text", big));
    }
    free(big);
    assert_non_null(events);
    return events;
}

/* Inside a hook the agent's surface, messages, model info, last event and
 * surface replace are the kit's real log's; the test reads the log back. */
static void test_fake_agent_has_a_real_log_surface_and_route(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(weir_tk_load(tk, &ctxish_desc, "ctx", NULL, &err), WEIR_OK);
    json_t *events = tool_events(2, 40);
    if (weir_tk_seed(tk, events, &err) != WEIR_OK)
        fail_msg("seed: %s", err.text);
    json_decref(events);
    json_t *route = parse("{\"provider\":\"p\",\"model\":\"m\",\"context_window\":8000,"
                          "\"max_output\":1000}");
    assert_int_equal(weir_tk_set_route(tk, route, &err), WEIR_OK);
    json_decref(route);
    json_t *args = parse("{\"agent\":\"testkit\",\"turn\":1}");
    json_t *r = invoke(tk, "agent/compact", args, "{\"kind\":\"declined\"}", &err);
    if (!r)
        fail_msg("agent/compact: %s", err.text);
    /* user, assistant, two results: 4 nodes, 4 messages; the route as logged */
    assert_json(r, "{\"generation\":1,\"kind\":\"compacted\",\"message\":\"replaced\","
                   "\"messages\":4,\"nodes\":4,\"route\":{\"context_window\":8000,\"model\":"
                   "\"m\",\"provider\":\"p\"},\"seq\":7,\"window\":8000}");
    json_decref(r);
    json_t *log = weir_tk_log(tk);
    assert_int_equal(json_array_size(log), 8); /* 6 seeded, request/context, the replace */
    const json_t *last = json_array_get(log, 7);
    assert_string_equal(json_string_value(json_object_get(last, "type")), "tool/result");
    assert_json(json_object_get(last, "surface_op"),
                "{\"end_seq\":3,\"op\":\"replace\",\"start_seq\":3}");
    assert_json(json_object_get(last, "source_seqs"), "[3]");
    json_decref(log);
    /* a second replace of the same node: the log refuses it (no longer current) */
    r = invoke(tk, "agent/compact", args, NULL, &err);
    assert_string_equal(json_string_value(json_object_get(r, "message")), "replaced");
    assert_int_equal(json_integer_value(json_object_get(r, "seq")), 8); /* seq 5 now */
    json_decref(r);
    /* seeding checks each event and names it */
    json_t *bad = parse("[{\"type\":\"user/message\",\"data\":{}}]");
    assert_int_equal(weir_tk_seed(tk, bad, &err), WEIR_E_LOG_REJECTED);
    assert_non_null(strstr(err.text, "weir_tk_seed: events[0] (user/message): "));
    json_decref(bad);
    bad = parse("[{\"type\":\"user/message\"}]");
    assert_int_equal(weir_tk_seed(tk, bad, &err), WEIR_E_INVAL);
    json_decref(bad);
    bad = parse("{\"model\":\"m\"}");
    assert_int_equal(weir_tk_set_route(tk, bad, &err), WEIR_E_INVAL);
    json_decref(bad);
    json_decref(args);
    weir_tk_destroy(tk);
}

/* A log file seeds the fake agent: the reader checks it as it opens it. */
static void test_seed_log_copies_a_log_file(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(weir_tk_load(tk, &ctxish_desc, "ctx", NULL, &err), WEIR_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s/logs/good.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    if (weir_tk_seed_log(tk, path, &err) != WEIR_OK)
        fail_msg("seed_log: %s", err.text);
    json_t *log = weir_tk_log(tk);
    assert_int_equal(json_array_size(log), 17);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(log, 16), "seq")), 16);
    json_decref(log);
    json_t *args = parse("{\"agent\":\"testkit\",\"turn\":1}");
    json_t *r = invoke(tk, "agent/compact", args, NULL, &err);
    /* system, user, assistant, result, assistant; the result at seq 11 replaced;
     * no route was set: no model info, the file's request/context */
    assert_json(r, "{\"generation\":1,\"kind\":\"compacted\",\"message\":\"replaced\","
                   "\"messages\":5,\"nodes\":5,\"route\":{\"model\":\"m1\",\"provider\":"
                   "\"mock\"},\"seq\":17,\"window\":null}");
    json_decref(r);
    json_decref(args);
    /* only into an empty log */
    assert_int_equal(weir_tk_seed_log(tk, path, &err), WEIR_E_STATE);
    weir_tk_destroy(tk);
    tk = weir_tk_create();
    assert_int_equal(weir_tk_seed_log(tk, "/nonexistent/x.jsonl", &err), WEIR_E_NOT_FOUND);
    snprintf(path, sizeof path, "%s/logs/dup_call_ids.jsonl", wt_env("WEIR_TEST_DATA_DIR"));
    assert_int_equal(weir_tk_seed_log(tk, path, &err), WEIR_E_LOG_CORRUPT);
    weir_tk_destroy(tk);
}

/* Direct calls answer from the kit's script by purpose; a sleep on the
 * call's signal runs on the fake clock: recorded, no real wait. */
static void test_script_by_purpose_and_the_fake_clock(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(weir_tk_load(tk, &ctxish_desc, "ask", parse_borrow("{\"ask\":true}"),
                                  &err),
                     WEIR_OK);
    /* the summary's reply first in the script, the maintenance one after */
    json_t *script = parse("{\"replies\":[{\"purpose\":\"compaction\",\"text\":\"SUMMARY\"},"
                           "{\"text\":\"any\"}]}");
    assert_int_equal(weir_tk_set_script(tk, script, &err), WEIR_OK);
    json_decref(script);
    assert_int_equal(weir_tk_clock_set(tk, 1000), WEIR_OK);
    weir_tk *other = weir_tk_create();
    assert_int_equal(weir_tk_clock_set(other, 5), WEIR_E_BUSY); /* one owner at a time */
    assert_int_equal(weir_tk_clock_advance(other, 5), WEIR_E_STATE);
    weir_tk_destroy(other);
    json_t *args = parse("{\"agent\":\"testkit\",\"turn\":1,\"instructions\":\"maintenance\"}");
    json_t *r = invoke(tk, "agent/compact", args, NULL, &err);
    /* a maintenance call takes the reply without a purpose, the summary stays */
    assert_json(r, "{\"kind\":\"compacted\",\"message\":\"any\",\"second\":\"UNKNOWN: script "
                   "exhausted (2 replies, none left for purpose 'maintenance')\",\"slept\":0}");
    json_decref(r);
    json_decref(args);
    args = parse("{\"agent\":\"testkit\",\"turn\":1,\"instructions\":\"compaction\"}");
    r = invoke(tk, "agent/compact", args, NULL, &err);
    assert_string_equal(json_string_value(json_object_get(r, "message")), "SUMMARY");
    json_decref(r);
    json_decref(args);
    assert_json(weir_tk_sleeps(tk), "[{\"fake\":true,\"ms\":25000},{\"fake\":true,\"ms\":25000}]");
    assert_int_equal(weir_tk_clock_ms(tk), 1000 + 2 * 25000);
    assert_int_equal(weir_tk_clock_advance(tk, 7), WEIR_OK);
    assert_int_equal(weir_tk_clock_ms(tk), 51007);
    const json_t *reqs = weir_tk_requests(tk);
    assert_int_equal(json_array_size(reqs), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, 0), "purpose")),
                        "maintenance");
    assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, 2), "purpose")),
                        "compaction");
    /* the fake clock goes with its kit */
    weir_tk_destroy(tk);
    other = weir_tk_create();
    assert_int_equal(weir_tk_clock_set(other, 0), WEIR_OK);
    weir_tk_clock_real(other);
    assert_int_equal(weir_tk_clock_advance(other, 1), WEIR_E_STATE);
    weir_tk_destroy(other);
}

static char g_plugin_path[1024];
static const char *plugin_file(const char *name) {
    snprintf(g_plugin_path, sizeof g_plugin_path, "%s/weir-%s.so", wt_env("WEIR_TEST_PLUGIN_DIR"),
             name);
    return g_plugin_path;
}

/* compaction-basic's agent/compact, one hook on a seeded surface of tool
 * results: the prune lands in the kit's log as tool/result replaces. */
static void test_compaction_basic_prunes_a_seeded_surface(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    json_t *cfg = parse("{\"strategies\":[\"prune\"],\"prune\":{\"max_result_chars\":500,"
                        "\"head_chars\":50,\"tail_chars\":50}}");
    if (weir_tk_load_file(tk, plugin_file("compaction-basic"), "compaction", cfg, &err) !=
        WEIR_OK)
        fail_msg("load: %s", err.text);
    json_decref(cfg);
    json_t *events = tool_events(3, 6000);
    assert_int_equal(weir_tk_seed(tk, events, &err), WEIR_OK);
    json_decref(events);
    json_t *route = parse("{\"provider\":\"p\",\"model\":\"m\",\"context_window\":20000}");
    assert_int_equal(weir_tk_set_route(tk, route, &err), WEIR_OK);
    json_decref(route);
    json_t *args = parse("{\"agent\":\"testkit\",\"turn\":1}");
    json_t *r = invoke(tk, "agent/compact", args, "{\"kind\":\"declined\"}", &err);
    if (!r)
        fail_msg("agent/compact: %s", err.text);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "compacted");
    json_int_t pruned = json_integer_value(json_object_get(r, "pruned"));
    assert_true(pruned > 0);
    json_decref(r);
    json_t *log = weir_tk_log(tk);
    size_t i, replaces = 0;
    const json_t *ev;
    json_array_foreach(log, i, ev) {
        const json_t *op = json_object_get(ev, "surface_op");
        if (!strcmp(json_string_value(json_object_get(ev, "type")), "tool/result") &&
            json_is_object(op)) {
            replaces++;
            char *text = json_dumps(json_object_get(ev, "data"), JSON_COMPACT);
            assert_true(strlen(text) < 2000); /* a head, a marker and a tail of 6000 */
            free(text);
        }
    }
    assert_int_equal(replaces, (size_t)pruned);
    assert_non_null(event_of(log, "compaction/start", 0));
    assert_non_null(event_of(log, "compaction/end", 0));
    json_decref(log);
    weir_tk_destroy(tk);
    /* the agent/pre-compact it raises (weir_hook_invoke) runs the kit's chain:
     * a listener there blocks it, and nothing is replaced */
    tk = weir_tk_create();
    cfg = parse("{\"strategies\":[\"prune\"],\"prune\":{\"max_result_chars\":500,"
                "\"head_chars\":50,\"tail_chars\":50}}");
    if (weir_tk_load_file(tk, plugin_file("compaction-basic"), "compaction", cfg, &err) !=
        WEIR_OK)
        fail_msg("load: %s", err.text);
    json_decref(cfg);
    assert_int_equal(weir_tk_load(tk, &blocker_desc, "blocker", NULL, &err), WEIR_OK);
    events = tool_events(3, 6000);
    assert_int_equal(weir_tk_seed(tk, events, &err), WEIR_OK);
    json_decref(events);
    route = parse("{\"provider\":\"p\",\"model\":\"m\",\"context_window\":20000}");
    assert_int_equal(weir_tk_set_route(tk, route, &err), WEIR_OK);
    json_decref(route);
    r = invoke(tk, "agent/compact", args, "{\"kind\":\"declined\"}", &err);
    assert_json(r, "{\"kind\":\"declined\",\"message\":\"blocked by agent/pre-compact\"}");
    json_decref(r);
    log = weir_tk_log(tk);
    assert_int_equal(json_array_size(log), 9); /* the seed and the route only */
    json_decref(log);
    json_decref(args);
    weir_tk_destroy(tk);
}

/* retry's agent/request-error, one hook: a RATE_LIMIT failure with a 25 s
 * Retry-After waits 25 s on the fake clock (no real sleep) and retries. */
static void test_retry_waits_a_retry_after_on_the_fake_clock(void **state) {
    (void)state;
    weir_tk *tk = weir_tk_create();
    weir_error err;
    json_t *cfg = parse("{\"max_delay_ms\":60000,\"max_elapsed_ms\":600000,"
                        "\"jitter_ratio\":0}");
    if (weir_tk_load_file(tk, plugin_file("retry"), "retry", cfg, &err) != WEIR_OK)
        fail_msg("load: %s", err.text);
    json_decref(cfg);
    assert_int_equal(weir_tk_clock_set(tk, 100000), WEIR_OK);
    json_t *args = parse("{\"agent\":\"testkit\",\"turn\":1,\"step\":1,\"provider\":\"p\","
                         "\"failure\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\","
                         "\"provider\":\"p\",\"retry_after_ms\":25000},\"prior_failures\":[]}");
    json_t *r = invoke(tk, "agent/request-error", args, NULL, &err);
    if (!r)
        fail_msg("agent/request-error: %s", err.text);
    assert_json(r, "{\"kind\":\"retry\"}");
    json_decref(r);
    assert_int_equal(weir_tk_clock_ms(tk), 125000);
    assert_json(weir_tk_sleeps(tk), "[{\"fake\":true,\"ms\":25000}]"); /* none real */
    json_t *log = weir_tk_log(tk);
    const json_t *retry = event_of(log, "retry/wait", 0);
    assert_non_null(retry);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(retry, "data"),
                                                        "delay_ms")),
                     25000);
    assert_non_null(event_of(log, "retry/started", 0));
    json_decref(log);
    json_decref(args);
    weir_tk_destroy(tk);
}


/* Several turns on one agent, and a summary reply matched by purpose:
 * compaction-basic's pressure compaction before turn 3 takes the reply
 * scripted for purpose "compaction" (first in the script), each step the
 * next of the others. */
static void test_run_turn_runs_several_prompts_with_a_summary_by_purpose(void **state) {
    (void)state;
    char longtext[2400];
    for (size_t i = 0; i < sizeof longtext - 1; i++)
        longtext[i] = (char)('a' + (int)(i % 26));
    longtext[sizeof longtext - 1] = '\0';
    json_t *script = json_pack(
        "{s:[{s:s, s:s}, {s:s}, {s:s}, {s:s}], s:{s:{s:i, s:i}}}", "replies", "purpose",
        "compaction", "text", "SUMMARY OF EARLIER TURNS", "text", longtext, "text", longtext,
        "text", "third answer", "models", "scripted", "context_window", 2000, "max_output", 200);
    json_t *config = parse("{\"strategies\":[\"summary\"],\"threshold_ratio\":0.5,"
                           "\"keep_recent_tokens\":10}");
    json_t *prompts = parse("[\"one\",\"two\",\"three\"]");
    json_t *dep = parse("{\"agent\":{\"max_tokens\":100}}");
    weir_tk_turn t = WEIR_TK_TURN_INIT;
    t.plugin = "compaction-basic";
    t.id = "compaction";
    t.config = config;
    t.script = script;
    t.prompts = prompts;
    t.deployment = dep;
    t.plugin_path = wt_env("WEIR_TEST_PLUGIN_DIR");
    json_t *r = NULL;
    weir_error err;
    if (weir_tk_run_turn(&t, &r, &err) != WEIR_OK)
        fail_msg("run_turn: %s", err.text);
    const json_t *ends = json_object_get(r, "ends");
    assert_int_equal(json_array_size(ends), 3);
    for (size_t i = 0; i < 3; i++) {
        const json_t *end = json_array_get(ends, i);
        assert_int_equal(json_integer_value(json_object_get(end, "turn")), (json_int_t)i + 1);
        assert_string_equal(json_string_value(json_object_get(end, "kind")), "completed");
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(ends, 0), "text")),
                        longtext);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ends, 2), "text")),
                        "third answer");
    assert_true(json_equal(json_object_get(r, "end"), json_array_get(ends, 2)));
    /* the summary landed as a replace, and carries the compaction's reply */
    const json_t *log = json_object_get(r, "log");
    const json_t *summary = NULL;
    size_t i;
    const json_t *ev;
    json_array_foreach(log, i, ev) {
        if (!strcmp(json_string_value(json_object_get(ev, "type")), "user/message") &&
            json_is_object(json_object_get(ev, "surface_op")))
            summary = ev;
    }
    assert_non_null(summary);
    char *text = json_dumps(json_object_get(summary, "data"), JSON_COMPACT);
    assert_non_null(strstr(text, "SUMMARY OF EARLIER TURNS"));
    free(text);
    json_decref(r);
    json_decref(dep);
    json_decref(prompts);
    json_decref(config);
    json_decref(script);
    /* prompts must be a non-empty array of strings */
    prompts = parse("[\"one\", 2]");
    script = parse("{\"replies\":[]}");
    weir_tk_turn bad = WEIR_TK_TURN_INIT;
    bad.script = script;
    bad.prompts = prompts;
    assert_int_equal(weir_tk_run_turn(&bad, &r, &err), WEIR_E_INVAL);
    assert_null(r);
    json_decref(prompts);
    json_decref(script);
}

/* A whole turn on the fake clock: retry waits out a 25 s Retry-After at
 * once, and the clock says the 25 s passed. */
static void test_run_turn_on_the_fake_clock(void **state) {
    (void)state;
    json_t *script = parse("{\"replies\":[{\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":"
                           "\"slow down\",\"retry_after_ms\":25000}},{\"text\":\"done\"}]}");
    json_t *config = parse("{\"max_delay_ms\":60000,\"max_elapsed_ms\":600000}");
    weir_tk_turn t = WEIR_TK_TURN_INIT;
    t.plugin = "retry";
    t.id = "retry";
    t.config = config;
    t.script = script;
    t.prompt = "hi";
    t.plugin_path = wt_env("WEIR_TEST_PLUGIN_DIR");
    t.fake_clock = true;
    t.clock_start_ms = 1000;
    json_t *r = NULL;
    weir_error err;
    if (weir_tk_run_turn(&t, &r, &err) != WEIR_OK)
        fail_msg("run_turn: %s", err.text);
    assert_json(json_object_get(r, "end"), "{\"kind\":\"completed\",\"text\":\"done\","
                                           "\"turn\":1}");
    assert_int_equal(json_integer_value(json_object_get(r, "clock_ms")), 1000 + 25000);
    const json_t *retry = event_of(json_object_get(r, "log"), "retry/wait", 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(retry, "data"),
                                                        "delay_ms")),
                     25000);
    json_decref(r);
    /* the fake clock ended with the run */
    weir_tk *tk = weir_tk_create();
    assert_int_equal(weir_tk_clock_advance(tk, 1), WEIR_E_STATE);
    assert_int_equal(weir_tk_clock_set(tk, 0), WEIR_OK);
    weir_tk_destroy(tk);
    json_decref(config);
    json_decref(script);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_gives_the_plugin_a_full_table),
        cmocka_unit_test(test_a_store_plugin_loads),
        cmocka_unit_test(test_stream_session_is_the_agents_id),
        cmocka_unit_test(test_waterfall_runs_the_chain_in_order_then_the_default),
        cmocka_unit_test(test_empty_chain_returns_the_default),
        cmocka_unit_test(test_invalid_result_names_the_outermost_row),
        cmocka_unit_test(test_listener_failure_names_the_row),
        cmocka_unit_test(test_invoke_checks_its_arguments),
        cmocka_unit_test(test_loading_after_the_first_invoke_is_too_late),
        cmocka_unit_test(test_load_checks_ids_and_descriptors),
        cmocka_unit_test(test_config_is_checked_against_the_schema),
        cmocka_unit_test(test_failed_init_is_wrapped_and_unregistered),
        cmocka_unit_test(test_ignored_registration_failure_fails_the_load),
        cmocka_unit_test(test_fake_agent_records_events_sends_and_logs),
        cmocka_unit_test(test_registering_after_init_is_refused_and_logged),
        cmocka_unit_test(test_destroy_runs_fini_in_reverse_load_order),
        cmocka_unit_test(test_load_file_uses_the_real_loader),
        cmocka_unit_test(test_allocation_failures_are_clean),
        cmocka_unit_test(test_allocation_failures_in_the_log_are_clean),
        cmocka_unit_test(test_run_turn_gives_the_log_the_system_prompt_and_the_requests),
        cmocka_unit_test(test_run_turn_with_a_tool_and_a_policy),
        cmocka_unit_test(test_run_turn_reports_a_failed_turn),
        cmocka_unit_test(test_run_turn_checks_its_arguments_and_reports_load_errors),
        cmocka_unit_test(test_fake_agent_has_a_real_log_surface_and_route),
        cmocka_unit_test(test_seed_log_copies_a_log_file),
        cmocka_unit_test(test_script_by_purpose_and_the_fake_clock),
        cmocka_unit_test(test_compaction_basic_prunes_a_seeded_surface),
        cmocka_unit_test(test_retry_waits_a_retry_after_on_the_fake_clock),
        cmocka_unit_test(test_run_turn_runs_several_prompts_with_a_summary_by_purpose),
        cmocka_unit_test(test_run_turn_on_the_fake_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
