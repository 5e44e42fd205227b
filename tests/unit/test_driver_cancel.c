/*
 * tests/unit/test_driver_cancel.c - cancellation at every await point of a
 * turn (docs/lifecycle.md, "Cancellation"): a cancel that makes a hook fail ends the turn aborted, not in
 * error (agent/request, agent/pre-step, system-prompt/assemble,
 * agent/turn-stopping); a cancel during agent/pre-step spends no step; a
 * cancel during agent/request or prepare_call commits no user message; a
 * cancel from synchronous observers (agent/status running, step/start);
 * reasoning-only prefix finalization; the first typed cause wins.  Also
 * the interception cases of this area: pre-step fires once per
 * proposed step, starts_request_series, steer and inject staged during
 * pre-step, steering that races a concluding step.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "driver_harness.h"

#define ONE_REPLY(text)                                                                        \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["       \
    "{\"text\":\"" text "\"}]}}]"

#define TOOL_THEN_TEXT                                                                         \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["       \
    "{\"text\":\"working\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","               \
    "\"arguments\":{}}]},{\"text\":\"done\"}]}},"                                              \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                    \
    "[{\"name\":\"lookup\"}]}}]"

static const json_t *reason_of(const dh *d, int n) {
    const json_t *e = dh_find(d, "turn/end", n);
    assert_non_null(e);
    return json_object_get(json_object_get(e, "data"), "reason");
}

static const char *reason_kind(const dh *d, int n) {
    return json_string_value(json_object_get(reason_of(d, n), "kind"));
}

static const char *text_of(const json_t *event) {
    const json_t *m = json_object_get(json_object_get(event, "data"), "message");
    return json_string_value(json_object_get(json_array_get(json_object_get(m, "content"), 0),
                                             "text"));
}

/* ------------------------------------------------------------------------ */
/* A cancel that makes a hook fail                                           */
/* ------------------------------------------------------------------------ */

/* Cancel the agent, then fail the call, as a listener that stops when its
 * signal fires does. */
static json_t *cancel_then_fail(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    int *calls = ud;
    (*calls)++;
    const weir_api *api = weir_host_api();
    assert_int_equal(weir_agent_cancel(api->call_agent(call), "user", false), WEIR_OK);
    api->call_fail(call, "stopped: cancelled");
    return NULL;
}

/* Each hook in turn: the turn ends aborted (cause user), with no agent/error
 * and no model request after the cancel. */
static void cancel_that_fails_a_hook_aborts_the_turn(void **state) {
    (void)state;
    static const char *const hooks[] = {"agent/request", "agent/pre-step",
                                        "system-prompt/assemble", "agent/turn-stopping"};
    for (size_t k = 0; k < sizeof hooks / sizeof hooks[0]; k++) {
        dh d;
        dh_setup(&d, ONE_REPLY("hello"), NULL);
        int calls = 0;
        weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
        o.user_data = &calls;
        weir_agent_hook h = {hooks[k], cancel_then_fail, &o};
        d.hooks = &h;
        d.nhooks = 1;
        char id[32];
        snprintf(id, sizeof id, "cancelhook%zu", k);
        dh_open(&d, id);
        dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
        dh_run(&d);
        assert_int_equal(calls, 1);
        assert_int_equal(dh_count(&d, "turn/end"), 1);
        if (strcmp(reason_kind(&d, 0), "aborted") != 0)
            fail_msg("%s: turn ended %s, not aborted", hooks[k], reason_kind(&d, 0));
        assert_string_equal(json_string_value(json_object_get(reason_of(&d, 0), "cause")),
                            "user");
        assert_int_equal(dh_count(&d, "agent/error"), 0);
        /* only turn-stopping runs after the step's request */
        assert_int_equal(dh_count(&d, "assistant/message"),
                         strcmp(hooks[k], "agent/turn-stopping") == 0 ? 1 : 0);
        /* pre-step and assemble run before any step: none was opened */
        if (!strcmp(hooks[k], "agent/pre-step") || !strcmp(hooks[k], "system-prompt/assemble"))
            assert_int_equal(dh_count(&d, "step/start"), 0);
        dh_teardown(&d);
    }
}

/* A hook that fails without a cancel still errors the turn. */
static void hook_failure_without_a_cancel_is_an_error(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"x\"}]}},{\"id\":\"gate\",\"plugin\":\"drvtest-hooks\",\"config\":"
             "{\"pre_step\":{\"action\":\"fail\"}}}]",
             NULL);
    dh_open(&d, "hookerror");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "error");
    assert_int_equal(dh_count(&d, "agent/error"), 1);
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* A cancel during agent/pre-step, agent/request and prepare_call            */
/* ------------------------------------------------------------------------ */

/* Cancel, then answer as the chain would (the listener does not fail). */
static json_t *cancel_then_next(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    int *calls = ud;
    (*calls)++;
    const weir_api *api = weir_host_api();
    assert_int_equal(weir_agent_cancel(api->call_agent(call), "user", false), WEIR_OK);
    return api->next(call);
}

/* The open turn spends no step (no step/start, no step/end). */
static void cancel_during_pre_step_spends_no_step(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ONE_REPLY("never"), NULL);
    int calls = 0;
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = &calls;
    weir_agent_hook h = {"agent/pre-step", cancel_then_next, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "cancelpre");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(calls, 1);
    assert_int_equal(dh_count(&d, "step/start"), 0);
    assert_int_equal(dh_count(&d, "step/end"), 0);
    assert_int_equal(dh_count(&d, "user/message"), 0);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    dh_teardown(&d);
}

/* Cancellation during agent/request commits neither system nor user messages. */
static void cancel_during_agent_request_commits_no_message(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ONE_REPLY("never"), NULL);
    int calls = 0;
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = &calls;
    weir_agent_hook h = {"agent/request", cancel_then_next, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "cancelrequest");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(calls, 1);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    assert_int_equal(dh_count(&d, "user/message"), 0);
    assert_int_equal(dh_count(&d, "system/message"), 0);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 0);
    assert_int_equal(dh_count(&d, "assistant/message"), 0);
    dh_teardown(&d);
}

typedef struct canceller {
    dh *d;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go;
} canceller;

/* Cancel from another thread once step/start was logged. */
static void *cancel_later(void *arg) {
    canceller *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->go)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    struct timespec ts = {0, 100 * 1000000L}; /* inside prepare_call by now, most likely */
    nanosleep(&ts, NULL);
    assert_int_equal(weir_agent_cancel(c->d->agent, "user", false), WEIR_OK);
    return NULL;
}

static void go_on_step_start(dh *d, const json_t *ev, bool durable) {
    if (!durable || strcmp(json_string_value(json_object_get(ev, "type")), "step/start") != 0)
        return;
    canceller *c = d->ud;
    pthread_mutex_lock(&c->mu);
    c->go = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* prepare_call waits (60 s) on the call's signal: the cancel ends it at once,
 * and nothing of the request is committed. */
static void cancel_during_prepare_call_commits_no_message(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
             "\"prepare_delay_ms\":60000,\"replies\":[{\"text\":\"never\"}]}}]",
             NULL);
    canceller c = {&d, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    d.on_event = go_on_step_start;
    d.ud = &c;
    dh_open(&d, "cancelprepare");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cancel_later, &c), 0);
    time_t t0 = time(NULL);
    dh_run(&d);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(time(NULL) - t0 < 30);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    assert_int_equal(dh_count(&d, "agent/error"), 0);
    assert_int_equal(dh_count(&d, "user/message"), 0);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 0);
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* Synchronous observers, prefixes, causes                                   */
/* ------------------------------------------------------------------------ */

/* Cancel from the observer of `d->ud` (an event type), once, with the
 * cause(s) in `causes` (a NULL-terminated list: the first one wins). */
typedef struct sync_cancel {
    const char *type;
    const char *const *causes;
    int done;
} sync_cancel;

static void cancel_in_observer(dh *d, const json_t *ev, bool durable) {
    (void)durable;
    sync_cancel *sc = d->ud;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (sc->done || strcmp(type, sc->type) != 0)
        return;
    if (!strcmp(type, "agent/status") &&
        strcmp(json_string_value(json_object_get(json_object_get(ev, "data"), "status")),
               "running") != 0)
        return;
    sc->done = 1;
    for (const char *const *c = sc->causes; *c; c++)
        assert_int_equal(weir_agent_cancel(d->agent, *c, false), WEIR_OK);
}

static void cancel_from_synchronous_observers(void **state) {
    (void)state;
    static const char *const user[] = {"user", NULL};
    static const char *const types[] = {"agent/status", "step/start", "turn/start"};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        dh d;
        dh_setup(&d, ONE_REPLY("never"), NULL);
        sync_cancel sc = {types[k], user, 0};
        d.on_event = cancel_in_observer;
        d.ud = &sc;
        char id[32];
        snprintf(id, sizeof id, "synccancel%zu", k);
        dh_open(&d, id);
        dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
        dh_run(&d);
        assert_int_equal(sc.done, 1);
        assert_int_equal(dh_count(&d, "turn/end"), 1);
        assert_string_equal(reason_kind(&d, 0), "aborted");
        assert_int_equal(dh_count(&d, "assistant/message"), 0);
        assert_int_equal(dh_count(&d, "user/message"), 0);
        assert_int_equal(dh_count(&d, "agent/error"), 0);
        dh_teardown(&d);
    }
}

/* The first typed cause wins: "parent", then "user" and "disposed". */
static void first_typed_cause_wins(void **state) {
    (void)state;
    static const char *const causes[] = {"parent", "user", "disposed", NULL};
    dh d;
    dh_setup(&d, ONE_REPLY("never"), NULL);
    sync_cancel sc = {"step/start", causes, 0};
    d.on_event = cancel_in_observer;
    d.ud = &sc;
    dh_open(&d, "firstcause");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    assert_string_equal(json_string_value(json_object_get(reason_of(&d, 0), "cause")), "parent");
    dh_teardown(&d);
}

/* Cancel at the second chunk frame of the stream. */
static void cancel_at_second_chunk(dh *d, const json_t *ev, bool durable) {
    if (durable ||
        strcmp(json_string_value(json_object_get(ev, "type")), "agent/assistant-stream") != 0)
        return;
    const json_t *frame = json_object_get(json_object_get(ev, "data"), "frame");
    if (strcmp(json_string_value(json_object_get(frame, "type")), "chunk") == 0 &&
        d->count++ == 2)
        assert_int_equal(weir_agent_cancel(d->agent, "user", false), WEIR_OK);
}

/* The same with cause "parent". */
static void cancel_at_second_chunk_parent(dh *d, const json_t *ev, bool durable) {
    if (durable ||
        strcmp(json_string_value(json_object_get(ev, "type")), "agent/assistant-stream") != 0)
        return;
    const json_t *frame = json_object_get(json_object_get(ev, "data"), "frame");
    if (strcmp(json_string_value(json_object_get(frame, "type")), "chunk") == 0 &&
        d->count++ == 2)
        assert_int_equal(weir_agent_cancel(d->agent, "parent", false), WEIR_OK);
}

/* Reasoning only, then the cancel: the delivered reasoning is kept as an
 * interrupted assistant/message (the kept prefix). */
static void reasoning_only_prefix_is_finalized(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"reasoning\":\"thinking it over carefully\",\"chunks\":4,"
             "\"chunk_delay_ms\":20}]}}]",
             NULL);
    d.on_event = cancel_at_second_chunk;
    dh_open(&d, "reasoningonly");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    const json_t *am = dh_find(&d, "assistant/message", 0);
    assert_non_null(am);
    const json_t *data = json_object_get(am, "data");
    assert_true(json_is_true(json_object_get(data, "interrupted")));
    const json_t *content = json_object_get(json_object_get(data, "message"), "content");
    assert_int_equal(json_array_size(content), 1);
    const json_t *b = json_array_get(content, 0);
    assert_string_equal(json_string_value(json_object_get(b, "type")), "reasoning");
    assert_true(strlen(json_string_value(json_object_get(b, "text"))) > 0);
    assert_int_equal(dh_count(&d, "assistant/attempt"), 0);
    dh_teardown(&d);
}

/* A kept interrupted answer goes back to the model with a mark: a
 * user/message note (source {kind:"interrupt", cause}) right after it, so
 * the next request says the user cut the answer off; every request still
 * derives from the log (dh_teardown checks each one). */
static void an_interrupted_answer_goes_back_with_a_mark(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a long answer that goes on\",\"chunks\":5,\"chunk_delay_ms\":20},"
             "{\"text\":\"sorry\",\"expect\":{\"message_contains\":\"The user interrupted\"}}]}}]",
             NULL);
    d.on_event = cancel_at_second_chunk;
    dh_open(&d, "interruptmark");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    const json_t *am = dh_find(&d, "assistant/message", 0);
    assert_true(json_is_true(json_object_get(json_object_get(am, "data"), "interrupted")));
    const json_t *note = dh_find(&d, "user/message", 1);
    assert_non_null(note);
    assert_int_equal(json_integer_value(json_object_get(note, "seq")),
                     json_integer_value(json_object_get(am, "seq")) + 1);
    const json_t *src = json_object_get(json_object_get(json_object_get(note, "data"), "message"),
                                        "source");
    assert_string_equal(json_string_value(json_object_get(src, "kind")), "interrupt");
    assert_string_equal(json_string_value(json_object_get(src, "cause")), "user");
    assert_non_null(strstr(text_of(note), "The user interrupted"));
    /* the next request carries the answer, then the mark, then the new input */
    d.on_event = NULL;
    dh_send(&d, "go on", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 1), "completed");
    const json_t *req = json_object_get(json_object_get(dh_find(&d, "drvtest/request", 1), "data"),
                                        "request");
    const json_t *msgs = json_object_get(req, "messages");
    size_t n = json_array_size(msgs);
    assert_true(n >= 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, n - 3), "role")),
                        "assistant");
    char *mark = json_dumps(json_array_get(msgs, n - 2), JSON_COMPACT);
    assert_non_null(strstr(mark, "The user interrupted"));
    free(mark);
    dh_teardown(&d);

    /* any other cause says which */
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a long answer that goes on\",\"chunks\":5,\"chunk_delay_ms\":20}]}}]",
             NULL);
    d.on_event = cancel_at_second_chunk_parent;
    dh_open(&d, "interruptparent");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    note = dh_find(&d, "user/message", 1);
    assert_non_null(note);
    assert_non_null(strstr(text_of(note), "cancel cause: parent"));
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* agent/pre-step                                                            */
/* ------------------------------------------------------------------------ */

typedef struct pre_probe {
    int calls;
    int series_on;   /* mark starts_request_series on this step */
    bool stage;      /* send a steer and an inject on the first call */
} pre_probe;

static json_t *probe_pre_step(weir_call *call, const json_t *args, void *ud) {
    pre_probe *p = ud;
    p->calls++;
    const weir_api *api = weir_host_api();
    if (p->stage && p->calls == 1) {
        weir_agent *a = api->call_agent(call);
        json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", "staged steer");
        json_t *i = json_pack("{s:s, s:s}", "role", "user", "content", "staged inject");
        assert_int_equal(weir_agent_send(a, m, WEIR_SEND_STEER, "st", NULL), WEIR_OK);
        assert_int_equal(weir_agent_send(a, i, WEIR_SEND_INJECT, "in", NULL), WEIR_OK);
        json_decref(m);
        json_decref(i);
    }
    json_t *r = api->next(call);
    if (r && p->series_on == (int)json_integer_value(json_object_get(args, "step"))) {
        json_t *copy = json_deep_copy(r);
        json_decref(r);
        r = copy;
        json_object_set_new(r, "starts_request_series", json_true());
    }
    return r;
}

/* Once per proposed step, before the step opens; starts_request_series
 * marks that step's request/header (reason "series"). */
static void pre_step_fires_once_per_proposed_step_and_starts_a_series(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, TOOL_THEN_TEXT, NULL);
    pre_probe p = {0, 2, false};
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = &p;
    weir_agent_hook h = {"agent/pre-step", probe_pre_step, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "prestepcount");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "step/start"), 2);
    assert_int_equal(p.calls, 2);
    assert_int_equal(dh_count(&d, "request/header"), 2);
    const json_t *h2 = json_object_get(dh_find(&d, "request/header", 1), "data");
    assert_string_equal(json_string_value(json_object_get(h2, "reason")), "series");
    dh_teardown(&d);
}

/* A steer and an inject sent while pre-step runs wait for the next request
 * boundary: the step enters only its claimed batch; the next one takes them. */
static void steer_and_inject_staged_during_pre_step(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"first\",\"expect\":{\"messages_count\":1}},"
             "{\"text\":\"second\",\"expect\":{\"message_contains\":\"staged inject\"}}]}}]",
             NULL);
    pre_probe p = {0, 0, true};
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = &p;
    weir_agent_hook h = {"agent/pre-step", probe_pre_step, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "prestepstage");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 1);
    assert_int_equal(dh_count(&d, "step/start"), 2);
    assert_int_equal(p.calls, 2);
    assert_string_equal(text_of(dh_find(&d, "user/message", 1)), "staged steer");
    assert_string_equal(text_of(dh_find(&d, "user/message", 2)), "staged inject");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(dh_find(&d, "user/message", 2), "data"), "step")),
                     2);
    assert_string_equal(reason_kind(&d, 0), "completed");
    dh_teardown(&d);
}

/* Steer from the assistant/message observer of a step that ends the turn:
 * the steer still runs in this turn. */
static void steer_on_final_message(dh *d, const json_t *ev, bool durable) {
    if (durable &&
        !strcmp(json_string_value(json_object_get(ev, "type")), "assistant/message") &&
        d->count++ == 0)
        dh_send(d, "racing steer", WEIR_SEND_STEER);
}

static void steering_that_races_a_concluding_step_still_runs(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"all done\"},"
             "{\"text\":\"noted\",\"expect\":{\"message_contains\":\"racing steer\"}}]}}]",
             NULL);
    d.on_event = steer_on_final_message;
    dh_open(&d, "racingsteer");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 1);
    assert_int_equal(dh_count(&d, "step/start"), 2);
    assert_string_equal(reason_kind(&d, 0), "completed");
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cancel_that_fails_a_hook_aborts_the_turn),
        cmocka_unit_test(hook_failure_without_a_cancel_is_an_error),
        cmocka_unit_test(cancel_during_pre_step_spends_no_step),
        cmocka_unit_test(cancel_during_agent_request_commits_no_message),
        cmocka_unit_test(cancel_during_prepare_call_commits_no_message),
        cmocka_unit_test(cancel_from_synchronous_observers),
        cmocka_unit_test(first_typed_cause_wins),
        cmocka_unit_test(reasoning_only_prefix_is_finalized),
        cmocka_unit_test(an_interrupted_answer_goes_back_with_a_mark),
        cmocka_unit_test(pre_step_fires_once_per_proposed_step_and_starts_a_series),
        cmocka_unit_test(steer_and_inject_staged_during_pre_step),
        cmocka_unit_test(steering_that_races_a_concluding_step_still_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
