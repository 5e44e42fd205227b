/*
 * plugins/retry/retry_policy.h - the retry plugin's pure part: its config,
 * the retry decision and delay for one failed request, and the per-step
 * retry counters.  No host calls, no clock, no randomness of its own (the
 * caller passes the random draw), so tests drive it deterministically.
 *
 * Thread-safety: none of these functions lock.  A parsed retry_config is
 * read-only after parsing and may be shared; retry_budgets must be guarded
 * by the caller (the plugin holds its mutex around every call).
 */
#ifndef WEIR_RETRY_POLICY_H
#define WEIR_RETRY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/** normal: retry retryable codes within a budget; always: retry everything. */
typedef enum retry_mode { RETRY_MODE_NORMAL = 0, RETRY_MODE_ALWAYS = 1 } retry_mode;

/** The circuit breaker of one provider (`breaker`; false: disabled). */
typedef struct retry_breaker_cfg {
    bool enabled;
    uint64_t failures;    /* consecutive retryable failures that open it (1..1000) */
    uint64_t window_ms;   /* ... all within this long */
    uint64_t cooldown_ms; /* open this long, then one probe request (half-open) */
} retry_breaker_cfg;

/** One fallback route. */
typedef struct retry_route {
    char *provider; /* a provider row id, owned */
    char *model;    /* owned */
} retry_route;

/** One resolved policy (the top level, or one provider's override). */
typedef struct retry_policy {
    retry_mode mode;
    uint64_t max_retries;      /* budget per (agent, turn, step, route); normal mode only */
    char **codes;              /* retryable failure codes, owned */
    size_t ncodes;
    uint64_t initial_delay_ms; /* the first local backoff before jitter */
    uint64_t max_delay_ms;     /* cap of local backoff and of an accepted Retry-After */
    double jitter_ratio;       /* 0..1: the delay is scaled by 1 +- jitter_ratio */
    uint64_t max_elapsed_ms;   /* time budget of one route's recovery sequence; normal mode */
    retry_breaker_cfg breaker;
    retry_route *fallback;     /* routes tried in order once this one is spent, owned */
    size_t nfallback;
} retry_policy;

/** The whole plugin config: the top-level policy plus per-provider overrides. */
typedef struct retry_config {
    retry_policy base;
    size_t nproviders;
    char **provider_ids;     /* owned, nproviders entries */
    retry_policy *providers; /* owned, parallel to provider_ids */
} retry_config;

/** The JSON Schema of the config (the descriptor's config_schema). */
extern const char retry_config_schema[];

/**
 * Parse `config` (borrowed; NULL or an object) into `out` (filled, owned by
 * the caller: release with retry_config_clear).  Missing keys take the
 * defaults (max_retries 5, the six transient codes, 500 ms, 10000 ms, 0.1,
 * normal, max_elapsed_ms 120000, breaker {8, 60000, 30000}, no fallback); a
 * provider override inherits every key it does not set from the top level
 * (a `breaker` object key by key, `fallback` as a whole).
 * @return 0, or -1 with `msg` naming the field ("providers.openai.jitter_ratio:
 *         expected a number from 0 to 1") and `*oom` set when memory ran out.
 */
int retry_config_parse(const json_t *config, retry_config *out, bool *oom, char *msg,
                       size_t msg_size);

/** Free what retry_config_parse allocated; leaves `cfg` empty. NULL is a no-op. */
void retry_config_clear(retry_config *cfg);

/** The policy for `provider` (its override, else the top level). Borrowed from `cfg`. */
const retry_policy *retry_config_select(const retry_config *cfg, const char *provider);

/** True when `code` (may be NULL) is in the policy's retryable codes. */
bool retry_policy_retryable(const retry_policy *p, const char *code);

/**
 * The local backoff for retry number `retry` (1-based):
 * min(min(initial * 2^(retry-1), max) * (1 - j + 2j*r), max), rounded to
 * the nearest millisecond.  `r` is the random draw, clamped to [0, 1].
 */
uint64_t retry_backoff_ms(const retry_policy *p, uint64_t retry, double r);

/** What to do with one failure. */
typedef enum retry_verdict {
    RETRY_DELEGATE = 0, /* leave the failure to the rest of the chain (weir_next) */
    RETRY_WAIT = 1      /* wait `delay_ms`, then retry */
} retry_verdict;

/** Why a failure is not retried on its route (RETRY_DELEGATE). */
typedef enum retry_spent {
    RETRY_SPENT_NONE = 0,        /* waiting */
    RETRY_SPENT_CODE = 1,        /* not a retryable code */
    RETRY_SPENT_RETRIES = 2,     /* previous >= max_retries */
    RETRY_SPENT_TIME = 3,        /* the wait would end past max_elapsed_ms */
    RETRY_SPENT_RETRY_AFTER = 4  /* a Retry-After over max_delay_ms */
} retry_spent;

typedef struct retry_plan {
    retry_verdict verdict;
    retry_spent spent;     /* when delegating */
    uint64_t retry;        /* this retry's number (previous + 1) when waiting */
    uint64_t delay_ms;     /* when waiting; with RETRY_SPENT_TIME, the wait not started */
    bool from_retry_after; /* the delay is the failure's retry_after_ms, verbatim */
} retry_plan;

/**
 * Decide for `failure` (borrowed canonical failure {code, retry_after_ms?,
 * ...}) given `previous` retries already made on this route in this step
 * and `elapsed_ms` since the route's first failure in this step.  normal
 * mode: a code not in the list, an exhausted budget (previous >=
 * max_retries), a Retry-After over max_delay_ms, or a wait that would end
 * past the time budget (elapsed_ms + delay > max_elapsed_ms) delegates,
 * saying which in out->spent.  always mode (called once the rest of the
 * chain declined): always waits (no budget, no time budget); an over-cap
 * Retry-After falls back to local backoff.  A positive retry_after_ms up to
 * max_delay_ms is used verbatim (no jitter).  `r` is the random draw for
 * the jitter.  Fills and returns out->verdict.
 */
retry_verdict retry_decide(const retry_policy *p, const json_t *failure, uint64_t previous,
                           uint64_t elapsed_ms, double r, retry_plan *out);

/** One step's retry counter for one agent and route (provider and model). */
typedef struct retry_counter {
    char *agent;        /* owned */
    char *provider;     /* owned */
    char *model;        /* owned; "" when unknown */
    json_int_t turn, step;
    uint64_t count;     /* retries made so far in this step */
    bool timed;         /* first_ms is set: the route failed in this step */
    uint64_t first_ms;  /* clock of the route's first failure in this step */
    char retry_id[40];  /* the id shared by this step's retry/wait events, or "" */
} retry_counter;

/** Every counter (one per agent and route; a new step resets it). */
typedef struct retry_budgets {
    retry_counter *v; /* owned */
    size_t n, cap;
} retry_budgets;

/**
 * The counter of (agent, provider, model) for (turn, step), created at
 * zero, and reset to zero (with an empty retry_id, no first failure) when
 * its turn or step changed.  `model` may be NULL ("").
 * @return borrowed, valid until the next call on `b`; NULL when out of memory.
 */
retry_counter *retry_budgets_get(retry_budgets *b, const char *agent, const char *provider,
                                 const char *model, json_int_t turn, json_int_t step);

/** Drop every counter of `agent` (it was disposed). */
void retry_budgets_forget(retry_budgets *b, const char *agent);

/** Free every counter; leaves `b` empty. NULL is a no-op. */
void retry_budgets_clear(retry_budgets *b);

#endif
