# `weir acp` (docs/acp.md) driven from outside by the client side of the
# official Agent Client Protocol SDK (@agentclientprotocol/sdk, pinned by
# tests/acp/package-lock.json, installed by `npm ci` into the build tree by
# the acp_sdk_install fixture).  Node and npm are required: without them the
# fixture fails and so does the test (make deps installs them).
set(WEIR_ACP_DIR ${CMAKE_BINARY_DIR}/tests/acp)

add_test(NAME acp_sdk_install
         COMMAND sh ${PROJECT_SOURCE_DIR}/cmake/npm-ci.sh ${CMAKE_CURRENT_SOURCE_DIR}/acp
                 ${WEIR_ACP_DIR}
                 node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js
                 node_modules/zod/package.json)
set_tests_properties(acp_sdk_install PROPERTIES FIXTURES_SETUP acp_sdk TIMEOUT 660)

add_test(NAME acp_client
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/acp_client.sh
                 ${CMAKE_CURRENT_SOURCE_DIR}/acp/client.mjs)
set_tests_properties(acp_client PROPERTIES
  ENVIRONMENT "${WEIR_TEST_ENV};WEIR_ACP_MODULES=${WEIR_ACP_DIR}/node_modules;WEIR_MCP_FAKE=$<TARGET_FILE:weir-mcp-fake>"
  FIXTURES_REQUIRED acp_sdk TIMEOUT 300)

# Bad input without node: the JSON-RPC errors of docs/acp.md, and a replay.
add_test(NAME acp_errors COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scripts/acp_errors.sh
                                 $<TARGET_FILE:weir_cli>)
set_tests_properties(acp_errors PROPERTIES
  ENVIRONMENT "${WEIR_TEST_ENV};WEIR_MCP_FAKE=$<TARGET_FILE:weir-mcp-fake>" TIMEOUT 120)
