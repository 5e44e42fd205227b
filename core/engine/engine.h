/*
 * core/engine/engine.h - the engine context: what one agent's lifecycle
 * reads and writes (docs/architecture.md, floor 5).  The api floor's
 * `weir_agent` holds one and hands it down; nothing on this floor or below
 * knows the agent object itself: `handle` is passed, opaque, to hook
 * listeners and plugins, never dereferenced.
 *
 * Owners: core/engine/events.c (event delivery), core/engine/input.c
 * (sends, the native-steering window, the wake latch), core/engine/
 * model_call.c (the stream handle, the direct completion path),
 * core/engine/driver.c (the turn/step lifecycle) and
 * core/engine/tool_scheduler.c (tool calls, in runtime/tools.h).
 */
#ifndef WEIR_CORE_ENGINE_H
#define WEIR_CORE_ENGINE_H

#include <pthread.h>

#include "cancel.h"
#include "common.h"
#include "hooks.h"
#include "host_int.h"
#include "http.h"
#include "inbox.h"
#include "session_log.h"
#include "tools.h"

typedef enum weir__agent_state {
    WEIR__AGENT_IDLE = 0,
    WEIR__AGENT_RUNNING = 1
} weir__agent_state;

/*
 * One agent's engine.  Fields under `mu`: state, wake, closing, the
 * native-steering window (and the signal's reset).  Everything else is
 * touched by the driver's thread only, except `inbox` and `log` (own
 * locks), the event queue (`event_mu`) and the immutable configuration.
 */
typedef struct weir__engine {
    weir_agent *handle;       /* the api floor's agent, for hook calls and plugins only */
    weir_host *host;          /* borrowed */
    const weir__hooks *hooks; /* the host's, or the agent's own chains */
    char *id;                 /* session id */
    weir__log *log;
    weir__inbox *inbox;
    weir__jobs *jobs;         /* background tool jobs (docs/generations.md) */
    json_t *options;          /* {provider?, model?, max_tokens?, temperature?} */
    int max_parallel;         /* agent.max_parallel_tool_calls, >= 1 */
    int max_jobs;             /* agent.max_background_jobs, >= 1 */
    int max_input_chars;      /* agent.max_input_chars */
    weir_event_fn on_event;
    bool stream_observed;     /* on_event or an agent/assistant-stream listener: build frames */
    bool stream_listened;     /* an agent/assistant-stream listener (chains frozen at open) */
    weir_wake_fn on_wake;     /* options.on_wake, or NULL */
    void *user_data;
    /* telemetry (docs/telemetry.md): the span builder fed each durable event
     * as it is delivered, and the host's exporter it pushes spans to; both
     * NULL when telemetry is off */
    weir_trace *trace;
    struct weir__otlp_exporter *otel;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t event_mu; /* guards `pending`, `delivering` and `durable_next` */
    json_t *pending;          /* events raised while another is being delivered */
    bool delivering;          /* some frame is delivering events */
    size_t durable_next;      /* the seq after the last durable event delivered */
    weir__agent_state state;
    bool wake;                /* wake latch: waking input since the last claim */
    bool closing;
    weir_signal signal;       /* the running turn's cancellation signal */
    /* input (docs/generations.md): `send_mu` (recursive) makes each send
     * one step: the duplicate check, the caps, a native attempt and its
     * fallback, the insert */
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
} weir__engine;

/* ---- events (core/engine/events.c) --------------------------------------- */

/*
 * Deliver a live event: the emit hook `type` with {agent, ...data} and the
 * embedder's callback with {type, time, data}.  Steals `data` (an object;
 * NULL is ignored).  Any thread.  Deliveries never overlap or nest: an event
 * raised during another's delivery is queued and delivered right after it,
 * by the thread already delivering.
 */
void weir__engine_live(weir__engine *e, const char *type, json_t *data);
/* A live event already built (`ev`, borrowed) for the embedder's callback
 * alone (no hook listener reads it), ordered as weir__engine_live's. */
void weir__engine_live_built(weir__engine *e, const char *type, const json_t *ev);
/* The log's observer (weir__log_set_observer; ud: the engine): each durable
 * event goes to session/event listeners and the embedder's callback. */
void weir__engine_on_durable(const json_t *event, void *ud);
/* The inbox's notify (weir__inbox_set_notify; ud: the engine): the live
 * agent/inbox/<kind> events. */
void weir__engine_on_inbox(const char *kind, const json_t *message, int turn, void *ud);
/*
 * Append a durable core event.  `data` is borrowed; `surface_op` and
 * `source_seqs` as weir__log_append.  *seq_out may be NULL.  Driver thread.
 */
int weir__engine_log(weir__engine *e, const char *type, const json_t *data,
                     const json_t *surface_op, const json_t *source_seqs, size_t *seq_out,
                     weir_error *err);
/*
 * True when WEIR_CHECK_REQUESTS=1 or in builds without NDEBUG: every frozen
 * request is compared, byte for byte, with a fresh derive of the log.
 */
bool weir__engine_check_requests(void);

/* ---- input (core/engine/input.c) ----------------------------------------- */

/* How a send is made: the embedder's, the core's own (no caps, never native
 * steering), or a shared store's queued input (caps, never native steering:
 * its row goes only once the input is in the log). */
typedef enum weir__send_kind {
    WEIR__SEND_USER,
    WEIR__SEND_INTERNAL,
    WEIR__SEND_STORED
} weir__send_kind;

/*
 * Every send (weir_agent_send and its relatives): normalize `message`
 * (borrowed), the duplicate check, the caps, a native steer while the
 * window is open and its fallback, the insert, the wake.  `anchor` > 0
 * anchors a steer to that running turn.  Any thread.
 */
int weir__engine_send(weir__engine *e, const json_t *message, weir_send_mode mode,
                      const char *input_id, int anchor, weir__send_kind kind, weir_error *err);
/*
 * Queue `message` (borrowed, normalized, with "id") anchored to the running
 * turn `turn` (weir__inbox_add_anchored), without caps: a tool's additional
 * context.  Driver thread.
 */
int weir__engine_add_context(weir__engine *e, const json_t *message, int turn,
                             weir_error *err);
/* Whether `message`'s text is within agent.max_input_chars. */
bool weir__engine_input_fits(const weir__engine *e, const json_t *message);
/* The characters of a message's text (code points): its text blocks, or
 * its content when that is one string (a message not yet normalized). */
size_t weir__message_text_chars(const json_t *message);
/*
 * The agent has waking work: set the wake latch, wake a thread waiting in
 * the agent, and call the embedder's on_wake (weir_agent_options).  Every
 * path that gives the agent waking work calls it (sends do), from any
 * thread, with no agent lock held.
 */
void weir__engine_wake(weir__engine *e);
/* The background jobs' done callback (weir__jobs_create; ud: the engine):
 * the live job/finished event, then the wake. */
void weir__engine_on_job_done(const char *job_id, const char *call_id, const char *tool,
                              const json_t *result, void *ud);
/* api->stream_steering (plugin.h): a provider's report on native input it owns. */
int weir__stream_steering(weir_stream *stream, const char *input_id, const char *what,
                          weir_error *err);

/* ---- model calls (core/engine/model_call.c) ------------------------------ */

/*
 * A streaming model call (one attempt).  The driver fills it for a
 * lifecycle request, weir__engine_complete for a direct one; providers
 * only see the opaque type.
 */
struct weir_stream {
    weir__engine *engine; /* borrowed */
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
/* The host's HTTP handles, for api->http_sse. */
weir__http_pool *weir__stream_http_pool(weir_stream *stream);
/* Public-table implementations (api->stream_emit, stream_signal, stream_session). */
int weir__stream_emit(weir_stream *stream, json_t *chunk);
weir_signal *weir__stream_signal(weir_stream *stream);
const char *weir__stream_session(const weir_stream *stream);

/*
 * One direct model call outside the lifecycle (api->agent_complete, or
 * agent_complete_stream with `hooked`: through the llm/stream chain with
 * `context`), into a private collector: see core/api/agent_context.h.
 */
int weir__engine_complete(weir__engine *e, const json_t *request, bool hooked,
                          const json_t *context, weir_signal *signal, json_t **result,
                          weir_error *err);

/* ---- the lifecycle (core/engine/driver.c) -------------------------------- */

/*
 * Run one turn (docs/lifecycle.md) on the calling thread: turn/start through
 * turn/end.  The agent must be RUNNING.  Returns WEIR_OK whenever the turn
 * closed (whatever its reason); an error only when the log cannot be
 * written (the agent cannot go on).
 */
int weir__driver_turn(weir__engine *e, weir_error *err);
/*
 * Tools across a crash (docs/tools.md).  *due says whether the log's open
 * last turn has tool calls a crash cut (the open step's calls without a
 * tool/result); opening then defers the crash repair to
 * weir__driver_resume, once the agent's hook chains are final.  E_NOMEM.
 */
int weir__driver_resume_due(weir__engine *e, bool *due, weir_error *err);
/*
 * Answer the cut calls through the tool scheduler (weir__tools_resume: an
 * idempotent tool's call runs again with its key, every other one gets an
 * INTERRUPTED result), then weir__log_repair closes the step and the turn.
 * Runs the bodies and the tool hooks on the calling thread and the tool
 * pool, with the agent's hooks.  An error only when the log cannot be
 * written (or memory ran out); the turn then stays open for the next open.
 */
int weir__driver_resume(weir__engine *e, weir_error *err);
/*
 * Settle the agent's finished background jobs (tools/post-execute, the
 * durable job/returned|failed|cancelled, then with `deliver` the service
 * message, steered in, and post-execute's additional contexts, next-step).
 * Called before each claim and each time weir_agent_run_until_idle looks
 * for work, and at close without `deliver`.  An error only when the log
 * cannot be written or memory ran out.
 */
int weir__driver_settle_jobs(weir__engine *e, bool deliver, weir_error *err);
/*
 * Native input the provider applied (stream_steering "applied", on the
 * driver's thread, inside the request's stream) goes through agent/pre-step
 * as queued input does: args {agent, turn, step, messages:[message],
 * native:true} (`message` borrowed).  *entered (new) is what enters the
 * history, to be logged as user/message; NULL when the waterfall rejected
 * it (*why "rejected") or failed (*why "error", `err` says why).  E_NOMEM
 * when the arguments cannot be built.
 */
int weir__driver_native_pre_step(weir__engine *e, int turn, int step, const json_t *message,
                                 json_t **entered, const char **why, weir_error *err);
/*
 * Answer the jobs a crash cut (a job/queued without its end): job/failed
 * with an INTERRUPTED result and a service message each, never a re-run.
 * weir_agent_open, after the crash repair.
 */
int weir__driver_recover_jobs(weir__engine *e, weir_error *err);

#endif
