/*
 * core/runtime/http.c - HTTP for provider plugins on libcurl.
 *
 * One weir__http = one easy handle plus one multi handle, both kept for the
 * handle's life: the multi's connection cache keeps the TCP (and TLS)
 * connection open between requests (keep-alive).  A request is driven by a
 * short-timeout poll loop so the progress (xferinfo) callback runs often: it
 * aborts the transfer when the weir_signal fires (ABORTED), when no byte
 * arrived for the idle timeout, or when the whole request took longer than
 * its total timeout (both TIMEOUT).  2xx event streams go through the SSE
 * parser as they arrive; a 2xx JSON body is collected whole (<= 64 MiB: the
 * result of a non-streaming call), other bodies up to 64 KiB for failure
 * classification, and a 2xx body that is neither an event stream nor JSON
 * (a captive portal's HTML page, a gzip body) fails the request with a
 * message that quotes its start (see `body_kind`).  weir__http_get is a GET
 * on a handle of its own whose body is always collected (a provider asking
 * its server about itself).  No request header value is ever logged or
 * copied into a message (API keys travel in headers); of the response's,
 * only Content-Type and Content-Encoding are quoted, made printable.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "failure.h"
#include "http.h"
#include "cancel.h"
#include "sse.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 10000L
#define DEFAULT_IDLE_TIMEOUT_MS 300000L
#define MAX_ERROR_BODY ((size_t)64 << 10)
/* A 2xx JSON body is the result itself (a server compaction's items, with
 * their encrypted content, can be far larger than an error): kept whole up
 * to this, past which it is cut and fails to parse. */
#define MAX_RESULT_BODY ((size_t)64 << 20)
/* Bytes of a body quoted in a "not an event stream" message. */
#define SHOW_BODY 200
/* A body without a Content-Type that is still only blank lines (or a BOM)
 * after this many bytes is taken for an event stream. */
#define SNIFF_MAX 4096
/* How long one poll may sleep: bounds cancel and idle-timeout latency. */
#define POLL_MS 50

struct weir__http {
    CURLM *multi;
    CURL *easy;
    long connects;
    char errbuf[CURL_ERROR_SIZE];
};

/*
 * What a 2xx body of weir__http_sse is, decided from the response's head and
 * its first bytes:
 *   BODY_STREAM      an event stream, parsed as it arrives: Content-Type
 *                    text/event-stream, or no Content-Type, text/plain or a
 *                    JSON type and a body that starts like SSE (a field name
 *                    and ':' or a line end, or a ':' comment, after blank
 *                    lines and a BOM), which some compatible servers send
 *   BODY_COLLECT     JSON (application/json, application/x-ndjson, ...+json)
 *                    that is not SSE: collected, and WEIR_OK, for the caller
 *                    to read (a caller may POST to a non-streaming endpoint)
 *   BODY_NOT_STREAM  anything else: another type (text/html from a captive
 *                    portal or a web server), a Content-Encoding weir did not
 *                    ask for (no Accept-Encoding is sent, so libcurl decodes
 *                    nothing), a gzip body (1f 8b) whatever its headers say,
 *                    or an untyped body that does not look like SSE.
 *                    Collected, and the request fails (not_stream_failure)
 *   BODY_UNDECIDED   not enough bytes yet
 */
typedef enum { BODY_UNDECIDED, BODY_STREAM, BODY_COLLECT, BODY_NOT_STREAM } body_kind;

/* Per-request state shared by the curl callbacks. */
typedef struct xfer {
    weir_signal *signal;
    weir__sse *sse;
    weir_sse_fn on_event;   /* the caller's event callback */
    void *ud;
    bool cb_stopped;        /* on_event returned non-zero */
    weir_http_response *resp;
    uint64_t last_data_us;  /* monotonic time of the last byte received */
    uint64_t idle_us;
    uint64_t start_us;      /* monotonic time the request started */
    uint64_t total_us;      /* 0: no total timeout */
    long long retry_after_ms_hdr; /* retry-after-ms, -1 if absent */
    long long retry_after_hdr;    /* Retry-After, -1 if absent */
    json_t *limits;               /* the rate-limit headers (weir__rate_limit_header) */
    char type[64];   /* the response's media type (Content-Type without
                        parameters, printable ASCII), "" when absent */
    char encoding[32]; /* its Content-Encoding (printable ASCII), "" when absent */
    body_kind kind;  /* what a 2xx body is (weir__http_sse) */
    size_t head_bytes; /* bytes of the current response's head so far */
    bool head_done;  /* the blank line that ends the head arrived */
    bool head_too_large; /* head_bytes went over WEIR__HTTP_MAX_HEAD */
    bool collect;    /* a GET: the body is collected whatever its type */
    int sse_rc;      /* non-zero: the parser or the event callback stopped */
    bool nomem;
    bool timed_out;
    bool total_expired;
    bool cancelled;
    size_t body_cap;
} xfer;

/* ---- global init --------------------------------------------------------- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init_once(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int weir__http_global_init(void) {
    pthread_once(&global_once, global_init_once);
    return global_rc == CURLE_OK ? WEIR_OK : WEIR_E_INTERNAL;
}

/* ---- Retry-After ----------------------------------------------------------- */

/* Trim optional whitespace; returns the start and sets *len. */
static const char *trim(const char *s, size_t *len) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        n--;
    *len = n;
    return s;
}

/* All-digit decimal integer (<= 18 digits) of n bytes, or -1. */
static long long parse_digits(const char *s, size_t n) {
    if (n == 0 || n > 18)
        return -1;
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

long long weir__parse_retry_after(const char *value, int64_t now_ms) {
    if (!value)
        return -1;
    size_t n;
    const char *s = trim(value, &n);
    if (n == 0)
        return -1;
    if (isdigit((unsigned char)s[0])) {
        long long secs = parse_digits(s, n);
        if (secs < 0 || secs > LLONG_MAX / 1000)
            return -1;
        return secs * 1000;
    }
    /* HTTP-date: IMF-fixdate, RFC 850 or asctime; all start with a day name */
    if (!isalpha((unsigned char)s[0]) || n > 64)
        return -1;
    char date[65];
    memcpy(date, s, n);
    date[n] = '\0';
    time_t t = curl_getdate(date, NULL);
    if (t < 0)
        return -1;
    long long ms = (long long)t * 1000 - now_ms;
    return ms > 0 ? ms : 0;
}

/* retry-after-ms: a non-negative number of ms (a fraction is rounded up). */
static long long parse_retry_after_ms(const char *value) {
    size_t n;
    const char *s = trim(value, &n);
    const char *dot = memchr(s, '.', n);
    long long whole = parse_digits(s, dot ? (size_t)(dot - s) : n);
    if (whole < 0)
        return -1;
    if (dot) {
        size_t frac = n - (size_t)(dot - s) - 1;
        if (frac == 0 || parse_digits(dot + 1, frac) < 0)
            return -1;
        if (parse_digits(dot + 1, frac) > 0)
            whole++;
    }
    return whole;
}

/* ---- callbacks ------------------------------------------------------------- */

/* Copy a request id keeping printable ASCII only (never a secret: ids are
 * echoed by providers for support, not credentials). */
static void copy_request_id(char *dst, size_t size, const char *v, size_t n) {
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < size; i++)
        if (v[i] > 0x20 && v[i] < 0x7f)
            dst[j++] = v[i];
    dst[j] = '\0';
}

static bool header_is(const char *line, size_t name_len, const char *name) {
    return strlen(name) == name_len && strncasecmp(line, name, name_len) == 0;
}

/* Copy the printable ASCII of a header value, up to `stop` (or its end),
 * trimmed. */
static void copy_token(char *dst, size_t size, const char *v, size_t n, char stop) {
    size_t j = 0;
    for (size_t i = 0; i < n && v[i] != stop && j + 1 < size; i++)
        if (v[i] >= 0x20 && v[i] < 0x7f)
            dst[j++] = v[i];
    while (j && dst[j - 1] == ' ')
        j--;
    dst[j] = '\0';
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *ud) {
    xfer *x = ud;
    size_t n = size * nmemb;
    x->last_data_us = weir__mono_us();
    if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* a new status line (also after 1xx): start over */
        long status = 0;
        const char *sp = memchr(line, ' ', n);
        for (const char *p = sp ? sp + 1 : line + n; p < line + n && isdigit((unsigned char)*p);
             p++)
            status = status * 10 + (*p - '0');
        x->resp->status = status;
        x->type[0] = x->encoding[0] = '\0';
        x->kind = BODY_UNDECIDED;
        x->head_bytes = n;
        x->head_done = false;
        x->retry_after_hdr = x->retry_after_ms_hdr = -1;
        x->resp->request_id[0] = '\0';
        json_decref(x->limits); /* an interim response's (100 Continue) */
        x->limits = NULL;
        return n;
    }
    /* libcurl holds one header line at most CURL_MAX_HTTP_HEADER bytes but
     * a head of many lines, in this version, up to 300 KiB or without a
     * bound: weir's own bound, below that, comes first */
    x->head_bytes += n;
    if (x->head_bytes > WEIR__HTTP_MAX_HEAD) {
        x->head_too_large = true;
        return 0; /* makes curl stop with CURLE_WRITE_ERROR */
    }
    if (n <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        x->head_done = true; /* the blank line (trailers come later, if any) */
        return n;
    }
    const char *colon = memchr(line, ':', n);
    if (!colon)
        return n;
    size_t name_len = (size_t)(colon - line);
    size_t vlen = n - name_len - 1;
    char value[256];
    if (vlen >= sizeof value)
        vlen = sizeof value - 1;
    memcpy(value, colon + 1, vlen);
    value[vlen] = '\0';
    size_t tl;
    const char *v = trim(value, &tl);
    if (header_is(line, name_len, "content-type")) {
        copy_token(x->type, sizeof x->type, v, tl, ';');
    } else if (header_is(line, name_len, "content-encoding")) {
        copy_token(x->encoding, sizeof x->encoding, v, tl, '\0');
    } else if (header_is(line, name_len, "retry-after")) {
        x->retry_after_hdr = weir__parse_retry_after(v, weir__now_ms());
    } else if (header_is(line, name_len, "retry-after-ms")) {
        x->retry_after_ms_hdr = parse_retry_after_ms(v);
    } else if (!weir__rate_limit_header(&x->limits, line, name_len, v, tl)) {
        x->nomem = true;
    } else if ((header_is(line, name_len, "x-request-id") ||
                header_is(line, name_len, "request-id")) &&
               !x->resp->request_id[0]) {
        copy_request_id(x->resp->request_id, sizeof x->resp->request_id, v, tl);
    }
    return n;
}

static bool media_is(const char *type, const char *want) { return strcasecmp(type, want) == 0; }

/* A JSON media type: application/json, application/x-ndjson,
 * application/ndjson, or any type ending in "+json". */
static bool media_is_json(const char *type) {
    size_t n = strlen(type);
    return media_is(type, "application/json") || media_is(type, "application/x-ndjson") ||
           media_is(type, "application/ndjson") ||
           (n > 5 && strcasecmp(type + n - 5, "+json") == 0);
}

/* The start of an event stream: after CR/LF and a UTF-8 BOM, a field name
 * (data, event, id, retry) ended by ':' or a line end, or a ':' comment.
 * BODY_UNDECIDED while the bytes are a prefix of one (or only blank lines)
 * and more may come. */
static body_kind sniff_sse(const char *p, size_t n, bool final) {
    static const char bom[] = "\xef\xbb\xbf";
    static const char *const fields[] = {"data", "event", "id", "retry"};
    size_t i = 0;
    if (n && p[0] == bom[0]) {
        if (n < 3 && memcmp(p, bom, n) == 0)
            return final ? BODY_NOT_STREAM : BODY_UNDECIDED;
        if (memcmp(p, bom, 3) != 0)
            return BODY_NOT_STREAM;
        i = 3;
    }
    while (i < n && (p[i] == '\r' || p[i] == '\n'))
        i++;
    if (i == n) /* blank so far: an empty stream unless more comes */
        return final || n >= SNIFF_MAX ? BODY_STREAM : BODY_UNDECIDED;
    if (p[i] == ':')
        return BODY_STREAM;
    bool prefix = false;
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        size_t fl = strlen(fields[k]), left = n - i;
        if (left <= fl) {
            prefix |= memcmp(p + i, fields[k], left) == 0;
        } else if (memcmp(p + i, fields[k], fl) == 0 &&
                   (p[i + fl] == ':' || p[i + fl] == '\r' || p[i + fl] == '\n')) {
            return BODY_STREAM;
        }
    }
    return prefix && !final ? BODY_UNDECIDED : BODY_NOT_STREAM;
}

/* Decide what the 2xx body is from the head and the `n` bytes so far;
 * `final`: no more will come. */
static body_kind body_kind_of(const xfer *x, const char *p, size_t n, bool final) {
    if (x->encoding[0] && !media_is(x->encoding, "identity"))
        return BODY_NOT_STREAM;
    if (n >= 2 && (unsigned char)p[0] == 0x1f && (unsigned char)p[1] == 0x8b)
        return BODY_NOT_STREAM; /* gzip data, whatever the head says */
    if (n == 1 && (unsigned char)p[0] == 0x1f && !final)
        return BODY_UNDECIDED;
    if (media_is(x->type, "text/event-stream"))
        return BODY_STREAM;
    /* servers that send SSE under no type, text/plain or a JSON type (a
     * body that starts with "data:" is no JSON) keep working */
    bool json = media_is_json(x->type);
    if (x->type[0] && !json && !media_is(x->type, "text/plain"))
        return BODY_NOT_STREAM;
    body_kind k = sniff_sse(p, n, final);
    return k == BODY_NOT_STREAM && json ? BODY_COLLECT : k;
}

/* How much of the body collect() keeps: a 2xx body that may be a JSON
 * result (undecided yet, or JSON, or a GET's) whole up to MAX_RESULT_BODY;
 * an error body or a 2xx of another type (an HTML page) MAX_ERROR_BODY. */
static size_t body_limit(const xfer *x) {
    const weir_http_response *r = x->resp;
    bool ok = r->status >= 200 && r->status < 300;
    bool result = x->collect || x->kind == BODY_UNDECIDED || x->kind == BODY_COLLECT;
    return ok && result ? MAX_RESULT_BODY : MAX_ERROR_BODY;
}

/* Append to resp->body, keeping its first body_limit() bytes.  false when
 * out of memory. */
static bool collect(xfer *x, const char *ptr, size_t n) {
    weir_http_response *r = x->resp;
    size_t limit = body_limit(x);
    size_t take = r->body_len < limit ? limit - r->body_len : 0;
    if (take > n)
        take = n;
    if (take) {
        if (r->body_len + take + 1 > x->body_cap) {
            size_t cap = x->body_cap ? x->body_cap * 2 : 1024;
            while (cap < r->body_len + take + 1)
                cap *= 2;
            char *b = weir__realloc(r->body, cap);
            if (!b) {
                x->nomem = true;
                return false;
            }
            r->body = b;
            x->body_cap = cap;
        }
        memcpy(r->body + r->body_len, ptr, take);
        r->body_len += take;
        r->body[r->body_len] = '\0';
    }
    return true; /* the rest of an oversized body is read and dropped */
}

/* Feed bytes to the parser; false (x->sse_rc set) when it stopped. */
static bool feed(xfer *x, const char *ptr, size_t n) {
    int rc = weir__sse_feed(x->sse, ptr, n);
    if (rc)
        x->sse_rc = rc;
    return rc == 0;
}

/* Settle x->kind from what was collected (`final`: the body ended); a body
 * found to be a stream goes to the parser and leaves resp->body.  false when
 * the parser stopped. */
static bool decide(xfer *x, bool final) {
    weir_http_response *r = x->resp;
    x->kind = body_kind_of(x, r->body, r->body_len, final);
    if (x->kind != BODY_STREAM)
        return true;
    bool ok = !r->body_len || feed(x, r->body, r->body_len);
    weir__free(r->body);
    r->body = NULL;
    r->body_len = x->body_cap = 0;
    return ok;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud) {
    xfer *x = ud;
    size_t n = size * nmemb;
    x->last_data_us = weir__mono_us();
    weir_http_response *r = x->resp;
    if (x->collect || r->status < 200 || r->status >= 300)
        return collect(x, ptr, n) ? n : 0;
    if (x->kind == BODY_STREAM)
        return feed(x, ptr, n) ? n : 0; /* 0 makes curl stop with CURLE_WRITE_ERROR */
    size_t before = r->body_len;
    if (!collect(x, ptr, n))
        return 0;
    size_t kept = r->body_len - before; /* all of it unless past body_limit() */
    if (x->kind == BODY_UNDECIDED && !decide(x, false))
        return 0;
    if (x->kind == BODY_STREAM && kept < n && !feed(x, ptr + kept, n - kept))
        return 0;
    return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    xfer *x = ud;
    if (weir__signal_cancelled(x->signal)) {
        x->cancelled = true;
        return 1;
    }
    if (x->total_us && weir__mono_us() - x->start_us >= x->total_us) {
        x->total_expired = true;
        return 1;
    }
    if (weir__mono_us() - x->last_data_us >= x->idle_us) {
        x->timed_out = true;
        return 1;
    }
    return 0;
}

/* ---- handles --------------------------------------------------------------- */

int weir__http_create(weir__http **out) {
    if (!out)
        return WEIR_E_INVAL;
    *out = NULL;
    int rc = weir__http_global_init();
    if (rc)
        return rc;
    weir__http *h = weir__calloc(1, sizeof *h);
    if (!h)
        return WEIR_E_NOMEM;
    h->multi = curl_multi_init();
    h->easy = curl_easy_init();
    if (!h->multi || !h->easy) {
        weir__http_destroy(h);
        return WEIR_E_NOMEM;
    }
    CURL *e = h->easy;
    if (curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) ||
        curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) ||
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, h->errbuf) ||
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") ||
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) ||
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) ||
        curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress) ||
        curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L)) {
        weir__http_destroy(h);
        return WEIR_E_INTERNAL;
    }
    *out = h;
    return WEIR_OK;
}

void weir__http_destroy(weir__http *h) {
    if (!h)
        return;
    if (h->easy)
        curl_easy_cleanup(h->easy);
    if (h->multi)
        curl_multi_cleanup(h->multi);
    weir__free(h);
}

long weir__http_connects(const weir__http *h) { return h ? h->connects : 0; }

void weir__http_response_clear(weir_http_response *resp) {
    if (!resp)
        return;
    weir__free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
    resp->status = 0;
    resp->retry_after_ms = -1;
    resp->request_id[0] = '\0';
}

/* ---- one request ----------------------------------------------------------- */

/* Canonical code for a curl result that is not ours (cancel/idle/SSE). */
static const char *curl_failure_code(CURLcode rc) {
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return "TIMEOUT";
    case CURLE_ABORTED_BY_CALLBACK:
        return "ABORTED";
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
        return "TRANSPORT";
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
        return "INVALID_REQUEST";
    default:
        return "UNKNOWN";
    }
}

static int status_for_code(const char *code) {
    if (strcmp(code, "TIMEOUT") == 0)
        return WEIR_E_TIMEOUT;
    if (strcmp(code, "ABORTED") == 0)
        return WEIR_E_CANCELLED;
    if (strcmp(code, "INVALID_REQUEST") == 0)
        return WEIR_E_INVAL;
    return WEIR_E_IO;
}

/* `url` for a message: without user:password@ and without the query (either
 * may carry a key). */
static void url_for_message(const char *url, char *out, size_t size) {
    const char *scheme = strstr(url, "://");
    const char *host = scheme ? scheme + 3 : url;
    size_t auth = strcspn(host, "/?#");
    const char *at = memchr(host, '@', auth);
    size_t head = (size_t)(host - url), rest_at = at ? (size_t)(at + 1 - url) : head;
    size_t rest = strcspn(url + rest_at, "?#");
    snprintf(out, size, "%.*s%.*s", (int)head, url, (int)rest, url + rest_at);
}

/* Set *failure (if asked) and return the matching status. */
static int fail(json_t **failure, const char *code, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int fail(json_t **failure, const char *code, const char *fmt, ...) {
    if (failure) {
        va_list ap;
        va_start(ap, fmt);
        *failure = weir__failure_vnew(NULL, code, fmt, ap);
        va_end(ap);
        if (!*failure)
            return WEIR_E_NOMEM;
    }
    return status_for_code(code);
}

/*
 * The failure code of a response that is not what an LLM API sends: a 2xx
 * body that is not an event stream (BODY_NOT_STREAM) and a head over the
 * limits.  UNKNOWN, not TRANSPORT: the request reached something that
 * answered on purpose, with a page or an encoding no LLM API sends (a
 * captive portal, a proxy's login or block page, a base_url that names a
 * web site, a server that compresses unasked).  The same request gets the
 * same answer until a person acts (logs in, fixes base_url or the proxy),
 * so a retry only delays the message and an operator expects the turn to
 * fail at once with it.  TRANSPORT is in the retry plugin's default
 * retryable_codes (and counts towards its circuit breaker: an open breaker
 * would then hide this message behind its own); UNKNOWN is not retried
 * (and, as any answer, ends the breaker's streak).  INVALID_REQUEST or AUTH
 * would blame the request or the key, which are not at fault.  An operator
 * who wants retries anyway lists UNKNOWN in retryable_codes.
 */
#define NOT_AN_API_ANSWER "UNKNOWN"

/* A code point that is valid UTF-8 but moves the terminal's text: the C1
 * controls, the line and paragraph separators, the bidirectional marks. */
static bool cp_hidden(uint32_t cp) {
    return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x200e && cp <= 0x200f) ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

#define SHOWN_SIZE (SHOW_BODY * 4 + 8) /* \xNN per byte at worst, "..." */

/* The first SHOW_BODY bytes of `p` (n bytes) made printable into `out`
 * (SHOWN_SIZE bytes): valid UTF-8 kept but for cp_hidden (as \uNNNN), '\'
 * doubled, \n \r \t named, other controls and invalid bytes as \xNN, so a
 * binary (gzip) body prints safely on one line; "..." when bytes were left
 * out.  A UTF-8 sequence is never cut. */
static void show_body(const char *p, size_t n, char *out) {
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp = 0;
        size_t len = s[i] >= 0x80 ? weir__utf8_decode(s + i, n - i, &cp) : 1;
        if (i + (len ? len : 1) > SHOW_BODY)
            break;
        char esc[12];
        const char *put = esc;
        size_t k;
        if (len > 1 && !cp_hidden(cp)) {
            put = p + i, k = len;
        } else if (len > 1) {
            k = (size_t)snprintf(esc, sizeof esc, "\\u%04lx", (unsigned long)cp);
        } else if (s[i] == '\\' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
            esc[0] = '\\';
            esc[1] = s[i] == '\\' ? '\\' : s[i] == '\n' ? 'n' : s[i] == '\r' ? 'r' : 't';
            k = 2;
        } else if (s[i] >= 0x20 && s[i] < 0x7f) {
            put = p + i, k = 1;
        } else {
            k = (size_t)snprintf(esc, sizeof esc, "\\x%02x", s[i]);
        }
        memcpy(out + o, put, k);
        o += k;
        i += len ? len : 1;
    }
    if (i < n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* Fail with a response's code and message plus its status and request id
 * (as weir__failure_from_http has them). */
static int fail_response(json_t **failure, const weir_http_response *r, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static int fail_response(json_t **failure, const weir_http_response *r, const char *fmt, ...) {
    if (failure) {
        va_list ap;
        va_start(ap, fmt);
        json_t *f = weir__failure_vnew(NULL, NOT_AN_API_ANSWER, fmt, ap);
        va_end(ap);
        if (!f)
            return WEIR_E_NOMEM;
        /* json_object_set_new consumes the value even when it fails (a NULL
         * one fails); request_id is printable ASCII (copy_request_id) */
        int bad = r->status > 0 ? json_object_set_new(f, "status", json_integer(r->status)) : 0;
        if (r->request_id[0])
            bad |= json_object_set_new(f, "request_id", json_string(r->request_id));
        if (bad) {
            json_decref(f);
            return WEIR_E_NOMEM;
        }
        *failure = f;
    }
    return status_for_code(NOT_AN_API_ANSWER);
}

/* "HTTP 200 with Content-Type text/html (not an event stream): <body>". */
static int not_stream_failure(json_t **failure, const xfer *x) {
    const weir_http_response *r = x->resp;
    char shown[SHOWN_SIZE];
    show_body(r->body, r->body_len, shown);
    bool encoded = x->encoding[0] && !media_is(x->encoding, "identity");
    bool gzip = r->body_len >= 2 && (unsigned char)r->body[0] == 0x1f &&
                (unsigned char)r->body[1] == 0x8b;
    return fail_response(failure, r, "HTTP %ld with %s%s%s%s (not an event stream%s): %s",
                         r->status, x->type[0] ? "Content-Type " : "no Content-Type", x->type,
                         encoded ? " and Content-Encoding " : "", encoded ? x->encoding : "",
                         encoded ? "; weir did not ask for compression"
                         : gzip  ? "; the body is gzip data"
                                 : "",
                         r->body_len ? shown : "(empty body)");
}

/* libcurl stopped on one header line over CURL_MAX_HTTP_HEADER: it says
 * CURLE_OUT_OF_MEMORY (CURLE_TOO_LARGE since 8.6.0) while a head is under
 * way, before the blank line that ends it. */
static bool curl_head_too_large(CURLcode cr, const xfer *x) {
#if LIBCURL_VERSION_NUM >= 0x080600
    if (cr == CURLE_TOO_LARGE)
        return x->resp->status != 0 && !x->head_done;
#endif
    return cr == CURLE_OUT_OF_MEMORY && x->resp->status != 0 && !x->head_done;
}

/* Failure for a parser/callback stop (rc from weir__sse_feed/finish).  A stop
 * by the caller's callback is ABORTED whatever value it returned (it may
 * collide with the parser's own negative codes). */
static int sse_failure(json_t **failure, const xfer *x, int rc) {
    if (x->cb_stopped)
        return fail(failure, "ABORTED", "stopped by the SSE event callback");
    if (rc == WEIR__SSE_NOMEM)
        return WEIR_E_NOMEM;
    if (rc == WEIR__SSE_TOO_LONG)
        return fail(failure, "TRANSPORT", "SSE line or event longer than %zu bytes",
                    WEIR__SSE_MAX_LINE);
    return fail(failure, "ABORTED", "stopped by the SSE event callback");
}

/* The parser's event callback: forwards to the caller's and notes a stop. */
static int on_sse_event(void *ud, const char *event, const char *data, size_t data_len) {
    xfer *x = ud;
    int rc = x->on_event(x->ud, event, data, data_len);
    if (rc)
        x->cb_stopped = true;
    return rc;
}

/* Run the added transfer to completion; the curl result. */
static CURLcode drive(weir__http *h) {
    CURLcode result = CURLE_OK;
    int running = 1;
    while (running) {
        CURLMcode mc = curl_multi_perform(h->multi, &running);
        if (mc == CURLM_OK && running)
            mc = curl_multi_poll(h->multi, NULL, 0, POLL_MS, NULL);
        if (mc != CURLM_OK) {
            snprintf(h->errbuf, sizeof h->errbuf, "%s", curl_multi_strerror(mc));
            return mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
        }
    }
    int left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(h->multi, &left)))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == h->easy)
            result = msg->data.result;
    return result;
}

/* One request on `h`: a POST whose 2xx event-stream body goes to on_event
 * (weir__http_sse), or, with `get`, a GET whose body is collected whatever
 * its status and type (weir__http_get). */
static int perform(weir__http *h, weir_signal *signal, const weir_http_request *req, bool get,
                   weir_sse_fn on_event, void *ud, weir_http_response *resp, json_t **failure) {
    if (failure)
        *failure = NULL;
    if (resp) {
        memset(resp, 0, sizeof *resp);
        resp->retry_after_ms = -1;
    }
    if (!h || !req || !resp || (!on_event && !get))
        return fail(failure, "INVALID_REQUEST", "HTTP request: %s is NULL",
                    !h ? "the HTTP handle" : !req ? "req" : !resp ? "resp" : "on_event");
    /* 1.0 and 1.1 plugins pass the struct without total_timeout_ms */
    const size_t min_size = offsetof(weir_http_request, total_timeout_ms);
    if (req->struct_size < min_size || !req->url || (!req->body && req->body_len) ||
        (get && (req->body || req->body_len)))
        return fail(failure, "INVALID_REQUEST", "HTTP request: %s",
                    req->struct_size < min_size ? "struct_size too small"
                    : !req->url                    ? "url is NULL"
                    : get                          ? "a GET has no body"
                                                   : "body is NULL but body_len > 0");

    if (weir__signal_cancelled(signal)) {
        const char *cause = weir__signal_cause(signal);
        return fail(failure, "ABORTED", "request cancelled%s%s%s", *cause ? " (" : "", cause,
                    *cause ? ")" : "");
    }

    xfer x = {.signal = signal, .resp = resp, .on_event = on_event, .ud = ud, .collect = get};
    x.retry_after_hdr = x.retry_after_ms_hdr = -1;
    long idle_ms = req->idle_timeout_ms > 0 ? req->idle_timeout_ms : DEFAULT_IDLE_TIMEOUT_MS;
    x.idle_us = (uint64_t)idle_ms * 1000u;
    long total_ms = req->struct_size >= offsetof(weir_http_request, total_timeout_ms) +
                                            sizeof req->total_timeout_ms &&
                            req->total_timeout_ms > 0
                        ? req->total_timeout_ms
                        : 0;
    x.total_us = (uint64_t)total_ms * 1000u;
    if (!get && weir__sse_create(on_sse_event, &x, &x.sse))
        return WEIR_E_NOMEM;

    struct curl_slist *headers = NULL;
    bool slist_ok = true;
    for (const char *const *hd = req->headers; hd && *hd && slist_ok; hd++) {
        struct curl_slist *n = curl_slist_append(headers, *hd);
        slist_ok = n != NULL;
        if (n)
            headers = n;
    }
    if (slist_ok) { /* no "Expect: 100-continue" round trip for big bodies */
        struct curl_slist *n = curl_slist_append(headers, "Expect:");
        slist_ok = n != NULL;
        if (n)
            headers = n;
    }
    if (!slist_ok) {
        curl_slist_free_all(headers);
        weir__sse_destroy(x.sse);
        return WEIR_E_NOMEM;
    }

    CURL *e = h->easy;
    h->errbuf[0] = '\0';
    long connect_ms = req->connect_timeout_ms > 0 ? req->connect_timeout_ms
                                                  : DEFAULT_CONNECT_TIMEOUT_MS;
    CURLcode cr = CURLE_OK;
    bool method_set =
        get ? curl_easy_setopt(e, CURLOPT_HTTPGET, 1L) == CURLE_OK
            : curl_easy_setopt(e, CURLOPT_POST, 1L) == CURLE_OK &&
                  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                                   (curl_off_t)req->body_len) == CURLE_OK &&
                  curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body ? req->body : "") ==
                      CURLE_OK;
    if (!method_set || curl_easy_setopt(e, CURLOPT_URL, req->url) ||
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers) ||
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect_ms) ||
        curl_easy_setopt(e, CURLOPT_HEADERDATA, &x) ||
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &x) ||
        curl_easy_setopt(e, CURLOPT_XFERINFODATA, &x)) {
        cr = CURLE_FAILED_INIT;
        snprintf(h->errbuf, sizeof h->errbuf, "could not set the request options");
    } else if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
        cr = CURLE_FAILED_INIT;
        snprintf(h->errbuf, sizeof h->errbuf, "could not start the transfer");
    } else {
        x.last_data_us = x.start_us = weir__mono_us();
        cr = drive(h);
        curl_multi_remove_handle(h->multi, e);
        long n = 0;
        if (curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &n) == CURLE_OK && n > 0)
            h->connects += n;
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(headers);

    resp->retry_after_ms = x.retry_after_ms_hdr >= 0 ? x.retry_after_ms_hdr : x.retry_after_hdr;
    weir__http_last_set(resp, req->url, x.limits);
    json_decref(x.limits);
    int rc = WEIR_OK;
    if (x.cancelled) {
        const char *cause = signal ? weir__signal_cause(signal) : "";
        rc = fail(failure, "ABORTED", "request cancelled%s%s%s", *cause ? " (" : "", cause,
                  *cause ? ")" : "");
    } else if (x.total_expired) {
        rc = get ? fail(failure, "TIMEOUT",
                        "total timeout of %ld ms expired before the response ended", total_ms)
                 : fail(failure, "TIMEOUT",
                        "total timeout (stream_total_timeout_ms) of %ld ms expired before the "
                        "response ended",
                        total_ms);
    } else if (x.timed_out) {
        rc = fail(failure, "TIMEOUT", "no data for %ld ms", idle_ms);
    } else if (x.nomem) {
        rc = WEIR_E_NOMEM;
    } else if (x.head_too_large) {
        rc = fail_response(failure, resp,
                           "response header too large: more than %zu bytes of header lines "
                           "(weir's limit)",
                           (size_t)WEIR__HTTP_MAX_HEAD);
    } else if (curl_head_too_large(cr, &x)) {
        rc = fail_response(failure, resp,
                           "response header too large: a header line is longer than libcurl's "
                           "limit of %d bytes (CURL_MAX_HTTP_HEADER; libcurl: %s)",
                           (int)CURL_MAX_HTTP_HEADER, h->errbuf[0] ? h->errbuf : curl_easy_strerror(cr));
    } else if (x.sse_rc) {
        rc = sse_failure(failure, &x, x.sse_rc);
    } else if (cr != CURLE_OK) {
        /* the URL, then libcurl's detail once: its error buffer already ends
         * with curl_easy_strerror()'s text when it has one */
        const char *code = curl_failure_code(cr);
        char where[512];
        url_for_message(req->url, where, sizeof where);
        bool unreachable = cr == CURLE_COULDNT_CONNECT || cr == CURLE_COULDNT_RESOLVE_HOST ||
                           cr == CURLE_COULDNT_RESOLVE_PROXY;
        const char *what = curl_easy_strerror(cr);
        bool said = h->errbuf[0] && strstr(h->errbuf, what); /* the buffer has it already */
        rc = fail(failure, code, "%s %s: %s%s%s", unreachable ? "cannot reach" : get ? "GET" : "POST",
                  where, said ? "" : what, h->errbuf[0] && !said ? ": " : "", h->errbuf);
    } else if (!get && resp->status >= 200 && resp->status < 300) {
        if (x.kind == BODY_UNDECIDED && !decide(&x, true)) {
            rc = sse_failure(failure, &x, x.sse_rc);
        } else if (x.kind == BODY_NOT_STREAM) {
            rc = not_stream_failure(failure, &x);
        } else if (x.kind == BODY_STREAM) {
            int fr = weir__sse_finish(x.sse);
            if (fr)
                rc = sse_failure(failure, &x, fr);
        }
    }
    weir__sse_destroy(x.sse);
    return rc;
}

int weir__http_sse(weir__http *h, weir_signal *signal, const weir_http_request *req,
                   weir_sse_fn on_event, void *ud, weir_http_response *resp,
                   json_t **failure) {
    return perform(h, signal, req, false, on_event, ud, resp, failure);
}

int weir__http_get(const weir_http_request *req, weir_http_response *resp, json_t **failure) {
    if (failure)
        *failure = NULL;
    if (resp) {
        memset(resp, 0, sizeof *resp);
        resp->retry_after_ms = -1;
    }
    weir__http *h = NULL;
    int rc = weir__http_create(&h);
    if (rc != WEIR_OK)
        return rc == WEIR_E_NOMEM ? rc : fail(failure, "UNKNOWN", "cannot set up libcurl");
    rc = perform(h, NULL, req, true, NULL, NULL, resp, failure);
    weir__http_destroy(h); /* closes the connection */
    return rc;
}

/* --- the host's pool of handles ------------------------------------------- */

struct weir__http_pool {
    pthread_mutex_t mu;
    weir__http *idle[WEIR__HTTP_POOL_IDLE];
    size_t n;
};

int weir__http_pool_create(weir__http_pool **out) {
    if (!out)
        return WEIR_E_INVAL;
    weir__http_pool *p = weir__calloc(1, sizeof *p);
    if (!p)
        return WEIR_E_NOMEM;
    pthread_mutex_init(&p->mu, NULL);
    *out = p;
    return WEIR_OK;
}

void weir__http_pool_destroy(weir__http_pool *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        weir__http_destroy(p->idle[i]);
    pthread_mutex_destroy(&p->mu);
    weir__free(p);
}

int weir__http_pool_take(weir__http_pool *p, weir__http **out) {
    if (!p || !out)
        return WEIR_E_INVAL;
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n > 0)
        *out = p->idle[--p->n];
    pthread_mutex_unlock(&p->mu);
    return *out ? WEIR_OK : weir__http_create(out);
}

void weir__http_pool_give(weir__http_pool *p, weir__http *h) {
    if (!h)
        return;
    if (p) {
        pthread_mutex_lock(&p->mu);
        bool kept = p->n < WEIR__HTTP_POOL_IDLE;
        if (kept)
            p->idle[p->n++] = h;
        pthread_mutex_unlock(&p->mu);
        if (kept)
            return;
    }
    weir__http_destroy(h);
}

size_t weir__http_pool_idle(weir__http_pool *p) {
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    size_t n = p->n;
    pthread_mutex_unlock(&p->mu);
    return n;
}
