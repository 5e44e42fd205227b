/*
 * tests/unit/test_driver_steering.c - input order and steering (docs/generations.md,
 * the generation contract): later input never overtakes
 * an earlier boundary batch; a background job's result (a service message)
 * alone does not continue a turn; anchored steering (weir_agent_steer_turn)
 * is taken in its turn or held, never later; native steering through
 * provider-scripted's steer_live (refuse, apply, accept, throw, fallback);
 * identical resubmissions are acknowledged; the caps; on_wake.
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

#include "agent.h"
#include "driver_harness.h"
#include "testutil.h"

static const char *text_of(const json_t *event) {
    const json_t *m = json_object_get(json_object_get(event, "data"), "message");
    return json_string_value(json_object_get(json_array_get(json_object_get(m, "content"), 0),
                                             "text"));
}

static int turn_of(const json_t *event) {
    return (int)json_integer_value(json_object_get(json_object_get(event, "data"), "turn"));
}

static int step_of(const json_t *event) {
    return (int)json_integer_value(json_object_get(json_object_get(event, "data"), "step"));
}

static const char *reason_kind(const dh *d, int n) {
    const json_t *e = dh_find(d, "turn/end", n);
    assert_non_null(e);
    return json_string_value(
        json_object_get(json_object_get(json_object_get(e, "data"), "reason"), "kind"));
}

static int send_id(dh *d, const char *id, const char *text, weir_send_mode mode,
                   weir_error *err) {
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", text);
    int rc = weir_agent_send(d->agent, m, mode, id, err);
    json_decref(m);
    return rc;
}

/* The n-th recorded live event of `type` (any), or NULL. */
static const json_t *find_live(const dh *d, const char *type, int n) {
    size_t i;
    const json_t *e;
    json_array_foreach(d->events, i, e) {
        if (!json_object_get(e, "seq") &&
            !strcmp(json_string_value(json_object_get(e, "type")), type) && n-- == 0)
            return e;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Order                                                                     */
/* ------------------------------------------------------------------------ */

/* On the first assistant/message: a followup, then a steer. */
static void followup_then_steer(dh *d, const json_t *ev, bool durable) {
    if (!durable || strcmp(json_string_value(json_object_get(ev, "type")), "assistant/message") ||
        d->count++ != 0)
        return;
    assert_int_equal(send_id(d, "f1", "the followup", WEIR_SEND_FOLLOWUP, NULL), WEIR_OK);
    assert_int_equal(send_id(d, "s1", "the later steer", WEIR_SEND_STEER, NULL), WEIR_OK);
}

/* Today's bug: the steer sent after a followup was delivered first (at the
 * running turn's next boundary).  It waits behind the followup now. */
static void a_steer_sent_after_a_followup_never_overtakes_it(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"working\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
             "\"arguments\":{}}]},"
             "{\"text\":\"first answer\"},{\"text\":\"second answer\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\"}]}}]",
             NULL);
    d.on_event = followup_then_steer;
    dh_open(&d, "order");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 2);
    assert_int_equal(dh_count(&d, "user/message"), 3);
    /* turn 1: go, then its tool step with no new input; turn 2: f1 then s1 */
    assert_string_equal(text_of(dh_find(&d, "user/message", 0)), "go");
    assert_string_equal(text_of(dh_find(&d, "user/message", 1)), "the followup");
    assert_string_equal(text_of(dh_find(&d, "user/message", 2)), "the later steer");
    assert_int_equal(turn_of(dh_find(&d, "user/message", 1)), 2);
    assert_int_equal(turn_of(dh_find(&d, "user/message", 2)), 2);
    assert_int_equal(dh_count(&d, "step/start"), 3);
    dh_teardown(&d);
}

/* On the first assistant/message of the final step: a service message (as
 * a background job's result arrives) and nothing else. */
static void service_on_final_step(dh *d, const json_t *ev, bool durable) {
    if (!durable || strcmp(json_string_value(json_object_get(ev, "type")), "assistant/message") ||
        d->count++ != 1)
        return;
    json_t *m = json_pack("{s:s, s:s, s:{s:s, s:s}}", "role", "user", "content",
                          "Background job job-9 finished", "source", "kind", "service", "name",
                          "jobs");
    assert_int_equal(weir_agent_send(d->agent, m, WEIR_SEND_STEER, "job-9", NULL), WEIR_OK);
    json_decref(m);
}

/* A job's or service's result alone does not keep a finished turn going
 * (docs/generations.md): it starts the next turn instead of a third step. */
static void a_service_result_alone_does_not_continue_the_turn(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"starting\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
             "\"arguments\":{}}]},{\"text\":\"started\"},"
             "{\"text\":\"job seen\",\"expect\":{\"message_contains\":\"job-9\"}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\"}]}}]",
             NULL);
    d.on_event = service_on_final_step;
    dh_open(&d, "servicealone");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 2);
    const json_t *um = dh_find(&d, "user/message", 1);
    assert_string_equal(text_of(um), "Background job job-9 finished");
    assert_int_equal(turn_of(um), 2);
    assert_int_equal(step_of(um), 1);
    /* turn 1 spent two steps, not three */
    assert_int_equal(step_of(dh_find(&d, "step/end", 1)), 2);
    assert_int_equal(turn_of(dh_find(&d, "step/end", 1)), 1);
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* Anchored steering                                                         */
/* ------------------------------------------------------------------------ */

typedef struct anchor_probe {
    int sent;          /* anchored steers sent */
    int late_rc;       /* status of the one sent after the turn ended */
    bool cancel_keep;  /* cancel (keep_inbox) right after sending */
} anchor_probe;

/* At the first tool/call: a followup, then a steer anchored to this turn
 * (it bypasses the followup's barrier).  At turn/end of turn 1: another
 * anchored to turn 1 (refused: the turn is over). */
static void anchored_observer(dh *d, const json_t *ev, bool durable) {
    anchor_probe *p = d->ud;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (durable && !strcmp(type, "tool/call") && p->sent == 0) {
        p->sent++;
        assert_int_equal(send_id(d, "f1", "queued followup", WEIR_SEND_FOLLOWUP, NULL), WEIR_OK);
        json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", "anchored steer");
        assert_int_equal(weir_agent_steer_turn(d->agent, m, 1, "a1", NULL), WEIR_OK);
        json_decref(m);
        if (p->cancel_keep)
            assert_int_equal(weir_agent_cancel(d->agent, "user", true), WEIR_OK);
    } else if (durable && !strcmp(type, "turn/end") && turn_of(ev) == 1) {
        json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", "too late");
        weir_error err;
        p->late_rc = weir_agent_steer_turn(d->agent, m, 1, "a2", &err);
        json_decref(m);
    }
}

#define ANCHOR_ROWS                                                                            \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"       \
    "\"replies\":[{\"text\":\"working\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","  \
    "\"arguments\":{}}]},{\"text\":\"done\"}]}},"                                              \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                    \
    "[{\"name\":\"lookup\"}]}}]"

static void anchored_steer_joins_its_turn_ahead_of_a_queued_followup(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ANCHOR_ROWS, NULL);
    anchor_probe p = {0, 0, false};
    d.on_event = anchored_observer;
    d.ud = &p;
    dh_open(&d, "anchored");
    /* not running: refused */
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", "no turn");
    weir_error err;
    assert_int_equal(weir_agent_steer_turn(d.agent, m, 1, "a0", &err), WEIR_E_STATE);
    assert_int_equal(weir_agent_steer_turn(d.agent, m, 0, "a0", &err), WEIR_E_INVAL);
    json_decref(m);
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *a1 = dh_find(&d, "user/message", 1);
    assert_string_equal(text_of(a1), "anchored steer");
    assert_int_equal(turn_of(a1), 1);
    assert_int_equal(step_of(a1), 2);
    const json_t *f1 = dh_find(&d, "user/message", 2);
    assert_string_equal(text_of(f1), "queued followup");
    assert_int_equal(turn_of(f1), 2);
    assert_int_equal(p.late_rc, WEIR_E_STATE);
    /* the splice says which turn the input is anchored to */
    const json_t *sp = NULL;
    for (int i = 0; (sp = dh_find(&d, "agent/inbox/spliced", i)); i++)
        if (json_object_get(json_object_get(sp, "data"), "anchor_turn"))
            break;
    assert_non_null(sp);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sp, "data"),
                                                        "anchor_turn")),
                     1);
    dh_teardown(&d);
}

/* The turn is cancelled with keep_inbox before it takes the anchored steer:
 * the steer is held (removed durably), never delivered in the next turn. */
static void anchored_steer_is_held_when_its_turn_ends_first(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, ANCHOR_ROWS, NULL);
    anchor_probe p = {0, 0, true};
    d.on_event = anchored_observer;
    d.ud = &p;
    dh_open(&d, "anchorheld");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "aborted");
    assert_int_equal(dh_count(&d, "agent/inbox/held"), 1);
    const json_t *held = find_live(&d, "agent/inbox/held", 0);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(held, "data"), "message"), "id")),
        "a1");
    /* the kept followup ran in turn 2; the anchored steer never did */
    for (int i = 0; dh_find(&d, "user/message", i); i++)
        assert_string_not_equal(text_of(dh_find(&d, "user/message", i)), "anchored steer");
    assert_string_equal(text_of(dh_find(&d, "user/message", 1)), "queued followup");
    /* and a reopen does not bring it back */
    dh_close(&d);
    dh_open(&d, "anchorheld");
    assert_int_equal(weir__inbox_count(d.agent->e.inbox, true), 0);
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* Native steering                                                           */
/* ------------------------------------------------------------------------ */

/* Send steer `id` at the first chunk frame of stream number `nth` (0-based). */
typedef struct native_probe {
    int streams;       /* start frames seen */
    const char *at[4]; /* input id to steer at stream k (NULL: none) */
    int rcs[4];
    bool followup;     /* send it as a followup, not a steer */
} native_probe;

static void steer_in_stream(dh *d, const json_t *ev, bool durable) {
    native_probe *p = d->ud;
    if (durable ||
        strcmp(json_string_value(json_object_get(ev, "type")), "agent/assistant-stream") != 0)
        return;
    const json_t *frame = json_object_get(json_object_get(ev, "data"), "frame");
    const char *ft = json_string_value(json_object_get(frame, "type"));
    if (!strcmp(ft, "start")) {
        p->streams++;
        return;
    }
    int k = p->streams - 1;
    if (strcmp(ft, "chunk") != 0 || k < 0 || k >= 4 || !p->at[k])
        return;
    const char *id = p->at[k];
    p->at[k] = NULL;
    char text[64];
    snprintf(text, sizeof text, "native %s", id);
    p->rcs[k] = send_id(d, id, text, p->followup ? WEIR_SEND_FOLLOWUP : WEIR_SEND_STEER, NULL);
}

#define NATIVE_ROWS(answers)                                                                   \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"steer_live\":"      \
    answers ",\"replies\":["                                                                    \
    "{\"text\":\"working on it\",\"chunks\":3,\"tool_calls\":[{\"id\":\"c1\",\"name\":"      \
    "\"lookup\",\"arguments\":{}}]},"                                                          \
    "{\"text\":\"second\",\"chunks\":3},{\"text\":\"third\",\"chunks\":3}]}},"                 \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                    \
    "[{\"name\":\"lookup\"}]}}]"

/* false: a definite refusal; the steer goes to the request-boundary queue
 * and is delivered as user input at the next step. */
static void native_refusal_falls_back_to_the_request_boundary(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, NATIVE_ROWS("\"refuse\""), NULL);
    native_probe p = {0, {"n1", NULL, NULL, NULL}, {0}, false};
    d.on_event = steer_in_stream;
    d.ud = &p;
    dh_open(&d, "nativerefuse");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(p.rcs[0], WEIR_OK);
    assert_null(find_live(&d, "steering/owned", 0));
    const json_t *um = dh_find(&d, "user/message", 1);
    assert_string_equal(text_of(um), "native n1");
    assert_int_equal(step_of(um), 2);
    dh_teardown(&d);
}

/* true + accepted at once + applied at the next boundary: the input never
 * enters the inbox; it is logged as user/message where the provider
 * applied it (inside the next step, before that step's answer), and a
 * resubmission is acknowledged, not sent again. */
static void native_application_is_logged_where_it_applied(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, NATIVE_ROWS("\"apply\""), NULL);
    native_probe p = {0, {"n1", NULL, NULL, NULL}, {0}, false};
    d.on_event = steer_in_stream;
    d.ud = &p;
    dh_open(&d, "nativeapply");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(p.rcs[0], WEIR_OK);
    assert_non_null(find_live(&d, "steering/owned", 0));
    assert_non_null(find_live(&d, "steering/accepted", 0));
    assert_non_null(find_live(&d, "steering/applied", 0));
    /* never queued: no splice carries it */
    for (int i = 0; dh_find(&d, "agent/inbox/spliced", i); i++) {
        char *s = json_dumps(dh_find(&d, "agent/inbox/spliced", i), JSON_COMPACT);
        assert_null(strstr(s, "native n1"));
        free(s);
    }
    const json_t *um = dh_find(&d, "user/message", 1);
    assert_string_equal(text_of(um), "native n1");
    assert_int_equal(step_of(um), 2);
    /* after step 2's request (recorded before the provider ran), before its answer */
    json_int_t req2 = json_integer_value(json_object_get(dh_find(&d, "drvtest/request", 1), "seq"));
    json_int_t useq = json_integer_value(json_object_get(um, "seq"));
    json_int_t aseq = json_integer_value(json_object_get(dh_find(&d, "assistant/message", 1),
                                                         "seq"));
    assert_true(req2 < useq && useq < aseq);
    weir_error err;
    assert_int_equal(send_id(&d, "n1", "native n1", WEIR_SEND_STEER, &err), WEIR_OK);
    assert_non_null(find_live(&d, "agent/inbox/acknowledged", 0));
    dh_teardown(&d); /* checks the log: every request equals its prefix's derive */
}

/* An error from steer_live: the effect is unknown; nothing is queued and
 * the input is reported unknown (route native); a resubmission of the same
 * id is acknowledged, never replayed.  Then "own": taken, never reported.
 * Then "fallback": taken, refused at the next boundary by the provider
 * itself, and queued then. */
static void native_error_is_unknown_and_never_queued(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, NATIVE_ROWS("[\"throw\",\"own\",\"fallback\"]"), NULL);
    native_probe p = {0, {"n1", "n2", NULL, NULL}, {0}, false};
    d.on_event = steer_in_stream;
    d.ud = &p;
    dh_open(&d, "nativethrow");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(p.rcs[0], WEIR_OK);
    assert_int_equal(p.rcs[1], WEIR_OK);
    const json_t *u = find_live(&d, "steering/unknown", 0);
    assert_non_null(u);
    const json_t *ud = json_object_get(u, "data");
    assert_string_equal(json_string_value(json_object_get(ud, "input_id")), "n1");
    assert_string_equal(json_string_value(json_object_get(ud, "route")), "native");
    assert_non_null(strstr(json_string_value(json_object_get(ud, "error")), "scripted"));
    assert_non_null(find_live(&d, "steering/owned", 0)); /* n2 */
    /* neither reached the log */
    assert_int_equal(dh_count(&d, "user/message"), 1);
    weir_error err;
    assert_int_equal(send_id(&d, "n1", "native n1", WEIR_SEND_STEER, &err), WEIR_OK);
    assert_int_equal(send_id(&d, "n1", "other text", WEIR_SEND_STEER, &err), WEIR_E_DUPLICATE);
    assert_int_equal(dh_count(&d, "agent/inbox/spliced"), 2); /* go: queued, claimed */
    dh_teardown(&d);

    /* "fallback": the provider owns it, then refuses it at the next
     * boundary: the core queues it, and the step after takes it */
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"steer_live\":"
             "\"fallback\",\"replies\":[{\"text\":\"one\",\"chunks\":3,\"tool_calls\":[{\"id\":"
             "\"c1\",\"name\":\"lookup\",\"arguments\":{}}]},{\"text\":\"two\",\"chunks\":3},"
             "{\"text\":\"three\",\"expect\":{\"message_contains\":\"native n3\"}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\"}]}}]",
             NULL);
    native_probe q = {0, {"n3", NULL, NULL, NULL}, {0}, false};
    d.on_event = steer_in_stream;
    d.ud = &q;
    dh_open(&d, "nativefallback");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_non_null(find_live(&d, "steering/refused", 0));
    const json_t *um = dh_find(&d, "user/message", 1);
    assert_string_equal(text_of(um), "native n3");
    assert_int_equal(step_of(um), 3);
    dh_teardown(&d);
}

/* Ordinary input goes to steer_live first, whatever its mode: a followup
 * sent while the provider streams, with nothing queued, is offered too.
 * Applied, it joins the running turn where the provider applied it (no
 * splice, no second turn); refused at once or later by the provider, it
 * keeps its mode: the next turn takes it. */
static void native_is_offered_a_followup_too(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, NATIVE_ROWS("\"apply\""), NULL);
    native_probe p = {0, {"f1", NULL, NULL, NULL}, {0}, true};
    d.on_event = steer_in_stream;
    d.ud = &p;
    dh_open(&d, "nativefollowup");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(p.rcs[0], WEIR_OK);
    assert_non_null(find_live(&d, "steering/owned", 0));
    assert_non_null(find_live(&d, "steering/applied", 0));
    assert_int_equal(dh_count(&d, "turn/start"), 1);
    assert_int_equal(dh_count(&d, "agent/inbox/spliced"), 2); /* go: queued, claimed */
    const json_t *um = dh_find(&d, "user/message", 1);
    assert_string_equal(text_of(um), "native f1");
    assert_int_equal(turn_of(um), 1);
    assert_int_equal(step_of(um), 2);
    dh_teardown(&d);

    const char *answers[] = {"\"refuse\"", "\"fallback\""};
    for (int i = 0; i < 2; i++) {
        /* "fallback" refuses at the provider's next stream call: step 2 */
        char rows[1024];
        snprintf(rows, sizeof rows,
                 "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
                 "\"steer_live\":%s,\"replies\":[{\"text\":\"one\",\"chunks\":3,"
                 "\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\",\"arguments\":{}}]},"
                 "{\"text\":\"two\"},"
                 "{\"text\":\"three\",\"expect\":{\"message_contains\":\"native f2\"}}]}},"
                 "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
                 "[{\"name\":\"lookup\"}]}}]",
                 answers[i]);
        dh_setup(&d, rows, NULL);
        native_probe q = {0, {"f2", NULL, NULL, NULL}, {0}, true};
        d.on_event = steer_in_stream;
        d.ud = &q;
        dh_open(&d, i ? "nativefollowupfallback" : "nativefollowuprefuse");
        dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
        dh_run(&d);
        assert_int_equal(q.rcs[0], WEIR_OK);
        assert_non_null(find_live(&d, i ? "steering/owned" : "agent/inbox/inserted", 0));
        assert_int_equal(dh_count(&d, "turn/start"), 2);
        um = dh_find(&d, "user/message", 1);
        assert_string_equal(text_of(um), "native f2");
        assert_int_equal(turn_of(um), 2);
        assert_int_equal(step_of(um), 1);
        assert_string_equal(reason_kind(&d, 1), "completed");
        dh_teardown(&d);
    }
}

/* Natively applied input passes through agent/pre-step as queued input
 * does (args native:true): a rewrite policy rewrites what is logged (and
 * so what every later request carries), a reject drops it (nothing logged,
 * steering/discarded, the turn goes on), and the id stays accepted. */
#define NATIVE_POLICY_ROWS(pre_step)                                                           \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"steer_live\":"     \
    "\"apply\",\"replies\":["                                                                  \
    "{\"text\":\"working on it\",\"chunks\":3,\"tool_calls\":[{\"id\":\"c1\",\"name\":"      \
    "\"lookup\",\"arguments\":{}}]},"                                                          \
    "{\"text\":\"second\",\"chunks\":3}]}},"                                                  \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                    \
    "[{\"name\":\"lookup\"}]}},"                                                               \
    "{\"id\":\"policy\",\"plugin\":\"drvtest-hooks\",\"config\":{\"pre_step\":" pre_step "}}]"

static void native_input_passes_through_pre_step(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, NATIVE_POLICY_ROWS("{\"action\":\"rewrite\",\"text\":\"[redacted]\"}"), NULL);
    native_probe p = {0, {"n1", NULL, NULL, NULL}, {0}, false};
    d.on_event = steer_in_stream;
    d.ud = &p;
    dh_open(&d, "nativepolicy");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(p.rcs[0], WEIR_OK);
    assert_non_null(find_live(&d, "steering/applied", 0));
    /* the queued input and the native one alike */
    assert_string_equal(text_of(dh_find(&d, "user/message", 0)), "[redacted]");
    const json_t *um = dh_find(&d, "user/message", 1);
    assert_string_equal(text_of(um), "[redacted]");
    assert_int_equal(step_of(um), 2);
    weir_error err;
    assert_int_equal(send_id(&d, "n1", "native n1", WEIR_SEND_STEER, &err), WEIR_OK);
    assert_non_null(find_live(&d, "agent/inbox/acknowledged", 0));
    dh_teardown(&d);

    dh_setup(&d, NATIVE_POLICY_ROWS("{\"action\":\"reject\",\"native\":true}"), NULL);
    native_probe q = {0, {"n2", NULL, NULL, NULL}, {0}, false};
    d.on_event = steer_in_stream;
    d.ud = &q;
    dh_open(&d, "nativereject");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(q.rcs[0], WEIR_OK);
    assert_null(find_live(&d, "steering/applied", 0));
    const json_t *dis = find_live(&d, "steering/discarded", 0);
    assert_non_null(dis);
    assert_string_equal(json_string_value(json_object_get(json_object_get(dis, "data"), "reason")),
                        "rejected");
    assert_int_equal(dh_count(&d, "user/message"), 1); /* go only */
    assert_string_equal(reason_kind(&d, 0), "completed");
    assert_int_equal(send_id(&d, "n2", "native n2", WEIR_SEND_STEER, &err), WEIR_OK);
    assert_non_null(find_live(&d, "agent/inbox/acknowledged", 0));
    dh_teardown(&d);
}

/* A steer is offered natively only when nothing is queued before it: with a
 * followup queued, it waits behind it (no steer_live call). */
static void native_is_not_offered_past_queued_input(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, NATIVE_ROWS("\"apply\""), NULL);
    native_probe p = {0, {"n1", NULL, NULL, NULL}, {0}, false};
    d.on_event = steer_in_stream;
    d.ud = &p;
    dh_open(&d, "nativebarrier");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_send(&d, "queued before", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_null(find_live(&d, "steering/owned", 0));
    assert_string_equal(text_of(dh_find(&d, "user/message", 1)), "queued before");
    assert_string_equal(text_of(dh_find(&d, "user/message", 2)), "native n1");
    dh_teardown(&d);
}

/* ------------------------------------------------------------------------ */
/* Receipts and caps                                                         */
/* ------------------------------------------------------------------------ */

static void identical_resubmission_is_acknowledged_live(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a\"}]}}]",
             NULL);
    dh_open(&d, "ack");
    weir_error err;
    assert_int_equal(send_id(&d, "in-1", "same", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    assert_null(find_live(&d, "agent/inbox/acknowledged", 0));
    assert_int_equal(send_id(&d, "in-1", "same", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    const json_t *ack = find_live(&d, "agent/inbox/acknowledged", 0);
    assert_non_null(ack);
    assert_true(json_is_true(json_object_get(json_object_get(ack, "data"), "duplicate")));
    dh_run(&d);
    /* delivered, then sent again: still acknowledged, nothing queued */
    assert_int_equal(send_id(&d, "in-1", "same", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    assert_non_null(find_live(&d, "agent/inbox/acknowledged", 1));
    assert_int_equal(weir__inbox_count(d.agent->e.inbox, false), 0);
    dh_teardown(&d);
}

/* On the first chunk: a followup "x1", then a cancel that discards it. */
static void queue_then_cancel(dh *d, const json_t *ev, bool durable) {
    if (durable || d->count ||
        strcmp(json_string_value(json_object_get(ev, "type")), "agent/assistant-stream") != 0)
        return;
    const json_t *frame = json_object_get(json_object_get(ev, "data"), "frame");
    if (strcmp(json_string_value(json_object_get(frame, "type")), "chunk") != 0)
        return;
    d->count = 1;
    assert_int_equal(send_id(d, "x1", "later", WEIR_SEND_FOLLOWUP, NULL), WEIR_OK);
    assert_int_equal(weir_agent_cancel(d->agent, "user", false), WEIR_OK);
}

/* An id removed with an outcome stays accepted: a followup a cancel
 * discarded, sent again unchanged, is acknowledged and never delivered; so
 * after the stop fence (not E_STATE) and after a reopen. */
static void a_discarded_id_sent_again_is_acknowledged_not_replayed(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a long answer\",\"chunks\":4,\"chunk_delay_ms\":20},"
             "{\"text\":\"b\"}]}}]",
             NULL);
    d.on_event = queue_then_cancel;
    dh_open(&d, "discardedagain");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_non_null(find_live(&d, "agent/inbox/discarded", 0));
    weir_error err;
    assert_int_equal(send_id(&d, "x1", "later", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    assert_non_null(find_live(&d, "agent/inbox/acknowledged", 0));
    assert_int_equal(send_id(&d, "x1", "other", WEIR_SEND_FOLLOWUP, &err), WEIR_E_DUPLICATE);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 1); /* never delivered */
    dh_close(&d);
    dh_open(&d, "discardedagain");
    assert_int_equal(send_id(&d, "x1", "later", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    assert_non_null(find_live(&d, "agent/inbox/acknowledged", 1));
    weir__inbox_stop(d.agent->e.inbox); /* the shutdown's fence */
    assert_int_equal(send_id(&d, "x1", "later", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    assert_non_null(find_live(&d, "agent/inbox/acknowledged", 2));
    assert_int_equal(weir__inbox_count(d.agent->e.inbox, false), 0);
    dh_teardown(&d);
}

/* Each cap refuses with WEIR_E_LIMIT and a message that says which; nothing
 * is queued; resubmissions of accepted ids are still acknowledged. */
/* The public input calls check their agent before anything else. */
static void input_calls_refuse_a_null_agent(void **state) {
    (void)state;
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", "hi");
    weir_error err;
    assert_int_equal(weir_agent_send(NULL, m, WEIR_SEND_FOLLOWUP, NULL, &err), WEIR_E_INVAL);
    assert_int_equal(weir_agent_steer_turn(NULL, m, 1, NULL, &err), WEIR_E_INVAL);
    assert_int_equal(weir_agent_send_text(NULL, "hi", WEIR_SEND_STEER, &err), WEIR_E_INVAL);
    assert_int_equal(weir_agent_cancel(NULL, "user", false), WEIR_E_INVAL);
    json_decref(m);
}

static void caps_refuse_with_a_clear_error(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a\"}]}}]",
             "{\"max_input_chars\":10}");
    dh_open(&d, "caps");
    weir_error err;
    /* text: 10 characters pass (é is one), 11 do not */
    assert_int_equal(send_id(&d, "t1", "\xc3\xa9" "123456789", WEIR_SEND_INJECT, &err), WEIR_OK);
    assert_int_equal(send_id(&d, "t2", "12345678901", WEIR_SEND_INJECT, &err), WEIR_E_LIMIT);
    assert_non_null(strstr(err.text, "11 characters, the limit is 10 (agent.max_input_chars)"));
    /* queue: 128 at once */
    char id[32];
    for (int i = 1; i < WEIR_MAX_QUEUED_INPUTS; i++) {
        snprintf(id, sizeof id, "q%d", i);
        assert_int_equal(send_id(&d, id, "x", WEIR_SEND_INJECT, &err), WEIR_OK);
    }
    assert_int_equal(send_id(&d, "over", "x", WEIR_SEND_INJECT, &err), WEIR_E_LIMIT);
    assert_non_null(strstr(err.text, "128 inputs are queued, the limit is 128"));
    assert_int_equal(weir__inbox_count(d.agent->e.inbox, true), WEIR_MAX_QUEUED_INPUTS);
    assert_int_equal(send_id(&d, "q5", "x", WEIR_SEND_INJECT, &err), WEIR_OK); /* acknowledged */
    /* ids: an open agent takes 2000 new ones */
    weir_agent_cancel(d.agent, "user", false); /* idle: a no-op */
    d.agent->e.ids_accepted = WEIR_MAX_INPUT_IDS;
    assert_int_equal(send_id(&d, "fresh", "x", WEIR_SEND_FOLLOWUP, &err), WEIR_E_LIMIT);
    assert_non_null(strstr(err.text, "took 2000 input ids, its limit; reopen the session"));
    assert_int_equal(send_id(&d, "q7", "x", WEIR_SEND_INJECT, &err), WEIR_OK); /* acknowledged */
    /* reopening the session starts counting again (the queue is still full) */
    dh_close(&d);
    dh_open(&d, "caps");
    assert_int_equal(send_id(&d, "fresh", "x", WEIR_SEND_FOLLOWUP, &err), WEIR_E_LIMIT);
    assert_non_null(strstr(err.text, "inputs are queued"));
    dh_teardown(&d);
}

/* on_wake: every waking input, from any thread, and a background job's
 * result that arrives while no thread runs the driver. */
static void count_wake(void *ud) { __atomic_add_fetch((int *)ud, 1, __ATOMIC_SEQ_CST); }

/* Wait (bounded: 20 s) until *wakes exceeds `seen`; returns it. */
static int wait_wake(int *wakes, int seen) {
    for (int i = 0; i < 4000; i++) {
        int n = __atomic_load_n(wakes, __ATOMIC_SEQ_CST);
        if (n > seen)
            return n;
        usleep(5000);
    }
    fail_msg("no on_wake after %d", seen);
    return seen;
}

static void on_wake_fires_for_waking_work(void **state) {
    (void)state;
    char *dir = wt_tmpdir("wakejob");
    assert_non_null(dir);
    char gate[4200], rows[8192];
    snprintf(gate, sizeof gate, "%s/release", dir);
    snprintf(rows, sizeof rows,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"Starting.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"crawl\","
             "\"arguments\":{}}]},{\"text\":\"Queued.\"},{\"text\":\"Done.\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"crawl\",\"reply\":\"crawl result\",\"background\":true,"
             "\"wait_for_file\":\"%s\"}]}}]",
             gate);
    dh d;
    dh_setup(&d, rows, NULL);
    /* an agent of our own: on_wake counts */
    int wakes = 0;
    weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
    o.session_id = "wake";
    o.on_wake = count_wake;
    o.user_data = &wakes;
    weir_agent *a = NULL;
    weir_error err;
    assert_int_equal(weir_agent_open(d.host, &o, &a, &err), WEIR_OK);
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", "ctx");
    assert_int_equal(weir_agent_send(a, m, WEIR_SEND_INJECT, NULL, &err), WEIR_OK);
    json_decref(m);
    assert_int_equal(__atomic_load_n(&wakes, __ATOMIC_SEQ_CST), 0); /* inject: no */
    m = json_pack("{s:s, s:s}", "role", "user", "content", "go");
    assert_int_equal(weir_agent_send(a, m, WEIR_SEND_FOLLOWUP, NULL, &err), WEIR_OK);
    json_decref(m);
    int seen = wait_wake(&wakes, 0);
    assert_int_equal(weir_agent_run_until_idle(a, &err), WEIR_OK);
    json_t *active = weir_agent_active_jobs(a);
    assert_int_equal(json_array_size(active), 1);
    json_decref(active);
    /* the job finishes while no thread runs the driver: the embedder is told */
    seen = __atomic_load_n(&wakes, __ATOMIC_SEQ_CST);
    assert_int_equal(wt_write_file(gate, "go"), 0);
    wait_wake(&wakes, seen);
    assert_int_equal(weir_agent_run_until_idle(a, &err), WEIR_OK);
    json_t *msgs = weir_agent_messages(a);
    char *dump = json_dumps(msgs, JSON_COMPACT);
    assert_non_null(strstr(dump, "crawl result")); /* the result re-entered */
    free(dump);
    json_decref(msgs);
    weir_agent_close(a);
    dh_teardown(&d);
    wt_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_steer_sent_after_a_followup_never_overtakes_it),
        cmocka_unit_test(a_service_result_alone_does_not_continue_the_turn),
        cmocka_unit_test(anchored_steer_joins_its_turn_ahead_of_a_queued_followup),
        cmocka_unit_test(anchored_steer_is_held_when_its_turn_ends_first),
        cmocka_unit_test(native_refusal_falls_back_to_the_request_boundary),
        cmocka_unit_test(native_application_is_logged_where_it_applied),
        cmocka_unit_test(native_error_is_unknown_and_never_queued),
        cmocka_unit_test(native_is_not_offered_past_queued_input),
        cmocka_unit_test(native_is_offered_a_followup_too),
        cmocka_unit_test(native_input_passes_through_pre_step),
        cmocka_unit_test(identical_resubmission_is_acknowledged_live),
        cmocka_unit_test(a_discarded_id_sent_again_is_acknowledged_not_replayed),
        cmocka_unit_test(input_calls_refuse_a_null_agent),
        cmocka_unit_test(caps_refuse_with_a_clear_error),
        cmocka_unit_test(on_wake_fires_for_waking_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
