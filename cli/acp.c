/*
 * cli/acp.c - `weir acp`: an Agent Client Protocol agent over stdio
 * (docs/acp.md), the protocol editors such as Zed speak to coding agents.
 *
 * JSON-RPC 2.0, one message per line: requests and notifications from the
 * client on stdin; responses, `session/update` notifications and our own
 * `session/request_permission` requests on stdout, and nothing else there
 * (diagnostics go to stderr).  Threads: the main thread reads and answers
 * every message; each session has a driver thread that runs its prompts
 * (weir_agent_send, weir_agent_run_until_idle) and answers them, so a
 * `session/cancel` or a permission answer is read while a prompt runs.
 * Every stdout line is written whole under `out_mu`.  A session whose
 * client named MCP servers gets a host of its own: the deployment with one
 * more tools-mcp row for those servers (docs/acp.md, "MCP servers").  End
 * of input ends the process: running prompts are cancelled and every
 * session is closed.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_LINE (16u << 20) /* longer messages are refused (-32600) */
#define ACP_PROTOCOL_VERSION 1
#define MCP_ROW_ID "acp-mcp" /* the tools-mcp row a session's MCP servers get */

/* JSON-RPC 2.0 error codes (ACP's ErrorCode). */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL_ERROR (-32603)
#define RPC_NOT_FOUND (-32002) /* ACP: resource not found (an unknown session) */

typedef struct acp acp;

typedef struct acp_session {
    acp *a;
    char id[129];
    bool ready;          /* opened: id and agent are set (events before are the open's own) */
    weir_host *own_host; /* the host with the client's MCP servers, or NULL (a->host) */
    weir_agent *agent;
    pthread_t th;
    bool th_started;
    /* under a->mu */
    json_t *prompt_id;  /* the running session/prompt's request id (owned), or NULL */
    json_t *prompt_msg; /* its user message until the driver takes it (owned) */
    bool cancelled;     /* a session/cancel came for the running prompt */
    bool stopping;      /* end of input: the driver thread exits */
    bool broken;        /* the agent stopped after an error (its log): prompts are refused */
    json_int_t perm_id; /* our session/request_permission waiting for its answer, or -1 */
    json_t *perm_answer; /* ... its response once it came (owned) */
    json_t *always;      /* {tool: "allow"|"deny"}: the client's allow_always, reject_always */
    struct acp_session *next;
} acp_session;

struct acp {
    weir_cli_files files;
    weir_host *host; /* the deployment's */
    pthread_mutex_t out_mu; /* stdout */
    pthread_mutex_t mu;     /* the sessions' fields marked so, next_id, sessions */
    pthread_cond_t cv;
    acp_session *sessions;
    json_int_t next_id; /* of our own requests to the client */
    bool initialized;
};

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

/* Write one message as one line on stdout; steals `msg`. */
static void put(acp *a, json_t *msg) {
    char *line = msg ? weir_cli_json_line(msg) : NULL;
    json_decref(msg);
    if (!line) {
        fprintf(stderr, "weir acp: out of memory, a message was dropped\n");
        return;
    }
    pthread_mutex_lock(&a->out_mu);
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    pthread_mutex_unlock(&a->out_mu);
    free(line);
}

/* The response {jsonrpc, id, result} to request `id` (borrowed); steals `result`. */
static void put_result(acp *a, const json_t *id, json_t *result) {
    if (!result) {
        fprintf(stderr, "weir acp: out of memory, a response was dropped\n");
        return;
    }
    put(a, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* The error response {jsonrpc, id, error:{code, message}} (`id` borrowed; NULL: null). */
static void put_error(acp *a, const json_t *id, int code, const char *fmt, ...) WEIR_PRINTF(4, 5);
static void put_error(acp *a, const json_t *id, int code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *m = json_string(msg);
    put(a, json_pack("{s:s, s:O, s:{s:i, s:o}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", m ? m : json_string("invalid input")));
}

/* A session/update notification of session `s`; steals `update`. */
static void put_update(acp_session *s, json_t *update) {
    if (!update) {
        fprintf(stderr, "weir acp: out of memory, a session/update was dropped\n");
        return;
    }
    put(s->a, json_pack("{s:s, s:s, s:{s:s, s:o}}", "jsonrpc", "2.0", "method", "session/update",
                        "params", "sessionId", s->id, "update", update));
}

/* A content chunk update (user_message_chunk, agent_message_chunk,
 * agent_thought_chunk) of one text. */
static void put_chunk(acp_session *s, const char *kind, const char *text) {
    if (text && *text)
        put_update(s, json_pack("{s:s, s:{s:s, s:s}}", "sessionUpdate", kind, "content", "type",
                                "text", "text", text));
}

/* ------------------------------------------------------------------------ */
/* weir's events as session/update                                           */
/* ------------------------------------------------------------------------ */

/* A tool call's arguments (JSON text) as rawInput: the parsed value, or the
 * text itself when it is not JSON.  New reference. */
static json_t *raw_input(const char *arguments) {
    json_t *v = arguments && *arguments ? json_loads(arguments, JSON_DECODE_ANY, NULL) : NULL;
    return v ? v : json_string(arguments ? arguments : "");
}

/* The text of a tool result's content (a string, or blocks whose text ones
 * are joined with newlines).  New reference, a string. */
static json_t *result_text(const json_t *content) {
    if (json_is_string(content))
        return json_string(json_string_value(content));
    json_t *out = json_string("");
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        const char *t = json_string_value(json_object_get(b, "text"));
        if (!t || !out)
            continue;
        const char *prev = json_string_value(out);
        size_t n = strlen(prev);
        char *joined = malloc(n + strlen(t) + 2);
        if (!joined) {
            json_decref(out);
            return NULL;
        }
        memcpy(joined, prev, n);
        if (n)
            joined[n++] = '\n';
        strcpy(joined + n, t);
        json_string_set(out, joined);
        free(joined);
    }
    return out;
}

/* tool_call: the call as the model made it, waiting to run. */
static void put_tool_call(acp_session *s, const json_t *data) {
    const char *id = json_string_value(json_object_get(data, "call_id"));
    const char *name = json_string_value(json_object_get(data, "name"));
    json_t *input = raw_input(json_string_value(json_object_get(data, "arguments")));
    if (!id || !name || !input) {
        json_decref(input);
        return;
    }
    put_update(s, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "sessionUpdate", "tool_call",
                            "toolCallId", id, "title", name, "kind", "other", "status", "pending",
                            "rawInput", input));
}

/* tool_call_update with the result: completed, or failed for an error result. */
static void put_tool_result(acp_session *s, const json_t *data) {
    const json_t *content = json_object_get(json_object_get(data, "message"), "content");
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        const char *id = json_string_value(json_object_get(b, "call_id"));
        if (!id)
            continue;
        json_t *text = result_text(json_object_get(b, "content"));
        if (!text)
            continue;
        bool failed = json_is_true(json_object_get(b, "is_error"));
        put_update(s, json_pack("{s:s, s:s, s:s, s:[{s:s, s:{s:s, s:O}}], s:{s:O}}",
                                "sessionUpdate", "tool_call_update", "toolCallId", id, "status",
                                failed ? "failed" : "completed", "content", "type", "content",
                                "content", "type", "text", "text", text, "rawOutput", "text",
                                text));
        json_decref(text);
    }
}

/* The agent's events while a prompt runs: the model's text and reasoning as
 * they stream, each tool call and its result. */
static void on_event(const json_t *event, bool durable, void *ud) {
    acp_session *s = ud;
    const char *type = json_string_value(json_object_get(event, "type"));
    const json_t *data = json_object_get(event, "data");
    /* what the open itself logs (a resumed session's closers) is in the
     * log, so session/load replays it */
    if (!type || !s->ready)
        return;
    if (!durable && !strcmp(type, "agent/assistant-stream")) {
        const json_t *frame = json_object_get(data, "frame");
        const json_t *chunk = json_object_get(frame, "chunk");
        const char *ct = json_string_value(json_object_get(chunk, "type"));
        const char *text = json_string_value(json_object_get(chunk, "text"));
        if (ct && !strcmp(ct, "text-delta"))
            put_chunk(s, "agent_message_chunk", text);
        else if (ct && !strcmp(ct, "reasoning-delta"))
            put_chunk(s, "agent_thought_chunk", text);
    } else if (durable && !strcmp(type, "tool/call")) {
        put_tool_call(s, data);
    } else if (durable && !strcmp(type, "tool/result")) {
        put_tool_result(s, data);
    } else if (durable && !strcmp(type, "turn/start")) {
        /* a cancel that came before the turn began (its input was claimed
         * first) still ends it */
        pthread_mutex_lock(&s->a->mu);
        bool cancel = s->cancelled, stopping = s->stopping;
        pthread_mutex_unlock(&s->a->mu);
        if (cancel || stopping)
            weir_agent_cancel(s->agent, stopping ? "disposed" : "user", false);
    }
}

/* tools/pre-execute, innermost (this agent's own listener): every
 * deployment listener, an approval included, let the call run, so it is
 * in_progress now. */
static json_t *on_pre_execute(weir_call *call, const json_t *args, void *ud) {
    acp_session *s = ud;
    json_t *res = weir_host_api()->next(call);
    const char *kind = json_string_value(json_object_get(res, "kind"));
    const char *id = json_string_value(json_object_get(args, "call_id"));
    if (kind && !strcmp(kind, "allow") && id)
        put_update(s, json_pack("{s:s, s:s, s:s}", "sessionUpdate", "tool_call_update",
                                "toolCallId", id, "status", "in_progress"));
    return res;
}

/* session/load: one logged event as the updates a live prompt sent. */
static bool replay_event(json_t *ev, void *ud) {
    acp_session *s = ud;
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *data = json_object_get(ev, "data");
    if (!type)
        return true;
    if (!strcmp(type, "user/message") || !strcmp(type, "assistant/message")) {
        bool user = type[0] == 'u';
        const json_t *message = json_object_get(data, "message");
        const json_t *content = json_object_get(message, "content");
        const char *kind =
            json_string_value(json_object_get(json_object_get(message, "source"), "kind"));
        /* what the user said (a prompt, a steer); not what weir added to the
         * model's context (a hook's context, a job's result, the note after
         * an interrupted answer, a system update) */
        if (user && kind && strcmp(kind, "human") != 0 && strcmp(kind, "steer") != 0)
            return true;
        if (json_is_string(content)) {
            put_chunk(s, user ? "user_message_chunk" : "agent_message_chunk",
                      json_string_value(content));
            return true;
        }
        size_t i;
        const json_t *b;
        json_array_foreach(content, i, b) {
            const char *bt = json_string_value(json_object_get(b, "type"));
            const char *text = json_string_value(json_object_get(b, "text"));
            if (bt && !strcmp(bt, "text"))
                put_chunk(s, user ? "user_message_chunk" : "agent_message_chunk", text);
            else if (bt && !strcmp(bt, "reasoning") && !user)
                put_chunk(s, "agent_thought_chunk", text);
        }
    } else if (!strcmp(type, "tool/call")) {
        put_tool_call(s, data);
    } else if (!strcmp(type, "tool/result")) {
        put_tool_result(s, data);
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Permissions: weir's approval channel as session/request_permission        */
/* ------------------------------------------------------------------------ */

/* The agent's approver: ask the client with session/request_permission and
 * wait for its answer.  allow_once and allow_always allow, reject_once and
 * reject_always deny; the *_always answers hold for the tool for the rest of
 * the session in this process.  A cancel, the end of input or a cancelled
 * outcome denies. */
static int approve(weir_agent *agent, const json_t *request, json_t **decision, void *ud) {
    acp_session *s = ud;
    acp *a = s->a;
    (void)agent;
    const char *tool = json_string_value(json_object_get(request, "tool"));
    const char *call_id = json_string_value(json_object_get(request, "call_id"));
    const char *reason = json_string_value(json_object_get(request, "reason"));
    if (!tool || !call_id)
        return WEIR_E_INVAL;
    pthread_mutex_lock(&a->mu);
    const char *always = json_string_value(json_object_get(s->always, tool));
    if (always) {
        *decision = json_pack("{s:s, s:s}", "decision", always, "reason",
                              !strcmp(always, "allow") ? "allowed always by the client"
                                                       : "rejected always by the client");
        pthread_mutex_unlock(&a->mu);
        return *decision ? WEIR_OK : WEIR_E_NOMEM;
    }
    if (s->stopping || s->cancelled || s->perm_id >= 0) {
        pthread_mutex_unlock(&a->mu);
        return WEIR_E_CANCELLED;
    }
    json_int_t id = a->next_id++;
    s->perm_id = id;
    pthread_mutex_unlock(&a->mu);

    json_t *input = json_deep_copy(json_object_get(request, "arguments"));
    json_t *call = json_pack("{s:s, s:s, s:s, s:s, s:o}", "toolCallId", call_id, "title", tool,
                             "kind", "other", "status", "pending", "rawInput",
                             input ? input : json_object());
    if (call && reason)
        json_object_set_new(call, "content",
                            json_pack("[{s:s, s:{s:s, s:s}}]", "type", "content", "content", "type",
                                      "text", "text", reason));
    json_t *msg = call ? json_pack("{s:s, s:I, s:s, s:{s:s, s:o, s:["
                                   "{s:s, s:s, s:s}, {s:s, s:s, s:s},"
                                   "{s:s, s:s, s:s}, {s:s, s:s, s:s}]}}",
                                   "jsonrpc", "2.0", "id", id, "method",
                                   "session/request_permission", "params", "sessionId", s->id,
                                   "toolCall", call, "options", "optionId", "allow_once", "name",
                                   "Allow", "kind", "allow_once", "optionId", "allow_always",
                                   "name", "Always allow", "kind", "allow_always", "optionId",
                                   "reject_once", "name", "Reject", "kind", "reject_once",
                                   "optionId", "reject_always", "name", "Always reject", "kind",
                                   "reject_always")
                       : NULL;
    if (!msg) {
        pthread_mutex_lock(&a->mu);
        s->perm_id = -1;
        pthread_mutex_unlock(&a->mu);
        return WEIR_E_NOMEM;
    }
    put(a, msg);

    pthread_mutex_lock(&a->mu);
    while (!s->perm_answer && !s->stopping && !s->cancelled)
        pthread_cond_wait(&a->cv, &a->mu);
    json_t *answer = s->perm_answer;
    s->perm_answer = NULL;
    s->perm_id = -1;
    pthread_mutex_unlock(&a->mu);
    if (!answer)
        return WEIR_E_CANCELLED;

    const json_t *outcome = json_object_get(json_object_get(answer, "result"), "outcome");
    const char *kind = json_string_value(json_object_get(outcome, "outcome"));
    const char *option = json_string_value(json_object_get(outcome, "optionId"));
    const char *rpc_error = json_string_value(json_object_get(json_object_get(answer, "error"),
                                                              "message"));
    char why[600];
    const char *d = "deny";
    if (rpc_error) {
        snprintf(why, sizeof why, "the client failed the permission request: %.500s", rpc_error);
    } else if (kind && !strcmp(kind, "cancelled")) {
        snprintf(why, sizeof why, "the client cancelled the permission request");
    } else if (kind && !strcmp(kind, "selected") && option &&
               (!strcmp(option, "allow_once") || !strcmp(option, "allow_always"))) {
        d = "allow";
        snprintf(why, sizeof why, "allowed by the client (%s)", option);
    } else if (kind && !strcmp(kind, "selected") && option &&
               (!strcmp(option, "reject_once") || !strcmp(option, "reject_always"))) {
        snprintf(why, sizeof why, "rejected by the client (%s)", option);
    } else {
        snprintf(why, sizeof why, "the client's answer names no option weir offered");
        option = NULL;
    }
    if (option && strstr(option, "_always")) {
        pthread_mutex_lock(&a->mu);
        if (!s->always)
            s->always = json_object();
        if (s->always)
            json_object_set_new(s->always, tool, json_string(d));
        pthread_mutex_unlock(&a->mu);
    }
    json_decref(answer);
    *decision = json_pack("{s:s, s:s}", "decision", d, "reason", why);
    return *decision ? WEIR_OK : WEIR_E_NOMEM;
}

/* ------------------------------------------------------------------------ */
/* The driver thread: one prompt at a time                                   */
/* ------------------------------------------------------------------------ */

/* The number of the agent's last ended turn (0: none, or unknown). */
static int last_turn_number(acp_session *s) {
    weir_turn_outcome t = WEIR_TURN_OUTCOME_INIT;
    weir_error err;
    weir_error_clear(&err);
    int n = weir_agent_last_turn(s->agent, &t, &err) == WEIR_OK ? t.turn : 0;
    weir_turn_outcome_clear(&t);
    return n;
}

/* The stopReason of the turn that just ended (or an error response); the
 * turn before the prompt was `before`. */
static void answer_prompt(acp_session *s, const json_t *id, bool cancelled, int before) {
    if (cancelled) {
        put_result(s->a, id, json_pack("{s:s}", "stopReason", "cancelled"));
        return;
    }
    weir_turn_outcome t = WEIR_TURN_OUTCOME_INIT;
    weir_error err;
    weir_error_clear(&err);
    if (weir_agent_last_turn(s->agent, &t, &err) != WEIR_OK) {
        put_error(s->a, id, RPC_INTERNAL_ERROR, "session/prompt: %s", err.text);
        return;
    }
    static const struct {
        const char *kind, *stop;
    } map[] = {{"completed", "end_turn"}, {"max-tokens", "max_tokens"},
               {"aborted", "cancelled"},  {"interrupted", "cancelled"},
               {"blocked", "refusal"}};
    const char *stop = NULL;
    for (size_t i = 0; t.turn > before && !stop && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(t.kind, map[i].kind))
            stop = map[i].stop;
    if (stop)
        put_result(s->a, id, json_pack("{s:s}", "stopReason", stop));
    else if (t.turn > before && !strcmp(t.kind, "error"))
        put_error(s->a, id, RPC_INTERNAL_ERROR, "session/prompt: the turn failed: %s: %s",
                  t.failure_code, t.failure_message);
    else
        put_error(s->a, id, RPC_INTERNAL_ERROR, "session/prompt: no turn ran (%s)",
                  t.turn > before ? t.kind : "the input was not taken");
    weir_turn_outcome_clear(&t);
}

static void *driver_main(void *arg) {
    acp_session *s = arg;
    acp *a = s->a;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!s->prompt_msg && !s->stopping)
            pthread_cond_wait(&a->cv, &a->mu);
        if (s->stopping)
            break;
        json_t *msg = s->prompt_msg;
        s->prompt_msg = NULL;
        json_t *id = json_incref(s->prompt_id);
        bool cancelled = s->cancelled;
        pthread_mutex_unlock(&a->mu);

        weir_error err;
        weir_error_clear(&err);
        int rc = WEIR_OK, before = last_turn_number(s);
        bool sent = false;
        if (!cancelled) {
            rc = weir_agent_send(s->agent, msg, WEIR_SEND_FOLLOWUP, NULL, &err);
            if (rc != WEIR_OK)
                put_error(a, id, rc == WEIR_E_LIMIT || rc == WEIR_E_INVAL ? RPC_INVALID_PARAMS
                                                                           : RPC_INTERNAL_ERROR,
                          "session/prompt: %s", err.text);
            sent = rc == WEIR_OK;
        }
        json_decref(msg);
        if (sent) {
            rc = weir_agent_run_until_idle(s->agent, &err);
            if (rc != WEIR_OK) {
                fprintf(stderr, "weir acp: session %s: the agent stopped: %s: %s\n", s->id,
                        weir_status_name(rc), err.text);
                put_error(a, id, RPC_INTERNAL_ERROR, "session/prompt: the agent stopped: %s",
                          err.text);
            }
        }
        /* answered already: a refused send, an agent that stopped */
        bool answered = (!cancelled && !sent) || (sent && rc != WEIR_OK);
        /* the session takes the next prompt from the moment this one is
         * answered: it is no longer running before the answer goes out */
        pthread_mutex_lock(&a->mu);
        cancelled = s->cancelled;
        if (rc != WEIR_OK && sent)
            s->broken = true;
        json_decref(s->prompt_id);
        s->prompt_id = NULL;
        s->cancelled = false;
        pthread_mutex_unlock(&a->mu);
        if (!answered)
            answer_prompt(s, id, cancelled, before);
        json_decref(id);
        pthread_mutex_lock(&a->mu);
        if (s->broken)
            break;
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */
/* ------------------------------------------------------------------------ */

static acp_session *find_session(acp *a, const char *id) {
    for (acp_session *s = a->sessions; s; s = s->next)
        if (!strcmp(s->id, id))
            return s;
    return NULL;
}

/* Stop the driver thread (cancelling what runs) and close the session. */
static void session_close(acp_session *s) {
    acp *a = s->a;
    if (s->th_started) {
        pthread_mutex_lock(&a->mu);
        s->stopping = true;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        weir_agent_cancel(s->agent, "disposed", false);
        pthread_join(s->th, NULL);
    }
    weir_agent_close(s->agent);
    weir_host_destroy(s->own_host);
    json_decref(s->prompt_id);
    json_decref(s->prompt_msg);
    json_decref(s->perm_answer);
    json_decref(s->always);
    free(s);
}

/* Whether `name` is an MCP server name tools-mcp takes: [A-Za-z0-9_-]{1,32}. */
static bool server_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 32)
        return false;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-'))
            return false;
    return true;
}

/* [{name, value}] (absent: none) as {name: value}: into *out (new, also
 * after an error).  What is wrong with it, or NULL. */
static const char *pairs(const json_t *list, json_t **out) {
    *out = json_object();
    if (!*out)
        return "out of memory";
    if (!list)
        return NULL;
    if (!json_is_array(list))
        return "expected an array of {name, value}";
    size_t i;
    const json_t *p;
    json_array_foreach(list, i, p) {
        const char *n = json_string_value(json_object_get(p, "name"));
        const json_t *v = json_object_get(p, "value");
        if (!n || !*n || !json_is_string(v))
            return "expected an array of {name, value} strings";
        if (json_object_set_new(*out, n, json_string(json_string_value(v))) != 0)
            return "out of memory";
    }
    return NULL;
}

/*
 * The client's mcpServers (ACP McpServer: stdio {name, command, args, env},
 * http {type:"http", name, url, headers}) as tools-mcp's `servers` (*out,
 * new; NULL when there are none).  false after an error response to `id`.
 */
static bool mcp_servers(acp *a, const json_t *id, const char *method, const json_t *list,
                        json_t **out) {
    *out = NULL;
    if (!list || json_array_size(list) == 0) {
        if (list && !json_is_array(list)) {
            put_error(a, id, RPC_INVALID_PARAMS, "%s: mcpServers: expected an array", method);
            return false;
        }
        return true;
    }
    json_t *servers = json_object();
    size_t i;
    const json_t *m;
    json_array_foreach(list, i, m) {
        const char *name = json_string_value(json_object_get(m, "name"));
        const char *type = json_string_value(json_object_get(m, "type"));
        const char *command = json_string_value(json_object_get(m, "command"));
        const char *url = json_string_value(json_object_get(m, "url"));
        const json_t *args = json_object_get(m, "args");
        const char *bad = NULL;
        json_t *server = NULL, *kv = NULL;
        if (!servers)
            bad = "out of memory";
        else if (!json_is_object(m))
            bad = "expected an object";
        else if (!name || !server_name_ok(name))
            bad = "name: expected 1 to 32 of [A-Za-z0-9_-] (it is part of the tool names)";
        else if (json_object_get(servers, name))
            bad = "name: another server has this name";
        else if (type && !strcmp(type, "sse"))
            bad = "type \"sse\" is not supported (mcpCapabilities.sse is false)";
        else if (type && strcmp(type, "http") && strcmp(type, "stdio"))
            bad = "type: expected \"http\" or a stdio server";
        else if (type && !strcmp(type, "http")) {
            if (!url || !*url)
                bad = "url: expected a string";
            else if (!(bad = pairs(json_object_get(m, "headers"), &kv)))
                server = json_pack("{s:s, s:O}", "url", url, "headers", kv);
        } else if (!command || !*command) {
            bad = "command: expected a string";
        } else if (args && !json_is_array(args)) {
            bad = "args: expected an array of strings";
        } else if (!(bad = pairs(json_object_get(m, "env"), &kv))) {
            size_t j;
            const json_t *arg;
            json_array_foreach(args, j, arg) {
                if (!json_is_string(arg))
                    bad = "args: expected an array of strings";
            }
            if (!bad)
                server = json_pack("{s:s, s:o, s:O}", "command", command, "args",
                                   args ? json_deep_copy(args) : json_array(), "env", kv);
        }
        json_decref(kv);
        if (!bad && (!server || json_object_set_new(servers, name, server) != 0))
            bad = "out of memory";
        if (bad) {
            put_error(a, id, RPC_INVALID_PARAMS, "%s: mcpServers[%zu]%s%s: %s", method, i,
                      name ? " " : "", name ? name : "", bad);
            json_decref(servers);
            return false;
        }
    }
    *out = servers;
    return true;
}

/*
 * Open (`sid` NULL: create) a session on the deployment's host, or, with
 * MCP `servers` (stolen), on a host of its own whose config adds the
 * tools-mcp row "acp-mcp" for them; start its driver thread.  `cwd` goes in
 * a new session's header.  NULL after an error response to `id`.
 */
static acp_session *session_open(acp *a, const json_t *id, const char *method, const char *sid,
                                 const char *cwd, json_t *servers) {
    acp_session *s = calloc(1, sizeof *s);
    weir_error err;
    weir_error_clear(&err);
    if (!s) {
        json_decref(servers);
        put_error(a, id, RPC_INTERNAL_ERROR, "%s: out of memory", method);
        return NULL;
    }
    s->a = a;
    s->perm_id = -1;
    weir_host *host = a->host;
    if (servers) {
        json_t *config = json_deep_copy(weir_host_config(a->host));
        json_t *rows = json_object_get(config, "plugins");
        if (config && !rows && json_object_set_new(config, "plugins", json_array()) == 0)
            rows = json_object_get(config, "plugins");
        size_t i;
        const json_t *row;
        bool taken = false;
        json_array_foreach(rows, i, row) {
            const char *rid = json_string_value(json_object_get(row, "id"));
            taken |= rid && !strcmp(rid, MCP_ROW_ID);
        }
        json_t *mcp_row = NULL;
        if (json_is_array(rows) && !taken)
            mcp_row = json_pack("{s:s, s:s, s:{s:o}}", "id", MCP_ROW_ID, "plugin", "tools-mcp",
                                "config", "servers", servers); /* steals servers */
        else
            json_decref(servers);
        if (!mcp_row || json_array_append_new(rows, mcp_row) != 0) {
            if (taken)
                put_error(a, id, RPC_INVALID_PARAMS,
                          "%s: mcpServers: the deployment has a plugin row '" MCP_ROW_ID
                          "' already, the row weir acp gives the client's MCP servers",
                          method);
            else
                put_error(a, id, RPC_INTERNAL_ERROR, "%s: out of memory", method);
            json_decref(config);
            free(s);
            return NULL;
        }
        if (weir_host_create(config, &s->own_host, &err) != WEIR_OK) {
            put_error(a, id, RPC_INTERNAL_ERROR, "%s: mcpServers: %s", method, err.text);
            json_decref(config);
            free(s);
            return NULL;
        }
        json_decref(config);
        host = s->own_host;
    }
    json_t *header = NULL;
    if (!sid && weir_cli_session_header(&a->files, weir_host_config(a->host), &header) ==
                    WEIR_EXIT_OK && header)
        json_object_set_new(header, "cwd", json_string(cwd));
    weir_agent_hook own = {"tools/pre-execute", on_pre_execute, NULL};
    weir_hook_opts hopts = WEIR_HOOK_OPTS_INIT;
    hopts.user_data = s;
    own.opts = &hopts;
    weir_agent_options opts = WEIR_AGENT_OPTIONS_INIT;
    opts.session_id = sid;
    opts.on_event = on_event;
    opts.user_data = s;
    opts.hooks = &own;
    opts.nhooks = 1;
    opts.session_header = header;
    int rc = weir_agent_open(host, &opts, &s->agent, &err);
    json_decref(header);
    if (rc != WEIR_OK) {
        put_error(a, id, rc == WEIR_E_BUSY ? RPC_INVALID_REQUEST : RPC_INTERNAL_ERROR,
                  "%s: %s", method, err.text);
        weir_host_destroy(s->own_host);
        free(s);
        return NULL;
    }
    snprintf(s->id, sizeof s->id, "%s", weir_agent_id(s->agent));
    s->ready = true; /* before any other thread runs for this session */
    weir_agent_set_approver(s->agent, approve, s);
    if (pthread_create(&s->th, NULL, driver_main, s) != 0) {
        put_error(a, id, RPC_INTERNAL_ERROR, "%s: cannot start the session's thread", method);
        session_close(s);
        return NULL;
    }
    s->th_started = true;
    pthread_mutex_lock(&a->mu);
    s->next = a->sessions;
    a->sessions = s;
    pthread_mutex_unlock(&a->mu);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Methods                                                                   */
/* ------------------------------------------------------------------------ */

/* params.<key> as a string, or NULL after an error response naming it. */
static const char *param_str(acp *a, const json_t *id, const char *method, const json_t *params,
                             const char *key) {
    const json_t *v = json_object_get(params, key);
    const char *s = json_string_value(v);
    if (!s || strlen(s) != json_string_length(v)) {
        put_error(a, id, RPC_INVALID_PARAMS, "%s: %s: expected a string", method, key);
        return NULL;
    }
    return s;
}

static void m_initialize(acp *a, const json_t *id, const json_t *params) {
    const json_t *v = json_object_get(params, "protocolVersion");
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65535) {
        put_error(a, id, RPC_INVALID_PARAMS,
                  "initialize: protocolVersion: expected an integer from 0 to 65535");
        return;
    }
    a->initialized = true;
    /* the version weir speaks, whatever the client asked (ACP: the client
     * disconnects when it does not speak it) */
    put_result(a, id,
               json_pack("{s:i, s:{s:b, s:{s:b, s:b, s:b}, s:{s:b, s:b}}, s:[], "
                         "s:{s:s, s:s, s:s}}",
                         "protocolVersion", ACP_PROTOCOL_VERSION, "agentCapabilities",
                         "loadSession", 1, "promptCapabilities", "image", 0, "audio", 0,
                         "embeddedContext", 1, "mcpCapabilities", "http", 1, "sse", 0,
                         "authMethods", "agentInfo", "name", "weir", "title", "weir",
                         "version", WEIR_VERSION_STRING));
}

/* cwd must be an absolute path (ACP). */
static const char *check_cwd(acp *a, const json_t *id, const char *method, const json_t *params) {
    const char *cwd = param_str(a, id, method, params, "cwd");
    if (cwd && cwd[0] != '/') {
        put_error(a, id, RPC_INVALID_PARAMS, "%s: cwd: expected an absolute path", method);
        return NULL;
    }
    return cwd;
}

static void m_session_new(acp *a, const json_t *id, const json_t *params) {
    const char *cwd = check_cwd(a, id, "session/new", params);
    json_t *servers = NULL;
    if (!cwd)
        return;
    const json_t *list = json_object_get(params, "mcpServers");
    if (!json_is_array(list)) {
        put_error(a, id, RPC_INVALID_PARAMS, "session/new: mcpServers: expected an array");
        return;
    }
    if (!mcp_servers(a, id, "session/new", list, &servers))
        return;
    acp_session *s = session_open(a, id, "session/new", NULL, cwd, servers);
    if (s)
        put_result(a, id, json_pack("{s:s}", "sessionId", s->id));
}

static void m_session_load(acp *a, const json_t *id, const json_t *params) {
    const char *sid = param_str(a, id, "session/load", params, "sessionId");
    const char *cwd = sid ? check_cwd(a, id, "session/load", params) : NULL;
    json_t *servers = NULL;
    if (!cwd)
        return;
    const json_t *list = json_object_get(params, "mcpServers");
    if (!json_is_array(list)) {
        put_error(a, id, RPC_INVALID_PARAMS, "session/load: mcpServers: expected an array");
        return;
    }
    if (!weir_session_id_valid(sid)) {
        put_error(a, id, RPC_INVALID_PARAMS,
                  "session/load: sessionId: \"%.128s\" is not a weir session id "
                  "([A-Za-z0-9][A-Za-z0-9._-]{0,127})",
                  sid);
        return;
    }
    pthread_mutex_lock(&a->mu);
    bool open = find_session(a, sid) != NULL;
    pthread_mutex_unlock(&a->mu);
    if (open) {
        put_error(a, id, RPC_INVALID_REQUEST, "session/load: session %s is open already", sid);
        return;
    }
    /* the file store: the log must exist (an open would create it) */
    const json_t *config = weir_host_config(a->host);
    const char *store =
        json_string_value(json_object_get(json_object_get(config, "session"), "store"));
    bool file_store = !store || !strcmp(store, "file");
    if (file_store) {
        char *path = NULL;
        struct stat st;
        if (weir_cli_session_path(config, sid, WEIR_CLI_ID, &path) != WEIR_EXIT_OK ||
            stat(path, &st) != 0) {
            put_error(a, id, RPC_NOT_FOUND, "session/load: no session %s (no log at %s)", sid,
                      path ? path : "?");
            free(path);
            return;
        }
        free(path);
    } else {
        /* another store (session.store): it must hold the session */
        json_t *events = NULL;
        weir_error err;
        weir_error_clear(&err);
        int rc = weir_host_log_events(a->host, sid, &events, &err);
        json_decref(events);
        if (rc != WEIR_OK) {
            put_error(a, id, rc == WEIR_E_NOT_FOUND ? RPC_NOT_FOUND : RPC_INTERNAL_ERROR,
                      "session/load: %s", err.text);
            return;
        }
    }
    if (!mcp_servers(a, id, "session/load", list, &servers))
        return;
    acp_session *s = session_open(a, id, "session/load", sid, cwd, servers);
    if (!s)
        return;
    /* the history as the updates a live prompt sent, then the response */
    weir_error err;
    weir_error_clear(&err);
    int rc;
    if (file_store) {
        rc = weir_log_each(weir_agent_log_path(s->agent), replay_event, s, &err);
    } else {
        json_t *events = NULL;
        rc = weir_host_log_events(s->own_host ? s->own_host : a->host, sid, &events, &err);
        size_t i;
        json_t *ev;
        json_array_foreach(events, i, ev) {
            replay_event(ev, s);
        }
        json_decref(events);
    }
    if (rc != WEIR_OK)
        put_error(a, id, RPC_INTERNAL_ERROR, "session/load: %s", err.text);
    else
        put_result(a, id, json_object());
}

/* The prompt's content blocks as weir user message content: text as it is,
 * a resource link and an embedded text resource as text naming them.  NULL
 * after an error response. */
static json_t *prompt_content(acp *a, const json_t *id, const json_t *prompt) {
    if (!json_is_array(prompt) || json_array_size(prompt) == 0) {
        put_error(a, id, RPC_INVALID_PARAMS,
                  "session/prompt: prompt: expected a non-empty array of content blocks");
        return NULL;
    }
    json_t *content = json_array();
    size_t i;
    const json_t *b;
    bool any = false;
    json_array_foreach(prompt, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        const char *text = NULL;
        char *own = NULL;
        const char *bad = NULL;
        if (!type) {
            bad = "type: expected a string";
        } else if (!strcmp(type, "text")) {
            text = json_string_value(json_object_get(b, "text"));
            if (!text)
                bad = "text: expected a string";
        } else if (!strcmp(type, "resource_link")) {
            const char *uri = json_string_value(json_object_get(b, "uri"));
            const char *name = json_string_value(json_object_get(b, "name"));
            if (!uri || !name)
                bad = "resource_link: expected uri and name strings";
            else if (asprintf(&own, "[%s](%s)", name, uri) < 0)
                own = NULL, bad = "out of memory";
            text = own;
        } else if (!strcmp(type, "resource")) {
            const json_t *r = json_object_get(b, "resource");
            const char *uri = json_string_value(json_object_get(r, "uri"));
            const char *t = json_string_value(json_object_get(r, "text"));
            if (!uri || !t)
                bad = "resource: only text resources {uri, text} are supported";
            else if (asprintf(&own, "<resource uri=\"%s\">\n%s\n</resource>", uri, t) < 0)
                own = NULL, bad = "out of memory";
            text = own;
        } else {
            bad = "type: expected \"text\", \"resource_link\" or \"resource\" (weir takes no "
                  "image or audio: promptCapabilities says so)";
        }
        if (!bad && content && *text &&
            json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text",
                                                     text)) != 0)
            bad = "out of memory";
        any |= !bad && *text;
        free(own);
        if (bad) {
            put_error(a, id, RPC_INVALID_PARAMS, "session/prompt: prompt[%zu]: %s", i, bad);
            json_decref(content);
            return NULL;
        }
    }
    if (!content || !any) {
        put_error(a, id, content ? RPC_INVALID_PARAMS : RPC_INTERNAL_ERROR,
                  "session/prompt: prompt: %s", content ? "no text in it" : "out of memory");
        json_decref(content);
        return NULL;
    }
    return content;
}

/* A session named by params.sessionId, or NULL after an error response. */
static acp_session *session_param(acp *a, const json_t *id, const char *method,
                                  const json_t *params) {
    const char *sid = param_str(a, id, method, params, "sessionId");
    if (!sid)
        return NULL;
    pthread_mutex_lock(&a->mu);
    acp_session *s = find_session(a, sid);
    pthread_mutex_unlock(&a->mu);
    if (!s)
        put_error(a, id, RPC_NOT_FOUND,
                  "%s: sessionId: no session \"%.128s\" is open here (session/new or "
                  "session/load it first)",
                  method, sid);
    return s;
}

static void m_session_prompt(acp *a, const json_t *id, const json_t *params) {
    acp_session *s = session_param(a, id, "session/prompt", params);
    json_t *content = s ? prompt_content(a, id, json_object_get(params, "prompt")) : NULL;
    if (!content)
        return;
    json_t *msg = json_pack("{s:s, s:o}", "role", "user", "content", content);
    if (!msg) {
        put_error(a, id, RPC_INTERNAL_ERROR, "session/prompt: out of memory");
        return;
    }
    pthread_mutex_lock(&a->mu);
    const char *refused = s->broken      ? "the agent stopped after an error"
                          : s->prompt_id ? "a prompt is running in this session already"
                                         : NULL;
    if (!refused) {
        s->prompt_id = json_deep_copy(id);
        s->prompt_msg = msg;
        s->cancelled = false;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->mu);
    if (refused) {
        put_error(a, id, RPC_INVALID_REQUEST, "session/prompt: %s", refused);
        json_decref(msg);
    }
}

/* Cancel the running prompt of `s` (the caller holds a->mu and saw it
 * running): it ends with stopReason cancelled; a permission request that
 * waits is answered deny, after the agent's cancel fired (so the turn does
 * not go on to another step).  Returns with a->mu held. */
static void cancel_prompt(acp *a, acp_session *s) {
    s->cancelled = true;
    pthread_mutex_unlock(&a->mu);
    weir_agent_cancel(s->agent, "user", false);
    pthread_mutex_lock(&a->mu);
    pthread_cond_broadcast(&a->cv); /* the approver waits on it */
}

/* session/cancel (a notification): cancel the session's running prompt. */
static void m_session_cancel(acp *a, const json_t *params) {
    const char *sid = json_string_value(json_object_get(params, "sessionId"));
    if (!sid) {
        fprintf(stderr, "weir acp: session/cancel: sessionId: expected a string\n");
        return;
    }
    pthread_mutex_lock(&a->mu);
    acp_session *s = find_session(a, sid);
    if (s && s->prompt_id)
        cancel_prompt(a, s);
    pthread_mutex_unlock(&a->mu);
    if (!s)
        weir_cli_say(NULL, NULL, "weir acp: session/cancel: no session \"%.128s\" is open here",
                     sid);
}

/* $/cancel_request {requestId} (a notification): a running session/prompt
 * of that id is cancelled as session/cancel does; any other request is
 * answered as it would have been (weir's other requests do not wait). */
static void m_cancel_request(acp *a, const json_t *params) {
    const json_t *rid = json_object_get(params, "requestId");
    pthread_mutex_lock(&a->mu);
    for (acp_session *s = a->sessions; s && rid; s = s->next) {
        if (s->prompt_id && json_equal(s->prompt_id, rid)) {
            cancel_prompt(a, s);
            break;
        }
    }
    pthread_mutex_unlock(&a->mu);
}

/* A response from the client: the answer to a permission request. */
static void on_response(acp *a, json_t *msg) {
    const json_t *id = json_object_get(msg, "id");
    bool taken = false;
    pthread_mutex_lock(&a->mu);
    for (acp_session *s = a->sessions; s && json_is_integer(id) && !taken; s = s->next) {
        if (s->perm_id >= 0 && s->perm_id == json_integer_value(id) && !s->perm_answer) {
            s->perm_answer = json_incref(msg);
            taken = true;
            pthread_cond_broadcast(&a->cv);
        }
    }
    pthread_mutex_unlock(&a->mu);
    if (!taken)
        fprintf(stderr, "weir acp: a response to no request of ours was ignored\n");
}

/* Handle one line of stdin. */
static void handle(acp *a, const char *buf, size_t len) {
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r'))
        i++;
    if (i == len)
        return; /* blank lines are ignored */
    json_error_t je;
    json_t *msg = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!msg) {
        put_error(a, NULL, RPC_PARSE_ERROR, "parse error: invalid JSON at column %d: %s",
                  je.column, je.text);
        return;
    }
    const json_t *id = json_object_get(msg, "id");
    const json_t *method_v = json_object_get(msg, "method");
    const char *method = json_string_value(method_v);
    const json_t *params = json_object_get(msg, "params");
    const char *version = json_string_value(json_object_get(msg, "jsonrpc"));
    bool id_ok = json_is_string(id) || json_is_integer(id);
    if (!json_is_object(msg)) {
        put_error(a, NULL, RPC_INVALID_REQUEST,
                  "invalid request: expected a JSON-RPC 2.0 object (batches are not supported)");
    } else if (!version || strcmp(version, "2.0") != 0) {
        put_error(a, id_ok ? id : NULL, RPC_INVALID_REQUEST,
                  "invalid request: jsonrpc: expected \"2.0\"");
    } else if (!method_v && id && (json_object_get(msg, "result") || json_object_get(msg, "error"))) {
        on_response(a, msg);
    } else if (!method) {
        put_error(a, id_ok ? id : NULL, RPC_INVALID_REQUEST,
                  "invalid request: method: expected a string");
    } else if (id && !id_ok) {
        put_error(a, NULL, RPC_INVALID_REQUEST,
                  "invalid request: id: expected a string or an integer");
    } else if (params && !json_is_object(params)) {
        if (id)
            put_error(a, id, RPC_INVALID_PARAMS, "%s: params: expected an object", method);
        else
            weir_cli_say(NULL, NULL, "weir acp: %s: params: expected an object", method);
    } else if (!id) { /* a notification: never answered */
        if (!strcmp(method, "session/cancel"))
            m_session_cancel(a, params);
        else if (!strcmp(method, "$/cancel_request"))
            m_cancel_request(a, params);
        else
            weir_cli_say(NULL, NULL, "weir acp: unknown notification \"%.64s\" ignored", method);
    } else if (!strcmp(method, "initialize")) {
        m_initialize(a, id, params);
    } else if (!strcmp(method, "authenticate")) {
        put_result(a, id, json_object()); /* authMethods is empty: nothing to do */
    } else if (!a->initialized && (!strcmp(method, "session/new") ||
                                   !strcmp(method, "session/load") ||
                                   !strcmp(method, "session/prompt"))) {
        put_error(a, id, RPC_INVALID_REQUEST, "%s: call initialize first", method);
    } else if (!strcmp(method, "session/new")) {
        m_session_new(a, id, params);
    } else if (!strcmp(method, "session/load")) {
        m_session_load(a, id, params);
    } else if (!strcmp(method, "session/prompt")) {
        m_session_prompt(a, id, params);
    } else {
        put_error(a, id, RPC_METHOD_NOT_FOUND, "method not found: \"%.64s\"", method);
    }
    json_decref(msg);
}

/* ------------------------------------------------------------------------ */
/* weir acp                                                                  */
/* ------------------------------------------------------------------------ */

static const char acp_help[] =
    "usage: weir acp [-c FILE]...\n"
    "\n"
    "Be an Agent Client Protocol agent over stdin/stdout for an editor (Zed,\n"
    "JetBrains, any ACP client): JSON-RPC 2.0, one message per line; stdout\n"
    "carries only protocol messages, stderr the logs (docs/acp.md).\n"
    "Methods: initialize, authenticate, session/new, session/load,\n"
    "session/prompt, session/cancel, $/cancel_request; weir sends\n"
    "session/update and session/request_permission (when a plugin asks for\n"
    "approval, as hooks-shell's PreToolUse \"ask\" does).  A session's id is a\n"
    "weir session id; the MCP servers a client passes (stdio and http) are\n"
    "added to that session's tools through tools-mcp.\n"
    "\n"
    "  -c, --config FILE   deployment config (repeat to overlay; default: built in)\n"
    "\n"
    "Zed: in settings.json,\n"
    "  \"agent_servers\": {\"weir\": {\"type\": \"custom\", \"command\": \"weir\",\n"
    "                             \"args\": [\"acp\", \"-c\", \"/path/to/deploy.json\"]}}\n"
    "\n"
    "End of input closes every session (a running prompt is cancelled) and\n"
    "exits 0.\n"
    "\n"
    "exit codes: 0 ok, 2 usage, 3 configuration or plugin error, 4 I/O error\n"
    "            (a -c file that cannot be read)\n"
    "\n" WEIR_CLI_HELP_ENV_DEPLOY;

int weir_cmd_acp(int argc, char **argv) {
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                              {"help", no_argument, NULL, 'h'},
                                              {0}};
    acp a = {0};
    int ch;
    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            if (weir_cli_add_file(&a.files, "weir acp", optarg) != WEIR_EXIT_OK)
                return WEIR_EXIT_USAGE;
            break;
        case 'h':
            fputs(acp_help, stdout);
            return WEIR_EXIT_OK;
        default:
            fputs(acp_help, stderr);
            return WEIR_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "weir acp: unexpected argument '%s'\n\n%s", argv[optind], acp_help);
        return WEIR_EXIT_USAGE;
    }
    json_t *config = NULL;
    int rc = weir_cli_compose(a.files.files, a.files.n, &config);
    if (rc != WEIR_EXIT_OK)
        return rc;
    if ((rc = weir_cli_host(config, weir_cli_default_used(&a.files), &a.host)) != WEIR_EXIT_OK)
        return rc;
    signal(SIGPIPE, SIG_IGN); /* a client that went away: writes fail, input ends */
    pthread_mutex_init(&a.out_mu, NULL);
    pthread_mutex_init(&a.mu, NULL);
    pthread_cond_init(&a.cv, NULL);
    char *buf = NULL;
    size_t cap = 0;
    long len;
    bool too_long;
    weir_cli_lines in = WEIR_CLI_LINES_INIT(STDIN_FILENO, -1);
    while ((len = weir_cli_lines_read(&in, MAX_LINE, &buf, &cap, &too_long)) >= 0) {
        if (too_long)
            put_error(&a, NULL, RPC_INVALID_REQUEST, "invalid request: a message over %u bytes",
                      MAX_LINE);
        else
            handle(&a, buf ? buf : "", (size_t)len);
    }
    free(buf);
    while (a.sessions) {
        acp_session *s = a.sessions;
        a.sessions = s->next;
        session_close(s);
    }
    pthread_cond_destroy(&a.cv);
    pthread_mutex_destroy(&a.mu);
    pthread_mutex_destroy(&a.out_mu);
    weir_host_destroy(a.host);
    return WEIR_EXIT_OK;
}
