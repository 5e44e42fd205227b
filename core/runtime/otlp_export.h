/*
 * core/runtime/otlp_export.h - the live OTLP/HTTP exporter of a host
 * (docs/telemetry.md): a bounded queue of spans, one thread that sends
 * them in batches as an ExportTraceServiceRequest (JSON) with libcurl.
 */
#ifndef WEIR_CORE_OTLP_EXPORT_H
#define WEIR_CORE_OTLP_EXPORT_H

#include "common.h"
#include "otlp.h"

typedef struct weir__otlp_exporter weir__otlp_exporter;

/*
 * Start an exporter with `settings` (taken: the exporter owns them, and
 * *settings is zeroed).  WEIR_E_NOMEM, WEIR_E_INTERNAL (no thread, no
 * libcurl).
 */
int weir__otlp_exporter_create(weir__otlp_settings *settings, weir__otlp_exporter **out,
                               weir_error *err);

/*
 * Queue the spans of `spans` (borrowed array, emptied: its spans move to
 * the queue, which then holds the only reference to each).  Never blocks
 * on the network: a span that finds the queue full is dropped and
 * counted.  Thread-safe.
 */
void weir__otlp_exporter_push(weir__otlp_exporter *x, json_t *spans);

/* Counts (any pointer may be NULL).  Thread-safe. */
void weir__otlp_exporter_counts(weir__otlp_exporter *x, uint64_t *queued, uint64_t *sent,
                                uint64_t *dropped);

/*
 * Stop: the thread ends the export in flight, sends what is queued once
 * more (bounded by timeout_ms; not when the last export failed: those spans
 * are dropped), then ends; new drops are reported on stderr.  NULL does
 * nothing.
 */
void weir__otlp_exporter_destroy(weir__otlp_exporter *x);

#endif
