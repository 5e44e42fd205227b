/*
 * bench/compaction/compaction.c - the cost of compaction-basic's pressure
 * check before each step as the history grows (issue #9 item 7).
 *
 * A host in the program: provider-scripted (one looping reply with usage)
 * and compaction-basic with a window so large that it never compacts, so
 * each agent/pre-step runs exactly the check.  Two listeners of the agent's
 * own bracket the plugin in the agent/pre-step chain: one outermost (first)
 * notes the time, one innermost (next to the core default) notes it again;
 * the difference is the plugin's check (plus two constant hook hops).  The
 * session grows by one-step turns (a user and an assistant node each); at
 * 100, 1,000 and 10,000 surface nodes, --samples more turns are timed and
 * the median is printed.  For comparison, timed in the same innermost
 * listener over as many further turns (never in the same turns: a walk
 * leaves the caches cold for the next check): the full walk the check did
 * before the running meter (weir__agent_surface, the surface copy the
 * plugin read, + cp_measure):
 *
 *   compaction_check nodes=100 check_us=... ratio_to_first=1.00 walk_us=... walk_ratio_to_first=1.00
 *
 * check's ratio_to_first staying near 1 while nodes grow 100-fold is the
 * O(1) property; walk's grows with the nodes.  Never fails on timing; exit
 * 2 when the host cannot be built or a turn fails.
 *
 * Options: --max N (largest size, default 10000), --samples N (default 51).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weir/weir.h>

#include "agent_context.h"
#include "compaction_policy.h"
#include "testutil.h"

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

typedef struct probe {
    double t0, check_us, walk_us;
    bool timing;
} probe;

static json_t *outer(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    probe *p = ud;
    p->t0 = now_us();
    return weir_host_api()->next(call);
}

static json_t *inner(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    probe *p = ud;
    double t1 = now_us();
    p->check_us = t1 - p->t0;
    if (p->timing) { /* the floor: what the check cost before the meter */
        weir_agent *a = weir_host_api()->call_agent(call);
        double w0 = now_us();
        json_t *surface = weir__agent_surface(a);
        volatile size_t tokens = cp_measure(surface, -1, 0, 0);
        (void)tokens;
        p->walk_us = now_us() - w0;
        json_decref(surface);
    }
    return weir_host_api()->next(call);
}

static long since_open; /* inputs this open agent took (WEIR_MAX_INPUT_IDS caps them) */

static int turn(weir_agent *a) {
    since_open++;
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_send_text(a, "one more question about the same thing", WEIR_SEND_FOLLOWUP,
                             &err) != WEIR_OK ||
        weir_agent_run_until_idle(a, &err) != WEIR_OK) {
        fprintf(stderr, "bench_compaction: turn failed: %s\n", err.text);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    long max = 10000;
    int samples = 51;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--max"))
            max = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--samples"))
            samples = atoi(argv[i + 1]);
    }
    if (max < 100 || samples < 1) {
        fprintf(stderr, "usage: bench_compaction [--max N>=100] [--samples N>=1]\n");
        return 2;
    }
    char *dir = wt_tmpdir("bench-compaction");
    json_t *config = json_pack(
        "{s:{s:s, s:s, s:i}, s:{s:s, s:s}, s:[s], s:[{s:s, s:s, s:{s:b, s:{s:{s:i}}, "
        "s:[{s:s, s:{s:i, s:i}}]}}, {s:s, s:s, s:{}}]}",
        "agent", "provider", "scripted", "model", "demo", "max_tokens", 1024, "session", "dir",
        dir, "fsync", "none", "plugin_path", WEIR_BENCH_PLUGIN_DIR, "plugins", "id", "scripted",
        "plugin", "provider-scripted", "config", "loop", 1, "models", "demo", "context_window",
        1000000000, "replies", "text", "a short answer", "usage", "input_tokens", 40,
        "output_tokens", 5, "id", "compact", "plugin", "compaction-basic", "config");
    weir_host *host = NULL;
    weir_error err;
    weir_error_clear(&err);
    if (!dir || !config || weir_host_create(config, &host, &err) != WEIR_OK) {
        fprintf(stderr, "bench_compaction: host: %s\n", err.text);
        return 2;
    }
    probe p = {0};
    weir_hook_opts first = WEIR_HOOK_OPTS_INIT, last = WEIR_HOOK_OPTS_INIT;
    first.order = WEIR_ORDER_FIRST;
    first.user_data = &p;
    last.user_data = &p;
    weir_agent_hook hooks[] = {{"agent/pre-step", outer, &first},
                               {"agent/pre-step", inner, &last}};
    weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
    o.session_id = "bench";
    o.hooks = hooks;
    o.nhooks = 2;
    weir_agent *a = NULL;
    if (weir_agent_open(host, &o, &a, &err) != WEIR_OK) {
        fprintf(stderr, "bench_compaction: open: %s\n", err.text);
        return 2;
    }
    /* an open agent takes at most WEIR_MAX_INPUT_IDS new inputs: reopen the
     * session (same log, same history) before it would run out */
#define ROOM(k) (since_open + (k) < WEIR_MAX_INPUT_IDS)
#define REOPEN()                                                                                   \
    do {                                                                                           \
        weir_agent_close(a);                                                                       \
        a = NULL;                                                                                  \
        since_open = 0;                                                                            \
        if (weir_agent_open(host, &o, &a, &err) != WEIR_OK) {                                      \
            fprintf(stderr, "bench_compaction: reopen: %s\n", err.text);                           \
            status = 2;                                                                            \
        }                                                                                          \
    } while (0)
    double *check = calloc((size_t)samples, sizeof *check);
    double *walk = calloc((size_t)samples, sizeof *walk);
    double first_check = 0, first_walk = 0;
    int status = 0;
    for (long n = 100; n <= max && status == 0; n *= 10) {
        json_t *surface = weir__agent_surface(a);
        long nodes = (long)json_array_size(surface);
        json_decref(surface);
        for (; nodes < n && status == 0; nodes += 2) { /* a user and an assistant node a turn */
            if (!ROOM(1))
                REOPEN();
            if (status == 0)
                status = turn(a);
        }
        if (status == 0 && !ROOM(2 * samples + 1)) {
            REOPEN();
            if (status == 0)
                status = turn(a); /* the meter's first read after an open is not a sample */
        }
        /* the check first, then the walk: a walk evicts the caches the next
         * check would find warm, so the two are never timed in one phase */
        for (int i = 0; i < samples && status == 0; i++) {
            status = turn(a);
            check[i] = p.check_us;
        }
        p.timing = true;
        for (int i = 0; i < samples && status == 0; i++) {
            status = turn(a);
            walk[i] = p.walk_us;
        }
        p.timing = false;
        if (status != 0)
            break;
        double c = median(check, samples), w = median(walk, samples);
        if (n == 100) {
            first_check = c;
            first_walk = w;
        }
        printf("compaction_check nodes=%ld check_us=%.2f ratio_to_first=%.2f walk_us=%.2f "
               "walk_ratio_to_first=%.2f samples=%d\n",
               n, c, c / first_check, w, w / first_walk, samples);
        fflush(stdout);
    }
    free(check);
    free(walk);
    weir_agent_close(a);
    weir_host_destroy(host);
    json_decref(config);
    wt_rmtree(dir);
    free(dir);
    return status == 0 ? 0 : 2;
}
