/*
 * cli/line.c - the REPL's line editor: a small single-line editor on a
 * terminal (no dependency), with the usual keys and an in-memory history.
 *
 * The terminal is in raw mode only while a line is read (so a running turn
 * sees cooked mode: Ctrl-C is SIGINT then), and typed-ahead input is kept
 * (TCSANOW, never TCSAFLUSH).  A line longer than the terminal scrolls
 * sideways.  UTF-8 sequences are edited whole; every code point is taken to
 * be one column wide.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

#define HISTORY_MAX 500

struct weir_cli_line {
    int in, out;
    char **history; /* oldest first */
    size_t nhistory;
};

/* The terminal's cooked settings, restored by weir_cli_line_restore(),
 * which the signal watcher's thread calls too (cli/run.c) while the
 * main thread may be entering raw mode: saved_mu guards both. */
static pthread_mutex_t saved_mu = PTHREAD_MUTEX_INITIALIZER;
static struct termios saved_termios;
static int saved_fd = -1; /* the fd in raw mode, or -1 */

typedef struct buf {
    char *s;
    size_t len, cap, pos; /* bytes; pos is the cursor's byte offset */
} buf;

weir_cli_line *weir_cli_line_new(int in_fd, int out_fd) {
    struct termios t;
    if (!isatty(in_fd) || !isatty(out_fd) || tcgetattr(in_fd, &t) != 0)
        return NULL;
    const char *term = getenv("TERM");
    if (term && !strcmp(term, "dumb"))
        return NULL;
    weir_cli_line *l = calloc(1, sizeof *l);
    if (l) {
        l->in = in_fd;
        l->out = out_fd;
    }
    return l;
}

void weir_cli_line_free(weir_cli_line *l) {
    if (!l)
        return;
    weir_cli_line_restore();
    for (size_t i = 0; i < l->nhistory; i++)
        free(l->history[i]);
    free(l->history);
    free(l);
}

void weir_cli_line_restore(void) {
    pthread_mutex_lock(&saved_mu);
    if (saved_fd >= 0) {
        tcsetattr(saved_fd, TCSANOW, &saved_termios);
        saved_fd = -1;
    }
    pthread_mutex_unlock(&saved_mu);
}

void weir_cli_line_history_add(weir_cli_line *l, const char *line) {
    if (!l || !*line || (l->nhistory && !strcmp(l->history[l->nhistory - 1], line)))
        return;
    if (l->nhistory == HISTORY_MAX) {
        free(l->history[0]);
        memmove(l->history, l->history + 1, (HISTORY_MAX - 1) * sizeof *l->history);
        l->nhistory--;
    }
    char **nh = realloc(l->history, (l->nhistory + 1) * sizeof *nh);
    char *copy = strdup(line);
    if (!nh || !copy) {
        free(copy);
        if (nh)
            l->history = nh;
        return;
    }
    l->history = nh;
    l->history[l->nhistory++] = copy;
}

static int raw_on(int fd) {
    struct termios cooked, t;
    if (tcgetattr(fd, &cooked) != 0)
        return -1;
    t = cooked;
    t.c_iflag &= (tcflag_t) ~(ICRNL | INLCR | IXON | ISTRIP);
    t.c_lflag &= (tcflag_t) ~(ECHO | ICANON | ISIG | IEXTEN);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    pthread_mutex_lock(&saved_mu);
    int rc = tcsetattr(fd, TCSANOW, &t); /* TCSANOW: typed-ahead input is kept */
    if (rc == 0) {
        saved_termios = cooked;
        saved_fd = fd;
    }
    pthread_mutex_unlock(&saved_mu);
    return rc == 0 ? 0 : -1;
}

static void put(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void puts_fd(int fd, const char *s) { put(fd, s, strlen(s)); }

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Code points in s[0..n). */
static size_t cols(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += !is_cont((unsigned char)s[i]);
    return c;
}

static size_t term_cols(int fd) {
    struct winsize ws;
    return ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
}

/* Redraw the prompt and the part of the line around the cursor that fits. */
static void refresh(const weir_cli_line *l, const char *prompt, size_t pcols, const buf *b) {
    size_t width = term_cols(l->out);
    size_t room = width > pcols + 2 ? width - pcols - 1 : 1;
    size_t start = 0, end = b->len;
    /* scroll: drop whole code points from the left until the cursor fits */
    while (cols(b->s + start, b->pos - start) >= room) {
        start++;
        while (start < b->pos && is_cont((unsigned char)b->s[start]))
            start++;
    }
    while (cols(b->s + start, end - start) > room) {
        end--;
        while (end > b->pos && is_cont((unsigned char)b->s[end]))
            end--;
    }
    puts_fd(l->out, "\r");
    puts_fd(l->out, prompt);
    put(l->out, b->s + start, end - start);
    puts_fd(l->out, "\033[K");
    size_t back = cols(b->s + b->pos, end - b->pos); /* the cursor is this far left of the end */
    if (back) {
        char seq[32];
        snprintf(seq, sizeof seq, "\033[%zuD", back);
        puts_fd(l->out, seq);
    }
}

static int insert(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *ns = realloc(b->s, cap);
        if (!ns)
            return -1;
        b->s = ns;
        b->cap = cap;
    }
    memmove(b->s + b->pos + n, b->s + b->pos, b->len - b->pos);
    memcpy(b->s + b->pos, s, n);
    b->len += n;
    b->pos += n;
    b->s[b->len] = '\0';
    return 0;
}

static void erase(buf *b, size_t from, size_t to) {
    memmove(b->s + from, b->s + to, b->len - to);
    b->len -= to - from;
    if (b->pos >= to)
        b->pos -= to - from;
    else if (b->pos > from)
        b->pos = from;
    b->s[b->len] = '\0';
}

static size_t prev_cp(const buf *b, size_t i) {
    if (i == 0)
        return 0;
    i--;
    while (i > 0 && is_cont((unsigned char)b->s[i]))
        i--;
    return i;
}

static size_t next_cp(const buf *b, size_t i) {
    if (i >= b->len)
        return b->len;
    i++;
    while (i < b->len && is_cont((unsigned char)b->s[i]))
        i++;
    return i;
}

static void set_text(buf *b, const char *s) {
    b->len = b->pos = 0;
    if (b->s)
        b->s[0] = '\0';
    insert(b, s, strlen(s));
}

/* One byte; 0 at end of input or on a read error. */
static int get(int fd, unsigned char *c) {
    for (;;) {
        ssize_t r = read(fd, c, 1);
        if (r == 1)
            return 1;
        if (r < 0 && errno == EINTR)
            continue;
        return 0;
    }
}

int weir_cli_line_read(weir_cli_line *l, const char *prompt, size_t prompt_cols, char **out) {
    *out = NULL;
    if (raw_on(l->in) != 0)
        return WEIR_CLI_LINE_ERROR;
    buf b = {0};
    if (insert(&b, "", 0) != 0) {
        weir_cli_line_restore();
        return WEIR_CLI_LINE_ERROR;
    }
    size_t hpos = l->nhistory; /* l->nhistory: the line being edited */
    char *edited = NULL;       /* that line, while browsing the history */
    int rc = WEIR_CLI_LINE_ERROR;
    puts_fd(l->out, prompt);
    for (;;) {
        unsigned char c;
        if (!get(l->in, &c)) {
            rc = WEIR_CLI_LINE_EOF;
            break;
        }
        if (c == '\r' || c == '\n') {
            rc = WEIR_CLI_LINE_OK;
            break;
        }
        if (c == 3) { /* Ctrl-C */
            rc = WEIR_CLI_LINE_INTERRUPT;
            break;
        }
        if (c == 4) { /* Ctrl-D: end of input on an empty line, else delete */
            if (b.len == 0) {
                rc = WEIR_CLI_LINE_EOF;
                break;
            }
            erase(&b, b.pos, next_cp(&b, b.pos));
        } else if (c == 127 || c == 8) {
            erase(&b, prev_cp(&b, b.pos), b.pos);
        } else if (c == 1) {
            b.pos = 0;
        } else if (c == 5) {
            b.pos = b.len;
        } else if (c == 2) {
            b.pos = prev_cp(&b, b.pos);
        } else if (c == 6) {
            b.pos = next_cp(&b, b.pos);
        } else if (c == 11) {
            erase(&b, b.pos, b.len);
        } else if (c == 21) {
            erase(&b, 0, b.pos);
        } else if (c == 23) { /* Ctrl-W: the word before the cursor */
            size_t i = b.pos;
            while (i > 0 && b.s[i - 1] == ' ')
                i--;
            while (i > 0 && b.s[i - 1] != ' ')
                i--;
            erase(&b, i, b.pos);
        } else if (c == 12) {
            puts_fd(l->out, "\033[H\033[2J");
        } else if (c == 16 || c == 14) {
            goto history; /* Ctrl-P, Ctrl-N */
        } else if (c == 27) { /* ESC [ X, ESC [ N ~, ESC O X */
            unsigned char s0, s1, s2;
            if (!get(l->in, &s0) || !get(l->in, &s1))
                continue;
            if (s0 == '[' && s1 >= '0' && s1 <= '9') {
                if (!get(l->in, &s2) || s2 != '~')
                    continue;
                if (s1 == '3')
                    erase(&b, b.pos, next_cp(&b, b.pos));
                else if (s1 == '1' || s1 == '7')
                    b.pos = 0;
                else if (s1 == '4' || s1 == '8')
                    b.pos = b.len;
            } else if (s0 == '[' || s0 == 'O') {
                if (s1 == 'C')
                    b.pos = next_cp(&b, b.pos);
                else if (s1 == 'D')
                    b.pos = prev_cp(&b, b.pos);
                else if (s1 == 'H')
                    b.pos = 0;
                else if (s1 == 'F')
                    b.pos = b.len;
                else if (s1 == 'A' || s1 == 'B') {
                    c = s1 == 'A' ? 16 : 14;
                    goto history;
                }
            }
        } else if (c == '\t' || c >= 32) {
            char ch = c == '\t' ? ' ' : (char)c;
            bool at_end = b.pos == b.len;
            if (insert(&b, &ch, 1) != 0)
                break;
            /* typing at the end of a line that fits: the byte is all it takes */
            if (at_end && prompt_cols + cols(b.s, b.len) + 1 < term_cols(l->out)) {
                put(l->out, &ch, 1);
                continue;
            }
        }
        refresh(l, prompt, prompt_cols, &b);
        continue;
    history:
        if (c == 16 && hpos > 0) {
            if (hpos == l->nhistory) {
                free(edited);
                edited = strdup(b.s);
            }
            set_text(&b, l->history[--hpos]);
        } else if (c == 14 && hpos < l->nhistory) {
            hpos++;
            set_text(&b, hpos == l->nhistory ? (edited ? edited : "") : l->history[hpos]);
        }
        refresh(l, prompt, prompt_cols, &b);
    }
    free(edited);
    if (rc == WEIR_CLI_LINE_INTERRUPT)
        puts_fd(l->out, "^C");
    puts_fd(l->out, "\r\n");
    weir_cli_line_restore();
    if (rc == WEIR_CLI_LINE_OK)
        *out = b.s;
    else
        free(b.s);
    return rc;
}
