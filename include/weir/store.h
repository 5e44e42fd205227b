/*
 * weir/store.h - the session store interface (docs/stores.md).
 *
 * A session's whole state is its log (docs/session-log.md).  A store keeps
 * those logs: the JSONL file store (the default, core/store_file.c), the
 * memory store (core/store_memory.c) and any store a plugin row registers
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
} weir_store;

#ifdef __cplusplus
}
#endif
#endif /* WEIR_STORE_H */
