/*
 * tests/unit/test_driver_turns.c - the driver's turn/step order (docs/lifecycle.md)
 * with provider-scripted: a simple turn, a tool round trip, agent/pre-step
 * decisions, max-tokens, model switches and replay.  Every test checks its
 * log (weir_log_check, replay, derive == request) in dh_teardown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "assistant_stream.h"
#include "driver_harness.h"
#include "testutil.h"

#define PROMPT_ROW "{\"id\":\"prompt\",\"plugin\":\"system-prompt\",\"config\":{\"text\":\"Be brief.\"}}"

static void assert_types(const dh *d, bool durable, const char *want) {
    char *got = dh_types(d, durable);
    if (strcmp(got, want) != 0)
        fail_msg("event types differ\n  got:  %s\n  want: %s", got, want);
    free(got);
}

static const char *reason_kind(const dh *d, int turn_index) {
    const json_t *e = dh_find(d, "turn/end", turn_index);
    assert_non_null(e);
    return json_string_value(
        json_object_get(json_object_get(json_object_get(e, "data"), "reason"), "kind"));
}

static void simple_turn_emits_ordered_events(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"Hello there.\",\"chunks\":2}]}}," PROMPT_ROW "]",
             NULL);
    dh_open(&d, "simple");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_types(&d, true,
                 "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,system/message,"
                 "user/message,request/header,request/context,assistant/message,step/end,"
                 "turn/end");
    assert_types(&d, false,
                 "agent/inbox/spliced,agent/inbox/inserted,agent/status,turn/start,"
                 "agent/inbox/spliced,agent/inbox/claimed,step/start,system/message,"
                 "user/message,request/header,request/context,agent/assistant-stream,"
                 "agent/assistant-stream,agent/assistant-stream,agent/assistant-stream,"
                 "agent/assistant-stream,agent/assistant-stream,agent/assistant-stream,"
                 "assistant/message,agent/assistant-stream,step/end,"
                 "turn/end,agent/status");
    assert_string_equal(reason_kind(&d, 0), "completed");
    const json_t *hdr = json_object_get(dh_find(&d, "request/header", 0), "data");
    assert_string_equal(json_string_value(json_object_get(hdr, "reason")), "initial");
    const json_t *am = json_object_get(dh_find(&d, "assistant/message", 0), "data");
    char *msg = json_dumps(json_object_get(am, "message"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(msg, "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
                             "\"text\":\"Hello there.\"}]}");
    free(msg);
    /* the stream is logged in the compact timed form: its expansion is the
     * chunks as received, each with a time */
    assert_true(weir__stream_is_compact(json_object_get(am, "stream")));
    json_t *chunks = weir__stream_expand(json_object_get(am, "stream"));
    assert_int_equal(json_array_size(chunks), 6);
    assert_non_null(json_object_get(json_array_get(chunks, 0), "time"));
    json_decref(chunks);
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "role")),
                        "system");
    json_decref(msgs);
    dh_teardown(&d);
}

static void tool_round_trip_puts_result_in_next_request(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"Let me look.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
             "\"arguments\":{\"q\":\"weir\"}}]},"
             "{\"text\":\"Found it.\",\"expect\":{\"last_role\":\"tool\","
             "\"message_contains\":\"the answer is 42\",\"tools_count\":1}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\",\"reply\":\"the answer is 42\"}]}}]",
             NULL);
    dh_open(&d, "tools");
    dh_send(&d, "look it up", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_types(&d, true,
                 "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,user/message,"
                 "request/header,request/context,assistant/message,tool/call,tool/result,"
                 "step/end,step/start,assistant/message,step/end,turn/end");
    assert_string_equal(reason_kind(&d, 0), "completed");
    const json_t *call = json_object_get(dh_find(&d, "tool/call", 0), "data");
    assert_string_equal(json_string_value(json_object_get(call, "arguments")), "{\"q\":\"weir\"}");
    dh_teardown(&d);
}

/* A wake whose input is already gone (a send that raced a claim, a job's
 * result a turn settled) starts no turn: the latch alone is no input.  With
 * input queued the next wake runs its turn as before. */
static void a_wake_without_input_starts_no_turn(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"one\"},{\"text\":\"two\"}]}}]",
             NULL);
    dh_open(&d, "latch");
    dh_send(&d, "first", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "completed");
    size_t before = weir__log_count(d.agent->e.log);
    weir__engine_wake(&d.agent->e); /* the latch, with nothing queued */
    dh_run(&d);
    assert_int_equal(weir__log_count(d.agent->e.log), before);
    assert_null(dh_find(&d, "turn/start", 1));
    assert_false(d.agent->e.wake); /* consumed */
    dh_send(&d, "second", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_non_null(dh_find(&d, "turn/start", 1));
    assert_string_equal(reason_kind(&d, 1), "completed");
    dh_teardown(&d);
}

/* A turn whose tool result is a long line grows the log's line buffer; the
 * idle agent does not keep it (weir__log_trim). */
static void idle_agent_keeps_no_grown_line_buffer(void **state) {
    (void)state;
    char reply[24 * 1024];
    memset(reply, 'x', sizeof reply - 1);
    reply[sizeof reply - 1] = '\0';
    char *rows = malloc(sizeof reply + 1024);
    assert_non_null(rows);
    snprintf(rows, sizeof reply + 1024,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"Let me look.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
             "\"arguments\":{\"q\":\"weir\"}}]},{\"text\":\"Found it.\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\",\"reply\":\"%s\"}]}}]",
             reply);
    dh d;
    dh_setup(&d, rows, NULL);
    free(rows);
    dh_open(&d, "long");
    dh_send(&d, "look it up", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "completed");
    assert_non_null(dh_find(&d, "tool/result", 0));
    assert_true(weir__log_line_buffer(d.agent->e.log) <= 4096);
    dh_teardown(&d);
}

static void background_job_result_returns_as_a_service_message(void **state) {
    (void)state;
    char *dir = wt_tmpdir("bgjob");
    assert_non_null(dir);
    char gate[4200], rows[8192];
    snprintf(gate, sizeof gate, "%s/release", dir);
    snprintf(rows, sizeof rows,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"Starting.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"crawl\","
             "\"arguments\":{}}]},"
             "{\"text\":\"Queued.\",\"expect\":{\"message_contains\":\"queued\"}},"
             "{\"text\":\"Done.\",\"expect\":{\"message_contains\":\"crawl result\"}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"crawl\",\"reply\":\"crawl result\",\"background\":true,"
             "\"wait_for_file\":\"%s\"}]}}]",
             gate);
    dh d;
    dh_setup(&d, rows, NULL);
    dh_open(&d, "bgjob");
    dh_send(&d, "crawl it", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    /* the call got a receipt at once; the job is still running */
    assert_int_equal(dh_count(&d, "turn/end"), 1);
    json_t *active = weir_agent_active_jobs(d.agent);
    assert_int_equal(json_array_size(active), 1);
    char *res = json_dumps(json_object_get(dh_find(&d, "tool/result", 0), "data"), JSON_COMPACT);
    assert_non_null(res);
    assert_non_null(strstr(res, "queued"));
    assert_non_null(strstr(res, "job-"));
    free(res);
    json_decref(active);
    assert_int_equal(wt_write_file(gate, "go"), 0);
    /* the job stays active until the driver settles it: the next run does,
     * once the body returned, and its result wakes the idle agent for a
     * new turn */
    for (int i = 0; i < 2000 && dh_count(&d, "turn/end") < 2; i++) {
        usleep(5000);
        dh_run(&d);
    }
    assert_int_equal(dh_count(&d, "turn/end"), 2);
    active = weir_agent_active_jobs(d.agent);
    assert_int_equal(json_array_size(active), 0);
    json_decref(active);
    assert_int_equal(dh_count(&d, "job/queued"), 1);
    assert_int_equal(dh_count(&d, "job/returned"), 1);
    assert_string_equal(reason_kind(&d, 1), "completed");
    const json_t *um = json_object_get(dh_find(&d, "user/message", 1), "data");
    const json_t *src = json_object_get(json_object_get(um, "message"), "source");
    assert_string_equal(json_string_value(json_object_get(src, "kind")), "service");
    assert_non_null(json_object_get(src, "job_id"));
    dh_teardown(&d);
    wt_rmtree(dir);
    free(dir);
}

/* Rows: scripted replies `replies` (a JSON array's items) and one background
 * tool "crawl" that waits for `gate` (cancellably) and returns "crawl result". */
static void job_rows(char *rows, size_t size, const char *replies, const char *gate) {
    snprintf(rows, size,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "%s]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"crawl\",\"reply\":\"crawl result\",\"background\":true,"
             "\"wait_for_file\":\"%s\"}]}}]",
             replies, gate);
}

#define CRAWL_CALL                                                                         \
    "{\"text\":\"Starting.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"crawl\","         \
    "\"arguments\":{}}]}"

static const json_t *data_of(const dh *d, const char *type, int n) {
    const json_t *e = dh_find(d, type, n);
    assert_non_null(e);
    return json_object_get(e, "data");
}

/* The job id of the only active job (copied into buf). */
static const char *only_job(dh *d, char *buf, size_t size) {
    json_t *active = weir_agent_active_jobs(d->agent);
    assert_int_equal(json_array_size(active), 1);
    snprintf(buf, size, "%s", json_string_value(json_array_get(active, 0)));
    json_decref(active);
    return buf;
}

/* A job result that arrives while the agent is idle asks for the driver
 * (on_wake, on the job's thread); the next run settles it and its service
 * message starts a turn by itself.  tools/post-execute runs on the result
 * (with job_id) and what it returns is what job/returned stores and the
 * model reads. */
static json_t *post_job(weir_call *call, const json_t *args, void *ud) {
    int *calls = ud;
    json_t *r = weir_host_api()->next(call);
    if (json_object_get(args, "job_id")) {
        (*calls)++;
        json_object_set_new(r, "content",
                            json_pack("[{s:s, s:s}]", "type", "text", "text", "checked result"));
    }
    return r;
}

static void idle_job_result_wakes_the_agent(void **state) {
    (void)state;
    char *dir = wt_tmpdir("bgwake");
    assert_non_null(dir);
    char gate[4200], rows[8192];
    snprintf(gate, sizeof gate, "%s/release", dir);
    job_rows(rows, sizeof rows,
             CRAWL_CALL ",{\"text\":\"Queued.\"},"
                        "{\"text\":\"Meanwhile: 4.\",\"expect\":{\"message_contains\":"
                        "\"side question\"}},"
                        "{\"text\":\"Done.\",\"expect\":{\"message_contains\":\"checked result\"}}",
             gate);
    dh d;
    dh_setup(&d, rows, NULL);
    int posts = 0;
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = &posts;
    weir_agent_hook h = {"tools/post-execute", post_job, &o};
    d.hooks = &h;
    d.nhooks = 1;
    dh_open(&d, "bgwake");
    dh_send(&d, "crawl it", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char job[64];
    only_job(&d, job, sizeof job);
    assert_int_equal(posts, 0); /* the receipt skips post-execute */
    /* a side question is answered while the job runs (generation scenario 8) */
    dh_send(&d, "a side question", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/end"), 2);
    only_job(&d, job, sizeof job);
    int seen = __atomic_load_n(&d.wakes, __ATOMIC_SEQ_CST);
    assert_int_equal(wt_write_file(gate, "go"), 0);
    dh_wait_wake(&d, seen);
    assert_int_equal(dh_count(&d, "job/finished"), 1); /* live, before the wake */
    assert_int_equal(dh_count(&d, "turn/end"), 2);
    dh_run(&d);
    assert_int_equal(posts, 1); /* the body ran once, post-execute once */
    assert_int_equal(dh_count(&d, "turn/end"), 3);
    assert_string_equal(reason_kind(&d, 2), "completed");
    const json_t *ret = data_of(&d, "job/returned", 0);
    assert_string_equal(json_string_value(json_object_get(ret, "job_id")), job);
    assert_int_equal(json_integer_value(json_object_get(ret, "turn")), 1);
    char *res = json_dumps(json_object_get(ret, "result"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(res, "{\"content\":[{\"type\":\"text\",\"text\":\"checked result\"}],"
                             "\"is_error\":false}");
    free(res);
    /* the ledger before the delivery: job/returned precedes the message's splice */
    const json_t *um = dh_find(&d, "user/message", 2);
    assert_true(json_integer_value(json_object_get(dh_find(&d, "job/returned", 0), "seq")) <
                json_integer_value(json_object_get(um, "seq")));
    const json_t *m = json_object_get(json_object_get(um, "data"), "message");
    assert_string_equal(json_string_value(json_object_get(m, "id")), job);
    assert_string_equal(json_string_value(
                            json_object_get(json_object_get(m, "source"), "status")),
                        "returned");
    json_t *active = weir_agent_active_jobs(d.agent);
    assert_int_equal(json_array_size(active), 0);
    json_decref(active);
    dh_teardown(&d);
    wt_rmtree(dir);
    free(dir);
}

/* weir_agent_cancel_job: job/cancelled {effects:"not_rolled_back"}, never
 * job/returned; the model is told; a second cancel finds no job. */
static void cancel_job_cancels_and_never_returns(void **state) {
    (void)state;
    char *dir = wt_tmpdir("bgcancel");
    assert_non_null(dir);
    char gate[4200], rows[8192];
    snprintf(gate, sizeof gate, "%s/never", dir);
    job_rows(rows, sizeof rows,
             CRAWL_CALL ",{\"text\":\"Queued.\"},"
                        "{\"text\":\"Noted.\",\"expect\":{\"message_contains\":\"was cancelled\"}}",
             gate);
    dh d;
    dh_setup(&d, rows, NULL);
    dh_open(&d, "bgcancel");
    dh_send(&d, "crawl it", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char job[64];
    only_job(&d, job, sizeof job);
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_cancel_job(d.agent, "job-unknown", &err), WEIR_E_NOT_FOUND);
    assert_string_equal(err.text, "no queued or running job 'job-unknown'");
    int seen = __atomic_load_n(&d.wakes, __ATOMIC_SEQ_CST);
    assert_int_equal(weir_agent_cancel_job(d.agent, job, &err), WEIR_OK);
    dh_wait_wake(&d, seen);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/end"), 2);
    assert_int_equal(dh_count(&d, "job/returned"), 0);
    assert_int_equal(dh_count(&d, "job/cancelled"), 1);
    const json_t *c = data_of(&d, "job/cancelled", 0);
    assert_string_equal(json_string_value(json_object_get(c, "job_id")), job);
    assert_string_equal(json_string_value(json_object_get(c, "effects")), "not_rolled_back");
    assert_string_equal(json_string_value(json_object_get(c, "cause")), "user");
    assert_null(json_object_get(c, "delivered"));
    assert_int_equal(weir_agent_cancel_job(d.agent, job, &err), WEIR_E_NOT_FOUND);
    assert_int_equal(weir_agent_cancel_job(NULL, job, &err), WEIR_E_INVAL);
    dh_teardown(&d);
    wt_rmtree(dir);
    free(dir);
}

/* agent.max_background_jobs: beyond it a background call gets JOB_LIMIT;
 * closing the agent ends the running job, logged undelivered. */
static void job_limit_and_close(void **state) {
    (void)state;
    char *dir = wt_tmpdir("bglimit");
    assert_non_null(dir);
    char gate[4200], rows[8192];
    snprintf(gate, sizeof gate, "%s/never", dir);
    job_rows(rows, sizeof rows,
             "{\"text\":\"Two.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"crawl\",\"arguments\":"
             "{}},{\"id\":\"c2\",\"name\":\"crawl\",\"arguments\":{}}]},"
             "{\"text\":\"One queued.\",\"expect\":{\"message_contains\":\"JOB_LIMIT\"}}",
             gate);
    dh d;
    dh_setup(&d, rows, "{\"max_background_jobs\":1}");
    dh_open(&d, "bglimit");
    dh_send(&d, "crawl twice", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char job[64];
    only_job(&d, job, sizeof job);
    assert_int_equal(dh_count(&d, "job/queued"), 1);
    const json_t *r2 = data_of(&d, "tool/result", 1);
    assert_string_equal(json_string_value(json_object_get(json_object_get(r2, "error"), "code")),
                        "JOB_LIMIT");
    char *path = strdup(dh_log(&d));
    dh_close(&d);
    const json_t *c = data_of(&d, "job/cancelled", 0);
    assert_string_equal(json_string_value(json_object_get(c, "job_id")), job);
    assert_string_equal(json_string_value(json_object_get(c, "cause")), "disposed");
    assert_true(json_is_false(json_object_get(c, "delivered")));
    dh_check_log(path, NULL, false);
    free(path);
    dh_teardown(&d);
    wt_rmtree(dir);
    free(dir);
}

/* A crash while a job runs: the job/queued has no end in the log.  Opening
 * the session answers it (job/failed, INTERRUPTED, no re-run) and its
 * service message wakes the agent. */
static void job_cut_by_a_crash_is_reported_not_rerun(void **state) {
    (void)state;
    char *dir = wt_tmpdir("bgcrash");
    assert_non_null(dir);
    char gate[4200], rows[8192];
    snprintf(gate, sizeof gate, "%s/never", dir);
    job_rows(rows, sizeof rows,
             CRAWL_CALL ",{\"text\":\"Queued.\"},"
                        "{\"text\":\"Lost it.\",\"expect\":{\"message_contains\":"
                        "\"interrupted by a crash\"}}",
             gate);
    dh d;
    dh_setup(&d, rows, NULL);
    dh_open(&d, "bgcrash");
    dh_send(&d, "crawl it", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    char job[64];
    only_job(&d, job, sizeof job);
    /* the log as a crash would leave it: taken while the job runs */
    size_t len = 0;
    char *text = wt_read_file(dh_log(&d), &len);
    assert_non_null(text);
    char copy[4200];
    snprintf(copy, sizeof copy, "%s/crashed.jsonl", d.dir);
    assert_int_equal(wt_write_file(copy, text), 0);
    free(text);
    dh_close(&d);
    json_array_clear(d.events);
    dh_open(&d, "crashed");
    const json_t *f = data_of(&d, "job/failed", 0);
    assert_string_equal(json_string_value(json_object_get(f, "job_id")), job);
    const json_t *e = json_object_get(json_object_get(f, "result"), "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "INTERRUPTED");
    json_t *active = weir_agent_active_jobs(d.agent);
    assert_int_equal(json_array_size(active), 0); /* nothing runs again */
    json_decref(active);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/end"), 1); /* the recovered session's new turn */
    assert_string_equal(reason_kind(&d, 0), "completed");
    const json_t *um = json_object_get(data_of(&d, "user/message", 0), "message");
    assert_string_equal(json_string_value(json_object_get(um, "id")), job);
    /* opened again: answered once, nothing more */
    dh_close(&d);
    json_array_clear(d.events);
    dh_open(&d, "crashed");
    assert_int_equal(dh_count(&d, "job/failed"), 0);
    dh_teardown(&d);
    wt_rmtree(dir);
    free(dir);
}

/* A tool's own events (tool_exec_append) reach the log just before its
 * result, as ignorable events of its plugin's type; another plugin's type
 * is refused; the log checks and derives as before. */
static void tool_events_land_before_the_result(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"Looking.\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"look\","
             "\"arguments\":{}}]},{\"text\":\"Done.\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"look\",\"reply\":\"seen\",\"append\":\"drvtest-tools/progress\","
             "\"append_other\":\"drvtest/request\"}]}}]",
             NULL);
    dh_open(&d, "toolevents");
    dh_send(&d, "look", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_types(&d, true,
                 "agent/inbox/spliced,turn/start,agent/inbox/spliced,step/start,user/message,"
                 "request/header,request/context,assistant/message,tool/call,"
                 "drvtest-tools/progress,tool/result,step/end,step/start,"
                 "assistant/message,step/end,turn/end");
    const json_t *ev = dh_find(&d, "drvtest-tools/progress", 0);
    assert_true(json_is_true(json_object_get(ev, "ignorable")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(ev, "data"),
                                                          "call_id")),
                        "c1");
    const json_t *res = json_object_get(
        json_array_get(json_object_get(json_object_get(data_of(&d, "tool/result", 0), "message"),
                                       "content"),
                       0),
        "content");
    assert_string_equal(json_string_value(json_object_get(json_array_get(res, 0), "text")),
                        "seen append_other=E_NOT_FOUND");
    dh_teardown(&d);
}

#define PRE_ROWS                                                                           \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"  \
    "[{\"text\":\"ok\",\"expect\":{\"message_contains\":\"%s\"}}]}},"            \
    "{\"id\":\"gate\",\"plugin\":\"drvtest-hooks\",\"config\":{\"pre_step\":%s}}]"

static void setup_pre(dh *d, const char *contains, const char *pre) {
    char rows[1024];
    snprintf(rows, sizeof rows, PRE_ROWS, contains, pre);
    dh_setup(d, rows, NULL);
}

static void pre_step_reject_blocks_turn_without_step(void **state) {
    (void)state;
    dh d;
    setup_pre(&d, "x", "{\"action\":\"reject\"}");
    dh_open(&d, "reject");
    dh_send(&d, "first", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_types(&d, true, "agent/inbox/spliced,turn/start,agent/inbox/spliced,turn/end");
    assert_string_equal(reason_kind(&d, 0), "blocked");
    assert_int_equal(dh_count(&d, "agent/inbox/claimed"), 1);
    dh_teardown(&d);
}

/* The reject names the row that made it (not a row passing it on) and its reason. */
static void pre_step_reject_names_row_and_reason(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"ok\"}]}},"
             "{\"id\":\"outer\",\"plugin\":\"drvtest-hooks\",\"config\":{}},"
             "{\"id\":\"gate\",\"plugin\":\"drvtest-hooks\",\"config\":{\"pre_step\":"
             "{\"action\":\"reject\",\"reason\":\"office hours are over\"}}}]",
             NULL);
    dh_open(&d, "reject-reason");
    dh_send(&d, "first", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *r = json_object_get(json_object_get(dh_find(&d, "turn/end", 0), "data"), "reason");
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "blocked");
    assert_string_equal(json_string_value(json_object_get(r, "plugin")), "gate");
    assert_string_equal(json_string_value(json_object_get(r, "reason")), "office hours are over");
    dh_teardown(&d);
}

static void pre_step_rewrite_changes_entered_messages(void **state) {
    (void)state;
    dh d;
    setup_pre(&d, "rewritten", "{\"action\":\"rewrite\",\"text\":\"rewritten\"}");
    dh_open(&d, "rewrite");
    dh_send(&d, "original", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "completed");
    const json_t *um = json_object_get(json_object_get(dh_find(&d, "user/message", 0), "data"),
                                       "message");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(um, "content"), 0), "text")),
        "rewritten");
    dh_teardown(&d);
}

static void pre_step_rewrite_to_empty_spends_no_step(void **state) {
    (void)state;
    dh d;
    setup_pre(&d, "x", "{\"action\":\"empty\"}");
    dh_open(&d, "empty");
    dh_send(&d, "dropped", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_types(&d, true, "agent/inbox/spliced,turn/start,agent/inbox/spliced,turn/end");
    assert_string_equal(reason_kind(&d, 0), "completed");
    dh_teardown(&d);
}

static void pre_step_throw_errors_turn_and_keeps_queued_work(void **state) {
    (void)state;
    dh d;
    setup_pre(&d, "x", "{\"action\":\"fail\",\"step\":1}");
    dh_open(&d, "throw");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    /* both turns fail at pre-step (step 1 of each); the second prompt was kept */
    assert_int_equal(dh_count(&d, "turn/start"), 2);
    assert_int_equal(dh_count(&d, "agent/error"), 2);
    assert_int_equal(dh_count(&d, "step/start"), 0);
    const json_t *r = json_object_get(json_object_get(dh_find(&d, "turn/end", 0), "data"), "reason");
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "error");
    const json_t *e = json_object_get(r, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "UNKNOWN");
    assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "drvtest: pre-step refused"));
    dh_teardown(&d);
}

static void max_tokens_is_sticky_and_dispatches_no_tools(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"cut\",\"finish\":\"max-tokens\",\"tool_calls\":[{\"id\":\"c1\","
             "\"name\":\"lookup\",\"arguments\":{}}]},"
             "{\"text\":\"done\"},{\"text\":\"next turn\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\"}]}},"
             "{\"id\":\"loop\",\"plugin\":\"drvtest-hooks\",\"config\":{\"turn_stopping_steer\":"
             "{\"text\":\"go on\",\"times\":1}}}]",
             NULL);
    dh_open(&d, "maxtok");
    dh_send(&d, "write a lot", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    /* step 1 hit max tokens (no tool/call); the steer ran step 2, which completed */
    assert_int_equal(dh_count(&d, "tool/call"), 0);
    assert_int_equal(dh_count(&d, "step/start"), 2);
    assert_string_equal(reason_kind(&d, 0), "max-tokens");
    dh_send(&d, "again", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 1), "completed"); /* no leak across turns */
    dh_teardown(&d);
}

static void request_model_switch_logs_header_change(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a\"}]}},"
             "{\"id\":\"switch\",\"plugin\":\"drvtest-hooks\",\"config\":{\"request_model\":"
             "\"other\"}}]",
             NULL);
    dh_open(&d, "switch");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *h = json_object_get(dh_find(&d, "request/header", 0), "data");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_object_get(h, "header"), "config"),
                                          "model")),
        "other");
    const json_t *c = json_object_get(dh_find(&d, "request/context", 0), "data");
    assert_string_equal(json_string_value(json_object_get(c, "model")), "other");
    dh_teardown(&d);
}

static void replaying_log_gives_identical_derived_history(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"one\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
             "\"arguments\":\"{}\"}]},{\"text\":\"two\"},{\"text\":\"three\"}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"lookup\"}]}}," PROMPT_ROW "]",
             NULL);
    dh_open(&d, "replay");
    dh_send(&d, "first", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    dh_send(&d, "second", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    json_t *live = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(live), 7);
    dh_close(&d);
    /* reopen: the history is the log's */
    dh_open(&d, "replay");
    json_t *again = weir_agent_messages(d.agent);
    assert_true(json_equal(live, again));
    dh_check_log(dh_log(&d), live, false);
    json_decref(live);
    json_decref(again);
    dh_teardown(&d);
}

static void llm_stream_listener_replays_its_own_chunks(void **state) {
    (void)state;
    dh d;
    /* the provider has no replies: only the replay listener can answer */
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":[]}},"
             "{\"id\":\"replay\",\"plugin\":\"drvtest-hooks\",\"config\":{\"replay\":["
             "{\"type\":\"block-start\",\"index\":0,\"block_type\":\"text\"},"
             "{\"type\":\"text-delta\",\"index\":0,\"text\":\"from \"},"
             "{\"type\":\"text-delta\",\"index\":0,\"text\":\"replay\"},"
             "{\"type\":\"block-end\",\"index\":0},"
             "{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}]}}]",
             NULL);
    dh_open(&d, "replay-stream");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "completed");
    const json_t *am = json_object_get(dh_find(&d, "assistant/message", 0), "data");
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(am, "message"), "content"), 0), "text")),
        "from replay");
    json_t *chunks = weir__stream_expand(json_object_get(am, "stream"));
    assert_int_equal(json_array_size(chunks), 5);
    json_decref(chunks);
    /* the two deltas are one run: four records */
    assert_int_equal(json_array_size(json_object_get(am, "stream")), 4);
    /* start, the five chunks emitted after the fact, and the committed end */
    assert_int_equal(dh_count(&d, "agent/assistant-stream"), 7);
    dh_teardown(&d);
}

/* The text of message `m`'s first content block (borrowed). */
static const char *first_text(const json_t *m) {
    return json_string_value(
        json_object_get(json_array_get(json_object_get(m, "content"), 0), "text"));
}

/* weir_log_check's prefix report of the open agent's log (new reference). */
static json_t *prefix_of(dh *d) {
    json_t *report = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_log_check(dh_log(d), &report, &err) != WEIR_OK)
        fail_msg("weir_log_check: %s", err.text);
    json_t *p = json_incref(json_object_get(report, "prefix"));
    json_decref(report);
    assert_non_null(p);
    return p;
}

/* Issue #32 item 4: once a request was sent, a changed system prompt is
 * appended as a system-update system/message; the first node, as sent,
 * stays (derive == request: dh_teardown). */
static void changed_system_prompt_is_appended_after_a_request(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"a\"},{\"text\":\"b\",\"expect\":{\"message_contains\":\"call 2\"}}]}},"
             PROMPT_ROW ",{\"id\":\"counter\",\"plugin\":\"drvtest-hooks\",\"config\":"
             "{\"assemble_counter\":true}}]",
             NULL);
    dh_open(&d, "sysappend");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "system/message"), 2);
    const json_t *second = dh_find(&d, "system/message", 1);
    assert_string_equal(json_string_value(json_object_get(second, "surface_op")), "append");
    assert_null(json_object_get(second, "source_seqs"));
    const json_t *data = json_object_get(second, "data");
    assert_string_equal(json_string_value(json_object_get(data, "prompt")),
                        "Be brief.\n\ncall 2 {{unset}}");
    const json_t *source = json_object_get(json_object_get(data, "message"), "source");
    assert_string_equal(json_string_value(json_object_get(source, "kind")), "system-update");
    assert_string_equal(json_string_value(json_object_get(source, "update")), "system-prompt");
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 6); /* system, one, a, system, two, b */
    assert_string_equal(first_text(json_array_get(msgs, 0)), "Be brief.\n\ncall 1 {{unset}}");
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 3), "role")),
                        "system");
    assert_string_equal(first_text(json_array_get(msgs, 3)), "Be brief.\n\ncall 2 {{unset}}");
    assert_string_equal(first_text(json_array_get(msgs, 4)), "two");
    json_decref(msgs);
    /* weir log --check: both requests extend the previous append-only */
    json_t *p = prefix_of(&d);
    assert_int_equal(json_integer_value(json_object_get(p, "requests")), 2);
    assert_int_equal(json_integer_value(json_object_get(p, "append_only")), 2);
    json_decref(p);
    dh_teardown(&d);
}

/* A system prompt configured for a session whose history has no system
 * head (here its first turn was cut between its user/message and its
 * request/header: no request was ever sent) is admitted all the same: a
 * system-update system/message, appended before the turn's new input, and
 * the model gets it. */
static void a_prompt_for_a_history_without_a_system_head_is_admitted(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a\"}]}}]",
             NULL);
    dh_open(&d, "nohead");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "system/message"), 0);
    /* the log as a crash during the first admission leaves it */
    size_t len = 0;
    char *text = wt_read_file(dh_log(&d), &len);
    assert_non_null(text);
    char *user = strstr(text, "\"type\":\"user/message\"");
    assert_non_null(user);
    char *eol = strchr(user, '\n');
    assert_non_null(eol);
    eol[1] = '\0';
    dh_teardown(&d);
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"b\",\"expect\":{\"message_contains\":\"Be brief.\"}}]}}," PROMPT_ROW
             "]",
             NULL);
    char path[4200];
    snprintf(path, sizeof path, "%s/cut.jsonl", d.dir);
    assert_int_equal(wt_write_file(path, text), 0);
    free(text);
    dh_open(&d, "cut");
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "interrupted"); /* the cut turn, closed */
    assert_string_equal(reason_kind(&d, 1), "completed");
    const json_t *sys = dh_find(&d, "system/message", 0);
    assert_non_null(sys);
    const json_t *data = json_object_get(sys, "data");
    assert_string_equal(json_string_value(json_object_get(data, "prompt")), "Be brief.");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(data, "message"), "source"), "update")),
                        "system-prompt");
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 4); /* one, system, two, b */
    assert_string_equal(first_text(json_array_get(msgs, 0)), "one");
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 1), "role")),
                        "system");
    assert_string_equal(first_text(json_array_get(msgs, 1)), "Be brief.");
    assert_string_equal(first_text(json_array_get(msgs, 2)), "two");
    json_decref(msgs);
    dh_teardown(&d);
}

/* The header's tool names, comma-joined (static buffer). */
static const char *tool_names(const json_t *header) {
    static char buf[256];
    buf[0] = '\0';
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(header, "tools"), i, t) {
        if (i)
            strcat(buf, ",");
        strcat(buf, json_string_value(json_object_get(t, "name")));
    }
    return buf;
}

/* Issue #32 item 4: once a request was sent, the header keeps the sent tools
 * in their order (a removed one stays declared, listed in removed_tools), a
 * new one is appended, a system-update system/message announces the change,
 * and a call to the removed tool gets a TOOL_REMOVED error result. */
static void tool_list_change_keeps_order_and_is_announced(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"x\",\"expect\":{\"tools_count\":2}},"
             "{\"text\":\"call b\",\"expect\":{\"tools_count\":3,\"message_contains\":"
             "\"Removed (a call to one fails): b.\"},"
             "\"tool_calls\":[{\"id\":\"c1\",\"name\":\"b\",\"arguments\":{}}]},"
             "{\"text\":\"done\",\"expect\":{\"last_role\":\"tool\",\"message_contains\":"
             "\"was removed\"}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":["
             "{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"}]}},"
             "{\"id\":\"pick\",\"plugin\":\"drvtest-hooks\",\"config\":"
             "{\"assemble_tools\":[[\"a\",\"b\"],[\"c\",\"a\"]]}}]",
             NULL);
    dh_open(&d, "toolsappend");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "request/header"), 2);
    const json_t *h1 = json_object_get(json_object_get(dh_find(&d, "request/header", 0), "data"),
                                       "header");
    const json_t *h2 = json_object_get(json_object_get(dh_find(&d, "request/header", 1), "data"),
                                       "header");
    assert_string_equal(tool_names(h1), "a,b");
    assert_null(json_object_get(h1, "removed_tools"));
    assert_string_equal(tool_names(h2), "a,b,c");
    /* the tools sent stay byte for byte */
    assert_true(json_equal(json_array_get(json_object_get(h1, "tools"), 1),
                           json_array_get(json_object_get(h2, "tools"), 1)));
    const json_t *removed = json_object_get(h2, "removed_tools");
    assert_int_equal(json_array_size(removed), 1);
    assert_string_equal(json_string_value(json_array_get(removed, 0)), "b");
    /* the announcement, before the turn's input */
    assert_int_equal(dh_count(&d, "system/message"), 1);
    const json_t *note = json_object_get(dh_find(&d, "system/message", 0), "data");
    const json_t *source = json_object_get(json_object_get(note, "message"), "source");
    assert_string_equal(json_string_value(json_object_get(source, "kind")), "system-update");
    assert_string_equal(json_string_value(json_object_get(source, "update")), "tools");
    assert_string_equal(json_string_value(json_array_get(json_object_get(source, "added"), 0)),
                        "c");
    assert_string_equal(json_string_value(json_array_get(json_object_get(source, "removed"), 0)),
                        "b");
    assert_string_equal(first_text(json_object_get(note, "message")),
                        "The available tools changed. Added: c. Removed (a call to one fails): b.");
    json_t *msgs = weir_agent_messages(d.agent);
    assert_int_equal(json_array_size(msgs), 7); /* one, x, system, two, call b, result, done */
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 2), "role")),
                        "system");
    assert_string_equal(first_text(json_array_get(msgs, 3)), "two");
    json_decref(msgs);
    /* the call to the removed tool */
    const json_t *res = json_object_get(dh_find(&d, "tool/result", 0), "data");
    assert_string_equal(json_string_value(json_object_get(json_object_get(res, "error"), "code")),
                        "TOOL_REMOVED");
    const json_t *block =
        json_array_get(json_object_get(json_object_get(res, "message"), "content"), 0);
    assert_true(json_is_true(json_object_get(block, "is_error")));
    assert_non_null(strstr(first_text(block), "tool 'b' was removed"));
    /* weir log --check names the one break: tool c appended to the tools */
    json_t *p = prefix_of(&d);
    assert_int_equal(json_integer_value(json_object_get(p, "requests")), 3);
    assert_int_equal(json_integer_value(json_object_get(p, "append_only")), 2);
    const json_t *brk = json_array_get(json_object_get(p, "breaks"), 0);
    assert_string_equal(json_string_value(json_object_get(brk, "at")), "tools[2]");
    assert_string_equal(json_string_value(json_object_get(brk, "hook")), "system-prompt/assemble");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(brk, "cause"), "type")),
        "request/header");
    json_decref(p);
    dh_teardown(&d);
}

static void plugin_events_are_logged_ignorable(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"a\"}]}},"
             "{\"id\":\"ev\",\"plugin\":\"drvtest-hooks\",\"config\":{\"append\":\"drvtest/mark\"}}]",
             NULL);
    dh_open(&d, "plugin-events");
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *ev = dh_find(&d, "drvtest/mark", 0);
    assert_non_null(ev);
    assert_true(json_is_true(json_object_get(ev, "ignorable")));
    json_t *data = json_pack("{s:i}", "n", 1);
    weir_error err;
    assert_int_equal(weir__agent_append(d.agent, "drvtest/unregistered", data, &err),
                     WEIR_E_NOT_FOUND);
    json_decref(data);
    dh_teardown(&d);
}

static void empty_completion_is_logged_but_not_model_visible(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"finish\":\"stop\"},{\"text\":\"b\",\"expect\":{\"messages_count\":2}}]}}]",
             NULL);
    dh_open(&d, "empty-completion");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(reason_kind(&d, 0), "completed");
    assert_string_equal(reason_kind(&d, 1), "completed");
    const json_t *am = json_object_get(dh_find(&d, "assistant/message", 0), "data");
    assert_int_equal(json_array_size(json_object_get(json_object_get(am, "message"), "content")), 0);
    assert_non_null(json_object_get(am, "usage"));
    dh_teardown(&d);
}

/*
 * For every n, make allocation n fail during an open + send + run of a
 * session on a host built from `rows`: with `arm` weir__alloc_fail_after,
 * it and every later one; with weir__alloc_fail_only, it alone (memory is
 * there again afterwards).  Whatever failed: no crash, no leak; with memory
 * back the live agent runs another turn (one the failure left open is
 * closed first), its log passes the check with every turn closed, and the
 * session opens and runs again.  A failure never wedges or loses a session.
 */
static void survives_allocation_failures(const char *rows, long (*arm)(long)) {
    dh d;
    dh_setup(&d, rows, NULL);
    long n, used = 0;
    for (n = 1; n < 200000; n++) {
        char id[32];
        snprintf(id, sizeof id, "oom%ld", n);
        weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
        o.session_id = id;
        weir_agent *a = NULL;
        arm(n);
        if (weir_agent_open(d.host, &o, &a, NULL) == WEIR_OK &&
            weir_agent_send_text(a, "hi", WEIR_SEND_FOLLOWUP, NULL) == WEIR_OK)
            (void)weir_agent_run_until_idle(a, NULL);
        used = weir__alloc_fail_after(-1);
        if (!a)
            continue; /* the open failed and left nothing */
        weir_error err;
        weir_error_clear(&err);
        if (weir_agent_send_text(a, "again", WEIR_SEND_FOLLOWUP, &err) != WEIR_OK ||
            weir_agent_run_until_idle(a, &err) != WEIR_OK)
            fail_msg("n=%ld: the agent does not run after the failure: %s", n, err.text);
        char *path = strdup(weir_agent_log_path(a));
        weir_agent_close(a);
        dh_check_log(path, NULL, false);
        a = NULL;
        if (weir_agent_open(d.host, &o, &a, &err) != WEIR_OK)
            fail_msg("n=%ld: the session cannot be opened again: %s", n, err.text);
        if (weir_agent_run_until_idle(a, &err) != WEIR_OK)
            fail_msg("n=%ld: the reopened session does not run: %s", n, err.text);
        weir_agent_close(a);
        dh_check_log(path, NULL, false);
        free(path);
        if (used < n)
            break; /* the whole run fit before the n-th allocation */
    }
    assert_true(n > 10);
    assert_true(used < n);
    dh_teardown(&d);
}

static void agent_survives_every_allocation_failure(void **state) {
    (void)state;
    survives_allocation_failures(
        "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
        "\"replies\":[{\"text\":\"fine\",\"chunks\":2}]}}," PROMPT_ROW "]",
        weir__alloc_fail_after);
}

/* A turn with a tool call, one allocation failing at a time. */
static void agent_survives_one_failed_allocation(void **state) {
    (void)state;
    survives_allocation_failures(
        "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
        "\"replies\":[{\"text\":\"calling\",\"tool_calls\":[{\"id\":\"c1\",\"name\":"
        "\"lookup\",\"arguments\":{\"q\":\"x\"}}]},{\"text\":\"fine\",\"chunks\":2}]}},"
        "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
        "[{\"name\":\"lookup\"}]}}," PROMPT_ROW "]",
        weir__alloc_fail_only);
}

/* --- live frames are built only when something can see them ------------- */

static json_t *note_frame(weir_call *call, const json_t *args, void *user_data) {
    (void)call;
    const json_t *frame = json_object_get(args, "frame");
    json_array_append_new(user_data, json_string(json_string_value(json_object_get(frame,
                                                                                   "type"))));
    return json_null();
}

/* An agent without on_event still streams to its own agent/assistant-stream
 * listener (start, each chunk, the committed end); one with neither runs the
 * same turn without building a frame (weir__stream_observed is false). */
static void live_frames_need_an_observer(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"Hello there.\",\"chunks\":2},{\"text\":\"Again.\"},{\"text\":\"Third.\"}]}}]",
             NULL);
    json_t *types = json_array();
    weir_hook_opts ho = WEIR_HOOK_OPTS_INIT;
    ho.user_data = types;
    weir_agent_hook h = {"agent/assistant-stream", note_frame, &ho};
    weir_agent_options o = WEIR_AGENT_OPTIONS_INIT; /* no on_event */
    o.session_id = "heard";
    o.hooks = &h;
    o.nhooks = 1;
    weir_error err;
    weir_error_clear(&err);
    weir_agent *a = NULL;
    assert_int_equal(weir_agent_open(d.host, &o, &a, &err), WEIR_OK);
    assert_true(a->e.stream_observed);
    assert_int_equal(weir_agent_send_text(a, "hi", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    assert_int_equal(weir_agent_run_until_idle(a, &err), WEIR_OK);
    size_t n = json_array_size(types);
    assert_true(n >= 4); /* start, the two text deltas at least, end */
    for (size_t i = 0; i < n; i++)
        assert_string_equal(json_string_value(json_array_get(types, i)),
                            i == 0 ? "start" : i == n - 1 ? "end" : "chunk");
    weir_agent_close(a);
    json_decref(types);

    weir_agent_options none = WEIR_AGENT_OPTIONS_INIT; /* no on_event, no listener */
    none.session_id = "unheard";
    assert_int_equal(weir_agent_open(d.host, &none, &a, &err), WEIR_OK);
    assert_false(a->e.stream_observed);
    assert_int_equal(weir_agent_send_text(a, "hi", WEIR_SEND_FOLLOWUP, &err), WEIR_OK);
    assert_int_equal(weir_agent_run_until_idle(a, &err), WEIR_OK);
    weir_turn_outcome out = WEIR_TURN_OUTCOME_INIT;
    assert_int_equal(weir_agent_last_turn(a, &out, NULL), WEIR_OK);
    assert_string_equal(out.kind, "completed");
    weir_turn_outcome_clear(&out);
    json_t *msgs = weir_agent_messages(a);
    assert_int_equal(json_array_size(msgs), 2); /* the user's and the answer */
    json_decref(msgs);
    weir_agent_close(a);

    dh_open(&d, "recorded"); /* the harness's on_event sees every frame */
    assert_true(d.agent->e.stream_observed);
    dh_send(&d, "hi", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_true(dh_count(&d, "agent/assistant-stream") >= 3); /* start, chunks, end */
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(simple_turn_emits_ordered_events),
        cmocka_unit_test(tool_round_trip_puts_result_in_next_request),
        cmocka_unit_test(idle_agent_keeps_no_grown_line_buffer),
        cmocka_unit_test(a_wake_without_input_starts_no_turn),
        cmocka_unit_test(background_job_result_returns_as_a_service_message),
        cmocka_unit_test(idle_job_result_wakes_the_agent),
        cmocka_unit_test(cancel_job_cancels_and_never_returns),
        cmocka_unit_test(job_limit_and_close),
        cmocka_unit_test(tool_events_land_before_the_result),
        cmocka_unit_test(job_cut_by_a_crash_is_reported_not_rerun),
        cmocka_unit_test(pre_step_reject_blocks_turn_without_step),
        cmocka_unit_test(pre_step_reject_names_row_and_reason),
        cmocka_unit_test(pre_step_rewrite_changes_entered_messages),
        cmocka_unit_test(pre_step_rewrite_to_empty_spends_no_step),
        cmocka_unit_test(pre_step_throw_errors_turn_and_keeps_queued_work),
        cmocka_unit_test(max_tokens_is_sticky_and_dispatches_no_tools),
        cmocka_unit_test(request_model_switch_logs_header_change),
        cmocka_unit_test(replaying_log_gives_identical_derived_history),
        cmocka_unit_test(llm_stream_listener_replays_its_own_chunks),
        cmocka_unit_test(changed_system_prompt_is_appended_after_a_request),
        cmocka_unit_test(a_prompt_for_a_history_without_a_system_head_is_admitted),
        cmocka_unit_test(tool_list_change_keeps_order_and_is_announced),
        cmocka_unit_test(plugin_events_are_logged_ignorable),
        cmocka_unit_test(empty_completion_is_logged_but_not_model_visible),
        cmocka_unit_test(agent_survives_every_allocation_failure),
        cmocka_unit_test(agent_survives_one_failed_allocation),
        cmocka_unit_test(live_frames_need_an_observer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
