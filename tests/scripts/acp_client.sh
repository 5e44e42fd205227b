#!/bin/sh
# tests/scripts/acp_client.sh CLIENT_MJS - `weir acp` (docs/acp.md) driven by
# the official ACP SDK's client (tests/acp/client.mjs) against the loopback
# mock LLM (provider-openai): a tool call the client approves through
# session/request_permission (hooks-shell's PreToolUse "ask" on tools-ffi's
# strlen named "Bash"), an MCP server passed in session/new (weir-mcp-fake),
# two cancels, bad input, and a second process that session/load's the session.
# `weir log --check` passes on the session written.  Node is required: a
# missing node, SDK or weir-mcp-fake fails the test (never skips it).
set -- openai "$1"
CLIENT=${2:?usage: $0 CLIENT_MJS}
. "$(dirname "$0")/providers_lib.sh"
require_weir_run
command -v node >/dev/null 2>&1 || { echo "FAIL: node not found (make deps installs it)"; exit 1; }
[ -f "${WEIR_ACP_MODULES:?}/@agentclientprotocol/sdk/package.json" ] ||
    { echo "FAIL: @agentclientprotocol/sdk is not installed in $WEIR_ACP_MODULES (the acp_sdk_install test)"; exit 1; }
[ -x "${WEIR_MCP_FAKE:?}" ] || { echo "FAIL: weir-mcp-fake not built"; exit 1; }

start_mock '{"requests":[
    {"text":"I will run it.","tool_calls":[{"id":"call_1","name":"Bash","arguments":"{\"command\":\"0123456789\"}"}]},
    {"text":"ran it: 10","expect":{"message_contains":"10"}},
    {"tool_calls":[{"id":"call_2","name":"mcp__fake__env","arguments":"{\"name\":\"ACP_TEST_VAR\"}"}]},
    {"text":"it is from-acp","expect":{"message_contains":"from-acp"}},
    {"tool_calls":[{"id":"call_3","name":"Bash","arguments":"{\"command\":\"ls\"}"}]},
    {"text":"a long line, one character every tenth of a second","chunk_size":1,"chunk_delay_ms":100},
    {"text":"another long line, one character every tenth of a second","chunk_size":1,"chunk_delay_ms":100},
    {"text":"cut short","finish":"length"},
    {"fault":"auth"},
    {"tool_calls":[{"id":"call_r","name":"Bash","arguments":"{\"command\":\"abc\"}"}]},
    {"text":"it was rejected","expect":{"message_contains":"reject_once"}},
    {"tool_calls":[{"id":"call_a","name":"Bash","arguments":"{\"command\":\"abc\"}"},
                   {"id":"call_b","name":"Bash","arguments":"{\"command\":\"abcd\"}"}]},
    {"text":"3 and 4","expect":{"message_contains":"4"}},
    {"text":"still here.","expect":{"message_contains":"are you still there?"}}]}'
ASK='{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo '"'"'{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"ASK-WHY\"}}'"'"'"}]}]}}'
write_config "$TMP/acp.json" "" ',
    {"id": "sh", "plugin": "tools-ffi",
     "config": {"tools": [{"library": "libc.so.6", "symbol": "strlen", "name": "Bash",
                           "prototype": "size_t strlen(const char *command)",
                           "description": "run a command (here: its length)"}]}},
    {"id": "cc-hooks", "plugin": "hooks-shell", "config": '"$ASK"'}'
mkdir -p "$TMP/project"

WEIR="$WEIR" WEIR_ACP_CONFIG="$TMP/acp.json" WEIR_ACP_CWD="$TMP/project" \
    WEIR_PLUGIN_PATH="$PLUGINS" timeout 240 node "$CLIENT" > "$TMP/client.out" 2>&1
RC=$?
cat "$TMP/client.out"
[ "$RC" = 0 ] || fail "the ACP client exited $RC"
stop_mock

n=0
for log in "$TMP"/sessions/*.jsonl; do
    [ -f "$log" ] || continue
    n=$((n + 1))
    "$WEIR" log "$log" --check > "$TMP/check" 2>&1 || { fail "weir log --check $log"; cat "$TMP/check" >&2; }
done
[ "$n" = 1 ] || fail "$n session logs written, expected 1"
[ "$FAILURES" = 0 ] || exit 1
echo "acp_client: ok"
