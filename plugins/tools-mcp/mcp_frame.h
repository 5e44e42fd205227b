/*
 * plugins/tools-mcp/mcp_frame.h - the JSON-RPC frame reader of the stdio
 * transport: newline-delimited JSON, one message per line (MCP
 * basic/transports, stdio).  Pure: no host API, no I/O; the unit tests and
 * the fuzzer (tests/fuzz/fuzz_mcp_frame.c) compile it directly.
 *
 * Bytes go in as they arrive (any split); each complete line comes out
 * through the callback: a trailing '\r' is stripped, empty lines are
 * skipped, a line longer than the reader's limit is dropped whole (the
 * callback sees it as MCP_FRAME_TOO_LONG with its length, never its bytes)
 * and a line that is not one JSON object is reported as MCP_FRAME_GARBAGE
 * with its first bytes.  A string value may hold \u0000 (JSON_ALLOW_NUL: a
 * NUL in one tool name must not lose the whole tools/list answer); a NUL in
 * an object key makes the line garbage (jansson cannot hold it).  The reader never holds more than `max` + 1 bytes.
 */
#ifndef WEIR_MCP_FRAME_H
#define WEIR_MCP_FRAME_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef enum mcp_frame_kind {
    MCP_FRAME_MESSAGE = 0, /* `msg` is a JSON object (borrowed for the call) */
    MCP_FRAME_GARBAGE,     /* not JSON, or JSON that is not an object: `text` */
    MCP_FRAME_TOO_LONG     /* longer than the limit: `len` bytes were dropped */
} mcp_frame_kind;

/**
 * One frame.  `msg` (MESSAGE) is borrowed: take a reference to keep it.
 * GARBAGE: `text` is the line (`len` bytes, not NUL-terminated, borrowed
 * for the call; show only its start).  TOO_LONG: text NULL, len the length.
 * Return 0 to go on, non-zero to stop (mcp_frame_feed then returns it).
 */
typedef int (*mcp_frame_fn)(void *ud, mcp_frame_kind kind, json_t *msg, const char *text,
                            size_t len);

typedef struct mcp_frame_reader {
    char *buf;        /* owned: the line so far */
    size_t len, cap;
    size_t max;       /* longest line accepted (bytes, without '\n') */
    size_t dropped;   /* > 0 while skipping an over-long line: its length so far */
    bool skipping;
} mcp_frame_reader;

/** Initialise with a line limit (0 = 16 MiB).  Never fails. */
void mcp_frame_init(mcp_frame_reader *r, size_t max);
/** Free the buffer.  The reader may be initialised again. */
void mcp_frame_clear(mcp_frame_reader *r);
/**
 * Feed `n` bytes; calls `fn` once per complete line, in order.
 * @return 0, the callback's non-zero value, or -1 when out of memory (the
 *         partial line is dropped; the reader stays usable).
 */
int mcp_frame_feed(mcp_frame_reader *r, const char *data, size_t n, mcp_frame_fn fn, void *ud);
/** Bytes of an unfinished line held (for a transport that sees EOF mid-line). */
size_t mcp_frame_pending(const mcp_frame_reader *r);

/**
 * The writer's side: `v` (any JSON value, borrowed) as compact text, with a
 * '\n' after it when `newline` (a stdio frame).  Malloc'd (free()), or NULL
 * for NULL, a string that is not UTF-8, or out of memory.  Not json_dumps:
 * jansson 2.14 goes on past an object key its growing buffer failed to take
 * and reports success, text that is not JSON.
 */
char *mcp_frame_text(const json_t *v, bool newline);

#endif
