/*
 * tests/unit/test_assistant_stream.c - the compact timed stream of
 * assistant/message and assistant/attempt (core/format/assistant_stream.c,
 * docs/session-log.md "The stream"): the exact form of each record, the
 * exact expansion back to the chunks, the raw chunk arrays of older logs
 * read as they are, the fold into a message (call ids a server left out
 * are derived, so the same stream always folds the same), and `weir log
 * --check` rebuilding each message from its stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weir/host.h"

#include "assistant_stream.h"
#include "testutil.h"

static json_t *J(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v)
        fail_msg("bad JSON in test: %s: %s", e.text, text);
    return v;
}

static void assert_dump(const json_t *v, const char *want) {
    char *got = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fail_msg("got  %s\nwant %s", got, want);
    free(got);
}

/* A text answer with a tool call, as provider-scripted streams it. */
static const char typical[] =
    "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"text\",\"time\":1000},"
    "{\"type\":\"text-delta\",\"index\":0,\"text\":\"Hel\",\"time\":1002},"
    "{\"type\":\"text-delta\",\"index\":0,\"text\":\"lo \",\"time\":1002},"
    "{\"type\":\"text-delta\",\"index\":0,\"text\":\"there.\",\"time\":1010},"
    "{\"type\":\"block-end\",\"index\":0,\"time\":1011},"
    "{\"type\":\"block-start\",\"index\":1,\"block_type\":\"tool_call\",\"time\":1012},"
    "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"c1\",\"name\":\"pow\","
    "\"arguments_delta\":\"{\\\"x\\\":\",\"time\":1013},"
    "{\"type\":\"tool-call-delta\",\"index\":1,\"arguments_delta\":\"2}\",\"time\":1020},"
    "{\"type\":\"block-end\",\"index\":1,\"time\":1020},"
    "{\"type\":\"usage\",\"usage\":{\"input_tokens\":5,\"output_tokens\":3},\"time\":1021},"
    "{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"},\"time\":1021}]";

static void runs_of_deltas_pack_into_timed_records(void **state) {
    (void)state;
    json_t *chunks = J(typical);
    json_t *compact = weir__stream_compact(chunks);
    assert_dump(compact,
                "[{\"type\":\"chunk\",\"time\":1000,\"chunk\":{\"type\":\"block-start\",\"index\":0,"
                "\"block_type\":\"text\"}},"
                "{\"type\":\"text-chunks\",\"index\":0,\"time0\":1002,\"dt\":[0,0,8],"
                "\"texts\":[\"Hel\",\"lo \",\"there.\"]},"
                "{\"type\":\"chunk\",\"time\":1011,\"chunk\":{\"type\":\"block-end\",\"index\":0}},"
                "{\"type\":\"chunk\",\"time\":1012,\"chunk\":{\"type\":\"block-start\",\"index\":1,"
                "\"block_type\":\"tool_call\"}},"
                "{\"type\":\"tool-call-chunks\",\"index\":1,\"time0\":1013,\"dt\":[0,7],\"id\":"
                "\"c1\",\"name\":\"pow\",\"args\":[\"{\\\"x\\\":\",\"2}\"]},"
                "{\"type\":\"chunk\",\"time\":1020,\"chunk\":{\"type\":\"block-end\",\"index\":1}},"
                "{\"type\":\"chunk\",\"time\":1021,\"chunk\":{\"type\":\"usage\",\"usage\":"
                "{\"input_tokens\":5,\"output_tokens\":3}}},"
                "{\"type\":\"chunk\",\"time\":1021,\"chunk\":{\"type\":\"finish\",\"reason\":"
                "{\"kind\":\"tool-calls\"}}}]");
    assert_true(weir__stream_is_compact(compact));
    assert_false(weir__stream_is_compact(chunks));
    json_t *back = weir__stream_expand(compact);
    assert_true(json_equal(back, chunks));
    json_decref(back);
    json_decref(compact);
    json_decref(chunks);
}

/* Whatever the chunks, expanding the compact form gives them back exactly. */
static void expansion_is_exact_for_any_chunks(void **state) {
    (void)state;
    static const char *const cases[] = {
        "[]",
        /* interleaved parallel tool calls: a run per switch */
        "[{\"type\":\"tool-call-delta\",\"index\":0,\"id\":\"a\",\"name\":\"f\","
        "\"arguments_delta\":\"\",\"time\":5},"
        "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"b\",\"name\":\"g\","
        "\"arguments_delta\":\"{\",\"time\":6},"
        "{\"type\":\"tool-call-delta\",\"index\":0,\"arguments_delta\":\"{}\",\"time\":7},"
        "{\"type\":\"tool-call-delta\",\"index\":1,\"arguments_delta\":\"}\",\"time\":9}]",
        /* an id repeated on every delta, a name alone, an id without a name */
        "[{\"type\":\"tool-call-delta\",\"index\":0,\"id\":\"a\",\"arguments_delta\":\"{\","
        "\"time\":1},{\"type\":\"tool-call-delta\",\"index\":0,\"id\":\"a\","
        "\"arguments_delta\":\"}\",\"time\":2},{\"type\":\"tool-call-delta\",\"index\":0,"
        "\"name\":\"n\",\"arguments_delta\":\"\",\"time\":3}]",
        /* reasoning then text on one index, times going back, empty texts */
        "[{\"type\":\"reasoning-delta\",\"index\":0,\"text\":\"hm\",\"time\":10},"
        "{\"type\":\"reasoning-delta\",\"index\":0,\"text\":\"\",\"time\":4},"
        "{\"type\":\"text-delta\",\"index\":0,\"text\":\"ok\",\"time\":11}]",
        /* not packable: no time, an extra key, a non-string text, a non-integer index,
         * an unknown chunk type, and a chunk whose time is not an integer */
        "[{\"type\":\"text-delta\",\"index\":0,\"text\":\"a\"},"
        "{\"type\":\"text-delta\",\"index\":0,\"text\":\"b\",\"time\":1,\"extra\":true},"
        "{\"type\":\"text-delta\",\"index\":0,\"text\":3,\"time\":2},"
        "{\"type\":\"text-delta\",\"index\":\"0\",\"text\":\"c\",\"time\":3},"
        "{\"type\":\"provider-note\",\"what\":\"x\",\"time\":4},"
        "{\"type\":\"usage\",\"usage\":{},\"time\":\"late\"}]",
        /* a delta of a tool call with a non-string id */
        "[{\"type\":\"tool-call-delta\",\"index\":0,\"id\":7,\"arguments_delta\":\"\","
        "\"time\":1}]",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *chunks = J(cases[i]);
        json_t *compact = weir__stream_compact(chunks);
        assert_non_null(compact);
        assert_true(weir__stream_is_compact(compact));
        json_t *back = weir__stream_expand(compact);
        if (!json_equal(back, chunks)) {
            char *b = json_dumps(back, JSON_COMPACT);
            fail_msg("case %zu: expanded to %s", i, b);
        }
        json_decref(back);
        json_decref(compact);
        json_decref(chunks);
    }
    /* the interleaved calls: four runs, one chunk each */
    json_t *chunks = J(cases[1]);
    json_t *compact = weir__stream_compact(chunks);
    assert_int_equal(json_array_size(compact), 4);
    json_decref(compact);
    json_decref(chunks);
    assert_null(weir__stream_compact(NULL));
    assert_null(weir__stream_expand(NULL));
}

/* Older logs hold the raw chunk array (or none): read as it is. */
static void raw_streams_of_older_logs_read_as_they_are(void **state) {
    (void)state;
    json_t *raw = J(typical);
    json_t *got = weir__stream_expand(raw);
    assert_true(json_equal(got, raw));
    json_decref(got);
    json_decref(raw);
    /* a record that is almost compact is read raw */
    static const char *const raw_like[] = {
        "[{\"type\":\"text-chunks\",\"index\":0,\"time0\":1,\"dt\":[0,1],\"texts\":[\"a\"]}]",
        "[{\"type\":\"text-chunks\",\"index\":0,\"time0\":1,\"dt\":[],\"texts\":[]}]",
        "[{\"type\":\"chunk\",\"chunk\":\"text\"}]",
        "[{\"type\":\"chunk\",\"time\":1,\"chunk\":{},\"extra\":1}]",
        "[{\"type\":\"tool-call-chunks\",\"index\":0,\"time0\":1,\"dt\":[0],\"args\":[1]}]",
        "[7]",
    };
    for (size_t i = 0; i < sizeof raw_like / sizeof raw_like[0]; i++) {
        json_t *v = J(raw_like[i]);
        assert_false(weir__stream_is_compact(v));
        json_t *e = weir__stream_expand(v);
        assert_true(json_equal(e, v));
        json_decref(e);
        json_decref(v);
    }
}

/* The fold: the same message from the raw and the compact stream; a call
 * without an id from the server gets one derived from its block. */
static void the_fold_is_the_same_from_either_form(void **state) {
    (void)state;
    json_t *chunks = J(typical);
    json_t *compact = weir__stream_compact(chunks);
    json_t *back = weir__stream_expand(compact);
    weir__assembled a, b;
    assert_int_equal(weir__stream_assemble(chunks, true, &a), 0);
    assert_int_equal(weir__stream_assemble(back, true, &b), 0);
    assert_dump(a.message, "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"
                           "\"Hello there.\"},{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":"
                           "\"pow\",\"arguments\":\"{\\\"x\\\":2}\"}]}");
    assert_true(json_equal(a.message, b.message));
    assert_true(json_equal(a.usage, b.usage));
    assert_string_equal(a.finish, "tool-calls");
    assert_true(a.visible);
    json_decref(a.message);
    json_decref(a.calls);
    json_decref(b.message);
    json_decref(b.calls);
    json_decref(back);
    json_decref(compact);
    json_decref(chunks);

    const char *noid = "[{\"type\":\"tool-call-delta\",\"index\":0,\"name\":\"f\","
                       "\"arguments_delta\":\"\",\"time\":500},"
                       "{\"type\":\"tool-call-delta\",\"index\":1,\"name\":\"g\","
                       "\"arguments_delta\":\"{}\",\"time\":500},"
                       "{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"},\"time\":501}]";
    chunks = J(noid);
    assert_int_equal(weir__stream_assemble(chunks, true, &a), 0);
    assert_int_equal(weir__stream_assemble(chunks, true, &b), 0);
    assert_true(json_equal(a.message, b.message));
    const char *id0 = json_string_value(json_object_get(json_array_get(a.calls, 0), "id"));
    const char *id1 = json_string_value(json_object_get(json_array_get(a.calls, 1), "id"));
    assert_memory_equal(id0, "call-", 5);
    assert_int_equal(strlen(id0), 21);
    assert_string_not_equal(id0, id1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(a.calls, 0),
                                                          "arguments")),
                        "{}");
    json_decref(a.message);
    json_decref(a.calls);
    json_decref(b.message);
    json_decref(b.calls);
    /* a max-tokens finish keeps no calls */
    json_decref(chunks);
    chunks = J("[{\"type\":\"text-delta\",\"index\":0,\"text\":\"cut\",\"time\":1},"
               "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"c\",\"name\":\"f\","
               "\"arguments_delta\":\"{\",\"time\":2},"
               "{\"type\":\"finish\",\"reason\":{\"kind\":\"max-tokens\"},\"time\":3}]");
    assert_int_equal(weir__stream_assemble(chunks, true, &a), 0);
    assert_dump(a.message,
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"cut\"}]}");
    assert_int_equal(json_array_size(a.calls), 0);
    json_decref(a.message);
    json_decref(a.calls);
    json_decref(chunks);
}

/* ------------------------------------------------------------------------ */
/* weir log --check                                                          */
/* ------------------------------------------------------------------------ */

/* A one-turn log whose assistant/message has `message` and `stream` (JSON
 * texts) and optional `extra` data members (",\"usage\":{...}" or ""). */
static char *write_log(const char *dir, const char *name, const char *message,
                       const char *stream, const char *extra) {
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s.jsonl", dir, name) > 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n"
            "{\"seq\":1,\"time\":2,\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}}\n"
            "{\"seq\":2,\"time\":3,\"type\":\"user/message\",\"data\":{\"turn\":1,\"step\":1,"
            "\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}],"
            "\"id\":\"in-1\",\"source\":{\"kind\":\"human\"}}},\"surface_op\":\"append\"}\n"
            "{\"seq\":3,\"time\":4,\"type\":\"request/header\",\"data\":{\"header\":{\"config\":"
            "{\"provider\":\"mock\",\"model\":\"m1\"}},\"reason\":\"initial\"}}\n"
            "{\"seq\":4,\"time\":5,\"type\":\"assistant/message\",\"data\":{\"turn\":1,\"step\":1,"
            "\"message\":%s,\"stream\":%s%s},\"surface_op\":\"append\"}\n"
            "{\"seq\":5,\"time\":6,\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":1}}\n"
            "{\"seq\":6,\"time\":7,\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":"
            "{\"kind\":\"completed\"}}}\n",
            message, stream, extra);
    fclose(f);
    return path;
}

/* The errors `weir log --check` reports for `path`, as compact JSON. */
static char *check_errors(const char *path) {
    json_t *report = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_log_check(path, &report, &err), WEIR_OK);
    char *s = json_dumps(json_object_get(report, "errors"), JSON_COMPACT);
    json_decref(report);
    return s;
}

static void log_check_rebuilds_each_message_from_its_stream(void **state) {
    (void)state;
    char *dir = wt_tmpdir("stream");
    assert_non_null(dir);
    const char *text = "[{\"type\":\"text-delta\",\"index\":0,\"text\":\"Hel\",\"time\":10},"
                       "{\"type\":\"text-delta\",\"index\":0,\"text\":\"lo\",\"time\":12},"
                       "{\"type\":\"usage\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2},"
                       "\"time\":13},"
                       "{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"},\"time\":13}]";
    json_t *chunks = J(text);
    json_t *compact = weir__stream_compact(chunks);
    char *stream = json_dumps(compact, JSON_COMPACT | JSON_PRESERVE_ORDER);
    const char *hello = "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Hello\"}]}";
    const char *usage = ",\"usage\":{\"input_tokens\":1,\"output_tokens\":2}";
    /* exact: no error */
    char *p = write_log(dir, "ok", hello, stream, usage);
    char *e = check_errors(p);
    assert_string_equal(e, "[]");
    free(e);
    free(p);
    /* a message that is not its stream's */
    p = write_log(dir, "edited",
                  "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Bye\"}]}",
                  stream, usage);
    e = check_errors(p);
    assert_string_equal(e, "[\"seq 4: assistant/message: the message does not rebuild from its "
                           "stream\"]");
    free(e);
    free(p);
    /* a usage that is not its stream's */
    p = write_log(dir, "usage", hello, stream,
                  ",\"usage\":{\"input_tokens\":9,\"output_tokens\":2}");
    e = check_errors(p);
    assert_string_equal(e, "[\"seq 4: assistant/message: the usage is not its stream's\"]");
    free(e);
    free(p);
    /* the raw form of older logs, and the empty streams of hand-written ones */
    p = write_log(dir, "raw", hello, text, usage);
    e = check_errors(p);
    assert_string_equal(e, "[]");
    free(e);
    free(p);
    p = write_log(dir, "none", hello, "[]", "");
    e = check_errors(p);
    assert_string_equal(e, "[]");
    free(e);
    free(p);
    /* an interrupted message folds without tool calls */
    json_decref(chunks);
    json_decref(compact);
    free(stream);
    chunks = J("[{\"type\":\"text-delta\",\"index\":0,\"text\":\"par\",\"time\":1},"
               "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"c\",\"name\":\"f\","
               "\"arguments_delta\":\"{\",\"time\":2}]");
    compact = weir__stream_compact(chunks);
    stream = json_dumps(compact, JSON_COMPACT | JSON_PRESERVE_ORDER);
    p = write_log(dir, "cut",
                  "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"par\"}]}",
                  stream, ",\"interrupted\":true");
    e = check_errors(p);
    assert_string_equal(e, "[]");
    free(e);
    free(p);
    json_decref(chunks);
    json_decref(compact);
    free(stream);
    wt_rmtree(dir);
    free(dir);
}

/* Issue #31 item 1: one reply that repeats a call id (OpenAI-compatible
 * servers that number call_0 per response, two tool_use blocks with one
 * id) folds into a message whose calls all have their own id, the same on
 * every fold; a rename skips names another block holds. */
static void repeated_call_ids_fold_into_distinct_ids(void **state) {
    (void)state;
    json_t *chunks = J(
        "[{\"type\":\"tool-call-delta\",\"index\":0,\"id\":\"c1\",\"name\":\"a\","
        "\"arguments_delta\":\"{}\",\"time\":1},"
        "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"c1\",\"name\":\"b\","
        "\"arguments_delta\":\"{}\",\"time\":2},"
        "{\"type\":\"tool-call-delta\",\"index\":2,\"id\":\"c1_2\",\"name\":\"c\","
        "\"arguments_delta\":\"{}\",\"time\":3},"
        "{\"type\":\"tool-call-delta\",\"index\":3,\"id\":\"c1\",\"name\":\"d\","
        "\"arguments_delta\":\"{}\",\"time\":4},"
        "{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"},\"time\":5}]");
    for (int fold = 0; fold < 2; fold++) {
        weir__assembled m;
        assert_int_equal(weir__stream_assemble(chunks, true, &m), 0);
        assert_dump(m.calls, "[{\"id\":\"c1\",\"name\":\"a\",\"arguments\":\"{}\"},"
                             "{\"id\":\"c1_3\",\"name\":\"b\",\"arguments\":\"{}\"},"
                             "{\"id\":\"c1_2\",\"name\":\"c\",\"arguments\":\"{}\"},"
                             "{\"id\":\"c1_4\",\"name\":\"d\",\"arguments\":\"{}\"}]");
        const json_t *content = json_object_get(m.message, "content");
        assert_string_equal(json_string_value(json_object_get(json_array_get(content, 1), "id")),
                            "c1_3");
        json_decref(m.message);
        json_decref(m.calls);
    }
    json_decref(chunks);

    /* what the repair records: each renamed block, with the id it had */
    json_t *content = J("[{\"type\":\"text\",\"text\":\"x\"},"
                            "{\"type\":\"tool_call\",\"id\":\"\",\"name\":\"a\"},"
                            "{\"type\":\"tool_call\",\"id\":\"k\",\"name\":\"a\"},"
                            "{\"type\":\"tool_call\",\"id\":\"k\",\"name\":\"a\"}]");
    json_t *renamed = json_array();
    assert_int_equal(weir__calls_unique(content, renamed), 0);
    assert_dump(renamed, "[{\"block\":1,\"was\":\"\",\"id\":\"call_2\"},"
                         "{\"block\":3,\"was\":\"k\",\"id\":\"k_2\"}]");
    json_decref(renamed);
    json_decref(content);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(repeated_call_ids_fold_into_distinct_ids),
        cmocka_unit_test(runs_of_deltas_pack_into_timed_records),
        cmocka_unit_test(expansion_is_exact_for_any_chunks),
        cmocka_unit_test(raw_streams_of_older_logs_read_as_they_are),
        cmocka_unit_test(the_fold_is_the_same_from_either_form),
        cmocka_unit_test(log_check_rebuilds_each_message_from_its_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
