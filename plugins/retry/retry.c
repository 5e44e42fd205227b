/*
 * plugins/retry - recovers failed model requests (docs/retry.md):
 *
 *   agent/request-error  retries transient failures after an exponential
 *                        backoff with jitter, honouring Retry-After, within
 *                        a budget per step and route (max_retries) and a
 *                        time budget (max_elapsed_ms); once a route is spent
 *                        (or at once for an open breaker or QUOTA) it falls
 *                        back to the next `fallback` route;
 *   agent/request        (outermost) puts the step's current route into the
 *                        call config: a fallback is a retry of the same
 *                        step, so no user message is admitted again; the
 *                        next step starts on its own route again;
 *   llm/stream           (innermost, next to the provider) the circuit
 *                        breaker per provider, shared by every agent of the
 *                        host: while it is open a request fails at once with
 *                        OVERLOADED and never reaches the network.
 *
 * Config (config_schema in retry_policy.c): max_retries, retryable_codes,
 * initial_delay_ms, max_delay_ms, jitter_ratio, mode "normal"|"always",
 * max_elapsed_ms, breaker, fallback, and providers {<provider id>: {same
 * keys}} overriding them per provider.
 *
 * Events (all ignorable): retry/wait before each wait and retry/started
 * after it; retry/fallback when a route changes; retry/breaker on every breaker
 * transition, in the log of the agent whose request caused it.
 *
 * State: counters per agent, step and route; one route per agent; one
 * breaker per provider; all in plugin memory behind one mutex (every
 * agent's driver thread runs these listeners).  Events are appended outside
 * the mutex.  Time is the host's clock (api->clock_ms), so a test's fake
 * clock drives budgets, windows and cooldowns.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strdup */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weir/plugin.h>

#include "retry_breaker.h"
#include "retry_policy.h"

/* The route one agent's current step uses: the agent's weir_agent_state
 * block, which the host frees when the agent goes (route_free first). */
typedef struct route_state {
    bool have_step;
    json_int_t turn, step;      /* the step it applies to */
    size_t route;               /* 0: the step's own route; k: fallback[k - 1] of its policy */
    char *primary_provider;     /* the step's own route (owned) */
    char *primary_model;
    char *cur_provider;         /* the route of the step's latest request (owned) */
    char *cur_model;
} route_state;

typedef struct retry_state {
    weir_plugin *self;
    const weir_api *api;
    retry_config cfg;           /* read-only after init */
    pthread_mutex_t mu;         /* guards everything below */
    retry_budgets budgets;
    retry_breakers breakers;
    uint64_t rng;               /* splitmix64 state */
} retry_state;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

/* The host's clock (a test's fake clock too); CLOCK_MONOTONIC on a table without it. */
static uint64_t now_ms(const retry_state *s) {
    if (WEIR_API_HAS(s->api, clock_ms) && s->api->clock_ms)
        return s->api->clock_ms();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* splitmix64: the jitter draws and retry ids.  Caller holds s->mu. */
static uint64_t next_random(retry_state *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uuid-v4-shaped id into `out` (at least 37 bytes).  Caller holds s->mu. */
static void new_retry_id(retry_state *s, char *out, size_t size) {
    uint64_t a = next_random(s), b = next_random(s);
    snprintf(out, size, "%08x-%04x-4%03x-%04x-%012llx", (unsigned)(a >> 32),
             (unsigned)(a >> 16) & 0xffffu, (unsigned)a & 0xfffu,
             (unsigned)(0x8000u | ((b >> 48) & 0x3fffu)),
             (unsigned long long)(b & 0xffffffffffffull));
}

static bool kind_is(const json_t *action, const char *kind) {
    const char *k = json_string_value(json_object_get(action, "kind"));
    return k && !strcmp(k, kind);
}

static bool same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* *dst = a copy of src (which may alias *dst); false when out of memory. */
static bool set_str(char **dst, const char *src) {
    char *copy = src ? strdup(src) : NULL;
    if (src && !copy)
        return false;
    free(*dst);
    *dst = copy;
    return true;
}

/* Append `type` with `data` (steals); false (listener failed) when it cannot. */
static bool append(weir_call *call, const char *type, json_t *data) {
    weir_error err;
    memset(&err, 0, sizeof err);
    int rc = data ? weir_agent_append(weir_call_agent(call), type, data, &err) : WEIR_E_NOMEM;
    json_decref(data);
    if (rc != WEIR_OK) {
        weir_call_fail(call, "retry: cannot log %s: %s", type,
                       err.text[0] ? err.text : "out of memory");
        return false;
    }
    return true;
}

/*
 * Give `data` (may be NULL: then nothing) the status weir run, the REPL and
 * serve show (docs/plugins.md, "Status lines"): {kind, text, delay_ms?}.
 * On failure `data` is released and set to NULL (append() reports it).
 */
static void with_status(json_t **data, const char *kind, const char *text, uint64_t delay_ms) {
    json_t *st = *data ? json_pack("{s:s, s:s}", "kind", kind, "text", text) : NULL;
    if (st && delay_ms &&
        json_object_set_new(st, "delay_ms", json_integer((json_int_t)delay_ms)) != 0) {
        json_decref(st);
        st = NULL;
    }
    if (*data && (!st || json_object_set_new(*data, "status", st) != 0)) {
        json_decref(*data);
        *data = NULL;
    }
}

/* "RATE_LIMIT 429": a failure's code and HTTP status. */
static void failure_brief(const json_t *failure, char *out, size_t size) {
    const json_t *status = json_object_get(failure, "status");
    const char *code = json_string_value(json_object_get(failure, "code"));
    if (json_is_integer(status) && json_integer_value(status) > 0)
        snprintf(out, size, "%s %" JSON_INTEGER_FORMAT, code ? code : "UNKNOWN",
                 json_integer_value(status));
    else
        snprintf(out, size, "%s", code ? code : "UNKNOWN");
}

static const char *spent_name(retry_spent spent) {
    switch (spent) {
    case RETRY_SPENT_RETRIES:
        return "retries";
    case RETRY_SPENT_TIME:
        return "time";
    case RETRY_SPENT_RETRY_AFTER:
        return "retry_after";
    case RETRY_SPENT_CODE:
    case RETRY_SPENT_NONE:
        break;
    }
    return "code";
}

/* ------------------------------------------------------------------------ */
/* Routes                                                                    */
/* ------------------------------------------------------------------------ */

static void route_free(void *block) {
    route_state *rs = block;
    free(rs->primary_provider);
    free(rs->primary_model);
    free(rs->cur_provider);
    free(rs->cur_model);
}

/* The route state of the call's agent, created empty.  Caller holds s->mu.  NULL: out of
 * memory. */
static route_state *route_get(retry_state *s, weir_call *call) {
    return weir_agent_state(s->self, weir_call_agent(call), sizeof(route_state), route_free);
}

/* The fallback routes of a step whose own route is on `primary`. */
static const retry_policy *routes_of(const retry_state *s, const char *primary) {
    return retry_config_select(&s->cfg, primary);
}

/*
 * agent/request, outermost: the step's route into the call config.  A new
 * step starts on its own route (the chain's config), and when the chain
 * hands back the fallback route the previous step ended on (the default
 * repeats the logged header), on the route that step started from.
 */
static json_t *on_request(weir_call *call, const json_t *args, void *ud) {
    retry_state *s = ud;
    json_t *cfg = weir_next(call);
    const char *agent = json_string_value(json_object_get(args, "agent"));
    const char *provider = json_string_value(json_object_get(cfg, "provider"));
    const char *model = json_string_value(json_object_get(cfg, "model"));
    if (!json_is_object(cfg) || !agent || !provider || !model)
        return cfg; /* nothing to route (the core reports a bad config) */
    json_int_t turn = json_integer_value(json_object_get(args, "turn"));
    json_int_t step = json_integer_value(json_object_get(args, "step"));
    char *want_provider = NULL, *want_model = NULL;
    bool ok = true;
    pthread_mutex_lock(&s->mu);
    route_state *rs = route_get(s, call);
    if (!rs) {
        ok = false;
    } else if (!rs->have_step || rs->turn != turn || rs->step != step) {
        if (rs->route > 0 && same(rs->cur_provider, provider) && same(rs->cur_model, model) &&
            rs->primary_provider && rs->primary_model) { /* back from the fallback */
            want_provider = strdup(rs->primary_provider);
            want_model = strdup(rs->primary_model);
            ok = want_provider && want_model;
        }
        rs->have_step = true;
        rs->turn = turn;
        rs->step = step;
        rs->route = 0;
        ok = ok && set_str(&rs->primary_provider, want_provider ? want_provider : provider) &&
             set_str(&rs->primary_model, want_model ? want_model : model);
    } else if (rs->route > 0) {
        const retry_policy *p = routes_of(s, rs->primary_provider);
        if (rs->route <= p->nfallback) {
            want_provider = strdup(p->fallback[rs->route - 1].provider);
            want_model = strdup(p->fallback[rs->route - 1].model);
            ok = want_provider && want_model;
        }
    }
    if (ok && rs)
        ok = set_str(&rs->cur_provider, want_provider ? want_provider : provider) &&
             set_str(&rs->cur_model, want_model ? want_model : model);
    pthread_mutex_unlock(&s->mu);
    json_t *out = cfg; /* provider and model point into cfg: copy before dropping it */
    if (ok && want_provider && (!same(want_provider, provider) || !same(want_model, model))) {
        out = json_deep_copy(cfg);
        json_decref(cfg);
        if (!out || json_object_set_new(out, "provider", json_string(want_provider)) != 0 ||
            json_object_set_new(out, "model", json_string(want_model)) != 0)
            ok = false;
    }
    free(want_provider);
    free(want_model);
    if (!ok) {
        json_decref(out);
        weir_call_fail(call, "retry: out of memory");
        return NULL;
    }
    return out;
}

/*
 * Move the step to its next fallback route: retry/fallback {turn, step, from,
 * to, reason, failure}, then {kind:"retry"} (no wait: another route).  NULL
 * with *none set when no route is left; NULL without it when the listener
 * failed.
 */
static json_t *fall_back(weir_call *call, retry_state *s, const char *agent, json_int_t turn,
                         json_int_t step, const char *provider, const json_t *failure,
                         const char *reason, bool *none) {
    *none = false;
    char *from_model = NULL;
    const retry_route *to = NULL;
    pthread_mutex_lock(&s->mu);
    route_state *rs = route_get(s, call);
    if (rs && rs->have_step && rs->turn == turn && rs->step == step) {
        const retry_policy *p = routes_of(s, rs->primary_provider);
        size_t j = rs->route; /* fallback[j] is the next route */
        while (j < p->nfallback && same(p->fallback[j].provider, provider) &&
               same(p->fallback[j].model, rs->cur_model))
            j++; /* the route that just failed */
        if (j < p->nfallback) {
            to = &p->fallback[j];
            rs->route = j + 1;
            from_model = rs->cur_model ? strdup(rs->cur_model) : NULL;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!to) {
        *none = rs != NULL;
        if (!rs)
            weir_call_fail(call, "retry: out of memory");
        return NULL;
    }
    json_t *data = json_pack("{s:I, s:I, s:{s:s, s:s?}, s:{s:s, s:s}, s:s, s:O}", "turn", turn,
                             "step", step, "from", "provider", provider, "model", from_model,
                             "to", "provider", to->provider, "model", to->model, "reason",
                             reason, "failure", failure);
    static const char *const reasons[][2] = {{"retries", "retries spent"},
                                             {"time", "time budget spent"},
                                             {"retry_after", "Retry-After too long"},
                                             {"breaker", "circuit breaker open"},
                                             {"quota", "quota"}};
    const char *why = reason;
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (!strcmp(reason, reasons[i][0]))
            why = reasons[i][1];
    char brief[96], text[512];
    failure_brief(failure, brief, sizeof brief);
    snprintf(text, sizeof text, "falling back from %s/%s to %s/%s (%s, %s)", provider,
             from_model ? from_model : "?", to->provider, to->model, brief, why);
    with_status(&data, "notice", text, 0);
    free(from_model);
    if (!append(call, "retry/fallback", data))
        return NULL;
    json_t *action = json_pack("{s:s}", "kind", "retry");
    if (!action)
        weir_call_fail(call, "retry: out of memory");
    return action;
}

/* ------------------------------------------------------------------------ */
/* agent/request-error                                                       */
/* ------------------------------------------------------------------------ */

/* {kind:"error", error}: `failure` whose message says the time budget was spent. */
static json_t *time_spent(weir_call *call, const retry_policy *p, const json_t *failure,
                          uint64_t elapsed_ms, uint64_t delay_ms, uint64_t retries) {
    json_t *f = json_deep_copy(failure);
    const char *was = json_string_value(json_object_get(failure, "message"));
    char msg[1024];
    snprintf(msg, sizeof msg,
             "retry: the time budget is spent (max_elapsed_ms %llu: %llu ms since the first "
             "failure, %llu %s, and the next wait of %llu ms would end past it); the last "
             "failure: %s",
             (unsigned long long)p->max_elapsed_ms, (unsigned long long)elapsed_ms,
             (unsigned long long)retries, retries == 1 ? "retry" : "retries",
             (unsigned long long)delay_ms, was ? was : "(no message)");
    json_t *action = f && json_object_set_new(f, "message", json_string(msg)) == 0
                         ? json_pack("{s:s, s:o}", "kind", "error", "error", f)
                         : (json_decref(f), NULL);
    if (!action)
        weir_call_fail(call, "retry: out of memory");
    return action;
}

static json_t *on_request_error(weir_call *call, const json_t *args, void *ud) {
    retry_state *s = ud;
    const char *agent = json_string_value(json_object_get(args, "agent"));
    const char *provider = json_string_value(json_object_get(args, "provider"));
    const json_t *failure = json_object_get(args, "failure");
    json_int_t turn = json_integer_value(json_object_get(args, "turn"));
    json_int_t step = json_integer_value(json_object_get(args, "step"));
    weir_signal *signal = weir_call_signal(call);
    if (!agent || !provider || !json_is_object(failure) || !weir_call_agent(call))
        return weir_next(call); /* no request to retry: not ours */

    const retry_policy *p = retry_config_select(&s->cfg, provider);
    bool always = p->mode == RETRY_MODE_ALWAYS;
    const char *code = json_string_value(json_object_get(failure, "code"));
    bool breaker = json_is_string(json_object_get(failure, "breaker")); /* ours: not sent */
    bool quota = code && !strcmp(code, "QUOTA");
    if (always) { /* downstream recovery (compaction, ...) gets the first say */
        json_t *down = weir_next(call);
        if (kind_is(down, "retry"))
            return down;
        if (!down)
            weir_log(s->self, WEIR_LOG_WARN,
                     "a later agent/request-error listener failed; retrying anyway (mode always)");
        json_decref(down);
    } else if (!breaker && !quota && !retry_policy_retryable(p, code)) {
        return weir_next(call);
    }
    if (signal && weir_signal_cancelled(signal))
        return json_null(); /* cancellation wins */

    bool none = false;
    json_t *action;
    if (breaker || quota) { /* another route at once */
        action = fall_back(call, s, agent, turn, step, provider, failure,
                           breaker ? "breaker" : "quota", &none);
        if (action || !none)
            return action;
        if (!always)
            return weir_next(call); /* no route left: the rest of the chain decides */
    }

    retry_plan plan = {.verdict = RETRY_DELEGATE};
    char retry_id[40] = "";
    char *model = NULL;
    uint64_t elapsed = 0, previous = 0;
    bool oom = false;
    pthread_mutex_lock(&s->mu);
    route_state *rs = route_get(s, call);
    if (rs && rs->have_step && rs->turn == turn && rs->step == step && rs->cur_model &&
        same(rs->cur_provider, provider))
        model = strdup(rs->cur_model);
    retry_counter *c = rs ? retry_budgets_get(&s->budgets, agent, provider, model, turn, step)
                          : NULL;
    if (c) {
        uint64_t now = now_ms(s);
        if (!c->timed) { /* the route's first failure in this step starts its time budget */
            c->timed = true;
            c->first_ms = now;
        }
        elapsed = now >= c->first_ms ? now - c->first_ms : 0;
        previous = c->count;
        double r = (double)(next_random(s) >> 11) * (1.0 / 9007199254740992.0);
        if (retry_decide(p, failure, c->count, elapsed, r, &plan) == RETRY_WAIT) {
            c->count = plan.retry;
            if (!c->retry_id[0])
                new_retry_id(s, c->retry_id, sizeof c->retry_id);
            memcpy(retry_id, c->retry_id, sizeof retry_id);
        }
    } else {
        oom = true;
    }
    pthread_mutex_unlock(&s->mu);
    if (oom) {
        free(model);
        weir_call_fail(call, "retry: out of memory");
        return NULL;
    }
    if (plan.verdict == RETRY_DELEGATE) { /* normal mode only: this route is spent */
        free(model);
        action = fall_back(call, s, agent, turn, step, provider, failure,
                           spent_name(plan.spent), &none);
        if (action || !none)
            return action;
        if (plan.spent != RETRY_SPENT_TIME)
            return weir_next(call);
        json_t *down = weir_next(call); /* the rest of the chain first; else say why it ends */
        if (!json_is_null(down))
            return down;
        json_decref(down);
        return time_spent(call, p, failure, elapsed, plan.delay_ms, previous);
    }

    json_t *data = json_pack("{s:s, s:I, s:I, s:s, s:s?, s:s, s:I, s:I, s:I, s:O}", "retry_id",
                             retry_id, "turn", turn, "step", step, "provider", provider, "model",
                             model, "mode", always ? "always" : "normal", "retry",
                             (json_int_t)plan.retry, "delay_ms", (json_int_t)plan.delay_ms,
                             "elapsed_ms", (json_int_t)elapsed, "failure", failure);
    free(model);
    char brief[96], text[256];
    failure_brief(failure, brief, sizeof brief);
    if (always)
        snprintf(text, sizeof text, "retrying in {remaining} (%s, retry %llu)", brief,
                 (unsigned long long)plan.retry);
    else
        snprintf(text, sizeof text, "retrying in {remaining} (%s, retry %llu/%llu)", brief,
                 (unsigned long long)plan.retry, (unsigned long long)p->max_retries);
    with_status(&data, "retrying", text, plan.delay_ms);
    if (data && !always &&
        (json_object_set_new(data, "max_retries", json_integer((json_int_t)p->max_retries)) !=
             0 ||
         json_object_set_new(data, "max_elapsed_ms",
                             json_integer((json_int_t)p->max_elapsed_ms)) != 0)) {
        json_decref(data);
        data = NULL;
    }
    if (!append(call, "retry/wait", data)) /* recorded before waiting */
        return NULL;
    int rc = weir_signal_sleep(signal, plan.delay_ms);
    if (rc == WEIR_E_CANCELLED)
        return json_null(); /* cancelled during the backoff: terminal */
    if (rc != WEIR_OK) {
        weir_call_fail(call, "retry: waiting %llu ms failed (status %d)",
                       (unsigned long long)plan.delay_ms, rc);
        return NULL;
    }
    if (!append(call, "retry/started",
                json_pack("{s:s, s:I, s:I, s:I}", "retry_id", retry_id, "turn", turn, "step",
                          step, "retry", (json_int_t)plan.retry)))
        return NULL;
    action = json_pack("{s:s}", "kind", "retry");
    if (!action)
        weir_call_fail(call, "retry: out of memory");
    return action;
}

/* ------------------------------------------------------------------------ */
/* llm/stream: the circuit breaker                                           */
/* ------------------------------------------------------------------------ */

/* retry/breaker {provider, state, failures, cooldown_ms, turn, step}. */
static bool log_breaker(weir_call *call, const json_t *args, const char *provider,
                        const retry_breaker_change *ch) {
    const char *state = retry_breaker_state_name(ch->to);
    char text[256];
    if (!strcmp(state, "open"))
        snprintf(text, sizeof text,
                 "provider '%s': circuit breaker open for %.1f s (%llu consecutive failures)",
                 provider, (double)ch->cooldown_ms / 1000.0, (unsigned long long)ch->failures);
    else if (!strcmp(state, "half_open"))
        snprintf(text, sizeof text, "provider '%s': circuit breaker half-open: one probe request",
                 provider);
    else
        snprintf(text, sizeof text, "provider '%s': circuit breaker %s", provider, state);
    json_t *data = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "provider", provider, "state",
                            retry_breaker_state_name(ch->to), "failures",
                            (json_int_t)ch->failures, "cooldown_ms",
                            (json_int_t)ch->cooldown_ms, "turn",
                            json_integer_value(json_object_get(args, "turn")), "step",
                            json_integer_value(json_object_get(args, "step")));
    with_status(&data, "notice", text, 0);
    return append(call, "retry/breaker", data);
}

/* The stream of a request the breaker does not let through: one error finish. */
static json_t *rejected(weir_call *call, const char *provider, bool half_open,
                        uint64_t remaining_ms, uint64_t streak) {
    json_t *f = half_open
                    ? weir_failure_new(provider, "OVERLOADED",
                                       "provider '%s': its circuit breaker is half-open and its "
                                       "one probe request is in flight; this request was not "
                                       "sent",
                                       provider)
                    : weir_failure_new(provider, "OVERLOADED",
                                       "provider '%s': its circuit breaker is open for %.1f s "
                                       "more (after %llu consecutive retryable failures); this "
                                       "request was not sent",
                                       provider, (double)remaining_ms / 1000.0,
                                       (unsigned long long)streak);
    if (f && (json_object_set_new(f, "breaker", json_string(half_open ? "half_open" : "open")) !=
                  0 ||
              (remaining_ms > 0 &&
               json_object_set_new(f, "retry_after_ms", json_integer((json_int_t)remaining_ms)) !=
                   0))) {
        json_decref(f);
        f = NULL;
    }
    json_t *chunks = f ? json_pack("[{s:s, s:{s:s, s:o}}]", "type", "finish", "reason", "kind",
                                   "error", "failure", f)
                       : NULL;
    if (!chunks)
        weir_call_fail(call, "retry: out of memory");
    return chunks;
}

/* What a stream's chunks say about the provider. */
static retry_breaker_outcome outcome_of(const json_t *chunks, const retry_policy *p,
                                        weir_signal *signal) {
    if (!chunks || (signal && weir_signal_cancelled(signal)))
        return BREAKER_NONE;
    const json_t *finish = NULL;
    size_t i;
    const json_t *c;
    json_array_foreach(chunks, i, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        if (type && !strcmp(type, "finish"))
            finish = c;
    }
    if (!finish) /* the core makes this TRANSPORT */
        return retry_policy_retryable(p, "TRANSPORT") ? BREAKER_FAILED : BREAKER_NONE;
    const json_t *reason = json_object_get(finish, "reason");
    const char *kind = json_string_value(json_object_get(reason, "kind"));
    if (kind && !strcmp(kind, "aborted"))
        return BREAKER_NONE;
    if (!kind || strcmp(kind, "error") != 0)
        return BREAKER_ANSWERED;
    const char *code =
        json_string_value(json_object_get(json_object_get(reason, "failure"), "code"));
    if (code && !strcmp(code, "ABORTED"))
        return BREAKER_NONE;
    return retry_policy_retryable(p, code) ? BREAKER_FAILED : BREAKER_ANSWERED;
}

static json_t *on_stream(weir_call *call, const json_t *args, void *ud) {
    retry_state *s = ud;
    const char *provider =
        json_string_value(json_object_get(json_object_get(args, "request"), "provider"));
    weir_signal *signal = weir_call_signal(call);
    const retry_policy *p = provider ? retry_config_select(&s->cfg, provider) : NULL;
    if (!p || !p->breaker.enabled || !weir_call_agent(call) ||
        (signal && weir_signal_cancelled(signal)))
        return weir_next(call);
    retry_breaker_change ch;
    uint64_t ticket = 0, remaining = 0, streak = 0;
    retry_breaker_admit admit = BREAKER_PASS;
    bool half_open = false;
    pthread_mutex_lock(&s->mu);
    retry_breaker *b = retry_breakers_get(&s->breakers, provider);
    if (b) {
        admit = retry_breaker_admit_request(b, &p->breaker, now_ms(s), &ticket, &remaining, &ch);
        streak = b->streak;
        half_open = b->state == BREAKER_HALF_OPEN;
    }
    pthread_mutex_unlock(&s->mu);
    if (!b) {
        weir_call_fail(call, "retry: out of memory");
        return NULL;
    }
    if (ch.changed && !log_breaker(call, args, provider, &ch)) {
        pthread_mutex_lock(&s->mu); /* give the probe's slot back */
        b = retry_breakers_get(&s->breakers, provider);
        if (b)
            retry_breaker_record(b, &p->breaker, ticket, BREAKER_NONE, now_ms(s), NULL);
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    if (admit == BREAKER_REJECT) /* fail at once: nothing reaches the network */
        return rejected(call, provider, half_open, remaining, streak);

    json_t *chunks = weir_next(call);
    retry_breaker_outcome outcome = outcome_of(chunks, p, signal);
    int rc = -1;
    pthread_mutex_lock(&s->mu);
    b = retry_breakers_get(&s->breakers, provider); /* the array may have moved */
    if (b)
        rc = retry_breaker_record(b, &p->breaker, ticket, outcome, now_ms(s), &ch);
    pthread_mutex_unlock(&s->mu);
    if (rc != 0) {
        json_decref(chunks);
        weir_call_fail(call, "retry: out of memory");
        return NULL;
    }
    if (ch.changed && !log_breaker(call, args, provider, &ch)) {
        json_decref(chunks);
        return NULL;
    }
    return chunks;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */
/* ------------------------------------------------------------------------ */

/* An agent went away: its counters and route go too (breakers are the host's). */
static json_t *on_disposed(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    retry_state *s = ud;
    const char *agent = json_string_value(json_object_get(args, "agent"));
    pthread_mutex_lock(&s->mu);
    retry_budgets_forget(&s->budgets, agent); /* the route goes with the agent's state */
    pthread_mutex_unlock(&s->mu);
    return json_null();
}

static void state_free(retry_state *s) {
    if (!s)
        return;
    retry_config_clear(&s->cfg);
    retry_budgets_clear(&s->budgets);
    retry_breakers_clear(&s->breakers);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Every fallback route's provider must be a provider row (checked once all rows loaded). */
static int require_routes(weir_plugin *self, const retry_policy *p, const char *where) {
    for (size_t i = 0; i < p->nfallback; i++) {
        char what[256];
        snprintf(what, sizeof what, "%sfallback[%zu].provider", where, i);
        int rc = weir_provider_require(self, p->fallback[i].provider, what);
        if (rc != WEIR_OK)
            return rc;
    }
    return WEIR_OK;
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    retry_state *s = calloc(1, sizeof *s);
    if (!s)
        return WEIR_E_NOMEM;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return WEIR_E_NOMEM;
    }
    s->self = self;
    s->api = api;
    bool oom = false;
    char msg[sizeof err->text];
    if (retry_config_parse(config, &s->cfg, &oom, msg, sizeof msg) != 0) {
        state_free(s);
        if (err)
            snprintf(err->text, sizeof err->text, "%s", msg);
        return oom ? WEIR_E_NOMEM : WEIR_E_PLUGIN_CONFIG;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->rng = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (uint64_t)(uintptr_t)s;

    int rc = WEIR_OK;
    if (!WEIR_API_HAS(api, provider_require) || !api->provider_require) { /* a 1.4 table */
        if (err)
            snprintf(err->text, sizeof err->text, "retry needs ABI 1.5 (provider_require)");
        rc = WEIR_E_PLUGIN_ABI;
    }
    if (rc == WEIR_OK) /* one retry policy per deployment (docs/plugins.md, "Roles") */
        rc = weir_plugin_role(self, "retry");
    if (rc == WEIR_OK)
        rc = require_routes(self, &s->cfg.base, "");
    for (size_t i = 0; rc == WEIR_OK && i < s->cfg.nproviders; i++) {
        char where[200];
        snprintf(where, sizeof where, "providers.%s.", s->cfg.provider_ids[i]);
        rc = require_routes(self, &s->cfg.providers[i], where);
    }
    static const char *const types[] = {"retry/wait", "retry/started", "retry/fallback",
                                        "retry/breaker"};
    for (size_t i = 0; rc == WEIR_OK && i < sizeof types / sizeof types[0]; i++)
        rc = weir_event_type_register(self, types[i], WEIR_EVENT_IGNORABLE);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = s;
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/request-error", on_request_error, &opts);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/disposed", on_disposed, &opts);
    weir_hook_opts first = opts, last = opts;
    first.order = WEIR_ORDER_FIRST; /* the route is the last word on the call config */
    last.order = WEIR_ORDER_LAST;   /* the breaker sits next to the provider */
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/request", on_request, &first);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "llm/stream", on_stream, &last);
    if (rc != WEIR_OK) {
        state_free(s); /* not initialised: fini will not run, the hooks are never called */
        return rc;
    }
    weir_plugin_set_data(self, s);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { state_free(weir_plugin_data(self)); }

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    "retry",
    "0.2.0",
    "recovers failed model requests: backoff, Retry-After, budgets in count and time, a "
    "circuit breaker per provider and fallback routes",
    retry_config_schema,
    init,
    fini,
    {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
