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
    assert_int_equal(wt_write_file(gate, "go"), 0);
    for (int i = 0; i < 2000 && json_array_size(active) > 0; i++) {
        json_decref(active);
        usleep(5000);
        active = weir_agent_active_jobs(d.agent);
    }
    assert_int_equal(json_array_size(active), 0);
    json_decref(active);
    /* the result was steered in: it wakes the idle agent for a new turn */
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/end"), 2);
    assert_string_equal(reason_kind(&d, 1), "completed");
    const json_t *um = json_object_get(dh_find(&d, "user/message", 1), "data");
    const json_t *src = json_object_get(json_object_get(um, "message"), "source");
    assert_string_equal(json_string_value(json_object_get(src, "kind")), "service");
    assert_non_null(json_object_get(src, "job_id"));
    dh_teardown(&d);
    wt_rmtree(dir);
    free(dir);
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

static void changed_system_prompt_replaces_the_head_node(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"text\":\"a\"},{\"text\":\"b\",\"expect\":{\"message_contains\":\"call 2\"}}]}},"
             PROMPT_ROW ",{\"id\":\"counter\",\"plugin\":\"drvtest-hooks\",\"config\":"
             "{\"assemble_counter\":true}}]",
             NULL);
    dh_open(&d, "sysreplace");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "system/message"), 2);
    const json_t *first = dh_find(&d, "system/message", 0);
    const json_t *second = dh_find(&d, "system/message", 1);
    const json_t *op = json_object_get(second, "surface_op");
    assert_string_equal(json_string_value(json_object_get(op, "op")), "replace");
    assert_int_equal(json_integer_value(json_object_get(op, "start_seq")),
                     json_integer_value(json_object_get(first, "seq")));
    json_t *msgs = weir_agent_messages(d.agent);
    const json_t *sys = json_array_get(msgs, 0);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(sys, "content"), 0), "text")),
        "Be brief.\n\ncall 2 {{unset}}");
    assert_int_equal(json_array_size(msgs), 5);
    json_decref(msgs);
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

/* Fail the n-th allocation of an open + send + run, for every n: no crash,
 * no leak, and every log left behind passes the check (open turns allowed). */
static void agent_survives_every_allocation_failure(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"loop\":true,"
             "\"replies\":[{\"text\":\"fine\",\"chunks\":2}]}}," PROMPT_ROW "]",
             NULL);
    long n;
    for (n = 1; n < 100000; n++) {
        char id[32];
        snprintf(id, sizeof id, "oom%ld", n);
        weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
        o.session_id = id;
        weir_agent *a = NULL;
        weir__alloc_fail_after(n);
        if (weir_agent_open(d.host, &o, &a, NULL) == WEIR_OK &&
            weir_agent_send_text(a, "hi", WEIR_SEND_FOLLOWUP, NULL) == WEIR_OK)
            weir_agent_run_until_idle(a, NULL);
        long used = weir__alloc_fail_after(-1);
        if (a) {
            char *path = strdup(weir_agent_log_path(a));
            weir_agent_close(a);
            dh_check_log(path, NULL, true);
            free(path);
        }
        if (used < n)
            break; /* the whole run fit before the n-th allocation */
    }
    assert_true(n > 10);
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(simple_turn_emits_ordered_events),
        cmocka_unit_test(tool_round_trip_puts_result_in_next_request),
        cmocka_unit_test(background_job_result_returns_as_a_service_message),
        cmocka_unit_test(pre_step_reject_blocks_turn_without_step),
        cmocka_unit_test(pre_step_reject_names_row_and_reason),
        cmocka_unit_test(pre_step_rewrite_changes_entered_messages),
        cmocka_unit_test(pre_step_rewrite_to_empty_spends_no_step),
        cmocka_unit_test(pre_step_throw_errors_turn_and_keeps_queued_work),
        cmocka_unit_test(max_tokens_is_sticky_and_dispatches_no_tools),
        cmocka_unit_test(request_model_switch_logs_header_change),
        cmocka_unit_test(replaying_log_gives_identical_derived_history),
        cmocka_unit_test(llm_stream_listener_replays_its_own_chunks),
        cmocka_unit_test(changed_system_prompt_replaces_the_head_node),
        cmocka_unit_test(plugin_events_are_logged_ignorable),
        cmocka_unit_test(empty_completion_is_logged_but_not_model_visible),
        cmocka_unit_test(agent_survives_every_allocation_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
