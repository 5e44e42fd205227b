/*
 * tests/unit/test_provider_common.c - the secret scrubber the HTTP providers
 * share (plugins/provider-common/provider_common.c: pc_secrets, pc_scrub,
 * pc_scrub_json): full occurrences anywhere, overlapping and touching ones,
 * several secrets, short secrets as whole words only, masked echoes, empty
 * input, long bodies, JSON values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "provider_common.h"

#define R PC_REDACTED

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
