/*
 * plugins/compaction-basic/compaction_policy.h - the pure part of
 * compaction-basic (docs/compaction.md): config, token estimates, the
 * running meter, pinned context, tool result pruning, summary range
 * selection, the summary instruction and the checkpoint message.  No host
 * calls: only jansson and libc, so test_compaction and bench_compaction
 * compile it directly.
 *
 * A surface here is what api->agent_surface returns: an array of
 * {"seq":N, "type":"...", "message":{...}|null} in surface order.
 * Every function is reentrant; only a cp_meter keeps state (its caller's).
 */
#ifndef WEIR_COMPACTION_POLICY_H
#define WEIR_COMPACTION_POLICY_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <weir/sdk.h>

/** The compaction strategies a chain is made of (docs/compaction.md, "Strategies"). */
typedef enum cp_strategy {
    CP_STRATEGY_PRUNE,   /* prune oversized tool results when the cost rule says so */
    CP_STRATEGY_SUMMARY, /* the client summary of a head-anchored range */
    CP_STRATEGY_SERVER   /* the provider compacts the range (its model_info says so) */
} cp_strategy;

#define CP_MAX_STRATEGIES 3

/** The name of `s` ("prune", "summary", "server"). */
const char *cp_strategy_name(cp_strategy s);

/**
 * The default chain for a route whose model_info reports `server_kind` as
 * its "server_compaction" (NULL: none): ["server", "summary", "prune"] for
 * Anthropic's ("anthropic-compact-20260112"), else ["summary", "prune"].
 * OpenAI's /responses/compact is left out of the default: it cannot read the
 * prompt cache the summary request reads (it takes no tools, so its prefix
 * is not the session's), and bench_strategies measures it as the dearest
 * chain (bench/README.md).  Writes at most CP_MAX_STRATEGIES entries;
 * returns how many.
 */
size_t cp_default_strategies(const char *server_kind, cp_strategy *out);

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
    long summary_max_tokens;  /* max_tokens of the summary request; -1: the agent's own */
    char *summary_prompt;     /* the instruction's text; never NULL after parse */
    int max_attempts;         /* summaries per trigger (>= 1) */
    int max_overflow_retries; /* overflow recoveries per step (0 disables) */
    int max_compactions_per_turn; /* compaction/start per turn, any trigger (>= 1) */
    double min_savings_ratio; /* a compaction saving less of what it shadowed trips the breaker */
    regex_t *pinned;          /* pinned_patterns: POSIX ERE, ^ and $ at line ends */
    size_t npinned;
    cp_strategy strategies[CP_MAX_STRATEGIES]; /* the chain, in order */
    size_t nstrategies;
    bool strategies_set;      /* given in the config (else the provider's default) */
    long horizon_steps;       /* prune: N, the steps a saving is counted over */
    double cache_read_price;  /* prune: multiple of the input price; < 0: by model */
    double cache_write_price; /* prune: the same for a cache write */
    bool recall_enabled;      /* the recall tool is registered */
    size_t recall_max_chars;  /* code points one recall returns at most */
} cp_config;

/** The JSON Schema of the config (the descriptor's config_schema). */
extern const char cp_config_schema[];

/**
 * Fill `cfg` from `config` (borrowed, may be NULL: all defaults).  Checks
 * what the schema cannot (head + tail + marker room below
 * max_result_chars, keep ratio below the threshold, summary provider and
 * model given together, every pinned pattern a valid POSIX extended
 * regular expression).  0, or -1 with a message naming the field in `msg`
 * (*oom set when memory ran out).  On success free with cp_config_clear.
 */
int cp_config_parse(const json_t *config, cp_config *cfg, bool *oom, char *msg, size_t msg_size);
/** Free what `cfg` holds (NULL-safe, idempotent). */
void cp_config_clear(cp_config *cfg);

/* ------------------------------------------------------------------------ */
/* The cost rule of pruning                                                  */
/* ------------------------------------------------------------------------ */

/** Prompt-cache prices of a route, as multiples of its input price. */
typedef struct cp_cache_prices {
    double read, write;
} cp_cache_prices;

/**
 * The cache prices of `model` (may be NULL) unless `cfg` sets them:
 * claude-*: read 0.1, write 1.25 (Anthropic's 5-minute writes); gpt-5*:
 * 0.1 / 1.0; gpt-4.1*: 0.25 / 1.0; other gpt-*, o1..o4*: 0.5 / 1.0 (OpenAI
 * bills no write surcharge); any other model: 0.1 / 1.25 (the dearest
 * invalidation known).
 */
cp_cache_prices cp_prices_for(const cp_config *cfg, const char *model);

/**
 * The cost rule (docs/compaction.md, "The cost rule"): pruning saves
 * `saved` tokens of a cached prefix on each of the next `horizon` requests
 * (billed at the read price) and makes the provider write `invalidated`
 * cached tokens again (the write price instead of the read price, once).
 * True when saved x horizon x read > invalidated x (write - read).
 * `*gain` and `*cost` (may be NULL) receive both sides, in input-token units.
 */
bool cp_prune_worth_it(size_t saved, size_t invalidated, long horizon, cp_cache_prices prices,
                       double *gain, double *cost);

/* ------------------------------------------------------------------------ */
/* Token estimates                                                           */
/* ------------------------------------------------------------------------ */

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
 * The price of a surface event of `type` carrying `message` (its
 * data.message, borrowed): cp_message_tokens, or 0 when the node adds no
 * message to the derived history (a system or assistant message whose
 * content is empty or only empty text), as api->agent_surface shows it.
 */
size_t cp_event_tokens(const char *type, const json_t *message);

/**
 * Measured tokens of a surface: when `baseline_seq` (>= 0) is a current node
 * and every node before it has a smaller seq (nothing was replaced behind
 * it since), `baseline_tokens` (the real usage of that response) plus the
 * estimate of the nodes after it; otherwise the estimate of every node.
 * `extra_tokens` (pending input) is added either way.  O(surface): the
 * reference for cp_meter, which gives the same figure in O(1).
 */
size_t cp_measure(const json_t *surface, long long baseline_seq, size_t baseline_tokens,
                  size_t extra_tokens);

/** Total tokens of a usage object {input_tokens, output_tokens, cache_*}. */
size_t cp_usage_tokens(const json_t *usage);

/* ------------------------------------------------------------------------ */
/* The running meter                                                         */
/* ------------------------------------------------------------------------ */

/*
 * A running measurement of one agent's log, fed its envelopes in seq order
 * (cp_meter_apply), so that the pressure check costs O(1) in the history
 * length: an append costs O(1), a replace O(nodes replaced).  It mirrors the
 * surface as a list of priced nodes (indexed by seq), the estimate of all
 * current nodes and of the pinned ones, the usage baseline (the last
 * assistant/message, with the estimate of the nodes up to it), the last
 * request/context and request/header seqs.  cp_meter_tokens(m) equals
 * cp_measure() over the same surface.
 */
typedef weir_meter_node cp_meter_node; /* the SDK's meter (weir/sdk.h) */
typedef weir_meter cp_meter;

/** An empty meter (no allocation). */
void cp_meter_init(cp_meter *m);
/** Free what `m` holds and make it empty again (NULL-safe). */
void cp_meter_clear(cp_meter *m);
/**
 * Apply envelope `event` (borrowed) to `m`.  Envelopes must come in seq
 * order: an envelope already applied (seq < next_seq) is skipped.  `cfg`
 * decides which user messages are pinned.  0; -1 when the envelope does not
 * fit what the meter holds (a seq gap, a replace naming a node that is not
 * current): the meter is then stale and the caller starts it again from
 * seq 0; -2 when out of memory (the meter is then stale too).
 */
int cp_meter_apply(cp_meter *m, const json_t *event, const cp_config *cfg);
/**
 * Seed an empty meter from `surface` (borrowed: agent_surface's nodes
 * {seq, type, message}, in surface order) as a fold of the log up to its
 * last surface event leaves it, so that a resumed session's meter costs its
 * surface, not its history (docs/session-log.md, "Resume from a
 * checkpoint"); the events after the last node are then applied.
 * `last_usage` (borrowed, may be NULL): the usage of the last node when it
 * is an assistant/message, the baseline.  Nodes are priced from their
 * derived messages.  0 (an empty surface seeds nothing); -1 when `surface`
 * is malformed or `m` is not empty; -2 out of memory.
 */
int cp_meter_seed(cp_meter *m, const json_t *surface, const json_t *last_usage,
                  const cp_config *cfg);
/** The measured tokens (see cp_measure) of the surface `m` mirrors.  O(1). */
size_t cp_meter_tokens(const cp_meter *m);

/* ------------------------------------------------------------------------ */
/* Pinned context                                                            */
/* ------------------------------------------------------------------------ */

/**
 * The text blocks of `message` (borrowed) joined with "\n", new malloc'd
 * string ("" for none), or NULL when out of memory.
 */
char *cp_message_text(const json_t *message);
/**
 * Whether `message` (borrowed) is pinned: a user message, not a compaction
 * checkpoint (source.kind "compaction"), whose source has "pinned": true or
 * whose text (cp_message_text) matches one of cfg's pinned patterns.  False
 * when out of memory.
 */
bool cp_message_pinned(const cp_config *cfg, const json_t *message);
/**
 * Split a summary range of `n` nodes, `pinned[i]` telling which are pinned,
 * into 1 + k contiguous runs, k = the pinned count: run 0 is replaced by the
 * checkpoint and run i (1..k) by a verbatim copy of the i-th pinned node,
 * so the pinned messages follow the checkpoint in their order.  Run i
 * starts at starts[i] (starts[0] = 0; starts must hold n entries) and ends
 * before starts[i + 1] (or at n - 1); run i (i >= 1) holds its own pinned
 * node whenever it can (it starts at that node unless the runs before it
 * reach past it).  *k receives the pinned count.  False when every node is
 * pinned (nothing to summarize).
 */
bool cp_pinned_runs(const bool *pinned, size_t n, size_t *starts, size_t *k);

/* ------------------------------------------------------------------------ */
/* Pruning                                                                   */
/* ------------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------------ */
/* Range selection                                                           */
/* ------------------------------------------------------------------------ */

/**
 * Choose the head-anchored summary range: nodes [*start, *end] (indexes into
 * `surface`), starting after a leading system/message node, ending before a
 * verbatim tail of at least `keep_tokens` estimated tokens (at least the last
 * node), moved head-ward until the cut never separates an assistant tool
 * call from its tool result.  Returns false (nothing compactable) when the
 * range would be empty.
 */
bool cp_select_range(const json_t *surface, size_t keep_tokens, size_t *start, size_t *end);

/**
 * Whether nodes [s, e) of `surface` hold every result of their tool calls
 * and every call of their tool results (a cut at s and at e splits no pair):
 * as many results as calls of each id.  O(blocks of the range).
 */
bool cp_balanced(const json_t *surface, size_t s, size_t e);

/** Estimated tokens of surface nodes [start, end]. */
size_t cp_range_tokens(const json_t *surface, size_t start, size_t end);

/* ------------------------------------------------------------------------ */
/* The summary request and the checkpoint                                    */
/* ------------------------------------------------------------------------ */

/**
 * The text of the final user message of a summary request, new malloc'd
 * string or NULL (out of memory): cfg->summary_prompt (the built-in
 * structured instruction unless summary.prompt overrides it), then, when
 * `kept` > 0, a note that the last `kept` messages stay verbatim after the
 * checkpoint, then, when `extra` is a non-empty string, "Additional
 * instructions for this summary:\n" + extra.
 */
char *cp_instruction(const cp_config *cfg, size_t kept, const char *extra);

/** The first paragraph of every checkpoint message: what it is. */
#define CP_CHECKPOINT_PREAMBLE "This checkpoint replaces the earlier turns of the conversation."
#define CP_SUMMARY_OPEN "<compacted-summary>"
#define CP_SUMMARY_CLOSE "</compacted-summary>"

/**
 * The summarizer's reply (borrowed) made fit to frame: an earlier
 * checkpoint it echoes is merged, not nested (the preamble and the
 * <compacted-summary> tags are taken out), and surrounding blank space is
 * trimmed.  New malloc'd string ("" when nothing is left), NULL when out of
 * memory.
 */
char *cp_clean_summary(const char *reply);

/**
 * The checkpoint's text, new malloc'd string or NULL (out of memory):
 * CP_CHECKPOINT_PREAMBLE, a blank line, CP_SUMMARY_OPEN, the summary, then,
 * when `npinned` > 0, the pinned messages' texts (each quoted, cut after 400
 * code points with a note that the full message follows) under the
 * summary's "Critical context" heading (added when the summary has none),
 * and CP_SUMMARY_CLOSE.
 */
char *cp_checkpoint_text(const char *summary, const char *const *pinned, size_t npinned);

/**
 * The recall index of a summary range, new malloc'd string or NULL (out of
 * memory): "## Recall ids" and one line per tool result ("- seq:N: tool
 * result of call ID") and user message ("- seq:N: user message") of nodes
 * [a, b] of `surface` that `skip` (b - a + 1 flags, may be NULL) does not
 * mark, the newest CP_RECALL_LIST_MAX of them, with a line that says how many
 * were left out.  "" when there is none.
 */
char *cp_recall_index(const json_t *surface, size_t a, size_t b, const bool *skip);
#define CP_RECALL_LIST_MAX 64

/**
 * The text a recall returns for `text` (borrowed): its code points from
 * `offset` on, at most `max_chars` of them, followed, when cut, by a note
 * that gives the characters left and the offset to ask for next.  New
 * malloc'd string, NULL when out of memory.  An offset past the end gives
 * the note that nothing is left.
 */
char *cp_recall_cut(const char *text, size_t offset, size_t max_chars);

/**
 * New reference: the checkpoint user message
 * {role:"user", content:[{type:"text", text}], source:{kind:"compaction",
 * compaction_id}}, or NULL (out of memory).
 */
json_t *cp_checkpoint_message(const char *text, const char *compaction_id);

#endif
