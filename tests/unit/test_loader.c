/*
 * tests/unit/test_loader.c - the plugin loader and host creation: every load
 * error with its exact message, no partial start, teardown order, search
 * path, probe, and an allocation-failure loop over weir_host_create.
 * Fixture plugins come from tests/plugins/ (WEIR_TEST_FIXTURE_DIR); their
 * init/fini calls are recorded in the file named by each row's config.log.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture_config.h"
#include "host_int.h"
#include "testutil.h"

/* --- helpers ----------------------------------------------------------- */

typedef struct fx {
    char *tmp;    /* temp dir */
    char log[4096]; /* side-effect file of the fixtures */
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->tmp = wt_tmpdir("loader");
    assert_non_null(f->tmp);
    snprintf(f->log, sizeof f->log, "%s/calls.txt", f->tmp);
    unsetenv("WEIR_PLUGIN_PATH");
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    wt_rmtree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

/* "<fixture dir>/weir-<name>.so" into buf. */
static const char *fixture(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/weir-%s.so", wt_env("WEIR_TEST_FIXTURE_DIR"), name);
    return buf;
}

static json_t *log_cfg(const fx *f) {
    return json_pack("{s:s}", "log", f->log);
}

/* The side-effect file's content ("" when it does not exist). */
static char *calls(const fx *f) {
    char *s = wt_read_file(f->log, NULL);
    return s ? s : strdup("");
}

static void assert_calls(const fx *f, const char *expected) {
    char *s = calls(f);
    assert_string_equal(s, expected);
    free(s);
}

/* Capture what is written to stderr between begin and end. */
typedef struct capture {
    int saved;
    char path[4096];
} capture;

static void capture_begin(capture *c, const fx *f) {
    snprintf(c->path, sizeof c->path, "%s/stderr.txt", f->tmp);
    fflush(stderr);
    c->saved = dup(2);
    int fd = open(c->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0);
    dup2(fd, 2);
    close(fd);
}

static char *capture_end(capture *c) {
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    char *s = wt_read_file(c->path, NULL);
    return s ? s : strdup("");
}

/* --- loader errors ----------------------------------------------------- */

static void test_missing_file(void **state) {
    (void)state;
    char path[4096], expect[8192];
    fixture(path, sizeof path, "fx-does-not-exist");
    weir__dl *dl = NULL;
    const weir_plugin_desc *d = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__dl_open(path, &dl, &d, &err), WEIR_E_PLUGIN_OPEN);
    assert_null(dl);
    snprintf(expect, sizeof expect, "plugin file not found: %s", path);
    assert_string_equal(err.text, expect);
    assert_string_equal(err.plugin, "fx-does-not-exist");
}

static void test_missing_name(void **state) {
    (void)state;
    const char *dir = wt_env("WEIR_TEST_FIXTURE_DIR");
    setenv("WEIR_PLUGIN_PATH", "/nonexistent-a:/nonexistent-b", 1);
    json_t *pp = json_pack("[s]", dir);
    char sentinel[] = "untouched";
    char *path = sentinel;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__plugin_resolve("fx-nope", pp, &path, &err), WEIR_E_PLUGIN_OPEN);
    assert_null(path);
    char expect[8192];
    snprintf(expect, sizeof expect,
             "plugin 'fx-nope' not found (searched: %s, /nonexistent-a, /nonexistent-b, ", dir);
    assert_int_equal(strncmp(err.text, expect, strlen(expect)), 0);
    assert_string_equal(err.plugin, "fx-nope");
    json_decref(pp);
    unsetenv("WEIR_PLUGIN_PATH");
}

static void test_resolve_along_plugin_path_then_env(void **state) {
    (void)state;
    const char *dir = wt_env("WEIR_TEST_FIXTURE_DIR");
    char expect[4096];
    fixture(expect, sizeof expect, "fx-alpha");
    /* plugin_path entries may themselves be colon-separated lists */
    char list[4096];
    snprintf(list, sizeof list, "/nonexistent:%s", dir);
    json_t *pp = json_pack("[s, s]", "", list);
    char *path = NULL;
    assert_int_equal(weir__plugin_resolve("fx-alpha", pp, &path, NULL), WEIR_OK);
    assert_string_equal(path, expect);
    weir__free(path);
    json_decref(pp);
    /* not on plugin_path: found along $WEIR_PLUGIN_PATH */
    setenv("WEIR_PLUGIN_PATH", dir, 1);
    assert_int_equal(weir__plugin_resolve("fx-alpha", NULL, &path, NULL), WEIR_OK);
    assert_string_equal(path, expect);
    weir__free(path);
    unsetenv("WEIR_PLUGIN_PATH");
}

static void test_resolve_path_is_taken_as_is(void **state) {
    (void)state;
    char *path = NULL;
    assert_int_equal(weir__plugin_resolve("./lib/weir-x.so", NULL, &path, NULL), WEIR_OK);
    assert_string_equal(path, "./lib/weir-x.so");
    weir__free(path);
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__plugin_resolve("Bad Name", NULL, &path, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "plugin name 'Bad Name' is not [a-z0-9_-]+"));
}

static void test_not_a_shared_object(void **state) {
    (void)state;
    char path[4096], expect[8192];
    fixture(path, sizeof path, "fx-not-so");
    weir__dl *dl = NULL;
    const weir_plugin_desc *d = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__dl_open(path, &dl, &d, &err), WEIR_E_PLUGIN_OPEN);
    snprintf(expect, sizeof expect, "cannot load %s: ", path);
    assert_int_equal(strncmp(err.text, expect, strlen(expect)), 0);
    /* the dlerror text follows (it names the file again) */
    assert_true(strlen(err.text) > strlen(expect));
    assert_string_equal(err.plugin, "fx-not-so");
}

static void test_no_entry_point(void **state) {
    (void)state;
    char path[4096], expect[8192];
    fixture(path, sizeof path, "fx-no-entry");
    weir__dl *dl = NULL;
    const weir_plugin_desc *d = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__dl_open(path, &dl, &d, &err), WEIR_E_PLUGIN_ENTRY);
    snprintf(expect, sizeof expect,
             "no entry point weir_plugin_describe in %s (a plugin defines it with "
             "WEIR_PLUGIN_DEFINE(descriptor))",
             path);
    assert_string_equal(err.text, expect);
    assert_string_equal(err.plugin, "fx-no-entry");
}

static void expect_open_error(const char *name, int code, const char *fmt_after_path) {
    char path[4096], expect[8192];
    fixture(path, sizeof path, name);
    weir__dl *dl = NULL;
    const weir_plugin_desc *d = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir__dl_open(path, &dl, &d, &err), code);
    assert_null(dl);
    assert_null(d);
    snprintf(expect, sizeof expect, "plugin '%s' (%s)%s", name, path, fmt_after_path);
    assert_string_equal(err.text, expect);
    assert_string_equal(err.plugin, name);
}

static void test_abi_major_mismatch(void **state) {
    (void)state;
    char tail[256];
    snprintf(tail, sizeof tail, " was built for ABI 2.0; this host provides ABI %d.%d",
             WEIR_ABI_MAJOR, WEIR_ABI_MINOR);
    expect_open_error("fx-abi-major", WEIR_E_PLUGIN_ABI, tail);
}

static void test_abi_minor_newer(void **state) {
    (void)state;
    char tail[256];
    snprintf(tail, sizeof tail, " needs ABI 1.%d; this host provides ABI %d.%d",
             WEIR_ABI_MINOR + 1, WEIR_ABI_MAJOR, WEIR_ABI_MINOR);
    expect_open_error("fx-abi-minor", WEIR_E_PLUGIN_ABI, tail);
}

static void test_descriptor_too_small(void **state) {
    (void)state;
    char tail[256];
    snprintf(tail, sizeof tail, ": descriptor size 12 is smaller than 1.0's %u",
             (unsigned)WEIR_PLUGIN_DESC_V1_SIZE);
    expect_open_error("fx-bad-size", WEIR_E_PLUGIN_ABI, tail);
}

static void test_duplicate_plugin_name(void **state) {
    fx *f = *state;
    char a[4096], b[4096], expect[12000];
    fixture(a, sizeof a, "fx-dup-a");
    fixture(b, sizeof b, "fx-dup-b");
    json_t *cfg = wt_fixture_config("first", "fx-alpha", log_cfg(f), "a", "fx-dup-a", NULL, "b",
                                    "fx-dup-b", NULL, NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_DUPLICATE);
    assert_null(h);
    snprintf(expect, sizeof expect,
             "plugin 'fx-dup' is declared by two files: %s (row 'a') and %s (row 'b')", a, b);
    assert_string_equal(err.text, expect);
    assert_string_equal(err.plugin, "b");
    assert_calls(f, "init:first\nfini:first\n");
    json_decref(cfg);
}

static void test_same_file_twice_is_two_instances(void **state) {
    fx *f = *state;
    json_t *cfg = wt_fixture_config("one", "fx-alpha", log_cfg(f), "two", "fx-alpha", log_cfg(f),
                                    NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    assert_non_null(weir__host_plugin(h, "one"));
    assert_non_null(weir__host_plugin(h, "two"));
    assert_ptr_not_equal(weir__host_plugin(h, "one"), weir__host_plugin(h, "two"));
    assert_int_equal(weir__hooks_count(weir__host_hooks(h), "agent/pre-step"), 2);
    weir_host_destroy(h);
    assert_calls(f, "init:one\ninit:two\nfini:two\nfini:one\n");
    json_decref(cfg);
}

static void test_init_failure_unwinds(void **state) {
    fx *f = *state;
    char path[4096], expect[8192];
    fixture(path, sizeof path, "fx-init-fails");
    json_t *cfg = wt_fixture_config("one", "fx-alpha", log_cfg(f), "two", "fx-beta", log_cfg(f),
                                    "bad", "fx-init-fails", log_cfg(f), "never", "fx-gamma",
                                    log_cfg(f), NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_PLUGIN_INIT);
    assert_null(h);
    snprintf(expect, sizeof expect,
             "plugin 'fx-init-fails' (%s) init failed: backend unreachable (fixture)", path);
    assert_string_equal(err.text, expect);
    assert_string_equal(err.plugin, "bad");
    /* the failing instance is not finalised; the row after it never loads */
    assert_calls(f, "init:one\ninit:two\ninit:bad\nfini:two\nfini:one\n");
    json_decref(cfg);
}

static void test_load_error_after_good_rows_unwinds(void **state) {
    fx *f = *state;
    char path[4096], expect[8192];
    fixture(path, sizeof path, "fx-abi-major");
    json_t *cfg = wt_fixture_config("one", "fx-alpha", log_cfg(f), "two", "fx-beta", log_cfg(f),
                                    "old", "fx-abi-major", NULL, NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_PLUGIN_ABI);
    assert_null(h);
    snprintf(expect, sizeof expect, "plugin 'fx-abi-major' (%s) was built for ABI 2.0", path);
    assert_int_equal(strncmp(err.text, expect, strlen(expect)), 0);
    assert_calls(f, "init:one\ninit:two\nfini:two\nfini:one\n");
    json_decref(cfg);
}

static void test_invalid_plugin_config(void **state) {
    fx *f = *state;
    json_t *bad = json_pack("{s:s, s:s}", "count", "three", "log", f->log);
    json_t *cfg = wt_fixture_config("a", "fx-alpha", log_cfg(f), "cfg", "fx-config-schema", bad,
                                    NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_PLUGIN_CONFIG);
    assert_null(h);
    assert_string_equal(err.text, "plugin 'fx-config-schema' (row 'cfg'): invalid config: "
                                  "$.count: expected integer, got string");
    assert_string_equal(err.plugin, "cfg");
    /* validated before init: fx-config-schema's init never ran */
    assert_calls(f, "init:a\nfini:a\n");
    json_decref(cfg);
}

static void test_valid_plugin_config(void **state) {
    fx *f = *state;
    json_t *good = json_pack("{s:i, s:s}", "count", 3, "log", f->log);
    json_t *cfg = wt_fixture_config("cfg", "fx-config-schema", good, NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    weir_host_destroy(h);
    assert_calls(f, "init:cfg\n");
    json_decref(cfg);
}

static void test_register_after_init_from_fini(void **state) {
    fx *f = *state;
    json_t *cfg = wt_fixture_config("late", "fx-late-register", log_cfg(f), NULL);
    weir_host *h = NULL;
    assert_int_equal(weir_host_create(cfg, &h, NULL), WEIR_OK);
    capture c;
    capture_begin(&c, f);
    weir_host_destroy(h);
    char *out = capture_end(&c);
    assert_string_equal(out, "weir[late]: error: plugin 'late': hook_register called after "
                             "init\n");
    free(out);
    char expect[64];
    snprintf(expect, sizeof expect, "late-%d:late\n", WEIR_E_TOO_LATE);
    assert_calls(f, expect);
    json_decref(cfg);
}

static json_t *noop_hook(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    (void)args;
    (void)ud;
    return NULL;
}

static void test_register_after_init_via_api(void **state) {
    fx *f = *state;
    json_t *cfg = wt_fixture_config("a", "fx-alpha", NULL, NULL);
    weir_host *h = NULL;
    assert_int_equal(weir_host_create(cfg, &h, NULL), WEIR_OK);
    weir_plugin *p = weir__host_plugin(h, "a");
    assert_non_null(p);
    const weir_api *api = &weir__api_table;
    weir_provider prov = {sizeof prov, NULL, NULL, NULL, NULL, NULL};
    weir_tool tool = {.struct_size = sizeof tool, .name = "t"};
    capture c;
    capture_begin(&c, f);
    int r1 = api->hook_register(p, "agent/pre-step", noop_hook, NULL);
    int r2 = api->event_type_register(p, "a/late", 0);
    int r3 = api->provider_register(p, &prov, NULL);
    int r4 = api->tool_register(p, &tool);
    char *out = capture_end(&c);
    assert_int_equal(r1, WEIR_E_TOO_LATE);
    assert_int_equal(r2, WEIR_E_TOO_LATE);
    assert_int_equal(r3, WEIR_E_TOO_LATE);
    assert_int_equal(r4, WEIR_E_TOO_LATE);
    assert_string_equal(out, "weir[a]: error: plugin 'a': hook_register called after init\n"
                             "weir[a]: error: plugin 'a': event_type_register called after init\n"
                             "weir[a]: error: plugin 'a': provider_register called after init\n"
                             "weir[a]: error: plugin 'a': tool_register called after init\n");
    free(out);
    assert_int_equal(weir__hooks_count(weir__host_hooks(h), "agent/pre-step"), 1);
    assert_false(weir__host_event_type(h, "a/late", NULL));
    weir_host_destroy(h);
    json_decref(cfg);
}

/* --- lifecycle --------------------------------------------------------- */

static void test_teardown_reverse_order(void **state) {
    fx *f = *state;
    json_t *cfg = wt_fixture_config("a", "fx-alpha", log_cfg(f), "b", "fx-beta", log_cfg(f), "c",
                                    "fx-gamma", log_cfg(f), NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    assert_calls(f, "init:a\ninit:b\ninit:c\n");
    weir_host_destroy(h);
    assert_calls(f, "init:a\ninit:b\ninit:c\nfini:c\nfini:b\nfini:a\n");
    json_decref(cfg);
}

static void test_disabled_row_is_skipped(void **state) {
    fx *f = *state;
    json_t *cfg = wt_fixture_config("a", "fx-alpha", log_cfg(f), "b", "fx-beta", log_cfg(f), NULL);
    json_object_set_new(json_array_get(json_object_get(cfg, "plugins"), 0), "disabled",
                        json_true());
    weir_host *h = NULL;
    assert_int_equal(weir_host_create(cfg, &h, NULL), WEIR_OK);
    assert_null(weir__host_plugin(h, "a"));
    weir_host_destroy(h);
    assert_calls(f, "init:b\nfini:b\n");
    json_decref(cfg);
}

static void test_alloc_failure_loop(void **state) {
    (void)state;
    json_t *cfg = wt_fixture_config("a", "fx-alpha", json_pack("{s:[s]}", "after", "b"), "b",
                                    "fx-beta", NULL, "c", "fx-gamma",
                                    json_pack("{s:[s]}", "before", "b"), NULL);
    bool ok = false;
    long n;
    for (n = 1; n < 100000 && !ok; n++) {
        weir_host *h = NULL;
        weir_error err;
        weir_error_clear(&err);
        weir__alloc_fail_after(n);
        int rc = weir_host_create(cfg, &h, &err);
        weir__alloc_fail_after(-1);
        if (rc == WEIR_OK) {
            assert_non_null(h);
            ok = true;
        } else {
            if (rc != WEIR_E_NOMEM)
                fail_msg("n=%ld: %s: %s", n, weir_status_name(rc), err.text);
            assert_null(h);
        }
        weir_host_destroy(h);
    }
    assert_true(ok);
    assert_true(n > 2); /* at least one injected failure was exercised */
    print_message("host created after %ld injected allocation failures\n", n - 2);
    json_decref(cfg);
}

static void test_null_arguments(void **state) {
    (void)state;
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(NULL, &h, &err), WEIR_E_INVAL);
    json_t *cfg = json_object();
    assert_int_equal(weir_host_create(cfg, NULL, &err), WEIR_E_INVAL);
    json_t *bad = json_pack("{s:s}", "plugins", "nope");
    assert_int_equal(weir_host_create(bad, &h, &err), WEIR_E_CONFIG);
    assert_string_equal(err.text, "'plugins' must be an array");
    json_t *norow = json_pack("{s:[{s:s}]}", "plugins", "id", "x");
    assert_int_equal(weir_host_create(norow, &h, &err), WEIR_E_CONFIG);
    assert_string_equal(err.text, "plugins[0]: a row needs a string 'id' and 'plugin'");
    assert_null(h);
    weir_host_destroy(NULL);
    assert_int_equal(weir__dl_open(NULL, NULL, NULL, &err), WEIR_E_INVAL);
    weir__dl_close(NULL);
    assert_int_equal(weir_plugin_probe(NULL, NULL, &err), WEIR_E_INVAL);
    assert_int_equal(weir_plugin_dirs(NULL, &err), WEIR_E_INVAL);
    json_decref(cfg);
    json_decref(bad);
    json_decref(norow);
}

/* --- probe and search path -------------------------------------------- */

static void test_probe_describes_without_init(void **state) {
    (void)state;
    char path[4096];
    fixture(path, sizeof path, "fx-init-fails");
    json_t *info = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_plugin_probe(path, &info, &err), WEIR_OK);
    char abi[32]; /* the ABI the fixture was built against: this tree's */
    snprintf(abi, sizeof abi, "%d.%d", WEIR_ABI_MAJOR, WEIR_ABI_MINOR);
    json_t *expect = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", "fx-init-fails",
                               "version", "1.0.0", "abi", abi, "description",
                               "init-failure fixture", "path", path);
    assert_true(json_equal(info, expect));
    json_decref(info);
    json_decref(expect);
    fixture(path, sizeof path, "fx-no-entry");
    assert_int_equal(weir_plugin_probe(path, &info, &err), WEIR_E_PLUGIN_ENTRY);
    assert_null(info);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void test_plugin_dirs_order(void **state) {
    (void)state;
    setenv("WEIR_PLUGIN_PATH", "/opt/a::/opt/b:/opt/a", 1);
    json_t *dirs = NULL;
    assert_int_equal(weir_plugin_dirs(&dirs, NULL), WEIR_OK);
    unsetenv("WEIR_PLUGIN_PATH");
    assert_true(json_array_size(dirs) >= 3);
    assert_string_equal(json_string_value(json_array_get(dirs, 0)), "/opt/a");
    assert_string_equal(json_string_value(json_array_get(dirs, 1)), "/opt/b");
    /* then <dir of this executable>/weir/plugins (libweir is linked in) */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    strcat(self, "/weir/plugins");
    assert_string_equal(json_string_value(json_array_get(dirs, 2)), self);
    /* and last the installed directory */
    const char *last = json_string_value(json_array_get(dirs, json_array_size(dirs) - 1));
    assert_true(ends_with(last, "/weir/plugins"));
    json_decref(dirs);
}

/* --- relative plugin_path entries (issue #8, item 10c) ------------------- */

/* "<a>/<b>" into buf[4096]; returns buf. */
static char *path_join(char *buf, const char *a, const char *b) {
    assert_true(snprintf(buf, 4096, "%s/%s", a, b) < 4096);
    return buf;
}

/* mkdir "<a>/<b>", its path into buf[4096]. */
static const char *mkdir_in(char *buf, const char *a, const char *b) {
    assert_int_equal(mkdir(path_join(buf, a, b), 0700), 0);
    return buf;
}

/* "<dir>/weir-<as>.so" -> the fixture weir-<fixture_name>.so. */
static void link_fixture(const char *dir, const char *as, const char *fixture_name) {
    char target[4096], base[256], link[4096];
    fixture(target, sizeof target, fixture_name);
    snprintf(base, sizeof base, "weir-%s.so", as);
    assert_int_equal(symlink(target, path_join(link, dir, base)), 0);
}

/* Compose `file` (with the cwd at `from`), create the host with the cwd at
 * `at`, and check that row "a" loaded fx-alpha from `want_path`. */
static void expect_loaded_from(const char *from, const char *file, const char *at,
                               const char *want_path) {
    char saved[4096];
    assert_non_null(getcwd(saved, sizeof saved));
    assert_int_equal(chdir(from), 0);
    json_t *cfg = NULL;
    weir_error err;
    weir_error_clear(&err);
    int rc = weir_config_compose(&file, 1, &cfg, &err);
    assert_int_equal(chdir(at), 0);
    weir_host *h = NULL;
    if (rc == WEIR_OK)
        rc = weir_host_create(cfg, &h, &err);
    assert_int_equal(chdir(saved), 0);
    if (rc != WEIR_OK)
        fail_msg("%s: %s", file, err.text);
    const weir_plugin *p = weir__host_plugin(h, "a");
    assert_non_null(p);
    assert_string_equal(p->desc->name, "fx-alpha");
    assert_string_equal(p->path, want_path);
    weir_host_destroy(h);
    json_decref(cfg);
}

/*
 * "plugin_path": ["plugins"] in <tmp>/conf/deploy.json means
 * <tmp>/conf/plugins, wherever weir runs: a plugins/ directory in the cwd
 * (here one whose weir-fx-alpha.so is fx-beta) is never searched.  That
 * holds for a relative -c path too, and after the cwd changes between
 * composing and loading.  An overlay's entries are relative to the overlay.
 */
static void test_relative_plugin_path_is_relative_to_its_file(void **state) {
    fx *f = *state;
    /* the physical path: a relative -c is made absolute with getcwd() */
    char *root = realpath(f->tmp, NULL);
    assert_non_null(root);
    char conf[4096], plugins[4096], cwd[4096], cwd_plugins[4096], over[4096], more[4096];
    mkdir_in(conf, root, "conf");
    mkdir_in(plugins, conf, "plugins");
    link_fixture(plugins, "fx-alpha", "fx-alpha");
    mkdir_in(cwd, root, "cwd");
    mkdir_in(cwd_plugins, cwd, "plugins");
    link_fixture(cwd_plugins, "fx-alpha", "fx-beta");
    mkdir_in(over, root, "over");
    mkdir_in(more, over, "more");
    link_fixture(more, "fx-alpha", "fx-alpha");

    char file[4096], text[8192], want[4096];
    path_join(file, conf, "deploy.json");
    snprintf(text, sizeof text,
             "{\"plugin_path\": [\"plugins\"], \"plugins\": [{\"id\": \"a\", \"plugin\": "
             "\"fx-alpha\", \"config\": {\"log\": \"%s\"}}]}",
             f->log);
    assert_int_equal(wt_write_file(file, text), 0);
    path_join(want, plugins, "weir-fx-alpha.so");

    expect_loaded_from(cwd, file, cwd, want);                /* absolute -c */
    expect_loaded_from(root, "conf/deploy.json", cwd, want); /* relative -c */
    expect_loaded_from(conf, "./deploy.json", cwd, want);

    /* an overlay elsewhere replaces plugin_path with its own, relative to it */
    char overlay[4096];
    path_join(overlay, over, "over.json");
    assert_int_equal(wt_write_file(overlay, "{\"plugin_path\": [\"more\"]}"), 0);
    const char *files[] = {file, overlay};
    json_t *cfg = NULL;
    assert_int_equal(weir_config_compose(files, 2, &cfg, NULL), WEIR_OK);
    assert_string_equal(json_string_value(json_array_get(json_object_get(cfg, "plugin_path"), 0)),
                        more);
    json_decref(cfg);
    assert_calls(f, "init:a\nfini:a\ninit:a\nfini:a\ninit:a\nfini:a\n");
    free(root);
}

/* A row's plugin given as a relative path is relative to its file too, never
 * to the cwd (which holds a decoy of the same name). */
static void test_relative_row_plugin_is_relative_to_its_file(void **state) {
    fx *f = *state;
    char *root = realpath(f->tmp, NULL);
    assert_non_null(root);
    char conf[4096], sub[4096], cwd[4096], cwd_sub[4096];
    mkdir_in(conf, root, "conf");
    mkdir_in(sub, conf, "sub");
    link_fixture(sub, "fx-alpha", "fx-alpha");
    mkdir_in(cwd, root, "cwd");
    mkdir_in(cwd_sub, cwd, "sub");
    link_fixture(cwd_sub, "fx-alpha", "fx-beta");
    char file[4096], text[8192], want[4096];
    path_join(file, conf, "deploy.json");
    snprintf(text, sizeof text,
             "{\"plugins\": [{\"id\": \"a\", \"plugin\": \"./sub/weir-fx-alpha.so\", "
             "\"config\": {\"log\": \"%s\"}}]}",
             f->log);
    assert_int_equal(wt_write_file(file, text), 0);
    path_join(want, sub, "weir-fx-alpha.so");
    expect_loaded_from(cwd, file, cwd, want);
    expect_loaded_from(root, "conf/deploy.json", cwd, want);
    assert_calls(f, "init:a\nfini:a\ninit:a\nfini:a\n");
    free(root);
}

/* --- 4,096 rows (issue #8, item 10d) ------------------------------------ */

/* The listener ids of `hook`'s chain, in order, from weir_host_dump_hooks;
 * a new array of strings. */
static json_t *chain_ids(const weir_host *h, const char *hook) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(weir_host_dump_hooks(h, f), WEIR_OK);
    fclose(f);
    json_t *ids = json_array();
    char head[128];
    snprintf(head, sizeof head, "%s (", hook);
    bool in = false;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != ' ') {
            in = strncmp(line, head, strlen(head)) == 0;
            continue;
        }
        char id[64];
        if (in && sscanf(line, " %*d. %63s", id) == 1)
            json_array_append_new(ids, json_string(id));
    }
    free(text);
    return ids;
}

/*
 * A deployment of 4,096 rows (the most a deployment may hold) of fx-alpha,
 * each odd row asking to run before the even row ahead of it, and an
 * overlay that moves the last row to the front and disables p2049: every
 * row loads, in composed order, and the chain obeys every constraint.
 * Only correctness: the time it takes is bench/load's business.
 */
static void test_4096_rows_load_and_order(void **state) {
    fx *f = *state;
    enum { N = 4096 };
    json_t *rows = json_array();
    for (int i = 0; i < N; i++) {
        char id[16], prev[16];
        snprintf(id, sizeof id, "p%d", i);
        snprintf(prev, sizeof prev, "p%d", i - 1);
        json_t *cfg = i % 2 ? json_pack("{s:[s]}", "before", prev) : json_object();
        json_array_append_new(rows, json_pack("{s:s, s:s, s:o}", "id", id, "plugin",
                                              "fx-alpha", "config", cfg));
    }
    char base[4096], over[4096];
    path_join(base, f->tmp, "base.json");
    path_join(over, f->tmp, "over.json");
    json_t *doc = json_pack("{s:[s], s:o}", "plugin_path", wt_env("WEIR_TEST_FIXTURE_DIR"),
                            "plugins", rows);
    assert_int_equal(json_dump_file(doc, base, 0), 0);
    json_decref(doc);
    doc = json_pack("{s:[{s:s, s:s}, {s:s, s:b}]}", "plugins", "id", "p4095", "before", "p0",
                    "id", "p2049", "disabled", 1);
    assert_int_equal(json_dump_file(doc, over, 0), 0);
    json_decref(doc);

    const char *files[] = {base, over};
    json_t *cfg = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_config_compose(files, 2, &cfg, &err), WEIR_OK);
    const json_t *composed = json_object_get(cfg, "plugins");
    assert_int_equal(json_array_size(composed), N - 1);
    weir_host *h = NULL;
    if (weir_host_create(cfg, &h, &err) != WEIR_OK)
        fail_msg("%s", err.text);
    /* every row loaded, at its composed position */
    for (size_t i = 0; i < json_array_size(composed); i++) {
        const char *id = json_string_value(json_object_get(json_array_get(composed, i), "id"));
        const weir_plugin *p = weir__host_plugin(h, id);
        assert_non_null(p);
        assert_string_equal(p->id, id);
        assert_int_equal(p->index, i);
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(composed, 0), "id")),
                        "p4095");
    assert_null(weir__host_plugin(h, "p2049"));
    assert_int_equal(weir__hooks_count(weir__host_hooks(h), "agent/pre-step"), N - 1);
    /* p4095 first (moved to the front), then each pair odd-before-even, but
     * p2048 alone (p2049 is gone) and p4094 alone (p4095 ran already) */
    json_t *want = json_pack("[s]", "p4095");
    for (int k = 0; k < N / 2; k++) {
        char odd[16], even[16];
        snprintf(odd, sizeof odd, "p%d", 2 * k + 1);
        snprintf(even, sizeof even, "p%d", 2 * k);
        if (k != 1024 && k != N / 2 - 1)
            json_array_append_new(want, json_string(odd));
        json_array_append_new(want, json_string(even));
    }
    json_t *got = chain_ids(h, "agent/pre-step");
    assert_int_equal(json_array_size(got), N - 1);
    for (size_t i = 0; i < json_array_size(want); i++)
        if (!json_equal(json_array_get(got, i), json_array_get(want, i)))
            fail_msg("chain position %zu: %s, want %s", i,
                     json_string_value(json_array_get(got, i)),
                     json_string_value(json_array_get(want, i)));
    json_decref(got);
    json_decref(want);
    weir_host_destroy(h);
    json_decref(cfg);

    /* a duplicate id at the end of 4,096 rows names both places */
    json_t *dup = json_array();
    for (int i = 0; i < N; i++) {
        char id[16];
        snprintf(id, sizeof id, "p%d", i == N - 1 ? 7 : i);
        json_array_append_new(dup, json_pack("{s:s, s:s}", "id", id, "plugin", "fx-alpha"));
    }
    doc = json_pack("{s:o}", "plugins", dup);
    assert_int_equal(json_dump_file(doc, base, 0), 0);
    json_decref(doc);
    cfg = NULL;
    weir_error_clear(&err);
    assert_int_equal(weir_config_compose(files, 1, &cfg, &err), WEIR_E_CONFIG);
    char expect[8192];
    snprintf(expect, sizeof expect,
             "config %s: $.plugins[4095].id: duplicate plugin id \"p7\" (also at $.plugins[7])",
             base);
    assert_string_equal(err.text, expect);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolve_along_plugin_path_then_env, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_resolve_path_is_taken_as_is, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_shared_object, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_entry_point, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abi_major_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abi_minor_newer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_descriptor_too_small, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_plugin_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_file_twice_is_two_instances, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_init_failure_unwinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_error_after_good_rows_unwinds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_invalid_plugin_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_valid_plugin_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_after_init_from_fini, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_after_init_via_api, setup, teardown),
        cmocka_unit_test_setup_teardown(test_teardown_reverse_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disabled_row_is_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failure_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_describes_without_init, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plugin_dirs_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relative_plugin_path_is_relative_to_its_file,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_relative_row_plugin_is_relative_to_its_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_4096_rows_load_and_order, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
