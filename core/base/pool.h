/*
 * core/base/pool.h - a small worker pool for tool bodies and background jobs.
 *
 * Threads are created lazily: a submit that finds no idle worker starts one,
 * up to the pool's maximum; beyond that, tasks wait in a FIFO queue.
 * Destroy runs every queued task, then joins every thread.  All functions are
 * thread-safe except destroy, which must not race with submit.
 * Owner: core/base/pool.c.
 */
#ifndef WEIR_CORE_POOL_H
#define WEIR_CORE_POOL_H

#include "common.h"

typedef struct weir__pool weir__pool;

/* A task body; runs on a worker thread with the `arg` given to submit. */
typedef void (*weir__pool_fn)(void *arg);

/* New pool of at most `max_threads` (>= 1) threads; none is started yet. */
int weir__pool_create(size_t max_threads, weir__pool **out, weir_error *err);

/*
 * Queue `fn(arg)` (arg borrowed; it must stay valid until fn returns).
 * Fails with E_NOMEM, or E_INTERNAL when no thread could be started at all;
 * a failed submit never runs the task.
 */
int weir__pool_submit(weir__pool *p, weir__pool_fn fn, void *arg, weir_error *err);

/* Number of threads started so far (for tests). */
size_t weir__pool_threads(weir__pool *p);

/* Run what is queued, join every thread, free.  NULL is a no-op. */
void weir__pool_destroy(weir__pool *p);

#endif
