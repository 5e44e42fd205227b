# HTTP/SSE area: the standalone mock LLM server, weir-mock-llm (in
# <build>/bin, found by tests through WEIR_TEST_BIN_DIR), for script tests
# and other areas' integration tests.  The in-process server (mock_llm.c)
# is part of weir_testsupport.
add_executable(weir-mock-llm ${CMAKE_CURRENT_SOURCE_DIR}/support/mock_llm_main.c)
target_compile_definitions(weir-mock-llm PRIVATE _GNU_SOURCE)
target_link_libraries(weir-mock-llm PRIVATE weir_testsupport weir_warnings weir_sanitize)

# test_http runs the standalone server once (test_standalone_mock_...).
if(TARGET test_http)
  add_dependencies(test_http weir-mock-llm)
endif()

# bench/connections/session.c: one TCP connect for a 10-step agent session.
# The executable is defined in bench/connections (processed after tests/);
# add_test resolves the target name at generate time.
add_test(NAME bench_session_connections COMMAND bench_session_connections)
set_tests_properties(bench_session_connections PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}"
  TIMEOUT 120)
