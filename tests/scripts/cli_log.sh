#!/bin/sh
# tests/scripts/cli_log.sh WEIR - `weir log` (transcript, --derive, --check)
# and `weir resume` on sessions written by `weir run`, including a log left
# open by a crash.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-log.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

"$WEIR" run -s s1 "first" >/dev/null 2>&1 || fail "run s1"
"$WEIR" run -s s1 "second" >/dev/null 2>&1 || fail "run s1 again"
"$WEIR" run -s s2 "other" >/dev/null 2>&1 || fail "run s2"

for s in s1 s2 "$WEIR_SESSION_DIR/s1.jsonl"; do
    "$WEIR" log "$s" --check >"$TMP/check" 2>&1 || fail "log $s --check: $(cat "$TMP/check")"
    grep -q ': ok (' "$TMP/check" || fail "check report for $s: $(cat "$TMP/check")"
done

"$WEIR" log s1 >"$TMP/transcript" || fail "log s1"
grep -qx 'user: first' "$TMP/transcript" || fail "transcript lacks the first prompt"
grep -qx 'user: second' "$TMP/transcript" || fail "transcript lacks the resumed prompt"
grep -qx 'tool pow: 1024' "$TMP/transcript" || fail "transcript lacks the tool result"
grep -qx -- '--- turn 2 ended: completed' "$TMP/transcript" || fail "transcript lacks turn 2's end"
grep -q '(request: scripted/demo, resume)' "$TMP/transcript" || fail "second run's header is not 'resume'"

"$WEIR" log s2 --derive >"$TMP/derive" || fail "log --derive"
[ "$(wc -l <"$TMP/derive")" -eq 1 ] || fail "--derive is one line"
grep -q '^\[{"role":"system"' "$TMP/derive" || fail "--derive: $(cut -c1-80 "$TMP/derive")"
"$WEIR" log s2 --derive --check >/dev/null 2>&1; [ $? -eq 2 ] || fail "--derive --check: want 2"

# a crash right after the first tool/call leaves an open turn: reported, not an error
head -n 10 "$WEIR_SESSION_DIR/s2.jsonl" >"$WEIR_SESSION_DIR/crashed.jsonl"
grep -q '"type":"tool/call"' "$WEIR_SESSION_DIR/crashed.jsonl" || fail "fixture: no tool/call in the first 10 lines"
"$WEIR" log crashed --check >"$TMP/check" || fail "open turn is not an error: $(cat "$TMP/check")"
grep -q '^open: ' "$TMP/check" || fail "open turn not reported: $(cat "$TMP/check")"
"$WEIR" resume crashed >/dev/null 2>&1 || fail "resume crashed"
"$WEIR" log crashed --check >"$TMP/check" || fail "check after resume"
grep -q '^open: ' "$TMP/check" && fail "still open after resume: $(cat "$TMP/check")"
"$WEIR" log crashed | grep -qx -- '--- turn 1 ended: interrupted' || fail "resume did not close the turn"

# a corrupt line in the middle fails the check
sed '3s/.*/{"seq":2,"broken/' "$WEIR_SESSION_DIR/s1.jsonl" >"$TMP/corrupt.jsonl"
"$WEIR" log "$TMP/corrupt.jsonl" --check >/dev/null 2>&1; [ $? -eq 1 ] || fail "corrupt log: want 1"

[ $FAILURES -eq 0 ] && echo "cli_log: ok"
exit $FAILURES
