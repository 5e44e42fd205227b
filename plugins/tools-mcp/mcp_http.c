/*
 * plugins/tools-mcp/mcp_http.c - Streamable HTTP (see mcp_http.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mcp_http.h"

#include "mcp_frame.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#define DEFAULT_TIMEOUT_MS 600000L
#define CONNECT_TIMEOUT_MS 10000L
#define ERR_BODY_MAX 300

struct mcp_http {
    char *url;
    char **headers;
    size_t max_message;
    pthread_mutex_t mu;
    char session[256];  /* "" when none */
    char version[32];   /* "" before initialize */
    /* a session existed and is gone (404, or forgotten for a new start):
     * until an initialize answers, a request other than initialize is not
     * sent at all, since without a session id the server refuses it (400) */
    bool lost;
};

typedef struct xfer {
    mcp_http *h;
    mcp_server *s;
    CURL *e;
    bool sse, decided;
    char *body;          /* JSON answer, or the current SSE line */
    size_t len, cap;
    bool too_big;
    char *data;          /* SSE: the event's data lines, joined */
    size_t dlen, dcap;
    char session[256];
    mcp_cancel_cb cancel;
    void *cancel_ctx;
    uint64_t deadline;
    bool timed_out, cancelled;
    int messages;        /* JSON-RPC messages seen in the answer */
    bool bad;            /* a message that is not JSON-RPC */
    bool answered;       /* SSE: the response came; the stream is not read further */
} xfer;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

mcp_http *mcp_http_create(const char *url, char *const *headers, size_t max_message) {
    mcp_http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    size_t n = 0;
    while (headers && headers[n])
        n++;
    h->url = strdup(url ? url : "");
    h->headers = calloc(n + 1, sizeof *h->headers);
    h->max_message = max_message ? max_message : (size_t)16 << 20;
    pthread_mutex_init(&h->mu, NULL);
    bool ok = h->url && h->headers;
    for (size_t i = 0; ok && i < n; i++)
        ok = (h->headers[i] = strdup(headers[i])) != NULL;
    if (!ok) {
        mcp_http_destroy(h);
        return NULL;
    }
    return h;
}

void mcp_http_destroy(mcp_http *h) {
    if (!h)
        return;
    for (size_t i = 0; h->headers && h->headers[i]; i++)
        free(h->headers[i]);
    free(h->headers);
    free(h->url);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void mcp_http_reset(mcp_http *h) {
    pthread_mutex_lock(&h->mu);
    if (h->session[0])
        h->lost = true;
    h->session[0] = '\0';
    h->version[0] = '\0';
    pthread_mutex_unlock(&h->mu);
}

void mcp_http_set_version(mcp_http *h, const char *version) {
    pthread_mutex_lock(&h->mu);
    snprintf(h->version, sizeof h->version, "%s", version ? version : "");
    pthread_mutex_unlock(&h->mu);
}

/* The request headers: ours, the configured ones, session and version;
 * `sent` (sizeof h->session) gets the session id sent ("" for none), and
 * *lost whether the session was lost (NULL: not wanted). */
static struct curl_slist *request_headers(mcp_http *h, char *sent, bool *lost) {
    struct curl_slist *l = NULL, *t;
    char buf[320];
#define ADD(s)                                \
    do {                                      \
        t = curl_slist_append(l, (s));        \
        if (!t) {                             \
            curl_slist_free_all(l);           \
            return NULL;                      \
        }                                     \
        l = t;                                \
    } while (0)
    ADD("Content-Type: application/json");
    ADD("Accept: application/json, text/event-stream");
    for (size_t i = 0; h->headers[i]; i++)
        ADD(h->headers[i]);
    pthread_mutex_lock(&h->mu);
    memcpy(sent, h->session, sizeof h->session);
    if (lost)
        *lost = h->lost;
    if (h->session[0]) {
        snprintf(buf, sizeof buf, "Mcp-Session-Id: %s", h->session);
        t = curl_slist_append(l, buf);
    } else {
        t = l;
    }
    if (t && h->version[0]) {
        l = t;
        snprintf(buf, sizeof buf, "MCP-Protocol-Version: %s", h->version);
        t = curl_slist_append(l, buf);
    }
    pthread_mutex_unlock(&h->mu);
    if (!t) {
        curl_slist_free_all(l);
        return NULL;
    }
    return t;
#undef ADD
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    static const char key[] = "mcp-session-id:";
    if (len > sizeof key - 1 && strncasecmp(p, key, sizeof key - 1) == 0) {
        const char *v = p + sizeof key - 1;
        const char *end = p + len;
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
            end--;
        size_t vl = (size_t)(end - v);
        bool visible = vl > 0 && vl < sizeof x->session;
        for (size_t i = 0; visible && i < vl; i++)
            visible = v[i] >= 0x21 && v[i] <= 0x7e;
        if (visible) {
            memcpy(x->session, v, vl);
            x->session[vl] = '\0';
        }
    }
    return len;
}

static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    char *b = realloc(*buf, c);
    if (!b)
        return -1;
    *buf = b;
    *cap = c;
    return 0;
}

/* One message of the answer (text, not NUL-terminated). */
static void on_message(xfer *x, const char *text, size_t n) {
    json_t *msg = json_loadb(text, n, JSON_ALLOW_NUL, NULL); /* as mcp_frame.c */
    if (!json_is_object(msg)) {
        x->bad = true;
        json_decref(msg);
        return;
    }
    x->messages++;
    if (!json_object_get(msg, "method") && json_object_get(msg, "id") &&
        (json_object_get(msg, "result") || json_object_get(msg, "error")))
        x->answered = true;
    json_t *reply = NULL;
    mcp__server_dispatch(x->s, msg, &reply);
    json_decref(msg);
    if (reply) {
        char why[200];
        mcp_http_send(x->h, x->s, reply, 10000, NULL, NULL, why, sizeof why);
        json_decref(reply);
    }
}

/* One SSE line (without its end). */
static void sse_line(xfer *x, const char *line, size_t n) {
    if (n == 0) { /* end of an event */
        if (x->dlen) {
            on_message(x, x->data, x->dlen);
            x->dlen = 0;
        }
        return;
    }
    if (line[0] == ':')
        return;
    if (n >= 5 && memcmp(line, "data", 4) == 0 && (line[4] == ':' || n == 4)) {
        const char *v = line + 5;
        size_t vl = n - 5;
        if (vl && *v == ' ')
            v++, vl--;
        if (x->dlen + vl + 1 > x->h->max_message) {
            x->too_big = true;
            return;
        }
        if (grow(&x->data, &x->dcap, x->dlen + vl + 2) != 0) {
            x->too_big = true;
            return;
        }
        if (x->dlen)
            x->data[x->dlen++] = '\n';
        memcpy(x->data + x->dlen, v, vl);
        x->dlen += vl;
    }
    /* event:, id:, retry: and unknown fields: nothing to do */
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    if (!x->decided) {
        const char *ct = NULL;
        curl_easy_getinfo(x->e, CURLINFO_CONTENT_TYPE, &ct);
        x->sse = ct && strncasecmp(ct, "text/event-stream", 17) == 0;
        x->decided = true;
    }
    if (!x->sse) {
        if (x->too_big || x->len + len > x->h->max_message) {
            x->too_big = true;
            return len; /* keep reading, keep nothing */
        }
        if (grow(&x->body, &x->cap, x->len + len + 1) != 0) {
            x->too_big = true;
            return len;
        }
        memcpy(x->body + x->len, p, len);
        x->len += len;
        return len;
    }
    for (size_t i = 0; i < len; i++) {
        if (x->answered)
            return 0; /* the response is in: a server that keeps the stream open is not waited for */
        char c = p[i];
        if (c == '\n') {
            size_t l = x->len;
            if (l && x->body[l - 1] == '\r')
                l--;
            sse_line(x, x->body ? x->body : "", l);
            x->len = 0;
            continue;
        }
        if (x->len + 1 > x->h->max_message + 16) {
            x->too_big = true;
            continue;
        }
        if (grow(&x->body, &x->cap, x->len + 2) != 0) {
            x->too_big = true;
            continue;
        }
        x->body[x->len++] = c;
    }
    return len;
}

static int on_xfer(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)dt, (void)dn, (void)ut, (void)un;
    xfer *x = ud;
    if (x->cancel && x->cancel(x->cancel_ctx)) {
        x->cancelled = true;
        return 1;
    }
    if (now_ms() >= x->deadline) {
        x->timed_out = true;
        return 1;
    }
    return 0;
}

int mcp_http_send(mcp_http *h, mcp_server *s, const json_t *msg, long timeout_ms,
                  mcp_cancel_cb cancel, void *cancel_ctx, char *why, size_t size) {
    char *body = mcp_frame_text(msg, false);
    char sent[sizeof h->session];
    bool lost = false;
    struct curl_slist *hdrs = body ? request_headers(h, sent, &lost) : NULL;
    const char *method = json_string_value(json_object_get(msg, "method"));
    bool init = method && strcmp(method, "initialize") == 0;
    if (hdrs && lost && !init) {
        /* a concurrent request saw the session end and a new one is not
         * there yet: the caller waits for it and sends this again */
        free(body);
        curl_slist_free_all(hdrs);
        snprintf(why, size, "its session ended (HTTP 404)");
        return MCP_HTTP_SESSION_GONE;
    }
    CURL *e = hdrs ? curl_easy_init() : NULL;
    if (!e) {
        free(body);
        curl_slist_free_all(hdrs);
        snprintf(why, size, "out of memory");
        return MCP_HTTP_FAILED;
    }
    if (timeout_ms <= 0)
        timeout_ms = DEFAULT_TIMEOUT_MS;
    xfer x = {.h = h, .s = s, .e = e, .cancel = cancel, .cancel_ctx = cancel_ctx,
              .deadline = now_ms() + (uint64_t)timeout_ms};
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(e, CURLOPT_URL, h->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms + 2000);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_xfer);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode cc = curl_easy_perform(e);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    int rc = MCP_HTTP_OK;
    if (x.cancelled) {
        snprintf(why, size, "cancelled");
        rc = MCP_HTTP_CANCELLED;
    } else if (x.timed_out || cc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(why, size, "no answer within %ld ms", timeout_ms);
        rc = MCP_HTTP_TIMEOUT;
    } else if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && x.answered)) {
        snprintf(why, size, "HTTP request to its endpoint failed: %s",
                 errbuf[0] ? errbuf : curl_easy_strerror(cc));
        rc = MCP_HTTP_FAILED;
    } else if (status == 404 && sent[0]) {
        snprintf(why, size, "its session ended (HTTP 404)");
        pthread_mutex_lock(&h->mu);
        if (strcmp(h->session, sent) == 0) { /* not one a concurrent initialize began */
            h->session[0] = '\0';
            h->lost = true;
        }
        pthread_mutex_unlock(&h->mu);
        rc = MCP_HTTP_SESSION_GONE;
    } else if (status == 202 || status == 204) {
        rc = MCP_HTTP_OK;
    } else if (status < 200 || status >= 300) {
        char shown[ERR_BODY_MAX + 1];
        size_t n = !x.sse && x.body ? (x.len < ERR_BODY_MAX ? x.len : ERR_BODY_MAX) : 0;
        for (size_t i = 0; i < n; i++)
            shown[i] = (x.body[i] >= 0x20 && x.body[i] < 0x7f) ? x.body[i] : ' ';
        shown[n] = '\0';
        snprintf(why, size, "its endpoint answered HTTP %ld%s%s", status, n ? ": " : "", shown);
        rc = MCP_HTTP_FAILED;
    } else {
        if (!x.sse && x.len && !x.too_big)
            on_message(&x, x.body, x.len);
        else if (x.sse && x.dlen && !x.too_big)
            on_message(&x, x.data, x.dlen); /* a last event without its blank line */
        if (x.too_big) {
            snprintf(why, size, "its answer is longer than the limit of %zu bytes "
                                "(max_message_bytes)", h->max_message);
            rc = MCP_HTTP_PROTOCOL;
        } else if (x.bad && !x.messages) {
            snprintf(why, size, "its answer is not a JSON-RPC message");
            rc = MCP_HTTP_PROTOCOL;
        }
        pthread_mutex_lock(&h->mu);
        if (x.session[0])
            snprintf(h->session, sizeof h->session, "%s", x.session);
        if (init && rc == MCP_HTTP_OK)
            h->lost = false; /* a new session (or none: a stateless server) */
        pthread_mutex_unlock(&h->mu);
    }
    curl_easy_cleanup(e);
    curl_slist_free_all(hdrs);
    free(body);
    free(x.body);
    free(x.data);
    return rc;
}

static size_t discard(char *p, size_t size, size_t n, void *ud) {
    (void)p, (void)ud;
    return size * n;
}

void mcp_http_end_session(mcp_http *h) {
    pthread_mutex_lock(&h->mu);
    bool has = h->session[0] != '\0';
    pthread_mutex_unlock(&h->mu);
    if (!has)
        return;
    char sent[sizeof h->session];
    struct curl_slist *hdrs = request_headers(h, sent, NULL);
    CURL *e = hdrs ? curl_easy_init() : NULL;
    if (e) {
        curl_easy_setopt(e, CURLOPT_URL, h->url);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 2000L);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_perform(e);
        curl_easy_cleanup(e);
    }
    curl_slist_free_all(hdrs);
    mcp_http_reset(h);
}
