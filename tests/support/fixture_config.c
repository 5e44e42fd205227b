/* tests/support/fixture_config.c - see fixture_config.h. */
#include "fixture_config.h"

#include <stdarg.h>

#include "testutil.h"

json_t *wt_fixture_config(const char *id, ...) {
    json_t *rows = json_array();
    va_list ap;
    va_start(ap, id);
    for (const char *row_id = id; row_id; row_id = va_arg(ap, const char *)) {
        const char *plugin = va_arg(ap, const char *);
        json_t *cfg = va_arg(ap, json_t *); /* stolen, may be NULL */
        json_t *row = json_pack("{s:s, s:s}", "id", row_id, "plugin", plugin);
        if (cfg)
            json_object_set_new(row, "config", cfg);
        json_array_append_new(rows, row);
    }
    va_end(ap);
    return json_pack("{s:[s], s:o}", "plugin_path", wt_env("WEIR_TEST_FIXTURE_DIR"),
                     "plugins", rows);
}
