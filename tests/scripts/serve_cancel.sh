#!/bin/sh
# tests/scripts/serve_cancel.sh WEIR - cancellation over `weir serve
# --stdio`, with a scripted provider that streams slowly: a cancel command
# detaches the running generation (no generation.finished), a provider
# failure fails the next one with its error type, and a shutdown during a
# turn detaches it with cause "disposed".  A compact command waiting for
# the turn is answered when a cancel or the shutdown drops it.  Every wait
# is bounded.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-serve-cancel.XXXXXX") || exit 1
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
SLOW='{"text":"a slow answer","chunks":300,"chunk_delay_ms":100}'
cat >"$TMP/slow.json" <<CONF
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [$SLOW, {"fail": {"code": "OVERLOADED", "message": "busy"}},
                                     $SLOW]}}]}
CONF

mkfifo "$TMP/in" || exit 1
timeout 30 "$WEIR" serve --stdio -c "$TMP/slow.json" -s cancel <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
pid=$!
exec 3>"$TMP/in"
# 1. cancel during the stream
echo '{"op":"send","input_id":"q1","text":"first"}' >&3
wait_for "$TMP/out" '"type":"input.delivered".*"q1"' || fail "q1 not delivered: $(cat "$TMP/out")"
echo '{"op":"compact"}' >&3
echo '{"op":"cancel"}' >&3
wait_for "$TMP/out" '"type":"generation.detached"' || fail "no detached: $(cat "$TMP/out")"
# 2. the provider fails the next request
echo '{"op":"send","input_id":"q2","text":"second"}' >&3
wait_for "$TMP/out" '"type":"generation.failed"' || fail "no failed: $(cat "$TMP/out")"
# 3. shutdown during a turn
echo '{"op":"send","input_id":"q3","text":"third"}' >&3
wait_for "$TMP/out" '"type":"input.delivered".*"q3"' || fail "q3 not delivered: $(cat "$TMP/out")"
echo '{"op":"compact"}' >&3
echo '{"op":"shutdown"}' >&3
exec 3>&-
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"

grep -q '"type":"generation.finished"' "$TMP/out" && fail "a cancelled generation finished"
grep -q '^{"type":"generation.detached","time":[0-9]*,"data":{"generation_id":"gen-1","input_ids":\["q1"\],"accepted_input_ids":\[\],"cancellation":"unconfirmed","reason":{"kind":"aborted","cause":"user"}}}$' "$TMP/out" ||
    fail "detached gen-1: $(grep detached "$TMP/out")"
grep -q '^{"type":"generation.failed","time":[0-9]*,"data":{"generation_id":"gen-2","input_ids":\["q2"\],"accepted_input_ids":\[\],"error_type":"OVERLOADED","error_message":"busy",' "$TMP/out" ||
    fail "failed gen-2: $(grep failed "$TMP/out")"
grep -q '^{"type":"generation.detached","time":[0-9]*,"data":{"generation_id":"gen-3","input_ids":\["q3"\],"accepted_input_ids":\[\],"cancellation":"unconfirmed","reason":{"kind":"aborted","cause":"disposed"}}}$' "$TMP/out" ||
    fail "detached gen-3: $(grep detached "$TMP/out")"
[ "$(grep -c '"type":"generation.started"' "$TMP/out")" -eq 3 ] || fail "three generations"
grep -q '^{"type":"error","time":[0-9]*,"line":2,"message":"compact: cancelled before it started"}$' "$TMP/out" ||
    fail "compact line 2: $(grep '"line":2' "$TMP/out")"
grep -q '^{"type":"error","time":[0-9]*,"line":6,"message":"compact: dropped by the shutdown"}$' "$TMP/out" ||
    fail "compact line 6: $(grep '"line":6' "$TMP/out")"
grep -q '"type":"compaction"' "$TMP/out" && fail "a dropped compaction ran"
tail -n 1 "$TMP/out" | grep -q '^{"type":"session.closed","time":[0-9]*,"status":"completed"}$' ||
    fail "last line: $(tail -n 1 "$TMP/out")"
"$WEIR" log --check "$TMP/sessions/cancel.jsonl" >/dev/null 2>&1 || fail "weir log --check"

[ $FAILURES -eq 0 ] && echo "serve_cancel: ok"
exit $FAILURES
