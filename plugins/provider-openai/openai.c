/*
 * plugins/provider-openai/openai.c - the provider-openai plugin: OpenAI's
 * Responses API and Chat Completions over streaming SSE (also vLLM,
 * llama.cpp server, Ollama, OpenRouter and other compatible servers).
 *
 * Config (validated against `config_schema` by the loader, re-checked here):
 *   base_url                 default https://api.openai.com/v1 (includes /v1);
 *                            requests go to {base_url}/chat/completions
 *   api_key                  sent as "Authorization: Bearer <key>"; an empty
 *                            key sends no Authorization header (local servers)
 *   headers                  extra request headers {name: value}; a name that
 *                            matches a default header replaces it
 *   options                  an object merged last into every request body
 *                            (docs/providers.md, "Options"); the keys the
 *                            provider writes itself are refused
 *   models                   {name: {context_window, max_output, options,
 *                            headers}}: model_info, and the options and
 *                            extra headers of that model's requests
 *                            (beats the server's report and the model table)
 *   connect_timeout_ms       default 10000
 *   stream_idle_timeout_ms   default 300000
 *   probe_windows            ask the server for its windows (GET /models,
 *                            /props) once; default true unless base_url is
 *                            the default
 *   probe_timeout_ms         bound of that probe, default 2000
 *   stream_total_timeout_ms  default 1800000 (30 minutes; 0 = none)
 *   prompt_cache_key         the top-level `prompt_cache_key` of every request
 *                            (platform.openai.com/docs/guides/prompt-caching:
 *                            requests that share a key and a prefix are routed
 *                            to the same cache): a string (that key), true (the
 *                            session id of the call, weir_stream_session; the
 *                            row id on a host older than ABI 1.8) or false
 *                            (none).  Default: true when base_url's host is
 *                            api.openai.com, else false, because compatible
 *                            servers may refuse a member they do not know
 *                            (Gemini's endpoint answers 400 "Invalid JSON
 *                            payload received. Unknown name
 *                            \"prompt_cache_key\"").  An option
 *                            `prompt_cache_key` (a value, or null for none)
 *                            beats it.
 *
 *   api                      "responses" (POST {base_url}/responses: OpenAI's
 *                            Responses API, responses_request.c and
 *                            responses_decode.c) or "chat" ({base_url}/
 *                            chat/completions).  Default: responses when
 *                            base_url is https://api.openai.com/v1 (the
 *                            default), else chat (openai_responses_default;
 *                            the config schema says the same with if/then/
 *                            else, so `weir config` prints the value).
 *
 * Config parsing, headers, model_info, prepare_call and the HTTP call are
 * shared with provider-anthropic (plugins/provider-common/provider_host.c);
 * this file holds what is OpenAI's own.  One attempt per `stream` call, no
 * hidden retries.  The API key and header values never appear in chunks,
 * failures or log lines, nor does a server's echo of them (scrubbed:
 * docs/providers.md, "Secrets").
 */
#include "weir/plugin.h"

#include <string.h>

#include "openai.h"
#include "provider_host.h"

static const char *const default_headers[][2] = {
    {"Content-Type", "application/json"},
    {"Accept", "text/event-stream"},
};

#define SPEC(api_path, owned)                                                                 \
    {                                                                                         \
        .plugin = "provider-openai", .default_base_url = "https://api.openai.com/v1",         \
        .path = api_path, .headers = default_headers,                                         \
        .nheaders = sizeof default_headers / sizeof default_headers[0],                       \
        .key_header = "Authorization", .key_prefix = "Bearer ", .max_temperature = 2,         \
        .probe = true, /* vLLM and llama.cpp report their windows */                          \
        .base_url_env = "OPENAI_BASE_URL", .owned_keys = owned,                               \
    }

/* A row speaks one API, told by the spec it was made with (`api`). */
static const pc_spec spec = SPEC("/chat/completions", openai_owned_keys);
static const pc_spec spec_responses = SPEC("/responses", openai_responses_owned_keys);

/* ------------------------------------------------------------------------ */
/* Provider callbacks                                                       */
/* ------------------------------------------------------------------------ */

static int prepare_call(void *self, const json_t *config, weir_signal *signal, void **call,
                        weir_error *err) {
    return pc_prepare_call(&spec, self, config, signal, call, err);
}

static int on_event(void *user_data, const char *event, const char *data, size_t len) {
    (void)event; /* Chat Completions streams carry everything in `data` */
    return openai_decoder_event(user_data, data, len);
}

static int decoder_end(void *decoder, json_t *failure, bool aborted) {
    return openai_decoder_end(decoder, failure, aborted);
}

static bool decoder_done(void *decoder) { return openai_decoder_done(decoder); }

static const pc_codec codec = {on_event, decoder_end, decoder_done};

static int responses_on_event(void *user_data, const char *event, const char *data,
                              size_t len) {
    (void)event; /* each event's data names its type */
    return responses_decoder_event(user_data, data, len);
}

static int responses_end(void *decoder, json_t *failure, bool aborted) {
    return responses_decoder_end(decoder, failure, aborted);
}

static bool responses_done(void *decoder) { return responses_decoder_done(decoder); }

static const pc_codec responses_codec = {responses_on_event, responses_end, responses_done};

/* The prompt_cache_key of a call on row `p` for stream `st` (borrowed), or
 * NULL for none (the row's config, docs at the top of this file). */
static const char *prompt_cache_key(const pc_provider *p, weir_stream *st) {
    const json_t *cfg = json_object_get(p->config, "prompt_cache_key");
    if (json_is_string(cfg))
        return json_string_value(cfg);
    if (cfg ? !json_is_true(cfg) : !openai_cache_key_default(p->base))
        return NULL;
    const char *session = NULL;
    if (WEIR_API_HAS(weir__plugin_api, stream_session) && weir__plugin_api->stream_session)
        session = weir_stream_session(st);
    return session && session[0] ? session : p->id;
}

/* Add the default prompt_cache_key to the merged `options` (borrowed, an
 * object) unless they name one (a value, or null: none).  0, or -1 when out
 * of memory (`msg` says so). */
static int add_cache_key(json_t *options, const char *key, char *msg, size_t size) {
    if (!key || json_object_get(options, "prompt_cache_key"))
        return 0;
    return json_object_set_new(options, "prompt_cache_key", json_string(key)) == 0
               ? 0
               : pc_bad(msg, size, "out of memory");
}

/* Build the body of `request` for row `p` into `memo` (the row's API):
 * 0, or -1 with `msg` set. */
static int build_body(const pc_provider *p, weir_stream *st, const json_t *request,
                      const char *model, pc_memo *memo, char *msg, size_t size) {
    json_t *options = NULL;
    pc_extra extra = {0};
    int built = pc_call_options(p, request, &options, msg, size);
    if (built == 0)
        built = add_cache_key(options, prompt_cache_key(p, st), msg, size);
    extra.options = options;
    if (built == 0)
        built = p->spec == &spec_responses
                    ? openai_responses_build(request, &extra, p->cache, memo, msg, size)
                    : openai_request_build_ex(request, &extra, p->cache, memo, msg, size);
    if (built == 0 && extra.dropped_temperature)
        pc_warn_dropped_temperature(p, model);
    /* a message is translated once (then cached): said once per message */
    if (built == 0 && extra.skipped_continuations > 0)
        weir_log(p->plugin, WEIR_LOG_WARN,
                 p->spec == &spec_responses
                     ? "model \"%s\": %zu reasoning block(s) not sent: their continuation "
                       "holds no reasoning item (\"item\") of the Responses API"
                     : "model \"%s\": %zu block(s) sent without their continuation: its data "
                       "lacks \"field\" (reasoning) or \"thought_signature\" (tool call)",
                 model ? model : "", extra.skipped_continuations);
    json_decref(options);
    return built;
}

/* The server compaction a Responses row offers (docs/providers.md,
 * "Server compaction"): the name model_info reports. */
#define SERVER_COMPACTION "openai-responses-compact"

/* pc_model_info, plus "server_compaction" on a Responses row (every model:
 * POST /responses/compact is the API's, not a model's). */
static json_t *model_info(void *self, const char *model) {
    const pc_provider *p = self;
    json_t *info = pc_model_info(self, model);
    if (!p || p->spec != &spec_responses)
        return info;
    if (!info)
        info = json_object();
    if (info && json_object_set_new(info, "server_compaction", json_string(SERVER_COMPACTION)) != 0) {
        json_decref(info);
        info = NULL;
    }
    return info;
}

/* A request with "compaction": "server" on a Responses row: POST
 * {base_url}/responses/compact with the model and input the row would
 * stream, and decode the JSON answer (responses_compact_reply). */
static int compact(const pc_provider *p, const json_t *request, const char *model,
                   weir_stream *st, responses_decoder *d) {
    char msg[512];
    pc_memo *memo = calloc(1, sizeof *memo);
    int built = memo ? build_body(p, st, request, model, memo, msg, sizeof msg)
                     : pc_bad(msg, sizeof msg, "out of memory");
    char *text = built == 0 ? openai_responses_compact_body(memo->text.p, memo->text.len, msg,
                                                            sizeof msg)
                            : NULL;
    pc_memo_free(memo);
    if (!text)
        return responses_decoder_end(
                   d, weir_failure_new(p->id, "INVALID_REQUEST",
                                       "cannot translate the compaction request: %s", msg),
                   false) == 0
                   ? WEIR_OK
                   : WEIR_E_NOMEM;
    char *body = NULL;
    size_t body_len = 0;
    json_t *failure = NULL;
    int rc = pc_post_json(p, st, model, "/responses/compact", text, strlen(text), &body,
                          &body_len, &failure);
    free(text);
    if (rc != WEIR_OK)
        return rc;
    if (body)
        responses_compact_reply(d, body, body_len);
    free(body);
    bool aborted = failure && !strcmp(json_string_value(json_object_get(failure, "code"))
                                          ? json_string_value(json_object_get(failure, "code"))
                                          : "",
                                      "ABORTED");
    return responses_decoder_end(d, failure, aborted) == 0 ? WEIR_OK : WEIR_E_NOMEM;
}

static int stream(void *self, void *call, const json_t *request, weir_stream *st) {
    (void)call;
    const pc_provider *p = self;
    if (!p || !st)
        return WEIR_E_INVAL;
    pc_sink sink = {st, p};
    const char *model = json_string_value(json_object_get(request, "model"));
    bool responses = p->spec == &spec_responses;
    const char *purpose = json_string_value(json_object_get(request, "compaction"));
    if (purpose && strcmp(purpose, "server") == 0) {
        if (!responses) {
            json_t *f = weir_failure_new(p->id, "INVALID_REQUEST",
                                         "server compaction: row '%s' speaks Chat Completions, "
                                         "which has none (only api \"responses\" does)",
                                         p->id);
            pc_out o;
            if (pc_out_init(&o, p->id, "openai", "chunk", pc_emit_chunk, &sink) != 0) {
                json_decref(f);
                return WEIR_E_NOMEM;
            }
            int end = pc_end(&o, f, false);
            pc_out_clear(&o);
            return end == 0 ? WEIR_OK : WEIR_E_NOMEM;
        }
        responses_decoder *cd = responses_decoder_new(p->id, model, pc_emit_chunk, &sink);
        if (!cd)
            return WEIR_E_NOMEM;
        int rc = compact(p, request, model, st, cd);
        responses_decoder_free(cd);
        return rc;
    }
    void *d;
    if (responses) {
        d = responses_decoder_new(p->id, model, pc_emit_chunk, &sink);
    } else {
        d = openai_decoder_new(p->id, pc_emit_chunk, &sink);
        if (d && openai_decoder_set_model(d, model) != 0) {
            openai_decoder_free(d);
            d = NULL;
        }
    }
    if (!d)
        return WEIR_E_NOMEM;
    char msg[512];
    pc_memo *memo = pc_cache_memo_take(p->cache);
    int built = build_body(p, st, request, model, memo, msg, sizeof msg);
    int rc = pc_stream_run(p, st, model, built == 0 ? memo->text.p : NULL,
                           built == 0 ? memo->text.len : 0, msg, sizeof msg, d,
                           responses ? &responses_codec : &codec);
    pc_cache_memo_give(p->cache, memo); /* the next step's body starts from this one */
    if (responses)
        responses_decoder_free(d);
    else
        openai_decoder_free(d);
    return rc;
}

static const weir_provider provider_vtable = {
    .struct_size = sizeof(weir_provider),
    .model_info = model_info,
    .prepare_call = prepare_call,
    .stream = stream,
    .release_call = NULL, /* prepare_call keeps no per-call state */
};

/* ------------------------------------------------------------------------ */
/* Plugin                                                                   */
/* ------------------------------------------------------------------------ */

static int init(weir_plugin *self, const weir_api *api, const json_t *config,
                weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    /* the loader checked the schema; a host that did not gets the same rule */
    const json_t *key = json_object_get(config, "prompt_cache_key");
    if (key && !json_is_boolean(key) && !(json_is_string(key) && json_string_length(key) > 0))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, weir_plugin_id(self),
                          "config.prompt_cache_key: expected a non-empty string, true or false");
    const json_t *japi = json_object_get(config, "api");
    const char *api_name = json_string_value(japi);
    if (japi && (!api_name || (strcmp(api_name, "responses") != 0 && strcmp(api_name, "chat") != 0)))
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, weir_plugin_id(self),
                          "config.api: expected \"responses\" or \"chat\"");
    const json_t *base = json_object_get(config, "base_url");
    bool responses = api_name ? strcmp(api_name, "responses") == 0
                              : openai_responses_default(json_string_value(base));
    return pc_provider_init(self, responses ? &spec_responses : &spec, &provider_vtable, config,
                            err);
}

static const weir_plugin_desc descriptor = {
    WEIR_PLUGIN_HEADER,
    .name = "provider-openai",
    .version = "0.1.0",
    .description = "OpenAI Responses and Chat Completions (and compatible servers), streaming SSE",
    .config_schema = pc_config_schema_probe,
    .init = init,
    .fini = pc_provider_fini,
};

WEIR_PLUGIN_DEFINE(descriptor)
