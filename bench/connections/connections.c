/*
 * bench/connections/connections.c - connection reuse: 10 streamed requests
 * through one weir__http handle against the in-process mock LLM server.
 * Prints "requests=10 tcp_connects=<n> ratio=<n>/1" and exits 1 when more
 * than one TCP connection was opened (keep-alive is broken), 2 on setup
 * or request errors.
 */
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "mock_llm.h"

#define REQUESTS 10

static int count_event(void *ud, const char *event, const char *data, size_t len) {
    (*(long *)ud)++;
    return 0;
}

int main(void) {
    static const char script[] =
        "{\"loop\":true,\"requests\":[{\"text\":\"Hello from the mock, streamed in pieces.\","
        "\"usage\":{\"input_tokens\":12,\"output_tokens\":9}}]}";
    static const char body[] =
        "{\"model\":\"bench\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    static const char *const headers[] = {"Content-Type: application/json", NULL};
    mock_llm *mock;
    if (mock_llm_start(script, &mock))
        return 2;
    weir__http *http;
    if (weir__http_create(&http)) {
        mock_llm_stop(mock);
        return 2;
    }
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", mock_llm_port(mock));
    int rc = 0;
    long events = 0;
    for (int i = 0; i < REQUESTS && rc == 0; i++) {
        weir_http_request req = {.struct_size = sizeof req, .url = url, .headers = headers,
                                 .body = body, .body_len = strlen(body)};
        weir_http_response resp;
        json_t *failure = NULL;
        if (weir__http_sse(http, NULL, &req, count_event, &events, &resp, &failure) != WEIR_OK ||
            resp.status != 200) {
            fprintf(stderr, "request %d failed: status %ld %s\n", i, resp.status,
                    failure ? json_string_value(json_object_get(failure, "message")) : "");
            rc = 2;
        }
        json_decref(failure);
        weir__http_response_clear(&resp);
    }
    long connects = weir__http_connects(http);
    long accepted = mock_llm_connections(mock);
    weir__http_destroy(http);
    mock_llm_stop(mock);
    if (rc)
        return rc;
    printf("requests=%d tcp_connects=%ld ratio=%ld/1 server_accepts=%ld events=%ld\n", REQUESTS,
           connects, connects, accepted, events);
    return connects > 1 || accepted > 1 ? 1 : 0;
}
