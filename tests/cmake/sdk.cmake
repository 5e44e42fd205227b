# SDK area: the test kit's own test needs the fixture plugins; the example
# deployment chain composes; an install into a temporary prefix is
# relocatable and usable by an out-of-tree plugin (tests/scripts/sdk_install.sh).
if(TARGET test_testkit)
  add_dependencies(test_testkit weir_fixtures)
endif()

# examples/hook-plugin: base.json + overlay.json compose into two rows of
# example-guard, audit-tag placed before guard, and only the overlay tags.
set(_hook_example ${PROJECT_SOURCE_DIR}/examples/hook-plugin)
add_test(NAME sdk_example_chain
         COMMAND ${CMAKE_BINARY_DIR}/bin/weir hooks -c ${_hook_example}/base.json
                 -c ${_hook_example}/overlay.json)
set_tests_properties(sdk_example_chain PROPERTIES
  ENVIRONMENT "${WEIR_TEST_ENV}"
  PASS_REGULAR_EXPRESSION
    "agent/pre-step \\(waterfall\\)\n  1\\. audit-tag [^\n]*\n  2\\. guard [^\n]*\ntools/pre-execute \\(waterfall\\)\n  1\\. audit-tag [^\n]*\n  2\\. guard "
  TIMEOUT 60)

# Install into a temp prefix, build sdk/template against it, run its test,
# check pkg-config, and run the installed `weir` with no environment.
add_test(NAME sdk_install
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sdk_install.sh
                 ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR} "${WEIR_SANITIZE}")
set_tests_properties(sdk_install PROPERTIES TIMEOUT 120 RUN_SERIAL TRUE)

# examples/embed: a C program embedding libweir runs the built-in demo
# deployment, with a listener of the agent's own.
# (examples/ is added after tests/: the target is resolved at generate time.)
add_test(NAME example_embed
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/example_embed.sh
                 $<TARGET_FILE:weir-embed-example>)
set_tests_properties(example_embed PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 90)
