#!/bin/sh
# tests/scripts/providers_run.sh openai|anthropic - `weir run` with the
# provider plugin against the standalone mock LLM:
#   1. a streamed answer (turn/end completed, the whole text in assistant/message)
#   2. a two-step tool turn through tools-ffi's pow (the tool result reaches
#      the second request: the mock's `expect` answers 400 otherwise)
#   3. every injected fault ends the turn with its canonical failure code
# After every run `weir log FILE --check` passes and nothing is duplicated:
# one turn/start, one turn/end, no repeated line.
. "$(dirname "$0")/providers_lib.sh"
require_weir_run

# run_case NAME SCRIPT_JSON PROMPT [EXTRA_ROWS]: one `weir run --json`;
# leaves OUT (stdout), LOG (the session log).
run_case() {
    start_mock "$2"
    write_config "$TMP/$1.json" "sk-test-SECRET-12345" "$4"
    OUT="$TMP/$1.out"
    LOG="$TMP/sessions/$1.jsonl"
    "$WEIR" run -c "$TMP/$1.json" -s "$1" --json "$3" > "$OUT" 2> "$TMP/$1.err"
    stop_mock
    [ -f "$LOG" ] || { fail "$1: no session log $LOG"; cat "$TMP/$1.err" >&2; return 1; }
    "$WEIR" log "$LOG" --check > "$TMP/$1.check" 2>&1 || { fail "$1: weir log --check"; cat "$TMP/$1.check" >&2; }
    [ "$(count_events "$LOG" turn/start)" = 1 ] || fail "$1: turn/start count"
    [ "$(count_events "$LOG" turn/end)" = 1 ] || fail "$1: turn/end count"
    [ -z "$(sort "$LOG" | uniq -d)" ] || fail "$1: duplicated log lines"
    return 0
}

# 1. streamed answer
if run_case answer '{"requests":[{"text":"Hello from the mock, streamed in pieces.","chunk_size":5}]}' "Say hello"; then
    event_line "$OUT" turn/end | grep -q '"kind":"completed"' || fail "answer: turn/end not completed"
    event_line "$OUT" assistant/message | grep -q '"text":"Hello from the mock, streamed in pieces."' ||
        fail "answer: assistant/message lacks the streamed text"
    event_line "$OUT" assistant/message | grep -q '"input_tokens":10' || fail "answer: usage missing"
    [ "$(count_events "$LOG" assistant/message)" = 1 ] || fail "answer: assistant/message count"
fi

# 2. two-step tool turn (tools-ffi's pow from libm)
if [ -f "$PLUGINS/weir-tools-ffi.so" ]; then
    MATH=',
    {"id": "math", "plugin": "tools-ffi",
     "config": {"tools": [{"library": "libm.so.6", "symbol": "pow",
                           "prototype": "double pow(double x, double y)",
                           "description": "x raised to the power y"}]}}'
    if run_case tools '{"requests":[
        {"tool_calls":[{"id":"call_1","name":"pow","arguments":"{\"x\":2,\"y\":10}"}],"chunk_size":4},
        {"text":"2^10 is 1024.","expect":{"message_contains":"1024"}}]}' "What is 2^10?" "$MATH"; then
        event_line "$OUT" turn/end | grep -q '"kind":"completed"' || fail "tools: turn/end not completed"
        [ "$(count_events "$LOG" tool/call)" = 1 ] || fail "tools: tool/call count"
        [ "$(count_events "$LOG" tool/result)" = 1 ] || fail "tools: tool/result count"
        event_line "$LOG" tool/result | grep -q '1024' || fail "tools: tool/result lacks 1024"
        [ "$(count_events "$LOG" assistant/message)" = 2 ] || fail "tools: assistant/message count"
    fi
    # 2b. one reply that repeats a call id (compatible servers number call_0
    # per response): both calls run, each gets its own id and idempotency
    # key, the next request pairs every result with its call (the mock
    # answers 400 as the vendors do otherwise), and the log checks.
    if run_case dup-ids '{"requests":[
        {"tool_calls":[{"id":"c1","name":"pow","arguments":"{\"x\":2,\"y\":3}"},
                       {"id":"c1","name":"pow","arguments":"{\"x\":2,\"y\":4}"}]},
        {"text":"8 and 16.","expect":{"message_contains":"16"}}]}' "Two powers" "$MATH"; then
        event_line "$OUT" turn/end | grep -q '"kind":"completed"' ||
            fail "dup-ids: turn/end not completed: $(event_line "$OUT" turn/end)"
        [ "$(count_events "$LOG" tool/result)" = 2 ] || fail "dup-ids: tool/result count"
        keys=$(grep -o '"idempotency_key":"[^"]*"' "$LOG" | sort -u | wc -l)
        [ "$keys" = 2 ] || fail "dup-ids: $keys distinct idempotency keys, want 2"
        "$WEIR" log "$LOG" --derive >/dev/null 2>&1 || fail "dup-ids: the reader refuses the log"
    fi
else
    fail "tools: $PLUGINS/weir-tools-ffi.so is not built"
fi

# 3. every injected fault -> its canonical code in turn/end reason.error.code
for c in rate_limit:RATE_LIMIT server_error:SERVER overloaded:OVERLOADED auth:AUTH \
         overflow:CONTEXT_WINDOW_EXCEEDED reset:TRANSPORT malformed:TRANSPORT \
         truncated:TRANSPORT inband_error:OVERLOADED stall:TIMEOUT http_error:INVALID_REQUEST; do
    fault=${c%%:*}
    code=${c#*:}
    # OpenAI's 503 "engine is currently overloaded" is classified by the core
    [ "$PROVIDER" = openai ] && [ "$fault" = overloaded ] && code='\(OVERLOADED\|SERVER\)'
    run_case "fault-$fault" "{\"requests\":[{\"text\":\"Hello there, friend\",\"fault\":\"$fault\",\"status\":418,\"body\":\"{\\\"error\\\":{\\\"message\\\":\\\"teapot\\\"}}\"}]}" "Hi" || continue
    line=$(event_line "$OUT" turn/end)
    echo "$line" | grep -q '"kind":"error"' || fail "$fault: turn/end kind is not error: $line"
    echo "$line" | grep -q "\"code\":\"$code\"" || fail "$fault: expected $code: $line"
    [ "$(count_events "$LOG" assistant/message)" = 0 ] || fail "$fault: assistant/message logged"
    [ "$(count_events "$LOG" assistant/attempt)" = 1 ] || fail "$fault: assistant/attempt count"
done

# 4. provider-openai's prompt_cache_key: true sends the session id, which the
# plugin learns from the core (ABI 1.8, stream_session); the mock's `expect`
# answers 400 unless the body holds it
if [ "$PROVIDER" = openai ]; then
    ROW_EXTRA=', "prompt_cache_key": true'
    if run_case cache-key '{"requests":[{"text":"cached","expect":{"message_contains":"\"prompt_cache_key\":\"cache-key\""}}]}' "Hi"; then
        event_line "$OUT" turn/end | grep -q '"kind":"completed"' ||
            fail "cache-key: the session id was not the prompt_cache_key: $(event_line "$OUT" turn/end)"
    fi
    ROW_EXTRA=
fi

[ "$FAILURES" = 0 ] || exit 1
echo "providers_run $PROVIDER: ok"
