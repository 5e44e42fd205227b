#!/bin/sh
# tests/scripts/serve_log_full.sh WEIR - the session log fills up mid-turn
# under `weir serve --stdio`: every accepted input still gets exactly one
# terminal event.
#
# The full disk is simulated with RLIMIT_FSIZE: while a scripted reply
# streams, prlimit(1) lowers weir's file size limit (SIGXFSZ is ignored, so
# a write past it fails instead of killing the process).
#   full     the limit is the log's size: every later write fails (EFBIG);
#            the running generation gets generation.failed (error_type IO,
#            "durable":false: its turn/end is not in the log), the queued
#            input input.held ("durable":false)
#   partial  the limit leaves a little room: the big assistant/message is
#            cut short (reported as ENOSPC, as a full disk does), the small
#            step/end and turn/end still fit: generation.failed is durable
# Either way the agent stops, a later send is refused, serve exits 4 and
# the log checks.  In the full case the held input is never replayed:
# serving the session again (the disk has room now) holds q2 and q3 durably
# (input.held, reason shutdown; an agent/inbox/spliced with outcome held)
# and runs no generation.  Fails without prlimit (util-linux).  Every wait
# is bounded.
WEIR=${1:?usage: $0 path/to/weir}
command -v prlimit >/dev/null 2>&1 || { echo "serve_log_full: prlimit (util-linux) not found"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-serve-full.XXXXXX") || exit 1
trap 'exec 3>&- 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT INT TERM
trap '' XFSZ # inherited: a write past the file size limit fails with EFBIG
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $case: $*" >&2; FAILURES=$((FAILURES + 1)); }
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && return 1
        sleep 0.1
    done
}
# a long answer, streamed over 2 s: its assistant/message line is ~8 KB
TEXT=$(printf 'all work and no play makes a long answer %.0s' $(seq 1 90))
SLOW="{\"text\":\"$TEXT\",\"chunks\":20,\"chunk_delay_ms\":100}"
cat >"$TMP/slow.json" <<CONF
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [$SLOW, $SLOW, $SLOW]}}]}
CONF

# terminal IDS: the number of terminal events naming each id
terminal() {
    for id; do
        n=$(grep -E '"type":"(generation\.(finished|failed|detached)|input\.(held|discarded|unknown))"' \
            "$out" | grep -c "\"$id\"")
        [ "$n" -eq 1 ] || fail "$id has $n terminal events: $(grep "\"$id\"" "$out")"
    done
}

for case in full partial; do
    margin=0
    [ $case = partial ] && margin=1500
    log="$TMP/sessions/$case.jsonl"
    out="$TMP/$case.out"
    rm -f "$TMP/in" "$TMP/out.fifo"
    mkfifo "$TMP/in" "$TMP/out.fifo" || exit 1
    cat "$TMP/out.fifo" >"$out" & # a pipe: the file size limit is not stdout's
    cat_pid=$!
    "$WEIR" serve --stdio -c "$TMP/slow.json" -s $case <"$TMP/in" >"$TMP/out.fifo" \
        2>"$TMP/$case.err" &
    pid=$!
    exec 3>"$TMP/in"
    echo '{"op":"send","input_id":"q1","text":"first"}' >&3
    echo '{"op":"send","input_id":"q2","text":"second"}' >&3
    echo '{"op":"send","input_id":"q3","text":"third"}' >&3
    wait_for "$log" '"type":"request/context"' || fail "no request: $(cat "$out")"
    size=$(wc -c <"$log")
    lim=$((size + margin))
    prlimit --pid $pid --fsize=$lim:$lim || fail "prlimit"
    wait_for "$out" '"message":"the agent stopped' || fail "the agent did not stop: $(cat "$out")"
    echo '{"op":"send","input_id":"q4","text":"fourth"}' >&3
    wait_for "$out" '"input_id":"q4"' || fail "q4 not answered"
    echo '{"op":"shutdown"}' >&3
    exec 3>&-
    i=0
    while kill -0 $pid 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "serve did not exit"; kill -9 $pid; break; }
        sleep 0.1
    done
    wait $pid
    rc=$?
    wait $cat_pid
    [ $rc -eq 4 ] || fail "exit $rc, want 4 (I/O error): $(cat "$TMP/$case.err")"

    terminal q1 q2 q3
    grep -q '"type":"generation\.\(finished\|detached\)"' "$out" && fail "not a failure: $(cat "$out")"
    failed=$(grep '"type":"generation.failed"' "$out")
    echo "$failed" | grep -q '"generation_id":"gen-1","input_ids":\["q1"\],"accepted_input_ids":\[\],"error_type":"IO","error_message":"session log [^"]*/sessions/'$case'.jsonl: write failed: ' ||
        fail "generation.failed: $failed"
    echo "$failed" | grep -q '"reason":{"kind":"error","error":{"code":"IO",' ||
        fail "generation.failed reason: $failed"
    if [ $case = full ]; then
        echo "$failed" | grep -q '"durable":false' || fail "not marked durable:false: $failed"
        grep '"type":"input.held"' "$out" | grep -q '"input_id":"q2".*"durable":false' ||
            fail "q2 held: $(grep q2 "$out")"
    else
        echo "$failed" | grep -q '"durable"' && fail "marked: $failed"
        echo "$failed" | grep -q 'No space left on device' || fail "a short write: $failed"
        grep -q '"type":"turn/end".*"code":"IO"' "$log" || fail "no turn/end in the log"
    fi
    grep -q '"type":"input.queued".*"q4"' "$out" && fail "q4 was accepted"
    grep -q '"type":"error".*"input_id":"q4","message":"send: the agent stopped' "$out" ||
        fail "q4 refusal: $(grep q4 "$out")"
    [ "$(grep -c '"message":"the agent stopped' "$out")" -eq 1 ] || fail "stop reported twice"
    tail -n 1 "$out" | grep -q '^{"type":"session.closed","time":[0-9]*,"status":"error"}$' ||
        fail "last line: $(tail -n 1 "$out")"
    "$WEIR" log --check "$log" >"$TMP/check" 2>&1 || fail "log --check: $(cat "$TMP/check")"
    [ $case = full ] || continue
    # the next open holds what the shutdown reported held, never runs it
    [ -e "$log.held" ] || fail "no hold marker beside the log"
    again="$TMP/$case.again"
    rm -f "$TMP/in"
    mkfifo "$TMP/in" || exit 1
    timeout 30 "$WEIR" serve --stdio -c "$TMP/slow.json" -s $case <"$TMP/in" >"$again" \
        2>"$TMP/$case.again.err" &
    pid=$!
    exec 3>"$TMP/in"
    wait_for "$again" '"type":"session.ready"' || fail "reopen: $(cat "$TMP/$case.again.err")"
    sleep 1 # a replayed input would start a generation by now
    echo '{"op":"shutdown"}' >&3
    exec 3>&-
    wait $pid || fail "reopen: exit $?: $(cat "$TMP/$case.again.err")"
    for id in q2 q3; do
        grep -q "^{\"type\":\"input.held\",\"time\":[0-9]*,\"data\":{\"input_id\":\"$id\",\"source\":\"human\",\"reason\":\"shutdown\"}}$" "$again" ||
            fail "reopen: $id not held: $(cat "$again")"
    done
    grep -q '"type":"generation\.started"' "$again" && fail "reopen: held input ran: $(cat "$again")"
    grep -q '"type":"agent/inbox/spliced".*"outcome":"held"' "$log" || fail "reopen: no durable hold"
    [ -e "$log.held" ] && fail "reopen: the hold marker stayed"
    "$WEIR" log --check "$log" >"$TMP/check" 2>&1 || fail "reopen: log --check: $(cat "$TMP/check")"
done

[ $FAILURES -eq 0 ] && echo "serve_log_full: ok"
exit $FAILURES
