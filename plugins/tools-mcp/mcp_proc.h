/*
 * plugins/tools-mcp/mcp_proc.h - an MCP server as a child process (the
 * stdio transport's process side): spawned from an argv with no shell, its
 * own environment and working directory, in a process group of its own;
 * stopped as the MCP lifecycle says (close stdin, then SIGTERM, then
 * SIGKILL), the whole group, so that a launcher such as npx leaves no
 * grandchild behind.
 *
 * A descendant that leaves the group (a daemon that calls setsid()) is
 * found by its environment: each spawn puts a token of its own in
 * WEIR_MCP_OWNER (MCP_PROC_OWNER_VAR), which descendants inherit, and the
 * stop signals every process of our uid whose environment lists it.  A
 * descendant started with an environment without it (env -i) escapes: a
 * cgroup (systemd's KillMode=control-group) is what contains those.  No
 * host API, and no process-wide setting (no subreaper, no signal handler).
 */
#ifndef WEIR_MCP_PROC_H
#define WEIR_MCP_PROC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/** The environment variable that marks a server's processes. */
#define MCP_PROC_OWNER_VAR "WEIR_MCP_OWNER"

typedef struct mcp_proc {
    pid_t pid;            /* also the process group id; 0 when none */
    char owner[128];      /* this spawn's token: "<our pid>:<nonce>:<label>" */
    int in, out, err;     /* the child's stdin (write end), stdout, stderr (read ends); -1 closed */
    pthread_mutex_t mu;   /* guards the reap */
    bool reaped;
    int status;           /* waitpid status once reaped */
} mcp_proc;

/**
 * Start `argv[0]` (searched along the PATH of `envp`, else this process's
 * PATH, unless it contains a '/') with `argv` and `envp` (both
 * NULL-terminated, borrowed; envp NULL: ours) in `cwd` (NULL: ours).  The
 * environment gets WEIR_MCP_OWNER=[<ours>;]<token> (a WEIR_MCP_OWNER of
 * `envp` is replaced; one of this process's own environment, when it is a
 * server of another weir, is kept in front), where the token is
 * "<our pid>:<random nonce>:<label>" (`label`: the server's name, borrowed).
 * The pipes are close-on-exec on our side; stdin is non-blocking.
 * @return 0, or -1 with the reason in `msg` (exec failures included:
 *         "cannot run 'x': No such file or directory"; out of memory).
 */
int mcp_proc_spawn(mcp_proc *p, char *const *argv, char *const *envp, const char *cwd,
                   const char *label, char *msg, size_t size);

/** Reap without waiting; true once the child has been reaped (status set). Any thread. */
bool mcp_proc_try_reap(mcp_proc *p);

/**
 * Stop: close stdin, wait up to `grace_ms` for the exit, then SIGTERM the
 * group, wait `grace_ms` again, then SIGKILL; afterwards any member of the
 * group still alive gets SIGTERM and SIGKILL too, and so does every process
 * of our uid whose environment carries this spawn's token (descendants that
 * left the group): SIGTERM, up to `grace_ms` (at most 2 s) for them to go,
 * then SIGKILL, the scan repeated a few times for what they forked
 * meanwhile.  Reaps the child.  The stdout/stderr fds stay open (their
 * reader closes them).  Idempotent.  Blocks for the waits; any thread.
 */
void mcp_proc_stop(mcp_proc *p, int grace_ms);

/** Close the read fds and release the mutex.  After mcp_proc_stop. */
void mcp_proc_clear(mcp_proc *p);

/** "exit status N" / "killed by signal N (SIGTERM)" / "still running" into buf. */
const char *mcp_proc_describe(const mcp_proc *p, char *buf, size_t size);

#endif
