/*
 * plugins/store-postgres/store_postgres.c - weir-store-postgres.so: session
 * logs in PostgreSQL (docs/fleet.md), a weir_store (weir/store.h) over
 * pg_store.c.
 *
 *   {"session": {"store": "pg"},
 *    "plugins": [{"id": "pg", "plugin": "store-postgres",
 *                 "config": {"conninfo": "${WEIR_PG:-host=/run/postgresql dbname=weir}",
 *                            "lease_ms": 30000}}]}
 *
 * Each open session has its own connection.  A writer holds the session's
 * lease (pgs_lease) and a heartbeat thread renews it every lease_ms/3 on
 * that connection (a mutex serializes it with the core's calls).  When a
 * renewal finds the lease taken over, the handle is fenced: every later
 * append fails with WEIR_E_LEASE_LOST at once, and the store itself refuses
 * a fenced append in any case (the epoch check is in the append statement).
 * Every append is one committed statement, so `sync` has nothing left to do.
 * The inbox and claims (send, claim, wait) use two connections of the
 * store, shared by the process: one for send and claim, one that LISTENs
 * (wait blocks on it); each is reconnected on its next use after the
 * server went away.  inbox and consume run on the session's connection,
 * consume under the writer's epoch.  find_last and read_ranges (ABI 1.10)
 * run on the session's connection, one statement each.
 * Owner: this file (the handles and their threads, the shared connections).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pg_store.h"
#include "weir/plugin.h"

static const char config_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"conninfo\":{\"type\":\"string\",\"secret\":true},"
    "\"lease_ms\":{\"type\":\"integer\",\"minimum\":100},"
    "\"owner\":{\"type\":\"string\"}},"
    "\"required\":[\"conninfo\"],"
    "\"additionalProperties\":false}";

typedef struct store {
    char *conninfo;
    long lease_ms;
    char owner[192]; /* "<host>:<pid>" unless configured */
    /* send and claim share one connection, wait has its own (it blocks);
     * each is opened on first use and again after the server went away */
    pthread_mutex_t ctl_mu, listen_mu;
    pgs *ctl, *listen;
} store;

typedef struct handle {
    pgs *db;
    char *id;
    bool writer;
    int64_t epoch;
    pthread_mutex_t mu; /* db, fenced, stop */
    pthread_cond_t cv;
    pthread_t beat;
    bool beating, stop, fenced;
    long lease_ms;
} handle;

static int fail(weir_error *err, int code, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int fail(weir_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
        err->code = (weir_status)code;
    }
    return code;
}

static int code_of(pgs_status st) {
    switch (st) {
    case PGS_OK: return WEIR_OK;
    case PGS_BUSY: return WEIR_E_BUSY;
    case PGS_LEASE_LOST: return WEIR_E_LEASE_LOST;
    case PGS_NOT_FOUND: return WEIR_E_NOT_FOUND;
    case PGS_CORRUPT: return WEIR_E_LOG_CORRUPT;
    case PGS_NOMEM: return WEIR_E_NOMEM;
    case PGS_CONFLICT:
    case PGS_IO:
    default: return WEIR_E_IO;
    }
}

static int fail_pg(weir_error *err, pgs_status st, const pgs *db) {
    return fail(err, code_of(st), "%s", pgs_error(db));
}

/* The heartbeat: renew every lease_ms/3 until stopped or fenced. */
static void *heartbeat(void *arg) {
    handle *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop && !h->fenced) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        long ms = h->lease_ms / 3;
        t.tv_sec += ms / 1000;
        t.tv_nsec += (ms % 1000) * 1000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        int rc = 0;
        while (!h->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&h->cv, &h->mu, &t);
        if (h->stop)
            break;
        if (pgs_renew(h->db, h->id, h->epoch, h->lease_ms) == PGS_LEASE_LOST) {
            __atomic_store_n(&h->fenced, true, __ATOMIC_RELAXED);
            fprintf(stderr, "weir: store-postgres: %s\n", pgs_error(h->db));
        }
        /* another failure (the server restarting): the next beat retries;
         * the lease is only lost when another writer takes it over */
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void handle_free(handle *h) {
    if (!h)
        return;
    if (h->beating) {
        pthread_mutex_lock(&h->mu);
        h->stop = true;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->beat, NULL);
    }
    if (h->writer && h->db && !h->fenced)
        pgs_release(h->db, h->id, h->epoch);
    pgs_close(h->db);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h->id);
    free(h);
}

static int st_open(void *self, const char *id, const char *path, uint32_t flags, void **out,
                   uint64_t *epoch, weir_error *err) {
    (void)path; /* rows, not files */
    store *s = self;
    if (!s || !id || !out || !epoch)
        return fail(err, WEIR_E_INVAL, "store-postgres: open: missing argument");
    *out = NULL;
    *epoch = 0;
    handle *h = calloc(1, sizeof *h);
    if (!h || !(h->id = strdup(id))) {
        free(h);
        return fail(err, WEIR_E_NOMEM, "store-postgres: out of memory");
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->lease_ms = s->lease_ms;
    pgs_status st = pgs_open(s->conninfo, &h->db);
    if (st != PGS_OK) {
        int rc = fail_pg(err, st, h->db);
        handle_free(h);
        return rc;
    }
    if (flags & WEIR_STORE_READONLY) {
        bool live;
        char owner[192];
        st = pgs_probe(h->db, id, &live, owner, sizeof owner);
        if (st != PGS_OK) {
            int rc = st == PGS_NOT_FOUND ? fail(err, WEIR_E_NOT_FOUND, "session %s not found", id)
                                         : fail_pg(err, st, h->db);
            handle_free(h);
            return rc;
        }
        *out = h;
        return WEIR_OK;
    }
    int64_t next;
    st = pgs_lease(h->db, id, s->owner, s->lease_ms, &h->epoch, &next);
    if (st != PGS_OK) {
        int rc = st == PGS_BUSY
                     ? fail(err, WEIR_E_BUSY, "session %s is open for writing: %s", id,
                            pgs_error(h->db))
                     : fail_pg(err, st, h->db);
        handle_free(h);
        return rc;
    }
    h->writer = true;
    if (pthread_create(&h->beat, NULL, heartbeat, h) != 0) {
        handle_free(h);
        return fail(err, WEIR_E_NOMEM, "store-postgres: no heartbeat thread");
    }
    h->beating = true;
    *epoch = (uint64_t)h->epoch;
    *out = h;
    return WEIR_OK;
}

static int st_read(void *self, void *hp, uint64_t from_seq, char **buf, size_t *len,
                   weir_error *err) {
    (void)self;
    handle *h = hp;
    if (!h || !buf || !len)
        return fail(err, WEIR_E_INVAL, "store-postgres: read: missing argument");
    pthread_mutex_lock(&h->mu);
    pgs_status st = pgs_read(h->db, h->id, (int64_t)from_seq, buf, len);
    int rc = st == PGS_OK ? WEIR_OK : fail_pg(err, st, h->db);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static void st_buffer_free(void *self, char *buf) {
    (void)self;
    free(buf);
}

static int st_append(void *self, void *hp, uint64_t epoch, uint64_t first_seq, size_t count,
                     const char *lines, size_t len, uint32_t flags, weir_error *err) {
    (void)self;
    (void)flags; /* every append is committed: durable on return */
    handle *h = hp;
    if (!h || (count && !lines))
        return fail(err, WEIR_E_INVAL, "store-postgres: append: missing argument");
    if (!h->writer)
        return fail(err, WEIR_E_STATE, "session %s is open read-only", h->id);
    /* the lines as NUL-terminated strings: one copy, '\n' -> '\0' */
    char *copy = malloc(len + 1);
    const char **v = malloc((count ? count : 1) * sizeof *v);
    if (!copy || !v) {
        free(copy);
        free(v);
        return fail(err, WEIR_E_NOMEM, "store-postgres: out of memory");
    }
    memcpy(copy, lines, len);
    copy[len] = '\0';
    size_t n = 0;
    for (char *p = copy; n < count && p < copy + len;) {
        char *nl = memchr(p, '\n', (size_t)(copy + len - p));
        if (!nl)
            break;
        *nl = '\0';
        v[n++] = p;
        p = nl + 1;
    }
    int rc;
    if (n != count) {
        rc = fail(err, WEIR_E_INVAL, "store-postgres: append: %zu lines given, %zu expected", n,
                  count);
    } else {
        pthread_mutex_lock(&h->mu);
        if (h->fenced || (int64_t)epoch != h->epoch) {
            rc = fail(err, WEIR_E_LEASE_LOST,
                      "session %s: the lease was taken over by another writer; this writer "
                      "stops",
                      h->id);
        } else {
            pgs_status st = pgs_append(h->db, h->id, h->epoch, (int64_t)first_seq, v, count);
            if (st == PGS_LEASE_LOST)
                __atomic_store_n(&h->fenced, true, __ATOMIC_RELAXED);
            rc = st == PGS_OK ? WEIR_OK : fail_pg(err, st, h->db);
        }
        pthread_mutex_unlock(&h->mu);
    }
    free(copy);
    free(v);
    return rc;
}

static int st_sync(void *self, void *hp, weir_error *err) {
    (void)self;
    (void)err;
    (void)hp;
    return WEIR_OK; /* each append was a committed transaction */
}

static void st_close(void *self, void *hp) {
    (void)self;
    handle_free(hp);
}

static int st_list(void *self, const char *where, json_t **sessions, weir_error *err) {
    (void)where;
    store *s = self;
    if (!s || !sessions)
        return fail(err, WEIR_E_INVAL, "store-postgres: list: missing argument");
    *sessions = NULL;
    pgs *db = NULL;
    pgs_status st = pgs_open(s->conninfo, &db);
    char *text = NULL;
    if (st == PGS_OK)
        st = pgs_list(db, &text);
    if (st != PGS_OK) {
        int rc = fail_pg(err, st, db);
        pgs_close(db);
        return rc;
    }
    pgs_close(db);
    json_t *rows = json_loads(text, 0, NULL);
    free(text);
    json_t *out = json_array();
    if (!rows || !out) {
        json_decref(rows);
        json_decref(out);
        return fail(err, WEIR_E_NOMEM, "store-postgres: out of memory");
    }
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) {
        json_t *o = json_pack("{s:O, s:O}", "id", json_object_get(r, "session_id"), "live",
                              json_object_get(r, "live"));
        if (!o || json_array_append_new(out, o) != 0) {
            json_decref(rows);
            json_decref(out);
            return fail(err, WEIR_E_NOMEM, "store-postgres: out of memory");
        }
        const json_t *owner = json_object_get(r, "owner");
        if (json_is_string(owner))
            json_object_set(o, "owner", json_object_get(r, "owner"));
    }
    json_decref(rows);
    *sessions = out;
    return WEIR_OK;
}

static int st_probe(void *self, const char *id, const char *path, bool *live, long *pid,
                    weir_error *err) {
    (void)path;
    store *s = self;
    if (!s || !id || !live)
        return fail(err, WEIR_E_INVAL, "store-postgres: probe: missing argument");
    if (pid)
        *pid = 0;
    pgs *db = NULL;
    pgs_status st = pgs_open(s->conninfo, &db);
    char owner[192];
    if (st == PGS_OK)
        st = pgs_probe(db, id, live, owner, sizeof owner);
    int rc = st == PGS_OK         ? WEIR_OK
             : st == PGS_NOT_FOUND ? fail(err, WEIR_E_NOT_FOUND, "session %s not found", id)
                                   : fail_pg(err, st, db);
    pgs_close(db);
    return rc;
}

/* The store's shared connection `*db` (lock held): (re)connected when it is
 * missing or broken.  PGS_OK, else the failure with its text in `err`. */
static int shared_conn(store *s, pgs **db, weir_error *err) {
    if (*db && pgs_connected(*db))
        return WEIR_OK;
    pgs_close(*db);
    *db = NULL;
    pgs_status st = pgs_open(s->conninfo, db);
    if (st == PGS_OK)
        return WEIR_OK;
    int rc = fail_pg(err, st, *db);
    pgs_close(*db);
    *db = NULL;
    return rc;
}

static int st_send(void *self, const char *id, const char *input_id, const char *mode,
                   const char *message, bool *duplicate, weir_error *err) {
    store *s = self;
    if (!s || !id || !input_id || !mode || !message || !duplicate)
        return fail(err, WEIR_E_INVAL, "store-postgres: send: missing argument");
    pthread_mutex_lock(&s->ctl_mu);
    int rc = shared_conn(s, &s->ctl, err);
    if (rc == WEIR_OK) {
        pgs_status st = pgs_send(s->ctl, id, input_id, mode, message, duplicate);
        rc = st == PGS_OK         ? WEIR_OK
             : st == PGS_CONFLICT ? fail(err, WEIR_E_DUPLICATE, "%s", pgs_error(s->ctl))
                                  : fail_pg(err, st, s->ctl);
    }
    pthread_mutex_unlock(&s->ctl_mu);
    return rc;
}

static int st_claim_except(void *self, const char *const *skip, size_t nskip, char **id,
                           char **prev_owner, weir_error *err) {
    store *s = self;
    if (!s || !id || !prev_owner || (nskip && !skip))
        return fail(err, WEIR_E_INVAL, "store-postgres: claim: missing argument");
    *id = NULL;
    *prev_owner = NULL;
    pthread_mutex_lock(&s->ctl_mu);
    int rc = shared_conn(s, &s->ctl, err);
    if (rc == WEIR_OK) {
        int64_t epoch, next;
        pgs_status st = pgs_claim_except(s->ctl, s->owner, s->lease_ms, skip, nskip, id, &epoch,
                                         &next, prev_owner);
        rc = st == PGS_OK ? WEIR_OK : fail_pg(err, st, s->ctl);
    }
    pthread_mutex_unlock(&s->ctl_mu);
    return rc;
}

static int st_claim(void *self, char **id, char **prev_owner, weir_error *err) {
    return st_claim_except(self, NULL, 0, id, prev_owner, err);
}

static int st_inbox(void *self, void *hp, json_t **inputs, weir_error *err) {
    (void)self;
    handle *h = hp;
    if (!h || !inputs)
        return fail(err, WEIR_E_INVAL, "store-postgres: inbox: missing argument");
    *inputs = NULL;
    char *text = NULL;
    pthread_mutex_lock(&h->mu);
    pgs_status st = pgs_inbox(h->db, h->id, &text);
    int rc = st == PGS_OK ? WEIR_OK : fail_pg(err, st, h->db);
    pthread_mutex_unlock(&h->mu);
    if (rc != WEIR_OK)
        return rc;
    json_error_t je;
    *inputs = json_loads(text, 0, &je);
    free(text);
    if (!json_is_array(*inputs)) {
        json_decref(*inputs);
        *inputs = NULL;
        return fail(err, WEIR_E_IO, "session %s: the inbox rows do not read as JSON: %s", h->id,
                    je.text);
    }
    return WEIR_OK;
}

static int st_consume(void *self, void *hp, uint64_t epoch, const json_t *inbox_ids,
                      weir_error *err) {
    (void)self;
    handle *h = hp;
    size_t n = json_array_size(inbox_ids);
    if (!h || n == 0)
        return fail(err, WEIR_E_INVAL, "store-postgres: consume: bad argument");
    if (!h->writer)
        return fail(err, WEIR_E_STATE, "session %s is open read-only", h->id);
    /* the ids as a PostgreSQL array literal: "{3,5,8}" */
    char *ids = malloc(n * 21 + 3);
    if (!ids)
        return fail(err, WEIR_E_NOMEM, "session %s: out of memory", h->id);
    size_t at = 0;
    ids[at++] = '{';
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(inbox_ids, i);
        if (!json_is_integer(v) || json_integer_value(v) <= 0) {
            free(ids);
            return fail(err, WEIR_E_INVAL, "store-postgres: consume: inbox ids must be > 0");
        }
        at += (size_t)snprintf(ids + at, 22, "%s%" JSON_INTEGER_FORMAT, i ? "," : "",
                               json_integer_value(v));
    }
    ids[at++] = '}';
    ids[at] = '\0';
    pthread_mutex_lock(&h->mu);
    int rc;
    if (h->fenced || (int64_t)epoch != h->epoch) {
        rc = fail(err, WEIR_E_LEASE_LOST,
                  "session %s: the lease was taken over by another writer; this writer stops",
                  h->id);
    } else {
        pgs_status st = pgs_consume(h->db, h->id, h->epoch, ids);
        if (st == PGS_LEASE_LOST)
            __atomic_store_n(&h->fenced, true, __ATOMIC_RELAXED);
        rc = st == PGS_OK ? WEIR_OK : fail_pg(err, st, h->db);
    }
    pthread_mutex_unlock(&h->mu);
    free(ids);
    return rc;
}

static int st_wait(void *self, int timeout_ms, bool *woken, weir_error *err) {
    store *s = self;
    if (!s || !woken || timeout_ms < 0)
        return fail(err, WEIR_E_INVAL, "store-postgres: wait: bad argument");
    *woken = false;
    pthread_mutex_lock(&s->listen_mu);
    int rc = shared_conn(s, &s->listen, err);
    if (rc == WEIR_OK) {
        pgs_status st = pgs_wait(s->listen, timeout_ms, woken);
        rc = st == PGS_OK ? WEIR_OK : fail_pg(err, st, s->listen);
    }
    pthread_mutex_unlock(&s->listen_mu);
    return rc;
}

static bool st_lease_lost(void *self, void *hp) {
    (void)self;
    handle *h = hp;
    if (!h || !h->writer)
        return false;
    /* not h->mu: a statement may hold it for long; a stale read is fine */
    return __atomic_load_n(&h->fenced, __ATOMIC_RELAXED);
}

/* find_last: the last event of the type, read back over the primary key
 * (pgs_find_last). */
static int st_find_last(void *self, void *hp, const char *type, uint64_t *seq, weir_error *err) {
    (void)self;
    handle *h = hp;
    if (!h || !type || !seq)
        return fail(err, WEIR_E_INVAL, "store-postgres: find_last: missing argument");
    int64_t found = 0;
    pthread_mutex_lock(&h->mu);
    pgs_status st = pgs_find_last(h->db, h->id, type, &found);
    int rc = st == PGS_OK ? WEIR_OK : fail_pg(err, st, h->db);
    pthread_mutex_unlock(&h->mu);
    if (rc == WEIR_OK)
        *seq = (uint64_t)found;
    return rc;
}

/* read_ranges: the rows of all the ranges in one statement (pgs_read_ranges). */
static int st_read_ranges(void *self, void *hp, const uint64_t *ranges, size_t n, char **buf,
                          size_t *len, weir_error *err) {
    (void)self;
    handle *h = hp;
    if (!h || (n && !ranges) || !buf || !len)
        return fail(err, WEIR_E_INVAL, "store-postgres: read_ranges: missing argument");
    *buf = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++)
        if (ranges[2 * i] > ranges[2 * i + 1] || (i && ranges[2 * i] <= ranges[2 * i - 1]))
            return fail(err, WEIR_E_INVAL,
                        "session %s: read_ranges: the ranges must be ascending and disjoint, "
                        "each first <= last",
                        h->id);
    pthread_mutex_lock(&h->mu);
    pgs_status st = pgs_read_ranges(h->db, h->id, ranges, n, buf, len);
    int rc = st == PGS_OK ? WEIR_OK : fail_pg(err, st, h->db);
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static const weir_store vtable = {
    .struct_size = sizeof(weir_store),
    .open = st_open,
    .read = st_read,
    .buffer_free = st_buffer_free,
    .append = st_append,
    .sync = st_sync,
    .truncate = NULL, /* a committed row is never torn */
    .close = st_close,
    .list = st_list,
    .probe = st_probe,
    .send = st_send,
    .claim = st_claim,
    .inbox = st_inbox,
    .consume = st_consume,
    .wait = st_wait,
    .lease_lost = st_lease_lost,
    .claim_except = st_claim_except,
    .find_last = st_find_last,
    .read_ranges = st_read_ranges,
};

static void store_free(store *s) {
    if (!s)
        return;
    pgs_close(s->ctl);
    pgs_close(s->listen);
    pthread_mutex_destroy(&s->ctl_mu);
    pthread_mutex_destroy(&s->listen_mu);
    free(s->conninfo);
    free(s);
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    if (!WEIR_API_HAS(api, store_register))
        return fail(err, WEIR_E_PLUGIN_ABI, "store-postgres: the host has no store_register (ABI 1.5)");
    const char *conninfo = json_string_value(json_object_get(config, "conninfo"));
    if (!conninfo)
        return fail(err, WEIR_E_PLUGIN_CONFIG, "conninfo: expected a libpq connection string");
    store *s = calloc(1, sizeof *s);
    if (!s || !(s->conninfo = strdup(conninfo))) {
        free(s);
        return WEIR_E_NOMEM;
    }
    pthread_mutex_init(&s->ctl_mu, NULL);
    pthread_mutex_init(&s->listen_mu, NULL);
    const json_t *lease = json_object_get(config, "lease_ms");
    s->lease_ms = json_is_integer(lease) ? (long)json_integer_value(lease) : 30000;
    const char *owner = json_string_value(json_object_get(config, "owner"));
    if (owner) {
        snprintf(s->owner, sizeof s->owner, "%s", owner);
    } else {
        char host[128] = "";
        if (gethostname(host, sizeof host - 1) != 0)
            snprintf(host, sizeof host, "unknown");
        snprintf(s->owner, sizeof s->owner, "%s:%ld", host, (long)getpid());
    }
    /* connect once now: a wrong conninfo fails the deployment at start-up,
     * naming the row, instead of at the first session */
    pgs *db = NULL;
    pgs_status st = pgs_open(s->conninfo, &db);
    if (st != PGS_OK) {
        int rc = fail(err, WEIR_E_PLUGIN_CONFIG, "%s", pgs_error(db));
        pgs_close(db);
        store_free(s);
        return rc;
    }
    pgs_close(db);
    int rc = weir_store_register(self, &vtable, s);
    if (rc != WEIR_OK) {
        store_free(s);
        return fail(err, rc, "store-postgres: store_register failed");
    }
    weir_plugin_set_data(self, s);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { store_free(weir_plugin_data(self)); }

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    "store-postgres",
    "0.1.0",
    "Session logs in PostgreSQL, with leases and fencing",
    config_schema,
    init,
    fini,
    {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
