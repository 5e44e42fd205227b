/*
 * core/store.h - the session stores (weir/store.h, docs/stores.md): the
 * built-in file and memory stores and the stores plugin rows register.
 * Owner: core/store.c (registry), core/store_file.c, core/store_memory.c.
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

/* api->store_register (core/api.c). */
int weir__plugin_store_register(weir_plugin *self, const weir_store *store, void *self_ptr);

/*
 * The store of deployment `host` named `name` ("file", "memory", or a row id
 * that registered one; NULL: "file") into *out.  WEIR_E_NOT_FOUND when no
 * row of the host registered `name`.
 */
int weir__store_lookup(const weir_host *host, const char *name, weir__store_ref *out);

/* Drop the stores the rows of `host` registered (weir_host_destroy). */
void weir__store_forget_host(const weir_host *host);

#endif
