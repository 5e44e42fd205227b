/*
 * core/http.c - HTTP for provider plugins on libcurl.
 *
 * One weir__http = one easy handle plus one multi handle, both kept for the
 * handle's life: the multi's connection cache keeps the TCP (and TLS)
 * connection open between requests (keep-alive).  A request is driven by a
 * short-timeout poll loop so the progress (xferinfo) callback runs often: it
 * aborts the transfer when the weir_signal fires (ABORTED), when no byte
 * arrived for the idle timeout, or when the whole request took longer than
 * its total timeout (both TIMEOUT).  2xx text/event-stream bodies go
 * through the SSE parser as they arrive; other bodies are collected
 * (<= 64 KiB) for failure classification.  weir__http_get is a GET on a
 * handle of its own whose body is always collected (a provider asking its
 * server about itself).  No header value is ever logged
 * or copied into a message (API keys travel in headers).
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
/* How long one poll may sleep: bounds cancel and idle-timeout latency. */
#define POLL_MS 50

struct weir__http {
    CURLM *multi;
    CURL *easy;
    long connects;
    char errbuf[CURL_ERROR_SIZE];
};

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
    bool is_sse;     /* Content-Type: text/event-stream */
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
        x->is_sse = false;
        x->retry_after_hdr = x->retry_after_ms_hdr = -1;
        x->resp->request_id[0] = '\0';
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
        x->is_sse = tl >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
    } else if (header_is(line, name_len, "retry-after")) {
        x->retry_after_hdr = weir__parse_retry_after(v, weir__now_ms());
    } else if (header_is(line, name_len, "retry-after-ms")) {
        x->retry_after_ms_hdr = parse_retry_after_ms(v);
    } else if ((header_is(line, name_len, "x-request-id") ||
                header_is(line, name_len, "request-id")) &&
               !x->resp->request_id[0]) {
        copy_request_id(x->resp->request_id, sizeof x->resp->request_id, v, tl);
    }
    return n;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud) {
    xfer *x = ud;
    size_t n = size * nmemb;
    x->last_data_us = weir__mono_us();
    weir_http_response *r = x->resp;
    if (!x->collect && x->is_sse && r->status >= 200 && r->status < 300) {
        int rc = weir__sse_feed(x->sse, ptr, n);
        if (rc) {
            x->sse_rc = rc;
            return 0; /* makes curl stop with CURLE_WRITE_ERROR */
        }
        return n;
    }
    size_t take = r->body_len < MAX_ERROR_BODY ? MAX_ERROR_BODY - r->body_len : 0;
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
                return 0;
            }
            r->body = b;
            x->body_cap = cap;
        }
        memcpy(r->body + r->body_len, ptr, take);
        r->body_len += take;
        r->body[r->body_len] = '\0';
    }
    return n; /* the rest of an oversized body is read and dropped */
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
    } else if (!get && x.is_sse && resp->status >= 200 && resp->status < 300) {
        int fr = weir__sse_finish(x.sse);
        if (fr)
            rc = sse_failure(failure, &x, fr);
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
