/*
 * weir/store.h - the session store interface (docs/stores.md).
 *
 * A session's whole state is its log (docs/session-log.md).  A store keeps
 * those logs: the JSONL file store (the default, core/log/store_file.c), the
 * memory store (core/log/store_memory.c) and any store a plugin row registers
 * with weir_store_register() (weir/plugin.h, ABI 1.5) that a deployment
 * names in "session": {"store": "<row id>"}.
 *
 * The store only keeps bytes: serialized events, one JSON object per line,
 * each line ending in '\n', exactly as the file store writes them.  The core
 * builds, validates and serializes events, and checks everything it reads
 * with its one reader (weir__log_check_buffer), whatever the store: a store
 * never has to understand an event, and a store's hostile data is refused
 * as a hostile file is.
 *
 * One writer per session, always.  `open` without WEIR_STORE_READONLY takes
 * the session's lock (the file store: an exclusive OFD lock held until
 * `close`) or lease (a shared store: a lease with a fencing epoch, renewed
 * by the store).  A second writer is refused with WEIR_E_BUSY.  Every
 * `append` carries the epoch `open` returned; a store whose lease was taken
 * over refuses it with WEIR_E_LEASE_LOST and the writer stops for good.
 *
 * Ownership: strings passed in are borrowed for the call (copy what you
 * keep).  Buffers a store returns are its own until `buffer_free`.
 * Thread-safety: the core calls a handle's operations from one thread at a
 * time (the log's lock); different handles may be used concurrently, and
 * `open`, `list` and `probe` may run on any thread.
 * Since: 1.5 (store_register).
 */
#ifndef WEIR_STORE_H
#define WEIR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "weir/errors.h"
#include "weir/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `open` flags. */
#define WEIR_STORE_READONLY 0x1u /* no lock, no create, no repair; appends are refused */

/* `append` flags. */
#define WEIR_STORE_DURABLE 0x1u /* durable before return (fsync policy "always") */

/**
 * A session store: a versioned vtable (set struct_size to sizeof(weir_store);
 * members are only ever added at the end, and the host reads no member past
 * a shorter struct_size).  `self` is the pointer given to
 * weir_store_register.  `handle` is an open session (from `open`).
 * Since: 1.5
 */
typedef struct weir_store {
    uint32_t struct_size; /* sizeof(weir_store) */
    /**
     * Open session `id` (a session id, [A-Za-z0-9][A-Za-z0-9._-]{0,127}, or
     * the base name of an explicit file) whose deployment locator is `path`
     * (the file store's log file: "<session.dir>/<id>.jsonl" or the file
     * given; a store that keeps no files may ignore it).  Without
     * WEIR_STORE_READONLY: create the session when missing and take its
     * lock or lease; WEIR_E_BUSY ("session ID is open for writing by ...")
     * when another writer holds it.  With it: WEIR_E_NOT_FOUND when there is
     * no such session.  *handle: the open session (the store's); *epoch: the
     * fencing epoch the writer passes to every append (0 for stores without
     * leases).  WEIR_E_IO / WEIR_E_NOMEM with `err` naming the session.
     */
    int (*open)(void *self, const char *id, const char *path, uint32_t flags, void **handle,
                uint64_t *epoch, weir_error *err);
    /**
     * The session's stored lines from seq `from_seq` on (0: all of them),
     * as one buffer of JSONL: *buf (the store's, NUL terminated, release it
     * with buffer_free) of *len bytes.  The last line may be torn (no
     * newline, what a crash mid-write leaves); the core's reader decides.
     */
    int (*read)(void *self, void *handle, uint64_t from_seq, char **buf, size_t *len,
                weir_error *err);
    /** Release a buffer from `read`.  NULL does nothing. */
    void (*buffer_free)(void *self, char *buf);
    /**
     * Append `count` serialized events (`lines`, `len` bytes, each line
     * ending in '\n'; the first is seq `first_seq`) in one step: all are
     * stored or none (a failed append leaves the session as it was).  Only
     * for the writer whose lease has epoch `epoch`: a fenced writer gets
     * WEIR_E_LEASE_LOST and nothing is stored.  `flags`:
     * WEIR_STORE_DURABLE.  WEIR_E_IO when the write failed.
     */
    int (*append)(void *self, void *handle, uint64_t epoch, uint64_t first_seq, size_t count,
                  const char *lines, size_t len, uint32_t flags, weir_error *err);
    /** The durability point: every append so far survives a crash (fsync, commit). */
    int (*sync)(void *self, void *handle, weir_error *err);
    /**
     * Drop a torn tail: keep the first `keep` bytes of what `read` from
     * seq 0 returned (the core calls it at open, when the reader found the
     * last line torn).  May be NULL: the store never tears a line.
     */
    int (*truncate)(void *self, void *handle, size_t keep, weir_error *err);
    /** Release the lock or lease and close the handle.  NULL does nothing. */
    void (*close)(void *self, void *handle);
    /**
     * The sessions of `where` (the file store: the directory of session.dir;
     * others may ignore it): *sessions is a new array of objects {"id",
     * "path"?, "live": bool (a writer holds it now), "pid"? (its pid, when
     * known)}, in no particular order.  May be NULL (the store cannot list).
     */
    int (*list)(void *self, const char *where, json_t **sessions, weir_error *err);
    /**
     * Whether a writer holds session `id` (`path` as for open) right now,
     * taking nothing: *live, and *pid (may be NULL) its pid when known (0
     * otherwise).  WEIR_E_NOT_FOUND for no such session.  May be NULL.
     */
    int (*probe)(void *self, const char *id, const char *path, bool *live, long *pid,
                 weir_error *err);

    /* ---- the inbox, claims and lease of a shared store (issue #16; docs/fleet.md).
     * A store without them leaves them NULL (the file and memory stores:
     * `weir send` logs an inbox splice as the session's writer there). ---- */

    /**
     * Queue input for session `id` (created when missing) without taking
     * its lease: it works while a writer holds the session.  `input_id`
     * (never NULL: the core makes one up when the sender gave none), `mode`
     * ("followup", "steer" or "inject") and `message` (the JSON text of a
     * {role, content, source?} object) are borrowed.  Durable before
     * WEIR_OK.  The same input_id queued again with the same mode and
     * message: WEIR_OK with *duplicate true, nothing queued twice; with
     * another message: WEIR_E_DUPLICATE.  Wakes the store's waiters.
     */
    int (*send)(void *self, const char *id, const char *input_id, const char *mode,
                const char *message, bool *duplicate, weir_error *err);
    /**
     * Claim one session that needs a writer: input is queued and no lease
     * holds it, or its writer's lease expired (a dead or frozen writer).
     * Concurrent claimers, in this process or others, never get the same
     * session.  The claim leases it for this store's owner, so that the
     * `open` that follows (same owner) gets it at once.  *id: the session
     * (the store's; buffer_free it); *prev_owner: the owner whose expired
     * lease was taken over (the store's, buffer_free it), NULL when the
     * session was free.  WEIR_E_NOT_FOUND when no session needs a writer.
     */
    int (*claim)(void *self, char **id, char **prev_owner, weir_error *err);
    /**
     * The queued inputs of open session `handle` (a writer), oldest first:
     * *inputs a new array of {"inbox_id": int > 0, "input_id", "mode",
     * "message": object}.  They stay queued until `consume`.
     */
    int (*inbox)(void *self, void *handle, json_t **inputs, weir_error *err);
    /**
     * Drop exactly the queued inputs of `handle` whose inbox_id is in
     * `inbox_ids` (borrowed, a non-empty array of integers): the core logged
     * them (their splices are durable) or refused them for good.  Never by
     * range: an input queued with a lower id may commit after a higher one
     * was read.  Only for the writer whose lease has epoch `epoch` (else
     * WEIR_E_LEASE_LOST, nothing dropped).
     * `inbox` and `consume` may run on another thread than the session's
     * appends (weir worker delivers input while a turn runs), never two of
     * them at once for one handle: a store makes them safe alongside
     * `append` on the same handle.
     */
    int (*consume)(void *self, void *handle, uint64_t epoch, const json_t *inbox_ids,
                   weir_error *err);
    /**
     * Wait up to `timeout_ms` for input to be queued for any session (a
     * `send` from any process): *woken true when some was, false when the
     * time passed.  May wake spuriously; callers claim, then wait again.
     */
    int (*wait)(void *self, int timeout_ms, bool *woken, weir_error *err);
    /**
     * Whether writer `handle` knows its lease is lost (a heartbeat or an
     * append found it taken over), taking nothing: the core stops the
     * writer's running turn instead of waiting for its next append.  Any
     * thread.  May be NULL.
     */
    bool (*lease_lost)(void *self, void *handle);
    /**
     * `claim`, except that none of the `nskip` sessions of `skip` (borrowed
     * session ids) is claimed, locked or written: a worker passes the
     * sessions it holds back after failures (backoff), so that they cost
     * nothing while the others go on being claimed.  `skip` may be NULL
     * when `nskip` is 0.  May be NULL: then the host only claims through
     * `claim` while nothing is skipped (weir_host_store_claim_except).
     */
    int (*claim_except)(void *self, const char *const *skip, size_t nskip, char **id,
                        char **prev_owner, weir_error *err);

    /* ---- reading part of a session (ABI 1.10; docs/session-log.md, "Resume
     * from a checkpoint").  A store without them leaves them NULL: the core
     * then reads the whole session at open, and old events from memory.
     * Either may be given alone. ---- */

    /**
     * The seq of the session's last stored line whose event type is `type`
     * (borrowed; the core asks for "log/checkpoint"): *seq.  WEIR_E_NOT_FOUND
     * when no line has that type.  A store may answer from the lines' text
     * (the file store reads back from the end for `"type":"TYPE"`): the core
     * checks every line it then reads, and reads the whole session when the
     * answer does not hold.
     * Since: 1.10
     */
    int (*find_last)(void *self, void *handle, const char *type, uint64_t *seq, weir_error *err);
    /**
     * The stored lines whose seq lies in one of the `n` ranges `ranges`
     * (2*n integers: first, last, first, last, ...; ascending, disjoint,
     * first <= last; a last of UINT64_MAX means to the end), in seq order,
     * as one JSONL buffer like `read`'s (buffer_free).  A seq past the end
     * is simply absent.  The last line may be torn when the last range runs
     * to the end.  Asked at open (the surface, the kept events and the tail
     * after the last checkpoint, in one call) and for an old event a reader
     * wants back (one seq): a store answers the latter without reading the
     * whole session (the file store keeps a sparse index of line offsets).
     * Since: 1.10
     */
    int (*read_ranges)(void *self, void *handle, const uint64_t *ranges, size_t n, char **buf,
                       size_t *len, weir_error *err);
} weir_store;

/* ------------------------------------------------------------------------ */
/* Host calls on the deployment's session store (libweir; `weir send`,       */
/* `weir worker`).  Since: 0.1                                                */
/* ------------------------------------------------------------------------ */

typedef struct weir_host weir_host;   /* weir/host.h */
typedef struct weir_agent weir_agent; /* weir/host.h */

/**
 * Queue TEXT-style input `message` (borrowed: {role:"user", content,
 * source?}) for session `id` in the store the host's session.store names,
 * through its `send`: no lease is taken, a running writer is not disturbed.
 * `mode` is "followup", "steer" or "inject"; `input_id` may be NULL (a new
 * id is made up).  *duplicate: the same input_id and message were queued
 * already (acknowledged, nothing queued twice).  WEIR_E_UNSUPPORTED when
 * the store has no inbox (the file store: open the session as its writer
 * and weir_agent_send); WEIR_E_DUPLICATE for the id with another message.
 * Thread-safe.
 */
WEIR_API int weir_host_store_send(weir_host *host, const char *id, const char *input_id,
                                  const char *mode, const json_t *message, bool *duplicate,
                                  weir_error *err) WEIR_WUR;
/**
 * Claim a session that needs a writer (the store's `claim`): *id and
 * *prev_owner are malloc'd (free() them; *prev_owner NULL when the session
 * was free, else the owner whose expired lease was taken over).
 * WEIR_E_NOT_FOUND when none does; WEIR_E_UNSUPPORTED when the store
 * cannot claim.  Thread-safe.
 */
WEIR_API int weir_host_store_claim(weir_host *host, char **id, char **prev_owner,
                                   weir_error *err) WEIR_WUR;
/**
 * weir_host_store_claim that claims none of the `nskip` sessions of `skip`
 * (borrowed ids; NULL when nskip is 0), through the store's claim_except:
 * a worker's sessions in backoff are neither leased nor locked.  A store
 * without claim_except is claimed through `claim` when nskip is 0; with
 * sessions to skip it claims nothing (WEIR_E_NOT_FOUND, as when none
 * needs a writer), since its `claim` could only hand a skipped one back.
 * Ownership and errors as weir_host_store_claim.  Thread-safe.
 */
WEIR_API int weir_host_store_claim_except(weir_host *host, const char *const *skip, size_t nskip,
                                          char **id, char **prev_owner, weir_error *err) WEIR_WUR;
/**
 * Wait up to `timeout_ms` for input to be queued in the host's store
 * (*woken); WEIR_E_UNSUPPORTED when the store cannot wait.  Thread-safe.
 */
WEIR_API int weir_host_store_wait(weir_host *host, int timeout_ms, bool *woken,
                                  weir_error *err) WEIR_WUR;
/**
 * Deliver the store's queued inputs of the agent's session into the agent
 * (weir_agent_send with each input's id and mode, so an input already in
 * the log is acknowledged, never queued twice), then drop them from the
 * store once their splices are durable.  A crash in between leaves them
 * queued; the next writer delivers them again and the agent acknowledges
 * them (docs/fleet.md, "The inbox").  *taken (may be NULL): the inputs
 * delivered (new or acknowledged).  WEIR_OK with 0 for a store without an inbox.  Fails
 * with WEIR_E_LEASE_LOST when the writer was fenced.  Call it from the
 * thread that drives the agent, between runs.
 */
WEIR_API int weir_agent_take_store_inbox(weir_agent *agent, size_t *taken,
                                         weir_error *err) WEIR_WUR;
/**
 * The turn crash repair closed without an answer: when the agent's last
 * ended turn ended {kind:"interrupted"} and it had claimed input (a
 * user/message), its number; else 0 (also when memory ran out reading the
 * log back: never an older turn).  Thread-safe.
 */
WEIR_API int weir_agent_interrupted_turn(weir_agent *agent);
/**
 * The fencing epoch of the agent's lease on its session (0 for stores
 * without leases, and for a NULL agent).  Thread-safe.
 */
WEIR_API uint64_t weir_agent_lease_epoch(weir_agent *agent);
/**
 * Whether the agent's writer lease is known lost (the store's lease_lost,
 * or an append that was refused): the agent appends nothing more; cancel
 * its running turn (weir worker does).  False for stores without leases.
 * Thread-safe.
 */
WEIR_API bool weir_agent_lease_lost(weir_agent *agent);

#ifdef __cplusplus
}
#endif
#endif /* WEIR_STORE_H */
