#!/bin/sh
# tests/scripts/cli_status_contract.sh WEIR - the status-line contract
# (docs/plugins.md, "Status lines", issue #36): a third-party plugin's event
# carrying data.status {kind, text, delay_ms} is shown as the retry plugin's
# retries are (tests/scripts/cli_retry_status.sh), with no special case for
# its event type:
#   1. off a terminal: the line once, the countdown at its full delay
#   2. on a terminal (script(1)): it counts down on one line, then stays as
#      first printed
#   3. --json: the events on stdout, no status line on stderr
#   4. serve --stdio: a "status" event naming the plugin's event
# The plugin is drvtest-hooks (tests/driver-plugins), config status_wait.
WEIR=${1:?usage: $0 path/to/weir}
PLUGINS=${WEIR_TEST_DRIVER_PLUGIN_DIR:?}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-status.XXXXXX") || exit 1
trap 'exec 3>&- 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }

# config FILE MS: provider-scripted answers; drvtest-hooks waits MS ms before
# the request, saying so through the contract
config() {
    cat >"$1" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugin_path": ["$PLUGINS"],
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "Answered."}]}},
             {"id": "ratelimit", "plugin": "drvtest-hooks",
              "config": {"status_wait": {"ms": $2,
                         "text": "waiting for the rate limit to reset in {remaining} (x-ratelimit-reset-requests)"}}}]}
JSON
}

# 1. off a terminal: one line, the full delay
config "$TMP/plain.json" 300
timeout 30 "$WEIR" run -c "$TMP/plain.json" -s plain "hello" >"$TMP/plain.out" 2>"$TMP/plain.err" ||
    fail "plain run: $(cat "$TMP/plain.err")"
grep -qx 'weir: waiting for the rate limit to reset in 0.3 s (x-ratelimit-reset-requests)' \
    "$TMP/plain.err" || fail "no status line: $(cat "$TMP/plain.err")"
[ "$(grep -c 'rate limit' "$TMP/plain.err")" = 1 ] || fail "not printed once: $(cat "$TMP/plain.err")"
grep -q "$(printf '\r')" "$TMP/plain.err" && fail "a countdown off a terminal"
[ "$(cat "$TMP/plain.out")" = "Answered." ] || fail "stdout: $(cat "$TMP/plain.out")"

# 2. on a terminal: the countdown, redrawn in place, then the line as first printed
config "$TMP/tty.json" 1500
timeout 30 script -qec "exec \"$WEIR\" run -c \"$TMP/tty.json\" -s tty hello" /dev/null >"$TMP/raw" 2>&1 ||
    fail "tty run: $(cat "$TMP/raw")"
CR=$(printf '\r\033\\[K')
LEFT=$(grep -o "${CR}weir: waiting for the rate limit to reset in [0-9.]* s" "$TMP/raw" |
    sed 's/.*in \([0-9.]*\) s/\1/' | sort -u)
[ "$(echo "$LEFT" | grep -c '^[01]\.[0-9]$')" -ge 2 ] || fail "no countdown: $(od -c "$TMP/raw" | head -20)"
grep -q "${CR}weir: waiting for the rate limit to reset in 1.5 s (x-ratelimit-reset-requests)$(printf '\r')\$" \
    "$TMP/raw" || fail "the countdown does not end as the line: $(od -c "$TMP/raw" | tail -20)"
grep -q 'Answered\.' "$TMP/raw" || fail "tty: no answer: $(cat "$TMP/raw")"

# 3. --json: the event as it is, nothing on stderr
config "$TMP/json.json" 100
timeout 30 "$WEIR" run -c "$TMP/json.json" -s json --json "hello" >"$TMP/json.out" 2>"$TMP/json.err" ||
    fail "json run: $(cat "$TMP/json.err")"
grep -q '"type":"drvtest/wait".*"status":{"kind":"waiting"' "$TMP/json.out" ||
    fail "--json shows no drvtest/wait: $(cat "$TMP/json.out")"
grep -q 'rate limit' "$TMP/json.err" && fail "--json printed a status line: $(cat "$TMP/json.err")"

# 4. serve: a status event per event carrying the contract
config "$TMP/serve.json" 100
mkfifo "$TMP/in" || exit 1
timeout 30 "$WEIR" serve --stdio -c "$TMP/serve.json" -s served <"$TMP/in" >"$TMP/serve.out" \
    2>"$TMP/serve.err" &
pid=$!
exec 3>"$TMP/in"
echo '{"op":"send","input_id":"q1","text":"hello"}' >&3
i=0
while ! grep -q '"type":"generation\.finished"' "$TMP/serve.out" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 300 ] && { fail "serve: no generation.finished: $(cat "$TMP/serve.out" "$TMP/serve.err")"; break; }
    sleep 0.1
done
echo '{"op":"shutdown"}' >&3
exec 3>&-
wait $pid || fail "serve exit: $(cat "$TMP/serve.err")"
grep -q '^{"type":"status","time":[0-9]*,"event":"drvtest/wait","status":{"kind":"waiting","text":"waiting for the rate limit to reset in {remaining} (x-ratelimit-reset-requests)","delay_ms":100},"seq":[0-9]*}$' \
    "$TMP/serve.out" || fail "serve: no status event: $(cat "$TMP/serve.out")"

for s in plain tty json served; do
    timeout 20 "$WEIR" log "$TMP/sessions/$s.jsonl" --check >"$TMP/check" 2>&1 ||
        fail "$s: weir log --check: $(cat "$TMP/check")"
done
[ $FAILURES -eq 0 ] && echo "cli_status_contract: ok"
exit $FAILURES
