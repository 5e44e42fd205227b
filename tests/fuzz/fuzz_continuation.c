/*
 * tests/fuzz/fuzz_continuation.c - libFuzzer target for reasoning
 * continuations (issue #32 item 1): the request filter (core/format/continuation.c)
 * and the fold of `continuation` chunks (core/format/assistant_stream.c).
 *
 * The input is JSON: an array of messages (route "p"/"m"), or an object
 *   {"messages":[...], "provider"?, "model"?, "stale"?:[bool...],
 *    "chunks"?:[chunk...]}
 * Oracles: no crash, leak or UB; the inputs are unchanged; every
 * continuation the filter lets through is well formed, of the route, and
 * not in a stale message unless it says "prefix_bound": false; the kept and
 * the dropped add up to what came in;
 * a filter of its own output drops nothing more; the chunks' compact form
 * expands back exactly and folds into the same message, whose blocks
 * carry what the chunks said, and which the filter takes too.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assistant_stream.h"
#include "continuation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const json_t *a, const json_t *b) {
    char *sa = a ? json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    char *sb = b ? json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    fprintf(stderr, "fuzz_continuation: %s\n  a: %s\n  b: %s\n", what, sa ? sa : "-",
            sb ? sb : "-");
    free(sa);
    free(sb);
    abort();
}

static char *dump(const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    if (!s)
        abort();
    return s;
}

/* The continuations the filter reads in message `m`: members of the object
 * blocks of its content array. */
static size_t in_message(const json_t *m) {
    size_t n = 0, k;
    const json_t *b;
    json_array_foreach(json_object_get(m, "content"), k, b) n +=
        json_object_get(b, "continuation") != NULL;
    return n;
}

/* The bound continuations of message `m` (prefix_bound absent or true). */
static size_t bound_in_message(const json_t *m) {
    size_t n = 0, k;
    const json_t *b, *c;
    json_array_foreach(json_object_get(m, "content"), k, b) {
        c = json_object_get(b, "continuation");
        n += c && !json_is_false(json_object_get(c, "prefix_bound"));
    }
    return n;
}

static size_t continuations(const json_t *msgs) {
    size_t n = 0, i;
    const json_t *m;
    json_array_foreach(msgs, i, m) n += in_message(m);
    return n;
}

static void check_filter(const json_t *msgs, const char *provider, const char *model,
                         const bool *stale) {
    char *before = dump(msgs);
    weir__cont_dropped d;
    json_t *out = weir__continuation_filter(msgs, provider, model, stale, &d);
    if (!out)
        die("the filter failed on an array", msgs, NULL);
    char *after = dump(msgs);
    if (strcmp(before, after) != 0)
        die("the filter changed its input", msgs, NULL);
    free(before);
    free(after);
    size_t kept = continuations(out), i, k;
    if (kept + weir__continuation_count(&d) != continuations(msgs))
        die("kept + dropped is not what came in", msgs, out);
    if (out == msgs && weir__continuation_count(&d) != 0)
        die("dropped something but returned the input", msgs, NULL);
    const json_t *m, *b;
    json_array_foreach(out, i, m) {
        json_array_foreach(json_object_get(m, "content"), k, b) {
            const json_t *c = json_object_get(b, "continuation");
            if (!c)
                continue;
            if (!weir__continuation_valid(c))
                die("a malformed continuation got through", c, out);
            if (!provider || !model ||
                strcmp(json_string_value(json_object_get(c, "provider")), provider) != 0 ||
                strcmp(json_string_value(json_object_get(c, "model")), model) != 0)
                die("another route's continuation got through", c, out);
        }
    }
    /* stale messages keep no bound continuation: the output is shorter or
     * the same, so match by position only when nothing was left out */
    if (stale && json_array_size(out) == json_array_size(msgs))
        json_array_foreach(out, i, m) if (stale[i] && bound_in_message(m) > 0)
            die("a stale message kept a bound continuation", m, NULL);
    /* once filtered, nothing more to drop on the same route */
    weir__cont_dropped again;
    json_t *twice = weir__continuation_filter(out, provider, model, NULL, &again);
    if (!twice || weir__continuation_count(&again) != 0 || twice != out)
        die("a second filter dropped more", out, twice);
    json_decref(twice);
    json_decref(out);
}

static void check_fold(const json_t *chunks) {
    size_t i;
    const json_t *c;
    json_array_foreach(chunks, i, c) if (!json_is_object(c)) return;
    char *before = dump(chunks);
    json_t *compact = weir__stream_compact(chunks);
    json_t *back = compact ? weir__stream_expand(compact) : NULL;
    if (!back || !json_equal(back, chunks))
        die("the compact form does not expand back", chunks, back);
    weir__assembled a, b;
    if (weir__stream_assemble(chunks, true, &a) != 0 ||
        weir__stream_assemble(back, true, &b) != 0)
        die("the fold failed", chunks, NULL);
    if (!json_equal(a.message, b.message))
        die("the fold differs between the forms", a.message, b.message);
    /* a reasoning block with a continuation is never left out for its empty text */
    json_array_foreach(json_object_get(a.message, "content"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && !strcmp(t, "reasoning") && !json_object_get(c, "continuation") &&
            !*json_string_value(json_object_get(c, "text")))
            die("an empty reasoning block without a continuation was kept", c, a.message);
    }
    json_t *msgs = json_pack("[O]", a.message);
    if (msgs) {
        check_filter(msgs, "p", "m", NULL);
        json_decref(msgs);
    }
    char *after = dump(chunks);
    if (strcmp(before, after) != 0)
        die("the fold changed its input", chunks, NULL);
    free(before);
    free(after);
    json_decref(a.message);
    json_decref(a.calls);
    json_decref(b.message);
    json_decref(b.calls);
    json_decref(back);
    json_decref(compact);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t e;
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!v)
        return 0;
    if (json_is_array(v)) {
        check_filter(v, "p", "m", NULL);
    } else if (json_is_object(v)) {
        const json_t *msgs = json_object_get(v, "messages");
        const json_t *st = json_object_get(v, "stale");
        bool *stale = NULL;
        if (json_is_array(msgs) && json_array_size(msgs) > 0 && json_is_array(st)) {
            stale = calloc(json_array_size(msgs), sizeof *stale);
            if (!stale)
                abort();
            for (size_t i = 0; i < json_array_size(msgs); i++)
                stale[i] = json_is_true(json_array_get(st, i));
        }
        if (json_is_array(msgs))
            check_filter(msgs, json_string_value(json_object_get(v, "provider")),
                         json_string_value(json_object_get(v, "model")), stale);
        free(stale);
        const json_t *chunks = json_object_get(v, "chunks");
        if (json_is_array(chunks))
            check_fold(chunks);
    }
    json_decref(v);
    return 0;
}
