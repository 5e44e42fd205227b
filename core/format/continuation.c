/*
 * core/format/continuation.c - the filter that decides which reasoning
 * continuations of the derived history go into a request (core/
 * continuation.h; docs/session-log.md, "Reasoning continuations").
 *
 * The rules follow what the vendors say a continuation is bound to:
 * - Anthropic: thinking blocks go back "exactly as received", their
 *   signature is checked against the model and the prefix before the block
 *   ("preserved thinking", "prefix checks";
 *   https://platform.claude.com/docs/en/build-with-claude/extended-thinking,
 *   .../build-with-claude/context-editing): a block from another model, or
 *   one whose prefix changed, is refused (400) or ignored.
 * - Gemini thought signatures are model-specific ("do not mix signatures
 *   across models": https://ai.google.dev/gemini-api/docs/thought-signatures).
 * - DeepSeek's reasoning_content belongs to the deepseek-reasoner turn it
 *   came from (https://api-docs.deepseek.com/guides/thinking_mode).
 * So the core sends a continuation only to the provider row and model that
 * produced it, and only while the history before it is what it was.
 *
 * Not every continuation is bound to that history: DeepSeek's
 * reasoning_content is plain text that the API wants back on every
 * tool-call turn ("For turns that do perform tool calls, the
 * reasoning_content must be fully passed back to the API in all subsequent
 * requests ... the API will return a 400 error";
 * api-docs.deepseek.com/guides/thinking_mode), with no check of what came
 * before.  A provider says so with "prefix_bound": false beside provider,
 * model and data; such a continuation is never stale (absent or true:
 * bound).
 */
#include "continuation.h"

#include <string.h>

#include "surface.h"

bool weir__continuation_valid(const json_t *c) {
    if (!json_is_object(c))
        return false;
    const char *provider = weir__json_str(c, "provider", NULL);
    const char *model = weir__json_str(c, "model", NULL);
    const json_t *data = json_object_get(c, "data");
    if (!provider || !*provider || !model || !*model || !json_is_object(data) ||
        json_object_size(data) == 0)
        return false;
    const json_t *bound = json_object_get(c, "prefix_bound");
    if (bound && !json_is_boolean(bound))
        return false;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)(uintptr_t)data, key, v) {
        if (!json_is_string(v))
            return false;
    }
    return true;
}

size_t weir__continuation_count(const weir__cont_dropped *d) {
    return d ? d->malformed + d->route + d->prefix : 0;
}

/* The k-th envelope of a surface, or of an array of envelopes. */
static const json_t *surface_at(const void *src, size_t k) { return weir__surface_event(src, k); }
static const json_t *array_at(const void *src, size_t k) { return json_array_get(src, k); }

/*
 * The staleness mask of `messages` against `nodes` envelopes in surface
 * order (event_at(src, k)): an assistant message is matched with the next
 * assistant/message node that holds it (the very object, or with
 * `by_value` an equal one); it is stale when a node before that one has a
 * higher seq.  A message matched with no node is not stale.
 */
static int stale_mask(const void *src, size_t nodes,
                      const json_t *(*event_at)(const void *, size_t), bool by_value,
                      const json_t *messages, bool **out) {
    *out = NULL;
    size_t n = json_array_size(messages);
    if (n == 0)
        return 0;
    bool *stale = weir__calloc(n, sizeof *stale);
    if (!stale)
        return -1;
    size_t k = 0;
    json_int_t max_before = -1; /* the highest seq of the nodes before node k */
    for (size_t j = 0; j < n; j++) {
        const json_t *m = json_array_get(messages, j);
        if (strcmp(weir__json_str(m, "role", ""), "assistant") != 0)
            continue;
        size_t from = k;
        json_int_t max_from = max_before;
        bool found = false;
        while (k < nodes && !found) {
            const json_t *ev = event_at(src, k);
            json_int_t seq = weir__json_int(ev, "seq", 0);
            const json_t *own = json_object_get(json_object_get(ev, "data"), "message");
            if (strcmp(weir__json_str(ev, "type", ""), "assistant/message") == 0 &&
                (own == m || (by_value && weir__json_equal(own, m)))) {
                found = true;
                stale[j] = max_before > seq;
            }
            if (seq > max_before)
                max_before = seq;
            k++;
        }
        if (!found) { /* not a message of the history: no staleness known */
            k = from;
            max_before = max_from;
        }
    }
    *out = stale;
    return 0;
}

int weir__continuation_stale(const weir__surface *s, const json_t *messages, bool **out) {
    return stale_mask(s, weir__surface_len(s), surface_at, false, messages, out);
}

int weir__continuation_stale_copies(const json_t *events, const json_t *messages, bool **out) {
    return stale_mask(events, json_array_size(events), array_at, true, messages, out);
}

typedef enum verdict { KEEP = 0, MALFORMED, ROUTE, PREFIX } verdict;

/* What happens to block `b`'s continuation (KEEP when it has none). */
static verdict judge(const json_t *b, const char *provider, const char *model, bool stale) {
    const json_t *c = json_object_get(b, "continuation");
    if (!c)
        return KEEP;
    if (!weir__continuation_valid(c))
        return MALFORMED;
    if (!provider || !model || strcmp(weir__json_str(c, "provider", ""), provider) != 0 ||
        strcmp(weir__json_str(c, "model", ""), model) != 0)
        return ROUTE;
    /* an unbound continuation does not care what came before it */
    return stale && !json_is_false(json_object_get(c, "prefix_bound")) ? PREFIX : KEEP;
}

static void count(weir__cont_dropped *d, verdict v) {
    if (v == MALFORMED)
        d->malformed++;
    else if (v == ROUTE)
        d->route++;
    else if (v == PREFIX)
        d->prefix++;
}

/* New reference: block `b` without its continuation member (a shallow copy
 * sharing the other members), or NULL when out of memory. */
static json_t *without_continuation(const json_t *b) {
    json_t *copy = json_copy((json_t *)(uintptr_t)b);
    if (copy && json_object_del(copy, "continuation") != 0) {
        json_decref(copy);
        copy = NULL;
    }
    return copy;
}

/*
 * Filter one message.  *out: NULL when nothing changes, else a new message
 * (or json_null() when it is left out: an assistant message with no
 * content left).  0, or -1 when out of memory.
 */
static int filter_message(const json_t *m, const char *provider, const char *model, bool stale,
                          weir__cont_dropped *d, json_t **out) {
    *out = NULL;
    const json_t *content = json_object_get(m, "content");
    size_t i, changed = 0;
    const json_t *b;
    json_array_foreach(content, i, b) {
        verdict v = judge(b, provider, model, stale);
        if (v != KEEP) {
            count(d, v);
            changed++;
        }
    }
    if (!changed)
        return 0;
    json_t *fresh = json_array();
    if (!fresh)
        return -1;
    json_array_foreach(content, i, b) {
        verdict v = judge(b, provider, model, stale);
        int rc = 0;
        if (v == KEEP)
            rc = json_array_append(fresh, (json_t *)(uintptr_t)b);
        else if (strcmp(weir__json_str(b, "type", ""), "reasoning") != 0)
            rc = json_array_append_new(fresh, without_continuation(b));
        /* a reasoning block goes with its continuation */
        if (rc != 0) {
            json_decref(fresh);
            return -1;
        }
    }
    if (json_array_size(fresh) == 0 && json_array_size(content) > 0 &&
        !strcmp(weir__json_str(m, "role", ""), "assistant")) {
        json_decref(fresh);
        *out = json_null(); /* nothing left to send: left out, as derive leaves empty ones */
        return 0;
    }
    json_t *msg = json_copy((json_t *)(uintptr_t)m);
    if (!msg || json_object_set_new(msg, "content", fresh) != 0) {
        json_decref(msg); /* json_object_set_new took `fresh` either way */
        if (!msg)
            json_decref(fresh);
        return -1;
    }
    *out = msg;
    return 0;
}

json_t *weir__continuation_filter(const json_t *messages, const char *provider,
                                  const char *model, const bool *stale,
                                  weir__cont_dropped *dropped) {
    weir__cont_dropped local;
    weir__cont_dropped *d = dropped ? dropped : &local;
    memset(d, 0, sizeof *d);
    if (!json_is_array(messages))
        return NULL;
    json_t *out = NULL; /* built once the first message changes */
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        json_t *fresh = NULL;
        if (json_is_object(m) &&
            filter_message(m, provider, model, stale && stale[i], d, &fresh) != 0) {
            json_decref(out);
            return NULL;
        }
        if (fresh && !out) { /* the messages before this one, as they are */
            out = json_array();
            for (size_t k = 0; out && k < i; k++)
                if (json_array_append(out, json_array_get(messages, k)) != 0) {
                    json_decref(out);
                    out = NULL;
                }
            if (!out) {
                json_decref(fresh);
                return NULL;
            }
        }
        if (!out)
            continue;
        int rc = fresh ? (json_is_null(fresh) ? 0 : json_array_append(out, fresh))
                       : json_array_append(out, (json_t *)(uintptr_t)m);
        json_decref(fresh);
        if (rc != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out ? out : json_incref((json_t *)(uintptr_t)messages);
}

json_t *weir__continuation_apply(const json_t *messages, const weir__surface *s,
                                 const json_t *context, weir__cont_dropped *dropped) {
    bool *stale = NULL;
    if (weir__continuation_stale(s, messages, &stale) != 0)
        return NULL;
    json_t *out = weir__continuation_filter(messages, weir__json_str(context, "provider", NULL),
                                            weir__json_str(context, "model", NULL), stale,
                                            dropped);
    weir__free(stale);
    return out;
}

json_t *weir__continuation_event(const char *provider, const char *model,
                                 const weir__cont_dropped *d) {
    size_t n = weir__continuation_count(d);
    if (n == 0)
        return NULL;
    json_t *reasons = json_object();
    json_t *ev = reasons ? json_pack("{s:s, s:s, s:I}", "provider", provider ? provider : "",
                                     "model", model ? model : "", "count", (json_int_t)n)
                         : NULL;
    if (!ev ||
        (d->malformed &&
         json_object_set_new(reasons, "malformed", json_integer((json_int_t)d->malformed))) ||
        (d->route && json_object_set_new(reasons, "route", json_integer((json_int_t)d->route))) ||
        (d->prefix &&
         json_object_set_new(reasons, "prefix", json_integer((json_int_t)d->prefix)))) {
        json_decref(reasons);
        json_decref(ev);
        return NULL;
    }
    if (json_object_set_new(ev, "reasons", reasons) != 0) {
        json_decref(ev);
        return NULL;
    }
    return ev;
}
