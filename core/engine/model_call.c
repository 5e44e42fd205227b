/*
 * core/engine/model_call.c - model calls: the weir_stream handle a
 * provider streams into (chunks collected, live agent/assistant-stream
 * frames), and the direct completion path a plugin's summarizer takes
 * (api->agent_complete, agent_complete_stream: a private collector,
 * nothing logged).  core/engine/engine.h.
 */
#include <stdio.h>
#include <string.h>

#include "assistant_stream.h"
#include "continuation.h"
#include "engine.h"

weir__http_pool *weir__stream_http_pool(weir_stream *s) {
    return s ? weir__host_http_pool(s->engine->host) : NULL;
}

weir_signal *weir__stream_signal(weir_stream *s) { return s ? &s->engine->signal : NULL; }

const char *weir__stream_session(const weir_stream *s) {
    return s && s->engine ? s->engine->id : NULL;
}

bool weir__stream_observed(const weir_stream *s) {
    return s && s->engine && s->engine->stream_observed;
}

void weir__stream_frame(weir_stream *s, json_t *frame) {
    if (!s || !frame || !weir__stream_observed(s)) {
        json_decref(frame);
        return;
    }
    json_object_set_new(frame, "attempt_id", json_string(s->attempt_id));
    json_object_set_new(frame, "revision", json_integer((json_int_t)s->revision));
    weir__engine_live(s->engine, "agent/assistant-stream", json_pack("{s:o}", "frame", frame));
}

/* Whether `j` is held by its container alone, so it may be changed in place. */
static bool held_once(const json_t *j) { return j && j->refcount == 1; }

/*
 * The live event of one chunk frame, {type, time, data: {frame: {type:
 * "chunk", index, time, chunk, attempt_id, revision}}}, as weir__stream_frame
 * builds it.  A stream has many chunks and the event is borrowed by what it
 * is delivered to, so with no hook listener (on_event only) the stream keeps
 * the one it built last and refills its index, times and chunk in place
 * while nothing else holds any part of it (a receiver that kept a reference,
 * or a delivery queued behind another, gets a new one).
 */
static void chunk_frame(weir_stream *s, json_int_t index, int64_t now, json_t *c) {
    weir__engine *eng = s->engine;
    if (eng->stream_listened) {
        weir__stream_frame(s, json_pack("{s:s, s:I, s:I, s:O}", "type", "chunk", "index", index,
                                        "time", (json_int_t)now, "chunk", c));
        return;
    }
    json_t *ev = s->frame_ev, **at = s->frame_at; /* at: data, frame, index, time, ev time */
    if (!(held_once(ev) && held_once(at[0]) && held_once(at[1]) && held_once(at[2]) &&
          held_once(at[3]) && held_once(at[4])) ||
        json_integer_set(at[2], index) != 0 || json_integer_set(at[3], (json_int_t)now) != 0 ||
        json_integer_set(at[4], (json_int_t)now) != 0 ||
        json_object_set(at[1], "chunk", c) != 0) {
        json_decref(s->frame_ev);
        ev = json_pack("{s:s, s:I, s:{s:{s:s, s:I, s:I, s:O, s:s, s:I}}}", "type",
                       "agent/assistant-stream", "time", (json_int_t)now, "data", "frame",
                       "type", "chunk", "index", index, "time", (json_int_t)now, "chunk", c,
                       "attempt_id", s->attempt_id, "revision", (json_int_t)s->revision);
        s->frame_ev = ev;
        at[0] = json_object_get(ev, "data");
        at[1] = json_object_get(at[0], "frame");
        at[2] = json_object_get(at[1], "index");
        at[3] = json_object_get(at[1], "time");
        at[4] = json_object_get(ev, "time");
        if (!ev)
            return;
    }
    weir__engine_live_built(eng, "agent/assistant-stream", ev);
}

int weir__stream_emit(weir_stream *s, json_t *chunk) {
    const char *type = json_string_value(json_object_get(chunk, "type"));
    if (!s || !json_is_object(chunk) || !type) {
        json_decref(chunk);
        return WEIR_E_INVAL;
    }
    if (weir__signal_cancelled(&s->engine->signal)) {
        json_decref(chunk);
        return WEIR_E_CANCELLED;
    }
    if (s->finished) { /* nothing follows finish */
        json_decref(chunk);
        return WEIR_E_STATE;
    }
    bool finish = strcmp(type, "finish") == 0; /* `type` goes with `chunk` if it is copied */
    /* the chunk is handed over: kept as it is when nothing else holds a part of it */
    json_t *c = chunk;
    if (!weir__json_sole(chunk)) {
        c = json_deep_copy(chunk);
        json_decref(chunk);
    }
    int64_t now = weir__now_ms();
    if (!c || json_object_set_new(c, "time", json_integer(now)) != 0 ||
        json_array_append(s->chunks, c) != 0) {
        json_decref(c);
        return WEIR_E_NOMEM;
    }
    if (finish)
        s->finished = true;
    size_t index = json_array_size(s->chunks) - 1;
    if (s->live && s->engine->stream_observed)
        chunk_frame(s, (json_int_t)index, now, c);
    json_decref(c);
    return WEIR_OK;
}

void weir__stream_release(weir_stream *s) {
    if (!s)
        return;
    json_decref(s->chunks);
    s->chunks = NULL;
    json_decref(s->frame_ev);
    s->frame_ev = NULL;
}

/* Fold collected chunks into *result (see the header): the stream's fold
 * (weir__stream_assemble, the lifecycle's), of which agent_complete keeps
 * the text blocks; or fill `err`. */
static int collect(const char *provider, const json_t *chunks, int stream_rc, bool keep,
                   json_t **result, weir_error *err) {
    weir__assembled m;
    json_t *blocks = NULL;
    int rc = weir__stream_assemble(chunks, false, &m) == 0 && (blocks = json_array())
                 ? WEIR_OK
                 : WEIR_E_NOMEM;
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(m.message, "content"), i, b) {
        if (rc != WEIR_OK || strcmp(weir__json_str(b, "type", ""), "text") != 0)
            continue;
        /* the text alone; with its continuation when the request asked for
         * a server compaction ("compaction": keep), which comes back as a
         * text block whose continuation holds what must be sent back
         * verbatim (docs/compaction.md, "Strategies") */
        const json_t *cont = keep ? json_object_get(b, "continuation") : NULL;
        json_t *tb = cont ? json_pack("{s:s, s:O, s:O}", "type", "text", "text",
                                      json_object_get(b, "text"), "continuation", cont)
                          : json_pack("{s:s, s:O}", "type", "text", "text",
                                      json_object_get(b, "text"));
        if (json_array_append_new(blocks, tb) != 0)
            rc = WEIR_E_NOMEM;
    }
    const json_t *usage = m.usage;
    const char *kind = m.finish;
    if (rc != WEIR_OK) {
        weir__err(err, rc, provider, NULL, "agent_complete: out of memory");
    } else if (!kind) {
        rc = weir__err(err, WEIR_E_PROVIDER, provider, NULL,
                       stream_rc != WEIR_OK
                           ? "UNKNOWN: provider '%s' failed without a finish chunk"
                           : "TRANSPORT: provider '%s' ended the stream without a finish chunk",
                       provider);
    } else if (strcmp(kind, "error") == 0 || strcmp(kind, "aborted") == 0) {
        const json_t *f = m.failure;
        rc = weir__err(err, WEIR_E_PROVIDER, provider, NULL, "%s: %s",
                       weir__json_str(f, "code", "UNKNOWN"),
                       weir__json_str(f, "message", "the provider finished with an error"));
    } else {
        json_t *out = json_pack("{s:{s:s, s:O}, s:s}", "message", "role", "assistant", "content",
                                blocks, "finish", kind);
        if (out && json_is_object(usage) &&
            json_object_set_new(out, "usage", json_deep_copy(usage)) != 0) {
            json_decref(out);
            out = NULL;
        }
        if (!out)
            rc = weir__err(err, WEIR_E_NOMEM, provider, NULL, "agent_complete: out of memory");
        *result = out;
    }
    json_decref(blocks);
    json_decref(m.message);
    json_decref(m.calls);
    return rc;
}

/* The default of the llm/stream chain a hooked call runs: the provider's
 * stream, once (a listener calling next() again gets the same chunks). */
typedef struct complete_ctx {
    const weir__provider_entry *pe;
    void *call;
    weir_stream *st;
    int stream_rc;
    bool ran;
} complete_ctx;

static json_t *complete_default(weir_call *call, const json_t *args, void *ud) {
    (void)call;
    complete_ctx *c = ud;
    if (!c->ran) {
        c->ran = true;
        c->stream_rc =
            c->pe->vt.stream(c->pe->self, c->call, json_object_get(args, "request"), c->st);
    }
    return json_incref(c->st->chunks);
}

/* New reference: the llm/stream args of a hooked call, or NULL (out of memory). */
static json_t *stream_args(const weir__engine *eng, const json_t *context, json_t *frozen) {
    const json_t *turn = json_object_get(context, "turn"), *step = json_object_get(context, "step");
    const char *purpose = weir__json_str(context, "purpose", "maintenance");
    return json_pack("{s:s, s:I, s:I, s:s, s:O}", "agent", eng->id, "turn",
                     json_is_integer(turn) ? json_integer_value(turn) : (json_int_t)eng->turn,
                     "step", json_is_integer(step) ? json_integer_value(step) : (json_int_t)0,
                     "purpose", *purpose ? purpose : "maintenance", "request", frozen);
}

/*
 * The staleness (core/format/continuation.h, rule c) of a plugin's `messages`
 * (borrowed), which are copies of the derived history (agent_messages), not
 * its own objects as weir__continuation_stale needs: an assistant message
 * equal to the message of a surface node, matched in order, is stale when a
 * node before that one has a higher seq.  An unmatched message is not.
 * *out (weir__free it; NULL when `messages` is empty) gets one bool per
 * message.  0, or -1 when out of memory.  Any thread (the surface's
 * envelopes are read under the log's lock).
 */
static int copies_stale(weir__engine *eng, const json_t *messages, bool **out) {
    *out = NULL;
    if (json_array_size(messages) == 0)
        return 0;
    json_t *events = weir__log_surface_events(eng->log);
    int rc = events ? weir__continuation_stale_copies(events, messages, out) : -1;
    json_decref(events);
    return rc;
}

/*
 * New reference: `request` (borrowed) with its messages filtered as the
 * driver filters its own request's (core/format/continuation.h) for the route
 * request.provider / request.model: a malformed continuation, one of
 * another route and one a surface replace made stale are dropped, so a
 * request that replays the agent's last one (compaction-basic's summary)
 * sends what that one sent.  A shallow copy sharing the caller's objects;
 * NULL when out of memory.  Nothing is logged: the agent's own request
 * logged request/continuations-dropped for the same drops.
 */
static json_t *filtered_request(weir__engine *eng, const json_t *request) {
    const json_t *messages = json_object_get(request, "messages");
    bool *stale = NULL;
    if (copies_stale(eng, messages, &stale) != 0)
        return NULL;
    json_t *msgs = weir__continuation_filter(messages, weir__json_str(request, "provider", NULL),
                                             weir__json_str(request, "model", NULL), stale,
                                             NULL);
    weir__free(stale);
    json_t *out = msgs ? json_copy((json_t *)(uintptr_t)request) : NULL;
    if (out && json_object_set_new(out, "messages", msgs) != 0) {
        json_decref(out); /* json_object_set_new took `msgs` */
        return NULL;
    }
    if (!out)
        json_decref(msgs);
    return out;
}

int weir__engine_complete(weir__engine *eng, const json_t *request, bool hooked,
                          const json_t *context, weir_signal *signal, json_t **result,
                          weir_error *err) {
    const char *what = hooked ? "agent_complete_stream" : "agent_complete";
    if (result)
        *result = NULL;
    if (!eng || !json_is_object(request) || !result || (context && !json_is_object(context)))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "%s: NULL argument", what);
    const char *provider = weir__json_str(request, "provider", NULL);
    if (!provider || !json_is_string(json_object_get(request, "model")) ||
        !json_is_array(json_object_get(request, "messages")))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "%s: the request needs provider, model and messages", what);
    const weir__provider_entry *pe = weir__host_provider(eng->host, provider);
    if (!pe)
        return weir__err(err, WEIR_E_NOT_FOUND, provider, NULL,
                         "%s: unknown provider '%s': no plugin row with that id "
                         "registered a provider",
                         what, provider);
    weir_signal *sig = signal ? signal : &eng->signal;
    if (weir__signal_cancelled(sig))
        return weir__err(err, WEIR_E_CANCELLED, provider, NULL, "%s: cancelled", what);
    /* model-visible means logged: a deferred step-end sync is paid first */
    int paid = weir__log_pay_sync(eng->log, err);
    if (paid != WEIR_OK)
        return paid;
    /* The provider gets a private copy: the caller may change its objects
     * after the call, and providers may cache by object identity (the
     * host's promise in weir_provider.stream: a message never changes).
     * Its messages carry only the continuations the route may read, as
     * the lifecycle's requests do (filtered_request). */
    json_t *filtered = filtered_request(eng, request);
    json_t *frozen = filtered ? json_deep_copy(filtered) : NULL;
    json_decref(filtered);
    json_t *config = frozen ? json_copy(frozen) : NULL;
    if (!config) {
        json_decref(frozen);
        return weir__err(err, WEIR_E_NOMEM, provider, NULL, "%s: out of memory", what);
    }
    json_object_del(config, "messages");
    json_object_del(config, "tools");
    bool keep = json_object_get(frozen, "compaction") != NULL;
    void *call = NULL;
    weir_error pe_err;
    weir_error_clear(&pe_err);
    int rc =
        pe->vt.prepare_call ? pe->vt.prepare_call(pe->self, config, sig, &call, &pe_err) : WEIR_OK;
    json_decref(config);
    if (rc != WEIR_OK) {
        json_decref(frozen);
        return weir__err(err, WEIR_E_PROVIDER, provider, NULL,
                         "UNKNOWN: provider '%s' prepare_call failed: %s", provider,
                         pe_err.text[0] ? pe_err.text : weir_strerror(rc));
    }
    weir_stream st;
    memset(&st, 0, sizeof st);
    st.engine = eng;
    st.live = false; /* a private collector: no agent/assistant-stream frames */
    st.chunks = json_array();
    snprintf(st.attempt_id, sizeof st.attempt_id, "%s:complete", eng->id);
    complete_ctx cc = {pe, call, &st, WEIR_E_NOMEM, false};
    json_t *chunks = NULL;
    weir_error herr;
    weir_error_clear(&herr);
    if (st.chunks && !hooked) {
        cc.stream_rc = pe->vt.stream(pe->self, call, frozen, &st);
    } else if (st.chunks) {
        json_t *args = stream_args(eng, context, frozen);
        chunks = args ? weir__hook_invoke_core(eng->hooks, "llm/stream", eng->handle, sig, args,
                                               complete_default, &cc, NULL, &herr)
                      : NULL;
        if (!args)
            weir__err(&herr, WEIR_E_NOMEM, NULL, "llm/stream", "out of memory");
        json_decref(args);
    }
    json_decref(frozen);
    if (pe->vt.release_call)
        pe->vt.release_call(pe->self, call);
    if (!st.chunks)
        return weir__err(err, WEIR_E_NOMEM, provider, NULL, "%s: out of memory", what);
    if (weir__signal_cancelled(sig) || weir__signal_cancelled(&eng->signal)) {
        rc = weir__err(err, WEIR_E_CANCELLED, provider, NULL, "%s: cancelled", what);
    } else if (hooked && !json_is_array(chunks)) { /* a listener failed or answered nonsense */
        int code = chunks                    ? WEIR_E_HOOK_RESULT
                   : herr.code != WEIR_OK ? (int)herr.code
                                          : WEIR_E_HOOK_FAILED;
        rc = weir__err(err, code, herr.plugin[0] ? herr.plugin : NULL, "llm/stream",
                       "%s: llm/stream: %s", what,
                       chunks ? "expected an array of chunks"
                       : herr.text[0] ? herr.text
                                      : weir_strerror(code));
    } else {
        rc = collect(provider, hooked ? chunks : st.chunks, cc.stream_rc, keep, result, err);
    }
    json_decref(chunks);
    json_decref(st.chunks);
    return rc;
}
