/*
 * bench/store/store.c - bench_store_postgres: what the PostgreSQL store costs
 * (issue #16 "numbers"), against a floor measured in the same run.
 *
 *   bench_store_postgres --conninfo STR [--events N] [--lease-ms L]
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

int main(int argc, char **argv) {
    const char *conninfo = NULL;
    long events = 3000, lease_ms = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--conninfo"))
            conninfo = argv[i + 1];
        else if (!strcmp(argv[i], "--events"))
            events = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--lease-ms"))
            lease_ms = atol(argv[i + 1]);
    }
    if (!conninfo || events < 6 || lease_ms < 100) {
        fputs("usage: bench_store_postgres --conninfo STR [--events N>=6] [--lease-ms L>=100]\n",
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
    return status;
}
