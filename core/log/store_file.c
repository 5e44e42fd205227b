/*
 * core/log/store_file.c - the JSONL file store (weir/store.h, docs/stores.md):
 * one log file per session, written with O_APPEND, one write per batch of
 * lines; the writer holds an exclusive OFD lock on the file until close.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session_log.h"
#include "store.h"
#include "weir/host.h"

typedef struct file_session {
    char *path;
    int fd;
    off_t size; /* bytes of stored lines */
    bool readonly;
    bool new_file; /* empty at open: its directory entry is synced with the first sync */
} file_session;

/*
 * Sync the directory that holds `path` (its name's entry), as far as the
 * system lets it: a directory this process may not open for reading, or a
 * file system that cannot sync directories, leaves it to the file system's
 * own ordering (0).  0, or -1 with errno on an I/O error.
 */
static int sync_parent(const char *path) {
    char *dir = weir__strdup(path);
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = 0, e = 0;
    if (dfd < 0) {
        e = errno;
        rc = e == EACCES || e == EPERM ? 0 : -1;
    } else {
        if (fsync(dfd) != 0) {
            e = errno;
            rc = e == EINVAL || e == ENOTSUP || e == EROFS || e == EBADF ? 0 : -1;
        }
        close(dfd);
    }
    weir__free(dir);
    errno = e;
    return rc;
}

/*
 * The durability point: fdatasync (an append's data and the file size that
 * reads it back; not the times, which no reader needs), and, the first time
 * for a file this writer found empty, its directory too, so a crash cannot
 * lose the whole new file.  0, or -1 with errno.
 */
static int sync_session(file_session *s) {
    if (fdatasync(s->fd) != 0)
        return -1;
    if (!s->new_file)
        return 0;
    if (sync_parent(s->path) != 0)
        return -1;
    s->new_file = false;
    return 0;
}

static int mkdir_parents(const char *path, weir_error *err) {
    char *dir = weir__strdup(path);
    if (!dir)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) == 0) {
            /* a new directory's own name is durable before the log in it */
            (void)sync_parent(dir);
        } else if (errno != EEXIST) {
            int rc = weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: cannot create %s: %s",
                               path, dir, strerror(errno));
            weir__free(dir);
            return rc;
        }
        *p = '/';
    }
    weir__free(dir);
    return WEIR_OK;
}

/* Only a regular file is a log (a FIFO, /dev/zero or a directory is refused). */
static int regular(int fd, const char *path, struct stat *st, weir_error *err) {
    if (fstat(fd, st) != 0)
        return weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: %s", path, strerror(errno));
    if (!S_ISREG(st->st_mode))
        return weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: not a regular file", path);
    return WEIR_OK;
}

static int read_all(int fd, const char *path, char **buf, size_t *len, weir_error *err) {
    struct stat st;
    int rc = regular(fd, path, &st, err);
    if (rc != WEIR_OK)
        return rc;
    size_t cap = (size_t)st.st_size, n = 0;
    char *b = weir__malloc(cap + 1);
    if (!b)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory", path);
    while (n < cap) {
        ssize_t r = pread(fd, b + n, cap - n, (off_t)n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            weir__free(b);
            return weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: read: %s", path,
                             strerror(errno));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return WEIR_OK;
}

int weir__log_open_read(const char *path, int *fd, weir_error *err) {
    if (!path || !fd)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: path and fd are required");
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused) */
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (*fd < 0)
        return weir__err(err, errno == ENOENT ? WEIR_E_NOT_FOUND : WEIR_E_IO, NULL, NULL,
                         "session log %s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = regular(*fd, path, &st, err);
    if (rc != WEIR_OK) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

int weir__log_read_file(const char *path, char **buf, size_t *len, weir_error *err) {
    if (!path || !buf || !len)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: path and buffer are required");
    *buf = NULL;
    *len = 0;
    int fd;
    int rc = weir__log_open_read(path, &fd, err);
    if (rc != WEIR_OK)
        return rc;
    rc = read_all(fd, path, buf, len, err);
    close(fd);
    return rc;
}

/* Warn once per process per directory when the directory holding a log
 * can be read or entered by others (logs hold whole conversations). */
static void warn_loose_dir(const char *path) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char warned[512];
    const char *slash = strrchr(path, '/');
    char dir[512];
    int n = !slash ? snprintf(dir, sizeof dir, ".")
                   : snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    struct stat st;
    if (n < 0 || (size_t)n >= sizeof dir || stat(dir, &st) != 0 || !(st.st_mode & 077))
        return;
    pthread_mutex_lock(&mu);
    if (strcmp(warned, dir) != 0) {
        snprintf(warned, sizeof warned, "%s", dir);
        weir__warn("weir: warning: session directory %s can be read by others (mode %04o); "
                   "logs hold whole conversations: chmod 700 it",
                   dir, (unsigned)(st.st_mode & 07777));
    }
    pthread_mutex_unlock(&mu);
}

/*
 * One writer per session: an OFD write lock on byte 0 of the log (OFD locks
 * belong to the open file, so a second open in this process conflicts as
 * one in another process does), held until close.  OFD locks report no
 * owner pid, so the writer also locks byte LOCK_PID_BASE + its pid, and a
 * refused writer finds the holder's pid there.
 */
#define LOCK_PID_BASE ((off_t)1 << 62)

static int take_lock(file_session *s, weir_error *err) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    if (fcntl(s->fd, F_OFD_SETLK, &fl) == 0) {
        struct flock pl = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
                           .l_start = LOCK_PID_BASE + getpid(), .l_len = 1};
        (void)fcntl(s->fd, F_OFD_SETLK, &pl); /* only names the holder */
        return WEIR_OK;
    }
    if (errno != EAGAIN && errno != EACCES)
        return weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: cannot lock: %s", s->path,
                         strerror(errno));
    struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LOCK_PID_BASE, .l_len = 0};
    long pid = fcntl(s->fd, F_OFD_GETLK, &q) == 0 && q.l_type != F_UNLCK &&
                       q.l_start > LOCK_PID_BASE
                   ? (long)(q.l_start - LOCK_PID_BASE)
                   : 0;
    const char *base = strrchr(s->path, '/');
    base = base ? base + 1 : s->path;
    size_t n = strlen(base);
    if (n > 6 && strcmp(base + n - 6, ".jsonl") == 0)
        n -= 6;
    char who[64];
    if (pid == (long)getpid())
        snprintf(who, sizeof who, "this process (pid %ld)", pid);
    else if (pid > 0)
        snprintf(who, sizeof who, "pid %ld", pid);
    else
        snprintf(who, sizeof who, "another process");
    return weir__err(err, WEIR_E_BUSY, NULL, NULL, "session %.*s is open for writing by %s (%s)",
                     (int)n, base, who, s->path);
}

static void file_close(void *self, void *handle) {
    (void)self;
    file_session *s = handle;
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    weir__free(s->path);
    weir__free(s);
}

static int file_open(void *self, const char *id, const char *path, uint32_t flags, void **handle,
                     uint64_t *epoch, weir_error *err) {
    (void)self;
    (void)id;
    *handle = NULL;
    if (epoch)
        *epoch = 0;
    if (!path || !*path)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "session log: path and out are required");
    bool readonly = (flags & WEIR_STORE_READONLY) != 0;
    file_session *s = weir__calloc(1, sizeof *s);
    if (!s || !(s->path = weir__strdup(path))) {
        weir__free(s);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory", path);
    }
    s->fd = -1;
    s->readonly = readonly;
    /* O_NONBLOCK: a FIFO must not block the open (it is refused below).  A
     * writer makes the missing directories only when the open says they
     * are missing: a session in an existing directory costs no mkdir. */
    const int wflags = O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW;
    int rc = WEIR_OK;
    s->fd = readonly ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : open(path, wflags, 0600);
    if (s->fd < 0 && !readonly && errno == ENOENT && (rc = mkdir_parents(path, err)) == WEIR_OK)
        s->fd = open(path, wflags, 0600);
    /* a writer never follows a symbolic link (O_NOFOLLOW): a link planted
     * in the session folder, dangling or not, would make it create or
     * append to a file elsewhere */
    if (rc == WEIR_OK && s->fd < 0 && !readonly && errno == ELOOP)
        rc = weir__err(err, WEIR_E_IO, NULL, NULL,
                       "session log %s: is a symbolic link; a writer does not follow one", path);
    else if (rc == WEIR_OK && s->fd < 0)
        rc = weir__err(err, errno == ENOENT ? WEIR_E_NOT_FOUND : WEIR_E_IO, NULL, NULL,
                       "session log %s: cannot open: %s", path, strerror(errno));
    if (rc == WEIR_OK && !readonly)
        warn_loose_dir(path);
    struct stat st;
    if (rc == WEIR_OK && (fstat(s->fd, &st) != 0 || !S_ISREG(st.st_mode)))
        rc = weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: not a regular file", path);
    if (rc == WEIR_OK)
        s->new_file = !readonly && st.st_size == 0;
    if (rc == WEIR_OK && fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) & ~O_NONBLOCK) != 0)
        rc = weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: %s", path, strerror(errno));
    if (rc == WEIR_OK && !readonly)
        rc = take_lock(s, err);
    if (rc != WEIR_OK) {
        file_close(NULL, s);
        return rc;
    }
    *handle = s;
    return WEIR_OK;
}

static int file_read(void *self, void *handle, uint64_t from_seq, char **buf, size_t *len,
                     weir_error *err) {
    (void)self;
    file_session *s = handle;
    int rc = read_all(s->fd, s->path, buf, len, err);
    if (rc != WEIR_OK)
        return rc;
    if (from_seq == 0) {
        s->size = (off_t)*len;
        return WEIR_OK;
    }
    size_t off = 0;
    for (uint64_t i = 0; i < from_seq && off < *len; i++) {
        const char *nl = memchr(*buf + off, '\n', *len - off);
        off = nl ? (size_t)(nl - *buf) + 1 : *len;
    }
    memmove(*buf, *buf + off, *len - off + 1);
    *len -= off;
    return WEIR_OK;
}

static void file_buffer_free(void *self, char *buf) {
    (void)self;
    weir__free(buf);
}

/* One write() for the whole batch; on failure the file is cut back. */
static int file_append(void *self, void *handle, uint64_t epoch, uint64_t first_seq, size_t count,
                       const char *lines, size_t n, uint32_t flags, weir_error *err) {
    (void)self;
    (void)epoch;
    (void)first_seq;
    (void)count;
    file_session *s = handle;
    if (s->readonly)
        return weir__err(err, WEIR_E_STATE, NULL, NULL, "session log %s: opened read-only",
                         s->path);
    ssize_t w;
    do {
        errno = 0; /* a short write sets none: it is taken for a full disk below */
        w = write(s->fd, lines, n);
    } while (w < 0 && errno == EINTR);
    int e = errno;
    if (w == (ssize_t)n && (!(flags & WEIR_STORE_DURABLE) || sync_session(s) == 0)) {
        s->size += (off_t)n;
        return WEIR_OK;
    }
    if (w == (ssize_t)n)
        e = errno; /* the sync failed */
    if (w > 0 && ftruncate(s->fd, s->size) != 0)
        return weir__err(err, WEIR_E_IO, NULL, NULL,
                         "session log %s: write failed and the partial line could not be cut: %s",
                         s->path, strerror(errno));
    if (w >= 0 && w < (ssize_t)n && e == 0)
        e = ENOSPC;
    return weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: write failed: %s", s->path,
                     strerror(e));
}

static int file_sync(void *self, void *handle, weir_error *err) {
    (void)self;
    file_session *s = handle;
    return sync_session(s) == 0 ? WEIR_OK
                                : weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: sync: %s",
                                            s->path, strerror(errno));
}

static int file_truncate(void *self, void *handle, size_t keep, weir_error *err) {
    (void)self;
    file_session *s = handle;
    if (ftruncate(s->fd, (off_t)keep) != 0)
        return weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: cannot truncate: %s",
                         s->path, strerror(errno));
    s->size = (off_t)keep;
    return WEIR_OK;
}

static int file_probe(void *self, const char *id, const char *path, bool *live, long *pid,
                      weir_error *err) {
    (void)self;
    (void)id;
    return weir_log_writer(path, live, pid, err);
}

int weir_log_writer(const char *path, bool *live, long *pid, weir_error *err) {
    if (!path || !live)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log writer: path and live are required");
    *live = false;
    if (pid)
        *pid = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return weir__err(err, errno == ENOENT ? WEIR_E_NOT_FOUND : WEIR_E_IO, NULL, NULL,
                         "session log %s: cannot open: %s", path, strerror(errno));
    /* a read lock conflicts with the writer's lock on byte 0; F_OFD_GETLK
     * only asks, it takes nothing */
    struct flock q = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    int rc = WEIR_OK;
    if (fcntl(fd, F_OFD_GETLK, &q) != 0) {
        rc = weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: cannot probe its lock: %s",
                       path, strerror(errno));
    } else if (q.l_type != F_UNLCK) {
        *live = true;
        struct flock pl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = LOCK_PID_BASE,
                           .l_len = 0};
        if (pid && fcntl(fd, F_OFD_GETLK, &pl) == 0 && pl.l_type != F_UNLCK &&
            pl.l_start > LOCK_PID_BASE)
            *pid = (long)(pl.l_start - LOCK_PID_BASE);
    }
    close(fd);
    return rc;
}

/* The *.jsonl files of directory `where`, each probed. */
static int file_list(void *self, const char *where, json_t **sessions, weir_error *err) {
    (void)self;
    *sessions = NULL;
    DIR *d = opendir(where ? where : ".");
    if (!d)
        return weir__err(err, errno == ENOENT ? WEIR_E_NOT_FOUND : WEIR_E_IO, NULL, NULL,
                         "session directory %s: %s", where ? where : ".", strerror(errno));
    json_t *out = json_array();
    int rc = out ? WEIR_OK : WEIR_E_NOMEM;
    struct dirent *e;
    while (rc == WEIR_OK && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 6 || strcmp(e->d_name + len - 6, ".jsonl") != 0)
            continue;
        char *path = weir__asprintf("%s/%s", where ? where : ".", e->d_name);
        bool live = false;
        long pid = 0;
        weir_error perr;
        if (path && weir_log_writer(path, &live, &pid, &perr) != WEIR_OK)
            live = false;
        json_t *row = path ? json_pack("{s:s%, s:s, s:b}", "id", e->d_name, len - 6, "path",
                                       path, "live", live)
                           : NULL;
        if (row && pid > 0 && json_object_set_new(row, "pid", json_integer(pid)) != 0)
            json_decref(row), row = NULL;
        if (!row || json_array_append_new(out, row) != 0)
            rc = WEIR_E_NOMEM;
        weir__free(path);
    }
    closedir(d);
    if (rc != WEIR_OK) {
        json_decref(out);
        return weir__err(err, rc, NULL, NULL, "session directory %s: out of memory",
                         where ? where : ".");
    }
    *sessions = out;
    return WEIR_OK;
}

static const weir_store file_store = {
    .struct_size = sizeof(weir_store),
    .open = file_open,
    .read = file_read,
    .buffer_free = file_buffer_free,
    .append = file_append,
    .sync = file_sync,
    .truncate = file_truncate,
    .close = file_close,
    .list = file_list,
    .probe = file_probe,
};

weir__store_ref weir__store_file(void) { return (weir__store_ref){.vt = &file_store}; }
