/*
 * core/engine/input.c - input into an agent (docs/generations.md): every
 * send's one step (normalize, the duplicate check, the caps, the insert),
 * the native-steering window a provider with steer_live opens while it
 * streams, its reports (stream_steering), the wake latch, and the
 * background jobs' wake.  core/engine/engine.h.
 */
#include <stdio.h>
#include <string.h>

#include "engine.h"

/* New reference: {role:"user", content:[blocks], source, id}, or NULL + err. */
static json_t *normalize_message(const json_t *m, weir_send_mode mode, const char *input_id,
                                 weir_error *err) {
    if (!json_is_object(m)) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "message: expected an object");
        return NULL;
    }
    const char *role = weir__json_str(m, "role", "user");
    if (strcmp(role, "user") != 0) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "message.role: expected \"user\", got \"%s\"",
                  role);
        return NULL;
    }
    const json_t *content = json_object_get(m, "content");
    const json_t *source = json_object_get(m, "source");
    if (source && !json_is_object(source)) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "message.source: expected an object");
        return NULL;
    }
    if (json_is_array(content)) {
        size_t i;
        const json_t *b;
        json_array_foreach(content, i, b) {
            if (!json_is_string(json_object_get(b, "type"))) {
                weir__err(err, WEIR_E_INVAL, NULL, NULL,
                          "message.content[%zu]: expected a block with a \"type\"", i);
                return NULL;
            }
        }
    } else if (!json_is_string(content)) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL,
                  "message.content: expected a string or an array of blocks");
        return NULL;
    }
    const char *mid = input_id ? input_id : weir__json_str(m, "id", NULL);
    char idbuf[64];
    if (!mid)
        mid = weir__random_id(idbuf, sizeof idbuf, "in");
    else if (!*mid) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "input id: must not be empty");
        return NULL;
    }
    json_t *out = json_pack("{s:s}", "role", "user");
    if (out && json_is_string(content))
        json_object_set_new(out, "content",
                            json_pack("[{s:s, s:O}]", "type", "text", "text", content));
    else if (out)
        json_object_set_new(out, "content", json_deep_copy(content));
    /* the caller's source (e.g. {"pinned":true}) keeps its fields; a kind
     * it does not give is the mode's */
    json_t *src = source ? json_deep_copy(source) : json_object();
    if (src && !json_is_string(json_object_get(src, "kind")))
        json_object_set_new(src, "kind",
                            json_string(mode == WEIR_SEND_FOLLOWUP ? "human" : "steer"));
    if (out && src)
        json_object_set_new(out, "source", src);
    else
        json_decref(src);
    if (out)
        json_object_set_new(out, "id", json_string(mid));
    if (!out || !json_object_get(out, "content") || !json_object_get(out, "source") ||
        !json_object_get(out, "id")) {
        json_decref(out);
        weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        return NULL;
    }
    return out;
}

/* Characters (code points) of the message's text blocks. */
/* Code points of a UTF-8 string (NULL: 0). */
static size_t utf8_chars(const char *t) {
    size_t n = 0;
    for (; t && *t; t++)
        n += ((unsigned char)*t & 0xC0) != 0x80;
    return n;
}

size_t weir__message_text_chars(const json_t *message) {
    const json_t *content = json_object_get(message, "content");
    if (json_is_string(content)) /* the short form, before normalization */
        return utf8_chars(json_string_value(content));
    size_t n = 0, i;
    const json_t *b;
    json_array_foreach(content, i, b) n += utf8_chars(weir__json_str(b, "text", NULL));
    return n;
}

/* Only text blocks (native steering carries no attachments). */
static bool text_only(const json_t *msg) {
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(msg, "content"), i, b) {
        if (strcmp(weir__json_str(b, "type", ""), "text") != 0)
            return false;
    }
    return true;
}

/* An identical resubmission: nothing is queued; say so live. */
static void acknowledge(weir__engine *eng, const json_t *msg) {
    weir__engine_live(eng, "agent/inbox/acknowledged",
                     json_pack("{s:O, s:b}", "message", msg, "duplicate", 1));
}

void weir__engine_wake(weir__engine *eng) {
    pthread_mutex_lock(&eng->mu);
    eng->wake = true;
    pthread_cond_broadcast(&eng->cv);
    weir_wake_fn fn = eng->closing ? NULL : eng->on_wake;
    pthread_mutex_unlock(&eng->mu);
    if (fn)
        fn(eng->user_data);
}

/* Live steering/<what> {input_id, turn, step, ...extra} (extra stolen, may be NULL). */
static void steering_event(weir__engine *eng, const char *what, const json_t *msg,
                           const weir_stream *st, json_t *extra) {
    char type[48];
    snprintf(type, sizeof type, "steering/%s", what);
    json_t *data = json_pack("{s:s, s:i, s:i}", "input_id", weir__json_str(msg, "id", ""),
                             "turn", st ? st->turn : 0, "step", st ? st->step : 0);
    if (data && extra && json_object_update(data, extra) != 0) {
        json_decref(data);
        data = NULL;
    }
    json_decref(extra);
    weir__engine_live(eng, type, data);
}

typedef enum native_outcome { NATIVE_NONE, NATIVE_REFUSED, NATIVE_OWNED, NATIVE_UNKNOWN } native_outcome;

/*
 * Offer ordinary input (any mode) to the provider streaming the running
 * turn's request (send_mu held).  Eligible: nothing queued before it (later
 * input never overtakes an earlier boundary batch) and only text.
 * `next_step` is where the input goes if the provider refuses it later
 * (stream_steering "refused").  NATIVE_NONE when no window is open.
 */
static native_outcome try_native(weir__engine *eng, json_t *msg, bool next_step) {
    if (!text_only(msg) || weir__inbox_count(eng->inbox, false) > 0 ||
        weir__inbox_count(eng->inbox, true) > 0)
        return NATIVE_NONE;
    const char *id = weir__json_str(msg, "id", "");
    pthread_mutex_lock(&eng->mu);
    const weir__provider_entry *pe = eng->closing ? NULL : eng->native_pe;
    weir_stream *st = eng->native_stream;
    /* pending before the call, so that the provider may report on it from
     * inside steer_live (stream_steering "accepted") */
    bool kept = pe && json_object_set_new(eng->native_owned, id,
                                          json_pack("{s:O, s:b}", "message", msg, "next_step",
                                                    next_step)) == 0;
    if (pe && kept)
        eng->native_busy++;
    pthread_mutex_unlock(&eng->mu);
    if (!pe)
        return NATIVE_NONE;
    if (!kept) { /* out of memory: use the queue */
        weir__warn("weir: agent %s: out of memory offering input %s natively", eng->id, id);
        return NATIVE_NONE;
    }
    weir_error e;
    weir_error_clear(&e);
    int r = pe->vt.steer_live(pe->self, st, msg, &e);
    native_outcome out = r == 0 ? NATIVE_REFUSED : r == 1 ? NATIVE_OWNED : NATIVE_UNKNOWN;
    /* owned, or unknown: it stays remembered, so that a resubmission never
     * replays it; a refusal had no effect */
    pthread_mutex_lock(&eng->mu);
    if (out == NATIVE_REFUSED)
        json_object_del(eng->native_owned, id);
    pthread_mutex_unlock(&eng->mu);
    if (out == NATIVE_OWNED)
        steering_event(eng, "owned", msg, st, json_pack("{s:O, s:s}", "message", msg, "provider",
                                                       pe->id));
    else if (out == NATIVE_UNKNOWN)
        steering_event(eng, "unknown", msg, st,
                       json_pack("{s:O, s:s, s:s, s:s}", "message", msg, "provider", pe->id,
                                 "route", "native", "error",
                                 e.text[0] ? e.text
                                 : r < 0   ? "steer_live failed"
                                           : "steer_live gave an indeterminate answer"));
    pthread_mutex_lock(&eng->mu);
    eng->native_busy--;
    pthread_cond_broadcast(&eng->cv);
    pthread_mutex_unlock(&eng->mu);
    return out;
}

static const char *mode_name(weir_send_mode mode) {
    return mode == WEIR_SEND_FOLLOWUP ? "followup" : mode == WEIR_SEND_STEER ? "steer" : "inject";
}

/* agent/admit's default: the input as given. */
static json_t *admit_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call, (void)args, (void)ctx;
    return json_pack("{s:s}", "kind", "admit");
}

/*
 * agent/admit (docs/lifecycle.md, "Admission"): on the sender's thread,
 * before anything of the input is logged.  *msg (normalized, owned) may be
 * replaced by the admitted rewrite (normalized again, with its id).  A
 * refusal is E_REFUSED with the plugin's reason; a failure of the chain
 * refuses too (fail closed: a guard that cannot answer lets nothing in).
 * The hook's provenance (hook/decision rewrite or refuse, with the input id
 * and the reason, never the content) is logged by the chain.
 */
static int admit(weir__engine *eng, json_t **msg, weir_send_mode mode, weir__send_kind kind,
                 weir_error *err) {
    if (kind == WEIR__SEND_INTERNAL || weir__hooks_count(eng->hooks, "agent/admit") == 0)
        return WEIR_OK;
    const char *id = weir__json_str(*msg, "id", "");
    json_t *args = json_pack("{s:s, s:s, s:s, s:s, s:O}", "agent", eng->id, "input_id", id,
                             "mode", mode_name(mode), "origin",
                             kind == WEIR__SEND_STORED ? "store" : "send", "message", *msg);
    if (!args)
        return weir__err(err, WEIR_E_NOMEM, NULL, "agent/admit", "out of memory");
    weir_error e;
    weir_error_clear(&e);
    const char *author = NULL;
    json_t *res = weir__hook_invoke_author(eng->hooks, "agent/admit", eng->handle, &eng->signal,
                                           args, admit_default, NULL, &author, &e);
    json_decref(args);
    if (!res)
        return weir__err(err, e.code ? e.code : WEIR_E_HOOK_FAILED, e.plugin, "agent/admit",
                         "input '%s' refused: %s", id,
                         e.text[0] ? e.text : weir_strerror((int)e.code));
    int rc = WEIR_OK;
    const char *verdict = weir__json_str(res, "kind", "admit");
    const json_t *rewrite = json_object_get(res, "message");
    if (!strcmp(verdict, "refuse")) {
        rc = weir__err(err, WEIR_E_REFUSED, author, "agent/admit",
                       "input '%s' refused by plugin %s: %s", id, author ? author : "?",
                       weir__json_str(res, "reason", "no reason given"));
    } else if (rewrite) {
        weir_error ne;
        weir_error_clear(&ne);
        json_t *admitted = normalize_message(rewrite, mode, id, &ne);
        if (!admitted)
            rc = weir__err(err, ne.code == WEIR_E_NOMEM ? WEIR_E_NOMEM : WEIR_E_HOOK_RESULT,
                           author, "agent/admit",
                           "input '%s' refused: plugin %s admitted an invalid message: %s", id,
                           author ? author : "?", ne.text);
        else {
            json_decref(*msg);
            *msg = admitted;
        }
    }
    json_decref(res);
    return rc;
}

int weir__engine_send(weir__engine *eng, const json_t *message, weir_send_mode mode,
                      const char *input_id, int anchor, weir__send_kind kind, weir_error *err) {
    bool internal = kind == WEIR__SEND_INTERNAL;
    if (!eng || !message)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_send: NULL argument");
    if (mode != WEIR_SEND_FOLLOWUP && mode != WEIR_SEND_STEER && mode != WEIR_SEND_INJECT)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_send: invalid mode %d",
                         (int)mode);
    json_t *msg = normalize_message(message, mode, input_id, err);
    if (!msg)
        return err ? (int)err->code : WEIR_E_INVAL;
    /* admission first: the duplicate check, the caps and the log see the
     * admitted message only */
    int arc = admit(eng, &msg, mode, kind, err);
    if (arc != WEIR_OK) {
        json_decref(msg);
        return arc;
    }
    const char *id = weir__json_str(msg, "id", "");
    bool wakes = mode != WEIR_SEND_INJECT;
    bool next_step = mode != WEIR_SEND_FOLLOWUP;
    int rc = WEIR_OK;
    bool dup = false, queued = false;
    pthread_mutex_lock(&eng->send_mu);
    /* Identity first: an identical resubmission is acknowledged whatever
     * else holds (a cap, the shutdown's fence). */
    pthread_mutex_lock(&eng->mu);
    const json_t *owned = json_object_get(json_object_get(eng->native_owned, id), "message");
    int known = owned ? (json_equal(owned, msg) ? 1 : -1) : 0;
    /* Decide "waking after abort" before inserting: waking
     * input sent while the running turn is cancelled goes to the next turn
     * (and is never offered to the cancelled request natively). */
    bool retargeted = false;
    if (wakes && anchor == 0 && eng->state == WEIR__AGENT_RUNNING &&
        weir__signal_cancelled(&eng->signal)) {
        next_step = false;
        retargeted = true;
    }
    bool closing = eng->closing;
    size_t nowned = json_object_size(eng->native_owned);
    pthread_mutex_unlock(&eng->mu);
    if (!known)
        known = weir__inbox_known(eng->inbox, msg);
    if (known == -2) {
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    } else if (known < 0) {
        rc = weir__err(err, WEIR_E_DUPLICATE, NULL, NULL,
                       "inbox: input id '%s' was already used with different content", id);
    } else if (known > 0) {
        dup = true;
    } else if (closing) {
        rc = weir__err(err, WEIR_E_STATE, NULL, NULL, "agent %s is closing", eng->id);
    } else if (!internal) {
        size_t chars = weir__message_text_chars(msg);
        size_t nqueued = weir__inbox_count(eng->inbox, false) + weir__inbox_count(eng->inbox, true) +
                         nowned;
        if (eng->ids_accepted >= WEIR_MAX_INPUT_IDS)
            rc = weir__err(err, WEIR_E_LIMIT, NULL, NULL,
                           "input '%s' refused: this agent took %d input ids, its limit; "
                           "reopen the session (or start a new one) to go on",
                           id, WEIR_MAX_INPUT_IDS);
        else if (nqueued >= WEIR_MAX_QUEUED_INPUTS)
            rc = weir__err(err, WEIR_E_LIMIT, NULL, NULL,
                           "input '%s' refused: %zu inputs are queued, the limit is %d; wait "
                           "for the agent to take some",
                           id, nqueued, WEIR_MAX_QUEUED_INPUTS);
        else if (chars > (size_t)eng->max_input_chars)
            rc = weir__err(err, WEIR_E_LIMIT, NULL, NULL,
                           "input '%s' refused: its text has %zu characters, the limit is %d "
                           "(agent.max_input_chars)",
                           id, chars, eng->max_input_chars);
    }
    if (rc == WEIR_OK && !dup) {
        /* ordinary input, whatever its mode, goes to steer_live first when
         * eligible (docs/generations.md, "Native steering") */
        native_outcome no = kind == WEIR__SEND_USER && anchor == 0 && !retargeted
                                ? try_native(eng, msg, next_step)
                                : NATIVE_NONE;
        if (no == NATIVE_OWNED || no == NATIVE_UNKNOWN) {
            eng->ids_accepted++;
        } else {
            rc = anchor > 0 ? weir__inbox_add_anchored(eng->inbox, msg, anchor, &dup, err)
                            : weir__inbox_add(eng->inbox, msg, next_step, &dup, err);
            queued = rc == WEIR_OK && !dup;
            if (queued && !internal)
                eng->ids_accepted++;
        }
    }
    if (rc == WEIR_OK && dup)
        acknowledge(eng, msg);
    pthread_mutex_unlock(&eng->send_mu);
    json_decref(msg);
    if (queued && wakes)
        weir__engine_wake(eng);
    return rc;
}

bool weir__engine_input_fits(const weir__engine *eng, const json_t *message) {
    return eng && weir__message_text_chars(message) <= (size_t)eng->max_input_chars;
}

int weir__engine_add_context(weir__engine *eng, const json_t *message, int turn, weir_error *err) {
    bool dup = false;
    pthread_mutex_lock(&eng->send_mu);
    int rc = weir__inbox_add_anchored(eng->inbox, message, turn, &dup, err);
    pthread_mutex_unlock(&eng->send_mu);
    return rc;
}

/* Native input the provider owns, by id (lock `mu` held): {message,
 * next_step}, borrowed, or NULL. */
static json_t *owned_input(weir__engine *eng, const char *id) {
    return id ? json_object_get(eng->native_owned, id) : NULL;
}

int weir__stream_steering(weir_stream *s, const char *input_id, const char *what,
                          weir_error *err) {
    if (!s || !s->engine || !input_id || !what)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "stream_steering: NULL argument");
    weir__engine *eng = s->engine;
    bool applied = strcmp(what, "applied") == 0, refused = strcmp(what, "refused") == 0;
    if (!applied && !refused && strcmp(what, "accepted") != 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "stream_steering: '%s': expected accepted, applied or refused", what);
    if ((applied || refused) && (!s->live || !pthread_equal(s->thread, pthread_self())))
        return weir__err(err, WEIR_E_STATE, NULL, NULL,
                         "stream_steering(%s): only inside the lifecycle request's stream, on "
                         "its thread",
                         what);
    pthread_mutex_lock(&eng->mu);
    const json_t *entry = owned_input(eng, input_id);
    json_t *msg = json_incref(json_object_get(entry, "message"));
    bool next_step = json_is_true(json_object_get(entry, "next_step"));
    if (msg && (applied || refused))
        json_object_del(eng->native_owned, input_id);
    pthread_mutex_unlock(&eng->mu);
    if (!msg)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                         "stream_steering: no native input '%s' is pending", input_id);
    int rc = WEIR_OK;
    if (applied) {
        /* the same waterfall as queued input: agent/pre-step decides what
         * enters (a rewrite policy rewrites it, a reject drops it); then
         * model-visible means logged: what entered goes into the log where
         * the provider confirmed the model took it */
        json_t *entered = NULL;
        const char *why = NULL;
        weir_error pe;
        weir_error_clear(&pe);
        rc = weir__driver_native_pre_step(eng, s->turn, s->step, msg, &entered, &why, &pe);
        json_t *op = json_string("append");
        if (rc == WEIR_OK && !op)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        else if (rc != WEIR_OK && err)
            *err = pe;
        size_t i;
        const json_t *m;
        json_array_foreach(rc == WEIR_OK ? entered : NULL, i, m) {
            json_t *data = json_pack("{s:i, s:i, s:O}", "turn", s->turn, "step", s->step,
                                     "message", m);
            rc = data ? weir__log_append(eng->log, "user/message", data, op, NULL, 0, NULL, err)
                      : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
            json_decref(data);
            if (rc != WEIR_OK)
                break;
        }
        json_decref(op);
        /* the id was accepted whatever entered: a resubmission is acknowledged */
        if (rc == WEIR_OK && weir__inbox_remember(eng->inbox, msg) != WEIR_OK)
            weir__warn("weir: agent %s: out of memory remembering input %s", eng->id,
                       input_id);
        if (rc == WEIR_OK && entered && json_array_size(entered) > 0)
            steering_event(eng, "applied", msg, s, NULL);
        else if (rc == WEIR_OK) /* nothing of it entered: no effect on what follows */
            steering_event(eng, "discarded", msg, s,
                           json_pack("{s:O, s:s, s:s}", "message", msg, "reason",
                                     entered ? "pre-step" : why, "error", pe.text));
        json_decref(entered);
    } else if (refused) {
        /* the provider's own definite refusal: the queue its mode names
         * (a steer the request boundary, a followup the next turn) */
        bool dup = false;
        steering_event(eng, "refused", msg, s, NULL);
        pthread_mutex_lock(&eng->send_mu);
        rc = weir__inbox_add(eng->inbox, msg, next_step, &dup, err);
        pthread_mutex_unlock(&eng->send_mu);
        if (rc == WEIR_OK && !dup)
            weir__engine_wake(eng);
    } else {
        steering_event(eng, "accepted", msg, s, NULL);
    }
    json_decref(msg);
    return rc;
}


/*
 * A background job's body returned (on its worker thread).  The driver
 * settles its result (weir__driver_settle_jobs: tools/post-execute, the
 * durable job/returned|failed|cancelled, the service message): at the
 * running turn's next request boundary, or, while the agent is idle, in
 * the next weir_agent_run_until_idle, which the wake latch and on_wake ask
 * for.  The live job/finished event tells observers it is coming.
 */
void weir__engine_on_job_done(const char *job_id, const char *call_id, const char *tool,
                              const json_t *result, void *ud) {
    weir__engine *eng = ud;
    weir__engine_live(eng, "job/finished",
                     json_pack("{s:s, s:s, s:s, s:b}", "job_id", job_id, "call_id", call_id,
                               "tool", tool, "is_error",
                               json_is_true(json_object_get(result, "is_error"))));
    pthread_mutex_lock(&eng->mu);
    eng->wake = true;
    pthread_cond_broadcast(&eng->cv);
    bool closing = eng->closing;
    pthread_mutex_unlock(&eng->mu);
    if (!closing && eng->on_wake)
        eng->on_wake(eng->user_data);
}
