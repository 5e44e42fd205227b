/*
 * core/format/sse.h - an incremental Server-Sent Events parser: event/data/id
 * fields, multi-line data, CR/LF/CRLF, comments, arbitrary chunk boundaries.
 * Owner: core/format/sse.c.  Not thread-safe per parser.
 */
#ifndef WEIR_CORE_SSE_H
#define WEIR_CORE_SSE_H

#include "common.h"
#include "weir/host.h"

typedef struct weir__sse weir__sse;

/* Default limit on one line, and on one event's joined data: 8 MiB. */
#define WEIR__SSE_MAX_LINE ((size_t)8 << 20)
/* weir__sse_feed/finish result: a line (or an event's data) over the limit. */
#define WEIR__SSE_TOO_LONG (-1)
/* weir__sse_feed/finish result: out of memory. */
#define WEIR__SSE_NOMEM (-2)
/* weir__sse_feed/finish result: NULL parser (or NULL bytes with len > 0). */
#define WEIR__SSE_INVAL (-3)

/*
 * New parser in *out (owned; weir__sse_destroy).  on_event is called once per
 * dispatched event, with `event` "" when no event: field came, and `data` the
 * data: lines joined with "\n" (borrowed for the call, NUL-terminated).  It
 * returns 0 to go on, non-zero to stop (feed returns that value).  Events are
 * dispatched on a blank line, and only when a data: field was seen; id:,
 * retry:, unknown fields and comments (":...") are ignored.
 * WEIR_OK, WEIR_E_INVAL (NULL on_event/out) or WEIR_E_NOMEM.
 */
int weir__sse_create(weir_sse_fn on_event, void *ud, weir__sse **out);
/* Free the parser; NULL is a no-op. */
void weir__sse_destroy(weir__sse *p);
/* Change the line/data limit (bytes, > 0; default WEIR__SSE_MAX_LINE). */
void weir__sse_set_limit(weir__sse *p, size_t max_line);
/*
 * Feed bytes (any chunking, CR / LF / CRLF line ends, a CRLF may be split
 * across calls).  Returns 0, the callback's non-zero value,
 * WEIR__SSE_TOO_LONG, WEIR__SSE_NOMEM or WEIR__SSE_INVAL.  Once non-zero, the parser is
 * stopped and every later feed/finish returns the same value.
 */
int weir__sse_feed(weir__sse *p, const char *buf, size_t len);
/*
 * End of input: treat a pending unterminated line as terminated and dispatch
 * a final event not followed by a blank line.  Same results as feed.
 */
int weir__sse_finish(weir__sse *p);

#endif
