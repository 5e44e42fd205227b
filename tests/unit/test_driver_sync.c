/*
 * tests/unit/test_driver_sync.c - the durability points of fsync "step"
 * (docs/session-log.md, "Durability"): a one-step turn syncs twice, before
 * its request (model-visible means logged) and at its end; the step end is
 * deferred into the turn end, but paid before a hook with a listener runs
 * in between (here an embedder's agent/turn-stopping listener), and a turn
 * of two steps syncs before each request.  fsync "none" never syncs.  The
 * file store's syncs are fdatasync calls, counted by the one this test
 * defines (the executable's symbol wins over libc's).
 */
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

int fdatasync(int fd) {
    atomic_fetch_add(&syncs, 1);
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

/* A listener between the step's end and the turn's end: the step's end is
 * durable before it runs (the deferred sync is paid), then the turn's end. */
static void listener_sees_the_step_end_durable(void **state) {
    (void)state;
    weir_agent_hook h = {"agent/turn-stopping", on_stopping, NULL};
    listener_base = atomic_load(&syncs);
    int n = turn_syncs(ONE_REPLY, "step", &h, 1, "listened");
    /* at the listener: the open's syncs (none expected), the pre-request one
     * and the paid step end */
    assert_int_equal(seen_at_listener, 2);
    assert_int_equal(n, 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_step_turn_syncs_twice),
        cmocka_unit_test(fsync_none_never_syncs),
        cmocka_unit_test(two_step_turn_syncs_before_each_request),
        cmocka_unit_test(listener_sees_the_step_end_durable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
