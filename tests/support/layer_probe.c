/* tests/support/layer_probe.c - a deliberate layer violation, for the
 * layer_check_catches_upward_call test (tests/cmake/layer_check.cmake).
 * tests/scripts/layer_check_negative.sh puts this file's object into a copy
 * of weir_core's base/ objects, and this file into a copy of core/base/:
 * there it is a floor-1 (base) file that calls weir_agent_close, defined on
 * the api floor (core/api/agent.c), and includes agent.h (core/api/).  The
 * include is under an #ifdef nothing defines, so the file compiles anywhere
 * (it is also globbed into weir_testsupport, where nothing calls it); the
 * check reads includes without the preprocessor and still sees it. */
#include "weir/host.h"

#ifdef WEIR_LAYER_PROBE_UPWARD_INCLUDE
#include "agent.h"
#endif

void weir_layer_probe_upward_call(weir_agent *agent);

void weir_layer_probe_upward_call(weir_agent *agent) {
    weir_agent_close(agent);
}
