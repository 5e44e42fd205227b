# Tools area: the scheduler tests need nothing extra; the tools-ffi tests
# need the plugin and a small C library with one function per type.
add_library(weirffitest SHARED ${CMAKE_CURRENT_LIST_DIR}/../tool-plugins/weirffitest.c)
set_target_properties(weirffitest PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/tool-plugins
  C_VISIBILITY_PRESET hidden)
target_link_libraries(weirffitest PRIVATE weir_warnings)

if(TARGET test_tools_ffi)
  add_dependencies(test_tools_ffi weirffitest weir-tools-ffi)
  set_property(TEST test_tools_ffi APPEND PROPERTY ENVIRONMENT
    "WEIR_FFI_TEST_LIB=$<TARGET_FILE:weirffitest>")
endif()

if(TARGET test_ffi_proto)
  target_sources(test_ffi_proto PRIVATE ${PROJECT_SOURCE_DIR}/plugins/tools-ffi/ffi_proto.c)
  target_include_directories(test_ffi_proto PRIVATE ${PROJECT_SOURCE_DIR}/plugins/tools-ffi)
endif()

# The prototype fuzzer.  Deferred to the end of tests/: weir_add_fuzz() is
# defined by tests/fuzz/CMakeLists.txt, which may be processed after this file.
function(_weir_tools_fuzz)
  if(COMMAND weir_add_fuzz)
    weir_add_fuzz(fuzz_ffi_proto SOURCES ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_ffi_proto.c
                  ${PROJECT_SOURCE_DIR}/plugins/tools-ffi/ffi_proto.c)
  endif()
endfunction()
if(WEIR_BUILD_FUZZ)
  cmake_language(DEFER CALL _weir_tools_fuzz)
endif()

# The examples/ffi-tools deployment end to end: `weir run` with the scripted
# provider calling libm and libweirdemo through tools-ffi.
add_test(NAME tools_ffi_example
         COMMAND sh ${PROJECT_SOURCE_DIR}/examples/ffi-tools/run.sh ${CMAKE_BINARY_DIR})
set_tests_properties(tools_ffi_example PROPERTIES
  ENVIRONMENT "${WEIR_TEST_ENV};WEIR_SESSION_DIR=${CMAKE_BINARY_DIR}/tests/tools-example-sessions"
  PASS_REGULAR_EXPRESSION "quotient[^0-9]+3[^0-9]+remainder[^0-9]+2.*primes[^0-9]+2,3,5,7,11,13,17,19[^0-9,].*\"kind\":\"completed\""
  FAIL_REGULAR_EXPRESSION "\"is_error\":true;\"kind\":\"error\""
  TIMEOUT 120)
