/*
 * plugins/tools-mcp/mcp_server.h - one MCP server as tools-mcp talks to it:
 * a JSON-RPC 2.0 client over the stdio transport (a child process) or
 * Streamable HTTP (mcp_http.c), the lifecycle (initialize with version
 * negotiation, notifications/initialized, a lazy restart with backoff after
 * a death), requests with timeouts, cancellation (notifications/cancelled)
 * and progress, the answers a tools-only client owes the server (ping:
 * {}, any other request: -32601 Method not found), and its stderr.
 *
 * No host API: the plugin passes callbacks (log, progress, cancellation)
 * and the server scrubs the secrets the plugin gives it (cfg.secrets) from
 * every text it hands them.  Thread-safety: every function may be called from any
 * thread, concurrently, after mcp_server_create; mcp_server_destroy only
 * when no call runs.
 */
#ifndef WEIR_MCP_SERVER_H
#define WEIR_MCP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "provider_common.h" /* pc_secrets */

/** The protocol versions weir speaks, newest first (initialize sends the first). */
extern const char *const mcp_versions[];

typedef enum mcp_kind { MCP_STDIO = 0, MCP_HTTP = 1 } mcp_kind;

/** What a request ended with. */
typedef enum mcp_status {
    MCP_OK = 0,
    MCP_RPC_ERROR,  /* the server answered a JSON-RPC error (*out is the error object) */
    MCP_TIMEOUT,    /* no answer within the timeout; notifications/cancelled was sent */
    MCP_CANCELLED,  /* the caller's cancel fired; notifications/cancelled was sent */
    MCP_DEAD,       /* the server died (or the connection failed) before it answered */
    MCP_DOWN,       /* the server is not running and could not be (re)started now */
    MCP_PROTOCOL,   /* the answer broke the protocol (not an object, an HTTP error...) */
    MCP_NOMEM
} mcp_status;

/** Levels of mcp_log_cb (weir's: 0 error, 1 warn, 2 info, 3 debug). */
typedef void (*mcp_log_cb)(void *ud, int level, const char *text);
/**
 * A notifications/progress for a request that asked for it: `ctx` is what
 * the caller passed, `params` (borrowed, scrubbed) the notification's
 * params.  Called on the transport's thread (stdio: the reader; HTTP: the
 * caller's) while the request is in flight, never after it returned, and
 * with no lock of the server held (it may deliver a live event).
 */
typedef void (*mcp_progress_cb)(void *ud, void *ctx, const json_t *params);
/** True when the request should stop waiting (the turn was cancelled). */
typedef bool (*mcp_cancel_cb)(void *ctx);

typedef struct mcp_server_cfg {
    const char *name;            /* the server's name in the deployment */
    mcp_kind kind;
    /* stdio */
    char *const *argv;           /* NULL-terminated: command, args */
    char *const *envp;           /* NULL-terminated "K=V": the server's whole environment */
    const char *cwd;             /* NULL: weir's */
    /* HTTP */
    const char *url;
    char *const *headers;        /* NULL-terminated "Name: value" */
    /* both */
    long startup_timeout_ms;     /* spawn + initialize */
    long grace_ms;               /* stdio shutdown: before SIGTERM, and before SIGKILL */
    size_t max_message;          /* longest frame accepted (bytes) */
    const pc_secrets *secrets;   /* scrubbed from every text handed out (borrowed) */
    mcp_log_cb log;
    mcp_progress_cb progress;
    void *ud;
} mcp_server_cfg;

typedef struct mcp_server mcp_server;

/** New server (not started; everything in `cfg` is copied but `secrets` and `ud`). NULL: out of memory. */
mcp_server *mcp_server_create(const mcp_server_cfg *cfg);

/**
 * Start it now (spawn or connect, initialize, notifications/initialized),
 * within cfg->startup_timeout_ms.  0, or -1 with the reason in `why` (its
 * stderr is not in it: see mcp_server_stderr_tail).
 */
int mcp_server_start(mcp_server *s, char *why, size_t size);

/**
 * One request.  `params` (stolen, may be NULL) gets "_meta.progressToken"
 * when `progress_ctx` is not NULL.  Waits at most `timeout_ms` (<= 0: no
 * limit) and polls `cancel(cancel_ctx)` (may be NULL).  A server that is
 * not running is started first (a lazy restart, or MCP_DOWN while its
 * backoff runs).  *out: MCP_OK the result object, MCP_RPC_ERROR the error
 * object (new references; else NULL).  `why` explains anything but MCP_OK.
 */
mcp_status mcp_server_request(mcp_server *s, const char *method, json_t *params, long timeout_ms,
                              mcp_cancel_cb cancel, void *cancel_ctx, void *progress_ctx,
                              json_t **out, char *why, size_t size);

/** A notification (params stolen, may be NULL) on the running connection; -1 when there is none. */
int mcp_server_notify(mcp_server *s, const char *method, json_t *params);

/**
 * tools/list, every page (a cursor repeated or 100 pages end it), into *tools
 * (a new array).  Returns as mcp_server_request.
 */
mcp_status mcp_server_list_tools(mcp_server *s, long timeout_ms, json_t **tools, char *why,
                                 size_t size);

/** The negotiated protocol version ("" before the first start). Borrowed, changes on restart. */
const char *mcp_server_version(mcp_server *s, char *buf, size_t size);
/** The server's capabilities from its last initialize (new reference, or NULL). */
json_t *mcp_server_capabilities(mcp_server *s);

/** True once (and clears it) when notifications/tools/list_changed came, or a restart happened. */
bool mcp_server_take_list_changed(mcp_server *s);
/** How many list_changed notifications arrived in all (for tests and the log). */
uint64_t mcp_server_list_changed_count(mcp_server *s);

/**
 * Its last `lines` stderr lines (scrubbed), each as "\n  | <line>", into
 * buf ("" when none).  Returns buf.
 */
const char *mcp_server_stderr_tail(mcp_server *s, int lines, char *buf, size_t size);

/** Stop it (stdio: close stdin, SIGTERM, SIGKILL, the whole process group) and free. NULL is a no-op. */
void mcp_server_destroy(mcp_server *s);

/* --- for mcp_http.c ----------------------------------------------------- */

/**
 * Handle one message that came from the server (a response, a request, a
 * notification) as the stdio reader does.  For the HTTP transport: `reply`
 * receives a new reference to the answer owed to a server request (NULL
 * when none).  Internal.
 */
void mcp__server_dispatch(mcp_server *s, json_t *msg, json_t **reply);

#endif
