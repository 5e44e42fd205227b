/*
 * bench/agents/agents.c - many agents open at once in one process (issue #15:
 * "1,000 agents in one process (the embedding API, one mock server): RSS per
 * agent <= 64 KiB beyond its history, and aggregate steps/s printed").
 *
 * One host (provider-openai, fsync none, the file store) and one loopback
 * mock LLM (tests/support/mock_llm) in a forked child process, so the
 * requests it records do not count here.  After one warm-up session (opened,
 * run, closed: the one-time costs of libcurl, the TLS libraries and the
 * plugins are paid before the first figure) the bench
 *   1. reads the process's RSS (rss_base),
 *   2. opens --agents agents (weir_agent_open) and reads it again (rss_open),
 *   3. runs --steps one-step turns on every agent, round-robin (each turn is
 *      weir_agent_send_text + weir_agent_run_until_idle on the calling
 *      thread; with --threads T, T threads share the agents, each agent on
 *      one thread), timing the loop, and reads RSS after the first round
 *      and after the last (rss_run),
 *   4. sums each agent's history: the size of its log file (the session's
 *      history as stored) and the serialized size (compact JSON) of
 *      weir_agent_messages (what the model sees),
 *   5. closes every agent (timed) and reads RSS and the heap a last time.
 * The floor of the same run: the same number of turns run in sequential
 * sessions of --steps turns (open, run, close; one agent open at a time; at
 * most 200 sessions), so steps_ratio = many-open steps/s / sequential
 * steps/s (1.0: holding the other agents open costs the steps nothing).
 *
 * One line:
 *   agents n=1000 steps=3 threads=1 rss_base_kb=... rss_open_kb=...
 *          rss_run_kb=... rss_closed_kb=... open_b_per_agent=...
 *          run_b_per_agent=... log_b_per_agent=... messages_b_per_agent=...
 *          beyond_history_b_per_agent=... beyond_messages_b_per_agent=...
 *          target_b=65536 ratio_to_target=... step_b_per_agent=...
 *          log_step_b_per_agent=... memory_per_log_byte=...
 *          fixed_b_per_agent=... heap_b_per_agent=... heap_closed_b=...
 *          close_us_per_agent=... steps_per_s=... seq_steps_per_s=...
 *          steps_ratio=...
 * where run_b_per_agent = (rss_run - rss_base) / n, beyond_history = that
 * minus the mean log size (the target: <= 65536), beyond_messages = that
 * minus the mean messages size; step_b_per_agent is what one more step
 * adds (RSS after the last round minus after the first, per agent and
 * step), log_step_b_per_agent what it adds to the log, memory_per_log_byte
 * their ratio (what the history costs in memory per byte stored), and
 * fixed_b_per_agent the intercept (an agent with no history; with
 * --steps 1 these are 0); heap_b_per_agent the same difference of
 * the heap in use (glibc mallinfo2: what RSS holds that malloc handed out),
 * heap_closed_b the heap still in use once every agent closed, against
 * rss_base (what closed agents failed to release: the target is about 0;
 * rss_closed stays high because glibc keeps freed pages for reuse).
 * Never fails on the figures: exit 0 when every turn completed, 2 otherwise.
 *
 * Options: --agents N (1000), --steps K (3), --threads T (1).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "mock_llm.h"
#include "testutil.h"
#include "weir/host.h"

#include "../bench_turn.h"

#ifndef WEIR_BENCH_OPENAI_PLUGIN
#error "WEIR_BENCH_OPENAI_PLUGIN (path of weir-provider-openai.so) must be defined"
#endif

#define TARGET_BYTES 65536L

static const char answer[] =
    "Many agents share one host: this reply streams in a few pieces and is "
    "folded into one of a thousand histories.";

/* VmRSS of this process in kB (-1 when unknown). */
static long read_rss(void) {
    long rss = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            rss = strtol(line + 6, NULL, 10);
    fclose(f);
    return rss;
}

/* Bytes of heap in use (malloc'd and not freed), -1 when unknown. */
static long heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (long)(mi.uordblks + mi.hblkhd);
#else
    return -1;
#endif
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int open_agent(weir_host *host, const char *prefix, int n, weir_agent **out,
                      weir_error *err) {
    char sid[48];
    snprintf(sid, sizeof sid, "%s-%d", prefix, n);
    weir_agent_options ao = WEIR_AGENT_OPTIONS_INIT;
    ao.session_id = sid;
    return weir_agent_open(host, &ao, out, err);
}

static int turn(weir_agent *agent, int n, int step, weir_error *err) {
    char text[80];
    snprintf(text, sizeof text, "agent %d, step %d: how much memory do you hold?", n, step);
    int rc = weir_agent_send_text(agent, text, WEIR_SEND_FOLLOWUP, err);
    if (rc == WEIR_OK)
        rc = weir_agent_run_until_idle(agent, err);
    return rc == WEIR_OK ? bench_turn_ok(agent, text, err) : rc;
}

/* One thread's share of the round-robin: agents first, first+stride, ... */
typedef struct runner {
    weir_agent **agents;
    int n, first, stride, from, to; /* steps [from, to) */
    int rc;
    weir_error err;
    pthread_t thread;
} runner;

static void *run_share(void *arg) {
    runner *r = arg;
    weir_error_clear(&r->err);
    r->rc = WEIR_OK;
    for (int s = r->from; s < r->to && r->rc == WEIR_OK; s++)
        for (int i = r->first; i < r->n && r->rc == WEIR_OK; i += r->stride)
            r->rc = turn(r->agents[i], i, s, &r->err);
    return NULL;
}

/* Steps [from, to) of every agent on `nthreads` threads (the calling one
 * too).  @return WEIR_OK, or the first failure (reported on stderr). */
static int run_rounds(weir_agent **agents, int n, int nthreads, int from, int to) {
    runner *rs = calloc((size_t)nthreads, sizeof *rs);
    if (!rs) {
        fprintf(stderr, "bench_agents: out of memory\n");
        return WEIR_E_NOMEM;
    }
    for (int t = 0; t < nthreads; t++)
        rs[t] = (runner){.agents = agents, .n = n, .first = t, .stride = nthreads, .from = from,
                         .to = to};
    int started = 0;
    for (int t = 1; t < nthreads; t++, started++)
        if (pthread_create(&rs[t].thread, NULL, run_share, &rs[t]) != 0)
            break;
    run_share(&rs[0]);
    for (int t = 1; t <= started; t++)
        pthread_join(rs[t].thread, NULL);
    int rc = WEIR_OK;
    if (started != nthreads - 1) {
        fprintf(stderr, "bench_agents: cannot start a thread\n");
        rc = WEIR_E_INTERNAL;
    }
    for (int t = 0; t <= started && rc == WEIR_OK; t++)
        if (rs[t].rc != WEIR_OK) {
            rc = rs[t].rc;
            fprintf(stderr, "bench_agents: %s\n", rs[t].err.text);
        }
    free(rs);
    return rc;
}

/* The mean size of the agents' log files. */
static double mean_log_bytes(weir_agent **agents, int n);

/* The serialized size of the agent's history (compact JSON), 0 when out of
 * memory. */
static size_t history_bytes(weir_agent *agent) {
    json_t *msgs = weir_agent_messages(agent);
    size_t n = msgs ? json_dumpb(msgs, NULL, 0, JSON_COMPACT) : 0;
    json_decref(msgs);
    return n;
}

static long file_bytes(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 ? (long)st.st_size : 0;
}

static double mean_log_bytes(weir_agent **agents, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)file_bytes(weir_agent_log_path(agents[i]));
    return sum / n;
}

int main(int argc, char **argv) {
    int nagents = 1000, steps = 3, nthreads = 1;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(argv[i], "--agents") == 0)
            nagents = atoi(v);
        else if (v && strcmp(argv[i], "--steps") == 0)
            steps = atoi(v);
        else if (v && strcmp(argv[i], "--threads") == 0)
            nthreads = atoi(v);
        else
            nagents = -1;
    }
    if (nagents < 1 || steps < 1 || nthreads < 1 || nthreads > 64) {
        fprintf(stderr, "usage: %s [--agents N] [--steps K] [--threads T (1..64)]\n", argv[0]);
        return 2;
    }
    if (nthreads > nagents)
        nthreads = nagents;
    setenv("WEIR_PLUGIN_PATH", "", 1);
    char script[512];
    snprintf(script, sizeof script,
             "{\"loop\":true,\"requests\":[{\"text\":\"%s\",\"chunk_size\":16,"
             "\"usage\":{\"input_tokens\":100,\"output_tokens\":30}}]}",
             answer);
    char *dir = wt_tmpdir("bench-agents");
    if (!dir)
        return 2;
    pid_t child = -1;
    int keep = -1;
    int port = mock_llm_fork(script, &child, &keep);
    json_t *cfg =
        port > 0 ? mock_llm_openai_deployment(WEIR_BENCH_OPENAI_PLUGIN, port, dir) : NULL;
    weir_agent **agents = calloc((size_t)nagents, sizeof *agents);
    weir_error err;
    weir_error_clear(&err);
    weir_host *host = NULL;
    int status = 2;
    if (!agents || !cfg || weir_host_create(cfg, &host, &err) != WEIR_OK) {
        fprintf(stderr, "bench_agents: %s\n",
                port <= 0 ? "cannot start the mock" : agents && cfg ? err.text : "out of memory");
        goto done;
    }

    /* warm-up, then the floor: sequential sessions of `steps` turns, as many
     * turns in all as the many-open phase runs (at most 200 sessions) */
    int seq_sessions = nagents < 200 ? nagents : 200;
    double seq_s = 0;
    for (int n = -1; n < seq_sessions; n++) {
        weir_agent *a = NULL;
        int rc = open_agent(host, "seq", n + 1, &a, &err);
        double t0 = now_s();
        for (int s = 0; s < steps && rc == WEIR_OK; s++)
            rc = turn(a, n, s, &err);
        if (n >= 0)
            seq_s += now_s() - t0;
        weir_agent_close(a);
        if (rc != WEIR_OK) {
            fprintf(stderr, "bench_agents: sequential session %d: %s\n", n + 1, err.text);
            goto done;
        }
    }

    long rss_base = read_rss(), heap_base = heap_in_use();
    for (int i = 0; i < nagents; i++)
        if (open_agent(host, "many", i, &agents[i], &err) != WEIR_OK) {
            fprintf(stderr, "bench_agents: open agent %d: %s\n", i, err.text);
            goto done;
        }
    long rss_open = read_rss(), heap_open = heap_in_use();

    /* the first step of every agent, then the others: the difference is
     * what a step adds (history) and the intercept what an agent costs */
    double t0 = now_s();
    int rc = run_rounds(agents, nagents, nthreads, 0, 1);
    double first_s = now_s() - t0;
    long rss_one = read_rss();
    double log_one = mean_log_bytes(agents, nagents);
    t0 = now_s();
    if (rc == WEIR_OK)
        rc = run_rounds(agents, nagents, nthreads, 1, steps);
    double run_s = first_s + (now_s() - t0);
    if (rc != WEIR_OK)
        goto done;
    long rss_run = read_rss(), heap_run = heap_in_use();

    double hist = 0, logb = mean_log_bytes(agents, nagents);
    for (int i = 0; i < nagents; i++)
        hist += (double)history_bytes(agents[i]);
    hist /= nagents;
    double c0 = now_s();
    for (int i = 0; i < nagents; i++) {
        weir_agent_close(agents[i]);
        agents[i] = NULL;
    }
    double close_s = now_s() - c0;
    long rss_closed = read_rss(), heap_closed = heap_in_use();

    double open_b = (double)(rss_open - rss_base) * 1024.0 / nagents;
    double run_b = (double)(rss_run - rss_base) * 1024.0 / nagents;
    double beyond = run_b - logb, beyond_msgs = run_b - hist;
    double step_b = 0, log_step_b = 0, fixed_b = 0;
    if (steps > 1) {
        step_b = (double)(rss_run - rss_one) * 1024.0 / nagents / (steps - 1);
        log_step_b = (logb - log_one) / (steps - 1);
        fixed_b = (double)(rss_one - rss_base) * 1024.0 / nagents - step_b;
    }
    double heap_b = (double)(heap_run - heap_base) / nagents;
    double turns = (double)nagents * steps;
    double sps = run_s > 0 ? turns / run_s : 0;
    double seq_sps = seq_s > 0 ? (double)seq_sessions * steps / seq_s : 0;
    printf("agents n=%d steps=%d threads=%d rss_base_kb=%ld rss_open_kb=%ld rss_run_kb=%ld "
           "rss_closed_kb=%ld open_b_per_agent=%.0f run_b_per_agent=%.0f "
           "log_b_per_agent=%.0f messages_b_per_agent=%.0f beyond_history_b_per_agent=%.0f "
           "beyond_messages_b_per_agent=%.0f target_b=%ld ratio_to_target=%.2f "
           "step_b_per_agent=%.0f log_step_b_per_agent=%.0f memory_per_log_byte=%.1f "
           "fixed_b_per_agent=%.0f heap_b_per_agent=%.0f heap_closed_b=%ld "
           "close_us_per_agent=%.1f steps_per_s=%.0f seq_steps_per_s=%.0f steps_ratio=%.2f\n",
           nagents, steps, nthreads, rss_base, rss_open, rss_run, rss_closed, open_b, run_b, logb,
           hist, beyond, beyond_msgs, TARGET_BYTES, beyond / (double)TARGET_BYTES, step_b,
           log_step_b, log_step_b > 0 ? step_b / log_step_b : 0, fixed_b, heap_b,
           heap_closed - heap_base, close_s * 1e6 / nagents, sps, seq_sps,
           seq_sps > 0 ? sps / seq_sps : 0);
    (void)heap_open;
    status = 0;
done:
    if (agents)
        for (int i = 0; i < nagents; i++)
            weir_agent_close(agents[i]);
    free(agents);
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
