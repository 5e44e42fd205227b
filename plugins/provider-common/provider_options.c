/*
 * plugins/provider-common/provider_options.c - merging and checking of
 * provider options (see provider_options.h).
 */
#include "provider_options.h"

#include "provider_common.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* jansson's object iterator is not const. */
static json_t *unconst(const json_t *v) { return (json_t *)(uintptr_t)v; }

/* RFC 7396 MergePatch(target, patch) into `target` (owned, an object). */
static int merge_into(json_t *target, const json_t *patch, int depth) {
    if (depth > 64)
        return -1;
    const char *key;
    json_t *v;
    json_object_foreach(unconst(patch), key, v) {
        json_t *old = json_object_get(target, key);
        if (json_is_null(v)) {
            /* a null removes the key, and is kept on the top level so that
             * the body drops a member the provider would write itself */
            if (depth == 0 ? json_object_set_new(target, key, json_null()) != 0
                           : (old && json_object_del(target, key) != 0))
                return -1;
        } else if (json_is_object(v) && json_is_object(old)) {
            json_t *copy = json_deep_copy(old);
            if (!copy || merge_into(copy, v, depth + 1) != 0 ||
                json_object_set_new(target, key, copy) != 0) {
                json_decref(copy);
                return -1;
            }
        } else if (json_is_object(v)) {
            json_t *fresh = json_object(); /* nulls inside a new object vanish */
            if (!fresh || merge_into(fresh, v, depth + 1) != 0 ||
                json_object_set_new(target, key, fresh) != 0) {
                json_decref(fresh);
                return -1;
            }
        } else if (json_object_set_new(target, key, json_deep_copy(v)) != 0) {
            return -1;
        }
    }
    return 0;
}

json_t *pc_options_merge(const json_t *base, const json_t *over) {
    if ((base && !json_is_object(base)) || (over && !json_is_object(over)))
        return NULL;
    json_t *out = base ? json_deep_copy(base) : json_object();
    if (out && over && merge_into(out, over, 0) != 0) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

static bool owned_key(const char *const *owned, const char *key) {
    for (; owned && *owned; owned++)
        if (strcmp(*owned, key) == 0)
            return true;
    return false;
}

/* Append ", "-joined `owned` to msg (size bytes, holding `n`). */
static void append_owned(char *msg, size_t size, const char *const *owned) {
    if (!msg || !size)
        return;
    size_t n = strlen(msg);
    for (bool first = true; owned && *owned && n + 1 < size; owned++, first = false)
        n += (size_t)snprintf(msg + n, size - n, "%s%s", first ? "" : ", ", *owned);
    if (n + 1 < size)
        snprintf(msg + n, size - n, ")");
}

int pc_options_check(const json_t *options, const char *const *owned, const char *model,
                     const char *where, char *msg, size_t size) {
    if (!options)
        return 0;
    if (!json_is_object(options)) {
        snprintf(msg, size, "%s: expected an object (merged into the request body)", where);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(unconst(options), key, v) {
        if (owned_key(owned, key)) {
            snprintf(msg, size,
                     "%s.%s: \"%s\" is written by the provider and cannot be an option "
                     "(provider-owned keys: ",
                     where, key, key);
            append_owned(msg, size, owned);
            return -1;
        }
    }
    const json_t *thinking = json_object_get(options, "thinking");
    if (thinking && !json_is_null(thinking)) {
        const char *type = json_string_value(json_object_get(thinking, "type"));
        if (!json_is_object(thinking) || !type) {
            snprintf(msg, size, "%s.thinking: expected an object with a string \"type\"", where);
            return -1;
        }
        const char *why = pc_thinking_refusal(pc_model_table_find(model), type);
        if (why) {
            snprintf(msg, size, "%s.thinking: model \"%s\" %s", where, model, why);
            return -1;
        }
    }
    return 0;
}

int pc_options_append(pc_buf *out, const json_t *opts, char *msg, size_t size) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)(uintptr_t)opts, key, v) {
        if (json_is_null(v))
            continue;
        if (pc_buf_add(out, ",", 1) || pc_buf_str(out, key, strlen(key)) ||
            pc_buf_add(out, ":", 1))
            return PC_OOM(msg, size);
        if (pc_buf_json(out, v, msg, size) != 0)
            return -1;
    }
    return 0;
}
