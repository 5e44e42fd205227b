/*
 * core/base/cancel.h - cancellation signals (struct weir_signal).
 *
 * A signal is an atomic flag plus a condition variable; everything that
 * waits (backoff sleeps, HTTP transfers via their progress callback, tool
 * pool waits) wakes on it.  The first cause wins.  Thread-safe.
 */
#ifndef WEIR_CORE_CANCEL_H
#define WEIR_CORE_CANCEL_H

#include <pthread.h>
#include <stdatomic.h>

#include "common.h"
#include "weir/plugin.h" /* weir_signal */

struct weir_signal {
    atomic_bool cancelled;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char cause[64]; /* "user", "parent", "hook:<reason>", "disposed" */
};

int weir__signal_init(weir_signal *s);
void weir__signal_destroy(weir_signal *s);
/* Fire with `cause` (copied).  Returns true if this call fired it (first wins). */
bool weir__signal_cancel(weir_signal *s, const char *cause);
/* Reset to not-cancelled (only when no one waits on it). */
void weir__signal_reset(weir_signal *s);
/* Borrowed cause string ("" while not cancelled). */
const char *weir__signal_cause(const weir_signal *s);
/* Public-table implementations. NULL signal: never cancelled; sleep just sleeps. */
bool weir__signal_cancelled(const weir_signal *s);
int weir__signal_sleep(weir_signal *s, uint64_t ms);

#endif
