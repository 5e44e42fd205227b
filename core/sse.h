/*
 * core/sse.h - an incremental Server-Sent Events parser: event/data/id
 * fields, multi-line data, CR/LF/CRLF, comments, arbitrary chunk boundaries.
 * Owner: core/sse.c.  Not thread-safe per parser.
 */
#ifndef WEIR_CORE_SSE_H
#define WEIR_CORE_SSE_H

#include "common.h"

typedef struct weir__sse weir__sse;

/* on_event returns 0 to go on, non-zero to stop (feed returns that value). */
int weir__sse_create(weir_sse_fn on_event, void *ud, weir__sse **out);
void weir__sse_destroy(weir__sse *p);
/* Feed bytes; 0, the callback's non-zero value, or -1 on a line over the limit. */
int weir__sse_feed(weir__sse *p, const char *buf, size_t len);
/* Flush a final event not followed by a blank line. */
int weir__sse_finish(weir__sse *p);

#endif
