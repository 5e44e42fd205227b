/* plugins/compaction-basic/compaction_policy.c - see compaction_policy.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup */
#endif
#include "compaction_policy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cp_config_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"threshold_ratio\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"
    "\"keep_recent_tokens\":{\"type\":\"integer\",\"minimum\":0},"
    "\"keep_recent_ratio\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"
    "\"max_attempts\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10},"
    "\"max_overflow_retries\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10},"
    "\"prune\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"max_result_chars\":{\"type\":\"integer\",\"minimum\":1},"
    "\"head_chars\":{\"type\":\"integer\",\"minimum\":0},"
    "\"tail_chars\":{\"type\":\"integer\",\"minimum\":0}}},"
    "\"summary\":{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"provider\":{\"type\":\"string\",\"minLength\":1},"
    "\"model\":{\"type\":\"string\",\"minLength\":1},"
    "\"max_tokens\":{\"type\":\"integer\",\"minimum\":1},"
    "\"prompt\":{\"type\":\"string\",\"minLength\":1}}}}}";

static const char default_prompt[] =
    "You are compacting an agent's conversation so that it can go on within its context "
    "window. Write a concise but complete summary of the conversation below: the user's "
    "requests and intent, key facts and decisions, files, code and commands involved, errors "
    "and how they were fixed, tool results that still matter, and the work in progress with "
    "its next step. If the conversation starts with an earlier summary, merge it. Reply with "
    "the summary only.";

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
    cfg->threshold_ratio = num_or(config, "threshold_ratio", 0.8);
    cfg->keep_recent_tokens = (long)int_or(config, "keep_recent_tokens", -1);
    cfg->keep_recent_ratio = num_or(config, "keep_recent_ratio", 0.16);
    cfg->max_attempts = (int)int_or(config, "max_attempts", 2);
    cfg->max_overflow_retries = (int)int_or(config, "max_overflow_retries", 1);
    long long max = int_or(prune, "max_result_chars", 4000);
    long long head = int_or(prune, "head_chars", 1500);
    long long tail = int_or(prune, "tail_chars", 500);
    cfg->summary_max_tokens = (long)int_or(summary, "max_tokens", 4096);
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
    if (max < 1 || head < 0 || tail < 0 || head + tail + MARKER_ROOM >= max)
        return fail(msg, msg_size,
                    "config.prune: head_chars + tail_chars + %d (the marker) must stay below "
                    "max_result_chars (%lld)",
                    MARKER_ROOM, max);
    if (cfg->summary_max_tokens < 1)
        return fail(msg, msg_size, "config.summary.max_tokens: expected a positive integer");
    if (!json_object_get(summary, "provider") != !json_object_get(summary, "model"))
        return fail(msg, msg_size, "config.summary: provider and model must be set together");
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
    return 0;
}

void cp_config_clear(cp_config *cfg) {
    if (!cfg)
        return;
    free(cfg->summary_provider);
    free(cfg->summary_model);
    free(cfg->summary_prompt);
    cfg->summary_provider = cfg->summary_model = cfg->summary_prompt = NULL;
}

/* ------------------------------------------------------------------------ */
/* Token estimates                                                           */
/* ------------------------------------------------------------------------ */

size_t cp_tokens_for_chars(size_t chars) { return chars / 4 + (chars % 4 != 0); }

static size_t str_len(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_length(v) : 0;
}

/* Characters of a block array (recursively), and images. */
static void blocks_size(const json_t *blocks, size_t *chars, size_t *images) {
    size_t i;
    const json_t *b;
    json_array_foreach(blocks, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (!type)
            continue;
        if (!strcmp(type, "text") || !strcmp(type, "reasoning"))
            *chars += str_len(b, "text");
        else if (!strcmp(type, "tool_call"))
            *chars += str_len(b, "name") + str_len(b, "arguments") + str_len(b, "id");
        else if (!strcmp(type, "tool_result"))
            blocks_size(json_object_get(b, "content"), chars, images);
        else if (!strcmp(type, "image"))
            (*images)++;
    }
}

size_t cp_message_tokens(const json_t *message) {
    if (!json_is_object(message))
        return 0;
    size_t chars = 0, images = 0;
    blocks_size(json_object_get(message, "content"), &chars, &images);
    return cp_tokens_for_chars(chars) + images * 1000 + 4;
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

size_t cp_usage_tokens(const json_t *usage) {
    static const char *const keys[] = {"input_tokens", "output_tokens", "cache_read_tokens",
                                       "cache_write_tokens"};
    size_t total = 0;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        json_int_t v = json_integer_value(json_object_get(usage, keys[i]));
        if (v > 0)
            total += (size_t)v;
    }
    return total;
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

/* Count of `id` among the tool_call ids (calls) or tool_result call_ids in [s, e). */
static size_t count_ref(const json_t *surface, size_t s, size_t e, const char *id, bool calls) {
    size_t n = 0;
    for (size_t i = s; i < e; i++) {
        const json_t *content =
            json_object_get(json_object_get(json_array_get(surface, i), "message"), "content");
        size_t k;
        const json_t *b;
        json_array_foreach(content, k, b) {
            const char *type = json_string_value(json_object_get(b, "type"));
            const char *ref = json_string_value(json_object_get(b, calls ? "id" : "call_id"));
            if (type && ref && !strcmp(type, calls ? "tool_call" : "tool_result") &&
                !strcmp(ref, id))
                n++;
        }
    }
    return n;
}

/* Whether [s, e) holds every result of its calls and every call of its results. */
static bool balanced(const json_t *surface, size_t s, size_t e) {
    for (size_t i = s; i < e; i++) {
        const json_t *content =
            json_object_get(json_object_get(json_array_get(surface, i), "message"), "content");
        size_t k;
        const json_t *b;
        json_array_foreach(content, k, b) {
            const char *type = json_string_value(json_object_get(b, "type"));
            if (!type)
                continue;
            bool call = !strcmp(type, "tool_call"), result = !strcmp(type, "tool_result");
            const char *ref = json_string_value(json_object_get(b, call ? "id" : "call_id"));
            if (!(call || result))
                continue;
            if (!ref || count_ref(surface, s, e, ref, !call) == 0)
                return false;
        }
    }
    return true;
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
    while (keep_from > s && !balanced(surface, s, keep_from))
        keep_from--;
    if (keep_from <= s)
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
/* Transcript and checkpoint                                                 */
/* ------------------------------------------------------------------------ */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const char *s) {
    size_t n = strlen(s);
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
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

static void render_blocks(buf *b, const json_t *blocks) {
    size_t i;
    const json_t *blk;
    json_array_foreach(blocks, i, blk) {
        const char *type = json_string_value(json_object_get(blk, "type"));
        if (!type)
            continue;
        if (!strcmp(type, "text")) {
            const char *text = json_string_value(json_object_get(blk, "text"));
            put(b, text ? text : "");
            put(b, "\n");
        } else if (!strcmp(type, "tool_call")) {
            const char *name = json_string_value(json_object_get(blk, "name"));
            const char *args = json_string_value(json_object_get(blk, "arguments"));
            put(b, "[tool call ");
            put(b, name ? name : "?");
            put(b, "] ");
            put(b, args ? args : "");
            put(b, "\n");
        } else if (!strcmp(type, "tool_result")) {
            put(b, json_is_true(json_object_get(blk, "is_error")) ? "[tool error]\n"
                                                                  : "[tool result]\n");
            render_blocks(b, json_object_get(blk, "content"));
        } else if (!strcmp(type, "image")) {
            put(b, "[image]\n");
        }
    }
}

char *cp_render_transcript(const json_t *surface, size_t start, size_t end) {
    buf b = {0};
    put(&b, "");
    for (size_t i = start; i <= end && i < json_array_size(surface); i++) {
        const json_t *m = json_object_get(json_array_get(surface, i), "message");
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role)
            continue;
        put(&b, i > start ? "\n[" : "[");
        put(&b, role);
        put(&b, "]\n");
        render_blocks(&b, json_object_get(m, "content"));
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

json_t *cp_summary_message(const char *summary, const char *compaction_id) {
    size_t n = strlen(CP_SUMMARY_PREFIX) + strlen(summary) + 1;
    char *text = malloc(n);
    if (!text)
        return NULL;
    snprintf(text, n, "%s%s", CP_SUMMARY_PREFIX, summary);
    json_t *m =
        json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "role", "user", "content", "type", "text",
                  "text", text, "source", "kind", "compaction", "compaction_id", compaction_id);
    free(text);
    return m;
}
