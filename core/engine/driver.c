/*
 * core/engine/driver.c - the turn/step lifecycle, in exactly the order of docs/lifecycle.md:
 *
 *   turn/start; claim; system-prompt/assemble; agent/pre-step; step/start;
 *   attempts (agent/request, prepare_call, admission, derive + freeze,
 *   llm/stream, assistant/message | assistant/attempt + agent/request-error);
 *   tools; step/end; continuation (agent/turn-stopping, claim, pre-step);
 *   turn/end.
 *
 * Runs on the driver's thread (weir_agent_run_until_idle).  Every await
 * point checks the turn's signal.  A function returning an error status
 * means the log could not be written; everything else ends the turn with a
 * reason and returns WEIR_OK.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "assistant_stream.h"
#include "continuation.h"
#include "failure.h"
#include "host_int.h"
#include "http.h"
#include "log_fold.h"
#include "surface.h"
#include "tools.h"

typedef struct turn_ctx {
    weir__engine *eng;
    int turn, step;
    json_t *assembly;  /* the turn's assembly (owned) */
    char *system_text; /* rendered system prompt (owned) */
    bool max_tokens;   /* sticky over the turn */
    bool step_open;    /* step/start logged without its step/end */
    json_t *reason;    /* the turn/end reason once decided (owned) */
    json_t *dropped;   /* the last request/continuations-dropped data (owned; looked up
                        * in the log once a turn, when a request first drops one) */
    bool dropped_known; /* `dropped` was looked up */
    weir_error *err;   /* fatal errors */
} turn_ctx;

/* Outcome of one step. */
typedef struct step_out {
    bool ends; /* the step ended the turn (no tool calls, concluded, max tokens) */
} step_out;

static bool cancelled(const turn_ctx *t) { return weir__signal_cancelled(&t->eng->signal); }

static void set_reason(turn_ctx *t, json_t *reason) {
    if (t->reason) { /* the first reason decided stands */
        json_decref(reason);
        return;
    }
    t->reason = reason ? reason : json_pack("{s:s}", "kind", "error");
}

static void set_aborted(turn_ctx *t) {
    set_reason(t, json_pack("{s:s, s:s}", "kind", "aborted", "cause",
                            weir__signal_cause(&t->eng->signal)));
}

/* New reference: {code, message, provider?}. */
static json_t *unknown_failure(const char *provider, const char *what, const weir_error *e) {
    return weir__failure_new(provider, "UNKNOWN", "%s%s%s", what, e && e->text[0] ? ": " : "",
                             e && e->text[0] ? e->text : "");
}

/* agent/error (live) and the turn ends with {kind:"error", error}. Steals `failure`. */
static void fail_turn(turn_ctx *t, json_t *failure) {
    json_t *data = json_pack("{s:i, s:i, s:O}", "turn", t->turn, "step", t->step, "error",
                             failure);
    weir__engine_live(t->eng, "agent/error", data);
    set_reason(t, json_pack("{s:s, s:o}", "kind", "error", "error", failure));
}

/* A hook failed: report it and end the turn with UNKNOWN.  Under a cancel
 * the cancel wins (a listener that stops on the signal fails its call):
 * the turn is aborted and no error is reported. */
static void hook_failed(turn_ctx *t, const char *hook, const weir_error *e) {
    if (cancelled(t)) {
        set_aborted(t);
        return;
    }
    fail_turn(t, weir__failure_new(NULL, "UNKNOWN", "%s failed: %s", hook,
                                   e->text[0] ? e->text : weir_strerror((int)e->code)));
}

static int log_event(turn_ctx *t, const char *type, json_t *data, const json_t *op,
                     const json_t *sources, size_t *seq) {
    if (!data) {
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory building %s", type);
    }
    int rc = weir__log_append(t->eng->log, type, data, op, sources, WEIR__APPEND_HANDOVER, seq,
                              t->err);
    json_decref(data);
    return rc;
}

static json_t *hook_args(const turn_ctx *t) {
    /* built directly: json_pack's format parsing costs more than the object */
    json_t *o = json_object();
    if (o && (json_object_set_new(o, "agent", json_string(t->eng->id)) != 0 ||
              json_object_set_new(o, "turn", json_integer(t->turn)) != 0 ||
              json_object_set_new(o, "step", json_integer(t->step)) != 0)) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

static json_t *invoke(turn_ctx *t, const char *hook, const json_t *args,
                      weir__hook_default_fn dflt, void *ctx, weir_error *e) {
    weir_error_clear(e);
    if (!args) {
        weir__err(e, WEIR_E_NOMEM, NULL, hook, "out of memory");
        return NULL;
    }
    return weir__hook_invoke(t->eng->hooks, hook, t->eng->handle, &t->eng->signal, args, dflt, ctx, e);
}

/* invoke() for a hook whose default is the core's own (no plugin behind it):
 * its result, when no listener made another, is not validated again. */
static json_t *invoke_core(turn_ctx *t, const char *hook, const json_t *args,
                           weir__hook_default_fn dflt, void *ctx, weir_error *e) {
    weir_error_clear(e);
    if (!args) {
        weir__err(e, WEIR_E_NOMEM, NULL, hook, "out of memory");
        return NULL;
    }
    return weir__hook_invoke_core(t->eng->hooks, hook, t->eng->handle, &t->eng->signal, args, dflt, ctx, NULL,
                                  e);
}

/* ------------------------------------------------------------------------ */
/* Claim, assembly, pre-step                                                 */
/* ------------------------------------------------------------------------ */

/* Claim input; consumes the wake latch first (later input re-arms it). */
static int claim(turn_ctx *t, bool turn_boundary, json_t **claimed) {
    /* finished background jobs join at this request boundary */
    int rc = weir__driver_settle_jobs(t->eng, true, t->err);
    if (rc != WEIR_OK)
        return rc;
    pthread_mutex_lock(&t->eng->mu);
    t->eng->wake = false;
    pthread_mutex_unlock(&t->eng->mu);
    return weir__inbox_claim(t->eng->inbox, turn_boundary, t->turn, claimed, t->err);
}

static json_t *assemble_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call;
    (void)ctx;
    return json_incref(json_object_get(args, "assembly"));
}

/* Append `s` with {{name}} replaced by string/number variables; other
 * {{...}} stay as written. */
static int render_text(json_t *out_parts, const char *s, const json_t *vars) {
    size_t cap = strlen(s) + 1, len = 0;
    char *buf = weir__malloc(cap);
    if (!buf)
        return -1;
    while (*s) {
        const char *open = strstr(s, "{{");
        const char *close = open ? strstr(open + 2, "}}") : NULL;
        const json_t *v = NULL;
        char name[128], num[64];
        size_t nlen = close ? (size_t)(close - open - 2) : 0;
        if (close && nlen > 0 && nlen < sizeof name) {
            memcpy(name, open + 2, nlen);
            name[nlen] = '\0';
            v = json_object_get(vars, name);
        }
        const char *val = NULL;
        if (json_is_string(v))
            val = json_string_value(v);
        else if (json_is_integer(v))
            val = (snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v)), num);
        else if (json_is_real(v))
            val = (snprintf(num, sizeof num, "%g", json_real_value(v)), num);
        /* the literal run: up to the variable, or through an unmatched "{{" */
        size_t lit = !open ? strlen(s) : (size_t)(open - s) + (val ? 0 : 2);
        size_t vlen = val ? strlen(val) : 0;
        char *nb = weir__realloc(buf, cap + lit + vlen);
        if (!nb) {
            weir__free(buf);
            return -1;
        }
        buf = nb;
        cap += lit + vlen;
        memcpy(buf + len, s, lit);
        len += lit;
        memcpy(buf + len, val ? val : "", vlen);
        len += vlen;
        s = val ? close + 2 : s + lit;
    }
    buf[len] = '\0';
    int rc = json_array_append_new(out_parts, json_string(buf));
    weir__free(buf);
    return rc;
}

/* Render the assembly: non-empty sections by ascending order (stable). */
static char *render_system(const json_t *assembly) {
    const json_t *sections = json_object_get(assembly, "sections");
    const json_t *vars = json_object_get(assembly, "variables");
    size_t n = json_array_size(sections);
    size_t *idx = weir__calloc(n ? n : 1, sizeof *idx);
    json_t *parts = json_array();
    char *out = NULL;
    if (!idx || !parts)
        goto done;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    for (size_t i = 1; i < n; i++) { /* stable insertion sort by order */
        size_t k = idx[i], j = i;
        json_int_t ok = weir__json_int(json_array_get(sections, k), "order", 0);
        while (j > 0 && weir__json_int(json_array_get(sections, idx[j - 1]), "order", 0) > ok) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = k;
    }
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        const char *text = weir__json_str(json_array_get(sections, idx[i]), "text", "");
        if (!*text)
            continue;
        if (render_text(parts, text, vars) != 0)
            goto done;
        total += strlen(json_string_value(json_array_get(parts, json_array_size(parts) - 1))) + 2;
    }
    out = weir__malloc(total);
    if (!out)
        goto done;
    out[0] = '\0';
    size_t i;
    json_t *p;
    json_array_foreach(parts, i, p) {
        if (i)
            strcat(out, "\n\n");
        strcat(out, json_string_value(p));
    }
done:
    weir__free(idx);
    json_decref(parts);
    return out;
}

/* system-prompt/assemble; false when the turn ended (reason set). */
static bool assemble(turn_ctx *t) {
    weir_error e;
    json_t *tools = weir__tools_schemas(weir__host_tools(t->eng->host));
    json_t *args = json_pack("{s:s, s:i, s:i}", "agent", t->eng->id, "turn", t->turn, "step",
                             t->step + 1); /* the step it is assembled for */
    if (args && tools)
        json_object_set_new(args, "assembly",
                            json_pack("{s:[], s:O, s:{}}", "sections", "tools", tools,
                                      "variables"));
    json_decref(tools);
    json_t *res = invoke_core(t, "system-prompt/assemble", args, assemble_default, NULL, &e);
    json_decref(args);
    if (!json_is_object(res) || !json_is_array(json_object_get(res, "sections"))) {
        if (res)
            weir__err(&e, WEIR_E_HOOK_RESULT, NULL, "system-prompt/assemble",
                      "expected an assembly object with sections");
        json_decref(res);
        hook_failed(t, "system-prompt/assemble", &e);
        return false;
    }
    char *text = render_system(res);
    if (!text) {
        json_decref(res);
        weir__err(&e, WEIR_E_NOMEM, NULL, NULL, "out of memory rendering the system prompt");
        hook_failed(t, "system-prompt/assemble", &e);
        return false;
    }
    json_decref(t->assembly);
    weir__free(t->system_text);
    t->assembly = res;
    t->system_text = text;
    return true;
}

static json_t *pre_step_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call;
    (void)ctx;
    return json_pack("{s:s, s:O}", "kind", "enter", "messages",
                     json_object_get(args, "messages"));
}

/* Normalize the entered messages: user role, content blocks, id, source. */
static json_t *entered_messages(const json_t *msgs, weir_error *e) {
    json_t *out = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m) || strcmp(weir__json_str(m, "role", ""), "user") != 0) {
            weir__err(e, WEIR_E_HOOK_RESULT, NULL, "agent/pre-step",
                      "messages[%zu]: expected a user message", i);
            json_decref(out);
            return NULL;
        }
        json_t *c = weir__json_copy_tree(m); /* scalars shared (common.h) */
        const json_t *content = json_object_get(c, "content");
        if (c && json_is_string(content))
            json_object_set_new(c, "content", json_pack("[{s:s, s:O}]", "type", "text", "text",
                                                        content));
        else if (c && !json_is_array(content)) {
            weir__err(e, WEIR_E_HOOK_RESULT, NULL, "agent/pre-step",
                      "messages[%zu].content: expected an array of blocks", i);
            json_decref(c);
            json_decref(out);
            return NULL;
        }
        char idbuf[64];
        if (c && !json_is_string(json_object_get(c, "id")))
            json_object_set_new(c, "id", json_string(weir__random_id(idbuf, sizeof idbuf, "in")));
        if (c && !json_is_object(json_object_get(c, "source")))
            json_object_set_new(c, "source", json_pack("{s:s}", "kind", "human"));
        if (!out || !c || json_array_append_new(out, c) != 0) {
            weir__err(e, WEIR_E_NOMEM, NULL, NULL, "out of memory");
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

typedef enum pre_kind { PRE_ENTER, PRE_STOPPED } pre_kind;

/* agent/pre-step.  PRE_ENTER fills *entered (new) and *series. */
static pre_kind pre_step(turn_ctx *t, const json_t *claimed, json_t **entered, bool *series) {
    weir_error e;
    json_t *args = json_pack("{s:s, s:i, s:i, s:O}", "agent", t->eng->id, "turn", t->turn, "step",
                             t->step + 1, "messages", claimed);
    const char *author = NULL; /* the row whose listener made the result */
    json_t *res = NULL;
    weir_error_clear(&e);
    if (!args)
        weir__err(&e, WEIR_E_NOMEM, NULL, "agent/pre-step", "out of memory");
    else
        res = weir__hook_invoke_core(t->eng->hooks, "agent/pre-step", t->eng->handle,
                                     &t->eng->signal, args,
                                     pre_step_default, NULL, &author, &e);
    json_decref(args);
    if (!res) {
        hook_failed(t, "agent/pre-step", &e);
        return PRE_STOPPED;
    }
    const char *kind = weir__json_str(res, "kind", "");
    if (strcmp(kind, "reject") == 0) {
        /* blocked: which row rejected, and its reason when it gave one */
        json_t *why = json_pack("{s:s}", "kind", "blocked");
        if (why && author)
            json_object_set_new(why, "plugin", json_string(author));
        if (why && json_is_string(json_object_get(res, "reason")))
            json_object_set(why, "reason", json_object_get(res, "reason"));
        json_decref(res);
        set_reason(t, why);
        return PRE_STOPPED;
    }
    const json_t *msgs = json_object_get(res, "messages");
    if (strcmp(kind, "enter") != 0 || !json_is_array(msgs)) {
        weir__err(&e, WEIR_E_HOOK_RESULT, NULL, "agent/pre-step",
                  "expected {kind:\"reject\"} or {kind:\"enter\", messages:[...]}");
        json_decref(res);
        hook_failed(t, "agent/pre-step", &e);
        return PRE_STOPPED;
    }
    *entered = entered_messages(msgs, &e);
    *series = json_is_true(json_object_get(res, "starts_request_series"));
    json_decref(res);
    if (!*entered) {
        hook_failed(t, "agent/pre-step", &e);
        return PRE_STOPPED;
    }
    return PRE_ENTER;
}

int weir__driver_native_pre_step(weir__engine *eng, int turn, int step, const json_t *message,
                                 json_t **entered, const char **why, weir_error *err) {
    *entered = NULL;
    *why = "error";
    json_t *args = json_pack("{s:s, s:i, s:i, s:[O], s:b}", "agent", eng->id, "turn", turn,
                             "step", step, "messages", message, "native", 1);
    if (!args)
        return weir__err(err, WEIR_E_NOMEM, NULL, "agent/pre-step", "out of memory");
    json_t *res = weir__hook_invoke_core(eng->hooks, "agent/pre-step", eng->handle, &eng->signal,
                                         args, pre_step_default, NULL, NULL, err);
    json_decref(args);
    if (!res)
        return WEIR_OK;
    const char *kind = weir__json_str(res, "kind", "");
    const json_t *msgs = json_object_get(res, "messages");
    if (!strcmp(kind, "reject"))
        *why = "rejected";
    else if (strcmp(kind, "enter") != 0 || !json_is_array(msgs))
        weir__err(err, WEIR_E_HOOK_RESULT, NULL, "agent/pre-step",
                  "expected {kind:\"reject\"} or {kind:\"enter\", messages:[...]}");
    else
        *entered = entered_messages(msgs, err);
    json_decref(res);
    return WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* Admission                                                                 */
/* ------------------------------------------------------------------------ */

/* Text of a system message event's content, joined (borrowed into buf). */
static char *event_system_text(const json_t *event) {
    const json_t *content = json_object_get(json_object_get(json_object_get(event, "data"),
                                                            "message"),
                                            "content");
    json_t *parts = json_array();
    size_t i, total = 1;
    const json_t *b;
    json_array_foreach(content, i, b) {
        const char *s = weir__json_str(b, "text", NULL);
        if (s && parts) {
            json_array_append_new(parts, json_string(s));
            total += strlen(s);
        }
    }
    char *out = weir__malloc(total);
    if (out) {
        out[0] = '\0';
        json_t *p;
        json_array_foreach(parts, i, p) strcat(out, json_string_value(p));
    }
    json_decref(parts);
    return out;
}

/*
 * Whether this session has sent a request: from then on its prefix is
 * append-only (docs/lifecycle.md, "The append-only prefix").  A resumed
 * session whose log holds a request/header has.
 */
static bool prefix_sent(const turn_ctx *t) {
    return t->eng->requested || weir__log_request_header(t->eng->log) != NULL;
}

/*
 * The system prompt the model was last given (new string; NULL when out of
 * memory): data.prompt of the newest system-update on the surface, else the
 * head system node's text, else "".
 */
static char *given_system_text(const weir__surface *s) {
    size_t len = s ? weir__surface_len(s) : 0;
    for (size_t i = len; i-- > 1;) {
        const json_t *ev = weir__surface_event(s, i);
        const json_t *prompt = json_object_get(json_object_get(ev, "data"), "prompt");
        if (json_is_string(prompt) &&
            strcmp(weir__json_str(ev, "type", ""), "system/message") == 0)
            return weir__strdup(json_string_value(prompt));
    }
    const json_t *head = len ? weir__surface_event(s, 0) : NULL;
    if (head && strcmp(weir__json_str(head, "type", ""), "system/message") == 0)
        return event_system_text(head);
    return weir__strdup("");
}

/* Append a system-update system/message: `text` (the model sees it),
 * `source` (stolen) and, for a prompt change, data.prompt. */
static int append_system_update(turn_ctx *t, const char *text, json_t *source,
                                const char *prompt) {
    json_t *data = source ? json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}], s:o}}", "turn",
                                      t->turn, "step", t->step, "message", "role", "system",
                                      "content", "type", "text", "text", text, "source", source)
                          : NULL;
    if (data && prompt && json_object_set_new(data, "prompt", json_string(prompt)) != 0) {
        json_decref(data);
        data = NULL;
    }
    json_t *op = json_string("append");
    int rc = op ? log_event(t, "system/message", data, op, NULL, NULL)
                : (json_decref(data), weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "oom"));
    json_decref(op);
    return rc;
}

/* Whether the string array `names` holds `name`. */
static bool names_hold(const json_t *names, const char *name) {
    size_t i;
    const json_t *v;
    json_array_foreach(names, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return true;
    }
    return false;
}

/* The tool named `name` in `tools` (borrowed), or NULL. */
static const json_t *tool_named(const json_t *tools, const char *name) {
    size_t i;
    const json_t *v;
    json_array_foreach(tools, i, v) {
        if (strcmp(weir__json_str(v, "name", ""), name) == 0)
            return v;
    }
    return NULL;
}

/* The tools of the next request, once a request was sent (new members). */
typedef struct tool_plan {
    json_t *tools;   /* every tool of the last header in its place (the current
                        definition when still offered), then the new ones */
    json_t *removed; /* names of header tools no longer offered */
    json_t *added, *dropped, *changed; /* what changed since the last header */
} tool_plan;

static void tool_plan_free(tool_plan *p) {
    json_decref(p->tools);
    json_decref(p->removed);
    json_decref(p->added);
    json_decref(p->dropped);
    json_decref(p->changed);
}

/*
 * Plan the header's tools against the last header (append-only: a tool
 * once sent keeps its place; docs/lifecycle.md).  `offered` (borrowed) is
 * the assembly's tools.  WEIR_OK or WEIR_E_NOMEM.
 */
static int plan_tools(const weir__engine *eng, const json_t *offered, tool_plan *p) {
    const json_t *last = weir__log_request_header(eng->log);
    const json_t *sent = json_object_get(last, "tools");
    const json_t *was_removed = json_object_get(last, "removed_tools");
    *p = (tool_plan){json_array(), json_array(), json_array(), json_array(), json_array()};
    bool bad = !p->tools || !p->removed || !p->added || !p->dropped || !p->changed;
    size_t i;
    const json_t *v;
    json_array_foreach(sent, i, v) {
        const char *name = weir__json_str(v, "name", "");
        const json_t *now = tool_named(offered, name);
        bool active = !names_hold(was_removed, name);
        bad = bad || json_array_append(p->tools, (json_t *)(uintptr_t)(now ? now : v)) != 0;
        if (!now)
            bad = bad || json_array_append_new(p->removed, json_string(name)) != 0;
        if (!now && active)
            bad = bad || json_array_append_new(p->dropped, json_string(name)) != 0;
        else if (now && !active)
            bad = bad || json_array_append_new(p->added, json_string(name)) != 0;
        else if (now && !weir__json_equal(now, v))
            bad = bad || json_array_append_new(p->changed, json_string(name)) != 0;
    }
    json_array_foreach(offered, i, v) {
        const char *name = weir__json_str(v, "name", "");
        if (tool_named(sent, name))
            continue;
        bad = bad || json_array_append(p->tools, (json_t *)(uintptr_t)v) != 0 ||
              json_array_append_new(p->added, json_string(name)) != 0;
    }
    if (!bad)
        return WEIR_OK;
    tool_plan_free(p);
    *p = (tool_plan){0};
    return WEIR_E_NOMEM;
}

/* Append `label` and the ", "-joined `names` to *buf (new string; NULL on NOMEM). */
static void note_names(char **buf, const char *label, const json_t *names) {
    if (!*buf || json_array_size(names) == 0)
        return;
    size_t i;
    const json_t *v;
    json_array_foreach(names, i, v) {
        char *next = weir__asprintf("%s%s%s", *buf, i ? ", " : label, json_string_value(v));
        weir__free(*buf);
        *buf = next;
        if (!next)
            return;
    }
    char *next = weir__asprintf("%s.", *buf);
    weir__free(*buf);
    *buf = next;
}

/*
 * Once a request was sent, a changed tool list is announced by a
 * system-update system/message naming the tools added, removed and
 * changed (admit_header then keeps the sent tools in place).
 */
static int announce_tools(turn_ctx *t) {
    tool_plan p;
    if (plan_tools(t->eng, json_object_get(t->assembly, "tools"), &p) != WEIR_OK)
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory planning the tools");
    int rc = WEIR_OK;
    if (json_array_size(p.added) + json_array_size(p.dropped) + json_array_size(p.changed) > 0) {
        char *text = weir__strdup("The available tools changed.");
        note_names(&text, " Added: ", p.added);
        note_names(&text, " Removed (a call to one fails): ", p.dropped);
        note_names(&text, " Changed definition: ", p.changed);
        json_t *source = json_pack("{s:s, s:s, s:O, s:O, s:O}", "kind", "system-update", "update",
                                   "tools", "added", p.added, "removed", p.dropped, "changed",
                                   p.changed);
        rc = text ? append_system_update(t, text, source, NULL)
                  : (json_decref(source),
                     weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory"));
        weir__free(text);
    }
    tool_plan_free(&p);
    return rc;
}

/*
 * system/message reconciliation.  Before the first request the head
 * system node is created or replaced freely.  Once a request was sent the
 * prefix is append-only: a changed prompt is a new system/message at the
 * end (source {kind:"system-update", update:"system-prompt"}, data.prompt
 * the whole new prompt), and a changed tool list is announced
 * (announce_tools).
 */
static int reconcile_system(turn_ctx *t) {
    const weir__surface *s = weir__log_surface(t->eng->log);
    size_t len = s ? weir__surface_len(s) : 0;
    const json_t *head = len ? weir__surface_event(s, 0) : NULL;
    bool head_is_system = head && strcmp(weir__json_str(head, "type", ""), "system/message") == 0;
    const char *text = t->system_text ? t->system_text : "";
    bool sent = prefix_sent(t);
    /* A history that has nodes but no system head (its first turn was cut
     * before its first request) cannot get one in front: the prompt is
     * appended as a system-update, as after a request (docs/lifecycle.md) */
    if (sent || (len > 0 && !head_is_system)) {
        char *given = given_system_text(s);
        if (!given)
            return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        bool same = strcmp(given, text) == 0;
        weir__free(given);
        int rc = WEIR_OK;
        if (!same)
            rc = append_system_update(
                t,
                *text ? text
                      : "The system prompt was removed: the earlier system instructions no "
                        "longer apply.",
                json_pack("{s:s, s:s}", "kind", "system-update", "update", "system-prompt"),
                text);
        return rc == WEIR_OK && sent ? announce_tools(t) : rc;
    }
    if (!head_is_system) {
        if (!*text) /* a fresh history: a head node for a prompt */
            return WEIR_OK;
        json_t *data = json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}]}}", "turn", t->turn, "step",
                                 t->step, "message", "role", "system", "content", "type", "text",
                                 "text", text);
        json_t *op = json_string("append");
        int rc = op ? log_event(t, "system/message", data, op, NULL, NULL)
                    : (json_decref(data), weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "oom"));
        json_decref(op);
        return rc;
    }
    char *cur = event_system_text(head);
    if (!cur)
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    bool same = strcmp(cur, text) == 0;
    weir__free(cur);
    if (same)
        return WEIR_OK;
    json_int_t seq = weir__json_int(head, "seq", 0);
    json_t *data = *text ? json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}]}}", "turn", t->turn,
                                     "step", t->step, "message", "role", "system", "content",
                                     "type", "text", "text", text)
                         : json_pack("{s:i, s:i, s:{s:s, s:[]}}", "turn", t->turn, "step",
                                     t->step, "message", "role", "system", "content");
    json_t *op = json_pack("{s:s, s:I, s:I}", "op", "replace", "start_seq", seq, "end_seq", seq);
    json_t *src = json_pack("[I]", seq);
    int rc = op && src ? log_event(t, "system/message", data, op, src, NULL)
                       : (json_decref(data), weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "oom"));
    json_decref(op);
    json_decref(src);
    return rc;
}

static int admit_users(turn_ctx *t, const json_t *entered) {
    json_t *op = json_string("append");
    if (!op)
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    size_t i;
    const json_t *m;
    int rc = WEIR_OK;
    json_array_foreach(entered, i, m) {
        rc = log_event(t, "user/message",
                       json_pack("{s:i, s:i, s:O}", "turn", t->turn, "step", t->step, "message", m),
                       op, NULL, NULL);
        if (rc != WEIR_OK)
            break;
    }
    json_decref(op);
    return rc;
}

/* request/header when changed (or first of this instance), request/context when changed. */
static int admit_header(turn_ctx *t, const json_t *config, const weir__provider_entry *pe,
                        bool series) {
    weir__engine *eng = t->eng;
    json_t *header = json_pack("{s:O}", "config", config);
    /* the assembly's tools, shared while the header is only compared with the
     * last one; a copy goes into the log when the header is logged.  Once a
     * request was sent, the sent tools keep their places and the removed
     * ones stay declared (plan_tools; docs/lifecycle.md) */
    json_t *tools = json_object_get(t->assembly, "tools");
    tool_plan plan = {0};
    if (prefix_sent(t)) {
        if (plan_tools(eng, tools, &plan) != WEIR_OK) {
            json_decref(header);
            header = NULL;
        }
        tools = plan.tools;
    }
    bool has_tools = json_array_size(tools) > 0;
    if (header && has_tools && json_object_set(header, "tools", tools) != 0) {
        json_decref(header);
        header = NULL;
    }
    if (header && json_array_size(plan.removed) > 0 &&
        json_object_set(header, "removed_tools", plan.removed) != 0) {
        json_decref(header);
        header = NULL;
    }
    if (!header) {
        tool_plan_free(&plan);
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    const json_t *last = weir__log_request_header(eng->log);
    bool changed = !weir__json_equal(last, header);
    const char *reason = NULL;
    if (!eng->requested)
        reason = eng->resumed ? "resume" : "initial";
    else if (changed)
        reason = "change";
    else if (series)
        reason = "series";
    int rc = WEIR_OK;
    if (reason) {
        json_t *logged = has_tools ? json_copy(header) : json_incref(header);
        if (logged && has_tools &&
            json_object_set_new(logged, "tools", json_deep_copy(tools)) != 0) {
            json_decref(logged);
            logged = NULL;
        }
        json_t *data = logged ? json_pack("{s:o, s:s}", "header", logged, "reason", reason) : NULL;
        if (data && series && eng->requested && changed)
            json_object_set_new(data, "starts_series", json_true());
        rc = log_event(t, "request/header", data, NULL, NULL, NULL);
    }
    json_decref(header);
    tool_plan_free(&plan);
    if (rc != WEIR_OK)
        return rc;
    const char *provider = weir__json_str(config, "provider", "");
    const char *model = weir__json_str(config, "model", "");
    json_t *ctx = json_pack("{s:s, s:s}", "provider", provider, "model", model);
    json_t *info = pe->vt.model_info ? pe->vt.model_info(pe->self, model) : NULL;
    json_t *cw = json_object_get(info, "context_window");
    if (ctx && json_is_integer(cw))
        json_object_set(ctx, "context_window", cw);
    json_decref(info);
    if (!ctx)
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    if (weir__json_equal(weir__log_request_context(eng->log), ctx)) {
        json_decref(ctx);
        return WEIR_OK;
    }
    return log_event(t, "request/context", ctx, NULL, NULL, NULL);
}

/*
 * The frozen request: header config + messages + header tools.  New
 * reference; a new top-level object whose values (the config's values, the
 * messages, the tools) are shared with the log, so it is read-only, as the
 * hooks that receive it are (hooks.h).
 */
static json_t *build_request(const json_t *header, json_t *messages) {
    json_t *req = json_copy(json_object_get(header, "config"));
    json_t *tools = json_object_get(header, "tools");
    if (!req || !messages || json_object_set(req, "messages", messages) != 0 ||
        (tools && json_object_set(req, "tools", tools) != 0)) {
        json_decref(req);
        return NULL;
    }
    return req;
}

/* Model-visible means logged: the request equals a fresh fold of the log. */
static void check_request(turn_ctx *t, const json_t *req) {
    weir__log *log = t->eng->log;
    weir__surface *s = weir__log_base_surface(log); /* what a checkpoint's resume rebuilt */
    if (!s)
        return;
    size_t n = weir__log_count(log);
    bool whole = true; /* out of memory: no check, never a false alarm */
    for (size_t i = weir__log_base(log); whole && i < n; i++) {
        json_t *ev = weir__log_event_ref(log, i); /* one at a time */
        whole = ev && (!weir__is_surface_type(weir__json_str(ev, "type", "")) ||
                       weir__surface_apply(s, ev) != WEIR_E_NOMEM);
        json_decref(ev);
    }
    json_t *derived = whole ? weir__surface_derive(s) : NULL;
    /* the same continuation filter as the request (core/format/continuation.h) */
    json_t *msgs = derived ? weir__continuation_apply(derived, s, weir__log_request_context(log),
                                                      NULL)
                           : NULL;
    json_decref(derived);
    json_t *fresh = build_request(weir__log_request_header(log), msgs);
    char *x = weir__json_dump(req), *y = weir__json_dump(fresh);
    if (x && y && strcmp(x, y) != 0) {
        fprintf(stderr,
                "weir: model-visible means logged violated in %s (turn %d, step %d)\n"
                "  request: %s\n  derived: %s\n",
                weir__log_path(log), t->turn, t->step, x, y);
        abort();
    }
    free(x);
    free(y);
    json_decref(fresh);
    json_decref(msgs);
    weir__surface_destroy(s);
}

/* ------------------------------------------------------------------------ */
/* One attempt                                                               */
/* ------------------------------------------------------------------------ */

typedef struct attempt_ctx {
    const char *provider, *model; /* the call config's route (borrowed), on the settlement */
    const weir__provider_entry *pe;
    void *call;
    weir_stream stream;
    bool default_ran;
    int provider_rc;
} attempt_ctx;

static json_t *stream_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call;
    attempt_ctx *ac = ctx;
    if (ac->default_ran) /* a listener called next() twice: replay what we have */
        return json_incref(ac->stream.chunks);
    ac->default_ran = true;
    /* native steering: while a provider with steer_live streams a lifecycle
     * request, a steer may be offered to it (weir_agent_send) */
    weir__engine *eng = ac->stream.engine;
    bool native = ac->pe->vt.steer_live && ac->stream.live;
    if (native) {
        pthread_mutex_lock(&eng->mu);
        eng->native_pe = ac->pe;
        eng->native_stream = &ac->stream;
        pthread_mutex_unlock(&eng->mu);
    }
    weir__http_last_clear(); /* what this attempt's response says of rate limits (settle) */
    ac->provider_rc = ac->pe->vt.stream(ac->pe->self, ac->call, json_object_get(args, "request"),
                                        &ac->stream);
    if (native) { /* close the window; steer_live calls in progress end first */
        pthread_mutex_lock(&eng->mu);
        eng->native_pe = NULL;
        eng->native_stream = NULL;
        while (eng->native_busy > 0)
            pthread_cond_wait(&eng->cv, &eng->mu);
        pthread_mutex_unlock(&eng->mu);
    }
    return json_incref(ac->stream.chunks);
}

/* Commit the attempt's settlement and send the committed end frame. */
static int settle(turn_ctx *t, attempt_ctx *ac, const char *type, json_t *data) {
    size_t seq = 0;
    const json_t *op = NULL;
    json_t *append = NULL;
    if (!strcmp(type, "assistant/message")) {
        append = json_string("append");
        op = append;
    }
    /* the log keeps the stream in its compact timed form (docs/session-log.md) */
    json_t *stream = data ? weir__stream_compact(json_object_get(data, "stream")) : NULL;
    if (data && (!stream || json_object_set_new(data, "stream", stream) != 0)) {
        json_decref(data);
        data = NULL;
    }
    if (data && ac->provider && ac->model && /* which route answered (or failed) */
        (json_object_set_new(data, "provider", json_string(ac->provider)) != 0 ||
         json_object_set_new(data, "model", json_string(ac->model)) != 0)) {
        json_decref(data);
        data = NULL;
    }
    /* the host the attempt's response came from and its rate limits
     * (core/runtime/rate_limit.c): a retry policy calibrates from them */
    json_t *http = data ? weir__http_last(NULL) : NULL;
    if (http && json_object_set_new(data, "http", http) != 0) {
        json_decref(data);
        data = NULL;
    }
    /* what the usage cost at the provider's list price (model_info's price,
     * USD per million tokens; docs/session-log.md): no price, no cost */
    const json_t *usage = json_object_get(data, "usage");
    json_t *info = usage && ac->pe && ac->pe->vt.model_info && ac->model
                       ? ac->pe->vt.model_info(ac->pe->self, ac->model)
                       : NULL;
    const json_t *price = json_object_get(info, "price");
    if (json_is_object(price)) {
        static const char *const counts[] = {"input_tokens", "cache_read_tokens",
                                             "cache_write_5m_tokens", "cache_write_1h_tokens",
                                             "output_tokens"};
        static const char *const rates[] = {"input", "cached_input", "cache_write_5m",
                                            "cache_write_1h", "output"};
        double n[5], usd = 0;
        for (size_t i = 0; i < 5; i++) {
            const json_t *v = json_object_get(usage, counts[i]);
            n[i] = json_is_integer(v) && json_integer_value(v) > 0
                       ? (double)json_integer_value(v)
                       : 0;
        }
        /* a total cache write without the per-TTL split is priced as 5m */
        const json_t *w = json_object_get(usage, "cache_write_tokens");
        if (n[2] == 0 && n[3] == 0 && json_is_integer(w) && json_integer_value(w) > 0)
            n[2] = (double)json_integer_value(w);
        bool priced = true;
        for (size_t i = 0; i < 5; i++) {
            const json_t *r = json_object_get(price, rates[i]);
            priced = priced && json_is_number(r);
            usd += n[i] * json_number_value(r);
        }
        if (priced && data &&
            json_object_set_new(data, "cost", json_pack("{s:f}", "usd", usd / 1e6)) != 0) {
            json_decref(data);
            data = NULL;
        }
    }
    json_decref(info);
    int rc = log_event(t, type, data, op, NULL, &seq);
    json_decref(append);
    if (rc == WEIR_OK && weir__stream_observed(&ac->stream))
        weir__stream_frame(&ac->stream,
                           json_pack("{s:s, s:I, s:{s:s, s:s, s:I}}", "type", "end", "index",
                                     (json_int_t)json_array_size(ac->stream.chunks), "outcome",
                                     "kind", "committed", "event_type", type, "seq",
                                     (json_int_t)seq));
    return rc;
}

typedef enum attempt_result {
    ATTEMPT_OK,      /* assistant/message committed; *out filled */
    ATTEMPT_RETRY,   /* failed, a listener asked for a retry */
    ATTEMPT_STOPPED  /* the turn ends (reason set) */
} attempt_result;

/*
 * The data of the log's last request/continuations-dropped event (borrowed
 * from t->dropped), or NULL when there is none: read once a turn (the log
 * follows the latest), then kept as this turn logs new ones.
 */
static const json_t *last_dropped(turn_ctx *t) {
    if (t->dropped_known)
        return t->dropped;
    size_t at1 = weir__log_latest(t->eng->log, WEIR__CONTINUATIONS_DROPPED); /* the log's fold */
    if (at1) {
        json_t *ev = weir__log_event_ref(t->eng->log, at1 - 1);
        if (!ev)
            return NULL; /* out of memory: not known; the event may repeat */
        t->dropped = json_incref(json_object_get(ev, "data"));
        json_decref(ev);
    }
    t->dropped_known = true;
    return t->dropped;
}

/*
 * *out (new): the request's messages, the log's derive with the
 * continuations the route may not read dropped (core/format/continuation.h), and
 * before it, when any was dropped and the counts differ from the last such
 * event, request/continuations-dropped {provider, model, count, reasons}
 * (durable, ignorable).  WEIR_OK, or a log/memory error.
 */
static int request_messages(turn_ctx *t, json_t **out) {
    weir__log *log = t->eng->log;
    *out = NULL;
    json_t *derived = weir__log_derive(log);
    const json_t *ctx = weir__log_request_context(log);
    weir__cont_dropped d;
    json_t *msgs = derived ? weir__continuation_apply(derived, weir__log_surface(log), ctx, &d)
                           : NULL;
    json_decref(derived);
    if (!msgs)
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory deriving the request");
    json_t *data = weir__continuation_event(weir__json_str(ctx, "provider", NULL),
                                            weir__json_str(ctx, "model", NULL), &d);
    int rc = WEIR_OK;
    if (weir__continuation_count(&d) && !data)
        rc = weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    if (data && !weir__json_equal(last_dropped(t), data)) {
        rc = weir__log_append(log, WEIR__CONTINUATIONS_DROPPED, data, NULL, NULL,
                              WEIR_EVENT_IGNORABLE, NULL, t->err);
        if (rc == WEIR_OK) {
            json_decref(t->dropped);
            t->dropped = json_incref(data);
        }
    }
    json_decref(data);
    if (rc != WEIR_OK) {
        json_decref(msgs);
        return rc;
    }
    *out = msgs;
    return WEIR_OK;
}

/*
 * Everything after prepare_call: admission, derive and freeze, llm/stream,
 * settlement.  `chunks` receives the final stream (new), or NULL when the
 * llm/stream middleware failed (then `mw` says why and the status is OK).
 */
static int stream_attempt(turn_ctx *t, attempt_ctx *ac, const json_t *config, bool first,
                          const json_t *entered, bool series, json_t **chunks,
                          weir_error *mw) {
    weir__engine *eng = t->eng;
    int rc = reconcile_system(t);
    if (rc == WEIR_OK && first)
        rc = admit_users(t, entered);
    if (rc == WEIR_OK)
        rc = admit_header(t, config, ac->pe, series && first);
    if (rc == WEIR_OK)
        rc = weir__log_sync_point(eng->log, t->err);
    if (rc != WEIR_OK)
        return rc;
    eng->requested = true;
    json_t *msgs = NULL;
    rc = request_messages(t, &msgs);
    if (rc != WEIR_OK)
        return rc;
    json_t *req = build_request(weir__log_request_header(eng->log), msgs);
    json_decref(msgs);
    if (!req)
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory deriving the request");
    if (weir__engine_check_requests())
        check_request(t, req);

    eng->attempts++;
    ac->stream.engine = eng;
    ac->stream.turn = t->turn;
    ac->stream.step = t->step;
    ac->stream.thread = pthread_self();
    ac->stream.live = true;
    ac->stream.revision = ++eng->revision;
    ac->stream.chunks = json_array();
    snprintf(ac->stream.attempt_id, sizeof ac->stream.attempt_id, "%s:%lu", eng->id, eng->attempts);
    if (weir__stream_observed(&ac->stream))
        weir__stream_frame(&ac->stream, json_pack("{s:s, s:i, s:i}", "type", "start", "turn",
                                                  t->turn, "step", t->step));
    json_t *args = hook_args(t);
    if (args)
        json_object_set(args, "request", req);
    *chunks = NULL;
    if (!ac->stream.chunks) {
        json_decref(args);
        json_decref(req);
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    /* the default's result is the stream's chunks, each checked as it was
     * emitted (weir__stream_emit: an object with a string type, all S_STREAM
     * asks): only a listener's own stream is validated */
    json_t *res = invoke_core(t, "llm/stream", args, stream_default, ac, mw);
    json_decref(args);
    json_decref(req);
    if (res && !json_is_array(res)) {
        weir__err(mw, WEIR_E_HOOK_RESULT, NULL, "llm/stream", "expected an array of chunks");
        json_decref(res);
        res = NULL;
    }
    if (!res)
        return WEIR_OK;
    if (res != ac->stream.chunks) { /* a listener produced its own stream: replay it live */
        json_t *copy = json_deep_copy(res);
        json_decref(res);
        if (!copy)
            return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        bool observed = weir__stream_observed(&ac->stream);
        if (ac->default_ran) {
            if (observed)
                weir__stream_frame(&ac->stream,
                                   json_pack("{s:s, s:I, s:{s:s}}", "type", "end", "index",
                                             (json_int_t)json_array_size(ac->stream.chunks),
                                             "outcome", "kind", "abandoned"));
            ac->stream.revision = ++eng->revision;
            if (observed)
                weir__stream_frame(&ac->stream,
                                   json_pack("{s:s, s:i, s:i}", "type", "start", "turn", t->turn,
                                             "step", t->step));
        }
        size_t i;
        json_t *c;
        json_array_foreach(copy, i, c) {
            if (!json_is_object(c))
                continue;
            if (!json_object_get(c, "time"))
                json_object_set_new(c, "time", json_integer(weir__now_ms()));
            if (observed)
                weir__stream_frame(&ac->stream,
                                   json_pack("{s:s, s:I, s:O, s:O}", "type", "chunk", "index",
                                             (json_int_t)i, "time", json_object_get(c, "time"),
                                             "chunk", c));
        }
        json_decref(ac->stream.chunks);
        ac->stream.chunks = json_incref(copy);
        res = copy;
    }
    *chunks = res;
    return WEIR_OK;
}

/*
 * The mark a kept interrupted answer leaves for the model: a user/message
 * right after it, {role:"user", content:[text], id, source:{kind:
 * "interrupt", cause}}, so that the next request shows the answer was cut
 * off and by whom (as Claude Code's "[Request interrupted by user]").  It
 * is logged, so every later request still derives from the log.
 */
static int note_interrupted(turn_ctx *t) {
    const char *cause = weir__signal_cause(&t->eng->signal);
    char text[256], idbuf[64];
    if (!strcmp(cause, "user"))
        snprintf(text, sizeof text,
                 "[The user interrupted the answer above: it stops where they cancelled it.]");
    else
        snprintf(text, sizeof text,
                 "[The answer above was interrupted (cancel cause: %s): it stops there.]", cause);
    json_t *op = json_string("append");
    json_t *data = json_pack("{s:i, s:i, s:{s:s, s:[{s:s, s:s}], s:s, s:{s:s, s:s}}}", "turn",
                             t->turn, "step", t->step, "message", "role", "user", "content",
                             "type", "text", "text", text, "id",
                             weir__random_id(idbuf, sizeof idbuf, "interrupt"), "source", "kind",
                             "interrupt", "cause", cause);
    int rc = op ? log_event(t, "user/message", data, op, NULL, NULL)
                : (json_decref(data), weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "oom"));
    json_decref(op);
    return rc;
}

/*
 * Settle one streamed attempt: interrupted prefix or attempt on cancel;
 * assistant/attempt + agent/request-error on failure; assistant/message on
 * success (then *calls is new and *max_tokens set).
 */
static int conclude_attempt(turn_ctx *t, attempt_ctx *ac, const char *provider,
                            const json_t *chunks, json_t *prior, attempt_result *result,
                            json_t **calls, bool *max_tokens) {
    weir__engine *eng = t->eng;
    weir_error e;
    int rc = WEIR_OK;
    bool aborted = cancelled(t);
    weir__assembled m;
    if (weir__stream_assemble(chunks, !aborted, &m) != 0)
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");

    json_t *failure = NULL;
    if (!aborted && m.finish && (!strcmp(m.finish, "error") || !strcmp(m.finish, "aborted")))
        failure = json_is_object(m.failure)
                      ? json_deep_copy(m.failure)
                      : weir__failure_new(provider, "UNKNOWN",
                                          "the provider finished with '%s' and no failure",
                                          m.finish);
    else if (!aborted && !m.finish)
        failure = ac->provider_rc != WEIR_OK
                      ? weir__failure_new(provider, "UNKNOWN",
                                          "provider '%s' failed (%s) without a finish chunk",
                                          provider, weir_status_name(ac->provider_rc))
                      : weir__failure_new(provider, "TRANSPORT",
                                          "the stream ended without a finish chunk");
    if (failure && !json_is_string(json_object_get(failure, "provider")))
        json_object_set_new(failure, "provider", json_string(provider));

    if (aborted) {
        if (m.visible) {
            json_t *data = json_pack("{s:i, s:i, s:O, s:O, s:b}", "turn", t->turn, "step", t->step,
                                     "message", m.message, "stream", chunks, "interrupted", 1);
            if (data && m.usage)
                json_object_set(data, "usage", m.usage);
            rc = settle(t, ac, "assistant/message", data);
            if (rc == WEIR_OK)
                rc = note_interrupted(t);
        } else {
            json_t *f = weir__failure_new(provider, "ABORTED", "cancelled: %s",
                                          weir__signal_cause(&eng->signal));
            rc = settle(t, ac, "assistant/attempt",
                        json_pack("{s:i, s:i, s:O, s:o}", "turn", t->turn, "step", t->step,
                                  "stream", chunks, "failure", f));
        }
        if (rc == WEIR_OK)
            set_aborted(t);
    } else if (failure) {
        rc = settle(t, ac, "assistant/attempt",
                    json_pack("{s:i, s:i, s:O, s:O}", "turn", t->turn, "step", t->step, "stream",
                              chunks, "failure", failure));
        if (rc == WEIR_OK) {
            json_t *eargs = json_pack("{s:s, s:i, s:i, s:s, s:O, s:O}", "agent", eng->id, "turn",
                                      t->turn, "step", t->step, "provider", provider, "failure",
                                      failure, "prior_failures", prior);
            json_t *action = invoke(t, "agent/request-error", eargs, NULL, NULL, &e);
            json_decref(eargs);
            if (!action) /* a failing recovery listener: report it; the failure stands */
                weir__engine_live(eng, "agent/error",
                                 json_pack("{s:i, s:i, s:{s:s, s:s}}", "turn", t->turn, "step",
                                           t->step, "error", "code", "UNKNOWN", "message",
                                           e.text));
            bool retry = action && !strcmp(weir__json_str(action, "kind", ""), "retry");
            /* {kind:"error", error}: the failure the turn ends with instead */
            json_t *ended = action && !strcmp(weir__json_str(action, "kind", ""), "error")
                                ? json_deep_copy(json_object_get(action, "error"))
                                : NULL;
            if (ended && !json_is_string(json_object_get(ended, "provider")))
                json_object_set_new(ended, "provider", json_string(provider));
            json_decref(action);
            if (cancelled(t)) { /* cancellation wins over a retry */
                set_aborted(t);
            } else if (retry) {
                json_array_append(prior, failure);
                *result = ATTEMPT_RETRY;
            } else {
                set_reason(t, json_pack("{s:s, s:O}", "kind", "error", "error",
                                        ended ? ended : failure));
            }
            json_decref(ended);
        }
    } else {
        /* the message is handed to the log (settle: no copy when nothing
         * else holds it) */
        json_t *data = json_pack("{s:i, s:i, s:O, s:O}", "turn", t->turn, "step", t->step,
                                 "message", m.message, "stream", chunks);
        if (data && m.usage && json_object_set_new(data, "usage", json_deep_copy(m.usage)) != 0) {
            json_decref(data);
            data = NULL;
        }
        json_t *message = m.message;
        m.message = NULL;
        json_decref(message); /* data's reference is the only one left */
        rc = settle(t, ac, "assistant/message", data);
        if (rc == WEIR_OK) {
            *result = ATTEMPT_OK;
            *max_tokens = m.finish && !strcmp(m.finish, "max-tokens");
            *calls = json_incref(m.calls);
        }
    }
    json_decref(failure);
    json_decref(m.message);
    json_decref(m.calls);
    return rc;
}


/* Agent options on this instance's first request, the logged header's config after. */
static json_t *request_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call;
    (void)args;
    weir__engine *eng = ctx;
    const json_t *h = weir__log_request_header(eng->log);
    return json_deep_copy(eng->requested && h ? json_object_get(h, "config") : eng->options);
}

/* One attempt of the step.  On ATTEMPT_OK, *calls (new) and *max_tokens are filled. */
static int run_attempt(turn_ctx *t, bool first, const json_t *entered, bool series,
                       json_t *prior, attempt_result *result, json_t **calls,
                       bool *max_tokens) {
    weir__engine *eng = t->eng;
    weir_error e;
    *result = ATTEMPT_STOPPED;
    json_t *args = hook_args(t);
    json_t *config = invoke_core(t, "agent/request", args, request_default, eng, &e);
    json_decref(args);
    if (config && !json_is_object(config)) {
        weir__err(&e, WEIR_E_HOOK_RESULT, NULL, "agent/request", "expected a call config object");
        json_decref(config);
        config = NULL;
    }
    if (!config) {
        hook_failed(t, "agent/request", &e);
        return WEIR_OK;
    }
    const char *provider = weir__json_str(config, "provider", NULL);
    if (!provider || !json_is_string(json_object_get(config, "model"))) {
        json_decref(config);
        fail_turn(t, weir__failure_new(provider, "UNKNOWN",
                                       "the call config has no %s (set agent.%s in the "
                                       "deployment config)",
                                       provider ? "model" : "provider",
                                       provider ? "model" : "provider"));
        return WEIR_OK;
    }
    const weir__provider_entry *pe = weir__host_provider(eng->host, provider);
    if (!pe) {
        fail_turn(t, weir__failure_new(provider, "UNKNOWN",
                                       "unknown provider '%s': no plugin row with that id "
                                       "registered a provider",
                                       provider));
        json_decref(config);
        return WEIR_OK;
    }
    if (cancelled(t)) {
        json_decref(config);
        set_aborted(t);
        return WEIR_OK;
    }
    attempt_ctx ac;
    memset(&ac, 0, sizeof ac);
    ac.pe = pe;
    ac.provider = provider;
    ac.model = weir__json_str(config, "model", NULL);
    weir_error_clear(&e);
    int prc = pe->vt.prepare_call ? pe->vt.prepare_call(pe->self, config, &eng->signal, &ac.call, &e)
                                  : WEIR_OK;
    if (prc != WEIR_OK || cancelled(t)) {
        if (prc == WEIR_OK && pe->vt.release_call)
            pe->vt.release_call(pe->self, ac.call);
        if (cancelled(t))
            set_aborted(t);
        else
            fail_turn(t, unknown_failure(provider, "prepare_call failed", &e));
        json_decref(config);
        return WEIR_OK;
    }

    json_t *chunks = NULL;
    weir_error mw;
    weir_error_clear(&mw);
    int rc = stream_attempt(t, &ac, config, first, entered, series, &chunks, &mw);
    if (pe->vt.release_call)
        pe->vt.release_call(pe->self, ac.call);
    if (rc == WEIR_OK && !chunks) { /* middleware failure: not offered to recovery */
        json_t *f = unknown_failure(provider, "llm/stream failed", &mw);
        rc = f ? settle(t, &ac, "assistant/attempt",
                        json_pack("{s:i, s:i, s:O, s:O}", "turn", t->turn, "step", t->step,
                                  "stream", ac.stream.chunks, "failure", f))
               : weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        if (rc == WEIR_OK) {
            if (cancelled(t)) {
                json_decref(f);
                set_aborted(t);
            } else {
                fail_turn(t, f);
            }
        } else {
            json_decref(f);
        }
        weir__stream_release(&ac.stream);
        json_decref(config);
        return rc;
    }
    if (rc == WEIR_OK)
        rc = conclude_attempt(t, &ac, provider, chunks, prior, result, calls, max_tokens);
    json_decref(chunks);
    weir__stream_release(&ac.stream);
    json_decref(config);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Tools and steps                                                           */
/* ------------------------------------------------------------------------ */

/* A copy of a tool's additional context with an id, or NULL. */
static json_t *context_message(const json_t *message) {
    json_t *m = json_deep_copy(message);
    char idbuf[64];
    if (m && !json_is_string(json_object_get(m, "id")))
        json_object_set_new(m, "id", json_string(weir__random_id(idbuf, sizeof idbuf, "ctx")));
    return m;
}

/* A tool's additional context.  In a turn it belongs to the running turn's
 * next request: anchored, so a queued followup never holds it back.  Crash
 * repair runs outside any turn: it is queued next-step. */
static int accept_context(void *ud, const json_t *message, weir_error *err) {
    weir__engine *eng = ud;
    json_t *m = context_message(message);
    if (!m)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    bool dup = false;
    int rc = eng->state == WEIR__AGENT_RUNNING /* set by this thread */
                 ? weir__engine_add_context(eng, m, eng->turn, err)
                 : weir__inbox_add(eng->inbox, m, true, &dup, err);
    json_decref(m);
    return rc;
}

static void live(void *ud, const char *type, json_t *data) { weir__engine_live(ud, type, data); }

/* The tool scheduler's view of the engine for the calls of `turn`/`step`. */
static weir__tool_step tool_step(weir__engine *eng, int turn, int step) {
    return (weir__tool_step){
        .tools = weir__host_tools(eng->host),
        .hooks = eng->hooks,
        .log = eng->log,
        .agent = eng->handle,
        .session_id = eng->id,
        .live = live,
        .live_ud = eng,
        .signal = &eng->signal,
        .turn = turn,
        .step = step,
        .max_parallel = eng->max_parallel,
        .accept_context = accept_context,
        .ud = eng,
        .jobs = eng->jobs,
    };
}

/* The same for settling a background job: outside any step, with no
 * signal (a job's post-execute runs even when the turn was cancelled) and
 * its contexts handed back, not queued. */
static weir__tool_step job_step(weir__engine *eng) {
    weir__tool_step st = tool_step(eng, 0, 0);
    st.signal = NULL;
    st.accept_context = NULL;
    st.ud = NULL;
    return st;
}

/*
 * Background jobs (docs/tools.md): settle every finished job, in the order
 * they finished.  With `deliver`, its service message is steered in (the
 * job id is the input id, so a result is delivered once; it wakes an idle
 * agent) and post-execute's additional contexts follow it next-step; at
 * close (`deliver` false) the outcome is only logged.  Driver thread (or
 * the closing thread, once no driver runs).  An error only when the log
 * cannot be written or memory ran out.
 */
int weir__driver_settle_jobs(weir__engine *eng, bool deliver, weir_error *err) {
    json_t *job;
    while (eng->jobs && (job = weir__jobs_take(eng->jobs))) {
        weir__tool_step st = job_step(eng);
        json_t *msg = NULL, *ctxs = NULL;
        const char *job_id = weir__json_str(job, "job_id", "");
        int rc = weir__tools_settle_job(&st, job, deliver, &msg, &ctxs, err);
        weir_error e;
        weir_error_clear(&e);
        if (rc == WEIR_OK && msg &&
            weir__engine_send(eng, msg, WEIR_SEND_STEER, job_id, 0, WEIR__SEND_INTERNAL, &e) !=
                WEIR_OK &&
            e.code != WEIR_E_STATE) {
            if (e.code == WEIR_E_IO || e.code == WEIR_E_NOMEM) {
                rc = (int)e.code;
                if (err)
                    *err = e;
            } else {
                weir__warn("weir: agent %s: background job %s result lost: %s", eng->id, job_id,
                           e.text);
            }
        }
        size_t i;
        json_t *m;
        json_array_foreach(rc == WEIR_OK ? ctxs : NULL, i, m) {
            json_t *c = json_deep_copy(m);
            char idbuf[64];
            if (c && !json_is_string(json_object_get(c, "id")))
                json_object_set_new(c, "id",
                                    json_string(weir__random_id(idbuf, sizeof idbuf, "ctx")));
            bool dup = false;
            rc = c ? weir__inbox_add(eng->inbox, c, true, &dup, err)
                   : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
            json_decref(c);
            if (rc != WEIR_OK)
                break;
        }
        json_decref(msg);
        json_decref(ctxs);
        /* settled (or failed): listed as active until now, never neither */
        weir__jobs_forget(eng->jobs, job_id);
        json_decref(job);
        if (rc != WEIR_OK)
            return rc;
    }
    return WEIR_OK;
}

/*
 * Jobs a crash cut (docs/tools.md, "Background tools"): a job/queued of the
 * log without its job/returned, job/failed or job/cancelled is never run
 * again.  Each gets, in the order queued, job/failed with the INTERRUPTED
 * result (no hook runs for it) and its service message, steered in: the
 * model learns the job may or may not have run.  Opening runs it after the
 * crash repair.  An error only when the log cannot be written.
 */
int weir__driver_recover_jobs(weir__engine *eng, weir_error *err) {
    json_t *open = json_object(), *order = json_array();
    if (!open || !order) {
        json_decref(open);
        json_decref(order);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    size_t n = weir__log_count(eng->log);
    bool oom = false;
    for (size_t i = weir__log_base(eng->log); !oom && i < n; i++) { /* no job was open at a
                                                                     * checkpoint (jobs_open) */
        json_t *ev = weir__log_event_ref(eng->log, i); /* one at a time: open released them */
        const char *type = weir__json_str(ev, "type", "");
        const json_t *d = json_object_get(ev, "data");
        const char *job = weir__json_str(d, "job_id", NULL);
        oom = !ev;
        if (job && !strcmp(type, WEIR__JOB_QUEUED)) {
            oom = json_object_set(open, job, json_object_get(ev, "data")) != 0 ||
                  json_array_append_new(order, json_string(job)) != 0;
        } else if (job && (!strcmp(type, WEIR__JOB_RETURNED) || !strcmp(type, WEIR__JOB_FAILED) ||
                           !strcmp(type, WEIR__JOB_CANCELLED))) {
            json_object_del(open, job);
        }
        json_decref(ev);
    }
    if (oom) {
        json_decref(open);
        json_decref(order);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "recovering jobs: out of memory");
    }
    int rc = WEIR_OK;
    size_t i;
    json_t *id;
    json_array_foreach(order, i, id) {
        const json_t *q = json_object_get(open, json_string_value(id));
        if (!q)
            continue;
        json_t *job = json_pack(
            "{s:O, s:O, s:O, s:s, s:O, s:O, s:s, s:b, s:{s:[{s:s, s:s}], s:b, s:{s:s, s:s}}}",
            "job_id", id, "call_id", json_object_get(q, "call_id"), "tool",
            json_object_get(q, "tool"), "arguments", "", "turn", json_object_get(q, "turn"),
            "step", json_object_get(q, "step"), "outcome", "failed", "interrupted", 1, "result",
            "content", "type", "text", "text",
            "Error: interrupted by a crash: the background job may or may not have run; do "
            "not assume either",
            "is_error", 1, "error", "name", "AbortError", "code", "INTERRUPTED");
        const char *key = weir__json_str(q, "idempotency_key", NULL);
        if (!job || (key && json_object_set_new(job, "idempotency_key", json_string(key)) != 0)) {
            json_decref(job);
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
            break;
        }
        weir__tool_step st = job_step(eng);
        st.jobs = NULL; /* a recovered job is never started again */
        json_t *msg = NULL, *ctxs = NULL;
        rc = weir__tools_settle_job(&st, job, true, &msg, &ctxs, err);
        weir_error e;
        weir_error_clear(&e);
        if (rc == WEIR_OK && msg &&
            (rc = weir__engine_send(eng, msg, WEIR_SEND_STEER, json_string_value(id), 0,
                                    WEIR__SEND_INTERNAL, &e)) != WEIR_OK) {
            if (err)
                *err = e;
        }
        json_decref(msg);
        json_decref(ctxs);
        json_decref(job);
        if (rc != WEIR_OK)
            break;
    }
    json_decref(open);
    json_decref(order);
    return rc;
}

/* One step: step/start, attempts, tools, step/end. */
static int run_step(turn_ctx *t, const json_t *entered, bool series, step_out *out) {
    weir__engine *eng = t->eng;
    out->ends = true;
    int rc = log_event(t, "step/start", json_pack("{s:i, s:i}", "turn", t->turn, "step", t->step),
                       NULL, NULL, NULL);
    if (rc != WEIR_OK)
        return rc;
    t->step_open = true;
    json_t *prior = json_array();
    json_t *calls = NULL;
    bool max_tokens = false, first = true;
    attempt_result ar = ATTEMPT_STOPPED;
    if (!prior)
        return weir__err(t->err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    for (;;) {
        if (cancelled(t)) {
            set_aborted(t);
            break;
        }
        rc = run_attempt(t, first, entered, series, prior, &ar, &calls, &max_tokens);
        if (rc != WEIR_OK || ar != ATTEMPT_RETRY)
            break;
        first = false;
    }
    json_decref(prior);
    if (rc == WEIR_OK && ar == ATTEMPT_OK) {
        bool concluded = false;
        if (max_tokens)
            t->max_tokens = true;
        else if (json_array_size(calls) > 0) {
            weir__tool_step st = tool_step(eng, t->turn, t->step);
            weir_error e;
            weir_error_clear(&e);
            if (weir__tools_run(&st, calls, &concluded, &e) != WEIR_OK) {
                if (e.code != WEIR_E_IO && cancelled(t)) /* the cancel wins */
                    set_aborted(t);
                else
                    fail_turn(t, e.code == WEIR_E_IO
                                     ? weir__failure_new(NULL, "IO", "%s", e.text)
                                     : unknown_failure(NULL, "the tool scheduler failed", &e));
                /* the calls it left without a result get one before the
                 * step ends; else the step stays open (close_failed_turn) */
                rc = weir__log_settle_calls(eng->log, "the tool call could not be completed",
                                            t->err);
            } else
                out->ends = concluded;
        }
        if (!t->reason && cancelled(t))
            set_aborted(t);
    }
    json_decref(calls);
    if (rc != WEIR_OK)
        return rc;
    rc = log_event(t, "step/end", json_pack("{s:i, s:i}", "turn", t->turn, "step", t->step), NULL,
                   NULL, NULL);
    if (rc == WEIR_OK) {
        t->step_open = false;
        /* paid by the next durability point: the next request (the
         * driver's or a plugin's direct model call) or the turn's end */
        weir__log_defer_sync(eng->log);
        weir__log_trim(eng->log, false); /* a long turn holds lines, not trees */
    }
    return rc;
}

/* agent/turn-stopping (serial); false when the turn ended (reason set). */
static bool turn_stopping(turn_ctx *t) {
    weir_error e;
    json_t *args = json_pack("{s:s, s:i}", "agent", t->eng->id, "turn", t->turn);
    json_t *res = invoke(t, "agent/turn-stopping", args, NULL, NULL, &e);
    json_decref(args);
    if (!res) {
        hook_failed(t, "agent/turn-stopping", &e);
        return false;
    }
    json_decref(res);
    return true;
}

static int turn_body(turn_ctx *t) {
    json_t *claimed = NULL;
    int rc = claim(t, true, &claimed);
    if (rc != WEIR_OK)
        return rc;
    if (!assemble(t)) {
        json_decref(claimed);
        return WEIR_OK;
    }
    bool may_end = true; /* the first proposed step: empty input ends the turn */
    for (;;) {
        if (cancelled(t)) {
            set_aborted(t);
            break;
        }
        json_t *entered = NULL;
        bool series = false;
        pre_kind pk = pre_step(t, claimed, &entered, &series);
        json_decref(claimed);
        claimed = NULL;
        if (pk != PRE_ENTER)
            break;
        if (cancelled(t)) { /* cancelled during pre-step: the open turn spends no step */
            json_decref(entered);
            set_aborted(t);
            break;
        }
        if (json_array_size(entered) == 0 && may_end) {
            json_decref(entered);
            break;
        }
        t->step++;
        step_out so;
        rc = run_step(t, entered, series, &so);
        json_decref(entered);
        if (rc != WEIR_OK || t->reason)
            break;
        if (so.ends) {
            /* The final check.  Only input that continues the turn counts: a
             * background job's result alone does not (docs/generations.md); it
             * starts the next turn.  Closing sets the stop fence: no anchored
             * steering is taken for this turn afterwards. */
            bool ordinary = false;
            weir__inbox_pending(t->eng->inbox, &ordinary);
            if (!ordinary && !turn_stopping(t))
                break;
            if (weir__inbox_close_turn(t->eng->inbox, t->turn, false))
                break;
        }
        if (cancelled(t)) {
            set_aborted(t);
            break;
        }
        rc = claim(t, false, &claimed);
        if (rc != WEIR_OK)
            break;
        may_end = so.ends;
    }
    json_decref(claimed);
    return rc;
}

/* Whether a background job's job/queued has no end in the log yet: a
 * checkpoint waits for none (a resume from it finds every open job in the
 * log after it: docs/session-log.md, "Resume from a checkpoint"). */
static bool jobs_open(weir__engine *eng) {
    if (!eng->jobs)
        return false;
    json_t *active = weir__jobs_active(eng->jobs);
    bool open = !active || json_array_size(active) > 0; /* out of memory: no checkpoint */
    json_decref(active);
    return open;
}

/*
 * The log refused an event (I/O, memory): close the open step and turn, as
 * far as the log still takes events, so that the next turn nests.  What
 * cannot be written is closed by crash repair on the next open.  The turn
 * ends in error: code IO when the log could not be written (the message
 * names the file), else UNKNOWN.  The error also goes live as agent/error
 * {turn, step, error}, with fatal:true when the turn/end itself could not
 * be logged: no turn/end follows, and observers (the generation tracker)
 * end the turn on that event.
 */
static void close_failed_turn(turn_ctx *t) {
    weir_error ignored;
    weir_error *keep = t->err;
    t->err = &ignored;
    json_t *failure = weir__failure_new(NULL, keep->code == WEIR_E_IO ? "IO" : "UNKNOWN", "%s",
                                        keep->text[0] ? keep->text
                                                      : weir_strerror((int)keep->code));
    bool logged = false;
    /* a step ends only with every tool call answered: the log refused a
     * tool/result, say */
    if (failure && (!t->step_open ||
                    (weir__log_settle_calls(t->eng->log, "the tool call could not be completed",
                                            &ignored) == WEIR_OK &&
                     log_event(t, "step/end",
                               json_pack("{s:i, s:i}", "turn", t->turn, "step", t->step), NULL,
                               NULL, NULL) == WEIR_OK)))
        logged = log_event(t, "turn/end",
                           json_pack("{s:i, s:{s:s, s:O}}", "turn", t->turn, "reason", "kind",
                                     "error", "error", failure),
                           NULL, NULL, NULL) == WEIR_OK;
    json_t *data = failure ? json_pack("{s:i, s:i, s:O}", "turn", t->turn, "step", t->step,
                                       "error", failure)
                           : NULL;
    if (data && !logged && json_object_set_new(data, "fatal", json_true()) != 0) {
        json_decref(data);
        data = NULL;
    }
    weir__engine_live(t->eng, "agent/error", data);
    json_decref(failure);
    /* what the log took before it failed is durable before the run returns
     * (a deferred step end included) */
    (void)weir__log_pay_sync(t->eng->log, &ignored);
    t->err = keep;
}

static int finish_turn(turn_ctx *t, int rc) {
    weir__log_trim(t->eng->log, true); /* an idle agent keeps no grown line buffer */
    json_decref(t->reason);
    json_decref(t->assembly);
    json_decref(t->dropped);
    weir__free(t->system_text);
    return rc;
}

int weir__driver_turn(weir__engine *eng, weir_error *err) {
    if (!eng)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir__driver_turn: NULL agent");
    weir_error local;
    turn_ctx t = {.eng = eng, .turn = eng->turn + 1, .err = err ? err : &local};
    weir_error_clear(t.err);
    /* a turn a failed close left open (the log refused its closers) is
     * closed as crash repair would, so the new one nests */
    int rc = weir__log_turn_open(eng->log) ? weir__log_repair(eng->log, NULL, t.err) : WEIR_OK;
    if (rc != WEIR_OK)
        return rc;
    rc = log_event(&t, "turn/start", json_pack("{s:i}", "turn", t.turn), NULL, NULL, NULL);
    if (rc != WEIR_OK)
        return rc;
    eng->turn = t.turn;
    weir__inbox_open_turn(eng->inbox, t.turn);
    rc = turn_body(&t);
    /* the stop fence, then anchored input the turn did not take is held:
     * it never falls forward into a later turn */
    weir__inbox_close_turn(eng->inbox, t.turn, true);
    if (rc == WEIR_OK)
        rc = weir__inbox_hold_anchored(eng->inbox, t.turn, t.err);
    weir__inbox_open_turn(eng->inbox, 0);
    if (rc == WEIR_OK) {
        if (!t.reason)
            t.reason = json_pack("{s:s}", "kind", t.max_tokens ? "max-tokens" : "completed");
        rc = log_event(&t, "turn/end",
                       json_pack("{s:i, s:O}", "turn", t.turn, "reason",
                                 t.reason ? t.reason : json_null()),
                       NULL, NULL, NULL);
        if (rc == WEIR_OK) {
            /* the summary readers start from, at its interval (the turn is
             * closed: a failure here is the log's, not the turn's) */
            rc = jobs_open(eng) ? WEIR_OK : weir__inbox_checkpoint(eng->inbox, t.err);
            return finish_turn(&t, rc == WEIR_OK ? weir__log_sync_point(eng->log, t.err) : rc);
        }
    }
    close_failed_turn(&t);
    return finish_turn(&t, rc);
}

/* ------------------------------------------------------------------------ */
/* Tools across a crash (docs/tools.md)                                      */
/* ------------------------------------------------------------------------ */

/*
 * The calls a crash cut: those of the open step of the log's open last turn
 * without a tool/result, in model order, as weir__tools_resume takes them.
 * The fold is the log's (core/log/log_fold.h, the one weir__log_repair answers
 * by, so that repair finds nothing left to answer): the step's tool/calls
 * without a result (in log order, with call_seq and the logged
 * idempotency_key), then the tool_calls of its assistant messages that
 * were never dispatched.  `reruns` counts the step's
 * WEIR__TOOL_RERUN_EVENTs per call.  *calls is a new array (empty when no
 * turn or step is open).  E_NOMEM.
 */
static int cut_calls(weir__log *log, int *turn, int *step, json_t **calls) {
    *calls = json_array();
    if (!*calls)
        return WEIR_E_NOMEM;
    size_t n = weir__log_count(log), from = n;
    if (!weir__log_open_step(log, turn, step, &from))
        return WEIR_OK;
    weir__call_fold f;
    json_t *reruns = json_object();
    bool oom = !reruns || weir__call_fold_init(&f) != WEIR_OK;
    if (oom) {
        json_decref(reruns);
        return WEIR_E_NOMEM;
    }
    for (size_t i = from; !oom && i < n; i++) {
        const json_t *ev = weir__log_event(log, i);
        oom = !ev || weir__call_fold_event(&f, i, ev, NULL, NULL) != WEIR_OK;
        if (!oom && strcmp(weir__json_str(ev, "type", ""), WEIR__TOOL_RERUN_EVENT) == 0) {
            const char *id = weir__json_str(json_object_get(ev, "data"), "call_id", "");
            json_int_t have = weir__json_int(reruns, id, 0);
            if (json_object_set_new(reruns, id, json_integer(have + 1)) != 0)
                oom = true;
        }
    }
    size_t k;
    json_t *x;
    json_array_foreach(f.pending, k, x) { /* [id, seq, tool/call envelope] */
        if (oom)
            break;
        const json_t *d = json_object_get(json_array_get(x, 2), "data");
        const char *key = weir__json_str(d, "idempotency_key", NULL);
        json_t *c = json_pack("{s:s, s:s, s:s, s:I}", "id",
                              json_string_value(json_array_get(x, 0)), "name",
                              weir__json_str(d, "name", ""), "arguments",
                              weir__json_str(d, "arguments", ""), "call_seq",
                              json_integer_value(json_array_get(x, 1)));
        if (!c || (key && json_object_set_new(c, "idempotency_key", json_string(key)) != 0) ||
            json_array_append(*calls, c) != 0)
            oom = true;
        json_decref(c);
    }
    json_array_foreach(f.wanted, k, x) { /* [id, seq, tool_call block] */
        if (oom)
            break;
        const json_t *b = json_array_get(x, 2);
        if (json_array_append_new(*calls, json_pack("{s:s, s:s, s:s}", "id",
                                                    json_string_value(json_array_get(x, 0)),
                                                    "name",
                                                    weir__json_str(b, "name", ""), "arguments",
                                                    weir__json_str(b, "arguments", "{}"))) != 0)
            oom = true;
    }
    json_t *c;
    json_array_foreach(*calls, k, c) {
        if (!oom && json_object_set_new(c, "reruns", json_integer(weir__json_int(
                                                         reruns, weir__json_str(c, "id", ""),
                                                         0))) != 0)
            oom = true;
    }
    weir__call_fold_free(&f);
    json_decref(reruns);
    return oom ? WEIR_E_NOMEM : WEIR_OK;
}

int weir__driver_resume_due(weir__engine *eng, bool *due, weir_error *err) {
    *due = false;
    json_t *calls = NULL;
    int turn = 0, step = 0;
    if (cut_calls(eng->log, &turn, &step, &calls) != WEIR_OK) {
        json_decref(calls);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    *due = json_array_size(calls) > 0;
    json_decref(calls);
    return WEIR_OK;
}

int weir__driver_resume(weir__engine *eng, weir_error *err) {
    if (!eng)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir__driver_resume: NULL agent");
    json_t *calls = NULL;
    int turn = 0, step = 0;
    int rc = cut_calls(eng->log, &turn, &step, &calls);
    if (rc != WEIR_OK)
        rc = weir__err(err, rc, NULL, NULL, "out of memory");
    else if (json_array_size(calls) > 0) {
        weir__tool_step st = tool_step(eng, turn, step);
        st.jobs = NULL; /* a re-run runs in the foreground */
        weir_error e;
        weir_error_clear(&e);
        rc = weir__tools_resume(&st, calls, &e);
        if (rc != WEIR_OK && err)
            *err = e;
    }
    json_decref(calls);
    if (rc == WEIR_OK)
        rc = weir__log_repair(eng->log, NULL, err);
    return rc;
}
