/*
 * myplugin.c - a rate-limit-aware retry, made from weir's plugin template
 * (`weir new-plugin --kind retry`): make the policy yours.
 *
 * On agent/request-error (waterfall: {agent, turn, step, provider, failure,
 * prior_failures}) it answers {kind:"retry"} for a retryable failure while
 * the step has retries left: it waits the failure's retry_after_ms (the
 * server's Retry-After) or an exponential backoff, and takes a token from
 * the bucket of the failure's host (or the route's, weir_agent_route), so
 * that all the agents of the deployment retry one host at most `burst`
 * times at once and `per_minute` times a minute.  An empty bucket ends the
 * step with the failure (the next listener, or the core default, decides).
 * Config: {"max_retries": 3, "base_delay_ms": 500, "max_delay_ms": 30000,
 *          "burst": 5, "per_minute": 30}
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>
#include <weir/sdk.h>

#define MAX_HOSTS 64

typedef struct bucket {
    char host[128];
    double tokens;
    uint64_t at_ms; /* last refill */
} bucket;

typedef struct myplugin {
    long long max_retries, base_delay, max_delay, burst, per_minute;
    pthread_mutex_t mu; /* the buckets are the row's: every agent shares them */
    bucket buckets[MAX_HOSTS];
    size_t nbuckets;
} myplugin;

static const char *const retryable[] = {"RATE_LIMIT", "OVERLOADED", "SERVER", "TIMEOUT",
                                        "TRANSPORT", "EMPTY_RESPONSE"};

static bool is_retryable(const char *code) {
    for (size_t i = 0; code && i < sizeof retryable / sizeof *retryable; i++)
        if (!strcmp(code, retryable[i]))
            return true;
    return false;
}

/* Take one token of `host`'s bucket (refilled at per_minute a minute). */
static bool take_token(myplugin *st, const char *host, uint64_t now) {
    pthread_mutex_lock(&st->mu);
    bucket *b = NULL;
    for (size_t i = 0; i < st->nbuckets && !b; i++)
        if (!strcmp(st->buckets[i].host, host))
            b = &st->buckets[i];
    if (!b && st->nbuckets < MAX_HOSTS) {
        b = &st->buckets[st->nbuckets++];
        snprintf(b->host, sizeof b->host, "%s", host);
        b->tokens = (double)st->burst;
        b->at_ms = now;
    }
    bool ok = false;
    if (b) {
        b->tokens += (double)(now - b->at_ms) * (double)st->per_minute / 60000.0;
        if (b->tokens > (double)st->burst)
            b->tokens = (double)st->burst;
        b->at_ms = now;
        if ((ok = b->tokens >= 1.0))
            b->tokens -= 1.0;
    }
    pthread_mutex_unlock(&st->mu);
    return ok;
}

/* agent/request-error (waterfall): retry, or let the chain decide. */
static json_t *on_request_error(weir_call *call, const json_t *args, void *user_data) {
    myplugin *st = user_data;
    const json_t *failure = json_object_get(args, "failure");
    size_t tries = json_array_size(json_object_get(args, "prior_failures"));
    if (!is_retryable(json_string_value(json_object_get(failure, "code"))) ||
        (long long)tries >= st->max_retries)
        return weir_next(call);
    json_t *route = NULL;
    const char *host = json_string_value(json_object_get(failure, "host"));
    if (!host) { /* the failure names no host (a transport error): the route's */
        route = weir_agent_route(weir_call_agent(call), NULL);
        host = json_string_value(json_object_get(route, "host"));
    }
    if (!host)
        host = json_string_value(json_object_get(args, "provider"));
    bool ok = take_token(st, host ? host : "?", weir_clock_ms());
    json_decref(route);
    if (!ok)
        return weir_next(call); /* the bucket is empty: no retry */
    json_int_t after = json_integer_value(json_object_get(failure, "retry_after_ms"));
    long long delay = after > 0 ? (long long)after : st->base_delay << (tries < 20 ? tries : 20);
    if (delay > st->max_delay)
        delay = st->max_delay;
    if (weir_signal_sleep(weir_call_signal(call), (uint64_t)delay) != WEIR_OK)
        return weir_next(call); /* cancelled while waiting */
    return json_pack("{s:s}", "kind", "retry");
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config,
                weir_error *err) {
    (void)api;
    weir_config_reader rd = weir_config_reader_init(config, weir_plugin_id(self), err);
    myplugin *st = calloc(1, sizeof *st);
    if (!st || pthread_mutex_init(&st->mu, NULL) != 0) {
        free(st);
        return weir_error_fill(err, WEIR_E_NOMEM, "out of memory");
    }
    weir_config_int(&rd, "max_retries", 3, 0, 100, &st->max_retries);
    weir_config_int(&rd, "base_delay_ms", 500, 0, 600000, &st->base_delay);
    weir_config_int(&rd, "max_delay_ms", 30000, 0, 3600000, &st->max_delay);
    weir_config_int(&rd, "burst", 5, 1, 10000, &st->burst);
    weir_config_int(&rd, "per_minute", 30, 1, 1000000, &st->per_minute);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = st;
    int rc = rd.status ? rd.status
                       : weir_hook_register(self, "agent/request-error", on_request_error, &opts);
    if (rc != WEIR_OK) {
        pthread_mutex_destroy(&st->mu);
        free(st);
        return rc;
    }
    weir_plugin_set_data(self, st);
    return WEIR_OK;
}

static void fini(weir_plugin *self) {
    myplugin *st = weir_plugin_data(self);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static const weir_plugin_desc myplugin_desc = {
    WEIR_PLUGIN_HEADER_MIN(12),
    .name = "myplugin",
    .version = "0.1.0",
    .description = "Template: retries failed requests with a token bucket per host",
    .init = init,
    .fini = fini,
};

WEIR_PLUGIN_DEFINE(myplugin_desc)
