/*
 * bench/strategies/strategies.c - what each compaction strategy chain costs
 * (issue #35, Done-when): the billed input cost of a 60-step session that
 * compaction-basic compacts under pressure, per chain and provider, against
 * the append-only ideal, in one run.
 *
 * A host in the program drives weir against the project's mock LLM
 * (tests/support/mock_llm.c, in-process), whose vendor rules compute usage
 * from the prompt: Anthropic cache_control breakpoints with the 20-block
 * lookback and the model's minimum cacheable length, OpenAI's automatic
 * prefix caching (1024 tokens, then 128-token steps, per prompt_cache_key).
 * The deployment: the provider row (a 12,000-token window, so pressure
 * compactions come every 20 steps or so), system-prompt with a
 * 6,000-character prompt, drvtest-tools with `lookup` (its result echoes
 * the arguments: a few hundred characters) and `dump` (a 6,000-character
 * result, over prune.max_result_chars), and compaction-basic with the chain
 * under test.  The session: three turns of 20 steps (19 tool calls, every
 * fourth a `dump`, and an answer each); summary requests are answered by the
 * mock's "aside".
 *
 * The usage is read back from the session log, as weir recorded it: every
 * assistant/message's and compaction/summary's `usage`, in request order.
 * For request i, P_i = input + read + write is its prompt, and with the
 * provider's cache prices r (read) and w (write) as multiples of the input
 * price (Anthropic 0.1 and 1.25 for 5-minute writes; OpenAI gpt-5.1 0.1, and
 * no write surcharge, w = 1: docs/compaction.md, "The cost rule"):
 *
 *   billed_i = input + r x read + w x write
 *   ideal_i  = r x min(P_i-1, P_i) + w x max(0, P_i - P_i-1)   (P_0 = 0)
 *
 * the ideal being the append-only one over the same prompts: each request
 * reads all of the previous one's prompt and writes the rest.  Printed per
 * run (the figures are token counts: the same on every machine):
 *
 * The OpenAI row speaks Responses, and its chains include
 * server+summary+prune (POST /responses/compact).  Its compact request is
 * billed as the mock bills it: the prefix it shares with a recent prompt of
 * the session's prompt_cache_key read from the cache, the rest as input (an
 * assumption: OpenAI documents no caching rule for the endpoint); since the
 * endpoint takes no tools, that prefix is never the session's and the whole
 * input is billed in full.
 *
 *   strategy_cost provider=anthropic model=claude-sonnet-4-5 strategies=summary+prune
 *       default=yes requests=.. compactions=.. pruned=.. prompt_tokens=.. billed=.. ideal=..
 *       ratio=.. rank=..
 *
 * `rank` orders the chains of one provider by billed cost (1: the cheapest).
 * Exit 2 when a run could not do its work (a turn that did not complete, a
 * compaction that failed, a request the mock refused).
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
#define TURNS 3
#define SYSTEM_CHARS 6000
#define DUMP_CHARS 6000
#define WINDOW 12000
#define CHECKPOINT_ASK "write a checkpoint of the conversation above"

typedef struct provider_spec {
    const char *provider; /* "anthropic" | "openai" */
    const char *model;
    double read, write; /* cache prices, multiples of the input price */
    bool server;        /* the row offers server compaction (model_info) */
} provider_spec;

typedef struct chain_spec {
    const char *name;   /* "+"-joined, as compaction/end.strategies */
    const char *config; /* the strategies value, or NULL: the default */
} chain_spec;

typedef struct outcome {
    double billed, ideal;
    long requests, prompt, compactions, pruned;
} outcome;

/* The mock's script: per turn 19 tool calls (every fourth a dump) and an
 * answer; summary requests answered aside.  malloc'd. */
static char *script(void) {
    json_t *reqs = json_array();
    for (int t = 0; t < TURNS; t++)
        for (int s = 1; s <= STEPS_PER_TURN; s++) {
            if (s == STEPS_PER_TURN) {
                json_array_append_new(reqs, json_pack("{s:s, s:{s:i}}", "text", "Part done.",
                                                      "usage", "output_tokens", 40));
                continue;
            }
            char args[512], id[32];
            bool dump = s % 4 == 0;
            snprintf(id, sizeof id, "call_%d_%d", t + 1, s);
            snprintf(args, sizeof args,
                     "{\"query\":\"record %d of part %d: the owner, the last change, the open "
                     "issues and the files it touches, with their sizes and the tests that "
                     "cover them, one line per fact\"}",
                     s, t + 1);
            json_array_append_new(reqs, json_pack("{s:[{s:s, s:s, s:s}], s:{s:i}}", "tool_calls",
                                                  "id", id, "name", dump ? "dump" : "lookup",
                                                  "arguments", args, "usage", "output_tokens",
                                                  30));
        }
    json_t *root = json_pack(
        "{s:o, s:{s:s, s:{s:s}}}", "requests", reqs, "aside", "body_contains", CHECKPOINT_ASK,
        "reply", "text",
        "## Primary request and intent\nLook up every record of parts 1 to 3.\n"
        "## Current work\nThe lookups of the current part.\n## Next step\nGo on.");
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}

static json_t *deployment(const provider_spec *ps, const chain_spec *cs, mock_llm *m,
                          const char *dir) {
    char *base = mock_llm_base_url(m);
    char url[128];
    bool openai = !strcmp(ps->provider, "openai");
    snprintf(url, sizeof url, "%s%s", base ? base : "", openai ? "/v1" : "");
    free(base);
    char *system = malloc(SYSTEM_CHARS + 1), *dump = malloc(DUMP_CHARS + 1);
    if (!system || !dump) {
        free(system);
        free(dump);
        return NULL;
    }
    static const char para[] =
        "You are a careful engineering assistant. Use the lookup tool for every record, "
        "one call per step, and keep your answers short and factual. ";
    for (size_t i = 0; i < SYSTEM_CHARS; i++)
        system[i] = para[i % (sizeof para - 1)];
    system[SYSTEM_CHARS] = '\0';
    for (size_t i = 0; i < DUMP_CHARS; i++)
        dump[i] = "0123456789abcdef \n"[i % 18];
    dump[DUMP_CHARS] = '\0';
    json_t *row = json_pack("{s:s, s:s, s:{s:{s:i, s:i}}}", "base_url", url, "api_key",
                            "bench-key", "models", ps->model, "context_window", WINDOW,
                            "max_output", 1024);
    if (row && openai) { /* as on api.openai.com: the session's key, Responses */
        json_object_set_new(row, "probe_windows", json_false());
        json_object_set_new(row, "prompt_cache_key", json_true());
        json_object_set_new(row, "api", json_string("responses"));
    }
    json_t *compact = json_object();
    if (compact && cs->config)
        json_object_set_new(compact, "strategies", json_loads(cs->config, 0, NULL));
    json_t *config = json_pack(
        "{s:{s:s, s:s, s:i}, s:{s:s, s:s}, s:[s, s], s:[{s:s, s:s, s:o}, {s:s, s:s, s:{s:s}},"
        " {s:s, s:s, s:{s:[{s:s}, {s:s, s:s}]}}, {s:s, s:s, s:o}]}",
        "agent", "provider", ps->provider, "model", ps->model, "max_tokens", 1024, "session",
        "dir", dir, "fsync", "none", "plugin_path", WEIR_BENCH_PLUGIN_DIR, WEIR_BENCH_TOOLS_DIR,
        "plugins", "id", ps->provider, "plugin",
        openai ? "provider-openai" : "provider-anthropic", "config", row, "id", "prompt",
        "plugin", "system-prompt", "config", "text", system, "id", "tools", "plugin",
        "drvtest-tools", "config", "tools", "name", "lookup", "name", "dump", "reply", dump,
        "id", "compact", "plugin", "compaction-basic", "config", compact);
    free(system);
    free(dump);
    return config;
}

/* Sum the billed and ideal input cost of every model request of the log at
 * `path`, and count its compactions.  -1 when it cannot be read or a
 * compaction failed. */
static int read_log(const char *path, const provider_spec *ps, outcome *o) {
    char *text = wt_read_file(path, NULL);
    if (!text)
        return -1;
    long prev = 0;
    int rc = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *ev = json_loads(line, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const json_t *data = json_object_get(ev, "data");
        if (type && !strcmp(type, "compaction/end")) {
            o->compactions++;
            o->pruned += (long)json_integer_value(json_object_get(data, "pruned"));
            if (!json_is_true(json_object_get(data, "ok"))) {
                fprintf(stderr, "bench_strategies: a compaction failed: %s\n",
                        json_string_value(json_object_get(data, "error")));
                rc = -1;
            }
        }
        const json_t *u = json_object_get(data, "usage");
        bool request = type && (!strcmp(type, "assistant/message") ||
                                !strcmp(type, "compaction/summary"));
        if (request && json_is_object(u)) {
            long in = (long)json_integer_value(json_object_get(u, "input_tokens"));
            long rd = (long)json_integer_value(json_object_get(u, "cache_read_tokens"));
            long wr = (long)json_integer_value(json_object_get(u, "cache_write_tokens"));
            long p = in + rd + wr;
            long keep = p < prev ? p : prev;
            o->billed += (double)in + ps->read * (double)rd + ps->write * (double)wr;
            o->ideal += ps->read * (double)keep + ps->write * (double)(p - keep);
            o->prompt += p;
            o->requests++;
            prev = p;
        }
        json_decref(ev);
    }
    free(text);
    return rc;
}

static int one_run(const provider_spec *ps, const chain_spec *cs, outcome *o) {
    memset(o, 0, sizeof *o);
    char *dir = wt_tmpdir("bench-strategies");
    char *scr = script();
    mock_llm *m = NULL;
    if (!dir || !scr || mock_llm_start(scr, &m) != 0) {
        fprintf(stderr, "bench_strategies: cannot start the mock\n");
        free(scr);
        free(dir);
        return 2;
    }
    free(scr);
    json_t *config = deployment(ps, cs, m, dir);
    weir_host *host = NULL;
    weir_agent *a = NULL;
    weir_error err;
    weir_error_clear(&err);
    int status = 0;
    if (!config || weir_host_create(config, &host, &err) != WEIR_OK) {
        fprintf(stderr, "bench_strategies: host: %s\n", err.text);
        status = 2;
    }
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_id = "bench-strategies";
    if (status == 0 && weir_agent_open(host, &opts, &a, &err) != WEIR_OK) {
        fprintf(stderr, "bench_strategies: open: %s\n", err.text);
        status = 2;
    }
    for (int t = 0; t < TURNS && status == 0; t++) {
        char ask[128];
        snprintf(ask, sizeof ask, "Look up records 1 to %d of part %d, one per step.",
                 STEPS_PER_TURN - 1, t + 1);
        if (weir_agent_send_text(a, ask, WEIR_SEND_FOLLOWUP, &err) != WEIR_OK ||
            weir_agent_run_until_idle(a, &err) != WEIR_OK ||
            bench_turn_ok(a, ask, &err) != WEIR_OK) {
            fprintf(stderr, "bench_strategies: %s %s: %s\n", ps->provider, cs->name, err.text);
            status = 2;
        }
    }
    if (status == 0 && read_log(weir_agent_log_path(a), ps, o) != 0)
        status = 2;
    if (status == 0 && (o->compactions < 2 || mock_llm_rejections(m) > 0)) {
        fprintf(stderr, "bench_strategies: %s %s: %ld compactions, %ld requests refused by the "
                        "mock\n",
                ps->provider, cs->name, o->compactions, mock_llm_rejections(m));
        status = 2;
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
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: bench_strategies\n");
        return 2;
    }
    /* Anthropic's server compaction (compact_20260112) does not compact
     * under 50,000 input tokens, far above this session's 12,000-token
     * window: its row runs claude-sonnet-4-5, which has none, and its
     * default chain is summary+prune (bench/README.md says so) */
    static const provider_spec providers[] = {
        {"anthropic", "claude-sonnet-4-5", 0.1, 1.25, false},
        {"openai", "gpt-5.1", 0.1, 1.0, true},
    };
    static const chain_spec chains[] = {
        {"summary", "[\"summary\"]"},
        {"prune+summary", "[\"prune\",\"summary\"]"},
        {"summary+prune", "[\"summary\",\"prune\"]"},
        {"server+summary+prune", "[\"server\",\"summary\",\"prune\"]"},
    };
    enum { NCHAINS = sizeof chains / sizeof *chains };
    int status = 0;
    for (size_t p = 0; p < sizeof providers / sizeof *providers; p++) {
        outcome o[NCHAINS];
        int ok[NCHAINS];
        /* the server chain only where the row offers it; the default is
         * the chain compaction-basic picks for these rows (docs/compaction.md):
         * summary+prune (OpenAI's server compaction is not in its default) */
        size_t n = providers[p].server ? NCHAINS : NCHAINS - 1;
        size_t dflt = NCHAINS - 2;
        for (size_t c = 0; c < NCHAINS; c++) {
            ok[c] = c < n && one_run(&providers[p], &chains[c], &o[c]) == 0;
            if (c < n && !ok[c])
                status = 2;
        }
        for (size_t c = 0; c < NCHAINS; c++) {
            if (!ok[c])
                continue;
            int rank = 1;
            for (size_t k = 0; k < NCHAINS; k++)
                rank += ok[k] && o[k].billed < o[c].billed;
            printf("strategy_cost provider=%s model=%s strategies=%s default=%s requests=%ld "
                   "compactions=%ld pruned=%ld prompt_tokens=%ld billed=%.0f ideal=%.0f "
                   "ratio=%.2f rank=%d\n",
                   providers[p].provider, providers[p].model, chains[c].name,
                   c == dflt ? "yes" : "no", o[c].requests, o[c].compactions, o[c].pruned,
                   o[c].prompt, o[c].billed, o[c].ideal,
                   o[c].ideal > 0 ? o[c].billed / o[c].ideal : 0, rank);
        }
        fflush(stdout);
    }
    return status;
}
