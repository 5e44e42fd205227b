# Telemetry (docs/telemetry.md): the loopback OTLP/HTTP receiver,
# weir-otlp-receiver (in <build>/bin, found through WEIR_TEST_BIN_DIR), the
# span builder's unit test (test_otlp) and the end-to-end script test: a
# 2-turn session with a tool call and a retried attempt, exported live to
# the receiver and by `weir log --otlp`, validated against the GenAI
# semantic conventions with jq.
add_executable(weir-otlp-receiver ${CMAKE_CURRENT_SOURCE_DIR}/support/otlp_receiver_main.c)
target_compile_definitions(weir-otlp-receiver PRIVATE _GNU_SOURCE)
target_link_libraries(weir-otlp-receiver PRIVATE weir_warnings weir_sanitize)

add_test(NAME telemetry_otlp
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/telemetry_otlp.sh $<TARGET_FILE:weir_cli>)
set_tests_properties(telemetry_otlp PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 300)
if(TARGET test_otlp)
  add_dependencies(test_otlp weir-otlp-receiver)
endif()

# Fuzz target for the span builder and the OTEL_* settings (-DWEIR_BUILD_FUZZ=ON
# with clang; seeds in tests/fuzz/corpus/fuzz_otlp/).
if(COMMAND weir_add_fuzz)
  weir_add_fuzz(fuzz_otlp SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_otlp.c)
endif()
