#!/bin/sh
# tests/scripts/example_embed.sh EXAMPLE - examples/embed on the built-in
# default deployment (the scripted demo): the streamed answer on stdout, the
# agent's own tools/pre-execute listener announcing the pow call on stderr.
EXAMPLE=${1:?usage: $0 path/to/weir-embed-example}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-embed.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

timeout 60 "$EXAMPLE" "What is 2 to the power 10?" >"$TMP/out" 2>"$TMP/err" ||
    fail "exit $?: $(cat "$TMP/err")"
grep -q '2 to the power 10 is 1024\.' "$TMP/out" || fail "answer: $(cat "$TMP/out")"
grep -q '^\[session s-[0-9a-f]*: .*\.jsonl\]$' "$TMP/out" || fail "session line: $(cat "$TMP/out")"
grep -qx '\[s-[0-9a-f]*\] pow {"x":2,"y":10}' "$TMP/err" || fail "announce: $(cat "$TMP/err")"
"$EXAMPLE" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no prompt: want 2"

# a failed turn: weir_agent_last_turn gives its failure, the exit status is 1
cat >"$TMP/fail.json" <<EOF
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"fail": {"code": "RATE_LIMIT", "message": "slow down"}}]}}]}
EOF
timeout 60 "$EXAMPLE" -c "$TMP/fail.json" "hello" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] || fail "failed turn: exit $rc, want 1: $(cat "$TMP/err")"
grep -qx 'embed: turn 1 ended in error: RATE_LIMIT: slow down' "$TMP/err" ||
    fail "failed turn: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "example_embed: ok"
exit $FAILURES
