/*
 * plugins/retry - retries failed model requests on `agent/request-error`
 * with exponential backoff and jitter, honouring Retry-After, within a
 * per-step budget per provider (docs/retry.md).
 *
 * Config (config_schema in retry_policy.c): max_retries, retryable_codes,
 * initial_delay_ms, max_delay_ms, jitter_ratio, mode "normal"|"always", and
 * providers {<provider id>: {same keys}} overriding them per provider.
 *
 * Each retry appends `llm/retry` before its cancellable wait and
 * `llm/retry-started` after it, then returns {kind:"retry"}.  Cancellation
 * during the wait returns null (terminal).  The counters live in plugin
 * memory, keyed by agent, provider, turn and step, behind one mutex: the
 * listener runs on every agent's driver thread.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weir/plugin.h>

#include "retry_policy.h"

typedef struct retry_state {
    weir_plugin *self;
    retry_config cfg;       /* read-only after init */
    pthread_mutex_t mu;     /* guards budgets and rng */
    retry_budgets budgets;
    uint64_t rng;           /* splitmix64 state */
} retry_state;

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

static bool is_retry(const json_t *action) {
    return json_is_object(action) &&
           json_is_string(json_object_get(action, "kind")) &&
           !strcmp(json_string_value(json_object_get(action, "kind")), "retry");
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
    if (always) { /* downstream recovery (compaction, ...) gets the first say */
        json_t *down = weir_next(call);
        if (is_retry(down))
            return down;
        if (!down)
            weir_log(s->self, WEIR_LOG_WARN,
                     "a later agent/request-error listener failed; retrying anyway (mode always)");
        json_decref(down);
    } else if (!retry_policy_retryable(p, json_string_value(json_object_get(failure, "code")))) {
        return weir_next(call);
    }
    if (signal && weir_signal_cancelled(signal))
        return json_null(); /* cancellation wins */

    retry_plan plan = {.verdict = RETRY_DELEGATE};
    char retry_id[40] = "";
    pthread_mutex_lock(&s->mu);
    retry_counter *c = retry_budgets_get(&s->budgets, agent, provider, turn, step);
    if (c) {
        double r = (double)(next_random(s) >> 11) * (1.0 / 9007199254740992.0);
        if (retry_decide(p, failure, c->count, r, &plan) == RETRY_WAIT) {
            c->count = plan.retry;
            if (!c->retry_id[0])
                new_retry_id(s, c->retry_id, sizeof c->retry_id);
            memcpy(retry_id, c->retry_id, sizeof retry_id);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!c) {
        weir_call_fail(call, "retry: out of memory");
        return NULL;
    }
    if (plan.verdict == RETRY_DELEGATE) /* normal mode only: budget spent or Retry-After too long */
        return weir_next(call);

    json_t *data = json_pack("{s:s, s:I, s:I, s:s, s:s, s:I, s:I, s:O}", "retry_id", retry_id,
                             "turn", turn, "step", step, "provider", provider, "mode",
                             always ? "always" : "normal", "retry", (json_int_t)plan.retry,
                             "delay_ms", (json_int_t)plan.delay_ms, "failure", failure);
    if (data && !always &&
        json_object_set_new(data, "max_retries", json_integer((json_int_t)p->max_retries)) != 0) {
        json_decref(data);
        data = NULL;
    }
    if (!append(call, "llm/retry", data)) /* recorded before waiting */
        return NULL;
    int rc = weir_signal_sleep(signal, plan.delay_ms);
    if (rc == WEIR_E_CANCELLED)
        return json_null(); /* cancelled during the backoff: terminal */
    if (rc != WEIR_OK) {
        weir_call_fail(call, "retry: waiting %llu ms failed (status %d)",
                       (unsigned long long)plan.delay_ms, rc);
        return NULL;
    }
    if (!append(call, "llm/retry-started",
                json_pack("{s:s, s:I, s:I, s:I}", "retry_id", retry_id, "turn", turn, "step",
                          step, "retry", (json_int_t)plan.retry)))
        return NULL;
    json_t *action = json_pack("{s:s}", "kind", "retry");
    if (!action)
        weir_call_fail(call, "retry: out of memory");
    return action;
}

/* An agent went away: its counters go too. */
static json_t *on_disposed(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    retry_state *s = ud;
    const char *agent = json_string_value(json_object_get(args, "agent"));
    pthread_mutex_lock(&s->mu);
    retry_budgets_forget(&s->budgets, agent);
    pthread_mutex_unlock(&s->mu);
    return json_null();
}

static void state_free(retry_state *s) {
    if (!s)
        return;
    retry_config_clear(&s->cfg);
    retry_budgets_clear(&s->budgets);
    pthread_mutex_destroy(&s->mu);
    free(s);
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

    int rc = weir_event_type_register(self, "llm/retry", WEIR_EVENT_IGNORABLE);
    if (rc == WEIR_OK)
        rc = weir_event_type_register(self, "llm/retry-started", WEIR_EVENT_IGNORABLE);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = s;
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/request-error", on_request_error, &opts);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/disposed", on_disposed, &opts);
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
    "0.1.0",
    "retries failed model requests with backoff, Retry-After and per-provider budgets",
    retry_config_schema,
    init,
    fini,
    {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
