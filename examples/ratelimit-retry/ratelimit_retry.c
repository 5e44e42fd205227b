/*
 * examples/ratelimit-retry/ratelimit_retry.c - a rate-limit-aware retry,
 * built as weir-ratelimit-retry.so; it fills the role "retry".
 * agent/request-error: a retryable failure is retried, up to max_retries a
 * step, while its host's token bucket (`burst`, `per_minute`, shared by the
 * row's agents) has a token, after a wait of at most max_delay_ms: until the
 * latest reset_ms of the rate limits with nothing left (x-ratelimit-reset-*),
 * else the Retry-After, else a backoff.  A `ratelimit-retry/wait` event shows
 * it as a status line in `weir run`; a cancel ends it, without a retry.
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

static pthread_mutex_t buckets_mu = PTHREAD_MUTEX_INITIALIZER; /* the agents share the buckets */

typedef struct bucket {
    char host[128];
    double tokens;
    uint64_t at_ms; /* last refill */
} bucket;

typedef struct retry {
    long long max_retries, base_delay, max_delay, burst, per_minute;
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
    pthread_mutex_lock(&buckets_mu);
    bucket *b = NULL;
    for (size_t i = 0; i < r->nbuckets && !b; i++)
        b = strcmp(r->buckets[i].host, host) ? NULL : &r->buckets[i];
    if (!b) { /* a new host: a full bucket (once the table is full, the last one is reused) */
        b = &r->buckets[r->nbuckets < MAX_HOSTS ? r->nbuckets++ : MAX_HOSTS - 1];
        *b = (bucket){.tokens = (double)r->burst, .at_ms = now};
        snprintf(b->host, sizeof b->host, "%s", host);
    }
    b->tokens += (double)(now - b->at_ms) * (double)r->per_minute / 60000.0;
    if (b->tokens > (double)r->burst)
        b->tokens = (double)r->burst;
    b->at_ms = now;
    bool ok = b->tokens >= 1.0;
    if (ok)
        b->tokens -= 1.0;
    pthread_mutex_unlock(&buckets_mu);
    return ok;
}

/* The latest reset_ms of the limits of `rate_limit` with none left; -1: none. */
static long long exhausted_reset(json_t *rate_limit) {
    long long reset = -1;
    const char *name;
    json_t *lim; /* requests, tokens, ... and raw (no "remaining") */
    json_object_foreach(rate_limit, name, lim) {
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
    const char *host = json_string_value(json_object_get(failure, "host"));
    if (!host) /* a transport failure names no host: the provider row's */
        host = json_string_value(json_object_get(args, "provider"));
    size_t tries = json_array_size(json_object_get(args, "prior_failures"));
    if (!host || !retryable(code) || (long long)tries >= r->max_retries ||
        !take_token(r, host, weir_clock_ms()))
        return weir_next(call);
    long long reset = exhausted_reset(json_object_get(failure, "rate_limit"));
    json_int_t after = json_integer_value(json_object_get(failure, "retry_after_ms"));
    long long delay = reset >= 0 ? reset : after > 0 ? (long long)after : r->base_delay << tries;
    if (delay > r->max_delay)
        delay = r->max_delay;
    json_t *text = reset >= 0 ? json_sprintf("rate limit of %s: waiting {remaining} for its "
                                             "reset (retry %zu)", host, tries + 1)
                              : json_sprintf("%s: retrying in {remaining} (retry %zu)", code,
                                             tries + 1);
    json_t *data = json_pack("{s:s, s:{s:s, s:o, s:I}}", "host", host, "status", "kind",
                             reset >= 0 ? "waiting" : "retrying", "text", text, "delay_ms",
                             (json_int_t)delay);
    if (data) /* the status line is a courtesy: the retry goes on without it */
        (void)weir_agent_append(weir_call_agent(call), WAIT_EVENT, data, NULL);
    json_decref(data);
    if (weir_signal_sleep(weir_call_signal(call), (uint64_t)delay) != WEIR_OK)
        return weir_next(call); /* cancelled while waiting: no retry */
    return json_pack("{s:s}", "kind", "retry");
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    (void)api;
    int rc = weir_plugin_role(self, "retry"); /* first: the host names a second retry row */
    weir_config_reader rd = weir_config_reader_init(config, weir_plugin_id(self), err);
    retry *r = calloc(1, sizeof *r);
    if (!r)
        return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
    weir_config_int(&rd, "max_retries", 3, 0, 20, &r->max_retries); /* base << 19 fits */
    weir_config_int(&rd, "base_delay_ms", 500, 0, 600000, &r->base_delay);
    weir_config_int(&rd, "max_delay_ms", 60000, 0, 3600000, &r->max_delay);
    weir_config_int(&rd, "burst", 5, 1, 10000, &r->burst);
    weir_config_int(&rd, "per_minute", 30, 1, 1000000, &r->per_minute);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = r;
    if (rc == WEIR_OK)
        rc = rd.status;
    if (rc == WEIR_OK)
        rc = weir_event_type_register(self, WAIT_EVENT, WEIR_EVENT_IGNORABLE);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/request-error", on_request_error, &opts);
    if (rc != WEIR_OK) /* fini does not run after a failed init */
        free(r);
    else
        weir_plugin_set_data(self, r);
    return rc;
}

static void fini(weir_plugin *self) { free(weir_plugin_data(self)); }

static const weir_plugin_desc ratelimit_retry_desc = {
    WEIR_PLUGIN_HEADER_MIN(12), .name = "ratelimit-retry", .version = "1.0.0",
    .description = "Example: retries with a token bucket per host, waiting for rate-limit resets",
    .init = init, .fini = fini};

WEIR_PLUGIN_DEFINE(ratelimit_retry_desc)
