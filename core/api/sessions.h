/*
 * core/api/sessions.h - the host's shared session store, as the calls on it
 * find it.  Owner: core/api/store_ops.c; used by core/api/sessions.c.
 */
#ifndef WEIR_CORE_SESSIONS_H
#define WEIR_CORE_SESSIONS_H

#include "common.h"
#include "store.h"

/*
 * The store `host`'s session.store names into *out and its name into *name
 * (borrowed; "file" when unset).  `what` names the call in errors:
 * WEIR_E_INVAL without a host, WEIR_E_CONFIG when no row provides the store.
 */
int weir__session_store(const weir_host *host, const char *what, const char **name,
                        weir__store_ref *out, weir_error *err);

#endif
