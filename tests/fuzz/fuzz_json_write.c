/*
 * tests/fuzz/fuzz_json_write.c - the core's serializer (core/base/json_write.c)
 * against jansson as the oracle: the input is parsed (any value, NUL
 * allowed), then serialized by both; the bytes must be the same.  A second
 * pass wraps the input's bytes, unchecked, as one string: both must refuse
 * it or write the same text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)

static void compare(const json_t *v) {
    char *want = json_dumps(v, FLAGS);
    char *got = weir__json_dump(v);
    if ((want == NULL) != (got == NULL) || (want && strcmp(want, got) != 0))
        abort();
    free(want);
    free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t e;
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (v) {
        compare(v);
        json_decref(v);
    }
    json_t *s = json_stringn_nocheck((const char *)data, size);
    if (s) {
        compare(s);
        json_decref(s);
    }
    return 0;
}
