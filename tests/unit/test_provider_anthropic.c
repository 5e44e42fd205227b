/*
 * tests/unit/test_provider_anthropic.c - provider-anthropic: request
 * translation (golden JSON), decoding of recorded Messages API streams,
 * every failure path, a canonical -> request -> stream -> message round
 * trip, and the built plugin (weir-provider-anthropic.so) driven through a
 * fake host table whose HTTP is the real core client talking to the
 * loopback mock LLM, including model_info (the model table without config,
 * the config's `models` over it, never a probe) and the default max_tokens
 * it gives.
 *
 * Data: tests/data/providers/request.json (canonical request shared with the
 * openai test) and tests/data/providers/anthropic/ (*.sse recorded streams,
 * *.chunks.json expected chunks, request.expected.json).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "schema.h"

#include "anthropic.h"
#include "mock_llm.h"
#include "provider_test.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* The decoder and request translation, as the shared checks call them. */
static void *decoder_new(int (*emit)(void *, json_t *), void *user_data) {
    anthropic_decoder *d = anthropic_decoder_new("llm", emit, user_data);
    if (d && anthropic_decoder_set_model(d, "claude-test") != 0) {
        anthropic_decoder_free(d);
        return NULL;
    }
    return d;
}
static int decoder_event(void *d, const char *event, const char *data, size_t len) {
    return anthropic_decoder_event(d, event, data, len);
}
static int decoder_end(void *d, json_t *failure, bool aborted) {
    return anthropic_decoder_end(d, failure, aborted);
}
static void decoder_free(void *d) { anthropic_decoder_free(d); }
static json_t *request_body(const json_t *request, char *msg, size_t size) {
    return anthropic_request_body(request, 0, msg, size);
}

static const pt_provider_ops ops = {decoder_new,  decoder_event, decoder_end,
                                    decoder_free, request_body,  "anthropic"};

/* ------------------------------------------------------------------------ */
/* Request translation                                                      */
/* ------------------------------------------------------------------------ */

/* Server compaction (docs/providers.md): the models that have it report it
 * in model_info; the compaction block streams into one text block (its
 * summary) whose continuation holds the block; a checkpoint carrying it
 * sends the block back unchanged as an assistant turn, then its text. */
static void server_compaction_block_round_trips(void **state) {
    (void)state;
    pt_plugin_setup(NULL);
    json_t *cfg = json_pack("{s:s}", "base_url", "http://127.0.0.1:9");
    weir_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, cfg, &err), WEIR_OK);
    json_t *info = pt_host.provider->model_info(pt_host.provider_self, "claude-sonnet-4-6");
    assert_string_equal(json_string_value(json_object_get(info, "server_compaction")),
                        "anthropic-compact-20260112");
    json_decref(info);
    info = pt_host.provider->model_info(pt_host.provider_self, "claude-sonnet-4-5");
    assert_null(json_object_get(info, "server_compaction"));
    json_decref(info);
    json_decref(cfg);
    pt_plugin_teardown(NULL);

    json_t *chunks = pt_decode_text(
        &ops,
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"
        "{\"input_tokens\":60000,\"output_tokens\":1}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"compaction\",\"content\":null,\"encrypted_content\":"
        "null}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"compaction_delta\",\"content\":\"The summary.\","
        "\"encrypted_content\":\"E1\"}}\n\n"
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"compaction\"},\"usage\":{\"output_tokens\":9}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    const json_t *cont = NULL, *fin = NULL, *c;
    size_t k;
    json_array_foreach(chunks, k, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        if (!strcmp(type, "continuation"))
            cont = json_object_get(c, "continuation");
        else if (!strcmp(type, "finish"))
            fin = c;
        else if (!strcmp(type, "text-delta"))
            assert_string_equal(json_string_value(json_object_get(c, "text")), "The summary.");
    }
    assert_non_null(cont);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(fin, "reason"), "kind")), "stop");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(cont, "data"), "compaction")),
        "{\"type\":\"compaction\",\"content\":\"The summary.\",\"encrypted_content\":\"E1\"}");
    assert_true(json_is_false(json_object_get(cont, "prefix_bound")));

    json_t *req = json_pack("{s:s, s:i, s:[{s:s, s:[{s:s, s:s, s:O}]}, {s:s, s:[{s:s, s:s}]}]}",
                            "model", "claude-sonnet-4-6", "max_tokens", 100, "messages", "role",
                            "user", "content", "type", "text", "text", "Checkpoint.",
                            "continuation", cont, "role", "user", "content", "type", "text",
                            "text", "Go on.");
    char msg[256];
    json_t *body = anthropic_request_body(req, 0, msg, sizeof msg);
    assert_non_null(body);
    json_t *want = json_loads(
        "[{\"role\":\"assistant\",\"content\":[{\"type\":\"compaction\",\"content\":"
        "\"The summary.\",\"encrypted_content\":\"E1\"}]},{\"role\":\"user\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"Checkpoint.\"},{\"type\":\"text\",\"text\":"
        "\"Go on.\"}]}]",
        0, NULL);
    pt_assert_json_equal(json_object_get(body, "messages"), want);
    json_decref(want);
    json_decref(body);
    json_decref(req);
    json_decref(chunks);
}

static void request_translation_matches_golden(void **state) {
    (void)state;
    json_t *request = pt_load_data("request.json");
    json_t *want = pt_load_data("anthropic/request.expected.json");
    char msg[256];
    json_t *body = anthropic_request_body(request, 0, msg, sizeof msg);
    assert_non_null(body);
    pt_assert_json_equal(body, want);
    json_decref(body);
    json_decref(want);
    json_decref(request);
}

static void request_without_optional_fields(void **state) {
    (void)state;
    json_t *request = json_pack("{s:s,s:[{s:s,s:[{s:s,s:s}]}]}", "model", "m", "messages",
                                "role", "user", "content", "type", "text", "text", "hi");
    char msg[256];
    json_t *body = anthropic_request_body(request, 0, msg, sizeof msg);
    json_t *want = json_pack("{s:s,s:i,s:[{s:s,s:[{s:s,s:s}]}],s:b}", "model", "m", "max_tokens",
                             4096, "messages", "role", "user", "content", "type", "text", "text",
                             "hi", "stream", 1);
    pt_assert_json_equal(body, want);
    json_decref(body);
    /* the model's max_output stands in for a missing max_tokens */
    body = anthropic_request_body(request, 777, msg, sizeof msg);
    assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 777);
    json_decref(body);
    json_decref(want);
    json_decref(request);
}

/* tool_choice maps to {type}, "required" to "any", and goes with tools only. */
static void request_tool_choice(void **state) {
    (void)state;
    json_t *request = json_loads("{\"model\":\"m\",\"tool_choice\":\"none\",\"messages\":[],"
                                 "\"tools\":[{\"name\":\"f\",\"description\":\"d\","
                                 "\"parameters\":{\"type\":\"object\"}}]}",
                                 0, NULL);
    assert_non_null(request);
    char msg[256] = "";
    json_t *body = anthropic_request_body(request, 0, msg, sizeof msg);
    assert_non_null(body);
    json_t *want = json_pack("{s:s}", "type", "none");
    assert_true(json_equal(json_object_get(body, "tool_choice"), want));
    json_decref(want);
    json_decref(body);
    json_object_set_new(request, "tool_choice", json_string("required"));
    body = anthropic_request_body(request, 0, msg, sizeof msg);
    want = json_pack("{s:s}", "type", "any");
    assert_true(json_equal(json_object_get(body, "tool_choice"), want));
    json_decref(want);
    json_decref(body);
    json_object_set_new(request, "tools", json_array());
    body = anthropic_request_body(request, 0, msg, sizeof msg);
    assert_non_null(body);
    assert_null(json_object_get(body, "tool_choice"));
    json_decref(body);
    json_object_set_new(request, "tool_choice", json_integer(1));
    assert_null(anthropic_request_body(request, 0, msg, sizeof msg));
    assert_string_equal(msg, "tool_choice: expected \"auto\", \"none\" or \"required\"");
    json_decref(request);
}

static void request_rejects_bad_blocks(void **state) {
    (void)state;
    static const struct {
        const char *request, *message;
    } cases[] = {
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"video\"}]}]}",
         "messages[0].content[1]: unsupported block type \"video\" in a user message"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_call\",\"id\":\"c\",\"name\":\"f\"}]}]}",
         "messages[0].content[0]: tool_call needs string \"id\", \"name\" and \"arguments\""},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"content\":[]}]}]}",
         "messages[0].content[0]: tool_result needs a string \"call_id\""},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"image\",\"media_type\":\"a\",\"data\":\"b\"}]}]}",
         "messages[0].content[0]: unsupported block type \"image\" in a system message"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"robot\",\"content\":[]}]}",
         "messages[0]: unknown role \"robot\""},
        {"{\"messages\":[]}", "model: expected a non-empty string"},
        {"{\"model\":\"m\",\"max_tokens\":0,\"messages\":[]}",
         "max_tokens: expected a positive integer"},
        {"{\"model\":\"m\",\"messages\":[],\"tools\":[{\"description\":\"x\"}]}",
         "tools[0]: needs a string \"name\", a string \"description\" and an object \"parameters\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *request = json_loads(cases[i].request, 0, NULL);
        assert_non_null(request);
        char msg[256] = "";
        assert_null(anthropic_request_body(request, 0, msg, sizeof msg));
        assert_string_equal(msg, cases[i].message);
        json_decref(request);
    }
}

static void request_merges_roles_and_puts_tool_results_first(void **state) {
    (void)state;
    json_t *request = json_loads(
        "{\"model\":\"m\",\"messages\":["
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"b\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_call\",\"id\":\"t1\",\"name\":\"f\",\"arguments\":\"[1]\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"steer\"}]},"
        "{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"call_id\":\"t1\",\"content\":\"done\"}]}]}",
        0, NULL);
    char msg[256];
    json_t *body = anthropic_request_body(request, 0, msg, sizeof msg);
    json_t *want = json_loads(
        "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\","
        "\"content\":[{\"type\":\"text\",\"text\":\"done\"}]},{\"type\":\"text\",\"text\":\"steer\"}]}]",
        0, NULL);
    pt_assert_json_equal(json_object_get(body, "messages"), want);
    json_decref(want);
    json_decref(body);
    json_decref(request);
}

/* The body text built with a cache is byte for byte the one built without:
 * system text, merged roles and tool results first work on cached pieces;
 * a second request over the same objects translates nothing. */
static void request_cache_reuses_translated_messages(void **state) {
    (void)state;
    json_t *request = pt_load_data("request.json");
    json_t *messages = json_object_get(request, "messages");
    /* a tool message after a user message merges into it, results first; an
     * empty user message splits nothing */
    assert_int_equal(json_array_append_new(messages,
                                           json_pack("{s:s,s:[{s:s,s:s}]}", "role", "user",
                                                     "content", "type", "text", "text", "")),
                     0);
    size_t n = json_array_size(messages);
    char msg[256];
    char *plain = anthropic_request_text(request, 0, NULL, msg, sizeof msg);
    assert_non_null(plain);
    json_t *parsed = json_loads(plain, 0, NULL);
    json_t *golden = anthropic_request_body(request, 0, msg, sizeof msg);
    assert_non_null(parsed);
    assert_true(json_equal(parsed, golden));
    json_decref(parsed);
    json_decref(golden);

    pc_cache *cache = pc_cache_new(64, 1 << 20);
    assert_non_null(cache);
    for (int round = 0; round < 2; round++) {
        char *text = anthropic_request_text(request, 0, cache, msg, sizeof msg);
        assert_non_null(text);
        assert_string_equal(text, plain);
        free(text);
    }
    pc_cache_stats st = pc_cache_get_stats(cache);
    assert_int_equal(st.misses, n + 1); /* every message and the tools, once */
    assert_int_equal(st.hits, n + 1);
    /* one more message: one more translation */
    assert_int_equal(json_array_append_new(messages,
                                           json_pack("{s:s,s:[{s:s,s:s}]}", "role", "system",
                                                     "content", "type", "text", "text", "late")),
                     0);
    char *next_plain = anthropic_request_text(request, 0, NULL, msg, sizeof msg);
    char *next = anthropic_request_text(request, 0, cache, msg, sizeof msg);
    assert_non_null(next);
    assert_string_equal(next, next_plain);
    st = pc_cache_get_stats(cache);
    assert_int_equal(st.misses, n + 2);
    free(next_plain);
    free(next);
    free(plain);
    /* a messages array holding the cached tools array itself: an error, as
     * without a cache, never the tools' text read as a message */
    json_t *tools = json_object_get(request, "tools");
    json_t *odd = json_pack("{s:s, s:[O], s:O}", "model", "m", "messages", tools, "tools", tools);
    assert_null(anthropic_request_text(odd, 0, cache, msg, sizeof msg));
    assert_string_equal(msg, "messages[0]: needs a string \"role\" and a \"content\" array");
    json_decref(odd);
    pc_cache_free(cache);
    json_decref(request);
}

/* One request through the owner's memo: the body must be byte for byte the
 * one built from nothing.  Returns how many messages were folded again (the
 * cache probes of messages this build made). */
static size_t memo_step(pc_cache *cache, const json_t *request) {
    char msg[256];
    char *plain = anthropic_request_text(request, 0, NULL, msg, sizeof msg);
    assert_non_null(plain);
    pc_cache_stats before = pc_cache_get_stats(cache);
    pc_memo *memo = pc_cache_memo_take(cache);
    assert_non_null(memo);
    assert_int_equal(anthropic_request_build(request, 0, cache, memo, msg, sizeof msg), 0);
    assert_int_equal(memo->text.len, strlen(plain));
    assert_string_equal(memo->text.p, plain);
    assert_int_equal(memo->n, json_array_size(json_object_get(request, "messages")));
    free(plain);
    pc_cache_memo_give(cache, memo);
    pc_cache_stats after = pc_cache_get_stats(cache);
    size_t tools = json_array_size(json_object_get(request, "tools")) > 0;
    return (size_t)(after.hits + after.misses - before.hits - before.misses) - tools;
}

static json_t *text_message(const char *role, const char *text) {
    return json_pack("{s:s,s:[{s:s,s:s}]}", "role", role, "content", "type", "text", "text", text);
}

/* The memo (issue #15, the cost flat in the history): a bound agent's next
 * body keeps the messages' text in place up to the start of the last merged
 * group it shares, and folds again only that group and what is new, byte for
 * byte the body built from nothing: whatever the history did (grew inside
 * the open group or past it, got a system message in the middle, had a
 * message rewritten, shrank, failed to translate).  request.json ends in one
 * user group of 5 messages (two tool results, "Thanks.", an assistant
 * message with nothing to send, "Go on."). */
static void request_memo_resumes_at_the_last_shared_group(void **state) {
    (void)state;
    static const char owner = 'o', agent = 'a';
    pc_cache *cache = pt_memo_cache(&agent, &owner);
    assert_non_null(cache);
    json_t *request = pt_load_data("request.json");
    json_t *messages = json_object_get(request, "messages");
    size_t n = json_array_size(messages);
    assert_int_equal(n, 8);
    assert_int_equal(memo_step(cache, request), n); /* nothing kept yet */
    assert_int_equal(memo_step(cache, request), 5); /* the open user group again */
    /* grows inside the user group: it is folded again with the new one */
    assert_int_equal(json_array_append_new(messages, text_message("user", "more")), 0);
    assert_int_equal(memo_step(cache, request), 6);
    /* grows past it: an assistant message closes it; then a user one */
    assert_int_equal(json_array_append_new(messages, text_message("assistant", "Sure.")), 0);
    assert_int_equal(memo_step(cache, request), 7);
    assert_int_equal(json_array_append_new(messages, text_message("user", "Next.")), 0);
    assert_int_equal(memo_step(cache, request), 2); /* only the assistant group and the new one */
    assert_int_equal(memo_step(cache, request), 1);
    /* a system message inside the open group joins the system text */
    assert_int_equal(json_array_append_new(messages, text_message("system", "Also: be kind.")),
                     0);
    assert_int_equal(memo_step(cache, request), 2);
    assert_int_equal(json_array_append_new(messages, text_message("assistant", "Noted.")), 0);
    assert_int_equal(memo_step(cache, request), 3);
    assert_int_equal(memo_step(cache, request), 1);
    /* compaction rewrites message 1: from the start, the memo lets go of it */
    json_t *old = json_incref(json_array_get(messages, 1));
    size_t held = old->refcount;
    assert_int_equal(json_array_set_new(messages, 1, text_message("user", "a summary")), 0);
    size_t now = json_array_size(messages);
    assert_int_equal(memo_step(cache, request), now);
    assert_true(old->refcount < held);
    json_decref(old);
    /* shrinks: to the message that opened the last group ("Next."), then
     * into the middle of a group (it ends at "more") */
    assert_int_equal(memo_step(cache, request), 1);
    assert_int_equal(json_array_remove(messages, now - 1), 0);
    assert_int_equal(json_array_remove(messages, now - 2), 0);
    assert_int_equal(memo_step(cache, request), 1);
    assert_int_equal(json_array_remove(messages, now - 3), 0);
    assert_int_equal(json_array_remove(messages, now - 4), 0);
    assert_int_equal(memo_step(cache, request), 6);
    /* a message that fails: an error, the memo reset, the next body right */
    assert_int_equal(json_array_append_new(messages, json_pack("{s:s,s:[]}", "role", "robot",
                                                               "content")),
                     0);
    char msg[256];
    pc_memo *memo = pc_cache_memo_take(cache);
    assert_int_equal(anthropic_request_build(request, 0, cache, memo, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "robot"));
    assert_int_equal(memo->n, 0);
    assert_int_equal(memo->text.len, 0);
    assert_int_equal(memo->side.len, 0);
    pc_cache_memo_give(cache, memo);
    assert_int_equal(json_array_remove(messages, json_array_size(messages) - 1), 0);
    assert_int_equal(memo_step(cache, request), json_array_size(messages));
    /* other options, the same messages: the same resume */
    assert_int_equal(json_object_set_new(request, "tools", json_array()), 0);
    assert_int_equal(json_object_del(request, "temperature"), 0);
    assert_int_equal(memo_step(cache, request), 6); /* the open group, from message 3 */
    pc_cache_set_owner(NULL);
    json_decref(request);
    pc_cache_free(cache);
}

static void request_survives_allocation_failures(void **state) {
    (void)state;
    pt_check_request_survives_allocation_failures(&ops);
}

/* ------------------------------------------------------------------------ */
/* Decoding recorded streams                                                */
/* ------------------------------------------------------------------------ */

static void decode_text_stream_with_cache_usage(void **state) {
    (void)state;
    pt_check_stream(&ops, "anthropic/text.sse", "anthropic/text.chunks.json");
}

static void decode_thinking_then_text(void **state) {
    (void)state;
    /* signature_delta accumulates into the thinking block's continuation;
     * redacted_thinking is a reasoning block with no text and its data */
    pt_check_stream(&ops, "anthropic/thinking.sse", "anthropic/thinking.chunks.json");
}

static void decode_two_tool_calls_with_fragmented_arguments(void **state) {
    (void)state;
    pt_check_stream(&ops, "anthropic/tool_calls.sse", "anthropic/tool_calls.chunks.json");
    json_t *chunks = pt_decode_file(&ops, "anthropic/tool_calls.sse"), *usage;
    json_t *message = pt_assemble(chunks, &usage);
    json_t *want = json_loads(
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Computing.\"},"
        "{\"type\":\"tool_call\",\"id\":\"toolu_a\",\"name\":\"pow\",\"arguments\":\"{\\\"x\\\":2,\\\"y\\\":10}\"},"
        "{\"type\":\"tool_call\",\"id\":\"toolu_b\",\"name\":\"sqrt\",\"arguments\":\"{\\\"x\\\":16}\"}]}",
        0, NULL);
    pt_assert_json_equal(message, want);
    json_decref(want);
    json_decref(message);
    json_decref(usage);
    json_decref(chunks);
}

static void decode_max_tokens(void **state) {
    (void)state;
    pt_check_stream(&ops, "anthropic/max_tokens.sse", "anthropic/max_tokens.chunks.json");
}

static void decode_tool_call_without_arguments_gets_empty_object(void **state) {
    (void)state;
    json_t *chunks = pt_decode_text(
        &ops,
        "data: "
        "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\","
        "\"id\":\"t1\",\"name\":\"now\",\"input\":{}}}\n\n"
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n"
        "data: {\"type\":\"message_stop\"}\n\n");
    json_t *usage, *message = pt_assemble(chunks, &usage);
    json_t *want = json_pack("{s:s,s:[{s:s,s:s,s:s,s:s}]}", "role", "assistant", "content",
                             "type", "tool_call", "id", "t1", "name", "now", "arguments", "{}");
    pt_assert_json_equal(message, want);
    assert_string_equal(json_string_value(json_object_get(pt_finish_reason(chunks), "kind")),
                        "tool-calls");
    assert_null(usage); /* no message_start, no usage chunk */
    json_decref(want);
    json_decref(message);
    json_decref(chunks);
}

static void decode_event_name_stands_in_for_missing_type(void **state) {
    (void)state;
    json_t *chunks = json_array();
    anthropic_decoder *d = anthropic_decoder_new("llm", pt_collect, chunks);
    assert_int_equal(anthropic_decoder_event(d, "ping", "{}", 2), 0);
    const char *error = "{\"error\":{\"type\":\"rate_limit_error\"}}";
    assert_int_not_equal(anthropic_decoder_event(d, "error", error, strlen(error)), 0);
    anthropic_decoder_end(d, NULL, false);
    anthropic_decoder_free(d);
    pt_assert_failure(chunks, "error", "RATE_LIMIT",
                      "in-band error from the provider: rate_limit_error: (no message)");
    json_decref(chunks);
}

/* ------------------------------------------------------------------------ */
/* Failure paths                                                            */
/* ------------------------------------------------------------------------ */

static void inband_error_is_classified(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "anthropic/inband_error.sse");
    pt_assert_failure(chunks, "error", "OVERLOADED",
                      "in-band error from the provider: overloaded_error: Overloaded");
    json_decref(chunks);
    static const struct {
        const char *type, *message, *code;
    } cases[] = {
        {"rate_limit_error", "slow down", "RATE_LIMIT"},
        {"api_error", "boom", "SERVER"},
        {"invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum",
         "CONTEXT_WINDOW_EXCEEDED"},
        {"invalid_request_error", "messages: field required", "INVALID_REQUEST"},
        {"authentication_error", "invalid x-api-key", "AUTH"},
        {"something_new", "?", "UNKNOWN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sse[512];
        snprintf(sse, sizeof sse,
                 "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"%s\","
                 "\"message\":\"%s\"}}\n\n",
                 cases[i].type, cases[i].message);
        chunks = pt_decode_text(&ops, sse);
        pt_assert_failure(chunks, "error", cases[i].code, NULL);
        json_decref(chunks);
    }
}

static void malformed_event_quotes_the_bytes(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "anthropic/malformed.sse");
    assert_string_equal(json_string_value(json_object_get(json_array_get(chunks, 1), "text")),
                        "Hi");
    pt_assert_failure(chunks, "error", "TRANSPORT",
                      "malformed stream event (invalid JSON): {\"type\":\"content_block_delta\","
                      "\"index\":0,\"delta\":{\"type\":\"text_de");
    json_decref(chunks);
}

static void event_with_wrong_types_is_malformed(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "anthropic/wrong_type.sse");
    pt_assert_failure(
        chunks, "error", "TRANSPORT",
        "malformed stream event (index is not an integer): {\"type\":"
        "\"content_block_start\",\"index\":\"0\",\"content_block\":{\"type\":\"text\","
        "\"text\":\"\"}}");
    assert_int_equal(json_array_size(chunks), 1);
    json_decref(chunks);
    chunks = pt_decode_text(&ops, "data: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":"
                                  "{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n");
    pt_assert_failure(chunks, "error", "TRANSPORT",
                      "malformed stream event (content_block_delta for a block that is not open): "
                      "{\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":"
                      "\"text_delta\",\"text\":\"x\"}}");
    json_decref(chunks);
}

static void malformed_event_is_truncated_and_escaped(void **state) {
    (void)state;
    pt_check_malformed_is_truncated_and_escaped(&ops, "event");
}

static void truncated_stream_is_transport(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "anthropic/truncated.sse");
    pt_assert_failure(chunks, "error", "TRANSPORT", "stream ended before finish");
    json_decref(chunks);
}

static void stop_without_content_is_empty_response(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "anthropic/empty.sse");
    pt_assert_failure(chunks, "error", "EMPTY_RESPONSE", "the model finished without any content");
    assert_int_equal(json_array_size(chunks), 1);
    json_decref(chunks);
}

static void transport_failure_and_abort_end_the_stream(void **state) {
    (void)state;
    pt_check_transport_failure_and_abort(
        &ops, "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
              "{\"type\":\"text\",\"text\":\"a\"}}\n\n");
}

static int refuse_after_two(void *user_data, json_t *chunk) {
    json_t *chunks = user_data;
    const char *type = json_string_value(json_object_get(chunk, "type"));
    json_array_append_new(chunks, chunk);
    return strcmp(type, "finish") != 0 && json_array_size(chunks) >= 2 ? -1 : 0;
}

static void consumer_refusal_stops_all_but_the_finish(void **state) {
    (void)state;
    json_t *chunks = json_array();
    anthropic_decoder *d = anthropic_decoder_new("llm", refuse_after_two, chunks);
    pt_feed_decoder(&ops, d,
                    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
                    "{\"type\":\"text\",\"text\":\"a\"}}\n\n"
                    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
                    "{\"type\":\"text_delta\",\"text\":\"b\"}}\n\n");
    anthropic_decoder_end(d, NULL, true);
    anthropic_decoder_free(d);
    assert_int_equal(json_array_size(chunks), 3);
    pt_assert_failure(chunks, "aborted", "ABORTED", NULL);
    json_decref(chunks);
}

static void decoder_survives_allocation_failures(void **state) {
    (void)state;
    pt_check_decoder_survives_allocation_failures(&ops);
}

/* ------------------------------------------------------------------------ */
/* Round trip                                                               */
/* ------------------------------------------------------------------------ */

/* One content_block_delta event per ~3-byte piece (cut on UTF-8 boundaries). */
static void stream_pieces(json_t *events, size_t index, const char *type, const char *field,
                          const char *s) {
    size_t len = strlen(s);
    for (size_t i = 0, n; i < len; i += n) {
        n = len - i < 3 ? len - i : 3;
        while (i + n < len && ((unsigned char)s[i + n] & 0xC0) == 0x80)
            n++;
        json_t *piece = json_stringn(s + i, n);
        assert_non_null(piece);
        json_array_append_new(events, json_pack("{s:s,s:i,s:{s:s,s:o}}", "type",
                                                "content_block_delta", "index", (int)index,
                                                "delta", "type", type, field, piece));
    }
}

static void round_trip_loses_nothing(void **state) {
    (void)state;
    json_t *assistant = json_loads(
        "{\"role\":\"assistant\",\"content\":["
        "{\"type\":\"reasoning\",\"text\":\"The user wants 2^10; use pow.\"},"
        "{\"type\":\"text\",\"text\":\"Computing 2^10 and √16…\"},"
        "{\"type\":\"tool_call\",\"id\":\"toolu_1\",\"name\":\"pow\",\"arguments\":\"{\\\"x\\\":2,\\\"y\\\":10}\"},"
        "{\"type\":\"tool_call\",\"id\":\"toolu_2\",\"name\":\"sqrt\",\"arguments\":\"{\\\"x\\\":16}\"}]}",
        0, NULL);
    assert_non_null(assistant);
    json_t *request = json_pack("{s:s,s:[{s:s,s:[{s:s,s:s}]},O]}", "model", "m", "messages",
                                "role", "user", "content", "type", "text", "text", "go", assistant);
    char msg[256];
    json_t *body = anthropic_request_body(request, 0, msg, sizeof msg);
    assert_non_null(body);
    json_t *sent = json_object_get(json_array_get(json_object_get(body, "messages"), 1), "content");

    /* The server streams back the same content: thinking (never resent, so
     * taken from the original), then the sent text and tool_use blocks. */
    json_t *events = json_array();
    json_array_append_new(events, json_pack("{s:s,s:{s:{s:i,s:i}}}", "type", "message_start",
                                            "message", "usage", "input_tokens", 40,
                                            "output_tokens", 1));
    json_array_append_new(events, json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_start",
                                            "index", 0, "content_block", "type", "thinking",
                                            "thinking", ""));
    stream_pieces(events, 0, "thinking_delta", "thinking",
                  json_string_value(json_object_get(json_array_get(json_object_get(assistant, "content"), 0), "text")));
    json_array_append_new(events, json_pack("{s:s,s:i}", "type", "content_block_stop", "index", 0));
    size_t i;
    json_t *b;
    json_array_foreach(sent, i, b) {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (strcmp(type, "text") == 0) {
            json_array_append_new(events, json_pack("{s:s,s:i,s:{s:s,s:s}}", "type",
                                                    "content_block_start", "index", (int)i + 1,
                                                    "content_block", "type", "text", "text", ""));
            stream_pieces(events, i + 1, "text_delta", "text",
                          json_string_value(json_object_get(b, "text")));
        } else {
            json_array_append_new(events, json_pack("{s:s,s:i,s:{s:s,s:O,s:O,s:{}}}", "type",
                                                    "content_block_start", "index", (int)i + 1,
                                                    "content_block", "type", "tool_use", "id",
                                                    json_object_get(b, "id"), "name",
                                                    json_object_get(b, "name"), "input"));
            char *args = json_dumps(json_object_get(b, "input"), JSON_COMPACT);
            stream_pieces(events, i + 1, "input_json_delta", "partial_json", args);
            free(args);
        }
        json_array_append_new(events, json_pack("{s:s,s:i}", "type", "content_block_stop",
                                                "index", (int)i + 1));
    }
    json_array_append_new(events, json_pack("{s:s,s:{s:s},s:{s:i}}", "type", "message_delta",
                                            "delta", "stop_reason", "tool_use", "usage",
                                            "output_tokens", 25));
    json_array_append_new(events, json_pack("{s:s}", "type", "message_stop"));

    json_t *chunks = json_array();
    anthropic_decoder *d = anthropic_decoder_new("llm", pt_collect, chunks);
    json_t *ev;
    json_array_foreach(events, i, ev) {
        char *text = json_dumps(ev, JSON_COMPACT);
        assert_int_equal(anthropic_decoder_event(d, "", text, strlen(text)), 0);
        free(text);
    }
    anthropic_decoder_end(d, NULL, false);
    anthropic_decoder_free(d);

    json_t *usage, *message = pt_assemble(chunks, &usage);
    pt_assert_json_equal(message, assistant);
    json_t *want_usage = json_pack("{s:i,s:i}", "input_tokens", 40, "output_tokens", 25);
    pt_assert_json_equal(usage, want_usage);
    assert_string_equal(json_string_value(json_object_get(pt_finish_reason(chunks), "kind")),
                        "tool-calls");
    json_decref(want_usage);
    json_decref(usage);
    json_decref(message);
    json_decref(chunks);
    json_decref(events);
    json_decref(body);
    json_decref(request);
    json_decref(assistant);
}

/* ------------------------------------------------------------------------ */
/* The plugin through a fake host (real HTTP, loopback mock LLM)            */
/* ------------------------------------------------------------------------ */

#define CONFIG                                                                                     \
    "{\"base_url\":\"@BASE@\",\"api_key\":\"" PT_KEY "\",\"headers\":{\"X-Team\":\"t1\"},"         \
    "\"cache\":false,\"models\":{\"test-model\":{\"context_window\":1000,\"max_output\":100}}}"

static void plugin_streams_from_mock_server(void **state) {
    (void)state;
    int rc;
    mock_llm *m = pt_run_plugin(
        "{\"requests\":[{\"text\":\"Hello there\",\"reasoning\":\"hm\",\"chunk_size\":4,"
        "\"usage\":{\"input_tokens\":7,\"output_tokens\":3}}]}",
        CONFIG, NULL, &rc);
    assert_int_equal(rc, WEIR_OK);
    char *path = mock_llm_request_path(m, 0), *auth = mock_llm_request_header(m, 0, "x-api-key");
    char *version = mock_llm_request_header(m, 0, "anthropic-version");
    assert_string_equal(version, "2023-06-01");
    free(version);
    char *team = mock_llm_request_header(m, 0, "x-team"), *body = mock_llm_request_body(m, 0);
    assert_string_equal(path, "/v1/messages");
    assert_string_equal(auth, PT_KEY);
    assert_string_equal(team, "t1");
    json_t *sent = json_loads(body, 0, NULL),
           *want = pt_load_data("anthropic/request.expected.json");
    pt_assert_json_equal(sent, want);
    json_t *usage, *message = pt_assemble(pt_host.chunks, &usage);
    json_t *want_msg = json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}]}", "role", "assistant", "content",
                                 "type", "reasoning", "text", "hm", "type", "text", "text",
                                 "Hello there");
    pt_assert_json_equal(message, want_msg);
    assert_int_equal(json_integer_value(json_object_get(usage, "input_tokens")), 7);
    assert_string_equal(
        json_string_value(json_object_get(pt_finish_reason(pt_host.chunks), "kind")), "stop");
    json_t *info = pt_host.provider->model_info(pt_host.provider_self, "test-model");
    json_t *want_info = json_pack("{s:i,s:i}", "context_window", 1000, "max_output", 100);
    pt_assert_json_equal(info, want_info);
    assert_null(pt_host.provider->model_info(pt_host.provider_self, "other"));
    pt_assert_no_secret();
    json_decref(want_info);
    json_decref(info);
    json_decref(want_msg);
    json_decref(message);
    json_decref(usage);
    json_decref(want);
    json_decref(sent);
    free(path);
    free(auth);
    free(team);
    free(body);
    mock_llm_stop(m);
}

static void plugin_sends_no_key_header_for_empty_key(void **state) {
    (void)state;
    int rc;
    mock_llm *m = pt_run_plugin("{\"requests\":[{\"text\":\"ok\"}]}",
                                "{\"base_url\":\"@BASE@/\",\"api_key\":\"\"}", NULL, &rc);
    char *auth = mock_llm_request_header(m, 0, "x-api-key");
    char *path = mock_llm_request_path(m, 0);
    assert_null(auth);
    assert_string_equal(path, "/v1/messages");
    free(path);
    mock_llm_stop(m);
}

static void plugin_maps_every_fault(void **state) {
    (void)state;
    pt_check_fault_mapping("@BASE@", "OVERLOADED");
}

static void plugin_names_a_body_that_is_not_an_event_stream(void **state) {
    (void)state;
    pt_check_not_an_event_stream("@BASE@");
}

static void plugin_names_json_sent_instead_of_a_stream(void **state) {
    (void)state;
    pt_check_json_instead_of_a_stream("@BASE@");
}

static void plugin_scrubs_echoed_secrets(void **state) {
    (void)state;
    pt_check_echoed_secrets_are_scrubbed("@BASE@", "\"X-API-KEY\":\"" PT_KEY "\"");
}

static void plugin_cancel_mid_stream_is_aborted(void **state) {
    (void)state;
    pt_check_cancel_mid_stream(CONFIG);
}

static void plugin_total_timeout_ends_a_keepalive_stream(void **state) {
    (void)state;
    pt_check_total_timeout("@BASE@");
}

static void plugin_rejects_bad_config_and_call_config(void **state) {
    (void)state;
    pt_check_bad_config_and_call_config(
        "call config: \"temperature\" must be a number from 0 to 1");
}

static void plugin_config_schema_accepts_the_documented_shape(void **state) {
    (void)state;
    pt_check_config_schema("provider-anthropic");
}

/* ------------------------------------------------------------------------ */
/* model_info: the model table and the config                               */
/* ------------------------------------------------------------------------ */

static void model_info_knows_the_table_and_the_config_beats_it(void **state) {
    (void)state;
    /* the mock would answer a probe: provider-anthropic never asks */
    mock_llm *m = pt_start_plugin(
        "{\"models\":[{\"id\":\"claude-3-7-sonnet-latest\",\"max_model_len\":5}],"
        "\"props\":{\"n_ctx\":5}}",
        "{\"base_url\":\"@BASE@\",\"api_key\":\"" PT_KEY "\",\"models\":{"
        "\"claude-sonnet-4-5\":{\"context_window\":1000},\"claude-opus-4-1\":{\"max_output\":"
        "2000}}}");
    pt_assert_model_info("claude-sonnet-4-5-20250929", 200000, 64000);
    pt_assert_model_info("claude-3-5-sonnet-20241022", 200000, 8192);
    pt_assert_model_info("claude-3-7-sonnet-20250219", 200000, 64000);
    pt_assert_model_info("claude-3-7-sonnet-latest", 200000, 64000);
    pt_assert_model_info("claude-opus-4-1-20250805", 200000, 32000);
    pt_assert_model_info("claude-sonnet-4-20250514", 200000, 64000);
    pt_assert_model_info("claude-3-5-haiku-20241022", 200000, 8192);
    pt_assert_model_info("claude-haiku-4-5-20251001", 200000, 64000);
    pt_assert_model_info("claude-sonnet-4-9", 0, 0); /* a near miss is unknown */
    /* the config, each field on its own (the table's max_output cut to the window) */
    pt_assert_model_info("claude-sonnet-4-5", 1000, 1000);
    pt_assert_model_info("claude-opus-4-1", 200000, 2000);
    assert_int_equal(mock_llm_requests(m), 0);
    mock_llm_stop(m);
}

static void default_max_tokens_is_the_models_max_output(void **state) {
    (void)state;
    static const struct {
        const char *model;
        long max_tokens;
    } cases[] = {
        {"claude-3-5-haiku-latest", 8192}, /* the table */
        {"claude-opus-4-1-20250805", 32000},
        {"test-model", 100},               /* the config */
        {"m", 4096},                       /* unknown: 4096 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_plugin_setup(NULL);
        char request[256];
        snprintf(request, sizeof request,
                 "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":"
                 "[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
                 cases[i].model);
        int rc;
        mock_llm *m = pt_run_plugin("{\"requests\":[{\"text\":\"ok\"}]}", CONFIG, request, &rc);
        assert_int_equal(rc, WEIR_OK);
        assert_int_equal(mock_llm_requests(m), 1);
        char *body = mock_llm_request_body(m, 0);
        json_t *sent = json_loads(body, 0, NULL);
        long got = (long)json_integer_value(json_object_get(sent, "max_tokens"));
        if (got != cases[i].max_tokens)
            fail_msg("%s: max_tokens %ld, want %ld", cases[i].model, got, cases[i].max_tokens);
        json_decref(sent);
        free(body);
        mock_llm_stop(m);
        pt_plugin_teardown(NULL);
    }
}

static void probe_keys_are_not_anthropics(void **state) {
    (void)state;
    char msg[256];
    json_t *config = json_loads("{\"probe_windows\":true}", 0, NULL);
    assert_int_equal(
        weir__schema_validate_text(pt_plugin_desc->config_schema, config, msg, sizeof msg), -1);
    json_decref(config);
}

/* ------------------------------------------------------------------------ */
/* Options and the thinking rules                                           */
/* ------------------------------------------------------------------------ */

/* The body of a one-message request to `model` with `members` ("" or JSON
 * object members); NULL with msg set. */
static json_t *body_for(const char *model, const char *members, char *msg, size_t size) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"model\":\"%s\"%s%s,\"messages\":[{\"role\":\"user\","
             "\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
             model, members[0] ? "," : "", members);
    json_t *request = json_loads(text, 0, NULL);
    assert_non_null(request);
    json_t *body = anthropic_request_body(request, 1000, msg, size);
    json_decref(request);
    return body;
}

/* Options go last into the body; a null drops a member weir would write. */
static void request_options_merge_last(void **state) {
    (void)state;
    char msg[512];
    json_t *body = body_for("claude-opus-4-7",
                            "\"temperature\":0.5,\"options\":{\"thinking\":{\"type\":"
                            "\"adaptive\"},\"output_config\":{\"effort\":\"low\"},"
                            "\"temperature\":null}",
                            msg, sizeof msg);
    assert_non_null(body);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "thinking"), "type")),
        "adaptive");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "output_config"), "effort")),
        "low");
    assert_null(json_object_get(body, "temperature"));
    assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 1000);
    json_decref(body);
}

static void request_options_refuse_owned_keys(void **state) {
    (void)state;
    static const char *const owned[] = {"model", "messages", "system", "tools",
                                        "tool_choice", "stream", "max_tokens"};
    char msg[512], members[128], want[96];
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) {
        snprintf(members, sizeof members, "\"options\":{\"%s\":1}", owned[i]);
        assert_null(body_for("claude-sonnet-4-5", members, msg, sizeof msg));
        snprintf(want, sizeof want, "options.%s: \"%s\" is written by the provider", owned[i],
                 owned[i]);
        if (!strstr(msg, want))
            fail_msg("%s: %s", owned[i], msg);
    }
}

/* Adaptive-only models are never sent thinking.type "enabled" (nor
 * "disabled" where thinking is always on): an error naming model and rule. */
static void request_refuses_a_thinking_mode_the_model_refuses(void **state) {
    (void)state;
    static const struct {
        const char *model, *type, *want; /* want NULL: taken */
    } cases[] = {
        {"claude-fable-5", "enabled", "model \"claude-fable-5\" thinks on every request"},
        {"claude-fable-5", "disabled", "model \"claude-fable-5\" thinks on every request"},
        {"claude-mythos-5", "disabled", "\"disabled\" are refused with a 400"},
        {"claude-fable-5", "adaptive", NULL},
        {"claude-opus-4-7", "enabled", "model \"claude-opus-4-7\" takes only adaptive thinking"},
        {"claude-opus-4-8", "enabled", "takes only adaptive thinking"},
        {"claude-sonnet-5", "enabled", "takes only adaptive thinking"},
        {"claude-opus-4-7", "disabled", NULL},
        {"claude-sonnet-4-6", "enabled", NULL},
        {"claude-sonnet-4-5", "adaptive", "takes only extended thinking"},
        {"claude-sonnet-4-5", "enabled", NULL},
        {"claude-3-5-haiku-latest", "enabled", "has no thinking"},
        {"some-proxy-model", "enabled", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[512] = "", members[128];
        snprintf(members, sizeof members,
                 "\"max_tokens\":2048,"
                 "\"options\":{\"thinking\":{\"type\":\"%s\",\"budget_tokens\":1024}}",
                 cases[i].type);
        json_t *body = body_for(cases[i].model, members, msg, sizeof msg);
        if (cases[i].want ? body || !strstr(msg, cases[i].want) || !strstr(msg, "options.thinking")
                          : !body)
            fail_msg("%s %s: %s", cases[i].model, cases[i].type, msg);
        json_decref(body);
    }
}


/* ------------------------------------------------------------------------ */
/* Issue #32: continuations, prompt caching, mid-conversation system         */
/* ------------------------------------------------------------------------ */

static int collect(void *user_data, json_t *chunk) {
    json_array_append_new(user_data, chunk);
    return 0;
}

/* Feed `events` (SSE data lines, NULL-terminated) and return the chunks. */
static json_t *decode_events(const char *const *events) {
    json_t *chunks = json_array();
    anthropic_decoder *d = anthropic_decoder_new("anth", collect, chunks);
    assert_non_null(d);
    assert_int_equal(anthropic_decoder_set_model(d, "claude-sonnet-4-5"), 0);
    for (size_t i = 0; events[i]; i++)
        assert_int_equal(anthropic_decoder_event(d, NULL, events[i], strlen(events[i])), 0);
    assert_int_equal(anthropic_decoder_end(d, NULL, false), 0);
    anthropic_decoder_free(d);
    return chunks;
}

static const json_t *chunk_of(const json_t *chunks, const char *type, size_t nth) {
    size_t i;
    json_t *c;
    json_array_foreach(chunks, i, c) {
        if (!strcmp(json_string_value(json_object_get(c, "type")), type) && nth-- == 0)
            return c;
    }
    return NULL;
}

/* signature_delta events accumulate; the continuation comes at the block's
 * stop, before its block-end; an empty thinking block is still a block;
 * redacted_thinking is a reasoning block with its data. */
static void decode_signature_and_redacted_thinking(void **state) {
    (void)state;
    static const char *const events[] = {
        "{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,"
        "\"cache_creation_input_tokens\":30,\"cache_read_input_tokens\":100,"
        "\"cache_creation\":{\"ephemeral_5m_input_tokens\":10,\"ephemeral_1h_input_tokens\":20}}}}",
        "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\","
        "\"thinking\":\"\",\"signature\":\"\"}}",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\","
        "\"signature\":\"Sig/\"}}",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\","
        "\"signature\":\"part+2==\"}}",
        "{\"type\":\"content_block_stop\",\"index\":0}",
        "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":"
        "\"redacted_thinking\",\"data\":\"EmwKAh\\u00e9\"}}",
        "{\"type\":\"content_block_stop\",\"index\":1}",
        "{\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\","
        "\"id\":\"t1\",\"name\":\"f\",\"input\":{}}}",
        "{\"type\":\"content_block_stop\",\"index\":2}",
        "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},"
        "\"usage\":{\"output_tokens\":3}}",
        "{\"type\":\"message_stop\"}",
        NULL,
    };
    json_t *chunks = decode_events(events);
    json_t *want = json_loads(
        "[{\"type\":\"block-start\",\"index\":0,\"block_type\":\"reasoning\"},"
        "{\"type\":\"continuation\",\"index\":0,\"continuation\":{\"provider\":\"anth\","
        "\"model\":\"claude-sonnet-4-5\",\"data\":{\"signature\":\"Sig/part+2==\"}}},"
        "{\"type\":\"block-end\",\"index\":0},"
        "{\"type\":\"block-start\",\"index\":1,\"block_type\":\"reasoning\"},"
        "{\"type\":\"continuation\",\"index\":1,\"continuation\":{\"provider\":\"anth\","
        "\"model\":\"claude-sonnet-4-5\",\"data\":{\"redacted_data\":\"EmwKAh\\u00e9\"}}},"
        "{\"type\":\"block-end\",\"index\":1}]",
        0, NULL);
    for (size_t i = 0; i < json_array_size(want); i++)
        pt_assert_json_equal(json_array_get(chunks, i), json_array_get(want, i));
    const json_t *usage = json_object_get(chunk_of(chunks, "usage", 0), "usage");
    json_t *want_usage = json_loads(
        "{\"input_tokens\":5,\"output_tokens\":3,\"cache_read_tokens\":100,"
        "\"cache_write_tokens\":30,\"cache_write_5m_tokens\":10,\"cache_write_1h_tokens\":20}",
        0, NULL);
    pt_assert_json_equal(usage, want_usage);
    json_decref(want_usage);
    json_decref(want);
    json_decref(chunks);
}

/* Usage with only the 1h split, and a signature_delta on a text block
 * (ignored: a signature binds a thinking block only). */
static void decode_usage_per_ttl(void **state) {
    (void)state;
    static const char *const events[] = {
        "{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1,"
        "\"cache_creation_input_tokens\":7,\"cache_creation\":{\"ephemeral_1h_input_tokens\":7}}}}",
        "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
        "\"text\":\"hi\"}}",
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\","
        "\"signature\":\"x\"}}",
        "{\"type\":\"content_block_stop\",\"index\":0}",
        "{\"type\":\"message_stop\"}",
        NULL,
    };
    json_t *chunks = decode_events(events);
    const json_t *usage = json_object_get(chunk_of(chunks, "usage", 0), "usage");
    assert_int_equal(json_integer_value(json_object_get(usage, "cache_write_1h_tokens")), 7);
    assert_null(json_object_get(usage, "cache_write_5m_tokens"));
    assert_null(chunk_of(chunks, "continuation", 0));
    json_decref(chunks);
    /* a cache_creation that is not an object is malformed */
    static const char *const bad[] = {
        "{\"type\":\"message_start\",\"message\":{\"usage\":{\"cache_creation\":3}}}", NULL};
    json_t *c2 = json_array();
    anthropic_decoder *d = anthropic_decoder_new("anth", collect, c2);
    assert_int_equal(anthropic_decoder_event(d, NULL, bad[0], strlen(bad[0])), -1);
    anthropic_decoder_free(d);
    assert_non_null(chunk_of(c2, "finish", 0));
    json_decref(c2);
}

static char *build(const char *request_json, pc_prompt_cache cache, size_t *skipped) {
    json_t *request = json_loads(request_json, 0, NULL);
    assert_non_null(request);
    pc_extra extra = {NULL, false, cache, 0};
    char msg[512];
    char *text = anthropic_request_text_ex(request, &extra, 0, NULL, msg, sizeof msg);
    if (!text)
        fail_msg("%s", msg);
    if (skipped)
        *skipped = extra.skipped_continuations;
    json_decref(request);
    return text;
}

static size_t count_of(const char *text, const char *what) {
    size_t n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* Reasoning blocks with a continuation go back as thinking /
 * redacted_thinking, byte-exact, in their place; without one they are not
 * sent; data without the key is skipped and counted. */
static void request_sends_thinking_back_in_place(void **state) {
    (void)state;
    const char *req =
        "{\"model\":\"claude-sonnet-4-5\",\"messages\":["
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"go\"}]},"
        "{\"role\":\"assistant\",\"content\":["
        "{\"type\":\"reasoning\",\"text\":\"I think \\\"so\\\"\\n\\u00e9\",\"continuation\":"
        "{\"provider\":\"a\",\"model\":\"claude-sonnet-4-5\",\"data\":{\"signature\":\"S+/=\"}}},"
        "{\"type\":\"reasoning\",\"text\":\"\",\"continuation\":"
        "{\"provider\":\"a\",\"model\":\"claude-sonnet-4-5\",\"data\":{\"redacted_data\":\"R1\"}}},"
        "{\"type\":\"reasoning\",\"text\":\"plain\"},"
        "{\"type\":\"reasoning\",\"text\":\"odd\",\"continuation\":"
        "{\"provider\":\"a\",\"model\":\"claude-sonnet-4-5\",\"data\":{\"other\":\"x\"}}},"
        "{\"type\":\"tool_call\",\"id\":\"t1\",\"name\":\"f\",\"arguments\":\"{}\"}]},"
        "{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"call_id\":\"t1\","
        "\"content\":\"ok\"}]}]}";
    size_t skipped = 0;
    char *text = build(req, PC_PROMPT_CACHE_OFF, &skipped);
    assert_non_null(strstr(
        text, "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
              "\"I think \\\"so\\\"\\n\xc3\xa9\",\"signature\":\"S+/=\"},"
              "{\"type\":\"redacted_thinking\",\"data\":\"R1\"},"
              "{\"type\":\"tool_use\",\"id\":\"t1\""));
    assert_null(strstr(text, "plain"));
    assert_null(strstr(text, "odd"));
    assert_int_equal(skipped, 1);
    assert_int_equal(count_of(text, "cache_control"), 0);
    free(text);
    /* caching on: no breakpoint lands on a thinking block */
    text = build(req, PC_PROMPT_CACHE_5M, NULL);
    assert_null(strstr(text, "\"signature\":\"S+/=\",\"cache_control\""));
    assert_int_equal(count_of(text, "cache_control"), 1);
    free(text);
}

/* A tool-loop request of `steps` steps, each with `calls` tool calls, and a
 * system prompt when `system`; `tools` declares a tool. */
static char *loop_request(const char *model, int steps, int calls, bool system, bool tools) {
    json_t *msgs = json_array();
    if (system)
        json_array_append_new(msgs, json_pack("{s:s,s:[{s:s,s:s}]}", "role", "system", "content",
                                              "type", "text", "text", "be brief"));
    json_array_append_new(msgs, json_pack("{s:s,s:[{s:s,s:s}]}", "role", "user", "content", "type",
                                          "text", "text", "start"));
    for (int s = 0; s < steps; s++) {
        json_t *a = json_array(), *r = json_array();
        for (int c = 0; c < calls; c++) {
            char id[32];
            snprintf(id, sizeof id, "c%d_%d", s, c);
            json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s}", "type", "tool_call", "id", id,
                                               "name", "f", "arguments", "{}"));
            json_array_append_new(r, json_pack("{s:s,s:s,s:s}", "type", "tool_result", "call_id",
                                               id, "content", "ok"));
        }
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "assistant", "content", a));
        json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "tool", "content", r));
    }
    json_t *req = json_pack("{s:s,s:o}", "model", model, "messages", msgs);
    if (tools)
        json_object_set_new(req, "tools",
                            json_pack("[{s:s,s:s,s:{s:s}}]", "name", "f", "description", "d",
                                      "parameters", "type", "object"));
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return text;
}

/* The blocks of the body's messages with a cache_control, by index. */
static json_t *marked_blocks(const char *text) {
    json_t *body = json_loads(text, 0, NULL), *out = json_array();
    assert_non_null(body);
    size_t i, j, k = 0;
    json_t *m, *b;
    json_array_foreach(json_object_get(body, "messages"), i, m) {
        json_array_foreach(json_object_get(m, "content"), j, b) {
            if (json_object_get(b, "cache_control"))
                json_array_append_new(out, json_integer((json_int_t)k));
            k++;
        }
    }
    json_object_set_new(out, "x", json_null()); /* no-op on arrays */
    json_array_append_new(out, json_integer((json_int_t)k)); /* the total last */
    json_decref(body);
    return out;
}

/* Breakpoints: the system one, the rolling one on the last block, and
 * intermediate ones when a step adds more than 18 blocks; never more than
 * 4, and the body with a memo equals the body from nothing. */
static void request_places_cache_breakpoints(void **state) {
    (void)state;
    /* a small step: system + rolling */
    char *req = loop_request("claude-sonnet-4-5", 3, 1, true, true);
    char *text = build(req, PC_PROMPT_CACHE_5M, NULL);
    assert_int_equal(count_of(text, "cache_control"), 2);
    assert_non_null(strstr(text, "\"system\":[{\"type\":\"text\",\"text\":\"be brief\","
                                 "\"cache_control\":{\"type\":\"ephemeral\"}}]"));
    json_t *marks = marked_blocks(text);
    size_t total = (size_t)json_integer_value(json_array_get(marks, json_array_size(marks) - 1));
    assert_int_equal(json_array_size(marks), 2);
    assert_int_equal(json_integer_value(json_array_get(marks, 0)), (json_int_t)total - 1);
    json_decref(marks);
    free(text);
    free(req);
    /* a step adding 30 blocks (15 calls + 15 results): one intermediate
     * breakpoint 18 blocks below the rolling one */
    req = loop_request("claude-sonnet-4-5", 2, 15, true, true);
    text = build(req, PC_PROMPT_CACHE_5M, NULL);
    marks = marked_blocks(text);
    total = (size_t)json_integer_value(json_array_get(marks, json_array_size(marks) - 1));
    assert_int_equal(count_of(text, "cache_control"), 3);
    assert_int_equal(json_array_size(marks), 3);
    assert_int_equal(json_integer_value(json_array_get(marks, 0)), (json_int_t)total - 1 - 18);
    assert_int_equal(json_integer_value(json_array_get(marks, 1)), (json_int_t)total - 1);
    json_decref(marks);
    free(text);
    free(req);
    /* a step adding 120 blocks: 4 in all, the lowest three 18 apart */
    req = loop_request("claude-sonnet-4-5", 1, 60, true, true);
    text = build(req, PC_PROMPT_CACHE_5M, NULL);
    assert_int_equal(count_of(text, "cache_control"), 4);
    free(text);
    /* no system: the stable breakpoint goes on the last tool */
    free(req);
    req = loop_request("claude-sonnet-4-5", 1, 1, false, true);
    text = build(req, PC_PROMPT_CACHE_1H, NULL);
    assert_non_null(strstr(text, "\"input_schema\":{\"type\":\"object\"},\"cache_control\":"
                                 "{\"type\":\"ephemeral\",\"ttl\":\"1h\"}}]"));
    assert_int_equal(count_of(text, "\"ttl\":\"1h\""), 2);
    free(text);
    /* caching off: none */
    text = build(req, PC_PROMPT_CACHE_OFF, NULL);
    assert_int_equal(count_of(text, "cache_control"), 0);
    free(text);
    free(req);
}

/* The memo keeps no breakpoint of an earlier request: a growing tool loop
 * (with big steps) through one memo gives the body built from nothing. */
static void request_breakpoints_keep_the_memo_exact(void **state) {
    (void)state;
    const void *agent = "agent", *owner = "owner";
    pc_cache *cache = pt_memo_cache(&agent, &owner);
    for (int steps = 0; steps < 8; steps++) {
        char *req = loop_request("claude-sonnet-4-5", steps, steps % 3 == 0 ? 12 : 2, true, true);
        json_t *request = json_loads(req, 0, NULL);
        /* the steps must share message objects: rebuild from the previous
         * request is not possible here, so compare each body with and
         * without the memo of an identical history */
        pc_extra extra = {NULL, false, PC_PROMPT_CACHE_5M, 0};
        char msg[256];
        char *plain = anthropic_request_text_ex(request, &extra, 0, NULL, msg, sizeof msg);
        for (int again = 0; again < 2; again++) {
            pc_memo *memo = pc_cache_memo_take(cache);
            assert_int_equal(
                anthropic_request_build_ex(request, &extra, 0, cache, memo, msg, sizeof msg), 0);
            assert_string_equal(memo->text.p, plain);
            assert_true(count_of(plain, "cache_control") <= 4);
            pc_cache_memo_give(cache, memo);
        }
        /* grow the very same objects: append a step to this request */
        json_t *msgs = json_object_get(request, "messages");
        for (int k = 0; k < 3; k++) {
            json_array_append_new(
                msgs, json_pack("{s:s,s:[{s:s,s:s,s:s,s:s}]}", "role", "assistant", "content",
                                "type", "tool_call", "id", "z", "name", "f", "arguments", "{}"));
            json_t *r = json_array();
            for (int c = 0; c < (k == 1 ? 25 : 1); c++)
                json_array_append_new(r, json_pack("{s:s,s:s,s:s}", "type", "tool_result",
                                                   "call_id", "z", "content", "ok"));
            json_array_append_new(msgs, json_pack("{s:s,s:o}", "role", "tool", "content", r));
            char *fresh = anthropic_request_text_ex(request, &extra, 0, NULL, msg, sizeof msg);
            pc_memo *memo = pc_cache_memo_take(cache);
            assert_int_equal(
                anthropic_request_build_ex(request, &extra, 0, cache, memo, msg, sizeof msg), 0);
            assert_string_equal(memo->text.p, fresh);
            assert_true(count_of(fresh, "cache_control") <= 4);
            pc_cache_memo_give(cache, memo);
            free(fresh);
        }
        free(plain);
        json_decref(request);
        free(req);
    }
    pc_cache_release_agent(cache, &agent);
    pc_cache_free(cache);
}

/* A later system message: a {role:system} message after a user turn on a
 * model that takes one, else a <system-update> note in the user turn. */
static void request_maps_mid_conversation_system(void **state) {
    (void)state;
#define MID_FMT \
        "{\"model\":\"%s\",\"messages\":[" \
        "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"first\"}]}," \
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}," \
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_call\",\"id\":\"t\",\"name\":\"f\"," \
        "\"arguments\":\"{}\"}]}," \
        "{\"role\":\"tool\",\"content\":[{\"type\":\"tool_result\",\"call_id\":\"t\"," \
        "\"content\":\"ok\"}]}," \
        "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"new \\\"rules\\\"\"}]}]}"
    char req[1024];
    snprintf(req, sizeof req, MID_FMT, "claude-opus-4-8");
    char *text = build(req, PC_PROMPT_CACHE_OFF, NULL);
    assert_non_null(strstr(text, "\"system\":\"first\""));
    assert_non_null(strstr(text, "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":"
                                 "\"new \\\"rules\\\"\"}]}]"));
    free(text);
    snprintf(req, sizeof req, MID_FMT, "claude-sonnet-4-5");
    text = build(req, PC_PROMPT_CACHE_OFF, NULL);
    assert_non_null(strstr(text, "\"system\":\"first\""));
    assert_non_null(strstr(text, "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
                                 "\"tool_use_id\":\"t\",\"content\":[{\"type\":\"text\",\"text\":"
                                 "\"ok\"}]},{\"type\":\"text\",\"text\":\"<system-update>\\nnew "
                                 "\\\"rules\\\"\\n</system-update>\"}]}]"));
    assert_null(strstr(text, "\"role\":\"system\""));
    free(text);
    /* with caching: the system block and the rolling one (on the note) */
    text = build(req, PC_PROMPT_CACHE_5M, NULL);
    assert_non_null(strstr(text, "</system-update>\",\"cache_control\":{\"type\":\"ephemeral\"}}"));
    assert_int_equal(count_of(text, "cache_control"), 2);
    free(text);
}

/* Thinking: temperature is dropped from the call config (reported), an
 * option other than 1 refused; budget_tokens below max_tokens. */
static void request_thinking_rules(void **state) {
    (void)state;
    json_t *request = json_loads(
        "{\"model\":\"claude-sonnet-4-5\",\"temperature\":0.2,\"max_tokens\":4096,"
        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
        0, NULL);
    json_t *opts = json_loads("{\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048}}", 0,
                              NULL);
    pc_extra extra = {opts, false, PC_PROMPT_CACHE_OFF, 0};
    char msg[512];
    char *text = anthropic_request_text_ex(request, &extra, 0, NULL, msg, sizeof msg);
    assert_non_null(text);
    assert_true(extra.dropped_temperature);
    assert_null(strstr(text, "temperature"));
    free(text);
    json_object_set_new(opts, "temperature", json_real(0.5));
    assert_null(anthropic_request_text_ex(request, &extra, 0, NULL, msg, sizeof msg));
    assert_non_null(strstr(msg, "options.temperature: model \"claude-sonnet-4-5\""));
    json_object_set_new(opts, "temperature", json_integer(1));
    text = anthropic_request_text_ex(request, &extra, 0, NULL, msg, sizeof msg);
    assert_non_null(text);
    free(text);
    json_object_del(opts, "temperature");
    json_object_set_new(request, "max_tokens", json_integer(2048));
    assert_null(anthropic_request_text_ex(request, &extra, 0, NULL, msg, sizeof msg));
    assert_non_null(strstr(msg, "budget_tokens: 2048 must be less than max_tokens 2048"));
    /* without thinking the temperature goes */
    json_object_set_new(request, "max_tokens", json_integer(100));
    pc_extra plain = {NULL, false, PC_PROMPT_CACHE_OFF, 0};
    text = anthropic_request_text_ex(request, &plain, 0, NULL, msg, sizeof msg);
    assert_non_null(strstr(text, "\"temperature\":0.2"));
    assert_false(plain.dropped_temperature);
    free(text);
    /* cache config values */
    pc_prompt_cache c;
    json_t *v = json_loads("{\"ttl\":\"1h\"}", 0, NULL);
    assert_int_equal(anthropic_cache_parse(v, "config.cache", &c, msg, sizeof msg), 0);
    assert_int_equal(c, PC_PROMPT_CACHE_1H);
    json_decref(v);
    assert_int_equal(anthropic_cache_parse(json_false(), "config.cache", &c, msg, sizeof msg), 0);
    assert_int_equal(c, PC_PROMPT_CACHE_OFF);
    v = json_loads("{\"ttl\":\"2h\"}", 0, NULL);
    assert_int_equal(anthropic_cache_parse(v, "config.models.m.cache", &c, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "config.models.m.cache: expected false"));
    json_decref(v);
    json_decref(opts);
    json_decref(request);
}

/* Load: a thinking mode a configured model refuses, from the model's
 * options or the row's, is an error naming the model and the rule. */
static void plugin_refuses_thinking_the_model_refuses_at_load(void **state) {
    (void)state;
    static const struct {
        const char *config, *want;
    } cases[] = {
        {"{\"models\":{\"claude-fable-5\":{\"options\":{\"thinking\":{\"type\":\"enabled\","
         "\"budget_tokens\":2000}}}}}",
         "config.models.claude-fable-5.options.thinking: model \"claude-fable-5\" thinks on"},
        {"{\"options\":{\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2000}},"
         "\"models\":{\"claude-sonnet-4-5\":{},\"claude-opus-4-7\":{}}}",
         "config.options.thinking: model \"claude-opus-4-7\" takes only adaptive thinking"},
        {"{\"options\":{\"system\":\"x\"}}", "config.options.system: \"system\" is written by"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_plugin_setup(NULL);
        json_t *config = json_loads(cases[i].config, 0, NULL);
        weir_error err;
        memset(&err, 0, sizeof err);
        assert_int_not_equal(pt_plugin_desc->init(NULL, &pt_fake_api, config, &err), WEIR_OK);
        if (!strstr(err.text, cases[i].want))
            fail_msg("%s: %s", cases[i].config, err.text);
        json_decref(config);
        pt_plugin_teardown(NULL);
    }
}

/* models.<id>.headers (a beta header) go with that model's requests only;
 * options from the row, the model and the call config are merged. */
static void plugin_sends_model_headers_and_options(void **state) {
    (void)state;
    int rc;
    mock_llm *m = pt_run_plugin(
        "{\"loop\":true,\"requests\":[{\"text\":\"ok\"}]}",
        "{\"base_url\":\"@BASE@\",\"api_key\":\"" PT_KEY "\",\"headers\":{\"X-Team\":\"t1\"},"
        "\"options\":{\"metadata\":{\"user_id\":\"u1\"}},"
        "\"models\":{\"claude-opus-4-7\":{\"options\":{\"thinking\":{\"type\":\"adaptive\"}},"
        "\"headers\":{\"anthropic-beta\":\"context-1m-2025-08-07\"}}}}",
        "{\"model\":\"claude-opus-4-7\",\"options\":{\"output_config\":{\"effort\":\"high\"}},"
        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
        &rc);
    assert_int_equal(rc, WEIR_OK);
    char *body = mock_llm_request_body(m, 0), *beta = mock_llm_request_header(m, 0, "anthropic-beta");
    char *team = mock_llm_request_header(m, 0, "x-team"), *key = mock_llm_request_header(m, 0, "x-api-key");
    json_t *sent = json_loads(body, 0, NULL);
    assert_string_equal(beta, "context-1m-2025-08-07");
    assert_string_equal(team, "t1");
    assert_string_equal(key, PT_KEY);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(sent, "thinking"), "type")), "adaptive");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(sent, "output_config"), "effort")),
        "high");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(sent, "metadata"), "user_id")), "u1");
    json_decref(sent);
    free(body);
    free(beta);
    free(team);
    free(key);
    /* another model of the row: no beta header, no model options */
    json_t *other = json_loads("{\"model\":\"claude-sonnet-4-5\",\"messages\":[{\"role\":"
                               "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}]}",
                               0, NULL);
    assert_int_equal(pt_host.provider->stream(pt_host.provider_self, NULL, other,
                                              (weir_stream *)&pt_host),
                     WEIR_OK);
    beta = mock_llm_request_header(m, 1, "anthropic-beta");
    body = mock_llm_request_body(m, 1);
    assert_null(beta);
    sent = json_loads(body, 0, NULL);
    assert_null(json_object_get(sent, "thinking"));
    assert_non_null(json_object_get(sent, "metadata"));
    json_decref(sent);
    free(body);
    json_decref(other);
    /* a hook's thinking the model refuses: INVALID_REQUEST naming it, nothing sent */
    json_t *bad = json_loads("{\"model\":\"claude-opus-4-7\",\"options\":{\"thinking\":"
                             "{\"type\":\"enabled\",\"budget_tokens\":1024}},\"messages\":[{\"role\":"
                             "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}]}",
                             0, NULL);
    json_decref(pt_host.chunks);
    pt_host.chunks = json_array();
    assert_int_equal(pt_host.provider->stream(pt_host.provider_self, NULL, bad,
                                              (weir_stream *)&pt_host),
                     WEIR_OK);
    json_t *failure = json_object_get(pt_finish_reason(pt_host.chunks), "failure");
    const char *fmsg = json_string_value(json_object_get(failure, "message"));
    if (!json_object_get(failure, "code") ||
        strcmp(json_string_value(json_object_get(failure, "code")), "INVALID_REQUEST") != 0 ||
        !fmsg || !strstr(fmsg, "options.thinking: model \"claude-opus-4-7\""))
        fail_msg("want INVALID_REQUEST naming the thinking option: %s", fmsg ? fmsg : "(none)");
    assert_int_equal(mock_llm_requests(m), 2);
    json_decref(bad);
    mock_llm_stop(m);
}

int main(void) {
    pt_plugin_file = "weir-provider-anthropic.so";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_translation_matches_golden),
        cmocka_unit_test(server_compaction_block_round_trips),
        cmocka_unit_test(request_without_optional_fields),
        cmocka_unit_test(request_tool_choice),
        cmocka_unit_test(request_memo_resumes_at_the_last_shared_group),
        cmocka_unit_test(request_rejects_bad_blocks),
        cmocka_unit_test(request_merges_roles_and_puts_tool_results_first),
        cmocka_unit_test(request_cache_reuses_translated_messages),
        cmocka_unit_test(request_survives_allocation_failures),
        cmocka_unit_test(decode_text_stream_with_cache_usage),
        cmocka_unit_test(decode_thinking_then_text),
        cmocka_unit_test(decode_two_tool_calls_with_fragmented_arguments),
        cmocka_unit_test(decode_max_tokens),
        cmocka_unit_test(decode_tool_call_without_arguments_gets_empty_object),
        cmocka_unit_test(decode_event_name_stands_in_for_missing_type),
        cmocka_unit_test(inband_error_is_classified),
        cmocka_unit_test(malformed_event_quotes_the_bytes),
        cmocka_unit_test(event_with_wrong_types_is_malformed),
        cmocka_unit_test(malformed_event_is_truncated_and_escaped),
        cmocka_unit_test(truncated_stream_is_transport),
        cmocka_unit_test(stop_without_content_is_empty_response),
        cmocka_unit_test(transport_failure_and_abort_end_the_stream),
        cmocka_unit_test(consumer_refusal_stops_all_but_the_finish),
        cmocka_unit_test(decoder_survives_allocation_failures),
        cmocka_unit_test(round_trip_loses_nothing),
        cmocka_unit_test_setup_teardown(plugin_streams_from_mock_server, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_sends_no_key_header_for_empty_key, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test(plugin_maps_every_fault),
        cmocka_unit_test(plugin_names_a_body_that_is_not_an_event_stream),
        cmocka_unit_test(plugin_names_json_sent_instead_of_a_stream),
        cmocka_unit_test(plugin_scrubs_echoed_secrets),
        cmocka_unit_test_setup_teardown(plugin_cancel_mid_stream_is_aborted, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_total_timeout_ends_a_keepalive_stream,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_rejects_bad_config_and_call_config, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_config_schema_accepts_the_documented_shape,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(model_info_knows_the_table_and_the_config_beats_it,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test(default_max_tokens_is_the_models_max_output),
        cmocka_unit_test_setup_teardown(probe_keys_are_not_anthropics, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test(request_options_merge_last),
        cmocka_unit_test(request_options_refuse_owned_keys),
        cmocka_unit_test(request_refuses_a_thinking_mode_the_model_refuses),
        cmocka_unit_test(decode_signature_and_redacted_thinking),
        cmocka_unit_test(decode_usage_per_ttl),
        cmocka_unit_test(request_sends_thinking_back_in_place),
        cmocka_unit_test(request_places_cache_breakpoints),
        cmocka_unit_test(request_breakpoints_keep_the_memo_exact),
        cmocka_unit_test(request_maps_mid_conversation_system),
        cmocka_unit_test(request_thinking_rules),
        cmocka_unit_test(plugin_refuses_thinking_the_model_refuses_at_load),
        cmocka_unit_test_setup_teardown(plugin_sends_model_headers_and_options, pt_plugin_setup,
                                        pt_plugin_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
