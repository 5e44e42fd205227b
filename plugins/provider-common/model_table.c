/*
 * plugins/provider-common/model_table.c - the shipped model table and the
 * parsing of server-reported windows (see model_table.h).
 */
#include "model_table.h"

#include <stdbool.h>
#include <string.h>

/*
 * The table.
 *
 * Source: the vendors' public model documentation as of 2026-12: OpenAI's
 * model pages (platform.openai.com/docs/models), Anthropic's models overview
 * (docs.anthropic.com, "Models overview" / "Model comparison"), DeepSeek's
 * API pricing page (api-docs.deepseek.com), and the model cards and
 * config.json (max_position_embeddings) of the open models on Hugging Face
 * (meta-llama, Qwen, mistralai, deepseek-ai).
 *
 * Conservative where unsure: a window that is too small only compacts
 * earlier, one that is too large lets a request overflow, and a max_output
 * that is too large makes provider-anthropic's default max_tokens a 400.
 * So:
 *   - context_window is the most the prompt may be.  GPT-5's 400000 counts
 *     its 128000 output tokens: the input limit, 272000, is the window here.
 *   - open models get their native window (no RoPE/YaRN extension, which
 *     servers do not enable by default: Qwen2.5 and Qwen3 are 32768), and a
 *     max_output of 8192 unless the vendor documents one (an open model has
 *     no output limit of its own; this is what a server commonly allows).
 *   - a family whose members differ gets the smallest (mistral-small is
 *     Small 3's 32768; 3.1 and 3.2 have their own, larger entries).
 *   - "128K" in a vendor's words is 128000 unless the model's config says
 *     131072.
 * A server that reports its window (vLLM's max_model_len, llama.cpp's n_ctx)
 * beats this table, and the row's `models` config beats both
 * (docs/providers.md, "Model table").
 *
 * Each line is one spelling; an alias is its own line.  Keys are lowercase
 * (matching is case-insensitive).  To add a model: add its lines here (the
 * id as the vendor spells it, plus the Hugging Face / Ollama spellings of
 * an open model) and a case to test_provider_common's table test.
 */
const char pc_model_table_source[] =
    "vendor model docs (OpenAI, Anthropic, DeepSeek, Hugging Face model cards), 2026-12";

#define D PC_MATCH_DATED
#define O PC_MATCH_OPEN
/* An OpenAI reasoning model: max_completion_tokens, no temperature
 * (pc_token_param, pc_temperature_rule) */
#define R .tokens = PC_TOKENS_MAX_COMPLETION_TOKENS, .temperature = PC_TEMPERATURE_NEVER
/* A Claude model with extended thinking only (pc_thinking_rule) */
#define X .thinking = PC_THINKING_EXTENDED
/* No rule (designated, so the rule fields need not be spelled out) */
#define P .tokens = PC_TOKENS_MAX_TOKENS

static const pc_model_entry table[] = {
    /* ---- OpenAI ---------------------------------------------------------- */
    {"gpt-4o", D, 128000, 16384, P},
    {"gpt-4o-2024-05-13", D, 128000, 4096, P}, /* the first snapshot: 4096 out */
    {"gpt-4o-mini", D, 128000, 16384, P},
    {"gpt-4.1", D, 1047576, 32768, P},
    {"gpt-4.1-mini", D, 1047576, 32768, P},
    {"gpt-4.1-nano", D, 1047576, 32768, P},
    {"gpt-4-turbo", D, 128000, 4096, P},
    {"gpt-4", D, 8192, 8192, P},
    {"gpt-3.5-turbo", D, 16385, 4096, P},
    {"o1", D, 200000, 100000, R},
    {"o1-mini", D, 128000, 65536, R},
    {"o1-preview", D, 128000, 32768, R},
    {"o1-pro", D, 200000, 100000, R},
    {"o3", D, 200000, 100000, R},
    {"o3-mini", D, 200000, 100000, R},
    {"o3-pro", D, 200000, 100000, R},
    {"o4-mini", D, 200000, 100000, R},
    {"gpt-5", D, 272000, 128000, R},
    {"gpt-5-mini", D, 272000, 128000, R},
    {"gpt-5-nano", D, 272000, 128000, R},
    /* gpt-5-chat-latest is no reasoning model: it takes temperature; max_tokens
     * is deprecated on every OpenAI model, so it gets max_completion_tokens */
    {"gpt-5-chat", D, 128000, 16384, .tokens = PC_TOKENS_MAX_COMPLETION_TOKENS},
    {"gpt-5.1", D, 272000, 128000, .tokens = PC_TOKENS_MAX_COMPLETION_TOKENS,
     .temperature = PC_TEMPERATURE_WITHOUT_REASONING}, /* reasoning_effort defaults to none */

    /* ---- Anthropic (dated ids match through their date) ------------------ */
    {"claude-3-haiku", D, 200000, 4096, .thinking = PC_THINKING_NONE},
    {"claude-3-opus", D, 200000, 4096, .thinking = PC_THINKING_NONE},
    {"claude-3-5-haiku", D, 200000, 8192, .thinking = PC_THINKING_NONE},
    {"claude-3-5-sonnet", D, 200000, 8192, .thinking = PC_THINKING_NONE},
    {"claude-3-7-sonnet", D, 200000, 64000, X},
    {"claude-sonnet-4", D, 200000, 64000, X},
    {"claude-sonnet-4-0", D, 200000, 64000, X}, /* alias of claude-sonnet-4-20250514 */
    {"claude-opus-4", D, 200000, 32000, X},
    {"claude-opus-4-0", D, 200000, 32000, X}, /* alias of claude-opus-4-20250514 */
    {"claude-opus-4-1", D, 200000, 32000, X},
    {"claude-sonnet-4-5", D, 200000, 64000, X},
    {"claude-haiku-4-5", D, 200000, 64000, X},
    {"claude-opus-4-5", D, 200000, 64000, X},

    /* Rules only (context_window and max_output 0: unknown here, left to the
     * table refresh): the thinking modes of the Claude 4.6 to 4.8 models, from
     * the troubleshooting table cited at pc_thinking_rule. */
    {"claude-opus-4-6", D, 0, 0, .thinking = PC_THINKING_BOTH},
    {"claude-sonnet-4-6", D, 0, 0, .thinking = PC_THINKING_BOTH},
    {"claude-opus-4-7", D, 0, 0, .thinking = PC_THINKING_ADAPTIVE},
    {"claude-opus-4-8", D, 0, 0, .thinking = PC_THINKING_ADAPTIVE},
    /* 1M window, 128K output (platform.claude.com/docs/models/overview) */
    {"claude-sonnet-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE},
    {"claude-fable-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE_ON},
    {"claude-mythos-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE_ON},

    /* ---- DeepSeek's API -------------------------------------------------- */
    {"deepseek-chat", D, 128000, 8192, P},
    {"deepseek-reasoner", D, 128000, 64000, P},

    /* ---- open models: Llama (HF "Llama-3.1-8B-Instruct", older HF
     *      "Meta-Llama-3.1-8B-Instruct", Ollama "llama3.1:8b") ------------- */
    {"llama3", O, 8192, 4096, P},
    {"llama-3", O, 8192, 4096, P},
    {"meta-llama-3", O, 8192, 4096, P},
    {"llama3.1", O, 131072, 8192, P},
    {"llama-3.1", O, 131072, 8192, P},
    {"meta-llama-3.1", O, 131072, 8192, P},
    {"llama3.2", O, 131072, 8192, P},
    {"llama-3.2", O, 131072, 8192, P},
    {"llama3.3", O, 131072, 8192, P},
    {"llama-3.3", O, 131072, 8192, P},

    /* ---- Qwen (HF "Qwen2.5-7B-Instruct", "Qwen3-8B"; Ollama "qwen2.5:7b",
     *      "qwen2.5-coder:7b", "qwen3:8b") -------------------------------- */
    {"qwen2.5", O, 32768, 8192, P},
    {"qwen3", O, 32768, 8192, P},

    /* ---- Mistral (HF "Mistral-7B-Instruct-v0.3", "Mistral-Nemo-Instruct-2407",
     *      "Mistral-Small-24B-Instruct-2501", "Mistral-Large-Instruct-2411";
     *      Ollama "mistral", "mistral-nemo", "mistral-small3.1"; the API's
     *      "mistral-large-latest", "open-mistral-nemo") -------------------- */
    {"mistral", O, 32768, 8192, P}, /* Ollama's mistral is Mistral 7B */
    {"mistral-7b", O, 32768, 8192, P},
    {"mistral-7b-instruct-v0.1", O, 8192, 4096, P},
    {"open-mistral-7b", O, 32768, 8192, P},
    {"mistral-nemo", O, 128000, 8192, P},
    {"open-mistral-nemo", O, 128000, 8192, P},
    {"mistral-small", O, 32768, 8192, P},
    {"mistral-small-3.1", O, 131072, 8192, P},
    {"mistral-small3.1", O, 131072, 8192, P},
    {"mistral-small-3.2", O, 131072, 8192, P},
    {"mistral-small3.2", O, 131072, 8192, P},
    {"mistral-large", O, 131072, 8192, P},

    /* ---- DeepSeek open weights (HF "DeepSeek-V3-0324", "DeepSeek-R1-0528";
     *      Ollama "deepseek-r1:7b", whose small tags are the R1 distills,
     *      128K too) ------------------------------------------------------- */
    {"deepseek-v3", O, 131072, 8192, P},
    {"deepseek-v3.1", O, 131072, 8192, P},
    {"deepseek-v3.2", O, 131072, 8192, P},
    {"deepseek-r1", O, 131072, 32768, P},
};

#undef D
#undef O
#undef R
#undef X
#undef P

const pc_model_entry *pc_model_table(size_t *count) {
    if (count)
        *count = sizeof table / sizeof table[0];
    return table;
}

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_sep(char c) { return c == '-' || c == ':' || c == '@'; }

/* Number of digits at s (up to the first non-digit). */
static size_t digits(const char *s) {
    size_t n = 0;
    while (is_digit(s[n]))
        n++;
    return n;
}

/* The length of one version qualifier at s (after its separator), or 0:
 * "latest", v<digits>, a date YYYY-MM-DD, or 8 or 4 digits (YYYYMMDD, MMDD,
 * YYMM).  A qualifier ends at a separator or the end. */
static size_t qualifier(const char *s) {
    size_t n;
    if (strncmp(s, "latest", 6) == 0)
        n = 6;
    else if (s[0] == 'v' && digits(s + 1) > 0)
        n = 1 + digits(s + 1);
    else if (digits(s) == 4 && s[4] == '-' && digits(s + 5) == 2 && s[7] == '-' &&
             digits(s + 8) == 2)
        n = 10;
    else if (digits(s) == 8 || digits(s) == 4)
        n = digits(s);
    else
        return 0;
    return s[n] == '\0' || is_sep(s[n]) ? n : 0;
}

/* True when `rest` (lowercase, what follows a key) may follow it. */
static bool rest_ok(const char *rest, pc_model_match match) {
    if (rest[0] == '\0')
        return true;
    if (!is_sep(rest[0]))
        return false;
    if (match == PC_MATCH_OPEN)
        return true;
    while (rest[0]) { /* (separator qualifier)+ */
        size_t n = is_sep(rest[0]) ? qualifier(rest + 1) : 0;
        if (n == 0)
            return false;
        rest += 1 + n;
    }
    return true;
}

/* Longest id segment looked at; longer ids match nothing (no table key or
 * qualifier list comes near it). */
#define MAX_ID 256

const pc_model_entry *pc_model_table_find(const char *model) {
    if (!model)
        return NULL;
    const char *seg = strrchr(model, '/');
    seg = seg ? seg + 1 : model;
    size_t len = strlen(seg);
    if (len == 0 || len >= MAX_ID)
        return NULL;
    char id[MAX_ID];
    for (size_t i = 0; i <= len; i++)
        id[i] = lower(seg[i]);
    const pc_model_entry *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        size_t klen = strlen(table[i].key);
        if (klen > len || klen <= best_len || memcmp(id, table[i].key, klen) != 0 ||
            !rest_ok(id + klen, table[i].match))
            continue;
        best = &table[i];
        best_len = klen;
    }
    return best;
}

/* ------------------------------------------------------------------------ */
/* What servers report                                                      */
/* ------------------------------------------------------------------------ */

/* A positive integer that fits a long, or 0. */
static long positive(const json_t *v) {
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > (json_int_t)0x7fffffff)
        return 0;
    return (long)json_integer_value(v);
}

json_t *pc_windows_from_models_body(const char *body, size_t len) {
    json_t *root = body ? json_loadb(body, len, 0, NULL) : NULL;
    json_t *data = json_object_get(root, "data");
    json_t *out = json_is_array(data) ? json_object() : NULL;
    size_t i;
    json_t *m;
    json_array_foreach(data, i, m) {
        const char *id = json_string_value(json_object_get(m, "id"));
        long n = positive(json_object_get(m, "max_model_len"));
        if (out && id && id[0] && n && json_object_set_new(out, id, json_integer(n)) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    json_decref(root);
    return out;
}

long pc_window_from_props_body(const char *body, size_t len) {
    json_t *root = body ? json_loadb(body, len, 0, NULL) : NULL;
    long n = positive(json_object_get(json_object_get(root, "default_generation_settings"),
                                      "n_ctx"));
    if (!n)
        n = positive(json_object_get(root, "n_ctx"));
    json_decref(root);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Rules                                                                    */
/* ------------------------------------------------------------------------ */

const char *pc_thinking_refusal(const pc_model_entry *e, const char *type) {
    if (!e || e->thinking == PC_THINKING_UNKNOWN)
        return NULL;
    bool enabled = type && strcmp(type, "enabled") == 0;
    bool disabled = type && strcmp(type, "disabled") == 0;
    bool adaptive = type && strcmp(type, "adaptive") == 0;
    switch (e->thinking) {
    case PC_THINKING_NONE:
        return enabled || adaptive
                   ? "has no thinking: only thinking.type \"disabled\" may be set (Anthropic, "
                     "\"Troubleshooting thinking\")"
                   : NULL;
    case PC_THINKING_EXTENDED:
        return adaptive ? "takes only extended thinking: thinking.type \"adaptive\" is refused "
                          "with a 400; use {\"type\":\"enabled\",\"budget_tokens\":N} "
                          "(Anthropic, \"Troubleshooting thinking\")"
                        : NULL;
    case PC_THINKING_ADAPTIVE:
        return enabled ? "takes only adaptive thinking: thinking.type \"enabled\" is refused "
                         "with a 400; use {\"type\":\"adaptive\"} (Anthropic, "
                         "\"Troubleshooting thinking\")"
                       : NULL;
    case PC_THINKING_ADAPTIVE_ON:
        return enabled || disabled
                   ? "thinks on every request (adaptive, always on): thinking.type \"enabled\" "
                     "and \"disabled\" are refused with a 400; set {\"type\":\"adaptive\"} "
                     "or no thinking (Anthropic, \"Troubleshooting thinking\")"
                   : NULL;
    case PC_THINKING_BOTH:
    case PC_THINKING_UNKNOWN:
        break;
    }
    return NULL;
}
