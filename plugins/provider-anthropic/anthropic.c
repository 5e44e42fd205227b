/*
 * plugins/provider-anthropic/anthropic.c - the provider-anthropic plugin:
 * the Anthropic Messages API over streaming SSE.
 *
 * Config (validated against `pc_config_schema_cache` by the loader, re-checked here):
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
 *                            headers, cache}}: model_info, and the options,
 *                            extra headers and caching of that model's
 *                            requests (beats the model table and the row)
 *   cache                    prompt caching: absent (on, 5-minute TTL),
 *                            {"ttl": "5m" | "1h"}, or false (off);
 *                            anthropic_request.c places the breakpoints
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
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

/* The caching of `model`'s requests: models.<model>.cache, else the row's
 * `cache` (both checked at load: check_config). */
static pc_prompt_cache caching(const pc_provider *p, const char *model) {
    const json_t *v = json_object_get(json_object_get(p->models, model ? model : ""), "cache");
    if (!v)
        v = json_object_get(p->config, "cache");
    pc_prompt_cache c = PC_PROMPT_CACHE_5M;
    char msg[8];
    (void)anthropic_cache_parse(v, "cache", &c, msg, sizeof msg);
    return c;
}

/* The (row, model) pairs told that thinking keeps temperature out. */
static pthread_mutex_t warned_mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *warned_thinking; /* {"row\nmodel": true}; lives with the process */
static atomic_bool warned_skipped;

static void warn_thinking_temperature(const pc_provider *p, const char *model) {
    char key[512];
    snprintf(key, sizeof key, "%s\n%s", p->id, model ? model : "");
    pthread_mutex_lock(&warned_mu);
    bool first = false;
    if (!warned_thinking)
        warned_thinking = json_object();
    if (warned_thinking && !json_object_get(warned_thinking, key))
        first = json_object_set_new(warned_thinking, key, json_true()) == 0;
    pthread_mutex_unlock(&warned_mu);
    if (first)
        weir_log(p->plugin, WEIR_LOG_WARN,
                 "model \"%s\" thinks (thinking enabled or adaptive), and Anthropic takes "
                 "temperature only unset or 1 with thinking: the call config's temperature is "
                 "not sent (said once per row and model)",
                 model ? model : "");
}

/*
 * Server compaction (docs/providers.md, "Server compaction"): the
 * compact_20260112 edit of context_management, beta compact-2026-01-12, on
 * the models that support it, with a trigger at its documented minimum
 * (platform.claude.com/docs/en/build-with-claude/compaction: "Supported
 * models"; the trigger defaults to 150,000 input tokens and takes no less
 * than 50,000).  pause_after_compaction makes the reply the compaction block
 * alone (stop_reason "compaction").
 */
#define SERVER_COMPACTION "anthropic-compact-20260112"
#define COMPACT_BETA "anthropic-beta: compact-2026-01-12"
#define COMPACT_MIN_TRIGGER 50000

static bool compaction_model(const char *model) {
    static const char *const families[] = {"claude-mythos-preview", "claude-opus-4-7",
                                           "claude-opus-4-6", "claude-sonnet-4-6"};
    for (size_t i = 0; model && i < sizeof families / sizeof *families; i++)
        if (strncmp(model, families[i], strlen(families[i])) == 0)
            return true;
    return false;
}

/* pc_model_info, plus "server_compaction" on the models that compact. */
static json_t *model_info(void *self, const char *model) {
    json_t *info = pc_model_info(self, model);
    if (!compaction_model(model))
        return info;
    if (!info)
        info = json_object();
    if (info &&
        json_object_set_new(info, "server_compaction", json_string(SERVER_COMPACTION)) != 0) {
        json_decref(info);
        info = NULL;
    }
    return info;
}

/* The options of a compaction request: context_management's compaction
 * edit over the call's (an edit list of the options gives way).  0, or -1
 * with `msg` set. */
static int compaction_options(json_t **options, char *msg, size_t size) {
    if (!*options && !(*options = json_object()))
        return pc_bad(msg, size, "out of memory");
    json_t *cm = json_pack("{s:[{s:s, s:{s:s, s:i}, s:b}]}", "edits", "type", "compact_20260112",
                           "trigger", "type", "input_tokens", "value", COMPACT_MIN_TRIGGER,
                           "pause_after_compaction", 1);
    return cm && json_object_set_new(*options, "context_management", cm) == 0
               ? 0
               : pc_bad(msg, size, "out of memory");
}

static int stream(void *self, void *call, const json_t *request, weir_stream *st) {
    (void)call;
    const pc_provider *p = self;
    if (!p || !st)
        return WEIR_E_INVAL;
    pc_sink sink = {st, p};
    const char *model = json_string_value(json_object_get(request, "model"));
    anthropic_decoder *d = anthropic_decoder_new(p->id, pc_emit_chunk, &sink);
    if (!d || anthropic_decoder_set_model(d, model) != 0) {
        anthropic_decoder_free(d);
        return WEIR_E_NOMEM;
    }
    char msg[512];
    pc_memo *memo = pc_cache_memo_take(p->cache);
    json_t *options = NULL;
    pc_extra extra = {NULL, false, caching(p, model), 0};
    int built = pc_call_options(p, request, &options, msg, sizeof msg);
    const char *purpose = json_string_value(json_object_get(request, "compaction"));
    bool server = purpose && strcmp(purpose, "server") == 0;
    if (built == 0 && server && !compaction_model(model))
        built = pc_bad(msg, sizeof msg,
                       "server compaction: model \"%s\" has none (compact_20260112 supports "
                       "claude-mythos-preview, claude-opus-4-7, claude-opus-4-6 and "
                       "claude-sonnet-4-6)",
                       model ? model : "");
    if (built == 0 && server)
        built = compaction_options(&options, msg, sizeof msg);
    extra.options = options;
    if (built == 0)
        built = anthropic_request_build_ex(request, &extra, default_max_tokens(p, request), p->cache,
                                               memo, msg, sizeof msg);
    if (built == 0 && extra.dropped_temperature)
        warn_thinking_temperature(p, model);
    if (extra.skipped_continuations > 0 && !atomic_exchange(&warned_skipped, true))
        weir_log(p->plugin, WEIR_LOG_WARN,
                 "%zu reasoning block(s) carry a continuation without \"signature\" or "
                 "\"redacted_data\": not sent back to Anthropic (said once)",
                 extra.skipped_continuations);
    json_decref(options);
    /* below the minimum trigger the API would not compact but answer */
    if (built == 0 && server && memo->text.len / 4 < COMPACT_MIN_TRIGGER)
        built = pc_bad(msg, sizeof msg,
                       "server compaction: the history (about %zu tokens) is below the "
                       "%d-token minimum trigger of compact_20260112",
                       memo->text.len / 4, COMPACT_MIN_TRIGGER);
    int rc = pc_stream_run_ex(p, st, model, server ? COMPACT_BETA : NULL,
                              built == 0 ? memo->text.p : NULL, built == 0 ? memo->text.len : 0,
                              msg, sizeof msg, d, &codec);
    pc_cache_memo_give(p->cache, memo); /* the next step's body starts from this one */
    anthropic_decoder_free(d);
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

/*
 * What the row's config must keep besides what provider_host.c checks, at
 * load: `cache` (the row's and each model's), and the thinking rules of
 * anthropic_thinking_check on the row's options and on each model's (merged
 * over the row's, with the model's max_output, else the table's, as the
 * max_tokens it gets by default).
 */
static int check_config(weir_plugin *self, const json_t *config, weir_error *err) {
    const char *id = weir_plugin_id(self);
    char msg[512], where[300];
    pc_prompt_cache c;
    const json_t *row = json_object_get(config, "options");
    if (anthropic_cache_parse(json_object_get(config, "cache"), "config.cache", &c, msg,
                              sizeof msg) != 0 ||
        anthropic_thinking_check(row, NULL, 0, "config.options", msg, sizeof msg) != 0)
        return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, id, "%s", msg);
    const char *model;
    json_t *m;
    json_object_foreach(json_object_get(config, "models"), model, m) {
        snprintf(where, sizeof where, "config.models.%s.cache", model);
        if (anthropic_cache_parse(json_object_get(m, "cache"), where, &c, msg, sizeof msg) != 0)
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, id, "%s", msg);
        json_t *merged = pc_options_merge(json_is_object(row) ? row : NULL,
                                          json_is_object(json_object_get(m, "options"))
                                              ? json_object_get(m, "options")
                                              : NULL);
        if (!merged)
            continue; /* not objects: provider_host.c names them */
        const json_t *mo = json_object_get(m, "max_output");
        const pc_model_entry *e = pc_model_table_find(model);
        long max_tokens = json_is_integer(mo) ? (long)json_integer_value(mo)
                          : e && e->max_output > 0 ? e->max_output
                                                   : 4096;
        snprintf(where, sizeof where, "config.models.%s.options", model);
        int bad = anthropic_thinking_check(merged, model, max_tokens, where, msg, sizeof msg);
        json_decref(merged);
        if (bad)
            return pc_set_err(err, WEIR_E_PLUGIN_CONFIG, id, "%s", msg);
    }
    return WEIR_OK;
}

static int init(weir_plugin *self, const weir_api *api, const json_t *config,
                weir_error *err) {
    WEIR_PLUGIN_INIT_API(api);
    int rc = check_config(self, config, err);
    return rc == WEIR_OK ? pc_provider_init(self, &spec, &provider_vtable, config, err) : rc;
}

static const weir_plugin_desc descriptor = {
    WEIR_PLUGIN_HEADER,
    .name = "provider-anthropic",
    .version = "0.1.0",
    .description = "Anthropic Messages API, streaming SSE",
    .config_schema = pc_config_schema_cache,
    .init = init,
    .fini = pc_provider_fini,
};

WEIR_PLUGIN_DEFINE(descriptor)
