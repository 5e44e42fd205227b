/*
 * core/surface.h - the model-visible surface and message derivation
 * (DESIGN §5, reference §3.3).  Pure functions plus an incremental fold.
 * Owner: core/surface.c.
 */
#ifndef WEIR_CORE_SURFACE_H
#define WEIR_CORE_SURFACE_H

#include "common.h"

typedef struct weir__surface weir__surface;

bool weir__is_surface_type(const char *type);

int weir__surface_create(weir__surface **out);
void weir__surface_destroy(weir__surface *s);

/*
 * Validate `event` (a full envelope, borrowed) against the current surface
 * without changing it.  0 or -1 with a message.
 */
int weir__surface_check(const weir__surface *s, const json_t *event, char *msg,
                        size_t msg_size);
/* Apply a validated event (borrowed; the surface keeps a reference). */
int weir__surface_apply(weir__surface *s, const json_t *event);

size_t weir__surface_len(const weir__surface *s);
size_t weir__surface_node(const weir__surface *s, size_t i); /* seq of node i */
uint64_t weir__surface_replace_generation(const weir__surface *s);

/* New reference: the message an event contributes, or NULL for none. */
json_t *weir__derive_event_message(const json_t *event);
/* New reference: all derived messages in surface order. */
json_t *weir__surface_derive(const weir__surface *s);

#endif
