/*
 * tests/unit/test_store.c - the session store interface (docs/stores.md):
 * the same cases against the file store and the memory store, through the
 * log that uses them and through the vtable: append, read from a seq,
 * reopen, a torn tail dropped at open, a second writer refused, list and
 * probe, a fenced writer (WEIR_E_LEASE_LOST) that appends no more, and
 * crash repair's closers stored as one batch (one store append); and
 * find_last and read_ranges (ABI 1.10) against a line-by-line reference,
 * with the file store's costs read from its byte counter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

/* ---- find_last and read_ranges (ABI 1.10), through the vtable ---- */

static void *open_h(fixture *f, uint32_t flags) {
    void *h = NULL;
    weir_error err;
    int rc = f->store.vt->open(f->store.self, f->id, f->path, flags, &h, NULL, &err);
    if (rc != WEIR_OK)
        fail_msg("open %s: %s", f->id, err.text);
    return h;
}

/* Append `text` (whole lines, and maybe a torn tail) as a writer, then close. */
static void store_text(fixture *f, const char *text, size_t len) {
    void *h = open_h(f, 0);
    weir_error err;
    size_t count = 0;
    for (size_t i = 0; i < len; i++)
        count += text[i] == '\n';
    if (f->store.vt->append(f->store.self, h, 0, 0, count, text, len, 0, &err) != WEIR_OK)
        fail_msg("append: %s", err.text);
    f->store.vt->close(f->store.self, h);
}

/* A growing text of lines, and where each line starts (the reference). */
typedef struct lines {
    char *text;
    size_t len, cap;
    size_t *start; /* start[i]: the offset of line i; start[n]: len */
    size_t n, scap;
} lines;

static void lines_add(lines *l, const char *fmt, ...) WEIR_PRINTF(2, 3);
static void lines_add(lines *l, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if (l->len + (size_t)n + 1 > l->cap) {
        l->cap = (l->len + (size_t)n + 1) * 2;
        l->text = realloc(l->text, l->cap);
        assert_non_null(l->text);
    }
    va_start(ap, fmt);
    vsnprintf(l->text + l->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    if (l->n + 2 > l->scap) {
        l->scap = (l->n + 2) * 2;
        l->start = realloc(l->start, l->scap * sizeof *l->start);
        assert_non_null(l->start);
        if (l->n == 0)
            l->start[0] = 0;
    }
    l->len += (size_t)n;
    if (l->text[l->len - 1] == '\n')
        l->start[++l->n] = l->len; /* else line n is torn: it runs from start[n] to len */
}

/* An envelope line as weir writes it (seq, time, type, then data). */
static void ev_add(lines *l, const char *type, const char *data) {
    lines_add(l, "{\"seq\":%zu,\"time\":1765000000000,\"type\":\"%s\",\"data\":%s}\n", l->n, type,
              data);
}

static void lines_free(lines *l) {
    free(l->text);
    free(l->start);
}

/* What read_ranges must answer: the reference's lines in the ranges (a
 * torn tail, past the last whole line, counts as line l->n). */
static char *expect(const lines *l, const uint64_t *ranges, size_t n, size_t *len) {
    char *out = malloc(l->len + 1);
    size_t at = 0;
    bool torn = l->start && l->start[l->n] < l->len;
    for (size_t i = 0; l->start && i < l->n + (torn ? 1 : 0); i++) {
        bool in = false;
        for (size_t r = 0; r < n; r++)
            in = in || (i >= ranges[2 * r] && i <= ranges[2 * r + 1]);
        size_t end = i < l->n ? l->start[i + 1] : l->len;
        if (in) {
            memcpy(out + at, l->text + l->start[i], end - l->start[i]);
            at += end - l->start[i];
        }
    }
    out[at] = '\0';
    *len = at;
    return out;
}

/* read_ranges on `h` must answer what the reference does. */
static void check_ranges(fixture *f, void *h, const lines *l, const uint64_t *ranges, size_t n) {
    char *buf = NULL;
    size_t len = 0, want_len;
    weir_error err;
    int rc = f->store.vt->read_ranges(f->store.self, h, ranges, n, &buf, &len, &err);
    if (rc != WEIR_OK)
        fail_msg("read_ranges: %s", err.text);
    char *want = expect(l, ranges, n, &want_len);
    assert_non_null(buf);
    assert_int_equal(len, want_len);
    assert_memory_equal(buf, want, len);
    assert_int_equal(buf[len], '\0');
    f->store.vt->buffer_free(f->store.self, buf);
    free(want);
}

static int find_last(fixture *f, void *h, const char *type, uint64_t *seq) {
    weir_error err;
    *seq = 12345;
    return f->store.vt->find_last(f->store.self, h, type, seq, &err);
}

static void find_last_finds_the_last_line_of_a_type(void **state) {
    fixture *f = *state;
    assert_non_null(f->store.vt->find_last);
    lines l = {0};
    void *w = open_h(f, 0); /* created, empty */
    uint64_t seq;
    assert_int_equal(find_last(f, w, "log/checkpoint", &seq), WEIR_E_NOT_FOUND);
    f->store.vt->close(f->store.self, w);
    /* none */
    ev_add(&l, "turn/start", "{\"turn\":1}");
    ev_add(&l, "step/start", "{\"turn\":1,\"step\":1}");
    store_text(f, l.text, l.len);
    void *h = open_h(f, WEIR_STORE_READONLY);
    assert_int_equal(find_last(f, h, "log/checkpoint", &seq), WEIR_E_NOT_FOUND);
    assert_int_equal(find_last(f, h, "turn/start", &seq), WEIR_OK);
    assert_int_equal(seq, 0); /* the very first line */
    f->store.vt->close(f->store.self, h);
    /* one, then many: the last one */
    size_t before = l.len;
    ev_add(&l, "log/checkpoint", "{\"events\":2,\"turns\":1}");
    ev_add(&l, "step/end", "{\"turn\":1,\"step\":1}");
    store_text(f, l.text + before, l.len - before);
    h = open_h(f, WEIR_STORE_READONLY);
    assert_int_equal(find_last(f, h, "log/checkpoint", &seq), WEIR_OK);
    assert_int_equal(seq, 2);
    f->store.vt->close(f->store.self, h);
    before = l.len;
    for (int i = 0; i < 5; i++) {
        ev_add(&l, "log/checkpoint", "{\"events\":0,\"turns\":1}");
        ev_add(&l, "turn/end", "{\"turn\":1}");
    }
    size_t last_cp = l.n - 2;
    /* the type inside data only: a key of data, an escaped string, a
     * longer type that begins with it, and one it begins with */
    ev_add(&l, "note/x", "{\"type\":\"log/checkpoint\"}");
    ev_add(&l, "note/x", "{\"t\":\"{\\\"seq\\\":9,\\\"time\\\":1,\\\"type\\\":\\\"log/checkpoint\\\"}\"}");
    ev_add(&l, "log/checkpoints", "{}");
    ev_add(&l, "log/check", "{}");
    /* a torn last line is never one */
    lines_add(&l, "{\"seq\":%zu,\"time\":1765000000000,\"type\":\"log/checkpoint\",\"da", l.n);
    store_text(f, l.text + before, l.len - before);
    for (int ro = 0; ro < 2; ro++) { /* a reader and the writer answer alike */
        h = open_h(f, ro ? WEIR_STORE_READONLY : 0);
        assert_int_equal(find_last(f, h, "log/checkpoint", &seq), WEIR_OK);
        assert_int_equal(seq, last_cp);
        assert_int_equal(find_last(f, h, "log/checkpoints", &seq), WEIR_OK);
        assert_int_equal(seq, l.n - 2);
        assert_int_equal(find_last(f, h, "log", &seq), WEIR_E_NOT_FOUND);
        assert_int_equal(find_last(f, h, "turn/end", &seq), WEIR_OK);
        assert_int_equal(seq, last_cp + 1);
        /* a type the lines' text cannot show as is */
        assert_int_equal(find_last(f, h, "a\"b", &seq), WEIR_E_INVAL);
        assert_int_equal(find_last(f, h, "", &seq), WEIR_E_INVAL);
        f->store.vt->close(f->store.self, h);
    }
    lines_free(&l);
}

/* A last line far longer than a block (and than anything else), after the
 * checkpoint: found, holding a block, reading about the bytes after it. */
static void find_last_past_a_huge_last_line(void **state) {
    fixture *f = *state;
    lines l = {0};
    for (int i = 0; i < 1000; i++)
        ev_add(&l, "turn/start", "{\"turn\":1,\"pad\":\"................................\"}");
    ev_add(&l, "log/checkpoint", "{\"events\":1000,\"turns\":1000}");
    size_t cp_end = l.len;
    size_t huge = (size_t)3 << 20;
    char *big = malloc(huge + 3);
    memset(big, 'x', huge);
    big[0] = '"';
    big[huge - 1] = '"';
    big[huge] = '\0';
    ev_add(&l, "assistant/message", big);
    free(big);
    store_text(f, l.text, l.len);
    void *h = open_h(f, WEIR_STORE_READONLY);
    uint64_t seq;
    assert_int_equal(find_last(f, h, "log/checkpoint", &seq), WEIR_OK);
    assert_int_equal(seq, 1000);
    if (strcmp(f->name, "file") == 0) {
        size_t read = weir__store_file_bytes_read(h);
        assert_true(read >= l.len - cp_end);
        assert_true(read <= l.len - cp_end + ((size_t)128 << 10)); /* + at most two blocks */
        assert_true(read < l.len);
    }
    /* a type found nowhere reads the whole log back */
    assert_int_equal(find_last(f, h, "log/none", &seq), WEIR_E_NOT_FOUND);
    if (strcmp(f->name, "file") == 0)
        assert_int_equal(weir__store_file_bytes_read(h), l.len);
    f->store.vt->close(f->store.self, h);
    lines_free(&l);
}

static void read_ranges_returns_the_lines_of_the_ranges(void **state) {
    fixture *f = *state;
    assert_non_null(f->store.vt->read_ranges);
    lines l = {0};
    for (int i = 0; i < 20; i++)
        ev_add(&l, i % 3 ? "step/start" : "turn/start", i % 2 ? "{\"turn\":1}" : "{}");
    store_text(f, l.text, l.len);
    const uint64_t several[] = {1, 2, 5, 5, 10, 12};
    const uint64_t past[] = {18, 25};
    const uint64_t beyond[] = {20, 20, 30, 40};
    const uint64_t tail[] = {0, 0, 15, UINT64_MAX};
    const uint64_t all[] = {0, UINT64_MAX};
    const uint64_t last[] = {UINT64_MAX, UINT64_MAX};
    for (int ro = 0; ro < 2; ro++) {
        void *h = open_h(f, ro ? WEIR_STORE_READONLY : 0);
        check_ranges(f, h, &l, several, 3);
        check_ranges(f, h, &l, past, 1);
        check_ranges(f, h, &l, beyond, 2); /* nothing */
        check_ranges(f, h, &l, tail, 2);
        check_ranges(f, h, &l, all, 1);
        check_ranges(f, h, &l, last, 1);
        check_ranges(f, h, &l, NULL, 0); /* no range: an empty buffer */
        check_ranges(f, h, &l, several + 2, 1);
        check_ranges(f, h, &l, several, 3); /* again, with the index a pass left */
        /* ranges out of order, overlapping, or first > last */
        const uint64_t bad[][4] = {{5, 3, 7, 8}, {1, 5, 5, 6}, {3, 4, 1, 2}};
        for (size_t i = 0; i < 3; i++) {
            char *buf = (char *)"untouched";
            size_t len = 7;
            weir_error err;
            assert_int_equal(f->store.vt->read_ranges(f->store.self, h, bad[i], 2, &buf, &len,
                                                      &err),
                             WEIR_E_INVAL);
            assert_null(buf);
            assert_non_null(strstr(err.text, "ascending"));
        }
        f->store.vt->close(f->store.self, h);
    }
    lines_free(&l);
}

static void read_ranges_of_a_torn_tail_and_an_empty_store(void **state) {
    fixture *f = *state;
    lines l = {0};
    void *w = open_h(f, 0); /* created, empty */
    const uint64_t all[] = {0, UINT64_MAX};
    const uint64_t one[] = {0, 0};
    check_ranges(f, w, &l, all, 1);
    check_ranges(f, w, &l, one, 1);
    uint64_t seq;
    assert_int_equal(find_last(f, w, "log/checkpoint", &seq), WEIR_E_NOT_FOUND);
    f->store.vt->close(f->store.self, w);
    for (int i = 0; i < 5; i++)
        ev_add(&l, "turn/start", "{\"turn\":1}");
    lines_add(&l, "{\"seq\":5,\"time\":1765000000000,\"type\":\"turn/st");
    store_text(f, l.text, l.len);
    void *h = open_h(f, WEIR_STORE_READONLY);
    const uint64_t tail[] = {3, UINT64_MAX};
    const uint64_t head[] = {0, 1};
    const uint64_t torn[] = {5, 5};
    const uint64_t after[] = {6, UINT64_MAX};
    check_ranges(f, h, &l, tail, 1); /* lines 3 and 4, then the torn bytes */
    check_ranges(f, h, &l, head, 1);
    check_ranges(f, h, &l, torn, 1);
    check_ranges(f, h, &l, after, 1);
    char *buf;
    size_t len;
    weir_error err;
    assert_int_equal(f->store.vt->read_ranges(f->store.self, h, tail, 1, &buf, &len, &err),
                     WEIR_OK);
    assert_int_not_equal(buf[len - 1], '\n');
    f->store.vt->buffer_free(f->store.self, buf);
    f->store.vt->close(f->store.self, h);
    lines_free(&l);
}

/* Out of memory at each allocation in turn: WEIR_E_NOMEM naming the
 * session (or the answer, when only the index could not grow), nothing
 * leaked, and the right answer once memory is back. */
static void find_last_and_read_ranges_without_memory(void **state) {
    fixture *f = *state;
    lines l = {0};
    for (int i = 0; i < 2000; i++)
        ev_add(&l, i == 1500 ? "log/checkpoint" : "step/start", "{\"turn\":1}");
    store_text(f, l.text, l.len);
    void *h = open_h(f, WEIR_STORE_READONLY);
    const uint64_t ranges[] = {3, 3, 700, 900, 1500, UINT64_MAX};
    size_t want_len;
    char *want = expect(&l, ranges, 3, &want_len);
    bool done = false;
    for (long n = 1; !done && n < 1000; n++) {
        weir_error err;
        char *buf = NULL;
        size_t len = 0;
        uint64_t seq = 0;
        weir__alloc_fail_only(n);
        int frc = f->store.vt->find_last(f->store.self, h, "log/checkpoint", &seq, &err);
        int rc = f->store.vt->read_ranges(f->store.self, h, ranges, 3, &buf, &len, &err);
        long used = weir__alloc_fail_only(-1);
        assert_true(frc == WEIR_OK || frc == WEIR_E_NOMEM);
        assert_true(frc != WEIR_OK || seq == 1500);
        if (rc == WEIR_OK) {
            assert_int_equal(len, want_len);
            assert_memory_equal(buf, want, len);
            f->store.vt->buffer_free(f->store.self, buf);
        } else {
            assert_int_equal(rc, WEIR_E_NOMEM);
            assert_null(buf);
            assert_non_null(strstr(err.text, "out of memory"));
        }
        done = used < n && frc == WEIR_OK && rc == WEIR_OK;
    }
    assert_true(done);
    check_ranges(f, h, &l, ranges, 3);
    f->store.vt->close(f->store.self, h);
    free(want);
    lines_free(&l);
}

/* ---- the file store's sparse index and size ---- */

/* `count` lines of about 100 bytes each. */
static void many_lines(lines *l, size_t count) {
    for (size_t i = 0; i < count; i++)
        ev_add(l, i % 1000 == 999 ? "log/checkpoint" : "step/start",
               "{\"turn\":1,\"step\":1,\"pad\":\"abcdefghijklmnopqrstuvwxyz0123456\"}");
}

static void one_old_seq_reads_one_stride(void **state) {
    fixture *f = *state;
    lines l = {0};
    many_lines(&l, 100000);
    store_text(f, l.text, l.len);
    size_t stride_bytes = WEIR__STORE_INDEX_STRIDE * (l.len / l.n);
    /* the bound: from an index entry to the end of the line, read 4 KiB
     * first and doubling (at most twice the bytes, and 4 KiB), and the
     * newline before the entry */
    size_t bound = 2 * stride_bytes + 4096 + 1;
    for (int ro = 0; ro < 2; ro++) {
        void *h = open_h(f, ro ? WEIR_STORE_READONLY : 0);
        weir_error err;
        uint64_t cp;
        assert_int_equal(find_last(f, h, "log/checkpoint", &cp), WEIR_OK);
        assert_int_equal(cp, 99999);
        assert_true(weir__store_file_bytes_read(h) < ((size_t)64 << 10) + 200);
        /* the open: the head, a kept seq and the tail from the checkpoint,
         * one pass over the file */
        const uint64_t open_ranges[] = {0, 3, 40000, 40000, cp, UINT64_MAX};
        check_ranges(f, h, &l, open_ranges, 3);
        assert_int_equal(weir__store_file_bytes_read(h), l.len);
        /* then one old event at a time: about one stride each */
        const uint64_t olds[] = {1234, 77777, 256, 255, 99998, 0, 51200};
        size_t most = 0;
        for (size_t i = 0; i < sizeof olds / sizeof *olds; i++) {
            const uint64_t one[] = {olds[i], olds[i]};
            check_ranges(f, h, &l, one, 1);
            size_t read = weir__store_file_bytes_read(h);
            /* within a stride whose end the index knows: that stride's
             * bytes and the newline before it, exactly; in the last one,
             * the doubling bound */
            size_t k = (size_t)olds[i] / WEIR__STORE_INDEX_STRIDE * WEIR__STORE_INDEX_STRIDE;
            size_t next = k + WEIR__STORE_INDEX_STRIDE;
            size_t limit = next < l.n ? l.start[next] - l.start[k] + (k > 0) : bound;
            if (read > limit || read == 0)
                fail_msg("seq %llu read %zu bytes, not within %zu (a stride is %zu bytes)",
                         (unsigned long long)olds[i], read, limit, stride_bytes);
            most = read > most ? read : most;
        }
        if (ro)
            print_message("file of %zu lines, %zu bytes: a stride is about %zu bytes; one old "
                          "seq read at most %zu bytes\n",
                          l.n, l.len, stride_bytes, most);
        /* several old ones at once: a stride each */
        const uint64_t few[] = {10, 10, 30000, 30001, 90000, 90000};
        check_ranges(f, h, &l, few, 3);
        assert_true(weir__store_file_bytes_read(h) <= 3 * bound);
        (void)err;
        f->store.vt->close(f->store.self, h);
    }
    /* a fresh handle without an index counts up to the seq once, then seeks */
    void *h = open_h(f, WEIR_STORE_READONLY);
    const uint64_t mid[] = {50000, 50000};
    check_ranges(f, h, &l, mid, 1);
    size_t first = weir__store_file_bytes_read(h);
    assert_true(first >= l.start[50000] && first < l.start[50001] + ((size_t)1 << 20));
    const uint64_t near[] = {49000, 49000};
    check_ranges(f, h, &l, near, 1);
    assert_true(weir__store_file_bytes_read(h) <= bound);
    /* a read from seq 0 indexes the file it holds */
    char *buf;
    size_t len;
    weir_error err;
    void *r = open_h(f, WEIR_STORE_READONLY);
    assert_int_equal(f->store.vt->read(f->store.self, r, 0, &buf, &len, &err), WEIR_OK);
    f->store.vt->buffer_free(f->store.self, buf);
    const uint64_t late[] = {88888, 88888};
    check_ranges(f, r, &l, late, 1);
    assert_true(weir__store_file_bytes_read(r) <= bound);
    f->store.vt->close(f->store.self, r);
    f->store.vt->close(f->store.self, h);
    lines_free(&l);
}

/* A truncate drops the index entries past the cut: the lines appended after
 * it are read, not what the old offsets held. */
static void the_index_follows_a_truncate(void **state) {
    fixture *f = *state;
    lines l = {0};
    for (int i = 0; i < 1000; i++)
        ev_add(&l, "step/start", "{\"pad\":\"0123456789\"}");
    store_text(f, l.text, l.len);
    void *w = open_h(f, 0);
    const uint64_t all[] = {0, UINT64_MAX};
    check_ranges(f, w, &l, all, 1); /* indexes every stride */
    weir_error err;
    size_t keep = l.start[600];
    assert_int_equal(f->store.vt->truncate(f->store.self, w, keep, &err), WEIR_OK);
    l.len = keep;
    l.n = 600;
    l.start[600] = keep;
    size_t before = l.len;
    for (int i = 600; i < 1200; i++)
        ev_add(&l, "step/end", "{\"pad\":\"a longer line than the ones it replaces\"}");
    assert_int_equal(f->store.vt->append(f->store.self, w, 0, 600, 600, l.text + before,
                                         l.len - before, 0, &err),
                     WEIR_OK);
    const uint64_t probes[] = {700, 700, 768, 768, 1100, 1100, 512, 512};
    for (size_t i = 0; i < 4; i++)
        check_ranges(f, w, &l, probes + 2 * i, 1);
    check_ranges(f, w, &l, all, 1);
    f->store.vt->close(f->store.self, w);
    lines_free(&l);
}

/* A line of exactly `width` bytes. */
static void sized_line(lines *l, int width) {
    int digits = snprintf(NULL, 0, "%zu", l->n);
    lines_add(l, "{\"seq\":%zu,\"time\":1,\"type\":\"step/start\",\"data\":{\"pad\":\"%0*d\"}}\n",
              l->n, width - 56 - digits, 0);
}

/* A reader's index made stale by a writer that cut the file and wrote other
 * lines: the byte before an entry is no newline, and the pass counts again. */
static void a_stale_reader_index_is_dropped(void **state) {
    fixture *f = *state;
    lines l = {0};
    for (int i = 0; i < 600; i++)
        sized_line(&l, 100);
    assert_int_equal(l.len, 60000);
    store_text(f, l.text, l.len);
    void *r = open_h(f, WEIR_STORE_READONLY);
    const uint64_t all[] = {0, UINT64_MAX};
    check_ranges(f, r, &l, all, 1); /* entries at 0, 25600, 51200 */
    void *w = open_h(f, 0);
    weir_error err;
    assert_int_equal(f->store.vt->truncate(f->store.self, w, l.start[200], &err), WEIR_OK);
    l.len = l.start[200];
    l.n = 200;
    size_t before = l.len;
    for (int i = 200; i < 700; i++)
        sized_line(&l, 150);
    assert_int_equal(l.start[201] - l.start[200], 150);
    assert_int_equal(f->store.vt->append(f->store.self, w, 0, 200, 500, l.text + before,
                                         l.len - before, 0, &err),
                     WEIR_OK);
    f->store.vt->close(f->store.self, w);
    const uint64_t probes[] = {300, 300, 520, 520, 699, 699};
    for (size_t i = 0; i < 3; i++)
        check_ranges(f, r, &l, probes + 2 * i, 1);
    f->store.vt->close(f->store.self, r);
    lines_free(&l);
}

/* An append the file system cuts short (RLIMIT_FSIZE) is cut back to the
 * size before it: the size a writer that read with read_ranges, or read
 * nothing, knows is the one `read` would have given. */
static int short_append(fixture *f, void *w, const char *text, size_t len, off_t size) {
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)size + 10;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    weir_error err;
    int rc = f->store.vt->append(f->store.self, w, 0, 0, 1, text, len, 0, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    return rc;
}

static off_t file_size(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static void a_writer_opened_with_read_ranges_appends_and_cuts_as_after_read(void **state) {
    fixture *f = *state;
    lines l = {0};
    many_lines(&l, 3000); /* checkpoints at 999, 1999, 2999 */
    ev_add(&l, "step/end", "{}");
    size_t whole = l.len;
    lines_add(&l, "{\"seq\":3001,\"time\":1765000000000,\"type\":\"st"); /* a crash's cut */
    store_text(f, l.text, l.len);

    /* the open of a resume: find_last, read_ranges of the tail, the torn
     * tail cut (truncate), then appends; one cut short is undone exactly */
    void *w = open_h(f, 0);
    uint64_t cp;
    assert_int_equal(find_last(f, w, "log/checkpoint", &cp), WEIR_OK);
    assert_int_equal(cp, 2999);
    const uint64_t tail[] = {0, 0, cp, UINT64_MAX};
    check_ranges(f, w, &l, tail, 2);
    weir_error err;
    assert_int_equal(f->store.vt->truncate(f->store.self, w, whole, &err), WEIR_OK);
    l.len = whole;
    ev_add(&l, "turn/end", "{}");
    assert_int_equal(f->store.vt->append(f->store.self, w, 0, 3001, 1, l.text + whole,
                                         l.len - whole, WEIR_STORE_DURABLE, &err),
                     WEIR_OK);
    assert_int_equal(file_size(f->path), (off_t)l.len);
    char big[200];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\n';
    assert_int_equal(short_append(f, w, big, sizeof big, (off_t)l.len), WEIR_E_IO);
    assert_int_equal(file_size(f->path), (off_t)l.len); /* cut back, not to 0 */
    const uint64_t last[] = {3000, UINT64_MAX};
    check_ranges(f, w, &l, last, 1);
    f->store.vt->close(f->store.self, w);

    /* a writer that read nothing at all cuts back to the size at open */
    w = open_h(f, 0);
    assert_int_equal(short_append(f, w, big, sizeof big, (off_t)l.len), WEIR_E_IO);
    assert_int_equal(file_size(f->path), (off_t)l.len);
    f->store.vt->close(f->store.self, w);
    size_t len;
    char *all = stored(f, 0, &len);
    assert_int_equal(len, l.len);
    assert_memory_equal(all, l.text, len);
    free(all);
    lines_free(&l);
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
        BOTH(find_last_finds_the_last_line_of_a_type),
        BOTH(find_last_past_a_huge_last_line),
        BOTH(read_ranges_returns_the_lines_of_the_ranges),
        BOTH(read_ranges_of_a_torn_tail_and_an_empty_store),
        BOTH(find_last_and_read_ranges_without_memory),
        cmocka_unit_test_setup_teardown(one_old_seq_reads_one_stride, setup_file, teardown),
        cmocka_unit_test_setup_teardown(the_index_follows_a_truncate, setup_file, teardown),
        cmocka_unit_test_setup_teardown(a_stale_reader_index_is_dropped, setup_file, teardown),
        cmocka_unit_test_setup_teardown(
            a_writer_opened_with_read_ranges_appends_and_cuts_as_after_read, setup_file,
            teardown),
        cmocka_unit_test_setup_teardown(fenced_writer_appends_no_more, setup_memory, teardown),
        cmocka_unit_test_setup_teardown(repair_closers_are_one_append, setup_memory, teardown),
        cmocka_unit_test_setup_teardown(failed_batch_breaks_the_log, setup_memory, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
