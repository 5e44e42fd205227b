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

/** One table entry: one spelling of a model id.  Static data. */
typedef struct pc_model_entry {
    const char *key;      /* lowercase */
    pc_model_match match; /* what may follow the key */
    long context_window;  /* tokens: the most the prompt may be */
    long max_output;      /* tokens: the most one response may be */
} pc_model_entry;

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
