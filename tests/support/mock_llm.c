/*
 * tests/support/mock_llm.c - the loopback mock LLM server (see mock_llm.h
 * for the endpoints, the script format and the faults).
 *
 * One accept thread; one thread per connection, each serving HTTP/1.1
 * requests in a keep-alive loop.  Every blocking wait polls a wake pipe
 * (reads, writes, delays) that mock_llm_stop makes readable, so stop never
 * hangs on a stalled or non-reading client.  After start the server uses
 * libc and, only to check a request's tool-call pairing, jansson (a parse
 * that fails skips that check); never weir__ allocators.  Running out of
 * memory aborts (this is test support).
 */
#include "mock_llm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#define MAX_HEAD (1L << 20)      /* request line + headers */
#define MAX_BODY (64L << 20)     /* request body */
#define DEFAULT_CHUNK 16

/* ---- small growable string (aborts on OOM) ------------------------------ */

typedef struct sb {
    char *p;
    size_t len, cap;
} sb;

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("mock_llm: out of memory\n", stderr);
        abort();
    }
    return q;
}

static char *xstrndup(const char *s, size_t n) {
    char *d = xrealloc(NULL, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static char *xstrdup(const char *s) { return s ? xstrndup(s, strlen(s)) : NULL; }

static void sb_add(sb *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sb *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
        return;
    }
    char *big = xrealloc(NULL, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

/* Append `s` (n bytes) as a JSON string literal. */
static void sb_json(sb *b, const char *s, size_t n) {
    sb_add(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_add(b, e, 2);
        } else if (c == '\n') {
            sb_add(b, "\\n", 2);
        } else if (c == '\r') {
            sb_add(b, "\\r", 2);
        } else if (c == '\t') {
            sb_add(b, "\\t", 2);
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_add(b, (const char *)&c, 1);
        }
    }
    sb_add(b, "\"", 1);
}

static void sb_jsonz(sb *b, const char *s) { sb_json(b, s, strlen(s)); }

/* ---- the script --------------------------------------------------------- */

typedef struct tool_call {
    char *id, *name, *arguments;
} tool_call;

typedef struct entry {
    char *text, *reasoning;
    tool_call *calls;
    size_t ncalls;
    long input_tokens, output_tokens;
    char *finish;       /* NULL: derived from tool calls */
    size_t chunk_size;
    long delay_ms;
    char *fault;        /* never NULL */
    char *retry_after;  /* NULL: "1" */
    long retry_after_ms; /* -1: none */
    long status;
    char *body;
    char *expect_contains;
    bool echo_key;      /* error text quotes the request's key (see mock_llm.h) */
    char *raw_headers;  /* fault "raw": the "headers" as "Name: value\r\n" lines */
    char *raw_body;     /* fault "raw": the body bytes ("body" or "body_hex") */
    size_t raw_body_len;
    long pad_lines, pad_bytes; /* fault "raw": filler header lines and their size */
} entry;

typedef struct record {
    char *path, *head, *body;
    char *outcome; /* JSON: what the mock answered (mock_llm_request_outcome) */
} record;

struct cache_entry;

typedef struct conn {
    struct mock_llm *m;
    int fd;
    pthread_t thread;
    struct conn *next;
    char *in;   /* bytes read and not consumed yet */
    size_t in_len, in_cap;
} conn;

struct mock_llm {
    int listen_fd;
    int port;
    int wake[2];
    pthread_t accept_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    entry *entries;
    size_t nentries;
    bool loop;
    record *recs;
    size_t nrecs, caprecs;
    long served; /* script entries handed out */
    char *models_body, *props_body; /* GET /v1/models, GET /props (NULL: 404) */
    long info_delay_ms;             /* before answering either */
    long connections, responses, expect_failures;
    conn *conns;
    /* the vendors' rules (see "the vendors' rules" below) */
    bool cache_accounting;      /* script "cache_accounting": usage from the prompt, any model */
    entry *aside;               /* script "aside": answers requests holding aside_match */
    char *aside_match;
    struct cache_entry *cache;  /* Anthropic entries and OpenAI prompts */
    size_t ncache, capcache;
    long thinking_replies;      /* Anthropic replies that started with thinking */
    long rejections;            /* 400s answered by a vendor rule */
    long cache_read_tokens, cache_write_tokens;
    FILE *stats;                /* mock_llm_stats_file: one outcome line per request */
    struct issued *issued;      /* Responses: the function calls reasoning replies made */
    size_t nissued, capissued;
    long compact_fail;          /* script "compact_fail": POST /v1/responses/compact answers
                                   500 this many times first */
    long compactions;           /* compact requests answered with a compaction */
    char **compact_enc;         /* the encrypted_content of each compaction item issued */
    char **compact_text;        /* Anthropic: each compaction block's content ("" for OpenAI's) */
};

/* The longest a "keepalive" response goes on (bounds a test that fails). */
#define KEEPALIVE_MAX_MS 60000

static const char *const fault_names[] = {
    "none",     "rate_limit", "server_error", "overloaded", "auth",         "overflow",
    "http_error", "reset",    "stall",        "malformed",  "truncated",    "inband_error",
    "keepalive",  "raw",      NULL,
};

static const char *const entry_keys[] = {
    "text",  "reasoning", "tool_calls",  "usage",          "finish", "chunk_size",
    "chunk_delay_ms", "fault", "retry_after", "retry_after_ms", "status", "body",
    "expect", "echo_key", "headers", "body_hex", "pad_lines", "pad_bytes", NULL,
};

static const char *const root_keys[] = {
    "loop", "models", "props", "info_delay_ms", "requests", "cache_accounting", "aside",
    "compact_fail", NULL,
};

static bool in_list(const char *s, const char *const *list) {
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

static char *opt_str(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
}

static long opt_int(const json_t *o, const char *key, long dflt) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (long)json_integer_value(v) : dflt;
}

static void entry_free(entry *e) {
    free(e->text);
    free(e->reasoning);
    for (size_t i = 0; i < e->ncalls; i++) {
        free(e->calls[i].id);
        free(e->calls[i].name);
        free(e->calls[i].arguments);
    }
    free(e->calls);
    free(e->finish);
    free(e->fault);
    free(e->retry_after);
    free(e->body);
    free(e->expect_contains);
    free(e->raw_headers);
    free(e->raw_body);
}

/* Fault "raw": the "headers" object as header lines, the body from
 * "body_hex" (pairs of hex digits) or else "body".  -1 when malformed. */
static int parse_raw(json_t *o, size_t idx, entry *e) {
    sb h = {0};
    json_t *headers = json_object_get(o, "headers");
    const char *name;
    const json_t *v;
    if (headers && !json_is_object(headers)) {
        fprintf(stderr, "mock_llm: script requests[%zu]: headers is not an object\n", idx);
        return -1;
    }
    json_object_foreach(headers, name, v) {
        if (!json_is_string(v)) {
            fprintf(stderr, "mock_llm: script requests[%zu]: headers.%s is not a string\n", idx,
                    name);
            free(h.p);
            return -1;
        }
        sb_printf(&h, "%s: %s\r\n", name, json_string_value(v));
    }
    e->raw_headers = h.p ? h.p : xstrdup("");
    const char *hex = json_string_value(json_object_get(o, "body_hex"));
    if (hex) {
        size_t n = strlen(hex);
        if (n % 2 || strspn(hex, "0123456789abcdefABCDEF") != n) {
            fprintf(stderr, "mock_llm: script requests[%zu]: body_hex is not hex\n", idx);
            return -1;
        }
        e->raw_body = xrealloc(NULL, n / 2 + 1);
        for (size_t i = 0; i < n / 2; i++) {
            unsigned b;
            sscanf(hex + 2 * i, "%2x", &b);
            e->raw_body[i] = (char)b;
        }
        e->raw_body_len = n / 2;
    } else {
        e->raw_body = xstrdup(e->body ? e->body : "");
        e->raw_body_len = strlen(e->raw_body);
    }
    e->pad_lines = opt_int(o, "pad_lines", 0);
    e->pad_bytes = opt_int(o, "pad_bytes", 0);
    return 0;
}

static int parse_entry(json_t *o, size_t idx, entry *e) {
    memset(e, 0, sizeof *e);
    if (!json_is_object(o)) {
        fprintf(stderr, "mock_llm: script requests[%zu] is not an object\n", idx);
        return -1;
    }
    const char *key;
    const json_t *val;
    json_object_foreach(o, key, val) {
        if (!in_list(key, entry_keys)) {
            fprintf(stderr, "mock_llm: script requests[%zu]: unknown key \"%s\"\n", idx, key);
            return -1;
        }
    }
    e->text = opt_str(o, "text");
    e->reasoning = opt_str(o, "reasoning");
    e->finish = opt_str(o, "finish");
    e->fault = opt_str(o, "fault");
    e->retry_after = opt_str(o, "retry_after");
    e->retry_after_ms = opt_int(o, "retry_after_ms", -1);
    e->status = opt_int(o, "status", 500);
    e->delay_ms = opt_int(o, "chunk_delay_ms", 0);
    long cs = opt_int(o, "chunk_size", DEFAULT_CHUNK);
    e->chunk_size = cs > 0 ? (size_t)cs : DEFAULT_CHUNK;
    const json_t *usage = json_object_get(o, "usage");
    e->input_tokens = opt_int(usage, "input_tokens", 10);
    e->output_tokens = opt_int(usage, "output_tokens", 5);
    e->expect_contains = opt_str(json_object_get(o, "expect"), "message_contains");
    e->echo_key = json_is_true(json_object_get(o, "echo_key"));
    const json_t *body = json_object_get(o, "body");
    if (json_is_string(body))
        e->body = xstrdup(json_string_value(body));
    else if (body)
        e->body = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    if (!e->fault)
        e->fault = xstrdup("none");
    if (!in_list(e->fault, fault_names)) {
        fprintf(stderr, "mock_llm: script requests[%zu]: unknown fault \"%s\"\n", idx, e->fault);
        return -1;
    }
    if (strcmp(e->fault, "raw") == 0 && parse_raw(o, idx, e) != 0)
        return -1;
    if (e->finish && strcmp(e->finish, "stop") && strcmp(e->finish, "tool_calls") &&
        strcmp(e->finish, "length")) {
        fprintf(stderr, "mock_llm: script requests[%zu]: unknown finish \"%s\"\n", idx, e->finish);
        return -1;
    }
    const json_t *calls = json_object_get(o, "tool_calls");
    if (calls && !json_is_array(calls)) {
        fprintf(stderr, "mock_llm: script requests[%zu]: tool_calls is not an array\n", idx);
        return -1;
    }
    e->ncalls = json_array_size(calls);
    if (e->ncalls) {
        e->calls = xrealloc(NULL, e->ncalls * sizeof *e->calls);
        memset(e->calls, 0, e->ncalls * sizeof *e->calls);
    }
    for (size_t i = 0; i < e->ncalls; i++) {
        const json_t *c = json_array_get(calls, i);
        tool_call *tc = &e->calls[i];
        tc->id = opt_str(c, "id");
        tc->name = opt_str(c, "name");
        tc->arguments = opt_str(c, "arguments");
        if (!tc->name) {
            fprintf(stderr, "mock_llm: script requests[%zu].tool_calls[%zu]: no name\n", idx, i);
            return -1;
        }
        if (!tc->id) {
            char buf[64];
            snprintf(buf, sizeof buf, "call_mock_%zu_%zu", idx, i);
            tc->id = xstrdup(buf);
        }
        if (!tc->arguments)
            tc->arguments = xstrdup("{}");
    }
    return 0;
}

static int parse_script(mock_llm *m, const char *text) {
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!json_is_object(root)) {
        fprintf(stderr, "mock_llm: script line %d: %s\n", jerr.line,
                root ? "not a JSON object" : jerr.text);
        json_decref(root);
        return -1;
    }
    const json_t *reqs = json_object_get(root, "requests");
    if (reqs && !json_is_array(reqs)) {
        fprintf(stderr, "mock_llm: script: \"requests\" is not an array\n");
        json_decref(root);
        return -1;
    }
    m->loop = json_is_true(json_object_get(root, "loop"));
    m->cache_accounting = json_is_true(json_object_get(root, "cache_accounting"));
    m->compact_fail = opt_int(root, "compact_fail", 0);
    const char *rkey;
    const json_t *rval;
    json_object_foreach(root, rkey, rval) {
        if (!in_list(rkey, root_keys)) {
            fprintf(stderr, "mock_llm: script: unknown key \"%s\"\n", rkey);
            json_decref(root);
            return -1;
        }
    }
    const json_t *aside = json_object_get(root, "aside");
    if (aside) {
        json_t *reply = json_object_get(aside, "reply");
        const char *match = json_string_value(json_object_get(aside, "body_contains"));
        if (!match || !*match || !json_is_object(reply) || json_object_size(aside) != 2) {
            fprintf(stderr, "mock_llm: script: \"aside\" must be {\"body_contains\": \"...\", "
                            "\"reply\": {...}}\n");
            json_decref(root);
            return -1;
        }
        m->aside = xrealloc(NULL, sizeof *m->aside);
        if (parse_entry(reply, 0, m->aside)) {
            entry_free(m->aside);
            free(m->aside);
            m->aside = NULL;
            json_decref(root);
            return -1;
        }
        m->aside_match = xstrdup(match);
    }
    /* what the server says about itself: a string is sent as it is (garbage
     * too), an array of models is wrapped as an OpenAI list */
    const json_t *models = json_object_get(root, "models"), *props = json_object_get(root, "props");
    if (json_is_string(models))
        m->models_body = xstrdup(json_string_value(models));
    else if (json_is_array(models)) {
        json_t *list = json_pack("{s:s,s:O}", "object", "list", "data", models);
        m->models_body = list ? json_dumps(list, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(list);
    }
    if (json_is_string(props))
        m->props_body = xstrdup(json_string_value(props));
    else if (json_is_object(props))
        m->props_body = json_dumps(props, JSON_COMPACT | JSON_PRESERVE_ORDER);
    m->info_delay_ms = opt_int(root, "info_delay_ms", 0);
    if ((models && !json_is_string(models) && !json_is_array(models)) ||
        (props && !json_is_string(props) && !json_is_object(props))) {
        fprintf(stderr, "mock_llm: script: \"models\" must be an array or a string, \"props\" "
                        "an object or a string\n");
        json_decref(root);
        return -1;
    }
    size_t n = json_array_size(reqs);
    m->entries = n ? xrealloc(NULL, n * sizeof *m->entries) : NULL;
    for (size_t i = 0; i < n; i++) {
        m->nentries = i + 1;
        if (parse_entry(json_array_get(reqs, i), i, &m->entries[i])) {
            json_decref(root);
            return -1;
        }
    }
    json_decref(root);
    return 0;
}

/* ---- socket helpers ----------------------------------------------------- */

/* Wait until fd is readable: 1, 0 when the server is stopping, -1 error. */
static int wait_readable(mock_llm *m, int fd, int timeout_ms) {
    struct pollfd p[2] = {{.fd = m->wake[0], .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    for (;;) {
        int r = poll(p, fd >= 0 ? 2 : 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (p[0].revents)
            return 0;
        if (r == 0)
            return 2; /* timeout */
        return 1;
    }
}

/* Sleep ms, waking early when stopping.  Returns false when stopping. */
static bool nap(mock_llm *m, long ms) {
    if (ms <= 0)
        return true;
    return wait_readable(m, -1, (int)ms) == 2;
}

/* Send everything; -1 when the peer is gone or the server is stopping. */
static int send_all(conn *c, const char *p, size_t n) {
    while (n) {
        struct pollfd pf[2] = {{.fd = c->m->wake[0], .events = POLLIN},
                               {.fd = c->fd, .events = POLLOUT}};
        int r = poll(pf, 2, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || pf[0].revents)
            return -1;
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One HTTP/1.1 chunk. */
static int send_chunk(conn *c, const char *p, size_t n) {
    char hdr[32];
    int h = snprintf(hdr, sizeof hdr, "%zx\r\n", n);
    if (send_all(c, hdr, (size_t)h) || send_all(c, p, n) || send_all(c, "\r\n", 2))
        return -1;
    return 0;
}

/* Read more bytes into c->in: 1 got some, 0 EOF/stopping, -1 error. */
static int read_more(conn *c) {
    int w = wait_readable(c->m, c->fd, -1);
    if (w != 1)
        return w == 0 ? 0 : -1;
    if (c->in_len + 65536 + 1 > c->in_cap) {
        c->in_cap = c->in_len + 65536 + 1;
        c->in = xrealloc(c->in, c->in_cap);
    }
    ssize_t r = recv(c->fd, c->in + c->in_len, 65536, 0);
    if (r < 0 && errno == EINTR)
        return 1;
    if (r <= 0)
        return r == 0 ? 0 : -1;
    c->in_len += (size_t)r;
    c->in[c->in_len] = '\0';
    return 1;
}

/* ---- requests ----------------------------------------------------------- */

typedef struct request {
    char method[16];
    char *path, *head, *body;
    size_t body_len;
    bool close;
    long index; /* record index */
} request;

/* Value of header `name` in the raw head (after the request line), malloc'd. */
static char *head_value(const char *head, const char *name) {
    size_t n = strlen(name);
    const char *line = strstr(head, "\r\n");
    while (line && line[2] && !(line[2] == '\r' && line[3] == '\n')) {
        line += 2;
        const char *end = strstr(line, "\r\n");
        if (!end)
            end = line + strlen(line);
        if ((size_t)(end - line) > n && line[n] == ':' && strncasecmp(line, name, n) == 0) {
            const char *v = line + n + 1;
            while (v < end && (*v == ' ' || *v == '\t'))
                v++;
            const char *e = end;
            while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
            return xstrndup(v, (size_t)(e - v));
        }
        line = end;
    }
    return NULL;
}

/* The key the request sent, malloc'd: the x-api-key value (Anthropic) or
 * the Authorization value after its "Bearer " (OpenAI); "" when absent. */
static char *request_key(const char *head, bool anthropic) {
    char *v = head_value(head, anthropic ? "x-api-key" : "Authorization");
    if (v && !anthropic && strncasecmp(v, "Bearer ", 7) == 0)
        memmove(v, v + 7, strlen(v + 7) + 1);
    return v ? v : xstrdup("");
}

/* Read one request: 1 ok, 0 connection over, -1 protocol error (400 sent). */
static int read_request(conn *c, request *rq) {
    memset(rq, 0, sizeof *rq);
    char *end;
    while (!(c->in && (end = memmem(c->in, c->in_len, "\r\n\r\n", 4)))) {
        if ((long)c->in_len > MAX_HEAD)
            return -1;
        int r = read_more(c);
        if (r <= 0)
            return 0;
    }
    size_t head_len = (size_t)(end - c->in) + 4;
    rq->head = xstrndup(c->in, head_len);
    char path[1024];
    if (sscanf(rq->head, "%15s %1023s HTTP/1.%*d", rq->method, path) != 2)
        return -1;
    rq->path = xstrdup(path);
    char *v = head_value(rq->head, "Transfer-Encoding");
    bool chunked = v != NULL;
    free(v);
    if (chunked)
        return -1;
    v = head_value(rq->head, "Content-Length");
    long clen = v ? strtol(v, NULL, 10) : 0;
    free(v);
    if (clen < 0 || clen > MAX_BODY)
        return -1;
    v = head_value(rq->head, "Connection");
    rq->close = v && strcasecmp(v, "close") == 0;
    free(v);
    v = head_value(rq->head, "Expect");
    if (v && strcasecmp(v, "100-continue") == 0) {
        const char *cont = "HTTP/1.1 100 Continue\r\n\r\n";
        if (send_all(c, cont, strlen(cont))) {
            free(v);
            return 0;
        }
    }
    free(v);
    while (c->in_len < head_len + (size_t)clen) {
        int r = read_more(c);
        if (r <= 0)
            return 0;
    }
    rq->body = xstrndup(c->in + head_len, (size_t)clen);
    rq->body_len = (size_t)clen;
    size_t used = head_len + (size_t)clen;
    memmove(c->in, c->in + used, c->in_len - used + 1);
    c->in_len -= used;
    return 1;
}

static void request_free(request *rq) {
    free(rq->path);
    free(rq->head);
    free(rq->body);
}

/* Record the request; returns its index. */
static long record_request(mock_llm *m, const request *rq) {
    pthread_mutex_lock(&m->mu);
    if (m->nrecs == m->caprecs) {
        m->caprecs = m->caprecs ? m->caprecs * 2 : 16;
        m->recs = xrealloc(m->recs, m->caprecs * sizeof *m->recs);
    }
    long i = (long)m->nrecs++;
    m->recs[i].path = xstrdup(rq->path);
    m->recs[i].head = xstrdup(rq->head);
    m->recs[i].body = xstrdup(rq->body);
    m->recs[i].outcome = NULL;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    return i;
}

static void response_done(mock_llm *m) {
    pthread_mutex_lock(&m->mu);
    m->responses++;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* The request's "model" string (no escapes) or "mock-model"; malloc'd. */
static char *request_model(const char *body) {
    const char *k = strstr(body, "\"model\"");
    if (k) {
        k += 7;
        while (*k == ' ' || *k == ':' || *k == '\t' || *k == '\n' || *k == '\r')
            k++;
        if (*k == '"') {
            const char *e = ++k;
            while (*e && *e != '"' && *e != '\\' && e - k < 200)
                e++;
            if (*e == '"')
                return xstrndup(k, (size_t)(e - k));
        }
    }
    return xstrdup("mock-model");
}

/* ---- responses ---------------------------------------------------------- */

typedef enum { API_OPENAI, API_ANTHROPIC, API_RESPONSES } api_kind;

static const char *reason_phrase(long status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 529: return "Overloaded";
    default: return "Status";
    }
}

static const char *request_id_header(api_kind api) {
    return api == API_ANTHROPIC ? "request-id" : "x-request-id";
}

/* The rate-limit headers each vendor sends on every response (OpenAI:
 * x-ratelimit-{limit,remaining,reset}-{requests,tokens}, resets as
 * durations; Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,
 * output-tokens}-{limit,remaining,reset}, resets as RFC 3339 times): request
 * `index` of the run has used index + 1 requests, 1,000 tokens each;
 * `exhausted` (a 429) leaves none. */
static void rate_limit_headers(sb *h, api_kind api, long index, bool exhausted) {
    long req_left = exhausted ? 0 : 499 - index < 0 ? 0 : 499 - index;
    long tok_left = exhausted ? 0 : 30000 - 1000 * (index + 1) < 0 ? 0 : 30000 - 1000 * (index + 1);
    if (api != API_ANTHROPIC) {
        sb_printf(h,
                  "x-ratelimit-limit-requests: 500\r\nx-ratelimit-remaining-requests: %ld\r\n"
                  "x-ratelimit-reset-requests: 120ms\r\nx-ratelimit-limit-tokens: 30000\r\n"
                  "x-ratelimit-remaining-tokens: %ld\r\nx-ratelimit-reset-tokens: %s\r\n",
                  req_left, tok_left, exhausted ? "1m30s" : "2s");
        return;
    }
    char reset[40];
    time_t at = time(NULL) + (exhausted ? 90 : 2);
    struct tm tm;
    gmtime_r(&at, &tm);
    strftime(reset, sizeof reset, "%Y-%m-%dT%H:%M:%SZ", &tm);
    static const char *const kinds[] = {"requests", "tokens", "input-tokens", "output-tokens"};
    for (size_t i = 0; i < 4; i++)
        sb_printf(h,
                  "anthropic-ratelimit-%s-limit: %ld\r\nanthropic-ratelimit-%s-remaining: %ld\r\n"
                  "anthropic-ratelimit-%s-reset: %s\r\n",
                  kinds[i], i ? 30000L : 50L, kinds[i],
                  i ? tok_left : exhausted ? 0L : 49 - index < 0 ? 0L : 49 - index, kinds[i], reset);
}

static int send_json_response(conn *c, api_kind api, long index, long status, const char *body,
                              const entry *e) {
    sb h = {0};
    sb_printf(&h, "HTTP/1.1 %ld %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n",
              status, reason_phrase(status), strlen(body));
    sb_printf(&h, "%s: req_mock_%ld\r\n", request_id_header(api), index);
    rate_limit_headers(&h, api, index, status == 429);
    if (e && (status == 429 || status == 529 || status == 503)) {
        const char *ra = e->retry_after ? e->retry_after : "1";
        if (*ra)
            sb_printf(&h, "Retry-After: %s\r\n", ra);
    }
    if (e && e->retry_after_ms >= 0)
        sb_printf(&h, "retry-after-ms: %ld\r\n", e->retry_after_ms);
    sb_puts(&h, "\r\n");
    sb_puts(&h, body);
    int rc = send_all(c, h.p, h.len);
    free(h.p);
    return rc;
}

/* Fault "raw": the entry's status, headers (no Content-Type unless given),
 * pad_lines filler headers of pad_bytes each, and body, with a
 * Content-Length.  The connection is kept (0) unless sending failed (-1). */
static int send_raw_response(conn *c, api_kind api, long index, const entry *e) {
    sb h = {0};
    sb_printf(&h, "HTTP/1.1 %ld %s\r\n%s", e->status, reason_phrase(e->status), e->raw_headers);
    sb_printf(&h, "%s: req_mock_%ld\r\nContent-Length: %zu\r\n", request_id_header(api), index,
              e->raw_body_len);
    int rc = send_all(c, h.p, h.len);
    free(h.p);
    if (e->pad_lines > 0 && e->pad_bytes > 0) {
        size_t n = (size_t)e->pad_bytes;
        char *pad = xrealloc(NULL, n + 16);
        for (long i = 0; rc == 0 && i < e->pad_lines; i++) {
            int k = snprintf(pad, 16, "X-Pad-%ld: ", i);
            size_t len = (size_t)k < n ? n : (size_t)k;
            memset(pad + k, 'p', len - (size_t)k);
            memcpy(pad + len, "\r\n", 2);
            rc = send_all(c, pad, len + 2);
        }
        free(pad);
    }
    if (rc == 0)
        rc = send_all(c, "\r\n", 2);
    if (rc == 0)
        rc = send_all(c, e->raw_body, e->raw_body_len);
    return rc;
}

/* A provider-shaped error body. */
static char *error_body(api_kind api, const char *type, const char *code, const char *msg) {
    sb b = {0};
    if (api == API_ANTHROPIC) {
        sb_puts(&b, "{\"type\":\"error\",\"error\":{\"type\":");
        sb_jsonz(&b, type);
        sb_puts(&b, ",\"message\":");
        sb_jsonz(&b, msg);
        sb_puts(&b, "}}");
    } else {
        sb_puts(&b, "{\"error\":{\"message\":");
        sb_jsonz(&b, msg);
        sb_puts(&b, ",\"type\":");
        sb_jsonz(&b, type);
        sb_puts(&b, ",\"param\":null,\"code\":");
        if (code)
            sb_jsonz(&b, code);
        else
            sb_puts(&b, "null");
        sb_puts(&b, "}}");
    }
    return b.p;
}

/*
 * The tool-call pairing rules both APIs enforce on every request, with the
 * messages they answer (a request that breaks one gets that 400):
 * - Anthropic (docs.anthropic.com, "Implementing tool use": tool_result
 *   blocks answer the tool_use blocks of the previous assistant message,
 *   first in the next user message): tool_use ids are unique in a request;
 *   every tool_result's tool_use_id names a tool_use of the previous
 *   message; every tool_use is answered in the very next message.
 * - OpenAI Chat Completions (API reference, "tool" message: tool_call_id
 *   is "Tool call that this message is responding to"): an assistant
 *   message with tool_calls is followed by one tool message per
 *   tool_call_id; a tool message answers a call of the assistant message
 *   before it.  Ids repeated in one message make the answer ambiguous and
 *   are refused as well.
 * NULL when the request keeps them (or is not JSON: its own checks decide),
 * else a new error message.  Uses jansson: a parse that fails (for example
 * while a unit test fails allocations) skips the check.
 */
static char *pairing_error(api_kind api, const char *body) {
    json_t *root = json_loads(body, 0, NULL);
    const json_t *msgs = json_object_get(root, "messages");
    sb err = {0};
    json_t *open = NULL; /* the ids the previous message asked for, unanswered */
    json_t *all = json_object();
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        if (err.p || !all)
            break;
        const char *role = json_string_value(json_object_get(m, "role"));
        role = role ? role : "";
        json_t *asked = json_object();
        if (api == API_ANTHROPIC) {
            const json_t *content = json_object_get(m, "content");
            size_t j;
            const json_t *b;
            json_array_foreach(content, j, b) {
                const char *type = json_string_value(json_object_get(b, "type"));
                if (type && !strcmp(type, "tool_use")) {
                    const char *id = json_string_value(json_object_get(b, "id"));
                    if (!id || json_object_get(all, id)) {
                        sb_printf(&err, "messages.%zu.content.%zu: `tool_use` ids must be unique", i, j);
                        break;
                    }
                    json_object_set_new(all, id, json_true());
                    json_object_set_new(asked, id, json_true());
                } else if (type && !strcmp(type, "tool_result")) {
                    const char *id = json_string_value(json_object_get(b, "tool_use_id"));
                    if (!id || !json_object_get(open, id)) {
                        sb_printf(&err, "messages.%zu.content.%zu: unexpected `tool_use_id` found in "
                                  "`tool_result` blocks: %s. Each `tool_result` block must have a "
                                  "corresponding `tool_use` block in the previous message.", i, j,
                                  id ? id : "(none)");
                        break;
                    }
                    json_object_del(open, id);
                }
            }
            if (!err.p && json_object_size(open) > 0) {
                sb_printf(&err, "messages.%zu: `tool_use` ids were found without `tool_result` blocks "
                          "immediately after: %s. Each `tool_use` block must have a corresponding "
                          "`tool_result` block in the next message.", i > 0 ? i - 1 : 0,
                          json_object_iter_key(json_object_iter(open)));
            }
            json_decref(open);
            open = asked;
            continue;
        }
        /* OpenAI: tool messages answer the open calls; anything else closes them */
        if (!strcmp(role, "tool")) {
            const char *id = json_string_value(json_object_get(m, "tool_call_id"));
            if (!id || !json_object_get(open, id))
                sb_printf(&err, "Invalid parameter: messages with role 'tool' must be a response to "
                          "a preceeding message with 'tool_calls'. (messages.[%zu].tool_call_id: %s)",
                          i, id ? id : "(none)");
            else
                json_object_del(open, id);
            json_decref(asked);
            continue;
        }
        if (json_object_size(open) > 0) {
            sb_printf(&err, "An assistant message with 'tool_calls' must be followed by tool "
                      "messages responding to each 'tool_call_id'. The following tool_call_ids did "
                      "not have response messages: %s", json_object_iter_key(json_object_iter(open)));
            json_decref(asked);
            break;
        }
        size_t j;
        const json_t *c;
        json_array_foreach(json_object_get(m, "tool_calls"), j, c) {
            const char *id = json_string_value(json_object_get(c, "id"));
            if (!id || json_object_get(asked, id)) {
                sb_printf(&err, "Invalid parameter: messages.[%zu].tool_calls.[%zu].id repeats '%s'",
                          i, j, id ? id : "(none)");
                break;
            }
            json_object_set_new(asked, id, json_true());
        }
        json_decref(open);
        open = asked;
    }
    json_decref(open);
    json_decref(all);
    json_decref(root);
    return err.p;
}

/* ---- the vendors' rules (issue #32 item 7) -------------------------------
 *
 * What the vendors' APIs enforce on a request and report in a response, for
 * the model names they concern (every other model name gets none of this, so
 * tests with "test-model" and the like see the plain mock).  Each rule cites
 * its source.  The request is read with jansson (a parse that fails skips
 * every rule, as for the pairing check); everything else is libc.
 *
 * Signatures and thought signatures are the mock's own opaque strings, bound
 * like the vendors' to the model and to the request prefix they were made
 * for:
 *   Anthropic thinking        "mk1" hex8(model) hex16(prefix) hex16(prefix+text)
 *   Anthropic redacted data   "mkr1" hex8(model) hex16(prefix) hex16(prefix)
 *   Gemini thought_signature  "gts1" hex8(model) hex16(prefix)
 * where prefix is an FNV-1a hash of the canonical request before the block
 * (tools, system, every earlier message and the earlier blocks of the same
 * message; canonical: compact JSON, keys sorted, every cache_control member
 * left out, a string content as its one text block).
 */

#define FNV0 0xcbf29ce484222325ULL

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* The string and its NUL (a separator between the hashed parts). */
static uint64_t fnvz(uint64_t h, const char *s) { return fnv(h, s, strlen(s) + 1); }

static uint32_t model_hash(const char *model) { return (uint32_t)fnvz(FNV0, model); }

static bool starts(const char *s, const char *p) { return s && strncmp(s, p, strlen(p)) == 0; }

/* Gemini 3 or later ("gemini-<major>" with major >= 3): the models that
 * check thought signatures (ai.google.dev/gemini-api/docs/thought-signatures;
 * 2.5 does not refuse a missing one). */
static bool gemini_checks(const char *base) {
    if (!starts(base, "gemini-"))
        return false;
    const char *p = base + 7;
    long major = 0;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9' && major < 1000; p++)
        major = major * 10 + (*p - '0');
    return major >= 3;
}

static int key_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Canonical JSON of v into b: compact, object keys sorted, every
 * "cache_control" member left out (a breakpoint moving is no change of the
 * prompt: Anthropic's cache keys and prefix checks ignore it). */
static void canon(sb *b, const json_t *v) {
    if (!v) {
        sb_puts(b, "null");
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        size_t n = json_object_size(v), k = 0;
        const char **keys = xrealloc(NULL, (n ? n : 1) * sizeof *keys);
        const char *key;
        json_t *val;
        json_t *obj; /* jansson iterates only a mutable object; nothing is changed */
        memcpy(&obj, &v, sizeof obj);
        json_object_foreach(obj, key, val) keys[k++] = key;
        qsort(keys, k, sizeof *keys, key_cmp);
        sb_add(b, "{", 1);
        bool first = true;
        for (size_t i = 0; i < k; i++) {
            if (strcmp(keys[i], "cache_control") == 0)
                continue;
            if (!first)
                sb_add(b, ",", 1);
            first = false;
            sb_jsonz(b, keys[i]);
            sb_add(b, ":", 1);
            canon(b, json_object_get(v, keys[i]));
        }
        sb_add(b, "}", 1);
        free(keys);
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        const json_t *e;
        sb_add(b, "[", 1);
        json_array_foreach(v, i, e) {
            if (i)
                sb_add(b, ",", 1);
            canon(b, e);
        }
        sb_add(b, "]", 1);
        break;
    }
    case JSON_STRING:
        sb_json(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        sb_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        sb_printf(b, "%.17g", json_real_value(v));
        break;
    case JSON_TRUE:
        sb_puts(b, "true");
        break;
    case JSON_FALSE:
        sb_puts(b, "false");
        break;
    default:
        sb_puts(b, "null");
        break;
    }
}

/* Parse "<tag>" hex8 hex16 [hex16]; false when malformed. */
static bool parse_sig(const char *s, const char *tag, bool with_text, uint32_t *mh, uint64_t *prefix,
                      uint64_t *text) {
    size_t tl = strlen(tag), want = tl + 8 + 16 + (with_text ? 16 : 0);
    if (!s || strlen(s) != want || strncmp(s, tag, tl) != 0 ||
        strspn(s + tl, "0123456789abcdef") != want - tl)
        return false;
    char part[17];
    memcpy(part, s + tl, 8);
    part[8] = '\0';
    *mh = (uint32_t)strtoul(part, NULL, 16);
    memcpy(part, s + tl + 8, 16);
    part[16] = '\0';
    *prefix = strtoull(part, NULL, 16);
    if (with_text) {
        memcpy(part, s + tl + 24, 16);
        *text = strtoull(part, NULL, 16);
    }
    return true;
}

/* What the vendor rules decided for one request's reply. */
typedef struct vreply {
    enum { V_NONE, V_CLAUDE, V_OPENAI, V_DEEPSEEK, V_GEMINI } kind;
    bool account;         /* usage computed from the prompt (else the script's) */
    long input;           /* Anthropic input_tokens (after the cache) / OpenAI prompt_tokens */
    long cache_read;      /* Anthropic cache_read_input_tokens / OpenAI cached_tokens */
    long write_5m, write_1h;
    bool thinking;        /* the reply starts with reasoning (Anthropic / DeepSeek) */
    bool redact;          /* ... as a redacted_thinking block (Anthropic) */
    uint64_t prefix;      /* the prefix the reply's first block is bound to */
    uint32_t model;       /* model_hash of the request's model */
    long dropped;         /* thinking blocks of another model, dropped silently */
    char *sig;            /* the reply's signature / redacted data / thought signature */
    bool encrypt;         /* Responses: the reasoning item carries encrypted_content */
} vreply;

/*
 * The `thinking` modes a Claude model takes and the ones it answers with a
 * 400: Anthropic's "Thinking support, defaults, and rejected configurations
 * by model" table (platform.claude.com/docs/en/build-with-claude/
 * thinking-troubleshooting) and "Extended thinking": "Claude 4.7 and later
 * models do not support it [type enabled] and reject requests that use it"
 * (platform.claude.com/docs/en/build-with-claude/extended-thinking).
 */
typedef enum { CT_ANY, CT_NONE, CT_EXTENDED, CT_ADAPTIVE, CT_ADAPTIVE_ON } claude_thinking;

static claude_thinking claude_rule(const char *model) {
    static const char *const adaptive_on[] = {"claude-fable-5", "claude-mythos-5", NULL};
    static const char *const adaptive[] = {"claude-opus-4-7", "claude-opus-4-8", "claude-sonnet-5",
                                           "claude-opus-5", "claude-haiku-5", NULL};
    static const char *const both[] = {"claude-opus-4-6", "claude-sonnet-4-6", NULL};
    static const char *const extended[] = {"claude-3-7-sonnet", "claude-sonnet-4", "claude-opus-4",
                                           "claude-haiku-4-5", NULL};
    for (const char *const *p = adaptive_on; *p; p++)
        if (starts(model, *p))
            return CT_ADAPTIVE_ON;
    for (const char *const *p = adaptive; *p; p++)
        if (starts(model, *p))
            return CT_ADAPTIVE;
    for (const char *const *p = both; *p; p++)
        if (starts(model, *p))
            return CT_ANY;
    for (const char *const *p = extended; *p; p++)
        if (starts(model, *p))
            return CT_EXTENDED;
    return starts(model, "claude-3") ? CT_NONE : CT_ANY;
}

/*
 * The minimum cacheable prompt length of a Claude model, in tokens: a
 * breakpoint on a shorter prefix caches nothing (no error, no write).
 * Anthropic, "Prompt caching", "Cache limitations": 512 for Claude Opus 5,
 * Fable 5 and Mythos 5; 4096 for Claude Haiku 4.5 and Opus 4.5 to 4.7; 2048
 * for Sonnet 4.6 and the Claude 3 Haiku models; 1024 for the others (Sonnet 5,
 * Opus 4.8, Sonnet 4.x, Opus 4 and 4.1, Claude 3.x)
 * (platform.claude.com/docs/en/build-with-claude/prompt-caching).
 */
static long claude_min_cache(const char *model) {
    if (starts(model, "claude-opus-5") || starts(model, "claude-fable-5") ||
        starts(model, "claude-mythos-5"))
        return 512;
    if (starts(model, "claude-haiku-4-5") || starts(model, "claude-opus-4-5") ||
        starts(model, "claude-opus-4-6") || starts(model, "claude-opus-4-7"))
        return 4096;
    if (starts(model, "claude-sonnet-4-6") || starts(model, "claude-3-haiku") ||
        starts(model, "claude-3-5-haiku"))
        return 2048;
    return 1024;
}

/* A cache entry: Anthropic's (model, prefix up to a breakpoint), or one
 * prompt OpenAI saw (model, prompt_cache_key bucket, the canonical prompt). */
typedef struct cache_entry {
    uint32_t model;
    uint64_t prefix;     /* Anthropic */
    char *bucket, *text; /* OpenAI (NULL for Anthropic) */
    size_t text_len;
} cache_entry;

/* The OpenAI prompts kept for prefix matching (oldest dropped first). */
#define MAX_OPENAI_PROMPTS 256

static bool claude_cached(mock_llm *m, uint32_t model, uint64_t prefix) {
    for (size_t i = 0; i < m->ncache; i++)
        if (!m->cache[i].text && m->cache[i].model == model && m->cache[i].prefix == prefix)
            return true;
    return false;
}

static void cache_add(mock_llm *m, cache_entry e) {
    if (m->ncache == m->capcache) {
        m->capcache = m->capcache ? m->capcache * 2 : 64;
        m->cache = xrealloc(m->cache, m->capcache * sizeof *m->cache);
    }
    m->cache[m->ncache++] = e;
}

/* One content block of the rendered Anthropic prompt. */
typedef struct ablock {
    uint64_t h;   /* prefix hash through this block */
    size_t chars; /* canonical characters through this block */
    int ttl;      /* breakpoint: 0 none, 5 (5m), 60 (1h) */
} ablock;

typedef struct arender {
    ablock *b;
    size_t n, cap;
    uint64_t h;
    size_t chars;
    long breakpoints;
    int last_ttl;     /* the ttl of the previous breakpoint (ordering) */
    char *err;        /* first ordering error */
} arender;

/* Add one block (canonical text `s`) to the rendered prompt. */
static void render_block(arender *r, const char *s, size_t len, const json_t *blk) {
    r->h = fnv(r->h, s, len);
    r->chars += len;
    int ttl = 0;
    const json_t *cc = json_object_get(blk, "cache_control");
    if (json_is_object(cc)) {
        const char *t = json_string_value(json_object_get(cc, "ttl"));
        ttl = t && strcmp(t, "1h") == 0 ? 60 : 5;
        r->breakpoints++;
        /* "Cache entries with longer TTL must appear before shorter TTLs (i.e.,
         * a 1-hour cache entry must appear before any 5-minute cache entries)"
         * (prompt-caching, "Mixing different TTLs") */
        if (ttl == 60 && r->last_ttl == 5 && !r->err) {
            sb e = {0};
            sb_puts(&e, "a ttl='1h' cache_control block must not come after a ttl='5m' "
                        "cache_control block. Note that blocks are processed in the following "
                        "order: `tools`, `system`, `messages`.");
            r->err = e.p;
        }
        r->last_ttl = ttl;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->b = xrealloc(r->b, r->cap * sizeof *r->b);
    }
    r->b[r->n++] = (ablock){.h = r->h, .chars = r->chars, .ttl = ttl};
}

/* A string content/system as its one text block, canonical. */
static void canon_text_block(sb *b, const char *s) {
    sb_puts(b, "{\"text\":");
    sb_jsonz(b, s);
    sb_puts(b, ",\"type\":\"text\"}");
}

/*
 * Anthropic /v1/messages rules for claude-* models.  Returns a new 400
 * message or NULL; fills v (usage, the reply's thinking and signature).
 */
static char *anthropic_rules(mock_llm *m, const json_t *root, const char *model, long reply_no,
                             vreply *v) {
    sb err = {0};
    claude_thinking rule = claude_rule(model);
    const json_t *th = json_object_get(root, "thinking");
    const char *type = json_string_value(json_object_get(th, "type"));
    /* the thinking modes the model refuses (thinking-troubleshooting table) */
    if (type && strcmp(type, "enabled") == 0 &&
        (rule == CT_ADAPTIVE || rule == CT_ADAPTIVE_ON || rule == CT_NONE)) {
        sb_printf(&err, "\"thinking.type.enabled\" is not supported for this model. Use "
                        "\"thinking.type.adaptive\" and \"output_config.effort\" to control "
                        "thinking behavior.");
        return err.p;
    }
    if (type && strcmp(type, "adaptive") == 0 && (rule == CT_EXTENDED || rule == CT_NONE)) {
        sb_printf(&err, "thinking.type: adaptive thinking is not supported on model %s. Use "
                        "\"thinking.type.enabled\" with \"budget_tokens\".", model);
        return err.p;
    }
    if (type && strcmp(type, "disabled") == 0 && rule == CT_ADAPTIVE_ON) {
        sb_printf(&err, "thinking.type: \"disabled\" is not supported for model %s: thinking is "
                        "always on for this model.", model);
        return err.p;
    }
    bool enabled = type && strcmp(type, "enabled") == 0;
    v->thinking = enabled || (type && strcmp(type, "adaptive") == 0) ||
                  (rule == CT_ADAPTIVE_ON && !type);
    if (enabled) {
        /* budget_tokens: at least 1024 and below max_tokens (extended-thinking,
         * "How to use extended thinking" and "Max tokens and context window
         * size") */
        const json_t *bt = json_object_get(th, "budget_tokens");
        json_int_t budget = json_is_integer(bt) ? json_integer_value(bt) : 0;
        json_int_t max = json_integer_value(json_object_get(root, "max_tokens"));
        if (budget < 1024) {
            sb_puts(&err, "thinking.enabled.budget_tokens: Input should be greater than or equal "
                          "to 1024");
            return err.p;
        }
        if (max <= budget) {
            sb_puts(&err, "`max_tokens` must be greater than `thinking.budget_tokens`. Please "
                          "consult our documentation at https://docs.claude.com/en/docs/"
                          "build-with-claude/extended-thinking#max-tokens-and-context-window-size");
            return err.p;
        }
    }
    if (v->thinking) {
        /* "Thinking isn't compatible with temperature or top_k modifications"
         * (extended-thinking, "Feature compatibility") */
        const json_t *t = json_object_get(root, "temperature");
        if ((json_is_number(t) && json_number_value(t) != 1.0) || json_object_get(root, "top_k")) {
            sb_puts(&err, "`temperature` may only be set to 1 when thinking is enabled, and "
                          "`top_k` may not be set. Please consult our documentation at "
                          "https://docs.claude.com/en/docs/build-with-claude/"
                          "extended-thinking#feature-compatibility");
            return err.p;
        }
    }
    v->model = model_hash(model);

    /* Render the prompt in Anthropic's order, tools -> system -> messages
     * (prompt-caching, "Cache hierarchy"), checking each thinking block's
     * signature against the prefix before it on the way. */
    arender r = {.h = FNV0};
    r.h = fnvz(r.h, "tools");
    size_t i, j;
    const json_t *x, *blk;
    sb s = {0};
    json_array_foreach(json_object_get(root, "tools"), i, x) {
        s.len = 0;
        canon(&s, x);
        render_block(&r, s.p, s.len, x);
    }
    r.h = fnvz(r.h, "system");
    const json_t *system = json_object_get(root, "system");
    if (json_is_string(system)) {
        s.len = 0;
        canon_text_block(&s, json_string_value(system));
        render_block(&r, s.p, s.len, NULL);
    }
    json_array_foreach(system, i, x) {
        s.len = 0;
        canon(&s, x);
        render_block(&r, s.p, s.len, x);
    }
    const json_t *msgs = json_object_get(root, "messages");
    long last_assistant = -1;
    json_array_foreach(msgs, i, x) {
        const char *role = json_string_value(json_object_get(x, "role"));
        r.h = fnvz(fnvz(r.h, "role"), role ? role : "");
        if (role && strcmp(role, "assistant") == 0)
            last_assistant = (long)i;
        const json_t *content = json_object_get(x, "content");
        if (json_is_string(content)) {
            s.len = 0;
            canon_text_block(&s, json_string_value(content));
            render_block(&r, s.p, s.len, NULL);
            continue;
        }
        json_array_foreach(content, j, blk) {
            const char *bt = json_string_value(json_object_get(blk, "type"));
            bool thinking = bt && strcmp(bt, "thinking") == 0;
            bool redacted = bt && strcmp(bt, "redacted_thinking") == 0;
            if (!err.p && v->thinking && (thinking || redacted) && role &&
                strcmp(role, "assistant") == 0) {
                /*
                 * Preserved thinking: a thinking or redacted_thinking block
                 * sent back is checked against its signature: "The model can
                 * read the block ... If the current model can't read a block,
                 * the API drops it from that request without an error";
                 * "Nothing before the thinking block has changed. The
                 * top-level system prompt, tools, and messages before the
                 * block are its prefix. If the prefix differs ..., that block
                 * and every later thinking block are invalid, and the API
                 * rejects the request with a 400 error"
                 * (platform.claude.com/docs/build-with-claude/preserved-thinking
                 * and its "prefix checks" page).  A block whose text was
                 * changed fails its signature ("pass thinking blocks back
                 * complete and unmodified": build-with-claude/
                 * thinking-tool-workflows).
                 */
                const char *sig = json_string_value(
                    json_object_get(blk, thinking ? "signature" : "data"));
                const char *text = json_string_value(json_object_get(blk, "thinking"));
                uint32_t mh;
                uint64_t p, t = 0;
                if (!parse_sig(sig, thinking ? "mk1" : "mkr1", true, &mh, &p, &t) ||
                    (thinking && !text)) {
                    sb_printf(&err, "messages.%zu.content.%zu: Invalid `%s` in `%s` block", i, j,
                              thinking ? "signature" : "data", bt);
                } else if (mh != v->model) {
                    v->dropped++;
                } else if (p != r.h) {
                    sb_printf(&err, "messages.%zu.content.%zu: thinking block signature does not "
                                    "match the request prefix: `system`, `tools` or an earlier "
                                    "message changed after this block was produced. Keep the "
                                    "prefix unchanged (append only) or drop the thinking blocks "
                                    "from that point on. See https://platform.claude.com/docs/"
                                    "build-with-claude/preserved-thinking", i, j);
                } else {
                    uint64_t want = fnv(p, &p, sizeof p);
                    want = thinking ? fnvz(want, text) : fnvz(want, "redacted");
                    if (want != t)
                        sb_printf(&err, "messages.%zu.content.%zu: Invalid `%s` in `%s` block", i,
                                  j, thinking ? "signature" : "data", bt);
                }
            }
            if (!err.p && bt && strcmp(bt, "compaction") == 0) {
                /*
                 * A compaction block goes back as the API returned it, in the
                 * assistant turn of the response it came in: "append the
                 * response to your messages"; its encrypted_content is
                 * "Opaque metadata from prior compaction, to be round-tripped
                 * verbatim" (platform.claude.com/docs/en/build-with-claude/
                 * compaction; types/beta/beta_compaction_block_param.py).
                 */
                const char *enc = json_string_value(json_object_get(blk, "encrypted_content"));
                const char *text = json_string_value(json_object_get(blk, "content"));
                bool known = false;
                for (long k = 0; enc && text && k < m->compactions; k++)
                    known = known || (strcmp(m->compact_enc[k], enc) == 0 &&
                                      strcmp(m->compact_text[k], text) == 0);
                if (!role || strcmp(role, "assistant") != 0)
                    sb_printf(&err, "messages.%zu.content.%zu: `compaction` blocks may only "
                                    "appear in `assistant` messages", i, j);
                else if (!known)
                    sb_printf(&err, "messages.%zu.content.%zu: Invalid `encrypted_content` in "
                                    "`compaction` block: pass compaction blocks back unmodified",
                              i, j);
            }
            s.len = 0;
            canon(&s, blk);
            render_block(&r, s.p, s.len, blk);
        }
    }
    free(s.p);
    /* "A maximum of 4 blocks with cache_control may be provided" (prompt-
     * caching: "You can define up to 4 cache breakpoints") */
    if (!err.p && r.breakpoints > 4)
        sb_printf(&err, "A maximum of 4 blocks with cache_control may be provided. Found %ld.",
                  r.breakpoints);
    if (!err.p && r.err) {
        err.p = r.err;
        r.err = NULL;
    }
    /*
     * "When thinking is enabled, a final assistant message must start with a
     * thinking block (preceding the lastmost set of tool_use and tool_result
     * blocks)": the tool-use loop sends the last assistant turn's thinking
     * back (extended-thinking, "Preserving thinking blocks"; the 400 text is
     * the API's).
     */
    if (!err.p && v->thinking && last_assistant >= 0) {
        const json_t *content = json_object_get(json_array_get(msgs, (size_t)last_assistant),
                                                "content");
        bool tool_use = false;
        json_array_foreach(content, j, blk) {
            const char *bt = json_string_value(json_object_get(blk, "type"));
            tool_use = tool_use || (bt && strcmp(bt, "tool_use") == 0);
        }
        const char *first = json_string_value(json_object_get(json_array_get(content, 0), "type"));
        if (tool_use && (!first || (strcmp(first, "thinking") && strcmp(first, "redacted_thinking"))))
            sb_printf(&err, "messages.%ld.content.0.type: Expected `thinking` or "
                            "`redacted_thinking`, but found `%s`. When `thinking` is enabled, a "
                            "final `assistant` message must start with a thinking block "
                            "(preceeding the lastmost set of `tool_use` and `tool_result` "
                            "blocks). We recommend you include thinking blocks from previous "
                            "turns. To avoid this requirement, disable `thinking`. Please consult "
                            "our documentation at https://docs.claude.com/en/docs/"
                            "build-with-claude/extended-thinking", last_assistant,
                      first ? first : "text");
    }
    if (err.p) {
        free(r.b);
        free(r.err);
        return err.p;
    }

    /*
     * Cache accounting (prompt-caching, "How automatic prefix checking
     * works"): each breakpoint reads the longest earlier entry that ends at
     * it or at one of the 20 blocks before it, walking back ("the system
     * automatically checks for cache hits at all previous content block
     * boundaries (up to approximately 20 blocks before your explicit
     * breakpoint)"); entries are written at breakpoints whose prefix reaches
     * the model's minimum; input_tokens counts what is neither read nor
     * written ("Tracking cache performance": input_tokens are the tokens
     * after the last cache breakpoint, the three add up to the prompt).
     * Tokens are estimated as characters / 4.
     */
    long min = claude_min_cache(model), total = (long)(r.chars / 4), read = 0;
    long read_pos = -1;
    for (size_t b = 0; b < r.n; b++) {
        if (!r.b[b].ttl)
            continue;
        for (size_t back = 0; back < 20 && back <= b; back++) {
            if (claude_cached(m, v->model, r.b[b - back].h)) {
                if ((long)(b - back) > read_pos)
                    read_pos = (long)(b - back);
                break;
            }
        }
    }
    if (read_pos >= 0)
        read = (long)(r.b[read_pos].chars / 4);
    long w1h_end = read, w_end = read;
    for (size_t b = 0; b < r.n; b++) {
        long tokens = (long)(r.b[b].chars / 4);
        if (!r.b[b].ttl || (long)b <= read_pos || tokens < min)
            continue;
        if (!claude_cached(m, v->model, r.b[b].h))
            cache_add(m, (cache_entry){.model = v->model, .prefix = r.b[b].h});
        if (r.b[b].ttl == 60 && tokens > w1h_end)
            w1h_end = tokens;
        if (tokens > w_end)
            w_end = tokens;
    }
    v->account = true;
    v->cache_read = read;
    v->write_1h = w1h_end - read;
    v->write_5m = w_end - w1h_end;
    v->input = total - w_end;
    if (v->input < 0)
        v->input = 0;
    /* the reply: a thinking block bound to the whole request; every 5th
     * thinking reply is a redacted_thinking block instead ("Occasionally
     * Claude's internal reasoning will be flagged by our safety systems ...
     * we encrypt some or all of the thinking block and return it to you as a
     * redacted_thinking block": extended-thinking, "Thinking redaction") */
    v->prefix = fnvz(fnvz(r.h, "role"), "assistant");
    v->redact = v->thinking && reply_no % 5 == 4;
    free(r.b);
    return NULL;
}

/* The reply's signature (thinking text `text`) or redacted data, malloc'd. */
static char *claude_signature(const vreply *v, const char *text) {
    uint64_t t = fnv(v->prefix, &v->prefix, sizeof v->prefix);
    t = v->redact ? fnvz(t, "redacted") : fnvz(t, text);
    char *s = xrealloc(NULL, 64);
    snprintf(s, 64, "%s%08x%016llx%016llx", v->redact ? "mkr1" : "mk1", (unsigned)v->model,
             (unsigned long long)v->prefix, (unsigned long long)t);
    return s;
}

/*
 * OpenAI-format rules: DeepSeek thinking mode, Gemini 3 thought signatures,
 * and OpenAI's automatic prefix caching.  Returns a new 400 body (the
 * vendor's shape) or NULL; fills v.
 */
static void openai_cache(mock_llm *m, const json_t *root, const char *list, vreply *v);

static char *openai_rules(mock_llm *m, const json_t *root, const char *model, bool account,
                          vreply *v) {
    const char *slash = strrchr(model, '/');
    const char *base = slash ? slash + 1 : model;
    v->model = model_hash(model);
    const json_t *msgs = json_object_get(root, "messages");
    size_t i;
    const json_t *x, *c;
    if (starts(base, "deepseek-reasoner") || starts(base, "deepseek-v4")) {
        /*
         * DeepSeek thinking mode (api-docs.deepseek.com/guides/thinking_mode):
         * on by default ("Thinking mode is enabled by default"; thinking:
         * {type: disabled} turns it off); the chain of thought streams as
         * delta.reasoning_content; "For turns that do perform tool calls, the
         * reasoning_content must be fully passed back to the API in all
         * subsequent requests. If your code does not correctly pass back
         * reasoning_content, the API will return a 400 error."
         */
        v->kind = V_DEEPSEEK;
        const char *type = json_string_value(
            json_object_get(json_object_get(root, "thinking"), "type"));
        v->thinking = !type || strcmp(type, "disabled") != 0;
        json_array_foreach(msgs, i, x) {
            if (!v->thinking || json_array_size(json_object_get(x, "tool_calls")) == 0)
                continue;
            if (!json_is_string(json_object_get(x, "reasoning_content")))
                return error_body(API_OPENAI, "invalid_request_error", "invalid_request_error",
                                  "The reasoning_content in the thinking mode must be passed back "
                                  "to the API.");
        }
    } else if (gemini_checks(base)) {
        /*
         * Gemini 3 thought signatures through the OpenAI-compatible endpoint
         * (ai.google.dev/gemini-api/docs/thought-signatures and .../openai,
         * "Thought signatures"): a response with function calls carries
         * extra_content.google.thought_signature on its first call ("If the
         * model generates parallel function calls in a response, the
         * thoughtSignature is attached only to the first functionCall
         * part"); "you must pass back thought signatures during function
         * calling, otherwise you will get a validation error (4xx)", checked
         * for the current turn (the steps after the last user message);
         * "skip_thought_signature_validator", the dummy signature the page
         * documents for calls whose signature is not available, passes.  The 400 body is the
         * endpoint's list shape with the message Gemini answers.
         */
        v->kind = V_GEMINI;
        sb s = {0};
        uint64_t h = fnvz(FNV0, "tools");
        canon(&s, json_object_get(root, "tools"));
        h = fnv(h, s.p ? s.p : "", s.len);
        size_t turn = 0;
        json_array_foreach(msgs, i, x) {
            const char *role = json_string_value(json_object_get(x, "role"));
            if (role && strcmp(role, "user") == 0)
                turn = i + 1;
        }
        char *bad = NULL;
        json_array_foreach(msgs, i, x) {
            const json_t *calls = json_object_get(x, "tool_calls");
            if (!bad && i >= turn && json_array_size(calls) > 0) {
                c = json_array_get(calls, 0);
                const char *sig = json_string_value(json_object_get(
                    json_object_get(json_object_get(c, "extra_content"), "google"),
                    "thought_signature"));
                const char *name = json_string_value(
                    json_object_get(json_object_get(c, "function"), "name"));
                uint32_t mh;
                uint64_t p;
                sb e = {0};
                if (!sig) {
                    sb_printf(&e, "Function call is missing a thought_signature in functionCall "
                                  "parts. This is required for tools to work correctly, and "
                                  "missing thought_signature may lead to degraded model "
                                  "performance. Additional data, function call `default_api:%s`"
                                  ", position %zu. Please refer to https://ai.google.dev/"
                                  "gemini-api/docs/thought-signatures for more details.",
                              name ? name : "", i + 1);
                } else if (strcmp(sig, "skip_thought_signature_validator") != 0 &&
                           (!parse_sig(sig, "gts1", false, &mh, &p, NULL) ||
                            (mh == v->model && p != h))) {
                    sb_puts(&e, "Corrupted thought signature.");
                }
                bad = e.p;
            }
            s.len = 0;
            canon(&s, x);
            h = fnv(h, s.p ? s.p : "", s.len);
        }
        free(s.p);
        if (bad) {
            sb b = {0};
            sb_puts(&b, "[{\"error\":{\"code\":400,\"message\":");
            sb_jsonz(&b, bad);
            sb_puts(&b, ",\"status\":\"INVALID_ARGUMENT\"}}]");
            free(bad);
            return b.p;
        }
        v->prefix = h;
    } else if (account || starts(base, "gpt-3.5") || starts(base, "gpt-4") ||
               starts(base, "gpt-5") || starts(base, "o1") || starts(base, "o3") ||
               starts(base, "o4") || starts(base, "chatgpt-")) {
        v->kind = V_OPENAI;
    }
    if (v->kind != V_OPENAI)
        return NULL;
    openai_cache(m, root, "messages", v);
    return NULL;
}

/*
 * OpenAI's automatic prefix caching of a request whose conversation is the
 * array member `list` of `root` ("messages" on Chat Completions, "input" on
 * Responses): v->input, v->cache_read and the prompt kept for the next ones.
 */
static void openai_cache(mock_llm *m, const json_t *root, const char *list, vreply *v) {
    const json_t *msgs = json_object_get(root, list);
    size_t i, j;
    const json_t *x;
    /*
     * OpenAI prompt caching (platform.openai.com/docs/guides/prompt-caching):
     * automatic "for prompts that are 1024 tokens or longer"; "cache hits
     * occur in increments of 128 tokens" of an exact prefix match with a
     * recently seen prompt (tools and messages in order); prompt_cache_key
     * "is combined with the prefix hash" (a separate bucket per key); the
     * hit is reported as usage.prompt_tokens_details.cached_tokens.  Tokens
     * are estimated as characters / 4 of the canonical prompt.
     */
    sb s = {0};
    canon(&s, json_object_get(root, "tools"));
    json_array_foreach(msgs, i, x) canon(&s, x);
    const char *bucket = json_string_value(json_object_get(root, "prompt_cache_key"));
    bucket = bucket ? bucket : "";
    long tokens = (long)(s.len / 4), best = 0;
    for (j = 0; tokens >= 1024 && j < m->ncache; j++) {
        const cache_entry *e = &m->cache[j];
        if (!e->text || e->model != v->model || strcmp(e->bucket, bucket) != 0)
            continue;
        size_t n = 0, lim = e->text_len < s.len ? e->text_len : s.len;
        while (n < lim && e->text[n] == s.p[n])
            n++;
        if ((long)(n / 4) > best)
            best = (long)(n / 4);
    }
    v->account = true;
    v->input = tokens;
    v->cache_read = best >= 1024 ? best / 128 * 128 : 0;
    if (tokens >= 1024) {
        size_t kept = 0;
        for (j = 0; j < m->ncache; j++)
            kept += m->cache[j].text != NULL;
        if (kept >= MAX_OPENAI_PROMPTS) { /* drop the oldest prompt */
            for (j = 0; j < m->ncache && !m->cache[j].text; j++) {
            }
            free(m->cache[j].bucket);
            free(m->cache[j].text);
            memmove(&m->cache[j], &m->cache[j + 1], (m->ncache - j - 1) * sizeof *m->cache);
            m->ncache--;
        }
        cache_add(m, (cache_entry){.model = v->model, .bucket = xstrdup(bucket), .text = s.p,
                                   .text_len = s.len});
        s.p = NULL;
    }
    free(s.p);
}


/* ---- OpenAI Responses (POST /v1/responses) --------------------------------
 *
 * The request rules of the Responses API (platform.openai.com/docs/
 * api-reference/responses/create; openai-python types/responses/
 * response_input_item_param.py, response_reasoning_item.py), with the 400s
 * the API answers:
 *   - `model` and `input` are required ("Missing required parameter");
 *     `max_tokens` is Chat Completions' ("Unsupported parameter ... moved to
 *     'max_output_tokens'"), `messages` unknown.
 *   - input items: message (role user/assistant/system/developer, content a
 *     string or parts input_text/input_image/output_text/refusal),
 *     function_call {call_id, name, arguments}, function_call_output
 *     {call_id, output}, reasoning {id, summary[], encrypted_content?};
 *     any other type is an invalid value.
 *   - a function_call_output answers a function_call before it ("No tool
 *     call found for function call output with call_id ..."); a
 *     function_call is answered by a later function_call_output ("No tool
 *     output found for function call ...").
 *   - with store false nothing is kept: a reasoning item without
 *     encrypted_content is "Item with id ... not found. Items are not
 *     persisted when `store` is set to false."  encrypted_content the mock
 *     did not make, or made for another item, "could not be verified".
 *   - a reasoning model's function call comes back with the reasoning item
 *     that preceded it in the output (in the same run of output items: after
 *     the last function_call_output or non-assistant message before it), else "Item ...
 *     of type 'function_call' was provided without its required 'reasoning'
 *     item" (the reasoning item carries the chain of thought across tool
 *     steps; response_reasoning_item.py: "Be sure to include these items in
 *     your input ... for subsequent turns").
 *   - reasoning models refuse temperature other than 1 (gpt-5.1 and later
 *     take it with reasoning.effort "none", their default).
 * A reasoning model (gpt-5*, not gpt-5-chat; o1, o3, o4) answers with a
 * reasoning item rs_mock_<request> first: its summary the entry's
 * "reasoning" (a default sentence when absent, none when ""), and
 * encrypted_content "enc1<hex8 model><hex16 hash>" when the request
 * includes "reasoning.encrypted_content"; the item's function calls are
 * recorded (issued) with it.  Usage is computed as for Chat Completions
 * (prefix caching over the canonical input) for OpenAI model names.
 */
typedef struct issued {
    char *call_id, *rs_id, *enc; /* enc NULL: sent without encrypted_content */
} issued;

static const issued *issued_call(const mock_llm *m, const char *call_id) {
    for (size_t i = m->nissued; call_id && i-- > 0;)
        if (strcmp(m->issued[i].call_id, call_id) == 0)
            return &m->issued[i];
    return NULL;
}

static const issued *issued_reasoning(const mock_llm *m, const char *rs_id) {
    for (size_t i = m->nissued; rs_id && i-- > 0;)
        if (strcmp(m->issued[i].rs_id, rs_id) == 0)
            return &m->issued[i];
    return NULL;
}

/* Whether `base` (a model id after any "vendor/") reasons. */
static bool responses_reasons(const char *base) {
    return starts(base, "o1") || starts(base, "o3") || starts(base, "o4") ||
           (starts(base, "gpt-5") && !starts(base, "gpt-5-chat"));
}

static bool in_set(const json_t *set, const char *key) {
    return key && json_object_get(set, key) != NULL;
}

/* The rules above: NULL, or a new error message (the request breaks one). */
static char *responses_check(mock_llm *m, const json_t *root, const char *base) {
    sb e = {0};
    const json_t *input = json_object_get(root, "input");
    if (!json_is_string(json_object_get(root, "model")))
        sb_puts(&e, "Missing required parameter: 'model'.");
    else if (!input)
        sb_puts(&e, "Missing required parameter: 'input'.");
    else if (!json_is_string(input) && !json_is_array(input))
        sb_puts(&e, "Invalid type for 'input': expected a string or an array of input items.");
    else if (json_object_get(root, "max_tokens"))
        sb_puts(&e, "Unsupported parameter: 'max_tokens'. In the Responses API, this parameter "
                    "has moved to 'max_output_tokens'.");
    else if (json_object_get(root, "messages"))
        sb_puts(&e, "Unknown parameter: 'messages'.");
    if (e.p)
        return e.p;
    if (responses_reasons(base)) {
        const json_t *t = json_object_get(root, "temperature");
        const char *effort = json_string_value(
            json_object_get(json_object_get(root, "reasoning"), "effort"));
        bool none = effort ? strcmp(effort, "none") == 0 : starts(base, "gpt-5.");
        if (json_is_number(t) && json_number_value(t) != 1.0 && !none) {
            sb_printf(&e, "Unsupported value: 'temperature' does not support %g with this "
                          "model. Only the default (1) value is supported.",
                      json_number_value(t));
            return e.p;
        }
    }
    const json_t *store = json_object_get(root, "store");
    bool stateless = json_is_false(store);
    json_t *calls = json_object(), *answered = json_object(), *group = json_object();
    size_t i;
    const json_t *it;
    json_array_foreach(input, i, it) {
        if (e.p)
            break;
        const char *type = json_string_value(json_object_get(it, "type"));
        if (!type && json_object_get(it, "role"))
            type = "message";
        if (!json_is_object(it) || !type) {
            sb_printf(&e, "Invalid value for 'input[%zu]': expected an input item.", i);
        } else if (strcmp(type, "message") == 0) {
            const char *role = json_string_value(json_object_get(it, "role"));
            const json_t *content = json_object_get(it, "content");
            if (!role || (strcmp(role, "user") && strcmp(role, "assistant") &&
                          strcmp(role, "system") && strcmp(role, "developer")))
                sb_printf(&e, "Invalid value: '%s'. Supported values are: 'assistant', "
                              "'system', 'developer', and 'user'. (input[%zu].role)",
                          role ? role : "", i);
            else if (!json_is_string(content) && !json_is_array(content))
                sb_printf(&e, "Invalid type for 'input[%zu].content'.", i);
            size_t j;
            const json_t *part;
            json_array_foreach(content, j, part) {
                const char *pt = json_string_value(json_object_get(part, "type"));
                if (!e.p && (!pt || (strcmp(pt, "input_text") && strcmp(pt, "input_image") &&
                                     strcmp(pt, "output_text") && strcmp(pt, "refusal"))))
                    sb_printf(&e, "Invalid value: '%s'. (input[%zu].content[%zu].type)",
                              pt ? pt : "", i, j);
            }
            if (!role || strcmp(role, "assistant") != 0) /* a new run of output */
                json_object_clear(group);
        } else if (strcmp(type, "function_call") == 0) {
            const char *id = json_string_value(json_object_get(it, "call_id"));
            if (!id || !json_is_string(json_object_get(it, "name")) ||
                !json_is_string(json_object_get(it, "arguments"))) {
                sb_printf(&e, "Missing required parameter: 'input[%zu].call_id', 'name' or "
                              "'arguments'.", i);
                break;
            }
            /* a script that loops makes the same call id again: any of its
             * reasoning items will do */
            const issued *is = issued_call(m, id);
            for (size_t k = 0; is && k < m->nissued; k++)
                if (strcmp(m->issued[k].call_id, id) == 0 && in_set(group, m->issued[k].rs_id))
                    is = NULL;
            if (is)
                sb_printf(&e, "Item '%s' of type 'function_call' was provided without its "
                              "required 'reasoning' item: '%s'.", id, is->rs_id);
            json_object_set_new(calls, id, json_true());
        } else if (strcmp(type, "function_call_output") == 0) {
            const char *id = json_string_value(json_object_get(it, "call_id"));
            if (!in_set(calls, id))
                sb_printf(&e, "No tool call found for function call output with call_id %s.",
                          id ? id : "(none)");
            else
                json_object_set_new(answered, id, json_true());
            json_object_clear(group);
        } else if (strcmp(type, "reasoning") == 0) {
            const char *id = json_string_value(json_object_get(it, "id"));
            const json_t *enc = json_object_get(it, "encrypted_content");
            const issued *is = issued_reasoning(m, id);
            if (!id || !json_is_array(json_object_get(it, "summary"))) {
                sb_printf(&e, "Missing required parameter: 'input[%zu].id' or 'summary'.", i);
            } else if (!json_is_string(enc) && stateless) {
                sb_printf(&e, "Item with id '%s' not found. Items are not persisted when `store` "
                              "is set to false. Try again with `store` set to true, or remove "
                              "this item from your input.", id);
            } else if (json_is_string(enc) &&
                       (!is || !is->enc || strcmp(is->enc, json_string_value(enc)) != 0)) {
                sb_printf(&e, "The encrypted content for item %s could not be verified. Reason: "
                              "Encrypted content could not be decrypted or parsed.", id);
            } else if (!json_is_string(enc) && !is) {
                sb_printf(&e, "Item with id '%s' not found.", id);
            }
            json_object_set_new(group, id, json_true());
        } else if (strcmp(type, "compaction") == 0) {
            /* the item POST /responses/compact returned goes back as it came:
             * "pass the compacted output as input to your next request"
             * (https://developers.openai.com/api/docs/guides/compaction);
             * its encrypted_content is opaque and checked on the server */
            const char *enc = json_string_value(json_object_get(it, "encrypted_content"));
            bool known = false;
            for (long k = 0; enc && k < m->compactions; k++)
                known = known || strcmp(m->compact_enc[k], enc) == 0;
            if (!enc)
                sb_printf(&e, "Missing required parameter: 'input[%zu].encrypted_content'.", i);
            else if (!known)
                sb_printf(&e, "The encrypted content for item %s could not be verified. Reason: "
                              "Encrypted content could not be decrypted or parsed.",
                          json_string_value(json_object_get(it, "id"))
                              ? json_string_value(json_object_get(it, "id"))
                              : "(no id)");
            json_object_clear(group);
        } else {
            sb_printf(&e, "Invalid value: '%s'. Supported values are: 'message', "
                          "'function_call', 'function_call_output', 'reasoning' and "
                          "'compaction'. (input[%zu].type)", type, i);
        }
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)calls, key, val) {
        if (!e.p && !json_object_get(answered, key))
            sb_printf(&e, "No tool output found for function call %s.", key);
    }
    json_decref(calls);
    json_decref(answered);
    json_decref(group);
    return e.p;
}

/* The encrypted_content of reasoning item `rs_id` for `model`. */
static char *responses_enc(uint32_t model, const char *rs_id, const char *summary) {
    uint64_t h = fnvz(fnvz(FNV0, rs_id), summary ? summary : "");
    char *s = xrealloc(NULL, 48);
    snprintf(s, 48, "enc1%08x%016llx", (unsigned)model, (unsigned long long)h);
    return s;
}

/* The vendor rules of a Responses request (lock held): NULL and *v filled,
 * or a new error body. */
static char *responses_rules(mock_llm *m, const json_t *root, const char *model, vreply *v) {
    const char *slash = model ? strrchr(model, '/') : NULL;
    const char *base = slash ? slash + 1 : model ? model : "";
    char *msg = responses_check(m, root, base);
    if (msg) {
        char *body = error_body(API_RESPONSES, "invalid_request_error", NULL, msg);
        free(msg);
        return body;
    }
    v->model = model_hash(base);
    v->thinking = responses_reasons(base);
    size_t k;
    const json_t *inc;
    json_array_foreach(json_object_get(root, "include"), k, inc) {
        const char *name = json_string_value(inc);
        if (name && strcmp(name, "reasoning.encrypted_content") == 0)
            v->encrypt = v->thinking;
    }
    if (m->cache_accounting || starts(base, "gpt-") || starts(base, "o1") ||
        starts(base, "o3") || starts(base, "o4") || starts(base, "chatgpt-")) {
        v->kind = V_OPENAI;
        openai_cache(m, root, "input", v);
    }
    return NULL;
}

/* The Gemini reply's thought signature, malloc'd. */
static char *gemini_signature(const vreply *v) {
    char *s = xrealloc(NULL, 48);
    snprintf(s, 48, "gts1%08x%016llx", (unsigned)v->model, (unsigned long long)v->prefix);
    return s;
}

/*
 * The vendor rules for one request: NULL and *v filled, or a new 400 body.
 * Holds the server lock for the cache and the counters.
 */
static char *vendor_rules(mock_llm *m, api_kind api, const char *body, vreply *v) {
    memset(v, 0, sizeof *v);
    json_t *root = json_loads(body, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return NULL;
    }
    const char *model = json_string_value(json_object_get(root, "model"));
    char *err = NULL;
    pthread_mutex_lock(&m->mu);
    if (api == API_ANTHROPIC && model && (starts(model, "claude-") || m->cache_accounting)) {
        v->kind = V_CLAUDE;
        char *msg = anthropic_rules(m, root, model, m->thinking_replies, v);
        if (msg) {
            err = error_body(api, "invalid_request_error", NULL, msg);
            free(msg);
        } else if (v->thinking) {
            m->thinking_replies++;
        }
    } else if (api == API_OPENAI && model) {
        err = openai_rules(m, root, model, m->cache_accounting, v);
    } else if (api == API_RESPONSES) {
        err = responses_rules(m, root, model, v);
    }
    if (!err && v->account) {
        m->cache_read_tokens += v->cache_read;
        m->cache_write_tokens += v->write_5m + v->write_1h;
    }
    pthread_mutex_unlock(&m->mu);
    json_decref(root);
    return err;
}

/* The list of SSE events of one stream, with the fault's cut points. */
typedef struct events {
    char **ev;
    size_t n, cap;
    size_t first_delta; /* index after which `malformed` inserts its line */
    size_t end_start;   /* first event of the ending (finish, usage, stop) */
} events;

static void ev_push(events *es, sb *b) {
    if (es->n == es->cap) {
        es->cap = es->cap ? es->cap * 2 : 32;
        es->ev = xrealloc(es->ev, es->cap * sizeof *es->ev);
    }
    es->ev[es->n++] = b->p;
    memset(b, 0, sizeof *b);
}

static void ev_free(events *es) {
    for (size_t i = 0; i < es->n; i++)
        free(es->ev[i]);
    free(es->ev);
}

/* Length of the next piece of s (<= max bytes, not cutting UTF-8). */
static size_t piece_len(const char *s, size_t left, size_t max) {
    if (left <= max)
        return left;
    size_t n = max;
    while (n > 1 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

static void openai_chunk_start(sb *b, long index, const char *model) {
    sb_printf(b, "data: {\"id\":\"chatcmpl-mock-%ld\",\"object\":\"chat.completion.chunk\","
                 "\"created\":1700000000,\"model\":", index);
    sb_jsonz(b, model);
}

static void openai_delta(events *es, long index, const char *model, const char *field,
                         const char *s, size_t n) {
    sb b = {0};
    openai_chunk_start(&b, index, model);
    sb_printf(&b, ",\"choices\":[{\"index\":0,\"delta\":{\"%s\":", field);
    sb_json(&b, s, n);
    sb_puts(&b, "},\"finish_reason\":null}]}\n\n");
    ev_push(es, &b);
}

/* The reasoning a vendor-rules reply streams when the script gives none. */
static char *default_reasoning(long index) {
    char *s = xrealloc(NULL, 64);
    snprintf(s, 64, "Working out step %ld: the next tool call.", index);
    return s;
}

static void openai_events(events *es, const entry *e, long index, const char *model,
                          const vreply *v) {
    sb b = {0};
    openai_chunk_start(&b, index, model);
    sb_puts(&b, ",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                "\"finish_reason\":null}]}\n\n");
    ev_push(es, &b);
    es->first_delta = 0;
    char *dflt = NULL;
    const char *reasoning = e->reasoning;
    if (v->kind == V_DEEPSEEK && v->thinking) {
        if (!reasoning)
            reasoning = dflt = default_reasoning(index);
        else if (!*reasoning) /* the field is there, empty */
            openai_delta(es, index, model, "reasoning_content", "", 0);
    }
    const struct {
        const char *src, *field;
    } parts[] = {{reasoning, "reasoning_content"}, {e->text, "content"}};
    for (size_t k = 0; k < 2; k++) {
        const char *s = parts[k].src;
        size_t left = s ? strlen(s) : 0;
        while (left) {
            size_t n = piece_len(s, left, e->chunk_size);
            openai_delta(es, index, model, parts[k].field, s, n);
            if (es->first_delta == 0)
                es->first_delta = es->n - 1;
            s += n;
            left -= n;
        }
    }
    for (size_t i = 0; i < e->ncalls; i++) {
        const tool_call *tc = &e->calls[i];
        openai_chunk_start(&b, index, model);
        sb_printf(&b, ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%zu,\"id\":",
                  i);
        sb_jsonz(&b, tc->id);
        if (i == 0 && v->kind == V_GEMINI) { /* on the first call only */
            char *sig = gemini_signature(v);
            sb_puts(&b, ",\"extra_content\":{\"google\":{\"thought_signature\":");
            sb_jsonz(&b, sig);
            sb_puts(&b, "}}");
            free(sig);
        }
        sb_puts(&b, ",\"type\":\"function\",\"function\":{\"name\":");
        sb_jsonz(&b, tc->name);
        sb_puts(&b, ",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n");
        ev_push(es, &b);
        const char *s = tc->arguments;
        size_t left = strlen(s);
        while (left) {
            size_t n = piece_len(s, left, e->chunk_size);
            openai_chunk_start(&b, index, model);
            sb_printf(&b, ",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%zu,"
                          "\"function\":{\"arguments\":", i);
            sb_json(&b, s, n);
            sb_puts(&b, "}}]},\"finish_reason\":null}]}\n\n");
            ev_push(es, &b);
            s += n;
            left -= n;
        }
    }
    es->end_start = es->n;
    const char *finish = e->finish ? e->finish : e->ncalls ? "tool_calls" : "stop";
    openai_chunk_start(&b, index, model);
    sb_printf(&b, ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"%s\"}]}\n\n", finish);
    ev_push(es, &b);
    openai_chunk_start(&b, index, model);
    if (v->account) { /* platform.openai.com/docs/api-reference/chat/object, "usage" */
        long rt = reasoning ? (long)strlen(reasoning) / 4 : 0;
        sb_printf(&b, ",\"choices\":[],\"usage\":{\"prompt_tokens\":%ld,\"completion_tokens\":%ld,"
                      "\"total_tokens\":%ld,\"prompt_tokens_details\":{\"cached_tokens\":%ld},"
                      "\"completion_tokens_details\":{\"reasoning_tokens\":%ld}}}\n\n",
                  v->input, e->output_tokens + rt, v->input + e->output_tokens + rt,
                  v->cache_read, rt);
    } else {
        sb_printf(&b, ",\"choices\":[],\"usage\":{\"prompt_tokens\":%ld,\"completion_tokens\":%ld,"
                      "\"total_tokens\":%ld}}\n\n",
                  e->input_tokens, e->output_tokens, e->input_tokens + e->output_tokens);
    }
    ev_push(es, &b);
    free(dflt);
    sb_puts(&b, "data: [DONE]\n\n");
    ev_push(es, &b);
}

/* One Responses event: "event: <type>" and its data {"type":<type>,
 * "sequence_number":n <rest>} (`rest` starts with ',' or is ""). */
static void responses_event(events *es, long *seq, const char *type, const char *rest) {
    sb b = {0};
    sb_printf(&b, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%ld%s}\n\n", type, type,
              (*seq)++, rest);
    ev_push(es, &b);
}

/* The response object's common members (no closing brace). */
static void responses_object(sb *b, long index, const char *model, const char *status) {
    sb_printf(b, "{\"id\":\"resp_mock_%ld\",\"object\":\"response\",\"created_at\":1700000000,"
                 "\"status\":\"%s\",\"model\":", index, status);
    sb_jsonz(b, model);
}

/* The deltas of `s` in pieces: `type` events on output_index `oi`, with
 * `extra` members (",\"summary_index\":0" or ""). */
static void responses_deltas(events *es, long *seq, const entry *e, const char *type,
                             const char *item_id, size_t oi, const char *extra, const char *s) {
    size_t left = s ? strlen(s) : 0;
    while (left) {
        size_t n = piece_len(s, left, e->chunk_size);
        sb r = {0};
        sb_printf(&r, ",\"item_id\":\"%s\",\"output_index\":%zu%s,\"delta\":", item_id, oi, extra);
        sb_json(&r, s, n);
        responses_event(es, seq, type, r.p);
        free(r.p);
        if (es->first_delta == 0)
            es->first_delta = es->n - 1;
        s += n;
        left -= n;
    }
}

/* A Responses stream (platform.openai.com/docs/api-reference/
 * responses-streaming): created, in_progress, then each output item
 * (reasoning, message, function calls) as added / deltas / done, then
 * completed (or incomplete for finish "length").  `enc`: the reasoning
 * item's encrypted_content (NULL: none). */
static void responses_events(events *es, const entry *e, long index, const char *model,
                             const vreply *v, const char *enc) {
    long seq = 0;
    sb r = {0}, out = {0}; /* out: the output items, for the final response */
    responses_object(&r, index, model, "in_progress");
    sb_puts(&r, ",\"output\":[]}");
    sb x = {0};
    sb_puts(&x, ",\"response\":");
    sb_add(&x, r.p, r.len);
    responses_event(es, &seq, "response.created", x.p);
    responses_event(es, &seq, "response.in_progress", x.p);
    free(r.p);
    free(x.p);
    memset(&r, 0, sizeof r);
    memset(&x, 0, sizeof x);
    es->first_delta = 0;
    size_t oi = 0;
    char *dflt = NULL;
    const char *reasoning = e->reasoning;
    if (v->thinking) {
        if (!reasoning)
            reasoning = dflt = default_reasoning(index);
        char rs[48];
        snprintf(rs, sizeof rs, "rs_mock_%ld", index);
        sb_printf(&r, ",\"output_index\":%zu,\"item\":{\"id\":\"%s\",\"type\":\"reasoning\","
                      "\"summary\":[]}", oi, rs);
        responses_event(es, &seq, "response.output_item.added", r.p);
        r.len = 0;
        if (*reasoning) {
            sb_printf(&r, ",\"item_id\":\"%s\",\"output_index\":%zu,\"summary_index\":0,"
                          "\"part\":{\"type\":\"summary_text\",\"text\":\"\"}", rs, oi);
            responses_event(es, &seq, "response.reasoning_summary_part.added", r.p);
            r.len = 0;
            responses_deltas(es, &seq, e, "response.reasoning_summary_text.delta", rs, oi,
                             ",\"summary_index\":0", reasoning);
            sb_printf(&r, ",\"item_id\":\"%s\",\"output_index\":%zu,\"summary_index\":0,\"text\":",
                      rs, oi);
            sb_jsonz(&r, reasoning);
            responses_event(es, &seq, "response.reasoning_summary_text.done", r.p);
            r.len = 0;
        }
        sb item = {0};
        sb_printf(&item, "{\"id\":\"%s\",\"type\":\"reasoning\",\"summary\":[", rs);
        if (*reasoning) {
            sb_puts(&item, "{\"type\":\"summary_text\",\"text\":");
            sb_jsonz(&item, reasoning);
            sb_puts(&item, "}");
        }
        sb_puts(&item, "]");
        if (enc) {
            sb_puts(&item, ",\"encrypted_content\":");
            sb_jsonz(&item, enc);
        }
        sb_puts(&item, "}");
        sb_printf(&r, ",\"output_index\":%zu,\"item\":%s", oi, item.p);
        responses_event(es, &seq, "response.output_item.done", r.p);
        r.len = 0;
        sb_printf(&out, "%s%s", out.len ? "," : "", item.p);
        free(item.p);
        oi++;
    }
    if (e->text) {
        char id[48];
        snprintf(id, sizeof id, "msg_mock_%ld", index);
        sb_printf(&r, ",\"output_index\":%zu,\"item\":{\"id\":\"%s\",\"type\":\"message\","
                      "\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}", oi, id);
        responses_event(es, &seq, "response.output_item.added", r.p);
        r.len = 0;
        sb_printf(&r, ",\"item_id\":\"%s\",\"output_index\":%zu,\"content_index\":0,\"part\":"
                      "{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}", id, oi);
        responses_event(es, &seq, "response.content_part.added", r.p);
        r.len = 0;
        responses_deltas(es, &seq, e, "response.output_text.delta", id, oi,
                         ",\"content_index\":0", e->text);
        sb_printf(&r, ",\"item_id\":\"%s\",\"output_index\":%zu,\"content_index\":0,\"text\":", id,
                  oi);
        sb_jsonz(&r, e->text);
        responses_event(es, &seq, "response.output_text.done", r.p);
        r.len = 0;
        sb part = {0};
        sb_puts(&part, "{\"type\":\"output_text\",\"text\":");
        sb_jsonz(&part, e->text);
        sb_puts(&part, ",\"annotations\":[]}");
        sb_printf(&r, ",\"item_id\":\"%s\",\"output_index\":%zu,\"content_index\":0,\"part\":%s",
                  id, oi, part.p);
        responses_event(es, &seq, "response.content_part.done", r.p);
        r.len = 0;
        sb item = {0};
        sb_printf(&item, "{\"id\":\"%s\",\"type\":\"message\",\"status\":\"completed\","
                         "\"role\":\"assistant\",\"content\":[%s]}", id, part.p);
        sb_printf(&r, ",\"output_index\":%zu,\"item\":%s", oi, item.p);
        responses_event(es, &seq, "response.output_item.done", r.p);
        r.len = 0;
        sb_printf(&out, "%s%s", out.len ? "," : "", item.p);
        free(item.p);
        free(part.p);
        oi++;
    }
    for (size_t i = 0; i < e->ncalls; i++, oi++) {
        const tool_call *tc = &e->calls[i];
        char id[64];
        snprintf(id, sizeof id, "fc_mock_%ld_%zu", index, i);
        sb head = {0};
        sb_printf(&head, "{\"id\":\"%s\",\"type\":\"function_call\",\"call_id\":", id);
        sb_jsonz(&head, tc->id);
        sb_puts(&head, ",\"name\":");
        sb_jsonz(&head, tc->name);
        sb_printf(&r, ",\"output_index\":%zu,\"item\":%s,\"arguments\":\"\","
                      "\"status\":\"in_progress\"}", oi, head.p);
        responses_event(es, &seq, "response.output_item.added", r.p);
        r.len = 0;
        responses_deltas(es, &seq, e, "response.function_call_arguments.delta", id, oi, "",
                         tc->arguments);
        sb_printf(&r, ",\"item_id\":\"%s\",\"output_index\":%zu,\"arguments\":", id, oi);
        sb_jsonz(&r, tc->arguments);
        responses_event(es, &seq, "response.function_call_arguments.done", r.p);
        r.len = 0;
        sb item = {0};
        sb_add(&item, head.p, head.len);
        sb_puts(&item, ",\"arguments\":");
        sb_jsonz(&item, tc->arguments);
        sb_puts(&item, ",\"status\":\"completed\"}");
        sb_printf(&r, ",\"output_index\":%zu,\"item\":%s", oi, item.p);
        responses_event(es, &seq, "response.output_item.done", r.p);
        r.len = 0;
        sb_printf(&out, "%s%s", out.len ? "," : "", item.p);
        free(item.p);
        free(head.p);
    }
    es->end_start = es->n;
    bool length = e->finish && strcmp(e->finish, "length") == 0;
    long rt = reasoning ? (long)strlen(reasoning) / 4 : 0;
    long input = v->account ? v->input : e->input_tokens;
    long cached = v->account ? v->cache_read : 0;
    responses_object(&r, index, model, length ? "incomplete" : "completed");
    sb_printf(&r, ",\"incomplete_details\":%s,\"output\":[%s],\"usage\":{\"input_tokens\":%ld,"
                  "\"input_tokens_details\":{\"cached_tokens\":%ld},\"output_tokens\":%ld,"
                  "\"output_tokens_details\":{\"reasoning_tokens\":%ld},\"total_tokens\":%ld}}",
              length ? "{\"reason\":\"max_output_tokens\"}" : "null", out.p ? out.p : "", input,
              cached, e->output_tokens + rt, rt, input + e->output_tokens + rt);
    sb_puts(&x, ",\"response\":");
    sb_add(&x, r.p, r.len);
    responses_event(es, &seq, length ? "response.incomplete" : "response.completed", x.p);
    free(x.p);
    free(r.p);
    free(out.p);
    free(dflt);
}

static void anthropic_event(events *es, const char *name, sb *data) {
    sb b = {0};
    sb_printf(&b, "event: %s\ndata: ", name);
    sb_add(&b, data->p, data->len);
    sb_puts(&b, "\n\n");
    free(data->p);
    memset(data, 0, sizeof *data);
    ev_push(es, &b);
}

/* One content block: start, deltas of `s` in pieces, optional extra, stop. */
static void anthropic_block(events *es, const entry *e, size_t idx, const char *start_json,
                            const char *delta_type, const char *delta_field, const char *s,
                            const char *signature) {
    sb d = {0};
    sb_printf(&d, "{\"type\":\"content_block_start\",\"index\":%zu,\"content_block\":%s}", idx,
              start_json);
    anthropic_event(es, "content_block_start", &d);
    size_t left = strlen(s);
    while (left) {
        size_t n = piece_len(s, left, e->chunk_size);
        sb_printf(&d, "{\"type\":\"content_block_delta\",\"index\":%zu,\"delta\":{\"type\":\"%s\","
                      "\"%s\":", idx, delta_type, delta_field);
        sb_json(&d, s, n);
        sb_puts(&d, "}}");
        anthropic_event(es, "content_block_delta", &d);
        if (es->first_delta == 0)
            es->first_delta = es->n - 1;
        s += n;
        left -= n;
    }
    if (signature) { /* "just before the content_block_stop event" (extended-thinking, streaming) */
        sb_printf(&d, "{\"type\":\"content_block_delta\",\"index\":%zu,\"delta\":{\"type\":"
                      "\"signature_delta\",\"signature\":", idx);
        sb_jsonz(&d, signature);
        sb_puts(&d, "}}");
        anthropic_event(es, "content_block_delta", &d);
    }
    sb_printf(&d, "{\"type\":\"content_block_stop\",\"index\":%zu}", idx);
    anthropic_event(es, "content_block_stop", &d);
}

/* Anthropic's usage members after input_tokens: the cache's (prompt-caching,
 * "Tracking cache performance"; anthropic-sdk-python types/usage.py and
 * cache_creation.py).  message_delta repeats them: its usage is cumulative
 * (types/message_delta_usage.py). */
static void anthropic_cache_usage(sb *d, const vreply *v) {
    if (!v->account)
        return;
    sb_printf(d, ",\"cache_creation_input_tokens\":%ld,\"cache_read_input_tokens\":%ld,"
                 "\"cache_creation\":{\"ephemeral_5m_input_tokens\":%ld,"
                 "\"ephemeral_1h_input_tokens\":%ld}",
              v->write_5m + v->write_1h, v->cache_read, v->write_5m, v->write_1h);
}

static void anthropic_events(events *es, const entry *e, long index, const char *model,
                             const vreply *v) {
    sb d = {0};
    long input = v->account ? v->input : e->input_tokens;
    sb_printf(&d, "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_mock_%ld\",\"type\":"
                  "\"message\",\"role\":\"assistant\",\"model\":", index);
    sb_jsonz(&d, model);
    sb_printf(&d, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":"
                  "{\"input_tokens\":%ld", input);
    anthropic_cache_usage(&d, v);
    sb_puts(&d, ",\"output_tokens\":1}}}");
    anthropic_event(es, "message_start", &d);
    sb_puts(&d, "{\"type\":\"ping\"}");
    anthropic_event(es, "ping", &d);
    es->first_delta = 0;
    size_t idx = 0;
    if (v->kind == V_CLAUDE && v->thinking) {
        /* thinking first, signed for the request's prefix (see vendor_rules) */
        char *dflt = e->reasoning ? NULL : default_reasoning(index);
        const char *text = e->reasoning ? e->reasoning : dflt;
        char *sig = claude_signature(v, text);
        if (v->redact) {
            sb start = {0};
            sb_puts(&start, "{\"type\":\"redacted_thinking\",\"data\":");
            sb_jsonz(&start, sig);
            sb_puts(&start, "}");
            anthropic_block(es, e, idx++, start.p, "", "", "", NULL);
            free(start.p);
        } else {
            anthropic_block(es, e, idx++, "{\"type\":\"thinking\",\"thinking\":\"\"}",
                            "thinking_delta", "thinking", text, sig);
        }
        free(sig);
        free(dflt);
    } else if (e->reasoning && *e->reasoning) {
        anthropic_block(es, e, idx++, "{\"type\":\"thinking\",\"thinking\":\"\"}", "thinking_delta",
                        "thinking", e->reasoning, "mock-signature");
    }
    if (e->text && *e->text)
        anthropic_block(es, e, idx++, "{\"type\":\"text\",\"text\":\"\"}", "text_delta", "text",
                        e->text, NULL);
    for (size_t i = 0; i < e->ncalls; i++) {
        sb start = {0};
        sb_puts(&start, "{\"type\":\"tool_use\",\"id\":");
        sb_jsonz(&start, e->calls[i].id);
        sb_puts(&start, ",\"name\":");
        sb_jsonz(&start, e->calls[i].name);
        sb_puts(&start, ",\"input\":{}}");
        anthropic_block(es, e, idx++, start.p, "input_json_delta", "partial_json",
                        e->calls[i].arguments, NULL);
        free(start.p);
    }
    es->end_start = es->n;
    const char *finish = e->finish ? e->finish : e->ncalls ? "tool_calls" : "stop";
    const char *reason = strcmp(finish, "tool_calls") == 0 ? "tool_use"
                         : strcmp(finish, "length") == 0   ? "max_tokens"
                                                           : "end_turn";
    sb_printf(&d, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\","
                  "\"stop_sequence\":null},\"usage\":{", reason);
    if (v->account) {
        sb_printf(&d, "\"input_tokens\":%ld", input);
        anthropic_cache_usage(&d, v);
        sb_puts(&d, ",");
    }
    sb_printf(&d, "\"output_tokens\":%ld}}", e->output_tokens);
    anthropic_event(es, "message_delta", &d);
    sb_puts(&d, "{\"type\":\"message_stop\"}");
    anthropic_event(es, "message_stop", &d);
}

/* Send events [from, to) as chunks with the entry's delay.  -1 on failure. */
static int send_events(conn *c, const entry *e, char *const *ev, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) {
        if (i > 0 && !nap(c->m, e->delay_ms))
            return -1;
        if (send_chunk(c, ev[i], strlen(ev[i])))
            return -1;
    }
    return 0;
}

/* Serve a streaming 200.  Returns 0 to keep the connection, -1 to close it. */
static int serve_stream(conn *c, api_kind api, const entry *e, const request *rq,
                        const vreply *v) {
    char *model = request_model(rq->body);
    events es = {0};
    if (api == API_OPENAI) {
        openai_events(&es, e, rq->index, model, v);
    } else if (api == API_RESPONSES) {
        /* a reasoning reply's calls are issued with its reasoning item */
        char rs[48], *dflt = v->thinking && !e->reasoning ? default_reasoning(rq->index) : NULL;
        snprintf(rs, sizeof rs, "rs_mock_%ld", rq->index);
        char *enc = v->encrypt ? responses_enc(v->model, rs, dflt ? dflt : e->reasoning) : NULL;
        mock_llm *m = c->m;
        pthread_mutex_lock(&m->mu);
        /* a reply without calls issues its reasoning item too (call id ""):
         * a later turn sends it back */
        for (size_t i = 0; v->thinking && i < (e->ncalls ? e->ncalls : 1); i++) {
            if (m->nissued == m->capissued) {
                m->capissued = m->capissued ? m->capissued * 2 : 16;
                m->issued = xrealloc(m->issued, m->capissued * sizeof *m->issued);
            }
            m->issued[m->nissued++] =
                (issued){xstrdup(e->ncalls ? e->calls[i].id : ""), xstrdup(rs), xstrdup(enc)};
        }
        pthread_mutex_unlock(&m->mu);
        responses_events(&es, e, rq->index, model, v, enc);
        free(enc);
        free(dflt);
    } else {
        anthropic_events(&es, e, rq->index, model, v);
    }
    free(model);

    sb h = {0};
    sb_printf(&h, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                  "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n%s: req_mock_%ld\r\n",
              request_id_header(api), rq->index);
    rate_limit_headers(&h, api, rq->index, false);
    sb_puts(&h, "\r\n");
    int rc = send_all(c, h.p, h.len);
    free(h.p);
    const char *f = e->fault;
    if (rc == 0 && (strcmp(f, "reset") == 0 || strcmp(f, "stall") == 0)) {
        rc = send_events(c, e, es.ev, 0, 1);
        if (rc == 0 && strcmp(f, "reset") == 0) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        } else if (rc == 0) {
            /* stall: wait for the client to give up (EOF) or the server to stop */
            char sink[4096];
            while (wait_readable(c->m, c->fd, -1) == 1 && recv(c->fd, sink, sizeof sink, 0) > 0) {
            }
        }
        rc = -1; /* both end the connection */
    } else if (rc == 0 && strcmp(f, "keepalive") == 0) {
        /* an SSE comment every chunk_delay_ms (default 50) and nothing else,
         * until the client goes away, the server stops or KEEPALIVE_MAX_MS */
        rc = send_events(c, e, es.ev, 0, 1);
        long every = e->delay_ms > 0 ? e->delay_ms : 50;
        for (long t = 0; rc == 0 && t < KEEPALIVE_MAX_MS && nap(c->m, every); t += every)
            rc = send_chunk(c, ": keepalive\n\n", 13);
        rc = -1; /* ends the connection without the stream's end */
    } else if (rc == 0 && strcmp(f, "malformed") == 0) {
        size_t cut = es.first_delta + 1;
        rc = send_events(c, e, es.ev, 0, cut);
        sb bad = {0};
        if (api == API_OPENAI)
            sb_puts(&bad, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"");
        else if (api == API_RESPONSES)
            sb_puts(&bad, "event: response.output_text.delta\ndata: {\"type\":"
                          "\"response.output_text.delta\",\"output_index\":0,\"delta\":\"x\"");
        else
            sb_puts(&bad, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                          "\"index\":0,\"delta\":{");
        if (e->echo_key) { /* the invalid line quotes the key (the decoder shows it) */
            char *key = request_key(rq->head, api == API_ANTHROPIC);
            sb_printf(&bad, ",\"key\":\"%s\"", key);
            free(key);
        }
        sb_puts(&bad, "\n\n");
        if (rc == 0)
            rc = send_chunk(c, bad.p, bad.len);
        free(bad.p);
        if (rc == 0)
            rc = send_events(c, e, es.ev, cut, es.n);
    } else if (rc == 0 && strcmp(f, "truncated") == 0) {
        rc = send_events(c, e, es.ev, 0, es.end_start);
    } else if (rc == 0 && strcmp(f, "inband_error") == 0) {
        rc = send_events(c, e, es.ev, 0, 1);
        sb msg = {0}, err = {0};
        sb_puts(&msg, "Overloaded");
        if (e->echo_key) {
            char *key = request_key(rq->head, api == API_ANTHROPIC);
            sb_printf(&msg, " (request key %s)", key);
            free(key);
        }
        if (api == API_OPENAI) {
            sb_puts(&err, "data: {\"error\":{\"message\":");
            sb_jsonz(&err, msg.p);
            sb_puts(&err, ",\"type\":\"overloaded_error\"}}\n\n");
        } else if (api == API_RESPONSES) { /* the `error` event */
            sb_puts(&err, "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\","
                          "\"message\":");
            sb_jsonz(&err, msg.p);
            sb_puts(&err, ",\"param\":null,\"sequence_number\":2}\n\n");
        } else {
            sb_puts(&err, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                          "\"overloaded_error\",\"message\":");
            sb_jsonz(&err, msg.p);
            sb_puts(&err, "}}\n\n");
        }
        if (rc == 0)
            rc = send_chunk(c, err.p, err.len);
        free(msg.p);
        free(err.p);
    } else if (rc == 0) {
        rc = send_events(c, e, es.ev, 0, es.n);
    }
    if (rc == 0)
        rc = send_all(c, "0\r\n\r\n", 5);
    ev_free(&es);
    return rc;
}

/*
 * OpenAI's parameter rules for reasoning models on Chat Completions, with
 * the 400s the API answers (a request that breaks one gets that 400):
 * - max_tokens: "deprecated in favor of max_completion_tokens, and is not
 *   compatible with o-series models" (Chat Completions reference,
 *   platform.openai.com/docs/api-reference/chat/create); the gpt-5 family
 *   refuses it the same way.
 * - temperature: reasoning models take only the default (1) (OpenAI
 *   reasoning guide, "Limitations"); gpt-5.1 and later gpt-5.N default
 *   reasoning_effort to "none" and take temperature while it is "none"
 *   (reasoning_effort reference).
 * Reasoning models are told by the request's model name: o1, o3, o4 and
 * gpt-5 (not gpt-5-chat, a chat model), after any "vendor/" prefix.  NULL
 * when the request keeps the rules (or is not JSON), else a new error body.
 */
static char *reasoning_param_error(const char *body) {
    json_t *root = json_loads(body, 0, NULL);
    const char *model = json_string_value(json_object_get(root, "model"));
    const char *slash = model ? strrchr(model, '/') : NULL;
    model = slash ? slash + 1 : model;
    char *err = NULL;
    bool reasoning = model && (!strncmp(model, "o1", 2) || !strncmp(model, "o3", 2) ||
                               !strncmp(model, "o4", 2) ||
                               (!strncmp(model, "gpt-5", 5) && strncmp(model, "gpt-5-chat", 10)));
    if (reasoning && json_object_get(root, "max_tokens")) {
        err = error_body(API_OPENAI, "invalid_request_error", "unsupported_parameter",
                         "Unsupported parameter: 'max_tokens' is not supported with this model. "
                         "Use 'max_completion_tokens' instead.");
    } else if (reasoning) {
        const json_t *t = json_object_get(root, "temperature");
        const char *effort = json_string_value(json_object_get(root, "reasoning_effort"));
        bool effort_none_default = !strncmp(model, "gpt-5.", 6); /* gpt-5.1 and later */
        bool effort_none = effort ? !strcmp(effort, "none") : effort_none_default;
        if (json_is_number(t) && json_number_value(t) != 1.0 && !effort_none) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "Unsupported value: 'temperature' does not support %g with this model. "
                     "Only the default (1) value is supported.",
                     json_number_value(t));
            err = error_body(API_OPENAI, "invalid_request_error", "unsupported_value", msg);
        }
    }
    json_decref(root);
    return err;
}

/*
 * Record what request `rq` got (mock_llm_request_outcome, the stats file):
 * the status, the error message of a rule's 400, the usage a stream
 * reported.  A 400 with a message counts as a rejection.
 */
static void note_outcome(mock_llm *m, const request *rq, long status, const char *error,
                         const vreply *v, const entry *e) {
    sb o = {0};
    char *model = request_model(rq->body);
    sb_printf(&o, "{\"request\":%ld,\"path\":", rq->index);
    sb_jsonz(&o, rq->path);
    sb_puts(&o, ",\"model\":");
    sb_jsonz(&o, model);
    free(model);
    sb_printf(&o, ",\"status\":%ld", status);
    if (error) {
        sb_puts(&o, ",\"error\":");
        sb_jsonz(&o, error);
    }
    if (status == 200 && e) {
        /* input_tokens: uncached input (OpenAI's prompt_tokens less cached_tokens) */
        long input = !v || !v->account    ? e->input_tokens
                     : v->kind == V_OPENAI ? v->input - v->cache_read
                                           : v->input;
        sb_printf(&o, ",\"usage\":{\"input_tokens\":%ld,\"output_tokens\":%ld", input,
                  e->output_tokens);
        if (v && v->account && v->kind == V_OPENAI)
            sb_printf(&o, ",\"cache_read_tokens\":%ld", v->cache_read);
        else if (v && v->account)
            sb_printf(&o, ",\"cache_read_tokens\":%ld,\"cache_write_5m_tokens\":%ld,"
                          "\"cache_write_1h_tokens\":%ld",
                      v->cache_read, v->write_5m, v->write_1h);
        sb_puts(&o, "}");
        if (v && v->thinking)
            sb_puts(&o, v->redact ? ",\"reply\":\"redacted_thinking\"" : ",\"reply\":\"thinking\"");
        if (v && v->dropped)
            sb_printf(&o, ",\"dropped_thinking\":%ld", v->dropped);
    }
    sb_puts(&o, "}");
    pthread_mutex_lock(&m->mu);
    if (status == 400 && error)
        m->rejections++;
    if ((size_t)rq->index < m->nrecs) {
        free(m->recs[rq->index].outcome);
        m->recs[rq->index].outcome = xstrdup(o.p);
    }
    if (m->stats) {
        fprintf(m->stats, "%s\n", o.p);
        fflush(m->stats);
    }
    pthread_mutex_unlock(&m->mu);
    free(o.p);
}

/* Answer a rule's 400: `body` is the error body (owned, freed), `msg` its message. */
static int reject(conn *c, api_kind api, const request *rq, char *body, const char *msg) {
    note_outcome(c->m, rq, 400, msg, NULL, NULL);
    int rc = send_json_response(c, api, rq->index, 400, body, NULL);
    free(body);
    return rc;
}

/* The message of an error body (either shape), malloc'd; the body itself otherwise. */
static char *body_message(const char *body) {
    json_t *root = json_loads(body, 0, NULL);
    const json_t *err = json_object_get(json_is_array(root) ? json_array_get(root, 0) : root, "error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    char *out = xstrdup(msg ? msg : body);
    json_decref(root);
    return out;
}

/* Answer one request.  Returns 0 to keep the connection, -1 to close it. */
/*
 * POST /v1/responses/compact (https://platform.openai.com/docs/api-reference/
 * responses/compact): {model, input, instructions?, previous_response_id?,
 * prompt_cache_key?}, answered (not streamed) with {id, object:
 * "response.compaction", created_at, output: "all user messages, followed by
 * a single compaction item" with opaque encrypted_content, usage}.  The
 * input obeys the rules of /v1/responses (responses_check); an unknown
 * member is refused as OpenAI refuses one.  Outside the script's sequence;
 * the script's "compact_fail" makes the first N answer 500.
 */
static int serve_compact(conn *c, const request *rq) {
    mock_llm *m = c->m;
    json_t *root = json_loads(rq->body, 0, NULL);
    /* openai-python types/responses/response_compact_params.py */
    static const char *const known[] = {"model", "input", "instructions", "previous_response_id",
                                        "prompt_cache_key", "prompt_cache_options",
                                        "prompt_cache_retention", "service_tier", NULL};
    sb e = {0};
    const char *key;
    json_t *val;
    if (!json_is_object(root))
        sb_puts(&e, "We could not parse the JSON body of your request.");
    json_object_foreach(root, key, val) {
        if (!e.p && !in_list(key, known))
            sb_printf(&e, "Unknown parameter: '%s'.", key);
    }
    pthread_mutex_lock(&m->mu);
    char *broken = e.p ? e.p : responses_check(m, root, "");
    bool fail = !broken && m->compact_fail > 0;
    if (fail)
        m->compact_fail--;
    pthread_mutex_unlock(&m->mu);
    if (broken) {
        json_decref(root);
        char *msg = xstrdup(broken);
        int rc = reject(c, API_RESPONSES, rq,
                        error_body(API_RESPONSES, "invalid_request_error", NULL, broken), msg);
        free(msg);
        free(broken);
        return rc;
    }
    if (fail) {
        json_decref(root);
        note_outcome(m, rq, 500, NULL, NULL, NULL);
        char *body = error_body(API_RESPONSES, "server_error", NULL,
                                "The server had an error while processing your request.");
        int rc = send_json_response(c, API_RESPONSES, rq->index, 500, body, NULL);
        free(body);
        return rc;
    }
    json_t *output = json_array();
    size_t i;
    const json_t *it;
    json_array_foreach(json_object_get(root, "input"), i, it) {
        const char *type = json_string_value(json_object_get(it, "type"));
        const char *role = json_string_value(json_object_get(it, "role"));
        if ((!type || strcmp(type, "message") == 0) && role && strcmp(role, "user") == 0)
            json_array_append_new(output, json_deep_copy(it));
    }
    size_t in_chars = strlen(rq->body);
    /* usage: as for /v1/responses, the prefix the input shares with a
     * recent prompt of the same prompt_cache_key is read from the cache (an
     * assumption: OpenAI documents no caching rule of its own for the
     * endpoint; bench/README.md, bench_strategies, says so) */
    const char *mname = json_string_value(json_object_get(root, "model"));
    const char *slash = mname ? strrchr(mname, '/') : NULL;
    vreply v;
    memset(&v, 0, sizeof v);
    v.model = model_hash(slash ? slash + 1 : mname ? mname : "");
    pthread_mutex_lock(&m->mu);
    openai_cache(m, root, "input", &v);
    m->cache_read_tokens += v.cache_read;
    long n = m->compactions++;
    m->compact_enc = xrealloc(m->compact_enc, (size_t)m->compactions * sizeof *m->compact_enc);
    m->compact_text = xrealloc(m->compact_text, (size_t)m->compactions * sizeof *m->compact_text);
    m->compact_text[n] = xstrdup("");
    char enc[64], id[32];
    snprintf(enc, sizeof enc, "encc%016llx",
             (unsigned long long)fnv(fnvz(FNV0, "compaction"), rq->body, in_chars));
    snprintf(id, sizeof id, "cmp_item_%ld", n);
    m->compact_enc[n] = xstrdup(enc);
    pthread_mutex_unlock(&m->mu);
    json_array_append_new(output, json_pack("{s:s, s:s, s:s}", "type", "compaction", "id", id,
                                            "encrypted_content", enc));
    long input_tokens = v.input;
    json_t *reply = json_pack("{s:s, s:s, s:i, s:o, s:{s:I, s:{s:I}, s:I, s:I}}", "id", id,
                              "object", "response.compaction", "created_at", 1767225600,
                              "output", output, "usage", "input_tokens", (json_int_t)input_tokens,
                              "input_tokens_details", "cached_tokens", (json_int_t)v.cache_read,
                              "output_tokens", (json_int_t)200, "total_tokens",
                              (json_int_t)(input_tokens + 200));
    json_decref(root);
    char *body = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    note_outcome(m, rq, 200, NULL, NULL, NULL);
    int rc = send_json_response(c, API_RESPONSES, rq->index, 200, body, NULL);
    free(body);
    return rc;
}

/*
 * Anthropic's server compaction: a /v1/messages request whose
 * context_management edits hold compact_20260112
 * (platform.claude.com/docs/en/build-with-claude/compaction):
 *   - the beta header compact-2026-01-12 is required ("Include the beta
 *     header compact-2026-01-12 in your API requests");
 *   - only the supported models take it ("Supported models": Claude Mythos
 *     Preview, Opus 4.7, Opus 4.6, Sonnet 4.6);
 *   - trigger.value is at least 50,000 input tokens, 150,000 by default
 *     ("Parameters");
 *   - when the input reaches the trigger the reply is one compaction block
 *     (content_block_start {type:"compaction"}, compaction_delta with the
 *     content and encrypted_content), stop_reason "compaction" (the
 *     pause_after_compaction flow; without it the API would go on with the
 *     answer, which the mock does not model); below it the request is
 *     answered as usual.
 * Returns 1 when the request is not a compaction (or is below its trigger),
 * else as serve_request.  The script's "compact_fail" makes the first N
 * compactions answer 500.  Outside the script's sequence.
 */
static int serve_anthropic_compact(conn *c, const request *rq) {
    mock_llm *m = c->m;
    json_t *root = json_loads(rq->body, 0, NULL);
    const json_t *edit = NULL, *e;
    size_t i;
    json_array_foreach(json_object_get(json_object_get(root, "context_management"), "edits"), i,
                       e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        if (type && strcmp(type, "compact_20260112") == 0)
            edit = e;
    }
    if (!edit) {
        json_decref(root);
        return 1;
    }
    const char *model = json_string_value(json_object_get(root, "model"));
    char *beta = head_value(rq->head, "anthropic-beta");
    const json_t *trig = json_object_get(json_object_get(edit, "trigger"), "value");
    long trigger = json_is_integer(trig) ? (long)json_integer_value(trig) : 150000;
    sb err = {0};
    if (!beta || !strstr(beta, "compact-2026-01-12"))
        sb_puts(&err, "context_management.edits.0: compact_20260112 requires the beta header "
                      "compact-2026-01-12");
    else if (!model || !(starts(model, "claude-mythos-preview") || starts(model, "claude-opus-4-7") ||
                         starts(model, "claude-opus-4-6") || starts(model, "claude-sonnet-4-6")))
        sb_printf(&err, "context_management.edits.0: compact_20260112 is not supported on model "
                        "%s", model ? model : "(none)");
    else if (trig && (!json_is_integer(trig) || trigger < 50000))
        sb_puts(&err, "context_management.edits.0.trigger.value: Input should be greater than or "
                      "equal to 50000");
    free(beta);
    if (err.p) {
        json_decref(root);
        char *msg = xstrdup(err.p);
        int rc = reject(c, API_ANTHROPIC, rq,
                        error_body(API_ANTHROPIC, "invalid_request_error", NULL, err.p), msg);
        free(msg);
        free(err.p);
        return rc;
    }
    vreply v;
    char *broken = vendor_rules(m, API_ANTHROPIC, rq->body, &v);
    if (broken) {
        json_decref(root);
        char *msg = body_message(broken);
        int rc = reject(c, API_ANTHROPIC, rq, broken, msg);
        free(msg);
        return rc;
    }
    long input = v.input + v.cache_read + v.write_5m + v.write_1h;
    if (input < trigger) {
        json_decref(root);
        return 1; /* below the trigger: an ordinary answer */
    }
    pthread_mutex_lock(&m->mu);
    bool fail = m->compact_fail > 0;
    if (fail)
        m->compact_fail--;
    pthread_mutex_unlock(&m->mu);
    if (fail) {
        json_decref(root);
        note_outcome(m, rq, 500, NULL, NULL, NULL);
        char *body = error_body(API_ANTHROPIC, "api_error", NULL, "Internal server error");
        int rc = send_json_response(c, API_ANTHROPIC, rq->index, 500, body, NULL);
        free(body);
        return rc;
    }
    size_t nmsgs = json_array_size(json_object_get(root, "messages"));
    char *model_name = xstrdup(model);
    json_decref(root);
    sb summary = {0};
    sb_printf(&summary, "Summary of the %zu messages before this point (mock compaction %ld).",
              nmsgs, m->compactions);
    char enc[64];
    snprintf(enc, sizeof enc, "encc%016llx",
             (unsigned long long)fnv(fnvz(FNV0, "anthropic-compaction"), rq->body,
                                     strlen(rq->body)));
    pthread_mutex_lock(&m->mu);
    long n = m->compactions++;
    m->compact_enc = xrealloc(m->compact_enc, (size_t)m->compactions * sizeof *m->compact_enc);
    m->compact_text = xrealloc(m->compact_text, (size_t)m->compactions * sizeof *m->compact_text);
    m->compact_enc[n] = xstrdup(enc);
    m->compact_text[n] = xstrdup(summary.p);
    pthread_mutex_unlock(&m->mu);
    sb b = {0};
    sb_printf(&b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
                  "\"msg_mock_%ld\",\"type\":\"message\",\"role\":\"assistant\",\"model\":",
              rq->index);
    sb_jsonz(&b, model_name);
    free(model_name);
    sb_printf(&b, ",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":%ld,"
                  "\"cache_read_input_tokens\":%ld,\"cache_creation_input_tokens\":%ld,"
                  "\"output_tokens\":1}}}\n\n",
              v.input, v.cache_read, v.write_5m + v.write_1h);
    sb_puts(&b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
                "\"content_block\":{\"type\":\"compaction\",\"content\":null,"
                "\"encrypted_content\":null}}\n\n");
    sb_puts(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
                "\"delta\":{\"type\":\"compaction_delta\",\"content\":");
    sb_jsonz(&b, summary.p);
    sb_puts(&b, ",\"encrypted_content\":");
    sb_jsonz(&b, enc);
    sb_puts(&b, "}}\n\n");
    sb_puts(&b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}"
                "\n\n");
    sb_printf(&b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"
                  "\"stop_reason\":\"compaction\",\"stop_sequence\":null},\"usage\":{"
                  "\"output_tokens\":%zu}}\n\n",
              summary.len / 4 + 1);
    sb_puts(&b, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    free(summary.p);
    note_outcome(m, rq, 200, NULL, &v, NULL);
    sb h = {0};
    sb_printf(&h, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %zu\r\n"
                  "%s: req_mock_%ld\r\n\r\n",
              b.len, request_id_header(API_ANTHROPIC), rq->index);
    int rc = send_all(c, h.p, h.len);
    if (rc == 0)
        rc = send_all(c, b.p, b.len);
    free(h.p);
    free(b.p);
    return rc;
}

static int serve_request(conn *c, const request *rq) {
    mock_llm *m = c->m;
    api_kind api;
    bool get = strcmp(rq->method, "GET") == 0;
    const char *info = !get ? NULL
                       : strcmp(rq->path, "/v1/models") == 0 ? m->models_body
                       : strcmp(rq->path, "/props") == 0     ? m->props_body
                                                             : NULL;
    if (info) { /* a window probe: answered without a script entry */
        if (!nap(m, m->info_delay_ms))
            return -1;
        return send_json_response(c, API_OPENAI, rq->index, 200, info, NULL);
    }
    if (strcmp(rq->path, "/v1/chat/completions") == 0)
        api = API_OPENAI;
    else if (strcmp(rq->path, "/v1/responses") == 0)
        api = API_RESPONSES;
    else if (strcmp(rq->path, "/v1/responses/compact") == 0 && strcmp(rq->method, "POST") == 0)
        return serve_compact(c, rq);
    else if (strcmp(rq->path, "/v1/messages") == 0)
        api = API_ANTHROPIC;
    else
        return send_json_response(c, API_OPENAI, rq->index, 404,
                                  "{\"error\":{\"message\":\"mock_llm: unknown path\"}}", NULL);
    if (strcmp(rq->method, "POST") != 0)
        return send_json_response(c, api, rq->index, 405,
                                  "{\"error\":{\"message\":\"mock_llm: POST only\"}}", NULL);
    if (api == API_ANTHROPIC) {
        int rc = serve_anthropic_compact(c, rq);
        if (rc != 1)
            return rc;
    }

    const entry *e = NULL;
    long k = -1;
    if (m->aside && strstr(rq->body, m->aside_match)) {
        e = m->aside; /* a summary request, say: outside the sequence */
    } else {
        pthread_mutex_lock(&m->mu);
        k = m->served++;
        pthread_mutex_unlock(&m->mu);
    }
    if (e)
        ;
    else if ((size_t)k < m->nentries)
        e = &m->entries[k];
    else if (m->loop && m->nentries)
        e = &m->entries[(size_t)k % m->nentries];
    if (!e) {
        sb msg = {0};
        sb_printf(&msg, "mock_llm: no scripted response for request %ld", k);
        char *body = error_body(api, "api_error", NULL, msg.p);
        int rc = send_json_response(c, api, rq->index, 500, body, NULL);
        free(body);
        free(msg.p);
        return rc;
    }
    if (e->expect_contains && !strstr(rq->body, e->expect_contains)) {
        pthread_mutex_lock(&m->mu);
        m->expect_failures++;
        pthread_mutex_unlock(&m->mu);
        sb msg = {0};
        sb_puts(&msg, "mock_llm expect failed: request body does not contain \"");
        sb_puts(&msg, e->expect_contains);
        sb_puts(&msg, "\"");
        char *body = error_body(api, "invalid_request_error", "mock_expect_failed", msg.p);
        int rc = send_json_response(c, api, rq->index, 400, body, NULL);
        free(body);
        free(msg.p);
        return rc;
    }

    char *refused = api == API_OPENAI ? reasoning_param_error(rq->body) : NULL;
    if (refused) {
        char *msg = body_message(refused);
        int rc = reject(c, api, rq, refused, msg);
        free(msg);
        return rc;
    }

    char *pairing = api == API_RESPONSES ? NULL : pairing_error(api, rq->body);
    if (pairing) {
        int rc = reject(c, api, rq, error_body(api, "invalid_request_error", NULL, pairing), pairing);
        free(pairing);
        return rc;
    }

    vreply v;
    char *broken = vendor_rules(m, api, rq->body, &v);
    if (broken) {
        char *msg = body_message(broken);
        int rc = reject(c, api, rq, broken, msg);
        free(msg);
        return rc;
    }

    const char *f = e->fault;
    long status = 0;
    char *body = NULL;
    bool anth = api == API_ANTHROPIC;
    if (strcmp(f, "rate_limit") == 0) {
        status = 429;
        body = anth ? error_body(api, "rate_limit_error", NULL,
                                 "Number of request tokens has exceeded your per-minute rate limit")
                    : error_body(api, "requests", "rate_limit_exceeded",
                                 "Rate limit reached for requests");
    } else if (strcmp(f, "server_error") == 0) {
        status = 500;
        body = anth ? error_body(api, "api_error", NULL, "Internal server error")
                    : error_body(api, "server_error", NULL,
                                 "The server had an error while processing your request.");
    } else if (strcmp(f, "overloaded") == 0) {
        status = anth ? 529 : 503;
        body = anth ? error_body(api, "overloaded_error", NULL, "Overloaded")
                    : error_body(api, "server_error", NULL,
                                 "The engine is currently overloaded, please try again later");
    } else if (strcmp(f, "auth") == 0) {
        status = 401;
        sb msg = {0};
        char *key = e->echo_key ? request_key(rq->head, anth) : NULL;
        if (anth) {
            sb_puts(&msg, "invalid x-api-key");
            if (key)
                sb_printf(&msg, ": %s", key);
        } else if (key) { /* what api.openai.com answers */
            sb_printf(&msg, "Incorrect API key provided: %s. You can find your API key at "
                            "https://platform.openai.com/account/api-keys.", key);
        } else {
            sb_puts(&msg, "Incorrect API key provided.");
        }
        body = anth ? error_body(api, "authentication_error", NULL, msg.p)
                    : error_body(api, "invalid_request_error", "invalid_api_key", msg.p);
        free(key);
        free(msg.p);
    } else if (strcmp(f, "overflow") == 0) {
        status = 400;
        body = anth ? error_body(api, "invalid_request_error", NULL,
                                 "prompt is too long: 210000 tokens > 200000 maximum")
                    : error_body(api, "invalid_request_error", "context_length_exceeded",
                                 "This model's maximum context length is 128000 tokens. However, "
                                 "your messages resulted in 130000 tokens. Please reduce the "
                                 "length of the messages.");
    } else if (strcmp(f, "http_error") == 0) {
        status = e->status;
        body = xstrdup(e->body ? e->body : "");
    } else if (strcmp(f, "raw") == 0) {
        return send_raw_response(c, api, rq->index, e);
    }
    if (status) {
        note_outcome(m, rq, status, NULL, NULL, NULL);
        int rc = send_json_response(c, api, rq->index, status, body, e);
        free(body);
        return rc;
    }
    note_outcome(m, rq, 200, NULL, &v, e);
    return serve_stream(c, api, e, rq, &v);
}

static void *conn_main(void *arg) {
    conn *c = arg;
    mock_llm *m = c->m;
    for (;;) {
        request rq;
        int r = read_request(c, &rq);
        if (r == 0) {
            request_free(&rq);
            break;
        }
        if (r < 0) {
            const char *bad = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            send_all(c, bad, strlen(bad));
            request_free(&rq);
            break;
        }
        rq.index = record_request(m, &rq);
        int rc = serve_request(c, &rq);
        bool close_it = rq.close;
        request_free(&rq);
        response_done(m);
        if (rc || close_it)
            break;
    }
    close(c->fd); /* after SO_LINGER {1, 0} (fault "reset") this sends a RST */
    c->fd = -1;
    return NULL;
}

static void *accept_main(void *arg) {
    mock_llm *m = arg;
    for (;;) {
        if (wait_readable(m, m->listen_fd, -1) != 1)
            break;
        int fd = accept(m->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1; /* small SSE writes must not wait for Nagle's delayed ACK */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *c = xrealloc(NULL, sizeof *c);
        memset(c, 0, sizeof *c);
        c->m = m;
        c->fd = fd;
        pthread_mutex_lock(&m->mu);
        if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
            pthread_mutex_unlock(&m->mu);
            close(fd);
            free(c);
            continue;
        }
        m->connections++;
        c->next = m->conns;
        m->conns = c;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
    }
    return NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

static void free_all(mock_llm *m) {
    free(m->models_body);
    free(m->props_body);
    for (size_t i = 0; i < m->nentries; i++)
        entry_free(&m->entries[i]);
    free(m->entries);
    if (m->aside)
        entry_free(m->aside);
    free(m->aside);
    free(m->aside_match);
    for (size_t i = 0; i < m->ncache; i++) {
        free(m->cache[i].bucket);
        free(m->cache[i].text);
    }
    free(m->cache);
    for (size_t i = 0; i < m->nissued; i++) {
        free(m->issued[i].call_id);
        free(m->issued[i].rs_id);
        free(m->issued[i].enc);
    }
    free(m->issued);
    for (long i = 0; i < m->compactions; i++) {
        free(m->compact_enc[i]);
        free(m->compact_text[i]);
    }
    free(m->compact_enc);
    free(m->compact_text);
    if (m->stats)
        fclose(m->stats);
    for (size_t i = 0; i < m->nrecs; i++) {
        free(m->recs[i].path);
        free(m->recs[i].head);
        free(m->recs[i].body);
        free(m->recs[i].outcome);
    }
    free(m->recs);
    if (m->listen_fd >= 0)
        close(m->listen_fd);
    if (m->wake[0] >= 0)
        close(m->wake[0]);
    if (m->wake[1] >= 0)
        close(m->wake[1]);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

int mock_llm_start(const char *script_json, mock_llm **out) {
    if (!out)
        return -1;
    *out = NULL;
    mock_llm *m = xrealloc(NULL, sizeof *m);
    memset(m, 0, sizeof *m);
    m->listen_fd = m->wake[0] = m->wake[1] = -1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    if (!script_json || parse_script(m, script_json)) {
        if (!script_json)
            fputs("mock_llm: no script\n", stderr);
        free_all(m);
        return -1;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof addr;
    m->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m->listen_fd < 0 || pipe2(m->wake, O_CLOEXEC) ||
        bind(m->listen_fd, (struct sockaddr *)&addr, sizeof addr) ||
        listen(m->listen_fd, 64) ||
        getsockname(m->listen_fd, (struct sockaddr *)&addr, &alen)) {
        fprintf(stderr, "mock_llm: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        free_all(m);
        return -1;
    }
    m->port = ntohs(addr.sin_port);
    if (pthread_create(&m->accept_thread, NULL, accept_main, m) != 0) {
        fputs("mock_llm: cannot start the accept thread\n", stderr);
        free_all(m);
        return -1;
    }
    *out = m;
    return 0;
}

int mock_llm_start_file(const char *path, mock_llm **out) {
    if (out)
        *out = NULL;
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        fprintf(stderr, "mock_llm: cannot open script %s: %s\n", path ? path : "(null)",
                strerror(errno));
        return -1;
    }
    sb text = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sb_add(&text, buf, n);
    fclose(f);
    int rc = mock_llm_start(text.p ? text.p : "", out);
    free(text.p);
    return rc;
}

int mock_llm_port(mock_llm *m) { return m ? m->port : -1; }

char *mock_llm_base_url(mock_llm *m) {
    if (!m)
        return NULL;
    char *url = malloc(40);
    if (url)
        snprintf(url, 40, "http://127.0.0.1:%d", m->port);
    return url;
}

void mock_llm_stop(mock_llm *m) {
    if (!m)
        return;
    char one = 1;
    while (write(m->wake[1], &one, 1) < 0 && errno == EINTR) {
    }
    pthread_join(m->accept_thread, NULL);
    /* no new connections now; wake and join the rest */
    for (conn *c = m->conns, *next; c; c = next) {
        next = c->next;
        pthread_join(c->thread, NULL); /* the thread closed its socket */
        free(c->in);
        free(c);
    }
    free_all(m);
}

#define LOCKED_GET(m, field)                \
    do {                                    \
        if (!(m))                           \
            return -1;                      \
        mock_llm *mm_ = (m);                \
        pthread_mutex_lock(&mm_->mu);       \
        long v_ = (long)mm_->field;         \
        pthread_mutex_unlock(&mm_->mu);     \
        return v_;                          \
    } while (0)

long mock_llm_connections(mock_llm *m) { LOCKED_GET(m, connections); }
long mock_llm_requests(mock_llm *m) { LOCKED_GET(m, nrecs); }
long mock_llm_responses(mock_llm *m) { LOCKED_GET(m, responses); }
long mock_llm_expect_failures(mock_llm *m) { LOCKED_GET(m, expect_failures); }
long mock_llm_rejections(mock_llm *m) { LOCKED_GET(m, rejections); }
long mock_llm_cache_read_tokens(mock_llm *m) { LOCKED_GET(m, cache_read_tokens); }
long mock_llm_cache_write_tokens(mock_llm *m) { LOCKED_GET(m, cache_write_tokens); }

int mock_llm_stats_file(mock_llm *m, const char *path) {
    if (!m || !path)
        return -1;
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "mock_llm: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&m->mu);
    if (m->stats)
        fclose(m->stats);
    m->stats = f;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int mock_llm_wait_responses(mock_llm *m, long n, long timeout_ms) {
    if (!m)
        return -1;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m->mu);
    int rc = 0;
    while (m->responses < n && rc == 0)
        rc = pthread_cond_timedwait(&m->cv, &m->mu, &dl);
    bool ok = m->responses >= n;
    pthread_mutex_unlock(&m->mu);
    return ok ? 0 : -1;
}

/* Copy a field of record i (the getter picks it) under the lock. */
static char *record_copy(mock_llm *m, long i, int which, const char *header) {
    if (!m || i < 0)
        return NULL;
    mock_llm *mm = m;
    char *out = NULL;
    pthread_mutex_lock(&mm->mu);
    if ((size_t)i < mm->nrecs) {
        const record *r = &mm->recs[i];
        if (which == 0)
            out = xstrdup(r->body);
        else if (which == 1)
            out = xstrdup(r->path);
        else if (which == 3)
            out = xstrdup(r->outcome);
        else
            out = head_value(r->head, header);
    }
    pthread_mutex_unlock(&mm->mu);
    return out;
}

char *mock_llm_request_body(mock_llm *m, long i) { return record_copy(m, i, 0, NULL); }
char *mock_llm_request_path(mock_llm *m, long i) { return record_copy(m, i, 1, NULL); }
char *mock_llm_request_outcome(mock_llm *m, long i) { return record_copy(m, i, 3, NULL); }
char *mock_llm_request_header(mock_llm *m, long i, const char *name) {
    return name ? record_copy(m, i, 2, name) : NULL;
}

int mock_llm_fork(const char *script_json, pid_t *child, int *keep_fd) {
    int up[2], down[2];
    if (pipe(up) != 0)
        return -1;
    if (pipe(down) != 0) {
        close(up[0]);
        close(up[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(up[0]);
        close(up[1]);
        close(down[0]);
        close(down[1]);
        return -1;
    }
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        mock_llm *mock;
        int port = mock_llm_start(script_json, &mock) == 0 ? mock_llm_port(mock) : -1;
        if (write(up[1], &port, sizeof port) != (ssize_t)sizeof port)
            _exit(2);
        char c;
        while (read(down[0], &c, 1) > 0) {
        }
        if (port > 0)
            mock_llm_stop(mock);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    int port = -1;
    if (read(up[0], &port, sizeof port) != (ssize_t)sizeof port)
        port = -1;
    close(up[0]);
    *child = pid;
    *keep_fd = down[1];
    return port;
}

json_t *mock_llm_openai_deployment(const char *plugin, int port, const char *session_dir) {
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d/v1", port);
    return json_pack("{s:{s:s, s:s, s:i}, s:{s:s, s:s}, s:[],"
                     " s:[{s:s, s:s, s:{s:s, s:s, s:{s:{s:i, s:i}}}}]}",
                     "agent", "provider", "openai", "model", "bench", "max_tokens", 256,
                     "session", "dir", session_dir, "fsync", "none", "plugin_path", "plugins",
                     "id", "openai", "plugin", plugin, "config", "base_url",
                     base, "api_key", "bench-key", "models", "bench", "context_window",
                     10000000, "max_output", 4096);
}
