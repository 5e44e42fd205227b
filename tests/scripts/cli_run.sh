#!/bin/sh
# tests/scripts/cli_run.sh WEIR - `weir run` with the built-in default
# deployment and no API key: the scripted demo streams its answer to stdout,
# tool activity, the one notice line and the session line go to stderr; the
# demo answers the prompt it gets (a power through its pow tool, anything
# else quoted back); exit codes.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-run.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

"$WEIR" run "Say hello, then tell me what 2 to the power 10 is." >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 0 ] || fail "weir run: exit $rc ($(cat "$TMP/err"))"
printf 'Hello! Let me work that out with the pow tool.\n2 to the power 10 is 1024.\n' >"$TMP/want"
cmp -s "$TMP/out" "$TMP/want" || fail "stdout: $(cat "$TMP/out")"
[ "$(head -n 1 "$TMP/err")" = "weir: no OPENAI_API_KEY or ANTHROPIC_API_KEY set; using the built-in scripted demo provider" ] ||
    fail "first stderr line: $(head -n 1 "$TMP/err")"
grep -qx '\[tool\] pow {"x":2,"y":10} -> 1024' "$TMP/err" || fail "no tool line: $(cat "$TMP/err")"
[ "$(grep -c 'no OPENAI_API_KEY' "$TMP/err")" -eq 1 ] || fail "the notice is printed once"

grep -q '^weir: session s-[0-9a-f]* (.*)$' "$TMP/err" || fail "no session line: $(cat "$TMP/err")"

# a piped prompt works like an argument
echo "hello from stdin, what is 2 to the 10th?" | "$WEIR" run -s piped >"$TMP/out" 2>/dev/null ||
    fail "piped prompt"
cmp -s "$TMP/out" "$TMP/want" || fail "piped stdout: $(cat "$TMP/out")"
grep -q '"text":"hello from stdin, what is 2 to the 10th?"' "$WEIR_SESSION_DIR/piped.jsonl" ||
    fail "piped prompt not logged"

# the demo answers what it is asked: other powers, and anything else quoted back
"$WEIR" run "what is 3^4?" >"$TMP/out" 2>"$TMP/err" || fail "3^4"
printf 'Let me work that out with the pow tool.\n3 to the power 4 is 81.\n' >"$TMP/want"
cmp -s "$TMP/out" "$TMP/want" || fail "3^4 stdout: $(cat "$TMP/out")"
grep -qx '\[tool\] pow {"x":3,"y":4} -> 81' "$TMP/err" || fail "3^4 tool line: $(cat "$TMP/err")"
"$WEIR" run "tell me a joke" >"$TMP/out" 2>"$TMP/err" || fail "joke"
grep -q '^You said: "tell me a joke"\. ' "$TMP/out" || fail "echo: $(cat "$TMP/out")"
grep -q '\[tool\]' "$TMP/err" && fail "the demo called a tool for a joke"
"$WEIR" run "$(printf 'word %.0s' $(seq 1 40))" >"$TMP/out" 2>/dev/null
grep -q '^You said: "\(word \)*word…"' "$TMP/out" || fail "a long prompt is not cut: $(cat "$TMP/out")"

# exit codes: 2 usage, 3 config, 4 I/O, 0 for --help
"$WEIR" run --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad option: want 2"
"$WEIR" run a b >/dev/null 2>&1; [ $? -eq 2 ] || fail "two prompts: want 2"
echo '{"agent": 3}' >"$TMP/bad.json"
"$WEIR" run -c "$TMP/bad.json" hi >/dev/null 2>&1; [ $? -eq 3 ] || fail "bad config: want 3"
"$WEIR" resume no-such-session >/dev/null 2>&1; [ $? -eq 4 ] || fail "resume missing: want 4"
"$WEIR" resume >/dev/null 2>&1; [ $? -eq 2 ] || fail "resume without ID: want 2"
for cmd in run resume log; do
    "$WEIR" $cmd --help >"$TMP/help" 2>&1 || fail "$cmd --help: exit $?"
    grep -q "^usage: weir $cmd" "$TMP/help" || fail "$cmd --help text"
done

# a turn that ends in error exits 1
cat >"$TMP/failing.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"fail": {"code": "AUTH", "message": "bad key"}}]}}]}
JSON
"$WEIR" run -c "$TMP/failing.json" hi >/dev/null 2>"$TMP/err"
[ $? -eq 1 ] || fail "failed turn: want exit 1"
grep -q '^weir: turn failed: AUTH: bad key$' "$TMP/err" || fail "failure line: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_run: ok"
exit $FAILURES
