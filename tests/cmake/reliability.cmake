# Reliability campaigns (docs/reliability.md).
#
# crash_kill9: kill -9 `weir run` at swept points of a scripted, tool-calling
# turn; the log must check, resume (closing the open turn as interrupted) and
# keep its derived history as a prefix.  Needs the CLI, provider-scripted and
# tools-ffi built (a full build), and jq (cmake/install-deps.sh installs it;
# without it the test fails).  The fsync policy rotates over step, always
# and none; after every kill the log must open (the one reader) and check.
add_test(NAME crash_kill9
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/crash_kill9.sh $<TARGET_FILE:weir_cli> 24)
set_tests_properties(crash_kill9 PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 120)

# crash_tool_rerun: kill -9 `weir run` while an idempotent and a
# non-idempotent tool run; the resume runs the first again with the same key
# and answers the second INTERRUPTED (docs/tools.md, "Tools across a crash");
# then a tools-ffi function that gets the key as a parameter.  Needs
# drvtest-tools, tools-ffi, libweirffitest and jq.
add_test(NAME crash_tool_rerun
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/crash_tool_rerun.sh $<TARGET_FILE:weir_cli>
                 $<TARGET_FILE_DIR:weir-drvtest-tools> $<TARGET_FILE:weirffitest>)
set_tests_properties(crash_tool_rerun PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 120)

# sigterm_biglog: SIGTERM during the open and during a compaction of a big
# generated log (bench_biglog_gen, bench/biglog/: always built, added after
# tests/, which a target's file name does not mind) ends `weir resume` within
# 1 s; the log then checks and resumes (issue #34).  A timing: it runs alone.
add_test(NAME sigterm_biglog
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/sigterm_biglog.sh $<TARGET_FILE:weir_cli>
                 $<TARGET_FILE:bench_biglog_gen>)
set_tests_properties(sigterm_biglog PROPERTIES TIMEOUT 180 RUN_SERIAL TRUE
                     ENVIRONMENT "${WEIR_TEST_ENV};WEIR_PLUGIN_PATH=${WEIR_PLUGIN_BUILD_DIR}")

# Fuzz targets for the config composer and the session log reader
# (-DWEIR_BUILD_FUZZ=ON with clang; seeds in tests/fuzz/corpus/<name>/).
if(COMMAND weir_add_fuzz)
  weir_add_fuzz(fuzz_config SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_config.c)
  weir_add_fuzz(fuzz_session_log SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_session_log.c)
endif()
