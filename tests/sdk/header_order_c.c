/*
 * tests/sdk/header_order_c.c - weir/plugin.h first (its call macros on),
 * then weir/testkit.h and weir/weir.h, which switch them off: libweir's
 * weir_status_name() and weir_agent_id() are declared and called, not the
 * table's (see header_order_a.c).
 */
#include <string.h>

#include <weir/plugin.h>

#ifndef weir_status_name
#error "weir/plugin.h alone defines the plugin call macros"
#endif

#include <weir/testkit.h>
#include <weir/weir.h>
#include <weir/plugin.h>

#include "header_order.h"

#if defined(weir_status_name) || defined(weir_hook_register) || defined(weir_agent_id)
#error "the plugin call macros are still defined after weir/testkit.h"
#endif

int header_order_c(void) {
    return strcmp(weir_status_name(WEIR_E_TIMEOUT), "E_TIMEOUT") == 0 &&
           weir_agent_id(NULL) == NULL && WEIR_API_HAS(weir_host_api(), provider_require);
}
