/*
 * tests/fuzz/fuzz_openai_chunk.c - libFuzzer target for provider-openai's
 * stream decoder (and its request translation).
 *
 * The input is split at '\n'; each line is the data of one SSE event.  The
 * decoder must never crash, and must end every stream with exactly one
 * finish chunk, last.  The whole input, when it parses as JSON, is also
 * translated as a request, without and twice with a request cache: the
 * three texts (or failure messages) are the same, and a body is JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "openai.h"
#include "provider_test.h"

static void line(void *decoder, const char *p, size_t n) {
    openai_decoder_event(decoder, p, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pt_fuzz_seen s = {0, 0, false};
    openai_decoder *d = openai_decoder_new("fuzz", pt_fuzz_count, &s);
    if (!d)
        return 0;
    pt_fuzz_lines((const char *)data, size, line, d);
    pt_fuzz_check_end(openai_decoder_end(d, NULL, false), &s);
    openai_decoder_free(d);

    json_t *request = json_loadb((const char *)data, size, 0, NULL);
    if (request) {
        char msg[256], msg2[256];
        char *plain = openai_request_text(request, NULL, msg, sizeof msg);
        pc_cache *cache = pc_cache_new(4, 1 << 16);
        for (int round = 0; cache && round < 2; round++) {
            char *cached = openai_request_text(request, cache, msg2, sizeof msg2);
            if (!plain != !cached || (plain && strcmp(plain, cached) != 0) ||
                (!plain && strcmp(msg, msg2) != 0))
                abort();
            free(cached);
        }
        if (plain) {
            json_t *body = json_loads(plain, 0, NULL);
            if (!body)
                abort();
            json_decref(body);
        }
        free(plain);
        pc_cache_free(cache);
        json_decref(request);
    }
    return 0;
}
