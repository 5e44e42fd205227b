/*
 * plugins/hooks-shell/hs_proc.c - see hs_proc.h.
 *
 * Each process is forked with stdin a socket (so that writing to a hook
 * that does not read never raises SIGPIPE: send(MSG_NOSIGNAL)) and stdout
 * and stderr pipes, all close-on-exec in the parent; the child calls
 * setsid() (no controlling terminal, its own process group), closes every
 * other descriptor, changes directory and execs.  A fourth, close-on-exec
 * pipe tells a process that could not start from one that ran and failed:
 * it reaches EOF at the exec, and a child whose dup2, chdir or execve
 * failed writes {step, errno} to it before _exit(127).  One poll loop
 * serves all of them.  A process that exited is done once its pipes reach
 * EOF, or 200 ms later when something it started keeps them open.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include "hs_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 100
#define EXIT_GRACE_MS 200

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void close_fd(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Append to a capped buffer (drops what is past HS_OUTPUT_MAX: not an
 * error).  False when memory ran out (the text is then cut). */
static bool keep(char **buf, size_t *len, const char *data, size_t n) {
    if (*len >= HS_OUTPUT_MAX)
        return true;
    if (n > HS_OUTPUT_MAX - *len)
        n = HS_OUTPUT_MAX - *len;
    char *b = realloc(*buf, *len + n + 1);
    if (!b)
        return false;
    memcpy(b + *len, data, n);
    *len += n;
    b[*len] = '\0';
    *buf = b;
    return true;
}

/* The steps a child reports on the exec pipe, by index. */
static const char *const CHILD_STEPS[] = {"dup2", "chdir", "execve"};
enum { STEP_DUP2, STEP_CHDIR, STEP_EXECVE };

/* In the child: report {step, errno} on the exec pipe and exit. */
static void child_fail(int ex, int step) {
    int rec[2] = {step, errno};
    ssize_t w = write(ex, rec, sizeof rec); /* one write below PIPE_BUF: atomic */
    (void)w;
    _exit(127);
}

static void child(const hs_proc *p, int in, int out, int err, int ex, char *const *envp,
                  const char *cwd, int max_fd) {
    /* async-signal-safe calls only from here on */
    setsid();
    if (ex < 3) { /* keep it clear of the dup2s below */
        int moved = fcntl(ex, F_DUPFD_CLOEXEC, 3);
        if (moved < 0)
            _exit(127);
        ex = moved;
    }
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        child_fail(ex, STEP_DUP2);
    for (int fd = 3; fd < max_fd; fd++)
        if (fd != ex)
            close(fd);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (cwd && chdir(cwd) != 0)
        child_fail(ex, STEP_CHDIR);
    execve(p->path, p->argv, envp);
    child_fail(ex, STEP_EXECVE);
}

static void start(hs_proc *p, char *const *envp, const char *cwd, int max_fd) {
    int sv[2] = {-1, -1}, po[2] = {-1, -1}, pe[2] = {-1, -1}, ex[2] = {-1, -1};
    p->fd_in = p->fd_out = p->fd_err = p->fd_exec = -1;
    const char *step = "socketpair";
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        goto fail;
    step = "pipe";
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 || pipe2(ex, O_CLOEXEC) != 0)
        goto fail;
    step = "fork";
    pid_t pid = fork();
    if (pid < 0)
        goto fail;
    if (pid == 0)
        child(p, sv[1], po[1], pe[1], ex[1], envp, cwd, max_fd);
    close(sv[1]);
    close(po[1]);
    close(pe[1]);
    close(ex[1]);
    p->pid = pid;
    p->fd_in = sv[0];
    p->fd_out = po[0];
    p->fd_err = pe[0];
    p->fd_exec = ex[0];
    fcntl(p->fd_in, F_SETFL, O_NONBLOCK);
    fcntl(p->fd_exec, F_SETFL, O_NONBLOCK);
    p->started = true; /* until the child reports that it could not exec */
    if (p->input_len == 0) {
        shutdown(p->fd_in, SHUT_WR);
        close_fd(&p->fd_in);
    }
    return;
fail:
    p->errno_start = errno;
    p->start_step = step;
    for (int i = 0; i < 2; i++) {
        close_fd(&sv[i]);
        close_fd(&po[i]);
        close_fd(&pe[i]);
        close_fd(&ex[i]);
    }
    p->done = true;
    p->status = -1;
}

/* Read the exec pipe: EOF (it ran), {step, errno} (it could not start), or
 * nothing yet (EAGAIN: left open, unless the child is gone, when nothing
 * can come any more). */
static void read_exec(hs_proc *p) {
    int rec[2];
    ssize_t n = read(p->fd_exec, rec, sizeof rec);
    if (n < 0 && (errno == EINTR || errno == EAGAIN) && !p->exited)
        return;
    if (n == (ssize_t)sizeof rec && rec[0] >= 0 && rec[0] <= STEP_EXECVE) {
        p->started = false;
        p->start_step = CHILD_STEPS[rec[0]];
        p->errno_start = rec[1];
    }
    close_fd(&p->fd_exec);
}

static void finish(hs_proc *p, long long t0) {
    if (p->fd_exec >= 0 && p->exited)
        read_exec(p);
    close_fd(&p->fd_in);
    close_fd(&p->fd_out);
    close_fd(&p->fd_err);
    close_fd(&p->fd_exec);
    p->done = true;
    p->elapsed_ms = now_ms() - t0;
}

/* Kill the process's group and reap it. */
static void kill_group(hs_proc *p) {
    if (!p->exited) {
        kill(-p->pid, SIGKILL);
        kill(p->pid, SIGKILL);
        int st;
        while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {
        }
        p->exited = true;
        p->status = -1;
    } else {
        kill(-p->pid, SIGKILL); /* what it left behind */
    }
}

static void reap(hs_proc *p, long long now) {
    int st;
    pid_t r;
    do
        r = waitpid(p->pid, &st, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return;
    p->exited = true;
    p->exited_at = now;
    if (r < 0) { /* someone else reaped it (SIGCHLD ignored): its exit code is lost */
        p->errno_wait = errno ? errno : ECHILD;
        p->status = -1;
    } else if (WIFEXITED(st)) {
        p->status = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        p->signal = WTERMSIG(st);
        p->status = 128 + p->signal;
    } else {
        p->status = -1;
    }
}

static void read_into(hs_proc *p, int *fd, char **buf, size_t *len) {
    char chunk[8192];
    ssize_t n = read(*fd, chunk, sizeof chunk);
    if (n > 0) {
        if (!keep(buf, len, chunk, (size_t)n) && !p->errno_read)
            p->errno_read = ENOMEM;
    } else if (n == 0) {
        close_fd(fd);
    } else if (errno != EINTR && errno != EAGAIN) {
        if (!p->errno_read)
            p->errno_read = errno;
        close_fd(fd);
    }
}

static void write_input(hs_proc *p) {
    ssize_t n = send(p->fd_in, p->input + p->in_off, p->input_len - p->in_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
        p->in_off += (size_t)n;
    if ((n < 0 && errno != EINTR && errno != EAGAIN) || p->in_off >= p->input_len) {
        shutdown(p->fd_in, SHUT_WR); /* EOF for the reader; a hook that stopped reading is fine */
        close_fd(&p->fd_in);
    }
}

int hs_run(hs_proc *p, size_t n, char *const *envp, const char *cwd,
           bool (*cancelled)(void *), void *ud) {
    struct pollfd *fds = calloc(n * 4 + 1, sizeof *fds);
    if (!fds)
        return -1;
    long max = sysconf(_SC_OPEN_MAX);
    int max_fd = max > 0 && max < 65536 ? (int)max : 65536;
    long long t0 = now_ms();
    for (size_t i = 0; i < n; i++) {
        p[i].status = -1;
        p[i].pid = -1;
        p[i].fd_in = p[i].fd_out = p[i].fd_err = p[i].fd_exec = -1;
        p[i].deadline = t0 + (p[i].timeout_ms > 0 ? p[i].timeout_ms : 600000);
        start(&p[i], envp, cwd, max_fd);
    }
    for (;;) {
        long long now = now_ms();
        bool stop = cancelled && cancelled(ud);
        size_t live = 0, k = 0;
        long long wait = POLL_MS;
        for (size_t i = 0; i < n; i++) {
            hs_proc *q = &p[i];
            if (q->done)
                continue;
            if (!q->exited)
                reap(q, now);
            if (stop || now >= q->deadline) {
                q->cancelled = stop;
                q->timed_out = !stop;
                kill_group(q);
                finish(q, t0);
                continue;
            }
            if (q->exited && ((q->fd_out < 0 && q->fd_err < 0) ||
                              now - q->exited_at >= EXIT_GRACE_MS)) {
                finish(q, t0);
                continue;
            }
            live++;
            if (q->deadline - now < wait)
                wait = q->deadline - now;
            if (q->fd_exec >= 0)
                fds[k++] = (struct pollfd){.fd = q->fd_exec, .events = POLLIN};
            if (q->fd_in >= 0)
                fds[k++] = (struct pollfd){.fd = q->fd_in, .events = POLLOUT};
            if (q->fd_out >= 0)
                fds[k++] = (struct pollfd){.fd = q->fd_out, .events = POLLIN};
            if (q->fd_err >= 0)
                fds[k++] = (struct pollfd){.fd = q->fd_err, .events = POLLIN};
        }
        if (!live)
            break;
        if (wait < 1)
            wait = 1;
        if (k == 0 || poll(fds, (nfds_t)k, (int)wait) <= 0) {
            if (k == 0) {
                struct timespec ts = {0, 10 * 1000000L}; /* exited, waiting for nothing */
                nanosleep(&ts, NULL);
            }
            continue;
        }
        for (size_t j = 0; j < k; j++) {
            if (!fds[j].revents)
                continue;
            for (size_t i = 0; i < n; i++) {
                hs_proc *q = &p[i];
                if (q->done)
                    continue;
                if (fds[j].fd == q->fd_exec && q->fd_exec >= 0)
                    read_exec(q);
                else if (fds[j].fd == q->fd_in && q->fd_in >= 0)
                    write_input(q);
                else if (fds[j].fd == q->fd_out && q->fd_out >= 0)
                    read_into(q, &q->fd_out, &q->out, &q->out_len);
                else if (fds[j].fd == q->fd_err && q->fd_err >= 0)
                    read_into(q, &q->fd_err, &q->err, &q->err_len);
                else
                    continue;
                break;
            }
        }
    }
    free(fds);
    return 0;
}

void hs_proc_clear(hs_proc *p) {
    if (!p)
        return;
    free(p->out);
    free(p->err);
    p->out = p->err = NULL;
    p->out_len = p->err_len = 0;
}
