# hooks-shell (docs/hooks-shell.md): Claude Code command hooks through
# `weir run` against weir-mock-llm, and the ask path over `weir serve --stdio`.
add_test(NAME hooks_shell_run COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/hooks_shell.sh)
set_tests_properties(hooks_shell_run PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 300)
add_test(NAME hooks_shell_session
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/hooks_shell_session.sh $<TARGET_FILE:weir_cli>)
set_tests_properties(hooks_shell_session PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 120)
