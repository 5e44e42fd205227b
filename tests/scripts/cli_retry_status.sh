#!/bin/sh
# tests/scripts/cli_retry_status.sh WEIR - what a plain `weir run` shows while
# the retry plugin recovers (issue #11 item 4), against weir-mock-llm:
#   1. off a terminal: one stderr line per retry,
#      "weir: retrying in 0.2 s (RATE_LIMIT 429, retry 1/5)"; stdout has the answer only
#   2. on a terminal (script(1)): the wait counts down on one line, then stays
#      as the retry's line
#   3. --json: the events on stdout and no retry line on stderr
#   4. a breaker transition and a fallback: one line each
# Every session written passes `weir log --check`.
WEIR=${1:?usage: $0 path/to/weir}
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
PLUGINS=${WEIR_TEST_PLUGIN_DIR:?}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-retry-status.XXXXXX") || exit 1
MOCK_PID=
cleanup() {
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }
[ -x "$MOCK" ] || { echo "FAIL: $MOCK is not built" >&2; exit 1; }

# start_mock SCRIPT_JSON: weir-mock-llm on 127.0.0.1; sets PORT and MOCK_PID.
start_mock() {
    printf '%s\n' "$1" >"$TMP/script.json"
    rm -f "$TMP/port"
    "$MOCK" --script "$TMP/script.json" --port-file "$TMP/port" --timeout-s 60 >"$TMP/mock.out" 2>&1 &
    MOCK_PID=$!
    i=0
    while [ ! -s "$TMP/port" ]; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$MOCK_PID" 2>/dev/null; then
            echo "FAIL: weir-mock-llm did not start: $(cat "$TMP/mock.out")" >&2
            exit 1
        fi
        sleep 0.1
    done
    PORT=$(cat "$TMP/port")
}
stop_mock() {
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null
    MOCK_PID=
}

# config FILE RETRY_CONFIG [EXTRA_ROWS]: provider row "llm" at the mock, model test-model.
config() {
    cat >"$1" <<JSON
{"agent": {"provider": "llm", "model": "test-model", "max_tokens": 256},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugin_path": ["$PLUGINS"],
 "plugins": [{"id": "llm", "plugin": "provider-openai",
              "config": {"base_url": "http://127.0.0.1:$PORT/v1", "api_key": "k",
                         "probe_windows": false,
                         "models": {"test-model": {"context_window": 100000, "max_output": 256}}}},
             {"id": "retry", "plugin": "retry", "config": $2}$3]}
JSON
}

check_log() {
    timeout 20 "$WEIR" log "$TMP/sessions/$1.jsonl" --check >"$TMP/check" 2>&1 ||
        fail "$1: weir log --check: $(cat "$TMP/check")"
}

RL='{"fault":"rate_limit","retry_after":"","retry_after_ms":200}'

# 1. off a terminal: one line per retry, on stderr only
start_mock "{\"requests\":[$RL,$RL,{\"text\":\"Recovered answer.\"}]}"
config "$TMP/plain.json" '{"jitter_ratio": 0}'
timeout 30 "$WEIR" run -c "$TMP/plain.json" -s plain "hello" >"$TMP/plain.out" 2>"$TMP/plain.err" ||
    fail "plain run: $(cat "$TMP/plain.err")"
stop_mock
grep -qx 'weir: retrying in 0.2 s (RATE_LIMIT 429, retry 1/5)' "$TMP/plain.err" ||
    fail "no line for retry 1: $(cat "$TMP/plain.err")"
grep -qx 'weir: retrying in 0.2 s (RATE_LIMIT 429, retry 2/5)' "$TMP/plain.err" ||
    fail "no line for retry 2: $(cat "$TMP/plain.err")"
[ "$(grep -c 'retrying' "$TMP/plain.err")" = 2 ] || fail "not one line per retry: $(cat "$TMP/plain.err")"
grep -q "$(printf '\r')" "$TMP/plain.err" && fail "a countdown off a terminal"
[ "$(cat "$TMP/plain.out")" = "Recovered answer." ] || fail "stdout: $(cat "$TMP/plain.out")"
check_log plain
# the retry plugin's own namespace; a log of the ABI 1.11 retry plugin (llm/retry, ...) still
# checks and renders the same
grep -q '"type":"retry/wait"' "$TMP/sessions/plain.jsonl" || fail "no retry/wait in the log"
grep -q '"type":"llm/' "$TMP/sessions/plain.jsonl" && fail "an llm/ event in the log"
timeout 20 "$WEIR" log "$TMP/sessions/plain.jsonl" >"$TMP/new.log" 2>&1 || fail "weir log: $(cat "$TMP/new.log")"
grep -q '^(retrying in 0.2 s (RATE_LIMIT, retry 1): ' "$TMP/new.log" || fail "weir log: no retry line: $(cat "$TMP/new.log")"
sed 's|"type":"retry/wait"|"type":"llm/retry"|; s|"type":"retry/started"|"type":"llm/retry-started"|' \
    "$TMP/sessions/plain.jsonl" >"$TMP/sessions/old.jsonl"
grep -q '"type":"llm/retry"' "$TMP/sessions/old.jsonl" || fail "the old log has no llm/retry"
check_log old
timeout 20 "$WEIR" log "$TMP/sessions/old.jsonl" >"$TMP/old.log" 2>&1 || fail "weir log old: $(cat "$TMP/old.log")"
cmp -s "$TMP/new.log" "$TMP/old.log" || fail "the old log renders otherwise: $(diff "$TMP/new.log" "$TMP/old.log")"

# 2. on a terminal: the wait counts down on one line
start_mock "{\"requests\":[{\"fault\":\"rate_limit\",\"retry_after\":\"\",\"retry_after_ms\":1500},{\"text\":\"Later.\"}]}"
config "$TMP/tty.json" '{}'
timeout 30 script -qec "exec \"$WEIR\" run -c \"$TMP/tty.json\" -s tty hello" /dev/null >"$TMP/raw" 2>&1 ||
    fail "tty run: $(cat "$TMP/raw")"
stop_mock
CR=$(printf '\r\033\\[K')
# redrawn in place with the time left: at least two distinct values below 1.5
LEFT=$(grep -o "${CR}weir: retrying in [0-9.]* s" "$TMP/raw" | sed 's/.*in \([0-9.]*\) s/\1/' | sort -u)
[ "$(echo "$LEFT" | grep -c '^[01]\.[0-9]$')" -ge 2 ] || fail "no countdown: $(od -c "$TMP/raw" | head -20)"
# it ends as the retry's own line, then the answer
grep -q "${CR}weir: retrying in 1.5 s (RATE_LIMIT 429, retry 1/5)$(printf '\r')\$" "$TMP/raw" ||
    fail "the countdown does not end as the retry's line: $(od -c "$TMP/raw" | tail -20)"
grep -q 'Later\.' "$TMP/raw" || fail "tty: no answer: $(cat "$TMP/raw")"
check_log tty

# 3. --json: the events, and no line on stderr
start_mock "{\"requests\":[$RL,{\"text\":\"Json answer.\"}]}"
config "$TMP/json.json" '{}'
timeout 30 "$WEIR" run -c "$TMP/json.json" -s json --json "hello" >"$TMP/json.out" 2>"$TMP/json.err" ||
    fail "json run: $(cat "$TMP/json.err")"
stop_mock
grep -q '"type":"retry/wait"' "$TMP/json.out" || fail "--json shows no retry/wait"
grep -qv '^{.*}$' "$TMP/json.out" && fail "--json printed a line that is not an event"
grep -q 'retrying' "$TMP/json.err" && fail "--json printed a retry line: $(cat "$TMP/json.err")"
check_log json

# 4. the primary is down: a breaker transition and a fallback, one line each
start_mock '{"loop":true,"requests":[{"fault":"server_error"}]}'
config "$TMP/fallback.json" \
    '{"max_retries": 1, "initial_delay_ms": 100, "jitter_ratio": 0, "breaker": {"failures": 2},
      "fallback": [{"provider": "backup", "model": "bm"}]}' \
    ', {"id": "backup", "plugin": "provider-scripted",
        "config": {"replies": [{"text": "The backup answers."}]}}'
timeout 30 "$WEIR" run -c "$TMP/fallback.json" -s fallback "hello" >"$TMP/fb.out" 2>"$TMP/fb.err" ||
    fail "fallback run: $(cat "$TMP/fb.err")"
stop_mock
grep -qx 'weir: retrying in 0.1 s (SERVER 500, retry 1/1)' "$TMP/fb.err" || fail "fallback: no retry line: $(cat "$TMP/fb.err")"
grep -qx "weir: provider 'llm': circuit breaker open for 30.0 s (2 consecutive failures)" "$TMP/fb.err" ||
    fail "no breaker line: $(cat "$TMP/fb.err")"
grep -qx 'weir: falling back from llm/test-model to backup/bm (SERVER 500, retries spent)' "$TMP/fb.err" ||
    fail "no fallback line: $(cat "$TMP/fb.err")"
[ "$(cat "$TMP/fb.out")" = "The backup answers." ] || fail "fallback stdout: $(cat "$TMP/fb.out")"
check_log fallback

[ $FAILURES -eq 0 ] && echo "cli_retry_status: ok"
exit $FAILURES
