/*
 * plugins/tools-mcp/tools_mcp.c - the tools of Model Context Protocol
 * servers as weir tools (docs/mcp.md).
 *
 * Config: {"servers": {NAME: {"command", "args"?, "env"?, "secret_env"?, "cwd"?} |
 *                           {"url", "headers"?},
 *                           "type"?, "timeout_ms"?, "startup_timeout_ms"?,
 *                           "allow"?, "deny"?, "required"?, "background"?,
 *                           "max_result_bytes"?, "max_message_bytes"?}},
 *          "mcp_config"?: "path/to/.mcp.json"}
 * A .mcp.json (Claude Code's {"mcpServers": {...}}) is read as is; an entry
 * of `servers` with neither command nor url adds options to the .mcp.json
 * server of that name.  Only the servers named there are started.
 *
 * At init every server is started (spawn or connect, initialize,
 * notifications/initialized) and listed (tools/list); each tool becomes
 * mcp__<server>__<tool>.  A required server that fails is a load error
 * quoting its stderr; any other is a warning and has no tools.  A call runs
 * tools/call with the call's idempotency key in params._meta, a progress
 * token, the server's timeout and the turn's cancellation.  Between turns
 * (system-prompt/assemble of a turn's first step) a server that sent
 * notifications/tools/list_changed, or was started again, is listed again
 * and its tools are updated (tool_update, tool_remove).
 *
 * Threads: bodies run on the host's tool pool; each stdio server has a
 * reader thread (mcp_server.c).  Everything here that changes after init
 * (the tool table of the refresh) is under `st->mu`.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "weir/plugin.h"

#include "mcp_frame.h"
#include "mcp_map.h"
#include "mcp_server.h"
#include "provider_common.h"

#define PLUGIN_NAME "tools-mcp"
#define DEFAULT_TIMEOUT_MS 60000L
#define DEFAULT_STARTUP_MS 30000L
#define DEFAULT_MAX_RESULT ((size_t)1 << 20)
#define DEFAULT_MAX_MESSAGE ((size_t)16 << 20)
#define STDERR_QUOTED 10

extern char **environ;

/* The environment a stdio server inherits from weir (as the MCP SDK does). */
static const char *const inherited_env[] = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER",
                                            NULL};

#define S_STRMAP "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"secret\":true}}"
#define S_NAMES "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}"

static const char config_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
    "\"mcp_config\":{\"type\":\"string\",\"minLength\":1},"
    "\"servers\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"object\","
    "\"additionalProperties\":false,\"properties\":{"
    "\"type\":{\"enum\":[\"stdio\",\"http\",\"streamable-http\"]},"
    "\"command\":{\"type\":\"string\",\"minLength\":1},"
    "\"args\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"env\":" S_STRMAP ","
    "\"cwd\":{\"type\":\"string\",\"minLength\":1},"
    "\"url\":{\"type\":\"string\",\"minLength\":1},"
    "\"headers\":" S_STRMAP ","
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1},"
    "\"startup_timeout_ms\":{\"type\":\"integer\",\"minimum\":1},"
    "\"secret_env\":" S_NAMES ","
    "\"allow\":" S_NAMES ",\"deny\":" S_NAMES ","
    "\"required\":{\"type\":\"boolean\"},"
    "\"background\":{\"type\":\"boolean\"},"
    "\"max_result_bytes\":{\"type\":\"integer\",\"minimum\":1024},"
    "\"max_message_bytes\":{\"type\":\"integer\",\"minimum\":4096}}}}}}";

typedef struct server server;
typedef struct state state;

/* One registered tool. */
typedef struct mtool {
    server *srv;
    char *mcp_name;   /* the server's name for it */
    char *weir_name;  /* mcp__<server>__<tool> */
    bool read_only;
    bool live;        /* registered now (a refresh may remove it) */
    bool seen;        /* refresh: in the new list */
    json_t *def;      /* its entry of tools/list (for a refresh to compare) */
    struct mtool *next;
} mtool;

struct server {
    state *st;
    char *name;
    mcp_server *mcp;
    long timeout_ms, startup_timeout_ms;
    size_t max_result;
    bool required, background, ok;
    json_t *allow, *deny;  /* arrays of tool names, or NULL */
    pc_secrets secrets;
};

struct state {
    weir_plugin *self;
    server *v;
    size_t n;
    pthread_mutex_t mu;    /* tools, refresh */
    mtool *tools;
};

/* jansson's iterators take non-const objects; they do not change them. */
static json_t *mut(const json_t *v) { return (json_t *)(uintptr_t)v; }

static int set_err(weir_error *err, int code, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int set_err(weir_error *err, int code, const char *fmt, ...) {
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    err->code = (weir_status)code;
    snprintf(err->plugin, sizeof err->plugin, "%s", PLUGIN_NAME);
    err->hook[0] = '\0';
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    return code;
}

/* ------------------------------------------------------------------------ */
/* Callbacks from mcp_server                                                 */
/* ------------------------------------------------------------------------ */

static void cb_log(void *ud, int level, const char *text) {
    server *s = ud;
    weir_log_level lv = level <= 0 ? WEIR_LOG_ERROR
                        : level == 1 ? WEIR_LOG_WARN
                        : level == 2 ? WEIR_LOG_INFO
                                     : WEIR_LOG_DEBUG;
    weir_log(s->st->self, lv, "%s", text);
}

/* What a running call gives the progress callback. */
typedef struct call_ctx {
    weir_tool_exec *exec;
    const mtool *tool;
} call_ctx;

static void cb_progress(void *ud, void *ctx, const json_t *params) {
    server *s = ud;
    call_ctx *cc = ctx;
    json_t *p = json_object();
    const char *keys[] = {"progress", "total", "message"};
    for (size_t i = 0; p && i < 3; i++) {
        json_t *v = json_object_get(params, keys[i]);
        if (v && i == 2 && json_is_string(v)) /* a copy up to a NUL it may hold */
            json_object_set_new(p, keys[i], json_string(json_string_value(v)));
        else if (v && i < 2 && json_is_number(v))
            json_object_set(p, keys[i], v);
    }
    if (p && json_object_get(p, "progress")) {
        json_object_set_new(p, "server", json_string(s->name));
        if (WEIR_API_HAS(weir__plugin_api, tool_exec_progress))
            weir_tool_exec_progress(cc->exec, p);
    }
    json_decref(p);
}

static bool cb_cancelled(void *ctx) {
    call_ctx *cc = ctx;
    weir_signal *sig = weir_tool_exec_signal(cc->exec);
    return sig && weir_signal_cancelled(sig);
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */
/* ------------------------------------------------------------------------ */

static int always_safe(const json_t *args, void *ud) {
    (void)args, (void)ud;
    return 1;
}

/* Fail the call with a scrubbed message. */
static int call_fail(weir_tool_exec *exec, const server *s, const char *code, int rc,
                     const char *fmt, ...) WEIR_PRINTF(5, 6);
static int call_fail(weir_tool_exec *exec, const server *s, const char *code, int rc,
                     const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *clean = NULL;
    if (pc_scrub(&s->secrets, buf, strlen(buf), &clean, NULL) != 0)
        weir_tool_exec_fail(exec, code, "MCP server '%s' failed (message withheld)", s->name);
    else
        weir_tool_exec_fail(exec, code, "%s", clean ? clean : buf);
    free(clean);
    return rc;
}

static void fmt_secs(long ms, char *buf, size_t size) {
    if (ms % 1000 == 0)
        snprintf(buf, size, "%ld s", ms / 1000);
    else
        snprintf(buf, size, "%g s", (double)ms / 1000.0);
}

static int exec_tool(weir_tool_exec *exec, const json_t *args, json_t **result, void *ud) {
    mtool *t = ud;
    server *s = t->srv;
    json_t *meta = json_object();
    const char *key = NULL;
    int attempt = 1;
    if (WEIR_API_HAS(weir__plugin_api, tool_exec_idempotency_key))
        key = weir_tool_exec_idempotency_key(exec);
    if (WEIR_API_HAS(weir__plugin_api, tool_exec_attempt))
        attempt = weir_tool_exec_attempt(exec);
    if (meta && key) {
        json_object_set_new(meta, "weir/idempotency_key", json_string(key));
        json_object_set_new(meta, "weir/attempt", json_integer(attempt > 0 ? attempt : 1));
    }
    json_t *arguments = args ? json_deep_copy(args) : json_object();
    json_t *params = meta && arguments ? json_pack("{s:s, s:o, s:o}", "name", t->mcp_name,
                                                   "arguments", arguments, "_meta", meta)
                                       : NULL;
    if (!params && !(meta && arguments)) {
        json_decref(meta);
        json_decref(arguments);
    }
    if (!params) {
        weir_tool_exec_fail(exec, "NOMEM", "out of memory");
        return WEIR_E_NOMEM;
    }
    call_ctx cc = {exec, t};
    json_t *res = NULL;
    char why[1024];
    mcp_status st = mcp_server_request(s->mcp, "tools/call", params, s->timeout_ms, cb_cancelled,
                                       &cc, &cc, &res, why, sizeof why);
    char tail[1200];
    switch (st) {
    case MCP_OK: {
        char mwhy[200];
        json_t *mapped = mcp_map_result(res, s->max_result, mwhy, sizeof mwhy);
        json_decref(res);
        if (!mapped)
            return call_fail(exec, s, "MCP_PROTOCOL", WEIR_E_TOOL,
                             "MCP server '%s' answered tool '%s' with an invalid result: %s",
                             s->name, t->mcp_name, mwhy);
        if (pc_scrub_json(&s->secrets, mapped) != 0) {
            json_decref(mapped);
            weir_tool_exec_fail(exec, "NOMEM", "out of memory");
            return WEIR_E_NOMEM;
        }
        *result = mapped;
        return WEIR_OK;
    }
    case MCP_RPC_ERROR:
        json_decref(res);
        return call_fail(exec, s, "MCP_ERROR", WEIR_E_TOOL,
                         "MCP server '%s' answered tool '%s' with an error: %s", s->name,
                         t->mcp_name, why);
    case MCP_TIMEOUT: {
        char secs[32];
        fmt_secs(s->timeout_ms, secs, sizeof secs);
        return call_fail(exec, s, "TIMEOUT", WEIR_E_TIMEOUT,
                         "MCP server '%s': tool '%s' timed out after %s (timeout_ms); the "
                         "server was told to cancel it", s->name, t->mcp_name, secs);
    }
    case MCP_CANCELLED:
        return call_fail(exec, s, "ABORTED", WEIR_E_CANCELLED,
                         "MCP server '%s': tool '%s' was cancelled with the turn; the server "
                         "was told to stop it", s->name, t->mcp_name);
    case MCP_DEAD:
        mcp_server_stderr_tail(s->mcp, 5, tail, sizeof tail);
        return call_fail(exec, s, "MCP_SERVER_EXITED", WEIR_E_TOOL,
                         "MCP server '%s' failed while tool '%s' ran: %s; it is started again "
                         "on the next call%s%s", s->name, t->mcp_name, why,
                         tail[0] ? ". The last lines of its stderr:" : "", tail);
    case MCP_DOWN:
        mcp_server_stderr_tail(s->mcp, 5, tail, sizeof tail);
        return call_fail(exec, s, "MCP_SERVER_DOWN", WEIR_E_TOOL,
                         "MCP server '%s' cannot run tool '%s': %s%s%s", s->name, t->mcp_name,
                         why, tail[0] ? ". The last lines of its stderr:" : "", tail);
    case MCP_PROTOCOL:
        return call_fail(exec, s, "MCP_PROTOCOL", WEIR_E_TOOL,
                         "MCP server '%s' broke the protocol answering tool '%s': %s", s->name,
                         t->mcp_name, why);
    case MCP_NOMEM:
    default:
        weir_tool_exec_fail(exec, "NOMEM", "out of memory");
        return WEIR_E_NOMEM;
    }
}

/* ------------------------------------------------------------------------ */
/* Tools of a server                                                         */
/* ------------------------------------------------------------------------ */

static bool listed(const json_t *names, const char *mcp_name, const char *weir_name) {
    size_t i;
    const json_t *v;
    json_array_foreach(names, i, v) {
        const char *n = json_string_value(v);
        if (n && (!strcmp(n, mcp_name) || !strcmp(n, weir_name)))
            return true;
    }
    return false;
}

static mtool *find_tool(state *st, const char *weir_name) {
    for (mtool *t = st->tools; t; t = t->next)
        if (!strcmp(t->weir_name, weir_name))
            return t;
    return NULL;
}

static void tool_free(mtool *t) {
    if (!t)
        return;
    json_decref(t->def);
    free(t->mcp_name);
    free(t->weir_name);
    free(t);
}

/*
 * Check one entry of tools/list; fills the weir tool (parameters borrowed
 * from `def`) and returns true when it is to be registered.
 */
static bool tool_spec(server *s, const json_t *def, char *weir_name, size_t size,
                      weir_tool *out, bool quiet) {
    state *st = s->st;
    const json_t *jname = json_object_get(def, "name");
    const char *name = json_string_value(jname);
    if (name && strlen(name) != json_string_length(jname)) {
        if (!quiet) {
            char *shown = mcp_frame_text(jname, false); /* "nul\u0000name" */
            weir_log(st->self, WEIR_LOG_WARN,
                     "MCP server '%s': tool %s is not offered: its name holds a NUL "
                     "character (\\u0000)", s->name, shown ? shown : "(out of memory)");
            free(shown);
        }
        return false;
    }
    if (!name || !*name) {
        if (!quiet)
            weir_log(st->self, WEIR_LOG_WARN, "MCP server '%s' listed a tool without a name: "
                                              "skipped", s->name);
        return false;
    }
    char why[96];
    if (!mcp_tool_name(s->name, name, weir_name, size, why, sizeof why)) {
        if (!quiet)
            weir_log(st->self, WEIR_LOG_WARN,
                     "MCP server '%s': tool '%s' is not offered: its name mcp__%s__%s %s, "
                     "which the model APIs refuse ([A-Za-z0-9_-], at most %d characters)",
                     s->name, name, s->name, name, why, MCP_TOOL_NAME_MAX);
        return false;
    }
    if ((s->allow && !listed(s->allow, name, weir_name)) ||
        (s->deny && listed(s->deny, name, weir_name)))
        return false;
    const json_t *exe = json_object_get(def, "execution");
    const char *task = json_string_value(json_object_get(exe, "taskSupport"));
    if (task && !strcmp(task, "required")) {
        if (!quiet)
            weir_log(st->self, WEIR_LOG_INFO,
                     "MCP server '%s': tool '%s' needs MCP tasks, which weir does not "
                     "support: not offered", s->name, name);
        return false;
    }
    const json_t *schema = json_object_get(def, "inputSchema");
    if (!json_is_object(schema)) {
        if (!quiet)
            weir_log(st->self, WEIR_LOG_WARN,
                     "MCP server '%s': tool '%s' has no inputSchema object: not offered",
                     s->name, name);
        return false;
    }
    const char *what = mcp_json_has_nul(schema) ? "inputSchema"
                       : mcp_json_has_nul(json_object_get(def, "description")) ? "description"
                       : mcp_json_has_nul(json_object_get(def, "title"))       ? "title"
                                                                               : NULL;
    if (what) {
        if (!quiet)
            weir_log(st->self, WEIR_LOG_WARN,
                     "MCP server '%s': tool '%s' is not offered: its %s holds a NUL character "
                     "(\\u0000)", s->name, name, what);
        return false;
    }
    const char *desc = json_string_value(json_object_get(def, "description"));
    if (!desc)
        desc = json_string_value(json_object_get(def, "title"));
    const json_t *ann = json_object_get(def, "annotations");
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->name = weir_name;
    out->description = desc ? desc : "";
    out->parameters = schema;
    out->flags = s->background ? WEIR_TOOL_BACKGROUND : 0;
    out->execute = exec_tool;
    out->concurrency_safe =
        json_is_true(json_object_get(ann, "readOnlyHint")) ? always_safe : NULL;
    return true;
}

/* Register the tools of `list` (borrowed) at init.  WEIR_OK or the registration's error. */
static int register_tools(server *s, const json_t *list, weir_error *err) {
    state *st = s->st;
    size_t i, count = 0;
    const json_t *def;
    json_array_foreach(list, i, def) {
        char weir_name[200];
        weir_tool wt;
        if (!tool_spec(s, def, weir_name, sizeof weir_name, &wt, false))
            continue;
        if (find_tool(st, weir_name)) {
            weir_log(st->self, WEIR_LOG_WARN, "MCP server '%s': a second tool named %s is not "
                                              "offered", s->name, weir_name);
            continue;
        }
        mtool *t = calloc(1, sizeof *t);
        if (t) {
            t->srv = s;
            t->mcp_name = strdup(json_string_value(json_object_get(def, "name")));
            t->weir_name = strdup(weir_name);
            t->read_only = wt.concurrency_safe != NULL;
            t->def = json_deep_copy(def);
        }
        if (!t || !t->mcp_name || !t->weir_name || !t->def) {
            tool_free(t);
            return set_err(err, WEIR_E_NOMEM, "out of memory");
        }
        wt.user_data = t;
        int rc = weir_tool_register(st->self, &wt);
        if (rc != WEIR_OK) {
            tool_free(t);
            return set_err(err, rc, "MCP server '%s': registering tool %s failed: %s", s->name,
                           weir_name, weir_strerror(rc));
        }
        t->live = true;
        t->next = st->tools;
        st->tools = t;
        count++;
    }
    size_t k;
    const json_t *a;
    json_array_foreach(s->allow, k, a) {
        bool found = false;
        json_array_foreach(list, i, def) {
            const char *n = json_string_value(json_object_get(def, "name"));
            char full[200];
            snprintf(full, sizeof full, "mcp__%s__%s", s->name, n ? n : "");
            if (n && (!strcmp(n, json_string_value(a)) || !strcmp(full, json_string_value(a))))
                found = true;
        }
        if (!found)
            weir_log(st->self, WEIR_LOG_WARN, "MCP server '%s': allow names '%s', which the "
                                              "server does not list", s->name,
                     json_string_value(a));
    }
    weir_log(st->self, WEIR_LOG_INFO, "MCP server '%s': %zu tools", s->name, count);
    return WEIR_OK;
}

/*
 * Between turns: a server that sent notifications/tools/list_changed (or was
 * started again) is listed again, and its tools are added, replaced or
 * removed (tool_update, tool_remove).  A request already built never
 * changes; the next turn's requests have the new list.
 */
static void refresh_server(server *s) {
    state *st = s->st;
    json_t *list = NULL;
    char why[900];
    if (mcp_server_list_tools(s->mcp, s->timeout_ms, &list, why, sizeof why) != MCP_OK) {
        weir_log(st->self, WEIR_LOG_WARN, "MCP server '%s': tools/list failed: %s; its tools "
                                          "stay as they were", s->name, why);
        json_decref(list);
        return;
    }
    size_t added = 0, changed = 0, removed = 0, i;
    const json_t *def;
    pthread_mutex_lock(&st->mu);
    for (mtool *t = st->tools; t; t = t->next)
        if (t->srv == s)
            t->seen = false;
    json_array_foreach(list, i, def) {
        char weir_name[200];
        weir_tool wt;
        const char *name = json_string_value(json_object_get(def, "name"));
        char probe[200];
        char pwhy[96];
        mtool *t = name && mcp_tool_name(s->name, name, probe, sizeof probe, pwhy, sizeof pwhy)
                       ? find_tool(st, probe)
                       : NULL;
        if (t && t->srv != s)
            continue; /* another server's tool of the same name: the first one stays */
        if (!tool_spec(s, def, weir_name, sizeof weir_name, &wt, t != NULL))
            continue;
        if (t && t->live && json_equal(t->def, def)) {
            t->seen = true;
            continue;
        }
        json_t *copy = json_deep_copy(def);
        if (!copy)
            continue;
        if (!t) {
            t = calloc(1, sizeof *t);
            if (!t || !(t->mcp_name = strdup(name)) || !(t->weir_name = strdup(weir_name))) {
                tool_free(t);
                json_decref(copy);
                continue;
            }
            t->srv = s;
            t->next = st->tools;
            st->tools = t;
        }
        wt.user_data = t;
        if (weir_tool_update(st->self, &wt) != WEIR_OK) {
            json_decref(copy);
            continue;
        }
        if (t->live)
            changed++;
        else
            added++;
        json_decref(t->def);
        t->def = copy;
        t->read_only = wt.concurrency_safe != NULL;
        t->live = t->seen = true;
    }
    for (mtool *t = st->tools; t; t = t->next) {
        if (t->srv == s && t->live && !t->seen) {
            /* the mtool stays allocated: a call dispatched before may still use it */
            if (weir_tool_remove(st->self, t->weir_name) == WEIR_OK) {
                t->live = false;
                removed++;
            }
        }
    }
    pthread_mutex_unlock(&st->mu);
    json_decref(list);
    if (added || changed || removed)
        weir_log(st->self, WEIR_LOG_INFO, "MCP server '%s': tools listed again: %zu added, %zu "
                                          "changed, %zu removed", s->name, added, changed,
                 removed);
}

/* session/event: at each turn/start, refresh the servers whose list changed. */
static json_t *on_session_event(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    state *st = ud;
    const json_t *ev = json_object_get(args, "event");
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type || strcmp(type, "turn/start") != 0)
        return json_null();
    for (size_t i = 0; i < st->n; i++) {
        server *s = &st->v[i];
        if (s->mcp && s->ok && mcp_server_take_list_changed(s->mcp))
            refresh_server(s);
    }
    return json_null();
}

/* ------------------------------------------------------------------------ */
/* Config                                                                    */
/* ------------------------------------------------------------------------ */

/* Claude Code's .mcp.json entry -> our keys (new object); NULL with err set. */
static json_t *import_entry(state *st, const char *file, const char *name, const json_t *e,
                            weir_error *err) {
    json_t *o = json_object();
    if (!o) {
        set_err(err, WEIR_E_NOMEM, "out of memory");
        return NULL;
    }
    const char *key;
    json_t *v;
    char unset[256] = "";
    json_object_foreach(mut(e), key, v) {
        if (!strcmp(key, "type")) {
            const char *t = json_string_value(v);
            if (!t || (strcmp(t, "stdio") && strcmp(t, "http") && strcmp(t, "streamable-http"))) {
                weir_log(st->self, WEIR_LOG_WARN,
                         "%s: server '%s' has type '%s', which weir does not support (stdio "
                         "and http): not started", file, name, t ? t : "?");
                json_decref(o);
                return json_null();
            }
            json_object_set(o, "type", v);
        } else if (!strcmp(key, "command") || !strcmp(key, "url") || !strcmp(key, "cwd")) {
            char *x = json_is_string(v) ? mcp_expand(json_string_value(v), unset, sizeof unset)
                                        : NULL;
            if (!x)
                goto bad;
            json_object_set_new(o, key, json_string(x));
            free(x);
        } else if (!strcmp(key, "args")) {
            if (!json_is_array(v))
                goto bad;
            json_t *arr = json_array();
            size_t i;
            json_t *a;
            json_array_foreach(v, i, a) {
                char *x = json_is_string(a) ? mcp_expand(json_string_value(a), unset,
                                                         sizeof unset)
                                            : NULL;
                if (!x) {
                    json_decref(arr);
                    goto bad;
                }
                json_array_append_new(arr, json_string(x));
                free(x);
            }
            json_object_set_new(o, "args", arr);
        } else if (!strcmp(key, "env") || !strcmp(key, "headers")) {
            if (!json_is_object(v))
                goto bad;
            json_t *m = json_object();
            const char *k2;
            json_t *a;
            json_object_foreach(v, k2, a) {
                char *x = json_is_string(a) ? mcp_expand(json_string_value(a), unset,
                                                         sizeof unset)
                                            : NULL;
                if (!x) {
                    json_decref(m);
                    goto bad;
                }
                json_object_set_new(m, k2, json_string(x));
                free(x);
            }
            json_object_set_new(o, key, m);
        } else if (!strcmp(key, "timeout")) {
            if (!json_is_integer(v) || json_integer_value(v) < 1)
                goto bad;
            json_object_set(o, "timeout_ms", v);
        } else {
            weir_log(st->self, WEIR_LOG_WARN, "%s: server '%s': '%s' is not supported by weir "
                                              "and is ignored", file, name, key);
        }
        continue;
    bad:
        json_decref(o);
        set_err(err, WEIR_E_PLUGIN_CONFIG, "%s: server '%s': '%s' has an invalid value", file,
                name, key);
        return NULL;
    }
    if (unset[0])
        weir_log(st->self, WEIR_LOG_WARN, "%s: server '%s': unset variables left as written: %s",
                 file, name, unset);
    return o;
}

/* The composed server specs: .mcp.json's, then `servers` over them (new object). */
static json_t *compose_servers(state *st, const json_t *config, weir_error *err) {
    json_t *all = json_object();
    if (!all) {
        set_err(err, WEIR_E_NOMEM, "out of memory");
        return NULL;
    }
    const char *file = json_string_value(json_object_get(config, "mcp_config"));
    json_t *imported = json_object();
    if (file) {
        json_error_t jerr;
        json_t *doc = json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
        const json_t *ms = json_object_get(doc, "mcpServers");
        if (!doc || (ms && !json_is_object(ms)) || !json_is_object(doc)) {
            set_err(err, WEIR_E_PLUGIN_CONFIG, "mcp_config %s: %s", file,
                    !doc ? jerr.text : "want an object with mcpServers");
            json_decref(doc);
            json_decref(all);
            json_decref(imported);
            return NULL;
        }
        const char *name;
        json_t *e;
        json_object_foreach(mut(ms), name, e) {
            if (!json_is_object(e)) {
                set_err(err, WEIR_E_PLUGIN_CONFIG, "mcp_config %s: server '%s' is not an object",
                        file, name);
                json_decref(doc);
                json_decref(all);
                json_decref(imported);
                return NULL;
            }
            json_t *o = import_entry(st, file, name, e, err);
            if (!o) {
                json_decref(doc);
                json_decref(all);
                json_decref(imported);
                return NULL;
            }
            if (json_is_null(o))
                json_object_set_new(imported, name, o); /* unsupported: remembered, skipped */
            else
                json_object_set_new(all, name, o);
        }
        json_decref(doc);
    }
    const char *name;
    json_t *e;
    json_object_foreach(json_object_get(config, "servers"), name, e) {
        json_t *base = json_object_get(all, name);
        bool has_transport = json_object_get(e, "command") || json_object_get(e, "url");
        if (!base && !has_transport) {
            set_err(err, WEIR_E_PLUGIN_CONFIG,
                    "server '%s': give \"command\" (stdio) or \"url\" (HTTP)%s", name,
                    json_object_get(imported, name)
                        ? ": its mcp_config entry has a transport weir does not support"
                        : file ? ", or name a server of mcp_config" : "");
            json_decref(all);
            json_decref(imported);
            return NULL;
        }
        if (base && has_transport) {
            json_object_set_new(all, name, json_deep_copy(e)); /* replaces it */
        } else if (base) {
            json_object_update(base, e);
        } else {
            json_object_set_new(all, name, json_deep_copy(e));
        }
    }
    json_decref(imported);
    return all;
}

static char **strv_new(size_t n) { return calloc(n + 1, sizeof(char *)); }

static void strv_free(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* The server's environment: the inherited names, then the configured ones. */
static char **make_env(const json_t *env) {
    size_t n = json_object_size(env) + sizeof inherited_env / sizeof inherited_env[0];
    char **v = strv_new(n);
    size_t at = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; inherited_env[i]; i++) {
        const char *val = getenv(inherited_env[i]);
        if (!val || json_object_get(env, inherited_env[i]) || !strncmp(val, "()", 2))
            continue;
        if (asprintf(&v[at], "%s=%s", inherited_env[i], val) < 0) {
            v[at] = NULL;
            strv_free(v);
            return NULL;
        }
        at++;
    }
    const char *k;
    json_t *val;
    json_object_foreach(mut(env), k, val) {
        if (asprintf(&v[at], "%s=%s", k, json_string_value(val)) < 0) {
            v[at] = NULL;
            strv_free(v);
            return NULL;
        }
        at++;
    }
    return v;
}

static long int_or(const json_t *o, const char *k, long dflt) {
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long)json_integer_value(v) : dflt;
}

/* Set up server `s` from its spec (validated); the mcp_server is created, not started. */
static int server_setup(state *st, server *s, const char *name, const json_t *spec,
                        weir_error *err) {
    s->st = st;
    s->name = strdup(name);
    if (!s->name)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    if (!mcp_name_ok(name, 32))
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "server name '%s' must be 1 to 32 of [A-Za-z0-9_-] (it is part of the "
                       "tool names, mcp__<server>__<tool>)", name);
    const char *type = json_string_value(json_object_get(spec, "type"));
    const char *command = json_string_value(json_object_get(spec, "command"));
    const char *url = json_string_value(json_object_get(spec, "url"));
    if (command && url)
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "server '%s': give either \"command\" (stdio) or \"url\" (HTTP), not both",
                       name);
    if (!command && !url)
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "server '%s': give \"command\" (stdio) or \"url\" (HTTP)", name);
    bool http = url != NULL;
    if (type && (!strcmp(type, "stdio") ? http : !http))
        return set_err(err, WEIR_E_PLUGIN_CONFIG, "server '%s': type '%s' needs \"%s\"", name,
                       type, http ? "command" : "url");
    static const char *const stdio_only[] = {"args", "env", "secret_env", "cwd", NULL};
    for (size_t i = 0; http && stdio_only[i]; i++)
        if (json_object_get(spec, stdio_only[i]))
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "server '%s': \"%s\" is for a stdio server (one with \"command\")",
                           name, stdio_only[i]);
    if (!http && json_object_get(spec, "headers"))
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "server '%s': \"headers\" is for an HTTP server (one with \"url\")", name);
    if (http && strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return set_err(err, WEIR_E_PLUGIN_CONFIG,
                       "server '%s': url '%s' is not an http:// or https:// URL", name, url);
    s->timeout_ms = int_or(spec, "timeout_ms", DEFAULT_TIMEOUT_MS);
    s->startup_timeout_ms = int_or(spec, "startup_timeout_ms", DEFAULT_STARTUP_MS);
    s->max_result = (size_t)int_or(spec, "max_result_bytes", (long)DEFAULT_MAX_RESULT);
    s->required = !json_is_false(json_object_get(spec, "required"));
    s->background = json_is_true(json_object_get(spec, "background"));
    s->allow = json_incref(json_object_get(spec, "allow"));
    s->deny = json_incref(json_object_get(spec, "deny"));

    /* secrets, scrubbed from everything the server sends: the values of the
     * env variables whose names look secret or that secret_env lists, and of
     * the credential headers (and the credentials after a header's scheme).
     * Ordinary configuration (DATA_DIR=/srv/data, PORT=8080) is not one:
     * scrubbing it would rewrite the results the model acts on. */
    const json_t *env = json_object_get(spec, "env");
    const char *k;
    json_t *v;
    size_t si;
    json_array_foreach(json_object_get(spec, "secret_env"), si, v) {
        if (!json_object_get(env, json_string_value(v)))
            return set_err(err, WEIR_E_PLUGIN_CONFIG,
                           "server '%s': secret_env names '%s', which its env does not set",
                           name, json_string_value(v));
    }
    json_object_foreach(mut(env), k, v) {
        if (!mcp_env_name_secret(k) && !listed(json_object_get(spec, "secret_env"), k, k))
            continue;
        if (pc_secrets_add(&s->secrets, json_string_value(v)) != 0)
            return set_err(err, WEIR_E_NOMEM, "out of memory");
    }
    if (http) {
        /* a password in the URL's userinfo (http://user:password@host/) */
        const char *auth = strstr(url, "://") + 3;
        const char *at = strchr(auth, '@');
        const char *end = strpbrk(auth, "/?#");
        const char *colon = at && (!end || at < end) ? memchr(auth, ':', (size_t)(at - auth))
                                                     : NULL;
        if (colon && colon + 1 < at) {
            char *pw = strndup(colon + 1, (size_t)(at - colon - 1));
            int arc = pw ? pc_secrets_add(&s->secrets, pw) : -1;
            free(pw);
            if (arc != 0)
                return set_err(err, WEIR_E_NOMEM, "out of memory");
        }
    }
    size_t nh = json_object_size(json_object_get(spec, "headers"));
    char **headers = strv_new(nh);
    char **argv = NULL, **envp = NULL;
    int rc = WEIR_OK;
    size_t hi = 0;
    if (!headers)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    json_object_foreach(json_object_get(spec, "headers"), k, v) {
        const char *val = json_string_value(v);
        if (strpbrk(k, ":\r\n ") || !*k || strpbrk(val, "\r\n")) {
            rc = set_err(err, WEIR_E_PLUGIN_CONFIG,
                         "server '%s': header '%s' has a name or value that cannot be sent", name,
                         k);
            goto out;
        }
        const char *sp = strchr(val, ' ');
        bool secret = mcp_header_name_secret(k);
        if ((secret && pc_secrets_add(&s->secrets, val) != 0) ||
            (secret && sp && pc_secrets_add(&s->secrets, sp + 1)) ||
            asprintf(&headers[hi], "%s: %s", k, val) < 0) {
            headers[hi] = NULL;
            rc = set_err(err, WEIR_E_NOMEM, "out of memory");
            goto out;
        }
        hi++;
    }
    if (!http) {
        const json_t *args = json_object_get(spec, "args");
        argv = strv_new(json_array_size(args) + 1);
        envp = make_env(json_object_get(spec, "env"));
        if (!argv || !envp || !(argv[0] = strdup(command))) {
            rc = set_err(err, WEIR_E_NOMEM, "out of memory");
            goto out;
        }
        size_t i;
        json_array_foreach(args, i, v) {
            if (!(argv[i + 1] = strdup(json_string_value(v)))) {
                rc = set_err(err, WEIR_E_NOMEM, "out of memory");
                goto out;
            }
        }
    }
    mcp_server_cfg cfg = {
        .name = name,
        .kind = http ? MCP_HTTP : MCP_STDIO,
        .argv = argv,
        .envp = envp,
        .cwd = json_string_value(json_object_get(spec, "cwd")),
        .url = url,
        .headers = headers,
        .startup_timeout_ms = s->startup_timeout_ms,
        .grace_ms = 2000,
        .max_message = (size_t)int_or(spec, "max_message_bytes", (long)DEFAULT_MAX_MESSAGE),
        .secrets = &s->secrets,
        .log = cb_log,
        .progress = cb_progress,
        .ud = s,
    };
    s->mcp = mcp_server_create(&cfg);
    if (!s->mcp)
        rc = set_err(err, WEIR_E_NOMEM, "out of memory");
out:
    strv_free(headers);
    strv_free(argv);
    strv_free(envp);
    return rc;
}

static void server_clear(server *s) {
    mcp_server_destroy(s->mcp);
    s->mcp = NULL;
    json_decref(s->allow);
    json_decref(s->deny);
    pc_secrets_clear(&s->secrets);
    free(s->name);
}

static void state_free(state *st) {
    if (!st)
        return;
    for (size_t i = 0; i < st->n; i++)
        server_clear(&st->v[i]);
    free(st->v);
    while (st->tools) {
        mtool *t = st->tools;
        st->tools = t->next;
        tool_free(t);
    }
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* Start one server and register its tools; a failure of a required one is the load error. */
static int server_load(server *s, weir_error *err) {
    state *st = s->st;
    char why[900];
    char tail[1400];
    json_t *list = NULL;
    if (mcp_server_start(s->mcp, why, sizeof why) == 0) {
        json_t *caps = mcp_server_capabilities(s->mcp);
        bool has_tools = json_object_get(caps, "tools") != NULL;
        json_decref(caps);
        if (!has_tools) {
            weir_log(st->self, WEIR_LOG_WARN, "MCP server '%s' does not offer tools", s->name);
            s->ok = true;
            return WEIR_OK;
        }
        mcp_status ls = mcp_server_list_tools(s->mcp, s->startup_timeout_ms, &list, why,
                                              sizeof why);
        if (ls == MCP_OK) {
            (void)mcp_server_take_list_changed(s->mcp); /* the list is fresh */
            int rc = register_tools(s, list, err);
            json_decref(list);
            s->ok = rc == WEIR_OK;
            return rc;
        }
        char w2[sizeof why];
        memcpy(w2, why, sizeof w2);
        snprintf(why, sizeof why, "tools/list failed: %.800s", w2);
    }
    mcp_server_stderr_tail(s->mcp, STDERR_QUOTED, tail, sizeof tail);
    char *msg = NULL;
    if (asprintf(&msg, "MCP server '%s' failed to start: %s%s%s", s->name, why,
                 tail[0] ? ". The last lines of its stderr:" : " (it wrote nothing on stderr)",
                 tail) < 0)
        msg = NULL;
    char *clean = NULL;
    if (msg && pc_scrub(&s->secrets, msg, strlen(msg), &clean, NULL) == 0 && clean) {
        free(msg);
        msg = clean;
    }
    if (s->required) {
        set_err(err, WEIR_E_PLUGIN_INIT, "%s", msg ? msg : "out of memory");
        free(msg);
        return WEIR_E_PLUGIN_INIT;
    }
    weir_log(st->self, WEIR_LOG_WARN, "%s; it is not required, so its tools are absent",
             msg ? msg : "MCP server failed");
    free(msg);
    /* stop it: a server that is not started at load is not started later */
    mcp_server_destroy(s->mcp);
    s->mcp = NULL;
    return WEIR_OK;
}

static int mcp_init(weir_plugin *self, const weir_api *api, const json_t *config,
                    weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    state *st = calloc(1, sizeof *st);
    if (!st)
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    st->self = self;
    pthread_mutex_init(&st->mu, NULL);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    json_t *servers = compose_servers(st, config, err);
    if (!servers) {
        state_free(st);
        return err ? (int)err->code : WEIR_E_PLUGIN_CONFIG;
    }
    st->v = calloc(json_object_size(servers) + 1, sizeof *st->v);
    if (!st->v) {
        json_decref(servers);
        state_free(st);
        return set_err(err, WEIR_E_NOMEM, "out of memory");
    }
    const char *name;
    json_t *spec;
    int rc = WEIR_OK;
    json_object_foreach(servers, name, spec) {
        rc = server_setup(st, &st->v[st->n], name, spec, err);
        st->n++;
        if (rc != WEIR_OK)
            break;
    }
    json_decref(servers);
    for (size_t i = 0; rc == WEIR_OK && i < st->n; i++)
        rc = server_load(&st->v[i], err);
    if (rc != WEIR_OK) {
        state_free(st);
        return rc;
    }
    weir_plugin_set_data(self, st);
    if (WEIR_API_HAS(api, tool_update) && WEIR_API_HAS(api, tool_remove)) {
        weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
        o.user_data = st;
        rc = weir_hook_register(self, "session/event", on_session_event, &o);
        if (rc != WEIR_OK) {
            weir_plugin_set_data(self, NULL);
            state_free(st);
            return set_err(err, rc, "cannot register session/event: %s", weir_strerror(rc));
        }
    }
    return WEIR_OK;
}

static void mcp_fini(weir_plugin *self) {
    state_free(weir_plugin_data(self));
    weir_plugin_set_data(self, NULL);
}

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    .name = PLUGIN_NAME,
    .version = "0.1.0",
    .description = "tools of Model Context Protocol servers (stdio and Streamable HTTP), "
                   "named mcp__<server>__<tool>",
    .config_schema = config_schema,
    .init = mcp_init,
    .fini = mcp_fini,
};

WEIR_PLUGIN_DEFINE(desc)
