#!/bin/sh
# tests/scripts/cli_usage.sh WEIR - token usage and cost people can see
# (#32 item 5): `weir run` prints one usage line per turn on stderr (the
# cost only when a price is known), `weir log` shows each turn's usage and
# the session's total, `weir sessions` a tokens/cost column; the cost is
# stamped on assistant/message from the provider's price (a models.<id>.price
# override here), and a bad price is refused at load naming the field.
WEIR=${1:?usage: $0 path/to/weir}
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
PLUGINS=${WEIR_TEST_PLUGIN_DIR:?}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-usage.XXXXXX") || exit 1
MOCK_PID=
trap '[ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
DOT=$(printf '\302\267')

# 1. the scripted provider reports usage (cache read and write too) and has
#    no price: the line has no cost
cat >"$TMP/scripted.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"loop": true, "replies": [{"text": "hi",
                 "usage": {"input_tokens": 12345, "output_tokens": 456,
                           "cache_read_tokens": 10000, "cache_write_tokens": 2000}}]}}]}
JSON
"$WEIR" run -c "$TMP/scripted.json" -s scripted "hello" >"$TMP/out" 2>"$TMP/err" ||
    fail "scripted run: exit $? ($(cat "$TMP/err"))"
want="usage: in 12,345 $DOT cached 10,000 $DOT written 2,000 $DOT out 456"
grep -qxF "$want" "$TMP/err" || fail "scripted usage line: $(cat "$TMP/err")"
grep -q '\$' "$TMP/err" && fail "a cost without a price: $(cat "$TMP/err")"
grep -q '"cost"' "$WEIR_SESSION_DIR/scripted.jsonl" && fail "cost logged without a price"
# --json prints events only
"$WEIR" run -c "$TMP/scripted.json" -s scripted --json "again" >"$TMP/out" 2>"$TMP/err" ||
    fail "scripted --json"
grep -q '^usage:' "$TMP/err" && fail "--json: a usage line on stderr"

# weir log: each turn's usage, then the session's total
"$WEIR" log "$WEIR_SESSION_DIR/scripted.jsonl" >"$TMP/log" 2>&1 || fail "weir log: $(cat "$TMP/log")"
[ "$(grep -cxF "$want" "$TMP/log")" = 2 ] || fail "log: per-turn usage: $(cat "$TMP/log")"
grep -qxF "total usage (2 turns): in 24,690 $DOT cached 20,000 $DOT written 4,000 $DOT out 912" \
    "$TMP/log" || fail "log: total: $(cat "$TMP/log")"

# weir sessions: the tokens column (no cost), and usage in --json
"$WEIR" sessions >"$TMP/sessions.txt" 2>&1 || fail "weir sessions"
head -n 1 "$TMP/sessions.txt" | grep -q 'TOKENS/COST' || fail "sessions header: $(cat "$TMP/sessions.txt")"
grep "^scripted " "$TMP/sessions.txt" | grep -q ' 50K ' || fail "sessions tokens: $(cat "$TMP/sessions.txt")"
"$WEIR" sessions --json >"$TMP/sessions.json" 2>&1 || fail "weir sessions --json"
grep -q '"usage":{"input_tokens":24690,"cache_read_tokens":20000,"cache_write_tokens":4000,"output_tokens":912}' \
    "$TMP/sessions.json" || fail "sessions --json usage: $(cat "$TMP/sessions.json")"
grep -q 'cost_usd' "$TMP/sessions.json" && fail "sessions --json: a cost without a price"

# 2. provider-openai against the mock with a configured price: the cost is
#    logged on assistant/message and shown
printf '%s\n' '{"requests":[{"text":"priced","usage":{"input_tokens":12345,"output_tokens":456}}]}' \
    >"$TMP/script.json"
"$MOCK" --script "$TMP/script.json" --port-file "$TMP/port" --timeout-s 60 >"$TMP/mock.out" 2>&1 &
MOCK_PID=$!
i=0
while [ ! -s "$TMP/port" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
PORT=$(cat "$TMP/port" 2>/dev/null)
cat >"$TMP/openai.json" <<JSON
{"agent": {"provider": "llm", "model": "test-model", "max_tokens": 256},
 "session": {"dir": "$TMP/sessions"},
 "plugin_path": ["$PLUGINS"],
 "plugins": [{"id": "llm", "plugin": "provider-openai",
              "config": {"base_url": "http://127.0.0.1:$PORT/v1", "api_key": "sk-test",
                         "models": {"test-model": {"context_window": 100000, "max_output": 256,
                                                   "price": {"input": 3, "output": 15}}}}}]}
JSON
"$WEIR" run -c "$TMP/openai.json" -s priced "hello" >"$TMP/out" 2>"$TMP/err" ||
    fail "priced run: exit $? ($(cat "$TMP/err"))"
kill "$MOCK_PID" 2>/dev/null; wait "$MOCK_PID" 2>/dev/null; MOCK_PID=
# (12345 * 3 + 456 * 15) / 1e6 = 0.043875
grep -qxF "usage: in 12,345 $DOT cached 0 $DOT written 0 $DOT out 456 $DOT \$0.0439" "$TMP/err" ||
    fail "priced usage line: $(cat "$TMP/err")"
grep '"type":"assistant/message"' "$WEIR_SESSION_DIR/priced.jsonl" | grep -q '"cost":{"usd":0.04387' ||
    fail "no cost on assistant/message: $(grep assistant/message "$WEIR_SESSION_DIR/priced.jsonl")"
"$WEIR" log "$WEIR_SESSION_DIR/priced.jsonl" 2>&1 | grep -q '^total usage (1 turn): .* \$0.0439$' ||
    fail "log total with cost"
"$WEIR" sessions 2>&1 | grep '^priced ' | grep -q '13K \$0.0439' || fail "sessions cost: $("$WEIR" sessions 2>&1)"

# 3. a bad price is refused at load, naming the field
sed 's/"input": 3/"input": "three"/' "$TMP/openai.json" >"$TMP/bad.json"
"$WEIR" run -c "$TMP/bad.json" hi >/dev/null 2>"$TMP/err"
[ $? -eq 3 ] || fail "bad price: want exit 3"
grep -q 'config.models.test-model.price.input: expected a number >= 0' "$TMP/err" ||
    fail "bad price message: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_usage: ok"
exit $FAILURES
