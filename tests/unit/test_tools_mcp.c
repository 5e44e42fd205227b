/*
 * tests/unit/test_tools_mcp.c - the tools-mcp plugin through the host and a
 * live agent (tests/support/driver_harness: provider-scripted makes the
 * tool calls, every request is recorded and checked against the log),
 * against the MCP reference servers (@modelcontextprotocol/server-everything
 * and server-filesystem at the version tests/mcp/package-lock.json pins,
 * installed into the build tree by the mcp_servers_install fixture) and
 * against weir-mcp-fake (tests/support/mcp_fake_main.c) for the faults.
 *
 * Every test ends by checking with ps that no server process is left.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver_harness.h"
#include "host_int.h"
#include "testutil.h"
#include "schema.h"
#include "tools.h"

static const char *mods(void) { return wt_env("WEIR_MCP_MODULES"); }
static const char *fake(void) { return wt_env("WEIR_MCP_FAKE"); }

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    assert_true(vasprintf(&s, f, ap) >= 0);
    va_end(ap);
    return s;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Our child processes, as ps lists them (ps itself and its shell left out). */
static char *children(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ps -o pid=,stat=,args= --ppid %d 2>/dev/null", (int)getpid());
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[1024];
    size_t cap = 4096, len = 0;
    char *out = calloc(1, cap);
    while (fgets(line, sizeof line, p)) {
        if (strstr(line, "ps -o pid=") || strstr(line, " ps ") || strstr(line, "sh -c"))
            continue;
        size_t n = strlen(line);
        if (len + n + 1 >= cap)
            out = realloc(out, cap = (len + n + 1) * 2);
        memcpy(out + len, line, n + 1);
        len += n;
    }
    pclose(p);
    return out;
}

static void assert_no_tagged_env(void);

/* No server process of ours is left (a launcher's children included: they are in its group). */
static void assert_no_children(void) {
    assert_no_tagged_env();
    char *c = NULL;
    for (int i = 0; i < 50; i++) { /* a just-killed child may take a moment to be reaped */
        free(c);
        c = children();
        if (!c[0])
            break;
        usleep(20000);
    }
    if (c[0]) {
        fprintf(stderr, "processes left behind:\n%s", c);
        free(c);
        fail();
    }
    free(c);
}

static void assert_no_tag(const char *tag) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ps -eo args= | grep -F -- '--tag %s' | grep -v grep", tag);
    for (int i = 0; i < 50; i++) {
        FILE *p = popen(cmd, "r");
        char line[512];
        bool any = fgets(line, sizeof line, p) != NULL;
        pclose(p);
        if (!any)
            return;
        usleep(20000);
    }
    fail_msg("a process tagged %s is still running", tag);
}

/*
 * Every server a test starts carries WEIR_MCP_TEST_TAG=<this process> in its
 * environment, which its children inherit: after a test no process may
 * have it (a launcher's grandchild reparented to init included).
 */
static const char *env_tag(void) {
    static char tag[64];
    if (!tag[0])
        snprintf(tag, sizeof tag, "WEIR_MCP_TEST_TAG=t%d", (int)getpid());
    return tag;
}

static bool environ_has(const char *pid, const char *tag) {
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    size_t tl = strlen(tag);
    for (size_t i = 0; i + tl <= n; i += strlen(buf + i) + 1)
        if (!strncmp(buf + i, tag, tl) && (buf[i + tl] == '\0'))
            return true;
    return false;
}

static void assert_no_tagged_env(void) {
    char cmd[64];
    snprintf(cmd, sizeof cmd, "ps -eo pid=");
    for (int attempt = 0; attempt < 50; attempt++) {
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char line[64], found[64] = "";
        while (fgets(line, sizeof line, p)) {
            char *pid = line;
            while (*pid == ' ')
                pid++;
            pid[strcspn(pid, "\n")] = '\0';
            if (atoi(pid) != getpid() && environ_has(pid, env_tag()))
                snprintf(found, sizeof found, "%s", pid);
        }
        pclose(p);
        if (!found[0])
            return;
        if (attempt == 49)
            fail_msg("process %s (a server of this test, by its environment) is still running",
                     found);
        usleep(20000);
    }
}

/* The env entry of a server config: the tag, plus `extra` members (or NULL). */
static char *env_json(const char *extra) {
    const char *eq = strchr(env_tag(), '=');
    return fmt("\"env\":{\"%.*s\":\"%s\"%s%s}", (int)(eq - env_tag()), env_tag(), eq + 1,
               extra ? "," : "", extra ? extra : "");
}

/*
 * Host rows: provider-scripted with `replies` (JSON array text) and a
 * tools-mcp row with `config` (JSON object text).
 */
static void setup(dh *d, const char *replies, const char *config) {
    char *rows = fmt("[{\"id\":\"scripted\",\"plugin\":\"provider-scripted\",\"config\":"
                     "{\"replies\":%s}},{\"id\":\"mcp\",\"plugin\":\"tools-mcp\",\"config\":%s}]",
                     replies, config);
    dh_setup(d, rows, NULL);
    free(rows);
}

/* The request `n` the model got (borrowed). */
static const json_t *request(dh *d, int n) {
    const json_t *ev = dh_find(d, "drvtest/request", n);
    if (!ev)
        fail_msg("no request %d", n);
    return json_object_get(json_object_get(ev, "data"), "request");
}

static const json_t *tool_in(const json_t *req, const char *name) {
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(req, "tools"), i, t) {
        if (!strcmp(json_string_value(json_object_get(t, "name")), name))
            return t;
    }
    return NULL;
}

/* The tool/result of call `id` (borrowed data). */
static const json_t *result_of(dh *d, const char *id) {
    for (int i = 0;; i++) {
        const json_t *ev = dh_find(d, "tool/result", i);
        if (!ev)
            fail_msg("no result for call %s", id);
        const json_t *data = json_object_get(ev, "data");
        const json_t *b = json_array_get(json_object_get(json_object_get(data, "message"),
                                                         "content"), 0);
        if (!strcmp(json_string_value(json_object_get(b, "call_id")), id))
            return data;
    }
}

/* The text of the first block of call `id`'s result (borrowed). */
static const char *result_text(dh *d, const char *id) {
    const json_t *b = json_array_get(
        json_object_get(json_object_get(result_of(d, id), "message"), "content"), 0);
    const char *t = json_string_value(
        json_object_get(json_array_get(json_object_get(b, "content"), 0), "text"));
    return t ? t : "";
}

static bool result_is_error(dh *d, const char *id) {
    const json_t *b = json_array_get(
        json_object_get(json_object_get(result_of(d, id), "message"), "content"), 0);
    return json_is_true(json_object_get(b, "is_error"));
}

static const char *result_code(dh *d, const char *id) {
    const char *c = json_string_value(json_object_get(json_object_get(result_of(d, id), "error"),
                                                      "code"));
    return c ? c : "";
}

static void assert_contains(const char *hay, const char *needle) {
    if (!hay || !strstr(hay, needle))
        fail_msg("'%s' is not in:\n%s", needle, hay ? hay : "(null)");
}

static void assert_lacks(const char *hay, const char *needle) {
    if (hay && strstr(hay, needle))
        fail_msg("'%s' should not be in:\n%s", needle, hay);
}

static const char *last_turn_kind(dh *d) {
    const json_t *last = NULL;
    for (int i = 0; dh_find(d, "turn/end", i); i++)
        last = dh_find(d, "turn/end", i);
    return json_string_value(
        json_object_get(json_object_get(json_object_get(last, "data"), "reason"), "kind"));
}

static char *file_text(const char *path) {
    char *t = wt_read_file(path, NULL);
    return t ? t : strdup("");
}

static char *everything_cmd(void) {
    char *env = env_json(NULL);
    char *s = fmt("\"command\":\"node\",\"args\":[\"%s/server-everything/dist/index.js\",\"stdio\"],%s",
                  mods(), env);
    free(env);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Reference servers                                                         */
/* ------------------------------------------------------------------------ */

/*
 * The first request advertises mcp__everything__echo with the server's
 * schema as is, get-sum and mcp__fs__list_directory; an echo round-trips
 * into the next request; list_directory lists a real folder.
 */
static void reference_tools_round_trip(void **state) {
    (void)state;
    char *dir = wt_tmpdir("mcp-fs");
    char *p = fmt("%s/notes.txt", dir);
    assert_int_equal(wt_write_file(p, "hello"), 0);
    free(p);
    p = fmt("%s/sub", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    free(p);
    char *ev = everything_cmd();
    char *fsenv = env_json(NULL);
    char *config = fmt("{\"servers\":{\"everything\":{%s},\"fs\":{\"command\":\"node\","
                       "\"args\":[\"%s/server-filesystem/dist/index.js\",\"%s\"],%s}}}",
                       ev, mods(), dir, fsenv);
    free(fsenv);
    char *replies = fmt(
        "[{\"text\":\"Let me call them.\",\"tool_calls\":["
        "{\"id\":\"c_echo\",\"name\":\"mcp__everything__echo\",\"arguments\":{\"message\":\"hi there\"}},"
        "{\"id\":\"c_sum\",\"name\":\"mcp__everything__get-sum\",\"arguments\":{\"a\":2,\"b\":40}},"
        "{\"id\":\"c_ls\",\"name\":\"mcp__fs__list_directory\",\"arguments\":{\"path\":\"%s\"}}]},"
        "{\"text\":\"Done.\"}]", dir);
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-ref");
    dh_send(&d, "use the tools", WEIR_SEND_FOLLOWUP);
    dh_run(&d);

    const json_t *first = request(&d, 0);
    const json_t *echo = tool_in(first, "mcp__everything__echo");
    assert_non_null(echo);
    json_t *want = json_loads("{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
                              "\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\","
                              "\"description\":\"Message to echo\"}},\"required\":[\"message\"]}",
                              0, NULL);
    assert_true(json_equal(json_object_get(echo, "parameters"), want));
    json_decref(want);
    assert_string_equal(json_string_value(json_object_get(echo, "description")),
                        "Echoes back the input string");
    assert_non_null(tool_in(first, "mcp__everything__get-sum"));
    assert_non_null(tool_in(first, "mcp__fs__list_directory"));
    assert_non_null(tool_in(first, "mcp__fs__read_text_file"));
    /* weir's validator takes every schema the reference servers send: none is a
     * schema error, whatever the value */
    size_t ti;
    const json_t *tl;
    int checked = 0;
    json_array_foreach(json_object_get(first, "tools"), ti, tl) {
        static const char *const values[] = {"{}", "{\"path\":\"/x\",\"a\":1}", "[]", "3"};
        for (size_t k = 0; k < 4; k++) {
            json_t *v = json_loads(values[k], JSON_DECODE_ANY, NULL);
            char msg[512] = "";
            weir__schema_validate(json_object_get(tl, "parameters"), v, msg, sizeof msg);
            assert_lacks(msg, "schema error");
            json_decref(v);
        }
        checked++;
    }
    assert_true(checked >= 25); /* 12 of everything (less the task one) and 14 of fs */
    /* a tool that needs MCP tasks is not offered */
    assert_null(tool_in(first, "mcp__everything__simulate-research-query"));

    assert_string_equal(result_text(&d, "c_echo"), "Echo: hi there");
    assert_string_equal(result_text(&d, "c_sum"), "The sum of 2 and 40 is 42.");
    assert_contains(result_text(&d, "c_ls"), "[FILE] notes.txt");
    assert_contains(result_text(&d, "c_ls"), "[DIR] sub");
    /* the echo is in the next request the model gets */
    char *second = json_dumps(json_object_get(request(&d, 1), "messages"), JSON_COMPACT);
    assert_contains(second, "Echo: hi there");
    free(second);
    assert_string_equal(last_turn_kind(&d), "completed");

    /* readOnlyHint: parallel-safe; anything else exclusive */
    const weir__tools *tools = weir__host_tools(d.host);
    json_t *none = json_object();
    assert_true(weir__tool_parallel_safe(weir__tools_find(tools, "mcp__everything__echo"), none));
    assert_false(weir__tool_parallel_safe(weir__tools_find(tools, "mcp__fs__write_file"), none));
    assert_false(weir__tool_parallel_safe(
        weir__tools_find(tools, "mcp__everything__toggle-simulated-logging"), none));
    json_decref(none);
    dh_teardown(&d);
    assert_no_children();
    wt_rmtree(dir);
    free(dir);
    free(ev);
    free(config);
    free(replies);
}

/*
 * trigger-long-running-operation past timeout_ms: an error result, the turn
 * goes on, and the server was sent notifications/cancelled for the call
 * (seen by a relay in front of it that records its stdin).
 */
static void reference_timeout_cancels(void **state) {
    (void)state;
    char *dir = wt_tmpdir("mcp-tee");
    char *tee = fmt("%s/stdin.jsonl", dir);
    char *env = env_json(NULL);
    char *config = fmt("{\"servers\":{\"everything\":{\"command\":\"%s\",\"args\":[\"--tee\",\"%s\","
                       "\"--\",\"node\",\"%s/server-everything/dist/index.js\",\"stdio\"],"
                       "\"timeout_ms\":1500,%s}}}", fake(), tee, mods(), env);
    free(env);
    const char *replies =
        "[{\"tool_calls\":[{\"id\":\"c_long\",\"name\":\"mcp__everything__trigger-long-running-"
        "operation\",\"arguments\":{\"duration\":30,\"steps\":3}}]},"
        "{\"tool_calls\":[{\"id\":\"c_after\",\"name\":\"mcp__everything__echo\","
        "\"arguments\":{\"message\":\"still here\"}}]},"
        "{\"text\":\"The operation timed out, the rest worked.\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-timeout");
    dh_send(&d, "run the long one", WEIR_SEND_FOLLOWUP);
    long long t0 = now_ms();
    dh_run(&d);
    long long took = now_ms() - t0;
    assert_true(result_is_error(&d, "c_long"));
    assert_string_equal(result_code(&d, "c_long"), "TIMEOUT");
    assert_contains(result_text(&d, "c_long"), "timed out after 1.5 s");
    assert_contains(result_text(&d, "c_long"), "MCP server 'everything'");
    assert_string_equal(result_text(&d, "c_after"), "Echo: still here");
    assert_string_equal(last_turn_kind(&d), "completed");
    assert_true(took < 15000);
    dh_teardown(&d);
    assert_no_children();

    /* what the server was sent: the call's id, then a cancel for it */
    char *sent = file_text(tee);
    json_t *call_id = NULL;
    bool cancelled = false;
    char *line = strtok(sent, "\n");
    for (; line; line = strtok(NULL, "\n")) {
        json_t *m = json_loads(line, 0, NULL);
        const char *method = json_string_value(json_object_get(m, "method"));
        json_t *params = json_object_get(m, "params");
        if (method && !strcmp(method, "tools/call") &&
            !strcmp(json_string_value(json_object_get(params, "name")),
                    "trigger-long-running-operation"))
            call_id = json_incref(json_object_get(m, "id"));
        if (method && !strcmp(method, "notifications/cancelled") && call_id &&
            json_equal(json_object_get(params, "requestId"), call_id))
            cancelled = true;
        json_decref(m);
    }
    assert_non_null(call_id);
    assert_true(cancelled);
    json_decref(call_id);
    free(sent);
    wt_rmtree(dir);
    free(dir);
    free(tee);
    free(config);
}

/* The live tool/progress events of a call (borrowed events, in order). */
static int progress_events(dh *d, const char *call_id, const json_t **out, int max) {
    int n = 0;
    size_t i;
    const json_t *ev;
    json_array_foreach(d->events, i, ev) {
        if (strcmp(json_string_value(json_object_get(ev, "type")), "tool/progress") != 0)
            continue;
        assert_null(json_object_get(ev, "seq")); /* live, never logged */
        const json_t *data = json_object_get(ev, "data");
        if (strcmp(json_string_value(json_object_get(data, "call_id")), call_id) == 0 && n < max)
            out[n++] = data;
    }
    return n;
}

/* notifications/progress of trigger-long-running-operation arrive as live events. */
static void reference_progress_is_live(void **state) {
    (void)state;
    char *ev = everything_cmd();
    char *config = fmt("{\"servers\":{\"everything\":{%s}}}", ev);
    const char *replies =
        "[{\"tool_calls\":[{\"id\":\"c_long\",\"name\":\"mcp__everything__trigger-long-running-"
        "operation\",\"arguments\":{\"duration\":1,\"steps\":4}}]},{\"text\":\"ok\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-progress");
    dh_send(&d, "run it", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_false(result_is_error(&d, "c_long"));
    assert_contains(result_text(&d, "c_long"), "Long running operation completed");
    const json_t *p[8];
    int n = progress_events(&d, "c_long", p, 8);
    assert_int_equal(n, 4);
    for (int i = 0; i < n; i++) {
        assert_string_equal(json_string_value(json_object_get(p[i], "name")),
                            "mcp__everything__trigger-long-running-operation");
        const json_t *pr = json_object_get(p[i], "progress");
        assert_int_equal(json_integer_value(json_object_get(pr, "progress")), i + 1);
        assert_int_equal(json_integer_value(json_object_get(pr, "total")), 4);
        assert_string_equal(json_string_value(json_object_get(pr, "server")), "everything");
        assert_int_equal(json_integer_value(json_object_get(p[i], "turn")), 1);
    }
    /* the progress events come before the call's result */
    size_t i, at_progress = 0, at_result = 0;
    const json_t *e;
    json_array_foreach(d.events, i, e) {
        const char *t = json_string_value(json_object_get(e, "type"));
        if (!strcmp(t, "tool/progress") && !at_progress)
            at_progress = i + 1;
        if (!strcmp(t, "tool/result") && !at_result)
            at_result = i + 1;
    }
    assert_true(at_progress && at_progress < at_result);
    char *log = file_text(dh_log(&d));
    assert_lacks(log, "tool/progress");
    free(log);
    dh_teardown(&d);
    assert_no_children();
    free(ev);
    free(config);
}

/* A secret in env never reaches the session log or an event (get-env dumps the environment). */
static void reference_secrets_stay_out(void **state) {
    (void)state;
    char *env = env_json("\"MCP_TEST_TOKEN\":\"tok-3f9a-very-secret-77\",\"SHORT\":\"pw1\","
                         "\"MCP_TEST_DIR\":\"/srv/plain-dir\"");
    char *ev = fmt("\"command\":\"node\",\"args\":[\"%s/server-everything/dist/index.js\","
                   "\"stdio\"],%s,\"secret_env\":[\"SHORT\"]", mods(), env);
    free(env);
    char *config = fmt("{\"servers\":{\"everything\":{%s}}}", ev);
    const char *replies =
        "[{\"tool_calls\":[{\"id\":\"c_env\",\"name\":\"mcp__everything__get-env\","
        "\"arguments\":{}}]},{\"text\":\"ok\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-secret");
    dh_send(&d, "show the env", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const char *text = result_text(&d, "c_env");
    assert_contains(text, "MCP_TEST_TOKEN");
    assert_contains(text, "[redacted]");
    assert_lacks(text, "tok-3f9a-very-secret-77");
    assert_lacks(text, "pw1");
    /* an ordinary value is not a secret: it comes through as it is */
    assert_contains(text, "/srv/plain-dir");
    char *log = file_text(dh_log(&d));
    assert_lacks(log, "tok-3f9a-very-secret-77");
    assert_lacks(log, "\"pw1\"");
    char *events = json_dumps(d.events, JSON_COMPACT);
    assert_lacks(events, "tok-3f9a-very-secret-77");
    free(events);
    free(log);
    /* weir's own environment is not passed on: only the names the MCP SDK passes */
    assert_lacks(text, "WEIR_TEST_DATA_DIR");
    dh_teardown(&d);
    assert_no_children();
    free(ev);
    free(config);
}

/* ------------------------------------------------------------------------ */
/* The fake server                                                           */
/* ------------------------------------------------------------------------ */

static char *fake_server(const char *name, const char *log, const char *extra_args,
                         const char *extra_keys) {
    char *env = env_json(NULL);
    char *s = fmt("\"%s\":{\"command\":\"%s\",\"args\":[\"--log\",\"%s\"%s%s],%s%s%s}", name,
                  fake(), log, extra_args ? "," : "", extra_args ? extra_args : "", env,
                  extra_keys ? "," : "", extra_keys ? extra_keys : "");
    free(env);
    return s;
}

typedef struct fx {
    char *dir, *log;
} fx;

static void fx_init(fx *f) {
    f->dir = wt_tmpdir("mcp-fake");
    f->log = fmt("%s/fake.jsonl", f->dir);
}

static void fx_done(fx *f) {
    wt_rmtree(f->dir);
    free(f->dir);
    free(f->log);
}

/* Every fault of the fake in one turn, then a check of what it was sent. */
static void fake_faults_and_results(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *srv = fake_server("fake", f.log, NULL, NULL);
    char *config = fmt("{\"servers\":{%s}}", srv);
    const char *replies =
        "[{\"tool_calls\":["
        "{\"id\":\"c_crash\",\"name\":\"mcp__fake__crash\",\"arguments\":{}},"
        "{\"id\":\"c_echo\",\"name\":\"mcp__fake__echo\",\"arguments\":{\"text\":\"after the crash\"}},"
        "{\"id\":\"c_garbage\",\"name\":\"mcp__fake__garbage\",\"arguments\":{}},"
        "{\"id\":\"c_big\",\"name\":\"mcp__fake__big\",\"arguments\":{\"bytes\":10485760}},"
        "{\"id\":\"c_rpc\",\"name\":\"mcp__fake__rpc_error\",\"arguments\":{}},"
        "{\"id\":\"c_sampling\",\"name\":\"mcp__fake__ask\",\"arguments\":{\"method\":\"sampling/createMessage\"}},"
        "{\"id\":\"c_roots\",\"name\":\"mcp__fake__ask\",\"arguments\":{\"method\":\"roots/list\"}},"
        "{\"id\":\"c_elicit\",\"name\":\"mcp__fake__ask\",\"arguments\":{\"method\":\"elicitation/create\"}},"
        "{\"id\":\"c_ping\",\"name\":\"mcp__fake__ask\",\"arguments\":{\"method\":\"ping\"}},"
        "{\"id\":\"c_mixed\",\"name\":\"mcp__fake__mixed\",\"arguments\":{}},"
        "{\"id\":\"c_struct\",\"name\":\"mcp__fake__structured\",\"arguments\":{}},"
        "{\"id\":\"c_fails\",\"name\":\"mcp__fake__fails\",\"arguments\":{}},"
        "{\"id\":\"c_log\",\"name\":\"mcp__fake__log\",\"arguments\":{}},"
        "{\"id\":\"c_meta\",\"name\":\"mcp__fake__meta\",\"arguments\":{}}]},"
        "{\"text\":\"All done.\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-faults");
    dh_send(&d, "break things", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    const json_t *first = request(&d, 0);
    /* names that cannot fit are refused; both pages of tools/list are there */
    assert_null(tool_in(first, "mcp__fake__bad.name"));
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(first, "tools"), i, t)
        assert_true(strlen(json_string_value(json_object_get(t, "name"))) <= 64);
    assert_non_null(tool_in(first, "mcp__fake__echo"));
    assert_non_null(tool_in(first, "mcp__fake__meta"));

    /* a crash mid-call: an error result naming the server; the next call restarts it */
    assert_true(result_is_error(&d, "c_crash"));
    assert_string_equal(result_code(&d, "c_crash"), "MCP_SERVER_EXITED");
    assert_contains(result_text(&d, "c_crash"), "MCP server 'fake'");
    assert_contains(result_text(&d, "c_crash"), "exit status 3");
    assert_contains(result_text(&d, "c_crash"), "fake: crashing");
    assert_string_equal(result_text(&d, "c_echo"), "echo: after the crash");
    /* garbage on stdout is skipped */
    assert_string_equal(result_text(&d, "c_garbage"), "ok");
    /* a 10 MB result is cut to max_result_bytes (1 MiB) */
    const json_t *big = json_object_get(
        json_array_get(json_object_get(json_object_get(result_of(&d, "c_big"), "message"),
                                       "content"), 0), "content");
    assert_int_equal(json_string_length(json_object_get(json_array_get(big, 0), "text")),
                     1048576);
    assert_contains(json_string_value(json_object_get(json_array_get(big, 1), "text")),
                    "the result was cut: 10485760 bytes");
    /* a JSON-RPC error names the server */
    assert_true(result_is_error(&d, "c_rpc"));
    assert_string_equal(result_code(&d, "c_rpc"), "MCP_ERROR");
    assert_contains(result_text(&d, "c_rpc"), "MCP server 'fake'");
    assert_contains(result_text(&d, "c_rpc"), "the fake refuses (JSON-RPC error -32000)");
    /* requests weir does not support: -32601 Method not found; ping: {} */
    const char *ids[] = {"c_sampling", "c_roots", "c_elicit"};
    for (size_t k = 0; k < 3; k++) {
        assert_contains(result_text(&d, ids[k]), "\"code\":-32601");
        assert_contains(result_text(&d, ids[k]), "\"message\":\"Method not found\"");
    }
    assert_contains(result_text(&d, "c_ping"), "\"result\":{}");
    /* result mapping */
    char *mixed = json_dumps(json_object_get(json_array_get(
                                 json_object_get(json_object_get(result_of(&d, "c_mixed"),
                                                                 "message"), "content"), 0),
                                 "content"), JSON_COMPACT);
    assert_contains(mixed, "{\"type\":\"text\",\"text\":\"first\"}");
    assert_contains(mixed, "{\"type\":\"image\",\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}");
    assert_contains(mixed, "Resource link: file:///srv/a.txt (name: a.txt; mimeType: text/plain)");
    assert_contains(mixed, "Resource demo://r/1 (text/plain):\\nresource text");
    assert_contains(mixed, "Resource demo://r/2: binary content (4 bytes of base64) not shown");
    assert_contains(mixed, "[audio content (audio/wav, 5 bytes of base64) not shown]");
    assert_contains(mixed, "hologram");
    free(mixed);
    assert_string_equal(result_text(&d, "c_struct"), "{\"temperature\":21,\"conditions\":\"sunny\"}");
    assert_true(result_is_error(&d, "c_fails"));
    assert_string_equal(result_text(&d, "c_fails"), "the tool failed");
    assert_string_equal(result_text(&d, "c_log"), "logged");
    /* the idempotency key goes in params._meta */
    char *want = fmt("\"weir/attempt\":1,\"weir/idempotency_key\":\"mcp-faults:1:1:c_meta\"");
    assert_contains(result_text(&d, "c_meta"), want);
    assert_contains(result_text(&d, "c_meta"), "\"progressToken\":");
    free(want);
    assert_string_equal(last_turn_kind(&d), "completed");
    dh_teardown(&d);
    assert_no_children();

    /* the fake saw initialize twice (the restart) and notifications/initialized each time */
    char *sent = file_text(f.log);
    int inits = 0, initialized = 0;
    for (const char *s = sent; (s = strstr(s, "\"method\":\"initialize\"")); s++)
        inits++;
    for (const char *s = sent; (s = strstr(s, "notifications/initialized")); s++)
        initialized++;
    assert_int_equal(inits, 2);
    assert_int_equal(initialized, 2);
    assert_contains(sent, "\"protocolVersion\":\"2025-11-25\"");
    assert_contains(sent, "\"capabilities\":{}");
    free(sent);
    free(srv);
    free(config);
    fx_done(&f);
}

/* Cancel the turn from another thread once the fake has received the call. */
typedef struct canceller {
    dh *d;
    const char *log;
    pthread_t th;
} canceller;

static void *cancel_main(void *arg) {
    canceller *c = arg;
    for (int i = 0; i < 1000; i++) {
        char *t = wt_read_file(c->log, NULL);
        bool seen = t && strstr(t, "\"name\":\"sleep\"");
        free(t);
        if (seen)
            break;
        usleep(10000);
    }
    usleep(100000);
    weir_agent_cancel(c->d->agent, "user", false);
    return NULL;
}

/* Turn cancellation: an aborted result at once, and notifications/cancelled for the call. */
static void fake_cancel_sends_cancelled(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *srv = fake_server("fake", f.log, NULL, NULL);
    char *config = fmt("{\"servers\":{%s}}", srv);
    const char *replies =
        "[{\"tool_calls\":[{\"id\":\"c_sleep\",\"name\":\"mcp__fake__sleep\","
        "\"arguments\":{\"ms\":20000}}]},{\"text\":\"unreachable\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-cancel");
    dh_send(&d, "sleep", WEIR_SEND_FOLLOWUP);
    canceller c = {&d, f.log, 0};
    assert_int_equal(pthread_create(&c.th, NULL, cancel_main, &c), 0);
    long long t0 = now_ms();
    dh_run(&d);
    long long took = now_ms() - t0;
    pthread_join(c.th, NULL);
    assert_true(took < 5000);
    assert_true(result_is_error(&d, "c_sleep"));
    assert_string_equal(result_code(&d, "c_sleep"), "ABORTED");
    assert_contains(result_text(&d, "c_sleep"), "cancelled");
    assert_string_equal(last_turn_kind(&d), "aborted");
    dh_teardown(&d);
    assert_no_children();
    char *sent = file_text(f.log);
    assert_contains(sent, "\"method\":\"notifications/cancelled\"");
    assert_contains(sent, "\"reason\":\"cancelled by the user\"");
    free(sent);
    free(srv);
    free(config);
    fx_done(&f);
}

static void fake_timeout(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *srv = fake_server("fake", f.log, NULL, "\"timeout_ms\":300");
    char *config = fmt("{\"servers\":{%s}}", srv);
    const char *replies =
        "[{\"tool_calls\":[{\"id\":\"c_sleep\",\"name\":\"mcp__fake__sleep\","
        "\"arguments\":{\"ms\":5000}},{\"id\":\"c_echo\",\"name\":\"mcp__fake__echo\","
        "\"arguments\":{\"text\":\"next\"}}]},{\"text\":\"ok\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-timeout-fake");
    dh_send(&d, "sleep", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(result_code(&d, "c_sleep"), "TIMEOUT");
    assert_contains(result_text(&d, "c_sleep"), "MCP server 'fake': tool 'sleep' timed out after 0.3 s");
    assert_string_equal(result_text(&d, "c_echo"), "echo: next");
    assert_string_equal(last_turn_kind(&d), "completed");
    dh_teardown(&d);
    assert_no_children();
    char *sent = file_text(f.log);
    assert_contains(sent, "\"reason\":\"timed out\"");
    free(sent);
    free(srv);
    free(config);
    fx_done(&f);
}

/* A list_changed storm: nothing hangs, the list is read again once, between turns. */
static void fake_list_changed_storm(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *srv = fake_server("fake", f.log, NULL, NULL);
    char *config = fmt("{\"servers\":{%s}}", srv);
    const char *replies =
        "[{\"tool_calls\":[{\"id\":\"c_storm\",\"name\":\"mcp__fake__storm\","
        "\"arguments\":{\"count\":5000}},{\"id\":\"c_echo\",\"name\":\"mcp__fake__echo\","
        "\"arguments\":{\"text\":\"calm\"}}]},{\"text\":\"first turn done\"},"
        "{\"text\":\"second turn\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-storm");
    dh_send(&d, "storm", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(result_text(&d, "c_storm"), "stormed");
    assert_string_equal(result_text(&d, "c_echo"), "echo: calm");
    /* the storm is not applied within the turn: the second request has the same tools */
    assert_true(json_equal(json_object_get(request(&d, 0), "tools"),
                           json_object_get(request(&d, 1), "tools")));
    assert_null(tool_in(request(&d, 1), "mcp__fake__added"));
    dh_send(&d, "again", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(last_turn_kind(&d), "completed");
    /* the next turn has the new list: the tool the storm added is offered */
    assert_non_null(tool_in(request(&d, 2), "mcp__fake__added"));
    assert_non_null(tool_in(request(&d, 2), "mcp__fake__echo"));
    dh_teardown(&d);
    assert_no_children();
    char *sent = file_text(f.log);
    int lists = 0;
    for (const char *s = sent; (s = strstr(s, "\"method\":\"tools/list\"")); s++)
        lists++;
    assert_int_equal(lists, 4); /* two pages at load, two once for the whole storm */
    free(sent);
    free(srv);
    free(config);
    fx_done(&f);
}

/*
 * A launcher (npx is one) leaves processes of its own: a child the server
 * started in the background outlives the server's exit on stdin EOF, and is
 * stopped with the server's process group.
 */
static void fake_launcher_children_are_stopped(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *env = env_json(NULL);
    char *config = fmt("{\"servers\":{\"fake\":{\"command\":\"sh\",\"args\":[\"-c\","
                       "\"sleep 300 & exec %s --log %s\"],%s}}}", fake(), f.log, env);
    free(env);
    const char *replies =
        "[{\"tool_calls\":[{\"id\":\"c_echo\",\"name\":\"mcp__fake__echo\","
        "\"arguments\":{\"text\":\"via a launcher\"}}]},{\"text\":\"ok\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-launcher");
    dh_send(&d, "go", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(result_text(&d, "c_echo"), "echo: via a launcher");
    long long t0 = now_ms();
    dh_teardown(&d);
    assert_true(now_ms() - t0 < 10000);
    assert_no_children(); /* the sleep too: it has the tag */
    free(config);
    fx_done(&f);
}

/* ------------------------------------------------------------------------ */
/* Load errors                                                               */
/* ------------------------------------------------------------------------ */

/* weir_host_create with a tools-mcp row; returns the status, err filled. */
static int load(const char *config, weir_host **host, weir_error *err) {
    char *text = fmt("{\"plugin_path\":[\"%s\"],\"plugins\":[{\"id\":\"mcp\",\"plugin\":"
                     "\"tools-mcp\",\"config\":%s}]}", wt_env("WEIR_TEST_PLUGIN_DIR"), config);
    json_error_t je;
    json_t *c = json_loads(text, 0, &je);
    if (!c)
        fail_msg("bad config %s: %s", text, je.text);
    free(text);
    weir_error_clear(err);
    *host = NULL;
    int rc = weir_host_create(c, host, err);
    json_decref(c);
    return rc;
}

static void load_fails_with(const char *config, const char *want) {
    weir_host *h;
    weir_error err;
    int rc = load(config, &h, &err);
    if (rc == WEIR_OK) {
        weir_host_destroy(h);
        fail_msg("loaded: %s", config);
    }
    assert_contains(err.text, want);
}

static void load_never_answers_initialize(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *srv = fake_server("slow", f.log, "\"--no-init\",\"--tag\",\"mcp-noinit\"",
                            "\"startup_timeout_ms\":500");
    char *config = fmt("{\"servers\":{%s}}", srv);
    long long t0 = now_ms();
    load_fails_with(config, "MCP server 'slow' failed to start: it did not answer initialize "
                            "within 500 ms (startup_timeout_ms)");
    assert_true(now_ms() - t0 < 8000);
    assert_no_children();
    assert_no_tag("mcp-noinit");
    free(srv);
    free(config);
    /* not required: a warning, its tools are absent, the rest loads */
    srv = fake_server("slow", f.log, "\"--no-init\",\"--tag\",\"mcp-noinit\"",
                      "\"startup_timeout_ms\":300,\"required\":false");
    char *other = fake_server("ok", f.log, NULL, NULL);
    config = fmt("{\"servers\":{%s,%s}}", srv, other);
    weir_host *h;
    weir_error err;
    assert_int_equal(load(config, &h, &err), WEIR_OK);
    assert_null(weir__tools_find(weir__host_tools(h), "mcp__slow__echo"));
    assert_non_null(weir__tools_find(weir__host_tools(h), "mcp__ok__echo"));
    weir_host_destroy(h);
    assert_no_children();
    assert_no_tag("mcp-noinit");
    free(srv);
    free(other);
    free(config);
    fx_done(&f);
}

static void load_server_exits_at_start(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *srv = fake_server("broken", f.log,
                            "\"--exit-at-start\",\"3\",\"--stderr\",\"fatal: no database at /nowhere\"",
                            NULL);
    char *config = fmt("{\"servers\":{%s}}", srv);
    load_fails_with(config, "MCP server 'broken' failed to start: initialize failed: it exited "
                            "(exit status 3)");
    load_fails_with(config, "fatal: no database at /nowhere");
    assert_no_children();
    free(srv);
    free(config);
    /* a command that does not exist */
    load_fails_with("{\"servers\":{\"gone\":{\"command\":\"weir-no-such-mcp-server\"}}}",
                    "MCP server 'gone' failed to start: cannot run 'weir-no-such-mcp-server': "
                    "not found on PATH");
    load_fails_with("{\"servers\":{\"gone\":{\"command\":\"/bin/true\",\"cwd\":\"/no/such/dir\"}}}",
                    "working directory '/no/such/dir'");
    /* a server answering a protocol version weir does not speak */
    srv = fake_server("old", f.log, "\"--version\",\"1999-01-01\"", NULL);
    config = fmt("{\"servers\":{%s}}", srv);
    load_fails_with(config, "it answered protocol version '1999-01-01', which weir does not speak");
    assert_no_children();
    free(srv);
    free(config);
    fx_done(&f);
}

static void config_errors(void **state) {
    (void)state;
    load_fails_with("{\"servers\":{\"a\":{\"command\":\"x\",\"colour\":\"red\"}}}",
                    "$.servers.a.colour: property is not allowed");
    load_fails_with("{\"servers\":{}, \"extra\":1}", "$.extra: property is not allowed");
    load_fails_with("{\"servers\":{\"a\":{\"command\":\"x\",\"url\":\"http://127.0.0.1:1/\"}}}",
                    "server 'a': give either \"command\" (stdio) or \"url\" (HTTP), not both");
    load_fails_with("{\"servers\":{\"a\":{\"timeout_ms\":5}}}",
                    "server 'a': give \"command\" (stdio) or \"url\" (HTTP)");
    load_fails_with("{\"servers\":{\"a.b\":{\"command\":\"x\"}}}",
                    "server name 'a.b' must be 1 to 32 of [A-Za-z0-9_-]");
    load_fails_with("{\"servers\":{\"a\":{\"url\":\"ftp://x/\"}}}",
                    "is not an http:// or https:// URL");
    load_fails_with("{\"servers\":{\"a\":{\"url\":\"http://127.0.0.1:1/\",\"env\":{}}}}",
                    "\"env\" is for a stdio server");
    load_fails_with("{\"mcp_config\":\"/no/such/.mcp.json\"}", "mcp_config /no/such/.mcp.json");
}

/* .mcp.json as Claude Code writes it, with ${VAR}, plus options from `servers`. */
static void mcp_json_import(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    setenv("MCP_TEST_FAKE_BIN", fake(), 1);
    char *path = fmt("%s/.mcp.json", f.dir);
    char *text = fmt("{\"mcpServers\":{"
                     "\"fake\":{\"type\":\"stdio\",\"command\":\"${MCP_TEST_FAKE_BIN}\","
                     "\"args\":[\"--log\",\"%s\"],\"env\":{\"X\":\"${MCP_TEST_UNSET:-dflt}\"},"
                     "\"timeout\":600000,\"alwaysLoad\":true},"
                     "\"old\":{\"type\":\"sse\",\"url\":\"http://127.0.0.1:9/sse\"}}}", f.log);
    assert_int_equal(wt_write_file(path, text), 0);
    char *config = fmt("{\"mcp_config\":\"%s\",\"servers\":{\"fake\":{\"allow\":[\"echo\","
                       "\"mcp__fake__env\"]}}}", path);
    weir_host *h;
    weir_error err;
    if (load(config, &h, &err) != WEIR_OK)
        fail_msg("%s", err.text);
    const weir__tools *tools = weir__host_tools(h);
    assert_non_null(weir__tools_find(tools, "mcp__fake__echo"));
    assert_non_null(weir__tools_find(tools, "mcp__fake__env"));
    assert_null(weir__tools_find(tools, "mcp__fake__crash")); /* not allowed */
    assert_null(weir__tools_find(tools, "mcp__old__echo"));   /* sse: not started */
    /* the env value came through ${VAR:-default} */
    weir__tool_outcome o = {0};
    json_t *args = json_pack("{s:s}", "name", "X");
    assert_int_equal(weir__tool_invoke(weir__tools_find(tools, "mcp__fake__env"), "c1", NULL,
                                       args, &o), WEIR_OK);
    json_decref(args);
    /* X is not a secret (not its name, nor secret_env): its value comes through */
    assert_string_equal(json_string_value(json_object_get(json_array_get(o.content, 0), "text")),
                        "value: dflt");
    weir__tool_outcome_clear(&o);
    weir_host_destroy(h);
    assert_no_children();
    free(config);
    /* background: the server's tools are background tools */
    config = fmt("{\"mcp_config\":\"%s\",\"servers\":{\"fake\":{\"background\":true}}}", path);
    assert_int_equal(load(config, &h, &err), WEIR_OK);
    assert_true(weir__tools_find(weir__host_tools(h), "mcp__fake__sleep")->flags &
                WEIR_TOOL_BACKGROUND);
    weir_host_destroy(h);
    assert_no_children();
    free(config);
    /* deny */
    config = fmt("{\"mcp_config\":\"%s\",\"servers\":{\"fake\":{\"deny\":[\"crash\"]}}}", path);
    assert_int_equal(load(config, &h, &err), WEIR_OK);
    assert_null(weir__tools_find(weir__host_tools(h), "mcp__fake__crash"));
    assert_non_null(weir__tools_find(weir__host_tools(h), "mcp__fake__sleep"));
    weir_host_destroy(h);
    assert_no_children();
    free(config);
    free(text);
    free(path);
    fx_done(&f);
}

/* ------------------------------------------------------------------------ */
/* Streamable HTTP                                                           */
/* ------------------------------------------------------------------------ */

typedef struct http_fake {
    pid_t pid;
    int port;
} http_fake;

static void http_fake_start(http_fake *hf, const fx *f) {
    char *portf = fmt("%s/port", f->dir);
    hf->pid = fork();
    if (hf->pid == 0) {
        execl(fake(), fake(), "--http", portf, "--log", f->log, (char *)NULL);
        _exit(127);
    }
    hf->port = 0;
    for (int i = 0; i < 500 && !hf->port; i++) {
        char *t = wt_read_file(portf, NULL);
        if (t)
            hf->port = atoi(t);
        free(t);
        if (!hf->port)
            usleep(10000);
    }
    assert_true(hf->port > 0);
    free(portf);
}

static void http_fake_stop(http_fake *hf) {
    kill(hf->pid, SIGTERM);
    waitpid(hf->pid, NULL, 0);
}

static void http_fake_session(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    http_fake hf;
    http_fake_start(&hf, &f);
    char *config = fmt("{\"servers\":{\"web\":{\"url\":\"http://127.0.0.1:%d/mcp\","
                       "\"headers\":{\"Authorization\":\"Bearer tok-http-secret-4242\"}}}}",
                       hf.port);
    const char *replies =
        "[{\"tool_calls\":["
        "{\"id\":\"c_echo\",\"name\":\"mcp__web__echo\",\"arguments\":{\"text\":\"over http\"}},"
        "{\"id\":\"c_progress\",\"name\":\"mcp__web__progress\",\"arguments\":{\"steps\":3}},"
        "{\"id\":\"c_ask\",\"name\":\"mcp__web__ask\",\"arguments\":{\"method\":\"sampling/createMessage\"}},"
        "{\"id\":\"c_expire\",\"name\":\"mcp__web__expire\",\"arguments\":{}},"
        "{\"id\":\"c_after\",\"name\":\"mcp__web__echo\",\"arguments\":{\"text\":\"new session\"}},"
        "{\"id\":\"c_rpc\",\"name\":\"mcp__web__rpc_error\",\"arguments\":{}}]},"
        "{\"text\":\"ok\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-http");
    dh_send(&d, "use the web server", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(result_text(&d, "c_echo"), "echo: over http");
    assert_string_equal(result_text(&d, "c_progress"), "done");
    const json_t *pe[4];
    assert_int_equal(progress_events(&d, "c_progress", pe, 4), 3);
    assert_string_equal(json_string_value(json_object_get(json_object_get(pe[2], "progress"),
                                                          "message")), "step 3");
    assert_contains(result_text(&d, "c_ask"), "\"code\":-32601");
    assert_string_equal(result_text(&d, "c_expire"), "expired");
    assert_string_equal(result_text(&d, "c_after"), "echo: new session");
    assert_contains(result_text(&d, "c_rpc"), "the fake refuses");
    char *log = file_text(dh_log(&d));
    assert_lacks(log, "tok-http-secret-4242");
    free(log);
    char *events = json_dumps(d.events, JSON_COMPACT);
    assert_lacks(events, "tok-http-secret-4242");
    free(events);
    dh_teardown(&d);
    http_fake_stop(&hf);
    char *sent = file_text(f.log);
    int inits = 0;
    for (const char *s = sent; (s = strstr(s, "\"method\":\"initialize\"")); s++)
        inits++;
    if (inits != 2) /* show what the fake was sent, to tell why */
        fprintf(stderr, "the fake was sent:\n%s\n", sent);
    assert_int_equal(inits, 2); /* the session expired once */
    free(sent);
    free(config);
    fx_done(&f);
}

/* Parallel calls (echo is read-only) all sent in a session that just
 * ended: each gets 404, and the session is initialized again once, not by
 * each of them in turn (a stale 404 must not end the session another call
 * just began: on a server that keeps one session, they would end each
 * other's and fail). */
static void http_session_ends_under_parallel_calls(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    http_fake hf;
    http_fake_start(&hf, &f);
    char *config = fmt("{\"servers\":{\"web\":{\"url\":\"http://127.0.0.1:%d/mcp\"}}}", hf.port);
    const char *replies =
        "[{\"tool_calls\":[{\"id\":\"c_expire\",\"name\":\"mcp__web__expire\",\"arguments\":{}}]},"
        "{\"tool_calls\":["
        "{\"id\":\"c1\",\"name\":\"mcp__web__echo\",\"arguments\":{\"text\":\"1\"}},"
        "{\"id\":\"c2\",\"name\":\"mcp__web__echo\",\"arguments\":{\"text\":\"2\"}},"
        "{\"id\":\"c3\",\"name\":\"mcp__web__echo\",\"arguments\":{\"text\":\"3\"}},"
        "{\"id\":\"c4\",\"name\":\"mcp__web__echo\",\"arguments\":{\"text\":\"4\"}}]},"
        "{\"text\":\"ok\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-http-parallel");
    dh_send(&d, "echo four times", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_string_equal(result_text(&d, "c_expire"), "expired");
    assert_string_equal(result_text(&d, "c1"), "echo: 1");
    assert_string_equal(result_text(&d, "c2"), "echo: 2");
    assert_string_equal(result_text(&d, "c3"), "echo: 3");
    assert_string_equal(result_text(&d, "c4"), "echo: 4");
    dh_teardown(&d);
    http_fake_stop(&hf);
    char *sent = file_text(f.log);
    int inits = 0;
    for (const char *s = sent; (s = strstr(s, "\"method\":\"initialize\"")); s++)
        inits++;
    assert_int_equal(inits, 2); /* once at the start, once after the end */
    free(sent);
    free(config);
    fx_done(&f);
}

/* A free loopback port (bound, then released). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static bool port_open(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* server-everything over Streamable HTTP: SSE answers, a session, progress. */
static void reference_http(void **state) {
    (void)state;
    int port = free_port();
    pid_t pid = fork();
    if (pid == 0) {
        char env_port[32];
        snprintf(env_port, sizeof env_port, "%d", port);
        setenv("PORT", env_port, 1);
        char *script = fmt("%s/server-everything/dist/index.js", mods());
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execlp("node", "node", script, "streamableHttp", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000 && !port_open(port); i++)
        usleep(10000);
    assert_true(port_open(port));
    char *config = fmt("{\"servers\":{\"everything\":{\"type\":\"http\",\"url\":"
                       "\"http://127.0.0.1:%d/mcp\"}}}", port);
    const char *replies =
        "[{\"tool_calls\":["
        "{\"id\":\"c_echo\",\"name\":\"mcp__everything__echo\",\"arguments\":{\"message\":\"over http\"}},"
        "{\"id\":\"c_sum\",\"name\":\"mcp__everything__get-sum\",\"arguments\":{\"a\":1,\"b\":2}},"
        "{\"id\":\"c_long\",\"name\":\"mcp__everything__trigger-long-running-operation\","
        "\"arguments\":{\"duration\":1,\"steps\":2}}]},{\"text\":\"ok\"}]";
    dh d;
    setup(&d, replies, config);
    dh_open(&d, "mcp-ref-http");
    dh_send(&d, "over http", WEIR_SEND_FOLLOWUP);
    dh_run(&d);
    assert_non_null(tool_in(request(&d, 0), "mcp__everything__echo"));
    assert_string_equal(result_text(&d, "c_echo"), "Echo: over http");
    assert_string_equal(result_text(&d, "c_sum"), "The sum of 1 and 2 is 3.");
    assert_contains(result_text(&d, "c_long"), "Long running operation completed");
    const json_t *pe[4];
    assert_int_equal(progress_events(&d, "c_long", pe, 4), 2);
    assert_string_equal(last_turn_kind(&d), "completed");
    dh_teardown(&d);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    assert_no_children();
    free(config);
}

/* Call `name` of a loaded host's tool with `args` (JSON text); its first text (malloc'd). */
static char *invoke_text(weir_host *h, const char *name, const char *args) {
    const weir__tool_def *t = weir__tools_find(weir__host_tools(h), name);
    if (!t)
        fail_msg("no tool %s", name);
    weir__tool_outcome o = {0};
    json_t *a = json_loads(args, 0, NULL);
    assert_non_null(a);
    assert_int_equal(weir__tool_invoke(t, "c1", NULL, a, &o), WEIR_OK);
    json_decref(a);
    const char *text =
        json_string_value(json_object_get(json_array_get(o.content, 0), "text"));
    char *copy = strdup(text ? text : "(no text)");
    weir__tool_outcome_clear(&o);
    return copy;
}

static void assert_invoke(weir_host *h, const char *name, const char *args, const char *want) {
    char *got = invoke_text(h, name, args);
    if (strcmp(got, want) != 0)
        fail_msg("%s %s: '%s', want '%s'", name, args, got, want);
    free(got);
}

/*
 * Only secrets are scrubbed (issue #31, 2): env values whose names look
 * secret (TOKEN, KEY, SECRET, PASSWORD, CREDENTIAL) or that secret_env
 * lists, and credential headers.  Ordinary configuration (a data folder,
 * DEBUG=1, a port, a user, a tenant header) never alters a result.
 */
static void config_values_are_not_secrets(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *srv = fake_server("fake", f.log, NULL,
                            "\"secret_env\":[\"MCP_TEST_PAT\"]");
    /* fake_server's env holds only the tag: add ours to it */
    char *env = env_json("\"DATA_DIR\":\"/srv/data\",\"DEBUG\":\"1\",\"PORT\":\"8080\","
                         "\"USER\":\"bob\",\"MY_API_TOKEN\":\"tok-7c1e-secret-9911\","
                         "\"db_password\":\"pw2\",\"MCP_TEST_PAT\":\"pat-value-5150\","
                         "\"Aws_Secret_Access\":\"aws-s3cr3t-value\"");
    char *plain = env_json(NULL);
    char *p = strstr(srv, plain);
    assert_non_null(p);
    char *srv2 = fmt("%.*s%s%s", (int)(p - srv), srv, env, p + strlen(plain));
    char *config = fmt("{\"servers\":{%s}}", srv2);
    weir_host *h;
    weir_error err;
    if (load(config, &h, &err) != WEIR_OK)
        fail_msg("%s", err.text);
    assert_invoke(h, "mcp__fake__echo", "{\"text\":\"1 + 1 = 2, bob reads /srv/data/a.txt on 8080\"}",
                  "echo: 1 + 1 = 2, bob reads /srv/data/a.txt on 8080");
    assert_invoke(h, "mcp__fake__env", "{\"name\":\"DATA_DIR\"}", "value: /srv/data");
    assert_invoke(h, "mcp__fake__env", "{\"name\":\"DEBUG\"}", "value: 1");
    assert_invoke(h, "mcp__fake__env", "{\"name\":\"PORT\"}", "value: 8080");
    assert_invoke(h, "mcp__fake__env", "{\"name\":\"USER\"}", "value: bob");
    /* secrets by name (any case) and by secret_env */
    assert_invoke(h, "mcp__fake__env", "{\"name\":\"MY_API_TOKEN\"}", "value: [redacted]");
    assert_invoke(h, "mcp__fake__env", "{\"name\":\"db_password\"}", "value: [redacted]");
    assert_invoke(h, "mcp__fake__env", "{\"name\":\"MCP_TEST_PAT\"}", "value: [redacted]");
    assert_invoke(h, "mcp__fake__env", "{\"name\":\"Aws_Secret_Access\"}", "value: [redacted]");
    assert_invoke(h, "mcp__fake__echo", "{\"text\":\"k=tok-7c1e-secret-9911 p=pat-value-5150\"}",
                  "echo: k=[redacted] p=[redacted]");
    weir_host_destroy(h);
    assert_no_children();
    free(config);
    /* secret_env names a variable env does not set: an error naming it */
    config = fmt("{\"servers\":{\"fake\":{\"command\":\"%s\",\"env\":{\"A\":\"1\"},"
                 "\"secret_env\":[\"A\",\"GH_PAT\"]}}}", fake());
    load_fails_with(config, "server 'fake': secret_env names 'GH_PAT', which its env does not set");
    free(config);
    load_fails_with("{\"servers\":{\"a\":{\"url\":\"http://127.0.0.1:1/\",\"secret_env\":[\"X\"]}}}",
                    "\"secret_env\" is for a stdio server");

    /* HTTP: a tenant header is configuration, Authorization and X-Api-Key are secrets */
    http_fake hf;
    http_fake_start(&hf, &f);
    config = fmt("{\"servers\":{\"web\":{\"url\":\"http://127.0.0.1:%d/mcp\",\"headers\":{"
                 "\"Authorization\":\"Bearer tok-http-secret-4242\",\"X-Api-Key\":\"key-77-abcdef\","
                 "\"X-Tenant\":\"acme-tenant-42\",\"Accept-Language\":\"en\"}}}}", hf.port);
    if (load(config, &h, &err) != WEIR_OK)
        fail_msg("%s", err.text);
    assert_invoke(h, "mcp__web__echo", "{\"text\":\"tenant acme-tenant-42 in en\"}",
                  "echo: tenant acme-tenant-42 in en");
    assert_invoke(h, "mcp__web__echo",
                  "{\"text\":\"Bearer tok-http-secret-4242 and key-77-abcdef\"}",
                  "echo: [redacted] and [redacted]");
    weir_host_destroy(h);
    http_fake_stop(&hf);
    free(config);
    free(env);
    free(plain);
    free(srv);
    free(srv2);
    fx_done(&f);
}

/*
 * A NUL in one tool's name (issue #31, 8): that tool is skipped, the rest
 * of the list is offered, and the start does not wait for a timeout.
 */
static void tool_name_with_nul_is_skipped(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *srv = fake_server("fake", f.log, "\"--nul-tool\"", "\"startup_timeout_ms\":3000");
    char *config = fmt("{\"servers\":{%s}}", srv);
    weir_host *h;
    weir_error err;
    long long t0 = now_ms();
    if (load(config, &h, &err) != WEIR_OK)
        fail_msg("%s", err.text);
    assert_true(now_ms() - t0 < 2500);
    const weir__tools *tools = weir__host_tools(h);
    assert_non_null(weir__tools_find(tools, "mcp__fake__echo"));   /* the same page */
    assert_non_null(weir__tools_find(tools, "mcp__fake__meta"));   /* the next page */
    assert_null(weir__tools_find(tools, "mcp__fake__nul"));
    assert_invoke(h, "mcp__fake__echo", "{\"text\":\"still here\"}", "echo: still here");
    weir_host_destroy(h);
    assert_no_children();
    free(srv);
    free(config);
    fx_done(&f);
}

/* Alive, not a zombie (a killed daemon may wait for its new parent to reap it). */
static bool pid_running(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *t = wt_read_file(path, NULL);
    if (!t)
        return false;
    const char *close = strrchr(t, ')');
    bool running = close && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X';
    free(t);
    return running;
}

/*
 * A server's daemon (issue #31, 10): a grandchild that left the server's
 * process group with setsid() is stopped with the server, at the host's
 * end and at a restart, by the marker in its environment.
 */
static void setsid_daemon_is_stopped(void **state) {
    (void)state;
    fx f;
    fx_init(&f);
    char *pidf = fmt("%s/daemon.pid", f.dir);
    char *args = fmt("\"--daemon\",\"%s\"", pidf);
    char *srv = fake_server("fake", f.log, args, NULL);
    char *config = fmt("{\"servers\":{%s}}", srv);
    weir_host *h;
    weir_error err;
    for (int round = 0; round < 2; round++) {
        unlink(pidf);
        if (load(config, &h, &err) != WEIR_OK)
            fail_msg("%s", err.text);
        pid_t daemon = 0;
        for (int i = 0; i < 300 && !daemon; i++) {
            char *t = wt_read_file(pidf, NULL);
            if (t)
                daemon = (pid_t)atoi(t);
            free(t);
            if (!daemon)
                usleep(10000);
        }
        assert_true(daemon > 0);
        assert_true(pid_running(daemon));
        assert_true(getpgid(daemon) != getpgid(0));
        if (round == 1) {
            /* a restart stops the old instance's daemon: crash, then call again */
            const weir__tool_def *crash = weir__tools_find(weir__host_tools(h), "mcp__fake__crash");
            weir__tool_outcome o = {0};
            json_t *a = json_object();
            weir__tool_invoke(crash, "c0", NULL, a, &o);
            json_decref(a);
            weir__tool_outcome_clear(&o);
            unlink(pidf);
            assert_invoke(h, "mcp__fake__echo", "{\"text\":\"again\"}", "echo: again");
            bool gone = false;
            for (int i = 0; i < 300 && !(gone = !pid_running(daemon)); i++)
                usleep(10000);
            if (!gone)
                kill(daemon, SIGKILL);
            assert_true(gone);
            daemon = 0;
            for (int i = 0; i < 300 && !daemon; i++) {
                char *t = wt_read_file(pidf, NULL);
                if (t)
                    daemon = (pid_t)atoi(t);
                free(t);
                if (!daemon)
                    usleep(10000);
            }
            assert_true(daemon > 0);
        }
        weir_host_destroy(h);
        bool gone = false;
        for (int i = 0; i < 300 && !(gone = !pid_running(daemon)); i++)
            usleep(10000);
        if (!gone)
            kill(daemon, SIGKILL); /* do not leave it behind */
        if (!gone)
            fail_msg("the server's setsid() daemon %d outlived the host", (int)daemon);
        assert_no_children();
    }
    free(pidf);
    free(args);
    free(srv);
    free(config);
    fx_done(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reference_tools_round_trip),
        cmocka_unit_test(reference_timeout_cancels),
        cmocka_unit_test(reference_progress_is_live),
        cmocka_unit_test(reference_secrets_stay_out),
        cmocka_unit_test(fake_faults_and_results),
        cmocka_unit_test(fake_cancel_sends_cancelled),
        cmocka_unit_test(fake_timeout),
        cmocka_unit_test(fake_list_changed_storm),
        cmocka_unit_test(fake_launcher_children_are_stopped),
        cmocka_unit_test(load_never_answers_initialize),
        cmocka_unit_test(load_server_exits_at_start),
        cmocka_unit_test(config_errors),
        cmocka_unit_test(mcp_json_import),
        cmocka_unit_test(http_fake_session),
        cmocka_unit_test(http_session_ends_under_parallel_calls),
        cmocka_unit_test(reference_http),
        cmocka_unit_test(config_values_are_not_secrets),
        cmocka_unit_test(tool_name_with_nul_is_skipped),
        cmocka_unit_test(setsid_daemon_is_stopped),
    };
    /* WEIR_MCP_TEST_ONLY=pattern runs only the matching tests (cmocka's filter: * and ?) */
    if (getenv("WEIR_MCP_TEST_ONLY") && *getenv("WEIR_MCP_TEST_ONLY"))
        cmocka_set_test_filter(getenv("WEIR_MCP_TEST_ONLY"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
