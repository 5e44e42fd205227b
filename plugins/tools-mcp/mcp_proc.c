/*
 * plugins/tools-mcp/mcp_proc.c - MCP server processes (see mcp_proc.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include "mcp_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static const char *env_get(char *const *envp, const char *name) {
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    return NULL;
}

/* The file to exec for `cmd`: itself when it has a '/', else the first
 * executable along PATH.  Into buf; false when none was found. */
static bool resolve(const char *cmd, char *const *envp, char *buf, size_t size) {
    if (strchr(cmd, '/')) {
        snprintf(buf, size, "%s", cmd);
        return true;
    }
    const char *path = env_get(envp, "PATH");
    if (!path)
        path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        int w = n ? snprintf(buf, size, "%.*s/%s", (int)n, path, cmd)
                  : snprintf(buf, size, "./%s", cmd);
        struct stat st;
        if (w > 0 && (size_t)w < size && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
            access(buf, X_OK) == 0)
            return true;
        if (!end)
            break;
        path = end + 1;
    }
    return false;
}

static void close_fd(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int mcp_proc_spawn(mcp_proc *p, char *const *argv, char *const *envp, const char *cwd,
                   char *msg, size_t size) {
    memset(p, 0, sizeof *p);
    p->in = p->out = p->err = -1;
    pthread_mutex_init(&p->mu, NULL);
    char file[PATH_MAX];
    if (!resolve(argv[0], envp, file, sizeof file)) {
        snprintf(msg, size, "cannot run '%s': not found on PATH", argv[0]);
        return -1;
    }
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) ||
        pipe2(ex, O_CLOEXEC)) {
        snprintf(msg, size, "cannot create pipes: %s", strerror(errno));
        goto fail;
    }
    /* everything the child needs is ready before fork: it only makes
     * async-signal-safe calls */
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(msg, size, "cannot fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0) {
        setpgid(0, 0);
        /* default signal dispositions and mask for the server */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
            goto child_fail;
        if (cwd && *cwd && chdir(cwd) != 0)
            goto child_fail;
        execve(file, argv, envp ? envp : environ);
    child_fail:;
        int e = errno;
        ssize_t w = write(ex[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    p->pid = pid;
    setpgid(pid, pid); /* also from here: no race with a kill of the group */
    close_fd(&in[0]);
    close_fd(&out[1]);
    close_fd(&err[1]);
    close_fd(&ex[1]);
    int e = 0;
    ssize_t r;
    do
        r = read(ex[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close_fd(&ex[0]);
    if (r == (ssize_t)sizeof e) {
        if (cwd && *cwd && e == ENOENT && access(cwd, F_OK) != 0)
            snprintf(msg, size, "cannot run '%s': working directory '%s': %s", argv[0], cwd,
                     strerror(e));
        else
            snprintf(msg, size, "cannot run '%s': %s", argv[0], strerror(e));
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        p->pid = 0;
        goto fail;
    }
    fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
    p->in = in[1];
    p->out = out[0];
    p->err = err[0];
    return 0;
fail:
    close_fd(&in[0]);
    close_fd(&in[1]);
    close_fd(&out[0]);
    close_fd(&out[1]);
    close_fd(&err[0]);
    close_fd(&err[1]);
    close_fd(&ex[0]);
    close_fd(&ex[1]);
    pthread_mutex_destroy(&p->mu);
    return -1;
}

bool mcp_proc_try_reap(mcp_proc *p) {
    if (!p->pid)
        return true;
    pthread_mutex_lock(&p->mu);
    if (!p->reaped) {
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) {
            p->reaped = true;
            p->status = st;
        } else if (r < 0 && errno == ECHILD) {
            p->reaped = true; /* someone else reaped it (a SIGCHLD handler) */
            p->status = 0;
        }
    }
    bool done = p->reaped;
    pthread_mutex_unlock(&p->mu);
    return done;
}

static bool wait_reap(mcp_proc *p, int ms) {
    for (int waited = 0;; waited += 10) {
        if (mcp_proc_try_reap(p))
            return true;
        if (waited >= ms)
            return false;
        sleep_ms(10);
    }
}

/* Any member of the group still alive? */
static bool group_alive(pid_t pgid) { return kill(-pgid, 0) == 0; }

void mcp_proc_stop(mcp_proc *p, int grace_ms) {
    if (!p->pid)
        return;
    close_fd(&p->in);
    if (!wait_reap(p, grace_ms)) {
        kill(-p->pid, SIGTERM);
        if (!wait_reap(p, grace_ms)) {
            kill(-p->pid, SIGKILL);
            wait_reap(p, 5000);
        }
    }
    /* leftovers of the group (a launcher's children) */
    if (group_alive(p->pid)) {
        kill(-p->pid, SIGTERM);
        for (int waited = 0; waited < grace_ms && group_alive(p->pid); waited += 10)
            sleep_ms(10);
        if (group_alive(p->pid))
            kill(-p->pid, SIGKILL);
    }
}

void mcp_proc_clear(mcp_proc *p) {
    close_fd(&p->in);
    close_fd(&p->out);
    close_fd(&p->err);
    if (p->pid) {
        pthread_mutex_destroy(&p->mu);
        p->pid = 0;
    }
}

const char *mcp_proc_describe(const mcp_proc *p, char *buf, size_t size) {
    if (!p->reaped)
        snprintf(buf, size, "still running");
    else if (WIFEXITED(p->status))
        snprintf(buf, size, "exit status %d", WEXITSTATUS(p->status));
    else if (WIFSIGNALED(p->status))
        snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(p->status),
                 strsignal(WTERMSIG(p->status)));
    else
        snprintf(buf, size, "status %d", p->status);
    return buf;
}
