/*
 * tests/fuzz/fuzz_schema_pattern.c - libFuzzer target for JSON Schema's
 * `pattern` (core/format/pattern.c): the input up to its first newline is
 * the ECMA-262 pattern, the rest the string it is matched against.
 *
 * Oracles: weir__pattern_match answers 1, 0 or a documented code (with a
 * reason), never crashes; a pattern the translation takes gives a POSIX
 * form regcomp compiles, and its answer is the same twice (the translation
 * and the match are pure).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *in = (const char *)data;
    const char *nl = memchr(in, '\n', size);
    size_t plen = nl ? (size_t)(nl - in) : size;
    size_t n = nl ? size - plen - 1 : 0;
    char *s = malloc(n + 1); /* NUL-terminated at s[n], as the contract asks */
    if (!s)
        return 0;
    if (n)
        memcpy(s, nl + 1, n);
    s[n] = '\0';
    char why[160] = "";
    int a = weir__pattern_match(in, plen, s, n, why, sizeof why);
    if (a != 1 && a != 0 && a != WEIR__PATTERN_INVALID && a != WEIR__PATTERN_UNSUPPORTED &&
        a != WEIR__PATTERN_NOMEM)
        abort();
    if (a < 0 && !why[0])
        abort();
    int b = weir__pattern_match(in, plen, s, n, why, sizeof why);
    if (a != b)
        abort();
    free(s);
    return 0;
}
