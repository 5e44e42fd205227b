/*
 * tests/unit/test_driver_sync.c - the durability points of fsync "step"
 * (docs/session-log.md, "Durability"): a one-step turn syncs twice, before
 * its request (model-visible means logged) and at its end; a step's end is
 * deferred into the next durability point, the next request or the turn's
 * end, also when a hook listener (agent/turn-stopping, agent/pre-step) runs
 * in between, so a turn of N steps syncs N + 1 times.  fsync "none" never
 * syncs.  The file store's syncs are fdatasync calls, counted by the one
 * this test defines (the executable's symbol wins over libc's), which can
 * also fail one with EIO: the turn then ends in error IO, as a failed
 * checkpoint.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "testutil.h"

static atomic_int syncs;
static atomic_int fail_at; /* the sync number that fails with EIO (0: none) */

int fdatasync(int fd) {
    int n = atomic_fetch_add(&syncs, 1) + 1;
    if (atomic_load(&fail_at) == n) {
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_fdatasync, fd);
}

#define ONE_REPLY                                                                                 \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"          \
    "[{\"text\":\"Hello there.\",\"chunks\":2}]}}]"
#define TOOL_THEN_TEXT                                                                            \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"          \
    "[{\"text\":\"Calling.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"echo\","                 \
    "\"arguments\":{}}]},{\"text\":\"Done.\"}]}},"                                               \
    "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"                      \
    "[{\"name\":\"echo\",\"reply\":\"echoed\"}]}}]"

/* The syncs one turn of `rows` takes under fsync `policy`. */
static int turn_syncs(const char *rows, const char *policy, const weir_agent_hook *hooks,
                      size_t nhooks, const char *id) {
    char session[64];
    snprintf(session, sizeof session, "{\"fsync\":\"%s\"}", policy);
    dh d;
    dh_setup_session(&d, rows, NULL, session);
    d.hooks = hooks;
    d.nhooks = nhooks;
    dh_open(&d, id);
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    int before = atomic_load(&syncs);
    dh_run(&d);
    int n = atomic_load(&syncs) - before;
    assert_int_equal(dh_count(&d, "turn/end"), 1);
    dh_check(&d);
    dh_teardown(&d);
    return n;
}

static void one_step_turn_syncs_twice(void **state) {
    (void)state;
    assert_int_equal(turn_syncs(ONE_REPLY, "step", NULL, 0, "one"), 2);
}

static void fsync_none_never_syncs(void **state) {
    (void)state;
    assert_int_equal(turn_syncs(ONE_REPLY, "none", NULL, 0, "none"), 0);
}

/* Two steps: before each request, then the turn's end (the first step's
 * end is paid by the second request's sync). */
static void two_step_turn_syncs_before_each_request(void **state) {
    (void)state;
    assert_int_equal(turn_syncs(TOOL_THEN_TEXT, "step", NULL, 0, "two"), 3);
}

static int seen_at_listener = -1;
static int listener_base;

static json_t *on_stopping(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    (void)ud;
    seen_at_listener = atomic_load(&syncs) - listener_base;
    return weir_host_api()->next(call);
}

/* A listener between the step's end and the turn's end costs no sync of
 * its own: it sees the request's inputs durable (the pre-request sync),
 * and the step's end is synced with the turn's end. */
static void listener_between_step_and_turn_end_costs_no_sync(void **state) {
    (void)state;
    weir_agent_hook h = {"agent/turn-stopping", on_stopping, NULL};
    listener_base = atomic_load(&syncs);
    int n = turn_syncs(ONE_REPLY, "step", &h, 1, "listened");
    /* at the listener: the open's syncs (none expected) and the pre-request one */
    assert_int_equal(seen_at_listener, 1);
    assert_int_equal(n, 2);
}

static int pre_step_seen[4];
static int pre_step_calls;

static json_t *on_pre_step(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    (void)ud;
    if (pre_step_calls < 4)
        pre_step_seen[pre_step_calls++] = atomic_load(&syncs) - listener_base;
    return weir_host_api()->next(call);
}

/* An agent/pre-step listener in a two-step turn (compaction-basic's hook):
 * step 1's end is paid by step 2's request, not before the listener, so the
 * turn syncs 3 times, once per step and once at its end. */
static void pre_step_listener_costs_no_sync(void **state) {
    (void)state;
    weir_agent_hook h = {"agent/pre-step", on_pre_step, NULL};
    listener_base = atomic_load(&syncs);
    pre_step_calls = 0;
    int n = turn_syncs(TOOL_THEN_TEXT, "step", &h, 1, "pre-step");
    assert_int_equal(pre_step_calls, 2);
    assert_int_equal(pre_step_seen[0], 0); /* step 1: nothing logged needs a sync yet */
    assert_int_equal(pre_step_seen[1], 1); /* step 2: step 1's request */
    assert_int_equal(n, 3);
}

/* The sync that pays step 1's deferred end with step 2's inputs fails
 * (EIO): the turn ends in error IO before step 2's request and the run
 * returns E_IO, as a failed checkpoint does; the log still checks. */
static void failed_deferred_sync_is_an_io_error(void **state) {
    (void)state;
    weir_agent_hook h = {"agent/pre-step", on_pre_step, NULL};
    dh d;
    dh_setup_session(&d, TOOL_THEN_TEXT, NULL, "{\"fsync\":\"step\"}");
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "eio");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    atomic_store(&fail_at, atomic_load(&syncs) + 2); /* after step 1's pre-request sync */
    weir_error err;
    weir_error_clear(&err);
    int rc = weir_agent_run_until_idle(d.agent, &err);
    atomic_store(&fail_at, 0);
    assert_int_equal(rc, WEIR_E_IO);
    const json_t *end = dh_find(&d, "turn/end", 0);
    assert_non_null(end);
    const json_t *reason = json_object_get(json_object_get(end, "data"), "reason");
    assert_string_equal(json_string_value(json_object_get(reason, "kind")), "error");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(reason, "error"), "code")), "IO");
    assert_int_equal(dh_count(&d, "assistant/message"), 1); /* step 2 never asked */
    dh_teardown(&d);
}

/* Closing the agent after its turn ended costs no sync when nothing was
 * appended since the turn's end synced (a clean fdatasync still costs a
 * system call and, on ext4, tens of microseconds); a send logged after the
 * turn is not synced yet, so the close syncs it. */
static void close_syncs_only_what_is_not_synced(void **state) {
    (void)state;
    dh d;
    dh_setup_session(&d, ONE_REPLY, NULL, "{\"fsync\":\"step\"}");
    dh_open(&d, "close-clean");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    int before = atomic_load(&syncs);
    dh_close(&d);
    assert_int_equal(atomic_load(&syncs) - before, 0);
    dh_open(&d, "close-clean"); /* reopen: nothing known synced yet */
    before = atomic_load(&syncs);
    dh_close(&d);
    assert_int_equal(atomic_load(&syncs) - before, 1);
    dh_open(&d, "close-clean");
    dh_send(&d, "later", WEIR_SEND_FOLLOWUP); /* logged, not synced: step syncs at requests */
    before = atomic_load(&syncs);
    dh_close(&d);
    assert_int_equal(atomic_load(&syncs) - before, 1);
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_step_turn_syncs_twice),
        cmocka_unit_test(fsync_none_never_syncs),
        cmocka_unit_test(two_step_turn_syncs_before_each_request),
        cmocka_unit_test(listener_between_step_and_turn_end_costs_no_sync),
        cmocka_unit_test(pre_step_listener_costs_no_sync),
        cmocka_unit_test(failed_deferred_sync_is_an_io_error),
        cmocka_unit_test(close_syncs_only_what_is_not_synced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
