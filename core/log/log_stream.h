/*
 * core/log/log_stream.h - a log file read as a stream of lines: a window of
 * its bytes that holds at least the line being read, so a reader holds the
 * longest line (up to WEIR__LOG_LINE_MAX), not the file.  The one line
 * reader of the log floor: the checker (`weir log --check`, `--derive`,
 * weir_log_each) and the summary (`weir sessions`) read through it.
 * Owner: core/log/log_stream.c.
 */
#ifndef WEIR_CORE_LOG_STREAM_H
#define WEIR_CORE_LOG_STREAM_H

#include "common.h"

/*
 * One reader of one file.  Not thread-safe: a stream belongs to one reader
 * at a time (two streams may read the same fd at once: they read with
 * pread and never move its offset).  The fields are read by the callers
 * (failed, cut, fd); only the functions below change them.
 */
typedef struct weir__log_stream {
    int fd;         /* borrowed: the stream never closes it */
    char *buf;      /* the window (owned, weir__malloc'd; weir__log_stream_free) */
    size_t cap;     /* its size: grows to the longest line, up to the line cap */
    size_t lo, hi;  /* buf[lo, hi) is not consumed yet */
    uint64_t at;    /* the file offset of buf[0] */
    bool eof;
    int failed;     /* the errno of a read that failed (ENOMEM: the window), or 0 */
    bool cut;       /* the line over the cap that weir__log_stream_line skipped ends
                     * the file without its newline */
} weir__log_stream;

/* Start reading `fd` (borrowed; open for reading) at byte `from`.  Allocates
 * nothing: the window grows on the first read. */
void weir__log_stream_init(weir__log_stream *r, int fd, uint64_t from);

/* Free the window (the fd stays open).  `r` may be read again only after a
 * new weir__log_stream_init. */
void weir__log_stream_free(weir__log_stream *r);

/*
 * The next line: *p (borrowed: in the window, valid until the next call on
 * `r`) and *n bytes, its newline included when it has one; *start: its file
 * offset.  A line longer than WEIR__LOG_LINE_MAX is skipped to its newline
 * without being kept: *p is NULL and *n its length (r->cut: it ends the file
 * without a newline).  false at the end of the file or on a read error
 * (r->failed: ENOMEM when the window could not grow, else the read's errno).
 */
bool weir__log_stream_line(weir__log_stream *r, const char **p, size_t *n, uint64_t *start);

#endif
