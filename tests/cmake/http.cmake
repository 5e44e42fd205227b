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

# The standalone mock as a ctest fixture: a setup test starts it, a test uses
# it, a cleanup test stops it (it exits by itself after 4 requests, a window
# probe and a model call per run, or 120 s).
set(_mock_fixture_dir ${CMAKE_BINARY_DIR}/tests/mock-fixture)
add_test(NAME mock_llm_fixture_start
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/mock_fixture.sh start ${_mock_fixture_dir})
add_test(NAME mock_llm_fixture_sessions
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/mock_fixture.sh run ${_mock_fixture_dir})
add_test(NAME mock_llm_fixture_stop
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/mock_fixture.sh stop ${_mock_fixture_dir})
set_tests_properties(mock_llm_fixture_start PROPERTIES FIXTURES_SETUP mock_llm
                     ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 30)
set_tests_properties(mock_llm_fixture_sessions PROPERTIES FIXTURES_REQUIRED mock_llm
                     ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 90)
set_tests_properties(mock_llm_fixture_stop PROPERTIES FIXTURES_CLEANUP mock_llm
                     ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 30)
