# retry plugin: test_retry compiles the pure policy and breaker
# (plugins/retry/retry_policy.c, retry_breaker.c)
# directly and drives the built plugin through the host with provider-scripted
# and the driver test plugins (tests/cmake/driver.cmake).
if(TARGET test_retry)
  set(_retry_dir ${PROJECT_SOURCE_DIR}/plugins/retry)
  target_sources(test_retry PRIVATE ${_retry_dir}/retry_policy.c ${_retry_dir}/retry_breaker.c)
  target_include_directories(test_retry PRIVATE ${_retry_dir})
  add_dependencies(test_retry weir-retry)
  if(TARGET weir_driver_plugins)
    add_dependencies(test_retry weir_driver_plugins)
  endif()
  set_tests_properties(test_retry PROPERTIES TIMEOUT 120 ENVIRONMENT
    "${WEIR_TEST_ENV};WEIR_CHECK_REQUESTS=1;WEIR_TEST_DRIVER_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/driver-plugins")
endif()
