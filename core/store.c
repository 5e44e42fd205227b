/*
 * core/store.c - the session store registry (weir/store.h, docs/stores.md):
 * the built-in stores by name, and the stores plugin rows register with
 * api->store_register, kept per host until weir_host_destroy.
 */
#include <pthread.h>
#include <string.h>

#include "host_int.h"
#include "store.h"

typedef struct entry {
    struct entry *next;
    const weir_host *host;
    char *id; /* row id */
    weir_store vt; /* copy (struct_size-limited) */
    void *self;
} entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry *entries;

int weir__plugin_store_register(weir_plugin *self, const weir_store *store, void *self_ptr) {
    int rc = weir__reg_open(self, "store_register", weir__plugin_log);
    if (rc != WEIR_OK)
        return rc;
    weir_error e;
    weir_error_clear(&e);
    if (!store || store->struct_size < offsetof(weir_store, close) + sizeof store->close ||
        !store->open || !store->read || !store->buffer_free || !store->append || !store->sync ||
        !store->close) {
        weir__err(&e, WEIR_E_INVAL, self->id, NULL,
                  "store_register: open, read, buffer_free, append, sync and close are required");
        return weir__reg_fail(self, &e);
    }
    if (strcmp(self->id, "file") == 0 || strcmp(self->id, "memory") == 0) {
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                  "store_register: '%s' is the name of a built-in store", self->id);
        return weir__reg_fail(self, &e);
    }
    weir__store_ref have;
    if (weir__store_lookup(self->host, self->id, &have) == WEIR_OK) {
        weir__err(&e, WEIR_E_DUPLICATE, self->id, NULL,
                  "a store is already registered under '%s'", self->id);
        return weir__reg_fail(self, &e);
    }
    entry *en = weir__calloc(1, sizeof *en);
    if (!en || !(en->id = weir__strdup(self->id))) {
        weir__free(en);
        weir__err(&e, WEIR_E_NOMEM, self->id, NULL, "out of memory");
        return weir__reg_fail(self, &e);
    }
    size_t n = store->struct_size < sizeof en->vt ? store->struct_size : sizeof en->vt;
    memcpy(&en->vt, store, n);
    en->vt.struct_size = sizeof en->vt;
    en->host = self->host;
    en->self = self_ptr;
    pthread_mutex_lock(&mu);
    en->next = entries;
    entries = en;
    pthread_mutex_unlock(&mu);
    return WEIR_OK;
}

int weir__store_lookup(const weir_host *host, const char *name, weir__store_ref *out) {
    if (!name || strcmp(name, "file") == 0) {
        *out = weir__store_file();
        return WEIR_OK;
    }
    if (strcmp(name, "memory") == 0) {
        *out = weir__store_memory();
        return WEIR_OK;
    }
    int rc = WEIR_E_NOT_FOUND;
    pthread_mutex_lock(&mu);
    for (entry *en = entries; en; en = en->next) {
        if (en->host == host && strcmp(en->id, name) == 0) {
            *out = (weir__store_ref){.vt = &en->vt, .self = en->self};
            rc = WEIR_OK;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

void weir__store_forget_host(const weir_host *host) {
    pthread_mutex_lock(&mu);
    for (entry **pp = &entries; *pp;) {
        entry *en = *pp;
        if (en->host != host) {
            pp = &en->next;
            continue;
        }
        *pp = en->next;
        weir__free(en->id);
        weir__free(en);
    }
    pthread_mutex_unlock(&mu);
}
