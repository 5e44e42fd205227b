# hooks-shell (docs/hooks-shell.md): Claude Code command hooks through
# `weir run` against weir-mock-llm, and the ask path over `weir serve --stdio`.
add_test(NAME hooks_shell_run COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/hooks_shell.sh)
set_tests_properties(hooks_shell_run PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 300)
add_test(NAME hooks_shell_session
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/hooks_shell_session.sh $<TARGET_FILE:weir_cli>)
set_tests_properties(hooks_shell_session PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 120)

# hs_proc.c (the process runner, no host calls) compiled into its unit test:
# start failures (EMFILE at each descriptor, exec, chdir) leave no descriptor
# open and say which step failed; a lost exit code and a signal are told apart.
if(TARGET test_hooks_shell_proc)
  target_sources(test_hooks_shell_proc PRIVATE ${PROJECT_SOURCE_DIR}/plugins/hooks-shell/hs_proc.c)
  target_include_directories(test_hooks_shell_proc PRIVATE ${PROJECT_SOURCE_DIR}/plugins/hooks-shell)
  set_tests_properties(test_hooks_shell_proc PROPERTIES TIMEOUT 60)
endif()
