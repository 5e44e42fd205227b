/*
 * core/format/failure.h - canonical failures and their classification (docs/providers.md):
 * {code, message, status?, retry_after_ms?, request_id?, provider} (and, made
 * by weir_failure_from_http, host? and rate_limit?: core/runtime/rate_limit.c).
 * The classification table lives in core/format/failure.c only.  Every function is
 * thread-safe.
 */
#ifndef WEIR_CORE_FAILURE_H
#define WEIR_CORE_FAILURE_H

#include "common.h"
#include "weir/host.h"

/*
 * New reference {code, message, provider?}: `code` must be canonical (an
 * unknown one becomes "UNKNOWN"); `provider` NULL leaves the member out.
 * Bytes of the message that are not valid UTF-8 become '?'.  NULL when out
 * of memory.
 */
json_t *weir__failure_new(const char *provider, const char *code, const char *fmt, ...)
    WEIR_PRINTF(3, 4);
json_t *weir__failure_vnew(const char *provider, const char *code, const char *fmt,
                           va_list ap) WEIR_PRINTF(3, 0);
/*
 * Classify an HTTP error response (status + body, borrowed).  New reference
 * {code, message, status?, retry_after_ms?, request_id?, provider?}: message
 * is the body's error.message when the body is JSON, else "HTTP <status>:
 * <first 300 bytes>".  Also accepts an in-band error event body with status
 * 0 or 2xx.  NULL when out of memory.  See the table in failure.c.
 */
json_t *weir__failure_from_http(const char *provider, const weir_http_response *resp);
/* True when `code` is one of the canonical codes. */
bool weir__failure_code_valid(const char *code);

#endif
