/*
 * core/runtime/host_int.h - the host's internal shape: loaded plugin instances,
 * registries of providers, tools, event types and session stores.  Owner: core/runtime/host.c
 * (plugin instances and registration) and core/runtime/loader.c (dlopen + checks).
 */
#ifndef WEIR_CORE_HOST_INT_H
#define WEIR_CORE_HOST_INT_H

#include "common.h"
#include "hooks.h"
#include "http.h"
#include "store.h"

typedef struct weir__tools weir__tools;

/* An opened plugin file (core/runtime/loader.c). */
typedef struct weir__dl weir__dl;

/*
 * dlopen(RTLD_NOW|RTLD_LOCAL) `path`, find weir_plugin_describe, check the
 * descriptor header (ABI major equal, plugin minor <= host minor, struct
 * size, flags, reserved) and metadata.  Every error names the file and, once
 * known, the plugin (named after the file, "weir-x.so" -> 'x', until the
 * header has passed).  On success *out is new (weir__dl_close) and *desc is
 * borrowed from the opened file.  Thread-safe as dlopen is.
 */
int weir__dl_open(const char *path, weir__dl **out,
                  const weir_plugin_desc **desc, weir_error *err);
/* dlclose (skipped under sanitizers) and free. NULL is a no-op. */
void weir__dl_close(weir__dl *dl);

/*
 * Resolve a row's `plugin` value: a path when it contains '/' (returned as
 * is), else "weir-<name>.so" along `plugin_path` (array of dirs, each may be
 * a ':'-separated list; borrowed, may be NULL) then weir_plugin_dirs().
 * *out is new (weir__free).  E_PLUGIN_OPEN lists the dirs searched.
 */
int weir__plugin_resolve(const char *plugin, const json_t *plugin_path,
                         char **out, weir_error *err);

/*
 * The config schema of `plugin` (a row's name or path, resolved as by
 * weir__plugin_resolve; the file is opened to read its descriptor, never
 * initialised) as JSON (new reference), or NULL when it cannot be resolved
 * or opened, declares none, or does not parse (the loader reports those
 * when the deployment is loaded).  Owner: runtime/redact.c; used by
 * weir_config_redact and weir_config_defaults.
 */
json_t *weir__plugin_config_schema(const char *plugin, const json_t *plugin_path);

typedef struct weir__provider_entry {
    char *id;                 /* plugin row id */
    weir_provider vt;         /* copy (struct_size-limited) */
    void *self;               /* passed back to vt calls */
    weir_plugin *owner;
} weir__provider_entry;

#define WEIR__ROLES_MAX 4 /* roles one row fills (api->plugin_role) */
#define WEIR__ROLE_LEN 32 /* a role name and its NUL */
#define WEIR__MAX_NAMESPACES 4 /* event_namespace_claim's per plugin */

struct weir_plugin {
    weir_host *host;
    char *id;                 /* row id */
    char *path;               /* resolved file */
    size_t index;             /* position in the composed plugins list */
    size_t load_order;        /* position among the loaded plugins (the host's) */
    const weir_plugin_desc *desc;
    weir__dl *dl;
    void *data;               /* plugin_set_data */
    bool registering;         /* true only during init */
    bool initialized;
    weir_error reg_err;       /* first registration failure during init */
    /* api->plugin_role: the policy roles the row fills (docs/plugins.md,
     * "Roles"), inline so that a test kit row needs no cleanup */
    char roles[WEIR__ROLES_MAX][WEIR__ROLE_LEN];
    size_t nroles;
    struct weir__row_agent_state *states; /* api->agent_state blocks (runtime/agent_state.c) */
    /* event type namespaces claimed (event_namespace_claim), besides desc->name */
    char namespaces[WEIR__MAX_NAMESPACES][32];
    size_t nnamespaces;
};

/*
 * api->agent_state (core/runtime/agent_state.c): the block of `self` for
 * `agent`, made zeroed at the first call.  Thread-safe.
 */
void *weir__plugin_agent_state(weir_plugin *self, weir_agent *agent, size_t size,
                               void (*destroy)(void *state));
/* Destroy and free the blocks of `self` for `agent` (NULL: every agent's). */
void weir__plugin_states_release(weir_plugin *self, const void *agent);
/* weir__plugin_states_release(p, agent) for every row of `host` (agent disposed). */
void weir__host_agent_gone(const weir_host *host, const void *agent);
/* The `config` of plugin row `id` of the composed config (borrowed), or NULL. */
const json_t *weir__host_row_config(const weir_host *host, const char *id);

/* Lookups (after weir_host_create succeeded). Borrowed results or NULL. */
const weir__provider_entry *weir__host_provider(const weir_host *host, const char *id);
weir__hooks *weir__host_hooks(const weir_host *host);
/* The host's live span exporter (telemetry.enabled), else NULL (borrowed). */
struct weir__otlp_exporter *weir__host_exporter(const weir_host *host);
/* The agents' HTTP handles (borrowed, the host's; core/runtime/http.h). */
weir__http_pool *weir__host_http_pool(const weir_host *host);
weir__tools *weir__host_tools(const weir_host *host);
/* true when `type` is a registered plugin event type; *flags gets its flags. */
bool weir__host_event_type(const weir_host *host, const char *type, uint32_t *flags);
/* The instance of plugin row `id` (borrowed), or NULL. */
weir_plugin *weir__host_plugin(const weir_host *host, const char *id);

/* api->store_register (core/api/api.c). */
int weir__plugin_store_register(weir_plugin *self, const weir_store *store, void *self_ptr);

/*
 * The store of deployment `host` named `name` ("file", "memory", or a row id
 * that registered one; NULL: "file") into *out.  WEIR_E_NOT_FOUND when no
 * row of the host registered `name`.
 */
int weir__store_lookup(const weir_host *host, const char *name, weir__store_ref *out);

/*
 * What the api floor gives the host it creates (core/api/api.c, the wiring
 * root): the table every plugin's init receives, and where the hook chains'
 * provenance records go.  Static: the host keeps the pointer.
 */
typedef struct weir__host_wiring {
    const weir_api *api;
    weir__hook_sink_fn sink;
    weir__hook_mark_fn mark;
} weir__host_wiring;

/*
 * weir_host_create (weir/host.h) with `wiring`: load the config's rows in
 * order, init each with registration open, check what they require, freeze
 * the hook chains.  Any error unwinds everything.
 */
int weir__host_create(const json_t *config, const weir__host_wiring *wiring, weir_host **out,
                      weir_error *err);

/* The api table given to every plugin (core/api/api.c). */
extern const weir_api weir__api_table;

/* Public-table implementations (core/runtime/host.c). */
const char *weir__plugin_id(const weir_plugin *self);
void weir__plugin_set_data(weir_plugin *self, void *data);
void *weir__plugin_data(const weir_plugin *self);
/* "error", "warning", "info", "debug" ("log" for another value); static, thread-safe. */
const char *weir__log_level_name(weir_log_level level);
void weir__plugin_log(const weir_plugin *self, weir_log_level level, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
int weir__plugin_hook_register(weir_plugin *self, const char *hook, weir_hook_fn fn,
                               const weir_hook_opts *opts);
int weir__plugin_event_type_register(weir_plugin *self, const char *type, uint32_t flags);
/* api->event_namespace_claim (docs/plugins.md, "Event types are namespaced"). */
int weir__plugin_event_namespace_claim(weir_plugin *self, const char *ns);
/* Whether `ns` (its first `len` bytes) is a namespace of the core: the
 * prefix of an event catalog type or of a hook catalog name. */
bool weir__namespace_reserved(const char *ns, size_t len);
/* api->provider_require: record `provider` for the check after every init. */
int weir__plugin_provider_require(weir_plugin *self, const char *provider, const char *what);
int weir__plugin_provider_register(weir_plugin *self, const weir_provider *provider,
                                   void *self_ptr);
int weir__plugin_tool_register(weir_plugin *self, const weir_tool *tool);
/* api->tool_update / tool_remove (any time; during init as tool_register). */
int weir__plugin_tool_update(weir_plugin *self, const weir_tool *tool);
int weir__plugin_tool_remove(weir_plugin *self, const char *name);
/* api->plugin_role: the row fills policy role `role` (checked after every init). */
int weir__plugin_role(weir_plugin *self, const char *role);
/* The roles row `p` fills, ", "-separated, into `buf` ("" for none; truncated
 * to `size`).  For messages and `weir hooks`. */
void weir__plugin_roles_text(const weir_plugin *p, char *buf, size_t size);

/*
 * Registration pieces shared by the host and the test kit
 * (sdk/testkit/testkit.c), implemented in core/runtime/host.c.  Called from the
 * thread running the plugin's init.
 */

/* A plugin event type: `type` owned, `flags` always has WEIR_EVENT_IGNORABLE. */
typedef struct weir__event_type {
    char *type;
    uint32_t flags;
    weir_plugin *owner;
} weir__event_type;

/*
 * The gate of every registration call: WEIR_E_INVAL without `self`; outside
 * init, "plugin '<id>': <what> called after init" is logged through `log`
 * and the call is refused with WEIR_E_TOO_LATE.  Else WEIR_OK.
 */
int weir__reg_open(weir_plugin *self, const char *what,
                   void (*log)(const weir_plugin *self, weir_log_level level, const char *fmt,
                               ...));
/* Keep `e` (copied) as self's first registration failure of this init; returns e->code. */
int weir__reg_fail(weir_plugin *self, const weir_error *e);
/*
 * event_type_register into the array *types of *ntypes (grown with
 * weir__realloc; the entries' `type` strings are weir__malloc'd): checks the
 * name ([a-z0-9_./-]+) and flags, refuses the core's event types (the event
 * catalog: durable and live), the `nreserved` names of `reserved` (may be
 * NULL) and a type another plugin registered; a second row of the
 * same plugin is a no-op.  Failures are kept with weir__reg_fail.
 */
int weir__reg_event_type(weir_plugin *self, weir__event_type **types, size_t *ntypes,
                         const char *type, uint32_t flags, const char *const *reserved,
                         size_t nreserved);
/*
 * provider_register's check of the vtable (struct_size covers `stream`;
 * prepare_call and stream set): WEIR_E_INVAL, kept with weir__reg_fail.
 */
int weir__reg_check_provider(weir_plugin *self, const weir_provider *provider);

#endif
