/*
 * core/format/schema.h - a small JSON Schema validator (the subset in docs/schema.md:
 * type, properties, required, additionalProperties, items, enum, const,
 * minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength,
 * maxLength, pattern, minItems, maxItems, anyOf, oneOf, and weir's `secret`
 * marker).
 * Used for plugin configs, hook results and tool arguments.  Pure,
 * thread-safe; schema nesting is bounded (64 levels), so hostile schemas fail
 * with a message instead of exhausting the stack.
 */
#ifndef WEIR_CORE_SCHEMA_H
#define WEIR_CORE_SCHEMA_H

#include "common.h"

/*
 * 0 when `value` matches `schema` (both borrowed); -1 otherwise with `msg`
 * (may be NULL when msg_size is 0; always NUL-terminated) naming the JSON
 * path of the first bad field: "$.config.port: expected integer, got string".
 * A malformed schema fails with "<path>: schema error: <what>".
 */
int weir__schema_validate(const json_t *schema, const json_t *value, char *msg,
                          size_t msg_size);
/* As weir__schema_validate, for a schema weir does not own (a tool's
 * parameters, often an MCP server's): a `pattern` outside the subset weir
 * evaluates (WEIR__PATTERN_UNSUPPORTED) is left to the schema's owner, not
 * a schema error. */
int weir__schema_validate_foreign(const json_t *schema, const json_t *value, char *msg,
                                  size_t msg_size);

/*
 * Parse `schema_text` (any JSON value; `true`/`false` are schemas too) and
 * validate as above; -1 and "schema is not valid JSON: line N: ..." when the
 * text does not parse (or memory runs out while parsing).
 */
int weir__schema_validate_text(const char *schema_text, const json_t *value,
                               char *msg, size_t msg_size);

/*
 * Replace, in place, each value inside `value` (borrowed, modified) that
 * `schema` (borrowed) marks `"secret": true` with a new string `mask`: the
 * marks of "properties" (a member name matches in any ASCII case),
 * "additionalProperties", "items" and every anyOf/oneOf branch apply; the
 * root value itself is never replaced.  Empty strings and nulls are left as
 * they are.  @return how many values were replaced, or -1 when out of memory
 * (then `value` may be partly redacted).
 */
int weir__schema_redact(const json_t *schema, json_t *value, const char *mask);

/* core/format/pattern.c: JSON Schema's `pattern`, an ECMA-262 regular
 * expression evaluated through its POSIX extended form (docs/schema.md,
 * "pattern"). */
#define WEIR__PATTERN_INVALID (-1)     /* not a valid regular expression */
#define WEIR__PATTERN_UNSUPPORTED (-2) /* valid, but outside the subset (lookaround, ...) */
#define WEIR__PATTERN_NOMEM (-3)

/* The POSIX extended form of ECMA-262 pattern `p` (n bytes) into *ere
 * (weir__free it): 0, or a WEIR__PATTERN_* code with `why` (size bytes). */
int weir__pattern_translate(const char *p, size_t n, char **ere, char *why, size_t size);
/* Whether pattern `p` (plen bytes) matches somewhere in `s` (n bytes of
 * UTF-8, NULs allowed, and a NUL at s[n] as jansson's strings have: a
 * sanitizer's regexec reads up to it): 1, 0, or a WEIR__PATTERN_* code with
 * `why`. */
int weir__pattern_match(const char *p, size_t plen, const char *s, size_t n, char *why,
                        size_t size);

#endif
