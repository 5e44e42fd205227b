#!/bin/sh
# tests/scripts/cli_deployments.sh WEIR - examples/deployments/ (issue #14
# item 7): base.json composed with each of dev.json, prod.json and
# local.json gives the rows the README and docs/config.md describe, loads
# (`weir hooks`), and runs a turn: dev with the scripted demo, prod and local
# against weir-mock-llm (OPENAI_BASE_URL, LOCAL_BASE_URL).  Secrets stay
# hidden in `weir config`.
WEIR=${1:?usage: $0 path/to/weir}
SRC=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
D="$SRC/examples/deployments"
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-deployments.XXXXXX") || exit 1
MOCK_PID=
trap '[ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
unset OPENAI_BASE_URL LOCAL_BASE_URL WEIR_MODEL
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
[ -x "$MOCK" ] || { echo "FAIL: $MOCK is not built" >&2; exit 1; }

# ids FILE: the composed rows' ids, in order
ids() { grep '^      "id": ' "$1" | sed 's/.*"id": "\([^"]*\)".*/\1/' | tr '\n' ' '; }

for x in dev prod local; do
    OPENAI_API_KEY=sk-deploy-secret "$WEIR" config -c "$D/base.json" -c "$D/$x.json" \
        >"$TMP/$x.config" 2>"$TMP/err" || fail "$x: config: $(cat "$TMP/err")"
    OPENAI_API_KEY=sk-deploy-secret "$WEIR" hooks -c "$D/base.json" -c "$D/$x.json" \
        >"$TMP/$x.hooks" 2>"$TMP/err" || fail "$x: does not load: $(cat "$TMP/err")"
    grep -q 'sk-deploy-secret' "$TMP/$x.config" && fail "$x: the key shows in weir config"
done
[ "$(ids "$TMP/dev.config")" = "scripted prompt math " ] || fail "dev rows: $(ids "$TMP/dev.config")"
[ "$(ids "$TMP/prod.config")" = "openai compaction retry prompt math " ] ||
    fail "prod rows: $(ids "$TMP/prod.config")"
[ "$(ids "$TMP/local.config")" = "local compaction retry prompt math " ] ||
    fail "local rows: $(ids "$TMP/local.config")"
grep -q '"base_url": "http://127.0.0.1:8080/v1"' "$TMP/local.config" || fail "local base_url"
grep -q '"base_url": "https://api.openai.com/v1"' "$TMP/prod.config" || fail "prod base_url"
grep -q '"api_key": "\*\*\*"' "$TMP/prod.config" || fail "prod api_key is not ***"
# prod needs its key: without it, `weir config` still prints the deployment
# and names the variable (issue #37 item 3), and a run refuses it, saying which
env -u OPENAI_API_KEY "$WEIR" config -c "$D/base.json" -c "$D/prod.json" >"$TMP/out" 2>"$TMP/err" ||
    fail "config prod without OPENAI_API_KEY: exit $? $(cat "$TMP/err")"
grep -q '"api_key": "(unset: OPENAI_API_KEY)"' "$TMP/out" || fail "prod unset key: $(cat "$TMP/out")"
grep -q 'not set: OPENAI_API_KEY' "$TMP/err" || fail "prod key note: $(cat "$TMP/err")"
env -u OPENAI_API_KEY "$WEIR" run -c "$D/base.json" -c "$D/prod.json" hi >/dev/null 2>"$TMP/err"
[ $? -eq 3 ] || fail "run prod without OPENAI_API_KEY: want exit 3"
grep -q 'prod.json: .*variable OPENAI_API_KEY is not set' "$TMP/err" || fail "prod key error: $(cat "$TMP/err")"

# dev: the scripted demo, no network
"$WEIR" run -c "$D/base.json" -c "$D/dev.json" -s dev "what is 2 to the power 10?" \
    >"$TMP/out" 2>"$TMP/err" || fail "dev run: $(cat "$TMP/err")"
grep -qx '2 to the power 10 is 1024.' "$TMP/out" || fail "dev answer: $(cat "$TMP/out")"

# prod and local against the mock (one answer each)
start_mock() {
    printf '%s\n' "$1" >"$TMP/script.json"
    rm -f "$TMP/port"
    "$MOCK" --script "$TMP/script.json" --port-file "$TMP/port" --timeout-s 60 >"$TMP/mock.out" 2>&1 &
    MOCK_PID=$!
    i=0
    while [ ! -s "$TMP/port" ]; do
        i=$((i + 1))
        [ $i -gt 100 ] && { fail "weir-mock-llm did not start: $(cat "$TMP/mock.out")"; return 1; }
        sleep 0.1
    done
    PORT=$(cat "$TMP/port")
}
stop_mock() { [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null; MOCK_PID=; }

start_mock '{"requests":[{"text":"Answer from prod."}]}'
OPENAI_API_KEY=sk-deploy-secret OPENAI_BASE_URL="http://127.0.0.1:$PORT/v1" WEIR_MODEL=test-model \
    timeout 60 "$WEIR" run -c "$D/base.json" -c "$D/prod.json" -s prod "hi" >"$TMP/out" 2>"$TMP/err" ||
    fail "prod run: $(cat "$TMP/err")"
stop_mock
grep -qx 'Answer from prod.' "$TMP/out" || fail "prod answer: $(cat "$TMP/out")"
start_mock '{"requests":[{"text":"Answer from local."}]}'
LOCAL_BASE_URL="http://127.0.0.1:$PORT/v1" \
    timeout 60 "$WEIR" run -c "$D/base.json" -c "$D/local.json" -s local "hi" >"$TMP/out" 2>"$TMP/err" ||
    fail "local run: $(cat "$TMP/err")"
stop_mock
grep -qx 'Answer from local.' "$TMP/out" || fail "local answer: $(cat "$TMP/out")"
for s in dev prod local; do
    "$WEIR" log "$s" --check >"$TMP/check" 2>&1 || fail "$s: log --check: $(cat "$TMP/check")"
done

[ $FAILURES -eq 0 ] && echo "cli_deployments: ok"
exit $FAILURES
