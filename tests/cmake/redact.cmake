# Secrets in printed configs (test_redact): the fx-secret fixture and the
# shipped provider-openai declare the "secret" marks weir_config_redact reads.
if(TARGET test_redact)
  add_dependencies(test_redact weir_fixtures weir-provider-openai)
endif()
