/*
 * tests/support/mock_llm_main.c - weir-mock-llm, the mock LLM server as a
 * standalone process for script tests and manual runs:
 *
 *   weir-mock-llm --script FILE [--port-file F] [--stats-file F] [--max-requests N]
 *                 [--timeout-s S]
 *
 * Once listening, writes the bare port number to F when given (atomically,
 * via rename) and then prints "port=<n>" on stdout; then it exits by itself after N responses (0 = no
 * limit) or S seconds (default 60), printing "connections=<n>" and
 * "requests=<n>", then "rejections=<n>" (400s for a vendor rule) when there
 * were any.  --stats-file
 * appends one JSON line per answered request as it is answered (mock_llm.h),
 * so a test that kills the server still reads them.  Exit status 0, or 2 on
 * bad usage or a bad script.
 */
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mock_llm.h"

static int usage(void) {
    fputs("usage: weir-mock-llm --script FILE [--port-file F] [--stats-file F] "
          "[--max-requests N] [--timeout-s S]\n",
          stderr);
    return 2;
}

static int parse_long(const char *s, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

static int write_port_file(const char *path, int port) {
    size_t n = strlen(path);
    char *tmp = malloc(n + 5);
    if (!tmp)
        return -1;
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp", 5);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (f) {
        rc = fprintf(f, "%d\n", port) < 0 ? -1 : 0;
        if (fclose(f))
            rc = -1;
        if (rc == 0)
            rc = rename(tmp, path);
    }
    if (rc)
        fprintf(stderr, "weir-mock-llm: cannot write %s\n", path);
    free(tmp);
    return rc;
}

int main(int argc, char **argv) {
    const char *script = NULL, *port_file = NULL, *stats_file = NULL;
    long max_requests = 0, timeout_s = 60;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage();
        if (strcmp(a, "--script") == 0)
            script = v;
        else if (strcmp(a, "--port-file") == 0)
            port_file = v;
        else if (strcmp(a, "--stats-file") == 0)
            stats_file = v;
        else if (strcmp(a, "--max-requests") == 0 && parse_long(v, &max_requests) == 0)
            ;
        else if (strcmp(a, "--timeout-s") == 0 && parse_long(v, &timeout_s) == 0)
            ;
        else
            return usage();
    }
    if (!script)
        return usage();
    mock_llm *m;
    if (mock_llm_start_file(script, &m))
        return 2;
    if (stats_file && mock_llm_stats_file(m, stats_file)) {
        mock_llm_stop(m);
        return 2;
    }
    /* the file first: once "port=" is on stdout, the file exists too */
    if (port_file && write_port_file(port_file, mock_llm_port(m))) {
        mock_llm_stop(m);
        return 2;
    }
    printf("port=%d\n", mock_llm_port(m));
    fflush(stdout);
    /* max_requests 0: never reached, so this waits out the timeout */
    mock_llm_wait_responses(m, max_requests > 0 ? max_requests : LONG_MAX,
                            timeout_s * 1000);
    printf("connections=%ld\nrequests=%ld\n", mock_llm_connections(m), mock_llm_requests(m));
    if (mock_llm_rejections(m) > 0)
        printf("rejections=%ld\n", mock_llm_rejections(m));
    fflush(stdout);
    mock_llm_stop(m);
    return 0;
}
