# compaction-basic: test_compaction compiles the pure policy
# (plugins/compaction-basic/compaction_policy.c) directly and drives the built
# plugin through the host with provider-scripted and the driver test plugins
# (tests/cmake/driver.cmake).
if(TARGET test_compaction)
  set(_compaction_dir ${PROJECT_SOURCE_DIR}/plugins/compaction-basic)
  target_sources(test_compaction PRIVATE ${_compaction_dir}/compaction_policy.c)
  target_include_directories(test_compaction PRIVATE ${_compaction_dir})
  add_dependencies(test_compaction weir-compaction-basic)
  # weir_driver_plugins is defined by driver.cmake, included after this file;
  # add_dependencies resolves it when the build system is generated.
  add_dependencies(test_compaction weir_driver_plugins)
  set_tests_properties(test_compaction PROPERTIES TIMEOUT 120 ENVIRONMENT
    "${WEIR_TEST_ENV};WEIR_CHECK_REQUESTS=1;WEIR_TEST_DRIVER_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/driver-plugins")
endif()

# test_compaction_long: 60-step sessions against the mock LLM (issue #35),
# the same plugins and environment as test_compaction.
if(TARGET test_compaction_long)
  add_dependencies(test_compaction_long weir-compaction-basic weir_driver_plugins
                   weir-provider-anthropic weir-provider-openai)
  set_tests_properties(test_compaction_long PROPERTIES TIMEOUT 300 ENVIRONMENT
    "${WEIR_TEST_ENV};WEIR_CHECK_REQUESTS=1;WEIR_TEST_DRIVER_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/driver-plugins")
endif()

# test_compaction_server: the `server` strategy against the mock LLM.
if(TARGET test_compaction_server)
  add_dependencies(test_compaction_server weir-compaction-basic weir_driver_plugins
                   weir-provider-openai)
  set_tests_properties(test_compaction_server PROPERTIES TIMEOUT 300 ENVIRONMENT
    "${WEIR_TEST_ENV};WEIR_CHECK_REQUESTS=1;WEIR_TEST_DRIVER_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/driver-plugins")
endif()
