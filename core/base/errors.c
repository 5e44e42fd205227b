/*
 * core/base/errors.c - the status tables (from WEIR_STATUS_MAP) and error filling.
 */
#include <stdio.h>
#include <string.h>

#include "common.h"

const char *weir_strerror(int status) {
    switch (status) {
#define XX(name, value, msg) \
    case value:              \
        return msg;
        WEIR_STATUS_MAP(XX)
#undef XX
    default:
        return "unknown status";
    }
}

const char *weir_status_name(int status) {
    switch (status) {
#define XX(name, value, msg) \
    case value:              \
        return #name;
        WEIR_STATUS_MAP(XX)
#undef XX
    default:
        return "UNKNOWN";
    }
}

void weir_error_clear(weir_error *err) {
    if (!err)
        return;
    err->code = WEIR_OK;
    err->plugin[0] = err->hook[0] = err->text[0] = '\0';
}

int weir__verr(weir_error *err, int code, const char *plugin, const char *hook,
               const char *fmt, va_list ap) {
    if (!err)
        return code;
    err->code = (weir_status)code;
    snprintf(err->plugin, sizeof err->plugin, "%s", plugin ? plugin : "");
    snprintf(err->hook, sizeof err->hook, "%s", hook ? hook : "");
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    return code;
}

int weir__err(weir_error *err, int code, const char *plugin, const char *hook,
              const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    weir__verr(err, code, plugin, hook, fmt, ap);
    va_end(ap);
    return code;
}
