/*
 * tests/unit/test_continuation.c - reasoning continuations (issue #32 item
 * 1; docs/session-log.md "Reasoning continuations"): the fold of the
 * `continuation` chunk (core/format/assistant_stream.c), the request filter
 * (core/format/continuation.c: malformed, route, prefix), and the driver's
 * request/continuations-dropped event, through agents of the driver
 * harness (which also rebuilds every request from the log: derive ==
 * request).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assistant_stream.h"
#include "continuation.h"
#include "driver_harness.h"
#include "surface.h"
#include "testutil.h"

static json_t *J(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v)
        fail_msg("bad JSON in test: %s: %s", e.text, text);
    return v;
}

static char *dumps(const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    assert_non_null(s);
    return s;
}

static void assert_dump(const json_t *v, const char *want) {
    char *got = dumps(v);
    if (strcmp(got, want) != 0)
        fail_msg("got  %s\nwant %s", got, want);
    free(got);
}

#define CONT_A "{\"provider\":\"anthropic\",\"model\":\"claude-opus-4-7\",\"data\":{\"signature\":\"sig\"}}"

/* ------------------------------------------------------------------------ */
/* The fold                                                                  */
/* ------------------------------------------------------------------------ */

static void fold_keeps_empty_reasoning_with_continuation(void **state) {
    (void)state;
    json_t *chunks = J(
        "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"reasoning\",\"time\":1},"
        "{\"type\":\"reasoning-delta\",\"index\":0,\"text\":\"\",\"time\":2},"
        "{\"type\":\"continuation\",\"index\":0,\"continuation\":{\"provider\":\"x\","
        "\"model\":\"m\",\"data\":{\"signature\":\"old\"}},\"time\":3},"
        "{\"type\":\"continuation\",\"index\":0,\"continuation\":" CONT_A ",\"time\":4},"
        "{\"type\":\"block-end\",\"index\":0,\"time\":5},"
        /* a redacted block: no block-start, no deltas */
        "{\"type\":\"continuation\",\"index\":1,\"continuation\":{\"provider\":\"anthropic\","
        "\"model\":\"claude-opus-4-7\",\"data\":{\"redacted_data\":\"R\"}},\"time\":6},"
        /* an empty reasoning block without one is still left out */
        "{\"type\":\"reasoning-delta\",\"index\":2,\"text\":\"\",\"time\":7},"
        "{\"type\":\"tool-call-delta\",\"index\":3,\"id\":\"c1\",\"name\":\"pow\","
        "\"arguments_delta\":\"{}\",\"time\":8},"
        "{\"type\":\"continuation\",\"index\":3,\"continuation\":{\"provider\":\"g\","
        "\"model\":\"gemini-3-flash\",\"data\":{\"thought_signature\":\"T\"}},\"time\":9},"
        "{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"},\"time\":10}]");
    weir__assembled m;
    assert_int_equal(weir__stream_assemble(chunks, true, &m), 0);
    assert_dump(m.message,
                "{\"role\":\"assistant\",\"content\":["
                "{\"type\":\"reasoning\",\"text\":\"\",\"continuation\":" CONT_A "},"
                "{\"type\":\"reasoning\",\"text\":\"\",\"continuation\":{\"provider\":"
                "\"anthropic\",\"model\":\"claude-opus-4-7\",\"data\":{\"redacted_data\":"
                "\"R\"}}},"
                "{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"pow\",\"arguments\":\"{}\","
                "\"continuation\":{\"provider\":\"g\",\"model\":\"gemini-3-flash\",\"data\":"
                "{\"thought_signature\":\"T\"}}}]}");
    assert_false(m.visible);
    assert_dump(m.calls, "[{\"id\":\"c1\",\"name\":\"pow\",\"arguments\":\"{}\"}]");
    /* the log's compact form gives the chunks back exactly, and folds the same */
    json_t *compact = weir__stream_compact(chunks);
    assert_true(weir__stream_is_compact(compact));
    json_t *back = weir__stream_expand(compact);
    assert_true(json_equal(back, chunks));
    weir__assembled m2;
    assert_int_equal(weir__stream_assemble(back, true, &m2), 0);
    assert_true(json_equal(m.message, m2.message));
    json_decref(m2.message);
    json_decref(m2.calls);
    json_decref(back);
    json_decref(compact);
    json_decref(m.message);
    json_decref(m.calls);
    json_decref(chunks);
}

/* ------------------------------------------------------------------------ */
/* The filter                                                                */
/* ------------------------------------------------------------------------ */

static const char HISTORY[] =
    "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]},"
    "{\"role\":\"assistant\",\"content\":["
    "{\"type\":\"reasoning\",\"text\":\"think\",\"continuation\":" CONT_A "},"
    "{\"type\":\"text\",\"text\":\"ok\"},"
    "{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"pow\",\"arguments\":\"{}\","
    "\"continuation\":" CONT_A "}]},"
    "{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"call_id\":\"c1\","
    "\"content\":[]}]},"
    "{\"role\":\"assistant\",\"content\":["
    "{\"type\":\"reasoning\",\"text\":\"\",\"continuation\":" CONT_A "}]}]";

static void same_route_keeps_every_continuation(void **state) {
    (void)state;
    json_t *msgs = J(HISTORY);
    weir__cont_dropped d;
    json_t *out = weir__continuation_filter(msgs, "anthropic", "claude-opus-4-7", NULL, &d);
    assert_ptr_equal(out, msgs); /* nothing dropped: the array itself */
    assert_int_equal(weir__continuation_count(&d), 0);
    assert_null(weir__continuation_event("anthropic", "claude-opus-4-7", &d));
    json_decref(out);
    json_decref(msgs);
}

static void route_change_drops_reasoning_and_strips_calls(void **state) {
    (void)state;
    json_t *msgs = J(HISTORY);
    char *before = dumps(msgs);
    weir__cont_dropped d;
    json_t *out = weir__continuation_filter(msgs, "anthropic", "claude-sonnet-4-5", NULL, &d);
    assert_non_null(out);
    assert_dump(out, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]},"
                     "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"ok\"},"
                     "{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"pow\",\"arguments\":"
                     "\"{}\"}]},"
                     "{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"call_id\":"
                     "\"c1\",\"content\":[]}]}]");
    assert_int_equal(d.route, 3);
    assert_int_equal(d.malformed + d.prefix, 0);
    /* unchanged messages are shared, the input is as it was */
    assert_ptr_equal(json_array_get(out, 0), json_array_get(msgs, 0));
    char *after = dumps(msgs);
    assert_string_equal(before, after);
    json_t *ev = weir__continuation_event("anthropic", "claude-sonnet-4-5", &d);
    assert_dump(ev, "{\"provider\":\"anthropic\",\"model\":\"claude-sonnet-4-5\",\"count\":3,"
                    "\"reasons\":{\"route\":3}}");
    json_decref(ev);
    json_decref(out);
    /* another provider row with the same model is another route too */
    out = weir__continuation_filter(msgs, "anthropic-2", "claude-opus-4-7", NULL, &d);
    assert_int_equal(d.route, 3);
    json_decref(out);
    free(before);
    free(after);
    json_decref(msgs);
}

static void malformed_blobs_are_dropped(void **state) {
    (void)state;
    static const char *const bad[] = {
        "null",
        "\"sig\"",
        "[]",
        "{}",
        "{\"model\":\"m\",\"data\":{\"k\":\"v\"}}",
        "{\"provider\":\"p\",\"data\":{\"k\":\"v\"}}",
        "{\"provider\":\"\",\"model\":\"m\",\"data\":{\"k\":\"v\"}}",
        "{\"provider\":\"p\",\"model\":\"\",\"data\":{\"k\":\"v\"}}",
        "{\"provider\":1,\"model\":\"m\",\"data\":{\"k\":\"v\"}}",
        "{\"provider\":\"p\",\"model\":[],\"data\":{\"k\":\"v\"}}",
        "{\"provider\":\"p\",\"model\":\"m\"}",
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":{}}",
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":\"v\"}",
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":[\"v\"]}",
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":{\"k\":1}}",
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":{\"k\":\"v\",\"n\":null}}",
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":{\"k\":{\"x\":\"y\"}}}",
        /* prefix_bound, when present, is a boolean */
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":{\"k\":\"v\"},\"prefix_bound\":null}",
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":{\"k\":\"v\"},\"prefix_bound\":0}",
        "{\"provider\":\"p\",\"model\":\"m\",\"data\":{\"k\":\"v\"},"
        "\"prefix_bound\":\"false\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "[{\"role\":\"assistant\",\"content\":["
                 "{\"type\":\"reasoning\",\"text\":\"t\",\"continuation\":%s},"
                 "{\"type\":\"tool_call\",\"id\":\"c\",\"name\":\"n\",\"arguments\":\"{}\","
                 "\"continuation\":%s}]}]",
                 bad[i], bad[i]);
        json_t *msgs = J(text);
        assert_false(weir__continuation_valid(
            json_object_get(json_array_get(json_object_get(json_array_get(msgs, 0), "content"), 0),
                            "continuation")));
        weir__cont_dropped d;
        /* the route matches every well-formed field: only the shape drops it */
        json_t *out = weir__continuation_filter(msgs, "p", "m", NULL, &d);
        if (d.malformed != 2 || d.route || d.prefix)
            fail_msg("%s: malformed %zu route %zu prefix %zu", bad[i], d.malformed, d.route,
                     d.prefix);
        assert_dump(out, "[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_call\","
                         "\"id\":\"c\",\"name\":\"n\",\"arguments\":\"{}\"}]}]");
        json_decref(out);
        json_decref(msgs);
    }
    /* a message left with nothing is left out */
    json_t *msgs = J("[{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\",\"text\":"
                     "\"t\",\"continuation\":7}]},{\"role\":\"user\",\"content\":[]}]");
    weir__cont_dropped d;
    json_t *out = weir__continuation_filter(msgs, "p", "m", NULL, &d);
    assert_dump(out, "[{\"role\":\"user\",\"content\":[]}]");
    assert_int_equal(d.malformed, 1);
    json_decref(out);
    json_decref(msgs);
}

/* An envelope of the surface: seq, type, data.message, surface_op. */
static json_t *node(int seq, const char *type, const char *message, const char *op) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"seq\":%d,\"time\":0,\"type\":\"%s\",\"data\":{\"message\":%s},"
             "\"surface_op\":%s}",
             seq, type, message, op);
    return J(text);
}

static void stale_after_a_compaction_replace(void **state) {
    (void)state;
    weir__surface *s = NULL;
    assert_int_equal(weir__surface_create(&s), WEIR_OK);
    const char *asst = "{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\",\"text\":"
                       "\"r\",\"continuation\":" CONT_A "},{\"type\":\"text\",\"text\":\"a\"}]}";
    const char *user = "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"u\"}]}";
    json_t *evs[] = {
        node(0, "user/message", user, "\"append\""),
        node(1, "assistant/message", asst, "\"append\""),
        node(2, "user/message", user, "\"append\""),
        node(3, "assistant/message", asst, "\"append\""),
        node(4, "user/message", user, "\"append\""),
        /* a compaction summary replaces seqs 0..1, before the second answer */
        J("{\"seq\":5,\"time\":0,\"type\":\"user/message\",\"data\":{\"message\":{\"role\":"
          "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"summary\"}]}},\"surface_op\":"
          "{\"op\":\"replace\",\"start_seq\":0,\"end_seq\":1},\"source_seqs\":[0,1]}"),
        node(6, "assistant/message", asst, "\"append\""),
    };
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++) {
        char msg[256];
        if (weir__surface_check(s, evs[i], msg, sizeof msg) != 0)
            fail_msg("event %zu: %s", i, msg);
        assert_int_equal(weir__surface_apply(s, evs[i]), WEIR_OK);
    }
    json_t *msgs = weir__surface_derive(s);
    assert_int_equal(json_array_size(msgs), 5);
    bool *stale = NULL;
    assert_int_equal(weir__continuation_stale(s, msgs, &stale), 0);
    assert_non_null(stale);
    bool want[] = {false, false, true, false, false}; /* summary, u, a(3), u, a(6) */
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(stale[i], want[i]);
    weir__free(stale);
    json_t *ctx = J("{\"provider\":\"anthropic\",\"model\":\"claude-opus-4-7\"}");
    weir__cont_dropped d;
    json_t *out = weir__continuation_apply(msgs, s, ctx, &d);
    assert_int_equal(d.prefix, 1);
    assert_int_equal(d.route + d.malformed, 0);
    assert_dump(json_object_get(json_array_get(out, 2), "content"),
                "[{\"type\":\"text\",\"text\":\"a\"}]");
    assert_ptr_equal(json_array_get(out, 4), json_array_get(msgs, 4)); /* after it: kept */
    /* a copy of the history is matched with no node: nothing is known stale */
    json_t *copy = json_deep_copy(msgs);
    assert_int_equal(weir__continuation_stale(s, copy, &stale), 0);
    for (size_t i = 0; i < 5; i++)
        assert_false(stale[i]);
    weir__free(stale);
    json_decref(copy);
    json_decref(out);
    json_decref(ctx);
    json_decref(msgs);
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
        json_decref(evs[i]);
    weir__surface_destroy(s);
}

/*
 * A continuation with "prefix_bound": false is not bound to the history
 * before it (DeepSeek's reasoning_content is plain text the API wants back
 * on every tool-call turn: api-docs.deepseek.com/guides/thinking_mode), so
 * a replace before its message does not make it stale; a bound one (absent
 * or true) is dropped as before.
 */
#define CONT_D                                                                              \
    "{\"provider\":\"deepseek\",\"model\":\"deepseek-reasoner\",\"data\":{\"field\":"        \
    "\"reasoning_content\"},\"prefix_bound\":false}"
#define CONT_D_BOUND                                                                        \
    "{\"provider\":\"deepseek\",\"model\":\"deepseek-reasoner\",\"data\":{\"field\":"        \
    "\"reasoning_content\"},\"prefix_bound\":true}"

static void unbound_continuation_survives_a_stale_prefix(void **state) {
    (void)state;
    json_t *msgs = J("[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"summary\"}]},"
                     "{\"role\":\"assistant\",\"content\":["
                     "{\"type\":\"reasoning\",\"text\":\"r\",\"continuation\":" CONT_D "},"
                     "{\"type\":\"tool_call\",\"id\":\"c\",\"name\":\"n\",\"arguments\":\"{}\"}]},"
                     "{\"role\":\"assistant\",\"content\":["
                     "{\"type\":\"reasoning\",\"text\":\"s\",\"continuation\":" CONT_D_BOUND "},"
                     "{\"type\":\"text\",\"text\":\"a\"}]}]");
    assert_true(weir__continuation_valid(json_object_get(
        json_array_get(json_object_get(json_array_get(msgs, 1), "content"), 0), "continuation")));
    bool stale[] = {false, true, true};
    weir__cont_dropped d;
    json_t *out = weir__continuation_filter(msgs, "deepseek", "deepseek-reasoner", stale, &d);
    assert_non_null(out);
    assert_int_equal(d.prefix, 1); /* the bound one only */
    assert_int_equal(d.route + d.malformed, 0);
    assert_ptr_equal(json_array_get(out, 1), json_array_get(msgs, 1)); /* kept as it was */
    assert_dump(json_object_get(json_array_get(out, 2), "content"),
                "[{\"type\":\"text\",\"text\":\"a\"}]");
    json_decref(out);
    /* on another route it goes like any other */
    out = weir__continuation_filter(msgs, "deepseek", "deepseek-chat", stale, &d);
    assert_int_equal(d.route, 2);
    json_decref(out);
    json_decref(msgs);
}

/* ------------------------------------------------------------------------ */
/* Through the driver                                                        */
/* ------------------------------------------------------------------------ */

#define POW_ROW                                                                            \
    ",{\"id\":\"math\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"             \
    "[{\"name\":\"pow\",\"reply\":\"8\"}]}}"

/* The messages of the n-th request the agent sent (drvtest/request). */
static const json_t *sent_messages(const dh *d, int n) {
    const json_t *ev = dh_find(d, "drvtest/request", n);
    assert_non_null(ev);
    return json_object_get(json_object_get(json_object_get(ev, "data"), "request"), "messages");
}

static bool has(const json_t *v, const char *needle) {
    char *s = dumps(v);
    bool found = strstr(s, needle) != NULL;
    free(s);
    return found;
}

static void same_route_sends_continuations_back(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"reasoning\":\"\",\"continuation\":{\"redacted_data\":\"RD\"},"
             "\"tool_calls\":[{\"id\":\"c1\",\"name\":\"pow\",\"arguments\":{},"
             "\"continuation\":{\"thought_signature\":\"TS\"}}]},"
             "{\"text\":\"done\",\"expect\":{\"message_contains\":\"TS\"}}]}}" POW_ROW "]",
             NULL);
    dh_open(&d, "same");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *m = json_array_get(sent_messages(&d, 1), 1);
    assert_dump(json_object_get(m, "content"),
                "[{\"type\":\"reasoning\",\"text\":\"\",\"continuation\":{\"provider\":"
                "\"scripted\",\"model\":\"demo\",\"data\":{\"redacted_data\":\"RD\"}}},"
                "{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"pow\",\"arguments\":\"{}\","
                "\"continuation\":{\"provider\":\"scripted\",\"model\":\"demo\",\"data\":"
                "{\"thought_signature\":\"TS\"}}}]");
    assert_int_equal(dh_count(&d, WEIR__CONTINUATIONS_DROPPED), 0);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(dh_find(&d, "turn/end", 0), "data"),
                                            "reason"),
                            "kind")),
                        "completed");
    dh_teardown(&d);
}

static void route_change_is_logged_once(void **state) {
    (void)state;
    dh d;
    /* the first answer's blobs were made for another model: requests 2 and 3
     * leave them out, and the event says so once */
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"reasoning\":\"hmm\",\"continuation\":{\"provider\":\"scripted\",\"model\":"
             "\"other\",\"data\":{\"signature\":\"S1\"}},"
             "\"tool_calls\":[{\"id\":\"c1\",\"name\":\"pow\",\"arguments\":{},"
             "\"continuation\":{\"provider\":\"scripted\",\"model\":\"other\",\"data\":"
             "{\"thought_signature\":\"T1\"}}}]},"
             "{\"tool_calls\":[{\"id\":\"c2\",\"name\":\"pow\",\"arguments\":{}}]},"
             "{\"text\":\"done\"}]}}" POW_ROW "]",
             NULL);
    dh_open(&d, "route");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "drvtest/request"), 3);
    assert_int_equal(dh_count(&d, WEIR__CONTINUATIONS_DROPPED), 1);
    const json_t *ev = dh_find(&d, WEIR__CONTINUATIONS_DROPPED, 0);
    assert_true(json_is_true(json_object_get(ev, "ignorable")));
    assert_dump(json_object_get(ev, "data"),
                "{\"provider\":\"scripted\",\"model\":\"demo\",\"count\":2,\"reasons\":"
                "{\"route\":2}}");
    /* logged before the request it is about */
    assert_true(json_integer_value(json_object_get(ev, "seq")) <
                json_integer_value(json_object_get(dh_find(&d, "drvtest/request", 1), "seq")));
    assert_true(json_integer_value(json_object_get(ev, "seq")) >
                json_integer_value(json_object_get(dh_find(&d, "drvtest/request", 0), "seq")));
    for (int n = 1; n < 3; n++) {
        const json_t *msgs = sent_messages(&d, n);
        assert_false(has(msgs, "S1"));
        assert_false(has(msgs, "T1"));
        assert_false(has(msgs, "hmm"));
        assert_true(has(msgs, "\"c1\""));
    }
    /* the log keeps them as they came */
    assert_true(has(dh_find(&d, "assistant/message", 0), "T1"));
    dh_teardown(&d);
}

static void resumed_log_with_a_malformed_continuation_goes_on(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":["
             "{\"reasoning\":\"r\",\"continuation\":{\"provider\":\"scripted\",\"model\":"
             "\"demo\",\"data\":{\"signature\":42}},\"text\":\"first\"},"
             "{\"text\":\"second\"},{\"text\":\"third\"}]}}]",
             NULL);
    dh_open(&d, "resumed");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    dh_close(&d);
    dh_open(&d, "resumed");
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, WEIR__CONTINUATIONS_DROPPED), 1);
    assert_dump(json_object_get(dh_find(&d, WEIR__CONTINUATIONS_DROPPED, 0), "data"),
                "{\"provider\":\"scripted\",\"model\":\"demo\",\"count\":1,\"reasons\":"
                "{\"malformed\":1}}");
    /* the harness keeps the events of both opens: turn 2 is the second */
    const json_t *end = json_object_get(json_object_get(dh_find(&d, "turn/end", 1), "data"),
                                        "reason");
    assert_string_equal(json_string_value(json_object_get(end, "kind")), "completed");
    const json_t *msgs = sent_messages(&d, 1);
    assert_false(has(msgs, "continuation"));
    assert_true(has(msgs, "first"));
    /* the next turn drops the same: the event found in the log is not repeated */
    dh_send(&d, "three", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, "drvtest/request"), 3);
    assert_int_equal(dh_count(&d, WEIR__CONTINUATIONS_DROPPED), 1);
    dh_teardown(&d);
}

/* A compaction's summary replaces the history before the kept tail: the
 * tail's continuations were signed against the old prefix, so the next
 * request leaves them out (reason prefix), and the log says so. */
static void compaction_makes_the_tail_stale(void **state) {
    (void)state;
    char a1[401];
    memset(a1, 'a', 400);
    a1[400] = '\0';
    char rows[2048];
    snprintf(rows, sizeof rows,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{"
             "\"models\":{\"demo\":{\"context_window\":1000,\"max_output\":100}},"
             "\"replies\":[{\"text\":\"%s\"},"
             "{\"reasoning\":\"think\",\"continuation\":{\"signature\":\"SIG\"},"
             "\"text\":\"short answer\"},"
             "{\"text\":\"SUMMARY\"},"
             "{\"text\":\"third\"}]}},"
             "{\"id\":\"compact\",\"plugin\":\"compaction-basic\",\"config\":"
             "{\"keep_recent_tokens\":1}}]",
             a1);
    dh d;
    dh_setup(&d, rows, NULL);
    dh_open(&d, "stale");
    dh_send(&d, "first question", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    dh_send(&d, "second question", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    json_t *r = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_agent_compact(d.agent, NULL, &r, &err), WEIR_OK);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "compacted");
    json_decref(r);
    json_t *msgs = weir_agent_messages(d.agent);
    assert_true(has(msgs, "SIG")); /* the history keeps it */
    json_decref(msgs);
    assert_int_equal(dh_count(&d, WEIR__CONTINUATIONS_DROPPED), 0);
    dh_send(&d, "third question", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_int_equal(dh_count(&d, WEIR__CONTINUATIONS_DROPPED), 1);
    assert_dump(json_object_get(dh_find(&d, WEIR__CONTINUATIONS_DROPPED, 0), "data"),
                "{\"provider\":\"scripted\",\"model\":\"demo\",\"count\":1,\"reasons\":"
                "{\"prefix\":1}}");
    int n = dh_count(&d, "drvtest/request");
    const json_t *last = dh_find(&d, "drvtest/request", n - 1);
    assert_false(has(last, "SIG"));
    assert_true(has(last, "short answer"));
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fold_keeps_empty_reasoning_with_continuation),
        cmocka_unit_test(same_route_keeps_every_continuation),
        cmocka_unit_test(route_change_drops_reasoning_and_strips_calls),
        cmocka_unit_test(malformed_blobs_are_dropped),
        cmocka_unit_test(stale_after_a_compaction_replace),
        cmocka_unit_test(unbound_continuation_survives_a_stale_prefix),
        cmocka_unit_test(same_route_sends_continuations_back),
        cmocka_unit_test(route_change_is_logged_once),
        cmocka_unit_test(resumed_log_with_a_malformed_continuation_goes_on),
        cmocka_unit_test(compaction_makes_the_tail_stale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
