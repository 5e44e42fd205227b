/*
 * tests/fuzz/fuzz_openai_chunk.c - libFuzzer target for provider-openai's
 * stream decoder (and its request translation), continuations included
 * (DeepSeek's reasoning_content, Gemini's thought_signature).
 *
 * The input is split at '\n'; each line is the data of one SSE event.  The
 * decoder must never crash, and must end every stream with exactly one
 * finish chunk, last.  The whole input, when it parses as JSON, is also
 * translated as a request, without and twice with a request cache: the
 * three texts (or failure messages) are the same, and a body is JSON; and
 * its history, grown, rewritten and shrunk through a memo, gives the body
 * built from nothing at each step (pt_fuzz_check_memo).
 */
#include <stdint.h>

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
    openai_decoder_set_model(d, "fuzz-model"); /* continuation chunks too */
    pt_fuzz_lines((const char *)data, size, line, d);
    pt_fuzz_check_end(openai_decoder_end(d, NULL, false), &s);
    openai_decoder_free(d);

    json_t *request = json_loadb((const char *)data, size, 0, NULL);
    if (request) {
        pt_fuzz_check_request(request, openai_request_text);
        pt_fuzz_check_memo(request, openai_request_text, openai_request_build);
        json_decref(request);
    }
    return 0;
}
