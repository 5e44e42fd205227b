/*
 * bench/log/log.c - session log throughput and derive cost
 * (core/log/session_log.c, core/format/surface.c).
 *
 * 1. Append throughput, per fsync policy (none, step, always): turns of six
 *    events (turn/start, step/start, user/message, assistant/message,
 *    step/end, turn/end) appended with weir__log_append, with
 *    weir__log_sync_point where the driver calls it (before the model
 *    request and at step/turn ends).  Floor, measured in the same run: the
 *    same envelope lines written with write(2) to a plain file, with fsync at
 *    the same points (step: the checkpoints; always: every line).
 *      append fsync=none events=... weir_events_per_s=... raw_events_per_s=... ratio=...
 *
 * 2. Derive cost as the log grows (the "model-visible means logged" fold is
 *    cached, docs/session-log.md): a log of surface events is grown to each size n;
 *    at each size (max_n/16 doubling to max_n), 31 times one more event is appended and derived,
 *    and the medians are printed:
 *      fold_us     the cached fold step the log does (weir__surface_derive_into
 *                  from the last folded node): O(new events), flat in n;
 *      derive_us   weir__log_derive (the fold + a deep copy of the history
 *                  for the caller);
 *      copy_us     the floor of derive_us: json_deep_copy of an equal array;
 *      refold_us   a fold from scratch (weir__surface_derive), O(n).
 *      derive n=... fold_us=... fold_ratio_to_first=... derive_us=... copy_us=...
 *             derive_ratio_to_copy=... refold_us=...
 *    fold_ratio_to_first staying near 1 as n grows 16-fold is the O(new)
 *    property; derive_ratio_to_copy near 1 says the rest of derive is the
 *    copy.  Never fails on timing; exit 2 on setup/append errors.
 *
 * Options: --events N (appends for fsync none, default 30000; step appends
 * N/10 and always N/30), --max-n N (largest derive size, default 8000).
 * Append figures are medians of 5 rounds, alternating which side goes first.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "session_log.h"
#include "surface.h"
#include "testutil.h"

#define SAMPLES 31 /* derive samples per size */
#define ROUNDS 5   /* append rounds per policy (median) */

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static const char *const kinds[6] = {"turn/start",        "step/start", "user/message",
                                     "assistant/message", "step/end",   "turn/end"};

/* The data of event k (0..5) of turn `turn`; new reference. */
static json_t *event_data(int k, int turn) {
    switch (k) {
    case 0:
        return json_pack("{s:i}", "turn", turn);
    case 1:
    case 4:
        return json_pack("{s:i, s:i}", "turn", turn, "step", 1);
    case 2:
        return json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}], s:{s:s}}}", "turn", turn, "step", 1,
                         "message", "role", "user", "content", "type", "text", "text",
                         "Please summarise the previous answer in one short paragraph.",
                         "source", "kind", "human");
    case 3:
        return json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}]}, s:[], s:{s:i, s:i}}", "turn", turn,
                         "step", 1, "message", "role", "assistant", "content", "type", "text",
                         "text",
                         "Here is a short paragraph that stands in for a model answer of "
                         "ordinary length, long enough to be a realistic log line.",
                         "stream", "usage", "input_tokens", 120, "output_tokens", 40);
    default:
        return json_pack("{s:i, s:{s:s}}", "turn", turn, "reason", "kind", "completed");
    }
}

/* Checkpoints where the driver calls them: before the request, step/turn end. */
static bool is_checkpoint(int k) { return k == 2 || k == 4 || k == 5; }

/* ------------------------------------------------------------------------ */
/* 1. append throughput                                                     */
/* ------------------------------------------------------------------------ */

static int append_weir(const char *path, weir__fsync policy, int events, double *secs) {
    weir__log *log;
    weir_error err;
    weir_error_clear(&err);
    if (weir__log_open(path, policy, NULL, NULL, &log, &err) != WEIR_OK) {
        fprintf(stderr, "bench_log: %s\n", err.text);
        return -1;
    }
    json_t *append = json_string("append");
    int rc = 0;
    double t0 = now_us();
    for (int i = 0; i < events && rc == 0; i++) {
        int k = i % 6;
        json_t *data = event_data(k, i / 6 + 1);
        bool surface = k == 2 || k == 3;
        if (!data ||
            weir__log_append(log, kinds[k], data, surface ? append : NULL, NULL, 0, NULL, &err) !=
                WEIR_OK ||
            (is_checkpoint(k) && weir__log_sync_point(log, &err) != WEIR_OK)) {
            fprintf(stderr, "bench_log: append %d: %s\n", i, err.text);
            rc = -1;
        }
        json_decref(data);
    }
    *secs = (now_us() - t0) / 1e6;
    json_decref(append);
    weir__log_close(log);
    return rc;
}

/* The floor: the envelope lines, built and written with write(2). */
static int append_raw(const char *path, weir__fsync policy, int events, double *secs) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int rc = 0;
    double t0 = now_us();
    for (int i = 0; i < events && rc == 0; i++) {
        int k = i % 6;
        json_t *data = event_data(k, i / 6 + 1);
        json_t *env = json_pack("{s:i, s:I, s:s, s:o}", "seq", i, "time",
                                (json_int_t)(now_us() / 1000), "type", kinds[k], "data", data);
        if (env && (k == 2 || k == 3))
            json_object_set_new(env, "surface_op", json_string("append"));
        char *line = env ? json_dumps(env, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(env);
        size_t n = line ? strlen(line) : 0;
        if (line)
            line[n++] = '\n'; /* overwrites the NUL: write n bytes */
        if (!line || write(fd, line, n) != (ssize_t)n)
            rc = -1;
        free(line);
        if (rc == 0 && (policy == WEIR__FSYNC_ALWAYS ||
                        (policy == WEIR__FSYNC_STEP && is_checkpoint(k))) && fsync(fd) != 0)
            rc = -1;
    }
    *secs = (now_us() - t0) / 1e6;
    close(fd);
    return rc;
}

static int bench_append(const char *dir, int events) {
    static const struct {
        const char *name;
        weir__fsync policy;
        int div;
    } pol[] = {{"none", WEIR__FSYNC_NONE, 1}, {"step", WEIR__FSYNC_STEP, 10},
               {"always", WEIR__FSYNC_ALWAYS, 30}};
    for (size_t p = 0; p < sizeof pol / sizeof *pol; p++) {
        int n = events / pol[p].div / 6 * 6;
        char wpath[4200], rpath[4200];
        snprintf(wpath, sizeof wpath, "%s/weir-%s.jsonl", dir, pol[p].name);
        snprintf(rpath, sizeof rpath, "%s/raw-%s.jsonl", dir, pol[p].name);
        double we[ROUNDS], re[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            /* alternate which side goes first: fsync latency drifts */
            double ws, rs;
            if (r % 2 == 0 ? append_weir(wpath, pol[p].policy, n, &ws) != 0 ||
                                 append_raw(rpath, pol[p].policy, n, &rs) != 0
                           : append_raw(rpath, pol[p].policy, n, &rs) != 0 ||
                                 append_weir(wpath, pol[p].policy, n, &ws) != 0)
                return -1;
            we[r] = n / ws;
            re[r] = n / rs;
            unlink(wpath);
            unlink(rpath);
        }
        double wm = median(we, ROUNDS), rm = median(re, ROUNDS);
        printf("append fsync=%s events=%d weir_events_per_s=%.0f raw_events_per_s=%.0f "
               "ratio=%.2f rounds=%d\n",
               pol[p].name, n, wm, rm, rm / wm, ROUNDS);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* 2. derive cost for a growing log                                         */
/* ------------------------------------------------------------------------ */

/* Append one user or assistant message (alternating by seq). */
static int append_surface(weir__log *log, json_t *append, int i) {
    json_t *data = event_data(i % 2 ? 3 : 2, 1);
    weir_error err;
    weir_error_clear(&err);
    int rc = data ? weir__log_append(log, kinds[i % 2 ? 3 : 2], data, append, NULL, 0, NULL, &err)
                  : -1;
    if (rc != WEIR_OK)
        fprintf(stderr, "bench_log: derive append %d: %s\n", i, err.text);
    json_decref(data);
    return rc == WEIR_OK ? 0 : -1;
}

typedef struct derive_sample {
    double fold, derive, copy, refold;
} derive_sample;

static int bench_derive(const char *dir, int max_n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/derive.jsonl", dir);
    weir__log *log;
    weir_error err;
    weir_error_clear(&err);
    if (weir__log_open(path, WEIR__FSYNC_NONE, NULL, NULL, &log, &err) != WEIR_OK) {
        fprintf(stderr, "bench_log: %s\n", err.text);
        return -1;
    }
    json_t *append = json_string("append");
    json_t *folded = json_array(); /* our own cache, folded like the log's */
    size_t done = 0;
    int count = 0, rc = 0;
    double first_fold = 0;
    for (int n = max_n / 16; n <= max_n && rc == 0; n *= 2) {
        while (count < n && rc == 0)
            rc = append_surface(log, append, count++);
        if (rc != 0 ||
            weir__surface_derive_into(weir__log_surface(log), done, folded, &done) != WEIR_OK)
            break;
        size_t size = json_array_size(folded);
        double f[SAMPLES], d[SAMPLES], c[SAMPLES], r[SAMPLES];
        for (int s = 0; s < SAMPLES && rc == 0; s++) {
            rc = append_surface(log, append, count++);
            const weir__surface *surf = weir__log_surface(log);
            double t0 = now_us();
            int frc = weir__surface_derive_into(surf, done, folded, &done);
            double t1 = now_us();
            json_t *msgs = weir__log_derive(log);
            double t2 = now_us();
            json_t *copy = json_deep_copy(folded);
            double t3 = now_us();
            json_t *all = s % 10 == 0 ? weir__surface_derive(surf) : NULL;
            double t4 = now_us();
            if (frc != WEIR_OK || !msgs || !copy || json_array_size(msgs) != json_array_size(folded))
                rc = -1;
            json_decref(msgs);
            json_decref(copy);
            json_decref(all);
            f[s] = t1 - t0;
            d[s] = t2 - t1;
            c[s] = t3 - t2;
            r[s] = s % 10 == 0 ? t4 - t3 : -1;
        }
        if (rc != 0)
            break;
        double fm = median(f, SAMPLES), dm = median(d, SAMPLES), cm = median(c, SAMPLES);
        double rr[SAMPLES];
        int nr = 0;
        for (int s = 0; s < SAMPLES; s++)
            if (r[s] >= 0)
                rr[nr++] = r[s];
        double rm = median(rr, nr);
        if (first_fold == 0)
            first_fold = fm > 0 ? fm : 0.001;
        printf("derive n=%zu fold_us=%.2f fold_ratio_to_first=%.2f derive_us=%.1f copy_us=%.1f "
               "derive_ratio_to_copy=%.2f refold_us=%.1f\n",
               size, fm, fm / first_fold, dm, cm, cm > 0 ? dm / cm : 0.0, rm);
    }
    json_decref(folded);
    json_decref(append);
    weir__log_close(log);
    unlink(path);
    return rc;
}

int main(int argc, char **argv) {
    int events = 30000, max_n = 8000;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--events") == 0 && v && atoi(v) >= 600)
            events = atoi(v);
        else if (strcmp(argv[i], "--max-n") == 0 && v && atoi(v) >= 160)
            max_n = atoi(v);
        else {
            fprintf(stderr, "usage: %s [--events N>=600] [--max-n N>=160]\n", argv[0]);
            return 2;
        }
    }
    char *dir = wt_tmpdir("bench-log");
    if (!dir)
        return 2;
    int rc = bench_append(dir, events) == 0 && bench_derive(dir, max_n) == 0 ? 0 : 2;
    wt_rmtree(dir);
    free(dir);
    return rc;
}
