/*
 * core/format/otlp.c - the OpenTelemetry GenAI spans of a session, as a
 * pure function of its log envelopes (docs/telemetry.md).
 *
 * One builder, two inputs: the live exporter feeds it each durable event
 * as the agent logs it (core/engine/events.c), `weir log ID --otlp` each
 * envelope of the log (cli/log.c), so both give the same spans: ids are
 * hashes of the session id and the seq that opens the span, times the
 * envelopes' own.  A turn is one trace: `invoke_agent` (from turn/start to
 * turn/end) holds a `chat` span per model attempt (assistant/message or a
 * failed assistant/attempt, from the event before it) and an
 * `execute_tool` span per tool call (tool/call to tool/result).  Hook
 * decisions and compaction are span events of the turn's span.  Message
 * content goes in only with telemetry.capture_content.
 *
 * The OTLP/JSON mapping (the opentelemetry-proto specification): ids
 * are lowercase hex, 64-bit integers decimal strings, enums integers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp.h"
#include "weir/version.h"

enum { KIND_INTERNAL = 1, KIND_CLIENT = 3 }; /* SpanKind */
enum { STATUS_UNSET = 0, STATUS_ERROR = 2 }; /* Status.StatusCode */

/* Token counts of a span, in the conventions' sense: input counts the
 * cached and cache-written tokens too. */
typedef struct tokens {
    bool any, cache_read_set, cache_write_set, reasoning_set;
    long long in, out, cache_read, cache_write, reasoning;
} tokens;

struct weir_trace {
    char *session;
    char *service;
    bool content;
    json_t *providers; /* plugin row id -> gen_ai.provider.name */
    /* the open turn */
    bool in_turn;
    long long turn, turn_time;
    char trace_id[33], turn_span[17];
    json_t *turn_events; /* span events */
    json_t *turn_inputs; /* user messages (content capture) */
    tokens turn_tokens;
    char *turn_model, *turn_provider; /* the last chat's */
    json_t *calls;                    /* call_id -> {seq, time, name, arguments} */
    long long last_time;              /* the previous envelope's time */
    long long step, attempts;         /* the step of the last chat and its attempts so far */
};

/* ---- ids ----------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* 64 bits of hash of (session, what, n), never 0 (an invalid id). */
static uint64_t id_hash(const char *session, const char *what, long long n, uint64_t basis) {
    char buf[64];
    int len = snprintf(buf, sizeof buf, "\x1f%s\x1f%lld", what, n);
    uint64_t h = fnv1a(basis, session, strlen(session));
    h = fnv1a(h, buf, (size_t)len);
    return h ? h : 1;
}

static void trace_id(const weir_trace *t, long long turn, char out[33]) {
    snprintf(out, 33, "%016llx%016llx",
             (unsigned long long)id_hash(t->session, "turn", turn, 0xcbf29ce484222325ULL),
             (unsigned long long)id_hash(t->session, "turn", turn, 0x84222325cbf29ce4ULL));
}

static void span_id(const weir_trace *t, long long seq, char out[17]) {
    snprintf(out, 17, "%016llx",
             (unsigned long long)id_hash(t->session, "seq", seq, 0xcbf29ce484222325ULL));
}

/* ---- attributes ---------------------------------------------------------- */

static int add_attr(json_t *attrs, const char *key, json_t *value) {
    json_t *a = value ? json_pack("{s:s, s:o}", "key", key, "value", value) : NULL;
    return a && json_array_append_new(attrs, a) == 0 ? 0 : -1;
}

static int attr_str(json_t *attrs, const char *key, const char *v) {
    if (!v)
        return 0;
    return add_attr(attrs, key, json_pack("{s:s}", "stringValue", v));
}

static int attr_int(json_t *attrs, const char *key, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return add_attr(attrs, key, json_pack("{s:s}", "intValue", buf));
}

static int attr_bool(json_t *attrs, const char *key, bool v) {
    return add_attr(attrs, key, json_pack("{s:b}", "boolValue", v));
}

/* A string array attribute of one value. */
static int attr_str1(json_t *attrs, const char *key, const char *v) {
    return add_attr(attrs, key,
                    json_pack("{s:{s:[{s:s}]}}", "arrayValue", "values", "stringValue", v));
}

/* A JSON value as a string attribute (content capture). */
static int attr_json(json_t *attrs, const char *key, const json_t *v) {
    char *s = weir__json_dump(v);
    int rc = s ? attr_str(attrs, key, s) : -1;
    free(s);
    return rc;
}

static long long count(const json_t *usage, const char *key, bool *set) {
    const json_t *v = json_object_get(usage, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return 0;
    if (set)
        *set = true;
    return (long long)json_integer_value(v);
}

/* Add the usage weir logs (input without the cached tokens) to `t`. */
static void tokens_add(tokens *t, const json_t *usage) {
    if (!json_is_object(usage))
        return;
    bool w = false;
    long long write = count(usage, "cache_write_tokens", &w);
    if (!w)
        write =
            count(usage, "cache_write_5m_tokens", &w) + count(usage, "cache_write_1h_tokens", &w);
    long long read = count(usage, "cache_read_tokens", &t->cache_read_set);
    t->cache_write_set |= w;
    t->any = true;
    t->in += count(usage, "input_tokens", NULL) + read + write;
    t->out += count(usage, "output_tokens", NULL);
    t->cache_read += read;
    t->cache_write += write;
    t->reasoning += count(usage, "reasoning_tokens", &t->reasoning_set);
}

static int attr_tokens(json_t *attrs, const tokens *t) {
    if (!t->any)
        return 0;
    if (attr_int(attrs, "gen_ai.usage.input_tokens", t->in) != 0 ||
        attr_int(attrs, "gen_ai.usage.output_tokens", t->out) != 0)
        return -1;
    if (t->cache_read_set &&
        attr_int(attrs, "gen_ai.usage.cache_read.input_tokens", t->cache_read) != 0)
        return -1;
    if (t->cache_write_set &&
        attr_int(attrs, "gen_ai.usage.cache_creation.input_tokens", t->cache_write) != 0)
        return -1;
    if (t->reasoning_set &&
        attr_int(attrs, "gen_ai.usage.reasoning.output_tokens", t->reasoning) != 0)
        return -1;
    return 0;
}

/* ---- spans --------------------------------------------------------------- */

static json_t *nanos(long long ms) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld000000", ms < 0 ? 0 : ms);
    return json_string(buf);
}

/* A new span without attributes, or NULL when out of memory. */
static json_t *span_new(const char *trace, const char *id, const char *parent, const char *name,
                        int kind, long long start, long long end) {
    return json_pack("{s:s, s:s, s:s*, s:s, s:i, s:o, s:o, s:[], s:[], s:{s:i}}", "traceId", trace,
                     "spanId", id, "parentSpanId", parent, "name", name, "kind", kind,
                     "startTimeUnixNano", nanos(start), "endTimeUnixNano",
                     nanos(end < start ? start : end), "attributes", "events", "status", "code",
                     STATUS_UNSET);
}

static int span_error(json_t *span, const char *type, const char *message) {
    json_t *status = json_object_get(span, "status");
    if (json_object_set_new(status, "code", json_integer(STATUS_ERROR)) != 0 ||
        (message && json_object_set_new(status, "message", json_string(message)) != 0))
        return -1;
    return attr_str(json_object_get(span, "attributes"), "error.type", type ? type : "_OTHER");
}

/* gen_ai.provider.name of plugin row `row`. */
static const char *provider_name(const weir_trace *t, const char *row) {
    const char *mapped = json_string_value(json_object_get(t->providers, row ? row : ""));
    return mapped ? mapped : row;
}

/* The value the conventions' registry gives a known provider, from the row's
 * plugin and base_url (a known vendor's host, else the API the plugin
 * speaks); NULL for other plugins: the row id stands for it. */
static const char *registry_name(const json_t *row) {
    const char *plugin = weir__json_str(row, "plugin", "");
    const char *base = weir__json_str(json_object_get(row, "config"), "base_url", "");
    if (strcmp(plugin, "provider-anthropic") == 0 || strcmp(plugin, "anthropic") == 0)
        return "anthropic";
    if (strcmp(plugin, "provider-openai") != 0 && strcmp(plugin, "openai") != 0)
        return NULL;
    static const struct {
        const char *host, *name;
    } hosts[] = {{"deepseek.com", "deepseek"},
                 {"googleapis.com", "gcp.gemini"},
                 {"x.ai", "x_ai"},
                 {"mistral.ai", "mistral_ai"},
                 {"groq.com", "groq"},
                 {"perplexity.ai", "perplexity"},
                 {"azure.com", "azure.ai.openai"},
                 {"openai.com", "openai"}};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        if (strstr(base, hosts[i].host))
            return hosts[i].name;
    return "openai"; /* another server speaking OpenAI's API */
}

/* ---- content (telemetry.capture_content) -------------------------------- */

/* A weir message as the conventions' message: {role, parts:[...]}. */
static json_t *message_parts(const json_t *message, const char *finish) {
    json_t *parts = json_array();
    json_t *m = parts ? json_pack("{s:s, s:o}", "role", weir__json_str(message, "role", "user"),
                                  "parts", parts)
                      : NULL;
    if (!m)
        return NULL;
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(message, "content"), i, b) {
        const char *type = weir__json_str(b, "type", "");
        json_t *p = NULL;
        if (strcmp(type, "text") == 0)
            p = json_pack("{s:s, s:s}", "type", "text", "content", weir__json_str(b, "text", ""));
        else if (strcmp(type, "reasoning") == 0)
            p = json_pack("{s:s, s:s}", "type", "reasoning", "content",
                          weir__json_str(b, "text", ""));
        else if (strcmp(type, "tool_call") == 0)
            p = json_pack("{s:s, s:s, s:s, s:s}", "type", "tool_call", "id",
                          weir__json_str(b, "id", ""), "name", weir__json_str(b, "name", ""),
                          "arguments", weir__json_str(b, "arguments", ""));
        else if (strcmp(type, "tool_result") == 0)
            p = json_pack("{s:s, s:s, s:O?}", "type", "tool_call_response", "id",
                          weir__json_str(b, "call_id", ""), "response",
                          json_object_get(b, "content"));
        else
            p = json_pack("{s:s}", "type", type);
        if (!p || json_array_append_new(parts, p) != 0) {
            json_decref(m);
            return NULL;
        }
    }
    if (finish && json_object_set_new(m, "finish_reason", json_string(finish)) != 0) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* ---- the events ---------------------------------------------------------- */

/* The finish reason of a stream (compact records or raw chunks), as the
 * conventions name it, or NULL. */
static const char *finish_reason(const json_t *stream) {
    size_t i;
    const json_t *r;
    json_array_foreach(stream, i, r) {
        const json_t *c =
            strcmp(weir__json_str(r, "type", ""), "chunk") == 0 ? json_object_get(r, "chunk") : r;
        if (strcmp(weir__json_str(c, "type", ""), "finish") != 0)
            continue;
        const char *kind = weir__json_str(json_object_get(c, "reason"), "kind", "");
        if (strcmp(kind, "stop") == 0)
            return "stop";
        if (strcmp(kind, "tool-calls") == 0)
            return "tool_call";
        if (strcmp(kind, "max-tokens") == 0)
            return "length";
        return "error";
    }
    return NULL;
}

static void turn_reset(weir_trace *t) {
    t->in_turn = false;
    json_array_clear(t->turn_events);
    json_array_clear(t->turn_inputs);
    json_object_clear(t->calls);
    memset(&t->turn_tokens, 0, sizeof t->turn_tokens);
    weir__free(t->turn_model);
    weir__free(t->turn_provider);
    t->turn_model = t->turn_provider = NULL;
    t->step = -1;
    t->attempts = 0;
}

static int on_turn_start(weir_trace *t, const json_t *ev, long long seq, long long time) {
    turn_reset(t);
    t->in_turn = true;
    t->turn = weir__json_int(json_object_get(ev, "data"), "turn", 0);
    t->turn_time = time;
    trace_id(t, t->turn, t->trace_id);
    span_id(t, seq, t->turn_span);
    return 0;
}

static int common_attrs(const weir_trace *t, json_t *attrs, const char *op) {
    return attr_str(attrs, "gen_ai.operation.name", op) != 0 ||
                   attr_str(attrs, "gen_ai.conversation.id", t->session) != 0 ||
                   attr_int(attrs, "weir.turn", t->turn) != 0
               ? -1
               : 0;
}

/* The turn's invoke_agent span, ended at `time`; `end` the turn/end data
 * (NULL: the log ends with the turn open). */
static json_t *turn_span(weir_trace *t, const json_t *end, long long time) {
    char name[128];
    snprintf(name, sizeof name, "invoke_agent %s", t->service);
    json_t *s = span_new(t->trace_id, t->turn_span, NULL, name, KIND_INTERNAL, t->turn_time, time);
    json_t *attrs = json_object_get(s, "attributes");
    if (!s || common_attrs(t, attrs, "invoke_agent") != 0 ||
        attr_str(attrs, "gen_ai.agent.name", t->service) != 0 ||
        attr_str(attrs, "gen_ai.provider.name", t->turn_provider) != 0 ||
        attr_str(attrs, "gen_ai.request.model", t->turn_model) != 0 ||
        attr_tokens(attrs, &t->turn_tokens) != 0)
        goto fail;
    int took = json_object_set_new(s, "events", t->turn_events); /* steals, even failing */
    t->turn_events = json_array();
    if (took != 0)
        goto fail;
    if (t->content && json_array_size(t->turn_inputs) > 0 &&
        attr_json(attrs, "gen_ai.input.messages", t->turn_inputs) != 0)
        goto fail;
    const json_t *reason = json_object_get(end, "reason");
    const char *kind = end ? weir__json_str(reason, "kind", "") : NULL;
    if (kind && attr_str(attrs, "weir.turn.end_reason", kind) != 0)
        goto fail;
    if (!end && attr_bool(attrs, "weir.turn.open", true) != 0)
        goto fail;
    if (kind && strcmp(kind, "error") == 0) {
        const json_t *e = json_object_get(reason, "error");
        const char *code =
            json_is_string(e) ? json_string_value(e) : weir__json_str(e, "code", NULL);
        if (span_error(s, code, weir__json_str(e, "message", NULL)) != 0)
            goto fail;
    }
    return s;
fail:
    json_decref(s);
    return NULL;
}

static json_t *on_attempt(weir_trace *t, const json_t *ev, long long seq, long long time,
                          bool failed) {
    const json_t *d = json_object_get(ev, "data");
    const char *model = weir__json_str(d, "model", NULL);
    const char *provider = provider_name(t, weir__json_str(d, "provider", NULL));
    long long step = weir__json_int(d, "step", 0);
    if (step != t->step) {
        t->step = step;
        t->attempts = 0;
    }
    t->attempts++;
    char id[17], name[160];
    span_id(t, seq, id);
    snprintf(name, sizeof name, "chat%s%s", model ? " " : "", model ? model : "");
    json_t *s = span_new(t->trace_id, id, t->turn_span, name, KIND_CLIENT, t->last_time, time);
    json_t *attrs = json_object_get(s, "attributes");
    tokens tk = {0};
    tokens_add(&tk, json_object_get(d, "usage"));
    tokens_add(&t->turn_tokens, json_object_get(d, "usage"));
    const char *finish = finish_reason(json_object_get(d, "stream"));
    if (!s || common_attrs(t, attrs, "chat") != 0 ||
        attr_str(attrs, "gen_ai.provider.name", provider ? provider : "_OTHER") != 0 ||
        attr_str(attrs, "gen_ai.request.model", model) != 0 ||
        attr_bool(attrs, "gen_ai.request.stream", true) != 0 || attr_tokens(attrs, &tk) != 0 ||
        (finish && attr_str1(attrs, "gen_ai.response.finish_reasons", finish) != 0) ||
        attr_int(attrs, "weir.step", step) != 0 ||
        attr_int(attrs, "weir.attempt", t->attempts) != 0)
        goto fail;
    const json_t *failure = json_object_get(d, "failure");
    if (failed && span_error(s, weir__json_str(failure, "code", NULL),
                             weir__json_str(failure, "message", NULL)) != 0)
        goto fail;
    if (t->content && !failed) {
        json_t *m = message_parts(json_object_get(d, "message"), finish);
        json_t *out = m ? json_pack("[o]", m) : NULL;
        int rc = out ? attr_json(attrs, "gen_ai.output.messages", out) : -1;
        json_decref(out);
        if (rc != 0)
            goto fail;
    }
    if (model) {
        weir__free(t->turn_model);
        t->turn_model = weir__strdup(model);
    }
    if (provider) {
        weir__free(t->turn_provider);
        t->turn_provider = weir__strdup(provider);
    }
    return s;
fail:
    json_decref(s);
    return NULL;
}

static json_t *on_tool_result(weir_trace *t, const json_t *ev, long long time) {
    const json_t *d = json_object_get(ev, "data");
    const json_t *block =
        json_array_get(json_object_get(json_object_get(d, "message"), "content"), 0);
    const char *call_id = weir__json_str(block, "call_id", NULL);
    const json_t *call = call_id ? json_object_get(t->calls, call_id) : NULL;
    if (!call)
        return json_array(); /* not a call of this turn: no span */
    const char *tool = weir__json_str(call, "name", "");
    char id[17], name[160];
    span_id(t, weir__json_int(call, "seq", 0), id);
    snprintf(name, sizeof name, "execute_tool %s", tool);
    json_t *s = span_new(t->trace_id, id, t->turn_span, name, KIND_INTERNAL,
                         weir__json_int(call, "time", time), time);
    json_t *attrs = json_object_get(s, "attributes");
    if (!s || common_attrs(t, attrs, "execute_tool") != 0 ||
        attr_str(attrs, "gen_ai.tool.name", tool) != 0 ||
        attr_str(attrs, "gen_ai.tool.call.id", call_id) != 0 ||
        attr_str(attrs, "gen_ai.tool.type", "function") != 0 ||
        attr_int(attrs, "weir.step", weir__json_int(d, "step", 0)) != 0)
        goto fail;
    const json_t *e = json_object_get(d, "error");
    if (e && span_error(s, weir__json_str(e, "code", NULL), weir__json_str(e, "reason", NULL)) != 0)
        goto fail;
    if (t->content &&
        (attr_str(attrs, "gen_ai.tool.call.arguments", weir__json_str(call, "arguments", NULL)) !=
             0 ||
         attr_json(attrs, "gen_ai.tool.call.result", json_object_get(block, "content")) != 0))
        goto fail;
    json_object_del(t->calls, call_id);
    return s;
fail:
    json_decref(s);
    return NULL;
}

/* Copy each scalar member of `data` as attribute "<prefix>.<key>".  A
 * text (a compaction's `summary`, any string over 256 bytes) is content:
 * only with `content`. */
static int flat_attrs(json_t *attrs, const char *prefix, const json_t *data, bool content) {
    const char *key;
    json_t *v;
    char k[160];
    json_object_foreach((json_t *)(uintptr_t)data, key, v) {
        snprintf(k, sizeof k, "%s.%s", prefix, key);
        int rc = 0;
        bool text =
            json_is_string(v) && (strcmp(key, "summary") == 0 || json_string_length(v) > 256);
        if (text && !content)
            continue;
        if (json_is_string(v))
            rc = attr_str(attrs, k, json_string_value(v));
        else if (json_is_integer(v))
            rc = attr_int(attrs, k, (long long)json_integer_value(v));
        else if (json_is_boolean(v))
            rc = attr_bool(attrs, k, json_is_true(v));
        else if (json_is_real(v))
            rc = add_attr(attrs, k, json_pack("{s:f}", "doubleValue", json_real_value(v)));
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* A span event of the turn: hook provenance and compaction. */
static int turn_event(weir_trace *t, const json_t *ev, const char *type, long long seq,
                      long long time) {
    const json_t *d = json_object_get(ev, "data");
    const json_t *op = json_object_get(ev, "surface_op");
    const char *name = NULL, *prefix = "weir";
    if (strncmp(type, "hook/", 5) == 0)
        name = strcmp(type, "hook/decision") == 0      ? "weir.hook.decision"
               : strcmp(type, "hook/quarantined") == 0 ? "weir.hook.quarantined"
               : strcmp(type, "hook/slow") == 0        ? "weir.hook.slow"
                                                       : NULL;
    else if (strncmp(type, "compaction/", 11) == 0 || json_is_object(op))
        name = "weir.compaction", prefix = "weir.compaction";
    if (!name)
        return 0;
    json_t *attrs = json_array();
    json_t *e = attrs ? json_pack("{s:o, s:s, s:o}", "timeUnixNano", nanos(time), "name", name,
                                  "attributes", attrs)
                      : NULL;
    if (!e || attr_str(attrs, "weir.event.type", type) != 0 ||
        attr_int(attrs, "weir.seq", seq) != 0)
        goto fail;
    if (json_is_object(op)) { /* a surface replace: what it replaced */
        if (attr_int(attrs, "weir.compaction.start_seq", weir__json_int(op, "start_seq", 0)) != 0 ||
            attr_int(attrs, "weir.compaction.end_seq", weir__json_int(op, "end_seq", 0)) != 0 ||
            attr_int(attrs, "weir.compaction.replaced",
                     (long long)json_array_size(json_object_get(ev, "source_seqs"))) != 0)
            goto fail;
    } else if (flat_attrs(attrs, prefix, d, t->content) != 0) {
        goto fail;
    }
    return json_array_append_new(t->turn_events, e);
fail:
    json_decref(e);
    return -1;
}

/* ---- the public builder -------------------------------------------------- */

int weir_trace_create(const char *session_id, const json_t *config, weir_trace **out,
                      weir_error *err) {
    if (!out || !session_id || !*session_id)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_trace_create: needs a session id and an out pointer");
    *out = NULL;
    const json_t *tel = json_object_get(config, "telemetry");
    const char *service = weir__json_str(tel, "service_name", NULL);
    if (!service || !*service)
        service = getenv("OTEL_SERVICE_NAME");
    if (!service || !*service)
        service = WEIR__OTLP_SERVICE;
    weir_trace *t = weir__calloc(1, sizeof *t);
    if (!t)
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
    t->session = weir__strdup(session_id);
    t->service = weir__strdup(service);
    t->content = json_is_true(json_object_get(tel, "capture_content"));
    t->providers = json_object();
    t->turn_events = json_array();
    t->turn_inputs = json_array();
    t->calls = json_object();
    t->step = -1;
    bool ok =
        t->session && t->service && t->providers && t->turn_events && t->turn_inputs && t->calls;
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(config, "plugins"), i, row) {
        const char *name = registry_name(row);
        const char *id = weir__json_str(row, "id", NULL);
        if (ok && name && id && json_object_set_new(t->providers, id, json_string(name)) != 0)
            ok = false;
    }
    if (!ok) {
        weir_trace_destroy(t);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
    }
    *out = t;
    return WEIR_OK;
}

void weir_trace_destroy(weir_trace *t) {
    if (!t)
        return;
    turn_reset(t);
    weir__free(t->session);
    weir__free(t->service);
    json_decref(t->providers);
    json_decref(t->turn_events);
    json_decref(t->turn_inputs);
    json_decref(t->calls);
    weir__free(t);
}

/* Handle one envelope; -1 when out of memory. */
static int add(weir_trace *t, const json_t *ev, json_t *spans) {
    const char *type = weir__json_str(ev, "type", "");
    const json_t *d = json_object_get(ev, "data");
    long long seq = weir__json_int(ev, "seq", 0), time = weir__json_int(ev, "time", t->last_time);
    json_t *s = NULL;
    int rc = 0;
    if (strcmp(type, "turn/start") == 0) {
        rc = on_turn_start(t, ev, seq, time);
    } else if (!t->in_turn) {
        /* outside a turn: nothing to hang a span on */
    } else if (strcmp(type, "turn/end") == 0) {
        rc = (s = turn_span(t, d, time)) ? json_array_append_new(spans, s) : -1;
        turn_reset(t);
    } else if (strcmp(type, "assistant/message") == 0 || strcmp(type, "assistant/attempt") == 0) {
        s = on_attempt(t, ev, seq, time, strcmp(type, "assistant/attempt") == 0);
        rc = s ? json_array_append_new(spans, s) : -1;
    } else if (strcmp(type, "tool/call") == 0) {
        json_t *c = json_pack("{s:I, s:I, s:s, s:s}", "seq", (json_int_t)seq, "time",
                              (json_int_t)time, "name", weir__json_str(d, "name", ""), "arguments",
                              weir__json_str(d, "arguments", ""));
        rc = c ? json_object_set_new(t->calls, weir__json_str(d, "call_id", ""), c) : -1;
    } else if (strcmp(type, "tool/result") == 0) {
        s = on_tool_result(t, ev, time);
        rc = !s ? -1 : json_is_array(s) ? (json_decref(s), 0) : json_array_append_new(spans, s);
    } else {
        if (t->content && strcmp(type, "user/message") == 0) {
            json_t *m = message_parts(json_object_get(d, "message"), NULL);
            rc = m ? json_array_append_new(t->turn_inputs, m) : -1;
        }
        if (rc == 0)
            rc = turn_event(t, ev, type, seq, time);
    }
    t->last_time = time;
    return rc;
}

int weir_trace_add(weir_trace *t, const json_t *event, json_t **spans, weir_error *err) {
    if (spans)
        *spans = NULL;
    if (!t || !json_is_object(event) || !spans)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_trace_add: needs a builder, an event object and an out pointer");
    json_t *out = json_array();
    if (!out || add(t, event, out) != 0) {
        json_decref(out);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
    }
    *spans = out;
    return WEIR_OK;
}

int weir_trace_finish(weir_trace *t, json_t **spans, weir_error *err) {
    if (spans)
        *spans = NULL;
    if (!t || !spans)
        return weir__err(err, WEIR_E_INVAL, NULL, NULL,
                         "weir_trace_finish: needs a builder and an out pointer");
    json_t *out = json_array();
    json_t *s = out && t->in_turn ? turn_span(t, NULL, t->last_time) : NULL;
    if (!out || (t->in_turn && (!s || json_array_append_new(out, s) != 0))) {
        json_decref(out);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
    }
    turn_reset(t);
    *spans = out;
    return WEIR_OK;
}

json_t *weir_trace_request(const weir_trace *t, const json_t *spans) {
    if (!t || !json_is_array(spans))
        return NULL;
    return weir__otlp_request(t->service, spans);
}

json_t *weir__otlp_request(const char *service, const json_t *spans) {
    json_t *copy = json_deep_copy(spans);
    json_t *res_attrs = json_array();
    if (!copy || !res_attrs || attr_str(res_attrs, "service.name", service) != 0 ||
        attr_str(res_attrs, "telemetry.sdk.name", "weir") != 0 ||
        attr_str(res_attrs, "telemetry.sdk.language", "c") != 0 ||
        attr_str(res_attrs, "telemetry.sdk.version", WEIR_VERSION_STRING) != 0) {
        json_decref(copy);
        json_decref(res_attrs);
        return NULL;
    }
    return json_pack("{s:[{s:{s:o}, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceSpans", "resource",
                     "attributes", res_attrs, "scopeSpans", "scope", "name", "weir", "version",
                     WEIR_VERSION_STRING, "spans", copy);
}

/* ---- settings ------------------------------------------------------------ */

bool weir__otlp_url_valid(const char *s) {
    if (!s)
        return false;
    const char *host = strncmp(s, "http://", 7) == 0    ? s + 7
                       : strncmp(s, "https://", 8) == 0 ? s + 8
                                                        : NULL;
    if (!host || !*host || *host == '/' || *host == ':' || *host == '?' || *host == '#')
        return false;
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return false;
    return true;
}

void weir__otlp_settings_free(weir__otlp_settings *s) {
    if (!s)
        return;
    weir__free(s->url);
    weir__free(s->service_name);
    json_decref(s->headers);
    memset(s, 0, sizeof *s);
}

/* Trimmed copy of [a, b) into `buf`. */
static void trimmed(const char *a, const char *b, char *buf, size_t size) {
    while (a < b && (*a == ' ' || *a == '\t'))
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
    size_t n = (size_t)(b - a) < size - 1 ? (size_t)(b - a) : size - 1;
    memcpy(buf, a, n);
    buf[n] = '\0';
}

/* Parse OTEL_EXPORTER_OTLP_*HEADERS (k=v,k=v) into `headers`. */
static int env_headers(const char *var, json_t *headers, weir_error *err) {
    const char *v = getenv(var);
    for (const char *p = v; p && *p;) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        char key[256], val[2048];
        if (!eq)
            return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                             "%s: expected name=value pairs separated by ','", var);
        trimmed(p, eq, key, sizeof key);
        trimmed(eq + 1, end, val, sizeof val);
        if (!*key)
            return weir__err(err, WEIR_E_CONFIG, NULL, NULL, "%s: a header without a name", var);
        if (json_object_set_new(headers, key, json_string(val)) != 0)
            return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
        p = *end ? end + 1 : end;
    }
    return WEIR_OK;
}

int weir__otlp_settings_resolve(const json_t *config, weir__otlp_settings *out, weir_error *err) {
    memset(out, 0, sizeof *out);
    const json_t *tel = json_object_get(config, "telemetry");
    out->enabled = json_is_true(json_object_get(tel, "enabled"));
    out->capture_content = json_is_true(json_object_get(tel, "capture_content"));
    out->max_queue = (long)weir__json_int(tel, "max_queue", WEIR__OTLP_MAX_QUEUE);
    out->batch_ms = (long)weir__json_int(tel, "batch_ms", WEIR__OTLP_BATCH_MS);
    out->timeout_ms = (long)weir__json_int(tel, "timeout_ms", WEIR__OTLP_TIMEOUT_MS);
    /* an embedder's config may not have been composed (and checked) */
    static const char *const counts[] = {"max_queue", "batch_ms", "timeout_ms"};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const json_t *v = json_object_get(tel, counts[i]);
        if (v && (!json_is_integer(v) || json_integer_value(v) < 1 ||
                  json_integer_value(v) > 86400000))
            return weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                             "telemetry.%s: expected an integer from 1 to 86400000", counts[i]);
    }
    const char *service = weir__json_str(tel, "service_name", NULL);
    if (!service || !*service)
        service = getenv("OTEL_SERVICE_NAME");
    out->service_name = weir__strdup(service && *service ? service : WEIR__OTLP_SERVICE);
    out->headers = json_object();
    if (!out->service_name || !out->headers) {
        weir__otlp_settings_free(out);
        return weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
    }
    /* the endpoint: config, then the traces variable (as is), then the
     * general one (+ /v1/traces), then the default */
    const char *cfg = weir__json_str(tel, "endpoint", NULL);
    const char *traces = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    const char *general = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    const char *base = cfg                   ? cfg
                       : traces && *traces   ? traces
                       : general && *general ? general
                                             : NULL;
    const char *what = cfg                      ? "telemetry.endpoint"
                       : base && base == traces ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
                       : base                   ? "OTEL_EXPORTER_OTLP_ENDPOINT"
                                                : "the default endpoint";
    if (!base)
        base = WEIR__OTLP_DEFAULT_ENDPOINT;
    int rc = WEIR_OK;
    if (!weir__otlp_url_valid(base)) {
        rc = weir__err(err, WEIR_E_CONFIG, NULL, NULL,
                       "%s: expected an http:// or https:// URL, got '%.200s'", what, base);
    } else if (base == traces) {
        out->url = weir__strdup(base);
    } else {
        size_t n = strlen(base);
        while (n > 0 && base[n - 1] == '/')
            n--;
        out->url = weir__asprintf("%.*s/v1/traces", (int)n, base);
    }
    if (rc == WEIR_OK && !out->url)
        rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
    /* headers: the general variable, the traces one, then the config's */
    if (rc == WEIR_OK)
        rc = env_headers("OTEL_EXPORTER_OTLP_HEADERS", out->headers, err);
    if (rc == WEIR_OK)
        rc = env_headers("OTEL_EXPORTER_OTLP_TRACES_HEADERS", out->headers, err);
    const json_t *h = json_object_get(tel, "headers");
    if (rc == WEIR_OK && json_is_object(h)) {
        json_t *copy = json_deep_copy(h); /* the exporter's thread holds them */
        if (!copy || json_object_update(out->headers, copy) != 0)
            rc = weir__err(err, WEIR_E_NOMEM, NULL, NULL, "telemetry: out of memory");
        json_decref(copy);
    }
    if (rc != WEIR_OK)
        weir__otlp_settings_free(out);
    return rc;
}
