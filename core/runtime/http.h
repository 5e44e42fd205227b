/*
 * core/runtime/http.h - HTTP for provider plugins: reused libcurl handles (keep-alive)
 * that the host's agents share through a pool, POST with an SSE response,
 * connect, stream-idle and total timeouts, cancellation through a
 * weir_signal.  Owner: core/runtime/http.c.
 *
 * A weir__http is used by one thread at a time (taken from the pool for one
 * request); different handles are independent.
 */
#ifndef WEIR_CORE_HTTP_H
#define WEIR_CORE_HTTP_H

#include "common.h"
#include "weir/host.h"

typedef struct weir__http weir__http;

/* Process-wide curl_global_init (idempotent, thread-safe).  WEIR_OK or
 * WEIR_E_INTERNAL when libcurl cannot initialize. */
int weir__http_global_init(void);

/*
 * New handle in *out (owned; weir__http_destroy).  Calls
 * weir__http_global_init.  WEIR_OK, WEIR_E_INVAL, WEIR_E_NOMEM or
 * WEIR_E_INTERNAL.
 */
int weir__http_create(weir__http **out);
/* Close the kept connections and free the handle.  NULL is a no-op. */
void weir__http_destroy(weir__http *h);

/*
 * POST req (borrowed; headers are sent as given plus "Expect:") on the
 * handle's kept connection and wait for the whole response.
 *
 * `resp` is overwritten (release an earlier body with
 * weir__http_response_clear first): status, retry_after_ms (retry-after-ms,
 * else Retry-After as seconds or HTTP-date; -1 when absent or invalid),
 * request_id (x-request-id / request-id).  A 2xx event stream (Content-Type
 * text/event-stream, or none and a body that starts like SSE) is parsed as
 * it arrives and each event is passed to on_event(ud, ...); any other body
 * is collected (first 64 KiB, NUL-terminated) into resp->body, owned by
 * resp.
 *
 * Returns WEIR_OK when a response arrived (whatever its status: the caller
 * classifies non-2xx with weir__failure_from_http; a 2xx stream that ends
 * without the provider's finish is the provider's to detect; a 2xx JSON
 * body, application/json, application/x-ndjson or +json, is the caller's to
 * read).  Otherwise an error, with *failure (if failure != NULL; new
 * reference; a canonical failure without "provider", which the caller
 * adds):
 *   WEIR_E_CANCELLED  ABORTED  the signal fired ("request cancelled (cause)"),
 *                              or on_event returned non-zero
 *   WEIR_E_TIMEOUT    TIMEOUT  no byte for idle_timeout_ms ("no data for N
 *                              ms"); the request not done after
 *                              total_timeout_ms ("total timeout
 *                              (stream_total_timeout_ms) of N ms expired
 *                              before the response ended", named by the
 *                              providers' config key); or curl's connect
 *                              timeout
 *   WEIR_E_IO         TRANSPORT connect failure, reset, receive error,
 *                              truncated body, an SSE line over 8 MiB;
 *                     UNKNOWN  a 2xx body that is not an event stream nor
 *                              JSON: another Content-Type (a captive
 *                              portal's text/html), a Content-Encoding, gzip
 *                              data, an untyped body that is not SSE ("HTTP
 *                              200 with Content-Type text/html (not an event
 *                              stream): <its first 200 bytes, printable>",
 *                              with status and request_id; the body is in
 *                              resp->body too); a response head over
 *                              WEIR__HTTP_MAX_HEAD, or one header line over
 *                              libcurl's CURL_MAX_HTTP_HEADER ("response
 *                              header too large: ..."); other curl errors
 *                              (message: curl's text)
 *   WEIR_E_INVAL      INVALID_REQUEST  NULL arguments, bad struct_size, bad URL
 *   WEIR_E_NOMEM      (no failure object)
 * `signal` may be NULL (never cancelled).  Counted connections go to
 * weir__http_connects.  Not thread-safe per handle.
 */
/* The most bytes of one response head (status line and header lines)
 * weir__http_sse and weir__http_get accept; libcurl's own limit on one
 * line, CURL_MAX_HTTP_HEADER (100 KiB), applies too. */
#define WEIR__HTTP_MAX_HEAD ((size_t)256 << 10)

int weir__http_sse(weir__http *h, weir_signal *signal, const weir_http_request *req,
                   weir_sse_fn on_event, void *ud, weir_http_response *resp,
                   json_t **failure);
/*
 * GET req->url (req borrowed: url, headers, connect/idle/total timeouts; no
 * body) on a new handle of its own, destroyed (its connection closed) before
 * returning, and wait for the whole response.  The body is collected whatever
 * its status and Content-Type: the first 64 KiB, NUL-terminated, into
 * resp->body (owned by resp); `resp` is overwritten as by weir__http_sse.
 * Nothing cancels it: the timeouts bound it.  A total timeout is TIMEOUT
 * "total timeout of N ms expired before the response ended".  Returns and
 * *failure as weir__http_sse.  Thread-safe (the api table's http_get).
 */
int weir__http_get(const weir_http_request *req, weir_http_response *resp, json_t **failure);

/* Free resp->body and reset every field (retry_after_ms to -1).  NULL is a
 * no-op.  Thread-safe for distinct responses. */
void weir__http_response_clear(weir_http_response *resp);

/* Number of TCP connections this handle opened (for bench/tests). */
long weir__http_connects(const weir__http *h);

/*
 * A host's idle handles (issue #15): a request takes one (the one given
 * back last, whose kept connection is the warmest, else a new one) and
 * gives it back when it is done, so agents that run at most T requests at
 * a time hold T handles and their kept connections, not one each.  At most
 * WEIR__HTTP_POOL_IDLE idle handles are kept; more are destroyed when given
 * back.  Thread-safe.  Owner: the host (weir__host_http_pool).
 */
typedef struct weir__http_pool weir__http_pool;
#define WEIR__HTTP_POOL_IDLE 32
/* New empty pool in *out (nothing of libcurl is touched until a take).
 * WEIR_OK or WEIR_E_NOMEM. */
int weir__http_pool_create(weir__http_pool **out);
/* Destroy the idle handles and the pool (none may be taken).  NULL: no-op. */
void weir__http_pool_destroy(weir__http_pool *p);
/* A handle for one request in *out (the caller's until given back):
 * WEIR_OK, or weir__http_create's errors. */
int weir__http_pool_take(weir__http_pool *p, weir__http **out);
/* Give `h` back (NULL: no-op).  Its kept connection stays open for the
 * next request, whichever agent makes it. */
void weir__http_pool_give(weir__http_pool *p, weir__http *h);
/* Idle handles in the pool (for tests). */
size_t weir__http_pool_idle(weir__http_pool *p);

/*
 * Parse a Retry-After value: delay-seconds (digits) or an HTTP-date
 * (IMF-fixdate, RFC 850, asctime) relative to now_ms (epoch ms; a past date
 * gives 0).  Returns ms, or -1 when NULL, empty, negative or invalid.
 * Thread-safe.
 */
long long weir__parse_retry_after(const char *value, int64_t now_ms);

/* ---- rate limits (core/runtime/rate_limit.c; docs/retry.md) ----------------- */

/* Keep header `name` (n bytes) with `value` (vlen bytes) in *raw (created
 * when first needed) when it is a rate-limit header (x-ratelimit-*,
 * anthropic-ratelimit-*), up to 32 of them.  false when out of memory. */
bool weir__rate_limit_header(json_t **raw, const char *name, size_t n, const char *value,
                             size_t vlen);
/* New: {requests?, tokens?, input_tokens?, output_tokens?: {limit?,
 * remaining?, reset_ms?}, raw} from the headers `raw` kept (borrowed), or
 * NULL when there are none (or out of memory). */
json_t *weir__rate_limit_normalize(const json_t *raw, int64_t now_ms);
/* Record, as the calling thread's last response, `resp` (compared, never
 * read), the host of `url` and the normalized `raw` (borrowed; may be
 * NULL). */
void weir__http_last_set(const weir_http_response *resp, const char *url, const json_t *raw);
/* Forget the calling thread's last response (an attempt starts). */
void weir__http_last_clear(void);
/* New reference: {host?, rate_limit?} of the calling thread's last
 * response (of `resp` when it is not NULL), or NULL. */
json_t *weir__http_last(const weir_http_response *resp);
/* weir_failure_from_http: weir__failure_from_http, with the host and the
 * rate limits of `resp` when it is the calling thread's last response. */
json_t *weir__http_failure(const char *provider, const weir_http_response *resp);

#endif
