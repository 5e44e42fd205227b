/*
 * core/log/store_memory.c - the memory store (weir/store.h, docs/stores.md):
 * each session's JSONL lines in one buffer of this process, kept until the
 * process exits (a closed session can be reopened), keyed by session id.
 * One writer per session id in the process; readers take a copy.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

typedef struct mem_log {
    struct mem_log *next;
    char *id;
    char *buf; /* the lines */
    size_t len, cap;
    bool writer; /* an open writer holds it */
} mem_log;

typedef struct mem_session {
    mem_log *log;
    bool writer;
} mem_session;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mem_log *logs;

static mem_log *find(const char *id) {
    for (mem_log *l = logs; l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return l;
    return NULL;
}

static int mem_open(void *self, const char *id, const char *path, uint32_t flags, void **handle,
                    uint64_t *epoch, weir_error *err) {
    (void)self;
    (void)path;
    *handle = NULL;
    if (epoch)
        *epoch = 0;
    if (!id || !*id)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "memory store: a session id is required");
    bool readonly = (flags & WEIR_STORE_READONLY) != 0;
    mem_session *s = weir__calloc(1, sizeof *s);
    if (!s)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session %s: out of memory", id);
    pthread_mutex_lock(&mu);
    int rc = WEIR_OK;
    mem_log *l = find(id);
    if (!l && readonly) {
        rc = weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                       "session %s: not in the memory store", id);
    } else if (!l) {
        l = weir__calloc(1, sizeof *l);
        if (!l || !(l->id = weir__strdup(id))) {
            weir__free(l);
            l = NULL;
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session %s: out of memory", id);
        } else {
            l->next = logs;
            logs = l;
        }
    }
    if (rc == WEIR_OK && !readonly && l->writer)
        rc = weir__err(err, WEIR_E_BUSY, NULL, NULL,
                       "session %s is open for writing by this process (memory store)", id);
    if (rc == WEIR_OK) {
        s->log = l;
        s->writer = !readonly;
        if (!readonly)
            l->writer = true;
    }
    pthread_mutex_unlock(&mu);
    if (rc != WEIR_OK) {
        weir__free(s);
        return rc;
    }
    *handle = s;
    return WEIR_OK;
}

static int mem_read(void *self, void *handle, uint64_t from_seq, char **buf, size_t *len,
                    weir_error *err) {
    (void)self;
    mem_session *s = handle;
    pthread_mutex_lock(&mu);
    mem_log *l = s->log;
    size_t off = 0;
    for (uint64_t i = 0; i < from_seq && off < l->len; i++) {
        const char *nl = memchr(l->buf + off, '\n', l->len - off);
        off = nl ? (size_t)(nl - l->buf) + 1 : l->len;
    }
    size_t n = l->len - off;
    char *b = weir__malloc(n + 1);
    if (b) {
        if (n)
            memcpy(b, l->buf + off, n);
        b[n] = '\0';
    }
    pthread_mutex_unlock(&mu);
    if (!b)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session %s: out of memory", l->id);
    *buf = b;
    *len = n;
    return WEIR_OK;
}

static void mem_buffer_free(void *self, char *buf) {
    (void)self;
    weir__free(buf);
}

static int mem_append(void *self, void *handle, uint64_t epoch, uint64_t first_seq, size_t count,
                      const char *lines, size_t n, uint32_t flags, weir_error *err) {
    (void)self;
    (void)epoch;
    (void)first_seq;
    (void)count;
    (void)flags;
    mem_session *s = handle;
    if (!s->writer)
        return weir__err(err, WEIR_E_STATE, NULL, NULL, "session %s: opened read-only",
                         s->log->id);
    pthread_mutex_lock(&mu);
    mem_log *l = s->log;
    int rc = WEIR_OK;
    if (l->len + n > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->len + n)
            cap *= 2;
        char *grown = weir__realloc(l->buf, cap);
        if (!grown)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session %s: out of memory", l->id);
        else {
            l->buf = grown;
            l->cap = cap;
        }
    }
    if (rc == WEIR_OK) {
        memcpy(l->buf + l->len, lines, n);
        l->len += n;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static int mem_sync(void *self, void *handle, weir_error *err) {
    (void)self;
    (void)handle;
    (void)err;
    return WEIR_OK; /* memory is as durable as it gets */
}

static int mem_truncate(void *self, void *handle, size_t keep, weir_error *err) {
    (void)self;
    (void)err;
    mem_session *s = handle;
    pthread_mutex_lock(&mu);
    if (keep < s->log->len)
        s->log->len = keep;
    pthread_mutex_unlock(&mu);
    return WEIR_OK;
}

static void mem_close(void *self, void *handle) {
    (void)self;
    mem_session *s = handle;
    if (!s)
        return;
    pthread_mutex_lock(&mu);
    if (s->writer)
        s->log->writer = false;
    pthread_mutex_unlock(&mu);
    weir__free(s);
}

static int mem_list(void *self, const char *where, json_t **sessions, weir_error *err) {
    (void)self;
    (void)where;
    json_t *out = json_array();
    bool oom = !out;
    pthread_mutex_lock(&mu);
    for (mem_log *l = logs; l && !oom; l = l->next)
        oom = json_array_append_new(out, json_pack("{s:s, s:b}", "id", l->id, "live",
                                                   l->writer)) != 0;
    pthread_mutex_unlock(&mu);
    if (oom) {
        json_decref(out);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "memory store: out of memory");
    }
    *sessions = out;
    return WEIR_OK;
}

static int mem_probe(void *self, const char *id, const char *path, bool *live, long *pid,
                     weir_error *err) {
    (void)self;
    (void)path;
    pthread_mutex_lock(&mu);
    mem_log *l = id ? find(id) : NULL;
    *live = l && l->writer;
    pthread_mutex_unlock(&mu);
    if (pid)
        *pid = *live ? (long)getpid() : 0;
    if (!l)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL, "session %s: not in the memory store",
                         id ? id : "(null)");
    return WEIR_OK;
}

/* The last complete line of type `type` (its seq from the envelope prefix,
 * as the file store answers): the lines read back from the end. */
static int mem_find_last(void *self, void *handle, const char *type, uint64_t *seq,
                         weir_error *err) {
    (void)self;
    mem_session *s = handle;
    if (!s || !type || !seq)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "memory store: find_last: handle, type and seq are required");
    if (!weir__store_type_ok(type))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "session %s: find_last: event type '%s' is not one a store can find "
                         "(printable ASCII without '\"' or '\\')",
                         s->log->id, type);
    size_t tlen = strlen(type);
    bool found = false;
    pthread_mutex_lock(&mu);
    const mem_log *l = s->log;
    /* end: the newline that ends the line looked at (a torn last line,
     * after the last newline, is never one) */
    const char *end = l->len ? memrchr(l->buf, '\n', l->len) : NULL;
    while (end && !found) {
        const char *nl = end > l->buf ? memrchr(l->buf, '\n', (size_t)(end - l->buf)) : NULL;
        const char *start = nl ? nl + 1 : l->buf;
        found = weir__store_line_type(start, (size_t)(end - start), type, tlen, seq);
        end = nl;
    }
    pthread_mutex_unlock(&mu);
    if (!found)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL, "session %s: no %s line",
                         s->log->id, type);
    return WEIR_OK;
}

/* The lines of the ranges, counted from the first (a copy, as mem_read's). */
static int mem_read_ranges(void *self, void *handle, const uint64_t *ranges, size_t n,
                           char **buf, size_t *len, weir_error *err) {
    (void)self;
    mem_session *s = handle;
    if (!s || (n && !ranges) || !buf || !len)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "memory store: read_ranges: handle, ranges and buffer are required");
    *buf = NULL;
    *len = 0;
    if (!weir__store_ranges_ok(ranges, n))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "session %s: read_ranges: the ranges must be ascending and disjoint, "
                         "each first <= last",
                         s->log->id);
    pthread_mutex_lock(&mu);
    const mem_log *l = s->log;
    /* two walks: the bytes wanted, then the copy */
    char *b = NULL;
    size_t total = 0;
    for (int copy = 0; copy < 2; copy++) {
        if (copy && !(b = weir__malloc(total + 1)))
            break;
        size_t off = 0, r = 0, at = 0;
        for (uint64_t line = 0; off < l->len && r < n; line++) {
            const char *nl = memchr(l->buf + off, '\n', l->len - off);
            size_t e = nl ? (size_t)(nl - l->buf) + 1 : l->len;
            while (r < n && ranges[2 * r + 1] < line)
                r++;
            if (r < n && line >= ranges[2 * r]) {
                if (copy)
                    memcpy(b + at, l->buf + off, e - off);
                at += e - off;
            }
            off = e;
        }
        total = at;
    }
    pthread_mutex_unlock(&mu);
    if (!b)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session %s: out of memory", s->log->id);
    b[total] = '\0';
    *buf = b;
    *len = total;
    return WEIR_OK;
}

static const weir_store memory_store = {
    .struct_size = sizeof(weir_store),
    .open = mem_open,
    .read = mem_read,
    .buffer_free = mem_buffer_free,
    .append = mem_append,
    .sync = mem_sync,
    .truncate = mem_truncate,
    .close = mem_close,
    .list = mem_list,
    .probe = mem_probe,
    .find_last = mem_find_last,
    .read_ranges = mem_read_ranges,
};

weir__store_ref weir__store_memory(void) { return (weir__store_ref){.vt = &memory_store}; }
