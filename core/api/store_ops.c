/*
 * core/api/store_ops.c - the calls on a deployment's shared session store
 * (weir/store.h, docs/stores.md): its inbox and claims (weir send, weir
 * worker), an agent's queued input and lease.  The registry of stores is
 * the host's (core/runtime/host.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "host_int.h"
#include "session_log.h"
#include "sessions.h"
#include "store.h"

/* ------------------------------------------------------------------------ */
/* Host calls on the deployment's store (weir/store.h): weir send, worker     */
/* ------------------------------------------------------------------------ */

int weir__session_store(const weir_host *host, const char *what, const char **name,
                        weir__store_ref *out, weir_error *err) {
    if (!host)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "%s: NULL host", what);
    *name = weir__json_str(json_object_get(weir_host_config(host), "session"), "store", NULL);
    if (weir__store_lookup(host, *name, out) != WEIR_OK)
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                         "session.store: plugin row '%s' provides no session store", *name);
    if (!*name)
        *name = "file";
    return WEIR_OK;
}

int weir_host_store_send(weir_host *host, const char *id, const char *input_id, const char *mode,
                         const json_t *message, bool *duplicate, weir_error *err) {
    if (duplicate)
        *duplicate = false;
    if (!host || !id || !mode || !message || !duplicate)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_host_store_send: NULL argument");
    if (!weir_session_id_valid(id))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "send: invalid session id '%.128s'", id);
    if (strcmp(mode, "followup") != 0 && strcmp(mode, "steer") != 0 &&
        strcmp(mode, "inject") != 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "send: mode must be followup, steer or inject, got '%.32s'", mode);
    if (!json_is_object(message))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "send: message: expected an object");
    if (input_id && !*input_id)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "send: input id: must not be empty");
    /* the deployment's cap, as the agent would apply it: an input no
     * writer could take is refused here, never queued */
    json_int_t cap = weir__json_int(json_object_get(weir_host_config(host), "agent"),
                                    "max_input_chars", WEIR_MAX_INPUT_CHARS);
    size_t chars = weir__message_text_chars(message);
    if (cap > 0 && chars > (size_t)cap)
        return weir__err(err, WEIR_E_LIMIT, NULL, NULL,
                         "send: session %s: the text has %zu characters, the limit is %lld "
                         "(agent.max_input_chars)",
                         id, chars, (long long)cap);
    const char *name;
    weir__store_ref st;
    int rc = weir__session_store(host, "send", &name, &st, err);
    if (rc != WEIR_OK)
        return rc;
    if (!st.vt->send)
        return weir__err(err, WEIR_E_UNSUPPORTED, NULL, NULL,
                         "send: store '%s' has no inbox (open session %s as its writer)", name,
                         id);
    char idbuf[64];
    if (!input_id)
        input_id = weir__random_id(idbuf, sizeof idbuf, "in");
    char *text = weir__json_dump(message); /* not json_dumps: it can drop a key on OOM */
    if (!text)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "send: session %s: out of memory", id);
    rc = st.vt->send(st.self, id, input_id, mode, text, duplicate, err);
    free(text);
    return rc;
}

/* A malloc'd copy of a store buffer, which is released; *nomem on failure. */
static char *take_buffer(weir__store_ref st, char *buf, bool *nomem) {
    if (!buf)
        return NULL;
    char *copy = strdup(buf);
    st.vt->buffer_free(st.self, buf);
    if (!copy)
        *nomem = true;
    return copy;
}

int weir_host_store_claim(weir_host *host, char **id, char **prev_owner, weir_error *err) {
    return weir_host_store_claim_except(host, NULL, 0, id, prev_owner, err);
}

int weir_host_store_claim_except(weir_host *host, const char *const *skip, size_t nskip,
                                 char **id, char **prev_owner, weir_error *err) {
    if (id)
        *id = NULL;
    if (prev_owner)
        *prev_owner = NULL;
    if (!host || !id || !prev_owner || (nskip && !skip))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_host_store_claim: NULL argument");
    for (size_t i = 0; i < nskip; i++)
        if (!skip[i])
            return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                             "weir_host_store_claim_except: skip[%zu] is NULL", i);
    const char *name;
    weir__store_ref st;
    int rc = weir__session_store(host, "claim", &name, &st, err);
    if (rc != WEIR_OK)
        return rc;
    if (!st.vt->claim)
        return weir__err(err, WEIR_E_UNSUPPORTED, NULL, NULL,
                         "claim: store '%s' cannot claim sessions (a shared store can)", name);
    char *sid = NULL, *prev = NULL;
    if (st.vt->claim_except)
        rc = st.vt->claim_except(st.self, skip, nskip, &sid, &prev, err);
    else if (nskip == 0)
        rc = st.vt->claim(st.self, &sid, &prev, err);
    else
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                         "claim: store '%s' cannot skip sessions; %zu held back, none claimed",
                         name, nskip);
    if (rc != WEIR_OK)
        return rc;
    bool nomem = false;
    *id = take_buffer(st, sid, &nomem);
    *prev_owner = take_buffer(st, prev, &nomem);
    if (!*id || nomem) {
        /* the claim's lease expires by itself; nothing is lost */
        free(*id);
        free(*prev_owner);
        *id = *prev_owner = NULL;
        return weir__err(err, nomem ? WEIR_E_NOMEM : WEIR_E_IO, NULL, NULL,
                         "claim: store '%s' %s", name,
                         nomem ? "out of memory" : "claimed a session without an id");
    }
    return WEIR_OK;
}

int weir_host_store_wait(weir_host *host, int timeout_ms, bool *woken, weir_error *err) {
    if (woken)
        *woken = false;
    if (!host || !woken || timeout_ms < 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_host_store_wait: bad argument");
    const char *name;
    weir__store_ref st;
    int rc = weir__session_store(host, "wait", &name, &st, err);
    if (rc != WEIR_OK)
        return rc;
    if (!st.vt->wait)
        return weir__err(err, WEIR_E_UNSUPPORTED, NULL, NULL,
                         "wait: store '%s' cannot wait for input", name);
    return st.vt->wait(st.self, timeout_ms, woken, err);
}

/* One queued input's fields, or false when the row is malformed. */
static bool input_row(const json_t *row, json_int_t *inbox_id, const char **input_id,
                      weir_send_mode *mode, const json_t **message) {
    const json_t *iid = json_object_get(row, "inbox_id");
    *input_id = json_string_value(json_object_get(row, "input_id"));
    const char *m = json_string_value(json_object_get(row, "mode"));
    *message = json_object_get(row, "message");
    if (!json_is_integer(iid) || json_integer_value(iid) <= 0 || !*input_id || !**input_id ||
        !m || !json_is_object(*message))
        return false;
    *inbox_id = json_integer_value(iid);
    if (strcmp(m, "followup") == 0)
        *mode = WEIR_SEND_FOLLOWUP;
    else if (strcmp(m, "steer") == 0)
        *mode = WEIR_SEND_STEER;
    else if (strcmp(m, "inject") == 0)
        *mode = WEIR_SEND_INJECT;
    else
        return false;
    return true;
}

int weir_agent_take_store_inbox(weir_agent *a, size_t *taken, weir_error *err) {
    if (taken)
        *taken = 0;
    if (!a)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_agent_take_store_inbox: NULL agent");
    weir__store_ref st;
    void *h;
    uint64_t epoch;
    int rc = weir__log_store_handle(a->e.log, &st, &h, &epoch, err);
    if (rc != WEIR_OK)
        return rc;
    if (!st.vt->inbox || !st.vt->consume)
        return WEIR_OK;
    json_t *rows = NULL;
    if ((rc = st.vt->inbox(st.self, h, &rows, err)) != WEIR_OK)
        return rc;
    json_t *done = json_array(); /* the inbox ids to drop: logged, or refused for good */
    if (!done) {
        json_decref(rows);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session %s: out of memory", a->e.id);
    }
    size_t i, n = 0;
    const json_t *row;
    json_array_foreach(rows, i, row) {
        json_int_t inbox_id;
        const char *input_id;
        weir_send_mode mode;
        const json_t *msg;
        if (!input_row(row, &inbox_id, &input_id, &mode, &msg)) {
            /* left queued, never dropped: an operator looks at it */
            rc = weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                           "session %s: queued input #%zu of the store is malformed (want "
                           "inbox_id, input_id, mode and a message object); it stays queued",
                           a->e.id, i + 1);
            break;
        }
        /* an input already in the log (delivered by a writer that died before
         * it could drop the row) is acknowledged, not queued again */
        weir_error e;
        weir_error_clear(&e);
        /* through the log's inbox, never the provider's native steering:
         * the row goes only once its splice is durable */
        int src = weir__engine_send(&a->e, msg, mode, input_id, 0, WEIR__SEND_STORED, &e);
        if (src == WEIR_E_DUPLICATE) {
            /* the log has another input under this id: it was delivered
             * already, this one can never be; say so and drop it */
            weir__warn("weir: session %s: queued input '%s' dropped: %s", a->e.id, input_id,
                       e.text);
        } else if (src == WEIR_E_LIMIT && !weir__engine_input_fits(&a->e, msg)) {
            /* too long for this deployment, whenever it is taken: refused
             * for good, so it does not hold back the inputs after it */
            weir__warn("weir: session %s: queued input '%s' refused: %s", a->e.id,
                       input_id, e.text);
        } else if (src != WEIR_OK) {
            /* a full queue or another failure: this row and the rest stay
             * queued; the caller backs off (a worker does not reclaim at once) */
            rc = src;
            if (err)
                *err = e;
            break;
        } else {
            n++;
        }
        if (json_array_append_new(done, json_integer(inbox_id)) != 0) {
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session %s: out of memory", a->e.id);
            break;
        }
    }
    json_decref(rows);
    if (json_array_size(done) > 0) {
        /* the splices are durable before the rows go */
        weir_error e2;
        weir_error_clear(&e2);
        int src = weir__log_sync_durable(a->e.log, &e2);
        if (src == WEIR_OK)
            src = st.vt->consume(st.self, h, epoch, done, &e2);
        if (rc == WEIR_OK && src != WEIR_OK) {
            rc = src;
            if (err)
                *err = e2;
        }
    }
    json_decref(done);
    if (taken)
        *taken = n;
    return rc;
}

int weir_agent_interrupted_turn(weir_agent *a) {
    if (!a)
        return 0;
    size_t count = weir__log_count(a->e.log);
    int turn = 0;
    int found = 0; /* 0 while scanning, else the answer + 1 */
    for (size_t i = count; !found && i-- > 0;) {
        json_t *ev = weir__log_event_ref(a->e.log, i); /* any thread: a reference of its own */
        if (!ev)
            return 0; /* out of memory: never an older turn's answer */
        const char *type = weir__json_str(ev, "type", "");
        const json_t *d = json_object_get(ev, "data");
        if (!turn) {
            if (strcmp(type, "turn/end") == 0) {
                turn = (int)weir__json_int(d, "turn", 0);
                if (strcmp(weir__json_str(json_object_get(d, "reason"), "kind", ""),
                           "interrupted") != 0 ||
                    turn <= 0)
                    found = 1;
            }
        } else if (strcmp(type, "user/message") == 0) {
            found = turn + 1;
        } else if (strcmp(type, "turn/start") == 0) {
            found = 1;
        }
        json_decref(ev);
    }
    return found ? found - 1 : 0;
}

uint64_t weir_agent_lease_epoch(weir_agent *a) {
    if (!a)
        return 0;
    weir__store_ref st;
    void *h;
    uint64_t epoch = 0;
    (void)weir__log_store_handle(a->e.log, &st, &h, &epoch, NULL); /* set even when fenced */
    return epoch;
}

bool weir_agent_lease_lost(weir_agent *a) {
    if (!a)
        return false;
    return weir__log_lease_lost(a->e.log);
}
