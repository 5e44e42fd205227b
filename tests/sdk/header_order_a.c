/*
 * tests/sdk/header_order_a.c - weir/testkit.h, then weir/host.h (issue #14
 * item 8: host.h did not compile after testkit.h, and weir_status_name()
 * went to the plugin table, an undefined weir__plugin_api).  Together with
 * header_order_b.c and header_order_c.c this is test_sdk_headers: each
 * file includes the public headers in another order and calls libweir's
 * own functions, which must compile, link and run.  Built without
 * WEIR_NO_API_MACROS, as a plugin author's test is.
 */
#include <stdio.h>
#include <string.h>

#include <weir/testkit.h>
#include <weir/host.h>

#include "header_order.h"

#if defined(weir_status_name) || defined(weir_hook_register) || defined(weir_next)
#error "the plugin call macros are still defined after weir/testkit.h and weir/host.h"
#endif

int header_order_a(void) {
    weir_tk *tk = weir_tk_create();
    int ok = tk != NULL && strcmp(weir_status_name(WEIR_E_NOMEM), "E_NOMEM") == 0 &&
             strcmp(weir_strerror(WEIR_OK), "success") == 0 && weir_host_api() != NULL;
    weir_tk_destroy(tk);
    return ok;
}

int main(void) {
    int a = header_order_a(), b = header_order_b(), c = header_order_c();
    printf("testkit+host %s, host+testkit %s, plugin+testkit+host %s\n", a ? "ok" : "FAIL",
           b ? "ok" : "FAIL", c ? "ok" : "FAIL");
    return a && b && c ? 0 : 1;
}
