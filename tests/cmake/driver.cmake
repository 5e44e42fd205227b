# Driver area: the agent and the turn/step driver (tests/unit/test_driver_*.c),
# provider-scripted (test_scripted.c) and the run/resume/log CLI
# (tests/scripts/cli_*.sh).  The config-driven test plugins of
# tests/driver-plugins/ land in ${CMAKE_BINARY_DIR}/tests/driver-plugins.
set(WEIR_DRIVER_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/driver-plugins)
add_custom_target(weir_driver_plugins)
foreach(p hooks tools)
  weir_add_plugin(drvtest-${p} SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/driver-plugins/drvtest_${p}.c
                  NO_INSTALL OUTPUT_DIRECTORY ${WEIR_DRIVER_PLUGIN_DIR})
  add_dependencies(weir_driver_plugins weir-drvtest-${p})
endforeach()
foreach(p provider-scripted system-prompt)
  if(TARGET weir-${p})
    add_dependencies(weir_driver_plugins weir-${p})
  endif()
endforeach()

set(_driver_env ${WEIR_TEST_ENV} "WEIR_CHECK_REQUESTS=1"
    "WEIR_TEST_DRIVER_PLUGIN_DIR=${WEIR_DRIVER_PLUGIN_DIR}")
file(GLOB _driver_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_driver*.c
     ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_scripted.c)
foreach(src ${_driver_tests})
  get_filename_component(name ${src} NAME_WE)
  if(TARGET ${name})
    add_dependencies(${name} weir_driver_plugins)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${_driver_env}")
  endif()
endforeach()

# CLI script tests: each gets the weir binary and a private session dir.
# A tool a test needs (jq, prlimit) is installed by make deps or is part of
# Debian's base system: missing, the test fails, never skips.
file(GLOB _cli_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/scripts/cli_*.sh)
foreach(script ${_cli_scripts})
  get_filename_component(name ${script} NAME_WE)
  add_test(NAME ${name} COMMAND sh ${script} $<TARGET_FILE:weir_cli>)
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "${_driver_env};WEIR_PLUGIN_PATH=${WEIR_PLUGIN_BUILD_DIR}"
    TIMEOUT 120)
endforeach()
