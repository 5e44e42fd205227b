/*
 * plugins/tools-mcp/mcp_server.c - one MCP server: connections, requests,
 * the lifecycle (see mcp_server.h).
 *
 * stdio: each start makes a connection (`conn`): the child process and one
 * reader thread that polls its stdout and stderr.  stdout goes through the
 * frame reader; each message is dispatched: a response completes the
 * pending request with its id, a server request is answered at once (ping:
 * {}, anything else: -32601), a notification is handled (progress to the
 * request whose token it names, logging to the log callback, list_changed
 * sets a flag the plugin reads between turns).  stderr lines go to the log
 * (info, rate-limited) and to a ring of the last lines, which load errors
 * quote.  When stdout closes, the reader drains stderr for a moment, reaps
 * the child and fails the requests still pending on that connection; the
 * next request starts a new connection (a lazy restart), with a backoff
 * that grows with the deaths since the last successful request.
 *
 * HTTP: no connection object and no thread: each request is a POST made on
 * the caller's thread (mcp_http.c), whose answer (JSON or an SSE stream)
 * goes through the same dispatch.
 *
 * Locking: s->mu guards the pending list, the connection pointer, the
 * counters and the flags; s->cv is broadcast when a request completes or a
 * start ends.  Writes to a child's stdin are serialized by c->wmu and never
 * made under s->mu.  The progress callback runs without it (it delivers a
 * live event, which must not run under a lock), and a request does not
 * return while a callback for it runs (pending.busy).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mcp_server.h"

#include "weir/version.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp_frame.h"
#include "mcp_http.h"
#include "mcp_map.h"
#include "mcp_proc.h"

const char *const mcp_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
                                    NULL};

#define STDERR_RING 20
#define STDERR_LINE_MAX 400
#define WRITE_TIMEOUT_MS 10000
#define DRAIN_MS 400
#define LOG_BURST 40       /* lines forwarded at once */
#define LOG_PER_SEC 20     /* then this many per second */
#define MAX_PAGES 100
#define BACKOFF_BASE_MS 250
#define BACKOFF_MAX_MS 30000

typedef struct conn conn;

/* A token bucket for the lines forwarded to the log (stderr, garbage on
 * stdout, logging notifications): LOG_BURST at once, then LOG_PER_SEC. */
typedef struct rate {
    double tokens;
    uint64_t at;        /* when tokens was last refilled (monotonic ms) */
    uint64_t dropped;   /* lines not forwarded since the last summary */
    int worst;          /* the most severe level among them (0 error .. 3 debug) */
} rate;

typedef struct pending {
    json_int_t id;
    conn *c;               /* stdio: the connection it was sent on */
    json_t *resp;          /* the response message, once done */
    bool done;
    char fail[300];        /* done without resp: why */
    void *progress_ctx;    /* NULL: progress is dropped */
    int busy;              /* progress callbacks running for it (without s->mu) */
    struct pending *next;
} pending;

struct conn {
    mcp_server *s;
    mcp_proc proc;
    pthread_t io;
    bool io_started;
    pthread_mutex_t wmu;   /* serializes writes to stdin */
    bool wmu_ok;
    bool dead;             /* (s->mu) stdout closed: no more answers */
    bool quit;             /* (s->mu) the reader should stop */
    bool stopping;         /* (s->mu) we stop it: not a crash */
    char why[300];         /* (s->mu) how it died */
    int refs;              /* (s->mu) requests using it */
    mcp_frame_reader fr;
    char errline[STDERR_LINE_MAX + 1];
    size_t errlen;
};

struct mcp_server {
    char *name;
    mcp_kind kind;
    char **argv, **envp, *cwd;
    char *url;
    char **headers;
    long startup_timeout_ms, grace_ms;
    size_t max_message;
    const pc_secrets *secrets;
    mcp_log_cb log;
    mcp_progress_cb progress;
    void *ud;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    conn *c;               /* stdio: the current connection */
    mcp_http *http;        /* HTTP: the transport */
    bool up;               /* initialized (HTTP: a session or none needed) */
    uint64_t session_gen;  /* HTTP: initializes that succeeded (the session's generation) */
    bool starting;         /* a start runs (others wait) */
    pending *pend;
    json_int_t next_id;
    int deaths;            /* since the last successful request */
    uint64_t retry_at;     /* no start before this (monotonic ms) */
    char down_why[300];    /* why the last start or connection failed */
    char version[32];
    json_t *caps;
    bool list_changed;
    uint64_t list_changed_n;

    /* stderr ring and log rate limits (ring_mu) */
    pthread_mutex_t ring_mu;
    char *ring[STDERR_RING];
    size_t ring_at, ring_n;
    rate err_rate;         /* stderr lines and garbage on stdout */
    rate log_rate;         /* notifications/message */
};

/* ------------------------------------------------------------------------ */
/* Small things                                                              */
/* ------------------------------------------------------------------------ */

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static char **strv_dup(char *const *v) {
    size_t n = 0;
    while (v && v[n])
        n++;
    char **o = calloc(n + 1, sizeof *o);
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!(o[i] = strdup(v[i]))) {
            for (size_t j = 0; j < i; j++)
                free(o[j]);
            free(o);
            return NULL;
        }
    }
    return o;
}

static void strv_free(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Scrub the secrets out of text (malloc'd copy; NULL when out of memory). */
static char *scrubbed(const mcp_server *s, const char *text, size_t len) {
    char *out = NULL;
    if (s->secrets && pc_scrub(s->secrets, text, len, &out, NULL) != 0)
        return NULL;
    return out ? out : strndup(text, len);
}

static void say(mcp_server *s, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(mcp_server *s, int level, const char *fmt, ...) {
    if (!s->log)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *clean = scrubbed(s, buf, strlen(buf));
    s->log(s->ud, level, clean ? clean : "[redacted]");
    free(clean);
}

static void rate_init(rate *r) {
    r->tokens = LOG_BURST;
    r->at = now_ms();
    r->dropped = 0;
    r->worst = 3;
}

/*
 * True when a line of `level` may go out now (under s->ring_mu); *dropped
 * then receives the count of lines not forwarded before it (reset).
 */
static bool rate_take(rate *r, int level, uint64_t *dropped) {
    uint64_t t = now_ms();
    r->tokens += (double)(t - r->at) * LOG_PER_SEC / 1000.0;
    if (r->tokens > LOG_BURST)
        r->tokens = LOG_BURST;
    r->at = t;
    if (r->tokens < 1.0) {
        r->dropped++;
        if (level < r->worst)
            r->worst = level;
        return false;
    }
    r->tokens -= 1.0;
    *dropped = r->dropped;
    r->dropped = 0;
    r->worst = 3;
    return true;
}

/* A limit's count of dropped lines, taken (reset) when `all` or when no
 * line came for a second (the flood is over); 0 when none.  *worst: the
 * most severe level among them. */
static uint64_t rate_take_dropped(rate *r, bool all, int *worst) {
    if (!r->dropped || (!all && now_ms() - r->at < 1000))
        return 0;
    uint64_t n = r->dropped;
    *worst = r->worst;
    r->dropped = 0;
    r->worst = 3;
    return n;
}

/*
 * The summary of the lines a limit dropped that no line has counted yet:
 * "[name] (N more stderr lines not shown: too many)", "[name] (N more log
 * messages not shown: too many)" (at the most severe level among them).
 * `all`: now (the end of a connection or request); else only once the
 * flood is over.
 */
static void rate_flush(mcp_server *s, bool all) {
    int err_level = 2, log_level = 3;
    pthread_mutex_lock(&s->ring_mu);
    uint64_t err_n = rate_take_dropped(&s->err_rate, all, &err_level);
    uint64_t log_n = rate_take_dropped(&s->log_rate, all, &log_level);
    pthread_mutex_unlock(&s->ring_mu);
    /* stderr's summary stays at info, as its lines are (whatever garbage
     * warnings it also counts): a noisy stderr is not a warning */
    (void)err_level;
    if (err_n)
        say(s, 2, "[%s] (%llu more stderr lines not shown: too many)", s->name,
            (unsigned long long)err_n);
    if (log_n)
        say(s, log_level, "[%s] (%llu more log messages not shown: too many)", s->name,
            (unsigned long long)log_n);
}

/* One stderr line (or any line to forward at info, rate-limited). */
static void stderr_line(mcp_server *s, const char *line, size_t n) {
    char *clean = scrubbed(s, line, n);
    if (!clean)
        return;
    pthread_mutex_lock(&s->ring_mu);
    free(s->ring[s->ring_at]);
    s->ring[s->ring_at] = clean;
    s->ring_at = (s->ring_at + 1) % STDERR_RING;
    if (s->ring_n < STDERR_RING)
        s->ring_n++;
    uint64_t dropped = 0;
    bool ok = rate_take(&s->err_rate, 2, &dropped);
    char *copy = ok ? strdup(clean) : NULL;
    pthread_mutex_unlock(&s->ring_mu);
    if (!ok || !s->log)
        return;
    char buf[STDERR_LINE_MAX + 128];
    if (dropped)
        snprintf(buf, sizeof buf, "(%llu stderr lines not shown: too many) %s",
                 (unsigned long long)dropped, copy ? copy : "");
    else
        snprintf(buf, sizeof buf, "%s", copy ? copy : "");
    free(copy);
    char line_out[STDERR_LINE_MAX + 200];
    snprintf(line_out, sizeof line_out, "[%s] %s", s->name, buf);
    s->log(s->ud, 2, line_out);
}

const char *mcp_server_stderr_tail(mcp_server *s, int lines, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&s->ring_mu);
    size_t n = s->ring_n < (size_t)lines ? s->ring_n : (size_t)lines;
    for (size_t k = 0; k < n; k++) {
        size_t i = (s->ring_at + STDERR_RING - n + k) % STDERR_RING;
        int w = snprintf(buf + at, size > at ? size - at : 0, "\n  | %s", s->ring[i]);
        if (w < 0 || (size_t)w >= size - at) {
            at = size - 1;
            break;
        }
        at += (size_t)w;
    }
    pthread_mutex_unlock(&s->ring_mu);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */
/* ------------------------------------------------------------------------ */

mcp_server *mcp_server_create(const mcp_server_cfg *cfg) {
    mcp_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->ring_mu, NULL);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->name = strdup(cfg->name ? cfg->name : "?");
    s->kind = cfg->kind;
    s->argv = cfg->argv ? strv_dup(cfg->argv) : NULL;
    s->envp = cfg->envp ? strv_dup(cfg->envp) : NULL;
    s->cwd = cfg->cwd ? strdup(cfg->cwd) : NULL;
    s->url = cfg->url ? strdup(cfg->url) : NULL;
    s->headers = strv_dup(cfg->headers);
    s->startup_timeout_ms = cfg->startup_timeout_ms > 0 ? cfg->startup_timeout_ms : 30000;
    s->grace_ms = cfg->grace_ms > 0 ? cfg->grace_ms : 2000;
    s->max_message = cfg->max_message;
    s->secrets = cfg->secrets;
    s->log = cfg->log;
    s->progress = cfg->progress;
    s->ud = cfg->ud;
    rate_init(&s->err_rate);
    rate_init(&s->log_rate);
    if (!s->name || (cfg->argv && !s->argv) || (cfg->envp && !s->envp) || (cfg->cwd && !s->cwd) ||
        (cfg->url && !s->url) || !s->headers) {
        mcp_server_destroy(s);
        return NULL;
    }
    if (s->kind == MCP_HTTP) {
        s->http = mcp_http_create(s->url, s->headers, s->max_message);
        if (!s->http) {
            mcp_server_destroy(s);
            return NULL;
        }
    }
    return s;
}

/* ------------------------------------------------------------------------ */
/* stdio connections                                                         */
/* ------------------------------------------------------------------------ */

/* Write all of buf to the child's stdin within WRITE_TIMEOUT_MS; -1 on failure. */
static int conn_write(conn *c, const char *buf, size_t n, char *why, size_t size) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    pthread_mutex_lock(&c->wmu);
    int rc = 0;
    uint64_t deadline = now_ms() + WRITE_TIMEOUT_MS;
    size_t at = 0;
    bool epipe = false;
    while (at < n) {
        if (c->proc.in < 0) {
            snprintf(why, size, "its stdin is closed");
            rc = -1;
            break;
        }
        ssize_t w = write(c->proc.in, buf + at, n - at);
        if (w > 0) {
            at += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            uint64_t t = now_ms();
            if (t >= deadline) {
                snprintf(why, size, "it stopped reading its stdin (a write waited %d s)",
                         WRITE_TIMEOUT_MS / 1000);
                rc = -1;
                break;
            }
            struct pollfd pf = {c->proc.in, POLLOUT, 0};
            int left = (int)(deadline - t);
            poll(&pf, 1, left < 100 ? left : 100);
            continue;
        }
        epipe = w < 0 && errno == EPIPE;
        snprintf(why, size, "cannot write to its stdin: %s", strerror(w < 0 ? errno : EIO));
        rc = -1;
        break;
    }
    pthread_mutex_unlock(&c->wmu);
    if (epipe) {
        /* consume the SIGPIPE this thread raised before unblocking it */
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) > 0) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Serialize and send one message (borrowed) on a stdio connection. */
static int conn_send(conn *c, const json_t *msg, char *why, size_t size) {
    char *line = mcp_frame_text(msg, true);
    if (!line) {
        snprintf(why, size, "out of memory");
        return -1;
    }
    int rc = conn_write(c, line, strlen(line), why, size);
    free(line);
    return rc;
}

/* Send a message to the server by whatever transport it has (borrowed). */
static int send_msg(mcp_server *s, conn *c, const json_t *msg, char *why, size_t size) {
    if (s->kind == MCP_HTTP)
        return mcp_http_send(s->http, s, msg, 10000, NULL, NULL, why, size) == MCP_HTTP_OK ? 0
                                                                                         : -1;
    return c ? conn_send(c, msg, why, size) : -1;
}

static int stdio_frame(void *ud, mcp_frame_kind kind, json_t *msg, const char *text, size_t len) {
    conn *c = ud;
    mcp_server *s = c->s;
    if (kind == MCP_FRAME_MESSAGE) {
        json_t *reply = NULL;
        mcp__server_dispatch(s, msg, &reply);
        if (reply) {
            char why[200];
            if (conn_send(c, reply, why, sizeof why) != 0)
                say(s, 1, "MCP server '%s': cannot answer its request: %s", s->name, why);
            json_decref(reply);
        }
        return 0;
    }
    if (kind == MCP_FRAME_GARBAGE) {
        char shown[120];
        size_t n = len < 80 ? len : 80;
        size_t j = 0;
        for (size_t i = 0; i < n && j + 1 < sizeof shown; i++)
            shown[j++] = (text[i] >= 0x20 && text[i] < 0x7f) ? text[i] : '?';
        shown[j] = '\0';
        pthread_mutex_lock(&s->ring_mu);
        uint64_t dropped = 0;
        bool ok = rate_take(&s->err_rate, 1, &dropped);
        pthread_mutex_unlock(&s->ring_mu);
        char before[80] = "";
        if (dropped)
            snprintf(before, sizeof before, "(%llu stderr lines not shown: too many) ",
                     (unsigned long long)dropped);
        if (ok)
            say(s, 1, "%sMCP server '%s' wrote a line that is not a JSON-RPC message on its "
                      "stdout (%zu bytes, ignored): %s%s", before, s->name, len, shown,
                len > n ? "..." : "");
        return 0;
    }
    /* too long: the one request pending on this connection, if just one, is its victim */
    pthread_mutex_lock(&s->mu);
    pending *only = NULL;
    int count = 0;
    for (pending *p = s->pend; p; p = p->next)
        if (p->c == c && !p->done) {
            only = p;
            count++;
        }
    if (count == 1) {
        only->done = true;
        snprintf(only->fail, sizeof only->fail,
                 "its answer (%zu bytes) is longer than the limit of %zu bytes "
                 "(max_message_bytes)", len, s->max_message);
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    say(s, 1, "MCP server '%s' sent a message of %zu bytes, longer than the limit of %zu "
              "bytes (max_message_bytes): dropped", s->name, len, s->max_message);
    return 0;
}

static void conn_stderr(conn *c, const char *data, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char ch = data[i];
        if (ch == '\n') {
            if (c->errlen && c->errline[c->errlen - 1] == '\r')
                c->errlen--;
            stderr_line(c->s, c->errline, c->errlen);
            c->errlen = 0;
        } else if (c->errlen < STDERR_LINE_MAX) {
            c->errline[c->errlen++] = ch;
        }
    }
}

static uint64_t backoff_ms(int deaths) {
    if (deaths <= 1)
        return 0;
    uint64_t ms = BACKOFF_BASE_MS;
    for (int i = 2; i < deaths && ms < BACKOFF_MAX_MS; i++)
        ms *= 2;
    return ms < BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS;
}

/* The connection's stdout closed (or we stop it): fail what is pending on it. */
static void conn_died(conn *c, const char *how) {
    mcp_server *s = c->s;
    for (int waited = 0; waited < DRAIN_MS && !mcp_proc_try_reap(&c->proc); waited += 10)
        usleep(10000);
    char st[96];
    mcp_proc_describe(&c->proc, st, sizeof st);
    pthread_mutex_lock(&s->mu);
    bool stopping = c->stopping;
    if (!c->dead) {
        c->dead = true;
        if (stopping)
            snprintf(c->why, sizeof c->why, "it was stopped");
        else if (c->proc.reaped)
            snprintf(c->why, sizeof c->why, "it exited (%s)", st);
        else
            snprintf(c->why, sizeof c->why, "it %s (the process is still running)", how);
        for (pending *p = s->pend; p; p = p->next) {
            if (p->c == c && !p->done) {
                p->done = true;
                snprintf(p->fail, sizeof p->fail, "%s", c->why);
            }
        }
        if (s->c == c) {
            s->up = false;
            if (!stopping) {
                s->deaths++;
                s->retry_at = now_ms() + backoff_ms(s->deaths);
                snprintf(s->down_why, sizeof s->down_why, "%s", c->why);
            }
        }
        pthread_cond_broadcast(&s->cv);
    }
    char why[300];
    snprintf(why, sizeof why, "%s", c->why);
    bool current = s->c == c; /* not a start that failed: that one is reported by its caller */
    pthread_mutex_unlock(&s->mu);
    if (!stopping && current)
        say(s, 1, "MCP server '%s': %s; it is started again on the next call", s->name, why);
}

static void *conn_main(void *arg) {
    conn *c = arg;
    mcp_server *s = c->s;
    bool out_open = true, err_open = true;
    uint64_t eof_at = 0;
    char *buf = malloc(65536);
    if (!buf) {
        conn_died(c, "failed (out of memory)");
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool quit = c->quit;
        pthread_mutex_unlock(&s->mu);
        if (quit || (!out_open && !err_open))
            break;
        if (!out_open && now_ms() - eof_at >= DRAIN_MS)
            break; /* stderr is kept open by some other process: stop waiting */
        struct pollfd fds[2] = {{out_open ? c->proc.out : -1, POLLIN, 0},
                                {err_open ? c->proc.err : -1, POLLIN, 0}};
        int r = poll(fds, 2, 100);
        if (r < 0 && errno != EINTR)
            break;
        if (r == 0)
            rate_flush(s, false); /* quiet: say what the limits dropped, once a flood is over */
        if (r <= 0)
            continue;
        if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(c->proc.out, buf, 65536);
            if (n > 0) {
                if (mcp_frame_feed(&c->fr, buf, (size_t)n, stdio_frame, c) < 0)
                    say(s, 1, "MCP server '%s': out of memory reading its stdout", s->name);
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                out_open = false;
                eof_at = now_ms();
            }
        }
        if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(c->proc.err, buf, 65536);
            if (n > 0)
                conn_stderr(c, buf, (size_t)n);
            else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                err_open = false;
                if (c->errlen) {
                    stderr_line(s, c->errline, c->errlen);
                    c->errlen = 0;
                }
            }
        }
    }
    free(buf);
    if (c->errlen) {
        stderr_line(s, c->errline, c->errlen);
        c->errlen = 0;
    }
    rate_flush(s, true);
    conn_died(c, out_open ? "was stopped" : "closed its stdout");
    return NULL;
}

static void conn_free(conn *c) {
    if (!c)
        return;
    mcp_proc_clear(&c->proc);
    mcp_frame_clear(&c->fr);
    if (c->wmu_ok)
        pthread_mutex_destroy(&c->wmu);
    free(c);
}

/* Stop a connection (not s->c any more, or being destroyed) and free it once unused. */
static void conn_retire(mcp_server *s, conn *c) {
    if (!c)
        return;
    pthread_mutex_lock(&s->mu);
    if (!c->dead)
        c->stopping = true;
    pthread_mutex_unlock(&s->mu);
    /* close stdin under the write lock (no write is half done), then wait
     * without it: the reader may need it to answer while the server ends */
    pthread_mutex_lock(&c->wmu);
    if (c->proc.in >= 0)
        close(c->proc.in);
    c->proc.in = -1;
    pthread_mutex_unlock(&c->wmu);
    mcp_proc_stop(&c->proc, (int)s->grace_ms);
    pthread_mutex_lock(&s->mu);
    c->quit = true;
    pthread_mutex_unlock(&s->mu);
    if (c->io_started)
        pthread_join(c->io, NULL);
    pthread_mutex_lock(&s->mu);
    while (c->refs > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    conn_free(c);
}

static conn *conn_open(mcp_server *s, char *why, size_t size) {
    conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, size, "out of memory");
        return NULL;
    }
    c->s = s;
    mcp_frame_init(&c->fr, s->max_message);
    pthread_mutex_init(&c->wmu, NULL);
    c->wmu_ok = true;
    if (mcp_proc_spawn(&c->proc, s->argv, s->envp, s->cwd, s->name, why, size) != 0) {
        c->proc.pid = 0;
        conn_free(c);
        return NULL;
    }
    if (pthread_create(&c->io, NULL, conn_main, c) != 0) {
        snprintf(why, size, "cannot start a thread");
        mcp_proc_stop(&c->proc, 0);
        conn_free(c);
        return NULL;
    }
    c->io_started = true;
    return c;
}

/* ------------------------------------------------------------------------ */
/* Dispatch of what the server sends                                         */
/* ------------------------------------------------------------------------ */

static json_t *error_reply(const json_t *id, int code, const char *message) {
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", code,
                     "message", message);
}

/* notifications/message: to the log at its level, with the stderr's rate limit. */
static void on_log_message(mcp_server *s, const json_t *params) {
    const char *level = json_string_value(json_object_get(params, "level"));
    int lv = mcp_log_level(level);
    pthread_mutex_lock(&s->ring_mu);
    uint64_t dropped = 0;
    bool ok = rate_take(&s->log_rate, lv, &dropped);
    pthread_mutex_unlock(&s->ring_mu);
    if (!ok)
        return;
    const char *logger = json_string_value(json_object_get(params, "logger"));
    const json_t *data = json_object_get(params, "data");
    char *text = json_is_string(data) ? strdup(json_string_value(data))
                                      : mcp_frame_text(data, false);
    char before[80] = "";
    if (dropped)
        snprintf(before, sizeof before, " (%llu log messages not shown: too many)",
                 (unsigned long long)dropped);
    say(s, lv, "[%s]%s%s%s%s %s", s->name, before, logger ? " " : "", logger ? logger : "",
        logger ? ":" : "", text ? text : "");
    free(text);
}

void mcp__server_dispatch(mcp_server *s, json_t *msg, json_t **reply) {
    *reply = NULL;
    const json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (!method && id && (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
        /* a response */
        if (!json_is_integer(id))
            return;
        pthread_mutex_lock(&s->mu);
        for (pending *p = s->pend; p; p = p->next) {
            if (p->id == json_integer_value(id) && !p->done) {
                p->resp = json_incref(msg);
                p->done = true;
                pthread_cond_broadcast(&s->cv);
                break;
            }
        }
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (!method)
        return;
    const json_t *params = json_object_get(msg, "params");
    if (id && !json_is_null(id)) {
        /* a request from the server */
        if (!strcmp(method, "ping")) {
            *reply = json_pack("{s:s, s:O, s:{}}", "jsonrpc", "2.0", "id", id, "result");
            return;
        }
        say(s, 2, "MCP server '%s' asked for '%s', which weir does not support: answered "
                  "-32601 Method not found", s->name, method);
        *reply = error_reply(id, -32601, "Method not found");
        return;
    }
    if (!strcmp(method, "notifications/progress")) {
        const json_t *token = json_object_get(params, "progressToken");
        if (!json_is_integer(token))
            return;
        json_t *clean = json_deep_copy(params);
        if (clean && s->secrets)
            pc_scrub_json(s->secrets, clean);
        pthread_mutex_lock(&s->mu);
        pending *hit = NULL;
        for (pending *p = s->pend; p; p = p->next) {
            if (p->id == json_integer_value(token) && !p->done && p->progress_ctx) {
                hit = p;
                hit->busy++; /* its request waits for this callback before it returns */
                break;
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (hit) {
            if (s->progress && clean)
                s->progress(s->ud, hit->progress_ctx, clean);
            pthread_mutex_lock(&s->mu);
            hit->busy--;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        json_decref(clean);
    } else if (!strcmp(method, "notifications/message")) {
        on_log_message(s, params);
    } else if (!strcmp(method, "notifications/tools/list_changed")) {
        pthread_mutex_lock(&s->mu);
        s->list_changed = true;
        s->list_changed_n++;
        pthread_mutex_unlock(&s->mu);
    }
    /* anything else (resources, prompts, cancelled, tasks...): ignored */
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

static void unlink_pending(mcp_server *s, pending *p) {
    for (pending **pp = &s->pend; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

static void fmt_secs(long ms, char *buf, size_t size) {
    if (ms % 1000 == 0)
        snprintf(buf, size, "%ld s", ms / 1000);
    else
        snprintf(buf, size, "%g s", (double)ms / 1000.0);
}

/*
 * One request on connection `c` (stdio; NULL for HTTP).  `params` stolen.
 */
static mcp_status rpc(mcp_server *s, conn *c, const char *method, json_t *params,
                      long timeout_ms, mcp_cancel_cb cancel, void *cancel_ctx, void *progress_ctx,
                      json_t **out, char *why, size_t size) {
    *out = NULL;
    pending *p = calloc(1, sizeof *p);
    json_t *msg = NULL;
    if (!p)
        goto oom;
    pthread_mutex_lock(&s->mu);
    p->id = ++s->next_id;
    p->c = c;
    p->progress_ctx = progress_ctx;
    p->next = s->pend;
    s->pend = p;
    pthread_mutex_unlock(&s->mu);
    if (progress_ctx) {
        if (!params)
            params = json_object();
        json_t *meta = json_object_get(params, "_meta");
        if (!json_is_object(meta)) {
            meta = json_object();
            json_object_set_new(params, "_meta", meta);
        }
        json_object_set_new(meta, "progressToken", json_integer(p->id));
    }
    msg = json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", (json_int_t)p->id, "method", method);
    if (!msg || (params && json_object_set_new(msg, "params", params) != 0)) {
        params = NULL;
        goto oom_unlink;
    }
    params = NULL;
    mcp_status st = MCP_OK;
    uint64_t start = now_ms();
    uint64_t deadline = timeout_ms > 0 ? start + (uint64_t)timeout_ms : UINT64_MAX;
    if (s->kind == MCP_HTTP) {
        int hrc = mcp_http_send(s->http, s, msg, timeout_ms, cancel, cancel_ctx, why, size);
        if (hrc == MCP_HTTP_CANCELLED)
            st = MCP_CANCELLED;
        else if (hrc == MCP_HTTP_TIMEOUT)
            st = MCP_TIMEOUT;
        else if (hrc == MCP_HTTP_SESSION_GONE || hrc == MCP_HTTP_FAILED)
            st = hrc == MCP_HTTP_SESSION_GONE ? MCP_DOWN : MCP_DEAD;
        else if (hrc == MCP_HTTP_PROTOCOL)
            st = MCP_PROTOCOL;
        pthread_mutex_lock(&s->mu);
        if (st == MCP_OK && !p->done) {
            st = MCP_PROTOCOL;
            snprintf(why, size, "its HTTP answer held no response to the request");
        }
    } else {
        if (conn_send(c, msg, why, size) != 0) {
            pthread_mutex_lock(&s->mu);
            /* a write fails when the server is gone: wait (briefly) for the
             * reader to see it, whose account names the exit and has read
             * the server's last stderr lines */
            uint64_t until = now_ms() + DRAIN_MS + 600;
            while (!c->dead && now_ms() < until) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_nsec += 20000000L;
                ts.tv_sec += ts.tv_nsec / 1000000000L;
                ts.tv_nsec %= 1000000000L;
                pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            }
            if (c->dead)
                snprintf(why, size, "%s", c->why);
            unlink_pending(s, p);
            pthread_mutex_unlock(&s->mu);
            json_decref(msg);
            free(p);
            return MCP_DEAD;
        }
        pthread_mutex_lock(&s->mu);
        while (!p->done) {
            if (cancel && cancel(cancel_ctx)) {
                st = MCP_CANCELLED;
                break;
            }
            uint64_t t = now_ms();
            if (t >= deadline) {
                st = MCP_TIMEOUT;
                break;
            }
            uint64_t wait = deadline - t < 50 ? deadline - t : 50;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += (long)(wait * 1000000u);
            ts.tv_sec += ts.tv_nsec / 1000000000L;
            ts.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        }
    }
    /* s->mu is held; a progress callback for it may still run: wait for it */
    p->done = true;
    while (p->busy > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    unlink_pending(s, p);
    bool conn_alive = s->kind == MCP_HTTP || (c && !c->dead);
    pthread_mutex_unlock(&s->mu);
    json_decref(msg);
    if (st == MCP_CANCELLED || st == MCP_TIMEOUT) {
        char secs[32];
        fmt_secs(timeout_ms, secs, sizeof secs);
        if (st == MCP_TIMEOUT)
            snprintf(why, size, "timed out after %s", secs);
        else
            snprintf(why, size, "cancelled");
        if (conn_alive && strcmp(method, "initialize") != 0) { /* never cancel initialize */
            json_t *n = json_pack("{s:s, s:s, s:{s:I, s:s}}", "jsonrpc", "2.0", "method",
                                  "notifications/cancelled", "params", "requestId",
                                  (json_int_t)p->id, "reason",
                                  st == MCP_TIMEOUT ? "timed out" : "cancelled by the user");
            char w2[200];
            if (n)
                send_msg(s, c, n, w2, sizeof w2);
            json_decref(n);
        }
        json_decref(p->resp);
        free(p);
        return st;
    }
    if (st != MCP_OK) {
        json_decref(p->resp);
        free(p);
        return st;
    }
    if (!p->resp) {
        snprintf(why, size, "%s", p->fail[0] ? p->fail : "it closed the connection");
        free(p);
        return MCP_DEAD;
    }
    json_t *err = json_object_get(p->resp, "error");
    json_t *res = json_object_get(p->resp, "result");
    if (err) {
        const char *m = json_string_value(json_object_get(err, "message"));
        json_t *code = json_object_get(err, "code");
        char *clean = scrubbed(s, m ? m : "", m ? strlen(m) : 0);
        snprintf(why, size, "%s (JSON-RPC error %lld)", clean ? clean : "",
                 (long long)json_integer_value(code));
        free(clean);
        *out = json_incref(err);
        json_decref(p->resp);
        free(p);
        return MCP_RPC_ERROR;
    }
    if (!json_is_object(res)) {
        snprintf(why, size, "its answer has no result object");
        json_decref(p->resp);
        free(p);
        return MCP_PROTOCOL;
    }
    *out = json_incref(res);
    json_decref(p->resp);
    free(p);
    return MCP_OK;
oom_unlink:
    pthread_mutex_lock(&s->mu);
    unlink_pending(s, p);
    pthread_mutex_unlock(&s->mu);
oom:
    json_decref(params);
    json_decref(msg);
    free(p);
    snprintf(why, size, "out of memory");
    return MCP_NOMEM;
}

/* initialize + notifications/initialized on connection c (stdio) or HTTP. */
static int handshake(mcp_server *s, conn *c, char *why, size_t size) {
    json_t *params = json_pack("{s:s, s:{}, s:{s:s, s:s, s:s}}", "protocolVersion",
                               mcp_versions[0], "capabilities", "clientInfo", "name", "weir",
                               "title", "weir agent host", "version", WEIR_VERSION_STRING);
    if (!params) {
        snprintf(why, size, "out of memory");
        return -1;
    }
    json_t *res = NULL;
    char w[300];
    mcp_status st = rpc(s, c, "initialize", params, s->startup_timeout_ms, NULL, NULL, NULL, &res,
                        w, sizeof w);
    if (st != MCP_OK) {
        if (st == MCP_TIMEOUT)
            snprintf(why, size, "it did not answer initialize within %ld ms "
                                "(startup_timeout_ms)", s->startup_timeout_ms);
        else
            snprintf(why, size, "initialize failed: %s", w);
        json_decref(res);
        return -1;
    }
    const char *v = json_string_value(json_object_get(res, "protocolVersion"));
    bool known = false;
    for (size_t i = 0; v && mcp_versions[i]; i++)
        known = known || !strcmp(v, mcp_versions[i]);
    if (!known) {
        snprintf(why, size, "it answered protocol version '%s', which weir does not speak "
                            "(weir speaks %s, %s, %s and %s)", v ? v : "(none)", mcp_versions[0],
                 mcp_versions[1], mcp_versions[2], mcp_versions[3]);
        json_decref(res);
        return -1;
    }
    pthread_mutex_lock(&s->mu);
    snprintf(s->version, sizeof s->version, "%s", v);
    json_decref(s->caps);
    s->caps = json_incref(json_object_get(res, "capabilities"));
    pthread_mutex_unlock(&s->mu);
    if (s->kind == MCP_HTTP)
        mcp_http_set_version(s->http, v);
    json_decref(res);
    json_t *n = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/initialized");
    int rc = n ? send_msg(s, c, n, w, sizeof w) : -1;
    json_decref(n);
    if (rc != 0) {
        snprintf(why, size, "cannot send notifications/initialized: %s", w);
        return -1;
    }
    return 0;
}

/*
 * Start (the caller set s->starting under s->mu and released it).  On
 * success s->c / s->up are set.
 */
static int start_locked_out(mcp_server *s, char *why, size_t size) {
    conn *c = NULL;
    if (s->kind == MCP_STDIO) {
        c = conn_open(s, why, size);
        if (!c)
            return -1;
        pthread_mutex_lock(&s->mu);
        c->refs++;
        pthread_mutex_unlock(&s->mu);
    } else {
        mcp_http_reset(s->http);
    }
    int rc = handshake(s, c, why, size);
    pthread_mutex_lock(&s->mu);
    if (c)
        c->refs--;
    if (rc == 0 && c && c->dead) {
        snprintf(why, size, "%s", c->why);
        rc = -1;
    }
    if (rc == 0) {
        s->c = c;
        s->up = true;
        s->session_gen++;
        s->list_changed = true; /* a (re)start: the tools may differ */
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (rc != 0 && c)
        conn_retire(s, c);
    return rc;
}

int mcp_server_start(mcp_server *s, char *why, size_t size) {
    pthread_mutex_lock(&s->mu);
    while (s->starting)
        pthread_cond_wait(&s->cv, &s->mu);
    if (s->up) {
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    s->starting = true;
    conn *old = s->c;
    s->c = NULL;
    pthread_mutex_unlock(&s->mu);
    conn_retire(s, old);
    int rc = start_locked_out(s, why, size);
    pthread_mutex_lock(&s->mu);
    s->starting = false;
    if (rc != 0) {
        s->deaths++;
        s->retry_at = now_ms() + (backoff_ms(s->deaths) > BACKOFF_BASE_MS ? backoff_ms(s->deaths)
                                                                          : BACKOFF_BASE_MS);
        snprintf(s->down_why, sizeof s->down_why, "%s", why);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* A running connection for a request (refs taken), starting one if allowed;
 * *gen: the HTTP session's generation the request runs in. */
static mcp_status acquire(mcp_server *s, conn **out, uint64_t *gen, char *why, size_t size) {
    *out = NULL;
    pthread_mutex_lock(&s->mu);
    while (s->starting)
        pthread_cond_wait(&s->cv, &s->mu);
    if (!s->up) {
        uint64_t t = now_ms();
        if (t < s->retry_at) {
            snprintf(why, size, "it is not running (%s); the next start is in %llu ms",
                     s->down_why[0] ? s->down_why : "it failed", (unsigned long long)(s->retry_at - t));
            pthread_mutex_unlock(&s->mu);
            return MCP_DOWN;
        }
        s->starting = true;
        conn *old = s->c;
        s->c = NULL;
        pthread_mutex_unlock(&s->mu);
        conn_retire(s, old);
        char w[600];
        int rc = start_locked_out(s, w, sizeof w);
        pthread_mutex_lock(&s->mu);
        s->starting = false;
        pthread_cond_broadcast(&s->cv);
        if (rc != 0) {
            s->deaths++;
            s->retry_at = now_ms() + (backoff_ms(s->deaths) > BACKOFF_BASE_MS
                                          ? backoff_ms(s->deaths)
                                          : BACKOFF_BASE_MS);
            snprintf(s->down_why, sizeof s->down_why, "%.280s", w);
            snprintf(why, size, "it could not be started again: %.500s", w);
            pthread_mutex_unlock(&s->mu);
            return MCP_DOWN;
        }
        say(s, 2, "MCP server '%s' was started again", s->name);
    }
    conn *c = s->c;
    if (c)
        c->refs++;
    *gen = s->session_gen;
    pthread_mutex_unlock(&s->mu);
    *out = c;
    return MCP_OK;
}

/* The end of a request that ran in session generation `gen`.  An HTTP
 * session gone (404) is initialized again next time, unless a concurrent
 * request already did (a later generation): a stale 404 must not end the
 * new session too, or concurrent calls would replace each other's. */
static void release(mcp_server *s, conn *c, mcp_status st, uint64_t gen) {
    pthread_mutex_lock(&s->mu);
    if (c)
        c->refs--;
    if (st == MCP_OK || st == MCP_RPC_ERROR)
        s->deaths = 0;
    if (s->kind == MCP_HTTP && st == MCP_DOWN && gen == s->session_gen)
        s->up = false;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

mcp_status mcp_server_request(mcp_server *s, const char *method, json_t *params, long timeout_ms,
                              mcp_cancel_cb cancel, void *cancel_ctx, void *progress_ctx,
                              json_t **out, char *why, size_t size) {
    *out = NULL;
    conn *c = NULL;
    uint64_t gen = 0;
    mcp_status st = acquire(s, &c, &gen, why, size);
    if (st != MCP_OK) {
        json_decref(params);
        return st;
    }
    json_t *keep = s->kind == MCP_HTTP && params ? json_deep_copy(params) : NULL;
    st = rpc(s, c, method, params, timeout_ms, cancel, cancel_ctx, progress_ctx, out, why, size);
    if (st == MCP_DOWN && s->kind == MCP_HTTP) {
        /* the session expired (404): initialize again and retry once */
        release(s, c, st, gen);
        say(s, 2, "MCP server '%s': its session ended; initializing again", s->name);
        st = acquire(s, &c, &gen, why, size);
        if (st == MCP_OK)
            st = rpc(s, c, method, keep ? json_incref(keep) : NULL, timeout_ms, cancel,
                     cancel_ctx, progress_ctx, out, why, size);
    }
    json_decref(keep);
    release(s, c, st, gen);
    if (s->kind == MCP_HTTP)
        rate_flush(s, true); /* no reader thread: the request's own summary */
    return st;
}

int mcp_server_notify(mcp_server *s, const char *method, json_t *params) {
    json_t *n = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    if (n && params)
        json_object_set_new(n, "params", params);
    else
        json_decref(params);
    conn *c = NULL;
    pthread_mutex_lock(&s->mu);
    bool up = s->up;
    if (up && s->c)
        (c = s->c)->refs++;
    pthread_mutex_unlock(&s->mu);
    char why[200];
    int rc = n && up ? send_msg(s, c, n, why, sizeof why) : -1;
    release(s, c, MCP_PROTOCOL, 0);
    json_decref(n);
    return rc;
}

mcp_status mcp_server_list_tools(mcp_server *s, long timeout_ms, json_t **tools, char *why,
                                 size_t size) {
    *tools = json_array();
    if (!*tools) {
        snprintf(why, size, "out of memory");
        return MCP_NOMEM;
    }
    char *cursor = NULL;
    for (int page = 0; page < MAX_PAGES; page++) {
        json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : NULL;
        json_t *res = NULL;
        mcp_status st = mcp_server_request(s, "tools/list", params, timeout_ms, NULL, NULL, NULL,
                                           &res, why, size);
        if (st != MCP_OK) {
            json_decref(res);
            free(cursor);
            json_decref(*tools);
            *tools = NULL;
            return st;
        }
        json_t *list = json_object_get(res, "tools");
        if (json_is_array(list))
            json_array_extend(*tools, list);
        const char *next = json_string_value(json_object_get(res, "nextCursor"));
        bool again = next && *next && (!cursor || strcmp(cursor, next) != 0);
        free(cursor);
        cursor = again ? strdup(next) : NULL;
        json_decref(res);
        if (!cursor)
            return MCP_OK;
    }
    free(cursor);
    say(s, 1, "MCP server '%s': tools/list gave more than %d pages; the rest is ignored",
        s->name, MAX_PAGES);
    return MCP_OK;
}

const char *mcp_server_version(mcp_server *s, char *buf, size_t size) {
    pthread_mutex_lock(&s->mu);
    snprintf(buf, size, "%s", s->version);
    pthread_mutex_unlock(&s->mu);
    return buf;
}

json_t *mcp_server_capabilities(mcp_server *s) {
    pthread_mutex_lock(&s->mu);
    json_t *c = json_incref(s->caps);
    pthread_mutex_unlock(&s->mu);
    return c;
}

bool mcp_server_take_list_changed(mcp_server *s) {
    pthread_mutex_lock(&s->mu);
    bool v = s->list_changed;
    s->list_changed = false;
    pthread_mutex_unlock(&s->mu);
    return v;
}

uint64_t mcp_server_list_changed_count(mcp_server *s) {
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->list_changed_n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void mcp_server_destroy(mcp_server *s) {
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    conn *c = s->c;
    s->c = NULL;
    s->up = false;
    pthread_mutex_unlock(&s->mu);
    conn_retire(s, c);
    rate_flush(s, true);
    if (s->http) {
        mcp_http_end_session(s->http);
        mcp_http_destroy(s->http);
    }
    for (size_t i = 0; i < STDERR_RING; i++)
        free(s->ring[i]);
    json_decref(s->caps);
    strv_free(s->argv);
    strv_free(s->envp);
    strv_free(s->headers);
    free(s->cwd);
    free(s->url);
    free(s->name);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->ring_mu);
    free(s);
}
