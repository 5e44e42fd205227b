/*
 * weir/errors.h - status codes and error detail.
 *
 * One X-macro, WEIR_STATUS_MAP, generates the enum, the message table and the
 * name table.  Values are never renumbered; new codes are added at the end.
 * Every function returning weir_status is thread-safe to interpret: the
 * strings returned by weir_strerror() and weir_status_name() are static.
 */
#ifndef WEIR_ERRORS_H
#define WEIR_ERRORS_H

#include <stddef.h>

#include "weir/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, value, message) */
#define WEIR_STATUS_MAP(XX)                                                  \
    XX(OK, 0, "success")                                                     \
    XX(E_NOMEM, 1, "out of memory")                                          \
    XX(E_INVAL, 2, "invalid argument")                                       \
    XX(E_IO, 3, "input/output error")                                        \
    XX(E_CONFIG, 4, "invalid deployment configuration")                     \
    XX(E_PLUGIN_OPEN, 5, "plugin file could not be opened")                 \
    XX(E_PLUGIN_ENTRY, 6, "plugin has no entry point")                      \
    XX(E_PLUGIN_ABI, 7, "plugin ABI is not compatible")                     \
    XX(E_PLUGIN_INIT, 8, "plugin init failed")                              \
    XX(E_DUPLICATE, 9, "duplicate name")                                     \
    XX(E_TOO_LATE, 10, "registration is only allowed during init")          \
    XX(E_HOOK_ORDER, 11, "hook order cannot be satisfied")                  \
    XX(E_HOOK_FAILED, 12, "hook listener failed")                           \
    XX(E_HOOK_RESULT, 13, "hook listener returned an invalid result")       \
    XX(E_NOT_FOUND, 14, "not found")                                         \
    XX(E_LOG_CORRUPT, 15, "session log is corrupt")                         \
    XX(E_LOG_REJECTED, 16, "event rejected by the session log")             \
    XX(E_STATE, 17, "operation not valid in the current state")             \
    XX(E_CANCELLED, 18, "cancelled")                                         \
    XX(E_PROVIDER, 19, "model provider failure")                            \
    XX(E_TOOL, 20, "tool failure")                                           \
    XX(E_UNSUPPORTED, 21, "not supported")                                   \
    XX(E_INTERNAL, 22, "internal error")                                     \
    XX(E_PLUGIN_CONFIG, 23, "invalid plugin config")                        \
    XX(E_TIMEOUT, 24, "timed out")                                           \
    XX(E_BUSY, 25, "resource is in use by another writer")                    \
    XX(E_LIMIT, 26, "limit reached")                                         \
    XX(E_LEASE_LOST, 27, "the session's lease was taken over by another writer") \
    XX(E_REFUSED, 28, "refused by a plugin")

/** Library status codes.  WEIR_OK is 0; errors are positive. Since: 0.1 */
typedef enum weir_status {
#define WEIR__STATUS_ENUM(name, value, msg) WEIR_##name = value,
    WEIR_STATUS_MAP(WEIR__STATUS_ENUM)
#undef WEIR__STATUS_ENUM
    WEIR_STATUS_COUNT_ /* never use */
} weir_status;

/**
 * Error detail, filled by functions that take a `weir_error *err`.
 * The caller owns the struct (usually on its stack); NULL is always allowed.
 * `plugin`, `hook` and `text` are NUL-terminated and may be empty.
 * Since: 0.1
 */
typedef struct weir_error {
    weir_status code;
    char plugin[64]; /* plugin row id or name involved, if any */
    char hook[64];   /* hook involved, if any */
    char text[1024]; /* full human-readable message */
} weir_error;

/** A static message for `status`; never NULL. Thread-safe. Since: 0.1 */
WEIR_API const char *weir_strerror(int status);

/** The symbolic name ("E_NOMEM") for `status`; never NULL. Since: 0.1 */
WEIR_API const char *weir_status_name(int status);

/** Reset `err` to WEIR_OK with empty strings. NULL is a no-op. Since: 0.1 */
WEIR_API void weir_error_clear(weir_error *err);

#ifdef __cplusplus
}
#endif
#endif /* WEIR_ERRORS_H */
