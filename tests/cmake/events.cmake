# Events area: the event catalog (core/format/event_catalog.c, docs/events.md) and
# weir_agent_last_turn, driven through agents of the driver harness.
if(TARGET test_events)
  add_dependencies(test_events weir_driver_plugins)
  set_tests_properties(test_events PROPERTIES ENVIRONMENT
    "${WEIR_TEST_ENV};WEIR_CHECK_REQUESTS=1;WEIR_TEST_DRIVER_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/driver-plugins")
endif()
