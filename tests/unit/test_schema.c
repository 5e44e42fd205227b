/*
 * tests/unit/test_schema.c - the JSON Schema subset (core/format/schema.c,
 * docs/schema.md): every keyword, JSON paths in messages, malformed and
 * hostile schemas.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "schema.h"

static char msg[1024];

/* Validate `value_text` against `schema_text`; returns the result code. */
static int run(const char *schema_text, const char *value_text) {
    json_error_t e;
    json_t *value = json_loads(value_text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!value)
        fail_msg("bad test value %s: %s", value_text, e.text);
    int rc = weir__schema_validate_text(schema_text, value, msg, sizeof msg);
    json_decref(value);
    return rc;
}

static void expect_ok(const char *schema, const char *value) {
    if (run(schema, value) != 0)
        fail_msg("%s against %s: unexpected failure: %s", value, schema, msg);
}

static void expect_fail(const char *schema, const char *value, const char *want) {
    if (run(schema, value) == 0)
        fail_msg("%s against %s: unexpectedly valid", value, schema);
    assert_string_equal(msg, want);
}

static void test_type_single(void **state) {
    (void)state;
    expect_ok("{\"type\":\"string\"}", "\"x\"");
    expect_ok("{\"type\":\"object\"}", "{}");
    expect_ok("{\"type\":\"array\"}", "[]");
    expect_ok("{\"type\":\"boolean\"}", "false");
    expect_ok("{\"type\":\"null\"}", "null");
    expect_fail("{\"type\":\"string\"}", "1", "$: expected string, got integer");
    expect_fail("{\"type\":\"object\"}", "[]", "$: expected object, got array");
    expect_fail("{\"type\":\"boolean\"}", "null", "$: expected boolean, got null");
}

static void test_type_integer_vs_number(void **state) {
    (void)state;
    expect_ok("{\"type\":\"integer\"}", "3");
    expect_ok("{\"type\":\"integer\"}", "3.0");
    expect_ok("{\"type\":\"number\"}", "3");
    expect_ok("{\"type\":\"number\"}", "3.5");
    expect_fail("{\"type\":\"integer\"}", "3.5", "$: expected integer, got number");
    expect_fail("{\"type\":\"number\"}", "\"3\"", "$: expected number, got string");
}

static void test_type_array(void **state) {
    (void)state;
    expect_ok("{\"type\":[\"string\",\"null\"]}", "null");
    expect_ok("{\"type\":[\"string\",\"null\"]}", "\"a\"");
    expect_fail("{\"type\":[\"string\",\"null\"]}", "true",
                "$: expected string or null, got boolean");
}

static void test_properties_path(void **state) {
    (void)state;
    const char *s = "{\"type\":\"object\",\"properties\":{\"config\":{\"type\":\"object\","
                    "\"properties\":{\"port\":{\"type\":\"integer\"}}}}}";
    expect_ok(s, "{\"config\":{\"port\":80},\"other\":1}");
    expect_fail(s, "{\"config\":{\"port\":\"80\"}}", "$.config.port: expected integer, got string");
}

static void test_required(void **state) {
    (void)state;
    const char *s = "{\"type\":\"object\",\"required\":[\"provider\",\"model\"]}";
    expect_ok(s, "{\"provider\":\"p\",\"model\":\"m\"}");
    expect_fail(s, "{\"provider\":\"p\"}", "$.model: required property is missing");
    /* required on a non-object is not checked ("type" does that) */
    expect_ok("{\"required\":[\"a\"]}", "3");
}

static void test_additional_properties_false(void **state) {
    (void)state;
    const char *s = "{\"properties\":{\"a\":{}},\"additionalProperties\":false}";
    expect_ok(s, "{\"a\":1}");
    expect_fail(s, "{\"a\":1,\"b\":2}", "$.b: property is not allowed");
}

static void test_additional_properties_schema(void **state) {
    (void)state;
    const char *s = "{\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":\"string\"}}";
    expect_ok(s, "{\"a\":1,\"b\":\"x\"}");
    expect_fail(s, "{\"a\":1,\"b\":2}", "$.b: expected string, got integer");
}

static void test_items_path(void **state) {
    (void)state;
    const char *s = "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"required\":[\"type\"],"
                    "\"properties\":{\"type\":{\"type\":\"string\"}}}}";
    expect_ok(s, "[{\"type\":\"a\"},{\"type\":\"b\"}]");
    expect_fail(s, "[{\"type\":\"a\"},{\"type\":2}]", "$[1].type: expected string, got integer");
    expect_fail(s, "[{\"type\":\"a\"},{}]", "$[1].type: required property is missing");
}

static void test_enum(void **state) {
    (void)state;
    const char *s = "{\"enum\":[\"always\",\"step\",\"none\",1]}";
    expect_ok(s, "\"step\"");
    expect_ok(s, "1");
    expect_fail(s, "\"sometimes\"", "$: value is not one of [\"always\",\"step\",\"none\",1]");
}

static void test_const(void **state) {
    (void)state;
    expect_ok("{\"const\":{\"a\":[1]}}", "{\"a\":[1]}");
    expect_fail("{\"properties\":{\"kind\":{\"const\":\"enter\"}}}", "{\"kind\":\"reject\"}",
                "$.kind: expected the constant \"enter\"");
}

static void test_minimum_maximum(void **state) {
    (void)state;
    const char *s = "{\"minimum\":1,\"maximum\":65535}";
    expect_ok(s, "1");
    expect_ok(s, "65535");
    expect_ok(s, "\"not a number\""); /* only numbers are bounded */
    expect_fail(s, "0", "$: 0 is less than the minimum 1");
    expect_fail(s, "65536", "$: 65536 is greater than the maximum 65535");
    expect_fail("{\"minimum\":0.5}", "0.25", "$: 0.25 is less than the minimum 0.5");
}

static void test_min_max_length(void **state) {
    (void)state;
    const char *s = "{\"minLength\":2,\"maxLength\":3}";
    expect_ok(s, "\"ab\"");
    expect_ok(s, "\"\\u00e9\\u00e9\\u00e9\""); /* 3 characters, 6 bytes */
    expect_fail(s, "\"a\"", "$: has 1 characters, fewer than minLength 2");
    expect_fail(s, "\"abcd\"", "$: has 4 characters, more than maxLength 3");
}

static void test_min_max_items(void **state) {
    (void)state;
    const char *s = "{\"properties\":{\"xs\":{\"minItems\":1,\"maxItems\":2}}}";
    expect_ok(s, "{\"xs\":[1]}");
    expect_fail(s, "{\"xs\":[]}", "$.xs: has 0 items, fewer than minItems 1");
    expect_fail(s, "{\"xs\":[1,2,3]}", "$.xs: has 3 items, more than maxItems 2");
}

static void test_any_of(void **state) {
    (void)state;
    const char *s = "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\",\"minimum\":0}]}";
    expect_ok(s, "\"x\"");
    expect_ok(s, "4");
    expect_fail(s, "-1",
                "$: matches none of the anyOf branches (1: $: expected string, got integer; "
                "2: $: -1 is less than the minimum 0)");
}

static void test_one_of(void **state) {
    (void)state;
    const char *s = "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}";
    expect_ok(s, "1.5");
    expect_fail(s, "1", "$: matches oneOf branches 1 and 2, expected exactly one");
    expect_fail(s, "\"a\"",
                "$: matches none of the oneOf branches (1: $: expected integer, got string; "
                "2: $: expected number, got string)");
}

static void test_one_of_nested_path(void **state) {
    (void)state;
    const char *s = "{\"properties\":{\"d\":{\"oneOf\":[{\"properties\":{\"kind\":{\"const\":"
                    "\"allow\"}}},{\"required\":[\"reason\"]}]}}}";
    expect_fail(s, "{\"d\":{\"kind\":\"deny\"}}",
                "$.d: matches none of the oneOf branches (1: $.d.kind: expected the constant "
                "\"allow\"; 2: $.d.reason: required property is missing)");
}

static void test_boolean_schemas(void **state) {
    (void)state;
    expect_ok("true", "{\"anything\":1}");
    expect_fail("false", "1", "$: no value is allowed here");
    expect_fail("{\"items\":false}", "[1]", "$[0]: no value is allowed here");
}

static void test_unknown_keywords_ignored(void **state) {
    (void)state;
    expect_ok("{\"$schema\":\"x\",\"title\":\"t\",\"description\":\"d\",\"default\":1,"
              "\"type\":\"integer\"}",
              "2");
}

/* Issue #36: the keywords a policy needs are honoured, not ignored:
 * exclusiveMinimum/exclusiveMaximum (numbers, and draft 4's booleans) and
 * pattern (ECMA-262, through its POSIX form: core/format/pattern.c). */
static void test_exclusive_bounds(void **state) {
    (void)state;
    expect_ok("{\"exclusiveMinimum\":0}", "0.5");
    expect_fail("{\"exclusiveMinimum\":0}", "0", "$: 0 is not greater than the exclusive minimum 0");
    expect_fail("{\"exclusiveMaximum\":1.5}", "1.5",
                "$: 1.5 is not less than the exclusive maximum 1.5");
    expect_ok("{\"exclusiveMaximum\":10}", "9");
    expect_ok("{\"exclusiveMaximum\":10}", "\"not a number\"");
    /* draft 4: a boolean makes minimum/maximum exclusive */
    expect_fail("{\"minimum\":1,\"exclusiveMinimum\":true}", "1",
                "$: 1 is not greater than the minimum 1");
    expect_ok("{\"minimum\":1,\"exclusiveMinimum\":false}", "1");
    expect_fail("{\"maximum\":3,\"exclusiveMaximum\":true}", "3", "$: 3 is not less than the maximum 3");
    expect_fail("{\"exclusiveMinimum\":\"0\"}", "1",
                "$: schema error: \"exclusiveMinimum\"/\"exclusiveMaximum\" must be numbers (or, "
                "as draft 4 has them, booleans)");
}

static void test_pattern(void **state) {
    (void)state;
    expect_ok("{\"pattern\":\"^[a-z]+@[a-z]+\\\\.com$\"}", "\"ann@example.com\"");
    expect_fail("{\"pattern\":\"^[a-z]+@[a-z]+\\\\.com$\"}", "\"ann@example.org\"",
                "$: does not match the pattern \"^[a-z]+@[a-z]+\\.com$\"");
    expect_ok("{\"pattern\":\"\\\\d{3}-\\\\d{4}\"}", "\"call 555-1234 now\""); /* anywhere */
    expect_fail("{\"pattern\":\"^\\\\d+$\"}", "\"12a\"", "$: does not match the pattern \"^\\d+$\"");
    expect_ok("{\"pattern\":\"^\\\\w+\\\\s\\\\S+$\"}", "\"snake_case x-1\"");
    expect_ok("{\"pattern\":\"^(?:ab)+$\"}", "\"abab\"");
    expect_ok("{\"pattern\":\"^a+?b*?$\"}", "\"aab\""); /* lazy: the same matches */
    expect_ok("{\"pattern\":\"^[\\\\]\\\\-^a]+$\"}", "\"]-^a\""); /* escaped ] - ^ in a class */
    expect_ok("{\"pattern\":\"^[^\\\\d\\\\s]+$\"}", "\"abc\"");
    expect_fail("{\"pattern\":\"^[^\\\\d\\\\s]+$\"}", "\"a1\"",
                "$: does not match the pattern \"^[^\\d\\s]+$\"");
    /* one character, not one byte: é is two bytes of UTF-8 */
    expect_ok("{\"pattern\":\"^.$\"}", "\"\\u00e9\"");
    expect_ok("{\"pattern\":\"^\\\\u00e9{2}$\"}", "\"\\u00e9\\u00e9\"");
    expect_ok("{\"pattern\":\"^[\\\\u00e0-\\\\u00ff]$\"}", "\"\\u00e9\"");
    expect_ok("{\"pattern\":\"^[a-\u00e9]+$\"}", "\"z\\u00e0\""); /* a literal end */
    expect_fail("{\"pattern\":\"[\\\\u4e00-\\\\u9fff]\"}", "\"x\"",
                "$: schema error: \"pattern\" \"[\\u4e00-\\u9fff]\": uses what weir cannot "
                "evaluate: a range of more than 256 non-ASCII characters");
    expect_ok("{\"pattern\":\"a{,b\"}", "\"a{,b\""); /* not a count: a literal { */
    expect_ok("{\"pattern\":\"x\"}", "5"); /* applies to strings only */
    /* a NUL inside the string does not end it */
    expect_fail("{\"pattern\":\"^a$\"}", "\"a\\u0000b\"", "$: does not match the pattern \"^a$\"");
    /* an invalid or unsupported pattern is a schema error that says why */
    expect_fail("{\"pattern\":\"(a\"}", "\"a\"", "$: schema error: \"pattern\" \"(a\": an unclosed (");
    expect_fail("{\"pattern\":\"^(?=a)\"}", "\"a\"",
                "$: schema error: \"pattern\" \"^(?=a)\": uses what weir cannot evaluate: "
                "lookaround or named groups ((?=...)");
    expect_fail("{\"pattern\":\"(a)\\\\1\"}", "\"aa\"",
                "$: schema error: \"pattern\" \"(a)\\1\": uses what weir cannot evaluate: "
                "backreferences (\\1)");
    expect_fail("{\"pattern\":\"(a{2}){3}\"}", "\"aaaaaa\"",
                "$: schema error: \"pattern\" \"(a{2}){3}\": uses what weir cannot evaluate: a "
                "counted repetition of a group that holds one");
    expect_fail("{\"pattern\":\"a{300}\"}", "\"a\"",
                "$: schema error: \"pattern\" \"a{300}\": uses what weir cannot evaluate: a "
                "repetition count over 255");
    expect_fail("{\"pattern\":\"*a\"}", "\"a\"",
                "$: schema error: \"pattern\" \"*a\": nothing to repeat at *");
    expect_fail("{\"pattern\":5}", "\"a\"", "$: schema error: \"pattern\" must be a string");
    /* a tool's own schema (foreign): what weir cannot evaluate is the owner's */
    json_t *schema = json_loads("{\"properties\":{\"w\":{\"pattern\":\"\\\\bx\\\\b\"},"
                                "\"n\":{\"pattern\":\"^\\\\d+$\"}}}", 0, NULL);
    json_t *ok = json_loads("{\"w\":\"x\",\"n\":\"12\"}", 0, NULL);
    json_t *bad = json_loads("{\"w\":\"x\",\"n\":\"1x\"}", 0, NULL);
    assert_int_equal(weir__schema_validate_foreign(schema, ok, msg, sizeof msg), 0);
    assert_int_equal(weir__schema_validate_foreign(schema, bad, msg, sizeof msg), -1);
    assert_string_equal(msg, "$.n: does not match the pattern \"^\\d+$\"");
    assert_int_equal(weir__schema_validate(schema, ok, msg, sizeof msg), -1);
    assert_string_equal(msg, "$.w: schema error: \"pattern\" \"\\bx\\b\": uses what weir cannot "
                             "evaluate: word boundaries (\\b)");
    json_decref(schema);
    json_decref(ok);
    json_decref(bad);
}

/* The translation's own edge cases: hostile input never crashes and
 * answers one of the documented codes. */
static void test_pattern_hostile(void **state) {
    (void)state;
    const char *cases[] = {"\\", "[", "[]", "[^]", "[a-", "[z-a]", "\\x4", "\\u12", "\\uD800",
                           "\\uDC00x", "(", ")", "a|*", "{", "a{2,1}", "a**", "(?", "((((((((a))))))))",
                           "\\c", "\\k<a>", "\\p{L}", "[\\D]", "\\0", "a{99999999999}"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char why[160], *ere = NULL;
        int rc = weir__pattern_translate(cases[i], strlen(cases[i]), &ere, why, sizeof why);
        if (rc == 0) {
            assert_non_null(ere);
            free(ere);
            continue;
        }
        assert_null(ere);
        assert_true(rc == WEIR__PATTERN_INVALID || rc == WEIR__PATTERN_UNSUPPORTED);
        assert_true(why[0] != '\0');
    }
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    char why[160], *ere = NULL;
    assert_int_equal(weir__pattern_translate(big, strlen(big), &ere, why, sizeof why),
                     WEIR__PATTERN_UNSUPPORTED);
    assert_string_equal(why, "longer than 1024 bytes");
}

/*
 * What MCP servers send (tools-mcp passes their inputSchema as is): draft-07
 * with $schema, tuples, patternProperties, $ref, format, 2020-12 keywords.
 */
static void test_mcp_server_schemas(void **state) {
    (void)state;
    const char *echo = "{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"type\":\"object\","
                       "\"properties\":{\"message\":{\"type\":\"string\",\"description\":\"m\"}},"
                       "\"required\":[\"message\"],\"additionalProperties\":false}";
    expect_ok(echo, "{\"message\":\"hi\"}");
    expect_fail(echo, "{}", "$.message: required property is missing");
    /* a draft-07 tuple: element i against items[i], the rest unchecked */
    const char *tuple = "{\"type\":\"array\",\"items\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}";
    expect_ok(tuple, "[\"a\",1]");
    expect_ok(tuple, "[\"a\",1,{\"more\":true}]");
    expect_ok(tuple, "[]");
    expect_fail(tuple, "[\"a\",\"b\"]", "$[1]: expected integer, got string");
    /* patternProperties: additionalProperties no longer rules members out */
    const char *pat = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
                      "\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},"
                      "\"additionalProperties\":false}";
    expect_ok(pat, "{\"a\":\"s\",\"x-one\":1}");
    expect_fail(pat, "{\"a\":1}", "$.a: expected string, got integer");
    /* keywords weir does not know: ignored ($ref, format, $defs, 2020-12 ones) */
    expect_ok("{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","
              "\"$defs\":{\"p\":{\"type\":\"string\"}},\"properties\":{\"p\":{\"$ref\":\"#/$defs/p\"},"
              "\"u\":{\"type\":\"string\",\"format\":\"uri\"},\"t\":{\"prefixItems\":[true]}},"
              "\"dependentRequired\":{\"p\":[\"u\"]},\"unevaluatedProperties\":false,"
              "\"x-mcp-header\":\"X\"}",
              "{\"p\":3,\"u\":\"not a uri\",\"z\":1}");
    /* allOf is outside the subset; exclusiveMinimum is in it (issue #36) */
    expect_ok("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\",\"exclusiveMinimum\":0,"
              "\"default\":10}},\"allOf\":[{\"required\":[\"q\"]}]}", "{\"n\":0.5}");
    expect_fail("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"number\",\"exclusiveMinimum\":0,"
                "\"default\":10}},\"allOf\":[{\"required\":[\"q\"]}]}", "{\"n\":0}",
                "$.n: 0 is not greater than the exclusive minimum 0");
}

static void test_malformed_schemas(void **state) {
    (void)state;
    expect_fail("{\"type\":\"int\"}", "1", "$: schema error: unknown type \"int\"");
    expect_fail("{\"type\":5}", "1",
                "$: schema error: \"type\" must be a string or a non-empty array");
    expect_fail("{\"required\":\"a\"}", "{}", "$: schema error: \"required\" must be an array");
    expect_fail("{\"minimum\":\"1\"}", "1",
                "$: schema error: \"minimum\"/\"maximum\" must be numbers");
    expect_fail("{\"maxLength\":-1}", "\"\"",
                "$: schema error: \"minLength\"/\"maxLength\" must be non-negative integers");
    expect_fail("{\"anyOf\":[]}", "1", "$: schema error: \"anyOf\" must be a non-empty array");
    expect_fail("{\"enum\":{}}", "1", "$: schema error: \"enum\" must be an array");
    expect_fail("{\"items\":5}", "[1]",
                "$: schema error: \"items\" must be a schema or an array of schemas");
    expect_fail("{\"additionalProperties\":1}", "{}",
                "$: schema error: \"additionalProperties\" must be a boolean or a schema");
    expect_fail("{\"properties\":{\"a\":{\"oneOf\":[{\"type\":\"bogus\"},true]}}}",
                "{\"a\":1}", "$.a: schema error: unknown type \"bogus\"");
    expect_fail("[1]", "1", "$: schema error: a schema must be an object or a boolean");
    expect_fail("{\"type\":", "1",
                "schema is not valid JSON: line 1: unexpected token near end of file");
}

/* "secret" marks a value to hide (weir__schema_redact, tests/unit/test_redact.c);
 * it says nothing about validity, but it must be a boolean. */
static void test_secret_keyword(void **state) {
    (void)state;
    expect_ok("{\"properties\":{\"k\":{\"type\":\"string\",\"secret\":true}}}",
              "{\"k\":\"sk-x\"}");
    expect_ok("{\"secret\":false}", "1");
    expect_fail("{\"properties\":{\"k\":{\"type\":\"string\",\"secret\":true}}}",
                "{\"k\":1}", "$.k: expected string, got integer");
    expect_fail("{\"properties\":{\"k\":{\"secret\":\"yes\"}}}", "{\"k\":\"x\"}",
                "$.k: schema error: \"secret\" must be a boolean");
}

static void test_null_arguments(void **state) {
    (void)state;
    json_t *v = json_integer(1);
    assert_int_equal(weir__schema_validate(NULL, v, msg, sizeof msg), -1);
    assert_string_equal(msg, "$: no schema to validate");
    assert_int_equal(weir__schema_validate(v, NULL, msg, sizeof msg), -1);
    assert_string_equal(msg, "$: no value to validate");
    /* a NULL message buffer is allowed */
    json_t *s = json_pack("{s:s}", "type", "string");
    assert_int_equal(weir__schema_validate(s, v, NULL, 0), -1);
    json_decref(s);
    json_decref(v);
}

/* Build {"properties":{"a":{"properties":{"a":...}}}} `depth` levels deep. */
static char *deep_schema(int depth) {
    size_t cap = (size_t)depth * 40 + 64, at = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    for (int i = 0; i < depth; i++)
        at += (size_t)snprintf(s + at, cap - at, "{\"properties\":{\"a\":");
    at += (size_t)snprintf(s + at, cap - at, "{\"type\":\"string\"}");
    for (int i = 0; i < depth; i++)
        at += (size_t)snprintf(s + at, cap - at, "}}");
    return s;
}

static json_t *deep_value(int depth) {
    json_t *v = json_integer(1);
    for (int i = 0; i < depth; i++)
        v = json_pack("{s:o}", "a", v);
    assert_non_null(v);
    return v;
}

static void test_depth_within_bound(void **state) {
    (void)state;
    char *s = deep_schema(60);
    json_t *v = deep_value(60);
    assert_int_equal(weir__schema_validate_text(s, v, msg, sizeof msg), -1);
    /* the path is long but the message ends with the reason */
    const char *tail = ".a.a: expected string, got integer";
    assert_true(strlen(msg) > strlen(tail));
    assert_string_equal(msg + strlen(msg) - strlen(tail), tail);
    json_decref(v);
    free(s);
}

static void test_hostile_deep_nesting(void **state) {
    (void)state;
    char *s = deep_schema(200);
    json_t *v = deep_value(200);
    assert_int_equal(weir__schema_validate_text(s, v, msg, sizeof msg), -1);
    const char *tail = ": schema error: nested deeper than 64 levels";
    assert_string_equal(msg + strlen(msg) - strlen(tail), tail);
    json_decref(v);
    free(s);

    /* anyOf nested 1000 deep: bounded as well */
    json_t *schema = json_pack("{s:s}", "type", "null");
    for (int i = 0; i < 1000; i++)
        schema = json_pack("{s:[o]}", "anyOf", schema);
    assert_non_null(schema);
    json_t *one = json_integer(1);
    assert_int_equal(weir__schema_validate(schema, one, msg, sizeof msg), -1);
    /* a schema error inside a branch is reported as is, not as "no match" */
    assert_string_equal(msg, "$: schema error: nested deeper than 64 levels");
    json_decref(one);
    json_decref(schema);
}

static void test_tiny_message_buffer(void **state) {
    (void)state;
    json_t *s = json_pack("{s:s}", "type", "string");
    json_t *v = json_integer(1);
    char small[8];
    assert_int_equal(weir__schema_validate(s, v, small, sizeof small), -1);
    assert_string_equal(small, "$: expe");
    json_decref(v);
    json_decref(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_single),
        cmocka_unit_test(test_type_integer_vs_number),
        cmocka_unit_test(test_type_array),
        cmocka_unit_test(test_properties_path),
        cmocka_unit_test(test_required),
        cmocka_unit_test(test_additional_properties_false),
        cmocka_unit_test(test_additional_properties_schema),
        cmocka_unit_test(test_items_path),
        cmocka_unit_test(test_enum),
        cmocka_unit_test(test_const),
        cmocka_unit_test(test_minimum_maximum),
        cmocka_unit_test(test_min_max_length),
        cmocka_unit_test(test_min_max_items),
        cmocka_unit_test(test_any_of),
        cmocka_unit_test(test_one_of),
        cmocka_unit_test(test_one_of_nested_path),
        cmocka_unit_test(test_boolean_schemas),
        cmocka_unit_test(test_unknown_keywords_ignored),
        cmocka_unit_test(test_exclusive_bounds),
        cmocka_unit_test(test_pattern),
        cmocka_unit_test(test_pattern_hostile),
        cmocka_unit_test(test_mcp_server_schemas),
        cmocka_unit_test(test_malformed_schemas),
        cmocka_unit_test(test_secret_keyword),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_depth_within_bound),
        cmocka_unit_test(test_hostile_deep_nesting),
        cmocka_unit_test(test_tiny_message_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
