/*
 * core/agent.h - struct weir_agent, the driver (docs/lifecycle.md) and the stream
 * handed to providers.  Owner: core/agent.c (open/close/send/cancel/state)
 * and core/driver.c (the turn/step lifecycle).
 */
#ifndef WEIR_CORE_AGENT_H
#define WEIR_CORE_AGENT_H

#include <pthread.h>

#include "common.h"
#include "hooks.h"
#include "http.h"
#include "inbox.h"
#include "session_log.h"
#include "cancel.h"
#include "tools.h"
#include "host_int.h"

typedef enum weir__agent_state {
    WEIR__AGENT_IDLE = 0,
    WEIR__AGENT_RUNNING = 1
} weir__agent_state;

/*
 * One conversation.  Fields under `mu`: state, wake, driver_busy, closing
 * (and the signal's reset).  Everything else is touched by the driver's
 * thread only, except `inbox` and `log` (own locks) and the immutable
 * configuration fields.
 */
struct weir_agent {
    weir_host *host;          /* borrowed */
    const weir__hooks *hooks; /* the host's, or `own` once the agent has listeners */
    weir__hooks *own;         /* the agent's own chains (derived), or NULL */
    bool opening;             /* inside agent/created: plugins may add own listeners */
    char *id;                 /* session id */
    weir__log *log;
    weir__inbox *inbox;
    weir__jobs *jobs;         /* background tool jobs (docs/generations.md) */
    json_t *options;          /* {provider?, model?, max_tokens?, temperature?} */
    int max_parallel;         /* agent.max_parallel_tool_calls, >= 1 */
    int max_jobs;             /* agent.max_background_jobs, >= 1 */
    weir_event_fn on_event;
    bool stream_observed;     /* on_event or an agent/assistant-stream listener: build frames */
    bool stream_listened;     /* an agent/assistant-stream listener (chains frozen at open) */
    weir_wake_fn on_wake;     /* options.on_wake, or NULL */
    void *user_data;
    int max_input_chars;      /* agent.max_input_chars */
    weir_approval_fn approver; /* weir_agent_set_approver, or NULL */
    void *approver_ud;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t event_mu; /* guards `pending`, `delivering` and `durable_next` */
    json_t *pending;          /* events raised while another is being delivered */
    bool delivering;          /* some frame is delivering events */
    size_t durable_next;      /* the seq after the last durable event delivered */
    weir__agent_state state;
    bool wake;                /* wake latch: waking input since the last claim */
    bool driver_busy;         /* a thread is inside weir_agent_run_until_idle or _compact */
    bool compacting;          /* inside weir_agent_compact: cancel and close fire `signal` */
    bool closing;
    bool created;             /* agent/created succeeded: close emits agent/disposed */
    weir_signal signal;       /* the running turn's cancellation signal */
    /* input (docs/generations.md): `send_mu` (recursive) makes
     * each send one step: the duplicate check, the caps, a native attempt
     * and its fallback, the insert */
    pthread_mutex_t send_mu;
    unsigned long ids_accepted; /* new input ids this instance took (WEIR_MAX_INPUT_IDS) */
    /* native steering, under `mu`: the window is open while a provider
     * with steer_live streams a lifecycle request */
    const weir__provider_entry *native_pe;
    weir_stream *native_stream;
    int native_busy;            /* steer_live calls in progress (the window waits) */
    json_t *native_owned;       /* input id -> message the provider owns, not yet applied */

    /* driver state (driver thread only) */
    int turn;                 /* last turn number written */
    bool resumed;             /* the log had a request/header when opened */
    bool requested;           /* this instance has made a request */
    unsigned long attempts;   /* model attempts by this instance */
    unsigned long revision;   /* assistant-stream frame revision */
};

/*
 * api->agent_hook_register (plugin.h): add `self`'s listener to the agent's
 * own chains; only while `agent/created` runs for it.  Logs failures.
 */
int weir__agent_hook_register(weir_plugin *self, weir_agent *agent, const char *hook,
                              weir_hook_fn fn, const weir_hook_opts *opts);

/*
 * Run one turn (docs/lifecycle.md) on the calling thread: turn/start through
 * turn/end.  The agent must be RUNNING.  Returns WEIR_OK whenever the turn
 * closed (whatever its reason); an error only when the log cannot be
 * written (the agent cannot go on).  Owner: core/driver.c.
 */
int weir__driver_turn(weir_agent *agent, weir_error *err);

/*
 * Tools across a crash (docs/tools.md).  *due says whether the log's open
 * last turn has tool calls a crash cut (the open step's calls without a
 * tool/result); opening then defers the crash repair to
 * weir__driver_resume, once the agent's hook chains are final.  E_NOMEM.
 * Owner: core/driver.c.
 */
int weir__driver_resume_due(weir_agent *agent, bool *due, weir_error *err);
/*
 * Answer the cut calls through the tool scheduler (weir__tools_resume: an
 * idempotent tool's call runs again with its key, every other one gets an
 * INTERRUPTED result), then weir__log_repair closes the step and the turn.
 * Runs the bodies and the tool hooks on the calling thread and the tool
 * pool, with the agent's hooks.  An error only when the log cannot be
 * written (or memory ran out); the turn then stays open for the next open.
 */
int weir__driver_resume(weir_agent *agent, weir_error *err);

/*
 * Settle the agent's finished background jobs (tools/post-execute, the
 * durable job/returned|failed|cancelled, then with `deliver` the service
 * message, steered in, and post-execute's additional contexts, next-step).
 * Called before each claim and each time weir_agent_run_until_idle looks
 * for work, and at close without `deliver`.  An error only when the log
 * cannot be written or memory ran out.  Owner: core/driver.c.
 */
int weir__driver_settle_jobs(weir_agent *agent, bool deliver, weir_error *err);
/*
 * Answer the jobs a crash cut (a job/queued without its end): job/failed
 * with an INTERRUPTED result and a service message each, never a re-run.
 * weir_agent_open, after the crash repair.  Owner: core/driver.c.
 */
int weir__driver_recover_jobs(weir_agent *agent, weir_error *err);

/*
 * Deliver a live event: the emit hook `type` with {agent, ...data} and the
 * embedder's callback with {type, time, data}.  Steals `data` (an object;
 * NULL is ignored).  Any thread.  Deliveries never overlap or nest: an event
 * raised during another's delivery is queued and delivered right after it,
 * by the thread already delivering.
 */
void weir__agent_live(weir_agent *agent, const char *type, json_t *data);

/*
 * Append a durable core event for `agent`.  `data` is borrowed;
 * `surface_op` and `source_seqs` as weir__log_append.  *seq_out may be NULL.
 * Driver thread.
 */
int weir__agent_log(weir_agent *agent, const char *type, const json_t *data,
                    const json_t *surface_op, const json_t *source_seqs,
                    size_t *seq_out, weir_error *err);

/*
 * True when WEIR_CHECK_REQUESTS=1 or in builds without NDEBUG: every frozen
 * request is compared, byte for byte, with a fresh derive of the log.
 */
bool weir__agent_check_requests(void);

/*
 * A streaming model call (one attempt).  Owner: core/driver.c, which fills
 * it; providers only see the opaque type.
 */
struct weir_stream {
    weir_agent *agent;  /* borrowed */
    int turn, step;     /* of a lifecycle request (0 for a plugin's direct call) */
    pthread_t thread;   /* the thread running the provider's stream */
    json_t *chunks;     /* collected chunks, each with "time" */
    char attempt_id[96];
    unsigned long revision;
    bool finished;      /* a finish chunk was emitted */
    bool live;          /* chunk frames go live as they arrive (false: a private collector) */
    json_t *frame_ev;   /* the last chunk frame's live event, refilled while held once (owned) */
    json_t *frame_at[5]; /* borrowed from frame_ev: data, frame, its index, its time, ev time */
};

/* Drop what `stream` holds: its chunks and its cached frame event.  NULL: no-op. */
void weir__stream_release(weir_stream *stream);

/* Emit a live agent/assistant-stream frame for `stream` (steals `frame`). */
void weir__stream_frame(weir_stream *stream, json_t *frame);

/*
 * Whether anyone can observe `stream`'s live frames: the agent has an
 * on_event callback or a listener on agent/assistant-stream (its chains are
 * frozen when it opens, so this does not change).  Callers skip building a
 * frame when false; weir__stream_frame drops it too.
 */
bool weir__stream_observed(const weir_stream *stream);

/* The host's HTTP handles and the agent's signal, for api->http_sse. */
weir__http_pool *weir__stream_http_pool(weir_stream *stream);
/* Public-table implementations. */
int weir__stream_emit(weir_stream *stream, json_t *chunk);
weir_signal *weir__stream_signal(weir_stream *stream);
int weir__agent_append(weir_agent *agent, const char *type, const json_t *data,
                       weir_error *err);
/*
 * The agent has waking work: set the wake latch, wake a thread waiting in
 * the agent, and call the embedder's on_wake (weir_agent_options).  Every
 * path that gives the agent waking work calls it (sends do), from any
 * thread, with no agent lock held.
 */
void weir__agent_wake(weir_agent *agent);
/* api->stream_steering (plugin.h): a provider's report on native input it owns. */
int weir__stream_steering(weir_stream *stream, const char *input_id, const char *what,
                          weir_error *err);

/*
 * A send the core makes itself (a background job's result): no caps, never
 * native steering.  Otherwise as weir_agent_send.  Any thread.
 */
int weir__agent_send_internal(weir_agent *agent, const json_t *message, weir_send_mode mode,
                              const char *input_id, weir_error *err);
/*
 * A shared store's queued input (weir_agent_take_store_inbox): the caps as
 * weir_agent_send, but never native steering, so the input is in the log's
 * inbox (and its splice durable) before its row goes.  Any thread.
 */
int weir__agent_send_stored(weir_agent *agent, const json_t *message, weir_send_mode mode,
                            const char *input_id, weir_error *err);
/* Whether `message`'s text is within agent.max_input_chars. */
bool weir__agent_input_fits(const weir_agent *agent, const json_t *message);
/* The characters of a message's text (code points): its text blocks, or
 * its content when that is one string (a message not yet normalized). */
size_t weir__message_text_chars(const json_t *message);
/*
 * Queue `message` (borrowed, normalized, with "id") anchored to the running
 * turn `turn` (weir__inbox_add_anchored), without caps: a tool's additional
 * context.  Driver thread.
 */
int weir__agent_add_context(weir_agent *agent, const json_t *message, int turn,
                            weir_error *err);


/* core/approval.c: api->agent_approve, agent_log_path, hook_invoke. */
int weir__agent_approve(weir_agent *agent, const json_t *request, json_t **decision,
                        weir_error *err);
const char *weir__agent_log_path(const weir_agent *agent);
int weir__agent_hook_invoke(weir_agent *agent, const char *hook, const json_t *args,
                            const json_t *dflt, json_t **result, weir_error *err);

#endif
