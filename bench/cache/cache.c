/*
 * bench/cache/cache.c - what prompt caching saves on a long tool loop (issue
 * #32, Done-when): the billed input cost of a 40-step session against the
 * append-only ideal, in one run.
 *
 * A host in the program drives weir against the project's mock LLM
 * (tests/support/mock_llm.c, in-process), whose vendor rules compute usage
 * from the prompt: Anthropic cache_control breakpoints with the 20-block
 * lookback and the model's minimum cacheable length, OpenAI's automatic
 * prefix caching (1024 tokens, then 128-token steps, per prompt_cache_key).
 * The deployment: the provider row, system-prompt with a 6,000-character
 * prompt, drvtest-tools with one tool whose results are a few hundred
 * characters, and compaction-basic.  The session: two turns of 20 steps (19
 * tool calls and an answer each); the compaction runs add one manual
 * compaction (weir_agent_compact) between them, in the middle of the 40
 * steps; its summary request is answered by the mock's "aside".
 *
 * The usage is read back from the session log, as weir recorded it: every
 * assistant/message's and compaction/summary's `usage` (input_tokens,
 * cache_read_tokens, cache_write_tokens), in request order.  For request i,
 * P_i = input + read + write is its prompt as the mock counted it, and
 *
 *   billed_i = input + 0.1 x read + 1.25 x write         (Anthropic's prices
 *              relative to the base input price: platform.claude.com/docs/en/
 *              build-with-claude/prompt-caching, "Pricing", 5-minute writes)
 *   ideal_i  = 0.1 x min(P_i-1, P_i) + 1.25 x max(0, P_i - P_i-1)   (P_0 = 0)
 *
 * the ideal being the append-only one: each request reads all of the
 * previous one's prompt and writes the rest.  Printed per run:
 *
 *   cache_cost provider=anthropic model=claude-sonnet-4-5 compaction=no requests=40 ...
 *       billed=... ideal=... ratio=1.02 target=<=1.10 met=yes
 *   cache_share provider=openai model=gpt-5.1 compaction=no requests=40 ...
 *       share=... ideal_share=... ratio=0.97 target=>=0.85 met=yes
 *
 * (OpenAI: the cached share of the prompt tokens, sum(read) / sum(P),
 * against the ideal's, sum(min(P_i-1, P_i)) / sum(P).)  --table prints each
 * request's figures too.  Token counts, not timings: the figures are the
 * same on every machine.  Exit 2 when a run could not do its work (a turn
 * that did not complete, a compaction that did not land, a request the mock
 * refused); a ratio off its target is a figure, not a failure.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/weir.h>

#include "../bench_turn.h"
#include "mock_llm.h"
#include "testutil.h"

#define STEPS_PER_TURN 20
#define TURNS 2
#define SYSTEM_CHARS 6000
#define CHECKPOINT_ASK "write a checkpoint of the conversation above"

typedef struct run_spec {
    const char *provider; /* "anthropic" | "openai" */
    const char *model;
    bool compaction;
    bool share; /* report the cached share (OpenAI) rather than the cost */
    double target;
} run_spec;

typedef struct req {
    long input, read, write;
    const char *what; /* "step" | "summary" */
} req;

/* The mock's script: 19 tool calls and an answer per turn, each call with
 * its own arguments (the tool echoes them: a result of a few hundred
 * characters); summary requests answered aside.  malloc'd. */
static char *script(void) {
    json_t *reqs = json_array();
    for (int t = 0; t < TURNS; t++)
        for (int s = 1; s <= STEPS_PER_TURN; s++) {
            char text[512];
            if (s == STEPS_PER_TURN) {
                snprintf(text, sizeof text, "Part %d is done: every record was looked up.", t + 1);
                json_array_append_new(reqs, json_pack("{s:s, s:{s:i}}", "text", text, "usage",
                                                      "output_tokens", 40));
                continue;
            }
            char args[512], id[32];
            snprintf(id, sizeof id, "call_%d_%d", t + 1, s);
            snprintf(args, sizeof args,
                     "{\"query\":\"record %d of part %d: the owner, the last change, the open "
                     "issues and the files it touches, with their sizes and the tests that "
                     "cover them, as a short report with one line per fact and the sources "
                     "named after each line, so that the next step can rely on it without "
                     "asking again\"}",
                     s, t + 1);
            json_array_append_new(
                reqs, json_pack("{s:[{s:s, s:s, s:s}], s:{s:i}}", "tool_calls", "id", id, "name",
                                "lookup", "arguments", args, "usage", "output_tokens", 30));
        }
    json_t *root = json_pack(
        "{s:o, s:{s:s, s:{s:s}}}", "requests", reqs, "aside", "body_contains", CHECKPOINT_ASK,
        "reply", "text",
        "## Primary request and intent\nLook up every record of parts 1 and 2.\n"
        "## Current work\nPart 1 is done; part 2 comes next.\n## Next step\nStart part 2.");
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}

static json_t *deployment(const run_spec *rs, mock_llm *m, const char *dir) {
    char *base = mock_llm_base_url(m);
    char url[128];
    snprintf(url, sizeof url, "%s%s", base ? base : "", strcmp(rs->provider, "openai") ? "" : "/v1");
    free(base);
    char *system = malloc(SYSTEM_CHARS + 1);
    if (!system)
        return NULL;
    static const char para[] =
        "You are a careful engineering assistant. Use the lookup tool for every record, "
        "one call per step, and keep your answers short and factual. ";
    for (size_t i = 0; i < SYSTEM_CHARS; i++)
        system[i] = para[i % (sizeof para - 1)];
    system[SYSTEM_CHARS] = '\0';
    json_t *row = json_pack("{s:s, s:s}", "base_url", url, "api_key", "bench-key");
    if (row && !strcmp(rs->provider, "openai")) { /* as on api.openai.com: the session's key */
        json_object_set_new(row, "probe_windows", json_false());
        json_object_set_new(row, "prompt_cache_key", json_true());
    }
    json_t *config = json_pack(
        "{s:{s:s, s:s, s:i}, s:{s:s, s:s}, s:[s, s], s:[{s:s, s:s, s:o}, {s:s, s:s, s:{s:s}},"
        " {s:s, s:s, s:{s:[{s:s}]}}, {s:s, s:s, s:{s:i}}]}",
        "agent", "provider", rs->provider, "model", rs->model, "max_tokens", 1024, "session",
        "dir", dir, "fsync", "none", "plugin_path", WEIR_BENCH_PLUGIN_DIR, WEIR_BENCH_TOOLS_DIR,
        "plugins", "id", rs->provider, "plugin",
        strcmp(rs->provider, "openai") ? "provider-anthropic" : "provider-openai", "config", row,
        "id", "prompt", "plugin", "system-prompt", "config", "text", system, "id", "tools",
        "plugin", "drvtest-tools", "config", "tools", "name", "lookup", "id", "compact", "plugin",
        "compaction-basic", "config", "keep_recent_tokens", 1500);
    free(system);
    return config;
}

/* The usage of every model request of the log at `path`, in order. */
static int read_usage(const char *path, req *out, int max, int *n) {
    char *text = wt_read_file(path, NULL);
    if (!text)
        return -1;
    *n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *ev = json_loads(line, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        bool step = type && !strcmp(type, "assistant/message");
        bool summary = type && !strcmp(type, "compaction/summary");
        const json_t *u = json_object_get(json_object_get(ev, "data"), "usage");
        if ((step || summary) && json_is_object(u) && *n < max) {
            req *r = &out[(*n)++];
            r->input = (long)json_integer_value(json_object_get(u, "input_tokens"));
            r->read = (long)json_integer_value(json_object_get(u, "cache_read_tokens"));
            const json_t *w = json_object_get(u, "cache_write_tokens");
            r->write = json_is_integer(w)
                           ? (long)json_integer_value(w)
                           : (long)(json_integer_value(json_object_get(u, "cache_write_5m_tokens")) +
                                    json_integer_value(json_object_get(u, "cache_write_1h_tokens")));
            r->what = step ? "step" : "summary";
        }
        json_decref(ev);
    }
    free(text);
    return 0;
}

static int one_run(const run_spec *rs, bool table) {
    char *dir = wt_tmpdir("bench-cache");
    char *scr = script();
    mock_llm *m = NULL;
    if (!dir || !scr || mock_llm_start(scr, &m) != 0) {
        fprintf(stderr, "bench_cache: cannot start the mock\n");
        free(scr);
        free(dir);
        return 2;
    }
    free(scr);
    json_t *config = deployment(rs, m, dir);
    weir_host *host = NULL;
    weir_agent *a = NULL;
    weir_error err;
    weir_error_clear(&err);
    int status = 0;
    if (!config || weir_host_create(config, &host, &err) != WEIR_OK) {
        fprintf(stderr, "bench_cache: host: %s\n", err.text);
        status = 2;
    }
    weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
    o.session_id = "bench-cache";
    if (status == 0 && weir_agent_open(host, &o, &a, &err) != WEIR_OK) {
        fprintf(stderr, "bench_cache: open: %s\n", err.text);
        status = 2;
    }
    for (int t = 0; t < TURNS && status == 0; t++) {
        if (t > 0 && rs->compaction) {
            json_t *res = NULL;
            const char *kind = NULL;
            if (weir_agent_compact(a, NULL, &res, &err) == WEIR_OK)
                kind = json_string_value(json_object_get(res, "kind"));
            if (!kind || strcmp(kind, "compacted") != 0) {
                fprintf(stderr, "bench_cache: %s/%s: the compaction did not land: %s\n",
                        rs->provider, rs->model,
                        kind ? json_string_value(json_object_get(res, "message")) : err.text);
                status = 2;
            }
            json_decref(res);
        }
        char ask[128];
        snprintf(ask, sizeof ask, "Look up records 1 to %d of part %d, one per step.",
                 STEPS_PER_TURN - 1, t + 1);
        if (status == 0 && (weir_agent_send_text(a, ask, WEIR_SEND_FOLLOWUP, &err) != WEIR_OK ||
                            weir_agent_run_until_idle(a, &err) != WEIR_OK ||
                            bench_turn_ok(a, ask, &err) != WEIR_OK)) {
            fprintf(stderr, "bench_cache: %s/%s: %s\n", rs->provider, rs->model, err.text);
            status = 2;
        }
    }
    enum { MAXREQ = TURNS * STEPS_PER_TURN + 8 };
    req reqs[MAXREQ];
    int n = 0;
    if (status == 0 && read_usage(weir_agent_log_path(a), reqs, MAXREQ, &n) != 0) {
        fprintf(stderr, "bench_cache: cannot read the session log\n");
        status = 2;
    }
    long want = TURNS * STEPS_PER_TURN + (rs->compaction ? 1 : 0);
    if (status == 0 && (n != want || mock_llm_rejections(m) > 0)) {
        fprintf(stderr, "bench_cache: %s/%s: %d requests with usage in the log for %ld, %ld "
                        "refused by the mock\n",
                rs->provider, rs->model, n, want, mock_llm_rejections(m));
        status = 2;
    }
    if (status == 0) {
        double billed = 0, ideal = 0;
        long prompt = 0, in = 0, rd = 0, wr = 0, ideal_read = 0, prev = 0;
        for (int i = 0; i < n; i++) {
            const req *r = &reqs[i];
            long p = r->input + r->read + r->write;
            long keep = p < prev ? p : prev;
            double b = (double)r->input + 0.1 * (double)r->read + 1.25 * (double)r->write;
            double id = 0.1 * (double)keep + 1.25 * (double)(p - keep);
            if (table)
                printf("cache_request provider=%s compaction=%s request=%d kind=%s prompt=%ld "
                       "input=%ld cache_read=%ld cache_write=%ld billed=%.1f ideal=%.1f\n",
                       rs->provider, rs->compaction ? "yes" : "no", i + 1, r->what, p, r->input,
                       r->read, r->write, b, id);
            billed += b;
            ideal += id;
            prompt += p;
            in += r->input;
            rd += r->read;
            wr += r->write;
            ideal_read += keep;
            prev = p;
        }
        if (rs->share) {
            double share = prompt ? (double)rd / (double)prompt : 0;
            double ideal_share = prompt ? (double)ideal_read / (double)prompt : 0;
            double ratio = ideal_share > 0 ? share / ideal_share : 0;
            char target[32];
            snprintf(target, sizeof target, rs->target < 0 ? "none" : ">=%.2f", rs->target);
            printf("cache_share provider=%s model=%s compaction=%s requests=%d prompt_tokens=%ld "
                   "cache_read=%ld share=%.3f ideal_share=%.3f ratio=%.2f target=%s met=%s\n",
                   rs->provider, rs->model, rs->compaction ? "yes" : "no", n, prompt, rd, share,
                   ideal_share, ratio, target,
                   rs->target < 0 ? "-" : ratio >= rs->target ? "yes" : "NO");
        } else {
            double ratio = ideal > 0 ? billed / ideal : 0;
            printf("cache_cost provider=%s model=%s compaction=%s requests=%d prompt_tokens=%ld "
                   "uncached=%ld cache_read=%ld cache_write=%ld billed=%.0f ideal=%.0f "
                   "ratio=%.2f target=<=%.2f met=%s\n",
                   rs->provider, rs->model, rs->compaction ? "yes" : "no", n, prompt, in, rd, wr,
                   billed, ideal, ratio, rs->target, ratio <= rs->target ? "yes" : "NO");
        }
        fflush(stdout);
    }
    weir_agent_close(a);
    weir_host_destroy(host);
    json_decref(config);
    mock_llm_stop(m);
    wt_rmtree(dir);
    free(dir);
    return status;
}

int main(int argc, char **argv) {
    bool table = argc > 1 && !strcmp(argv[1], "--table");
    if (argc > 2 || (argc == 2 && !table)) {
        fprintf(stderr, "usage: bench_cache [--table]\n");
        return 2;
    }
    static const run_spec runs[] = {
        {"anthropic", "claude-sonnet-4-5", false, false, 1.10},
        {"anthropic", "claude-sonnet-4-5", true, false, 1.30},
        {"openai", "gpt-5.1", false, true, 0.85},
        {"openai", "gpt-5.1", true, true, -1}, /* for information: no target */
    };
    int status = 0;
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++)
        if (one_run(&runs[i], table) != 0)
            status = 2;
    return status;
}
