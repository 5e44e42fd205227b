/*
 * core/base/cancel.c - cancellation signals (core/base/cancel.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cancel.h"

int weir__signal_init(weir_signal *s) {
    if (!s)
        return WEIR_E_INVAL;
    memset(s->cause, 0, sizeof s->cause);
    atomic_init(&s->cancelled, false);
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        return WEIR_E_NOMEM;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&s->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_destroy(&s->mu);
        return WEIR_E_NOMEM;
    }
    return WEIR_OK;
}

void weir__signal_destroy(weir_signal *s) {
    if (!s)
        return;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

bool weir__signal_cancel(weir_signal *s, const char *cause) {
    if (!s)
        return false;
    bool fired = false;
    pthread_mutex_lock(&s->mu);
    if (!atomic_load(&s->cancelled)) {
        snprintf(s->cause, sizeof s->cause, "%s", cause && *cause ? cause : "user");
        atomic_store(&s->cancelled, true);
        fired = true;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return fired;
}

void weir__signal_reset(weir_signal *s) {
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->cancelled, false);
    s->cause[0] = '\0';
    pthread_mutex_unlock(&s->mu);
}

const char *weir__signal_cause(const weir_signal *s) {
    return s && atomic_load(&s->cancelled) ? s->cause : "";
}

bool weir__signal_cancelled(const weir_signal *s) {
    return s && atomic_load(&s->cancelled);
}

int weir__signal_sleep(weir_signal *s, uint64_t ms) {
    if (weir__clock_is_fake()) { /* a test's virtual time: the wait passes at once */
        if (weir__signal_cancelled(s))
            return WEIR_E_CANCELLED;
        weir__clock_advance(ms);
        return WEIR_OK;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)(ms / 1000);
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    if (!s) {
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
        }
        return WEIR_OK;
    }
    int rc = WEIR_OK;
    pthread_mutex_lock(&s->mu);
    while (!atomic_load(&s->cancelled)) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &deadline) == ETIMEDOUT)
            break;
    }
    if (atomic_load(&s->cancelled))
        rc = WEIR_E_CANCELLED;
    pthread_mutex_unlock(&s->mu);
    return rc;
}
