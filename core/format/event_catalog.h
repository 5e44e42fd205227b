/*
 * core/format/event_catalog.h - the event catalog: the one table of the core's
 * event types (durable and live) and their data fields.  docs/events.md
 * (`weir events --markdown`), `weir events` and the reserved names a plugin
 * may not register come from it.  Owner: core/format/event_catalog.c.
 */
#ifndef WEIR_CORE_EVENT_CATALOG_H
#define WEIR_CORE_EVENT_CATALOG_H

#include <stddef.h>

typedef enum weir__event_kind {
    WEIR__EVENT_DURABLE = 0,   /* a core type of the session log */
    WEIR__EVENT_IGNORABLE = 1, /* a durable core event written "ignorable":true */
    WEIR__EVENT_LIVE = 2       /* delivered only: emit hook + on_event {type, time, data} */
} weir__event_kind;

typedef struct weir__event_def {
    const char *type;    /* "turn/end" */
    weir__event_kind kind;
    const char *data;    /* the data fields, human-readable */
    const char *summary; /* one line: when it happens */
} weir__event_def;

/* A new session's first event: the embedder's session header (ignorable). */
#define WEIR__SESSION_START_EVENT "session/start"

/* The catalog, in documentation order.  Static, thread-safe. */
extern const weir__event_def weir__event_catalog[];
extern const size_t weir__event_catalog_len;

/* Catalog entry by type (borrowed, static), or NULL.  Thread-safe. */
const weir__event_def *weir__event_find(const char *type);

#endif
