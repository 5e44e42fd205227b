/*
 * core/hooks.c - hook chains (DESIGN §4).
 *
 * One chain per catalog entry.  Listeners are collected while plugins run
 * their init, ordered once by weir__hooks_freeze and read-only afterwards.
 * An invocation keeps all its state in a weir_call on the invoker's stack,
 * so frozen chains may be invoked from any number of threads at once.
 *
 * The waterfall is a recursive continuation over the chain index: hop i runs
 * listener i; weir_next() from inside it runs hop i+1; the hop after the last
 * listener is the core default.  Each hop records whether its listener called
 * weir_call_fail(), so a failure can be attributed to the right plugin as it
 * propagates outward.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks.h"
#include "schema.h"

typedef struct listener {
    weir_plugin *owner; /* borrowed; only compared */
    char *id;           /* owner's plugin id, owned */
    size_t index;       /* owner's position in the config */
    size_t seq;         /* registration number (ties) */
    int order;          /* WEIR_ORDER_* */
    weir_hook_fn fn;
    void *user_data;
    char **before; /* NULL-terminated plugin ids, owned, or NULL */
    char **after;
    bool borrowed; /* a derived chain's copy of a base listener: frees nothing */
} listener;

typedef struct chain {
    listener *v;
    size_t n, cap;
} chain;

struct weir__hooks {
    const weir__hooks *base; /* derived (one agent's chains): the host's, else NULL */
    chain *chains;    /* one per catalog entry, same index */
    json_t **schemas; /* parsed result_schema per entry, or NULL; a derived set's are the base's */
    size_t seq;
    bool frozen;
    FILE *trace; /* WEIR_TRACE destination, or NULL */
};

/* One hop (a listener or the core default) of an invocation. */
typedef struct hop {
    bool failed;      /* weir_call_fail() was called during this hop */
    bool called_next; /* weir_next() was called during this hop */
    char msg[512];    /* weir_call_fail()'s message */
} hop;

struct weir_call {
    const weir__hooks *h;
    const weir__hook_def *def;
    const chain *c;
    const json_t *args;
    weir_agent *agent;
    weir_signal *signal;
    weir__hook_default_fn dflt;
    void *dflt_ctx;
    size_t pos; /* running hop: a listener index, or c->n for the default */
    hop *cur;
    /* the failure propagating outward (cleared when a hop returns a value) */
    bool failed;
    const char *fail_id; /* plugin id (borrowed from the chain), NULL = core default */
    char fail_msg[512];
};

#define DEFAULT_LABEL "(default)"

/* ------------------------------------------------------------------------ */
/* create / destroy / add                                                    */
/* ------------------------------------------------------------------------ */

static void free_list(char **list) {
    for (size_t i = 0; list && list[i]; i++)
        weir__free(list[i]);
    weir__free(list);
}

static void listener_free(listener *l) {
    if (l->borrowed)
        return;
    weir__free(l->id);
    free_list(l->before);
    free_list(l->after);
}

/* Copy a NULL-terminated id list; *out = NULL for an empty list. */
static int copy_list(const char *const *list, char ***out) {
    *out = NULL;
    size_t n = 0;
    while (list && list[n])
        n++;
    if (n == 0)
        return WEIR_OK;
    char **copy = weir__calloc(n + 1, sizeof *copy);
    if (!copy)
        return WEIR_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        copy[i] = weir__strdup(list[i]);
        if (!copy[i]) {
            free_list(copy);
            return WEIR_E_NOMEM;
        }
    }
    *out = copy;
    return WEIR_OK;
}

int weir__hooks_create(weir__hooks **out) {
    if (!out)
        return WEIR_E_INVAL;
    *out = NULL;
    weir__hooks *h = weir__calloc(1, sizeof *h);
    if (!h)
        return WEIR_E_NOMEM;
    h->chains = weir__calloc(weir__hook_catalog_len, sizeof *h->chains);
    h->schemas = weir__calloc(weir__hook_catalog_len, sizeof *h->schemas);
    if (!h->chains || !h->schemas) {
        weir__hooks_destroy(h);
        return WEIR_E_NOMEM;
    }
    for (size_t k = 0; k < weir__hook_catalog_len; k++) {
        const char *text = weir__hook_catalog[k].result_schema;
        if (!text)
            continue;
        /* the catalog's schemas are tested to parse: failing here is memory */
        h->schemas[k] = json_loads(text, 0, NULL);
        if (!h->schemas[k]) {
            weir__hooks_destroy(h);
            return WEIR_E_NOMEM;
        }
    }
    const char *t = getenv("WEIR_TRACE");
    h->trace = t && *t && strcmp(t, "0") != 0 ? stderr : NULL;
    *out = h;
    return WEIR_OK;
}

void weir__hooks_destroy(weir__hooks *h) {
    if (!h)
        return;
    for (size_t k = 0; h->chains && k < weir__hook_catalog_len; k++) {
        for (size_t i = 0; i < h->chains[k].n; i++)
            listener_free(&h->chains[k].v[i]);
        weir__free(h->chains[k].v);
    }
    for (size_t k = 0; !h->base && h->schemas && k < weir__hook_catalog_len; k++)
        json_decref(h->schemas[k]);
    weir__free(h->chains);
    if (!h->base)
        weir__free(h->schemas);
    weir__free(h);
}

void weir__hooks_set_trace(weir__hooks *h, FILE *out) {
    if (h)
        h->trace = out;
}

int weir__hooks_add(weir__hooks *h, weir_plugin *owner, const char *owner_id,
                    size_t owner_index, const char *hook, weir_hook_fn fn,
                    const weir_hook_opts *opts, weir_error *err) {
    if (!h || !owner_id || !hook || !fn)
        return weir__err(err, WEIR_E_INVAL, owner_id, hook,
                         "hook registration: hooks, plugin id, hook name and function are required");
    const weir__hook_def *def = weir__hook_find(hook);
    if (!def)
        return weir__err(err, WEIR_E_NOT_FOUND, owner_id, hook,
                         "plugin %s: unknown hook \"%s\" (see `weir hooks --catalog`)", owner_id,
                         hook);
    if (h->frozen)
        return weir__err(err, WEIR_E_TOO_LATE, owner_id, hook,
                         "plugin %s: cannot register on hook %s after the chains are frozen "
                         "(only during init)",
                         owner_id, hook);
    weir_hook_opts o = WEIR_HOOK_OPTS_INIT;
    if (opts) {
        if (opts->struct_size < sizeof opts->struct_size)
            return weir__err(err, WEIR_E_INVAL, owner_id, hook,
                             "plugin %s: hook %s: weir_hook_opts.struct_size is %u", owner_id,
                             hook, (unsigned)opts->struct_size);
        /* an older, shorter struct keeps the defaults of the fields it lacks;
         * a field only partly inside struct_size is not read (half a pointer) */
#define HAS_FIELD(f) (opts->struct_size >= offsetof(weir_hook_opts, f) + sizeof opts->f)
        if (HAS_FIELD(order))
            o.order = opts->order;
        if (HAS_FIELD(before))
            o.before = opts->before;
        if (HAS_FIELD(after))
            o.after = opts->after;
        if (HAS_FIELD(user_data))
            o.user_data = opts->user_data;
#undef HAS_FIELD
    }
    if (h->base && ((o.before && o.before[0]) || (o.after && o.after[0])))
        return weir__err(err, WEIR_E_INVAL, owner_id, hook,
                         "%s: hook %s: an agent's own listeners take no before/after (they run "
                         "around the deployment's chain: WEIR_ORDER_FIRST outside it, else "
                         "inside it)",
                         owner_id, hook);
    chain *c = &h->chains[def - weir__hook_catalog];
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        listener *v = weir__realloc(c->v, cap * sizeof *v);
        if (!v)
            return weir__err(err, WEIR_E_NOMEM, owner_id, hook, "out of memory");
        c->v = v;
        c->cap = cap;
    }
    listener l = {.owner = owner,
                  .id = weir__strdup(owner_id),
                  .index = owner_index,
                  .order = o.order,
                  .fn = fn,
                  .user_data = o.user_data};
    if (!l.id || copy_list(o.before, &l.before) || copy_list(o.after, &l.after)) {
        listener_free(&l);
        return weir__err(err, WEIR_E_NOMEM, owner_id, hook, "out of memory");
    }
    l.seq = h->seq++;
    c->v[c->n++] = l;
    return WEIR_OK;
}

void weir__hooks_remove_owner(weir__hooks *h, const weir_plugin *owner) {
    if (!h || h->frozen)
        return;
    for (size_t k = 0; k < weir__hook_catalog_len; k++) {
        chain *c = &h->chains[k];
        size_t kept = 0;
        for (size_t i = 0; i < c->n; i++) {
            if (c->v[i].owner == owner)
                listener_free(&c->v[i]);
            else
                c->v[kept++] = c->v[i];
        }
        c->n = kept;
    }
}

size_t weir__hooks_count(const weir__hooks *h, const char *hook) {
    const weir__hook_def *def = h ? weir__hook_find(hook) : NULL;
    return def ? h->chains[def - weir__hook_catalog].n : 0;
}

/* ------------------------------------------------------------------------ */
/* freeze: ordering                                                          */
/* ------------------------------------------------------------------------ */

static bool known_id(const char *id, const char *const *ids, size_t nids) {
    for (size_t i = 0; i < nids; i++)
        if (ids[i] && strcmp(ids[i], id) == 0)
            return true;
    return false;
}

static int check_names(const char *hook, const listener *l, const char *const *ids,
                       size_t nids, weir_error *err) {
    for (int which = 0; which < 2; which++) {
        char **list = which ? l->after : l->before;
        for (size_t i = 0; list && list[i]; i++)
            if (!known_id(list[i], ids, nids))
                return weir__err(err, WEIR_E_HOOK_ORDER, l->id, hook,
                                 "hook %s: plugin %s asks to run %s unknown plugin \"%s\"",
                                 hook, l->id, which ? "after" : "before", list[i]);
    }
    return WEIR_OK;
}

/* Stable key order: placement, then config position, then registration. */
static int key_cmp(const listener *a, const listener *b) {
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static bool names(char **list, const char *id) {
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(list[i], id) == 0)
            return true;
    return false;
}

/* Find a cycle among the unplaced nodes and describe it ("a -> b -> a"). */
static int cycle_error(const char *hook, const chain *c, const unsigned char *adj,
                       const unsigned char *done, size_t *walk, size_t *seen, weir_error *err) {
    size_t n = c->n, len = 0, cur = 0;
    while (done[cur])
        cur++;
    for (size_t i = 0; i < n; i++)
        seen[i] = SIZE_MAX;
    /* walk predecessors: every unplaced node has an unplaced predecessor */
    while (seen[cur] == SIZE_MAX) {
        seen[cur] = len;
        walk[len++] = cur;
        size_t p = 0;
        while (done[p] || !adj[p * n + cur])
            p++;
        cur = p;
    }
    /*
     * walk[first..len-1] is the cycle against the edge direction; print it
     * forwards (walk[len-1] -> walk[len-2] -> ...), starting at the member
     * that comes first in the stable order, and close the loop.
     */
    size_t first = seen[cur], cyc = len - first, start = first;
    for (size_t k = first; k < len; k++)
        if (walk[k] < walk[start])
            start = k;
    char text[sizeof err->text];
    size_t at = 0;
    for (size_t step = 0; step <= cyc; step++) {
        size_t k = first + (start - first + cyc - step % cyc) % cyc;
        int w = snprintf(text + at, sizeof text - at, "%s%s", step ? " -> " : "",
                         c->v[walk[k]].id);
        if (w > 0)
            at = (size_t)w >= sizeof text - at ? sizeof text - 1 : at + (size_t)w;
    }
    return weir__err(err, WEIR_E_HOOK_ORDER, c->v[walk[start]].id, hook,
                     "hook %s: before/after constraints form a cycle: %s", hook, text);
}

static int order_chain(chain *c, const char *hook, const char *const *ids, size_t nids,
                       weir_error *err) {
    size_t n = c->n;
    for (size_t i = 0; i < n; i++)
        if (check_names(hook, &c->v[i], ids, nids, err))
            return WEIR_E_HOOK_ORDER;
    /* insertion sort: stable, and chains are short */
    for (size_t i = 1; i < n; i++) {
        listener x = c->v[i];
        size_t j = i;
        for (; j > 0 && key_cmp(&c->v[j - 1], &x) > 0; j--)
            c->v[j] = c->v[j - 1];
        c->v[j] = x;
    }
    if (n == 0)
        return WEIR_OK;
    /* adj[i*n+j]: listener i must run before listener j */
    unsigned char *adj = weir__calloc(n * n + n, 1);
    size_t *idx = weir__calloc(3 * n, sizeof *idx);
    listener *tmp = weir__calloc(n, sizeof *tmp);
    int rc = WEIR_OK;
    if (!adj || !idx || !tmp) {
        rc = weir__err(err, WEIR_E_NOMEM, NULL, hook, "out of memory");
        goto out;
    }
    unsigned char *done = adj + n * n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            if (names(c->v[i].before, c->v[j].id))
                adj[i * n + j] = 1;
            if (names(c->v[i].after, c->v[j].id))
                adj[j * n + i] = 1;
        }
    /*
     * Kahn's algorithm that always places the earliest (in the stable
     * order) listener whose predecessors are all placed, as APR's tsort
     * does: the lexicographically smallest order that satisfies the
     * constraints, so a listener moves only when a constraint forces it.
     */
    for (size_t placed = 0; placed < n; placed++) {
        size_t pick = n;
        for (size_t j = 0; j < n && pick == n; j++) {
            if (done[j])
                continue;
            bool free_ = true;
            for (size_t i = 0; i < n && free_; i++)
                free_ = done[i] || !adj[i * n + j];
            if (free_)
                pick = j;
        }
        if (pick == n) {
            rc = cycle_error(hook, c, adj, done, idx + n, idx + 2 * n, err);
            goto out;
        }
        done[pick] = 1;
        idx[placed] = pick;
    }
    for (size_t k = 0; k < n; k++)
        tmp[k] = c->v[idx[k]];
    memcpy(c->v, tmp, n * sizeof *tmp);
out:
    weir__free(adj);
    weir__free(idx);
    weir__free(tmp);
    return rc;
}

int weir__hooks_freeze(weir__hooks *h, const char *const *ids, size_t nids, weir_error *err) {
    if (!h || (!ids && nids))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "hooks freeze: invalid arguments");
    if (h->frozen)
        return weir__err(err, WEIR_E_STATE, NULL, NULL, "hook chains are already frozen");
    for (size_t k = 0; k < weir__hook_catalog_len; k++) {
        int rc = order_chain(&h->chains[k], weir__hook_catalog[k].name, ids, nids, err);
        if (rc)
            return rc;
    }
    h->frozen = true;
    return WEIR_OK;
}

int weir__hooks_derive(const weir__hooks *base, weir__hooks **out) {
    if (!out)
        return WEIR_E_INVAL;
    *out = NULL;
    if (!base || !base->frozen || base->base)
        return WEIR_E_INVAL;
    weir__hooks *h = weir__calloc(1, sizeof *h);
    if (!h)
        return WEIR_E_NOMEM;
    h->base = base;
    h->schemas = base->schemas;
    h->trace = base->trace;
    h->chains = weir__calloc(weir__hook_catalog_len, sizeof *h->chains);
    if (!h->chains) {
        weir__hooks_destroy(h);
        return WEIR_E_NOMEM;
    }
    *out = h;
    return WEIR_OK;
}

/* Sort an agent's own listeners of one hook by (order, registration). */
static int own_cmp(const void *pa, const void *pb) {
    const listener *a = pa, *b = pb;
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int weir__hooks_freeze_derived(weir__hooks *h, weir_error *err) {
    if (!h || !h->base)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "hooks freeze: not an agent's chains");
    if (h->frozen)
        return weir__err(err, WEIR_E_STATE, NULL, NULL, "hook chains are already frozen");
    /* every new array first, so that a failure changes nothing */
    listener **merged = weir__calloc(weir__hook_catalog_len, sizeof *merged);
    bool oom = !merged;
    for (size_t k = 0; !oom && k < weir__hook_catalog_len; k++) {
        size_t n = h->chains[k].n + h->base->chains[k].n;
        if (n && !(merged[k] = weir__malloc(n * sizeof **merged)))
            oom = true;
    }
    if (oom) {
        for (size_t k = 0; merged && k < weir__hook_catalog_len; k++)
            weir__free(merged[k]);
        weir__free(merged);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
    }
    for (size_t k = 0; k < weir__hook_catalog_len; k++) {
        chain *own = &h->chains[k];
        const chain *base = &h->base->chains[k];
        if (own->n > 1)
            qsort(own->v, own->n, sizeof *own->v, own_cmp);
        size_t n = 0, i = 0;
        for (; i < own->n && own->v[i].order < 0; i++) /* WEIR_ORDER_FIRST: outermost */
            merged[k][n++] = own->v[i];
        for (size_t j = 0; j < base->n; j++) {
            merged[k][n] = base->v[j];
            merged[k][n++].borrowed = true;
        }
        for (; i < own->n; i++) /* the rest: innermost, next to the core default */
            merged[k][n++] = own->v[i];
        weir__free(own->v);
        own->v = merged[k];
        own->n = own->cap = n;
    }
    weir__free(merged);
    h->frozen = true;
    return WEIR_OK;
}

static const char *order_name(int order, char *buf, size_t size) {
    switch (order) {
    case WEIR_ORDER_FIRST:
        return "first";
    case WEIR_ORDER_MIDDLE:
        return "middle";
    case WEIR_ORDER_LAST:
        return "last";
    default:
        snprintf(buf, size, "order=%d", order);
        return buf;
    }
}

static void dump_list(FILE *out, const char *label, char **list) {
    fprintf(out, " %s=", label);
    if (!list || !list[0])
        fputs("-", out);
    for (size_t i = 0; list && list[i]; i++)
        fprintf(out, "%s%s", i ? "," : "", list[i]);
}

int weir__hooks_dump(const weir__hooks *h, FILE *out) {
    if (!h || !out)
        return WEIR_E_INVAL;
    for (size_t k = 0; k < weir__hook_catalog_len; k++) {
        const chain *c = &h->chains[k];
        if (!c->n)
            continue;
        fprintf(out, "%s (%s)\n", weir__hook_catalog[k].name,
                weir__hook_mode_name(weir__hook_catalog[k].mode));
        for (size_t i = 0; i < c->n; i++) {
            char buf[32];
            fprintf(out, "  %zu. %s  [%s]", i + 1, c->v[i].id,
                    order_name(c->v[i].order, buf, sizeof buf));
            dump_list(out, "before", c->v[i].before);
            dump_list(out, "after", c->v[i].after);
            fputc('\n', out);
        }
    }
    return ferror(out) ? WEIR_E_IO : WEIR_OK;
}

/* ------------------------------------------------------------------------ */
/* invocation                                                                */
/* ------------------------------------------------------------------------ */

static void set_failure(weir_call *call, const char *id, const char *msg) {
    call->failed = true;
    call->fail_id = id;
    snprintf(call->fail_msg, sizeof call->fail_msg, "%s", msg);
}

/* Run hop `i` (listener i, or the default when i == chain length). */
static json_t *run_hop(weir_call *call, size_t i) {
    hop here = {.failed = false};
    hop *outer = call->cur;
    size_t outer_pos = call->pos;
    call->cur = &here;
    call->pos = i;
    call->failed = false; /* a previous run of this hop was consumed by the caller */
    const listener *l = i < call->c->n ? &call->c->v[i] : NULL;
    uint64_t t0 = call->h->trace ? weir__mono_us() : 0;

    json_t *r;
    if (l)
        r = l->fn(call, call->args, l->user_data);
    else
        r = call->dflt ? call->dflt(call, call->args, call->dflt_ctx) : json_null();

    const char *id = l ? l->id : NULL;
    const char *outcome;
    if (r) {
        call->failed = false; /* a value is success, or recovery from an inner failure */
        outcome = call->def->mode != WEIR__HOOK_WATERFALL || !l ? "ok"
                  : here.called_next                            ? "next"
                                                                : "short-circuit";
    } else if (here.failed) {
        set_failure(call, id, here.msg);
        outcome = "failed";
    } else if (call->def->mode == WEIR__HOOK_EMIT) {
        outcome = "ok"; /* emit results are ignored; only weir_call_fail() fails */
    } else {
        if (!call->failed) /* else an inner failure passes through */
            set_failure(call, id, "returned no result");
        outcome = "failed";
    }
    if (call->h->trace)
        fprintf(call->h->trace, "weir-trace: %s %s plugin=%s outcome=%s us=%llu\n",
                call->def->name, weir__hook_mode_name(call->def->mode),
                id ? id : DEFAULT_LABEL, outcome,
                (unsigned long long)(weir__mono_us() - t0));
    call->cur = outer;
    call->pos = outer_pos;
    return r;
}

static json_t *invoke_failed(const weir_call *call, weir_error *err) {
    const char *hook = call->def->name;
    if (call->fail_id)
        weir__err(err, WEIR_E_HOOK_FAILED, call->fail_id, hook, "hook %s: plugin %s failed: %s",
                  hook, call->fail_id, call->fail_msg);
    else
        weir__err(err, WEIR_E_HOOK_FAILED, NULL, hook, "hook %s: core default failed: %s", hook,
                  call->fail_msg);
    return NULL;
}

json_t *weir__hook_invoke(const weir__hooks *h, const char *hook, weir_agent *agent,
                          weir_signal *signal, const json_t *args, weir__hook_default_fn dflt,
                          void *dflt_ctx, weir_error *err) {
    if (!h || !hook || !args) {
        weir__err(err, WEIR_E_INVAL, NULL, hook, "hook invoke: hooks, hook name and args are required");
        return NULL;
    }
    const weir__hook_def *def = weir__hook_find(hook);
    if (!def) {
        weir__err(err, WEIR_E_NOT_FOUND, NULL, hook, "unknown hook \"%s\"", hook);
        return NULL;
    }
    if (!h->frozen) {
        weir__err(err, WEIR_E_STATE, NULL, hook, "hook %s: chains are not frozen yet", hook);
        return NULL;
    }
    size_t k = (size_t)(def - weir__hook_catalog);
    weir_call call = {.h = h,
                      .def = def,
                      .c = &h->chains[k],
                      .args = args,
                      .agent = agent,
                      .signal = signal,
                      .dflt = dflt,
                      .dflt_ctx = dflt_ctx};
    const chain *c = call.c;

    if (def->mode == WEIR__HOOK_EMIT) {
        for (size_t i = 0; i < c->n; i++) {
            json_t *r = run_hop(&call, i);
            if (r)
                json_decref(r);
            else if (call.failed)
                fprintf(stderr, "weir: hook %s: plugin %s failed: %s\n", hook, c->v[i].id,
                        call.fail_msg);
        }
        return json_null();
    }
    if (def->mode == WEIR__HOOK_SERIAL) {
        for (size_t i = 0; i < c->n; i++) {
            json_t *r = run_hop(&call, i);
            if (!r)
                return invoke_failed(&call, err);
            json_decref(r);
        }
        return json_null();
    }

    json_t *r = run_hop(&call, 0);
    if (!r)
        return invoke_failed(&call, err);
    char why[512];
    if (h->schemas[k] && weir__schema_validate(h->schemas[k], r, why, sizeof why)) {
        json_decref(r);
        if (c->n)
            weir__err(err, WEIR_E_HOOK_RESULT, c->v[0].id, hook,
                      "hook %s: plugin %s returned an invalid result: %s", hook, c->v[0].id, why);
        else
            weir__err(err, WEIR_E_HOOK_RESULT, NULL, hook,
                      "hook %s: core default returned an invalid result: %s", hook, why);
        return NULL;
    }
    return r;
}

json_t *weir__call_next(weir_call *call) {
    if (!call || !call->cur)
        return NULL;
    if (call->def->mode != WEIR__HOOK_WATERFALL) {
        weir__call_fail(call, "weir_next() is only valid in waterfall hooks (%s is %s)",
                        call->def->name, weir__hook_mode_name(call->def->mode));
        return NULL;
    }
    if (call->pos >= call->c->n) {
        weir__call_fail(call, "the core default cannot call weir_next()");
        return NULL;
    }
    call->cur->called_next = true;
    return run_hop(call, call->pos + 1);
}

void weir__call_fail(weir_call *call, const char *fmt, ...) {
    if (!call || !call->cur)
        return;
    call->cur->failed = true;
    if (!fmt) {
        snprintf(call->cur->msg, sizeof call->cur->msg, "failed");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call->cur->msg, sizeof call->cur->msg, fmt, ap);
    va_end(ap);
}

weir_agent *weir__call_agent(const weir_call *call) { return call ? call->agent : NULL; }

weir_signal *weir__call_signal(const weir_call *call) { return call ? call->signal : NULL; }
