/*
 * tests/fuzz/fuzz_anthropic_event.c - libFuzzer target for
 * provider-anthropic's stream decoder (and its request translation).
 *
 * The input is split at '\n'; each line is one SSE event, "name\tdata" or
 * just data.  The decoder must never crash, and must end every stream with
 * exactly one finish chunk, last.  The whole input, when it parses as JSON,
 * is also translated as a request, without and twice with a request cache:
 * the three texts (or failure messages) are the same, and a body is JSON;
 * and its history, grown, rewritten and shrunk through a memo, gives the
 * body built from nothing at each step (pt_fuzz_check_memo).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "anthropic.h"
#include "provider_test.h"

static void line(void *decoder, const char *p, size_t n) {
    const char *tab = memchr(p, '\t', n);
    char event[64] = "";
    if (tab) {
        snprintf(event, sizeof event, "%.*s", (int)(tab - p), p);
        anthropic_decoder_event(decoder, event, tab + 1, n - (size_t)(tab - p) - 1);
    } else {
        anthropic_decoder_event(decoder, event, p, n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bodies are built with prompt caching (the TTL picked by the input's
 * length), so the memo check covers the cache_control breakpoints too. */
static pc_prompt_cache fuzz_cache;

static char *request_text(const json_t *request, pc_cache *cache, char *msg, size_t size) {
    pc_extra extra = {NULL, false, fuzz_cache, 0};
    return anthropic_request_text_ex(request, &extra, 0, cache, msg, size);
}

static int request_build(const json_t *request, pc_cache *cache, pc_memo *memo, char *msg,
                         size_t size) {
    pc_extra extra = {NULL, false, fuzz_cache, 0};
    return anthropic_request_build_ex(request, &extra, 0, cache, memo, msg, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pt_fuzz_seen s = {0, 0, false};
    anthropic_decoder *d = anthropic_decoder_new("fuzz", pt_fuzz_count, &s);
    if (!d || anthropic_decoder_set_model(d, "claude-fuzz") != 0) {
        anthropic_decoder_free(d);
        return 0;
    }
    fuzz_cache = (pc_prompt_cache)(size % 3);
    pt_fuzz_lines((const char *)data, size, line, d);
    pt_fuzz_check_end(anthropic_decoder_end(d, NULL, false), &s);
    anthropic_decoder_free(d);

    json_t *request = json_loadb((const char *)data, size, 0, NULL);
    if (request) {
        pt_fuzz_check_request(request, request_text);
        pt_fuzz_check_memo(request, request_text, request_build);
        json_decref(request);
    }
    return 0;
}
