/* tests/support/harness_check.c - see harness_check.h. */
#include "harness_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

void dh_assert_types(const dh *d, const char *want) {
    char *got = dh_types(d, true);
    if (strcmp(got, want) != 0)
        fail_msg("event types differ\n  got:  %s\n  want: %s", got, want);
    free(got);
}

const json_t *dh_event_data(const dh *d, const char *type, int n) {
    const json_t *e = dh_find(d, type, n);
    if (!e)
        fail_msg("no %s event #%d", type, n);
    return json_object_get(e, "data");
}
