/*
 * core/log/store_file.c - the JSONL file store (weir/store.h, docs/stores.md):
 * one log file per session, written with O_APPEND, one write per batch of
 * lines; the writer holds an exclusive OFD lock on the file until close.
 * Line N of the file is seq N.  find_last reads back from the end a block
 * at a time; read_ranges counts lines forward from the nearest entry of a
 * sparse index of line offsets that each handle keeps (every
 * WEIR__STORE_INDEX_STRIDE-th line), so a read of one old seq reads about
 * one stride of lines, not the file.
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

/* `<path>.held` into buf; false when it does not fit. */
static bool held_path(const char *path, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s.held", path);
    return n > 0 && (size_t)n < size;
}

int weir__store_file_mark_held(const char *path, bool set, weir_error *err) {
    char marker[4200];
    if (!path || !held_path(path, marker, sizeof marker))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "hold marker: no log path, or too long");
    if (!set) {
        if (unlink(marker) != 0 && errno != ENOENT)
            return weir__err(err, WEIR_E_IO, NULL, NULL, "hold marker %s: cannot remove: %s",
                             marker, strerror(errno));
        return WEIR_OK;
    }
    int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return weir__err(err, WEIR_E_IO, NULL, NULL, "hold marker %s: cannot create: %s", marker,
                         strerror(errno));
    /* the directory entry is what survives: sync the file (no data) */
    (void)fsync(fd);
    close(fd);
    return WEIR_OK;
}

bool weir__store_file_held(const char *path) {
    char marker[4200];
    return path && held_path(path, marker, sizeof marker) && access(marker, F_OK) == 0;
}

typedef struct file_session {
    char *path;
    int fd;
    off_t size; /* bytes of stored lines (the file's size at open, then as read, appended, cut) */
    bool readonly;
    bool new_file; /* empty at open: its directory entry is synced with the first sync */
    /* The sparse line index: index[k] is the offset of line k * STRIDE, for
     * the lines a pass (read, read_ranges) found in the file; entries only
     * ever extend it in order, and a truncate drops those past the cut. */
    off_t *index;
    size_t nindex, capindex;
    size_t bytes_read; /* by the last find_last or read_ranges (tests, benches) */
} file_session;

#define STRIDE ((uint64_t)WEIR__STORE_INDEX_STRIDE)
#define BACK_BLOCK ((size_t)64 << 10) /* find_last reads back this much at a time */
#define CHUNK_MIN ((size_t)4 << 10)   /* read_ranges' first read after a seek, */
#define CHUNK_MAX ((size_t)1 << 20)   /* doubled up to this */

/* Record that line `line` starts at `at`, when it is the index's next entry.
 * Without memory the index just stops growing (it only saves reading). */
static void index_line(file_session *s, uint64_t line, off_t at) {
    if (line % STRIDE != 0 || line / STRIDE != s->nindex)
        return;
    if (s->nindex == s->capindex) {
        size_t cap = s->capindex ? s->capindex * 2 : 64;
        off_t *grown = weir__realloc(s->index, cap * sizeof *grown);
        if (!grown)
            return;
        s->index = grown;
        s->capindex = cap;
    }
    s->index[s->nindex++] = at;
}

/* Drop the index entries of lines that start past `size` (a cut file). */
static void index_cut(file_session *s, off_t size) {
    while (s->nindex > 0 && s->index[s->nindex - 1] > size)
        s->nindex--;
}

/* The index of the `len` bytes of `buf`, the whole file from offset 0. */
static void index_buffer(file_session *s, const char *buf, size_t len) {
    s->nindex = 0;
    uint64_t line = 0;
    for (size_t off = 0; off < len; line++) {
        index_line(s, line, (off_t)off);
        const char *nl = memchr(buf + off, '\n', len - off);
        if (!nl)
            break;
        off = (size_t)(nl - buf) + 1;
    }
}

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
    weir__free(s->index);
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
    if (rc == WEIR_OK) {
        s->new_file = !readonly && st.st_size == 0;
        /* what a failed append cuts back to, whatever the core reads first
         * (read, read_ranges or nothing) */
        s->size = st.st_size;
    }
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
    index_buffer(s, *buf, *len); /* the whole file is in hand: a later read_ranges seeks */
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
    index_cut(s, s->size);
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
    index_cut(s, s->size);
    return WEIR_OK;
}

bool weir__store_type_ok(const char *type) {
    size_t n = type ? strlen(type) : 0;
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++)
        if (type[i] < 0x20 || type[i] > 0x7e || type[i] == '"' || type[i] == '\\')
            return false;
    return true;
}

/* `lit` (a string literal's `m` bytes) at p[*i] of `n` bytes: moves *i past it. */
static bool literal(const char *p, size_t n, size_t *i, const char *lit, size_t m) {
    if (n - *i < m || memcmp(p + *i, lit, m) != 0)
        return false;
    *i += m;
    return true;
}

/* 1 to 20 digits at p[*i] (none past `n`), their value in *v (false on
 * overflow); moves *i past them. */
static bool digits(const char *p, size_t n, size_t *i, uint64_t *v) {
    size_t start = *i;
    *v = 0;
    while (*i < n && p[*i] >= '0' && p[*i] <= '9') {
        unsigned d = (unsigned)(p[*i] - '0');
        if (*v > (UINT64_MAX - d) / 10)
            return false;
        *v = *v * 10 + d;
        (*i)++;
    }
    return *i > start;
}

bool weir__store_line_type(const char *p, size_t n, const char *type, size_t tlen,
                           uint64_t *seq) {
    static const char head[] = "{\"seq\":", time_key[] = ",\"time\":",
                      type_key[] = ",\"type\":\"";
    size_t i = 0;
    uint64_t v, t;
    if (!literal(p, n, &i, head, sizeof head - 1) || !digits(p, n, &i, &v) ||
        !literal(p, n, &i, time_key, sizeof time_key - 1))
        return false;
    if (i < n && p[i] == '-')
        i++;
    if (!digits(p, n, &i, &t) || !literal(p, n, &i, type_key, sizeof type_key - 1) ||
        !literal(p, n, &i, type, tlen) || !literal(p, n, &i, "\"", 1))
        return false;
    *seq = v;
    return true;
}

bool weir__store_ranges_ok(const uint64_t *ranges, size_t n) {
    if (n && !ranges)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (ranges[2 * i] > ranges[2 * i + 1])
            return false;
        if (i > 0 && ranges[2 * i] <= ranges[2 * i - 1])
            return false;
    }
    return true;
}

size_t weir__store_file_bytes_read(const void *handle) {
    const file_session *s = handle;
    return s ? s->bytes_read : 0;
}

/* `n` bytes at `at` into buf (counted in s->bytes_read): WEIR_OK, or E_IO
 * (also when the file is shorter than that now). */
static int read_at(file_session *s, char *buf, size_t n, off_t at, weir_error *err) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(s->fd, buf + got, n - got, at + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return weir__err(err, WEIR_E_IO, NULL, NULL, "session log %s: read: %s", s->path,
                             strerror(errno));
        if (r == 0)
            return weir__err(err, WEIR_E_IO, NULL, NULL,
                             "session log %s: shorter than it was while read", s->path);
        got += (size_t)r;
        s->bytes_read += (size_t)r;
    }
    return WEIR_OK;
}

/*
 * find_last: the last complete line (one followed by its newline: a torn
 * last line never counts) that begins with the envelope prefix of `type`,
 * read back from the end a block at a time.  Only the first bytes of a
 * line are looked at, so a line of any length costs its bytes read, never
 * its bytes held: the buffer is one block and one prefix.
 */
static int file_find_last(void *self, void *handle, const char *type, uint64_t *seq,
                          weir_error *err) {
    (void)self;
    file_session *s = handle;
    if (!s || !type || !seq)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "session log: find_last: handle, type and seq are required");
    if (!weir__store_type_ok(type))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "session log %s: find_last: event type '%s' is not one the file "
                         "store can find (printable ASCII without '\"' or '\\')",
                         s->path, type);
    s->bytes_read = 0;
    struct stat st;
    int rc = regular(s->fd, s->path, &st, err);
    if (rc != WEIR_OK)
        return rc;
    size_t tlen = strlen(type), keep = WEIR__STORE_PREFIX_MAX + tlen;
    char *buf = weir__malloc(BACK_BLOCK + keep);
    if (!buf)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory", s->path);
    /* buf: the block [start, end), then `carry` bytes of the file from `end`
     * on (the first bytes of the blocks read before) */
    off_t end = st.st_size;
    size_t carry = 0, have = 0; /* have: the bytes of buf that hold data */
    bool complete = false;      /* a newline was seen: the lines before it are whole */
    bool found = false;
    while (rc == WEIR_OK && !found && end > 0) {
        size_t n = (uint64_t)end < BACK_BLOCK ? (size_t)end : BACK_BLOCK;
        off_t start = end - (off_t)n;
        carry = have < keep ? have : keep;
        memmove(buf + n, buf, carry);
        rc = read_at(s, buf, n, start, err);
        have = n + carry;
        /* the line starts in the block: after each newline, and at 0 */
        for (size_t i = n; rc == WEIR_OK && !found;) {
            const char *nl = i ? memrchr(buf, '\n', i) : NULL;
            size_t at = nl ? (size_t)(nl - buf) + 1 : 0;
            if (!nl && start > 0)
                break; /* this line began in an earlier block */
            if (complete && at < have)
                found = weir__store_line_type(buf + at, have - at, type, tlen, seq);
            if (nl)
                complete = true;
            if (!nl)
                break;
            i = at - 1;
        }
        end = start;
    }
    weir__free(buf);
    if (rc != WEIR_OK)
        return rc;
    if (!found)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL, "session log %s: no %s line",
                         s->path, type);
    return WEIR_OK;
}

/* The result buffer of read_ranges. */
typedef struct out_buf {
    char *b;
    size_t len, cap;
} out_buf;

static bool out_add(out_buf *o, const char *p, size_t n) {
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *grown = weir__realloc(o->b, cap);
        if (!grown)
            return false;
        o->b = grown;
        o->cap = cap;
    }
    memcpy(o->b + o->len, p, n);
    o->len += n;
    return true;
}

/*
 * read_ranges: one pass forward, counting lines (seq = line index) with
 * memchr and copying the lines inside the ranges.  Before each range it
 * seeks to the index entry nearest below the range's first seq when that
 * is ahead of the pass, and reads that stride's bytes at once when the
 * next entry tells them; the lines it passes extend the index.  A seek
 * checks that the byte before the entry is a newline: when not, the file
 * changed under a reader's index, which is dropped, and the pass starts
 * over from the file's start.  A pass that reads to the end of the file
 * records its size as `read` does (what a failed append cuts back to).
 */
static int file_read_ranges(void *self, void *handle, const uint64_t *ranges, size_t n,
                            char **buf, size_t *len, weir_error *err) {
    (void)self;
    file_session *s = handle;
    if (!s || (n && !ranges) || !buf || !len)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "session log: read_ranges: handle, ranges and buffer are required");
    *buf = NULL;
    *len = 0;
    if (!weir__store_ranges_ok(ranges, n))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "session log %s: read_ranges: the ranges must be ascending and "
                         "disjoint, each first <= last",
                         s->path);
    s->bytes_read = 0;
    struct stat st;
    int rc = regular(s->fd, s->path, &st, err);
    if (rc != WEIR_OK)
        return rc;
    const off_t size = st.st_size;
    index_cut(s, size);
    out_buf o = {0};
    char *chunk = NULL;
    /* the next read's size: a stride's bytes when the index tells them (so a
     * read of one seq reads one stride), else CHUNK_MIN, doubled each read */
    size_t chunk_cap = 0, want = CHUNK_MIN;
    if (s->nindex > 1)
        want = (uint64_t)s->index[1] < CHUNK_MAX ? (size_t)s->index[1] : CHUNK_MAX;
    off_t cat = 0;        /* chunk holds the bytes [cat, cat + cm) of the file */
    size_t cm = 0, p = 0; /* p: the pass's position in chunk */
    uint64_t line = 0;    /* the line the pass is in */
    size_t r = 0;         /* the range the pass is in or before */
    bool line_start = true, wanted = false, seeked = false;
    while (rc == WEIR_OK) {
        off_t pos = cat + (off_t)p;
        if (line_start) {
            index_line(s, line, pos);
            while (r < n && ranges[2 * r + 1] < line)
                r++;
            if (r == n || pos >= size)
                break;
            uint64_t first = ranges[2 * r];
            uint64_t k = first / STRIDE;
            if (first > line && k < s->nindex && k * STRIDE > line) {
                line = k * STRIDE;
                cat = s->index[k];
                cm = p = 0;
                /* the stride's bytes when the next entry is known (and the
                 * newline before it), else 4 KiB and doubling */
                want = k + 1 < s->nindex ? (size_t)(s->index[k + 1] - cat) + 1 : CHUNK_MIN;
                want = want < CHUNK_MAX ? want : CHUNK_MAX;
                seeked = true; /* the next read checks the newline before it */
                pos = cat;
            }
            wanted = line >= first;
            line_start = false;
        }
        if (p == cm) {
            if (pos >= size)
                break;
            /* after a seek, read from the byte before the entry: it must be a newline */
            off_t from = seeked && pos > 0 ? pos - 1 : pos;
            size_t m = (uint64_t)(size - from) < want ? (size_t)(size - from) : want;
            if (m > chunk_cap) {
                char *grown = weir__realloc(chunk, m);
                if (!grown) {
                    rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory",
                                   s->path);
                    break;
                }
                chunk = grown;
                chunk_cap = m;
            }
            rc = read_at(s, chunk, m, from, err);
            if (rc != WEIR_OK)
                break;
            want = want < CHUNK_MAX ? want * 2 : CHUNK_MAX;
            cat = from;
            cm = m;
            p = 0;
            if (from < pos) {
                if (chunk[0] != '\n') { /* a stale index: count from the start */
                    s->nindex = 0;
                    o.len = 0;
                    r = 0;
                    line = 0;
                    line_start = true;
                    cat = 0;
                    cm = 0;
                    continue;
                }
                p = 1;
            }
            seeked = false;
        }
        const char *nl = memchr(chunk + p, '\n', cm - p);
        size_t e = nl ? (size_t)(nl - chunk) + 1 : cm;
        if (wanted && !out_add(&o, chunk + p, e - p)) {
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory",
                           s->path);
            break;
        }
        p = e;
        if (nl) {
            line++;
            line_start = true;
        }
    }
    weir__free(chunk);
    if (rc == WEIR_OK && !o.b && !(o.b = weir__malloc(1)))
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "session log %s: out of memory", s->path);
    if (rc != WEIR_OK) {
        weir__free(o.b);
        return rc;
    }
    if (cat + (off_t)p >= size)
        s->size = size; /* read to the end: as read does */
    o.b[o.len] = '\0';
    *buf = o.b;
    *len = o.len;
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
    .find_last = file_find_last,
    .read_ranges = file_read_ranges,
};

weir__store_ref weir__store_file(void) { return (weir__store_ref){.vt = &file_store}; }
