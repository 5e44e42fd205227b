/*
 * plugins/provider-common/model_table.h - what the HTTP providers know about
 * a model's limits without being told: the shipped model table (context
 * window and max output of well-known models) with its match rules, and the
 * parsing of what an OpenAI-compatible server reports about its own windows
 * (vLLM's GET /v1/models, llama.cpp's GET /props).
 *
 * Not a plugin: each provider lists model_table.c among its own sources, so
 * its symbols are plugin-private (hidden visibility).  Pure: nothing here
 * touches the host API table, so unit tests compile model_table.c directly.
 * All memory comes from malloc and jansson.  docs/providers.md, "Model
 * table", documents the rules and how to add a model.
 */
#ifndef WEIR_MODEL_TABLE_H
#define WEIR_MODEL_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/** How much of an id may follow a table key (see pc_model_table_find). */
typedef enum pc_model_match {
    /**
     * Hosted API models (OpenAI, Anthropic, DeepSeek's API): only version
     * qualifiers may follow the key: dates (20250929, 2024-08-06, 0324),
     * "latest" and v<digits>, each after '-', ':' or '@'.
     */
    PC_MATCH_DATED,
    /**
     * Open-weight models (vLLM, llama.cpp, Ollama): anything may follow the
     * key after '-', ':' or '@' (sizes, "instruct", quantisations, tags).
     */
    PC_MATCH_OPEN,
} pc_model_match;

/*
 * The request rules of a model (docs/providers.md, "Per-model rules").  Each
 * enum's 0 is "no rule": what every model takes, so an entry written without
 * its rules (and every model the table does not know) gets the plain
 * request.  The struct grows at its end; entries set the rules they need
 * with designated initialisers.
 */

/** Which member carries the call config's max_tokens (OpenAI Chat Completions). */
typedef enum pc_token_param {
    PC_TOKENS_MAX_TOKENS = 0, /* "max_tokens" (every compatible server knows it) */
    /*
     * "max_completion_tokens": OpenAI's reasoning models (o-series, gpt-5
     * family) refuse max_tokens with a 400 ("Unsupported parameter:
     * 'max_tokens' is not supported with this model. Use
     * 'max_completion_tokens' instead.").  Chat Completions reference,
     * platform.openai.com/docs/api-reference/chat/create: max_tokens is
     * "deprecated in favor of max_completion_tokens, and is not compatible
     * with o-series models"; max_completion_tokens is "an upper bound for
     * the number of tokens that can be generated for a completion, including
     * visible output tokens and reasoning tokens".
     */
    PC_TOKENS_MAX_COMPLETION_TOKENS,
} pc_token_param;

/** Whether the model takes the call config's temperature (OpenAI). */
typedef enum pc_temperature_rule {
    PC_TEMPERATURE_ANY = 0, /* sent as given */
    /*
     * Never sent: o-series and gpt-5 (before 5.1) reasoning models take only
     * the default (1) and answer any other value with a 400 ("Unsupported
     * value: 'temperature' does not support 0.2 with this model. Only the
     * default (1) value is supported."; OpenAI reasoning guide,
     * developers.openai.com/api/docs/guides/reasoning, "Limitations").
     */
    PC_TEMPERATURE_NEVER,
    /*
     * Sent only while reasoning is off: gpt-5.1 defaults reasoning_effort to
     * "none" and takes temperature, top_p and logprobs only then (OpenAI's
     * reasoning_effort reference: "gpt-5.1 defaults to none ... All models
     * before gpt-5.1 default to medium"; latest-model guide, "parameter
     * compatibility").  So: sent when the options set no reasoning_effort or
     * set "none", dropped otherwise.
     */
    PC_TEMPERATURE_WITHOUT_REASONING,
} pc_temperature_rule;

/**
 * The `thinking` modes an Anthropic model takes.  Source: Anthropic's
 * "Troubleshooting thinking" page, table "Thinking support, defaults, and
 * rejected configurations by model"
 * (platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting):
 * each row lists the thinking.type values the model answers with a 400.
 */
typedef enum pc_thinking_rule {
    PC_THINKING_UNKNOWN = 0, /* no rule: any thinking option is sent */
    PC_THINKING_NONE,        /* no thinking (Claude 3, 3.5): "enabled", "adaptive" refused */
    PC_THINKING_EXTENDED,    /* extended only (3.7 to 4.5): "adaptive" refused */
    PC_THINKING_BOTH,        /* adaptive, and extended (deprecated) (4.6): all taken */
    PC_THINKING_ADAPTIVE,    /* adaptive only, off by default (Opus 4.7, 4.8,
                                Sonnet 5): "enabled" refused */
    PC_THINKING_ADAPTIVE_ON, /* adaptive only, always on (Fable 5, Mythos 5):
                                "enabled" and "disabled" refused */
} pc_thinking_rule;

/**
 * Whether a model takes a `system` message in the middle of the
 * conversation (Anthropic: platform.claude.com/docs/build-with-claude/
 * mid-conversation-system-messages; OpenAI Chat Completions takes system and
 * developer messages anywhere).  A changed system prompt is appended as one
 * where the model takes it, else as a user-role note in the envelope that
 * docs/providers.md documents.
 */
typedef enum pc_mid_system_rule {
    PC_MID_SYSTEM_UNKNOWN = 0, /* no rule: the provider's default for its API */
    PC_MID_SYSTEM_TAKEN,       /* a role "system" message is taken anywhere */
    PC_MID_SYSTEM_REFUSED,     /* only at the start: appended ones become user notes */
} pc_mid_system_rule;

/**
 * A model's list prices in US dollars per million tokens, from the vendor's
 * pricing page (the table's source and date say which).  `known` false: no
 * price, and no cost is ever shown for the model (never a wrong one).
 */
typedef struct pc_model_price {
    bool known;
    double input;          /* uncached input */
    double cached_input;   /* cache read */
    double cache_write_5m; /* cache write, 5-minute TTL (Anthropic 1.25x input); 0: as input */
    double cache_write_1h; /* cache write, 1-hour TTL (Anthropic 2x input); 0: as input */
    double output;         /* output, reasoning included */
} pc_model_price;

/** One table entry: one spelling of a model id.  Static data. */
typedef struct pc_model_entry {
    const char *key;      /* lowercase */
    pc_model_match match; /* what may follow the key */
    long context_window;  /* tokens: the most the prompt may be; 0: unknown (an
                             entry that only carries rules) */
    long max_output;      /* tokens: the most one response may be; 0: unknown */
    pc_token_param tokens;            /* which member carries max_tokens */
    pc_temperature_rule temperature;  /* whether temperature is sent */
    pc_thinking_rule thinking;        /* the thinking modes taken */
    pc_mid_system_rule mid_system;    /* whether a mid-conversation system message is taken */
    long min_cache_tokens;            /* shortest cacheable prefix in tokens; 0: unknown */
    pc_model_price price;             /* list prices; price.known false: none */
} pc_model_entry;

/**
 * Why `model`'s table entry (`e`, may be NULL: no rule) refuses a `thinking`
 * option whose "type" is `type` (borrowed; NULL: not a string), or NULL when
 * it takes it.  @return a static sentence naming the rule and its source
 * ("takes only adaptive thinking (thinking.type \"enabled\" is refused ...").
 * Thread-safe (pure).
 */
const char *pc_thinking_refusal(const pc_model_entry *e, const char *type);

/**
 * The table entry for `model` (borrowed; NULL or "" finds nothing), or NULL
 * when the table does not know it.  Matching is ASCII case-insensitive and
 * looks at the id's last path segment (after its last '/', so Hugging Face
 * ids "meta-llama/Llama-3.1-8B-Instruct" and vendor-prefixed ids
 * "openai/gpt-4o" match too).  Of the keys the segment starts with, where
 * the key ends the segment or is followed by '-', ':' or '@' and the rest
 * is allowed by the entry's pc_model_match, the longest wins (an exact
 * match is the longest of all).  So gpt-4o-2024-08-06 is gpt-4o,
 * gpt-4o-mini is not gpt-4o, o1x and gpt-4o-minix are nothing, and
 * llama3.1:8b is llama3.1.
 * @return a static entry.  Thread-safe (pure).
 */
const pc_model_entry *pc_model_table_find(const char *model);

/**
 * The whole table (static), for tests and listings; *count receives the
 * number of entries.  Thread-safe.
 */
const pc_model_entry *pc_model_table(size_t *count);

/** The table's source and date, as written in model_table.c (static). */
extern const char pc_model_table_source[];

/**
 * Parse a GET /v1/models body (`len` bytes, borrowed, need not be
 * NUL-terminated) as vLLM answers it: {"data":[{"id":..., "max_model_len":N},
 * ...]}.  @return a new object {id: N} of the entries with a string id and a
 * positive integer max_model_len (empty when none has one), or NULL when the
 * body is not such a list (not JSON, no data array) or out of memory.
 * Thread-safe (pure).
 */
json_t *pc_windows_from_models_body(const char *body, size_t len);

/**
 * Parse a GET /props body as llama.cpp answers it: the slot context size
 * `default_generation_settings.n_ctx` (newer builds), else a top-level
 * `n_ctx` (older builds).  @return N (a positive integer), or 0 when the body
 * has neither.  Thread-safe (pure).
 */
long pc_window_from_props_body(const char *body, size_t len);

#endif /* WEIR_MODEL_TABLE_H */
