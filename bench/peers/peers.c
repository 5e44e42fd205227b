/*
 * bench/peers/peers.c - weir in the peer benchmark's loop (issue #15): S
 * sessions of K one-step turns each, in one process, through the public
 * embedding API, against the mock at --base-url (weir-mock-llm, started by
 * bench/peers/run.sh, which runs the raw Python client against the same
 * mock).  Only the loop is timed (the host is built before).  One line:
 *
 *   peer name=NAME sessions=S steps=K loop_ms_per_step=... peak_rss_mb=...
 *       [open_us_per_session=... close_us_per_session=... send_us_per_step=...
 *        run_us_per_step=...]
 *
 * (the bracketed fields on weir's rows: wall time of weir_agent_open and
 * weir_agent_close per session, of weir_agent_send_text and
 * weir_agent_run_until_idle per step; they add up to the loop)
 * NAME: weir (provider-openai, fsync none), weir+policy (compaction-basic
 * with a known window and retry as well), weir-fsync-step (fsync step), and
 * c-raw: no weir at all, the C floor of the same loop (raw_client.py's loop
 * in C: libcurl on one keep-alive connection, the body dumped with jansson,
 * each SSE data line parsed with jansson, the text assembled and appended).
 * Exit 0 when every turn completed, 2 otherwise.
 *
 * Options: --base-url URL (required), --sessions S (200), --steps K (5),
 * --variant plain|policy|fsync-step|raw (plain), --dir DIR (the session dir;
 * required, unused by raw).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "weir/host.h"

#include "../bench_turn.h"

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

/* c-raw: one response's SSE lines, each `data:` line's delta text appended
 * to `text`. */
typedef struct {
    char line[8192];
    size_t n;
    char text[4096];
    size_t tn;
    bool bad;
} raw_sse;

static void raw_sse_line(raw_sse *r) {
    if (r->n < 6 || strncmp(r->line, "data: ", 6) != 0 || strcmp(r->line, "data: [DONE]") == 0)
        return;
    json_t *chunk = json_loadb(r->line + 6, r->n - 6, 0, NULL);
    size_t i;
    json_t *choice;
    json_array_foreach(json_object_get(chunk, "choices"), i, choice) {
        const char *piece =
            json_string_value(json_object_get(json_object_get(choice, "delta"), "content"));
        size_t len = piece ? strlen(piece) : 0;
        if (r->tn + len >= sizeof r->text)
            r->bad = true;
        else if (len) {
            memcpy(r->text + r->tn, piece, len);
            r->tn += len;
        }
    }
    if (!chunk)
        r->bad = true;
    json_decref(chunk);
}

static size_t raw_write(char *data, size_t size, size_t nmemb, void *ud) {
    raw_sse *r = ud;
    for (size_t i = 0; i < size * nmemb; i++) {
        if (data[i] == '\n') {
            r->line[r->n] = '\0';
            raw_sse_line(r);
            r->n = 0;
        } else if (data[i] != '\r' && r->n + 1 < sizeof r->line) {
            r->line[r->n++] = data[i];
        }
    }
    return size * nmemb;
}

/* The c-raw loop; returns 0 when every step got a non-empty answer. */
static int raw_loop(const char *base, int sessions, int steps) {
    char url[1024];
    snprintf(url, sizeof url, "%s/chat/completions", base);
    CURL *curl = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = h ? curl_slist_append(h, "Accept: text/event-stream") : NULL;
    h = h ? curl_slist_append(h, "Authorization: Bearer bench-key") : NULL;
    if (!curl || !h) {
        curl_slist_free_all(h);
        curl_easy_cleanup(curl);
        return 2;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, raw_write);
    int rc = 0;
    raw_sse *r = malloc(sizeof *r);
    for (int s = 0; r && s < sessions && rc == 0; s++) {
        json_t *messages = json_array();
        for (int k = 0; k < steps && rc == 0; k++) {
            char text[64];
            snprintf(text, sizeof text, "session %d, step %d: tell me about peers", s, k);
            json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "user", "content",
                                                      text));
            json_t *req = json_pack("{s:s, s:i, s:b, s:{s:b}, s:O}", "model", "bench",
                                    "max_tokens", 256, "stream", 1, "stream_options",
                                    "include_usage", 1, "messages", messages);
            char *body = json_dumps(req, JSON_COMPACT);
            json_decref(req);
            r->n = r->tn = 0;
            r->bad = false;
            curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
            long status = 0;
            if (!body || curl_easy_perform(curl) != CURLE_OK ||
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK ||
                status != 200 || r->bad || r->tn == 0) {
                fprintf(stderr, "bench_peers: raw request failed (status %ld)\n", status);
                rc = 2;
            }
            free(body);
            json_array_append_new(messages, json_pack("{s:s, s:s%}", "role", "assistant",
                                                      "content", r->text, r->tn));
        }
        json_decref(messages);
    }
    if (!r)
        rc = 2;
    free(r);
    curl_slist_free_all(h);
    curl_easy_cleanup(curl);
    return rc;
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
        (strcmp(variant, "plain") && strcmp(variant, "policy") && strcmp(variant, "fsync-step") &&
         strcmp(variant, "raw"))) {
        fprintf(stderr, "usage: %s --base-url URL --dir DIR [--sessions S] [--steps K]"
                        " [--variant plain|policy|fsync-step|raw]\n", argv[0]);
        return 2;
    }
    if (strcmp(variant, "raw") == 0) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        double t0 = now_ms();
        int rc = raw_loop(base, sessions, steps);
        double loop = now_ms() - t0;
        curl_global_cleanup();
        if (rc == 0)
            printf("peer name=c-raw sessions=%d steps=%d loop_ms_per_step=%.3f peak_rss_mb=%.1f\n",
                   sessions, steps, loop / (sessions * steps), (double)peak_rss_kb() / 1024.0);
        return rc;
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
    double t0 = now_ms(), checks = 0; /* the time of the outcome checks, not counted */
    double open_ms = 0, send_ms = 0, run_ms = 0, close_ms = 0; /* where the loop goes */
    for (int s = 0; s < sessions && rc == WEIR_OK; s++) {
        char sid[32], text[64];
        snprintf(sid, sizeof sid, "peer-%d", s);
        weir_agent_options ao = WEIR_AGENT_OPTIONS_INIT;
        ao.session_id = sid;
        weir_agent *agent = NULL;
        double o0 = now_ms();
        rc = weir_agent_open(host, &ao, &agent, &err);
        open_ms += now_ms() - o0;
        for (int k = 0; k < steps && rc == WEIR_OK; k++) {
            snprintf(text, sizeof text, "session %d, step %d: tell me about peers", s, k);
            double s0 = now_ms();
            rc = weir_agent_send_text(agent, text, WEIR_SEND_FOLLOWUP, &err);
            double r0 = now_ms();
            send_ms += r0 - s0;
            if (rc == WEIR_OK)
                rc = weir_agent_run_until_idle(agent, &err);
            run_ms += now_ms() - r0;
            double c0 = now_ms(); /* bench_turn.h: the turn completed with an answer */
            char what[64];
            snprintf(what, sizeof what, "session %d, step %d", s, k);
            if (rc == WEIR_OK)
                rc = bench_turn_ok(agent, what, &err);
            checks += now_ms() - c0;
        }
        double x0 = now_ms();
        weir_agent_close(agent);
        close_ms += now_ms() - x0;
    }
    double loop = now_ms() - t0 - checks;
    weir_host_destroy(host);
    json_decref(cfg);
    if (rc != WEIR_OK) {
        fprintf(stderr, "bench_peers: %s\n", err.text);
        return 2;
    }
    const char *name = !strcmp(variant, "plain")    ? "weir"
                       : !strcmp(variant, "policy") ? "weir+policy"
                                                    : "weir-fsync-step";
    printf("peer name=%s sessions=%d steps=%d loop_ms_per_step=%.3f peak_rss_mb=%.1f"
           " open_us_per_session=%.1f close_us_per_session=%.1f send_us_per_step=%.1f"
           " run_us_per_step=%.1f\n",
           name, sessions, steps, loop / (sessions * steps), (double)peak_rss_kb() / 1024.0,
           1000.0 * open_ms / sessions, 1000.0 * close_ms / sessions,
           1000.0 * send_ms / (sessions * steps), 1000.0 * run_ms / (sessions * steps));
    return 0;
}
