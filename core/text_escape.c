/*
 * core/text_escape.c - text from plugins, hooks, tools and servers made safe
 * for one line of a terminal (weir_text_escape), and the core's one way of
 * printing a warning line to stderr (weir__warn).
 *
 * Plugin text reaches stderr through the host's log callback
 * (weir__plugin_log), hook and tool errors, and the CLI's status lines; a
 * hook's stopReason or systemMessage holding escape sequences must not clear
 * the screen, set the window title or print a fake "weir:" line.  So every
 * control character is shown, never sent: C0 (newline and tab too: one
 * warning is one line), DEL, C1 as UTF-8 (U+0080-U+009F), and any byte that
 * is not valid UTF-8 (a terminal not in UTF-8 mode reads 0x9b as CSI).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* The length of the valid UTF-8 sequence at `p` (lead byte >= 0x80), its
 * code point in *cp; 0 when it is not valid (overlong, a surrogate, past
 * U+10FFFF, cut short). */
static size_t utf8_len(const unsigned char *p, uint32_t *cp) {
    size_t n;
    uint32_t c, min;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        n = 2, c = p[0] & 0x1fu, min = 0x80;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        n = 3, c = p[0] & 0x0fu, min = 0x800;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4, c = p[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* a NUL ends the string here too */
            return 0;
        c = (c << 6) | (p[i] & 0x3fu);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

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
        size_t ulen = *p >= 0x80 ? utf8_len(p, &cp) : 0;
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

void weir__warn(const char *fmt, ...) {
    char msg[2048], line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = weir_text_escape(line, sizeof line - 1, msg);
    if (n >= sizeof line - 1)
        n = strlen(line); /* cut: what fit */
    line[n] = '\n';
    fwrite(line, 1, n + 1, stderr); /* one write: lines of two threads do not mix */
}
