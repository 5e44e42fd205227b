/*
 * core/log/log_repair.c - `weir log --repair`: mend what older weirs wrote and
 * the one reader now refuses (docs/session-log.md, "Repair").
 *
 * One repair so far: a reply that repeated a tool-call id (weir took ids
 * as the server sent them until issue #31).  Such a log holds two tool_call
 * blocks with one id in an assistant/message, and the tool/call and
 * tool/result events of both under that id, so the reader refuses it
 * ("tool_call id 'c1' repeats one of step 1") and the session can never be
 * opened again.  The repair gives the blocks the ids the writer now gives
 * them (weir__calls_unique: "<id>_<n>"), and the step's later events the
 * id of the call they belong to, in order: the k-th tool/call with the id
 * is the k-th block, a tool/result answers the oldest of those calls still
 * without one, any other event with the id (attempts, jobs, progress)
 * belongs to the latest call.  An idempotency key that ends in ":<id>" ends
 * in ":<new id>".
 *
 * The file is rewritten whole, never in place: the repaired text goes to a
 * new file beside it, which is synced, the original is kept as
 * "<file>.orig", and the new file is renamed over the log, all under the
 * writer's lock.  Unchanged lines are copied byte for byte.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assistant_stream.h"
#include "session_log.h"
#include "store.h"
#include "weir/host.h"

/* The open step's ids: {orig: {"offers": [new...], "called": n,
 * "pending": [new...], "current": new}} for each id a rename touched. */
typedef struct mend {
    json_t *ids;      /* owned; reset at every step/start */
    json_t *renamed;  /* owned: the report's [{seq, turn, step, was, id}] */
    bool oom;
} mend;

static json_t *id_state(mend *m, const char *orig) {
    return json_object_get(m->ids, orig);
}

/* Replace a ":<was>" ending of the event's data.idempotency_key. */
static bool mend_key(json_t *data, const char *was, const char *now) {
    const char *key = weir__json_str(data, "idempotency_key", NULL);
    size_t kn = key ? strlen(key) : 0, wn = strlen(was);
    if (!key || kn < wn + 1 || key[kn - wn - 1] != ':' || strcmp(key + kn - wn, was) != 0)
        return true;
    char *fresh = weir__asprintf("%.*s%s", (int)(kn - wn), key, now);
    bool ok = fresh && json_object_set_new(data, "idempotency_key", json_string(fresh)) == 0;
    weir__free(fresh);
    return ok;
}

/* Note a rename in the report. */
static void note(mend *m, json_int_t seq, const json_t *data, const char *was, const char *now) {
    if (json_array_append_new(m->renamed,
                              json_pack("{s:I, s:O?, s:O?, s:s, s:s}", "seq", seq, "turn",
                                        json_object_get(data, "turn"), "step",
                                        json_object_get(data, "step"), "was", was, "id", now)) != 0)
        m->oom = true;
}

/* The assistant/message of a step: rename its repeated ids; record which
 * new id each block of an original id got. */
static bool mend_message(mend *m, json_int_t seq, json_t *data) {
    json_t *content = json_object_get(json_object_get(data, "message"), "content");
    json_t *renamed = json_array();
    if (!renamed || weir__calls_unique(content, renamed) != 0) {
        json_decref(renamed);
        m->oom = true;
        return false;
    }
    bool changed = json_array_size(renamed) > 0;
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        if (!changed || strcmp(weir__json_str(b, "type", ""), "tool_call"))
            continue;
        const char *now = weir__json_str(b, "id", ""), *was = now;
        size_t k;
        json_t *r;
        json_array_foreach(renamed, k, r) {
            if ((size_t)json_integer_value(json_object_get(r, "block")) == i)
                was = weir__json_str(r, "was", "");
        }
        json_t *st = id_state(m, was);
        if (!st && (json_object_set_new(m->ids, was,
                                        json_pack("{s:[], s:i, s:[]}", "offers", "called", 0,
                                                  "pending")) != 0 ||
                    !(st = id_state(m, was)))) {
            m->oom = true;
            break;
        }
        if (json_array_append_new(json_object_get(st, "offers"), json_string(now)) != 0)
            m->oom = true;
        if (was != now && strcmp(was, now) != 0)
            note(m, seq, data, was, now);
    }
    json_decref(renamed);
    return changed;
}

/* A tool/call, tool/result or other event of the step naming `id`: the id
 * of the call it belongs to (borrowed from the state), or NULL. */
static const char *belongs(mend *m, const char *type, const char *id) {
    json_t *st = id ? id_state(m, id) : NULL;
    if (!st)
        return NULL;
    json_t *offers = json_object_get(st, "offers"), *pending = json_object_get(st, "pending");
    if (!strcmp(type, "tool/call")) {
        json_int_t k = json_integer_value(json_object_get(st, "called"));
        json_t *now = json_array_get(offers, (size_t)k);
        if (!now || json_object_set_new(st, "called", json_integer(k + 1)) != 0 ||
            json_array_append(pending, now) != 0 || json_object_set(st, "current", now) != 0)
            return NULL;
        return json_string_value(now);
    }
    if (!strcmp(type, "tool/result")) {
        json_t *now = json_array_get(pending, 0);
        if (!now || json_object_set(st, "current", now) != 0)
            return NULL;
        json_array_remove(pending, 0); /* "current" holds it now */
        return json_string_value(json_object_get(st, "current"));
    }
    json_t *now = json_object_get(st, "current");
    return json_string_value(now ? now : json_array_get(offers, 0));
}

/* Mend one envelope; whether it changed. */
static bool mend_event(mend *m, json_t *ev) {
    const char *type = weir__json_str(ev, "type", "");
    json_int_t seq = json_integer_value(json_object_get(ev, "seq"));
    json_t *data = json_object_get(ev, "data");
    if (!strcmp(type, "step/start") || !strcmp(type, "turn/start")) {
        json_object_clear(m->ids);
        return false;
    }
    if (!strcmp(type, "assistant/message"))
        return mend_message(m, seq, data);
    if (json_object_size(m->ids) == 0 || json_is_object(json_object_get(ev, "surface_op")))
        return false;
    bool changed = false;
    if (!strcmp(type, "tool/result")) {
        size_t i;
        json_t *b;
        json_array_foreach(json_object_get(json_object_get(data, "message"), "content"), i, b) {
            if (strcmp(weir__json_str(b, "type", ""), "tool_result"))
                continue;
            char *was = weir__strdup(weir__json_str(b, "call_id", ""));
            const char *now = was ? belongs(m, type, was) : NULL;
            if (now && strcmp(now, was) != 0) {
                if (json_object_set_new(b, "call_id", json_string(now)) != 0)
                    m->oom = true;
                note(m, seq, data, was, now);
                changed = true;
            }
            weir__free(was);
        }
        return changed;
    }
    const char *id = weir__json_str(data, "call_id", NULL);
    char *was = id ? weir__strdup(id) : NULL;
    const char *now = was ? belongs(m, type, was) : NULL;
    if (now && strcmp(now, was) != 0) {
        if (json_object_set_new(data, "call_id", json_string(now)) != 0 ||
            !mend_key(data, was, now))
            m->oom = true;
        note(m, seq, data, was, now);
        changed = true;
    }
    weir__free(was);
    return changed;
}

/* Append `n` bytes to the growing text *t. */
static bool put(char **t, size_t *len, size_t *cap, const char *p, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + n + 1)
            c *= 2;
        char *g = weir__realloc(*t, c);
        if (!g)
            return false;
        *t = g;
        *cap = c;
    }
    memcpy(*t + *len, p, n);
    *len += n;
    (*t)[*len] = '\0';
    return true;
}

/* Write `text` to `tmp` (new, 0600), synced. */
static int write_new(const char *tmp, const char *text, size_t len, weir_error *err) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return weir__err(err, WEIR_E_IO, NULL, NULL, "log repair: cannot create %s: %s", tmp,
                         strerror(errno));
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return weir__err(err, WEIR_E_IO, NULL, NULL, "log repair: cannot write %s: %s", tmp,
                             strerror(e));
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return weir__err(err, WEIR_E_IO, NULL, NULL, "log repair: cannot sync %s: %s", tmp,
                         strerror(e));
    }
    return WEIR_OK;
}

/* Sync the directory holding `path`, so the renames survive a crash. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? weir__asprintf("%.*s", slash == path ? 1 : (int)(slash - path), path)
                      : weir__strdup(".");
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    weir__free(dir);
}

/* Replace the log at `path` by `text`: the original stays as path.orig. */
static int replace(const char *path, const char *text, size_t len, char **backup,
                   weir_error *err) {
    char *tmp = weir__asprintf("%s.repair.%ld", path, (long)getpid());
    *backup = weir__asprintf("%s.orig", path);
    if (!tmp || !*backup) {
        weir__free(tmp);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log repair %s: out of memory", path);
    }
    int rc = write_new(tmp, text, len, err);
    if (rc == WEIR_OK && link(path, *backup) != 0) {
        rc = weir__err(err, WEIR_E_IO, NULL, NULL,
                       "log repair: cannot keep the original as %s: %s%s", *backup,
                       strerror(errno), errno == EEXIST ? " (move the older one away first)" : "");
        unlink(tmp);
    }
    if (rc == WEIR_OK && rename(tmp, path) != 0) {
        rc = weir__err(err, WEIR_E_IO, NULL, NULL, "log repair: cannot replace %s: %s", path,
                       strerror(errno));
        unlink(tmp);
        unlink(*backup);
    }
    if (rc == WEIR_OK)
        sync_dir(path);
    weir__free(tmp);
    return rc;
}

int weir_log_repair(const char *path, json_t **report, weir_error *err) {
    if (!path || !report)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log repair: path and report are required");
    *report = NULL;
    struct stat st;
    if (lstat(path, &st) != 0)
        return weir__err(err, errno == ENOENT ? WEIR_E_NOT_FOUND : WEIR_E_IO, NULL, NULL,
                         "log repair %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return weir__err(err, WEIR_E_IO, NULL, NULL, "log repair %s: not a regular file", path);
    weir__store_ref store = weir__store_file();
    void *handle = NULL;
    uint64_t epoch = 0;
    int rc = store.vt->open(store.self, NULL, path, 0, &handle, &epoch, err); /* the writer's lock */
    if (rc != WEIR_OK)
        return rc;
    char *buf = NULL, *text = NULL, *backup = NULL;
    size_t len = 0, tlen = 0, tcap = 0, off = 0, changed = 0;
    mend m = {json_object(), json_array(), false};
    rc = store.vt->read(store.self, handle, 0, &buf, &len, err);
    if (rc == WEIR_OK && (!m.ids || !m.renamed))
        m.oom = true;
    while (rc == WEIR_OK && !m.oom && off < len) {
        size_t start = off, n;
        bool torn;
        json_error_t jerr;
        json_t *ev = weir__log_read_line(buf, len, &off, &n, &torn, &jerr);
        if (!ev && !torn && json_error_code(&jerr) == json_error_out_of_memory) {
            m.oom = true;
            break;
        }
        bool mended = ev && mend_event(&m, ev);
        char *line = mended ? weir__json_dump(ev) : NULL;
        if (mended && !line) {
            m.oom = true;
        } else if (line) {
            changed++;
            if (!put(&text, &tlen, &tcap, line, strlen(line)) || !put(&text, &tlen, &tcap, "\n", 1))
                m.oom = true;
        } else if (!put(&text, &tlen, &tcap, buf + start, off - start)) {
            m.oom = true; /* every other line byte for byte, a torn tail too */
        }
        weir__free(line);
        json_decref(ev);
    }
    if (rc == WEIR_OK && m.oom)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log repair %s: out of memory", path);
    if (rc == WEIR_OK && changed > 0) {
        /* what is written must be what the reader now accepts */
        json_t *check = NULL;
        rc = weir__log_check_buffer(text, tlen, NULL, NULL, true, &check, err);
        if (rc == WEIR_OK && !json_is_true(json_object_get(check, "ok")))
            rc = weir__log_refuse(path, check, err);
        json_decref(check);
        if (rc == WEIR_OK)
            rc = replace(path, text, tlen, &backup, err);
    }
    if (rc == WEIR_OK &&
        !(*report = json_pack("{s:I, s:O, s:s*}", "lines", (json_int_t)changed, "renamed",
                              m.renamed, "backup", changed ? backup : NULL)))
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "log repair %s: out of memory", path);
    if (buf)
        store.vt->buffer_free(store.self, buf);
    store.vt->close(store.self, handle);
    json_decref(m.ids);
    json_decref(m.renamed);
    weir__free(text);
    weir__free(backup);
    return rc;
}
