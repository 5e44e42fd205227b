/*
 * tests/support/mcp_fake_main.c - weir-mcp-fake, a small MCP server for the
 * tools-mcp fault tests (C and jansson only), and a stdio relay that
 * records what a real server is sent.
 *
 *   weir-mcp-fake [--log FILE] [--no-init] [--exit-at-start N] [--stderr TEXT]
 *                 [--version V] [--http PORT_FILE] [--tag X] [--nul-tool]
 *                 [--daemon PID_FILE]
 *   weir-mcp-fake --tee FILE -- COMMAND ARGS...
 *
 * stdio (the default): newline-delimited JSON-RPC on stdin/stdout.  --http
 * serves Streamable HTTP on 127.0.0.1 (an ephemeral port written to
 * PORT_FILE) instead: POST answers JSON, or SSE for the tools "progress"
 * and "ask"; sessions are "sess-<n>", a request with an unknown session id
 * gets 404 (the tool "expire" ends the current one).  It exits on its own
 * after 120 s without a request.
 *
 * --log FILE appends every message received, one per line.  --no-init never
 * answers initialize.  --exit-at-start N writes --stderr's text (default
 * "fake: cannot start") to stderr and exits N at once.  --version V answers
 * initialize with protocol version V.  --tag X is ignored (tests find their
 * processes with ps by it).  --nul-tool adds a tool named "nul\u0000name"
 * to the first page of tools/list.  --daemon PID_FILE starts a daemon at
 * once: a grandchild in a session of its own (setsid: out of the server's
 * process group), stdio on /dev/null, that writes its pid to PID_FILE and
 * sleeps 60 s (it keeps the fake's environment).
 *
 * Tools (tools/list comes in two pages):
 *   echo {text}            "echo: <text>"                      (readOnlyHint)
 *   sleep {ms}             answers after ms; a notifications/cancelled for
 *                          it drops the answer (and is logged)
 *   crash                  writes "fake: crashing" to stderr and exits 3
 *   garbage                three lines that are not JSON-RPC, then "ok"
 *   big {bytes}            a text of that many 'x'
 *   storm {count}          count notifications/tools/list_changed, then "stormed"
 *   ask {method}           sends that request to the client, answers with the
 *                          client's answer as JSON text
 *   rpc_error              a JSON-RPC error -32000 "the fake refuses"
 *   mixed                  image, resource_link, embedded text and blob
 *                          resources, audio, an unknown block
 *   structured             only structuredContent
 *   fails                  isError:true with a text
 *   progress {steps}       that many notifications/progress, then "done"
 *   log                    notifications/message at debug, info, warning, error
 *   env {name}             the value of an environment variable
 *   meta                   the call's params._meta as JSON text
 *   spam {lines}           that many lines on stderr, then "spammed"
 *   logspam {count}        that many notifications/message (warning, logger
 *                          "fake", data "spam message <i>"), then "logspammed"
 *   expire                 (HTTP) ends the session after answering
 *   "bad.name", a 70-character name  (not offered by weir)
 *   added                  only after "storm": listed on the second list
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

static FILE *logf_;
static bool no_init, stormed, http_mode, nul_tool;
static const char *version = "2025-11-25";
static int session_n;
static char session[64];

/* HTTP: where the current request's answer goes */
static int http_fd = -1;
static bool http_sse;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void log_line(const char *text) {
    if (logf_) {
        fprintf(logf_, "%s\n", text);
        fflush(logf_);
    }
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Send one message: a stdio line, or an SSE event / JSON body on HTTP. */
static void send_msg(json_t *m) {
    char *s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    if (!s)
        return;
    if (!http_mode) {
        write_all(1, s, strlen(s));
        write_all(1, "\n", 1);
    } else if (http_fd >= 0 && http_sse) {
        char head[32];
        snprintf(head, sizeof head, "event: message\ndata: ");
        write_all(http_fd, head, strlen(head));
        write_all(http_fd, s, strlen(s));
        write_all(http_fd, "\n\n", 2);
    } else if (http_fd >= 0) {
        char head[256];
        snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "%s%s%sConnection: close\r\n\r\n",
                 strlen(s), session[0] ? "Mcp-Session-Id: " : "", session[0] ? session : "",
                 session[0] ? "\r\n" : "");
        write_all(http_fd, head, strlen(head));
        write_all(http_fd, s, strlen(s));
        close(http_fd);
        http_fd = -1;
    }
    free(s);
}

static void result(json_t *id, json_t *res) {
    send_msg(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", res));
}

static void text_result(json_t *id, const char *text) {
    result(id, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text));
}

static json_t *tool(const char *name, const char *desc, bool ro) {
    json_t *t = json_pack("{s:s, s:s, s:{s:s, s:{}}}", "name", name, "description", desc,
                          "inputSchema", "type", "object", "properties");
    if (ro)
        json_object_set_new(t, "annotations", json_pack("{s:b}", "readOnlyHint", 1));
    return t;
}

static json_t *tools_page(const char *cursor) {
    json_t *tools = json_array();
    if (!cursor) {
        json_t *echo = tool("echo", "Echo the text back", true);
        json_object_set_new(json_object_get(echo, "inputSchema"), "properties",
                            json_pack("{s:{s:s}}", "text", "type", "string"));
        json_object_set_new(json_object_get(echo, "inputSchema"), "required",
                            json_pack("[s]", "text"));
        json_array_append_new(tools, echo);
        static const char *const names[] = {"sleep", "crash", "garbage", "big", "storm", "ask",
                                            "rpc_error", NULL};
        for (size_t i = 0; names[i]; i++)
            json_array_append_new(tools, tool(names[i], "a fault", false));
        json_array_append_new(tools, tool("bad.name", "a name weir cannot offer", true));
        if (nul_tool) {
            json_t *t = tool("x", "a name with a NUL in it", true);
            json_object_set_new(t, "name", json_stringn("nul\0name", 8));
            json_array_append_new(tools, t);
        }
        return json_pack("{s:o, s:s}", "tools", tools, "nextCursor", "page-2");
    }
    static const char *const names[] = {"mixed", "structured", "fails", "progress", "log", "env",
                                        "meta", "expire", "spam", "logspam", NULL};
    for (size_t i = 0; names[i]; i++)
        json_array_append_new(tools, tool(names[i], "a result shape", true));
    json_array_append_new(tools, tool("a_tool_name_that_is_much_too_long_to_fit_the_64_character_"
                                      "rule", "too long", true));
    if (stormed)
        json_array_append_new(tools, tool("added", "appeared after the storm", true));
    return json_pack("{s:o}", "tools", tools);
}

/* A sleep in progress (stdio). */
typedef struct sleeper {
    json_t *id;
    long long due;
    struct sleeper *next;
} sleeper;
static sleeper *sleepers;

/* An "ask" waiting for the client's answer. */
static json_t *ask_id; /* the tools/call id */
static int ask_n;

static void tools_call(json_t *id, json_t *params) {
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    if (!name)
        name = "";
    if (!strcmp(name, "echo")) {
        char buf[4096];
        snprintf(buf, sizeof buf, "echo: %s", json_string_value(json_object_get(args, "text")));
        text_result(id, buf);
    } else if (!strcmp(name, "sleep")) {
        long long ms = json_integer_value(json_object_get(args, "ms"));
        if (http_mode) {
            usleep((useconds_t)ms * 1000);
            text_result(id, "slept");
            return;
        }
        sleeper *s = calloc(1, sizeof *s);
        s->id = json_incref(id);
        s->due = now_ms() + ms;
        s->next = sleepers;
        sleepers = s;
    } else if (!strcmp(name, "crash")) {
        fprintf(stderr, "fake: crashing\n");
        fflush(stderr);
        _exit(3);
    } else if (!strcmp(name, "garbage")) {
        const char *g = "this is not json\n{\"broken\": \n[1,2,3]\n\n";
        write_all(1, g, strlen(g));
        text_result(id, "ok");
    } else if (!strcmp(name, "big")) {
        size_t n = (size_t)json_integer_value(json_object_get(args, "bytes"));
        char *x = malloc(n + 1);
        memset(x, 'x', n);
        x[n] = '\0';
        text_result(id, x);
        free(x);
    } else if (!strcmp(name, "storm")) {
        long long n = json_integer_value(json_object_get(args, "count"));
        stormed = true;
        for (long long i = 0; i < n; i++)
            send_msg(json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method",
                               "notifications/tools/list_changed"));
        text_result(id, "stormed");
    } else if (!strcmp(name, "ask")) {
        const char *m = json_string_value(json_object_get(args, "method"));
        char rid[32];
        snprintf(rid, sizeof rid, "srv-%d", ++ask_n);
        json_decref(ask_id);
        ask_id = json_incref(id);
        send_msg(json_pack("{s:s, s:s, s:s, s:{}}", "jsonrpc", "2.0", "id", rid, "method",
                           m ? m : "sampling/createMessage", "params"));
        /* the answer comes in as a response: see on_message */
    } else if (!strcmp(name, "rpc_error")) {
        send_msg(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
                           "code", -32000, "message", "the fake refuses"));
    } else if (!strcmp(name, "mixed")) {
        result(id, json_pack(
                       "{s:[{s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:s, s:s, s:s}, "
                       "{s:s, s:{s:s, s:s, s:s}}, {s:s, s:{s:s, s:s}}, {s:s, s:s, s:s}, {s:s}]}",
                       "content", "type", "text", "text", "first",
                       "type", "image", "data", "iVBORw0KGgo=", "mimeType", "image/png",
                       "type", "resource_link", "uri", "file:///srv/a.txt", "name", "a.txt",
                       "mimeType", "text/plain",
                       "type", "resource", "resource", "uri", "demo://r/1", "mimeType",
                       "text/plain", "text", "resource text",
                       "type", "resource", "resource", "uri", "demo://r/2", "blob", "AAEC",
                       "type", "audio", "data", "UklGR", "mimeType", "audio/wav",
                       "type", "hologram"));
    } else if (!strcmp(name, "structured")) {
        result(id, json_pack("{s:[], s:{s:i, s:s}}", "content", "structuredContent",
                             "temperature", 21, "conditions", "sunny"));
    } else if (!strcmp(name, "fails")) {
        result(id, json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                             "the tool failed", "isError", 1));
    } else if (!strcmp(name, "progress")) {
        long long steps = json_integer_value(json_object_get(args, "steps"));
        json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
        for (long long i = 1; token && i <= steps; i++) {
            char msg[64];
            snprintf(msg, sizeof msg, "step %lld", i);
            send_msg(json_pack("{s:s, s:s, s:{s:O, s:I, s:I, s:s}}", "jsonrpc", "2.0", "method",
                               "notifications/progress", "params", "progressToken", token,
                               "progress", (json_int_t)i, "total", (json_int_t)steps, "message",
                               msg));
            usleep(20000);
        }
        text_result(id, "done");
    } else if (!strcmp(name, "log")) {
        static const char *const levels[] = {"debug", "info", "warning", "error", NULL};
        for (size_t i = 0; levels[i]; i++) {
            char msg[64];
            snprintf(msg, sizeof msg, "a %s message", levels[i]);
            send_msg(json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "jsonrpc", "2.0", "method",
                               "notifications/message", "params", "level", levels[i], "logger",
                               "fake", "data", msg));
        }
        text_result(id, "logged");
    } else if (!strcmp(name, "env")) {
        const char *v = getenv(json_string_value(json_object_get(args, "name")) ?: "");
        char buf[1024];
        snprintf(buf, sizeof buf, "value: %s", v ? v : "(unset)");
        fprintf(stderr, "fake: env says %s\n", buf);
        text_result(id, buf);
    } else if (!strcmp(name, "spam")) {
        long long n = json_integer_value(json_object_get(args, "lines"));
        for (long long i = 0; i < n; i++)
            fprintf(stderr, "spam line %lld\n", i);
        fflush(stderr);
        text_result(id, "spammed");
    } else if (!strcmp(name, "logspam")) {
        long long n = json_integer_value(json_object_get(args, "count"));
        for (long long i = 0; i < n; i++) {
            char msg[64];
            snprintf(msg, sizeof msg, "spam message %lld", i);
            send_msg(json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "jsonrpc", "2.0", "method",
                               "notifications/message", "params", "level", "warning", "logger",
                               "fake", "data", msg));
        }
        text_result(id, "logspammed");
    } else if (!strcmp(name, "meta")) {
        char *m = json_dumps(json_object_get(params, "_meta"), JSON_COMPACT | JSON_SORT_KEYS);
        text_result(id, m ? m : "null");
        free(m);
    } else if (!strcmp(name, "expire")) {
        text_result(id, "expired");
        session[0] = '\0'; /* the next request's session id is unknown */
    } else if (!strcmp(name, "added")) {
        text_result(id, "added works");
    } else {
        result(id, json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                             "no such tool", "isError", 1));
    }
}

/* One message from the client. */
static void on_message(json_t *m) {
    json_t *id = json_object_get(m, "id");
    const char *method = json_string_value(json_object_get(m, "method"));
    json_t *params = json_object_get(m, "params");
    if (!method) {
        /* a response: the answer to an "ask" */
        if (ask_id) {
            char *s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
            text_result(ask_id, s ? s : "?");
            free(s);
            json_decref(ask_id);
            ask_id = NULL;
        }
        return;
    }
    if (!strcmp(method, "initialize")) {
        if (no_init)
            return;
        if (http_mode)
            snprintf(session, sizeof session, "sess-%d", ++session_n);
        result(id, json_pack("{s:s, s:{s:{s:b}, s:{}}, s:{s:s, s:s}}", "protocolVersion",
                             version, "capabilities", "tools", "listChanged", 1, "logging",
                             "serverInfo", "name", "weir-mcp-fake", "version", "1.0"));
        return;
    }
    if (!strcmp(method, "tools/list")) {
        result(id, tools_page(json_string_value(json_object_get(params, "cursor"))));
        return;
    }
    if (!strcmp(method, "tools/call")) {
        tools_call(id, params);
        return;
    }
    if (!strcmp(method, "notifications/cancelled")) {
        json_t *rid = json_object_get(params, "requestId");
        for (sleeper **pp = &sleepers; *pp; pp = &(*pp)->next) {
            if (json_equal((*pp)->id, rid)) {
                sleeper *s = *pp;
                *pp = s->next;
                json_decref(s->id);
                free(s);
                break;
            }
        }
        return;
    }
    if (!strncmp(method, "notifications/", 14))
        return;
    if (id)
        send_msg(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
                           "code", -32601, "message", "Method not found"));
}

static void on_line(const char *line, size_t n) {
    char *copy = strndup(line, n);
    log_line(copy);
    json_t *m = json_loads(copy, 0, NULL);
    free(copy);
    if (json_is_object(m))
        on_message(m);
    json_decref(m);
}

/* ------------------------------------------------------------------------ */

static int run_stdio(void) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    char chunk[65536];
    for (;;) {
        long long next = -1;
        for (sleeper *s = sleepers; s; s = s->next)
            if (next < 0 || s->due < next)
                next = s->due;
        int timeout = next < 0 ? 1000 : (int)(next - now_ms() < 0 ? 0 : next - now_ms());
        struct pollfd pf = {0, POLLIN, 0};
        int r = poll(&pf, 1, timeout);
        long long t = now_ms();
        for (sleeper **pp = &sleepers; *pp;) {
            if ((*pp)->due <= t) {
                sleeper *s = *pp;
                *pp = s->next;
                text_result(s->id, "slept");
                json_decref(s->id);
                free(s);
            } else {
                pp = &(*pp)->next;
            }
        }
        if (r <= 0)
            continue;
        ssize_t n = read(0, chunk, sizeof chunk);
        if (n <= 0)
            break; /* stdin closed: exit, as servers should */
        if (len + (size_t)n > cap) {
            cap = (len + (size_t)n) * 2;
            buf = realloc(buf, cap);
        }
        memcpy(buf + len, chunk, (size_t)n);
        len += (size_t)n;
        size_t at = 0;
        for (;;) {
            char *nl = memchr(buf + at, '\n', len - at);
            if (!nl)
                break;
            on_line(buf + at, (size_t)(nl - (buf + at)));
            at = (size_t)(nl - buf) + 1;
        }
        memmove(buf, buf + at, len - at);
        len -= at;
    }
    free(buf);
    return 0;
}

/* Read one HTTP request: headers into hdr, body (malloc'd) */
static int read_request(int fd, char *hdr, size_t hsize, char **body, size_t *blen) {
    size_t n = 0;
    *body = NULL;
    while (n + 1 < hsize) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 5000) <= 0)
            return -1;
        ssize_t r = read(fd, hdr + n, 1);
        if (r <= 0)
            return -1;
        n++;
        if (n >= 4 && !memcmp(hdr + n - 4, "\r\n\r\n", 4))
            break;
    }
    hdr[n] = '\0';
    const char *cl = strcasestr(hdr, "content-length:");
    size_t want = cl ? (size_t)strtoul(cl + 15, NULL, 10) : 0;
    *body = calloc(1, want + 1);
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, *body + got, want - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    *blen = want;
    return 0;
}

static void http_status(int fd, const char *status) {
    char buf[160];
    snprintf(buf, sizeof buf, "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
             status);
    write_all(fd, buf, strlen(buf));
}

static int run_http(const char *port_file) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 16))
        return 2;
    socklen_t al = sizeof a;
    getsockname(ls, (struct sockaddr *)&a, &al);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "%d\n", ntohs(a.sin_port));
    fclose(f);
    rename(tmp, port_file);
    for (;;) {
        struct pollfd pf = {ls, POLLIN, 0};
        if (poll(&pf, 1, 120000) <= 0)
            break;
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            continue;
        char hdr[8192];
        char *body = NULL;
        size_t blen = 0;
        if (read_request(fd, hdr, sizeof hdr, &body, &blen) != 0) {
            free(body);
            close(fd);
            continue;
        }
        log_line(body);
        if (!strncmp(hdr, "DELETE", 6)) {
            http_status(fd, "200 OK");
            session[0] = '\0';
            free(body);
            close(fd);
            continue;
        }
        json_t *m = json_loads(body, 0, NULL);
        free(body);
        const char *method = json_string_value(json_object_get(m, "method"));
        bool is_init = method && !strcmp(method, "initialize");
        const char *sid = strcasestr(hdr, "mcp-session-id:");
        char given[64] = "";
        if (sid)
            sscanf(sid + 15, " %63[^\r\n]", given);
        if (!is_init && (!session[0] || strcmp(given, session) != 0)) {
            http_status(fd, given[0] ? "404 Not Found" : "400 Bad Request");
            json_decref(m);
            close(fd);
            continue;
        }
        if (!json_is_object(m) || !json_object_get(m, "id") || !method) {
            /* a notification or a response */
            if (json_is_object(m) && !method)
                on_message(m);
            http_status(fd, "202 Accepted");
            json_decref(m);
            close(fd);
            continue;
        }
        const char *tname = json_string_value(json_object_get(json_object_get(m, "params"), "name"));
        http_sse = tname && (!strcmp(tname, "progress") || !strcmp(tname, "ask"));
        http_fd = fd;
        if (http_sse) {
            char head[200];
            snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                        "Connection: close\r\n\r\n: a comment\n\n");
            write_all(fd, head, strlen(head));
        }
        if (tname && !strcmp(tname, "ask")) {
            /* the client answers on another POST: serve it on this thread */
            on_message(m);
            json_decref(m);
            int afd = accept(ls, NULL, NULL);
            char h2[8192];
            char *b2 = NULL;
            size_t l2 = 0;
            if (afd >= 0 && read_request(afd, h2, sizeof h2, &b2, &l2) == 0) {
                log_line(b2);
                http_status(afd, "202 Accepted");
                int keep = http_fd;
                json_t *ans = json_loads(b2, 0, NULL);
                http_fd = keep;
                on_message(ans);
                json_decref(ans);
            }
            free(b2);
            if (afd >= 0)
                close(afd);
        } else {
            on_message(m);
            json_decref(m);
        }
        if (http_fd >= 0) {
            close(http_fd);
            http_fd = -1;
        }
        http_sse = false;
    }
    return 0;
}

/* --daemon: a grandchild in a new session, detached from everything but
 * the environment; its pid goes to `file` once it runs. */
static void start_daemon(const char *file) {
    pid_t pid = fork();
    if (pid < 0)
        return;
    if (pid > 0) {
        waitpid(pid, NULL, 0);
        return;
    }
    if (setsid() < 0)
        _exit(1);
    pid_t d = fork();
    if (d != 0)
        _exit(d < 0 ? 1 : 0);
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2)
        close(null);
    if (logf_)
        fclose(logf_);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        rename(tmp, file);
    }
    sleep(60);
    _exit(0);
}

/* --tee: run COMMAND with our stdin copied to it and to FILE; its stdout and stderr are ours. */
static int run_tee(const char *file, char **argv) {
    int in[2];
    if (pipe(in))
        return 2;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        close(in[0]);
        close(in[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    signal(SIGPIPE, SIG_IGN);
    FILE *f = fopen(file, "a");
    char buf[65536];
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n <= 0)
            break;
        if (f) {
            fwrite(buf, 1, (size_t)n, f);
            fflush(f);
        }
        if (write_all(in[1], buf, (size_t)n) != 0)
            break;
    }
    close(in[1]);
    if (f)
        fclose(f);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv) {
    const char *port_file = NULL;
    int exit_at_start = -1;
    const char *stderr_text = "fake: cannot start";
    const char *daemon_file = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tee") && i + 2 < argc && !strcmp(argv[i + 2], "--"))
            return run_tee(argv[i + 1], argv + i + 3);
        if (!strcmp(argv[i], "--log") && i + 1 < argc)
            logf_ = fopen(argv[++i], "a");
        else if (!strcmp(argv[i], "--no-init"))
            no_init = true;
        else if (!strcmp(argv[i], "--exit-at-start") && i + 1 < argc)
            exit_at_start = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stderr") && i + 1 < argc)
            stderr_text = argv[++i];
        else if (!strcmp(argv[i], "--version") && i + 1 < argc)
            version = argv[++i];
        else if (!strcmp(argv[i], "--http") && i + 1 < argc)
            port_file = argv[++i];
        else if (!strcmp(argv[i], "--tag") && i + 1 < argc)
            i++;
        else if (!strcmp(argv[i], "--nul-tool"))
            nul_tool = true;
        else if (!strcmp(argv[i], "--daemon") && i + 1 < argc)
            daemon_file = argv[++i];
        else {
            fprintf(stderr, "weir-mcp-fake: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    fprintf(stderr, "fake: started\n");
    if (daemon_file)
        start_daemon(daemon_file);
    if (exit_at_start >= 0) {
        fprintf(stderr, "%s\n", stderr_text);
        return exit_at_start;
    }
    if (port_file) {
        http_mode = true;
        signal(SIGPIPE, SIG_IGN);
        return run_http(port_file);
    }
    return run_stdio();
}
