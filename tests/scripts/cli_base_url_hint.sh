#!/bin/sh
# tests/scripts/cli_base_url_hint.sh WEIR - a provider that cannot reach its
# server names the variable that sets its base_url in the deployment used
# (issue #37 item 11): examples/deployments/local.json reads LOCAL_BASE_URL,
# so its hint names that and never OPENAI_BASE_URL; the built-in default
# reads OPENAI_BASE_URL and says so.  The server is a closed port of
# 127.0.0.1: nothing leaves the machine.
WEIR=${1:?usage: $0 path/to/weir}
D=$(cd "$(dirname "$0")/../../examples/deployments" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-hint.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY= NO_COLOR=1
unset OPENAI_BASE_URL ANTHROPIC_BASE_URL WEIR_MODEL
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
printf '{"plugins": [{"id": "retry", "config": {"max_retries": 0}}]}\n' >"$TMP/no-retry.json"

LOCAL_BASE_URL=http://127.0.0.1:1/v1 timeout 60 "$WEIR" run -c "$D/base.json" -c "$D/local.json" \
    -c "$TMP/no-retry.json" hi >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "local: want exit 1: $(cat "$TMP/err")"
grep -q "^weir: hint: row 'local' takes its base_url from \${LOCAL_BASE_URL:-http://127.0.0.1:8080/v1} ($D/local.json): set LOCAL_BASE_URL to the server's URL\$" "$TMP/err" ||
    fail "local: no LOCAL_BASE_URL hint: $(cat "$TMP/err")"
grep -q OPENAI_BASE_URL "$TMP/err" && fail "local: names OPENAI_BASE_URL: $(cat "$TMP/err")"

OPENAI_API_KEY=k OPENAI_BASE_URL=http://127.0.0.1:1/v1 timeout 60 "$WEIR" run -c default \
    -c "$TMP/no-retry.json" hi >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "default: want exit 1: $(cat "$TMP/err")"
grep -q "(the base_url of row 'openai'; set from OPENAI_BASE_URL)" "$TMP/err" ||
    fail "default: the failure does not name OPENAI_BASE_URL: $(cat "$TMP/err")"
grep -q "^weir: hint: row 'openai' takes its base_url from \${OPENAI_BASE_URL:-https://api.openai.com/v1} (the built-in default): set OPENAI_BASE_URL" "$TMP/err" ||
    fail "default: no OPENAI_BASE_URL hint: $(cat "$TMP/err")"
grep -q 'Sanitizer\|runtime error' "$TMP/err" && fail "sanitizer: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_base_url_hint: ok"
exit $FAILURES
