/*
 * tests/fuzz/fuzz_session_log.c - libFuzzer target for the session log
 * reader (core/log/session_log.c, core/format/surface.c, core/log/log_check.c).
 *
 * The input is written to a temp file and read the three ways a hostile or
 * crashed log is read: weir__log_open_readonly + derive, weir_log_check and
 * weir_log_derive (what `weir log` does), and the read-write open + crash
 * repair that `weir resume` does.  Oracles: no crash, leak or UB; the
 * read-only derive and weir_log_derive agree; the check passes exactly the
 * logs the reader opens (one reader, issue #8); a log that checks ok (open
 * turns allowed) repairs into one that checks ok with nothing open, and its
 * derived history before the repair is a prefix of the one after (docs/reliability.md:
 * a crashed log opens and resumes to the same derived history); the check
 * of the file read as a stream equals the check of the bytes read whole.
 * An open that resumed from a checkpoint (docs/session-log.md, "Resume from
 * a checkpoint") reads neither the history before it nor its counts'
 * sources: it may open a log the check refuses only when the check's first
 * error lies before that checkpoint, or is a checkpoint's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session_log.h"
#include "weir/host.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir_path[64];
static char log_path[256];

static void cleanup(void) {
    unlink(log_path);
    rmdir(dir_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    snprintf(dir_path, sizeof dir_path, "/tmp/weir-fuzz-log.XXXXXX");
    if (!mkdtemp(dir_path))
        abort();
    atexit(cleanup);
    snprintf(log_path, sizeof log_path, "%s/s.jsonl", dir_path);
    return 0;
}

static void write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
}

static void die(const char *what, const json_t *a, const json_t *b) {
    char *sa = a ? json_dumps(a, JSON_COMPACT) : NULL, *sb = b ? json_dumps(b, JSON_COMPACT) : NULL;
    fprintf(stderr, "fuzz_session_log: %s\n  a: %s\n  b: %s\n", what, sa ? sa : "-", sb ? sb : "-");
    free(sa);
    free(sb);
    abort();
}

/* Whether array `a` is a prefix of array `b`. */
static bool is_prefix(const json_t *a, const json_t *b) {
    if (json_array_size(a) > json_array_size(b))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_equal(json_array_get(a, i), json_array_get(b, i)))
            return false;
    return true;
}

/* The one reader's report on the log file as an open reads it (without
 * `--check`'s deep re-derivations and stream rebuilds, which an open does
 * not make): a new reference, or NULL when the read failed. */
static json_t *open_check(void) {
    char *buf = NULL;
    size_t len = 0;
    json_t *report = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (weir__log_read_file(log_path, &buf, &len, &err) != WEIR_OK ||
        weir__log_check_buffer(buf, len, NULL, NULL, false, &report, &err) != WEIR_OK) {
        if (err.text[0] == '\0')
            abort();
        report = NULL;
    }
    weir__free(buf);
    return report;
}

/* The open's check: *ok and the new-reference open list, or false if it failed. */
static bool check(bool *ok, json_t **open) {
    json_t *report = open_check();
    if (!report)
        return false;
    *ok = json_is_true(json_object_get(report, "ok"));
    *open = json_incref(json_object_get(report, "open"));
    json_decref(report);
    return true;
}

/* Whether the first error of `report` is one an open from the checkpoint
 * at `base` does not see: of a seq (or line) before it (line 1 not a log
 * event among them: the check stops there), or a checkpoint's
 * (whose counts and surface the open takes as they are).  The errors after
 * it may follow from it (a replace the check refused leaves it another
 * surface than the writer's), so only the first decides. */
static bool unseen_from(const json_t *report, size_t base) {
    const char *t = json_string_value(json_array_get(json_object_get(report, "errors"), 0));
    unsigned long long n = 0;
    return t && (strstr(t, "log/checkpoint") || (sscanf(t, "seq %llu", &n) == 1 && n < base) ||
                 (sscanf(t, "line %llu", &n) == 1 && n <= base) ||
                 /* a damaged first line: the check reads no further */
                 (sscanf(t, "not a weir session log: line %llu", &n) == 1 && n <= base));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_file(log_path, data, size);
    weir_error err;
    weir_error_clear(&err);
    json_t *first = open_check();

    /* read-only open + derive, as `weir log` */
    json_t *derived = NULL;
    weir__log *log = NULL;
    weir_error_clear(&err);
    if (weir__log_open_readonly(log_path, &log, &err) == WEIR_OK &&
        !json_is_true(json_object_get(first, "ok"))) {
        /* resumed from a checkpoint, over history the check refuses */
        size_t base = weir__log_base(log);
        if (!first || base == 0 || !unseen_from(first, base))
            die("the reader opens a log the check refuses", first, NULL);
        json_t *again = weir__log_derive(log);
        if (!again)
            abort();
        json_decref(again);
        weir__log_close(log);
        json_decref(first);
        return 0;
    } else if (log) {
        /* the open released what it read: every envelope reads back as the
         * one reader's single pass (weir_log_events) gave it */
        json_t *events = NULL;
        weir_error_clear(&err);
        if (weir_log_events(log_path, &events, &err) != WEIR_OK ||
            json_array_size(events) != weir__log_count(log))
            die("weir_log_events disagrees with the read-only open", events, NULL);
        for (size_t i = 0; i < weir__log_count(log); i++) {
            json_t *ev = weir__log_event_ref(log, i);
            if (!weir__log_event(log, i) || !json_equal(ev, json_array_get(events, i)) ||
                !json_equal(ev, weir__log_event(log, i)))
                die("an envelope reads back changed", ev, json_array_get(events, i));
            json_decref(ev);
        }
        json_decref(events);
        derived = weir__log_derive(log);
        if (!derived)
            abort();
        weir__log_close(log);
        json_t *again = NULL;
        weir_error_clear(&err);
        if (weir_log_derive(log_path, &again, &err) != WEIR_OK || !json_equal(derived, again))
            die("weir_log_derive disagrees with the read-only open", derived, again);
        json_decref(again);
    } else if (err.text[0] == '\0') {
        abort();
    }
    json_decref(first);

    /* the check reads the file as a stream (weir_log_check) and says what
     * it says of the same bytes read whole */
    json_t *whole = NULL, *streamed = NULL;
    weir_error_clear(&err);
    if (weir__log_check_buffer((const char *)data, size, NULL, NULL, true, &whole, &err) ==
            WEIR_OK &&
        weir_log_check(log_path, &streamed, &err) == WEIR_OK && !json_equal(whole, streamed))
        die("the streamed check disagrees with the whole one", whole, streamed);
    /* the summary (weir sessions) reads head and tail: never a crash, and
     * on a log the check passes, the same count of events */
    json_t *sum = NULL;
    weir_error_clear(&err);
    int src = weir_log_summary(log_path, &sum, &err);
    if (src != WEIR_OK && err.text[0] == '\0')
        abort();
    if (json_is_true(json_object_get(whole, "ok")) &&
        (src != WEIR_OK || !json_equal(json_object_get(sum, "events"),
                                       json_object_get(whole, "events"))))
        die("the summary disagrees with the check", sum ? sum : json_string(err.text), whole);
    json_decref(sum);
    json_decref(whole);
    json_decref(streamed);

    bool ok = false;
    json_t *open = NULL;
    bool checked = check(&ok, &open);
    if (checked && ok != (derived != NULL))
        die(ok ? "the check passes a log the reader refuses"
               : "the reader opens a log the check refuses",
            derived, open);
    if (checked && ok && derived) {
        /* resume: read-write open (drops a torn tail) + repair */
        weir_error_clear(&err);
        if (weir__log_open(log_path, WEIR__FSYNC_NONE, NULL, NULL, &log, &err) != WEIR_OK)
            die(err.text, derived, NULL);
        bool repaired = false;
        weir_error_clear(&err);
        if (weir__log_repair(log, &repaired, &err) != WEIR_OK)
            die(err.text, derived, NULL);
        json_t *after = weir__log_derive(log);
        weir__log_close(log);
        if (!after)
            abort();
        if (!is_prefix(derived, after))
            die("the derived history is not a prefix after repair", derived, after);
        json_decref(after);
        bool ok2 = false;
        json_t *open2 = NULL;
        if (!check(&ok2, &open2) || !ok2 || json_array_size(open2) != 0) {
            json_t *report = NULL;
            weir_error_clear(&err);
            if (weir_log_check(log_path, &report, &err) != WEIR_OK)
                report = json_string(err.text);
            die("a log that checked ok does not check clean after repair", open, report);
        }
        json_decref(open2);
    }
    json_decref(open);
    json_decref(derived);

    /* weir log --repair: a log that checks is never rewritten; one it
     * rewrites checks afterwards (it checks what it writes first) */
    if (checked) {
        json_t *rep = NULL;
        weir_error_clear(&err);
        int rrc = weir_log_repair(log_path, &rep, &err);
        if (rrc != WEIR_OK && err.text[0] == '\0')
            abort();
        json_int_t lines = json_integer_value(json_object_get(rep, "lines"));
        if (rrc == WEIR_OK && ok && lines != 0)
            die("repair rewrote a log that checks", rep, NULL);
        bool ok3 = false;
        json_t *open3 = NULL;
        if (rrc == WEIR_OK && lines > 0 && (!check(&ok3, &open3) || !ok3))
            die("a repaired log does not check", rep, NULL);
        json_decref(open3);
        json_decref(rep);
        char orig[300];
        snprintf(orig, sizeof orig, "%s.orig", log_path);
        unlink(orig);
    }
    return 0;
}
