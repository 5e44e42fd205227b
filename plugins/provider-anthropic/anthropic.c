/*
 * plugins/provider-anthropic/anthropic.c - the provider-anthropic plugin:
 * the Anthropic Messages API over streaming SSE.
 *
 * Config (validated against `config_schema` by the loader, re-checked here):
 *   base_url                 default https://api.anthropic.com; requests go
 *                            to {base_url}/v1/messages
 *   api_key                  sent as "x-api-key: <key>" (with
 *                            "anthropic-version: 2023-06-01"); an empty key
 *                            sends no x-api-key header (proxies that add it)
 *   headers                  extra request headers {name: value}; a name that
 *                            matches a default header replaces it
 *   options                  an object merged last into every request body
 *                            (docs/providers.md, "Options"); the keys the
 *                            provider writes itself are refused
 *   models                   {name: {context_window, max_output, options,
 *                            headers}}: model_info, and the options and
 *                            extra headers of that model's requests
 *                            (beats the model table)
 *   connect_timeout_ms       default 10000
 *   stream_idle_timeout_ms   default 300000
 *   stream_total_timeout_ms  default 1800000 (30 minutes; 0 = none)
 *
 * Config parsing, headers, model_info, prepare_call and the HTTP call are
 * shared with provider-openai (plugins/provider-common/provider_host.c);
 * this file holds what is Anthropic's own.  One attempt per `stream` call,
 * no hidden retries.  The API key and header values never appear in chunks,
 * failures or log lines, nor does a server's echo of them (scrubbed:
 * docs/providers.md, "Secrets").
 */
#include <string.h>

#include "weir/plugin.h"

#include "anthropic.h"
#include "provider_host.h"

#define DEFAULT_MAX_TOKENS 4096

static const char *const default_headers[][2] = {
    {"Content-Type", "application/json"},
    {"Accept", "text/event-stream"},
    {"anthropic-version", "2023-06-01"},
};

static const pc_spec spec = {
    .plugin = "provider-anthropic",
    .default_base_url = "https://api.anthropic.com",
    .path = "/v1/messages",
    .headers = default_headers,
    .nheaders = sizeof default_headers / sizeof default_headers[0],
    .key_header = "x-api-key",
    .key_prefix = "",
    .max_temperature = 1,
    .base_url_env = "ANTHROPIC_BASE_URL",
    .owned_keys = anthropic_owned_keys,
};

/* ------------------------------------------------------------------------ */
/* Provider callbacks                                                       */
/* ------------------------------------------------------------------------ */

static int prepare_call(void *self, const json_t *config, weir_signal *signal, void **call,
                        weir_error *err) {
    return pc_prepare_call(&spec, self, config, signal, call, err);
}

static int on_event(void *user_data, const char *event, const char *data, size_t len) {
    return anthropic_decoder_event(user_data, event, data, len);
}

static int decoder_end(void *decoder, json_t *failure, bool aborted) {
    return anthropic_decoder_end(decoder, failure, aborted);
}

static bool decoder_done(void *decoder) { return anthropic_decoder_done(decoder); }

static const pc_codec codec = {on_event, decoder_end, decoder_done};

/* max_tokens when the request has none: the model's max_output (the row's
 * `models`, else the model table), or 4096. */
static long default_max_tokens(const pc_provider *p, const json_t *request) {
    long window, max_output;
    pc_model_limits(p, json_string_value(json_object_get(request, "model")), &window,
                    &max_output);
    return max_output > 0 ? max_output : DEFAULT_MAX_TOKENS;
}

static int stream(void *self, void *call, const json_t *request, weir_stream *st) {
    (void)call;
    const pc_provider *p = self;
    if (!p || !st)
        return WEIR_E_INVAL;
    pc_sink sink = {st, p};
    anthropic_decoder *d = anthropic_decoder_new(p->id, pc_emit_chunk, &sink);
    if (!d)
        return WEIR_E_NOMEM;
    char msg[512];
    pc_memo *memo = pc_cache_memo_take(p->cache);
    json_t *options = NULL;
    pc_extra extra = {NULL, false};
    int built = pc_call_options(p, request, &options, msg, sizeof msg);
    extra.options = options;
    if (built == 0)
        built = anthropic_request_build_ex(request, &extra, default_max_tokens(p, request), p->cache,
                                               memo, msg, sizeof msg);
    const char *model = json_string_value(json_object_get(request, "model"));
    if (built == 0 && extra.dropped_temperature)
        pc_warn_dropped_temperature(p, model);
    json_decref(options);
    int rc = pc_stream_run(p, st, model, built == 0 ? memo->text.p : NULL,
                           built == 0 ? memo->text.len : 0, msg, sizeof msg, d, &codec);
    pc_cache_memo_give(p->cache, memo); /* the next step's body starts from this one */
    anthropic_decoder_free(d);
    return rc;
}

static const weir_provider provider_vtable = {
    .struct_size = sizeof(weir_provider),
    .model_info = pc_model_info,
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
    return pc_provider_init(self, &spec, &provider_vtable, config, err);
}

static const weir_plugin_desc descriptor = {
    WEIR_PLUGIN_HEADER,
    .name = "provider-anthropic",
    .version = "0.1.0",
    .description = "Anthropic Messages API, streaming SSE",
    .config_schema = pc_config_schema,
    .init = init,
    .fini = pc_provider_fini,
};

WEIR_PLUGIN_DEFINE(descriptor)
