/*
 * sdk/testkit/testkit.c - the plugin test kit (weir/testkit.h): a fake
 * host that loads plugins without a deployment and invokes hooks through
 * the real registry (core/runtime/hooks.c).  Its weir_api table is the real one
 * with the members that need a weir_host or a weir_agent replaced by kit
 * versions that record what the plugin did.  The fake agent's context is a
 * real session log (core/log/session_log.c) on the memory store: the
 * surface, the derived messages, replacements and appends are the log's
 * own.  Built into libweir-testkit (sdk/testkit/CMakeLists.txt), not into
 * libweir.
 */
#include <pthread.h>
#include <string.h>

#include "weir/testkit.h"

#include "host_int.h"
#include "hooks.h"
#include "schema.h"
#include "cancel.h"
#include "tools.h"
#include "log_view.h"
#include "store.h"
#include "surface.h"

/* One loaded row.  `base` comes first: the api hands &base to the plugin
 * and the kit's table functions convert it back. */
typedef struct tk_plugin {
    weir_plugin base;
    weir_tk *tk;
    bool has_provider;
} tk_plugin;

/* What weir_call_agent() returns: a handle that only the kit's table
 * functions look into. */
typedef struct tk_agent {
    weir_tk *tk;
} tk_agent;

struct weir_tk {
    weir_api api;           /* the table plugins get */
    weir__hooks *hooks;
    weir__tools *tools;
    tk_plugin **plugins;    /* load order */
    size_t nplugins;
    weir__event_type *types;
    size_t ntypes;
    tk_agent agent;
    weir_signal signal;
    json_t *messages;       /* what agent_messages returns */
    json_t *events;         /* [{type, data}] */
    json_t *logs;           /* [{plugin, level, text}] */
    json_t *sent;           /* [{message, mode, input_id}] */
    size_t default_calls;
    bool frozen;
    bool messages_set;      /* weir_tk_set_messages ran: agent_messages returns them */
    weir__log *log;         /* the fake agent's log (memory store), opened on first use */
    json_t *route;          /* weir_tk_set_route's {provider, model, ...}, or NULL */
    json_t *replies;        /* weir_tk_set_script's replies, or NULL */
    bool *used;             /* one per reply */
    bool loop;
    json_t *requests;       /* [{purpose, request}] of agent_complete(_stream) */
    json_t *sleeps;         /* [{ms, fake}] of signal_sleep on the kit's signal */
    bool owns_clock;        /* weir_tk_clock_set turned the fake clock on */
    weir_tk *next_live;     /* the live kits (for signal_sleep) */
};

/* The live kits, for signal_sleep to find the kit whose signal a plugin
 * sleeps on; and the kit that owns the (process-wide) fake clock. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static weir_tk *live_kits;
static weir_tk *clock_kit;

static tk_plugin *tk_of(const weir_plugin *self) {
    /* Every weir_plugin a kit hands out is the first member of a tk_plugin. */
    return (tk_plugin *)(void *)(uintptr_t)self;
}

static weir_tk *kit_of(const weir_agent *agent) {
    return agent ? ((const tk_agent *)(const void *)agent)->tk : NULL;
}

/* --- the kit's table members -------------------------------------------- */

static void tk_log(const weir_plugin *self, weir_log_level level, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static void tk_log(const weir_plugin *self, weir_log_level level, const char *fmt, ...) {
    if (!self || !fmt)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *text = weir__vasprintf(fmt, ap);
    va_end(ap);
    if (!text)
        return; /* out of memory: the line is lost, as a full disk would lose it */
    json_t *line = json_pack("{s:s,s:s,s:s}", "plugin", self->id, "level",
                             weir__log_level_name(level), "text", text);
    weir__free(text);
    json_array_append_new(tk_of(self)->tk->logs, line);
}

/* Registration goes through the host's checks (core/runtime/host.c). */
static int tk_hook_register(weir_plugin *self, const char *hook, weir_hook_fn fn,
                            const weir_hook_opts *opts) {
    int rc = weir__reg_open(self, "hook_register", tk_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    rc = weir__hooks_add(tk_of(self)->tk->hooks, self, self->id, self->index, hook, fn, opts,
                         &e);
    return rc == WEIR_OK ? WEIR_OK : weir__reg_fail(self, &e);
}

static int tk_event_type_register(weir_plugin *self, const char *type, uint32_t flags) {
    int rc = weir__reg_open(self, "event_type_register", tk_log);
    if (rc != WEIR_OK)
        return rc;
    weir_tk *tk = tk_of(self)->tk;
    return weir__reg_event_type(self, &tk->types, &tk->ntypes, type, flags, NULL, 0);
}

/* The kit has no deployment to check a required provider against: accepted. */
static int tk_provider_require(weir_plugin *self, const char *provider, const char *what) {
    (void)what;
    int rc = weir__reg_open(self, "provider_require", tk_log);
    return rc != WEIR_OK ? rc : provider && *provider ? WEIR_OK : WEIR_E_INVAL;
}

static int tk_provider_register(weir_plugin *self, const weir_provider *provider,
                                void *self_ptr) {
    (void)self_ptr;
    int rc = weir__reg_open(self, "provider_register", tk_log);
    if (rc == WEIR_OK)
        rc = weir__reg_check_provider(self, provider);
    if (rc != WEIR_OK)
        return rc;
    if (tk_of(self)->has_provider) {
        weir_error e;
        weir_error_clear(&e);
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                  "a provider is already registered under '%s'", self->id);
        return weir__reg_fail(self, &e);
    }
    tk_of(self)->has_provider = true;
    return WEIR_OK;
}

static int tk_tool_register(weir_plugin *self, const weir_tool *tool) {
    int rc = weir__reg_open(self, "tool_register", tk_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    rc = weir__tools_add(tk_of(self)->tk->tools, self->id, tool, &e);
    return rc == WEIR_OK ? WEIR_OK : weir__reg_fail(self, &e);
}

static const char *tk_agent_id(const weir_agent *agent) {
    return agent ? "testkit" : NULL;
}

static const char *mode_name(weir_send_mode mode) {
    switch (mode) {
    case WEIR_SEND_FOLLOWUP:
        return "followup";
    case WEIR_SEND_STEER:
        return "steer";
    case WEIR_SEND_INJECT:
        return "inject";
    }
    return NULL;
}

static int tk_agent_send(weir_agent *agent, const json_t *message, weir_send_mode mode,
                         const char *input_id, weir_error *err) {
    weir_tk *tk = kit_of(agent);
    const char *m = mode_name(mode);
    if (!tk || !json_is_object(message) || !m)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "agent_send: needs an agent, a message object and a known mode");
    json_t *copy = json_deep_copy(message);
    json_t *rec = copy ? json_pack("{s:o,s:s,s:s?}", "message", copy, "mode", m, "input_id",
                                   input_id)
                       : NULL;
    if (!rec || json_array_append_new(tk->sent, rec) != 0)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_send: out of memory");
    return WEIR_OK;
}

static weir__log *agent_log(weir_tk *tk, weir_error *err);

/* What weir_tk_set_messages set, else the log's derived messages. */
static json_t *tk_agent_messages(weir_agent *agent) {
    weir_tk *tk = kit_of(agent);
    if (!tk)
        return NULL;
    if (tk->messages_set)
        return json_deep_copy(tk->messages);
    weir__log *log = agent_log(tk, NULL);
    json_t *shared = log ? weir__log_derive(log) : NULL;
    json_t *copy = shared ? json_deep_copy(shared) : NULL;
    json_decref(shared);
    return copy;
}

/* Recorded in weir_tk_events() and appended to the kit's log, as the real
 * agent appends it (ignorable, its type registered by a loaded plugin). */
static int tk_agent_append(weir_agent *agent, const char *type, const json_t *data,
                           weir_error *err) {
    weir_tk *tk = kit_of(agent);
    if (!tk || !type || !data)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_append: NULL argument");
    bool known = false;
    for (size_t i = 0; i < tk->ntypes && !known; i++)
        known = strcmp(tk->types[i].type, type) == 0;
    if (!known)
        return weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                         "agent_append: event type '%s' is not registered by any plugin", type);
    weir__log *log = agent_log(tk, err);
    if (!log)
        return err && err->code ? (int)err->code : WEIR_E_NOMEM;
    json_t *copy = json_deep_copy(data);
    json_t *rec = copy ? json_pack("{s:s,s:o}", "type", type, "data", copy) : NULL;
    if (!rec)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_append: out of memory");
    int rc = weir__log_append(log, type, data, NULL, NULL, WEIR_EVENT_IGNORABLE, NULL, err);
    if (rc == WEIR_OK && json_array_append_new(tk->events, rec) != 0)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_append: out of memory");
    if (rc != WEIR_OK)
        json_decref(rec);
    return rc;
}

/* --- the fake agent's log -------------------------------------------------- */

/* The log accepts the event types the kit's plugins registered. */
static bool tk_type_known(const char *type, void *ud) {
    weir_tk *tk = ud;
    for (size_t i = 0; i < tk->ntypes; i++)
        if (strcmp(tk->types[i].type, type) == 0)
            return true;
    return false;
}

/* Open the kit's log on the memory store as session `id` (its lines may be
 * there already: a seeded log). */
static int open_log(weir_tk *tk, const char *id, weir_error *err) {
    return weir__log_open_store("memory", weir__store_memory(), id, NULL, false,
                                WEIR__FSYNC_NONE, tk_type_known, tk, &tk->log, err);
}

/* The fake agent's log, opened on first use (a fresh memory session). */
static weir__log *agent_log(weir_tk *tk, weir_error *err) {
    if (tk->log)
        return tk->log;
    char id[64];
    if (open_log(tk, weir__random_id(id, sizeof id, "testkit-"), err) != WEIR_OK)
        return NULL;
    return tk->log;
}

/*
 * The agent-context members, on the kit's log: the same log calls the
 * real agent makes (core/api/agent_context.c, core/log/log_view.c).
 */
static json_t *tk_agent_surface(weir_agent *agent) {
    weir_tk *tk = kit_of(agent);
    weir__log *log = tk ? agent_log(tk, NULL) : NULL;
    return log ? weir__log_surface_nodes(log) : NULL;
}

static uint64_t tk_agent_replace_generation(weir_agent *agent) {
    weir_tk *tk = kit_of(agent);
    return tk && tk->log ? weir__log_replace_generation(tk->log) : 0;
}

static int tk_agent_surface_replace(weir_agent *agent, const char *type, const json_t *data,
                                    size_t start_seq, size_t end_seq, const json_t *source_seqs,
                                    size_t *seq_out, weir_error *err) {
    weir_tk *tk = kit_of(agent);
    if (!tk || !type || !json_is_object(data))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_surface_replace: NULL argument");
    if (strcmp(type, "user/message") != 0 && strcmp(type, "tool/result") != 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "agent_surface_replace: type '%s' cannot replace surface nodes "
                         "(only user/message or tool/result)",
                         type);
    weir__log *log = agent_log(tk, err);
    if (!log)
        return err && err->code ? (int)err->code : WEIR_E_NOMEM;
    json_t *op = json_pack("{s:s, s:I, s:I}", "op", "replace", "start_seq", (json_int_t)start_seq,
                           "end_seq", (json_int_t)end_seq);
    json_t *src = source_seqs ? json_incref((json_t *)(uintptr_t)source_seqs)
                              : weir__log_shadowed_seqs(log, start_seq, end_seq);
    int rc = op && src ? weir__log_append(log, type, data, op, src, 0, seq_out, err)
                       : weir__err(err, WEIR_E_NOMEM, NULL, NULL,
                                   "agent_surface_replace: out of memory");
    json_decref(op);
    json_decref(src);
    return rc;
}

/* The kit's log has no file: it lives in the memory store. */
static const char *tk_agent_log_path(const weir_agent *agent) {
    (void)agent;
    return NULL;
}

/* Run the kit's chain of `hook`, as a plugin raises it on a real agent. */
static json_t *given_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call, (void)args;
    return ctx ? json_incref((json_t *)ctx) : json_null();
}

static int tk_hook_invoke(weir_agent *agent, const char *hook, const json_t *args,
                          const json_t *dflt, json_t **result, weir_error *err) {
    weir_tk *tk = kit_of(agent);
    if (result)
        *result = NULL;
    if (!tk || !hook || !json_is_object(args) || !result)
        return weir__err(err, WEIR_E_INVAL, NULL, hook, "hook_invoke: NULL argument");
    json_t *full = json_copy((json_t *)(uintptr_t)args);
    if (full && !json_object_get(full, "agent") &&
        json_object_set_new(full, "agent", json_string("testkit")) != 0) {
        json_decref(full);
        full = NULL;
    }
    if (!full)
        return weir__err(err, WEIR_E_NOMEM, NULL, hook, "hook_invoke: out of memory");
    *result = weir__hook_invoke(tk->hooks, hook, agent, &tk->signal, full, given_default,
                                (void *)(uintptr_t)dflt, err);
    json_decref(full);
    return *result ? WEIR_OK : err && err->code ? (int)err->code : WEIR_E_HOOK_FAILED;
}

static int tk_agent_approve(weir_agent *agent, const json_t *request, json_t **decision,
                            weir_error *err) {
    (void)agent;
    (void)request;
    (void)err;
    *decision = NULL;
    return WEIR_E_NOT_FOUND;
}

static json_t *tk_agent_last_event(weir_agent *agent, const char *type) {
    weir_tk *tk = kit_of(agent);
    weir__log *log = tk && type ? agent_log(tk, NULL) : NULL;
    return log ? weir__log_last_event(log, type) : NULL;
}

static json_t *tk_agent_event_ref(weir_agent *agent, size_t seq) {
    weir_tk *tk = kit_of(agent);
    return tk && tk->log ? weir__log_event_ref(tk->log, seq) : NULL;
}

static json_t *tk_agent_event(weir_agent *agent, size_t seq) {
    json_t *ev = tk_agent_event_ref(agent, seq);
    json_t *copy = ev ? json_deep_copy(ev) : NULL;
    json_decref(ev);
    return copy;
}

static const json_t *tk_agent_event_peek(weir_agent *agent, size_t seq) {
    weir_tk *tk = kit_of(agent);
    return tk && tk->log ? weir__log_event_lend(tk->log, seq) : NULL;
}

/* What weir_tk_set_route gave, as weir_agent_route() answers it. */
static json_t *tk_agent_route(weir_agent *agent, weir_error *err) {
    weir_tk *tk = kit_of(agent);
    if (!tk) {
        weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_route: NULL agent");
        return NULL;
    }
    if (!tk->route) {
        weir__err(err, WEIR_E_NOT_FOUND, NULL, NULL,
                  "agent_route: the test kit's agent has no route (weir_tk_set_route)");
        return NULL;
    }
    json_t *r = json_deep_copy(tk->route);
    if (!r)
        weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_route: out of memory");
    return r;
}

/* The route weir_tk_set_route gave: its info for its provider and model. */
static json_t *tk_agent_model_info(weir_agent *agent, const char *provider, const char *model) {
    weir_tk *tk = kit_of(agent);
    if (!tk || !tk->route || !provider || !model ||
        strcmp(weir__json_str(tk->route, "provider", ""), provider) != 0 ||
        strcmp(weir__json_str(tk->route, "model", ""), model) != 0)
        return NULL;
    json_t *info = json_deep_copy(tk->route);
    if (info) {
        json_object_del(info, "provider");
        json_object_del(info, "model");
    }
    return info;
}

/* The next reply for `purpose`: the first unused reply of that purpose,
 * else the first unused one without a purpose; NULL when none is left
 * (with `loop`, every reply is unused again first).  Borrowed. */
static const json_t *take_reply(weir_tk *tk, const char *purpose) {
    size_t n = json_array_size(tk->replies);
    for (int round = 0; round < 2; round++) {
        for (int pass = 0; pass < 2; pass++) {
            for (size_t i = 0; i < n; i++) {
                const json_t *r = json_array_get(tk->replies, i);
                const char *p = weir__json_str(r, "purpose", NULL);
                if (!tk->used[i] && (pass == 0 ? p && !strcmp(p, purpose) : !p)) {
                    tk->used[i] = true;
                    return r;
                }
            }
        }
        if (!tk->loop)
            break;
        memset(tk->used, 0, n * sizeof *tk->used);
    }
    return NULL;
}

/* A direct model call, answered from weir_tk_set_script's replies. */
static int complete(weir_tk *tk, const json_t *request, const char *purpose, json_t **result,
                    weir_error *err) {
    if (!tk || !json_is_object(request) || !result)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_complete: NULL argument");
    if (!tk->replies)
        return weir__err(err, WEIR_E_UNSUPPORTED, NULL, NULL,
                         "agent_complete: the test kit has no script (weir_tk_set_script)");
    json_t *rec = json_pack("{s:s, s:o}", "purpose", purpose, "request",
                            json_deep_copy(request));
    if (!rec || json_array_append_new(tk->requests, rec) != 0)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_complete: out of memory");
    const json_t *reply = take_reply(tk, purpose);
    if (!reply)
        return weir__err(err, WEIR_E_PROVIDER, NULL, NULL,
                         "UNKNOWN: script exhausted (%zu replies, none left for purpose '%s')",
                         json_array_size(tk->replies), purpose);
    const json_t *fail = json_object_get(reply, "fail");
    if (fail)
        return weir__err(err, WEIR_E_PROVIDER, NULL, NULL, "%s: %s",
                         weir__json_str(fail, "code", "UNKNOWN"),
                         weir__json_str(fail, "message", "scripted failure"));
    const char *text = weir__json_str(reply, "text", "");
    json_t *out = json_pack("{s:{s:s, s:[{s:s, s:s}]}, s:s}", "message", "role", "assistant",
                            "content", "type", "text", "text", text, "finish",
                            weir__json_str(reply, "finish", "stop"));
    const json_t *usage = json_object_get(reply, "usage");
    if (out && usage && json_object_set_new(out, "usage", json_deep_copy(usage)) != 0) {
        json_decref(out);
        out = NULL;
    }
    if (!out)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_complete: out of memory");
    *result = out;
    return WEIR_OK;
}

static int tk_agent_complete(weir_agent *agent, const json_t *request, weir_signal *signal,
                             json_t **result, weir_error *err) {
    (void)signal;
    if (result)
        *result = NULL;
    return complete(kit_of(agent), request, "maintenance", result, err);
}

static int tk_agent_complete_stream(weir_agent *agent, const json_t *request,
                                    const json_t *context, weir_signal *signal, json_t **result,
                                    weir_error *err) {
    (void)signal;
    if (result)
        *result = NULL;
    const char *purpose = weir__json_str(context, "purpose", "maintenance");
    return complete(kit_of(agent), request, *purpose ? purpose : "maintenance", result, err);
}

/* signal_sleep: recorded when it is the kit's signal (what weir_call_signal
 * gives); the fake clock (weir_tk_clock_set) makes it pass at once. */
static int tk_signal_sleep(weir_signal *signal, uint64_t ms) {
    bool fake = weir__clock_is_fake();
    pthread_mutex_lock(&live_mu);
    for (weir_tk *k = live_kits; k && signal; k = k->next_live) {
        if (&k->signal == signal) {
            json_array_append_new(k->sleeps, json_pack("{s:I, s:b}", "ms", (json_int_t)ms,
                                                       "fake", fake));
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
    return weir__signal_sleep(signal, ms);
}

static int tk_agent_hook_register(weir_plugin *self, weir_agent *agent, const char *hook,
                                  weir_hook_fn fn, const weir_hook_opts *opts) {
    (void)agent, (void)fn, (void)opts;
    tk_log(self, WEIR_LOG_ERROR, "agent_hook_register(%s): the test kit has no per-agent chains",
           hook ? hook : "(null)");
    return WEIR_E_UNSUPPORTED;
}

/* The test kit's tool set is fixed once init returns. */
static int tk_tool_update(weir_plugin *self, const weir_tool *tool) {
    (void)tool;
    tk_log(self, WEIR_LOG_ERROR, "tool_update: the test kit does not change tools");
    return WEIR_E_UNSUPPORTED;
}

static int tk_tool_remove(weir_plugin *self, const char *name) {
    (void)name;
    tk_log(self, WEIR_LOG_ERROR, "tool_remove: the test kit does not change tools");
    return WEIR_E_UNSUPPORTED;
}

static int tk_tool_exec_progress(weir_tool_exec *exec, const json_t *progress) {
    (void)exec, (void)progress;
    return WEIR_E_UNSUPPORTED;
}

/* --- create / destroy ---------------------------------------------------- */

weir_tk *weir_tk_create(void) {
    weir_tk *tk = weir__calloc(1, sizeof *tk);
    if (!tk)
        return NULL;
    if (weir__signal_init(&tk->signal) != WEIR_OK) {
        weir__free(tk);
        return NULL;
    }
    tk->api = weir__api_table;
    tk->api.log = tk_log;
    tk->api.hook_register = tk_hook_register;
    tk->api.event_type_register = tk_event_type_register;
    tk->api.provider_register = tk_provider_register;
    tk->api.provider_require = tk_provider_require;
    tk->api.tool_register = tk_tool_register;
    tk->api.tool_update = tk_tool_update;
    tk->api.tool_remove = tk_tool_remove;
    tk->api.tool_exec_progress = tk_tool_exec_progress;
    tk->api.agent_id = tk_agent_id;
    tk->api.agent_send = tk_agent_send;
    tk->api.agent_messages = tk_agent_messages;
    tk->api.agent_append = tk_agent_append;
    tk->api.agent_surface = tk_agent_surface;
    tk->api.agent_replace_generation = tk_agent_replace_generation;
    tk->api.agent_surface_replace = tk_agent_surface_replace;
    tk->api.agent_last_event = tk_agent_last_event;
    tk->api.agent_log_path = tk_agent_log_path;
    tk->api.hook_invoke = tk_hook_invoke;
    tk->api.agent_approve = tk_agent_approve;
    tk->api.agent_event = tk_agent_event;
    tk->api.agent_event_peek = tk_agent_event_peek;
    tk->api.agent_event_ref = tk_agent_event_ref;
    tk->api.signal_sleep = tk_signal_sleep;
    tk->api.agent_model_info = tk_agent_model_info;
    tk->api.agent_complete = tk_agent_complete;
    tk->api.agent_complete_stream = tk_agent_complete_stream;
    tk->api.agent_hook_register = tk_agent_hook_register;
    tk->api.agent_route = tk_agent_route;
    tk->agent.tk = tk;
    tk->messages = json_array();
    tk->events = json_array();
    tk->logs = json_array();
    tk->sent = json_array();
    tk->requests = json_array();
    tk->sleeps = json_array();
    if (!tk->messages || !tk->events || !tk->logs || !tk->sent || !tk->requests || !tk->sleeps ||
        weir__hooks_create(&tk->hooks) != WEIR_OK || weir__tools_create(&tk->tools) != WEIR_OK) {
        weir_tk_destroy(tk);
        return NULL;
    }
    pthread_mutex_lock(&live_mu);
    tk->next_live = live_kits;
    live_kits = tk;
    pthread_mutex_unlock(&live_mu);
    return tk;
}

static void plugin_free(tk_plugin *p) {
    weir__dl_close(p->base.dl);
    weir__free(p->base.id);
    weir__free(p->base.path);
    weir__free(p);
}

void weir_tk_destroy(weir_tk *tk) {
    if (!tk)
        return;
    pthread_mutex_lock(&live_mu);
    for (weir_tk **k = &live_kits; *k; k = &(*k)->next_live) {
        if (*k == tk) {
            *k = tk->next_live;
            break;
        }
    }
    if (clock_kit == tk) {
        clock_kit = NULL;
        weir__clock_real();
    }
    pthread_mutex_unlock(&live_mu);
    for (size_t i = tk->nplugins; i-- > 0;) {
        tk_plugin *p = tk->plugins[i];
        weir__plugin_states_release(&p->base, NULL); /* agent_state blocks, before fini */
        if (p->base.initialized && p->base.desc->fini)
            p->base.desc->fini(&p->base);
    }
    weir__hooks_destroy(tk->hooks);
    weir__tools_destroy(tk->tools);
    for (size_t i = 0; i < tk->ntypes; i++)
        weir__free(tk->types[i].type);
    weir__free(tk->types);
    for (size_t i = tk->nplugins; i-- > 0;)
        plugin_free(tk->plugins[i]);
    weir__free(tk->plugins);
    json_decref(tk->messages);
    json_decref(tk->events);
    json_decref(tk->logs);
    json_decref(tk->sent);
    json_decref(tk->requests);
    json_decref(tk->sleeps);
    json_decref(tk->route);
    json_decref(tk->replies);
    weir__free(tk->used);
    weir__log_close(tk->log);
    weir__signal_destroy(&tk->signal);
    weir__free(tk);
}

/* --- loading ------------------------------------------------------------- */

static bool valid_id(const char *id) {
    if (!id || !*id)
        return false;
    for (const char *c = id; *c; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.'))
            return false;
    }
    return strlen(id) < sizeof(((weir_error *)0)->plugin);
}

/* The loader's header checks, for a descriptor linked into the test. */
static int check_static_desc(const weir_plugin_desc *d, const char *id, weir_error *err) {
    if (d->abi_major != WEIR_ABI_MAJOR || d->abi_minor > WEIR_ABI_MINOR)
        return weir__err(err, WEIR_E_PLUGIN_ABI, id, NULL,
                         "plugin row '%s' was built for ABI %u.%u; this host provides ABI "
                         "%d.%d",
                         id, d->abi_major, d->abi_minor, WEIR_ABI_MAJOR, WEIR_ABI_MINOR);
    if (d->struct_size < WEIR_PLUGIN_DESC_V1_SIZE || d->flags != 0)
        return weir__err(err, WEIR_E_PLUGIN_ABI, id, NULL,
                         "plugin row '%s': bad descriptor header (struct_size %u, flags 0x%x)",
                         id, d->struct_size, d->flags);
    if (!d->name || !*d->name || !d->version || !d->init)
        return weir__err(err, WEIR_E_PLUGIN_ABI, id, NULL,
                         "plugin row '%s': the descriptor needs a name, a version and init",
                         id);
    return WEIR_OK;
}

/* Unregister everything `p` registered that can be taken back. */
static void unregister(weir_tk *tk, tk_plugin *p) {
    weir__hooks_remove_owner(tk->hooks, &p->base);
    size_t keep = 0;
    for (size_t i = 0; i < tk->ntypes; i++) {
        if (tk->types[i].owner == &p->base)
            weir__free(tk->types[i].type);
        else
            tk->types[keep++] = tk->types[i];
    }
    tk->ntypes = keep;
}

static int run_init(weir_tk *tk, tk_plugin *p, const json_t *config, weir_error *err) {
    const weir_plugin_desc *d = p->base.desc;
    if (d->config_schema) {
        char msg[512];
        if (weir__schema_validate_text(d->config_schema, config, msg, sizeof msg) != 0)
            return weir__err(err, WEIR_E_PLUGIN_CONFIG, p->base.id, NULL,
                             "plugin '%s' (row '%s'): invalid config: %s", d->name, p->base.id,
                             msg);
    }
    weir_error perr;
    weir_error_clear(&perr);
    weir_error_clear(&p->base.reg_err);
    p->base.registering = true;
    int rc = d->init(&p->base, &tk->api, config, &perr);
    p->base.registering = false;
    const weir_error *reg = &p->base.reg_err;
    if (rc == WEIR_OK && reg->code == WEIR_OK) {
        p->base.initialized = true;
        return WEIR_OK;
    }
    if (rc == WEIR_OK) /* init ignored a failed registration */
        return weir__err(err, reg->code, p->base.id, reg->hook, "plugin '%s' (row '%s'): %s",
                         d->name, p->base.id, reg->text);
    const char *why = perr.text[0] ? perr.text : reg->text[0] ? reg->text : weir_strerror(rc);
    int code = (rc == WEIR_E_NOMEM || reg->code == WEIR_E_NOMEM) ? WEIR_E_NOMEM
                                                                 : WEIR_E_PLUGIN_INIT;
    return weir__err(err, code, p->base.id, perr.hook[0] ? perr.hook : NULL,
                     "plugin '%s' (row '%s') init failed: %s", d->name, p->base.id, why);
}

/* Add a row for `desc` and run its init.  Takes `dl` (closed on failure). */
static int load(weir_tk *tk, const weir_plugin_desc *desc, weir__dl *dl, const char *path,
                const char *id, const json_t *config, weir_error *err) {
    int rc = WEIR_OK;
    for (size_t i = 0; i < tk->nplugins && rc == WEIR_OK; i++) {
        if (strcmp(tk->plugins[i]->base.id, id) == 0)
            rc = weir__err(err, WEIR_E_DUPLICATE, id, NULL, "plugin row id '%s' is used twice",
                           id);
    }
    json_t *empty = NULL;
    if (rc == WEIR_OK && !config && !(config = empty = json_object()))
        rc = weir__err(err, WEIR_E_NOMEM, id, NULL, "out of memory loading '%s'", id);
    tk_plugin *p = NULL;
    if (rc == WEIR_OK) {
        tk_plugin **grown = weir__realloc(tk->plugins, (tk->nplugins + 1) * sizeof *grown);
        if (grown)
            tk->plugins = grown;
        p = grown ? weir__calloc(1, sizeof *p) : NULL;
        char *idc = p ? weir__strdup(id) : NULL;
        char *pathc = idc ? weir__strdup(path) : NULL;
        if (!pathc) {
            weir__free(idc);
            weir__free(p);
            rc = weir__err(err, WEIR_E_NOMEM, id, NULL, "out of memory loading '%s'", id);
        } else {
            p->tk = tk;
            p->base = (weir_plugin){.id = idc, .path = pathc, .index = tk->nplugins,
                                    .desc = desc, .dl = dl};
            dl = NULL;
            tk->plugins[tk->nplugins++] = p;
        }
    }
    weir__dl_close(dl);
    if (rc == WEIR_OK && (rc = run_init(tk, p, config, err)) != WEIR_OK) {
        unregister(tk, p);
        tk->nplugins--;
        plugin_free(p);
    }
    json_decref(empty);
    return rc;
}

/* Arguments every load checks. */
static int check_load(weir_tk *tk, const char *id, weir_error *err) {
    if (!tk || !valid_id(id))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_tk_load: needs a kit and a row id of [A-Za-z0-9_.-]{1,63}");
    if (tk->frozen)
        return weir__err(err, WEIR_E_TOO_LATE, id, NULL,
                         "weir_tk_load: row '%s' loaded after the first weir_tk_invoke", id);
    return WEIR_OK;
}

int weir_tk_load(weir_tk *tk, const weir_plugin_desc *desc, const char *id,
                 const json_t *config, weir_error *err) {
    int rc = check_load(tk, id, err);
    if (rc != WEIR_OK)
        return rc;
    if (!desc)
        return weir__err(err, WEIR_E_INVAL, id, NULL, "weir_tk_load: descriptor is NULL");
    if ((rc = check_static_desc(desc, id, err)) != WEIR_OK)
        return rc;
    return load(tk, desc, NULL, "(static)", id, config, err);
}

int weir_tk_load_file(weir_tk *tk, const char *path, const char *id, const json_t *config,
                      weir_error *err) {
    int rc = check_load(tk, id, err);
    if (rc != WEIR_OK)
        return rc;
    weir__dl *dl = NULL;
    const weir_plugin_desc *desc = NULL;
    if ((rc = weir__dl_open(path, &dl, &desc, err)) != WEIR_OK)
        return rc;
    return load(tk, desc, dl, path, id, config, err);
}

/* --- invoking ------------------------------------------------------------ */

typedef struct tk_default {
    weir_tk *tk;
    const json_t *value; /* borrowed from the invocation, or NULL */
} tk_default;

static json_t *run_default(weir_call *call, const json_t *args, void *ctx) {
    (void)call;
    (void)args;
    tk_default *d = ctx;
    d->tk->default_calls++;
    return d->value ? json_incref((json_t *)(uintptr_t)d->value) : json_null();
}

static int freeze(weir_tk *tk, weir_error *err) {
    const char **ids = weir__calloc(tk->nplugins + 1, sizeof *ids);
    if (!ids)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory freezing hooks");
    for (size_t i = 0; i < tk->nplugins; i++)
        ids[i] = tk->plugins[i]->base.id;
    int rc = weir__hooks_freeze(tk->hooks, (const char *const *)ids, tk->nplugins, err);
    weir__free(ids);
    if (rc == WEIR_OK)
        tk->frozen = true;
    return rc;
}

json_t *weir_tk_invoke(weir_tk *tk, const char *hook, const json_t *args,
                       const json_t *default_result, weir_error *err) {
    if (!tk || !hook || !args) {
        weir__err(err, WEIR_E_INVAL, NULL, hook, "weir_tk_invoke: needs a kit, a hook and args");
        return NULL;
    }
    if (!tk->frozen && freeze(tk, err) != WEIR_OK)
        return NULL;
    tk_default d = {tk, default_result};
    json_t *r = weir__hook_invoke(tk->hooks, hook, (weir_agent *)(void *)&tk->agent,
                                  &tk->signal, args, run_default, &d, err);
    if (!strcmp(hook, "agent/disposed")) /* as a host does once the listeners ran */
        for (size_t i = 0; i < tk->nplugins; i++)
            weir__plugin_states_release(&tk->plugins[i]->base, &tk->agent);
    return r;
}

size_t weir_tk_default_calls(const weir_tk *tk) {
    return tk ? tk->default_calls : 0;
}

/* --- the fake agent and the records -------------------------------------- */

int weir_tk_set_messages(weir_tk *tk, const json_t *messages) {
    if (!tk || !json_is_array(messages))
        return WEIR_E_INVAL;
    json_t *copy = json_deep_copy(messages);
    if (!copy)
        return WEIR_E_NOMEM;
    json_decref(tk->messages);
    tk->messages = copy;
    tk->messages_set = true;
    return WEIR_OK;
}

const json_t *weir_tk_events(const weir_tk *tk) {
    return tk ? tk->events : NULL;
}

const json_t *weir_tk_logs(const weir_tk *tk) {
    return tk ? tk->logs : NULL;
}

const json_t *weir_tk_sent(const weir_tk *tk) {
    return tk ? tk->sent : NULL;
}

void weir_tk_clear(weir_tk *tk) {
    if (!tk)
        return;
    json_array_clear(tk->events);
    json_array_clear(tk->logs);
    json_array_clear(tk->sent);
    json_array_clear(tk->requests);
    json_array_clear(tk->sleeps);
    tk->default_calls = 0;
}

void weir_tk_cancel(weir_tk *tk, const char *cause) {
    if (tk)
        weir__signal_cancel(&tk->signal, cause ? cause : "user");
}

/* --- the fake agent's log, route and script (Since 0.2) ------------------ */

/* The caller's error code, or `fallback` when `err` is NULL or empty. */
static int code_of(const weir_error *err, int fallback) {
    return err && err->code ? (int)err->code : fallback;
}

int weir_tk_seed(weir_tk *tk, const json_t *events, weir_error *err) {
    if (!tk || !json_is_array(events))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_tk_seed: needs a kit and an array of events");
    weir__log *log = agent_log(tk, err);
    if (!log)
        return code_of(err, WEIR_E_NOMEM);
    size_t i;
    const json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *type = weir__json_str(ev, "type", NULL);
        const json_t *data = json_object_get(ev, "data");
        const json_t *op = json_object_get(ev, "surface_op");
        const json_t *src = json_object_get(ev, "source_seqs");
        if (!type || !json_is_object(data) || (op && !json_is_object(op)) ||
            (src && !json_is_array(src)))
            return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                             "weir_tk_seed: events[%zu]: expected {type, data:{...}, "
                             "surface_op?, source_seqs?:[seq, ...]}",
                             i);
        bool core = weir__log_is_core_type(type);
        json_t *append = !op && weir__is_surface_type(type) ? json_string("append") : NULL;
        if (!op && weir__is_surface_type(type) && !append)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_tk_seed: out of memory");
        int rc = weir__log_append(log, type, data, op ? op : append, src,
                                  core ? 0 : WEIR_EVENT_IGNORABLE, NULL, err);
        json_decref(append);
        if (rc != WEIR_OK) {
            char why[sizeof err->text];
            snprintf(why, sizeof why, "%s", err ? err->text : "");
            return weir__err(err, rc, NULL, NULL, "weir_tk_seed: events[%zu] (%s): %s", i,
                             type, why);
        }
    }
    return WEIR_OK;
}

int weir_tk_seed_log(weir_tk *tk, const char *path, weir_error *err) {
    if (!tk || !path)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_tk_seed_log: needs a kit and a path");
    if (tk->log && weir__log_count(tk->log) > 0)
        return weir__err(err, WEIR_E_STATE, NULL, NULL,
                         "weir_tk_seed_log: the kit's log already has %zu events (seed from a "
                         "file first)",
                         weir__log_count(tk->log));
    char *buf = NULL;
    size_t len = 0;
    int rc = weir__log_read_file(path, &buf, &len, err);
    if (rc != WEIR_OK)
        return rc;
    size_t whole = len, count = 0; /* whole lines only: a torn tail is left out */
    while (whole > 0 && buf[whole - 1] != '\n')
        whole--;
    for (size_t i = 0; i < whole; i++)
        count += buf[i] == '\n';
    /* the file's lines become a fresh memory session, which the log's
     * reader checks as it opens it */
    char id[64];
    weir__random_id(id, sizeof id, "testkit-");
    weir__store_ref store = weir__store_memory();
    void *handle = NULL;
    uint64_t epoch = 0;
    rc = store.vt->open(store.self, id, NULL, 0, &handle, &epoch, err);
    if (rc == WEIR_OK && count > 0)
        rc = store.vt->append(store.self, handle, epoch, 0, count, buf, whole, 0, err);
    if (handle)
        store.vt->close(store.self, handle);
    weir__free(buf);
    if (rc != WEIR_OK)
        return rc;
    weir__log_close(tk->log);
    tk->log = NULL;
    rc = open_log(tk, id, err);
    if (rc != WEIR_OK)
        tk->log = NULL;
    return rc;
}

int weir_tk_set_route(weir_tk *tk, const json_t *route, weir_error *err) {
    const char *provider = weir__json_str(route, "provider", NULL);
    const char *model = weir__json_str(route, "model", NULL);
    if (!tk || !json_is_object(route) || !provider || !*provider || !model || !*model)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_tk_set_route: needs a kit and a route {provider, model, "
                         "context_window?, max_output?, ...}");
    const json_t *cw = json_object_get(route, "context_window");
    if (cw && (!json_is_integer(cw) || json_integer_value(cw) <= 0))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_tk_set_route: context_window: expected a positive integer");
    weir__log *log = agent_log(tk, err);
    if (!log)
        return code_of(err, WEIR_E_NOMEM);
    /* request/context as the driver logs it when the route changes */
    json_t *ctx = json_pack("{s:s, s:s}", "provider", provider, "model", model);
    json_t *copy = json_deep_copy(route);
    if (ctx && cw && json_object_set(ctx, "context_window", (json_t *)(uintptr_t)cw) != 0) {
        json_decref(ctx);
        ctx = NULL;
    }
    int rc = ctx && copy ? WEIR_OK
                         : weir__err(err, WEIR_E_NOMEM, NULL, NULL,
                                     "weir_tk_set_route: out of memory");
    if (rc == WEIR_OK && !weir__json_equal(weir__log_request_context(log), ctx))
        rc = weir__log_append(log, "request/context", ctx, NULL, NULL, 0, NULL, err);
    json_decref(ctx);
    if (rc == WEIR_OK) {
        json_decref(tk->route);
        tk->route = copy;
    } else {
        json_decref(copy);
    }
    return rc;
}

json_t *weir_tk_log(weir_tk *tk) {
    if (!tk)
        return NULL;
    weir__log *log = agent_log(tk, NULL);
    json_t *out = log ? json_array() : NULL;
    size_t n = log ? weir__log_count(log) : 0;
    for (size_t seq = 0; out && seq < n; seq++) {
        json_t *ev = weir__log_event_ref(log, seq);
        if (!ev || json_array_append_new(out, ev) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

int weir_tk_set_script(weir_tk *tk, const json_t *script, weir_error *err) {
    const json_t *replies = json_object_get(script, "replies");
    if (!tk || !json_is_array(replies))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_tk_set_script: needs a kit and a script {\"replies\":[...]}");
    size_t i;
    const json_t *r;
    json_array_foreach(replies, i, r) {
        const json_t *p = json_object_get(r, "purpose");
        const json_t *fail = json_object_get(r, "fail");
        if (!json_is_object(r) || (p && !json_is_string(p)) ||
            (json_object_get(r, "text") && !json_is_string(json_object_get(r, "text"))) ||
            (fail && !json_is_string(json_object_get(fail, "code"))))
            return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                             "weir_tk_set_script: replies[%zu]: expected {purpose?:string, "
                             "text?:string, finish?, usage?, fail?:{code, message?}}",
                             i);
    }
    json_t *copy = json_deep_copy(replies);
    bool *used = weir__calloc(json_array_size(replies) + 1, sizeof *used);
    if (!copy || !used) {
        json_decref(copy);
        weir__free(used);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "weir_tk_set_script: out of memory");
    }
    json_decref(tk->replies);
    weir__free(tk->used);
    tk->replies = copy;
    tk->used = used;
    tk->loop = json_is_true(json_object_get(script, "loop"));
    return WEIR_OK;
}

const json_t *weir_tk_requests(const weir_tk *tk) {
    return tk ? tk->requests : NULL;
}

/* --- the fake clock (Since 0.2) ------------------------------------------- */

int weir_tk_clock_set(weir_tk *tk, uint64_t ms) {
    if (!tk)
        return WEIR_E_INVAL;
    pthread_mutex_lock(&live_mu);
    int rc = clock_kit && clock_kit != tk ? WEIR_E_BUSY : WEIR_OK;
    if (rc == WEIR_OK) {
        clock_kit = tk;
        weir__clock_fake(ms);
    }
    pthread_mutex_unlock(&live_mu);
    return rc;
}

int weir_tk_clock_advance(weir_tk *tk, uint64_t ms) {
    if (!tk)
        return WEIR_E_INVAL;
    pthread_mutex_lock(&live_mu);
    int rc = clock_kit == tk ? WEIR_OK : WEIR_E_STATE;
    if (rc == WEIR_OK)
        weir__clock_advance(ms);
    pthread_mutex_unlock(&live_mu);
    return rc;
}

uint64_t weir_tk_clock_ms(const weir_tk *tk) {
    (void)tk;
    return weir__clock_ms();
}

void weir_tk_clock_real(weir_tk *tk) {
    pthread_mutex_lock(&live_mu);
    if (tk && clock_kit == tk) {
        clock_kit = NULL;
        weir__clock_real();
    }
    pthread_mutex_unlock(&live_mu);
}

const json_t *weir_tk_sleeps(const weir_tk *tk) {
    return tk ? tk->sleeps : NULL;
}
