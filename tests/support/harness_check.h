/*
 * tests/support/harness_check.h - assertions over the events a driver
 * harness (driver_harness.h) collected, shared by the plugin tests that
 * drive a real host (test_compaction, test_retry).  Each fails the running
 * cmocka test with a message naming what differs.  Not thread-safe: call
 * from the test's thread after the agent went idle.
 */
#ifndef WEIR_HARNESS_CHECK_H
#define WEIR_HARNESS_CHECK_H

#include "driver_harness.h"

/* The durable event types, comma-joined (dh_types), equal `want`. */
void dh_assert_types(const dh *d, const char *want);
/* The `data` of the n-th (0-based) event of `type` (borrowed); fails without one. */
const json_t *dh_event_data(const dh *d, const char *type, int n);

#endif
