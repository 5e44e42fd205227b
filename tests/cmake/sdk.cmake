# SDK area: the test kit's own test needs the fixture plugins; the example
# deployment chain composes; an install into a temporary prefix is
# relocatable and usable by an out-of-tree plugin (tests/scripts/sdk_install.sh).
if(TARGET test_testkit)
  add_dependencies(test_testkit weir_fixtures)
  # weir_tk_run_turn's tests run shipped plugins (and examples/hook-plugin's guard)
  foreach(p provider-scripted system-prompt tools-ffi)
    if(TARGET weir-${p})
      add_dependencies(test_testkit weir-${p})
    endif()
  endforeach()
endif()
if(TARGET test_sdk)
  add_dependencies(test_sdk weir_fixtures)
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

# The public headers in every order (issue #14 item 8): testkit.h, host.h,
# weir.h and plugin.h together, without WEIR_NO_API_MACROS, calling
# libweir's and the test kit's own functions (tests/sdk/header_order_*.c),
# linked as a plugin author links them: weir::testkit (which brings libweir).
add_executable(test_sdk_headers ${CMAKE_CURRENT_SOURCE_DIR}/sdk/header_order_a.c
               ${CMAKE_CURRENT_SOURCE_DIR}/sdk/header_order_b.c
               ${CMAKE_CURRENT_SOURCE_DIR}/sdk/header_order_c.c)
target_link_libraries(test_sdk_headers PRIVATE weir::testkit PkgConfig::JANSSON weir_warnings
                      weir_sanitize)
add_test(NAME test_sdk_headers COMMAND test_sdk_headers)
set_tests_properties(test_sdk_headers PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 60)

# A plugin that skips a line of its set-up: no WEIR_PLUGIN_INIT_API loads,
# no WEIR_PLUGIN_DEFINE fails its link naming the macro (issue #14 item 9).
add_test(NAME sdk_plugin_setup
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sdk_plugin_setup.sh
                 ${CMAKE_BINARY_DIR}/bin/weir ${CMAKE_BINARY_DIR}/tests/plugins
                 ${CMAKE_C_COMPILER} -I${PROJECT_SOURCE_DIR}/include
                 -I${CMAKE_BINARY_DIR}/include ${JANSSON_CFLAGS})
set_tests_properties(sdk_plugin_setup PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 60)

# libweir's soname carries the ABI major (issue #14 item 10): libweir.so.<major>.
add_test(NAME sdk_soname
         COMMAND sh -c "s=$(readelf -d \"$1\" | sed -n 's/.*Library soname: \\[\\(.*\\)\\]/\\1/p'); \
echo \"soname $s\"; [ \"$s\" = \"libweir.so.$2\" ]" sdk_soname $<TARGET_FILE:weir> ${WEIR_ABI_MAJOR})
set_tests_properties(sdk_soname PROPERTIES TIMEOUT 30)

# `weir new-plugin NAME [DIR]` fills the template in (issue #14 item 12).
add_test(NAME sdk_new_plugin
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sdk_new_plugin.sh
                 ${CMAKE_BINARY_DIR}/bin/weir ${CMAKE_C_COMPILER} -I${PROJECT_SOURCE_DIR}/include
                 -I${CMAKE_BINARY_DIR}/include ${JANSSON_CFLAGS})
set_tests_properties(sdk_new_plugin PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 60)

# The docs stand alone: no citation of files outside the repository, links
# that resolve, docs that agree with the code (issue #14 item 14).
add_test(NAME docs_check
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/docs_check.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_check PROPERTIES TIMEOUT 60)
