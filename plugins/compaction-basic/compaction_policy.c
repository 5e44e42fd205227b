/* plugins/compaction-basic/compaction_policy.c - see compaction_policy.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup */
#endif
#include "compaction_policy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strncasecmp */

const char cp_config_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"threshold_ratio\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"
    "\"keep_recent_tokens\":{\"type\":\"integer\",\"minimum\":0},"
    "\"keep_recent_ratio\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"
    "\"max_attempts\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10},"
    "\"max_overflow_retries\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10},"
    "\"max_compactions_per_turn\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100},"
    "\"min_savings_ratio\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"
    "\"pinned_patterns\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
    "\"minLength\":1}},"
    "\"prune\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"max_result_chars\":{\"type\":\"integer\",\"minimum\":1},"
    "\"head_chars\":{\"type\":\"integer\",\"minimum\":0},"
    "\"tail_chars\":{\"type\":\"integer\",\"minimum\":0},"
    "\"horizon_steps\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
    "\"cache_read_price\":{\"type\":\"number\",\"minimum\":0},"
    "\"cache_write_price\":{\"type\":\"number\",\"minimum\":0}}},"
    "\"strategies\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
    "\"default\":[\"summary\",\"prune\"],"
    "\"description\":\"the compaction strategies, in order: server, summary, prune (default: "
    "[summary, prune]; unset, [server, summary, prune] on a route whose model_info reports "
    "Anthropic's server compaction)\"},"
    "\"recall\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"enabled\":{\"type\":\"boolean\"},"
    "\"max_chars\":{\"type\":\"integer\",\"minimum\":100}}},"
    "\"summary\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"provider\":{\"type\":\"string\",\"minLength\":1},"
    "\"model\":{\"type\":\"string\",\"minLength\":1},"
    "\"max_tokens\":{\"type\":\"integer\",\"minimum\":1},"
    "\"prompt\":{\"type\":\"string\",\"minLength\":1}}}}}";

/* The built-in instruction: the final user message of a summary request. */
static const char default_prompt[] =
    "Stop here: your task now is to write a checkpoint of the conversation above, not to "
    "continue it. Do not call any tool; answer with text only.\n\n"
    "The checkpoint replaces the earlier turns of this conversation: after it, the agent sees "
    "only the checkpoint, the pinned messages and the most recent messages, so it must carry "
    "everything needed to go on with the work without asking again. If the conversation holds "
    "an earlier checkpoint (a <compacted-summary> block), merge what it says into yours; do not "
    "quote it or nest it.\n\n"
    "Write these sections, in Markdown, in this order:\n"
    "## Primary request and intent\n"
    "Everything the user asked for, in detail, and what they are trying to achieve.\n"
    "## Key technical concepts\n"
    "The technologies, conventions and decisions that matter.\n"
    "## Files and code\n"
    "The files read, written or discussed, with the snippets, changes and reasons that matter.\n"
    "## Errors and fixes\n"
    "The errors met and how they were fixed, with what the user said about them.\n"
    "## Pending tasks\n"
    "What was asked for and is not done yet.\n"
    "## Current work\n"
    "What was being worked on right before this checkpoint, precisely.\n"
    "## Next step\n"
    "The next step, in line with the user's latest request (quote it where it matters).\n"
    "## Critical context that must survive\n"
    "The user's constraints, preferences and instructions, verbatim; the names, values and "
    "facts that must not be lost.\n\n"
    "Answer with the checkpoint only.";

/* Longest marker: "\n[… " + 20 digits + " characters pruned …]\n" in code points. */
#define MARKER_ROOM 48

static int fail(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t size, const char *fmt, ...) {
    if (msg && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static long long int_or(const json_t *obj, const char *key, long long dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

static double num_or(const json_t *obj, const char *key, double dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static int dup_opt(const json_t *obj, const char *key, char **out, bool *oom) {
    const char *s = json_string_value(json_object_get(obj, key));
    *out = s ? strdup(s) : NULL;
    if (s && !*out) {
        *oom = true;
        return -1;
    }
    return 0;
}

static const char *const strategy_names[] = {"prune", "summary", "server"};

const char *cp_strategy_name(cp_strategy s) {
    return (size_t)s < sizeof strategy_names / sizeof *strategy_names ? strategy_names[s] : "?";
}

size_t cp_default_strategies(const char *server_kind, cp_strategy *out) {
    size_t n = 0;
    if (server_kind && strcmp(server_kind, "anthropic-compact-20260112") == 0)
        out[n++] = CP_STRATEGY_SERVER;
    out[n++] = CP_STRATEGY_SUMMARY;
    out[n++] = CP_STRATEGY_PRUNE;
    return n;
}

/* config.strategies into cfg->strategies: known names, each once, at least one. */
static int parse_strategies(const json_t *list, cp_config *cfg, char *msg, size_t msg_size) {
    if (!list)
        return 0;
    if (!json_is_array(list) || json_array_size(list) == 0)
        return fail(msg, msg_size,
                    "config.strategies: expected a non-empty array of strategy names (known: "
                    "prune, server, summary)");
    size_t i;
    const json_t *v;
    json_array_foreach(list, i, v) {
        const char *name = json_string_value(v);
        if (!name)
            return fail(msg, msg_size, "config.strategies[%zu]: expected a string", i);
        size_t k = 0;
        while (k < sizeof strategy_names / sizeof *strategy_names && strcmp(name, strategy_names[k]))
            k++;
        if (k == sizeof strategy_names / sizeof *strategy_names)
            return fail(msg, msg_size,
                        "config.strategies[%zu]: unknown strategy \"%s\"; known strategies: "
                        "prune, server, summary",
                        i, name);
        for (size_t j = 0; j < cfg->nstrategies; j++)
            if (cfg->strategies[j] == (cp_strategy)k)
                return fail(msg, msg_size, "config.strategies[%zu]: \"%s\" is listed twice", i,
                            name);
        cfg->strategies[cfg->nstrategies++] = (cp_strategy)k;
    }
    cfg->strategies_set = true;
    return 0;
}

/* Compile config.pinned_patterns into cfg->pinned. */
static int parse_pinned(const json_t *patterns, cp_config *cfg, bool *oom, char *msg,
                        size_t msg_size) {
    size_t n = json_array_size(patterns);
    if (n == 0)
        return 0;
    cfg->pinned = calloc(n, sizeof *cfg->pinned);
    if (!cfg->pinned) {
        *oom = true;
        return fail(msg, msg_size, "config: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const char *src = json_string_value(json_array_get(patterns, i));
        if (!src)
            return fail(msg, msg_size, "config.pinned_patterns[%zu]: expected a string", i);
        int rc = regcomp(&cfg->pinned[i], src, REG_EXTENDED | REG_NOSUB | REG_NEWLINE);
        if (rc != 0) {
            char why[160];
            regerror(rc, &cfg->pinned[i], why, sizeof why);
            if (rc == REG_ESPACE)
                *oom = true;
            return fail(msg, msg_size,
                        "config.pinned_patterns[%zu]: \"%s\" is not a valid POSIX extended "
                        "regular expression: %s",
                        i, src, why);
        }
        cfg->npinned = i + 1;
    }
    return 0;
}

int cp_config_parse(const json_t *config, cp_config *cfg, bool *oom, char *msg, size_t msg_size) {
    bool dummy = false;
    if (!oom)
        oom = &dummy;
    *oom = false;
    memset(cfg, 0, sizeof *cfg);
    if (config && !json_is_object(config))
        return fail(msg, msg_size, "config: expected an object");
    const json_t *prune = json_object_get(config, "prune");
    const json_t *summary = json_object_get(config, "summary");
    const json_t *patterns = json_object_get(config, "pinned_patterns");
    cfg->threshold_ratio = num_or(config, "threshold_ratio", 0.8);
    cfg->keep_recent_tokens = (long)int_or(config, "keep_recent_tokens", -1);
    cfg->keep_recent_ratio = num_or(config, "keep_recent_ratio", 0.16);
    cfg->max_attempts = (int)int_or(config, "max_attempts", 2);
    cfg->max_overflow_retries = (int)int_or(config, "max_overflow_retries", 1);
    cfg->max_compactions_per_turn = (int)int_or(config, "max_compactions_per_turn", 3);
    cfg->min_savings_ratio = num_or(config, "min_savings_ratio", 0.1);
    long long max = int_or(prune, "max_result_chars", 4000);
    long long head = int_or(prune, "head_chars", 1500);
    long long tail = int_or(prune, "tail_chars", 500);
    cfg->summary_max_tokens = (long)int_or(summary, "max_tokens", -1);
    const json_t *recall = json_object_get(config, "recall");
    cfg->horizon_steps = (long)int_or(prune, "horizon_steps", 10);
    cfg->cache_read_price = num_or(prune, "cache_read_price", -1);
    cfg->cache_write_price = num_or(prune, "cache_write_price", -1);
    cfg->recall_enabled = !json_is_false(json_object_get(recall, "enabled"));
    long long recall_max = int_or(recall, "max_chars", 8000);
    if (!(cfg->threshold_ratio > 0 && cfg->threshold_ratio <= 1))
        return fail(msg, msg_size, "config.threshold_ratio: expected a number in (0, 1]");
    if (json_object_get(config, "keep_recent_tokens") &&
        json_object_get(config, "keep_recent_ratio"))
        return fail(msg, msg_size,
                    "config: keep_recent_tokens and keep_recent_ratio are mutually exclusive");
    if (!(cfg->keep_recent_ratio >= 0 && cfg->keep_recent_ratio < cfg->threshold_ratio))
        return fail(msg, msg_size,
                    "config.keep_recent_ratio: must be at least 0 and below threshold_ratio (%g)",
                    cfg->threshold_ratio);
    if (cfg->max_attempts < 1 || cfg->max_attempts > 10)
        return fail(msg, msg_size, "config.max_attempts: expected an integer in [1, 10]");
    if (cfg->max_overflow_retries < 0 || cfg->max_overflow_retries > 10)
        return fail(msg, msg_size, "config.max_overflow_retries: expected an integer in [0, 10]");
    if (cfg->max_compactions_per_turn < 1 || cfg->max_compactions_per_turn > 100)
        return fail(msg, msg_size,
                    "config.max_compactions_per_turn: expected an integer in [1, 100]");
    if (!(cfg->min_savings_ratio >= 0 && cfg->min_savings_ratio < 1))
        return fail(msg, msg_size, "config.min_savings_ratio: expected a number in [0, 1)");
    if (max < 1 || head < 0 || tail < 0 || head + tail + MARKER_ROOM >= max)
        return fail(msg, msg_size,
                    "config.prune: head_chars + tail_chars + %d (the marker) must stay below "
                    "max_result_chars (%lld)",
                    MARKER_ROOM, max);
    if (json_object_get(summary, "max_tokens") && cfg->summary_max_tokens < 1)
        return fail(msg, msg_size, "config.summary.max_tokens: expected a positive integer");
    if (!json_object_get(summary, "provider") != !json_object_get(summary, "model"))
        return fail(msg, msg_size, "config.summary: provider and model must be set together");
    if (cfg->horizon_steps < 1 || cfg->horizon_steps > 1000)
        return fail(msg, msg_size, "config.prune.horizon_steps: expected an integer in [1, 1000]");
    if (json_object_get(prune, "cache_read_price") && !(cfg->cache_read_price >= 0))
        return fail(msg, msg_size, "config.prune.cache_read_price: expected a number >= 0");
    if (json_object_get(prune, "cache_write_price") && !(cfg->cache_write_price >= 0))
        return fail(msg, msg_size, "config.prune.cache_write_price: expected a number >= 0");
    if (!json_object_get(prune, "cache_read_price") != !json_object_get(prune, "cache_write_price"))
        return fail(msg, msg_size,
                    "config.prune: cache_read_price and cache_write_price must be set together");
    if (json_object_get(recall, "enabled") && !json_is_boolean(json_object_get(recall, "enabled")))
        return fail(msg, msg_size, "config.recall.enabled: expected a boolean");
    if (recall_max < 100)
        return fail(msg, msg_size, "config.recall.max_chars: expected an integer of at least 100");
    cfg->recall_max_chars = (size_t)recall_max;
    if (parse_strategies(json_object_get(config, "strategies"), cfg, msg, msg_size) != 0)
        return -1;
    if (patterns && !json_is_array(patterns))
        return fail(msg, msg_size, "config.pinned_patterns: expected an array of strings");
    cfg->max_result_chars = (size_t)max;
    cfg->head_chars = (size_t)head;
    cfg->tail_chars = (size_t)tail;
    const char *prompt = json_string_value(json_object_get(summary, "prompt"));
    cfg->summary_prompt = strdup(prompt ? prompt : default_prompt);
    if (!cfg->summary_prompt || dup_opt(summary, "provider", &cfg->summary_provider, oom) != 0 ||
        dup_opt(summary, "model", &cfg->summary_model, oom) != 0) {
        *oom = true;
        cp_config_clear(cfg);
        return fail(msg, msg_size, "config: out of memory");
    }
    if (parse_pinned(patterns, cfg, oom, msg, msg_size) != 0) {
        cp_config_clear(cfg);
        return -1;
    }
    return 0;
}

void cp_config_clear(cp_config *cfg) {
    if (!cfg)
        return;
    free(cfg->summary_provider);
    free(cfg->summary_model);
    free(cfg->summary_prompt);
    cfg->summary_provider = cfg->summary_model = cfg->summary_prompt = NULL;
    for (size_t i = 0; i < cfg->npinned; i++)
        regfree(&cfg->pinned[i]);
    free(cfg->pinned);
    cfg->pinned = NULL;
    cfg->npinned = 0;
}

/* ------------------------------------------------------------------------ */
/* The cost rule of pruning                                                  */
/* ------------------------------------------------------------------------ */

cp_cache_prices cp_prices_for(const cp_config *cfg, const char *model) {
    if (cfg && cfg->cache_read_price >= 0 && cfg->cache_write_price >= 0)
        return (cp_cache_prices){cfg->cache_read_price, cfg->cache_write_price};
    const char *m = model ? model : "";
    if (!strncmp(m, "claude", 6))
        return (cp_cache_prices){0.1, 1.25}; /* 5-minute writes */
    if (!strncmp(m, "gpt-5", 5))
        return (cp_cache_prices){0.1, 1.0};
    if (!strncmp(m, "gpt-4.1", 7))
        return (cp_cache_prices){0.25, 1.0};
    if (!strncmp(m, "gpt-", 4) || !strncmp(m, "chatgpt-", 8) ||
        (m[0] == 'o' && m[1] >= '1' && m[1] <= '4'))
        return (cp_cache_prices){0.5, 1.0};
    return (cp_cache_prices){0.1, 1.25};
}

bool cp_prune_worth_it(size_t saved, size_t invalidated, long horizon, cp_cache_prices prices,
                       double *gain, double *cost) {
    double g = (double)saved * (double)(horizon > 0 ? horizon : 0) * prices.read;
    double c = (double)invalidated * (prices.write - prices.read);
    if (gain)
        *gain = g;
    if (cost)
        *cost = c;
    return saved > 0 && g > c;
}

/* ------------------------------------------------------------------------ */
/* Token estimates                                                           */
/* ------------------------------------------------------------------------ */

/* The estimate is the SDK's (weir/sdk.h): one implementation for every plugin. */
size_t cp_tokens_for_chars(size_t chars) { return weir_tokens_for_chars(chars); }

size_t cp_message_tokens(const json_t *message) { return weir_message_tokens(message); }

size_t cp_event_tokens(const char *type, const json_t *message) {
    return weir_event_tokens(type, message);
}

static size_t node_tokens(const json_t *node) {
    return cp_message_tokens(json_object_get(node, "message"));
}

size_t cp_measure(const json_t *surface, long long baseline_seq, size_t baseline_tokens,
                  size_t extra_tokens) {
    size_t n = json_array_size(surface), from = 0, total = 0;
    bool baseline = false;
    if (baseline_seq >= 0) {
        long long max_before = -1;
        for (size_t i = 0; i < n; i++) {
            long long seq =
                (long long)json_integer_value(json_object_get(json_array_get(surface, i), "seq"));
            if (seq == baseline_seq) {
                baseline = max_before < baseline_seq;
                from = i + 1;
                break;
            }
            if (seq > max_before)
                max_before = seq;
        }
    }
    if (!baseline)
        from = 0;
    else
        total = baseline_tokens;
    for (size_t i = from; i < n; i++)
        total += node_tokens(json_array_get(surface, i));
    return total + extra_tokens;
}

size_t cp_usage_tokens(const json_t *usage) { return weir_usage_tokens(usage); }

/* ------------------------------------------------------------------------ */
/* The running meter: the SDK's (weir/sdk.h), pinning by the config          */
/* ------------------------------------------------------------------------ */

static bool meter_pinned(const json_t *message, void *cfg) {
    return cp_message_pinned(cfg, message);
}

void cp_meter_init(cp_meter *m) { weir_meter_init(m); }

void cp_meter_clear(cp_meter *m) { weir_meter_clear(m); }

int cp_meter_seed(cp_meter *m, const json_t *surface, const json_t *last_usage,
                  const cp_config *cfg) {
    return weir_meter_seed(m, surface, last_usage, cfg ? meter_pinned : NULL, (void *)(uintptr_t)cfg);
}

int cp_meter_apply(cp_meter *m, const json_t *event, const cp_config *cfg) {
    return weir_meter_apply(m, event, cfg ? meter_pinned : NULL, (void *)(uintptr_t)cfg);
}

size_t cp_meter_tokens(const cp_meter *m) { return weir_meter_tokens(m); }

/* ------------------------------------------------------------------------ */
/* Pinned context                                                            */
/* ------------------------------------------------------------------------ */

char *cp_message_text(const json_t *message) { return weir_message_text(message); }

bool cp_message_pinned(const cp_config *cfg, const json_t *message) {
    const json_t *source = json_object_get(message, "source");
    const char *role = json_string_value(json_object_get(message, "role"));
    const char *kind = json_string_value(json_object_get(source, "kind"));
    if (!role || strcmp(role, "user") != 0 || (kind && !strcmp(kind, "compaction")))
        return false;
    if (json_is_true(json_object_get(source, "pinned")))
        return true;
    if (!cfg || cfg->npinned == 0)
        return false;
    char *text = cp_message_text(message);
    bool hit = false;
    for (size_t i = 0; text && !hit && i < cfg->npinned; i++)
        hit = regexec(&cfg->pinned[i], text, 0, NULL, 0) == 0;
    free(text);
    return hit;
}

bool cp_pinned_runs(const bool *pinned, size_t n, size_t *starts, size_t *k) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += pinned[i];
    *k = count;
    if (count >= n)
        return false;
    starts[0] = 0;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pinned[i])
            continue;
        run++;
        starts[run] = i > starts[run - 1] ? i : starts[run - 1] + 1;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Pruning                                                                   */
/* ------------------------------------------------------------------------ */

/* Bytes of the UTF-8 sequence starting at `p` (1 for an invalid byte). */
static size_t seq_len(const unsigned char *p) {
    size_t n = *p < 0x80             ? 1
               : (*p & 0xE0) == 0xC0 ? 2
               : (*p & 0xF0) == 0xE0 ? 3
               : (*p & 0xF8) == 0xF0 ? 4
                                     : 1;
    for (size_t k = 1; k < n; k++)
        if ((p[k] & 0xC0) != 0x80)
            return 1;
    return n;
}

size_t cp_utf8_len(const char *s) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p += seq_len(p))
        n++;
    return n;
}

/* Byte offset after the first `count` code points of `s`. */
static size_t utf8_offset(const char *s, size_t count) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p && count-- > 0)
        p += seq_len(p);
    return (size_t)(p - (const unsigned char *)s);
}

char *cp_prune_text(const char *text, size_t max_chars, size_t head, size_t tail, bool *oom) {
    if (!text)
        return NULL;
    size_t cps = cp_utf8_len(text);
    if (cps <= max_chars || head + tail >= cps)
        return NULL;
    size_t pruned = cps - head - tail;
    size_t head_end = utf8_offset(text, head);
    size_t tail_start = utf8_offset(text, cps - tail);
    char marker[96];
    int ml = snprintf(marker, sizeof marker,
                      "\n[\xE2\x80\xA6 %zu characters pruned \xE2\x80\xA6]\n", pruned);
    size_t len = strlen(text);
    size_t total = head_end + (size_t)ml + (len - tail_start);
    char *out = malloc(total + 1);
    if (!out) {
        if (oom)
            *oom = true;
        return NULL;
    }
    memcpy(out, text, head_end);
    memcpy(out + head_end, marker, (size_t)ml);
    memcpy(out + head_end + (size_t)ml, text + tail_start, len - tail_start);
    out[total] = '\0';
    return out;
}

/* Prune the text blocks of `blocks` (an array, changed in place). */
static int prune_blocks(json_t *blocks, const cp_config *cfg, size_t *pruned, bool *oom) {
    size_t i;
    json_t *b;
    json_array_foreach(blocks, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (type && !strcmp(type, "tool_result")) {
            if (prune_blocks(json_object_get(b, "content"), cfg, pruned, oom) != 0)
                return -1;
            continue;
        }
        if (!type || strcmp(type, "text") != 0)
            continue;
        const char *text = json_string_value(json_object_get(b, "text"));
        char *cut =
            cp_prune_text(text, cfg->max_result_chars, cfg->head_chars, cfg->tail_chars, oom);
        if (!cut) {
            if (*oom)
                return -1;
            continue;
        }
        *pruned += cp_utf8_len(text) - cfg->head_chars - cfg->tail_chars;
        int rc = json_object_set_new(b, "text", json_string(cut));
        free(cut);
        if (rc != 0) {
            *oom = true;
            return -1;
        }
    }
    return 0;
}

json_t *cp_prune_message(const json_t *message, const cp_config *cfg, size_t *pruned_chars,
                         bool *oom) {
    *pruned_chars = 0;
    if (!json_is_object(message))
        return NULL;
    json_t *copy = json_deep_copy(message);
    if (!copy) {
        *oom = true;
        return NULL;
    }
    if (prune_blocks(json_object_get(copy, "content"), cfg, pruned_chars, oom) != 0 ||
        *pruned_chars == 0) {
        json_decref(copy);
        return NULL;
    }
    return copy;
}

/* ------------------------------------------------------------------------ */
/* Range selection                                                           */
/* ------------------------------------------------------------------------ */

static const char *node_type(const json_t *surface, size_t i) {
    const char *t = json_string_value(json_object_get(json_array_get(surface, i), "type"));
    return t ? t : "";
}

/* The tool-call pairing of a range of nodes, kept as nodes join and leave
 * it, so a range is checked in one pass over its blocks: per id the calls
 * and the results the range holds, and how many ids hold more of one than
 * of the other (an id a provider reuses in a later step counts each call
 * with its own result). */
typedef struct pairing {
    json_t *ids;     /* id -> integer: calls << 32 | results */
    size_t unpaired; /* ids whose calls and results differ in number */
    size_t unnamed;  /* call or result blocks without their id */
    bool oom;
} pairing;

/* Add node `i` of `surface` to the range (join) or take it out (!join). */
static void pairing_node(pairing *p, const json_t *surface, size_t i, bool join) {
    const json_t *content =
        json_object_get(json_object_get(json_array_get(surface, i), "message"), "content");
    size_t k;
    const json_t *b;
    json_array_foreach(content, k, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        bool call = type && !strcmp(type, "tool_call");
        if (!type || (!call && strcmp(type, "tool_result") != 0))
            continue;
        const char *ref = json_string_value(json_object_get(b, call ? "id" : "call_id"));
        if (!ref) {
            p->unnamed = join ? p->unnamed + 1 : p->unnamed - 1;
            continue;
        }
        json_t *v = json_object_get(p->ids, ref);
        json_int_t c = v ? json_integer_value(v) : 0;
        json_int_t calls = c >> 32, results = c & 0xffffffff;
        bool was = calls != results;
        json_int_t d = join ? 1 : -1;
        if (call)
            calls += d;
        else
            results += d;
        bool is = calls != results;
        if (was != is)
            p->unpaired = is ? p->unpaired + 1 : p->unpaired - 1;
        json_int_t now = calls << 32 | results;
        if (v)
            json_integer_set(v, now);
        else if (json_object_set_new(p->ids, ref, json_integer(now)) != 0)
            p->oom = true;
    }
}

static bool pairing_ok(const pairing *p) { return !p->oom && !p->unpaired && !p->unnamed; }

bool cp_balanced(const json_t *surface, size_t s, size_t e) {
    pairing p = {.ids = json_object()};
    p.oom = !p.ids;
    for (size_t i = s; i < e && !p.oom; i++)
        pairing_node(&p, surface, i, true);
    bool ok = pairing_ok(&p);
    json_decref(p.ids);
    return ok;
}

bool cp_select_range(const json_t *surface, size_t keep_tokens, size_t *start, size_t *end) {
    size_t n = json_array_size(surface);
    size_t s = n > 0 && !strcmp(node_type(surface, 0), "system/message") ? 1 : 0;
    if (n < s + 2) /* at least one node to summarize and one to keep */
        return false;
    size_t keep_from = n, kept = 0;
    while (keep_from > s) {
        keep_from--;
        kept += node_tokens(json_array_get(surface, keep_from));
        if (kept >= keep_tokens)
            break;
    }
    /* move the cut head-ward until [s, keep_from) splits no pair: each node
     * leaves the range once */
    pairing p = {.ids = json_object()};
    p.oom = !p.ids;
    for (size_t i = s; i < keep_from && !p.oom; i++)
        pairing_node(&p, surface, i, true);
    while (keep_from > s && !p.oom && !pairing_ok(&p))
        pairing_node(&p, surface, --keep_from, false);
    bool oom = p.oom;
    json_decref(p.ids);
    if (oom || keep_from <= s)
        return false;
    *start = s;
    *end = keep_from - 1;
    return true;
}

size_t cp_range_tokens(const json_t *surface, size_t start, size_t end) {
    size_t total = 0;
    for (size_t i = start; i <= end && i < json_array_size(surface); i++)
        total += node_tokens(json_array_get(surface, i));
    return total;
}

/* ------------------------------------------------------------------------ */
/* The summary request and the checkpoint                                    */
/* ------------------------------------------------------------------------ */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void putn(buf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->cap + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void put(buf *b, const char *s) { putn(b, s, strlen(s)); }

/* The string built, or NULL (out of memory). */
static char *done(buf *b) {
    if (!b->oom && !b->p)
        put(b, "");
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

char *cp_instruction(const cp_config *cfg, size_t kept, const char *extra) {
    buf b = {0};
    put(&b, cfg->summary_prompt);
    if (kept > 0) {
        char note[256];
        snprintf(note, sizeof note,
                 "\n\nThe last %zu message%s above stay%s verbatim after the checkpoint: cover "
                 "what comes before %s, and mention %s only where Current work and Next step "
                 "need it.",
                 kept, kept == 1 ? "" : "s", kept == 1 ? "s" : "", kept == 1 ? "it" : "them",
                 kept == 1 ? "it" : "them");
        put(&b, note);
    }
    if (extra && *extra) {
        put(&b, "\n\nAdditional instructions for this summary:\n");
        put(&b, extra);
    }
    return done(&b);
}

/* Whether `c` is blank space. */
static bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

char *cp_clean_summary(const char *reply) {
    static const char *const drop[] = {CP_CHECKPOINT_PREAMBLE, CP_SUMMARY_OPEN, CP_SUMMARY_CLOSE};
    buf b = {0};
    const char *p = reply ? reply : "";
    while (*p) {
        size_t skip = 0;
        for (size_t i = 0; !skip && i < sizeof drop / sizeof *drop; i++)
            if (!strncmp(p, drop[i], strlen(drop[i])))
                skip = strlen(drop[i]);
        if (skip) {
            p += skip;
            continue;
        }
        putn(&b, p, 1);
        p++;
    }
    char *out = done(&b);
    if (!out)
        return NULL;
    size_t start = 0, end = strlen(out);
    while (start < end && blank(out[start]))
        start++;
    while (end > start && blank(out[end - 1]))
        end--;
    memmove(out, out + start, end - start);
    out[end - start] = '\0';
    return out;
}

/* Offset just past the end of the summary's "Critical context" section
 * (before the next heading of the same or a higher level, or the end), or
 * -1 when it has no such heading. */
static long critical_section_end(const char *s) {
    const char *line = s, *found = NULL;
    size_t level = 0;
    while (*line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        size_t hashes = 0;
        while (hashes < len && line[hashes] == '#')
            hashes++;
        if (hashes > 0 && found && hashes <= level)
            return (long)(line - s);
        if (hashes > 0 && !found) {
            for (size_t i = hashes; i + 16 <= len; i++)
                if (!strncasecmp(line + i, "critical context", 16)) {
                    found = line;
                    level = hashes;
                    break;
                }
        }
        if (!eol)
            break;
        line = eol + 1;
    }
    return found ? (long)strlen(s) : -1;
}

/* Append one pinned text as a quoted block, cut after PIN_CHARS code points. */
#define PIN_CHARS 400
static void put_pinned(buf *b, const char *text) {
    size_t cps = cp_utf8_len(text);
    size_t bytes = cps > PIN_CHARS ? utf8_offset(text, PIN_CHARS) : strlen(text);
    put(b, "\n> ");
    for (size_t i = 0; i < bytes; i++) {
        if (text[i] == '\n')
            put(b, "\n> ");
        else
            putn(b, text + i, 1);
    }
    if (cps > PIN_CHARS)
        put(b, " [\xE2\x80\xA6 cut here; the whole message follows this checkpoint]");
    put(b, "\n");
}

char *cp_checkpoint_text(const char *summary, const char *const *pinned, size_t npinned) {
    buf b = {0};
    put(&b, CP_CHECKPOINT_PREAMBLE "\n\n" CP_SUMMARY_OPEN "\n");
    long cut = npinned ? critical_section_end(summary) : -1;
    size_t head = cut >= 0 ? (size_t)cut : strlen(summary);
    putn(&b, summary, head);
    if (npinned) {
        while (b.len && !b.oom && b.p[b.len - 1] == '\n')
            b.p[--b.len] = '\0';
        if (cut < 0)
            put(&b, "\n\n## Critical context that must survive");
        put(&b, "\n\nPinned messages of the user, kept verbatim after this checkpoint:\n");
        for (size_t i = 0; i < npinned; i++)
            put_pinned(&b, pinned[i] ? pinned[i] : "");
        if (head < strlen(summary)) {
            put(&b, "\n");
            put(&b, summary + head);
        }
    }
    if (!b.oom && b.len && b.p[b.len - 1] != '\n')
        put(&b, "\n");
    put(&b, CP_SUMMARY_CLOSE);
    return done(&b);
}

char *cp_recall_index(const json_t *surface, size_t a, size_t b, const bool *skip) {
    size_t listed = 0, total = 0, first = b + 1;
    for (size_t i = b + 1; i-- > a;) { /* the newest CP_RECALL_LIST_MAX, from the end */
        const char *type = node_type(surface, i);
        if ((skip && skip[i - a]) ||
            (strcmp(type, "tool/result") != 0 && strcmp(type, "user/message") != 0))
            continue;
        total++;
        if (listed < CP_RECALL_LIST_MAX) {
            listed++;
            first = i;
        }
    }
    buf out = {0};
    if (total == 0)
        return done(&out);
    put(&out, "## Recall ids\nThe recall tool returns the original text of these messages and "
              "tool results, which this checkpoint replaced:\n");
    if (total > listed) {
        char note[96];
        snprintf(note, sizeof note, "- (%zu older ones are not listed)\n", total - listed);
        put(&out, note);
    }
    for (size_t i = first; i <= b && listed > 0; i++) {
        const json_t *node = json_array_get(surface, i);
        const char *type = node_type(surface, i);
        bool result = !strcmp(type, "tool/result");
        if ((skip && skip[i - a]) || (!result && strcmp(type, "user/message") != 0))
            continue;
        char line[200];
        long long seq = (long long)json_integer_value(json_object_get(node, "seq"));
        const json_t *block =
            json_array_get(json_object_get(json_object_get(node, "message"), "content"), 0);
        const char *call = json_string_value(json_object_get(block, "call_id"));
        if (result && call)
            snprintf(line, sizeof line, "- seq:%lld: tool result of call %.120s\n", seq, call);
        else
            snprintf(line, sizeof line, "- seq:%lld: %s\n", seq,
                     result ? "tool result" : "user message");
        put(&out, line);
    }
    return done(&out);
}

char *cp_recall_cut(const char *text, size_t offset, size_t max_chars) {
    size_t cps = cp_utf8_len(text);
    buf out = {0};
    if (offset >= cps && cps > 0) {
        char note[128];
        snprintf(note, sizeof note, "[recall: nothing left: the text has %zu characters]", cps);
        put(&out, note);
        return done(&out);
    }
    size_t from = utf8_offset(text, offset);
    size_t take = cps - offset > max_chars ? max_chars : cps - offset;
    size_t to = utf8_offset(text + from, take) + from;
    putn(&out, text + from, to - from);
    if (offset + take < cps) {
        char note[200];
        snprintf(note, sizeof note,
                 "\n[\xE2\x80\xA6 recall cut here: %zu of %zu characters left; ask again with "
                 "offset %zu for more]",
                 cps - offset - take, cps, offset + take);
        put(&out, note);
    }
    return done(&out);
}

json_t *cp_checkpoint_message(const char *text, const char *compaction_id) {
    return json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "role", "user", "content", "type",
                     "text", "text", text, "source", "kind", "compaction", "compaction_id",
                     compaction_id);
}
