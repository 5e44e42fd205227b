/*
 * plugins/retry/retry_breaker.h - the circuit breaker of one provider, pure:
 * no host calls, no clock of its own (every call takes `now_ms`), no lock
 * (the plugin holds its mutex around every call), so tests drive it with
 * any times they like.
 *
 *   closed --(`failures` consecutive retryable failures within window_ms)--> open
 *   open --(a request once cooldown_ms passed: it is the probe)--> half_open
 *   half_open --(the probe answered)--> closed
 *   half_open --(the probe failed retryably)--> open (a new cooldown)
 *
 * While open, and while half-open with the probe in flight, every request
 * is rejected.  "Answered" is a success or a failure whose code is not
 * retryable (the provider is up and said no: AUTH, INVALID_REQUEST, ...);
 * it also ends a streak of failures.  A request that got no outcome
 * (cancelled, or a failing middleware) counts for nothing, and a probe
 * without an outcome gives its slot to the next request.
 */
#ifndef WEIR_RETRY_BREAKER_H
#define WEIR_RETRY_BREAKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "retry_policy.h"

typedef enum retry_breaker_state {
    BREAKER_CLOSED = 0,
    BREAKER_OPEN = 1,
    BREAKER_HALF_OPEN = 2
} retry_breaker_state;

/** "closed", "open" or "half_open" (the retry/breaker state names). */
const char *retry_breaker_state_name(retry_breaker_state s);

/** One provider's breaker. */
typedef struct retry_breaker {
    char *provider;            /* owned */
    retry_breaker_state state;
    uint64_t streak;           /* consecutive retryable failures */
    uint64_t *times;           /* ring of the last `cap` failure times of the streak, owned */
    size_t cap, head, ntimes;
    uint64_t opened_ms;        /* when it last opened */
    uint64_t probe;            /* half-open: the probe's ticket while it is in flight, else 0 */
    uint64_t tickets;          /* the last ticket handed out */
} retry_breaker;

/** A state change, for the caller to log as retry/breaker. */
typedef struct retry_breaker_change {
    bool changed;
    retry_breaker_state to;
    uint64_t failures;    /* the streak when it changed (0 when it closed) */
    uint64_t cooldown_ms; /* the config's */
} retry_breaker_change;

/** What one request may do. */
typedef enum retry_breaker_admit {
    BREAKER_PASS = 0,  /* closed: go */
    BREAKER_PROBE = 1, /* the one request that tests a half-open breaker: go */
    BREAKER_REJECT = 2 /* open, or half-open with the probe in flight: fail at once */
} retry_breaker_admit;

/**
 * Admit one request at `now_ms` under `cfg` (enabled).  An open breaker
 * whose cooldown has passed turns half-open (reported in *change) and this
 * request is its probe.  *ticket (never 0) identifies the request for
 * retry_breaker_record; on REJECT *remaining_ms is the cooldown left (0
 * while a probe is in flight).
 */
retry_breaker_admit retry_breaker_admit_request(retry_breaker *b, const retry_breaker_cfg *cfg,
                                                uint64_t now_ms, uint64_t *ticket,
                                                uint64_t *remaining_ms,
                                                retry_breaker_change *change);

/** The outcome of an admitted request. */
typedef enum retry_breaker_outcome {
    BREAKER_ANSWERED = 0, /* success, or a non-retryable failure */
    BREAKER_FAILED = 1,   /* a retryable failure */
    BREAKER_NONE = 2      /* no outcome (cancelled, a failing middleware) */
} retry_breaker_outcome;

/**
 * Record the outcome of the request `ticket` at `now_ms`; a state change
 * goes to *change.  The probe decides a half-open breaker; any other
 * request only moves the streak of a closed one (a request admitted before
 * the breaker opened changes nothing once it is open).
 * @return 0, or -1 when out of memory (the ring could not be allocated;
 *         nothing changed).
 */
int retry_breaker_record(retry_breaker *b, const retry_breaker_cfg *cfg, uint64_t ticket,
                         retry_breaker_outcome outcome, uint64_t now_ms,
                         retry_breaker_change *change);

/** Every provider's breaker. */
typedef struct retry_breakers {
    retry_breaker *v; /* owned */
    size_t n, cap;
} retry_breakers;

/** The breaker of `provider`, created closed. Borrowed; NULL when out of memory. */
retry_breaker *retry_breakers_get(retry_breakers *bs, const char *provider);

/** Free every breaker; leaves `bs` empty. NULL is a no-op. */
void retry_breakers_clear(retry_breakers *bs);

#endif
