/*
 * tests/unit/test_scripted.c - the shipped provider-scripted and
 * system-prompt plugins, driven through an agent (driver_harness).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "assistant_stream.h"
#include "driver_harness.h"
#include "testutil.h"

static const json_t *reason(const dh *d, int n) {
    return json_object_get(json_object_get(dh_find(d, "turn/end", n), "data"), "reason");
}

static const char *assistant_text(const dh *d, int n) {
    const json_t *m = json_object_get(json_object_get(dh_find(d, "assistant/message", n), "data"),
                                      "message");
    const json_t *c = json_object_get(m, "content");
    return json_string_value(json_object_get(json_array_get(c, json_array_size(c) - 1), "text"));
}

static void one_turn(dh *d, const char *rows, const char *prompt) {
    dh_setup(d, rows, NULL);
    dh_open(d, "s");
    dh_send(d, prompt, WEIR_SEND_FOLLOWUP);
    dh_run(d);
}

static void scripted_unmet_expectation_fails_with_invalid_request(void **state) {
    (void)state;
    dh d;
    one_turn(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"x\",\"expect\":{\"message_contains\":\"absent\"}}]}}]",
             "hello");
    const json_t *e = json_object_get(reason(&d, 0), "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "INVALID_REQUEST");
    assert_string_equal(json_string_value(json_object_get(e, "message")),
                        "expected a message containing \"absent\"");
    dh_teardown(&d);
}

static void scripted_unmet_role_and_count_expectations_say_what_was_expected(void **state) {
    (void)state;
    dh d;
    one_turn(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"x\",\"expect\":{\"last_role\":\"tool\"}}]}}]",
             "hello");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(reason(&d, 0), "error"), "message")),
        "expected the last message's role to be \"tool\", got \"user\"");
    dh_teardown(&d);
    one_turn(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"x\",\"expect\":{\"tools_count\":2}}]}}]",
             "hello");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(reason(&d, 0), "error"), "message")),
        "expected 2 tools in the request, got 0");
    dh_teardown(&d);
}

static void scripted_exhausted_script_fails_unknown(void **state) {
    (void)state;
    dh d;
    one_turn(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":[]}}]",
             "hello");
    const json_t *e = json_object_get(reason(&d, 0), "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "UNKNOWN");
    assert_string_equal(json_string_value(json_object_get(e, "message")),
                        "script exhausted (0 replies)");
    dh_teardown(&d);
}

static int text_deltas(const dh *d) {
    json_t *stream = weir__stream_expand(json_object_get(
        json_object_get(dh_find(d, "assistant/message", 0), "data"), "stream"));
    size_t i;
    const json_t *c;
    int n = 0;
    json_array_foreach(stream, i, c) n +=
        !strcmp(json_string_value(json_object_get(c, "type")), "text-delta");
    json_decref(stream);
    return n;
}

static void scripted_chunks_split_text_without_breaking_utf8(void **state) {
    (void)state;
    dh d;
    one_turn(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"h\\u00e9llo w\\u00f6rld\",\"chunks\":3,\"finish\":\"stop\"}]}}]",
             "hello");
    assert_int_equal(text_deltas(&d), 3);
    assert_string_equal(assistant_text(&d, 0), "h\xc3\xa9llo w\xc3\xb6rld");
    dh_teardown(&d);
}

static void scripted_script_file_plays_replies_in_order(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"script\":"
             "\"@DATA@/scripted/two_replies.json\"}}]",
             NULL);
    dh_open(&d, "file");
    dh_send(&d, "one", WEIR_SEND_FOLLOWUP);
    dh_send(&d, "two", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(assistant_text(&d, 0), "first reply");
    assert_string_equal(assistant_text(&d, 1), "second reply");
    const json_t *u = json_object_get(json_object_get(dh_find(&d, "assistant/message", 0), "data"),
                                      "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "input_tokens")), 7);
    dh_teardown(&d);
}

static void scripted_builtin_demo_calls_pow_and_states_result(void **state) {
    (void)state;
    dh d;
    one_turn(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"script\":"
             "\"builtin:demo\"}},"
             "{\"id\":\"math\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"
             "[{\"name\":\"pow\",\"reply\":\"1024\"}]}}]",
             "what is 2 to the 10th?");
    const json_t *call = json_object_get(dh_find(&d, "tool/call", 0), "data");
    assert_string_equal(json_string_value(json_object_get(call, "name")), "pow");
    assert_string_equal(json_string_value(json_object_get(call, "arguments")), "{\"x\":2,\"y\":10}");
    assert_string_equal(assistant_text(&d, 1), "2 to the power 10 is 1024.");
    assert_string_equal(json_string_value(json_object_get(reason(&d, 0), "kind")), "completed");
    dh_teardown(&d);
}

#define DEMO_ROWS(tools)                                                                   \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"script\":"   \
    "\"builtin:demo\"}}" tools "]"
#define POW_ROW                                                                            \
    ",{\"id\":\"math\",\"plugin\":\"drvtest-tools\",\"config\":{\"tools\":"             \
    "[{\"name\":\"pow\",\"reply\":\"8\"}]}}"

/* The first text block of the n-th assistant message, or "". */
static const char *first_text(const dh *d, int n) {
    const json_t *m = json_object_get(json_object_get(dh_find(d, "assistant/message", n), "data"),
                                      "message");
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(m, "content"), i, b) {
        const char *t = json_string_value(json_object_get(b, "text"));
        if (t)
            return t;
    }
    return "";
}

/* The demo answers the prompt it gets: each way of asking for a power calls pow. */
static void scripted_builtin_demo_answers_the_prompt(void **state) {
    (void)state;
    static const char *const powers[] = {"2^3",         "what is 2**3?",  "pow(2, 3)",
                                         "2 to the 3rd", "2 raised to 3", "2 to the power of 3."};
    for (size_t i = 0; i < sizeof powers / sizeof powers[0]; i++) {
        dh d;
        one_turn(&d, DEMO_ROWS(POW_ROW), powers[i]);
        const json_t *call = json_object_get(dh_find(&d, "tool/call", 0), "data");
        if (!call)
            fail_msg("no pow call for \"%s\"", powers[i]);
        assert_string_equal(json_string_value(json_object_get(call, "arguments")),
                            "{\"x\":2,\"y\":3}");
        assert_string_equal(first_text(&d, 0), "Let me work that out with the pow tool.");
        assert_string_equal(first_text(&d, 1), "2 to the power 3 is 8.");
        dh_teardown(&d);
    }
    /* anything else is quoted back, cut short; no tool call */
    dh d;
    one_turn(&d, DEMO_ROWS(POW_ROW), "hello   there,\nhow are you?");
    assert_null(dh_find(&d, "tool/call", 0));
    assert_non_null(strstr(first_text(&d, 0), "You said: \"hello there, how are you?\". "));
    dh_teardown(&d);
    one_turn(&d, DEMO_ROWS(POW_ROW),
             "0123456789 0123456789 0123456789 0123456789 0123456789 0123456789 tail");
    assert_non_null(strstr(first_text(&d, 0),
                           "\"0123456789 0123456789 0123456789 0123456789 0123456789 "
                           "01234\xe2\x80\xa6\""));
    dh_teardown(&d);
    /* a power without a pow tool: said, not called */
    one_turn(&d, DEMO_ROWS(""), "2^3");
    assert_null(dh_find(&d, "tool/call", 0));
    assert_string_equal(first_text(&d, 0),
                        "That is a power, but this deployment gives me no pow tool.");
    dh_teardown(&d);
    /* numbers that are no power stay an echo */
    one_turn(&d, DEMO_ROWS(POW_ROW), "I have 2 cats and 3 dogs");
    assert_null(dh_find(&d, "tool/call", 0));
    dh_teardown(&d);
}

static int create_host(const char *rows, char *msg, size_t size) {
    json_error_t je;
    char *dir = wt_tmpdir("scripted");
    json_t *cfg = json_loads(rows, 0, &je);
    assert_non_null(cfg);
    json_t *full = json_pack("{s:{s:s}, s:[s], s:O}", "session", "dir", dir, "plugin_path",
                             wt_env("WEIR_TEST_PLUGIN_DIR"), "plugins", cfg);
    weir_host *host = NULL;
    weir_error err;
    weir_error_clear(&err);
    int rc = weir_host_create(full, &host, &err);
    snprintf(msg, size, "%s", err.text);
    weir_host_destroy(host);
    json_decref(full);
    json_decref(cfg);
    wt_rmtree(dir);
    free(dir);
    return rc;
}

static void scripted_missing_script_fails_init_naming_file(void **state) {
    (void)state;
    char msg[1024];
    assert_int_not_equal(create_host("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\","
                                     "\"config\":{\"script\":\"/nonexistent/s.json\"}}]",
                                     msg, sizeof msg),
                         WEIR_OK);
    assert_non_null(strstr(msg, "cannot read script /nonexistent/s.json"));
    assert_int_not_equal(create_host("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\","
                                     "\"config\":{\"replies\":[{\"finish\":\"later\"}]}}]",
                                     msg, sizeof msg),
                         WEIR_OK);
    assert_non_null(strstr(msg, "replies[0].finish: expected stop, tool-calls or max-tokens"));
    assert_int_not_equal(create_host("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\","
                                     "\"config\":{\"replies\":[{},{\"purpose\":7}]}}]",
                                     msg, sizeof msg),
                         WEIR_OK);
    assert_non_null(strstr(msg, "replies[1].purpose: expected a string"));
}

static void system_prompt_missing_file_fails_init_naming_it(void **state) {
    (void)state;
    char msg[1024];
    assert_int_not_equal(create_host("[{\"id\":\"prompt\",\"plugin\":\"system-prompt\","
                                     "\"config\":{\"files\":[\"/nonexistent/p.md\"]}}]",
                                     msg, sizeof msg),
                         WEIR_OK);
    assert_non_null(strstr(msg, "cannot read system prompt file /nonexistent/p.md"));
}

static void system_prompt_sections_render_by_order(void **state) {
    (void)state;
    dh d;
    one_turn(&d,
             "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":"
             "[{\"text\":\"ok\"}]}},"
             "{\"id\":\"guidance\",\"plugin\":\"system-prompt\",\"config\":{\"text\":\"Use tools.\","
             "\"order\":20}},"
             "{\"id\":\"persona\",\"plugin\":\"system-prompt\",\"config\":{\"files\":"
             "[\"@DATA@/scripted/persona.txt\"],\"order\":10}},"
             "{\"id\":\"identity\",\"plugin\":\"system-prompt\",\"config\":{\"text\":\"You are weir.\","
             "\"order\":0}}]",
             "hello");
    const json_t *m = json_object_get(json_object_get(dh_find(&d, "system/message", 0), "data"),
                                      "message");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(m, "content"), 0), "text")),
        "You are weir.\n\nYou answer in French.\n\nUse tools.");
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scripted_unmet_expectation_fails_with_invalid_request),
        cmocka_unit_test(scripted_unmet_role_and_count_expectations_say_what_was_expected),
        cmocka_unit_test(scripted_exhausted_script_fails_unknown),
        cmocka_unit_test(scripted_chunks_split_text_without_breaking_utf8),
        cmocka_unit_test(scripted_script_file_plays_replies_in_order),
        cmocka_unit_test(scripted_builtin_demo_calls_pow_and_states_result),
        cmocka_unit_test(scripted_builtin_demo_answers_the_prompt),
        cmocka_unit_test(scripted_missing_script_fails_init_naming_file),
        cmocka_unit_test(system_prompt_missing_file_fails_init_naming_it),
        cmocka_unit_test(system_prompt_sections_render_by_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
