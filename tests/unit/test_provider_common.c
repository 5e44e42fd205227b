/*
 * tests/unit/test_provider_common.c - the secret scrubber the HTTP providers
 * share (plugins/provider-common/provider_common.c: pc_secrets, pc_scrub,
 * pc_scrub_json): full occurrences anywhere, overlapping and touching ones,
 * several secrets, short secrets as whole words only, masked echoes, empty
 * input, long bodies, JSON values; and the model table
 * (plugins/provider-common/model_table.c: the windows and max outputs of
 * well-known ids, dated, aliased, Hugging Face and Ollama spellings, the
 * near misses that must match nothing, the table's own consistency) and the
 * parsing of what servers report (vLLM /v1/models, llama.cpp /props); and
 * pc_buf_json's failure when its buffer cannot grow (realloc is wrapped:
 * -Wl,--wrap=realloc in tests/cmake/providers.cmake).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_table.h"
#include "provider_common.h"
#include "provider_options.h"

#define R PC_REDACTED

/* The next `realloc_fail` calls of provider_common.c's realloc fail once
 * `realloc_skip` more have succeeded (the link wraps only this test's own
 * objects: jansson and libc allocate as they always do). */
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
static int realloc_skip, realloc_fail;

void *__wrap_realloc(void *p, size_t n) {
    if (realloc_fail > 0 && realloc_skip-- <= 0) {
        realloc_fail--;
        return NULL;
    }
    return __real_realloc(p, n);
}

/* A set of the NULL-terminated secrets. */
static pc_secrets secrets_of(const char *first, ...) {
    pc_secrets s = {0};
    va_list ap;
    va_start(ap, first);
    for (const char *k = first; k; k = va_arg(ap, const char *))
        assert_int_equal(pc_secrets_add(&s, k), 0);
    va_end(ap);
    return s;
}

/* Scrub `text` with `s`: `want` is the result, or NULL for "nothing to do". */
static void expect(const pc_secrets *s, const char *text, const char *want) {
    char *out = (char *)(uintptr_t)1;
    size_t len = 1234;
    assert_int_equal(pc_scrub(s, text, strlen(text), &out, &len), 0);
    if (!want) {
        if (out)
            fail_msg("\"%s\": expected no change, got \"%s\"", text, out);
        assert_int_equal(len, 0);
        return;
    }
    if (!out)
        fail_msg("\"%s\": expected \"%s\", got no change", text, want);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    free(out);
}

static void full_secret_anywhere(void **state) {
    (void)state;
    pc_secrets s = secrets_of("sk-test-SECRET-12345", NULL);
    expect(&s, "Incorrect API key provided: sk-test-SECRET-12345. You can find it",
           "Incorrect API key provided: " R ". You can find it");
    expect(&s, "sk-test-SECRET-12345 at the start", R " at the start");
    expect(&s, "at the end sk-test-SECRET-12345", "at the end " R);
    expect(&s, "sk-test-SECRET-12345", R);
    /* a long secret is scrubbed inside a longer word too */
    expect(&s, "key=xsk-test-SECRET-12345y", "key=x" R "y");
    expect(&s, "two: sk-test-SECRET-12345, sk-test-SECRET-12345.", "two: " R ", " R ".");
    /* byte-exact and case-sensitive; a prefix alone is not the secret */
    expect(&s, "SK-TEST-SECRET-12345 sk-test-SECRET-1234", NULL);
    expect(&s, "nothing here", NULL);
    pc_secrets_clear(&s);
}

static void overlapping_and_touching_occurrences(void **state) {
    (void)state;
    pc_secrets s = secrets_of("abababab", NULL);
    /* occurrences at 0, 2, 4 overlap: one marker covers them all */
    expect(&s, "abababababab!", R "!");
    expect(&s, "x abababababa y", "x " R "a y");
    pc_secrets_clear(&s);
    s = secrets_of("KEY-0123456789", NULL);
    expect(&s, "KEY-0123456789KEY-0123456789", R); /* touching */
    expect(&s, "KEY-0123456789 KEY-0123456789", R " " R);
    pc_secrets_clear(&s);
}

static void several_secrets(void **state) {
    (void)state;
    /* a header value and the credentials inside it, both in the set */
    pc_secrets s = secrets_of("Bearer hdr-SECRET-777", "hdr-SECRET-777", "sk-other-SECRET-9", NULL);
    expect(&s, "got Bearer hdr-SECRET-777 and sk-other-SECRET-9", "got " R " and " R);
    expect(&s, "token hdr-SECRET-777", "token " R);
    /* two different secrets overlapping: one marker */
    pc_secrets_clear(&s);
    s = secrets_of("aaaa-bbbb-cccc", "cccc-dddd-eeee", NULL);
    expect(&s, "[aaaa-bbbb-cccc-dddd-eeee]", "[" R "]");
    pc_secrets_clear(&s);
}

static void empty_secrets_and_text(void **state) {
    (void)state;
    pc_secrets s = {0};
    expect(&s, "sk-anything", NULL);
    assert_int_equal(pc_secrets_add(&s, ""), 0);
    assert_int_equal(pc_secrets_add(&s, NULL), 0);
    assert_int_equal(s.n, 0);
    expect(&s, "sk-anything", NULL);
    assert_int_equal(pc_secrets_add(&s, "sk-test-SECRET-12345"), 0);
    assert_int_equal(pc_secrets_add(&s, "sk-test-SECRET-12345"), 0); /* no duplicate */
    assert_int_equal(s.n, 1);
    char *out = (char *)(uintptr_t)1;
    assert_int_equal(pc_scrub(&s, "", 0, &out, NULL), 0);
    assert_null(out);
    assert_int_equal(pc_scrub(NULL, "sk-test-SECRET-12345", 20, &out, NULL), 0);
    assert_null(out);
    /* not NUL-terminated, and NULs inside */
    static const char bytes[] = "a\0sk-test-SECRET-12345\0b";
    size_t len;
    assert_int_equal(pc_scrub(&s, bytes, sizeof bytes - 1, &out, &len), 0);
    assert_int_equal(len, 4 + strlen(R));
    assert_memory_equal(out, "a\0" R "\0b", len);
    free(out);
    assert_int_equal(pc_scrub(&s, "sk-test-SECRET-12345", 10, &out, NULL), 0);
    assert_null(out); /* only the first 10 bytes are the text */
    pc_secrets_clear(&s);
    pc_secrets_clear(&s); /* twice is fine */
    pc_secrets_clear(NULL);
}

static void short_secret_whole_words_only(void **state) {
    (void)state;
    pc_secrets s = secrets_of("test", "EMPTY", NULL);
    expect(&s, "Incorrect API key provided: test.", "Incorrect API key provided: " R ".");
    expect(&s, "test", R);
    expect(&s, "test at the start, at the end test", R " at the start, at the end " R);
    expect(&s, "key \"test\" (EMPTY)", "key \"" R "\" (" R ")");
    /* inside words, or next to key characters, it is left alone */
    expect(&s, "testing the latest tests: test_1 test-2 2test EMPTYING", NULL);
    expect(&s, "testtest", NULL);
    pc_secrets_clear(&s);
    s = secrets_of("1234567", NULL); /* one byte under PC_SECRET_SHORT */
    expect(&s, "id x1234567 and 1234567", "id x1234567 and " R);
    pc_secrets_clear(&s);
    s = secrets_of("12345678", NULL); /* PC_SECRET_SHORT: anywhere */
    expect(&s, "id x12345678", "id x" R);
    pc_secrets_clear(&s);
}

static void masked_echoes(void **state) {
    (void)state;
    pc_secrets s = secrets_of("sk-proj-abcdefghijklmnopqrstuvwxyz", NULL);
    /* what OpenAI answers for a refused key: head and tail showing */
    expect(&s, "Incorrect API key provided: sk-proj-********************wxyz. You can",
           "Incorrect API key provided: " R ". You can");
    expect(&s, "key sk-pro...wxyz", "key " R);
    expect(&s, "key ****wxyz;", "key " R ";");    /* the tail alone */
    expect(&s, "key sk-proj-abc***", "key " R);   /* the head alone */
    expect(&s, "key (sk-p*****yz)", "key (" R ")");
    /* not the secret's head or tail, too little of it, or no mask run */
    expect(&s, "key sk-proj-abX***wxyz", NULL);
    expect(&s, "key sk-proj-abc***wxyZ", NULL);
    expect(&s, "key ***xyz and sk-***", NULL);
    expect(&s, "key sk-proj-abc**wxyz", NULL);
    expect(&s, "Loading... done. ***** stars", NULL);
    pc_secrets_clear(&s);
    /* short secrets have no masked form */
    s = secrets_of("abcdefg", NULL);
    expect(&s, "key abcd***efg", NULL);
    pc_secrets_clear(&s);
}

static void long_bodies(void **state) {
    (void)state;
    const char *key = "sk-test-SECRET-12345";
    size_t klen = strlen(key), n = 1 << 20;
    char *text = malloc(n + 1);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        text[i] = (char)('a' + (char)(i % 26));
    text[n] = '\0';
    size_t at[] = {0, 4096, 500000, 500000 + klen, n - klen};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        memcpy(text + at[i], key, klen);
    pc_secrets s = secrets_of(key, "not-in-the-body-000", NULL);
    char *out;
    size_t len;
    assert_int_equal(pc_scrub(&s, text, n, &out, &len), 0);
    assert_non_null(out);
    /* 5 occurrences, two of them touching: 4 markers */
    assert_int_equal(len, n - 5 * klen + 4 * strlen(R));
    assert_int_equal(strlen(out), len);
    assert_null(strstr(out, key));
    assert_memory_equal(out, R, strlen(R));
    assert_string_equal(out + len - strlen(R), R);
    size_t markers = 0;
    for (const char *p = strstr(out, R); p; p = strstr(p + 1, R))
        markers++;
    assert_int_equal(markers, 4);
    free(out);
    /* a long body without the secret is left alone */
    memset(text, 'x', n);
    assert_int_equal(pc_scrub(&s, text, n, &out, &len), 0);
    assert_null(out);
    pc_secrets_clear(&s);
    free(text);
}

static void json_values(void **state) {
    (void)state;
    pc_secrets s = secrets_of("sk-test-SECRET-12345", NULL);
    json_t *v = json_pack("{s:s,s:{s:s,s:s,s:i,s:[s,s,n]},s:s}", "type", "finish", "reason",
                          "kind", "error", "message", "bad key sk-test-SECRET-12345", "status",
                          401, "list", "sk-test-SECRET-12345", "fine", "sk-test-SECRET-12345",
                          "kept as key");
    assert_non_null(v);
    assert_int_equal(pc_scrub_json(&s, v), 0);
    char *dump = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(dump, "{\"reason\":{\"kind\":\"error\",\"list\":[\"" R "\",\"fine\",null],"
                              "\"message\":\"bad key " R "\",\"status\":401},"
                              "\"sk-test-SECRET-12345\":\"kept as key\",\"type\":\"finish\"}");
    free(dump);
    json_decref(v);
    /* a bare string, and nothing to do */
    v = json_string("sk-test-SECRET-12345");
    assert_int_equal(pc_scrub_json(&s, v), 0);
    assert_string_equal(json_string_value(v), R);
    json_decref(v);
    assert_int_equal(pc_scrub_json(&s, NULL), 0);
    assert_int_equal(pc_scrub_json(NULL, json_null()), 0);
    pc_secrets_clear(&s);
}

/* ------------------------------------------------------------------------ */
/* The model table                                                          */
/* ------------------------------------------------------------------------ */

/* pc_buf_str writes a JSON string exactly as jansson's compact dump does:
 * every byte below 0x20, the quote and the backslash escaped (the short
 * forms where JSON has them, \u00XX otherwise), everything else as it is
 * (the slash, DEL, multi-byte UTF-8), and embedded NULs counted in. */
static void buf_str_is_janssons_string(void **state) {
    (void)state;
    static const struct {
        const char *s;
        size_t n;
    } cases[] = {
        {"", 0},
        {"plain", 5},
        {"\"quoted\" \\ back/slash", 22},
        {"\b\f\n\r\t\x01\x1f\x7f", 8},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 15},
        {"nul\0inside", 10},
        {"\x1b[31mred\x1b[0m", 13},
    };
    char all[256];
    for (int c = 1; c < 128; c++)
        all[c - 1] = (char)c;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] + 1; i++) {
        const char *s = i < sizeof cases / sizeof cases[0] ? cases[i].s : all;
        size_t n = i < sizeof cases / sizeof cases[0] ? cases[i].n : 127;
        json_t *v = json_stringn(s, n);
        assert_non_null(v);
        char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        pc_buf b = {0};
        assert_int_equal(pc_buf_add(&b, "x", 1), 0); /* appends after what is there */
        assert_int_equal(pc_buf_str(&b, s, n), 0);
        assert_int_equal(b.len, strlen(want) + 1);
        assert_memory_equal(b.p + 1, want, strlen(want));
        free(b.p);
        free(want);
        json_decref(v);
    }
}

/* jansson 2.14 goes on past a failed write of an object's key and reports
 * success, so a dump whose buffer cannot grow for one key (and can again
 * for the bytes after it) would come out as `{:1}`. pc_buf_json fails
 * instead, with the buffer as it was, for a failure at every write. */
static void buf_json_fails_when_a_key_cannot_grow(void **state) {
    (void)state;
    char key[101];
    memset(key, 'k', 100);
    key[100] = '\0';
    json_t *v = json_pack("{s:i,s:[s,i]}", key, 1, "list", key, 2);
    assert_non_null(v);
    char *want = json_dumps(v, JSON_COMPACT);
    assert_non_null(want);
    size_t n = strlen(want);
    for (int skip = 0;; skip++) {
        pc_buf b = {0};
        assert_int_equal(pc_buf_add(&b, "prefix, 60 bytes ..........................................", 60), 0);
        char msg[64] = "";
        realloc_skip = skip;
        realloc_fail = 1; /* one write fails; the ones after it could grow again */
        int rc = pc_buf_json(&b, v, msg, sizeof msg);
        bool failed = realloc_fail == 0;
        realloc_fail = 0;
        if (failed) {
            assert_int_equal(rc, -1);
            assert_string_equal(msg, "out of memory");
            assert_int_equal(b.len, 60);
            assert_int_equal(b.p[60], '\0');
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(b.len, 60 + n);
            assert_string_equal(b.p + 60, want);
        }
        free(b.p);
        if (!failed)
            break; /* every growth has been failed once */
        assert_true(skip < 16);
    }
    /* no message buffer, and nothing to dump */
    pc_buf b = {0};
    realloc_skip = 0;
    realloc_fail = 1;
    assert_int_equal(pc_buf_json(&b, v, NULL, 0), -1);
    realloc_fail = 0;
    assert_int_equal(pc_buf_json(&b, NULL, NULL, 0), -1);
    assert_int_equal(b.len, 0);
    free(b.p);
    free(want);
    json_decref(v);
}

static void table_knows_well_known_models(void **state) {
    (void)state;
    static const struct {
        const char *id;
        long window, max_output;
    } cases[] = {
        /* OpenAI: bare, dated, vendor-prefixed, any case */
        {"gpt-4o", 128000, 16384},
        {"gpt-4o-2024-08-06", 128000, 16384},
        {"gpt-4o-2024-11-20", 128000, 16384},
        {"gpt-4o-2024-05-13", 128000, 4096},
        {"GPT-4o", 128000, 16384},
        {"openai/gpt-4o", 128000, 16384},
        {"gpt-4o-mini", 128000, 16384},
        {"gpt-4o-mini-2024-07-18", 128000, 16384},
        {"gpt-4.1", 1047576, 32768},
        {"gpt-4.1-2025-04-14", 1047576, 32768},
        {"gpt-4.1-mini", 1047576, 32768},
        {"gpt-4.1-mini-2025-04-14", 1047576, 32768},
        {"gpt-4.1-nano", 1047576, 32768},
        {"gpt-4.1-nano-2025-04-14", 1047576, 32768},
        {"o1", 200000, 100000},
        {"o1-2024-12-17", 200000, 100000},
        {"o1-mini", 128000, 65536},
        {"o1-mini-2024-09-12", 128000, 65536},
        {"o3", 200000, 100000},
        {"o3-2025-04-16", 200000, 100000},
        {"o3-mini", 200000, 100000},
        {"o3-mini-2025-01-31", 200000, 100000},
        {"o4-mini", 200000, 100000},
        {"o4-mini-2025-04-16", 200000, 100000},
        {"gpt-5", 272000, 128000},
        {"gpt-5-2025-08-07", 272000, 128000},
        {"gpt-5-mini", 272000, 128000},
        {"gpt-5-mini-2025-08-07", 272000, 128000},
        {"gpt-5-nano", 272000, 128000},
        {"gpt-5-nano-2025-08-07", 272000, 128000},
        {"gpt-5-chat-latest", 128000, 16384},
        /* Anthropic: dated ids, aliases, Vertex's @date */
        {"claude-sonnet-4-5-20250929", 200000, 64000},
        {"claude-sonnet-4-5", 200000, 64000},
        {"claude-sonnet-4-5@20250929", 200000, 64000},
        {"claude-3-5-sonnet-20241022", 200000, 8192},
        {"claude-3-5-sonnet-20240620", 200000, 8192},
        {"claude-3-5-sonnet-latest", 200000, 8192},
        {"claude-3-5-sonnet-v2@20241022", 200000, 8192},
        {"claude-3-7-sonnet-20250219", 200000, 64000},
        {"claude-3-7-sonnet-latest", 200000, 64000},
        {"claude-opus-4-1-20250805", 200000, 32000},
        {"claude-opus-4-1", 200000, 32000},
        {"claude-opus-4-20250514", 200000, 32000},
        {"claude-opus-4-0", 200000, 32000},
        {"claude-sonnet-4-20250514", 200000, 64000},
        {"claude-sonnet-4-0", 200000, 64000},
        {"claude-3-5-haiku-20241022", 200000, 8192},
        {"claude-3-5-haiku-latest", 200000, 8192},
        {"claude-haiku-4-5-20251001", 200000, 64000},
        {"claude-haiku-4-5", 200000, 64000},
        {"claude-opus-4-5-20251101", 200000, 64000},
        {"Claude-Sonnet-4-5", 200000, 64000},
        /* Claude 4.6 on: 1M windows (each model's page) */
        {"claude-opus-4-6", 1000000, 128000},
        {"claude-sonnet-4-6", 1000000, 64000},
        {"claude-opus-4-7", 1000000, 128000},
        {"claude-opus-4-8", 1000000, 128000},
        {"claude-sonnet-5", 1000000, 128000},
        {"claude-sonnet-5-5", 1000000, 128000},
        {"claude-haiku-5-5", 1000000, 128000},
        {"claude-opus-5", 1000000, 128000},
        {"claude-opus-5-5", 1000000, 128000},
        {"claude-fable-5", 1000000, 128000},
        {"claude-fable-5-1", 1000000, 128000},
        {"claude-mythos-5", 1000000, 128000},
        {"claude-mythos-5-1", 1000000, 128000},
        /* GPT-5.x: the input limit is the window */
        {"gpt-5.1-2025-11-13", 272000, 128000},
        {"gpt-5.2", 272000, 128000},
        {"gpt-5.4", 922000, 128000},
        /* DeepSeek: the API's names (V4) and the open weights */
        {"deepseek-chat", 1000000, 384000},
        {"deepseek-reasoner", 1000000, 384000},
        {"deepseek-v4-flash", 1000000, 384000},
        /* Gemini 3 (OpenAI-compatible endpoint) */
        {"gemini-3-flash", 1048576, 65536},
        {"gemini-3-flash-preview", 1048576, 65536},
        {"models/gemini-3-pro-preview", 1048576, 65536},
        {"deepseek-v3", 131072, 8192},
        {"deepseek-ai/DeepSeek-V3", 131072, 8192},
        {"deepseek-ai/DeepSeek-V3-0324", 131072, 8192},
        {"deepseek-r1", 131072, 32768},
        {"deepseek-ai/DeepSeek-R1-0528", 131072, 32768},
        {"deepseek-r1:7b", 131072, 32768},
        {"deepseek-v3:671b", 131072, 8192},
        /* Llama 3.x: Hugging Face ids (old and new names), Ollama tags, GGUF files */
        {"meta-llama/Llama-3.1-8B-Instruct", 131072, 8192},
        {"meta-llama/Meta-Llama-3.1-70B-Instruct", 131072, 8192},
        {"llama3.1", 131072, 8192},
        {"llama3.1:8b", 131072, 8192},
        {"llama3.1:70b-instruct-q4_K_M", 131072, 8192},
        {"meta-llama/Llama-3.2-3B-Instruct", 131072, 8192},
        {"llama3.2:1b", 131072, 8192},
        {"llama3.2-vision:11b", 131072, 8192},
        {"meta-llama/Llama-3.3-70B-Instruct", 131072, 8192},
        {"llama3.3:70b", 131072, 8192},
        {"/models/Llama-3.3-70B-Instruct-Q4_K_M.gguf", 131072, 8192},
        {"meta-llama/Meta-Llama-3-8B-Instruct", 8192, 4096},
        {"llama3:8b", 8192, 4096},
        /* Qwen 2.5 and 3 */
        {"Qwen/Qwen2.5-7B-Instruct", 32768, 8192},
        {"Qwen/Qwen2.5-Coder-32B-Instruct-AWQ", 32768, 8192},
        {"qwen2.5:7b", 32768, 8192},
        {"qwen2.5-coder:7b", 32768, 8192},
        {"Qwen/Qwen3-8B", 32768, 8192},
        {"Qwen/Qwen3-30B-A3B", 32768, 8192},
        {"qwen3:8b", 32768, 8192},
        {"qwen3", 32768, 8192},
        /* Mistral: 7B, NeMo, Small, Large (HF, Ollama, the API's names) */
        {"mistralai/Mistral-7B-Instruct-v0.3", 32768, 8192},
        {"mistralai/Mistral-7B-Instruct-v0.1", 8192, 4096},
        {"mistral", 32768, 8192},
        {"mistral:7b", 32768, 8192},
        {"open-mistral-7b", 32768, 8192},
        {"mistralai/Mistral-Nemo-Instruct-2407", 128000, 8192},
        {"mistral-nemo:12b", 128000, 8192},
        {"open-mistral-nemo", 128000, 8192},
        {"mistralai/Mistral-Small-24B-Instruct-2501", 32768, 8192},
        {"mistral-small-latest", 32768, 8192},
        {"mistral-small:24b", 32768, 8192},
        {"mistralai/Mistral-Small-3.1-24B-Instruct-2503", 131072, 8192},
        {"mistral-small3.1:24b", 131072, 8192},
        {"mistralai/Mistral-Small-3.2-24B-Instruct-2506", 131072, 8192},
        {"mistralai/Mistral-Large-Instruct-2411", 131072, 8192},
        {"mistral-large-latest", 131072, 8192},
        {"mistral-large:123b", 131072, 8192},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pc_model_entry *e = pc_model_table_find(cases[i].id);
        if (!e)
            fail_msg("%s: not found", cases[i].id);
        if (e->context_window != cases[i].window || e->max_output != cases[i].max_output)
            fail_msg("%s: got %s (%ld, %ld), want (%ld, %ld)", cases[i].id, e->key,
                     e->context_window, e->max_output, cases[i].window, cases[i].max_output);
    }
}

static void table_matches_the_longest_key(void **state) {
    (void)state;
    static const struct {
        const char *id, *key;
    } cases[] = {
        {"gpt-4o-mini-2024-07-18", "gpt-4o-mini"}, /* not gpt-4o */
        {"gpt-4o-2024-08-06", "gpt-4o"},
        {"o1-mini-2024-09-12", "o1-mini"}, /* not o1 */
        {"o1-2024-12-17", "o1"},
        {"o3-mini", "o3-mini"},
        {"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"}, /* not claude-sonnet-4 */
        {"claude-opus-4-1-20250805", "claude-opus-4-1"},
        {"claude-opus-4-20250514", "claude-opus-4"},
        {"mistral-small3.1:24b", "mistral-small3.1"},
        {"mistral-large-latest", "mistral-large"}, /* not mistral */
        {"meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama-3.1"}, /* not meta-llama-3 */
        {"deepseek-v3.1:671b", "deepseek-v3.1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const pc_model_entry *e = pc_model_table_find(cases[i].id);
        if (!e || strcmp(e->key, cases[i].key) != 0)
            fail_msg("%s: got %s, want %s", cases[i].id, e ? e->key : "nothing", cases[i].key);
    }
}

static void near_misses_match_nothing(void **state) {
    (void)state;
    static const char *const ids[] = {
        /* a key followed by a letter or digit is another model */
        "gpt-4o-minix", "gpt-4ox", "o1x", "o1-minix", "o3x", "o4", "gpt-5x", "gpt-4.10",
        "qwen3x", "qwen2.5vl", "llama3.10", "llama3.1x", "mistralx", "deepseek-chatx",
        "claude-sonnet-4-5x",
        /* after an API model's key only version qualifiers may follow */
        "gpt-4o-audio-preview", "gpt-4o-mini-tts", "gpt-4-32k", "gpt-5-codex",
        "o1-mini-high", "claude-sonnet-4-9", "claude-opus-4-2", "claude-3-5-sonnet-new",
        "gpt-4o-", "gpt-4o@", "gpt-4o-20241", "gpt-4o-2024-08", "gpt-4o-2024-8-6", "gpt-4o-123",
        "deepseek-reasoner-pro",
        /* not in the table, empty, only a path */
        "text-embedding-3-small", "llama2:7b", "phi3", "gemma2:9b", "", "meta-llama/",
        "claude", "gpt",
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const pc_model_entry *e = pc_model_table_find(ids[i]);
        if (e)
            fail_msg("\"%s\" matched %s", ids[i], e->key);
    }
    assert_null(pc_model_table_find(NULL));
    char long_id[400];
    memset(long_id, 'x', sizeof long_id - 1);
    memcpy(long_id, "gpt-4o-", 7);
    long_id[sizeof long_id - 1] = '\0';
    assert_null(pc_model_table_find(long_id));
}

/* The per-model rules, as the vendors document them (model_table.h). */
static void model_rules_follow_the_vendors(void **state) {
    (void)state;
    static const char *const completion[] = {"o1", "o1-mini", "o3-2025-04-16", "o3-mini",
                                             "o4-mini", "gpt-5", "gpt-5-mini-2025-08-07",
                                             "gpt-5-nano", "gpt-5.1", "openai/gpt-5"};
    for (size_t i = 0; i < sizeof completion / sizeof completion[0]; i++) {
        const pc_model_entry *e = pc_model_table_find(completion[i]);
        if (!e || e->tokens != PC_TOKENS_MAX_COMPLETION_TOKENS)
            fail_msg("%s: want max_completion_tokens", completion[i]);
    }
    assert_int_equal(pc_model_table_find("gpt-4o")->tokens, PC_TOKENS_MAX_TOKENS);
    assert_int_equal(pc_model_table_find("llama3.1:8b")->tokens, PC_TOKENS_MAX_TOKENS);
    assert_int_equal(pc_model_table_find("o3")->temperature, PC_TEMPERATURE_NEVER);
    assert_int_equal(pc_model_table_find("gpt-5-mini")->temperature, PC_TEMPERATURE_NEVER);
    assert_int_equal(pc_model_table_find("gpt-5.1")->temperature,
                     PC_TEMPERATURE_WITHOUT_REASONING);
    assert_int_equal(pc_model_table_find("gpt-5-chat-latest")->temperature, PC_TEMPERATURE_ANY);
    assert_int_equal(pc_model_table_find("gpt-4.1")->temperature, PC_TEMPERATURE_ANY);

    /* thinking: Anthropic's troubleshooting table, row by row */
    const pc_model_entry *fable = pc_model_table_find("claude-fable-5");
    assert_non_null(pc_thinking_refusal(fable, "enabled"));
    assert_non_null(pc_thinking_refusal(fable, "disabled"));
    assert_null(pc_thinking_refusal(fable, "adaptive"));
    assert_non_null(pc_thinking_refusal(pc_model_table_find("claude-mythos-5"), "disabled"));
    const pc_model_entry *opus47 = pc_model_table_find("claude-opus-4-7");
    assert_non_null(pc_thinking_refusal(opus47, "enabled"));
    assert_null(pc_thinking_refusal(opus47, "disabled"));
    assert_null(pc_thinking_refusal(opus47, "adaptive"));
    assert_non_null(pc_thinking_refusal(pc_model_table_find("claude-sonnet-5"), "enabled"));
    const pc_model_entry *opus46 = pc_model_table_find("claude-opus-4-6");
    assert_null(pc_thinking_refusal(opus46, "enabled"));
    assert_null(pc_thinking_refusal(opus46, "adaptive"));
    const pc_model_entry *s45 = pc_model_table_find("claude-sonnet-4-5-20250929");
    assert_non_null(pc_thinking_refusal(s45, "adaptive"));
    assert_null(pc_thinking_refusal(s45, "enabled"));
    assert_non_null(pc_thinking_refusal(pc_model_table_find("claude-3-5-haiku"), "enabled"));
    assert_null(pc_thinking_refusal(pc_model_table_find("gpt-4o"), "enabled"));
    assert_null(pc_thinking_refusal(NULL, "enabled"));
    /* a rules-only entry knows no limits */
    assert_int_equal(pc_model_table_find("gpt-5.5")->context_window, 0);
    assert_int_equal(pc_model_table_find("gpt-5.5")->temperature,
                     PC_TEMPERATURE_WITHOUT_REASONING);
    /* Claude 4.8 on take a mid-conversation system message, older ones not */
    assert_int_equal(pc_model_table_find("claude-opus-4-8")->mid_system, PC_MID_SYSTEM_TAKEN);
    assert_int_equal(pc_model_table_find("claude-fable-5-1")->mid_system, PC_MID_SYSTEM_TAKEN);
    assert_int_equal(opus47->mid_system, PC_MID_SYSTEM_REFUSED);
    assert_int_equal(s45->mid_system, PC_MID_SYSTEM_REFUSED);
    assert_int_equal(pc_model_table_find("claude-sonnet-5")->mid_system,
                     PC_MID_SYSTEM_UNKNOWN); /* the sources disagree */
    assert_non_null(pc_thinking_refusal(pc_model_table_find("claude-opus-5-5"), "disabled"));
    assert_null(pc_thinking_refusal(pc_model_table_find("claude-opus-5"), "disabled"));
    /* minimum cacheable prefix: Anthropic's per-model table, OpenAI's 1024 */
    assert_int_equal(pc_model_table_find("claude-opus-4-5")->min_cache_tokens, 4096);
    assert_int_equal(pc_model_table_find("claude-sonnet-4-5")->min_cache_tokens, 1024);
    assert_int_equal(pc_model_table_find("claude-haiku-4-5")->min_cache_tokens, 4096);
    assert_int_equal(pc_model_table_find("claude-opus-5")->min_cache_tokens, 512);
    assert_int_equal(pc_model_table_find("gpt-5.1")->min_cache_tokens, 1024);
}

/* List prices (USD per million tokens) where the vendor's page gives them;
 * none where it does not, or where the price has a long-context tier. */
static void prices_follow_the_pricing_pages(void **state) {
    (void)state;
    const pc_model_entry *e = pc_model_table_find("claude-opus-4-7");
    assert_true(e->price.known);
    assert_float_equal(e->price.input, 5.0, 1e-9);
    assert_float_equal(e->price.cached_input, 0.5, 1e-9);
    assert_float_equal(e->price.cache_write_5m, 6.25, 1e-9);
    assert_float_equal(e->price.cache_write_1h, 10.0, 1e-9);
    assert_float_equal(e->price.output, 25.0, 1e-9);
    e = pc_model_table_find("claude-fable-5-1");
    assert_true(e->price.known);
    assert_float_equal(e->price.cached_input, 0.25, 1e-9);
    assert_float_equal(e->price.cache_write_1h, 20.0, 1e-9);
    e = pc_model_table_find("claude-opus-5-5");
    assert_float_equal(e->price.input, 4.0, 1e-9);
    assert_float_equal(e->price.cache_write_5m, 5.0, 1e-9);
    e = pc_model_table_find("gpt-5.1");
    assert_true(e->price.known);
    assert_float_equal(e->price.input, 1.25, 1e-9);
    assert_float_equal(e->price.cached_input, 0.125, 1e-9);
    assert_float_equal(e->price.output, 10.0, 1e-9);
    /* unknown: no flat price (tiers), or not found */
    static const char *const unknown[] = {"claude-haiku-5-5", "gpt-5.4", "gpt-5.5",
                                          "gemini-3-pro",     "deepseek-reasoner",
                                          "llama3.1:8b",      "gpt-4o"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        if (pc_model_table_find(unknown[i])->price.known)
            fail_msg("%s: a price where none was found", unknown[i]);
    /* every known price is positive where it must be */
    size_t n = 0;
    const pc_model_entry *t = pc_model_table(&n);
    for (size_t i = 0; i < n; i++)
        if (t[i].price.known && (t[i].price.input <= 0 || t[i].price.output <= 0 ||
                                 t[i].price.cached_input < 0 || t[i].price.cache_write_5m < 0 ||
                                 t[i].price.cache_write_1h < 0))
            fail_msg("%s: price out of range", t[i].key);
}

/* Options merge as a JSON Merge Patch (RFC 7396), a top-level null kept. */
static void options_merge_is_a_merge_patch(void **state) {
    (void)state;
    json_t *row = json_loads("{\"service_tier\":\"flex\",\"output_config\":{\"effort\":"
                             "\"high\",\"x\":1},\"metadata\":{\"a\":1}}",
                             0, NULL);
    json_t *model = json_loads("{\"output_config\":{\"effort\":\"low\",\"x\":null},"
                               "\"temperature\":null,\"new\":{\"k\":null,\"v\":2}}",
                               0, NULL);
    json_t *got = pc_options_merge(row, model);
    json_t *want = json_loads("{\"service_tier\":\"flex\",\"output_config\":{\"effort\":"
                              "\"low\"},\"metadata\":{\"a\":1},\"temperature\":null,"
                              "\"new\":{\"v\":2}}",
                              0, NULL);
    assert_non_null(got);
    assert_true(json_equal(got, want));
    json_t *empty = pc_options_merge(NULL, NULL);
    assert_int_equal(json_object_size(empty), 0);
    json_t *arr = json_array();
    assert_null(pc_options_merge(arr, NULL));
    /* the inputs are left alone */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(row, "output_config"),
                                                        "x")),
                     1);
    json_decref(arr);
    json_decref(empty);
    json_decref(want);
    json_decref(got);
    json_decref(model);
    json_decref(row);
}

/* A provider-owned key and a thinking mode the model refuses are named. */
static void options_check_names_the_key_the_model_and_the_rule(void **state) {
    (void)state;
    static const char *const owned[] = {"model", "messages", "stream", NULL};
    char msg[512];
    json_t *o = json_loads("{\"stream\":false}", 0, NULL);
    assert_int_equal(pc_options_check(o, owned, "gpt-4o", "config.options", msg, sizeof msg),
                     -1);
    assert_non_null(strstr(msg, "config.options.stream: \"stream\" is written by the provider"));
    assert_non_null(strstr(msg, "model, messages, stream)"));
    json_decref(o);
    o = json_loads("{\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048}}", 0, NULL);
    assert_int_equal(pc_options_check(o, owned, "claude-opus-4-7", "options", msg, sizeof msg),
                     -1);
    assert_non_null(strstr(msg, "options.thinking: model \"claude-opus-4-7\" takes only "
                                "adaptive thinking"));
    assert_int_equal(pc_options_check(o, owned, "claude-sonnet-4-5", "options", msg, sizeof msg),
                     0);
    assert_int_equal(pc_options_check(o, owned, NULL, "options", msg, sizeof msg), 0);
    json_decref(o);
    o = json_loads("{\"thinking\":\"on\"}", 0, NULL);
    assert_int_equal(pc_options_check(o, owned, "m", "options", msg, sizeof msg), -1);
    assert_string_equal(msg, "options.thinking: expected an object with a string \"type\"");
    json_decref(o);
    o = json_array();
    assert_int_equal(pc_options_check(o, owned, "m", "options", msg, sizeof msg), -1);
    json_decref(o);
    assert_int_equal(pc_options_check(NULL, owned, "m", "options", msg, sizeof msg), 0);
}

static void table_is_consistent(void **state) {
    (void)state;
    size_t n = 0;
    const pc_model_entry *t = pc_model_table(&n);
    assert_true(n > 40);
    for (size_t i = 0; i < n; i++) {
        for (const char *c = t[i].key; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                fail_msg("%s: keys are lowercase", t[i].key);
        /* an entry that carries only rules leaves both limits unknown (0) */
        bool rules_only = t[i].context_window == 0 && t[i].max_output == 0 &&
                          (t[i].tokens || t[i].temperature || t[i].thinking);
        if (!rules_only && (t[i].context_window < 1 || t[i].max_output < 1 ||
                            t[i].max_output > t[i].context_window))
            fail_msg("%s: window %ld, max_output %ld", t[i].key, t[i].context_window,
                     t[i].max_output);
        for (size_t j = 0; j < i; j++)
            if (strcmp(t[i].key, t[j].key) == 0)
                fail_msg("%s: twice", t[i].key);
        /* each key finds itself */
        assert_ptr_equal(pc_model_table_find(t[i].key), &t[i]);
    }
    assert_non_null(strstr(pc_model_table_source, "2026-12"));
}

static void bodies_that_are_not_json_are_named(void **state) {
    (void)state;
    assert_null(pc_not_json("{\"data\":[]}", 11));
    assert_null(pc_not_json(" [1] ", 5));
    assert_string_equal(pc_not_json(NULL, 0), "an empty body");
    assert_string_equal(pc_not_json("\x1f\x8b\x08\x00", 4), "gzip data");
    assert_string_equal(pc_not_json("\r\n <!DOCTYPE html><html>", 25), "an HTML page");
    assert_string_equal(pc_not_json("not json{", 9), "a body that is not JSON");
    assert_string_equal(pc_not_json("{\"a\":1", 6), "a body that is not JSON");
}

static void server_reports_are_parsed(void **state) {
    (void)state;
    /* vLLM: max_model_len per model; entries without one are left out */
    const char *vllm =
        "{\"object\":\"list\",\"data\":[{\"id\":\"meta-llama/Llama-3.1-8B-Instruct\","
        "\"object\":\"model\",\"owned_by\":\"vllm\",\"max_model_len\":16384},"
        "{\"id\":\"lora-a\",\"max_model_len\":8192},{\"id\":\"no-len\"},"
        "{\"id\":\"bad\",\"max_model_len\":\"big\"},{\"id\":\"neg\",\"max_model_len\":-1},"
        "{\"max_model_len\":5},7]}";
    json_t *w = pc_windows_from_models_body(vllm, strlen(vllm));
    json_t *want = json_pack("{s:i,s:i}", "meta-llama/Llama-3.1-8B-Instruct", 16384, "lora-a",
                             8192);
    assert_true(json_equal(w, want));
    json_decref(want);
    json_decref(w);
    /* OpenAI, Ollama, llama.cpp: a list without windows */
    const char *plain = "{\"object\":\"list\",\"data\":[{\"id\":\"gpt-4o\",\"object\":"
                        "\"model\",\"owned_by\":\"system\"}]}";
    w = pc_windows_from_models_body(plain, strlen(plain));
    assert_non_null(w);
    assert_int_equal(json_object_size(w), 0);
    json_decref(w);
    static const char *const not_lists[] = {"", "not json{", "<html>404</html>", "[]",
                                            "{\"data\":{}}", "{\"models\":[]}", "null"};
    for (size_t i = 0; i < sizeof not_lists / sizeof not_lists[0]; i++)
        assert_null(pc_windows_from_models_body(not_lists[i], strlen(not_lists[i])));
    assert_null(pc_windows_from_models_body(NULL, 0));
    /* llama.cpp: the newer nested n_ctx wins over an older top-level one */
    static const struct {
        const char *body;
        long n_ctx;
    } props[] = {
        {"{\"default_generation_settings\":{\"n_ctx\":8192,\"params\":{}},\"total_slots\":1}",
         8192},
        {"{\"n_ctx\":4096,\"model_path\":\"/m.gguf\"}", 4096},
        {"{\"default_generation_settings\":{\"n_ctx\":2048},\"n_ctx\":4096}", 2048},
        {"{\"default_generation_settings\":{\"n_ctx\":0},\"n_ctx\":4096}", 4096},
        {"{\"default_generation_settings\":{}}", 0},
        {"{\"n_ctx\":\"4096\"}", 0},
        {"{\"n_ctx\":-5}", 0},
        {"{\"n_ctx\":1e9}", 0},
        {"not json", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof props / sizeof props[0]; i++)
        if (pc_window_from_props_body(props[i].body, strlen(props[i].body)) != props[i].n_ctx)
            fail_msg("%s: want %ld", props[i].body, props[i].n_ctx);
    /* the length counts, not a NUL */
    assert_int_equal(pc_window_from_props_body("{\"n_ctx\":4096}garbage", 14), 4096);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_secret_anywhere),
        cmocka_unit_test(overlapping_and_touching_occurrences),
        cmocka_unit_test(several_secrets),
        cmocka_unit_test(empty_secrets_and_text),
        cmocka_unit_test(short_secret_whole_words_only),
        cmocka_unit_test(masked_echoes),
        cmocka_unit_test(long_bodies),
        cmocka_unit_test(json_values),
        cmocka_unit_test(buf_str_is_janssons_string),
        cmocka_unit_test(buf_json_fails_when_a_key_cannot_grow),
        cmocka_unit_test(table_knows_well_known_models),
        cmocka_unit_test(table_matches_the_longest_key),
        cmocka_unit_test(near_misses_match_nothing),
        cmocka_unit_test(table_is_consistent),
        cmocka_unit_test(model_rules_follow_the_vendors),
        cmocka_unit_test(prices_follow_the_pricing_pages),
        cmocka_unit_test(options_merge_is_a_merge_patch),
        cmocka_unit_test(options_check_names_the_key_the_model_and_the_rule),
        cmocka_unit_test(server_reports_are_parsed),
        cmocka_unit_test(bodies_that_are_not_json_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
