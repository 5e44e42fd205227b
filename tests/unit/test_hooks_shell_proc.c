/*
 * tests/unit/test_hooks_shell_proc.c - hooks-shell's process runner
 * (plugins/hooks-shell/hs_proc.c) on its own: a hook that could not be
 * started is told from one that ran and failed, says which step failed and
 * why, and leaves no descriptor open; a lost exit code (SIGCHLD ignored)
 * and a death by signal are reported as such.  docs/hooks-shell.md, "When
 * a hook cannot run".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hs_proc.h"

extern char **environ;

/* Descriptors open in this process below `below` (-1: all). */
static int open_fds(int below) {
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int self = dirfd(d), n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd != self && (below < 0 || fd < below))
            n++;
    }
    closedir(d);
    return n;
}

/* The soft RLIMIT_NOFILE that leaves exactly `free_slots` descriptors. */
static rlim_t limit_leaving(int free_slots) {
    for (int lim = 1; lim < 4096; lim++)
        if (lim - open_fds(lim) == free_slots)
            return (rlim_t)lim;
    fail_msg("no limit leaves %d descriptors", free_slots);
    return 0;
}

static void set_proc(hs_proc *p, const char *path, char *const *argv, long long timeout_ms) {
    memset(p, 0, sizeof *p);
    p->path = path;
    p->argv = argv;
    p->input = "{}";
    p->input_len = 2;
    p->timeout_ms = timeout_ms;
}

static char *const SH_TRUE[] = {"sh", "-c", "cat >/dev/null; exit 0", NULL};

/* EMFILE at each of the eight descriptors one start takes (socketpair,
 * then three pipes): not started, the step and errno said, none left open. */
static void emfile_at_every_step_leaves_no_descriptor(void **state) {
    (void)state;
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    int before = open_fds(-1);
    for (int slots = 0; slots < 8; slots++) {
        hs_proc p;
        set_proc(&p, "/bin/sh", SH_TRUE, 10000);
        struct rlimit low = {limit_leaving(slots), saved.rlim_max};
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
        int rc = hs_run(&p, 1, environ, NULL, NULL, NULL);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
        assert_int_equal(rc, 0);
        assert_false(p.started);
        assert_int_equal(p.errno_start, EMFILE);
        assert_non_null(p.start_step);
        assert_string_equal(p.start_step, slots < 2 ? "socketpair" : "pipe");
        assert_int_equal(open_fds(-1), before);
        hs_proc_clear(&p);
    }
}

/* Room for one start of three: the first runs, the others could not start,
 * and nothing stays open afterwards. */
static void emfile_mid_batch_fails_only_the_rest(void **state) {
    (void)state;
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    int before = open_fds(-1);
    hs_proc p[3];
    for (int i = 0; i < 3; i++)
        set_proc(&p[i], "/bin/sh", SH_TRUE, 10000);
    struct rlimit low = {limit_leaving(9), saved.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int rc = hs_run(p, 3, environ, NULL, NULL, NULL);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    assert_int_equal(rc, 0);
    assert_true(p[0].started);
    assert_int_equal(p[0].status, 0);
    for (int i = 1; i < 3; i++) {
        assert_false(p[i].started);
        assert_int_equal(p[i].errno_start, EMFILE);
    }
    assert_int_equal(open_fds(-1), before);
    for (int i = 0; i < 3; i++)
        hs_proc_clear(&p[i]);
}

/* A program that cannot be executed did not start (it is not an exit 127
 * of the hook's own). */
static void exec_failure_is_not_started(void **state) {
    (void)state;
    int before = open_fds(-1);
    char *const argv[] = {"no-such-guard", NULL};
    hs_proc p;
    set_proc(&p, "/nonexistent/no-such-guard", argv, 10000);
    assert_int_equal(hs_run(&p, 1, environ, NULL, NULL, NULL), 0);
    assert_false(p.started);
    assert_non_null(p.start_step);
    assert_string_equal(p.start_step, "execve");
    assert_int_equal(p.errno_start, ENOENT);
    assert_false(p.timed_out);
    assert_int_equal(open_fds(-1), before);
    hs_proc_clear(&p);

    /* the shell runs, and what it cannot find is its own exit 127: started */
    char *const sh[] = {"sh", "-c", "/nonexistent/no-such-guard", NULL};
    set_proc(&p, "/bin/sh", sh, 10000);
    assert_int_equal(hs_run(&p, 1, environ, NULL, NULL, NULL), 0);
    assert_true(p.started);
    assert_int_equal(p.status, 127);
    hs_proc_clear(&p);
}

static void chdir_failure_is_not_started(void **state) {
    (void)state;
    hs_proc p;
    set_proc(&p, "/bin/sh", SH_TRUE, 10000);
    assert_int_equal(hs_run(&p, 1, environ, "/nonexistent/dir", NULL, NULL), 0);
    assert_false(p.started);
    assert_string_equal(p.start_step, "chdir");
    assert_int_equal(p.errno_start, ENOENT);
    hs_proc_clear(&p);
}

/* SIGCHLD ignored: the kernel reaps the hook, its exit code is lost, and
 * that is said (errno_wait), not taken for an answer. */
static void lost_exit_code_is_reported(void **state) {
    (void)state;
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    assert_int_equal(sigaction(SIGCHLD, &ign, &old), 0);
    char *const argv[] = {"sh", "-c", "cat >/dev/null; exit 2", NULL};
    hs_proc p;
    set_proc(&p, "/bin/sh", argv, 10000);
    int rc = hs_run(&p, 1, environ, NULL, NULL, NULL);
    sigaction(SIGCHLD, &old, NULL);
    assert_int_equal(rc, 0);
    assert_true(p.started);
    assert_int_equal(p.errno_wait, ECHILD);
    assert_int_equal(p.status, -1);
    hs_proc_clear(&p);
}

/* Killed by a signal: it ran (a non-blocking error, as in Claude Code), the
 * signal is known. */
static void death_by_signal_is_told(void **state) {
    (void)state;
    char *const argv[] = {"sh", "-c", "cat >/dev/null; kill -9 $$", NULL};
    hs_proc p;
    set_proc(&p, "/bin/sh", argv, 10000);
    assert_int_equal(hs_run(&p, 1, environ, NULL, NULL, NULL), 0);
    assert_true(p.started);
    assert_int_equal(p.errno_wait, 0);
    assert_int_equal(p.signal, SIGKILL);
    assert_int_equal(p.status, 128 + SIGKILL);
    hs_proc_clear(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(emfile_at_every_step_leaves_no_descriptor),
        cmocka_unit_test(emfile_mid_batch_fails_only_the_rest),
        cmocka_unit_test(exec_failure_is_not_started),
        cmocka_unit_test(chdir_failure_is_not_started),
        cmocka_unit_test(lost_exit_code_is_reported),
        cmocka_unit_test(death_by_signal_is_told),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
