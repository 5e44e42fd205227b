/*
 * tests/unit/test_sse.c - the incremental SSE parser (core/format/sse.c): fields,
 * line endings, chunk boundaries, limits, hostile input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sse.h"

/* Events rendered as "<event>|<data>\n" (data bytes verbatim). */
typedef struct sink {
    char *text;
    size_t len;
    int count;
    int stop_at; /* return 7 from this (1-based) event; 0 = never */
} sink;

static int collect(void *ud, const char *event, const char *data, size_t data_len) {
    sink *s = ud;
    size_t el = strlen(event);
    s->text = realloc(s->text, s->len + el + data_len + 3);
    assert_non_null(s->text);
    memcpy(s->text + s->len, event, el);
    s->len += el;
    s->text[s->len++] = '|';
    memcpy(s->text + s->len, data, data_len);
    s->len += data_len;
    s->text[s->len++] = '\n';
    s->text[s->len] = '\0';
    assert_int_equal(data[data_len], '\0');
    s->count++;
    return s->stop_at && s->count == s->stop_at ? 7 : 0;
}

/* Parse `in` (len bytes) in one feed + finish; returns the rendering. */
static char *parse_all(const char *in, size_t len, int *rc_out) {
    sink s = {0};
    weir__sse *p;
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    int rc = weir__sse_feed(p, in, len);
    if (!rc)
        rc = weir__sse_finish(p);
    weir__sse_destroy(p);
    if (rc_out)
        *rc_out = rc;
    return s.text ? s.text : strdup("");
}

static void expect_events(const char *in, const char *want) {
    int rc;
    char *got = parse_all(in, strlen(in), &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(got, want);
    free(got);
}

static void test_sse_single_data_event(void **state) {
    expect_events("data: hello\n\n", "|hello\n");
}

static void test_sse_multiline_data_joined_with_newline(void **state) {
    expect_events("data: one\ndata: two\ndata:\ndata: four\n\n", "|one\ntwo\n\nfour\n");
}

static void test_sse_event_field_names_the_event(void **state) {
    expect_events("event: message_start\ndata: {}\n\ndata: x\n\n", "message_start|{}\n|x\n");
}

static void test_sse_only_one_space_after_colon_is_stripped(void **state) {
    expect_events("data:x\n\ndata:  two spaces\n\nevent:e\ndata: \n\n",
                  "|x\n| two spaces\ne|\n");
}

static void test_sse_comments_are_ignored(void **state) {
    expect_events(": keep-alive\n:\ndata: a\n: between\ndata: b\n\n", "|a\nb\n");
}

static void test_sse_id_retry_and_unknown_fields_are_ignored(void **state) {
    expect_events("id: 42\nretry: 1000\nfoo: bar\nDATA: upper\ndata: real\n\n", "|real\n");
}

static void test_sse_field_without_colon_has_empty_value(void **state) {
    expect_events("data\n\nevent\ndata: x\n\n", "|\n|x\n");
}

static void test_sse_cr_lf_and_crlf_line_endings(void **state) {
    expect_events("data: lf\n\ndata: cr\r\rdata: crlf\r\n\r\ndata: mixed\r\ndata: two\r\r\n",
                  "|lf\n|cr\n|crlf\n|mixed\ntwo\n");
}

static void test_sse_blank_line_without_data_dispatches_nothing(void **state) {
    /* an event: alone is dropped, and does not leak into the next event */
    expect_events("event: lonely\n\n\n\ndata: after\n\n", "|after\n");
}

static void test_sse_crlf_split_across_chunks_is_one_line_end(void **state) {
    sink s = {0};
    weir__sse *p;
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    assert_int_equal(weir__sse_feed(p, "data: a\r", 8), 0);
    assert_int_equal(s.count, 0);
    assert_int_equal(weir__sse_feed(p, "\n", 1), 0);
    assert_int_equal(s.count, 0); /* CR LF is one line end, not a blank line */
    assert_int_equal(weir__sse_feed(p, "\r", 1), 0);
    assert_int_equal(s.count, 1);
    assert_int_equal(weir__sse_feed(p, "\ndata: b\n\n", 10), 0);
    assert_int_equal(s.count, 2);
    assert_string_equal(s.text, "|a\n|b\n");
    weir__sse_destroy(p);
    free(s.text);
}

static const char sample[] =
    ": comment\r\n"
    "event: message_start\r\n"
    "data: {\"type\":\"message_start\"}\r\n"
    "\r\n"
    "event: content_block_delta\n"
    "data: line one\n"
    "data:line two\n"
    "id: 7\n"
    "\n"
    "data: cr only\r"
    "\r"
    "data: \xc3\xa9t\xc3\xa9\r\n"
    "\n"
    "data: [DONE]\n"
    "\n"
    "data: tail without blank line";

static const char sample_events[] =
    "message_start|{\"type\":\"message_start\"}\n"
    "content_block_delta|line one\nline two\n"
    "|cr only\n"
    "|\xc3\xa9t\xc3\xa9\n"
    "|[DONE]\n"
    "|tail without blank line\n";

static void test_sse_every_split_point_gives_identical_events(void **state) {
    size_t n = sizeof sample - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        sink s = {0};
        weir__sse *p;
        assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
        assert_int_equal(weir__sse_feed(p, sample, cut), 0);
        assert_int_equal(weir__sse_feed(p, sample + cut, n - cut), 0);
        assert_int_equal(weir__sse_finish(p), 0);
        assert_string_equal(s.text, sample_events);
        weir__sse_destroy(p);
        free(s.text);
    }
    /* and one byte at a time */
    sink s = {0};
    weir__sse *p;
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(weir__sse_feed(p, sample + i, 1), 0);
    assert_int_equal(weir__sse_finish(p), 0);
    assert_string_equal(s.text, sample_events);
    weir__sse_destroy(p);
    free(s.text);
}

static void test_sse_every_pair_of_split_points_gives_identical_events(void **state) {
    size_t n = sizeof sample - 1;
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b++) {
            sink s = {0};
            weir__sse *p;
            assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
            assert_int_equal(weir__sse_feed(p, sample, a), 0);
            assert_int_equal(weir__sse_feed(p, sample + a, b - a), 0);
            assert_int_equal(weir__sse_feed(p, sample + b, n - b), 0);
            assert_int_equal(weir__sse_finish(p), 0);
            assert_string_equal(s.text, sample_events);
            weir__sse_destroy(p);
            free(s.text);
        }
    }
}

static void test_sse_finish_flushes_an_unterminated_event(void **state) {
    sink s = {0};
    weir__sse *p;
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    assert_int_equal(weir__sse_feed(p, "data: a\ndata: b\n", 16), 0);
    assert_int_equal(s.count, 0);
    assert_int_equal(weir__sse_finish(p), 0);
    assert_int_equal(s.count, 1);
    assert_string_equal(s.text, "|a\nb\n");
    assert_int_equal(weir__sse_finish(p), 0); /* nothing pending: no second event */
    assert_int_equal(s.count, 1);
    weir__sse_destroy(p);
    free(s.text);
}

static void test_sse_done_marker_is_passed_like_any_data(void **state) {
    expect_events("data: [DONE]\n\n", "|[DONE]\n");
}

static void test_sse_data_may_contain_nul_bytes(void **state) {
    int rc;
    char *got = parse_all("data: a\0b\n\n", 11, &rc);
    assert_int_equal(rc, 0);
    assert_memory_equal(got, "|a\0b\n", 6);
    free(got);
}

static void test_sse_leading_bom_is_stripped(void **state) {
    expect_events("\xEF\xBB\xBF" "data: x\n\n", "|x\n");
}

static void test_sse_callback_stop_value_is_returned_and_sticks(void **state) {
    sink s = {.stop_at = 2};
    weir__sse *p;
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    const char *in = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
    assert_int_equal(weir__sse_feed(p, in, strlen(in)), 7);
    assert_int_equal(s.count, 2);
    assert_int_equal(weir__sse_feed(p, in, strlen(in)), 7);
    assert_int_equal(weir__sse_finish(p), 7);
    assert_int_equal(s.count, 2);
    weir__sse_destroy(p);
    free(s.text);
}

static void test_sse_line_over_the_limit_is_an_error(void **state) {
    sink s = {0};
    weir__sse *p;
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    weir__sse_set_limit(p, 16);
    assert_int_equal(weir__sse_feed(p, "data: 0123456789", 16), 0); /* exactly the limit */
    assert_int_equal(weir__sse_feed(p, "\n\n", 2), 0);
    assert_int_equal(weir__sse_feed(p, "data: 01234", 11), 0);
    assert_int_equal(weir__sse_feed(p, "567890", 6), WEIR__SSE_TOO_LONG); /* 17 bytes */
    assert_int_equal(weir__sse_feed(p, "\n\n", 2), WEIR__SSE_TOO_LONG);
    assert_int_equal(weir__sse_finish(p), WEIR__SSE_TOO_LONG);
    assert_string_equal(s.text, "|0123456789\n");
    weir__sse_destroy(p);
    free(s.text);
}

static void test_sse_joined_data_over_the_limit_is_an_error(void **state) {
    sink s = {0};
    weir__sse *p;
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    weir__sse_set_limit(p, 16);
    const char *in = "data: 12345678\ndata: 12345678\n\n"; /* 8 + 1 + 8 = 17 */
    assert_int_equal(weir__sse_feed(p, in, strlen(in)), WEIR__SSE_TOO_LONG);
    assert_int_equal(s.count, 0);
    weir__sse_destroy(p);
}

static void test_sse_default_limit_is_8_mib(void **state) {
    size_t n = WEIR__SSE_MAX_LINE + 1;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'a', n);
    sink s = {0};
    weir__sse *p;
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    assert_int_equal(weir__sse_feed(p, big, n - 1), 0);
    assert_int_equal(weir__sse_feed(p, big, 1), WEIR__SSE_TOO_LONG);
    weir__sse_destroy(p);
    free(big);
}

static void test_sse_hostile_input_does_not_crash(void **state) {
    uint32_t x = 12345;
    char buf[4096];
    for (int round = 0; round < 200; round++) {
        size_t n = 0;
        for (; n < sizeof buf; n++) {
            x = x * 1103515245u + 12345u;
            unsigned r = (x >> 16) & 0xff;
            /* bias toward the bytes the parser cares about */
            static const char special[] = "\r\n:d ae\0";
            buf[n] = (r & 1) ? special[(r >> 1) % 8] : (char)r;
        }
        sink s = {0};
        weir__sse *p;
        assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
        weir__sse_set_limit(p, 64);
        size_t off = 0;
        int rc = 0;
        while (off < n && rc == 0) {
            x = x * 1103515245u + 12345u;
            size_t chunk = 1 + (x >> 16) % 97;
            if (chunk > n - off)
                chunk = n - off;
            rc = weir__sse_feed(p, buf + off, chunk);
            off += chunk;
        }
        if (rc == 0)
            rc = weir__sse_finish(p);
        assert_true(rc == 0 || rc == WEIR__SSE_TOO_LONG);
        weir__sse_destroy(p);
        free(s.text);
    }
}

static void test_sse_invalid_arguments(void **state) {
    weir__sse *p = (weir__sse *)1;
    assert_int_equal(weir__sse_create(NULL, NULL, &p), WEIR_E_INVAL);
    assert_null(p);
    assert_int_equal(weir__sse_create(collect, NULL, NULL), WEIR_E_INVAL);
    assert_int_equal(weir__sse_feed(NULL, "x", 1), WEIR__SSE_INVAL);
    assert_int_equal(weir__sse_finish(NULL), WEIR__SSE_INVAL);
    sink s = {0};
    assert_int_equal(weir__sse_create(collect, &s, &p), WEIR_OK);
    assert_int_equal(weir__sse_feed(p, NULL, 1), WEIR__SSE_INVAL);
    assert_int_equal(weir__sse_feed(p, NULL, 0), 0);
    weir__sse_destroy(p);
    weir__sse_destroy(NULL);
}

static void test_sse_allocation_failures_are_reported(void **state) {
    const char *in = "event: e\ndata: a long enough first line\ndata: b\n\n";
    for (long n = 1;; n++) {
        sink s = {0};
        weir__sse *p = NULL;
        weir__alloc_fail_after(n);
        int rc = weir__sse_create(collect, &s, &p);
        if (rc == WEIR_OK) {
            weir__sse_feed(p, "data: split ", 12); /* forces a pending line */
            rc = weir__sse_feed(p, in, strlen(in));
        }
        weir__alloc_fail_after(-1);
        if (rc == WEIR_OK) {
            assert_string_equal(s.text, "|split event: e\na long enough first line\nb\n");
            weir__sse_destroy(p);
            free(s.text);
            break;
        }
        assert_true(rc == WEIR_E_NOMEM || rc == WEIR__SSE_NOMEM);
        assert_int_equal(s.count, 0);
        weir__sse_destroy(p);
        free(s.text);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_single_data_event),
        cmocka_unit_test(test_sse_multiline_data_joined_with_newline),
        cmocka_unit_test(test_sse_event_field_names_the_event),
        cmocka_unit_test(test_sse_only_one_space_after_colon_is_stripped),
        cmocka_unit_test(test_sse_comments_are_ignored),
        cmocka_unit_test(test_sse_id_retry_and_unknown_fields_are_ignored),
        cmocka_unit_test(test_sse_field_without_colon_has_empty_value),
        cmocka_unit_test(test_sse_cr_lf_and_crlf_line_endings),
        cmocka_unit_test(test_sse_blank_line_without_data_dispatches_nothing),
        cmocka_unit_test(test_sse_crlf_split_across_chunks_is_one_line_end),
        cmocka_unit_test(test_sse_every_split_point_gives_identical_events),
        cmocka_unit_test(test_sse_every_pair_of_split_points_gives_identical_events),
        cmocka_unit_test(test_sse_finish_flushes_an_unterminated_event),
        cmocka_unit_test(test_sse_done_marker_is_passed_like_any_data),
        cmocka_unit_test(test_sse_data_may_contain_nul_bytes),
        cmocka_unit_test(test_sse_leading_bom_is_stripped),
        cmocka_unit_test(test_sse_callback_stop_value_is_returned_and_sticks),
        cmocka_unit_test(test_sse_line_over_the_limit_is_an_error),
        cmocka_unit_test(test_sse_joined_data_over_the_limit_is_an_error),
        cmocka_unit_test(test_sse_default_limit_is_8_mib),
        cmocka_unit_test(test_sse_hostile_input_does_not_crash),
        cmocka_unit_test(test_sse_invalid_arguments),
        cmocka_unit_test(test_sse_allocation_failures_are_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
