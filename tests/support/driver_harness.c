/* tests/support/driver_harness.c - see driver_harness.h. */
#include "driver_harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "continuation.h"
#include "session_log.h"
#include "surface.h"
#include "testutil.h"

static char *replace_all(const char *s, const char *what, const char *with) {
    size_t n = 0, wl = strlen(what), vl = strlen(with);
    for (const char *p = strstr(s, what); p; p = strstr(p + wl, what))
        n++;
    char *out = malloc(strlen(s) + n * vl + 1), *o = out;
    assert_non_null(out);
    for (const char *p; (p = strstr(s, what)) != NULL; s = p + wl) {
        memcpy(o, s, (size_t)(p - s));
        o += p - s;
        memcpy(o, with, vl);
        o += vl;
    }
    strcpy(o, s);
    return out;
}

void dh_setup(dh *d, const char *rows, const char *agent) {
    dh_setup_session(d, rows, agent, NULL);
}

void dh_setup_session(dh *d, const char *rows, const char *agent, const char *session) {
    memset(d, 0, sizeof *d);
    d->dir = wt_tmpdir("driver");
    assert_non_null(d->dir);
    d->events = json_array();
    char *text = replace_all(rows ? rows : "[]", "@DATA@", wt_env("WEIR_TEST_DATA_DIR"));
    json_error_t je;
    json_t *extra = json_loads(text, 0, &je);
    free(text);
    if (!extra)
        fail_msg("bad plugin rows: %s", je.text);
    d->config = json_pack("{s:{s:s, s:s, s:i, s:i}, s:{s:s, s:s}, s:[s, s], s:[{s:s, s:s, s:{s:b}}]}",
                          "agent", "provider", "scripted", "model", "demo", "max_tokens", 1024,
                          "max_parallel_tool_calls", 4, "session", "dir", d->dir, "fsync", "none",
                          "plugin_path", wt_env("WEIR_TEST_PLUGIN_DIR"),
                          wt_env("WEIR_TEST_DRIVER_PLUGIN_DIR"), "plugins", "id", "record",
                          "plugin", "drvtest-hooks", "config", "record_requests", 1);
    assert_non_null(d->config);
    assert_int_equal(json_array_extend(json_object_get(d->config, "plugins"), extra), 0);
    json_decref(extra);
    if (agent) {
        json_t *a = json_loads(agent, 0, &je);
        if (!a)
            fail_msg("bad agent options: %s", je.text);
        json_object_update(json_object_get(d->config, "agent"), a);
        json_decref(a);
    }
    if (session) {
        json_t *sv = json_loads(session, 0, &je);
        if (!sv)
            fail_msg("bad session options: %s", je.text);
        json_object_update(json_object_get(d->config, "session"), sv);
        json_decref(sv);
    }
    weir_error err;
    weir_error_clear(&err);
    if (weir_host_create(d->config, &d->host, &err) != WEIR_OK)
        fail_msg("weir_host_create: %s", err.text);
}

static void record(const json_t *event, bool durable, void *ud) {
    dh *d = ud;
    assert_int_equal(json_array_append_new(d->events, json_deep_copy(event)), 0);
    if (d->on_event)
        d->on_event(d, event, durable);
}

static void on_wake(void *ud) {
    dh *d = ud;
    __atomic_add_fetch(&d->wakes, 1, __ATOMIC_SEQ_CST);
}

int dh_wait_wake(dh *d, int seen) {
    for (int i = 0; i < 4000; i++) {
        int n = __atomic_load_n(&d->wakes, __ATOMIC_SEQ_CST);
        if (n > seen)
            return n;
        usleep(5000);
    }
    fail_msg("no on_wake after %d", seen);
    return seen;
}

void dh_open(dh *d, const char *id) {
    weir_agent_options o = WEIR_AGENT_OPTIONS_INIT;
    o.session_id = id;
    o.on_event = record;
    o.on_wake = on_wake;
    o.user_data = d;
    o.hooks = d->hooks;
    o.nhooks = d->nhooks;
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_open(d->host, &o, &d->agent, &err) != WEIR_OK)
        fail_msg("weir_agent_open: %s", err.text);
}

void dh_close(dh *d) {
    weir_agent_close(d->agent);
    d->agent = NULL;
}

void dh_send(dh *d, const char *text, weir_send_mode mode) {
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_send_text(d->agent, text, mode, &err) != WEIR_OK)
        fail_msg("weir_agent_send_text: %s", err.text);
}

void dh_run(dh *d) {
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_run_until_idle(d->agent, &err) != WEIR_OK)
        fail_msg("weir_agent_run_until_idle: %s", err.text);
}

char *dh_types(const dh *d, bool durable_only) {
    size_t cap = 64, len = 0, i;
    char *out = calloc(1, cap);
    const json_t *e;
    assert_non_null(out);
    json_array_foreach(d->events, i, e) {
        if (durable_only && !json_object_get(e, "seq"))
            continue;
        const char *t = json_string_value(json_object_get(e, "type"));
        if (!strcmp(t, "drvtest/request") || !strncmp(t, "hook/", 5))
            continue; /* the harness's own record; provenance (dh_count sees it) */
        size_t tl = strlen(t) + 2;
        if (len + tl >= cap) {
            cap = (cap + tl) * 2;
            out = realloc(out, cap);
            assert_non_null(out);
        }
        len += (size_t)sprintf(out + len, "%s%s", len ? "," : "", t);
    }
    return out;
}

const json_t *dh_find(const dh *d, const char *type, int n) {
    size_t i;
    const json_t *e;
    json_array_foreach(d->events, i, e) {
        if (json_object_get(e, "seq") && !strcmp(json_string_value(json_object_get(e, "type")), type) &&
            n-- == 0)
            return e;
    }
    return NULL;
}

int dh_count(const dh *d, const char *type) {
    size_t i;
    const json_t *e;
    int n = 0;
    json_array_foreach(d->events, i, e) n +=
        !strcmp(json_string_value(json_object_get(e, "type")), type);
    return n;
}

const char *dh_log(const dh *d) { return weir_agent_log_path(d->agent); }

/* The request the driver must have sent at `upto`: rebuilt from the log
 * (its messages with the continuations the route of the last
 * request/context may not read dropped: core/format/continuation.h). */
static json_t *rebuild_request(weir__log *log, size_t upto) {
    weir__surface *s = NULL;
    assert_int_equal(weir__surface_create(&s), WEIR_OK);
    const json_t *header = NULL, *context = NULL;
    for (size_t i = 0; i < upto; i++) {
        const json_t *ev = weir__log_event(log, i);
        const char *type = json_string_value(json_object_get(ev, "type"));
        if (!strcmp(type, "request/header"))
            header = json_object_get(json_object_get(ev, "data"), "header");
        if (!strcmp(type, "request/context"))
            context = json_object_get(ev, "data");
        assert_int_equal(weir__surface_apply(s, ev), WEIR_OK);
    }
    assert_non_null(header);
    json_t *req = json_deep_copy(json_object_get(header, "config"));
    json_t *derived = weir__surface_derive(s);
    assert_non_null(derived);
    json_t *msgs = weir__continuation_apply(derived, s, context, NULL);
    assert_non_null(msgs);
    json_decref(derived);
    json_object_set_new(req, "messages", json_deep_copy(msgs));
    json_decref(msgs);
    const json_t *tools = json_object_get(header, "tools");
    if (tools)
        json_object_set_new(req, "tools", json_deep_copy(tools));
    weir__surface_destroy(s);
    return req;
}

static char *dump(const json_t *v) {
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)
                : strdup("(none)");
    assert_non_null(s);
    return s;
}

/* A plugin's direct call that replays the agent's request (a summary): its
 * messages are a prefix of the derived ones, byte for byte, plus one final
 * user message; its tools and (with the agent's model) its call config are
 * the header's. */
static void check_replay(const json_t *sent, const json_t *want, size_t seq) {
    const json_t *sm = json_object_get(sent, "messages"), *wm = json_object_get(want, "messages");
    size_t n = json_array_size(sm);
    /* a server compaction ("compaction": "server") sends a prefix alone */
    bool server = json_object_get(sent, "compaction") != NULL;
    size_t own = server ? 0 : 1;
    if (n == 0 || n - own > json_array_size(wm))
        fail_msg("replayed request at seq %zu has %zu messages for %zu derived", seq, n,
                 json_array_size(wm));
    for (size_t k = 0; k + own < n; k++) {
        char *x = dump(json_array_get(sm, k)), *y = dump(json_array_get(wm, k));
        if (strcmp(x, y) != 0)
            fail_msg("replayed request at seq %zu: message %zu is not the derived one:\n"
                     "  sent:    %s\n  derived: %s",
                     seq, k, x, y);
        free(x);
        free(y);
    }
    const json_t *last = json_array_get(sm, n - 1);
    if (!server)
        assert_string_equal(json_string_value(json_object_get(last, "role")), "user");
    char *x = dump(json_object_get(sent, "tools")), *y = dump(json_object_get(want, "tools"));
    if (strcmp(x, y) != 0)
        fail_msg("replayed request at seq %zu: tools differ:\n  sent:    %s\n  header:  %s", seq,
                 x, y);
    free(x);
    free(y);
    /* the agent's call config as it is, so the provider's cached prefix is read
     * (issue #32 item 4): no tool_choice added; with the agent's own model, every
     * member of the header's config as it was */
    if (json_object_get(sent, "tool_choice") && !json_object_get(want, "tool_choice"))
        fail_msg("replayed request at seq %zu adds a tool_choice", seq);
    if (json_equal(json_object_get(sent, "provider"), json_object_get(want, "provider")) &&
        json_equal(json_object_get(sent, "model"), json_object_get(want, "model"))) {
        const char *key;
        json_t *value;
        json_object_foreach((json_t *)(uintptr_t)want, key, value) {
            if (!strcmp(key, "messages"))
                continue;
            char *a = dump(json_object_get(sent, key)), *b = dump(value);
            if (strcmp(a, b) != 0)
                fail_msg("replayed request at seq %zu: %s differs:\n  sent:    %s\n  header:  %s",
                         seq, key, a, b);
            free(a);
            free(b);
        }
    }
}

void dh_check_log(const char *path, const json_t *expect_messages, bool allow_open) {
    weir_error err;
    weir_error_clear(&err);
    json_t *report = NULL;
    if (weir_log_check(path, &report, &err) != WEIR_OK)
        fail_msg("weir_log_check %s: %s", path, err.text);
    if (!json_is_true(json_object_get(report, "ok")) ||
        (!allow_open && json_array_size(json_object_get(report, "open")) > 0)) {
        char *r = json_dumps(report, JSON_COMPACT);
        fail_msg("log check %s failed: %s", path, r);
    }
    json_decref(report);

    json_t *derived = NULL;
    if (weir_log_derive(path, &derived, &err) != WEIR_OK)
        fail_msg("weir_log_derive %s: %s", path, err.text);
    if (expect_messages && !json_equal(derived, expect_messages)) {
        char *a = json_dumps(derived, JSON_COMPACT), *b = json_dumps(expect_messages, JSON_COMPACT);
        fail_msg("replay differs:\n  log:   %s\n  agent: %s", a, b);
    }
    json_decref(derived);

    weir__log *log = NULL;
    if (weir__log_open_readonly(path, &log, &err) != WEIR_OK)
        fail_msg("open %s: %s", path, err.text);
    size_t n = weir__log_count(log);
    for (size_t i = 0; i < n; i++) {
        const json_t *ev = weir__log_event(log, i);
        if (strcmp(json_string_value(json_object_get(ev, "type")), "drvtest/request") != 0)
            continue;
        json_t *want = rebuild_request(log, i);
        const json_t *data = json_object_get(ev, "data");
        if (json_object_get(data, "purpose")) { /* a plugin's own call */
            const char *purpose = json_string_value(json_object_get(data, "purpose"));
            if (purpose && !strcmp(purpose, "compaction"))
                check_replay(json_object_get(data, "request"), want, i);
            json_decref(want);
            continue;
        }
        char *x = json_dumps(json_object_get(data, "request"), JSON_COMPACT | JSON_PRESERVE_ORDER);
        char *y = json_dumps(want, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (strcmp(x, y) != 0)
            fail_msg("request at seq %zu is not the log's derive:\n  sent:    %s\n  derived: %s",
                     i, x, y);
        free(x);
        free(y);
        json_decref(want);
    }
    weir__log_close(log);
}

void dh_check(dh *d) {
    json_t *msgs = weir_agent_messages(d->agent);
    assert_non_null(msgs);
    dh_check_log(dh_log(d), msgs, false);
    json_decref(msgs);
}

void dh_teardown(dh *d) {
    if (d->agent) {
        char *path = strdup(dh_log(d));
        json_t *msgs = weir_agent_messages(d->agent);
        dh_close(d);
        dh_check_log(path, msgs, false);
        json_decref(msgs);
        free(path);
    }
    weir_host_destroy(d->host);
    json_decref(d->config);
    json_decref(d->events);
    wt_rmtree(d->dir);
    free(d->dir);
    memset(d, 0, sizeof *d);
}
