/*
 * core/log/store.h - the session stores as the log uses them (weir/store.h,
 * docs/stores.md): the built-in file and memory stores.  Owner:
 * core/log/store_file.c, core/log/store_memory.c; the registry of the
 * stores plugin rows register is the host's (core/runtime/host_int.h).
 */
#ifndef WEIR_CORE_STORE_H
#define WEIR_CORE_STORE_H

#include "common.h"
#include "weir/store.h"


/* A store and its self pointer, as the log uses it. */
typedef struct weir__store_ref {
    const weir_store *vt; /* borrowed: static, or the registry's copy */
    void *self;
} weir__store_ref;

/* The built-in JSONL file store (the default) and the memory store. */
weir__store_ref weir__store_file(void);
weir__store_ref weir__store_memory(void);

#endif
