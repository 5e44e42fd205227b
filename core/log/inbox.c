/*
 * core/log/inbox.c - the durable inbox (docs/generations.md).
 *
 * Two lists (next-turn, next-step) are the fold of agent/inbox/spliced
 * events.  Every change appends its splice event first and only then changes
 * the lists, so a failed append leaves them as they were.  Notifications run
 * after the change, outside the inbox lock.
 *
 * Each queued message has meta {n: arrival number, anchor?: turn}.  The
 * first queued next-turn message is a barrier: a claim between steps takes
 * only the next-step input that arrived before it (plus anchored input,
 * which is queued in front of what the barrier holds back).  So the
 * claimable next-step input is always a prefix of the list.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "inbox.h"

enum { NEXT_TURN = 0, NEXT_STEP = 1 };
static const char *const target_names[] = {"next-turn", "next-step"};

struct weir__inbox {
    weir__log *log;
    pthread_mutex_t mu_storage;
    pthread_mutex_t *mu; /* recursive: a log observer may read the inbox */
    json_t *lists[2];    /* arrays of messages */
    json_t *delivered;   /* input id -> the message's compact text (weir__json_dump), for
                            dedupe: the message itself is in the log, and a text costs
                            its bytes where a tree costs several times them */
    json_t *settled;     /* the same for ids removed with an outcome (canceled, held):
                            accepted once, so a resubmission is acknowledged, never
                            queued again (docs/generations.md, "Receipts") */
    json_t *meta;        /* input id -> {n, anchor?} of queued messages */
    json_int_t next_arrival;
    int running_turn;    /* anchored input may target this turn (0: none) */
    int fence_turn;      /* ... unless it is this one */
    bool stopped;        /* no new input */
    weir__inbox_notify_fn notify;
    void *notify_ud;
};

static void ib_lock(const weir__inbox *ib) { pthread_mutex_lock(ib->mu); }
static void ib_unlock(const weir__inbox *ib) { pthread_mutex_unlock(ib->mu); }

static const char *msg_id(const json_t *m) { return weir__json_str(m, "id", NULL); }

/* The queued message with input id `id` (borrowed), or NULL. */
static const json_t *find_queued(const weir__inbox *ib, const char *id) {
    for (int t = 0; t < 2; t++) {
        size_t i;
        json_t *m;
        json_array_foreach(ib->lists[t], i, m) {
            const char *mid = msg_id(m);
            if (mid && strcmp(mid, id) == 0)
                return m;
        }
    }
    return NULL;
}

/* Whether input id `id` is queued or delivered. */
static bool known_id(const weir__inbox *ib, const char *id) {
    return find_queued(ib, id) || json_object_get(ib->delivered, id);
}

/* Whether input id `id` was seen, against `message`: 0 not seen, 1 seen
 * with the same content (json_equal), -1 with other content, -2 out of
 * memory.  With the lock. */
static int seen_as(const weir__inbox *ib, const char *id, const json_t *message) {
    const json_t *queued = find_queued(ib, id);
    if (queued)
        return json_equal(queued, message) ? 1 : -1;
    const json_t *stored = json_object_get(ib->delivered, id);
    if (!stored)
        stored = json_object_get(ib->settled, id);
    if (!stored)
        return 0;
    /* the same text is the same message (NULL: memory ran out, or a value
     * the log could not write: then only the comparison below decides) */
    char *mine = weir__json_dump(message);
    bool same = mine && strcmp(mine, json_string_value(stored)) == 0;
    free(mine);
    if (same)
        return 1;
    /* json_equal's verdict, whatever the key order of either text */
    json_t *was = weir__json_loadb(json_string_value(stored), json_string_length(stored), 0, NULL);
    if (!was)
        return -2;
    int r = json_equal(was, message) ? 1 : -1;
    json_decref(was);
    return r;
}

/* Record message `m` in `map` (delivered or settled).  0, or -1 when
 * memory ran out. */
static int mark_in(json_t *map, const json_t *m) {
    char *text = weir__json_dump(m);
    int rc = text ? json_object_set_new(map, msg_id(m), json_string_nocheck(text)) : -1;
    free(text);
    return rc == 0 ? 0 : -1;
}

static int mark_delivered(weir__inbox *ib, const json_t *m) { return mark_in(ib->delivered, m); }

/* Record message `m`, removed with `outcome` (NULL: claimed), as accepted. */
static int mark_removed(weir__inbox *ib, const json_t *m, const char *outcome) {
    return mark_in(outcome ? ib->settled : ib->delivered, m);
}

static json_int_t arrival_of(const weir__inbox *ib, const json_t *m) {
    return weir__json_int(json_object_get(ib->meta, msg_id(m)), "n", 0);
}

static int anchor_of(const weir__inbox *ib, const json_t *m) {
    return (int)weir__json_int(json_object_get(ib->meta, msg_id(m)), "anchor", 0);
}

/* Arrival number of the k-th queued next-turn message, or "never". */
static json_int_t barrier(const weir__inbox *ib, size_t k) {
    const json_t *m = json_array_get(ib->lists[NEXT_TURN], k);
    return m ? arrival_of(ib, m) : INT64_MAX;
}

/* How many leading next-step messages arrived before `bar` or are anchored. */
static size_t claimable(const weir__inbox *ib, json_int_t bar) {
    size_t i;
    const json_t *m;
    json_array_foreach(ib->lists[NEXT_STEP], i, m) {
        if (!anchor_of(ib, m) && arrival_of(ib, m) > bar)
            return i;
    }
    return json_array_size(ib->lists[NEXT_STEP]);
}

static bool is_service(const json_t *m) {
    return strcmp(weir__json_str(json_object_get(m, "source"), "kind", ""), "service") == 0;
}

/* New meta {n, anchor?} for the next arrival (counts it), or NULL. */
static json_t *new_meta(weir__inbox *ib, int anchor) {
    json_t *meta = json_pack("{s:I}", "n", (json_int_t)ib->next_arrival);
    if (meta && anchor > 0 && json_object_set_new(meta, "anchor", json_integer(anchor)) != 0) {
        json_decref(meta);
        return NULL;
    }
    if (meta)
        ib->next_arrival++;
    return meta;
}

/* Apply one persisted splice; -1 when it is malformed, -2 out of memory. */
static int fold_splice(weir__inbox *ib, const json_t *data) {
    const char *target = weir__json_str(data, "target", "");
    int t = strcmp(target, "next-turn") == 0   ? NEXT_TURN
            : strcmp(target, "next-step") == 0 ? NEXT_STEP
                                               : -1;
    const json_t *jstart = json_object_get(data, "start");
    const json_t *jremoved = json_object_get(data, "removed_count");
    const json_t *inserted = json_object_get(data, "inserted");
    const json_t *outcome = json_object_get(data, "outcome");
    const json_t *janchor = json_object_get(data, "anchor_turn");
    const char *oc = json_string_value(outcome);
    if (t < 0 || !json_is_integer(jstart) || (jremoved && !json_is_integer(jremoved)) ||
        !json_is_array(inserted) ||
        (outcome && (!oc || (strcmp(oc, "canceled") != 0 && strcmp(oc, "held") != 0))) ||
        (janchor && (!json_is_integer(janchor) || json_integer_value(janchor) <= 0 ||
                     json_integer_value(janchor) > INT32_MAX || t != NEXT_STEP)))
        return -1;
    json_t *list = ib->lists[t];
    json_int_t start = json_integer_value(jstart);
    json_int_t removed = jremoved ? json_integer_value(jremoved) : 0;
    if (start < 0 || removed < 0 || (size_t)start > json_array_size(list) ||
        (size_t)removed > json_array_size(list) - (size_t)start)
        return -1;
    for (json_int_t i = 0; i < removed; i++) {
        json_t *m = json_array_get(list, (size_t)start);
        if (mark_removed(ib, m, oc) != 0)
            return -2;
        json_object_del(ib->meta, msg_id(m));
        json_array_remove(list, (size_t)start);
    }
    size_t i;
    json_t *m;
    json_array_foreach(inserted, i, m) {
        if (!json_is_object(m) || !msg_id(m) || known_id(ib, msg_id(m)))
            return -1;
        /* a log of an older weir may queue a canceled or held id again */
        json_object_del(ib->settled, msg_id(m));
        json_t *meta = new_meta(ib, janchor ? (int)json_integer_value(janchor) : 0);
        if (!meta || json_object_set_new(ib->meta, msg_id(m), meta) != 0 ||
            json_array_insert(list, (size_t)start + i, m) != 0)
            return -2;
    }
    return 0;
}

static int rebuild(weir__inbox *ib, weir_error *err) {
    size_t n = weir__log_count(ib->log);
    for (size_t seq = 0; seq < n; seq++) {
        /* a checkpoint's resume holds the inputs it keeps, and nothing was
         * queued then (weir__inbox_checkpoint) */
        if (!weir__log_held(ib->log, seq))
            continue;
        /* one envelope at a time: what open released stays released */
        json_t *ev = weir__log_event_ref(ib->log, seq);
        const char *type = weir__json_str(ev, "type", "");
        const json_t *data = json_object_get(ev, "data");
        int rc = ev ? 0 : -2;
        if (strcmp(type, "user/message") == 0) {
            /* the claim already recorded the message as submitted (a pre-step
             * listener may have changed what entered): keep that one, as the
             * live inbox does */
            json_t *m = json_object_get(data, "message");
            if (msg_id(m) && !json_object_get(ib->delivered, msg_id(m)) &&
                mark_delivered(ib, m) != 0)
                rc = -2;
        } else if (strcmp(type, "agent/inbox/spliced") == 0) {
            rc = fold_splice(ib, data);
        }
        json_decref(ev);
        if (rc == -1)
            return weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                             "%s: invalid persisted inbox splice at session seq %zu",
                             weir__log_path(ib->log), seq);
        if (rc == -2)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    }
    return WEIR_OK;
}

int weir__inbox_create(weir__log *log, weir__inbox **out, weir_error *err) {
    if (!log || !out)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "inbox: log and out are required");
    *out = NULL;
    weir__inbox *ib = weir__calloc(1, sizeof *ib);
    if (!ib)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    ib->mu = &ib->mu_storage;
    pthread_mutex_init(ib->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    ib->log = log;
    ib->lists[NEXT_TURN] = json_array();
    ib->lists[NEXT_STEP] = json_array();
    ib->delivered = json_object();
    ib->settled = json_object();
    ib->meta = json_object();
    ib->next_arrival = 1;
    int rc = ib->lists[0] && ib->lists[1] && ib->delivered && ib->settled && ib->meta
                 ? rebuild(ib, err)
                 : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    if (rc != WEIR_OK) {
        weir__inbox_destroy(ib);
        return rc;
    }
    *out = ib;
    return WEIR_OK;
}

void weir__inbox_destroy(weir__inbox *ib) {
    if (!ib)
        return;
    json_decref(ib->lists[0]);
    json_decref(ib->lists[1]);
    json_decref(ib->delivered);
    json_decref(ib->settled);
    json_decref(ib->meta);
    pthread_mutex_destroy(ib->mu);
    weir__free(ib);
}

void weir__inbox_set_notify(weir__inbox *ib, weir__inbox_notify_fn fn, void *ud) {
    if (!ib)
        return;
    ib_lock(ib);
    ib->notify = fn;
    ib->notify_ud = ud;
    ib_unlock(ib);
}

int weir__inbox_checkpoint(weir__inbox *ib, weir_error *err) {
    if (!ib)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "inbox: NULL");
    ib_lock(ib);
    /* under the inbox lock: no splice can slip in before the checkpoint */
    int rc = json_array_size(ib->lists[NEXT_TURN]) || json_array_size(ib->lists[NEXT_STEP])
                 ? WEIR_OK
                 : weir__log_tally_checkpoint(ib->log, err);
    ib_unlock(ib);
    return rc;
}

size_t weir__inbox_count(const weir__inbox *ib, bool next_step) {
    if (!ib)
        return 0;
    ib_lock(ib);
    size_t n = json_array_size(ib->lists[next_step ? NEXT_STEP : NEXT_TURN]);
    ib_unlock(ib);
    return n;
}

/* Emit `kind` for each message of `msgs` (an array, stolen) outside the
 * lock; `turns` (may be NULL, stolen) gives each message's turn. */
static void notify_all(weir__inbox *ib, const char *kind, json_t *msgs, int turn, json_t *turns) {
    ib_lock(ib);
    weir__inbox_notify_fn fn = ib->notify;
    void *ud = ib->notify_ud;
    ib_unlock(ib);
    size_t i;
    json_t *m;
    if (fn)
        json_array_foreach(msgs, i, m) {
            const json_t *tn = json_array_get(turns, i);
            fn(kind, m, tn ? (int)json_integer_value(tn) : turn, ud);
        }
    json_decref(msgs);
    json_decref(turns);
}

/* Append a splice event of list `t`: remove `removed` messages at `start`,
 * insert `inserted` (may be NULL) there.  Lock held. */
static int splice(weir__inbox *ib, int t, size_t start, size_t removed, json_t *inserted,
                  const char *outcome, int anchor, weir_error *err) {
    json_t *data = json_pack("{s:s, s:I}", "target", target_names[t], "start", (json_int_t)start);
    if (!data ||
        (removed &&
         json_object_set_new(data, "removed_count", json_integer((json_int_t)removed))) ||
        json_object_set_new(data, "inserted", inserted ? json_incref(inserted) : json_array()) ||
        (outcome && json_object_set_new(data, "outcome", json_string(outcome))) ||
        (anchor > 0 && json_object_set_new(data, "anchor_turn", json_integer(anchor)))) {
        json_decref(data);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    }
    int rc = weir__log_append(ib->log, "agent/inbox/spliced", data, NULL, NULL,
                              WEIR__APPEND_HANDOVER, NULL, err);
    json_decref(data);
    return rc;
}

/* Add to list `t` (next-step at the claimable front when `anchor` > 0). */
static int add(weir__inbox *ib, const json_t *message, int t, int anchor, bool *duplicate,
               weir_error *err) {
    if (duplicate)
        *duplicate = false;
    if (!ib || !json_is_object(message) || !msg_id(message) || !*msg_id(message))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "inbox: add needs a message object with a non-empty \"id\"");
    const char *id = msg_id(message);
    ib_lock(ib);
    int seen = seen_as(ib, id, message);
    if (seen) {
        ib_unlock(ib);
        if (seen == -2)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
        if (seen < 0)
            return weir__err(err, WEIR_E_DUPLICATE, NULL, NULL,
                             "inbox: input id '%s' was already used with different content", id);
        if (duplicate)
            *duplicate = true;
        return WEIR_OK;
    }
    if (ib->stopped) {
        ib_unlock(ib);
        return weir__err(err, WEIR_E_STATE, NULL, NULL,
                         "inbox: the agent is shutting down and takes no new input");
    }
    if (anchor > 0 && (anchor != ib->running_turn || anchor == ib->fence_turn)) {
        ib_unlock(ib);
        return weir__err(err, WEIR_E_STATE, NULL, NULL,
                         "turn %d is not running or takes no more steering (it ended or is "
                         "ending)",
                         anchor);
    }
    /* its own containers; scalars are shared (never changed in place: common.h) */
    json_t *copy = weir__json_copy_tree(message);
    json_t *inserted = copy ? json_pack("[O]", copy) : NULL;
    json_t *note = copy ? json_pack("[O]", copy) : NULL;
    json_int_t saved = ib->next_arrival;
    json_t *meta = new_meta(ib, anchor);
    size_t at = anchor > 0 ? claimable(ib, barrier(ib, 0)) : json_array_size(ib->lists[t]);
    /* Grow the list's storage now (jansson never shrinks it) and set the
     * meta first, so that nothing can fail after the durable splice. */
    bool room = json_array_append(ib->lists[t], json_null()) == 0;
    if (room)
        json_array_remove(ib->lists[t], json_array_size(ib->lists[t]) - 1);
    bool have_meta = meta && json_object_set_new(ib->meta, id, meta) == 0;
    int rc = inserted && note && room && have_meta
                 ? splice(ib, t, at, 0, inserted, NULL, anchor, err)
                 : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    if (rc == WEIR_OK) {
        json_array_insert(ib->lists[t], at, copy);
    } else {
        if (have_meta)
            json_object_del(ib->meta, id);
        ib->next_arrival = saved;
    }
    ib_unlock(ib);
    json_decref(copy);
    json_decref(inserted);
    if (rc != WEIR_OK) {
        json_decref(note);
        return rc;
    }
    notify_all(ib, "inserted", note, 0, NULL);
    return WEIR_OK;
}

int weir__inbox_add(weir__inbox *ib, const json_t *message, bool next_step, bool *duplicate,
                    weir_error *err) {
    return add(ib, message, next_step ? NEXT_STEP : NEXT_TURN, 0, duplicate, err);
}

int weir__inbox_add_anchored(weir__inbox *ib, const json_t *message, int turn, bool *duplicate,
                             weir_error *err) {
    if (turn <= 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "inbox: anchored input needs a turn");
    return add(ib, message, NEXT_STEP, turn, duplicate, err);
}

/* Remove the first `limit` messages of list `t` (all with SIZE_MAX) with one
 * pure-deletion splice and append them to `out`.  Everything that can fail
 * happens before the splice is logged, so either nothing changes or the
 * splice and the lists change together.  Lock held. */
static int take(weir__inbox *ib, int t, size_t limit, const char *outcome, json_t *out,
                weir_error *err) {
    json_t *list = ib->lists[t];
    size_t n = json_array_size(list), out_len = json_array_size(out), marked = 0;
    if (n > limit)
        n = limit;
    if (n == 0)
        return WEIR_OK;
    int rc = WEIR_OK;
    for (size_t i = 0; rc == WEIR_OK && i < n; i++)
        if (json_array_append(out, json_array_get(list, i)) != 0)
            rc = WEIR_E_NOMEM;
    /* claimed ids count as delivered, removed ones as settled (a reopen
     * restores both from the splice); no queued id is in either map, so
     * every one marked here is new */
    for (; rc == WEIR_OK && marked < n; marked++) {
        json_t *m = json_array_get(list, marked);
        if (mark_removed(ib, m, outcome) != 0)
            rc = WEIR_E_NOMEM;
    }
    if (rc != WEIR_OK)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    else
        rc = splice(ib, t, 0, n, NULL, outcome, 0, err);
    if (rc != WEIR_OK) { /* undo: removals never allocate */
        for (size_t i = 0; i < marked; i++)
            json_object_del(outcome ? ib->settled : ib->delivered,
                            msg_id(json_array_get(list, i)));
        while (json_array_size(out) > out_len)
            json_array_remove(out, json_array_size(out) - 1);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        json_object_del(ib->meta, msg_id(json_array_get(list, 0)));
        json_array_remove(list, 0);
    }
    return WEIR_OK;
}

int weir__inbox_claim(weir__inbox *ib, bool turn_boundary, int turn, json_t **claimed,
                      weir_error *err) {
    if (claimed)
        *claimed = NULL;
    if (!ib || !claimed)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "inbox: claim needs an inbox and out");
    json_t *out = json_array();
    if (!out)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    ib_lock(ib);
    /* the next-step input that arrived before the first queued prompt */
    int rc = take(ib, NEXT_STEP, claimable(ib, barrier(ib, 0)), NULL, out, err);
    /* At a turn boundary, then the prompt and the next-step input queued
     * after it, before the next prompt.  Each splice, once logged, stands:
     * when a later one cannot be taken, the claim is what came before it,
     * which nothing still queued should have preceded. */
    if (rc == WEIR_OK && turn_boundary && json_array_size(ib->lists[NEXT_TURN]) > 0) {
        int rc2 = take(ib, NEXT_TURN, 1, NULL, out, err);
        if (rc2 == WEIR_OK)
            rc2 = take(ib, NEXT_STEP, claimable(ib, barrier(ib, 0)), NULL, out, err);
        if (json_array_size(out) == 0)
            rc = rc2;
    }
    ib_unlock(ib);
    if (rc != WEIR_OK) {
        json_decref(out);
        return rc;
    }
    *claimed = json_incref(out);
    notify_all(ib, "claimed", out, turn, NULL);
    return WEIR_OK;
}

int weir__inbox_clear(weir__inbox *ib, weir_error *err) {
    if (!ib)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "inbox: NULL inbox");
    json_t *out = json_array();
    if (!out)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    ib_lock(ib);
    int rc = take(ib, NEXT_STEP, SIZE_MAX, "canceled", out, err);
    if (rc == WEIR_OK)
        rc = take(ib, NEXT_TURN, SIZE_MAX, "canceled", out, err);
    ib_unlock(ib);
    notify_all(ib, "discarded", out, 0, NULL); /* whatever was removed durably */
    return rc;
}

int weir__inbox_hold_all(weir__inbox *ib, weir_error *err) {
    if (!ib)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "inbox: NULL inbox");
    json_t *out = json_array();
    if (!out)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    ib_lock(ib);
    int rc = take(ib, NEXT_STEP, SIZE_MAX, "held", out, err);
    if (rc == WEIR_OK)
        rc = take(ib, NEXT_TURN, SIZE_MAX, "held", out, err);
    ib_unlock(ib);
    notify_all(ib, "held", out, 0, NULL); /* whatever was removed durably */
    return rc;
}

int weir__inbox_hold_anchored(weir__inbox *ib, int turn, weir_error *err) {
    if (!ib)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "inbox: NULL inbox");
    json_t *out = json_array(), *turns = json_array();
    int rc = out && turns ? WEIR_OK
                          : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    ib_lock(ib);
    json_t *list = ib->lists[NEXT_STEP];
    for (size_t i = 0; rc == WEIR_OK && i < json_array_size(list);) {
        json_t *m = json_array_get(list, i);
        int anchor = anchor_of(ib, m);
        if (anchor <= 0 || (turn > 0 && anchor > turn)) {
            i++;
            continue;
        }
        if (json_array_append(out, m) != 0) {
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
            break;
        }
        if (json_array_append_new(turns, json_integer(anchor)) != 0) {
            json_array_remove(out, json_array_size(out) - 1);
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
            break;
        }
        rc = mark_removed(ib, m, "held") == 0
                 ? splice(ib, NEXT_STEP, i, 1, NULL, "held", 0, err)
                 : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
        if (rc != WEIR_OK) {
            json_object_del(ib->settled, msg_id(m));
            json_array_remove(out, json_array_size(out) - 1);
            json_array_remove(turns, json_array_size(turns) - 1);
            break;
        }
        json_object_del(ib->meta, msg_id(m));
        json_array_remove(list, i);
    }
    ib_unlock(ib);
    if (out)
        notify_all(ib, "held", out, 0, turns);
    else
        json_decref(turns);
    return rc;
}

void weir__inbox_open_turn(weir__inbox *ib, int turn) {
    if (!ib)
        return;
    ib_lock(ib);
    ib->running_turn = turn;
    ib_unlock(ib);
}

/* Whether the claimable next-step input holds a non-service message.  Lock held. */
static bool continuing(const weir__inbox *ib, size_t *k) {
    size_t n = claimable(ib, barrier(ib, 0));
    bool ordinary = false;
    for (size_t i = 0; i < n && !ordinary; i++)
        ordinary = !is_service(json_array_get(ib->lists[NEXT_STEP], i));
    if (k)
        *k = n;
    return ordinary;
}

bool weir__inbox_close_turn(weir__inbox *ib, int turn, bool force) {
    if (!ib)
        return true;
    ib_lock(ib);
    bool closed = force || !continuing(ib, NULL);
    if (closed)
        ib->fence_turn = turn;
    ib_unlock(ib);
    return closed;
}

size_t weir__inbox_pending(weir__inbox *ib, bool *ordinary) {
    if (ordinary)
        *ordinary = false;
    if (!ib)
        return 0;
    ib_lock(ib);
    size_t n = 0;
    bool o = continuing(ib, &n);
    ib_unlock(ib);
    if (ordinary)
        *ordinary = o;
    return n;
}

void weir__inbox_stop(weir__inbox *ib) {
    if (!ib)
        return;
    ib_lock(ib);
    ib->stopped = true;
    ib_unlock(ib);
}

int weir__inbox_known(weir__inbox *ib, const json_t *message) {
    const char *id = msg_id(message);
    if (!ib || !id)
        return 0;
    ib_lock(ib);
    int r = seen_as(ib, id, message);
    ib_unlock(ib);
    return r;
}

int weir__inbox_remember(weir__inbox *ib, const json_t *message) {
    const char *id = msg_id(message);
    if (!ib || !id)
        return WEIR_E_INVAL;
    ib_lock(ib);
    int rc = json_object_get(ib->delivered, id) || mark_delivered(ib, message) == 0
                 ? WEIR_OK
                 : WEIR_E_NOMEM;
    ib_unlock(ib);
    return rc;
}
