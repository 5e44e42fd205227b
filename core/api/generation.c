/*
 * core/api/generation.c - the generation tracker (docs/generations.md,
 * docs/generations.md): an observer of an agent's event stream that
 * publishes the host-facing generation.* and input.* events.
 *
 * State, all under `mu`:
 *   lists    the inbox, mirrored from the log's agent/inbox/spliced events
 *            (they arrive in seq order, unlike the live inbox events,
 *            which may overtake them when input comes from a callback)
 *   pending  a turn has started and its claims are being collected; the
 *            generation starts at the first log event after them
 *   gen      the open generation: its current turn's claimed inputs, the
 *            delivered (input_ids) and natively accepted ids, and the text
 *            of the last surface message when that is an assistant message
 *            without tool calls.  `continuing`: its turn completed while
 *            ordinary input queued before that end (pre_close) waited; the
 *            next turn continues it when it claims such input, else it
 *            finishes then (or when the agent goes idle, or that input is
 *            dropped)
 *   seen     input id -> the generation that claimed it, for
 *            input.acknowledged
 *   jobs     background jobs still running: from a tool result's receipt
 *            until the job's result is queued as a service message
 *   dead     a turn the agent ended without a turn/end (a fatal live
 *            agent/error: its log could not be written); its generation
 *            ends with that error, even when events of the turn that
 *            another thread delivers arrive after it
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "generation.h"
#include "store.h"

typedef struct gen_state {
    bool open;
    bool continuing;   /* waits for the next turn's claims (see above) */
    int turn;          /* its current turn */
    char id[32];
    json_t *end_reason; /* continuing: its last turn's reason */
    json_t *claimed;   /* [{id, source, delivery}] of its current turn */
    json_t *input_ids; /* [id]: delivered or applied */
    json_t *accepted;  /* [id]: natively accepted */
    json_t *text;      /* string: the finished-text candidate */
    json_t *usage;     /* the summed usage of its model calls (each integer member), or NULL */
    double usd;        /* the summed cost.usd of those calls */
    bool unpriced;     /* some call reported usage without a cost: no cost is shown */
} gen_state;

struct weir_generation_tracker {
    pthread_mutex_t mu;
    weir_generation_event_fn cb;
    void *user_data;
    json_t *lists[2];       /* the inbox: next-turn, next-step; [{id, source, target,
                               call_id?, anchor?, announced?, pre_close?} | null for
                               input never seen queued] */
    json_t *seen;           /* input id -> generation id that claimed it */
    int unknown_holds;      /* anchored holds of never-seen input, named by live events */
    int unknown_claims;     /* claims of never-seen input, named by live events */
    int unknown_discards;   /* discards of never-seen input, likewise */
    json_t *recent_discards; /* [id] reported while unknown discards are pending */
    json_t *jobs;           /* [job id] still running */
    json_t *done_jobs;      /* [job id] whose result came before its receipt */
    int pending_turn;       /* > 0: collecting this turn's first claims */
    json_t *pending_claims; /* [{id, source, target}] */
    gen_state gen;
    bool closed;            /* shutdown began */
    int dead_turn;          /* > 0: the turn a fatal agent/error ended */
    json_t *dead_reason;    /* its reason {kind:"error", error} */
};

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* Index of `id` in `arr` (strings, or objects with "id"), or -1. */
static long find_id(const json_t *arr, const char *id) {
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) {
        const char *s = json_is_object(v) ? weir__json_str(v, "id", NULL) : json_string_value(v);
        if (s && strcmp(s, id) == 0)
            return (long)i;
    }
    return -1;
}

/* Append the string `id` to `arr` unless present.  WEIR_OK or E_NOMEM. */
static int add_id(json_t *arr, const char *id) {
    if (find_id(arr, id) >= 0)
        return WEIR_OK;
    return json_array_append_new(arr, json_string(id)) == 0 ? WEIR_OK : WEIR_E_NOMEM;
}

/* The message's id, or NULL. */
static const char *message_id(const json_t *message) {
    const char *id = weir__json_str(message, "id", NULL);
    return id && *id ? id : NULL;
}

/* The message's source as one string, into buf: source.kind, or
 * "<kind>:<name>" when the source has a name (a string source as is). */
static const char *source_of(const json_t *message, char *buf, size_t size) {
    const json_t *src = json_object_get(message, "source");
    const char *kind = json_is_string(src) ? json_string_value(src)
                                           : weir__json_str(src, "kind", "human");
    const char *name = weir__json_str(src, "name", NULL);
    if (name && *name)
        snprintf(buf, size, "%s:%s", kind, name);
    else
        snprintf(buf, size, "%s", kind);
    return buf;
}

/* Emit {type, time, data}.  Steals `data`.  WEIR_OK or E_NOMEM. */
static int emit(weir_generation_tracker *t, const char *type, json_t *data) {
    if (!data)
        return WEIR_E_NOMEM;
    json_t *ev = json_pack("{s:s, s:I, s:o}", "type", type, "time", (json_int_t)weir__now_ms(),
                           "data", data);
    if (!ev)
        return WEIR_E_NOMEM;
    t->cb(ev, t->user_data);
    json_decref(ev);
    return WEIR_OK;
}

/* New object: {generation_id, input_ids, accepted_input_ids} of the open
 * generation (copies; accepted ids that were applied are left out). */
static json_t *correlation(const weir_generation_tracker *t) {
    json_t *inputs = json_deep_copy(t->gen.input_ids);
    json_t *accepted = json_array();
    size_t i;
    const json_t *v;
    json_array_foreach(t->gen.accepted, i, v) {
        if (accepted && find_id(t->gen.input_ids, json_string_value(v)) < 0 &&
            json_array_append_new(accepted, json_string(json_string_value(v))) != 0) {
            json_decref(accepted);
            accepted = NULL;
        }
    }
    if (!inputs || !accepted) {
        json_decref(inputs);
        json_decref(accepted);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:o}", "generation_id", t->gen.id, "input_ids", inputs,
                     "accepted_input_ids", accepted);
}

static void gen_clear(gen_state *g) {
    json_decref(g->claimed);
    json_decref(g->input_ids);
    json_decref(g->accepted);
    json_decref(g->text);
    json_decref(g->usage);
    json_decref(g->end_reason);
    memset(g, 0, sizeof *g);
}

/* The claimed input `id` of the open generation ({id, source, delivery}), or NULL. */
static const json_t *claimed_input(const weir_generation_tracker *t, const char *id) {
    long i = find_id(t->gen.claimed, id);
    return i < 0 ? NULL : json_array_get(t->gen.claimed, (size_t)i);
}

/* Set the finished-text candidate to `text` (borrowed string). */
static int set_text(weir_generation_tracker *t, json_t *text) {
    if (!t->gen.open)
        return WEIR_OK;
    json_t *copy = text ? json_incref(text) : json_string("");
    if (!copy)
        return WEIR_E_NOMEM;
    json_decref(t->gen.text);
    t->gen.text = copy;
    return WEIR_OK;
}

json_t *weir__generation_text(const json_t *message, bool *has_tool_calls) {
    if (has_tool_calls)
        *has_tool_calls = false;
    size_t len = 0, i;
    const json_t *b;
    const json_t *content = json_object_get(message, "content");
    if (json_is_string(content))
        return json_string(json_string_value(content));
    json_array_foreach(content, i, b) {
        const char *type = weir__json_str(b, "type", "");
        if (strcmp(type, "tool_call") == 0 && has_tool_calls)
            *has_tool_calls = true;
        else if (strcmp(type, "text") == 0 && json_is_string(json_object_get(b, "text")))
            len += json_string_length(json_object_get(b, "text"));
    }
    char *buf = weir__malloc(len + 1);
    if (!buf)
        return NULL;
    size_t at = 0;
    json_array_foreach(content, i, b) {
        const json_t *tx = json_object_get(b, "text");
        if (strcmp(weir__json_str(b, "type", ""), "text") == 0 && json_is_string(tx)) {
            memcpy(buf + at, json_string_value(tx), json_string_length(tx));
            at += json_string_length(tx);
        }
    }
    buf[at] = '\0';
    json_t *out = json_stringn(buf, at);
    weir__free(buf);
    return out;
}

const char *weir__generation_receipt_job(const json_t *message, char *buf, size_t size) {
    const json_t *block = json_array_get(json_object_get(message, "content"), 0);
    if (!buf || size == 0 || json_is_true(json_object_get(block, "is_error")))
        return NULL;
    const char *text = weir__json_str(json_array_get(json_object_get(block, "content"), 0),
                                      "text", NULL);
    if (!text || text[0] != '{')
        return NULL;
    json_t *receipt = weir__json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    const char *status = weir__json_str(receipt, "status", "");
    const char *job = weir__json_str(receipt, "job_id", NULL);
    const char *out = NULL;
    if (strcmp(status, "queued") == 0 && job && *job && strlen(job) < size) {
        memcpy(buf, job, strlen(job) + 1);
        out = buf;
    }
    json_decref(receipt);
    return out;
}

/* ------------------------------------------------------------------------ */
/* Generations                                                               */
/* ------------------------------------------------------------------------ */

/* Start the pending turn's generation from its collected claims. */
static int announce(weir_generation_tracker *t, const json_t *c, const char *delivery,
                    const char *gen_id);

/* Start the pending turn's generation from its collected claims. */
static int start_generation(weir_generation_tracker *t) {
    json_t *claims = t->pending_claims;
    size_t n = json_array_size(claims), initial = 0, i;
    for (i = 0; i < n; i++) /* the next-turn input, else the first one */
        if (strcmp(weir__json_str(json_array_get(claims, i), "target", ""), "next-turn") == 0) {
            initial = i;
            break;
        }
    gen_state g = {.open = true, .turn = t->pending_turn};
    snprintf(g.id, sizeof g.id, "gen-%d", t->pending_turn);
    g.claimed = json_array();
    g.input_ids = json_array();
    g.accepted = json_array();
    g.text = json_string("");
    bool ok = g.claimed && g.input_ids && g.accepted && g.text;
    for (i = 0; ok && i < n; i++) {
        const json_t *c = json_array_get(claims, i);
        ok = json_array_append_new(
                 g.claimed, json_pack("{s:O, s:O, s:s}", "id", json_object_get(c, "id"), "source",
                                      json_object_get(c, "source"), "delivery",
                                      i == initial ? "new_turn" : "request_boundary")) == 0;
    }
    const json_t *first = json_array_get(claims, initial);
    json_t *data = ok ? json_pack("{s:s, s:O, s:i}", "generation_id", g.id, "initial_input_id",
                                  json_object_get(first, "id"), "turn", g.turn)
                      : NULL;
    const char *call_id = weir__json_str(first, "call_id", NULL);
    if (data && call_id && json_object_set_new(data, "call_id", json_string(call_id)) != 0) {
        json_decref(data);
        data = NULL;
    }
    if (!data) {
        gen_clear(&g);
        return WEIR_E_NOMEM; /* stays pending: the next event retries */
    }
    /* the initial input's deferred receipt comes first, as when it is
     * announced at once (no generation existed when it was queued) */
    int rc = announce(t, first, "new_turn", NULL);
    int r = emit(t, "generation.started", data);
    if (r != WEIR_OK) {
        gen_clear(&g);
        return r;
    }
    t->gen = g;
    for (i = 0; i < n; i++) {
        const json_t *c = json_array_get(claims, i);
        if (i != initial && (r = announce(t, c, "request_boundary", t->gen.id)) != WEIR_OK)
            rc = r;
        if (json_object_set_new(t->seen, weir__json_str(c, "id", ""), json_string(t->gen.id)))
            rc = WEIR_E_NOMEM;
    }
    t->pending_turn = 0;
    json_array_clear(t->pending_claims);
    return rc;
}

/*
 * The pending turn's claims are in: they continue the continuing
 * generation when one of them was queued before its end (pre_close), else
 * that generation finishes and they start a new one.
 */
static int finish_generation(weir_generation_tracker *t, const json_t *reason, bool durable);

static int begin_turn_generation(weir_generation_tracker *t) {
    int rc = WEIR_OK;
    if (t->gen.open && t->gen.continuing) {
        json_t *claims = t->pending_claims;
        bool cont = false;
        size_t i;
        const json_t *c;
        json_array_foreach(claims, i, c) cont = cont || json_is_true(json_object_get(c, "pre_close"));
        if (cont) { /* the same generation: no new generation.started */
            t->gen.continuing = false;
            t->gen.turn = t->pending_turn;
            json_decref(t->gen.end_reason);
            t->gen.end_reason = NULL;
            json_array_foreach(claims, i, c) {
                json_t *cl = json_pack("{s:O, s:O, s:s}", "id", json_object_get(c, "id"),
                                       "source", json_object_get(c, "source"), "delivery",
                                       "request_boundary");
                int r = cl && json_array_append_new(t->gen.claimed, cl) == 0 ? WEIR_OK
                                                                              : WEIR_E_NOMEM;
                if (r == WEIR_OK)
                    r = announce(t, c, "request_boundary", t->gen.id);
                if (json_object_set_new(t->seen, weir__json_str(c, "id", ""),
                                        json_string(t->gen.id)) != 0)
                    r = WEIR_E_NOMEM;
                if (r != WEIR_OK)
                    rc = r;
            }
            t->pending_turn = 0;
            json_array_clear(t->pending_claims);
            return rc;
        }
        json_t *reason = json_incref(t->gen.end_reason);
        rc = finish_generation(t, reason, true);
        json_decref(reason);
    }
    int r = start_generation(t);
    return r != WEIR_OK ? r : rc;
}

/* generation.finished / failed / detached for the open generation, then close it.
 * `durable` false: no turn/end in the log says so (the events carry
 * "durable":false). */
static int finish_generation(weir_generation_tracker *t, const json_t *reason, bool durable) {
    const char *kind = weir__json_str(reason, "kind", "error");
    json_t *data = correlation(t);
    const char *type;
    if (!strcmp(kind, "completed") || !strcmp(kind, "max-tokens")) {
        type = "generation.finished";
        if (data && (json_object_set(data, "text", t->gen.text) != 0 ||
                     json_object_set_new(data, "active_job_ids", json_deep_copy(t->jobs)) != 0 ||
                     json_object_set_new(data, "disposition",
                                         json_string("manager_turn_finished")) != 0 ||
                     (t->gen.usage && json_object_set(data, "usage", t->gen.usage) != 0) ||
                     (t->gen.usage && !t->gen.unpriced &&
                      json_object_set_new(data, "cost", json_pack("{s:f}", "usd", t->gen.usd)) !=
                          0))) {
            json_decref(data);
            data = NULL;
        }
    } else if (!strcmp(kind, "aborted") || !strcmp(kind, "interrupted")) {
        type = "generation.detached";
        if (data && json_object_set_new(data, "cancellation", json_string("unconfirmed")) != 0) {
            json_decref(data);
            data = NULL;
        }
    } else { /* error, blocked, anything else */
        type = "generation.failed";
        const json_t *e = json_object_get(reason, "error");
        const char *etype = weir__json_str(e, "code", !strcmp(kind, "blocked") ? "BLOCKED"
                                                                                : "UNKNOWN");
        const char *emsg = weir__json_str(e, "message", !strcmp(kind, "blocked")
                                                             ? "the step was rejected by a plugin"
                                                             : "");
        if (data && (json_object_set_new(data, "error_type", json_string(etype)) != 0 ||
                     json_object_set_new(data, "error_message", json_string(emsg)) != 0)) {
            json_decref(data);
            data = NULL;
        }
    }
    if (data && (json_object_set_new(data, "reason", json_deep_copy(reason)) != 0 ||
                 (!durable && json_object_set_new(data, "durable", json_false()) != 0))) {
        json_decref(data);
        data = NULL;
    }
    int r = emit(t, type, data);
    gen_clear(&t->gen); /* terminal: closed even when the event could not be built */
    for (int li = 0; li < 2; li++) { /* nothing waits to continue it any more */
        size_t i;
        json_t *e;
        json_array_foreach(t->lists[li], i, e) json_object_del(e, "pre_close");
    }
    return r;
}

/*
 * The claims of the generation's current turn that never reached the log
 * when that turn ended with `reason`: where their effect is known (they
 * never reached the model) input.discarded (input.held after the
 * shutdown), else input.unknown (the log failed: the insertion may have
 * been interrupted).
 */
static int report_dropped(weir_generation_tracker *t, const char *id, const char *source,
                          const char *reason, const char *gen_id);

static int settle_claims(weir_generation_tracker *t, const json_t *reason, bool durable) {
    const char *kind = weir__json_str(reason, "kind", "error");
    const char *code = weir__json_str(json_object_get(reason, "error"), "code", "");
    bool unknown = !durable || !strcmp(kind, "interrupted") ||
                   (!strcmp(kind, "error") && !strcmp(code, "IO"));
    const char *why = !strcmp(kind, "aborted")   ? "canceled"
                      : !strcmp(kind, "blocked") ? "rejected"
                      : !strcmp(kind, "error")   ? "error"
                                                 : "pre-step";
    int rc = WEIR_OK;
    size_t i;
    const json_t *c;
    json_array_foreach(t->gen.claimed, i, c) {
        const char *id = weir__json_str(c, "id", "");
        if (find_id(t->gen.input_ids, id) >= 0)
            continue;
        int r;
        if (unknown) {
            json_t *ev = json_pack("{s:s, s:s, s:O, s:O, s:s, s:s}", "input_id", id, "route",
                                   "inbox", "delivery", json_object_get(c, "delivery"), "source",
                                   json_object_get(c, "source"), "generation_id", t->gen.id,
                                   "reason", kind);
            if (ev && !durable && json_object_set_new(ev, "durable", json_false()) != 0) {
                json_decref(ev);
                ev = NULL;
            }
            r = emit(t, "input.unknown", ev);
        } else {
            r = report_dropped(t, id, weir__json_str(c, "source", ""), why, t->gen.id);
        }
        if (r != WEIR_OK)
            rc = r;
    }
    json_array_clear(t->gen.claimed);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Event handlers                                                            */
/* ------------------------------------------------------------------------ */

static int on_turn_start(weir_generation_tracker *t, const json_t *data) {
    int rc = WEIR_OK;
    if (t->gen.open && !t->gen.continuing) { /* the previous turn never ended (its log failed) */
        json_t *reason = json_pack("{s:s}", "kind", "interrupted");
        rc = reason ? settle_claims(t, reason, true) : WEIR_E_NOMEM;
        int r = reason ? finish_generation(t, reason, true) : WEIR_E_NOMEM;
        if (r != WEIR_OK)
            rc = r;
        json_decref(reason);
        if (t->gen.open)
            gen_clear(&t->gen);
    }
    json_int_t turn = weir__json_int(data, "turn", 0);
    t->pending_turn = turn > 0 && turn <= 1000000000 ? (int)turn : 0;
    json_array_clear(t->pending_claims);
    if (t->dead_turn > 0 && t->pending_turn > t->dead_turn) { /* the agent runs again */
        t->dead_turn = 0;
        json_decref(t->dead_reason);
        t->dead_reason = NULL;
    }
    return rc;
}

/* End the dead turn's generation: the open one, or the one its claims
 * start (a turn whose log failed right after its claims). */
static int settle_dead_turn(weir_generation_tracker *t) {
    if (t->dead_turn <= 0)
        return WEIR_OK;
    int rc = WEIR_OK;
    if (t->pending_turn == t->dead_turn && json_array_size(t->pending_claims) > 0)
        rc = begin_turn_generation(t);
    if (rc == WEIR_OK && t->gen.open && t->gen.continuing && t->gen.turn < t->dead_turn) {
        /* its continuation never came: its last turn's answer stands */
        json_t *reason = json_incref(t->gen.end_reason);
        rc = finish_generation(t, reason, true);
        json_decref(reason);
    }
    if (rc == WEIR_OK && t->gen.open && !t->gen.continuing && t->gen.turn == t->dead_turn) {
        rc = settle_claims(t, t->dead_reason, false);
        int r = finish_generation(t, t->dead_reason, false);
        if (r != WEIR_OK)
            rc = r;
    }
    return rc;
}

/*
 * Live agent/error.  With fatal:true the agent stopped without logging the
 * turn's end (its session log could not be written): no turn/end follows,
 * so the turn's generation fails here, with "durable":false.
 */
static int on_agent_error(weir_generation_tracker *t, const json_t *data) {
    json_int_t turn = weir__json_int(data, "turn", 0);
    if (!json_is_true(json_object_get(data, "fatal")) || turn <= 0 || turn > 1000000000)
        return WEIR_OK;
    const json_t *error = json_object_get(data, "error");
    json_t *reason = json_is_object(error)
                         ? json_pack("{s:s, s:O}", "kind", "error", "error", error)
                         : json_pack("{s:s, s:{s:s, s:s}}", "kind", "error", "error", "code",
                                     "UNKNOWN", "message", "the agent stopped");
    if (!reason)
        return WEIR_E_NOMEM;
    json_decref(t->dead_reason);
    t->dead_reason = reason;
    t->dead_turn = (int)turn;
    return settle_dead_turn(t);
}

/* Report an input the inbox dropped: input.discarded, or input.held after shutdown. */
static int report_dropped(weir_generation_tracker *t, const char *id, const char *source,
                          const char *reason, const char *gen_id) {
    json_t *ev = t->closed ? json_pack("{s:s, s:s, s:s}", "input_id", id, "source", source,
                                       "reason", "shutdown")
                           : json_pack("{s:s, s:s, s:s}", "input_id", id, "source", source,
                                       "reason", reason);
    if (ev && gen_id && json_object_set_new(ev, "generation_id", json_string(gen_id)) != 0) {
        json_decref(ev);
        ev = NULL;
    }
    return emit(t, t->closed ? "input.held" : "input.discarded", ev);
}

/* A claimed input (borrowed {id, source, target, call_id?}) joins the
 * pending turn or the open generation; turn 0 means the current one. */
static int add_claim(weir_generation_tracker *t, json_t *item, json_int_t turn) {
    if (t->pending_turn > 0 && (turn == 0 || turn == t->pending_turn))
        return json_array_append(t->pending_claims, item) == 0 ? WEIR_OK : WEIR_E_NOMEM;
    if (!t->gen.open || t->gen.continuing || (turn != 0 && turn != t->gen.turn))
        return WEIR_OK;
    json_t *c = json_pack("{s:O, s:O, s:s}", "id", json_object_get(item, "id"), "source",
                          json_object_get(item, "source"), "delivery", "request_boundary");
    if (!c || json_array_append_new(t->gen.claimed, c) != 0 ||
        json_object_set_new(t->seen, weir__json_str(item, "id", ""), json_string(t->gen.id)) != 0)
        return WEIR_E_NOMEM;
    return announce(t, item, "request_boundary", t->gen.id);
}

/*
 * input.queued for a mirrored input (borrowed) not announced yet, now that
 * its delivery is known.  `gen_id` may be NULL.
 */
static int announce(weir_generation_tracker *t, const json_t *c, const char *delivery,
                    const char *gen_id) {
    if (!c || json_is_true(json_object_get(c, "announced")))
        return WEIR_OK;
    json_t *ev = json_pack("{s:O, s:s, s:O}", "input_id", json_object_get(c, "id"), "delivery",
                           delivery, "source", json_object_get(c, "source"));
    if (ev && gen_id && json_object_set_new(ev, "generation_id", json_string(gen_id)) != 0) {
        json_decref(ev);
        ev = NULL;
    }
    return emit(t, "input.queued", ev);
}

/* Whether the mirror still holds input the continuing generation waits for. */
static bool pre_close_left(const weir_generation_tracker *t) {
    for (int li = 0; li < 2; li++) {
        size_t i;
        const json_t *e;
        json_array_foreach(t->lists[li], i, e) {
            if (json_is_true(json_object_get(e, "pre_close")))
                return true;
        }
    }
    return false;
}

/* A continuing generation whose awaited input is gone finishes now. */
static int settle_continuing(weir_generation_tracker *t) {
    if (!t->gen.open || !t->gen.continuing || pre_close_left(t) ||
        json_array_size(t->pending_claims) > 0)
        return WEIR_OK;
    json_t *reason = json_incref(t->gen.end_reason);
    int rc = finish_generation(t, reason, true);
    json_decref(reason);
    return rc;
}

/* True when `id` is queued, claimed in the pending turn or the open generation. */
static bool known_id(const weir_generation_tracker *t, const char *id) {
    return find_id(t->lists[0], id) >= 0 || find_id(t->lists[1], id) >= 0 ||
           find_id(t->pending_claims, id) >= 0 || (t->gen.open && claimed_input(t, id));
}

/* Insertion: mirror it and report input.queued. */
/* Whether mirrored `list` holds queued input (known, not held). */
static bool queued_any(const json_t *list) {
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e) {
        if (!json_is_object(e) || !json_is_true(json_object_get(e, "held")))
            return true; /* input never seen queued counts too */
    }
    return false;
}

static int spliced_insert(weir_generation_tracker *t, json_t *list, const char *target,
                          const json_t *data) {
    bool next_step = strcmp(target, "next-step") == 0;
    json_int_t anchor = weir__json_int(data, "anchor_turn", 0);
    if (anchor < 0 || anchor > 1000000000)
        anchor = 0;
    json_int_t start = weir__json_int(data, "start", 0);
    if (start < 0 || start > 1000000)
        return WEIR_OK;
    while (json_array_size(list) < (size_t)start) /* input the tracker never saw */
        if (json_array_append_new(list, json_null()) != 0)
            return WEIR_E_NOMEM;
    size_t at = (size_t)start, i;
    const json_t *m;
    int rc = WEIR_OK;
    json_array_foreach(json_object_get(data, "inserted"), i, m) {
        const char *id = message_id(m);
        char sbuf[256];
        const char *source = source_of(m, sbuf, sizeof sbuf);
        /* a background job's result: the job is no longer running */
        const char *job = weir__json_str(json_object_get(m, "source"), "job_id", NULL);
        long ji = job ? find_id(t->jobs, job) : -1;
        if (ji >= 0)
            json_array_remove(t->jobs, (size_t)ji);
        else if (job && add_id(t->done_jobs, job) != WEIR_OK) /* before its receipt */
            rc = WEIR_E_NOMEM;
        const char *call_id = weir__json_str(json_object_get(m, "source"), "call_id", NULL);
        json_t *item = id ? json_pack("{s:s, s:s, s:s}", "id", id, "source", source, "target",
                                      target)
                          : json_null();
        if (item && call_id && id &&
            json_object_set_new(item, "call_id", json_string(call_id)) != 0) {
            json_decref(item);
            item = NULL;
        }
        if (item && id && anchor > 0 &&
            json_object_set_new(item, "anchor", json_integer(anchor)) != 0) {
            json_decref(item);
            item = NULL;
        }
        /* The receipt comes once the delivery is known.  Known now: a
         * followup queued while no generation is open or starting and no
         * other followup is queued starts the next generation; anchored input
         * of the open generation's running turn joins it at its next
         * request boundary.  Else the claim tells (announce).  (A queued
         * followup is the next generation's initial input, before any
         * next-step input.) */
        const char *delivery = NULL;
        if (item && id && anchor > 0 && t->gen.open && !t->gen.continuing &&
            t->gen.turn == anchor)
            delivery = "request_boundary";
        else if (item && id && anchor == 0 && !next_step && !t->gen.open &&
                 t->pending_turn == 0 && !queued_any(t->lists[0]))
            delivery = "new_turn";
        if (!item || json_array_insert_new(list, at++, item) != 0) {
            rc = WEIR_E_NOMEM;
            continue;
        }
        if (!delivery)
            continue;
        int r = announce(t, item, delivery, anchor > 0 ? t->gen.id : NULL);
        if (r == WEIR_OK && json_object_set_new(item, "announced", json_true()) != 0)
            r = WEIR_E_NOMEM;
        if (r != WEIR_OK)
            rc = r;
    }
    return rc;
}

/* input.held for anchored input of turn `turn` its turn did not take, or
 * (turn 0) for input an open held because a shutdown could not log its
 * removal. */
static int report_held(weir_generation_tracker *t, const char *id, const char *source, int turn) {
    json_t *ev = json_pack("{s:s, s:s, s:s}", "input_id", id, "source", source, "reason",
                           turn > 0 ? "turn_ended" : "shutdown");
    if (ev && turn > 0 && t->gen.open && t->gen.turn == turn &&
        json_object_set_new(ev, "generation_id", json_string(t->gen.id)) != 0) {
        json_decref(ev);
        ev = NULL;
    }
    return emit(t, "input.held", ev);
}

/* Deletion: a claim, a discard (outcome "canceled") or a hold ("held"). */
static int spliced_delete(weir_generation_tracker *t, json_t *list, const json_t *data) {
    json_int_t n = weir__json_int(data, "removed_count", 0);
    json_int_t start = weir__json_int(data, "start", 0);
    if (n <= 0 || n > 1000000 || start < 0 || start > 1000000)
        return WEIR_OK;
    bool canceled = strcmp(weir__json_str(data, "outcome", ""), "canceled") == 0;
    bool held = strcmp(weir__json_str(data, "outcome", ""), "held") == 0;
    json_t *dropped = json_array(); /* ids reported dropped here */
    int rc = dropped ? WEIR_OK : WEIR_E_NOMEM;
    for (json_int_t k = 0; k < n; k++) {
        json_t *e = json_incref(json_array_get(list, (size_t)start));
        json_array_remove(list, (size_t)start);
        int r = WEIR_OK;
        if (!json_is_object(e)) { /* input the tracker never saw: the live event names it */
            if (canceled)
                t->unknown_discards++;
            else if (held)
                t->unknown_holds++;
            else
                t->unknown_claims++;
        } else if (json_is_true(json_object_get(e, "held"))) {
            /* reported input.held when the shutdown could not log its removal */
        } else if (held) { /* anchored input its turn did not take */
            r = report_held(t, weir__json_str(e, "id", ""), weir__json_str(e, "source", ""),
                            (int)weir__json_int(e, "anchor", 0));
        } else if (canceled) {
            r = report_dropped(t, weir__json_str(e, "id", ""), weir__json_str(e, "source", ""),
                               "canceled", NULL);
            if (dropped && json_array_append(dropped, json_object_get(e, "id")) != 0)
                r = WEIR_E_NOMEM;
        } else {
            r = add_claim(t, e, 0);
        }
        json_decref(e);
        if (r != WEIR_OK)
            rc = r;
    }
    /* while unknown discards are pending, remember which ids were reported */
    if (dropped && t->unknown_discards > 0 && json_array_extend(t->recent_discards, dropped) != 0)
        rc = WEIR_E_NOMEM;
    json_decref(dropped);
    if (canceled || held) {
        int r = settle_continuing(t);
        if (r != WEIR_OK)
            rc = r;
    }
    return rc;
}

static int on_spliced(weir_generation_tracker *t, const json_t *data) {
    const char *target = weir__json_str(data, "target", "");
    int li = !strcmp(target, "next-turn") ? 0 : !strcmp(target, "next-step") ? 1 : -1;
    if (li < 0)
        return WEIR_OK;
    if (json_array_size(json_object_get(data, "inserted")) > 0)
        return spliced_insert(t, t->lists[li], target, data);
    return spliced_delete(t, t->lists[li], data);
}

/* Live claim: only consulted for input the tracker never saw queued (a
 * resumed session's inbox); everything else comes from the log's splices. */
static int on_claimed(weir_generation_tracker *t, const json_t *data) {
    const json_t *m = json_object_get(data, "message");
    const char *id = message_id(m);
    if (t->unknown_claims == 0 || !id || known_id(t, id))
        return WEIR_OK;
    char sbuf[256];
    json_t *item = json_pack("{s:s, s:s, s:s}", "id", id, "source", source_of(m, sbuf, sizeof sbuf),
                             "target", "");
    int rc = item ? add_claim(t, item, weir__json_int(data, "turn", 0)) : WEIR_E_NOMEM;
    json_decref(item);
    t->unknown_claims--;
    return rc;
}

/* Live discard: as on_claimed, for input the tracker never saw queued. */
static int on_discarded(weir_generation_tracker *t, const json_t *data) {
    const json_t *m = json_object_get(data, "message");
    const char *id = message_id(m);
    if (t->unknown_discards == 0 || !id || known_id(t, id))
        return WEIR_OK;
    long ri = find_id(t->recent_discards, id);
    if (ri >= 0) { /* already reported from the splice */
        json_array_remove(t->recent_discards, (size_t)ri);
        return WEIR_OK;
    }
    t->unknown_discards--;
    if (t->unknown_discards == 0)
        json_array_clear(t->recent_discards);
    char sbuf[256];
    return report_dropped(t, id, source_of(m, sbuf, sizeof sbuf), "canceled", NULL);
}

/* Live hold: for anchored input the tracker never saw queued. */
static int on_held(weir_generation_tracker *t, const json_t *data) {
    const json_t *m = json_object_get(data, "message");
    const char *id = message_id(m);
    if (t->unknown_holds == 0 || !id || known_id(t, id))
        return WEIR_OK;
    t->unknown_holds--;
    char sbuf[256];
    return report_held(t, id, source_of(m, sbuf, sizeof sbuf),
                       (int)weir__json_int(data, "turn", 0));
}

/* Live agent/inbox/acknowledged: input.acknowledged {input_id, duplicate,
 * generation_id?} (the generation that claimed it, when known). */
static int on_acknowledged(weir_generation_tracker *t, const json_t *data) {
    const char *id = message_id(json_object_get(data, "message"));
    if (!id)
        return WEIR_OK;
    const char *gen = json_string_value(json_object_get(t->seen, id));
    json_t *ev = json_pack("{s:s, s:b}", "input_id", id, "duplicate", 1);
    if (ev && gen && json_object_set_new(ev, "generation_id", json_string(gen)) != 0) {
        json_decref(ev);
        ev = NULL;
    }
    return emit(t, "input.acknowledged", ev);
}

static int on_user_message(weir_generation_tracker *t, const json_t *data) {
    const json_t *m = json_object_get(data, "message");
    if (!t->gen.open)
        return WEIR_OK;
    int rc = set_text(t, NULL);
    const char *id = message_id(m);
    const json_t *c = id ? claimed_input(t, id) : NULL;
    if (rc != WEIR_OK || !c || find_id(t->gen.input_ids, id) >= 0)
        return rc;
    json_t *ev = json_pack("{s:s, s:O, s:O, s:s}", "input_id", id, "delivery",
                           json_object_get(c, "delivery"), "source", json_object_get(c, "source"),
                           "generation_id", t->gen.id);
    if (!ev || add_id(t->gen.input_ids, id) != WEIR_OK) {
        json_decref(ev);
        return WEIR_E_NOMEM;
    }
    return emit(t, "input.delivered", ev);
}

/* Add the usage and cost of an assistant/message or assistant/attempt
 * (`data`, borrowed) to the open generation's sums: every non-negative
 * integer member of `usage` (input_tokens, cache_read_tokens, ...). */
static int add_usage(weir_generation_tracker *t, const json_t *data) {
    const json_t *usage = json_object_get(data, "usage");
    if (!t->gen.open || !json_is_object(usage))
        return WEIR_OK;
    if (!t->gen.usage && !(t->gen.usage = json_object()))
        return WEIR_E_NOMEM;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)usage, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            continue;
        json_int_t sum = weir__json_int(t->gen.usage, k, 0) + json_integer_value(v);
        if (json_object_set_new(t->gen.usage, k, json_integer(sum)) != 0)
            return WEIR_E_NOMEM;
    }
    const json_t *usd = json_object_get(json_object_get(data, "cost"), "usd");
    if (json_is_number(usd) && json_number_value(usd) >= 0)
        t->gen.usd += json_number_value(usd);
    else
        t->gen.unpriced = true;
    return WEIR_OK;
}

static int on_assistant_message(weir_generation_tracker *t, const json_t *data) {
    if (add_usage(t, data) != WEIR_OK)
        return WEIR_E_NOMEM;
    bool calls = false;
    json_t *text = weir__generation_text(json_object_get(data, "message"), &calls);
    if (!text)
        return WEIR_E_NOMEM;
    int rc = set_text(t, calls ? NULL : text);
    if (rc == WEIR_OK && json_string_length(text) > 0) {
        json_t *ev = t->gen.open ? correlation(t) : json_object();
        json_int_t turn = weir__json_int(data, "turn", 0), step = weir__json_int(data, "step", 0);
        if (ev && (json_object_set(ev, "text", text) != 0 ||
                   json_object_set_new(ev, "turn", json_integer(turn)) != 0 ||
                   json_object_set_new(ev, "step", json_integer(step)) != 0)) {
            json_decref(ev);
            ev = NULL;
        }
        rc = emit(t, "assistant.message", ev);
    }
    json_decref(text);
    return rc;
}

static int on_tool_result(weir_generation_tracker *t, const json_t *data) {
    int rc = set_text(t, NULL);
    char job[128];
    const char *id = weir__generation_receipt_job(json_object_get(data, "message"), job,
                                                  sizeof job);
    long di = id ? find_id(t->done_jobs, id) : -1;
    if (di >= 0) /* the job finished before its receipt was logged */
        json_array_remove(t->done_jobs, (size_t)di);
    else if (rc == WEIR_OK && id)
        rc = add_id(t->jobs, id);
    return rc;
}

/*
 * The log's job events (docs/tools.md) as host events: job.queued {job_id,
 * call_id, tool, generation_id?}, and the one terminal event of a job,
 * job.returned | job.failed | job.cancelled {job_id, call_id, tool,
 * outcome:"tool_report"|"failed"|"cancelled", effects:"not_rolled_back",
 * error_type? and error_message? (failed), cause? (cancelled),
 * delivered?:false}.
 */
static int on_job(weir_generation_tracker *t, const char *type, const json_t *data) {
    const char *kind = type + 4; /* after "job/" */
    json_t *ev = json_pack("{s:s, s:s, s:s}", "job_id", weir__json_str(data, "job_id", ""),
                           "call_id", weir__json_str(data, "call_id", ""), "tool",
                           weir__json_str(data, "tool", ""));
    bool ok = ev != NULL;
    if (ok && !strcmp(kind, "queued")) {
        ok = !t->gen.open ||
             json_object_set_new(ev, "generation_id", json_string(t->gen.id)) == 0;
    } else if (ok) {
        const json_t *result = json_object_get(data, "result");
        const json_t *e = json_object_get(result, "error");
        const char *cause = weir__json_str(data, "cause", NULL);
        /* the error's own words, else the result's text the model is
         * given (a job a crash cut has only a code) */
        const char *emsg = weir__json_str(e, "reason", NULL);
        if (!emsg || !*emsg)
            emsg = weir__json_str(e, "message", NULL);
        if (!emsg || !*emsg)
            emsg = weir__json_str(json_array_get(json_object_get(result, "content"), 0), "text",
                                  NULL);
        if (emsg && !strncmp(emsg, "Error: ", 7))
            emsg += 7;
        if (!emsg || !*emsg)
            emsg = "the background job failed";
        ok = json_object_set_new(ev, "outcome",
                                 json_string(!strcmp(kind, "returned") ? "tool_report" : kind)) ==
                 0 &&
             json_object_set_new(ev, "effects", json_string("not_rolled_back")) == 0 &&
             (strcmp(kind, "failed") ||
              (json_object_set_new(ev, "error_type",
                                   json_string(weir__json_str(e, "code", "TOOL_ERROR"))) == 0 &&
               json_object_set_new(ev, "error_message", json_string(emsg)) == 0)) &&
             (!cause || json_object_set_new(ev, "cause", json_string(cause)) == 0) &&
             (!json_is_false(json_object_get(data, "delivered")) ||
              json_object_set_new(ev, "delivered", json_false()) == 0);
    }
    if (!ok) {
        json_decref(ev);
        return WEIR_E_NOMEM;
    }
    char name[32];
    snprintf(name, sizeof name, "job.%s", kind);
    return emit(t, name, ev);
}

static int on_steering(weir_generation_tracker *t, const char *what, const json_t *data) {
    const char *id = weir__json_str(data, "input_id", NULL);
    if (!id || !*id)
        return WEIR_OK;
    bool open = t->gen.open && !t->gen.continuing;
    if (open && json_object_set_new(t->seen, id, json_string(t->gen.id)) != 0)
        return WEIR_E_NOMEM;
    if (!strcmp(what, "unknown")) { /* a native attempt whose effect is unknown */
        char sbuf[256];
        json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s}", "input_id", id, "route", "native",
                               "source", source_of(json_object_get(data, "message"), sbuf,
                                                   sizeof sbuf),
                               "reason", "native_attempt", "error",
                               weir__json_str(data, "error", ""));
        if (ev && open &&
            json_object_set_new(ev, "generation_id", json_string(t->gen.id)) != 0) {
            json_decref(ev);
            ev = NULL;
        }
        return emit(t, "input.unknown", ev);
    }
    if (!strcmp(what, "discarded")) { /* agent/pre-step let none of it enter */
        long i = open ? find_id(t->gen.accepted, id) : -1;
        if (i >= 0)
            json_array_remove(t->gen.accepted, (size_t)i);
        char sbuf[256];
        json_t *ev = json_pack("{s:s, s:s, s:s}", "input_id", id, "source",
                               source_of(json_object_get(data, "message"), sbuf, sizeof sbuf),
                               "reason", weir__json_str(data, "reason", "pre-step"));
        if (ev && open &&
            json_object_set_new(ev, "generation_id", json_string(t->gen.id)) != 0) {
            json_decref(ev);
            ev = NULL;
        }
        return emit(t, "input.discarded", ev);
    }
    if (!strcmp(what, "refused")) { /* queued now: no longer natively accepted */
        long i = open ? find_id(t->gen.accepted, id) : -1;
        if (i >= 0)
            json_array_remove(t->gen.accepted, (size_t)i);
        return WEIR_OK;
    }
    if (strcmp(what, "accepted") != 0 && strcmp(what, "applied") != 0)
        return WEIR_OK; /* owned: the provider reports on */
    bool applied = !strcmp(what, "applied");
    int rc = open ? add_id(applied ? t->gen.input_ids : t->gen.accepted, id) : WEIR_OK;
    if (rc != WEIR_OK)
        return rc;
    json_t *ev = json_pack("{s:s}", "input_id", id);
    if (ev && open && json_object_set_new(ev, "generation_id", json_string(t->gen.id)) != 0) {
        json_decref(ev);
        ev = NULL;
    }
    return emit(t, applied ? "steering.applied" : "steering.accepted", ev);
}

static int on_turn_end(weir_generation_tracker *t, const json_t *data) {
    json_int_t turn = weir__json_int(data, "turn", 0);
    if (t->pending_turn > 0 && turn == t->pending_turn) { /* claimed nothing: no generation */
        t->pending_turn = 0;
        json_array_clear(t->pending_claims);
    }
    if (!t->gen.open || t->gen.continuing || turn != t->gen.turn)
        return WEIR_OK;
    const json_t *given = json_object_get(data, "reason");
    json_t *reason = json_is_object(given) ? json_deep_copy(given)
                                           : json_pack("{s:s}", "kind", "error");
    if (!reason)
        return WEIR_E_NOMEM;
    int rc = settle_claims(t, reason, true);
    const char *kind = weir__json_str(reason, "kind", "");
    if (!strcmp(kind, "completed") || !strcmp(kind, "max-tokens")) {
        /* Ordinary input queued before this end continues the generation
         * in the next turn (docs/generations.md: the end yields to input
         * already accepted); a job's result alone does not. */
        bool waits = false;
        for (int li = 0; li < 2; li++) {
            size_t i;
            json_t *e;
            json_array_foreach(t->lists[li], i, e) {
                if (!json_is_object(e) || json_is_true(json_object_get(e, "held")) ||
                    !strncmp(weir__json_str(e, "source", ""), "service", 7))
                    continue;
                if (json_object_set_new(e, "pre_close", json_true()) != 0)
                    rc = WEIR_E_NOMEM;
                waits = true;
            }
        }
        if (waits) {
            t->gen.continuing = true;
            t->gen.end_reason = reason;
            return rc;
        }
    }
    int r = finish_generation(t, reason, true);
    json_decref(reason);
    return r != WEIR_OK ? r : rc;
}

/*
 * The shutdown could not log the inbox's removal (the log cannot be
 * written): report each input still queued input.held with "durable":false,
 * and mark it, so that a removal logged later reports nothing more.
 */
static int hold_queued(weir_generation_tracker *t) {
    int rc = WEIR_OK;
    for (int li = 0; li < 2; li++) {
        size_t i;
        json_t *e;
        json_array_foreach(t->lists[li], i, e) {
            if (!json_is_object(e) || json_is_true(json_object_get(e, "held")))
                continue;
            int r = emit(t, "input.held",
                         json_pack("{s:s, s:s, s:s, s:b}", "input_id",
                                   weir__json_str(e, "id", ""), "source",
                                   weir__json_str(e, "source", ""), "reason", "shutdown",
                                   "durable", 0));
            if (r == WEIR_OK && json_object_set_new(e, "held", json_true()) != 0)
                r = WEIR_E_NOMEM;
            json_object_del(e, "pre_close");
            if (r != WEIR_OK)
                rc = r;
        }
    }
    int r = settle_continuing(t);
    return r != WEIR_OK ? r : rc;
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                */
/* ------------------------------------------------------------------------ */

int weir_generation_tracker_create(weir_generation_event_fn cb, void *user_data,
                                   weir_generation_tracker **out, weir_error *err) {
    if (out)
        *out = NULL;
    if (!cb || !out)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_generation_tracker_create: NULL argument");
    weir_generation_tracker *t = weir__calloc(1, sizeof *t);
    if (!t)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "generation tracker: out of memory");
    t->cb = cb;
    t->user_data = user_data;
    t->lists[0] = json_array();
    t->lists[1] = json_array();
    t->recent_discards = json_array();
    t->jobs = json_array();
    t->done_jobs = json_array();
    t->pending_claims = json_array();
    t->seen = json_object();
    if (!t->lists[0] || !t->lists[1] || !t->recent_discards || !t->jobs || !t->done_jobs ||
        !t->pending_claims || !t->seen || pthread_mutex_init(&t->mu, NULL) != 0) {
        json_decref(t->seen);
        json_decref(t->lists[0]);
        json_decref(t->lists[1]);
        json_decref(t->recent_discards);
        json_decref(t->jobs);
        json_decref(t->done_jobs);
        json_decref(t->pending_claims);
        weir__free(t);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "generation tracker: out of memory");
    }
    *out = t;
    return WEIR_OK;
}

void weir_generation_tracker_destroy(weir_generation_tracker *t) {
    if (!t)
        return;
    gen_clear(&t->gen);
    json_decref(t->dead_reason);
    json_decref(t->lists[0]);
    json_decref(t->lists[1]);
    json_decref(t->recent_discards);
    json_decref(t->jobs);
    json_decref(t->done_jobs);
    json_decref(t->pending_claims);
    json_decref(t->seen);
    pthread_mutex_destroy(&t->mu);
    weir__free(t);
}

/* Events of the log (durable) and of the agent (live) that the tracker reads. */
static int dispatch(weir_generation_tracker *t, const char *type, const json_t *data,
                    bool durable) {
    if (durable) {
        if (!strcmp(type, "turn/start"))
            return on_turn_start(t, data);
        if (!strcmp(type, "agent/inbox/spliced"))
            return on_spliced(t, data);
        if (!strcmp(type, "user/message"))
            return on_user_message(t, data);
        if (!strcmp(type, "assistant/message"))
            return on_assistant_message(t, data);
        if (!strcmp(type, "assistant/attempt"))
            return add_usage(t, data);
        if (!strcmp(type, "tool/result"))
            return on_tool_result(t, data);
        if (!strcmp(type, "job/queued") || !strcmp(type, "job/returned") ||
            !strcmp(type, "job/failed") || !strcmp(type, "job/cancelled"))
            return on_job(t, type, data);
        if (!strcmp(type, "turn/end"))
            return on_turn_end(t, data);
        return WEIR_OK;
    }
    if (!strcmp(type, "agent/inbox/claimed"))
        return on_claimed(t, data);
    if (!strcmp(type, "agent/inbox/discarded"))
        return on_discarded(t, data);
    if (!strcmp(type, "agent/error"))
        return on_agent_error(t, data);
    if (!strncmp(type, "steering/", 9))
        return on_steering(t, type + 9, data);
    if (!strcmp(type, "agent/inbox/acknowledged"))
        return on_acknowledged(t, data);
    if (!strcmp(type, "agent/inbox/held"))
        return on_held(t, data);
    if (!strcmp(type, "agent/status") &&
        !strcmp(weir__json_str(data, "status", ""), "idle") && t->gen.open &&
        t->gen.continuing) { /* nothing continued it: its answer stands */
        json_t *reason = json_incref(t->gen.end_reason);
        int rc = finish_generation(t, reason, true);
        json_decref(reason);
        return rc;
    }
    return WEIR_OK;
}

int weir_generation_tracker_feed(weir_generation_tracker *t, const json_t *event, bool durable) {
    const char *type = json_string_value(json_object_get(event, "type"));
    if (!t || !type)
        return WEIR_E_INVAL;
    const json_t *data = json_object_get(event, "data");
    if (!json_is_object(data))
        data = NULL;
    pthread_mutex_lock(&t->mu);
    int rc = WEIR_OK;
    /* The first event after a turn's claims starts its generation. */
    if (durable && t->pending_turn > 0 && json_array_size(t->pending_claims) > 0 &&
        strcmp(type, "agent/inbox/spliced") != 0 && strcmp(type, "turn/start") != 0)
        rc = begin_turn_generation(t);
    int r = dispatch(t, type, data, durable);
    if (r == WEIR_OK) /* events of a dead turn that arrive after its end */
        r = settle_dead_turn(t);
    pthread_mutex_unlock(&t->mu);
    return rc != WEIR_OK ? rc : r;
}

int weir_generation_tracker_shutdown(weir_generation_tracker *t, weir_agent *agent,
                                     weir_error *err) {
    if (!t || !agent)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_generation_tracker_shutdown: NULL argument");
    pthread_mutex_lock(&t->mu);
    t->closed = true;
    pthread_mutex_unlock(&t->mu);
    /* The tracker's lock is not held here: the agent feeds these events
     * back through the embedder's on_event, maybe on this thread. */
    weir__inbox_stop(agent->e.inbox); /* the stop fence: no new input from here on */
    weir_agent_cancel(agent, "disposed", false);
    int rc = weir__inbox_clear(agent->e.inbox, err);
    if (rc != WEIR_OK) { /* the log took no removal: hold what is still queued anyway */
        /* and say so where the next open looks (the file store's hold
         * marker: an empty file), so that it holds the input too */
        weir_error e;
        if (agent->file_store && weir__inbox_count(agent->e.inbox, false) +
                                         weir__inbox_count(agent->e.inbox, true) >
                                     0 &&
            weir__store_file_mark_held(weir__log_path(agent->e.log), true, &e) != WEIR_OK)
            weir__warn("weir: %s: the next open of the session replays the input the shutdown "
                       "reported held",
                       e.text);
        pthread_mutex_lock(&t->mu);
        (void)hold_queued(t); /* out of memory leaves an input unreported; rc says why */
        pthread_mutex_unlock(&t->mu);
    }
    return rc;
}

int weir_generation_tracker_turn(weir_generation_tracker *t, const char *generation_id) {
    if (!t || !generation_id)
        return 0;
    pthread_mutex_lock(&t->mu);
    int turn = t->gen.open && !t->gen.continuing && strcmp(t->gen.id, generation_id) == 0
                   ? t->gen.turn
                   : 0;
    pthread_mutex_unlock(&t->mu);
    return turn;
}
