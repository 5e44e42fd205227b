#!/bin/sh
# tests/scripts/acp_errors.sh WEIR - `weir acp`'s answers to bad input
# (docs/acp.md, "Errors"), without node: every request gets exactly one
# JSON-RPC response with the documented code and a message naming the
# field, notifications get none, and the connection goes on (the last
# request is still answered).  A session made by `weir run` (the scripted
# demo) is loaded and replayed.  MCP servers: one that fails to start fails
# session/new naming it; an HTTP one (weir-mcp-fake --http on 127.0.0.1) is
# started with the session.  Needs jq.
WEIR=${1:?usage: $0 WEIR}
command -v jq >/dev/null 2>&1 || { echo "FAIL: jq not found"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-acp-errors.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions"
FAILURES=0
fail() {
    echo "FAIL: $*" >&2
    FAILURES=$((FAILURES + 1))
}

# an MCP server over HTTP (weir-mcp-fake on 127.0.0.1), for a session/new
FAKE=${WEIR_MCP_FAKE:?}
[ -x "$FAKE" ] || { echo "FAIL: weir-mcp-fake not built"; exit 1; }
"$FAKE" --http "$TMP/port" --log "$TMP/fake.log" > /dev/null 2>&1 &
FAKE_PID=$!
trap 'kill $FAKE_PID 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
i=0
while [ ! -s "$TMP/port" ]; do
    i=$((i + 1))
    [ $i -gt 100 ] && { echo "FAIL: weir-mcp-fake --http did not start"; exit 1; }
    sleep 0.1
done
PORT=$(cat "$TMP/port")

timeout 60 "$WEIR" run -s acp-old "2 to the power 10" > "$TMP/run.out" 2> "$TMP/run.err" ||
    { fail "weir run: $(cat "$TMP/run.err")"; exit 1; }

new='"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}'
cat > "$TMP/in" <<EOF2
{"jsonrpc":"2.0","id":1,$new}
{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"1"}}
{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}
{not json
[{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}]
{"id":6,"method":"initialize","params":{"protocolVersion":1}}
{"jsonrpc":"2.0","id":{"x":1},"method":"initialize"}

{"jsonrpc":"2.0","method":"weir/no-such-notification","params":{}}
{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nobody"}}
{"jsonrpc":"2.0","id":10,"method":"weir/no-such-method"}
{"jsonrpc":"2.0","id":11,"method":"session/prompt","params":{"sessionId":"nobody","prompt":[{"type":"text","text":"hi"}]}}
{"jsonrpc":"2.0","id":12,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"name":"bad name","command":"x","args":[],"env":[]}]}}
{"jsonrpc":"2.0","id":13,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"type":"sse","name":"s","url":"http://127.0.0.1:9/sse","headers":[]}]}}
{"jsonrpc":"2.0","id":14,"method":"session/new","params":{"cwd":"relative","mcpServers":[]}}
{"jsonrpc":"2.0","id":15,"method":"session/new","params":[]}
{"jsonrpc":"2.0","id":16,"method":"session/load","params":{"sessionId":"no-such","cwd":"/tmp","mcpServers":[]}}
{"jsonrpc":"2.0","id":17,"method":"session/load","params":{"sessionId":"../x","cwd":"/tmp","mcpServers":[]}}
{"jsonrpc":"2.0","id":18,"method":"session/load","params":{"sessionId":"acp-old","cwd":"/tmp","mcpServers":[]}}
{"jsonrpc":"2.0","id":19,"method":"session/prompt","params":{"sessionId":"acp-old","prompt":[{"type":"image","data":"AA==","mimeType":"image/png"}]}}
{"jsonrpc":"2.0","id":20,"method":"session/prompt","params":{"sessionId":"acp-old","prompt":[]}}
{"jsonrpc":"2.0","id":21,"method":"session/prompt","params":{"sessionId":"acp-old"}}
{"jsonrpc":"2.0","id":22,"method":"session/load","params":{"sessionId":"acp-old","cwd":"/tmp","mcpServers":[]}}
{"jsonrpc":"2.0","id":23,$new}
{"jsonrpc":"2.0","id":24,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"name":"dead","command":"$FAKE","args":["--exit-at-start","3","--stderr","DEAD-AT-START"],"env":[]}]}}
{"jsonrpc":"2.0","id":25,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"type":"http","name":"web","url":"http://127.0.0.1:$PORT/mcp","headers":[{"name":"X-Acp","value":"1"}]}]}}
EOF2
timeout 60 "$WEIR" acp < "$TMP/in" > "$TMP/out" 2> "$TMP/err"
RC=$?
[ "$RC" = 0 ] || fail "weir acp exited $RC: $(cat "$TMP/err")"
grep -q 'Sanitizer\|runtime error' "$TMP/err" && fail "sanitizer report: $(cat "$TMP/err")"
jq -e . "$TMP/out" > /dev/null || fail "stdout is not JSON lines: $(cat "$TMP/out")"

# expect ID CODE [MESSAGE_PART]: the one response to ID (null: the id-less ones, in order)
expect() {
    got=$(jq -c "select(.id == $1 and .method == null)" "$TMP/out")
    n=$(printf '%s\n' "$got" | grep -c .)
    [ "$n" = 1 ] || { fail "id $1: $n responses: $got"; return; }
    code=$(printf '%s' "$got" | jq -r '.error.code // "ok"')
    [ "$code" = "$2" ] || fail "id $1: code $code, expected $2: $got"
    [ -z "${3:-}" ] || printf '%s' "$got" | jq -r '.error.message' | grep -qF "$3" ||
        fail "id $1: the message does not say '$3': $got"
}
expect 1 -32600 'call initialize first'
expect 2 -32602 'protocolVersion'
expect 3 ok
expect 6 -32600 'jsonrpc'
expect 10 -32601 'weir/no-such-method'
expect 11 -32002 'nobody'
expect 12 -32602 'mcpServers[0] bad name: name'
expect 13 -32602 'sse'
expect 14 -32602 'cwd'
expect 15 -32602 'params'
expect 16 -32002 'no-such'
expect 17 -32602 'sessionId'
expect 18 ok
expect 19 -32602 'prompt[0]: type'
expect 20 -32602 'prompt'
expect 21 -32602 'prompt'
expect 22 -32600 'open already'
expect 23 ok
expect 24 -32603 "'dead'"
expect 25 ok
grep -q '"initialize"' "$TMP/fake.log" || fail "the HTTP MCP server was never contacted: $(cat "$TMP/fake.log")"
# the id-less answers: the malformed line, the batch, the object id
nulls=$(jq -r 'select(.id == null and .method == null) | .error.code' "$TMP/out" | tr '\n' ' ')
[ "$nulls" = "-32700 -32600 -32600 " ] || fail "id-less answers: $nulls"
# nothing else: one line per request, none for the notifications
lines=$(grep -c . "$TMP/out")
updates=$(jq -r 'select(.method == "session/update") | .params.update.sessionUpdate' "$TMP/out" | grep -c .)
[ $((lines - updates)) = 23 ] || fail "$((lines - updates)) responses, expected 23: $(cat "$TMP/out")"
grep -q 'no-such-notification' "$TMP/err" || fail "the unknown notification is not on stderr"
# the replay of the weir run session: its prompt, the tool call and the answer
jq -r 'select(.method == "session/update") | .params.update |
       .sessionUpdate + ":" + (if (.content | type) == "object" then .content.text
                                 else .toolCallId end) + ":" + (.status // "")' \
    "$TMP/out" > "$TMP/replay"
grep -q '^user_message_chunk:2 to the power 10:$' "$TMP/replay" || fail "replay: no user message: $(cat "$TMP/replay")"
grep -q '^tool_call:.*:pending$' "$TMP/replay" || fail "replay: no tool_call: $(cat "$TMP/replay")"
grep -q '^tool_call_update:.*:completed$' "$TMP/replay" || fail "replay: no completed call: $(cat "$TMP/replay")"
grep -q '^agent_message_chunk:.*1024' "$TMP/replay" || fail "replay: no answer: $(cat "$TMP/replay")"
# another store (session.store "memory"): a session it does not hold is not
# created by a load
echo '{"session": {"store": "memory"}}' > "$TMP/memory.json"
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}' \
    '{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"acp-old","cwd":"/tmp","mcpServers":[]}}' |
    timeout 60 "$WEIR" acp -c default -c "$TMP/memory.json" > "$TMP/mem.out" 2> "$TMP/mem.err" ||
    fail "weir acp (memory store) exited $?: $(cat "$TMP/mem.err")"
jq -e 'select(.id == 2) | .error.code == -32002' "$TMP/mem.out" > /dev/null ||
    fail "memory store: load of a session it does not hold: $(cat "$TMP/mem.out")"
[ "$FAILURES" = 0 ] || exit 1
echo "acp_errors: ok"
