/*
 * examples/ratelimit-retry/ratelimit_retry.c - a rate-limit-aware retry,
 * built as weir-ratelimit-retry.so; it fills the role "retry".
 *
 * agent/request-error: a retryable failure is retried while the step has
 * retries left and the bucket of the failure's host has a token (a token
 * bucket per host, shared by every agent of the row: `burst` at once,
 * `per_minute` a minute).  Before retrying it waits
 *   - when the failure's rate_limit says requests or tokens are exhausted
 *     (remaining 0), until the latest of their resets (reset_ms, from
 *     x-ratelimit-reset-* or anthropic-ratelimit-*-reset);
 *   - else the server's Retry-After (retry_after_ms), else an exponential
 *     backoff from base_delay_ms;
 * at most max_delay_ms.  The wait is announced by a `ratelimit-retry/wait`
 * event whose status `weir run` prints, and passes through
 * weir_signal_sleep (a cancel ends it; the test kit's fake clock skips it).
 * Config: {"max_retries": 3, "base_delay_ms": 500, "max_delay_ms": 60000,
 *          "burst": 5, "per_minute": 30}
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>
#include <weir/sdk.h>

#define MAX_HOSTS 64
#define WAIT_EVENT "ratelimit-retry/wait"

typedef struct bucket {
    char host[128];
    double tokens;
    uint64_t at_ms; /* last refill */
} bucket;

typedef struct retry {
    long long max_retries, base_delay, max_delay, burst, per_minute;
    pthread_mutex_t mu; /* guards the buckets: the agents share them */
    bucket buckets[MAX_HOSTS];
    size_t nbuckets;
} retry;

static bool retryable(const char *code) {
    static const char *const codes[] = {"RATE_LIMIT", "OVERLOADED", "SERVER", "TIMEOUT",
                                        "TRANSPORT", "EMPTY_RESPONSE"};
    for (size_t i = 0; code && i < sizeof codes / sizeof *codes; i++)
        if (!strcmp(code, codes[i]))
            return true;
    return false;
}

/* Take a token of `host`'s bucket, refilled at per_minute a minute. */
static bool take_token(retry *r, const char *host, uint64_t now) {
    pthread_mutex_lock(&r->mu);
    bucket *b = NULL;
    for (size_t i = 0; i < r->nbuckets && !b; i++)
        if (!strcmp(r->buckets[i].host, host))
            b = &r->buckets[i];
    if (!b && r->nbuckets < MAX_HOSTS) { /* a new host starts full */
        b = &r->buckets[r->nbuckets++];
        snprintf(b->host, sizeof b->host, "%s", host);
        b->tokens = (double)r->burst;
        b->at_ms = now;
    }
    bool ok = false;
    if (b) {
        b->tokens += (double)(now - b->at_ms) * (double)r->per_minute / 60000.0;
        if (b->tokens > (double)r->burst)
            b->tokens = (double)r->burst;
        b->at_ms = now;
        if ((ok = b->tokens >= 1.0))
            b->tokens -= 1.0;
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* The latest reset_ms of the exhausted limits of `rate_limit`; -1: none. */
static long long exhausted_reset(const json_t *rate_limit) {
    static const char *const limits[] = {"requests", "tokens", "input_tokens", "output_tokens"};
    long long reset = -1;
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) {
        const json_t *lim = json_object_get(rate_limit, limits[i]);
        const json_t *left = json_object_get(lim, "remaining");
        json_int_t at = json_integer_value(json_object_get(lim, "reset_ms"));
        if (json_is_integer(left) && json_integer_value(left) == 0 && at > reset)
            reset = at;
    }
    return reset;
}

/* agent/request-error (waterfall): wait and retry, or let the chain decide. */
static json_t *on_request_error(weir_call *call, const json_t *args, void *user_data) {
    retry *r = user_data;
    const json_t *failure = json_object_get(args, "failure");
    const char *code = json_string_value(json_object_get(failure, "code"));
    size_t tries = json_array_size(json_object_get(args, "prior_failures"));
    const char *host = json_string_value(json_object_get(failure, "host"));
    if (!host) /* a transport failure names no host: the provider's */
        host = json_string_value(json_object_get(args, "provider"));
    if (!retryable(code) || (long long)tries >= r->max_retries ||
        !take_token(r, host ? host : "?", weir_clock_ms()))
        return weir_next(call);
    long long reset = exhausted_reset(json_object_get(failure, "rate_limit"));
    json_int_t after = json_integer_value(json_object_get(failure, "retry_after_ms"));
    long long delay = reset >= 0 ? reset : after > 0 ? (long long)after
                                         : r->base_delay << (tries < 20 ? tries : 20);
    if (delay > r->max_delay)
        delay = r->max_delay;
    char text[256];
    if (reset >= 0)
        snprintf(text, sizeof text, "rate limit of %s: waiting {remaining} for its reset "
                 "(retry %zu/%lld)", host ? host : "?", tries + 1, r->max_retries);
    else
        snprintf(text, sizeof text, "retrying in {remaining} (%s, retry %zu/%lld)", code,
                 tries + 1, r->max_retries);
    json_t *data = json_pack("{s:s?, s:I, s:{s:s, s:s, s:I}}", "host", host, "delay_ms",
                             (json_int_t)delay, "status", "kind",
                             reset >= 0 ? "waiting" : "retrying", "text", text, "delay_ms",
                             (json_int_t)delay);
    weir_error err; /* the line is a courtesy: the retry goes on without it */
    if (data)
        (void)weir_agent_append(weir_call_agent(call), WAIT_EVENT, data, &err);
    json_decref(data);
    if (weir_signal_sleep(weir_call_signal(call), (uint64_t)delay) != WEIR_OK)
        return weir_next(call); /* cancelled while waiting: no retry */
    return json_pack("{s:s}", "kind", "retry");
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config,
                weir_error *err) {
    (void)api;
    int rc = weir_plugin_role(self, "retry"); /* first: the host names a second retry row */
    if (rc != WEIR_OK)
        return rc;
    weir_config_reader rd = weir_config_reader_init(config, weir_plugin_id(self), err);
    retry *r = calloc(1, sizeof *r);
    if (!r || pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
    }
    weir_config_int(&rd, "max_retries", 3, 0, 100, &r->max_retries);
    weir_config_int(&rd, "base_delay_ms", 500, 0, 600000, &r->base_delay);
    weir_config_int(&rd, "max_delay_ms", 60000, 0, 3600000, &r->max_delay);
    weir_config_int(&rd, "burst", 5, 1, 10000, &r->burst);
    weir_config_int(&rd, "per_minute", 30, 1, 1000000, &r->per_minute);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = r;
    rc = rd.status;
    if (rc == WEIR_OK)
        rc = weir_event_type_register(self, WAIT_EVENT, WEIR_EVENT_IGNORABLE);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/request-error", on_request_error, &opts);
    if (rc != WEIR_OK) {
        pthread_mutex_destroy(&r->mu);
        free(r);
        return rc;
    }
    weir_plugin_set_data(self, r);
    return WEIR_OK;
}

static void fini(weir_plugin *self) {
    retry *r = weir_plugin_data(self);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static const weir_plugin_desc ratelimit_retry_desc = {
    WEIR_PLUGIN_HEADER_MIN(12),
    .name = "ratelimit-retry",
    .version = "1.0.0",
    .description = "Example: retries with a token bucket per host, waiting for rate-limit resets",
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(ratelimit_retry_desc)
