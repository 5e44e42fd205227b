/*
 * plugins/provider-scripted - a model provider that plays a scripted
 * conversation: one reply per request, in order.
 *
 * Config: {"script": "FILE" | "builtin:demo"} or {"replies": [...]}, plus
 * (builtin:demo makes each reply from the request: see demo.c)
 * "loop" (start over when the replies run out) and "models"
 * ({name: {context_window, max_output}}).  A script file is
 * {"replies": [...], "loop"?: bool}.  A reply:
 *   {"text", "reasoning", "tool_calls": [{"id","name","arguments"}],
 *    "usage": {...}, "finish": "stop|tool-calls|max-tokens",
 *    "chunk_delay_ms": N, "chunks": N, "continuation": C,
 *    "fail": {"code","message","retry_after_ms","after_chunks"},
 *    "expect": {"message_contains","last_role","tools_count","messages_count"}}
 * "continuation" (on a reply: its reasoning block's; on a tool call: that
 * block's) makes the stream emit a `continuation` chunk for the block
 * before its block-end (plugin.h): an object with a "data" member is the
 * chunk's continuation as it is (any shape, malformed ones too), anything
 * else is the data of {"provider": the row id, "model": the request's
 * model, "data": C}.
 * An unmet `expect` fails the attempt with INVALID_REQUEST saying what was
 * expected; running out of replies fails with UNKNOWN "script exhausted".
 *
 * "purpose" (a string, on a reply) matches replies by the call's purpose:
 * "step" for the agent's own requests, llm/stream's `purpose` for a
 * plugin's direct call (compaction-basic's summary: "compaction"),
 * "maintenance" for a direct call outside the chain.  A request takes the
 * first unused reply of its purpose, else the first unused reply without
 * one.  When a reply names a purpose the row listens on llm/stream (a
 * pass-through) to learn each call's purpose on the thread that then runs
 * the provider's stream; without one, replies go in order as before.
 *
 * Native steering (docs/generations.md): "steer_live", a string or an array
 * of strings used one per steer_live call (the last repeats), makes the
 * provider offer steer_live with these answers:
 *   "refuse"    false: the core queues the steer for the request boundary
 *   "throw"     an error: the effect is unknown, nothing is queued
 *   "own"       true, and nothing more is ever reported
 *   "accept"    true, and "accepted" at once (it is never applied)
 *   "apply"     true, "accepted" at once, "applied" at the start of the
 *               next stream call (the next request boundary)
 *   "fallback"  true, then "refused" at the next stream call (the
 *               provider's own refusal: the core queues it then)
 * Applied text counts as seen by `expect.message_contains`.
 *
 * "prepare_delay_ms": N makes prepare_call wait N ms on the call's signal
 * (a cancel ends the wait: WEIR_E_CANCELLED), for tests of a cancel there.
 */
#define _GNU_SOURCE /* asprintf, strdup */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>

#include "demo.h"
#include "provider_common.h"

typedef struct scripted {
    const weir_plugin *self;
    char *id;
    json_t *replies; /* array */
    json_t *models;  /* object or NULL */
    bool loop;
    bool demo;       /* builtin:demo: replies made from the request (demo.c) */
    size_t next;
    bool *used;      /* by purpose: one per reply, or NULL (in order) */
    json_t *steer;   /* steer_live answers, or NULL */
    json_int_t prepare_delay; /* prepare_delay_ms */
    size_t steers;   /* steer_live calls so far */
    json_t *owed;    /* [{id, what, text}] to report at the next stream */
    pthread_mutex_t mu;
} scripted;

/* builtin:demo has no fixed replies: demo.c makes each from the request */
static const char demo_script[] = "{\"replies\": []}";

static const char config_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"script\":{\"type\":\"string\"},"
    "\"replies\":{\"type\":\"array\"},"
    "\"loop\":{\"type\":\"boolean\"},"
    "\"models\":{\"type\":\"object\"},"
    "\"steer_live\":{\"type\":[\"string\",\"array\"]},"
    "\"prepare_delay_ms\":{\"type\":\"integer\"}},"
    "\"additionalProperties\":false}";

/* ------------------------------------------------------------------------ */

static json_t *model_info(void *ud, const char *model) {
    scripted *s = ud;
    json_t *m = model ? json_object_get(s->models, model) : NULL;
    return json_is_object(m) ? json_deep_copy(m) : NULL;
}

static int prepare_call(void *ud, const json_t *config, weir_signal *signal, void **call,
                        weir_error *err) {
    scripted *s = ud;
    *call = NULL;
    if (s->prepare_delay > 0 &&
        weir_signal_sleep(signal, (uint64_t)s->prepare_delay) == WEIR_E_CANCELLED) {
        if (err)
            snprintf(err->text, sizeof err->text, "provider-scripted: prepare_call cancelled");
        return WEIR_E_CANCELLED;
    }
    if (!json_is_string(json_object_get(config, "model"))) {
        if (err)
            snprintf(err->text, sizeof err->text, "provider-scripted: the call config has no model");
        return WEIR_E_INVAL;
    }
    return WEIR_OK;
}

/* Emit; false once the stream refuses (cancelled). */
static bool emit(weir_stream *st, json_t *chunk) {
    return chunk && weir_stream_emit(st, chunk) == WEIR_OK;
}

static bool finish_failure(scripted *s, weir_stream *st, const char *code, const char *msg,
                           json_int_t retry_after) {
    json_t *f = weir_failure_new(s->id, code, "%s", msg);
    if (f && retry_after > 0)
        json_object_set_new(f, "retry_after_ms", json_integer(retry_after));
    if (!f)
        return false;
    return emit(st, json_pack("{s:s, s:{s:s, s:o}}", "type", "finish", "reason", "kind",
                              strcmp(code, "ABORTED") == 0 ? "aborted" : "error", "failure", f));
}

/* `v` as compact JSON text, malloc'd, or NULL when out of memory.  Not
 * json_dumps: jansson 2.14 goes on past an object key its buffer failed to
 * take and reports success (pc_buf_json does not). */
static char *json_text(const json_t *v) {
    pc_buf b = {0};
    char msg[32];
    if (pc_buf_json(&b, v, msg, sizeof msg) != 0) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* Every message's text (and the natively applied text), for message_contains. */
static bool request_contains(const json_t *request, const json_t *applied, const char *needle) {
    size_t k;
    const json_t *a;
    json_array_foreach(applied, k, a) {
        if (strstr(json_string_value(a), needle))
            return true;
    }
    char *dump = json_text(json_object_get(request, "messages"));
    pc_buf pd = {0};
    bool found = false;
    if (dump && pc_buf_str(&pd, needle, strlen(needle)) == 0) {
        pd.p[pd.len - 1] = '\0'; /* compare JSON-escaped forms, without the quotes */
        found = strstr(dump, pd.p + 1) != NULL;
    }
    free(dump);
    free(pd.p);
    return found;
}

/* NULL when the request meets `expect`, else a malloc'd message. */
static char *check_expect(const json_t *expect, const json_t *request, const json_t *applied) {
    const json_t *msgs = json_object_get(request, "messages");
    const char *contains = json_string_value(json_object_get(expect, "message_contains"));
    char *out = NULL;
    if (contains && !request_contains(request, applied, contains)) {
        if (asprintf(&out, "expected a message containing \"%s\"", contains) < 0)
            out = NULL;
        return out ? out : strdup("expectation failed");
    }
    const char *role = json_string_value(json_object_get(expect, "last_role"));
    const char *last = json_string_value(
        json_object_get(json_array_get(msgs, json_array_size(msgs) - 1), "role"));
    if (role && (!last || strcmp(role, last) != 0)) {
        if (asprintf(&out, "expected the last message's role to be \"%s\", got \"%s\"", role,
                     last ? last : "(none)") < 0)
            out = NULL;
        return out ? out : strdup("expectation failed");
    }
    const json_t *tc = json_object_get(expect, "tools_count");
    size_t ntools = json_array_size(json_object_get(request, "tools"));
    if (json_is_integer(tc) && (size_t)json_integer_value(tc) != ntools) {
        if (asprintf(&out, "expected %lld tools in the request, got %zu",
                     (long long)json_integer_value(tc), ntools) < 0)
            out = NULL;
        return out ? out : strdup("expectation failed");
    }
    const json_t *mc = json_object_get(expect, "messages_count");
    if (json_is_integer(mc) && (size_t)json_integer_value(mc) != json_array_size(msgs)) {
        if (asprintf(&out, "expected %lld messages in the request, got %zu",
                     (long long)json_integer_value(mc), json_array_size(msgs)) < 0)
            out = NULL;
        return out ? out : strdup("expectation failed");
    }
    return NULL;
}

/* Length of the i-th of n pieces of `text`, never splitting a UTF-8 sequence. */
static size_t piece_end(const char *text, size_t len, size_t i, size_t n) {
    if (i + 1 >= n)
        return len;
    size_t end = len * (i + 1) / n;
    while (end < len && ((unsigned char)text[end] & 0xC0) == 0x80)
        end++;
    return end;
}

/* The {type:"continuation", index, continuation} chunk a reply's or a
 * tool call's "continuation" `spec` asks for (see the top), or NULL. */
static json_t *continuation_chunk(const scripted *s, const json_t *request, int index,
                                  const json_t *spec) {
    json_t *c = json_is_object(spec) && json_object_get(spec, "data")
                    ? json_deep_copy(spec)
                    : json_pack("{s:s, s:s, s:O}", "provider", s->id, "model",
                                json_string_value(json_object_get(request, "model"))
                                    ? json_string_value(json_object_get(request, "model"))
                                    : "",
                                "data", spec);
    return c ? json_pack("{s:s, s:i, s:o}", "type", "continuation", "index", index,
                         "continuation", c)
             : NULL;
}

/* Stream one text-like block in `pieces`; counts emitted deltas in *sent.
 * `cont` (stolen, may be NULL): a continuation chunk emitted before the
 * block's end. */
static bool stream_block(weir_stream *st, int index, const char *block_type, const char *delta_type,
                         const char *text, size_t pieces, json_int_t delay, json_int_t limit,
                         json_int_t *sent, weir_signal *sig, json_t *cont) {
    if (!emit(st, json_pack("{s:s, s:i, s:s}", "type", "block-start", "index", index, "block_type",
                            block_type))) {
        json_decref(cont);
        return false;
    }
    size_t len = strlen(text), start = 0;
    for (size_t i = 0; i < pieces; i++) {
        if (limit >= 0 && *sent >= limit) {
            json_decref(cont);
            return true;
        }
        size_t end = piece_end(text, len, i, pieces);
        if (end <= start && i + 1 < pieces)
            continue;
        json_t *piece = NULL;
        if ((delay > 0 && weir_signal_sleep(sig, (uint64_t)delay) != WEIR_OK) ||
            !(piece = json_stringn(text + start, end - start)) ||
            !emit(st, json_pack("{s:s, s:i, s:o}", "type", delta_type, "index", index, "text",
                                piece))) {
            json_decref(cont);
            return false;
        }
        (*sent)++;
        start = end;
    }
    if (cont && !emit(st, cont))
        return false;
    return emit(st, json_pack("{s:s, s:i}", "type", "block-end", "index", index));
}

static int play(scripted *s, const json_t *reply, const json_t *request, const json_t *applied,
                weir_stream *st) {
    weir_signal *sig = weir_stream_signal(st);
    const json_t *expect = json_object_get(reply, "expect");
    char *bad = expect ? check_expect(expect, request, applied) : NULL;
    if (bad) {
        finish_failure(s, st, "INVALID_REQUEST", bad, 0);
        free(bad);
        return WEIR_OK;
    }
    const char *text = json_string_value(json_object_get(reply, "text"));
    const char *reasoning = json_string_value(json_object_get(reply, "reasoning"));
    const json_t *calls = json_object_get(reply, "tool_calls");
    const json_t *fail = json_object_get(reply, "fail");
    json_int_t delay = json_integer_value(json_object_get(reply, "chunk_delay_ms"));
    json_int_t nchunks = json_integer_value(json_object_get(reply, "chunks"));
    size_t pieces = nchunks > 0 ? (size_t)nchunks : 1;
    json_int_t limit = json_is_object(fail) ? json_integer_value(json_object_get(fail, "after_chunks"))
                                            : -1;
    json_int_t sent = 0;
    int index = 0;
    const json_t *rcont = json_object_get(reply, "continuation");
    if (reasoning &&
        !stream_block(st, index, "reasoning", "reasoning-delta", reasoning, pieces, delay, limit,
                      &sent, sig, rcont ? continuation_chunk(s, request, index, rcont) : NULL))
        return WEIR_OK;
    if (reasoning)
        index++;
    if (text && !(limit >= 0 && sent >= limit) &&
        !stream_block(st, index++, "text", "text-delta", text, pieces, delay, limit, &sent, sig,
                      NULL))
        return WEIR_OK;
    if (json_is_object(fail)) {
        const char *code = json_string_value(json_object_get(fail, "code"));
        const char *msg = json_string_value(json_object_get(fail, "message"));
        finish_failure(s, st, code ? code : "SERVER", msg ? msg : "scripted failure",
                       json_integer_value(json_object_get(fail, "retry_after_ms")));
        return WEIR_OK;
    }
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c) {
        const json_t *args = json_object_get(c, "arguments");
        char *argtext = json_is_string(args) ? strdup(json_string_value(args))
                        : args                ? json_text(args)
                                              : strdup("{}");
        if (!argtext)
            return WEIR_E_NOMEM;
        size_t alen = strlen(argtext), half = piece_end(argtext, alen, 0, 2);
        json_t *first = json_stringn(argtext, half), *rest = json_string(argtext + half);
        free(argtext);
        const char *id = json_string_value(json_object_get(c, "id"));
        const char *name = json_string_value(json_object_get(c, "name"));
        bool ok = first && rest &&
                  emit(st, json_pack("{s:s, s:i, s:s}", "type", "block-start", "index", index,
                                     "block_type", "tool_call")) &&
                  emit(st, json_pack("{s:s, s:i, s:s, s:s, s:O}", "type", "tool-call-delta",
                                     "index", index, "id", id ? id : "", "name", name ? name : "",
                                     "arguments_delta", first)) &&
                  emit(st, json_pack("{s:s, s:i, s:O}", "type", "tool-call-delta", "index", index,
                                     "arguments_delta", rest)) &&
                  (!json_object_get(c, "continuation") ||
                   emit(st, continuation_chunk(s, request, index,
                                               json_object_get(c, "continuation")))) &&
                  emit(st, json_pack("{s:s, s:i}", "type", "block-end", "index", index));
        json_decref(first);
        json_decref(rest);
        if (!ok)
            return WEIR_OK;
        index++;
    }
    const json_t *usage = json_object_get(reply, "usage");
    json_t *u;
    if (json_is_object(usage)) {
        u = json_deep_copy(usage);
    } else { /* deterministic stand-in: about four characters per token */
        char *dump = json_text(json_object_get(request, "messages"));
        size_t in = dump ? strlen(dump) / 4 : 0;
        free(dump);
        size_t out = (text ? strlen(text) : 0) / 4 + (reasoning ? strlen(reasoning) : 0) / 4 +
                     json_array_size(calls) * 8;
        u = json_pack("{s:I, s:I}", "input_tokens", (json_int_t)in, "output_tokens",
                      (json_int_t)out);
    }
    if (!u || !emit(st, json_pack("{s:s, s:o}", "type", "usage", "usage", u)))
        return WEIR_OK;
    const char *finish = json_string_value(json_object_get(reply, "finish"));
    if (!finish)
        finish = json_array_size(calls) ? "tool-calls" : "stop";
    emit(st, json_pack("{s:s, s:{s:s}}", "type", "finish", "reason", "kind", finish));
    return WEIR_OK;
}

/* Report what the last steer_live calls owe ("applied", "refused") at this
 * boundary; the applied texts go to *applied (new array). */
static void settle_steers(scripted *s, weir_stream *st, json_t **applied) {
    pthread_mutex_lock(&s->mu);
    json_t *owed = s->owed;
    s->owed = json_array();
    pthread_mutex_unlock(&s->mu);
    *applied = json_array();
    size_t i;
    const json_t *o;
    json_array_foreach(owed, i, o) {
        const char *what = json_string_value(json_object_get(o, "what"));
        weir_error err;
        memset(&err, 0, sizeof err);
        if (weir_stream_steering(st, json_string_value(json_object_get(o, "id")), what, &err) !=
            WEIR_OK)
            weir_log(s->self, WEIR_LOG_WARN, "stream_steering(%s): %s", what, err.text);
        else if (!strcmp(what, "applied") && *applied)
            json_array_append(*applied, json_object_get(o, "text"));
    }
    json_decref(owed);
}

static int steer_live(void *ud, weir_stream *st, const json_t *message, weir_error *err) {
    scripted *s = ud;
    pthread_mutex_lock(&s->mu);
    const json_t *answers = s->steer;
    size_t n = json_is_array(answers) ? json_array_size(answers) : 1;
    const json_t *a = json_is_array(answers)
                          ? json_array_get(answers, s->steers < n ? s->steers : n - 1)
                          : answers;
    s->steers++;
    const char *mode = json_string_value(a);
    mode = mode ? mode : "refuse";
    const char *id = json_string_value(json_object_get(message, "id"));
    /* the message's text, for expect.message_contains once applied */
    const json_t *block = json_array_get(json_object_get(message, "content"), 0);
    const char *text = json_string_value(json_object_get(block, "text"));
    const char *owe = !strcmp(mode, "apply") ? "applied" : !strcmp(mode, "fallback") ? "refused"
                                                                                     : NULL;
    if (owe && id)
        json_array_append_new(s->owed, json_pack("{s:s, s:s, s:s}", "id", id, "what", owe, "text",
                                                 text ? text : ""));
    pthread_mutex_unlock(&s->mu);
    if (!strcmp(mode, "refuse"))
        return 0;
    if (!strcmp(mode, "throw")) {
        if (err)
            snprintf(err->text, sizeof err->text, "provider-scripted: steer_live failed "
                                                  "(scripted)");
        return -1;
    }
    if ((!strcmp(mode, "accept") || !strcmp(mode, "apply")) && id) {
        weir_error e;
        memset(&e, 0, sizeof e);
        if (weir_stream_steering(st, id, "accepted", &e) != WEIR_OK)
            weir_log(s->self, WEIR_LOG_WARN, "stream_steering(accepted): %s", e.text);
    }
    return 1;
}

/* The purpose of the call whose stream runs on this thread (set by
 * on_stream around weir_next), or NULL outside the llm/stream chain.
 * Initial-exec, as a dlopen'ed plugin's thread-locals must be
 * (tests/scripts/check_exports.sh). */
static _Thread_local __attribute__((tls_model("initial-exec"))) const char *call_purpose;

/* llm/stream: note the call's purpose for the provider's stream, which the
 * chain's default runs on this thread inside weir_next. */
static json_t *on_stream(weir_call *call, const json_t *args, void *ud) {
    (void)ud;
    const char *saved = call_purpose;
    const char *p = json_string_value(json_object_get(args, "purpose"));
    call_purpose = p ? p : "step";
    json_t *r = weir_next(call);
    call_purpose = saved;
    return r;
}

/* The next reply for `purpose` (new reference), or NULL; with s->mu. */
static json_t *take_by_purpose(scripted *s, const char *purpose) {
    size_t n = json_array_size(s->replies);
    for (int round = 0; round < 2; round++) {
        for (int pass = 0; pass < 2; pass++) {
            for (size_t i = 0; i < n; i++) {
                json_t *r = json_array_get(s->replies, i);
                const char *p = json_string_value(json_object_get(r, "purpose"));
                if (!s->used[i] && (pass == 0 ? p && !strcmp(p, purpose) : !p)) {
                    s->used[i] = true;
                    return json_incref(r);
                }
            }
        }
        if (!s->loop)
            break;
        memset(s->used, 0, n * sizeof *s->used);
    }
    return NULL;
}

static int stream(void *ud, void *call, const json_t *request, weir_stream *st) {
    (void)call;
    scripted *s = ud;
    json_t *applied = NULL;
    settle_steers(s, st, &applied);
    const char *purpose = call_purpose ? call_purpose : "maintenance";
    pthread_mutex_lock(&s->mu);
    size_t n = json_array_size(s->replies);
    json_t *reply = s->demo ? scripted_demo_reply(request) : NULL;
    if (!s->demo && s->used) {
        reply = take_by_purpose(s, purpose);
    } else if (!s->demo) {
        if (s->next >= n && s->loop && n > 0)
            s->next = 0;
        if (s->next < n)
            reply = json_incref(json_array_get(s->replies, s->next++));
    }
    pthread_mutex_unlock(&s->mu);
    if (!reply) {
        char msg[160];
        if (s->used)
            snprintf(msg, sizeof msg, "script exhausted (%zu replies, none left for purpose '%s')",
                     n, purpose);
        else
            snprintf(msg, sizeof msg, "script exhausted (%zu replies)", n);
        finish_failure(s, st, "UNKNOWN", msg, 0);
        json_decref(applied);
        return WEIR_OK;
    }
    int rc = play(s, reply, request, applied, st);
    json_decref(reply);
    json_decref(applied);
    return rc;
}

/* ------------------------------------------------------------------------ */

static void destroy(scripted *s) {
    if (!s)
        return;
    json_decref(s->replies);
    free(s->used);
    json_decref(s->models);
    json_decref(s->steer);
    json_decref(s->owed);
    free(s->id);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int fail(weir_error *err, int code, const char *fmt, ...) WEIR_PRINTF(3, 4);
static int fail(weir_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Check the replies' shapes so that a bad script fails at init, not mid-run. */
static int check_replies(const json_t *replies, const char *where, weir_error *err) {
    size_t i;
    const json_t *r;
    json_array_foreach(replies, i, r) {
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", i);
        if (!json_is_object(r))
            return fail(err, WEIR_E_PLUGIN_CONFIG, "%s: replies[%s]: expected an object", where, idx);
        const json_t *calls = json_object_get(r, "tool_calls");
        if (calls && !json_is_array(calls))
            return fail(err, WEIR_E_PLUGIN_CONFIG, "%s: replies[%s].tool_calls: expected an array",
                        where, idx);
        size_t j;
        const json_t *c;
        json_array_foreach(calls, j, c) {
            if (!json_is_string(json_object_get(c, "name")) ||
                !json_is_string(json_object_get(c, "id")))
                return fail(err, WEIR_E_PLUGIN_CONFIG,
                            "%s: replies[%s].tool_calls: each needs a string id and name", where,
                            idx);
        }
        const char *fin = json_string_value(json_object_get(r, "finish"));
        if (json_object_get(r, "finish") &&
            (!fin || (strcmp(fin, "stop") && strcmp(fin, "tool-calls") && strcmp(fin, "max-tokens"))))
            return fail(err, WEIR_E_PLUGIN_CONFIG,
                        "%s: replies[%s].finish: expected stop, tool-calls or max-tokens", where, idx);
        const json_t *purpose = json_object_get(r, "purpose");
        if (purpose && (!json_is_string(purpose) || !*json_string_value(purpose)))
            return fail(err, WEIR_E_PLUGIN_CONFIG, "%s: replies[%s].purpose: expected a string",
                        where, idx);
        const json_t *f = json_object_get(r, "fail");
        if (f && (!json_is_object(f) || !json_is_string(json_object_get(f, "code"))))
            return fail(err, WEIR_E_PLUGIN_CONFIG, "%s: replies[%s].fail: expected {code, message}",
                        where, idx);
    }
    return WEIR_OK;
}

/* "steer_live": a known answer, or a non-empty array of them. */
static int check_steer(const json_t *steer, weir_error *err) {
    static const char *const known[] = {"refuse", "throw", "own", "accept", "apply", "fallback"};
    if (!steer)
        return WEIR_OK;
    size_t n = json_is_array(steer) ? json_array_size(steer) : 1;
    if (json_is_array(steer) && n == 0)
        return fail(err, WEIR_E_PLUGIN_CONFIG, "steer_live: expected a non-empty array");
    for (size_t i = 0; i < n; i++) {
        const char *v = json_string_value(json_is_array(steer) ? json_array_get(steer, i) : steer);
        bool ok = false;
        for (size_t k = 0; v && k < sizeof known / sizeof known[0]; k++)
            ok = ok || !strcmp(v, known[k]);
        if (!ok)
            return fail(err, WEIR_E_PLUGIN_CONFIG,
                        "steer_live: expected refuse, throw, own, accept, apply or fallback");
    }
    return WEIR_OK;
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config, weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    scripted *s = calloc(1, sizeof *s);
    if (!s || pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return WEIR_E_NOMEM;
    }
    s->self = self;
    s->id = strdup(weir_plugin_id(self));
    const char *script = json_string_value(json_object_get(config, "script"));
    const json_t *inline_replies = json_object_get(config, "replies");
    json_t *doc = NULL;
    const char *where = "config";
    int rc = WEIR_OK;
    if (!s->id) {
        rc = WEIR_E_NOMEM;
    } else if (script && inline_replies) {
        rc = fail(err, WEIR_E_PLUGIN_CONFIG, "give either \"script\" or \"replies\"");
    } else if (script && strcmp(script, "builtin:demo") == 0) {
        doc = json_loads(demo_script, 0, NULL);
        where = "builtin:demo";
        s->demo = true;
        rc = doc ? WEIR_OK : WEIR_E_NOMEM;
    } else if (script) {
        json_error_t je;
        doc = json_load_file(script, 0, &je);
        where = script;
        if (!doc)
            rc = fail(err, WEIR_E_PLUGIN_CONFIG, "cannot read script %s: %s", script, je.text);
    } else if (inline_replies) {
        doc = json_pack("{s:O}", "replies", inline_replies);
        rc = doc ? WEIR_OK : WEIR_E_NOMEM;
    } else {
        rc = fail(err, WEIR_E_PLUGIN_CONFIG, "config needs \"script\" (a file or builtin:demo) or "
                  "\"replies\"");
    }
    if (rc == WEIR_OK && !json_is_array(json_object_get(doc, "replies")))
        rc = fail(err, WEIR_E_PLUGIN_CONFIG, "%s: expected {\"replies\": [...]}", where);
    if (rc == WEIR_OK)
        rc = check_replies(json_object_get(doc, "replies"), where, err);
    if (rc == WEIR_OK) {
        s->replies = json_incref(json_object_get(doc, "replies"));
        const json_t *loop = json_object_get(config, "loop");
        s->loop = json_is_boolean(loop) ? json_is_true(loop)
                                        : json_is_true(json_object_get(doc, "loop"));
        const json_t *models = json_object_get(config, "models");
        s->models = json_is_object(models) ? json_deep_copy(models) : NULL;
        static const weir_provider vt = {sizeof(weir_provider), model_info, prepare_call, stream,
                                         NULL, NULL};
        static const weir_provider vt_native = {sizeof(weir_provider), model_info, prepare_call,
                                                stream, NULL, steer_live};
        const json_t *steer = json_object_get(config, "steer_live");
        rc = check_steer(steer, err);
        s->owed = json_array();
        if (rc == WEIR_OK && !s->owed)
            rc = WEIR_E_NOMEM;
        if (rc == WEIR_OK && steer && !WEIR_API_HAS(api, stream_steering))
            rc = fail(err, WEIR_E_PLUGIN_CONFIG, "steer_live: the host has no stream_steering");
        bool purposes = false;
        size_t i;
        const json_t *r;
        json_array_foreach(s->replies, i, r) purposes = purposes || json_object_get(r, "purpose");
        if (rc == WEIR_OK && purposes && !s->demo) {
            s->used = calloc(json_array_size(s->replies), sizeof *s->used);
            rc = s->used ? weir_hook_register(self, "llm/stream", on_stream, NULL)
                         : WEIR_E_NOMEM;
        }
        if (rc == WEIR_OK) {
            s->steer = steer ? json_deep_copy(steer) : NULL;
            s->prepare_delay = json_integer_value(json_object_get(config, "prepare_delay_ms"));
            rc = weir_provider_register(self, steer ? &vt_native : &vt, s);
        }
    }
    json_decref(doc);
    if (rc != WEIR_OK) {
        destroy(s);
        return rc;
    }
    weir_plugin_set_data(self, s);
    return WEIR_OK;
}

static void fini(weir_plugin *self) { destroy(weir_plugin_data(self)); }

static const weir_plugin_desc desc = {
    WEIR_PLUGIN_HEADER,
    "provider-scripted",
    "0.1.0",
    "Plays a scripted conversation from a JSON file (tests, demos)",
    config_schema,
    init,
    fini,
    {NULL, NULL, NULL, NULL},
};

WEIR_PLUGIN_DEFINE(desc)
