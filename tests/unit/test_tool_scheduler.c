/*
 * tests/unit/test_tool_scheduler.c - the tool registry, the ordered parallel
 * scheduler (docs/tools.md) and background jobs.
 *
 * Every scenario runs weir__tools_run against a real session log in a temp
 * dir and real hook chains.  The fixture frames the log as one step of one
 * turn and teardown runs `weir log --check` (weir_log_check) on it.  Concurrency is asserted with barriers and
 * counters inside the tool bodies, never with timings: a body that waits for
 * a sibling waits on a condition variable (with a long safety bound that
 * only trips when the scheduler is wrong, and then fails the test).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weir/host.h"

#include "hooks.h"
#include "pool.h"
#include "session_log.h"
#include "cancel.h"
#include "testutil.h"
#include "tools.h"

/* ------------------------------------------------------------------------ */
/* Shared body state                                                         */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static char g_events[64][32]; /* "start:a", "end:a" in real order */
static int g_nevents;
static int g_current, g_max_current, g_started;
static bool g_timed_out;
static int g_cap; /* pool-cap test: wait until this many run at once */
static weir_signal *g_signal;
static int g_barrier_count[8];

static void reset_bodies(void) {
    pthread_mutex_lock(&g_mu);
    g_nevents = 0;
    g_current = g_max_current = g_started = 0;
    g_timed_out = false;
    g_cap = 0;
    memset(g_barrier_count, 0, sizeof g_barrier_count);
    pthread_mutex_unlock(&g_mu);
}

static void record(const char *what, const char *id) {
    if (g_nevents < 64)
        snprintf(g_events[g_nevents++], sizeof g_events[0], "%s:%s", what, id);
}

/* Wait on g_cv with a 30 s safety bound; the bound is never expected. */
static void wait_locked(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 30;
    if (pthread_cond_timedwait(&g_cv, &g_mu, &ts) != 0)
        g_timed_out = true;
}

static int event_index(const char *ev) {
    for (int i = 0; i < g_nevents; i++)
        if (strcmp(g_events[i], ev) == 0)
            return i;
    return -1;
}

/*
 * The "work" tool.  Arguments:
 *   id         label for the event record
 *   barrier/n  wait until n bodies reached barrier slot `barrier`
 *   after      wait until "end:<after>" was recorded
 *   cancel     cancel g_signal (after the barrier)
 *   wait_cancel wait until g_signal fired
 *   cap        wait until g_cap bodies ran at once or all `total` started
 *   total      number of bodies in the run (for cap)
 *   text       the result text (default "ok:<id>")
 *   concludes  result concludes the turn
 */
static int work_exec(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    (void)ud;
    const char *id = weir__json_str(args, "id", "?");
    json_int_t barrier = weir__json_int(args, "barrier", -1);
    json_int_t n = weir__json_int(args, "n", 0);
    const char *after = weir__json_str(args, "after", NULL);
    json_int_t total = weir__json_int(args, "total", 0);
    pthread_mutex_lock(&g_mu);
    if (!weir__tool_exec_call_id(exec))
        g_timed_out = true; /* reported as a failure by every test */
    record("start", id);
    g_started++;
    g_current++;
    if (g_current > g_max_current)
        g_max_current = g_current;
    pthread_cond_broadcast(&g_cv);
    if (barrier >= 0 && barrier < 8) {
        g_barrier_count[barrier]++;
        pthread_cond_broadcast(&g_cv);
        while (g_barrier_count[barrier] < n && !g_timed_out)
            wait_locked();
    }
    if (after) {
        char ev[32];
        snprintf(ev, sizeof ev, "end:%s", after);
        while (event_index(ev) < 0 && !g_timed_out)
            wait_locked();
    }
    /* until the pool ran g_cap bodies at once (a latch: a body that ends at
     * once may take the moment away before this one looks again), or all
     * started */
    if (g_cap > 0)
        while (g_max_current < g_cap && g_started < total && !g_timed_out)
            wait_locked();
    pthread_mutex_unlock(&g_mu);
    if (json_is_true(json_object_get(args, "cancel")))
        weir__signal_cancel(g_signal, "user");
    if (json_is_true(json_object_get(args, "wait_cancel"))) {
        int rc = weir__signal_sleep(weir__tool_exec_signal(exec), 30000);
        if (rc != WEIR_E_CANCELLED || weir__tool_exec_signal(exec) != g_signal) {
            pthread_mutex_lock(&g_mu);
            g_timed_out = true;
            pthread_mutex_unlock(&g_mu);
        }
    }
    pthread_mutex_lock(&g_mu);
    g_current--;
    record("end", id);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    const char *text = weir__json_str(args, "text", NULL);
    char buf[64];
    if (!text) {
        snprintf(buf, sizeof buf, "ok:%s", id);
        text = buf;
    }
    if (json_is_true(json_object_get(args, "concludes")))
        *result = json_pack("{s:s, s:b}", "content", text, "concludes_turn", 1);
    else
        *result = json_string(text);
    return *result ? WEIR_OK : WEIR_E_NOMEM;
}

/* The "quick" (WEIR_TOOL_INLINE) and "pooled" tools: work_exec, counting
 * the bodies that ran on the thread that runs the step (g_step_thread). */
static pthread_t g_step_thread;
static int g_on_step, g_off_step;

static int where_exec(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    pthread_mutex_lock(&g_mu);
    if (pthread_equal(pthread_self(), g_step_thread))
        g_on_step++;
    else
        g_off_step++;
    if (weir__tool_exec_signal(exec) != g_signal)
        g_timed_out = true; /* an inline body gets the turn's signal as any body */
    pthread_mutex_unlock(&g_mu);
    return work_exec(exec, args, result, ud);
}

static int always_parallel(const json_t *args, void *ud) {
    (void)args, (void)ud;
    return 1;
}

/* Parallel unless the arguments say {"exclusive":true}. */
static int parallel_unless_flag(const json_t *args, void *ud) {
    (void)ud;
    return json_is_true(json_object_get(args, "exclusive")) ? 0 : 1;
}

static int fail_exec(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    (void)ud;
    if (json_is_true(json_object_get(args, "quiet")))
        return WEIR_E_TOOL;
    weir__tool_exec_fail(exec, "E_BOOM", "boom %d", 42);
    *result = json_string("ignored");
    return WEIR_E_TOOL;
}

/* The "keyed" tools: record "<call id> <key> <attempt>" per execution. */
static json_t *g_keyed;

static int keyed_exec(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    (void)args, (void)ud;
    const char *key = weir__tool_exec_idempotency_key(exec);
    char buf[128];
    snprintf(buf, sizeof buf, "%s %s %d", weir__tool_exec_call_id(exec), key ? key : "(null)",
             weir__tool_exec_attempt(exec));
    pthread_mutex_lock(&g_mu);
    json_array_append_new(g_keyed, json_string(buf));
    pthread_mutex_unlock(&g_mu);
    *result = json_string("done");
    return *result ? WEIR_OK : WEIR_E_NOMEM;
}

static int bad_result_exec(weir_tool_exec *exec, const json_t *args, json_t **result,
                           void *ud) {
    (void)exec, (void)args, (void)ud;
    *result = json_integer(5);
    return WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct fx {
    char *dir;
    weir__log *log;
    weir__tools *tools;
    weir__hooks *hooks;
    weir_signal signal;
    weir__tool_step st;
    json_t *contexts;   /* accepted additional contexts */
    json_t *ctx_counts; /* log count at each accept */
    int accept_fail;    /* accept_context returns this when non-zero */
    json_t *hook_order; /* "pre:a", "post:a" */
    size_t framing;     /* events before the first call: turn/start, step/start */
    /* `weir log --check` errors teardown expects (NULL: none).  Only the
     * tests that make the scheduler fail set it: a failed run fabricates no
     * results, so its logged calls legitimately lack one. */
    json_t *expect_errors;
} fx;

static fx *g_fx;

static int accept_ctx(void *ud, const json_t *message, weir_error *err) {
    fx *f = ud;
    if (f->accept_fail)
        return weir__err(err, f->accept_fail, NULL, NULL, "inbox is closed");
    json_array_append_new(f->contexts, json_deep_copy(message));
    json_array_append_new(f->ctx_counts, json_integer((json_int_t)weir__log_count(f->log)));
    return WEIR_OK;
}

static void add_tool(fx *f, const char *name, int (*exec)(weir_tool_exec *, const json_t *,
                                                           json_t **, void *),
                     int (*safe)(const json_t *, void *), const char *schema, uint32_t flags) {
    json_t *params = schema ? json_loads(schema, 0, NULL) : NULL;
    weir_tool t = {sizeof(weir_tool), name, "a test tool", params, flags, exec, safe, NULL};
    weir_error err = {0};
    assert_int_equal(weir__tools_add(f->tools, "test", &t, &err), WEIR_OK);
    json_decref(params);
}

/* Append a framing event {turn[, step]} (reason completed for turn/end). */
static void frame(fx *f, const char *type, bool with_step) {
    json_t *data = json_pack("{s:i}", "turn", f->st.turn);
    if (with_step)
        json_object_set_new(data, "step", json_integer(f->st.step));
    if (strcmp(type, "turn/end") == 0)
        json_object_set_new(data, "reason", json_pack("{s:s}", "kind", "completed"));
    weir_error err = {0};
    assert_int_equal(weir__log_append(f->log, type, data, NULL, NULL, 0, NULL, &err), WEIR_OK);
    json_decref(data);
}

static bool is_framing(const json_t *ev) {
    const char *type = weir__json_str(ev, "type", "");
    return strncmp(type, "turn/", 5) == 0 || strncmp(type, "step/", 5) == 0;
}

/* Log events other than turn/step framing. */
static size_t body_count(fx *f) {
    size_t n = 0;
    for (size_t i = 0; i < weir__log_count(f->log); i++)
        n += !is_framing(weir__log_event(f->log, i));
    return n;
}

/* The call at seq is left without a result: `weir log --check` lists it
 * while its step is open. */
static void expect_missing(fx *f, size_t seq, const char *call_id) {
    char buf[256];
    snprintf(buf, sizeof buf, "seq %zu: tool/call '%s' has no tool/result yet", seq, call_id);
    if (!f->expect_errors)
        f->expect_errors = json_array();
    json_array_append_new(f->expect_errors, json_string(buf));
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->dir = wt_tmpdir("tools");
    assert_non_null(f->dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/s.jsonl", f->dir);
    weir_error err = {0};
    assert_int_equal(weir__log_open(path, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err), WEIR_OK);
    assert_int_equal(weir__tools_create(&f->tools), WEIR_OK);
    assert_int_equal(weir__hooks_create(&f->hooks), WEIR_OK);
    assert_int_equal(weir__signal_init(&f->signal), WEIR_OK);
    f->contexts = json_array();
    f->ctx_counts = json_array();
    f->hook_order = json_array();
    add_tool(f, "work", work_exec, always_parallel, NULL, 0);
    add_tool(f, "solo", work_exec, NULL, NULL, 0);
    add_tool(f, "maybe", work_exec, parallel_unless_flag, NULL, 0);
    add_tool(f, "fail", fail_exec, always_parallel, NULL, 0);
    add_tool(f, "badresult", bad_result_exec, NULL, NULL, 0);
    add_tool(f, "idem", keyed_exec, always_parallel, NULL, WEIR_TOOL_IDEMPOTENT);
    add_tool(f, "once", keyed_exec, always_parallel, NULL, 0);
    json_decref(g_keyed);
    g_keyed = json_array();
    add_tool(f, "pow", work_exec, NULL,
             "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},"
             "\"y\":{\"type\":\"number\"}},\"required\":[\"x\",\"y\"]}",
             0);
    f->st = (weir__tool_step){.tools = f->tools, .hooks = f->hooks, .log = f->log,
                              .agent = NULL, .signal = &f->signal, .turn = 1, .step = 2,
                              .max_parallel = 10, .accept_context = accept_ctx, .ud = f};
    frame(f, "turn/start", false);
    frame(f, "step/start", true);
    f->framing = weir__log_count(f->log);
    g_signal = &f->signal;
    g_fx = f;
    reset_bodies();
    *state = f;
    return 0;
}

/* `weir log --check` of the file: no errors, and what is open. */
static json_t *open_report(const char *path) {
    json_t *report = NULL;
    weir_error err = {0};
    assert_int_equal(weir_log_check(path, &report, &err), WEIR_OK);
    char *errors = weir__json_dump(json_object_get(report, "errors"));
    if (!json_is_true(json_object_get(report, "ok")))
        fail_msg("log check errors %s", errors);
    free(errors);
    json_t *open = json_incref(json_object_get(report, "open"));
    json_decref(report);
    return open;
}

/* End the step.  With f->expect_errors, exactly those calls have no
 * result: the log refuses to end the step until they are answered
 * (weir__log_settle_calls, as the driver does); `report`: `weir log
 * --check` lists exactly them as open (else only their number is checked,
 * by the answers settling them). */
static void end_step(fx *f, bool report) {
    json_t *data = json_pack("{s:i, s:i}", "turn", f->st.turn, "step", f->st.step);
    weir_error err = {0};
    int rc = weir__log_append(f->log, "step/end", data, NULL, NULL, 0, NULL, &err);
    if (f->expect_errors && !report) { /* the count only: answered, one result each */
        assert_int_equal(rc, WEIR_E_LOG_REJECTED);
        size_t before = weir__log_count(f->log);
        assert_int_equal(weir__log_settle_calls(f->log, NULL, &err), WEIR_OK);
        assert_int_equal(weir__log_count(f->log) - before, json_array_size(f->expect_errors));
        json_decref(f->expect_errors);
        f->expect_errors = NULL;
        rc = weir__log_append(f->log, "step/end", data, NULL, NULL, 0, NULL, &err);
    } else if (f->expect_errors) {
        assert_int_equal(rc, WEIR_E_LOG_REJECTED);
        assert_non_null(strstr(err.text, "a tool call of the step has no tool/result"));
        json_t *open = open_report(weir__log_path(f->log)), *left = json_array();
        size_t i;
        json_t *line;
        json_array_foreach(open, i, line) {
            if (strstr(json_string_value(line), "has no tool/"))
                json_array_append(left, line);
        }
        char *got_s = weir__json_dump(left), *want_s = weir__json_dump(f->expect_errors);
        if (strcmp(got_s, want_s) != 0)
            fail_msg("calls left without a result %s, want %s", got_s, want_s);
        free(got_s);
        free(want_s);
        json_decref(left);
        json_decref(open);
        json_decref(f->expect_errors);
        f->expect_errors = NULL;
        assert_int_equal(weir__log_settle_calls(f->log, NULL, &err), WEIR_OK);
        rc = weir__log_append(f->log, "step/end", data, NULL, NULL, 0, NULL, &err);
    }
    json_decref(data);
    if (rc != WEIR_OK)
        fail_msg("step/end: %s", err.text);
}

/* Close the step and turn, then `weir log --check` the file: no errors and
 * nothing left open. */
static void check_log(fx *f) {
    char path[4096];
    snprintf(path, sizeof path, "%s", weir__log_path(f->log));
    end_step(f, true);
    frame(f, "turn/end", false);
    weir__log_close(f->log);
    f->log = NULL;
    json_t *open = open_report(path);
    assert_int_equal(json_array_size(open), 0);
    json_decref(open);
}

static int teardown(void **state) {
    fx *f = *state;
    weir__tools_destroy(f->tools);
    weir__hooks_destroy(f->hooks);
    check_log(f);
    weir__signal_destroy(&f->signal);
    json_decref(f->contexts);
    json_decref(f->ctx_counts);
    json_decref(f->hook_order);
    json_decref(f->expect_errors);
    json_decref(g_keyed);
    g_keyed = NULL;
    wt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* Register listeners (owner "t") and freeze. */
static void hook(fx *f, const char *name, weir_hook_fn fn) {
    weir_error err = {0};
    assert_int_equal(weir__hooks_add(f->hooks, NULL, "t", 0, name, fn, NULL, &err), WEIR_OK);
}

static void freeze(fx *f) {
    const char *ids[] = {"t"};
    weir_error err = {0};
    assert_int_equal(weir__hooks_freeze(f->hooks, ids, 1, &err), WEIR_OK);
}

/* calls from compact text: [["id","name",{args}|"raw"], ...] */
static json_t *calls(const char *spec) {
    json_t *in = json_loads(spec, 0, NULL);
    assert_non_null(in);
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(in, i, c) {
        json_t *a = json_array_get(c, 2);
        char *text = json_is_string(a) ? strdup(json_string_value(a)) : weir__json_dump(a);
        json_array_append_new(out, json_pack("{s:O, s:O, s:s}", "id", json_array_get(c, 0),
                                             "name", json_array_get(c, 1), "arguments", text));
        free(text);
    }
    json_decref(in);
    return out;
}

static int run_calls(fx *f, const char *spec, bool *concluded, weir_error *err) {
    json_t *c = calls(spec);
    bool dummy;
    int rc = weir__tools_run(&f->st, c, concluded ? concluded : &dummy, err);
    json_decref(c);
    return rc;
}

/* "tool/call:a tool/result:a ..." for the log. */
static void log_summary(fx *f, char *out, size_t size) {
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < weir__log_count(f->log); i++) {
        const json_t *ev = weir__log_event(f->log, i);
        if (is_framing(ev))
            continue;
        const char *type = weir__json_str(ev, "type", "?");
        const json_t *data = json_object_get(ev, "data");
        const char *id = weir__json_str(data, "call_id", NULL);
        if (!id) {
            const json_t *msg = json_object_get(data, "message");
            id = weir__json_str(json_array_get(json_object_get(msg, "content"), 0), "call_id",
                                "?");
        }
        used += (size_t)snprintf(out + used, size - used, "%s%s:%s", used ? " " : "",
                                 strcmp(type, "tool/call") == 0       ? "call"
                                 : strcmp(type, "tool/rerun") == 0    ? "rerun"
                                 : strncmp(type, "job/", 4) == 0      ? type + 4
                                                                      : "result",
                                 id);
        if (used >= size)
            break;
    }
}

/* The first tool/result event for call `id` with a seq in (from, end)
 * (borrowed data), or NULL. */
static const json_t *result_between(fx *f, const char *id, size_t from, size_t end) {
    for (size_t i = from + 1; i < end; i++) {
        const json_t *ev = weir__log_event(f->log, i);
        if (strcmp(weir__json_str(ev, "type", ""), "tool/result") != 0)
            continue;
        const json_t *data = json_object_get(ev, "data");
        const json_t *block =
            json_array_get(json_object_get(json_object_get(data, "message"), "content"), 0);
        if (strcmp(weir__json_str(block, "call_id", ""), id) == 0)
            return ev;
    }
    return NULL;
}

/* The tool/result event for call `id` (borrowed data), or NULL. */
static const json_t *result_of(fx *f, const char *id) {
    return result_between(f, id, f->framing - 1, weir__log_count(f->log));
}

/* The model-visible result block of `id` as compact JSON (malloc'd). */
static char *result_json(fx *f, const char *id) {
    const json_t *ev = result_of(f, id);
    assert_non_null(ev);
    return weir__json_dump(json_object_get(ev, "data"));
}

static void assert_result(fx *f, const char *id, const char *want_data) {
    char *got = result_json(f, id);
    json_t *want = json_loads(want_data, 0, NULL);
    assert_non_null(want);
    char *w = weir__json_dump(want);
    assert_string_equal(got, w);
    free(got);
    free(w);
    json_decref(want);
}

/* Every tool/call from seq `first` on has a later tool/result whose
 * source_seqs is [the call's seq], with surface_op "append". */
static void assert_paired_from(fx *f, size_t first) {
    size_t end = weir__log_count(f->log);
    for (size_t i = first; i < end; i++) {
        const json_t *ev = weir__log_event(f->log, i);
        if (strcmp(weir__json_str(ev, "type", ""), "tool/call") != 0)
            continue;
        const char *id = weir__json_str(json_object_get(ev, "data"), "call_id", "");
        const json_t *res = result_between(f, id, i, end);
        assert_non_null(res);
        assert_true(weir__json_int(res, "seq", 0) > (json_int_t)i);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(res, "source_seqs"), 0)),
                         (json_int_t)i);
        assert_string_equal(weir__json_str(res, "surface_op", ""), "append");
    }
}

static void assert_paired(fx *f) { assert_paired_from(f, 0); }

/* ------------------------------------------------------------------------ */
/* Registry                                                                  */
/* ------------------------------------------------------------------------ */

static void duplicate_tool_names_name_both_plugins(void **state) {
    fx *f = *state;
    weir_tool t = {sizeof(weir_tool), "work", "again", NULL, 0, work_exec, NULL, NULL};
    weir_error err = {0};
    assert_int_equal(weir__tools_add(f->tools, "other", &t, &err), WEIR_E_DUPLICATE);
    assert_string_equal(err.text,
                        "tool 'work' of plugin 'other' is already registered by plugin 'test'");
    assert_string_equal(err.plugin, "other");
}

static void registration_copies_the_schema(void **state) {
    fx *f = *state;
    json_t *params = json_pack("{s:s}", "type", "object");
    weir_tool t = {sizeof(weir_tool), "copied", NULL, params, 0, work_exec, NULL, NULL};
    weir_error err = {0};
    assert_int_equal(weir__tools_add(f->tools, "p", &t, &err), WEIR_OK);
    json_object_set_new(params, "type", json_string("array"));
    json_decref(params);
    json_t *schemas = weir__tools_schemas(f->tools);
    const json_t *last = json_array_get(schemas, json_array_size(schemas) - 1);
    char *s = weir__json_dump(last);
    assert_string_equal(s, "{\"name\":\"copied\",\"description\":\"\",\"parameters\":{\"type\":"
                           "\"object\"}}");
    free(s);
    json_decref(schemas);
    /* Registration order. */
    schemas = weir__tools_schemas(f->tools);
    assert_string_equal(weir__json_str(json_array_get(schemas, 0), "name", ""), "work");
    /* The same array while the list is unchanged; a new one after a change
     * (add, update, remove), and the old one stays as it was. */
    json_t *again = weir__tools_schemas(f->tools);
    assert_ptr_equal(again, schemas);
    json_decref(again);
    size_t n = json_array_size(schemas);
    weir_tool more = {sizeof(weir_tool), "more", "d", NULL, 0, work_exec, NULL, NULL};
    assert_int_equal(weir__tools_add(f->tools, "p", &more, &err), WEIR_OK);
    json_t *added = weir__tools_schemas(f->tools);
    assert_ptr_not_equal(added, schemas);
    assert_int_equal(json_array_size(added), n + 1);
    assert_int_equal(json_array_size(schemas), n);
    more.description = "changed";
    assert_int_equal(weir__tools_update(f->tools, "p", &more, &err), WEIR_OK);
    json_t *updated = weir__tools_schemas(f->tools);
    assert_ptr_not_equal(updated, added);
    assert_string_equal(weir__json_str(json_array_get(updated, n), "description", ""), "changed");
    assert_int_equal(weir__tools_remove(f->tools, "p", "more", &err), WEIR_OK);
    json_t *removed = weir__tools_schemas(f->tools);
    assert_ptr_not_equal(removed, updated);
    assert_int_equal(json_array_size(removed), n);
    assert_string_equal(weir__json_str(json_array_get(updated, n), "name", ""), "more");
    json_decref(removed);
    json_decref(updated);
    json_decref(added);
    json_decref(schemas);
}

static void invalid_registrations_are_refused(void **state) {
    fx *f = *state;
    weir_error err = {0};
    weir_tool t = {sizeof(weir_tool), "has space", NULL, NULL, 0, work_exec, NULL, NULL};
    assert_int_equal(weir__tools_add(f->tools, "p", &t, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "tool_register: invalid tool name 'has space' (want "
                                  "[A-Za-z0-9_-]{1,64})");
    t.name = "noexec";
    t.execute = NULL;
    assert_int_equal(weir__tools_add(f->tools, "p", &t, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "tool_register: tool 'noexec' has no execute function");
    t.execute = work_exec;
    t.struct_size = 8;
    assert_int_equal(weir__tools_add(f->tools, "p", &t, &err), WEIR_E_INVAL);
    t.struct_size = sizeof t;
    t.name = "flagged";
    t.flags = 0x8;
    assert_int_equal(weir__tools_add(f->tools, "p", &t, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "tool_register: tool 'flagged': unknown flags 0x8");
    t.flags = WEIR_TOOL_INLINE | WEIR_TOOL_BACKGROUND;
    assert_int_equal(weir__tools_add(f->tools, "p", &t, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "tool_register: tool 'flagged': WEIR_TOOL_INLINE and "
                                  "WEIR_TOOL_BACKGROUND exclude each other (a background job "
                                  "runs on the tool pool)");
    t.flags = WEIR_TOOL_IDEMPOTENT | WEIR_TOOL_BACKGROUND;
    assert_int_equal(weir__tools_add(f->tools, "p", &t, &err), WEIR_OK);
}

/* ------------------------------------------------------------------------ */
/* Scheduling                                                                */
/* ------------------------------------------------------------------------ */

static void parallel_siblings_all_start_before_any_completes(void **state) {
    fx *f = *state;
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"work\",{\"id\":\"a\",\"barrier\":0,\"n\":3}],"
                               "[\"b\",\"work\",{\"id\":\"b\",\"barrier\":0,\"n\":3}],"
                               "[\"c\",\"work\",{\"id\":\"c\",\"barrier\":0,\"n\":3}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    assert_int_equal(g_nevents, 6);
    for (int i = 0; i < 3; i++)
        assert_memory_equal(g_events[i], "start:", 6);
    assert_int_equal(g_max_current, 3);
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a call:b call:c result:a result:b result:c");
    assert_paired(f);
}

/* WEIR_TOOL_INLINE: the step's thread runs the body, a pool tool's runs on a
 * worker.  An inline parallel call runs while a pooled sibling still runs (b
 * waits for c's end), and the results are committed in model order. */
static void inline_tool_runs_on_the_step_thread(void **state) {
    fx *f = *state;
    add_tool(f, "quick", where_exec, always_parallel, NULL, WEIR_TOOL_INLINE);
    add_tool(f, "pooled", where_exec, always_parallel, NULL, 0);
    g_step_thread = pthread_self();
    g_on_step = g_off_step = 0;
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"quick\",{\"id\":\"a\"}],"
                               "[\"b\",\"pooled\",{\"id\":\"b\",\"after\":\"c\"}],"
                               "[\"c\",\"quick\",{\"id\":\"c\",\"text\":\"C\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    assert_int_equal(g_on_step, 2);
    assert_int_equal(g_off_step, 1);
    assert_true(event_index("end:c") < event_index("end:b"));
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a result:a call:b call:c result:b result:c");
    char *c = result_json(f, "c");
    assert_non_null(strstr(c, "{\"type\":\"text\",\"text\":\"C\"}"));
    free(c);
    assert_paired(f);
}

static void exclusive_between_parallel_gives_three_groups(void **state) {
    fx *f = *state;
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"work\",{\"id\":\"a\",\"barrier\":0,\"n\":2}],"
                               "[\"b\",\"work\",{\"id\":\"b\",\"barrier\":0,\"n\":2}],"
                               "[\"c\",\"solo\",{\"id\":\"c\"}],"
                               "[\"d\",\"work\",{\"id\":\"d\",\"barrier\":1,\"n\":2}],"
                               "[\"e\",\"work\",{\"id\":\"e\",\"barrier\":1,\"n\":2}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    int sc = event_index("start:c"), ec = event_index("end:c");
    assert_true(sc > event_index("end:a") && sc > event_index("end:b"));
    assert_int_equal(ec, sc + 1); /* c ran alone */
    assert_true(ec < event_index("start:d") && ec < event_index("start:e"));
    char sum[512];
    log_summary(f, sum, sizeof sum);
    /* The exclusive call's tool/call waits for the first group's commits. */
    assert_string_equal(sum, "call:a call:b result:a result:b call:c result:c call:d call:e "
                             "result:d result:e");
    assert_paired(f);
}

static void classification_is_read_live_per_call(void **state) {
    fx *f = *state;
    weir_error err = {0};
    /* maybe(exclusive) is a barrier, maybe() is parallel: 3 groups again. */
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"maybe\",{\"id\":\"a\",\"barrier\":0,\"n\":2}],"
                               "[\"b\",\"maybe\",{\"id\":\"b\",\"barrier\":0,\"n\":2}],"
                               "[\"c\",\"maybe\",{\"id\":\"c\",\"exclusive\":true}],"
                               "[\"d\",\"maybe\",{\"id\":\"d\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    int sc = event_index("start:c");
    assert_true(sc > event_index("end:a") && sc > event_index("end:b"));
    assert_int_equal(event_index("end:c"), sc + 1);
    assert_true(event_index("start:d") > sc);
    assert_paired(f);
}

static void model_order_commits_despite_out_of_order_completion(void **state) {
    fx *f = *state;
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"work\",{\"id\":\"a\",\"after\":\"b\"}],"
                               "[\"b\",\"work\",{\"id\":\"b\",\"after\":\"c\"}],"
                               "[\"c\",\"work\",{\"id\":\"c\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    assert_true(event_index("end:c") < event_index("end:b"));
    assert_true(event_index("end:b") < event_index("end:a"));
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a call:b call:c result:a result:b result:c");
    assert_result(f, "b",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"b\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"ok:b\"}]}]}}");
    const json_t *call_b = weir__log_event(f->log, f->framing + 1);
    char *s = weir__json_dump(json_object_get(call_b, "data"));
    assert_string_equal(s, "{\"turn\":1,\"step\":2,\"call_id\":\"b\",\"name\":\"work\","
                           "\"arguments\":\"{\\\"id\\\":\\\"b\\\",\\\"after\\\":\\\"c\\\"}\","
                           "\"idempotency_key\":\":1:2:b\"}");
    free(s);
    assert_paired(f);
}

static void run_cap_test(fx *f, int cap) {
    g_cap = cap;
    f->st.max_parallel = cap;
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"work\",{\"id\":\"a\",\"total\":5}],"
                               "[\"b\",\"work\",{\"id\":\"b\",\"total\":5}],"
                               "[\"c\",\"work\",{\"id\":\"c\",\"total\":5}],"
                               "[\"d\",\"work\",{\"id\":\"d\",\"total\":5}],"
                               "[\"e\",\"work\",{\"id\":\"e\",\"total\":5}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    assert_int_equal(g_max_current, cap);
    assert_paired(f);
}

static void rolling_pool_caps_at_max_parallel(void **state) { run_cap_test(*state, 2); }

static void max_parallel_one_is_fully_serial(void **state) {
    fx *f = *state;
    run_cap_test(f, 1);
    const char *want[] = {"start:a", "end:a", "start:b", "end:b", "start:c",
                          "end:c",   "start:d", "end:d", "start:e", "end:e"};
    assert_int_equal(g_nevents, 10);
    for (int i = 0; i < 10; i++)
        assert_string_equal(g_events[i], want[i]);
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a result:a call:b result:b call:c result:c call:d result:d "
                             "call:e result:e");
}

static json_t *pre_record(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    char buf[64];
    snprintf(buf, sizeof buf, "pre:%s", weir__json_str(args, "call_id", "?"));
    json_array_append_new(g_fx->hook_order, json_string(buf));
    assert_int_equal(weir__json_int(args, "turn", 0), g_fx->st.turn);
    assert_int_equal(weir__json_int(args, "step", 0), g_fx->st.step);
    assert_true(json_is_string(json_object_get(args, "arguments")));
    return weir__call_next(call);
}

static json_t *post_record(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    char buf[64];
    snprintf(buf, sizeof buf, "post:%s", weir__json_str(args, "call_id", "?"));
    json_array_append_new(g_fx->hook_order, json_string(buf));
    assert_true(json_is_object(json_object_get(args, "result")));
    return weir__call_next(call);
}

static void ordered_pre_and_post_despite_out_of_order_bodies(void **state) {
    fx *f = *state;
    hook(f, "tools/pre-execute", pre_record);
    hook(f, "tools/post-execute", post_record);
    freeze(f);
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"work\",{\"id\":\"a\",\"after\":\"c\"}],"
                               "[\"b\",\"work\",{\"id\":\"b\",\"after\":\"a\"}],"
                               "[\"c\",\"work\",{\"id\":\"c\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    char *s = weir__json_dump(f->hook_order);
    assert_string_equal(s, "[\"pre:a\",\"pre:b\",\"pre:c\",\"post:a\",\"post:b\",\"post:c\"]");
    free(s);
    assert_paired(f);
}

static json_t *pre_deny_b(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    if (strcmp(weir__json_str(args, "call_id", ""), "b") == 0)
        return json_pack("{s:s, s:s}", "kind", "deny", "reason", "not allowed");
    return weir__call_next(call);
}

static void denial_becomes_an_error_the_model_sees(void **state) {
    fx *f = *state;
    hook(f, "tools/pre-execute", pre_deny_b);
    hook(f, "tools/post-execute", post_record);
    freeze(f);
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"solo\",{\"id\":\"a\"}],[\"b\",\"solo\",{\"id\":\"b\"}],"
                               "[\"c\",\"solo\",{\"id\":\"c\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_int_equal(event_index("start:b"), -1);
    assert_result(f, "b",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"b\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: denied: not allowed\"}],\"is_error\":true}]},\"error\":{\"name\":"
                  "\"ToolDenied\",\"code\":\"DENIED\",\"reason\":\"not allowed\"}}");
    /* Denied calls are never dispatched, so no post-execute for them. */
    char *s = weir__json_dump(f->hook_order);
    assert_string_equal(s, "[\"post:a\",\"post:c\"]");
    free(s);
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a result:a call:b result:b call:c result:c");
    assert_paired(f);
}

#define ABORT_RESULT_FMT                                                                    \
    "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"            \
    "\"tool_result\",\"call_id\":\"%s\",\"content\":[{\"type\":\"text\",\"text\":\"Error: tool " \
    "call aborted before dispatch\"}],\"is_error\":true}]},\"error\":{\"name\":\"AbortError\","   \
    "\"code\":\"ABORTED_BEFORE_DISPATCH\"}}"

static void assert_aborted(fx *f, const char *id) {
    char want[1024];
    snprintf(want, sizeof want, ABORT_RESULT_FMT, id);
    assert_result(f, id, want);
}

static void abort_before_the_group_gives_synthetic_pairs(void **state) {
    fx *f = *state;
    weir__signal_cancel(&f->signal, "user");
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"work\",{\"id\":\"a\"}],[\"b\",\"solo\",{\"id\":\"b\"}],"
                               "[\"c\",\"nope\",{}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_int_equal(g_nevents, 0);
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a result:a call:b result:b call:c result:c");
    assert_aborted(f, "a");
    assert_aborted(f, "b");
    assert_aborted(f, "c");
    const json_t *call_c = weir__log_event(f->log, f->framing + 4);
    char *s = weir__json_dump(json_object_get(call_c, "data"));
    assert_string_equal(s, "{\"turn\":1,\"step\":2,\"call_id\":\"c\",\"name\":\"nope\","
                           "\"arguments\":\"{}\",\"idempotency_key\":\":1:2:c\"}");
    free(s);
    assert_paired(f);
}

static json_t *pre_cancel_on_b(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    if (strcmp(weir__json_str(args, "call_id", ""), "b") == 0)
        weir__signal_cancel(g_signal, "user");
    return weir__call_next(call);
}

static void abort_during_pre_execute(void **state) {
    fx *f = *state;
    hook(f, "tools/pre-execute", pre_cancel_on_b);
    freeze(f);
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"work\",{\"id\":\"a\",\"wait_cancel\":true}],"
                               "[\"b\",\"work\",{\"id\":\"b\"}],[\"c\",\"work\",{\"id\":\"c\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    assert_int_equal(event_index("start:b"), -1);
    assert_int_equal(event_index("start:c"), -1);
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a call:b result:a result:b call:c result:c");
    assert_result(f, "a",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"a\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"ok:a\"}]}]}}");
    assert_aborted(f, "b");
    assert_aborted(f, "c");
    assert_paired(f);
}

static void abort_with_started_calls_commits_them(void **state) {
    fx *f = *state;
    f->st.max_parallel = 2;
    hook(f, "tools/post-execute", post_record);
    freeze(f);
    weir_error err = {0};
    assert_int_equal(
        run_calls(f,
                  "[[\"a\",\"work\",{\"id\":\"a\",\"barrier\":0,\"n\":2,\"cancel\":true}],"
                  "[\"b\",\"work\",{\"id\":\"b\",\"barrier\":0,\"n\":2,\"wait_cancel\":true}],"
                  "[\"c\",\"work\",{\"id\":\"c\"}],[\"d\",\"solo\",{\"id\":\"d\"}]]",
                  NULL, &err),
        WEIR_OK);
    assert_false(g_timed_out);
    assert_int_equal(event_index("start:c"), -1);
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a call:b result:a result:b call:c result:c call:d result:d");
    char *s = weir__json_dump(f->hook_order);
    assert_string_equal(s, "[\"post:a\",\"post:b\"]");
    free(s);
    assert_aborted(f, "c");
    assert_aborted(f, "d");
    assert_paired(f);
}

static void unknown_tool_is_an_error_result(void **state) {
    fx *f = *state;
    weir_error err = {0};
    assert_int_equal(run_calls(f, "[[\"a\",\"nope\",{\"q\":1}],[\"b\",\"work\",{\"id\":\"b\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_result(f, "a",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"a\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: unknown tool 'nope'\"}],\"is_error\":true}]},\"error\":{\"name\":"
                  "\"UnknownTool\",\"code\":\"UNKNOWN_TOOL\"}}");
    assert_int_equal(event_index("start:b"), 0);
    assert_paired(f);
}

static void failing_tool_is_a_structured_error(void **state) {
    fx *f = *state;
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"fail\",{}],[\"b\",\"fail\",{\"quiet\":true}],"
                               "[\"c\",\"badresult\",{}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_result(f, "a",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"a\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: boom 42\"}],\"is_error\":true}]},\"error\":{\"name\":\"ToolError\","
                  "\"code\":\"E_BOOM\",\"reason\":\"boom 42\"}}");
    assert_result(f, "b",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"b\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: tool 'fail' failed: tool failure\"}],\"is_error\":true}]},\"error\":"
                  "{\"name\":\"ToolError\",\"code\":\"TOOL_ERROR\",\"reason\":\"tool 'fail' "
                  "failed: tool failure\"}}");
    char *c = result_json(f, "c");
    assert_non_null(strstr(c, "\"code\":\"INVALID_RESULT\""));
    free(c);
    assert_paired(f);
}

static void invalid_arguments_name_the_field(void **state) {
    fx *f = *state;
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"pow\",{\"x\":\"two\",\"y\":2}],[\"b\",\"pow\","
                               "\"{oops\"],[\"c\",\"pow\",{\"x\":2,\"y\":3,\"id\":\"c\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_result(f, "a",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"a\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: invalid arguments for tool 'pow': $.x: expected number, got "
                  "string\"}],\"is_error\":true}]},\"error\":{\"name\":\"InvalidArguments\","
                  "\"code\":\"INVALID_ARGUMENTS\",\"reason\":\"$.x: expected number, got "
                  "string\"}}");
    char *b = result_json(f, "b");
    assert_non_null(strstr(b, "Error: invalid arguments for tool 'pow': not valid JSON: "));
    free(b);
    assert_int_equal(event_index("start:a"), -1);
    assert_int_equal(event_index("start:c"), 0);
    /* The logged arguments are the model's raw text. */
    const json_t *call_b = weir__log_event(f->log, f->framing + 2);
    assert_string_equal(weir__json_str(json_object_get(call_b, "data"), "arguments", ""), "{oops");
    assert_paired(f);
}

static json_t *post_add_context(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    json_t *r = weir__call_next(call);
    char text[64];
    snprintf(text, sizeof text, "ctx-%s", weir__json_str(args, "call_id", "?"));
    json_object_set_new(r, "additional_contexts",
                        json_pack("[{s:s, s:[{s:s, s:s}]}]", "role", "user", "content", "type",
                                  "text", "text", text));
    if (strcmp(weir__json_str(args, "call_id", ""), "b") == 0)
        json_object_set_new(r, "content", json_pack("[{s:s, s:s}]", "type", "text", "text",
                                                    "redacted"));
    return r;
}

static void additional_contexts_follow_each_result_in_model_order(void **state) {
    fx *f = *state;
    hook(f, "tools/post-execute", post_add_context);
    freeze(f);
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"work\",{\"id\":\"a\",\"after\":\"b\"}],"
                               "[\"b\",\"work\",{\"id\":\"b\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_int_equal(json_array_size(f->contexts), 2);
    const char *texts[] = {"ctx-a", "ctx-b"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *m = json_array_get(f->contexts, i);
        assert_string_equal(
            weir__json_str(json_array_get(json_object_get(m, "content"), 0), "text", ""),
            texts[i]);
        /* Accepted right after that call's own tool/result. */
        const json_t *res = result_of(f, i == 0 ? "a" : "b");
        assert_int_equal(json_integer_value(json_array_get(f->ctx_counts, i)),
                         weir__json_int(res, "seq", -1) + 1);
    }
    char *b = result_json(f, "b");
    assert_non_null(strstr(b, "\"content\":[{\"type\":\"text\",\"text\":\"redacted\"}]"));
    free(b);
    assert_paired(f);
}

/* a: content blocks that are not blocks; b: a context that is not a message. */
static json_t *post_bad_shapes(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    json_t *r = weir__call_next(call);
    if (strcmp(weir__json_str(args, "call_id", ""), "a") == 0)
        json_object_set_new(r, "content", json_pack("[i]", 1));
    else
        json_object_set_new(r, "additional_contexts", json_pack("[s]", "not a message"));
    return r;
}

static void post_execute_invalid_blocks_or_contexts_fail_closed(void **state) {
    fx *f = *state;
    hook(f, "tools/post-execute", post_bad_shapes);
    freeze(f);
    weir_error err = {0};
    assert_int_equal(run_calls(f, "[[\"a\",\"solo\",{\"id\":\"a\"}],[\"b\",\"solo\",{\"id\":\"b\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_result(f, "a",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"a\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: tools/post-execute returned an invalid result for tool 'solo': content[0] "
                  "is not a content block\"}],\"is_error\":true}]},\"error\":{\"name\":"
                  "\"HookError\",\"code\":\"HOOK_FAILED\",\"reason\":\"content[0] is not a content "
                  "block\"}}");
    assert_result(f, "b",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"b\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: tools/post-execute returned an invalid result for tool 'solo': "
                  "additional_contexts[0] is not a message object\"}],\"is_error\":true}]},"
                  "\"error\":{\"name\":\"HookError\",\"code\":\"HOOK_FAILED\",\"reason\":"
                  "\"additional_contexts[0] is not a message object\"}}");
    assert_int_equal(json_array_size(f->contexts), 0);
    assert_paired(f);
}

static void scheduler_failure_fabricates_no_results(void **state) {
    fx *f = *state;
    hook(f, "tools/post-execute", post_add_context);
    freeze(f);
    f->accept_fail = WEIR_E_STATE;
    weir_error err = {0};
    assert_int_equal(
        run_calls(f,
                  "[[\"a\",\"work\",{\"id\":\"a\",\"barrier\":0,\"n\":2}],"
                  "[\"b\",\"work\",{\"id\":\"b\",\"barrier\":0,\"n\":2,\"after\":\"a\"}],"
                  "[\"c\",\"solo\",{\"id\":\"c\"}]]",
                  NULL, &err),
        WEIR_E_STATE);
    assert_string_equal(err.text, "inbox is closed");
    assert_false(g_timed_out);
    /* b was in flight and finished; nothing was fabricated for b or c. */
    assert_true(event_index("end:b") >= 0);
    assert_int_equal(event_index("start:c"), -1);
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a call:b result:a");
    expect_missing(f, f->framing + 1, "b");
}

static void scheduler_failure_on_log_append(void **state) {
    fx *f = *state;
    char path[4096];
    snprintf(path, sizeof path, "%s/s.jsonl", f->dir);
    weir__log_close(f->log);
    weir_error err = {0};
    assert_int_equal(weir__log_open_readonly(path, &f->log, &err), WEIR_OK);
    f->st.log = f->log;
    int rc = run_calls(f, "[[\"a\",\"work\",{\"id\":\"a\"}],[\"b\",\"work\",{\"id\":\"b\"}]]",
                       NULL, &err);
    assert_int_not_equal(rc, WEIR_OK);
    assert_int_equal(err.code, rc);
    assert_int_equal(g_nevents, 0);
    assert_int_equal(weir__log_count(f->log), f->framing);
    assert_int_equal(body_count(f), 0);
    /* Writable again, so teardown can close the step and turn. */
    weir__log_close(f->log);
    assert_int_equal(weir__log_open(path, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err), WEIR_OK);
    f->st.log = f->log;
}

static void tool_can_conclude_the_turn(void **state) {
    fx *f = *state;
    bool concluded = false;
    weir_error err = {0};
    assert_int_equal(run_calls(f, "[[\"a\",\"work\",{\"id\":\"a\"}]]", &concluded, &err), WEIR_OK);
    assert_false(concluded);
    assert_int_equal(run_calls(f,
                               "[[\"b\",\"work\",{\"id\":\"b\",\"concludes\":true}],"
                               "[\"c\",\"work\",{\"id\":\"c\"}]]",
                               &concluded, &err),
                     WEIR_OK);
    assert_true(concluded);
    assert_paired(f);
}

static void invalid_calls_are_refused_before_logging(void **state) {
    fx *f = *state;
    json_t *c = json_pack("[{s:s}]", "name", "work");
    bool concluded;
    weir_error err = {0};
    assert_int_equal(weir__tools_run(&f->st, c, &concluded, &err), WEIR_E_INVAL);
    assert_string_equal(err.text, "tools: call 0 has no string 'id' or 'name'");
    json_decref(c);
    assert_int_equal(weir__log_count(f->log), f->framing);
    assert_int_equal(body_count(f), 0);
}

/* ------------------------------------------------------------------------ */
/* Tools across a crash                                                      */
/* ------------------------------------------------------------------------ */

static json_t *pre_key(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    char buf[128];
    snprintf(buf, sizeof buf, "pre:%s:%s:%d", weir__json_str(args, "call_id", "?"),
             weir__json_str(args, "idempotency_key", "?"),
             (int)weir__json_int(args, "attempt", 0));
    json_array_append_new(g_fx->hook_order, json_string(buf));
    return weir__call_next(call);
}

static json_t *post_key(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    char buf[128];
    snprintf(buf, sizeof buf, "post:%s:%s:%d", weir__json_str(args, "call_id", "?"),
             weir__json_str(args, "idempotency_key", "?"),
             (int)weir__json_int(args, "attempt", 0));
    json_array_append_new(g_fx->hook_order, json_string(buf));
    return weir__call_next(call);
}

/* Every call has a key "<session>:<turn>:<step>:<call id>" (no agent here:
 * an empty session id), logged in its tool/call, given to the body (attempt
 * 1) and to both policy hooks. */
static void every_call_gets_its_idempotency_key(void **state) {
    fx *f = *state;
    hook(f, "tools/pre-execute", pre_key);
    hook(f, "tools/post-execute", post_key);
    freeze(f);
    weir_error err = {0};
    assert_int_equal(run_calls(f, "[[\"a\",\"idem\",{}],[\"b:x\",\"once\",{}]]", NULL, &err),
                     WEIR_OK);
    /* the bodies ran side by side: either order */
    char *s = weir__json_dump(g_keyed);
    if (strcmp(s, "[\"a :1:2:a 1\",\"b:x :1:2:b:x 1\"]") != 0 &&
        strcmp(s, "[\"b:x :1:2:b:x 1\",\"a :1:2:a 1\"]") != 0)
        fail_msg("bodies saw %s", s);
    free(s);
    /* pre and post each in model order; a's commit may come before b's
     * pre when a's body is done by then (the rolling pool commits the
     * ready prefix after every start) */
    s = weir__json_dump(f->hook_order);
    if (strcmp(s, "[\"pre:a::1:2:a:1\",\"pre:b:x::1:2:b:x:1\",\"post:a::1:2:a:1\","
                  "\"post:b:x::1:2:b:x:1\"]") != 0 &&
        strcmp(s, "[\"pre:a::1:2:a:1\",\"post:a::1:2:a:1\",\"pre:b:x::1:2:b:x:1\","
                  "\"post:b:x::1:2:b:x:1\"]") != 0)
        fail_msg("hooks saw %s", s);
    free(s);
    const json_t *call_a = weir__log_event(f->log, f->framing);
    assert_string_equal(weir__json_str(json_object_get(call_a, "data"), "idempotency_key", ""),
                        ":1:2:a");
    assert_paired(f);
}

/* The result of `id` is the INTERRUPTED error, its text ending in `more`. */
static void assert_interrupted(fx *f, const char *id, const char *more) {
    char want[1024];
    snprintf(want, sizeof want,
             "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
             "\"tool_result\",\"call_id\":\"%s\",\"content\":[{\"type\":\"text\",\"text\":"
             "\"Error: interrupted by a crash: the tool may or may not have run; do not assume "
             "either%s\"}],\"is_error\":true}]},\"error\":{\"name\":\"AbortError\",\"code\":"
             "\"INTERRUPTED\"}}",
             id, more);
    assert_result(f, id, want);
}

/* Log a tool/call as the scheduler would; returns its seq. */
static size_t log_call(fx *f, const char *id, const char *name, const char *key) {
    json_t *data = json_pack("{s:i, s:i, s:s, s:s, s:s, s:s}", "turn", f->st.turn, "step",
                             f->st.step, "call_id", id, "name", name, "arguments", "{}",
                             "idempotency_key", key);
    size_t seq = 0;
    weir_error err = {0};
    assert_int_equal(weir__log_append(f->log, "tool/call", data, NULL, NULL, 0, &seq, &err),
                     WEIR_OK);
    json_decref(data);
    return seq;
}

/*
 * weir__tools_resume over the calls a crash cut, in model order: "a" (idem,
 * logged) and "c" (idem, never dispatched) run again with attempt 2 through
 * both hooks, "a" with its logged key; "b" (once, logged), "d" (unknown) and
 * "e" (idem, re-run 3 times already) get INTERRUPTED results and no hook.
 */
static void resume_reruns_idempotent_calls_and_interrupts_the_rest(void **state) {
    fx *f = *state;
    hook(f, "tools/pre-execute", pre_key);
    hook(f, "tools/post-execute", post_key);
    freeze(f);
    size_t a = log_call(f, "a", "idem", "s1:1:2:a");
    size_t b = log_call(f, "b", "once", "s1:1:2:b");
    size_t e = log_call(f, "e", "idem", "s1:1:2:e");
    json_t *cut = json_pack(
        "[{s:s, s:s, s:s, s:I, s:s, s:i}, {s:s, s:s, s:s, s:I, s:s, s:i},"
        " {s:s, s:s, s:s, s:I, s:s, s:i}, {s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, s:i}]",
        "id", "a", "name", "idem", "arguments", "{}", "call_seq", (json_int_t)a,
        "idempotency_key", "s1:1:2:a", "reruns", 0,
        "id", "b", "name", "once", "arguments", "{}", "call_seq", (json_int_t)b,
        "idempotency_key", "s1:1:2:b", "reruns", 0,
        "id", "e", "name", "idem", "arguments", "{}", "call_seq", (json_int_t)e,
        "idempotency_key", "s1:1:2:e", "reruns", 3,
        "id", "c", "name", "idem", "arguments", "{}", "reruns", 0,
        "id", "d", "name", "nope", "arguments", "{}", "reruns", 0);
    assert_non_null(cut);
    weir_error err = {0};
    assert_int_equal(weir__tools_resume(&f->st, cut, &err), WEIR_OK);
    json_decref(cut);
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:a call:b call:e rerun:a result:a result:b result:e call:c "
                             "rerun:c result:c call:d result:d");
    char *s = weir__json_dump(g_keyed);
    assert_string_equal(s, "[\"a s1:1:2:a 2\",\"c :1:2:c 2\"]");
    free(s);
    s = weir__json_dump(f->hook_order);
    assert_string_equal(s, "[\"pre:a:s1:1:2:a:2\",\"post:a:s1:1:2:a:2\",\"pre:c::1:2:c:2\","
                           "\"post:c::1:2:c:2\"]");
    free(s);
    assert_result(f, "a",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"a\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"done\"}]}]}}");
    assert_interrupted(f, "b", "");
    assert_interrupted(f, "d", "");
    assert_interrupted(f, "e", " (it was run again 3 times after crashes and never finished)");
    /* the re-runs are recorded before their pre-execute: a crash during one
     * leaves a count for the next resume */
    for (size_t i = f->framing; i < weir__log_count(f->log); i++) {
        const json_t *ev = weir__log_event(f->log, i);
        if (strcmp(weir__json_str(ev, "type", ""), "tool/rerun") != 0)
            continue;
        assert_true(json_is_true(json_object_get(ev, "ignorable")));
        const json_t *d = json_object_get(ev, "data");
        assert_int_equal(weir__json_int(d, "attempt", 0), 2);
        assert_true(json_is_string(json_object_get(d, "idempotency_key")));
    }
    const json_t *call_c = weir__log_event(f->log, (size_t)(e + 5));
    assert_string_equal(weir__json_str(call_c, "type", ""), "tool/call");
    assert_string_equal(weir__json_str(json_object_get(call_c, "data"), "idempotency_key", ""),
                        ":1:2:c");
    assert_paired(f);
}

/* ------------------------------------------------------------------------ */
/* Background jobs                                                           */
/* ------------------------------------------------------------------------ */

typedef struct done_rec {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count;
    char job_id[64], call_id[64], tool[64];
    char *result;
} done_rec;

static void on_done(const char *job_id, const char *call_id, const char *tool,
                    const json_t *result, void *ud) {
    done_rec *d = ud;
    pthread_mutex_lock(&d->mu);
    d->count++;
    snprintf(d->job_id, sizeof d->job_id, "%s", job_id);
    snprintf(d->call_id, sizeof d->call_id, "%s", call_id);
    snprintf(d->tool, sizeof d->tool, "%s", tool);
    free(d->result);
    d->result = weir__json_dump(result);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void wait_done(done_rec *d, int count) {
    pthread_mutex_lock(&d->mu);
    while (d->count < count)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

/* The next finished job of `j` (weir__jobs_take; the 30 s bound is never expected). */
static json_t *take_job(weir__jobs *j) {
    json_t *job = weir__jobs_take(j);
    for (int i = 0; i < 30000 && !job; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        job = weir__jobs_take(j);
    }
    assert_non_null(job);
    return job;
}

/* The data of the last log event of `type` (borrowed), or NULL. */
static const json_t *last_data(fx *f, const char *type) {
    for (size_t i = weir__log_count(f->log); i-- > 0;) {
        const json_t *ev = weir__log_event(f->log, i);
        if (strcmp(weir__json_str(ev, "type", ""), type) == 0)
            return json_object_get(ev, "data");
    }
    return NULL;
}

static size_t count_type(fx *f, const char *type) {
    size_t n = 0;
    for (size_t i = 0; i < weir__log_count(f->log); i++)
        n += strcmp(weir__json_str(weir__log_event(f->log, i), "type", ""), type) == 0;
    return n;
}

/* The receipt of call `id`: its result text, parsed (new). */
static json_t *receipt_of(fx *f, const char *id) {
    const json_t *res = result_of(f, id);
    assert_non_null(res);
    const json_t *block = json_array_get(
        json_object_get(json_object_get(json_object_get(res, "data"), "message"), "content"), 0);
    const char *text = weir__json_str(json_array_get(json_object_get(block, "content"), 0),
                                      "text", "");
    json_t *receipt = json_loads(text, 0, NULL);
    assert_non_null(receipt);
    return receipt;
}

static void assert_dump(const json_t *v, const char *want) {
    char *got = weir__json_dump(v);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void background_tool_returns_a_receipt_and_completes(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(2, on_done, &d, &f->st.jobs, &err), WEIR_OK);
    add_tool(f, "bg", work_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    assert_int_equal(run_calls(f, "[[\"k1\",\"bg\",{\"id\":\"k1\",\"text\":\"late\"}]]", NULL,
                               &err),
                     WEIR_OK);
    wait_done(&d, 1);
    json_t *receipt = receipt_of(f, "k1");
    assert_string_equal(weir__json_str(receipt, "status", ""), "queued");
    assert_string_equal(weir__json_str(receipt, "call_id", ""), "k1");
    assert_string_equal(weir__json_str(receipt, "job_id", ""), d.job_id);
    assert_memory_equal(d.job_id, "job-", 4);
    assert_string_equal(weir__json_str(receipt, "instruction", ""),
                        "The job runs in the background; its result will arrive later. Do not "
                        "repeat this call.");
    json_decref(receipt);
    assert_string_equal(d.call_id, "k1");
    assert_string_equal(d.tool, "bg");
    assert_string_equal(d.result, "{\"content\":[{\"type\":\"text\",\"text\":\"late\"}],"
                                  "\"is_error\":false}");
    /* the intent is in the log before the receipt, and is ignorable */
    char sum[512];
    log_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "call:k1 queued:k1 result:k1");
    char want[512];
    snprintf(want, sizeof want,
             "{\"turn\":1,\"step\":2,\"job_id\":\"%s\",\"call_id\":\"k1\",\"tool\":\"bg\","
             "\"idempotency_key\":\":1:2:k1\"}",
             d.job_id);
    assert_dump(last_data(f, "job/queued"), want);
    assert_true(json_is_true(json_object_get(weir__log_event(f->log, f->framing + 1),
                                             "ignorable")));
    /* finished, still active until taken; taking hands on its outcome */
    json_t *active = weir__jobs_active(f->st.jobs);
    assert_int_equal(json_array_size(active), 1);
    json_decref(active);
    json_t *job = take_job(f->st.jobs);
    snprintf(want, sizeof want,
             "{\"job_id\":\"%s\",\"call_id\":\"k1\",\"tool\":\"bg\",\"arguments\":"
             "\"{\\\"id\\\":\\\"k1\\\",\\\"text\\\":\\\"late\\\"}\",\"turn\":1,\"step\":2,"
             "\"outcome\":\"returned\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
             "\"late\"}],\"is_error\":false},\"idempotency_key\":\":1:2:k1\"}",
             d.job_id);
    assert_dump(job, want);
    /* taken: not taken again, not cancellable, still listed until forgotten */
    assert_null(weir__jobs_take(f->st.jobs));
    assert_int_equal(weir__jobs_cancel(f->st.jobs, d.job_id, "user", &err), WEIR_E_NOT_FOUND);
    active = weir__jobs_active(f->st.jobs);
    assert_int_equal(json_array_size(active), 1);
    json_decref(active);
    /* settled: the ledger first, then the service message */
    json_t *msg = NULL, *ctxs = NULL;
    assert_int_equal(weir__tools_settle_job(&f->st, job, true, &msg, &ctxs, &err), WEIR_OK);
    snprintf(want, sizeof want,
             "{\"turn\":1,\"step\":2,\"job_id\":\"%s\",\"call_id\":\"k1\",\"tool\":\"bg\","
             "\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"late\"}],\"is_error\":false}}",
             d.job_id);
    assert_dump(last_data(f, "job/returned"), want);
    snprintf(want, sizeof want,
             "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Background job %s "
             "(tool bg, call k1) finished:\\nlate\"}],\"source\":{\"kind\":\"service\",\"name\":"
             "\"jobs\",\"job_id\":\"%s\",\"call_id\":\"k1\",\"status\":\"returned\"}}",
             d.job_id, d.job_id);
    assert_dump(msg, want);
    assert_null(ctxs);
    weir__jobs_forget(f->st.jobs, d.job_id);
    active = weir__jobs_active(f->st.jobs);
    assert_int_equal(json_array_size(active), 0);
    json_decref(active);
    json_decref(msg);
    json_decref(job);
    weir__jobs_destroy(f->st.jobs);
    f->st.jobs = NULL;
    free(d.result);
    assert_paired(f);
}

/* on_done that records whether its own job is still listed as active. */
typedef struct listed_rec {
    done_rec d;
    weir__jobs *j;
    int listed; /* 1 listed, 0 not, -1 unset */
} listed_rec;

static void on_done_check_listed(const char *job_id, const char *call_id, const char *tool,
                                 const json_t *result, void *ud) {
    listed_rec *l = ud;
    json_t *active = weir__jobs_active(l->j);
    int listed = active && json_array_size(active) == 1 &&
                 strcmp(json_string_value(json_array_get(active, 0)), job_id) == 0;
    json_decref(active);
    pthread_mutex_lock(&l->d.mu);
    l->listed = listed;
    pthread_mutex_unlock(&l->d.mu);
    on_done(job_id, call_id, tool, result, &l->d);
}

/* Between finishing and handing its result on, a job must not vanish: a host
 * polling weir_agent_active_jobs would see no pending work and no result.
 * It stays listed until the driver takes it. */
static void job_stays_active_until_its_result_is_delivered(void **state) {
    fx *f = *state;
    listed_rec l = {{PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL},
                    NULL, -1};
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(1, on_done_check_listed, &l, &l.j, &err), WEIR_OK);
    add_tool(f, "bg", work_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    f->st.jobs = l.j;
    assert_int_equal(run_calls(f, "[[\"k1\",\"bg\",{\"id\":\"k1\"}]]", NULL, &err), WEIR_OK);
    wait_done(&l.d, 1);
    assert_int_equal(l.listed, 1);
    json_t *active = weir__jobs_active(l.j);
    assert_int_equal(json_array_size(active), 1); /* finished, not taken */
    json_decref(active);
    assert_int_equal(weir__jobs_unfinished(l.j), 0);
    json_t *job = take_job(l.j);
    active = weir__jobs_active(l.j);
    assert_int_equal(json_array_size(active), 1); /* taken, being settled */
    json_decref(active);
    weir__jobs_forget(l.j, weir__json_str(job, "job_id", ""));
    json_decref(job);
    active = weir__jobs_active(l.j);
    assert_int_equal(json_array_size(active), 0);
    json_decref(active);
    weir__jobs_destroy(l.j);
    f->st.jobs = NULL;
    free(l.d.result);
    assert_paired(f);
}

static int jobs_wait_exec(weir_tool_exec *exec, const json_t *args, json_t **result,
                          void *ud) {
    (void)args, (void)ud;
    pthread_mutex_lock(&g_mu);
    g_started++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    int rc = weir__signal_sleep(weir__tool_exec_signal(exec), 30000);
    if (rc == WEIR_E_CANCELLED) {
        weir__tool_exec_fail(exec, "CANCELLED", "job cancelled");
        return rc;
    }
    *result = json_string("slept");
    return WEIR_OK;
}

static void wait_started(int n) {
    pthread_mutex_lock(&g_mu);
    while (g_started < n && !g_timed_out)
        wait_locked();
    pthread_mutex_unlock(&g_mu);
    assert_false(g_timed_out);
}

static void submit(weir__jobs *j, const weir__tool_def *def, const char *job_id,
                   const char *call_id, const char *key) {
    json_t *args = json_object();
    weir__job_call call = {.job_id = job_id, .call_id = call_id, .key = key,
                           .arguments = "{}", .turn = 1, .step = 2};
    weir_error err = {0};
    assert_int_equal(weir__jobs_submit(j, def, &call, args, &err), WEIR_OK);
    json_decref(args);
}

/* on_done held at its start, where a preempted worker is, until the driver
 * has taken and forgotten the job; then it reads the strings it was given
 * (what the agent's on_job_done json_packs). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, forgotten;
    char job_id[64], call_id[64], tool[64];
} gate_rec;

static void on_done_gated(const char *job_id, const char *call_id, const char *tool,
                          const json_t *result, void *ud) {
    (void)result;
    gate_rec *g = ud;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->forgotten)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    snprintf(g->job_id, sizeof g->job_id, "%s", job_id);
    snprintf(g->call_id, sizeof g->call_id, "%s", call_id);
    snprintf(g->tool, sizeof g->tool, "%s", tool);
}

/* A finished job can be taken (and settled, and forgotten) as soon as it is
 * listed finished, which is before its worker has told on_done: the record
 * on_done reads must outlive the forget (ASan: heap-use-after-free in
 * job_run before the fix). */
static void job_strings_outlive_the_settle_of_the_job(void **state) {
    fx *f = *state;
    gate_rec g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, "", "", ""};
    weir__jobs *j;
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(1, on_done_gated, &g, &j, &err), WEIR_OK);
    add_tool(f, "bg", work_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    char id[48];
    weir__jobs_new_id(id, sizeof id);
    submit(j, weir__tools_find(f->tools, "bg"), id, "call-1", NULL);
    pthread_mutex_lock(&g.mu);
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    json_t *job = take_job(j); /* the driver settles it */
    weir__jobs_forget(j, weir__json_str(job, "job_id", ""));
    json_decref(job);
    pthread_mutex_lock(&g.mu);
    g.forgotten = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    weir__jobs_destroy(j); /* joins the worker */
    assert_string_equal(g.job_id, id);
    assert_string_equal(g.call_id, "call-1");
    assert_string_equal(g.tool, "bg");
}

static void jobs_cancel_fires_the_job_signal(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir__jobs *j;
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(4, on_done, &d, &j, &err), WEIR_OK);
    add_tool(f, "waiter", jobs_wait_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    const weir__tool_def *def = weir__tools_find(f->tools, "waiter");
    char id1[48], id2[48];
    weir__jobs_new_id(id1, sizeof id1);
    weir__jobs_new_id(id2, sizeof id2);
    assert_string_not_equal(id1, id2);
    submit(j, def, id1, "c1", "k1");
    submit(j, def, id2, "c2", NULL);
    json_t *active = weir__jobs_active(j);
    assert_int_equal(json_array_size(active), 2);
    assert_string_equal(json_string_value(json_array_get(active, 0)), id1);
    assert_string_equal(json_string_value(json_array_get(active, 1)), id2);
    json_decref(active);
    wait_started(2);
    assert_int_equal(weir__jobs_unfinished(j), 2);
    assert_int_equal(weir__jobs_cancel(j, id1, "user", &err), WEIR_OK);
    wait_done(&d, 1);
    assert_string_equal(d.job_id, id1);
    assert_string_equal(d.result,
                        "{\"content\":[{\"type\":\"text\",\"text\":\"Error: job cancelled\"}],"
                        "\"is_error\":true,\"error\":{\"name\":\"ToolError\",\"code\":"
                        "\"CANCELLED\",\"reason\":\"job cancelled\"}}");
    /* finished: no longer cancellable, but listed until taken */
    assert_int_equal(weir__jobs_cancel(j, id1, "user", &err), WEIR_E_NOT_FOUND);
    assert_non_null(strstr(err.text, "has already finished"));
    assert_int_equal(weir__jobs_cancel(j, "job-nope", "user", &err), WEIR_E_NOT_FOUND);
    assert_string_equal(err.text, "no queued or running job 'job-nope'");
    json_t *job = take_job(j);
    assert_string_equal(weir__json_str(job, "job_id", ""), id1);
    assert_string_equal(weir__json_str(job, "outcome", ""), "cancelled");
    assert_string_equal(weir__json_str(job, "cause", ""), "user");
    weir__jobs_forget(j, id1);
    json_decref(job);
    active = weir__jobs_active(j);
    assert_int_equal(json_array_size(active), 1);
    assert_string_equal(json_string_value(json_array_get(active, 0)), id2);
    json_decref(active);
    weir__jobs_cancel_all(j, "parent");
    wait_done(&d, 2);
    job = take_job(j);
    assert_string_equal(weir__json_str(job, "cause", ""), "parent");
    json_decref(job);
    weir__jobs_destroy(j);
    free(d.result);
}

static void jobs_destroy_cancels_and_waits(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir__jobs *j;
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(1, on_done, &d, &j, &err), WEIR_OK);
    add_tool(f, "waiter", jobs_wait_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    const weir__tool_def *def = weir__tools_find(f->tools, "waiter");
    char id[48];
    for (int i = 0; i < 3; i++)
        submit(j, def, weir__jobs_new_id(id, sizeof id), "c", NULL);
    weir__jobs_destroy(j);
    assert_int_equal(d.count, 3);
    free(d.result);
}

/* Drained: every job finished (queued ones cancelled without running), and
 * each outcome can still be taken; nothing starts any more. */
static void jobs_drain_keeps_the_outcomes(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir__jobs *j;
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(1, on_done, &d, &j, &err), WEIR_OK);
    add_tool(f, "waiter", jobs_wait_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    const weir__tool_def *def = weir__tools_find(f->tools, "waiter");
    char id1[48], id2[48];
    submit(j, def, weir__jobs_new_id(id1, sizeof id1), "c1", NULL);
    submit(j, def, weir__jobs_new_id(id2, sizeof id2), "c2", NULL);
    wait_started(1);
    weir__jobs_drain(j);
    assert_int_equal(d.count, 2);
    assert_int_equal(g_started, 1); /* the queued one never ran */
    json_t *a = weir__jobs_take(j), *b = weir__jobs_take(j);
    assert_string_equal(weir__json_str(a, "job_id", ""), id1);
    assert_string_equal(weir__json_str(b, "job_id", ""), id2);
    assert_string_equal(weir__json_str(b, "outcome", ""), "cancelled");
    assert_string_equal(weir__json_str(b, "cause", ""), "disposed");
    char *res = weir__json_dump(json_object_get(b, "result"));
    assert_non_null(strstr(res, "was cancelled before it started"));
    free(res);
    json_decref(a);
    json_decref(b);
    json_t *args = json_object();
    weir__job_call call = {.job_id = "job-late", .call_id = "c3"};
    assert_int_equal(weir__jobs_submit(j, def, &call, args, &err), WEIR_E_STATE);
    json_decref(args);
    weir__jobs_destroy(j);
    free(d.result);
}

/* agent.max_background_jobs: a background call beyond it gets a JOB_LIMIT
 * error result (no job, nothing dropped silently); the limit counts only
 * unfinished jobs. */
static void background_calls_beyond_the_limit_are_refused(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(1, on_done, &d, &f->st.jobs, &err), WEIR_OK);
    add_tool(f, "waiter", jobs_wait_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    assert_int_equal(run_calls(f, "[[\"a\",\"waiter\",{}],[\"b\",\"waiter\",{}]]", NULL, &err),
                     WEIR_OK);
    json_t *receipt = receipt_of(f, "a");
    assert_string_equal(weir__json_str(receipt, "status", ""), "queued");
    json_decref(receipt);
    assert_result(f, "b",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"b\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: background job limit reached: 1 job is running "
                  "(agent.max_background_jobs); wait for a job's result before starting "
                  "another\"}],\"is_error\":true}]},\"error\":{\"name\":\"ToolError\",\"code\":"
                  "\"JOB_LIMIT\",\"reason\":\"background job limit reached: 1 job is running "
                  "(agent.max_background_jobs); wait for a job's result before starting "
                  "another\"}}");
    assert_int_equal(count_type(f, "job/queued"), 1);
    /* once it finished (even before it is settled) a new job may start */
    weir__jobs_cancel_all(f->st.jobs, "user");
    wait_done(&d, 1);
    assert_int_equal(run_calls(f, "[[\"c\",\"waiter\",{}]]", NULL, &err), WEIR_OK);
    receipt = receipt_of(f, "c");
    assert_string_equal(weir__json_str(receipt, "status", ""), "queued");
    json_decref(receipt);
    assert_int_equal(count_type(f, "job/queued"), 2);
    weir__jobs_destroy(f->st.jobs);
    f->st.jobs = NULL;
    free(d.result);
    assert_paired(f);
}

/* Generation scenario 10: a denied background tool never starts. */
static void denied_background_tool_never_starts(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(2, on_done, &d, &f->st.jobs, &err), WEIR_OK);
    add_tool(f, "bg", work_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    hook(f, "tools/pre-execute", pre_deny_b);
    hook(f, "tools/post-execute", post_record);
    freeze(f);
    assert_int_equal(run_calls(f, "[[\"b\",\"bg\",{\"id\":\"b\"}]]", NULL, &err), WEIR_OK);
    assert_result(f, "b",
                  "{\"turn\":1,\"step\":2,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
                  "\"tool_result\",\"call_id\":\"b\",\"content\":[{\"type\":\"text\",\"text\":"
                  "\"Error: denied: not allowed\"}],\"is_error\":true}]},\"error\":{\"name\":"
                  "\"ToolDenied\",\"code\":\"DENIED\",\"reason\":\"not allowed\"}}");
    json_t *active = weir__jobs_active(f->st.jobs);
    assert_int_equal(json_array_size(active), 0);
    json_decref(active);
    assert_int_equal(count_type(f, "job/queued"), 0);
    weir__jobs_destroy(f->st.jobs); /* waits for any job: there is none */
    f->st.jobs = NULL;
    assert_int_equal(d.count, 0);
    assert_int_equal(g_nevents, 0); /* the body never ran */
    assert_int_equal(json_array_size(f->hook_order), 0); /* no post-execute either */
    assert_paired(f);
}

/* post-execute on a job's result: the payload names the job, and what the
 * listener returns is what the ledger stores and the model gets. */
static json_t *post_job(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    char buf[128];
    const char *job = weir__json_str(args, "job_id", NULL);
    snprintf(buf, sizeof buf, "post:%s:%s:%s", weir__json_str(args, "call_id", "?"),
             job ? "job" : "call", weir__json_str(json_array_get(json_object_get(
                                                      json_object_get(args, "result"), "content"),
                                                  0),
                                                  "text", "?"));
    json_array_append_new(g_fx->hook_order, json_string(buf));
    json_t *r = weir__call_next(call);
    if (job) {
        json_object_set_new(r, "content",
                            json_pack("[{s:s, s:s}]", "type", "text", "text", "post-processed"));
        json_object_set_new(r, "additional_contexts",
                            json_pack("[{s:s, s:[{s:s, s:s}]}]", "role", "user", "content",
                                      "type", "text", "text", "ctx-job"));
    }
    return r;
}

/* Generation scenario 8: hooks around a background job.  pre-execute
 * runs once, before the receipt; the receipt skips post-execute; the job's
 * result goes through post-execute when it is settled, and the changed
 * result is what job/returned stores and the service message carries; the
 * body runs exactly once. */
static void hooks_run_around_a_background_job(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(2, on_done, &d, &f->st.jobs, &err), WEIR_OK);
    add_tool(f, "bg", work_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    hook(f, "tools/pre-execute", pre_record);
    hook(f, "tools/post-execute", post_job);
    freeze(f);
    assert_int_equal(run_calls(f, "[[\"k1\",\"bg\",{\"id\":\"k1\",\"text\":\"raw\"}],"
                                  "[\"k2\",\"solo\",{\"id\":\"k2\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_dump(f->hook_order, "[\"pre:k1\",\"pre:k2\",\"post:k2:call:ok:k2\"]");
    json_t *job = take_job(f->st.jobs);
    json_t *msg = NULL, *ctxs = NULL;
    assert_int_equal(weir__tools_settle_job(&f->st, job, true, &msg, &ctxs, &err), WEIR_OK);
    assert_dump(f->hook_order,
                "[\"pre:k1\",\"pre:k2\",\"post:k2:call:ok:k2\",\"post:k1:job:raw\"]");
    assert_dump(json_object_get(last_data(f, "job/returned"), "result"),
                "{\"content\":[{\"type\":\"text\",\"text\":\"post-processed\"}],"
                "\"is_error\":false}");
    const char *text = weir__json_str(json_array_get(json_object_get(msg, "content"), 0),
                                      "text", "");
    assert_non_null(strstr(text, "finished:\npost-processed"));
    assert_null(strstr(text, "raw"));
    assert_dump(ctxs, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                      "\"ctx-job\"}]}]");
    int starts = 0;
    for (int i = 0; i < g_nevents; i++)
        starts += strcmp(g_events[i], "start:k1") == 0;
    assert_int_equal(starts, 1);
    json_decref(msg);
    json_decref(ctxs);
    json_decref(job);
    weir__jobs_destroy(f->st.jobs);
    f->st.jobs = NULL;
    free(d.result);
    assert_paired(f);
}

/* A cancelled job: no post-execute, job/cancelled {effects:"not_rolled_back"}
 * and never job/returned; the service message says so.  Without delivery
 * (the agent closing) the event says "delivered":false and nothing is
 * handed on. */
static void cancelled_job_settles_without_its_result(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(2, on_done, &d, &f->st.jobs, &err), WEIR_OK);
    add_tool(f, "waiter", jobs_wait_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    hook(f, "tools/post-execute", post_job);
    freeze(f);
    assert_int_equal(run_calls(f, "[[\"a\",\"waiter\",{}],[\"b\",\"waiter\",{}]]", NULL, &err),
                     WEIR_OK);
    json_t *ra = receipt_of(f, "a"), *rb = receipt_of(f, "b");
    wait_started(2);
    assert_int_equal(weir__jobs_cancel(f->st.jobs, weir__json_str(ra, "job_id", ""), "user",
                                       &err),
                     WEIR_OK);
    json_t *job = take_job(f->st.jobs);
    json_t *msg = NULL, *ctxs = NULL;
    assert_int_equal(weir__tools_settle_job(&f->st, job, true, &msg, &ctxs, &err), WEIR_OK);
    char want[512];
    snprintf(want, sizeof want,
             "{\"turn\":1,\"step\":2,\"job_id\":\"%s\",\"call_id\":\"a\",\"tool\":\"waiter\","
             "\"effects\":\"not_rolled_back\",\"cause\":\"user\"}",
             weir__json_str(ra, "job_id", ""));
    assert_dump(last_data(f, "job/cancelled"), want);
    snprintf(want, sizeof want,
             "Background job %s (tool waiter, call a) was cancelled (user); whatever it did is "
             "not rolled back.",
             weir__json_str(ra, "job_id", ""));
    assert_string_equal(weir__json_str(json_array_get(json_object_get(msg, "content"), 0),
                                       "text", ""),
                        want);
    assert_string_equal(weir__json_str(json_object_get(msg, "source"), "status", ""),
                        "cancelled");
    assert_null(ctxs);
    assert_int_equal(json_array_size(f->hook_order), 0);
    json_decref(msg);
    json_decref(job);
    /* b ends with the agent: drained, logged, not delivered */
    weir__jobs_drain(f->st.jobs);
    job = take_job(f->st.jobs);
    assert_int_equal(weir__tools_settle_job(&f->st, job, false, &msg, &ctxs, &err), WEIR_OK);
    assert_null(msg);
    assert_null(ctxs);
    snprintf(want, sizeof want,
             "{\"turn\":1,\"step\":2,\"job_id\":\"%s\",\"call_id\":\"b\",\"tool\":\"waiter\","
             "\"effects\":\"not_rolled_back\",\"cause\":\"disposed\",\"delivered\":false}",
             weir__json_str(rb, "job_id", ""));
    assert_dump(last_data(f, "job/cancelled"), want);
    assert_int_equal(count_type(f, "job/returned"), 0);
    json_decref(job);
    json_decref(ra);
    json_decref(rb);
    weir__jobs_destroy(f->st.jobs);
    f->st.jobs = NULL;
    free(d.result);
    assert_paired(f);
}

/* Make the log read-only from the call's tools/pre-execute on. */
static json_t *pre_break_log(weir_call *call, const json_t *args, void *ud) {
    (void)args, (void)ud;
    char path[4096];
    snprintf(path, sizeof path, "%s", weir__log_path(g_fx->log));
    weir__log_close(g_fx->log);
    weir_error err = {0};
    assert_int_equal(weir__log_open_readonly(path, &g_fx->log, &err), WEIR_OK);
    g_fx->st.log = g_fx->log;
    return weir__call_next(call);
}

/* Generation scenario 9: a job whose intent (job/queued) cannot be
 * logged never starts: a scheduler failure, no body, no job. */
static void job_whose_intent_is_not_logged_never_starts(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(2, on_done, &d, &f->st.jobs, &err), WEIR_OK);
    add_tool(f, "bg", work_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    hook(f, "tools/pre-execute", pre_break_log);
    freeze(f);
    int rc = run_calls(f, "[[\"k1\",\"bg\",{\"id\":\"k1\"}]]", NULL, &err);
    assert_int_not_equal(rc, WEIR_OK);
    assert_int_equal(err.code, rc);
    json_t *active = weir__jobs_active(f->st.jobs);
    assert_int_equal(json_array_size(active), 0);
    json_decref(active);
    weir__jobs_destroy(f->st.jobs);
    f->st.jobs = NULL;
    assert_int_equal(d.count, 0);
    assert_int_equal(g_nevents, 0);
    /* writable again for teardown; the call has no result (nothing fabricated) */
    char path[4096];
    snprintf(path, sizeof path, "%s", weir__log_path(f->log));
    weir__log_close(f->log);
    assert_int_equal(weir__log_open(path, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err), WEIR_OK);
    f->st.log = f->log;
    expect_missing(f, f->framing, "k1");
}

/* ------------------------------------------------------------------------ */
/* Tools emit events                                                         */
/* ------------------------------------------------------------------------ */

/* The fixture's registry check: plugin "test" owns "test/progress". */
static bool test_owns(const char *plugin_id, const char *type, void *ud) {
    (void)ud;
    return !strcmp(plugin_id, "test") && !strcmp(type, "test/progress");
}

/*
 * The "emit" tool: append `n` events test/progress {id, k} (after waiting
 * for "end:<after>" when given), then try `bad` (a type) once and record
 * its status in the result: "ok:<id>" or "ok:<id>:<status name>"; `fail`
 * fails the call after appending.
 */
static int emit_exec(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    (void)ud;
    const char *id = weir__json_str(args, "id", "?");
    const char *after = weir__json_str(args, "after", NULL);
    if (after) {
        char ev[32];
        snprintf(ev, sizeof ev, "end:%s", after);
        pthread_mutex_lock(&g_mu);
        while (event_index(ev) < 0 && !g_timed_out)
            wait_locked();
        pthread_mutex_unlock(&g_mu);
    }
    json_int_t n = weir__json_int(args, "n", 1);
    for (json_int_t k = 0; k < n; k++) {
        json_t *data = json_pack("{s:s, s:I}", "id", id, "k", k);
        int rc = weir__tool_exec_append(exec, "test/progress", data, NULL);
        json_decref(data);
        if (rc != WEIR_OK) {
            weir__tool_exec_fail(exec, "APPEND", "append %lld: %s", (long long)k,
                                 weir_status_name(rc));
            return rc;
        }
    }
    char buf[1200];
    snprintf(buf, sizeof buf, "ok:%s", id);
    const char *bad = weir__json_str(args, "bad", NULL);
    if (bad) {
        json_t *data = json_object();
        weir_error e = {0};
        int rc = weir__tool_exec_append(exec, bad, data, &e);
        json_decref(data);
        snprintf(buf, sizeof buf, "ok:%s:%s:%s", id, weir_status_name(rc), e.text);
    }
    pthread_mutex_lock(&g_mu);
    record("end", id);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    if (json_is_true(json_object_get(args, "fail"))) {
        weir__tool_exec_fail(exec, "E_AFTER", "failed after appending");
        return WEIR_E_TOOL;
    }
    *result = json_string(buf);
    return *result ? WEIR_OK : WEIR_E_NOMEM;
}

/* "type:id" for each test/progress event and "result:<call>" for results, in log order. */
static void event_summary(fx *f, char *out, size_t size) {
    out[0] = '\0';
    size_t used = 0;
    for (size_t i = f->framing; i < weir__log_count(f->log) && used < size; i++) {
        const json_t *ev = weir__log_event(f->log, i);
        const char *type = weir__json_str(ev, "type", "?");
        const json_t *data = json_object_get(ev, "data");
        char item[96];
        if (!strcmp(type, "test/progress"))
            snprintf(item, sizeof item, "ev:%s%lld%s", weir__json_str(data, "id", "?"),
                     (long long)weir__json_int(data, "k", -1),
                     json_is_true(json_object_get(ev, "ignorable")) ? "" : "!");
        else if (!strcmp(type, "tool/result"))
            snprintf(item, sizeof item, "result:%s",
                     weir__json_str(json_array_get(json_object_get(json_object_get(data,
                                                                                   "message"),
                                                                   "content"),
                                                   0),
                                    "call_id", "?"));
        else
            snprintf(item, sizeof item, "%s", type);
        used += (size_t)snprintf(out + used, size - used, "%s%s", used ? " " : "", item);
    }
}

/* A tool's events are committed with its result, in model order, whatever
 * order the bodies ran in: a fast second call's events wait for the first
 * call's result. */
static void tool_events_commit_in_model_order_with_the_result(void **state) {
    fx *f = *state;
    weir__tools_set_event_check(f->tools, test_owns, NULL);
    add_tool(f, "emit", emit_exec, always_parallel, NULL, 0);
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"emit\",{\"id\":\"a\",\"n\":2,\"after\":\"b\"}],"
                               "[\"b\",\"emit\",{\"id\":\"b\",\"n\":1}],"
                               "[\"c\",\"solo\",{\"id\":\"c\"}]]",
                               NULL, &err),
                     WEIR_OK);
    assert_false(g_timed_out);
    char sum[512];
    event_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "tool/call tool/call ev:a0 ev:a1 result:a ev:b0 result:b tool/call "
                             "result:c");
    assert_paired(f);
}

/* The checks: the plugin's own types only, never a core type, at most 256
 * per call; the events of a failing call are committed anyway. */
static void tool_events_are_checked_and_kept_on_failure(void **state) {
    fx *f = *state;
    weir__tools_set_event_check(f->tools, test_owns, NULL);
    add_tool(f, "emit", emit_exec, NULL, NULL, 0);
    weir_error err = {0};
    assert_int_equal(run_calls(f,
                               "[[\"a\",\"emit\",{\"id\":\"a\",\"bad\":\"other/type\"}],"
                               "[\"b\",\"emit\",{\"id\":\"b\",\"n\":0,\"bad\":\"tool/result\"}],"
                               "[\"c\",\"emit\",{\"id\":\"c\",\"n\":0,\"bad\":\"Not A Type\"}],"
                               "[\"d\",\"emit\",{\"id\":\"d\",\"n\":257}],"
                               "[\"e\",\"emit\",{\"id\":\"e\",\"fail\":true}]]",
                               NULL, &err),
                     WEIR_OK);
    const char *text_a = weir__json_str(
        json_array_get(json_object_get(json_array_get(json_object_get(json_object_get(
                                                          json_object_get(result_of(f, "a"),
                                                                          "data"),
                                                          "message"),
                                                      "content"),
                                       0),
                       "content"),
                       0),
        "text", "");
    assert_string_equal(text_a, "ok:a:E_NOT_FOUND:tool_exec_append: tool 'emit': event type "
                                "'other/type' is not registered by its plugin");
    char *r = result_json(f, "b");
    assert_non_null(strstr(r, "ok:b:E_INVAL:tool_exec_append: 'tool/result' is not a plugin "
                              "event type"));
    free(r);
    r = result_json(f, "c");
    assert_non_null(strstr(r, "ok:c:E_INVAL"));
    free(r);
    r = result_json(f, "d");
    assert_non_null(strstr(r, "append 256: E_STATE"));
    free(r);
    r = result_json(f, "e");
    assert_non_null(strstr(r, "failed after appending"));
    free(r);
    /* a's one event, d's first 256 (its failure keeps them), e's one */
    size_t n = 0, d = 0;
    for (size_t i = 0; i < weir__log_count(f->log); i++) {
        const json_t *ev = weir__log_event(f->log, i);
        if (strcmp(weir__json_str(ev, "type", ""), "test/progress") != 0)
            continue;
        n++;
        d += !strcmp(weir__json_str(json_object_get(ev, "data"), "id", ""), "d");
        assert_true(json_is_true(json_object_get(ev, "ignorable")));
    }
    assert_int_equal(d, 256);
    assert_int_equal(n, 258);
    /* outside a run: no execution, nothing appended */
    json_t *data = json_object();
    assert_int_equal(weir__tool_exec_append(NULL, "test/progress", data, &err), WEIR_E_INVAL);
    json_decref(data);
    assert_paired(f);
}

/* A background job's events are committed when it is settled, before its
 * job/returned; a cancelled job's too (it did run). */
static void job_events_commit_before_the_job_event(void **state) {
    fx *f = *state;
    done_rec d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, "", "", "", NULL};
    weir_error err = {0};
    assert_int_equal(weir__jobs_create(2, on_done, &d, &f->st.jobs, &err), WEIR_OK);
    weir__tools_set_event_check(f->tools, test_owns, NULL);
    add_tool(f, "bgemit", emit_exec, NULL, NULL, WEIR_TOOL_BACKGROUND);
    assert_int_equal(run_calls(f, "[[\"j\",\"bgemit\",{\"id\":\"j\",\"n\":2}]]", NULL, &err),
                     WEIR_OK);
    json_t *job = take_job(f->st.jobs);
    assert_int_equal(json_array_size(json_object_get(job, "events")), 2);
    json_t *msg = NULL, *ctxs = NULL;
    assert_int_equal(weir__tools_settle_job(&f->st, job, true, &msg, &ctxs, &err), WEIR_OK);
    char sum[512];
    event_summary(f, sum, sizeof sum);
    assert_string_equal(sum, "tool/call job/queued result:j ev:j0 ev:j1 job/returned");
    json_decref(msg);
    json_decref(job);
    weir__jobs_destroy(f->st.jobs);
    f->st.jobs = NULL;
    free(d.result);
    assert_paired(f);
}

/* ------------------------------------------------------------------------ */
/* Worker pool and allocation failures                                       */
/* ------------------------------------------------------------------------ */

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    int ran;
} gate;

static void gate_task(void *arg) {
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    g->ran++;
    pthread_mutex_unlock(&g->mu);
}

static void pool_starts_threads_lazily_up_to_its_cap(void **state) {
    (void)state;
    weir__pool *p;
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};
    assert_int_equal(weir__pool_create(2, &p, NULL), WEIR_OK);
    assert_int_equal(weir__pool_threads(p), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(weir__pool_submit(p, gate_task, &g, NULL), WEIR_OK);
    assert_int_equal(weir__pool_threads(p), 2);
    pthread_mutex_lock(&g.mu);
    g.open = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    weir__pool_destroy(p); /* runs the queued third task, then joins */
    assert_int_equal(g.ran, 3);
}

static void allocation_failures_are_handled(void **state) {
    fx *f = *state;
    hook(f, "tools/pre-execute", pre_record);
    hook(f, "tools/post-execute", post_add_context);
    freeze(f);
    const char *spec = "[[\"a\",\"work\",{\"id\":\"a\"}],[\"b\",\"pow\",{\"x\":1}],"
                       "[\"c\",\"nope\",{}],[\"d\",\"fail\",{}]]";
    for (long n = 1; n < 100000; n++) {
        if (n > 1) { /* each attempt is a step of its own */
            end_step(f, false);
            f->st.step++;
            frame(f, "step/start", true);
        }
        size_t first = weir__log_count(f->log);
        json_t *c = calls(spec);
        json_array_clear(f->contexts);
        json_array_clear(f->ctx_counts);
        weir_error err = {0};
        bool concluded;
        weir__alloc_fail_after(n);
        int rc = weir__tools_run(&f->st, c, &concluded, &err);
        weir__alloc_fail_after(-1);
        json_decref(c);
        if (rc == WEIR_OK) {
            assert_true(n > 1);
            assert_paired_from(f, first);
            return;
        }
        /* The failed attempt fabricated no results: its calls without one
         * are what the log check reports, and only those. */
        size_t end = weir__log_count(f->log);
        for (size_t i = first; i < end; i++) {
            const json_t *ev = weir__log_event(f->log, i);
            const char *id = weir__json_str(json_object_get(ev, "data"), "call_id", "");
            if (strcmp(weir__json_str(ev, "type", ""), "tool/call") == 0 &&
                !result_between(f, id, i, end))
                expect_missing(f, i, id);
        }
    }
    fail_msg("weir__tools_run never succeeded");
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(duplicate_tool_names_name_both_plugins),
        T(registration_copies_the_schema),
        T(invalid_registrations_are_refused),
        T(parallel_siblings_all_start_before_any_completes),
        T(inline_tool_runs_on_the_step_thread),
        T(exclusive_between_parallel_gives_three_groups),
        T(classification_is_read_live_per_call),
        T(model_order_commits_despite_out_of_order_completion),
        T(rolling_pool_caps_at_max_parallel),
        T(max_parallel_one_is_fully_serial),
        T(ordered_pre_and_post_despite_out_of_order_bodies),
        T(denial_becomes_an_error_the_model_sees),
        T(abort_before_the_group_gives_synthetic_pairs),
        T(abort_during_pre_execute),
        T(abort_with_started_calls_commits_them),
        T(unknown_tool_is_an_error_result),
        T(failing_tool_is_a_structured_error),
        T(invalid_arguments_name_the_field),
        T(additional_contexts_follow_each_result_in_model_order),
        T(post_execute_invalid_blocks_or_contexts_fail_closed),
        T(scheduler_failure_fabricates_no_results),
        T(scheduler_failure_on_log_append),
        T(tool_can_conclude_the_turn),
        T(invalid_calls_are_refused_before_logging),
        T(every_call_gets_its_idempotency_key),
        T(resume_reruns_idempotent_calls_and_interrupts_the_rest),
        T(background_tool_returns_a_receipt_and_completes),
        T(job_stays_active_until_its_result_is_delivered),
        T(job_strings_outlive_the_settle_of_the_job),
        T(jobs_cancel_fires_the_job_signal),
        T(jobs_destroy_cancels_and_waits),
        T(jobs_drain_keeps_the_outcomes),
        T(background_calls_beyond_the_limit_are_refused),
        T(denied_background_tool_never_starts),
        T(hooks_run_around_a_background_job),
        T(cancelled_job_settles_without_its_result),
        T(job_whose_intent_is_not_logged_never_starts),
        T(tool_events_commit_in_model_order_with_the_result),
        T(tool_events_are_checked_and_kept_on_failure),
        T(job_events_commit_before_the_job_event),
        T(pool_starts_threads_lazily_up_to_its_cap),
        T(allocation_failures_are_handled),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
