/*
 * bench/agents/rss_floor.c - the peak-RSS floor of bench/agents/run_rss.sh:
 * the least a process that talks to an LLM over libcurl holds.  It links
 * libcurl only (as the system builds it: its TLS, Kerberos, LDAP... libraries
 * come with it), calls curl_global_init(CURL_GLOBAL_DEFAULT) as weir does,
 * and POSTs --requests small Chat Completions bodies on one keep-alive easy
 * handle, reading every byte of each streamed answer.  At exit it prints
 *   rss_floor requests=50 hwm_kb=... rss_kb=...
 * (VmHWM and VmRSS of /proc/self/status).  Exit 0 when every request got a
 * 2xx answer, 2 otherwise.
 *
 * Usage: bench_rss_floor --url http://127.0.0.1:PORT/v1/chat/completions
 *                        [--requests N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

static void read_status(long *hwm, long *rss) {
    *hwm = *rss = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) == 0)
            *hwm = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "VmRSS:", 6) == 0)
            *rss = strtol(line + 6, NULL, 10);
    }
    fclose(f);
}

/* Count the bytes (the floor reads them, it does not decode them). */
static size_t on_body(char *data, size_t size, size_t n, void *ud) {
    (void)data;
    *(size_t *)ud += size * n;
    return size * n;
}

int main(int argc, char **argv) {
    const char *url = NULL;
    int requests = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--url") == 0)
            url = argv[i + 1];
        else if (strcmp(argv[i], "--requests") == 0)
            requests = atoi(argv[i + 1]);
    }
    if (!url || requests < 1) {
        fprintf(stderr, "usage: %s --url URL [--requests N]\n", argv[0]);
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "bench_rss_floor: curl_global_init failed\n");
        return 2;
    }
    static const char body[] =
        "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"max_tokens\":256,\"messages\":[{\"role\":\"user\",\"content\":\"compute powers\"}]}";
    CURL *easy = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = headers ? curl_slist_append(headers, "Authorization: Bearer k") : NULL;
    int status = easy && headers ? 0 : 2;
    size_t bytes = 0;
    for (int i = 0; i < requests && status == 0; i++) {
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &bytes);
        long code = 0;
        if (curl_easy_perform(easy) != CURLE_OK ||
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code < 200 ||
            code > 299) {
            fprintf(stderr, "bench_rss_floor: request %d failed (HTTP %ld)\n", i, code);
            status = 2;
        }
    }
    long hwm, rss;
    read_status(&hwm, &rss);
    if (status == 0)
        printf("rss_floor requests=%d bytes=%zu hwm_kb=%ld rss_kb=%ld\n", requests, bytes, hwm,
               rss);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
    return status;
}
