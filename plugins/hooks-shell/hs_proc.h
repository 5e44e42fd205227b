/*
 * plugins/hooks-shell/hs_proc.h - run several hook processes at once, each
 * in a session (so a process group) of its own, its input on stdin, with a
 * deadline each.  POSIX only; no host calls, so a test may use it alone.
 */
#ifndef HS_PROC_H
#define HS_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Bytes of stdout or stderr kept per process (the rest is read and dropped). */
#define HS_OUTPUT_MAX ((size_t)1 << 20)

typedef struct hs_proc {
    /* in (borrowed until hs_run returns) */
    const char *path;        /* the program (absolute, or found on PATH by hs_run) */
    char *const *argv;       /* NULL-terminated */
    const char *input;       /* written to stdin, then stdin is closed */
    size_t input_len;
    long long timeout_ms;    /* > 0 */
    /* out */
    int status;              /* exit code, 128 + signal, or -1 unknown */
    int signal;              /* the signal that ended it (status 128 + signal), or 0 */
    bool started;            /* false: it could not be started (errno_start) */
    int errno_start;         /* why not (an errno value) */
    const char *start_step;  /* which step failed (static): "socketpair", "pipe",
                                "fork", or in the child "dup2", "chdir", "execve" */
    int errno_wait;          /* != 0: waitpid failed, status unknown (SIGCHLD ignored?) */
    int errno_read;          /* != 0: stdout/stderr could not be read or kept (ENOMEM):
                                what `out` / `err` hold may be cut */
    bool timed_out;          /* killed (its whole process group) at its deadline */
    bool cancelled;          /* killed because `cancelled` said so */
    char *out, *err;         /* malloc'd, NUL-terminated (may be NULL on OOM) */
    size_t out_len, err_len;
    long long elapsed_ms;
    /* private */
    pid_t pid;
    int fd_in, fd_out, fd_err;
    int fd_exec;             /* close-on-exec pipe: the child's errno if it could not exec */
    size_t in_off;
    bool exited, done;
    long long deadline, exited_at;
} hs_proc;

/*
 * Start every process of `p` (env `envp`, working directory `cwd`, may be
 * NULL), feed each its input, and wait until all have ended: exited (and
 * their output read), killed at their deadline, or killed because
 * `cancelled(ud)` returned true (polled every 100 ms; may be NULL).  A
 * killed process's group gets SIGKILL and is reaped.  A process that could
 * not be started (EMFILE, EAGAIN, ENOMEM, a program that cannot be
 * executed...) has `started` false and `errno_start` set, and holds no
 * descriptor: whatever was opened for it is closed.  Returns 0, or -1
 * when nothing could be set up (out of memory; nothing was started).  Free
 * the outputs with hs_proc_clear.
 */
int hs_run(hs_proc *p, size_t n, char *const *envp, const char *cwd,
           bool (*cancelled)(void *), void *ud);

void hs_proc_clear(hs_proc *p);

#endif
