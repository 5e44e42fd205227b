/*
 * tests/unit/test_session_log.c - the durable session log (docs/session-log.md):
 * append and seq, rejected appends, unknown types, fsync policy, torn tails,
 * corruption, replay, crash repair, folds, observers, write failures, an
 * allocation-failure loop, one writer per session, foreign files, private
 * modes, and the one reader that check and open share.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "session_log.h"
#include "store.h"
#include "surface.h"
#include "testutil.h"
#include "weir/host.h"

typedef struct fixture {
    char *dir;
    char *path;
    weir__log *log;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    f->dir = wt_tmpdir("log");
    assert_non_null(f->dir);
    f->path = malloc(strlen(f->dir) + 32);
    sprintf(f->path, "%s/a/b/s.jsonl", f->dir); /* parents do not exist yet */
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    weir__log_close(f->log);
    wt_rmtree(f->dir);
    free(f->dir);
    free(f->path);
    free(f);
    return 0;
}

static void open_log(fixture *f) {
    weir_error err;
    weir__log_close(f->log);
    f->log = NULL;
    assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_STEP, NULL, NULL, &f->log, &err), WEIR_OK);
}

/* Append `type` with data parsed from `data_json`; surface types get "append". */
static int add(weir__log *log, const char *type, const char *data_json, weir_error *err) {
    json_t *data = json_loads(data_json, 0, NULL);
    assert_non_null(data);
    json_t *op = weir__is_surface_type(type) ? json_string("append") : NULL;
    int rc = weir__log_append(log, type, data, op, NULL, 0, NULL, err);
    json_decref(op);
    json_decref(data);
    return rc;
}

static void must_add(weir__log *log, const char *type, const char *data_json) {
    weir_error err;
    weir_error_clear(&err);
    int rc = add(log, type, data_json, &err);
    if (rc != WEIR_OK)
        fail_msg("append %s: %s", type, err.text);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static char *derived_text(weir__log *log) {
    json_t *d = weir__log_derive(log);
    assert_non_null(d);
    char *s = json_dumps(d, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(d);
    return s;
}

#define USER(id, text)                                                                             \
    "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\","       \
    "\"text\":\"" text "\"}],\"id\":\"" id "\",\"source\":{\"kind\":\"human\"}}}"
#define ASSISTANT(text)                                                                            \
    "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":"           \
    "\"text\",\"text\":\"" text "\"}]},\"stream\":[]}"

#define HEADER                                                                                     \
    "{\"reason\":\"initial\",\"header\":{\"config\":{\"provider\":\"p\",\"model\":\"m\"}}}"

static void seed(weir__log *log) {
    must_add(log, "turn/start", "{\"turn\":1}");
    must_add(log, "step/start", "{\"turn\":1,\"step\":1}");
    must_add(log, "user/message", USER("in-1", "hello"));
    must_add(log, "request/header", HEADER);
    must_add(log, "assistant/message", ASSISTANT("hi"));
}

static void append_assigns_contiguous_seq(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    assert_int_equal(weir__log_count(f->log), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(json_integer_value(json_object_get(weir__log_event(f->log, i), "seq")), i);
    assert_null(weir__log_event(f->log, 5));
    const json_t *ev = weir__log_event(f->log, 2);
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "user/message");
    assert_string_equal(json_string_value(json_object_get(ev, "surface_op")), "append");
    assert_true(json_is_integer(json_object_get(ev, "time")));
    assert_null(json_object_get(weir__log_event(f->log, 0), "surface_op"));
    /* one compact line per event, key order seq, time, type, data */
    char *text = wt_read_file(f->path, NULL);
    assert_non_null(text);
    char *line2 = strchr(strchr(text, '\n') + 1, '\n') + 1;
    assert_true(strncmp(line2, "{\"seq\":2,\"time\":", 16) == 0);
    size_t lines = 0;
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 5);
    free(text);
}

static void rejected_append_changes_nothing(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    size_t count = weir__log_count(f->log);
    long size = file_size(f->path);
    char *before = derived_text(f->log);
    weir_error err;
    json_t *msg = json_loads(USER("in-2", "x"), 0, NULL);
    json_t *append = json_string("append");
    json_t *bad_range = json_pack("{s:s,s:i,s:i}", "op", "replace", "start_seq", 9, "end_seq", 9);
    json_t *backwards = json_pack("{s:s,s:i,s:i}", "op", "replace", "start_seq", 4, "end_seq", 2);
    json_t *good_range = json_pack("{s:s,s:i,s:i}", "op", "replace", "start_seq", 2, "end_seq", 4);
    json_t *later = json_pack("[i]", 7), *dup = json_pack("[i,i]", 2, 2),
           *partial = json_pack("[i]", 2);
    json_t *str = json_string("not an object");
    struct {
        const char *type;
        const json_t *data, *op, *src;
        const char *text;
    } cases[] = {
        {"user/message", str, append, NULL,
         "session log: append needs a log, a type and an object data (type user/message)"},
        {"turn/start", msg, append, NULL,
         "surface_op is only allowed on surface types, not turn/start"},
        {"user/message", msg, NULL, NULL, "user/message needs surface_op"},
        {"user/message", msg, bad_range, NULL, "replace start_seq 9 is not a current surface node"},
        {"user/message", msg, backwards, NULL,
         "replace start_seq 4 comes after end_seq 2 in surface order"},
        {"user/message", msg, good_range, partial, "source_seqs must include shadowed seq 4"},
        {"user/message", msg, append, later, "source_seqs[0] is not an earlier seq"},
        {"user/message", msg, append, dup, "source_seqs lists seq 2 twice"},
        {"assistant/message", msg, append, NULL,
         "assistant/message needs data.message.role \"assistant\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        weir_error_clear(&err);
        assert_int_equal(weir__log_append(f->log, cases[i].type, cases[i].data, cases[i].op,
                                          cases[i].src, 0, NULL, &err),
                         WEIR_E_LOG_REJECTED);
        if (!strstr(err.text, cases[i].text))
            fail_msg("case %zu: '%s' does not contain '%s'", i, err.text, cases[i].text);
        assert_int_equal(weir__log_count(f->log), count);
        assert_int_equal(file_size(f->path), size);
        char *after = derived_text(f->log);
        assert_string_equal(after, before);
        free(after);
    }
    free(before);
    json_decref(msg);
    json_decref(append);
    json_decref(bad_range);
    json_decref(backwards);
    json_decref(good_range);
    json_decref(later);
    json_decref(dup);
    json_decref(partial);
    json_decref(str);
}

static bool known_plugin_type(const char *type, void *ud) {
    (void)ud;
    return strcmp(type, "plugin/registered") == 0;
}

/* A handed-over data object is kept as it is when nothing else holds a
 * container of it, else copied; either way the line and the event match. */
static void handover_keeps_sole_data(void **state) {
    fixture *f = *state;
    weir_error err;
    open_log(f);
    json_t *sole = json_pack("{s:i, s:{s:s}}", "turn", 1, "reason", "kind", "completed");
    assert_int_equal(weir__log_append(f->log, "turn/start", sole, NULL, NULL,
                                      WEIR__APPEND_HANDOVER, NULL, &err),
                     WEIR_OK);
    const json_t *kept = json_object_get(weir__log_event(f->log, 0), "data");
    assert_ptr_equal(kept, sole);
    json_decref(sole); /* the log's reference is the only one now */
    json_t *shared_reason = json_pack("{s:s}", "kind", "completed");
    json_t *shared = json_pack("{s:i, s:O}", "turn", 1, "reason", shared_reason);
    assert_int_equal(weir__log_append(f->log, "turn/end", shared, NULL, NULL,
                                      WEIR__APPEND_HANDOVER, NULL, &err),
                     WEIR_OK);
    const json_t *copied = json_object_get(weir__log_event(f->log, 1), "data");
    assert_ptr_not_equal(copied, shared);
    assert_true(json_equal(copied, shared));
    /* the other holder changes its object: the log's event does not */
    json_object_set_new(shared_reason, "kind", json_string("changed"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(copied, "reason"),
                                                          "kind")),
                        "completed");
    json_decref(shared);
    json_decref(shared_reason);
    /* without the flag the log always copies */
    json_t *plain = json_pack("{s:i}", "turn", 2);
    assert_int_equal(weir__log_append(f->log, "turn/start", plain, NULL, NULL, 0, NULL, &err),
                     WEIR_OK);
    assert_ptr_not_equal(json_object_get(weir__log_event(f->log, 2), "data"), plain);
    json_decref(plain);
    open_log(f); /* what was written reads back the same */
    assert_int_equal(weir__log_count(f->log), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(weir__log_event(f->log, 1), "data"),
                                            "reason"),
                            "kind")),
                        "completed");
}

/* The memory store with its syncs counted. */
static int syncs;
static weir_store counted_vt;
static int (*memory_sync)(void *, void *, weir_error *);
static int counted_sync(void *self, void *handle, weir_error *err) {
    syncs++;
    return memory_sync(self, handle, err);
}

/* A deferred checkpoint is paid once, by whichever sync comes first; an
 * unowed pay does nothing; policies other than step never owe one. */
static void deferred_sync_point_paid_once(void **state) {
    (void)state;
    weir__store_ref mem = weir__store_memory();
    counted_vt = *mem.vt;
    memory_sync = mem.vt->sync;
    counted_vt.sync = counted_sync;
    weir__store_ref counted = {&counted_vt, mem.self};
    weir_error err;
    weir__log *log = NULL;
    assert_int_equal(weir__log_open_store("counted", counted, "defer", "defer", false,
                                          WEIR__FSYNC_STEP, NULL, NULL, &log, &err),
                     WEIR_OK);
    syncs = 0;
    must_add(log, "turn/start", "{\"turn\":1}");
    assert_int_equal(weir__log_pay_sync(log, &err), WEIR_OK);
    assert_int_equal(syncs, 0); /* nothing owed */
    weir__log_defer_sync(log);
    assert_int_equal(syncs, 0); /* deferred: no sync yet */
    assert_int_equal(weir__log_pay_sync(log, &err), WEIR_OK);
    assert_int_equal(syncs, 1);
    assert_int_equal(weir__log_pay_sync(log, &err), WEIR_OK);
    assert_int_equal(syncs, 1); /* paid once */
    weir__log_defer_sync(log);
    must_add(log, "turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}");
    assert_int_equal(weir__log_sync_point(log, &err), WEIR_OK); /* the turn's end pays it */
    assert_int_equal(syncs, 2);
    assert_int_equal(weir__log_pay_sync(log, &err), WEIR_OK);
    assert_int_equal(syncs, 2);
    weir__log_close(log);
    /* policy none: nothing is ever owed, nothing synced */
    log = NULL;
    assert_int_equal(weir__log_open_store("counted", counted, "defer2", "defer2", false,
                                          WEIR__FSYNC_NONE, NULL, NULL, &log, &err),
                     WEIR_OK);
    syncs = 0;
    weir__log_defer_sync(log);
    assert_int_equal(weir__log_pay_sync(log, &err), WEIR_OK);
    assert_int_equal(syncs, 0);
    weir__log_close(log);
}

static size_t check_open_turns(fixture *f);

/* The live log refuses what would break the nesting of turns and steps
 * (weir log --check would refuse the log), names the open turn and step,
 * and writes nothing. */
/* An idle trim leaves no grown line buffer: an agent that once logged a
 * large event does not hold its size while idle (a buffer of the first 4 KiB
 * stays: freeing it would cost more at the next turn than it saves). */
static void idle_trim_frees_the_line_buffer(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    weir_error err;
    size_t big = 300 * 1024;
    char *text = malloc(big + 1);
    assert_non_null(text);
    memset(text, 'x', big);
    text[big] = '\0';
    json_t *data = json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}], s:s, s:{s:s}}}", "turn", 1,
                             "step", 1, "message", "role", "user", "content", "type", "text",
                             "text", text, "id", "in-big", "source", "kind", "human");
    free(text);
    assert_non_null(data);
    json_t *op = json_string("append");
    int rc = weir__log_append(f->log, "user/message", data, op, NULL, 0, NULL, &err);
    json_decref(op);
    json_decref(data);
    if (rc != WEIR_OK)
        fail_msg("append: %s", err.text);
    assert_true(weir__log_line_buffer(f->log) > big);
    weir__log_trim(f->log, false); /* a step's end keeps it for the next append */
    assert_true(weir__log_line_buffer(f->log) > big);
    weir__log_trim(f->log, true);
    assert_int_equal(weir__log_line_buffer(f->log), 0);
    /* the next append starts a small buffer, which an idle trim keeps; and
     * the log reads back whole */
    must_add(f->log, "assistant/message", ASSISTANT("seen"));
    assert_int_equal(weir__log_line_buffer(f->log), 4096);
    weir__log_trim(f->log, true);
    assert_int_equal(weir__log_line_buffer(f->log), 4096);
    open_log(f);
    assert_int_equal(weir__log_count(f->log), 7);
    json_t *msgs = weir__log_derive(f->log);
    assert_int_equal(json_array_size(msgs), 4);
    const json_t *content = json_object_get(json_array_get(msgs, 2), "content");
    assert_int_equal(strlen(json_string_value(json_object_get(json_array_get(content, 0), "text"))),
                     big);
    json_decref(msgs);
}

static void nesting_breaks_are_refused(void **state) {
    fixture *f = *state;
    open_log(f);
    struct {
        const char *type, *data, *refused; /* NULL: accepted */
    } steps[] = {
        {"step/start", "{\"turn\":1,\"step\":1}", "step/start for turn 1, step 1: no turn is open"},
        {"turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}",
         "turn/end for turn 1: no turn is open"},
        {"turn/start", "{\"turn\":1}", NULL},
        {"turn/start", "{\"turn\":2}", "turn/start for turn 2: a turn is open (turn 1 is open)"},
        {"step/end", "{\"turn\":1,\"step\":1}", "step/end for turn 1, step 1: no step is open"},
        {"step/start", "{\"turn\":2,\"step\":1}",
         "step/start for turn 2, step 1: it is not the open turn (turn 1 is open)"},
        {"step/start", "{\"turn\":1,\"step\":1}", NULL},
        {"step/start", "{\"turn\":1,\"step\":2}",
         "step/start for turn 1, step 2: a step is open (turn 1, step 1 is open)"},
        {"turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}",
         "turn/end for turn 1: a step is open (turn 1, step 1 is open)"},
        {"step/end", "{\"turn\":1,\"step\":2}",
         "step/end for turn 1, step 2: it is not the open step (turn 1, step 1 is open)"},
        {"step/end", "{\"turn\":1,\"step\":1}", NULL},
        {"turn/end", "{\"turn\":2,\"reason\":{\"kind\":\"completed\"}}",
         "turn/end for turn 2: it is not the open turn (turn 1 is open)"},
        {"turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}", NULL},
    };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        size_t count = weir__log_count(f->log);
        long size = file_size(f->path);
        weir_error err;
        weir_error_clear(&err);
        int rc = add(f->log, steps[i].type, steps[i].data, &err);
        if (!steps[i].refused) {
            if (rc != WEIR_OK)
                fail_msg("step %zu: %s refused: %s", i, steps[i].type, err.text);
            continue;
        }
        assert_int_equal(rc, WEIR_E_LOG_REJECTED);
        if (!strstr(err.text, steps[i].refused))
            fail_msg("step %zu: '%s' does not contain '%s'", i, err.text, steps[i].refused);
        assert_int_equal(weir__log_count(f->log), count);
        assert_int_equal(file_size(f->path), size);
    }
    weir__log_close(f->log);
    f->log = NULL;
    assert_int_equal(check_open_turns(f), 0);
}

/* A step ends only with every tool call answered; weir__log_settle_calls
 * answers what is left (a call never logged gets its tool/call first), its
 * text naming why, and the step may end. */
static void step_ends_only_with_every_call_answered(void **state) {
    fixture *f = *state;
    open_log(f);
    must_add(f->log, "turn/start", "{\"turn\":1}");
    must_add(f->log, "step/start", "{\"turn\":1,\"step\":1}");
    must_add(f->log, "request/header",
             "{\"header\":{\"config\":{\"provider\":\"p\",\"model\":\"m\"}},"
             "\"reason\":\"initial\"}");
    must_add(f->log, "assistant/message",
             "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":["
             "{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"ls\",\"arguments\":\"{}\"},"
             "{\"type\":\"tool_call\",\"id\":\"c2\",\"name\":\"ls\",\"arguments\":\"{}\"}]},"
             "\"stream\":[]}");
    must_add(f->log, "tool/call",
             "{\"turn\":1,\"step\":1,\"call_id\":\"c1\",\"name\":\"ls\",\"arguments\":\"{}\"}");
    size_t count = weir__log_count(f->log);
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(add(f->log, "step/end", "{\"turn\":1,\"step\":1}", &err),
                     WEIR_E_LOG_REJECTED);
    assert_non_null(strstr(err.text, "step/end for turn 1, step 1: a tool call of the step has "
                                     "no tool/result (turn 1, step 1 is open)"));
    assert_int_equal(weir__log_count(f->log), count);
    assert_int_equal(weir__log_settle_calls(f->log, "the tool scheduler failed", &err), WEIR_OK);
    static const char *const want[] = {"tool/call", "tool/result", "tool/result"};
    assert_int_equal(weir__log_count(f->log), count + 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(weir__json_str(weir__log_event(f->log, count + i), "type", ""),
                            want[i]);
    char *r = json_dumps(json_object_get(weir__log_event(f->log, count + 2), "data"),
                         JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(
        r, "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
           "\"tool_result\",\"call_id\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":"
           "\"Error: the tool scheduler failed: the tool may or may not have run; do not assume "
           "either\"}],\"is_error\":true}]},"
           "\"error\":{\"name\":\"AbortError\",\"code\":\"INTERRUPTED\"}}");
    free(r);
    /* nothing left: settling again appends nothing */
    assert_int_equal(weir__log_settle_calls(f->log, NULL, &err), WEIR_OK);
    assert_int_equal(weir__log_count(f->log), count + 3);
    must_add(f->log, "step/end", "{\"turn\":1,\"step\":1}");
    must_add(f->log, "turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}");
    weir__log_close(f->log);
    f->log = NULL;
    assert_int_equal(check_open_turns(f), 0);
}

static void unknown_type_refused_unless_ignorable(void **state) {
    fixture *f = *state;
    weir_error err;
    assert_int_equal(
        weir__log_open(f->path, WEIR__FSYNC_NONE, known_plugin_type, NULL, &f->log, &err), WEIR_OK);
    json_t *data = json_object();
    assert_int_equal(weir__log_append(f->log, "plugin/other", data, NULL, NULL, 0, NULL, &err),
                     WEIR_E_LOG_REJECTED);
    assert_non_null(
        strstr(err.text, "unknown event type 'plugin/other' (not registered, not ignorable)"));
    assert_int_equal(weir__log_count(f->log), 0);
    assert_int_equal(weir__log_append(f->log, "plugin/other", data, NULL, NULL,
                                      WEIR_EVENT_IGNORABLE, NULL, &err),
                     WEIR_OK);
    assert_true(json_is_true(json_object_get(weir__log_event(f->log, 0), "ignorable")));
    assert_int_equal(weir__log_append(f->log, "plugin/registered", data, NULL, NULL, 0, NULL, &err),
                     WEIR_OK);
    assert_null(json_object_get(weir__log_event(f->log, 1), "ignorable"));
    json_decref(data);
    weir__log_close(f->log);
    f->log = NULL;
    /* A reader that does not know plugin/registered refuses the log. */
    char want[4200];
    snprintf(want, sizeof want,
             "%s:2: unknown event type 'plugin/registered' is not ignorable",
             f->path);
    assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_STEP, NULL, NULL, &f->log, &err),
                     WEIR_E_LOG_CORRUPT);
    assert_string_equal(err.text, want);
    assert_null(f->log);
}

static void fsync_policy_parsing(void **state) {
    (void)state;
    weir__fsync p = WEIR__FSYNC_NONE;
    assert_int_equal(weir__fsync_parse(NULL, &p), 0);
    assert_int_equal(p, WEIR__FSYNC_STEP);
    assert_int_equal(weir__fsync_parse("always", &p), 0);
    assert_int_equal(p, WEIR__FSYNC_ALWAYS);
    assert_int_equal(weir__fsync_parse("none", &p), 0);
    assert_int_equal(p, WEIR__FSYNC_NONE);
    assert_int_equal(weir__fsync_parse("step", &p), 0);
    assert_int_equal(p, WEIR__FSYNC_STEP);
    assert_int_equal(weir__fsync_parse("sometimes", &p), -1);
    assert_int_equal(weir__fsync_parse("", &p), -1);
    assert_int_equal(weir__fsync_parse("step", NULL), -1);
}

/* Run open with stderr captured into `captured`. */
static int open_capturing(fixture *f, char *captured, size_t size, weir_error *err) {
    char cap_path[4200];
    snprintf(cap_path, sizeof cap_path, "%s/stderr.txt", f->dir);
    fflush(stderr);
    int saved = dup(2);
    FILE *cap = fopen(cap_path, "w");
    dup2(fileno(cap), 2);
    int rc = weir__log_open(f->path, WEIR__FSYNC_STEP, NULL, NULL, &f->log, err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(cap);
    char *text = wt_read_file(cap_path, NULL);
    snprintf(captured, size, "%s", text ? text : "");
    free(text);
    return rc;
}

static void torn_tail_dropped_with_warning(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    weir__log_close(f->log);
    f->log = NULL;
    long good = file_size(f->path);
    FILE *out = fopen(f->path, "a");
    fputs("{\"seq\":5,\"time\":1,\"ty", out); /* torn: no newline */
    fclose(out);
    char captured[4400], want[4400];
    weir_error err;
    assert_int_equal(open_capturing(f, captured, sizeof captured, &err), WEIR_OK);
    snprintf(want, sizeof want, "weir: %s: dropped a torn last line (21 bytes)\n", f->path);
    assert_string_equal(captured, want);
    assert_int_equal(weir__log_count(f->log), 5);
    assert_int_equal(file_size(f->path), good);
    /* appends continue at seq 5 on a clean line */
    must_add(f->log, "step/end", "{\"turn\":1,\"step\":1}");
    weir__log_close(f->log);
    f->log = NULL;
    /* an unparseable but terminated last line is not torn (a crash leaves
     * no newline after a cut line): it is corruption, refused with its
     * line, and the file is left as it was (issue #31 item 11) */
    good = file_size(f->path);
    out = fopen(f->path, "a");
    fputs("{\"seq\":6,\"ti\n", out);
    fclose(out);
    assert_int_equal(open_capturing(f, captured, sizeof captured, &err), WEIR_E_LOG_CORRUPT);
    assert_string_equal(captured, "");
    snprintf(want, sizeof want, "%s:7: invalid JSON: ", f->path);
    assert_true(strncmp(err.text, want, strlen(want)) == 0);
    assert_int_equal(file_size(f->path), good + 13);
    json_t *report = NULL;
    assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
    assert_false(json_is_true(json_object_get(report, "ok")));
    json_decref(report);
}

static void mid_file_corruption_names_line(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    weir__log_close(f->log);
    f->log = NULL;
    char *text = wt_read_file(f->path, NULL);
    char *second = strchr(text, '\n') + 1;
    char *third = strchr(second, '\n') + 1;
    /* line 2 replaced by garbage */
    char buf[8192];
    snprintf(buf, sizeof buf, "%.*s{oops}\n%s", (int)(second - text), text, third);
    assert_int_equal(wt_write_file(f->path, buf), 0);
    weir_error err;
    assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_STEP, NULL, NULL, &f->log, &err),
                     WEIR_E_LOG_CORRUPT);
    char want[4400];
    snprintf(want, sizeof want, "%s:2: invalid JSON: ", f->path);
    assert_true(strncmp(err.text, want, strlen(want)) == 0);
    /* line 2 dropped entirely: line 2 now holds seq 2 */
    snprintf(buf, sizeof buf, "%.*s%s", (int)(second - text), text, third);
    assert_int_equal(wt_write_file(f->path, buf), 0);
    assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_STEP, NULL, NULL, &f->log, &err),
                     WEIR_E_LOG_CORRUPT);
    snprintf(want, sizeof want, "%s:2: seq 2 breaks contiguity (expected 1)", f->path);
    assert_true(strncmp(err.text, want, strlen(want)) == 0);
    assert_int_equal((long)strlen(buf), file_size(f->path)); /* nothing truncated */
    free(text);
}

static void reopen_gives_same_derived_history(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    must_add(f->log, "user/message", USER("in-2", "more"));
    /* compaction-like replace of seqs 2..4 by a summary */
    json_t *data = json_loads(USER("sum-1", "summary"), 0, NULL);
    json_t *op = json_pack("{s:s,s:i,s:i}", "op", "replace", "start_seq", 2, "end_seq", 4);
    json_t *src = json_pack("[i,i]", 2, 4);
    weir_error err;
    assert_int_equal(weir__log_append(f->log, "user/message", data, op, src, 0, NULL, &err),
                     WEIR_OK);
    json_decref(data);
    json_decref(op);
    json_decref(src);
    char *before = derived_text(f->log);
    open_log(f);
    char *after = derived_text(f->log);
    assert_string_equal(after, before);
    json_t *pub = NULL;
    weir__log_close(f->log);
    f->log = NULL;
    assert_int_equal(weir_log_derive(f->path, &pub, &err), WEIR_OK);
    char *pubs = json_dumps(pub, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(pubs, before);
    assert_string_equal(
        before, "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"summary\"}],"
                "\"source\":{\"kind\":\"human\"}},{\"role\":\"user\",\"content\":[{\"type\":"
                "\"text\",\"text\":\"more\"}],\"source\":{\"kind\":\"human\"}}]");
    free(pubs);
    json_decref(pub);
    free(before);
    free(after);
}

static void repair_appends_closers(void **state) {
    fixture *f = *state;
    open_log(f);
    must_add(f->log, "turn/start", "{\"turn\":1}");
    must_add(f->log, "turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}");
    must_add(f->log, "turn/start", "{\"turn\":2}");
    must_add(f->log, "step/start", "{\"turn\":2,\"step\":1}");
    must_add(f->log, "tool/call",
             "{\"turn\":2,\"step\":1,\"call_id\":\"c1\",\"name\":\"ls\",\"arguments\":\"{}\"}");
    must_add(f->log, "tool/call",
             "{\"turn\":2,\"step\":1,\"call_id\":\"c2\",\"name\":\"ls\",\"arguments\":\"{}\"}");
    must_add(f->log, "tool/result",
             "{\"turn\":2,\"step\":1,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":\"tool_"
             "result\","
             "\"call_id\":\"c1\",\"content\":[]}]}}");
    open_log(f); /* "crash" and resume */
    assert_int_equal(weir__log_last_turn(f->log), 2);
    bool repaired = false;
    weir_error err;
    assert_int_equal(weir__log_repair(f->log, &repaired, &err), WEIR_OK);
    assert_true(repaired);
    assert_int_equal(weir__log_count(f->log), 10);
    char *r = json_dumps(json_object_get(weir__log_event(f->log, 7), "data"),
                         JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(
        r, "{\"turn\":2,\"step\":1,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
           "\"tool_result\",\"call_id\":\"c2\",\"content\":[{\"type\":\"text\",\"text\":"
           "\"Error: interrupted by a crash: the tool may or may not have run; do not assume "
           "either\"}],\"is_error\":true}]},"
           "\"error\":{\"name\":\"AbortError\",\"code\":\"INTERRUPTED\"}}");
    free(r);
    assert_string_equal(json_string_value(json_object_get(weir__log_event(f->log, 7), "type")),
                        "tool/result");
    r = json_dumps(weir__log_event(f->log, 8), JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(strstr(r, "\"type\":\"step/end\",\"data\":{\"turn\":2,\"step\":1}}"));
    free(r);
    r = json_dumps(weir__log_event(f->log, 9), JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(strstr(
        r, "\"type\":\"turn/end\",\"data\":{\"turn\":2,\"reason\":{\"kind\":\"interrupted\"}}}"));
    free(r);
    assert_int_equal(weir__log_repair(f->log, &repaired, &err), WEIR_OK);
    assert_false(repaired);
    assert_int_equal(weir__log_count(f->log), 10);
    /* the repaired log passes the offline check */
    json_t *report = NULL;
    assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
    assert_true(json_is_true(json_object_get(report, "ok")));
    assert_int_equal(json_array_size(json_object_get(report, "open")), 0);
    json_decref(report);
}

/* A crash between assistant/message and its tool/call events: repair logs the
 * missing call with an interrupted result, so the history stays valid. */
static void repair_answers_tool_calls_never_logged(void **state) {
    fixture *f = *state;
    open_log(f);
    must_add(f->log, "turn/start", "{\"turn\":1}");
    must_add(f->log, "step/start", "{\"turn\":1,\"step\":1}");
    must_add(f->log, "user/message",
                "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"user\",\"content\":"
                "[{\"type\":\"text\",\"text\":\"q\"}]}}");
    must_add(f->log, "request/header",
             "{\"header\":{\"config\":{\"provider\":\"p\",\"model\":\"m\"}},"
             "\"reason\":\"initial\"}");
    must_add(f->log, "assistant/message",
                "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":"
                "[{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"pow\","
                "\"arguments\":\"{\\\"x\\\":2}\"},"
                "{\"type\":\"tool_call\",\"id\":\"c2\",\"name\":\"pow\",\"arguments\":\"{}\"}]},"
                "\"stream\":[]}");
    must_add(f->log, "tool/call",
             "{\"turn\":1,\"step\":1,\"call_id\":\"c1\",\"name\":\"pow\","
             "\"arguments\":\"{\\\"x\\\":2}\"}");
    open_log(f); /* "crash" before c2's tool/call, and resume */
    weir_error err;
    bool repaired = false;
    assert_int_equal(weir__log_repair(f->log, &repaired, &err), WEIR_OK);
    assert_true(repaired);
    /* c2: the call, then its result (planned at the assistant message); c1:
     * its result; then the closers */
    static const char *const want[] = {"tool/call", "tool/result", "tool/result", "step/end",
                                       "turn/end"};
    assert_int_equal(weir__log_count(f->log), 6 + 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(weir__json_str(weir__log_event(f->log, 6 + i), "type", ""), want[i]);
    const json_t *call = json_object_get(weir__log_event(f->log, 6), "data");
    assert_string_equal(weir__json_str(call, "call_id", ""), "c2");
    assert_string_equal(weir__json_str(call, "name", ""), "pow");
    json_t *report = NULL;
    assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
    assert_true(json_is_true(json_object_get(report, "ok")));
    assert_int_equal(json_array_size(json_object_get(report, "errors")), 0);
    assert_int_equal(json_array_size(json_object_get(report, "open")), 0);
    json_decref(report);
}

/* A turn a crash cut: a closed turn, then a step with two tool calls the
 * model made, one dispatched and answered, one dispatched and not, and one
 * never dispatched. */
static void write_cut_turn(fixture *f) {
    unlink(f->path);
    open_log(f);
    must_add(f->log, "turn/start", "{\"turn\":1}");
    must_add(f->log, "turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}");
    must_add(f->log, "turn/start", "{\"turn\":2}");
    must_add(f->log, "step/start", "{\"turn\":2,\"step\":1}");
    must_add(f->log, "request/header",
             "{\"header\":{\"config\":{\"provider\":\"p\",\"model\":\"m\"}},"
             "\"reason\":\"initial\"}");
    must_add(f->log, "assistant/message",
             "{\"turn\":2,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":["
             "{\"type\":\"tool_call\",\"id\":\"c1\",\"name\":\"ls\",\"arguments\":\"{}\"},"
             "{\"type\":\"tool_call\",\"id\":\"c2\",\"name\":\"ls\",\"arguments\":\"{}\"},"
             "{\"type\":\"tool_call\",\"id\":\"c3\",\"name\":\"ls\",\"arguments\":\"{}\"}]},"
             "\"stream\":[]}");
    must_add(f->log, "tool/call",
             "{\"turn\":2,\"step\":1,\"call_id\":\"c1\",\"name\":\"ls\",\"arguments\":\"{}\"}");
    must_add(f->log, "tool/call",
             "{\"turn\":2,\"step\":1,\"call_id\":\"c2\",\"name\":\"ls\",\"arguments\":\"{}\"}");
    must_add(f->log, "tool/result",
             "{\"turn\":2,\"step\":1,\"message\":{\"role\":\"tool\",\"content\":[{\"type\":"
             "\"tool_result\",\"call_id\":\"c1\",\"content\":[]}]}}");
    weir__log_close(f->log);
    f->log = NULL;
}

/* The log's check report of the file: ok, and how many turns are open. */
static size_t check_open_turns(fixture *f) {
    json_t *report = NULL;
    weir_error err;
    assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
    if (!json_is_true(json_object_get(report, "ok"))) {
        char *r = json_dumps(json_object_get(report, "errors"), JSON_COMPACT);
        fail_msg("the log fails its check: %s", r);
    }
    size_t open = json_array_size(json_object_get(report, "open"));
    json_decref(report);
    return open;
}

/* One allocation that fails while the repair reads back what open released
 * (and memory is there again afterwards) fails the repair loudly; it never
 * writes closers for the wrong turn or skips a call.  The log stays valid
 * and a later repair closes it. */
static void repair_survives_one_failed_allocation(void **state) {
    fixture *f = *state;
    long used = 0, k;
    size_t failed = 0;
    for (k = 1; k < 5000; k++) {
        write_cut_turn(f);
        open_log(f); /* "crash" and resume: open releases what it read */
        weir_error err;
        bool repaired = false;
        weir__alloc_fail_only(k);
        int rc = weir__log_repair(f->log, &repaired, &err);
        used = weir__alloc_fail_after(-1);
        weir__log_close(f->log);
        f->log = NULL;
        if (rc == WEIR_OK) {
            assert_true(repaired);
            assert_int_equal(check_open_turns(f), 0);
        } else {
            failed++;
            assert_int_equal(rc, WEIR_E_NOMEM);
            check_open_turns(f); /* valid, perhaps half closed */
            open_log(f);
            assert_int_equal(weir__log_repair(f->log, &repaired, &err), WEIR_OK);
            weir__log_close(f->log);
            f->log = NULL;
            assert_int_equal(check_open_turns(f), 0);
        }
        /* c1's result is the one logged; c2 and c3 get interrupted ones */
        weir__log *log = NULL;
        assert_int_equal(weir__log_open_readonly(f->path, &log, &err), WEIR_OK);
        size_t n = weir__log_count(log), results = 0;
        for (size_t i = 0; i < n; i++) {
            const json_t *ev = weir__log_event(log, i);
            assert_non_null(ev);
            if (strcmp(weir__json_str(ev, "type", ""), "tool/result") == 0)
                results++;
        }
        weir__log_close(log);
        assert_int_equal(results, 3);
        if (used < k)
            break; /* the repair no longer reaches the failing allocation */
    }
    assert_true(used < k);
    assert_true(failed > 0);
}

static void request_header_fold_keeps_latest(void **state) {
    fixture *f = *state;
    open_log(f);
    assert_false(weir__log_has_request_header(f->log));
    assert_null(weir__log_request_header(f->log));
    must_add(
        f->log, "request/header",
        "{\"header\":{\"config\":{\"provider\":\"a\",\"model\":\"m1\"}},\"reason\":\"initial\"}");
    must_add(f->log, "request/context", "{\"provider\":\"a\",\"model\":\"m1\"}");
    must_add(
        f->log, "request/header",
        "{\"header\":{\"config\":{\"provider\":\"a\",\"model\":\"m2\"}},\"reason\":\"change\"}");
    assert_true(weir__log_has_request_header(f->log));
    assert_string_equal(
        weir__json_str(json_object_get(weir__log_request_header(f->log), "config"), "model", ""),
        "m2");
    assert_string_equal(weir__json_str(weir__log_request_context(f->log), "model", ""), "m1");
    open_log(f);
    assert_string_equal(
        weir__json_str(json_object_get(weir__log_request_header(f->log), "config"), "model", ""),
        "m2");
}

/* The header fold only ever sees canonical request/header data: anything
 * else is rejected on append and is corruption (naming the line) on open. */
static void core_events_without_their_fields_rejected(void **state) {
    fixture *f = *state;
    open_log(f);
    static const struct {
        const char *type, *data, *why;
    } cases[] = {
        {"turn/start", "{\"rn\":1}", "turn/start: data.turn must be an integer from 0 to 2147483647"},
        {"turn/start", "{\"turn\":2147483648}",
         "turn/start: data.turn must be an integer from 0 to 2147483647"},
        {"turn/end", "{\"turn\":1,\"reason\":\"done\"}",
         "turn/end: data.reason must be an object with a string kind"},
        {"step/start", "{\"turn\":1}", "step/start: data.step must be an integer from 0 to 2147483647"},
        {"tool/call", "{\"turn\":1,\"step\":1,\"name\":\"x\",\"arguments\":\"{}\"}",
         "tool/call: data.call_id must be a non-empty string"},
        {"tool/call", "{\"turn\":1,\"step\":1,\"call_id\":\"c\",\"name\":\"x\",\"arguments\":{}}",
         "tool/call: data.arguments must be a string"},
        {"agent/inbox/spliced", "{\"target\":\"next-turn\",\"start\":-1,\"inserted\":[]}",
         "agent/inbox/spliced: data.start must be an integer >= 0"},
    };
    long size = file_size(f->path);
    char want[4400];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        weir_error err;
        weir_error_clear(&err);
        assert_int_equal(add(f->log, cases[i].type, cases[i].data, &err), WEIR_E_LOG_REJECTED);
        snprintf(want, sizeof want, "session log %s: rejected %s", f->path, cases[i].why);
        assert_string_equal(err.text, want);
        assert_int_equal(weir__log_count(f->log), 0);
        assert_int_equal(file_size(f->path), size);
    }
    weir__log_close(f->log);
    f->log = NULL;
    /* a stored line is corruption naming its line */
    assert_int_equal(wt_write_file(f->path, "{\"seq\":0,\"time\":1,\"type\":\"turn/start\","
                                            "\"data\":{\"rn\":1}}\n"
                                            "{\"seq\":1,\"time\":1,\"type\":\"turn/end\","
                                            "\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n"),
                     0);
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err),
                     WEIR_E_LOG_CORRUPT);
    snprintf(want, sizeof want, "%s:1: turn/start: data.turn must be an integer from 0 to 2147483647", f->path);
    assert_true(strncmp(err.text, want, strlen(want)) == 0); /* then "(and 1 more ...)" */
}

static void malformed_request_header_rejected(void **state) {
    fixture *f = *state;
    open_log(f);
    must_add(f->log, "turn/start", "{\"turn\":1}");
    static const struct {
        const char *data, *why;
    } cases[] = {
        {"{\"reason\":\"initial\"}", "data.header must be an object"},
        {"{\"header\":{},\"reason\":\"initial\"}", "data.header.config must be an object"},
        {"{\"header\":{\"config\":{},\"tools\":[]},\"reason\":\"change\"}",
         "data.header.tools must be a non-empty array when present"},
        {"{\"header\":{\"config\":{}},\"reason\":\"later\"}",
         "data.reason must be \"initial\", \"resume\", \"change\" or \"series\""},
        {"{\"header\":{\"config\":{}},\"reason\":\"series\",\"starts_series\":false}",
         "data.starts_series may only be true"},
    };
    long size = file_size(f->path);
    char want[4400];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        weir_error err;
        weir_error_clear(&err);
        assert_int_equal(add(f->log, "request/header", cases[i].data, &err), WEIR_E_LOG_REJECTED);
        snprintf(want, sizeof want, "session log %s: rejected request/header: %s", f->path,
                 cases[i].why);
        assert_string_equal(err.text, want);
        assert_int_equal(weir__log_count(f->log), 1);
        assert_int_equal(file_size(f->path), size);
        assert_false(weir__log_has_request_header(f->log));
    }
    must_add(f->log, "request/header",
             "{\"header\":{\"config\":{\"provider\":\"a\",\"model\":\"m\"}},"
             "\"reason\":\"series\",\"starts_series\":true}");
    weir__log_close(f->log);
    f->log = NULL;
    /* the same rule applies to a stored line */
    char *text = wt_read_file(f->path, NULL);
    char buf[8192];
    snprintf(buf, sizeof buf,
             "%s{\"seq\":2,\"time\":1,\"type\":\"request/header\",\"data\":{\"header\":{"
             "\"config\":{}},\"reason\":\"again\"}}\n"
             "{\"seq\":3,\"time\":1,\"type\":\"step/start\",\"data\":{\"turn\":1,\"step\":1}}\n",
             text);
    free(text);
    assert_int_equal(wt_write_file(f->path, buf), 0);
    weir_error err;
    assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err),
                     WEIR_E_LOG_CORRUPT);
    snprintf(want, sizeof want,
             "%s:3: request/header: data.reason must be \"initial\", \"resume\", \"change\" or "
             "\"series\"",
             f->path);
    assert_true(strncmp(err.text, want, strlen(want)) == 0);
}

typedef struct seen {
    weir__log *log;
    size_t seqs[8];
    size_t n;
} seen;

static void observe(const json_t *ev, void *ud) {
    seen *s = ud;
    s->seqs[s->n++] = (size_t)json_integer_value(json_object_get(ev, "seq"));
    if (s->n == 1) /* a re-entrant append is delivered after this call returns */
        must_add(s->log, "step/start", "{\"turn\":1,\"step\":1}");
}

static void observer_sees_events_in_seq_order(void **state) {
    fixture *f = *state;
    open_log(f);
    seen s = {.log = f->log};
    weir__log_set_observer(f->log, observe, &s);
    must_add(f->log, "turn/start", "{\"turn\":1}");
    must_add(f->log, "step/end", "{\"turn\":1,\"step\":1}");
    assert_int_equal(s.n, 3);
    assert_int_equal(s.seqs[0], 0);
    assert_int_equal(s.seqs[1], 1);
    assert_int_equal(s.seqs[2], 2);
}

/* The descriptor this process holds open on `path`, or -1. */
static int fd_of(const char *path) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int found = -1;
    char link[4200], target[4200];
    while (d && found < 0 && (e = readdir(d))) {
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            if (strcmp(target, path) == 0)
                found = atoi(e->d_name);
        }
    }
    if (d)
        closedir(d);
    return found;
}

static void failed_write_changes_nothing(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    long size = file_size(f->path);
    char *before = derived_text(f->log);
    char real[4200];
    assert_non_null(realpath(f->path, real));
    int fd = fd_of(real);
    assert_true(fd >= 0);
    /* Swap the log's descriptor for /dev/full: the next write fails. */
    int saved = dup(fd), full = open("/dev/full", O_WRONLY);
    assert_true(saved >= 0 && full >= 0);
    assert_int_equal(dup2(full, fd), fd);
    close(full);
    weir_error err;
    int rc = add(f->log, "user/message", USER("in-9", "lost"), &err);
    assert_int_equal(dup2(saved, fd), fd);
    close(saved);
    assert_int_equal(rc, WEIR_E_IO);
    assert_non_null(strstr(err.text, "write failed"));
    assert_int_equal(file_size(f->path), size);
    assert_int_equal(weir__log_count(f->log), 5);
    char *after = derived_text(f->log);
    assert_string_equal(after, before);
    must_add(f->log, "step/end", "{\"turn\":1,\"step\":1}");
    open_log(f);
    assert_int_equal(weir__log_count(f->log), 6);
    free(before);
    free(after);
}

enum { PER_THREAD = 200 };

typedef struct order {
    size_t next;   /* next seq the observer expects */
    bool in_order; /* every delivery had the expected seq */
} order;

static void check_order(const json_t *ev, void *ud) {
    order *o = ud; /* deliveries are serialized by the log */
    if ((size_t)json_integer_value(json_object_get(ev, "seq")) != o->next)
        o->in_order = false;
    o->next++;
}

static void *append_many(void *arg) {
    weir__log *log = arg;
    json_t *data = json_pack("{s:s}", "text", "x");
    for (int i = 0; i < PER_THREAD; i++)
        if (weir__log_append(log, "plugin/tick", data, NULL, NULL, WEIR_EVENT_IGNORABLE, NULL,
                             NULL))
            break;
    json_decref(data);
    return NULL;
}

static void concurrent_appends_stay_contiguous(void **state) {
    fixture *f = *state;
    open_log(f);
    order o = {0, true};
    weir__log_set_observer(f->log, check_order, &o);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, append_many, f->log), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(weir__log_count(f->log), 3 * PER_THREAD);
    assert_int_equal(o.next, 3 * PER_THREAD);
    assert_true(o.in_order);
    open_log(f); /* the file holds every line, seq 0..n-1 */
    assert_int_equal(weir__log_count(f->log), 3 * PER_THREAD);
}

static void alloc_failure_loop_append_and_derive(void **state) {
    fixture *f = *state;
    bool finished = false;
    for (long n = 1; !finished && n < 5000; n++) {
        unlink(f->path);
        weir__log *log = NULL;
        weir_error err;
        weir__alloc_fail_after(n);
        int rc = weir__log_open(f->path, WEIR__FSYNC_NONE, NULL, NULL, &log, &err);
        json_t *d = NULL;
        if (rc == WEIR_OK) {
            const char *types[] = {"turn/start", "step/start", "user/message", "request/header",
                                   "assistant/message"};
            const char *datas[] = {"{\"turn\":1}", "{\"turn\":1,\"step\":1}", USER("in-1", "hello"),
                                   HEADER, ASSISTANT("hi")};
            weir__alloc_fail_after(-1);
            json_t *parsed[5], *op = json_string("append");
            for (int i = 0; i < 5; i++)
                parsed[i] = json_loads(datas[i], 0, NULL);
            weir__alloc_fail_after(n);
            for (int i = 0; rc == WEIR_OK && i < 5; i++)
                rc = weir__log_append(log, types[i], parsed[i], i == 2 || i == 4 ? op : NULL, NULL,
                                      0, NULL, &err);
            if (rc == WEIR_OK) {
                d = weir__log_derive(log);
                finished = d != NULL;
            }
            weir__alloc_fail_after(-1);
            for (int i = 0; i < 5; i++)
                json_decref(parsed[i]);
            json_decref(op);
            if (rc != WEIR_OK)
                assert_true(rc == WEIR_E_NOMEM || rc == WEIR_E_LOG_REJECTED);
            /* memory and file agree */
            size_t count = weir__log_count(log);
            json_t *mem = weir__log_derive(log);
            weir__log *again = NULL;
            assert_int_equal(weir__log_open_readonly(f->path, &again, &err), WEIR_OK);
            assert_int_equal(weir__log_count(again), count);
            json_t *disk = weir__log_derive(again);
            assert_true(json_equal(mem, disk));
            if (d)
                assert_true(json_equal(d, disk));
            json_decref(mem);
            json_decref(disk);
            weir__log_close(again);
            weir__log_close(log);
        } else {
            weir__alloc_fail_after(-1);
            assert_int_equal(rc, WEIR_E_NOMEM);
            assert_null(log);
        }
        json_decref(d);
    }
    weir__alloc_fail_after(-1);
    assert_true(finished);
}

/* One allocation fails at a time (memory is there again afterwards) while a
 * log is opened, appended to and derived: each step either works or fails
 * cleanly, memory and file agree, and the log takes the rest of the events
 * afterwards as if nothing had happened. */
static void one_failed_allocation_append_and_derive(void **state) {
    fixture *f = *state;
    const char *types[] = {"turn/start", "step/start", "user/message", "request/header",
                           "assistant/message", "step/end"};
    const char *datas[] = {"{\"turn\":1}", "{\"turn\":1,\"step\":1}", USER("in-1", "hello"),
                           HEADER, ASSISTANT("hi"), "{\"turn\":1,\"step\":1}"};
    enum { N = sizeof types / sizeof *types };
    json_t *parsed[N], *op = json_string("append");
    for (int i = 0; i < N; i++)
        assert_non_null(parsed[i] = json_loads(datas[i], 0, NULL));
    long n, used = 0;
    int failures = 0;
    for (n = 1; n < 20000; n++) {
        unlink(f->path);
        weir__log *log = NULL;
        weir_error err;
        weir__alloc_fail_only(n);
        int rc = weir__log_open(f->path, WEIR__FSYNC_NONE, NULL, NULL, &log, &err);
        int i = 0;
        for (; rc == WEIR_OK && i < N; i++)
            rc = weir__log_append(log, types[i], parsed[i], i == 2 || i == 4 ? op : NULL, NULL, 0,
                                  NULL, &err);
        json_t *d = rc == WEIR_OK ? weir__log_derive(log) : NULL;
        used = weir__alloc_fail_after(-1);
        if (rc != WEIR_OK || !d)
            failures++;
        if (!log) {
            assert_int_equal(rc, WEIR_E_NOMEM);
        } else {
            if (rc != WEIR_OK) {
                assert_int_equal(rc, WEIR_E_NOMEM);
                /* the failed append changed nothing: the rest goes in */
                for (i--; i < N; i++)
                    if (weir__log_append(log, types[i], parsed[i], i == 2 || i == 4 ? op : NULL,
                                         NULL, 0, NULL, &err) != WEIR_OK)
                        fail_msg("n=%ld: append %s after a failed one: %s", n, types[i],
                                 err.text);
            }
            assert_int_equal(weir__log_count(log), N);
            json_t *mem = weir__log_derive(log);
            assert_non_null(mem);
            if (d && !json_equal(d, mem))
                fail_msg("n=%ld: a derive under failure differs from the log's", n);
            weir__log *again = NULL;
            assert_int_equal(weir__log_open_readonly(f->path, &again, &err), WEIR_OK);
            assert_int_equal(weir__log_count(again), N);
            json_t *disk = weir__log_derive(again);
            if (!json_equal(mem, disk))
                fail_msg("n=%ld: memory and file disagree", n);
            for (size_t k = 0; k < N; k++) {
                char *a = json_dumps(weir__log_event(log, k), JSON_COMPACT | JSON_PRESERVE_ORDER);
                char *b = json_dumps(weir__log_event(again, k), JSON_COMPACT | JSON_PRESERVE_ORDER);
                assert_non_null(a);
                assert_non_null(b);
                if (strcmp(a, b) != 0)
                    fail_msg("n=%ld: seq %zu in memory %s, on disk %s", n, k, a, b);
                free(a);
                free(b);
            }
            json_decref(mem);
            json_decref(disk);
            weir__log_close(again);
            weir__log_close(log);
        }
        json_decref(d);
        if (used < n)
            break;
    }
    assert_true(used < n);
    assert_true(failures > 0);
    for (int i = 0; i < N; i++)
        json_decref(parsed[i]);
    json_decref(op);
}

/* One writer per session (issue #8 item 1): a second writer in this process
 * is refused at once and names the holder; readers need no lock; the lock
 * goes with the writer. */
static void second_writer_refused(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    weir__log *again = NULL;
    weir_error err;
    weir_error_clear(&err);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_NONE, NULL, NULL, &again, &err),
                         WEIR_E_BUSY);
        assert_null(again);
    }
    char want[4400];
    snprintf(want, sizeof want, "session s is open for writing by this process (pid %ld) (%s)",
             (long)getpid(), f->path);
    assert_string_equal(err.text, want);
    assert_int_equal(weir__log_open_readonly(f->path, &again, &err), WEIR_OK);
    assert_int_equal(weir__log_count(again), 5);
    weir__log_close(again);
    assert_int_equal(weir__log_count(f->log), 5); /* the refusals changed nothing */
    must_add(f->log, "step/end", "{\"turn\":1,\"step\":1}");
    open_log(f); /* closes the writer first: its lock goes with it */
    assert_int_equal(weir__log_count(f->log), 6);
}

/* A file whose first line is not a log event is not weir's: refused by
 * name, never truncated or rewritten; a torn first event (a crash while
 * writing seq 0) is still a torn tail. */
static void foreign_file_refused_untouched(void **state) {
    fixture *f = *state;
    open_log(f); /* creates the parents */
    weir__log_close(f->log);
    f->log = NULL;
    const char *foreign[] = {"my notes, one line", "{\"name\":\"x\"}\n", "a\nb\n",
                             "{\"seq\":0,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n"};
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++) {
        assert_int_equal(wt_write_file(f->path, foreign[i]), 0);
        weir_error err;
        weir_error_clear(&err);
        assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err),
                         WEIR_E_LOG_CORRUPT);
        assert_non_null(strstr(err.text, f->path));
        assert_non_null(strstr(err.text, "not a weir session log"));
        char *text = wt_read_file(f->path, NULL);
        assert_string_equal(text, foreign[i]);
        free(text);
        json_t *report = NULL;
        assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
        assert_true(json_is_false(json_object_get(report, "ok")));
        json_decref(report);
    }
    assert_int_equal(wt_write_file(f->path, "{\"seq\":0,\"ti"), 0);
    char captured[4400];
    weir_error err;
    assert_int_equal(open_capturing(f, captured, sizeof captured, &err), WEIR_OK);
    assert_int_equal(file_size(f->path), 0);
}

/* Logs are private (item 6): new directories 0700, logs 0600, whatever
 * the umask lets through. */
static void new_logs_are_private(void **state) {
    fixture *f = *state;
    mode_t old = umask(022);
    open_log(f);
    umask(old);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/a/b", f->dir);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(dir, sizeof dir, "%s/a", f->dir);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
}

/* One reader (item 7): what check rejects, open rejects, and the other way
 * round; only regular files are read; a line over the cap is never
 * written. */
static void check_and_open_agree(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    weir__log_close(f->log);
    f->log = NULL;
    char *text = wt_read_file(f->path, NULL);
    char *at = strstr(text, "\"time\":");
    assert_non_null(at);
    char buf[8192];
    snprintf(buf, sizeof buf, "%.*s\"time\":\"noon\",%s", (int)(at - text), text,
             strchr(at, ',') + 1);
    free(text);
    assert_int_equal(wt_write_file(f->path, buf), 0);
    weir_error err;
    json_t *report = NULL;
    assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
    assert_true(json_is_false(json_object_get(report, "ok")));
    json_decref(report);
    assert_int_equal(weir__log_open(f->path, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err),
                     WEIR_E_LOG_CORRUPT);
    assert_non_null(strstr(err.text, "time must be an integer"));
    json_t *m = NULL;
    assert_int_equal(weir_log_derive(f->path, &m, &err), WEIR_E_LOG_CORRUPT);
    assert_null(m);
    /* not regular files */
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo.jsonl", f->dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(weir_log_check(fifo, &report, &err), WEIR_E_IO);
    assert_non_null(strstr(err.text, "not a regular file"));
    assert_int_equal(weir__log_open(fifo, WEIR__FSYNC_NONE, NULL, NULL, &f->log, &err), WEIR_E_IO);
    assert_int_equal(weir__log_open_readonly("/dev/zero", &f->log, &err), WEIR_E_IO);
    assert_int_equal(weir_log_check("/dev/zero", &report, &err), WEIR_E_IO);
    assert_null(f->log);
}

static void line_over_the_cap_is_rejected(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    size_t n = WEIR__LOG_LINE_MAX;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, 'x', n);
    big[n] = '\0';
    json_t *data = json_pack("{s:i, s:s}", "turn", 1, "blob", big);
    free(big);
    assert_non_null(data);
    long size = file_size(f->path);
    weir_error err;
    assert_int_equal(weir__log_append(f->log, "plugin/blob", data, NULL, NULL, WEIR_EVENT_IGNORABLE,
                                      NULL, &err),
                     WEIR_E_LOG_REJECTED);
    json_decref(data);
    assert_non_null(strstr(err.text, "over the 64 MiB cap"));
    assert_int_equal(file_size(f->path), size);
    assert_int_equal(weir__log_count(f->log), 5);
}

/* A fresh log of one closed turn (seed, step/end, turn/end: 7 envelopes),
 * with a deep copy of each in copies[] (the caller releases them). */
static size_t one_turn(fixture *f, json_t *copies[7]) {
    open_log(f);
    seed(f->log);
    must_add(f->log, "step/end", "{\"turn\":1,\"step\":1}");
    must_add(f->log, "turn/end", "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}");
    size_t n = weir__log_count(f->log);
    assert_int_equal(n, 7);
    for (size_t i = 0; i < n; i++)
        assert_non_null(copies[i] = json_deep_copy(weir__log_event(f->log, i)));
    return n;
}

/* A step end's trim releases the appended envelopes that can be read back
 * (not the request header; the surface's user message too, which the
 * surface keeps) one trim later
 * (the newest step's wait) and reads them back, on demand, as the same
 * JSON; derive and the file are unchanged, and a later trim releases what
 * was read back again.  A turn end's (idle) trim leaves the newest step's. */
static void trim_releases_envelopes_and_reads_them_back(void **state) {
    fixture *f = *state;
    json_t *copies[7];
    size_t n = one_turn(f, copies);
    char *before = derived_text(f->log);
    /* held across the trim: the log's own reference goes, these stay */
    json_t *turn_start = json_incref((json_t *)(uintptr_t)weir__log_event(f->log, 0));
    json_t *assistant = json_incref((json_t *)(uintptr_t)weir__log_event(f->log, 4));
    json_t *header = json_incref((json_t *)(uintptr_t)weir__log_event(f->log, 3));
    json_t *user = json_incref((json_t *)(uintptr_t)weir__log_event(f->log, 2));
    weir__log_trim(f->log, false); /* the newest step's envelopes wait for the next trim */
    assert_ptr_equal(weir__log_event(f->log, 0), turn_start);
    weir__log_trim(f->log, true); /* a turn's end does not release them either */
    assert_ptr_equal(weir__log_event(f->log, 0), turn_start);
    assert_ptr_equal(weir__log_event(f->log, 4), assistant);
    for (int round = 0; round < 2; round++) {
        weir__log_trim(f->log, false);
        assert_ptr_not_equal(weir__log_event(f->log, 0), turn_start); /* read back */
        assert_ptr_not_equal(weir__log_event(f->log, 4), assistant);
        assert_ptr_equal(weir__log_event(f->log, 3), header); /* kept: the fold borrows it */
        assert_ptr_not_equal(weir__log_event(f->log, 2), user); /* read back: the */
        assert_ptr_equal(weir__surface_event(weir__log_surface(f->log), 0), user); /* surface's */
        for (size_t i = 0; i < n; i++) {
            json_t *ev = weir__log_event_ref(f->log, i);
            assert_true(json_equal(ev, copies[i]));
            json_decref(ev);
        }
        char *after = derived_text(f->log);
        assert_string_equal(after, before);
        free(after);
    }
    /* appends go on after a trim, and the file reads back the same */
    must_add(f->log, "turn/start", "{\"turn\":2}");
    open_log(f);
    assert_int_equal(weir__log_count(f->log), n + 1);
    for (size_t i = 0; i < n; i++) {
        assert_true(json_equal(weir__log_event(f->log, i), copies[i]));
        json_decref(copies[i]);
    }
    char *reopened = derived_text(f->log);
    assert_string_equal(reopened, before);
    free(reopened);
    free(before);
    json_decref(turn_start);
    json_decref(assistant);
    json_decref(header);
    json_decref(user);
}

/* The open keeps the lines of what it reads, not the trees: every envelope
 * but the request header is read back when asked (weir__log_event holds
 * it until the next trim; weir__log_event_ref hands a copy of its own each
 * time, the log holding none), the surface keeps the messages, and the
 * derivation and the envelopes are those of the file. */
static void open_releases_what_it_reads(void **state) {
    fixture *f = *state;
    json_t *copies[7];
    size_t n = one_turn(f, copies);
    char *before = derived_text(f->log);
    open_log(f);
    assert_int_equal(weir__log_count(f->log), n);
    const json_t *header = weir__log_event(f->log, 3);
    assert_ptr_equal(weir__log_request_header(f->log),
                     json_object_get(json_object_get(header, "data"), "header"));
    for (size_t i = 0; i < n; i++) {
        json_t *a = weir__log_event_ref(f->log, i), *b = weir__log_event_ref(f->log, i);
        assert_true(json_equal(a, copies[i]));
        if (i == 3) /* the header is kept: the fold borrows it */
            assert_ptr_equal(a, b);
        else
            assert_ptr_not_equal(a, b); /* read back for each caller */
        json_decref(a);
        json_decref(b);
    }
    const json_t *turn_start = weir__log_event(f->log, 0); /* read back and held */
    assert_ptr_equal(weir__log_event(f->log, 0), turn_start);
    assert_true(json_equal(turn_start, copies[0]));
    /* the user message is the surface's node, read back by the log */
    const json_t *node = weir__surface_event(weir__log_surface(f->log), 0);
    assert_ptr_not_equal(weir__log_event(f->log, 2), node);
    assert_true(json_equal(node, copies[2]));
    char *after = derived_text(f->log);
    assert_string_equal(after, before);
    free(after);
    free(before);
    for (size_t i = 0; i < n; i++)
        json_decref(copies[i]);
}

/* An envelope lent (what agent_event_peek hands a plugin) stays the same
 * object through the step trims until the turn ends; a reference
 * (agent_event_ref) stays valid while held although the log releases its
 * own; the turn's end releases the lent envelopes behind the window and
 * keeps the newest step's. */
static void a_lent_envelope_outlives_step_trims_until_the_turn_ends(void **state) {
    fixture *f = *state;
    open_log(f);
    seed(f->log);
    must_add(f->log, "step/end", "{\"turn\":1,\"step\":1}");
    weir__log_trim(f->log, false); /* step 1 ended: its envelopes wait */
    assert_null(weir__log_event_lend(NULL, 0));
    assert_null(weir__log_event_lend(f->log, 100));
    const json_t *lent = weir__log_event_lend(f->log, 4); /* the assistant message */
    assert_non_null(lent);
    assert_ptr_equal(weir__log_event_lend(f->log, 4), lent); /* lent once, the same */
    json_t *held = json_incref((json_t *)(uintptr_t)lent); /* to compare after the release */
    json_t *ref = weir__log_event_ref(f->log, 0);       /* turn/start */
    json_t *copy0 = json_deep_copy(ref), *copy4 = json_deep_copy(lent);
    must_add(f->log, "step/start", "{\"turn\":1,\"step\":2}");
    must_add(f->log, "assistant/message", ASSISTANT("again"));
    must_add(f->log, "step/end", "{\"turn\":1,\"step\":2}");
    const json_t *newest = weir__log_event(f->log, 7);
    weir__log_trim(f->log, false); /* step 2 ended: step 1's go, but the lent one */
    assert_ptr_equal(weir__log_event(f->log, 4), lent);
    assert_true(json_equal(ref, copy0)); /* the reference outlives the release */
    const json_t *back = weir__log_event(f->log, 0);
    assert_ptr_not_equal(back, ref); /* read back from its line */
    assert_true(json_equal(back, copy0));
    assert_ptr_equal(weir__log_event(f->log, 7), newest);
    weir__log_trim(f->log, true); /* the turn ended: the lent envelope goes too */
    const json_t *again = weir__log_event(f->log, 4);
    assert_ptr_not_equal(again, held);
    assert_true(json_equal(again, copy4));
    assert_ptr_equal(weir__log_event(f->log, 7), newest); /* the newest step's stay */
    /* lent again in the next turn, then released by the step trims as usual */
    assert_ptr_equal(weir__log_event_lend(f->log, 4), again);
    weir__log_trim(f->log, false);
    assert_ptr_equal(weir__log_event(f->log, 4), again);
    char *before = derived_text(f->log);
    open_log(f); /* the file is the same */
    char *after = derived_text(f->log);
    assert_string_equal(after, before);
    free(before);
    free(after);
    json_decref(held);
    json_decref(ref);
    json_decref(copy0);
    json_decref(copy4);
}


/* One turn `k` with usage: in 10, out 3, cache read k, $0.25 (priced) or none. */
static void usage_turn(weir__log *log, int k, bool priced) {
    char buf[600];
    snprintf(buf, sizeof buf, "{\"turn\":%d}", k);
    must_add(log, "turn/start", buf);
    snprintf(buf, sizeof buf, "{\"turn\":%d,\"step\":1}", k);
    must_add(log, "step/start", buf);
    snprintf(buf, sizeof buf,
             "{\"turn\":%d,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":"
             "\"text\",\"text\":\"hello %d\"}],\"id\":\"in-%d\",\"source\":{\"kind\":\"human\"}}}",
             k, k, k);
    must_add(log, "user/message", buf);
    if (k == 1)
        must_add(log, "request/header", HEADER);
    snprintf(buf, sizeof buf,
             "{\"turn\":%d,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":"
             "\"text\",\"text\":\"hi\"}]},\"stream\":[],\"usage\":{\"input_tokens\":10,"
             "\"output_tokens\":3,\"cache_read_tokens\":%d}%s}",
             k, k, priced ? ",\"cost\":{\"usd\":0.25}" : "");
    must_add(log, "assistant/message", buf);
    snprintf(buf, sizeof buf, "{\"turn\":%d,\"step\":1}", k);
    must_add(log, "step/end", buf);
    snprintf(buf, sizeof buf, "{\"turn\":%d,\"reason\":{\"kind\":\"completed\"}}", k);
    must_add(log, "turn/end", buf);
}

static json_t *summary_of(const char *path) {
    json_t *sum = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir_log_summary(path, &sum, &err) != WEIR_OK)
        fail_msg("weir_log_summary: %s", err.text);
    return sum;
}

static json_int_t int_at(const json_t *o, const char *a, const char *b) {
    const json_t *v = json_object_get(o, a);
    return json_integer_value(b ? json_object_get(v, b) : v);
}

/* Issue #34: between turns, once session.checkpoint_bytes of log followed
 * the last one, the log writes a log/checkpoint of what it adds up to; the
 * reader checks each against its own fold (a checkpoint that does not add
 * up is an error, and the log is refused), a reopened writer goes on
 * counting, and weir_log_summary reads a log from its head and its last
 * checkpoint to the same figures as a fold of the whole log. */
static void checkpoints_add_up_and_summarize(void **state) {
    fixture *f = *state;
    open_log(f);
    weir__log_set_checkpoint_every(f->log, 1); /* after every turn */
    weir_error err;
    for (int k = 1; k <= 3; k++) {
        usage_turn(f->log, k, true);
        assert_int_equal(weir__log_tally_checkpoint(f->log, &err), WEIR_OK);
        assert_int_equal(weir__log_tally_checkpoint(f->log, &err), WEIR_OK); /* not due again */
    }
    const json_t *cp = weir__log_event(f->log, weir__log_count(f->log) - 1);
    assert_string_equal(json_string_value(json_object_get(cp, "type")), "log/checkpoint");
    assert_true(json_is_true(json_object_get(cp, "ignorable")));
    json_t *want = json_loads("{\"events\":24,\"turns\":3,\"usage\":{\"input_tokens\":30,"
                              "\"cache_read_tokens\":6,\"cache_write_tokens\":0,"
                              "\"output_tokens\":9},\"cost\":{\"usd\":0.75}}",
                              0, NULL);
    /* what it adds up to, and where a resume starts: the byte offset of its
     * line, the last turn, the surface as runs and the kept events */
    json_t *data = json_deep_copy(json_object_get(cp, "data"));
    char *file = wt_read_file(f->path, NULL);
    const char *cp_line = file ? strstr(file, "{\"seq\":24,") : NULL;
    assert_non_null(cp_line);
    assert_int_equal(int_at(data, "at", NULL), (json_int_t)(cp_line - file));
    free(file);
    assert_int_equal(int_at(data, "last_turn", NULL), 3);
    assert_int_equal(int_at(data, "surface", "applied"), 6);
    json_t *runs = json_object_get(json_object_get(data, "surface"), "runs");
    assert_int_equal(json_array_size(runs), 1); /* nothing was shadowed */
    assert_int_equal(json_integer_value(json_array_get(json_array_get(runs, 0), 2)), 0);
    /* the request header and the three user messages */
    assert_int_equal(json_array_size(json_object_get(data, "keep")), 4);
    json_object_del(data, "at");
    json_object_del(data, "last_turn");
    json_object_del(data, "surface");
    json_object_del(data, "keep");
    if (!json_equal(data, want))
        fail_msg("checkpoint: %s", json_dumps(json_object_get(cp, "data"), JSON_COMPACT));
    json_decref(data);
    json_decref(want);
    /* a reopened writer goes on from what it read; an unpriced call drops the cost */
    open_log(f);
    weir__log_set_checkpoint_every(f->log, 1);
    usage_turn(f->log, 4, false);
    assert_int_equal(weir__log_tally_checkpoint(f->log, &err), WEIR_OK);
    weir__log_set_checkpoint_every(f->log, (size_t)1 << 30);
    usage_turn(f->log, 5, true);
    assert_int_equal(weir__log_tally_checkpoint(f->log, &err), WEIR_OK); /* not due */
    must_add(f->log, "turn/start", "{\"turn\":6}");
    json_t *report = NULL;
    assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
    assert_true(json_is_true(json_object_get(report, "ok")));
    json_decref(report);
    /* the summary: from the last checkpoint (turn 4's), then turn 5 and 6's start */
    json_t *sum = summary_of(f->path);
    assert_int_equal(int_at(sum, "events", NULL), (json_int_t)weir__log_count(f->log));
    assert_int_equal(int_at(sum, "turns", NULL), 6);
    assert_true(json_is_true(json_object_get(sum, "open")));
    assert_int_equal(int_at(sum, "usage", "input_tokens"), 50);
    assert_int_equal(int_at(sum, "usage", "cache_read_tokens"), 15);
    assert_int_equal(int_at(sum, "usage", "output_tokens"), 15);
    assert_null(json_object_get(sum, "cost")); /* turn 4 had no price */
    assert_string_equal(json_string_value(json_object_get(sum, "first_prompt")), "hello 1");
    assert_true(json_is_integer(json_object_get(sum, "checkpoint")));
    json_decref(sum);
    weir__log_close(f->log);
    f->log = NULL;
    /* the same log without its checkpoints is folded from its start: the
     * same figures, and no checkpoint named */
    char *text = wt_read_file(f->path, NULL);
    assert_non_null(text);
    char *plain = malloc(strlen(text) + 1), *w = plain;
    size_t seq = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        json_t *ev = json_loadb(p, (size_t)(nl - p), 0, NULL);
        if (strcmp(json_string_value(json_object_get(ev, "type")), "log/checkpoint") != 0) {
            json_object_set_new(ev, "seq", json_integer((json_int_t)seq++));
            char *line = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
            w += sprintf(w, "%s\n", line);
            free(line);
        }
        json_decref(ev);
    }
    assert_int_equal(wt_write_file(f->path, plain), 0);
    sum = summary_of(f->path);
    assert_int_equal(int_at(sum, "events", NULL), (json_int_t)seq);
    assert_int_equal(int_at(sum, "turns", NULL), 6);
    assert_int_equal(int_at(sum, "usage", "input_tokens"), 50);
    assert_true(json_is_null(json_object_get(sum, "checkpoint")));
    json_decref(sum);
    /* an earlier checkpoint that does not add up: the check names it; an
     * open starts from the last one, which holds, and never reads it */
    char *bad = strdup(text), *at = strstr(bad, "\"turns\":2");
    assert_non_null(at);
    at[8] = '7';
    assert_int_equal(wt_write_file(f->path, bad), 0);
    assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
    assert_false(json_is_true(json_object_get(report, "ok")));
    const char *e = json_string_value(json_array_get(json_object_get(report, "errors"), 0));
    assert_non_null(strstr(e, "log/checkpoint does not add up: it says"));
    json_decref(report);
    weir__log *ro = NULL;
    assert_int_equal(weir__log_open_readonly(f->path, &ro, &err), WEIR_OK);
    assert_true(weir__log_base(ro) > 0);
    weir__log_close(ro);
    ro = NULL;
    free(bad);
    /* the last one names a run that does not start with a surface event:
     * the open reads the whole log instead, and its one reader refuses it
     * (an open trusts the last checkpoint's counts: `weir log --check`
     * verifies them) */
    bad = strdup(text);
    at = NULL;
    for (char *p = strstr(bad, "\"runs\":[["); p; p = strstr(p + 1, "\"runs\":[["))
        at = p;
    assert_non_null(at);
    at += strlen("\"runs\":[[");
    size_t digits = strspn(at, "0123456789");
    assert_true(digits >= 1);
    memset(at, ' ', digits);
    at[digits - 1] = '0'; /* seq 0: the turn/start */
    assert_int_equal(wt_write_file(f->path, bad), 0);
    assert_int_equal(weir__log_open_readonly(f->path, &ro, &err), WEIR_E_LOG_CORRUPT);
    assert_non_null(strstr(err.text, "log/checkpoint surface is"));
    free(bad);
    free(plain);
    free(text);
}

/* Turn `k`'s compaction: the surface nodes from the second on, but the
 * last two, are replaced by one summary (a user/message with their seqs as
 * source_seqs), as compaction-basic does. */
static void compaction_turn(weir__log *log, int k) {
    char buf[600];
    snprintf(buf, sizeof buf, "{\"turn\":%d}", k);
    must_add(log, "turn/start", buf);
    snprintf(buf, sizeof buf, "{\"turn\":%d,\"step\":1}", k);
    must_add(log, "step/start", buf);
    const weir__surface *sf = weir__log_surface(log);
    size_t n = weir__surface_len(sf);
    assert_true(n >= 4);
    json_t *src = json_array();
    for (size_t i = 1; i + 2 < n; i++)
        json_array_append_new(src, json_integer((json_int_t)weir__surface_node(sf, i)));
    json_t *op = json_pack("{s:s,s:I,s:I}", "op", "replace", "start_seq",
                           (json_int_t)weir__surface_node(sf, 1), "end_seq",
                           (json_int_t)weir__surface_node(sf, n - 3));
    snprintf(buf, sizeof buf,
             "{\"turn\":%d,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":"
             "\"text\",\"text\":\"summary %d\"}]}}",
             k, k);
    json_t *data = json_loads(buf, 0, NULL);
    weir_error err;
    if (weir__log_append(log, "user/message", data, op, src, 0, NULL, &err) != WEIR_OK)
        fail_msg("the compaction's replace: %s", err.text);
    json_decref(data);
    json_decref(op);
    json_decref(src);
    snprintf(buf, sizeof buf, "{\"turn\":%d,\"step\":1}", k);
    must_add(log, "step/end", buf);
    snprintf(buf, sizeof buf, "{\"turn\":%d,\"reason\":{\"kind\":\"completed\"}}", k);
    must_add(log, "turn/end", buf);
}

/* The JSON of line `seq` of the log file at `path` (a new reference). */
static json_t *line_of(const char *path, size_t seq) {
    char *text = wt_read_file(path, NULL);
    assert_non_null(text);
    char *p = text;
    for (size_t i = 0; i < seq && p; i++) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    assert_non_null(p);
    json_t *ev = json_loadb(p, (size_t)(strchr(p, '\n') - p), 0, NULL);
    free(text);
    assert_non_null(ev);
    return ev;
}

/* Issue #34: an open resumes from the last log/checkpoint.  It reads the
 * surface the checkpoint names (a compaction's summary and what followed),
 * the events it keeps and the tail, not the history a compaction shadowed:
 * the same derived history, count and folds as a read of every line; an
 * older envelope it did not read comes back from the file when asked; and
 * the checkpoints the resumed writer adds are those a fold of the whole log
 * gives (`weir log --check` verifies each). */
static void resume_from_checkpoint_holds_the_surface_not_the_history(void **state) {
    fixture *f = *state;
    open_log(f);
    weir__log_set_checkpoint_every(f->log, 1);
    weir_error err;
    for (int k = 1; k <= 7; k++) {
        if (k == 5)
            compaction_turn(f->log, k);
        else
            usage_turn(f->log, k, true);
        if (k == 7) /* the tail: a turn after the last checkpoint */
            break;
        assert_int_equal(weir__log_tally_checkpoint(f->log, &err), WEIR_OK);
    }
    size_t count = weir__log_count(f->log);
    int last_turn = weir__log_last_turn(f->log);
    char *before = derived_text(f->log);
    size_t cp = count - 7; /* turn 7's 6 events follow the checkpoint */
    assert_string_equal(weir__json_str(weir__log_event(f->log, cp), "type", ""),
                        "log/checkpoint");
    open_log(f);
    assert_int_equal(weir__log_base(f->log), cp);
    assert_int_equal(weir__log_count(f->log), count);
    assert_int_equal(weir__log_last_turn(f->log), last_turn);
    assert_true(weir__log_has_request_header(f->log));
    assert_false(weir__log_turn_open(f->log));
    char *after = derived_text(f->log);
    assert_string_equal(after, before);
    free(after);
    /* turn 2's step/start was not read: it comes back from the file */
    size_t old = 0;
    json_t *want = NULL;
    for (;; old++) {
        want = line_of(f->path, old);
        if (!strcmp(weir__json_str(want, "type", ""), "step/start") &&
            weir__json_int(json_object_get(want, "data"), "turn", 0) == 2)
            break;
        json_decref(want);
    }
    assert_false(weir__log_held(f->log, old));
    assert_true(json_equal(weir__log_event(f->log, old), want));
    json_t *ref = weir__log_event_ref(f->log, old);
    assert_true(json_equal(ref, want));
    json_decref(ref);
    json_decref(want);
    weir__log_trim(f->log, false);
    weir__log_trim(f->log, true); /* the read-back copy is released */
    assert_false(weir__log_held(f->log, old));
    /* the resumed writer goes on; its checkpoints are the whole log's */
    weir__log_set_checkpoint_every(f->log, 1);
    assert_int_equal(weir__log_tally_checkpoint(f->log, &err), WEIR_OK);
    compaction_turn(f->log, 8);
    assert_int_equal(weir__log_tally_checkpoint(f->log, &err), WEIR_OK);
    usage_turn(f->log, 9, false);
    assert_int_equal(weir__log_tally_checkpoint(f->log, &err), WEIR_OK);
    before = (free(before), derived_text(f->log));
    weir__log_close(f->log);
    f->log = NULL;
    json_t *report = NULL;
    assert_int_equal(weir_log_check(f->path, &report, &err), WEIR_OK);
    if (!json_is_true(json_object_get(report, "ok")))
        fail_msg("the resumed log: %s", json_dumps(report, JSON_COMPACT));
    json_decref(report);
    json_t *whole = NULL;
    assert_int_equal(weir_log_derive(f->path, &whole, &err), WEIR_OK);
    char *whole_text = json_dumps(whole, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(whole);
    open_log(f);
    assert_true(weir__log_base(f->log) > cp);
    after = derived_text(f->log);
    assert_string_equal(after, before);
    assert_string_equal(after, whole_text);
    free(after);
    free(before);
    free(whole_text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(trim_releases_envelopes_and_reads_them_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(open_releases_what_it_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(a_lent_envelope_outlives_step_trims_until_the_turn_ends,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(append_assigns_contiguous_seq, setup, teardown),
        cmocka_unit_test_setup_teardown(rejected_append_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(nesting_breaks_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(step_ends_only_with_every_call_answered, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unknown_type_refused_unless_ignorable, setup, teardown),
        cmocka_unit_test_setup_teardown(handover_keeps_sole_data, setup, teardown),
        cmocka_unit_test(deferred_sync_point_paid_once),
        cmocka_unit_test_setup_teardown(resume_from_checkpoint_holds_the_surface_not_the_history,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(fsync_policy_parsing, setup, teardown),
        cmocka_unit_test_setup_teardown(torn_tail_dropped_with_warning, setup, teardown),
        cmocka_unit_test_setup_teardown(mid_file_corruption_names_line, setup, teardown),
        cmocka_unit_test_setup_teardown(reopen_gives_same_derived_history, setup, teardown),
        cmocka_unit_test_setup_teardown(repair_appends_closers, setup, teardown),
        cmocka_unit_test_setup_teardown(repair_survives_one_failed_allocation, setup, teardown),
        cmocka_unit_test_setup_teardown(core_events_without_their_fields_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_request_header_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(repair_answers_tool_calls_never_logged, setup, teardown),
        cmocka_unit_test_setup_teardown(request_header_fold_keeps_latest, setup, teardown),
        cmocka_unit_test_setup_teardown(observer_sees_events_in_seq_order, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_write_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_appends_stay_contiguous, setup, teardown),
        cmocka_unit_test_setup_teardown(alloc_failure_loop_append_and_derive, setup, teardown),
        cmocka_unit_test_setup_teardown(one_failed_allocation_append_and_derive, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(second_writer_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(foreign_file_refused_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(new_logs_are_private, setup, teardown),
        cmocka_unit_test_setup_teardown(check_and_open_agree, setup, teardown),
        cmocka_unit_test_setup_teardown(line_over_the_cap_is_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(idle_trim_frees_the_line_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(checkpoints_add_up_and_summarize, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
