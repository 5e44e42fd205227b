/*
 * tests/unit/test_openai_continuity.c - provider-openai across a tool loop
 * (issue #32): DeepSeek's reasoning_content and Gemini's thought_signature
 * decoded into continuation chunks and sent back, prompt_cache_key (row
 * config, the session id through ABI 1.8's stream_session), DeepSeek's
 * cache-hit usage, a system message after the first, and a compaction
 * summary request on a reasoning model.
 *
 * The decoder and the request builder are compiled in (tests/cmake/
 * providers.cmake); the plugin runs through the fake host of
 * tests/support/provider_test.c against the loopback mock LLM, with a copy of
 * its table that answers stream_session.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mock_llm.h"
#include "openai.h"
#include "schema.h"
#include "provider_host.h"
#include "provider_test.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Decoding                                                                 */
/* ------------------------------------------------------------------------ */

/* Decode `sse` as row "ds" for `model` (NULL: none), the fast path on or
 * off; the chunks (new reference). */
static json_t *decode_as(const char *sse, const char *model, bool fast) {
    json_t *chunks = json_array();
    openai_decoder *d = openai_decoder_new("ds", pt_collect, chunks);
    assert_non_null(d);
    assert_int_equal(openai_decoder_set_model(d, model), 0);
    openai_decoder_set_fast(d, fast);
    const char *p = sse;
    while (*p) { /* one "data: ...\n\n" event at a time */
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        assert_true(strncmp(p, "data: ", 6) == 0);
        openai_decoder_event(d, p + 6, (size_t)(end - p - 6));
        p = end + 2;
    }
    assert_int_equal(openai_decoder_end(d, NULL, false), 0);
    openai_decoder_free(d);
    return chunks;
}

/* Both ways in give the same chunks; those chunks (new reference). */
static json_t *decode_both(const char *sse, const char *model) {
    json_t *fast = decode_as(sse, model, true), *slow = decode_as(sse, model, false);
    pt_assert_json_equal(fast, slow);
    json_decref(slow);
    return fast;
}

/* Fail unless `chunks` holds exactly `want` (JSON text). */
static void assert_chunks(const json_t *chunks, const char *want_text) {
    json_error_t e;
    json_t *want = json_loads(want_text, 0, &e);
    if (!want)
        fail_msg("bad expected JSON: %s", e.text);
    pt_assert_json_equal(chunks, want);
    json_decref(want);
}

#define CONT(index, model, data)                                                              \
    "{\"type\":\"continuation\",\"index\":" #index ",\"continuation\":{\"provider\":\"ds\","  \
    "\"model\":\"" model "\",\"data\":" data "}}"
/* A reasoning continuation: plain text bound to no prefix ("prefix_bound":
 * false, core/format/continuation.h), so compaction does not drop it. */
#define CONT_R(index, model, data)                                                            \
    "{\"type\":\"continuation\",\"index\":" #index ",\"continuation\":{\"provider\":\"ds\","  \
    "\"model\":\"" model "\",\"data\":" data ",\"prefix_bound\":false}}"

/* DeepSeek thinking mode: the reasoning block gets {"field":"reasoning_content"}
 * after its deltas, before its end, with the row id and the request's model,
 * marked "prefix_bound": false. */
static void reasoning_content_gets_a_continuation(void **state) {
    (void)state;
    json_t *chunks = decode_both(
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null,"
        "\"reasoning_content\":\"Need \"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":null,\"reasoning_content\":\"pow.\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\","
        "\"type\":\"function\",\"function\":{\"name\":\"pow\",\"arguments\":\"{}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n",
        "deepseek-reasoner");
    assert_chunks(chunks,
                  "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"reasoning\"},"
                  "{\"type\":\"reasoning-delta\",\"index\":0,\"text\":\"Need \"},"
                  "{\"type\":\"reasoning-delta\",\"index\":0,\"text\":\"pow.\"}," CONT_R(
                      0, "deepseek-reasoner", "{\"field\":\"reasoning_content\"}") ","
                  "{\"type\":\"block-end\",\"index\":0},"
                  "{\"type\":\"block-start\",\"index\":1,\"block_type\":\"tool_call\"},"
                  "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"call_1\",\"name\":\"pow\","
                  "\"arguments_delta\":\"{}\"},"
                  "{\"type\":\"block-end\",\"index\":1},"
                  "{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"}}]");
    json_decref(chunks);
}

/* A reasoning member that is there but empty still opens the block (it goes
 * back as ""); `reasoning` (OpenRouter, Ollama, vLLM) is named as such; an
 * empty member after other content opens nothing. */
static void empty_reasoning_opens_the_block(void **state) {
    (void)state;
    json_t *chunks = decode_both(
        "data: {\"choices\":[{\"delta\":{\"reasoning\":\"\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"reasoning\":\"\",\"content\":\"Hi\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"reasoning\":\"\",\"content\":\" there\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n",
        "m1");
    assert_chunks(chunks,
                  "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"reasoning\"}," CONT_R(
                      0, "m1", "{\"field\":\"reasoning\"}") ","
                  "{\"type\":\"block-end\",\"index\":0},"
                  "{\"type\":\"block-start\",\"index\":1,\"block_type\":\"text\"},"
                  "{\"type\":\"text-delta\",\"index\":1,\"text\":\"Hi\"},"
                  "{\"type\":\"text-delta\",\"index\":1,\"text\":\" there\"},"
                  "{\"type\":\"block-end\",\"index\":1},"
                  "{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}]");
    json_decref(chunks);
    /* nothing but an empty thought is still an empty answer */
    chunks = decode_both("data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"\"}}]}\n\n"
                         "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                         "data: [DONE]\n\n",
                         "m1");
    json_t *finish = pt_finish_reason(chunks);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(finish, "failure"), "code")),
        "EMPTY_RESPONSE");
    json_decref(chunks);
    /* without a model (a decoder nobody told) no continuation goes out */
    chunks = decode_both("data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"x\"}}]}\n\n"
                         "data: {\"choices\":[{\"delta\":{\"content\":\"y\"},"
                         "\"finish_reason\":\"stop\"}]}\n\n",
                         NULL);
    for (size_t i = 0; i < json_array_size(chunks); i++)
        assert_string_not_equal(
            json_string_value(json_object_get(json_array_get(chunks, i), "type")), "continuation");
    json_decref(chunks);
}

/* Gemini 3 (OpenAI-compatible endpoint): the call's thought signature,
 * in its first delta, becomes the tool_call block's continuation; a
 * parallel call without one gets none; a malformed extra_content is ignored. */
static void thought_signature_gets_a_continuation(void **state) {
    (void)state;
    json_t *chunks = decode_both(
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,"
        "\"id\":\"fc_1\",\"type\":\"function\",\"function\":{\"name\":\"pow\",\"arguments\":"
        "\"{\\\"x\\\":2}\"},\"extra_content\":{\"google\":{\"thought_signature\":\"Q1sig==\"}}},"
        "{\"index\":1,\"id\":\"fc_2\",\"type\":\"function\",\"function\":{\"name\":\"now\","
        "\"arguments\":\"{}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"extra_content\":"
        "{\"google\":7}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n",
        "gemini-3-flash");
    assert_chunks(chunks,
                  "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"tool_call\"},"
                  "{\"type\":\"tool-call-delta\",\"index\":0,\"id\":\"fc_1\",\"name\":\"pow\","
                  "\"arguments_delta\":\"{\\\"x\\\":2}\"},"
                  "{\"type\":\"block-start\",\"index\":1,\"block_type\":\"tool_call\"},"
                  "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"fc_2\",\"name\":\"now\","
                  "\"arguments_delta\":\"{}\"}," CONT(0, "gemini-3-flash",
                                                     "{\"thought_signature\":\"Q1sig==\"}") ","
                  "{\"type\":\"block-end\",\"index\":0},"
                  "{\"type\":\"block-end\",\"index\":1},"
                  "{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"}}]");
    json_decref(chunks);
}

/* DeepSeek reports its cache hits as prompt_cache_hit_tokens: input is the
 * rest of prompt_tokens; cached_tokens wins when both are there. */
static void deepseek_cache_hits_are_cache_reads(void **state) {
    (void)state;
    static const char *const usages[][2] = {
        {"{\"prompt_tokens\":1000,\"completion_tokens\":9,\"prompt_cache_hit_tokens\":800,"
         "\"prompt_cache_miss_tokens\":200,\"completion_tokens_details\":{\"reasoning_tokens\":4}}",
         "{\"input_tokens\":200,\"output_tokens\":9,\"cache_read_tokens\":800,"
         "\"reasoning_tokens\":4}"},
        {"{\"prompt_tokens\":1000,\"completion_tokens\":9,\"prompt_cache_hit_tokens\":800,"
         "\"prompt_tokens_details\":{\"cached_tokens\":768}}",
         "{\"input_tokens\":232,\"output_tokens\":9,\"cache_read_tokens\":768}"},
    };
    for (size_t i = 0; i < sizeof usages / sizeof usages[0]; i++) {
        char sse[1024];
        snprintf(sse, sizeof sse,
                 "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":"
                 "\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n",
                 usages[i][0]);
        json_t *chunks = decode_both(sse, "deepseek-chat");
        json_t *want = json_loads(usages[i][1], 0, NULL);
        pt_assert_json_equal(
            json_object_get(json_array_get(chunks, json_array_size(chunks) - 2), "usage"), want);
        json_decref(want);
        json_decref(chunks);
    }
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                 */
/* ------------------------------------------------------------------------ */

/* The body of a request for `model` with `messages` (JSON text); *skipped
 * (may be NULL) the blocks left without their continuation. */
static json_t *body_of(const char *model, const char *messages, size_t *skipped) {
    char text[4096];
    snprintf(text, sizeof text, "{\"model\":\"%s\",\"max_tokens\":100,\"messages\":%s}", model,
             messages);
    json_error_t e;
    json_t *request = json_loads(text, 0, &e);
    if (!request)
        fail_msg("bad request JSON: %s", e.text);
    pc_memo *memo = calloc(1, sizeof *memo);
    pc_extra extra = {0};
    char msg[256];
    int rc = openai_request_build_ex(request, &extra, NULL, memo, msg, sizeof msg);
    if (rc != 0)
        fail_msg("build: %s", msg);
    json_t *body = json_loads(memo->text.p, 0, NULL);
    assert_non_null(body);
    if (skipped)
        *skipped = extra.skipped_continuations;
    pc_memo_free(memo);
    json_decref(request);
    return body;
}

#define USER "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"2^10?\"}]}"
#define RESULT                                                                                 \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"call_id\":\"call_1\","       \
    "\"content\":[{\"type\":\"text\",\"text\":\"1024\"}]}]}"
#define DS_CONT(field)                                                                         \
    "\"continuation\":{\"provider\":\"ds\",\"model\":\"deepseek-reasoner\",\"data\":{\"field\":" \
    "\"" field "\"}}"
#define CALL(extra)                                                                            \
    "{\"type\":\"tool_call\",\"id\":\"call_1\",\"name\":\"pow\",\"arguments\":\"{}\"" extra "}"

/* messages[i] of a body (borrowed). */
static json_t *message_at(json_t *body, size_t i) {
    return json_array_get(json_object_get(body, "messages"), i);
}

/* reasoning blocks with a continuation go back as reasoning_content, their
 * texts concatenated, on the tool-call turn DeepSeek checks; an empty one
 * as ""; one without a continuation not at all. */
static void reasoning_content_goes_back(void **state) {
    (void)state;
    size_t skipped;
    json_t *body = body_of(
        "deepseek-reasoner",
        "[" USER ",{\"role\":\"assistant\",\"content\":["
        "{\"type\":\"reasoning\",\"text\":\"Need \"," DS_CONT("reasoning_content") "},"
        "{\"type\":\"reasoning\",\"text\":\"pow.\"," DS_CONT("reasoning_content") "},"
        "{\"type\":\"reasoning\",\"text\":\"unsigned\"}," CALL("") "]}," RESULT "]",
        &skipped);
    json_t *asst = message_at(body, 1);
    assert_string_equal(json_string_value(json_object_get(asst, "reasoning_content")),
                        "Need pow.");
    assert_true(json_is_null(json_object_get(asst, "content")));
    assert_int_equal(json_array_size(json_object_get(asst, "tool_calls")), 1);
    assert_int_equal(skipped, 0);
    json_decref(body);

    /* an empty thought still goes back: the member is what DeepSeek checks */
    body = body_of("deepseek-reasoner",
                   "[" USER ",{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\","
                   "\"text\":\"\"," DS_CONT("reasoning_content") "}," CALL("") "]}," RESULT "]",
                   &skipped);
    assert_string_equal(
        json_string_value(json_object_get(message_at(body, 1), "reasoning_content")), "");
    json_decref(body);

    /* `reasoning` goes back as what it came as; no continuation, no member */
    body = body_of("m1",
                   "[" USER ",{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\","
                   "\"text\":\"r\"," DS_CONT("reasoning") "},{\"type\":\"text\",\"text\":\"a\"}]},"
                   "{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\",\"text\":\"r\"},"
                   "{\"type\":\"text\",\"text\":\"b\"}]}]",
                   &skipped);
    assert_string_equal(json_string_value(json_object_get(message_at(body, 1), "reasoning")), "r");
    assert_null(json_object_get(message_at(body, 1), "reasoning_content"));
    assert_null(json_object_get(message_at(body, 2), "reasoning"));
    assert_null(json_object_get(message_at(body, 2), "reasoning_content"));
    json_decref(body);

    /* data without the member we need: the block is skipped and counted */
    body = body_of("deepseek-reasoner",
                   "[" USER ",{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\","
                   "\"text\":\"x\",\"continuation\":{\"provider\":\"ds\",\"model\":\"m\","
                   "\"data\":{\"signature\":\"s\"}}}," CALL("") "]}," RESULT "]",
                   &skipped);
    assert_null(json_object_get(message_at(body, 1), "reasoning_content"));
    assert_int_equal(skipped, 1);
    json_decref(body);
}

/* The thought signature goes back on its call as extra_content, byte for
 * byte; a call whose data lacks it goes back without (counted). */
static void thought_signature_goes_back(void **state) {
    (void)state;
    size_t skipped;
    json_t *body = body_of(
        "gemini-3-flash",
        "[" USER ",{\"role\":\"assistant\",\"content\":[" CALL(
            ",\"continuation\":{\"provider\":\"g\",\"model\":\"gemini-3-flash\",\"data\":"
            "{\"thought_signature\":\"Q1/sig+==\"}}") "]}," RESULT "]",
        &skipped);
    json_t *call = json_array_get(json_object_get(message_at(body, 1), "tool_calls"), 0);
    json_t *want = json_loads("{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
                              "\"pow\",\"arguments\":\"{}\"},\"extra_content\":{\"google\":"
                              "{\"thought_signature\":\"Q1/sig+==\"}}}",
                              0, NULL);
    pt_assert_json_equal(call, want);
    json_decref(want);
    assert_int_equal(skipped, 0);
    json_decref(body);
    body = body_of("gemini-3-flash",
                   "[" USER ",{\"role\":\"assistant\",\"content\":[" CALL(
                       ",\"continuation\":{\"provider\":\"g\",\"model\":\"x\",\"data\":"
                       "{\"field\":\"reasoning\"}}") "]}," RESULT "]",
                   &skipped);
    call = json_array_get(json_object_get(message_at(body, 1), "tool_calls"), 0);
    assert_string_equal(json_string_value(json_object_get(call, "id")), "call_1");
    assert_int_equal(skipped, 1);
    /* a Gemini model: the unsigned first call gets the validator sentinel */
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(call, "extra_content"), "google"),
                            "thought_signature")),
                        "skip_thought_signature_validator");
    json_decref(body);
}

/* The thought_signature of call `k` of messages[i] of `body` (borrowed), or
 * NULL. */
static const char *sig_of(json_t *body, size_t i, size_t k) {
    json_t *call = json_array_get(json_object_get(message_at(body, i), "tool_calls"), k);
    assert_non_null(call);
    return json_string_value(json_object_get(
        json_object_get(json_object_get(call, "extra_content"), "google"), "thought_signature"));
}

#define CALL2(id, extra)                                                                       \
    "{\"type\":\"tool_call\",\"id\":\"" id "\",\"name\":\"pow\",\"arguments\":\"{}\"" extra "}"
#define G_SIG(sig)                                                                             \
    ",\"continuation\":{\"provider\":\"g\",\"model\":\"gemini-3-flash\",\"data\":"             \
    "{\"thought_signature\":\"" sig "\"}}"

/* Gemini 3 and later answer 400 for a current-turn function call whose first
 * call has no signature (lost to compaction or a route change); its docs name
 * "skip_thought_signature_validator" for calls whose signature is not
 * available (ai.google.dev/gemini-api/docs/thought-signatures).  The first
 * unsigned call of each assistant message gets it; a parallel call after it
 * gets nothing (Gemini signs only the first); a real signature is sent as
 * is; other model families get nothing. */
static void unsigned_gemini_call_gets_the_sentinel(void **state) {
    (void)state;
    static const char *const gemini[] = {"gemini-3-flash", "gemini-3-pro-preview",
                                         "google/gemini-3-flash", "Gemini-3.5-Flash",
                                         "gemini-4-pro", "gemini-10-x"};
    for (size_t g = 0; g < sizeof gemini / sizeof *gemini; g++) {
        json_t *body = body_of(gemini[g],
                               "[" USER ",{\"role\":\"assistant\",\"content\":[" CALL2(
                                   "a", "") "]}," RESULT ",{\"role\":\"assistant\",\"content\":"
                                                      "[" CALL2("b", "") "," CALL2("c", "") "]},"
                                                      RESULT ",{\"role\":\"assistant\","
                                                      "\"content\":[" CALL2("d", G_SIG("Q1==")) ","
                                                      CALL2("e", "") "]}," RESULT "]",
                               NULL);
        if (!sig_of(body, 1, 0))
            fail_msg("%s: no sentinel on the first call", gemini[g]);
        assert_string_equal(sig_of(body, 1, 0), "skip_thought_signature_validator");
        assert_string_equal(sig_of(body, 3, 0), "skip_thought_signature_validator");
        assert_null(sig_of(body, 3, 1));
        assert_string_equal(sig_of(body, 5, 0), "Q1==");
        assert_null(sig_of(body, 5, 1));
        json_decref(body);
    }
    /* one memo and cache across a route change: each body is the model's own */
    pc_memo *memo = calloc(1, sizeof *memo);
    pc_cache *cache = pc_cache_new(64, 1 << 20);
    json_t *msgs = json_loads("[" USER ",{\"role\":\"assistant\",\"content\":[" CALL2("a", "") "]},"
                              RESULT "]", 0, NULL);
    assert_non_null(memo);
    assert_non_null(cache);
    assert_non_null(msgs);
    static const char *const route[] = {"gpt-5.1", "gemini-3-flash", "gemini-3-flash", "gpt-5.1"};
    for (size_t r = 0; r < sizeof route / sizeof *route; r++) {
        json_t *request = json_pack("{s:s,s:i,s:O}", "model", route[r], "max_tokens", 100,
                                    "messages", msgs);
        char msg[256];
        if (openai_request_build(request, cache, memo, msg, sizeof msg) != 0)
            fail_msg("build: %s", msg);
        json_t *body = json_loads(memo->text.p, 0, NULL);
        assert_non_null(body);
        bool want = strncmp(route[r], "gemini", 6) == 0;
        if ((sig_of(body, 1, 0) != NULL) != want)
            fail_msg("step %zu (%s): sentinel %s", r, route[r], want ? "missing" : "sent");
        json_decref(body);
        json_decref(request);
    }
    json_decref(msgs);
    pc_memo_free(memo);
    pc_cache_free(cache);
    static const char *const others[] = {"gemini-2.5-flash", "gemini-1.5-pro", "deepseek-reasoner",
                                         "gpt-5.1", "my-gemini-3", "gemini-", "gemini-pro"};
    for (size_t o = 0; o < sizeof others / sizeof *others; o++) {
        json_t *body = body_of(others[o],
                               "[" USER ",{\"role\":\"assistant\",\"content\":[" CALL2(
                                   "a", "") "]}," RESULT "]",
                               NULL);
        if (sig_of(body, 1, 0))
            fail_msg("%s: got a sentinel", others[o]);
        json_decref(body);
    }
}

/* Fold continuation chunks the way the core does (the block's
 * "continuation" member, the last one wins) into pt_assemble's message. */
static json_t *assemble_with_continuations(const json_t *chunks) {
    json_t *usage, *message = pt_assemble(chunks, &usage);
    json_decref(usage);
    json_t *content = json_object_get(message, "content");
    for (size_t i = 0; i < json_array_size(chunks); i++) {
        json_t *c = json_array_get(chunks, i);
        if (strcmp(json_string_value(json_object_get(c, "type")), "continuation") != 0)
            continue;
        json_t *b = json_array_get(content, (size_t)json_integer_value(json_object_get(c, "index")));
        assert_non_null(b);
        json_object_set(b, "continuation", json_object_get(c, "continuation"));
    }
    return message;
}

/* What a stream gave comes back on the next request exactly. */
static void decode_then_encode_round_trips(void **state) {
    (void)state;
    json_t *chunks = decode_both(
        "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"th\\u00e9 \\\"plan\\\"\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\","
        "\"function\":{\"name\":\"pow\",\"arguments\":\"{}\"},\"extra_content\":{\"google\":"
        "{\"thought_signature\":\"c2ln/+==\"}}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "deepseek-reasoner");
    json_t *asst = assemble_with_continuations(chunks);
    json_t *request = json_pack("{s:s,s:i,s:[o,O]}", "model", "deepseek-reasoner", "max_tokens",
                                100, "messages", json_loads(USER, 0, NULL), asst);
    assert_non_null(request);
    char msg[256];
    json_t *body = openai_request_body(request, msg, sizeof msg);
    assert_non_null(body);
    json_t *sent = message_at(body, 1);
    assert_string_equal(json_string_value(json_object_get(sent, "reasoning_content")),
                        "th\xc3\xa9 \"plan\"");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(
                                json_array_get(json_object_get(sent, "tool_calls"), 0),
                                "extra_content"),
                            "google"),
            "thought_signature")),
        "c2ln/+==");
    json_decref(body);
    json_decref(request);
    json_decref(asst);
    json_decref(chunks);
}

/* Contract section 6: a system message after the first stays a system
 * message, in its place. */
static void later_system_message_stays_in_place(void **state) {
    (void)state;
    json_t *body = body_of(
        "gpt-5.1",
        "[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Be brief.\"}]}," USER ","
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"1024\"}]},"
        "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Be verbose.\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"why?\"}]}]",
        NULL);
    json_t *want = json_loads(
        "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
        "\"2^10?\"},{\"role\":\"assistant\",\"content\":\"1024\"},{\"role\":\"system\","
        "\"content\":\"Be verbose.\"},{\"role\":\"user\",\"content\":\"why?\"}]",
        0, NULL);
    pt_assert_json_equal(json_object_get(body, "messages"), want);
    json_decref(want);
    json_decref(body);
}

/* compaction-basic's summary request (the agent's last request plus the
 * summary instruction, its own max_tokens: plugins/compaction-basic,
 * summary_request) on a reasoning model gets max_completion_tokens, never
 * max_tokens, and no temperature. */
static void summary_request_on_a_reasoning_model(void **state) {
    (void)state;
    static const char *const models[] = {"gpt-5.1", "o3"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{\"provider\":\"openai\",\"model\":\"%s\",\"max_tokens\":4096,"
                 "\"temperature\":0.2,\"options\":{\"reasoning_effort\":\"low\"},"
                 "\"tools\":[{\"name\":\"pow\",\"parameters\":{\"type\":\"object\"}}],"
                 "\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":[" CALL("") "]},"
                 RESULT ",{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                 "\"Summarize the conversation so far.\"}]}]}",
                 models[i]);
        json_t *request = json_loads(text, 0, NULL);
        assert_non_null(request);
        pc_memo *memo = calloc(1, sizeof *memo);
        pc_extra extra = {0};
        char msg[256];
        assert_int_equal(openai_request_build_ex(request, &extra, NULL, memo, msg, sizeof msg),
                         0);
        json_t *body = json_loads(memo->text.p, 0, NULL);
        if (json_object_get(body, "max_tokens") ||
            json_integer_value(json_object_get(body, "max_completion_tokens")) != 4096 ||
            json_object_get(body, "temperature"))
            fail_msg("%s: %s", models[i], memo->text.p);
        assert_true(extra.dropped_temperature);
        json_decref(body);
        pc_memo_free(memo);
        json_decref(request);
    }
}

/* ------------------------------------------------------------------------ */
/* prompt_cache_key through the plugin                                      */
/* ------------------------------------------------------------------------ */

static const char *fake_session; /* what stream_session answers */

static const char *fake_stream_session(weir_stream *stream) {
    (void)stream;
    return fake_session;
}

/* The fake host's table, with stream_session when `session` is set (the
 * plugin keeps the table's address: static). */
static weir_api api_with_session;

/* Run one request on a row configured by `config_tmpl` ("@BASE@": the mock)
 * whose session is `session` (NULL: a host without stream_session); the
 * body the mock got (new reference). */
static json_t *sent_body(const char *config_tmpl, const char *session, const char *options) {
    pt_plugin_setup(NULL);
    api_with_session = pt_fake_api;
    api_with_session.stream_session = session ? fake_stream_session : NULL;
    fake_session = session;
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start("{\"requests\":[{\"text\":\"ok\"}]}", &m), 0);
    char *base = mock_llm_base_url(m);
    char config_text[1024];
    const char *at = strstr(config_tmpl, "@BASE@");
    assert_non_null(at);
    snprintf(config_text, sizeof config_text, "%.*s%s%s", (int)(at - config_tmpl), config_tmpl,
             base, at + 6);
    json_t *config = json_loads(config_text, 0, NULL);
    assert_non_null(config);
    weir_error err;
    memset(&err, 0, sizeof err);
    if (pt_plugin_desc->init(NULL, &api_with_session, config, &err) != WEIR_OK)
        fail_msg("init: %s", err.text);
    char request_text[512];
    snprintf(request_text, sizeof request_text,
             "{\"model\":\"gpt-4o\",\"max_tokens\":50%s%s,\"messages\":" "[" USER "]}",
             options ? ",\"options\":" : "", options ? options : "");
    json_t *request = json_loads(request_text, 0, NULL);
    assert_non_null(request);
    void *call = NULL;
    assert_int_equal(pt_host.provider->prepare_call(pt_host.provider_self, request,
                                                    &pt_host.signal, &call, &err),
                     WEIR_OK);
    assert_int_equal(
        pt_host.provider->stream(pt_host.provider_self, call, request, (weir_stream *)&pt_host),
        WEIR_OK);
    char *body_text = mock_llm_request_body(m, 0);
    json_t *body = json_loads(body_text, 0, NULL);
    assert_non_null(body);
    free(body_text);
    json_decref(request);
    json_decref(config);
    free(base);
    mock_llm_stop(m);
    pt_plugin_teardown(NULL);
    return body;
}

/* The key a body carries (borrowed from it), or NULL. */
static const char *key_of(json_t *body) {
    return json_string_value(json_object_get(body, "prompt_cache_key"));
}

#define ROW(extra) "{\"base_url\":\"@BASE@/v1\",\"api_key\":\"" PT_KEY "\"" extra "}"

static void prompt_cache_key_follows_the_row(void **state) {
    (void)state;
    /* a compatible server (not api.openai.com) gets none unless asked */
    json_t *body = sent_body(ROW(""), "sess-1", NULL);
    assert_null(json_object_get(body, "prompt_cache_key"));
    json_decref(body);
    /* true: the session id, from stream_session (ABI 1.8) */
    body = sent_body(ROW(",\"prompt_cache_key\":true"), "sess-1", NULL);
    assert_string_equal(key_of(body), "sess-1");
    json_decref(body);
    /* a host without stream_session: the row id */
    body = sent_body(ROW(",\"prompt_cache_key\":true"), NULL, NULL);
    assert_string_equal(key_of(body), "llm");
    json_decref(body);
    /* a string: that key, for every session */
    body = sent_body(ROW(",\"prompt_cache_key\":\"team-a\""), "sess-1", NULL);
    assert_string_equal(key_of(body), "team-a");
    json_decref(body);
    body = sent_body(ROW(",\"prompt_cache_key\":false"), "sess-1", NULL);
    assert_null(json_object_get(body, "prompt_cache_key"));
    json_decref(body);
    /* an option beats the row: a value, or null for none */
    body = sent_body(ROW(",\"prompt_cache_key\":true"), "sess-1", "{\"prompt_cache_key\":\"o\"}");
    assert_string_equal(key_of(body), "o");
    json_decref(body);
    body = sent_body(ROW(",\"prompt_cache_key\":true"), "sess-1", "{\"prompt_cache_key\":null}");
    assert_null(json_object_get(body, "prompt_cache_key"));
    json_decref(body);
}

/* The default is on for api.openai.com only (Gemini's compatible endpoint
 * refuses members it does not know). */
static void prompt_cache_key_default_is_for_openai_only(void **state) {
    (void)state;
    assert_true(openai_cache_key_default("https://api.openai.com/v1"));
    assert_true(openai_cache_key_default("https://API.openai.com:443/v1"));
    assert_true(openai_cache_key_default("https://api.openai.com"));
    assert_false(openai_cache_key_default("https://api.openai.com.evil.example/v1"));
    assert_false(openai_cache_key_default("https://api.deepseek.com"));
    assert_false(openai_cache_key_default("https://generativelanguage.googleapis.com/v1beta/openai"));
    assert_false(openai_cache_key_default("http://127.0.0.1:8000/v1"));
}

/* Load refuses a prompt_cache_key that is neither a non-empty string nor a
 * boolean, naming the field; the schema says the same. */
static void prompt_cache_key_is_checked_at_load(void **state) {
    (void)state;
    static const char *const bad[] = {"{\"prompt_cache_key\":1}", "{\"prompt_cache_key\":\"\"}",
                                      "{\"prompt_cache_key\":null}",
                                      "{\"prompt_cache_key\":{}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_plugin_setup(NULL);
        json_t *config = json_loads(bad[i], 0, NULL);
        weir_error err;
        memset(&err, 0, sizeof err);
        assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, config, &err),
                         WEIR_E_PLUGIN_CONFIG);
        if (!strstr(err.text, "config.prompt_cache_key: expected a non-empty string, true or "
                              "false"))
            fail_msg("%s: %s", bad[i], err.text);
        json_decref(config);
        pt_plugin_teardown(NULL);
    }
    json_t *schema = json_loads(pt_plugin_desc->config_schema, 0, NULL);
    assert_non_null(schema);
    static const char *const good[] = {"{\"prompt_cache_key\":\"k\"}",
                                       "{\"prompt_cache_key\":true}",
                                       "{\"prompt_cache_key\":false}"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        json_t *config = json_loads(good[i], 0, NULL);
        char msg[256];
        if (weir__schema_validate(schema, config, msg, sizeof msg) != 0)
            fail_msg("%s: %s", good[i], msg);
        json_decref(config);
    }
    json_t *config = json_loads("{\"prompt_cache_key\":1}", 0, NULL);
    char msg[256];
    assert_int_not_equal(weir__schema_validate(schema, config, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "prompt_cache_key"));
    json_decref(config);
    json_decref(schema);
}

/* Two steps of a tool loop through the plugin against the mock, which
 * answers 400 as DeepSeek and Gemini do when the reasoning_content or the
 * thought signature of the tool-call turn does not come back: the first
 * step's continuations carry the row id and the request's model, and the
 * second step passes. */
static void plugin_tool_loop_passes_back_the_continuation(void **state) {
    (void)state;
    static const char *const models[] = {"deepseek-reasoner", "gemini-3-flash"};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        pt_plugin_setup(NULL);
        char request[1024];
        snprintf(request, sizeof request,
                 "{\"model\":\"%s\",\"max_tokens\":50,\"tools\":[{\"name\":\"pow\","
                 "\"parameters\":{\"type\":\"object\"}}],\"messages\":[" USER "]}",
                 models[k]);
        int rc;
        mock_llm *m = pt_run_plugin(
            "{\"requests\":[{\"tool_calls\":[{\"id\":\"call_1\",\"name\":\"pow\","
            "\"arguments\":\"{}\"}]},{\"text\":\"1024\"}]}",
            ROW(""), request, &rc);
        assert_int_equal(rc, WEIR_OK);
        size_t seen = 0;
        for (size_t i = 0; i < json_array_size(pt_host.chunks); i++) {
            json_t *c = json_array_get(pt_host.chunks, i);
            if (strcmp(json_string_value(json_object_get(c, "type")), "continuation") != 0)
                continue;
            json_t *cont = json_object_get(c, "continuation");
            assert_string_equal(json_string_value(json_object_get(cont, "provider")), "llm");
            assert_string_equal(json_string_value(json_object_get(cont, "model")), models[k]);
            seen++;
        }
        if (seen != 1)
            fail_msg("%s: %zu continuations in %s", models[k], seen,
                     json_dumps(pt_host.chunks, JSON_COMPACT));
        json_t *asst = assemble_with_continuations(pt_host.chunks);
        json_t *next = json_loads(request, 0, NULL);
        json_t *messages = json_object_get(next, "messages");
        json_array_append_new(messages, asst);
        json_array_append_new(messages, json_loads(RESULT, 0, NULL));
        json_array_clear(pt_host.chunks);
        assert_int_equal(pt_host.provider->stream(pt_host.provider_self, NULL, next,
                                                  (weir_stream *)&pt_host),
                         WEIR_OK);
        const char *kind =
            json_string_value(json_object_get(pt_finish_reason(pt_host.chunks), "kind"));
        if (!kind || strcmp(kind, "stop") != 0)
            fail_msg("%s: step 2 ended %s", models[k],
                     json_dumps(pt_finish_reason(pt_host.chunks), JSON_COMPACT));
        json_decref(next);
        mock_llm_stop(m);
        pt_plugin_teardown(NULL);
    }
}

int main(void) {
    pt_plugin_file = "weir-provider-openai.so";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reasoning_content_gets_a_continuation),
        cmocka_unit_test(empty_reasoning_opens_the_block),
        cmocka_unit_test(thought_signature_gets_a_continuation),
        cmocka_unit_test(deepseek_cache_hits_are_cache_reads),
        cmocka_unit_test(reasoning_content_goes_back),
        cmocka_unit_test(thought_signature_goes_back),
        cmocka_unit_test(unsigned_gemini_call_gets_the_sentinel),
        cmocka_unit_test(decode_then_encode_round_trips),
        cmocka_unit_test(later_system_message_stays_in_place),
        cmocka_unit_test(summary_request_on_a_reasoning_model),
        cmocka_unit_test(prompt_cache_key_follows_the_row),
        cmocka_unit_test(prompt_cache_key_default_is_for_openai_only),
        cmocka_unit_test(prompt_cache_key_is_checked_at_load),
        cmocka_unit_test(plugin_tool_loop_passes_back_the_continuation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
