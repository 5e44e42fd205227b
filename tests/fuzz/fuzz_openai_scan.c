/*
 * tests/fuzz/fuzz_openai_scan.c - libFuzzer target for provider-openai's
 * fast path (plugins/provider-openai/delta_scan.c), with jansson as the
 * oracle.
 *
 * The whole input, and each '\n'-separated line of it, is scanned.  When the
 * scanner accepts, json_loadb(..., 0) must parse the same bytes, and every
 * field read from the jansson tree the way openai_decode.c reads it must
 * equal the scanner's (strings byte for byte).  The lines are then decoded
 * as one stream twice, with and without the fast path: the emitted chunks
 * must be the same texts (continuations included: the decoders know a model).
 * Any difference aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "delta_scan.h"
#include "openai.h"
#include "provider_test.h"

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_openai_scan: %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* A member the scanner read: absent or null is NULL, otherwise a string. */
static void same_string(const json_t *obj, const char *key, const openai_scan_str *got) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        CHECK(got->p == NULL);
        return;
    }
    CHECK(json_is_string(v));
    CHECK(got->p != NULL);
    CHECK(got->len == json_string_length(v));
    CHECK(memcmp(got->p, json_string_value(v), got->len) == 0);
    CHECK(got->p[got->len] == '\0');
}

/* A count: absent or null is 0 and not present, otherwise an integer >= 0. */
static void same_count(const json_t *obj, const char *key, int64_t got, bool *present) {
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    bool has = v && !json_is_null(v);
    if (present)
        CHECK(*present == has);
    if (!has) {
        CHECK(got == 0);
        return;
    }
    CHECK(json_is_integer(v));
    CHECK(json_integer_value(v) >= 0);
    CHECK(json_integer_value(v) == got);
}

/* The scanner accepted `p`: jansson agrees on every field the decoder reads. */
static void oracle(const openai_scan_delta *d, const char *p, size_t n) {
    json_t *root = json_loadb(p, n, 0, NULL);
    CHECK(root != NULL);
    CHECK(json_is_object(root));
    CHECK(json_object_get(root, "error") == NULL);

    json_t *usage = json_object_get(root, "usage");
    CHECK(d->has_usage == (usage && !json_is_null(usage)));
    if (d->has_usage) {
        CHECK(json_is_object(usage));
        same_count(usage, "prompt_tokens", d->prompt_tokens, NULL);
        same_count(usage, "completion_tokens", d->completion_tokens, NULL);
        json_t *pd = json_object_get(usage, "prompt_tokens_details");
        json_t *cd = json_object_get(usage, "completion_tokens_details");
        CHECK(!pd || json_is_null(pd) || json_is_object(pd));
        CHECK(!cd || json_is_null(cd) || json_is_object(cd));
        bool has_cached = d->has_cached, has_reasoning = d->has_reasoning;
        same_count(json_is_object(pd) ? pd : NULL, "cached_tokens", d->cached_tokens,
                   &has_cached);
        same_count(json_is_object(cd) ? cd : NULL, "reasoning_tokens", d->reasoning_tokens,
                   &has_reasoning);
        bool has_hit = d->has_cache_hit; /* DeepSeek's */
        same_count(usage, "prompt_cache_hit_tokens", d->cache_hit_tokens, &has_hit);
    }

    json_t *choices = json_object_get(root, "choices");
    bool one = choices && !json_is_null(choices);
    if (one) {
        CHECK(json_is_array(choices));
        CHECK(json_array_size(choices) <= 1);
        one = json_array_size(choices) == 1;
    }
    CHECK(d->has_choice == one);
    if (one) {
        json_t *choice = json_array_get(choices, 0);
        CHECK(json_is_object(choice));
        same_string(choice, "finish_reason", &d->finish_reason);
        json_t *delta = json_object_get(choice, "delta");
        CHECK(d->has_delta == (delta && !json_is_null(delta)));
        if (d->has_delta) {
            CHECK(json_is_object(delta));
            same_string(delta, "content", &d->content);
            same_string(delta, "reasoning_content", &d->reasoning_content);
            same_string(delta, "reasoning", &d->reasoning);
            json_t *calls = json_object_get(delta, "tool_calls");
            size_t ncalls = 0;
            if (calls && !json_is_null(calls)) {
                CHECK(json_is_array(calls));
                ncalls = json_array_size(calls);
            }
            CHECK(d->ncalls == ncalls);
            for (size_t i = 0; i < ncalls; i++) {
                json_t *tc = json_array_get(calls, i);
                const openai_scan_call *c = &d->calls[i];
                CHECK(json_is_object(tc));
                json_t *index = json_object_get(tc, "index");
                CHECK(c->has_index == (index != NULL));
                if (index) {
                    CHECK(json_is_integer(index));
                    CHECK(json_integer_value(index) == c->index);
                }
                same_string(tc, "id", &c->id);
                /* Gemini's thought signature is the jansson path's */
                CHECK(json_object_get(tc, "extra_content") == NULL);
                json_t *fn = json_object_get(tc, "function");
                if (fn && !json_is_null(fn)) {
                    CHECK(json_is_object(fn));
                    same_string(fn, "name", &c->name);
                    same_string(fn, "arguments", &c->args);
                } else {
                    CHECK(c->name.p == NULL && c->args.p == NULL);
                }
            }
        }
    } else {
        CHECK(!d->has_delta && d->ncalls == 0 && d->finish_reason.p == NULL);
    }
    json_decref(root);
}

static void scan_one(openai_scan *s, const char *p, size_t n) {
    /* Scan a copy of exactly n bytes, so reading past them is an ASan error. */
    char *copy = malloc(n ? n : 1);
    if (!copy)
        return;
    memcpy(copy, p, n);
    if (openai_scan_chunk(s, copy, n))
        oracle(&s->delta, copy, n);
    free(copy);
}

static void scan_line(void *s, const char *p, size_t n) { scan_one(s, p, n); }

static int collect(void *user_data, json_t *chunk) {
    char *text = json_dumps(chunk, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(chunk);
    if (!text)
        return 0;
    json_t *texts = user_data;
    json_array_append_new(texts, json_string(text));
    free(text);
    return 0;
}

static void decode_line(void *d, const char *p, size_t n) { openai_decoder_event(d, p, n); }

/* The chunk texts of the input decoded as a stream (new reference). */
static json_t *decoded(const char *data, size_t size, bool fast) {
    json_t *texts = json_array();
    openai_decoder *d = texts ? openai_decoder_new("fuzz", collect, texts) : NULL;
    if (!d) {
        json_decref(texts);
        return NULL;
    }
    openai_decoder_set_fast(d, fast);
    openai_decoder_set_model(d, "fuzz-model"); /* continuations go out too */
    pt_fuzz_lines(data, size, decode_line, d);
    openai_decoder_end(d, NULL, false);
    openai_decoder_free(d);
    return texts;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    openai_scan s = {0};
    scan_one(&s, text, size);
    pt_fuzz_lines(text, size, scan_line, &s);
    openai_scan_clear(&s);

    json_t *slow = decoded(text, size, false);
    json_t *fast = decoded(text, size, true);
    if (slow && fast) {
        CHECK(json_array_size(slow) == json_array_size(fast));
        for (size_t i = 0; i < json_array_size(slow); i++)
            CHECK(strcmp(json_string_value(json_array_get(slow, i)),
                         json_string_value(json_array_get(fast, i))) == 0);
    }
    json_decref(slow);
    json_decref(fast);
    return 0;
}
