/* plugins/retry/retry_policy.c - see retry_policy.h. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "retry_policy.h"

#include <stdarg.h>
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
    "\"mode\":{\"enum\":[\"normal\",\"always\"]}"

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
    } else {
        out->mode = RETRY_MODE_NORMAL;
        out->max_retries = 5;
        out->initial_delay_ms = 500;
        out->max_delay_ms = 10000;
        out->jitter_ratio = 0.1;
    }
    const json_t *v;
    if ((v = json_object_get(obj, "max_retries")) && !get_count(v, &out->max_retries))
        return bad(msg, size, "%smax_retries: expected a non-negative integer", where);
    if ((v = json_object_get(obj, "initial_delay_ms")) && !get_count(v, &out->initial_delay_ms))
        return bad(msg, size, "%sinitial_delay_ms: expected a non-negative integer", where);
    if ((v = json_object_get(obj, "max_delay_ms")) && !get_count(v, &out->max_delay_ms))
        return bad(msg, size, "%smax_delay_ms: expected a non-negative integer", where);
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
                           double r, retry_plan *out) {
    retry_plan plan = {.verdict = RETRY_DELEGATE};
    if (p) {
        bool normal = p->mode == RETRY_MODE_NORMAL;
        const char *code = json_string_value(json_object_get(failure, "code"));
        uint64_t after = retry_after_ms(failure);
        if (normal && (!retry_policy_retryable(p, code) || previous >= p->max_retries ||
                       after > p->max_delay_ms)) {
            plan.verdict = RETRY_DELEGATE;
        } else {
            plan.verdict = RETRY_WAIT;
            plan.retry = previous + 1;
            plan.from_retry_after = after > 0 && after <= p->max_delay_ms;
            plan.delay_ms = plan.from_retry_after ? after : retry_backoff_ms(p, plan.retry, r);
        }
    }
    if (out)
        *out = plan;
    return plan.verdict;
}

retry_counter *retry_budgets_get(retry_budgets *b, const char *agent, const char *provider,
                                 json_int_t turn, json_int_t step) {
    if (!b || !agent || !provider)
        return NULL;
    for (size_t i = 0; i < b->n; i++) {
        retry_counter *c = &b->v[i];
        if (strcmp(c->agent, agent) != 0 || strcmp(c->provider, provider) != 0)
            continue;
        if (c->turn != turn || c->step != step) { /* a new step: a fresh budget */
            c->turn = turn;
            c->step = step;
            c->count = 0;
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
    if (!c->agent || !c->provider) {
        free(c->agent);
        free(c->provider);
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
    }
    free(b->v);
    memset(b, 0, sizeof *b);
}
