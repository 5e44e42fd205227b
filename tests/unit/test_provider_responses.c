/*
 * tests/unit/test_provider_responses.c - provider-openai on OpenAI's
 * Responses API (issue #35): the streaming event set decoded into weir
 * chunks (reasoning items through the continuation slot, taken from
 * response.output_item.done), unknown events ignored, malformed ones
 * TRANSPORT, the failure and incomplete mapping, usage with cached and
 * reasoning tokens; the request body (input items, reasoning items sent back
 * verbatim before their function calls, store:false, include,
 * max_output_tokens); the row's `api` and its default; and the plugin
 * against the loopback mock's /v1/responses.
 *
 * The decoder and the request builder are compiled in (tests/cmake/
 * providers.cmake); the plugin runs through the fake host of
 * tests/support/provider_test.c.
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
#include "provider_host.h"
#include "provider_test.h"
#include "schema.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static void *decoder_new(int (*emit)(void *, json_t *), void *user_data) {
    return responses_decoder_new("llm", "gpt-5.1", emit, user_data);
}
static int decoder_event(void *d, const char *event, const char *data, size_t len) {
    (void)event; /* each event's data names its type */
    return responses_decoder_event(d, data, len);
}
static int decoder_end(void *d, json_t *failure, bool aborted) {
    return responses_decoder_end(d, failure, aborted);
}
static void decoder_free(void *d) { responses_decoder_free(d); }

static json_t *request_body(const json_t *request, char *msg, size_t size) {
    return pc_body_from_text(openai_responses_text(request, NULL, msg, size), msg, size);
}

static const pt_provider_ops ops = {decoder_new,  decoder_event, decoder_end,
                                    decoder_free, request_body,  "responses"};

/* Decode SSE text made of "data: <json>\n\n" events; the chunks. */
static json_t *decode(const char *sse) { return pt_decode_text(&ops, sse); }

/* One event's SSE text. */
#define EV(json) "data: " json "\n\n"
#define COMPLETED                                                                              \
    EV("{\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":"    \
       "{\"input_tokens\":10,\"output_tokens\":5}}}")
#define TEXT_ITEM(oi, text)                                                                    \
    EV("{\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":" #oi      \
       ",\"content_index\":0,\"delta\":\"" text "\"}")

/* Fail unless `chunks` holds exactly `want` (JSON text). */
static void assert_chunks(const json_t *chunks, const char *want_text) {
    json_error_t e;
    json_t *want = json_loads(want_text, 0, &e);
    if (!want)
        fail_msg("bad expected JSON: %s", e.text);
    pt_assert_json_equal(chunks, want);
    json_decref(want);
}

/* The first chunk of `type` (borrowed), or NULL. */
static json_t *chunk_of(const json_t *chunks, const char *type) {
    for (size_t i = 0; i < json_array_size(chunks); i++) {
        json_t *c = json_array_get(chunks, i);
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return c;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The stream                                                               */
/* ------------------------------------------------------------------------ */

/* Reasoning (two summary parts), text and two interleaved function calls,
 * then usage: the golden chunks. */
static void stream_matches_golden(void **state) {
    (void)state;
    pt_check_stream(&ops, "responses/tool_calls.sse", "responses/tool_calls.chunks.json");
}

/* The reasoning item goes into the continuation as output_item.done gave
 * it (with encrypted_content), not as .added did (without). */
static void continuation_is_the_done_item(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "responses/tool_calls.sse");
    json_t *c = chunk_of(chunks, "continuation");
    assert_non_null(c);
    assert_int_equal(json_integer_value(json_object_get(c, "index")), 0);
    json_t *cont = json_object_get(c, "continuation");
    assert_string_equal(json_string_value(json_object_get(cont, "provider")), "llm");
    assert_string_equal(json_string_value(json_object_get(cont, "model")), "gpt-5.1");
    /* self-contained: kept after a surface replace (a compaction) */
    assert_true(json_is_false(json_object_get(cont, "prefix_bound")));
    json_t *item = json_loads(
        json_string_value(json_object_get(json_object_get(cont, "data"), "item")), 0, NULL);
    assert_non_null(item);
    assert_string_equal(json_string_value(json_object_get(item, "encrypted_content")),
                        "gAAAAB-secret");
    assert_int_equal(json_array_size(json_object_get(item, "summary")), 2);
    json_decref(item);
    json_decref(chunks);
}

static void text_and_refusal_are_text(void **state) {
    (void)state;
    json_t *chunks = decode(
        EV("{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":"
           "\"message\",\"id\":\"m\",\"role\":\"assistant\",\"content\":[]}}")
        TEXT_ITEM(0, "Hel") TEXT_ITEM(0, "lo")
        EV("{\"type\":\"response.refusal.delta\",\"output_index\":1,\"item_id\":\"r\","
           "\"delta\":\"No.\"}")
        EV("{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":"
           "\"message\",\"id\":\"m\"}}")
        EV("{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":"
           "\"message\",\"id\":\"r\"}}") COMPLETED);
    assert_chunks(chunks,
                  "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"text\"},"
                  "{\"type\":\"text-delta\",\"index\":0,\"text\":\"Hel\"},"
                  "{\"type\":\"text-delta\",\"index\":0,\"text\":\"lo\"},"
                  "{\"type\":\"block-start\",\"index\":1,\"block_type\":\"text\"},"
                  "{\"type\":\"text-delta\",\"index\":1,\"text\":\"No.\"},"
                  "{\"type\":\"block-end\",\"index\":0},{\"type\":\"block-end\",\"index\":1},"
                  "{\"type\":\"usage\",\"usage\":{\"input_tokens\":10,\"output_tokens\":5}},"
                  "{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}]");
    json_decref(chunks);
}

/* A server that sends only the *.done events (or the whole item) is read
 * too: output_text.done's text, function_call_arguments.done's and
 * output_item.done's arguments when no delta brought them. */
static void done_events_carry_the_whole(void **state) {
    (void)state;
    json_t *chunks = decode(
        EV("{\"type\":\"response.output_text.done\",\"output_index\":0,\"item_id\":\"m\","
           "\"text\":\"All.\"}")
        EV("{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":"
           "\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}")
        EV("{\"type\":\"response.function_call_arguments.done\",\"output_index\":1,"
           "\"arguments\":\"{\\\"a\\\":1}\"}") COMPLETED);
    assert_chunks(chunks,
                  "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"text\"},"
                  "{\"type\":\"text-delta\",\"index\":0,\"text\":\"All.\"},"
                  "{\"type\":\"block-start\",\"index\":1,\"block_type\":\"tool_call\"},"
                  "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"c1\",\"name\":\"f\","
                  "\"arguments_delta\":\"{\\\"a\\\":1}\"},"
                  "{\"type\":\"block-end\",\"index\":1},{\"type\":\"block-end\",\"index\":0},"
                  "{\"type\":\"usage\",\"usage\":{\"input_tokens\":10,\"output_tokens\":5}},"
                  "{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"}}]");
    json_decref(chunks);
}

/* Raw reasoning text (gpt-oss on vLLM and Ollama) is reasoning; a reasoning
 * item without encrypted_content gets no continuation (nothing could go
 * back), one with neither text nor encrypted_content no block. */
static void reasoning_text_without_encrypted_content(void **state) {
    (void)state;
    json_t *chunks = decode(
        EV("{\"type\":\"response.reasoning_text.delta\",\"output_index\":0,\"item_id\":\"rs\","
           "\"content_index\":0,\"delta\":\"think\"}")
        EV("{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":"
           "\"reasoning\",\"id\":\"rs\",\"summary\":[],\"content\":[{\"type\":"
           "\"reasoning_text\",\"text\":\"think\"}]}}")
        EV("{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":"
           "\"reasoning\",\"id\":\"rs2\",\"summary\":[],\"encrypted_content\":null}}")
        TEXT_ITEM(2, "ok") COMPLETED);
    assert_null(chunk_of(chunks, "continuation"));
    json_t *usage, *msg = pt_assemble(chunks, &usage);
    assert_chunks(json_object_get(msg, "content"),
                  "[{\"type\":\"reasoning\",\"text\":\"think\"},{\"type\":\"text\","
                  "\"text\":\"ok\"}]");
    json_decref(usage);
    json_decref(msg);
    json_decref(chunks);
}

/* An encrypted reasoning item with an empty summary still opens a block: it
 * must go back. */
static void empty_summary_still_goes_back(void **state) {
    (void)state;
    json_t *chunks = decode(
        EV("{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":"
           "\"reasoning\",\"id\":\"rs\",\"summary\":[],\"encrypted_content\":\"e1\"}}")
        EV("{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":{\"type\":"
           "\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"}}")
        COMPLETED);
    assert_chunks(chunks,
                  "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"reasoning\"},"
                  "{\"type\":\"continuation\",\"index\":0,\"continuation\":{\"provider\":\"llm\","
                  "\"model\":\"gpt-5.1\",\"data\":{\"item\":\"{\\\"type\\\":\\\"reasoning\\\","
                  "\\\"id\\\":\\\"rs\\\",\\\"summary\\\":[],\\\"encrypted_content\\\":"
                  "\\\"e1\\\"}\"},\"prefix_bound\":false}},"
                  "{\"type\":\"block-end\",\"index\":0},"
                  "{\"type\":\"block-start\",\"index\":1,\"block_type\":\"tool_call\"},"
                  "{\"type\":\"tool-call-delta\",\"index\":1,\"id\":\"c1\",\"name\":\"f\","
                  "\"arguments_delta\":\"{}\"},"
                  "{\"type\":\"block-end\",\"index\":1},"
                  "{\"type\":\"usage\",\"usage\":{\"input_tokens\":10,\"output_tokens\":5}},"
                  "{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"}}]");
    json_decref(chunks);
}

static void unknown_events_are_ignored(void **state) {
    (void)state;
    json_t *chunks = decode(
        EV("{\"type\":\"response.queued\",\"response\":{}}")
        EV("{\"type\":\"response.web_search_call.searching\",\"output_index\":0}")
        EV("{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":"
           "\"web_search_call\",\"id\":\"ws\"}}")
        EV("{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":"
           "\"web_search_call\",\"id\":\"ws\"}}")
        EV("{\"type\":\"response.content_part.added\",\"output_index\":1,\"part\":{}}")
        EV("{\"type\":\"response.reasoning_summary_part.done\",\"output_index\":1}")
        EV("{\"type\":\"response.future_event\",\"anything\":[1,2]}")
        EV("{\"type\":\"keepalive\"}") TEXT_ITEM(1, "hi") COMPLETED);
    assert_chunks(chunks,
                  "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"text\"},"
                  "{\"type\":\"text-delta\",\"index\":0,\"text\":\"hi\"},"
                  "{\"type\":\"block-end\",\"index\":0},"
                  "{\"type\":\"usage\",\"usage\":{\"input_tokens\":10,\"output_tokens\":5}},"
                  "{\"type\":\"finish\",\"reason\":{\"kind\":\"stop\"}}]");
    json_decref(chunks);
}

/* Events of a known type with a member of the wrong type are TRANSPORT
 * failures quoting the event; so is data that is not JSON. */
static void malformed_events_are_transport(void **state) {
    (void)state;
    static const struct {
        const char *event, *why;
    } cases[] = {
        {"{\"output_index\":0}", "type is not a string"},
        {"[1]", "not a JSON object"},
        {"{\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":7}",
         "text is not a string"},
        {"{\"type\":\"response.output_text.delta\",\"output_index\":\"0\",\"delta\":\"x\"}",
         "output_index is not a non-negative integer"},
        {"{\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,"
         "\"delta\":null}",
         "delta is not a string"},
        {"{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":\"x\"}",
         "item is not an object"},
        {"{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":"
         "\"function_call\",\"name\":\"f\"}}",
         "item.call_id is not a string"},
        {"{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":"
         "\"reasoning\",\"encrypted_content\":5}}",
         "item.encrypted_content is not a string"},
        {"{\"type\":\"response.completed\",\"response\":[]}", "response is not an object"},
        {"{\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":\"1\"}}}",
         "usage token counts are not integers"},
        {"{\"type\":\"response.reasoning_summary_text.delta\",\"output_index\":0,"
         "\"summary_index\":-1,\"delta\":\"x\"}",
         "summary_index is not a non-negative integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sse[512], want[512];
        snprintf(sse, sizeof sse, "data: %s\n\n", cases[i].event);
        json_t *chunks = decode(sse);
        snprintf(want, sizeof want, "malformed stream event (%s): %s", cases[i].why,
                 cases[i].event);
        pt_assert_failure(chunks, "error", "TRANSPORT", want);
        json_decref(chunks);
    }
    json_t *chunks = decode("data: {\"type\":\n\n");
    pt_assert_failure(chunks, "error", "TRANSPORT", NULL);
    json_decref(chunks);
    pt_check_malformed_is_truncated_and_escaped(&ops, "event");
}

/* response.failed, error and response.incomplete map to canonical codes;
 * incomplete for max_output_tokens is the finish max-tokens (with usage). */
static void failures_map_to_canonical_codes(void **state) {
    (void)state;
    static const struct {
        const char *event, *code, *message;
    } cases[] = {
        {"{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":"
         "\"rate_limit_exceeded\",\"message\":\"slow down\"}}}",
         "RATE_LIMIT", "in-band error from the provider: rate_limit_exceeded: slow down"},
        {"{\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\","
         "\"message\":\"oops\"}}}",
         "SERVER", NULL},
        {"{\"type\":\"response.failed\",\"response\":{\"error\":null}}", "UNKNOWN", NULL},
        {"{\"type\":\"error\",\"code\":\"context_length_exceeded\",\"message\":\"too long\","
         "\"param\":null,\"sequence_number\":3}",
         "CONTEXT_WINDOW_EXCEEDED", NULL},
        {"{\"type\":\"error\",\"code\":\"insufficient_quota\",\"message\":\"pay\"}", "QUOTA",
         NULL},
        {"{\"type\":\"error\",\"code\":null,\"message\":\"?\"}", "UNKNOWN", NULL},
        {"{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"code\":"
         "\"rate_limit_exceeded\",\"message\":\"nested\"}}",
         "RATE_LIMIT", "in-band error from the provider: rate_limit_exceeded: nested"},
        {"{\"type\":\"response.incomplete\",\"response\":{\"incomplete_details\":{\"reason\":"
         "\"content_filter\"}}}",
         "UNKNOWN", "the provider stopped the answer (response.incomplete: content_filter)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sse[512];
        snprintf(sse, sizeof sse, "%sdata: %s\n\n", TEXT_ITEM(0, "partial"), cases[i].event);
        json_t *chunks = decode(sse);
        pt_assert_failure(chunks, "error", cases[i].code, cases[i].message);
        json_decref(chunks);
    }
    json_t *chunks = decode(
        TEXT_ITEM(0, "cut") EV("{\"type\":\"response.incomplete\",\"response\":{\"status\":"
                               "\"incomplete\",\"incomplete_details\":{\"reason\":"
                               "\"max_output_tokens\"},\"usage\":{\"input_tokens\":9,"
                               "\"output_tokens\":50,\"output_tokens_details\":"
                               "{\"reasoning_tokens\":45}}}}"));
    assert_chunks(chunks,
                  "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"text\"},"
                  "{\"type\":\"text-delta\",\"index\":0,\"text\":\"cut\"},"
                  "{\"type\":\"block-end\",\"index\":0},"
                  "{\"type\":\"usage\",\"usage\":{\"input_tokens\":9,\"output_tokens\":50,"
                  "\"reasoning_tokens\":45}},"
                  "{\"type\":\"finish\",\"reason\":{\"kind\":\"max-tokens\"}}]");
    json_decref(chunks);
}

static void empty_and_unfinished_streams(void **state) {
    (void)state;
    json_t *chunks = decode(COMPLETED);
    pt_assert_failure(chunks, "error", "EMPTY_RESPONSE", NULL);
    json_decref(chunks);
    pt_check_transport_failure_and_abort(&ops, TEXT_ITEM(0, "partial"));
    chunks = decode(TEXT_ITEM(0, "no end"));
    pt_assert_failure(chunks, "error", "TRANSPORT", NULL);
    json_decref(chunks);
}

static void decoder_survives_allocation_failures(void **state) {
    (void)state;
    pt_check_decoder_survives_allocation_failures(&ops);
}

/* ------------------------------------------------------------------------ */
/* The request                                                              */
/* ------------------------------------------------------------------------ */

/* tests/data/providers/request.json (test-model: no reasoning, so no
 * include) gives the golden body; allocation failures give the same body
 * or "out of memory". */
static void request_matches_golden(void **state) {
    (void)state;
    pt_check_request_survives_allocation_failures(&ops);
}

#define USER "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"2^10?\"}]}"
#define RESULT                                                                                 \
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"call_id\":\"call_1\","       \
    "\"content\":[{\"type\":\"text\",\"text\":\"1024\"}]}]}"

/* What the stream gave goes back on the next request: the reasoning item
 * verbatim before its function call, the call's output after it; store
 * false, include, max_output_tokens; temperature for gpt-5.1 (its default
 * reasoning.effort is "none", which takes it). */
static void decode_then_encode_round_trips(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "responses/tool_calls.sse");
    json_t *usage, *asst = pt_assemble(chunks, &usage);
    json_decref(usage);
    json_t *content = json_object_get(asst, "content");
    json_t *c = chunk_of(chunks, "continuation");
    json_object_set(json_array_get(content, 0), "continuation",
                    json_object_get(c, "continuation"));
    json_t *request = json_pack(
        "{s:s,s:i,s:f,s:[o,o,{s:s,s:[{s:s,s:s,s:s},{s:s,s:s,s:s}]}],s:[{s:s}]}", "model",
        "gpt-5.1", "max_tokens", 100, "temperature", 0.5, "messages", json_loads(USER, 0, NULL),
        asst, "role", "user", "content", "type", "tool_result", "call_id", "call_a", "content",
        "1024", "type", "tool_result", "call_id", "call_b", "content", "4", "tools", "name",
        "pow");
    assert_non_null(request);
    char msg[256];
    pc_extra extra = {0};
    pc_memo *memo = calloc(1, sizeof *memo);
    assert_int_equal(openai_responses_build(request, &extra, NULL, memo, msg, sizeof msg), 0);
    assert_false(extra.dropped_temperature);
    json_t *body = json_loads(memo->text.p, 0, NULL);
    assert_non_null(body);
    json_t *item = json_loads(json_string_value(json_object_get(
                                  json_object_get(json_object_get(c, "continuation"), "data"),
                                  "item")),
                              0, NULL);
    json_t *want = json_pack(
        "{s:[{s:s,s:s,s:s},O,{s:s,s:s,s:s},{s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s},"
        "{s:s,s:s,s:s},{s:s,s:s,s:s}],"
        "s:[{s:s,s:{s:s,s:{}},s:s,s:b}],s:s,s:i,s:f,s:b,s:[s],s:b}",
        "input", "type", "message", "role", "user", "content", "2^10?", item, "type", "message",
        "role", "assistant", "content", "Computing.", "type", "function_call", "call_id",
        "call_a", "name", "pow", "arguments", "{\"x\":2,\"y\":10}", "type", "function_call",
        "call_id", "call_b", "name", "sqrt", "arguments", "{\"x\":16}", "type",
        "function_call_output", "call_id", "call_a", "output", "1024", "type",
        "function_call_output", "call_id", "call_b", "output", "4", "tools", "name", "pow",
        "parameters", "type", "object", "properties", "type", "function", "strict", false,
        "model", "gpt-5.1", "max_output_tokens", 100, "temperature", 0.5, "store", false,
        "include",
        "reasoning.encrypted_content", "stream", true);
    assert_non_null(want);
    pt_assert_json_equal(body, want);
    /* the item's bytes are the continuation's, not a re-encoding */
    assert_non_null(strstr(memo->text.p, json_string_value(json_object_get(
                                             json_object_get(json_object_get(c, "continuation"),
                                                             "data"),
                                             "item"))));
    json_decref(want);
    json_decref(item);
    json_decref(body);
    pc_memo_free(memo);
    json_decref(request);
    json_decref(chunks);
}

/* Options: store and include named by an option (a value, or null for
 * none) win; include goes out whatever store says; owned keys are refused; a reasoning block whose
 * continuation is another provider's is not sent and is counted. */
static void options_and_foreign_continuations(void **state) {
    (void)state;
    const char *req = "{\"model\":\"gpt-5.1\",\"max_tokens\":10,\"messages\":[" USER
                      ",{\"role\":\"assistant\",\"content\":[{\"type\":\"reasoning\",\"text\":"
                      "\"t\",\"continuation\":{\"provider\":\"llm\",\"model\":\"gpt-5.1\","
                      "\"data\":{\"field\":\"reasoning_content\"}}},{\"type\":\"text\","
                      "\"text\":\"a\"}]}]}";
    json_t *request = json_loads(req, 0, NULL);
    static const struct {
        const char *options, *has, *lacks;
    } cases[] = {
        {"{\"store\":true}", "\"store\":true", "\"store\":false"},
        {"{\"store\":null}", "\"include\":[\"reasoning.encrypted_content\"]", "\"store\""},
        {"{\"include\":[]}", "\"include\":[]", "reasoning.encrypted_content"},
        {"{\"reasoning\":{\"effort\":\"high\",\"summary\":\"auto\"}}",
         "\"reasoning\":{\"effort\":\"high\",\"summary\":\"auto\"}", "\"max_tokens\""},
    };
    char msg[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *opts = json_loads(cases[i].options, 0, NULL);
        char *text = openai_responses_text(request, opts, msg, sizeof msg);
        if (!text || !strstr(text, cases[i].has) || strstr(text, cases[i].lacks))
            fail_msg("options %s: %s", cases[i].options, text ? text : msg);
        /* the foreign reasoning block is not an input item */
        assert_null(strstr(text, "\"type\":\"reasoning\""));
        free(text);
        json_decref(opts);
    }
    pc_extra extra = {0};
    pc_memo *memo = calloc(1, sizeof *memo);
    assert_int_equal(openai_responses_build(request, &extra, NULL, memo, msg, sizeof msg), 0);
    assert_int_equal(extra.skipped_continuations, 1);
    pc_memo_free(memo);
    static const char *const owned[] = {"messages", "max_tokens", "max_output_tokens", "input",
                                        "previous_response_id", "stream"};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) {
        json_t *opts = json_pack("{s:i}", owned[i], 1);
        char *text = openai_responses_text(request, opts, msg, sizeof msg);
        assert_null(text);
        char want[64];
        snprintf(want, sizeof want, "options.%s", owned[i]);
        if (!strstr(msg, want))
            fail_msg("option %s: %s", owned[i], msg);
        json_decref(opts);
    }
    /* a model that does not reason gets no include (OpenAI refuses
     * encrypted reasoning for it), temperature goes out */
    json_t *plain = json_pack("{s:s,s:f,s:[{s:s,s:[{s:s,s:s}]}]}", "model", "gpt-4.1",
                              "temperature", 0.5, "messages", "role", "user", "content",
                              "type", "text", "text", "hi");
    char *text = openai_responses_text(plain, NULL, msg, sizeof msg);
    assert_non_null(text);
    assert_null(strstr(text, "include"));
    assert_non_null(strstr(text, "\"temperature\":0.5"));
    assert_non_null(strstr(text, "\"store\":false"));
    free(text);
    json_decref(plain);
    json_decref(request);
}

/* ------------------------------------------------------------------------ */
/* The row's api                                                            */
/* ------------------------------------------------------------------------ */

static void api_default_is_responses_at_openai_only(void **state) {
    (void)state;
    assert_true(openai_responses_default("https://api.openai.com/v1"));
    assert_true(openai_responses_default("https://api.openai.com/v1/"));
    assert_true(openai_responses_default(NULL)); /* the default base_url */
    assert_false(openai_responses_default("http://127.0.0.1:11434/v1"));
    assert_false(openai_responses_default("https://api.openai.com.example/v1"));
    assert_false(openai_responses_default("https://openrouter.ai/api/v1"));
    assert_false(openai_responses_default("https://example.com/api.openai.com/v1"));
    /* the config schema says the same (what `weir config` shows) */
    pt_plugin_setup(NULL);
    json_t *schema = json_loads(pt_plugin_desc->config_schema, 0, NULL);
    assert_non_null(schema);
    static const char *const bases[] = {"https://api.openai.com/v1", "https://api.openai.com/v1/",
                                        NULL, "http://127.0.0.1:11434/v1",
                                        "https://api.openai.com.example/v1"};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        json_t *cfg = bases[i] ? json_pack("{s:s}", "base_url", bases[i]) : json_object();
        char msg[256];
        bool holds = weir__schema_validate(json_object_get(schema, "if"), cfg, msg,
                                           sizeof msg) == 0;
        const char *dflt = json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(schema, holds ? "then" : "else"),
                                            "properties"),
                            "api"),
            "default"));
        assert_non_null(dflt);
        assert_string_equal(dflt, openai_responses_default(bases[i]) ? "responses" : "chat");
        json_decref(cfg);
    }
    json_decref(schema);
    pt_plugin_teardown(NULL);
}

/* Server compaction (docs/providers.md): a Responses row reports it in
 * model_info, a Chat Completions row does not; the compact reply decodes to
 * one text block whose continuation holds the output items, and a checkpoint
 * carrying them sends each back unchanged, before its own text. */
static void server_compaction_on_responses_rows_only(void **state) {
    (void)state;
    static const struct {
        const char *api;
        bool offered;
    } rows[] = {{"responses", true}, {"chat", false}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        pt_plugin_setup(NULL);
        json_t *cfg = json_pack("{s:s, s:s, s:b}", "base_url", "http://127.0.0.1:9/v1", "api",
                                rows[i].api, "probe_windows", 0);
        weir_error err;
        memset(&err, 0, sizeof err);
        assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, cfg, &err), WEIR_OK);
        json_t *info = pt_host.provider->model_info(pt_host.provider_self, "gpt-5.1");
        const char *kind = json_string_value(json_object_get(info, "server_compaction"));
        if (rows[i].offered)
            assert_string_equal(kind, "openai-responses-compact");
        else
            assert_null(kind);
        json_decref(info);
        json_decref(cfg);
        pt_plugin_teardown(NULL);
    }
    /* the reply */
    json_t *chunks = json_array();
    responses_decoder *d = responses_decoder_new("p", "gpt-5.1", pt_collect, chunks);
    static const char reply[] =
        "{\"id\":\"c1\",\"object\":\"response.compaction\",\"output\":[{\"type\":\"message\","
        "\"role\":\"user\",\"content\":\"hi\"},{\"type\":\"compaction\",\"id\":\"ci\","
        "\"encrypted_content\":\"E1\"}],\"usage\":{\"input_tokens\":50,\"output_tokens\":5}}";
    assert_int_equal(responses_compact_reply(d, reply, sizeof reply - 1), 0);
    assert_true(responses_decoder_done(d));
    responses_decoder_free(d);
    const json_t *cont = NULL, *fin = NULL;
    size_t k;
    const json_t *c;
    json_array_foreach(chunks, k, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        if (!strcmp(type, "continuation"))
            cont = json_object_get(c, "continuation");
        if (!strcmp(type, "finish"))
            fin = c;
    }
    assert_non_null(cont);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(fin, "reason"), "kind")), "stop");
    const char *items = json_string_value(json_object_get(json_object_get(cont, "data"),
                                                          "compaction"));
    assert_string_equal(items, "[{\"type\":\"message\",\"role\":\"user\",\"content\":\"hi\"},"
                               "{\"type\":\"compaction\",\"id\":\"ci\",\"encrypted_content\":"
                               "\"E1\"}]");
    assert_true(json_is_false(json_object_get(cont, "prefix_bound")));
    /* a reply without a compaction item is malformed */
    json_t *bad = json_array();
    d = responses_decoder_new("p", "gpt-5.1", pt_collect, bad);
    static const char none[] = "{\"output\":[{\"type\":\"message\",\"role\":\"user\","
                               "\"content\":\"hi\"}]}";
    assert_int_equal(responses_compact_reply(d, none, sizeof none - 1), 0);
    responses_decoder_free(d);
    const json_t *last = json_array_get(bad, json_array_size(bad) - 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(last, "reason"), "failure"), "code")),
                        "TRANSPORT");
    json_decref(bad);
    /* sent back: the items unchanged in the checkpoint's place, then its text */
    json_t *req = json_pack("{s:s, s:[{s:s, s:[{s:s, s:s, s:O}]}]}", "model", "gpt-5.1",
                            "messages", "role", "user", "content", "type", "text", "text",
                            "Checkpoint.", "continuation", cont);
    char msg[256];
    char *text = openai_responses_text(req, NULL, msg, sizeof msg);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"input\":[{\"type\":\"message\",\"role\":\"user\","
                                 "\"content\":\"hi\"},{\"type\":\"compaction\",\"id\":\"ci\","
                                 "\"encrypted_content\":\"E1\"},{\"type\":\"message\",\"role\":"
                                 "\"user\",\"content\":\"Checkpoint.\"}]"));
    free(text);
    json_decref(req);
    json_decref(chunks);
}

#define ROW(extra) "{\"base_url\":\"@BASE@/v1\",\"api_key\":\"" PT_KEY "\"" extra "}"
#define TEXT_SCRIPT "{\"requests\":[{\"text\":\"Hello\"}]}"

/* api "responses" posts to /v1/responses, "chat" and the default at a
 * local server to /v1/chat/completions; another value is a config error
 * naming config.api (the schema refuses it, and init again). */
static void api_picks_the_endpoint(void **state) {
    (void)state;
    static const struct {
        const char *row, *path;
    } cases[] = {
        {ROW(",\"api\":\"responses\""), "/v1/responses"},
        {ROW(",\"api\":\"chat\""), "/v1/chat/completions"},
        {ROW(""), "/v1/chat/completions"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_plugin_setup(NULL);
        int rc;
        mock_llm *m = pt_run_plugin(TEXT_SCRIPT, cases[i].row, NULL, &rc);
        assert_int_equal(rc, WEIR_OK);
        char *path = mock_llm_request_path(m, 0);
        assert_non_null(path);
        assert_string_equal(path, cases[i].path);
        assert_string_equal(
            json_string_value(json_object_get(pt_finish_reason(pt_host.chunks), "kind")),
            "stop");
        free(path);
        mock_llm_stop(m);
        pt_plugin_teardown(NULL);
    }
    pt_plugin_setup(NULL);
    json_t *bad = json_pack("{s:s}", "api", "completions");
    weir_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, bad, &err), WEIR_E_PLUGIN_CONFIG);
    if (!strstr(err.text, "config.api: expected \"responses\" or \"chat\""))
        fail_msg("%s", err.text);
    json_t *schema = json_loads(pt_plugin_desc->config_schema, 0, NULL);
    assert_non_null(schema);
    char msg[256];
    assert_int_not_equal(weir__schema_validate(schema, bad, msg, sizeof msg), 0);
    assert_non_null(strstr(msg, "api"));
    json_t *good = json_pack("{s:s}", "api", "chat");
    assert_int_equal(weir__schema_validate(schema, good, msg, sizeof msg), 0);
    json_decref(good);
    json_decref(bad);
    json_decref(schema);
    pt_plugin_teardown(NULL);
}

/* The plugin over /v1/responses: the mock's faults map as on Chat
 * Completions; the key never shows. */
static void faults_map_over_responses(void **state) {
    (void)state;
    static const struct {
        const char *fault, *code;
    } cases[] = {
        {"rate_limit", "RATE_LIMIT"},   {"server_error", "SERVER"},
        {"auth", "AUTH"},               {"overflow", "CONTEXT_WINDOW_EXCEEDED"},
        {"reset", "TRANSPORT"},         {"malformed", "TRANSPORT"},
        {"truncated", "TRANSPORT"},     {"inband_error", "SERVER"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_plugin_setup(NULL);
        char script[256];
        snprintf(script, sizeof script,
                 "{\"requests\":[{\"text\":\"Hello there, friend\",\"fault\":\"%s\","
                 "\"echo_key\":true}]}",
                 cases[i].fault);
        int rc;
        mock_llm *m = pt_run_plugin(
            script, ROW(",\"api\":\"responses\",\"stream_idle_timeout_ms\":2000"), NULL, &rc);
        assert_int_equal(rc, WEIR_OK);
        json_t *f = json_object_get(pt_finish_reason(pt_host.chunks), "failure");
        const char *code = json_string_value(json_object_get(f, "code"));
        if (!code || strcmp(code, cases[i].code) != 0)
            fail_msg("fault %s: got %s (%s)", cases[i].fault, code ? code : "(none)",
                     json_string_value(json_object_get(f, "message")));
        pt_assert_no_secret();
        mock_llm_stop(m);
        pt_plugin_teardown(NULL);
    }
}

/* Two steps of a tool loop on gpt-5.1 through the plugin: the mock answers
 * 400 unless the first step's reasoning item comes back before its call. */
static void plugin_tool_loop_sends_the_reasoning_back(void **state) {
    (void)state;
    pt_plugin_setup(NULL);
    const char *request = "{\"model\":\"gpt-5.1\",\"max_tokens\":50,\"tools\":[{\"name\":"
                          "\"pow\",\"parameters\":{\"type\":\"object\"}}],\"messages\":[" USER
                          "]}";
    int rc;
    mock_llm *m = pt_run_plugin(
        "{\"requests\":[{\"reasoning\":\"pow it\",\"tool_calls\":[{\"id\":\"call_1\","
        "\"name\":\"pow\",\"arguments\":\"{}\"}]},{\"text\":\"1024\"}]}",
        ROW(",\"api\":\"responses\""), request, &rc);
    assert_int_equal(rc, WEIR_OK);
    json_t *c = chunk_of(pt_host.chunks, "continuation");
    assert_non_null(c);
    json_t *usage, *asst = pt_assemble(pt_host.chunks, &usage);
    json_decref(usage);
    json_object_set(json_array_get(json_object_get(asst, "content"), 0), "continuation",
                    json_object_get(c, "continuation"));
    json_t *next = json_loads(request, 0, NULL);
    json_t *messages = json_object_get(next, "messages");
    json_array_append_new(messages, asst);
    json_array_append_new(messages, json_loads(RESULT, 0, NULL));
    json_array_clear(pt_host.chunks);
    assert_int_equal(pt_host.provider->stream(pt_host.provider_self, NULL, next,
                                              (weir_stream *)&pt_host),
                     WEIR_OK);
    const char *kind = json_string_value(json_object_get(pt_finish_reason(pt_host.chunks), "kind"));
    if (!kind || strcmp(kind, "stop") != 0)
        fail_msg("step 2 ended %s", json_dumps(pt_finish_reason(pt_host.chunks), JSON_COMPACT));
    assert_int_equal(mock_llm_rejections(m), 0);
    char *body = mock_llm_request_body(m, 1);
    assert_non_null(body);
    const char *rs = strstr(body, "\"type\":\"reasoning\"");
    const char *fc = strstr(body, "\"type\":\"function_call\"");
    assert_true(rs && fc && rs < fc);
    assert_non_null(strstr(body, "\"store\":false"));
    free(body);
    json_decref(next);
    mock_llm_stop(m);
    pt_plugin_teardown(NULL);
}

int main(void) {
    pt_plugin_file = "weir-provider-openai.so";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stream_matches_golden),
        cmocka_unit_test(continuation_is_the_done_item),
        cmocka_unit_test(text_and_refusal_are_text),
        cmocka_unit_test(done_events_carry_the_whole),
        cmocka_unit_test(reasoning_text_without_encrypted_content),
        cmocka_unit_test(empty_summary_still_goes_back),
        cmocka_unit_test(unknown_events_are_ignored),
        cmocka_unit_test(malformed_events_are_transport),
        cmocka_unit_test(failures_map_to_canonical_codes),
        cmocka_unit_test(empty_and_unfinished_streams),
        cmocka_unit_test(decoder_survives_allocation_failures),
        cmocka_unit_test(request_matches_golden),
        cmocka_unit_test(decode_then_encode_round_trips),
        cmocka_unit_test(options_and_foreign_continuations),
        cmocka_unit_test(api_default_is_responses_at_openai_only),
        cmocka_unit_test(api_picks_the_endpoint),
        cmocka_unit_test(server_compaction_on_responses_rows_only),
        cmocka_unit_test(faults_map_over_responses),
        cmocka_unit_test(plugin_tool_loop_sends_the_reasoning_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
