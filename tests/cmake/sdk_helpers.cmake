# SDK helpers (issue #36): test_sdk_helpers drives the 1.12 api members
# through a real host (provider-openai on the mock LLM server, the driver
# harness's plugins) and the test kit.
if(TARGET test_sdk_helpers)
  foreach(t weir-provider-openai weir_driver_plugins)
    if(TARGET ${t})
      add_dependencies(test_sdk_helpers ${t})
    endif()
  endforeach()
  set_tests_properties(test_sdk_helpers PROPERTIES TIMEOUT 120 ENVIRONMENT
    "${WEIR_TEST_ENV};WEIR_TEST_DRIVER_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/driver-plugins")
endif()
