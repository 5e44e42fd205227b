/*
 * tests/unit/test_events.c - what an embedder learns about a turn (issue #14
 * item 15): the event catalog (core/format/event_catalog.c) against the types the
 * session log accepts and the live events the core's sources raise, the
 * committed docs/events.md against its output, the types a plugin may not
 * register, and weir_agent_last_turn() for each way a turn ends.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "driver_harness.h"
#include "event_catalog.h"
#include "session_log.h"
#include "testutil.h"
#include "weir/testkit.h"

/* --- the catalog ---------------------------------------------------------- */

static char *source(const char *rel) {
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s", wt_env("WEIR_TEST_SOURCE_DIR"), rel) > 0);
    char *text = wt_read_file(path, NULL);
    if (!text)
        fail_msg("cannot read %s", path);
    free(path);
    return text;
}

/* Call fn(prefix + match) for every group-1 match of `pattern` in `text`. */
static void each_match(const char *text, const char *pattern, const char *prefix,
                       void (*fn)(const char *type, void *ud), void *ud) {
    regex_t re;
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED), 0);
    regmatch_t m[2];
    for (const char *p = text; regexec(&re, p, 2, m, 0) == 0; p += m[0].rm_eo) {
        char type[128];
        snprintf(type, sizeof type, "%s%.*s", prefix, (int)(m[1].rm_eo - m[1].rm_so),
                 p + m[1].rm_so);
        fn(type, ud);
    }
    regfree(&re);
}

static void expect_kind(const char *type, void *ud) {
    weir__event_kind kind = *(const weir__event_kind *)ud;
    const weir__event_def *d = weir__event_find(type);
    if (!d || d->kind != kind)
        fail_msg("event '%s' is raised by the core but is not in core/format/event_catalog.c as %s; "
                 "add it and regenerate docs/events.md (weir events --markdown)",
                 type, kind == WEIR__EVENT_LIVE ? "live" : "durable");
}

/* Every type the session log takes as core is in the catalog, and back. */
static void durable_types_are_the_logs(void **state) {
    (void)state;
    char *log = source("core/log/session_log.c");
    const char *start = strstr(log, "core_types[] = {");
    assert_non_null(start);
    char *list = strndup(start, (size_t)(strchr(start, ';') - start));
    weir__event_kind kind = WEIR__EVENT_DURABLE;
    each_match(list, "\"([a-z/_-]+)\"", "", expect_kind, &kind);
    free(list);
    free(log);
    size_t durable = 0;
    for (size_t i = 0; i < weir__event_catalog_len; i++) {
        const weir__event_def *d = &weir__event_catalog[i];
        assert_true(d->data[0] == '{' && d->summary[0]);
        assert_ptr_equal(weir__event_find(d->type), d); /* no type twice */
        if (d->kind == WEIR__EVENT_DURABLE) {
            durable++;
            if (!weir__log_is_core_type(d->type))
                fail_msg("'%s' is durable in the catalog but not a session log core type",
                         d->type);
        } else if (weir__log_is_core_type(d->type)) {
            fail_msg("'%s' is a session log core type, not %s", d->type,
                     d->kind == WEIR__EVENT_LIVE ? "live" : "ignorable");
        }
    }
    assert_true(durable >= 13);
    /* the core's ignorable events */
    kind = WEIR__EVENT_IGNORABLE;
    expect_kind("tool/rerun", &kind);
    expect_kind("log/checkpoint", &kind);
    char *tools = source("core/runtime/tools.h");
    each_match(tools, "#define WEIR__JOB_[A-Z]+ \"([a-z/_-]+)\"", "", expect_kind, &kind);
    free(tools);
}

/* Every live event a core source raises with a literal type is in the catalog. */
static void live_events_are_the_cores(void **state) {
    (void)state;
    static const char *const files[] = {
        "core/api/agent.c",       "core/api/generation.c",        "core/engine/driver.c",
        "core/engine/events.c",   "core/engine/input.c",          "core/engine/model_call.c",
        "core/engine/tool_scheduler.c", "core/runtime/tools.c"};
    weir__event_kind kind = WEIR__EVENT_LIVE;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *text = source(files[i]);
        /* weir__engine_live(eng, "type", ...) and a live callback's live(ud, "type", ...) */
        each_match(text, "live\\([^,]+,[[:space:]]*\"([a-z/_-]+)\"", "", expect_kind, &kind);
        each_match(text, "steering_event\\([^,]+,[[:space:]]*\"([a-z_-]+)\"", "steering/",
                   expect_kind, &kind);
        free(text);
    }
    char *inbox = source("core/log/inbox.c");
    each_match(inbox, "notify_all\\([^,]+,[[:space:]]*\"([a-z_-]+)\"", "agent/inbox/",
               expect_kind, &kind);
    free(inbox);
    expect_kind("agent/inbox/acknowledged", &kind);
    expect_kind("agent/status", &kind);
}

static void docs_events_md_is_generated(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(weir_event_catalog_write(f, true), WEIR_OK);
    fclose(f);
    char *doc = source("docs/events.md");
    if (strcmp(doc, buf) != 0)
        fail_msg("docs/events.md is out of date with core/format/event_catalog.c; regenerate it with:\n"
                 "    weir events --markdown > docs/events.md");
    free(doc);
    free(buf);
    assert_int_equal(weir_event_catalog_write(NULL, false), WEIR_E_INVAL);
    f = open_memstream(&buf, &len);
    assert_int_equal(weir_event_catalog_write(f, false), WEIR_OK);
    fclose(f);
    assert_non_null(strstr(buf, "turn/end (durable)\n"));
    assert_non_null(strstr(buf, "agent/status (live)\n"));
    free(buf);
}

/* --- the reserved names --------------------------------------------------- */

static const char *g_type;

static int registers_type(weir_plugin *self, const weir_api *api, const json_t *config,
                          weir_error *err) {
    (void)config;
    (void)err;
    return api->event_type_register(self, g_type, WEIR_EVENT_IGNORABLE);
}

static const weir_plugin_desc type_desc = {
    WEIR_PLUGIN_HEADER, .name = "typer", .version = "1.0.0", .init = registers_type,
};

/* Neither a durable nor a live core type may be a plugin's (the test kit
 * took any, and the host took live ones). */
static void plugins_cannot_register_core_types(void **state) {
    (void)state;
    static const char *const taken[] = {"turn/end", "agent/status", "tool/rerun",
                                        "agent/assistant-stream"};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        g_type = taken[i];
        weir_tk *tk = weir_tk_create();
        weir_error err;
        weir_error_clear(&err);
        assert_int_equal(weir_tk_load(tk, &type_desc, "t", NULL, &err), WEIR_E_PLUGIN_INIT);
        char expect[160];
        snprintf(expect, sizeof expect, "plugin 'typer' (row 't') init failed: event type '%s' "
                 "is a core event type", taken[i]);
        assert_string_equal(err.text, expect);
        weir_tk_destroy(tk);
    }
    g_type = "typer/note";
    weir_tk *tk = weir_tk_create();
    weir_error err;
    assert_int_equal(weir_tk_load(tk, &type_desc, "t", NULL, &err), WEIR_OK);
    weir_tk_destroy(tk);
}

/* --- weir_agent_last_turn ------------------------------------------------- */

#define SCRIPTED(replies)                                                                 \
    "[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":{\"replies\":" replies \
    "}}]"

static void run_turn(dh *d, const char *text) {
    dh_send(d, text, WEIR_SEND_FOLLOWUP);
    dh_run(d); /* WEIR_OK, however the turn ended */
}

static void last_turn_before_any_turn(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, SCRIPTED("[]"), NULL);
    dh_open(&d, "s");
    weir_turn_outcome o = WEIR_TURN_OUTCOME_INIT;
    assert_int_equal(weir_agent_last_turn(d.agent, &o, NULL), WEIR_OK);
    assert_int_equal(o.turn, 0);
    assert_string_equal(o.kind, "");
    assert_null(o.text);
    assert_null(o.reason);
    weir_turn_outcome_clear(&o);
    weir_turn_outcome_clear(NULL);
    weir_error err;
    assert_int_equal(weir_agent_last_turn(NULL, &o, &err), WEIR_E_INVAL);
    assert_int_equal(weir_agent_last_turn(d.agent, NULL, &err), WEIR_E_INVAL);
    weir_turn_outcome small = WEIR_TURN_OUTCOME_INIT;
    small.struct_size = 8;
    assert_int_equal(weir_agent_last_turn(d.agent, &small, &err), WEIR_E_INVAL);
    assert_non_null(strstr(err.text, "struct_size"));
    dh_teardown(&d);
}

static void last_turn_completed_gives_the_final_text(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, SCRIPTED("[{\"text\":\"Hello there.\",\"chunks\":3}]"), NULL);
    dh_open(&d, "s");
    run_turn(&d, "hi");
    weir_turn_outcome o = WEIR_TURN_OUTCOME_INIT;
    assert_int_equal(weir_agent_last_turn(d.agent, &o, NULL), WEIR_OK);
    assert_int_equal(o.turn, 1);
    assert_string_equal(o.kind, "completed");
    assert_string_equal(o.failure_code, "");
    assert_string_equal(o.failure_message, "");
    assert_string_equal(o.text, "Hello there.");
    assert_string_equal(json_string_value(json_object_get(o.reason, "kind")), "completed");
    /* a second call releases what the first filled in (ASan checks) */
    assert_int_equal(weir_agent_last_turn(d.agent, &o, NULL), WEIR_OK);
    assert_string_equal(o.text, "Hello there.");
    weir_turn_outcome_clear(&o);
    assert_null(o.text);
    assert_int_equal(o.struct_size, sizeof o);
    dh_teardown(&d);
}

static void last_turn_error_gives_the_failure(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, SCRIPTED("[{\"text\":\"first\"},"
                          "{\"fail\":{\"code\":\"RATE_LIMIT\",\"message\":\"slow down\"}}]"),
             NULL);
    dh_open(&d, "s");
    run_turn(&d, "one");
    run_turn(&d, "two");
    weir_turn_outcome o = WEIR_TURN_OUTCOME_INIT;
    assert_int_equal(weir_agent_last_turn(d.agent, &o, NULL), WEIR_OK);
    assert_int_equal(o.turn, 2);
    assert_string_equal(o.kind, "error");
    assert_string_equal(o.failure_code, "RATE_LIMIT");
    assert_string_equal(o.failure_message, "slow down");
    assert_string_equal(o.text, ""); /* turn 2 has no answer: turn 1's is not taken */
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(o.reason, "error"), "provider")),
        "scripted");
    weir_turn_outcome_clear(&o);
    /* a resumed session reports the last turn of its earlier run */
    dh_close(&d);
    dh_open(&d, "s");
    assert_int_equal(weir_agent_last_turn(d.agent, &o, NULL), WEIR_OK);
    assert_int_equal(o.turn, 2);
    assert_string_equal(o.failure_code, "RATE_LIMIT");
    weir_turn_outcome_clear(&o);
    dh_teardown(&d);
}

static void last_turn_max_tokens_and_multi_block_text(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, SCRIPTED("[{\"text\":\"cut sh\",\"reasoning\":\"think\","
                          "\"finish\":\"max-tokens\"}]"),
             NULL);
    dh_open(&d, "s");
    run_turn(&d, "go");
    weir_turn_outcome o = WEIR_TURN_OUTCOME_INIT;
    assert_int_equal(weir_agent_last_turn(d.agent, &o, NULL), WEIR_OK);
    assert_string_equal(o.kind, "max-tokens");
    assert_string_equal(o.text, "cut sh"); /* text blocks only, no reasoning */
    weir_turn_outcome_clear(&o);
    dh_teardown(&d);
}

/* From inside on_event, at the turn/end: the outcome is that turn's. */
static void on_turn_end(dh *d, const json_t *event, bool durable) {
    if (!durable || strcmp(json_string_value(json_object_get(event, "type")), "turn/end") != 0)
        return;
    weir_turn_outcome o = WEIR_TURN_OUTCOME_INIT;
    assert_int_equal(weir_agent_last_turn(d->agent, &o, NULL), WEIR_OK);
    assert_int_equal(o.turn, json_integer_value(json_object_get(json_object_get(event, "data"),
                                                                "turn")));
    d->count++;
    weir_turn_outcome_clear(&o);
}

static void last_turn_inside_on_event(void **state) {
    (void)state;
    dh d;
    dh_setup(&d, SCRIPTED("[{\"text\":\"a\"},{\"text\":\"b\"}]"), NULL);
    d.on_event = on_turn_end;
    dh_open(&d, "s");
    run_turn(&d, "1");
    run_turn(&d, "2");
    assert_int_equal(d.count, 2);
    dh_teardown(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(durable_types_are_the_logs),
        cmocka_unit_test(live_events_are_the_cores),
        cmocka_unit_test(docs_events_md_is_generated),
        cmocka_unit_test(plugins_cannot_register_core_types),
        cmocka_unit_test(last_turn_before_any_turn),
        cmocka_unit_test(last_turn_completed_gives_the_final_text),
        cmocka_unit_test(last_turn_error_gives_the_failure),
        cmocka_unit_test(last_turn_max_tokens_and_multi_block_text),
        cmocka_unit_test(last_turn_inside_on_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
