# Reasoning continuations (issue #32 item 1): test_continuation drives agents
# through the driver harness, so it runs as the driver tests do (after
# driver.cmake: its plugins and environment).
if(TARGET test_continuation)
  add_dependencies(test_continuation weir_driver_plugins)
  set_tests_properties(test_continuation PROPERTIES ENVIRONMENT "${_driver_env}")
endif()
# compaction_makes_the_tail_stale loads compaction-basic
if(TARGET test_continuation AND TARGET weir-compaction-basic)
  add_dependencies(test_continuation weir-compaction-basic)
endif()
