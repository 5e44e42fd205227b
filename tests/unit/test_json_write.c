/*
 * tests/unit/test_json_write.c - the core's serializer (core/base/json_write.c)
 * against jansson's json_dumps(JSON_COMPACT | JSON_PRESERVE_ORDER |
 * JSON_ENCODE_ANY) as the oracle: every escape, control characters, NUL in
 * strings and keys, UTF-8 of every length, integer extremes, reals, deep and
 * wide values, chunks past 4 KiB, invalid UTF-8 refused as jansson refuses
 * it, a failing callback, allocation failure, and random values; and
 * weir__json_sole (core/base/util.c), what the log's handover relies on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common.h"

#define ORACLE_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)

/* weir__json_dump(v) is byte for byte json_dumps(v, ORACLE_FLAGS). */
static void same(const json_t *v) {
    char *want = json_dumps(v, ORACLE_FLAGS);
    char *got = weir__json_dump(v);
    assert_non_null(want);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(want);
    free(got);
}

static void same_text(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!v)
        fail_msg("%s: %s", text, e.text);
    same(v);
    json_decref(v);
}

static void test_scalars_and_escapes(void **state) {
    (void)state;
    same_text("null");
    same_text("true");
    same_text("false");
    same_text("0");
    same_text("-1");
    same_text("9223372036854775807");
    same_text("-9223372036854775808");
    same_text("1.5");
    same_text("-0.0");
    same_text("1e300");
    same_text("2.5e-300");
    same_text("0.1");
    same_text("123456789.125");
    same_text("\"\"");
    same_text("\"plain\"");
    same_text("\"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t\"");
    same_text("\"\\u0001\\u001f\\u007f\\u0000x\"");
    same_text("\"caf\\u00e9 \\u20ac \\ud83d\\ude00\"");
    same_text("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf\"");
    same_text("{}");
    same_text("[]");
    same_text("{\"b\":1,\"a\":[1,2,{\"z\":null,\"y\":false}],\"\":\"\"}");
    same_text("{\"k\\u0001ey\":\"v\\u0000al\",\"\\n\":[[[]]]}");
    same_text("[1,-2,3.25,\"x\",true,false,null,{},[]]");
}

static void test_insertion_order(void **state) {
    (void)state;
    json_t *o = json_object();
    for (int i = 50; i > 0; i--) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        json_object_set_new(o, key, json_integer(i * 1000003LL));
    }
    json_object_del(o, "k25");
    json_object_set_new(o, "k25", json_string("again"));
    json_object_setn_new(o, "nul\0key", 7, json_stringn("a\0b", 3)); /* a NUL in a key */
    same(o);
    json_decref(o);
}

static void test_long_and_deep(void **state) {
    (void)state;
    /* strings and arrays much longer than one 4 KiB chunk */
    size_t n = 50000;
    char *s = malloc(n + 1);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)(i % 7 == 0 ? '"' : i % 11 == 0 ? '\n' : 'a' + (char)(i % 26));
    s[n] = '\0';
    json_t *arr = json_array();
    json_array_append_new(arr, json_string(s));
    for (int i = 0; i < 3000; i++)
        json_array_append_new(arr, json_pack("{s:i, s:s}", "i", i, "t", "\xc3\xa9\t"));
    same(arr);
    json_decref(arr);
    free(s);
    json_t *deep = json_integer(7);
    for (int i = 0; i < 500; i++)
        deep = i % 2 ? json_pack("[o]", deep) : json_pack("{s:o}", "d", deep);
    same(deep);
    json_decref(deep);
    /* the deepest value jansson parses (2,048 levels), inside an envelope */
    size_t levels = 2048;
    char *text = malloc(2 * levels + 1);
    assert_non_null(text);
    memset(text, '[', levels);
    memset(text + levels, ']', levels);
    text[2 * levels] = '\0';
    json_t *parsed = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(parsed);
    json_t *envelope = json_pack("{s:I, s:{s:{s:o}}}", "seq", (json_int_t)7, "data", "result",
                                 "content", parsed);
    same(envelope);
    json_decref(envelope);
}

static void refused(const char *bytes, size_t len) {
    json_t *v = json_stringn_nocheck(bytes, len);
    assert_non_null(v);
    char *want = json_dumps(v, ORACLE_FLAGS);
    char *got = weir__json_dump(v);
    assert_null(want); /* jansson refuses invalid UTF-8 ... */
    assert_null(got);  /* ... and so does the writer */
    json_decref(v);
}

static void test_invalid_utf8(void **state) {
    (void)state;
    refused("\x80", 1);            /* a lone continuation byte */
    refused("\xc0\xaf", 2);        /* overlong '/' */
    refused("\xc1\xbf", 2);        /* overlong */
    refused("\xe0\x80\xaf", 3);    /* overlong, 3 bytes */
    refused("\xf0\x80\x80\xaf", 4); /* overlong, 4 bytes */
    refused("\xed\xa0\x80", 3);    /* a surrogate */
    refused("\xf4\x90\x80\x80", 4); /* past U+10FFFF */
    refused("\xf5\x80\x80\x80", 4);
    refused("ab\xc3", 3);          /* truncated */
    refused("\xe2\x82", 2);
    refused("\xc3(", 2);           /* a bad continuation */
}

static int fail_cb(const char *buf, size_t size, void *ud) {
    (void)buf;
    (void)size;
    int *calls = ud;
    return ++*calls >= 2 ? -1 : 0;
}

static void test_failures(void **state) {
    (void)state;
    json_t *big = json_array();
    for (int i = 0; i < 2000; i++)
        json_array_append_new(big, json_string("0123456789"));
    int calls = 0;
    assert_int_equal(weir__json_write(big, fail_cb, &calls), -1);
    assert_int_equal(calls, 2);
    assert_int_equal(weir__json_write(NULL, fail_cb, &calls), -1);
    assert_int_equal(weir__json_write(big, NULL, NULL), -1);
    assert_null(weir__json_dump(NULL));
    /* allocation failure at every point fails cleanly, never a short text */
    for (long k = 1; k < 40; k++) {
        weir__alloc_fail_after(k);
        char *s = weir__json_dump(big);
        weir__alloc_fail_after(0);
        if (s) {
            char *want = json_dumps(big, ORACLE_FLAGS);
            assert_string_equal(s, want);
            free(want);
            free(s);
        }
    }
    json_decref(big);
}

/* Random values (a fixed seed): strings of ASCII, escapes, UTF-8 of every
 * length and NUL; integers of every size; reals; nesting. */
static unsigned long long rng = 88172645463325252ULL;
static unsigned next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 11);
}

static json_t *random_string(void) {
    static const char *pieces[] = {"a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x01", "\x1f",
                                   "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                   "\xef\xbb\xbf", "\xf4\x8f\xbf\xbf", "\xc2\x80", "\xe0\xa0\x80"};
    char buf[256];
    size_t len = 0, n = next() % 24;
    for (size_t i = 0; i < n; i++) {
        if (next() % 17 == 0) {
            buf[len++] = '\0';
            continue;
        }
        const char *p = pieces[next() % (sizeof pieces / sizeof *pieces)];
        size_t pl = strlen(p);
        memcpy(buf + len, p, pl);
        len += pl;
    }
    return json_stringn(buf, len);
}

static json_t *random_value(int depth) {
    switch (next() % (depth > 5 ? 5 : 7)) {
    case 0: { /* every magnitude, both signs (built unsigned: no overflow) */
        unsigned long long u = (unsigned long long)next() << (next() % 33);
        return json_integer(next() % 2 ? (json_int_t)(u >> 1) : -(json_int_t)(u >> 1));
    }
    case 1: return json_real((double)(int)next() / (double)(1 + next() % 1000));
    case 2: return random_string();
    case 3: return next() % 2 ? json_true() : json_null();
    case 4: return json_false();
    case 5: {
        json_t *a = json_array();
        for (unsigned i = next() % 6; i > 0; i--)
            json_array_append_new(a, random_value(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (unsigned i = next() % 6; i > 0; i--) {
            json_t *k = random_string();
            json_object_setn_new(o, json_string_value(k), json_string_length(k),
                                 random_value(depth + 1));
            json_decref(k);
        }
        return o;
    }
    }
}

static void test_random(void **state) {
    (void)state;
    for (int i = 0; i < 3000; i++) {
        json_t *v = random_value(0);
        same(v);
        json_decref(v);
    }
}

/* weir__json_sole: containers held once, scalars may be shared. */
/* weir__random_id (util.c): "<prefix>-<16 hex digits>", no dash without a
 * prefix, cut to the buffer as snprintf cuts, two ids apart. */
static void test_random_id(void **state) {
    (void)state;
    char a[64], b[64], small[6], one[1] = {'x'};
    assert_ptr_equal(weir__random_id(a, sizeof a, "in"), a);
    assert_int_equal(strlen(a), 2 + 1 + 16);
    assert_memory_equal(a, "in-", 3);
    assert_int_equal(strspn(a + 3, "0123456789abcdef"), 16);
    weir__random_id(b, sizeof b, "in");
    assert_string_not_equal(a, b);
    weir__random_id(a, sizeof a, NULL);
    assert_int_equal(strlen(a), 16);
    assert_int_equal(strspn(a, "0123456789abcdef"), 16);
    weir__random_id(a, sizeof a, "");
    assert_int_equal(strlen(a), 16);
    weir__random_id(small, sizeof small, "ctx");
    assert_int_equal(strlen(small), 5); /* 5 characters and the NUL */
    assert_memory_equal(small, "ctx-", 4);
    weir__random_id(small, sizeof small, "toolong");
    assert_string_equal(small, "toolo");
    weir__random_id(one, sizeof one, "in");
    assert_int_equal(one[0], '\0');
    weir__random_id(one, 0, "in"); /* nothing written */
}

static void test_sole(void **state) {
    (void)state;
    assert_false(weir__json_sole(NULL));
    json_t *shared_str = json_string("shared");
    json_t *v = json_pack("{s:[i, O], s:{s:b}, s:n}", "a", 1, shared_str, "o", "t", 1, "z");
    assert_true(weir__json_sole(v));
    json_t *inner = json_object_get(v, "o");
    json_incref(inner); /* a second holder of a container */
    assert_false(weir__json_sole(v));
    json_decref(inner);
    assert_true(weir__json_sole(v));
    json_incref(v);
    assert_false(weir__json_sole(v));
    json_decref(v);
    json_decref(v);
    json_decref(shared_str);
    json_t *deep = json_array();
    for (int i = 0; i < 70; i++)
        deep = json_pack("[o]", deep);
    assert_false(weir__json_sole(deep)); /* too deep to check: copied */
    json_decref(deep);
    json_t *s = json_string("x");
    assert_true(weir__json_sole(s));
    json_decref(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalars_and_escapes),
        cmocka_unit_test(test_insertion_order),
        cmocka_unit_test(test_long_and_deep),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_sole),
        cmocka_unit_test(test_random_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
