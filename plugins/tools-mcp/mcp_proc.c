/*
 * plugins/tools-mcp/mcp_proc.c - MCP server processes (see mcp_proc.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include "mcp_proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OWNER_PREFIX MCP_PROC_OWNER_VAR "="
#define ENVIRON_MAX ((size_t)4 << 20) /* the most of a process's environment read */
#define SWEEP_KILL_ROUNDS 5

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

/* ------------------------------------------------------------------------ */
/* The owner token                                                           */
/* ------------------------------------------------------------------------ */

/* A token no other spawn has: our pid, 64 random bits (or the clock and a
 * counter), the label. */
static void make_token(char *buf, size_t size, const char *label) {
    static atomic_uint_fast64_t counter;
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t)sizeof nonce) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        nonce = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec;
    }
    nonce ^= atomic_fetch_add(&counter, 1) * UINT64_C(0x9E3779B97F4A7C15);
    snprintf(buf, size, "%ld:%016llx:%s", (long)getpid(), (unsigned long long)nonce,
             label ? label : "");
}

/*
 * `envp` (NULL: ours) without its WEIR_MCP_OWNER, plus ours: the one of
 * this process's environment (when it is itself a server of a weir), then
 * `token`.  One allocation (free() it); NULL when out of memory.
 */
static char **owned_env(char *const *envp, const char *token) {
    char *const *src = envp ? envp : environ;
    const char *outer = getenv(MCP_PROC_OWNER_VAR);
    size_t n = 0, bytes = 0;
    while (src && src[n])
        n++;
    bytes = strlen(OWNER_PREFIX) + (outer && *outer ? strlen(outer) + 1 : 0) + strlen(token) + 1;
    char **v = malloc((n + 2) * sizeof *v + bytes);
    if (!v)
        return NULL;
    char *mark = (char *)(v + n + 2);
    snprintf(mark, bytes, "%s%s%s%s", OWNER_PREFIX, outer && *outer ? outer : "",
             outer && *outer ? ";" : "", token);
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(src[i], OWNER_PREFIX, strlen(OWNER_PREFIX)) != 0)
            v[at++] = src[i];
    v[at++] = mark;
    v[at] = NULL;
    return v;
}

static void close_fd(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int mcp_proc_spawn(mcp_proc *p, char *const *argv, char *const *envp, const char *cwd,
                   const char *label, char *msg, size_t size) {
    memset(p, 0, sizeof *p);
    p->in = p->out = p->err = -1;
    pthread_mutex_init(&p->mu, NULL);
    char file[PATH_MAX];
    if (!resolve(argv[0], envp, file, sizeof file)) {
        snprintf(msg, size, "cannot run '%s': not found on PATH", argv[0]);
        pthread_mutex_destroy(&p->mu);
        return -1;
    }
    make_token(p->owner, sizeof p->owner, label);
    char **env = owned_env(envp, p->owner);
    if (!env) {
        snprintf(msg, size, "cannot run '%s': out of memory", argv[0]);
        pthread_mutex_destroy(&p->mu);
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
        execve(file, argv, env);
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
    free(env);
    fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
    p->in = in[1];
    p->out = out[0];
    p->err = err[0];
    return 0;
fail:
    free(env);
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

/* ------------------------------------------------------------------------ */
/* Descendants that left the group, by their environment                     */
/* ------------------------------------------------------------------------ */

/* True when the NUL-separated environment `env` (n bytes) has a
 * WEIR_MCP_OWNER whose ';'-separated list holds `token`. */
static bool env_lists(const char *env, size_t n, const char *token) {
    size_t pl = strlen(OWNER_PREFIX), tl = strlen(token);
    for (size_t i = 0; i < n;) {
        const char *e = env + i;
        size_t len = strnlen(e, n - i);
        if (len > pl && !memcmp(e, OWNER_PREFIX, pl)) {
            const char *v = e + pl, *end = e + len;
            while (v < end) {
                const char *semi = memchr(v, ';', (size_t)(end - v));
                size_t vl = semi ? (size_t)(semi - v) : (size_t)(end - v);
                if (vl == tl && !memcmp(v, token, tl))
                    return true;
                v += vl + 1;
            }
        }
        i += len + 1;
    }
    return false;
}

/* Whether process `pid`'s environment lists `token` (false when it cannot
 * be read: another user's, gone, a zombie). */
static bool proc_marked(pid_t pid, const char *token) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    bool hit = false;
    while (buf) {
        if (n == cap) {
            char *b = cap < ENVIRON_MAX ? realloc(buf, cap * 2) : NULL;
            if (!b)
                break; /* what was read is searched */
            buf = b;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (buf)
        hit = env_lists(buf, n, token);
    free(buf);
    return hit;
}

#ifdef SYS_pidfd_open
static int pidfd_open_(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
#else
static int pidfd_open_(pid_t pid) {
    (void)pid;
    errno = ENOSYS;
    return -1;
}
#endif

/*
 * Send `sig` (0: none, a probe) to every process of our uid but us whose
 * environment lists `token`.  A pidfd is opened before the environment is
 * read, and the signal goes through it: a pid reused meanwhile is never
 * signalled.  Returns how many were found.
 */
static int sweep(const char *token, int sig) {
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    uid_t uid = geteuid();
    pid_t self = getpid();
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char *end;
        long v = strtol(e->d_name, &end, 10);
        if (*end || v <= 0 || v > INT32_MAX || (pid_t)v == self)
            continue;
        pid_t pid = (pid_t)v;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || st.st_uid != uid)
            continue;
        int pfd = pidfd_open_(pid);
        if (pfd < 0 && errno != ENOSYS)
            continue; /* gone */
        if (proc_marked(pid, token)) {
            found++;
            if (sig) {
#ifdef SYS_pidfd_send_signal
                if (pfd >= 0)
                    syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0);
                else
#endif
                    kill(pid, sig);
            }
        }
        if (pfd >= 0)
            close(pfd);
    }
    closedir(d);
    return found;
}

/* SIGTERM the marked processes, wait up to grace_ms (2 s at most) for them
 * to go, SIGKILL what is left, and again for what they forked meanwhile. */
static void sweep_marked(const char *token, int grace_ms) {
    if (!token[0] || sweep(token, SIGTERM) == 0)
        return;
    int wait_ms = grace_ms < 2000 ? grace_ms : 2000;
    for (int waited = 0; waited < wait_ms; waited += 20) {
        sleep_ms(20);
        if (sweep(token, 0) == 0)
            return;
    }
    for (int round = 0; round < SWEEP_KILL_ROUNDS && sweep(token, SIGKILL) > 0; round++)
        sleep_ms(20);
}

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
    /* descendants that left the group (a daemon's setsid()) */
    sweep_marked(p->owner, grace_ms);
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
