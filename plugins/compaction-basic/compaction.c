/*
 * plugins/compaction-basic - keeps an agent's model context within its
 * window (docs/compaction.md, DESIGN §10).
 *
 * Triggers:
 *   agent/pre-step      pressure: measured tokens (real usage of the last
 *                       response + an estimate of what came after it + the
 *                       entering input) >= threshold_ratio x context_window
 *                       -> compact, then weir_next() (always, even when the
 *                       compaction failed: a warning is logged).
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
 * Compaction: tool-result pruning first (head + marker + tail, a
 * content-only tool/result replace per result), then, while pressure
 * remains (or once when forced), a summary of a head-anchored range that
 * never splits a tool call from its result, made by a direct model call
 * (api->agent_complete) and committed as one user/message replace.  Each
 * compaction is bracketed by compaction/start ... compaction/end; every
 * replace is immediately preceded by its compaction/prune or
 * compaction/summary event.
 *
 * The hooks run on each agent's driver thread; the only shared mutable state
 * (overflow counters per agent and the id generator) sits behind one mutex.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strdup */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weir/plugin.h>

#include "compaction_policy.h"

/* Overflow recoveries of one agent's current step. */
typedef struct overflow_counter {
    char *agent;
    json_int_t turn, step;
    int count;
} overflow_counter;

typedef struct state {
    weir_plugin *self;
    cp_config cfg;      /* read-only after init */
    pthread_mutex_t mu; /* guards counters, n, rng */
    overflow_counter *counters;
    size_t n;
    uint64_t rng;
} state;

/* One compaction (one trigger) on one agent. */
typedef struct run {
    state *s;
    weir_agent *agent;
    weir_signal *signal;
    json_int_t turn, step;
    bool forced;          /* overflow: no threshold, keep only the newest unit */
    bool manual;          /* agent/compact: no threshold, one summary, keep the tail */
    const char *instructions; /* manual: extra summarizer instructions, or NULL */
    const char *declined;     /* why OUT_NOT_NEEDED (static text) */
    size_t extra_tokens;  /* input entering with the next step */
    const char *provider; /* borrowed from `route` */
    const char *model;
    json_t *route;    /* request/context data (owned) */
    long long window; /* context window, -1 unknown */
    size_t threshold; /* tokens; 0 when forced */
    char id[40];
    /* outcome */
    size_t pruned; /* tool results pruned */
    int summaries;
    size_t tokens_before, tokens_after;
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

/* The routed target: the last request/context.  False when there is none. */
static bool resolve_route(run *r) {
    json_t *ev = weir_agent_last_event(r->agent, "request/context");
    json_t *data = json_object_get(ev, "data");
    r->provider = json_string_value(json_object_get(data, "provider"));
    r->model = json_string_value(json_object_get(data, "model"));
    if (!r->provider || !r->model) {
        json_decref(ev);
        return false;
    }
    r->route = json_incref(data);
    json_decref(ev);
    r->window = -1;
    json_t *info = weir_agent_model_info(r->agent, r->provider, r->model);
    const json_t *cw = json_object_get(info, "context_window");
    if (!json_is_integer(cw))
        cw = json_object_get(r->route, "context_window");
    if (json_is_integer(cw) && json_integer_value(cw) > 0)
        r->window = (long long)json_integer_value(cw);
    json_decref(info);
    return true;
}

/* Measured tokens of the current surface; *surface (new) receives it. */
static size_t measure(run *r, json_t **surface) {
    *surface = weir_agent_surface(r->agent);
    if (!*surface)
        return 0;
    json_t *last = weir_agent_last_event(r->agent, "assistant/message");
    const json_t *usage = json_object_get(json_object_get(last, "data"), "usage");
    long long seq = last && json_is_object(usage)
                        ? (long long)json_integer_value(json_object_get(last, "seq"))
                        : -1;
    size_t total = cp_measure(*surface, seq, cp_usage_tokens(usage), r->extra_tokens);
    json_decref(last);
    return total;
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

/* Whether anything could be pruned or summarized. */
static bool compactable(run *r, const json_t *surface) {
    size_t a, b, i;
    if (cp_select_range(surface, keep_tokens(r), &a, &b))
        return true;
    const json_t *node;
    json_array_foreach(surface, i, node) {
        const char *type = json_string_value(json_object_get(node, "type"));
        size_t chars = 0;
        bool oom = false;
        if (!type || strcmp(type, "tool/result") != 0)
            continue;
        json_t *p = cp_prune_message(json_object_get(node, "message"), &r->s->cfg, &chars, &oom);
        json_decref(p);
        if (p || oom)
            return true; /* out of memory: let the compaction report it */
    }
    return false;
}

/* Prune every oversized tool result of `surface`. */
static bool prune_pass(run *r, const json_t *surface) {
    size_t i;
    const json_t *node;
    json_array_foreach(surface, i, node) {
        const char *type = json_string_value(json_object_get(node, "type"));
        if (!type || strcmp(type, "tool/result") != 0)
            continue;
        const json_t *msg = json_object_get(node, "message");
        size_t chars = 0;
        bool oom = false;
        json_t *pruned = cp_prune_message(msg, &r->s->cfg, &chars, &oom);
        if (!pruned) {
            if (oom) {
                set_error(r, "out of memory pruning a tool result");
                return false;
            }
            continue;
        }
        json_int_t seq = json_integer_value(json_object_get(node, "seq"));
        json_t *ev = weir_agent_event(r->agent, (size_t)seq);
        json_t *data = json_deep_copy(json_object_get(ev, "data"));
        json_decref(ev);
        if (!data || json_object_set_new(data, "message", pruned) != 0) {
            if (!data)
                json_decref(pruned);
            json_decref(data);
            set_error(r, "out of memory pruning a tool result");
            return false;
        }
        if (!append(r, "compaction/prune",
                    json_pack("{s:s, s:I, s:[I], s:I, s:I, s:I}", "compaction_id", r->id, "seq",
                              seq, "shadowed_seqs", seq, "pruned_chars", (json_int_t)chars,
                              "shadowed_tokens", (json_int_t)cp_message_tokens(msg), "tokens_after",
                              (json_int_t)cp_message_tokens(json_object_get(data, "message"))))) {
            json_decref(data);
            return false;
        }
        weir_error err;
        memset(&err, 0, sizeof err);
        int rc = weir_agent_surface_replace(r->agent, "tool/result", data, (size_t)seq, (size_t)seq,
                                            NULL, NULL, &err);
        json_decref(data);
        if (rc != WEIR_OK) {
            set_error(r, "pruning the tool result at seq %lld was rejected: %s", (long long)seq,
                      err.text[0] ? err.text : weir_strerror(rc));
            return false;
        }
        r->pruned++;
    }
    return true;
}

/* The text blocks of a summarizer reply joined; NULL when empty or OOM. */
static char *reply_text(const json_t *message) {
    size_t len = 0, i;
    const json_t *b, *content = json_object_get(message, "content");
    json_array_foreach(content, i, b) {
        len += json_string_length(json_object_get(b, "text"));
    }
    if (len == 0)
        return NULL;
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    out[0] = '\0';
    size_t at = 0;
    json_array_foreach(content, i, b) {
        const json_t *t = json_object_get(b, "text");
        size_t n = json_string_length(t);
        if (n)
            memcpy(out + at, json_string_value(t), n);
        at += n;
    }
    out[at] = '\0';
    return out;
}

/* New reference: the summarization request for nodes [a, b]. */
static json_t *summary_request(run *r, const json_t *surface, size_t a, size_t b) {
    const cp_config *cfg = &r->s->cfg;
    char *transcript = cp_render_transcript(surface, a, b);
    if (!transcript)
        return NULL;
    char *prompt = NULL;
    if (r->instructions && *r->instructions) {
        size_t n = strlen(cfg->summary_prompt) + strlen(r->instructions) + 64;
        prompt = malloc(n);
        if (!prompt) {
            free(transcript);
            return NULL;
        }
        snprintf(prompt, n, "%s\n\nAdditional instructions for this summary:\n%s",
                 cfg->summary_prompt, r->instructions);
    }
    json_t *req = json_pack("{s:s, s:s, s:I, s:[{s:s, s:[{s:s, s:s}]}, {s:s, s:[{s:s, s:s}]}]}",
                            "provider", cfg->summary_provider ? cfg->summary_provider : r->provider,
                            "model", cfg->summary_model ? cfg->summary_model : r->model,
                            "max_tokens", (json_int_t)cfg->summary_max_tokens, "messages", "role",
                            "system", "content", "type", "text", "text",
                            prompt ? prompt : cfg->summary_prompt, "role", "user", "content",
                            "type", "text", "text", transcript);
    free(prompt);
    free(transcript);
    return req;
}

/* One summary of the selected range.  true when a replace landed. */
static bool summarize(run *r, const json_t *surface, size_t a, size_t b) {
    if (r->signal && weir_signal_cancelled(r->signal)) {
        set_error(r, "cancelled");
        return false;
    }
    json_t *req = summary_request(r, surface, a, b);
    json_t *result = NULL;
    weir_error err;
    memset(&err, 0, sizeof err);
    int rc = req ? weir_agent_complete(r->agent, req, r->signal, &result, &err) : WEIR_E_NOMEM;
    if (rc != WEIR_OK) {
        set_error(r, "the summarizer failed: %s", err.text[0] ? err.text : weir_strerror(rc));
        json_decref(req);
        return false;
    }
    char *text = reply_text(json_object_get(result, "message"));
    json_t *checkpoint = text ? cp_summary_message(text, r->id) : NULL;
    free(text);
    if (!checkpoint) {
        set_error(r, "the summarizer returned no text");
        json_decref(result);
        json_decref(req);
        return false;
    }
    size_t shadowed = cp_range_tokens(surface, a, b);
    size_t summary_tokens = cp_message_tokens(checkpoint);
    if (summary_tokens >= shadowed) {
        set_error(r, "the summary (%zu tokens) does not shrink the %zu tokens it replaces",
                  summary_tokens, shadowed);
        json_decref(checkpoint);
        json_decref(result);
        json_decref(req);
        return false;
    }
    json_t *seqs = json_array();
    for (size_t i = a; seqs && i <= b; i++)
        if (json_array_append(seqs, json_object_get(json_array_get(surface, i), "seq")) != 0) {
            json_decref(seqs);
            seqs = NULL;
        }
    json_int_t start_seq = json_integer_value(json_object_get(json_array_get(surface, a), "seq"));
    json_int_t end_seq = json_integer_value(json_object_get(json_array_get(surface, b), "seq"));
    json_t *ev =
        seqs ? json_pack("{s:s, s:I, s:I, s:{s:I, s:I}, s:O, s:I, s:I, s:s, s:s, s:O}",
                         "compaction_id", r->id, "turn", r->turn, "step", r->step, "shadowed_range",
                         "start", start_seq, "end", end_seq, "shadowed_seqs", seqs,
                         "shadowed_tokens", (json_int_t)shadowed, "summary_tokens",
                         (json_int_t)summary_tokens, "provider",
                         json_string_value(json_object_get(req, "provider")), "model",
                         json_string_value(json_object_get(req, "model")), "summary",
                         json_object_get(json_array_get(json_object_get(checkpoint, "content"), 0),
                                         "text"))
             : NULL;
    const json_t *usage = json_object_get(result, "usage");
    if (ev && json_is_object(usage))
        json_object_set(ev, "usage", (json_t *)(uintptr_t)usage);
    json_decref(result);
    json_decref(req);
    bool ok = append(r, "compaction/summary", ev);
    json_t *last = ok ? weir_agent_last_event(r->agent, "compaction/summary") : NULL;
    json_t *sources = last ? json_pack("[O]", json_object_get(last, "seq")) : NULL;
    json_decref(last);
    json_t *data =
        json_pack("{s:I, s:I, s:O}", "turn", r->turn, "step", r->step, "message", checkpoint);
    json_decref(checkpoint);
    if (ok && (!sources || !data || json_array_extend(sources, seqs) != 0)) {
        set_error(r, "out of memory committing the summary");
        ok = false;
    }
    if (ok) {
        memset(&err, 0, sizeof err);
        rc = weir_agent_surface_replace(r->agent, "user/message", data, (size_t)start_seq,
                                        (size_t)end_seq, sources, NULL, &err);
        if (rc != WEIR_OK) {
            set_error(r, "the summary replace was rejected: %s",
                      err.text[0] ? err.text : weir_strerror(rc));
            ok = false;
        }
    }
    json_decref(seqs);
    json_decref(sources);
    json_decref(data);
    if (ok)
        r->summaries++;
    return ok;
}

/* The whole compaction of one trigger (see the file comment). */
static outcome compact(run *r) {
    const cp_config *cfg = &r->s->cfg;
    const char *trigger = r->forced ? "overflow" : r->manual ? "manual" : "pressure";
    if (!resolve_route(r)) {
        r->declined = "nothing was sent to a model yet";
        return OUT_NOT_NEEDED; /* no durable route yet: nothing was ever sent */
    }
    if (!r->forced && !r->manual) {
        if (r->window <= 0) {
            weir_log(r->s->self, WEIR_LOG_WARN,
                     "no context window known for %s/%s: pressure compaction is off for it",
                     r->provider, r->model);
            return OUT_NOT_NEEDED;
        }
        r->threshold = (size_t)((double)r->window * cfg->threshold_ratio);
    }
    json_t *surface = NULL;
    r->tokens_before = measure(r, &surface);
    if (!surface) {
        weir_log(r->s->self, WEIR_LOG_WARN, "out of memory reading the surface");
        return OUT_FAILED;
    }
    if (!r->forced && !r->manual && r->tokens_before < r->threshold) {
        json_decref(surface);
        return OUT_NOT_NEEDED; /* below pressure: never prune */
    }
    if (!compactable(r, surface)) {
        weir_log(r->s->self, WEIR_LOG_INFO,
                 "%s compaction declined: nothing compactable (%zu tokens)", trigger,
                 r->tokens_before);
        r->declined = "nothing compactable";
        json_decref(surface);
        return OUT_NOT_NEEDED;
    }
    new_id(r->s, r->id, sizeof r->id);
    json_t *start = json_pack("{s:s, s:s, s:I, s:I, s:I}", "compaction_id", r->id, "trigger",
                              trigger, "turn", r->turn, "step", r->step,
                              "tokens", (json_int_t)r->tokens_before);
    if (start && r->window > 0)
        json_object_set_new(start, "context_window", json_integer((json_int_t)r->window));
    if (start && !r->forced && !r->manual)
        json_object_set_new(start, "threshold", json_integer((json_int_t)r->threshold));
    if (!append(r, "compaction/start", start)) {
        json_decref(surface);
        return OUT_FAILED;
    }
    bool ok = prune_pass(r, surface);
    size_t tokens = r->tokens_before;
    if (ok && r->pruned) {
        json_decref(surface);
        tokens = measure(r, &surface);
        if (!surface) {
            set_error(r, "out of memory reading the surface");
            ok = false;
        }
    }
    for (int attempt = 0; ok && attempt < cfg->max_attempts; attempt++) {
        if (!r->forced && !r->manual && tokens < r->threshold)
            break;
        if ((r->forced || r->manual) && r->summaries > 0)
            break;
        size_t a, b;
        if (!cp_select_range(surface, keep_tokens(r), &a, &b)) {
            if (!r->pruned && !r->summaries)
                set_error(r, "nothing compactable");
            break;
        }
        ok = summarize(r, surface, a, b);
        json_decref(surface);
        tokens = measure(r, &surface);
        if (ok && !surface) {
            set_error(r, "out of memory reading the surface");
            ok = false;
        }
    }
    json_decref(surface);
    r->tokens_after = tokens;
    if (ok && !r->forced && !r->manual && tokens >= r->threshold)
        set_error(r, "still above the threshold (%zu >= %zu tokens) after %d summary attempt%s",
                  tokens, r->threshold, cfg->max_attempts, cfg->max_attempts == 1 ? "" : "s");
    ok = ok && !r->error[0];
    json_t *end = json_pack(
        "{s:s, s:I, s:I, s:b, s:I, s:I, s:I, s:I}", "compaction_id", r->id, "turn", r->turn, "step",
        r->step, "ok", ok, "pruned", (json_int_t)r->pruned, "summaries", (json_int_t)r->summaries,
        "tokens_before", (json_int_t)r->tokens_before, "tokens_after", (json_int_t)r->tokens_after);
    if (end && !ok)
        json_object_set_new(end, "error", json_string(r->error));
    char why[sizeof r->error];
    snprintf(why, sizeof why, "%s", r->error);
    if (!append(r, "compaction/end", end))
        return OUT_FAILED;
    if (!ok)
        weir_log(r->s->self, WEIR_LOG_WARN, "compaction %s failed: %s", r->id, why);
    return ok ? OUT_DONE : OUT_FAILED;
}

static void run_init(run *r, state *s, weir_call *call, const json_t *args, bool forced) {
    memset(r, 0, sizeof *r);
    r->s = s;
    r->agent = weir_call_agent(call);
    r->signal = weir_call_signal(call);
    r->turn = json_integer_value(json_object_get(args, "turn"));
    r->step = json_integer_value(json_object_get(args, "step"));
    r->forced = forced;
    r->window = -1;
}

/* ------------------------------------------------------------------------ */
/* Hooks                                                                     */
/* ------------------------------------------------------------------------ */

static json_t *on_pre_step(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    run r;
    run_init(&r, s, call, args, false);
    if (r.agent && !(r.signal && weir_signal_cancelled(r.signal))) {
        size_t i;
        const json_t *m;
        json_array_foreach(json_object_get(args, "messages"), i, m) {
            r.extra_tokens += cp_message_tokens(m);
        }
        compact(&r);
        json_decref(r.route);
    }
    return weir_next(call);
}

/* The overflow counter of `agent`, reset for a new (turn, step).  Caller holds s->mu. */
static overflow_counter *counter_get(state *s, const char *agent, json_int_t turn,
                                     json_int_t step) {
    overflow_counter *c = NULL;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->counters[i].agent, agent))
            c = &s->counters[i];
    if (!c) {
        overflow_counter *grown = realloc(s->counters, (s->n + 1) * sizeof *grown);
        if (!grown)
            return NULL;
        s->counters = grown;
        c = &s->counters[s->n];
        c->agent = strdup(agent);
        if (!c->agent)
            return NULL;
        s->n++;
        c->turn = -1;
    }
    if (c->turn != turn || c->step != step) {
        c->turn = turn;
        c->step = step;
        c->count = 0;
    }
    return c;
}

static json_t *on_request_error(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    const char *code = json_string_value(json_object_get(json_object_get(args, "failure"), "code"));
    const char *agent_id = json_string_value(json_object_get(args, "agent"));
    weir_agent *agent = weir_call_agent(call);
    weir_signal *signal = weir_call_signal(call);
    if (!code || strcmp(code, "CONTEXT_WINDOW_EXCEEDED") != 0 || !agent || !agent_id ||
        (signal && weir_signal_cancelled(signal)) || s->cfg.max_overflow_retries == 0)
        return weir_next(call);
    run r;
    run_init(&r, s, call, args, true);
    pthread_mutex_lock(&s->mu);
    overflow_counter *c = counter_get(s, agent_id, r.turn, r.step);
    bool spent = c && c->count >= s->cfg.max_overflow_retries;
    pthread_mutex_unlock(&s->mu);
    if (!c) {
        weir_call_fail(call, "compaction-basic: out of memory");
        return NULL;
    }
    if (spent)
        return weir_next(call); /* bounded: the original error stands */
    uint64_t gen = weir_agent_replace_generation(agent);
    compact(&r);
    json_decref(r.route);
    if ((signal && weir_signal_cancelled(signal)) || weir_agent_replace_generation(agent) <= gen)
        return weir_next(call);
    pthread_mutex_lock(&s->mu);
    c = counter_get(s, agent_id, r.turn, r.step);
    if (c)
        c->count++;
    pthread_mutex_unlock(&s->mu);
    json_t *action = json_pack("{s:s}", "kind", "retry");
    if (!action)
        weir_call_fail(call, "compaction-basic: out of memory");
    return action;
}

/* Manual compaction between turns: the outcome as the hook's result. */
static json_t *on_compact(weir_call *call, const json_t *args, void *ud) {
    state *s = ud;
    run r;
    run_init(&r, s, call, args, false);
    r.manual = true;
    r.step = 0; /* between turns: the events name the last closed turn, step 0 */
    r.instructions = json_string_value(json_object_get(args, "instructions"));
    if (!r.agent) {
        weir_call_fail(call, "compaction-basic: agent/compact needs an agent");
        return NULL;
    }
    outcome out = compact(&r);
    json_decref(r.route);
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
    if (!res)
        weir_call_fail(call, "compaction-basic: out of memory");
    return res;
}

/* An agent went away: its counter goes too. */
static json_t *on_disposed(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    state *s = ud;
    const char *agent = json_string_value(json_object_get(args, "agent"));
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; agent && i < s->n; i++) {
        if (!strcmp(s->counters[i].agent, agent)) {
            free(s->counters[i].agent);
            s->counters[i] = s->counters[--s->n];
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return json_null();
}

/* ------------------------------------------------------------------------ */
/* Plugin                                                                    */
/* ------------------------------------------------------------------------ */

static void state_free(state *s) {
    if (!s)
        return;
    cp_config_clear(&s->cfg);
    for (size_t i = 0; i < s->n; i++)
        free(s->counters[i].agent);
    free(s->counters);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    if (!WEIR_API_HAS(api, agent_complete)) {
        if (err)
            snprintf(err->text, sizeof err->text,
                     "compaction-basic needs a host with the agent context API");
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

    static const char *const events[] = {"compaction/start", "compaction/prune",
                                         "compaction/summary", "compaction/end"};
    int rc = WEIR_OK;
    for (size_t i = 0; rc == WEIR_OK && i < sizeof events / sizeof *events; i++)
        rc = weir_event_type_register(self, events[i], WEIR_EVENT_IGNORABLE);
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
    "0.1.0",
    "keeps the model context within its window: tool-result pruning and summaries",
    cp_config_schema,
    init,
    fini,
    {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
