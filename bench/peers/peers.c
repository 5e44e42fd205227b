/*
 * bench/peers/peers.c - weir in the peer benchmark's loop (issue #15): S
 * sessions of K one-step turns each, in one process, through the public
 * embedding API, against the mock at --base-url (weir-mock-llm, started by
 * bench/peers/run.sh, which runs the raw Python client against the same
 * mock).  Only the loop is timed (the host is built before).  One line:
 *
 *   peer name=NAME sessions=S steps=K loop_ms_per_step=... peak_rss_mb=...
 *
 * NAME: weir (provider-openai, fsync none), weir+policy (compaction-basic
 * with a known window and retry as well), weir-fsync-step (fsync step).
 * Exit 0 when every turn completed, 2 otherwise.
 *
 * Options: --base-url URL (required), --sessions S (200), --steps K (5),
 * --variant plain|policy|fsync-step (plain), --dir DIR (the session dir;
 * required).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "weir/host.h"

#ifndef WEIR_BENCH_PLUGIN_DIR
#error "WEIR_BENCH_PLUGIN_DIR (the directory of the first-party plugins) must be defined"
#endif

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static json_t *deployment(const char *base, const char *dir, const char *variant) {
    bool policy = strcmp(variant, "policy") == 0;
    const char *fsync = strcmp(variant, "fsync-step") == 0 ? "step" : "none";
    json_t *cfg = json_pack(
        "{s:{s:s, s:s, s:i}, s:{s:s, s:s}, s:[s],"
        " s:[{s:s, s:s, s:{s:s, s:s, s:{s:{s:i, s:i}}}}]}",
        "agent", "provider", "openai", "model", "bench", "max_tokens", 256, "session", "dir", dir,
        "fsync", fsync, "plugin_path", WEIR_BENCH_PLUGIN_DIR, "plugins", "id", "openai", "plugin",
        "provider-openai", "config", "base_url", base, "api_key", "bench-key", "models", "bench",
        "context_window", 100000, "max_output", 4096);
    if (cfg && policy) {
        json_t *rows = json_object_get(cfg, "plugins");
        json_array_append_new(rows, json_pack("{s:s, s:s}", "id", "compaction", "plugin",
                                              "compaction-basic"));
        json_array_append_new(rows, json_pack("{s:s, s:s}", "id", "retry", "plugin", "retry"));
    }
    return cfg;
}

int main(int argc, char **argv) {
    const char *base = NULL, *variant = "plain", *dir = NULL;
    int sessions = 200, steps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--base-url"))
            base = argv[i + 1];
        else if (!strcmp(argv[i], "--sessions"))
            sessions = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--variant"))
            variant = argv[i + 1];
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else
            base = NULL;
    }
    if (!base || !dir || sessions < 1 || steps < 1 ||
        (strcmp(variant, "plain") && strcmp(variant, "policy") && strcmp(variant, "fsync-step"))) {
        fprintf(stderr, "usage: %s --base-url URL --dir DIR [--sessions S] [--steps K]"
                        " [--variant plain|policy|fsync-step]\n", argv[0]);
        return 2;
    }
    json_t *cfg = deployment(base, dir, variant);
    weir_error err;
    weir_error_clear(&err);
    weir_host *host = NULL;
    if (!cfg || weir_host_create(cfg, &host, &err) != WEIR_OK) {
        fprintf(stderr, "bench_peers: %s\n", err.text);
        return 2;
    }
    int rc = WEIR_OK;
    double t0 = now_ms();
    for (int s = 0; s < sessions && rc == WEIR_OK; s++) {
        char sid[32], text[64];
        snprintf(sid, sizeof sid, "peer-%d", s);
        weir_agent_options ao = WEIR_AGENT_OPTIONS_INIT;
        ao.session_id = sid;
        weir_agent *agent = NULL;
        rc = weir_agent_open(host, &ao, &agent, &err);
        for (int k = 0; k < steps && rc == WEIR_OK; k++) {
            snprintf(text, sizeof text, "session %d, step %d: tell me about peers", s, k);
            rc = weir_agent_send_text(agent, text, WEIR_SEND_FOLLOWUP, &err);
            if (rc == WEIR_OK)
                rc = weir_agent_run_until_idle(agent, &err);
        }
        weir_agent_close(agent);
    }
    double loop = now_ms() - t0;
    weir_host_destroy(host);
    json_decref(cfg);
    if (rc != WEIR_OK) {
        fprintf(stderr, "bench_peers: %s\n", err.text);
        return 2;
    }
    const char *name = !strcmp(variant, "plain")    ? "weir"
                       : !strcmp(variant, "policy") ? "weir+policy"
                                                    : "weir-fsync-step";
    printf("peer name=%s sessions=%d steps=%d loop_ms_per_step=%.3f peak_rss_mb=%.1f\n", name,
           sessions, steps, loop / (sessions * steps), (double)peak_rss_kb() / 1024.0);
    return 0;
}
