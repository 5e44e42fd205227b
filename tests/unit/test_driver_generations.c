/*
 * tests/unit/test_driver_generations.c - the generation contract measured on
 * live agents (docs/generations.md):
 * receipts (input.queued says what input.delivered then does; identical
 * resubmissions get input.acknowledged; known no-effects are discarded or
 * held, not unknown), ordinary input queued before a generation's end
 * continues it (a followup joins the running generation), a job's result
 * alone does not, input from a completion hook starts the next generation,
 * a cancel during agent/pre-step detaches with no step, anchored steering,
 * native steering (accepted vs applied, refusal, error).
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

#include <weir/generation.h>

#include "driver_harness.h"

/* ------------------------------------------------------------------------ */
/* A tracker fed by the agent                                                */
/* ------------------------------------------------------------------------ */

typedef struct gt {
    weir_generation_tracker *t;
    json_t *events;    /* copies of what the tracker published */
    void (*action)(dh *d, const json_t *event, bool durable); /* the test's own, or NULL */
    void *ud;
} gt;

static void collect(const json_t *ev, void *ud) {
    gt *g = ud;
    json_array_append_new(g->events, json_deep_copy(ev));
}

static void feed(dh *d, const json_t *event, bool durable) {
    gt *g = d->ud;
    assert_int_equal(weir_generation_tracker_feed(g->t, event, durable), WEIR_OK);
    if (g->action)
        g->action(d, event, durable);
}

static void gt_setup(dh *d, gt *g, const char *rows, const char *session) {
    memset(g, 0, sizeof *g);
    g->events = json_array();
    assert_int_equal(weir_generation_tracker_create(collect, g, &g->t, NULL), WEIR_OK);
    dh_setup(d, rows, NULL);
    d->on_event = feed;
    d->ud = g;
    dh_open(d, session);
}

static void gt_teardown(dh *d, gt *g) {
    dh_teardown(d);
    weir_generation_tracker_destroy(g->t);
    json_decref(g->events);
}

static const char *types(const gt *g) {
    static char buf[4096];
    buf[0] = '\0';
    size_t i;
    const json_t *e;
    json_array_foreach(g->events, i, e) {
        if (i)
            strncat(buf, ",", sizeof buf - strlen(buf) - 1);
        strncat(buf, json_string_value(json_object_get(e, "type")), sizeof buf - strlen(buf) - 1);
    }
    return buf;
}

static int count(const gt *g, const char *type) {
    int n = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(g->events, i, e) n += !strcmp(json_string_value(json_object_get(e, "type")),
                                                     type);
    return n;
}

static const json_t *nth(const gt *g, const char *type, int n) {
    size_t i;
    const json_t *e;
    json_array_foreach(g->events, i, e) {
        if (!strcmp(json_string_value(json_object_get(e, "type")), type) && n-- == 0)
            return json_object_get(e, "data");
    }
    fail_msg("no %s #%d in %s", type, n, types(g));
    return NULL;
}

static const char *str(const json_t *data, const char *key) {
    const char *s = json_string_value(json_object_get(data, key));
    if (!s)
        fail_msg("missing string %s", key);
    return s;
}

static const char *ids(const json_t *data, const char *key) {
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    b[0] = '\0';
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(data, key), i, v) {
        if (i)
            strcat(b, ",");
        strcat(b, json_string_value(v));
    }
    return b;
}

/*
 * The receipts' promise: every input.delivered follows exactly one
 * input.queued of the same input, with the same delivery, and with its
 * generation_id when the receipt has one.  Each input is delivered once.
 */
static void check_receipts(const gt *g) {
    size_t i;
    const json_t *e;
    json_array_foreach(g->events, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "type")), "input.delivered") != 0)
            continue;
        const json_t *d = json_object_get(e, "data");
        const char *id = str(d, "input_id");
        int queued = 0, delivered = 0;
        size_t k;
        const json_t *o;
        json_array_foreach(g->events, k, o) {
            const json_t *od = json_object_get(o, "data");
            const char *type = json_string_value(json_object_get(o, "type"));
            const char *oid = json_string_value(json_object_get(od, "input_id"));
            if (!oid || strcmp(oid, id) != 0)
                continue;
            if (!strcmp(type, "input.delivered"))
                delivered++;
            if (strcmp(type, "input.queued") != 0)
                continue;
            queued++;
            if (k > i)
                fail_msg("%s: input.queued after input.delivered", id);
            if (strcmp(str(od, "delivery"), str(d, "delivery")) != 0)
                fail_msg("%s: queued as %s, delivered as %s", id, str(od, "delivery"),
                         str(d, "delivery"));
            const char *qg = json_string_value(json_object_get(od, "generation_id"));
            if (qg && strcmp(qg, str(d, "generation_id")) != 0)
                fail_msg("%s: queued for %s, delivered in %s", id, qg, str(d, "generation_id"));
        }
        if (queued != 1 || delivered != 1)
            fail_msg("%s: %d input.queued, %d input.delivered", id, queued, delivered);
    }
}

static void send_id(dh *d, const char *id, const char *text, weir_send_mode mode) {
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", text);
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_send(d->agent, m, mode, id, &err) != WEIR_OK)
        fail_msg("send %s: %s", id, err.text);
    json_decref(m);
}

static bool is(const json_t *event, bool durable, bool want_durable, const char *type) {
    return durable == want_durable &&
           !strcmp(json_string_value(json_object_get(event, "type")), type);
}

#define TOOL_ROWS(replies)                                                                     \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["       \
    "{\"text\":\"working\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","               \
    "\"arguments\":{}}]}," replies "]}},"                                                      \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                    \
    "[{\"name\":\"lookup\"}]}}]"

/* ------------------------------------------------------------------------ */
/* Continuation and order                                                    */
/* ------------------------------------------------------------------------ */

static void followup_at_first_answer(dh *d, const json_t *ev, bool durable) {
    if (is(ev, durable, true, "assistant/message") && d->count++ == 0)
        send_id(d, "f1", "and then?", WEIR_SEND_FOLLOWUP);
}

/* Ordinary input queued before a generation's end continues it
 * (docs/generations.md).  A followup sent while gen-1 runs gets
 * its own turn (docs/generations.md) but joins gen-1: one generation.started, one
 * generation.finished with both inputs and the last answer. */
static void followup_queued_while_running_continues_the_generation(void **state) {
    (void)state;
    dh d;
    gt g;
    gt_setup(&d, &g, TOOL_ROWS("{\"text\":\"first answer\"},{\"text\":\"second answer\"}"),
             "gcontinue");
    g.action = followup_at_first_answer;
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 2);
    assert_string_equal(types(&g), "input.queued,generation.started,input.delivered,"
                                   "assistant.message,assistant.message,input.queued,"
                                   "input.delivered,assistant.message,generation.finished");
    const json_t *q = nth(&g, "input.queued", 1);
    assert_string_equal(str(q, "input_id"), "f1");
    assert_string_equal(str(q, "delivery"), "request_boundary");
    assert_string_equal(str(q, "generation_id"), "gen-1");
    const json_t *f = nth(&g, "generation.finished", 0);
    assert_string_equal(str(f, "generation_id"), "gen-1");
    assert_string_equal(ids(f, "input_ids"), "q1,f1");
    assert_string_equal(str(f, "text"), "second answer");
    assert_int_equal(json_integer_value(json_object_get(nth(&g, "assistant.message", 2), "turn")),
                     2);
    check_receipts(&g);
    gt_teardown(&d, &g);
}

static void followup_then_steer(dh *d, const json_t *ev, bool durable) {
    if (!is(ev, durable, true, "assistant/message") || d->count++ != 0)
        return;
    send_id(d, "f1", "the followup", WEIR_SEND_FOLLOWUP);
    send_id(d, "s1", "the later steer", WEIR_SEND_STEER);
}

/* Later input never overtakes an earlier boundary batch: s1 (sent after
 * f1) is delivered after it, both in gen-1; every receipt matches. */
static void later_steer_waits_behind_a_followup_in_the_same_generation(void **state) {
    (void)state;
    dh d;
    gt g;
    gt_setup(&d, &g, TOOL_ROWS("{\"text\":\"first answer\"},{\"text\":\"second answer\"}"),
             "gorder");
    g.action = followup_then_steer;
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(count(&g, "generation.started"), 1);
    assert_string_equal(ids(nth(&g, "generation.finished", 0), "input_ids"), "q1,f1,s1");
    assert_string_equal(str(nth(&g, "input.delivered", 1), "input_id"), "f1");
    assert_string_equal(str(nth(&g, "input.delivered", 2), "input_id"), "s1");
    check_receipts(&g);
    gt_teardown(&d, &g);
}

static void send_on_turn_end(dh *d, const json_t *ev, bool durable) {
    if (is(ev, durable, true, "turn/end") && d->count++ == 0)
        send_id(d, "late", "after the last request", WEIR_SEND_FOLLOWUP);
}

/* Generation scenario 11: input submitted from a completion hook (the
 * turn's end is logged) is delivered in the next turn, exactly once, as a
 * new generation (it arrived after the first one closed). */
static void input_from_a_completion_hook_starts_the_next_generation(void **state) {
    (void)state;
    dh d;
    gt g;
    gt_setup(&d, &g,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"one\"},{\"text\":\"two\",\"expect\":{\"message_contains\":"
             "\"after the last request\"}}]}}]",
             "gcomplete");
    g.action = send_on_turn_end;
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(count(&g, "generation.started"), 2);
    assert_string_equal(ids(nth(&g, "generation.finished", 0), "input_ids"), "q1");
    assert_string_equal(str(nth(&g, "generation.started", 1), "initial_input_id"), "late");
    assert_string_equal(ids(nth(&g, "generation.finished", 1), "input_ids"), "late");
    assert_int_equal(dh_count(&d, "user/message"), 2);
    check_receipts(&g);
    gt_teardown(&d, &g);
}

static void service_on_final_step(dh *d, const json_t *ev, bool durable) {
    if (!is(ev, durable, true, "assistant/message") || d->count++ != 1)
        return;
    json_t *m = json_pack("{s:s, s:s, s:{s:s, s:s}}", "role", "user", "content",
                          "Background job job-9 finished", "source", "kind", "service", "name",
                          "jobs");
    assert_int_equal(weir_agent_send(d->agent, m, WEIR_SEND_STEER, "job-9", NULL), WEIR_OK);
    json_decref(m);
}

/* "Job/service callbacks alone do not require that continuation": the
 * result that arrives in gen-1's final step starts gen-2. */
static void a_service_result_alone_starts_a_new_generation(void **state) {
    (void)state;
    dh d;
    gt g;
    gt_setup(&d, &g, TOOL_ROWS("{\"text\":\"started\"},{\"text\":\"job seen\"}"), "gservice");
    g.action = service_on_final_step;
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *f = nth(&g, "generation.finished", 0);
    assert_string_equal(ids(f, "input_ids"), "q1");
    assert_string_equal(str(f, "text"), "started");
    const json_t *s2 = nth(&g, "generation.started", 1);
    assert_string_equal(str(s2, "initial_input_id"), "job-9");
    assert_string_equal(str(nth(&g, "input.delivered", 1), "delivery"), "new_turn");
    check_receipts(&g);
    gt_teardown(&d, &g);
}

/* ------------------------------------------------------------------------ */
/* Cancellation and known no-effects                                         */
/* ------------------------------------------------------------------------ */

typedef struct later {
    dh *d;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go;
} later;

static void *cancel_when_told(void *arg) {
    later *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->go)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
    assert_int_equal(weir_agent_cancel(l->d->agent, "user", false), WEIR_OK);
    return NULL;
}

static void go_on_claim(dh *d, const json_t *ev, bool durable) {
    gt *g = d->ud;
    if (!is(ev, durable, false, "agent/inbox/claimed"))
        return;
    later *l = g->ud;
    pthread_mutex_lock(&l->mu);
    l->go = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* The pre-step listener waits on the call's signal, and fails when the
 * cancel ends the wait ("wait_fail"); a listener that answers instead
 * ("wait").  Either way: generation.detached (not failed), no step, and
 * the claimed input is input.discarded (canceled), not input.unknown. */
static void cancel_during_pre_step_detaches_without_a_step(void **state) {
    (void)state;
    static const char *const actions[] = {"wait_fail", "wait"};
    for (int k = 0; k < 2; k++) {
        char rows[1024], session[32];
        snprintf(rows, sizeof rows,
                 "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
                 "[{\"text\":\"never\"}]}},{\"id\":\"gate\",\"plugin\":\"drvtest-hooks\","
                 "\"config\":{\"pre_step\":{\"action\":\"%s\"}}}]",
                 actions[k]);
        snprintf(session, sizeof session, "gprestep%d", k);
        dh d;
        gt g;
        gt_setup(&d, &g, rows, session);
        later l = {&d, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
        g.action = go_on_claim;
        g.ud = &l;
        send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, cancel_when_told, &l), 0);
        dh_run(&d);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_string_equal(types(&g), "input.queued,generation.started,input.discarded,"
                                       "generation.detached");
        const json_t *x = nth(&g, "input.discarded", 0);
        assert_string_equal(str(x, "input_id"), "q1");
        assert_string_equal(str(x, "reason"), "canceled");
        assert_string_equal(str(x, "generation_id"), "gen-1");
        assert_int_equal(dh_count(&d, "step/start"), 0);
        assert_int_equal(dh_count(&d, "agent/error"), 0);
        gt_teardown(&d, &g);
    }
}

/* An identical resubmission: input.acknowledged with the generation that
 * took it; nothing is queued or delivered twice. */
static void resubmission_is_acknowledged_with_its_generation(void **state) {
    (void)state;
    dh d;
    gt g;
    gt_setup(&d, &g,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a\"}]}}]",
             "gack");
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP); /* queued: no generation yet */
    dh_run(&d);
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    assert_string_equal(types(&g), "input.queued,input.acknowledged,generation.started,"
                                   "input.delivered,assistant.message,generation.finished,"
                                   "input.acknowledged");
    const json_t *a0 = nth(&g, "input.acknowledged", 0);
    assert_true(json_is_true(json_object_get(a0, "duplicate")));
    assert_null(json_object_get(a0, "generation_id"));
    const json_t *a1 = nth(&g, "input.acknowledged", 1);
    assert_string_equal(str(a1, "input_id"), "q1");
    assert_string_equal(str(a1, "generation_id"), "gen-1");
    gt_teardown(&d, &g);
}

/* ------------------------------------------------------------------------ */
/* Anchored steering                                                         */
/* ------------------------------------------------------------------------ */

typedef struct anchored {
    bool keep_cancel; /* cancel with keep_inbox right after the anchored send */
    int turn_seen;    /* weir_generation_tracker_turn(gen-1) during the turn */
    int done;
} anchored;

static void anchor_at_tool_call(dh *d, const json_t *ev, bool durable) {
    gt *g = d->ud;
    anchored *a = g->ud;
    if (!is(ev, durable, true, "tool/call") || a->done++)
        return;
    a->turn_seen = weir_generation_tracker_turn(g->t, "gen-1");
    send_id(d, "f1", "queued followup", WEIR_SEND_FOLLOWUP);
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", "anchored steer");
    assert_int_equal(weir_agent_steer_turn(d->agent, m, a->turn_seen, "a1", NULL), WEIR_OK);
    json_decref(m);
    if (a->keep_cancel)
        assert_int_equal(weir_agent_cancel(d->agent, "user", true), WEIR_OK);
}

/* Anchored steering joins its generation at the next request boundary
 * (its receipt comes at once: the delivery is known), ahead of a queued
 * followup; after the generation closed, the tracker has no turn for it.
 * When the turn ends first (a cancel keeping the inbox), it is held, never
 * delivered later. */
static void anchored_steering_joins_its_generation_or_is_held(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        dh d;
        gt g;
        gt_setup(&d, &g,
                 "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":"
                 "true,\"replies\":[{\"text\":\"working\",\"tool_calls\":[{\"id\":\"c1\","
                 "\"name\":\"lookup\",\"arguments\":{}}]},{\"text\":\"done\"}]}},"
                 "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
                 "[{\"name\":\"lookup\"}]}}]",
                 k ? "ganchorheld" : "ganchor");
        anchored a = {k == 1, 0, 0};
        g.action = anchor_at_tool_call;
        g.ud = &a;
        send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
        dh_run(&d);
        assert_int_equal(a.turn_seen, 1);
        assert_int_equal(weir_generation_tracker_turn(g.t, "gen-1"), 0);
        assert_int_equal(weir_generation_tracker_turn(g.t, "gen-9"), 0);
        if (k == 0) {
            const json_t *q = nth(&g, "input.queued", 1);
            assert_string_equal(str(q, "input_id"), "a1");
            assert_string_equal(str(q, "delivery"), "request_boundary");
            assert_string_equal(str(q, "generation_id"), "gen-1");
            /* a1 at turn 1's next boundary, then f1 (turn 2) continues gen-1 */
            assert_string_equal(ids(nth(&g, "generation.finished", 0), "input_ids"), "q1,a1,f1");
            check_receipts(&g);
        } else {
            const json_t *h = nth(&g, "input.held", 0);
            assert_string_equal(str(h, "input_id"), "a1");
            assert_string_equal(str(h, "reason"), "turn_ended");
            assert_string_equal(str(h, "generation_id"), "gen-1");
            assert_string_equal(str(nth(&g, "generation.detached", 0), "generation_id"),
                                "gen-1");
            /* the kept followup ran as gen-2; a1 never */
            assert_string_equal(ids(nth(&g, "generation.finished", 0), "input_ids"), "f1");
            for (int i = 0; i < count(&g, "input.delivered"); i++)
                assert_string_not_equal(str(nth(&g, "input.delivered", i), "input_id"), "a1");
        }
        gt_teardown(&d, &g);
    }
}

/* ------------------------------------------------------------------------ */
/* Native steering                                                           */
/* ------------------------------------------------------------------------ */

static void steer_at_first_chunk(dh *d, const json_t *ev, bool durable) {
    if (!is(ev, durable, false, "agent/assistant-stream"))
        return;
    const json_t *frame = json_object_get(json_object_get(ev, "data"), "frame");
    if (strcmp(json_string_value(json_object_get(frame, "type")), "chunk") == 0 &&
        d->count++ == 0)
        send_id(d, "n1", "native correction", WEIR_SEND_STEER);
}

#define NATIVE(answer)                                                                         \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"steer_live\":\""   \
    answer "\",\"replies\":[{\"text\":\"working\",\"chunks\":3,\"tool_calls\":[{\"id\":"      \
    "\"c1\",\"name\":\"lookup\",\"arguments\":{}}]},{\"text\":\"finished\",\"chunks\":3}]}},"  \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                    \
    "[{\"name\":\"lookup\"}]}}]"

/* Generation scenarios 1 and 6 on a live provider: acceptance puts the
 * id in accepted_input_ids only; application (at the next boundary) moves
 * it to input_ids. */
static void native_acceptance_is_not_application(void **state) {
    (void)state;
    dh d;
    gt g;
    gt_setup(&d, &g, NATIVE("accept"), "gnativeaccept");
    g.action = steer_at_first_chunk;
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(str(nth(&g, "steering.accepted", 0), "input_id"), "n1");
    assert_string_equal(str(nth(&g, "steering.accepted", 0), "generation_id"), "gen-1");
    assert_int_equal(count(&g, "steering.applied"), 0);
    const json_t *f = nth(&g, "generation.finished", 0);
    assert_string_equal(ids(f, "input_ids"), "q1");
    assert_string_equal(ids(f, "accepted_input_ids"), "n1");
    assert_int_equal(count(&g, "input.queued"), 1); /* never on the queue */
    gt_teardown(&d, &g);

    gt_setup(&d, &g, NATIVE("apply"), "gnativeapply");
    g.action = steer_at_first_chunk;
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(ids(nth(&g, "assistant.message", 0), "accepted_input_ids"), "n1");
    assert_string_equal(ids(nth(&g, "assistant.message", 0), "input_ids"), "q1");
    assert_string_equal(str(nth(&g, "steering.applied", 0), "input_id"), "n1");
    f = nth(&g, "generation.finished", 0);
    assert_string_equal(ids(f, "input_ids"), "q1,n1");
    assert_string_equal(ids(f, "accepted_input_ids"), "");
    gt_teardown(&d, &g);
}

/* A refusal: the request-boundary queue, with matching receipts.  An error:
 * input.unknown with route "native", never queued, never delivered. */
static void native_refusal_and_error(void **state) {
    (void)state;
    dh d;
    gt g;
    gt_setup(&d, &g, NATIVE("refuse"), "gnativerefuse");
    g.action = steer_at_first_chunk;
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(count(&g, "steering.accepted"), 0);
    const json_t *q = nth(&g, "input.queued", 1);
    assert_string_equal(str(q, "input_id"), "n1");
    assert_string_equal(str(q, "delivery"), "request_boundary");
    assert_string_equal(ids(nth(&g, "generation.finished", 0), "input_ids"), "q1,n1");
    check_receipts(&g);
    gt_teardown(&d, &g);

    gt_setup(&d, &g, NATIVE("throw"), "gnativethrow");
    g.action = steer_at_first_chunk;
    send_id(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *u = nth(&g, "input.unknown", 0);
    assert_string_equal(str(u, "input_id"), "n1");
    assert_string_equal(str(u, "route"), "native");
    assert_string_equal(str(u, "generation_id"), "gen-1");
    assert_int_equal(count(&g, "input.queued"), 1);
    const json_t *f = nth(&g, "generation.finished", 0);
    assert_string_equal(ids(f, "input_ids"), "q1");
    assert_string_equal(ids(f, "accepted_input_ids"), "");
    gt_teardown(&d, &g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(followup_queued_while_running_continues_the_generation),
        cmocka_unit_test(later_steer_waits_behind_a_followup_in_the_same_generation),
        cmocka_unit_test(input_from_a_completion_hook_starts_the_next_generation),
        cmocka_unit_test(a_service_result_alone_starts_a_new_generation),
        cmocka_unit_test(cancel_during_pre_step_detaches_without_a_step),
        cmocka_unit_test(resubmission_is_acknowledged_with_its_generation),
        cmocka_unit_test(anchored_steering_joins_its_generation_or_is_held),
        cmocka_unit_test(native_acceptance_is_not_application),
        cmocka_unit_test(native_refusal_and_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
