/*
 * tests/unit/test_text_escape.c - weir_text_escape (core/base/text_escape.c):
 * every control character is shown, never sent (C0 with newline and tab,
 * DEL, C1 as UTF-8, bytes that are not UTF-8), printable text and valid
 * UTF-8 pass as they are, a cut falls between pieces, and the return value
 * measures as snprintf's does (issue 31 item 5).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common.h"
#include "weir/host.h"

static void expect(const char *in, const char *want) {
    char out[256];
    size_t n = weir_text_escape(out, sizeof out, in);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
    assert_int_equal(weir_text_escape(NULL, 0, in), strlen(want));
}

static void escapes(void **state) {
    (void)state;
    expect("plain text, \\ and \"quotes\"", "plain text, \\ and \"quotes\"");
    expect("a\nb\rc\td", "a\\nb\\rc\\td");
    expect("\x1b[2J\x1b]0;title\x07", "\\x1b[2J\\x1b]0;title\\x07");
    expect("\x01\x1f\x7f", "\\x01\\x1f\\x7f");
    expect("caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x98\x80");
    expect("\xc2\x9b" "2J \xc2\x85 \xc2\x80 \xc2\xa0", "\\u009b2J \\u0085 \\u0080 \xc2\xa0");
    /* not UTF-8: a lone 8-bit CSI, a cut sequence, overlong, a surrogate */
    expect("\x9b" "2J", "\\x9b2J");
    expect("\xe2\x80", "\\xe2\\x80");
    expect("\xc0\xaf", "\\xc0\\xaf");
    expect("\xed\xa0\x80", "\\xed\\xa0\\x80");
    expect("", "");
    expect(NULL, "");
}

static void cuts(void **state) {
    (void)state;
    char out[8];
    /* "ab\x1b": "ab" fits, "\x1b" (4 bytes) does not: cut before it */
    assert_int_equal(weir_text_escape(out, 6, "ab\x1b" "cd"), 8);
    assert_string_equal(out, "ab");
    /* a UTF-8 character is never split */
    assert_int_equal(weir_text_escape(out, 4, "a\xe2\x80\xa6"), 4);
    assert_string_equal(out, "a");
    assert_int_equal(weir_text_escape(out, 1, "abc"), 3);
    assert_string_equal(out, "");
    assert_int_equal(weir_text_escape(out, 0, "abc"), 3);
}

/* weir__warn: one line on stderr, escaped */
static void warn_line(void **state) {
    (void)state;
    char path[] = "/tmp/weir-test-warn.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fd, 2) == 2);
    weir__warn("weir: x %s", "a\nweir: fake\x1b[2J");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[256] = "";
    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    assert_string_equal(buf, "weir: x a\\nweir: fake\\x1b[2J\n");
}

/* weir_set_warn_handler: the handler gets each line escaped, without its
 * newline, and nothing goes to stderr; NULL gives stderr back */
static char got[256];
static int calls;
static void take_line(const char *line, void *ud) {
    snprintf(got, sizeof got, "%s|%s", (const char *)ud, line);
    calls++;
}

static void warn_handler(void **state) {
    (void)state;
    char path[] = "/tmp/weir-test-warn.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fd, 2) == 2);
    static char tag[] = "ud";
    weir_set_warn_handler(take_line, tag);
    weir__warn("weir: y %s", "b\nc");
    weir_set_warn_handler(NULL, NULL);
    weir__warn("weir: after");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[256] = "";
    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    assert_int_equal(calls, 1);
    assert_string_equal(got, "ud|weir: y b\\nc");
    assert_string_equal(buf, "weir: after\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes),
        cmocka_unit_test(cuts),
        cmocka_unit_test(warn_line),
        cmocka_unit_test(warn_handler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
