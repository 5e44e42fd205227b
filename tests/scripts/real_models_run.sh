#!/bin/sh
# tests/scripts/real_models_run.sh CASE - issue #32's Done-when loop: one
# `weir run` of a 12-step tool loop (11 tool-call replies, then a final
# text) against weir-mock-llm, whose vendor rules (tests/support/mock_llm.h)
# answer 400 whenever weir breaks one: thinking signatures bound to their
# prefix, reasoning_content and thought_signature sent back, max_tokens on
# reasoning models, at most 4 cache breakpoints.
#
# CASE (the model and how it thinks; tests/data/real_models/CASE.json holds
# the provider row's extra config):
#   claude-adaptive  claude-opus-4-7, options thinking {type: adaptive}
#   claude-enabled   claude-sonnet-4-5, options thinking {type: enabled,
#                    budget_tokens: 2048}, max_tokens 4096
#   deepseek         deepseek-reasoner (thinking mode, reasoning_content)
#   gemini           gemini-3-flash (OpenAI-compatible, thought signatures)
#   gpt51            gpt-5.1 on Chat Completions, with compaction-basic on a
#                    small window so that it compacts once in the loop
#   gpt51-responses  gpt-5.1 on the Responses API (api "responses"), store
#                    false: every reasoning item (encrypted_content) must
#                    go back before its function call
#   gpt51-responses-lost  the same with options {"include": null}: no
#                    encrypted reasoning comes, so none can go back, and the
#                    mock must refuse the second step (the rule the case
#                    above keeps is checked, not assumed)
#
# Asserts: the turn completed, 12 assistant messages, every request the mock
# got was answered 200 (the first 400's message is printed otherwise),
# `weir log --check` passes; gpt51: exactly one compaction summary.
CASE=${1:?usage: $0 claude-adaptive|claude-enabled|deepseek|gemini|gpt51|gpt51-responses|gpt51-responses-lost}
case $CASE in
    claude-adaptive) P=anthropic MODEL=claude-opus-4-7 MAXT=2048 ;;
    claude-enabled) P=anthropic MODEL=claude-sonnet-4-5 MAXT=4096 ;;
    deepseek) P=openai MODEL=deepseek-reasoner MAXT=2048 ;;
    gemini) P=openai MODEL=gemini-3-flash MAXT=2048 ;;
    gpt51|gpt51-responses|gpt51-responses-lost) P=openai MODEL=gpt-5.1 MAXT=2048 ;;
    *) echo "unknown case $CASE" >&2; exit 2 ;;
esac
set -- "$P"
. "$(dirname "$0")/providers_lib.sh"
require_weir_run
DATA=${WEIR_TEST_DATA_DIR:?}/real_models
[ -f "$DATA/$CASE.json" ] || { echo "FAIL: $DATA/$CASE.json missing"; exit 1; }
[ -f "$PLUGINS/weir-tools-ffi.so" ] || { echo "FAIL: $PLUGINS/weir-tools-ffi.so is not built"; exit 1; }

# The script: steps 1..11 call pow(2, k) (step 3 and 8 think with empty
# text, the others with a sentence; the mock signs and, every 5th Claude
# reply, redacts; on Responses the even steps say a sentence too), step 12
# answers.  Summary requests (compaction-basic's
# instruction "Answer with the checkpoint only") get their own reply.
steps=""
k=1
while [ $k -le 11 ]; do
    reasoning="\"Step $k: raise 2 to the power $k with pow, then look at the result.\""
    { [ $k = 3 ] || [ $k = 8 ]; } && reasoning='""'
    # Responses: the even steps also say something, a message item between
    # the reasoning item and its function call
    text=""
    [ "$CASE" = gpt51-responses ] && [ $((k % 2)) = 0 ] && text="\"text\":\"Calling pow for 2^$k.\","
    steps="$steps{\"reasoning\":$reasoning,$text\"tool_calls\":[{\"id\":\"call_$k\",\"name\":\"pow\",\"arguments\":\"{\\\"x\\\":2,\\\"y\\\":$k}\"}],\"usage\":{\"output_tokens\":20}},"
    k=$((k + 1))
done
steps="$steps{\"reasoning\":\"All eleven powers are in.\",\"text\":\"2^1 to 2^11 are 2, 4, ..., 2048.\",\"usage\":{\"output_tokens\":30}}"
SCRIPT="{\"requests\":[$steps],
 \"aside\":{\"body_contains\":\"Answer with the checkpoint only\",
           \"reply\":{\"text\":\"## Primary request and intent\\nThe user asked for the powers of two up to 2^11; the tool results so far are 2, 4, 8, 16 and so on.\"}}}"

# A 6,000-character system prompt (the issue's measurement), JSON-safe.
SYSTEM=""
i=0
while [ $i -lt 60 ]; do
    SYSTEM="${SYSTEM}Rule $i: answer with care, call the tools you need, and keep every result. "
    i=$((i + 1))
done

printf '%s\n' "$SCRIPT" > "$TMP/script.json"
rm -f "$TMP/port"
STATS="$TMP/stats.jsonl"
"$MOCK" --script "$TMP/script.json" --port-file "$TMP/port" --stats-file "$STATS" \
    --timeout-s 240 > "$TMP/mock.out" 2>&1 &
MOCK_PID=$!
i=0
while [ ! -s "$TMP/port" ]; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$MOCK_PID" 2>/dev/null; then
        echo "FAIL: weir-mock-llm did not start:" >&2
        cat "$TMP/mock.out" >&2
        exit 1
    fi
    sleep 0.1
done
PORT=$(cat "$TMP/port")
if [ "$P" = openai ]; then BASE="http://127.0.0.1:$PORT/v1"; else BASE="http://127.0.0.1:$PORT"; fi

# the row's extra config (options, models, compaction) from the data file,
# with @BASE@ for the mock's URL
ROW=$(sed "s|@BASE@|$BASE|g" "$DATA/$CASE.json")
cat > "$TMP/config.json" <<CONF
{
  "agent": {"provider": "llm", "model": "$MODEL", "max_tokens": $MAXT},
  "session": {"dir": "$TMP/sessions", "fsync": "step"},
  "plugin_path": ["$PLUGINS"],
  "plugins": [
    {"id": "prompt", "plugin": "system-prompt", "config": {"text": "$SYSTEM"}},
    {"id": "math", "plugin": "tools-ffi",
     "config": {"tools": [{"library": "libm.so.6", "symbol": "pow",
                           "prototype": "double pow(double x, double y)",
                           "description": "x raised to the power y"}]}},
    $ROW
  ]
}
CONF

OUT="$TMP/run.out"
LOG="$TMP/sessions/loop.jsonl"
"$WEIR" run -c "$TMP/config.json" -s loop --json "Compute 2^1 to 2^11 with pow, one call a step." \
    > "$OUT" 2> "$TMP/run.err"
RC=$?
stop_mock

# what the mock answered
requests=$(grep -c '"request"' "$STATS" 2>/dev/null)
requests=${requests:-0}
rejected=$(grep -c '"status":400' "$STATS" 2>/dev/null)
rejected=${rejected:-0}
if [ "$CASE" = gpt51-responses-lost ]; then
    # the broken variant: the first step's reasoning item cannot go back
    [ "$rejected" -ge 1 ] || fail "$CASE: the mock accepted a function call without its reasoning item ($requests requests)"
    grep -m1 '"status":400' "$STATS" | grep -q "without its required 'reasoning' item" ||
        fail "$CASE: the first 400 is not the lost reasoning item: $(grep -m1 '"status":400' "$STATS")"
    [ "$FAILURES" = 0 ] || exit 1
    echo "real_models $CASE ($MODEL): ok (the mock refused the lost reasoning item)"
    exit 0
fi
if [ "$rejected" != 0 ]; then
    fail "$CASE ($MODEL): the mock answered $rejected of $requests requests with a vendor 400; first: $(grep -m1 '"status":400' "$STATS")"
fi
others=$(grep '"request"' "$STATS" | grep -v '"status":200' | grep -cv '"status":400')
[ "$others" = 0 ] || fail "$CASE: $others requests not answered 200: $(grep -v '"status":200' "$STATS" | head -n 3)"
[ "$requests" -ge 12 ] || fail "$CASE: the mock got $requests requests, want at least 12"

if [ ! -f "$LOG" ]; then
    fail "$CASE: no session log (weir run exit $RC)"
    cat "$TMP/run.err" >&2
    exit 1
fi
line=$(event_line "$OUT" turn/end)
echo "$line" | grep -q '"kind":"completed"' || fail "$CASE: turn/end is not completed: $line"
n=$(count_events "$LOG" assistant/message)
[ "$n" = 12 ] || fail "$CASE: $n assistant messages, want 12"
"$WEIR" log "$LOG" --check > "$TMP/check" 2>&1 || { fail "$CASE: weir log --check"; cat "$TMP/check" >&2; }

case $CASE in
    claude-*)
        grep -q '"reply":"thinking"' "$STATS" || fail "$CASE: the mock never replied with thinking"
        ;;
    deepseek)
        grep -q '"reasoning_content"' "$LOG" 2>/dev/null ||
            grep -q '"type":"reasoning"' "$LOG" || fail "$CASE: no reasoning in the log"
        ;;
    gpt51-responses)
        others=$(grep '"request"' "$STATS" | grep -vc '"path":"/v1/responses"')
        [ "$others" = 0 ] || fail "$CASE: $others requests not on /v1/responses"
        r=$(grep -c '"reply":"thinking"' "$STATS")
        [ "$r" -ge 12 ] || fail "$CASE: $r reasoning replies, want 12"
        n=$(grep -o 'encrypted_content' "$LOG" | wc -l)
        [ "$n" -ge 12 ] || fail "$CASE: $n reasoning items with encrypted_content in the log, want 12"
        grep -q '"cache_read_tokens":[1-9]' "$STATS" || fail "$CASE: the mock never reported a prompt cache hit"
        # the usage the log records: cached and reasoning tokens
        grep -q '"cache_read_tokens":[1-9]' "$LOG" || fail "$CASE: no cache_read_tokens in the log's usage"
        grep -q '"reasoning_tokens":[1-9]' "$LOG" || fail "$CASE: no reasoning_tokens in the log's usage"
        ;;
    gpt51)
        s=$(count_events "$LOG" compaction/summary)
        [ "$s" = 1 ] || fail "$CASE: $s compaction summaries, want 1"
        grep -q '"cache_read_tokens":[1-9]' "$STATS" || fail "$CASE: the mock never reported a prompt cache hit"
        ;;
esac

if [ "$FAILURES" != 0 ]; then
    echo "--- weir run stderr (exit $RC) ---" >&2
    tail -n 20 "$TMP/run.err" >&2
    echo "--- mock outcomes ---" >&2
    cut -c1-400 "$STATS" >&2
    exit 1
fi
echo "real_models $CASE ($MODEL): ok ($requests requests, 0 rejected)"
