/*
 * weir/plugin.h - everything a plugin author needs.
 *
 * A plugin is a shared object that exports exactly one symbol:
 *
 *     const weir_plugin_desc *weir_plugin_describe(void);
 *
 * (use WEIR_PLUGIN_DEFINE).  The descriptor carries the ABI version the
 * plugin was built against, its name, and `init`/`fini`.  During `init` the
 * plugin registers hooks, tools, providers and event types through the
 * `weir_api` table it is given; afterwards every registration call fails with
 * WEIR_E_TOO_LATE.  Plugins never link libweir: they reach the host only
 * through the table.  The macros at the end of this file let plugin code call
 * `weir_hook_register(...)`, `weir_next(call)` ... as if they were functions.
 *
 * Payloads crossing the ABI are jansson values.  Ownership follows jansson:
 * "new reference" means the receiver must json_decref() it, "borrowed" means
 * the receiver must not, and "steals" means the callee takes the reference.
 *
 * ABI change log (append a line for every minor bump; never reorder):
 *   1.0  first ABI: descriptor, api table (plugins, hooks, signals, agents,
 *        events, providers, streams, HTTP/SSE, failures, tools, schema).
 *   1.1  agent_hook_register: listeners of one agent, added in agent/created.
 *   1.2  exactly-once tools across a crash: the WEIR_TOOL_IDEMPOTENT tool flag,
 *        tool_exec_idempotency_key and tool_exec_attempt.  An overall stream
 *        deadline: weir_http_request.total_timeout_ms (the shorter struct of
 *        1.0 and 1.1 plugins still works: it has no deadline).
 *   1.3  agent_complete_stream: agent_complete through the agent's llm/stream
 *        chain (its listeners get a purpose).
 *   1.4  http_get: a GET outside any model call, on a connection of its own
 *        (provider-openai asks its server for the models' windows).
 *   1.5  clock_ms: the host's monotonic clock, the one signal_sleep waits on
 *        (a test's fake clock makes both virtual).  provider_require: a row
 *        names a provider it needs; the deployment fails if none registered
 *        it.  agent/request-error may answer {kind:"error", error}: the
 *        failure the turn ends with (retry: a spent time budget says so).
 *        assistant/message and assistant/attempt carry the request's
 *        provider and model.  Native steering: weir_provider.steer_live
 *        (optional; a shorter struct has none) and stream_steering (a
 *        provider reports native input accepted, applied or refused).
 *        tool_exec_progress: a running tool reports progress (the live
 *        tool/progress event).  tool_update, tool_remove: a row changes its
 *        own tools after init (tools-mcp's list_changed).
 *        tool_exec_append: a tool's execute appends events of its plugin's
 *        types, committed in model order with its result.
 *        agent_log_path, hook_invoke (a plugin raises a catalog hook, e.g.
 *        agent/pre-compact), agent_approve (the embedder's approver).
 *        store_register: a row provides a session store (weir/store.h),
 *        named by "session": {"store": "<row id>"}; WEIR_E_LEASE_LOST.
 *        agent_event_peek: a log envelope read in place (no copy).
 *   1.6  the WEIR_TOOL_INLINE tool flag: a body that returns at once runs on
 *        the step's thread, not the tool pool.
 *   1.7  agent_event_ref: a log envelope as a new reference (no copy), held
 *        as long as the plugin wants; the log releases the JSON of a long
 *        turn's older envelopes at each step's end (their lines stay).
 *   1.8  stream_session: the session (agent) id of the call a stream is
 *        for (provider-openai's default prompt_cache_key).
 *   1.9  weir_log_summary (weir/host.h): a log file's summary from its head
 *        and its last log/checkpoint (`weir sessions`).
 *   1.10 weir_store find_last, read_ranges (weir/store.h): an open resumes
 *        from the session's last log/checkpoint, reading the surface, the
 *        kept events and the tail, not every event.  weir_log_each
 *        (weir/host.h): a log file's events handed over one at a time.
 *   1.11 weir_agent_options.session_header (weir/host.h): a new session's
 *        first event, the ignorable session/start (the deployment that
 *        created it); weir_log_summary gives it as `header`.
 *        weir_set_warn_handler (weir/host.h): an embedder takes weir's
 *        warning lines (weir run prints them at a line boundary).
 *        WEIR_PLUGIN_HEADER_MIN(minor): a plugin stamps the oldest minor it
 *        needs.  weir_failure_from_http's failure carries host and
 *        rate_limit, and the attempt's log record data.http (no new member).
 *   1.12 plugin_role: a row declares the policy roles it fills
 *        (compaction, retry, system-prompt, ...); two rows filling one role
 *        fail the deployment unless both rows give "share_roles" (docs/plugins.md,
 *        "Roles"); `weir hooks` shows each listener's plugin, version and roles.
 *        SDK helpers: agent_route (an agent's provider, model, window,
 *        max output, base_url and host in one call), agent_state (per-agent
 *        state of a row, freed when the agent is disposed or the row
 *        unloaded), unique_id; the pure helpers of weir/sdk.h (error
 *        filling, typed config readers, the token estimate and meter, a
 *        message's text, a summary transcript).
 *        The agent/admit waterfall: every
 *        input before it is logged, admitted, rewritten or refused
 *        (WEIR_E_REFUSED, weir/errors.h); hook/decision carries input_id.
 *        Status lines: an event's data.status (docs/plugins.md; no new
 *        member).  Namespaced event types (`<namespace>/<name>`, the
 *        plugin's name or a claimed one, enforced at load):
 *        event_namespace_claim.
 */
#ifndef WEIR_PLUGIN_H
#define WEIR_PLUGIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "weir/errors.h"
#include "weir/export.h"
#include "weir/store.h"
#include "weir/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Opaque handles                                                            */
/* ------------------------------------------------------------------------ */

/** One loaded plugin instance: one row of the deployment's `plugins` list. */
typedef struct weir_plugin weir_plugin;
/** One hook invocation (a cursor over a chain). Valid only during the call. */
typedef struct weir_call weir_call;
/** One conversation: session log, inbox, driver. */
typedef struct weir_agent weir_agent;
/** A cancellation signal: an atomic flag plus a condition variable. */
typedef struct weir_signal weir_signal;
/** One streaming model call (one attempt) handed to a provider. */
typedef struct weir_stream weir_stream;
/** One tool call being executed. Valid only during `execute`. */
typedef struct weir_tool_exec weir_tool_exec;

typedef struct weir_api weir_api;

/* ------------------------------------------------------------------------ */
/* Descriptor                                                                */
/* ------------------------------------------------------------------------ */

/**
 * Called once per configured row that uses this plugin.
 * @param self    the instance; valid until `fini` returns.
 * @param api     the host table; valid for the life of the process.
 * @param config  the row's `config` object, borrowed, valid only during init.
 * @param err     fill with the reason on failure (the loader wraps it).
 * @return WEIR_OK, or any error status (the whole deployment then fails).
 */
typedef int (*weir_plugin_init_fn)(weir_plugin *self, const weir_api *api,
                                   const json_t *config, weir_error *err);
/** Called once per instance, in reverse load order. May be NULL. */
typedef void (*weir_plugin_fini_fn)(weir_plugin *self);

typedef struct weir_plugin_desc {
    /* header: never moves, checked before any other field is read */
    uint32_t abi_major;   /* WEIR_ABI_MAJOR the plugin was built against */
    uint32_t abi_minor;   /* WEIR_ABI_MINOR the plugin was built against */
    uint32_t struct_size; /* sizeof(weir_plugin_desc) at build time */
    uint32_t flags;       /* must be 0 */
    /* 1.0 */
    const char *name;        /* unique, [a-z0-9_-]+ */
    const char *version;     /* the plugin's own version */
    const char *description; /* one line */
    const char *config_schema; /* JSON Schema text for `config`, or NULL */
    weir_plugin_init_fn init;  /* required */
    weir_plugin_fini_fn fini;  /* optional */
    void *reserved[4];         /* must be NULL */
} weir_plugin_desc;

/** Smallest descriptor the loader accepts (the 1.0 layout). */
#define WEIR_PLUGIN_DESC_V1_SIZE ((uint32_t)sizeof(weir_plugin_desc))

/** The type of the single exported entry symbol. */
typedef const weir_plugin_desc *(*weir_plugin_describe_fn)(void);

#define WEIR_PLUGIN_ENTRY_SYMBOL "weir_plugin_describe"

/* ------------------------------------------------------------------------ */
/* Hooks                                                                     */
/* ------------------------------------------------------------------------ */

/**
 * A hook listener.
 * @param call       the invocation; pass it to weir_next()/weir_call_fail().
 * @param args       the hook's payload, borrowed, read-only.
 * @param user_data  weir_hook_opts.user_data.
 * @return a new reference.  waterfall: the chain's result from here inwards
 *         (usually what weir_next() returned, possibly changed or replaced).
 *         serial and emit: ignored (return NULL or json_null()).
 *         Returning NULL after weir_call_fail() (or, for waterfall and
 *         serial, returning NULL at all) marks the listener as failed.
 */
typedef json_t *(*weir_hook_fn)(weir_call *call, const json_t *args,
                                void *user_data);

/** Placement within a chain (APR spacing). Ties keep config order. */
#define WEIR_ORDER_FIRST (-10)
#define WEIR_ORDER_MIDDLE 0
#define WEIR_ORDER_LAST 10

typedef struct weir_hook_opts {
    uint32_t struct_size;       /* sizeof(weir_hook_opts) */
    int order;                  /* WEIR_ORDER_* */
    const char *const *before;  /* NULL-terminated plugin ids, or NULL */
    const char *const *after;   /* NULL-terminated plugin ids, or NULL */
    void *user_data;
} weir_hook_opts;

#define WEIR_HOOK_OPTS_INIT {sizeof(weir_hook_opts), WEIR_ORDER_MIDDLE, NULL, NULL, NULL}

/* ------------------------------------------------------------------------ */
/* Inbox targets and log flags                                               */
/* ------------------------------------------------------------------------ */

typedef enum weir_send_mode {
    WEIR_SEND_FOLLOWUP = 0, /* next-turn, wakes the agent */
    WEIR_SEND_STEER = 1,    /* next-step, wakes the agent */
    WEIR_SEND_INJECT = 2    /* next-step, does not wake */
} weir_send_mode;

/** Event type flags for event_type_register. */
#define WEIR_EVENT_IGNORABLE 0x1u /* readers that do not know it skip it */

/* ------------------------------------------------------------------------ */
/* Providers                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * A model provider.  Registered under the plugin row's id.
 *
 * Stream chunks (JSON objects, emitted with weir_stream_emit) are:
 *   {"type":"block-start","index":i,"block_type":"text|reasoning|tool_call"}
 *   {"type":"text-delta","index":i,"text":"..."}
 *   {"type":"reasoning-delta","index":i,"text":"..."}
 *   {"type":"tool-call-delta","index":i,"id":"...","name":"...","arguments_delta":"..."}
 *   {"type":"continuation","index":i,"continuation":{"provider":P,"model":M,"data":{...}}}
 *   {"type":"block-end","index":i}
 *   {"type":"usage","usage":{input_tokens,output_tokens,...}}
 *   {"type":"finish","reason":{"kind":"stop|tool-calls|max-tokens|error|aborted",
 *                              "failure":{code,message,status?,retry_after_ms?,request_id?,provider,host?,rate_limit?}}}
 * `usage` comes before `finish`; nothing follows `finish`.
 *
 * `continuation` (Since: issue #32) hands the core what the provider needs
 * back to continue block i's reasoning on a later request (an Anthropic
 * thinking signature or redacted_thinking data, DeepSeek's reasoning_content
 * marker, a Gemini thought_signature): emitted after the block's deltas,
 * before its block-end.  P is the provider's row id, M the request's `model`
 * exactly as sent, `data` a non-empty object whose members are all strings,
 * opaque to the core.  The fold sets it as the block's "continuation" member
 * (the last one wins; a block not seen yet opens as reasoning, and a
 * reasoning block that has one is kept even with empty text).  The core
 * sends it back, verbatim and in its place, only to the same row and model,
 * and only while the history before it is unchanged, unless the object says
 * "prefix_bound": false (a boolean beside provider/model/data; absent means
 * bound: DeepSeek's reasoning_content is bound to no prefix); otherwise a
 * reasoning block is left out of the request and another block only loses
 * the member (docs/session-log.md, "Reasoning continuations").  A provider finding
 * `data` without the key it needs skips that block and says so once.
 */
typedef struct weir_provider {
    uint32_t struct_size; /* sizeof(weir_provider) */
    /**
     * New reference {"context_window":N?, "max_output":N?, "price":{...}?}, or
     * NULL if unknown.  `price` (USD per million tokens: input, cached_input,
     * cache_write_5m, cache_write_1h, output, and its source) only when a
     * price is known: the core prices each call's usage with it (cost.usd on
     * assistant/message, docs/session-log.md).
     */
    json_t *(*model_info)(void *self, const char *model);
    /**
     * Check a call config ({provider, model, max_tokens, temperature, ...},
     * borrowed) and prepare per-call state (*call, owned by the provider until
     * release_call).  May block; must honour `signal`.
     */
    int (*prepare_call)(void *self, const json_t *config, weir_signal *signal,
                        void **call, weir_error *err);
    /**
     * Run one attempt for `request` (borrowed: {model, max_tokens, ...,
     * messages:[...], tools:[...]}).  Emits chunks, ending with exactly one
     * `finish` chunk.  A failure is a finish chunk with kind "error" (or
     * "aborted" when the signal fired), not a return code: the return value
     * is WEIR_OK unless the provider itself is broken.  The request and its
     * messages are read-only and may be shared: the host never changes a
     * message object in place (a changed message is a new object), so a
     * provider may key a cache by object identity while it holds a reference
     * to the key (provider-openai does).
     */
    int (*stream)(void *self, void *call, const json_t *request,
                  weir_stream *stream);
    /** Free per-call state from prepare_call. May be NULL. */
    void (*release_call)(void *self, void *call);
    /**
     * Since ABI 1.5, optional (NULL, or a shorter struct_size: no native
     * steering).  Native steering (docs/generations.md): while `stream` runs
     * a lifecycle request, ordinary input the host sends (any mode: a
     * followup, a steer, an inject) with nothing queued before it is
     * offered here first, on the sender's thread, concurrently with
     * `stream` (which keeps running; `stream` is that call's stream handle,
     * valid until this returns).  `message` is borrowed: the normalized user
     * message {role:"user", content:[text blocks], source, id}; copy what you
     * keep (message.id names the input in stream_steering).
     * Return 0 (false) for a definite refusal with no effect: the input goes
     * where its mode says as usual (a steer or inject to the request-boundary
     * queue, a followup to the next turn).  Return 1 (true) to take it:
     * the provider owns it (not proof that the model will use it) and
     * reports with stream_steering: "accepted" when the remote side took it,
     * "applied" at the confirmed successor boundary (the core passes it
     * through agent/pre-step with native:true and logs what entered as
     * user/message there: model-visible means logged), or "refused" (its own
     * definite-refusal fallback: the core queues it after all).  Any other
     * return (an error: fill `err`) means the effect is unknown: nothing is
     * queued and the input is reported unknown (route "native").  Must not
     * block on `stream`'s progress.
     */
    int (*steer_live)(void *self, weir_stream *stream, const json_t *message, weir_error *err);
} weir_provider;

/* ------------------------------------------------------------------------ */
/* HTTP + SSE (shared by provider plugins)                                  */
/* ------------------------------------------------------------------------ */

typedef struct weir_http_request {
    uint32_t struct_size;       /* sizeof(weir_http_request) */
    const char *url;            /* borrowed */
    const char *const *headers; /* NULL-terminated "Name: value", borrowed */
    const char *body;           /* POST body, borrowed */
    size_t body_len;
    long connect_timeout_ms;    /* 0 = default 10000 */
    long idle_timeout_ms;       /* 0 = default 300000 */
    /* Since ABI 1.2: the longest the whole request may take, connect to the
     * stream's end, whatever arrives (SSE keepalive comments included);
     * then TIMEOUT.  0 = no limit (also for a struct_size without it). */
    long total_timeout_ms;
} weir_http_request;

typedef struct weir_http_response {
    long status;                /* HTTP status, 0 if none was received */
    long long retry_after_ms;   /* from Retry-After / retry-after-ms, or -1 */
    char request_id[128];       /* x-request-id / request-id, or "" */
    char *body;                 /* non-2xx body (at most 64 KiB), owned; free with weir_http_response_clear */
    size_t body_len;
} weir_http_response;

/**
 * One SSE event.  `event` may be "" (no event: line); `data` is the joined
 * data lines (NUL-terminated, borrowed for the call).  Return 0 to go on,
 * non-zero to stop the transfer (reported as WEIR_E_CANCELLED).
 */
typedef int (*weir_sse_fn)(void *user_data, const char *event,
                           const char *data, size_t data_len);

/* ------------------------------------------------------------------------ */
/* Tools                                                                     */
/* ------------------------------------------------------------------------ */

#define WEIR_TOOL_BACKGROUND 0x1u /* runs as a background job; the call returns a receipt */
/**
 * The tool honours its call's idempotency key (weir_tool_exec_idempotency_key):
 * running it again with the same key has no further effect.  A call of such a
 * tool that a crash cut (a tool/call without a tool/result when the session
 * is opened again) is run once more, with the same key, and its real result
 * is logged; any other cut call gets an INTERRUPTED error result saying it
 * may or may not have run (docs/tools.md, "Tools across a crash").
 * Since: ABI 1.2 (an older host refuses the flag at registration).
 */
#define WEIR_TOOL_IDEMPOTENT 0x2u

/**
 * The body returns at once and never blocks (a pure C function, a table
 * lookup): the thread that runs the step calls it, not a tool-pool worker,
 * which saves the two thread hand-offs a call costs (tens of microseconds
 * each on a busy machine).  Everything else is as for any call: events,
 * hooks, results, cancellation (the body gets the turn's signal).  While it
 * runs the step does nothing else, so a later call of the batch starts when
 * it returns; a body that can block (I/O, a lock, a sleep) must not set it.
 * Not with WEIR_TOOL_BACKGROUND (a job runs on the pool by definition).
 * Since: ABI 1.6 (an older host refuses the flag at registration).
 */
#define WEIR_TOOL_INLINE 0x4u

/**
 * A tool.  Strings and the schema are copied at registration.
 * execute: run the body on a worker thread (WEIR_TOOL_INLINE: on the thread
 *   that runs the step).  On success set *result to a new
 *   reference: a string, an array of content blocks, or an object
 *   {"content":[blocks], "is_error"?:bool, "concludes_turn"?:bool}.
 *   On failure call weir_tool_exec_fail() and return an error status; the
 *   model sees a structured error result.
 * concurrency_safe: 1 when this call may run beside others; anything else
 *   (or NULL) means exclusive.
 */
typedef struct weir_tool {
    uint32_t struct_size; /* sizeof(weir_tool) */
    const char *name;
    const char *description;
    const json_t *parameters; /* JSON Schema of the arguments, borrowed (copied) */
    uint32_t flags;           /* WEIR_TOOL_* */
    int (*execute)(weir_tool_exec *exec, const json_t *args, json_t **result,
                   void *user_data);
    int (*concurrency_safe)(const json_t *args, void *user_data);
    void *user_data;
} weir_tool;

/* ------------------------------------------------------------------------ */
/* The API table.  Append-only: never reorder or remove a member.           */
/* ------------------------------------------------------------------------ */

typedef enum weir_log_level {
    WEIR_LOG_ERROR = 0,
    WEIR_LOG_WARN = 1,
    WEIR_LOG_INFO = 2,
    WEIR_LOG_DEBUG = 3
} weir_log_level;

struct weir_api {
    uint32_t abi_major, abi_minor, struct_size;

    /* --- 1.0: plugin instance --- */
    /** The row id (borrowed, valid for the instance's life). */
    const char *(*plugin_id)(const weir_plugin *self);
    /** Attach/fetch the instance's private state (owned by the plugin). */
    void (*plugin_set_data)(weir_plugin *self, void *data);
    void *(*plugin_data)(const weir_plugin *self);
    /**
     * Log a line to the host's log (stderr: "weir[<row id>]: <level>: <text>").
     * Lines above $WEIR_LOG_LEVEL (error, warn, info, debug; default warn, or
     * debug when WEIR_TRACE is on) are dropped.  Any thread.
     */
    void (*log)(const weir_plugin *self, weir_log_level level, const char *fmt, ...)
        WEIR_PRINTF(3, 4);

    /* --- 1.0: hooks --- */
    /** Register `fn` on `hook` (a catalog name). Only during init. */
    int (*hook_register)(weir_plugin *self, const char *hook, weir_hook_fn fn,
                         const weir_hook_opts *opts);
    /**
     * Waterfall only: run the rest of the chain and the core default.
     * @return new reference, or NULL when a later listener failed (the
     *         failure is already recorded on `call`; return NULL to pass it on).
     *         The value may be shared (the core default often returns part
     *         of the payload, a listener may return what it keeps): never
     *         change it in place.  To change it, change a copy
     *         (json_deep_copy), release the original and return the copy.
     */
    json_t *(*next)(weir_call *call);
    /** Record why this listener failed (then return NULL). */
    void (*call_fail)(weir_call *call, const char *fmt, ...) WEIR_PRINTF(2, 3);
    /** The agent the hook runs for, or NULL for host-level hooks. Borrowed. */
    weir_agent *(*call_agent)(const weir_call *call);
    /** The cancellation signal of the current activity, or NULL. Borrowed. */
    weir_signal *(*call_signal)(const weir_call *call);

    /* --- 1.0: signals --- */
    bool (*signal_cancelled)(const weir_signal *signal);
    /** Sleep up to `ms`; WEIR_OK when it elapsed, WEIR_E_CANCELLED when the signal fired. */
    int (*signal_sleep)(weir_signal *signal, uint64_t ms);

    /* --- 1.0: agents --- */
    /** The session id (borrowed, valid for the agent's life). */
    const char *(*agent_id)(const weir_agent *agent);
    /**
     * Queue a user message ({role:"user", content:[...], source?}, borrowed).
     * `input_id` may be NULL (one is generated).
     */
    int (*agent_send)(weir_agent *agent, const json_t *message, weir_send_mode mode,
                      const char *input_id, weir_error *err);
    /**
     * New reference: the derived model-visible messages (an array).  The
     * array is the caller's; its messages are shared and read-only.  This
     * is the raw history: every reasoning `continuation` is there as it was
     * logged, not filtered for any route (a request leaves out those its
     * route may not read: agent_complete does that for a plugin's request).
     */
    json_t *(*agent_messages)(weir_agent *agent);
    /** Append a plugin event (type registered by some plugin; data borrowed). */
    int (*agent_append)(weir_agent *agent, const char *type, const json_t *data,
                        weir_error *err);
    /** Register a plugin event type (only during init). */
    int (*event_type_register)(weir_plugin *self, const char *type, uint32_t flags);

    /* --- 1.0: providers and streams --- */
    /** Register a provider under this row's id. `self_ptr` is passed back. */
    int (*provider_register)(weir_plugin *self, const weir_provider *provider,
                             void *self_ptr);
    /** Emit one chunk (steals). WEIR_E_CANCELLED once the signal fired. */
    int (*stream_emit)(weir_stream *stream, json_t *chunk);
    weir_signal *(*stream_signal)(weir_stream *stream);
    /**
     * POST and read an SSE response on the agent's reused connection.
     * Fills `resp`; on transport failure returns an error and sets
     * `*failure` (new reference, a canonical failure object).  So does a
     * 2xx response that is neither an event stream nor JSON (an HTML page,
     * gzip data): the failure says what came, with its first bytes made
     * printable, and resp->body keeps the body (docs/providers.md,
     * "Errors").  A response head over the host's cap is a failure naming
     * the limit.
     */
    int (*http_sse)(weir_stream *stream, const weir_http_request *req,
                    weir_sse_fn on_event, void *user_data,
                    weir_http_response *resp, json_t **failure);
    void (*http_response_clear)(weir_http_response *resp);
    /**
     * New reference: a canonical failure {code,message,status?,retry_after_ms?,
     * request_id?,provider} for an HTTP error response; when `resp` is the
     * calling thread's last response, also host? (the request's) and
     * rate_limit? (its rate-limit headers, normalized: docs/retry.md).
     */
    json_t *(*failure_from_http)(const char *provider, const weir_http_response *resp);
    /** New reference: a failure with the given code and message. */
    json_t *(*failure_new)(const char *provider, const char *code, const char *fmt, ...)
        WEIR_PRINTF(3, 4);

    /* --- 1.0: tools --- */
    /** Register a tool (copied). Duplicate names fail the deployment. Only during init. */
    int (*tool_register)(weir_plugin *self, const weir_tool *tool);
    const char *(*tool_exec_call_id)(const weir_tool_exec *exec);
    weir_signal *(*tool_exec_signal)(const weir_tool_exec *exec);
    void (*tool_exec_fail)(weir_tool_exec *exec, const char *code, const char *fmt, ...)
        WEIR_PRINTF(3, 4);

    /* --- 1.0: JSON Schema (the subset documented in docs/schema.md) --- */
    /** 0 when `value` matches `schema`; else -1 and a message naming the field. */
    int (*schema_validate)(const json_t *schema, const json_t *value, char *msg,
                           size_t msg_size);

    /* --- 1.0: status strings (static; see weir/errors.h) --- */
    const char *(*strerror)(int status);
    const char *(*status_name)(int status);

    /* --- 1.0: agent context (compaction) --- */
    /**
     * New reference: the agent's current surface, an array of
     * {"seq":N, "type":"...", "message":{...}|null} in surface order
     * (`message` is a copy of what the node contributes to the derived
     * history; null for a node that contributes none).  NULL on bad input or
     * out of memory.  Any thread: an emit listener (session/event,
     * job/finished, ...) may run off the driver (docs/events.md), and what
     * this reads is held while it copies.
     */
    json_t *(*agent_surface)(weir_agent *agent);
    /** How many surface replacements the agent's log has committed (0 for NULL). Any thread. */
    uint64_t (*agent_replace_generation)(weir_agent *agent);
    /**
     * Commit one surface `replace` event: `type` ("user/message" or
     * "tool/result") with `data` (borrowed, copied) replacing the current
     * surface nodes start_seq..end_seq.  `source_seqs` (borrowed) may be NULL:
     * it then lists the replaced nodes.  The session log validates the event
     * (a tool/result may only rewrite one tool/result's message.content); a
     * rejected replace fails with WEIR_E_LOG_REJECTED and changes nothing.
     * *seq_out (may be NULL) receives the new seq.  Driver thread only.
     */
    int (*agent_surface_replace)(weir_agent *agent, const char *type, const json_t *data,
                                 size_t start_seq, size_t end_seq, const json_t *source_seqs,
                                 size_t *seq_out, weir_error *err);
    /** New reference: a copy of the last log envelope of `type`; NULL when there is none
     * or memory ran out (never an older one). Any thread. */
    json_t *(*agent_last_event)(weir_agent *agent, const char *type);
    /** New reference: a copy of the log envelope `seq`, or NULL when there is none (or
     * memory ran out). Any thread. */
    json_t *(*agent_event)(weir_agent *agent, size_t seq);
    /**
     * New reference: {"context_window":N,"max_output":N,"price"?} from the model_info
     * of provider `provider` (a plugin row id) for `model`, or NULL when the
     * provider is unknown or does not know the model.  Thread-safe as the
     * provider's model_info is.
     */
    json_t *(*agent_model_info)(weir_agent *agent, const char *provider, const char *model);
    /**
     * One direct model call outside the lifecycle (summaries and other
     * maintenance): the provider named by request.provider prepares the call
     * (with the rest of the request as config) and streams `request`
     * (borrowed: {provider, model, max_tokens?, messages, tools?}; the
     * provider gets a private copy, so the caller may reuse its objects) into
     * a private collector.  The messages' reasoning continuations are
     * filtered for the route request.provider / request.model as the core
     * filters its own requests' (docs/session-log.md, "Reasoning
     * continuations"): a malformed one, one of another route, and one a
     * surface replace made stale (matched with the history by equality)
     * are left out, so a replay of the agent's last request sends what it
     * sent.  Nothing is logged, no hook runs, no live frame is
     * sent.  On success *result is a new reference
     * {"message":{role:"assistant", content:[text blocks]}, "usage"?:{...}}
     * (reasoning and tool calls are dropped).  A failed call returns
     * WEIR_E_PROVIDER with the canonical failure's code and message in `err`
     * (WEIR_E_CANCELLED when the agent's signal fired).  Driver thread only.
     */
    int (*agent_complete)(weir_agent *agent, const json_t *request, weir_signal *signal,
                          json_t **result, weir_error *err);

    /* --- 1.1 ------------------------------------------------------------ */
    /**
     * Register a listener for `agent` only (hooks per host or per agent:
     * docs/plugins.md, "Hooks per agent").  Valid only inside an `agent/created` listener, for the agent
     * being created, on its thread; elsewhere WEIR_E_TOO_LATE.  It joins the
     * deployment's chain for that agent: with opts->order WEIR_ORDER_FIRST
     * outside it (outermost), otherwise inside it (innermost, next to the
     * core default); before/after are refused (WEIR_E_INVAL).  Failures are
     * logged naming the plugin and the hook.  Check WEIR_API_HAS(api,
     * agent_hook_register) before use.
     */
    int (*agent_hook_register)(weir_plugin *self, weir_agent *agent, const char *hook,
                               weir_hook_fn fn, const weir_hook_opts *opts);

    /* --- 1.2 ------------------------------------------------------------ */
    /**
     * The call's idempotency key: "<session id>:<turn>:<step>:<call id>"
     * (the session id has no ':'; the call id, last, may).  Unique within a
     * session log (call ids are unique only within a step), logged in the
     * call's tool/call event, and the same when a crash makes the host run
     * the call again.  Borrowed, valid during `execute`; NULL only when the
     * body is run outside a session.  Any thread (the body's).  Check
     * WEIR_API_HAS(api, tool_exec_idempotency_key) before use.
     */
    const char *(*tool_exec_idempotency_key)(const weir_tool_exec *exec);
    /**
     * 1 for a call's first execution; 2 or more when the host runs a
     * WEIR_TOOL_IDEMPOTENT call again because a crash cut an earlier
     * execution (which may have run in full, in part, or not at all).
     * Any thread (the body's).  Check WEIR_API_HAS(api, tool_exec_attempt).
     */
    int (*tool_exec_attempt)(const weir_tool_exec *exec);

    /* --- 1.3 ------------------------------------------------------------ */
    /**
     * agent_complete through the agent's llm/stream chain: the chain's
     * listeners wrap the provider's stream (observe, transform, replay)
     * exactly as for a lifecycle request, and receive {agent, turn, step,
     * purpose, request}.  `request` is as for agent_complete (borrowed; the
     * listeners and the provider see a private copy); it may also carry
     * "tool_choice":"none" (the providers send it when tools are listed).
     * `context` (borrowed, may be NULL) gives "turn" and "step" (integers;
     * default: the agent's last turn, step 0) and "purpose" (a string naming
     * why the call is made, e.g. "compaction"; default "maintenance"), so a
     * listener tells these calls from the lifecycle's, whose args have no
     * purpose.  The core logs nothing and sends no live frame; agent/request
     * and agent/request-error do not run (a failure is returned, never
     * retried).  *result as for agent_complete (text blocks only: reasoning
     * and tool calls are dropped).  Errors as agent_complete, plus
     * WEIR_E_HOOK_FAILED / WEIR_E_HOOK_RESULT when a listener failed or
     * returned something else than an array of chunks (err->hook
     * "llm/stream", err->plugin the listener's row).  Driver thread only.
     * Check WEIR_API_HAS(api, agent_complete_stream) before use.
     */
    int (*agent_complete_stream)(weir_agent *agent, const json_t *request, const json_t *context,
                                 weir_signal *signal, json_t **result, weir_error *err);

    /* --- 1.4 ------------------------------------------------------------ */
    /**
     * One GET outside any model call, for a provider that asks its server
     * about itself (provider-openai's window probe: GET /v1/models, /props).
     * `req` (borrowed) as for http_sse without a body (body NULL, body_len
     * 0): url, headers ("Name: value", sent as given), connect_timeout_ms,
     * idle_timeout_ms and total_timeout_ms, which bound the call (nothing
     * cancels it; set total_timeout_ms).  It runs on a connection of its
     * own, closed before it returns (never an agent's kept connection), with
     * the client settings of http_sse (TLS verification, http and https
     * only, no redirects).  The response body is collected whatever its
     * status and type: resp->body holds its first 64 KiB, NUL-terminated
     * (release it with http_response_clear).  Returns as http_sse: WEIR_OK
     * when a response arrived, whatever its status; else an error and
     * *failure (new reference, when `failure` is not NULL).  No header value
     * appears in a failure.  Any thread.  Check WEIR_API_HAS(api, http_get)
     * before use.
     */
    int (*http_get)(const weir_http_request *req, weir_http_response *resp, json_t **failure);

    /* --- 1.5 ------------------------------------------------------------ */
    /**
     * The host's monotonic clock in milliseconds (arbitrary origin, never
     * goes back): the clock signal_sleep waits on.  Use it for budgets and
     * windows measured across calls (retry's max_elapsed_ms, its breaker's
     * window and cooldown).  Under a test's fake clock (core/base/util.c,
     * weir__clock_fake) it is virtual: it moves only when the test advances
     * it or when signal_sleep "waits", which then returns at once.  Any
     * thread.  Check WEIR_API_HAS(api, clock_ms) before use.
     */
    uint64_t (*clock_ms)(void);
    /**
     * Declare that this row needs a provider registered under row id
     * `provider` (copied), e.g. a fallback route.  Checked once every row's
     * init has run: when no row registered that provider, the deployment
     * fails with WEIR_E_PLUGIN_CONFIG "plugin '<name>' (row '<id>'): <what>:
     * no provider row '<provider>'" (`what`, copied, names the config field;
     * NULL: "provider").  Only during init (else WEIR_E_TOO_LATE); the test
     * kit accepts and does not check.  Check WEIR_API_HAS(api,
     * provider_require) before use.
     */
    int (*provider_require)(weir_plugin *self, const char *provider, const char *what);
    /**
     * Native steering (weir_provider.steer_live): report on input
     * `input_id` (borrowed) that the provider took.  `what`:
     *   "accepted"  the remote side accepted it (live steering/accepted:
     *               accepted_input_ids, not yet input_ids).  Any thread,
     *               while `stream` is valid.
     *   "applied"   the model's successor response uses it: it passes through
     *               agent/pre-step (native:true) and the core logs what
     *               entered as user/message at this point of the turn (live
     *               steering/applied: input_ids; steering/discarded when
     *               nothing entered).  Only inside `stream`, on its thread
     *               (a later request's stream is fine).
     *   "refused"   the provider's own definite refusal: the core queues it
     *               where its mode says (a followup the next turn, else the
     *               next request boundary).  As "applied", inside a stream.
     * WEIR_OK; WEIR_E_NOT_FOUND when no such input is pending (applied or
     * refused once already, or never taken); WEIR_E_STATE for applied or
     * refused outside a lifecycle stream's thread; WEIR_E_IO when the log
     * could not take the user/message.  Check WEIR_API_HAS(api,
     * stream_steering) before use.
     */
    int (*stream_steering)(weir_stream *stream, const char *input_id, const char *what,
                           weir_error *err);
    /**
     * From a tool's `execute` (its thread, or any thread while it runs):
     * report progress as the live event tool/progress {turn, step, call_id,
     * name, progress} (never logged), for a `weir run` status line or an
     * embedder.  `progress` (borrowed, copied) is an object, by convention
     * {progress, total?, message?} (MCP's notifications/progress).  WEIR_OK;
     * WEIR_E_INVAL for a NULL exec or a progress that is not an object;
     * WEIR_E_UNSUPPORTED when the call has no agent (a body run outside a
     * session's step, a background job); WEIR_E_NOMEM.  Check
     * WEIR_API_HAS(api, tool_exec_progress) before use.
     */
    int (*tool_exec_progress)(weir_tool_exec *exec, const json_t *progress);
    /**
     * Add or replace one of this row's own tools (as tool_register, copied),
     * during init or at any time after it: a tool's set may change while the
     * host runs (tools-mcp: an MCP server's list_changed).  A replaced tool
     * keeps its place in the tool list.  The change shows from the next
     * system-prompt/assemble on (the next request's tools; a request never
     * changes once built); a call already dispatched runs the definition it
     * was dispatched with.  WEIR_OK; as tool_register for a bad tool;
     * WEIR_E_DUPLICATE when another row registered that name.  During init a
     * failure fails the deployment as tool_register's; after it, it is
     * logged and returned.  Any thread.  Check WEIR_API_HAS(api, tool_update).
     */
    int (*tool_update)(weir_plugin *self, const weir_tool *tool);
    /**
     * Remove this row's tool `name` (at any time, as tool_update): from the
     * next system-prompt/assemble on, a call of it is an unknown tool.
     * WEIR_OK; WEIR_E_NOT_FOUND when the row has no such tool (another
     * row's tool is never removed).  Any thread.  Check WEIR_API_HAS(api,
     * tool_remove).
     */
    int (*tool_remove)(weir_plugin *self, const char *name);
    /**
     * From a tool's `execute`: append an event of `type` to the session log
     * as part of this call.  `type` must be an event type the tool's plugin
     * registered (event_type_register; plugin types are ignorable, so a
     * reader without the plugin skips them); `data` is an object (borrowed,
     * copied).  Nothing is written at once: the call's events are committed
     * in the order appended, just before its tools/post-execute and
     * tool/result, in model order with the other calls of the step (a
     * background job's before its job/returned, job/failed or
     * job/cancelled), whatever the body then returns.  Events of a call
     * that never commits (the process dies first) are lost with it.  At
     * most 256 per execution.  Returns WEIR_OK; WEIR_E_INVAL for NULL
     * arguments, a `data` that is not an object or a core type name;
     * WEIR_E_NOT_FOUND when the plugin did not register `type`;
     * WEIR_E_STATE past 256 events; WEIR_E_NOMEM.  `err` (may be NULL)
     * says which.  Any thread (the body's), during `execute` only.  Check
     * WEIR_API_HAS(api, tool_exec_append) before use.
     */
    int (*tool_exec_append)(weir_tool_exec *exec, const char *type, const json_t *data,
                            weir_error *err);
    /**
     * The path of the agent's session log (borrowed, valid for the agent's
     * life), e.g. for a hook's transcript_path; NULL for NULL or an agent
     * without a file.  Any thread.  Check WEIR_API_HAS(api, agent_log_path).
     */
    const char *(*agent_log_path)(const weir_agent *agent);
    /**
     * Run the chain of catalog hook `hook` for `agent`, as the core runs the
     * hooks it raises: a hook point that belongs to a plugin's own work (a
     * compaction plugin raises agent/pre-compact before compaction/start).
     * `args` (borrowed) is the payload ({agent} is filled in when missing);
     * for a waterfall `dflt` (borrowed) is the core default's result (NULL:
     * json null).  *result is a new reference (the outermost result,
     * checked against the hook's result schema; json null for emit and
     * serial).  WEIR_OK; WEIR_E_NOT_FOUND for a name outside the catalog;
     * WEIR_E_HOOK_FAILED / WEIR_E_HOOK_RESULT as for the core's own hooks
     * (err names the hook and the plugin).  The agent's driver thread only.
     * Check WEIR_API_HAS(api, hook_invoke) before use.
     */
    int (*hook_invoke)(weir_agent *agent, const char *hook, const json_t *args,
                       const json_t *dflt, json_t **result, weir_error *err);
    /**
     * Ask the embedder to approve something (hooks-shell's PreToolUse "ask"):
     * `request` (borrowed) is {kind:"tool", tool, call_id, arguments,
     * reason?}.  Blocks until the embedder's approver answers (its
     * weir_agent_set_approver callback; `weir serve --stdio` turns it into
     * an approval.requested event).  *decision is a new reference
     * {decision:"allow"|"deny", reason?}.  WEIR_E_NOT_FOUND when no approver
     * is set (nobody can answer: treat it as a deny); WEIR_E_CANCELLED when
     * the approver gave up (shutdown, cancel).  Any thread; may block.
     * Check WEIR_API_HAS(api, agent_approve) before use.
     */
    int (*agent_approve)(weir_agent *agent, const json_t *request, json_t **decision,
                         weir_error *err);
    /**
     * Register a session store (weir/store.h) under this row's id: a
     * deployment's "session": {"store": "<row id>"} keeps its logs there.
     * `store` is copied (struct_size-limited; open, read, buffer_free,
     * append, sync and close are required); `self_ptr` is passed back to
     * every call.  Only during init (else WEIR_E_TOO_LATE);
     * WEIR_E_DUPLICATE for a second store of the row; WEIR_E_INVAL for a
     * vtable without a required member.  Check WEIR_API_HAS(api,
     * store_register) before use.
     */
    int (*store_register)(weir_plugin *self, const weir_store *store, void *self_ptr);
    /**
     * Borrowed: the log envelope `seq` itself, or NULL when there is none
     * (or memory ran out).  Read it in place and never modify or release it.  The pointer stays
     * valid until the current turn ends: between turns the log may release
     * an envelope's JSON and read it back from its line when asked again
     * (the same JSON, another pointer), so json_incref it (or a part of it)
     * to keep it longer.  What agent_event returns a copy of, without the
     * copy.  Driver thread only.  Check WEIR_API_HAS(api, agent_event_peek).
     * An envelope peeked stays in memory until the turn ends, so a plugin
     * that reads every envelope of a long turn holds them all: prefer
     * agent_event_ref.
     */
    const json_t *(*agent_event_peek)(weir_agent *agent, size_t seq);
    /**
     * New reference: the log envelope `seq` itself, or NULL when there is
     * none (or out of memory).  Read it in place, never modify it, and
     * json_decref it when done; it stays valid as long as the reference is
     * held.  The log releases its own reference to an older envelope of the
     * turn when a step ends (and reads the envelope back from its line when
     * asked again: the same JSON, another pointer), so what a plugin does
     * not hold costs no memory.  Any thread.  Check WEIR_API_HAS(api,
     * agent_event_ref).
     */
    json_t *(*agent_event_ref)(weir_agent *agent, size_t seq);

    /* --- 1.8 ------------------------------------------------------------ */
    /**
     * The session id of the agent whose model call `stream` carries (the
     * lifecycle's request or a plugin's direct agent_complete call): the
     * same string as agent_id of that agent.  Borrowed, valid while the
     * provider's `stream` callback runs; NULL for a NULL stream.  A provider
     * keys per-session state with it (provider-openai's prompt_cache_key).
     * Any thread (the stream's).  Check WEIR_API_HAS(api, stream_session)
     * before use: a 1.7 host has none.
     * Since: ABI 1.8.
     */
    const char *(*stream_session)(weir_stream *stream);

    /* --- 1.12: policy roles (docs/plugins.md, "Roles") ------------------- */
    /**
     * Declare that the row `self` fills the policy role `role`: a slot of the
     * deployment that one row fills, such as "compaction" (it compacts the
     * context), "retry" (it retries failed model calls) or "system-prompt"
     * (it owns the whole system prompt).  Any name of [a-z0-9][a-z0-9._-]*,
     * at most 31 characters, is a role; a row fills at most 4.  When two rows
     * declare the same role, the deployment fails to load (WEIR_E_CONFIG,
     * naming both rows and their plugins) unless every row that fills it
     * lists the role in its config row's "share_roles".  Declare roles first
     * in init, before tools and hooks: the conflict is found at the
     * declaration.  `role` is copied.  Declaring a role the row already
     * declared does nothing.  Returns WEIR_OK, WEIR_E_CONFIG (an earlier row
     * fills the role: the message names both rows), WEIR_E_INVAL (NULL or a
     * bad name), WEIR_E_LIMIT (a fifth role), WEIR_E_NOMEM, or
     * WEIR_E_TOO_LATE after init; a failure also fails the deployment.
     * During init only (the thread that runs it).  Check WEIR_API_HAS(api,
     * plugin_role): an older host has none.
     * Since: ABI 1.12.
     */
    int (*plugin_role)(weir_plugin *self, const char *role);
    /* --- 1.12: SDK helpers (docs/sdk.md, "Helpers"; weir/sdk.h has the pure ones) --- */
    /**
     * New reference: the agent's current route in one object
     * {provider, model, context_window?, max_output?, base_url?, host?}:
     * `provider` (a provider row id) and `model` of its latest request
     * (request/context); `context_window` and `max_output` from that
     * provider's model_info (the window logged with the request when the
     * provider knows none); `base_url` from the provider row's config and
     * `host` its host name (lower case, no port), when the row has one.
     * NULL with `err` (may be NULL) filled: WEIR_E_INVAL for a NULL agent,
     * WEIR_E_NOT_FOUND before the agent's first request, WEIR_E_NOMEM.  Any
     * thread.  Check WEIR_API_HAS(api, agent_route) before use.
     * Since: ABI 1.12.
     */
    json_t *(*agent_route)(weir_agent *agent, weir_error *err);
    /**
     * This row's state for `agent`: a block of `size` bytes (zeroed) made
     * at the first call for the pair, the same pointer at every later call.
     * The host owns the block: when the agent is disposed (after its
     * agent/disposed listeners ran) or the row is unloaded (before its
     * fini), it calls `destroy` (may be NULL) with the block, which frees
     * what the block holds, never the block itself, and then frees it.
     * Lock what the block holds yourself if listeners of other threads
     * touch it; the get-or-create itself is thread-safe.  NULL for a NULL
     * argument, a zero size, a size other than the first call's, or out of
     * memory.  Any thread.  Check WEIR_API_HAS(api, agent_state).
     * Since: ABI 1.12.
     */
    void *(*agent_state)(weir_plugin *self, weir_agent *agent, size_t size,
                         void (*destroy)(void *state));
    /**
     * Write a unique id "<prefix>-<16 hex digits>" into `buf` (64 random
     * bits; a prefix of [A-Za-z0-9_.-], at most 32 characters; NULL:
     * "id").  WEIR_OK; WEIR_E_INVAL for a NULL buf, a bad prefix or a
     * `size` too small for the id (buf then holds "").  Any thread.  Check
     * WEIR_API_HAS(api, unique_id).
     * Since: ABI 1.12.
     */
    int (*unique_id)(const char *prefix, char *buf, size_t size);
    /* --- 1.12: issue #36 (namespaced event types) ------------------------ */
    /**
     * Claim event type namespace `ns` (copied; [a-z0-9_.-]+, at most 31
     * bytes): from now on the plugin may register types `ns/<name>` besides
     * those of its own namespace, its descriptor's name.  Only during init,
     * before registering the types; at most 4 claims a plugin.  The core's
     * namespaces (the prefixes of docs/events.md and docs/hooks.md: agent,
     * llm, tool, ...) are reserved (WEIR_E_DUPLICATE); a namespace two
     * plugins own (a claim, or a plugin's name) fails the deployment once
     * every row's init ran, naming both plugins and rows.  Rows of one
     * plugin may claim the same.  WEIR_E_INVAL for a bad name or too many
     * claims, WEIR_E_TOO_LATE after init.  Check WEIR_API_HAS(api,
     * event_namespace_claim): a 1.11 host has none (and no namespace rule).
     * Since: ABI 1.12.
     */
    int (*event_namespace_claim)(weir_plugin *self, const char *ns);
};

/** True when `api` has member `m` (for members added after 1.0). */
#define WEIR_API_HAS(api, m) \
    ((api)->struct_size >= offsetof(weir_api, m) + sizeof((api)->m))

/* ------------------------------------------------------------------------ */
/* Plugin-side glue                                                          */
/* ------------------------------------------------------------------------ */

/*
 * The table the weir_* call macros go through: one hidden pointer per
 * plugin file, defined by WEIR_PLUGIN_DEFINE, which sets it before the host
 * calls `init`.  Its link name says where it comes from: a plugin that uses
 * the macros without WEIR_PLUGIN_DEFINE fails to link (`-z defs`) or to
 * load with "undefined reference to `weir__plugin_api_set_by_WEIR_PLUGIN_DEFINE'".
 */
#define weir__plugin_api weir__plugin_api_set_by_WEIR_PLUGIN_DEFINE
extern WEIR_HIDDEN const weir_api *weir__plugin_api;

/**
 * The table the host passed to this plugin's `init` (NULL before the first
 * init), for code outside `init` that checks a member added after 1.0:
 * `if (WEIR_API_HAS(WEIR_PLUGIN_API, http_get)) ...`.  Only in a plugin
 * built with WEIR_PLUGIN_DEFINE.
 * Since: 0.1
 */
#define WEIR_PLUGIN_API (weir__plugin_api)

#if defined(__GNUC__) || defined(__clang__)
#define WEIR__PLUGIN_CONSTRUCTOR __attribute__((constructor))
#else
#define WEIR__PLUGIN_CONSTRUCTOR
#endif

/**
 * Define the entry point.  Use once per plugin, at file scope, after the
 * plugin's descriptor (a weir_plugin_desc, usually static const).  It
 * defines the exported weir_plugin_describe() and the hidden api pointer
 * the weir_* macros use, and it sets that pointer before `init` runs: the
 * descriptor the host gets is a copy of `desc_var`, made when the file is
 * loaded, whose `init` stores the table and then calls `desc_var.init`.
 * So the macros work from the first line of `init`, and in every callback
 * after it; WEIR_PLUGIN_INIT_API is no longer needed.
 * Since: 0.1 (before, init had to start with WEIR_PLUGIN_INIT_API(api))
 */
#define WEIR_PLUGIN_DEFINE(desc_var)                                                    \
    WEIR_HIDDEN const weir_api *weir__plugin_api = NULL;                                 \
    static weir_plugin_desc weir__plugin_wired;                                          \
    static int weir__plugin_init(weir_plugin *weir__self, const weir_api *weir__api,     \
                                 const json_t *weir__config, weir_error *weir__err) {    \
        weir__plugin_api = weir__api;                                                    \
        return (desc_var).init(weir__self, weir__api, weir__config, weir__err);          \
    }                                                                                    \
    WEIR__PLUGIN_CONSTRUCTOR static void weir__plugin_wire(void) {                       \
        weir__plugin_wired = (desc_var);                                                 \
        if ((desc_var).init)                                                             \
            weir__plugin_wired.init = weir__plugin_init;                                 \
    }                                                                                    \
    WEIR_PLUGIN_EXPORT const weir_plugin_desc *weir_plugin_describe(void);               \
    WEIR_PLUGIN_EXPORT const weir_plugin_desc *weir_plugin_describe(void) {              \
        if ((desc_var).init && weir__plugin_wired.init != weir__plugin_init)             \
            weir__plugin_wire(); /* no constructor support: wire on first use */         \
        return &weir__plugin_wired;                                                      \
    }

/** Fill in the descriptor header: the plugin needs this header's ABI
 * (WEIR_ABI_MAJOR.WEIR_ABI_MINOR), so an older host refuses it. */
#define WEIR_PLUGIN_HEADER WEIR_ABI_MAJOR, WEIR_ABI_MINOR, (uint32_t)sizeof(weir_plugin_desc), 0

/**
 * Fill in the descriptor header with the oldest ABI minor the plugin needs
 * (a constant, at most WEIR_ABI_MINOR: a larger one does not compile): any
 * host of major WEIR_ABI_MAJOR and that minor or newer loads it.  The
 * plugin then calls only the weir_api members of that minor, or checks
 * WEIR_API_HAS(api, member) before one that came later (the change log at
 * the top of this file says which minor brought what).
 */
#define WEIR_PLUGIN_HEADER_MIN(minor)                                                     \
    WEIR_ABI_MAJOR,                                                                      \
        (uint32_t)(sizeof(char[(minor) >= 0 && (minor) <= WEIR_ABI_MINOR ? 1 : -1]) *     \
                   (uint32_t)(minor)),                                                   \
        (uint32_t)sizeof(weir_plugin_desc), 0

/**
 * Store the api table for the macros.  Optional: WEIR_PLUGIN_DEFINE does it
 * before `init` runs.  Kept so that plugins written for the older headers,
 * whose `init` starts with it, build unchanged.
 */
#define WEIR_PLUGIN_INIT_API(api) (weir__plugin_api = (api))

#ifdef __cplusplus
}
#endif
#endif /* WEIR_PLUGIN_H */

/*
 * The call macros: weir_hook_register(...) means
 * WEIR_PLUGIN_API->hook_register(...), and so on for every member of
 * weir_api.  They are for the files of a plugin, which include this header
 * only.  They sit outside the include guard so that they follow
 * WEIR_NO_API_MACROS at every include: the host-side headers (weir/host.h,
 * weir/testkit.h, weir/weir.h) define WEIR_NO_API_MACROS and include this
 * file, which then removes the macros an earlier include defined.  So a
 * test or an embedder may include plugin.h, testkit.h and host.h in any
 * order, and weir_status_name(), weir_agent_id() ... are libweir's own
 * functions there; such a file calls the table explicitly
 * (api->next(call), weir_host_api()->next(call)).  Define
 * WEIR_NO_API_MACROS yourself to keep a plugin file free of them.
 * The two lists below name the same macros (test_sdk checks it).
 */
#if !defined(WEIR_NO_API_MACROS) && !defined(WEIR__API_MACROS)
#define WEIR__API_MACROS 1
#define weir_plugin_id(...) (weir__plugin_api->plugin_id(__VA_ARGS__))
#define weir_plugin_set_data(...) (weir__plugin_api->plugin_set_data(__VA_ARGS__))
#define weir_plugin_data(...) (weir__plugin_api->plugin_data(__VA_ARGS__))
#define weir_log(...) (weir__plugin_api->log(__VA_ARGS__))
#define weir_hook_register(...) (weir__plugin_api->hook_register(__VA_ARGS__))
#define weir_agent_hook_register(...) (weir__plugin_api->agent_hook_register(__VA_ARGS__))
#define weir_next(...) (weir__plugin_api->next(__VA_ARGS__))
#define weir_call_fail(...) (weir__plugin_api->call_fail(__VA_ARGS__))
#define weir_call_agent(...) (weir__plugin_api->call_agent(__VA_ARGS__))
#define weir_call_signal(...) (weir__plugin_api->call_signal(__VA_ARGS__))
#define weir_signal_cancelled(...) (weir__plugin_api->signal_cancelled(__VA_ARGS__))
#define weir_signal_sleep(...) (weir__plugin_api->signal_sleep(__VA_ARGS__))
#define weir_agent_id(...) (weir__plugin_api->agent_id(__VA_ARGS__))
#define weir_agent_send(...) (weir__plugin_api->agent_send(__VA_ARGS__))
#define weir_agent_messages(...) (weir__plugin_api->agent_messages(__VA_ARGS__))
#define weir_agent_append(...) (weir__plugin_api->agent_append(__VA_ARGS__))
#define weir_event_type_register(...) (weir__plugin_api->event_type_register(__VA_ARGS__))
#define weir_provider_register(...) (weir__plugin_api->provider_register(__VA_ARGS__))
#define weir_stream_emit(...) (weir__plugin_api->stream_emit(__VA_ARGS__))
#define weir_stream_signal(...) (weir__plugin_api->stream_signal(__VA_ARGS__))
#define weir_http_sse(...) (weir__plugin_api->http_sse(__VA_ARGS__))
#define weir_http_response_clear(...) (weir__plugin_api->http_response_clear(__VA_ARGS__))
#define weir_failure_from_http(...) (weir__plugin_api->failure_from_http(__VA_ARGS__))
#define weir_failure_new(...) (weir__plugin_api->failure_new(__VA_ARGS__))
#define weir_tool_register(...) (weir__plugin_api->tool_register(__VA_ARGS__))
#define weir_tool_exec_call_id(...) (weir__plugin_api->tool_exec_call_id(__VA_ARGS__))
#define weir_tool_exec_signal(...) (weir__plugin_api->tool_exec_signal(__VA_ARGS__))
#define weir_tool_exec_fail(...) (weir__plugin_api->tool_exec_fail(__VA_ARGS__))
#define weir_tool_exec_idempotency_key(...) \
    (weir__plugin_api->tool_exec_idempotency_key(__VA_ARGS__))
#define weir_tool_exec_attempt(...) (weir__plugin_api->tool_exec_attempt(__VA_ARGS__))
#define weir_schema_validate(...) (weir__plugin_api->schema_validate(__VA_ARGS__))
#define weir_strerror(...) (weir__plugin_api->strerror(__VA_ARGS__))
#define weir_status_name(...) (weir__plugin_api->status_name(__VA_ARGS__))
#define weir_agent_surface(...) (weir__plugin_api->agent_surface(__VA_ARGS__))
#define weir_agent_replace_generation(...) (weir__plugin_api->agent_replace_generation(__VA_ARGS__))
#define weir_agent_surface_replace(...) (weir__plugin_api->agent_surface_replace(__VA_ARGS__))
#define weir_agent_last_event(...) (weir__plugin_api->agent_last_event(__VA_ARGS__))
#define weir_agent_event(...) (weir__plugin_api->agent_event(__VA_ARGS__))
#define weir_agent_model_info(...) (weir__plugin_api->agent_model_info(__VA_ARGS__))
#define weir_agent_complete(...) (weir__plugin_api->agent_complete(__VA_ARGS__))
#define weir_agent_complete_stream(...) (weir__plugin_api->agent_complete_stream(__VA_ARGS__))
#define weir_http_get(...) (weir__plugin_api->http_get(__VA_ARGS__))
#define weir_clock_ms(...) (weir__plugin_api->clock_ms(__VA_ARGS__))
#define weir_provider_require(...) (weir__plugin_api->provider_require(__VA_ARGS__))
#define weir_tool_exec_progress(...) (weir__plugin_api->tool_exec_progress(__VA_ARGS__))
#define weir_tool_update(...) (weir__plugin_api->tool_update(__VA_ARGS__))
#define weir_tool_remove(...) (weir__plugin_api->tool_remove(__VA_ARGS__))
#define weir_stream_steering(...) (weir__plugin_api->stream_steering(__VA_ARGS__))
#define weir_tool_exec_append(...) (weir__plugin_api->tool_exec_append(__VA_ARGS__))
#define weir_agent_log_path(...) (weir__plugin_api->agent_log_path(__VA_ARGS__))
#define weir_hook_invoke(...) (weir__plugin_api->hook_invoke(__VA_ARGS__))
#define weir_agent_approve(...) (weir__plugin_api->agent_approve(__VA_ARGS__))
#define weir_store_register(...) (weir__plugin_api->store_register(__VA_ARGS__))
#define weir_agent_event_peek(...) (weir__plugin_api->agent_event_peek(__VA_ARGS__))
#define weir_agent_event_ref(...) (weir__plugin_api->agent_event_ref(__VA_ARGS__))
#define weir_stream_session(...) (weir__plugin_api->stream_session(__VA_ARGS__))
#define weir_plugin_role(...) (weir__plugin_api->plugin_role(__VA_ARGS__))
#define weir_agent_route(...) (weir__plugin_api->agent_route(__VA_ARGS__))
#define weir_agent_state(...) (weir__plugin_api->agent_state(__VA_ARGS__))
#define weir_unique_id(...) (weir__plugin_api->unique_id(__VA_ARGS__))
#define weir_event_namespace_claim(...) (weir__plugin_api->event_namespace_claim(__VA_ARGS__))
#elif defined(WEIR_NO_API_MACROS) && defined(WEIR__API_MACROS)
#undef WEIR__API_MACROS
#undef weir_plugin_id
#undef weir_plugin_set_data
#undef weir_plugin_data
#undef weir_log
#undef weir_hook_register
#undef weir_agent_hook_register
#undef weir_next
#undef weir_call_fail
#undef weir_call_agent
#undef weir_call_signal
#undef weir_signal_cancelled
#undef weir_signal_sleep
#undef weir_agent_id
#undef weir_agent_send
#undef weir_agent_messages
#undef weir_agent_append
#undef weir_event_type_register
#undef weir_provider_register
#undef weir_stream_emit
#undef weir_stream_signal
#undef weir_http_sse
#undef weir_http_response_clear
#undef weir_failure_from_http
#undef weir_failure_new
#undef weir_tool_register
#undef weir_tool_exec_call_id
#undef weir_tool_exec_signal
#undef weir_tool_exec_fail
#undef weir_tool_exec_idempotency_key
#undef weir_tool_exec_attempt
#undef weir_schema_validate
#undef weir_strerror
#undef weir_status_name
#undef weir_agent_surface
#undef weir_agent_replace_generation
#undef weir_agent_surface_replace
#undef weir_agent_last_event
#undef weir_agent_event
#undef weir_agent_model_info
#undef weir_agent_complete
#undef weir_agent_complete_stream
#undef weir_http_get
#undef weir_clock_ms
#undef weir_provider_require
#undef weir_tool_exec_progress
#undef weir_tool_update
#undef weir_tool_remove
#undef weir_stream_steering
#undef weir_tool_exec_append
#undef weir_agent_log_path
#undef weir_hook_invoke
#undef weir_agent_approve
#undef weir_store_register
#undef weir_agent_event_peek
#undef weir_agent_event_ref
#undef weir_stream_session
#undef weir_plugin_role
#undef weir_agent_route
#undef weir_agent_state
#undef weir_unique_id
#undef weir_event_namespace_claim
#endif /* the call macros */
