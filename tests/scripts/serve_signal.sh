#!/bin/sh
# tests/scripts/serve_signal.sh WEIR - SIGTERM (and SIGINT) to `weir serve
# --stdio` while a turn streams is a shutdown: the running generation is
# detached (cause disposed), queued input is held, the session closes
# (session.closed is the last line, with the signal's name), and serve exits
# 143 (130 for SIGINT); the log checks with nothing open.  stdin stays open:
# the signal alone stops serve.  Every wait is bounded.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-serve-signal.XXXXXX") || exit 1
trap 'exec 3>&- 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $sig: $*" >&2; FAILURES=$((FAILURES + 1)); }
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && return 1
        sleep 0.1
    done
}
SLOW='{"text":"a slow answer that takes its time to come","chunks":20,"chunk_delay_ms":1000}'
cat >"$TMP/slow.json" <<CONF
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [$SLOW, $SLOW]}}]}
CONF

for sig in TERM INT; do
    case $sig in
    TERM) want_rc=143 ;;
    INT) want_rc=130 ;;
    esac
    out="$TMP/$sig.out"
    rm -f "$TMP/in"
    mkfifo "$TMP/in" || exit 1
    "$WEIR" serve --stdio -c "$TMP/slow.json" -s sig-$sig <"$TMP/in" >"$out" 2>"$TMP/err" &
    pid=$!
    exec 3>"$TMP/in"
    echo '{"op":"send","input_id":"q1","text":"first"}' >&3
    echo '{"op":"send","input_id":"q2","text":"second"}' >&3
    wait_for "$out" '"type":"input.delivered".*"q1"' || fail "q1 not delivered: $(cat "$out")"
    kill -$sig $pid
    i=0
    while kill -0 $pid 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "serve did not exit"; kill -9 $pid; break; }
        sleep 0.1
    done
    wait $pid
    rc=$?
    exec 3>&-
    [ $rc -eq $want_rc ] || fail "exit $rc, want $want_rc: $(cat "$TMP/err")"
    grep -q '^{"type":"generation.detached","time":[0-9]*,"data":{"generation_id":"gen-1","input_ids":\["q1"\],"accepted_input_ids":\[\],"cancellation":"unconfirmed","reason":{"kind":"aborted","cause":"disposed"}}}$' "$out" ||
        fail "gen-1 not detached: $(cat "$out")"
    grep -q '"type":"input.held","time":[0-9]*,"data":{"input_id":"q2","source":"human","reason":"shutdown"}}$' "$out" ||
        fail "q2 not held: $(grep q2 "$out")"
    [ "$(grep -c '"type":"generation\.\(finished\|failed\|detached\)"' "$out")" -eq 1 ] ||
        fail "terminal events: $(grep generation "$out")"
    tail -n 1 "$out" | grep -q '^{"type":"session.closed","time":[0-9]*,"status":"completed","signal":"SIG'$sig'"}$' ||
        fail "last line: $(tail -n 1 "$out")"
    "$WEIR" log --check "$TMP/sessions/sig-$sig.jsonl" >"$TMP/check" 2>&1 ||
        fail "log check: $(cat "$TMP/check")"
    grep -q '^open:' "$TMP/check" && fail "left open: $(cat "$TMP/check")"
done

[ $FAILURES -eq 0 ] && echo "serve_signal: ok"
exit $FAILURES
