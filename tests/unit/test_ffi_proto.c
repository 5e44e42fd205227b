/*
 * tests/unit/test_ffi_proto.c - the tools-ffi C prototype parser
 * (plugins/tools-ffi/ffi_proto.c, compiled in by tests/cmake/tools.cmake).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ffi_proto.h"

static void parse_ok(const char *text, wf_proto *p) {
    char msg[200];
    int rc = wf_proto_parse(text, p, msg, sizeof msg);
    if (rc != 0)
        fail_msg("'%s' failed: %s", text, msg);
}

static void parse_err(const char *text, const char *want) {
    wf_proto p;
    char msg[200];
    assert_int_equal(wf_proto_parse(text, &p, msg, sizeof msg), -1);
    assert_string_equal(msg, want);
}

static void two_doubles(void **state) {
    (void)state;
    wf_proto p;
    parse_ok("double pow(double x, double y)", &p);
    assert_int_equal(p.ret, WF_DOUBLE);
    assert_string_equal(p.name, "pow");
    assert_int_equal(p.nparams, 2);
    assert_string_equal(p.params[0].name, "x");
    assert_int_equal(p.params[0].type, WF_DOUBLE);
    assert_false(p.params[0].out);
    assert_string_equal(p.params[1].name, "y");
    assert_int_equal(p.params[1].column, 29);
}

static void every_scalar_type(void **state) {
    (void)state;
    static const struct {
        const char *spelling;
        wf_type type;
    } cases[] = {
        {"bool", WF_BOOL},
        {"_Bool", WF_BOOL},
        {"char", WF_CHAR},
        {"signed char", WF_SCHAR},
        {"unsigned char", WF_UCHAR},
        {"short", WF_SHORT},
        {"short int", WF_SHORT},
        {"signed short", WF_SHORT},
        {"unsigned short", WF_USHORT},
        {"unsigned short int", WF_USHORT},
        {"int", WF_INT},
        {"signed", WF_INT},
        {"signed int", WF_INT},
        {"unsigned", WF_UINT},
        {"unsigned int", WF_UINT},
        {"long", WF_LONG},
        {"long int", WF_LONG},
        {"unsigned long", WF_ULONG},
        {"long unsigned int", WF_ULONG},
        {"long long", WF_LLONG},
        {"long long int", WF_LLONG},
        {"unsigned long long", WF_ULLONG},
        {"size_t", WF_SIZE},
        {"ssize_t", WF_SSIZE},
        {"int8_t", WF_I8},
        {"int16_t", WF_I16},
        {"int32_t", WF_I32},
        {"int64_t", WF_I64},
        {"uint8_t", WF_U8},
        {"uint16_t", WF_U16},
        {"uint32_t", WF_U32},
        {"uint64_t", WF_U64},
        {"float", WF_FLOAT},
        {"double", WF_DOUBLE},
        {"const int", WF_INT},
        {"int const", WF_INT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "%s f(%s v)", cases[i].spelling, cases[i].spelling);
        wf_proto p;
        parse_ok(text, &p);
        assert_int_equal(p.ret, cases[i].type);
        assert_int_equal(p.nparams, 1);
        assert_int_equal(p.params[0].type, cases[i].type);
    }
}

static void strings_void_and_out_parameters(void **state) {
    (void)state;
    wf_proto p;
    parse_ok("char *shout(const char *text)", &p);
    assert_int_equal(p.ret, WF_STRING_OWNED);
    assert_int_equal(p.params[0].type, WF_STRING);
    parse_ok("const char* name ( void ) ;", &p);
    assert_int_equal(p.ret, WF_STRING);
    assert_int_equal(p.nparams, 0);
    parse_ok("void tick()", &p);
    assert_int_equal(p.ret, WF_VOID);
    assert_int_equal(p.nparams, 0);
    parse_ok("int divmod(int a, int b, int *quotient, int*remainder)", &p);
    assert_int_equal(p.nparams, 4);
    assert_true(p.params[2].out);
    assert_int_equal(p.params[2].type, WF_INT);
    assert_true(p.params[3].out);
    assert_string_equal(p.params[3].name, "remainder");
    parse_ok("\tvoid\nminmax(double a,\r\ndouble b, double *lo, double *hi)", &p);
    assert_int_equal(p.params[3].type, WF_DOUBLE);
    /* 'char *' is an out buffer (its size is the config's); 'const char *' a string in. */
    parse_ok("int name(char *buf, size_t n, const char *who, signed char*bytes)", &p);
    assert_int_equal(p.params[0].type, WF_CHAR);
    assert_true(p.params[0].out);
    assert_int_equal(p.params[1].type, WF_SIZE);
    assert_false(p.params[1].out);
    assert_int_equal(p.params[2].type, WF_STRING);
    assert_false(p.params[2].out);
    assert_int_equal(p.params[3].type, WF_SCHAR);
    assert_true(p.params[3].out);
}

static void errors_show_the_column(void **state) {
    (void)state;
    parse_err("int pow(int)", "column 12: expected a parameter name");
    parse_err("double pow(double, double y)", "column 18: expected a parameter name");
    parse_err("", "column 1: expected a type, found the end of the text");
    parse_err("pow(double x)", "column 1: unknown type 'pow'");
    parse_err("double (double x)", "column 8: expected a function name");
    parse_err("double pow double x", "column 12: expected '('");
    parse_err("double pow(double x", "column 20: expected ',' or ')', found the end of the text");
    parse_err("double pow(double x double y)", "column 21: expected ',' or ')'");
    parse_err("double pow(double x) x", "column 22: unexpected text after the parameter list");
    parse_err("int f(FILE *fp)", "column 7: unknown type 'FILE'");
    parse_err("int f(int a, int a)", "column 18: duplicate parameter name 'a'");
    parse_err("int f(int int)", "column 7: invalid combination of type specifiers");
    parse_err("int f(int return)", "column 11: expected a parameter name");
    parse_err("int f(int @)", "column 11: expected a parameter name, found '@'");
    parse_err("int f(int \x01)", "column 11: expected a parameter name, found byte 0x01");
}

static void unsupported_types_are_refused(void **state) {
    (void)state;
    parse_err("int f(const int *p)", "column 7: 'const T *' parameters are not supported");
    parse_err("int f(int **pp)", "column 11: pointers to pointers are not supported");
    parse_err("int *f(void)", "column 5: only 'char *' and 'const char *' pointer returns are "
                              "supported");
    parse_err("int f(void v)", "column 7: a parameter cannot be void");
    parse_err("int f(void *p)", "column 7: a parameter cannot be void");
    parse_err("unsigned signed f(void)", "column 1: invalid combination of type specifiers");
    parse_err("long long long f(void)", "column 1: invalid combination of type specifiers");
    parse_err("short long f(void)", "column 1: invalid combination of type specifiers");
    parse_err("unsigned double f(void)", "column 1: invalid combination of type specifiers");
    parse_err("char *const f(void)", "column 7: 'const' after '*' is not supported");
    parse_err("struct s f(void)", "column 1: expected a type");
}

static void limits(void **state) {
    (void)state;
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof text, "int f(");
    for (int i = 0; i < 16; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%sint a%d", i ? ", " : "", i);
    snprintf(text + n, sizeof text - n, ")");
    wf_proto p;
    parse_ok(text, &p);
    assert_int_equal(p.nparams, 16);
    snprintf(text + n, sizeof text - n, ", int x)");
    parse_err(text, "column 141: more than 16 parameters");
    char longname[100];
    memset(longname, 'a', 64);
    longname[64] = '\0';
    snprintf(text, sizeof text, "int %s(void)", longname);
    parse_err(text, "column 5: name is longer than 63 characters");
    /* NULL text and a tiny message buffer are safe. */
    char tiny[4];
    assert_int_equal(wf_proto_parse(NULL, &p, tiny, sizeof tiny), -1);
    assert_string_equal(tiny, "col");
    assert_int_equal(wf_proto_parse("int f(void)", NULL, NULL, 0), -1);
}

static void type_names(void **state) {
    (void)state;
    assert_string_equal(wf_type_name(WF_ULLONG), "unsigned long long");
    assert_string_equal(wf_type_name(WF_STRING), "const char *");
    assert_true(wf_type_is_integer(WF_SCHAR));
    assert_true(wf_type_is_integer(WF_U64));
    assert_false(wf_type_is_integer(WF_CHAR));
    assert_false(wf_type_is_integer(WF_BOOL));
    assert_false(wf_type_is_integer(WF_DOUBLE));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_doubles),
        cmocka_unit_test(every_scalar_type),
        cmocka_unit_test(strings_void_and_out_parameters),
        cmocka_unit_test(errors_show_the_column),
        cmocka_unit_test(unsupported_types_are_refused),
        cmocka_unit_test(limits),
        cmocka_unit_test(type_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
