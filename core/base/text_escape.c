/*
 * core/base/text_escape.c - text from plugins, hooks, tools and servers made safe
 * for one line of a terminal (weir_text_escape), and the core's one way of
 * printing a warning line to stderr, or to the embedder's handler
 * (weir__warn, weir_set_warn_handler).
 *
 * Plugin text reaches stderr through the host's log callback
 * (weir__plugin_log), hook and tool errors, and the CLI's status lines; a
 * hook's stopReason or systemMessage holding escape sequences must not clear
 * the screen, set the window title or print a fake "weir:" line.  So every
 * control character is shown, never sent: C0 (newline and tab too: one
 * warning is one line), DEL, C1 as UTF-8 (U+0080-U+009F), and any byte that
 * is not valid UTF-8 (a terminal not in UTF-8 mode reads 0x9b as CSI).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "weir/host.h"

size_t weir_text_escape(char *out, size_t size, const char *text) {
    const unsigned char *p = (const unsigned char *)(text ? text : "");
    size_t len = 0;    /* the whole escaped text's length */
    bool full = false; /* out took all it could: the rest is only counted */
    if (out && size > 0)
        out[0] = '\0';
    while (*p) {
        char esc[8];
        const char *piece = esc;
        size_t n;
        uint32_t cp = 0;
        size_t ulen = *p >= 0x80 ? weir__utf8_decode(p, 4, &cp) : 0; /* NUL-ended */
        if (*p == '\n' || *p == '\r' || *p == '\t') {
            esc[0] = '\\';
            esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
            n = 2;
            p++;
        } else if (*p < 0x20 || *p == 0x7f || (*p >= 0x80 && !ulen)) {
            n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *p);
            p++;
        } else if (ulen && cp <= 0x9f) { /* C1: U+0080-U+009F */
            n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
            p += ulen;
        } else {
            piece = (const char *)p; /* printable ASCII or a whole character */
            n = ulen ? ulen : 1;
            p += n;
        }
        if (!full && out && len + n < size) {
            memcpy(out + len, piece, n);
            out[len + n] = '\0';
        } else {
            full = true; /* cut between pieces, never inside one */
        }
        len += n;
    }
    return len;
}

/* The embedder's warning handler (weir_set_warn_handler): read-locked while
 * a warning is handed to it, so replacing it waits for those calls. */
static pthread_rwlock_t warn_lock = PTHREAD_RWLOCK_INITIALIZER;
static weir_warn_fn warn_fn;
static void *warn_ud;

void weir_set_warn_handler(weir_warn_fn fn, void *user_data) {
    pthread_rwlock_wrlock(&warn_lock);
    warn_fn = fn;
    warn_ud = fn ? user_data : NULL;
    pthread_rwlock_unlock(&warn_lock);
}

void weir__warn(const char *fmt, ...) {
    char msg[2048], line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = weir_text_escape(line, sizeof line - 1, msg);
    if (n >= sizeof line - 1)
        n = strlen(line); /* cut: what fit */
    pthread_rwlock_rdlock(&warn_lock);
    if (warn_fn) {
        line[n] = '\0';
        warn_fn(line, warn_ud);
    } else {
        line[n] = '\n';
        fwrite(line, 1, n + 1, stderr); /* one write: lines of two threads do not mix */
    }
    pthread_rwlock_unlock(&warn_lock);
}
