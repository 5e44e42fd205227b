/*
 * core/http.h - HTTP for provider plugins: one reused libcurl handle per
 * agent (keep-alive), POST with an SSE response, connect and stream-idle
 * timeouts, cancellation through a weir_signal.  Owner: core/http.c.
 */
#ifndef WEIR_CORE_HTTP_H
#define WEIR_CORE_HTTP_H

#include "common.h"

typedef struct weir__http weir__http;

/* Process-wide curl_global_init (idempotent, thread-safe). */
int weir__http_global_init(void);

int weir__http_create(weir__http **out);
void weir__http_destroy(weir__http *h);

/*
 * POST req and feed SSE events to on_event.  On HTTP error statuses the body
 * is collected into resp->body.  Transport problems return an error status
 * and *failure (new reference, canonical code TIMEOUT/TRANSPORT/ABORTED).
 */
int weir__http_sse(weir__http *h, weir_signal *signal, const weir_http_request *req,
                   weir_sse_fn on_event, void *ud, weir_http_response *resp,
                   json_t **failure);
void weir__http_response_clear(weir_http_response *resp);

/* Number of TCP connections this handle opened (for bench/tests). */
long weir__http_connects(const weir__http *h);

/* Parse Retry-After (seconds or HTTP-date) to ms; -1 if invalid. */
long long weir__parse_retry_after(const char *value, int64_t now_ms);

#endif
