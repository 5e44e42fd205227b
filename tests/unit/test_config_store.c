/*
 * tests/unit/test_config_store.c - "session": {"store": ...} (docs/stores.md):
 * the config names "file", "memory" or a plugin row; an unknown row, a
 * non-string and an empty name are refused naming the field and the file;
 * an agent opened with "memory" keeps its log in memory (no file), one
 * writer per session, and reopens it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "weir/host.h"
#include "testutil.h"

typedef struct fixture {
    char *dir;
    char file[4096];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    f->dir = wt_tmpdir("cfgstore");
    assert_non_null(f->dir);
    snprintf(f->file, sizeof f->file, "%s/weir.json", f->dir);
    setenv("WEIR_PLUGIN_PATH", "", 1);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    wt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static int compose_text(fixture *f, const char *text, json_t **out, weir_error *err) {
    assert_int_equal(wt_write_file(f->file, text), 0);
    const char *files[] = {f->file};
    weir_error_clear(err);
    *out = NULL;
    return weir_config_compose(files, 1, out, err);
}

static void unknown_row_is_refused(void **state) {
    fixture *f = *state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose_text(f, "{\"session\":{\"store\":\"pg\"}}", &cfg, &err),
                     WEIR_E_CONFIG);
    assert_null(cfg);
    char want[sizeof f->file + 256];
    snprintf(want, sizeof want,
             "config %s: $.session.store: no plugin row 'pg' (a store is \"file\", \"memory\" or "
             "the id of a row that provides one)",
             f->file);
    assert_string_equal(err.text, want);
}

static void bad_values_are_refused(void **state) {
    fixture *f = *state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose_text(f, "{\"session\":{\"store\":7}}", &cfg, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "session.store"));
    assert_non_null(strstr(err.text, f->file));
    assert_int_equal(compose_text(f, "{\"session\":{\"store\":\"\"}}", &cfg, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "session.store: must name a store"));
}

static void builtin_names_are_accepted(void **state) {
    fixture *f = *state;
    json_t *cfg;
    weir_error err;
    assert_int_equal(compose_text(f, "{\"session\":{\"store\":\"memory\"}}", &cfg, &err), WEIR_OK);
    json_decref(cfg);
    assert_int_equal(compose_text(f, "{\"session\":{\"store\":\"file\"}}", &cfg, &err), WEIR_OK);
    json_decref(cfg);
}

static void agent_uses_the_memory_store(void **state) {
    fixture *f = *state;
    char sessions[sizeof f->file + 16];
    snprintf(sessions, sizeof sessions, "%s/sessions", f->dir);
    json_t *cfg = json_pack("{s:{s:s}, s:{s:s,s:s}, s:[], s:[]}", "agent", "model", "m", "session", "dir", sessions, "store", "memory",
                            "plugin_path", "plugins");
    weir_host *host = NULL;
    weir_error err;
    if (weir_host_create(cfg, &host, &err) != WEIR_OK)
        fail_msg("host: %s", err.text);
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_id = "mem-agent";
    weir_agent *a = NULL;
    if (weir_agent_open(host, &opts, &a, &err) != WEIR_OK)
        fail_msg("open: %s", err.text);
    assert_string_equal(weir_agent_log_path(a), "memory:mem-agent");
    struct stat st;
    assert_int_not_equal(stat(sessions, &st), 0); /* no file, no folder */
    weir_agent *b = NULL;
    assert_int_equal(weir_agent_open(host, &opts, &b, &err), WEIR_E_BUSY);
    assert_non_null(strstr(err.text, "session mem-agent is open for writing by this process"));
    weir_agent_close(a);
    assert_int_equal(weir_agent_open(host, &opts, &b, &err), WEIR_OK);
    weir_agent_close(b);
    /* the host's reads of a store's session (weir log for non-file stores) */
    json_t *events = NULL, *report = NULL, *msgs = NULL;
    assert_int_equal(weir_host_log_events(host, "mem-agent", &events, &err), WEIR_OK);
    assert_true(json_is_array(events));
    json_decref(events);
    assert_int_equal(weir_host_log_check(host, "mem-agent", &report, &err), WEIR_OK);
    assert_true(json_is_true(json_object_get(report, "ok")));
    json_decref(report);
    assert_int_equal(weir_host_log_derive(host, "mem-agent", &msgs, &err), WEIR_OK);
    assert_true(json_is_array(msgs));
    json_decref(msgs);
    assert_int_equal(weir_host_log_check(host, "nobody", &report, &err), WEIR_E_NOT_FOUND);
    assert_null(report);
    assert_int_equal(weir_host_log_events(host, "../x", &events, &err), WEIR_E_INVAL);
    assert_int_equal(weir_host_log_events(NULL, "mem-agent", &events, &err), WEIR_E_INVAL);
    assert_int_equal(weir_host_log_derive(host, "mem-agent", NULL, &err), WEIR_E_INVAL);
    weir_host_destroy(host);
    json_decref(cfg);
}

static void agent_refuses_a_row_without_a_store(void **state) {
    (void)state;
    json_t *cfg = json_pack("{s:{s:s}, s:{s:s,s:s}, s:[], s:[]}", "agent", "model", "m", "session", "dir", "/nonexistent", "store", "pg",
                            "plugin_path", "plugins");
    weir_host *host = NULL;
    weir_error err;
    if (weir_host_create(cfg, &host, &err) != WEIR_OK)
        fail_msg("host: %s", err.text);
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_id = "x";
    weir_agent *a = NULL;
    assert_int_equal(weir_agent_open(host, &opts, &a, &err), WEIR_E_CONFIG);
    assert_null(a);
    assert_non_null(strstr(err.text, "session.store: plugin row 'pg' provides no session store"));
    weir_host_destroy(host);
    json_decref(cfg);
}

/* The session header (weir_agent_options.session_header): a new session's
 * first event is the ignorable session/start with a copy of it, in the file
 * store and the memory store alike; a resume adds none; the reader checks
 * the log ok, weir_log_summary gives it as `header`; a header that is not an
 * object is refused. */
static void a_new_session_starts_with_its_header(void **state) {
    fixture *f = *state;
    char sessions[sizeof f->file + 16];
    snprintf(sessions, sizeof sessions, "%s/sessions", f->dir);
    json_t *header = json_pack("{s:{s:[s], s:s}, s:s}", "deployment", "files", "a.json",
                               "config_hash", "fnv1a64:0123456789abcdef", "cwd", "/somewhere");
    json_t *other = json_pack("{s:s}", "cwd", "/elsewhere");
    for (int memory = 0; memory < 2; memory++) {
        json_t *cfg = json_pack("{s:{s:s}, s:{s:s,s:s}, s:[], s:[]}", "agent", "model", "m",
                                "session", "dir", sessions, "store", memory ? "memory" : "file",
                                "plugin_path", "plugins");
        weir_host *host = NULL;
        weir_error err;
        if (weir_host_create(cfg, &host, &err) != WEIR_OK)
            fail_msg("host: %s", err.text);
        weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
        opts.session_id = "hdr";
        json_t *bad = json_string("x");
        opts.session_header = bad;
        weir_agent *a = NULL;
        assert_int_equal(weir_agent_open(host, &opts, &a, &err), WEIR_E_INVAL);
        assert_non_null(strstr(err.text, "session_header must be an object"));
        json_decref(bad);
        opts.session_header = header;
        if (weir_agent_open(host, &opts, &a, &err) != WEIR_OK)
            fail_msg("open: %s", err.text);
        weir_agent_close(a);
        opts.session_header = other; /* a resume: no second header */
        if (weir_agent_open(host, &opts, &a, &err) != WEIR_OK)
            fail_msg("reopen: %s", err.text);
        weir_agent_close(a);
        json_t *events = NULL, *report = NULL;
        if (memory) {
            assert_int_equal(weir_host_log_events(host, "hdr", &events, &err), WEIR_OK);
            assert_int_equal(weir_host_log_check(host, "hdr", &report, &err), WEIR_OK);
        } else {
            char path[sizeof sessions + 16];
            snprintf(path, sizeof path, "%s/hdr.jsonl", sessions);
            assert_int_equal(weir_log_events(path, &events, &err), WEIR_OK);
            assert_int_equal(weir_log_check(path, &report, &err), WEIR_OK);
            json_t *sum = NULL;
            assert_int_equal(weir_log_summary(path, &sum, &err), WEIR_OK);
            assert_true(json_equal(json_object_get(sum, "header"), header));
            json_decref(sum);
        }
        assert_true(json_is_true(json_object_get(report, "ok")));
        json_decref(report);
        assert_int_equal(json_array_size(events), 1);
        const json_t *first = json_array_get(events, 0);
        assert_string_equal(json_string_value(json_object_get(first, "type")), "session/start");
        assert_int_equal(json_integer_value(json_object_get(first, "seq")), 0);
        assert_true(json_is_true(json_object_get(first, "ignorable")));
        assert_true(json_equal(json_object_get(first, "data"), header));
        json_decref(events);
        weir_host_destroy(host);
        json_decref(cfg);
    }
    json_decref(other);
    json_decref(header);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(unknown_row_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_values_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(builtin_names_are_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(agent_uses_the_memory_store, setup, teardown),
        cmocka_unit_test_setup_teardown(agent_refuses_a_row_without_a_store, setup, teardown),
        cmocka_unit_test_setup_teardown(a_new_session_starts_with_its_header, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
