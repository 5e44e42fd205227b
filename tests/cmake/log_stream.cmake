# Log area, issue #34: `weir log FILE` (--json, the transcript, --why) reads a
# log file in bounded memory (tests/scripts/log_stream_memory.sh).  It uses
# bench/biglog's generator and RSS meter, built with the tests.
if(TARGET weir_cli)
  add_custom_target(weir_log_stream_tools ALL)
  add_dependencies(weir_log_stream_tools bench_biglog_gen bench_biglog_rss)
  add_test(NAME log_stream_memory
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/log_stream_memory.sh
                   $<TARGET_FILE:weir_cli> $<TARGET_FILE:bench_biglog_gen>
                   $<TARGET_FILE:bench_biglog_rss>)
  # WEIR_TEST_SANITIZE: what a node of the check's surface costs depends on
  # the allocator the sanitizer puts under it (ThreadSanitizer's most)
  set_tests_properties(log_stream_memory PROPERTIES
                       ENVIRONMENT "${WEIR_TEST_ENV};WEIR_TEST_SANITIZE=${WEIR_SANITIZE}"
                       TIMEOUT 300)
endif()
