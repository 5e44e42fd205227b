/*
 * tests/unit/test_http.c - core/runtime/http.c against the in-process mock LLM
 * server (tests/support/mock_llm.c), plus the standalone weir-mock-llm.
 * No timed assertions: waits use semaphores and the server's counters.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "failure.h"
#include "http.h"
#include "mock_llm.h"
#include "cancel.h"
#include "testutil.h"

extern char **environ;

static const char *const headers[] = {"Content-Type: application/json",
                                      "Authorization: Bearer sk-test-secret", NULL};

/* Events rendered as "<event>|<data>\n"; a semaphore posted per event. */
typedef struct events {
    char *text;
    size_t len;
    int count;
    int stop_at; /* return stop_rc (1 when 0) from this (1-based) event; 0 = never */
    int stop_rc;
    sem_t got;
} events;

static int on_event(void *ud, const char *event, const char *data, size_t data_len) {
    events *e = ud;
    size_t el = strlen(event);
    e->text = realloc(e->text, e->len + el + data_len + 3);
    assert_non_null(e->text);
    memcpy(e->text + e->len, event, el);
    e->len += el;
    e->text[e->len++] = '|';
    memcpy(e->text + e->len, data, data_len);
    e->len += data_len;
    e->text[e->len++] = '\n';
    e->text[e->len] = '\0';
    e->count++;
    sem_post(&e->got);
    return e->stop_at && e->count == e->stop_at ? (e->stop_rc ? e->stop_rc : 1) : 0;
}

static void events_init(events *e) {
    memset(e, 0, sizeof *e);
    sem_init(&e->got, 0, 0);
}

static void events_fini(events *e) {
    free(e->text);
    sem_destroy(&e->got);
}

/* Everything one test needs: a server, a handle, a URL. */
typedef struct fixture {
    mock_llm *mock;
    weir__http *http;
    char url[128];
} fixture;

static void fixture_start(fixture *f, const char *script, const char *path) {
    memset(f, 0, sizeof *f);
    assert_int_equal(mock_llm_start(script, &f->mock), 0);
    assert_int_equal(weir__http_create(&f->http), WEIR_OK);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d%s", mock_llm_port(f->mock), path);
}

static void fixture_stop(fixture *f) {
    weir__http_destroy(f->http);
    mock_llm_stop(f->mock);
}

static weir_http_request make_req(const char *url, const char *body, long idle_ms) {
    weir_http_request r = {.struct_size = sizeof r,
                           .url = url,
                           .headers = headers,
                           .body = body,
                           .body_len = strlen(body),
                           .idle_timeout_ms = idle_ms};
    return r;
}

static const char body_openai[] = "{\"model\":\"gpt-test\",\"messages\":[{\"role\":\"user\"}]}";

static void test_http_sse_events_are_delivered(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"Hey\",\"chunk_size\":2,\"usage\":"
                      "{\"input_tokens\":3,\"output_tokens\":4}}]}",
                  "/v1/chat/completions");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, body_openai, 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure), WEIR_OK);
    assert_null(failure);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.request_id, "req_mock_0");
    assert_int_equal(resp.retry_after_ms, -1);
    assert_null(resp.body);
    const char *pre = "|{\"id\":\"chatcmpl-mock-0\",\"object\":\"chat.completion.chunk\","
                      "\"created\":1700000000,\"model\":\"gpt-test\",";
    char want[4096];
    snprintf(want, sizeof want,
             "%s\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
             "\"finish_reason\":null}]}\n"
             "%s\"choices\":[{\"index\":0,\"delta\":{\"content\":\"He\"},\"finish_reason\":null}]}\n"
             "%s\"choices\":[{\"index\":0,\"delta\":{\"content\":\"y\"},\"finish_reason\":null}]}\n"
             "%s\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n"
             "%s\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,"
             "\"total_tokens\":7}}\n"
             "|[DONE]\n",
             pre, pre, pre, pre, pre);
    assert_string_equal(ev.text, want);
    /* the server saw the body and headers as sent */
    char *got_body = mock_llm_request_body(f.mock, 0);
    assert_string_equal(got_body, body_openai);
    free(got_body);
    char *auth = mock_llm_request_header(f.mock, 0, "authorization");
    assert_string_equal(auth, "Bearer sk-test-secret");
    free(auth);
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

static void test_http_anthropic_stream_event_names(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"ok\",\"reasoning\":\"r\",\"tool_calls\":"
                      "[{\"id\":\"t1\",\"name\":\"pow\",\"arguments\":\"{}\"}]}]}",
                  "/v1/messages");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{\"model\":\"claude-test\"}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure), WEIR_OK);
    assert_string_equal(resp.request_id, "req_mock_0");
    /* the sequence of event names */
    char names[1024] = "";
    for (char *line = ev.text; line && *line;) {
        char *bar = strchr(line, '|');
        char *nl = strchr(line, '\n');
        /* data lines of these events are one line each */
        strncat(names, line, (size_t)(bar - line));
        strcat(names, " ");
        line = nl + 1;
    }
    assert_string_equal(names,
                        "message_start ping content_block_start content_block_delta "
                        "content_block_delta content_block_stop content_block_start "
                        "content_block_delta content_block_stop content_block_start "
                        "content_block_delta content_block_stop message_delta message_stop ");
    assert_non_null(strstr(ev.text, "\"stop_reason\":\"tool_use\""));
    assert_non_null(strstr(ev.text, "\"partial_json\":\"{}\""));
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

static void test_http_keep_alive_uses_one_connection(void **state) {
    fixture f;
    fixture_start(&f, "{\"loop\":true,\"requests\":[{\"text\":\"a\"},{\"fault\":\"server_error\"}]}",
                  "/v1/chat/completions");
    for (int i = 0; i < 4; i++) {
        events ev;
        events_init(&ev);
        weir_http_request req = make_req(f.url, body_openai, 0);
        weir_http_response resp;
        json_t *failure = NULL;
        assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                         WEIR_OK);
        assert_int_equal(resp.status, i % 2 ? 500 : 200);
        weir__http_response_clear(&resp);
        events_fini(&ev);
    }
    assert_int_equal(mock_llm_requests(f.mock), 4);
    assert_int_equal(mock_llm_connections(f.mock), 1);
    assert_int_equal(weir__http_connects(f.http), 1);
    fixture_stop(&f);
}

/* The host's pool: the handle given back last is taken first (its kept
 * connection serves the next request, whichever agent makes it), a new one
 * when none is idle, at most WEIR__HTTP_POOL_IDLE kept. */
static void test_http_pool_reuses_handles_and_connections(void **state) {
    (void)state;
    fixture f;
    fixture_start(&f, "{\"loop\":true,\"requests\":[{\"text\":\"a\"}]}", "/v1/chat/completions");
    weir__http_pool *pool = NULL;
    assert_int_equal(weir__http_pool_create(&pool), WEIR_OK);
    assert_int_equal(weir__http_pool_idle(pool), 0);
    weir__http *first = NULL;
    for (int i = 0; i < 3; i++) { /* three "agents" one after the other */
        weir__http *h = NULL;
        assert_int_equal(weir__http_pool_take(pool, &h), WEIR_OK);
        if (!first)
            first = h;
        assert_ptr_equal(h, first);
        events ev;
        events_init(&ev);
        weir_http_request req = make_req(f.url, body_openai, 0);
        weir_http_response resp;
        json_t *failure = NULL;
        assert_int_equal(weir__http_sse(h, NULL, &req, on_event, &ev, &resp, &failure), WEIR_OK);
        assert_int_equal(resp.status, 200);
        weir__http_response_clear(&resp);
        events_fini(&ev);
        weir__http_pool_give(pool, h);
        assert_int_equal(weir__http_pool_idle(pool), 1);
    }
    assert_int_equal(mock_llm_connections(f.mock), 1);
    assert_int_equal(weir__http_connects(first), 1);
    /* more taken at once than the pool keeps: the extra ones are destroyed */
    weir__http *many[WEIR__HTTP_POOL_IDLE + 2];
    for (size_t i = 0; i < WEIR__HTTP_POOL_IDLE + 2; i++)
        assert_int_equal(weir__http_pool_take(pool, &many[i]), WEIR_OK);
    assert_int_equal(weir__http_pool_idle(pool), 0);
    for (size_t i = 0; i < WEIR__HTTP_POOL_IDLE + 2; i++)
        weir__http_pool_give(pool, many[i]);
    assert_int_equal(weir__http_pool_idle(pool), WEIR__HTTP_POOL_IDLE);
    weir__http_pool_give(pool, NULL);
    weir__http_pool_give(NULL, NULL);
    assert_int_equal(weir__http_pool_take(NULL, &first), WEIR_E_INVAL);
    assert_int_equal(weir__http_pool_create(NULL), WEIR_E_INVAL);
    assert_int_equal(weir__http_pool_idle(NULL), 0);
    weir__http_pool_destroy(pool);
    weir__http_pool_destroy(NULL);
    fixture_stop(&f);
}

static void test_http_429_retry_after_is_parsed(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"fault\":\"rate_limit\",\"retry_after\":\"2\"},"
                      "{\"fault\":\"rate_limit\",\"retry_after\":\"7\",\"retry_after_ms\":1500},"
                      "{\"fault\":\"rate_limit\",\"retry_after\":\"soon\"}]}",
                  "/v1/chat/completions");
    const long long want_ms[] = {2000, 1500, -1};
    for (int i = 0; i < 3; i++) {
        events ev;
        events_init(&ev);
        weir_http_request req = make_req(f.url, body_openai, 0);
        weir_http_response resp;
        json_t *failure = NULL;
        assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                         WEIR_OK);
        assert_int_equal(resp.status, 429);
        assert_int_equal(resp.retry_after_ms, want_ms[i]);
        assert_int_equal(ev.count, 0);
        json_t *fl = weir__failure_from_http("openai", &resp);
        assert_string_equal(weir__json_str(fl, "code", ""), "RATE_LIMIT");
        assert_string_equal(weir__json_str(fl, "message", ""), "Rate limit reached for requests");
        char rid[32];
        snprintf(rid, sizeof rid, "req_mock_%d", i);
        assert_string_equal(weir__json_str(fl, "request_id", ""), rid);
        json_decref(fl);
        weir__http_response_clear(&resp);
        events_fini(&ev);
    }
    fixture_stop(&f);
}

static void test_http_500_body_is_collected(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"fault\":\"server_error\"}]}", "/v1/messages");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure), WEIR_OK);
    assert_int_equal(resp.status, 500);
    assert_string_equal(resp.body, "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":"
                                   "\"Internal server error\"}}");
    assert_int_equal(resp.body_len, strlen(resp.body));
    assert_int_equal(ev.count, 0);
    weir__http_response_clear(&resp);
    assert_null(resp.body);
    assert_int_equal(resp.retry_after_ms, -1);
    events_fini(&ev);
    fixture_stop(&f);
}

static void test_http_overflow_bodies_classify_as_context_window_exceeded(void **state) {
    const char *paths[] = {"/v1/chat/completions", "/v1/messages"};
    for (int i = 0; i < 2; i++) {
        fixture f;
        fixture_start(&f, "{\"requests\":[{\"fault\":\"overflow\"}]}", paths[i]);
        events ev;
        events_init(&ev);
        weir_http_request req = make_req(f.url, "{}", 0);
        weir_http_response resp;
        json_t *failure = NULL;
        assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                         WEIR_OK);
        assert_int_equal(resp.status, 400);
        json_t *fl = weir__failure_from_http("p", &resp);
        assert_string_equal(weir__json_str(fl, "code", ""), "CONTEXT_WINDOW_EXCEEDED");
        json_decref(fl);
        weir__http_response_clear(&resp);
        events_fini(&ev);
        fixture_stop(&f);
    }
}

static void test_http_2xx_json_body_is_collected(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"fault\":\"http_error\",\"status\":200,\"body\":{\"ok\":1}}]}",
                  "/v1/chat/completions");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure), WEIR_OK);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.body, "{\"ok\":1}");
    assert_int_equal(ev.count, 0);
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

/* A 2xx JSON reply is a result (a server compaction's items can be large):
 * collected whole, past the 64 KiB kept of an error body. */
static void test_http_2xx_json_body_is_collected_whole(void **state) {
    (void)state;
    size_t n = 200 << 10;
    char *big = malloc(n + 1);
    assert_non_null(big);
    memset(big, 'x', n);
    big[n] = '\0';
    json_t *script = json_pack("{s:[{s:s, s:i, s:{s:s}}]}", "requests", "fault", "http_error",
                               "status", 200, "body", "blob", big);
    char *text = json_dumps(script, JSON_COMPACT);
    json_decref(script);
    assert_non_null(text);
    fixture f;
    fixture_start(&f, text, "/v1/chat/completions");
    free(text);
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure), WEIR_OK);
    assert_int_equal(resp.status, 200);
    json_t *body = json_loadb(resp.body, resp.body_len, 0, NULL);
    assert_non_null(body);
    assert_string_equal(json_string_value(json_object_get(body, "blob")), big);
    json_decref(body);
    free(big);
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

/* One POST to a fresh mock serving `script`; returns the status, fills *ev
 * (init'ed here, fini by the caller), *resp and *failure. */
static int post_once(const char *script, events *ev, weir_http_response *resp,
                     json_t **failure) {
    fixture f;
    fixture_start(&f, script, "/v1/chat/completions");
    events_init(ev);
    weir_http_request req = make_req(f.url, body_openai, 2000);
    int rc = weir__http_sse(f.http, NULL, &req, on_event, ev, resp, failure);
    fixture_stop(&f);
    return rc;
}

/* Assert a 200 that is not an event stream: UNKNOWN, `message`, status 200,
 * the request id, no event; the body still collected. */
static void assert_not_stream(int rc, const events *ev, const weir_http_response *resp,
                              json_t *failure, const char *message) {
    if (rc != WEIR_E_IO || !failure)
        fail_msg("rc %d, failure %s", rc, failure ? weir__json_str(failure, "message", "") : "-");
    assert_string_equal(weir__json_str(failure, "code", ""), "UNKNOWN");
    assert_string_equal(weir__json_str(failure, "message", ""), message);
    assert_int_equal(json_integer_value(json_object_get(failure, "status")), 200);
    assert_string_equal(weir__json_str(failure, "request_id", ""), "req_mock_0");
    assert_null(json_object_get(failure, "provider"));
    assert_int_equal(ev->count, 0);
    assert_int_equal(resp->status, 200);
    assert_non_null(resp->body);
}

static void test_http_2xx_html_is_not_an_event_stream(void **state) {
    /* a captive portal: 200 text/html, UTF-8 kept, a newline escaped */
    events ev;
    weir_http_response resp;
    json_t *failure = NULL;
    int rc = post_once("{\"requests\":[{\"fault\":\"raw\",\"status\":200,\"headers\":"
                       "{\"Content-Type\":\"text/html; charset=utf-8\"},\"body\":"
                       "\"<html><title>Caf\u00e9 Wi-Fi</title>\\n<body>Log in</body></html>\"}]}",
                       &ev, &resp, &failure);
    assert_not_stream(rc, &ev, &resp, failure,
                      "HTTP 200 with Content-Type text/html (not an event stream): "
                      "<html><title>Caf\u00e9 Wi-Fi</title>\\n<body>Log in</body></html>");
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);

    /* a long page: its first 200 bytes, then "..." */
    char script[1024], want[512], page[301];
    memset(page, 'x', 300);
    memcpy(page, "<html>", 6);
    page[300] = '\0';
    snprintf(script, sizeof script,
             "{\"requests\":[{\"fault\":\"raw\",\"status\":200,\"headers\":"
             "{\"content-type\":\"TEXT/HTML\"},\"body\":\"%s\"}]}",
             page);
    snprintf(want, sizeof want,
             "HTTP 200 with Content-Type TEXT/HTML (not an event stream): %.200s...", page);
    failure = NULL;
    rc = post_once(script, &ev, &resp, &failure);
    assert_not_stream(rc, &ev, &resp, failure, want);
    assert_int_equal(resp.body_len, 300);
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);
}

#define GZIP_HEX "1f8b08000000000002ff4b492c49b452a8564a54b232ace5e202003e7574090f000000"
#define GZIP_SHOWN                                                                          \
    "\\x1f\\x8b\\x08\\x00\\x00\\x00\\x00\\x00\\x02\\xffKI,I\\xb4R\\xa8VJT\\xb22\\xac\\xe5" \
    "\\xe2\\x02\\x00>ut\\t\\x0f\\x00\\x00\\x00"

static void test_http_gzip_bodies_are_not_event_streams(void **state) {
    static const struct {
        const char *headers, *message;
    } cases[] = {
        /* Content-Encoding gzip that weir did not ask for */
        {"{\"Content-Type\":\"text/event-stream\",\"Content-Encoding\":\"gzip\"}",
         "HTTP 200 with Content-Type text/event-stream and Content-Encoding gzip (not an event "
         "stream; weir did not ask for compression): " GZIP_SHOWN},
        /* a raw gzip body under an event-stream type */
        {"{\"Content-Type\":\"text/event-stream\"}",
         "HTTP 200 with Content-Type text/event-stream (not an event stream; the body is gzip "
         "data): " GZIP_SHOWN},
        /* and with no Content-Type at all */
        {"{}", "HTTP 200 with no Content-Type (not an event stream; the body is gzip data): "
               GZIP_SHOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char script[512];
        snprintf(script, sizeof script,
                 "{\"requests\":[{\"fault\":\"raw\",\"status\":200,\"headers\":%s,"
                 "\"body_hex\":\"" GZIP_HEX "\"}]}",
                 cases[i].headers);
        events ev;
        weir_http_response resp;
        json_t *failure = NULL;
        int rc = post_once(script, &ev, &resp, &failure);
        assert_not_stream(rc, &ev, &resp, failure, cases[i].message);
        assert_int_equal(resp.body_len, sizeof GZIP_HEX / 2);
        json_decref(failure);
        weir__http_response_clear(&resp);
        events_fini(&ev);
    }
}

static void test_http_sse_under_no_or_a_loose_type_is_parsed(void **state) {
    static const struct {
        const char *headers, *body, *events;
    } cases[] = {
        {"{}", "data: {\\\"a\\\":1}\\n\\nevent: x\\ndata: 2\\n\\n", "|{\"a\":1}\nx|2\n"},
        {"{}", "\\r\\n: a comment first\\n\\ndata: 3\\n\\n", "|3\n"},
        {"{}", "\ufeffevent: y\\ndata: 4\\n\\n", "y|4\n"},
        {"{}", "id: 7\\ndata\\n\\nretry: 5\\ndata: 5\\n\\n", "|\n|5\n"},
        /* SSE under a wrong type that could hold it still works */
        {"{\"Content-Type\":\"text/plain\"}", "data: 6\\n\\n", "|6\n"},
        {"{\"Content-Type\":\"application/json\"}", "data: 7\\n\\n", "|7\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char script[512];
        snprintf(script, sizeof script,
                 "{\"requests\":[{\"fault\":\"raw\",\"status\":200,\"headers\":%s,"
                 "\"body\":\"%s\"}]}",
                 cases[i].headers, cases[i].body);
        events ev;
        weir_http_response resp;
        json_t *failure = NULL;
        int rc = post_once(script, &ev, &resp, &failure);
        if (rc != WEIR_OK)
            fail_msg("case %zu: %s", i, weir__json_str(failure, "message", ""));
        assert_null(failure);
        assert_int_equal(resp.status, 200);
        assert_null(resp.body);
        assert_non_null(ev.text);
        assert_string_equal(ev.text, cases[i].events);
        weir__http_response_clear(&resp);
        events_fini(&ev);
    }
    /* without a Content-Type, a body that is not SSE is said to be so */
    events ev;
    weir_http_response resp;
    json_t *failure = NULL;
    int rc = post_once("{\"requests\":[{\"fault\":\"raw\",\"status\":200,\"body\":"
                       "\"Hello\\u0007 world\"}]}",
                       &ev, &resp, &failure);
    assert_not_stream(rc, &ev, &resp, failure,
                      "HTTP 200 with no Content-Type (not an event stream): Hello\\x07 world");
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);
}

static void test_http_huge_response_header_is_named(void **state) {
    static const struct {
        long lines, bytes;
        const char *message;
    } cases[] = {
        /* one 2 MiB line: over libcurl's own limit for one header line */
        {1, 2L << 20, "response header too large: a header line is longer than libcurl's limit "
                      "of 102400 bytes"},
        /* 2 MiB of short lines: over weir's limit for the whole head */
        {20000, 100, "response header too large: more than 262144 bytes of header lines"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char script[512];
        snprintf(script, sizeof script,
                 "{\"requests\":[{\"fault\":\"raw\",\"status\":200,\"headers\":"
                 "{\"Content-Type\":\"text/event-stream\"},\"pad_lines\":%ld,\"pad_bytes\":%ld,"
                 "\"body\":\"data: 1\\n\\n\"}]}",
                 cases[i].lines, cases[i].bytes);
        events ev;
        weir_http_response resp;
        json_t *failure = NULL;
        int rc = post_once(script, &ev, &resp, &failure);
        if (rc == WEIR_OK || !failure)
            fail_msg("case %zu: rc %d", i, rc);
        const char *msg = weir__json_str(failure, "message", "");
        if (strncmp(msg, cases[i].message, strlen(cases[i].message)) != 0)
            fail_msg("case %zu: %s", i, msg);
        assert_string_equal(weir__json_str(failure, "code", ""), "UNKNOWN");
        assert_int_equal(rc, WEIR_E_IO);
        assert_int_equal(ev.count, 0);
        json_decref(failure);
        weir__http_response_clear(&resp);
        events_fini(&ev);
    }
}

static void test_http_truncated_stream_is_ok_without_done(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"abc\",\"fault\":\"truncated\"}]}",
                  "/v1/chat/completions");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure), WEIR_OK);
    assert_int_equal(ev.count, 2); /* role chunk + one text delta; no finish, no [DONE] */
    assert_null(strstr(ev.text, "[DONE]"));
    assert_null(strstr(ev.text, "finish_reason\":\"stop"));
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

static void test_http_malformed_data_is_passed_through(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"abc\",\"fault\":\"malformed\"}]}",
                  "/v1/chat/completions");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure), WEIR_OK);
    assert_non_null(strstr(ev.text, "\n|{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"\n"));
    assert_non_null(strstr(ev.text, "|[DONE]\n"));
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

static void test_http_stall_times_out(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"abc\",\"fault\":\"stall\"}]}",
                  "/v1/chat/completions");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 200);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                     WEIR_E_TIMEOUT);
    assert_int_equal(ev.count, 1);
    assert_int_equal(resp.status, 200);
    json_t *want = json_pack("{s:s,s:s}", "code", "TIMEOUT", "message", "no data for 200 ms");
    assert_true(json_equal(failure, want));
    json_decref(want);
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

static void *cancel_after_ms(void *arg) {
    usleep(600 * 1000);
    weir__signal_cancel(arg, "user");
    return NULL;
}

/* Keepalive comments keep the idle timeout from firing; the total one
 * ends the stream (and a request of the 1.0 size has none). */
static void test_http_total_timeout_ends_a_keepalive_stream(void **state) {
    fixture f;
    fixture_start(&f, "{\"loop\":true,\"requests\":[{\"text\":\"abc\",\"fault\":\"keepalive\","
                      "\"chunk_delay_ms\":20}]}",
                  "/v1/chat/completions");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 200);
    req.total_timeout_ms = 300;
    weir_http_response resp;
    json_t *failure = NULL;
    int64_t t0 = weir__now_ms();
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                     WEIR_E_TIMEOUT);
    int64_t took = weir__now_ms() - t0;
    assert_true(took >= 300 && took < 3000);
    assert_int_equal(ev.count, 1); /* comments are no events */
    assert_int_equal(resp.status, 200);
    json_t *want = json_pack("{s:s,s:s}", "code", "TIMEOUT", "message",
                             "total timeout (stream_total_timeout_ms) of 300 ms expired before "
                             "the response ended");
    assert_true(json_equal(failure, want));
    json_decref(want);
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);

    /* a plugin built against ABI 1.0/1.1 passes the smaller struct: no total timeout */
    events_init(&ev);
    req = make_req(f.url, "{}", 200);
    req.struct_size = (uint32_t)offsetof(weir_http_request, total_timeout_ms);
    weir_signal sig;
    assert_int_equal(weir__signal_init(&sig), WEIR_OK);
    failure = NULL;
    t0 = weir__now_ms();
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cancel_after_ms, &sig), 0);
    assert_int_equal(weir__http_sse(f.http, &sig, &req, on_event, &ev, &resp, &failure),
                     WEIR_E_CANCELLED); /* still streaming after 600 ms: cancelled */
    pthread_join(th, NULL);
    assert_true(weir__now_ms() - t0 >= 600);
    json_decref(failure);
    weir__http_response_clear(&resp);
    weir__signal_destroy(&sig);
    events_fini(&ev);
    fixture_stop(&f);
}

/* weir__http_get (the api's http_get): a GET on a connection of its own whose
 * body is collected whatever its status; a total timeout; no body allowed. */
static void test_http_get_collects_the_body(void **state) {
    fixture f;
    fixture_start(&f, "{\"models\":[{\"id\":\"m\",\"max_model_len\":8192}]}", "/v1/models");
    weir_http_request req = {.struct_size = sizeof req, .url = f.url, .headers = headers,
                             .total_timeout_ms = 2000};
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_get(&req, &resp, &failure), WEIR_OK);
    assert_null(failure);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.body,
                        "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"max_model_len\":8192}]}");
    assert_int_equal(resp.body_len, strlen(resp.body));
    weir__http_response_clear(&resp);
    char *method_line = mock_llm_request_path(f.mock, 0);
    assert_string_equal(method_line, "/v1/models");
    free(method_line);
    char *auth = mock_llm_request_header(f.mock, 0, "authorization");
    assert_string_equal(auth, "Bearer sk-test-secret");
    free(auth);
    /* a 404 is a response: its body is collected too */
    snprintf(f.url, sizeof f.url, "http://127.0.0.1:%d/props", mock_llm_port(f.mock));
    assert_int_equal(weir__http_get(&req, &resp, &failure), WEIR_OK);
    assert_int_equal(resp.status, 404);
    assert_non_null(strstr(resp.body, "unknown path"));
    weir__http_response_clear(&resp);
    /* a GET has no body */
    req.body = "{}";
    req.body_len = 2;
    assert_int_equal(weir__http_get(&req, &resp, &failure), WEIR_E_INVAL);
    assert_string_equal(json_string_value(json_object_get(failure, "message")),
                        "HTTP request: a GET has no body");
    json_decref(failure);
    assert_int_equal(mock_llm_requests(f.mock), 2);
    assert_int_equal(mock_llm_connections(f.mock), 2); /* one per GET */
    fixture_stop(&f);

    /* a stalled server: the total timeout ends it */
    fixture_start(&f, "{\"info_delay_ms\":10000,\"props\":{\"n_ctx\":1}}", "/props");
    req = (weir_http_request){.struct_size = sizeof req, .url = f.url, .total_timeout_ms = 300};
    int64_t t0 = weir__now_ms();
    assert_int_equal(weir__http_get(&req, &resp, &failure), WEIR_E_TIMEOUT);
    assert_true(weir__now_ms() - t0 < 3000);
    assert_string_equal(json_string_value(json_object_get(failure, "message")),
                        "total timeout of 300 ms expired before the response ended");
    json_decref(failure);
    weir__http_response_clear(&resp);
    fixture_stop(&f);
}

static void test_http_reset_is_transport(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"abc\",\"fault\":\"reset\"}]}",
                  "/v1/chat/completions");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                     WEIR_E_IO);
    assert_string_equal(weir__json_str(failure, "code", ""), "TRANSPORT");
    /* the method and URL, then curl's own text */
    const char *msg = weir__json_str(failure, "message", "");
    char want[512];
    snprintf(want, sizeof want,
             "POST %s: Failure when receiving data from the peer: Recv failure: "
             "Connection reset by peer",
             f.url);
    assert_string_equal(msg, want);
    assert_null(strstr(msg, "sk-test-secret"));
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

typedef struct canceller {
    events *ev;
    weir_signal *sig;
} canceller;

static void *cancel_after_first_event(void *arg) {
    canceller *c = arg;
    sem_wait(&c->ev->got);
    weir__signal_cancel(c->sig, "user");
    return NULL;
}

static void test_http_cancel_from_another_thread_is_aborted(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"abc\",\"fault\":\"stall\"}]}",
                  "/v1/chat/completions");
    weir_signal sig;
    assert_int_equal(weir__signal_init(&sig), WEIR_OK);
    events ev;
    events_init(&ev);
    canceller c = {&ev, &sig};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_after_first_event, &c), 0);
    weir_http_request req = make_req(f.url, "{}", 0); /* default idle: 300 s */
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, &sig, &req, on_event, &ev, &resp, &failure),
                     WEIR_E_CANCELLED);
    pthread_join(t, NULL);
    json_t *want = json_pack("{s:s,s:s}", "code", "ABORTED", "message", "request cancelled (user)");
    assert_true(json_equal(failure, want));
    json_decref(want);
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);
    weir__signal_destroy(&sig);
    fixture_stop(&f);
}

static void test_http_already_cancelled_signal_sends_nothing(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"abc\"}]}", "/v1/chat/completions");
    weir_signal sig;
    assert_int_equal(weir__signal_init(&sig), WEIR_OK);
    weir__signal_cancel(&sig, "disposed");
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(f.url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, &sig, &req, on_event, &ev, &resp, &failure),
                     WEIR_E_CANCELLED);
    json_t *want = json_pack("{s:s,s:s}", "code", "ABORTED", "message",
                             "request cancelled (disposed)");
    assert_true(json_equal(failure, want));
    assert_int_equal(weir__http_connects(f.http), 0);
    assert_int_equal(mock_llm_connections(f.mock), 0);
    json_decref(want);
    json_decref(failure);
    events_fini(&ev);
    weir__signal_destroy(&sig);
    fixture_stop(&f);
}

static void test_http_callback_stop_is_aborted(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"abcdef\",\"chunk_size\":1}]}",
                  "/v1/chat/completions");
    events ev;
    events_init(&ev);
    ev.stop_at = 2;
    weir_http_request req = make_req(f.url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                     WEIR_E_CANCELLED);
    assert_int_equal(ev.count, 2);
    json_t *want = json_pack("{s:s,s:s}", "code", "ABORTED", "message",
                             "stopped by the SSE event callback");
    assert_true(json_equal(failure, want));
    json_decref(want);
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);
    fixture_stop(&f);
}

/* Whatever non-zero value the callback returns (-1, or one that equals a
 * parser status), its stop is ABORTED, never a transport or memory error. */
static void test_http_callback_stop_with_negative_values_is_aborted(void **state) {
    (void)state;
    const int values[] = {-1, -2, -3};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        fixture f;
        fixture_start(&f, "{\"requests\":[{\"text\":\"abcdef\",\"chunk_size\":1}]}",
                      "/v1/chat/completions");
        events ev;
        events_init(&ev);
        ev.stop_at = 2;
        ev.stop_rc = values[i];
        weir_http_request req = make_req(f.url, "{}", 0);
        weir_http_response resp;
        json_t *failure = NULL;
        assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                         WEIR_E_CANCELLED);
        assert_int_equal(ev.count, 2);
        json_t *want = json_pack("{s:s,s:s}", "code", "ABORTED", "message",
                                 "stopped by the SSE event callback");
        assert_true(json_equal(failure, want));
        json_decref(want);
        json_decref(failure);
        weir__http_response_clear(&resp);
        events_fini(&ev);
        fixture_stop(&f);
    }
}

static void test_http_connection_refused_is_transport(void **state) {
    /* a bound socket that does not listen refuses connections */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/messages", ntohs(a.sin_port));
    weir__http *h;
    assert_int_equal(weir__http_create(&h), WEIR_OK);
    events ev;
    events_init(&ev);
    weir_http_request req = make_req(url, "{}", 0);
    weir_http_response resp;
    json_t *failure = NULL;
    assert_int_equal(weir__http_sse(h, NULL, &req, on_event, &ev, &resp, &failure), WEIR_E_IO);
    assert_int_equal(resp.status, 0);
    assert_string_equal(weir__json_str(failure, "code", ""), "TRANSPORT");
    /* the URL, then libcurl's detail once (it used to repeat "Couldn't connect to server") */
    const char *msg = weir__json_str(failure, "message", "");
    char head[128];
    snprintf(head, sizeof head, "cannot reach %s: Failed to connect to 127.0.0.1 port %d", url,
             ntohs(a.sin_port));
    if (strncmp(msg, head, strlen(head)) != 0)
        fail_msg("message: %s", msg);
    const char *once = strstr(msg, "Couldn't connect to server");
    assert_true(once == NULL || strstr(once + 1, "Couldn't connect to server") == NULL);
    json_decref(failure);
    weir__http_response_clear(&resp);
    events_fini(&ev);
    weir__http_destroy(h);
    close(fd);
}

static void test_http_invalid_arguments(void **state) {
    weir__http *h;
    assert_int_equal(weir__http_create(&h), WEIR_OK);
    weir_http_response resp;
    json_t *failure = NULL;
    weir_http_request req = make_req("http://127.0.0.1:1/", "{}", 0);
    assert_int_equal(weir__http_sse(NULL, NULL, &req, on_event, NULL, &resp, &failure),
                     WEIR_E_INVAL);
    assert_string_equal(weir__json_str(failure, "code", ""), "INVALID_REQUEST");
    assert_string_equal(weir__json_str(failure, "message", ""),
                        "HTTP request: the HTTP handle is NULL");
    json_decref(failure);
    req.url = NULL;
    assert_int_equal(weir__http_sse(h, NULL, &req, on_event, NULL, &resp, &failure), WEIR_E_INVAL);
    assert_string_equal(weir__json_str(failure, "message", ""), "HTTP request: url is NULL");
    json_decref(failure);
    req = make_req("http://127.0.0.1:1/", "{}", 0);
    req.struct_size = 4;
    assert_int_equal(weir__http_sse(h, NULL, &req, on_event, NULL, &resp, NULL), WEIR_E_INVAL);
    req = make_req("notascheme://x", "{}", 0);
    assert_int_equal(weir__http_sse(h, NULL, &req, on_event, NULL, &resp, &failure), WEIR_E_INVAL);
    assert_string_equal(weir__json_str(failure, "code", ""), "INVALID_REQUEST");
    json_decref(failure);
    assert_int_equal(weir__http_create(NULL), WEIR_E_INVAL);
    weir__http_destroy(NULL);
    weir__http_response_clear(NULL);
    assert_int_equal(weir__http_connects(NULL), 0);
    weir__http_destroy(h);
}

static void test_http_allocation_failures_are_reported(void **state) {
    fixture f;
    fixture_start(&f, "{\"loop\":true,\"requests\":[{\"fault\":\"server_error\"}]}",
                  "/v1/chat/completions");
    for (long n = 1;; n++) {
        events ev;
        events_init(&ev);
        weir_http_request req = make_req(f.url, "{}", 0);
        weir_http_response resp;
        json_t *failure = NULL;
        weir__alloc_fail_after(n);
        int rc = weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure);
        weir__alloc_fail_after(-1);
        weir__http_response_clear(&resp);
        events_fini(&ev);
        assert_null(failure);
        if (rc == WEIR_OK)
            break;
        assert_int_equal(rc, WEIR_E_NOMEM);
    }
    fixture_stop(&f);
}

static void test_mock_expect_message_contains(void **state) {
    fixture f;
    fixture_start(&f, "{\"requests\":[{\"text\":\"a\",\"expect\":{\"message_contains\":\"needle\"}},"
                      "{\"text\":\"b\",\"expect\":{\"message_contains\":\"needle\"}}]}",
                  "/v1/chat/completions");
    const char *bodies[] = {"{\"messages\":[\"hay needle hay\"]}", "{\"messages\":[\"hay\"]}"};
    const long want_status[] = {200, 400};
    for (int i = 0; i < 2; i++) {
        events ev;
        events_init(&ev);
        weir_http_request req = make_req(f.url, bodies[i], 0);
        weir_http_response resp;
        json_t *failure = NULL;
        assert_int_equal(weir__http_sse(f.http, NULL, &req, on_event, &ev, &resp, &failure),
                         WEIR_OK);
        assert_int_equal(resp.status, want_status[i]);
        weir__http_response_clear(&resp);
        events_fini(&ev);
    }
    assert_int_equal(mock_llm_expect_failures(f.mock), 1);
    fixture_stop(&f);
}

static void test_standalone_mock_serves_and_counts_connections(void **state) {
    char *dir = wt_tmpdir("mockllm");
    char script[512], port_file[512], exe[512];
    snprintf(script, sizeof script, "%s/script.json", dir);
    snprintf(port_file, sizeof port_file, "%s/port", dir);
    snprintf(exe, sizeof exe, "%s/weir-mock-llm", wt_env("WEIR_TEST_BIN_DIR"));
    assert_int_equal(wt_write_file(script, "{\"requests\":[{\"text\":\"one\"},{\"text\":\"two\"}]}"),
                     0);
    int out[2];
    assert_int_equal(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char *argv[] = {exe, "--script", script, "--port-file", port_file, "--max-requests", "2",
                    "--timeout-s", "60", NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, exe, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    FILE *from = fdopen(out[0], "r");
    assert_non_null(from);
    char line[64];
    assert_non_null(fgets(line, sizeof line, from)); /* one line: do not wait for more */
    int port = 0;
    assert_int_equal(sscanf(line, "port=%d", &port), 1);
    char *pf = wt_read_file(port_file, NULL);
    assert_non_null(pf);
    assert_int_equal(atoi(pf), port);
    free(pf);

    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/messages", port);
    weir__http *h;
    assert_int_equal(weir__http_create(&h), WEIR_OK);
    for (int i = 0; i < 2; i++) {
        events ev;
        events_init(&ev);
        weir_http_request req = make_req(url, "{}", 0);
        weir_http_response resp;
        json_t *failure = NULL;
        int rc = weir__http_sse(h, NULL, &req, on_event, &ev, &resp, &failure);
        if (rc)
            fail_msg("request %d: %s", i, weir__json_str(failure, "message", ""));
        assert_non_null(strstr(ev.text, i ? "\"text\":\"two\"" : "\"text\":\"one\""));
        weir__http_response_clear(&resp);
        events_fini(&ev);
    }
    char rest[256] = "";
    size_t n = fread(rest, 1, sizeof rest - 1, from); /* until the server exits */
    rest[n] = '\0';
    fclose(from);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_string_equal(rest, "connections=1\nrequests=2\n");
    weir__http_destroy(h);
    wt_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_sse_events_are_delivered),
        cmocka_unit_test(test_http_anthropic_stream_event_names),
        cmocka_unit_test(test_http_keep_alive_uses_one_connection),
        cmocka_unit_test(test_http_pool_reuses_handles_and_connections),
        cmocka_unit_test(test_http_429_retry_after_is_parsed),
        cmocka_unit_test(test_http_500_body_is_collected),
        cmocka_unit_test(test_http_overflow_bodies_classify_as_context_window_exceeded),
        cmocka_unit_test(test_http_2xx_json_body_is_collected),
        cmocka_unit_test(test_http_2xx_json_body_is_collected_whole),
        cmocka_unit_test(test_http_2xx_html_is_not_an_event_stream),
        cmocka_unit_test(test_http_gzip_bodies_are_not_event_streams),
        cmocka_unit_test(test_http_sse_under_no_or_a_loose_type_is_parsed),
        cmocka_unit_test(test_http_huge_response_header_is_named),
        cmocka_unit_test(test_http_truncated_stream_is_ok_without_done),
        cmocka_unit_test(test_http_malformed_data_is_passed_through),
        cmocka_unit_test(test_http_stall_times_out),
        cmocka_unit_test(test_http_total_timeout_ends_a_keepalive_stream),
        cmocka_unit_test(test_http_get_collects_the_body),
        cmocka_unit_test(test_http_reset_is_transport),
        cmocka_unit_test(test_http_cancel_from_another_thread_is_aborted),
        cmocka_unit_test(test_http_already_cancelled_signal_sends_nothing),
        cmocka_unit_test(test_http_callback_stop_is_aborted),
        cmocka_unit_test(test_http_callback_stop_with_negative_values_is_aborted),
        cmocka_unit_test(test_http_connection_refused_is_transport),
        cmocka_unit_test(test_http_invalid_arguments),
        cmocka_unit_test(test_http_allocation_failures_are_reported),
        cmocka_unit_test(test_mock_expect_message_contains),
        cmocka_unit_test(test_standalone_mock_serves_and_counts_connections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
