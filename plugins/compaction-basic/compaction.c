/*
 * plugins/compaction-basic - keeps an agent's model context within its
 * window (docs/compaction.md).
 *
 * Triggers:
 *   agent/pre-step      pressure: measured tokens (real usage of the last
 *                       response + an estimate of what came after it + the
 *                       entering input) >= threshold_ratio x context_window
 *                       -> compact, then weir_next() (always, even when the
 *                       compaction failed: a warning is logged).  The check
 *                       reads a running meter (cp_meter) fed with the log's
 *                       new envelopes, so it costs O(1) in the history length.
 *   agent/request-error CONTEXT_WINDOW_EXCEEDED -> forced compaction;
 *                       {kind:"retry"} only when the surface replace
 *                       generation advanced, at most max_overflow_retries
 *                       times per step; otherwise weir_next() (the original
 *                       error stands).
 *   agent/compact       manual (`weir compact`, between turns): no
 *                       threshold; prune, then one summary keeping the
 *                       recent tail; optional extra instructions for the
 *                       summarizer.  Returns {kind:"compacted"|"declined"|
 *                       "failed", message, ...} and never calls weir_next().
 * Compaction: the strategies of the chain (config `strategies`; default
 * summary then prune, with server first on a route whose model_info reports
 * Anthropic's server compaction), in order.  server: the provider compacts
 * the range a summary would take (a request of the range with "compaction":
 * "server"); its reply's continuation rides on the checkpoint, sent back
 * verbatim; a failure logs compaction/fallback and the next strategy runs.
 * summary: while pressure remains (or once
 * when forced), a summary of a head-anchored range that never splits a tool
 * call from its result, and right after each summary (with prune in the
 * chain) the pruning of the kept tail's oversized tool results (head +
 * marker + tail, a content-only tool/result replace per result).  prune: the
 * oversized results the cost rule picks (saved x horizon x read price >
 * invalidated x (write - read price)), each decision logged
 * (compaction/prune-decision).  One deliberate break of the prefix, never a
 * rewrite between compactions (pruning regardless of the rule only when no
 * summary can help).  compaction/end records the chain, the strategies that
 * landed, the cache invalidated and every shadowed seq.
 * Tool `recall` (recall.enabled): the original text of a shadowed message or
 * tool result by the id its checkpoint lists (seq:N) or a tool call id, at
 * most recall.max_chars code points a call.  The summary
 * request is the agent's own last request (its call config, system prompt,
 * tools, messages: the provider's cached prefix) plus one user message with
 * the structured instruction; it goes through llm/stream
 * (api->agent_complete_stream, purpose "compaction").  On a thinking session
 * (reasoning continuations bound to the route) a pressure compaction waits
 * for a turn boundary unless the request would overflow first.
 * The range is committed as a checkpoint user/message replace, then one
 * verbatim copy per pinned message of the range (pinned_patterns,
 * source.pinned), so pinned context follows the checkpoint in order.  Each
 * compaction is bracketed by compaction/start ... compaction/end.  A storm
 * breaker caps the compactions of a turn (max_compactions_per_turn) and
 * stops after one that saved too little (min_savings_ratio), logging
 * compaction/breaker; it resets at the next turn.
 *
 * A cancel of the turn (the call's signal; `weir run` turns SIGTERM into one)
 * is asked for before and between every pass over the history and in its
 * loops: the compaction then ends at once (compaction/end {ok:false}, or no
 * compaction/start when it comes first) and replaces nothing more.
 *
 * The hooks run on each agent's driver thread (agent/compact on the
 * caller's, between turns); the per-agent state is reached through one
 * mutex-guarded table and then used by that agent's thread only.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strdup */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weir/plugin.h>

#include "compaction_policy.h"

/* What the plugin keeps per agent (see the file comment). */
typedef struct agent_state {
    weir_agent *agent; /* identity (borrowed; removed on agent/disposed) */
    char *id;
    cp_meter meter;
    json_int_t breaker_turn; /* the turn the breaker counts for, -1 none */
    int compactions;         /* compaction/start of that turn (manual ones not counted) */
    bool tripped;            /* the breaker stopped compaction for the rest of the turn */
    json_int_t ov_turn, ov_step; /* the step the overflow recoveries count for */
    int ov_count;
    json_t *route;           /* data of the request/context at route_seq (owned), or NULL */
    long long route_seq;
    char *warned_route;  /* "provider/model" already warned about an unknown window */
    json_int_t deferred_turn; /* the turn a thinking deferral was last said for, -1 none */
    bool warned_pinned;  /* "pinned context alone is over the threshold" said */
} agent_state;

typedef struct state {
    weir_plugin *self;
    cp_config cfg;      /* read-only after init */
    pthread_mutex_t mu; /* guards agents, n, rng */
    agent_state **agents;
    size_t n;
    uint64_t rng;
} state;

/* One compaction (one trigger) on one agent. */
typedef struct run {
    state *s;
    agent_state *as;
    weir_agent *agent;
    weir_signal *signal;
    json_int_t turn, step;
    bool forced;              /* overflow: no threshold, keep only the newest unit */
    bool manual;              /* agent/compact: no threshold, one summary, keep the tail */
    const char *instructions; /* manual: extra summarizer instructions, or NULL */
    const char *declined;     /* why OUT_NOT_NEEDED (static text) */
    size_t extra_tokens;      /* input entering with the next step */
    size_t entering;          /* pre-step: user messages entering with it */
    const char *provider;     /* borrowed from `route` */
    const char *model;
    json_t *route;    /* request/context data (owned) */
    long long window; /* context window, -1 unknown */
    size_t threshold; /* tokens; 0 when forced */
    char id[40];
    /* outcome */
    size_t pruned; /* tool results pruned */
    int summaries;
    size_t tokens_before, tokens_after;
    size_t shadowed, saved; /* tokens taken off the surface, and net savings */
    json_t *usage;          /* summed usage of the summary requests, or NULL */
    cp_strategy chain[CP_MAX_STRATEGIES]; /* the strategies, in order */
    size_t nchain;
    cp_cache_prices prices;   /* of the route's model, for the cost rule */
    bool changed;             /* the surface changed: `invalidated` is set */
    size_t invalidated;       /* estimate of the cached nodes from the first changed one on */
    bool rewritten;           /* a checkpoint landed: every node after it is written again */
    char used[64];            /* the strategies that changed the surface, "+"-joined */
    const char *server_kind;  /* the route's model_info "server_compaction", or NULL (borrowed
                                 from server_info; set by resolve_window) */
    json_t *server_info;      /* that model_info (owned), or NULL */
    json_t *shadowed_seqs;    /* every node this compaction shadowed (seqs) */
    char error[512];
} run;

typedef enum outcome {
    OUT_NOT_NEEDED, /* below pressure, no route or nothing compactable: no events */
    OUT_DONE,       /* compaction/end {ok:true} */
    OUT_FAILED      /* compaction/end {ok:false, error} (or it could not be logged) */
} outcome;

static void new_id(state *s, char *out, size_t size) {
    pthread_mutex_lock(&s->mu);
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    pthread_mutex_unlock(&s->mu);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    snprintf(out, size, "cmp-%016llx", (unsigned long long)z);
}

static void set_error(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(run *r, const char *fmt, ...) {
    if (r->error[0])
        return; /* the first cause stands */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
}

/*
 * Whether the call's signal is cancelled (the turn's cancel: `weir run`
 * turns SIGTERM into one).  Every pass over the history (a surface or
 * messages copy, the pruning and pinning loops, a replace) costs
 * O(history), seconds on a long-lived session's log: each asks before it
 * starts (the loops at every node), so a cancel ends the compaction within
 * one such pass, and nothing is replaced after a cancel.
 */
static bool cancelled(const run *r) { return r->signal && weir_signal_cancelled(r->signal); }

/* Whether strategy `k` is in the run's chain. */
static bool in_chain(const run *r, cp_strategy k) {
    for (size_t i = 0; i < r->nchain; i++)
        if (r->chain[i] == k)
            return true;
    return false;
}

/* A strategy changed the surface: note it in r->used (once, in order). */
static void note_used(run *r, cp_strategy k) {
    const char *name = cp_strategy_name(k);
    size_t len = strlen(r->used), n = strlen(name);
    for (const char *p = r->used; (p = strstr(p, name)) != NULL; p += n)
        if ((p == r->used || p[-1] == '+') && (p[n] == '\0' || p[n] == '+'))
            return;
    if (len + n + 2 <= sizeof r->used)
        snprintf(r->used + len, sizeof r->used - len, "%s%s", len ? "+" : "", name);
}

/* The first change of the compaction, at surface index `at`: the cache of
 * everything from there on is invalidated (its estimate, read before the
 * change). */
static void note_change(run *r, const json_t *surface, size_t at) {
    if (r->changed)
        return;
    r->changed = true;
    r->invalidated = cp_range_tokens(surface, at, json_array_size(surface) - 1);
}

/* Add the seqs of `seqs` (an array) or `seq` (>= 0) to r->shadowed_seqs. */
static void note_shadowed(run *r, const json_t *seqs, json_int_t seq) {
    if (!r->shadowed_seqs && !(r->shadowed_seqs = json_array()))
        return;
    if (seqs)
        json_array_extend(r->shadowed_seqs, (json_t *)(uintptr_t)seqs);
    if (seq >= 0)
        json_array_append_new(r->shadowed_seqs, json_integer(seq));
}

/* Append a plugin event (steals `data`); false with r->error set when it cannot. */
static bool append(run *r, const char *type, json_t *data) {
    weir_error err;
    memset(&err, 0, sizeof err);
    int rc = data ? weir_agent_append(r->agent, type, data, &err) : WEIR_E_NOMEM;
    json_decref(data);
    if (rc != WEIR_OK)
        set_error(r, "cannot log %s: %s", type, err.text[0] ? err.text : weir_strerror(rc));
    return rc == WEIR_OK;
}

/*
 * Give `data` the status line weir run, the REPL and serve show
 * (docs/plugins.md, "Status lines"): {kind:"compacting", text, done?}.  On
 * failure `data` is released and set to NULL (append() reports it).
 */
static void with_status(json_t **data, const char *text, bool done) {
    json_t *st = *data ? json_pack("{s:s, s:s}", "kind", "compacting", "text", text) : NULL;
    if (st && done && json_object_set_new(st, "done", json_true()) != 0) {
        json_decref(st);
        st = NULL;
    }
    if (*data && (!st || json_object_set_new(*data, "status", st) != 0)) {
        json_decref(*data);
        *data = NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Per-agent state                                                           */
/* ------------------------------------------------------------------------ */

static void agent_state_free(agent_state *as) {
    if (!as)
        return;
    cp_meter_clear(&as->meter);
    json_decref(as->route);
    free(as->id);
    free(as->warned_route);
    free(as);
}

/* The state of `agent` (created on first use), or NULL (out of memory). */
static agent_state *agent_state_get(state *s, weir_agent *agent) {
    const char *id = weir_agent_id(agent);
    if (!id)
        return NULL;
    agent_state *as = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n && !as; i++) {
        if (strcmp(s->agents[i]->id, id) != 0)
            continue;
        if (s->agents[i]->agent == agent) {
            as = s->agents[i];
        } else { /* the same session opened again: start afresh */
            agent_state_free(s->agents[i]);
            s->agents[i] = s->agents[--s->n];
        }
    }
    if (!as) {
        agent_state **grown = realloc(s->agents, (s->n + 1) * sizeof *grown);
        as = grown ? calloc(1, sizeof *as) : NULL;
        if (grown)
            s->agents = grown;
        if (as && !(as->id = strdup(id))) {
            free(as);
            as = NULL;
        }
        if (as) {
            as->agent = agent;
            cp_meter_init(&as->meter);
            as->breaker_turn = as->ov_turn = as->deferred_turn = -1;
            as->route_seq = -1;
            s->agents[s->n++] = as;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return as;
}

/* New reference to log envelope `seq` (NULL: none): the log's own, read in
 * place (agent_event_ref, ABI 1.7, which lets the log release it at a step's
 * end once dropped; agent_event_peek, ABI 1.5, which holds it to the turn's
 * end), else a copy.  Never modified. */
static json_t *event_ref(weir_agent *agent, size_t seq) {
    if (WEIR_API_HAS(WEIR_PLUGIN_API, agent_event_ref))
        return weir_agent_event_ref(agent, seq);
    if (WEIR_API_HAS(WEIR_PLUGIN_API, agent_event_peek))
        return json_incref((json_t *)(uintptr_t)weir_agent_event_peek(agent, seq));
    return weir_agent_event(agent, seq);
}

/* Feed the meter the envelopes logged since it last looked: O(new events).
 * A meter that no longer fits the log starts again from seq 0. */
/* A fresh meter starts from the surface, not the log's first event: a
 * long session resumed from a checkpoint holds its surface, and reading
 * its whole history back would cost the history.  0, -1 (fold from seq 0
 * instead), -2 out of memory. */
static int meter_seed(run *r) {
    cp_meter *m = &r->as->meter;
    json_t *surface = weir_agent_surface(r->agent);
    if (!surface)
        return -2;
    const json_t *last = json_array_get(surface, json_array_size(surface) - 1);
    json_t *last_ev = NULL;
    if (last && !strcmp(json_string_value(json_object_get(last, "type")), "assistant/message"))
        last_ev = event_ref(r->agent, (size_t)json_integer_value(json_object_get(last, "seq")));
    int rc = cp_meter_seed(m, surface, json_object_get(json_object_get(last_ev, "data"), "usage"),
                           &r->s->cfg);
    json_decref(last_ev);
    json_decref(surface);
    static const char *const kept[] = {"request/context", "request/header"};
    for (size_t i = 0; rc == 0 && m->next_seq > 0 && i < 2; i++) {
        json_t *ev = weir_agent_last_event(r->agent, kept[i]);
        json_int_t seq = json_integer_value(json_object_get(ev, "seq"));
        if (ev && seq >= 0 && (size_t)seq < m->next_seq)
            *(i == 0 ? &m->context_seq : &m->header_seq) = (long long)seq;
        json_decref(ev);
    }
    return rc;
}

static void meter_sync(run *r) {
    cp_meter *m = &r->as->meter;
    for (int pass = 0; pass < 2; pass++) {
        int rc = m->next_seq == 0 && pass == 0 ? meter_seed(r) : 0;
        if (rc == -1) {
            cp_meter_clear(m);
            rc = 0;
        }
        for (; rc == 0;) {
            json_t *ev = event_ref(r->agent, m->next_seq);
            if (!ev)
                break;
            rc = cp_meter_apply(m, ev, &r->s->cfg);
            json_decref(ev);
            if (rc != 0)
                break;
        }
        if (rc == 0)
            return;
        cp_meter_clear(m);
        if (rc == -2)
            break;
    }
    weir_log(r->s->self, WEIR_LOG_WARN, "out of memory measuring the context of %s", r->as->id);
}

/* Measured tokens now: the meter's figure plus the entering input.  O(1). */
static size_t measure(run *r) {
    meter_sync(r);
    return cp_meter_tokens(&r->as->meter) + r->extra_tokens;
}

/* The breaker's counters for r->turn (reset at a new turn). */
static void breaker_turn(run *r) {
    agent_state *as = r->as;
    if (as->breaker_turn != r->turn) {
        as->breaker_turn = r->turn;
        as->compactions = 0;
        as->tripped = false;
    }
}

/* Trip the breaker for the rest of the turn and log compaction/breaker. */
static void breaker_trip(run *r, const char *reason) {
    agent_state *as = r->as;
    as->tripped = true;
    json_t *data = json_pack("{s:I, s:I, s:s, s:i, s:i}", "turn", r->turn, "step", r->step,
                             "reason", reason, "compactions", as->compactions,
                             "max_compactions_per_turn", r->s->cfg.max_compactions_per_turn);
    if (data && !strcmp(reason, "min_savings_ratio")) {
        json_object_set_new(data, "compaction_id", json_string(r->id));
        json_object_set_new(data, "shadowed_tokens", json_integer((json_int_t)r->shadowed));
        json_object_set_new(data, "saved_tokens", json_integer((json_int_t)r->saved));
        json_object_set_new(data, "min_savings_ratio", json_real(r->s->cfg.min_savings_ratio));
    }
    char text[160];
    snprintf(text, sizeof text, "compaction stopped for this turn (%s)", reason);
    with_status(&data, text, true);
    char saved_error[sizeof r->error];
    memcpy(saved_error, r->error, sizeof saved_error);
    r->error[0] = '\0';
    if (!append(r, "compaction/breaker", data))
        weir_log(r->s->self, WEIR_LOG_WARN, "%s", r->error);
    memcpy(r->error, saved_error, sizeof saved_error);
    weir_log(r->s->self, WEIR_LOG_WARN,
             "compaction stopped for the rest of turn %lld (%s, %d compaction%s this turn)",
             (long long)r->turn, reason, as->compactions, as->compactions == 1 ? "" : "s");
}

/* ------------------------------------------------------------------------ */
/* Route and window                                                          */
/* ------------------------------------------------------------------------ */

/* The routed target: the last request/context (read again only when a new
 * one was logged).  False when there is none. */
static bool resolve_route(run *r) {
    agent_state *as = r->as;
    long long seq = as->meter.context_seq;
    if (seq != as->route_seq || !as->route) {
        json_t *ev = seq >= 0 ? event_ref(r->agent, (size_t)seq) : NULL;
        json_decref(as->route);
        as->route = json_incref(json_object_get(ev, "data"));
        as->route_seq = as->route ? seq : -1;
        json_decref(ev);
    }
    r->provider = json_string_value(json_object_get(as->route, "provider"));
    r->model = json_string_value(json_object_get(as->route, "model"));
    if (!r->provider || !r->model)
        return false;
    r->route = json_incref(as->route);
    return true;
}

/* The route's context window (re-resolved at every check, so a provider or
 * model switch is seen at once): the provider's model_info, else
 * request/context.context_window; -1 unknown. */
static long long resolve_window(run *r) {
    json_t *info = weir_agent_model_info(r->agent, r->provider, r->model);
    /* kept for the chain: its "server_compaction" (asked once per check) */
    json_decref(r->server_info);
    r->server_info = json_incref(info);
    r->server_kind = json_string_value(json_object_get(info, "server_compaction"));
    const json_t *cw = json_object_get(info, "context_window");
    if (!json_is_integer(cw))
        cw = json_object_get(r->route, "context_window");
    long long window = json_is_integer(cw) && json_integer_value(cw) > 0
                           ? (long long)json_integer_value(cw)
                           : -1;
    json_decref(info);
    return window;
}

/* Warn once per agent (and route) that pressure compaction is off. */
static void warn_unknown_window(run *r) {
    size_t n = strlen(r->provider) + strlen(r->model) + 2;
    char *route = malloc(n);
    if (!route)
        return;
    snprintf(route, n, "%s/%s", r->provider, r->model);
    if (r->as->warned_route && !strcmp(r->as->warned_route, route)) {
        free(route);
        return;
    }
    weir_log(r->s->self, WEIR_LOG_WARN,
             "no context window known for %s: pressure compaction is off for it (agent %s)",
             route, r->as->id);
    free(r->as->warned_route);
    r->as->warned_route = route;
}

/* Pinned messages alone reach the threshold: say so once per agent. */
static void note_pinned_over(run *r) {
    const cp_meter *m = &r->as->meter;
    if (r->as->warned_pinned)
        return;
    r->as->warned_pinned = true;
    weir_log(r->s->self, WEIR_LOG_WARN,
             "the %zu pinned message%s alone (%zu tokens) reach the compaction threshold (%zu "
             "tokens) of %s/%s: pressure compaction cannot help and stays off while they do",
             m->pinned_count, m->pinned_count == 1 ? "" : "s", m->pinned_tokens, r->threshold,
             r->provider, r->model);
    if (!append(r, "compaction/pinned-over-threshold",
                json_pack("{s:I, s:I, s:I, s:I, s:I}", "turn", r->turn, "step", r->step,
                          "pinned_messages", (json_int_t)m->pinned_count, "pinned_tokens",
                          (json_int_t)m->pinned_tokens, "threshold", (json_int_t)r->threshold)))
        weir_log(r->s->self, WEIR_LOG_WARN, "%s", r->error);
    r->error[0] = '\0';
}

static size_t keep_tokens(const run *r) {
    if (r->forced)
        return 0;
    if (r->s->cfg.keep_recent_tokens >= 0)
        return (size_t)r->s->cfg.keep_recent_tokens;
    if (r->window <= 0)
        return 0; /* manual, window unknown: keep only the newest unit */
    return (size_t)((double)r->window * r->s->cfg.keep_recent_ratio);
}

/* ------------------------------------------------------------------------ */
/* Thinking sessions: compact at a turn boundary                             */
/* ------------------------------------------------------------------------ */

/* Whether the history holds a reasoning continuation bound to the route:
 * an assistant block with a `continuation` whose provider and model are the
 * route's (what the last request sent back; docs/providers.md).  O(history):
 * asked only once the threshold is reached. */
static bool thinking_session(run *r) {
    json_t *msgs = weir_agent_messages(r->agent);
    bool found = false;
    size_t i, j;
    const json_t *m, *block;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (found || !role || strcmp(role, "assistant") != 0)
            continue;
        json_array_foreach(json_object_get(m, "content"), j, block) {
            const json_t *c = json_object_get(block, "continuation");
            const char *p = json_string_value(json_object_get(c, "provider"));
            const char *md = json_string_value(json_object_get(c, "model"));
            if (p && md && !strcmp(p, r->provider) && !strcmp(md, r->model)) {
                found = true;
                break;
            }
        }
    }
    json_decref(msgs);
    return found;
}

/* Whether this pre-step is a turn boundary: the first step of a turn, user
 * messages entering, and no tool loop open (the newest node is neither a
 * tool result nor an assistant message that calls tools). */
static bool turn_boundary(run *r) {
    if (r->step != 1 || r->entering == 0)
        return false;
    long long tail = r->as->meter.tail;
    json_t *ev = tail >= 0 ? event_ref(r->agent, (size_t)tail) : NULL;
    const char *type = json_string_value(json_object_get(ev, "type"));
    bool open = type && !strcmp(type, "tool/result");
    size_t i;
    const json_t *block;
    json_array_foreach(json_object_get(json_object_get(json_object_get(ev, "data"), "message"),
                                       "content"),
                       i, block) {
        const char *bt = json_string_value(json_object_get(block, "type"));
        open = open || (bt && !strcmp(bt, "tool_call"));
    }
    json_decref(ev);
    return !open;
}

/* Whether the coming request would overflow the window: the measured tokens
 * plus the output the last request asked for (max_tokens) reach it. */
static bool would_overflow(run *r) {
    long long reserve = 0;
    json_t *hdr = r->as->meter.header_seq >= 0
                      ? event_ref(r->agent, (size_t)r->as->meter.header_seq)
                      : NULL;
    const json_t *mt = json_object_get(
        json_object_get(json_object_get(json_object_get(hdr, "data"), "header"), "config"),
        "max_tokens");
    if (json_is_integer(mt) && json_integer_value(mt) > 0)
        reserve = (long long)json_integer_value(mt);
    json_decref(hdr);
    return (long long)r->tokens_before + reserve >= r->window;
}

/*
 * A pressure compaction on a thinking session waits for a turn boundary.
 * After a compaction the core drops the continuations bound to the old
 * prefix (docs/providers.md); a provider needs the reasoning of the turn in
 * progress when its tool loop goes on (Anthropic: thinking blocks of the
 * current assistant turn are passed back with its tool results,
 * platform.claude.com/docs/en/build-with-claude/extended-thinking,
 * "Preserving thinking blocks"; a client-written summary breaks the prefix
 * check of the turns kept after it,
 * platform.claude.com/docs/en/build-with-claude/compaction-thinking-blocks;
 * DeepSeek: reasoning_content of the current turn's tool calls must be sent
 * back, api-docs.deepseek.com/guides/thinking_mode; Gemini: the current
 * turn's thought signatures, ai.google.dev/gemini-api/docs/thought-signatures).
 * At the first step of a turn, with no tool loop open, the kept tail holds
 * only finished turns, whose reasoning the providers let go of.  When the
 * request would overflow first, it compacts anyway (and an overflow error
 * still compacts: the forced trigger does not wait).  True: wait.
 */
static bool defer_for_thinking(run *r) {
    if (turn_boundary(r) || !thinking_session(r))
        return false;
    if (would_overflow(r)) {
        weir_log(r->s->self, WEIR_LOG_INFO,
                 "compacting %s in the middle of turn %lld (step %lld): the context would "
                 "overflow before the turn ends; the reasoning of its open tool loop is dropped",
                 r->as->id, (long long)r->turn, (long long)r->step);
        return false;
    }
    if (r->as->deferred_turn != r->turn) {
        r->as->deferred_turn = r->turn;
        weir_log(r->s->self, WEIR_LOG_INFO,
                 "%s/%s keeps reasoning across the tool loop: compaction of %s waits for the "
                 "next turn (%zu tokens, threshold %zu)",
                 r->provider, r->model, r->as->id, r->tokens_before, r->threshold);
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Pruning                                                                   */
/* ------------------------------------------------------------------------ */

/* Whether node `i` of `surface` is a pinned user message. */
static bool node_pinned(const run *r, const json_t *surface, size_t i) {
    const json_t *node = json_array_get(surface, i);
    const char *type = json_string_value(json_object_get(node, "type"));
    return type && !strcmp(type, "user/message") &&
           cp_message_pinned(&r->s->cfg, json_object_get(node, "message"));
}

/* A summary range of `surface` with at least one node that is not pinned. */
static bool summary_range(const run *r, const json_t *surface, size_t *a, size_t *b) {
    if (!cp_select_range(surface, keep_tokens(r), a, b))
        return false;
    for (size_t i = *a; i <= *b; i++)
        if (!node_pinned(r, surface, i))
            return true;
    return false;
}

/* Whether anything could be pruned or summarized. */
static bool compactable(run *r, const json_t *surface) {
    size_t a, b, i;
    if ((in_chain(r, CP_STRATEGY_SUMMARY) || in_chain(r, CP_STRATEGY_SERVER)) &&
        summary_range(r, surface, &a, &b))
        return true;
    if (!in_chain(r, CP_STRATEGY_PRUNE))
        return false;
    const json_t *node;
    json_array_foreach(surface, i, node) {
        const char *type = json_string_value(json_object_get(node, "type"));
        size_t chars = 0;
        bool oom = false;
        if (cancelled(r))
            return false; /* compact() says why */
        if (!type || strcmp(type, "tool/result") != 0)
            continue;
        json_t *p = cp_prune_message(json_object_get(node, "message"), &r->s->cfg, &chars, &oom);
        json_decref(p);
        if (p || oom)
            return true; /* out of memory: let the compaction report it */
    }
    return false;
}

/* One oversized tool result of a prune pass. */
typedef struct candidate {
    size_t at;      /* surface index */
    json_t *pruned; /* its pruned message (owned) */
    size_t chars;   /* code points pruned */
    size_t before, after; /* tokens of the message and of its pruned copy */
} candidate;

/* Log compaction/prune-decision for candidate `c` (false with r->error set). */
static bool log_decision(run *r, const json_t *surface, const candidate *c, size_t invalidated,
                         double gain, double cost, bool prune, const char *rule) {
    json_t *data = json_pack(
        "{s:s, s:O, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:s, s:s}", "compaction_id", r->id, "seq",
        json_object_get(json_array_get(surface, c->at), "seq"), "saved_tokens",
        (json_int_t)(c->before > c->after ? c->before - c->after : 0), "invalidated_tokens",
        (json_int_t)invalidated, "horizon", (json_int_t)r->s->cfg.horizon_steps,
        "cache_read_price", r->prices.read, "cache_write_price", r->prices.write, "gain", gain,
        "cost", cost, "rule", rule, "decision", prune ? "prune" : "keep");
    return append(r, "compaction/prune-decision", data);
}

/*
 * Prune the oversized tool results of `surface` that the cost rule picks
 * (docs/compaction.md, "The cost rule").  Pruning the result at position p
 * makes the provider write every node after p again, so only the first
 * pruned result pays for the invalidation: each candidate is priced as the
 * first cut (the savings of it and of every candidate after it, against the
 * nodes after it), and the cut with the largest positive net is taken
 * (nothing when none is positive).  After a checkpoint landed in this
 * compaction nothing after it is cached any more (invalidated 0).  `ruled`
 * false prunes every candidate (no summary can help, or the request does not
 * fit as it is).  Each candidate's decision is logged before any prune.
 */
static bool prune_pass(run *r, const json_t *surface, bool ruled) {
    size_t n = json_array_size(surface), k = 0, i;
    candidate *c = n ? calloc(n, sizeof *c) : NULL;
    size_t *after = calloc(n + 1, sizeof *after); /* after[i]: tokens of nodes i.. */
    bool ok = n == 0 || (c && after);
    if (!ok)
        set_error(r, "out of memory pruning a tool result");
    for (i = n; ok && i-- > 0;)
        after[i] = after[i + 1] + cp_message_tokens(json_object_get(json_array_get(surface, i),
                                                                     "message"));
    const json_t *node;
    json_array_foreach(surface, i, node) {
        if (!ok)
            break;
        const char *type = json_string_value(json_object_get(node, "type"));
        if (cancelled(r)) {
            set_error(r, "cancelled");
            ok = false;
            break;
        }
        if (!type || strcmp(type, "tool/result") != 0)
            continue;
        const json_t *msg = json_object_get(node, "message");
        bool oom = false;
        candidate *cd = &c[k];
        cd->pruned = cp_prune_message(msg, &r->s->cfg, &cd->chars, &oom);
        if (!cd->pruned) {
            if (oom) {
                set_error(r, "out of memory pruning a tool result");
                ok = false;
            }
            continue;
        }
        cd->at = i;
        cd->before = cp_message_tokens(msg);
        cd->after = cp_message_tokens(cd->pruned);
        k++;
    }
    /* the cut: the first candidate pruned (k: none) */
    size_t cut = ruled ? k : 0;
    double best = 0, *gain = ok && k ? calloc(k, sizeof *gain) : NULL,
           *cost = ok && k ? calloc(k, sizeof *cost) : NULL;
    if (ok && k && (!gain || !cost)) {
        set_error(r, "out of memory pruning a tool result");
        ok = false;
    }
    size_t saved_from = 0;
    for (size_t j = k; ok && j-- > 0;) {
        saved_from += c[j].before > c[j].after ? c[j].before - c[j].after : 0;
        size_t inv = r->rewritten ? 0 : after[c[j].at + 1];
        bool worth = cp_prune_worth_it(saved_from, inv, r->s->cfg.horizon_steps, r->prices,
                                       &gain[j], &cost[j]);
        if (ruled && worth && gain[j] - cost[j] >= best) {
            best = gain[j] - cost[j];
            cut = j;
        }
    }
    const char *rule = ruled ? "cost" : r->forced ? "overflow" : "no-summary";
    for (size_t j = 0; ok && j < k; j++)
        ok = log_decision(r, surface, &c[j], r->rewritten ? 0 : after[c[j].at + 1], gain[j],
                          cost[j], j >= cut, rule);
    for (size_t j = cut; ok && j < k; j++) {
        if (cancelled(r)) {
            set_error(r, "cancelled");
            ok = false;
            break;
        }
        node = json_array_get(surface, c[j].at);
        json_int_t seq = json_integer_value(json_object_get(node, "seq"));
        json_t *ev = event_ref(r->agent, (size_t)seq);
        json_t *data = json_deep_copy(json_object_get(ev, "data"));
        json_decref(ev);
        if (!data || json_object_set(data, "message", c[j].pruned) != 0) {
            json_decref(data);
            set_error(r, "out of memory pruning a tool result");
            ok = false;
            break;
        }
        if (!append(r, "compaction/prune",
                    json_pack("{s:s, s:I, s:[I], s:I, s:I, s:I}", "compaction_id", r->id, "seq",
                              seq, "shadowed_seqs", seq, "pruned_chars", (json_int_t)c[j].chars,
                              "shadowed_tokens", (json_int_t)c[j].before, "tokens_after",
                              (json_int_t)c[j].after))) {
            json_decref(data);
            ok = false;
            break;
        }
        note_change(r, surface, c[j].at);
        weir_error err;
        memset(&err, 0, sizeof err);
        int rc = weir_agent_surface_replace(r->agent, "tool/result", data, (size_t)seq, (size_t)seq,
                                            NULL, NULL, &err);
        json_decref(data);
        if (rc != WEIR_OK) {
            set_error(r, "pruning the tool result at seq %lld was rejected: %s", (long long)seq,
                      err.text[0] ? err.text : weir_strerror(rc));
            ok = false;
            break;
        }
        note_used(r, CP_STRATEGY_PRUNE);
        note_shadowed(r, NULL, seq);
        r->pruned++;
        r->shadowed += c[j].before;
        r->saved += c[j].before > c[j].after ? c[j].before - c[j].after : 0;
    }
    for (size_t j = 0; c && j < k; j++)
        json_decref(c[j].pruned);
    free(c);
    free(after);
    free(gain);
    free(cost);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Summaries                                                                 */
/* ------------------------------------------------------------------------ */

/* The text blocks of a summarizer reply joined; NULL when empty or OOM. */
static char *reply_text(const json_t *message) {
    char *text = cp_message_text(message);
    if (text && !*text) {
        free(text);
        return NULL;
    }
    return text;
}

/* Add the counts of `usage` into r->usage. */
static void add_usage(run *r, const json_t *usage) {
    static const char *const keys[] = {"input_tokens", "output_tokens", "cache_read_tokens",
                                       "cache_write_tokens", "reasoning_tokens"};
    if (!json_is_object(usage))
        return;
    if (!r->usage && !(r->usage = json_object()))
        return;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const json_t *v = json_object_get(usage, keys[i]);
        if (!json_is_integer(v))
            continue;
        json_int_t had = json_integer_value(json_object_get(r->usage, keys[i]));
        json_object_set_new(r->usage, keys[i], json_integer(had + json_integer_value(v)));
    }
}

/* One summary's plan: the range, its pinned nodes and runs, the replay. */
typedef struct plan {
    size_t a, b;      /* surface indexes of the range */
    size_t k;         /* pinned nodes in it */
    size_t *starts;   /* k + 1 run starts, relative to a */
    bool *pinned;     /* b - a + 1 flags */
    size_t upto;      /* derived messages up to and including node b */
    json_t *messages; /* the derive (new) */
    json_t *header;   /* the last request/header envelope (new) */
} plan;

static void plan_clear(plan *p) {
    free(p->starts);
    free(p->pinned);
    json_decref(p->messages);
    json_decref(p->header);
    memset(p, 0, sizeof *p);
}

/* Fill `p` for the range [a, b] of `surface`.  False with r->error set. */
static bool plan_make(run *r, const json_t *surface, size_t a, size_t b, plan *p) {
    memset(p, 0, sizeof *p);
    p->a = a;
    p->b = b;
    size_t n = b - a + 1;
    p->pinned = calloc(n, sizeof *p->pinned);
    p->starts = calloc(n, sizeof *p->starts);
    if (!p->pinned || !p->starts) {
        set_error(r, "out of memory planning a summary");
        return false;
    }
    for (size_t i = 0; i < n; i++)
        p->pinned[i] = node_pinned(r, surface, a + i);
    if (!cp_pinned_runs(p->pinned, n, p->starts, &p->k)) {
        set_error(r, "nothing compactable: every message of the range is pinned");
        return false;
    }
    /* every cut between runs must split no tool call from its result (a crash
     * between the replaces leaves a valid history); otherwise the summary
     * stops before the first pinned message */
    for (size_t i = 1; i <= p->k; i++) {
        if (cp_balanced(surface, a, a + p->starts[i]))
            continue;
        size_t first = 0;
        while (!p->pinned[first])
            first++;
        if (first == 0 || !cp_balanced(surface, a, a + first)) {
            set_error(r, "nothing compactable around the pinned messages");
            return false;
        }
        p->b = b = a + first - 1;
        p->k = 0;
        break;
    }
    p->messages = weir_agent_messages(r->agent);
    json_t *hdr = r->as->meter.header_seq >= 0
                      ? event_ref(r->agent, (size_t)r->as->meter.header_seq)
                      : NULL;
    p->header = hdr;
    if (!p->messages || !json_is_object(json_object_get(
                            json_object_get(json_object_get(hdr, "data"), "header"), "config"))) {
        set_error(r, p->messages ? "no request/header to replay" : "out of memory");
        return false;
    }
    size_t count = 0, i;
    const json_t *node;
    json_array_foreach(surface, i, node) {
        if (!json_is_null(json_object_get(node, "message")))
            count++;
        if (i == b)
            p->upto = count;
    }
    if (count != json_array_size(p->messages)) {
        set_error(r, "the surface (%zu messages) and the derived history (%zu) disagree", count,
                  json_array_size(p->messages));
        return false;
    }
    return true;
}

/* New reference: the summary request.  `full`: replay the whole derived
 * request; otherwise its messages up to the end of the range.
 *
 * When the summarizer is the agent's own model, the request is the agent's
 * last one (request/header: the call config, its options and thinking
 * settings, max_tokens, the tools) byte for byte, plus one final user
 * message: a provider serves the prefix from its prompt cache only when
 * nothing before the new tail changed.  So no tool_choice is added (on
 * Anthropic a changed tool_choice invalidates the cached messages:
 * platform.claude.com/docs/en/build-with-claude/prompt-caching, "What
 * invalidates the cache"; the instruction asks for text only and tool calls
 * in the answer are dropped), and max_tokens stays the agent's unless
 * summary.max_tokens is set (a thinking budget must stay below max_tokens:
 * platform.claude.com/docs/en/build-with-claude/extended-thinking, "Max
 * tokens and context window size"; provider-openai maps it to
 * max_completion_tokens on reasoning models). */
static json_t *summary_request(run *r, const plan *p, bool full, bool server) {
    const cp_config *cfg = &r->s->cfg;
    const json_t *header = json_object_get(json_object_get(p->header, "data"), "header");
    const json_t *config = json_object_get(header, "config");
    const json_t *tools = json_object_get(header, "tools");
    /* a server compaction is the route's own: the summarizer settings do not apply */
    const char *provider = cfg->summary_provider && !server ? cfg->summary_provider : r->provider;
    const char *model = cfg->summary_model && !server ? cfg->summary_model : r->model;
    const char *cp = json_string_value(json_object_get(config, "provider"));
    const char *cm = json_string_value(json_object_get(config, "model"));
    bool own = cp && cm && !strcmp(cp, provider) && !strcmp(cm, model);
    /* another summarizer model: only the route and the output cap */
    json_t *req = own ? json_copy((json_t *)(uintptr_t)config)
                      : json_pack("{s:s, s:s}", "provider", provider, "model", model);
    const json_t *agent_max = json_object_get(config, "max_tokens");
    json_t *max_tokens = cfg->summary_max_tokens > 0 ? json_integer(cfg->summary_max_tokens)
                         : !own && json_is_integer(agent_max)
                             ? json_incref((json_t *)(uintptr_t)agent_max)
                             : NULL;
    size_t total = json_array_size(p->messages);
    size_t upto = full ? total : p->upto;
    char *instruction =
        server ? NULL : cp_instruction(cfg, full ? total - p->upto : 0, r->instructions);
    json_t *messages = json_array();
    for (size_t i = 0; messages && i < upto; i++)
        if (json_array_append(messages, json_array_get(p->messages, i)) != 0) {
            json_decref(messages);
            messages = NULL;
        }
    json_t *ask = instruction ? json_pack("{s:s, s:[{s:s, s:s}]}", "role", "user", "content",
                                          "type", "text", "text", instruction)
                              : NULL;
    free(instruction);
    /* json_array_append_new and json_object_set_new take their value, even on
     * failure: each pointer is cleared once handed over */
    bool ok = req && messages && (ask || server) && (cfg->summary_max_tokens <= 0 || max_tokens);
    if (ok && ask) {
        ok = json_array_append_new(messages, ask) == 0;
        ask = NULL;
    }
    /* the provider compacts instead of answering (docs/providers.md, "Server
     * compaction") */
    if (ok && server)
        ok = json_object_set_new(req, "compaction", json_string("server")) == 0;
    if (ok) {
        ok = json_object_set_new(req, "messages", messages) == 0;
        messages = NULL;
    }
    if (ok && max_tokens) {
        ok = json_object_set_new(req, "max_tokens", max_tokens) == 0;
        max_tokens = NULL;
    }
    if (ok && json_array_size(tools) > 0)
        ok = json_object_set(req, "tools", (json_t *)(uintptr_t)tools) == 0;
    json_decref(ask);
    json_decref(messages);
    json_decref(max_tokens);
    if (!ok) {
        json_decref(req);
        return NULL;
    }
    return req;
}

/* The summarizer's call: the full replay first (pressure, manual), then,
 * after a context overflow, only the range's prefix (what overflow recovery
 * sends at once).  New *result or false with r->error set. */
static bool call_summarizer(run *r, const plan *p, bool server, json_t **result,
                            json_t **req_out, const char **replay) {
    /* a server compaction sends the range only: the provider compacts all it
     * is given, and the kept tail follows its items */
    bool full = !server && !r->forced && p->upto < json_array_size(p->messages);
    json_t *ctx = json_pack("{s:I, s:I, s:s}", "turn", r->turn, "step", r->step, "purpose",
                            "compaction");
    for (;;) {
        json_t *req = ctx ? summary_request(r, p, full, server) : NULL;
        weir_error err;
        memset(&err, 0, sizeof err);
        int rc = req ? weir_agent_complete_stream(r->agent, req, ctx, r->signal, result, &err)
                     : WEIR_E_NOMEM;
        if (rc == WEIR_OK) {
            *req_out = req;
            *replay = full ? "full" : "prefix";
            json_decref(ctx);
            return true;
        }
        json_decref(req);
        if (rc == WEIR_E_PROVIDER && full &&
            !strncmp(err.text, "CONTEXT_WINDOW_EXCEEDED", 23)) {
            full = false; /* the whole request no longer fits: summarize the range only */
            continue;
        }
        set_error(r, "the %s failed: %s", server ? "server compaction" : "summarizer",
                  err.text[0] ? err.text : weir_strerror(rc));
        json_decref(ctx);
        return false;
    }
}

/* Replace surface nodes [from, to] (indexes) with `type` `data` citing
 * `first` (a seq, or -1) and the replaced nodes.  False with r->error set. */
static bool replace_run(run *r, const json_t *surface, size_t from, size_t to, json_int_t first,
                        const json_t *data, const char *what) {
    json_t *sources = json_array();
    if (sources && first >= 0 && json_array_append_new(sources, json_integer(first)) != 0) {
        json_decref(sources);
        sources = NULL;
    }
    for (size_t i = from; sources && i <= to; i++) {
        const json_t *seq = json_object_get(json_array_get(surface, i), "seq");
        if (json_integer_value(seq) == first)
            continue;
        if (json_array_append(sources, (json_t *)(uintptr_t)seq) != 0) {
            json_decref(sources);
            sources = NULL;
        }
    }
    if (!sources || !data) {
        json_decref(sources);
        set_error(r, "out of memory committing the summary");
        return false;
    }
    json_int_t a = json_integer_value(json_object_get(json_array_get(surface, from), "seq"));
    json_int_t b = json_integer_value(json_object_get(json_array_get(surface, to), "seq"));
    weir_error err;
    memset(&err, 0, sizeof err);
    int rc = weir_agent_surface_replace(r->agent, "user/message", data, (size_t)a, (size_t)b,
                                        sources, NULL, &err);
    json_decref(sources);
    if (rc != WEIR_OK) {
        set_error(r, "%s was rejected: %s", what, err.text[0] ? err.text : weir_strerror(rc));
        return false;
    }
    return true;
}

/* The continuation of the reply's block that holds a server compaction
 * (its data's "compaction"), borrowed from `result`, or NULL. */
static const json_t *server_compaction_of(const json_t *result) {
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(json_object_get(result, "message"), "content"), i, b) {
        const json_t *c = json_object_get(b, "continuation");
        if (json_is_string(json_object_get(json_object_get(c, "data"), "compaction")))
            return c;
    }
    return NULL;
}

/* The checkpoint text of a server compaction (the provider's items are
 * opaque: the model learns from this what they replaced and how to recall
 * it). */
static const char server_note[] =
    "The provider compacted the earlier turns of this conversation on its server: its "
    "compaction item, just before this message, stands for them.";

/* One summary of the range [a, b] (`server`: the provider's compaction of
 * it).  true when its checkpoint landed. */
static bool summarize(run *r, const json_t *surface, size_t a, size_t b, bool server) {
    if (r->signal && weir_signal_cancelled(r->signal)) {
        set_error(r, "cancelled");
        return false;
    }
    plan p;
    if (!plan_make(r, surface, a, b, &p)) {
        plan_clear(&p);
        return false;
    }
    a = p.a;
    b = p.b;
    if (cancelled(r)) { /* plan_make copied the history: no summary call after a cancel */
        set_error(r, "cancelled");
        plan_clear(&p);
        return false;
    }
    uint64_t version = r->as->meter.surface_version;
    json_t *result = NULL, *req = NULL;
    const char *replay = NULL;
    if (!call_summarizer(r, &p, server, &result, &req, &replay)) {
        plan_clear(&p);
        return false;
    }
    add_usage(r, json_object_get(result, "usage"));
    /* a surface change during the call (a listener of llm/stream, say) makes
     * the plan stale: nothing is replaced */
    meter_sync(r);
    const json_t *sc = server ? server_compaction_of(result) : NULL;
    char *reply = server ? NULL : reply_text(json_object_get(result, "message"));
    char *summary = server ? (sc ? strdup(server_note) : NULL)
                           : reply ? cp_clean_summary(reply)
                                   : NULL;
    free(reply);
    const char **pinned = calloc(p.k + 1, sizeof *pinned);
    char **texts = calloc(p.k + 1, sizeof *texts);
    size_t shadowed = 0, np = 0;
    json_t *shadowed_seqs = json_array(), *pinned_seqs = json_array();
    bool oom = !pinned || !texts || !shadowed_seqs || !pinned_seqs;
    for (size_t i = a; !oom && i <= b; i++) {
        const json_t *node = json_array_get(surface, i);
        if (p.pinned[i - a] && p.k) {
            texts[np] = cp_message_text(json_object_get(node, "message"));
            pinned[np] = texts[np];
            oom = !texts[np++] ||
                  json_array_append(pinned_seqs, json_object_get(node, "seq")) != 0;
        } else {
            shadowed += cp_message_tokens(json_object_get(node, "message"));
            oom = json_array_append(shadowed_seqs, json_object_get(node, "seq")) != 0;
        }
    }
    char *text = summary && *summary && !oom ? cp_checkpoint_text(summary, pinned, np) : NULL;
    /* the ids the recall tool takes, listed after the summary block (the
     * checkpoint message only: compaction/summary.summary stays the block) */
    char *framed = NULL;
    if (text && r->s->cfg.recall_enabled) {
        char *ids = cp_recall_index(surface, a, b, p.pinned);
        size_t tl = strlen(text), il = ids ? strlen(ids) : 0;
        framed = ids ? malloc(tl + il + 3) : NULL;
        if (framed)
            snprintf(framed, tl + il + 3, "%s%s%s", text, il ? "\n\n" : "", ids);
        oom = !framed;
        free(ids);
    }
    json_t *checkpoint =
        text && !oom ? cp_checkpoint_message(framed ? framed : text, r->id) : NULL;
    free(framed);
    size_t summary_tokens = checkpoint ? cp_message_tokens(checkpoint) : 0;
    /* the provider's items ride on the checkpoint's text block, sent back
     * verbatim in its place; their text counts at 4 characters a token */
    if (checkpoint && sc &&
        json_object_set(json_array_get(json_object_get(checkpoint, "content"), 0),
                        "continuation", (json_t *)(uintptr_t)sc) != 0) {
        json_decref(checkpoint);
        checkpoint = NULL;
    }
    if (checkpoint && sc)
        summary_tokens += json_string_length(
                              json_object_get(json_object_get(sc, "data"), "compaction")) /
                          4;
    bool ok = false;
    if (cancelled(r))
        set_error(r, "cancelled"); /* the summary came back after a cancel: no replace */
    else if (r->as->meter.surface_version != version)
        set_error(r, "the surface changed while the summary was made (the measured nodes no "
                     "longer match): nothing was replaced");
    else if (server && !sc)
        set_error(r, "the provider returned no compaction (no block carries one)");
    else if (summary && !*summary)
        set_error(r, "the summarizer returned no text");
    else if (!checkpoint)
        set_error(r, summary ? "out of memory framing the summary"
                             : "the summarizer returned no text");
    else if (summary_tokens >= shadowed)
        set_error(r, "the summary (%zu tokens) does not shrink the %zu tokens it replaces",
                  summary_tokens, shadowed);
    else
        ok = true;
    json_int_t start_seq = json_integer_value(json_object_get(json_array_get(surface, a), "seq"));
    json_int_t end_seq = json_integer_value(json_object_get(json_array_get(surface, b), "seq"));
    json_t *ev = ok ? json_pack("{s:s, s:I, s:I, s:{s:I, s:I}, s:O, s:I, s:I, s:s, s:s, s:s, s:s}",
                                "compaction_id", r->id, "turn", r->turn, "step", r->step,
                                "shadowed_range", "start", start_seq, "end", end_seq,
                                "shadowed_seqs", shadowed_seqs, "shadowed_tokens",
                                (json_int_t)shadowed, "summary_tokens", (json_int_t)summary_tokens,
                                "provider", json_string_value(json_object_get(req, "provider")),
                                "model", json_string_value(json_object_get(req, "model")),
                                "replay", replay, "summary", text)
                    : NULL;
    if (ev && np)
        json_object_set(ev, "pinned_seqs", pinned_seqs);
    if (ev && server)
        json_object_set_new(ev, "strategy", json_string("server"));
    const json_t *usage = json_object_get(result, "usage");
    if (ev && json_is_object(usage))
        json_object_set(ev, "usage", (json_t *)(uintptr_t)usage);
    json_decref(result);
    json_decref(req);
    if (ok)
        ok = append(r, "compaction/summary", ev);
    json_t *last = ok ? weir_agent_last_event(r->agent, "compaction/summary") : NULL;
    json_int_t summary_seq = json_integer_value(json_object_get(last, "seq"));
    json_decref(last);
    /* the checkpoint over run 0, then each pinned message over its run */
    size_t run0_end = p.k ? a + p.starts[1] - 1 : b;
    json_t *data = ok ? json_pack("{s:I, s:I, s:O}", "turn", r->turn, "step", r->step, "message",
                                  checkpoint)
                      : NULL;
    if (ok && (!last || !data)) {
        set_error(r, "out of memory committing the summary");
        ok = false;
    }
    if (ok)
        note_change(r, surface, a);
    if (ok)
        ok = replace_run(r, surface, a, run0_end, summary_seq, data, "the summary replace");
    json_decref(data);
    if (ok) {
        r->rewritten = true;
        note_used(r, server ? CP_STRATEGY_SERVER : CP_STRATEGY_SUMMARY);
        note_shadowed(r, shadowed_seqs, -1);
        r->summaries++;
        r->shadowed += shadowed;
        r->saved += shadowed - summary_tokens;
    }
    size_t nth = 0;
    for (size_t i = 0; ok && i < b - a + 1; i++) {
        if (!p.pinned[i])
            continue;
        if (cancelled(r)) { /* the checkpoint landed: each copy is a valid stop */
            set_error(r, "cancelled");
            ok = false;
            break;
        }
        nth++;
        const json_t *node = json_array_get(surface, a + i);
        size_t from = a + p.starts[nth], to = nth < p.k ? a + p.starts[nth + 1] - 1 : b;
        json_t *copy =
            json_pack("{s:I, s:I, s:O, s:s, s:O}", "turn", r->turn, "step", r->step, "message",
                      json_object_get(node, "message"), "compaction_id", r->id, "pinned_from",
                      json_object_get(node, "seq"));
        ok = replace_run(r, surface, from, to, json_integer_value(json_object_get(node, "seq")),
                         copy, "a pinned message's copy");
        json_decref(copy);
    }
    for (size_t i = 0; texts && i < np; i++)
        free(texts[i]);
    free(texts);
    free(pinned);
    free(text);
    free(summary);
    json_decref(checkpoint);
    json_decref(shadowed_seqs);
    json_decref(pinned_seqs);
    plan_clear(&p);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* One compaction                                                            */
/* ------------------------------------------------------------------------ */

/* agent/pre-compact (through api->hook_invoke): false when a listener
 * blocked the compaction, or the hook failed (nothing is compacted then). */
static bool pre_compact(run *r, const char *trigger) {
    if (!WEIR_API_HAS(WEIR_PLUGIN_API, hook_invoke))
        return true;
    json_t *args = json_pack("{s:I, s:I, s:s, s:s}", "turn", r->turn, "step", r->step,
                             "trigger", r->manual ? "manual" : "auto", "cause", trigger);
    if (args && r->instructions)
        json_object_set_new(args, "instructions", json_string(r->instructions));
    json_t *dflt = json_pack("{s:s}", "kind", "proceed");
    json_t *res = NULL;
    weir_error e = {0};
    int rc = args && dflt ? weir_hook_invoke(r->agent, "agent/pre-compact", args, dflt, &res, &e)
                          : WEIR_E_NOMEM;
    json_decref(args);
    json_decref(dflt);
    const char *kind = json_string_value(json_object_get(res, "kind"));
    bool go = rc == WEIR_OK && kind && strcmp(kind, "proceed") == 0;
    if (rc != WEIR_OK)
        weir_log(r->s->self, WEIR_LOG_WARN, "agent/pre-compact failed: %s; not compacting",
                 e.text[0] ? e.text : weir_strerror(rc));
    else if (!go)
        weir_log(r->s->self, WEIR_LOG_INFO, "%s compaction blocked by agent/pre-compact: %s",
                 trigger, json_string_value(json_object_get(res, "reason"))
                              ? json_string_value(json_object_get(res, "reason"))
                              : "no reason given");
    r->declined = go ? r->declined : "blocked by agent/pre-compact";
    json_decref(res);
    return go;
}

/* The whole compaction of one trigger (see the file comment). */
static outcome compact(run *r) {
    const cp_config *cfg = &r->s->cfg;
    const char *trigger = r->forced ? "overflow" : r->manual ? "manual" : "pressure";
    bool pressure = !r->forced && !r->manual;
    meter_sync(r);
    if (!resolve_route(r)) {
        r->declined = "nothing was sent to a model yet";
        return OUT_NOT_NEEDED; /* no durable route yet: nothing was ever sent */
    }
    r->window = resolve_window(r);
    /* the default chain gets "server" once a compaction is sure to run */
    if (cfg->strategies_set) {
        memcpy(r->chain, cfg->strategies, sizeof r->chain);
        r->nchain = cfg->nstrategies;
    } else {
        r->nchain = cp_default_strategies(NULL, r->chain);
    }
    r->prices = cp_prices_for(cfg, r->model);
    if (cancelled(r)) {
        r->declined = "cancelled";
        return OUT_NOT_NEEDED; /* cancellation reached the capacity resolution: it wins */
    }
    if (pressure) {
        if (r->window <= 0) {
            warn_unknown_window(r);
            return OUT_NOT_NEEDED;
        }
        r->threshold = (size_t)((double)r->window * cfg->threshold_ratio);
    }
    r->tokens_before = measure(r);
    if (pressure && r->tokens_before < r->threshold)
        return OUT_NOT_NEEDED; /* below pressure: never prune (the O(1) path) */
    if (pressure && r->as->meter.pinned_tokens >= r->threshold) {
        note_pinned_over(r);
        r->declined = "the pinned messages alone reach the threshold";
        return OUT_NOT_NEEDED;
    }
    if (pressure && defer_for_thinking(r)) {
        r->declined = "a thinking session compacts at the next turn boundary";
        return OUT_NOT_NEEDED;
    }
    /* from here on each piece passes over the whole history: a cancel
     * before, between or in them ends the compaction (see cancelled()) */
    if (cancelled(r)) {
        r->declined = "cancelled";
        return OUT_NOT_NEEDED;
    }
    if (!r->manual) {
        breaker_turn(r);
        if (r->as->tripped) {
            r->declined = "the storm breaker stopped compaction for this turn";
            return OUT_NOT_NEEDED;
        }
    }
    json_t *surface = weir_agent_surface(r->agent);
    if (!surface) {
        weir_log(r->s->self, WEIR_LOG_WARN, "out of memory reading the surface");
        return OUT_FAILED;
    }
    if (cancelled(r) || !compactable(r, surface)) {
        json_decref(surface);
        if (cancelled(r)) {
            r->declined = "cancelled";
            return OUT_NOT_NEEDED;
        }
        weir_log(r->s->self, WEIR_LOG_INFO,
                 "%s compaction declined: nothing compactable (%zu tokens)", trigger,
                 r->tokens_before);
        r->declined = "nothing compactable";
        return OUT_NOT_NEEDED;
    }
    if (!r->manual && r->as->compactions >= cfg->max_compactions_per_turn) {
        breaker_trip(r, "max_compactions_per_turn");
        r->declined = "the storm breaker stopped compaction for this turn";
        json_decref(surface);
        return OUT_NOT_NEEDED;
    }
    if (!pre_compact(r, trigger) || cancelled(r)) {
        r->declined = cancelled(r) ? "cancelled" : r->declined;
        json_decref(surface);
        return OUT_NOT_NEEDED;
    }
    if (!cfg->strategies_set && r->server_kind)
        r->nchain = cp_default_strategies(r->server_kind, r->chain);
    new_id(r->s, r->id, sizeof r->id);
    json_t *start = json_pack("{s:s, s:s, s:I, s:I, s:I}", "compaction_id", r->id, "trigger",
                              trigger, "turn", r->turn, "step", r->step, "tokens",
                              (json_int_t)r->tokens_before);
    if (start && r->window > 0)
        json_object_set_new(start, "context_window", json_integer((json_int_t)r->window));
    if (start && pressure)
        json_object_set_new(start, "threshold", json_integer((json_int_t)r->threshold));
    size_t nmessages = 0, ni;
    const json_t *node;
    json_array_foreach(surface, ni, node) nmessages += !json_is_null(json_object_get(node, "message"));
    char text[96];
    snprintf(text, sizeof text, "compacting %zu messages\xe2\x80\xa6", nmessages);
    with_status(&start, text, false);
    if (!r->manual)
        r->as->compactions++; /* every start counts, whatever comes of it */
    if (!append(r, "compaction/start", start)) {
        json_decref(surface);
        return OUT_FAILED;
    }
    /* Pruning is part of the compaction, never a step of its own: it runs
     * right after a summary lands (over the kept tail; the summarized range
     * is gone anyway), so the prefix breaks once, where the checkpoint
     * starts, and the summary request before it still replays the agent's
     * last request unchanged.  Alone only when no summary can help: no
     * summary range exists (the history is one indivisible unit), or an
     * overflow's summary failed (the request does not fit as it is). */
    bool ok = true, ranged = false;
    size_t tokens = r->tokens_before;
    bool prune = in_chain(r, CP_STRATEGY_PRUNE);
    for (size_t st = 0; ok && st < r->nchain && !cancelled(r); st++) {
        if (r->chain[st] == CP_STRATEGY_SERVER) {
            if (!r->server_kind) { /* only a configured chain gets here */
                set_error(r,
                          "config.strategies[%zu]: \"server\": provider row \"%s\" (model "
                          "\"%s\") has no server compaction (its model_info reports no "
                          "\"server_compaction\"; provider-openai rows with api \"responses\" "
                          "have one)",
                          st, r->provider, r->model);
                ok = false;
                break;
            }
            size_t a, b;
            if ((pressure && tokens < r->threshold) || !surface ||
                !summary_range(r, surface, &a, &b))
                continue;
            ranged = true;
            if (!summarize(r, surface, a, b, true)) {
                if (cancelled(r))
                    break;
                /* a failed server compaction changed nothing: the next
                 * strategy takes over, and the log says why */
                const char *next = st + 1 < r->nchain ? cp_strategy_name(r->chain[st + 1]) : NULL;
                json_t *fb = json_pack("{s:s, s:I, s:I, s:s, s:s, s:s?}", "compaction_id", r->id,
                                       "turn", r->turn, "step", r->step, "strategy", "server",
                                       "error", r->error, "next", next);
                weir_log(r->s->self, WEIR_LOG_WARN, "compaction %s: %s; %s%s", r->id, r->error,
                         next ? "falling back to " : "no strategy follows",
                         next ? next : "");
                r->error[0] = '\0';
                if (!append(r, "compaction/fallback", fb)) {
                    ok = false;
                    break;
                }
                continue;
            }
            json_decref(surface);
            surface = weir_agent_surface(r->agent);
            if (!surface) {
                set_error(r, "out of memory reading the surface");
                ok = false;
            }
            if (ok && prune)
                ok = prune_pass(r, surface, true);
            tokens = measure(r);
            if (ok && r->pruned) {
                json_decref(surface);
                surface = weir_agent_surface(r->agent);
                if (!surface) {
                    set_error(r, "out of memory reading the surface");
                    ok = false;
                }
            }
            continue;
        }
        if (r->chain[st] == CP_STRATEGY_PRUNE) {
            /* under pressure only while it remains; the cost rule picks */
            if ((pressure && tokens < r->threshold) || !surface)
                continue;
            ok = prune_pass(r, surface, true);
            tokens = measure(r);
            if (ok && r->pruned) {
                json_decref(surface);
                surface = weir_agent_surface(r->agent);
                if (!surface) {
                    set_error(r, "out of memory reading the surface");
                    ok = false;
                }
            }
            continue;
        }
        for (int attempt = 0; ok && attempt < cfg->max_attempts; attempt++) {
            if (pressure && tokens < r->threshold)
                break;
            if (!pressure && r->summaries > 0)
                break;
            size_t a, b;
            if (cancelled(r) || !summary_range(r, surface, &a, &b))
                break;
            ranged = true;
            ok = summarize(r, surface, a, b, false);
            if (cancelled(r))
                break; /* no new copy of the surface, no pruning after a cancel */
            json_decref(surface);
            surface = weir_agent_surface(r->agent);
            if (ok && !surface) {
                set_error(r, "out of memory reading the surface");
                ok = false;
            }
            /* the kept tail after the checkpoint is written again anyway:
             * with prune in the chain its oversized results go (the rule
             * prices them at no invalidation) */
            if (ok && prune)
                ok = prune_pass(r, surface, true);
            tokens = measure(r);
            if (ok && r->pruned) {
                json_decref(surface);
                surface = weir_agent_surface(r->agent);
                if (!surface) {
                    set_error(r, "out of memory reading the surface");
                    ok = false;
                }
            }
        }
    }
    if (cancelled(r)) {
        set_error(r, "cancelled");
        tokens = measure(r); /* what landed before it (O(new events)) */
    } else if (prune && r->summaries == 0 && surface && (!ranged || r->forced) &&
               (!pressure || tokens >= r->threshold)) {
        /* no summary can help (or an overflow's failed): pruning is all
         * there is, whatever the cache costs */
        size_t before = r->pruned;
        if (prune_pass(r, surface, false) && r->pruned == before && r->pruned == 0 && !ranged)
            set_error(r, "nothing compactable");
        tokens = measure(r);
    } else if (r->summaries == 0 && r->pruned == 0 && !ranged && !r->error[0]) {
        set_error(r, "nothing compactable");
    }
    json_decref(surface);
    r->tokens_after = tokens;
    if (!r->error[0] && pressure && tokens >= r->threshold)
        set_error(r, "still above the threshold (%zu >= %zu tokens) after %d summary attempt%s",
                  tokens, r->threshold, cfg->max_attempts, cfg->max_attempts == 1 ? "" : "s");
    ok = !r->error[0];
    json_t *end = json_pack("{s:s, s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I}", "compaction_id",
                            r->id, "turn", r->turn, "step", r->step, "ok", ok, "pruned",
                            (json_int_t)r->pruned, "summaries", (json_int_t)r->summaries,
                            "tokens_before", (json_int_t)r->tokens_before, "tokens_after",
                            (json_int_t)r->tokens_after, "shadowed_tokens",
                            (json_int_t)r->shadowed, "saved_tokens", (json_int_t)r->saved);
    if (end && r->usage)
        json_object_set(end, "usage", r->usage);
    /* the durable record (issue #35): the chain, what of it changed the
     * surface, the cache it invalidated and every node it shadowed */
    json_t *chain = json_array();
    for (size_t i = 0; chain && i < r->nchain; i++)
        if (json_array_append_new(chain, json_string(cp_strategy_name(r->chain[i]))) != 0) {
            json_decref(chain);
            chain = NULL;
        }
    json_t *shadowed = r->shadowed_seqs ? json_incref(r->shadowed_seqs) : json_array();
    if (end && (!chain || !shadowed || json_object_set(end, "strategies", chain) != 0 ||
                json_object_set_new(end, "strategy",
                                    json_string(r->used[0] ? r->used : "none")) != 0 ||
                json_object_set_new(end, "cache_invalidated_tokens",
                                    json_integer((json_int_t)r->invalidated)) != 0 ||
                json_object_set(end, "shadowed", shadowed) != 0)) {
        json_decref(end);
        end = NULL; /* append() reports it */
    }
    json_decref(chain);
    json_decref(shadowed);
    if (end && !ok)
        json_object_set_new(end, "error", json_string(r->error));
    char why[sizeof r->error], end_line[sizeof r->error + 32];
    snprintf(why, sizeof why, "%s", r->error);
    if (ok)
        snprintf(end_line, sizeof end_line, "compacted: %zu -> %zu tokens", r->tokens_before,
                 r->tokens_after);
    else
        snprintf(end_line, sizeof end_line, "compaction failed: %s", why);
    with_status(&end, end_line, true);
    if (!append(r, "compaction/end", end))
        return OUT_FAILED;
    if (!ok)
        weir_log(r->s->self, WEIR_LOG_WARN, "compaction %s failed: %s", r->id, why);
    /* a compaction that saved too little of what it shadowed: stop the storm */
    if (!r->manual && r->shadowed > 0 &&
        (double)r->saved < cfg->min_savings_ratio * (double)r->shadowed)
        breaker_trip(r, "min_savings_ratio");
    return ok ? OUT_DONE : OUT_FAILED;
}

static bool run_init(run *r, state *s, weir_call *call, const json_t *args, bool forced) {
    memset(r, 0, sizeof *r);
    r->s = s;
    r->agent = weir_call_agent(call);
    r->signal = weir_call_signal(call);
    r->turn = json_integer_value(json_object_get(args, "turn"));
    r->step = json_integer_value(json_object_get(args, "step"));
    r->forced = forced;
    r->window = -1;
    r->as = r->agent ? agent_state_get(s, r->agent) : NULL;
    return r->as != NULL;
}

static void run_clear(run *r) {
    json_decref(r->server_info);
    json_decref(r->shadowed_seqs);
    json_decref(r->route);
    json_decref(r->usage);
}

/* ------------------------------------------------------------------------ */
/* Hooks                                                                     */
/* ------------------------------------------------------------------------ */

static json_t *on_pre_step(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    /* native input applied inside a running stream: no compaction there */
    if (json_is_true(json_object_get(args, "native")))
        return weir_next(call);
    run r;
    if (run_init(&r, s, call, args, false) && !(r.signal && weir_signal_cancelled(r.signal))) {
        size_t i;
        const json_t *m;
        json_array_foreach(json_object_get(args, "messages"), i, m) {
            r.extra_tokens += cp_message_tokens(m);
        }
        r.entering = json_array_size(json_object_get(args, "messages"));
        compact(&r);
    }
    run_clear(&r);
    return weir_next(call);
}

static json_t *on_request_error(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    const char *code = json_string_value(json_object_get(json_object_get(args, "failure"), "code"));
    weir_agent *agent = weir_call_agent(call);
    weir_signal *signal = weir_call_signal(call);
    if (!code || strcmp(code, "CONTEXT_WINDOW_EXCEEDED") != 0 || !agent ||
        (signal && weir_signal_cancelled(signal)) || s->cfg.max_overflow_retries == 0)
        return weir_next(call);
    run r;
    if (!run_init(&r, s, call, args, true)) {
        run_clear(&r);
        weir_call_fail(call, "compaction-basic: out of memory");
        return NULL;
    }
    agent_state *as = r.as;
    if (as->ov_turn != r.turn || as->ov_step != r.step) {
        as->ov_turn = r.turn;
        as->ov_step = r.step;
        as->ov_count = 0;
    }
    if (as->ov_count >= s->cfg.max_overflow_retries) {
        run_clear(&r);
        return weir_next(call); /* bounded: the original error stands */
    }
    uint64_t gen = weir_agent_replace_generation(agent);
    compact(&r);
    run_clear(&r);
    if ((signal && weir_signal_cancelled(signal)) || weir_agent_replace_generation(agent) <= gen)
        return weir_next(call); /* nothing landed: the original error stands */
    as->ov_count++;
    json_t *action = json_pack("{s:s}", "kind", "retry");
    if (!action)
        weir_call_fail(call, "compaction-basic: out of memory");
    return action;
}

/* Manual compaction between turns: the outcome as the hook's result. */
static json_t *on_compact(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    run r;
    if (!run_init(&r, s, call, args, false)) {
        run_clear(&r);
        weir_call_fail(call, "compaction-basic: agent/compact needs an agent");
        return NULL;
    }
    r.manual = true;
    r.step = 0; /* between turns: the events name the last closed turn, step 0 */
    r.instructions = json_string_value(json_object_get(args, "instructions"));
    outcome out = compact(&r);
    json_t *res;
    if (out == OUT_NOT_NEEDED)
        res = json_pack("{s:s, s:s}", "kind", "declined", "message",
                        r.declined ? r.declined : "nothing to do");
    else if (out == OUT_DONE)
        res = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "kind", "compacted", "message",
                        r.summaries ? "summarized" : "pruned", "compaction_id", r.id, "pruned",
                        (json_int_t)r.pruned, "summaries", (json_int_t)r.summaries,
                        "tokens_before", (json_int_t)r.tokens_before, "tokens_after",
                        (json_int_t)r.tokens_after);
    else
        res = json_pack("{s:s, s:s, s:s, s:I}", "kind", "failed", "message",
                        r.error[0] ? r.error : "the compaction could not be logged",
                        "compaction_id", r.id, "pruned", (json_int_t)r.pruned);
    run_clear(&r);
    if (!res)
        weir_call_fail(call, "compaction-basic: out of memory");
    return res;
}

/* An agent went away: its state goes too. */
static json_t *on_disposed(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    state *s = ud;
    const char *agent = json_string_value(json_object_get(args, "agent"));
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; agent && i < s->n; i++) {
        if (!strcmp(s->agents[i]->id, agent)) {
            agent_state_free(s->agents[i]);
            s->agents[i] = s->agents[--s->n];
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return json_null();
}

/* ------------------------------------------------------------------------ */
/* The recall tool                                                           */
/* ------------------------------------------------------------------------ */

static const char recall_schema[] =
    "{\"type\":\"object\",\"required\":[\"id\"],\"additionalProperties\":false,"
    "\"properties\":{\"id\":{\"type\":\"string\",\"minLength\":1,\"description\":"
    "\"an id the checkpoint lists under Recall ids (seq:N), or a tool call id\"},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":"
    "\"characters to skip, to read on where an earlier recall was cut\"}}}";

/* The agent whose call `exec` runs: the idempotency key starts with its
 * session id and a colon (docs/tools.md); the longest id that fits.  NULL
 * when no agent of this plugin matches. */
static weir_agent *recall_agent(state *s, weir_tool_exec *exec) {
    const char *key = WEIR_API_HAS(WEIR_PLUGIN_API, tool_exec_idempotency_key)
                          ? weir_tool_exec_idempotency_key(exec)
                          : NULL;
    weir_agent *agent = NULL;
    size_t best = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; key && i < s->n; i++) {
        size_t n = strlen(s->agents[i]->id);
        if (n >= best && !strncmp(key, s->agents[i]->id, n) && key[n] == ':') {
            best = n;
            agent = s->agents[i]->agent;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return agent;
}

/* Whether the agent's session holds a compaction that changed its surface. */
static bool session_compacted(weir_agent *agent) {
    static const char *const kinds[] = {"compaction/summary", "compaction/prune"};
    for (size_t i = 0; i < 2; i++) {
        json_t *ev = weir_agent_last_event(agent, kinds[i]);
        json_decref(ev);
        if (ev)
            return true;
    }
    return false;
}

/* The newest original tool/result of call `call_id` (an envelope, new
 * reference), or NULL.  O(history): a recall by call id walks back. */
static json_t *result_of_call(weir_agent *agent, const char *call_id) {
    json_t *last = weir_agent_last_event(agent, "tool/result");
    json_int_t seq = json_integer_value(json_object_get(last, "seq"));
    json_decref(last);
    for (json_int_t at = last ? seq : -1; at >= 0; at--) {
        json_t *ev = event_ref(agent, (size_t)at);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const json_t *block = json_array_get(
            json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content"),
            0);
        const char *id = json_string_value(json_object_get(block, "call_id"));
        bool original = !json_is_object(json_object_get(ev, "surface_op")); /* not a replace */
        if (type && !strcmp(type, "tool/result") && original && id && !strcmp(id, call_id))
            return ev;
        json_decref(ev);
    }
    return NULL;
}

/* The text of a message: its text blocks, and those of its tool results,
 * joined with "\n" (new string; NULL when out of memory). */
static char *recall_text(const json_t *message) {
    json_t *flat = json_pack("{s:[]}", "content");
    json_t *blocks = json_object_get(flat, "content");
    size_t i, j;
    const json_t *b, *inner;
    json_array_foreach(json_object_get(message, "content"), i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (type && !strcmp(type, "tool_result")) {
            json_array_foreach(json_object_get(b, "content"), j, inner) {
                json_array_append(blocks, (json_t *)(uintptr_t)inner);
            }
        } else {
            json_array_append(blocks, (json_t *)(uintptr_t)b);
        }
    }
    char *text = flat ? cp_message_text(flat) : NULL;
    json_decref(flat);
    return text;
}

/* Is `id` "seq:N" or "N"?  *seq receives N. */
static bool parse_seq_id(const char *id, json_int_t *seq) {
    const char *p = !strncmp(id, "seq:", 4) ? id + 4 : id;
    if (*p < '0' || *p > '9')
        return false;
    char *end = NULL;
    long long v = strtoll(p, &end, 10);
    if (*end != '\0' || v < 0)
        return false;
    *seq = (json_int_t)v;
    return true;
}

static int recall_exec(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    state *s = ud;
    const char *id = json_string_value(json_object_get(args, "id"));
    json_int_t offset = json_integer_value(json_object_get(args, "offset"));
    if (!id || !*id || offset < 0) {
        weir_tool_exec_fail(exec, "INVALID_ARGUMENTS",
                            "recall: expected {\"id\": \"seq:N\" or a tool call id, "
                            "\"offset\"?: characters to skip}");
        return WEIR_E_TOOL;
    }
    weir_agent *agent = recall_agent(s, exec);
    if (!agent || !session_compacted(agent)) {
        weir_tool_exec_fail(exec, "NOT_COMPACTED",
                            "recall: nothing was compacted in this session yet: every message "
                            "and tool result is still in the context");
        return WEIR_E_TOOL;
    }
    json_int_t seq = -1;
    json_t *ev = parse_seq_id(id, &seq) ? event_ref(agent, (size_t)seq) : result_of_call(agent, id);
    const char *type = json_string_value(json_object_get(ev, "type"));
    bool message = type && (!strcmp(type, "tool/result") || !strcmp(type, "user/message") ||
                            !strcmp(type, "assistant/message") || !strcmp(type, "system/message"));
    if (!message) {
        if (ev)
            weir_tool_exec_fail(exec, "NOT_FOUND",
                                "recall: %s is a %s event, not a message or a tool result", id,
                                type ? type : "malformed");
        else
            weir_tool_exec_fail(exec, "NOT_FOUND",
                                "recall: no message or tool result has the id \"%s\" (use an id "
                                "the checkpoint lists under Recall ids, like seq:12)",
                                id);
        json_decref(ev);
        return WEIR_E_TOOL;
    }
    char *text = recall_text(json_object_get(json_object_get(ev, "data"), "message"));
    char *cut = text ? cp_recall_cut(text, (size_t)offset, s->cfg.recall_max_chars) : NULL;
    size_t total = text ? cp_utf8_len(text) : 0;
    json_int_t at = json_integer_value(json_object_get(ev, "seq"));
    json_decref(ev);
    free(text);
    if (!cut) {
        weir_tool_exec_fail(exec, "NOMEM", "recall: out of memory");
        return WEIR_E_NOMEM;
    }
    if (WEIR_API_HAS(WEIR_PLUGIN_API, tool_exec_append)) {
        json_t *note = json_pack("{s:s, s:I, s:I, s:I, s:I}", "id", id, "seq", at, "offset",
                                 offset, "chars", (json_int_t)total, "max_chars",
                                 (json_int_t)s->cfg.recall_max_chars);
        if (note)
            weir_tool_exec_append(exec, "compaction/recall", note, NULL);
        json_decref(note);
    }
    *result = json_string(cut);
    free(cut);
    if (!*result) {
        weir_tool_exec_fail(exec, "NOMEM", "recall: out of memory");
        return WEIR_E_NOMEM;
    }
    return WEIR_OK;
}

static int recall_concurrent(const json_t *args, void *ud) {
    (void)args;
    (void)ud;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Plugin                                                                    */
/* ------------------------------------------------------------------------ */

static void state_free(state *s) {
    if (!s)
        return;
    cp_config_clear(&s->cfg);
    for (size_t i = 0; i < s->n; i++)
        agent_state_free(s->agents[i]);
    free(s->agents);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    if (!WEIR_API_HAS(api, agent_complete_stream)) {
        if (err)
            snprintf(err->text, sizeof err->text,
                     "compaction-basic needs a host with ABI 1.3 (agent_complete_stream); this "
                     "host provides ABI %u.%u",
                     (unsigned)api->abi_major, (unsigned)api->abi_minor);
        return WEIR_E_UNSUPPORTED;
    }
    state *s = calloc(1, sizeof *s);
    if (!s)
        return WEIR_E_NOMEM;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return WEIR_E_NOMEM;
    }
    s->self = self;
    bool oom = false;
    char msg[sizeof err->text];
    if (cp_config_parse(config, &s->cfg, &oom, msg, sizeof msg) != 0) {
        state_free(s);
        if (err)
            snprintf(err->text, sizeof err->text, "%s", msg);
        return oom ? WEIR_E_NOMEM : WEIR_E_PLUGIN_CONFIG;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->rng = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (uint64_t)(uintptr_t)s;

    static const char *const events[] = {
        "compaction/start",   "compaction/prune",   "compaction/summary",
        "compaction/end",     "compaction/breaker", "compaction/pinned-over-threshold",
        "compaction/prune-decision", "compaction/recall", "compaction/fallback"};
    /* one compaction policy per deployment (docs/plugins.md, "Roles"); first, so that
     * a second row is refused by name */
    int rc = weir_plugin_role(self, "compaction");
    /* its events are compaction/<name>: it claims that namespace (ABI 1.12) */
    if (rc == WEIR_OK)
        rc = weir_event_namespace_claim(self, "compaction");
    for (size_t i = 0; rc == WEIR_OK && i < sizeof events / sizeof *events; i++)
        rc = weir_event_type_register(self, events[i], WEIR_EVENT_IGNORABLE);
    json_t *params = s->cfg.recall_enabled ? json_loads(recall_schema, 0, NULL) : NULL;
    if (rc == WEIR_OK && s->cfg.recall_enabled) {
        weir_tool tool = {sizeof(weir_tool),
                          "recall",
                          "Re-read a message or tool result that a compaction replaced with its "
                          "checkpoint: give an id the checkpoint lists under Recall ids (seq:N) "
                          "or a tool call id. Returns the original text, cut after a bound (ask "
                          "again with an offset for the rest).",
                          params,
                          0,
                          recall_exec,
                          recall_concurrent,
                          s};
        rc = params ? weir_tool_register(self, &tool) : WEIR_E_NOMEM;
    }
    json_decref(params);
    weir_hook_opts opts = WEIR_HOOK_OPTS_INIT;
    opts.user_data = s;
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/pre-step", on_pre_step, &opts);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/request-error", on_request_error, &opts);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/disposed", on_disposed, &opts);
    if (rc == WEIR_OK)
        rc = weir_hook_register(self, "agent/compact", on_compact, &opts);
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
    "compaction-basic",
    "0.4.0",
    "keeps the model context within its window: a chain of strategies (structured summaries "
    "that replay the agent's own request, cache-priced tool-result pruning), pinned context, a "
    "storm breaker and a recall tool for what a compaction shadowed",
    cp_config_schema,
    init,
    fini,
    {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
