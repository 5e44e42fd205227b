#!/bin/sh
# tests/scripts/serve_steering.sh WEIR - the generation contract over `weir
# serve --stdio` (issue #10; docs/generations.md, docs/stdio-protocol.md),
# with provider-scripted and the driver test plugins:
#   1. native steering: a steer during a stream is offered to steer_live;
#      the first is refused (it is queued and delivered at the next request
#      boundary), the second is taken, accepted and applied at the next
#      boundary (steering.accepted, steering.applied, input_ids); every
#      input.queued says the delivery its input.delivered then has; a
#      resubmitted id gets input.acknowledged with its generation; an
#      anchored steer for a finished generation is refused;
#   2. a cancel during agent/pre-step (a listener that fails on the cancel)
#      detaches the generation (not failed), opens no step, and reports the
#      claimed input input.discarded;
#   3. a background job (drvtest-tools) that finishes while the agent is
#      idle wakes serve: its result starts a generation with no input on
#      stdin.
# Every wait is bounded.
WEIR=${1:?usage: $0 path/to/weir}
PLUGINS=${WEIR_TEST_DRIVER_PLUGIN_DIR:?run through ctest}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-serve-steer.XXXXXX") || exit 1
trap 'exec 3>&- 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && return 1
        sleep 0.1
    done
}
# count FILE PATTERN
count() { grep -c "$2" "$1" 2>/dev/null; }
# wait_count FILE PATTERN N: until N lines match (at most 30 s)
wait_count() {
    i=0
    while [ "$(count "$1" "$2")" -lt "$3" ]; do
        i=$((i + 1))
        [ $i -gt 300 ] && return 1
        sleep 0.1
    done
}

# start NAME CONFIG: serve in the background, stdin from a fifo on fd 3
start() {
    rm -f "$TMP/in"
    mkfifo "$TMP/in" || exit 1
    timeout 60 "$WEIR" serve --stdio -c "$2" -s "$1" --events all <"$TMP/in" >"$TMP/$1.out" \
        2>"$TMP/$1.err" &
    pid=$!
    exec 3>"$TMP/in"
}
finish() {
    echo '{"op":"shutdown"}' >&3
    exec 3>&-
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || fail "$1: exit $rc: $(cat "$TMP/$1.err")"
    "$WEIR" log --check "$TMP/sessions/$1.jsonl" >/dev/null 2>&1 || fail "$1: weir log --check"
}

# The delivery of every input.delivered equals its one input.queued's.
check_receipts() {
    jq -r 'select(.type=="input.queued" or .type=="input.delivered")
           | "\(.type) \(.data.input_id) \(.data.delivery)"' "$1" >"$TMP/receipts"
    awk '$1=="input.queued"{q[$2]++; d[$2]=$3}
         $1=="input.delivered"{if(q[$2]!=1||d[$2]!=$3){print "mismatch " $2 " " q[$2] " " d[$2] " " $3; bad=1}}
         END{exit bad}' "$TMP/receipts" || fail "receipts: $(cat "$TMP/receipts")"
}

# ------------------------------------------------------------------------
# 1. native steering, receipts, acknowledgement, anchored refusal
cat >"$TMP/native.json" <<CONF
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugin_path": ["$PLUGINS"],
 "plugins": [
   {"id": "scripted", "plugin": "provider-scripted",
    "config": {"steer_live": ["refuse", "apply"], "replies": [
      {"text": "looking it up", "chunks": 30, "chunk_delay_ms": 50,
       "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}]},
      {"text": "checking again", "chunks": 30, "chunk_delay_ms": 50,
       "tool_calls": [{"id": "c2", "name": "lookup", "arguments": {}}]},
      {"text": "all done", "expect": {"message_contains": "second correction"}}]}},
   {"id": "tools", "plugin": "drvtest-tools", "config": {"tools": [{"name": "lookup"}]}}]}
CONF
start native "$TMP/native.json"
out="$TMP/native.out"
echo '{"op":"send","input_id":"q1","text":"find it"}' >&3
wait_for "$out" '"type":"agent/assistant-stream".*"type":"chunk"' || fail "native: no stream"
echo '{"op":"send","input_id":"n1","text":"first correction","mode":"steer"}' >&3
# the second request streams: its start frame, then a chunk
wait_count "$out" '"frame":{"type":"start"' 2 || fail "native: no second stream: $(cat "$TMP/native.err")"
wait_count "$out" '"frame":{"type":"chunk","index":3,' 2 || fail "native: no chunk of the second stream"
echo '{"op":"send","input_id":"n2","text":"second correction","mode":"steer"}' >&3
wait_for "$out" '"type":"generation\.finished"' || fail "native: no generation.finished: $(cat "$TMP/native.err")"
echo '{"op":"send","input_id":"q1","text":"find it"}' >&3
wait_for "$out" '"type":"input\.acknowledged"' || fail "native: no input.acknowledged"
echo '{"op":"send","input_id":"a1","text":"late","mode":"steer","target_generation_id":"gen-1"}' >&3
wait_for "$out" '"type":"error".*"input_id":"a1"' || fail "native: anchored steer not refused"
finish native

grep -q '^{"type":"input.queued","time":[0-9]*,"data":{"input_id":"n1","delivery":"request_boundary","source":"steer","generation_id":"gen-1"}}$' "$out" ||
    fail "native: n1 refused natively should be queued for gen-1: $(grep input.queued "$out")"
grep -q '^{"type":"input.delivered","time":[0-9]*,"data":{"input_id":"n1","delivery":"request_boundary","source":"steer","generation_id":"gen-1"}}$' "$out" ||
    fail "native: n1 delivered: $(grep input.delivered "$out")"
grep -q '"type":"input.queued".*"n2"' "$out" && fail "native: n2 was queued"
grep -q '^{"type":"steering.accepted","time":[0-9]*,"data":{"input_id":"n2","generation_id":"gen-1"}}$' "$out" ||
    fail "native: steering.accepted n2: $(grep steering "$out")"
grep -q '^{"type":"steering.applied","time":[0-9]*,"data":{"input_id":"n2","generation_id":"gen-1"}}$' "$out" ||
    fail "native: steering.applied n2"
grep -q '^{"type":"generation.finished","time":[0-9]*,"data":{"generation_id":"gen-1","input_ids":\["q1","n1","n2"\],"accepted_input_ids":\[\],"text":"all done",' "$out" ||
    fail "native: generation.finished: $(grep generation.finished "$out")"
grep -q '^{"type":"input.acknowledged","time":[0-9]*,"data":{"input_id":"q1","duplicate":true,"generation_id":"gen-1"}}$' "$out" ||
    fail "native: input.acknowledged: $(grep acknowledged "$out")"
grep -q '"type":"error","time":[0-9]*,"line":5,"input_id":"a1","message":"send: generation \\"gen-1\\" is not running' "$out" ||
    fail "native: anchored refusal: $(grep '"type":"error"' "$out")"
[ "$(count "$out" '"type":"generation.started"')" -eq 1 ] || fail "native: one generation"
[ "$(count "$out" '"type":"user/message"')" -eq 3 ] || fail "native: three user messages in the log"
check_receipts "$out"

# ------------------------------------------------------------------------
# 2. a cancel during agent/pre-step
cat >"$TMP/prestep.json" <<CONF
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugin_path": ["$PLUGINS"],
 "plugins": [
   {"id": "scripted", "plugin": "provider-scripted", "config": {"replies": [{"text": "never"}]}},
   {"id": "gate", "plugin": "drvtest-hooks", "config": {"pre_step": {"action": "wait_fail"}}}]}
CONF
start prestep "$TMP/prestep.json"
out="$TMP/prestep.out"
echo '{"op":"send","input_id":"q1","text":"go"}' >&3
wait_for "$out" '"type":"agent/inbox/claimed"' || fail "prestep: no claim"
sleep 0.2
echo '{"op":"cancel"}' >&3
wait_for "$out" '"type":"generation\.detached"' || fail "prestep: no generation.detached: $(cat "$out")"
finish prestep
grep -q '"type":"generation.failed"' "$out" && fail "prestep: the cancel failed the generation"
grep -q '"type":"step/start"' "$out" && fail "prestep: a step was opened"
grep -q '"type":"agent/error"' "$out" && fail "prestep: an error was reported"
grep -q '^{"type":"input.discarded","time":[0-9]*,"data":{"input_id":"q1","source":"human","reason":"canceled","generation_id":"gen-1"}}$' "$out" ||
    fail "prestep: input.discarded: $(grep '"input\.' "$out")"
grep -q '"type":"input.unknown"' "$out" && fail "prestep: input.unknown for a known no-effect"
grep -q '^{"type":"generation.detached","time":[0-9]*,"data":{"generation_id":"gen-1","input_ids":\[\],"accepted_input_ids":\[\],"cancellation":"unconfirmed","reason":{"kind":"aborted","cause":"user"}}}$' "$out" ||
    fail "prestep: generation.detached: $(grep detached "$out")"

# ------------------------------------------------------------------------
# 3. a background job's result wakes serve while it is idle
cat >"$TMP/wake.json" <<CONF
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugin_path": ["$PLUGINS"],
 "plugins": [
   {"id": "scripted", "plugin": "provider-scripted", "config": {"replies": [
      {"text": "starting", "tool_calls": [{"id": "c1", "name": "crawl", "arguments": {}}]},
      {"text": "queued"},
      {"text": "crawled", "expect": {"message_contains": "crawl result"}}]}},
   {"id": "tools", "plugin": "drvtest-tools", "config": {"tools": [
      {"name": "crawl", "reply": "crawl result", "background": true,
       "wait_for_file": "$TMP/release"}]}}]}
CONF
start wake "$TMP/wake.json"
out="$TMP/wake.out"
echo '{"op":"send","input_id":"q1","text":"crawl"}' >&3
wait_for "$out" '"type":"generation\.finished"' || fail "wake: no first generation"
job=$(jq -r 'select(.type=="generation.finished") | .data.active_job_ids[0]' "$out" | head -n 1)
[ -n "$job" ] && [ "$job" != null ] || fail "wake: no active job: $(grep generation.finished "$out")"
: >"$TMP/release" # the job ends; nothing more comes on stdin
wait_for "$out" '"type":"generation\.started".*"gen-2"' || fail "wake: the job's result did not wake serve"
wait_for "$out" '"type":"generation\.finished".*"gen-2"' || fail "wake: no second generation.finished"
finish wake
grep -q '^{"type":"generation.started","time":[0-9]*,"data":{"generation_id":"gen-2","initial_input_id":"'"$job"'"' "$out" ||
    fail "wake: gen-2 should start with the job's result: $(grep generation.started "$out")"
grep -q '"type":"generation.finished".*"gen-2".*"text":"crawled"' "$out" || fail "wake: gen-2 answer"

[ $FAILURES -eq 0 ] && echo "serve_steering: ok"
exit $FAILURES
