/*
 * core/format/schema.c - a small JSON Schema validator: the subset documented in
 * docs/schema.md (type, properties, required, additionalProperties, items,
 * enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
 * minLength, maxLength, pattern (core/format/pattern.c), minItems, maxItems,
 * anyOf, oneOf, and weir's own `secret`; `items` also as a draft-07 tuple;
 * with patternProperties, additionalProperties is not applied).  Unknown
 * keywords are ignored; a
 * known keyword with a malformed value is reported as a schema error.
 * Recursion is bounded by MAX_DEPTH so hostile schemas cannot exhaust the
 * stack.  weir__schema_redact walks the same keywords to hide the values a
 * schema marks `"secret": true`.
 *
 * The validator keeps one JSON path buffer ("$.config.port", "$.items[3]")
 * that grows while descending and is cut back on the way up; the first
 * failure writes "<path>: <reason>" into the caller's message buffer.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "schema.h"

#define MAX_DEPTH 64
#define BRANCH_MSG 256 /* per-branch message kept for anyOf/oneOf reports */
#define NOMATCH (-1)
#define BAD_SCHEMA (-2)

typedef struct vctx {
    char path[512];
    size_t len;
    bool foreign; /* weir__schema_validate_foreign */
} vctx;

static int check(vctx *v, const json_t *schema, const json_t *value, int depth,
                 char *msg, size_t size);

static void vreport(const vctx *v, char *msg, size_t size, const char *prefix,
                    const char *fmt, va_list ap) WEIR_PRINTF(5, 0);

static void vreport(const vctx *v, char *msg, size_t size, const char *prefix,
                    const char *fmt, va_list ap) {
    if (!msg || !size)
        return;
    int n = snprintf(msg, size, "%s: %s", v->path, prefix);
    if (n >= 0 && (size_t)n < size)
        vsnprintf(msg + n, size - (size_t)n, fmt, ap);
}

/* The value does not match: "<path>: <reason>", returns NOMATCH. */
static int fail(const vctx *v, char *msg, size_t size, const char *fmt, ...)
    WEIR_PRINTF(4, 5);

static int fail(const vctx *v, char *msg, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(v, msg, size, "", fmt, ap);
    va_end(ap);
    return NOMATCH;
}

/* The schema itself is wrong: "<path>: schema error: <reason>", returns
 * BAD_SCHEMA, which anyOf/oneOf pass on instead of trying other branches. */
static int bad_schema(const vctx *v, char *msg, size_t size, const char *fmt, ...)
    WEIR_PRINTF(4, 5);

static int bad_schema(const vctx *v, char *msg, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(v, msg, size, "schema error: ", fmt, ap);
    va_end(ap);
    return BAD_SCHEMA;
}

/* Append ".key" or "[index]" to the path, truncated to what fits (as
 * snprintf would; no formatting call: this runs per member validated). */
static size_t path_push(vctx *v, const char *key, size_t index) {
    size_t old = v->len;
    char num[24];
    const char *add = key;
    size_t n;
    if (key) {
        n = strlen(key);
    } else {
        char *p = num + sizeof num;
        *--p = ']';
        do
            *--p = (char)('0' + index % 10);
        while ((index /= 10) != 0);
        *--p = '[';
        add = p;
        n = (size_t)(num + sizeof num - p);
    }
    size_t room = sizeof v->path - 1 - v->len; /* bytes left before the terminator */
    if (key && room) {
        v->path[v->len++] = '.';
        room--;
    }
    size_t take = n < room ? n : room;
    memcpy(v->path + v->len, add, take);
    v->len += take;
    v->path[v->len] = '\0';
    return old;
}

static void path_pop(vctx *v, size_t old) {
    v->len = old;
    v->path[old] = '\0';
}

static bool is_integral(const json_t *value) {
    if (json_is_integer(value))
        return true;
    if (!json_is_real(value))
        return false;
    double d = json_real_value(value);
    if (!isfinite(d))
        return false;
    /* beyond 2^53 every double is integral; below, compare with a truncation */
    if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
        return true;
    return d == (double)(int64_t)d;
}

static const char *type_of(const json_t *value) {
    switch (json_typeof(value)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
    default:
        return "null";
    }
}

/* 1 when `value` has type `name`, 0 when not, -1 for an unknown type name. */
static int type_matches(const char *name, const json_t *value) {
    if (strcmp(name, "object") == 0)
        return json_is_object(value);
    if (strcmp(name, "array") == 0)
        return json_is_array(value);
    if (strcmp(name, "string") == 0)
        return json_is_string(value);
    if (strcmp(name, "integer") == 0)
        return is_integral(value);
    if (strcmp(name, "number") == 0)
        return json_is_number(value);
    if (strcmp(name, "boolean") == 0)
        return json_is_boolean(value);
    if (strcmp(name, "null") == 0)
        return json_is_null(value);
    return -1;
}

/* The keywords of one schema object, found in one pass over its members
 * (a schema has a few; looking each keyword up cost more than checking). */
typedef struct keywords {
    const json_t *type, *enum_, *const_, *minimum, *maximum, *min_length, *max_length,
        *min_items, *max_items, *properties, *required, *additional, *pattern_props, *items,
        *any_of, *one_of, *secret, *pattern, *ex_minimum, *ex_maximum;
} keywords;

static void gather(const json_t *schema, keywords *k) {
    memset(k, 0, sizeof *k);
    json_t *obj = (json_t *)(uintptr_t)schema; /* jansson's iterator is not const */
    for (void *it = json_object_iter(obj); it; it = json_object_iter_next(obj, it)) {
        const char *key = json_object_iter_key(it);
        const json_t *val = json_object_iter_value(it);
        if (strlen(key) != json_object_iter_key_len(it))
            continue; /* a key holding a NUL is no keyword */
        const json_t **slot = NULL;
        switch (key[0]) {
        case 'a':
            slot = !strcmp(key, "additionalProperties") ? &k->additional
                   : !strcmp(key, "anyOf")              ? &k->any_of
                                                        : NULL;
            break;
        case 'c': slot = !strcmp(key, "const") ? &k->const_ : NULL; break;
        case 'e':
            slot = !strcmp(key, "enum")               ? &k->enum_
                   : !strcmp(key, "exclusiveMinimum") ? &k->ex_minimum
                   : !strcmp(key, "exclusiveMaximum") ? &k->ex_maximum
                                                      : NULL;
            break;
        case 'i': slot = !strcmp(key, "items") ? &k->items : NULL; break;
        case 'm':
            slot = !strcmp(key, "minimum")     ? &k->minimum
                   : !strcmp(key, "maximum")   ? &k->maximum
                   : !strcmp(key, "minLength") ? &k->min_length
                   : !strcmp(key, "maxLength") ? &k->max_length
                   : !strcmp(key, "minItems")  ? &k->min_items
                   : !strcmp(key, "maxItems")  ? &k->max_items
                                               : NULL;
            break;
        case 'o': slot = !strcmp(key, "oneOf") ? &k->one_of : NULL; break;
        case 'p':
            slot = !strcmp(key, "properties")          ? &k->properties
                   : !strcmp(key, "patternProperties") ? &k->pattern_props
                   : !strcmp(key, "pattern")           ? &k->pattern
                                                       : NULL;
            break;
        case 'r': slot = !strcmp(key, "required") ? &k->required : NULL; break;
        case 's': slot = !strcmp(key, "secret") ? &k->secret : NULL; break;
        case 't': slot = !strcmp(key, "type") ? &k->type : NULL; break;
        default: break;
        }
        if (slot)
            *slot = val;
    }
}

static int check_type(vctx *v, const json_t *type, const json_t *value, char *msg,
                      size_t size) {
    if (json_is_string(type)) {
        int m = type_matches(json_string_value(type), value);
        if (m < 0)
            return bad_schema(v, msg, size, "unknown type \"%s\"",
                        json_string_value(type));
        if (!m)
            return fail(v, msg, size, "expected %s, got %s", json_string_value(type),
                        type_of(value));
        return 0;
    }
    if (!json_is_array(type) || json_array_size(type) == 0)
        return bad_schema(v, msg, size, "\"type\" must be a string or a non-empty array");
    char names[160] = "";
    size_t at = 0, i;
    const json_t *t;
    json_array_foreach(type, i, t) {
        if (!json_is_string(t))
            return bad_schema(v, msg, size, "\"type\" entries must be strings");
        int m = type_matches(json_string_value(t), value);
        if (m < 0)
            return bad_schema(v, msg, size, "unknown type \"%s\"",
                        json_string_value(t));
        if (m)
            return 0;
        int n = snprintf(names + at, sizeof names - at, "%s%s", i ? " or " : "",
                         json_string_value(t));
        if (n > 0)
            at = (size_t)n >= sizeof names - at ? sizeof names - 1 : at + (size_t)n;
    }
    return fail(v, msg, size, "expected %s, got %s", names, type_of(value));
}


/* Compare value against bound: <0, 0, >0 (integers exactly, else doubles). */
static int num_cmp(const json_t *value, const json_t *bound) {
    if (json_is_integer(value) && json_is_integer(bound)) {
        json_int_t a = json_integer_value(value), b = json_integer_value(bound);
        return (a > b) - (a < b);
    }
    double a = json_number_value(value), b = json_number_value(bound);
    return (a > b) - (a < b);
}

static void num_str(const json_t *n, char *buf, size_t size) {
    if (json_is_integer(n))
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(n));
    else
        snprintf(buf, size, "%.17g", json_real_value(n));
}

static int check_number(vctx *v, const keywords *k, const json_t *value, char *msg,
                        size_t size) {
    const json_t *min = k->minimum, *max = k->maximum;
    const json_t *xmin = k->ex_minimum, *xmax = k->ex_maximum;
    if ((min && !json_is_number(min)) || (max && !json_is_number(max)))
        return bad_schema(v, msg, size, "\"minimum\"/\"maximum\" must be numbers");
    if ((xmin && !json_is_number(xmin) && !json_is_boolean(xmin)) ||
        (xmax && !json_is_number(xmax) && !json_is_boolean(xmax)))
        return bad_schema(v, msg, size,
                          "\"exclusiveMinimum\"/\"exclusiveMaximum\" must be numbers (or, as "
                          "draft 4 has them, booleans)");
    if (!json_is_number(value))
        return 0;
    /* draft 4: a boolean makes minimum/maximum exclusive */
    bool min_strict = json_is_true(xmin), max_strict = json_is_true(xmax);
    char a[48], b[48];
    if (min && (min_strict ? num_cmp(value, min) <= 0 : num_cmp(value, min) < 0)) {
        num_str(value, a, sizeof a);
        num_str(min, b, sizeof b);
        return fail(v, msg, size, "%s is %s the minimum %s", a,
                    min_strict ? "not greater than" : "less than", b);
    }
    if (max && (max_strict ? num_cmp(value, max) >= 0 : num_cmp(value, max) > 0)) {
        num_str(value, a, sizeof a);
        num_str(max, b, sizeof b);
        return fail(v, msg, size, "%s is %s the maximum %s", a,
                    max_strict ? "not less than" : "greater than", b);
    }
    if (json_is_number(xmin) && num_cmp(value, xmin) <= 0) {
        num_str(value, a, sizeof a);
        num_str(xmin, b, sizeof b);
        return fail(v, msg, size, "%s is not greater than the exclusive minimum %s", a, b);
    }
    if (json_is_number(xmax) && num_cmp(value, xmax) >= 0) {
        num_str(value, a, sizeof a);
        num_str(xmax, b, sizeof b);
        return fail(v, msg, size, "%s is not less than the exclusive maximum %s", a, b);
    }
    return 0;
}

/* `pattern`: the string must match the ECMA-262 regular expression
 * somewhere (core/format/pattern.c). */
static int check_pattern(vctx *v, const json_t *pattern, const json_t *value, char *msg,
                         size_t size) {
    if (!pattern)
        return 0;
    if (!json_is_string(pattern))
        return bad_schema(v, msg, size, "\"pattern\" must be a string");
    if (!json_is_string(value))
        return 0;
    char why[160];
    int m = weir__pattern_match(json_string_value(pattern), json_string_length(pattern),
                                json_string_value(value), json_string_length(value), why,
                                sizeof why);
    if (m == 1 || (m == WEIR__PATTERN_UNSUPPORTED && v->foreign))
        return 0;
    if (m == 0)
        return fail(v, msg, size, "does not match the pattern \"%.120s\"",
                    json_string_value(pattern));
    return bad_schema(v, msg, size, "\"pattern\" \"%.120s\": %s%s", json_string_value(pattern),
                      m == WEIR__PATTERN_UNSUPPORTED ? "uses what weir cannot evaluate: " : "",
                      why);
}

/* A non-negative integer keyword; false when present but malformed. */
static bool count_kw(const json_t *k, bool *present, json_int_t *out) {
    *present = k != NULL;
    if (!k)
        return true;
    if (!json_is_integer(k) || json_integer_value(k) < 0)
        return false;
    *out = json_integer_value(k);
    return true;
}

static size_t utf8_length(const char *s, size_t bytes) {
    size_t n = 0;
    for (size_t i = 0; i < bytes; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            n++;
    return n;
}

static int check_length(vctx *v, const json_t *lo_v, const json_t *hi_v, const json_t *value,
                        const char *lo_kw, const char *hi_kw, const char *unit,
                        char *msg, size_t size) {
    bool has_lo, has_hi;
    json_int_t lo = 0, hi = 0;
    if (!lo_v && !hi_v)
        return 0;
    if (!count_kw(lo_v, &has_lo, &lo) || !count_kw(hi_v, &has_hi, &hi))
        return bad_schema(v, msg, size, "\"%s\"/\"%s\" must be non-negative integers",
                    lo_kw, hi_kw);
    size_t n;
    if (json_is_string(value))
        n = utf8_length(json_string_value(value), json_string_length(value));
    else if (json_is_array(value))
        n = json_array_size(value);
    else
        return 0;
    if (has_lo && (json_int_t)n < lo)
        return fail(v, msg, size, "has %zu %s, fewer than %s %" JSON_INTEGER_FORMAT, n, unit,
                    lo_kw, lo);
    if (has_hi && (json_int_t)n > hi)
        return fail(v, msg, size, "has %zu %s, more than %s %" JSON_INTEGER_FORMAT, n, unit,
                    hi_kw, hi);
    return 0;
}

static int check_object(vctx *v, const keywords *k, const json_t *value, int depth,
                        char *msg, size_t size) {
    const json_t *props = k->properties, *req = k->required, *extra = k->additional;
    if (props && !json_is_object(props))
        return bad_schema(v, msg, size, "\"properties\" must be an object");
    if (req && !json_is_array(req))
        return bad_schema(v, msg, size, "\"required\" must be an array");
    if (extra && !json_is_boolean(extra) && !json_is_object(extra))
        return bad_schema(v, msg, size, "\"additionalProperties\" must be a boolean or a schema");
    /* patternProperties are not evaluated (their regexes are ECMA-262's): a
     * member outside `properties` may match one, so additionalProperties
     * says nothing about it here and the owner of the schema decides */
    if (k->pattern_props)
        extra = NULL;
    if (!json_is_object(value))
        return 0;
    size_t i;
    const json_t *r;
    json_array_foreach(req, i, r) {
        if (!json_is_string(r))
            return bad_schema(v, msg, size, "\"required\" entries must be strings");
        if (!json_object_get(value, json_string_value(r))) {
            size_t old = path_push(v, json_string_value(r), 0);
            fail(v, msg, size, "required property is missing");
            path_pop(v, old);
            return NOMATCH;
        }
    }
    const char *key;
    const json_t *member;
    json_t *obj = (json_t *)(uintptr_t)value; /* jansson's iterator is not const */
    json_object_foreach(obj, key, member) {
        const json_t *sub = props ? json_object_get(props, key) : NULL;
        if (!sub && !extra)
            continue;
        size_t old = path_push(v, key, 0);
        int rc;
        if (sub)
            rc = check(v, sub, member, depth + 1, msg, size);
        else if (json_is_false(extra))
            rc = fail(v, msg, size, "property is not allowed");
        else
            rc = check(v, extra, member, depth + 1, msg, size);
        path_pop(v, old);
        if (rc)
            return rc;
    }
    return 0;
}

static int check_items(vctx *v, const keywords *k, const json_t *value, int depth,
                       char *msg, size_t size) {
    const json_t *items = k->items;
    if (!items)
        return 0;
    bool tuple = json_is_array(items); /* draft-07 tuples: element i against items[i] */
    if (!json_is_object(items) && !json_is_boolean(items) && !tuple)
        return bad_schema(v, msg, size, "\"items\" must be a schema or an array of schemas");
    if (!json_is_array(value))
        return 0;
    size_t i;
    const json_t *elem;
    json_array_foreach(value, i, elem) {
        const json_t *sub = tuple ? json_array_get(items, i) : items;
        if (!sub)
            break; /* past the tuple: additionalItems (not checked) */
        size_t old = path_push(v, NULL, i);
        int rc = check(v, sub, elem, depth + 1, msg, size);
        path_pop(v, old);
        if (rc)
            return rc;
    }
    return 0;
}

static int check_enum_const(vctx *v, const keywords *k, const json_t *value, char *msg,
                            size_t size) {
    const json_t *c = k->const_;
    if (c && !json_equal(c, value)) {
        char *want = weir__json_dump(c);
        fail(v, msg, size, "expected the constant %s", want ? want : "value");
        free(want);
        return NOMATCH;
    }
    const json_t *e = k->enum_;
    if (!e)
        return 0;
    if (!json_is_array(e))
        return bad_schema(v, msg, size, "\"enum\" must be an array");
    size_t i;
    const json_t *opt;
    json_array_foreach(e, i, opt) {
        if (json_equal(opt, value))
            return 0;
    }
    char *list = weir__json_dump(e);
    fail(v, msg, size, "value is not one of %s", list ? list : "the enum");
    free(list);
    return NOMATCH;
}

static int report_branches(vctx *v, const json_t *list, const char *kw, const json_t *value,
                           int depth, char *msg, size_t size);

/* anyOf (exactly = false) or oneOf (exactly = true). */
static int check_branches(vctx *v, const json_t *list, const char *kw, bool exactly,
                          const json_t *value, int depth, char *msg, size_t size) {
    if (!list)
        return 0;
    if (!json_is_array(list) || json_array_size(list) == 0)
        return bad_schema(v, msg, size, "\"%s\" must be a non-empty array", kw);
    /* first without messages: formatting every failed branch's reason costs
     * more than checking it, and a match needs no reason */
    size_t i, matched = 0, first = 0, second = 0;
    bool bad = false;
    const json_t *sub;
    json_array_foreach(list, i, sub) {
        size_t old = v->len;
        int rc = check(v, sub, value, depth + 1, NULL, 0);
        path_pop(v, old);
        if (rc == BAD_SCHEMA) {
            bad = true;
            break;
        }
        if (rc == 0) {
            if (!exactly)
                return 0;
            if (matched++ == 0) {
                first = i;
            } else {
                second = i;
                break;
            }
        }
    }
    if (!bad && matched == 1)
        return 0;
    if (!bad && matched > 1)
        return fail(v, msg, size, "matches %s branches %zu and %zu, expected exactly one", kw,
                    first + 1, second + 1);
    if (!msg || !size)
        return bad ? BAD_SCHEMA : NOMATCH;
    /* no branch matched (or a branch is a bad schema): again, for the reasons */
    return report_branches(v, list, kw, value, depth, msg, size);
}

/* The reasons no branch of `list` matched (or the bad branch's error). */
static int report_branches(vctx *v, const json_t *list, const char *kw, const json_t *value,
                           int depth, char *msg, size_t size) {
    char why[BRANCH_MSG * 2] = "";
    size_t at = 0, i;
    const json_t *sub;
    json_array_foreach(list, i, sub) {
        char one[BRANCH_MSG];
        one[0] = '\0';
        size_t old = v->len;
        int rc = check(v, sub, value, depth + 1, one, sizeof one);
        path_pop(v, old);
        if (rc == BAD_SCHEMA) {
            snprintf(msg, size, "%s", one);
            return BAD_SCHEMA;
        }
        int n = snprintf(why + at, sizeof why - at, "%s%zu: %s", i ? "; " : "", i + 1, one);
        if (n > 0)
            at = (size_t)n >= sizeof why - at ? sizeof why - 1 : at + (size_t)n;
    }
    return fail(v, msg, size, "matches none of the %s branches (%s)", kw, why);
}

static int check(vctx *v, const json_t *schema, const json_t *value, int depth, char *msg,
                 size_t size) {
    if (depth > MAX_DEPTH)
        return bad_schema(v, msg, size, "nested deeper than %d levels", MAX_DEPTH);
    if (json_is_true(schema))
        return 0;
    if (json_is_false(schema))
        return fail(v, msg, size, "no value is allowed here");
    if (!json_is_object(schema))
        return bad_schema(v, msg, size, "a schema must be an object or a boolean");
    keywords k;
    gather(schema, &k);
    if (k.secret && !json_is_boolean(k.secret))
        return bad_schema(v, msg, size, "\"secret\" must be a boolean");
    int rc = k.type ? check_type(v, k.type, value, msg, size) : 0;
    if (!rc)
        rc = check_enum_const(v, &k, value, msg, size);
    if (!rc)
        rc = check_number(v, &k, value, msg, size);
    if (!rc)
        rc = check_pattern(v, k.pattern, value, msg, size);
    if (!rc)
        rc = check_length(v, k.min_length, k.max_length, value, "minLength", "maxLength",
                          "characters", msg, size);
    if (!rc)
        rc = check_length(v, k.min_items, k.max_items, value, "minItems", "maxItems", "items",
                          msg, size);
    if (!rc)
        rc = check_object(v, &k, value, depth, msg, size);
    if (!rc)
        rc = check_items(v, &k, value, depth, msg, size);
    if (!rc)
        rc = check_branches(v, k.any_of, "anyOf", false, value, depth, msg, size);
    if (!rc)
        rc = check_branches(v, k.one_of, "oneOf", true, value, depth, msg, size);
    return rc;
}

int weir__schema_validate(const json_t *schema, const json_t *value, char *msg,
                          size_t msg_size) {
    if (msg && msg_size)
        msg[0] = '\0';
    vctx v = {.path = "$", .len = 1};
    if (!schema || !value)
        return fail(&v, msg, msg_size, "no %s to validate", schema ? "value" : "schema");
    return check(&v, schema, value, 0, msg, msg_size) ? -1 : 0;
}

int weir__schema_validate_foreign(const json_t *schema, const json_t *value, char *msg,
                                  size_t msg_size) {
    if (msg && msg_size)
        msg[0] = '\0';
    vctx v = {.path = "$", .len = 1, .foreign = true};
    if (!schema || !value)
        return fail(&v, msg, msg_size, "no %s to validate", schema ? "value" : "schema");
    return check(&v, schema, value, 0, msg, msg_size) ? -1 : 0;
}

int weir__schema_validate_text(const char *schema_text, const json_t *value, char *msg,
                               size_t msg_size) {
    if (!schema_text)
        return weir__schema_validate(NULL, value, msg, msg_size);
    json_error_t jerr;
    json_t *schema = weir__json_loads(schema_text, JSON_DECODE_ANY, &jerr);
    if (!schema) {
        if (msg && msg_size)
            snprintf(msg, msg_size, "schema is not valid JSON: line %d: %s", jerr.line,
                     jerr.text);
        return -1;
    }
    int rc = weir__schema_validate(schema, value, msg, msg_size);
    json_decref(schema);
    return rc;
}

/* ---- secrets --------------------------------------------------------------- */

/* True when `schema` marks its value secret: "secret": true on it, or on one
 * of its anyOf/oneOf branches. */
static bool marks_secret(const json_t *schema, int depth) {
    if (!json_is_object(schema) || depth > MAX_DEPTH)
        return false;
    if (json_is_true(json_object_get(schema, "secret")))
        return true;
    static const char *const kws[] = {"anyOf", "oneOf"};
    for (size_t k = 0; k < 2; k++) {
        size_t i;
        const json_t *sub;
        json_array_foreach(json_object_get(schema, kws[k]), i, sub) {
            if (marks_secret(sub, depth + 1))
                return true;
        }
    }
    return false;
}

/* The schema of member `key` under an object schema: its "properties" entry
 * (an exact match, else one that differs only in ASCII case: header names
 * are case-blind), else an object "additionalProperties"; NULL when none. */
static const json_t *member_schema(const json_t *schema, const char *key) {
    const json_t *props = json_object_get(schema, "properties");
    const json_t *sub = json_object_get(props, key);
    if (!sub) {
        const char *name;
        const json_t *p;
        json_object_foreach((json_t *)(uintptr_t)props, name, p) {
            if (strcasecmp(name, key) == 0)
                return p;
        }
        const json_t *extra = json_object_get(schema, "additionalProperties");
        sub = json_is_object(extra) ? extra : NULL;
    }
    return sub;
}

/* Nothing to hide: an empty string (shown, so that an unset key is visible). */
static bool blank(const json_t *v) {
    return json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0);
}

static int redact(const json_t *schema, json_t *value, const char *mask, int depth) {
    if (!json_is_object(schema) || depth > MAX_DEPTH)
        return 0;
    int n = 0;
    if (json_is_object(value)) {
        const char *key;
        json_t *member;
        json_object_foreach(value, key, member) {
            const json_t *sub = member_schema(schema, key);
            int r = 0;
            if (!marks_secret(sub, depth + 1))
                r = redact(sub, member, mask, depth + 1);
            else if (!blank(member)) /* replaces the value of an existing key: safe here */
                r = json_object_set_new(value, key, json_string(mask)) == 0 ? 1 : -1;
            if (r < 0)
                return -1;
            n += r;
        }
    } else if (json_is_array(value)) {
        const json_t *items = json_object_get(schema, "items");
        bool secret = marks_secret(items, depth + 1);
        for (size_t i = 0; i < json_array_size(value); i++) {
            json_t *elem = json_array_get(value, i);
            int r = 0;
            if (!secret)
                r = redact(items, elem, mask, depth + 1);
            else if (!blank(elem))
                r = json_array_set_new(value, i, json_string(mask)) == 0 ? 1 : -1;
            if (r < 0)
                return -1;
            n += r;
        }
    }
    static const char *const kws[] = {"anyOf", "oneOf"};
    for (size_t k = 0; k < 2; k++) { /* a branch's marks apply to the same value */
        size_t i;
        const json_t *sub;
        json_array_foreach(json_object_get(schema, kws[k]), i, sub) {
            int r = redact(sub, value, mask, depth + 1);
            if (r < 0)
                return -1;
            n += r;
        }
    }
    return n;
}

int weir__schema_redact(const json_t *schema, json_t *value, const char *mask) {
    if (!schema || !value || !mask)
        return 0;
    return redact(schema, value, mask, 0);
}
