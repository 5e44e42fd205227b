/*
 * tests/unit/test_inbox.c - the durable inbox (docs/session-log.md,
 * "Inbox"): durable-before-live, dedupe, claim and clear shapes, rebuild from
 * the log, failure atomicity and corrupt splices.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "inbox.h"
#include "session_log.h"
#include "testutil.h"

typedef struct fixture {
    char *dir;
    char path[4200];
    weir__log *log;
    weir__inbox *ib;
    /* observed, in order: "log:<type>:<next-step count>" and "<kind>:<id>:<turn>" */
    char trace[32][96];
    size_t ntrace;
} fixture;

static void on_log(const json_t *ev, void *ud) {
    fixture *f = ud;
    snprintf(f->trace[f->ntrace++], sizeof f->trace[0], "log:%s:%zu:%zu",
             json_string_value(json_object_get(ev, "type")), weir__inbox_count(f->ib, true),
             weir__inbox_count(f->ib, false));
}

static void on_inbox(const char *kind, const json_t *m, int turn, void *ud) {
    fixture *f = ud;
    snprintf(f->trace[f->ntrace++], sizeof f->trace[0], "%s:%s:%d", kind,
             json_string_value(json_object_get(m, "id")), turn);
}

static void open_all(fixture *f) {
    weir_error err;
    weir__inbox_destroy(f->ib);
    weir__log_close(f->log);
    f->ib = NULL;
    assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err), WEIR_OK);
    assert_int_equal(weir__inbox_create(f->log, &f->ib, &err), WEIR_OK);
    weir__log_set_observer(f->log, on_log, f);
    weir__inbox_set_notify(f->ib, on_inbox, f);
    f->ntrace = 0;
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    f->dir = wt_tmpdir("inbox");
    snprintf(f->path, sizeof f->path, "%s/s.jsonl", f->dir);
    open_all(f);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    weir__inbox_destroy(f->ib);
    weir__log_close(f->log);
    wt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static json_t *user(const char *id, const char *text) {
    return json_pack("{s:s,s:[{s:s,s:s}],s:s}", "role", "user", "content", "type", "text", "text",
                     text, "id", id);
}

static void add(fixture *f, const char *id, const char *text, bool next_step) {
    json_t *m = user(id, text);
    bool dup = true;
    weir_error err;
    assert_int_equal(weir__inbox_add(f->ib, m, next_step, &dup, &err), WEIR_OK);
    assert_false(dup);
    json_decref(m);
}

static char *data_of(fixture *f, size_t seq) {
    return json_dumps(json_object_get(weir__log_event(f->log, seq), "data"),
                      JSON_COMPACT | JSON_PRESERVE_ORDER);
}

static void add_is_durable_before_live(void **state) {
    fixture *f = *state;
    add(f, "a", "one", true);
    /* the observer saw the splice while the list was still empty */
    assert_int_equal(f->ntrace, 2);
    assert_string_equal(f->trace[0], "log:agent/inbox/spliced:0:0");
    assert_string_equal(f->trace[1], "inserted:a:0");
    assert_int_equal(weir__inbox_count(f->ib, true), 1);
    char *d = data_of(f, 0);
    assert_string_equal(
        d, "{\"target\":\"next-step\",\"start\":0,\"inserted\":[{\"role\":\"user\",\"content\":"
           "[{\"type\":\"text\",\"text\":\"one\"}],\"id\":\"a\"}]}");
    free(d);
    add(f, "b", "two", true);
    d = data_of(f, 1);
    assert_non_null(strstr(d, "\"start\":1,"));
    free(d);
}

static void same_id_same_content_acknowledged_once(void **state) {
    fixture *f = *state;
    add(f, "a", "one", false);
    json_t *m = user("a", "one");
    bool dup = false;
    weir_error err;
    assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_OK);
    assert_true(dup);
    assert_int_equal(weir__inbox_add(f->ib, m, true, &dup, &err), WEIR_OK); /* other list too */
    assert_true(dup);
    json_decref(m);
    assert_int_equal(weir__log_count(f->log), 1);
    assert_int_equal(weir__inbox_count(f->ib, false), 1);
    assert_int_equal(weir__inbox_count(f->ib, true), 0);
}

static void same_id_different_content_refused(void **state) {
    fixture *f = *state;
    add(f, "a", "one", false);
    json_t *m = user("a", "changed");
    bool dup = true;
    weir_error err;
    assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_E_DUPLICATE);
    assert_false(dup);
    assert_string_equal(err.text, "inbox: input id 'a' was already used with different content");
    json_decref(m);
    assert_int_equal(weir__log_count(f->log), 1);
    /* an id without "id" is refused outright */
    m = json_pack("{s:s,s:[]}", "role", "user", "content");
    assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_E_INVAL);
    json_decref(m);
}

static void delivered_ids_are_remembered(void **state) {
    fixture *f = *state;
    json_t *m = user("old", "hello");
    json_t *data = json_pack("{s:i,s:i,s:O}", "turn", 1, "step", 1, "message", m);
    json_t *op = json_string("append");
    weir_error err;
    assert_int_equal(weir__log_append(f->log, "user/message", data, op, NULL, 0, NULL, &err),
                     WEIR_OK);
    json_decref(data);
    json_decref(op);
    open_all(f); /* delivered ids come from the log's user/message events */
    bool dup = false;
    assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_OK);
    assert_true(dup);
    json_decref(m);
    m = user("old", "other");
    assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_E_DUPLICATE);
    json_decref(m);
    /* claimed ids count as delivered, also after a reopen */
    add(f, "s1", "steer", true);
    json_t *claimed = NULL;
    assert_int_equal(weir__inbox_claim(f->ib, false, 1, &claimed, &err), WEIR_OK);
    json_decref(claimed);
    open_all(f);
    m = user("s1", "steer");
    assert_int_equal(weir__inbox_add(f->ib, m, true, &dup, &err), WEIR_OK);
    assert_true(dup);
    json_decref(m);
    assert_int_equal(weir__inbox_count(f->ib, true), 0);
}

/* A delivered message is remembered by its content, not its key order: the
 * same message with its keys in another order is the same input. */
static void delivered_dedupe_ignores_key_order(void **state) {
    fixture *f = *state;
    add(f, "k", "keys", false);
    json_t *claimed = NULL;
    weir_error err;
    assert_int_equal(weir__inbox_claim(f->ib, true, 1, &claimed, &err), WEIR_OK);
    assert_int_equal(json_array_size(claimed), 1);
    json_decref(claimed);
    for (int reopen = 0; reopen < 2; reopen++) {
        if (reopen)
            open_all(f);
        json_t *m = json_pack("{s:s,s:[{s:s,s:s}],s:s}", "id", "k", "content", "text", "keys",
                              "type", "text", "role", "user");
        bool dup = false;
        assert_int_equal(weir__inbox_known(f->ib, m), 1);
        assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_OK);
        assert_true(dup);
        json_decref(m);
        m = json_pack("{s:s,s:[{s:s,s:s}],s:s}", "id", "k", "content", "text", "keys!", "type",
                      "text", "role", "user");
        assert_int_equal(weir__inbox_known(f->ib, m), -1);
        assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_E_DUPLICATE);
        json_decref(m);
    }
    assert_int_equal(weir__inbox_count(f->ib, false), 0);
}

/* Comma-joined ids of a claim (borrowed into a static buffer). */
static const char *claim_ids(const json_t *claimed) {
    static char buf[256];
    buf[0] = '\0';
    size_t i;
    const json_t *m;
    json_array_foreach(claimed, i, m) {
        if (i)
            strcat(buf, ",");
        strcat(buf, weir__json_str(m, "id", "?"));
    }
    return buf;
}

static const char *claim_now(fixture *f, bool turn_boundary, int turn) {
    json_t *claimed = NULL;
    weir_error err;
    assert_int_equal(weir__inbox_claim(f->ib, turn_boundary, turn, &claimed, &err), WEIR_OK);
    const char *ids = claim_ids(claimed);
    json_decref(claimed);
    return ids;
}

/* A queued next-turn message is a barrier: next-step input that arrived
 * after it waits for its turn (later input never overtakes an earlier
 * boundary batch).  A turn's claim takes the input before the prompt, the
 * prompt, and what came after it up to the next prompt, in arrival order. */
static void claim_keeps_arrival_order_behind_a_queued_prompt(void **state) {
    fixture *f = *state;
    add(f, "s1", "steer 1", true);
    add(f, "t1", "first", false);
    add(f, "s2", "steer 2", true);
    add(f, "t2", "second", false);
    add(f, "s3", "steer 3", true);
    f->ntrace = 0;
    json_t *claimed = NULL;
    weir_error err;
    assert_int_equal(weir__inbox_claim(f->ib, true, 3, &claimed, &err), WEIR_OK);
    assert_string_equal(claim_ids(claimed), "s1,t1,s2");
    json_decref(claimed);
    char *d = data_of(f, 5);
    assert_string_equal(
        d, "{\"target\":\"next-step\",\"start\":0,\"removed_count\":1,\"inserted\":[]}");
    free(d);
    d = data_of(f, 6);
    assert_string_equal(
        d, "{\"target\":\"next-turn\",\"start\":0,\"removed_count\":1,\"inserted\":[]}");
    free(d);
    d = data_of(f, 7);
    assert_string_equal(
        d, "{\"target\":\"next-step\",\"start\":0,\"removed_count\":1,\"inserted\":[]}");
    free(d);
    /* each splice is logged before the lists change (durable first) */
    const char *want[] = {"log:agent/inbox/spliced:3:2", "log:agent/inbox/spliced:2:2",
                          "log:agent/inbox/spliced:2:1", "claimed:s1:3", "claimed:t1:3",
                          "claimed:s2:3"};
    assert_int_equal(f->ntrace, 6);
    for (size_t i = 0; i < 6; i++)
        assert_string_equal(f->trace[i], want[i]);
    /* between steps: s3 waits behind t2; nothing claimable means no event */
    size_t events = weir__log_count(f->log);
    assert_string_equal(claim_now(f, false, 3), "");
    assert_int_equal(weir__log_count(f->log), events);
    bool ordinary = true;
    assert_int_equal(weir__inbox_pending(f->ib, &ordinary), 0);
    assert_false(ordinary);
    assert_string_equal(claim_now(f, true, 4), "t2,s3");
    /* no prompt queued: between steps everything next-step */
    add(f, "s4", "steer 4", true);
    add(f, "s5", "steer 5", true);
    assert_string_equal(claim_now(f, false, 4), "s4,s5");
}

/* Anchored input is queued in front of what a barrier holds back, is
 * claimed between steps, is refused outside its running turn and after the
 * turn's stop fence, and is held (never falls forward) at the turn's end. */
static void anchored_input_bypasses_the_barrier_and_never_outlives_its_turn(void **state) {
    fixture *f = *state;
    weir_error err;
    bool dup = false;
    json_t *a1 = user("a1", "anchored 1");
    assert_int_equal(weir__inbox_add_anchored(f->ib, a1, 2, &dup, &err), WEIR_E_STATE);
    weir__inbox_open_turn(f->ib, 2);
    add(f, "t1", "prompt", false);
    add(f, "s1", "late steer", true);
    assert_int_equal(weir__inbox_add_anchored(f->ib, a1, 3, &dup, &err), WEIR_E_STATE);
    assert_int_equal(weir__inbox_add_anchored(f->ib, a1, 2, &dup, &err), WEIR_OK);
    assert_false(dup);
    char *d = data_of(f, 2);
    assert_string_equal(d, "{\"target\":\"next-step\",\"start\":0,\"inserted\":[{\"role\":"
                           "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"anchored 1\"}],"
                           "\"id\":\"a1\"}],\"anchor_turn\":2}");
    free(d);
    bool ordinary = false;
    assert_int_equal(weir__inbox_pending(f->ib, &ordinary), 1);
    assert_true(ordinary);
    /* the final check: anchored input continues the turn, no fence yet */
    assert_false(weir__inbox_close_turn(f->ib, 2, false));
    assert_string_equal(claim_now(f, false, 2), "a1");
    assert_true(weir__inbox_close_turn(f->ib, 2, false));
    json_t *a2 = user("a2", "too late");
    assert_int_equal(weir__inbox_add_anchored(f->ib, a2, 2, &dup, &err), WEIR_E_STATE);
    /* a turn that ends with anchored input queued holds it */
    weir__inbox_open_turn(f->ib, 3);
    assert_int_equal(weir__inbox_add_anchored(f->ib, a2, 3, &dup, &err), WEIR_OK);
    f->ntrace = 0;
    assert_int_equal(weir__inbox_hold_anchored(f->ib, 3, &err), WEIR_OK);
    assert_int_equal(f->ntrace, 2);
    assert_string_equal(f->trace[1], "held:a2:3");
    d = data_of(f, weir__log_count(f->log) - 1);
    assert_string_equal(d, "{\"target\":\"next-step\",\"start\":0,\"removed_count\":1,"
                           "\"inserted\":[],\"outcome\":\"held\"}");
    free(d);
    /* a held id was accepted once: it is known (a resubmission is
     * acknowledged, never queued again), and the rebuilt inbox agrees */
    assert_int_equal(weir__inbox_known(f->ib, a2), 1);
    open_all(f);
    assert_int_equal(weir__inbox_count(f->ib, true), 1);  /* s1 */
    assert_int_equal(weir__inbox_count(f->ib, false), 1); /* t1 */
    assert_int_equal(weir__inbox_known(f->ib, a2), 1);
    assert_int_equal(weir__inbox_known(f->ib, a1), 1);
    assert_int_equal(weir__inbox_add(f->ib, a2, true, &dup, &err), WEIR_OK);
    assert_true(dup);
    json_t *other = user("a2", "other text");
    assert_int_equal(weir__inbox_add(f->ib, other, true, &dup, &err), WEIR_E_DUPLICATE);
    json_decref(other);
    assert_int_equal(weir__inbox_count(f->ib, true), 1);
    assert_string_equal(claim_now(f, true, 4), "t1,s1");
    json_decref(a1);
    json_decref(a2);
}

/* The stop fence of the shutdown: new input is refused, a resubmission is
 * still acknowledged; a service message alone does not continue a turn. */
static void stop_refuses_new_input_and_service_alone_is_not_ordinary(void **state) {
    fixture *f = *state;
    json_t *svc = json_pack("{s:s,s:[{s:s,s:s}],s:{s:s,s:s},s:s}", "role", "user", "content",
                            "type", "text", "text", "job done", "source", "kind", "service",
                            "name", "jobs", "id", "job-1");
    weir_error err;
    bool dup = false;
    assert_int_equal(weir__inbox_add(f->ib, svc, true, &dup, &err), WEIR_OK);
    bool ordinary = true;
    assert_int_equal(weir__inbox_pending(f->ib, &ordinary), 1);
    assert_false(ordinary);
    assert_true(weir__inbox_close_turn(f->ib, 1, false));
    add(f, "s1", "steer", true);
    assert_int_equal(weir__inbox_pending(f->ib, &ordinary), 2);
    assert_true(ordinary);
    weir__inbox_stop(f->ib);
    json_t *m = user("s2", "after the fence");
    assert_int_equal(weir__inbox_add(f->ib, m, true, &dup, &err), WEIR_E_STATE);
    assert_int_equal(weir__inbox_add(f->ib, svc, true, &dup, &err), WEIR_OK);
    assert_true(dup);
    assert_int_equal(weir__inbox_count(f->ib, true), 2);
    json_decref(m);
    json_decref(svc);
}

static void clear_discards_with_outcome_canceled(void **state) {
    fixture *f = *state;
    add(f, "t1", "first", false);
    add(f, "s1", "steer", true);
    f->ntrace = 0;
    weir_error err;
    assert_int_equal(weir__inbox_clear(f->ib, &err), WEIR_OK);
    char *d = data_of(f, 2);
    assert_string_equal(d,
                        "{\"target\":\"next-step\",\"start\":0,\"removed_count\":1,\"inserted\":[],"
                        "\"outcome\":\"canceled\"}");
    free(d);
    d = data_of(f, 3);
    assert_string_equal(d,
                        "{\"target\":\"next-turn\",\"start\":0,\"removed_count\":1,\"inserted\":[],"
                        "\"outcome\":\"canceled\"}");
    free(d);
    const char *want[] = {"log:agent/inbox/spliced:1:1", "log:agent/inbox/spliced:0:1",
                          "discarded:s1:0", "discarded:t1:0"};
    assert_int_equal(f->ntrace, 4);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(f->trace[i], want[i]);
    assert_int_equal(weir__inbox_count(f->ib, true) + weir__inbox_count(f->ib, false), 0);
    /* a canceled input was accepted once: the same id with the same
     * content is acknowledged and not queued again, before and after a
     * reopen; with other content it is refused */
    for (int pass = 0; pass < 2; pass++) {
        json_t *m = user("s1", "steer");
        bool dup = false;
        assert_int_equal(weir__inbox_add(f->ib, m, true, &dup, &err), WEIR_OK);
        assert_true(dup);
        json_decref(m);
        m = user("t1", "first");
        assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_OK);
        assert_true(dup);
        json_decref(m);
        m = user("s1", "steer again");
        assert_int_equal(weir__inbox_add(f->ib, m, true, &dup, &err), WEIR_E_DUPLICATE);
        json_decref(m);
        assert_int_equal(weir__inbox_count(f->ib, true) + weir__inbox_count(f->ib, false), 0);
        open_all(f);
    }
    /* after the stop fence too: acknowledged, not E_STATE */
    weir__inbox_stop(f->ib);
    json_t *m = user("s1", "steer");
    bool dup = false;
    assert_int_equal(weir__inbox_add(f->ib, m, true, &dup, &err), WEIR_OK);
    assert_true(dup);
    json_decref(m);
}

/* hold_all (an open after a shutdown that could not log its removal):
 * both lists go with outcome "held", "held" per message with turn 0; the
 * ids stay known and a reopen finds nothing queued. */
static void hold_all_holds_both_lists(void **state) {
    fixture *f = *state;
    add(f, "t1", "first", false);
    add(f, "s1", "steer", true);
    f->ntrace = 0;
    weir_error err;
    assert_int_equal(weir__inbox_hold_all(f->ib, &err), WEIR_OK);
    const char *want[] = {"log:agent/inbox/spliced:1:1", "log:agent/inbox/spliced:0:1",
                          "held:s1:0", "held:t1:0"};
    assert_int_equal(f->ntrace, 4);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(f->trace[i], want[i]);
    char *d = data_of(f, 3);
    assert_string_equal(d, "{\"target\":\"next-turn\",\"start\":0,\"removed_count\":1,"
                           "\"inserted\":[],\"outcome\":\"held\"}");
    free(d);
    open_all(f);
    assert_int_equal(weir__inbox_count(f->ib, true) + weir__inbox_count(f->ib, false), 0);
    json_t *m = user("t1", "first");
    assert_int_equal(weir__inbox_known(f->ib, m), 1);
    json_decref(m);
}

/* A log of an older weir may queue a canceled id again (it forgot it): it
 * still opens, with the id queued. */
static void an_older_log_that_requeues_a_canceled_id_opens(void **state) {
    fixture *f = *state;
    weir_error err;
    const char *splices[] = {
        "{\"target\":\"next-step\",\"start\":0,\"inserted\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"one\"}],\"id\":\"s1\"}]}",
        "{\"target\":\"next-step\",\"start\":0,\"removed_count\":1,\"inserted\":[],"
        "\"outcome\":\"canceled\"}",
        "{\"target\":\"next-step\",\"start\":0,\"inserted\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"one\"}],\"id\":\"s1\"}]}"};
    for (size_t i = 0; i < 3; i++) {
        json_t *data = json_loads(splices[i], 0, NULL);
        assert_non_null(data);
        assert_int_equal(weir__log_append(f->log, "agent/inbox/spliced", data, NULL, NULL, 0, NULL,
                                          &err),
                         WEIR_OK);
        json_decref(data);
    }
    open_all(f);
    assert_int_equal(weir__inbox_count(f->ib, true), 1);
    assert_string_equal(claim_now(f, false, 1), "s1");
}

static void rebuild_from_log_after_reopen(void **state) {
    fixture *f = *state;
    add(f, "t1", "first", false);
    add(f, "t2", "second", false);
    add(f, "s1", "steer", true);
    assert_string_equal(claim_now(f, true, 1), "t1"); /* s1 waits behind t2 */
    add(f, "s2", "steer 2", true);
    open_all(f);
    assert_int_equal(weir__inbox_count(f->ib, true), 2);
    assert_int_equal(weir__inbox_count(f->ib, false), 1);
    /* the arrival order is rebuilt too */
    assert_string_equal(claim_now(f, false, 2), "");
    assert_string_equal(claim_now(f, true, 2), "t2,s1,s2");
}

static void unchanged_when_append_fails(void **state) {
    fixture *f = *state;
    add(f, "t1", "first", false);
    add(f, "s1", "steer", true);
    size_t events = weir__log_count(f->log);
    json_t *m = user("t2", "second");
    weir_error err;
    bool finished = false;
    for (long n = 1; !finished; n++) {
        f->ntrace = 0;
        bool dup = false;
        json_t *claimed = NULL;
        weir__alloc_fail_after(n);
        int rc = weir__inbox_add(f->ib, m, false, &dup, &err);
        int rc2 = rc == WEIR_OK ? weir__inbox_claim(f->ib, true, 1, &claimed, &err) : rc;
        weir__alloc_fail_after(-1);
        json_decref(claimed);
        if (rc == WEIR_OK && rc2 == WEIR_OK) {
            finished = true;
            break;
        }
        assert_int_equal(rc2, WEIR_E_NOMEM);
        /* lists always equal the fold of the log */
        weir__inbox *fresh = NULL;
        assert_int_equal(weir__inbox_create(f->log, &fresh, &err), WEIR_OK);
        for (int t = 0; t < 2; t++)
            assert_int_equal(weir__inbox_count(fresh, t), weir__inbox_count(f->ib, t));
        weir__inbox_destroy(fresh);
        if (rc != WEIR_OK) {
            assert_int_equal(weir__log_count(f->log), events);
            assert_int_equal(f->ntrace, 0);
        }
    }
    json_decref(m);
    assert_true(finished);
}

/* A claim that cannot complete leaves the log, the lists and the delivered
 * ids as they were, and sends no notification. */
static void claim_failure_changes_nothing(void **state) {
    fixture *f = *state;
    add(f, "t1", "first", false);
    add(f, "s1", "steer", true);
    add(f, "s2", "steer again", true);
    size_t events = weir__log_count(f->log);
    weir_error err;
    bool finished = false;
    for (long n = 1; !finished; n++) {
        f->ntrace = 0;
        json_t *claimed = NULL;
        weir__alloc_fail_after(n);
        int rc = weir__inbox_claim(f->ib, true, 1, &claimed, &err);
        weir__alloc_fail_after(-1);
        if (rc == WEIR_OK) {
            /* all three (t1, then s1 and s2 queued after it), or (memory
             * ran out for the second splice) t1 alone, s1 and s2 still
             * queued behind it */
            size_t got = json_array_size(claimed);
            assert_true(got == 3 || got == 1);
            assert_string_equal(weir__json_str(json_array_get(claimed, 0), "id", ""), "t1");
            assert_int_equal(weir__log_count(f->log), events + (got == 3 ? 2 : 1));
            assert_int_equal(weir__inbox_count(f->ib, false), 0);
            assert_int_equal(weir__inbox_count(f->ib, true), got == 3 ? 0 : 2);
            assert_int_equal(f->ntrace, (got == 3 ? 2 : 1) + got); /* splices + claimed */
            json_decref(claimed);
            finished = true;
            break;
        }
        assert_int_equal(rc, WEIR_E_NOMEM);
        assert_null(claimed);
        assert_int_equal(weir__log_count(f->log), events);
        assert_int_equal(f->ntrace, 0);
        assert_int_equal(weir__inbox_count(f->ib, true), 2);
        assert_int_equal(weir__inbox_count(f->ib, false), 1);
    }
    assert_true(finished);
    /* the live lists equal the fold of the log */
    weir__inbox *fresh = NULL;
    assert_int_equal(weir__inbox_create(f->log, &fresh, &err), WEIR_OK);
    for (int t = 0; t < 2; t++)
        assert_int_equal(weir__inbox_count(fresh, t), weir__inbox_count(f->ib, t));
    weir__inbox_destroy(fresh);
}

/* After a claim the driver logs user/message with what entered the step (a
 * pre-step listener may have changed it).  Resubmitting the original input
 * is acknowledged, both live and after a reopen rebuilt the inbox. */
static void resubmission_after_reopen_matches_live(void **state) {
    fixture *f = *state;
    add(f, "t1", "hello", false);
    json_t *claimed = NULL;
    weir_error err;
    assert_int_equal(weir__inbox_claim(f->ib, true, 1, &claimed, &err), WEIR_OK);
    json_t *entered = json_deep_copy(json_array_get(claimed, 0));
    json_decref(claimed);
    json_object_set_new(entered, "source", json_pack("{s:s}", "kind", "human"));
    json_t *data = json_pack("{s:i,s:i,s:o}", "turn", 1, "step", 1, "message", entered);
    json_t *op = json_string("append");
    assert_int_equal(
        weir__log_append(f->log, "user/message", data, op, NULL, 0, NULL, &err), WEIR_OK);
    json_decref(op);
    json_decref(data);
    json_t *m = user("t1", "hello");
    for (int round = 0; round < 2; round++) {
        bool dup = false;
        assert_int_equal(weir__inbox_add(f->ib, m, false, &dup, &err), WEIR_OK);
        assert_true(dup);
        assert_int_equal(weir__inbox_count(f->ib, false), 0);
        open_all(f); /* second round: the inbox rebuilt from the log */
    }
    json_decref(m);
}

static void malformed_splice_is_corrupt(void **state) {
    fixture *f = *state;
    add(f, "t1", "first", false);
    json_t *bad = json_pack("{s:s,s:i,s:i,s:[]}", "target", "next-turn", "start", 0,
                            "removed_count", 5, "inserted");
    weir_error err;
    assert_int_equal(
        weir__log_append(f->log, "agent/inbox/spliced", bad, NULL, NULL, 0, NULL, &err), WEIR_OK);
    json_decref(bad);
    weir__inbox *ib = NULL;
    char want[4400];
    snprintf(want, sizeof want, "%s: invalid persisted inbox splice at session seq 1", f->path);
    assert_int_equal(weir__inbox_create(f->log, &ib, &err), WEIR_E_LOG_CORRUPT);
    assert_string_equal(err.text, want);
    assert_null(ib);
}

/* Issue #34: a log/checkpoint is written only while nothing is queued (the
 * inbox's check and the append under its lock), so a resume from it
 * rebuilds an empty inbox and loses no input. */
static void a_checkpoint_waits_for_an_empty_inbox(void **state) {
    fixture *f = *state;
    weir_error err;
    weir__log_set_checkpoint_every(f->log, 1);
    add(f, "in-1", "queued", false);
    size_t n = weir__log_count(f->log);
    assert_int_equal(weir__inbox_checkpoint(f->ib, &err), WEIR_OK);
    assert_int_equal(weir__log_count(f->log), n); /* input is queued: none */
    json_t *claimed = NULL;
    assert_int_equal(weir__inbox_claim(f->ib, true, 1, &claimed, &err), WEIR_OK);
    assert_int_equal(json_array_size(claimed), 1);
    json_decref(claimed);
    n = weir__log_count(f->log);
    assert_int_equal(weir__inbox_checkpoint(f->ib, &err), WEIR_OK);
    assert_int_equal(weir__log_count(f->log), n + 1);
    assert_string_equal(json_string_value(json_object_get(weir__log_event(f->log, n), "type")),
                        "log/checkpoint");
    /* a resume starts from it, with nothing queued */
    open_all(f);
    assert_int_equal(weir__log_base(f->log), n);
    assert_int_equal(weir__inbox_count(f->ib, false) + weir__inbox_count(f->ib, true), 0);
    /* input queued after it is in the tail: a resume keeps it */
    weir__log_set_checkpoint_every(f->log, 1);
    add(f, "in-2", "after", true);
    assert_int_equal(weir__inbox_checkpoint(f->ib, &err), WEIR_OK); /* queued: none */
    open_all(f);
    assert_int_equal(weir__log_base(f->log), n);
    assert_int_equal(weir__inbox_count(f->ib, true), 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(add_is_durable_before_live, setup, teardown),
        cmocka_unit_test_setup_teardown(a_checkpoint_waits_for_an_empty_inbox, setup, teardown),
        cmocka_unit_test_setup_teardown(same_id_same_content_acknowledged_once, setup, teardown),
        cmocka_unit_test_setup_teardown(same_id_different_content_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(delivered_ids_are_remembered, setup, teardown),
        cmocka_unit_test_setup_teardown(delivered_dedupe_ignores_key_order, setup, teardown),
        cmocka_unit_test_setup_teardown(claim_keeps_arrival_order_behind_a_queued_prompt, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            anchored_input_bypasses_the_barrier_and_never_outlives_its_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(stop_refuses_new_input_and_service_alone_is_not_ordinary,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(clear_discards_with_outcome_canceled, setup, teardown),
        cmocka_unit_test_setup_teardown(hold_all_holds_both_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(an_older_log_that_requeues_a_canceled_id_opens, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(rebuild_from_log_after_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(unchanged_when_append_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(claim_failure_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(resubmission_after_reopen_matches_live, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_splice_is_corrupt, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
