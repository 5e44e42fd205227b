# Loader and host area: fixture plugins must be built before the unit tests
# run; `weir hooks` prints a composed chain in placement order; libweir and
# every shipped plugin export only what they should.
if(TARGET test_loader)
  add_dependencies(test_loader weir_fixtures)
endif()
if(TARGET test_host)
  add_dependencies(test_host weir_fixtures)
endif()

# base.json lists first (fx-alpha), second (fx-beta), third (fx-gamma);
# overlay.json places first after second and third before second, so the
# chain runs third, second, first: the reverse of config order.
set(_hooks_chain ${CMAKE_CURRENT_SOURCE_DIR}/data/hooks-chain)
add_test(NAME loader_hooks_chain
         COMMAND ${CMAKE_BINARY_DIR}/bin/weir hooks -c ${_hooks_chain}/base.json
                 -c ${_hooks_chain}/overlay.json)
set_tests_properties(loader_hooks_chain PROPERTIES
  ENVIRONMENT "${WEIR_TEST_ENV};WEIR_PLUGIN_PATH=${CMAKE_BINARY_DIR}/tests/plugins"
  PASS_REGULAR_EXPRESSION "agent/pre-step[^\n]*\n[^\n]*third[^\n]*\n[^\n]*second[^\n]*\n[^\n]*first"
  TIMEOUT 60)

# libweir exports weir_* and no weir_tk_*; libweir-testkit only weir_tk_*.
add_test(NAME loader_exports
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/check_exports.sh
                 $<TARGET_FILE:weir> ${WEIR_PLUGIN_BUILD_DIR} $<TARGET_FILE:weir_testkit>)
set_tests_properties(loader_exports PROPERTIES TIMEOUT 60)
