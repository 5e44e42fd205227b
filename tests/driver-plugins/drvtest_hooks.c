/*
 * tests/driver-plugins/drvtest_hooks.c - a hook plugin for the driver tests
 * whose behaviour comes from its config:
 *   "record_requests": true   llm/stream: log drvtest/request {request, purpose?}
 *                             (the harness checks it against the log; purpose
 *                             marks a plugin's direct call, e.g. a summary)
 *   "pre_step": {"action": "reject"|"empty"|"fail"|"rewrite"|"wait"|"wait_fail",
 *                "text"?, "reason"?, "step"?: N, "native"?: true}
 *                             agent/pre-step on step N (default: every step;
 *                             with "native", only native input's calls);
 *                             a reject carries "reason" when given; "wait"
 *                             sleeps until the call's signal fires (at most
 *                             20 s), then answers as usual; "wait_fail" then
 *                             fails (a listener that stops on a cancel);
 *                             "hang" sleeps "ms" (default 20000) and never
 *                             looks at the signal (a hook that ignores a
 *                             cancel), then answers as usual
 *   "turn_stopping_steer": {"text", "times"}
 *                             agent/turn-stopping steers `text`, `times` times
 *   "request_error": {"action": "retry"|"fail"|"delegate", "times"?: N}
 *   "request_model": "m"      agent/request: switch the model to m
 *   "request_fixed": {provider, model}
 *                             agent/request: answer this config without
 *                             calling weir_next() (a short-circuit)
 *   "request_fail": N         agent/request: fail the first N invocations
 *   "request_sleep_ms": N     agent/request: sleep N ms, then weir_next()
 *   "tool_gate": {"deny"?: tool, "allow"?: tool}
 *                             tools/pre-execute: deny (reason "drvtest gate")
 *                             or allow that tool without weir_next()
 *   "post_inject": "text"     tools/post-execute: add a user message with
 *                             `text` to additional_contexts
 *   "post_replace": "text"    tools/post-execute: answer content `text`
 *                             without weir_next()
 *   "replay": [chunks]        llm/stream: return these chunks (no provider)
 *   "stream_fail": true       llm/stream: fail (a middleware failure)
 *   "append": "type"          register `type` and log it once on turn-stopping
 *   "assemble_counter": true  system-prompt/assemble: add a section
 *                             "call {{n}} {{unset}}" with variable n counting
 *                             invocations, so the prompt changes every turn
 *   "assemble_tools": [[names], ...]
 *                             system-prompt/assemble: the Nth invocation (one
 *                             a turn) offers only the tools named in list N
 *                             (the last list from then on), in that list's
 *                             order
 *   "stream_warn": N          agent/assistant-stream: a warning log line
 *                             (weir_log) at the Nth text-delta frame, so in
 *                             the middle of a streamed line of text
 *   "admit": {"action": "redact"|"refuse"|"fail", "reason"?}
 *                             agent/admit: "redact" replaces every word with
 *                             an '@' in the input's text blocks by
 *                             "[redacted]" (a PII guard); "refuse" refuses
 *                             input whose text has an '@' (reason: "reason",
 *                             default "contains an e-mail address"); "fail"
 *                             fails (weir_call_fail "guard is down")
 *   "status_wait": {"ms": N, "text", "kind"?}
 *                             agent/request: append drvtest/wait with the
 *                             status-line contract {status:{kind (default
 *                             "waiting"), text, delay_ms: N}} (docs/plugins.md,
 *                             "Status lines"), sleep N ms, then weir_next()
 *   (every row claims the event namespace "drvtest": its types, "append"'s
 *   too, are drvtest/<name>)
 *   "agent_deny": {"session", "tool"}
 *                             agent/created of that session: register, for
 *                             that agent only, a tools/pre-execute listener
 *                             denying `tool`; also try a before list and an
 *                             unknown hook, and log drvtest/agent-hooks
 *                             {ok, before, unknown} (the status codes);
 *                             agent/turn-stopping then tries once more and
 *                             logs drvtest/agent-hooks {late}
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weir/plugin.h>

typedef struct hk {
    weir_plugin *self;
    json_t *config;
    int steers;   /* turn-stopping steers sent */
    int retries;  /* request-error retries returned */
    int assembles; /* system-prompt/assemble invocations */
    int requests;  /* agent/request invocations */
    int deltas;    /* text-delta frames seen (stream_warn) */
} hk;

static json_t *on_stream_frame(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    hk *h = ud;
    const json_t *frame = json_object_get(args, "frame");
    const json_t *chunk = json_object_get(frame, "chunk");
    const char *type = json_string_value(json_object_get(chunk, "type"));
    if (type && !strcmp(type, "text-delta") &&
        ++h->deltas == json_integer_value(json_object_get(h->config, "stream_warn")))
        weir_log(h->self, WEIR_LOG_WARN, "drvtest: a warning in the middle of the answer");
    return NULL;
}

static json_t *on_assemble(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    hk *h = ud;
    json_t *a = weir_next(call);
    json_t *out = a ? json_deep_copy(a) : NULL;
    json_decref(a);
    int n = ++h->assembles;
    const json_t *lists = json_object_get(h->config, "assemble_tools");
    if (out && json_array_size(lists) > 0) { /* offer list N's tools, in its order */
        size_t k = (size_t)n <= json_array_size(lists) ? (size_t)n - 1 : json_array_size(lists) - 1;
        const json_t *names = json_array_get(lists, k), *all = json_object_get(out, "tools");
        json_t *tools = json_array();
        size_t i, j;
        const json_t *name, *tool;
        json_array_foreach(names, i, name) {
            json_array_foreach(all, j, tool) {
                if (tools && json_equal(json_object_get(tool, "name"), (json_t *)(uintptr_t)name))
                    json_array_append(tools, (json_t *)(uintptr_t)tool);
            }
        }
        json_object_set_new(out, "tools", tools ? tools : json_array());
    }
    if (out && json_is_true(json_object_get(h->config, "assemble_counter"))) {
        /* rendered by the core: {{n}} from variables, {{unset}} stays */
        json_object_set_new(json_object_get(out, "variables"), "n", json_integer(n));
        json_array_append_new(json_object_get(out, "sections"),
                              json_pack("{s:s, s:i, s:s}", "name", "counter", "order", 100,
                                        "text", "call {{n}} {{unset}}"));
    }
    return out;
}

static json_t *on_stream(weir_call *call, const json_t *args, void *ud) {
    hk *h = ud;
    if (json_is_true(json_object_get(h->config, "record_requests"))) {
        json_t *data = json_pack("{s:O}", "request", json_object_get(args, "request"));
        const json_t *purpose = json_object_get(args, "purpose"); /* a plugin's direct call */
        if (data && purpose)
            json_object_set(data, "purpose", (json_t *)(uintptr_t)purpose);
        int rc = data ? weir_agent_append(weir_call_agent(call), "drvtest/request", data, NULL)
                      : WEIR_E_NOMEM;
        json_decref(data);
        if (rc != WEIR_OK) {
            weir_call_fail(call, "cannot log drvtest/request: status %d", rc);
            return NULL;
        }
    }
    if (json_is_true(json_object_get(h->config, "stream_fail"))) {
        weir_call_fail(call, "drvtest: stream middleware broke");
        return NULL;
    }
    const json_t *replay = json_object_get(h->config, "replay");
    if (replay)
        return json_deep_copy(replay);
    return weir_next(call);
}

static json_t *on_pre_step(weir_call *call, const json_t *args, void *ud) {
    hk *h = ud;
    const json_t *ps = json_object_get(h->config, "pre_step");
    const json_t *only = json_object_get(ps, "step");
    if (json_is_integer(only) &&
        json_integer_value(only) != json_integer_value(json_object_get(args, "step")))
        return weir_next(call);
    if (json_is_true(json_object_get(ps, "native")) &&
        !json_is_true(json_object_get(args, "native")))
        return weir_next(call);
    const char *action = json_string_value(json_object_get(ps, "action"));
    if (!action)
        return weir_next(call);
    if (!strcmp(action, "reject")) {
        const json_t *why = json_object_get(ps, "reason"); /* optional */
        return json_is_string(why) ? json_pack("{s:s, s:O}", "kind", "reject", "reason", why)
                                   : json_pack("{s:s}", "kind", "reject");
    }
    if (!strcmp(action, "fail")) {
        weir_call_fail(call, "drvtest: pre-step refused");
        return NULL;
    }
    if (!strcmp(action, "hang")) {
        const json_t *ms = json_object_get(ps, "ms");
        long long left = json_is_integer(ms) ? json_integer_value(ms) : 20000;
        while (left > 0) { /* EINTR or not: sleep out the whole time */
            long long step = left < 100 ? left : 100;
            struct timespec ts = {0, (long)step * 1000000L};
            nanosleep(&ts, NULL);
            left -= step;
        }
        return weir_next(call);
    }
    if (!strcmp(action, "wait") || !strcmp(action, "wait_fail")) {
        int slept = weir_signal_sleep(weir_call_signal(call), 20000);
        if (!strcmp(action, "wait_fail")) {
            weir_call_fail(call, "drvtest: pre-step stopped (%s)",
                           slept == WEIR_OK ? "timed out" : "cancelled");
            return NULL;
        }
        return weir_next(call);
    }
    json_t *d = weir_next(call);
    if (!d)
        return NULL;
    json_t *out = json_deep_copy(d);
    json_decref(d);
    if (!out)
        return NULL;
    if (!strcmp(action, "empty")) {
        json_object_set_new(out, "messages", json_array());
    } else if (!strcmp(action, "rewrite")) {
        json_t *msgs = json_object_get(out, "messages");
        size_t i;
        json_t *m;
        json_array_foreach(msgs, i, m) {
            json_object_set_new(m, "content",
                                json_pack("[{s:s, s:s}]", "type", "text", "text",
                                          json_string_value(json_object_get(ps, "text"))));
        }
    }
    return out;
}

static json_t *on_turn_stopping(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    hk *h = ud;
    const json_t *ts = json_object_get(h->config, "turn_stopping_steer");
    if (ts && h->steers < json_integer_value(json_object_get(ts, "times"))) {
        h->steers++;
        json_t *m = json_pack("{s:s, s:s}", "role", "user", "content",
                              json_string_value(json_object_get(ts, "text")));
        int rc = m ? weir_agent_send(weir_call_agent(call), m, WEIR_SEND_STEER, NULL, NULL)
                   : WEIR_E_NOMEM;
        json_decref(m);
        if (rc != WEIR_OK) {
            weir_call_fail(call, "steer failed: status %d", rc);
            return NULL;
        }
    }
    const char *type = json_string_value(json_object_get(h->config, "append"));
    if (type) {
        json_t *data = json_pack("{s:i}", "n", 1);
        int rc = weir_agent_append(weir_call_agent(call), type, data, NULL);
        json_decref(data);
        if (rc != WEIR_OK) {
            weir_call_fail(call, "append failed: status %d", rc);
            return NULL;
        }
    }
    return json_null();
}

static json_t *on_request_error(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    hk *h = ud;
    const json_t *re = json_object_get(h->config, "request_error");
    const char *action = json_string_value(json_object_get(re, "action"));
    if (action && !strcmp(action, "fail")) {
        weir_call_fail(call, "drvtest: recovery refused");
        return NULL;
    }
    if (action && !strcmp(action, "retry") &&
        h->retries < json_integer_value(json_object_get(re, "times"))) {
        h->retries++;
        return json_pack("{s:s}", "kind", "retry");
    }
    return weir_next(call);
}

static json_t *on_request(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    hk *h = ud;
    h->requests++;
    const json_t *fails = json_object_get(h->config, "request_fail");
    if (json_is_integer(fails) && h->requests <= json_integer_value(fails)) {
        weir_call_fail(call, "drvtest: request failure %d", h->requests);
        return NULL;
    }
    const json_t *fixed = json_object_get(h->config, "request_fixed");
    if (fixed)
        return json_deep_copy(fixed);
    const json_t *sleep_ms = json_object_get(h->config, "request_sleep_ms");
    if (json_is_integer(sleep_ms))
        weir_signal_sleep(weir_call_signal(call), (uint64_t)json_integer_value(sleep_ms));
    json_t *c = weir_next(call);
    const char *model = json_string_value(json_object_get(h->config, "request_model"));
    if (!c || !model)
        return c;
    json_t *out = json_deep_copy(c);
    json_decref(c);
    if (out)
        json_object_set_new(out, "model", json_string(model));
    return out;
}

static json_t *on_gate(weir_call *call, const json_t *args, void *ud) {
    hk *h = ud;
    const json_t *gate = json_object_get(h->config, "tool_gate");
    const char *name = json_string_value(json_object_get(args, "name"));
    const char *deny = json_string_value(json_object_get(gate, "deny"));
    const char *allow = json_string_value(json_object_get(gate, "allow"));
    if (name && deny && !strcmp(name, deny))
        return json_pack("{s:s, s:s}", "kind", "deny", "reason", "drvtest gate");
    if (name && allow && !strcmp(name, allow))
        return json_pack("{s:s}", "kind", "allow");
    return weir_next(call);
}

static json_t *on_post(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    hk *h = ud;
    const char *text = json_string_value(json_object_get(h->config, "post_replace"));
    if (text)
        return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
    json_t *r = weir_next(call);
    json_t *out = r ? json_deep_copy(r) : NULL;
    json_decref(r);
    json_t *ctx = json_pack("{s:s, s:[{s:s, s:s}]}", "role", "user", "content", "type", "text",
                            "text", json_string_value(json_object_get(h->config, "post_inject")));
    json_t *list = json_object_get(out, "additional_contexts");
    if (out && ctx && !list)
        json_object_set_new(out, "additional_contexts", list = json_array());
    if (!out || !ctx || json_array_append_new(list, ctx) != 0) {
        json_decref(out);
        weir_call_fail(call, "drvtest: out of memory");
        return NULL;
    }
    return out;
}

static json_t *deny_tool(weir_call *call, const json_t *args, void *ud) {
    hk *h = ud;
    const char *tool = json_string_value(
        json_object_get(json_object_get(h->config, "agent_deny"), "tool"));
    const char *name = json_string_value(json_object_get(args, "name"));
    if (tool && name && !strcmp(tool, name))
        return json_pack("{s:s, s:s}", "kind", "deny", "reason", "not for this agent");
    return weir_next(call);
}

/* Log drvtest/agent-hooks `data` (stolen): json_null(), or NULL after failing. */
static json_t *log_codes(weir_call *call, weir_agent *a, json_t *data) {
    int rc = data ? weir_agent_append(a, "drvtest/agent-hooks", data, NULL) : WEIR_E_NOMEM;
    json_decref(data);
    if (rc != WEIR_OK) {
        weir_call_fail(call, "cannot log drvtest/agent-hooks");
        return NULL;
    }
    return json_null();
}

static json_t *on_created(weir_call *call, const json_t *args, void *ud) {
    hk *h = ud;
    const char *session = json_string_value(
        json_object_get(json_object_get(h->config, "agent_deny"), "session"));
    const char *agent = json_string_value(json_object_get(args, "agent"));
    if (!session || !agent || strcmp(session, agent) != 0)
        return json_null();
    weir_agent *a = weir_call_agent(call);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = h;
    int ok = weir_agent_hook_register(h->self, a, "tools/pre-execute", deny_tool, &o);
    static const char *const first[] = {"record", NULL};
    weir_hook_opts bad = o;
    bad.before = first;
    int before = weir_agent_hook_register(h->self, a, "tools/pre-execute", deny_tool, &bad);
    int unknown = weir_agent_hook_register(h->self, a, "no/such-hook", deny_tool, &o);
    return log_codes(call, a, json_pack("{s:i, s:i, s:i}", "ok", ok, "before", before, "unknown",
                                        unknown));
}

static json_t *late_register(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    hk *h = ud;
    weir_agent *a = weir_call_agent(call);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    int late = weir_agent_hook_register(h->self, a, "tools/pre-execute", deny_tool, &o);
    return log_codes(call, a, json_pack("{s:i}", "late", late));
}

/* `text` with every word holding an '@' replaced by "[redacted]" (new). */
static char *redact(const char *text) {
    size_t n = strlen(text);
    char *out = malloc(n * 10 + 1); /* a one-byte word grows to 10 at most */
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && text[j] != ' ' && text[j] != '\n')
            j++;
        if (memchr(text + i, '@', j - i)) {
            memcpy(out + o, "[redacted]", 10);
            o += 10;
        } else {
            memcpy(out + o, text + i, j - i);
            o += j - i;
        }
        if (j < n)
            out[o++] = text[j++];
        i = j;
    }
    out[o] = '\0';
    return out;
}

static json_t *on_admit(weir_call *call, const json_t *args, void *ud) {
    hk *h = ud;
    const json_t *cfg = json_object_get(h->config, "admit");
    const char *action = json_string_value(json_object_get(cfg, "action"));
    const json_t *msg = json_object_get(args, "message");
    bool has_at = false;
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(msg, "content"), i, b) {
        const char *t = json_string_value(json_object_get(b, "text"));
        has_at |= t && strchr(t, '@');
    }
    if (action && !strcmp(action, "fail")) {
        weir_call_fail(call, "guard is down");
        return NULL;
    }
    if (action && !strcmp(action, "refuse") && has_at) {
        const char *why = json_string_value(json_object_get(cfg, "reason"));
        return json_pack("{s:s, s:s}", "kind", "refuse", "reason",
                         why ? why : "contains an e-mail address");
    }
    if (!action || strcmp(action, "redact") != 0 || !has_at)
        return weir_next(call);
    json_t *copy = json_deep_copy(msg);
    if (!copy) {
        weir_call_fail(call, "out of memory");
        return NULL;
    }
    json_t *cb;
    json_array_foreach(json_object_get(copy, "content"), i, cb) {
        const char *t = json_string_value(json_object_get(cb, "text"));
        char *r = t ? redact(t) : NULL;
        if (t && (!r || json_object_set_new(cb, "text", json_string(r)) != 0)) {
            free(r);
            json_decref(copy);
            weir_call_fail(call, "out of memory");
            return NULL;
        }
        free(r);
    }
    json_t *next = weir_next(call); /* the inner chain (and the default) still runs */
    if (!next) {
        json_decref(copy);
        return NULL;
    }
    json_decref(next);
    return json_pack("{s:s, s:o}", "kind", "admit", "message", copy);
}

/* A third-party wait with a countdown: the status contract, then the wait. */
static json_t *on_status_wait(weir_call *call, const json_t *args, void *ud) {
    (void)args;
    hk *h = ud;
    const json_t *cfg = json_object_get(h->config, "status_wait");
    json_int_t ms = json_integer_value(json_object_get(cfg, "ms"));
    const char *kind = json_string_value(json_object_get(cfg, "kind"));
    json_t *data = json_pack("{s:{s:s, s:s?, s:I}}", "status", "kind", kind ? kind : "waiting",
                             "text", json_string_value(json_object_get(cfg, "text")), "delay_ms",
                             ms);
    weir_error err;
    memset(&err, 0, sizeof err);
    int rc = data ? weir_agent_append(weir_call_agent(call), "drvtest/wait", data, &err)
                  : WEIR_E_NOMEM;
    json_decref(data);
    if (rc != WEIR_OK) {
        weir_call_fail(call, "drvtest: cannot log drvtest/wait: %s", err.text);
        return NULL;
    }
    if (weir_signal_sleep(weir_call_signal(call), (uint64_t)ms) != WEIR_OK) {
        weir_call_fail(call, "drvtest: the wait was cut");
        return NULL;
    }
    return weir_next(call);
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    (void)err;
    WEIR_PLUGIN_INIT_API(api);
    hk *h = calloc(1, sizeof *h);
    if (!h)
        return WEIR_E_NOMEM;
    h->config = json_deep_copy(config);
    h->self = self;
    weir_plugin_set_data(self, h);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    o.user_data = h;
    /* its event types are drvtest/<name> (config "append" too) */
    int rc = weir_event_namespace_claim(self, "drvtest");
    if (rc == WEIR_OK &&
        (json_object_get(config, "record_requests") || json_object_get(config, "replay") ||
         json_object_get(config, "stream_fail"))) {
        if (json_is_true(json_object_get(config, "record_requests")))
            rc = weir_event_type_register(self, "drvtest/request", WEIR_EVENT_IGNORABLE);
        if (rc == WEIR_OK)
            rc = weir_hook_register(self, "llm/stream", on_stream, &o);
    }
    if (rc == WEIR_OK && json_object_get(config, "pre_step"))
        rc = weir_hook_register(self, "agent/pre-step", on_pre_step, &o);
    if (rc == WEIR_OK &&
        (json_object_get(config, "turn_stopping_steer") || json_object_get(config, "append"))) {
        const char *type = json_string_value(json_object_get(config, "append"));
        if (type)
            rc = weir_event_type_register(self, type, WEIR_EVENT_IGNORABLE);
        if (rc == WEIR_OK)
            rc = weir_hook_register(self, "agent/turn-stopping", on_turn_stopping, &o);
    }
    if (rc == WEIR_OK && json_object_get(config, "request_error"))
        rc = weir_hook_register(self, "agent/request-error", on_request_error, &o);
    if (rc == WEIR_OK && (json_is_true(json_object_get(config, "assemble_counter")) ||
                          json_object_get(config, "assemble_tools")))
        rc = weir_hook_register(self, "system-prompt/assemble", on_assemble, &o);
    if (rc == WEIR_OK &&
        (json_object_get(config, "request_model") || json_object_get(config, "request_fixed") ||
         json_object_get(config, "request_fail") || json_object_get(config, "request_sleep_ms")))
        rc = weir_hook_register(self, "agent/request", on_request, &o);
    if (rc == WEIR_OK && json_object_get(config, "tool_gate"))
        rc = weir_hook_register(self, "tools/pre-execute", on_gate, &o);
    if (rc == WEIR_OK &&
        (json_object_get(config, "post_inject") || json_object_get(config, "post_replace")))
        rc = weir_hook_register(self, "tools/post-execute", on_post, &o);
    if (rc == WEIR_OK && json_object_get(config, "stream_warn"))
        rc = weir_hook_register(self, "agent/assistant-stream", on_stream_frame, &o);
    if (rc == WEIR_OK && json_object_get(config, "status_wait")) {
        rc = weir_event_type_register(self, "drvtest/wait", WEIR_EVENT_IGNORABLE);
        if (rc == WEIR_OK)
            rc = weir_hook_register(self, "agent/request", on_status_wait, &o);
    }
    if (rc == WEIR_OK && json_object_get(config, "admit"))
        rc = weir_hook_register(self, "agent/admit", on_admit, &o);
    if (rc == WEIR_OK && json_object_get(config, "agent_deny")) {
        if (!WEIR_API_HAS(api, agent_hook_register))
            return WEIR_E_UNSUPPORTED;
        rc = weir_event_type_register(self, "drvtest/agent-hooks", WEIR_EVENT_IGNORABLE);
        if (rc == WEIR_OK)
            rc = weir_hook_register(self, "agent/created", on_created, &o);
        if (rc == WEIR_OK)
            rc = weir_hook_register(self, "agent/turn-stopping", late_register, &o);
    }
    return rc;
}

static void fini(weir_plugin *self) {
    hk *h = weir_plugin_data(self);
    if (h)
        json_decref(h->config);
    free(h);
}

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER, "drvtest-hooks", "0.1.0", "driver test hooks (config-driven)", NULL,
    init, fini, {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
