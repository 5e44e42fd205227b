/*
 * tests/unit/test_host.c - the host's registries and the api-table
 * implementations: event types, providers, tools, instance accessors, the
 * log line format, config ownership, hook dump order, and how registration
 * and freeze failures fail the whole deployment.  Registration calls are
 * driven through a hand-made instance with registration open.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture_config.h"
#include "host_int.h"
#include "testutil.h"

typedef struct fx {
    char *tmp;
    char log[4096];
    weir_host *host; /* an empty host (no plugin rows) */
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->tmp = wt_tmpdir("host");
    assert_non_null(f->tmp);
    snprintf(f->log, sizeof f->log, "%s/calls.txt", f->tmp);
    json_t *cfg = json_pack("{s:[]}", "plugins");
    assert_int_equal(weir_host_create(cfg, &f->host, NULL), WEIR_OK);
    json_decref(cfg);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    weir_host_destroy(f->host);
    wt_rmtree(f->tmp);
    free(f->tmp);
    free(f);
    return 0;
}

static int noop_init(weir_plugin *self, const weir_api *api, const json_t *config,
                     weir_error *err) {
    (void)self;
    (void)api;
    (void)config;
    (void)err;
    return WEIR_OK;
}

static const weir_plugin_desc desc_a = {WEIR_PLUGIN_HEADER, .name = "host-a",
                                        .version = "1", .init = noop_init};
static const weir_plugin_desc desc_b = {WEIR_PLUGIN_HEADER, .name = "host-b",
                                        .version = "1", .init = noop_init};

/* An instance of `desc` on `host`, inside its init (registration open). */
typedef struct inst {
    char id[32];
    weir_plugin p;
} inst;

static void inst_init(inst *in, weir_host *host, const char *id,
                      const weir_plugin_desc *desc) {
    memset(in, 0, sizeof *in);
    snprintf(in->id, sizeof in->id, "%s", id);
    in->p.host = host;
    in->p.id = in->id;
    in->p.desc = desc;
    in->p.registering = true;
}

/* --- event types ------------------------------------------------------- */

static void test_event_type_registered_as_ignorable(void **state) {
    fx *f = *state;
    inst a;
    inst_init(&a, f->host, "a", &desc_a);
    assert_int_equal(weir__plugin_event_type_register(&a.p, "host-a/thing", 0), WEIR_OK);
    uint32_t flags = 0;
    assert_true(weir__host_event_type(f->host, "host-a/thing", &flags));
    assert_int_equal(flags, WEIR_EVENT_IGNORABLE);
    assert_false(weir__host_event_type(f->host, "host-a/other", &flags));
    assert_int_equal(a.p.reg_err.code, WEIR_OK);
}

static void test_event_type_core_name_refused(void **state) {
    fx *f = *state;
    inst a;
    inst_init(&a, f->host, "a", &desc_a);
    assert_int_equal(weir__plugin_event_type_register(&a.p, "turn/end", 0), WEIR_E_DUPLICATE);
    assert_int_equal(a.p.reg_err.code, WEIR_E_DUPLICATE);
    assert_string_equal(a.p.reg_err.text, "event type 'turn/end' is a core event type");
    assert_false(weir__host_event_type(f->host, "turn/end", NULL));
}

static void test_event_type_bad_name_and_flags(void **state) {
    fx *f = *state;
    inst a;
    inst_init(&a, f->host, "a", &desc_a);
    assert_int_equal(weir__plugin_event_type_register(&a.p, "Bad Type", 0), WEIR_E_INVAL);
    assert_string_equal(a.p.reg_err.text, "event type 'Bad Type' is not [a-z0-9_./-]+");
    assert_int_equal(weir__plugin_event_type_register(&a.p, "", 0), WEIR_E_INVAL);
    assert_int_equal(weir__plugin_event_type_register(&a.p, NULL, 0), WEIR_E_INVAL);
    assert_int_equal(weir__plugin_event_type_register(&a.p, "a/x", 0x8), WEIR_E_INVAL);
    assert_false(weir__host_event_type(f->host, "a/x", NULL));
}

static void test_event_type_owned_by_one_plugin(void **state) {
    fx *f = *state;
    inst a1, a2, b;
    inst_init(&a1, f->host, "a1", &desc_a);
    inst_init(&a2, f->host, "a2", &desc_a);
    inst_init(&b, f->host, "b", &desc_b);
    assert_int_equal(weir__plugin_event_type_register(&a1.p, "host-a/x", 0), WEIR_OK);
    /* a second row of the same plugin may register it again */
    assert_int_equal(weir__plugin_event_type_register(&a2.p, "host-a/x", 0), WEIR_OK);
    assert_int_equal(weir__plugin_event_type_register(&b.p, "host-a/x", 0), WEIR_E_DUPLICATE);
    assert_string_equal(b.p.reg_err.text,
                        "event type 'host-a/x' is registered by plugins 'a1' and 'b'");
}

/* --- providers --------------------------------------------------------- */

static int prov_prepare(void *self, const json_t *config, weir_signal *signal, void **call,
                        weir_error *err) {
    (void)self;
    (void)config;
    (void)signal;
    (void)err;
    *call = NULL;
    return WEIR_OK;
}

static int prov_stream(void *self, void *call, const json_t *request, weir_stream *stream) {
    (void)self;
    (void)call;
    (void)request;
    (void)stream;
    return WEIR_OK;
}

static void prov_release(void *self, void *call) {
    (void)self;
    (void)call;
}

static void test_provider_registered_under_row_id(void **state) {
    fx *f = *state;
    inst a;
    inst_init(&a, f->host, "local", &desc_a);
    int token = 0;
    weir_provider vt = {sizeof vt, NULL, prov_prepare, prov_stream, prov_release, NULL};
    assert_int_equal(weir__plugin_provider_register(&a.p, &vt, &token), WEIR_OK);
    const weir__provider_entry *e = weir__host_provider(f->host, "local");
    assert_non_null(e);
    assert_string_equal(e->id, "local");
    assert_ptr_equal(e->self, &token);
    assert_ptr_equal(e->owner, &a.p);
    assert_true(e->vt.stream == prov_stream);
    assert_true(e->vt.release_call == prov_release);
    assert_null(weir__host_provider(f->host, "other"));
}

static void test_provider_duplicate_refused(void **state) {
    fx *f = *state;
    inst a, a2;
    inst_init(&a, f->host, "p", &desc_a);
    inst_init(&a2, f->host, "p2", &desc_a);
    weir_provider vt = {sizeof vt, NULL, prov_prepare, prov_stream, NULL, NULL};
    assert_int_equal(weir__plugin_provider_register(&a.p, &vt, NULL), WEIR_OK);
    assert_int_equal(weir__plugin_provider_register(&a.p, &vt, NULL), WEIR_E_DUPLICATE);
    assert_string_equal(a.p.reg_err.text, "a provider is already registered under 'p'");
    /* another row of the same plugin is another provider */
    assert_int_equal(weir__plugin_provider_register(&a2.p, &vt, NULL), WEIR_OK);
    assert_non_null(weir__host_provider(f->host, "p2"));
}

static void test_provider_short_struct_copies_known_fields(void **state) {
    fx *f = *state;
    inst a;
    inst_init(&a, f->host, "old", &desc_a);
    weir_provider vt = {(uint32_t)offsetof(weir_provider, release_call), NULL, prov_prepare,
                        prov_stream, prov_release, NULL};
    assert_int_equal(weir__plugin_provider_register(&a.p, &vt, NULL), WEIR_OK);
    const weir__provider_entry *e = weir__host_provider(f->host, "old");
    assert_non_null(e);
    assert_null(e->vt.release_call); /* beyond what the plugin declared */
    assert_int_equal(e->vt.struct_size, sizeof(weir_provider));
}

static void test_provider_incomplete_refused(void **state) {
    fx *f = *state;
    inst a;
    inst_init(&a, f->host, "p", &desc_a);
    weir_provider vt = {sizeof vt, NULL, prov_prepare, NULL, NULL, NULL};
    assert_int_equal(weir__plugin_provider_register(&a.p, &vt, NULL), WEIR_E_INVAL);
    assert_int_equal(weir__plugin_provider_register(&a.p, NULL, NULL), WEIR_E_INVAL);
    assert_null(weir__host_provider(f->host, "p"));
}

/* --- tools ------------------------------------------------------------- */

static int tool_exec(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    (void)exec;
    (void)args;
    (void)ud;
    *result = json_string("ok");
    return WEIR_OK;
}

static void test_tool_duplicate_name_refused(void **state) {
    fx *f = *state;
    inst a, b;
    inst_init(&a, f->host, "a", &desc_a);
    inst_init(&b, f->host, "b", &desc_b);
    json_t *params = json_pack("{s:s}", "type", "object");
    weir_tool t = {.struct_size = sizeof t, .name = "echo", .description = "echo it",
                   .parameters = params, .execute = tool_exec};
    assert_int_equal(weir__plugin_tool_register(&a.p, &t), WEIR_OK);
    assert_int_equal(weir__plugin_tool_register(&b.p, &t), WEIR_E_DUPLICATE);
    assert_int_equal(b.p.reg_err.code, WEIR_E_DUPLICATE);
    assert_int_equal(weir__plugin_tool_register(&b.p, NULL), WEIR_E_INVAL);
    json_decref(params);
}

/* --- instance accessors and log --------------------------------------- */

static void test_instance_accessors(void **state) {
    fx *f = *state;
    inst a;
    inst_init(&a, f->host, "row-1", &desc_a);
    assert_string_equal(weir__plugin_id(&a.p), "row-1");
    assert_null(weir__plugin_data(&a.p));
    int x;
    weir__plugin_set_data(&a.p, &x);
    assert_ptr_equal(weir__plugin_data(&a.p), &x);
    assert_null(weir__plugin_id(NULL));
    assert_null(weir__plugin_data(NULL));
    weir__plugin_set_data(NULL, &x);
    assert_int_equal(weir__plugin_hook_register(NULL, "agent/pre-step", NULL, NULL),
                     WEIR_E_INVAL);
    assert_int_equal(weir__plugin_event_type_register(NULL, "x/y", 0), WEIR_E_INVAL);
    assert_int_equal(weir__plugin_provider_register(NULL, NULL, NULL), WEIR_E_INVAL);
    assert_int_equal(weir__plugin_tool_register(NULL, NULL), WEIR_E_INVAL);
}

static void test_log_line_format(void **state) {
    fx *f = *state;
    inst a;
    inst_init(&a, f->host, "row-1", &desc_a);
    char path[4096];
    snprintf(path, sizeof path, "%s/stderr.txt", f->tmp);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0);
    dup2(fd, 2);
    close(fd);
    /* default threshold: warnings and errors only */
    unsetenv("WEIR_LOG_LEVEL");
    weir__plugin_log(&a.p, WEIR_LOG_INFO, "%s", "dropped");
    weir__plugin_log(&a.p, WEIR_LOG_DEBUG, "dropped");
    setenv("WEIR_LOG_LEVEL", "debug", 1);
    weir__plugin_log(&a.p, WEIR_LOG_WARN, "x=%d", 3);
    weir__plugin_log(&a.p, WEIR_LOG_INFO, "%s", "hello");
    weir__plugin_log(&a.p, WEIR_LOG_DEBUG, "d");
    setenv("WEIR_LOG_LEVEL", "error", 1);
    weir__plugin_log(&a.p, WEIR_LOG_WARN, "dropped");
    weir__plugin_log(&a.p, WEIR_LOG_ERROR, "e");
    unsetenv("WEIR_LOG_LEVEL");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *out = wt_read_file(path, NULL);
    assert_string_equal(out, "weir[row-1]: warning: x=3\n"
                             "weir[row-1]: info: hello\n"
                             "weir[row-1]: debug: d\n"
                             "weir[row-1]: error: e\n");
    free(out);
}

/* --- host -------------------------------------------------------------- */

static void test_host_keeps_its_own_config(void **state) {
    (void)state;
    json_t *cfg = json_pack("{s:{s:s}, s:[]}", "agent", "model", "m1", "plugins");
    weir_host *h = NULL;
    assert_int_equal(weir_host_create(cfg, &h, NULL), WEIR_OK);
    json_object_set_new(json_object_get(cfg, "agent"), "model", json_string("changed"));
    const json_t *mine = weir_host_config(h);
    assert_string_equal(json_string_value(json_object_get(json_object_get(mine, "agent"),
                                                          "model")),
                        "m1");
    weir_host_destroy(h);
    json_decref(cfg);
    assert_null(weir_host_config(NULL));
    assert_null(weir__host_hooks(NULL));
    assert_null(weir__host_tools(NULL));
    assert_null(weir__host_plugin(NULL, "x"));
    assert_false(weir__host_event_type(NULL, "x", NULL));
}

static void test_dump_hooks_in_chain_order(void **state) {
    fx *f = *state;
    json_t *cfg = wt_fixture_config("first", "fx-alpha", json_pack("{s:[s]}", "after", "second"),
                                    "second", "fx-beta", NULL, "third", "fx-gamma",
                                    json_pack("{s:[s]}", "before", "second"), NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s/dump.txt", f->tmp);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    assert_int_equal(weir_host_dump_hooks(h, out), WEIR_OK);
    fclose(out);
    char *text = wt_read_file(path, NULL);
    const char *chain = strstr(text, "agent/pre-step");
    assert_non_null(chain);
    const char *third = strstr(chain, "third"), *second = strstr(chain, "second"),
               *first = strstr(chain, "first");
    assert_non_null(third);
    assert_non_null(second);
    assert_non_null(first);
    assert_true(third < second && second < first);
    free(text);
    assert_int_equal(weir_host_dump_hooks(NULL, stdout), WEIR_E_INVAL);
    assert_int_equal(weir_host_dump_hooks(h, NULL), WEIR_E_INVAL);
    weir_host_destroy(h);
    json_decref(cfg);
}

/* --- policy roles (docs/plugins.md, "Roles") ------------------------------ */

/* Rows a (fx-alpha) and b (fx-beta) filling `role`; each row's share_roles
 * (a JSON text, or NULL for none). */
static json_t *role_config(const fx *f, const char *role, const char *share_a,
                           const char *share_b) {
    json_t *cfg = wt_fixture_config("a", "fx-alpha",
                                    json_pack("{s:s, s:[s]}", "log", f->log, "roles", role), "b",
                                    "fx-beta", json_pack("{s:s, s:[s]}", "log", f->log, "roles",
                                                         role),
                                    NULL);
    const char *share[2] = {share_a, share_b};
    for (size_t i = 0; i < 2; i++)
        if (share[i])
            json_object_set_new(json_array_get(json_object_get(cfg, "plugins"), i),
                                "share_roles", json_loads(share[i], JSON_DECODE_ANY, NULL));
    return cfg;
}

static void test_role_filled_twice_refused(void **state) {
    fx *f = *state;
    json_t *cfg = role_config(f, "compaction", NULL, NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_CONFIG);
    assert_null(h);
    assert_string_equal(err.text,
                        "role 'compaction' is filled by two rows: 'a' (plugin fx-alpha 1.0.0) "
                        "and 'b' (plugin fx-beta 1.0.0); remove one, or give both rows "
                        "\"share_roles\": [\"compaction\"] to run both");
    assert_string_equal(err.plugin, "b");
    char *calls = wt_read_file(f->log, NULL); /* b's init failed at its declaration */
    assert_string_equal(calls, "init:a\nfini:a\n");
    free(calls);
    json_decref(cfg);
    /* one row sharing is not enough: the other did not agree */
    unlink(f->log);
    cfg = role_config(f, "compaction", NULL, "[\"compaction\"]");
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "role 'compaction' is filled by two rows: 'a'"));
    json_decref(cfg);
    unlink(f->log);
    cfg = role_config(f, "compaction", "[\"compaction\"]", NULL);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "role 'compaction' is filled by two rows: 'a'"));
    json_decref(cfg);
}

static void test_role_shared_by_both_rows_loads(void **state) {
    fx *f = *state;
    json_t *cfg = role_config(f, "retry", "[\"retry\"]", "[\"retry\"]");
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    const weir_plugin *a = weir__host_plugin(h, "a");
    assert_non_null(a);
    assert_int_equal(a->nroles, 1);
    assert_string_equal(a->roles[0], "retry");
    weir_host_destroy(h);
    json_decref(cfg);
    /* different roles never conflict */
    cfg = wt_fixture_config("a", "fx-alpha", json_pack("{s:[s]}", "roles", "retry"), "b",
                            "fx-beta", json_pack("{s:[s]}", "roles", "compaction"), NULL);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    weir_host_destroy(h);
    json_decref(cfg);
}

static void test_role_shared_but_not_filled_refused(void **state) {
    fx *f = *state;
    json_t *cfg = role_config(f, "compaction", "[\"retry\"]", NULL);
    json_array_remove(json_object_get(cfg, "plugins"), 1); /* a alone */
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_CONFIG);
    assert_string_equal(err.text, "row 'a' (plugin fx-alpha): share_roles names role 'retry', "
                                  "which the plugin does not fill (its roles: compaction)");
    json_decref(cfg);
    /* the host checks the key itself for a config that skipped the composer */
    cfg = role_config(f, "compaction", "\"compaction\"", NULL);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_E_CONFIG);
    assert_non_null(strstr(err.text, "share_roles must be an array of role names"));
    json_decref(cfg);
}

static void test_role_declaration_checks(void **state) {
    fx *f = *state;
    inst in;
    inst_init(&in, f->host, "r", &desc_a);
    assert_int_equal(weir__plugin_role(&in.p, "Compaction"), WEIR_E_INVAL);
    assert_int_equal(in.p.reg_err.code, WEIR_E_INVAL); /* the first failure fails init */
    assert_non_null(strstr(in.p.reg_err.text, "'Compaction' is not a role name"));
    assert_int_equal(weir__plugin_role(&in.p, NULL), WEIR_E_INVAL);
    assert_int_equal(weir__plugin_role(&in.p, "-x"), WEIR_E_INVAL);
    assert_int_equal(weir__plugin_role(&in.p, "a23456789012345678901234567890123"), WEIR_E_INVAL);
    assert_int_equal(weir__plugin_role(&in.p, "a234567890123456789012345678901"), WEIR_OK);
    assert_int_equal(weir__plugin_role(&in.p, "retry"), WEIR_OK);
    assert_int_equal(weir__plugin_role(&in.p, "retry"), WEIR_OK); /* again: nothing new */
    assert_int_equal(in.p.nroles, 2);
    assert_int_equal(weir__plugin_role(&in.p, "compaction"), WEIR_OK);
    assert_int_equal(weir__plugin_role(&in.p, "my.policy_1-x"), WEIR_OK);
    assert_int_equal(weir__plugin_role(&in.p, "fifth"), WEIR_E_LIMIT);
    assert_int_equal(in.p.nroles, 4);
    char text[256];
    weir__plugin_roles_text(&in.p, text, sizeof text);
    assert_string_equal(text, "a234567890123456789012345678901, retry, compaction, my.policy_1-x");
    in.p.registering = false;
    assert_int_equal(weir__plugin_role(&in.p, "late"), WEIR_E_TOO_LATE);
    assert_int_equal(weir__plugin_role(NULL, "retry"), WEIR_E_INVAL);
}

static void test_registration_error_reaches_init_failure(void **state) {
    fx *f = *state;
    json_t *cfg = wt_fixture_config(
        "a", "fx-alpha", json_pack("{s:s, s:s}", "log", f->log, "hook", "no/such-hook"), NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_not_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    assert_null(h);
    assert_int_equal(err.code, WEIR_E_PLUGIN_INIT);
    char path[4096], expect[8192];
    snprintf(path, sizeof path, "%s/weir-fx-alpha.so", wt_env("WEIR_TEST_FIXTURE_DIR"));
    snprintf(expect, sizeof expect, "plugin 'fx-alpha' (%s) init failed: ", path);
    assert_int_equal(strncmp(err.text, expect, strlen(expect)), 0);
    /* the hooks registry's own message follows and names the hook */
    assert_non_null(strstr(err.text + strlen(expect), "no/such-hook"));
    assert_string_equal(err.plugin, "a");
    char *calls = wt_read_file(f->log, NULL);
    assert_null(calls); /* init failed before recording anything; no fini */
    json_decref(cfg);
}

static void test_freeze_error_fails_deployment(void **state) {
    fx *f = *state;
    json_t *cfg = wt_fixture_config("a", "fx-alpha", json_pack("{s:s, s:[s]}", "log", f->log,
                                                               "before", "nobody"),
                                    "b", "fx-beta", json_pack("{s:s}", "log", f->log), NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    int rc = weir_host_create(cfg, &h, &err);
    assert_int_not_equal(rc, WEIR_OK);
    assert_int_not_equal(rc, WEIR_E_NOMEM);
    assert_null(h);
    assert_non_null(strstr(err.text, "nobody"));
    char *calls = wt_read_file(f->log, NULL);
    assert_string_equal(calls, "init:a\ninit:b\nfini:b\nfini:a\n");
    free(calls);
    json_decref(cfg);
}

/* --- event type namespaces (docs/plugins.md, "Event types are namespaced") - */

/* weir_host_create's error for `cfg` (taken), which must fail. */
static weir_error create_fails(json_t *cfg) {
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_not_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    assert_null(h);
    json_decref(cfg);
    return err;
}

/* A type outside the plugin's namespaces, or in the core's, fails the load
 * naming the plugin, the row and the type. */
static void test_event_type_outside_namespace_fails_load(void **state) {
    (void)state;
    weir_error err =
        create_fails(wt_fixture_config("r1", "fx-alpha", json_pack("{s:s}", "event", "other/x"), NULL));
    assert_int_equal(err.code, WEIR_E_PLUGIN_INIT);
    assert_string_equal(err.plugin, "r1");
    assert_non_null(strstr(err.text, "plugin 'fx-alpha' (row 'r1'): event type 'other/x' is "
                                     "outside its namespace 'fx-alpha/'"));
    err = create_fails(wt_fixture_config("r1", "fx-alpha", json_pack("{s:s}", "event", "llm/retry"), NULL));
    assert_non_null(strstr(err.text, "plugin 'fx-alpha' (row 'r1'): event type 'llm/retry': "
                                     "namespace 'llm' is the core's"));
    err = create_fails(wt_fixture_config("r1", "fx-alpha", json_pack("{s:s}", "event", "flat"), NULL));
    assert_non_null(strstr(err.text, "event type 'flat' is not <namespace>/<name>"));
    /* the core's namespaces cannot be claimed */
    err = create_fails(wt_fixture_config("r1", "fx-alpha", json_pack("{s:s}", "claim", "tool"), NULL));
    assert_non_null(strstr(err.text, "'tool' is a namespace of the core"));
}

/* A claimed namespace: its types load; two plugins claiming one fail with
 * both named; rows of one plugin may share it. */
static void test_event_namespace_claims(void **state) {
    (void)state;
    json_t *cfg = wt_fixture_config("r1", "fx-alpha", json_pack("{s:s, s:s}", "claim", "shared",
                                                                "event", "shared/x"),
                                    "r2", "fx-alpha", json_pack("{s:s, s:s}", "claim", "shared",
                                                                "event", "shared/x"),
                                    NULL);
    weir_host *h = NULL;
    weir_error err;
    weir_error_clear(&err);
    assert_int_equal(weir_host_create(cfg, &h, &err), WEIR_OK);
    assert_true(weir__host_event_type(h, "shared/x", NULL));
    weir_host_destroy(h);
    json_decref(cfg);
    err = create_fails(wt_fixture_config("r1", "fx-alpha", json_pack("{s:s, s:s}", "claim", "shared",
                                                                     "event", "shared/x"),
                                         "r2", "fx-beta", json_pack("{s:s}", "claim", "shared"),
                                         NULL));
    assert_int_equal(err.code, WEIR_E_PLUGIN_CONFIG);
    assert_string_equal(err.text, "event namespace 'shared' is claimed by plugin 'fx-alpha' "
                                  "(row 'r1') and claimed by plugin 'fx-beta' (row 'r2')");
    /* a claim of another plugin's name */
    err = create_fails(wt_fixture_config("r1", "fx-alpha", json_pack("{s:s}", "claim", "fx-beta"),
                                         "r2", "fx-beta", NULL, NULL));
    assert_string_equal(err.text, "event namespace 'fx-beta' is claimed by plugin 'fx-alpha' "
                                  "(row 'r1') and is the name of plugin 'fx-beta' (row 'r2')");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_event_type_registered_as_ignorable, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_event_type_core_name_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_type_bad_name_and_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_type_owned_by_one_plugin, setup, teardown),
        cmocka_unit_test(test_event_type_outside_namespace_fails_load),
        cmocka_unit_test(test_event_namespace_claims),
        cmocka_unit_test_setup_teardown(test_provider_registered_under_row_id, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_provider_duplicate_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_provider_short_struct_copies_known_fields, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_provider_incomplete_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tool_duplicate_name_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_instance_accessors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_line_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_keeps_its_own_config, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_hooks_in_chain_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registration_error_reaches_init_failure, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_freeze_error_fails_deployment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_role_filled_twice_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_role_shared_by_both_rows_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_role_shared_but_not_filled_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_role_declaration_checks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
