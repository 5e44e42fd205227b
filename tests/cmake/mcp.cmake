# tools-mcp area: the plugin against the MCP reference servers
# (@modelcontextprotocol/server-everything and server-filesystem, pinned by
# tests/mcp/package-lock.json, installed by `npm ci` into the build tree by
# the mcp_servers_install fixture) and against weir-mcp-fake
# (tests/support/mcp_fake_main.c) for the faults.  Node is required: a test
# that needs it fails without it (make deps installs it).
set(WEIR_MCP_DIR ${CMAKE_BINARY_DIR}/tests/mcp)
set(WEIR_MCP_MODULES ${WEIR_MCP_DIR}/node_modules/@modelcontextprotocol)

add_executable(weir-mcp-fake ${CMAKE_CURRENT_SOURCE_DIR}/support/mcp_fake_main.c)
target_link_libraries(weir-mcp-fake PRIVATE PkgConfig::JANSSON weir_warnings)
set_target_properties(weir-mcp-fake PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

add_test(NAME mcp_servers_install
         COMMAND sh ${PROJECT_SOURCE_DIR}/cmake/npm-ci.sh ${CMAKE_CURRENT_SOURCE_DIR}/mcp
                 ${WEIR_MCP_DIR}
                 node_modules/@modelcontextprotocol/server-everything/dist/index.js
                 node_modules/@modelcontextprotocol/server-filesystem/dist/index.js)
set_tests_properties(mcp_servers_install PROPERTIES FIXTURES_SETUP mcp_servers TIMEOUT 660)

set(_mcp_env ${WEIR_TEST_ENV} "WEIR_CHECK_REQUESTS=1"
    "WEIR_TEST_DRIVER_PLUGIN_DIR=${CMAKE_BINARY_DIR}/tests/driver-plugins"
    "WEIR_MCP_MODULES=${WEIR_MCP_MODULES}"
    "WEIR_MCP_FAKE=$<TARGET_FILE:weir-mcp-fake>")

if(TARGET test_tools_mcp)
  add_dependencies(test_tools_mcp weir-mcp-fake weir-tools-mcp)
  if(TARGET weir_driver_plugins)
    add_dependencies(test_tools_mcp weir_driver_plugins)
  endif()
  set_tests_properties(test_tools_mcp PROPERTIES ENVIRONMENT "${_mcp_env}"
                       FIXTURES_REQUIRED mcp_servers TIMEOUT 600)
endif()

# The pure parts (frame reader, result mapping, names, ${VAR}) compiled in.
if(TARGET test_mcp_map)
  target_sources(test_mcp_map PRIVATE ${PROJECT_SOURCE_DIR}/plugins/tools-mcp/mcp_map.c
                 ${PROJECT_SOURCE_DIR}/plugins/tools-mcp/mcp_frame.c)
  target_include_directories(test_mcp_map PRIVATE ${PROJECT_SOURCE_DIR}/plugins/tools-mcp)
endif()

# The CLI: a server that exits at start is a load error (exit 3), sessions
# check, no process is left behind.
file(GLOB _mcp_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/scripts/mcp_*.sh)
foreach(script ${_mcp_scripts})
  get_filename_component(name ${script} NAME_WE)
  add_test(NAME ${name} COMMAND sh ${script} $<TARGET_FILE:weir_cli>)
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "${_mcp_env};WEIR_PLUGIN_PATH=${WEIR_PLUGIN_BUILD_DIR};WEIR_SESSION_DIR=${CMAKE_CURRENT_BINARY_DIR}/mcp-sessions/${name}"
    FIXTURES_REQUIRED mcp_servers TIMEOUT 300)
endforeach()

# The JSON-RPC frame reader's fuzzer (deferred: weir_add_fuzz comes from tests/fuzz/).
function(_weir_mcp_fuzz)
  if(COMMAND weir_add_fuzz)
    weir_add_fuzz(fuzz_mcp_frame SOURCES ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_mcp_frame.c
                  ${PROJECT_SOURCE_DIR}/plugins/tools-mcp/mcp_frame.c)
    target_include_directories(fuzz_mcp_frame PRIVATE ${PROJECT_SOURCE_DIR}/plugins/tools-mcp)
  endif()
endfunction()
if(WEIR_BUILD_FUZZ)
  cmake_language(DEFER CALL _weir_mcp_fuzz)
endif()
