/* bench_biglog_rss OUT CMD [ARG]...: runs CMD, waits for it and writes
 * "WALL_S MAXRSS_KB EXIT" to OUT (as `/usr/bin/time -o OUT -f "%e %M %x"`
 * does), for machines without GNU time. EXIT is the command's exit status,
 * or 128 + the signal that killed it. Exits with the same status. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_biglog_rss OUT CMD [ARG]...\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 127;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 127;
    }
    fprintf(out, "%.2f %ld %d\n", wall, ru.ru_maxrss, code);
    fclose(out);
    return code;
}
