/*
 * tests/unit/test_driver_input.c - input while idle and while running
 * (docs/generations.md): steering between steps, idle steering,
 * inject while idle, agent/turn-stopping steering, cancel and the inbox.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver_harness.h"

static const char *user_text(const dh *d, int n) {
    const json_t *e = dh_find(d, "user/message", n);
    assert_non_null(e);
    const json_t *m = json_object_get(json_object_get(e, "data"), "message");
    return json_string_value(json_object_get(json_array_get(json_object_get(m, "content"), 0), "text"));
}

static const char *user_source(const dh *d, int n) {
    const json_t *m = json_object_get(json_object_get(dh_find(d, "user/message", n), "data"), "message");
    return json_string_value(json_object_get(json_object_get(m, "source"), "kind"));
}

static int user_step(const dh *d, int n) {
    return (int)json_integer_value(
        json_object_get(json_object_get(dh_find(d, "user/message", n), "data"), "step"));
}

static const char *reason_kind(const dh *d, int n) {
    const json_t *e = dh_find(d, "turn/end", n);
    assert_non_null(e);
    return json_string_value(
        json_object_get(json_object_get(json_object_get(e, "data"), "reason"), "kind"));
}

/* Steer once, when the first tool/call is logged. */
static void steer_on_tool_call(dh *d, const json_t *ev, bool durable) {
    if (durable && !strcmp(json_string_value(json_object_get(ev, "type")), "tool/call") &&
        d->count++ == 0)
        dh_send(d, "steer-now", WEIR_SEND_STEER);
}

static void steering_between_steps_is_delivered_exactly_once(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"working\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
             "\"arguments\":{}}]},"
             "{\"text\":\"noted\",\"expect\":{\"message_contains\":\"steer-now\","
             "\"last_role\":\"user\",\"messages_count\":4}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\"}]}}]",
             NULL);
    d.on_event = steer_on_tool_call;
    dh_open(&d, "steer");
    dh_send(&d, "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 1);
    assert_int_equal(dh_count(&d, "user/message"), 2);
    assert_string_equal(user_text(&d, 1), "steer-now");
    assert_string_equal(user_source(&d, 1), "steer");
    assert_int_equal(user_step(&d, 1), 2);
    assert_string_equal(reason_kind(&d, 0), "completed");
    dh_teardown(&d);
}

static void idle_steering_starts_a_turn(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"ok\",\"expect\":{\"message_contains\":\"steered\"}}]}}]",
             NULL);
    dh_open(&d, "idlesteer");
    dh_send(&d, "steered", WEIR_SEND_STEER);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 1);
    assert_string_equal(user_source(&d, 0), "steer");
    assert_string_equal(reason_kind(&d, 0), "completed");
    dh_teardown(&d);
}

/* A message's own source fields (e.g. pinned, for compaction) reach the
 * log; the kind it leaves out is the send mode's. */
static void message_source_fields_are_kept(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"ok\"}]}}]",
             NULL);
    dh_open(&d, "pinned");
    json_t *m = json_pack("{s:s, s:s, s:{s:b, s:s}}", "role", "user", "content", "never use tabs",
                          "source", "pinned", 1, "note", "from the host");
    weir_error err;
    assert_int_equal(weir_agent_send(d.agent, m, WEIR_SEND_FOLLOWUP, "c1", &err), WEIR_OK);
    json_decref(m);
    dh_run(&d);
    const json_t *msg =
        json_object_get(json_object_get(dh_find(&d, "user/message", 0), "data"), "message");
    const json_t *source = json_object_get(msg, "source");
    assert_true(json_is_true(json_object_get(source, "pinned")));
    assert_string_equal(json_string_value(json_object_get(source, "note")), "from the host");
    assert_string_equal(user_source(&d, 0), "human");
    dh_teardown(&d);
}

static void inject_while_idle_waits_for_a_wake(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"ok\",\"expect\":{\"messages_count\":2}}]}}]",
             NULL);
    dh_open(&d, "inject");
    dh_send(&d, "context", WEIR_SEND_INJECT);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 0);
    assert_int_equal(dh_count(&d, "agent/status"), 0);
    dh_send(&d, "question", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 1);
    /* the claim takes next-step input first, then the queued prompt */
    assert_string_equal(user_text(&d, 0), "context");
    assert_string_equal(user_text(&d, 1), "question");
    assert_int_equal(user_step(&d, 1), 1);
    dh_teardown(&d);
}

static void turn_stopping_listener_steers_another_step(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"first\"},"
             "{\"text\":\"second\",\"expect\":{\"message_contains\":\"keep going\"}}]}},"
             "{\"id\":\"loop\",\"plugin\":\"drvtest-hooks\",\"config\":{\"turn_stopping_steer\":"
             "{\"text\":\"keep going\",\"times\":1}}}]",
             NULL);
    dh_open(&d, "loop");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 1);
    assert_int_equal(dh_count(&d, "step/start"), 2);
    assert_string_equal(user_text(&d, 1), "keep going");
    assert_int_equal(user_step(&d, 1), 2);
    assert_string_equal(reason_kind(&d, 0), "completed");
    dh_teardown(&d);
}

static void followups_each_open_their_own_turn(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"a\",\"expect\":{\"messages_count\":1}},"
             "{\"text\":\"b\",\"expect\":{\"messages_count\":3}}]}}]",
             NULL);
    dh_open(&d, "followups");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 2);
    assert_int_equal(user_step(&d, 1), 1);
    /* one running..idle span for both turns */
    assert_int_equal(dh_count(&d, "agent/status"), 2);
    dh_teardown(&d);
}

static void resending_an_input_id_is_acknowledged_once(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a\",\"expect\":{\"messages_count\":1}}]}}]",
             NULL);
    dh_open(&d, "dedupe");
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", "same");
    json_t *m2 = json_pack("{s:s, s:s}", "role", "user", "content", "different");
    weir_error err;
    assert_int_equal(weir_agent_send(d.agent, m, WEIR_SEND_FOLLOWUP, "in-1", &err), WEIR_OK);
    assert_int_equal(weir_agent_send(d.agent, m, WEIR_SEND_FOLLOWUP, "in-1", &err), WEIR_OK);
    assert_int_equal(weir_agent_send(d.agent, m2, WEIR_SEND_FOLLOWUP, "in-1", &err),
                     WEIR_E_DUPLICATE);
    json_decref(m);
    json_decref(m2);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 1);
    const json_t *um = json_object_get(json_object_get(dh_find(&d, "user/message", 0), "data"),
                                       "message");
    assert_string_equal(json_string_value(json_object_get(um, "id")), "in-1");
    dh_teardown(&d);
}

static void invalid_messages_are_refused(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":"
                 "{\"replies\":[]}}]",
             NULL);
    dh_open(&d, "invalid");
    weir_error err;
    json_t *m = json_pack("{s:s, s:s}", "role", "assistant", "content", "x");
    assert_int_equal(weir_agent_send(d.agent, m, WEIR_SEND_FOLLOWUP, NULL, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "message.role: expected \"user\", got \"assistant\"");
    json_decref(m);
    m = json_pack("{s:s, s:i}", "role", "user", "content", 3);
    assert_int_equal(weir_agent_send(d.agent, m, WEIR_SEND_FOLLOWUP, NULL, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "message.content: expected a string or an array of blocks");
    json_decref(m);
    assert_int_equal(dh_count(&d, "agent/inbox/spliced"), 0);
    /* idle cancel is a no-op and keeps the inbox */
    dh_send(&d, "kept", WEIR_SEND_INJECT);
    assert_int_equal(weir_agent_cancel(d.agent, "user", false), WEIR_OK);
    assert_int_equal(dh_count(&d, "agent/inbox/spliced"), 1);
    assert_int_equal(weir_agent_cancel(d.agent, "bogus", false), WEIR_E_INVAL);
    dh_teardown(&d);
}

/* Cancel (clearing the inbox) when the step's assistant message is logged. */
static void cancel_on_assistant(dh *d, const json_t *ev, bool durable) {
    if (durable && !strcmp(json_string_value(json_object_get(ev, "type")), "assistant/message") &&
        d->count++ == 0) {
        dh_send(d, "queued-before-cancel", WEIR_SEND_FOLLOWUP);
        assert_int_equal(weir_agent_cancel(d->agent, "user", (bool)(intptr_t)d->ud), WEIR_OK);
        dh_send(d, "sent-after-cancel", WEIR_SEND_STEER);
    }
}

static void cancel_clears_inbox_and_latches_later_input(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"a\"},{\"text\":\"b\",\"expect\":{\"message_contains\":"
             "\"sent-after-cancel\"}}]}}]",
             NULL);
    d.on_event = cancel_on_assistant;
    d.ud = (void *)(intptr_t) false;
    dh_open(&d, "cancelclear");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    /* turn 1 aborted; the queued followup was discarded; the steer sent after
     * the cancel was re-targeted to the next turn and ran it */
    assert_int_equal(dh_count(&d, "turn/start"), 2);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    const json_t *r = json_object_get(json_object_get(dh_find(&d, "turn/end", 0), "data"), "reason");
    assert_string_equal(json_string_value(json_object_get(r, "cause")), "user");
    assert_int_equal(dh_count(&d, "agent/inbox/discarded"), 1);
    assert_int_equal(dh_count(&d, "user/message"), 2);
    assert_string_equal(user_text(&d, 1), "sent-after-cancel");
    assert_string_equal(reason_kind(&d, 1), "completed");
    dh_teardown(&d);
}

static void cancel_with_keep_inbox_keeps_queued_work(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"a\"},{\"text\":\"b\"},{\"text\":\"c\"}]}}]",
             NULL);
    d.on_event = cancel_on_assistant;
    d.ud = (void *)(intptr_t) true;
    dh_open(&d, "cancelkeep");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    assert_int_equal(dh_count(&d, "agent/inbox/discarded"), 0);
    /* the kept steer and followup both ran in the turns that followed */
    assert_int_equal(dh_count(&d, "user/message"), 3);
    dh_teardown(&d);
}

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started;
} waiter;

static void note_stream_start(dh *d, const json_t *ev, bool durable) {
    if (durable || strcmp(json_string_value(json_object_get(ev, "type")), "agent/assistant-stream"))
        return;
    waiter *w = d->ud;
    pthread_mutex_lock(&w->mu);
    w->started = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void *drive(void *arg) {
    dh_run(arg);
    return NULL;
}

static void cancel_from_another_thread_wakes_a_sleeping_stream(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"slow\",\"chunk_delay_ms\":600000}]}}]",
             NULL);
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    d.on_event = note_stream_start;
    d.ud = &w;
    dh_open(&d, "crossthread");
    dh_send(&d, "hello", WEIR_SEND_FOLLOWUP);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drive, &d), 0);
    pthread_mutex_lock(&w.mu);
    while (!w.started)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    assert_int_equal(weir_agent_cancel(d.agent, "user", false), WEIR_OK);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    assert_int_equal(dh_count(&d, "assistant/attempt"), 1);
    dh_teardown(&d);
}

#define ROWS_ORDER                                                                                      \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"         \
    "\"replies\":[{\"text\":\"Done.\"}]}}]"

static void send_at_turn_start(dh *d, const json_t *event, bool durable) {
    const char *type = json_string_value(json_object_get(event, "type"));
    if (!durable || strcmp(type, "turn/start") != 0 || d->count++ > 0)
        return;
    weir_error err;
    assert_int_equal(weir_agent_send_text(d->agent, "later", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
}

/* The text of the first block of a message. */
static const char *first_text(const json_t *msg) {
    return json_string_value(
        json_object_get(json_array_get(json_object_get(msg, "content"), 0), "text"));
}

/* A send from inside a callback logs agent/inbox/spliced while the log is
 * delivering turn/start, then raises agent/inbox/inserted: the live event
 * waits for the durable one raised before it. */
static void a_live_event_follows_the_durable_event_raised_before_it(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ROWS_ORDER, NULL);
    d.on_event = send_at_turn_start;
    dh_open(&d, "order");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    long spliced = -1, inserted = -1;
    size_t i;
    const json_t *ev;
    json_array_foreach(d.events, i, ev) {
        const char *type = json_string_value(json_object_get(ev, "type"));
        const json_t *data = json_object_get(ev, "data");
        if (spliced < 0 && !strcmp(type, "agent/inbox/spliced") &&
            json_array_size(json_object_get(data, "inserted")) == 1 &&
            !strcmp(first_text(json_array_get(json_object_get(data, "inserted"), 0)), "later"))
            spliced = (long)i;
        if (inserted < 0 && !strcmp(type, "agent/inbox/inserted") &&
            !strcmp(first_text(json_object_get(data, "message")), "later"))
            inserted = (long)i;
    }
    assert_true(spliced >= 0 && inserted >= 0);
    /* raised: the splice is logged, then agent/inbox/inserted */
    if (spliced > inserted)
        fail_msg("agent/inbox/inserted (event %ld) was delivered before the "
                 "agent/inbox/spliced it follows (event %ld)",
                 inserted, spliced);
    dh_check(&d);
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(steering_between_steps_is_delivered_exactly_once),
        cmocka_unit_test(a_live_event_follows_the_durable_event_raised_before_it),
        cmocka_unit_test(idle_steering_starts_a_turn),
        cmocka_unit_test(inject_while_idle_waits_for_a_wake),
        cmocka_unit_test(message_source_fields_are_kept),
        cmocka_unit_test(turn_stopping_listener_steers_another_step),
        cmocka_unit_test(followups_each_open_their_own_turn),
        cmocka_unit_test(resending_an_input_id_is_acknowledged_once),
        cmocka_unit_test(invalid_messages_are_refused),
        cmocka_unit_test(cancel_clears_inbox_and_latches_later_input),
        cmocka_unit_test(cancel_with_keep_inbox_keeps_queued_work),
        cmocka_unit_test(cancel_from_another_thread_wakes_a_sleeping_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
