/*
 * bench/telemetry/telemetry.c - what telemetry costs a turn when the
 * collector never answers (issue #38: "a turn with telemetry pointed at a
 * collector that never answers takes no longer than one without").
 *
 * Each round starts the in-process loopback mock LLM and a dead collector
 * (a socket on 127.0.0.1 that listens and is never read: the kernel
 * completes every TCP handshake, so each export waits for its whole
 * timeout) and opens two agents through the public API, each on its own
 * host, which take turns (--turns one-step turns each; the two alternate
 * which goes first, so both see the same machine):
 *   off   a host without telemetry;
 *   dead  the same deployment with telemetry.enabled, the endpoint the dead
 *         collector, batch_ms 20 (an export is in flight during most
 *         turns), timeout_ms 1000.
 * Only the turns are timed (send + run_until_idle), not the host's
 * destroy, which gives the exporter one last try (bounded by timeout_ms;
 * printed apart as dead_close_ms).  Printed:
 *
 *   turns=100 off_us_per_turn=... dead_us_per_turn=... ratio=... off_median_turn_us=...
 *   dead_median_turn_us=... median_turn_ratio=... dead_close_ms=... spans_queued=...
 *   dropped_during_turns=... rounds=5
 *
 * (the per-turn means and `ratio` are medians over rounds; the median_turn
 * pair is the median of every turn of all rounds, which a busy machine's
 * spikes move less.)  It never fails on timing: exit 0 when every turn
 * completed with an answer, 2 on a setup or turn error.
 * Options: --turns N (100), --rounds R (5).
 */
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_turn.h"
#include "mock_llm.h"
#include "weir/host.h"

#ifndef WEIR_BENCH_OPENAI_PLUGIN
#error "WEIR_BENCH_OPENAI_PLUGIN (path of weir-provider-openai.so) must be defined"
#endif

#define MAX_ROUNDS 64

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* A listening socket on 127.0.0.1 that is never accepted from. */
static int dead_collector(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("bench_telemetry: dead collector");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* One side of the comparison: a host, its agent and its turn times. */
typedef struct side {
    char dir[64];
    bool made;
    json_t *cfg;
    weir_host *host;
    weir_agent *agent;
    char sid[32];
    double *us; /* each turn's wall time */
} side;

/* A host and an agent; `dead_port` > 0: telemetry on, at the dead collector. */
static int side_open(side *s, int mock_port, int dead_port, int turns, int round, weir_error *err) {
    snprintf(s->dir, sizeof s->dir, "/tmp/weir-bench-telemetry.XXXXXX");
    s->us = calloc((size_t)turns, sizeof *s->us);
    if (!s->us || !mkdtemp(s->dir))
        return -1;
    s->made = true;
    s->cfg = mock_llm_openai_deployment(WEIR_BENCH_OPENAI_PLUGIN, mock_port, s->dir);
    if (!s->cfg)
        return -1;
    if (dead_port > 0) {
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", dead_port);
        json_object_set_new(s->cfg, "telemetry",
                            json_pack("{s:b, s:s, s:i, s:i}", "enabled", 1, "endpoint", url,
                                      "batch_ms", 20, "timeout_ms", 1000));
    }
    snprintf(s->sid, sizeof s->sid, "t%d-%s", round, dead_port > 0 ? "dead" : "off");
    weir_agent_options ao = WEIR_AGENT_OPTIONS_INIT;
    ao.session_id = s->sid;
    if (weir_host_create(s->cfg, &s->host, err) != WEIR_OK ||
        weir_agent_open(s->host, &ao, &s->agent, err) != WEIR_OK)
        return -1;
    return 0;
}

/* Turn i on `s`, timed. */
static int side_turn(side *s, int i, weir_error *err) {
    char text[64];
    snprintf(text, sizeof text, "turn %d", i);
    double t0 = now_us();
    int rc = weir_agent_send_text(s->agent, text, WEIR_SEND_FOLLOWUP, err) == WEIR_OK &&
                     weir_agent_run_until_idle(s->agent, err) == WEIR_OK
                 ? 0
                 : -1;
    s->us[i] = now_us() - t0;
    if (rc == 0 && bench_turn_ok(s->agent, s->sid, err) != WEIR_OK)
        rc = -1;
    return rc;
}

/* Close `s`; the time its host's destroy took (ms). */
static double side_close(side *s) {
    weir_agent_close(s->agent);
    double c0 = now_us();
    weir_host_destroy(s->host);
    double ms = (now_us() - c0) / 1000;
    json_decref(s->cfg);
    free(s->us);
    if (s->made)
        nftw(s->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return ms;
}

int main(int argc, char **argv) {
    int turns = 100, rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--turns") == 0 && i + 1 < argc)
            turns = atoi(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_telemetry [--turns N] [--rounds R]\n");
            return 2;
        }
    }
    if (turns < 1 || turns > 100000 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_telemetry: --turns 1..100000, --rounds 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    double off[MAX_ROUNDS], dead[MAX_ROUNDS], ratio[MAX_ROUNDS], close_ms[MAX_ROUNDS];
    double *all_off = calloc((size_t)turns * (size_t)rounds, sizeof(double));
    double *all_dead = calloc((size_t)turns * (size_t)rounds, sizeof(double));
    if (!all_off || !all_dead)
        return 2;
    uint64_t queued = 0, dropped = 0;
    for (int r = 0; r < rounds; r++) {
        mock_llm *mock = NULL;
        int dead_port = 0;
        int fd = dead_collector(&dead_port);
        if (fd < 0 || mock_llm_start("{\"loop\": true, \"requests\": [{\"text\": \"An answer.\"}]}",
                                     &mock) != 0)
            return 2;
        int port = mock_llm_port(mock);
        side a = {0}, b = {0};
        weir_error err;
        weir_error_clear(&err);
        int rc = side_open(&a, port, 0, turns, r, &err);
        if (rc == 0)
            rc = side_open(&b, port, dead_port, turns, r, &err);
        /* the two take turns, each going first every other turn */
        for (int i = 0; rc == 0 && i < turns; i++) {
            side *first = i % 2 ? &b : &a, *second = i % 2 ? &a : &b;
            rc = side_turn(first, i, &err);
            if (rc == 0)
                rc = side_turn(second, i, &err);
        }
        if (rc != 0)
            fprintf(stderr, "bench_telemetry: round %d: %s\n", r, err.text);
        uint64_t q = 0, d = 0;
        weir_host_telemetry_counts(b.host, &q, NULL, &d);
        queued += q;
        dropped += d;
        double sum_a = 0, sum_b = 0;
        for (int i = 0; rc == 0 && i < turns; i++) {
            sum_a += a.us[i];
            sum_b += b.us[i];
            all_off[r * turns + i] = a.us[i];
            all_dead[r * turns + i] = b.us[i];
        }
        off[r] = sum_a / turns;
        dead[r] = sum_b / turns;
        ratio[r] = rc == 0 ? sum_b / sum_a : 0;
        side_close(&a);
        close_ms[r] = side_close(&b);
        mock_llm_stop(mock);
        close(fd);
        if (rc != 0)
            return 2;
    }
    int n = turns * rounds;
    double med_off = median(all_off, n), med_dead = median(all_dead, n);
    fprintf(stderr, "bench_telemetry: slowest turns: off %.0f %.0f %.0f, dead %.0f %.0f %.0f us\n",
            all_off[n - 1], all_off[n - 2], all_off[n - 3], all_dead[n - 1], all_dead[n - 2],
            all_dead[n - 3]);
    printf("turns=%d off_us_per_turn=%.1f dead_us_per_turn=%.1f ratio=%.3f off_median_turn_us=%.1f "
           "dead_median_turn_us=%.1f median_turn_ratio=%.3f dead_close_ms=%.1f spans_queued=%llu "
           "dropped_during_turns=%llu rounds=%d\n",
           turns, median(off, rounds), median(dead, rounds), median(ratio, rounds), med_off,
           med_dead, med_dead / med_off, median(close_ms, rounds), (unsigned long long)queued,
           (unsigned long long)dropped, rounds);
    free(all_off);
    free(all_dead);
    return 0;
}
