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
 * Sources, read 2026-12 (the stored copies of the vendors' pages):
 *   - Anthropic: models overview and each model's page
 *     (platform.claude.com/docs/en/models/overview, .../models/<model>/overview:
 *     window, max output, thinking, prices), the pricing page
 *     (platform.claude.com/docs/en/about-claude/pricing: base input, 5m and 1h
 *     cache writes, cache hits, output), prompt caching
 *     (.../build-with-claude/prompt-caching: 5m write 1.25x, 1h write 2x, read
 *     0.1x of input; the minimum cacheable prompt per model, as quoted in
 *     anthropics/anthropic-sdk-python#1194), "What's new in Claude Opus 5"
 *     (Opus 5's minimum 512, Opus 4.8's 1024), "What's new in Claude Opus 4.8"
 *     (mid-conversation system messages start with Opus 4.8).
 *   - OpenAI: the model pages (developers.openai.com/api/docs/models/<id>:
 *     window, max output, prices) and the prompt caching guide
 *     (platform.openai.com/docs/guides/prompt-caching: prompts of 1024 tokens
 *     or more are cached).
 *   - DeepSeek: api-docs.deepseek.com (models and pricing).
 *   - Google: ai.google.dev/gemini-api/docs/models and /openai (the
 *     OpenAI-compatible endpoint).
 *   - Open models: the model cards and config.json (max_position_embeddings)
 *     on Hugging Face (meta-llama, Qwen, mistralai, deepseek-ai).
 * Where only a third-party page gives a fact it says so beside the entry;
 * where no page found gives it, it is left unknown (0, price.known false)
 * rather than guessed, and the entry says so.
 *
 * Prices are list prices in USD per million tokens, standard tier (no batch,
 * priority or regional uplift).  A model whose price depends on the prompt's
 * length (a long-context tier: Claude Haiku 5.5 above 100K, GPT-5.4 and
 * GPT-5.5 above 272K, Gemini 3 Pro above 200K) has no price here: one flat
 * price would be wrong for the long prompts, and a wrong cost is worse than
 * none.  Set `models.<id>.price` in the provider row to price it.
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
 *     131072; "1M" is 1000000 (Anthropic) unless the vendor gives the exact
 *     count (Gemini's 1048576).
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
    "vendor model and pricing pages (Anthropic platform.claude.com models overview and pricing; "
    "OpenAI developers.openai.com models; DeepSeek api-docs.deepseek.com; Google ai.google.dev "
    "Gemini models), Hugging Face model cards; third-party where marked in model_table.c; "
    "2026-12";

#define D PC_MATCH_DATED
#define O PC_MATCH_OPEN
/* An OpenAI reasoning model: max_completion_tokens, no temperature
 * (pc_token_param, pc_temperature_rule) */
#define R .tokens = PC_TOKENS_MAX_COMPLETION_TOKENS, .temperature = PC_TEMPERATURE_NEVER
/* An OpenAI model whose reasoning_effort defaults to "none" (gpt-5.1 on):
 * max_completion_tokens, temperature only while reasoning is off */
#define R51 .tokens = PC_TOKENS_MAX_COMPLETION_TOKENS, \
            .temperature = PC_TEMPERATURE_WITHOUT_REASONING
/* A Claude model with extended thinking only (pc_thinking_rule) */
#define X .thinking = PC_THINKING_EXTENDED
/* No rule (designated, so the rule fields need not be spelled out) */
#define P .tokens = PC_TOKENS_MAX_TOKENS
/* Mid-conversation system messages (pc_mid_system_rule) */
#define MID_YES .mid_system = PC_MID_SYSTEM_TAKEN
#define MID_NO .mid_system = PC_MID_SYSTEM_REFUSED
/* A list price: input, cached input, 5m write, 1h write, output (USD/MTok) */
#define PRICE(in, cached, w5, w1, out) \
    .price = {.known = true, .input = (in), .cached_input = (cached), \
              .cache_write_5m = (w5), .cache_write_1h = (w1), .output = (out)}
/* Anthropic's cache multipliers on input `in` (prompt caching page): read
 * 0.1x, 5m write 1.25x, 1h write 2x */
#define APRICE(in, out) PRICE(in, (in) * 0.1, (in) * 1.25, (in) * 2.0, out)
/* OpenAI: no cache write charge (writes bill as input), cached read as given */
#define OPRICE(in, cached, out) PRICE(in, cached, 0, 0, out)
/* OpenAI's automatic prompt caching starts at 1024 tokens (prompt caching guide) */
#define OC .min_cache_tokens = 1024

static const pc_model_entry table[] = {
    /* ---- OpenAI ---------------------------------------------------------- */
    /* gpt-4o .. o4-mini: windows from the model pages; prices not re-read
     * for this refresh (unknown: no cost shown) */
    {"gpt-4o", D, 128000, 16384, P, OC},
    {"gpt-4o-2024-05-13", D, 128000, 4096, P, OC}, /* the first snapshot: 4096 out */
    {"gpt-4o-mini", D, 128000, 16384, P, OC},
    {"gpt-4.1", D, 1047576, 32768, P, OC},
    {"gpt-4.1-mini", D, 1047576, 32768, P, OC},
    {"gpt-4.1-nano", D, 1047576, 32768, P, OC},
    {"gpt-4-turbo", D, 128000, 4096, P},
    {"gpt-4", D, 8192, 8192, P},
    {"gpt-3.5-turbo", D, 16385, 4096, P},
    {"o1", D, 200000, 100000, R, OC},
    {"o1-mini", D, 128000, 65536, R, OC},
    {"o1-preview", D, 128000, 32768, R, OC},
    {"o1-pro", D, 200000, 100000, R},
    {"o3", D, 200000, 100000, R, OC},
    {"o3-mini", D, 200000, 100000, R, OC},
    {"o3-pro", D, 200000, 100000, R},
    {"o4-mini", D, 200000, 100000, R, OC},
    /* GPT-5 family: 400,000 context including 128,000 output (model pages) */
    {"gpt-5", D, 272000, 128000, R, OC, OPRICE(1.25, 0.125, 10.0)},
    {"gpt-5-mini", D, 272000, 128000, R, OC, OPRICE(0.25, 0.025, 2.0)},
    {"gpt-5-nano", D, 272000, 128000, R, OC}, /* price not found: unknown */
    /* gpt-5-chat-latest is no reasoning model: it takes temperature; max_tokens
     * is deprecated on every OpenAI model, so it gets max_completion_tokens */
    {"gpt-5-chat", D, 128000, 16384, .tokens = PC_TOKENS_MAX_COMPLETION_TOKENS, OC},
    /* gpt-5.1: reasoning_effort defaults to none (model page: "none (default),
     * low, medium, and high"); $1.25 / $0.125 / $10 */
    {"gpt-5.1", D, 272000, 128000, R51, OC, OPRICE(1.25, 0.125, 10.0)},
    /* gpt-5.2: 400,000 / 128,000 (platform.openai.com/docs/models/gpt-5.2 via
     * the Vercel AI Gateway card); effort none..xhigh as 5.1; $1.75 / $0.175
     * / $14 (third-party reading of the pricing page, nicolalazzari.ai) */
    {"gpt-5.2", D, 272000, 128000, R51, OC, OPRICE(1.75, 0.175, 14.0)},
    /* gpt-5.4 / gpt-5.5: 1,050,000 context with 128,000 output, 922,000
     * input (third-party: OpenRouter, WaveSpeed); long-context price tier
     * above 272K, so no flat price (see above) */
    {"gpt-5.4", D, 922000, 128000, R51, OC},
    {"gpt-5.5", D, 0, 0, R51, OC}, /* rules only: input limit not found */

    /* ---- Anthropic (dated ids match through their date) ------------------ */
    /* Claude 3.x: retired or legacy; no prices re-read */
    {"claude-3-haiku", D, 200000, 4096, .thinking = PC_THINKING_NONE, MID_NO,
     .min_cache_tokens = 2048},
    {"claude-3-opus", D, 200000, 4096, .thinking = PC_THINKING_NONE, MID_NO,
     .min_cache_tokens = 1024},
    {"claude-3-5-haiku", D, 200000, 8192, .thinking = PC_THINKING_NONE, MID_NO,
     .min_cache_tokens = 2048},
    {"claude-3-5-sonnet", D, 200000, 8192, .thinking = PC_THINKING_NONE, MID_NO,
     .min_cache_tokens = 1024},
    {"claude-3-7-sonnet", D, 200000, 64000, X, MID_NO, .min_cache_tokens = 1024},
    /* Claude 4.0 / 4.1: pricing page $15 / $75 for Opus 4 and 4.1 (retired
     * except on Bedrock and Google Cloud); Sonnet 4's price not re-read */
    {"claude-sonnet-4", D, 200000, 64000, X, MID_NO, .min_cache_tokens = 1024},
    {"claude-sonnet-4-0", D, 200000, 64000, X, MID_NO, .min_cache_tokens = 1024},
    {"claude-opus-4", D, 200000, 32000, X, MID_NO, .min_cache_tokens = 1024,
     APRICE(15.0, 75.0)},
    {"claude-opus-4-0", D, 200000, 32000, X, MID_NO, .min_cache_tokens = 1024,
     APRICE(15.0, 75.0)},
    {"claude-opus-4-1", D, 200000, 32000, X, MID_NO, .min_cache_tokens = 1024,
     APRICE(15.0, 75.0)},
    /* Claude 4.5: Sonnet 4.5 200K (1M was a beta), $3 / $15 (the pricing
     * page's Sonnet 4.x row, not in the stored excerpt: left unknown) */
    {"claude-sonnet-4-5", D, 200000, 64000, X, MID_NO, .min_cache_tokens = 1024},
    {"claude-haiku-4-5", D, 200000, 64000, X, MID_NO, .min_cache_tokens = 4096,
     APRICE(1.0, 5.0)},
    {"claude-opus-4-5", D, 200000, 64000, X, MID_NO, .min_cache_tokens = 4096,
     APRICE(5.0, 25.0)},
    /* Claude 4.6 to 4.8: 1M window, 128K output (each model's page; Sonnet
     * 4.6's page not in the stored copy: 1M / 64K per the models.dev
     * profile, third-party, perstack-ai/perstack#801).  Thinking modes from
     * the troubleshooting table cited at pc_thinking_rule.  Opus 4.7's 2048
     * minimum: third-party summary of the prompt caching page (dev.to,
     * "Claude's prompt cache fails silently below 1,024 tokens"). */
    {"claude-opus-4-6", D, 1000000, 128000, .thinking = PC_THINKING_BOTH, MID_NO,
     .min_cache_tokens = 4096, APRICE(5.0, 25.0)},
    {"claude-sonnet-4-6", D, 1000000, 64000, .thinking = PC_THINKING_BOTH, MID_NO,
     .min_cache_tokens = 1024},
    {"claude-opus-4-7", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE, MID_NO,
     .min_cache_tokens = 2048, APRICE(5.0, 25.0)},
    {"claude-opus-4-8", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE, MID_YES,
     .min_cache_tokens = 1024, APRICE(5.0, 25.0)},
    /* Claude 5: 1M window, 128K output (model pages).  Sonnet 5 refuses
     * non-default sampling parameters (its page: temperature, top_p, top_k
     * other than the default are a 400).  Whether Sonnet 5 takes a
     * mid-conversation system message: the sources disagree (unknown). */
    {"claude-sonnet-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE,
     .temperature = PC_TEMPERATURE_NEVER, .min_cache_tokens = 1024,
     PRICE(2.0, 0.20, 2.50, 4.0, 10.0)},
    /* Sonnet 5.5: $2 / $10, writes $2.50 / $4; cache read $0.20 on the stored
     * model page, cut to $0.10 on 2026-10-07 (the pricing trackers claudit
     * v1.9.2, PromptFuel v1.0.23, claude-usage v1.5.7): $0.10 here */
    {"claude-sonnet-5-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE,
     .temperature = PC_TEMPERATURE_NEVER, MID_YES, PRICE(2.0, 0.10, 2.50, 4.0, 10.0)},
    /* Haiku 5.5: priced by prompt length (from $0.10 / $0.50): no flat price */
    {"claude-haiku-5-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE, MID_YES},
    /* Opus 5: thinking on by default, may be disabled at effort high or below
     * ("enabled" refused as on 4.7); Opus 5.5: thinking cannot be disabled */
    {"claude-opus-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE, MID_YES,
     .min_cache_tokens = 512, PRICE(5.0, 0.50, 6.25, 10.0, 25.0)},
    {"claude-opus-5-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE_ON, MID_YES,
     PRICE(4.0, 0.20, 5.0, 8.0, 20.0)},
    /* Fable and Mythos: adaptive, always on.  5.1's cache hits are $0.25
     * (pricing page).  Minimum 512: third-party (dev.to, above). */
    {"claude-fable-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE_ON, MID_YES,
     .min_cache_tokens = 512, PRICE(10.0, 1.0, 12.5, 20.0, 50.0)},
    {"claude-fable-5-1", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE_ON, MID_YES,
     PRICE(10.0, 0.25, 12.5, 20.0, 50.0)},
    {"claude-mythos-5", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE_ON, MID_YES,
     .min_cache_tokens = 512, PRICE(10.0, 1.0, 12.5, 20.0, 50.0)},
    {"claude-mythos-5-1", D, 1000000, 128000, .thinking = PC_THINKING_ADAPTIVE_ON, MID_YES,
     PRICE(10.0, 0.25, 12.5, 20.0, 50.0)},

    /* ---- DeepSeek's API -------------------------------------------------- */
    /* V4: deepseek-chat and deepseek-reasoner are the non-thinking and
     * thinking modes of deepseek-v4-flash, 1M context, up to 384K output
     * (third-party: arikusi/deepseek-mcp-server v2.0.0, docs.sim.ai; the
     * stored api-docs page still shows V3's 64K).  Prices: the third-party
     * pages disagree on the cache-hit rate, so unknown. */
    {"deepseek-chat", D, 1000000, 384000, P},
    {"deepseek-reasoner", D, 1000000, 384000, P},
    {"deepseek-v4-flash", D, 1000000, 384000, P},
    {"deepseek-v4-pro", D, 1000000, 384000, P},

    /* ---- Google Gemini 3 (the OpenAI-compatible endpoint,
     *      generativelanguage.googleapis.com/v1beta/openai/) --------------- */
    /* 1,048,576 in, 65,536 out (OpenRouter's card and the Box model card,
     * third-party).  The compatible endpoint takes max_tokens and
     * temperature (ai.google.dev/gemini-api/docs/openai; Google advises the
     * default 1.0 for Gemini 3 but does not refuse others).  Flash is
     * $0.50 / $3 with no cached-input price found, Pro has a tier above
     * 200K: both unknown. */
    {"gemini-3-flash", D, 1048576, 65536, P},
    {"gemini-3-flash-preview", D, 1048576, 65536, P},
    {"gemini-3-pro", D, 1048576, 65536, P},
    {"gemini-3-pro-preview", D, 1048576, 65536, P},

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
#undef R51
#undef MID_YES
#undef MID_NO
#undef PRICE
#undef APRICE
#undef OPRICE
#undef OC

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
