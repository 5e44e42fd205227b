/*
 * core/runtime/tools.c - the tool registry (docs/tools.md), tool executions and their
 * normalized outcomes, and the background job table (docs/generations.md).
 *
 * The registry is filled during plugin init (single-threaded) and read-only
 * afterwards; lookups may then come from any thread.  Bodies run on the
 * registry's worker pool (tool_scheduler.c) or on a job table's own pool.
 */
#include "tools.h"

#include <pthread.h>
#include <string.h>

#include "schema.h"
#include "cancel.h"

/* Upper bound on the shared body pool; calls beyond it wait queued. */
#define TOOLS_POOL_MAX_THREADS 64

struct weir__tools {
    weir__tool_def **v; /* registration order */
    size_t n, cap;
    weir__pool *pool;
    pthread_mutex_t mu;       /* v and n, after init (tool_update) */
    weir__tool_def **retired; /* replaced or removed: freed at destroy */
    size_t nretired;
    json_t *schemas; /* weir__tools_schemas' answer while v is unchanged (shared), or NULL */
    weir__event_check_fn event_check; /* tool_exec_append's type check, or NULL */
    void *event_ud;
};

void weir__tools_set_event_check(weir__tools *t, weir__event_check_fn fn, void *ud) {
    if (!t)
        return;
    t->event_check = fn;
    t->event_ud = ud;
}

/* ------------------------------------------------------------------------ */
/* Registry                                                                  */
/* ------------------------------------------------------------------------ */

int weir__tools_create(weir__tools **out) {
    if (!out)
        return WEIR_E_INVAL;
    *out = NULL;
    weir__tools *t = weir__calloc(1, sizeof *t);
    if (!t)
        return WEIR_E_NOMEM;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        weir__free(t);
        return WEIR_E_INTERNAL;
    }
    int rc = weir__pool_create(TOOLS_POOL_MAX_THREADS, &t->pool, NULL);
    if (rc != WEIR_OK) {
        weir__free(t);
        return rc;
    }
    *out = t;
    return WEIR_OK;
}

static void def_free(weir__tool_def *d) {
    if (!d)
        return;
    weir__free(d->name);
    weir__free(d->description);
    weir__free(d->plugin_id);
    json_decref(d->parameters);
    weir__free(d);
}

void weir__tools_destroy(weir__tools *t) {
    if (!t)
        return;
    weir__pool_destroy(t->pool);
    for (size_t i = 0; i < t->n; i++)
        def_free(t->v[i]);
    for (size_t i = 0; i < t->nretired; i++)
        def_free(t->retired[i]);
    weir__free(t->retired);
    json_decref(t->schemas);
    pthread_mutex_destroy(&t->mu);
    weir__free(t->v);
    weir__free(t);
}

/* Tool names as the model APIs accept them: [A-Za-z0-9_-]{1,64}. */
static bool valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static const weir__tool_def *find_unlocked(const weir__tools *t, const char *name) {
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i]->name, name) == 0)
            return t->v[i];
    return NULL;
}

/* The registry is not const to lock it: its mutex is the only change. */
static pthread_mutex_t *reg_mu(const weir__tools *t) {
    return (pthread_mutex_t *)(uintptr_t)&t->mu;
}

static int add_locked(weir__tools *t, const char *plugin_id, const weir_tool *tool,
                      weir_error *err) {
    if (!t || !tool)
        return weir__err(err, WEIR_E_INVAL, plugin_id, NULL, "tool_register: NULL argument");
    if (tool->struct_size < sizeof(weir_tool))
        return weir__err(err, WEIR_E_INVAL, plugin_id, NULL,
                         "tool_register: struct_size %u is smaller than the 1.0 weir_tool (%zu)",
                         (unsigned)tool->struct_size, sizeof(weir_tool));
    if (!tool->name || !valid_name(tool->name))
        return weir__err(err, WEIR_E_INVAL, plugin_id, NULL,
                         "tool_register: invalid tool name '%s' (want [A-Za-z0-9_-]{1,64})",
                         tool->name ? tool->name : "(null)");
    if (!tool->execute)
        return weir__err(err, WEIR_E_INVAL, plugin_id, NULL,
                         "tool_register: tool '%s' has no execute function", tool->name);
    if (tool->parameters && !json_is_object(tool->parameters))
        return weir__err(err, WEIR_E_INVAL, plugin_id, NULL,
                         "tool_register: tool '%s': parameters must be a JSON Schema object",
                         tool->name);
    if (tool->flags & ~(uint32_t)(WEIR_TOOL_BACKGROUND | WEIR_TOOL_IDEMPOTENT | WEIR_TOOL_INLINE))
        return weir__err(err, WEIR_E_INVAL, plugin_id, NULL,
                         "tool_register: tool '%s': unknown flags 0x%x", tool->name,
                         (unsigned)tool->flags);
    if ((tool->flags & WEIR_TOOL_INLINE) && (tool->flags & WEIR_TOOL_BACKGROUND))
        return weir__err(err, WEIR_E_INVAL, plugin_id, NULL,
                         "tool_register: tool '%s': WEIR_TOOL_INLINE and WEIR_TOOL_BACKGROUND "
                         "exclude each other (a background job runs on the tool pool)",
                         tool->name);
    const weir__tool_def *old = find_unlocked(t, tool->name);
    if (old)
        return weir__err(err, WEIR_E_DUPLICATE, plugin_id, NULL,
                         "tool '%s' of plugin '%s' is already registered by plugin '%s'",
                         tool->name, plugin_id ? plugin_id : "(core)",
                         old->plugin_id ? old->plugin_id : "(core)");
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        weir__tool_def **v = weir__realloc(t->v, cap * sizeof *v);
        if (!v)
            return weir__err(err, WEIR_E_NOMEM, plugin_id, NULL, "tool_register: out of memory");
        t->v = v;
        t->cap = cap;
    }
    weir__tool_def *d = weir__calloc(1, sizeof *d);
    if (!d)
        return weir__err(err, WEIR_E_NOMEM, plugin_id, NULL, "tool_register: out of memory");
    d->name = weir__strdup(tool->name);
    d->description = weir__strdup(tool->description ? tool->description : "");
    d->plugin_id = plugin_id ? weir__strdup(plugin_id) : NULL;
    d->parameters = tool->parameters ? json_deep_copy(tool->parameters)
                                     : json_pack("{s:s}", "type", "object");
    if (!d->name || !d->description || (plugin_id && !d->plugin_id) || !d->parameters) {
        def_free(d);
        return weir__err(err, WEIR_E_NOMEM, plugin_id, NULL, "tool_register: out of memory");
    }
    d->registry = t;
    d->flags = tool->flags;
    d->execute = tool->execute;
    d->concurrency_safe = tool->concurrency_safe;
    d->user_data = tool->user_data;
    t->v[t->n++] = d;
    json_decref(t->schemas); /* the list changed */
    t->schemas = NULL;
    return WEIR_OK;
}

int weir__tools_add(weir__tools *t, const char *plugin_id, const weir_tool *tool,
                    weir_error *err) {
    if (!t)
        return add_locked(t, plugin_id, tool, err);
    pthread_mutex_lock(&t->mu);
    int rc = add_locked(t, plugin_id, tool, err);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

static size_t index_of(const weir__tools *t, const char *name) {
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i]->name, name) == 0)
            return i;
    return t->n;
}

static int retire(weir__tools *t, size_t i) {
    weir__tool_def **r = weir__realloc(t->retired, (t->nretired + 1) * sizeof *r);
    if (!r)
        return WEIR_E_NOMEM;
    t->retired = r;
    t->retired[t->nretired++] = t->v[i];
    memmove(t->v + i, t->v + i + 1, (t->n - i - 1) * sizeof *t->v);
    t->n--;
    json_decref(t->schemas); /* the list changed */
    t->schemas = NULL;
    return WEIR_OK;
}

static bool same_owner(const weir__tool_def *d, const char *plugin_id) {
    return (!d->plugin_id && !plugin_id) ||
           (d->plugin_id && plugin_id && strcmp(d->plugin_id, plugin_id) == 0);
}

int weir__tools_update(weir__tools *t, const char *plugin_id, const weir_tool *tool,
                       weir_error *err) {
    if (!t || !tool || !tool->name)
        return add_locked(t, plugin_id, tool, err);
    pthread_mutex_lock(&t->mu);
    size_t i = index_of(t, tool->name);
    int rc;
    if (i < t->n && !same_owner(t->v[i], plugin_id)) {
        rc = weir__err(err, WEIR_E_DUPLICATE, plugin_id, NULL,
                       "tool '%s' of plugin '%s' is already registered by plugin '%s'",
                       tool->name, plugin_id ? plugin_id : "(core)",
                       t->v[i]->plugin_id ? t->v[i]->plugin_id : "(core)");
    } else if (i < t->n) {
        /* take the old one out, add the new one, put it in the old one's place */
        weir__tool_def *old = t->v[i];
        memmove(t->v + i, t->v + i + 1, (t->n - i - 1) * sizeof *t->v);
        t->n--;
        rc = add_locked(t, plugin_id, tool, err);
        weir__tool_def *moved = rc == WEIR_OK ? t->v[--t->n] : old;
        memmove(t->v + i + 1, t->v + i, (t->n - i) * sizeof *t->v);
        t->v[i] = moved;
        t->n++;
        if (rc == WEIR_OK) {
            weir__tool_def **r = weir__realloc(t->retired, (t->nretired + 1) * sizeof *r);
            if (r) {
                t->retired = r;
                t->retired[t->nretired++] = old;
            } else {
                /* cannot keep the old definition for running calls: undo */
                t->v[i] = old;
                def_free(moved);
                rc = weir__err(err, WEIR_E_NOMEM, plugin_id, NULL, "tool_update: out of memory");
            }
        }
    } else {
        rc = add_locked(t, plugin_id, tool, err);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int weir__tools_remove(weir__tools *t, const char *plugin_id, const char *name,
                       weir_error *err) {
    if (!t || !name)
        return weir__err(err, WEIR_E_INVAL, plugin_id, NULL, "tool_remove: NULL argument");
    pthread_mutex_lock(&t->mu);
    size_t i = index_of(t, name);
    int rc;
    if (i == t->n || !same_owner(t->v[i], plugin_id))
        rc = weir__err(err, WEIR_E_NOT_FOUND, plugin_id, NULL,
                       "tool_remove: plugin '%s' has no tool '%s'",
                       plugin_id ? plugin_id : "(core)", name);
    else if ((rc = retire(t, i)) != WEIR_OK)
        weir__err(err, rc, plugin_id, NULL, "tool_remove: out of memory");
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int weir__tool_exec_progress(weir_tool_exec *exec, const json_t *progress) {
    if (!exec || !json_is_object(progress))
        return WEIR_E_INVAL;
    if (!exec->live)
        return WEIR_E_UNSUPPORTED;
    json_t *copy = json_deep_copy(progress);
    json_t *data = copy ? json_pack("{s:i, s:i, s:s, s:s, s:o}", "turn", exec->turn, "step",
                                    exec->step, "call_id", exec->call_id ? exec->call_id : "",
                                    "name", exec->name ? exec->name : "", "progress", copy)
                        : NULL;
    if (!data)
        return WEIR_E_NOMEM;
    exec->live(exec->live_ud, "tool/progress", data);
    return WEIR_OK;
}

json_t *weir__tools_schemas(const weir__tools *t) {
    if (!t)
        return NULL;
    weir__tools *w = (weir__tools *)(uintptr_t)t; /* the cache is the only change */
    pthread_mutex_lock(reg_mu(t));
    json_t *arr = t->schemas ? NULL : json_array();
    for (size_t i = 0; arr && i < t->n; i++) {
        const weir__tool_def *d = t->v[i];
        json_t *o = json_pack("{s:s, s:s, s:O}", "name", d->name, "description",
                              d->description, "parameters", d->parameters);
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    if (arr)
        w->schemas = arr;
    json_t *out = json_incref(t->schemas);
    pthread_mutex_unlock(reg_mu(t));
    return out;
}

const weir__tool_def *weir__tools_find(const weir__tools *t, const char *name) {
    if (!t || !name)
        return NULL;
    pthread_mutex_lock(reg_mu(t));
    const weir__tool_def *d = find_unlocked(t, name);
    pthread_mutex_unlock(reg_mu(t));
    return d;
}

weir__pool *weir__tools_pool(weir__tools *t) { return t ? t->pool : NULL; }

bool weir__tool_parallel_safe(const weir__tool_def *def, const json_t *args) {
    if (!def || !def->concurrency_safe || !args)
        return false;
    return def->concurrency_safe(args, def->user_data) == 1;
}

/* ------------------------------------------------------------------------ */
/* Executions                                                                */
/* ------------------------------------------------------------------------ */

const char *weir__tool_exec_call_id(const weir_tool_exec *exec) {
    return exec ? exec->call_id : NULL;
}

weir_signal *weir__tool_exec_signal(const weir_tool_exec *exec) {
    return exec ? exec->signal : NULL;
}

const char *weir__tool_exec_idempotency_key(const weir_tool_exec *exec) {
    return exec ? exec->key : NULL;
}

int weir__tool_exec_attempt(const weir_tool_exec *exec) { return exec ? exec->attempt : 0; }

char *weir__tool_key(const char *session_id, int turn, int step, const char *call_id) {
    return weir__asprintf("%s:%d:%d:%s", session_id ? session_id : "", turn, step,
                          call_id ? call_id : "");
}

void weir__tool_exec_fail(weir_tool_exec *exec, const char *code, const char *fmt, ...) {
    if (!exec)
        return;
    weir__free(exec->fail_code);
    weir__free(exec->fail_message);
    exec->fail_code = code && *code ? weir__strdup(code) : NULL;
    exec->fail_message = NULL;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        exec->fail_message = weir__vasprintf(fmt, ap);
        va_end(ap);
    }
}

int weir__tool_exec_append(weir_tool_exec *exec, const char *type, const json_t *data,
                           weir_error *err) {
    const char *who = exec && exec->def ? exec->def->plugin_id : NULL;
    if (!exec || !exec->def || !type || !json_is_object(data))
        return weir__err(err, WEIR_E_INVAL, who, NULL,
                         "tool_exec_append: a tool execution, a type and an object are required");
    const weir__tools *reg = exec->def->registry;
    bool name_ok = *type && strlen(type) <= 128;
    for (const char *c = type; name_ok && *c; c++)
        name_ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
                  *c == '-' || *c == '/' || *c == '.';
    if (!name_ok || weir__log_is_core_type(type))
        return weir__err(err, WEIR_E_INVAL, who, NULL,
                         "tool_exec_append: '%.128s' is not a plugin event type", type);
    if (reg && reg->event_check && !reg->event_check(exec->def->plugin_id, type, reg->event_ud))
        return weir__err(err, WEIR_E_NOT_FOUND, who, NULL,
                         "tool_exec_append: tool '%s': event type '%s' is not registered by its "
                         "plugin",
                         exec->def->name, type);
    if (json_array_size(exec->events) >= WEIR__TOOL_MAX_EVENTS)
        return weir__err(err, WEIR_E_STATE, who, NULL,
                         "tool_exec_append: tool '%s': at most %d events per call",
                         exec->def->name, WEIR__TOOL_MAX_EVENTS);
    if (!exec->events && !(exec->events = json_array()))
        return weir__err(err, WEIR_E_NOMEM, who, NULL, "tool_exec_append: out of memory");
    json_t *ev = json_pack("{s:s, s:o}", "type", type, "data", json_deep_copy(data));
    if (!ev || json_array_append_new(exec->events, ev) != 0)
        return weir__err(err, WEIR_E_NOMEM, who, NULL, "tool_exec_append: out of memory");
    return WEIR_OK;
}

void weir__tool_outcome_clear(weir__tool_outcome *o) {
    if (!o)
        return;
    json_decref(o->content);
    json_decref(o->error);
    json_decref(o->events);
    memset(o, 0, sizeof *o);
}

int weir__tool_outcome_error(weir__tool_outcome *o, const char *name, const char *code,
                             const char *reason, const char *fmt, ...) {
    if (!o || !name || !code || !fmt)
        return WEIR_E_INVAL;
    weir__tool_outcome_clear(o);
    va_list ap;
    va_start(ap, fmt);
    char *text = weir__vasprintf(fmt, ap);
    va_end(ap);
    char *shown = text ? weir__asprintf("Error: %s", text) : NULL;
    weir__free(text);
    if (!shown)
        return WEIR_E_NOMEM;
    o->content = json_pack("[{s:s, s:s}]", "type", "text", "text", shown);
    weir__free(shown);
    o->error = json_pack("{s:s, s:s}", "name", name, "code", code);
    if (o->error && reason && json_object_set_new(o->error, "reason", json_string(reason)) != 0) {
        json_decref(o->error);
        o->error = NULL;
    }
    if (!o->content || !o->error) {
        weir__tool_outcome_clear(o);
        return WEIR_E_NOMEM;
    }
    o->is_error = true;
    return WEIR_OK;
}

json_t *weir__tool_outcome_json(const weir__tool_outcome *o) {
    if (!o || !o->content)
        return NULL;
    json_t *r = json_pack("{s:O, s:b}", "content", o->content, "is_error", o->is_error);
    if (r && o->error && json_object_set(r, "error", o->error) != 0) {
        json_decref(r);
        return NULL;
    }
    return r;
}

int weir__tool_parse_args(const weir__tool_def *def, const char *text, json_t **args,
                          weir__tool_outcome *o) {
    if (!def || !args || !o)
        return WEIR_E_INVAL;
    *args = NULL;
    json_t *v;
    if (!text || !*text) {
        v = json_object();
        if (!v)
            return WEIR_E_NOMEM;
    } else {
        json_error_t jerr;
        memset(&jerr, 0, sizeof jerr);
        v = weir__json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!v) {
            /* jansson may fail an allocation before it fills the error */
            if (json_error_code(&jerr) == json_error_out_of_memory || !jerr.text[0])
                return WEIR_E_NOMEM;
            char reason[300];
            snprintf(reason, sizeof reason, "not valid JSON: %s (column %d)", jerr.text,
                     jerr.column);
            return weir__tool_outcome_error(o, "InvalidArguments", "INVALID_ARGUMENTS", reason,
                                            "invalid arguments for tool '%s': %s", def->name,
                                            reason);
        }
    }
    char msg[512];
    if (weir__schema_validate_foreign(def->parameters, v, msg, sizeof msg) != 0) {
        json_decref(v);
        return weir__tool_outcome_error(o, "InvalidArguments", "INVALID_ARGUMENTS", msg,
                                        "invalid arguments for tool '%s': %s", def->name, msg);
    }
    *args = v;
    return WEIR_OK;
}

/* A content array is an array of objects, each with a string "type". */
static bool valid_blocks(const json_t *a) {
    size_t i;
    const json_t *b;
    if (!json_is_array(a))
        return false;
    json_array_foreach(a, i, b) {
        if (!json_is_object(b) || !json_is_string(json_object_get(b, "type")))
            return false;
    }
    return true;
}

/* Normalize a body's result (steals `r`). */
static int outcome_from_result(const weir__tool_def *def, json_t *r, weir__tool_outcome *o) {
    json_t *content = r, *err_flag = NULL, *concl = NULL;
    if (json_is_object(r)) {
        content = json_object_get(r, "content");
        err_flag = json_object_get(r, "is_error");
        concl = json_object_get(r, "concludes_turn");
        if ((err_flag && !json_is_boolean(err_flag)) || (concl && !json_is_boolean(concl)))
            content = NULL;
    }
    json_t *blocks = NULL;
    if (json_is_string(content)) {
        blocks = json_pack("[{s:s, s:O}]", "type", "text", "text", content);
        if (!blocks) {
            json_decref(r);
            return WEIR_E_NOMEM;
        }
    } else if (valid_blocks(content)) {
        blocks = json_incref(content);
    }
    if (!blocks) {
        json_decref(r);
        return weir__tool_outcome_error(
            o, "ToolError", "INVALID_RESULT", NULL,
            "tool '%s' returned an invalid result (want a string, an array of content blocks "
            "or {content, is_error?, concludes_turn?})",
            def->name);
    }
    weir__tool_outcome_clear(o);
    o->content = blocks;
    o->is_error = json_is_true(err_flag);
    o->concludes_turn = json_is_true(concl);
    json_decref(r);
    return WEIR_OK;
}

int weir__tool_invoke(const weir__tool_def *def, const char *call_id, weir_signal *signal,
                      const json_t *args, weir__tool_outcome *o) {
    return weir__tool_invoke_keyed(def, call_id, NULL, 1, signal, args, NULL, o);
}

int weir__tool_invoke_keyed(const weir__tool_def *def, const char *call_id, const char *key,
                            int attempt, weir_signal *signal, const json_t *args,
                            const weir__tool_site *site, weir__tool_outcome *o) {
    if (!def || !args || !o)
        return WEIR_E_INVAL;
    weir_tool_exec exec = {.call_id = call_id, .signal = signal, .key = key,
                           .attempt = attempt >= 1 ? attempt : 1, .def = def};
    if (site) {
        exec.live = site->live;
        exec.live_ud = site->live_ud;
        exec.turn = site->turn;
        exec.step = site->step;
    }
    exec.name = def->name;
    json_t *result = NULL;
    int rc = def->execute(&exec, args, &result, def->user_data);
    int out;
    if (rc == WEIR_OK) {
        out = outcome_from_result(def, result, o);
    } else {
        json_decref(result);
        const char *code = exec.fail_code ? exec.fail_code : "TOOL_ERROR";
        if (exec.fail_message)
            out = weir__tool_outcome_error(o, "ToolError", code, exec.fail_message, "%s",
                                           exec.fail_message);
        else {
            char reason[200];
            snprintf(reason, sizeof reason, "tool '%s' failed: %s", def->name,
                     weir_strerror(rc));
            out = weir__tool_outcome_error(o, "ToolError", code, reason, "%s", reason);
        }
    }
    weir__free(exec.fail_code);
    weir__free(exec.fail_message);
    if (out == WEIR_OK) /* what the body logged goes with its result, whatever it was */
        o->events = exec.events;
    else
        json_decref(exec.events);
    return out;
}

/* ------------------------------------------------------------------------ */
/* Background jobs                                                           */
/* ------------------------------------------------------------------------ */

/* J_TAKEN: handed on by weir__jobs_take, still listed until weir__jobs_forget. */
typedef enum job_state { J_QUEUED = 0, J_RUNNING, J_FINISHED, J_TAKEN } job_state;

typedef struct job {
    char id[48];
    char *call_id;
    char *key;       /* idempotency key, or NULL */
    char *arguments; /* the call's raw JSON text */
    int turn, step;  /* of the call's tool/call */
    const weir__tool_def *def;
    json_t *args;
    weir_signal signal;
    weir__jobs *table;
    job_state state;       /* under table->mu */
    bool notifying;        /* on_done is running on the worker (under table->mu) */
    bool forgotten;        /* weir__jobs_forget unlisted it while notifying: the worker frees it */
    unsigned long finish;  /* finish order, once J_FINISHED */
    json_t *outcome;       /* {outcome, cause?, result} once J_FINISHED */
    struct job *next;      /* active list, submit order */
} job;

struct weir__jobs {
    pthread_mutex_t mu;
    weir__pool *pool; /* NULL once drained */
    size_t max;
    job *active;      /* queued, running or finished and not yet taken */
    unsigned long finished;
    weir__job_done_fn on_done;
    void *ud;
};

int weir__jobs_create(size_t max_jobs, weir__job_done_fn on_done, void *ud,
                      weir__jobs **out, weir_error *err) {
    if (!out || max_jobs == 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "jobs: invalid arguments");
    *out = NULL;
    weir__jobs *j = weir__calloc(1, sizeof *j);
    if (!j)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "jobs: out of memory");
    if (pthread_mutex_init(&j->mu, NULL) != 0) {
        weir__free(j);
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL, "jobs: mutex init failed");
    }
    int rc = weir__pool_create(max_jobs, &j->pool, err);
    if (rc != WEIR_OK) {
        pthread_mutex_destroy(&j->mu);
        weir__free(j);
        return rc;
    }
    j->max = max_jobs;
    j->on_done = on_done;
    j->ud = ud;
    *out = j;
    return WEIR_OK;
}

size_t weir__jobs_max(const weir__jobs *j) { return j ? j->max : 0; }

size_t weir__jobs_unfinished(weir__jobs *j) {
    if (!j)
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&j->mu);
    for (job *jb = j->active; jb; jb = jb->next)
        n += jb->state == J_QUEUED || jb->state == J_RUNNING;
    pthread_mutex_unlock(&j->mu);
    return n;
}

char *weir__jobs_new_id(char *buf, size_t size) { return weir__random_id(buf, size, "job"); }

static void job_free(job *jb) {
    weir__free(jb->call_id);
    weir__free(jb->key);
    weir__free(jb->arguments);
    json_decref(jb->args);
    json_decref(jb->outcome);
    weir__signal_destroy(&jb->signal);
    weir__free(jb);
}

/* {outcome, cause?, result, events?}: cancelled when the job's signal fired
 * (whatever the body returned), failed when the result is an error, else
 * returned. */
static json_t *job_outcome(job *jb, json_t *result, json_t *events) {
    bool cancelled = weir__signal_cancelled(&jb->signal);
    const char *kind = cancelled ? "cancelled"
                       : json_is_true(json_object_get(result, "is_error")) ? "failed"
                                                                           : "returned";
    json_t *o = json_pack("{s:s, s:O}", "outcome", kind, "result", result);
    if (o && cancelled &&
        json_object_set_new(o, "cause", json_string(weir__signal_cause(&jb->signal))) != 0) {
        json_decref(o);
        o = NULL;
    }
    if (o && json_array_size(events) > 0 && json_object_set(o, "events", events) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

static void job_run(void *arg) {
    job *jb = arg;
    weir__jobs *j = jb->table;
    pthread_mutex_lock(&j->mu);
    jb->state = J_RUNNING;
    pthread_mutex_unlock(&j->mu);
    weir__tool_outcome o = {0};
    int rc;
    if (weir__signal_cancelled(&jb->signal))
        rc = weir__tool_outcome_error(&o, "AbortError", "ABORTED", NULL,
                                      "job %s was cancelled before it started", jb->id);
    else
        rc = weir__tool_invoke_keyed(jb->def, jb->call_id, jb->key, 1, &jb->signal, jb->args,
                                     NULL, &o);
    json_t *result = rc == WEIR_OK ? weir__tool_outcome_json(&o) : NULL;
    json_t *events = json_incref(o.events);
    weir__tool_outcome_clear(&o);
    if (!result) { /* allocation failed: still report, with a minimal error result */
        static const char oom[] = "{\"content\":[{\"type\":\"text\",\"text\":\"Error: out of "
                                  "memory\"}],\"is_error\":true}";
        result = weir__json_loadb(oom, sizeof oom - 1, 0, NULL);
    }
    json_t *outcome = result ? job_outcome(jb, result, events) : NULL;
    json_decref(events);
    if (!outcome) /* the last resort: the result is lost, the outcome is not */
        outcome = json_pack("{s:s, s:{s:[], s:b}}", "outcome", "failed", "result", "content",
                            "is_error", 1);
    /* Finished: takeable from now on, and listed as active until taken, so a
     * job is always either active or delivered, never neither. */
    pthread_mutex_lock(&j->mu);
    jb->outcome = outcome;
    jb->state = J_FINISHED;
    jb->finish = ++j->finished;
    jb->notifying = true; /* the driver may take and forget it from now on */
    pthread_mutex_unlock(&j->mu);
    if (j->on_done)
        j->on_done(jb->id, jb->call_id, jb->def->name, result, j->ud);
    json_decref(result);
    pthread_mutex_lock(&j->mu);
    jb->notifying = false;
    bool gone = jb->forgotten;
    pthread_mutex_unlock(&j->mu);
    if (gone) /* forgotten while on_done read its strings */
        job_free(jb);
}

int weir__jobs_submit(weir__jobs *j, const weir__tool_def *def, const weir__job_call *call,
                      const json_t *args, weir_error *err) {
    if (!j || !def || !call || !call->job_id || !call->call_id || !args ||
        strlen(call->job_id) >= sizeof ((job *)0)->id)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "jobs: invalid arguments");
    job *jb = weir__calloc(1, sizeof *jb);
    if (!jb)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "jobs: out of memory");
    if (weir__signal_init(&jb->signal) != WEIR_OK) {
        weir__free(jb);
        return weir__err(err, WEIR_E_INTERNAL, NULL, NULL, "jobs: signal init failed");
    }
    jb->call_id = weir__strdup(call->call_id);
    jb->key = call->key ? weir__strdup(call->key) : NULL;
    jb->arguments = weir__strdup(call->arguments ? call->arguments : "");
    jb->args = json_deep_copy(args);
    if (!jb->call_id || !jb->args || !jb->arguments || (call->key && !jb->key)) {
        job_free(jb);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "jobs: out of memory");
    }
    snprintf(jb->id, sizeof jb->id, "%s", call->job_id);
    jb->turn = call->turn;
    jb->step = call->step;
    jb->def = def;
    jb->table = j;
    pthread_mutex_lock(&j->mu);
    if (!j->pool) {
        pthread_mutex_unlock(&j->mu);
        job_free(jb);
        return weir__err(err, WEIR_E_STATE, NULL, NULL, "jobs: the job table is closing");
    }
    job **pp = &j->active;
    while (*pp)
        pp = &(*pp)->next;
    *pp = jb;
    int rc = weir__pool_submit(j->pool, job_run, jb, err);
    if (rc != WEIR_OK)
        *pp = NULL;
    pthread_mutex_unlock(&j->mu);
    if (rc != WEIR_OK)
        job_free(jb);
    return rc;
}

int weir__jobs_cancel(weir__jobs *j, const char *job_id, const char *cause, weir_error *err) {
    if (!j || !job_id)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "jobs: invalid arguments");
    pthread_mutex_lock(&j->mu);
    for (job *jb = j->active; jb; jb = jb->next) {
        if (strcmp(jb->id, job_id) == 0 && (jb->state == J_QUEUED || jb->state == J_RUNNING)) {
            weir__signal_cancel(&jb->signal, cause ? cause : "user");
            pthread_mutex_unlock(&j->mu);
            return WEIR_OK;
        }
        if (strcmp(jb->id, job_id) == 0) {
            pthread_mutex_unlock(&j->mu);
            return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                             "job '%s' has already finished (its result is being delivered)",
                             job_id);
        }
    }
    pthread_mutex_unlock(&j->mu);
    return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL, "no queued or running job '%s'", job_id);
}

void weir__jobs_cancel_all(weir__jobs *j, const char *cause) {
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    for (job *jb = j->active; jb; jb = jb->next)
        if (jb->state == J_QUEUED || jb->state == J_RUNNING)
            weir__signal_cancel(&jb->signal, cause ? cause : "user");
    pthread_mutex_unlock(&j->mu);
}

json_t *weir__jobs_active(weir__jobs *j) {
    if (!j)
        return NULL;
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    pthread_mutex_lock(&j->mu);
    for (job *jb = j->active; jb; jb = jb->next) {
        if (json_array_append_new(arr, json_string(jb->id)) != 0) {
            pthread_mutex_unlock(&j->mu);
            json_decref(arr);
            return NULL;
        }
    }
    pthread_mutex_unlock(&j->mu);
    return arr;
}

json_t *weir__jobs_take(weir__jobs *j) {
    if (!j)
        return NULL;
    pthread_mutex_lock(&j->mu);
    job **first = NULL;
    for (job **pp = &j->active; *pp; pp = &(*pp)->next)
        if ((*pp)->state == J_FINISHED && (!first || (*pp)->finish < (*first)->finish))
            first = pp;
    job *jb = first ? *first : NULL;
    json_t *out = NULL;
    if (jb) {
        out = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i}", "job_id", jb->id, "call_id",
                        jb->call_id, "tool", jb->def->name, "arguments", jb->arguments, "turn",
                        jb->turn, "step", jb->step);
        if (out && (json_object_update(out, jb->outcome) != 0 ||
                    (jb->key && json_object_set_new(out, "idempotency_key",
                                                    json_string(jb->key)) != 0))) {
            json_decref(out);
            out = NULL;
        }
        if (out) /* taken: listed until weir__jobs_forget */
            jb->state = J_TAKEN;
    }
    pthread_mutex_unlock(&j->mu);
    return out;
}

void weir__jobs_forget(weir__jobs *j, const char *job_id) {
    if (!j || !job_id)
        return;
    job *gone = NULL;
    pthread_mutex_lock(&j->mu);
    for (job **pp = &j->active; *pp; pp = &(*pp)->next) {
        if ((*pp)->state == J_TAKEN && strcmp((*pp)->id, job_id) == 0) {
            gone = *pp;
            *pp = gone->next;
            if (gone->notifying) { /* its worker is still in on_done: it frees it */
                gone->forgotten = true;
                gone = NULL;
            }
            break;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (gone)
        job_free(gone);
}

void weir__jobs_drain(weir__jobs *j) {
    if (!j)
        return;
    weir__jobs_cancel_all(j, "disposed");
    pthread_mutex_lock(&j->mu);
    weir__pool *p = j->pool;
    j->pool = NULL; /* no submit from now on */
    pthread_mutex_unlock(&j->mu);
    weir__pool_destroy(p); /* runs what is queued (cancelled), joins every thread */
}

void weir__jobs_destroy(weir__jobs *j) {
    if (!j)
        return;
    weir__jobs_drain(j);
    while (j->active) {
        job *jb = j->active;
        j->active = jb->next;
        job_free(jb);
    }
    pthread_mutex_destroy(&j->mu);
    weir__free(j);
}
