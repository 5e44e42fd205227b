# test_provider_cache: the providers' request cache on its own (owner tags,
# the release of a disposed agent's entries), compiled from its source.
if(TARGET test_provider_cache)
  set(_pc_dir ${PROJECT_SOURCE_DIR}/plugins/provider-common)
  target_sources(test_provider_cache PRIVATE ${_pc_dir}/provider_cache.c
                 ${_pc_dir}/provider_common.c)
  target_include_directories(test_provider_cache PRIVATE ${_pc_dir})
endif()
