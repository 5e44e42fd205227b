/* plugins/retry/retry_policy.c - see retry_policy.h. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "retry_policy.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys a policy and a provider override share. */
#define POLICY_PROPERTIES                                                                   \
    "\"max_retries\":{\"type\":\"integer\",\"minimum\":0},"                                 \
    "\"retryable_codes\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":1}}," \
    "\"initial_delay_ms\":{\"type\":\"integer\",\"minimum\":0},"                            \
    "\"max_delay_ms\":{\"type\":\"integer\",\"minimum\":0},"                                \
    "\"jitter_ratio\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1},"                   \
    "\"mode\":{\"enum\":[\"normal\",\"always\"]},"                                          \
    "\"max_elapsed_ms\":{\"type\":\"integer\",\"minimum\":0},"                              \
    "\"breaker\":{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"object\",\"properties\":{"   \
    "\"failures\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"                   \
    "\"window_ms\":{\"type\":\"integer\",\"minimum\":0},"                                   \
    "\"cooldown_ms\":{\"type\":\"integer\",\"minimum\":0}},"                                \
    "\"additionalProperties\":false}]},"                                                    \
    "\"fallback\":{\"type\":\"array\",\"items\":{\"type\":\"object\","                      \
    "\"required\":[\"provider\",\"model\"],\"properties\":{"                                 \
    "\"provider\":{\"type\":\"string\",\"minLength\":1},"                                   \
    "\"model\":{\"type\":\"string\",\"minLength\":1}},\"additionalProperties\":false}}"

const char retry_config_schema[] =
    "{\"type\":\"object\",\"properties\":{" POLICY_PROPERTIES ","
    "\"providers\":{\"type\":\"object\",\"additionalProperties\":"
    "{\"type\":\"object\",\"properties\":{" POLICY_PROPERTIES "},"
    "\"additionalProperties\":false}}},"
    "\"additionalProperties\":false}";

static const char *const default_codes[] = {"EMPTY_RESPONSE", "RATE_LIMIT", "SERVER",
                                            "TIMEOUT",        "TRANSPORT",  "OVERLOADED"};

/* Largest integer a double holds exactly; bounds every millisecond count. */
#define MAX_EXACT 9007199254740992.0

static int bad(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *msg, size_t size, const char *fmt, ...) {
    if (msg && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A non-negative whole number (3 or 3.0) up to MAX_EXACT. */
static bool get_count(const json_t *v, uint64_t *out) {
    double d;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return false;
        d = (double)json_integer_value(v);
    } else if (json_is_real(v)) {
        d = json_real_value(v);
        if (!(d >= 0 && d <= MAX_EXACT) || d != (double)(uint64_t)d)
            return false; /* negative, too large, or not whole */
    } else {
        return false;
    }
    if (d > MAX_EXACT)
        return false;
    *out = (uint64_t)d;
    return true;
}

static void policy_free(retry_policy *p) {
    for (size_t i = 0; i < p->ncodes; i++)
        free(p->codes[i]);
    free(p->codes);
    p->codes = NULL;
    p->ncodes = 0;
    for (size_t i = 0; i < p->nfallback; i++) {
        free(p->fallback[i].provider);
        free(p->fallback[i].model);
    }
    free(p->fallback);
    p->fallback = NULL;
    p->nfallback = 0;
}

/* Append one route (copied); false when out of memory. */
static bool add_route(retry_policy *p, const char *provider, const char *model) {
    retry_route *grown = realloc(p->fallback, (p->nfallback + 1) * sizeof *grown);
    if (!grown)
        return false;
    p->fallback = grown;
    retry_route *r = &p->fallback[p->nfallback];
    r->provider = strdup(provider);
    r->model = strdup(model);
    if (!r->provider || !r->model) {
        free(r->provider);
        free(r->model);
        return false;
    }
    p->nfallback++;
    return true;
}

/* `breaker`: false, true (the inherited numbers) or an object of numbers. */
static int parse_breaker(const json_t *v, retry_breaker_cfg *out, const char *where, char *msg,
                         size_t size) {
    if (json_is_boolean(v)) {
        out->enabled = json_is_true(v);
        return 0;
    }
    if (!json_is_object(v))
        return bad(msg, size, "%sbreaker: expected false, true or {failures, window_ms, "
                              "cooldown_ms}",
                   where);
    static const char *const keys[] = {"failures", "window_ms", "cooldown_ms"};
    uint64_t *fields[] = {&out->failures, &out->window_ms, &out->cooldown_ms};
    const char *key;
    const json_t *x;
    json_object_foreach((json_t *)(uintptr_t)v, key, x) {
        size_t k = 0;
        while (k < 3 && strcmp(key, keys[k]) != 0)
            k++;
        if (k == 3)
            return bad(msg, size, "%sbreaker.%s: unknown key", where, key);
        if (!get_count(x, fields[k]) || (k == 0 && (*fields[k] < 1 || *fields[k] > 1000)))
            return bad(msg, size, "%sbreaker.%s: expected %s", where, key,
                       k == 0 ? "an integer from 1 to 1000" : "a non-negative integer");
    }
    out->enabled = true;
    return 0;
}

/* Copy `n` code strings into p->codes; false when out of memory. */
static bool set_codes(retry_policy *p, const char *const *codes, size_t n) {
    p->codes = n ? calloc(n, sizeof *p->codes) : NULL;
    p->ncodes = 0;
    if (n && !p->codes)
        return false;
    for (; p->ncodes < n; p->ncodes++) {
        p->codes[p->ncodes] = strdup(codes[p->ncodes]);
        if (!p->codes[p->ncodes])
            return false;
    }
    return true;
}

/*
 * Fill `out` from `obj` (an object or NULL, checked by the caller), starting from `inherit`
 * (NULL: the defaults).  `where` prefixes field names in messages.
 * On failure `out` holds only what policy_free releases.
 */
static int parse_policy(const json_t *obj, const retry_policy *inherit, retry_policy *out,
                        const char *where, bool *oom, char *msg, size_t size) {
    memset(out, 0, sizeof *out);
    if (inherit) {
        *out = *inherit;
        out->codes = NULL;
        out->ncodes = 0;
        out->fallback = NULL;
        out->nfallback = 0;
    } else {
        out->mode = RETRY_MODE_NORMAL;
        out->max_retries = 5;
        out->initial_delay_ms = 500;
        out->max_delay_ms = 10000;
        out->jitter_ratio = 0.1;
        out->max_elapsed_ms = 120000;
        out->breaker = (retry_breaker_cfg){true, 8, 60000, 30000};
    }
    const json_t *v;
    if ((v = json_object_get(obj, "max_retries")) && !get_count(v, &out->max_retries))
        return bad(msg, size, "%smax_retries: expected a non-negative integer", where);
    if ((v = json_object_get(obj, "initial_delay_ms")) && !get_count(v, &out->initial_delay_ms))
        return bad(msg, size, "%sinitial_delay_ms: expected a non-negative integer", where);
    if ((v = json_object_get(obj, "max_delay_ms")) && !get_count(v, &out->max_delay_ms))
        return bad(msg, size, "%smax_delay_ms: expected a non-negative integer", where);
    if ((v = json_object_get(obj, "max_elapsed_ms")) && !get_count(v, &out->max_elapsed_ms))
        return bad(msg, size, "%smax_elapsed_ms: expected a non-negative integer", where);
    if ((v = json_object_get(obj, "breaker")) &&
        parse_breaker(v, &out->breaker, where, msg, size) != 0)
        return -1;
    if ((v = json_object_get(obj, "jitter_ratio"))) {
        double j = json_number_value(v);
        if (!json_is_number(v) || !(j >= 0 && j <= 1))
            return bad(msg, size, "%sjitter_ratio: expected a number from 0 to 1", where);
        out->jitter_ratio = j;
    }
    if ((v = json_object_get(obj, "mode"))) {
        const char *m = json_string_value(v);
        if (m && !strcmp(m, "normal"))
            out->mode = RETRY_MODE_NORMAL;
        else if (m && !strcmp(m, "always"))
            out->mode = RETRY_MODE_ALWAYS;
        else
            return bad(msg, size, "%smode: expected \"normal\" or \"always\"", where);
    }

    const json_t *routes = json_object_get(obj, "fallback");
    if (routes) {
        if (!json_is_array(routes))
            return bad(msg, size, "%sfallback: expected an array of {provider, model}", where);
        size_t i;
        const json_t *r;
        json_array_foreach(routes, i, r) {
            const char *prov = json_string_value(json_object_get(r, "provider"));
            const char *model = json_string_value(json_object_get(r, "model"));
            if (!json_is_object(r) || !prov || !*prov || !model || !*model ||
                json_object_size(r) != 2)
                return bad(msg, size,
                           "%sfallback[%zu]: expected {provider, model} (non-empty strings)",
                           where, i);
            if (!add_route(out, prov, model)) {
                *oom = true;
                return bad(msg, size, "out of memory");
            }
        }
    } else if (inherit) {
        for (size_t i = 0; i < inherit->nfallback; i++) {
            if (!add_route(out, inherit->fallback[i].provider, inherit->fallback[i].model)) {
                *oom = true;
                return bad(msg, size, "out of memory");
            }
        }
    }

    const json_t *codes = json_object_get(obj, "retryable_codes");
    if (codes) {
        if (!json_is_array(codes))
            return bad(msg, size, "%sretryable_codes: expected an array of failure codes", where);
        size_t i;
        const json_t *c;
        json_array_foreach(codes, i, c) {
            const char *s = json_string_value(c);
            if (!s || !*s)
                return bad(msg, size, "%sretryable_codes[%zu]: expected a failure code string",
                           where, i);
        }
        out->codes = json_array_size(codes) ? calloc(json_array_size(codes), sizeof *out->codes)
                                            : NULL;
        if (json_array_size(codes) && !out->codes) {
            *oom = true;
            return bad(msg, size, "out of memory");
        }
        json_array_foreach(codes, i, c) {
            out->codes[i] = strdup(json_string_value(c));
            if (!out->codes[i]) {
                *oom = true;
                return bad(msg, size, "out of memory");
            }
            out->ncodes = i + 1;
        }
    } else if (!(inherit ? set_codes(out, (const char *const *)inherit->codes, inherit->ncodes)
                         : set_codes(out, default_codes,
                                     sizeof default_codes / sizeof default_codes[0]))) {
        *oom = true;
        return bad(msg, size, "out of memory");
    }
    return 0;
}

int retry_config_parse(const json_t *config, retry_config *out, bool *oom, char *msg,
                       size_t msg_size) {
    bool dummy = false;
    if (!oom)
        oom = &dummy;
    *oom = false;
    if (!out)
        return bad(msg, msg_size, "retry_config_parse: NULL argument");
    memset(out, 0, sizeof *out);
    if (config && !json_is_object(config) && !json_is_null(config))
        return bad(msg, msg_size, "config: expected an object");
    if (json_is_null(config))
        config = NULL;
    if (parse_policy(config, NULL, &out->base, "", oom, msg, msg_size) != 0) {
        retry_config_clear(out);
        return -1;
    }
    json_t *providers = json_object_get(config, "providers");
    if (providers && !json_is_object(providers)) {
        retry_config_clear(out);
        return bad(msg, msg_size, "providers: expected an object of provider id -> policy");
    }
    size_t n = json_object_size(providers);
    if (n) {
        out->provider_ids = calloc(n, sizeof *out->provider_ids);
        out->providers = calloc(n, sizeof *out->providers);
        if (!out->provider_ids || !out->providers) {
            *oom = true;
            retry_config_clear(out);
            return bad(msg, msg_size, "out of memory");
        }
    }
    const char *id;
    const json_t *row;
    json_object_foreach(providers, id, row) {
        char where[160];
        snprintf(where, sizeof where, "providers.%s.", id);
        size_t i = out->nproviders++;
        out->provider_ids[i] = strdup(id);
        if (!out->provider_ids[i]) {
            *oom = true;
            retry_config_clear(out);
            return bad(msg, msg_size, "out of memory");
        }
        if (!json_is_object(row)) {
            bad(msg, msg_size, "providers.%s: expected an object", id);
            retry_config_clear(out);
            return -1;
        }
        if (parse_policy(row, &out->base, &out->providers[i], where, oom, msg, msg_size) != 0) {
            retry_config_clear(out);
            return -1;
        }
    }
    return 0;
}

void retry_config_clear(retry_config *cfg) {
    if (!cfg)
        return;
    policy_free(&cfg->base);
    for (size_t i = 0; i < cfg->nproviders; i++) {
        free(cfg->provider_ids[i]);
        policy_free(&cfg->providers[i]);
    }
    free(cfg->provider_ids);
    free(cfg->providers);
    memset(cfg, 0, sizeof *cfg);
}

const retry_policy *retry_config_select(const retry_config *cfg, const char *provider) {
    if (!cfg)
        return NULL;
    for (size_t i = 0; provider && i < cfg->nproviders; i++)
        if (!strcmp(cfg->provider_ids[i], provider))
            return &cfg->providers[i];
    return &cfg->base;
}

bool retry_policy_retryable(const retry_policy *p, const char *code) {
    for (size_t i = 0; p && code && i < p->ncodes; i++)
        if (!strcmp(p->codes[i], code))
            return true;
    return false;
}

uint64_t retry_backoff_ms(const retry_policy *p, uint64_t retry, double r) {
    if (!p)
        return 0;
    double max = (double)p->max_delay_ms;
    double base = (double)p->initial_delay_ms;
    for (uint64_t i = 1; i < retry && base < max; i++)
        base *= 2; /* stops at the cap, so large retry numbers cannot overflow */
    if (base > max)
        base = max;
    if (!(r >= 0)) /* also NaN */
        r = 0;
    if (r > 1)
        r = 1;
    double j = p->jitter_ratio;
    double d = base * (1 - j + 2 * j * r);
    if (d > max)
        d = max;
    if (d < 0)
        d = 0;
    return (uint64_t)(d + 0.5);
}

/* The failure's retry_after_ms in whole ms (rounded up), or 0 when absent or invalid. */
static uint64_t retry_after_ms(const json_t *failure) {
    const json_t *v = json_object_get(failure, "retry_after_ms");
    if (json_is_integer(v))
        return json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d > 0) || d > MAX_EXACT)
            return 0;
        uint64_t ms = (uint64_t)d;
        return (double)ms < d ? ms + 1 : ms;
    }
    return 0;
}

retry_verdict retry_decide(const retry_policy *p, const json_t *failure, uint64_t previous,
                           uint64_t elapsed_ms, double r, retry_plan *out) {
    retry_plan plan = {.verdict = RETRY_DELEGATE, .spent = RETRY_SPENT_CODE};
    if (p) {
        bool normal = p->mode == RETRY_MODE_NORMAL;
        const char *code = json_string_value(json_object_get(failure, "code"));
        uint64_t after = retry_after_ms(failure);
        if (normal && !retry_policy_retryable(p, code)) {
            plan.spent = RETRY_SPENT_CODE;
        } else if (normal && previous >= p->max_retries) {
            plan.spent = RETRY_SPENT_RETRIES;
        } else if (normal && after > p->max_delay_ms) {
            plan.spent = RETRY_SPENT_RETRY_AFTER;
        } else {
            plan.retry = previous + 1;
            plan.from_retry_after = after > 0 && after <= p->max_delay_ms;
            plan.delay_ms = plan.from_retry_after ? after : retry_backoff_ms(p, plan.retry, r);
            /* the time budget: a wait that would end past it is not started */
            if (normal && (elapsed_ms > p->max_elapsed_ms ||
                           plan.delay_ms > p->max_elapsed_ms - elapsed_ms)) {
                plan.spent = RETRY_SPENT_TIME;
            } else {
                plan.verdict = RETRY_WAIT;
                plan.spent = RETRY_SPENT_NONE;
            }
        }
    }
    if (out)
        *out = plan;
    return plan.verdict;
}

retry_counter *retry_budgets_get(retry_budgets *b, const char *agent, const char *provider,
                                 const char *model, json_int_t turn, json_int_t step) {
    if (!b || !agent || !provider)
        return NULL;
    if (!model)
        model = "";
    for (size_t i = 0; i < b->n; i++) {
        retry_counter *c = &b->v[i];
        if (strcmp(c->agent, agent) != 0 || strcmp(c->provider, provider) != 0 ||
            strcmp(c->model, model) != 0)
            continue;
        if (c->turn != turn || c->step != step) { /* a new step: a fresh budget */
            c->turn = turn;
            c->step = step;
            c->count = 0;
            c->timed = false;
            c->first_ms = 0;
            c->retry_id[0] = '\0';
        }
        return c;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        retry_counter *grown = realloc(b->v, cap * sizeof *grown);
        if (!grown)
            return NULL;
        b->v = grown;
        b->cap = cap;
    }
    retry_counter *c = &b->v[b->n];
    memset(c, 0, sizeof *c);
    c->agent = strdup(agent);
    c->provider = strdup(provider);
    c->model = strdup(model);
    if (!c->agent || !c->provider || !c->model) {
        free(c->agent);
        free(c->provider);
        free(c->model);
        return NULL;
    }
    c->turn = turn;
    c->step = step;
    b->n++;
    return c;
}

void retry_budgets_forget(retry_budgets *b, const char *agent) {
    if (!b || !agent)
        return;
    size_t keep = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (!strcmp(b->v[i].agent, agent)) {
            free(b->v[i].agent);
            free(b->v[i].provider);
            free(b->v[i].model);
        } else {
            b->v[keep++] = b->v[i];
        }
    }
    b->n = keep;
}

void retry_budgets_clear(retry_budgets *b) {
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++) {
        free(b->v[i].agent);
        free(b->v[i].provider);
        free(b->v[i].model);
    }
    free(b->v);
    memset(b, 0, sizeof *b);
}
