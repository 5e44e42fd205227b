/*
 * core/schema.h - a small JSON Schema validator (the subset in docs/schema.md:
 * type, properties, required, additionalProperties, items, enum, const,
 * minimum, maximum, minLength, maxLength, minItems, maxItems, anyOf).
 * Used for plugin configs, hook results and tool arguments.  Pure, thread-safe.
 */
#ifndef WEIR_CORE_SCHEMA_H
#define WEIR_CORE_SCHEMA_H

#include "common.h"

/*
 * 0 when `value` matches `schema`; -1 otherwise with `msg` naming the
 * JSON path of the first bad field ("$.x.y: expected integer").
 */
int weir__schema_validate(const json_t *schema, const json_t *value, char *msg,
                          size_t msg_size);

/* Parse schema text and validate; -1 and a message if the text is not JSON. */
int weir__schema_validate_text(const char *schema_text, const json_t *value,
                               char *msg, size_t msg_size);

#endif
