/*
 * tests/unit/test_provider_openai.c - provider-openai: request translation
 * (golden JSON), decoding of recorded Chat Completions streams, every
 * failure path, a canonical -> request -> stream -> message round trip, and
 * the built plugin (weir-provider-openai.so) driven through a fake host
 * table whose HTTP is the real core client talking to the loopback mock LLM.
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

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "failure.h"
#include "http.h"
#include "schema.h"
#include "signal.h"

#include "mock_llm.h"
#include "openai.h"
#include "testutil.h"

#define KEY "sk-test-SECRET-12345"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static char *data_path(const char *name) {
    char *p = weir__asprintf("%s/providers/%s", wt_env("WEIR_TEST_DATA_DIR"), name);
    assert_non_null(p);
    return p;
}

static char *read_data(const char *name) {
    char *path = data_path(name);
    char *text = wt_read_file(path, NULL);
    if (!text)
        fail_msg("cannot read %s", path);
    free(path);
    return text;
}

static json_t *load_data(const char *name) {
    char *text = read_data(name);
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    if (!v)
        fail_msg("%s: %s", name, jerr.text);
    free(text);
    return v;
}

static void assert_json_equal(const json_t *got, const json_t *want) {
    if (json_equal(got, want))
        return;
    char *g = json_dumps(got, JSON_INDENT(1)), *w = json_dumps(want, JSON_INDENT(1));
    print_error("got:\n%s\nwant:\n%s\n", g ? g : "(null)", w ? w : "(null)");
    free(g);
    free(w);
    fail();
}

static int collect(void *user_data, json_t *chunk) {
    assert_int_equal(json_array_append_new(user_data, chunk), 0);
    return 0;
}

/* Feed SSE text (events separated by blank lines, "data: " lines) to `d`. */
static void feed_sse(openai_decoder *d, const char *text) {
    char data[65536];
    size_t len = 0;
    const char *line = text;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (n == 0) {
            if (len)
                openai_decoder_event(d, data, len);
            len = 0;
        } else if (n >= 5 && strncmp(line, "data:", 5) == 0) {
            size_t skip = n > 5 && line[5] == ' ' ? 6 : 5;
            if (len)
                data[len++] = '\n';
            assert_true(len + n - skip < sizeof data);
            memcpy(data + len, line + skip, n - skip);
            len += n - skip;
        }
        line += n + (end ? 1 : 0);
    }
    if (len)
        openai_decoder_event(d, data, len);
}

/* Decode a whole SSE text; the chunks (new reference). */
static json_t *decode_text(const char *sse) {
    json_t *chunks = json_array();
    openai_decoder *d = openai_decoder_new("llm", collect, chunks);
    assert_non_null(d);
    feed_sse(d, sse);
    assert_int_equal(openai_decoder_end(d, NULL, false), 0);
    openai_decoder_free(d);
    return chunks;
}

static json_t *decode_file(const char *name) {
    char *sse = read_data(name);
    json_t *chunks = decode_text(sse);
    free(sse);
    return chunks;
}

/* Exactly one finish, and it is the last chunk; its reason (borrowed). */
static json_t *finish_reason(const json_t *chunks) {
    size_t n = json_array_size(chunks), finishes = 0, i;
    json_t *c;
    json_array_foreach(chunks, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "type")), "finish") == 0)
            finishes++;
    }
    assert_int_equal(finishes, 1);
    json_t *last = json_array_get(chunks, n - 1);
    assert_string_equal(json_string_value(json_object_get(last, "type")), "finish");
    return json_object_get(last, "reason");
}

static void assert_failure(const json_t *chunks, const char *kind, const char *code,
                           const char *message) {
    json_t *reason = finish_reason(chunks);
    assert_string_equal(json_string_value(json_object_get(reason, "kind")), kind);
    json_t *f = json_object_get(reason, "failure");
    assert_string_equal(json_string_value(json_object_get(f, "code")), code);
    assert_string_equal(json_string_value(json_object_get(f, "provider")), "llm");
    if (message)
        assert_string_equal(json_string_value(json_object_get(f, "message")), message);
}

/* Assemble chunks into an assistant message (as the core does); *usage gets
 * the usage chunk's object (new reference) or NULL. */
static json_t *assemble(const json_t *chunks, json_t **usage) {
    json_t *content = json_array();
    *usage = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(chunks, i, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        json_int_t index = json_integer_value(json_object_get(c, "index"));
        json_t *block = json_array_get(content, (size_t)index);
        if (strcmp(type, "block-start") == 0) {
            const char *bt = json_string_value(json_object_get(c, "block_type"));
            assert_int_equal(index, json_array_size(content));
            json_array_append_new(content,
                                  strcmp(bt, "tool_call") == 0
                                      ? json_pack("{s:s,s:s,s:s,s:s}", "type", "tool_call", "id",
                                                  "", "name", "", "arguments", "")
                                      : json_pack("{s:s,s:s}", "type", bt, "text", ""));
        } else if (strcmp(type, "text-delta") == 0 || strcmp(type, "reasoning-delta") == 0) {
            char *t = weir__asprintf("%s%s", json_string_value(json_object_get(block, "text")),
                                     json_string_value(json_object_get(c, "text")));
            json_object_set_new(block, "text", json_string(t));
            free(t);
        } else if (strcmp(type, "tool-call-delta") == 0) {
            if (json_object_get(c, "id"))
                json_object_set(block, "id", json_object_get(c, "id"));
            if (json_object_get(c, "name"))
                json_object_set(block, "name", json_object_get(c, "name"));
            char *a = weir__asprintf("%s%s", json_string_value(json_object_get(block, "arguments")),
                                     json_string_value(json_object_get(c, "arguments_delta")));
            json_object_set_new(block, "arguments", json_string(a));
            free(a);
        } else if (strcmp(type, "usage") == 0) {
            *usage = json_incref(json_object_get(c, "usage"));
        }
    }
    return json_pack("{s:s,s:o}", "role", "assistant", "content", content);
}

/* ------------------------------------------------------------------------ */
/* Request translation                                                      */
/* ------------------------------------------------------------------------ */

static void request_translation_matches_golden(void **state) {
    (void)state;
    json_t *request = load_data("request.json");
    json_t *want = load_data("openai/request.expected.json");
    char msg[256];
    json_t *body = openai_request_body(request, msg, sizeof msg);
    assert_non_null(body);
    assert_json_equal(body, want);
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
    assert_json_equal(body, want);
    json_decref(body);
    json_decref(want);
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

static void request_survives_allocation_failures(void **state) {
    (void)state;
    json_t *request = load_data("request.json");
    json_t *want = load_data("openai/request.expected.json");
    for (long n = 1;; n++) {
        char msg[256] = "";
        weir__alloc_fail_after(n);
        json_t *body = openai_request_body(request, msg, sizeof msg);
        weir__alloc_fail_after(-1);
        if (body) {
            assert_json_equal(body, want);
            json_decref(body);
            break;
        }
        assert_string_equal(msg, "out of memory");
        assert_true(n < 100000);
    }
    json_decref(want);
    json_decref(request);
}

/* ------------------------------------------------------------------------ */
/* Decoding recorded streams                                                */
/* ------------------------------------------------------------------------ */

static void check_stream(const char *sse, const char *expected) {
    json_t *chunks = decode_file(sse);
    json_t *want = load_data(expected);
    assert_json_equal(chunks, want);
    finish_reason(chunks);
    json_decref(want);
    json_decref(chunks);
}

static void decode_text_stream(void **state) {
    (void)state;
    check_stream("openai/text.sse", "openai/text.chunks.json");
}

static void decode_reasoning_then_text(void **state) {
    (void)state;
    check_stream("openai/reasoning.sse", "openai/reasoning.chunks.json");
}

static void decode_two_parallel_tool_calls_with_fragmented_arguments(void **state) {
    (void)state;
    check_stream("openai/tool_calls.sse", "openai/tool_calls.chunks.json");
    json_t *chunks = decode_file("openai/tool_calls.sse"), *usage;
    json_t *message = assemble(chunks, &usage);
    json_t *want = json_loads(
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Computing.\"},"
        "{\"type\":\"tool_call\",\"id\":\"call_a\",\"name\":\"pow\",\"arguments\":\"{\\\"x\\\":2,\\\"y\\\":10}\"},"
        "{\"type\":\"tool_call\",\"id\":\"call_b\",\"name\":\"sqrt\",\"arguments\":\"{\\\"x\\\":16}\"}]}",
        0, NULL);
    assert_json_equal(message, want);
    json_decref(want);
    json_decref(message);
    json_decref(usage);
    json_decref(chunks);
}

static void decode_length_is_max_tokens(void **state) {
    (void)state;
    check_stream("openai/length.sse", "openai/length.chunks.json");
}

static void decode_usage_mapping(void **state) {
    (void)state;
    /* input = prompt - cached; cache and reasoning tokens only when given */
    json_t *chunks = decode_text(
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n"
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":50,"
        "\"prompt_tokens_details\":{\"cached_tokens\":1500},"
        "\"completion_tokens_details\":{\"reasoning_tokens\":20}}}\n\n"
        "data: [DONE]\n\n");
    json_t *usage = json_array_get(chunks, json_array_size(chunks) - 2);
    json_t *want = json_pack("{s:s,s:{s:i,s:i,s:i,s:i}}", "type", "usage", "usage",
                             "input_tokens", 500, "output_tokens", 50, "cache_read_tokens", 1500,
                             "reasoning_tokens", 20);
    assert_json_equal(usage, want);
    json_decref(want);
    json_decref(chunks);
}

static void decode_tool_call_without_arguments_gets_empty_object(void **state) {
    (void)state;
    json_t *chunks = decode_text(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\","
        "\"function\":{\"name\":\"now\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n");
    json_t *usage, *message = assemble(chunks, &usage);
    json_t *want = json_pack("{s:s,s:[{s:s,s:s,s:s,s:s}]}", "role", "assistant", "content",
                             "type", "tool_call", "id", "c1", "name", "now", "arguments", "{}");
    assert_json_equal(message, want);
    /* a compatible server saying "stop" with tool calls still means tool-calls */
    assert_string_equal(json_string_value(json_object_get(finish_reason(chunks), "kind")),
                        "tool-calls");
    assert_null(usage);
    json_decref(want);
    json_decref(message);
    json_decref(chunks);
}

static void decode_stream_without_done_marker_finishes(void **state) {
    (void)state;
    json_t *chunks = decode_text(
        "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n");
    assert_string_equal(json_string_value(json_object_get(finish_reason(chunks), "kind")),
                        "stop");
    json_decref(chunks);
}

/* ------------------------------------------------------------------------ */
/* Failure paths                                                            */
/* ------------------------------------------------------------------------ */

static void inband_error_is_classified(void **state) {
    (void)state;
    json_t *chunks = decode_file("openai/inband_error.sse");
    assert_failure(chunks, "error", "OVERLOADED",
                   "in-band error from the provider: overloaded_error: Overloaded");
    json_decref(chunks);
    chunks = decode_text("data: {\"error\":{\"message\":\"This model's maximum context length "
                         "is 8192 tokens\",\"type\":\"invalid_request_error\","
                         "\"code\":\"context_length_exceeded\"}}\n\n");
    assert_failure(chunks, "error", "CONTEXT_WINDOW_EXCEEDED", NULL);
    json_decref(chunks);
}

static void malformed_chunk_quotes_the_bytes(void **state) {
    (void)state;
    json_t *chunks = decode_file("openai/malformed.sse");
    /* the first text delta went out, then the failure; [DONE] is ignored */
    assert_string_equal(json_string_value(json_object_get(json_array_get(chunks, 1), "text")),
                        "Hi");
    assert_failure(chunks, "error", "TRANSPORT",
                   "malformed stream chunk (invalid JSON): {\"id\":\"c8\",\"choices\":"
                   "[{\"index\":0,\"delta\":{\"content\":\"x\"");
    json_decref(chunks);
}

static void chunk_with_wrong_types_is_malformed(void **state) {
    (void)state;
    json_t *chunks = decode_file("openai/wrong_type.sse");
    assert_failure(chunks, "error", "TRANSPORT",
                   "malformed stream chunk (delta.content is not a string): {\"id\":\"c9\","
                   "\"choices\":[{\"index\":0,\"delta\":{\"content\":42},\"finish_reason\":null}]}");
    assert_int_equal(json_array_size(chunks), 1);
    json_decref(chunks);
}

static void malformed_chunk_is_truncated_and_escaped(void **state) {
    (void)state;
    char data[600];
    memset(data, 'a', sizeof data);
    data[0] = '\x01';
    data[1] = '\\';
    data[2] = '\xff';
    json_t *chunks = json_array();
    openai_decoder *d = openai_decoder_new("llm", collect, chunks);
    assert_int_not_equal(openai_decoder_event(d, data, sizeof data), 0);
    openai_decoder_end(d, NULL, false);
    openai_decoder_free(d);
    char want[400];
    int n = snprintf(want, sizeof want, "malformed stream chunk (invalid JSON): \\x01\\\\\\xff");
    memset(want + n, 'a', 197);
    strcpy(want + n + 197, "...");
    assert_failure(chunks, "error", "TRANSPORT", want);
    json_decref(chunks);
}

static void truncated_stream_is_transport(void **state) {
    (void)state;
    json_t *chunks = decode_file("openai/truncated.sse");
    assert_failure(chunks, "error", "TRANSPORT", "stream ended before finish");
    json_decref(chunks);
    chunks = decode_text("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n");
    assert_failure(chunks, "error", "TRANSPORT",
                   "stream ended before finish ([DONE] without finish_reason)");
    json_decref(chunks);
}

static void stop_without_content_is_empty_response(void **state) {
    (void)state;
    json_t *chunks = decode_file("openai/empty.sse");
    assert_failure(chunks, "error", "EMPTY_RESPONSE", "the model finished without any content");
    assert_int_equal(json_array_size(chunks), 1);
    json_decref(chunks);
}

static void transport_failure_and_abort_end_the_stream(void **state) {
    (void)state;
    json_t *chunks = json_array();
    openai_decoder *d = openai_decoder_new("llm", collect, chunks);
    feed_sse(d, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n");
    openai_decoder_end(d, json_pack("{s:s,s:s}", "code", "TIMEOUT", "message", "idle"), false);
    openai_decoder_free(d);
    assert_failure(chunks, "error", "TIMEOUT", "idle");
    json_decref(chunks);

    chunks = json_array();
    d = openai_decoder_new("llm", collect, chunks);
    openai_decoder_end(d, json_pack("{s:s,s:s,s:s}", "code", "ABORTED", "message", "cancelled",
                                    "provider", "llm"),
                       false);
    openai_decoder_free(d);
    assert_failure(chunks, "aborted", "ABORTED", "cancelled");
    json_decref(chunks);

    chunks = json_array();
    d = openai_decoder_new("llm", collect, chunks);
    openai_decoder_end(d, NULL, true);
    openai_decoder_free(d);
    assert_failure(chunks, "aborted", "ABORTED", "the call was cancelled");
    json_decref(chunks);
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
    assert_failure(chunks, "aborted", "ABORTED", NULL);
    json_decref(chunks);
}

/* Keeps what it can; counts finishes. */
static int collect_lossy(void *user_data, json_t *chunk) {
    int *finishes = user_data;
    if (strcmp(json_string_value(json_object_get(chunk, "type")), "finish") == 0)
        (*finishes)++;
    json_decref(chunk);
    return 0;
}

static void decoder_survives_allocation_failures(void **state) {
    (void)state;
    char *sse = read_data("openai/tool_calls.sse");
    for (long n = 1;; n++) {
        int finishes = 0;
        weir__alloc_fail_after(n);
        openai_decoder *d = openai_decoder_new("llm", collect_lossy, &finishes);
        int end = -1;
        if (d) {
            feed_sse(d, sse);
            end = openai_decoder_end(d, NULL, false);
            openai_decoder_free(d);
        }
        long used = weir__alloc_fail_after(-1);
        /* exactly one finish unless the finish itself could not be built */
        assert_int_equal(finishes, end == 0 ? 1 : 0);
        if (used < n)
            break; /* nothing failed: the whole stream decoded */
        assert_true(n < 100000);
    }
    free(sse);
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
    openai_decoder *d = openai_decoder_new("llm", collect, chunks);
    json_t *ev;
    json_array_foreach(events, i, ev) {
        char *text = json_dumps(ev, JSON_COMPACT);
        assert_int_equal(openai_decoder_event(d, text, strlen(text)), 0);
        free(text);
    }
    assert_int_equal(openai_decoder_event(d, "[DONE]", 6), 0);
    openai_decoder_end(d, NULL, false);
    openai_decoder_free(d);

    json_t *usage, *message = assemble(chunks, &usage);
    assert_json_equal(message, assistant);
    json_t *want_usage = json_pack("{s:i,s:i}", "input_tokens", 40, "output_tokens", 25);
    assert_json_equal(usage, want_usage);
    assert_string_equal(json_string_value(json_object_get(finish_reason(chunks), "kind")),
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

typedef struct fake_host {
    const weir_provider *provider;
    void *provider_self;
    void *data;
    json_t *chunks;
    char log[8192];
    weir__http *http;
    weir_signal signal;
    const char *cancel_on; /* chunk type whose arrival cancels the signal */
} fake_host;

static fake_host H;

static const char *fake_plugin_id(const weir_plugin *self) {
    (void)self;
    return "llm";
}
static void fake_set_data(weir_plugin *self, void *data) {
    (void)self;
    H.data = data;
}
static void *fake_data(const weir_plugin *self) {
    (void)self;
    return H.data;
}
static void fake_log(const weir_plugin *self, weir_log_level level, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static void fake_log(const weir_plugin *self, weir_log_level level, const char *fmt, ...) {
    (void)self;
    (void)level;
    size_t used = strlen(H.log);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(H.log + used, sizeof H.log - used, fmt, ap);
    va_end(ap);
}
static int fake_register(weir_plugin *self, const weir_provider *provider, void *self_ptr) {
    (void)self;
    H.provider = provider;
    H.provider_self = self_ptr;
    return WEIR_OK;
}
static int fake_emit(weir_stream *stream, json_t *chunk) {
    (void)stream;
    const char *type = json_string_value(json_object_get(chunk, "type"));
    if (H.cancel_on && type && strcmp(type, H.cancel_on) == 0)
        weir__signal_cancel(&H.signal, "user");
    bool cancelled = weir__signal_cancelled(&H.signal);
    json_array_append_new(H.chunks, chunk);
    return cancelled ? WEIR_E_CANCELLED : WEIR_OK;
}
static weir_signal *fake_stream_signal(weir_stream *stream) {
    (void)stream;
    return &H.signal;
}
static int fake_http_sse(weir_stream *stream, const weir_http_request *req, weir_sse_fn on_event,
                         void *ud, weir_http_response *resp, json_t **failure) {
    (void)stream;
    return weir__http_sse(H.http, &H.signal, req, on_event, ud, resp, failure);
}
static json_t *fake_failure_new(const char *provider, const char *code, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
static json_t *fake_failure_new(const char *provider, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    json_t *f = weir__failure_vnew(provider, code, fmt, ap);
    va_end(ap);
    return f;
}

static const weir_api fake_api = {
    .abi_major = WEIR_ABI_MAJOR,
    .abi_minor = WEIR_ABI_MINOR,
    .struct_size = sizeof(weir_api),
    .plugin_id = fake_plugin_id,
    .plugin_set_data = fake_set_data,
    .plugin_data = fake_data,
    .log = fake_log,
    .signal_cancelled = weir__signal_cancelled,
    .provider_register = fake_register,
    .stream_emit = fake_emit,
    .stream_signal = fake_stream_signal,
    .http_sse = fake_http_sse,
    .http_response_clear = weir__http_response_clear,
    .failure_from_http = weir__failure_from_http,
    .failure_new = fake_failure_new,
};

static void *plugin_handle;
static const weir_plugin_desc *plugin_desc;

static int plugin_setup(void **state) {
    (void)state;
    if (!plugin_handle) {
        char *path = weir__asprintf("%s/weir-provider-openai.so", wt_env("WEIR_TEST_PLUGIN_DIR"));
        plugin_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!plugin_handle)
            fail_msg("dlopen %s: %s", path, dlerror());
        free(path);
        weir_plugin_describe_fn describe =
            (weir_plugin_describe_fn)dlsym(plugin_handle, WEIR_PLUGIN_ENTRY_SYMBOL);
        assert_non_null(describe);
        plugin_desc = describe();
    }
    memset(&H, 0, sizeof H);
    assert_int_equal(weir__signal_init(&H.signal), 0);
    assert_int_equal(weir__http_create(&H.http), 0);
    H.chunks = json_array();
    return 0;
}

static int plugin_teardown(void **state) {
    (void)state;
    if (plugin_desc->fini && H.data)
        plugin_desc->fini(NULL);
    weir__http_destroy(H.http);
    weir__signal_destroy(&H.signal);
    json_decref(H.chunks);
    return 0;
}

/* `tmpl` with its one "@BASE@" replaced by `base` (malloc'd). */
static char *with_base(const char *tmpl, const char *base) {
    const char *at = strstr(tmpl, "@BASE@");
    assert_non_null(at);
    char *out = weir__asprintf("%.*s%s%s", (int)(at - tmpl), tmpl, base, at + 6);
    assert_non_null(out);
    return out;
}

/* Start the mock with `script`, init the plugin with `config_tmpl` (its
 * "@BASE@" is the mock's base URL), run one stream of `request_json` (NULL:
 * request.json). */
static mock_llm *run_plugin(const char *script, const char *config_tmpl,
                            const char *request_json, int *rc) {
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start(script, &m), 0);
    char *base = mock_llm_base_url(m);
    char *config_text = with_base(config_tmpl, base);
    json_t *config = json_loads(config_text, 0, NULL);
    assert_non_null(config);
    weir_error err;
    memset(&err, 0, sizeof err);
    assert_int_equal(plugin_desc->init(NULL, &fake_api, config, &err), WEIR_OK);
    assert_non_null(H.provider);
    json_t *request = request_json ? json_loads(request_json, 0, NULL) : load_data("request.json");
    assert_non_null(request);
    void *call = NULL;
    assert_int_equal(H.provider->prepare_call(H.provider_self, request, &H.signal, &call, &err),
                     WEIR_OK);
    *rc = H.provider->stream(H.provider_self, call, request, (weir_stream *)&H);
    json_decref(request);
    json_decref(config);
    free(config_text);
    free(base);
    return m;
}

#define CONFIG "{\"base_url\":\"@BASE@/v1\",\"api_key\":\"" KEY "\",\"headers\":{\"X-Team\":\"t1\"}," \
               "\"models\":{\"test-model\":{\"context_window\":1000,\"max_output\":100}}}"

static void assert_no_secret(void) {
    char *dump = json_dumps(H.chunks, JSON_COMPACT);
    assert_null(strstr(dump, "SECRET"));
    assert_null(strstr(H.log, "SECRET"));
    free(dump);
}

static void plugin_streams_from_mock_server(void **state) {
    (void)state;
    int rc;
    mock_llm *m = run_plugin(
        "{\"requests\":[{\"text\":\"Hello there\",\"reasoning\":\"hm\",\"chunk_size\":4,"
        "\"usage\":{\"input_tokens\":7,\"output_tokens\":3}}]}",
        CONFIG, NULL, &rc);
    assert_int_equal(rc, WEIR_OK);
    char *path = mock_llm_request_path(m, 0), *auth = mock_llm_request_header(m, 0, "authorization");
    char *team = mock_llm_request_header(m, 0, "x-team"), *body = mock_llm_request_body(m, 0);
    assert_string_equal(path, "/v1/chat/completions");
    assert_string_equal(auth, "Bearer " KEY);
    assert_string_equal(team, "t1");
    json_t *sent = json_loads(body, 0, NULL), *want = load_data("openai/request.expected.json");
    assert_json_equal(sent, want);
    json_t *usage, *message = assemble(H.chunks, &usage);
    json_t *want_msg = json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}]}", "role", "assistant", "content",
                                 "type", "reasoning", "text", "hm", "type", "text", "text",
                                 "Hello there");
    assert_json_equal(message, want_msg);
    assert_int_equal(json_integer_value(json_object_get(usage, "input_tokens")), 7);
    assert_string_equal(json_string_value(json_object_get(finish_reason(H.chunks), "kind")), "stop");
    json_t *info = H.provider->model_info(H.provider_self, "test-model");
    json_t *want_info = json_pack("{s:i,s:i}", "context_window", 1000, "max_output", 100);
    assert_json_equal(info, want_info);
    assert_null(H.provider->model_info(H.provider_self, "other"));
    assert_no_secret();
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
    mock_llm *m = run_plugin("{\"requests\":[{\"text\":\"ok\"}]}",
                             "{\"base_url\":\"@BASE@/v1/\",\"api_key\":\"\"}", NULL, &rc);
    char *auth = mock_llm_request_header(m, 0, "authorization");
    char *path = mock_llm_request_path(m, 0);
    assert_null(auth);
    assert_string_equal(path, "/v1/chat/completions");
    free(path);
    mock_llm_stop(m);
}

/* True when `code` is one of the '|'-separated codes in `list`. */
static bool code_in(const char *list, const char *code) {
    size_t n = code ? strlen(code) : 0;
    for (const char *p = list; code && p; p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL)
        if (strncmp(p, code, n) == 0 && (p[n] == '|' || p[n] == '\0'))
            return true;
    return false;
}

static void plugin_maps_every_fault(void **state) {
    (void)state;
    static const struct {
        const char *fault, *kind, *code;
    } cases[] = {
        {"rate_limit", "error", "RATE_LIMIT"},
        {"server_error", "error", "SERVER"},
        /* OpenAI's 503 "engine is currently overloaded": the core classifier
         * (core/failure.c) decides between OVERLOADED and SERVER */
        {"overloaded", "error", "OVERLOADED|SERVER"},
        {"auth", "error", "AUTH"},
        {"overflow", "error", "CONTEXT_WINDOW_EXCEEDED"},
        {"reset", "error", "TRANSPORT"},
        {"malformed", "error", "TRANSPORT"},
        {"truncated", "error", "TRANSPORT"},
        {"inband_error", "error", "OVERLOADED"},
        {"stall", "error", "TIMEOUT"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plugin_setup(NULL);
        char script[256];
        snprintf(script, sizeof script,
                 "{\"requests\":[{\"text\":\"Hello there, friend\",\"fault\":\"%s\"}]}",
                 cases[i].fault);
        int rc;
        mock_llm *m = run_plugin(
            script,
            "{\"base_url\":\"@BASE@/v1\",\"api_key\":\"" KEY "\",\"stream_idle_timeout_ms\":300}",
            NULL, &rc);
        assert_int_equal(rc, WEIR_OK);
        json_t *reason = finish_reason(H.chunks);
        json_t *f = json_object_get(reason, "failure");
        const char *code = json_string_value(json_object_get(f, "code"));
        if (!code_in(cases[i].code, code))
            fail_msg("fault %s: got %s (%s)", cases[i].fault, code ? code : "(none)",
                     json_string_value(json_object_get(f, "message")));
        assert_string_equal(json_string_value(json_object_get(reason, "kind")), cases[i].kind);
        assert_string_equal(json_string_value(json_object_get(f, "provider")), "llm");
        if (strcmp(cases[i].fault, "rate_limit") == 0)
            assert_int_equal(json_integer_value(json_object_get(f, "retry_after_ms")), 1000);
        assert_no_secret();
        mock_llm_stop(m);
        plugin_teardown(NULL);
    }
}

static void plugin_cancel_mid_stream_is_aborted(void **state) {
    (void)state;
    H.cancel_on = "text-delta";
    int rc;
    mock_llm *m = run_plugin(
        "{\"requests\":[{\"text\":\"a long answer in many pieces\",\"chunk_size\":2}]}", CONFIG,
        NULL, &rc);
    assert_int_equal(rc, WEIR_OK);
    assert_failure(H.chunks, "aborted", "ABORTED", NULL);
    mock_llm_stop(m);
}

static void plugin_rejects_bad_config_and_call_config(void **state) {
    (void)state;
    static const struct {
        const char *config, *message;
    } cases[] = {
        {"{\"headers\":{\"Bad Name\":\"x\"}}", "config.headers: \"Bad Name\" is not a valid header name"},
        {"{\"headers\":{\"X-A\":\"a\\r\\nInjected: " KEY "\"}}",
         "config.headers.X-A: the value must be a string without line breaks"},
        {"{\"connect_timeout_ms\":0}", "config.connect_timeout_ms: expected a positive integer (milliseconds)"},
        {"{\"models\":{\"m\":{\"context_window\":\"big\"}}}",
         "config.models.m: expected {context_window, max_output} positive integers"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *config = json_loads(cases[i].config, 0, NULL);
        assert_non_null(config);
        weir_error err;
        memset(&err, 0, sizeof err);
        assert_int_equal(plugin_desc->init(NULL, &fake_api, config, &err), WEIR_E_PLUGIN_CONFIG);
        assert_string_equal(err.text, cases[i].message);
        assert_string_equal(err.plugin, "llm");
        json_decref(config);
    }
    json_t *config = json_object();
    weir_error err;
    assert_int_equal(plugin_desc->init(NULL, &fake_api, config, &err), WEIR_OK);
    void *call = NULL;
    json_t *bad = json_pack("{s:s,s:s,s:i}", "provider", "llm", "model", "m", "max_tokens", 0);
    assert_int_equal(H.provider->prepare_call(H.provider_self, bad, &H.signal, &call, &err),
                     WEIR_E_INVAL);
    assert_string_equal(err.text, "call config: \"max_tokens\" must be a positive integer");
    json_decref(bad);
    bad = json_pack("{s:s,s:f}", "model", "m", "temperature", 3.0);
    assert_int_equal(H.provider->prepare_call(H.provider_self, bad, &H.signal, &call, &err),
                     WEIR_E_INVAL);
    assert_string_equal(err.text, "call config: \"temperature\" must be a number from 0 to 2");
    json_decref(bad);
    bad = json_pack("{s:s}", "provider", "llm");
    assert_int_equal(H.provider->prepare_call(H.provider_self, bad, &H.signal, &call, &err),
                     WEIR_E_INVAL);
    assert_string_equal(err.text, "call config: \"model\" must be a non-empty string");
    json_decref(bad);
    json_decref(config);
}

static void plugin_config_schema_accepts_the_documented_shape(void **state) {
    (void)state;
    assert_string_equal(plugin_desc->name, "provider-openai");
    static const char *const good[] = {
        "{}",
        "{\"base_url\":\"http://127.0.0.1:1\",\"api_key\":\"k\",\"headers\":{\"X-A\":\"b\"},"
        "\"models\":{\"m\":{\"context_window\":128000,\"max_output\":16384}},"
        "\"connect_timeout_ms\":10000,\"stream_idle_timeout_ms\":300000}",
    };
    static const char *const bad[] = {
        "{\"base_url\":1}",
        "{\"headers\":{\"X-A\":1}}",
        "{\"models\":{\"m\":{\"context_window\":0}}}",
        "{\"connect_timeout_ms\":\"10\"}",
        "{\"api_keys\":\"typo\"}",
    };
    char msg[256];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        json_t *config = json_loads(good[i], 0, NULL);
        if (weir__schema_validate_text(plugin_desc->config_schema, config, msg, sizeof msg) != 0)
            fail_msg("%s: %s", good[i], msg);
        json_decref(config);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *config = json_loads(bad[i], 0, NULL);
        assert_int_equal(
            weir__schema_validate_text(plugin_desc->config_schema, config, msg, sizeof msg), -1);
        json_decref(config);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_translation_matches_golden),
        cmocka_unit_test(request_without_optional_fields),
        cmocka_unit_test(request_rejects_bad_blocks),
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
        cmocka_unit_test_setup_teardown(plugin_streams_from_mock_server, plugin_setup,
                                        plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_sends_no_authorization_for_empty_key,
                                        plugin_setup, plugin_teardown),
        cmocka_unit_test(plugin_maps_every_fault),
        cmocka_unit_test_setup_teardown(plugin_cancel_mid_stream_is_aborted, plugin_setup,
                                        plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_rejects_bad_config_and_call_config, plugin_setup,
                                        plugin_teardown),
        cmocka_unit_test_setup_teardown(plugin_config_schema_accepts_the_documented_shape, plugin_setup,
                                        plugin_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
