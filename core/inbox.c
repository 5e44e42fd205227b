/*
 * core/inbox.c - the durable inbox (DESIGN §6, reference §3.5 and §5.1).
 *
 * Two lists (next-turn, next-step) are the fold of agent/inbox/spliced
 * events.  Every change appends its splice event first and only then changes
 * the lists, so a failed append leaves them as they were.  Notifications run
 * after the change, outside the inbox lock.
 */
#include <pthread.h>
#include <string.h>

#include "inbox.h"

enum { NEXT_TURN = 0, NEXT_STEP = 1 };
static const char *const target_names[] = {"next-turn", "next-step"};

struct weir__inbox {
    weir__log *log;
    pthread_mutex_t mu_storage;
    pthread_mutex_t *mu; /* recursive: a log observer may read the inbox */
    json_t *lists[2];    /* arrays of messages */
    json_t *delivered;   /* input id -> message, for dedupe */
    weir__inbox_notify_fn notify;
    void *notify_ud;
};

static void ib_lock(const weir__inbox *ib) { pthread_mutex_lock(ib->mu); }
static void ib_unlock(const weir__inbox *ib) { pthread_mutex_unlock(ib->mu); }

static const char *msg_id(const json_t *m) { return weir__json_str(m, "id", NULL); }

/* The queued or delivered message with input id `id` (borrowed), or NULL. */
static const json_t *find_id(const weir__inbox *ib, const char *id) {
    for (int t = 0; t < 2; t++) {
        size_t i;
        json_t *m;
        json_array_foreach(ib->lists[t], i, m) {
            const char *mid = msg_id(m);
            if (mid && strcmp(mid, id) == 0)
                return m;
        }
    }
    return json_object_get(ib->delivered, id);
}

/* Apply one persisted splice; -1 when it is malformed. */
static int fold_splice(weir__inbox *ib, const json_t *data) {
    const char *target = weir__json_str(data, "target", "");
    int t = strcmp(target, "next-turn") == 0   ? NEXT_TURN
            : strcmp(target, "next-step") == 0 ? NEXT_STEP
                                               : -1;
    const json_t *jstart = json_object_get(data, "start");
    const json_t *jremoved = json_object_get(data, "removed_count");
    const json_t *inserted = json_object_get(data, "inserted");
    const json_t *outcome = json_object_get(data, "outcome");
    if (t < 0 || !json_is_integer(jstart) || (jremoved && !json_is_integer(jremoved)) ||
        !json_is_array(inserted) ||
        (outcome &&
         (!json_is_string(outcome) || strcmp(json_string_value(outcome), "canceled") != 0)))
        return -1;
    json_t *list = ib->lists[t];
    json_int_t start = json_integer_value(jstart);
    json_int_t removed = jremoved ? json_integer_value(jremoved) : 0;
    if (start < 0 || removed < 0 || (size_t)start > json_array_size(list) ||
        (size_t)removed > json_array_size(list) - (size_t)start)
        return -1;
    for (json_int_t i = 0; i < removed; i++) {
        json_t *m = json_array_get(list, (size_t)start);
        if (!outcome && json_object_set(ib->delivered, msg_id(m), m) != 0)
            return -2;
        json_array_remove(list, (size_t)start);
    }
    size_t i;
    json_t *m;
    json_array_foreach(inserted, i, m) {
        if (!json_is_object(m) || !msg_id(m) || find_id(ib, msg_id(m)))
            return -1;
        if (json_array_insert(list, (size_t)start + i, m) != 0)
            return -2;
    }
    return 0;
}

static int rebuild(weir__inbox *ib, weir_error *err) {
    size_t n = weir__log_count(ib->log);
    for (size_t seq = 0; seq < n; seq++) {
        const json_t *ev = weir__log_event(ib->log, seq);
        const char *type = weir__json_str(ev, "type", "");
        const json_t *data = json_object_get(ev, "data");
        int rc = 0;
        if (strcmp(type, "user/message") == 0) {
            /* the claim already recorded the message as submitted (a pre-step
             * listener may have changed what entered): keep that one, as the
             * live inbox does */
            json_t *m = json_object_get(data, "message");
            if (msg_id(m) && !json_object_get(ib->delivered, msg_id(m)) &&
                json_object_set(ib->delivered, msg_id(m), m) != 0)
                rc = -2;
        } else if (strcmp(type, "agent/inbox/spliced") == 0) {
            rc = fold_splice(ib, data);
        }
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
    int rc = ib->lists[0] && ib->lists[1] && ib->delivered
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

size_t weir__inbox_count(const weir__inbox *ib, bool next_step) {
    if (!ib)
        return 0;
    ib_lock(ib);
    size_t n = json_array_size(ib->lists[next_step ? NEXT_STEP : NEXT_TURN]);
    ib_unlock(ib);
    return n;
}

/* Emit `kind` for each message of `msgs` (an array, stolen) outside the lock. */
static void notify_all(weir__inbox *ib, const char *kind, json_t *msgs, int turn) {
    ib_lock(ib);
    weir__inbox_notify_fn fn = ib->notify;
    void *ud = ib->notify_ud;
    ib_unlock(ib);
    size_t i;
    json_t *m;
    if (fn)
        json_array_foreach(msgs, i, m) fn(kind, m, turn, ud);
    json_decref(msgs);
}

/* Append a splice event: remove `removed` messages of list `t` at 0 (or
 * insert `inserted` at the end when non-NULL).  Lock held. */
static int splice(weir__inbox *ib, int t, size_t removed, json_t *inserted, bool canceled,
                  weir_error *err) {
    size_t start = inserted ? json_array_size(ib->lists[t]) : 0;
    json_t *data = json_pack("{s:s, s:I}", "target", target_names[t], "start", (json_int_t)start);
    if (!data ||
        (removed &&
         json_object_set_new(data, "removed_count", json_integer((json_int_t)removed))) ||
        json_object_set_new(data, "inserted", inserted ? json_incref(inserted) : json_array()) ||
        (canceled && json_object_set_new(data, "outcome", json_string("canceled")))) {
        json_decref(data);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    }
    int rc = weir__log_append(ib->log, "agent/inbox/spliced", data, NULL, NULL, 0, NULL, err);
    json_decref(data);
    return rc;
}

int weir__inbox_add(weir__inbox *ib, const json_t *message, bool next_step, bool *duplicate,
                    weir_error *err) {
    if (duplicate)
        *duplicate = false;
    if (!ib || !json_is_object(message) || !msg_id(message) || !*msg_id(message))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "inbox: add needs a message object with a non-empty \"id\"");
    const char *id = msg_id(message);
    int t = next_step ? NEXT_STEP : NEXT_TURN;
    ib_lock(ib);
    const json_t *seen = find_id(ib, id);
    if (seen) {
        bool same = json_equal(seen, message);
        ib_unlock(ib);
        if (!same)
            return weir__err(err, WEIR_E_DUPLICATE, NULL, NULL,
                             "inbox: input id '%s' was already used with different content", id);
        if (duplicate)
            *duplicate = true;
        return WEIR_OK;
    }
    json_t *copy = json_deep_copy(message);
    json_t *inserted = copy ? json_pack("[O]", copy) : NULL;
    json_t *note = copy ? json_pack("[O]", copy) : NULL;
    size_t at = json_array_size(ib->lists[t]);
    /* Grow the list's storage now (jansson never shrinks it), so that the
     * insert after the durable splice cannot fail. */
    bool room = json_array_append(ib->lists[t], json_null()) == 0;
    if (room)
        json_array_remove(ib->lists[t], at);
    int rc = inserted && note && room
                 ? splice(ib, t, 0, inserted, false, err)
                 : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    if (rc == WEIR_OK)
        json_array_insert(ib->lists[t], at, copy);
    ib_unlock(ib);
    json_decref(copy);
    json_decref(inserted);
    if (rc != WEIR_OK) {
        json_decref(note);
        return rc;
    }
    notify_all(ib, "inserted", note, 0);
    return WEIR_OK;
}

/* Remove the first `limit` messages of list `t` (all with SIZE_MAX) with one
 * pure-deletion splice and append them to `out`.  Everything that can fail
 * happens before the splice is logged, so either nothing changes or the
 * splice and the lists change together.  Lock held. */
static int take(weir__inbox *ib, int t, size_t limit, bool canceled, json_t *out, weir_error *err) {
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
    /* claimed ids count as delivered (a reopen restores them from the splice);
     * no queued id is in `delivered`, so every one marked here is new */
    for (; rc == WEIR_OK && !canceled && marked < n; marked++) {
        json_t *m = json_array_get(list, marked);
        if (json_object_set(ib->delivered, msg_id(m), m) != 0)
            rc = WEIR_E_NOMEM;
    }
    if (rc != WEIR_OK)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    else
        rc = splice(ib, t, n, NULL, canceled, err);
    if (rc != WEIR_OK) { /* undo: removals never allocate */
        for (size_t i = 0; i < marked; i++)
            json_object_del(ib->delivered, msg_id(json_array_get(list, i)));
        while (json_array_size(out) > out_len)
            json_array_remove(out, json_array_size(out) - 1);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        json_array_remove(list, 0);
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
    int rc = take(ib, NEXT_STEP, SIZE_MAX, false, out, err);
    /* The next-step splice, once logged, stands: if the queued prompt cannot
     * be taken too, the claim is that batch alone (as between steps) and the
     * prompt stays queued for the next turn boundary. */
    if (rc == WEIR_OK && turn_boundary) {
        int rc2 = take(ib, NEXT_TURN, 1, false, out, err);
        if (json_array_size(out) == 0)
            rc = rc2;
    }
    ib_unlock(ib);
    if (rc != WEIR_OK) {
        json_decref(out);
        return rc;
    }
    *claimed = json_incref(out);
    notify_all(ib, "claimed", out, turn);
    return WEIR_OK;
}

int weir__inbox_clear(weir__inbox *ib, weir_error *err) {
    if (!ib)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "inbox: NULL inbox");
    json_t *out = json_array();
    if (!out)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "inbox: out of memory");
    ib_lock(ib);
    int rc = take(ib, NEXT_STEP, SIZE_MAX, true, out, err);
    if (rc == WEIR_OK)
        rc = take(ib, NEXT_TURN, SIZE_MAX, true, out, err);
    ib_unlock(ib);
    notify_all(ib, "discarded", out, 0); /* whatever was removed durably */
    return rc;
}
