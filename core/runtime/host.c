/*
 * core/runtime/host.c - the host: one instance per `plugins` row, loaded in config
 * order, initialised with registration open, then frozen
 * (docs/plugins.md).  Any error unwinds everything: the instances already
 * initialised are finalised in reverse order and nothing stays loaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "event_catalog.h"
#include "hook_catalog.h"
#include "host_int.h"
#include "idmap.h"
#include "otlp_export.h"
#include "schema.h"
#include "store.h"
#include "tools.h"

/* A store a row registered (api->store_register). */
typedef struct store_entry {
    struct store_entry *next;
    char *id;      /* row id */
    weir_store vt; /* copy (struct_size-limited) */
    void *self;
} store_entry;

struct weir_host {
    json_t *config;              /* own copy of the composed config */
    weir_plugin **plugins;       /* load order */
    size_t nplugins, cap_plugins;
    weir__idmap plugin_ids;      /* row id -> its plugin (ptr) */
    weir__idmap plugin_names;    /* descriptor name -> the first plugin of that name (ptr) */
    weir__hooks *hooks;
    weir__tools *tools;
    weir__provider_entry *providers;
    size_t nproviders, cap_providers;
    weir__idmap provider_ids;    /* row id -> index in providers (num) */
    weir__event_type *types;
    size_t ntypes;
    json_t *required;            /* [{row, provider, what}]: provider_require, checked after init */
    weir__http_pool *http;       /* the agents' HTTP handles (core/runtime/http.h) */
    const weir__host_wiring *wiring; /* from the api floor (core/api/api.c), static */
    store_entry *stores;         /* the stores rows registered, newest first: written
                                  * only by init (registration), read-only after */
    weir__idmap roles;           /* policy role -> the first row that fills it (ptr; the
                                  * key is that row's copy of the name) */
    weir__otlp_exporter *otel;   /* telemetry.enabled: the live span exporter, else NULL */
};

/*
 * What loading the rows shares, so that a deployment of n rows loads in
 * O(n) (issue #8, item 10d): each plugin name is resolved along the search
 * path once, and each plugin's config_schema is parsed once.
 */
typedef struct load_cache {
    weir__idmap paths;   /* plugin name -> "name\0path" (ptr, owned; the key points into it) */
    weir__idmap schemas; /* descriptor name -> parsed config_schema (ptr, owned) */
} load_cache;

static void load_cache_free(load_cache *lc) {
    for (size_t i = 0; i < lc->paths.cap; i++)
        if (lc->paths.slots[i].key)
            weir__free(lc->paths.slots[i].ptr);
    for (size_t i = 0; i < lc->schemas.cap; i++)
        if (lc->schemas.slots[i].key)
            json_decref(lc->schemas.slots[i].ptr);
    weir__idmap_free(&lc->paths);
    weir__idmap_free(&lc->schemas);
}

/* api->tool_exec_append: `type` was registered by the plugin of row
 * `plugin_id` (by that row, or another row of the same plugin).  The types
 * are fixed once the host is created; thread-safe. */
static bool event_owned(const char *plugin_id, const char *type, void *ud) {
    const weir_host *h = ud;
    const weir_plugin *p = weir__host_plugin(h, plugin_id);
    for (size_t i = 0; p && i < h->ntypes; i++)
        if (strcmp(h->types[i].type, type) == 0)
            return h->types[i].owner->desc == p->desc;
    return false;
}

/* "off", "decisions" or "all" (session.provenance) in *out; false for
 * anything else.  NULL is the default, "decisions". */
static bool provenance_parse(const char *text, weir__provenance *out) {
    if (!text || !strcmp(text, "decisions"))
        *out = WEIR__PROVENANCE_DECISIONS;
    else if (!strcmp(text, "all"))
        *out = WEIR__PROVENANCE_ALL;
    else if (!strcmp(text, "off"))
        *out = WEIR__PROVENANCE_OFF;
    else
        return false;
    return true;
}

/* --- the store registry (weir/store.h, docs/stores.md) ----------------- */

int weir__plugin_store_register(weir_plugin *self, const weir_store *store, void *self_ptr) {
    int rc = weir__reg_open(self, "store_register", weir__plugin_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    if (!store || store->struct_size < offsetof(weir_store, close) + sizeof store->close ||
        !store->open || !store->read || !store->buffer_free || !store->append || !store->sync ||
        !store->close) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL,
                  "store_register: open, read, buffer_free, append, sync and close are required");
        return weir__reg_fail(self, &e);
    }
    if (strcmp(self->id, "file") == 0 || strcmp(self->id, "memory") == 0) {
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                  "store_register: '%s' is the name of a built-in store", self->id);
        return weir__reg_fail(self, &e);
    }
    if (!self->host) /* a test kit row: no host, so no agent opens this store */
        return WEIR_OK;
    weir__store_ref have;
    if (weir__store_lookup(self->host, self->id, &have) == WEIR_OK) {
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                  "a store is already registered under '%s'", self->id);
        return weir__reg_fail(self, &e);
    }
    store_entry *en = weir__calloc(1, sizeof *en);
    if (!en || !(en->id = weir__strdup(self->id))) {
        weir__free(en);
        weir__err(&e, WEIR_E_NOMEM, self->id, NULL, "out of memory");
        return weir__reg_fail(self, &e);
    }
    size_t n = store->struct_size < sizeof en->vt ? store->struct_size : sizeof en->vt;
    memcpy(&en->vt, store, n);
    en->vt.struct_size = sizeof en->vt;
    en->self = self_ptr;
    en->next = self->host->stores;
    self->host->stores = en;
    return WEIR_OK;
}

int weir__store_lookup(const weir_host *host, const char *name, weir__store_ref *out) {
    if (!name || strcmp(name, "file") == 0) {
        *out = weir__store_file();
        return WEIR_OK;
    }
    if (strcmp(name, "memory") == 0) {
        *out = weir__store_memory();
        return WEIR_OK;
    }
    int rc = WEIR_E_NOT_FOUND;
    for (store_entry *en = host ? host->stores : NULL; en; en = en->next) {
        if (strcmp(en->id, name) == 0) {
            *out = (weir__store_ref){.vt = &en->vt, .self = en->self};
            rc = WEIR_OK;
            break;
        }
    }
    return rc;
}

/* Drop the stores the rows registered (host_free). */
static void stores_free(weir_host *h) {
    while (h->stores) {
        store_entry *en = h->stores;
        h->stores = en->next;
        weir__free(en->id);
        weir__free(en);
    }
}

/* --- teardown ---------------------------------------------------------- */

static void plugin_free(weir_plugin *p) {
    if (!p)
        return;
    weir__dl_close(p->dl);
    weir__free(p->id);
    weir__free(p->path);
    weir__free(p);
}

/* fini every initialised instance in reverse load order, then free all. */
static void host_free(weir_host *h) {
    weir__otlp_exporter_destroy(h->otel); /* sends what the agents left */
    stores_free(h);
    for (size_t i = h->nplugins; i-- > 0;) {
        weir_plugin *p = h->plugins[i];
        weir__plugin_states_release(p, NULL); /* before fini: a destructor may use the row */
        if (p->initialized && p->desc->fini)
            p->desc->fini(p);
        p->initialized = false;
    }
    weir__hooks_destroy(h->hooks);
    weir__tools_destroy(h->tools);
    weir__http_pool_destroy(h->http);
    for (size_t i = 0; i < h->nproviders; i++)
        weir__free(h->providers[i].id);
    weir__free(h->providers);
    weir__idmap_free(&h->provider_ids);
    json_decref(h->required);
    weir__idmap_free(&h->plugin_ids);
    weir__idmap_free(&h->plugin_names);
    weir__idmap_free(&h->roles);
    for (size_t i = 0; i < h->ntypes; i++)
        weir__free(h->types[i].type);
    weir__free(h->types);
    for (size_t i = h->nplugins; i-- > 0;)
        plugin_free(h->plugins[i]);
    weir__free(h->plugins);
    json_decref(h->config);
    weir__free(h);
}

void weir_host_destroy(weir_host *host) {
    if (host)
        host_free(host);
}

weir__otlp_exporter *weir__host_exporter(const weir_host *host) {
    return host ? host->otel : NULL;
}

void weir_host_telemetry_counts(weir_host *host, uint64_t *queued, uint64_t *sent,
                                uint64_t *dropped) {
    weir__otlp_exporter_counts(host ? host->otel : NULL, queued, sent, dropped);
}

/* telemetry.enabled: start the exporter (docs/telemetry.md). */
static int start_telemetry(weir_host *h, weir_error *err) {
    /* off: the OTEL_* variables are not even read */
    if (!json_is_true(json_object_get(json_object_get(h->config, "telemetry"), "enabled")))
        return WEIR_OK;
    weir__otlp_settings s;
    int rc = weir__otlp_settings_resolve(h->config, &s, err);
    if (rc != WEIR_OK)
        return rc;
    rc = weir__otlp_exporter_create(&s, &h->otel, err);
    weir__otlp_settings_free(&s);
    return rc;
}

/* --- loading one row --------------------------------------------------- */

/* Validate `config` against the descriptor's schema text (parsed once per
 * plugin name, into the cache). */
static int check_config(const weir_plugin *p, const json_t *config, load_cache *lc,
                        weir_error *err) {
    const char *text = p->desc->config_schema;
    if (!text)
        return WEIR_OK;
    const weir__idmap_slot *cached = weir__idmap_get(&lc->schemas, p->desc->name);
    json_t *schema = cached ? cached->ptr : NULL;
    if (!schema) {
        json_error_t jerr;
        schema = weir__json_loads(text, 0, &jerr);
        if (!schema) {
            if (json_error_code(&jerr) == json_error_out_of_memory)
                return weir__err(err, WEIR_E_NOMEM, p->id, NULL,
                                 "out of memory reading plugin '%s' config_schema",
                                 p->desc->name);
            return weir__err(err, WEIR_E_PLUGIN_ABI, p->id, NULL,
                             "plugin '%s' (%s): config_schema is not JSON: %s", p->desc->name,
                             p->path, jerr.text);
        }
        /* the key is the descriptor's name: it lives as long as the host */
        if (weir__idmap_put(&lc->schemas, p->desc->name, schema, 0) != WEIR_OK) {
            json_decref(schema);
            return weir__err(err, WEIR_E_NOMEM, p->id, NULL, "out of memory");
        }
    }
    char msg[512];
    int bad = weir__schema_validate(schema, config, msg, sizeof msg);
    if (bad)
        return weir__err(err, WEIR_E_PLUGIN_CONFIG, p->id, NULL,
                         "plugin '%s' (row '%s'): invalid config: %s", p->desc->name, p->id,
                         msg);
    return WEIR_OK;
}

/* Run init with registration open; fold registration failures in. */
static int run_init(weir_plugin *p, const json_t *config, weir_error *err) {
    weir_error perr;
    weir_error_clear(&perr);
    weir_error_clear(&p->reg_err);
    p->registering = true;
    int rc = p->desc->init(p, p->host->wiring->api, config, &perr);
    p->registering = false;
    const weir_error *reg = &p->reg_err;
    if (rc == WEIR_OK && reg->code == WEIR_OK) {
        p->initialized = true;
        return WEIR_OK;
    }
    /* Not initialised: its fini must not run.  What it registered goes with the host. */
    if (reg->code == WEIR_E_CONFIG) /* the row conflicts with another (a role both fill) */
        return weir__err(err, WEIR_E_CONFIG, p->id, NULL, "%s", reg->text);
    if (rc == WEIR_OK) /* init ignored a failed registration */
        return weir__err(err, reg->code, p->id, reg->hook, "plugin '%s' (row '%s'): %s",
                         p->desc->name, p->id, reg->text);
    const char *why = perr.text[0]  ? perr.text
                      : reg->text[0] ? reg->text
                                     : weir_strerror(rc);
    int code = (rc == WEIR_E_NOMEM || reg->code == WEIR_E_NOMEM) ? WEIR_E_NOMEM
                                                                 : WEIR_E_PLUGIN_INIT;
    return weir__err(err, code, p->id, perr.hook[0] ? perr.hook : NULL,
                     "plugin '%s' (%s) init failed: %s", p->desc->name, p->path, why);
}

/*
 * A row id is used once, and two different files may not declare the same
 * plugin name.  Of the two conflicts, the one with the plugin loaded first
 * is reported (all the plugins of one name share one descriptor, so the
 * first of that name is the first conflicting one).
 */
static int check_duplicate(const weir_host *h, const char *id, const weir_plugin_desc *d,
                           const char *path, weir_error *err) {
    const weir__idmap_slot *same_id = weir__idmap_get(&h->plugin_ids, id);
    const weir__idmap_slot *same_name = weir__idmap_get(&h->plugin_names, d->name);
    const weir_plugin *a = same_id ? same_id->ptr : NULL;
    const weir_plugin *b = same_name ? same_name->ptr : NULL;
    if (b && b->desc == d)
        b = NULL;
    if (a && (!b || a->load_order < b->load_order))
        return weir__err(err, WEIR_E_DUPLICATE, id, NULL, "plugin row id '%s' is used twice",
                         id);
    if (b)
        return weir__err(err, WEIR_E_DUPLICATE, id, NULL,
                         "plugin '%s' is declared by two files: %s (row '%s') and %s "
                         "(row '%s')",
                         d->name, b->path, b->id, path, id);
    return WEIR_OK;
}

/* weir__plugin_resolve once per plugin name (a copy of the path in *out). */
static int resolve_cached(weir_host *h, load_cache *lc, const char *name, char **out,
                          weir_error *err) {
    const json_t *pp = json_object_get(h->config, "plugin_path");
    if (strchr(name, '/'))
        return weir__plugin_resolve(name, pp, out, err);
    const weir__idmap_slot *s = weir__idmap_get(&lc->paths, name);
    if (!s) {
        char *path = NULL;
        int rc = weir__plugin_resolve(name, pp, &path, err);
        if (rc != WEIR_OK)
            return rc;
        size_t nl = strlen(name) + 1, pl = strlen(path) + 1;
        char *entry = weir__malloc(nl + pl);
        if (entry) {
            memcpy(entry, name, nl);
            memcpy(entry + nl, path, pl);
        }
        weir__free(path);
        if (!entry || weir__idmap_put(&lc->paths, entry, entry, 0) != WEIR_OK) {
            weir__free(entry);
            return weir__err(err, WEIR_E_NOMEM, name, NULL, "out of memory resolving plugin");
        }
        s = weir__idmap_get(&lc->paths, name);
    }
    const char *entry = s->ptr;
    *out = weir__strdup(entry + strlen(entry) + 1);
    return *out ? WEIR_OK : weir__err(err, WEIR_E_NOMEM, name, NULL, "out of memory");
}

/* Append `p` to the load order and index it; WEIR_OK or WEIR_E_NOMEM (then
 * `p` is not added). */
static int add_plugin(weir_host *h, weir_plugin *p) {
    if (h->nplugins == h->cap_plugins) {
        size_t cap = h->cap_plugins ? h->cap_plugins * 2 : 8;
        weir_plugin **grown = weir__realloc(h->plugins, cap * sizeof *grown);
        if (!grown)
            return WEIR_E_NOMEM;
        h->plugins = grown;
        h->cap_plugins = cap;
    }
    if (weir__idmap_put(&h->plugin_ids, p->id, p, 0) != WEIR_OK)
        return WEIR_E_NOMEM;
    if (!weir__idmap_get(&h->plugin_names, p->desc->name) &&
        weir__idmap_put(&h->plugin_names, p->desc->name, p, 0) != WEIR_OK) {
        weir__idmap_del(&h->plugin_ids, p->id);
        return WEIR_E_NOMEM;
    }
    p->load_order = h->nplugins;
    h->plugins[h->nplugins++] = p;
    return WEIR_OK;
}

/* A row's fault policy: on_error, max_failures, budget_ms (docs/config.md). */
static int row_policy(const json_t *row, size_t index, weir__hook_policy *pol, weir_error *err) {
    const char *id = json_string_value(json_object_get(row, "id"));
    const json_t *oe = json_object_get(row, "on_error");
    *pol = (weir__hook_policy){0};
    if (oe && (!json_is_string(oe) || (strcmp(json_string_value(oe), "fail") != 0 &&
                                       strcmp(json_string_value(oe), "skip") != 0)))
        return weir__err(err, WEIR_E_CONFIG, id, NULL,
                         "plugins[%zu] (row '%s'): on_error must be \"fail\" or \"skip\"",
                         index, id ? id : "?");
    pol->skip = oe && strcmp(json_string_value(oe), "skip") == 0;
    const json_t *share = json_object_get(row, "share_roles");
    bool share_ok = !share || json_is_array(share);
    for (size_t k = 0; share_ok && k < json_array_size(share); k++)
        share_ok = weir__role_name_valid(json_string_value(json_array_get(share, k)));
    if (!share_ok)
        return weir__err(err, WEIR_E_CONFIG, id, NULL,
                         "plugins[%zu] (row '%s'): share_roles must be an array of role names "
                         "([a-z0-9][a-z0-9._-]*)",
                         index, id ? id : "?");
    static const char *const counts[] = {"max_failures", "budget_ms"};
    for (size_t k = 0; k < 2; k++) {
        const json_t *v = json_object_get(row, counts[k]);
        if (!v)
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > 86400000)
            return weir__err(err, WEIR_E_CONFIG, id, NULL,
                             "plugins[%zu] (row '%s'): %s must be an integer from 1 to 86400000",
                             index, id ? id : "?", counts[k]);
        *(k ? &pol->budget_ms : &pol->max_failures) = (unsigned)json_integer_value(v);
    }
    return WEIR_OK;
}

static int load_row(weir_host *h, const json_t *row, size_t index, load_cache *lc,
                    weir_error *err) {
    const char *id = json_string_value(json_object_get(row, "id"));
    const char *name = json_string_value(json_object_get(row, "plugin"));
    if (!json_is_object(row) || !id || !*id || !name || !*name)
        return weir__err(err, WEIR_E_CONFIG, id, NULL,
                         "plugins[%zu]: a row needs a string 'id' and 'plugin'", index);
    weir__hook_policy pol;
    int prc = row_policy(row, index, &pol, err);
    if (prc != WEIR_OK)
        return prc;
    const json_t *config = json_object_get(row, "config");
    json_t *empty = NULL;
    if (!config) {
        config = empty = json_object();
        if (!empty)
            return weir__err(err, WEIR_E_NOMEM, id, NULL, "out of memory");
    }
    char *path = NULL;
    weir__dl *dl = NULL;
    const weir_plugin_desc *d = NULL;
    int rc = resolve_cached(h, lc, name, &path, err);
    if (rc == WEIR_OK)
        rc = weir__dl_open(path, &dl, &d, err);
    if (rc == WEIR_OK)
        rc = check_duplicate(h, id, d, path, err);
    weir_plugin *p = NULL;
    if (rc == WEIR_OK) {
        p = weir__calloc(1, sizeof *p);
        char *idc = weir__strdup(id);
        if (p && idc)
            *p = (weir_plugin){.host = h, .id = idc, .path = path, .index = index,
                               .desc = d, .dl = dl};
        if (!p || !idc || add_plugin(h, p) != WEIR_OK) {
            weir__free(p);
            weir__free(idc);
            p = NULL;
            rc = weir__err(err, WEIR_E_NOMEM, id, NULL, "out of memory loading '%s'", id);
        } else {
            path = NULL;
            dl = NULL;
        }
    }
    weir__free(path);
    weir__dl_close(dl);
    if (rc == WEIR_OK)
        rc = check_config(p, config, lc, err);
    if (rc == WEIR_OK)
        rc = run_init(p, config, err);
    if (rc == WEIR_OK && weir__hooks_set_policy(h->hooks, id, &pol) != WEIR_OK)
        rc = weir__err(err, WEIR_E_NOMEM, id, NULL, "out of memory");
    json_decref(empty);
    if (rc != WEIR_OK && err) /* errors of a row name the row */
        snprintf(err->plugin, sizeof err->plugin, "%s", id);
    return rc;
}

static bool owns_namespace(const weir_plugin *self, const char *ns, size_t len);

/* No namespace is owned by two plugins: a claim of one is neither a claim
 * nor the name of another (rows of one plugin share its namespaces). */
static int check_namespaces(const weir_host *h, weir_error *err) {
    for (size_t i = 0; i < h->nplugins; i++) {
        const weir_plugin *a = h->plugins[i];
        for (size_t c = 0; c < a->nnamespaces; c++) {
            const char *ns = a->namespaces[c];
            for (size_t j = 0; j < h->nplugins; j++) {
                const weir_plugin *b = h->plugins[j];
                if (b->desc == a->desc || !owns_namespace(b, ns, strlen(ns)))
                    continue;
                bool named = !strcmp(b->desc->name, ns);
                return weir__err(err, WEIR_E_PLUGIN_CONFIG, a->id, NULL,
                                 "event namespace '%s' is claimed by plugin '%s' (row '%s') "
                                 "and %s plugin '%s' (row '%s')",
                                 ns, a->desc->name, a->id, named ? "is the name of" : "claimed by",
                                 b->desc->name, b->id);
            }
        }
    }
    return WEIR_OK;
}

/* Every provider a row required (provider_require) is registered by some row. */
static int check_required(weir_host *h, weir_error *err) {
    size_t i;
    const json_t *r;
    json_array_foreach(h->required, i, r) {
        const char *row = weir__json_str(r, "row", "");
        const char *provider = weir__json_str(r, "provider", "");
        if (weir__host_provider(h, provider))
            continue;
        const weir_plugin *p = weir__host_plugin(h, row);
        return weir__err(err, WEIR_E_PLUGIN_CONFIG, row, NULL,
                         "plugin '%s' (row '%s'): %s: no provider row '%s'",
                         p ? p->desc->name : "?", row, weir__json_str(r, "what", "provider"),
                         provider);
    }
    return WEIR_OK;
}

/* agent.provider, when the deployment sets it, names a row that registered a
 * provider: else a load error with the closest row and every provider row. */
static int check_agent_provider(const weir_host *h, weir_error *err) {
    const char *want = weir__json_str(json_object_get(h->config, "agent"), "provider", NULL);
    if (!want || weir__host_provider(h, want))
        return WEIR_OK;
    const char **ids = weir__calloc(h->nproviders + 1, sizeof *ids);
    if (!ids)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    char rows[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < h->nproviders; i++) {
        ids[i] = h->providers[i].id;
        if (len < sizeof rows)
            len += (size_t)snprintf(rows + len, sizeof rows - len, "%s%s", i ? ", " : "",
                                    ids[i]);
    }
    const char *near = weir__config_suggest(want, ids, h->nproviders);
    int rc = weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                       "agent.provider '%s': no plugin row with that id registered a provider%s%s%s "
                       "(%s%s)",
                       want, near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "",
                       h->nproviders ? "provider rows: " : "the deployment has no provider row",
                       rows);
    weir__free(ids);
    return rc;
}

/* true when the config row of `p` lists `role` in its "share_roles". */
static bool row_shares(const weir_host *h, const weir_plugin *p, const char *role) {
    const json_t *row = json_array_get(json_object_get(h->config, "plugins"), p->index);
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(row, "share_roles"), i, r) {
        if (strcmp(json_string_value(r), role) == 0)
            return true;
    }
    return false;
}

void weir__plugin_roles_text(const weir_plugin *p, char *buf, size_t size) {
    size_t len = 0;
    if (size)
        buf[0] = '\0';
    for (size_t k = 0; p && k < p->nroles && len < size; k++) {
        int n = snprintf(buf + len, size - len, "%s%s", k ? ", " : "", p->roles[k]);
        len += n > 0 ? (size_t)n : 0;
    }
}

/* true when row `p` fills `role` (api->plugin_role). */
static bool row_fills(const weir_plugin *p, const char *role) {
    for (size_t k = 0; k < p->nroles; k++)
        if (strcmp(p->roles[k], role) == 0)
            return true;
    return false;
}

/*
 * A row shares only the roles it fills: a "share_roles" entry that names
 * another is a typo or a stale key (two rows filling one role are refused
 * when the second declares it, weir__plugin_role).
 */
static int check_roles(const weir_host *h, weir_error *err) {
    for (size_t i = 0; i < h->nplugins; i++) {
        const weir_plugin *p = h->plugins[i];
        const json_t *row = json_array_get(json_object_get(h->config, "plugins"), p->index);
        size_t k;
        const json_t *r;
        json_array_foreach(json_object_get(row, "share_roles"), k, r) {
            if (row_fills(p, json_string_value(r)))
                continue;
            char roles[WEIR__ROLES_MAX * (WEIR__ROLE_LEN + 2)];
            weir__plugin_roles_text(p, roles, sizeof roles);
            return weir__err(err, WEIR_E_CONFIG, p->id, NULL,
                             "row '%s' (plugin %s): share_roles names role '%s', which the "
                             "plugin does not fill (its roles: %s)",
                             p->id, p->desc->name, json_string_value(r),
                             p->nroles ? roles : "none");
        }
    }
    return WEIR_OK;
}

int weir__host_create(const json_t *config, const weir__host_wiring *wiring, weir_host **out,
                      weir_error *err) {
    if (!config || !out || !wiring)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "weir_host_create: invalid argument");
    *out = NULL;
    if (!json_is_object(config))
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL, "the deployment config is not an object");
    const json_t *rows = json_object_get(config, "plugins");
    if (rows && !json_is_array(rows))
        return weir__err(err, WEIR_E_CONFIG, NULL, NULL, "'plugins' must be an array");
    weir_host *h = weir__calloc(1, sizeof *h);
    if (!h)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory creating the host");
    h->wiring = wiring;
    int rc = WEIR_OK;
    h->config = json_deep_copy(config);
    if (!h->config)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory copying the config");
    else if ((rc = weir__hooks_create(&h->hooks)) != WEIR_OK ||
             (rc = weir__tools_create(&h->tools)) != WEIR_OK ||
             (rc = weir__http_pool_create(&h->http)) != WEIR_OK)
        rc = weir__err(err, rc, NULL, NULL, "cannot create the host registries: %s",
                       weir_strerror(rc));
    else
        weir__tools_set_event_check(h->tools, event_owned, h);
    const json_t *row;
    size_t i;
    weir__provenance level = WEIR__PROVENANCE_DECISIONS;
    const json_t *prov = json_object_get(json_object_get(config, "session"), "provenance");
    if (rc == WEIR_OK && prov &&
        (!json_is_string(prov) || !provenance_parse(json_string_value(prov), &level)))
        rc = weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                       "session.provenance must be \"decisions\", \"all\" or \"off\"");
    if (rc == WEIR_OK)
        weir__hooks_set_provenance(h->hooks, level, wiring->sink, wiring->mark);
    load_cache lc = {WEIR__IDMAP_INIT, WEIR__IDMAP_INIT};
    json_array_foreach(json_object_get(h->config, "plugins"), i, row) {
        if (rc != WEIR_OK)
            break;
        if (json_is_true(json_object_get(row, "disabled")))
            continue;
        rc = load_row(h, row, i, &lc, err);
    }
    load_cache_free(&lc);
    if (rc == WEIR_OK)
        rc = check_namespaces(h, err);
    if (rc == WEIR_OK)
        rc = check_required(h, err);
    if (rc == WEIR_OK)
        rc = check_agent_provider(h, err);
    if (rc == WEIR_OK)
        rc = check_roles(h, err);
    if (rc == WEIR_OK)
        rc = start_telemetry(h, err);
    if (rc == WEIR_OK) {
        const char **ids = weir__calloc(h->nplugins + 1, sizeof *ids);
        if (!ids)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory freezing hooks");
        for (size_t k = 0; ids && k < h->nplugins; k++)
            ids[k] = h->plugins[k]->id;
        if (ids)
            rc = weir__hooks_freeze(h->hooks, (const char *const *)ids, h->nplugins, err);
        weir__free(ids);
    }
    if (rc != WEIR_OK) {
        host_free(h);
        return rc;
    }
    *out = h;
    return WEIR_OK;
}

const json_t *weir_host_config(const weir_host *host) {
    return host ? host->config : NULL;
}

/* `weir hooks`: the plugin, version and roles of row `id` ("" for an id no
 * row has). */
static void describe_row(const char *id, char *buf, size_t size, const void *ctx) {
    const weir_plugin *p = weir__host_plugin(ctx, id);
    if (!p || !size)
        return;
    size_t len = 0;
    int n = snprintf(buf, size, "%s %s", p->desc->name, p->desc->version ? p->desc->version : "?");
    len = n > 0 ? (size_t)n : 0;
    for (size_t k = 0; k < p->nroles && len < size; k++) {
        n = snprintf(buf + len, size - len, "%s%s", k ? "," : "  roles=", p->roles[k]);
        len += n > 0 ? (size_t)n : 0;
    }
}

int weir_host_dump_hooks(const weir_host *host, FILE *out) {
    if (!host || !out)
        return WEIR_E_INVAL;
    return weir__hooks_dump_rows(host->hooks, out, describe_row, host);
}

/* --- lookups ----------------------------------------------------------- */

const weir__provider_entry *weir__host_provider(const weir_host *host, const char *id) {
    if (!host || !id)
        return NULL;
    const weir__idmap_slot *s = weir__idmap_get(&host->provider_ids, id);
    return s ? &host->providers[s->num] : NULL;
}

weir__hooks *weir__host_hooks(const weir_host *host) {
    return host ? host->hooks : NULL;
}

weir__http_pool *weir__host_http_pool(const weir_host *host) {
    return host ? host->http : NULL;
}

weir__tools *weir__host_tools(const weir_host *host) {
    return host ? host->tools : NULL;
}

bool weir__host_event_type(const weir_host *host, const char *type, uint32_t *flags) {
    if (!host || !type)
        return false;
    for (size_t i = 0; i < host->ntypes; i++) {
        if (strcmp(host->types[i].type, type) == 0) {
            if (flags)
                *flags = host->types[i].flags;
            return true;
        }
    }
    return false;
}

void weir__host_agent_gone(const weir_host *host, const void *agent) {
    for (size_t i = 0; host && agent && i < host->nplugins; i++)
        weir__plugin_states_release(host->plugins[i], agent);
}

const json_t *weir__host_row_config(const weir_host *host, const char *id) {
    if (!host || !id)
        return NULL;
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(host->config, "plugins"), i, row) {
        const char *rid = json_string_value(json_object_get(row, "id"));
        if (rid && !strcmp(rid, id))
            return json_object_get(row, "config");
    }
    return NULL;
}

weir_plugin *weir__host_plugin(const weir_host *host, const char *id) {
    if (!host || !id)
        return NULL;
    const weir__idmap_slot *s = weir__idmap_get(&host->plugin_ids, id);
    return s ? s->ptr : NULL;
}

/* --- the api table: instance and registration ------------------------ */

const char *weir__plugin_id(const weir_plugin *self) {
    return self ? self->id : NULL;
}

void weir__plugin_set_data(weir_plugin *self, void *data) {
    if (self)
        self->data = data;
}

void *weir__plugin_data(const weir_plugin *self) {
    return self ? self->data : NULL;
}

const char *weir__log_level_name(weir_log_level level) {
    switch (level) {
    case WEIR_LOG_ERROR:
        return "error";
    case WEIR_LOG_WARN:
        return "warning";
    case WEIR_LOG_INFO:
        return "info";
    case WEIR_LOG_DEBUG:
        return "debug";
    }
    return "log";
}

/*
 * Lines above the threshold are dropped: $WEIR_LOG_LEVEL (error, warn, info,
 * debug; default warn), or debug when WEIR_TRACE is on.  Read on each call
 * (logging is rare), so tests and embedders may change it at run time.
 */
static weir_log_level log_threshold(void) {
    const char *lv = getenv("WEIR_LOG_LEVEL");
    const char *trace = getenv("WEIR_TRACE");
    if (lv && *lv) {
        if (!strcmp(lv, "error"))
            return WEIR_LOG_ERROR;
        if (!strcmp(lv, "info"))
            return WEIR_LOG_INFO;
        if (!strcmp(lv, "debug"))
            return WEIR_LOG_DEBUG;
        return WEIR_LOG_WARN;
    }
    return trace && *trace && strcmp(trace, "0") ? WEIR_LOG_DEBUG : WEIR_LOG_WARN;
}

void weir__plugin_log(const weir_plugin *self, weir_log_level level, const char *fmt, ...) {
    if (!fmt || level > log_threshold())
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* the plugin's text, escaped: one line that cannot drive the terminal */
    weir__warn("weir[%s]: %s: %s", self && self->id ? self->id : "?",
               weir__log_level_name(level), msg);
}

int weir__reg_open(weir_plugin *self, const char *what,
                   void (*log)(const weir_plugin *self, weir_log_level level, const char *fmt,
                               ...)) {
    if (!self || !log)
        return WEIR_E_INVAL;
    if (!self->registering) {
        log(self, WEIR_LOG_ERROR, "plugin '%s': %s called after init", self->id, what);
        return WEIR_E_TOO_LATE;
    }
    return WEIR_OK;
}

int weir__reg_fail(weir_plugin *self, const weir_error *e) {
    if (!self || !e)
        return WEIR_E_INVAL;
    if (self->reg_err.code == WEIR_OK)
        self->reg_err = *e;
    return e->code;
}

int weir__plugin_hook_register(weir_plugin *self, const char *hook, weir_hook_fn fn,
                               const weir_hook_opts *opts) {
    int rc = weir__reg_open(self, "hook_register", weir__plugin_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    if (!hook || !fn) {
        weir__err(&e, WEIR_E_INVAL, self->id, hook,
                  "hook_register: hook name and function are required");
        return weir__reg_fail(self, &e);
    }
    rc = weir__hooks_add(self->host->hooks, self, self->id, self->index, hook, fn, opts, &e);
    return rc == WEIR_OK ? WEIR_OK : weir__reg_fail(self, &e);
}

static bool valid_type_name(const char *type) {
    if (!type || !*type)
        return false;
    for (const char *c = type; *c; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-' || *c == '/' || *c == '.'))
            return false;
    }
    return true;
}

bool weir__namespace_reserved(const char *ns, size_t len) {
    for (size_t i = 0; i < weir__event_catalog_len; i++) {
        const char *t = weir__event_catalog[i].type;
        if (strlen(t) > len && t[len] == '/' && !strncmp(t, ns, len))
            return true;
    }
    for (size_t i = 0; i < weir__hook_catalog_len; i++) {
        const char *t = weir__hook_catalog[i].name;
        if (strlen(t) > len && t[len] == '/' && !strncmp(t, ns, len))
            return true;
    }
    return false;
}

/* Whether `self` owns namespace `ns` (`len` bytes): its name or a claim. */
static bool owns_namespace(const weir_plugin *self, const char *ns, size_t len) {
    const char *name = self->desc ? self->desc->name : NULL;
    if (name && strlen(name) == len && !strncmp(name, ns, len))
        return true;
    for (size_t i = 0; i < self->nnamespaces; i++)
        if (strlen(self->namespaces[i]) == len && !strncmp(self->namespaces[i], ns, len))
            return true;
    return false;
}

int weir__plugin_event_namespace_claim(weir_plugin *self, const char *ns) {
    int rc = weir__reg_open(self, "event_namespace_claim", weir__plugin_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    size_t len = ns ? strlen(ns) : 0;
    bool valid = len > 0 && len < sizeof self->namespaces[0] && valid_type_name(ns) &&
                 !strchr(ns, '/');
    if (!valid) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL,
                  "event_namespace_claim: '%s' is not a namespace ([a-z0-9_.-]+, at most %zu "
                  "bytes)",
                  ns ? ns : "(null)", sizeof self->namespaces[0] - 1);
        return weir__reg_fail(self, &e);
    }
    if (weir__namespace_reserved(ns, len)) {
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                  "event_namespace_claim: plugin '%s' (row '%s'): '%s' is a namespace of the "
                  "core",
                  self->desc->name, self->id, ns);
        return weir__reg_fail(self, &e);
    }
    if (owns_namespace(self, ns, len))
        return WEIR_OK;
    if (self->nnamespaces == WEIR__MAX_NAMESPACES) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL,
                  "event_namespace_claim: plugin '%s' (row '%s'): '%s': at most %d claims",
                  self->desc->name, self->id, ns, WEIR__MAX_NAMESPACES);
        return weir__reg_fail(self, &e);
    }
    memcpy(self->namespaces[self->nnamespaces++], ns, len + 1);
    return WEIR_OK;
}

int weir__reg_event_type(weir_plugin *self, weir__event_type **types, size_t *ntypes,
                         const char *type, uint32_t flags, const char *const *reserved,
                         size_t nreserved) {
    if (!self || !types || !ntypes)
        return WEIR_E_INVAL;
    weir_error e;
    weir_error_clear(&e);
    if (!valid_type_name(type)) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL, "event type '%s' is not [a-z0-9_./-]+",
                  type ? type : "(null)");
        return weir__reg_fail(self, &e);
    }
    if (flags & ~WEIR_EVENT_IGNORABLE) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL, "event type '%s': unknown flags 0x%x", type,
                  flags);
        return weir__reg_fail(self, &e);
    }
    /* the core's event types (core/format/event_catalog.c), live ones included */
    if (weir__event_find(type)) {
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL, "event type '%s' is a core event type",
                  type);
        return weir__reg_fail(self, &e);
    }
    for (size_t i = 0; i < nreserved; i++) {
        if (strcmp(reserved[i], type) == 0) {
            weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                      "event type '%s' is a core event type", type);
            return weir__reg_fail(self, &e);
        }
    }
    for (size_t i = 0; i < *ntypes; i++) {
        if (strcmp((*types)[i].type, type) == 0) {
            if ((*types)[i].owner->desc == self->desc)
                return WEIR_OK; /* a second row of the same plugin */
            weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                      "event type '%s' is registered by plugins '%s' and '%s'", type,
                      (*types)[i].owner->id, self->id);
            return weir__reg_fail(self, &e);
        }
    }
    /* <namespace>/<name>: the plugin's name or a namespace it claimed, never
     * the core's (docs/plugins.md, "Event types are namespaced") */
    const char *slash = strchr(type, '/');
    size_t nslen = slash ? (size_t)(slash - type) : 0;
    if (!slash || !nslen || !slash[1]) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL,
                  "plugin '%s' (row '%s'): event type '%s' is not <namespace>/<name>",
                  self->desc ? self->desc->name : "?", self->id, type);
        return weir__reg_fail(self, &e);
    }
    if (weir__namespace_reserved(type, nslen)) {
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                  "plugin '%s' (row '%s'): event type '%s': namespace '%.*s' is the core's",
                  self->desc ? self->desc->name : "?", self->id, type, (int)nslen, type);
        return weir__reg_fail(self, &e);
    }
    if (!owns_namespace(self, type, nslen)) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL,
                  "plugin '%s' (row '%s'): event type '%s' is outside its namespace '%s/' "
                  "(claim '%.*s' with event_namespace_claim first)",
                  self->desc ? self->desc->name : "?", self->id, type,
                  self->desc ? self->desc->name : "?", (int)nslen, type);
        return weir__reg_fail(self, &e);
    }
    weir__event_type *grown = weir__realloc(*types, (*ntypes + 1) * sizeof *grown);
    char *copy = weir__strdup(type);
    if (grown)
        *types = grown;
    if (!grown || !copy) {
        weir__free(copy);
        weir__err(&e, WEIR_E_NOMEM, self->id, NULL, "out of memory");
        return weir__reg_fail(self, &e);
    }
    /* Plugin events are always ignorable: a reader without the plugin can
     * still read the log (docs/session-log.md). */
    (*types)[(*ntypes)++] = (weir__event_type){copy, flags | WEIR_EVENT_IGNORABLE, self};
    return WEIR_OK;
}

int weir__plugin_event_type_register(weir_plugin *self, const char *type, uint32_t flags) {
    int rc = weir__reg_open(self, "event_type_register", weir__plugin_log);
    if (rc != WEIR_OK)
        return rc;
    return weir__reg_event_type(self, &self->host->types, &self->host->ntypes, type, flags,
                                NULL, 0);
}

int weir__reg_check_provider(weir_plugin *self, const weir_provider *provider) {
    if (!self)
        return WEIR_E_INVAL;
    if (provider &&
        provider->struct_size >= offsetof(weir_provider, stream) + sizeof provider->stream &&
        provider->prepare_call && provider->stream)
        return WEIR_OK;
    weir_error e;
    weir_error_clear(&e);
    weir__err(&e, WEIR_E_INVAL, self->id, NULL,
              "provider_register: a provider needs struct_size, prepare_call and stream");
    return weir__reg_fail(self, &e);
}

int weir__plugin_provider_register(weir_plugin *self, const weir_provider *provider,
                                   void *self_ptr) {
    int rc = weir__reg_open(self, "provider_register", weir__plugin_log);
    if (rc == WEIR_OK)
        rc = weir__reg_check_provider(self, provider);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    weir_host *h = self->host;
    if (weir__host_provider(h, self->id)) {
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                  "a provider is already registered under '%s'", self->id);
        return weir__reg_fail(self, &e);
    }
    if (h->nproviders == h->cap_providers) {
        size_t cap = h->cap_providers ? h->cap_providers * 2 : 4;
        weir__provider_entry *grown = weir__realloc(h->providers, cap * sizeof *grown);
        if (!grown) {
            weir__err(&e, WEIR_E_NOMEM, self->id, NULL, "out of memory");
            return weir__reg_fail(self, &e);
        }
        h->providers = grown;
        h->cap_providers = cap;
    }
    char *id = weir__strdup(self->id);
    if (!id || weir__idmap_put(&h->provider_ids, id, NULL, h->nproviders) != WEIR_OK) {
        weir__free(id);
        weir__err(&e, WEIR_E_NOMEM, self->id, NULL, "out of memory");
        return weir__reg_fail(self, &e);
    }
    weir__provider_entry *pe = &h->providers[h->nproviders++];
    *pe = (weir__provider_entry){.id = id, .self = self_ptr, .owner = self};
    size_t n = provider->struct_size < sizeof pe->vt ? provider->struct_size : sizeof pe->vt;
    memcpy(&pe->vt, provider, n);
    pe->vt.struct_size = sizeof pe->vt;
    return WEIR_OK;
}

int weir__plugin_provider_require(weir_plugin *self, const char *provider, const char *what) {
    int rc = weir__reg_open(self, "provider_require", weir__plugin_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    if (!provider || !*provider) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL, "provider_require: no provider id");
        return weir__reg_fail(self, &e);
    }
    weir_host *h = self->host;
    if (!h->required)
        h->required = json_array();
    json_t *r = json_pack("{s:s, s:s, s:s}", "row", self->id, "provider", provider, "what",
                          what && *what ? what : "provider");
    if (!h->required || !r || json_array_append_new(h->required, r) != 0) {
        weir__err(&e, WEIR_E_NOMEM, self->id, NULL, "out of memory");
        return weir__reg_fail(self, &e);
    }
    return WEIR_OK;
}

int weir__plugin_tool_register(weir_plugin *self, const weir_tool *tool) {
    int rc = weir__reg_open(self, "tool_register", weir__plugin_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    if (!tool) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL, "tool_register: tool is NULL");
        return weir__reg_fail(self, &e);
    }
    rc = weir__tools_add(self->host->tools, self->id, tool, &e);
    return rc == WEIR_OK ? WEIR_OK : weir__reg_fail(self, &e);
}

int weir__plugin_role(weir_plugin *self, const char *role) {
    int rc = weir__reg_open(self, "plugin_role", weir__plugin_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    if (!weir__role_name_valid(role)) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL,
                  "plugin_role: '%.64s' is not a role name ([a-z0-9][a-z0-9._-]*, at most 31 "
                  "characters)",
                  role ? role : "(null)");
        return weir__reg_fail(self, &e);
    }
    if (row_fills(self, role))
        return WEIR_OK;
    if (self->nroles == WEIR__ROLES_MAX) {
        weir__err(&e, WEIR_E_LIMIT, self->id, NULL,
                  "plugin_role: role '%s': a row fills at most %d roles", role,
                  WEIR__ROLES_MAX);
        return weir__reg_fail(self, &e);
    }
    weir_host *h = self->host; /* NULL for a test kit row: no other row */
    const weir__idmap_slot *s = h ? weir__idmap_get(&h->roles, role) : NULL;
    const weir_plugin *a = s ? s->ptr : NULL;
    if (a && !(row_shares(h, a, role) && row_shares(h, self, role))) {
        weir__err(&e, WEIR_E_CONFIG, self->id, NULL,
                  "role '%s' is filled by two rows: '%s' (plugin %s %s) and '%s' (plugin %s "
                  "%s); remove one, or give both rows \"share_roles\": [\"%s\"] to run both",
                  role, a->id, a->desc->name, a->desc->version ? a->desc->version : "?",
                  self->id, self->desc->name, self->desc->version ? self->desc->version : "?",
                  role);
        return weir__reg_fail(self, &e);
    }
    char *copy = self->roles[self->nroles];
    snprintf(copy, WEIR__ROLE_LEN, "%s", role);
    if (h && !a && weir__idmap_put(&h->roles, copy, self, 0) != WEIR_OK) {
        weir__err(&e, WEIR_E_NOMEM, self->id, NULL, "out of memory");
        return weir__reg_fail(self, &e);
    }
    self->nroles++;
    return WEIR_OK;
}

/* A failure of tool_update/tool_remove: the deployment's during init, logged after. */
static int tool_change_failed(weir_plugin *self, const weir_error *e) {
    if (self->registering)
        return weir__reg_fail(self, e);
    weir__plugin_log(self, WEIR_LOG_ERROR, "%s", e->text);
    return e->code;
}

int weir__plugin_tool_update(weir_plugin *self, const weir_tool *tool) {
    if (!self)
        return WEIR_E_INVAL;
    weir_error e;
    weir_error_clear(&e);
    int rc = weir__tools_update(self->host->tools, self->id, tool, &e);
    return rc == WEIR_OK ? WEIR_OK : tool_change_failed(self, &e);
}

int weir__plugin_tool_remove(weir_plugin *self, const char *name) {
    if (!self)
        return WEIR_E_INVAL;
    weir_error e;
    weir_error_clear(&e);
    int rc = weir__tools_remove(self->host->tools, self->id, name, &e);
    return rc == WEIR_OK ? WEIR_OK : tool_change_failed(self, &e);
}
