/*
 * tests/fuzz/fuzz_responses_event.c - libFuzzer target for provider-openai's
 * Responses API stream decoder and request builder (issue #35).
 *
 * The input is split at '\n'; each line is the data of one SSE event.  The
 * decoder must never crash, and must end every stream with exactly one
 * finish chunk, last.  The whole input, when it parses as JSON, is also
 * built as a request, without and twice with a request cache: the three
 * texts (or failure messages) are the same, and a body is JSON; and its
 * history, grown, rewritten and shrunk through a memo, gives the body built
 * from nothing at each step (pt_fuzz_check_memo).
 */
#include <stdint.h>
#include <stdlib.h>

#include "openai.h"
#include "provider_test.h"

static void line(void *decoder, const char *p, size_t n) {
    responses_decoder_event(decoder, p, n);
}

/* The builder as the shared checks call it. */
static int build(const json_t *request, pc_cache *cache, pc_memo *memo, char *msg,
                 size_t size) {
    return openai_responses_build(request, NULL, cache, memo, msg, size);
}

static char *text(const json_t *request, pc_cache *cache, char *msg, size_t size) {
    pc_memo *one = calloc(1, sizeof *one);
    char *out = NULL;
    if (one && build(request, cache, one, msg, size) == 0) {
        out = one->text.p;
        one->text.p = NULL;
    }
    pc_memo_free(one);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pt_fuzz_seen s = {0, 0, false};
    responses_decoder *d = responses_decoder_new("fuzz", "fuzz-model", pt_fuzz_count, &s);
    if (!d)
        return 0;
    pt_fuzz_lines((const char *)data, size, line, d);
    pt_fuzz_check_end(responses_decoder_end(d, NULL, false), &s);
    responses_decoder_free(d);

    json_t *request = json_loadb((const char *)data, size, 0, NULL);
    if (request) {
        pt_fuzz_check_request(request, text);
        pt_fuzz_check_memo(request, text, build);
        json_decref(request);
    }
    return 0;
}
