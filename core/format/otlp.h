/*
 * core/format/otlp.h - OpenTelemetry: the telemetry settings of a deployment
 * (config and OTEL_* variables) and the OTLP/JSON shapes the span builder
 * (weir_trace_*, weir/host.h) and the exporter (core/runtime/otlp_export.c)
 * share.  docs/telemetry.md.
 */
#ifndef WEIR_CORE_OTLP_H
#define WEIR_CORE_OTLP_H

#include "common.h"
#include "weir/host.h"

/* telemetry defaults (docs/telemetry.md) */
#define WEIR__OTLP_DEFAULT_ENDPOINT "http://localhost:4318"
#define WEIR__OTLP_MAX_QUEUE 2048
#define WEIR__OTLP_BATCH_MS 1000
#define WEIR__OTLP_TIMEOUT_MS 2000
#define WEIR__OTLP_SERVICE "weir"

/* The resolved `telemetry` section: config over environment over defaults. */
typedef struct weir__otlp_settings {
    bool enabled;
    bool capture_content;
    char *url;          /* the traces URL: {endpoint}/v1/traces, or the traces endpoint as given */
    json_t *headers;    /* owned: {name: value} (values may be secrets: never print them) */
    char *service_name; /* owned */
    long max_queue, batch_ms, timeout_ms;
} weir__otlp_settings;

/*
 * Resolve `config`'s (borrowed, the composed deployment; may be NULL)
 * telemetry section with the OTEL_EXPORTER_OTLP_* and OTEL_SERVICE_NAME
 * variables.  WEIR_E_CONFIG naming the variable when one is not valid (an
 * endpoint that is not an http(s) URL, a header without '='); WEIR_E_NOMEM.
 * Free with weir__otlp_settings_free().
 */
int weir__otlp_settings_resolve(const json_t *config, weir__otlp_settings *out, weir_error *err);
void weir__otlp_settings_free(weir__otlp_settings *s);

/* Whether `s` is an http:// or https:// URL with a host. */
bool weir__otlp_url_valid(const char *s);

/* New reference: an ExportTraceServiceRequest of `spans` (borrowed) for
 * service `service`, or NULL when out of memory. */
json_t *weir__otlp_request(const char *service, const json_t *spans);

#endif
