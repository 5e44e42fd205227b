/*
 * tests/unit/test_openai_scan.c - provider-openai's fast path
 * (plugins/provider-openai/delta_scan.c): the fields of the usual chunks
 * (text, reasoning, split tool calls, finish_reason, usage), exact string
 * unescaping (every escape, surrogate pairs, raw UTF-8), the inputs it must
 * decline so the jansson path decides (invalid escapes and UTF-8, in-band
 * errors, several choices, duplicated or escaped member names, numbers it
 * cannot represent exactly, wrong types, deep nesting, trailing bytes), and
 * the decoder giving the same chunks with and without the fast path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "delta_scan.h"
#include "openai.h"

static bool scan(openai_scan *s, const char *text) {
    return openai_scan_chunk(s, text, strlen(text));
}

static void assert_str(const openai_scan_str *v, const char *want) {
    if (!want) {
        assert_null(v->p);
        return;
    }
    assert_non_null(v->p);
    assert_int_equal(v->len, strlen(want));
    assert_memory_equal(v->p, want, v->len);
    assert_int_equal(v->p[v->len], '\0');
}

static void text_and_reasoning(void **state) {
    (void)state;
    openai_scan s = {0};
    assert_true(scan(&s, "{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
                         "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                         "\"content\":\"Hel\"},\"logprobs\":null,\"finish_reason\":null}]}"));
    assert_true(s.delta.has_choice);
    assert_true(s.delta.has_delta);
    assert_str(&s.delta.content, "Hel");
    assert_str(&s.delta.reasoning_content, NULL);
    assert_str(&s.delta.finish_reason, NULL);
    assert_false(s.delta.has_usage);
    assert_int_equal(s.delta.ncalls, 0);

    assert_true(scan(&s, " {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\",\"reasoning\":"
                         "\"x\"}}]}\r\n"));
    assert_str(&s.delta.reasoning_content, "hm");
    assert_str(&s.delta.reasoning, "x");
    assert_str(&s.delta.content, NULL);

    /* no choices, empty choices, null delta */
    assert_true(scan(&s, "{}"));
    assert_false(s.delta.has_choice);
    assert_true(scan(&s, "{\"choices\":[]}"));
    assert_false(s.delta.has_choice);
    assert_true(scan(&s, "{\"choices\":[{\"delta\":null,\"finish_reason\":\"stop\"}]}"));
    assert_true(s.delta.has_choice);
    assert_false(s.delta.has_delta);
    assert_str(&s.delta.finish_reason, "stop");
    openai_scan_clear(&s);
    openai_scan_clear(&s);
    openai_scan_clear(NULL);
}

static void escapes_and_surrogates(void **state) {
    (void)state;
    openai_scan s = {0};
    assert_true(scan(&s, "{\"choices\":[{\"delta\":{\"content\":"
                         "\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9\\u00E9 \\u20ac "
                         "\\ud83d\\ude00 \\uD83D\\uDE00 \\u0041\"}}]}"));
    assert_str(&s.delta.content, "q\" b\\ s/ \b\f\n\r\t \xc3\xa9\xc3\xa9 \xe2\x82\xac "
                                 "\xf0\x9f\x98\x80 \xf0\x9f\x98\x80 A");
    /* raw UTF-8, every length, the edges of each */
    assert_true(scan(&s, "{\"choices\":[{\"delta\":{\"content\":\"\xc2\x80\xdf\xbf\xe0\xa0\x80"
                         "\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"}}]}"));
    assert_str(&s.delta.content, "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"
                                 "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
    /* an escaped value of a skipped member is fine */
    assert_true(scan(&s, "{\"id\":\"\\u00e9\\n\",\"choices\":[{\"delta\":{\"content\":\"\"}}]}"));
    assert_str(&s.delta.content, "");
    openai_scan_clear(&s);
}

static void split_tool_calls(void **state) {
    (void)state;
    openai_scan s = {0};
    assert_true(scan(&s, "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
                         "\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"pow\","
                         "\"arguments\":\"\"}},{\"index\":1,\"function\":{\"arguments\":"
                         "\"{\\\"x\\\"\"}},{\"id\":null,\"function\":null}]},"
                         "\"finish_reason\":null}]}"));
    assert_int_equal(s.delta.ncalls, 3);
    assert_true(s.delta.calls[0].has_index);
    assert_int_equal(s.delta.calls[0].index, 0);
    assert_str(&s.delta.calls[0].id, "call_a");
    assert_str(&s.delta.calls[0].name, "pow");
    assert_str(&s.delta.calls[0].args, "");
    assert_int_equal(s.delta.calls[1].index, 1);
    assert_str(&s.delta.calls[1].id, NULL);
    assert_str(&s.delta.calls[1].name, NULL);
    assert_str(&s.delta.calls[1].args, "{\"x\"");
    assert_false(s.delta.calls[2].has_index);
    assert_str(&s.delta.calls[2].id, NULL);
    assert_str(&s.delta.calls[2].args, NULL);
    /* many calls grow the reused array */
    char big[8192];
    size_t n = (size_t)snprintf(big, sizeof big, "{\"choices\":[{\"delta\":{\"tool_calls\":[");
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s{\"index\":%d,\"function\":{\"arguments\":\"%d\"}}",
                              i ? "," : "", i, i);
    snprintf(big + n, sizeof big - n, "]}}]}");
    assert_true(scan(&s, big));
    assert_int_equal(s.delta.ncalls, 40);
    assert_int_equal(s.delta.calls[39].index, 39);
    assert_str(&s.delta.calls[39].args, "39");
    /* a negative index is still an integer (the jansson path takes it too) */
    assert_true(scan(&s, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-3}]}}]}"));
    assert_int_equal(s.delta.calls[0].index, -3);
    openai_scan_clear(&s);
}

static void usage_fields(void **state) {
    (void)state;
    openai_scan s = {0};
    assert_true(scan(&s, "{\"id\":\"c3\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,"
                         "\"completion_tokens\":30,\"total_tokens\":130,\"prompt_tokens_details\":"
                         "{\"cached_tokens\":64,\"audio_tokens\":0},\"completion_tokens_details\":"
                         "{\"reasoning_tokens\":7,\"accepted_prediction_tokens\":0}}}"));
    assert_true(s.delta.has_usage);
    assert_false(s.delta.has_choice);
    assert_int_equal(s.delta.prompt_tokens, 100);
    assert_int_equal(s.delta.completion_tokens, 30);
    assert_true(s.delta.has_cached);
    assert_int_equal(s.delta.cached_tokens, 64);
    assert_true(s.delta.has_reasoning);
    assert_int_equal(s.delta.reasoning_tokens, 7);

    assert_true(scan(&s, "{\"usage\":{\"prompt_tokens\":null,\"completion_tokens\":-0,"
                         "\"prompt_tokens_details\":null,\"cost\":0.25}}"));
    assert_true(s.delta.has_usage);
    assert_int_equal(s.delta.prompt_tokens, 0);
    assert_int_equal(s.delta.completion_tokens, 0);
    assert_false(s.delta.has_cached);
    assert_false(s.delta.has_reasoning);

    assert_true(scan(&s, "{\"usage\":null,\"choices\":null}"));
    assert_false(s.delta.has_usage);
    assert_false(s.delta.has_choice);
    assert_true(scan(&s, "{\"usage\":{\"prompt_tokens\":999999999999999999}}"));
    assert_int_equal(s.delta.prompt_tokens, 999999999999999999LL);
    openai_scan_clear(&s);
}

/* Inputs the scanner must leave to jansson. */
static void declines(void **state) {
    (void)state;
    static const char *const cases[] = {
        /* invalid JSON: jansson refuses these too */
        "", " ", "[]", "{", "{\"choices\":[{}]", "{}x", "{} {}", "{}\x01", "{,}",
        "{\"a\":1,}", "{\"a\" 1}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":-}", "{\"a\":tru}",
        "{\"a\":\"\\x\"}", "{\"a\":\"\\u00zz\"}", "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}",
        "{\"a\":\"\\ud800\\u0041\"}", "{\"a\":\"\\u0000\"}", "{\"a\":\"\t\"}",
        "{\"a\":\"\xc0\x80\"}", "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xf5\x80\x80\x80\"}",
        "{\"a\":\"\xe2\x82\"}", "{\"a\":\"\x80\"}", "{\"a\":\"\xf4\x90\x80\x80\"}",
        "{\"a\":\"unterminated}",
        /* valid but unusual: the jansson path's */
        "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}", "{\"error\":null}",
        "{\"choices\":[{\"delta\":{}},{\"delta\":{}}]}",
        "{\"choices\":[],\"choices\":[]}",
        "{\"choices\":[{\"delta\":{\"content\":\"a\",\"content\":\"b\"}}]}",
        "{\"\\u0063hoices\":[{\"delta\":{\"content\":\"a\"}}]}", "{\"a\":1e5}", "{\"a\":1E-5}",
        "{\"a\":1234567890123456789}", "{\"usage\":{\"prompt_tokens\":1.0}}",
        "{\"usage\":{\"prompt_tokens\":-1}}", "{\"usage\":{\"prompt_tokens\":\"1\"}}",
        "{\"usage\":[]}", "{\"usage\":{\"prompt_tokens_details\":3}}",
        "{\"choices\":{}}", "{\"choices\":[null]}", "{\"choices\":[{\"delta\":[]}]}",
        "{\"choices\":[{\"delta\":{\"content\":5}}]}",
        "{\"choices\":[{\"delta\":{\"reasoning\":true}}]}",
        "{\"choices\":[{\"finish_reason\":1}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":{}}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[1]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":null}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":\"0\"}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":7}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":\"f\"}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":{}}}]}}]}",
    };
    openai_scan s = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (scan(&s, cases[i]))
            fail_msg("accepted case %zu: %s", i, cases[i]);
    }
    /* nesting deeper than the limit, in a skipped member */
    char deep[2 * OPENAI_SCAN_MAX_DEPTH + 32];
    size_t n = (size_t)snprintf(deep, sizeof deep, "{\"x\":");
    for (int i = 0; i < OPENAI_SCAN_MAX_DEPTH + 1; i++)
        deep[n++] = '[';
    for (int i = 0; i < OPENAI_SCAN_MAX_DEPTH + 1; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = '\0';
    assert_false(scan(&s, deep));
    /* not NUL-terminated: only `len` bytes count */
    assert_true(openai_scan_chunk(&s, "{}garbage", 2));
    assert_false(openai_scan_chunk(&s, NULL, 0));
    openai_scan_clear(&s);
}

/* ------------------------------------------------------------------------ */
/* The decoder, with and without the fast path                              */
/* ------------------------------------------------------------------------ */

static int collect(void *user_data, json_t *chunk) {
    json_array_append_new(user_data, chunk);
    return 0;
}

/* Decode the lines (NULL-terminated) both ways; the chunk texts agree. */
static void same_chunks(const char *const *lines) {
    char *text[2];
    for (int fast = 0; fast < 2; fast++) {
        json_t *chunks = json_array();
        openai_decoder *d = openai_decoder_new("llm", collect, chunks);
        assert_non_null(d);
        openai_decoder_set_fast(d, fast);
        for (size_t i = 0; lines[i]; i++)
            openai_decoder_event(d, lines[i], strlen(lines[i]));
        openai_decoder_end(d, NULL, false);
        openai_decoder_free(d);
        text[fast] = json_dumps(chunks, JSON_COMPACT);
        json_decref(chunks);
        assert_non_null(text[fast]);
    }
    assert_string_equal(text[0], text[1]);
    free(text[0]);
    free(text[1]);
}

static void decoder_agrees(void **state) {
    (void)state;
    static const char *const tools[] = {
        "{\"id\":\"c3\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":"
        "\"Computing \\u00e9.\"},\"finish_reason\":null}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":"
        "\"function\",\"function\":{\"name\":\"pow\",\"arguments\":\"\"}}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
        "\"{\\\"x\\\":\"}}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":"
        "{\"name\":\"sqrt\"}}]}}]}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
        "\"2}\"}}]}}]}",
        "{\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}",
        "{\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":30,"
        "\"prompt_tokens_details\":{\"cached_tokens\":64},\"completion_tokens_details\":"
        "{\"reasoning_tokens\":7}}}",
        "[DONE]",
        NULL};
    same_chunks(tools);
    static const char *const reasoning[] = {
        "{\"choices\":[{\"delta\":{\"reasoning_content\":\"think\"}}]}",
        "{\"choices\":[{\"delta\":{\"reasoning\":\"more\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"\\ud83d\\ude00\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"\"},\"finish_reason\":\"length\"}]}",
        "[DONE]",
        NULL};
    same_chunks(reasoning);
    /* mixed with chunks that take the jansson path */
    static const char *const mixed[] = {
        "{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"b\"}},{\"delta\":{\"content\":\"c\"}}]}",
        "{\"choices\":[{\"delta\":{\"content\":\"d\"}}],\"x\":1e3}",
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"i\"},{\"index\":null}]}}]}",
        NULL};
    same_chunks(mixed);
    static const char *const failures[][3] = {
        {"{\"error\":{\"message\":\"over\",\"type\":\"overloaded_error\"}}", NULL, NULL},
        {"{\"choices\":[{\"delta\":{\"content\":1}}]}", NULL, NULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}",
         "not json", NULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"content_filter\"}]}",
         "[DONE]", NULL},
        {"{\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}", "[DONE]", NULL},
        {"{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}", NULL,
         NULL},
    };
    for (size_t i = 0; i < sizeof failures / sizeof failures[0]; i++)
        same_chunks(failures[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_and_reasoning), cmocka_unit_test(escapes_and_surrogates),
        cmocka_unit_test(split_tool_calls),   cmocka_unit_test(usage_fields),
        cmocka_unit_test(declines),           cmocka_unit_test(decoder_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
