#!/bin/sh
# tests/scripts/cli_rate_limit.sh WEIR - a policy sees the provider's rate
# limits (issue #36, "Headers for policies"): against weir-mock-llm, which
# sends each vendor's rate-limit headers on every response (OpenAI's
# x-ratelimit-* with duration resets, Anthropic's anthropic-ratelimit-* with
# RFC 3339 resets), a 429 then an answer:
#   - the failed attempt's failure (what agent/request-error and a retry
#     policy see) carries host and rate_limit {requests, tokens: {limit,
#     remaining, reset_ms}, raw}, remaining 0 and the reset in ms;
#   - the answer's assistant/message carries http {host, rate_limit}.
# Every session written passes `weir log --check`.
WEIR=${1:?usage: $0 path/to/weir}
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
PLUGINS=${WEIR_TEST_PLUGIN_DIR:?}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-rate-limit.XXXXXX") || exit 1
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

for plugin in provider-openai provider-anthropic; do
    start_mock '{"requests":[{"fault":"rate_limit","retry_after":"","retry_after_ms":50},{"text":"Fine."}]}'
    base=http://127.0.0.1:$PORT
    [ "$plugin" = provider-openai ] && base=$base/v1
    cat >"$TMP/$plugin.json" <<JSON
{"agent": {"provider": "llm", "model": "test-model", "max_tokens": 256},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugin_path": ["$PLUGINS"],
 "plugins": [{"id": "llm", "plugin": "$plugin",
              "config": {"base_url": "$base", "api_key": "k",
                         "models": {"test-model": {"context_window": 100000, "max_output": 256}}}},
             {"id": "retry", "plugin": "retry", "config": {"jitter_ratio": 0}}]}
JSON
    timeout 30 "$WEIR" run -c "$TMP/$plugin.json" -s "$plugin" "hello" >"$TMP/out" 2>"$TMP/err" ||
        fail "$plugin: run: $(cat "$TMP/err")"
    stop_mock
    [ "$(cat "$TMP/out")" = "Fine." ] || fail "$plugin: stdout: $(cat "$TMP/out")"
    timeout 20 "$WEIR" log "$TMP/sessions/$plugin.jsonl" --check >"$TMP/check" 2>&1 ||
        fail "$plugin: weir log --check: $(cat "$TMP/check")"
    python3 - "$TMP/sessions/$plugin.jsonl" "$plugin" >"$TMP/py" 2>&1 <<'PY' || fail "$(cat "$TMP/py")"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
plugin = sys.argv[2]
att = [e for e in evs if e["type"] == "assistant/attempt"]
ans = [e for e in evs if e["type"] == "assistant/message"]
assert len(att) == 1 and len(ans) == 1, (plugin, len(att), len(ans))
f = att[0]["data"]["failure"]
assert f["code"] == "RATE_LIMIT" and f["host"] == "127.0.0.1", (plugin, f)
rl = f["rate_limit"]
assert rl["requests"]["remaining"] == 0, (plugin, rl)
assert rl["requests"]["limit"] == (500 if plugin == "provider-openai" else 50), (plugin, rl)
assert rl["tokens"]["remaining"] == 0 and rl["tokens"]["limit"] == 30000, (plugin, rl)
# the reset: OpenAI's "1m30s", Anthropic's RFC 3339 time 90 s ahead (to the second)
assert 80000 <= rl["tokens"]["reset_ms"] <= 90000, (plugin, rl)
prefix = "x-ratelimit-" if plugin == "provider-openai" else "anthropic-ratelimit-"
assert rl["raw"] and all(k.startswith(prefix) for k in rl["raw"]), (plugin, rl["raw"])
if plugin == "provider-anthropic":
    assert rl["input_tokens"]["limit"] == 30000 and rl["output_tokens"]["remaining"] == 0, rl
assert att[0]["data"]["http"]["rate_limit"] == rl, (plugin, att[0]["data"]["http"])
h = ans[0]["data"]["http"]
assert h["host"] == "127.0.0.1", (plugin, h)
r = h["rate_limit"]["requests"]
assert r["remaining"] == (498 if plugin == "provider-openai" else 48), (plugin, r)
assert h["rate_limit"]["tokens"]["remaining"] == 28000, (plugin, h)
PY
done

[ "$FAILURES" -eq 0 ] || exit 1
echo "cli_rate_limit: ok"
