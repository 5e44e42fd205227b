/*
 * core/runtime/hooks.c - hook chains (docs/hooks.md).
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
#include "idmap.h"
#include "schema.h"

/* A row's fault policy and its failure count (shared by every listener of
 * the row, in the host's chains and every agent's; atomics). */
typedef struct row_state {
    char *id; /* owned */
    weir__hook_policy pol;
    unsigned failures; /* consecutive failures (atomic) */
    bool quarantined;  /* atomic; never cleared */
} row_state;

typedef struct listener {
    weir_plugin *owner; /* borrowed; only compared */
    row_state *rs;      /* the row's policy (borrowed from the host's chains), or NULL */
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
    /* provenance and fault policy (the host's; a derived set copies them) */
    weir__provenance level;
    weir__hook_sink_fn sink;
    weir__hook_mark_fn mark;
    bool timed;               /* a listener hop's time is measured */
    row_state **rows;         /* rows with a policy (owned by the host's chains) */
    size_t nrows;
    const weir__hook_def *turn_stopping, *post_execute;
};

/* One hop (a listener or the core default) of an invocation. */
typedef struct hop {
    bool failed;      /* weir_call_fail() was called during this hop */
    bool called_next; /* weir_next() was called during this hop */
    const json_t *next_result; /* what the last weir_next() returned (identity only) */
    json_t *held;     /* a reference on it, kept until the hop ends (no address reuse) */
    size_t next_extra; /* tools/post-execute: its additional_contexts length */
    uint64_t inner_us; /* time spent in weir_next() */
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
    const char *author; /* who made the last hop's result (weir__hook_invoke_author) */
    uint64_t last_us;   /* the last hop's total time (timed chains) */
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
        h->schemas[k] = weir__json_loads(text, 0, NULL);
        if (!h->schemas[k]) {
            weir__hooks_destroy(h);
            return WEIR_E_NOMEM;
        }
    }
    const char *t = getenv("WEIR_TRACE");
    h->trace = t && *t && strcmp(t, "0") != 0 ? stderr : NULL;
    h->turn_stopping = weir__hook_find("agent/turn-stopping");
    h->post_execute = weir__hook_find("tools/post-execute");
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
    for (size_t r = 0; !h->base && r < h->nrows; r++) {
        weir__free(h->rows[r]->id);
        weir__free(h->rows[r]);
    }
    if (!h->base)
        weir__free(h->rows);
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
    const weir__hooks *host = h->base ? h->base : h;
    for (size_t r = 0; r < host->nrows && !l.rs; r++)
        if (strcmp(host->rows[r]->id, owner_id) == 0)
            l.rs = host->rows[r];
    c->v[c->n++] = l;
    return WEIR_OK;
}

void weir__hooks_set_provenance(weir__hooks *h, weir__provenance level, weir__hook_sink_fn sink,
                                weir__hook_mark_fn mark) {
    if (!h)
        return;
    h->level = sink ? level : WEIR__PROVENANCE_OFF;
    h->sink = sink;
    h->mark = mark;
    h->timed = h->timed || h->level != WEIR__PROVENANCE_OFF;
}

int weir__hooks_set_policy(weir__hooks *h, const char *row, const weir__hook_policy *policy) {
    if (!h || !row || !policy || h->base)
        return WEIR_E_INVAL;
    if (h->frozen)
        return WEIR_E_TOO_LATE;
    if (!policy->skip && !policy->max_failures && !policy->budget_ms)
        return WEIR_OK; /* the default: no state, the fast path */
    row_state **rows = weir__realloc(h->rows, (h->nrows + 1) * sizeof *rows);
    if (!rows)
        return WEIR_E_NOMEM;
    h->rows = rows;
    row_state *rs = weir__calloc(1, sizeof *rs);
    if (!rs || !(rs->id = weir__strdup(row))) {
        weir__free(rs);
        return WEIR_E_NOMEM;
    }
    rs->pol = *policy;
    h->rows[h->nrows++] = rs;
    h->timed = h->timed || policy->budget_ms;
    for (size_t k = 0; k < weir__hook_catalog_len; k++)
        for (size_t i = 0; i < h->chains[k].n; i++)
            if (strcmp(h->chains[k].v[i].id, row) == 0)
                h->chains[k].v[i].rs = rs;
    return WEIR_OK;
}

bool weir__hooks_quarantined(const weir__hooks *h, const char *row) {
    const weir__hooks *host = h && h->base ? h->base : h;
    for (size_t r = 0; host && row && r < host->nrows; r++)
        if (strcmp(host->rows[r]->id, row) == 0)
            return __atomic_load_n(&host->rows[r]->quarantined, __ATOMIC_ACQUIRE);
    return false;
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

static int check_names(const char *hook, const listener *l, const weir__idmap *known,
                       weir_error *err) {
    for (int which = 0; which < 2; which++) {
        char **list = which ? l->after : l->before;
        for (size_t i = 0; list && list[i]; i++)
            if (!weir__idmap_get(known, list[i]))
                return weir__err(err, WEIR_E_HOOK_ORDER, l->id, hook,
                                 "hook %s: plugin %s asks to run %s unknown plugin \"%s\"",
                                 hook, l->id, which ? "after" : "before", list[i]);
    }
    return WEIR_OK;
}

/* Stable key order: placement, then config position, then registration
 * (unique, so this is a total order and qsort is deterministic). */
static int key_cmp(const void *pa, const void *pb) {
    const listener *a = pa, *b = pb;
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    if (a->index != b->index)
        return a->index < b->index ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/*
 * The before/after constraints of a chain as a graph over its positions in
 * the stable order: an edge i -> j means listener i runs before listener j.
 * Both directions are kept in CSR form (succ of i: succ[soff[i]..soff[i+1]),
 * pred of j likewise) with each node's count of predecessors not yet placed.
 */
typedef struct graph {
    size_t *soff, *succ, *poff, *pred, *indeg;
} graph;

static void graph_free(graph *g) {
    weir__free(g->soff);
    weir__free(g->succ);
    weir__free(g->poff);
    weir__free(g->pred);
    weir__free(g->indeg);
}

typedef struct edge {
    size_t from, to;
} edge;

/*
 * The constraints of chain `c` (sorted) as edges into *out (new, weir__free;
 * *nout of them): listener i naming id X in `before` gives an edge to every
 * listener of X, in `after` one from every listener of X.  WEIR_E_NOMEM on
 * failure.
 */
static int collect_edges(const chain *c, edge **out, size_t *nout) {
    size_t n = c->n, len = 0, cap = 0;
    edge *v = NULL;
    weir__idmap first = WEIR__IDMAP_INIT; /* id -> its first position */
    size_t *next = weir__malloc(n * sizeof *next); /* the next position with that id */
    int rc = next ? WEIR_OK : WEIR_E_NOMEM;
    for (size_t p = n; rc == WEIR_OK && p-- > 0;) {
        const weir__idmap_slot *s = weir__idmap_get(&first, c->v[p].id);
        next[p] = s ? s->num : SIZE_MAX;
        rc = weir__idmap_put(&first, c->v[p].id, NULL, p);
    }
    for (size_t i = 0; i < n && rc == WEIR_OK; i++) {
        for (int after = 0; after < 2 && rc == WEIR_OK; after++) {
            char **list = after ? c->v[i].after : c->v[i].before;
            for (size_t k = 0; list && list[k] && rc == WEIR_OK; k++) {
                const weir__idmap_slot *s = weir__idmap_get(&first, list[k]);
                for (size_t j = s ? s->num : SIZE_MAX; j != SIZE_MAX; j = next[j]) {
                    if (len == cap) {
                        size_t ncap = cap ? cap * 2 : 16;
                        edge *grown = weir__realloc(v, ncap * sizeof *grown);
                        if (!grown) {
                            rc = WEIR_E_NOMEM;
                            break;
                        }
                        v = grown;
                        cap = ncap;
                    }
                    v[len++] = after ? (edge){j, i} : (edge){i, j};
                }
            }
        }
    }
    weir__idmap_free(&first);
    weir__free(next);
    if (rc != WEIR_OK) {
        weir__free(v);
        return rc;
    }
    *out = v;
    *nout = len;
    return WEIR_OK;
}

/* The constraint graph of chain `c` (sorted) in *g; WEIR_E_NOMEM on failure. */
static int graph_build(const chain *c, graph *g) {
    size_t n = c->n, ne = 0;
    edge *e = NULL;
    *g = (graph){0};
    if (collect_edges(c, &e, &ne) != WEIR_OK)
        return WEIR_E_NOMEM;
    g->soff = weir__calloc(n + 1, sizeof *g->soff);
    g->poff = weir__calloc(n + 1, sizeof *g->poff);
    g->indeg = weir__calloc(n, sizeof *g->indeg);
    g->succ = weir__malloc((ne ? ne : 1) * sizeof *g->succ);
    g->pred = weir__malloc((ne ? ne : 1) * sizeof *g->pred);
    if (!g->soff || !g->poff || !g->indeg || !g->succ || !g->pred) {
        weir__free(e);
        graph_free(g);
        return WEIR_E_NOMEM;
    }
    for (size_t k = 0; k < ne; k++) {
        g->soff[e[k].from + 1]++;
        g->poff[e[k].to + 1]++;
    }
    for (size_t p = 0; p < n; p++) {
        g->soff[p + 1] += g->soff[p];
        g->poff[p + 1] += g->poff[p];
    }
    /* indeg is the fill cursor, of succ and then of pred; set for real later */
    for (size_t k = 0; k < ne; k++)
        g->succ[g->soff[e[k].from] + g->indeg[e[k].from]++] = e[k].to;
    memset(g->indeg, 0, n * sizeof *g->indeg);
    for (size_t k = 0; k < ne; k++)
        g->pred[g->poff[e[k].to] + g->indeg[e[k].to]++] = e[k].from;
    weir__free(e);
    return WEIR_OK;
}

/* A min-heap of positions: the earliest listener (in the stable order) first. */
static void heap_push(size_t *heap, size_t *len, size_t v) {
    size_t i = (*len)++;
    for (; i > 0 && heap[(i - 1) / 2] > v; i = (i - 1) / 2)
        heap[i] = heap[(i - 1) / 2];
    heap[i] = v;
}

static size_t heap_pop(size_t *heap, size_t *len) {
    size_t top = heap[0], last = heap[--*len], i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= *len)
            break;
        if (k + 1 < *len && heap[k + 1] < heap[k])
            k++;
        if (heap[k] >= last)
            break;
        heap[i] = heap[k];
        i = k;
    }
    if (*len)
        heap[i] = last;
    return top;
}

/* Find a cycle among the unplaced nodes and describe it ("a -> b -> a"). */
static int cycle_error(const char *hook, const chain *c, const graph *g,
                       const unsigned char *done, size_t *walk, size_t *seen, weir_error *err) {
    size_t n = c->n, len = 0, cur = 0;
    while (done[cur])
        cur++;
    for (size_t i = 0; i < n; i++)
        seen[i] = SIZE_MAX;
    /* walk predecessors (the earliest unplaced one each time): every unplaced
     * node has an unplaced predecessor */
    while (seen[cur] == SIZE_MAX) {
        seen[cur] = len;
        walk[len++] = cur;
        size_t p = SIZE_MAX;
        for (size_t e = g->poff[cur]; e < g->poff[cur + 1]; e++)
            if (!done[g->pred[e]] && g->pred[e] < p)
                p = g->pred[e];
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

/*
 * Order one chain: sort by the stable key, then place listeners in that
 * order except where before/after constraints force a move.  O((n + e) log n)
 * for n listeners and e constraint edges (issue #8, item 10d).
 */
static int order_chain(chain *c, const char *hook, const weir__idmap *known,
                       weir_error *err) {
    size_t n = c->n;
    for (size_t i = 0; i < n; i++)
        if (check_names(hook, &c->v[i], known, err))
            return WEIR_E_HOOK_ORDER;
    if (n == 0)
        return WEIR_OK;
    qsort(c->v, n, sizeof *c->v, key_cmp);
    bool constrained = false;
    for (size_t i = 0; i < n && !constrained; i++)
        constrained = (c->v[i].before && c->v[i].before[0]) || (c->v[i].after && c->v[i].after[0]);
    if (!constrained)
        return WEIR_OK;
    graph g;
    size_t *idx = weir__calloc(4 * n, sizeof *idx); /* order, heap, walk, seen */
    unsigned char *done = weir__calloc(n, 1);
    listener *tmp = weir__calloc(n, sizeof *tmp);
    int rc = WEIR_OK;
    if (!idx || !done || !tmp || graph_build(c, &g) != WEIR_OK) {
        weir__free(idx);
        weir__free(done);
        weir__free(tmp);
        return weir__err(err, WEIR_E_NOMEM, NULL, hook, "out of memory");
    }
    /*
     * Kahn's algorithm that always places the earliest (in the stable
     * order) listener whose predecessors are all placed, as APR's tsort
     * does: the lexicographically smallest order that satisfies the
     * constraints, so a listener moves only when a constraint forces it.
     */
    size_t *heap = idx + n, nheap = 0;
    for (size_t j = 0; j < n; j++) {
        g.indeg[j] = g.poff[j + 1] - g.poff[j];
        if (g.indeg[j] == 0)
            heap_push(heap, &nheap, j);
    }
    for (size_t placed = 0; placed < n; placed++) {
        if (nheap == 0) {
            rc = cycle_error(hook, c, &g, done, idx + 2 * n, idx + 3 * n, err);
            goto out;
        }
        size_t pick = heap_pop(heap, &nheap);
        done[pick] = 1;
        idx[placed] = pick;
        for (size_t e = g.soff[pick]; e < g.soff[pick + 1]; e++)
            if (--g.indeg[g.succ[e]] == 0)
                heap_push(heap, &nheap, g.succ[e]);
    }
    for (size_t k = 0; k < n; k++)
        tmp[k] = c->v[idx[k]];
    memcpy(c->v, tmp, n * sizeof *tmp);
out:
    graph_free(&g);
    weir__free(idx);
    weir__free(done);
    weir__free(tmp);
    return rc;
}

int weir__hooks_freeze(weir__hooks *h, const char *const *ids, size_t nids, weir_error *err) {
    if (!h || (!ids && nids))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "hooks freeze: invalid arguments");
    if (h->frozen)
        return weir__err(err, WEIR_E_STATE, NULL, NULL, "hook chains are already frozen");
    weir__idmap known = WEIR__IDMAP_INIT;
    for (size_t i = 0; i < nids; i++)
        if (ids[i] && weir__idmap_put(&known, ids[i], NULL, i) != WEIR_OK) {
            weir__idmap_free(&known);
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "out of memory");
        }
    int rc = WEIR_OK;
    for (size_t k = 0; k < weir__hook_catalog_len && rc == WEIR_OK; k++)
        rc = order_chain(&h->chains[k], weir__hook_catalog[k].name, &known, err);
    weir__idmap_free(&known);
    if (rc)
        return rc;
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
    h->level = base->level;
    h->sink = base->sink;
    h->mark = base->mark;
    h->timed = base->timed;
    h->rows = base->rows;
    h->nrows = base->nrows;
    h->turn_stopping = base->turn_stopping;
    h->post_execute = base->post_execute;
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
    return weir__hooks_dump_rows(h, out, NULL, NULL);
}

int weir__hooks_dump_rows(const weir__hooks *h, FILE *out, weir__hooks_describe_fn describe,
                          const void *ctx) {
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
            char about[256] = "";
            if (describe)
                describe(c->v[i].id, about, sizeof about, ctx);
            fprintf(out, "  %zu. %s%s%s  [%s]", i + 1, c->v[i].id, about[0] ? "  " : "", about,
                    order_name(c->v[i].order, buf, sizeof buf));
            dump_list(out, "before", c->v[i].before);
            dump_list(out, "after", c->v[i].after);
            const row_state *rs = c->v[i].rs;
            if (rs && rs->pol.skip)
                fputs(" on_error=skip", out);
            if (rs && rs->pol.max_failures)
                fprintf(out, " max_failures=%u", rs->pol.max_failures);
            if (rs && rs->pol.budget_ms)
                fprintf(out, " budget_ms=%u", rs->pol.budget_ms);
            if (rs && __atomic_load_n(&rs->quarantined, __ATOMIC_ACQUIRE))
                fputs("  QUARANTINED", out);
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

/* Copy a short reason into buf (at most `size` - 1 bytes, cut on a UTF-8
 * character boundary, so the JSON string stays valid). */
static void short_copy(char *buf, size_t size, const char *s) {
    size_t n = strlen(s);
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
}

const char *weir__hook_decision(const weir__hook_def *def, const json_t *args,
                                const json_t *result, bool short_circuit, size_t next_extra) {
    const char *name = def->name;
    const char *kind = json_string_value(json_object_get(result, "kind"));
    bool is = kind != NULL;
    if (!strcmp(name, "agent/pre-step")) {
        if (is && !strcmp(kind, "reject"))
            return "reject";
        return json_array_size(json_object_get(result, "messages")) >
                       json_array_size(json_object_get(args, "messages"))
                   ? "inject"
                   : "enter";
    }
    if (!strcmp(name, "tools/pre-execute"))
        return is && !strcmp(kind, "deny") ? "deny" : "allow";
    if (!strcmp(name, "agent/admit")) {
        if (is && !strcmp(kind, "refuse"))
            return "refuse";
        return json_object_get(result, "message") ? "rewrite" : "admit";
    }
    if (!strcmp(name, "agent/request-error")) {
        if (is && !strcmp(kind, "retry"))
            return "retry";
        if (is && !strcmp(kind, "error"))
            return "replace";
        return short_circuit ? "short-circuit" : "rewrite";
    }
    if (!strcmp(name, "llm/stream"))
        return short_circuit ? "replace" : "rewrite";
    if (!strcmp(name, "tools/post-execute")) {
        if (short_circuit)
            return "replace";
        return json_array_size(json_object_get(result, "additional_contexts")) > next_extra
                   ? "inject"
                   : "rewrite";
    }
    return short_circuit ? "short-circuit" : "rewrite";
}

/* A decision's detail: the result's reason (deny, reject), the failure's
 * code (request-error), or the route (agent/request); never a payload. */
static void decision_detail(const weir__hook_def *def, const json_t *r, char *buf, size_t size) {
    const char *why = json_string_value(json_object_get(r, "reason"));
    if (!why)
        why = json_string_value(json_object_get(json_object_get(r, "error"), "code"));
    if (why) {
        short_copy(buf, size, why);
    } else if (!strcmp(def->name, "agent/request")) {
        const char *pv = json_string_value(json_object_get(r, "provider"));
        const char *m = json_string_value(json_object_get(r, "model"));
        if (pv && m) {
            char route[256];
            snprintf(route, sizeof route, "%s/%s", pv, m);
            short_copy(buf, size, route);
        }
    }
}

/* Hand `rec` to the sink: only where a log exists (an agent's invocation)
 * and never from an emit hook (session/event runs inside the log's
 * delivery of an append). */
static void report(const weir_call *call, const listener *l, weir__hook_record *rec) {
    if (!call->h->sink || !call->agent || call->def->mode == WEIR__HOOK_EMIT)
        return;
    rec->hook = call->def->name;
    rec->row = l->id;
    rec->owner = l->owner;
    rec->args = call->args;
    call->h->sink(call->agent, rec);
}

/* Listener `l` failed on its own: count it; the failure that reaches
 * max_failures quarantines the row (once, whichever thread gets there). */
static void count_failure(const weir_call *call, const listener *l, const char *msg) {
    row_state *rs = l->rs;
    unsigned n = __atomic_add_fetch(&rs->failures, 1, __ATOMIC_ACQ_REL);
    bool was = false;
    if (!rs->pol.max_failures || n < rs->pol.max_failures ||
        !__atomic_compare_exchange_n(&rs->quarantined, &was, true, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    weir__warn("weir: error: hook %s: row %s quarantined after %u consecutive failures "
               "(max_failures %u): %s",
               call->def->name, l->id, n, rs->pol.max_failures, msg);
    weir__hook_record rec = {.type = "hook/quarantined", .detail = msg, .failures = n};
    report(call, l, &rec);
}

/* Run hop `i` (listener i, or the default when i == chain length). */
static json_t *run_hop(weir_call *call, size_t i) {
    const weir__hooks *h = call->h;
    const listener *l = i < call->c->n ? &call->c->v[i] : NULL;
    if (l && l->rs && __atomic_load_n(&l->rs->quarantined, __ATOMIC_ACQUIRE)) {
        /* a quarantined row is passed over, as if it had called weir_next() */
        if (h->trace)
            fprintf(h->trace, "weir-trace: %s %s plugin=%s outcome=quarantined us=0\n",
                    call->def->name, weir__hook_mode_name(call->def->mode), l->id);
        return call->def->mode == WEIR__HOOK_WATERFALL ? run_hop(call, i + 1) : json_null();
    }
    hop here = {.failed = false};
    hop *outer = call->cur;
    size_t outer_pos = call->pos;
    call->cur = &here;
    call->pos = i;
    call->failed = false; /* a previous run of this hop was consumed by the caller */
    /* a chain with listeners is timed when provenance or a budget needs it */
    bool timed = h->trace || (h->timed && call->c->n);
    uint64_t t0 = timed ? weir__mono_us() : 0;
    bool probe = l && h->mark && call->agent && call->def == h->turn_stopping;
    size_t mark0 = probe ? h->mark(call->agent) : 0;

    json_t *r;
    if (l)
        r = l->fn(call, call->args, l->user_data);
    else
        r = call->dflt ? call->dflt(call, call->args, call->dflt_ctx) : json_null();

    const char *id = l ? l->id : NULL;
    const char *decision = NULL; /* what to log as hook/decision */
    char detail[160];
    detail[0] = '\0';
    const char *own_failure = NULL; /* counted once the hop's decision is logged */
    if (!r && l && l->rs &&
        (here.failed || (call->def->mode != WEIR__HOOK_EMIT && !call->failed))) {
        /* the listener's own failure, not an inner one passed through */
        const char *msg = here.failed ? here.msg : "returned no result";
        own_failure = msg;
        if (l->rs->pol.skip && call->def->mode != WEIR__HOOK_EMIT) {
            weir__warn("weir: warning: hook %s: plugin %s failed: %s (on_error skip: "
                       "passed on)",
                       call->def->name, id, msg);
            short_copy(detail, sizeof detail, msg);
            decision = "skip";
            here.failed = false;
            if (call->def->mode == WEIR__HOOK_SERIAL) {
                r = json_null();
            } else if (here.called_next) { /* what weir_next() gave it (NULL: the inner failure) */
                r = json_incref(here.held);
            } else { /* as if it had called weir_next() */
                r = run_hop(call, i + 1);
                here.called_next = true;
                here.next_result = r;
                here.inner_us += call->last_us;
            }
        }
    } else if (r && l && l->rs && __atomic_load_n(&l->rs->failures, __ATOMIC_RELAXED)) {
        __atomic_store_n(&l->rs->failures, 0, __ATOMIC_RELEASE); /* no longer consecutive */
    }
    uint64_t total = timed ? weir__mono_us() - t0 : 0;
    uint64_t self = total > here.inner_us ? total - here.inner_us : 0;

    if (r && l && !decision && h->level != WEIR__PROVENANCE_OFF && call->agent) {
        if (call->def->mode == WEIR__HOOK_WATERFALL) {
            /* "differs" is identity: passing weir_next()'s value on is no decision */
            if (!here.called_next || r != here.next_result) {
                decision = weir__hook_decision(call->def, call->args, r, !here.called_next,
                                               here.next_extra);
                decision_detail(call->def, r, detail, sizeof detail);
            } else if (h->level == WEIR__PROVENANCE_ALL) {
                decision = "pass";
            }
        } else if (probe && h->mark(call->agent) != mark0) {
            decision = "steer";
        } else if (call->def->mode == WEIR__HOOK_SERIAL && h->level == WEIR__PROVENANCE_ALL) {
            decision = "pass";
        }
    }
    json_decref(here.held); /* after the identity check: no address was reused */
    if (decision) {
        weir__hook_record rec = {.type = "hook/decision",
                                 .decision = decision,
                                 .detail = detail[0] ? detail : NULL,
                                 .latency_us = self};
        report(call, l, &rec);
    }
    if (own_failure)
        count_failure(call, l, own_failure);
    if (l && l->rs && l->rs->pol.budget_ms && self > (uint64_t)l->rs->pol.budget_ms * 1000) {
        weir__warn("weir: warning: hook %s: plugin %s took %.1f ms (budget_ms %u)",
                   call->def->name, id, (double)self / 1000.0, l->rs->pol.budget_ms);
        weir__hook_record rec = {
            .type = "hook/slow", .latency_us = self, .budget_ms = l->rs->pol.budget_ms};
        report(call, l, &rec);
    }

    const char *outcome;
    if (r) {
        call->failed = false; /* a value is success, or recovery from an inner failure */
        if (!here.called_next || r != here.next_result)
            call->author = id; /* a value of its own, not its successor's passed on */
        outcome = call->def->mode != WEIR__HOOK_WATERFALL || !l ? "ok"
                  : decision && !strcmp(decision, "skip") ? "skipped"
                  : here.called_next                      ? "next"
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
    if (h->trace)
        fprintf(h->trace, "weir-trace: %s %s plugin=%s outcome=%s us=%llu\n", call->def->name,
                weir__hook_mode_name(call->def->mode), id ? id : DEFAULT_LABEL, outcome,
                (unsigned long long)total);
    call->last_us = total;
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

static json_t *invoke(const weir__hooks *h, const char *hook, weir_agent *agent,
                      weir_signal *signal, const json_t *args, weir__hook_default_fn dflt,
                      void *dflt_ctx, bool trusted_default, const char **author,
                      weir_error *err) {
    if (author)
        *author = NULL;
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
                weir__warn("weir: hook %s: plugin %s failed: %s", hook, c->v[i].id,
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
    /* a result no listener made (every listener passed weir_next()'s value
     * on) is the default's: not checked when the caller vouches for it */
    bool check = h->schemas[k] && (call.author || !trusted_default);
    char why[512];
    if (check && weir__schema_validate(h->schemas[k], r, why, sizeof why)) {
        json_decref(r);
        if (c->n)
            weir__err(err, WEIR_E_HOOK_RESULT, c->v[0].id, hook,
                      "hook %s: plugin %s returned an invalid result: %s", hook, c->v[0].id, why);
        else
            weir__err(err, WEIR_E_HOOK_RESULT, NULL, hook,
                      "hook %s: core default returned an invalid result: %s", hook, why);
        return NULL;
    }
    if (author)
        *author = call.author;
    return r;
}

json_t *weir__hook_invoke(const weir__hooks *h, const char *hook, weir_agent *agent,
                          weir_signal *signal, const json_t *args, weir__hook_default_fn dflt,
                          void *dflt_ctx, weir_error *err) {
    return weir__hook_invoke_author(h, hook, agent, signal, args, dflt, dflt_ctx, NULL, err);
}

json_t *weir__hook_invoke_author(const weir__hooks *h, const char *hook, weir_agent *agent,
                                 weir_signal *signal, const json_t *args,
                                 weir__hook_default_fn dflt, void *dflt_ctx,
                                 const char **author, weir_error *err) {
    return invoke(h, hook, agent, signal, args, dflt, dflt_ctx, false, author, err);
}

json_t *weir__hook_invoke_core(const weir__hooks *h, const char *hook, weir_agent *agent,
                               weir_signal *signal, const json_t *args,
                               weir__hook_default_fn dflt, void *dflt_ctx, const char **author,
                               weir_error *err) {
    return invoke(h, hook, agent, signal, args, dflt, dflt_ctx, true, author, err);
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
    json_t *r = run_hop(call, call->pos + 1);
    hop *cur = call->cur; /* run_hop() put this hop back as the current one */
    cur->next_result = r;
    /* held for the identity check (provenance) and for on_error skip only */
    const listener *l = &call->c->v[call->pos];
    if (call->h->level != WEIR__PROVENANCE_OFF || (l->rs && l->rs->pol.skip)) {
        json_decref(cur->held); /* a second weir_next(): the first result is the caller's */
        cur->held = json_incref(r);
    }
    cur->inner_us += call->last_us;
    if (r && call->def == call->h->post_execute)
        cur->next_extra = json_array_size(json_object_get(r, "additional_contexts"));
    return r;
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
