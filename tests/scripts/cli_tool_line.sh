#!/bin/sh
# tests/scripts/cli_tool_line.sh WEIR - a tool's activity in `weir run` is
# one stderr line per call (issue #37 item 7):
#   - a 3,000-line result shows its first line and "… (+2999 lines, M
#     bytes)", M its size; `weir log` prints the whole of it;
#   - a long single line is cut on a character boundary (a 2-byte é
#     straddling the cut is left out whole, never split into \xNN) with
#     "… (M bytes)";
#   - an error result reads "-> error: boom", never "error: Error: ...";
#   - a tool result a compaction pruned (a surface replace, its stub) is not
#     printed as another run of the tool.
WEIR=${1:?usage: $0 path/to/weir}
TOOLS="$WEIR_TEST_DRIVER_PLUGIN_DIR/weir-drvtest-tools.so"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-tool-line.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= NO_COLOR=1
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# big: 3,000 lines "line N: é"; wide: 199 x, then é across byte 200
i=1
while [ $i -le 3000 ]; do
    printf 'line %d: \303\251\\n' $i
    i=$((i + 1))
done >"$TMP/big"
big=$(sed 's/\\n$//' "$TMP/big" | tr -d '\n')
bytes=$(printf '%b' "$big" | wc -c)
x199=$(printf '%199s' '' | tr ' ' x)
e=$(printf '\303\251') # é
# config FILE WINDOW REPLIES
config() {
    cat >"$1" <<JSON
{"agent": {"provider": "scripted", "model": "small", "max_tokens": 256},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"models": {"small": {"context_window": $2, "max_output": 256}},
                         "replies": $3}},
             {"id": "tools", "plugin": "$TOOLS",
              "config": {"tools": [{"name": "big", "reply": "$big"},
                                   {"name": "wide", "reply": "${x199}$e and more"},
                                   {"name": "bad", "fail": "Error: boom"}]}},
             {"id": "compaction", "plugin": "compaction-basic", "config": {}}]}
JSON
}
config "$TMP/calls.json" 16000 '[{"tool_calls": [{"id": "c1", "name": "big", "arguments": "{}"},
                                   {"id": "c2", "name": "wide", "arguments": "{}"},
                                   {"id": "c3", "name": "bad", "arguments": "{}"}]},
                                  {"text": "done"}, {"text": "again"}, {"text": "more"}]'
"$WEIR" run -c "$TMP/calls.json" -s t "go" >"$TMP/out" 2>"$TMP/err" || fail "run: exit $? $(cat "$TMP/err")"
grep -qx "\[tool\] big {} -> line 1: $e… (+2999 lines, $bytes bytes)" "$TMP/err" ||
    fail "big: $(grep big "$TMP/err")"
grep -qx "\[tool\] wide {} -> ${x199}… (210 bytes)" "$TMP/err" || fail "wide: $(grep wide "$TMP/err")"
grep -qx '\[tool\] bad {} -> error: boom' "$TMP/err" || fail "bad: $(grep bad "$TMP/err")"
[ "$(grep -c '^\[tool\]' "$TMP/err")" -eq 3 ] || fail "not one line per call: $(cat "$TMP/err")"
"$WEIR" log -c "$TMP/calls.json" t >"$TMP/log" 2>&1 || fail "weir log: $(cat "$TMP/log")"
grep -q "line 3000: $e" "$TMP/log" || fail "weir log does not show the whole result"

# the next run (its script starts over) calls the tools again, and the
# pressure before its step 2 prunes the first run's big result (the summary
# takes "done"): three tool lines, none for the stub
"$WEIR" resume -c "$TMP/calls.json" t "next" >"$TMP/out" 2>"$TMP/err" ||
    fail "resume: exit $? $(cat "$TMP/err")"
grep -q '"type":"compaction/prune"' "$TMP/sessions/t.jsonl" || fail "no prune: the test needs one"
[ "$(grep -c '^\[tool\]' "$TMP/err")" -eq 3 ] ||
    fail "a pruned result printed as a tool run: $(cat "$TMP/err")"
grep -q 'Sanitizer\|runtime error' "$TMP/err" && fail "sanitizer: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_tool_line: ok"
exit $FAILURES
