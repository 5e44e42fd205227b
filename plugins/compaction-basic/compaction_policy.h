/*
 * plugins/compaction-basic/compaction_policy.h - the pure part of
 * compaction-basic (docs/compaction.md): config, token estimates, tool
 * result pruning, summary range selection, transcript rendering.  No host
 * calls: only jansson and libc, so test_compaction compiles it directly.
 *
 * A surface here is what api->agent_surface returns: an array of
 * {"seq":N, "type":"...", "message":{...}|null} in surface order.
 * Every function is reentrant; none keeps state.
 */
#ifndef WEIR_COMPACTION_POLICY_H
#define WEIR_COMPACTION_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/** Parsed plugin config (read-only after cp_config_parse). */
typedef struct cp_config {
    double threshold_ratio;   /* compact at floor(context_window * ratio); (0, 1] */
    long keep_recent_tokens;  /* verbatim tail kept by summaries; -1: use the ratio */
    double keep_recent_ratio; /* tail as a fraction of the window (< threshold_ratio) */
    size_t max_result_chars;  /* a tool result text longer than this is pruned */
    size_t head_chars;        /* code points kept at the start of a pruned text */
    size_t tail_chars;        /* code points kept at its end */
    char *summary_provider;   /* NULL: the provider of the last request/context */
    char *summary_model;      /* NULL: the model of the last request/context */
    long summary_max_tokens;  /* max_tokens of the summary request */
    char *summary_prompt;     /* never NULL after parse (default prompt) */
    int max_attempts;         /* summaries per trigger (>= 1) */
    int max_overflow_retries; /* overflow recoveries per step (0 disables) */
} cp_config;

/** The JSON Schema of the config (the descriptor's config_schema). */
extern const char cp_config_schema[];

/**
 * Fill `cfg` from `config` (borrowed, may be NULL: all defaults).  Checks
 * what the schema cannot (head + tail + marker room below
 * max_result_chars, keep ratio below the threshold, summary provider and
 * model given together).  0, or -1 with a message naming the field in
 * `msg` (*oom set when memory ran out).  On success free with
 * cp_config_clear.
 */
int cp_config_parse(const json_t *config, cp_config *cfg, bool *oom, char *msg, size_t msg_size);
/** Free the strings of `cfg` (NULL-safe, idempotent). */
void cp_config_clear(cp_config *cfg);

/** Estimated tokens of `chars` bytes of text: ceil(chars / 4). */
size_t cp_tokens_for_chars(size_t chars);
/**
 * Estimated tokens of one message (borrowed; NULL or null: 0): the text of
 * its blocks (text, reasoning, tool_call name and arguments, tool_result
 * content, recursively) at four characters a token, 1000 per image, plus 4
 * per message.
 */
size_t cp_message_tokens(const json_t *message);

/**
 * Measured tokens of a surface: when `baseline_seq` (>= 0) is a current node
 * and every node before it has a smaller seq (nothing was replaced behind
 * it since), `baseline_tokens` (the real usage of that response) plus the
 * estimate of the nodes after it; otherwise the estimate of every node.
 * `extra_tokens` (pending input) is added either way.
 */
size_t cp_measure(const json_t *surface, long long baseline_seq, size_t baseline_tokens,
                  size_t extra_tokens);

/** Total tokens of a usage object {input_tokens, output_tokens, cache_*}. */
size_t cp_usage_tokens(const json_t *usage);

/** Number of Unicode code points of a UTF-8 string (invalid bytes count as one). */
size_t cp_utf8_len(const char *s);

/**
 * Prune `text` when it has more than `max_chars` code points: the first
 * `head` code points + "\n[… N characters pruned …]\n" + the last `tail`
 * (N = code points removed).  Never splits a UTF-8 sequence.  Returns a new
 * malloc'd string (free()), or NULL when the text is short enough (or on
 * out of memory: *oom set).
 */
char *cp_prune_text(const char *text, size_t max_chars, size_t head, size_t tail, bool *oom);

/**
 * A copy of tool message `message` (borrowed) with every oversized text
 * block of its tool_result contents pruned, or NULL when nothing changed
 * (or out of memory: *oom set).  *pruned_chars gets the code points removed.
 */
json_t *cp_prune_message(const json_t *message, const cp_config *cfg, size_t *pruned_chars,
                         bool *oom);

/**
 * Choose the head-anchored summary range: nodes [*start, *end] (indexes into
 * `surface`), starting after a leading system/message node, ending before a
 * verbatim tail of at least `keep_tokens` estimated tokens (at least the last
 * node), moved head-ward until the cut never separates an assistant tool
 * call from its tool result.  Returns false (nothing compactable) when the
 * range would be empty.
 */
bool cp_select_range(const json_t *surface, size_t keep_tokens, size_t *start, size_t *end);

/** Estimated tokens of surface nodes [start, end]. */
size_t cp_range_tokens(const json_t *surface, size_t start, size_t end);

/**
 * The nodes [start, end] rendered as a plain-text transcript for the
 * summarizer ("[user]\n...", "[assistant]\n...", "[tool call NAME] ARGS",
 * "[tool result]\n..."), new malloc'd string or NULL (out of memory).
 */
char *cp_render_transcript(const json_t *surface, size_t start, size_t end);

/** The summary prefix of the checkpoint message. */
#define CP_SUMMARY_PREFIX "Summary of earlier conversation:\n"

/**
 * New reference: the checkpoint user message
 * {role:"user", content:[{type:"text", text: CP_SUMMARY_PREFIX + summary}],
 *  source:{kind:"compaction", compaction_id}}, or NULL (out of memory).
 */
json_t *cp_summary_message(const char *summary, const char *compaction_id);

#endif
