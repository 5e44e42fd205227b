/*
 * examples/ffi-tools/weirdemo.c - libweirdemo.so, a tiny C library exposed
 * to the model through tools-ffi (see deployment.json and README.md).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define WEIRDEMO_API __attribute__((visibility("default")))

WEIRDEMO_API char *weirdemo_shout(const char *text);
WEIRDEMO_API void weirdemo_free(void *p);
WEIRDEMO_API int weirdemo_divmod(int a, int b, int *quotient, int *remainder);
WEIRDEMO_API void weirdemo_primes(int n, int *primes);

/* A malloc'd upper-cased copy of `text` with "!" appended; free with weirdemo_free. */
char *weirdemo_shout(const char *text) {
    size_t n = strlen(text);
    char *out = malloc(n + 2);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)toupper((unsigned char)text[i]);
    out[n] = '!';
    out[n + 1] = '\0';
    return out;
}

/* Release a string returned by this library. */
void weirdemo_free(void *p) { free(p); }

/* Integer division: 0 and *quotient, *remainder on success; -1 when b is 0. */
int weirdemo_divmod(int a, int b, int *quotient, int *remainder) {
    if (b == 0 || (a == -2147483647 - 1 && b == -1))
        return -1;
    *quotient = a / b;
    *remainder = a % b;
    return 0;
}

/* The first n primes into primes[0 .. n-1]; it trusts n, like most C code. */
void weirdemo_primes(int n, int *primes) {
    int found = 0;
    for (int c = 2; found < n; c++) {
        int k = 0;
        while (k < found && c % primes[k] != 0)
            k++;
        if (k == found)
            primes[found++] = c;
    }
}
