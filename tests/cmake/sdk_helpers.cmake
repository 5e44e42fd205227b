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

# `weir new-plugin --kind compaction|retry|guard`: each skeleton builds
# against an installed prefix and passes its own test.
add_test(NAME sdk_new_plugin_kinds
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sdk_new_plugin_kinds.sh
                 ${CMAKE_BINARY_DIR} "${WEIR_SANITIZE}")
set_tests_properties(sdk_new_plugin_kinds PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE)
