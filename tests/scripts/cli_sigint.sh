#!/bin/sh
# tests/scripts/cli_sigint.sh WEIR - SIGINT and SIGTERM during `weir run`
# cancel the running turn and close it in the log before exiting:
#   SIGINT   turn/end aborted, cause disposed; "weir: interrupted by Ctrl-C"
#            (plain words, issue #37 item 10); exit 130
#   SIGTERM  turn/end aborted, cause disposed; "weir: interrupted by SIGTERM"; exit 143
# Either way the log passes `weir log --check` with nothing open.  The
# scripted reply streams slowly; the script waits (bounded) until the
# request is logged, then sends the signal.
# A hook that ignores the cancel (drvtest-hooks pre_step "hang", 20 s) holds
# the turn: a second terminating signal (SIGINT, SIGTERM, SIGHUP, in any
# mix) then quits at once with 128 + that signal, as a second Ctrl-C always
# did, and the log still passes `weir log --check` (the open turn is closed
# as interrupted by the next open).
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-sigint.XXXXXX") || exit 1
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $sig: $*" >&2; FAILURES=$((FAILURES + 1)); }

cat >"$TMP/slow.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "a very slow answer", "chunks": 4,
                                      "chunk_delay_ms": 60000}]}}]}
JSON

for sig in INT TERM; do
    case $sig in
    INT) want_rc=130 cause=disposed said='Ctrl-C' ;;
    TERM) want_rc=143 cause=disposed said='SIGTERM' ;;
    esac
    id=slow-$sig
    LOG="$TMP/sessions/$id.jsonl"
    "$WEIR" run -c "$TMP/slow.json" -s $id "hi" >"$TMP/out" 2>"$TMP/err" &
    PID=$!
    i=0
    until grep -q '"type":"request/context"' "$LOG" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "the request was never logged"; break; }
        sleep 0.1
    done
    kill -$sig "$PID"
    i=0
    while kill -0 "$PID" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "weir run did not exit"; kill -9 "$PID"; break; }
        sleep 0.1
    done
    wait "$PID"
    rc=$?
    PID=
    [ $rc -eq $want_rc ] || fail "exit $rc, want $want_rc ($(cat "$TMP/err"))"
    grep -q '"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","cause":"'$cause'"}}' "$LOG" ||
        fail "no aborted turn/end (cause $cause) in the log: $(grep turn/end "$LOG")"
    grep -q "^weir: interrupted by $said\$" "$TMP/err" || fail "stderr: $(cat "$TMP/err")"
    grep -q 'disposed' "$TMP/err" && fail "stderr says the cause's jargon: $(cat "$TMP/err")"
    "$WEIR" log -c "$TMP/slow.json" $id --check >"$TMP/check" 2>&1 ||
        fail "log check: $(cat "$TMP/check")"
    grep -q '^open:' "$TMP/check" && fail "left open: $(cat "$TMP/check")"
done

cat >"$TMP/hang.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "never reached"}]}},
             {"id": "hang", "plugin": "$WEIR_TEST_DRIVER_PLUGIN_DIR/weir-drvtest-hooks.so",
              "config": {"pre_step": {"action": "hang", "ms": 20000}}}]}
JSON
for pair in TERM:TERM INT:TERM HUP:HUP TERM:INT; do
    sig=$pair
    first=${pair%:*} second=${pair#*:}
    case $second in
    INT) want_rc=130 ;;
    TERM) want_rc=143 ;;
    HUP) want_rc=129 ;;
    esac
    case $first in
    INT) said='^weir: cancelling (press Ctrl-C again to quit)$' ;;
    *) said='^weir: terminating: cancelling the turn' ;;
    esac
    id=hang-$first-$second
    LOG="$TMP/sessions/$id.jsonl"
    "$WEIR" run -c "$TMP/hang.json" -s $id "hi" >"$TMP/out" 2>"$TMP/err" &
    PID=$!
    i=0
    until grep -q '"type":"turn/start"' "$LOG" 2>/dev/null; do # pre-step: before step/start
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "the turn never started"; break; }
        sleep 0.1
    done
    sleep 0.3 # into the hook
    kill -$first "$PID"
    i=0
    until grep -q "$said" "$TMP/err"; do
        i=$((i + 1))
        [ $i -gt 100 ] && { fail "the first signal was not taken: $(cat "$TMP/err")"; break; }
        sleep 0.1
    done
    kill -$second "$PID"
    i=0
    while kill -0 "$PID" 2>/dev/null; do # 5 s: the hook hangs 20 s
        i=$((i + 1))
        [ $i -gt 50 ] && { fail "a second signal did not quit at once"; kill -9 "$PID"; break; }
        sleep 0.1
    done
    wait "$PID"
    rc=$?
    PID=
    [ $rc -eq $want_rc ] || fail "exit $rc, want $want_rc ($(cat "$TMP/err"))"
    grep -q 'Sanitizer\|runtime error' "$TMP/err" && fail "sanitizer: $(cat "$TMP/err")"
    "$WEIR" log -c "$TMP/hang.json" $id --check >"$TMP/check" 2>&1 ||
        fail "log check: $(cat "$TMP/check")"
done

[ $FAILURES -eq 0 ] && echo "cli_sigint: ok"
exit $FAILURES
