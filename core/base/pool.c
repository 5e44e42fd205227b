/*
 * core/base/pool.c - lazily grown worker pool (see pool.h).
 */
#include "pool.h"

#include <time.h>

#include <pthread.h>
#include <string.h>

typedef struct task {
    weir__pool_fn fn;
    void *arg;
    struct task *next;
} task;

typedef struct worker {
    pthread_t thread;
    struct worker *next;
} worker;

struct weir__pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    task *head, *tail;
    worker *workers;
    size_t nthreads, max_threads, idle, queued;
    bool stopping;
};

static void *worker_main(void *arg) {
    weir__pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stopping) { /* looks again every second (weir__pool_submit) */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        }
        task *t = p->head;
        if (!t)
            break; /* stopping and drained */
        p->head = t->next;
        if (!p->head)
            p->tail = NULL;
        p->queued--;
        p->idle--;
        pthread_mutex_unlock(&p->mu);
        t->fn(t->arg);
        weir__free(t);
        pthread_mutex_lock(&p->mu);
        p->idle++;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int weir__pool_create(size_t max_threads, weir__pool **out, weir_error *err) {
    if (!out || max_threads == 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "pool: invalid arguments");
    *out = NULL;
    weir__pool *p = weir__calloc(1, sizeof *p);
    if (!p)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "pool: out of memory");
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        weir__free(p);
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL, "pool: mutex init failed");
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        weir__free(p);
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL, "pool: condvar init failed");
    }
    p->max_threads = max_threads;
    *out = p;
    return WEIR_OK;
}

/* Start one more worker; called with the lock held.  false on failure. */
static bool spawn(weir__pool *p) {
    worker *w = weir__calloc(1, sizeof *w);
    if (!w)
        return false;
    if (pthread_create(&w->thread, NULL, worker_main, p) != 0) {
        weir__free(w);
        return false;
    }
    w->next = p->workers;
    p->workers = w;
    p->nthreads++;
    p->idle++;
    return true;
}

int weir__pool_submit(weir__pool *p, weir__pool_fn fn, void *arg, weir_error *err) {
    if (!p || !fn)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "pool: invalid arguments");
    task *t = weir__calloc(1, sizeof *t);
    if (!t)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "pool: out of memory");
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&p->mu);
    if (p->queued + 1 > p->idle && p->nthreads < p->max_threads && !spawn(p) &&
        p->nthreads == 0) {
        pthread_mutex_unlock(&p->mu);
        weir__free(t);
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL,
                         "pool: could not start a worker thread");
    }
    if (p->tail)
        p->tail->next = t;
    else
        p->head = t;
    p->tail = t;
    p->queued++;
    /* every idle worker looks, and an idle one looks again every second
     * anyway: a signal can be lost to glibc's condvar (sourceware bug 25847,
     * fixed in 2.38: a woken waiter's "stolen" signal left another asleep),
     * and a task whose body waits for its sibling then waited for ever
     * (test_tool_scheduler's cap test, seen in CI) */
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return WEIR_OK;
}

size_t weir__pool_threads(weir__pool *p) {
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    size_t n = p->nthreads;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void weir__pool_destroy(weir__pool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    worker *w = p->workers;
    p->workers = NULL;
    pthread_mutex_unlock(&p->mu);
    while (w) {
        worker *next = w->next;
        pthread_join(w->thread, NULL);
        weir__free(w);
        w = next;
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    weir__free(p);
}
