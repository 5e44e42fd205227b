# Issue #32's Done-when: a 12-step tool loop with `weir run` against
# weir-mock-llm and its vendor rules (tests/support/mock_llm.h), one ctest per
# model: real_models_<case> (tests/scripts/real_models_run.sh names the
# cases; their provider rows are tests/data/real_models/<case>.json).
foreach(c claude-adaptive claude-enabled deepseek gemini gpt51 gpt51-responses
        gpt51-responses-lost)
  add_test(NAME real_models_${c}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/real_models_run.sh ${c})
  set_tests_properties(real_models_${c} PROPERTIES ENVIRONMENT "${WEIR_TEST_ENV}" TIMEOUT 300
                       LABELS real_models)
endforeach()
