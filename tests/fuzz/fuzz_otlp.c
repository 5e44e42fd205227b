/*
 * tests/fuzz/fuzz_otlp.c - libFuzzer target for the telemetry span builder
 * (core/format/otlp.c: weir_trace_*) and the OTEL_* settings it reads.
 *
 * The input's first line is the value of OTEL_EXPORTER_OTLP_HEADERS and of
 * OTEL_EXPORTER_OTLP_ENDPOINT for one weir__otlp_settings_resolve; the rest
 * is a session's log envelopes, one JSON object a line, fed to a span
 * builder as `weir log --otlp` feeds it (a hostile or damaged log), with
 * content capture on.  Oracles: no crash, leak or UB; a resolve fails only
 * with E_CONFIG and a message; every span the builder gives is an object
 * with a 32-hex-digit traceId and a 16-hex-digit spanId; the export request
 * of all of them is made.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "otlp.h"
#include "weir/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool hex_of(const json_t *v, size_t len) {
    const char *s = json_string_value(v);
    if (!s || strlen(s) != len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!strchr("0123456789abcdef", s[i]))
            return false;
    return true;
}

/* Check and keep the spans of one call (stolen). */
static void take(json_t *all, json_t *spans) {
    if (!json_is_array(spans))
        abort();
    size_t i;
    json_t *span;
    json_array_foreach(spans, i, span) {
        if (!hex_of(json_object_get(span, "traceId"), 32) ||
            !hex_of(json_object_get(span, "spanId"), 16))
            abort();
    }
    if (json_array_extend(all, spans) != 0)
        abort();
    json_decref(spans);
}

static void settings(const char *line) {
    setenv("OTEL_EXPORTER_OTLP_HEADERS", line, 1);
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", line, 1);
    weir__otlp_settings s;
    weir_error err;
    weir_error_clear(&err);
    int rc = weir__otlp_settings_resolve(NULL, &s, &err);
    if (rc == WEIR_OK)
        weir__otlp_settings_free(&s);
    else if ((rc != WEIR_E_CONFIG && rc != WEIR_E_NOMEM) || !err.text[0])
        abort();
    unsetenv("OTEL_EXPORTER_OTLP_HEADERS");
    unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *rest = strchr(text, '\n');
    if (rest)
        *rest++ = '\0';
    if (strlen(text) == (rest ? (size_t)(rest - 1 - text) : size)) /* no NUL inside */
        settings(text);

    json_t *config = json_pack("{s:{s:b}}", "telemetry", "capture_content", 1);
    weir_trace *t = NULL;
    weir_error err;
    if (!config || weir_trace_create("fuzz-session", config, &t, &err) != WEIR_OK)
        abort();
    json_decref(config);
    json_t *all = json_array();
    const char *p = rest ? rest : "";
    const char *end = text + size;
    while (rest && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        json_error_t jerr;
        json_t *ev = json_loadb(p, n, JSON_REJECT_DUPLICATES, &jerr);
        if (ev) {
            json_t *spans = NULL;
            int rc = weir_trace_add(t, ev, &spans, &err);
            if (rc == WEIR_OK)
                take(all, spans);
            else if (rc != WEIR_E_INVAL && rc != WEIR_E_NOMEM)
                abort();
            json_decref(ev);
        }
        p += n + 1;
    }
    json_t *spans = NULL;
    if (weir_trace_finish(t, &spans, &err) == WEIR_OK)
        take(all, spans);
    json_t *req = weir_trace_request(t, all);
    if (!req)
        abort();
    json_decref(req);
    json_decref(all);
    weir_trace_destroy(t);
    free(text);
    return 0;
}
