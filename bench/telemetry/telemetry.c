/*
 * bench/telemetry/telemetry.c - what telemetry costs a turn when the
 * collector never answers (issue #38: "a turn with telemetry pointed at a
 * collector that never answers takes no longer than one without").
 *
 * Each round starts the in-process loopback mock LLM and a dead collector
 * (a socket on 127.0.0.1 that listens and never reads or answers: the
 * kernel completes every TCP handshake, so each export waits for its whole
 * timeout) and runs two phases of --turns one-step turns through the
 * public API, alternating which goes first:
 *   off   a host without telemetry;
 *   dead  the same deployment with telemetry.enabled, the endpoint the dead
 *         collector, batch_ms 20 (an export is in flight during most
 *         turns), timeout_ms 1000.
 * Only the turns are timed (send + run_until_idle), not the host's
 * destroy, which gives the exporter one last try (bounded by timeout_ms;
 * printed apart as dead_close_ms).  The median over rounds is printed:
 *
 *   turns=100 off_us_per_turn=... dead_us_per_turn=... ratio=... dead_close_ms=...
 *   spans_queued=... dropped_during_turns=... rounds=5
 *
 * It never fails on timing: exit 0 when every turn completed with an
 * answer, 2 on a setup or turn error.  Options: --turns N (100), --rounds R (5).
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

typedef struct phase {
    double us_per_turn, close_ms;
    uint64_t queued, dropped;
} phase;

/* --turns one-step turns on a fresh host; `dead_port` > 0: telemetry on. */
static int run_phase(int mock_port, int dead_port, int turns, int round, phase *out) {
    char dir[] = "/tmp/weir-bench-telemetry.XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    json_t *cfg = mock_llm_openai_deployment(WEIR_BENCH_OPENAI_PLUGIN, mock_port, dir);
    if (cfg && dead_port > 0) {
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", dead_port);
        json_object_set_new(cfg, "telemetry",
                            json_pack("{s:b, s:s, s:i, s:i}", "enabled", 1, "endpoint", url,
                                      "batch_ms", 20, "timeout_ms", 1000));
    }
    weir_error err;
    weir_error_clear(&err);
    weir_host *host = NULL;
    weir_agent *agent = NULL;
    char sid[32];
    snprintf(sid, sizeof sid, "t%d-%s", round, dead_port > 0 ? "dead" : "off");
    weir_agent_options ao = WEIR_AGENT_OPTIONS_INIT;
    ao.session_id = sid;
    int rc = -1;
    if (cfg && weir_host_create(cfg, &host, &err) == WEIR_OK &&
        weir_agent_open(host, &ao, &agent, &err) == WEIR_OK) {
        rc = 0;
        double t0 = now_us();
        for (int i = 0; i < turns && rc == 0; i++) {
            char text[64];
            snprintf(text, sizeof text, "turn %d", i);
            if (weir_agent_send_text(agent, text, WEIR_SEND_FOLLOWUP, &err) != WEIR_OK ||
                weir_agent_run_until_idle(agent, &err) != WEIR_OK ||
                bench_turn_ok(agent, sid, &err) != WEIR_OK)
                rc = -1;
        }
        out->us_per_turn = (now_us() - t0) / turns;
    }
    if (rc != 0)
        fprintf(stderr, "bench_telemetry: %s: %s\n", sid, err.text);
    weir_host_telemetry_counts(host, &out->queued, NULL, &out->dropped);
    weir_agent_close(agent);
    double c0 = now_us();
    weir_host_destroy(host);
    out->close_ms = (now_us() - c0) / 1000;
    json_decref(cfg);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
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
    if (turns < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_telemetry: --turns >= 1, --rounds 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    double off[MAX_ROUNDS], dead[MAX_ROUNDS], ratio[MAX_ROUNDS], close_ms[MAX_ROUNDS];
    uint64_t queued = 0, dropped = 0;
    for (int r = 0; r < rounds; r++) {
        mock_llm *mock = NULL;
        int dead_port = 0;
        int fd = dead_collector(&dead_port);
        if (fd < 0 || mock_llm_start("{\"loop\": true, \"requests\": [{\"text\": \"An answer.\"}]}",
                                     &mock) != 0)
            return 2;
        phase a = {0}, b = {0};
        int port = mock_llm_port(mock);
        int rc = r % 2 ? run_phase(port, dead_port, turns, r, &b) | run_phase(port, 0, turns, r, &a)
                       : run_phase(port, 0, turns, r, &a) | run_phase(port, dead_port, turns, r, &b);
        mock_llm_stop(mock);
        close(fd);
        if (rc != 0)
            return 2;
        off[r] = a.us_per_turn;
        dead[r] = b.us_per_turn;
        ratio[r] = b.us_per_turn / a.us_per_turn;
        close_ms[r] = b.close_ms;
        queued += b.queued;
        dropped += b.dropped;
    }
    printf("turns=%d off_us_per_turn=%.1f dead_us_per_turn=%.1f ratio=%.3f dead_close_ms=%.1f "
           "spans_queued=%llu dropped_during_turns=%llu rounds=%d\n",
           turns, median(off, rounds), median(dead, rounds), median(ratio, rounds),
           median(close_ms, rounds), (unsigned long long)queued, (unsigned long long)dropped,
           rounds);
    return 0;
}
