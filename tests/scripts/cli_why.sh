#!/bin/sh
# tests/scripts/cli_why.sh WEIR - decision provenance through `weir run`:
# hook/decision events in the log (a tools/pre-execute deny by a config row,
# the system prompt's rewrite), `weir log ID --why SEQ` printing them newest
# first (text and --json), `weir log --check` accepting them, and
# session.provenance "off" logging none (docs/hooks.md, "Provenance").
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-why.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
: "${WEIR_TEST_DRIVER_PLUGIN_DIR:?run through ctest}"

# the built-in deployment plus a row that denies the demo's pow tool
cat >"$TMP/gate.json" <<JSON
{"plugins": [{"id": "gate", "plugin": "$WEIR_TEST_DRIVER_PLUGIN_DIR/weir-drvtest-hooks.so",
              "config": {"tool_gate": {"deny": "pow"}}}]}
JSON
"$WEIR" run -c default -c "$TMP/gate.json" -s g "2 to the power 10?" >"$TMP/out" 2>&1 ||
    fail "run: $(cat "$TMP/out")"
LOG="$WEIR_SESSION_DIR/g.jsonl"
grep -q '"type":"hook/decision","data":{"hook":"tools/pre-execute","plugin":"drvtest-hooks@0.1.0","row":"gate","decision":"deny","turn":1,"step":1,"latency_us":[0-9]*,"detail":"drvtest gate"},"ignorable":true' "$LOG" ||
    fail "no deny decision: $(grep hook/ "$LOG")"
grep -q '"hook":"system-prompt/assemble","plugin":"system-prompt@[^"]*","row":"prompt","decision":"rewrite"' "$LOG" ||
    fail "no system prompt rewrite: $(grep hook/ "$LOG")"
"$WEIR" log g --check >"$TMP/check" 2>&1 || fail "--check: $(cat "$TMP/check")"
grep -q ': ok (' "$TMP/check" || fail "check: $(cat "$TMP/check")"

# --why the tool's result: the deny, then (older) the prompt's rewrite
seq=$(grep '"type":"tool/result"' "$LOG" | head -n 1 | sed 's/^{"seq":\([0-9]*\),.*/\1/')
deny=$(grep '"decision":"deny"' "$LOG" | sed 's/^{"seq":\([0-9]*\),.*/\1/')
prompt=$(grep '"decision":"rewrite"' "$LOG" | sed 's/^{"seq":\([0-9]*\),.*/\1/')
"$WEIR" log g --why "$seq" >"$TMP/why" 2>&1 || fail "--why $seq: $(cat "$TMP/why")"
head -n 1 "$TMP/why" | grep -q "^decisions before seq $seq (tool/result, turn 1, step 1), newest first:$" ||
    fail "--why header: $(cat "$TMP/why")"
sed -n 2p "$TMP/why" | grep -q "^  seq $deny  step 1  tools/pre-execute  deny  row gate (drvtest-hooks@0.1.0)  [0-9]* us  drvtest gate$" ||
    fail "--why first line: $(cat "$TMP/why")"
sed -n 3p "$TMP/why" | grep -q "^  seq $prompt  step 1  system-prompt/assemble  rewrite  row prompt " ||
    fail "--why second line: $(cat "$TMP/why")"
[ "$(wc -l <"$TMP/why")" -eq 3 ] || fail "--why: three lines: $(cat "$TMP/why")"
# the step-2 answer: the turn's prompt still shaped it, the step-1 deny did not
last=$(grep '"type":"assistant/message"' "$LOG" | tail -n 1 | sed 's/^{"seq":\([0-9]*\),.*/\1/')
"$WEIR" log g --why "$last" >"$TMP/why2" 2>&1 || fail "--why $last"
grep -q 'system-prompt/assemble  rewrite' "$TMP/why2" || fail "--why $last: $(cat "$TMP/why2")"
grep -q 'deny' "$TMP/why2" && fail "--why $last shows step 1's deny: $(cat "$TMP/why2")"
# --json: the events themselves, newest first
"$WEIR" log g --why "$seq" --json >"$TMP/whyj" || fail "--why --json"
[ "$(wc -l <"$TMP/whyj")" -eq 2 ] || fail "--why --json: $(cat "$TMP/whyj")"
head -n 1 "$TMP/whyj" | grep -q "^{\"seq\":$deny,.*\"type\":\"hook/decision\"" || fail "--why --json order"
# before any decision: none; bad arguments
"$WEIR" log g --why 0 >"$TMP/why0" || fail "--why 0"
grep -q '(none' "$TMP/why0" || fail "--why 0: $(cat "$TMP/why0")"
"$WEIR" log g --why 100000 >/dev/null 2>&1; [ $? -eq 1 ] || fail "--why past the end: want 1"
"$WEIR" log g --why x >/dev/null 2>&1; [ $? -eq 2 ] || fail "--why x: want 2"
"$WEIR" log g --why 1 --check >/dev/null 2>&1; [ $? -eq 2 ] || fail "--why --check: want 2"

# session.provenance "off": no decision is logged
cat >"$TMP/off.json" <<JSON
{"session": {"provenance": "off"}}
JSON
"$WEIR" run -c default -c "$TMP/gate.json" -c "$TMP/off.json" -s off "2 to the power 10?" \
    >"$TMP/out" 2>&1 || fail "run off: $(cat "$TMP/out")"
grep -q 'hook/decision' "$WEIR_SESSION_DIR/off.jsonl" && fail "provenance off logged decisions"
grep -q '"type":"tool/result"' "$WEIR_SESSION_DIR/off.jsonl" || fail "run off made no tool call"

[ "$FAILURES" -eq 0 ] && echo "cli_why: ok"
exit "$FAILURES"
