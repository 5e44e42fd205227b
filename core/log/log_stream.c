/*
 * core/log/log_stream.c - a log file read as a stream of lines
 * (log_stream.h): a window of the file's bytes that starts at 1 MiB and
 * grows (doubling) to the longest line read, up to the line cap; what was
 * consumed is dropped before the window reads on.  Reads with pread, so the
 * fd's offset never moves and streams may share an fd.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "log_stream.h"
#include "session_log.h"

#define STREAM_WINDOW ((size_t)1 << 20)

void weir__log_stream_init(weir__log_stream *r, int fd, uint64_t from) {
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->at = from;
}

void weir__log_stream_free(weir__log_stream *r) { weir__free(r->buf); }

/* Read more of the file into the window; false at the end or on an error
 * (r->failed; E_NOMEM or E_IO for the caller to tell apart). */
static bool fill(weir__log_stream *r) {
    if (r->eof || r->failed)
        return false;
    if (r->lo > 0) { /* drop what was consumed */
        memmove(r->buf, r->buf + r->lo, r->hi - r->lo);
        r->at += r->lo;
        r->hi -= r->lo;
        r->lo = 0;
    }
    if (r->hi == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : STREAM_WINDOW;
        if (cap > WEIR__LOG_LINE_MAX + 2)
            cap = WEIR__LOG_LINE_MAX + 2;
        char *grown = cap > r->cap ? weir__realloc(r->buf, cap) : NULL;
        if (!grown) {
            if (cap > r->cap)
                r->failed = ENOMEM; /* else the line is over the cap */
            return false;
        }
        r->buf = grown;
        r->cap = cap;
    }
    for (;;) {
        ssize_t n = pread(r->fd, r->buf + r->hi, r->cap - r->hi, (off_t)(r->at + r->hi));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            r->failed = errno ? errno : EIO;
        else if (n == 0)
            r->eof = true;
        else
            r->hi += (size_t)n;
        return n > 0;
    }
}

/*
 * The next line: *p (in the window, valid until the next call) and *n bytes,
 * its newline included when it has one; *start: its file offset.  A line
 * longer than the line cap is skipped to its newline: *p is NULL and *n its
 * length.  false at the end of the file or on a read error (r->failed).
 */
bool weir__log_stream_line(weir__log_stream *r, const char **p, size_t *n, uint64_t *start) {
    for (;;) {
        const char *nl = r->hi > r->lo ? memchr(r->buf + r->lo, '\n', r->hi - r->lo) : NULL;
        if (nl || (r->eof && r->hi > r->lo)) {
            *start = r->at + r->lo;
            *p = r->buf + r->lo;
            *n = nl ? (size_t)(nl - *p) + 1 : r->hi - r->lo;
            r->lo += *n;
            return true;
        }
        if (r->eof || r->failed)
            return false;
        if (!fill(r) && !r->eof) {
            if (r->failed)
                return false;
            /* over the cap: count the line to its newline, keeping nothing */
            *start = r->at + r->lo;
            size_t len = r->hi - r->lo;
            r->lo = r->hi = 0;
            r->at = *start + len;
            for (;;) {
                ssize_t k = pread(r->fd, r->buf, r->cap, (off_t)r->at);
                if (k < 0 && errno == EINTR)
                    continue;
                if (k <= 0) {
                    r->failed = k < 0 ? (errno ? errno : EIO) : 0;
                    r->eof = r->cut = k == 0;
                    break;
                }
                const char *e = memchr(r->buf, '\n', (size_t)k);
                if (e) {
                    size_t used = (size_t)(e - r->buf) + 1;
                    len += used; /* its newline included, as for any line */
                    r->lo = used;
                    r->hi = (size_t)k;
                    break;
                }
                len += (size_t)k;
                r->at += (size_t)k;
            }
            *p = NULL;
            *n = len;
            return true;
        }
    }
}
