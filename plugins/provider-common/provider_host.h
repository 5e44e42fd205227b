/*
 * plugins/provider-common/provider_host.h - the host-facing parts shared by
 * the HTTP provider plugins: config parsing (base_url, api_key, headers,
 * models, timeouts), the request headers, model_info, prepare_call and one
 * streamed HTTP call.  What differs between providers is a pc_spec.
 * model_info answers from the row's `models` config, else from what the
 * server reports (provider-openai's window probe), else from the shipped
 * model table (model_table.h).
 *
 * Not a plugin: each provider lists provider_host.c among its own sources
 * (it calls the host through the plugin's weir_api table, so it is not
 * compiled into unit tests).  Symbols are plugin-private (hidden
 * visibility).
 */
#ifndef WEIR_PROVIDER_HOST_H
#define WEIR_PROVIDER_HOST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "provider_cache.h"
#include "provider_common.h"
#include "weir/plugin.h"

/** What sets one HTTP provider apart.  Static data of the plugin. */
typedef struct pc_spec {
    const char *plugin;           /* plugin name: err->plugin before the row id is known */
    const char *default_base_url; /* when the config has no base_url */
    const char *path;             /* appended to base_url: the request URL */
    const char *const (*headers)[2]; /* default {name, value} headers */
    size_t nheaders;
    const char *key_header;       /* the header that carries api_key */
    const char *key_prefix;       /* put before the key in it ("Bearer " or "") */
    int max_temperature;          /* call config temperature is 0..max */
    bool probe;                   /* the server may report windows (GET /models, /props):
                                     the config takes probe_windows, probe_timeout_ms */
    const char *base_url_env;     /* the variable the default deployment takes base_url
                                     from (OPENAI_BASE_URL), named when the server is
                                     unreachable and it holds base_url; NULL: none */
    const char *const *owned_keys; /* the body members the provider writes itself
                                      (NULL-terminated): refused in `options` */
} pc_spec;

/** The request headers of one models.<id> entry that has `headers`. */
typedef struct pc_model_headers {
    char *model;    /* the models key (owned) */
    char **headers; /* NULL-terminated "Name: value" (owned; holds the key) */
} pc_model_headers;

/** The (row, model) pairs already warned about (pc_warn_dropped_temperature). */
typedef struct pc_warned {
    pthread_mutex_t mu;
    json_t *seen; /* {model: true} (owned) */
} pc_warned;

/** The window probe's state of one row (provider_host.c). */
typedef struct pc_probe pc_probe;

/**
 * One configured row.  Immutable after init, so shared by every agent thread
 * (the probe's state changes under its own mutex).
 */
typedef struct pc_provider {
    const pc_spec *spec;
    weir_plugin *plugin; /* the instance (borrowed): its log */
    char *id;       /* the row id: the provider name in failures */
    char *base;     /* base_url without its trailing '/' */
    char *url;      /* {base_url}{spec->path} */
    char **headers; /* NULL-terminated "Name: value" (holds the key) */
    char **probe_headers; /* the same for the probe's GETs: the config's headers and
                             the key, "Accept: application/json" (NULL: no probe) */
    pc_secrets secrets; /* the values the config schema marks secret (api_key, the
                           Authorization, x-api-key... headers): scrubbed from
                           what the server sends back (provider_common.h) */
    json_t *models; /* {name: {context_window?, max_output?, price?, options?, headers?}} */
    json_t *options; /* the row's `options` (owned), or NULL */
    json_t *config;  /* a copy of the row's config (owned, an object): the members a
                        provider reads itself (provider-openai's prompt_cache_key) */
    pc_model_headers *model_headers; /* the models that have headers (owned) */
    size_t nmodel_headers;
    pc_warned *warned; /* the models told of a dropped temperature (owned;
                          changes under its own mutex) */
    long connect_timeout_ms, idle_timeout_ms;
    long total_timeout_ms; /* 0: no overall deadline */
    pc_cache *cache; /* translated request pieces (thread-safe itself) */
    long probe_timeout_ms; /* the whole probe's bound */
    pc_probe *probe;       /* NULL: model_info never asks the server */
} pc_provider;

/* The window probe's defaults: on unless base_url is the spec's default
 * (api.openai.com reports no windows); 2 s for both GETs together. */
#define PC_PROBE_TIMEOUT_MS 2000

/* The bounds of each row's request cache (provider_cache.h). */
#define PC_CACHE_MAX_ENTRIES 16384
#define PC_CACHE_MAX_BYTES (64u << 20)

/** The decoder calls pc_stream_run makes, on the provider's own decoder. */
typedef struct pc_codec {
    weir_sse_fn on_event;                                    /* one SSE event */
    int (*end)(void *decoder, json_t *failure, bool aborted); /* steals failure */
    bool (*done)(void *decoder);                             /* finish emitted */
} pc_codec;

/** The provider config schema (JSON text) of a provider without a probe. */
extern const char pc_config_schema[];

/** The same plus probe_windows and probe_timeout_ms (a spec with `probe`). */
extern const char pc_config_schema_probe[];
/** pc_config_schema plus `cache` on the row and each models.<id> (provider-anthropic). */
extern const char pc_config_schema_cache[];

/**
 * Fill `err` (may be NULL): `code`, `plugin` (borrowed, not NULL), no hook,
 * the printf-formatted text.  @return `code`.  Thread-safe.
 */
int pc_set_err(weir_error *err, int code, const char *plugin, const char *fmt, ...)
    WEIR_PRINTF(4, 5);

/**
 * The plugin's init after WEIR_PLUGIN_INIT_API: parse `config` (borrowed)
 * as described by `spec` (static), register `vtable` with the new row as its
 * self and keep the row as the plugin data (freed by pc_provider_fini).
 * @return WEIR_OK, or a status with `err` naming the config field.
 */
int pc_provider_init(weir_plugin *self, const pc_spec *spec, const weir_provider *vtable,
                     const json_t *config, weir_error *err);

/** The plugin's fini: free the row kept by pc_provider_init. */
void pc_provider_fini(weir_plugin *self);

/**
 * The limits of `model` (borrowed) for the row `p`, each field on its own:
 * context_window from the row's `models` entry, else the window the server
 * reported (a spec with `probe`: asked once per row, on the first call that
 * needs it, bounded by probe_timeout_ms; callers wait for a probe under way),
 * else the model table; max_output from the `models` entry, else the table,
 * cut to the context_window in use.  0 for what is unknown.  Thread-safe.
 */
void pc_model_limits(const pc_provider *p, const char *model, long *context_window,
                     long *max_output);

/**
 * weir_provider.model_info: pc_model_limits as a new object
 * {"context_window"?: N, "max_output"?: N, "price"?: {input, cached_input,
 * cache_write_5m, cache_write_1h, output, source}} (what is known; prices in
 * USD per million tokens, the row's models.<id>.price over the model
 * table's, source "config" or the table's source and date), or NULL when
 * nothing is known.  Thread-safe; may block up to probe_timeout_ms once per
 * row (the probe).
 */
json_t *pc_model_info(void *self, const char *model);

/**
 * weir_provider.prepare_call for the provider `self` (a pc_provider, may be
 * NULL: errors then name spec->plugin): checks the call config (model,
 * max_tokens, temperature up to spec->max_temperature).  Keeps no per-call
 * state (*call = NULL).  Thread-safe.
 */
int pc_prepare_call(const pc_spec *spec, void *self, const json_t *config, weir_signal *signal,
                    void **call, weir_error *err);

/** Where a provider's decoder sends its chunks (see pc_emit_chunk). */
typedef struct pc_sink {
    weir_stream *st;        /* the call's stream (borrowed) */
    const pc_provider *p;   /* the row, for its secrets (borrowed) */
} pc_sink;

/**
 * A pc_emit_fn that hands chunks to the stream of the pc_sink `user_data`:
 * the finish chunk (the only one that carries server text other than the
 * model's own content: failure messages, quoted bodies and in-band error
 * events) is first scrubbed of the row's secrets.  A finish that cannot be
 * scrubbed (out of memory) is dropped rather than sent with a secret.
 */
int pc_emit_chunk(void *user_data, json_t *chunk);

/**
 * The options of `request` (borrowed) for the row `p`: the row's `options`,
 * then `models.<model>.options` over them, then the request's own `options`
 * (the call config's, from agent/request) over both, each merged as a JSON
 * Merge Patch (provider_options.h).  *out receives a new object.
 * @return 0, or -1 with `msg` set (the request's options are not an object,
 *         or out of memory) and *out NULL.  Thread-safe.
 */
int pc_call_options(const pc_provider *p, const json_t *request, json_t **out, char *msg,
                    size_t size);

/**
 * Log one warning, the first time only for this row and `model` (borrowed),
 * that the model's table rule kept the call config's temperature out of its
 * requests.  Thread-safe.
 */
void pc_warn_dropped_temperature(const pc_provider *p, const char *model);

/**
 * One non-streamed call: POST the `len` bytes of JSON `text` (borrowed) to
 * {base_url}`path` with the request headers of `model`, on the stream's
 * connection and under its signal (provider-openai's POST /responses/compact).
 * On a 2xx JSON answer *body (owned, NUL-terminated, its first 64 KiB: the
 * host collects no more) and *body_len; otherwise *failure (new reference:
 * the HTTP error, transport failure or ABORTED, as pc_stream_run reports it).
 * @return WEIR_OK with exactly one of *body and *failure set, WEIR_E_NOMEM
 *         when out of memory (neither set).
 */
int pc_post_json(const pc_provider *p, weir_stream *st, const char *model, const char *path,
                 const char *text, size_t len, char **body, size_t *body_len,
                 json_t **failure);

/**
 * One streamed call: POST the `len` bytes of body `text` (borrowed; NULL when
 * translation failed, then `msg` says why) to the row's URL, with the request
 * headers of `model` (borrowed, may be NULL: its models.<id>.headers over the
 * row's, else the row's), and feed the SSE
 * events to `decoder` (borrowed) through `codec`, then end it with the
 * failure of the transfer, if any.  `msg` (msg_size bytes) is scratch.
 * @return WEIR_OK when exactly one finish chunk went out, WEIR_E_NOMEM when
 *         it could not be built.
 */
int pc_stream_run(const pc_provider *p, weir_stream *st, const char *model, const char *text,
                  size_t len, char *msg, size_t msg_size, void *decoder, const pc_codec *codec);

/**
 * pc_stream_run with one more request header, `extra` ("Name: value",
 * borrowed; NULL: none): joined with a comma to a header of the same name
 * (a list-valued header such as anthropic-beta), else added.
 */
int pc_stream_run_ex(const pc_provider *p, weir_stream *st, const char *model, const char *extra,
                     const char *text, size_t len, char *msg, size_t msg_size, void *decoder,
                     const pc_codec *codec);

#endif /* WEIR_PROVIDER_HOST_H */
