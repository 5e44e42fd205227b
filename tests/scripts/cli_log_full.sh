#!/bin/sh
# tests/scripts/cli_log_full.sh WEIR - `weir run` when the session log fills
# up mid-turn: one clear I/O error on stderr (after the session line), naming
# the log file, and exit 4.
#
# The full disk is simulated as in serve_log_full.sh: prlimit(1) lowers
# weir's file size limit while a scripted reply streams (SIGXFSZ ignored).
#   partial  a little room is left: the big assistant/message is cut short
#            (ENOSPC), the turn still closes in the log with error code IO
#   full     no room at all: nothing more is logged; the log checks with the
#            turn open, and `weir resume` (with room again) closes it
# Fails without prlimit (util-linux).  Every wait is bounded.
WEIR=${1:?usage: $0 path/to/weir}
command -v prlimit >/dev/null 2>&1 || { echo "cli_log_full: prlimit (util-linux) not found"; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-full.XXXXXX") || exit 1
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
trap '' XFSZ # inherited: a write past the file size limit fails with EFBIG
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $case: $*" >&2; FAILURES=$((FAILURES + 1)); }

TEXT=$(printf 'all work and no play makes a long answer %.0s' $(seq 1 90))
cat >"$TMP/slow.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "$TEXT", "chunks": 20, "chunk_delay_ms": 100},
                                     {"text": "done"}]}}]}
JSON

for case in partial full; do
    margin=0
    [ $case = partial ] && margin=1500
    log="$TMP/sessions/$case.jsonl"
    # stdout to /dev/null: the file size limit applies to regular files only
    "$WEIR" run -c "$TMP/slow.json" -s $case "hi" >/dev/null 2>"$TMP/err" &
    PID=$!
    i=0
    until grep -q '"type":"request/context"' "$log" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "the request was never logged"; break; }
        sleep 0.1
    done
    lim=$(($(wc -c <"$log") + margin))
    prlimit --pid "$PID" --fsize=$lim:$lim || fail "prlimit"
    wait "$PID"
    rc=$?
    PID=
    [ $rc -eq 4 ] || fail "exit $rc, want 4 ($(cat "$TMP/err"))"
    grep -v '^weir: session \|^weir: model ' "$TMP/err" >"$TMP/err.rest" # the session and route lines
    [ "$(wc -l <"$TMP/err.rest")" -eq 1 ] || fail "want one line on stderr: $(cat "$TMP/err")"
    grep -q "^weir: .*session log $log: write failed: " "$TMP/err" ||
        fail "the error does not name the log: $(cat "$TMP/err")"
    grep -q UNKNOWN "$TMP/err" && fail "classified UNKNOWN: $(cat "$TMP/err")"
    "$WEIR" log -c "$TMP/slow.json" $case --check >"$TMP/check" 2>&1 ||
        fail "log --check: $(cat "$TMP/check")"
    if [ $case = partial ]; then
        grep -q 'No space left on device' "$TMP/err" || fail "not ENOSPC: $(cat "$TMP/err")"
        grep -q '"type":"turn/end","data":{"turn":1,"reason":{"kind":"error","error":{"code":"IO","message":"session log '"$log"': write failed: No space left on device"}}}' "$log" ||
            fail "turn/end: $(grep turn/end "$log")"
        grep -q '^open:' "$TMP/check" && fail "open after a closed turn: $(cat "$TMP/check")"
    else
        grep -q '^open: turn 1' "$TMP/check" || fail "the turn is not open: $(cat "$TMP/check")"
        "$WEIR" resume -c "$TMP/slow.json" $case >/dev/null 2>"$TMP/err" ||
            fail "resume: $(cat "$TMP/err")"
        grep -q '"type":"turn/end","data":{"turn":1,"reason":{"kind":"interrupted"' "$log" ||
            fail "resume did not close the turn"
    fi
done

[ $FAILURES -eq 0 ] && echo "cli_log_full: ok"
exit $FAILURES
