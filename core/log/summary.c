/*
 * core/log/summary.c - what `weir sessions` shows of a log file, read from
 * its head and its tail (docs/session-log.md, "Checkpoints"): the first
 * prompt from the first events, everything else from the last
 * log/checkpoint on.  The cost is the distance from the last checkpoint to
 * the end (at most about session.checkpoint_bytes and one turn), not the
 * log: a log without checkpoints (small, or written before them) is
 * folded from its start, one line at a time.  The lines read are checked
 * as envelopes, contiguous in seq; the rest of the log is `--check`'s.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "event_catalog.h"
#include "log_stream.h"
#include "session_log.h"
#include "tally.h"

#define BLOCK ((size_t)1 << 20)      /* read back from the end a block at a time */
#define HEAD_EVENTS 256              /* the first prompt is looked for this far */
#define PROMPT_BYTES 1024            /* and kept this long */

typedef struct summary {
    int fd;
    const char *what;
    uint64_t size;
    char *buf;
    size_t cap;
    weir_error *err;
} summary;

static int io_err(summary *s, const char *op) {
    return weir__err(s->err, WEIR_E_IO, NULL, NULL, "session log %s: %s: %s", s->what, op,
                     strerror(errno ? errno : EIO));
}

/* The file ended before the size fstat gave (E_IO). */
static int shorter(summary *s) {
    return weir__err(s->err, WEIR_E_IO, NULL, NULL, "session log %s: shorter than it was",
                     s->what);
}

/* s->buf holds at least `n` bytes; false when out of memory. */
static bool room(summary *s, size_t n) {
    if (n <= s->cap)
        return true;
    char *grown = weir__realloc(s->buf, n);
    if (!grown)
        return false;
    s->buf = grown;
    s->cap = n;
    return true;
}

/* `n` bytes at `at` into buf: WEIR_OK, or E_IO. */
static int read_at(summary *s, char *buf, size_t n, uint64_t at) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(s->fd, buf + got, n - got, (off_t)(at + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? io_err(s, "read") : shorter(s);
        got += (size_t)r;
    }
    return WEIR_OK;
}

/*
 * The next line of `r` parsed into *ev (new reference); *at: its offset;
 * *more false when no line starts before the size fstat gave (*ev NULL).
 * A line that ends the file (as fstat saw it) without a newline is torn: *ev
 * NULL, not read, as the one reader does.  A line that is no envelope, or
 * over the line cap, is E_LOG_CORRUPT naming its offset.
 */
static int line_of(summary *s, weir__log_stream *r, json_t **ev, uint64_t *at, bool *more) {
    *ev = NULL;
    *more = false;
    const char *p;
    size_t n;
    if (!weir__log_stream_line(r, &p, &n, at)) {
        if (r->failed == ENOMEM)
            return weir__err(s->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        if (r->failed) {
            errno = r->failed;
            return io_err(s, "read");
        }
        return r->at + r->hi < s->size ? shorter(s) : WEIR_OK;
    }
    if (*at >= s->size)
        return WEIR_OK; /* written after the fstat */
    *more = true;
    bool nl = p ? p[n - 1] == '\n' : !r->cut;
    if (!nl || *at + n > s->size) { /* the bytes after the fstat are not read */
        return *at + n < s->size ? shorter(s) : WEIR_OK; /* a crash's cut: torn */
    }
    if (!p)
        return weir__err(s->err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                         "session log %s: the line at byte %llu is over the %zu MiB cap", s->what,
                         (unsigned long long)*at, WEIR__LOG_LINE_MAX >> 20);
    json_error_t jerr;
    char msg[256];
    *ev = weir__json_loadb(p, n - 1, JSON_REJECT_DUPLICATES, &jerr);
    if (!*ev && json_error_code(&jerr) == json_error_out_of_memory)
        return weir__err(s->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    if (!*ev || weir__log_check_envelope(*ev, msg, sizeof msg) < 0) {
        json_decref(*ev);
        *ev = NULL;
        return weir__err(s->err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                         "session log %s: the line at byte %llu is not a log event", s->what,
                         (unsigned long long)*at);
    }
    return WEIR_OK;
}

/* Whether the `n` bytes at `p` are a log/checkpoint line (as weir writes
 * the envelope: seq, time, then type). */
static bool checkpoint_line(const char *p, size_t n) {
    static const char head[] = "{\"seq\":";
    static const char type[] = ",\"type\":\"" WEIR__LOG_CHECKPOINT "\",";
    if (n < sizeof head - 1 || memcmp(p, head, sizeof head - 1) != 0)
        return false;
    const char *t = memmem(p, n < 64 ? n : 64, "\"time\":", 7);
    if (!t)
        return false;
    const char *end = memchr(t, ',', (size_t)(p + n - t));
    return end && (size_t)(p + n - end) >= sizeof type - 1 &&
           memcmp(end, type, sizeof type - 1) == 0;
}

/* The offset of the last log/checkpoint line, read back from the end a
 * block at a time (*found false: there is none).  Only lines that end with
 * their newline count: a torn last line is never one. */
static int last_checkpoint(summary *s, uint64_t *at, bool *found) {
    *found = false;
    uint64_t end = s->size; /* the bytes from `end` on are searched */
    size_t carry = 0;       /* at the start of buf: the bytes of [end, ...) up to and with
                             * the first newline, a line that began before `end` */
    while (end > 0) {
        size_t n = end < BLOCK ? (size_t)end : BLOCK;
        uint64_t start = end - n;
        if (!room(s, n + carry))
            return weir__err(s->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        memmove(s->buf + n, s->buf, carry);
        int rc = read_at(s, s->buf, n, start);
        if (rc != WEIR_OK)
            return rc;
        size_t len = n + carry, nl = SIZE_MAX; /* nl: the newline ending the line before i */
        for (size_t i = len; i-- > 0;) {
            if (s->buf[i] != '\n')
                continue;
            if (nl != SIZE_MAX && checkpoint_line(s->buf + i + 1, nl - i - 1)) {
                *at = start + i + 1;
                *found = true;
                return WEIR_OK;
            }
            nl = i;
        }
        if (start == 0 && nl != SIZE_MAX && checkpoint_line(s->buf, nl)) { /* the first line */
            *at = 0;
            *found = true;
            return WEIR_OK;
        }
        carry = nl == SIZE_MAX ? len : nl + 1;
        if (carry > WEIR__LOG_LINE_MAX + 1) /* a line no reader takes: nothing before it */
            return WEIR_OK;
        end = start;
    }
    return WEIR_OK;
}

/* Whether the file starts as weir writes seq 0, as far as it goes (a
 * crash cut the very first line: a torn tail like any other), as the
 * check's starts_like_event (core/log/log_check.c) has it. */
static bool starts_like_log(summary *s) {
    static const char head[] = "{\"seq\":0,\"time\":";
    char b[sizeof head - 1];
    size_t n = s->size < sizeof b ? (size_t)s->size : sizeof b; /* a torn line may be shorter */
    return n && read_at(s, b, n, 0) == WEIR_OK && memcmp(b, head, n) == 0;
}

/* The text of the first user message of the first HEAD_EVENTS events, or
 * NULL (borrowed from `ev`). */
static const char *prompt_of(const json_t *ev) {
    if (strcmp(weir__json_str(ev, "type", ""), "user/message") != 0)
        return NULL;
    const json_t *content =
        json_object_get(json_object_get(json_object_get(ev, "data"), "message"), "content");
    if (json_is_string(content))
        return json_string_value(content);
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        const char *t = json_string_value(json_object_get(b, "text"));
        if (t)
            return t;
    }
    return "";
}

/* `text` cut to at most PROMPT_BYTES, never inside a UTF-8 sequence. */
static json_t *cut(const char *text) {
    size_t n = strlen(text);
    if (n > PROMPT_BYTES) {
        n = PROMPT_BYTES;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
            n--;
    }
    return json_stringn(text, n);
}

int weir__log_summary_fd(int fd, const char *what, json_t **out, weir_error *err) {
    if (fd < 0 || !out)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "log summary: a file and out are required");
    *out = NULL;
    summary s = {.fd = fd, .what = what ? what : "(log)", .err = err};
    struct stat st;
    if (fstat(fd, &st) != 0)
        return io_err(&s, "stat");
    s.size = (uint64_t)st.st_size;
    weir__tally t = {0};
    json_t *prompt = NULL, *header = NULL;
    int rc = WEIR_OK;
    /* the head: seq 0 first (a session/start: the header), the first prompt */
    uint64_t at;
    bool more = true;
    weir__log_stream r;
    weir__log_stream_init(&r, fd, 0);
    for (int i = 0; rc == WEIR_OK && more && i < HEAD_EVENTS && !prompt; i++) {
        json_t *ev = NULL;
        rc = line_of(&s, &r, &ev, &at, &more);
        if (rc == WEIR_OK && !more)
            break; /* the end */
        if (rc == WEIR_E_LOG_CORRUPT && i == 0) /* never take another file for a damaged log */
            rc = weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                           "session log %s: not a weir session log: line 1 is not a log event",
                           s.what);
        if (rc == WEIR_OK && !ev && i == 0 && !starts_like_log(&s))
            rc = weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                           "session log %s: not a weir session log: its only line is not a log "
                           "event", s.what);
        if (rc == WEIR_OK && !ev)
            break; /* a torn last line */
        if (rc == WEIR_OK && i == 0 && json_integer_value(json_object_get(ev, "seq")) != 0)
            rc = weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                           "session log %s: not a weir session log (its first event is not "
                           "seq 0)", s.what);
        if (rc == WEIR_OK && i == 0 &&
            strcmp(weir__json_str(ev, "type", ""), WEIR__SESSION_START_EVENT) == 0 &&
            json_is_object(json_object_get(ev, "data")))
            header = json_incref(json_object_get(ev, "data"));
        const char *p = ev ? prompt_of(ev) : NULL;
        if (rc == WEIR_OK && p && !(prompt = cut(p)))
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        json_decref(ev);
    }
    weir__log_stream_free(&r);
    /* the tail: from the last checkpoint, or the start */
    uint64_t from = 0;
    bool found = false;
    if (rc == WEIR_OK)
        rc = last_checkpoint(&s, &from, &found);
    weir__free(s.buf); /* the tail is read through its own window */
    s.buf = NULL;
    s.cap = 0;
    json_int_t expected = 0;
    weir__log_stream_init(&r, fd, from);
    for (more = true; rc == WEIR_OK && more;) {
        json_t *ev = NULL;
        rc = line_of(&s, &r, &ev, &at, &more);
        if (rc != WEIR_OK || !ev)
            break;
        json_int_t seq = json_integer_value(json_object_get(ev, "seq"));
        if (at == from && found) {
            if (!weir__tally_from(&t, json_object_get(ev, "data")) || t.events != seq)
                rc = weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                               "session log %s: the log/checkpoint at seq %" JSON_INTEGER_FORMAT
                               " is malformed (weir log --check says more)",
                               s.what, seq);
            expected = seq;
        }
        if (rc == WEIR_OK && seq != expected)
            rc = weir__err(err, WEIR_E_LOG_CORRUPT, NULL, NULL,
                           "session log %s: seq %" JSON_INTEGER_FORMAT
                           " breaks contiguity (expected %" JSON_INTEGER_FORMAT ")",
                           s.what, seq, expected);
        if (rc == WEIR_OK)
            weir__tally_event(&t, ev);
        expected = seq + 1;
        json_decref(ev);
    }
    weir__log_stream_free(&r);
    /* an empty log (or a crash's cut first line) is a log of no events, as
     * the one reader reads it */
    json_t *o = rc == WEIR_OK ? weir__tally_json(&t) : NULL;
    if (o && (json_object_set_new(o, "open", json_boolean(t.open)) != 0 ||
              (t.events > 0 &&
               json_object_set_new(o, "last_time", json_integer(t.last_time)) != 0) ||
              json_object_set_new(o, "checkpoint", found ? json_integer((json_int_t)from)
                                                         : json_null()) != 0 ||
              (prompt && json_object_set(o, "first_prompt", prompt) != 0) ||
              (header && json_object_set(o, "header", header) != 0))) {
        json_decref(o);
        o = NULL;
    }
    json_decref(prompt);
    json_decref(header);
    if (rc == WEIR_OK && !o)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    *out = o;
    return rc;
}
