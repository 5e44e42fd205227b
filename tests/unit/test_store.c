/*
 * tests/unit/test_store.c - the session store interface (docs/stores.md):
 * the same cases against the file store and the memory store, through the
 * log that uses them and through the vtable: append, read from a seq,
 * reopen, a torn tail dropped at open, a second writer refused, list and
 * probe, a fenced writer (WEIR_E_LEASE_LOST) that appends no more, and
 * crash repair's closers stored as one batch (one store append).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "session_log.h"
#include "store.h"
#include "host_int.h"
#include "surface.h"
#include "testutil.h"

typedef struct fixture {
    const char *name; /* "file" or "memory" */
    weir__store_ref store;
    char *dir;
    char id[64];
    char *path;
} fixture;

static int serial;

static int setup_kind(void **state, const char *name) {
    fixture *f = calloc(1, sizeof *f);
    f->name = name;
    assert_int_equal(weir__store_lookup(NULL, name, &f->store), WEIR_OK);
    f->dir = wt_tmpdir("store");
    assert_non_null(f->dir);
    snprintf(f->id, sizeof f->id, "s%d-%d", (int)getpid(), ++serial);
    f->path = malloc(strlen(f->dir) + 96);
    sprintf(f->path, "%s/%s.jsonl", f->dir, f->id);
    *state = f;
    return 0;
}
static int setup_file(void **state) { return setup_kind(state, "file"); }
static int setup_memory(void **state) { return setup_kind(state, "memory"); }

static int teardown(void **state) {
    fixture *f = *state;
    wt_rmtree(f->dir);
    free(f->dir);
    free(f->path);
    free(f);
    return 0;
}

static weir__log *open_rw(fixture *f, weir_error *err) {
    weir__log *log = NULL;
    int rc = weir__log_open_store(f->name, f->store, f->id, f->path, false, WEIR__FSYNC_STEP, NULL,
                                  NULL, &log, err);
    if (rc != WEIR_OK)
        return NULL;
    return log;
}

static void must_add(weir__log *log, const char *type, const char *data_json) {
    weir_error err;
    weir_error_clear(&err);
    json_t *data = json_loads(data_json, 0, NULL);
    assert_non_null(data);
    json_t *op = weir__is_surface_type(type) ? json_string("append") : NULL;
    int rc = weir__log_append(log, type, data, op, NULL, 0, NULL, &err);
    json_decref(op);
    json_decref(data);
    if (rc != WEIR_OK)
        fail_msg("append %s: %s", type, err.text);
}

#define USER(text)                                                                                 \
    "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\","       \
    "\"text\":\"" text "\"}],\"id\":\"in-1\",\"source\":{\"kind\":\"human\"}}}"

static void seed(weir__log *log) {
    must_add(log, "turn/start", "{\"turn\":1}");
    must_add(log, "step/start", "{\"turn\":1,\"step\":1}");
    must_add(log, "user/message", USER("hello"));
}

/* The stored bytes of the session from `from` on (through the vtable, read-only). */
static char *stored(fixture *f, uint64_t from, size_t *len) {
    void *h = NULL;
    weir_error err;
    assert_int_equal(f->store.vt->open(f->store.self, f->id, f->path, WEIR_STORE_READONLY, &h,
                                       NULL, &err),
                     WEIR_OK);
    char *buf = NULL;
    assert_int_equal(f->store.vt->read(f->store.self, h, from, &buf, len, &err), WEIR_OK);
    char *copy = strndup(buf, *len);
    f->store.vt->buffer_free(f->store.self, buf);
    f->store.vt->close(f->store.self, h);
    return copy;
}

static void append_read_reopen(void **state) {
    fixture *f = *state;
    weir_error err;
    weir__log *log = open_rw(f, &err);
    assert_non_null(log);
    seed(log);
    assert_int_equal(weir__log_sync(log, &err), WEIR_OK);
    char *text = json_dumps(weir__log_event(log, 2), JSON_COMPACT | JSON_PRESERVE_ORDER);
    weir__log_close(log);

    size_t len;
    char *all = stored(f, 0, &len);
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += all[i] == '\n';
    assert_int_equal(lines, 3);
    assert_int_equal(all[len - 1], '\n');
    assert_non_null(strstr(all, "{\"seq\":0,"));
    free(all);
    char *tail = stored(f, 2, &len); /* lines from seq 2: the user message only */
    assert_int_equal(strncmp(tail, "{\"seq\":2,", 9), 0);
    assert_memory_equal(tail, text, strlen(text));
    assert_int_equal(len, strlen(text) + 1);
    free(tail);

    log = open_rw(f, &err);
    assert_non_null(log);
    assert_int_equal(weir__log_count(log), 3);
    char *again = json_dumps(weir__log_event(log, 2), JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(again, text);
    must_add(log, "step/end", "{\"turn\":1,\"step\":1}");
    assert_int_equal(weir__log_count(log), 4);
    weir__log_close(log);
    free(again);
    free(text);
}

static void torn_tail_is_dropped(void **state) {
    fixture *f = *state;
    weir_error err;
    weir__log *log = open_rw(f, &err);
    assert_non_null(log);
    seed(log);
    weir__log_close(log);
    /* a crash mid-write: half a line at the end */
    void *h = NULL;
    assert_int_equal(f->store.vt->open(f->store.self, f->id, f->path, 0, &h, NULL, &err), WEIR_OK);
    const char torn[] = "{\"seq\":3,\"time\":1,\"ty";
    assert_int_equal(f->store.vt->append(f->store.self, h, 0, 3, 0, torn, sizeof torn - 1, 0, &err),
                     WEIR_OK);
    f->store.vt->close(f->store.self, h);

    /* a reader sees the consistent prefix and leaves the tail */
    weir__log *ro = NULL;
    assert_int_equal(weir__log_open_store(f->name, f->store, f->id, f->path, true,
                                          WEIR__FSYNC_NONE, NULL, NULL, &ro, &err),
                     WEIR_OK);
    assert_int_equal(weir__log_count(ro), 3);
    weir__log_close(ro);
    size_t len;
    char *before = stored(f, 0, &len);
    assert_non_null(strstr(before, torn));
    free(before);

    /* the writer drops it */
    log = open_rw(f, &err);
    assert_non_null(log);
    assert_int_equal(weir__log_count(log), 3);
    must_add(log, "step/end", "{\"turn\":1,\"step\":1}");
    weir__log_close(log);
    char *after = stored(f, 0, &len);
    assert_null(strstr(after, torn));
    assert_non_null(strstr(after, "{\"seq\":3,"));
    assert_int_equal(after[len - 1], '\n');
    free(after);
}

static void second_writer_is_refused(void **state) {
    fixture *f = *state;
    weir_error err;
    weir__log *log = open_rw(f, &err);
    assert_non_null(log);
    seed(log);
    weir_error_clear(&err);
    assert_null(open_rw(f, &err));
    assert_int_equal(err.code, WEIR_E_BUSY);
    char want[128];
    snprintf(want, sizeof want, "session %s is open for writing by this process", f->id);
    assert_non_null(strstr(err.text, want));

    bool live = false;
    long pid = 0;
    if (f->store.vt->probe) {
        assert_int_equal(f->store.vt->probe(f->store.self, f->id, f->path, &live, &pid, &err),
                         WEIR_OK);
        assert_true(live);
        assert_int_equal(pid, (long)getpid());
    }
    /* a reader may open it meanwhile */
    weir__log *ro = NULL;
    assert_int_equal(weir__log_open_store(f->name, f->store, f->id, f->path, true,
                                          WEIR__FSYNC_NONE, NULL, NULL, &ro, &err),
                     WEIR_OK);
    assert_int_equal(weir__log_count(ro), 3);
    json_t *empty = json_object();
    assert_int_equal(weir__log_append(ro, "turn/end", empty, NULL, NULL, 0, NULL, &err),
                     WEIR_E_STATE);
    json_decref(empty);
    weir__log_close(ro);
    weir__log_close(log);

    /* released at close */
    log = open_rw(f, &err);
    assert_non_null(log);
    assert_int_equal(f->store.vt->probe(f->store.self, f->id, f->path, &live, NULL, &err),
                     WEIR_OK);
    assert_true(live);
    weir__log_close(log);
    assert_int_equal(f->store.vt->probe(f->store.self, f->id, f->path, &live, NULL, &err),
                     WEIR_OK);
    assert_false(live);
}

static void list_names_the_sessions(void **state) {
    fixture *f = *state;
    weir_error err;
    weir__log *log = open_rw(f, &err);
    assert_non_null(log);
    seed(log);
    json_t *rows = NULL;
    assert_non_null(f->store.vt->list);
    assert_int_equal(f->store.vt->list(f->store.self, f->dir, &rows, &err), WEIR_OK);
    bool found = false;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        if (strcmp(json_string_value(json_object_get(row, "id")), f->id) == 0) {
            found = true;
            assert_true(json_is_true(json_object_get(row, "live")));
        }
    }
    assert_true(found);
    json_decref(rows);
    weir__log_close(log);
}

static void missing_session_reads_not_found(void **state) {
    fixture *f = *state;
    weir_error err;
    weir__log *ro = NULL;
    assert_int_equal(weir__log_open_store(f->name, f->store, f->id, f->path, true,
                                          WEIR__FSYNC_NONE, NULL, NULL, &ro, &err),
                     WEIR_E_NOT_FOUND);
    assert_null(ro);
}

/* A store that fences: the memory store whose appends fail with
 * WEIR_E_LEASE_LOST once `fenced` is set. */
static bool fenced;
static weir_store fencing;
static int fencing_append(void *self, void *handle, uint64_t epoch, uint64_t first_seq,
                          size_t count, const char *lines, size_t len, uint32_t flags,
                          weir_error *err) {
    if (fenced)
        return weir__err(err, WEIR_E_LEASE_LOST, NULL, NULL, "lease lost");
    return weir__store_memory().vt->append(self, handle, epoch, first_seq, count, lines, len,
                                           flags, err);
}

static void fenced_writer_appends_no_more(void **state) {
    fixture *f = *state;
    fencing = *weir__store_memory().vt;
    fencing.append = fencing_append;
    weir__store_ref ref = {.vt = &fencing};
    weir_error err;
    weir__log *log = NULL;
    assert_int_equal(weir__log_open_store("fence", ref, f->id, NULL, false, WEIR__FSYNC_STEP, NULL,
                                          NULL, &log, &err),
                     WEIR_OK);
    char name[96];
    snprintf(name, sizeof name, "fence:%s", f->id);
    assert_string_equal(weir__log_path(log), name);
    must_add(log, "turn/start", "{\"turn\":1}");
    fenced = true;
    json_t *d = json_pack("{s:i, s:{s:s}}", "turn", 1, "reason", "kind", "completed");
    weir_error_clear(&err);
    assert_int_equal(weir__log_append(log, "turn/end", d, NULL, NULL, 0, NULL, &err),
                     WEIR_E_LEASE_LOST);
    fenced = false; /* the log stays fenced: it never appends again */
    assert_int_equal(weir__log_append(log, "turn/end", d, NULL, NULL, 0, NULL, &err),
                     WEIR_E_LEASE_LOST);
    assert_non_null(strstr(err.text, "taken over by another writer"));
    assert_int_equal(weir__log_count(log), 1);
    json_decref(d);
    weir__log_close(log);
}

/* A memory store that counts appends (and the lines of the last), and
 * fails them with WEIR_E_IO while `failing` is set. */
static int appends;
static size_t last_count;
static bool failing;
static weir_store counting;
static int counting_append(void *self, void *handle, uint64_t epoch, uint64_t first_seq,
                           size_t count, const char *lines, size_t len, uint32_t flags,
                           weir_error *err) {
    appends++;
    last_count = count;
    if (failing)
        return weir__err(err, WEIR_E_IO, NULL, NULL, "disk on fire");
    return weir__store_memory().vt->append(self, handle, epoch, first_seq, count, lines, len,
                                           flags, err);
}

static weir__log *open_counting(fixture *f) {
    counting = *weir__store_memory().vt;
    counting.append = counting_append;
    weir__store_ref ref = {.vt = &counting};
    weir_error err;
    weir__log *log = NULL;
    assert_int_equal(weir__log_open_store("count", ref, f->id, NULL, false, WEIR__FSYNC_STEP, NULL,
                                          NULL, &log, &err),
                     WEIR_OK);
    return log;
}

static void repair_closers_are_one_append(void **state) {
    fixture *f = *state;
    weir__log *log = open_counting(f);
    seed(log); /* an open turn with an open step */
    weir__log_close(log);
    log = open_counting(f);
    appends = 0;
    bool repaired = false;
    weir_error err;
    assert_int_equal(weir__log_repair(log, &repaired, &err), WEIR_OK);
    assert_true(repaired);
    assert_int_equal(appends, 1);
    assert_int_equal(last_count, 2); /* step/end and turn/end in one append */
    assert_int_equal(weir__log_count(log), 5);
    assert_string_equal(json_string_value(json_object_get(weir__log_event(log, 4), "type")),
                        "turn/end");
    weir__log_close(log);
    log = open_counting(f); /* what the store kept reads back the same */
    assert_int_equal(weir__log_count(log), 5);
    assert_false(weir__log_turn_open(log));
    weir__log_close(log);
}

static void failed_batch_breaks_the_log(void **state) {
    fixture *f = *state;
    weir__log *log = open_counting(f);
    seed(log);
    weir__log_close(log);
    log = open_counting(f);
    failing = true;
    weir_error err;
    assert_int_equal(weir__log_repair(log, NULL, &err), WEIR_E_IO);
    failing = false;
    json_t *d = json_pack("{s:i}", "turn", 2);
    assert_int_equal(weir__log_append(log, "turn/start", d, NULL, NULL, 0, NULL, &err),
                     WEIR_E_IO);
    assert_non_null(strstr(err.text, "takes no more appends"));
    json_decref(d);
    weir__log_close(log);
    log = open_counting(f); /* the store has the seed only, and repairs again */
    assert_int_equal(weir__log_count(log), 3);
    assert_true(weir__log_turn_open(log));
    weir__log_close(log);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define BOTH(t)                                                                                    \
    cmocka_unit_test_setup_teardown(t, setup_file, teardown),                                      \
        cmocka_unit_test_setup_teardown(t, setup_memory, teardown)
        BOTH(append_read_reopen),
        BOTH(torn_tail_is_dropped),
        BOTH(second_writer_is_refused),
        BOTH(list_names_the_sessions),
        BOTH(missing_session_reads_not_found),
        cmocka_unit_test_setup_teardown(fenced_writer_appends_no_more, setup_memory, teardown),
        cmocka_unit_test_setup_teardown(repair_closers_are_one_append, setup_memory, teardown),
        cmocka_unit_test_setup_teardown(failed_batch_breaks_the_log, setup_memory, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
