/*
 * cli/worker.c - `weir worker [-c FILE]... [--concurrency N]
 * [--grace-ms MS] [--poll-ms MS] [--exit-when-idle]`: run the sessions of a
 * shared store (session.store naming store-postgres) that need a writer,
 * N at once (docs/fleet.md, "Workers").
 *
 * The main thread claims (weir_host_store_claim: FOR UPDATE SKIP LOCKED, a
 * lease for this process) while a slot is free, and waits for input
 * (weir_host_store_wait: LISTEN/NOTIFY, at most --poll-ms, so a lost
 * notification costs one poll) when nothing is claimable.  Each claimed
 * session runs on its own thread with its own agent: open (crash repair
 * closes a dead writer's open turn), one service continuation when the
 * repaired turn had claimed input, the store's queued input delivered
 * (weir_agent_take_store_inbox), run until idle, again while input keeps
 * coming, close (the lease is released).  While the agent runs, a helper
 * thread of the slot takes the input queued meanwhile every 250 ms and
 * hands it to the running agent (a steer reaches the turn at its next
 * step, a followup starts the next turn of the same claim).  A session
 * that fails is held back (backoff, 1 s doubling to 60 s): the claim skips
 * it, so the others go on being claimed.  A writer whose lease was taken
 * over (WEIR_E_LEASE_LOST) stops that session and appends nothing more; when
 * its heartbeat finds that out first, the main thread cancels the running
 * turn at once (weir_agent_lease_lost).
 *
 * Signals: SIGTERM and SIGINT are taken by one thread (sigwait; every other
 * thread blocks them).  The first stops claiming and gives the running
 * turns --grace-ms to finish; then (or at a second signal) they are
 * cancelled; the agents close, releasing their leases, and the worker
 * exits 0.
 *
 * stderr gets one line per claim, takeover and finish:
 *   weir worker: claimed S (epoch E)
 *   weir worker: took over S from OWNER (repaired K)
 *   weir worker: finished S (N turns)
 * and "lost S ...", "failed S ..." when a session stops otherwise.
 * Owner: this file (the slots, their threads and agents).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char worker_help[] =
    "usage: weir worker [-c FILE]... [--concurrency N] [--grace-ms MS] [--poll-ms MS]\n"
    "                   [--exit-when-idle]\n"
    "\n"
    "Run the sessions of a shared store (session.store naming a store-postgres\n"
    "row) that need a writer: queued input (weir send) and no live lease, or a\n"
    "lease whose writer died or froze (it expired: the worker takes the session\n"
    "over, repairs it as weir resume does, and continues an interrupted request\n"
    "once with a service message).  Each session is claimed with a lease, run\n"
    "until idle and released.  Any number of workers, on any machines, may run\n"
    "against one database: a session is never run by two at once.\n"
    "\n"
    "  -c, --config FILE     deployment config (repeat to overlay)\n"
    "  -n, --concurrency N   sessions run at once, one agent and thread each\n"
    "                        (1-64, default 1)\n"
    "      --grace-ms MS     on SIGTERM or SIGINT, stop claiming and give the\n"
    "                        running turns MS to finish, then cancel them\n"
    "                        (default 30000; a second signal cancels at once)\n"
    "      --poll-ms MS      look for work at least every MS even when no\n"
    "                        notification came (50-60000, default 1000)\n"
    "      --exit-when-idle  exit 0 once nothing is claimable and nothing runs\n"
    "\n"
    "stderr: one line per claim (\"claimed S (epoch E)\"), takeover (\"took over S\n"
    "from OWNER (repaired K)\") and finish (\"finished S (N turns)\"); \"lost S\" when\n"
    "another writer took the session over (it stops appending at once), \"failed\n"
    "S\" when the session could not go on (it is left for the next claim).\n"
    "\n"
    "Input sent while a session's turn runs (weir send) is taken every 250 ms and\n"
    "delivered to the running agent: a steer at the turn's next step, a followup\n"
    "as the next turn of the same claim.\n"
    "\n"
    "Backoff: a session that fails (its log cannot be opened, a queued row is\n"
    "malformed, its run fails) is not claimed again by this worker for 1 s, then\n"
    "2 s, 4 s ... up to 60 s while it keeps failing; a session that finishes\n"
    "starts again at 1 s.  The claim skips the sessions held back, so the others\n"
    "go on being claimed; nothing queued is dropped.\n"
    "\n"
    "exit codes: 0 stopped by SIGTERM/SIGINT (or idle with --exit-when-idle),\n"
    "            1 a cancelled turn did not stop within 10 s (left to its lease),\n"
    "            2 usage, 3 configuration or plugin load error (also: the store\n"
    "            cannot claim sessions), 4 I/O error at start-up\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY;

#define MAX_CONCURRENCY 64

/* The continuation a takeover sends when the dead writer's turn had
 * claimed input (source {kind:"service", name:"resume"}). */
static const char resume_text[] =
    "The previous turn was interrupted before it finished: the process running this "
    "session stopped. Continue the user's request from where it stopped; do not ask "
    "the user to repeat it.";

struct worker;

/*
 * The steering helper of a slot: while the slot's thread runs the agent
 * (weir_agent_run_until_idle), it takes the store's queued input of the
 * session every STEER_POLL_MS and hands it to the running agent
 * (weir_agent_take_store_inbox: weir_agent_send with each row's mode and
 * input id, the rows dropped once their splices are durable, under the
 * lease), so a steer reaches the turn at its next step and a followup
 * starts the next turn of this claim.  It only exists while the agent
 * runs, so its takes never overlap the slot thread's own (between runs).
 */
#define STEER_POLL_MS 250

typedef struct steerer {
    weir_agent *agent;   /* borrowed from the slot's thread for the run */
    pthread_mutex_t mu;  /* stop */
    pthread_cond_t cv;
    bool stop;
    const atomic_int *signals; /* the worker's: stopping takes no more input */
    size_t taken;        /* inputs delivered during this run (read after join) */
} steerer;

typedef struct slot {
    struct worker *w;
    pthread_t th;
    bool used;           /* a thread runs (or ran) in this slot: join it */
    atomic_bool done;    /* the thread has finished */
    char *id, *prev;     /* owned: the claimed session, the owner taken over */
    weir_agent *agent;   /* borrowed from the thread while open (w->mu) */
    atomic_bool opening; /* durable events now are the open's repair */
    atomic_int repaired, turns;
    bool stopped_lost;   /* its lost lease was seen: the turn was cancelled (w->mu) */
} slot;

/*
 * Backoff: a session that failed (its open, its delivery or its run) is
 * not claimed by this worker again before retry_at; the delay doubles
 * from BACKOFF_MIN_MS to BACKOFF_MAX_MS at each failure in a row and is
 * forgotten when the session finishes.  The claim skips the held-back
 * sessions (weir_host_store_claim_except: the store's claim statement
 * never touches them), so the other sessions go on being claimed.
 */
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
#define MAX_SKIPS 1024 /* held back at once and skipped by a claim; more are claimed */

typedef struct backoff {
    char *id;         /* owned */
    int64_t retry_at; /* monotonic ms: not claimed before */
    int64_t delay;    /* the last delay, ms */
} backoff;

typedef struct worker {
    weir_host *host;
    int n;
    slot slots[MAX_CONCURRENCY];
    backoff *held;        /* owned array (w->mu) */
    size_t nheld, capheld;
    pthread_mutex_t mu; /* slots[].agent, running, held */
    pthread_cond_t cv;  /* a slot finished, or a signal came */
    int running;
    atomic_int signals;   /* SIGTERM/SIGINT received */
    atomic_bool cancelling; /* the grace is over: running turns are cancelled */
} worker;

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* cond_timedwait for at most `ms` (w->mu held). */
static void wait_ms(worker *w, int64_t ms) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&w->cv, &w->mu, &t);
}

/* Counts what the open repaired and the turns that ended (driver thread). */
static void on_event(const json_t *event, bool durable, void *ud) {
    slot *s = ud;
    if (!durable)
        return;
    if (atomic_load(&s->opening))
        atomic_fetch_add(&s->repaired, 1);
    else if (json_is_string(json_object_get(event, "type")) &&
             strcmp(json_string_value(json_object_get(event, "type")), "turn/end") == 0)
        atomic_fetch_add(&s->turns, 1);
}

/* The service continuation of interrupted turn `turn`: its id is the
 * turn's, so a second takeover before it ran acknowledges it, never
 * queues it twice. */
static int send_continuation(weir_agent *agent, int turn, weir_error *err) {
    char iid[64];
    snprintf(iid, sizeof iid, "resume-turn-%d", turn);
    json_t *msg = json_pack("{s:s, s:s, s:{s:s, s:s, s:i}}", "role", "user", "content",
                            resume_text, "source", "kind", "service", "name", "resume",
                            "turn", turn);
    int rc = msg ? weir_agent_send(agent, msg, WEIR_SEND_FOLLOWUP, iid, err) : WEIR_E_NOMEM;
    if (!msg && err)
        snprintf(err->text, sizeof err->text, "out of memory");
    json_decref(msg);
    return rc;
}

/* Hold session `id` back after a failure: the delay it now waits (ms), or
 * 0 when there was no memory to remember it (then it is claimed again at
 * the next poll, as without backoff).  Any thread. */
static int64_t backoff_fail(worker *w, const char *id) {
    int64_t delay = 0;
    pthread_mutex_lock(&w->mu);
    backoff *b = NULL;
    for (size_t i = 0; i < w->nheld && !b; i++)
        if (strcmp(w->held[i].id, id) == 0)
            b = &w->held[i];
    if (!b && w->nheld == w->capheld) {
        size_t cap = w->capheld ? 2 * w->capheld : 8;
        backoff *grown = realloc(w->held, cap * sizeof *grown);
        if (grown) {
            w->held = grown;
            w->capheld = cap;
        }
    }
    if (!b && w->nheld < w->capheld) {
        char *copy = strdup(id);
        if (copy) {
            b = &w->held[w->nheld++];
            *b = (backoff){.id = copy, .delay = 0};
        }
    }
    if (b) {
        b->delay = b->delay ? b->delay * 2 : BACKOFF_MIN_MS;
        if (b->delay > BACKOFF_MAX_MS)
            b->delay = BACKOFF_MAX_MS;
        b->retry_at = now_ms() + b->delay;
        delay = b->delay;
    }
    pthread_mutex_unlock(&w->mu);
    return delay;
}

/* Session `id` finished: its backoff is over (w->mu not held). */
static void backoff_clear(worker *w, const char *id) {
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < w->nheld; i++) {
        if (strcmp(w->held[i].id, id) != 0)
            continue;
        free(w->held[i].id);
        w->held[i] = w->held[--w->nheld];
        break;
    }
    pthread_mutex_unlock(&w->mu);
}

/*
 * The ids to skip at the next claim (main thread): those whose retry_at
 * is still ahead, into skip[] (at most `cap`; borrowed from w->held.  An
 * entry whose retry time is ahead belongs to a session that no slot runs
 * (its slot set it as it ended, and the claim skips it), and only that
 * session's slot (backoff_clear) or this thread (below) frees an entry's
 * string; entries move in the array, their strings do not).  An entry
 * whose retry time passed long ago (the session needed no writer since,
 * or has run long since) is forgotten: its next failure starts again at
 * BACKOFF_MIN_MS.
 */
static size_t backoff_skips(worker *w, char **skip, size_t cap) {
    size_t n = 0;
    int64_t now = now_ms();
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < w->nheld;) {
        backoff *b = &w->held[i];
        if (now - b->retry_at > 2 * BACKOFF_MAX_MS) {
            free(b->id);
            *b = w->held[--w->nheld];
            continue;
        }
        /* copies: a slot of the same session may clear its entry meanwhile */
        if (b->retry_at > now && n < cap && (skip[n] = strdup(b->id)) != NULL)
            n++;
        i++;
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}

static void set_agent(slot *s, weir_agent *agent) {
    pthread_mutex_lock(&s->w->mu);
    s->agent = agent;
    pthread_mutex_unlock(&s->w->mu);
}

static void *steer_thread(void *arg) {
    steerer *st = arg;
    pthread_mutex_lock(&st->mu);
    while (!st->stop) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += STEER_POLL_MS * 1000000L;
        if (t.tv_nsec >= 1000000000L) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000L;
        }
        int rc = 0;
        while (!st->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&st->cv, &st->mu, &t);
        if (st->stop)
            break;
        pthread_mutex_unlock(&st->mu);
        if (atomic_load(st->signals) > 0 || weir_agent_lease_lost(st->agent)) {
            pthread_mutex_lock(&st->mu);
            break; /* stopping, or fenced (the main thread cancels the turn) */
        }
        size_t n = 0;
        weir_error err;
        weir_error_clear(&err);
        rc = weir_agent_take_store_inbox(st->agent, &n, &err);
        pthread_mutex_lock(&st->mu);
        st->taken += n;
        if (rc != WEIR_OK)
            break; /* the slot's thread takes again after the run and reports it */
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* weir_agent_run_until_idle with the steering helper running meanwhile;
 * *taken: the inputs it delivered (the caller runs again when some came
 * in as the run ended). */
static int run_steered(slot *s, weir_agent *agent, size_t *taken, weir_error *err) {
    steerer st = {.agent = agent, .signals = &s->w->signals};
    *taken = 0;
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.cv, NULL);
    pthread_t th;
    /* without a thread the run still goes on: input sent meanwhile is
     * delivered after it, as before */
    bool helper = pthread_create(&th, NULL, steer_thread, &st) == 0;
    if (!helper)
        fprintf(stderr,
                "weir worker: %s: no steering thread; input sent while it runs is "
                "delivered after the run\n",
                s->id);
    int rc = weir_agent_run_until_idle(agent, err);
    if (helper) {
        pthread_mutex_lock(&st.mu);
        st.stop = true;
        pthread_cond_signal(&st.cv);
        pthread_mutex_unlock(&st.mu);
        pthread_join(th, NULL);
        *taken = st.taken;
    }
    pthread_cond_destroy(&st.cv);
    pthread_mutex_destroy(&st.mu);
    return rc;
}

/* "failed S: cannot WHAT: WHY", and S held back (backoff). */
static void fail_line(worker *w, const char *id, const char *what, const char *why) {
    int64_t delay = backoff_fail(w, id);
    if (delay > 0)
        weir_cli_say(NULL, NULL,
                     "weir worker: failed %s: cannot %s: %s (not claimed again for %lld ms)", id,
                     what, why, (long long)delay);
    else
        weir_cli_say(NULL, NULL,
                     "weir worker: failed %s: cannot %s: %s (no memory to hold it back)", id,
                     what, why);
}

/* One claimed session, on its own thread. */
static void *run_session(void *arg) {
    slot *s = arg;
    worker *w = s->w;
    char *path = NULL;
    weir_agent *agent = NULL;
    weir_error err;
    weir_error_clear(&err);
    int rc = weir_cli_session_path(weir_host_config(w->host), s->id, WEIR_CLI_ID, &path);
    if (rc != WEIR_EXIT_OK) {
        fail_line(w, s->id, "run it", "not a session id");
        goto out;
    }
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_file = path;
    opts.on_event = on_event;
    opts.user_data = s;
    atomic_store(&s->opening, true);
    rc = weir_agent_open(w->host, &opts, &agent, &err);
    atomic_store(&s->opening, false);
    if (rc != WEIR_OK) {
        agent = NULL;
        fail_line(w, s->id, "open it", err.text);
        goto out;
    }
    set_agent(s, agent);
    int repaired = atomic_load(&s->repaired);
    fprintf(stderr, "weir worker: claimed %s (epoch %" PRIu64 ")\n", s->id,
            weir_agent_lease_epoch(agent));
    if (s->prev)
        fprintf(stderr, "weir worker: took over %s from %s (repaired %d)\n", s->id, s->prev,
                repaired);
    int turn = repaired > 0 ? weir_agent_interrupted_turn(agent) : 0;
    rc = turn > 0 ? send_continuation(agent, turn, &err) : WEIR_OK;
    const char *what = "continue the interrupted turn";
    size_t steered = 0; /* delivered by the steering helper during the last run */
    for (bool first = true; rc == WEIR_OK && !atomic_load(&w->cancelling); first = false) {
        size_t taken = 0;
        what = "deliver its queued input";
        if ((rc = weir_agent_take_store_inbox(agent, &taken, &err)) != WEIR_OK)
            break;
        if (!first && taken == 0 && steered == 0)
            break; /* idle, and nothing came meanwhile */
        what = "run it";
        if ((rc = run_steered(s, agent, &steered, &err)) != WEIR_OK)
            break;
        if (atomic_load(&w->signals) > 0)
            break; /* stopping: take no more input */
    }
    if (rc == WEIR_OK && weir_agent_lease_lost(agent)) {
        rc = WEIR_E_LEASE_LOST; /* the heartbeat saw it; the turn was cancelled */
        snprintf(err.text, sizeof err.text,
                 "session %s: the lease was taken over by another writer", s->id);
    }
    if (rc == WEIR_E_LEASE_LOST) {
        fprintf(stderr,
                "weir worker: lost %s: another writer took it over; this worker stopped it "
                "and appends nothing more (%s)\n",
                s->id, err.text);
    } else if (rc != WEIR_OK) {
        fail_line(w, s->id, what, err.text);
    } else {
        backoff_clear(w, s->id);
        fprintf(stderr, "weir worker: finished %s (%d turns)\n", s->id, atomic_load(&s->turns));
    }
    set_agent(s, NULL);
    weir_agent_close(agent); /* releases the lease (a fenced one is left alone) */
out:
    free(path);
    pthread_mutex_lock(&w->mu);
    atomic_store(&s->done, true);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* A running session whose lease another writer took over (the heartbeat
 * saw it) has its turn cancelled now, not at its next append: it appends
 * nothing more either way, and stops spending the provider's tokens. */
static void watch_leases(worker *w) {
    pthread_mutex_lock(&w->mu);
    for (int i = 0; i < w->n; i++) {
        slot *s = &w->slots[i];
        if (s->agent && !s->stopped_lost && weir_agent_lease_lost(s->agent)) {
            s->stopped_lost = true;
            weir_agent_cancel(s->agent, "disposed", true);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

/* Join the slots whose thread finished (w->mu not held). */
static void reap(worker *w) {
    for (int i = 0; i < w->n; i++) {
        slot *s = &w->slots[i];
        if (!s->used || !atomic_load(&s->done))
            continue;
        pthread_join(s->th, NULL);
        free(s->id);
        free(s->prev);
        s->id = s->prev = NULL;
        s->used = false;
        pthread_mutex_lock(&w->mu);
        w->running--;
        pthread_mutex_unlock(&w->mu);
    }
}

/* Start a thread for claimed session `id` (stolen, as `prev`). */
static bool start_slot(worker *w, char *id, char *prev) {
    for (int i = 0; i < w->n; i++) {
        slot *s = &w->slots[i];
        if (s->used)
            continue;
        s->id = id;
        s->prev = prev;
        atomic_store(&s->done, false);
        atomic_store(&s->repaired, 0);
        atomic_store(&s->turns, 0);
        s->stopped_lost = false;
        s->used = true;
        pthread_mutex_lock(&w->mu);
        w->running++;
        pthread_mutex_unlock(&w->mu);
        if (pthread_create(&s->th, NULL, run_session, s) == 0)
            return true;
        s->used = false;
        pthread_mutex_lock(&w->mu);
        w->running--;
        pthread_mutex_unlock(&w->mu);
        break;
    }
    fprintf(stderr, "weir worker: failed %s: no thread to run it (its lease expires by itself)\n",
            id);
    free(id);
    free(prev);
    return false;
}

/* The signal thread: SIGTERM and SIGINT (blocked everywhere else). */
static sigset_t stop_signals;

static void *signal_thread(void *arg) {
    worker *w = arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&stop_signals, &sig) != 0)
            continue;
        int n = atomic_fetch_add(&w->signals, 1) + 1;
        fprintf(stderr, "weir worker: %s: %s\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                n == 1 ? "stopping (no more claims; running turns finish within the grace)"
                       : "cancelling the running turns now");
        pthread_mutex_lock(&w->mu);
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

static bool parse_int(const char *arg, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Claim and start sessions until stopped (or idle with exit_when_idle). */
static int claim_loop(worker *w, long poll_ms, bool exit_when_idle) {
    int64_t quiet_until = 0; /* a failing store is reported once per poll */
    while (atomic_load(&w->signals) == 0) {
        reap(w);
        watch_leases(w);
        pthread_mutex_lock(&w->mu);
        bool full = w->running >= w->n;
        if (full && atomic_load(&w->signals) == 0)
            wait_ms(w, poll_ms < 250 ? poll_ms : 250);
        pthread_mutex_unlock(&w->mu);
        if (full)
            continue;
        char *id = NULL, *prev = NULL;
        weir_error err;
        weir_error_clear(&err);
        char *skip[MAX_SKIPS];
        size_t nskip = backoff_skips(w, skip, MAX_SKIPS);
        int rc = weir_host_store_claim_except(w->host, (const char *const *)skip, nskip, &id,
                                              &prev, &err);
        for (size_t k = 0; k < nskip; k++)
            free(skip[k]);
        if (rc == WEIR_OK) {
            start_slot(w, id, prev);
            continue;
        }
        if (rc == WEIR_E_UNSUPPORTED) {
            weir_cli_say(NULL, NULL, "weir worker: %s", err.text);
            return WEIR_EXIT_CONFIG;
        }
        if (rc != WEIR_E_NOT_FOUND) {
            /* the server is away (restarting): claim again after a poll */
            if (now_ms() >= quiet_until) {
                weir_cli_say(NULL, NULL, "weir worker: claim: %s (trying again)", err.text);
                quiet_until = now_ms() + 10 * poll_ms;
            }
            pthread_mutex_lock(&w->mu);
            if (atomic_load(&w->signals) == 0)
                wait_ms(w, poll_ms);
            pthread_mutex_unlock(&w->mu);
            continue;
        }
        if (exit_when_idle) {
            pthread_mutex_lock(&w->mu);
            bool idle = w->running == 0;
            pthread_mutex_unlock(&w->mu);
            if (idle)
                return WEIR_EXIT_OK;
        }
        /* nothing claimable: wait for a notification, at most poll_ms, in
         * steps of 250 ms so that a signal is seen soon */
        bool woken = false;
        for (int64_t until = now_ms() + poll_ms; !woken && atomic_load(&w->signals) == 0;) {
            int64_t left = until - now_ms();
            if (left <= 0)
                break;
            watch_leases(w);
            weir_error_clear(&err);
            if (weir_host_store_wait(w->host, (int)(left < 250 ? left : 250), &woken, &err) !=
                WEIR_OK) {
                pthread_mutex_lock(&w->mu);
                if (atomic_load(&w->signals) == 0)
                    wait_ms(w, left < 250 ? left : 250);
                pthread_mutex_unlock(&w->mu);
            }
        }
    }
    return WEIR_EXIT_OK;
}

/* After the first signal: the grace, then cancel, then wait for the slots. */
static void drain(worker *w, long grace_ms) {
    reap(w); /* a session that just ended is not waited for */
    pthread_mutex_lock(&w->mu);
    int running = w->running;
    pthread_mutex_unlock(&w->mu);
    if (running)
        fprintf(stderr, "weir worker: waiting up to %ld ms for %d running session%s\n",
                grace_ms, running, running == 1 ? "" : "s");
    int64_t deadline = now_ms() + grace_ms;
    for (;;) {
        reap(w);
        watch_leases(w);
        pthread_mutex_lock(&w->mu);
        running = w->running;
        if (running && now_ms() < deadline && atomic_load(&w->signals) < 2)
            wait_ms(w, 100);
        pthread_mutex_unlock(&w->mu);
        if (!running)
            return;
        if (now_ms() >= deadline || atomic_load(&w->signals) >= 2)
            break;
    }
    atomic_store(&w->cancelling, true);
    fprintf(stderr, "weir worker: cancelling %d running session%s\n", running,
            running == 1 ? "" : "s");
    /* cancel again every 100 ms: a turn starting after one cancel sees the
     * next.  A body that ignores its signal (a tools-ffi call) may hold a
     * turn: after 10 s more the worker leaves without it (its lease expires
     * and the next claim repairs the session) */
    int64_t hard = now_ms() + 10000;
    for (;;) {
        if (now_ms() >= hard) {
            fprintf(stderr,
                    "weir worker: %d session%s did not stop 10 s after the cancel; exiting "
                    "without them (their leases expire, the next claim repairs them)\n",
                    running, running == 1 ? "" : "s");
            fflush(stderr);
            _exit(WEIR_EXIT_FAIL);
        }
        pthread_mutex_lock(&w->mu);
        for (int i = 0; i < w->n; i++)
            if (w->slots[i].agent)
                weir_agent_cancel(w->slots[i].agent, "disposed", true);
        running = w->running;
        if (running)
            wait_ms(w, 100);
        pthread_mutex_unlock(&w->mu);
        reap(w);
        pthread_mutex_lock(&w->mu);
        running = w->running;
        pthread_mutex_unlock(&w->mu);
        if (!running)
            return;
    }
}

int weir_cmd_worker(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"concurrency", required_argument, NULL, 'n'},
                                              {"grace-ms", required_argument, NULL, 'g'},
                                              {"poll-ms", required_argument, NULL, 'p'},
                                              {"exit-when-idle", no_argument, NULL, 'x'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    weir_cli_files files = {0};
    long concurrency = 1, grace_ms = 30000, poll_ms = 1000;
    bool exit_when_idle = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "c:n:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&files, "weir worker", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'n':
            if (!parse_int(optarg, 1, MAX_CONCURRENCY, &concurrency)) {
                fprintf(stderr, "weir worker: --concurrency: expected 1-%d, got '%s'\n",
                        MAX_CONCURRENCY, optarg);
                return WEIR_EXIT_USAGE;
            }
            break;
        case 'g':
            if (!parse_int(optarg, 0, 86400000, &grace_ms)) {
                fprintf(stderr, "weir worker: --grace-ms: expected 0-86400000, got '%s'\n",
                        optarg);
                return WEIR_EXIT_USAGE;
            }
            break;
        case 'p':
            if (!parse_int(optarg, 50, 60000, &poll_ms)) {
                fprintf(stderr, "weir worker: --poll-ms: expected 50-60000, got '%s'\n", optarg);
                return WEIR_EXIT_USAGE;
            }
            break;
        case 'x':
            exit_when_idle = true;
            break;
        case 'h':
            fputs(worker_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(worker_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "weir worker: unexpected argument '%s'\n\n%s", argv[optind], worker_help);
        return WEIR_EXIT_USAGE;
    }
    /* every thread from here on (the plugins' too) leaves SIGTERM and
     * SIGINT to the signal thread */
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    static worker w; /* one per process; large */
    memset(&w, 0, sizeof w);
    w.n = (int)concurrency;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    for (int i = 0; i < w.n; i++)
        w.slots[i].w = &w;
    char *path = NULL;
    int rc = weir_cli_session_host(&files, NULL, WEIR_CLI_ID, NULL, &path, &w.host);
    if (rc != WEIR_EXIT_OK)
        return rc;
    pthread_t sig_th;
    bool sig = pthread_create(&sig_th, NULL, signal_thread, &w) == 0;
    if (!sig) {
        fprintf(stderr, "weir worker: no signal thread\n");
        weir_host_destroy(w.host);
        return WEIR_EXIT_IO;
    }
    fprintf(stderr, "weir worker: running (concurrency %d)\n", w.n);
    rc = claim_loop(&w, poll_ms, exit_when_idle);
    drain(&w, grace_ms);
    pthread_cancel(sig_th); /* sigwait is a cancellation point */
    pthread_join(sig_th, NULL);
    weir_host_destroy(w.host);
    for (size_t i = 0; i < w.nheld; i++)
        free(w.held[i].id);
    free(w.held);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (rc == WEIR_EXIT_OK)
        fprintf(stderr, "weir worker: stopped\n");
    return rc;
}
