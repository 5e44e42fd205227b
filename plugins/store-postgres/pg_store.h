/*
 * plugins/store-postgres/pg_store.h - session logs, leases and the inbox in
 * PostgreSQL (docs/fleet.md), over libpq.  No host calls: the plugin's
 * store vtable wraps these, and test_store_postgres drives them against a
 * real server.
 *
 * Tables (schema version 1, created and migrated by pgs_open under an
 * advisory lock, recorded in weir_schema):
 *   weir_sessions(session_id PK, owner, epoch, lease_expires, next_seq,
 *                 created, updated)
 *   weir_events(session_id, seq, event jsonb, PRIMARY KEY (session_id, seq))
 *   weir_inbox(id bigserial PK, session_id, input_id, mode, message jsonb,
 *              queued)
 * Fencing: a writer holds a lease with an epoch; taking a lease over (its
 * owner's expiry passed) bumps the epoch, and every append is one statement
 * that only inserts while the session row still has the writer's epoch and
 * the expected next seq, so a frozen writer's late appends are refused
 * (PGS_LEASE_LOST) and a gap or a duplicate seq is impossible.
 *
 * A pgs connection is not thread-safe: one per thread (or a lock around it).
 * Owner: plugins/store-postgres/pg_store.c.
 */
#ifndef WEIR_PG_STORE_H
#define WEIR_PG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pgs pgs;

/* The outcomes of the calls below; the message is in pgs_error(). */
typedef enum pgs_status {
    PGS_OK = 0,
    PGS_BUSY,       /* the lease is held by another, live owner */
    PGS_LEASE_LOST, /* the writer's epoch is no longer the session's */
    PGS_CONFLICT,   /* the append's first seq is not the session's next seq */
    PGS_NOT_FOUND,  /* no such session */
    PGS_CORRUPT,    /* a stored row breaks the log's rules (hostile data) */
    PGS_IO,         /* the server refused or the connection failed */
    PGS_NOMEM
} pgs_status;

/* The schema version this code creates and reads. */
#define PGS_SCHEMA_VERSION 1

/* Connect with `conninfo` (libpq syntax; borrowed) and create or migrate the
 * schema.  *out is the connection (pgs_close it), also on failure, when it
 * holds the error text; NULL only without memory. */
pgs_status pgs_open(const char *conninfo, pgs **out);
void pgs_close(pgs *db);
/* The last error's text (borrowed, valid until the next call). */
const char *pgs_error(const pgs *db);

/* Take the lease of session `id` for `owner` (both borrowed) for `lease_ms`:
 * created when missing; granted when free, expired or already `owner`'s,
 * with a new epoch (*epoch) and the session's next seq (*next_seq).
 * PGS_BUSY names the holder and its expiry in pgs_error(). */
pgs_status pgs_lease(pgs *db, const char *id, const char *owner, int64_t lease_ms, int64_t *epoch,
                     int64_t *next_seq);
/* Extend the lease of epoch `epoch` by `lease_ms` from now (the heartbeat);
 * PGS_LEASE_LOST when another writer took it over. */
pgs_status pgs_renew(pgs *db, const char *id, int64_t epoch, int64_t lease_ms);
/* Give the lease of `epoch` back (no-op when it was taken over).  Input
 * queued meanwhile is found by the next claim (workers poll); no NOTIFY,
 * so that a session that fails at once is not claimed again at once. */
pgs_status pgs_release(pgs *db, const char *id, int64_t epoch);

/* Append `n` event lines (JSON objects, borrowed) as seqs first_seq...
 * first_seq+n-1, in one transaction, only while `epoch` holds the lease and
 * first_seq is the next seq: PGS_LEASE_LOST or PGS_CONFLICT change nothing. */
pgs_status pgs_append(pgs *db, const char *id, int64_t epoch, int64_t first_seq,
                      const char *const *lines, size_t n);

/* The events of `id` from `from_seq` as JSON Lines in a new buffer (*buf,
 * free() it; *len bytes, NUL terminated), in seq order.  PGS_CORRUPT when a
 * row's envelope seq is not its key's seq; the envelopes themselves are the
 * log reader's to check. */
pgs_status pgs_read(pgs *db, const char *id, int64_t from_seq, char **buf, size_t *len);

/* The seq of the last event of `id` whose envelope type is `type` (both
 * borrowed): *seq.  PGS_NOT_FOUND when there is none (or no such session).
 * One statement that reads the session's events back from its last over
 * the primary key: it costs the events after that one, as the file store's
 * read back from the end does (no index on the type: see pgs_find_last). */
pgs_status pgs_find_last(pgs *db, const char *id, const char *type, int64_t *seq);
/* Its statement ($1 the session, $2 the type; the tests EXPLAIN it). */
#define PGS_FIND_LAST_SQL                                                                          \
    "SELECT seq FROM weir_events WHERE session_id = $1 AND event->>'type' = $2"                   \
    " ORDER BY seq DESC LIMIT 1"
/* The events of `id` whose seq lies in one of the `n` ranges (2*n
 * integers, first, last, ...; ascending, disjoint, first <= last; a last
 * past INT64_MAX, UINT64_MAX, means to the end), in seq order, as
 * pgs_read's buffer (*buf, free() it; *len bytes, NUL terminated), from one
 * statement: an index range scan a range.  The same row check as pgs_read
 * (PGS_CORRUPT), on the rows read only. */
pgs_status pgs_read_ranges(pgs *db, const char *id, const uint64_t *ranges, size_t n, char **buf,
                           size_t *len);
/* Its statement ($1 the session, $2 and $3 the firsts and lasts as bigint[];
 * the tests EXPLAIN it). */
#define PGS_READ_RANGES_SQL                                                                        \
    "SELECT e.seq, coalesce((e.event->'seq')::text = e.seq::text, false), e.event::text"          \
    " FROM unnest($2::bigint[], $3::bigint[]) AS r(lo, hi)"                                       \
    " JOIN weir_events e ON e.session_id = $1 AND e.seq BETWEEN r.lo AND r.hi ORDER BY e.seq"

/* Queue one input for session `id` (created when missing): `mode` is
 * followup|steer|inject, `message` a JSON message object, `input_id` may be
 * NULL (all borrowed).  Durable once this returns PGS_OK; the same input_id
 * with the same mode and message again is accepted and queued once
 * (*duplicate true); with another one it is PGS_CONFLICT.  NOTIFY
 * weir_inbox with the session id wakes listening workers. */
pgs_status pgs_send(pgs *db, const char *id, const char *input_id, const char *mode,
                    const char *message, bool *duplicate);
/* Claim one session that needs a writer, for `owner`: queued input and no
 * lease, or an expired lease (its writer died or froze; the claim is the
 * takeover).  FOR UPDATE SKIP LOCKED: concurrent claimers get different
 * sessions.  *id (free() it), *epoch, *next_seq; *prev_owner (may be NULL;
 * free() it) the owner whose expired lease was taken over, NULL when the
 * session was free.  PGS_NOT_FOUND when none. */
pgs_status pgs_claim(pgs *db, const char *owner, int64_t lease_ms, char **id, int64_t *epoch,
                     int64_t *next_seq, char **prev_owner);
/* pgs_claim that never takes (nor locks) the `nskip` sessions of `skip`
 * (borrowed ids; a worker's sessions in backoff). */
pgs_status pgs_claim_except(pgs *db, const char *owner, int64_t lease_ms,
                            const char *const *skip, size_t nskip, char **id, int64_t *epoch,
                            int64_t *next_seq, char **prev_owner);
/* Remove exactly the queued inputs of `id` whose inbox ids are in `ids`, a
 * PostgreSQL array literal of bigints ("{3,5}"; the writer logged them),
 * only while `epoch` holds the lease: PGS_LEASE_LOST deletes nothing.
 * Never a range: an id handed out earlier may commit after a later one. */
pgs_status pgs_consume(pgs *db, const char *id, int64_t epoch, const char *ids);
/* Whether the connection is up (false after the server went away: close it
 * and pgs_open again). */
bool pgs_connected(const pgs *db);
/* The queued inputs of `id`, oldest first, as a JSON array text (*json,
 * free() it): [{"inbox_id","input_id","mode","message"}...].  They stay
 * queued until an append consumes them (pgs_append_consume). */
pgs_status pgs_inbox(pgs *db, const char *id, char **json);
/* pgs_append that also removes the inputs whose inbox ids are in `ids` (an
 * array literal, "{3,5}"; NULL: none) in the same statement, so a queued
 * input is spliced into the log exactly once. */
pgs_status pgs_append_consume(pgs *db, const char *id, int64_t epoch, int64_t first_seq,
                              const char *const *lines, size_t n, const char *ids);
/* LISTEN weir_inbox on this connection, then wait up to `timeout_ms` for a
 * notification: PGS_OK when one came (*woken true) or the time passed. */
pgs_status pgs_wait(pgs *db, int timeout_ms, bool *woken);

/* The sessions, newest first, as a JSON array text in a new buffer (*json,
 * free() it): [{"session_id","owner","epoch","lease_expires_ms","next_seq",
 * "live" (a lease is held and not expired),"pending"}...]. */
pgs_status pgs_list(pgs *db, char **json);
/* Whether session `id` exists (PGS_NOT_FOUND if not) and a live lease holds
 * it (*live); the holder's name in `owner` (`size` bytes, "" when free). */
pgs_status pgs_probe(pgs *db, const char *id, bool *live, char *owner, size_t size);

#endif
