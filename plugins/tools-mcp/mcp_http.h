/*
 * plugins/tools-mcp/mcp_http.h - the Streamable HTTP transport of MCP
 * (basic/transports, 2025-11-25) through libcurl: every client message is
 * one POST to the server's endpoint (Accept: application/json,
 * text/event-stream); the answer is one JSON object, or an SSE stream of
 * messages (progress, logging, server requests, then the response), or 202
 * for a notification.  The session id the server gives with its
 * InitializeResult (Mcp-Session-Id) and the negotiated MCP-Protocol-Version
 * go on every later request; a 404 to a request that carried the session
 * id means the session ended (the caller initializes again).  Answers owed
 * to server requests (ping, -32601) are POSTed at once.
 *
 * Every message of an answer goes through mcp__server_dispatch.  A request
 * runs on the caller's thread; several may run at once (each has its own
 * curl handle).
 */
#ifndef WEIR_MCP_HTTP_H
#define WEIR_MCP_HTTP_H

#include <stddef.h>

#include <jansson.h>

#include "mcp_server.h"

typedef struct mcp_http mcp_http;

enum {
    MCP_HTTP_OK = 0,
    MCP_HTTP_FAILED,       /* no answer: connection refused, reset, an HTTP error status */
    MCP_HTTP_TIMEOUT,
    MCP_HTTP_CANCELLED,
    MCP_HTTP_SESSION_GONE, /* 404 with a session id, or not sent: the session was
                            * lost and no initialize has answered since; initialize again */
    MCP_HTTP_PROTOCOL      /* an answer that is not JSON-RPC */
};

/** New transport for `url` with extra `headers` ("Name: value", copied). NULL: out of memory. */
mcp_http *mcp_http_create(const char *url, char *const *headers, size_t max_message);
void mcp_http_destroy(mcp_http *h);
/** Forget the session and the version (before an initialize). */
void mcp_http_reset(mcp_http *h);
/** The negotiated version, sent as MCP-Protocol-Version from now on. */
void mcp_http_set_version(mcp_http *h, const char *version);
/** End the session with a DELETE (best effort, 2 s at most); forget it. */
void mcp_http_end_session(mcp_http *h);

/**
 * POST `msg` (borrowed) and read the answer within `timeout_ms` (<= 0: 10
 * minutes), polling `cancel` (may be NULL).  @return an MCP_HTTP_* code,
 * with the reason in `why` when not OK.
 */
int mcp_http_send(mcp_http *h, mcp_server *s, const json_t *msg, long timeout_ms,
                  mcp_cancel_cb cancel, void *cancel_ctx, char *why, size_t size);

#endif
