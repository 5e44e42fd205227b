/* tests/sdk/header_order_b.c - weir/host.h, weir/sdk.h (header-only helpers), then
 * weir/testkit.h (see header_order_a.c). */
#include <string.h>

#include <weir/host.h>
#include <weir/sdk.h>
#include <weir/testkit.h>

#include "header_order.h"

#if defined(weir_status_name) || defined(weir_agent_id)
#error "the plugin call macros are defined after weir/host.h and weir/testkit.h"
#endif

int header_order_b(void) {
    return strcmp(weir_status_name(WEIR_E_BUSY), "E_BUSY") == 0 &&
           weir_agent_id(NULL) == NULL && weir_tk_events(NULL) == NULL &&
           weir_tokens_for_chars(9) == 3;
}
