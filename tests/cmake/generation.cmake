# Generations area: the generation tracker (tests/unit/test_generation.c,
# which also drives live agents through tests/support/driver_harness) and
# `weir serve --stdio` (tests/scripts/serve_*.sh, run against the default
# deployment: the built-in scripted demo).
set(_gen_env ${WEIR_TEST_ENV} "WEIR_CHECK_REQUESTS=1"
    "WEIR_TEST_DRIVER_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/driver-plugins")
if(TARGET test_generation)
  if(TARGET weir_driver_plugins)
    add_dependencies(test_generation weir_driver_plugins)
  endif()
  set_tests_properties(test_generation PROPERTIES ENVIRONMENT "${_gen_env}")
endif()

file(GLOB _serve_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/scripts/serve_*.sh)
foreach(script ${_serve_scripts})
  get_filename_component(name ${script} NAME_WE)
  add_test(NAME ${name} COMMAND sh ${script} $<TARGET_FILE:weir_cli>)
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "${_gen_env};WEIR_PLUGIN_PATH=${WEIR_PLUGIN_BUILD_DIR};WEIR_SESSION_DIR=${CMAKE_CURRENT_BINARY_DIR}/serve-sessions/${name}"
    TIMEOUT 120)
endforeach()
