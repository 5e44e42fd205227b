/*
 * tests/unit/test_generation.c - the generation tracker (docs/generations.md,
 * its scenarios): recorded event sequences fed by
 * hand, and live agents (tests/support/driver_harness) whose events feed a
 * tracker.
 */
#include <dirent.h>
#include <fcntl.h>
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
#include "generation.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Recording                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct rec {
    weir_generation_tracker *t;
    json_t *events; /* everything the tracker emitted, deep copies */
    long seq;
} rec;

static void collect(const json_t *ev, void *ud) {
    rec *r = ud;
    json_t *copy = json_deep_copy(ev);
    if (copy)
        json_array_append_new(r->events, copy);
}

static void rec_init(rec *r) {
    memset(r, 0, sizeof *r);
    r->events = json_array();
    assert_non_null(r->events);
    assert_int_equal(weir_generation_tracker_create(collect, r, &r->t, NULL), WEIR_OK);
}

static void rec_fini(rec *r) {
    weir_generation_tracker_destroy(r->t);
    json_decref(r->events);
}

/* JSON text with ' for " (the test data has no apostrophes). */
static json_t *J(const char *text) {
    char buf[4096];
    size_t n = strlen(text);
    assert_true(n < sizeof buf);
    for (size_t i = 0; i <= n; i++)
        buf[i] = text[i] == '\'' ? '"' : text[i];
    json_error_t je;
    json_t *v = json_loads(buf, JSON_DECODE_ANY, &je);
    if (!v)
        fail_msg("bad test JSON %s: %s", buf, je.text);
    return v;
}

/* Feed one event: durable ones as a log envelope, live ones as {type,time,data}. */
static int feed_rc(rec *r, bool durable, const char *type, const char *data) {
    json_t *ev = durable ? json_pack("{s:I, s:I, s:s, s:o}", "seq", (json_int_t)r->seq++, "time",
                                     (json_int_t)1000, "type", type, "data", J(data))
                         : json_pack("{s:s, s:I, s:o}", "type", type, "time", (json_int_t)1000,
                                     "data", J(data));
    assert_non_null(ev);
    int rc = weir_generation_tracker_feed(r->t, ev, durable);
    json_decref(ev);
    return rc;
}

static void feed(rec *r, bool durable, const char *type, const char *fmt, ...) WEIR_PRINTF(4, 5);
static void feed(rec *r, bool durable, const char *type, const char *fmt, ...) {
    char data[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(data, sizeof data, fmt, ap);
    va_end(ap);
    assert_int_equal(feed_rc(r, durable, type, data), WEIR_OK);
}

#define D true
#define L false

/* A queued user message with id `id` and source kind `kind`. */
#define MSG(id, kind, text)                                                                    \
    "{'role':'user','content':[{'type':'text','text':'" text "'}],'source':{'kind':'" kind    \
    "'},'id':'" id "'}"

static void queue(rec *r, const char *target, const char *msg) {
    feed(r, D, "agent/inbox/spliced", "{'target':'%s','start':0,'inserted':[%s]}", target, msg);
    feed(r, L, "agent/inbox/inserted", "{'message':%s}", msg);
}

static void claim(rec *r, int turn, const char *target, const char *msg) {
    feed(r, D, "agent/inbox/spliced", "{'target':'%s','start':0,'removed_count':1,'inserted':[]}",
         target);
    feed(r, L, "agent/inbox/claimed", "{'message':%s,'turn':%d}", msg, turn);
}

static void admit(rec *r, int turn, int step, const char *msg) {
    feed(r, D, "user/message", "{'turn':%d,'step':%d,'message':%s}", turn, step, msg);
}

static void assistant(rec *r, int turn, int step, const char *text, const char *call_id) {
    char calls[256] = "";
    if (call_id)
        snprintf(calls, sizeof calls,
                 ",{'type':'tool_call','id':'%s','name':'lookup','arguments':'{}'}", call_id);
    feed(r, D, "assistant/message",
         "{'turn':%d,'step':%d,'message':{'role':'assistant','content':[{'type':'text','text':"
         "'%s'}%s]},'stream':[]}",
         turn, step, text, calls);
    if (call_id)
        feed(r, D, "tool/call", "{'turn':%d,'step':%d,'call_id':'%s','name':'lookup',"
                                "'arguments':'{}'}",
             turn, step, call_id);
}

static void tool_result(rec *r, int turn, int step, const char *call_id, const char *text) {
    feed(r, D, "tool/result",
         "{'turn':%d,'step':%d,'message':{'role':'tool','content':[{'type':'tool_result',"
         "'call_id':'%s','content':[{'type':'text','text':'%s'}]}]}}",
         turn, step, call_id, text);
}

static void turn_end(rec *r, int turn, const char *reason) {
    feed(r, D, "turn/end", "{'turn':%d,'reason':%s}", turn, reason);
}

/* Comma-joined types of the emitted events. */
static const char *types(const rec *r) {
    static char buf[4096];
    buf[0] = '\0';
    size_t i;
    const json_t *e;
    json_array_foreach(r->events, i, e) {
        if (i)
            strncat(buf, ",", sizeof buf - strlen(buf) - 1);
        strncat(buf, json_string_value(json_object_get(e, "type")), sizeof buf - strlen(buf) - 1);
    }
    return buf;
}

/* data of the n-th emitted event of `type` (borrowed). */
/* How many events of `type` were published. */
static int count(const rec *r, const char *type) {
    int n = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(r->events, i, e) n += !strcmp(json_string_value(json_object_get(e, "type")), type);
    return n;
}

static const json_t *nth(const rec *r, const char *type, int n) {
    size_t i;
    const json_t *e;
    json_array_foreach(r->events, i, e) {
        if (!strcmp(json_string_value(json_object_get(e, "type")), type) && n-- == 0)
            return json_object_get(e, "data");
    }
    fail_msg("no event %s #%d in %s", type, n, types(r));
    return NULL;
}

static const char *str(const json_t *data, const char *key) {
    const char *s = json_string_value(json_object_get(data, key));
    if (!s)
        fail_msg("missing string %s", key);
    return s;
}

/* Comma-joined string array `key` of `data`. */
static const char *ids(const json_t *data, const char *key) {
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    b[0] = '\0';
    const json_t *arr = json_object_get(data, key);
    assert_true(json_is_array(arr));
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) {
        if (i)
            strncat(b, ",", 511 - strlen(b));
        strncat(b, json_string_value(v), 511 - strlen(b));
    }
    return b;
}

/* ------------------------------------------------------------------------ */
/* Recorded sequences                                                        */
/* ------------------------------------------------------------------------ */

#define Q1 MSG("q1", "human", "what is 2 to the 10th?")

/* The demo turn: q1, a provisional text with a tool call, the final answer. */
static void demo_turn(rec *r) {
    queue(r, "next-turn", Q1);
    feed(r, L, "agent/status", "{'status':'running'}");
    feed(r, D, "turn/start", "{'turn':1}");
    claim(r, 1, "next-turn", Q1);
    feed(r, D, "step/start", "{'turn':1,'step':1}");
    admit(r, 1, 1, Q1);
    assistant(r, 1, 1, "Let me work that out.", "c1");
    tool_result(r, 1, 1, "c1", "1024");
    feed(r, D, "step/end", "{'turn':1,'step':1}");
    feed(r, D, "step/start", "{'turn':1,'step':2}");
    assistant(r, 1, 2, "2 to the power 10 is 1024.", NULL);
    feed(r, D, "step/end", "{'turn':1,'step':2}");
    turn_end(r, 1, "{'kind':'completed'}");
    feed(r, L, "agent/status", "{'status':'idle'}");
}

static void followup_generation_finishes_with_the_last_answer(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    demo_turn(&r);
    assert_string_equal(types(&r), "input.queued,generation.started,input.delivered,"
                                   "assistant.message,assistant.message,generation.finished");
    const json_t *q = nth(&r, "input.queued", 0);
    assert_string_equal(str(q, "input_id"), "q1");
    assert_string_equal(str(q, "delivery"), "new_turn");
    assert_string_equal(str(q, "source"), "human");
    assert_null(json_object_get(q, "generation_id"));
    const json_t *s = nth(&r, "generation.started", 0);
    assert_string_equal(str(s, "generation_id"), "gen-1");
    assert_string_equal(str(s, "initial_input_id"), "q1");
    assert_null(json_object_get(s, "call_id"));
    const json_t *d = nth(&r, "input.delivered", 0);
    assert_string_equal(str(d, "delivery"), "new_turn");
    assert_string_equal(str(d, "generation_id"), "gen-1");
    const json_t *p = nth(&r, "assistant.message", 0);
    assert_string_equal(str(p, "text"), "Let me work that out.");
    assert_string_equal(str(p, "generation_id"), "gen-1");
    assert_string_equal(ids(p, "input_ids"), "q1");
    const json_t *f = nth(&r, "generation.finished", 0);
    assert_string_equal(str(f, "generation_id"), "gen-1");
    assert_string_equal(str(f, "text"), "2 to the power 10 is 1024.");
    assert_string_equal(ids(f, "input_ids"), "q1");
    assert_string_equal(ids(f, "accepted_input_ids"), "");
    assert_string_equal(ids(f, "active_job_ids"), "");
    assert_string_equal(str(f, "disposition"), "manager_turn_finished");
    /* the generation is closed: a stray assistant message is uncorrelated */
    assistant(&r, 1, 3, "late", NULL);
    const json_t *late = nth(&r, "assistant.message", 2);
    assert_null(json_object_get(late, "generation_id"));
    assert_null(json_object_get(late, "input_ids"));
    rec_fini(&r);
}

#define S1 MSG("s1", "steer", "use base 2")

static void steering_at_a_request_boundary_joins_input_ids(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    queue(&r, "next-turn", Q1);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", Q1);
    feed(&r, D, "step/start", "{'turn':1,'step':1}");
    admit(&r, 1, 1, Q1);
    queue(&r, "next-step", S1); /* steered while the request runs */
    assistant(&r, 1, 1, "working", "c1");
    tool_result(&r, 1, 1, "c1", "ok");
    feed(&r, D, "step/end", "{'turn':1,'step':1}");
    claim(&r, 1, "next-step", S1);
    feed(&r, D, "step/start", "{'turn':1,'step':2}");
    admit(&r, 1, 2, S1);
    assistant(&r, 1, 2, "done in base 2", NULL);
    turn_end(&r, 1, "{'kind':'completed'}");
    /* the steer's receipt comes when its delivery is known: at its claim */
    assert_string_equal(types(&r), "input.queued,generation.started,input.delivered,"
                                   "assistant.message,input.queued,input.delivered,"
                                   "assistant.message,generation.finished");
    const json_t *q = nth(&r, "input.queued", 1);
    assert_string_equal(str(q, "input_id"), "s1");
    assert_string_equal(str(q, "delivery"), "request_boundary");
    assert_string_equal(str(q, "source"), "steer");
    assert_string_equal(str(q, "generation_id"), "gen-1");
    /* queued is not delivered: the provisional message before it has q1 only */
    assert_string_equal(ids(nth(&r, "assistant.message", 0), "input_ids"), "q1");
    const json_t *d = nth(&r, "input.delivered", 1);
    assert_string_equal(str(d, "input_id"), "s1");
    assert_string_equal(str(d, "delivery"), "request_boundary");
    assert_string_equal(ids(nth(&r, "assistant.message", 1), "input_ids"), "q1,s1");
    const json_t *f = nth(&r, "generation.finished", 0);
    assert_string_equal(ids(f, "input_ids"), "q1,s1");
    assert_string_equal(str(f, "text"), "done in base 2");
    rec_fini(&r);
}

#define FIRST MSG("first", "human", "go")
#define QUEUED MSG("queued", "human", "later")

/* Generation scenario 1 (and 6): native acceptance is not application. */
static void only_delivered_or_applied_inputs_join_a_generation(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    queue(&r, "next-turn", FIRST);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", FIRST);
    admit(&r, 1, 1, FIRST);
    feed(&r, L, "steering/accepted", "{'input_id':'native'}");
    feed(&r, L, "steering/accepted", "{'input_id':'native'}");
    assistant(&r, 1, 1, "provisional", NULL);
    const json_t *p = nth(&r, "assistant.message", 0);
    assert_string_equal(ids(p, "input_ids"), "first");
    assert_string_equal(ids(p, "accepted_input_ids"), "native");
    feed(&r, L, "steering/applied", "{'input_id':'native'}");
    assistant(&r, 1, 2, "applied", NULL);
    const json_t *a = nth(&r, "assistant.message", 1);
    assert_string_equal(ids(a, "input_ids"), "first,native");
    assert_string_equal(ids(a, "accepted_input_ids"), "");
    turn_end(&r, 1, "{'kind':'completed'}");
    const json_t *f = nth(&r, "generation.finished", 0);
    assert_string_equal(ids(f, "input_ids"), "first,native");
    assert_string_equal(ids(f, "accepted_input_ids"), "");
    assert_string_equal(types(&r), "input.queued,generation.started,input.delivered,"
                                   "steering.accepted,steering.accepted,assistant.message,"
                                   "steering.applied,assistant.message,generation.finished");
    /* input queued after the end: the next generation delivers it; earlier
     * events keep their ids */
    queue(&r, "next-turn", QUEUED);
    feed(&r, D, "turn/start", "{'turn':2}");
    claim(&r, 2, "next-turn", QUEUED);
    admit(&r, 2, 1, QUEUED);
    assistant(&r, 2, 1, "second", NULL);
    turn_end(&r, 2, "{'kind':'completed'}");
    const json_t *f2 = nth(&r, "generation.finished", 1);
    assert_string_equal(str(f2, "generation_id"), "gen-2");
    assert_string_equal(ids(f2, "input_ids"), "queued");
    assert_string_equal(ids(nth(&r, "generation.finished", 0), "input_ids"), "first,native");
    assert_string_equal(ids(p, "input_ids"), "first");
    rec_fini(&r);
}

/* Generation scenario 5: finished text is the last assistant message
 * without tool calls; a turn that ends on a tool result finishes with "". */
static void finished_text_is_the_last_message_without_tool_calls(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", FIRST);
    admit(&r, 1, 1, FIRST);
    assistant(&r, 1, 1, "an early answer", NULL);
    feed(&r, D, "turn/start", "{'turn':2}"); /* turn 1 never ended: its log failed */
    /* input the tracker never saw queued gets its receipt when claimed */
    assert_string_equal(types(&r), "input.queued,generation.started,input.delivered,"
                                   "assistant.message,generation.detached");
    claim(&r, 2, "next-turn", QUEUED);
    admit(&r, 2, 1, QUEUED);
    assistant(&r, 2, 1, "calling the tool", "c1");
    tool_result(&r, 2, 1, "c1", "the tool concluded the turn");
    turn_end(&r, 2, "{'kind':'completed'}");
    const json_t *f = nth(&r, "generation.finished", 0);
    assert_string_equal(str(f, "generation_id"), "gen-2");
    assert_string_equal(str(f, "text"), "");
    /* an answer with tool calls, then one with text: the text wins; a
     * later message with only tool calls resets it */
    feed(&r, D, "turn/start", "{'turn':3}");
    claim(&r, 3, "next-turn", Q1);
    admit(&r, 3, 1, Q1);
    assistant(&r, 3, 1, "a provisional text", "c2");
    tool_result(&r, 3, 1, "c2", "1024");
    assistant(&r, 3, 2, "the final text", NULL);
    turn_end(&r, 3, "{'kind':'max-tokens'}");
    assert_string_equal(str(nth(&r, "generation.finished", 1), "text"), "the final text");
    feed(&r, D, "turn/start", "{'turn':4}");
    claim(&r, 4, "next-turn", S1);
    admit(&r, 4, 1, S1);
    assistant(&r, 4, 1, "", NULL);
    turn_end(&r, 4, "{'kind':'completed'}");
    const json_t *f4 = nth(&r, "generation.finished", 2);
    assert_string_equal(str(f4, "generation_id"), "gen-4");
    assert_string_equal(str(f4, "text"), ""); /* empty text is valid */
    rec_fini(&r);
}

#define REQUEST MSG("request", "human", "do it")

/* Generation scenario 2. */
static void cancellation_detaches_without_a_success_event(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    queue(&r, "next-turn", REQUEST);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", REQUEST);
    admit(&r, 1, 1, REQUEST);
    assistant(&r, 1, 1, "partial", NULL);
    turn_end(&r, 1, "{'kind':'aborted','cause':'user'}");
    assert_string_equal(types(&r), "input.queued,generation.started,input.delivered,"
                                   "assistant.message,generation.detached");
    const json_t *d = nth(&r, "generation.detached", 0);
    assert_string_equal(str(d, "generation_id"), "gen-1");
    assert_string_equal(ids(d, "input_ids"), "request");
    assert_string_equal(str(d, "cancellation"), "unconfirmed");
    assert_string_equal(str(json_object_get(d, "reason"), "cause"), "user");
    assert_null(json_object_get(d, "text"));
    /* cleared: later output has no generation, and no success follows */
    assistant(&r, 1, 2, "after", NULL);
    turn_end(&r, 1, "{'kind':'completed'}");
    assert_null(json_object_get(nth(&r, "assistant.message", 1), "generation_id"));
    assert_null(strstr(types(&r), "generation.finished"));
    rec_fini(&r);
}

/* Generation scenario 7. */
static void failure_is_correlated_with_its_inputs(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", FIRST);
    admit(&r, 1, 1, FIRST);
    feed(&r, D, "assistant/attempt", "{'turn':1,'step':1,'stream':[]}");
    turn_end(&r, 1, "{'kind':'error','error':{'code':'RATE_LIMIT','message':'slow down',"
                    "'provider':'openai'}}");
    assert_string_equal(types(&r), "input.queued,generation.started,input.delivered,"
                                   "generation.failed");
    const json_t *f = nth(&r, "generation.failed", 0);
    assert_string_equal(ids(f, "input_ids"), "first");
    assert_string_equal(str(f, "error_type"), "RATE_LIMIT");
    assert_string_equal(str(f, "error_message"), "slow down");
    rec_fini(&r);
}

/* A rejected step: the claimed input never reached the log, and that is
 * known (no effect): input.discarded, not input.unknown.  Likewise for a
 * turn cancelled or failed before admission. */
static void blocked_turn_fails_and_its_claimed_input_is_discarded(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    queue(&r, "next-turn", FIRST);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", FIRST);
    turn_end(&r, 1, "{'kind':'blocked'}");
    assert_string_equal(types(&r), "input.queued,generation.started,input.discarded,"
                                   "generation.failed");
    const json_t *u = nth(&r, "input.discarded", 0);
    assert_string_equal(str(u, "input_id"), "first");
    assert_string_equal(str(u, "generation_id"), "gen-1");
    assert_string_equal(str(u, "reason"), "rejected");
    const json_t *f = nth(&r, "generation.failed", 0);
    assert_string_equal(ids(f, "input_ids"), "");
    assert_string_equal(str(f, "error_type"), "BLOCKED");
    /* cancelled before admission, failed before it, and left out by pre-step */
    const char *ends[][2] = {{"{'kind':'aborted','cause':'user'}", "canceled"},
                             {"{'kind':'error','error':{'code':'UNKNOWN','message':'x'}}",
                              "error"},
                             {"{'kind':'completed'}", "pre-step"}};
    for (int k = 0; k < 3; k++) {
        queue(&r, "next-turn", QUEUED);
        feed(&r, D, "turn/start", "{'turn':%d}", k + 2);
        claim(&r, k + 2, "next-turn", QUEUED);
        turn_end(&r, k + 2, ends[k][0]);
        assert_string_equal(str(nth(&r, "input.discarded", k + 1), "reason"), ends[k][1]);
        assert_string_equal(str(nth(&r, "input.discarded", k + 1), "input_id"), "queued");
    }
    assert_null(strstr(types(&r), "input.unknown"));
    /* the log failed: the insertion may have been interrupted */
    queue(&r, "next-turn", QUEUED);
    feed(&r, D, "turn/start", "{'turn':9}");
    claim(&r, 9, "next-turn", QUEUED);
    turn_end(&r, 9, "{'kind':'error','error':{'code':'IO','message':'disk full'}}");
    const json_t *u2 = nth(&r, "input.unknown", 0);
    assert_string_equal(str(u2, "input_id"), "queued");
    assert_string_equal(str(u2, "route"), "inbox");
    assert_string_equal(str(u2, "reason"), "error");
    rec_fini(&r);
}

#define CORRECTION MSG("correction", "steer", "use the other worker")

#define SERVICE(id)                                                                        \
    "{'role':'user','content':[{'type':'text','text':'Background job " id " finished'}],"   \
    "'source':{'kind':'service','name':'jobs','job_id':'" id "','call_id':'c1'},'id':'" id "'}"
#define JOB_RESULT SERVICE("job-7")
#define JOB8_RESULT SERVICE("job-8")

/* Generation scenario 4: provisional text before a background tool. */
static void background_job_is_listed_until_it_is_done(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", FIRST);
    admit(&r, 1, 1, FIRST);
    assistant(&r, 1, 1, "starting worker", "c1");
    feed(&r, D, "tool/result",
         "{'turn':1,'step':1,'message':{'role':'tool','content':[{'type':'tool_result',"
         "'call_id':'c1','content':[{'type':'text','text':'%s'}]}]}}",
         "{\\\"status\\\":\\\"queued\\\",\\\"job_id\\\":\\\"job-7\\\",\\\"call_id\\\":\\\"c1\\\"}");
    assert_null(strstr(types(&r), "generation.finished"));
    queue(&r, "next-step", CORRECTION);
    claim(&r, 1, "next-step", CORRECTION);
    admit(&r, 1, 2, CORRECTION);
    assistant(&r, 1, 2, "worker started; corrected", NULL);
    turn_end(&r, 1, "{'kind':'completed'}");
    const json_t *f = nth(&r, "generation.finished", 0);
    assert_string_equal(ids(f, "input_ids"), "first,correction");
    assert_string_equal(str(f, "text"), "worker started; corrected");
    assert_string_equal(ids(f, "active_job_ids"), "job-7");
    assert_string_equal(str(f, "disposition"), "manager_turn_finished");
    assert_string_equal(str(nth(&r, "assistant.message", 0), "generation_id"),
                        str(f, "generation_id"));
    /* the job is done: its result is queued as a service message, and it
     * starts the next generation, which lists no job */
    queue(&r, "next-step", JOB_RESULT);
    feed(&r, D, "turn/start", "{'turn':2}");
    claim(&r, 2, "next-step", JOB_RESULT);
    admit(&r, 2, 1, JOB_RESULT);
    const json_t *jq = nth(&r, "input.queued", 2); /* its receipt came at its claim */
    assert_string_equal(str(jq, "source"), "service:jobs");
    assert_string_equal(str(jq, "delivery"), "new_turn");
    turn_end(&r, 2, "{'kind':'completed'}");
    const json_t *f2 = nth(&r, "generation.finished", 1);
    assert_string_equal(ids(f2, "active_job_ids"), "");
    assert_string_equal(ids(f2, "input_ids"), "job-7");
    /* a job that finishes before its receipt is logged is never listed */
    queue(&r, "next-step", JOB8_RESULT);
    feed(&r, D, "turn/start", "{'turn':3}");
    claim(&r, 3, "next-step", JOB8_RESULT);
    feed(&r, D, "tool/result",
         "{'turn':3,'step':1,'message':{'role':'tool','content':[{'type':'tool_result',"
         "'call_id':'c8','content':[{'type':'text','text':'%s'}]}]}}",
         "{\\\"status\\\":\\\"queued\\\",\\\"job_id\\\":\\\"job-8\\\"}");
    turn_end(&r, 3, "{'kind':'completed'}");
    assert_string_equal(ids(nth(&r, "generation.finished", 2), "active_job_ids"), "");
    rec_fini(&r);
}

#define CTX MSG("ctx", "steer", "context")

/* Claims take next-step input first; the queued prompt is the initial input. */
static void initial_input_is_the_claimed_next_turn_message(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    queue(&r, "next-step", CTX);
    queue(&r, "next-turn", Q1);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-step", CTX);
    claim(&r, 1, "next-turn", Q1);
    admit(&r, 1, 1, CTX);
    admit(&r, 1, 1, Q1);
    turn_end(&r, 1, "{'kind':'completed'}");
    assert_string_equal(str(nth(&r, "generation.started", 0), "initial_input_id"), "q1");
    assert_string_equal(str(nth(&r, "input.queued", 0), "delivery"), "new_turn");
    const json_t *d0 = nth(&r, "input.delivered", 0);
    assert_string_equal(str(d0, "input_id"), "ctx");
    assert_string_equal(str(d0, "delivery"), "request_boundary");
    assert_string_equal(str(nth(&r, "input.delivered", 1), "delivery"), "new_turn");
    assert_string_equal(ids(nth(&r, "generation.finished", 0), "input_ids"), "ctx,q1");
    rec_fini(&r);
}

/* A wake whose input was removed before the claim: no generation. */
static void turn_without_input_has_no_generation(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    feed(&r, D, "turn/start", "{'turn':1}");
    feed(&r, D, "turn/end", "{'turn':1,'reason':{'kind':'completed'}}");
    assert_int_equal(json_array_size(r.events), 0);
    rec_fini(&r);
}

/* Cancel without keep_inbox: the discarded input is reported. */
static void discarded_input_is_reported(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    queue(&r, "next-turn", QUEUED);
    feed(&r, D, "agent/inbox/spliced",
         "{'target':'next-turn','start':0,'removed_count':1,'inserted':[],'outcome':'canceled'}");
    feed(&r, L, "agent/inbox/discarded", "{'message':%s}", QUEUED);
    assert_string_equal(types(&r), "input.queued,input.discarded");
    const json_t *d = nth(&r, "input.discarded", 0);
    assert_string_equal(str(d, "input_id"), "queued");
    assert_string_equal(str(d, "reason"), "canceled");
    /* input the tracker never saw queued (a resumed inbox): the live event names it */
    feed(&r, L, "agent/inbox/discarded", "{'message':%s}", FIRST);
    feed(&r, D, "agent/inbox/spliced",
         "{'target':'next-step','start':0,'removed_count':1,'inserted':[],'outcome':'canceled'}");
    feed(&r, L, "agent/inbox/discarded", "{'message':%s}", FIRST);
    assert_string_equal(types(&r), "input.queued,input.discarded,input.discarded");
    assert_string_equal(str(nth(&r, "input.discarded", 1), "input_id"), "first");
    rec_fini(&r);
}

/* Malformed or spoofed events change nothing and never crash. */
#define FATAL_IO                                                                               \
    "{'turn':1,'step':1,'fatal':true,'error':{'code':'IO','message':'session log x.jsonl: "    \
    "write failed: No space left on device'}}"

/* The log failed mid-turn and took no turn/end: a fatal agent/error ends it. */
static void fatal_agent_error_fails_the_generation(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    queue(&r, "next-turn", FIRST);
    feed(&r, D, "agent/inbox/spliced", "{'target':'next-turn','start':1,'inserted':[%s]}", Q1);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", FIRST);
    feed(&r, D, "step/start", "{'turn':1,'step':1}");
    admit(&r, 1, 1, FIRST);
    /* an error the turn/end records is no end by itself */
    feed(&r, L, "agent/error", "{'turn':1,'step':1,'error':{'code':'UNKNOWN','message':'x'}}");
    /* q1 is queued behind `first`: its receipt waits for its claim */
    assert_string_equal(types(&r), "input.queued,generation.started,input.delivered");
    feed(&r, L, "agent/error", FATAL_IO);
    assert_string_equal(types(&r), "input.queued,generation.started,input.delivered,"
                                   "generation.failed");
    const json_t *f = nth(&r, "generation.failed", 0);
    assert_string_equal(ids(f, "input_ids"), "first");
    assert_string_equal(str(f, "error_type"), "IO");
    assert_non_null(strstr(str(f, "error_message"), "No space left on device"));
    assert_string_equal(str(json_object_get(f, "reason"), "kind"), "error");
    assert_true(json_is_false(json_object_get(f, "durable")));
    /* exactly one terminal event: nothing more closes gen-1 */
    feed(&r, L, "agent/error", FATAL_IO);
    turn_end(&r, 1, "{'kind':'completed'}");
    assert_int_equal(json_array_size(r.events), 4);
    /* a later turn is a new generation */
    feed(&r, D, "turn/start", "{'turn':2}");
    claim(&r, 2, "next-turn", Q1);
    admit(&r, 2, 1, Q1);
    turn_end(&r, 2, "{'kind':'completed'}");
    assert_string_equal(str(nth(&r, "generation.finished", 0), "generation_id"), "gen-2");
    assert_null(json_object_get(nth(&r, "generation.finished", 0), "durable"));
    rec_fini(&r);
}

/* The log failed right after the claims: the generation starts and fails;
 * its input never reached the log.  Events of the turn that another thread
 * delivers after the fatal error still end in that one failure. */
static void fatal_agent_error_before_the_generation_started(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", FIRST);
    feed(&r, L, "agent/error", FATAL_IO);
    assert_string_equal(types(&r), "input.queued,generation.started,input.unknown,"
                                   "generation.failed");
    const json_t *u = nth(&r, "input.unknown", 0);
    assert_string_equal(str(u, "input_id"), "first");
    assert_string_equal(str(u, "reason"), "error");
    assert_true(json_is_false(json_object_get(u, "durable")));
    rec_fini(&r);

    rec_init(&r); /* the fatal error overtakes the turn's own events */
    queue(&r, "next-turn", FIRST);
    feed(&r, L, "agent/error", FATAL_IO);
    feed(&r, D, "turn/start", "{'turn':1}");
    claim(&r, 1, "next-turn", FIRST);
    admit(&r, 1, 1, FIRST);
    assert_string_equal(types(&r), "input.queued,generation.started,input.unknown,"
                                   "generation.failed");
    assert_string_equal(str(nth(&r, "generation.failed", 0), "error_type"), "IO");
    rec_fini(&r);
}

static void hostile_events_are_ignored(void **state) {
    (void)state;
    rec r;
    rec_init(&r);
    assert_int_equal(weir_generation_tracker_feed(NULL, NULL, true), WEIR_E_INVAL);
    json_t *bad = J("{'type':7,'data':{}}");
    assert_int_equal(weir_generation_tracker_feed(r.t, bad, true), WEIR_E_INVAL);
    json_decref(bad);
    bad = J("[1,2]");
    assert_int_equal(weir_generation_tracker_feed(r.t, bad, false), WEIR_E_INVAL);
    json_decref(bad);
    assert_int_equal(feed_rc(&r, D, "turn/start", "null"), WEIR_OK);
    assert_int_equal(feed_rc(&r, D, "turn/start", "{'turn':'x'}"), WEIR_OK);
    assert_int_equal(feed_rc(&r, D, "agent/inbox/spliced", "{'target':'next-turn','inserted':7}"),
                     WEIR_OK);
    assert_int_equal(feed_rc(&r, D, "agent/inbox/spliced",
                             "{'target':'sideways','inserted':[{'id':'x'}]}"),
                     WEIR_OK);
    assert_int_equal(feed_rc(&r, D, "agent/inbox/spliced",
                             "{'target':'next-turn','inserted':[{'id':''},{'role':'user'},7]}"),
                     WEIR_OK);
    assert_int_equal(feed_rc(&r, L, "agent/inbox/claimed", "{'message':'q','turn':1}"), WEIR_OK);
    assert_int_equal(feed_rc(&r, L, "agent/inbox/discarded", "{}"), WEIR_OK);
    assert_int_equal(feed_rc(&r, D, "assistant/message", "{'message':{'content':7}}"), WEIR_OK);
    assert_int_equal(feed_rc(&r, D, "tool/result", "{'message':{'content':[{'content':"
                                                   "[{'text':'{not json'}]}]}}"),
                     WEIR_OK);
    assert_int_equal(feed_rc(&r, D, "turn/end", "{'turn':1,'reason':'x'}"), WEIR_OK);
    assert_int_equal(feed_rc(&r, L, "steering/applied", "{'input_id':5}"), WEIR_OK);
    /* live events named like log events are not log events */
    assert_int_equal(feed_rc(&r, L, "turn/start", "{'turn':1}"), WEIR_OK);
    assert_int_equal(json_array_size(r.events), 0);
    /* the tracker still works */
    demo_turn(&r);
    assert_string_equal(str(nth(&r, "generation.finished", 0), "text"),
                        "2 to the power 10 is 1024.");
    rec_fini(&r);
}

static void receipt_and_text_helpers(void **state) {
    (void)state;
    char buf[64];
    json_t *m = J("{'content':[{'type':'tool_result','call_id':'c','content':[{'type':'text',"
                  "'text':'{\\'status\\':\\'queued\\',\\'job_id\\':\\'job-1\\'}'}]}]}");
    /* the J() quote swap turned the escaped quotes into \" as well */
    assert_string_equal(weir__generation_receipt_job(m, buf, sizeof buf), "job-1");
    assert_null(weir__generation_receipt_job(m, buf, 3));
    json_decref(m);
    m = J("{'content':[{'type':'tool_result','call_id':'c','is_error':true,'content':[{'type':"
          "'text','text':'{\\'status\\':\\'queued\\',\\'job_id\\':\\'job-1\\'}'}]}]}");
    assert_null(weir__generation_receipt_job(m, buf, sizeof buf));
    json_decref(m);
    bool calls = true;
    m = J("{'content':[{'type':'text','text':'a'},{'type':'reasoning','text':'r'},"
          "{'type':'text','text':'b'}]}");
    json_t *t = weir__generation_text(m, &calls);
    assert_string_equal(json_string_value(t), "ab");
    assert_false(calls);
    json_decref(t);
    json_decref(m);
    m = J("{'content':[{'type':'tool_call','id':'c','name':'n','arguments':'{}'}]}");
    t = weir__generation_text(m, &calls);
    assert_string_equal(json_string_value(t), "");
    assert_true(calls);
    json_decref(t);
    json_decref(m);
}

/* Every allocation failure is survived: no crash, no leak, and a run with
 * enough memory emits the full sequence. */
static void allocation_failure_never_crashes(void **state) {
    (void)state;
    for (long n = 1;; n++) {
        rec r;
        memset(&r, 0, sizeof r);
        r.events = json_array();
        assert_non_null(r.events);
        weir__alloc_fail_after(n);
        int rc = weir_generation_tracker_create(collect, &r, &r.t, NULL);
        if (rc == WEIR_OK) {
            const char *steps[][3] = {
                {"D", "agent/inbox/spliced",
                 "{'target':'next-turn','start':0,'inserted':[" Q1 "]}"},
                {"D", "turn/start", "{'turn':1}"},
                {"D", "agent/inbox/spliced", "{'target':'next-turn','start':0,"
                                             "'removed_count':1,'inserted':[]}"},
                {"L", "agent/inbox/claimed", "{'turn':1,'message':" Q1 "}"},
                {"D", "user/message", "{'turn':1,'step':1,'message':" Q1 "}"},
                {"D", "assistant/message", "{'turn':1,'step':1,'message':{'role':'assistant',"
                                           "'content':[{'type':'text','text':'x'}]}}"},
                {"D", "tool/result",
                 "{'message':{'content':[{'content':[{'type':'text','text':"
                 "'{\\'status\\':\\'queued\\',\\'job_id\\':\\'j\\'}'}]}]}}"},
                {"D", "turn/end", "{'turn':1,'reason':{'kind':'completed'}}"},
            };
            for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
                json_t *data = NULL;
                char buf[1024];
                size_t len = strlen(steps[i][2]);
                for (size_t k = 0; k <= len; k++)
                    buf[k] = steps[i][2][k] == '\'' ? '"' : steps[i][2][k];
                data = json_loads(buf, 0, NULL);
                json_t *ev = data ? json_pack("{s:s, s:o}", "type", steps[i][1], "data", data)
                                  : NULL;
                if (ev) {
                    int f = weir_generation_tracker_feed(r.t, ev, steps[i][0][0] == 'D');
                    assert_true(f == WEIR_OK || f == WEIR_E_NOMEM);
                }
                json_decref(ev);
            }
        }
        long used = weir__alloc_fail_after(-1);
        bool complete = rc == WEIR_OK && used < n;
        if (complete) {
            assert_string_equal(types(&r), "input.queued,generation.started,input.delivered,"
                                           "assistant.message,generation.finished");
            assert_string_equal(ids(nth(&r, "generation.finished", 0), "active_job_ids"), "j");
        }
        weir_generation_tracker_destroy(r.t);
        json_decref(r.events);
        if (complete)
            break;
        assert_true(n < 100000);
    }
}

/* ------------------------------------------------------------------------ */
/* Live agents                                                               */
/* ------------------------------------------------------------------------ */

typedef struct live {
    rec r;
    const char *steer_on; /* durable event type that triggers the action */
    int action;           /* 1: steer "s1"; 2: cancel + followup */
} live;

static void live_send(dh *d, const char *id, const char *text, weir_send_mode mode) {
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", text);
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_send(d->agent, m, mode, id, &err) != WEIR_OK)
        fail_msg("send %s: %s", id, err.text);
    json_decref(m);
}

static void live_feed(dh *d, const json_t *event, bool durable) {
    live *l = d->ud;
    assert_int_equal(weir_generation_tracker_feed(l->r.t, event, durable), WEIR_OK);
    if (!l->steer_on || !durable ||
        strcmp(json_string_value(json_object_get(event, "type")), l->steer_on) != 0 ||
        d->count++ != 0)
        return;
    if (l->action == 1) {
        live_send(d, "s1", "steer-now", WEIR_SEND_STEER);
    } else {
        live_send(d, "dropped", "queued-before-cancel", WEIR_SEND_FOLLOWUP);
        assert_int_equal(weir_agent_cancel(d->agent, "user", false), WEIR_OK);
        live_send(d, "after", "sent-after-cancel", WEIR_SEND_STEER);
    }
}

static void live_setup(dh *d, live *l, const char *rows, const char *session) {
    memset(l, 0, sizeof *l);
    rec_init(&l->r);
    dh_setup(d, rows, NULL);
    d->on_event = live_feed;
    d->ud = l;
    dh_open(d, session);
}

static void live_teardown(dh *d, live *l) {
    dh_teardown(d);
    rec_fini(&l->r);
}

static void live_steering_between_steps_joins_the_generation(void **state) {
    (void)state;
    dh d;
    live l;
    live_setup(&d, &l,
               "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
               "{\"text\":\"working\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
               "\"arguments\":{}}]},"
               "{\"text\":\"noted\",\"expect\":{\"message_contains\":\"steer-now\"}}]}},"
               "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
               "[{\"name\":\"lookup\"}]}}]",
               "gsteer");
    l.steer_on = "tool/call";
    l.action = 1;
    live_send(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(types(&l.r), "input.queued,generation.started,input.delivered,"
                                     "assistant.message,input.queued,input.delivered,"
                                     "assistant.message,generation.finished");
    assert_string_equal(str(nth(&l.r, "input.queued", 1), "delivery"), "request_boundary");
    assert_string_equal(str(nth(&l.r, "input.queued", 1), "generation_id"), "gen-1");
    assert_string_equal(ids(nth(&l.r, "assistant.message", 0), "input_ids"), "q1");
    const json_t *f = nth(&l.r, "generation.finished", 0);
    assert_string_equal(ids(f, "input_ids"), "q1,s1");
    assert_string_equal(str(f, "text"), "noted");
    live_teardown(&d, &l);
}

static void live_cancel_detaches_and_the_next_input_starts_a_generation(void **state) {
    (void)state;
    dh d;
    live l;
    live_setup(&d, &l,
               "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
               "{\"text\":\"a\"},{\"text\":\"b\",\"expect\":{\"message_contains\":"
               "\"sent-after-cancel\"}}]}}]",
               "gcancel");
    l.steer_on = "assistant/message";
    l.action = 2;
    live_send(&d, "go", "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    /* receipts wait for the claim: the dropped followup never got one; the
     * steer sent after the cancel got it when turn 2 claimed it */
    assert_string_equal(types(&l.r), "input.queued,generation.started,input.delivered,"
                                     "assistant.message,input.discarded,generation.detached,"
                                     "input.queued,generation.started,input.delivered,"
                                     "assistant.message,generation.finished");
    const json_t *det = nth(&l.r, "generation.detached", 0);
    assert_string_equal(ids(det, "input_ids"), "go");
    assert_string_equal(str(nth(&l.r, "input.discarded", 0), "input_id"), "dropped");
    /* sent after the cancel: re-targeted to the next turn */
    assert_string_equal(str(nth(&l.r, "input.queued", 1), "input_id"), "after");
    assert_string_equal(str(nth(&l.r, "input.queued", 1), "delivery"), "new_turn");
    const json_t *f = nth(&l.r, "generation.finished", 0);
    assert_string_equal(str(f, "generation_id"), "gen-2");
    assert_string_equal(ids(f, "input_ids"), "after");
    assert_string_equal(str(f, "text"), "b");
    live_teardown(&d, &l);
}

static void live_provider_failure_fails_the_generation(void **state) {
    (void)state;
    dh d;
    live l;
    live_setup(&d, &l,
               "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
               "{\"fail\":{\"code\":\"OVERLOADED\",\"message\":\"busy\"}}]}}]",
               "gfail");
    live_send(&d, "first", "hello", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(types(&l.r), "input.queued,generation.started,input.delivered,"
                                     "generation.failed");
    const json_t *f = nth(&l.r, "generation.failed", 0);
    assert_string_equal(ids(f, "input_ids"), "first");
    assert_string_equal(str(f, "error_type"), "OVERLOADED");
    live_teardown(&d, &l);
}

static void live_tool_concluding_the_turn_finishes_with_empty_text(void **state) {
    (void)state;
    dh d;
    live l;
    live_setup(&d, &l,
               "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
               "{\"text\":\"working\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"lookup\","
               "\"arguments\":{}}]}]}},"
               "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
               "[{\"name\":\"lookup\",\"concludes\":true}]}}]",
               "gconclude");
    live_send(&d, "q1", "start", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(types(&l.r), "input.queued,generation.started,input.delivered,"
                                     "assistant.message,generation.finished");
    assert_string_equal(str(nth(&l.r, "assistant.message", 0), "text"), "working");
    assert_string_equal(str(nth(&l.r, "generation.finished", 0), "text"), "");
    live_teardown(&d, &l);
}

static void live_shutdown_holds_queued_input_and_never_replays_it(void **state) {
    (void)state;
    dh d;
    live l;
    live_setup(&d, &l,
               "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
               "{\"text\":\"unused\"}]}}]",
               "gshutdown");
    live_send(&d, "ctx", "context", WEIR_SEND_INJECT);
    live_send(&d, "q1", "question", WEIR_SEND_FOLLOWUP);
    assert_int_equal(weir_generation_tracker_shutdown(NULL, d.agent, NULL), WEIR_E_INVAL);
    assert_int_equal(weir_generation_tracker_shutdown(l.r.t, NULL, NULL), WEIR_E_INVAL);
    assert_int_equal(weir_generation_tracker_shutdown(l.r.t, d.agent, NULL), WEIR_OK);
    /* the inject never woke the agent: its delivery never became known */
    assert_string_equal(types(&l.r), "input.queued,input.held,input.held");
    assert_string_equal(str(nth(&l.r, "input.queued", 0), "input_id"), "q1");
    assert_string_equal(str(nth(&l.r, "input.held", 0), "input_id"), "ctx");
    assert_string_equal(str(nth(&l.r, "input.held", 1), "input_id"), "q1");
    assert_string_equal(str(nth(&l.r, "input.held", 1), "reason"), "shutdown");
    assert_int_equal(weir__inbox_count(d.agent->e.inbox, false), 0);
    assert_int_equal(weir__inbox_count(d.agent->e.inbox, true), 0);
    /* reopening the session replays nothing */
    dh_close(&d);
    dh_open(&d, "gshutdown");
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 0);
    live_teardown(&d, &l);
}

/* The descriptor this process holds open on `path`, or -1. */
static int fd_of(const char *path) {
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;
    int found = -1;
    char link[4200], target[4200];
    while (dir && found < 0 && (e = readdir(dir))) {
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            if (strcmp(target, path) == 0)
                found = atoi(e->d_name);
        }
    }
    if (dir)
        closedir(dir);
    return found;
}

static int log_fd = -1, saved_fd = -1;

/* From the first request on, every write of the log fails (the disk is full). */
static void fill_disk(dh *d, const json_t *event, bool durable) {
    live *l = d->ud;
    assert_int_equal(weir_generation_tracker_feed(l->r.t, event, durable), WEIR_OK);
    if (!durable || saved_fd >= 0 ||
        strcmp(json_string_value(json_object_get(event, "type")), "request/context") != 0)
        return;
    char real[4200];
    assert_non_null(realpath(dh_log(d), real));
    log_fd = fd_of(real);
    assert_true(log_fd >= 0);
    saved_fd = dup(log_fd);
    int full = open("/dev/full", O_WRONLY);
    assert_true(saved_fd >= 0 && full >= 0);
    assert_int_equal(dup2(full, log_fd), log_fd);
    close(full);
}

/* The session log fills up mid-turn: the running generation fails (error
 * type IO, not durable: no turn/end could be logged), and the shutdown
 * holds the queued input although it cannot log the removal. */
static void live_log_failure_fails_the_generation_and_holds_queued_input(void **state) {
    (void)state;
    dh d;
    live l;
    live_setup(&d, &l,
               "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
               "{\"text\":\"a\"},{\"text\":\"b\"}]}}]",
               "gfull");
    d.on_event = fill_disk;
    live_send(&d, "q1", "first", WEIR_SEND_FOLLOWUP);
    live_send(&d, "q2", "second", WEIR_SEND_FOLLOWUP);
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_run_until_idle(d.agent, &err), WEIR_E_IO);
    assert_non_null(strstr(err.text, "write failed: No space left on device"));
    assert_string_equal(types(&l.r), "input.queued,generation.started,input.delivered,"
                                     "generation.failed");
    const json_t *f = nth(&l.r, "generation.failed", 0);
    assert_string_equal(ids(f, "input_ids"), "q1");
    assert_string_equal(str(f, "error_type"), "IO");
    assert_string_equal(str(f, "error_message"), err.text);
    assert_true(json_is_false(json_object_get(f, "durable")));
    assert_int_equal(weir_generation_tracker_shutdown(l.r.t, d.agent, &err), WEIR_E_IO);
    assert_string_equal(types(&l.r), "input.queued,generation.started,input.delivered,"
                                     "generation.failed,input.held");
    const json_t *h = nth(&l.r, "input.held", 0);
    assert_string_equal(str(h, "input_id"), "q2");
    assert_true(json_is_false(json_object_get(h, "durable")));
    /* room again: the log holds the open turn and q2 (a resume would replay it) */
    assert_int_equal(dup2(saved_fd, log_fd), log_fd);
    close(saved_fd);
    saved_fd = -1;
    char *path = strdup(dh_log(&d));
    dh_close(&d);
    dh_check_log(path, NULL, true);
    free(path);
    live_teardown(&d, &l);
}

/* Generation scenario 4, live: a background job outlives its generation. */
static void live_background_job_outlives_its_generation(void **state) {
    (void)state;
    char *dir = wt_tmpdir("genjob");
    assert_non_null(dir);
    char gate[4200], rows[8192];
    snprintf(gate, sizeof gate, "%s/release", dir);
    snprintf(rows, sizeof rows,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"starting worker\",\"tool_calls\":[{\"id\":\"c1\",\"name\":\"crawl\","
             "\"arguments\":{}}]},"
             "{\"text\":\"Queued.\"},"
             "{\"text\":\"Done.\",\"expect\":{\"message_contains\":\"crawl result\"}}]}},"
             "{\"id\":\"tools\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"crawl\",\"reply\":\"crawl result\",\"background\":true,"
             "\"wait_for_file\":\"%s\"}]}}]",
             gate);
    dh d;
    live l;
    live_setup(&d, &l, rows, "gjob");
    live_send(&d, "first", "crawl it", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    json_t *active = weir_agent_active_jobs(d.agent);
    assert_int_equal(json_array_size(active), 1);
    const char *job = json_string_value(json_array_get(active, 0));
    const json_t *f = nth(&l.r, "generation.finished", 0);
    assert_string_equal(str(f, "text"), "Queued.");
    assert_string_equal(ids(f, "active_job_ids"), job);
    assert_string_equal(str(nth(&l.r, "assistant.message", 0), "text"), "starting worker");
    char want[128];
    snprintf(want, sizeof want, "%s", job);
    json_decref(active);
    /* release the job; the driver settles it once its body returned (the
     * job stays active until then) and its result starts a generation */
    assert_int_equal(wt_write_file(gate, "go"), 0);
    for (int i = 0; i < 2000 && count(&l.r, "generation.finished") < 2; i++) {
        usleep(5000);
        dh_run(&d);
    }
    active = weir_agent_active_jobs(d.agent);
    assert_int_equal(json_array_size(active), 0);
    json_decref(active);
    const json_t *s2 = nth(&l.r, "generation.started", 1);
    assert_string_equal(str(s2, "initial_input_id"), want);
    assert_string_equal(str(nth(&l.r, "input.delivered", 1), "source"), "service:jobs");
    const json_t *f2 = nth(&l.r, "generation.finished", 1);
    assert_string_equal(str(f2, "text"), "Done.");
    assert_string_equal(ids(f2, "input_ids"), want);
    assert_string_equal(ids(f2, "active_job_ids"), "");
    live_teardown(&d, &l);
    wt_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(followup_generation_finishes_with_the_last_answer),
        cmocka_unit_test(steering_at_a_request_boundary_joins_input_ids),
        cmocka_unit_test(only_delivered_or_applied_inputs_join_a_generation),
        cmocka_unit_test(finished_text_is_the_last_message_without_tool_calls),
        cmocka_unit_test(cancellation_detaches_without_a_success_event),
        cmocka_unit_test(failure_is_correlated_with_its_inputs),
        cmocka_unit_test(blocked_turn_fails_and_its_claimed_input_is_discarded),
        cmocka_unit_test(background_job_is_listed_until_it_is_done),
        cmocka_unit_test(initial_input_is_the_claimed_next_turn_message),
        cmocka_unit_test(turn_without_input_has_no_generation),
        cmocka_unit_test(discarded_input_is_reported),
        cmocka_unit_test(fatal_agent_error_fails_the_generation),
        cmocka_unit_test(fatal_agent_error_before_the_generation_started),
        cmocka_unit_test(hostile_events_are_ignored),
        cmocka_unit_test(receipt_and_text_helpers),
        cmocka_unit_test(allocation_failure_never_crashes),
        cmocka_unit_test(live_steering_between_steps_joins_the_generation),
        cmocka_unit_test(live_cancel_detaches_and_the_next_input_starts_a_generation),
        cmocka_unit_test(live_provider_failure_fails_the_generation),
        cmocka_unit_test(live_tool_concluding_the_turn_finishes_with_empty_text),
        cmocka_unit_test(live_shutdown_holds_queued_input_and_never_replays_it),
        cmocka_unit_test(live_log_failure_fails_the_generation_and_holds_queued_input),
        cmocka_unit_test(live_background_job_outlives_its_generation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
