/* plugins/retry/retry_breaker.c - see retry_breaker.h. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "retry_breaker.h"

#include <stdlib.h>
#include <string.h>

const char *retry_breaker_state_name(retry_breaker_state s) {
    switch (s) {
    case BREAKER_OPEN:
        return "open";
    case BREAKER_HALF_OPEN:
        return "half_open";
    case BREAKER_CLOSED:
        break;
    }
    return "closed";
}

static void change_to(retry_breaker *b, const retry_breaker_cfg *cfg, retry_breaker_state to,
                      retry_breaker_change *change) {
    b->state = to;
    if (change)
        *change = (retry_breaker_change){true, to, to == BREAKER_CLOSED ? 0 : b->streak,
                                         cfg->cooldown_ms};
}

static uint64_t next_ticket(retry_breaker *b) {
    if (++b->tickets == 0) /* 0 means "no probe" */
        b->tickets = 1;
    return b->tickets;
}

retry_breaker_admit retry_breaker_admit_request(retry_breaker *b, const retry_breaker_cfg *cfg,
                                                uint64_t now_ms, uint64_t *ticket,
                                                uint64_t *remaining_ms,
                                                retry_breaker_change *change) {
    if (change)
        memset(change, 0, sizeof *change);
    *remaining_ms = 0;
    *ticket = next_ticket(b);
    if (b->state == BREAKER_OPEN) {
        uint64_t since = now_ms >= b->opened_ms ? now_ms - b->opened_ms : 0;
        if (since < cfg->cooldown_ms) {
            *remaining_ms = cfg->cooldown_ms - since;
            return BREAKER_REJECT;
        }
        change_to(b, cfg, BREAKER_HALF_OPEN, change);
        b->probe = *ticket;
        return BREAKER_PROBE;
    }
    if (b->state == BREAKER_HALF_OPEN) {
        if (b->probe)
            return BREAKER_REJECT; /* exactly one request tests it */
        b->probe = *ticket;        /* the last probe got no outcome: this one tries */
        return BREAKER_PROBE;
    }
    return BREAKER_PASS;
}

static void clear_streak(retry_breaker *b) {
    b->streak = 0;
    b->ntimes = 0;
    b->head = 0;
}

/* Push a failure time; false when the ring cannot be allocated. */
static bool push_time(retry_breaker *b, const retry_breaker_cfg *cfg, uint64_t now_ms) {
    size_t want = (size_t)cfg->failures;
    if (b->cap != want) { /* first use, or a config that changed: start the ring over */
        uint64_t *ring = realloc(b->times, want * sizeof *ring);
        if (!ring)
            return false;
        b->times = ring;
        b->cap = want;
        b->ntimes = 0;
        b->head = 0;
    }
    b->times[b->head] = now_ms;
    b->head = (b->head + 1) % b->cap;
    if (b->ntimes < b->cap)
        b->ntimes++;
    return true;
}

int retry_breaker_record(retry_breaker *b, const retry_breaker_cfg *cfg, uint64_t ticket,
                         retry_breaker_outcome outcome, uint64_t now_ms,
                         retry_breaker_change *change) {
    if (change)
        memset(change, 0, sizeof *change);
    if (b->state == BREAKER_HALF_OPEN && ticket && b->probe == ticket) {
        b->probe = 0;
        if (outcome == BREAKER_ANSWERED) {
            clear_streak(b);
            change_to(b, cfg, BREAKER_CLOSED, change);
        } else if (outcome == BREAKER_FAILED) {
            b->streak++;
            b->opened_ms = now_ms;
            change_to(b, cfg, BREAKER_OPEN, change);
        } /* BREAKER_NONE: the slot goes to the next request */
        return 0;
    }
    if (b->state != BREAKER_CLOSED || outcome == BREAKER_NONE)
        return 0;
    if (outcome == BREAKER_ANSWERED) {
        clear_streak(b);
        return 0;
    }
    if (!push_time(b, cfg, now_ms))
        return -1;
    b->streak++;
    /* the oldest of the last `failures` failure times is where the ring's head points */
    if (b->ntimes == b->cap) {
        uint64_t oldest = b->times[b->head];
        if (now_ms - oldest <= cfg->window_ms) {
            b->opened_ms = now_ms;
            change_to(b, cfg, BREAKER_OPEN, change);
        }
    }
    return 0;
}

retry_breaker *retry_breakers_get(retry_breakers *bs, const char *provider) {
    if (!bs || !provider)
        return NULL;
    for (size_t i = 0; i < bs->n; i++)
        if (!strcmp(bs->v[i].provider, provider))
            return &bs->v[i];
    if (bs->n == bs->cap) {
        size_t cap = bs->cap ? bs->cap * 2 : 4;
        retry_breaker *grown = realloc(bs->v, cap * sizeof *grown);
        if (!grown)
            return NULL;
        bs->v = grown;
        bs->cap = cap;
    }
    retry_breaker *b = &bs->v[bs->n];
    memset(b, 0, sizeof *b);
    b->provider = strdup(provider);
    if (!b->provider)
        return NULL;
    bs->n++;
    return b;
}

void retry_breakers_clear(retry_breakers *bs) {
    if (!bs)
        return;
    for (size_t i = 0; i < bs->n; i++) {
        free(bs->v[i].provider);
        free(bs->v[i].times);
    }
    free(bs->v);
    memset(bs, 0, sizeof *bs);
}
