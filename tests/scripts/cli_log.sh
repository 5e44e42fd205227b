#!/bin/sh
# tests/scripts/cli_log.sh WEIR - `weir log` (transcript, --json, --derive, --check)
# and `weir resume` on sessions written by `weir run`, including a log left
# open by a crash.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-log.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# prompts that ask for a power: the demo calls its pow tool
"$WEIR" run -s s1 "first: 2 to the power 10?" >/dev/null 2>&1 || fail "run s1"
"$WEIR" run -s s1 "second: 3 to the power 2?" >/dev/null 2>&1 || fail "run s1 again"
"$WEIR" run -s s2 "other: 2^8" >/dev/null 2>&1 || fail "run s2"

for s in s1 s2 "$WEIR_SESSION_DIR/s1.jsonl"; do
    "$WEIR" log "$s" --check >"$TMP/check" 2>&1 || fail "log $s --check: $(cat "$TMP/check")"
    grep -q ': ok (' "$TMP/check" || fail "check report for $s: $(cat "$TMP/check")"
done

"$WEIR" log s1 >"$TMP/transcript" || fail "log s1"
grep -qx 'user: first: 2 to the power 10?' "$TMP/transcript" || fail "transcript lacks the first prompt"
grep -qx 'user: second: 3 to the power 2?' "$TMP/transcript" || fail "transcript lacks the resumed prompt"
grep -qx 'tool pow: 1024' "$TMP/transcript" || fail "transcript lacks the tool result"
grep -qx -- '--- turn 2 ended: completed' "$TMP/transcript" || fail "transcript lacks turn 2's end"
grep -q '(request: scripted/demo, resume)' "$TMP/transcript" || fail "second run's header is not 'resume'"

"$WEIR" log s2 --derive >"$TMP/derive" || fail "log --derive"
[ "$(wc -l <"$TMP/derive")" -eq 1 ] || fail "--derive is one line"
grep -q '^\[{"role":"system"' "$TMP/derive" || fail "--derive: $(cut -c1-80 "$TMP/derive")"
"$WEIR" log s2 --derive --check >/dev/null 2>&1; [ $? -eq 2 ] || fail "--derive --check: want 2"

# --json: the events through the one reader, one JSON object per line (the
# log's own lines); a torn last line is left out; a refused log is not printed
"$WEIR" log s1 --json >"$TMP/events" 2>"$TMP/err" || fail "log --json: $(cat "$TMP/err")"
cmp -s "$TMP/events" "$WEIR_SESSION_DIR/s1.jsonl" || fail "log --json differs from the log's lines"
[ "$(grep -c '"type":"turn/start"' "$TMP/events")" -eq 2 ] || fail "log --json: two turns"
{ cat "$WEIR_SESSION_DIR/s2.jsonl"; printf '{"seq":99,"tor'; } >"$TMP/torn.jsonl"
"$WEIR" log "$TMP/torn.jsonl" --json >"$TMP/events" 2>/dev/null || fail "log --json on a torn tail"
cmp -s "$TMP/events" "$WEIR_SESSION_DIR/s2.jsonl" || fail "log --json printed a torn line"
"$WEIR" log s1 --json --derive >/dev/null 2>&1; [ $? -eq 2 ] || fail "--json --derive: want 2"

# a crash right after the first tool/call leaves an open turn: reported, not an error
sed '/"type":"tool\/call"/q' "$WEIR_SESSION_DIR/s2.jsonl" >"$WEIR_SESSION_DIR/crashed.jsonl"
grep -q '"type":"tool/call"' "$WEIR_SESSION_DIR/crashed.jsonl" || fail "fixture: no tool/call in s2"
"$WEIR" log crashed --check >"$TMP/check" || fail "open turn is not an error: $(cat "$TMP/check")"
grep -q '^open: ' "$TMP/check" || fail "open turn not reported: $(cat "$TMP/check")"
"$WEIR" resume crashed >/dev/null 2>&1 || fail "resume crashed"
"$WEIR" log crashed --check >"$TMP/check" || fail "check after resume"
grep -q '^open: ' "$TMP/check" && fail "still open after resume: $(cat "$TMP/check")"
"$WEIR" log crashed | grep -qx -- '--- turn 1 ended: interrupted' || fail "resume did not close the turn"

# a corrupt line in the middle fails the check
sed '3s/.*/{"seq":2,"broken/' "$WEIR_SESSION_DIR/s1.jsonl" >"$TMP/corrupt.jsonl"
"$WEIR" log "$TMP/corrupt.jsonl" --check >/dev/null 2>&1; [ $? -eq 1 ] || fail "corrupt log: want 1"
"$WEIR" log "$TMP/corrupt.jsonl" --json >"$TMP/events" 2>"$TMP/err"; [ $? -eq 1 ] || fail "corrupt --json: want 1"
[ -s "$TMP/events" ] && fail "corrupt --json printed events"
grep -q 'corrupt.jsonl:3: ' "$TMP/err" || fail "corrupt --json does not name the line: $(cat "$TMP/err")"
printf 'hello\n' >"$TMP/foreign.jsonl"
"$WEIR" log "$TMP/foreign.jsonl" --json >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] || fail "foreign --json: want 1"

[ $FAILURES -eq 0 ] && echo "cli_log: ok"
exit $FAILURES
