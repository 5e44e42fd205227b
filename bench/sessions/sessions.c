/*
 * bench/sessions/sessions.c - memory against the number of finished sessions
 * in one process (issue #15: "RSS after 3,000 sequential sessions within 10%
 * of RSS after 200; a closed agent releases everything it held, its cache
 * entries included").
 *
 * One host (provider-openai, fsync none) runs S sequential short sessions:
 * each opens an agent, runs --steps turns (send_text + run_until_idle) and
 * closes it.  The loopback mock LLM (tests/support/mock_llm) runs in a forked
 * child process, so the requests it records do not count here.  After
 * --small sessions (200) and after --large sessions (3000) the process's
 * current RSS (VmRSS) and peak RSS (VmHWM) are read from /proc/self/status,
 * and one line is printed:
 *   sessions small=200 large=3000 steps=3 rss_small_kb=... rss_large_kb=...
 *            hwm_small_kb=... hwm_large_kb=... rss_ratio=... hwm_ratio=...
 * The target is rss_ratio <= 1.10.  Never fails on the figures: exit 0 when
 * every session completed, 2 otherwise.
 *
 * Options: --small N, --large N (1 <= small < large), --steps K (3).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "mock_llm.h"
#include "testutil.h"
#include "weir/host.h"

#include "../bench_turn.h"

#ifndef WEIR_BENCH_OPENAI_PLUGIN
#error "WEIR_BENCH_OPENAI_PLUGIN (path of weir-provider-openai.so) must be defined"
#endif

static const char answer[] =
    "Sessions come and go: this reply streams in a few pieces, is decoded, "
    "logged and folded into the history like any other.";

/* VmRSS and VmHWM of this process, in kB (-1 when unknown). */
static void read_rss(long *rss, long *hwm) {
    *rss = *hwm = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0)
            *rss = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "VmHWM:", 6) == 0)
            *hwm = strtol(line + 6, NULL, 10);
    }
    fclose(f);
}

/* One session of `steps` turns. */
static int session(weir_host *host, int n, int steps, weir_error *err) {
    char sid[32], text[64];
    snprintf(sid, sizeof sid, "s-%d", n);
    weir_agent_options ao = WEIR_AGENT_OPTIONS_INIT;
    ao.session_id = sid;
    weir_agent *agent = NULL;
    int rc = weir_agent_open(host, &ao, &agent, err);
    for (int i = 0; i < steps && rc == WEIR_OK; i++) {
        snprintf(text, sizeof text, "session %d, step %d: tell me about memory", n, i);
        rc = weir_agent_send_text(agent, text, WEIR_SEND_FOLLOWUP, err);
        if (rc == WEIR_OK)
            rc = weir_agent_run_until_idle(agent, err);
        if (rc == WEIR_OK)
            rc = bench_turn_ok(agent, sid, err);
    }
    weir_agent_close(agent);
    return rc;
}

int main(int argc, char **argv) {
    int small = 200, large = 3000, steps = 3;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(argv[i], "--small") == 0)
            small = atoi(v);
        else if (v && strcmp(argv[i], "--large") == 0)
            large = atoi(v);
        else if (v && strcmp(argv[i], "--steps") == 0)
            steps = atoi(v);
        else
            small = -1;
    }
    if (small < 1 || large <= small || steps < 1) {
        fprintf(stderr, "usage: %s [--small N] [--large N] [--steps K]\n", argv[0]);
        return 2;
    }
    setenv("WEIR_PLUGIN_PATH", "", 1);
    char script[512];
    snprintf(script, sizeof script,
             "{\"loop\":true,\"requests\":[{\"text\":\"%s\",\"chunk_size\":16,"
             "\"usage\":{\"input_tokens\":100,\"output_tokens\":30}}]}",
             answer);
    char *dir = wt_tmpdir("bench-sessions");
    if (!dir)
        return 2;
    pid_t child = -1;
    int keep = -1;
    int port = mock_llm_fork(script, &child, &keep);
    json_t *cfg =
        port > 0 ? mock_llm_openai_deployment(WEIR_BENCH_OPENAI_PLUGIN, port, dir) : NULL;
    weir_error err;
    weir_error_clear(&err);
    weir_host *host = NULL;
    int status = 2;
    long rss_s = -1, hwm_s = -1, rss_l = -1, hwm_l = -1;
    if (cfg && weir_host_create(cfg, &host, &err) == WEIR_OK) {
        status = 0;
        for (int n = 1; n <= large && status == 0; n++) {
            if (session(host, n, steps, &err) != WEIR_OK) {
                fprintf(stderr, "bench_sessions: session %d: %s\n", n, err.text);
                status = 2;
            } else if (n == small) {
                read_rss(&rss_s, &hwm_s);
            } else if (n == large) {
                read_rss(&rss_l, &hwm_l);
            }
        }
    } else {
        fprintf(stderr, "bench_sessions: %s\n", port > 0 ? err.text : "cannot start the mock");
    }
    if (status == 0)
        printf("sessions small=%d large=%d steps=%d rss_small_kb=%ld rss_large_kb=%ld "
               "hwm_small_kb=%ld hwm_large_kb=%ld rss_ratio=%.2f hwm_ratio=%.2f\n",
               small, large, steps, rss_s, rss_l, hwm_s, hwm_l, (double)rss_l / (double)rss_s,
               (double)hwm_l / (double)hwm_s);
    weir_host_destroy(host);
    json_decref(cfg);
    if (keep >= 0)
        close(keep);
    if (child > 0)
        waitpid(child, NULL, 0);
    wt_rmtree(dir);
    free(dir);
    return status;
}
