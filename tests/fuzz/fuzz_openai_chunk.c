/*
 * tests/fuzz/fuzz_openai_chunk.c - libFuzzer target for provider-openai's
 * stream decoder (and its request translation).
 *
 * The input is split at '\n'; each line is the data of one SSE event.  The
 * decoder must never crash, and must end every stream with exactly one
 * finish chunk, last.  The whole input, when it parses as JSON, is also
 * translated as a request.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "openai.h"

typedef struct seen {
    size_t chunks, finishes;
    bool finish_last;
} seen;

static int count(void *user_data, json_t *chunk) {
    seen *s = user_data;
    const char *type = json_string_value(json_object_get(chunk, "type"));
    if (!type)
        abort();
    s->chunks++;
    s->finish_last = strcmp(type, "finish") == 0;
    s->finishes += s->finish_last;
    json_decref(chunk);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    seen s = {0, 0, false};
    openai_decoder *d = openai_decoder_new("fuzz", count, &s);
    if (!d)
        return 0;
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        openai_decoder_event(d, p, n);
        p += n + 1;
    }
    if (openai_decoder_end(d, NULL, false) == 0 && (s.finishes != 1 || !s.finish_last))
        abort();
    openai_decoder_free(d);

    json_t *request = json_loadb((const char *)data, size, 0, NULL);
    if (request) {
        char msg[256];
        json_decref(openai_request_body(request, msg, sizeof msg));
        json_decref(request);
    }
    return 0;
}
