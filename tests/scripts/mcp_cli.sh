#!/bin/sh
# tests/scripts/mcp_cli.sh WEIR - tools-mcp through `weir run` (issue #12):
#   1. a server that exits at start is a load error: exit 3, naming the
#      server and quoting its stderr; no process is left;
#   2. a scripted call of a fake server's tool works, its logging
#      notifications reach weir's log at their level, its stderr is
#      forwarded prefixed with the server's name, `weir log --check` passes;
#   3. a .mcp.json file (Claude Code's format) works as mcp_config;
#   4. no process tagged for this test is left running;
#   also logging notifications are rate-limited as stderr is, and a NUL in a
#   tool name skips that tool with a warning (issue #31, 7 and 8).
# Needs $WEIR_MCP_FAKE (ctest sets it) and jq.
WEIR=${1:?usage: $0 path/to/weir}
FAKE=${WEIR_MCP_FAKE:?WEIR_MCP_FAKE is not set (run through ctest)}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-mcp-cli.XXXXXX") || exit 1
TAG="mcp-cli-$$"
trap 'pkill_tag; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= WEIR_SESSION_DIR="$TMP/sessions"
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
# processes of this test, by tag (ps, no pkill -f: only ours, by pid)
tagged() { ps -eo pid=,args= | grep -F -- "--tag $TAG" | grep -v grep; }
pkill_tag() { tagged | while read -r pid _; do kill -9 "$pid" 2>/dev/null; done; }

cat >"$TMP/script.json" <<'JSON'
{"replies": [
  {"text": "Calling.", "tool_calls": [
    {"id": "c1", "name": "mcp__fake__echo", "arguments": {"text": "from the cli"}},
    {"id": "c2", "name": "mcp__fake__log", "arguments": {}}]},
  {"text": "Done."}]}
JSON
deploy() { # deploy FILE SERVERS_JSON
    cat >"$1" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted", "config": {"script": "$TMP/script.json"}},
             {"id": "mcp", "plugin": "tools-mcp", "config": $2}]}
JSON
}

# 1. exits at start
deploy "$TMP/broken.json" "{\"servers\": {\"broken\": {\"command\": \"$FAKE\", \"args\": [\"--tag\", \"$TAG\", \"--exit-at-start\", \"1\", \"--stderr\", \"fatal: the token is not valid\"]}}}"
timeout 30 "$WEIR" run -c "$TMP/broken.json" -s broken "hi" >"$TMP/out1" 2>"$TMP/err1"
rc=$?
[ $rc -eq 3 ] || fail "a server that exits at start: exit $rc, want 3 ($(cat "$TMP/err1"))"
grep -q "MCP server 'broken' failed to start" "$TMP/err1" || fail "the load error does not name the server: $(cat "$TMP/err1")"
grep -q "fatal: the token is not valid" "$TMP/err1" || fail "the load error does not quote its stderr: $(cat "$TMP/err1")"
[ -z "$(tagged)" ] || fail "processes left after the load error: $(tagged)"

# 2. a call, logging, stderr
deploy "$TMP/ok.json" "{\"servers\": {\"fake\": {\"command\": \"$FAKE\", \"args\": [\"--tag\", \"$TAG\"]}}}"
WEIR_LOG_LEVEL=debug timeout 60 "$WEIR" run -c "$TMP/ok.json" -s ok "go" >"$TMP/out2" 2>"$TMP/err2" ||
    fail "weir run: exit $? ($(cat "$TMP/err2"))"
grep -q '\[tool\] mcp__fake__echo {"text":"from the cli"} -> echo: from the cli' "$TMP/err2" ||
    fail "no echo result: $(cat "$TMP/err2")"
grep -q 'weir\[mcp\]: debug: \[fake\] fake: a debug message' "$TMP/err2" || fail "debug log: $(cat "$TMP/err2")"
grep -q 'weir\[mcp\]: info: \[fake\] fake: a info message' "$TMP/err2" || fail "info log"
grep -q 'weir\[mcp\]: warning: \[fake\] fake: a warning message' "$TMP/err2" || fail "warning log"
grep -q 'weir\[mcp\]: error: \[fake\] fake: a error message' "$TMP/err2" || fail "error log"
grep -q 'weir\[mcp\]: info: \[fake\] fake: started' "$TMP/err2" || fail "stderr is not forwarded: $(cat "$TMP/err2")"
# at the default level only warnings and errors show
timeout 60 "$WEIR" run -c "$TMP/ok.json" -s ok2 "go" >/dev/null 2>"$TMP/err3" || fail "weir run (default level)"
grep -q 'a debug message\|a info message\|fake: started' "$TMP/err3" && fail "debug/info shown at the default level"
grep -q 'a warning message' "$TMP/err3" || fail "no warning at the default level"
for s in ok ok2; do
    timeout 20 "$WEIR" log -c "$TMP/ok.json" "$s" --check >"$TMP/check" 2>&1 || fail "log --check $s: $(cat "$TMP/check")"
done
[ -z "$(tagged)" ] || fail "processes left after the runs: $(tagged)"

# 2b. progress: a live tool/progress event per notification (--json), and on
#     a terminal (script(1)) one status line that the result replaces
cat >"$TMP/progress.json" <<'JSON'
{"replies": [
  {"tool_calls": [{"id": "p1", "name": "mcp__fake__progress", "arguments": {"steps": 3}}]},
  {"text": "Done."}]}
JSON
sed "s|$TMP/script.json|$TMP/progress.json|" "$TMP/ok.json" >"$TMP/progress-deploy.json"
timeout 60 "$WEIR" run --json -c "$TMP/progress-deploy.json" -s prog "go" >"$TMP/out6" 2>"$TMP/err6" ||
    fail "weir run --json (progress): exit $? ($(cat "$TMP/err6"))"
n=$(jq -c 'select(.type == "tool/progress") | .data.progress.progress' "$TMP/out6" | tr '\n' ' ')
[ "$n" = "1 2 3 " ] || fail "--json progress events: '$n' ($(cat "$TMP/out6"))"
jq -e 'select(.type == "tool/progress") | select(.seq) ' "$TMP/out6" >/dev/null && fail "a progress event has a seq"
grep -q '"tool/progress"' "$TMP/sessions/prog.jsonl" && fail "progress was logged"
if command -v script >/dev/null 2>&1; then
    WEIR_BIN=$WEIR CFG="$TMP/progress-deploy.json" timeout 60 script -qfec \
        'exec "$WEIR_BIN" run -c "$CFG" -s progtty go' "$TMP/tty.txt" >/dev/null 2>&1 </dev/null ||
        fail "weir run under script(1): exit $?"
    grep -q '\[tool\] mcp__fake__progress: 3/3 step 3' "$TMP/tty.txt" ||
        fail "no progress line on the terminal: $(cat -v "$TMP/tty.txt")"
    grep -q '\[tool\] mcp__fake__progress {"steps":3} -> done' "$TMP/tty.txt" ||
        fail "no result line on the terminal: $(cat -v "$TMP/tty.txt")"
else
    fail "script(1) not found (util-linux)"
fi

# 2c. stderr is rate-limited: 2000 lines become at most ~60, and a line says how many were not shown
cat >"$TMP/spam.json" <<'JSON'
{"replies": [
  {"tool_calls": [{"id": "s1", "name": "mcp__fake__spam", "arguments": {"lines": 2000}}]},
  {"text": "Done."}]}
JSON
sed "s|$TMP/script.json|$TMP/spam.json|" "$TMP/ok.json" >"$TMP/spam-deploy.json"
WEIR_LOG_LEVEL=info timeout 60 "$WEIR" run -c "$TMP/spam-deploy.json" -s spam "go" >/dev/null 2>"$TMP/err7" ||
    fail "weir run (spam): exit $? ($(tail -3 "$TMP/err7"))"
shown=$(grep -c '\[fake\] spam line' "$TMP/err7")
[ "$shown" -ge 20 ] && [ "$shown" -le 80 ] || fail "stderr lines shown: $shown, want about 40"
grep -q 'more stderr lines not shown: too many' "$TMP/err7" || fail "no count of the lines not shown"

# 2d. logging notifications get the same limit as stderr (issue #31, 7):
#     20000 notifications/message become at most ~60 lines, and a line says
#     how many were not shown
cat >"$TMP/logspam.json" <<'JSON'
{"replies": [
  {"tool_calls": [{"id": "l1", "name": "mcp__fake__logspam", "arguments": {"count": 20000}}]},
  {"text": "Done."}]}
JSON
sed "s|$TMP/script.json|$TMP/logspam.json|" "$TMP/ok.json" >"$TMP/logspam-deploy.json"
timeout 60 "$WEIR" run -c "$TMP/logspam-deploy.json" -s logspam "go" >/dev/null 2>"$TMP/err8" ||
    fail "weir run (logspam): exit $? ($(tail -3 "$TMP/err8"))"
shown=$(grep -c '\[fake\] fake: spam message' "$TMP/err8")
[ "$shown" -ge 20 ] && [ "$shown" -le 80 ] || fail "log messages shown: $shown, want about 40"
grep -q 'log messages not shown: too many' "$TMP/err8" || fail "no count of the log messages not shown"
lines=$(wc -l <"$TMP/err8")
[ "$lines" -le 120 ] || fail "stderr has $lines lines after a logging flood"

# 2e. a NUL in one tool's name (issue #31, 8): that tool is skipped with a
#     warning that shows the name escaped, the others are offered
deploy "$TMP/nul.json" "{\"servers\": {\"fake\": {\"command\": \"$FAKE\", \"args\": [\"--tag\", \"$TAG\", \"--nul-tool\"], \"startup_timeout_ms\": 3000}}}"
timeout 60 "$WEIR" run -c "$TMP/nul.json" -s nul "go" >/dev/null 2>"$TMP/err9" ||
    fail "weir run (a NUL in a tool name): exit $? ($(cat "$TMP/err9"))"
grep -q "MCP server 'fake': tool \"nul\\\\u0000name\" is not offered: its name holds a NUL character" "$TMP/err9" ||
    fail "no warning for the NUL name: $(cat "$TMP/err9")"
grep -q '\[tool\] mcp__fake__echo {"text":"from the cli"} -> echo: from the cli' "$TMP/err9" ||
    fail "the other tools are not offered: $(cat "$TMP/err9")"
[ -z "$(tagged)" ] || fail "processes left after the NUL run: $(tagged)"

# 3. .mcp.json as is
cat >"$TMP/.mcp.json" <<JSON
{"mcpServers": {"fake": {"command": "\${MCP_CLI_FAKE}", "args": ["--tag", "$TAG"], "env": {}}}}
JSON
deploy "$TMP/import.json" "{\"mcp_config\": \"$TMP/.mcp.json\"}"
MCP_CLI_FAKE=$FAKE timeout 60 "$WEIR" run -c "$TMP/import.json" -s imp "go" >/dev/null 2>"$TMP/err4" ||
    fail "weir run with mcp_config: exit $? ($(cat "$TMP/err4"))"
grep -q '\[tool\] mcp__fake__echo' "$TMP/err4" || fail "mcp_config: no call: $(cat "$TMP/err4")"
timeout 20 "$WEIR" log -c "$TMP/import.json" imp --check >"$TMP/check" 2>&1 || fail "log --check imp: $(cat "$TMP/check")"
[ -z "$(tagged)" ] || fail "processes left after mcp_config: $(tagged)"

# 4. examples/deployments/mcp.json as shipped, with npx standing for the
#    installed reference server (no download here) and a script that lists
#    the folder
EX="$(cd "$(dirname "$0")/../../examples/deployments" && pwd)"
MODS=${WEIR_MCP_MODULES:?WEIR_MCP_MODULES is not set (run through ctest)}
mkdir -p "$TMP/bin" "$TMP/folder/inner"
echo "hello" >"$TMP/folder/readme.txt"
cat >"$TMP/bin/npx" <<SH
#!/bin/sh
# npx -y @modelcontextprotocol/server-filesystem@VERSION DIR...
[ "\$1" = "-y" ] && shift
case "\$1" in @modelcontextprotocol/server-filesystem@*) shift ;; *) echo "unexpected npx \$*" >&2; exit 2 ;; esac
exec node "$MODS/server-filesystem/dist/index.js" "\$@"
SH
chmod +x "$TMP/bin/npx"
cat >"$TMP/list.json" <<JSON
{"replies": [
  {"text": "Listing.", "tool_calls": [
    {"id": "c1", "name": "mcp__fs__list_directory", "arguments": {"path": "$TMP/folder"}},
    {"id": "c2", "name": "mcp__fs__write_file", "arguments": {"path": "$TMP/folder/x", "content": "no"}}]},
  {"text": "Listed."}]}
JSON
cat >"$TMP/script-overlay.json" <<JSON
{"plugins": [{"id": "scripted", "plugin": "provider-scripted", "config": {"script": "$TMP/list.json"}}]}
JSON
(cd "$TMP" && PATH="$TMP/bin:$PATH" MCP_FS_DIR="$TMP/folder" timeout 60 "$WEIR" run \
    -c "$EX/base.json" -c "$EX/dev.json" -c "$EX/mcp.json" -c "$TMP/script-overlay.json" \
    -s example "what is in the folder?" >"$TMP/out5" 2>"$TMP/err5") ||
    fail "examples/deployments/mcp.json: exit $? ($(cat "$TMP/err5"))"
# one line per tool call (its first line; the whole result is in the log)
grep -q '\[tool\] mcp__fs__list_directory .* -> \[DIR\] inner… (+1 line, [0-9]* bytes)$' "$TMP/err5" ||
    fail "examples/deployments/mcp.json: no listing: $(cat "$TMP/err5")"
timeout 20 "$WEIR" log -c "$EX/base.json" "$TMP/sessions/example.jsonl" >"$TMP/log5" 2>&1
grep -q 'readme.txt' "$TMP/log5" || fail "examples/deployments/mcp.json: readme.txt not listed"
grep -q "\[tool\] mcp__fs__write_file .* -> error: unknown tool 'mcp__fs__write_file'\$" "$TMP/err5" ||
    fail "examples/deployments/mcp.json: write_file is not denied: $(cat "$TMP/err5")"
[ -e "$TMP/folder/x" ] && fail "write_file wrote"
timeout 20 "$WEIR" log -c "$EX/base.json" "$TMP/sessions/example.jsonl" --check >"$TMP/check" 2>&1 ||
    fail "log --check example: $(cat "$TMP/check")"

echo "mcp_cli: $FAILURES failures"
exit $((FAILURES > 0))
