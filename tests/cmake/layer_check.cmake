# Layer area: core/'s six floors call and include only their own floor or a
# lower one, cli/ includes only public headers, struct weir_agent stays in
# core/api/ (docs/architecture.md, "The layer check"; issue #33).
# tests/scripts/layer_check.sh reads weir_core's objects (nm) and the sources.
set(_layer_script ${CMAKE_CURRENT_SOURCE_DIR}/scripts/layer_check.sh)
# weir_core's objects, as <floor>/<name>.c.o (a single-config generator)
set(_layer_objects ${PROJECT_BINARY_DIR}/core/CMakeFiles/weir_core.dir)

# The tree as it is: ctest runs after the build, so the objects exist.
add_test(NAME layer_check
         COMMAND sh ${_layer_script} ${PROJECT_SOURCE_DIR} ${_layer_objects})
set_tests_properties(layer_check PROPERTIES TIMEOUT 60 LABELS layer)

# The check fails when it must: a copy of the objects and sources with a
# probe on the base floor that calls weir_agent_close (api) and includes
# agent.h (api) fails, naming both; a clean synthetic two-floor tree passes;
# a synthetic tree with one violation of each kind fails, naming each; an
# empty object directory is a usage error (tests/scripts/layer_check_negative.sh).
add_library(weir_layer_probe OBJECT ${CMAKE_CURRENT_SOURCE_DIR}/support/layer_probe.c)
target_link_libraries(weir_layer_probe PRIVATE weir_headers PkgConfig::JANSSON)
add_test(NAME layer_check_catches_upward_call
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/layer_check_negative.sh
                 ${PROJECT_SOURCE_DIR} ${_layer_objects} $<TARGET_OBJECTS:weir_layer_probe>
                 ${CMAKE_C_COMPILER})
set_tests_properties(layer_check_catches_upward_call PROPERTIES TIMEOUT 60 LABELS layer)

# The check also fails the build.  CMake does not let this file attach a
# POST_BUILD command to weir_core (add_custom_command(TARGET) accepts only
# targets created in the same directory, core/), so a custom target in ALL
# runs it after weir_core: it reruns when libweir_core.a, the script or a
# core/ or cli/ source changes, and a failure leaves no stamp, so the next
# build checks again.  -DWEIR_LAYER_CHECK_BUILD=OFF turns it off (ctest's
# layer_check still runs).
option(WEIR_LAYER_CHECK_BUILD "Fail the build when core/ calls or includes upward (tests/scripts/layer_check.sh)" ON)
if(WEIR_LAYER_CHECK_BUILD)
  file(GLOB _layer_sources CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/core/*.c ${PROJECT_SOURCE_DIR}/core/*.h
       ${PROJECT_SOURCE_DIR}/core/*/*.c ${PROJECT_SOURCE_DIR}/core/*/*.h
       ${PROJECT_SOURCE_DIR}/cli/*.c ${PROJECT_SOURCE_DIR}/cli/*.h)
  set(_layer_stamp ${CMAKE_CURRENT_BINARY_DIR}/layer_check.stamp)
  add_custom_command(OUTPUT ${_layer_stamp}
    COMMAND sh ${_layer_script} ${PROJECT_SOURCE_DIR} ${_layer_objects}
    COMMAND ${CMAKE_COMMAND} -E touch ${_layer_stamp}
    DEPENDS weir_core ${_layer_script} ${_layer_sources} ${PROJECT_SOURCE_DIR}/core/CMakeLists.txt
    COMMENT "Layer check: core/ floors call and include downward only (docs/architecture.md)"
    VERBATIM)
  add_custom_target(layer_check_build ALL DEPENDS ${_layer_stamp})
endif()
