/*
 * tests/unit/test_mock_llm.c - the mock LLM server's vendor rules (issue
 * #32 item 7; tests/support/mock_llm.h): each rule refuses the request that
 * breaks it and takes the one that keeps it, so the suite's loops
 * (real_models_*) fail whenever weir breaks one.  Raw HTTP over a loopback
 * socket: the test checks the server, not a client.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mock_llm.h"

/* the request templates below are format strings held in variables */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

/* POST `body` to `path` with the header lines `extra` ("Name: v\r\n"...);
 * returns the status, *resp the whole response (malloc'd). */
static int post_h(mock_llm *m, const char *path, const char *extra, const char *body,
                  char **resp);

/* POST `body` to `path`; returns the status, *resp the whole response (malloc'd). */
static int post(mock_llm *m, const char *path, const char *body, char **resp) {
    return post_h(m, path, "", body, resp);
}

static int post_h(mock_llm *m, const char *path, const char *extra, const char *body,
                  char **resp) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)mock_llm_port(m))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "%sContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     path, extra, strlen(body));
    assert_int_equal(write(fd, head, (size_t)n), n);
    assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);
    assert_non_null(buf);
    ssize_t r;
    while ((r = read(fd, buf + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (cap - len < 1024) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    close(fd);
    int status = 0;
    sscanf(buf, "HTTP/1.1 %d", &status);
    *resp = buf;
    return status;
}

/* The value of the JSON string member `key` in text (the first one), malloc'd. */
static char *member(const char *text, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(text, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    const char *e = strchr(p, '"');
    return strndup(p, (size_t)(e - p));
}

static mock_llm *start(const char *script) {
    mock_llm *m = NULL;
    assert_int_equal(mock_llm_start(script, &m), 0);
    return m;
}

static const char *const loop_script =
    "{\"loop\":true,\"requests\":[{\"reasoning\":\"think\",\"tool_calls\":[{\"id\":\"c1\","
    "\"name\":\"f\",\"arguments\":\"{}\"}]}]}";

/* Claude: thinking modes per model, budget and temperature */
static void claude_thinking_parameters(void **state) {
    (void)state;
    mock_llm *m = start(loop_script);
    char *r;
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char body[512];
    snprintf(body, sizeof body, "{\"model\":\"claude-opus-4-7\",\"max_tokens\":4096,"
             "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048},%s}", msgs);
    assert_int_equal(post(m, "/v1/messages", body, &r), 400);
    assert_non_null(strstr(r, "thinking.type.enabled"));
    free(r);
    snprintf(body, sizeof body, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":2048,"
             "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048},%s}", msgs);
    assert_int_equal(post(m, "/v1/messages", body, &r), 400);
    assert_non_null(strstr(r, "greater than `thinking.budget_tokens`"));
    free(r);
    snprintf(body, sizeof body, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":2048,"
             "\"thinking\":{\"type\":\"adaptive\"},%s}", msgs);
    assert_int_equal(post(m, "/v1/messages", body, &r), 400);
    free(r);
    snprintf(body, sizeof body, "{\"model\":\"claude-fable-5\",\"max_tokens\":2048,"
             "\"temperature\":0.2,%s}", msgs);
    assert_int_equal(post(m, "/v1/messages", body, &r), 400);
    assert_non_null(strstr(r, "temperature"));
    free(r);
    /* thinking always on for Fable 5: the reply starts with a signed block */
    snprintf(body, sizeof body, "{\"model\":\"claude-fable-5\",\"max_tokens\":2048,%s}", msgs);
    assert_int_equal(post(m, "/v1/messages", body, &r), 200);
    assert_non_null(strstr(r, "signature_delta"));
    free(r);
    assert_int_equal(mock_llm_rejections(m), 4);
    mock_llm_stop(m);
}

/* Claude: signatures bound to their prefix; the final assistant message's thinking */
static void claude_signatures_and_prefix(void **state) {
    (void)state;
    mock_llm *m = start(loop_script);
    const char *first = "{\"model\":\"claude-opus-4-7\",\"max_tokens\":2048,\"thinking\":{\"type\":"
                        "\"adaptive\"},\"system\":\"S\",\"messages\":[{\"role\":\"user\","
                        "\"content\":\"hi\"}]}";
    char *r;
    assert_int_equal(post(m, "/v1/messages", first, &r), 200);
    char *sig = member(r, "signature");
    assert_non_null(sig);
    free(r);
    char body[2048];
    const char *fmt = "{\"model\":\"%s\",\"max_tokens\":2048,\"thinking\":{\"type\":\"adaptive\"},"
                      "\"system\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                      "{\"role\":\"assistant\",\"content\":[%s{\"type\":\"tool_use\",\"id\":\"c1\","
                      "\"name\":\"f\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":"
                      "\"tool_result\",\"tool_use_id\":\"c1\",\"content\":\"ok\"}]}]}";
    char block[512];
    snprintf(block, sizeof block, "{\"type\":\"thinking\",\"thinking\":\"think\",\"signature\":\"%s\"},",
             sig);
    /* sent back as received: taken */
    snprintf(body, sizeof body, fmt, "claude-opus-4-7", "S", block);
    assert_int_equal(post(m, "/v1/messages", body, &r), 200);
    free(r);
    /* the system prompt changed after the block was made: the prefix check */
    snprintf(body, sizeof body, fmt, "claude-opus-4-7", "S2", block);
    assert_int_equal(post(m, "/v1/messages", body, &r), 400);
    assert_non_null(strstr(r, "signature does not match"));
    free(r);
    /* the text changed: the signature fails */
    snprintf(block, sizeof block, "{\"type\":\"thinking\",\"thinking\":\"thunk\",\"signature\":\"%s\"},",
             sig);
    snprintf(body, sizeof body, fmt, "claude-opus-4-7", "S", block);
    assert_int_equal(post(m, "/v1/messages", body, &r), 400);
    assert_non_null(strstr(r, "Invalid `signature`"));
    free(r);
    /* dropped: the final assistant message must start with thinking */
    snprintf(body, sizeof body, fmt, "claude-opus-4-7", "S", "");
    assert_int_equal(post(m, "/v1/messages", body, &r), 400);
    assert_non_null(strstr(r, "Expected `thinking` or `redacted_thinking`, but found `tool_use`"));
    free(r);
    /* another model's block: dropped without an error */
    snprintf(block, sizeof block, "{\"type\":\"thinking\",\"thinking\":\"think\",\"signature\":\"%s\"},",
             sig);
    snprintf(body, sizeof body, fmt, "claude-opus-4-8", "S", block);
    assert_int_equal(post(m, "/v1/messages", body, &r), 200);
    free(r);
    char *out = mock_llm_request_outcome(m, mock_llm_requests(m) - 1);
    assert_non_null(strstr(out, "\"dropped_thinking\":1"));
    free(out);
    free(sig);
    mock_llm_stop(m);
}

/* Claude: at most 4 breakpoints; cache writes, reads and the minimum */
static void claude_cache(void **state) {
    (void)state;
    mock_llm *m = start("{\"loop\":true,\"requests\":[{\"text\":\"ok\"}]}");
    char *big = malloc(8001);
    memset(big, 'a', 8000);
    big[8000] = '\0';
    size_t cap = 20000;
    char *body = malloc(cap);
    const char *cc = ",\"cache_control\":{\"type\":\"ephemeral\"}";
    snprintf(body, cap, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":100,\"messages\":[{\"role\":"
             "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"%s},{\"type\":\"text\",\"text\":"
             "\"b\"%s},{\"type\":\"text\",\"text\":\"c\"%s},{\"type\":\"text\",\"text\":\"d\"%s},"
             "{\"type\":\"text\",\"text\":\"e\"%s}]}]}", cc, cc, cc, cc, cc);
    char *r;
    assert_int_equal(post(m, "/v1/messages", body, &r), 400);
    assert_non_null(strstr(r, "A maximum of 4 blocks with cache_control may be provided. Found 5."));
    free(r);
    /* 8000 characters (2000 tokens) of system with a breakpoint: written, then read */
    snprintf(body, cap, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":100,\"system\":[{\"type\":"
             "\"text\",\"text\":\"%s\"%s}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
             big, cc);
    assert_int_equal(post(m, "/v1/messages", body, &r), 200);
    assert_null(strstr(r, "\"cache_creation_input_tokens\":0"));
    assert_non_null(strstr(r, "\"cache_read_input_tokens\":0"));
    free(r);
    assert_int_equal(post(m, "/v1/messages", body, &r), 200);
    assert_non_null(strstr(r, "\"cache_creation_input_tokens\":0"));
    assert_null(strstr(r, "\"cache_read_input_tokens\":0"));
    free(r);
    /* Opus 4.7's minimum is 4096 tokens: 2000 are never written */
    memcpy(strstr(body, "claude-sonnet-4-5"), "claude-opus-4-7  ", 17);
    assert_int_equal(post(m, "/v1/messages", body, &r), 200);
    assert_non_null(strstr(r, "\"cache_creation_input_tokens\":0"));
    free(r);
    assert_true(mock_llm_cache_read_tokens(m) > 1900);
    free(big);
    free(body);
    mock_llm_stop(m);
}

/* DeepSeek: reasoning_content sent back; Gemini: thought signatures */
static void deepseek_and_gemini(void **state) {
    (void)state;
    mock_llm *m = start(loop_script);
    const char *fmt = "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                      "{\"role\":\"assistant\",\"content\":null,%s\"tool_calls\":[{\"id\":\"c1\","
                      "\"type\":\"function\",%s\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
                      "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}]}";
    char body[1024], *r;
    snprintf(body, sizeof body, fmt, "deepseek-reasoner", "", "");
    assert_int_equal(post(m, "/v1/chat/completions", body, &r), 400);
    assert_non_null(strstr(r, "The reasoning_content in the thinking mode must be passed back"));
    free(r);
    snprintf(body, sizeof body, fmt, "deepseek-reasoner", "\"reasoning_content\":\"t\",", "");
    assert_int_equal(post(m, "/v1/chat/completions", body, &r), 200);
    assert_non_null(strstr(r, "reasoning_content"));
    free(r);
    snprintf(body, sizeof body, fmt, "gemini-3-flash", "", "");
    assert_int_equal(post(m, "/v1/chat/completions", body, &r), 400);
    assert_non_null(strstr(r, "Function call is missing a thought_signature in functionCall parts"));
    free(r);
    /* the signature the first step got goes back on its call */
    const char *one = "{\"model\":\"gemini-3-flash\",\"messages\":[{\"role\":\"user\",\"content\":"
                      "\"hi\"}]}";
    assert_int_equal(post(m, "/v1/chat/completions", one, &r), 200);
    char *sig = member(r, "thought_signature");
    assert_non_null(sig);
    free(r);
    char extra[256];
    snprintf(extra, sizeof extra, "\"extra_content\":{\"google\":{\"thought_signature\":\"%s\"}},", sig);
    snprintf(body, sizeof body, fmt, "gemini-3-flash", "", extra);
    assert_int_equal(post(m, "/v1/chat/completions", body, &r), 200);
    free(r);
    free(sig);
    /* the documented sentinel passes the validator (ai.google.dev/gemini-api/
     * docs/thought-signatures: "skip_thought_signature_validator" for calls
     * whose signature is not available); the rule holds for later Gemini
     * models too, not for 2.5 */
    const char *skip = "\"extra_content\":{\"google\":{\"thought_signature\":"
                       "\"skip_thought_signature_validator\"}},";
    static const char *const checked[] = {"gemini-3-flash", "gemini-3.5-pro", "gemini-4-pro"};
    for (size_t k = 0; k < sizeof checked / sizeof *checked; k++) {
        snprintf(body, sizeof body, fmt, checked[k], "", "");
        if (post(m, "/v1/chat/completions", body, &r) != 400)
            fail_msg("%s: an unsigned current-turn call was taken", checked[k]);
        assert_non_null(strstr(r, "Function call is missing a thought_signature"));
        free(r);
        snprintf(body, sizeof body, fmt, checked[k], "", skip);
        assert_int_equal(post(m, "/v1/chat/completions", body, &r), 200);
        free(r);
    }
    snprintf(body, sizeof body, fmt, "gemini-2.5-flash", "", "");
    assert_int_equal(post(m, "/v1/chat/completions", body, &r), 200);
    free(r);
    mock_llm_stop(m);
}

/* OpenAI: automatic prefix caching, 1024 tokens and 128-token steps */
static void openai_prefix_cache(void **state) {
    (void)state;
    mock_llm *m = start("{\"loop\":true,\"requests\":[{\"text\":\"ok\"}]}");
    char *big = malloc(6001);
    memset(big, 'a', 6000);
    big[6000] = '\0';
    char *body = malloc(8000), *r;
    snprintf(body, 8000, "{\"model\":\"gpt-5.1\",\"messages\":[{\"role\":\"system\",\"content\":"
             "\"%s\"},{\"role\":\"user\",\"content\":\"one\"}]}", big);
    assert_int_equal(post(m, "/v1/chat/completions", body, &r), 200);
    assert_non_null(strstr(r, "\"cached_tokens\":0"));
    free(r);
    memcpy(strstr(body, "\"one\""), "\"two\"", 5);
    assert_int_equal(post(m, "/v1/chat/completions", body, &r), 200);
    char *p = strstr(r, "\"cached_tokens\":");
    assert_non_null(p);
    long cached = strtol(p + 16, NULL, 10);
    assert_true(cached >= 1024 && cached % 128 == 0);
    free(r);
    /* another prompt_cache_key is another bucket */
    memcpy(strstr(body, "\"two\""), "\"six\"", 5);
    body[strlen(body) - 1] = '\0';
    strcat(body, ",\"prompt_cache_key\":\"other\"}");
    assert_int_equal(post(m, "/v1/chat/completions", body, &r), 200);
    assert_non_null(strstr(r, "\"cached_tokens\":0"));
    free(r);
    /* max_tokens on a reasoning model */
    assert_int_equal(post(m, "/v1/chat/completions",
                          "{\"model\":\"gpt-5.1\",\"max_tokens\":10,\"messages\":[]}", &r), 400);
    free(r);
    free(big);
    free(body);
    mock_llm_stop(m);
}

/* OpenAI Responses: the request rules, and a reasoning model's reasoning
 * item (with encrypted_content) required before its function call */
static void responses_rules(void **state) {
    (void)state;
    mock_llm *m = start(loop_script);
    char *r;
    static const struct {
        const char *body, *error;
    } bad[] = {
        {"{\"input\":\"hi\"}", "Missing required parameter: 'model'"},
        {"{\"model\":\"gpt-5.1\"}", "Missing required parameter: 'input'"},
        {"{\"model\":\"gpt-5.1\",\"input\":\"hi\",\"max_tokens\":5}",
         "has moved to 'max_output_tokens'"},
        {"{\"model\":\"gpt-5.1\",\"input\":[{\"type\":\"foo\"}]}", "Invalid value: 'foo'"},
        {"{\"model\":\"gpt-5.1\",\"input\":[{\"type\":\"function_call_output\",\"call_id\":"
         "\"c9\",\"output\":\"x\"}]}",
         "No tool call found for function call output with call_id c9"},
        {"{\"model\":\"gpt-5.1\",\"input\":[{\"type\":\"function_call\",\"call_id\":\"c9\","
         "\"name\":\"f\",\"arguments\":\"{}\"}]}",
         "No tool output found for function call c9"},
        {"{\"model\":\"o3\",\"input\":\"hi\",\"temperature\":0.2}",
         "'temperature' does not support 0.2"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        if (post(m, "/v1/responses", bad[k].body, &r) != 400 || !strstr(r, bad[k].error))
            fail_msg("%s: want 400 \"%s\", got %s", bad[k].body, bad[k].error, r);
        free(r);
    }
    /* a stateless first step: the reasoning item's encrypted_content comes
     * in output_item.done only, and with its function call it is issued */
    const char *first = "{\"model\":\"gpt-5.1\",\"store\":false,\"include\":"
                        "[\"reasoning.encrypted_content\"],\"input\":\"hi\",\"stream\":true}";
    assert_int_equal(post(m, "/v1/responses", first, &r), 200);
    const char *added = strstr(r, "response.output_item.added");
    const char *done = strstr(r, "response.output_item.done");
    assert_non_null(added);
    assert_non_null(done);
    const char *enc_at = strstr(r, "\"encrypted_content\"");
    assert_true(enc_at != NULL && enc_at > done);
    char *enc = member(enc_at, "encrypted_content");
    char *rs = member(strstr(r, "\"id\":\"rs_mock_"), "id");
    assert_non_null(enc);
    assert_non_null(rs);
    assert_non_null(strstr(r, "\"call_id\":\"c1\""));
    free(r);
    const char *fmt = "{\"model\":\"gpt-5.1\",\"store\":false,\"input\":[{\"role\":\"user\","
                      "\"content\":\"hi\"}%s,{\"type\":\"function_call\",\"call_id\":\"c1\","
                      "\"name\":\"f\",\"arguments\":\"{}\"},{\"type\":\"function_call_output\","
                      "\"call_id\":\"c1\",\"output\":\"ok\"}]}";
    char item[512], body[1024];
    snprintf(item, sizeof item,
             ",{\"id\":\"%s\",\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":\"%s\"}",
             rs, enc);
    snprintf(body, sizeof body, fmt, item);
    assert_int_equal(post(m, "/v1/responses", body, &r), 200);
    free(r);
    /* the answer's text between them is part of the same output */
    char with_text[768];
    snprintf(with_text, sizeof with_text,
             "%s,{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"Let me.\"}", item);
    snprintf(body, sizeof body, fmt, with_text);
    if (post(m, "/v1/responses", body, &r) != 200)
        fail_msg("%s: %s", body, r);
    free(r);
    /* a user message between them starts another */
    snprintf(with_text, sizeof with_text,
             "%s,{\"type\":\"message\",\"role\":\"user\",\"content\":\"and?\"}", item);
    snprintf(body, sizeof body, fmt, with_text);
    assert_int_equal(post(m, "/v1/responses", body, &r), 400);
    free(r);
    /* lost: the function call without its reasoning item */
    snprintf(body, sizeof body, fmt, "");
    assert_int_equal(post(m, "/v1/responses", body, &r), 400);
    assert_non_null(strstr(r, "Item 'c1' of type 'function_call' was provided without its "
                              "required 'reasoning' item"));
    free(r);
    /* the reasoning item after its call is lost to it too */
    char late[1536];
    snprintf(late, sizeof late,
             "{\"model\":\"gpt-5.1\",\"store\":false,\"input\":[{\"role\":\"user\",\"content\":"
             "\"hi\"},{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":"
             "\"{}\"}%s,{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"ok\"}]}",
             item);
    assert_int_equal(post(m, "/v1/responses", late, &r), 400);
    free(r);
    /* altered encrypted_content */
    enc[5] = enc[5] == '0' ? '1' : '0';
    snprintf(item, sizeof item,
             ",{\"id\":\"%s\",\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":\"%s\"}",
             rs, enc);
    snprintf(body, sizeof body, fmt, item);
    assert_int_equal(post(m, "/v1/responses", body, &r), 400);
    assert_non_null(strstr(r, "could not be verified"));
    free(r);
    /* stateless: a reasoning item without encrypted_content is not kept */
    snprintf(item, sizeof item, ",{\"id\":\"%s\",\"type\":\"reasoning\",\"summary\":[]}", rs);
    snprintf(body, sizeof body, fmt, item);
    assert_int_equal(post(m, "/v1/responses", body, &r), 400);
    assert_non_null(strstr(r, "Items are not persisted when `store` is set to false"));
    free(r);
    /* without include the reasoning item comes without encrypted_content */
    assert_int_equal(post(m, "/v1/responses",
                          "{\"model\":\"gpt-5.1\",\"store\":false,\"input\":\"hi\"}", &r),
                     200);
    assert_non_null(strstr(r, "\"type\":\"reasoning\""));
    assert_null(strstr(r, "encrypted_content"));
    free(r);
    free(enc);
    free(rs);
    assert_int_equal(mock_llm_rejections(m), 12);
    mock_llm_stop(m);
}

/* POST /v1/responses/compact (OpenAI's server compaction): its request
 * rules, its reply (the user messages, then one compaction item), the item
 * checked when it comes back, and "compact_fail" */
static void responses_compact_rules(void **state) {
    (void)state;
    mock_llm *m = start("{\"compact_fail\":1,\"loop\":true,\"requests\":[{\"text\":\"ok\"}]}");
    char *r;
    const char *input = "[{\"type\":\"message\",\"role\":\"user\",\"content\":\"hi\"},"
                        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"hello\"}]";
    char body[1024];
    snprintf(body, sizeof body, "{\"model\":\"gpt-5.1\",\"input\":%s,\"stream\":true}", input);
    assert_int_equal(post(m, "/v1/responses/compact", body, &r), 400);
    assert_non_null(strstr(r, "Unknown parameter: 'stream'."));
    free(r);
    assert_int_equal(post(m, "/v1/responses/compact", "{\"input\":[]}", &r), 400);
    assert_non_null(strstr(r, "Missing required parameter: 'model'"));
    free(r);
    snprintf(body, sizeof body, "{\"model\":\"gpt-5.1\",\"input\":%s}", input);
    assert_int_equal(post(m, "/v1/responses/compact", body, &r), 500); /* compact_fail */
    free(r);
    assert_int_equal(post(m, "/v1/responses/compact", body, &r), 200);
    assert_non_null(strstr(r, "\"object\":\"response.compaction\""));
    /* the user message stays, the assistant's goes into the item */
    assert_non_null(strstr(r, "\"role\":\"user\",\"content\":\"hi\"}"));
    assert_null(strstr(r, "hello"));
    char *enc = member(strstr(r, "\"type\":\"compaction\""), "encrypted_content");
    assert_non_null(enc);
    free(r);
    const char *fmt = "{\"model\":\"gpt-5.1\",\"store\":false,\"input\":[{\"type\":\"message\","
                      "\"role\":\"user\",\"content\":\"hi\"},{\"type\":\"compaction\",\"id\":"
                      "\"cmp_item_0\",\"encrypted_content\":\"%s\"},{\"type\":\"message\","
                      "\"role\":\"user\",\"content\":\"go on\"}]}";
    snprintf(body, sizeof body, fmt, enc);
    if (post(m, "/v1/responses", body, &r) != 200)
        fail_msg("%s: %s", body, r);
    free(r);
    enc[5] = enc[5] == '0' ? '1' : '0'; /* changed on the way back */
    snprintf(body, sizeof body, fmt, enc);
    assert_int_equal(post(m, "/v1/responses", body, &r), 400);
    assert_non_null(strstr(r, "could not be verified"));
    free(r);
    free(enc);
    assert_int_equal(mock_llm_rejections(m), 3);
    mock_llm_stop(m);
}

/* Anthropic's server compaction (context_management's compact_20260112
 * edit): the beta header, the models, the trigger's minimum, the
 * compaction block with stop_reason "compaction" at the trigger, an
 * ordinary answer below it, and the block checked when it comes back */
static void claude_compaction_rules(void **state) {
    (void)state;
    mock_llm *m = start("{\"loop\":true,\"requests\":[{\"text\":\"ordinary\"}]}");
    const char *beta = "anthropic-beta: compact-2026-01-12\r\n";
    size_t big_n = 220000; /* about 55,000 tokens */
    char *big = malloc(big_n + 1);
    assert_non_null(big);
    memset(big, 'a', big_n);
    big[big_n] = '\0';
    const char *fmt = "{\"model\":\"%s\",\"max_tokens\":100,\"stream\":true,\"messages\":"
                      "[{\"role\":\"user\",\"content\":\"%s\"}],\"context_management\":"
                      "{\"edits\":[{\"type\":\"compact_20260112\",\"trigger\":{\"type\":"
                      "\"input_tokens\",\"value\":%d},\"pause_after_compaction\":true}]}}";
    size_t cap = big_n + 1024;
    char *body = malloc(cap);
    char *r;
    assert_non_null(body);
    snprintf(body, cap, fmt, "claude-sonnet-4-6", big, 50000);
    assert_int_equal(post(m, "/v1/messages", body, &r), 400); /* no beta header */
    assert_non_null(strstr(r, "compact-2026-01-12"));
    free(r);
    snprintf(body, cap, fmt, "claude-sonnet-4-5", big, 50000);
    assert_int_equal(post_h(m, "/v1/messages", beta, body, &r), 400);
    assert_non_null(strstr(r, "not supported on model claude-sonnet-4-5"));
    free(r);
    snprintf(body, cap, fmt, "claude-sonnet-4-6", big, 1000);
    assert_int_equal(post_h(m, "/v1/messages", beta, body, &r), 400);
    assert_non_null(strstr(r, "greater than or equal to 50000"));
    free(r);
    snprintf(body, cap, fmt, "claude-sonnet-4-6", "short", 50000); /* below the trigger */
    assert_int_equal(post_h(m, "/v1/messages", beta, body, &r), 200);
    assert_non_null(strstr(r, "ordinary"));
    assert_null(strstr(r, "compaction_delta"));
    free(r);
    snprintf(body, cap, fmt, "claude-sonnet-4-6", big, 50000);
    assert_int_equal(post_h(m, "/v1/messages", beta, body, &r), 200);
    assert_non_null(strstr(r, "\"content_block\":{\"type\":\"compaction\""));
    assert_non_null(strstr(r, "\"stop_reason\":\"compaction\""));
    char *content = member(strstr(r, "compaction_delta"), "content");
    char *enc = member(strstr(r, "compaction_delta"), "encrypted_content");
    assert_non_null(content);
    assert_non_null(enc);
    free(r);
    const char *back = "{\"model\":\"claude-sonnet-4-6\",\"max_tokens\":100,\"stream\":true,"
                       "\"messages\":[{\"role\":\"%s\",\"content\":[{\"type\":\"compaction\","
                       "\"content\":\"%s\",\"encrypted_content\":\"%s\"}]},{\"role\":\"%s\","
                       "\"content\":\"go on\"}]}";
    char next[1024];
    snprintf(next, sizeof next, back, "assistant", content, enc, "user");
    if (post(m, "/v1/messages", next, &r) != 200)
        fail_msg("%s: %s", next, r);
    free(r);
    snprintf(next, sizeof next, back, "user", content, enc, "assistant");
    assert_int_equal(post(m, "/v1/messages", next, &r), 400);
    assert_non_null(strstr(r, "may only appear in `assistant` messages"));
    free(r);
    enc[5] = enc[5] == '0' ? '1' : '0'; /* changed on the way back */
    snprintf(next, sizeof next, back, "assistant", content, enc, "user");
    assert_int_equal(post(m, "/v1/messages", next, &r), 400);
    assert_non_null(strstr(r, "pass compaction blocks back unmodified"));
    free(r);
    free(content);
    free(enc);
    free(body);
    free(big);
    assert_int_equal(mock_llm_rejections(m), 5);
    mock_llm_stop(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claude_thinking_parameters),
        cmocka_unit_test(claude_signatures_and_prefix),
        cmocka_unit_test(claude_cache),
        cmocka_unit_test(deepseek_and_gemini),
        cmocka_unit_test(openai_prefix_cache),
        cmocka_unit_test(responses_rules),
        cmocka_unit_test(responses_compact_rules),
        cmocka_unit_test(claude_compaction_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
