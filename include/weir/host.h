/*
 * weir/host.h - the embedder API.
 *
 * A weir_host is process-wide: the composed deployment config, the loaded
 * plugins, the frozen hook chains, the providers and tools.  A weir_agent is
 * one conversation: its session log, inbox and driver.  Create a host once,
 * open agents on it, and destroy agents before the host.
 *
 * Thread-safety: weir_host_* functions are not thread-safe against each
 * other; once created a host is read-only and may be shared by agents on any
 * thread.  weir_agent_send() and weir_agent_cancel() may be called from any
 * thread; the driver runs on one thread at a time.
 *
 * jansson: when libweir loads, and jansson still has its default allocators,
 * libweir gives it malloc and free through a wrapper that counts, per
 * thread, the allocations that failed.  jansson's parser does not check all
 * of its own, so weir throws away a parse during which one failed instead of
 * believing a value that may have lost bytes.  A host that sets its own
 * allocators (json_set_alloc_funcs) keeps them, and weir's parses then lose
 * that check.
 */
#ifndef WEIR_HOST_H
#define WEIR_HOST_H

/* Declares libweir's own functions: no plugin call macros (plugin.h removes
 * them if an earlier include defined them), in any include order. */
#ifndef WEIR_NO_API_MACROS
#define WEIR_NO_API_MACROS
#endif

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "weir/errors.h"
#include "weir/export.h"
#include "weir/plugin.h"
#include "weir/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weir_host weir_host;

/* ------------------------------------------------------------------------ */
/* Deployment config                                                         */
/* ------------------------------------------------------------------------ */

/** The file name that stands for the built-in default deployment in
 * weir_config_compose() (`weir run -c default -c overlay.json`). Since: 0.1 */
#define WEIR_CONFIG_DEFAULT_NAME "default"

/**
 * Compose deployment config files in order (base, then overlays), expanding
 * ${VAR} and ${VAR:-default}.  With `nfiles == 0` the built-in default
 * deployment is used (it depends on OPENAI_API_KEY / ANTHROPIC_API_KEY), and
 * so it is where a file is named WEIR_CONFIG_DEFAULT_NAME ("default"; a file
 * of that name is "./default").  `agent` and `session` always start from the
 * documented defaults (max_tokens 4096, max_parallel_tool_calls 10,
 * session.dir ${WEIR_SESSION_DIR:-~/.local/state/weir/sessions}, fsync
 * step), so an overlay alone keeps them.
 * A relative `plugin_path` directory in a file is made absolute against
 * that file's directory (a relative file path against the current
 * directory at the time of the call); docs/config.md has the rules.
 * @param files   array of `nfiles` paths, borrowed.
 * @param out     receives a new reference to the composed object.
 * @return WEIR_OK or WEIR_E_CONFIG/WEIR_E_IO/WEIR_E_NOMEM; `err->text` names
 *         the file, JSON path, and line/column where known.
 * Thread-safety: reads the environment and the current directory; do not
 * call while setenv() or chdir() runs.
 * Since: 0.1
 */
WEIR_API int weir_config_compose(const char *const *files, size_t nfiles,
                                 json_t **out, weir_error *err) WEIR_WUR;

/**
 * The built-in default deployment, before ${VAR} expansion.
 * @return a new reference, or NULL on allocation failure.
 * Since: 0.1
 */
WEIR_API json_t *weir_config_default(void);

/**
 * Hide the secrets of a composed config (what `weir config` prints): in each
 * plugin row's config, the values its plugin's config schema marks
 * `"secret": true` (docs/schema.md), and in every row `api_key` and the
 * headers Authorization, Proxy-Authorization, x-api-key and api-key (any
 * case), become the string "***".  Empty strings stay empty.  In every
 * string of the config, the userinfo of a URL becomes "***" too
 * (in "http://u:pw@h/v1", "u:pw" becomes "***").  To read a
 * schema the row's plugin is resolved along `plugin_path` and opened, never
 * initialised; a plugin that cannot be opened only gets the built-in set.
 * @param config  a composed config (borrowed, modified in place).
 * @return WEIR_OK, WEIR_E_INVAL when `config` is not an object, or
 *         WEIR_E_NOMEM (then `config` may be partly redacted).
 * Thread-safety: as dlopen; reads the plugin directories' environment.
 * Since: 0.1
 */
WEIR_API int weir_config_redact(json_t *config, weir_error *err) WEIR_WUR;

/**
 * Show the defaults a composed config leaves to its plugins (what `weir
 * config` prints): in each plugin row's config (an object; a row without
 * one gets one when a default applies), every member its plugin's config
 * schema gives a `"default"` that the config lacks is set to it: the
 * top-level `properties`, then those of the schema's `then` when the config
 * (as composed) is valid against its `if`, else those of its `else`
 * (docs/schema.md, "Defaults").  A provider-openai row without `api` so
 * shows the API it speaks.  Plugins are resolved along `plugin_path` and
 * opened, never initialised, as by weir_config_redact; a plugin that cannot
 * be opened is passed over.  The config means the same after it: a
 * default is what the plugin does without the member.  The `telemetry`
 * section gets its defaults too (docs/telemetry.md; created when absent).
 * @param config  a composed config (borrowed, modified in place).
 * @return WEIR_OK, WEIR_E_INVAL when `config` is not an object, or
 *         WEIR_E_NOMEM (then some defaults may be missing).
 * Thread-safety: as dlopen; reads the plugin directories' environment.
 * Since: 0.1
 */
WEIR_API int weir_config_defaults(json_t *config, weir_error *err) WEIR_WUR;

/* ------------------------------------------------------------------------ */
/* Host                                                                      */
/* ------------------------------------------------------------------------ */

/**
 * Load every plugin of a composed config, run their `init`, and freeze the
 * hook chains.  Any error aborts the whole deployment: nothing stays loaded.
 * @param config  composed config (borrowed; the host keeps its own reference).
 * @param out     receives the host; the caller owns it (weir_host_destroy).
 * Since: 0.1
 */
WEIR_API int weir_host_create(const json_t *config, weir_host **out,
                              weir_error *err) WEIR_WUR;

/** Run every plugin's `fini` in reverse load order and free. NULL is a no-op. Since: 0.1 */
WEIR_API void weir_host_destroy(weir_host *host);

/** The composed config (borrowed, valid for the host's life). Since: 0.1 */
WEIR_API const json_t *weir_host_config(const weir_host *host);

/**
 * Print every hook chain, in order, with plugin ids and placement.
 * Since: 0.1
 */
WEIR_API int weir_host_dump_hooks(const weir_host *host, FILE *out);

/**
 * Describe one plugin file without initialising it.
 * @param info  receives a new reference {name, version, abi, description, path}.
 * Since: 0.1
 */
WEIR_API int weir_plugin_probe(const char *path, json_t **info, weir_error *err) WEIR_WUR;

/**
 * The directories searched for plugins by name, in order: each entry of
 * $WEIR_PLUGIN_PATH (colon-separated), then the plugin directory next to
 * libweir (<libdir>/weir/plugins), then the compiled-in install directory.
 * @param dirs  receives a new reference (array of strings).
 * Since: 0.1
 */
WEIR_API int weir_plugin_dirs(json_t **dirs, weir_error *err) WEIR_WUR;

/**
 * Write the hook catalog (name, mode, payload, result) to `out`: as plain
 * text, or as the Markdown of docs/hooks.md when `markdown` is true.
 * Since: 0.1
 */
WEIR_API int weir_hook_catalog_write(FILE *out, bool markdown);

/**
 * Write the event catalog (every durable and live event of the core, with
 * its data fields) to `out`: as plain text, or as the Markdown of
 * docs/events.md when `markdown` is true.
 * @return WEIR_OK, WEIR_E_INVAL (`out` NULL) or WEIR_E_IO.
 * Since: 0.1
 */
WEIR_API int weir_event_catalog_write(FILE *out, bool markdown);

/**
 * Escape `text` for one line of a terminal or a log line: plugin, hook, tool
 * and server text shown by a host can then neither move the cursor, clear
 * the screen, set a window title nor start a line of its own.  Every
 * control character becomes visible: newline, carriage return and tab as
 * `\n` `\r` `\t`, the other C0 characters and DEL as `\xNN` (ESC is
 * `\x1b`), the C1 characters encoded as UTF-8 (U+0080-U+009F) as `\u0080`
 * ... `\u009f`, and a byte that is not part of valid UTF-8 as `\xNN`.
 * Printable ASCII (the backslash too) and valid UTF-8 are copied as they
 * are.  `weir` prints every warning, log and status line through it.
 * @param out   receives at most `size` bytes, NUL-terminated when `size` >
 *              0, cut between characters (never inside one or an escape);
 *              may be NULL when `size` is 0, to measure.
 * @param text  borrowed; NULL is "".
 * @return the length of the whole escaped text, without the NUL (as
 *         snprintf: a value >= `size` means `out` holds a cut prefix).
 * Thread-safety: any thread; allocates nothing.
 * Since: 0.1
 */
WEIR_API size_t weir_text_escape(char *out, size_t size, const char *text);

/** A destination for weir's warning lines (weir_set_warn_handler). */
typedef void (*weir_warn_fn)(const char *line, void *user_data);

/**
 * Where weir's warnings and plugin log lines (`weir[<id>]: warning: ...`)
 * go.  By default each is written to stderr as one line; with a handler,
 * `fn(line, user_data)` gets each instead, so an embedder that draws its
 * own output (the `weir` command: a streamed answer, status lines) can put
 * them at a line boundary.
 * @param fn         NULL: stderr again.  Gets `line` escaped
 *                   (weir_text_escape), without its newline, borrowed for
 *                   the call; runs on the thread that warns (any thread,
 *                   several at once) and must not call into weir.
 * @param user_data  passed to `fn`; borrowed until the handler is replaced.
 * Thread-safety: any thread; process-wide.  Once it returns, no call of the
 * handler it replaced is still running.
 * Since: 0.1
 */
WEIR_API void weir_set_warn_handler(weir_warn_fn fn, void *user_data);

/* ------------------------------------------------------------------------ */
/* Agents                                                                    */
/* ------------------------------------------------------------------------ */

/**
 * Receives every event of an agent, one at a time (never two at once), in
 * the order raised: durable events in seq order, and a live event after
 * every durable event logged before it was raised (a send inside a
 * callback: its agent/inbox/spliced, then its agent/inbox/inserted, once
 * the callback returns).  It
 * runs on the thread that raised the event or, when another thread is
 * delivering at that moment, on that one once its callback returns: the
 * lifecycle's events on the driver's thread, what weir_agent_send*() and
 * weir_agent_cancel() log (agent/inbox/...) on their caller's, what
 * weir_agent_compact() and weir_agent_close() log on theirs, a background
 * job's job/finished on the job's worker, tool/progress on the tool's.  So
 * it may run while the driver runs a step; the agent's readers
 * (weir_agent_messages, weir_agent_last_turn, ...) are safe there.
 * @param event    borrowed.  Durable: the log envelope {seq,time,type,data,...}.
 *                 Live: {type,time,data}.
 * @param durable  true for session log events.
 */
typedef void (*weir_event_fn)(const json_t *event, bool durable, void *user_data);

/**
 * The table plugins get (plugin.h), for an embedder's own listeners: in a
 * waterfall listener, `weir_host_api()->next(call)` runs the rest of the
 * chain, `->call_fail(call, ...)` fails it, `->call_agent(call)` names the
 * agent.  Static; thread-safe.  Since: 0.1
 */
WEIR_API const weir_api *weir_host_api(void);

/**
 * One listener of one agent's own (weir_agent_options.hooks).  It joins the
 * deployment's chain of `hook` for this agent only: with opts.order
 * WEIR_ORDER_FIRST outside it (outermost), otherwise inside it (innermost,
 * next to the core default); before/after are refused, and so is
 * agent/created (it has run when the agent's own chains start).  Errors
 * name it "embedder".  The listener reaches the host through
 * weir_host_api().  Events raised while agent/created runs go through the
 * deployment's chains only.
 * Since: 0.1
 */
typedef struct weir_agent_hook {
    const char *hook;           /* catalog name, e.g. "tools/pre-execute" */
    weir_hook_fn fn;
    const weir_hook_opts *opts; /* order and user_data (copied); NULL = defaults */
} weir_agent_hook;

/**
 * The agent has waking work: input that wakes it (a followup, a steer, a
 * background job's result) was queued, maybe on another thread (a job's
 * worker), maybe while no thread runs the driver.  An embedder that runs
 * weir_agent_run_until_idle() only when it has work (as `weir serve`
 * does) calls it again soon.  Called on the thread that queued the input,
 * after the input is durable, with no weir lock held; it must not block.
 * It may run inside an event callback and concurrently with the driver.
 * Since: 0.1
 */
typedef void (*weir_wake_fn)(void *user_data);

typedef struct weir_agent_options {
    uint32_t struct_size;     /* sizeof(weir_agent_options) */
    const char *session_id;   /* NULL: generate one; existing log: resume */
    const char *session_file; /* explicit log path, overrides dir + id; NULL */
    weir_event_fn on_event;   /* may be NULL */
    void *user_data;          /* for on_event and on_wake */
    const weir_agent_hook *hooks; /* this agent's own listeners (copied), or NULL */
    size_t nhooks;
    weir_wake_fn on_wake;     /* may be NULL (a struct_size without it: NULL) */
    /* The session header (ABI 1.11): when the open creates the session (its
     * log has no event yet), its first event is the ignorable
     * `session/start` with a copy of this object as its data (docs/
     * session-log.md, "The session header"); `weir run` records the
     * deployment and the working directory in it.  Borrowed for the call;
     * NULL (or a struct_size without it): no header.  Not an object:
     * WEIR_E_INVAL.  Never put secrets in it. */
    const json_t *session_header;
} weir_agent_options;

#define WEIR_AGENT_OPTIONS_INIT \
    {sizeof(weir_agent_options), NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL}

/** Input ids an open agent accepts (new ones; resubmissions are acknowledged). Since: 0.1 */
#define WEIR_MAX_INPUT_IDS 2000
/** Inputs queued at once (both inbox lists and native steering not yet applied). Since: 0.1 */
#define WEIR_MAX_QUEUED_INPUTS 128
/** Default of agent.max_input_chars: characters of text in one input. Since: 0.1 */
#define WEIR_MAX_INPUT_CHARS 16000

/**
 * Whether `id` is a session id: [A-Za-z0-9][A-Za-z0-9._-]{0,127} (so it is
 * never a path and never "." or "..").  NULL is not.  Thread-safe.
 * Since: 0.1
 */
WEIR_API bool weir_session_id_valid(const char *id);

/**
 * Open (or resume) a session as an agent.  Resuming a log whose last turn is
 * open appends its closers (turn/end {kind:"interrupted"}).  The agent is the
 * session's only writer until it is closed: opening a session that another
 * agent, in this process or another, has open fails at once with
 * WEIR_E_BUSY ("session ID is open for writing by pid N").  A
 * `session_id` must pass weir_session_id_valid() (else WEIR_E_INVAL).
 * @param out  receives the agent; close with weir_agent_close().
 * Since: 0.1
 */
WEIR_API int weir_agent_open(weir_host *host, const weir_agent_options *opts,
                             weir_agent **out, weir_error *err) WEIR_WUR;

/** Cancel, wait for the driver, and free. NULL is a no-op. Since: 0.1 */
WEIR_API void weir_agent_close(weir_agent *agent);

/**
 * Answers a plugin's approval request (api->agent_approve; hooks-shell's
 * PreToolUse "ask").  `request` is borrowed: {kind:"tool", tool, call_id,
 * arguments, reason?}.  Set *decision to a new reference
 * {decision:"allow"|"deny", reason?} and return WEIR_OK, or return an error
 * (WEIR_E_CANCELLED: nobody answered; the plugin then denies).  Called on
 * the thread that asks (the agent's driver, or a tool worker) and may block
 * until the answer comes; it must not call back into the agent's driver.
 * Since: 0.1
 */
typedef int (*weir_approval_fn)(weir_agent *agent, const json_t *request, json_t **decision,
                                void *user_data);

/**
 * Set (or, with NULL, clear) the agent's approver.  Without one every
 * approval request fails with WEIR_E_NOT_FOUND ("no one can approve").  Set
 * it before the agent runs; any thread, but not while a request may be
 * asking.  Since: 0.1
 */
WEIR_API void weir_agent_set_approver(weir_agent *agent, weir_approval_fn fn, void *user_data);

/** The session id (borrowed). Since: 0.1 */
WEIR_API const char *weir_agent_id(const weir_agent *agent);

/**
 * Queue a user message.  `message` is borrowed: {role:"user",
 * content:[blocks] | "text", source?}.  `input_id` may be NULL.  Sending the
 * same id with the same content again is acknowledged (a live
 * agent/inbox/acknowledged event, nothing queued); with different content
 * it fails with WEIR_E_DUPLICATE.
 *
 * A steer sent while a provider with `steer_live` streams the running
 * turn's request, with nothing queued before it, is offered to the provider
 * first (native steering, docs/generations.md): a refusal queues it as
 * usual; when the provider takes it, or its answer is an error (the effect
 * is unknown; nothing is queued), the outcome is a live steering/owned or
 * steering/unknown event.
 *
 * Caps (WEIR_E_LIMIT, nothing queued): WEIR_MAX_INPUT_IDS new ids per open
 * agent (reopen the session to go on), WEIR_MAX_QUEUED_INPUTS queued at
 * once, and agent.max_input_chars (default WEIR_MAX_INPUT_CHARS)
 * characters of text.  After the generation tracker's shutdown a new input
 * fails with WEIR_E_STATE.  Any thread.
 * Since: 0.1
 */
WEIR_API int weir_agent_send(weir_agent *agent, const json_t *message,
                             weir_send_mode mode, const char *input_id,
                             weir_error *err);

/**
 * Anchored steering: queue a steer for the running turn `turn` only.  It is
 * delivered at that turn's next request boundary, ahead of input a queued
 * followup holds back, and never falls forward: when the turn ends before
 * taking it (a cancel with keep_inbox, an error), it is removed durably
 * (agent/inbox/held).  A turn that is not running, or that already made
 * its final check (the stop fence after agent/turn-stopping), refuses it
 * with WEIR_E_STATE.  Dedupe and caps as weir_agent_send.  Any thread.
 * Since: 0.1
 */
WEIR_API int weir_agent_steer_turn(weir_agent *agent, const json_t *message, int turn,
                                   const char *input_id, weir_error *err);

/** Convenience: send a plain text user message. Since: 0.1 */
WEIR_API int weir_agent_send_text(weir_agent *agent, const char *text,
                                  weir_send_mode mode, weir_error *err);

/**
 * Cancel the running turn.  `cause` is "user", "parent", "hook:<reason>" or
 * "disposed"; the first cause wins.  Unless `keep_inbox`, queued input is
 * discarded.  Idle cancel is a no-op.  Any thread.
 * Since: 0.1
 */
WEIR_API int weir_agent_cancel(weir_agent *agent, const char *cause, bool keep_inbox);

/**
 * Run the driver on the calling thread until the agent is idle (no queued
 * waking input).  Returns WEIR_OK even when a turn ended in error, was
 * cancelled or was blocked: how it ended is weir_agent_last_turn()'s (and
 * the turn/end event's); non-OK only when the agent itself cannot go on
 * (I/O failure).
 * Since: 0.1
 */
WEIR_API int weir_agent_run_until_idle(weir_agent *agent, weir_error *err);

/**
 * How a turn ended (weir_agent_last_turn).  The caller owns the struct
 * (usually on its stack) and sets struct_size; once filled it owns `text`
 * and `reason` too: weir_turn_outcome_clear() releases them.  Fields are
 * only ever appended.
 * Since: 0.1
 */
typedef struct weir_turn_outcome {
    uint32_t struct_size;       /* sizeof(weir_turn_outcome), set by the caller */
    int turn;                   /* the turn's number; 0: no turn has ended yet */
    char kind[32];              /* turn/end reason.kind: "completed", "max-tokens", "error",
                                   "aborted", "blocked", "interrupted"; "" when turn is 0 */
    char failure_code[64];      /* kind "error": the canonical failure code ("RATE_LIMIT",
                                   "TRANSPORT", "IO", ..., docs/providers.md); else "" */
    char failure_message[1024]; /* kind "error": the failure's message (cut to fit); else "" */
    char *text;                 /* owned (malloc): the text blocks of the turn's last
                                   assistant message, joined; "" when it had none; NULL
                                   when turn is 0 */
    json_t *reason;             /* owned (a reference): the turn/end reason as logged
                                   {kind, error?, cause?, ...}; NULL when turn is 0 */
} weir_turn_outcome;

#define WEIR_TURN_OUTCOME_INIT {sizeof(weir_turn_outcome), 0, "", "", "", NULL, NULL}

/**
 * The outcome of the agent's last ended turn, read from its session log:
 * the last turn/end (a turn of an earlier run of a resumed session counts)
 * and that turn's last assistant/message.  While a turn runs, it describes
 * the turn before.
 * @param out  an initialised outcome (WEIR_TURN_OUTCOME_INIT, or one an
 *             earlier call filled: what it held is released first).
 * @return WEIR_OK (out->turn is 0 when no turn has ended), WEIR_E_INVAL (a
 *         NULL argument, struct_size too small) or WEIR_E_NOMEM (then *out
 *         is as after weir_turn_outcome_clear()).
 * Thread-safety: any thread, also inside on_event.
 * Since: 0.1
 */
WEIR_API int weir_agent_last_turn(weir_agent *agent, weir_turn_outcome *out,
                                  weir_error *err) WEIR_WUR;

/** Release what `out` owns and reset it to WEIR_TURN_OUTCOME_INIT. NULL is a no-op. Since: 0.1 */
WEIR_API void weir_turn_outcome_clear(weir_turn_outcome *out);

/** New reference: the derived model-visible messages. Since: 0.1 */
WEIR_API json_t *weir_agent_messages(weir_agent *agent);

/**
 * Compact the agent's context now (`weir compact`; docs/compaction.md): run the
 * agent/compact hook chain on the calling thread, between turns (it waits
 * for a thread inside weir_agent_run_until_idle to return, and no turn
 * starts meanwhile; so never call it from an event callback or a listener
 * of this agent during a turn: that deadlocks).  weir_agent_cancel() and
 * weir_agent_close() cancel it (the plugin sees its call's signal fire).  A compaction plugin (compaction-basic) logs what it
 * does as its own events; without one the result is {kind:"declined"}.
 * @param instructions  extra summary instructions (borrowed), or NULL.
 * @param result        receives a new reference {kind:"compacted"|
 *                      "declined"|"failed", message?, ...plugin fields}.
 * @return WEIR_OK with *result (a "failed" kind included), WEIR_E_INVAL on
 *         bad arguments (instructions not UTF-8), WEIR_E_STATE when the agent is closing or its last
 *         turn is open, or the hook's error (a listener failed or returned
 *         an invalid result; *result NULL).
 * Since: 0.1
 */
WEIR_API int weir_agent_compact(weir_agent *agent, const char *instructions, json_t **result,
                                weir_error *err);

/**
 * Ids of the agent's background tool jobs whose result has not been
 * delivered yet: queued, running, or finished and waiting for the driver to
 * settle it (docs/tools.md, "Background tools").
 * @return a new reference (array of strings), or NULL on bad input or
 *         allocation failure.  Any thread.
 * Since: 0.1
 */
WEIR_API json_t *weir_agent_active_jobs(weir_agent *agent);

/**
 * Cancel one background job: fire its signal (cause "user").  A job still
 * queued never runs; a running body sees its signal
 * (weir_tool_exec_signal) and should stop; a body that cannot watch it (a
 * tools-ffi function) runs to its end.  Either way, once the body has
 * returned, the driver logs job/cancelled {effects:"not_rolled_back"}
 * (whatever the body did stays done), delivers a service message saying
 * so, and never a job/returned: the body's result is dropped.  While the
 * agent is idle this wakes it (on_wake), as a job's result does.
 * @param job_id  borrowed; an id of weir_agent_active_jobs().
 * @return WEIR_OK when the cancel was requested; WEIR_E_NOT_FOUND when no
 *         job of that id is queued or running (unknown, already cancelled
 *         and finished, or finished and its result on its way: `err` says
 *         which); WEIR_E_INVAL for NULL arguments.
 * Thread-safety: any thread.
 * Since: 0.1
 */
WEIR_API int weir_agent_cancel_job(weir_agent *agent, const char *job_id, weir_error *err);

/** Path of the agent's log file (borrowed). Since: 0.1 */
WEIR_API const char *weir_agent_log_path(const weir_agent *agent);

/* ------------------------------------------------------------------------ */
/* Session logs, offline                                                     */
/* ------------------------------------------------------------------------ */

/**
 * Check a log file's invariants: seq contiguous, steps nest in turns, every
 * tool/call has a tool/result (an open last turn is reported, not an error),
 * and every request/header equals the fold for derive == request.  It is
 * the reader every open applies (docs/session-log.md), collecting every
 * error: a log it reports ok opens, resumes and derives.  Takes no lock.
 * Only regular files are read (else WEIR_E_IO); a missing file is
 * WEIR_E_NOT_FOUND.
 * @param report  receives a new reference {ok, events, errors:[...],
 *                open:[...], error_line} (error_line: the line of the first
 *                error, 0 when ok).
 * Since: 0.1
 */
WEIR_API int weir_log_check(const char *path, json_t **report, weir_error *err) WEIR_WUR;

/**
 * Derive the model-visible messages of a log file.
 * @param messages  receives a new reference (an array).
 * Since: 0.1
 */
WEIR_API int weir_log_derive(const char *path, json_t **messages, weir_error *err) WEIR_WUR;

/**
 * The events of a log file, read by the one reader as weir_log_derive()
 * reads it (`weir log --json`, `weir sessions`): a log it refuses is an
 * error (WEIR_E_LOG_CORRUPT naming the line; a missing file is
 * WEIR_E_NOT_FOUND, another file type WEIR_E_IO), and a torn last line is
 * left out.  Takes no lock: a live log gives its consistent prefix.
 * @param events  receives a new reference: an array of the log envelopes
 *                ({seq, time, type, data, surface_op?, ...}), in seq order,
 *                owned by the caller alone.
 * Thread-safe.
 * Since: 0.1
 */
WEIR_API int weir_log_events(const char *path, json_t **events, weir_error *err) WEIR_WUR;

/**
 * Called by weir_log_each() with each envelope of the log, in seq order.
 * @param ev         borrowed: valid for the call only (json_incref() it to
 *                   keep it); the callback may read it, not change it.
 * @param user_data  weir_log_each()'s `user_data`.
 * @return true to go on, false to stop (weir_log_each() then returns
 *         WEIR_OK).
 */
typedef bool (*weir_log_event_fn)(json_t *ev, void *user_data);

/**
 * The events of a log file, as weir_log_events() gives them, handed one at
 * a time in bounded memory (`weir log --json`, the transcript, `--why`):
 * the one reader checks the log first, streamed as weir_log_check() reads
 * it, and only when it accepts it reads the file a second time as a stream
 * and hands each envelope to `fn`.  It holds the longest line and what the
 * check folds (the surface), never the file.  A log it refuses is an error
 * before any call of `fn` (WEIR_E_LOG_CORRUPT naming the line; a missing
 * file is WEIR_E_NOT_FOUND, another file type WEIR_E_IO), and a torn last
 * line is left out.  Takes no lock: a live log gives the prefix the check
 * read (events appended after it are not handed).
 * @param path       borrowed.
 * @param fn         required; called on the calling thread, never after
 *                   this returns.
 * @param user_data  passed to `fn` as it is.
 * @return WEIR_OK when every envelope was handed or `fn` stopped;
 *         WEIR_E_INVAL without path or fn; WEIR_E_NOMEM; WEIR_E_IO on a
 *         read error (or when the file no longer holds what the check
 *         read).
 * Thread-safe.
 * Since: ABI 1.10
 */
WEIR_API int weir_log_each(const char *path, weir_log_event_fn fn, void *user_data,
                           weir_error *err) WEIR_WUR;

/**
 * What `weir sessions` shows of a log file, read from its head and its
 * tail (docs/session-log.md, "Checkpoints"): the first prompt from the
 * first events, the rest from the last `log/checkpoint` on, so the cost is
 * the log written since that checkpoint, not the log.  A log without
 * checkpoints is folded from its start, a line at a time.  The lines read
 * must be envelopes in seq order (else WEIR_E_LOG_CORRUPT naming the byte
 * offset or the seq); the lines between head and tail are not read (`weir
 * log --check` reads them).  A torn last line is left out.  Takes no lock.
 * @param summary  receives a new reference {events, turns, open, last_time?
 *                 (absent for a log of no events),
 *                 first_prompt? (at most 1 KiB), header? (the data of
 *                 the session/start event at seq 0, ABI 1.11), usage?: {input_tokens,
 *                 cache_read_tokens, cache_write_tokens, output_tokens},
 *                 cost?: {usd} (only when every call with usage was priced),
 *                 checkpoint: the byte offset of the checkpoint it started
 *                 from, or null}.
 * Thread-safe.
 * Since: ABI 1.9
 */
WEIR_API int weir_log_summary(const char *path, json_t **summary, weir_error *err) WEIR_WUR;

/**
 * Repair a log file that an older weir wrote and the reader now refuses
 * (`weir log --repair`; docs/session-log.md, "Repair"): a reply that
 * repeated a tool-call id gets the ids a writer now gives (the repeat
 * "<id>_<n>"), and the step's tool/call, tool/result and other events of
 * those calls follow them in order.  Takes the writer's lock (WEIR_E_BUSY
 * while a writer holds it).  When something changes, the repaired text is
 * checked by the one reader, written to a new file, synced and renamed over
 * the log; the original is kept as "<path>.orig" (WEIR_E_IO when that name
 * exists).  A log with nothing to repair is left untouched.
 * @param report  receives a new reference {lines (how many were rewritten),
 *                renamed: [{seq, turn, step, was, id}], backup?}.
 * Thread-safe.
 * Since: 0.1
 */
WEIR_API int weir_log_repair(const char *path, json_t **report, weir_error *err) WEIR_WUR;

/**
 * weir_log_check(), weir_log_derive() and weir_log_events() for session `id`
 * of the store the host's session.store names (a plugin row's store, or
 * "memory"): the same reader, the same results.  The session is opened
 * read-only (no lock, no lease).  A session of the file store is
 * WEIR_E_INVAL (read its file with the calls above); no such session is
 * WEIR_E_NOT_FOUND.  `host` and `id` are borrowed.
 * Since: 0.1
 */
WEIR_API int weir_host_log_check(const weir_host *host, const char *id, json_t **report,
                                 weir_error *err) WEIR_WUR;
WEIR_API int weir_host_log_derive(const weir_host *host, const char *id, json_t **messages,
                                  weir_error *err) WEIR_WUR;
WEIR_API int weir_host_log_events(const weir_host *host, const char *id, json_t **events,
                                  weir_error *err) WEIR_WUR;
/**
 * The sessions of the store the host's session.store names (`weir
 * sessions`): *sessions is a new array of {"id", "live", "owner"?, "pid"?}
 * in no particular order.  The file store is WEIR_E_INVAL (list its
 * directory); a store that cannot list is WEIR_E_UNSUPPORTED.
 * Since: 0.1
 */
WEIR_API int weir_host_sessions(const weir_host *host, json_t **sessions,
                                weir_error *err) WEIR_WUR;

/**
 * Whether a writer (an open agent, in this process or another) holds the
 * session log at `path`: it probes the writer's lock without taking it.
 * @param live  receives true when a writer holds it.
 * @param pid   receives the writer's pid when known, else 0; may be NULL.
 * @return WEIR_OK, WEIR_E_NOT_FOUND (no such file) or WEIR_E_IO.
 * Thread-safe.
 * Since: 0.1
 */
WEIR_API int weir_log_writer(const char *path, bool *live, long *pid, weir_error *err) WEIR_WUR;


/* ---- OpenTelemetry traces (docs/telemetry.md) ------------------------------ */

/** The span builder of one session: log envelopes in, OTLP/JSON spans out. */
typedef struct weir_trace weir_trace;

/**
 * A span builder for session `session_id` (docs/telemetry.md, "Spans"):
 * the OpenTelemetry GenAI spans (`invoke_agent` per turn, `chat` per model
 * attempt, `execute_tool` per tool call) as a pure function of the
 * session's envelopes.  The live exporter and `weir log ID --otlp` use it,
 * so both give the same spans (the same ids, times and attributes).
 * @param session_id  borrowed, copied; gen_ai.conversation.id and the seed
 *                    of every id.
 * @param config      borrowed, read during the call only; the composed
 *                    deployment (may be NULL): telemetry.capture_content,
 *                    telemetry.service_name (else $OTEL_SERVICE_NAME, else
 *                    "weir") and the plugin rows (gen_ai.provider.name).
 * @param out         receives the builder; free with weir_trace_destroy().
 * @return WEIR_OK, WEIR_E_INVAL, WEIR_E_NOMEM.
 * Thread-safe (a builder is one caller's at a time).
 * Since: ABI 1.11 (issue #38)
 */
WEIR_API int weir_trace_create(const char *session_id, const json_t *config, weir_trace **out,
                               weir_error *err) WEIR_WUR;

/**
 * Feed the next envelope of the session (seq order).
 * @param event  borrowed, read only.
 * @param spans  receives a new reference: the array of the OTLP/JSON spans
 *               this event ended (often empty), owned by the caller.
 * @return WEIR_OK, WEIR_E_INVAL, WEIR_E_NOMEM.
 * Since: ABI 1.11 (issue #38)
 */
WEIR_API int weir_trace_add(weir_trace *t, const json_t *event, json_t **spans,
                            weir_error *err) WEIR_WUR;

/**
 * End the builder's input: the `invoke_agent` span of a turn the log leaves
 * open, ended at the last event's time with `weir.turn.open` true.
 * @param spans  receives a new reference (an array, maybe empty).
 * Since: ABI 1.11 (issue #38)
 */
WEIR_API int weir_trace_finish(weir_trace *t, json_t **spans, weir_error *err) WEIR_WUR;

/**
 * An ExportTraceServiceRequest (OTLP/JSON) of `spans` (borrowed, copied)
 * with the builder's resource (service.name).
 * @return a new reference, or NULL on a NULL argument or out of memory.
 * Since: ABI 1.11 (issue #38)
 */
WEIR_API json_t *weir_trace_request(const weir_trace *t, const json_t *spans);

/** Free a builder; NULL does nothing.  Since: ABI 1.11 (issue #38) */
WEIR_API void weir_trace_destroy(weir_trace *t);

/**
 * The live exporter's counts (docs/telemetry.md, "Drops"): spans queued,
 * sent (a collector answered 2xx), dropped (the queue was full, or the
 * export failed).  All 0 when the deployment's telemetry is off.
 * Thread-safe.
 * Since: ABI 1.11 (issue #38)
 */
WEIR_API void weir_host_telemetry_counts(weir_host *host, uint64_t *queued, uint64_t *sent,
                                         uint64_t *dropped);

#ifdef __cplusplus
}
#endif
#endif /* WEIR_HOST_H */
