/*
 * tests/unit/test_tools_ffi.c - the tools-ffi plugin, loaded through the
 * host (weir_host_create with a row naming the built plugin by path) and
 * calling the functions of tests/tool-plugins/weirffitest.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_int.h"
#include "testutil.h"
#include "tools.h"

/* One config row: {library, symbol, prototype} plus `extra` (JSON object text or NULL). */
typedef struct row {
    const char *symbol;
    const char *prototype;
    const char *extra;
} row;

static const char *test_lib(void) { return wt_env("WEIR_FFI_TEST_LIB"); }

static int load_rows(const row *rows, size_t n, const char *library, weir_host **host,
                     weir_error *err) {
    char plugin[4096];
    snprintf(plugin, sizeof plugin, "%s/weir-tools-ffi.so", wt_env("WEIR_TEST_PLUGIN_DIR"));
    json_t *tools = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *r = rows[i].extra ? json_loads(rows[i].extra, 0, NULL) : json_object();
        assert_non_null(r);
        json_object_set_new(r, "library", json_string(library ? library : test_lib()));
        json_object_set_new(r, "symbol", json_string(rows[i].symbol));
        json_object_set_new(r, "prototype", json_string(rows[i].prototype));
        json_array_append_new(tools, r);
    }
    json_t *config = json_pack("{s:[{s:s, s:s, s:{s:o}}]}", "plugins", "id", "ffi", "plugin",
                               plugin, "config", "tools", tools);
    assert_non_null(config);
    int rc = weir_host_create(config, host, err);
    json_decref(config);
    return rc;
}

static weir_host *load_ok(const row *rows, size_t n) {
    weir_host *h = NULL;
    weir_error err = {0};
    int rc = load_rows(rows, n, NULL, &h, &err);
    if (rc != WEIR_OK)
        fail_msg("host create failed: %s", err.text);
    return h;
}

/* Load one row that must fail; returns the error text (static). */
static const char *load_fail(const row *r, const char *library) {
    static weir_error err;
    memset(&err, 0, sizeof err);
    weir_host *h = NULL;
    assert_int_not_equal(load_rows(r, 1, library, &h, &err), WEIR_OK);
    assert_null(h);
    return err.text;
}

/*
 * Call `tool` with `args` through the registry's argument check and the
 * body: the text of the first content block, or "error <code>: <text>".
 * `validate` false skips the schema check (to reach the plugin's own).
 */
static char *call_tool(weir_host *h, const char *tool, const char *args, bool validate) {
    const weir__tool_def *def = weir__tools_find(weir__host_tools(h), tool);
    if (!def)
        fail_msg("no tool '%s'", tool);
    weir__tool_outcome o = {0};
    json_t *a = NULL;
    if (validate)
        assert_int_equal(weir__tool_parse_args(def, args, &a, &o), WEIR_OK);
    else
        a = json_loads(args, JSON_ALLOW_NUL, NULL);
    if (a)
        assert_int_equal(weir__tool_invoke(def, "call-1", NULL, a, &o), WEIR_OK);
    json_decref(a);
    const char *text = weir__json_str(json_array_get(o.content, 0), "text", "");
    char *out;
    if (o.is_error) {
        const char *code = weir__json_str(o.error, "code", "?");
        size_t n = strlen(text) + strlen(code) + 16;
        out = malloc(n);
        snprintf(out, n, "error %s: %s", code, text);
    } else {
        out = strdup(text);
    }
    weir__tool_outcome_clear(&o);
    return out;
}

static void expect(weir_host *h, const char *tool, const char *args, const char *want) {
    char *got = call_tool(h, tool, args, true);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "%s(%s): got %s, want %s\n", tool, args, got, want);
        free(got);
        fail();
    }
    free(got);
}

/* Errors of a tool name it, the deployment row and the index of its row in "tools". */
#define AT(tool) "tool '" tool "' (row 'ffi', tools[0]): "

/* ------------------------------------------------------------------------ */

static void every_supported_type_round_trips(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_bool", "bool t_bool(bool v)", NULL},
        {"t_not", "_Bool t_not(_Bool v)", NULL},
        {"t_char", "char t_char(char v)", NULL},
        {"t_schar", "signed char t_schar(signed char v)", NULL},
        {"t_uchar", "unsigned char t_uchar(unsigned char v)", NULL},
        {"t_short", "short t_short(short v)", NULL},
        {"t_ushort", "unsigned short t_ushort(unsigned short v)", NULL},
        {"t_int", "int t_int(int v)", NULL},
        {"t_uint", "unsigned t_uint(unsigned v)", NULL},
        {"t_long", "long t_long(long v)", NULL},
        {"t_ulong", "unsigned long t_ulong(unsigned long v)", NULL},
        {"t_llong", "long long t_llong(long long v)", NULL},
        {"t_ullong", "unsigned long long t_ullong(unsigned long long v)", NULL},
        {"t_size", "size_t t_size(size_t v)", NULL},
        {"t_ssize", "ssize_t t_ssize(ssize_t v)", NULL},
        {"t_i8", "int8_t t_i8(int8_t v)", NULL},
        {"t_i16", "int16_t t_i16(int16_t v)", NULL},
        {"t_i32", "int32_t t_i32(int32_t v)", NULL},
        {"t_i64", "int64_t t_i64(int64_t v)", NULL},
        {"t_u8", "uint8_t t_u8(uint8_t v)", NULL},
        {"t_u16", "uint16_t t_u16(uint16_t v)", NULL},
        {"t_u32", "uint32_t t_u32(uint32_t v)", NULL},
        {"t_u64", "uint64_t t_u64(uint64_t v)", NULL},
        {"t_u64_max", "uint64_t t_u64_max(void)", NULL},
        {"t_float", "float t_float(float v)", NULL},
        {"t_double", "double t_double(double v)", NULL},
        {"t_mix", "double t_mix(int8_t a, uint16_t b, float c, double d, const char *s, bool e)",
         NULL},
        {"t_void", "void t_void(void)", NULL},
        {"t_void_calls", "int t_void_calls(void)", NULL},
    };
    weir_host *h = load_ok(rows, sizeof rows / sizeof rows[0]);
    expect(h, "t_bool", "{\"v\":true}", "true");
    expect(h, "t_not", "{\"v\":true}", "false");
    expect(h, "t_char", "{\"v\":\"q\"}", "\"q\"");
    expect(h, "t_char", "{\"v\":\"\\n\"}", "\"\\n\"");
    expect(h, "t_schar", "{\"v\":-128}", "-128");
    expect(h, "t_uchar", "{\"v\":255}", "255");
    expect(h, "t_short", "{\"v\":-32768}", "-32768");
    expect(h, "t_ushort", "{\"v\":65535}", "65535");
    expect(h, "t_int", "{\"v\":-2147483648}", "-2147483648");
    expect(h, "t_uint", "{\"v\":4294967295}", "4294967295");
    expect(h, "t_long", "{\"v\":-9223372036854775808}", "-9223372036854775808");
    expect(h, "t_ulong", "{\"v\":9223372036854775807}", "9223372036854775807");
    expect(h, "t_llong", "{\"v\":9223372036854775807}", "9223372036854775807");
    expect(h, "t_ullong", "{\"v\":0}", "0");
    expect(h, "t_size", "{\"v\":123456789012}", "123456789012");
    expect(h, "t_ssize", "{\"v\":-5}", "-5");
    expect(h, "t_i8", "{\"v\":127}", "127");
    expect(h, "t_i16", "{\"v\":-32768}", "-32768");
    expect(h, "t_i32", "{\"v\":2147483647}", "2147483647");
    expect(h, "t_i64", "{\"v\":-9223372036854775807}", "-9223372036854775807");
    expect(h, "t_u8", "{\"v\":200}", "200");
    expect(h, "t_u16", "{\"v\":65535}", "65535");
    expect(h, "t_u32", "{\"v\":4294967295}", "4294967295");
    expect(h, "t_u64", "{\"v\":9223372036854775807}", "9223372036854775807");
    expect(h, "t_u64_max", "{}", "18446744073709551615");
    expect(h, "t_float", "{\"v\":0.1}", "0.1");
    expect(h, "t_float", "{\"v\":-3}", "-3");
    expect(h, "t_double", "{\"v\":0.1}", "0.1");
    expect(h, "t_double", "{\"v\":1e300}", "1e+300");
    expect(h, "t_mix", "{\"a\":-1,\"b\":2,\"c\":0.5,\"d\":0.25,\"s\":\"four\",\"e\":true}",
           "1005.75");
    expect(h, "t_void", "{}", "null");
    expect(h, "t_void", "{}", "null");
    expect(h, "t_void_calls", "{}", "2");
    weir_host_destroy(h);
}

static void schema_is_derived_from_the_prototype(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_mix", "double t_mix(int8_t a, uint16_t b, float c, double d, const char *s, bool e)",
         "{\"description\":\"mixed\",\"name\":\"mix\"}"},
        {"t_char", "char t_char(char v)", NULL},
        {"t_u64", "uint64_t t_u64(uint64_t v)", NULL},
    };
    weir_host *h = load_ok(rows, 3);
    json_t *schemas = weir__tools_schemas(weir__host_tools(h));
    char *s = weir__json_dump(schemas);
    assert_string_equal(
        s, "[{\"name\":\"mix\",\"description\":\"mixed\",\"parameters\":{\"type\":\"object\","
           "\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":-128,\"maximum\":127},"
           "\"b\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":65535},\"c\":{\"type\":"
           "\"number\"},\"d\":{\"type\":\"number\"},\"s\":{\"type\":\"string\"},\"e\":{\"type\":"
           "\"boolean\"}},\"required\":[\"a\",\"b\",\"c\",\"d\",\"s\",\"e\"],"
           "\"additionalProperties\":false}},"
           "{\"name\":\"t_char\",\"description\":\"char t_char(char v)\",\"parameters\":{\"type\":"
           "\"object\",\"properties\":{\"v\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":"
           "1}},\"required\":[\"v\"],\"additionalProperties\":false}},"
           "{\"name\":\"t_u64\",\"description\":\"uint64_t t_u64(uint64_t v)\",\"parameters\":{"
           "\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\",\"minimum\":0,"
           "\"maximum\":9223372036854775807}},\"required\":[\"v\"],\"additionalProperties\":"
           "false}}]");
    free(s);
    json_decref(schemas);
    weir_host_destroy(h);
}

static void integer_ranges_are_checked_before_the_call(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_i8", "int8_t t_i8(int8_t v)", NULL},
        {"t_uchar", "unsigned char t_uchar(unsigned char v)", NULL},
        {"t_uint", "unsigned int t_uint(unsigned int v)", NULL},
        {"t_float", "float t_float(float v)", NULL},
        {"t_char", "char t_char(char v)", NULL},
        {"t_int", "int t_int(int v)", NULL},
    };
    weir_host *h = load_ok(rows, sizeof rows / sizeof rows[0]);
    /* Through the registry: the derived schema refuses it, naming the field. */
    char *got = call_tool(h, "t_i8", "{\"v\":128}", true);
    assert_non_null(strstr(got, "error INVALID_ARGUMENTS: Error: invalid arguments for tool "
                                "'t_i8': $.v"));
    free(got);
    /* The plugin checks again itself: never truncation. */
    static const struct {
        const char *tool, *args, *want;
    } cases[] = {
        {"t_i8", "{\"v\":128}",
         "error OUT_OF_RANGE: Error: argument 'v': 128 is out of range for int8_t [-128, 127]"},
        {"t_i8", "{\"v\":-129}",
         "error OUT_OF_RANGE: Error: argument 'v': -129 is out of range for int8_t [-128, 127]"},
        {"t_uchar", "{\"v\":-1}",
         "error OUT_OF_RANGE: Error: argument 'v': -1 is out of range for unsigned char [0, "
         "255]"},
        {"t_uint", "{\"v\":4294967296}",
         "error OUT_OF_RANGE: Error: argument 'v': 4294967296 is out of range for unsigned int "
         "[0, 4294967295]"},
        {"t_float", "{\"v\":1e39}",
         "error OUT_OF_RANGE: Error: argument 'v': 1e+39 is out of range for float"},
        {"t_int", "{\"v\":1.5}", "error INVALID_ARGUMENTS: Error: argument 'v': expected an integer"},
        {"t_int", "{}", "error INVALID_ARGUMENTS: Error: argument 'v' is missing"},
        {"t_char", "{\"v\":\"ab\"}",
         "error INVALID_ARGUMENTS: Error: argument 'v': expected a single ASCII character"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        got = call_tool(h, cases[i].tool, cases[i].args, false);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
    weir_host_destroy(h);
}

static void out_parameters_are_returned(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_divmod", "int t_divmod(int a, int b, int *quotient, int *remainder)",
         "{\"out\":[{\"name\":\"quotient\",\"count\":1},"
         "{\"name\":\"remainder\",\"count\":1}]}"},
        {"t_minmax", "void t_minmax(double a, double b, double *lo, double *hi)",
         "{\"out\":[{\"name\":\"lo\",\"count\":1},{\"name\":\"hi\",\"count\":1}]}"},
    };
    weir_host *h = load_ok(rows, 2);
    expect(h, "t_divmod", "{\"a\":7,\"b\":2}", "{\"return\":0,\"quotient\":3,\"remainder\":1}");
    expect(h, "t_divmod", "{\"a\":7,\"b\":0}", "{\"return\":-1,\"quotient\":0,\"remainder\":0}");
    expect(h, "t_minmax", "{\"a\":2,\"b\":1.5}", "{\"lo\":1.5,\"hi\":2}");
    /* Out-parameters are not arguments. */
    char *got = call_tool(h, "t_divmod", "{\"a\":7,\"b\":2,\"quotient\":1}", true);
    assert_non_null(strstr(got, "error INVALID_ARGUMENTS"));
    free(got);
    weir_host_destroy(h);
}

/* The fill rows of weirffitest.c, each buffer sized by an argument. */
static const row fill_rows[] = {
    {"t_fill", "void t_fill(signed char *buf, int n)",
     "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":4096}]}"},
    {"t_fill_ints", "int t_fill_ints(size_t n, int *buf)",
     "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":64}]}"},
    {"t_fill_doubles", "void t_fill_doubles(double *buf, unsigned short n, double step)",
     "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":10}]}"},
    {"t_rgba", "void t_rgba(uint8_t *px)", "{\"out\":[{\"name\":\"px\",\"count\":4}]}"},
};

static void a_count_above_its_max_is_refused_before_the_call(void **state) {
    (void)state;
    weir_host *h = load_ok(fill_rows, sizeof fill_rows / sizeof fill_rows[0]);
    /* The argument's schema carries the bound, so the registry refuses first... */
    char *got = call_tool(h, "t_fill", "{\"n\":100000}", true);
    assert_string_equal(got, "error INVALID_ARGUMENTS: Error: invalid arguments for tool "
                             "'t_fill': $.n: 100000 is greater than the maximum 4096");
    free(got);
    /* ...and the plugin checks again itself: the function never runs. */
    static const struct {
        const char *tool, *args, *want;
    } cases[] = {
        {"t_fill", "{\"n\":100000}",
         "error OUT_OF_RANGE: Error: argument 'n': 100000 is out of range for the size of "
         "out-parameter 'buf' [0, 4096]"},
        {"t_fill", "{\"n\":4097}",
         "error OUT_OF_RANGE: Error: argument 'n': 4097 is out of range for the size of "
         "out-parameter 'buf' [0, 4096]"},
        {"t_fill", "{\"n\":-1}",
         "error OUT_OF_RANGE: Error: argument 'n': -1 is out of range for the size of "
         "out-parameter 'buf' [0, 4096]"},
        {"t_fill", "{\"n\":-2147483648}",
         "error OUT_OF_RANGE: Error: argument 'n': -2147483648 is out of range for the size of "
         "out-parameter 'buf' [0, 4096]"},
        {"t_fill_ints", "{\"n\":9223372036854775807}",
         "error OUT_OF_RANGE: Error: argument 'n': 9223372036854775807 is out of range for the "
         "size of out-parameter 'buf' [0, 64]"},
        {"t_fill_doubles", "{\"n\":65535,\"step\":1}",
         "error OUT_OF_RANGE: Error: argument 'n': 65535 is out of range for the size of "
         "out-parameter 'buf' [0, 10]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        got = call_tool(h, cases[i].tool, cases[i].args, false);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
    weir_host_destroy(h);
}

static void out_buffers_hold_count_elements(void **state) {
    (void)state;
    weir_host *h = load_ok(fill_rows, sizeof fill_rows / sizeof fill_rows[0]);
    expect(h, "t_fill", "{\"n\":9}", "{\"buf\":[-3,-2,-1,0,1,2,3,-3,-2]}");
    expect(h, "t_fill", "{\"n\":0}", "{\"buf\":[]}");
    expect(h, "t_fill_ints", "{\"n\":4}", "{\"return\":4,\"buf\":[-1,0,3,8]}");
    expect(h, "t_fill_ints", "{\"n\":0}", "{\"return\":0,\"buf\":[]}");
    expect(h, "t_fill_doubles", "{\"n\":3,\"step\":0.5}", "{\"buf\":[0,0.5,1]}");
    expect(h, "t_rgba", "{}", "{\"px\":[255,128,0,7]}");
    /* At the maximum the callee writes every byte of the buffer (ASan checks the edge). */
    char *got = call_tool(h, "t_fill", "{\"n\":4096}", true);
    size_t commas = 0;
    for (const char *c = got; *c; c++)
        commas += *c == ',';
    assert_int_equal(commas, 4095);
    assert_non_null(strstr(got, "{\"buf\":[-3,-2,-1,0,1,2,3,-3,"));
    assert_non_null(strstr(got, ",1,2,3,-3]}")); /* element 4095: 4095 % 7 - 3 */
    free(got);
    got = call_tool(h, "t_fill_ints", "{\"n\":64}", true);
    assert_non_null(strstr(got, ",3968]}")); /* 63 * 63 - 1 */
    free(got);
    /* The count argument's schema is 0 .. max; out-parameters are not arguments. */
    json_t *schemas = weir__tools_schemas(weir__host_tools(h));
    char *s = weir__json_dump(json_object_get(json_array_get(schemas, 0), "parameters"));
    assert_string_equal(s, "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\","
                           "\"minimum\":0,\"maximum\":4096}},\"required\":[\"n\"],"
                           "\"additionalProperties\":false}");
    free(s);
    s = weir__json_dump(json_object_get(json_array_get(schemas, 2), "parameters"));
    assert_string_equal(s, "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\","
                           "\"minimum\":0,\"maximum\":10},\"step\":{\"type\":\"number\"}},"
                           "\"required\":[\"n\",\"step\"],\"additionalProperties\":false}");
    free(s);
    json_decref(schemas);
    weir_host_destroy(h);
}

static void char_buffers_are_returned_as_strings(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_hello", "int t_hello(char *buf, int n, const char *who)",
         "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":64}]}"},
        {"t_letters", "void t_letters(char *buf, int n)",
         "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":30}]}"},
    };
    weir_host *h = load_ok(rows, 2);
    expect(h, "t_hello", "{\"n\":64,\"who\":\"weir\"}", "{\"return\":12,\"buf\":\"hello, weir!\"}");
    /* snprintf style: cut to n - 1 bytes and a NUL. */
    expect(h, "t_hello", "{\"n\":6,\"who\":\"weir\"}", "{\"return\":12,\"buf\":\"hello\"}");
    expect(h, "t_hello", "{\"n\":0,\"who\":\"weir\"}", "{\"return\":12,\"buf\":\"\"}");
    /* No NUL written: the string is all count bytes. */
    expect(h, "t_letters", "{\"n\":3}", "{\"buf\":\"abc\"}");
    expect(h, "t_letters", "{\"n\":30}", "{\"buf\":\"abcdefghijklmnopqrstuvwxyzabcd\"}");
    char *got = call_tool(h, "t_letters", "{\"n\":31}", false);
    assert_string_equal(got, "error OUT_OF_RANGE: Error: argument 'n': 31 is out of range for "
                             "the size of out-parameter 'buf' [0, 30]");
    free(got);
    weir_host_destroy(h);
}

/* A constant "count": 1 is one value, not an array (what the bare name used to give). */
static void count_1_is_one_value(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_divmod", "int t_divmod(int a, int b, int *quotient, int *remainder)",
         "{\"out\":[{\"name\":\"quotient\",\"count\":1},"
         "{\"name\":\"remainder\",\"count\":1}]}"},
        {"t_minmax", "void t_minmax(double a, double b, double *lo, double *hi)",
         "{\"out\":[{\"name\":\"lo\",\"count\":1},{\"name\":\"hi\",\"count\":1}]}"},
        {"t_fill_ints", "int t_fill_ints(size_t n, int *buf)",
         "{\"out\":[{\"name\":\"buf\",\"count\":1}]}"},
        {"t_fill_doubles", "void t_fill_doubles(double *buf, unsigned short n, double step)",
         "{\"out\":[{\"name\":\"buf\",\"count\":1}]}"},
    };
    weir_host *h = load_ok(rows, sizeof rows / sizeof rows[0]);
    expect(h, "t_divmod", "{\"a\":17,\"b\":5}", "{\"return\":0,\"quotient\":3,\"remainder\":2}");
    expect(h, "t_minmax", "{\"a\":-1,\"b\":4}", "{\"lo\":-1,\"hi\":4}");
    /* n stays an ordinary argument here; the function writes n elements, so pass 1 */
    expect(h, "t_fill_ints", "{\"n\":1}", "{\"return\":1,\"buf\":-1}");
    expect(h, "t_fill_doubles", "{\"n\":1,\"step\":0.5}", "{\"buf\":0}");
    weir_host_destroy(h);
}

/*
 * Issue #8 item 4: a bare name in "out" declares no size, whatever the type.
 * 'void fill(int *buf, int n)' with "out":["buf"] used to get one int, and
 * n=100000 wrote past it; now the row is refused, naming how to declare it.
 */
static void a_bare_name_is_refused_for_every_type(void **state) {
    (void)state;
    static const struct {
        row r;
        const char *want;
    } cases[] = {
        {{"t_fill_ints", "int t_fill_ints(size_t n, int *buf)", "{\"out\":[\"buf\"]}"},
         AT("t_fill_ints") "out-parameter 'buf' ('int *buf') has no size: a bare name in "
                           "\"out\" is not accepted; declare it as {\"name\": \"buf\", "
                           "\"count\": 1} for one value, {\"name\": \"buf\", \"count\": N} for N "
                           "values, or {\"name\": \"buf\", \"count\": \"<argument>\", \"max\": N} "
                           "for as many as an integer argument says, at most N"},
        {{"t_fill_doubles", "void t_fill_doubles(double *buf, unsigned short n, double step)",
          "{\"out\":[\"buf\"]}"},
         AT("t_fill_doubles") "out-parameter 'buf' ('double *buf') has no size: a bare name in "
                              "\"out\" is not accepted; declare it as {\"name\": \"buf\", "
                              "\"count\": 1} for one value"},
        {{"t_divmod", "int t_divmod(int a, int b, int *quotient, int *remainder)",
          "{\"out\":[{\"name\":\"quotient\",\"count\":1},\"remainder\"]}"},
         AT("t_divmod") "out-parameter 'remainder' ('int *remainder') has no size: a bare name "
                        "in \"out\" is not accepted; declare it as {\"name\": \"remainder\", "
                        "\"count\": 1} for one value"},
        {{"t_minmax", "void t_minmax(double a, double b, double *lo, double *hi)",
          "{\"out\":[\"lo\",\"hi\"]}"},
         AT("t_minmax") "out-parameter 'lo' ('double *lo') has no size"},
        /* the byte types, as before */
        {{"t_fill", "void t_fill(signed char *buf, int n)", "{\"out\":[\"buf\"]}"},
         AT("t_fill") "out-parameter 'buf' ('signed char *buf') has no size: a bare name in "
                      "\"out\" is not accepted; declare it as {\"name\": \"buf\", \"count\": 1} "
                      "for one value, {\"name\": \"buf\", \"count\": N} for N values, or "
                      "{\"name\": \"buf\", \"count\": \"<argument>\", \"max\": N} for as many as "
                      "an integer argument says, at most N"},
        {{"t_hello", "int t_hello(char *buf, int n, const char *who)", "{\"out\":[\"buf\"]}"},
         AT("t_hello") "out-parameter 'buf' ('char *buf') has no size"},
        {{"t_rgba", "void t_rgba(uint8_t *px)", "{\"out\":[\"px\"]}"},
         AT("t_rgba") "out-parameter 'px' ('uint8_t *px') has no size"},
        /* not listed at all */
        {{"t_fill_ints", "int t_fill_ints(size_t n, int *buf)", NULL},
         AT("t_fill_ints") "out-parameter 'buf' ('int *buf') is not declared; declare it in "
                           "\"out\" as {\"name\": \"buf\", \"count\": 1} for one value, "
                           "{\"name\": \"buf\", \"count\": N} for N values, or {\"name\": \"buf\", "
                           "\"count\": \"<argument>\", \"max\": N} for as many as an integer "
                           "argument says, at most N"},
        {{"t_fill_doubles", "void t_fill_doubles(double *buf, unsigned short n, double step)",
          "{\"out\":[]}"},
         AT("t_fill_doubles") "out-parameter 'buf' ('double *buf') is not declared"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = load_fail(&cases[i].r, NULL);
        if (!strstr(text, cases[i].want))
            fail_msg("case %zu: got '%s', want it to contain '%s'", i, text, cases[i].want);
    }
}

static void out_sizes_are_checked_at_init(void **state) {
    (void)state;
    static const struct {
        row r;
        const char *want;
    } cases[] = {
        /* A bare name or no entry: a_bare_name_is_refused_for_every_type. */
        {{"t_fill", "void t_fill(signed char *buf, int n)", NULL},
         AT("t_fill") "out-parameter 'buf' ('signed char *buf') is not declared"},
        /* count names an argument: it must exist, be an integer, and come with a max. */
        {{"t_fill", "void t_fill(signed char *buf, int n)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"m\",\"max\":8}]}"},
         AT("t_fill") "out-parameter 'buf': count 'm' is not a parameter of the prototype"},
        {{"t_fill_doubles", "void t_fill_doubles(double *buf, unsigned short n, double step)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"step\",\"max\":8}]}"},
         AT("t_fill_doubles") "out-parameter 'buf': count 'step' must be an integer argument, "
                              "not a 'double'"},
        {{"t_hello", "int t_hello(char *buf, int n, const char *who)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"who\",\"max\":8}]}"},
         AT("t_hello") "out-parameter 'buf': count 'who' must be an integer argument, not a "
                       "'const char *'"},
        {{"t_fill", "void t_fill(signed char *buf, int n)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"buf\",\"max\":8}]}"},
         AT("t_fill") "out-parameter 'buf': count 'buf' must be an integer argument, not the "
                      "out-parameter 'signed char *'"},
        {{"t_fill", "void t_fill(signed char *buf, int n)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"n\"}]}"},
         AT("t_fill") "out-parameter 'buf': count 'n' names an argument, so \"max\" (the most "
                      "elements the model may ask for) is required"},
        {{"t_rgba", "void t_rgba(uint8_t *px)",
          "{\"out\":[{\"name\":\"px\",\"count\":4,\"max\":4}]}"},
         AT("t_rgba") "out-parameter 'px': \"max\" applies only to a count that names an "
                      "argument"},
        /* Sizes stop at 1 MiB. */
        {{"t_fill_ints", "int t_fill_ints(size_t n, int *buf)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":1000000}]}"},
         AT("t_fill_ints") "out-parameter 'buf': max 1000000 is more than 262144, the most "
                           "'int' elements within the 1 MiB limit"},
        {{"t_rgba", "void t_rgba(uint8_t *px)", "{\"out\":[{\"name\":\"px\",\"count\":2000000}]}"},
         AT("t_rgba") "out-parameter 'px': count 2000000 is more than 1048576, the most "
                      "'uint8_t' elements within the 1 MiB limit"},
        {{"t_rgba", "void t_rgba(uint8_t *px)",
          "{\"out\":[{\"name\":\"px\",\"count\":4},{\"name\":\"px\",\"count\":4}]}"},
         AT("t_rgba") "out: parameter 'px' is listed twice"},
        {{"t_rgba", "void t_rgba(uint8_t *px)", "{\"out\":[{\"name\":\"zz\",\"count\":4}]}"},
         AT("t_rgba") "out: 'zz' is not a parameter of the prototype"},
        /* The config schema: unknown keys, a count of 0, a missing count. */
        {{"t_rgba", "void t_rgba(uint8_t *px)",
          "{\"out\":[{\"name\":\"px\",\"count\":4,\"size\":4}]}"},
         "config: $.tools[0].out[0]"},
        {{"t_rgba", "void t_rgba(uint8_t *px)", "{\"out\":[{\"name\":\"px\",\"count\":0}]}"},
         "config: $.tools[0].out[0]"},
        {{"t_rgba", "void t_rgba(uint8_t *px)", "{\"out\":[{\"name\":\"px\"}]}"},
         "config: $.tools[0].out[0]"},
        {{"t_fill", "void t_fill(signed char *buf, int n)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":0}]}"},
         "config: $.tools[0].out[0]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = load_fail(&cases[i].r, NULL);
        if (!strstr(text, cases[i].want)) {
            fprintf(stderr, "case %zu: got '%s', want it to contain '%s'\n", i, text,
                    cases[i].want);
            fail();
        }
    }
}

static void string_returns_with_each_free_mode(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_upper", "char *t_upper(const char *s)", "{\"returns_owned\":{\"free\":\"free\"}}"},
        {"t_custom", "char *t_custom(const char *s)",
         "{\"returns_owned\":{\"free\":\"t_release\"}}"},
        {"t_released", "int t_released(void)", NULL},
        {"t_static", "char *t_static(void)", "{\"returns_owned\":{\"free\":\"none\"}}"},
        {"t_greeting", "const char *t_greeting(int polite)", NULL},
        {"t_null", "char *t_null(void)", "{\"returns_owned\":{\"free\":\"free\"}}"},
    };
    weir_host *h = load_ok(rows, sizeof rows / sizeof rows[0]);
    expect(h, "t_upper", "{\"s\":\"hello, world\"}", "\"HELLO, WORLD\"");
    expect(h, "t_released", "{}", "0");
    expect(h, "t_custom", "{\"s\":\"mine\"}", "\"mine\"");
    expect(h, "t_custom", "{\"s\":\"again\"}", "\"again\"");
    expect(h, "t_released", "{}", "2");
    expect(h, "t_static", "{}", "\"static text\"");
    expect(h, "t_static", "{}", "\"static text\"");
    expect(h, "t_greeting", "{\"polite\":0}", "\"hi \\\"you\\\"\"");
    expect(h, "t_greeting", "{\"polite\":1}", "\"good day\"");
    expect(h, "t_null", "{}", "null");
    char *got = call_tool(h, "t_upper", "{\"s\":\"a\\u0000b\"}", true);
    assert_non_null(strstr(got, "error INVALID_ARGUMENTS: Error: invalid arguments for tool "
                                "'t_upper': not valid JSON: "));
    free(got);
    got = call_tool(h, "t_upper", "{\"s\":\"a\\u0000b\"}", false);
    assert_string_equal(got, "error INVALID_ARGUMENTS: Error: argument 's': strings may not "
                             "contain NUL characters");
    free(got);
    weir_host_destroy(h);
}

static void libm_pow_as_in_the_design(void **state) {
    (void)state;
    static const row r = {"pow", "double pow(double x, double y)",
                          "{\"description\":\"x raised to the power y\"}"};
    weir_host *h = NULL;
    weir_error err = {0};
    assert_int_equal(load_rows(&r, 1, "libm.so.6", &h, &err), WEIR_OK);
    expect(h, "pow", "{\"x\":2,\"y\":10}", "1024");
    expect(h, "pow", "{\"x\":-1,\"y\":0.5}", "\"NaN\"");
    expect(h, "pow", "{\"x\":10,\"y\":400}", "\"Infinity\"");
    char *got = call_tool(h, "pow", "{\"x\":\"two\",\"y\":2}", true);
    assert_string_equal(got, "error INVALID_ARGUMENTS: Error: invalid arguments for tool 'pow': "
                             "$.x: expected number, got string");
    free(got);
    /* Exclusive unless the row says "parallel": true. */
    const weir__tool_def *def = weir__tools_find(weir__host_tools(h), "pow");
    json_t *args = json_pack("{s:i, s:i}", "x", 1, "y", 1);
    assert_false(weir__tool_parallel_safe(def, args));
    weir_host_destroy(h);
    static const row par = {"pow", "double pow(double x, double y)", "{\"parallel\":true}"};
    assert_int_equal(load_rows(&par, 1, "libm.so.6", &h, &err), WEIR_OK);
    def = weir__tools_find(weir__host_tools(h), "pow");
    assert_true(weir__tool_parallel_safe(def, args));
    json_decref(args);
    weir_host_destroy(h);
}

static void init_errors_name_what_is_wrong(void **state) {
    (void)state;
    static const struct {
        row r;
        const char *library;
        const char *want;
    } cases[] = {
        {{"pow", "int pow(int)", NULL}, "libm.so.6",
         AT("pow") "prototype: column 12: expected a parameter name"},
        {{"powx", "double powx(double x, double y)", NULL}, "libm.so.6",
         AT("powx") "symbol 'powx' not found in library 'libm.so.6'"},
        {{"pow", "double pow(double x, double y)", NULL}, "libweir-no-such-lib.so",
         AT("pow") "cannot open library 'libweir-no-such-lib.so': "},
        {{"pow", "double power(double x, double y)", NULL}, "libm.so.6",
         AT("pow") "the prototype names 'power' but the symbol is 'pow'"},
        {{"t_divmod", "int t_divmod(int a, int b, int *quotient, int *remainder)",
          "{\"out\":[{\"name\":\"quotient\",\"count\":1}]}"},
         NULL,
         AT("t_divmod") "out-parameter 'remainder' ('int *remainder') is not declared; declare "
                        "it in \"out\" as {\"name\": \"remainder\", \"count\": 1} for one "
                        "value, {\"name\": \"remainder\", \"count\": N} for N values, or "
                        "{\"name\": \"remainder\", \"count\": \"<argument>\", \"max\": N} for "
                        "as many as an integer argument says, at most N"},
        {{"t_divmod", "int t_divmod(int a, int b, int *quotient, int *remainder)",
          "{\"out\":[{\"name\":\"a\",\"count\":1}]}"},
         NULL, AT("t_divmod") "out: parameter 'a' is not a pointer ('int *a')"},
        {{"t_divmod", "int t_divmod(int a, int b, int *quotient, int *remainder)",
          "{\"out\":[{\"name\":\"zz\",\"count\":1}]}"},
         NULL, AT("t_divmod") "out: 'zz' is not a parameter of the prototype"},
        /* a bare name that is not a pointer, or no parameter, is named as such first */
        {{"t_divmod", "int t_divmod(int a, int b, int *quotient, int *remainder)",
          "{\"out\":[\"a\"]}"},
         NULL, AT("t_divmod") "out: parameter 'a' is not a pointer ('int *a')"},
        {{"t_upper", "char *t_upper(const char *s)", NULL}, NULL,
         AT("t_upper") "a 'char *' return needs \"returns_owned\": {\"free\": \"free\" | "
                       "\"none\" | \"<symbol>\"}"},
        {{"t_upper", "char *t_upper(const char *s)",
          "{\"returns_owned\":{\"free\":\"no_such_free\"}}"},
         NULL, AT("t_upper") "free function 'no_such_free' not found in library '"},
        {{"t_int", "int t_int(int v)", "{\"returns_owned\":{\"free\":\"free\"}}"}, NULL,
         AT("t_int") "\"returns_owned\" applies only to a 'char *' return"},
        {{"t_int", "int t_int(int v)", "{\"unknown\":1}"}, NULL, "config: $.tools[0]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = load_fail(&cases[i].r, cases[i].library);
        if (!strstr(text, cases[i].want)) {
            fprintf(stderr, "case %zu: got '%s', want it to contain '%s'\n", i, text,
                    cases[i].want);
            fail();
        }
    }
}

/*
 * "idempotency_key" names the 'const char *' parameter that gets the call's
 * key (docs/tools.md, "Tools across a crash"): it is not in the schema, the
 * model cannot set it, and "idempotent" flags the tool.  Init refuses a
 * name that is no parameter or not a 'const char *'.
 */
static void the_idempotency_key_is_a_hidden_parameter(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_keyed", "int t_keyed(char *buf, int n, const char *label, const char *key)",
         "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":64}],"
         "\"idempotency_key\":\"key\",\"idempotent\":true}"},
        {"t_int", "int t_int(int v)", NULL},
    };
    weir_host *h = load_ok(rows, 2);
    const weir__tool_def *def = weir__tools_find(weir__host_tools(h), "t_keyed");
    assert_non_null(def);
    assert_true(def->flags & WEIR_TOOL_IDEMPOTENT);
    assert_false(weir__tools_find(weir__host_tools(h), "t_int")->flags & WEIR_TOOL_IDEMPOTENT);
    char *s = weir__json_dump(def->parameters);
    assert_string_equal(s, "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\","
                           "\"minimum\":0,\"maximum\":64},\"label\":{\"type\":\"string\"}},"
                           "\"required\":[\"n\",\"label\"],\"additionalProperties\":false}");
    free(s);
    weir__tool_outcome o = {0};
    json_t *a = NULL;
    /* the model cannot pass the key: the schema has no such property */
    assert_int_equal(weir__tool_parse_args(def, "{\"n\":64,\"label\":\"x\",\"key\":\"forged\"}",
                                           &a, &o),
                     WEIR_OK);
    assert_null(a);
    assert_string_equal(weir__json_str(o.error, "code", ""), "INVALID_ARGUMENTS");
    weir__tool_outcome_clear(&o);
    assert_int_equal(weir__tool_parse_args(def, "{\"n\":64,\"label\":\"book\"}", &a, &o), WEIR_OK);
    assert_int_equal(weir__tool_invoke_keyed(def, "c1", "s1:2:1:c1", 2, NULL, a, NULL, &o), WEIR_OK);
    assert_false(o.is_error);
    assert_string_equal(weir__json_str(json_array_get(o.content, 0), "text", ""),
                        "{\"return\":14,\"buf\":\"book:s1:2:1:c1\"}");
    weir__tool_outcome_clear(&o);
    /* outside a session there is no key: the parameter is NULL */
    assert_int_equal(weir__tool_invoke(def, "c1", NULL, a, &o), WEIR_OK);
    assert_string_equal(weir__json_str(json_array_get(o.content, 0), "text", ""),
                        "{\"return\":11,\"buf\":\"book:(null)\"}");
    weir__tool_outcome_clear(&o);
    json_decref(a);
    weir_host_destroy(h);

    static const struct {
        row r;
        const char *want;
    } bad[] = {
        {{"t_keyed", "int t_keyed(char *buf, int n, const char *label, const char *key)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":64}],\"idempotency_key\":\"k\"}"},
         AT("t_keyed") "idempotency_key: 'k' is not a parameter of the prototype"},
        {{"t_keyed", "int t_keyed(char *buf, int n, const char *label, const char *key)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":64}],\"idempotency_key\":\"n\"}"},
         AT("t_keyed") "idempotency_key: parameter 'n' must be 'const char *', not 'int'"},
        {{"t_keyed", "int t_keyed(char *buf, int n, const char *label, const char *key)",
          "{\"out\":[{\"name\":\"buf\",\"count\":\"n\",\"max\":64}],"
          "\"idempotency_key\":\"buf\"}"},
         AT("t_keyed") "idempotency_key: parameter 'buf' must be 'const char *', not 'char *'"},
        {{"t_int", "int t_int(int v)", "{\"idempotent\":1}"}, "config: $.tools[0].idempotent"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *text = load_fail(&bad[i].r, NULL);
        if (!strstr(text, bad[i].want))
            fail_msg("case %zu: got '%s', want it to contain '%s'", i, text, bad[i].want);
    }
}

/* "background": true registers the tool WEIR_TOOL_BACKGROUND (a call then
 * returns a receipt and the function runs as a job, docs/tools.md); the
 * function itself is called as any other.  A non-boolean is refused. */
static void a_background_row_registers_a_background_tool(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_sleep_ms", "int t_sleep_ms(int ms)", "{\"background\":true}"},
        {"t_int", "int t_int(int v)", "{\"background\":false}"},
    };
    weir_host *h = load_ok(rows, 2);
    const weir__tool_def *def = weir__tools_find(weir__host_tools(h), "t_sleep_ms");
    assert_non_null(def);
    assert_true(def->flags & WEIR_TOOL_BACKGROUND);
    assert_false(def->flags & WEIR_TOOL_IDEMPOTENT);
    assert_false(weir__tools_find(weir__host_tools(h), "t_int")->flags & WEIR_TOOL_BACKGROUND);
    expect(h, "t_sleep_ms", "{\"ms\":1}", "1");
    weir_host_destroy(h);
    static const row bad = {"t_int", "int t_int(int v)", "{\"background\":\"yes\"}"};
    assert_non_null(strstr(load_fail(&bad, NULL), "background"));
}

/* "inline": true registers the tool WEIR_TOOL_INLINE (the step's thread calls
 * the function, docs/tools.md); the call's result is as any other's.  A
 * non-boolean is refused, and so is "inline" with "background", naming the
 * tool, the row and the index. */
static void an_inline_row_registers_an_inline_tool(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_int", "int t_int(int v)", "{\"inline\":true,\"parallel\":true}"},
        {"t_i32", "int32_t t_i32(int32_t v)", "{\"inline\":false}"},
    };
    weir_host *h = load_ok(rows, 2);
    const weir__tool_def *def = weir__tools_find(weir__host_tools(h), "t_int");
    assert_non_null(def);
    assert_int_equal(def->flags, WEIR_TOOL_INLINE);
    assert_int_equal(weir__tools_find(weir__host_tools(h), "t_i32")->flags, 0);
    expect(h, "t_int", "{\"v\":41}", "41");
    weir_host_destroy(h);
    static const row not_bool = {"t_int", "int t_int(int v)", "{\"inline\":1}"};
    const char *text = load_fail(&not_bool, NULL);
    if (!strstr(text, "config: $.tools[0].inline"))
        fail_msg("got '%s'", text);
    static const row both = {"t_int", "int t_int(int v)",
                             "{\"inline\":true,\"background\":true}"};
    text = load_fail(&both, NULL);
    if (!strstr(text, AT("t_int") "\"inline\" and \"background\" exclude each other"))
        fail_msg("got '%s'", text);
}

static void two_rows_with_one_name_are_a_duplicate(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_int", "int t_int(int v)", "{\"name\":\"same\"}"},
        {"t_i32", "int32_t t_i32(int32_t v)", "{\"name\":\"same\"}"},
    };
    weir_host *h = NULL;
    weir_error err = {0};
    assert_int_not_equal(load_rows(rows, 2, NULL, &h, &err), WEIR_OK);
    /* the registry's own reason reaches the user, not just a status name */
    if (!strstr(err.text, "tool 'same' of plugin 'ffi' is already registered by plugin 'ffi'"))
        fail_msg("unexpected error: %s", err.text);
}

static void an_invalid_tool_name_says_why(void **state) {
    (void)state;
    static const row r = {"t_int", "int t_int(int v)", "{\"name\":\"bad name\"}"};
    const char *text = load_fail(&r, NULL);
    if (!strstr(text, "invalid tool name 'bad name' (want [A-Za-z0-9_-]{1,64})"))
        fail_msg("unexpected error: %s", text);
}

static void allocation_failures_during_calls_are_handled(void **state) {
    (void)state;
    static const row rows[] = {
        {"t_upper", "char *t_upper(const char *s)", "{\"returns_owned\":{\"free\":\"free\"}}"},
        {"t_divmod", "int t_divmod(int a, int b, int *quotient, int *remainder)",
         "{\"out\":[{\"name\":\"quotient\",\"count\":1},"
         "{\"name\":\"remainder\",\"count\":1}]}"},
    };
    weir_host *h = load_ok(rows, 2);
    static const char *const tools[] = {"t_upper", "t_divmod"};
    static const char *const args[] = {"{\"s\":\"abc\"}", "{\"a\":9,\"b\":4}"};
    for (size_t k = 0; k < 2; k++) {
        const weir__tool_def *def = weir__tools_find(weir__host_tools(h), tools[k]);
        json_t *a = json_loads(args[k], 0, NULL);
        bool ok = false;
        for (long n = 1; n < 1000 && !ok; n++) {
            weir__tool_outcome o = {0};
            weir__alloc_fail_after(n);
            int rc = weir__tool_invoke(def, "c", NULL, a, &o);
            weir__alloc_fail_after(-1);
            ok = rc == WEIR_OK && !o.is_error;
            if (rc != WEIR_OK)
                assert_int_equal(rc, WEIR_E_NOMEM);
            weir__tool_outcome_clear(&o);
        }
        assert_true(ok);
        json_decref(a);
    }
    weir_host_destroy(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_supported_type_round_trips),
        cmocka_unit_test(schema_is_derived_from_the_prototype),
        cmocka_unit_test(integer_ranges_are_checked_before_the_call),
        cmocka_unit_test(out_parameters_are_returned),
        cmocka_unit_test(a_count_above_its_max_is_refused_before_the_call),
        cmocka_unit_test(out_buffers_hold_count_elements),
        cmocka_unit_test(char_buffers_are_returned_as_strings),
        cmocka_unit_test(count_1_is_one_value),
        cmocka_unit_test(a_bare_name_is_refused_for_every_type),
        cmocka_unit_test(out_sizes_are_checked_at_init),
        cmocka_unit_test(string_returns_with_each_free_mode),
        cmocka_unit_test(libm_pow_as_in_the_design),
        cmocka_unit_test(init_errors_name_what_is_wrong),
        cmocka_unit_test(the_idempotency_key_is_a_hidden_parameter),
        cmocka_unit_test(a_background_row_registers_a_background_tool),
        cmocka_unit_test(an_inline_row_registers_an_inline_tool),
        cmocka_unit_test(two_rows_with_one_name_are_a_duplicate),
        cmocka_unit_test(an_invalid_tool_name_says_why),
        cmocka_unit_test(allocation_failures_during_calls_are_handled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
