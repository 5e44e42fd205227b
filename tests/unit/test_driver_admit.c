/*
 * tests/unit/test_driver_admit.c - agent/admit (docs/lifecycle.md,
 * "Admission"): a guard sees each input before anything of it is logged.
 * A redaction is what the log and the provider see; a refusal fails the
 * send with the plugin's reason and leaves no trace of the content; a
 * failing guard refuses (fail closed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "testutil.h"

#define SCRIPTED(replies)                                                                 \
    "{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":" replies \
    "}}"

/* The whole log file (asserts it is there); free() it. */
static char *log_text(const dh *d) {
    size_t len = 0;
    char *text = wt_read_file(dh_log(d), &len);
    assert_non_null(text);
    return text;
}

static const json_t *decision(const dh *d, int n) {
    const json_t *e = dh_find(d, "hook/decision", n);
    assert_non_null(e);
    return json_object_get(e, "data");
}

static const char *field(const json_t *o, const char *key) {
    const char *v = json_string_value(json_object_get(o, key));
    assert_non_null(v);
    return v;
}

static int send_text(dh *d, const char *text, weir_send_mode mode, const char *id,
                     weir_error *err) {
    json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", text);
    assert_non_null(m);
    weir_error_clear(err);
    int rc = weir_agent_send(d->agent, m, mode, id, err);
    json_decref(m);
    return rc;
}

/* A PII guard redacts at admission: the provider sees the redacted text
 * and the log file holds no address, not even in agent/inbox/spliced. */
static void redaction_at_admission_keeps_the_address_out_of_the_log(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[" SCRIPTED("[{\"text\":\"ok\",\"expect\":{\"message_contains\":"
                          "\"write to [redacted] today\"}},"
                          "{\"text\":\"ok2\",\"expect\":{\"message_contains\":"
                          "\"and cc [redacted]\"}}]") ","
             "{\"id\":\"pii\",\"plugin\":\"drvtest-hooks\",\"config\":{\"admit\":"
             "{\"action\":\"redact\"}}}]",
             NULL);
    dh_open(&d, "redact");
    weir_error err;
    assert_int_equal(send_text(&d, "write to bob@example.com today", WEIR_SEND_FOLLOWUP,
                               "in-1", &err),
                     WEIR_OK);
    dh_run(&d);
    /* a steer takes the same path */
    assert_int_equal(send_text(&d, "and cc eve@example.org", WEIR_SEND_STEER, "in-2", &err),
                     WEIR_OK);
    dh_run(&d);
    /* the same input sent again is the same admitted input: acknowledged */
    assert_int_equal(send_text(&d, "write to bob@example.com today", WEIR_SEND_FOLLOWUP,
                               "in-1", &err),
                     WEIR_OK);
    assert_int_equal(dh_count(&d, "agent/inbox/acknowledged"), 1);
    assert_int_equal(dh_count(&d, "turn/start"), 2);
    const json_t *um =
        json_object_get(json_object_get(dh_find(&d, "user/message", 0), "data"), "message");
    assert_string_equal(field(um, "id"), "in-1");
    assert_string_equal(
        field(json_array_get(json_object_get(um, "content"), 0), "text"),
        "write to [redacted] today");
    char *text = log_text(&d);
    assert_null(strstr(text, "bob@example.com"));
    assert_null(strstr(text, "eve@example.org"));
    assert_null(strstr(text, "example."));
    assert_non_null(strstr(text, "write to [redacted] today"));
    free(text);
    /* the rewrite's provenance: plugin, row, the input id, never the content */
    const json_t *dec = decision(&d, 0);
    assert_string_equal(field(dec, "hook"), "agent/admit");
    assert_string_equal(field(dec, "decision"), "rewrite");
    assert_string_equal(field(dec, "row"), "pii");
    assert_string_equal(field(dec, "plugin"), "drvtest-hooks@0.1.0");
    assert_string_equal(field(dec, "input_id"), "in-1");
    assert_string_equal(field(decision(&d, 1), "input_id"), "in-2");
    dh_teardown(&d);
}

/* A refusal: the send fails with the plugin's reason, nothing of the input
 * is queued or logged; the refusal's record holds the id and the reason. */
static void refused_input_gets_the_reason_and_leaves_no_content(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[" SCRIPTED("[{\"text\":\"ok\",\"expect\":{\"messages_count\":1}}]") ","
             "{\"id\":\"gate\",\"plugin\":\"drvtest-hooks\",\"config\":{\"admit\":"
             "{\"action\":\"refuse\",\"reason\":\"no addresses here\"}}}]",
             NULL);
    dh_open(&d, "refuse");
    weir_error err;
    assert_int_equal(send_text(&d, "mail carol@example.net now", WEIR_SEND_FOLLOWUP, "in-x",
                               &err),
                     WEIR_E_REFUSED);
    assert_non_null(strstr(err.text, "no addresses here"));
    assert_non_null(strstr(err.text, "in-x"));
    assert_string_equal(err.plugin, "gate");
    assert_string_equal(err.hook, "agent/admit");
    assert_int_equal(send_text(&d, "mail carol@example.net now", WEIR_SEND_STEER, "in-y", &err),
                     WEIR_E_REFUSED);
    assert_int_equal(dh_count(&d, "agent/inbox/spliced"), 0);
    assert_int_equal(dh_count(&d, "agent/inbox/inserted"), 0);
    /* the next clean input goes its ordinary way: spliced, inserted, claimed */
    assert_int_equal(send_text(&d, "hello", WEIR_SEND_FOLLOWUP, "in-ok", &err), WEIR_OK);
    dh_run(&d);
    char *types = dh_types(&d, false);
    assert_non_null(strstr(types, "agent/inbox/spliced,agent/inbox/inserted,agent/status,"
                                  "turn/start,agent/inbox/spliced,agent/inbox/claimed"));
    free(types);
    assert_int_equal(dh_count(&d, "user/message"), 1);
    char *text = log_text(&d);
    assert_null(strstr(text, "carol"));
    assert_null(strstr(text, "mail "));
    free(text);
    const json_t *dec = decision(&d, 0);
    assert_string_equal(field(dec, "decision"), "refuse");
    assert_string_equal(field(dec, "input_id"), "in-x");
    assert_string_equal(field(dec, "detail"), "no addresses here");
    assert_string_equal(field(decision(&d, 1), "input_id"), "in-y");
    dh_teardown(&d);
}

/* A guard that fails refuses the input (fail closed), naming the plugin
 * and the hook; nothing of the input is logged. */
static void a_failing_guard_refuses(void **state) {
    (void)state;
    dh d;
    dh_setup(&d,
             "[" SCRIPTED("[{\"text\":\"ok\"}]") ","
             "{\"id\":\"broken\",\"plugin\":\"drvtest-hooks\",\"config\":{\"admit\":"
             "{\"action\":\"fail\"}}}]",
             NULL);
    dh_open(&d, "fail");
    weir_error err;
    assert_int_equal(send_text(&d, "secret dave@example.com", WEIR_SEND_FOLLOWUP, "in-f", &err),
                     WEIR_E_HOOK_FAILED);
    assert_non_null(strstr(err.text, "guard is down"));
    assert_non_null(strstr(err.text, "in-f"));
    assert_string_equal(err.plugin, "broken");
    assert_string_equal(err.hook, "agent/admit");
    dh_run(&d);
    assert_int_equal(dh_count(&d, "turn/start"), 0);
    assert_int_equal(dh_count(&d, "agent/inbox/spliced"), 0);
    char *text = log_text(&d);
    assert_null(strstr(text, "dave"));
    assert_null(strstr(text, "secret"));
    free(text);
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(redaction_at_admission_keeps_the_address_out_of_the_log),
        cmocka_unit_test(refused_input_gets_the_reason_and_leaves_no_content),
        cmocka_unit_test(a_failing_guard_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
