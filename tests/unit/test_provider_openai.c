/*
 * tests/unit/test_provider_openai.c - provider-openai: request translation
 * (golden JSON), decoding of recorded Chat Completions streams, every
 * failure path, a canonical -> request -> stream -> message round trip, and
 * the built plugin (weir-provider-openai.so) driven through a fake host
 * table whose HTTP is the real core client talking to the loopback mock LLM,
 * including model_info: the model table without config, the config's
 * `models` over it, the windows the server reports (vLLM's /v1/models
 * max_model_len, llama.cpp's /props n_ctx), failed probes (404, a stalled
 * server, garbage, a closed port) falling back to the table, and one probe
 * per row whatever the number of calls and threads.
 *
 * Data: tests/data/providers/request.json (canonical request shared with the
 * anthropic test) and tests/data/providers/openai/ (*.sse recorded streams,
 * *.chunks.json expected chunks, request.expected.json).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "schema.h"

#include "mock_llm.h"
#include "openai.h"
#include "provider_host.h"
#include "provider_test.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* The decoder and request translation, as the shared checks call them. */
static void *decoder_new(int (*emit)(void *, json_t *), void *user_data) {
    return openai_decoder_new("llm", emit, user_data);
}
static int decoder_event(void *d, const char *event, const char *data, size_t len) {
    (void)event; /* Chat Completions streams carry everything in `data` */
    return openai_decoder_event(d, data, len);
}
static int decoder_end(void *d, json_t *failure, bool aborted) {
    return openai_decoder_end(d, failure, aborted);
}
static void decoder_free(void *d) { openai_decoder_free(d); }

static const pt_provider_ops ops = {decoder_new,  decoder_event,       decoder_end,
                                    decoder_free, openai_request_body, "openai"};

/* ------------------------------------------------------------------------ */
/* Request translation                                                      */
/* ------------------------------------------------------------------------ */

static void request_translation_matches_golden(void **state) {
    (void)state;
    json_t *request = pt_load_data("request.json");
    json_t *want = pt_load_data("openai/request.expected.json");
    char msg[256];
    json_t *body = openai_request_body(request, msg, sizeof msg);
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
    json_t *body = openai_request_body(request, msg, sizeof msg);
    json_t *want = json_pack("{s:s,s:[{s:s,s:s}],s:b,s:{s:b}}", "model", "m", "messages", "role",
                             "user", "content", "hi", "stream", 1, "stream_options",
                             "include_usage", 1);
    pt_assert_json_equal(body, want);
    json_decref(body);
    json_decref(want);
    json_decref(request);
}

/* tool_choice is sent with tools only (the API refuses it alone); a bad value is refused. */
static void request_tool_choice(void **state) {
    (void)state;
    json_t *request = json_loads("{\"model\":\"m\",\"tool_choice\":\"none\",\"messages\":[],"
                                 "\"tools\":[{\"name\":\"f\",\"description\":\"d\","
                                 "\"parameters\":{\"type\":\"object\"}}]}",
                                 0, NULL);
    assert_non_null(request);
    char msg[256] = "";
    json_t *body = openai_request_body(request, msg, sizeof msg);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "tool_choice")), "none");
    json_decref(body);
    json_object_set_new(request, "tools", json_array());
    body = openai_request_body(request, msg, sizeof msg);
    assert_non_null(body);
    assert_null(json_object_get(body, "tool_choice"));
    json_decref(body);
    json_object_set_new(request, "tool_choice", json_string("never"));
    assert_null(openai_request_body(request, msg, sizeof msg));
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
         "messages[0].content[0]: system messages hold only text blocks"},
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
        assert_null(openai_request_body(request, msg, sizeof msg));
        assert_string_equal(msg, cases[i].message);
        json_decref(request);
    }
}

/* The body text built with a cache is the text built without one, byte for
 * byte; a second request over the same message objects translates nothing,
 * and one more message costs one translation. */
static void request_cache_reuses_translated_messages(void **state) {
    (void)state;
    json_t *request = pt_load_data("request.json");
    json_t *messages = json_object_get(request, "messages");
    size_t n = json_array_size(messages);
    /* a user message with nothing to send: no empty element, no stray comma */
    assert_int_equal(json_array_append_new(messages,
                                           json_pack("{s:s,s:[{s:s,s:s}]}", "role", "user",
                                                     "content", "type", "text", "text", "")),
                     0);
    n++;
    char msg[256];
    char *plain = openai_request_text(request, NULL, msg, sizeof msg);
    assert_non_null(plain);
    json_t *parsed = json_loads(plain, 0, NULL);
    assert_non_null(parsed); /* well-formed JSON */
    json_decref(parsed);

    pc_cache *cache = pc_cache_new(64, 1 << 20);
    assert_non_null(cache);
    char *first = openai_request_text(request, cache, msg, sizeof msg);
    assert_string_equal(first, plain);
    pc_cache_stats st = pc_cache_get_stats(cache);
    assert_int_equal(st.hits, 0);
    assert_int_equal(st.misses, n + 1); /* every message and the tools */
    assert_int_equal(st.entries, n + 1);
    char *second = openai_request_text(request, cache, msg, sizeof msg);
    assert_string_equal(second, plain);
    st = pc_cache_get_stats(cache);
    assert_int_equal(st.hits, n + 1);
    assert_int_equal(st.misses, n + 1);

    /* the next step: the same objects and one new message */
    assert_int_equal(json_array_append_new(messages,
                                           json_pack("{s:s,s:[{s:s,s:s}]}", "role", "user",
                                                     "content", "type", "text", "text", "more")),
                     0);
    char *next_plain = openai_request_text(request, NULL, msg, sizeof msg);
    char *next = openai_request_text(request, cache, msg, sizeof msg);
    assert_non_null(next_plain);
    assert_string_equal(next, next_plain);
    st = pc_cache_get_stats(cache);
    assert_int_equal(st.hits, 2 * (n + 1));
    assert_int_equal(st.misses, n + 2);
    assert_int_equal(st.flushes, 0);

    /* a bad message is an error with its index, and is not cached */
    assert_int_equal(json_array_append_new(messages, json_pack("{s:s,s:[]}", "role", "robot",
                                                               "content")),
                     0);
    assert_null(openai_request_text(request, cache, msg, sizeof msg));
    char want[64];
    snprintf(want, sizeof want, "messages[%zu]: unknown role \"robot\"", n + 1);
    assert_string_equal(msg, want);
    assert_int_equal(pc_cache_get_stats(cache).entries, n + 2);
    /* a messages array holding the cached tools array itself: an error, as
     * without a cache, never the tools' text read as a message */
    json_t *tools = json_object_get(request, "tools");
    json_t *odd = json_pack("{s:s, s:[O], s:O}", "model", "m", "messages", tools, "tools", tools);
    assert_null(openai_request_text(odd, cache, msg, sizeof msg));
    assert_string_equal(msg, "messages[0]: needs a string \"role\" and a \"content\" array");
    json_decref(odd);

    free(plain);
    free(first);
    free(second);
    free(next_plain);
    free(next);
    pc_cache_free(cache);
    json_decref(request);
}

/* One session's request: `n` messages of its own and the shared tools. */
static json_t *session_request(int session, int n, json_t *tools) {
    json_t *messages = json_array();
    for (int i = 0; i < n; i++) {
        char text[64];
        snprintf(text, sizeof text, "session %d, message %d", session, i);
        json_array_append_new(messages, json_pack("{s:s,s:[{s:s,s:s}]}", "role",
                                                  i % 2 ? "assistant" : "user", "content",
                                                  "type", "text", "text", text));
    }
    return json_pack("{s:s, s:o, s:O}", "model", "m", "messages", messages, "tools", tools);
}

/* A closed agent releases its cache entries (issue #15): once its history is
 * freed its entries are dead, and the sweep after pc_cache_release_due (what
 * the providers' agent/disposed listener calls) drops every one of them while
 * the entries of a live agent stay, and still serve byte-identical text.
 * Without a release, the sweep before the table grows keeps the cache near
 * its live entries: sessions that come and go never reach the bounds. */
static void request_cache_releases_closed_agents(void **state) {
    (void)state;
    char msg[256];
    json_t *tools = json_pack("[{s:s, s:s, s:{s:s}}]", "name", "t", "description", "d",
                              "parameters", "type", "object");
    pc_cache *cache = pc_cache_new(16384, 1 << 24);
    assert_non_null(cache);
    json_t *live = session_request(0, 5, tools), *closing = session_request(1, 7, tools);
    char *live_plain = openai_request_text(live, NULL, msg, sizeof msg);
    free(openai_request_text(live, cache, msg, sizeof msg));
    free(openai_request_text(closing, cache, msg, sizeof msg));
    assert_int_equal(pc_cache_get_stats(cache).entries, 5 + 7 + 1); /* + the tools */
    json_t *gone = json_incref(json_array_get(json_object_get(closing, "messages"), 3));
    json_decref(closing); /* the agent closes: its history is freed */
    pc_cache_sweep(cache);
    pc_cache_stats st = pc_cache_get_stats(cache);
    assert_int_equal(st.entries, 5 + 1 + 1); /* a message someone still holds stays */
    assert_int_equal(st.swept, 6);
    json_decref(gone);
    pc_cache_release_due(cache); /* agent/disposed */
    assert_int_equal(pc_cache_get_stats(cache).entries, 5 + 1 + 1); /* only a flag */
    json_t *more = json_pack("{s:s,s:[{s:s,s:s}]}", "role", "user", "content", "type", "text",
                             "text", "next");
    assert_int_equal(json_array_append_new(json_object_get(live, "messages"), more), 0);
    char *next_plain = openai_request_text(live, NULL, msg, sizeof msg);
    char *next = openai_request_text(live, cache, msg, sizeof msg); /* one put: the sweep */
    assert_string_equal(next, next_plain);
    st = pc_cache_get_stats(cache);
    assert_int_equal(st.entries, 5 + 1 + 1); /* none of the closed agent's is left */
    assert_int_equal(st.swept, 7);
    assert_int_equal(st.flushes, 0);
    free(next_plain);
    free(next);
    free(live_plain);

    /* 2,000 sessions of 40 messages, one after another, without a release:
     * the cache stays within a small multiple of one session's entries */
    size_t most = 0;
    for (int s = 2; s < 2002; s++) {
        json_t *r = session_request(s, 40, tools);
        char *plain = openai_request_text(r, NULL, msg, sizeof msg);
        char *cached = openai_request_text(r, cache, msg, sizeof msg);
        char *again = openai_request_text(r, cache, msg, sizeof msg);
        assert_string_equal(cached, plain);
        assert_string_equal(again, plain);
        free(plain);
        free(cached);
        free(again);
        json_decref(r);
        size_t e = pc_cache_get_stats(cache).entries;
        most = e > most ? e : most;
    }
    st = pc_cache_get_stats(cache);
    assert_true(most <= 512);
    assert_int_equal(st.flushes, 0);
    pc_cache_sweep(cache);
    assert_int_equal(pc_cache_get_stats(cache).entries, 5 + 1 + 1); /* the live agent's */
    json_decref(live);
    pc_cache_sweep(cache);
    assert_int_equal(pc_cache_get_stats(cache).entries, 1); /* the tools: still held */
    json_decref(tools);
    pc_cache_sweep(cache);
    assert_int_equal(pc_cache_get_stats(cache).entries, 0);
    pc_cache_free(cache);
}

/* The bounds empty the cache, and a cached key is pinned by a reference. */
static void request_cache_bounds_and_pinning(void **state) {
    (void)state;
    pc_cache *cache = pc_cache_new(2, 10);
    assert_non_null(cache);
    assert_null(pc_cache_new(0, 10));
    json_t *a = json_string("a"), *b = json_string("b"), *c = json_string("c");
    assert_int_equal(pc_cache_put(cache, a, 'm', "AAAA", 4), 0);
    assert_int_equal(pc_cache_put(cache, b, 'm', "BBBB", 4), 0);
    assert_int_equal(a->refcount, 2);
    assert_int_equal(pc_cache_put(cache, c, 'm', "CCCC", 4), 0); /* third entry: flush first */
    pc_cache_stats st = pc_cache_get_stats(cache);
    assert_int_equal(st.flushes, 1);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.bytes, 4);
    assert_int_equal(a->refcount, 1);
    pc_buf out = {0};
    assert_int_equal(pc_cache_get(cache, a, 'm', &out), 0);
    assert_int_equal(pc_cache_get(cache, c, 'm', &out), 1);
    assert_int_equal(pc_cache_put(cache, c, 'm', "other", 5), 0); /* the first text stays */
    assert_int_equal(pc_cache_get(cache, c, 'm', &out), 1);
    assert_string_equal(out.p, "CCCCCCCC");
    assert_int_equal(pc_cache_get(cache, c, 't', &out), 0); /* cached as a message only */
    assert_int_equal(pc_cache_put(cache, c, 't', "TT", 2), 0); /* and it stays one */
    assert_int_equal(pc_cache_get(cache, c, 't', &out), 0);
    assert_int_equal(pc_cache_put(cache, a, 'm', "0123456789X", 11), 0); /* over the byte bound */
    assert_int_equal(pc_cache_get_stats(cache).entries, 1);
    assert_int_equal(pc_cache_put(cache, b, 'm', "0123456", 7), 0); /* 4 + 7 > 10: flush */
    st = pc_cache_get_stats(cache);
    assert_int_equal(st.flushes, 2);
    assert_int_equal(st.bytes, 7);
    /* growth past the first table keeps every entry */
    pc_cache *big = pc_cache_new(1000, 1 << 20);
    json_t *keys[300];
    for (int i = 0; i < 300; i++) {
        keys[i] = json_integer(i);
        char t[16];
        snprintf(t, sizeof t, "%d", i);
        assert_int_equal(pc_cache_put(big, keys[i], 'm', t, strlen(t)), 0);
    }
    for (int i = 0; i < 300; i++) {
        pc_buf one = {0};
        char t[16];
        snprintf(t, sizeof t, "%d", i);
        assert_int_equal(pc_cache_get(big, keys[i], 'm', &one), 1);
        assert_string_equal(one.p, t);
        free(one.p);
    }
    pc_cache_free(big);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(keys[i]->refcount, 1);
        json_decref(keys[i]);
    }
    free(out.p);
    pc_cache_free(cache);
    assert_int_equal(b->refcount, 1);
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

/* Build `request` with the memo of this thread's owner and give it back;
 * the text must be the one built without a cache or memo.  @return how many
 * messages the body kept from the memo's last one. */
static size_t memo_step(pc_cache *cache, const json_t *request) {
    char msg[256];
    char *plain = openai_request_text(request, NULL, msg, sizeof msg);
    assert_non_null(plain);
    pc_memo *memo = pc_cache_memo_take(cache);
    assert_non_null(memo);
    size_t before = memo->n;
    json_t *messages = json_object_get(request, "messages");
    size_t count = json_array_size(messages), kept = 0;
    while (kept < before && kept < count && memo->at[kept].key == json_array_get(messages, kept))
        kept++;
    assert_int_equal(openai_request_build(request, cache, memo, msg, sizeof msg), 0);
    assert_int_equal(memo->text.len, strlen(plain));
    assert_string_equal(memo->text.p, plain);
    assert_int_equal(memo->n, count);
    free(plain);
    pc_cache_memo_give(cache, memo);
    return kept;
}

static json_t *user_text(const char *text) {
    return json_pack("{s:s,s:[{s:s,s:s}]}", "role", "user", "content", "type", "text", "text",
                     text);
}

/* The memo (issue #15, the cost flat in the history): a bound agent's next
 * body keeps the longest prefix of the same message objects in place and
 * adds only the rest, byte for byte the body built from nothing, whatever
 * the history did in between: grew, had a message rewritten (compaction),
 * shrank, ended in a message with nothing to send, changed its tools or
 * options, or failed to translate.  The memo holds references, so an
 * identity cannot be reused while it is compared; a released agent's memo
 * goes, even one taken at the release. */
static void request_memo_keeps_the_shared_prefix(void **state) {
    (void)state;
    static const char owner = 'o', agent = 'a', stranger = 's';
    pc_cache *cache = pt_memo_cache(&agent, &owner);
    assert_non_null(cache);
    json_t *request = pt_load_data("request.json");
    json_t *messages = json_object_get(request, "messages");
    size_t n = json_array_size(messages);
    assert_true(n >= 3);
    assert_int_equal(memo_step(cache, request), 0); /* nothing kept yet */
    assert_int_equal(memo_step(cache, request), n); /* the whole history */
    pc_cache_stats st = pc_cache_get_stats(cache);
    assert_int_equal(st.hits, 1); /* the tools; no message probed again */

    /* grows: only the new one is translated */
    assert_int_equal(json_array_append_new(messages, user_text("more")), 0);
    assert_int_equal(memo_step(cache, request), n);
    assert_int_equal(pc_cache_get_stats(cache).misses, st.misses + 1);
    /* ends in a message with nothing to send, then grows past it: no stray comma */
    assert_int_equal(json_array_append_new(messages, user_text("")), 0);
    assert_int_equal(memo_step(cache, request), n + 1);
    assert_int_equal(json_array_append_new(messages, user_text("after the empty one")), 0);
    assert_int_equal(memo_step(cache, request), n + 2);
    /* compaction rewrites message 1: the prefix before it stays */
    json_t *old = json_incref(json_array_get(messages, 1));
    size_t held = old->refcount;
    assert_int_equal(json_array_set_new(messages, 1, user_text("a summary")), 0);
    assert_int_equal(memo_step(cache, request), 1);
    assert_true(old->refcount < held); /* the memo let go of it */
    json_decref(old);
    /* shrinks */
    size_t now = json_array_size(messages);
    assert_int_equal(json_array_remove(messages, now - 1), 0);
    assert_int_equal(json_array_remove(messages, now - 2), 0);
    assert_int_equal(memo_step(cache, request), now - 2);
    /* other tools and options, the same messages */
    json_t *tools = json_incref(json_object_get(request, "tools"));
    assert_int_equal(json_object_set_new(request, "tools", json_array()), 0);
    assert_int_equal(json_object_set_new(request, "temperature", json_real(0.5)), 0);
    assert_int_equal(memo_step(cache, request), now - 2);
    assert_int_equal(json_object_set_new(request, "tools", tools), 0);
    assert_int_equal(memo_step(cache, request), now - 2);
    /* a message that fails: an error, the memo reset, the next body right */
    assert_int_equal(json_array_append_new(messages, json_pack("{s:s,s:[]}", "role", "robot",
                                                               "content")),
                     0);
    char msg[256];
    pc_memo *memo = pc_cache_memo_take(cache);
    assert_int_equal(openai_request_build(request, cache, memo, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "unknown role \"robot\""));
    assert_int_equal(memo->n, 0);
    assert_int_equal(memo->text.len, 0);
    pc_cache_memo_give(cache, memo);
    assert_int_equal(json_array_remove(messages, json_array_size(messages) - 1), 0);
    assert_int_equal(memo_step(cache, request), 0);
    assert_int_equal(memo_step(cache, request), now - 2);

    /* one memo per owner: a second take while one is out gets an empty one,
     * and only one is kept */
    pc_memo *a = pc_cache_memo_take(cache), *b = pc_cache_memo_take(cache);
    assert_int_equal(a->n, now - 2);
    assert_int_equal(b->n, 0);
    pc_cache_memo_give(cache, a);
    pc_cache_memo_give(cache, b); /* freed: the owner has one */
    assert_int_equal(memo_step(cache, request), now - 2);
    /* an owner no agent is bound to keeps nothing */
    pc_cache_set_owner(&stranger);
    assert_int_equal(memo_step(cache, request), 0);
    assert_int_equal(memo_step(cache, request), 0);
    pc_cache_set_owner(NULL);
    assert_int_equal(memo_step(cache, request), 0);
    /* the agent released while its memo is out: given back, it is freed; the
     * release drops the references the kept one held */
    pc_cache_set_owner(&owner);
    json_t *first = json_array_get(messages, 0);
    size_t refs = first->refcount;
    memo = pc_cache_memo_take(cache);
    assert_int_equal(memo->n, now - 2);
    pc_cache_release_agent(cache, &agent);
    pc_cache_memo_give(cache, memo);
    assert_true(first->refcount < refs);
    assert_int_equal(memo_step(cache, request), 0);
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

static void decode_text_stream(void **state) {
    (void)state;
    pt_check_stream(&ops, "openai/text.sse", "openai/text.chunks.json");
}

static void decode_reasoning_then_text(void **state) {
    (void)state;
    pt_check_stream(&ops, "openai/reasoning.sse", "openai/reasoning.chunks.json");
}

static void decode_two_parallel_tool_calls_with_fragmented_arguments(void **state) {
    (void)state;
    pt_check_stream(&ops, "openai/tool_calls.sse", "openai/tool_calls.chunks.json");
    json_t *chunks = pt_decode_file(&ops, "openai/tool_calls.sse"), *usage;
    json_t *message = pt_assemble(chunks, &usage);
    json_t *want = json_loads(
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Computing.\"},"
        "{\"type\":\"tool_call\",\"id\":\"call_a\",\"name\":\"pow\",\"arguments\":\"{\\\"x\\\":2,\\\"y\\\":10}\"},"
        "{\"type\":\"tool_call\",\"id\":\"call_b\",\"name\":\"sqrt\",\"arguments\":\"{\\\"x\\\":16}\"}]}",
        0, NULL);
    pt_assert_json_equal(message, want);
    json_decref(want);
    json_decref(message);
    json_decref(usage);
    json_decref(chunks);
}

static void decode_length_is_max_tokens(void **state) {
    (void)state;
    pt_check_stream(&ops, "openai/length.sse", "openai/length.chunks.json");
}

static void decode_usage_mapping(void **state) {
    (void)state;
    /* input = prompt - cached; cache and reasoning tokens only when given */
    json_t *chunks = pt_decode_text(
        &ops, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n"
              "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":50,"
              "\"prompt_tokens_details\":{\"cached_tokens\":1500},"
              "\"completion_tokens_details\":{\"reasoning_tokens\":20}}}\n\n"
              "data: [DONE]\n\n");
    json_t *usage = json_array_get(chunks, json_array_size(chunks) - 2);
    json_t *want = json_pack("{s:s,s:{s:i,s:i,s:i,s:i}}", "type", "usage", "usage",
                             "input_tokens", 500, "output_tokens", 50, "cache_read_tokens", 1500,
                             "reasoning_tokens", 20);
    pt_assert_json_equal(usage, want);
    json_decref(want);
    json_decref(chunks);
}

static void decode_tool_call_without_arguments_gets_empty_object(void **state) {
    (void)state;
    json_t *chunks = pt_decode_text(
        &ops, "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\","
              "\"function\":{\"name\":\"now\"}}]}}]}\n\n"
              "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
              "data: [DONE]\n\n");
    json_t *usage, *message = pt_assemble(chunks, &usage);
    json_t *want = json_pack("{s:s,s:[{s:s,s:s,s:s,s:s}]}", "role", "assistant", "content",
                             "type", "tool_call", "id", "c1", "name", "now", "arguments", "{}");
    pt_assert_json_equal(message, want);
    /* a compatible server saying "stop" with tool calls still means tool-calls */
    assert_string_equal(json_string_value(json_object_get(pt_finish_reason(chunks), "kind")),
                        "tool-calls");
    assert_null(usage);
    json_decref(want);
    json_decref(message);
    json_decref(chunks);
}

static void decode_stream_without_done_marker_finishes(void **state) {
    (void)state;
    json_t *chunks = pt_decode_text(
        &ops,
        "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n");
    assert_string_equal(json_string_value(json_object_get(pt_finish_reason(chunks), "kind")),
                        "stop");
    json_decref(chunks);
}

/* ------------------------------------------------------------------------ */
/* Failure paths                                                            */
/* ------------------------------------------------------------------------ */

static void inband_error_is_classified(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "openai/inband_error.sse");
    pt_assert_failure(chunks, "error", "OVERLOADED",
                      "in-band error from the provider: overloaded_error: Overloaded");
    json_decref(chunks);
    chunks =
        pt_decode_text(&ops, "data: {\"error\":{\"message\":\"This model's maximum context length "
                             "is 8192 tokens\",\"type\":\"invalid_request_error\","
                             "\"code\":\"context_length_exceeded\"}}\n\n");
    pt_assert_failure(chunks, "error", "CONTEXT_WINDOW_EXCEEDED", NULL);
    json_decref(chunks);
}

static void malformed_chunk_quotes_the_bytes(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "openai/malformed.sse");
    /* the first text delta went out, then the failure; [DONE] is ignored */
    assert_string_equal(json_string_value(json_object_get(json_array_get(chunks, 1), "text")),
                        "Hi");
    pt_assert_failure(chunks, "error", "TRANSPORT",
                      "malformed stream chunk (invalid JSON): {\"id\":\"c8\",\"choices\":"
                      "[{\"index\":0,\"delta\":{\"content\":\"x\"");
    json_decref(chunks);
}

static void chunk_with_wrong_types_is_malformed(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "openai/wrong_type.sse");
    pt_assert_failure(
        chunks, "error", "TRANSPORT",
        "malformed stream chunk (delta.content is not a string): {\"id\":\"c9\","
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":42},\"finish_reason\":null}]}");
    assert_int_equal(json_array_size(chunks), 1);
    json_decref(chunks);
}

static void malformed_chunk_is_truncated_and_escaped(void **state) {
    (void)state;
    pt_check_malformed_is_truncated_and_escaped(&ops, "chunk");
}

static void truncated_stream_is_transport(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "openai/truncated.sse");
    pt_assert_failure(chunks, "error", "TRANSPORT", "stream ended before finish");
    json_decref(chunks);
    chunks = pt_decode_text(
        &ops, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n");
    pt_assert_failure(chunks, "error", "TRANSPORT",
                      "stream ended before finish ([DONE] without finish_reason)");
    json_decref(chunks);
}

static void stop_without_content_is_empty_response(void **state) {
    (void)state;
    json_t *chunks = pt_decode_file(&ops, "openai/empty.sse");
    pt_assert_failure(chunks, "error", "EMPTY_RESPONSE", "the model finished without any content");
    assert_int_equal(json_array_size(chunks), 1);
    json_decref(chunks);
}

static void transport_failure_and_abort_end_the_stream(void **state) {
    (void)state;
    pt_check_transport_failure_and_abort(
        &ops, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n");
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
    openai_decoder *d = openai_decoder_new("llm", refuse_after_two, chunks);
    assert_int_equal(openai_decoder_event(d, "{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}", 39), -1);
    assert_int_equal(openai_decoder_event(d, "{\"choices\":[{\"delta\":{\"content\":\"b\"}}]}", 39), -1);
    openai_decoder_end(d, NULL, true);
    openai_decoder_free(d);
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

/* Split `s` into pieces of about 3 bytes, cut on UTF-8 boundaries. */
static void stream_pieces(json_t *events, const char *field, const char *s, json_int_t tool) {
    size_t len = strlen(s);
    for (size_t i = 0, n; i < len; i += n) {
        n = len - i < 3 ? len - i : 3;
        while (i + n < len && ((unsigned char)s[i + n] & 0xC0) == 0x80)
            n++;
        json_t *piece = json_stringn(s + i, n);
        assert_non_null(piece);
        json_t *delta = tool < 0 ? json_pack("{s:o}", field, piece)
                                 : json_pack("{s:[{s:I,s:{s:o}}]}", "tool_calls", "index", tool,
                                             "function", "arguments", piece);
        json_array_append_new(events, json_pack("{s:[{s:o}]}", "choices", "delta", delta));
    }
}

static void round_trip_loses_nothing(void **state) {
    (void)state;
    json_t *assistant = json_loads(
        "{\"role\":\"assistant\",\"content\":["
        "{\"type\":\"reasoning\",\"text\":\"The user wants 2^10; use pow.\"},"
        "{\"type\":\"text\",\"text\":\"Computing 2^10 and √16…\"},"
        "{\"type\":\"tool_call\",\"id\":\"call_1\",\"name\":\"pow\",\"arguments\":\"{\\\"x\\\":2,\\\"y\\\":10}\"},"
        "{\"type\":\"tool_call\",\"id\":\"call_2\",\"name\":\"sqrt\",\"arguments\":\"{\\\"x\\\":16}\"}]}",
        0, NULL);
    assert_non_null(assistant);
    json_t *request = json_pack("{s:s,s:[{s:s,s:[{s:s,s:s}]},O]}", "model", "m", "messages",
                                "role", "user", "content", "type", "text", "text", "go", assistant);
    char msg[256];
    json_t *body = openai_request_body(request, msg, sizeof msg);
    assert_non_null(body);
    json_t *sent = json_array_get(json_object_get(body, "messages"), 1);

    /* The server streams back the same content: reasoning (never sent, so
     * taken from the original), the sent text and the sent tool calls. */
    json_t *events = json_array();
    stream_pieces(events, "reasoning_content",
                  json_string_value(json_object_get(json_array_get(json_object_get(assistant, "content"), 0), "text")),
                  -1);
    stream_pieces(events, "content", json_string_value(json_object_get(sent, "content")), -1);
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(sent, "tool_calls"), i, call) {
        json_t *fn = json_object_get(call, "function");
        json_array_append_new(
            events, json_pack("{s:[{s:{s:[{s:I,s:O,s:s,s:{s:O,s:s}}]}}]}", "choices", "delta",
                              "tool_calls", "index", (json_int_t)i, "id", json_object_get(call, "id"),
                              "type", "function", "function", "name", json_object_get(fn, "name"),
                              "arguments", ""));
        stream_pieces(events, NULL, json_string_value(json_object_get(fn, "arguments")),
                      (json_int_t)i);
    }
    json_array_append_new(events, json_pack("{s:[{s:{},s:s}]}", "choices", "delta",
                                            "finish_reason", "tool_calls"));
    json_array_append_new(events, json_pack("{s:[],s:{s:i,s:i}}", "choices", "usage",
                                            "prompt_tokens", 40, "completion_tokens", 25));

    json_t *chunks = json_array();
    openai_decoder *d = openai_decoder_new("llm", pt_collect, chunks);
    json_t *ev;
    json_array_foreach(events, i, ev) {
        char *text = json_dumps(ev, JSON_COMPACT);
        assert_int_equal(openai_decoder_event(d, text, strlen(text)), 0);
        free(text);
    }
    assert_int_equal(openai_decoder_event(d, "[DONE]", 6), 0);
    openai_decoder_end(d, NULL, false);
    openai_decoder_free(d);

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
    "{\"base_url\":\"@BASE@/v1\",\"api_key\":\"" PT_KEY "\",\"headers\":{\"X-Team\":\"t1\"},"      \
    "\"models\":{\"test-model\":{\"context_window\":1000,\"max_output\":100}}}"

/* The plugin listens to agent/disposed and releases the closed agent's
 * cache entries: its next request's put sweeps them (issue #15). */
static void plugin_releases_a_disposed_agents_cache_entries(void **state) {
    (void)state;
    mock_llm *m = pt_start_plugin("{\"loop\":true,\"requests\":[{\"text\":\"ok\"}]}", CONFIG);
    assert_non_null(pt_host.disposed);
    pc_cache *cache = ((const pc_provider *)pt_host.provider_self)->cache;
    json_t *closing = pt_load_data("request.json");
    size_t n = json_array_size(json_object_get(closing, "messages"));
    void *call = NULL;
    weir_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(pt_host.provider->prepare_call(pt_host.provider_self, closing,
                                                    &pt_host.signal, &call, &err),
                     WEIR_OK);
    assert_int_equal(
        pt_host.provider->stream(pt_host.provider_self, call, closing, (weir_stream *)&pt_host),
        WEIR_OK);
    assert_int_equal(pc_cache_get_stats(cache).entries, n + 1); /* + the tools */
    json_decref(closing); /* the agent closes: its history is freed */
    json_t *args = json_pack("{s:s}", "agent", "a1");
    json_decref(pt_host.disposed(NULL, args, pt_host.disposed_data));
    json_decref(args);
    json_t *other = json_loads("{\"model\":\"test-model\",\"messages\":[{\"role\":\"user\","
                               "\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
                               0, NULL);
    assert_non_null(other);
    assert_int_equal(
        pt_host.provider->stream(pt_host.provider_self, call, other, (weir_stream *)&pt_host),
        WEIR_OK);
    pc_cache_stats st = pc_cache_get_stats(cache);
    assert_int_equal(st.entries, 1); /* the other agent's message; none of the closed one's */
    assert_int_equal(st.swept, n + 1);
    if (pt_host.provider->release_call)
        pt_host.provider->release_call(pt_host.provider_self, call);
    json_decref(other);
    mock_llm_stop(m);
}

static void plugin_streams_from_mock_server(void **state) {
    (void)state;
    int rc;
    mock_llm *m = pt_run_plugin(
        "{\"requests\":[{\"text\":\"Hello there\",\"reasoning\":\"hm\",\"chunk_size\":4,"
        "\"usage\":{\"input_tokens\":7,\"output_tokens\":3}}]}",
        CONFIG, NULL, &rc);
    assert_int_equal(rc, WEIR_OK);
    char *path = mock_llm_request_path(m, 0), *auth = mock_llm_request_header(m, 0, "authorization");
    char *team = mock_llm_request_header(m, 0, "x-team"), *body = mock_llm_request_body(m, 0);
    assert_string_equal(path, "/v1/chat/completions");
    assert_string_equal(auth, "Bearer " PT_KEY);
    assert_string_equal(team, "t1");
    json_t *sent = json_loads(body, 0, NULL), *want = pt_load_data("openai/request.expected.json");
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

static void plugin_sends_no_authorization_for_empty_key(void **state) {
    (void)state;
    int rc;
    mock_llm *m = pt_run_plugin("{\"requests\":[{\"text\":\"ok\"}]}",
                                "{\"base_url\":\"@BASE@/v1/\",\"api_key\":\"\"}", NULL, &rc);
    char *auth = mock_llm_request_header(m, 0, "authorization");
    char *path = mock_llm_request_path(m, 0);
    assert_null(auth);
    assert_string_equal(path, "/v1/chat/completions");
    free(path);
    mock_llm_stop(m);
}

static void plugin_maps_every_fault(void **state) {
    (void)state;
    /* OpenAI's 503 "engine is currently overloaded": the core classifier
     * (core/format/failure.c) decides between OVERLOADED and SERVER */
    pt_check_fault_mapping("@BASE@/v1", "OVERLOADED|SERVER");
}

static void plugin_names_a_body_that_is_not_an_event_stream(void **state) {
    (void)state;
    pt_check_not_an_event_stream("@BASE@/v1");
}

static void plugin_names_json_sent_instead_of_a_stream(void **state) {
    (void)state;
    pt_check_json_instead_of_a_stream("@BASE@/v1");
}

static void plugin_scrubs_echoed_secrets(void **state) {
    (void)state;
    pt_check_echoed_secrets_are_scrubbed("@BASE@/v1", "\"authorization\":\"Bearer " PT_KEY "\"");
}

static void plugin_cancel_mid_stream_is_aborted(void **state) {
    (void)state;
    pt_check_cancel_mid_stream(CONFIG);
}

static void plugin_total_timeout_ends_a_keepalive_stream(void **state) {
    (void)state;
    pt_check_total_timeout("@BASE@/v1");
}

static void plugin_rejects_bad_config_and_call_config(void **state) {
    (void)state;
    pt_check_bad_config_and_call_config(
        "call config: \"temperature\" must be a number from 0 to 2");
}

static void plugin_config_schema_accepts_the_documented_shape(void **state) {
    (void)state;
    pt_check_config_schema("provider-openai");
}

/* ------------------------------------------------------------------------ */
/* model_info: the model table, config, the server's report (the probe)     */
/* ------------------------------------------------------------------------ */

/* A row at the mock with the key and an extra header, plus `extra` members. */
#define ROW(extra)                                                                              \
    "{\"base_url\":\"@BASE@/v1\",\"api_key\":\"" PT_KEY "\",\"headers\":{\"X-Team\":\"t1\"}" extra "}"

/* Path of mock request i (asserted). */
static void assert_request_path(mock_llm *m, long i, const char *want) {
    char *path = mock_llm_request_path(m, i);
    if (!path || strcmp(path, want) != 0)
        fail_msg("request %ld: %s, want %s", i, path ? path : "(none)", want);
    free(path);
}

static void model_info_knows_the_table_without_config(void **state) {
    (void)state;
    mock_llm *m = pt_start_plugin("{\"models\":[{\"id\":\"gpt-4o\",\"max_model_len\":5}]}",
                                  ROW(",\"probe_windows\":false"));
    pt_assert_model_info("gpt-4o", 128000, 16384);
    pt_assert_model_info("gpt-4o-2024-08-06", 128000, 16384);
    pt_assert_model_info("gpt-4o-mini", 128000, 16384);
    pt_assert_model_info("o1-mini-2024-09-12", 128000, 65536);
    pt_assert_model_info("claude-sonnet-4-5-20250929", 200000, 64000); /* one table */
    pt_assert_model_info("meta-llama/Llama-3.1-8B-Instruct", 131072, 8192);
    pt_assert_model_info("qwen2.5:7b", 32768, 8192);
    pt_assert_model_info("gpt-4o-minix", 0, 0);
    pt_assert_model_info("o1x", 0, 0);
    pt_assert_model_info("", 0, 0);
    pt_assert_model_info(NULL, 0, 0);
    assert_int_equal(mock_llm_requests(m), 0); /* probe_windows false: never asked */
    pt_assert_no_secret();
    mock_llm_stop(m);
}

static void model_info_config_beats_server_and_table(void **state) {
    (void)state;
    mock_llm *m = pt_start_plugin(
        "{\"models\":[{\"id\":\"gpt-4o\",\"max_model_len\":7777},"
        "{\"id\":\"gpt-4o-mini\",\"max_model_len\":4096},{\"id\":\"custom\",\"max_model_len\":3}]}",
        ROW(",\"models\":{\"gpt-4o\":{\"context_window\":1000},\"gpt-4o-mini\":{\"max_output\":99},"
            "\"custom\":{\"context_window\":5000,\"max_output\":100}}"));
    /* the config's window: no probe; the table's max_output is cut to it */
    pt_assert_model_info("gpt-4o", 1000, 1000);
    pt_assert_model_info("custom", 5000, 100);
    assert_int_equal(mock_llm_requests(m), 0);
    /* only max_output configured: the window comes from the server */
    pt_assert_model_info("gpt-4o-mini", 4096, 99);
    assert_int_equal(mock_llm_requests(m), 1);
    /* ids are exact: a dated id is not the configured alias */
    pt_assert_model_info("gpt-4o-2024-08-06", 128000, 16384);
    mock_llm_stop(m);
}

/* model_info's price: the table's list price with its source, the row's
 * models.<id>.price over it (missing cache prices are the input price), and
 * none where neither knows one. */
static void model_info_reports_the_price(void **state) {
    (void)state;
    mock_llm *m = pt_start_plugin(
        "{\"requests\":[]}",
        ROW(",\"probe_windows\":false,\"models\":{\"gpt-5.1\":{\"price\":{\"input\":2,"
            "\"output\":8,\"cached_input\":0.5}},\"custom\":{\"price\":{\"input\":3,"
            "\"output\":15}}}"));
    json_t *info = pt_host.provider->model_info(pt_host.provider_self, "gpt-5-mini");
    json_t *price = json_object_get(info, "price");
    assert_non_null(price);
    assert_float_equal(json_real_value(json_object_get(price, "input")), 0.25, 1e-9);
    assert_float_equal(json_real_value(json_object_get(price, "cached_input")), 0.025, 1e-9);
    assert_float_equal(json_real_value(json_object_get(price, "output")), 2.0, 1e-9);
    /* OpenAI bills no cache write: as input */
    assert_float_equal(json_real_value(json_object_get(price, "cache_write_5m")), 0.25, 1e-9);
    assert_non_null(strstr(json_string_value(json_object_get(price, "source")), "2026-12"));
    json_decref(info);
    info = pt_host.provider->model_info(pt_host.provider_self, "gpt-5.1");
    price = json_object_get(info, "price");
    assert_float_equal(json_real_value(json_object_get(price, "input")), 2.0, 1e-9);
    assert_float_equal(json_real_value(json_object_get(price, "cached_input")), 0.5, 1e-9);
    assert_float_equal(json_real_value(json_object_get(price, "cache_write_1h")), 2.0, 1e-9);
    assert_float_equal(json_real_value(json_object_get(price, "output")), 8.0, 1e-9);
    assert_string_equal(json_string_value(json_object_get(price, "source")), "config");
    assert_int_equal(json_integer_value(json_object_get(info, "context_window")), 272000);
    json_decref(info);
    /* a price alone is reported for a model the table does not know */
    info = pt_host.provider->model_info(pt_host.provider_self, "custom");
    price = json_object_get(info, "price");
    assert_float_equal(json_real_value(json_object_get(price, "cached_input")), 3.0, 1e-9);
    assert_null(json_object_get(info, "context_window"));
    json_decref(info);
    info = pt_host.provider->model_info(pt_host.provider_self, "gpt-4o");
    assert_null(json_object_get(info, "price")); /* no price in the table */
    json_decref(info);
    mock_llm_stop(m);
}

static void model_info_uses_the_window_vllm_reports(void **state) {
    (void)state;
    mock_llm *m = pt_start_plugin(
        "{\"models\":[{\"id\":\"served-model\",\"object\":\"model\",\"owned_by\":\"vllm\","
        "\"max_model_len\":12345},{\"id\":\"Qwen/Qwen2.5-7B-Instruct\",\"max_model_len\":65536},"
        "{\"id\":\"llama3.1:8b\",\"max_model_len\":4096}]}",
        ROW(""));
    pt_assert_model_info("served-model", 12345, 0);           /* not in the table */
    pt_assert_model_info("Qwen/Qwen2.5-7B-Instruct", 65536, 8192); /* the server beats the table */
    pt_assert_model_info("llama3.1:8b", 4096, 4096);          /* max_output cut to the window */
    pt_assert_model_info("gpt-4o", 128000, 16384);            /* not served: the table */
    pt_assert_model_info("unknown", 0, 0);
    assert_int_equal(mock_llm_requests(m), 1); /* windows found: no /props */
    assert_request_path(m, 0, "/v1/models");
    /* the row's headers and key, asking for JSON */
    char *auth = mock_llm_request_header(m, 0, "authorization");
    char *team = mock_llm_request_header(m, 0, "x-team");
    char *accept = mock_llm_request_header(m, 0, "accept");
    char *type = mock_llm_request_header(m, 0, "content-type");
    assert_string_equal(auth, "Bearer " PT_KEY);
    assert_string_equal(team, "t1");
    assert_string_equal(accept, "application/json");
    assert_null(type);
    free(auth);
    free(team);
    free(accept);
    pt_assert_no_secret();
    mock_llm_stop(m);
}

static void model_info_uses_the_n_ctx_llamacpp_reports(void **state) {
    (void)state;
    static const struct {
        const char *script, *base;
        long n_ctx;
        const char *models_path;
    } cases[] = {
        /* newer builds: default_generation_settings.n_ctx; /v1/models 404 */
        {"{\"props\":{\"default_generation_settings\":{\"n_ctx\":8192,\"params\":{}},"
         "\"total_slots\":1}}",
         "@BASE@/v1", 8192, "/v1/models"},
        /* older builds: top-level n_ctx; /v1/models lists the model without a window */
        {"{\"models\":[{\"id\":\"model.gguf\",\"object\":\"model\",\"owned_by\":\"llamacpp\","
         "\"meta\":{\"n_ctx_train\":131072}}],\"props\":{\"n_ctx\":4096}}",
         "@BASE@/v1", 4096, "/v1/models"},
        /* a base_url without /v1: {base}/models, then {base}/props */
        {"{\"props\":{\"default_generation_settings\":{\"n_ctx\":2048}}}", "@BASE@/", 2048,
         "/models"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_plugin_setup(NULL);
        char config[256];
        snprintf(config, sizeof config, "{\"base_url\":\"%s\",\"api_key\":\"" PT_KEY "\"}",
                 cases[i].base);
        mock_llm *m = pt_start_plugin(cases[i].script, config);
        /* llama.cpp serves one model, whatever the request names */
        pt_assert_model_info("model.gguf", cases[i].n_ctx, 0);
        pt_assert_model_info("qwen3:8b", cases[i].n_ctx, cases[i].n_ctx < 8192 ? cases[i].n_ctx : 8192);
        assert_int_equal(mock_llm_requests(m), 2);
        assert_request_path(m, 0, cases[i].models_path);
        assert_request_path(m, 1, "/props");
        pt_assert_no_secret();
        mock_llm_stop(m);
        pt_plugin_teardown(NULL);
    }
}

static void model_info_falls_back_to_the_table_when_the_probe_fails(void **state) {
    (void)state;
    static const struct {
        const char *what, *script;
        long requests;
    } cases[] = {
        {"404 on both", "{}", 2},
        {"garbage", "{\"models\":\"not json{\",\"props\":\"<html>oops</html>\"}", 2},
        {"a list of other models", "{\"models\":[{\"id\":\"other\",\"max_model_len\":999}]}", 1},
        {"a window of the wrong type",
         "{\"models\":[{\"id\":\"gpt-4o\",\"max_model_len\":\"big\"}],\"props\":{\"n_ctx\":-1}}", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_plugin_setup(NULL);
        mock_llm *m = pt_start_plugin(cases[i].script, ROW(""));
        pt_assert_model_info("gpt-4o", 128000, 16384);
        pt_assert_model_info("unknown-model", 0, 0);
        pt_assert_model_info("claude-3-5-haiku-latest", 200000, 8192);
        if (mock_llm_requests(m) != cases[i].requests)
            fail_msg("%s: %ld requests, want %ld", cases[i].what, mock_llm_requests(m),
                     cases[i].requests);
        pt_assert_no_secret();
        mock_llm_stop(m);
        pt_plugin_teardown(NULL);
    }
}

static void model_info_probe_names_a_page_that_is_not_json(void **state) {
    (void)state;
    /* a captive portal answers the probe's GETs 200 with its login page */
    mock_llm *m = pt_start_plugin("{\"models\":\"<html><body>Log in</body></html>\","
                                  "\"props\":\"\\u001f\\u008b\"}",
                                  ROW(""));
    pt_assert_model_info("gpt-4o", 128000, 16384); /* the table's */
    assert_int_equal(mock_llm_requests(m), 2);
    if (!strstr(pt_host.log, "window probe: GET /models: HTTP 200 with an HTML page, not JSON "
                             "(a captive portal, or a base_url that names a web site?)") ||
        !strstr(pt_host.log, "window probe: GET /props: HTTP 200 with a body that is not JSON"))
        fail_msg("log: %s", pt_host.log);
    assert_null(strstr(pt_host.log, "Log in")); /* the server's text is not logged */
    pt_assert_no_secret();
    mock_llm_stop(m);
}

static void model_info_probe_of_a_stalled_server_times_out(void **state) {
    (void)state;
    /* the server answers only after 10 s; the probe gives up after 300 ms */
    mock_llm *m = pt_start_plugin(
        "{\"info_delay_ms\":10000,\"models\":[{\"id\":\"gpt-4o\",\"max_model_len\":5}],"
        "\"props\":{\"n_ctx\":5}}",
        ROW(",\"probe_timeout_ms\":300"));
    int64_t t0 = weir__now_ms();
    pt_assert_model_info("gpt-4o", 128000, 16384);
    int64_t took = weir__now_ms() - t0;
    if (took < 300 || took > 2000)
        fail_msg("the probe took %lld ms", (long long)took);
    /* asked once: later calls do not wait again */
    long asked = mock_llm_requests(m);
    t0 = weir__now_ms();
    pt_assert_model_info("gpt-4o-mini", 128000, 16384);
    pt_assert_model_info("served", 0, 0);
    assert_true(weir__now_ms() - t0 < 200);
    assert_int_equal(mock_llm_requests(m), asked);
    mock_llm_stop(m);
}

static void model_info_probe_of_a_closed_port_falls_back(void **state) {
    (void)state;
    mock_llm *gone = NULL;
    assert_int_equal(mock_llm_start("{}", &gone), 0);
    char *base = mock_llm_base_url(gone);
    mock_llm_stop(gone); /* nobody listens there now */
    char config[256];
    snprintf(config, sizeof config, "{\"base_url\":\"%s/v1\",\"api_key\":\"" PT_KEY "\"}", base);
    free(base);
    json_t *cfg = json_loads(config, 0, NULL);
    weir_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, cfg, &err), WEIR_OK);
    pt_assert_model_info("gpt-4o", 128000, 16384);
    pt_assert_model_info("served", 0, 0);
    pt_assert_no_secret();
    json_decref(cfg);
}

typedef struct asker {
    const char *model;
    json_t *info;
} asker;

static void *ask_model_info(void *arg) {
    asker *a = arg;
    a->info = pt_host.provider->model_info(pt_host.provider_self, a->model);
    return NULL;
}

static void model_info_probes_once_per_row(void **state) {
    (void)state;
    /* a slow answer, so that the threads' calls overlap the probe */
    mock_llm *m = pt_start_plugin(
        "{\"info_delay_ms\":200,\"models\":[{\"id\":\"a\",\"max_model_len\":1000},"
        "{\"id\":\"gpt-4o\",\"max_model_len\":2000}]}",
        ROW(""));
    enum { THREADS = 8 };
    static const char *const models[] = {"a", "gpt-4o", "b", "claude-opus-4-1"};
    pthread_t th[THREADS];
    asker askers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        askers[i] = (asker){models[i % 4], NULL};
        assert_int_equal(pthread_create(&th[i], NULL, ask_model_info, &askers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        long window = json_integer_value(json_object_get(askers[i].info, "context_window"));
        long want = i % 4 == 0 ? 1000 : i % 4 == 1 ? 2000 : i % 4 == 2 ? 0 : 200000;
        if (window != want)
            fail_msg("thread %d (%s): window %ld, want %ld", i, askers[i].model, window, want);
        json_decref(askers[i].info);
    }
    for (int i = 0; i < 20; i++)
        pt_assert_model_info(models[i % 4], i % 4 == 0 ? 1000 : i % 4 == 1 ? 2000 : i % 4 == 2 ? 0 : 200000,
                             i % 4 == 0 ? 0 : i % 4 == 1 ? 2000 : i % 4 == 2 ? 0 : 32000);
    assert_int_equal(mock_llm_requests(m), 1);
    assert_request_path(m, 0, "/v1/models");
    mock_llm_stop(m);
}

static void model_info_default_base_url_does_not_probe(void **state) {
    (void)state;
    /* api.openai.com reports no windows: no probe unless asked for (the log
     * is checked first, so that nothing here reaches the network) */
    static const char *const configs[] = {
        "{\"api_key\":\"" PT_KEY "\"}",
        "{\"base_url\":\"https://api.openai.com/v1/\",\"api_key\":\"" PT_KEY "\"}",
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        pt_plugin_setup(NULL);
        json_t *cfg = json_loads(configs[i], 0, NULL);
        weir_error err;
        memset(&err, 0, sizeof err);
        assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, cfg, &err), WEIR_OK);
        if (!strstr(pt_host.log, "window probe off"))
            fail_msg("config %zu: %s", i, pt_host.log);
        pt_assert_model_info("gpt-4o-mini", 128000, 16384);
        json_decref(cfg);
        pt_plugin_teardown(NULL);
    }
}

static void probe_config_is_checked(void **state) {
    (void)state;
    static const struct {
        const char *config, *message;
    } cases[] = {
        {"{\"probe_windows\":\"yes\"}", "config.probe_windows: expected true or false"},
        {"{\"probe_timeout_ms\":0}",
         "config.probe_timeout_ms: expected a positive integer (milliseconds)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *config = json_loads(cases[i].config, 0, NULL);
        weir_error err;
        memset(&err, 0, sizeof err);
        assert_int_equal(pt_plugin_desc->init(NULL, &pt_fake_api, config, &err),
                         WEIR_E_PLUGIN_CONFIG);
        assert_string_equal(err.text, cases[i].message);
        json_decref(config);
    }
    char msg[256];
    static const char *const good[] = {"{\"probe_windows\":false}",
                                       "{\"probe_windows\":true,\"probe_timeout_ms\":500}"};
    static const char *const bad[] = {"{\"probe_windows\":1}", "{\"probe_timeout_ms\":0}"};
    for (size_t i = 0; i < 2; i++) {
        json_t *g = json_loads(good[i], 0, NULL), *b = json_loads(bad[i], 0, NULL);
        if (weir__schema_validate_text(pt_plugin_desc->config_schema, g, msg, sizeof msg) != 0)
            fail_msg("%s: %s", good[i], msg);
        assert_int_equal(
            weir__schema_validate_text(pt_plugin_desc->config_schema, b, msg, sizeof msg), -1);
        json_decref(g);
        json_decref(b);
    }
}

/* ------------------------------------------------------------------------ */
/* Options and the model table's rules                                      */
/* ------------------------------------------------------------------------ */

/* The body of a one-message request to `model` with `members` (JSON object
 * members text, may be "") and `extra` (may be NULL); NULL with msg set. */
static json_t *body_for(const char *model, const char *members, pc_extra *extra, char *msg,
                        size_t size) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"model\":\"%s\",\"max_tokens\":100%s%s,\"messages\":[{\"role\":\"user\","
             "\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
             model, members[0] ? "," : "", members);
    json_t *request = json_loads(text, 0, NULL);
    assert_non_null(request);
    pc_memo *memo = calloc(1, sizeof *memo);
    json_t *body = openai_request_build_ex(request, extra, NULL, memo, msg, size) == 0
                       ? json_loads(memo->text.p, 0, NULL)
                       : NULL;
    pc_memo_free(memo);
    json_decref(request);
    return body;
}

/* o-series and gpt-5: max_completion_tokens (OpenAI refuses max_tokens there). */
static void request_reasoning_models_get_max_completion_tokens(void **state) {
    (void)state;
    static const char *const reasoning[] = {"o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5",
                                            "gpt-5-mini", "gpt-5.1", "gpt-5-chat-latest"};
    char msg[256];
    for (size_t i = 0; i < sizeof reasoning / sizeof reasoning[0]; i++) {
        json_t *body = body_for(reasoning[i], "", NULL, msg, sizeof msg);
        assert_non_null(body);
        if (json_integer_value(json_object_get(body, "max_completion_tokens")) != 100 ||
            json_object_get(body, "max_tokens"))
            fail_msg("%s: want max_completion_tokens 100 and no max_tokens", reasoning[i]);
        json_decref(body);
    }
    json_t *body = body_for("gpt-4o", "", NULL, msg, sizeof msg);
    assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 100);
    assert_null(json_object_get(body, "max_completion_tokens"));
    json_decref(body);
    body = body_for("llama3.1:8b", "", NULL, msg, sizeof msg); /* compatible servers */
    assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 100);
    json_decref(body);
}

/* temperature is kept out where the model refuses it, and said so. */
static void request_temperature_follows_the_model_rule(void **state) {
    (void)state;
    char msg[256];
    pc_extra extra = {0};
    json_t *body = body_for("o3", "\"temperature\":0.2", &extra, msg, sizeof msg);
    assert_non_null(body);
    assert_null(json_object_get(body, "temperature"));
    assert_true(extra.dropped_temperature);
    json_decref(body);
    /* gpt-5.1 reasons only when asked: temperature goes until it is */
    body = body_for("gpt-5.1", "\"temperature\":0.2", &extra, msg, sizeof msg);
    assert_non_null(json_object_get(body, "temperature"));
    assert_false(extra.dropped_temperature);
    json_decref(body);
    body = body_for("gpt-5.1", "\"temperature\":0.2,\"options\":{\"reasoning_effort\":\"low\"}",
                    &extra, msg, sizeof msg);
    assert_null(json_object_get(body, "temperature"));
    assert_string_equal(json_string_value(json_object_get(body, "reasoning_effort")), "low");
    assert_true(extra.dropped_temperature);
    json_decref(body);
    body = body_for("gpt-4o", "\"temperature\":0.2", &extra, msg, sizeof msg);
    assert_non_null(json_object_get(body, "temperature"));
    assert_false(extra.dropped_temperature);
    json_decref(body);
    /* an explicit temperature option on such a model is an error naming it */
    assert_null(body_for("o3", "\"options\":{\"temperature\":0.5}", NULL, msg, sizeof msg));
    assert_non_null(strstr(msg, "options.temperature: model \"o3\" refuses temperature"));
}

/* The request's options go last into the body; a null drops a member. */
static void request_options_merge_last(void **state) {
    (void)state;
    char msg[256];
    json_t *body = body_for("gpt-4o",
                            "\"temperature\":0.7,\"options\":{\"service_tier\":\"flex\","
                            "\"temperature\":null,\"parallel_tool_calls\":false,"
                            "\"metadata\":{\"a\":\"b\"}}",
                            NULL, msg, sizeof msg);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "service_tier")), "flex");
    assert_null(json_object_get(body, "temperature"));
    assert_true(json_is_false(json_object_get(body, "parallel_tool_calls")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "metadata"), "a")), "b");
    assert_true(json_is_true(json_object_get(body, "stream")));
    json_decref(body);
    /* extra->options beats the request's own */
    json_t *merged = json_pack("{s:s}", "reasoning_effort", "high");
    pc_extra extra = {.options = merged};
    body = body_for("o3", "\"options\":{\"service_tier\":\"flex\"}", &extra, msg, sizeof msg);
    assert_string_equal(json_string_value(json_object_get(body, "reasoning_effort")), "high");
    assert_null(json_object_get(body, "service_tier"));
    json_decref(body);
    json_decref(merged);
}

/* A provider-owned key in the request's options (from agent/request) is refused. */
static void request_options_refuse_owned_keys(void **state) {
    (void)state;
    static const char *const owned[] = {"model", "messages", "tools", "tool_choice", "stream",
                                        "stream_options", "max_tokens", "max_completion_tokens",
                                        "n", "functions", "function_call"};
    char msg[256], members[128];
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) {
        snprintf(members, sizeof members, "\"options\":{\"%s\":1}", owned[i]);
        assert_null(body_for("gpt-4o", members, NULL, msg, sizeof msg));
        char want[96];
        snprintf(want, sizeof want, "options.%s: \"%s\" is written by the provider", owned[i],
                 owned[i]);
        if (!strstr(msg, want))
            fail_msg("%s: %s", owned[i], msg);
    }
    assert_null(body_for("gpt-4o", "\"options\":[1]", NULL, msg, sizeof msg));
    assert_string_equal(msg, "options: expected an object (merged into the request body)");
}

/* The plugin: row options, models.<id>.options over them, the call
 * config's over both; models.<id>.headers with that model's requests. */
static void plugin_sends_options_and_model_headers(void **state) {
    (void)state;
    int rc;
    mock_llm *m = pt_run_plugin(
        "{\"requests\":[{\"text\":\"ok\"}]}",
        "{\"base_url\":\"@BASE@/v1\",\"api_key\":\"" PT_KEY "\",\"headers\":{\"X-Team\":\"t1\"},"
        "\"options\":{\"service_tier\":\"flex\",\"store\":false,\"reasoning_effort\":\"low\"},"
        "\"models\":{\"o3\":{\"options\":{\"reasoning_effort\":\"medium\",\"store\":null},"
        "\"headers\":{\"x-team\":\"t2\",\"OpenAI-Beta\":\"b1\"}}}}",
        "{\"model\":\"o3\",\"max_tokens\":50,\"temperature\":0.3,"
        "\"options\":{\"reasoning_effort\":\"high\",\"user\":\"u\"},"
        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
        &rc);
    assert_int_equal(rc, WEIR_OK);
    assert_string_equal(
        json_string_value(json_object_get(pt_finish_reason(pt_host.chunks), "kind")), "stop");
    char *body = mock_llm_request_body(m, 0), *team = mock_llm_request_header(m, 0, "x-team");
    char *beta = mock_llm_request_header(m, 0, "openai-beta");
    json_t *sent = json_loads(body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(sent, "reasoning_effort")), "high");
    assert_string_equal(json_string_value(json_object_get(sent, "service_tier")), "flex");
    assert_string_equal(json_string_value(json_object_get(sent, "user")), "u");
    assert_null(json_object_get(sent, "store"));
    assert_null(json_object_get(sent, "max_tokens"));
    assert_null(json_object_get(sent, "temperature"));
    assert_int_equal(json_integer_value(json_object_get(sent, "max_completion_tokens")), 50);
    assert_string_equal(team, "t2");
    assert_string_equal(beta, "b1");
    assert_non_null(strstr(pt_host.log, "model \"o3\" refuses temperature"));
    pt_assert_no_secret();
    json_decref(sent);
    free(body);
    free(team);
    free(beta);
    mock_llm_stop(m);
}

/* The mock refuses max_tokens and temperature as OpenAI does; weir passes. */
static void plugin_plain_request_passes_on_every_reasoning_model(void **state) {
    (void)state;
    static const char *const models[] = {"o1", "o3", "o4-mini", "gpt-5", "gpt-5-nano",
                                         "gpt-5.1"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        pt_plugin_setup(NULL);
        char request[512];
        snprintf(request, sizeof request,
                 "{\"model\":\"%s\",\"max_tokens\":64,\"temperature\":0.2,\"messages\":"
                 "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
                 models[i]);
        int rc;
        mock_llm *m = pt_run_plugin("{\"requests\":[{\"text\":\"ok\"}]}", CONFIG, request, &rc);
        assert_int_equal(rc, WEIR_OK);
        const char *kind =
            json_string_value(json_object_get(pt_finish_reason(pt_host.chunks), "kind"));
        if (!kind || strcmp(kind, "stop") != 0)
            fail_msg("%s: finish %s", models[i], kind ? kind : "(none)");
        /* one warning per row and model, however many calls */
        void *call = NULL;
        json_t *again = json_loads(request, 0, NULL);
        assert_int_equal(pt_host.provider->stream(pt_host.provider_self, call, again,
                                                  (weir_stream *)&pt_host),
                         WEIR_OK);
        json_decref(again);
        const char *first = strstr(pt_host.log, "refuses temperature");
        if (strcmp(models[i], "gpt-5.1") == 0)
            assert_null(first);
        else if (!first || strstr(first + 1, "refuses temperature"))
            fail_msg("%s: want one temperature warning: %s", models[i], pt_host.log);
        mock_llm_stop(m);
        pt_plugin_teardown(NULL);
    }
}

/* Load refuses an owned key in the row's or a model's options, naming it. */
static void plugin_refuses_owned_options_at_load(void **state) {
    (void)state;
    static const struct {
        const char *config, *want;
    } cases[] = {
        {"{\"options\":{\"model\":\"x\"}}", "config.options.model: \"model\" is written by"},
        {"{\"models\":{\"gpt-5\":{\"options\":{\"stream\":false}}}}",
         "config.models.gpt-5.options.stream: \"stream\" is written by"},
        {"{\"options\":{\"max_tokens\":5}}", "config.options.max_tokens:"},
        {"{\"options\":\"x\"}", "config.options"},
        {"{\"models\":{\"m\":{\"headers\":{\"a b\":\"x\"}}}}",
         "config.models.m.headers: \"a b\" is not a valid header name"},
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

int main(void) {
    pt_plugin_file = "weir-provider-openai.so";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_translation_matches_golden),
        cmocka_unit_test(request_without_optional_fields),
        cmocka_unit_test(request_tool_choice),
        cmocka_unit_test(request_rejects_bad_blocks),
        cmocka_unit_test(request_cache_reuses_translated_messages),
        cmocka_unit_test(request_cache_bounds_and_pinning),
        cmocka_unit_test(request_cache_releases_closed_agents),
        cmocka_unit_test(request_memo_keeps_the_shared_prefix),
        cmocka_unit_test(request_survives_allocation_failures),
        cmocka_unit_test(decode_text_stream),
        cmocka_unit_test(decode_reasoning_then_text),
        cmocka_unit_test(decode_two_parallel_tool_calls_with_fragmented_arguments),
        cmocka_unit_test(decode_length_is_max_tokens),
        cmocka_unit_test(decode_usage_mapping),
        cmocka_unit_test(decode_tool_call_without_arguments_gets_empty_object),
        cmocka_unit_test(decode_stream_without_done_marker_finishes),
        cmocka_unit_test(inband_error_is_classified),
        cmocka_unit_test(malformed_chunk_quotes_the_bytes),
        cmocka_unit_test(chunk_with_wrong_types_is_malformed),
        cmocka_unit_test(malformed_chunk_is_truncated_and_escaped),
        cmocka_unit_test(truncated_stream_is_transport),
        cmocka_unit_test(stop_without_content_is_empty_response),
        cmocka_unit_test(transport_failure_and_abort_end_the_stream),
        cmocka_unit_test(consumer_refusal_stops_all_but_the_finish),
        cmocka_unit_test(decoder_survives_allocation_failures),
        cmocka_unit_test(round_trip_loses_nothing),
        cmocka_unit_test_setup_teardown(plugin_releases_a_disposed_agents_cache_entries,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_streams_from_mock_server, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_sends_no_authorization_for_empty_key,
                                        pt_plugin_setup, pt_plugin_teardown),
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
        cmocka_unit_test_setup_teardown(model_info_knows_the_table_without_config,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(model_info_config_beats_server_and_table,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(model_info_uses_the_window_vllm_reports,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test(model_info_uses_the_n_ctx_llamacpp_reports),
        cmocka_unit_test(model_info_falls_back_to_the_table_when_the_probe_fails),
        cmocka_unit_test_setup_teardown(model_info_probe_names_a_page_that_is_not_json,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(model_info_probe_of_a_stalled_server_times_out,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(model_info_probe_of_a_closed_port_falls_back,
                                        pt_plugin_setup, pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(model_info_probes_once_per_row, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test(model_info_default_base_url_does_not_probe),
        cmocka_unit_test_setup_teardown(model_info_reports_the_price, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test_setup_teardown(probe_config_is_checked, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test(request_reasoning_models_get_max_completion_tokens),
        cmocka_unit_test(request_temperature_follows_the_model_rule),
        cmocka_unit_test(request_options_merge_last),
        cmocka_unit_test(request_options_refuse_owned_keys),
        cmocka_unit_test_setup_teardown(plugin_sends_options_and_model_headers, pt_plugin_setup,
                                        pt_plugin_teardown),
        cmocka_unit_test(plugin_plain_request_passes_on_every_reasoning_model),
        cmocka_unit_test(plugin_refuses_owned_options_at_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
