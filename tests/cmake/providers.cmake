# provider-openai / provider-anthropic tests.
#
# Unit tests compile each plugin's pure files (request translation, the
# stream decoder, plugins/provider-common/provider_common.c and
# provider_cache.c) directly, and
# load the built plugin .so through the fake host of
# tests/support/provider_test.c, whose HTTP is the core client talking to the
# loopback mock LLM.
# Script tests run `weir run` against the standalone mock (weir-mock-llm).
set(_common ${PROJECT_SOURCE_DIR}/plugins/provider-common)
# The secret scrubber both providers share (provider_common.c) and the model
# table (model_table.c).
if(TARGET test_provider_common)
  target_sources(test_provider_common PRIVATE ${_common}/provider_common.c
                 ${_common}/model_table.c ${_common}/provider_options.c)
  target_include_directories(test_provider_common PRIVATE ${_common})
  # pc_buf_json's growth failures (buf_json_fails_when_a_key_cannot_grow)
  target_link_options(test_provider_common PRIVATE -Wl,--wrap=realloc)
endif()
# provider-openai's fast path (delta_scan.c) against its decoder's jansson path.
if(TARGET test_openai_scan)
  target_sources(test_openai_scan PRIVATE ${PROJECT_SOURCE_DIR}/plugins/provider-openai/delta_scan.c
                 ${PROJECT_SOURCE_DIR}/plugins/provider-openai/openai_decode.c
                 ${_common}/provider_common.c)
  target_include_directories(test_openai_scan PRIVATE
                             ${PROJECT_SOURCE_DIR}/plugins/provider-openai ${_common})
endif()
# provider-openai across a tool loop (issue #32): continuations, prompt_cache_key.
if(TARGET test_openai_continuity)
  set(_oa ${PROJECT_SOURCE_DIR}/plugins/provider-openai)
  target_sources(test_openai_continuity PRIVATE ${_oa}/openai_request.c ${_oa}/openai_decode.c
                 ${_oa}/delta_scan.c ${_common}/provider_common.c ${_common}/provider_cache.c
                 ${_common}/provider_options.c ${_common}/model_table.c)
  target_include_directories(test_openai_continuity PRIVATE ${_oa} ${_common})
  target_link_libraries(test_openai_continuity PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(test_openai_continuity weir-provider-openai)
endif()
# provider-openai on the Responses API (issue #35).
if(TARGET test_provider_responses)
  set(_oa ${PROJECT_SOURCE_DIR}/plugins/provider-openai)
  target_sources(test_provider_responses PRIVATE ${_oa}/responses_request.c
                 ${_oa}/responses_decode.c ${_oa}/openai_request.c ${_oa}/openai_decode.c
                 ${_oa}/delta_scan.c ${_common}/provider_common.c ${_common}/provider_cache.c
                 ${_common}/provider_options.c ${_common}/model_table.c)
  target_include_directories(test_provider_responses PRIVATE ${_oa} ${_common})
  target_link_libraries(test_provider_responses PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(test_provider_responses weir-provider-openai)
endif()
if(COMMAND weir_add_fuzz)
  set(_oa ${PROJECT_SOURCE_DIR}/plugins/provider-openai)
  weir_add_fuzz(fuzz_responses_event SOURCES ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_responses_event.c
                ${_oa}/responses_decode.c ${_oa}/responses_request.c ${_oa}/openai_request.c
                ${_oa}/openai_decode.c ${_oa}/delta_scan.c ${_common}/provider_common.c
                ${_common}/provider_cache.c ${_common}/provider_options.c
                ${_common}/model_table.c)
  if(TARGET fuzz_responses_event)
    target_include_directories(fuzz_responses_event PRIVATE ${_oa} ${_common}
                               ${PROJECT_SOURCE_DIR}/tests/support)
  endif()
  weir_add_fuzz(fuzz_openai_scan SOURCES ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_openai_scan.c
                ${_oa}/delta_scan.c ${_oa}/openai_decode.c ${_common}/provider_common.c
                ${_common}/provider_cache.c)
  if(TARGET fuzz_openai_scan)
    target_include_directories(fuzz_openai_scan PRIVATE ${_oa} ${_common}
                               ${PROJECT_SOURCE_DIR}/tests/support)
  endif()
endif()
foreach(p openai anthropic)
  set(_dir ${PROJECT_SOURCE_DIR}/plugins/provider-${p})
  if(TARGET test_provider_${p})
    target_sources(test_provider_${p} PRIVATE ${_dir}/${p}_request.c ${_dir}/${p}_decode.c
                   ${_common}/provider_common.c ${_common}/provider_cache.c
                   ${_common}/provider_options.c ${_common}/model_table.c)
    if(p STREQUAL "openai")
      target_sources(test_provider_${p} PRIVATE ${_dir}/delta_scan.c)
    endif()
    target_include_directories(test_provider_${p} PRIVATE ${_dir} ${_common})
    target_link_libraries(test_provider_${p} PRIVATE ${CMAKE_DL_LIBS})
    add_dependencies(test_provider_${p} weir-provider-${p})
  endif()

  if(COMMAND weir_add_fuzz)
    set(_fuzz fuzz_openai_chunk)
    if(p STREQUAL "anthropic")
      set(_fuzz fuzz_anthropic_event)
    endif()
    set(_scan)
    if(p STREQUAL "openai")
      set(_scan ${_dir}/delta_scan.c)
    endif()
    weir_add_fuzz(${_fuzz} SOURCES ${PROJECT_SOURCE_DIR}/tests/fuzz/${_fuzz}.c
                  ${_dir}/${p}_decode.c ${_dir}/${p}_request.c ${_common}/provider_common.c ${_common}/provider_cache.c
                  ${_common}/provider_options.c ${_common}/model_table.c ${_scan})
    if(TARGET ${_fuzz})
      target_include_directories(${_fuzz} PRIVATE ${_dir} ${_common}
                                 ${PROJECT_SOURCE_DIR}/tests/support)
    endif()
  endif()

  # Integration: weir run against weir-mock-llm (streamed answer, tool turn,
  # every injected fault) and the secrets check.
  set(_env ${WEIR_TEST_ENV} "WEIR_PROVIDER=${p}")
  add_test(NAME providers_${p}_run
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/providers_run.sh ${p})
  add_test(NAME providers_${p}_secrets
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/providers_secrets.sh ${p})
  set_tests_properties(providers_${p}_run providers_${p}_secrets PROPERTIES
                       ENVIRONMENT "${_env}" TIMEOUT 300)
endforeach()
