/*
 * tests/driver-plugins/drvtest_tools.c - stub tools for the driver tests.
 * Config: {"tools": [{"name", "reply"?: "text", "concludes"?: bool,
 *                     "fail"?: "message", "background"?: bool,
 *                     "wait_for_file"?: "path", "idempotent"?: bool,
 *                     "record"?: "path"}]}
 * A tool returns `reply` (default: its arguments text, prefixed "echo:"),
 * concludes the turn when asked, or fails with code TOOL_FAILED.  A
 * background tool runs as a job; `wait_for_file` makes the body wait
 * (cancellably, at most 20 s) until that file exists, so tests decide when a
 * job finishes.  `idempotent` registers the tool WEIR_TOOL_IDEMPOTENT;
 * `record` makes the body append "<call id> <idempotency key> <attempt>\n"
 * to that file when it starts (before any wait), so crash tests see every
 * execution and its key.  "append": "type" registers that event type at
 * init and makes the body append {call_id} of it (tool_exec_append);
 * "append_other": "type" makes it try a type it did not register, and the
 * reply ends with " append_other=<status name>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>

static int execute(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    const json_t *def = ud;
    const char *record = json_string_value(json_object_get(def, "record"));
    if (record) {
        FILE *f = fopen(record, "a");
        if (!f) {
            weir_tool_exec_fail(exec, "TOOL_FAILED", "cannot open %s", record);
            return WEIR_E_TOOL;
        }
        const char *key = weir_tool_exec_idempotency_key(exec);
        fprintf(f, "%s %s %d\n", weir_tool_exec_call_id(exec), key ? key : "(null)",
                weir_tool_exec_attempt(exec));
        fclose(f);
    }
    const char *append = json_string_value(json_object_get(def, "append"));
    if (append) {
        json_t *data = json_pack("{s:s}", "call_id", weir_tool_exec_call_id(exec));
        int rc = weir_tool_exec_append(exec, append, data, NULL);
        json_decref(data);
        if (rc != WEIR_OK) {
            weir_tool_exec_fail(exec, "TOOL_FAILED", "append: %s", weir_status_name(rc));
            return rc;
        }
    }
    const char *other = json_string_value(json_object_get(def, "append_other"));
    int other_rc = WEIR_OK;
    if (other) {
        json_t *data = json_object();
        other_rc = weir_tool_exec_append(exec, other, data, NULL);
        json_decref(data);
    }
    const char *gate = json_string_value(json_object_get(def, "wait_for_file"));
    for (int i = 0; gate && i < 4000; i++) {
        FILE *f = fopen(gate, "r");
        if (f) {
            fclose(f);
            break;
        }
        if (weir_signal_sleep(weir_tool_exec_signal(exec), 5) != WEIR_OK) {
            weir_tool_exec_fail(exec, "ABORTED", "cancelled while waiting");
            return WEIR_E_CANCELLED;
        }
    }
    const char *fail = json_string_value(json_object_get(def, "fail"));
    if (fail) {
        weir_tool_exec_fail(exec, "TOOL_FAILED", "%s", fail);
        return WEIR_E_TOOL;
    }
    const char *reply = json_string_value(json_object_get(def, "reply"));
    char *dump = NULL;
    if (!reply) {
        char *a = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
        size_t n = a ? strlen(a) + 6 : 0;
        dump = a ? malloc(n) : NULL;
        if (dump)
            snprintf(dump, n, "echo:%s", a);
        free(a);
        if (!dump)
            return WEIR_E_NOMEM;
        reply = dump;
    }
    char *with = NULL;
    if (other) {
        size_t n = strlen(reply) + 64;
        with = malloc(n);
        if (!with) {
            free(dump);
            return WEIR_E_NOMEM;
        }
        snprintf(with, n, "%s append_other=%s", reply, weir_status_name(other_rc));
        reply = with;
    }
    *result = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", reply,
                        "concludes_turn", json_is_true(json_object_get(def, "concludes")));
    free(dump);
    free(with);
    return *result ? WEIR_OK : WEIR_E_NOMEM;
}

static int safe(const json_t *args, void *ud) {
    (void)args;
    (void)ud;
    return 1;
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    (void)err;
    WEIR_PLUGIN_INIT_API(api);
    json_t *tools = json_deep_copy(json_object_get(config, "tools"));
    weir_plugin_set_data(self, tools);
    json_t *params = json_pack("{s:s}", "type", "object");
    size_t i;
    json_t *t;
    int rc = tools && params ? WEIR_OK : WEIR_E_NOMEM;
    json_array_foreach(tools, i, t) {
        if (rc != WEIR_OK)
            break;
        uint32_t flags = (json_is_true(json_object_get(t, "background")) ? WEIR_TOOL_BACKGROUND
                                                                         : 0) |
                         (json_is_true(json_object_get(t, "idempotent")) ? WEIR_TOOL_IDEMPOTENT
                                                                         : 0);
        weir_tool tool = {sizeof(weir_tool), json_string_value(json_object_get(t, "name")),
                          "a stub tool", params, flags, execute, safe, t};
        rc = weir_tool_register(self, &tool);
        const char *append = json_string_value(json_object_get(t, "append"));
        if (rc == WEIR_OK && append)
            rc = weir_event_type_register(self, append, 0);
    }
    json_decref(params);
    return rc;
}

static void fini(weir_plugin *self) { json_decref(weir_plugin_data(self)); }

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER, "drvtest-tools", "0.1.0", "driver test stub tools", NULL,
    init, fini, {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
