/*
 * tests/support/fixture_config.h - deployment configs over the fixture
 * plugins of tests/plugins/ (WEIR_TEST_FIXTURE_DIR), shared by test_host and
 * test_loader.
 */
#ifndef WEIR_FIXTURE_CONFIG_H
#define WEIR_FIXTURE_CONFIG_H

#include <jansson.h>

/*
 * A config {plugin_path: [fixture dir], plugins: rows} whose rows are given
 * as (const char *id, const char *plugin, json_t *config) triples ended by a
 * NULL id; each row's config is stolen and may be NULL (no "config" key).
 * Returns a new reference.  Thread-safe.
 */
json_t *wt_fixture_config(const char *id, ...);

#endif
