#!/bin/sh
# tests/scripts/hooks_shell_session.sh WEIR - hooks-shell's PreCompact,
# SessionStart and SessionEnd (docs/hooks-shell.md) with provider-scripted:
#   1. SessionStart runs at agent open (source startup, then resume) and its
#      plain stdout reaches the model; SessionEnd runs at close (reason other)
#   2. a PreCompact exit 2 blocks `weir compact` (declined, nothing changed)
#   3. without the block the compaction runs; the hook saw trigger manual and
#      the instructions as custom_instructions
# `weir log --check` passes after each.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-hooks-session.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v jq > /dev/null || { echo "FAIL: jq is not installed (make deps installs it)"; exit 1; }

printf '#!/bin/sh\njq -r .source >> "%s/start.log"\necho SESSION-START-CONTEXT\n' "$TMP" > "$TMP/start.sh"
printf '#!/bin/sh\njq -r .reason >> "%s/end.log"\n' "$TMP" > "$TMP/end.sh"
printf '#!/bin/sh\ncat > "%s/precompact.json"\n[ -f "%s/block" ] && { echo "NO-COMPACT now" >&2; exit 2; }\nexit 0\n' \
    "$TMP" "$TMP" > "$TMP/precompact.sh"
chmod +x "$TMP/start.sh" "$TMP/end.sh" "$TMP/precompact.sh"
LONG=$(printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 1 30))
cat > "$TMP/talk.json" <<JSON
{"agent": {"provider": "s", "model": "m"},
 "session": {"dir": "\${WEIR_SESSION_DIR}"},
 "plugins": [
  {"id": "s", "plugin": "provider-scripted", "config": {"loop": true,
    "models": {"m": {"context_window": 100000, "max_output": 1000}},
    "replies": [{"text": "$LONG", "usage": {"input_tokens": 400, "output_tokens": 300},
                 "expect": {"message_contains": "SESSION-START-CONTEXT"}}]}},
  {"id": "compact", "plugin": "compaction-basic", "config": {"keep_recent_tokens": 10}},
  {"id": "cc", "plugin": "hooks-shell", "config": {"cwd": "$TMP", "hooks": {
    "SessionStart": [{"matcher": "startup|resume", "hooks": [{"type": "command", "command": "$TMP/start.sh"}]}],
    "SessionEnd": [{"hooks": [{"type": "command", "command": "$TMP/end.sh"}]}],
    "PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": "$TMP/precompact.sh"}]}]}}}]}
JSON
cat > "$TMP/summarize.json" <<JSON
{"plugins": [
  {"id": "s", "config": {"models": {"m": {"context_window": 100000, "max_output": 1000}},
    "replies": [{"text": "The user asked twice; the answers were about a fox."}]}}]}
JSON

# 1. SessionStart / SessionEnd
"$WEIR" run -c "$TMP/talk.json" -s c1 "first question" > "$TMP/run1" 2>&1 || fail "run 1: $(cat "$TMP/run1")"
"$WEIR" run -c "$TMP/talk.json" -s c1 "second question" > "$TMP/run2" 2>&1 || fail "run 2: $(cat "$TMP/run2")"
[ "$(tr '\n' ' ' < "$TMP/start.log" 2>/dev/null)" = "startup resume " ] ||
    fail "SessionStart sources: $(cat "$TMP/start.log" 2>/dev/null)"
[ "$(tr '\n' ' ' < "$TMP/end.log" 2>/dev/null)" = "other other " ] ||
    fail "SessionEnd reasons: $(cat "$TMP/end.log" 2>/dev/null)"
"$WEIR" log c1 --check > "$TMP/check" 2>&1 || fail "check after the runs: $(cat "$TMP/check")"

# 2. PreCompact exit 2 blocks
touch "$TMP/block"
before=$("$WEIR" log c1 --derive)
"$WEIR" compact -c "$TMP/talk.json" -c "$TMP/summarize.json" -i "KEEP-NAMES" c1 > "$TMP/out" 2>&1 ||
    fail "blocked compact: want exit 0 (declined): $(cat "$TMP/out")"
grep -q 'blocked by agent/pre-compact' "$TMP/out" || fail "blocked text: $(cat "$TMP/out")"
[ "$("$WEIR" log c1 --derive)" = "$before" ] || fail "a blocked compaction changed the history"
grep -q '"compaction/start"' "$WEIR_SESSION_DIR/c1.jsonl" && fail "a blocked compaction started"

# 3. the compaction runs; the hook's stdin
rm -f "$TMP/block"
"$WEIR" compact -c "$TMP/talk.json" -c "$TMP/summarize.json" -i "KEEP-NAMES" c1 > "$TMP/out" 2>&1 ||
    fail "compact: $(cat "$TMP/out")"
grep -q '^compacted:' "$TMP/out" || fail "compacted text: $(cat "$TMP/out")"
[ "$(jq -r .hook_event_name "$TMP/precompact.json")" = PreCompact ] || fail "PreCompact stdin: event"
[ "$(jq -r .trigger "$TMP/precompact.json")" = manual ] || fail "PreCompact stdin: trigger"
[ "$(jq -r .custom_instructions "$TMP/precompact.json")" = KEEP-NAMES ] || fail "PreCompact stdin: instructions"
"$WEIR" log c1 --check > "$TMP/check" 2>&1 || fail "check after compacting: $(cat "$TMP/check")"

[ "$FAILURES" = 0 ] || { echo "$FAILURES failure(s)" >&2; exit 1; }
echo "hooks-shell session hooks: all cases passed"
