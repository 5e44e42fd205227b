#!/bin/sh
# tests/scripts/cli_example_ratelimit_retry.sh WEIR - the rate-limit-aware
# retry example (examples/ratelimit-retry) in `weir run` (issue #36): against
# weir-mock-llm answering a 429 whose headers say no request is left until
# a reset 1 s away (x-ratelimit-remaining-requests: 0,
# x-ratelimit-reset-requests: 1s), then an answer:
#   - the turn completes with the answer;
#   - the wait is the reset's: a ratelimit-retry/wait event with
#     status {kind:"waiting", delay_ms:1000} is in the session log;
#   - `weir run` prints its status line once on stderr (off a terminal);
#   - it fills the role "retry": beside the shipped retry, the deployment
#     fails to load, naming both rows.
# Timing is not asserted: the run is only bounded (timeout).
WEIR=${1:?usage: $0 path/to/weir}
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-rl-retry.XXXXXX") || exit 1
MOCK_PID=
cleanup() {
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is missing" >&2; exit 1; }
[ -x "$MOCK" ] || { echo "FAIL: $MOCK is not built" >&2; exit 1; }

cat >"$TMP/script.json" <<'JSON'
{"requests": [
  {"fault": "raw", "status": 429,
   "headers": {"Content-Type": "application/json", "x-ratelimit-limit-requests": "60",
               "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"},
   "body": "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}"},
  {"text": "Fine."}]}
JSON
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

cat >"$TMP/deploy.json" <<JSON
{"agent": {"provider": "llm", "model": "test-model", "max_tokens": 256},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugins": [{"id": "llm", "plugin": "provider-openai",
              "config": {"base_url": "http://127.0.0.1:$PORT/v1", "api_key": "k",
                         "models": {"test-model": {"context_window": 100000, "max_output": 256}}}},
             {"id": "retry", "plugin": "ratelimit-retry", "config": {"max_delay_ms": 5000}}]}
JSON
timeout 30 "$WEIR" run -c "$TMP/deploy.json" -s rl "hello" >"$TMP/out" 2>"$TMP/err" ||
    fail "run: $(cat "$TMP/err")"
[ "$(cat "$TMP/out")" = "Fine." ] || fail "stdout: $(cat "$TMP/out")"
n=$(grep -c 'rate limit of 127\.0\.0\.1: waiting .* for its reset (retry 1)' "$TMP/err")
[ "$n" = 1 ] || fail "the status line is printed $n times: $(cat "$TMP/err")"
LOG="$TMP/sessions/rl.jsonl"
timeout 20 "$WEIR" log "$LOG" --check >"$TMP/check" 2>&1 || fail "weir log --check: $(cat "$TMP/check")"
python3 - "$LOG" >"$TMP/py" 2>&1 <<'PY' || fail "$(cat "$TMP/py")"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
waits = [e for e in evs if e["type"] == "ratelimit-retry/wait"]
assert len(waits) == 1, waits
st = waits[0]["data"]["status"]
assert st["kind"] == "waiting" and st["delay_ms"] == 1000, st
assert waits[0]["data"]["host"] == "127.0.0.1", waits[0]
att = [e for e in evs if e["type"] == "assistant/attempt"]
assert len(att) == 1 and att[0]["data"]["failure"]["code"] == "RATE_LIMIT", att
ans = [e for e in evs if e["type"] == "assistant/message"]
assert len(ans) == 1, ans
PY
# the role: ratelimit-retry and the shipped retry cannot both retry
cat >"$TMP/two.json" <<JSON
{"plugins": [{"id": "rl", "plugin": "ratelimit-retry"}, {"id": "shipped", "plugin": "retry"}],
 "session": {"dir": "$TMP/sessions"}}
JSON
if timeout 20 "$WEIR" hooks -c "$TMP/two.json" >"$TMP/two.out" 2>&1; then
    fail "two retry rows loaded: $(cat "$TMP/two.out")"
fi
grep -q "'rl'" "$TMP/two.out" && grep -q "'shipped'" "$TMP/two.out" && grep -q retry "$TMP/two.out" ||
    fail "the role conflict does not name both rows: $(cat "$TMP/two.out")"
[ $FAILURES -eq 0 ] && echo "cli_example_ratelimit_retry: ok"
exit $FAILURES
