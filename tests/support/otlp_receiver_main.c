/*
 * tests/support/otlp_receiver_main.c - a small loopback OTLP/HTTP receiver
 * for the telemetry tests and bench (docs/telemetry.md).
 *
 *   weir-otlp-receiver --port-file F [--out F] [--blackhole] [--timeout-s S]
 *
 * Binds 127.0.0.1 on a free port and writes the port to --port-file.  Each
 * POST /v1/traces with Content-Type application/json is answered 200 "{}"
 * and its body appended to --out as one line (the body must be one JSON
 * text without a newline: the receiver checks it starts with '{'); any
 * other request gets 404 or 415 and is recorded as a line
 * {"rejected":"METHOD PATH"}.  --blackhole: accept every connection and
 * never read or answer (a collector that never answers).  The receiver
 * exits after --timeout-s seconds (default 60), or on SIGTERM.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64
#define MAX_REQUEST (64 * 1024 * 1024)

typedef struct conn {
    int fd;
    char *buf;
    size_t len, cap;
} conn;

static volatile sig_atomic_t stop;
static void on_term(int sig) {
    (void)sig;
    stop = 1;
}

static FILE *out;

static void reply(int fd, int status, const char *reason) {
    char head[256];
    int n =
        snprintf(head, sizeof head,
                 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
                 status, reason);
    ssize_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, head + off, (size_t)(n - off));
        if (w <= 0)
            return;
        off += w;
    }
}

/* Handle the complete requests in c's buffer; -1 closes the connection. */
static int serve(conn *c) {
    for (;;) {
        char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
        if (!end)
            return c->len > 65536 ? -1 : 0;
        size_t head_len = (size_t)(end - c->buf) + 4;
        size_t body_len = 0;
        bool json = false;
        for (char *line = strstr(c->buf, "\r\n"); line && line < end;
             line = strstr(line + 2, "\r\n")) {
            if (strncasecmp(line + 2, "Content-Length:", 15) == 0)
                body_len = strtoul(line + 17, NULL, 10);
            if (strncasecmp(line + 2, "Content-Type:", 13) == 0) {
                char *eol = strstr(line + 2, "\r\n");
                char *hit = strstr(line + 2, "application/json");
                json = hit && eol && hit < eol;
            }
        }
        if (body_len > MAX_REQUEST)
            return -1;
        if (c->len < head_len + body_len)
            return 0;
        char method[16] = "", path[256] = "";
        sscanf(c->buf, "%15s %255s", method, path);
        const char *body = c->buf + head_len;
        if (strcmp(method, "POST") != 0 || strcmp(path, "/v1/traces") != 0) {
            fprintf(out, "{\"rejected\":\"%s %s\"}\n", method, path);
            reply(c->fd, 404, "Not Found");
        } else if (!json || body_len == 0 || body[0] != '{' || memchr(body, '\n', body_len)) {
            fprintf(out, "{\"rejected\":\"%s %s: not one JSON line of application/json\"}\n",
                    method, path);
            reply(c->fd, 415, "Unsupported Media Type");
        } else {
            fwrite(body, 1, body_len, out);
            fputc('\n', out);
            reply(c->fd, 200, "OK");
        }
        fflush(out);
        memmove(c->buf, c->buf + head_len + body_len, c->len - head_len - body_len);
        c->len -= head_len + body_len;
    }
}

int main(int argc, char **argv) {
    const char *port_file = NULL, *out_file = NULL;
    long timeout_s = 60;
    int blackhole = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--port-file") == 0 && v)
            port_file = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && v)
            out_file = argv[++i];
        else if (strcmp(argv[i], "--timeout-s") == 0 && v)
            timeout_s = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--blackhole") == 0)
            blackhole = 1;
        else {
            fputs(
                "usage: weir-otlp-receiver --port-file F [--out F] [--blackhole] [--timeout-s S]\n",
                stderr);
            return 2;
        }
    }
    if (!port_file || timeout_s <= 0) {
        fputs("weir-otlp-receiver: --port-file is required, --timeout-s must be > 0\n", stderr);
        return 2;
    }
    out = out_file ? fopen(out_file, "a") : stdout;
    if (!out) {
        perror(out_file);
        return 1;
    }
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 64) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &alen) != 0) {
        perror("weir-otlp-receiver: listen");
        return 1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
    FILE *pf = fopen(tmp, "w");
    if (!pf || fprintf(pf, "%d\n", ntohs(a.sin_port)) < 0 || fclose(pf) != 0 ||
        rename(tmp, port_file) != 0) {
        perror(port_file);
        return 1;
    }
    conn conns[MAX_CONNS];
    int held[1024]; /* --blackhole: the connections it keeps open */
    size_t nheld = 0, nconns = 0;
    time_t deadline = time(NULL) + timeout_s;
    while (!stop && time(NULL) < deadline) {
        struct pollfd p[MAX_CONNS + 1];
        p[0] = (struct pollfd){.fd = ls, .events = POLLIN};
        for (size_t i = 0; i < nconns; i++)
            p[i + 1] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        if (poll(p, nconns + 1, 200) < 0 && errno != EINTR)
            break;
        if (p[0].revents & POLLIN) {
            int fd = accept(ls, NULL, NULL);
            if (fd >= 0 && blackhole && nheld < sizeof held / sizeof held[0])
                held[nheld++] = fd;
            else if (fd >= 0 && !blackhole && nconns < MAX_CONNS)
                conns[nconns++] = (conn){.fd = fd};
            else if (fd >= 0)
                close(fd);
        }
        for (size_t i = 0; i < nconns; i++) {
            if (!(p[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            conn *c = &conns[i];
            if (c->cap - c->len < 65536) {
                char *nb = realloc(c->buf, c->cap + 65536 + (c->cap / 2));
                if (!nb)
                    return 1;
                c->buf = nb;
                c->cap += 65536 + (c->cap / 2);
            }
            ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len - 1);
            if (r > 0) {
                c->len += (size_t)r;
                c->buf[c->len] = '\0';
            }
            if (r <= 0 || serve(c) != 0) {
                close(c->fd);
                free(c->buf);
                conns[i] = conns[--nconns];
                p[i + 1] = p[nconns + 1];
                i--;
            }
        }
    }
    for (size_t i = 0; i < nconns; i++) {
        close(conns[i].fd);
        free(conns[i].buf);
    }
    for (size_t i = 0; i < nheld; i++)
        close(held[i]);
    close(ls);
    if (out != stdout)
        fclose(out);
    return 0;
}
