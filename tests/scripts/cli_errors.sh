#!/bin/sh
# tests/scripts/cli_errors.sh WEIR - errors that name the fix (issue #14
# item 4):
#   - a refused connection names the URL once, and where base_url comes
#     from (OPENAI_BASE_URL), without libcurl's text twice;
#   - `weir plugins DIR` with a missing DIR says so (exit 4);
#   - a usage error (`weir run </dev/null`) leaves no session file, and
#     neither does a prompt the agent refuses;
#   - a blocked turn (agent/pre-step reject) names the row and its reason,
#     and exits 1 (so does --json).
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-errors.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# --- a refused connection (nothing listens on 127.0.0.1:9; no retries) ------
echo '{"plugins": [{"id": "retry", "disabled": true}]}' >"$TMP/noretry.json"
OPENAI_API_KEY=sk-bogus OPENAI_BASE_URL=http://127.0.0.1:9/v1 \
    timeout 60 "$WEIR" run -c default -c "$TMP/noretry.json" hi >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "refused: want exit 1 ($(cat "$TMP/err"))"
line=$(grep '^weir: turn failed: ' "$TMP/err")
printf '%s\n' "$line" |
    grep -q '^weir: turn failed: TRANSPORT: cannot reach http://127.0.0.1:9/v1/chat/completions: ' ||
    fail "refused: the URL is not named: $(cat "$TMP/err")"
printf '%s\n' "$line" | grep -q "row 'openai'.*OPENAI_BASE_URL" ||
    fail "refused: OPENAI_BASE_URL is not named: $line"
[ "$(printf '%s\n' "$line" | grep -o "Couldn't connect to server" | wc -l)" -le 1 ] ||
    fail "refused: the message repeats itself: $line"
# a key or password in the URL is never shown
OPENAI_API_KEY=sk-bogus OPENAI_BASE_URL='http://user:pw-secret@127.0.0.1:9/v1' \
    timeout 60 "$WEIR" run -c default -c "$TMP/noretry.json" hi >/dev/null 2>"$TMP/err"
grep -q 'pw-secret' "$TMP/err" && fail "the URL's password shows: $(cat "$TMP/err")"
grep -q 'cannot reach http://127.0.0.1:9/v1/chat/completions' "$TMP/err" ||
    fail "userinfo URL: $(cat "$TMP/err")"

# --- weir plugins DIR ----------------------------------------------------------
"$WEIR" plugins "$TMP/nonexistent" >"$TMP/out" 2>"$TMP/err"
[ $? -eq 4 ] || fail "plugins missing dir: want exit 4"
grep -qx "weir plugins: $TMP/nonexistent: no such directory" "$TMP/err" ||
    fail "plugins missing dir text: $(cat "$TMP/err")"
grep -q 'no plugins found' "$TMP/err" && fail "plugins still says 'no plugins found'"
mkdir "$TMP/empty"
"$WEIR" plugins "$TMP/empty" >/dev/null 2>"$TMP/err" || fail "an empty dir is no error"
grep -q 'no plugins found' "$TMP/err" || fail "empty dir text: $(cat "$TMP/err")"

# --- no session file after a usage error -----------------------------------------
export WEIR_SESSION_DIR="$TMP/usage"
"$WEIR" run </dev/null >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] || fail "run </dev/null: want exit 2"
grep -q '^weir run: no prompt' "$TMP/err" || fail "no prompt text: $(cat "$TMP/err")"
"$WEIR" run -s u1 </dev/null >/dev/null 2>&1
printf '\n\n' | "$WEIR" run --log "$TMP/u2.jsonl" >/dev/null 2>&1
[ $? -eq 2 ] || fail "blank piped prompt: want exit 2"
[ -e "$TMP/u2.jsonl" ] && fail "--log file left after a usage error"
[ -n "$(ls -A "$WEIR_SESSION_DIR" 2>/dev/null)" ] &&
    fail "files left after usage errors: $(ls -l "$WEIR_SESSION_DIR")"
# a prompt the agent refuses (over agent.max_input_chars): the new log goes
echo '{"agent": {"max_input_chars": 5}}' >"$TMP/short.json"
"$WEIR" run -c default -c "$TMP/short.json" -s refused "far more than five" >/dev/null 2>"$TMP/err"
[ $? -ne 0 ] || fail "refused prompt: want a failure"
[ -e "$WEIR_SESSION_DIR/refused.jsonl" ] && fail "an empty log was left: $(cat "$TMP/err")"
# an existing session is never removed
"$WEIR" run -s kept "hi" >/dev/null 2>&1 || fail "run kept"
"$WEIR" run -c default -c "$TMP/short.json" -s kept "far more than five" >/dev/null 2>&1
[ -s "$WEIR_SESSION_DIR/kept.jsonl" ] || fail "an existing session was removed"

# --- a blocked turn ------------------------------------------------------------------
cat >"$TMP/gate.json" <<JSON
{"agent": {"provider": "s", "model": "m"},
 "plugin_path": ["$WEIR_TEST_DRIVER_PLUGIN_DIR"],
 "plugins": [{"id": "s", "plugin": "provider-scripted", "config": {"replies": [{"text": "never"}]}},
             {"id": "gate", "plugin": "drvtest-hooks",
              "config": {"pre_step": {"action": "reject", "reason": "office hours are over"}}}]}
JSON
"$WEIR" run -c "$TMP/gate.json" -s blocked hi >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "blocked turn: want exit 1 ($(cat "$TMP/err"))"
grep -qx 'weir: turn blocked by plugin gate: office hours are over' "$TMP/err" ||
    fail "blocked text: $(cat "$TMP/err")"
grep -q '"type":"turn/end","data":{"turn":1,"reason":{"kind":"blocked","plugin":"gate","reason":"office hours are over"}}' \
    "$WEIR_SESSION_DIR/blocked.jsonl" || fail "blocked turn/end: $(grep turn/end "$WEIR_SESSION_DIR/blocked.jsonl")"
"$WEIR" run -c "$TMP/gate.json" --json hi >/dev/null 2>&1
[ $? -eq 1 ] || fail "blocked --json: want exit 1"
"$WEIR" log -c "$TMP/gate.json" blocked >"$TMP/out" 2>&1 || fail "log blocked"
grep -q -- '--- turn 1 ended: blocked' "$TMP/out" || fail "transcript: $(cat "$TMP/out")"

[ $FAILURES -eq 0 ] && echo "cli_errors: ok"
exit $FAILURES
