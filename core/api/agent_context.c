/*
 * core/agent_context.c - the `agent context` members of weir_api (see
 * core/agent_context.h): read the surface, commit a surface replacement,
 * look up logged events and model info, and make one direct model call
 * (a summarizer's) into a private collector.
 */
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "agent_context.h"
#include "assistant_stream.h"
#include "continuation.h"
#include "hooks.h"
#include "host_int.h"
#include "surface.h"

/* Any thread: the envelopes are read under the log's lock and held, so a
 * step's trim on the driver cannot release one from under the copy. */
json_t *weir__agent_surface(weir_agent *a) {
    json_t *events = a ? weir__log_surface_events(a->log) : NULL;
    json_t *out = events ? json_array() : NULL;
    size_t i;
    const json_t *ev;
    json_array_foreach(events, i, ev) {
        if (!out)
            break;
        json_t *msg = weir__derive_event_message(ev);
        json_t *node =
            json_pack("{s:I, s:s, s:o}", "seq", weir__json_int(ev, "seq", 0), "type",
                      weir__json_str(ev, "type", ""), "message", msg ? msg : json_null());
        if (json_array_append_new(out, node) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    json_decref(events);
    return out;
}

uint64_t weir__agent_replace_generation(weir_agent *a) {
    return a ? weir__log_replace_generation(a->log) : 0;
}

/* New reference: the seqs of the current nodes start_seq..end_seq (by
 * position), or [start_seq, end_seq] when they are not both current (the
 * log then names the bad one). */
static json_t *shadowed_seqs(const weir__surface *s, size_t start_seq, size_t end_seq) {
    size_t n = weir__surface_len(s), from = n, to = n;
    for (size_t i = 0; i < n; i++) {
        if (weir__surface_node(s, i) == start_seq)
            from = i;
        if (weir__surface_node(s, i) == end_seq)
            to = i;
    }
    json_t *out = json_array();
    if (from == n || to == n || from > to) {
        if (json_array_append_new(out, json_integer((json_int_t)start_seq)) != 0 ||
            (end_seq != start_seq &&
             json_array_append_new(out, json_integer((json_int_t)end_seq)) != 0)) {
            json_decref(out);
            return NULL;
        }
        return out;
    }
    for (size_t i = from; out && i <= to; i++) {
        if (json_array_append_new(out, json_integer((json_int_t)weir__surface_node(s, i))) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

int weir__agent_surface_replace(weir_agent *a, const char *type, const json_t *data,
                                size_t start_seq, size_t end_seq, const json_t *source_seqs,
                                size_t *seq_out, weir_error *err) {
    if (!a || !type || !json_is_object(data))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "agent_surface_replace: NULL argument");
    if (strcmp(type, "user/message") != 0 && strcmp(type, "tool/result") != 0)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "agent_surface_replace: type '%s' cannot replace surface nodes "
                         "(only user/message or tool/result)",
                         type);
    json_t *op = json_pack("{s:s, s:I, s:I}", "op", "replace", "start_seq", (json_int_t)start_seq,
                           "end_seq", (json_int_t)end_seq);
    json_t *src = source_seqs ? json_incref((json_t *)(uintptr_t)source_seqs)
                              : shadowed_seqs(weir__log_surface(a->log), start_seq, end_seq);
    int rc = op && src
                 ? weir__agent_log(a, type, data, op, src, seq_out, err)
                 : weir__err(err, WEIR_E_NOMEM, NULL, NULL, "agent_surface_replace: out of memory");
    json_decref(op);
    json_decref(src);
    return rc;
}

json_t *weir__agent_last_event(weir_agent *a, const char *type) {
    if (!a || !type)
        return NULL;
    for (size_t seq = weir__log_count(a->log); seq-- > 0;) {
        json_t *ev = weir__log_event_ref(a->log, seq); /* any thread: held while copied */
        if (!ev)
            return NULL; /* out of memory, not an older match */
        bool match = strcmp(weir__json_str(ev, "type", ""), type) == 0;
        json_t *copy = match ? json_deep_copy(ev) : NULL;
        json_decref(ev);
        if (match)
            return copy;
    }
    return NULL;
}

const json_t *weir__agent_event_peek(weir_agent *a, size_t seq) {
    return a ? weir__log_event_lend(a->log, seq) : NULL;
}

json_t *weir__agent_event_ref(weir_agent *a, size_t seq) {
    return a ? weir__log_event_ref(a->log, seq) : NULL;
}

json_t *weir__agent_event(weir_agent *a, size_t seq) {
    json_t *ev = weir__agent_event_ref(a, seq);
    json_t *copy = ev ? json_deep_copy(ev) : NULL;
    json_decref(ev);
    return copy;
}

json_t *weir__agent_model_info(weir_agent *a, const char *provider, const char *model) {
    if (!a || !provider || !model)
        return NULL;
    const weir__provider_entry *pe = weir__host_provider(a->host, provider);
    return pe && pe->vt.model_info ? pe->vt.model_info(pe->self, model) : NULL;
}

/* Fold collected chunks into *result (see the header): the stream's fold
 * (weir__stream_assemble, the lifecycle's), of which agent_complete keeps
 * the text blocks; or fill `err`. */
static int collect(const char *provider, const json_t *chunks, int stream_rc, json_t **result,
                   weir_error *err) {
    weir__assembled m;
    json_t *blocks = NULL;
    int rc = weir__stream_assemble(chunks, false, &m) == 0 && (blocks = json_array())
                 ? WEIR_OK
                 : WEIR_E_NOMEM;
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(m.message, "content"), i, b) {
        if (rc == WEIR_OK && strcmp(weir__json_str(b, "type", ""), "text") == 0 &&
            json_array_append_new(blocks, json_pack("{s:s, s:O}", "type", "text", "text",
                                                    json_object_get(b, "text"))) != 0)
            rc = WEIR_E_NOMEM; /* the text alone: a continuation stays with the stream */
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
static json_t *stream_args(const weir_agent *a, const json_t *context, json_t *frozen) {
    const json_t *turn = json_object_get(context, "turn"), *step = json_object_get(context, "step");
    const char *purpose = weir__json_str(context, "purpose", "maintenance");
    return json_pack("{s:s, s:I, s:I, s:s, s:O}", "agent", a->id, "turn",
                     json_is_integer(turn) ? json_integer_value(turn) : (json_int_t)a->turn,
                     "step", json_is_integer(step) ? json_integer_value(step) : (json_int_t)0,
                     "purpose", *purpose ? purpose : "maintenance", "request", frozen);
}

/*
 * The staleness (core/continuation.h, rule c) of a plugin's `messages`
 * (borrowed), which are copies of the derived history (agent_messages), not
 * its own objects as weir__continuation_stale needs: an assistant message
 * equal to the message of a surface node, matched in order, is stale when a
 * node before that one has a higher seq.  An unmatched message is not.
 * *out (weir__free it; NULL when `messages` is empty) gets one bool per
 * message.  0, or -1 when out of memory.  Any thread (the surface's
 * envelopes are read under the log's lock).
 */
static int copies_stale(weir_agent *a, const json_t *messages, bool **out) {
    *out = NULL;
    if (json_array_size(messages) == 0)
        return 0;
    json_t *events = weir__log_surface_events(a->log);
    int rc = events ? weir__continuation_stale_copies(events, messages, out) : -1;
    json_decref(events);
    return rc;
}

/*
 * New reference: `request` (borrowed) with its messages filtered as the
 * driver filters its own request's (core/continuation.h) for the route
 * request.provider / request.model: a malformed continuation, one of
 * another route and one a surface replace made stale are dropped, so a
 * request that replays the agent's last one (compaction-basic's summary)
 * sends what that one sent.  A shallow copy sharing the caller's objects;
 * NULL when out of memory.  Nothing is logged: the agent's own request
 * logged request/continuations-dropped for the same drops.
 */
static json_t *filtered_request(weir_agent *a, const json_t *request) {
    const json_t *messages = json_object_get(request, "messages");
    bool *stale = NULL;
    if (copies_stale(a, messages, &stale) != 0)
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

/* agent_complete (hooked false) and agent_complete_stream (hooked true). */
static int complete(weir_agent *a, const json_t *request, bool hooked, const json_t *context,
                    weir_signal *signal, json_t **result, weir_error *err) {
    const char *what = hooked ? "agent_complete_stream" : "agent_complete";
    if (result)
        *result = NULL;
    if (!a || !json_is_object(request) || !result || (context && !json_is_object(context)))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL, "%s: NULL argument", what);
    const char *provider = weir__json_str(request, "provider", NULL);
    if (!provider || !json_is_string(json_object_get(request, "model")) ||
        !json_is_array(json_object_get(request, "messages")))
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "%s: the request needs provider, model and messages", what);
    const weir__provider_entry *pe = weir__host_provider(a->host, provider);
    if (!pe)
        return weir__err(err, WEIR_E_NOT_FOUND, provider, NULL,
                         "%s: unknown provider '%s': no plugin row with that id "
                         "registered a provider",
                         what, provider);
    weir_signal *sig = signal ? signal : &a->signal;
    if (weir__signal_cancelled(sig))
        return weir__err(err, WEIR_E_CANCELLED, provider, NULL, "%s: cancelled", what);
    /* model-visible means logged: a deferred step-end sync is paid first */
    int paid = weir__log_pay_checkpoint(a->log, err);
    if (paid != WEIR_OK)
        return paid;
    /* The provider gets a private copy: the caller may change its objects
     * after the call, and providers may cache by object identity (the
     * host's promise in weir_provider.stream: a message never changes).
     * Its messages carry only the continuations the route may read, as
     * the lifecycle's requests do (filtered_request). */
    json_t *filtered = filtered_request(a, request);
    json_t *frozen = filtered ? json_deep_copy(filtered) : NULL;
    json_decref(filtered);
    json_t *config = frozen ? json_copy(frozen) : NULL;
    if (!config) {
        json_decref(frozen);
        return weir__err(err, WEIR_E_NOMEM, provider, NULL, "%s: out of memory", what);
    }
    json_object_del(config, "messages");
    json_object_del(config, "tools");
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
    st.agent = a;
    st.live = false; /* a private collector: no agent/assistant-stream frames */
    st.chunks = json_array();
    snprintf(st.attempt_id, sizeof st.attempt_id, "%s:complete", a->id);
    complete_ctx cc = {pe, call, &st, WEIR_E_NOMEM, false};
    json_t *chunks = NULL;
    weir_error herr;
    weir_error_clear(&herr);
    if (st.chunks && !hooked) {
        cc.stream_rc = pe->vt.stream(pe->self, call, frozen, &st);
    } else if (st.chunks) {
        json_t *args = stream_args(a, context, frozen);
        chunks = args ? weir__hook_invoke_core(a->hooks, "llm/stream", a, sig, args,
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
    if (weir__signal_cancelled(sig) || weir__signal_cancelled(&a->signal)) {
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
        rc = collect(provider, hooked ? chunks : st.chunks, cc.stream_rc, result, err);
    }
    json_decref(chunks);
    json_decref(st.chunks);
    return rc;
}

int weir__agent_complete(weir_agent *a, const json_t *request, weir_signal *signal, json_t **result,
                         weir_error *err) {
    return complete(a, request, false, NULL, signal, result, err);
}

int weir__agent_complete_stream(weir_agent *a, const json_t *request, const json_t *context,
                                weir_signal *signal, json_t **result, weir_error *err) {
    return complete(a, request, true, context, signal, result, err);
}
