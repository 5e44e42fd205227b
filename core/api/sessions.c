/*
 * core/api/sessions.c - reading a session's log from outside an agent: the
 * checks, derivations and envelopes of a log file (weir_log_*) or of a
 * session in the host's shared store (weir_host_log_*), and the store's
 * list of sessions (`weir log`, `weir sessions`; docs/session-log.md).
 * The reader and checker themselves are core/log/log_check.c; a log file is
 * read as a stream (core/log/log_stream.h), never whole.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "host_int.h"
#include "log_stream.h"
#include "session_log.h"
#include "sessions.h"
#include "store.h"

int weir_log_check(const char *path, json_t **report, weir_error *err) {
    if (!path || !report)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log check: path and report are required");
    *report = NULL;
    int fd = -1;
    int rc = weir__log_open_read(path, &fd, err);
    if (rc == WEIR_OK) /* a stream: the check holds the longest line, not the file */
        rc = weir__log_check_fd(fd, NULL, NULL, true, report, NULL, err);
    if (fd >= 0)
        close(fd);
    if (rc == WEIR_E_NOMEM)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log check %s: out of memory", path);
    else if (rc == WEIR_E_IO && err && strncmp(err->text, "log check: read:", 16) == 0)
        rc = weir__err(err, WEIR_E_IO, NULL, NULL, "log check %s: %s", path, err->text + 11);
    return rc;
}

int weir_log_summary(const char *path, json_t **summary, weir_error *err) {
    if (!path || !summary)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log summary: path and summary are required");
    *summary = NULL;
    int fd = -1;
    int rc = weir__log_open_read(path, &fd, err);
    if (rc == WEIR_OK)
        rc = weir__log_summary_fd(fd, path, summary, err);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The derived messages of an open log (new reference), or E_NOMEM naming `what`. */
static int derive_of(weir__log *log, const char *what, json_t **messages, weir_error *err) {
    *messages = weir__log_derive(log);
    weir__log_close(log);
    return *messages ? WEIR_OK
                     : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log derive %s: out of memory",
                                 what);
}

static bool collect(json_t *ev, size_t off, size_t n, void *ud) {
    (void)off;
    (void)n;
    return json_array_append(ud, ev) == 0;
}

/* The envelopes of the log buffer `buf` (`len` bytes) named `what`, as the
 * one reader accepts them in its one pass, or what an open would refuse. */
static int events_of(const char *what, const char *buf, size_t len, weir__type_known_fn known,
                     void *known_ud, json_t **events, weir_error *err) {
    json_t *out = json_array(), *report = NULL;
    int rc = out ? weir__log_check_each(buf, len, known, known_ud, collect, out, &report, err)
                 : WEIR_E_NOMEM;
    if (rc == WEIR_OK && !json_is_true(json_object_get(report, "ok")))
        rc = weir__log_refuse(what, report, err);
    json_decref(report);
    if (rc == WEIR_E_NOMEM)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log events %s: out of memory", what);
    if (rc != WEIR_OK) {
        json_decref(out);
        return rc;
    }
    *events = out;
    return WEIR_OK;
}

int weir_log_derive(const char *path, json_t **messages, weir_error *err) {
    if (!path || !messages)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "log derive: path and messages are required");
    *messages = NULL;
    /* the one reader over the file as a stream: the surface it folds, not
     * the file, is what it holds */
    int fd = -1;
    json_t *report = NULL;
    int rc = weir__log_open_read(path, &fd, err);
    if (rc == WEIR_OK)
        rc = weir__log_check_fd(fd, NULL, NULL, false, &report, messages, err);
    if (fd >= 0)
        close(fd);
    if (rc == WEIR_OK && !json_is_true(json_object_get(report, "ok")))
        rc = weir__log_refuse(path, report, err);
    json_decref(report);
    if (rc == WEIR_E_NOMEM)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log derive %s: out of memory", path);
    if (rc != WEIR_OK) {
        json_decref(*messages);
        *messages = NULL;
    }
    return rc;
}

/* The second pass of weir_log_each: the first `events` envelopes of the
 * log file `fd` (all that the one reader accepted), read again as a
 * stream, each handed to `fn` (one envelope held at a time). */
static int hand_events(const char *path, int fd, json_int_t events, weir_log_event_fn fn,
                       void *ud, weir_error *err) {
    weir__log_stream r;
    weir__log_stream_init(&r, fd, 0);
    int rc = WEIR_OK;
    for (json_int_t seq = 0; seq < events;) {
        const char *p;
        size_t n, off = 0, len;
        uint64_t start;
        bool torn = false;
        json_error_t jerr;
        json_t *ev = NULL;
        if (weir__log_stream_line(&r, &p, &n, &start) && p)
            ev = weir__log_read_line(p, n, &off, &len, &torn, &jerr);
        if (!ev && r.failed == ENOMEM)
            rc = WEIR_E_NOMEM;
        else if (!ev && r.failed)
            rc = weir__err(err, WEIR_E_IO, NULL, NULL, "log events %s: read: %s", path,
                           strerror(r.failed));
        else if (!ev && !torn && json_error_code(&jerr) == json_error_out_of_memory)
            rc = WEIR_E_NOMEM;
        else if (!ev || json_integer_value(json_object_get(ev, "seq")) != seq)
            rc = weir__err(err, WEIR_E_IO, NULL, NULL,
                           "log events %s: seq %" JSON_INTEGER_FORMAT
                           " is no longer what the check read (the file changed)",
                           path, seq);
        if (rc != WEIR_OK) {
            json_decref(ev);
            break;
        }
        bool go = fn(ev, ud);
        json_decref(ev);
        if (!go)
            break;
        seq++;
    }
    weir__log_stream_free(&r);
    return rc;
}

int weir_log_each(const char *path, weir_log_event_fn fn, void *user_data, weir_error *err) {
    if (!path || !fn)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log events: path and fn are required");
    /* the one reader over the file as a stream (it holds the longest line
     * and the surface), then, the log accepted, the file again */
    int fd = -1;
    json_t *report = NULL;
    int rc = weir__log_open_read(path, &fd, err);
    if (rc == WEIR_OK)
        rc = weir__log_check_fd(fd, NULL, NULL, false, &report, NULL, err);
    if (rc == WEIR_OK && !json_is_true(json_object_get(report, "ok")))
        rc = weir__log_refuse(path, report, err);
    json_int_t events = weir__json_int(report, "events", 0);
    json_decref(report);
    if (rc == WEIR_OK)
        rc = hand_events(path, fd, events, fn, user_data, err);
    if (fd >= 0)
        close(fd);
    if (rc == WEIR_E_NOMEM)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log events %s: out of memory", path);
    else if (rc == WEIR_E_IO && err && strncmp(err->text, "log check: read:", 16) == 0)
        rc = weir__err(err, WEIR_E_IO, NULL, NULL, "log events %s: %s", path, err->text + 11);
    return rc;
}

typedef struct collected {
    json_t *events;
    bool oom;
} collected;

static bool append_event(json_t *ev, void *ud) {
    collected *c = ud;
    c->oom = json_array_append(c->events, ev) != 0;
    return !c->oom;
}

int weir_log_events(const char *path, json_t **events, weir_error *err) {
    if (!path || !events)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log events: path and events are required");
    *events = NULL;
    collected c = {json_array(), false};
    int rc = c.events ? weir_log_each(path, append_event, &c, err) : WEIR_E_NOMEM;
    if (rc == WEIR_OK && c.oom)
        rc = WEIR_E_NOMEM;
    if (rc == WEIR_E_NOMEM)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log events %s: out of memory", path);
    if (rc != WEIR_OK) {
        json_decref(c.events);
        return rc;
    }
    *events = c.events;
    return WEIR_OK;
}

/* ---- the same reads of a session in the host's session.store ------------- */

static bool host_type_known(const char *type, void *ud) {
    return weir__host_event_type(ud, type, NULL);
}

/* The store session.store names for `host` into *store (*name: its name),
 * refusing the file store, whose logs are read as files. */
static int host_store(const weir_host *host, const char *id, const char **name,
                      weir__store_ref *store, weir_error *err) {
    if (!host || !id || !weir_session_id_valid(id))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "log: a host and a valid session id are required");
    int rc = weir__session_store(host, "log", name, store, err);
    if (rc != WEIR_OK)
        return rc;
    if (store->vt == weir__store_file().vt)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "log: session %s is in the file store: read its log file", id);
    return WEIR_OK;
}

static int host_open(const weir_host *host, const char *id, weir__log **log, weir_error *err) {
    const char *name;
    weir__store_ref store;
    int rc = host_store(host, id, &name, &store, err);
    if (rc == WEIR_OK)
        rc = weir__log_open_store(name, store, id, NULL, true, WEIR__FSYNC_NONE, host_type_known,
                                  (void *)(uintptr_t)host, log, err);
    return rc;
}

/* A session of the host's store read whole (read-only: no lock, no lease). */
typedef struct host_buffer {
    weir__store_ref store;
    void *handle;
    char *buf;
    size_t len;
    char *what; /* the name messages give it: "<store>:<id>" */
} host_buffer;

static int host_read(const weir_host *host, const char *id, host_buffer *b, weir_error *err) {
    const char *name;
    int rc = host_store(host, id, &name, &b->store, err);
    if (rc != WEIR_OK)
        return rc;
    if (!(b->what = weir__asprintf("%s:%s", name ? name : "store", id)))
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log %s: out of memory", id);
    uint64_t epoch = 0;
    const weir_store *vt = b->store.vt;
    rc = vt->open(b->store.self, id, NULL, WEIR_STORE_READONLY, &b->handle, &epoch, err);
    return rc == WEIR_OK ? vt->read(b->store.self, b->handle, 0, &b->buf, &b->len, err) : rc;
}

/* Release what host_read took: the buffer, then the session. */
static void host_done(host_buffer *b) {
    if (b->buf)
        b->store.vt->buffer_free(b->store.self, b->buf);
    if (b->handle && b->store.vt->close)
        b->store.vt->close(b->store.self, b->handle);
    weir__free(b->what);
}

int weir_host_log_derive(const weir_host *host, const char *id, json_t **messages,
                         weir_error *err) {
    if (!messages)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log derive: messages is required");
    *messages = NULL;
    weir__log *log = NULL;
    int rc = host_open(host, id, &log, err);
    return rc != WEIR_OK ? rc : derive_of(log, id, messages, err);
}

int weir_host_log_events(const weir_host *host, const char *id, json_t **events,
                         weir_error *err) {
    if (!events)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log events: events is required");
    *events = NULL;
    host_buffer b = {0};
    int rc = host_read(host, id, &b, err);
    if (rc == WEIR_OK)
        rc = events_of(b.what, b.buf, b.len, host_type_known, (void *)(uintptr_t)host, events,
                       err);
    host_done(&b);
    return rc;
}

int weir_host_log_check(const weir_host *host, const char *id, json_t **report,
                        weir_error *err) {
    if (!report)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log check: report is required");
    *report = NULL;
    host_buffer b = {0};
    int rc = host_read(host, id, &b, err);
    if (rc == WEIR_OK)
        rc = weir__log_check_buffer(b.buf, b.len, host_type_known, (void *)(uintptr_t)host, true,
                                    report, err);
    host_done(&b);
    return rc;
}

int weir_host_sessions(const weir_host *host, json_t **sessions, weir_error *err) {
    if (!sessions)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "sessions: sessions is required");
    *sessions = NULL;
    const char *name;
    weir__store_ref store;
    int rc = host_store(host, "list", &name, &store, err);
    if (rc != WEIR_OK)
        return rc;
    if (!store.vt->list)
        return weir__err(err, WEIR_E_UNSUPPORTED, NULL, NULL,
                         "sessions: store '%s' cannot list its sessions", name);
    return store.vt->list(store.self, NULL, sessions, err);
}
