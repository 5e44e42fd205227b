/* bench_biglog_parse FILE: the floor a log reader is measured against. Reads
 * FILE line by line (getline) and parses each line with jansson
 * (json_loadb), then frees it: one plain parse pass, nothing kept. Prints
 * `parse lines=N bytes=B` and exits 1 on a line that does not parse. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bench_biglog_parse FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long long lines = 0, bytes = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lines++;
        bytes += (unsigned long long)n;
        json_error_t err;
        json_t *v = json_loadb(line, (size_t)n, 0, &err);
        if (!v || !json_is_object(v)) {
            fprintf(stderr, "%s:%llu: %s\n", argv[1], lines, v ? "not an object" : err.text);
            json_decref(v);
            free(line);
            fclose(f);
            return 1;
        }
        json_decref(v);
    }
    free(line);
    fclose(f);
    printf("parse lines=%llu bytes=%llu\n", lines, bytes);
    return 0;
}
