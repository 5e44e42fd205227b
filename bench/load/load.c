/*
 * bench/load/load.c - how deployment loading scales with the number of plugin
 * rows (issue #8, item 10d: loading must be linear, or N log N, in the rows).
 *
 * For each kind of deployment and each size n (--small, default 1024, and
 * --large, default 4096, the most rows a deployment may hold), a config file
 * of n rows is written to a temp dir, then timed in CPU time of the process
 * (CLOCK_PROCESS_CPUTIME_ID, so a busy machine's waits do not count),
 * median of --rounds:
 *   load   weir_config_compose (parse, expand, validate, merge) +
 *          weir_host_create (resolve, dlopen, schema check, init,
 *          registration, freezing the hook chains) + weir_host_destroy;
 *   parse  the floor, linear by construction: json_load_file of the same
 *          file(s) (what any loader has to do at least).
 * and one line per kind is printed:
 *   load kind=K small=1024 large=4096 small_us=... large_us=...
 *        ratio=... parse_ratio=... rounds=9
 * `ratio` = large_us / small_us: about large/small (4) when loading is
 * linear, 16 when quadratic.  `parse_ratio` is the same for the floor, so a
 * machine that does not scale memory-bound work linearly shows there too.
 *
 * Kinds:
 *   prompt       n rows of system-prompt (a config schema, one waterfall
 *                listener each: one chain of n listeners);
 *   mixed        rows cycling system-prompt, retry, compaction-basic and
 *                provider-scripted (several chains, event types, providers);
 *   constrained  n rows of the fixture fx-alpha (tests/plugins), every odd
 *                row asking to run before the even row ahead of it: a chain
 *                of n listeners with n/2 before/after constraints;
 *   overlay      the prompt base plus an overlay file that gives every row a
 *                new config and places every 8th row `before` another one.
 * Never fails on timing: exit 0 when every load succeeded, 2 otherwise.
 *
 * Options: --small N, --large N (1 <= small < large <= 4096), --rounds R (9),
 * --kind K (all), --plugin-dir DIR (default <exe>/../lib/weir/plugins),
 * --fixture-dir DIR (default <exe>/../tests/plugins; kind constrained).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "testutil.h"
#include "weir/host.h"

#define MAX_ROUNDS 64

static char plugin_dir[4096], fixture_dir[4096];

/* CPU time of the process: loading runs on one thread, and time spent
 * waiting for a busy machine's CPU is not counted. */
static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Row i of kind `kind` (a new reference). */
static json_t *make_row(const char *kind, int i) {
    char id[32];
    snprintf(id, sizeof id, "p%d", i);
    if (strcmp(kind, "constrained") == 0) {
        json_t *cfg = json_object();
        if (i % 2 == 1) {
            char prev[32];
            snprintf(prev, sizeof prev, "p%d", i - 1);
            json_object_set_new(cfg, "before", json_pack("[s]", prev));
        }
        return json_pack("{s:s, s:s, s:o}", "id", id, "plugin", "fx-alpha", "config", cfg);
    }
    static const char *const mixed[] = {"system-prompt", "retry", "compaction-basic",
                                        "provider-scripted"};
    const char *plugin = strcmp(kind, "mixed") == 0 ? mixed[i % 4] : "system-prompt";
    json_t *cfg;
    if (strcmp(plugin, "system-prompt") == 0)
        cfg = json_pack("{s:s}", "text", "You are row text.");
    else if (strcmp(plugin, "provider-scripted") == 0)
        cfg = json_pack("{s:s}", "script", "builtin:demo");
    else
        cfg = json_object();
    return json_pack("{s:s, s:s, s:o}", "id", id, "plugin", plugin, "config", cfg);
}

/* Write the deployment of `kind` with n rows; its files into files[] (1 or 2). */
static int write_config(const char *dir, const char *kind, int n, char files[2][4096],
                        size_t *nfiles) {
    json_t *rows = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(rows, make_row(kind, i));
    const char *pdir = strcmp(kind, "constrained") == 0 ? fixture_dir : plugin_dir;
    json_t *doc = json_pack("{s:{s:s, s:s}, s:[s], s:o}", "agent", "provider", "p3", "model",
                            "demo", "plugin_path", pdir, "plugins", rows);
    snprintf(files[0], sizeof files[0], "%s/%s-%d.json", dir, kind, n);
    int rc = doc && json_dump_file(doc, files[0], JSON_COMPACT) == 0 ? 0 : -1;
    json_decref(doc);
    *nfiles = 1;
    if (rc != 0 || strcmp(kind, "overlay") != 0)
        return rc;
    json_t *over = json_array();
    for (int i = 0; i < n; i++) {
        char id[32], anchor[32];
        snprintf(id, sizeof id, "p%d", i);
        json_t *row = json_pack("{s:s, s:{s:s}}", "id", id, "config", "text", "Overlaid.");
        if (i % 8 == 7) {
            snprintf(anchor, sizeof anchor, "p%d", i - 7);
            json_object_set_new(row, "before", json_string(anchor));
        }
        json_array_append_new(over, row);
    }
    doc = json_pack("{s:o}", "plugins", over);
    snprintf(files[1], sizeof files[1], "%s/%s-%d-over.json", dir, kind, n);
    rc = doc && json_dump_file(doc, files[1], JSON_COMPACT) == 0 ? 0 : -1;
    json_decref(doc);
    *nfiles = 2;
    return rc;
}

/* One load: compose + create + destroy; -1 (with a message) on failure. */
static double time_load(const char *const *files, size_t nfiles, int n) {
    weir_error err;
    weir_error_clear(&err);
    double t0 = now_us();
    json_t *cfg = NULL;
    weir_host *h = NULL;
    int rc = weir_config_compose(files, nfiles, &cfg, &err);
    if (rc == WEIR_OK)
        rc = weir_host_create(cfg, &h, &err);
    size_t rows = json_array_size(json_object_get(cfg, "plugins"));
    weir_host_destroy(h);
    json_decref(cfg);
    double t = now_us() - t0;
    if (rc != WEIR_OK || rows != (size_t)n) {
        fprintf(stderr, "bench_load: %s: %s (%zu rows)\n", files[0], err.text, rows);
        return -1;
    }
    return t;
}

static double time_parse(const char *const *files, size_t nfiles) {
    double t0 = now_us();
    for (size_t i = 0; i < nfiles; i++) {
        json_t *doc = json_load_file(files[i], 0, NULL);
        if (!doc)
            return -1;
        json_decref(doc);
    }
    return now_us() - t0;
}

/* Median load and parse times of `kind` at size n. */
static int measure(const char *dir, const char *kind, int n, int rounds, double *load,
                   double *parse) {
    char files[2][4096];
    size_t nfiles;
    if (write_config(dir, kind, n, files, &nfiles) != 0) {
        fprintf(stderr, "bench_load: cannot write the %s config\n", kind);
        return -1;
    }
    const char *names[2] = {files[0], files[1]};
    double l[MAX_ROUNDS], p[MAX_ROUNDS];
    if (time_load(names, nfiles, n) < 0) /* warm-up: page cache, dlopen */
        return -1;
    for (int r = 0; r < rounds; r++) {
        p[r] = time_parse(names, nfiles);
        l[r] = time_load(names, nfiles, n);
        if (l[r] < 0 || p[r] < 0)
            return -1;
    }
    *load = median(l, rounds);
    *parse = median(p, rounds);
    return 0;
}

/* "<dir of this executable>/<rel>" into buf. */
static void beside_exe(char *buf, size_t size, const char *rel) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    if (snprintf(buf, size, "%s/%s", self, rel) >= (int)size)
        buf[0] = '\0';
}

int main(int argc, char **argv) {
    int small = 1024, large = 4096, rounds = 9;
    const char *only = NULL;
    beside_exe(plugin_dir, sizeof plugin_dir, "../lib/weir/plugins");
    beside_exe(fixture_dir, sizeof fixture_dir, "../tests/plugins");
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(argv[i], "--small") == 0)
            small = atoi(v);
        else if (v && strcmp(argv[i], "--large") == 0)
            large = atoi(v);
        else if (v && strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(v);
        else if (v && strcmp(argv[i], "--kind") == 0)
            only = v;
        else if (v && strcmp(argv[i], "--plugin-dir") == 0)
            snprintf(plugin_dir, sizeof plugin_dir, "%s", v);
        else if (v && strcmp(argv[i], "--fixture-dir") == 0)
            snprintf(fixture_dir, sizeof fixture_dir, "%s", v);
        else
            small = -1;
    }
    if (small < 1 || large <= small || large > 4096 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr,
                "usage: %s [--small N] [--large N] [--rounds R] [--kind "
                "prompt|mixed|constrained|overlay] [--plugin-dir DIR] [--fixture-dir DIR]\n",
                argv[0]);
        return 2;
    }
    setenv("WEIR_PLUGIN_PATH", "", 1);
    char *dir = wt_tmpdir("bench-load");
    if (!dir)
        return 2;
    static const char *const kinds[] = {"prompt", "mixed", "constrained", "overlay"};
    int status = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (only && strcmp(only, kinds[k]) != 0)
            continue;
        double ls, ps, ll, pl;
        if (measure(dir, kinds[k], small, rounds, &ls, &ps) != 0 ||
            measure(dir, kinds[k], large, rounds, &ll, &pl) != 0) {
            status = 2;
            continue;
        }
        printf("load kind=%s small=%d large=%d small_us=%.0f large_us=%.0f ratio=%.2f "
               "parse_ratio=%.2f rounds=%d\n",
               kinds[k], small, large, ls, ll, ll / ls, pl / ps, rounds);
        fflush(stdout);
    }
    wt_rmtree(dir);
    free(dir);
    return status;
}
