#!/bin/sh
# tests/scripts/telemetry_otlp.sh WEIR - OpenTelemetry GenAI traces (issue #38,
# docs/telemetry.md), end to end against weir-mock-llm and weir-otlp-receiver:
#   1. a 2-turn session (a tool call, a rate-limited attempt the retry plugin
#      retries) with telemetry pointed at the receiver: the spans it got are
#      checked against the GenAI semantic conventions (names, kinds, ids,
#      parent/child, one invoke_agent per turn, attribute types, error.type
#      of the failed attempt, no content without the opt-in, the header sent)
#   2. `weir log ID --otlp` gives the same spans (ids, times, attributes)
#   3. with telemetry.capture_content the content is there, live and offline
#   4. a collector that never answers: the turn ends, the drops are reported
#   5. an endpoint that is not a URL is a config error naming the field (or
#      the variable); a header value is never printed
# Fails (never skips) when jq or a helper is missing.
WEIR=${1:?usage: $0 path/to/weir}
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
RECV=${WEIR_TEST_BIN_DIR:?}/weir-otlp-receiver
PLUGINS=${WEIR_TEST_PLUGIN_DIR:?}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-telemetry.XXXXXX") || exit 1
MOCK_PID=
RECV_PID=
cleanup() {
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_EXPORTER_OTLP_HEADERS \
    OTEL_EXPORTER_OTLP_TRACES_HEADERS OTEL_SERVICE_NAME
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v jq >/dev/null 2>&1 || { echo "FAIL: jq is not installed (make deps installs it)" >&2; exit 1; }
[ -x "$MOCK" ] || { echo "FAIL: $MOCK is not built" >&2; exit 1; }
[ -x "$RECV" ] || { echo "FAIL: $RECV is not built" >&2; exit 1; }

# wait_port FILE PID WHAT: the port a helper wrote, once it has.
wait_port() {
    i=0
    while [ ! -s "$1" ]; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$2" 2>/dev/null; then
            echo "FAIL: $3 did not start" >&2
            exit 1
        fi
        sleep 0.1
    done
    cat "$1"
}
start_mock() {
    printf '%s\n' "$1" >"$TMP/script.json"
    rm -f "$TMP/port"
    "$MOCK" --script "$TMP/script.json" --port-file "$TMP/port" --timeout-s 120 >"$TMP/mock.out" 2>&1 &
    MOCK_PID=$!
    PORT=$(wait_port "$TMP/port" "$MOCK_PID" weir-mock-llm)
}
stop_mock() {
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null
    MOCK_PID=
}
# start_recv OUT [--blackhole]: sets RPORT and RECV_PID.
start_recv() {
    rm -f "$TMP/rport"
    "$RECV" --port-file "$TMP/rport" --out "$1" --timeout-s 120 $2 >"$TMP/recv.out" 2>&1 &
    RECV_PID=$!
    RPORT=$(wait_port "$TMP/rport" "$RECV_PID" weir-otlp-receiver)
}
stop_recv() {
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null && wait "$RECV_PID" 2>/dev/null
    RECV_PID=
}

# config FILE TELEMETRY: provider row "llm" at the mock (model test-model),
# retry without jitter, the pow tool, and the telemetry section given.
config() {
    cat >"$1" <<JSON
{"agent": {"provider": "llm", "model": "test-model", "max_tokens": 256},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "telemetry": $2,
 "plugin_path": ["$PLUGINS"],
 "plugins": [{"id": "llm", "plugin": "provider-openai",
              "config": {"base_url": "http://127.0.0.1:$PORT/v1", "api_key": "k",
                         "probe_windows": false,
                         "models": {"test-model": {"context_window": 100000, "max_output": 256}}}},
             {"id": "retry", "plugin": "retry", "config": {"jitter_ratio": 0}},
             {"id": "math", "plugin": "tools-ffi",
              "config": {"tools": [{"library": "libm.so.6", "symbol": "pow",
                                    "prototype": "double pow(double x, double y)",
                                    "description": "x raised to the power y", "inline": true}]}}]}
JSON
}

# spans FILE...: every span of the OTLP/JSON requests in FILE (one per line).
spans() { jq -c '.resourceSpans[].scopeSpans[].spans[]' "$@"; }

# The conventions' checks over the spans of one session (a JSON array on
# stdin); prints the first violation, nothing when they hold.
CHECK='
def attr($s; $k): [$s.attributes[] | select(.key == $k) | .value][0];
def str($s; $k): attr($s; $k).stringValue;
def int($s; $k): attr($s; $k).intValue;
def isint: type == "string" and test("^[0-9]+$");
def hex($n): type == "string" and test("^[0-9a-f]{\($n)}$") and (test("^0+$") | not);
. as $all
| [.[] | select(str(.; "gen_ai.operation.name") == "invoke_agent")] as $agents
| [.[] | select(str(.; "gen_ai.operation.name") == "chat")] as $chats
| [.[] | select(str(.; "gen_ai.operation.name") == "execute_tool")] as $tools
| [
  (if ($agents | length) != 2 then "invoke_agent spans: \($agents | length), not 2 (one per turn)" else empty end),
  (if ($agents | map(.traceId) | unique | length) != 2 then "the two turns share a trace" else empty end),
  (if ($chats | length) != 4 then "chat spans: \($chats | length), not 4" else empty end),
  (if ($tools | length) != 1 then "execute_tool spans: \($tools | length), not 1" else empty end),
  (if ($all | length) != 7 then "spans: \($all | length), not 7" else empty end),
  (if ($all | map(.spanId) | unique | length) != ($all | length) then "span ids repeat" else empty end),
  ($all[] | select((.traceId | hex(32) | not) or (.spanId | hex(16) | not)) | "bad ids: \(.name)"),
  ($all[] | select((.startTimeUnixNano | isint | not) or (.endTimeUnixNano | isint | not)
                   or ((.endTimeUnixNano | tonumber) < (.startTimeUnixNano | tonumber))) | "bad times: \(.name)"),
  ($all[] | select(str(.; "gen_ai.conversation.id") != "s1") | "no gen_ai.conversation.id s1: \(.name)"),
  ($all[] | select([.attributes[].key] | map(select(test("input.messages|output.messages|call.arguments|call.result|system_instructions"))) | length > 0)
          | "content without the opt-in: \(.name)"),
  ($agents[] | select(.name != "invoke_agent weir" or .kind != 1 or has("parentSpanId")
                      or str(.; "gen_ai.agent.name") != "weir") | "invoke_agent span: \(.)"),
  ($agents[] | select((int(.; "gen_ai.usage.input_tokens") | isint | not) or (int(.; "gen_ai.usage.output_tokens") | isint | not))
             | "invoke_agent without usage: \(.)"),
  ($chats[] | select(.name != "chat test-model" or .kind != 3) | "chat span name/kind: \(.name) \(.kind)"),
  ($chats[] | select(str(.; "gen_ai.provider.name") != "openai" or str(.; "gen_ai.request.model") != "test-model")
            | "chat provider/model: \(.)"),
  ($chats[] | . as $c | select([$agents[] | select(.traceId == $c.traceId and .spanId == $c.parentSpanId)] | length != 1)
            | "chat not under its turn: \(.spanId)"),
  ($tools[] | . as $c | select([$agents[] | select(.traceId == $c.traceId and .spanId == $c.parentSpanId)] | length != 1)
            | "execute_tool not under its turn"),
  ($tools[] | select(.name != "execute_tool pow" or .kind != 1 or str(.; "gen_ai.tool.name") != "pow"
                     or str(.; "gen_ai.tool.call.id") != "call_1" or .status.code != 0) | "execute_tool span: \(.)"),
  (if ([$chats[] | select(.status.code == 2 and str(.; "error.type") == "RATE_LIMIT")] | length) != 1
   then "no failed attempt with error.type RATE_LIMIT" else empty end),
  ($chats[] | select(.status.code == 0) | select((int(.; "gen_ai.usage.input_tokens") | isint | not)
             or (attr(.; "gen_ai.response.finish_reasons").arrayValue.values[0].stringValue | type) != "string")
            | "chat without usage or finish_reasons: \(.)"),
  (if ([$chats[] | select(str(.; "error.type") == null and attr(.; "gen_ai.response.finish_reasons").arrayValue.values[0].stringValue == "tool_call")] | length) != 1
   then "no chat that asked for the tool" else empty end)
  ] | .[0] // empty'

# The spans of a file in one canonical form, to compare two exports.
canon() { spans "$1" | jq -s -S 'sort_by(.spanId) | map(.attributes |= sort_by(.key))'; }

# ---- 1. live export ---------------------------------------------------------
RL='{"fault":"rate_limit","retry_after":"","retry_after_ms":100}'
start_mock "{\"requests\":[{\"tool_calls\":[{\"id\":\"call_1\",\"name\":\"pow\",\"arguments\":\"{\\\"x\\\":2,\\\"y\\\":10}\"}]},$RL,{\"text\":\"It is 1024.\"},{\"text\":\"Second answer.\"}]}"
start_recv "$TMP/live.jsonl"
config "$TMP/live.json" "{\"enabled\": true, \"endpoint\": \"http://127.0.0.1:$RPORT\", \"batch_ms\": 50,
                         \"headers\": {\"x-otlp-token\": \"hush-1234\"}}"
timeout 60 "$WEIR" run -c "$TMP/live.json" -s s1 "What is 2 to the 10th?" >"$TMP/run1.out" 2>"$TMP/run1.err" ||
    fail "turn 1: $(cat "$TMP/run1.err")"
timeout 60 "$WEIR" run -c "$TMP/live.json" -s s1 "And again?" >"$TMP/run2.out" 2>"$TMP/run2.err" ||
    fail "turn 2: $(cat "$TMP/run2.err")"
stop_mock
stop_recv
grep -q '1024' "$TMP/run1.out" || fail "turn 1 did not answer: $(cat "$TMP/run1.out")"
if grep -q rejected "$TMP/live.jsonl"; then fail "the receiver rejected a request: $(grep rejected "$TMP/live.jsonl")"; fi
spans "$TMP/live.jsonl" | jq -s . >"$TMP/live.spans" || fail "the export is not OTLP/JSON: $(head -c 300 "$TMP/live.jsonl")"
bad=$(jq -r "$CHECK" "$TMP/live.spans")
[ -z "$bad" ] || fail "live: $bad"
jq -e '.resourceSpans[0].resource.attributes[] | select(.key == "service.name" and .value.stringValue == "weir")' \
    "$TMP/live.jsonl" >/dev/null || fail "no service.name weir on the resource"
cat "$TMP/run1.err" "$TMP/run2.err" | grep -q 'hush-1234' && fail "a header value was printed"
timeout 20 "$WEIR" log "$TMP/sessions/s1.jsonl" --check >"$TMP/check" 2>&1 || fail "weir log --check: $(cat "$TMP/check")"

# ---- 2. the same spans from the log ----------------------------------------
timeout 30 "$WEIR" log -c "$TMP/live.json" s1 --otlp "$TMP/offline.json" 2>"$TMP/off.err" ||
    fail "weir log --otlp: $(cat "$TMP/off.err")"
spans "$TMP/offline.json" | jq -s . >"$TMP/offline.spans"
bad=$(jq -r "$CHECK" "$TMP/offline.spans")
[ -z "$bad" ] || fail "weir log --otlp: $bad"
canon "$TMP/live.jsonl" >"$TMP/live.canon"
canon "$TMP/offline.json" >"$TMP/offline.canon"
cmp -s "$TMP/live.canon" "$TMP/offline.canon" ||
    fail "weir log --otlp differs from the live export: $(diff "$TMP/live.canon" "$TMP/offline.canon" | head -20)"
# to stdout by default, and from the file path too
timeout 30 "$WEIR" log "$TMP/sessions/s1.jsonl" --otlp >"$TMP/stdout.json" 2>"$TMP/off.err" ||
    fail "weir log FILE --otlp: $(cat "$TMP/off.err")"
[ "$(spans "$TMP/stdout.json" | jq -s 'map(.spanId) | sort')" = "$(jq 'map(.spanId) | sort' "$TMP/live.spans")" ] ||
    fail "weir log FILE --otlp (stdout) gives other span ids"

# a unique prefix of the id names the same session, and the same ids
timeout 30 "$WEIR" log -c "$TMP/live.json" s --otlp "$TMP/prefix.json" 2>"$TMP/off.err" ||
    fail "weir log PREFIX --otlp: $(cat "$TMP/off.err")"
[ "$(canon "$TMP/prefix.json")" = "$(cat "$TMP/offline.canon")" ] ||
    fail "weir log PREFIX --otlp gives other spans than weir log ID --otlp"

# ---- 3. content only with the opt-in ----------------------------------------
start_mock '{"requests":[{"text":"Content answer."}]}'
start_recv "$TMP/content.jsonl"
config "$TMP/content.json" "{\"enabled\": true, \"endpoint\": \"http://127.0.0.1:$RPORT\", \"batch_ms\": 50,
                            \"capture_content\": true}"
timeout 60 "$WEIR" run -c "$TMP/content.json" -s s2 "Say something." >/dev/null 2>"$TMP/run3.err" ||
    fail "content run: $(cat "$TMP/run3.err")"
stop_mock
stop_recv
spans "$TMP/content.jsonl" | jq -s . >"$TMP/content.spans"
jq -e '[.[] | .attributes[] | select(.key == "gen_ai.output.messages") | .value.stringValue
        | fromjson | .[0].parts[0].content] == ["Content answer."]' "$TMP/content.spans" >/dev/null ||
    fail "capture_content: no gen_ai.output.messages: $(cat "$TMP/content.spans")"
jq -e '[.[] | .attributes[] | select(.key == "gen_ai.input.messages") | .value.stringValue
        | fromjson | .[0].parts[0].content] == ["Say something."]' "$TMP/content.spans" >/dev/null ||
    fail "capture_content: no gen_ai.input.messages"
timeout 30 "$WEIR" log -c "$TMP/content.json" s2 --otlp >"$TMP/content-off.json" 2>"$TMP/off.err" ||
    fail "weir log --otlp (content): $(cat "$TMP/off.err")"
[ "$(canon "$TMP/content.jsonl")" = "$(canon "$TMP/content-off.json")" ] ||
    fail "weir log --otlp with content differs from the live export"
# the same log without the opt-in: no content
timeout 30 "$WEIR" log "$TMP/sessions/s2.jsonl" --otlp >"$TMP/nocontent.json" 2>"$TMP/off.err" ||
    fail "weir log --otlp: $(cat "$TMP/off.err")"
grep -q 'output.messages\|Content answer' "$TMP/nocontent.json" && fail "content without the opt-in"

# ---- 4. a collector that never answers --------------------------------------
start_mock '{"requests":[{"text":"Still answers."}]}'
start_recv "$TMP/hole.jsonl" --blackhole
config "$TMP/hole.json" "{\"enabled\": true, \"endpoint\": \"http://127.0.0.1:$RPORT\", \"batch_ms\": 50,
                         \"timeout_ms\": 300}"
timeout 60 "$WEIR" run -c "$TMP/hole.json" -s s3 "Hello?" >"$TMP/hole.out" 2>"$TMP/hole.err" ||
    fail "a dead collector failed the run: $(cat "$TMP/hole.err")"
stop_mock
stop_recv
grep -q 'Still answers' "$TMP/hole.out" || fail "no answer with a dead collector"
grep -q '^weir: telemetry: [0-9]* span(s) dropped' "$TMP/hole.err" ||
    fail "the drops were not reported: $(cat "$TMP/hole.err")"

# ---- 5. bad endpoints --------------------------------------------------------
PORT=1
config "$TMP/bad.json" '{"enabled": true, "endpoint": "collector:4318"}'
"$WEIR" run -c "$TMP/bad.json" -s s4 "x" >/dev/null 2>"$TMP/bad.err"
rc=$?
[ $rc = 3 ] || fail "endpoint not a URL: exit $rc, not 3"
grep -q 'telemetry.endpoint: expected an http:// or https:// URL' "$TMP/bad.err" ||
    fail "endpoint not a URL: $(cat "$TMP/bad.err")"
"$WEIR" config -c "$TMP/bad.json" >/dev/null 2>&1 && fail "weir config accepts an endpoint that is not a URL"
config "$TMP/env.json" '{"enabled": true}'
OTEL_EXPORTER_OTLP_ENDPOINT=nowhere "$WEIR" run -c "$TMP/env.json" -s s5 "x" >/dev/null 2>"$TMP/env.err"
rc=$?
[ $rc = 3 ] || fail "OTEL_EXPORTER_OTLP_ENDPOINT not a URL: exit $rc, not 3"
grep -q 'OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL' "$TMP/env.err" ||
    fail "OTEL_EXPORTER_OTLP_ENDPOINT not a URL: $(cat "$TMP/env.err")"
# telemetry off: the OTEL_* variables are not read (a bad one costs nothing)
config "$TMP/off.json" '{"enabled": false}'
OTEL_EXPORTER_OTLP_ENDPOINT=nowhere "$WEIR" hooks -c "$TMP/off.json" >/dev/null 2>"$TMP/off.err" ||
    fail "telemetry off, a bad OTEL_EXPORTER_OTLP_ENDPOINT failed the host: $(cat "$TMP/off.err")"
OTEL_EXPORTER_OTLP_ENDPOINT=nowhere "$WEIR" hooks -c "$TMP/env.json" >/dev/null 2>&1 &&
    fail "telemetry on, a bad OTEL_EXPORTER_OTLP_ENDPOINT was accepted by weir hooks"
config "$TMP/hdr.json" '{"enabled": false, "headers": {"x-otlp-token": "hush-5678"}}'
"$WEIR" config -c "$TMP/hdr.json" >"$TMP/cfg.out" 2>&1 || fail "weir config: $(cat "$TMP/cfg.out")"
grep -q 'hush-5678' "$TMP/cfg.out" && fail "weir config printed a telemetry header value"
jq -e '.telemetry.headers["x-otlp-token"] == "***" and .telemetry.enabled == false and .telemetry.max_queue == 2048' \
    "$TMP/cfg.out" >/dev/null || fail "weir config's telemetry section: $(cat "$TMP/cfg.out")"

# the defaults are shown without a telemetry section (and never composed)
"$WEIR" config >"$TMP/dflt.out" 2>&1 || fail "weir config: $(cat "$TMP/dflt.out")"
jq -e '.telemetry == {"enabled": false, "capture_content": false, "max_queue": 2048,
                      "batch_ms": 1000, "timeout_ms": 2000}' "$TMP/dflt.out" >/dev/null ||
    fail "weir config does not show the telemetry defaults: $(cat "$TMP/dflt.out")"

[ "$FAILURES" = 0 ] || { echo "telemetry_otlp: $FAILURES failure(s)" >&2; exit 1; }
echo "telemetry_otlp: ok"
