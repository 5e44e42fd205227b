/*
 * bench/store/store.c - bench_store_postgres: what the PostgreSQL store costs
 * (issue #16 "numbers"), against a floor measured in the same run.
 *
 *   bench_store_postgres --conninfo STR [--events N] [--lease-ms L] [--turns T]
 *
 * 1. Appends per second through pg_store.c (each append one committed
 *    statement): one event per append, and turns of six events per append
 *    (the batch a step writes).  Floor: the same lines written to a file with
 *    write(2), fdatasync after each append (fsync "always", the same
 *    durability), in a temp dir.  ratio = floor appends/s / store appends/s.
 * 2. Takeover latency: a child process takes a lease of L ms and appends;
 *    it is killed with SIGKILL; the parent retries the lease every 5 ms and
 *    reports the time from the kill to the granted lease (expected: about
 *    L, the lease's remaining time).
 * 3. Per-step overhead: a real agent (libweir, provider-scripted answering
 *    "ok" at once, no tools: one step per turn) runs --turns turns with
 *    the file store (fsync "step", fdatasync at its checkpoints) and with
 *    the PostgreSQL store (each append a committed statement); ms per step
 *    of each, their difference and ratio.  The plugins are found next to
 *    the binary (<build>/lib/weir/plugins) or in $WEIR_TEST_PLUGIN_DIR.
 *
 * tests/pg/server.sh starts a throwaway server (bench/README.md).  Figures
 * only: the exit status is non-zero when an append or a lease failed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pg_store.h"
#include "weir/weir.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const char *line(char *buf, size_t n, long seq) {
    snprintf(buf, n,
             "{\"seq\":%ld,\"time\":1700000000000,\"type\":\"assistant/message\",\"data\":"
             "{\"turn\":1,\"step\":1,\"message\":{\"role\":\"assistant\",\"content\":"
             "[{\"type\":\"text\",\"text\":\"2 to the power 10 is 1024.\"}]}},"
             "\"surface_op\":\"append\"}",
             seq);
    return buf;
}

/* Appends of `batch` events until `events`; events/s, or -1 on failure. */
static double pg_rate(pgs *db, const char *id, int64_t epoch, long events, size_t batch) {
    char bufs[6][512];
    const char *lines[6];
    double t0 = now_s();
    for (long seq = 0; seq < events; seq += (long)batch) {
        for (size_t i = 0; i < batch; i++)
            lines[i] = line(bufs[i], sizeof bufs[i], seq + (long)i);
        if (pgs_append(db, id, epoch, seq, lines, batch) != PGS_OK) {
            fprintf(stderr, "bench_store_postgres: %s\n", pgs_error(db));
            return -1;
        }
    }
    return (double)events / (now_s() - t0);
}

static double file_rate(long events, size_t batch) {
    char dir[] = "/tmp/weir-bench-store.XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    char path[64];
    snprintf(path, sizeof path, "%s/s.jsonl", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    char chunk[6 * 512];
    double t0 = now_s();
    for (long seq = 0; seq < events; seq += (long)batch) {
        size_t len = 0;
        for (size_t i = 0; i < batch; i++) {
            char b[512];
            len += (size_t)snprintf(chunk + len, sizeof chunk - len, "%s\n",
                                    line(b, sizeof b, seq + (long)i));
        }
        if (write(fd, chunk, len) != (ssize_t)len || fdatasync(fd) != 0)
            return -1;
    }
    double r = (double)events / (now_s() - t0);
    close(fd);
    unlink(path);
    rmdir(dir);
    return r;
}

static int takeover(const char *conninfo, long lease_ms, double *ms) {
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        pgs *db = NULL;
        int64_t e, next;
        if (pgs_open(conninfo, &db) != PGS_OK ||
            pgs_lease(db, "bench-takeover", "doomed", lease_ms, &e, &next) != PGS_OK)
            _exit(1);
        for (;;)
            pause(); /* holds the lease until killed */
    }
    /* wait until the child holds the lease */
    pgs *db = NULL;
    if (pgs_open(conninfo, &db) != PGS_OK)
        return -1;
    int rc = -1;
    for (int i = 0; i < 2000; i++) {
        bool live;
        char owner[64];
        if (pgs_probe(db, "bench-takeover", &live, owner, sizeof owner) == PGS_OK && live &&
            strcmp(owner, "doomed") == 0) {
            rc = 0;
            break;
        }
        usleep(5000);
    }
    kill(pid, SIGKILL);
    double t0 = now_s();
    waitpid(pid, NULL, 0);
    if (rc == 0) {
        rc = -1;
        int64_t e, next;
        for (int i = 0; i < 20000; i++) {
            if (pgs_lease(db, "bench-takeover", "heir", 60000, &e, &next) == PGS_OK) {
                *ms = (now_s() - t0) * 1e3;
                rc = 0;
                break;
            }
            usleep(5000);
        }
    }
    pgs_close(db);
    return rc;
}

/* The built plugins' directory (malloc'd), or NULL. */
static char *plugin_dir(void) {
    const char *env = getenv("WEIR_TEST_PLUGIN_DIR");
    if (env && *env)
        return strdup(env);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    for (int up = 0; up < 2; up++) { /* <build>/bin/bench_store_postgres -> <build> */
        char *slash = strrchr(exe, '/');
        if (!slash)
            return NULL;
        *slash = '\0';
    }
    char *out = malloc(strlen(exe) + sizeof "/lib/weir/plugins");
    if (out)
        sprintf(out, "%s/lib/weir/plugins", exe);
    return out;
}

/* ms per step of `turns` one-step turns of an agent on store `store_name`
 * ("file" in `dir`, or "pg"); -1 on failure (the reason on stderr). */
static double step_ms(const char *plugins, const char *conninfo, const char *store_name,
                      const char *dir, int turns) {
    char provider[4200], store[4200];
    snprintf(provider, sizeof provider, "%s/weir-provider-scripted.so", plugins);
    snprintf(store, sizeof store, "%s/weir-store-postgres.so", plugins);
    json_t *config = json_pack(
        "{s:{s:s, s:s}, s:{s:s, s:s}, s:[{s:s, s:s, s:{s:[{s:s}], s:b}}, {s:s, s:s, s:{s:s}}]}",
        "agent", "provider", "p", "model", "m", "session", "store", store_name, "dir", dir,
        "plugins", "id", "p", "plugin", provider, "config", "replies", "text", "ok", "loop", 1,
        "id", "pg", "plugin", store, "config", "conninfo", conninfo);
    weir_host *host = NULL;
    weir_agent *agent = NULL;
    weir_error err;
    weir_error_clear(&err);
    double ms = -1;
    char id[64];
    snprintf(id, sizeof id, "bench-steps-%ld-%s", (long)getpid(), store_name);
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_id = id;
    if (!config || weir_host_create(config, &host, &err) != WEIR_OK ||
        weir_agent_open(host, &opts, &agent, &err) != WEIR_OK) {
        fprintf(stderr, "bench_store_postgres: steps on %s: %s\n", store_name, err.text);
        goto out;
    }
    double t0 = 0;
    for (int i = -3; i < turns; i++) { /* three warm-up turns */
        if (i == 0)
            t0 = now_s();
        if (weir_agent_send_text(agent, "go", WEIR_SEND_FOLLOWUP, &err) != WEIR_OK ||
            weir_agent_run_until_idle(agent, &err) != WEIR_OK) {
            fprintf(stderr, "bench_store_postgres: steps on %s: %s\n", store_name, err.text);
            goto out;
        }
    }
    ms = (now_s() - t0) * 1000.0 / turns;
    weir_turn_outcome o = WEIR_TURN_OUTCOME_INIT;
    if (weir_agent_last_turn(agent, &o, &err) != WEIR_OK || strcmp(o.kind, "completed") != 0) {
        fprintf(stderr, "bench_store_postgres: steps on %s: the last turn ended '%s'\n",
                store_name, o.kind);
        ms = -1;
    }
    weir_turn_outcome_clear(&o);
out:
    weir_agent_close(agent);
    weir_host_destroy(host);
    json_decref(config);
    return ms;
}

/* Line 3: per-step overhead, file store against PostgreSQL.  0, or 2. */
static int steps(const char *conninfo, int turns) {
    char *plugins = plugin_dir();
    char dir[] = "/tmp/weir-bench-steps.XXXXXX";
    if (!plugins || !mkdtemp(dir)) {
        free(plugins);
        return 2;
    }
    double file = step_ms(plugins, conninfo, "file", dir, turns);
    double pg = file > 0 ? step_ms(plugins, conninfo, "pg", dir, turns) : -1;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_store_postgres: could not remove %s\n", dir);
    free(plugins);
    if (file <= 0 || pg <= 0)
        return 2;
    printf("store_postgres steps turns=%d file_ms_per_step=%.3f pg_ms_per_step=%.3f "
           "overhead_ms_per_step=%.3f ratio=%.2f\n",
           turns, file, pg, pg - file, pg / file);
    return 0;
}

int main(int argc, char **argv) {
    const char *conninfo = NULL;
    long events = 3000, lease_ms = 1000, turns = 200;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--conninfo"))
            conninfo = argv[i + 1];
        else if (!strcmp(argv[i], "--events"))
            events = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--lease-ms"))
            lease_ms = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--turns"))
            turns = atol(argv[i + 1]);
    }
    if (!conninfo || events < 6 || lease_ms < 100 || turns < 1 || turns > 100000) {
        fputs("usage: bench_store_postgres --conninfo STR [--events N>=6] [--lease-ms L>=100] "
              "[--turns T>=1]\n",
              stderr);
        return 2;
    }
    events -= events % 6;
    pgs *db = NULL;
    if (pgs_open(conninfo, &db) != PGS_OK) {
        fprintf(stderr, "bench_store_postgres: %s\n", pgs_error(db));
        pgs_close(db);
        return 2;
    }
    int status = 0;
    for (size_t batch = 1; batch <= 6; batch += 5) {
        char id[64];
        snprintf(id, sizeof id, "bench-%ld-%zu", (long)getpid(), batch);
        int64_t epoch, next;
        if (pgs_lease(db, id, "bench", 600000, &epoch, &next) != PGS_OK) {
            fprintf(stderr, "bench_store_postgres: %s\n", pgs_error(db));
            status = 2;
            break;
        }
        double pg = pg_rate(db, id, epoch, events, batch);
        double file = file_rate(events, batch);
        if (pg <= 0 || file <= 0) {
            status = 2;
            break;
        }
        printf("store_postgres appends batch=%zu events=%ld pg_events_per_s=%.0f "
               "file_fdatasync_events_per_s=%.0f ratio=%.2f\n",
               batch, events, pg, file, file / pg);
    }
    pgs_close(db);
    double ms = 0;
    if (status == 0 && takeover(conninfo, lease_ms, &ms) == 0)
        printf("store_postgres takeover lease_ms=%ld takeover_ms=%.0f ratio_to_lease=%.2f\n",
               lease_ms, ms, ms / (double)lease_ms);
    else if (status == 0)
        status = 2;
    if (status == 0)
        status = steps(conninfo, (int)turns);
    return status;
}
