/*
 * plugins/provider-scripted - a model provider that plays a scripted
 * conversation: one reply per request, in order.
 *
 * Config: {"script": "FILE" | "builtin:demo"} or {"replies": [...]}, plus
 * "loop" (start over when the replies run out) and "models"
 * ({name: {context_window, max_output}}).  A script file is
 * {"replies": [...], "loop"?: bool}.  A reply:
 *   {"text", "reasoning", "tool_calls": [{"id","name","arguments"}],
 *    "usage": {...}, "finish": "stop|tool-calls|max-tokens",
 *    "chunk_delay_ms": N, "chunks": N,
 *    "fail": {"code","message","retry_after_ms","after_chunks"},
 *    "expect": {"message_contains","last_role","tools_count","messages_count"}}
 * An unmet `expect` fails the attempt with INVALID_REQUEST saying what was
 * expected; running out of replies fails with UNKNOWN "script exhausted".
 */
#define _GNU_SOURCE /* asprintf, strdup */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weir/plugin.h>

typedef struct scripted {
    const weir_plugin *self;
    char *id;
    json_t *replies; /* array */
    json_t *models;  /* object or NULL */
    bool loop;
    size_t next;
    pthread_mutex_t mu;
} scripted;

static const char demo_script[] =
    "{\"loop\": true, \"replies\": ["
    "{\"text\": \"Hello! Let me work that out with the pow tool.\", \"chunks\": 4,"
    " \"tool_calls\": [{\"id\": \"call_pow_1\", \"name\": \"pow\","
    " \"arguments\": {\"x\": 2, \"y\": 10}}]},"
    "{\"text\": \"2 to the power 10 is 1024.\", \"chunks\": 4}]}";

static const char config_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"script\":{\"type\":\"string\"},"
    "\"replies\":{\"type\":\"array\"},"
    "\"loop\":{\"type\":\"boolean\"},"
    "\"models\":{\"type\":\"object\"}},"
    "\"additionalProperties\":false}";

/* ------------------------------------------------------------------------ */

static json_t *model_info(void *ud, const char *model) {
    scripted *s = ud;
    json_t *m = model ? json_object_get(s->models, model) : NULL;
    return json_is_object(m) ? json_deep_copy(m) : NULL;
}

static int prepare_call(void *ud, const json_t *config, weir_signal *signal, void **call,
                        weir_error *err) {
    (void)ud;
    (void)signal;
    *call = NULL;
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

/* Every message's text, for message_contains. */
static bool request_contains(const json_t *request, const char *needle) {
    char *dump = json_dumps(json_object_get(request, "messages"), JSON_COMPACT | JSON_ENSURE_ASCII);
    json_t *probe = json_string(needle);
    char *pd = probe ? json_dumps(probe, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
    bool found = false;
    if (dump && pd) { /* compare JSON-escaped forms, without the quotes */
        size_t n = strlen(pd);
        pd[n - 1] = '\0';
        found = strstr(dump, pd + 1) != NULL;
    }
    free(dump);
    free(pd);
    json_decref(probe);
    return found;
}

/* NULL when the request meets `expect`, else a malloc'd message. */
static char *check_expect(const json_t *expect, const json_t *request) {
    const json_t *msgs = json_object_get(request, "messages");
    const char *contains = json_string_value(json_object_get(expect, "message_contains"));
    char *out = NULL;
    if (contains && !request_contains(request, contains)) {
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

/* Stream one text-like block in `pieces`; counts emitted deltas in *sent. */
static bool stream_block(weir_stream *st, int index, const char *block_type, const char *delta_type,
                         const char *text, size_t pieces, json_int_t delay, json_int_t limit,
                         json_int_t *sent, weir_signal *sig) {
    if (!emit(st, json_pack("{s:s, s:i, s:s}", "type", "block-start", "index", index, "block_type",
                            block_type)))
        return false;
    size_t len = strlen(text), start = 0;
    for (size_t i = 0; i < pieces; i++) {
        if (limit >= 0 && *sent >= limit)
            return true;
        size_t end = piece_end(text, len, i, pieces);
        if (end <= start && i + 1 < pieces)
            continue;
        if (delay > 0 && weir_signal_sleep(sig, (uint64_t)delay) != WEIR_OK)
            return false;
        json_t *piece = json_stringn(text + start, end - start);
        if (!piece || !emit(st, json_pack("{s:s, s:i, s:o}", "type", delta_type, "index", index,
                                          "text", piece)))
            return false;
        (*sent)++;
        start = end;
    }
    return emit(st, json_pack("{s:s, s:i}", "type", "block-end", "index", index));
}

static int play(scripted *s, const json_t *reply, const json_t *request, weir_stream *st) {
    weir_signal *sig = weir_stream_signal(st);
    const json_t *expect = json_object_get(reply, "expect");
    char *bad = expect ? check_expect(expect, request) : NULL;
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
    if (reasoning && !stream_block(st, index++, "reasoning", "reasoning-delta", reasoning, pieces,
                                   delay, limit, &sent, sig))
        return WEIR_OK;
    if (text && !(limit >= 0 && sent >= limit) &&
        !stream_block(st, index++, "text", "text-delta", text, pieces, delay, limit, &sent, sig))
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
                        : args                ? json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER)
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
        char *dump = json_dumps(json_object_get(request, "messages"), JSON_COMPACT);
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

static int stream(void *ud, void *call, const json_t *request, weir_stream *st) {
    (void)call;
    scripted *s = ud;
    pthread_mutex_lock(&s->mu);
    size_t n = json_array_size(s->replies);
    json_t *reply = NULL;
    if (s->next >= n && s->loop && n > 0)
        s->next = 0;
    if (s->next < n)
        reply = json_incref(json_array_get(s->replies, s->next++));
    pthread_mutex_unlock(&s->mu);
    if (!reply) {
        char msg[96];
        snprintf(msg, sizeof msg, "script exhausted (%zu replies)", n);
        finish_failure(s, st, "UNKNOWN", msg, 0);
        return WEIR_OK;
    }
    int rc = play(s, reply, request, st);
    json_decref(reply);
    return rc;
}

/* ------------------------------------------------------------------------ */

static void destroy(scripted *s) {
    if (!s)
        return;
    json_decref(s->replies);
    json_decref(s->models);
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
        const json_t *f = json_object_get(r, "fail");
        if (f && (!json_is_object(f) || !json_is_string(json_object_get(f, "code"))))
            return fail(err, WEIR_E_PLUGIN_CONFIG, "%s: replies[%s].fail: expected {code, message}",
                        where, idx);
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
                                         NULL};
        rc = weir_provider_register(self, &vt, s);
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
