/*
 * core/format/pattern.c - JSON Schema's `pattern` (docs/schema.md): an
 * ECMA-262 regular expression, translated to a POSIX extended one and
 * matched anywhere in a string with regcomp/regexec under a UTF-8 locale
 * (so `.` and a bracket take one character, not one byte).
 *
 * The translation covers what schemas use: literals, `.`, anchors, groups
 * (also `(?:`), alternation, the quantifiers `* + ? {m} {m,} {m,n}` (a lazy
 * `?` after one changes nothing for a search), bracket expressions with
 * ranges, and the escapes `\d \D \w \W \s \S \t \n \r \f \v \xHH \uHHHH` and
 * escaped punctuation.  glibc's regcomp takes no range with a multibyte
 * end, so a range's non-ASCII part is listed character by character (up to
 * RANGE_LIST of them).  Lookaround, backreferences, `\b`, `\B`, Unicode
 * property escapes and named groups have no POSIX form: the pattern is
 * WEIR__PATTERN_UNSUPPORTED.  Bounds keep a hostile pattern cheap: at most
 * PATTERN_MAX bytes, repetition counts up to COUNT_MAX, and no counted
 * repetition of a group that holds one.  Pure and thread-safe.
 */
#include <locale.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "schema.h"

#define PATTERN_MAX 1024
#define COUNT_MAX 255
#define DEPTH_MAX 32
#define RANGE_LIST 256 /* non-ASCII characters a range may list */

typedef struct out {
    char *buf;
    size_t len, cap;
    bool oom;
} out;

static void put(out *o, const char *s, size_t n) {
    if (o->oom)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 64;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *grown = weir__realloc(o->buf, cap);
        if (!grown) {
            o->oom = true;
            return;
        }
        o->buf = grown;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }

static int why_(char *why, size_t size, int rc, const char *fmt, ...) WEIR_PRINTF(4, 5);
static int why_(char *why, size_t size, int rc, const char *fmt, ...) {
    if (why && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, size, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* `digits` hex digits at p (n bytes left) as a number, or -1. */
static long hex(const char *p, size_t n, size_t digits) {
    if (n < digits)
        return -1;
    long v = 0;
    for (size_t i = 0; i < digits; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* The UTF-8 bytes of code point `cp` into b (4 bytes); their count. */
static size_t utf8(unsigned long cp, char *b) {
    if (cp < 0x80) {
        b[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (char)(0xF0 | (cp >> 18));
    b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The length of the character starting at p (n > 0 bytes left): a UTF-8
 * sequence's, else 1 (ASCII, or a stray byte read as itself). */
static size_t char_len(const char *p, size_t n) {
    uint32_t cp;
    size_t k = weir__utf8_decode((const unsigned char *)p, n, &cp);
    return k ? k : 1;
}

/* The code point of the character p (len bytes, as char_len gave). */
static long decode(const char *p, size_t len) {
    uint32_t cp;
    return weir__utf8_decode((const unsigned char *)p, len, &cp) ? (long)cp
                                                                 : (unsigned char)p[0];
}

/*
 * One escape at p[0] == '\\' (n bytes left, at least 2): a character into
 * *cp (a code point, or -1 for a class `set` like "0-9", `neg` when it is
 * \D \W \S), and its length in *used.  0, or WEIR__PATTERN_INVALID /
 * WEIR__PATTERN_UNSUPPORTED with `why`.
 */
static int escape(const char *p, size_t n, long *cp, const char **set, bool *neg, size_t *used,
                  char *why, size_t size) {
    *set = NULL;
    *neg = false;
    *used = 2;
    char c = p[1];
    switch (c) {
    case 'd': case 'D': *set = "0-9"; break;
    case 'w': case 'W': *set = "A-Za-z0-9_"; break;
    case 's': case 'S': *set = "[:space:]"; break;
    case 't': *cp = '\t'; return 0;
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'x':
        if ((*cp = hex(p + 2, n - 2, 2)) < 0)
            return why_(why, size, WEIR__PATTERN_INVALID, "\\x needs two hex digits");
        *used = 4;
        return *cp ? 0 : why_(why, size, WEIR__PATTERN_UNSUPPORTED, "\\x00 (a NUL)");
    case 'u': {
        long hi = hex(p + 2, n - 2, 4);
        if (hi < 0)
            return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "\\u needs four hex digits "
                                                              "(\\u{...} is not covered)");
        *used = 6;
        *cp = hi;
        if (hi >= 0xD800 && hi <= 0xDBFF) { /* a surrogate pair */
            long lo = n >= 12 && p[6] == '\\' && p[7] == 'u' ? hex(p + 8, n - 8, 4) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF)
                return why_(why, size, WEIR__PATTERN_INVALID, "a lone surrogate \\u%04lX", hi);
            *cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
            *used = 12;
        } else if (hi >= 0xDC00 && hi <= 0xDFFF) {
            return why_(why, size, WEIR__PATTERN_INVALID, "a lone surrogate \\u%04lX", hi);
        }
        return *cp ? 0 : why_(why, size, WEIR__PATTERN_UNSUPPORTED, "\\u0000 (a NUL)");
    }
    case 'b': case 'B':
        return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "word boundaries (\\%c)", c);
    case 'p': case 'P':
        return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "Unicode property escapes (\\%c)", c);
    case 'k':
        return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "named backreferences (\\k)");
    case 'c':
        return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "control escapes (\\c)");
    case '0':
        return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "\\0 (a NUL)");
    default:
        if (c >= '1' && c <= '9')
            return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "backreferences (\\%c)", c);
        if ((unsigned char)c >= 0x80) { /* an escaped non-ASCII character: itself */
            *used = 1 + char_len(p + 1, n - 1);
            *cp = -2; /* the bytes p+1 .. p+used */
            return 0;
        }
        *cp = (unsigned char)c; /* an identity escape: the character itself */
        return 0;
    }
    *neg = c >= 'A' && c <= 'Z';
    *cp = -1;
    return 0;
}

/* Emit code point `cp` outside a bracket: escaped when ERE gives it a
 * meaning. */
static void put_literal(out *o, long cp) {
    char b[8];
    if (cp < 0x80 && strchr(".[]\\()*+?{}|^$", (int)cp) && cp) {
        b[0] = '\\';
        b[1] = (char)cp;
        put(o, b, 2);
        return;
    }
    put(o, b, utf8((unsigned long)cp, b));
}

/*
 * A bracket expression at p[0] == '[' (n bytes left): its POSIX form into
 * o, its length in *used.  POSIX brackets have no escapes, so the members
 * are gathered and ordered: `]` first, then the others, `[` and `^` after
 * them, `-` last.
 */
static int bracket(out *o, const char *p, size_t n, size_t *used, char *why, size_t size) {
    size_t i = 1;
    bool neg = i < n && p[i] == '^';
    if (neg)
        i++;
    out body = {0};
    bool rb = false, lb = false, caret = false, dash = false, any = false;
    int rc = 0;
    while (rc == 0 && i < n && p[i] != ']') {
        long lo;
        const char *set = NULL;
        bool sneg = false;
        size_t len, lo_at = i;
        if (p[i] == '\\' && i + 1 < n && p[i + 1] == 'b') { /* a backspace in a class */
            lo = '\b';
            len = 2;
        } else if (p[i] == '\\') {
            if (i + 1 >= n)
                break;
            rc = escape(p + i, n - i, &lo, &set, &sneg, &len, why, size);
            if (rc == 0 && set && sneg)
                rc = why_(why, size, WEIR__PATTERN_UNSUPPORTED,
                          "a negated class escape (\\%c) inside brackets", p[i + 1]);
        } else {
            len = char_len(p + i, n - i);
            lo = len == 1 ? (unsigned char)p[i] : -2;
        }
        if (rc)
            break;
        i += len;
        any = true;
        if (set) {
            puts_(&body, set);
            continue;
        }
        bool range = i + 1 < n && p[i] == '-' && p[i + 1] != ']';
        if (!range) {
            if (lo == ']')
                rb = true;
            else if (lo == '[')
                lb = true;
            else if (lo == '^')
                caret = true;
            else if (lo == '-')
                dash = true;
            else if (lo == -2)
                put(&body, p + lo_at + (p[lo_at] == '\\'), len - (p[lo_at] == '\\'));
            else {
                char b[8];
                put(&body, b, utf8((unsigned long)lo, b));
            }
            continue;
        }
        /* a range lo-hi: single characters at both ends */
        i++;
        long hi;
        size_t hlen;
        const char *hset = NULL;
        bool hneg;
        if (p[i] == '\\') {
            if (i + 1 >= n)
                break;
            rc = escape(p + i, n - i, &hi, &hset, &hneg, &hlen, why, size);
            if (rc == 0 && hset)
                rc = why_(why, size, WEIR__PATTERN_INVALID, "a class escape ends a range");
        } else {
            hlen = char_len(p + i, n - i);
            hi = hlen == 1 ? (unsigned char)p[i] : -2;
        }
        if (rc)
            break;
        if (lo == -2) /* a literal non-ASCII end: its code point */
            lo = decode(p + lo_at + (p[lo_at] == '\\'), len - (p[lo_at] == '\\'));
        if (hi == -2)
            hi = decode(p + i + (p[i] == '\\'), hlen - (p[i] == '\\'));
        if (lo > hi) {
            rc = why_(why, size, WEIR__PATTERN_INVALID, "a range out of order");
            break;
        }
        if ((lo < 0x80 && strchr("[]^-", (int)lo)) || (hi < 0x80 && strchr("[]^-", (int)hi))) {
            rc = why_(why, size, WEIR__PATTERN_UNSUPPORTED, "a range that starts or ends at [ ] ^ or -");
            break;
        }
        /* glibc's regcomp takes no range with a multibyte end in C.UTF-8:
         * the non-ASCII part is listed, up to RANGE_LIST characters */
        char b[8];
        long ascii_hi = hi < 0x80 ? hi : 0x7F;
        if (lo <= ascii_hi) {
            put(&body, b, utf8((unsigned long)lo, b));
            put(&body, "-", 1);
            put(&body, b, utf8((unsigned long)ascii_hi, b));
        }
        long from = lo > 0x7F ? lo : 0x80;
        if (hi >= from && hi - from >= RANGE_LIST) {
            rc = why_(why, size, WEIR__PATTERN_UNSUPPORTED,
                      "a range of more than %d non-ASCII characters", RANGE_LIST);
            break;
        }
        for (long cp = from; cp <= hi; cp++)
            put(&body, b, utf8((unsigned long)cp, b));
        i += hlen;
    }
    if (rc == 0 && i >= n)
        rc = why_(why, size, WEIR__PATTERN_INVALID, "an unclosed [");
    if (rc == 0 && !any)
        rc = why_(why, size, WEIR__PATTERN_UNSUPPORTED, "an empty class ([] or [^])");
    if (rc == 0) {
        bool only_caret = caret && !rb && !lb && !dash && body.len == 0 && !neg;
        if (only_caret) {
            puts_(o, "\\^");
        } else {
            puts_(o, neg ? "[^" : "[");
            if (rb)
                puts_(o, "]");
            if (body.len)
                put(o, body.buf, body.len);
            if (lb)
                puts_(o, "[");
            if (caret)
                puts_(o, "^");
            if (dash)
                puts_(o, "-");
            puts_(o, "]");
        }
        if (body.oom)
            o->oom = true;
    }
    weir__free(body.buf);
    *used = i + 1;
    return rc;
}

/* What came last: what a quantifier may follow. */
enum last { NOTHING, ATOM, GROUP, GROUP_COUNTED, QUANTIFIER };

/* A counted quantifier {m}, {m,} or {m,n} at p[0] == '{': 1 with its
 * length and bounds, 0 when it is not one (then `{` is a literal). */
static int counted(const char *p, size_t n, size_t *used, long *m, long *mx) {
    size_t i = 1;
    long a = -1, b;
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) /* capped: any count over the cap is refused */
        a = a < 0 ? p[i] - '0' : a > 100000 ? a : a * 10 + (p[i] - '0');
    if (a < 0 || i >= n)
        return 0;
    b = a;
    if (p[i] == ',') {
        b = -1;
        for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            b = b < 0 ? p[i] - '0' : b > 100000 ? b : b * 10 + (p[i] - '0');
        if (i >= n)
            return 0;
    }
    if (p[i] != '}')
        return 0;
    *used = i + 1;
    *m = a;
    *mx = b; /* -1: no upper bound */
    return 1;
}

int weir__pattern_translate(const char *p, size_t n, char **ere, char *why, size_t size) {
    if (!p || !ere)
        return why_(why, size, WEIR__PATTERN_INVALID, "no pattern");
    *ere = NULL;
    if (n > PATTERN_MAX)
        return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "longer than %d bytes", PATTERN_MAX);
    if (memchr(p, '\0', n))
        return why_(why, size, WEIR__PATTERN_UNSUPPORTED, "a NUL");
    out o = {0};
    bool counted_in[DEPTH_MAX + 1] = {false}; /* a group holds a counted repetition */
    int depth = 0, rc = 0;
    enum last last = NOTHING;
    puts_(&o, "");
    for (size_t i = 0; rc == 0 && i < n;) {
        char c = p[i];
        size_t used = 1;
        switch (c) {
        case '\\': {
            if (i + 1 >= n) {
                rc = why_(why, size, WEIR__PATTERN_INVALID, "a trailing backslash");
                break;
            }
            long cp;
            const char *set;
            bool neg;
            if ((rc = escape(p + i, n - i, &cp, &set, &neg, &used, why, size)) != 0)
                break;
            if (set) {
                puts_(&o, neg ? "[^" : "[");
                puts_(&o, set);
                puts_(&o, "]");
            } else if (cp == -2) {
                put(&o, p + i + 1, used - 1);
            } else {
                put_literal(&o, cp);
            }
            last = ATOM;
            break;
        }
        case '[':
            rc = bracket(&o, p + i, n - i, &used, why, size);
            last = ATOM;
            break;
        case '(':
            if (i + 1 < n && p[i + 1] == '?') {
                if (i + 2 < n && p[i + 2] == ':') {
                    used = 3;
                } else {
                    rc = why_(why, size, WEIR__PATTERN_UNSUPPORTED,
                              "lookaround or named groups ((?%c...)", i + 2 < n ? p[i + 2] : ' ');
                    break;
                }
            }
            if (depth == DEPTH_MAX) {
                rc = why_(why, size, WEIR__PATTERN_UNSUPPORTED, "groups nested deeper than %d",
                          DEPTH_MAX);
                break;
            }
            counted_in[++depth] = false;
            puts_(&o, "(");
            last = NOTHING;
            break;
        case ')':
            if (depth == 0) {
                rc = why_(why, size, WEIR__PATTERN_INVALID, "an unmatched )");
                break;
            }
            last = counted_in[depth] ? GROUP_COUNTED : GROUP;
            if (counted_in[depth])
                counted_in[depth - 1] = true;
            depth--;
            puts_(&o, ")");
            break;
        case '|':
            puts_(&o, "|");
            last = NOTHING;
            break;
        case '*':
        case '+':
        case '?':
            if (last == QUANTIFIER && c == '?') { /* lazy: the same matches exist */
                break;
            }
            if (last == NOTHING || last == QUANTIFIER) {
                rc = why_(why, size, WEIR__PATTERN_INVALID, "nothing to repeat at %c", c);
                break;
            }
            put(&o, &c, 1);
            last = QUANTIFIER;
            break;
        case '{': {
            long m, mx;
            if (!counted(p + i, n - i, &used, &m, &mx)) {
                puts_(&o, "\\{"); /* a literal {, as ECMA reads it */
                last = ATOM;
                used = 1;
                break;
            }
            if (last == NOTHING || last == QUANTIFIER) {
                rc = why_(why, size, WEIR__PATTERN_INVALID, "nothing to repeat at {");
                break;
            }
            if (m > COUNT_MAX || mx > COUNT_MAX) {
                rc = why_(why, size, WEIR__PATTERN_UNSUPPORTED, "a repetition count over %d",
                          COUNT_MAX);
                break;
            }
            if (mx >= 0 && mx < m) {
                rc = why_(why, size, WEIR__PATTERN_INVALID, "{%ld,%ld} out of order", m, mx);
                break;
            }
            if (last == GROUP_COUNTED) {
                rc = why_(why, size, WEIR__PATTERN_UNSUPPORTED,
                          "a counted repetition of a group that holds one");
                break;
            }
            char b[48];
            int k = mx == m ? snprintf(b, sizeof b, "{%ld}", m)
                    : mx < 0 ? snprintf(b, sizeof b, "{%ld,}", m)
                             : snprintf(b, sizeof b, "{%ld,%ld}", m, mx);
            put(&o, b, (size_t)k);
            counted_in[depth] = true;
            last = QUANTIFIER;
            break;
        }
        case '^':
        case '$':
            put(&o, &c, 1);
            last = NOTHING;
            break;
        case '.':
            puts_(&o, ".");
            last = ATOM;
            break;
        case ']':
        case '}':
            put_literal(&o, c);
            last = ATOM;
            break;
        default:
            used = char_len(p + i, n - i);
            put(&o, p + i, used);
            last = ATOM;
            break;
        }
        i += used;
    }
    if (rc == 0 && depth)
        rc = why_(why, size, WEIR__PATTERN_INVALID, "an unclosed (");
    if (rc == 0 && o.oom)
        rc = why_(why, size, WEIR__PATTERN_NOMEM, "out of memory");
    if (rc) {
        weir__free(o.buf);
        return rc;
    }
    *ere = o.buf;
    return 0;
}

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;
static void utf8_init(void) {
    utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

int weir__pattern_match(const char *pattern, size_t plen, const char *s, size_t n, char *why,
                        size_t size) {
    if (!pattern || !s)
        return why_(why, size, WEIR__PATTERN_INVALID, "no pattern or string");
    char *ere = NULL;
    int rc = weir__pattern_translate(pattern, plen, &ere, why, size);
    if (rc)
        return rc;
    pthread_once(&utf8_once, utf8_init);
    locale_t was = utf8_locale ? uselocale(utf8_locale) : (locale_t)0;
    regex_t re;
    int crc = regcomp(&re, ere, REG_EXTENDED | REG_NOSUB);
    if (crc != 0) {
        char text[128];
        regerror(crc, &re, text, sizeof text);
        rc = crc == REG_ESPACE ? why_(why, size, WEIR__PATTERN_NOMEM, "out of memory")
                               : why_(why, size, WEIR__PATTERN_INVALID, "%s", text);
    } else {
        regmatch_t whole = {.rm_so = 0, .rm_eo = (regoff_t)n};
        int e = regexec(&re, s, 1, &whole, REG_STARTEND);
        rc = e == 0 ? 1 : e == REG_NOMATCH ? 0
             : why_(why, size, WEIR__PATTERN_NOMEM, "out of memory matching");
        regfree(&re);
    }
    if (utf8_locale)
        uselocale(was);
    weir__free(ere);
    return rc;
}
