/*
 * plugins/store-postgres/pg_store.c - see pg_store.h.
 *
 * Every statement is parameterized (PQexecParams, text parameters): no
 * value is ever spliced into SQL text.  An append is a single statement (a
 * CTE that advances the session row's next_seq under its row lock, then
 * inserts the events), so it is atomic without an explicit transaction and
 * serializes against a concurrent takeover on the same row.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "pg_store.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pgs {
    PGconn *conn;
    char err[512];
};

static pgs_status fail(pgs *db, pgs_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->err, sizeof db->err, fmt, ap);
    va_end(ap);
    return st;
}

/* The server's message for a failed result, without its trailing newline. */
static pgs_status fail_res(pgs *db, PGresult *res, const char *what) {
    const char *m = res ? PQresultErrorMessage(res) : PQerrorMessage(db->conn);
    if (!m || !*m)
        m = PQerrorMessage(db->conn);
    size_t n = strcspn(m, "\n");
    pgs_status st = fail(db, PGS_IO, "postgres: %s: %.*s", what, (int)n, m);
    PQclear(res);
    return st;
}

static PGresult *exec(pgs *db, const char *sql, int n, const char *const *params) {
    return PQexecParams(db->conn, sql, n, NULL, params, NULL, NULL, 0);
}

static bool ok(PGresult *res);

/* The one text value a one-row query returns, in a new buffer (*out). */
static pgs_status query_text(pgs *db, const char *sql, int n, const char *const *params,
                             const char *what, char **out) {
    PGresult *res = exec(db, sql, n, params);
    if (!ok(res))
        return fail_res(db, res, what);
    *out = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return *out ? PGS_OK : fail(db, PGS_NOMEM, "postgres: out of memory");
}

static bool ok(PGresult *res) {
    ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

static const char schema_v1[] =
    "CREATE TABLE weir_sessions ("
    "  session_id text PRIMARY KEY,"
    "  owner text,"
    "  epoch bigint NOT NULL DEFAULT 0,"
    "  lease_expires timestamptz,"
    "  next_seq bigint NOT NULL DEFAULT 0 CHECK (next_seq >= 0),"
    "  created timestamptz NOT NULL DEFAULT now(),"
    "  updated timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE weir_events ("
    "  session_id text NOT NULL REFERENCES weir_sessions ON DELETE CASCADE,"
    "  seq bigint NOT NULL CHECK (seq >= 0),"
    "  event jsonb NOT NULL,"
    "  PRIMARY KEY (session_id, seq));"
    "CREATE TABLE weir_inbox ("
    "  id bigserial PRIMARY KEY,"
    "  session_id text NOT NULL REFERENCES weir_sessions ON DELETE CASCADE,"
    "  input_id text,"
    "  mode text NOT NULL,"
    "  message jsonb NOT NULL,"
    "  queued timestamptz NOT NULL DEFAULT now(),"
    "  UNIQUE (session_id, input_id));"
    "CREATE INDEX weir_inbox_session ON weir_inbox (session_id, id);";

/* Create or migrate the schema in one transaction, under an advisory lock
 * so that workers starting together migrate once. */
static pgs_status migrate(pgs *db) {
    PGresult *res = PQexec(db->conn, "BEGIN;"
                                     "SELECT pg_advisory_xact_lock(7765692);" /* "weir" */
                                     "CREATE TABLE IF NOT EXISTS weir_schema (version int NOT NULL);"
                                     "SELECT max(version) FROM weir_schema");
    if (!ok(res)) {
        res = (PQclear(res), PQexec(db->conn, "ROLLBACK"));
        PQclear(res);
        return fail(db, PGS_IO, "postgres: creating the schema: %.*s",
                    (int)strcspn(PQerrorMessage(db->conn), "\n"), PQerrorMessage(db->conn));
    }
    int version = PQgetisnull(res, 0, 0) ? 0 : atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    pgs_status st = PGS_OK;
    if (version > PGS_SCHEMA_VERSION) {
        st = fail(db, PGS_IO,
                  "postgres: the database has weir schema version %d, newer than this "
                  "plugin's %d: upgrade the plugin",
                  version, PGS_SCHEMA_VERSION);
    } else if (version < 1) {
        res = PQexec(db->conn, schema_v1);
        if (!ok(res))
            st = fail_res(db, res, "creating schema version 1");
        else
            PQclear(res);
        if (st == PGS_OK) {
            res = PQexec(db->conn, "INSERT INTO weir_schema VALUES (1)");
            if (!ok(res))
                st = fail_res(db, res, "recording the schema version");
            else
                PQclear(res);
        }
    }
    res = PQexec(db->conn, st == PGS_OK ? "COMMIT" : "ROLLBACK");
    if (!ok(res) && st == PGS_OK)
        return fail_res(db, res, "committing the schema");
    PQclear(res);
    return st;
}

pgs_status pgs_open(const char *conninfo, pgs **out) {
    if (!out)
        return PGS_NOMEM;
    *out = calloc(1, sizeof **out);
    pgs *db = *out;
    if (!db)
        return PGS_NOMEM;
    if (!conninfo)
        return fail(db, PGS_IO, "postgres: no conninfo");
    db->conn = PQconnectdb(conninfo);
    if (!db->conn)
        return fail(db, PGS_NOMEM, "postgres: out of memory");
    if (PQstatus(db->conn) != CONNECTION_OK)
        return fail(db, PGS_IO, "postgres: cannot connect: %.*s",
                    (int)strcspn(PQerrorMessage(db->conn), "\n"), PQerrorMessage(db->conn));
    PGresult *res = PQexec(db->conn, "SET client_min_messages = warning");
    PQclear(res);
    return migrate(db);
}

void pgs_close(pgs *db) {
    if (!db)
        return;
    if (db->conn)
        PQfinish(db->conn);
    free(db);
}

const char *pgs_error(const pgs *db) { return db ? db->err : "postgres: out of memory"; }

static void fmt_i64(char *buf, size_t n, int64_t v) { snprintf(buf, n, "%" PRId64, v); }

pgs_status pgs_lease(pgs *db, const char *id, const char *owner, int64_t lease_ms, int64_t *epoch,
                     int64_t *next_seq) {
    if (!db || !id || !owner || lease_ms <= 0 || !epoch || !next_seq)
        return db ? fail(db, PGS_IO, "postgres: lease: bad arguments") : PGS_NOMEM;
    char ms[32];
    fmt_i64(ms, sizeof ms, lease_ms);
    const char *p[] = {id, owner, ms};
    PGresult *res = exec(db, "INSERT INTO weir_sessions (session_id) VALUES ($1) "
                             "ON CONFLICT (session_id) DO NOTHING", 1, p);
    if (!ok(res))
        return fail_res(db, res, "creating the session");
    PQclear(res);
    res = exec(db,
               "UPDATE weir_sessions SET owner = $2, epoch = epoch + 1,"
               " lease_expires = now() + $3::bigint * interval '1 millisecond', updated = now()"
               " WHERE session_id = $1 AND (owner IS NULL OR owner = $2 OR lease_expires < now())"
               " RETURNING epoch, next_seq",
               3, p);
    if (!ok(res))
        return fail_res(db, res, "taking the lease");
    if (PQntuples(res) == 1) {
        *epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        *next_seq = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        PQclear(res);
        return PGS_OK;
    }
    PQclear(res);
    res = exec(db,
               "SELECT owner, greatest(0, (extract(epoch FROM lease_expires - now()) * 1000)::bigint)"
               " FROM weir_sessions WHERE session_id = $1",
               1, p);
    if (!ok(res))
        return fail_res(db, res, "reading the lease");
    pgs_status st = PQntuples(res) == 1
                        ? fail(db, PGS_BUSY,
                               "session %s is leased by %s for %s ms more", id,
                               PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1))
                        : fail(db, PGS_BUSY, "session %s is leased by another owner", id);
    PQclear(res);
    return st;
}

pgs_status pgs_renew(pgs *db, const char *id, int64_t epoch, int64_t lease_ms) {
    if (!db || !id || lease_ms <= 0)
        return db ? fail(db, PGS_IO, "postgres: renew: bad arguments") : PGS_NOMEM;
    char e[32], ms[32];
    fmt_i64(e, sizeof e, epoch);
    fmt_i64(ms, sizeof ms, lease_ms);
    const char *p[] = {id, e, ms};
    PGresult *res = exec(db,
                         "UPDATE weir_sessions SET"
                         " lease_expires = now() + $3::bigint * interval '1 millisecond'"
                         " WHERE session_id = $1 AND epoch = $2::bigint AND owner IS NOT NULL",
                         3, p);
    if (!ok(res))
        return fail_res(db, res, "renewing the lease");
    bool renewed = atoi(PQcmdTuples(res)) == 1;
    PQclear(res);
    return renewed ? PGS_OK
                   : fail(db, PGS_LEASE_LOST,
                          "session %s: the lease of epoch %s was taken over by another writer", id,
                          e);
}

pgs_status pgs_release(pgs *db, const char *id, int64_t epoch) {
    if (!db || !id)
        return db ? fail(db, PGS_IO, "postgres: release: bad arguments") : PGS_NOMEM;
    char e[32];
    fmt_i64(e, sizeof e, epoch);
    const char *p[] = {id, e};
    PGresult *res = exec(db,
                         "UPDATE weir_sessions SET owner = NULL, lease_expires = NULL,"
                         " updated = now() WHERE session_id = $1 AND epoch = $2::bigint",
                         2, p);
    if (!ok(res))
        return fail_res(db, res, "releasing the lease");
    PQclear(res);
    return PGS_OK;
}

pgs_status pgs_append(pgs *db, const char *id, int64_t epoch, int64_t first_seq,
                      const char *const *lines, size_t n) {
    return pgs_append_consume(db, id, epoch, first_seq, lines, n, NULL);
}

pgs_status pgs_append_consume(pgs *db, const char *id, int64_t epoch, int64_t first_seq,
                              const char *const *lines, size_t n, const char *ids) {
    if (!db || !id || (n && !lines) || first_seq < 0 || n > 10000)
        return db ? fail(db, PGS_IO, "postgres: append: bad arguments") : PGS_NOMEM;
    if (n == 0)
        return PGS_OK;
    /* $1 id, $2 epoch, $3 first seq, $4 count, $5 the inbox ids to
     * consume (an array literal; "{}": none), then one parameter per line: the events arrive as (1, $6),
     * (2, $7), ... with their ordinal.  The inbox DELETE runs with the
     * UPDATE (data-modifying CTEs always run), only when the UPDATE matched. */
    size_t sqlcap = 768 + n * 40;
    char *sql = malloc(sqlcap);
    const char **p = malloc((5 + n) * sizeof *p);
    if (!sql || !p) {
        free(sql);
        free(p);
        return fail(db, PGS_NOMEM, "postgres: out of memory");
    }
    size_t len = (size_t)snprintf(
        sql, sqlcap,
        "WITH s AS (UPDATE weir_sessions SET next_seq = next_seq + $4::bigint, updated = now()"
        " WHERE session_id = $1 AND epoch = $2::bigint AND owner IS NOT NULL"
        " AND next_seq = $3::bigint RETURNING session_id),"
        " d AS (DELETE FROM weir_inbox WHERE session_id IN (SELECT session_id FROM s)"
        " AND id = ANY($5::bigint[]) RETURNING id)"
        " INSERT INTO weir_events (session_id, seq, event)"
        " SELECT s.session_id, $3::bigint + v.ord - 1, v.ev::jsonb FROM s, (VALUES ");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(sql + len, sqlcap - len, "%s(%zu, $%zu)", i ? "," : "", i + 1,
                                i + 6);
    snprintf(sql + len, sqlcap - len, ") AS v(ord, ev)");
    char e[32], f[32], c[32];
    fmt_i64(e, sizeof e, epoch);
    fmt_i64(f, sizeof f, first_seq);
    fmt_i64(c, sizeof c, (int64_t)n);
    p[0] = id;
    p[1] = e;
    p[2] = f;
    p[3] = c;
    p[4] = ids ? ids : "{}";
    for (size_t i = 0; i < n; i++)
        p[5 + i] = lines[i];
    PGresult *res = exec(db, sql, (int)(5 + n), p);
    free(sql);
    free(p);
    if (!ok(res))
        return fail_res(db, res, "appending events");
    size_t done = (size_t)strtoull(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    if (done == n)
        return PGS_OK;
    /* nothing was inserted: say why */
    const char *q[] = {id};
    res = exec(db, "SELECT epoch, next_seq, owner IS NULL FROM weir_sessions WHERE session_id = $1",
               1, q);
    if (!ok(res))
        return fail_res(db, res, "reading the session");
    pgs_status st;
    if (PQntuples(res) != 1)
        st = fail(db, PGS_NOT_FOUND, "session %s does not exist", id);
    else if (strtoll(PQgetvalue(res, 0, 0), NULL, 10) != epoch || PQgetvalue(res, 0, 2)[0] == 't')
        st = fail(db, PGS_LEASE_LOST,
                  "session %s: the lease of epoch %s is lost (the session's epoch is %s): "
                  "this writer must stop",
                  id, e, PQgetvalue(res, 0, 0));
    else
        st = fail(db, PGS_CONFLICT, "session %s: append at seq %s, but the next seq is %s", id, f,
                  PQgetvalue(res, 0, 1));
    PQclear(res);
    return st;
}

/* The rows of `res` (seq, its envelope's seq matches, event text; taken:
 * cleared here) as JSON Lines in a new buffer, as pgs_read returns them. */
static pgs_status lines_of(pgs *db, const char *id, PGresult *res, char **buf, size_t *len) {
    int rows = PQntuples(res);
    size_t total = 1;
    for (int i = 0; i < rows; i++)
        total += (size_t)PQgetlength(res, i, 2) + 1;
    char *out = malloc(total);
    if (!out) {
        PQclear(res);
        return fail(db, PGS_NOMEM, "postgres: out of memory");
    }
    size_t at = 0;
    for (int i = 0; i < rows; i++) {
        if (PQgetvalue(res, i, 1)[0] != 't') {
            pgs_status st = fail(db, PGS_CORRUPT,
                                 "session %s: the event stored at seq %s carries another seq", id,
                                 PQgetvalue(res, i, 0));
            free(out);
            PQclear(res);
            return st;
        }
        size_t n = (size_t)PQgetlength(res, i, 2);
        memcpy(out + at, PQgetvalue(res, i, 2), n);
        at += n;
        out[at++] = '\n';
    }
    out[at] = '\0';
    PQclear(res);
    *buf = out;
    *len = at;
    return PGS_OK;
}

pgs_status pgs_read(pgs *db, const char *id, int64_t from_seq, char **buf, size_t *len) {
    if (!db || !id || !buf || !len || from_seq < 0)
        return db ? fail(db, PGS_IO, "postgres: read: bad arguments") : PGS_NOMEM;
    *buf = NULL;
    *len = 0;
    char f[32];
    fmt_i64(f, sizeof f, from_seq);
    const char *p[] = {id, f};
    PGresult *res = exec(db, "SELECT seq, coalesce((event->'seq')::text = seq::text, false),"
                             " event::text FROM weir_events"
                             " WHERE session_id = $1 AND seq >= $2::bigint ORDER BY seq",
                         2, p);
    if (!ok(res))
        return fail_res(db, res, "reading events");
    return lines_of(db, id, res, buf, len);
}

/*
 * No index on the type: a partial index on (session_id, seq) WHERE
 * event->>'type' = 'log/checkpoint' would answer in one index probe, but
 * it needs schema version 2 (an older plugin then refuses the database
 * until it is upgraded) and a build that reads every event of every
 * session under a lock that stops appends.  Read back over the primary
 * key, the query stops at the last checkpoint: it reads the events after
 * it, which the open that asks reads right after anyway.
 */
pgs_status pgs_find_last(pgs *db, const char *id, const char *type, int64_t *seq) {
    if (!db || !id || !type || !seq)
        return db ? fail(db, PGS_IO, "postgres: find_last: bad arguments") : PGS_NOMEM;
    const char *p[] = {id, type};
    PGresult *res = exec(db, PGS_FIND_LAST_SQL, 2, p);
    if (!ok(res))
        return fail_res(db, res, "finding the last event of a type");
    if (PQntuples(res) != 1) {
        PQclear(res);
        return fail(db, PGS_NOT_FOUND, "session %s: no %s event", id, type);
    }
    *seq = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return PGS_OK;
}

pgs_status pgs_read_ranges(pgs *db, const char *id, const uint64_t *ranges, size_t n, char **buf,
                           size_t *len) {
    if (!db || !id || (n && !ranges) || !buf || !len || n > SIZE_MAX / 64)
        return db ? fail(db, PGS_IO, "postgres: read_ranges: bad arguments") : PGS_NOMEM;
    *buf = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++)
        if (ranges[2 * i] > ranges[2 * i + 1] || (i && ranges[2 * i] <= ranges[2 * i - 1]))
            return fail(db, PGS_IO,
                        "postgres: read_ranges: the ranges must be ascending and disjoint, each "
                        "first <= last");
    /* the firsts and the lasts as two bigint[] literals; a seq past
     * INT64_MAX is past every stored one */
    char *lo = malloc(n * 21 + 3), *hi = malloc(n * 21 + 3);
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return fail(db, PGS_NOMEM, "postgres: out of memory");
    }
    size_t a = 0, b = 0, used = 0;
    lo[a++] = hi[b++] = '{';
    for (size_t i = 0; i < n && ranges[2 * i] <= (uint64_t)INT64_MAX; i++, used++) {
        uint64_t last = ranges[2 * i + 1] > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX
                                                                : ranges[2 * i + 1];
        a += (size_t)snprintf(lo + a, 22, "%s%" PRIu64, used ? "," : "", ranges[2 * i]);
        b += (size_t)snprintf(hi + b, 22, "%s%" PRIu64, used ? "," : "", last);
    }
    lo[a++] = hi[b++] = '}';
    lo[a] = hi[b] = '\0';
    const char *p[] = {id, lo, hi};
    /* one index range scan of the primary key a range (a nested loop over
     * the ranges), the rows in seq order */
    PGresult *res = exec(db, PGS_READ_RANGES_SQL, 3, p);
    free(lo);
    free(hi);
    if (!ok(res))
        return fail_res(db, res, "reading events");
    return lines_of(db, id, res, buf, len);
}

pgs_status pgs_list(pgs *db, char **json) {
    if (!db || !json)
        return db ? fail(db, PGS_IO, "postgres: list: bad arguments") : PGS_NOMEM;
    *json = NULL;
    return query_text(
        db,
        "SELECT coalesce(json_agg(json_build_object('session_id', s.session_id, 'owner', s.owner,"
        " 'epoch', s.epoch, 'lease_expires_ms',"
        " (extract(epoch FROM s.lease_expires) * 1000)::bigint, 'next_seq', s.next_seq,"
        " 'live', s.owner IS NOT NULL AND s.lease_expires > now(),"
        " 'pending', EXISTS (SELECT 1 FROM weir_inbox i WHERE i.session_id = s.session_id))"
        " ORDER BY s.updated DESC), '[]')::text FROM weir_sessions s",
        0, NULL, "listing sessions", json);
}

pgs_status pgs_send(pgs *db, const char *id, const char *input_id, const char *mode,
                    const char *message, bool *duplicate) {
    if (!db || !id || !mode || !message || !duplicate)
        return db ? fail(db, PGS_IO, "postgres: send: bad arguments") : PGS_NOMEM;
    *duplicate = false;
    const char *p[] = {id, input_id, mode, message};
    PGresult *res = exec(db,
                         "WITH s AS (INSERT INTO weir_sessions (session_id) VALUES ($1)"
                         " ON CONFLICT (session_id) DO NOTHING),"
                         " i AS (INSERT INTO weir_inbox (session_id, input_id, mode, message)"
                         " VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT (session_id, input_id)"
                         " DO NOTHING RETURNING id)"
                         " SELECT count(*), pg_notify('weir_inbox', $1) FROM i",
                         4, p);
    /* the inbox row's foreign key is checked at the end of the statement,
     * when the session row the first CTE inserted exists */
    if (!ok(res))
        return fail_res(db, res, "queueing the input");
    *duplicate = strcmp(PQgetvalue(res, 0, 0), "0") == 0;
    PQclear(res);
    if (!*duplicate || !input_id)
        return PGS_OK;
    /* the id is queued already: the same input is acknowledged, another
     * one under the same id is refused (nothing queued) */
    res = exec(db,
               "SELECT bool_and(mode = $3 AND message = $4::jsonb) FROM weir_inbox"
               " WHERE session_id = $1 AND input_id = $2",
               4, p);
    if (!ok(res))
        return fail_res(db, res, "reading the queued input");
    bool other = PQgetvalue(res, 0, 0)[0] == 'f';
    PQclear(res);
    return other ? fail(db, PGS_CONFLICT,
                        "session %s: input id '%s' is queued already with another message or "
                        "mode",
                        id, input_id)
                 : PGS_OK;
}

/* The text[] literal {"a","b"} of `n` strings (\ and " escaped), in a new
 * buffer (free() it), or NULL without memory. */
static char *text_array(const char *const *v, size_t n) {
    size_t len = 3;
    for (size_t i = 0; i < n; i++)
        len += 2 * strlen(v[i]) + 3;
    char *out = malloc(len), *q = out;
    if (!out)
        return NULL;
    *q++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i)
            *q++ = ',';
        *q++ = '"';
        for (const char *c = v[i]; *c; c++) {
            if (*c == '"' || *c == '\\')
                *q++ = '\\';
            *q++ = *c;
        }
        *q++ = '"';
    }
    *q++ = '}';
    *q = '\0';
    return out;
}

pgs_status pgs_claim(pgs *db, const char *owner, int64_t lease_ms, char **id, int64_t *epoch,
                     int64_t *next_seq, char **prev_owner) {
    return pgs_claim_except(db, owner, lease_ms, NULL, 0, id, epoch, next_seq, prev_owner);
}

pgs_status pgs_claim_except(pgs *db, const char *owner, int64_t lease_ms,
                            const char *const *skip, size_t nskip, char **id, int64_t *epoch,
                            int64_t *next_seq, char **prev_owner) {
    if (!db || !owner || lease_ms <= 0 || !id || !epoch || !next_seq || (nskip && !skip))
        return db ? fail(db, PGS_IO, "postgres: claim: bad arguments") : PGS_NOMEM;
    *id = NULL;
    if (prev_owner)
        *prev_owner = NULL;
    for (size_t i = 0; i < nskip; i++)
        if (!skip[i])
            return fail(db, PGS_IO, "postgres: claim: NULL session id to skip");
    char ms[32];
    fmt_i64(ms, sizeof ms, lease_ms);
    char *except = text_array(skip, nskip);
    if (!except)
        return fail(db, PGS_NOMEM, "postgres: out of memory");
    const char *p[] = {owner, ms, except};
    /* a session needs a writer when input is queued and no lease holds it,
     * or when its writer let the lease expire (died, or is frozen: the
     * takeover bumps the epoch and fences it); the sessions the caller
     * skips (in backoff) are not even locked */
    PGresult *res = exec(
        db,
        "WITH c AS (SELECT s.session_id, s.owner AS prev FROM weir_sessions s"
        "   WHERE ((s.owner IS NULL"
        "           AND EXISTS (SELECT 1 FROM weir_inbox i WHERE i.session_id = s.session_id))"
        "          OR (s.owner IS NOT NULL AND s.lease_expires < now()))"
        "     AND s.session_id <> ALL ($3::text[])"
        "   ORDER BY s.updated LIMIT 1 FOR UPDATE SKIP LOCKED)"
        " UPDATE weir_sessions w SET owner = $1, epoch = w.epoch + 1,"
        " lease_expires = now() + $2::bigint * interval '1 millisecond', updated = now()"
        " FROM c WHERE w.session_id = c.session_id"
        " RETURNING w.session_id, w.epoch, w.next_seq, c.prev",
        3, p);
    free(except);
    if (!ok(res))
        return fail_res(db, res, "claiming a session");
    if (PQntuples(res) != 1) {
        PQclear(res);
        return fail(db, PGS_NOT_FOUND, "no session needs a writer");
    }
    *id = strdup(PQgetvalue(res, 0, 0));
    *epoch = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    *next_seq = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    bool nomem = !*id;
    if (prev_owner && !PQgetisnull(res, 0, 3))
        nomem = nomem || !(*prev_owner = strdup(PQgetvalue(res, 0, 3)));
    PQclear(res);
    if (nomem) {
        free(*id);
        *id = NULL;
        if (prev_owner) {
            free(*prev_owner);
            *prev_owner = NULL;
        }
        return fail(db, PGS_NOMEM, "postgres: out of memory");
    }
    return PGS_OK;
}

pgs_status pgs_consume(pgs *db, const char *id, int64_t epoch, const char *ids) {
    if (!db || !id || !ids)
        return db ? fail(db, PGS_IO, "postgres: consume: bad arguments") : PGS_NOMEM;
    char e[32];
    fmt_i64(e, sizeof e, epoch);
    const char *p[] = {id, e, ids};
    /* the session row is locked for the delete, so a takeover waits for it
     * (or is seen, and nothing is deleted) */
    PGresult *res = exec(db,
                         "WITH s AS (SELECT session_id FROM weir_sessions WHERE session_id = $1"
                         " AND epoch = $2::bigint AND owner IS NOT NULL FOR UPDATE),"
                         " d AS (DELETE FROM weir_inbox i USING s WHERE i.session_id = s.session_id"
                         " AND i.id = ANY($3::bigint[]) RETURNING 1)"
                         " SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM d)",
                         3, p);
    if (!ok(res))
        return fail_res(db, res, "consuming the inbox");
    bool held = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
    PQclear(res);
    return held ? PGS_OK
                : fail(db, PGS_LEASE_LOST,
                       "session %s: the lease of epoch %s is lost: its queued input stays queued",
                       id, e);
}

bool pgs_connected(const pgs *db) { return db && db->conn && PQstatus(db->conn) == CONNECTION_OK; }

pgs_status pgs_inbox(pgs *db, const char *id, char **json) {
    if (!db || !id || !json)
        return db ? fail(db, PGS_IO, "postgres: inbox: bad arguments") : PGS_NOMEM;
    *json = NULL;
    const char *p[] = {id};
    return query_text(db,
                      "SELECT coalesce(json_agg(json_build_object('inbox_id', id, 'input_id',"
                      " input_id, 'mode', mode, 'message', message) ORDER BY id), '[]')::text"
                      " FROM weir_inbox WHERE session_id = $1",
                      1, p, "reading the inbox", json);
}

pgs_status pgs_wait(pgs *db, int timeout_ms, bool *woken) {
    if (!db || !woken || timeout_ms < 0)
        return db ? fail(db, PGS_IO, "postgres: wait: bad arguments") : PGS_NOMEM;
    *woken = false;
    PGresult *res = PQexec(db->conn, "LISTEN weir_inbox");
    if (!ok(res))
        return fail_res(db, res, "LISTEN weir_inbox");
    PQclear(res);
    int fd = PQsocket(db->conn);
    for (;;) {
        if (!PQconsumeInput(db->conn))
            return fail(db, PGS_IO, "postgres: waiting for input: %.*s",
                        (int)strcspn(PQerrorMessage(db->conn), "\n"), PQerrorMessage(db->conn));
        PGnotify *n = PQnotifies(db->conn);
        if (n) {
            PQfreemem(n);
            while ((n = PQnotifies(db->conn)))
                PQfreemem(n);
            *woken = true;
            return PGS_OK;
        }
        if (timeout_ms == 0 || fd < 0)
            return PGS_OK;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, timeout_ms);
        if (r <= 0)
            return PGS_OK; /* the time passed (or EINTR: the caller loops) */
        timeout_ms = 0;    /* one wake-up: consume what came, then return */
    }
}

pgs_status pgs_probe(pgs *db, const char *id, bool *live, char *owner, size_t size) {
    if (!db || !id || !live || !owner || !size)
        return db ? fail(db, PGS_IO, "postgres: probe: bad arguments") : PGS_NOMEM;
    *live = false;
    owner[0] = '\0';
    const char *p[] = {id};
    PGresult *res = exec(db,
                         "SELECT owner IS NOT NULL AND lease_expires > now(), coalesce(owner, '')"
                         " FROM weir_sessions WHERE session_id = $1",
                         1, p);
    if (!ok(res))
        return fail_res(db, res, "reading the session");
    if (PQntuples(res) != 1) {
        PQclear(res);
        return fail(db, PGS_NOT_FOUND, "session %s does not exist", id);
    }
    *live = PQgetvalue(res, 0, 0)[0] == 't';
    snprintf(owner, size, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    return PGS_OK;
}
