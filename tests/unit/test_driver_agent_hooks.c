/*
 * tests/unit/test_driver_agent_hooks.c - hooks per agent (docs/hooks.md: "registered
 * per host (all agents) or per agent"): an embedder's listeners in
 * weir_agent_options.hooks and a plugin's in agent/created
 * (api->agent_hook_register) apply to that agent only; placement around the
 * deployment's chain (WEIR_ORDER_FIRST outside it, otherwise inside it);
 * refused registrations (before/after, unknown hook, after agent/created,
 * bad options); a session/event listener that reads the log from the
 * thread of weir_agent_send_text while the driver's steps trim it.
 */
#include <pthread.h>
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

/* One scripted tool call of `echo`, then a closing text, for every turn. */
#define ROWS_TOOL(extra)                                                                          \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"         \
    "\"replies\":[{\"text\":\"Calling.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\","      \
    "\"arguments\":{}}]},{\"text\":\"Done.\"}]}},"                                               \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                      \
    "[{\"name\":\"echo\",\"reply\":\"echoed\"}]}}" extra "]"

/* The is_error flag of the n-th tool/result of the run. */
static bool result_is_error(const dh *d, int n) {
    const json_t *msg = json_object_get(json_object_get(dh_find(d, "tool/result", n), "data"),
                                        "message");
    const json_t *block = json_array_get(json_object_get(msg, "content"), 0);
    return json_is_true(json_object_get(block, "is_error"));
}

static json_t *deny_echo(weir_call *call, const json_t *args, void *ud) {
    int *calls = ud;
    (*calls)++;
    if (strcmp(json_string_value(json_object_get(args, "name")), "echo") == 0)
        return json_pack("{s:s, s:s}", "kind", "deny", "reason", "not for this agent");
    return weir_host_api()->next(call);
}

static void run_one(dh *d, const char *id) {
    dh_open(d, id);
    dh_send(d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(d);
}

/* The embedder's listener denies the tool for agent "a1" only. */
static void embedder_listener_applies_to_its_agent_only(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ROWS_TOOL(""), NULL);
    int calls = 0;
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = &calls;
    weir_agent_hook h = {"tools/pre-execute", deny_echo, &o};
    d.hooks = &h;
    d.nhooks = 1;
    run_one(&d, "a1");
    assert_int_equal(calls, 1);
    assert_true(result_is_error(&d, 0));
    dh_check(&d);
    dh_close(&d);

    d.hooks = NULL; /* same host, another agent: the deployment's chain only */
    d.nhooks = 0;
    json_decref(d.events);
    d.events = json_array();
    run_one(&d, "a2");
    assert_int_equal(calls, 1);
    assert_false(result_is_error(&d, 0));
    dh_teardown(&d);
}

/* Placement: the outermost listener sees the nesting of the others in the
 * sections the inner ones added after weir_next(). */
static json_t *add_section(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    const char *name = ud;
    json_t *a = weir_host_api()->next(call);
    json_t *out = a ? json_deep_copy(a) : NULL;
    json_decref(a);
    if (out)
        json_array_append_new(json_object_get(out, "sections"),
                              json_pack("{s:s, s:i, s:s}", "name", name, "order", 200,
                                        "text", name));
    return out;
}

static char seen[256];

static json_t *outermost(weir_call *call, const json_t *args, void *ud) {
    json_t *out = add_section(call, args, ud);
    seen[0] = '\0';
    size_t i;
    const json_t *s;
    json_array_foreach(json_object_get(out, "sections"), i, s) {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (strlen(seen) + strlen(name) + 2 < sizeof seen) {
            strcat(seen, name);
            strcat(seen, ",");
        }
    }
    return out;
}

static void agent_listeners_wrap_the_deployment_chain(void **state) {
    (void)state;
    dh d;
    /* drvtest-hooks' assemble_counter adds a section "counter" after weir_next */
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
             "\"replies\":[{\"text\":\"ok\"}]}},"
             "{\"id\":\"counter\",\"plugin\":\"drvtest-hooks\",\"config\":"
             "{\"assemble_counter\":true}}]",
             NULL);
    weir_hook_opts opts[3] = {WEIR_HOOK_OPTS_INIT, WEIR_HOOK_OPTS_INIT, WEIR_HOOK_OPTS_INIT};
    opts[0].order = WEIR_ORDER_FIRST;
    opts[0].user_data = "outer";
    opts[1].order = WEIR_ORDER_LAST; /* innermost: next to the core default */
    opts[1].user_data = "last";
    opts[2].user_data = "middle";
    weir_agent_hook hooks[3] = {
        {"system-prompt/assemble", outermost, &opts[0]},
        {"system-prompt/assemble", add_section, &opts[1]},
        {"system-prompt/assemble", add_section, &opts[2]},
    };
    d.hooks = hooks;
    d.nhooks = 3;
    run_one(&d, "wrap");
    /* innermost first: last, then middle, then the deployment's counter, then outer */
    assert_string_equal(seen, "last,middle,counter,outer,");
    dh_teardown(&d);
}

/* drvtest-hooks registers, in agent/created of session "p1", a listener
 * denying echo for p1 only; its refused attempts are logged as codes. */
static void plugin_registers_for_one_agent_in_agent_created(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             ROWS_TOOL(",{\"id\":\"per-agent\",\"plugin\":\"drvtest-hooks\",\"config\":"
                       "{\"agent_deny\":{\"session\":\"p1\",\"tool\":\"echo\"}}}"),
             NULL);
    run_one(&d, "p1");
    assert_true(result_is_error(&d, 0));
    const json_t *created = json_object_get(dh_find(&d, "drvtest/agent-hooks", 0), "data");
    assert_int_equal(json_integer_value(json_object_get(created, "ok")), WEIR_OK);
    assert_int_equal(json_integer_value(json_object_get(created, "before")), WEIR_E_INVAL);
    assert_int_equal(json_integer_value(json_object_get(created, "unknown")), WEIR_E_NOT_FOUND);
    /* agent/turn-stopping: too late */
    const json_t *late = json_object_get(dh_find(&d, "drvtest/agent-hooks", 1), "data");
    assert_int_equal(json_integer_value(json_object_get(late, "late")), WEIR_E_TOO_LATE);
    dh_check(&d);
    dh_close(&d);

    json_decref(d.events);
    d.events = json_array();
    run_one(&d, "p2");
    assert_false(result_is_error(&d, 0));
    assert_int_equal(dh_count(&d, "drvtest/agent-hooks"), 1); /* only the late attempt */
    dh_teardown(&d);
}

/* Refused options: before/after, an unknown hook, nhooks without hooks. */
static void bad_agent_listeners_fail_the_open(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ROWS_TOOL(""), NULL);
    static const char *const ids[] = {"tools", NULL};
    weir_hook_opts before = WEIR_HOOK_OPTS_INIT;
    before.before = ids;
    weir_agent_hook h = {"tools/pre-execute", deny_echo, &before};
    weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
    o.session_id = "bad";
    o.hooks = &h;
    o.nhooks = 1;
    weir_agent *a = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_open(d.host, &o, &a, &err), WEIR_E_INVAL);
    assert_null(a);
    assert_string_equal(err.text,
                        "embedder: hook tools/pre-execute: an agent's own listeners take no "
                        "before/after (they run around the deployment's chain: "
                        "WEIR_ORDER_FIRST outside it, else inside it)");
    weir_agent_hook created = {"agent/created", deny_echo, NULL};
    o.hooks = &created;
    assert_int_equal(weir_agent_open(d.host, &o, &a, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "embedder: agent/created cannot be an agent's own hook (it has "
                                  "run when the agent's own listeners start)");
    weir_agent_hook unknown = {"no/such-hook", deny_echo, NULL};
    o.hooks = &unknown;
    assert_int_equal(weir_agent_open(d.host, &o, &a, &err), WEIR_E_NOT_FOUND);
    assert_string_equal(err.text,
                        "plugin embedder: unknown hook \"no/such-hook\" (see `weir hooks "
                        "--catalog`)");
    o.hooks = NULL;
    assert_int_equal(weir_agent_open(d.host, &o, &a, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "weir_agent_open: options.nhooks is 1 but hooks is NULL");
    /* an options struct from before hooks existed still opens */
    o.struct_size = (uint32_t)offsetof(weir_agent_options, hooks);
    o.session_id = "old";
    assert_int_equal(weir_agent_open(d.host, &o, &a, &err), WEIR_OK);
    weir_agent_close(a);
    dh_teardown(&d);
}


/* What a session/event listener saw (its counters are atomic: it runs on
 * whichever thread delivers). */
typedef struct {
    pthread_t driver;
    int calls, off_driver, reads, bad, turns;
} reader;

static void count(int *n) { __atomic_add_fetch(n, 1, __ATOMIC_SEQ_CST); }

/* Read the log through the api: the last assistant/message, the surface
 * (which reads the released assistant/message envelopes back) and its
 * replacement count. */
static void read_all(reader *r, weir_agent *agent) {
    const weir_api *api = weir_host_api();
    json_t *last = api->agent_last_event(agent, "assistant/message");
    if (last && strcmp(json_string_value(json_object_get(last, "type")), "assistant/message"))
        count(&r->bad);
    json_decref(last);
    json_t *surface = api->agent_surface(agent);
    size_t i;
    const json_t *node;
    json_array_foreach(surface, i, node) {
        if (json_integer_value(json_object_get(node, "seq")) <= 0 ||
            !json_is_string(json_object_get(node, "type")) ||
            !json_is_object(json_object_get(node, "message")))
            count(&r->bad);
    }
    if (!surface)
        count(&r->bad);
    json_decref(surface);
    (void)api->agent_replace_generation(agent);
    count(&r->reads);
}

static json_t *read_log(weir_call *call, const json_t *args, void *ud) {
    reader *r = ud;
    count(&r->calls);
    const char *type = json_string_value(json_object_get(json_object_get(args, "event"), "type"));
    if (type && strcmp(type, "turn/end") == 0)
        count(&r->turns);
    if (!pthread_equal(pthread_self(), r->driver))
        count(&r->off_driver);
    read_all(r, weir_host_api()->call_agent(call));
    return json_null();
}

#define LISTENER_SENDS 40

typedef struct {
    dh *d;
    reader *r;
    int first_sent; /* atomic: the first send returned */
} sender_args;

/* Sends the followups, and between them reads the log itself for a while
 * (the api's readers are for any thread). */
static void *send_followups(void *ud) {
    sender_args *s = ud;
    for (int i = 0; i < LISTENER_SENDS; i++) {
        weir_error err;
        if (weir_agent_send_text(s->d->agent, "more", WEIR_SEND_FOLLOWUP, &err) != WEIR_OK)
            return (void *)1;
        __atomic_store_n(&s->first_sent, 1, __ATOMIC_SEQ_CST);
        for (int k = 0; k < 20; k++)
            read_all(s->r, s->d->agent);
    }
    return NULL;
}

/* session/event runs on the thread that raised the event (the sender's,
 * for what weir_agent_send_text logs) while the driver runs steps whose
 * ends release older envelopes; the sender also reads between its sends.
 * Every read through the api is whole (and, under ASan, touches no
 * released envelope or surface array). */
static void session_event_listener_reads_the_log_from_the_senders_thread(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ROWS_TOOL(""), NULL);
    reader r = {.driver = pthread_self()};
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = &r;
    weir_agent_hook h = {"session/event", read_log, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "reader");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    pthread_t sender;
    sender_args sa = {&d, &r, 0};
    assert_int_equal(pthread_create(&sender, NULL, send_followups, &sa), 0);
    /* The first send while the driver is idle: nobody else is delivering,
     * so its events are delivered on the sender's thread (later ones may be
     * delivered by the driver when it is delivering at the time). */
    for (int i = 0; i < 20000 && !__atomic_load_n(&sa.first_sent, __ATOMIC_SEQ_CST); i++)
        usleep(1000);
    assert_true(__atomic_load_n(&sa.first_sent, __ATOMIC_SEQ_CST));
    /* not dh_count: the sender's thread may be recording an event */
    for (int i = 0; i < 2000 && __atomic_load_n(&r.turns, __ATOMIC_SEQ_CST) < LISTENER_SENDS / 4;
         i++) {
        dh_run(&d);
        usleep(1000);
    }
    void *failed = NULL;
    assert_int_equal(pthread_join(sender, &failed), 0);
    assert_null(failed);
    dh_run(&d);
    assert_int_equal(__atomic_load_n(&r.bad, __ATOMIC_SEQ_CST), 0);
    assert_int_equal(r.reads, r.calls + 20 * LISTENER_SENDS);
    assert_true(r.off_driver > 0); /* the sender's thread delivered its first send's */
    assert_true(dh_count(&d, "turn/end") >= LISTENER_SENDS / 4);
    dh_check(&d);
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(embedder_listener_applies_to_its_agent_only),
        cmocka_unit_test(agent_listeners_wrap_the_deployment_chain),
        cmocka_unit_test(plugin_registers_for_one_agent_in_agent_created),
        cmocka_unit_test(bad_agent_listeners_fail_the_open),
        cmocka_unit_test(session_event_listener_reads_the_log_from_the_senders_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
