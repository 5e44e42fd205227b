#!/bin/sh
# tests/scripts/sigterm_biglog.sh WEIR GEN - SIGTERM during the open of a big
# session log and during a compaction of its whole history ends `weir
# resume` within 1 s, and the log then passes `weir log --check` and resumes
# (issue #34, Done-when; docs/reliability.md, "SIGTERM on a big log").
#
# GEN is bench_biglog_gen (bench/biglog/README.md).  Two logs of real `weir
# run` turns of the built-in deployment, written without log/checkpoint
# events (--checkpoint-bytes 0: an open reads them in full) and without
# compactions (the whole history is one surface):
#
#   open        `weir resume -c default -c nocompact.json` (the built-in
#               deployment without compaction-basic); SIGTERM once the
#               process has been reading the log for SIGTERM_BIGLOG_OPEN_DELAY
#               seconds and has appended nothing (it is still in the open).
#               The CLI installs its handler once the agent is open, so the
#               signal's default action ends it: 143 as the shell reports it,
#               and nothing is written.
#   compaction  `weir resume -c default`: the history is far over the
#               scripted demo's 32768-token window, so the first step of the
#               turn starts with compaction-basic's pressure compaction of
#               all of it; SIGTERM as soon as `compaction/start` is in the
#               file.  The turn is cancelled (cause disposed) and closed,
#               exit 143.
#
# Each must be gone within SIGTERM_BIGLOG_LIMIT_MS (1000) of the signal
# (polled every 50 ms); then `weir log FILE --check` exits 0 and a further
# `weir resume` completes its turn (the scripted demo answers 1024).  The
# measured times are printed on stdout:
#   sigterm_biglog case=open|compaction ms=N rc=N bytes=N
#
# Sizes (the defaults keep the test well under a minute in a Debug+ASan
# build; `weir log --check` re-derives the surface at each request, so the
# number of turns is what its time grows with): SIGTERM_BIGLOG_TURNS (200),
# SIGTERM_BIGLOG_TOOL_BYTES (100000: about 21 MB of log, an open of a few
# seconds under ASan), SIGTERM_BIGLOG_OPEN_DELAY (1), SIGTERM_BIGLOG_LIMIT_MS.
WEIR=${1:?usage: $0 path/to/weir path/to/bench_biglog_gen}
GEN=${2:?usage: $0 path/to/weir path/to/bench_biglog_gen}
TURNS=${SIGTERM_BIGLOG_TURNS:-200}
TOOL_BYTES=${SIGTERM_BIGLOG_TOOL_BYTES:-100000}
OPEN_DELAY=${SIGTERM_BIGLOG_OPEN_DELAY:-1}
LIMIT_MS=${SIGTERM_BIGLOG_LIMIT_MS:-1000}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-sigterm-biglog.XXXXXX") || exit 1
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= WEIR_LOG_LEVEL=error WEIR_SESSION_DIR="$TMP/sessions"
mkdir -m 700 "$TMP/sessions" || exit 1
echo '{"plugins": [{"id": "compaction", "disabled": true}]}' >"$TMP/nocompact.json"
PROMPT="what is 2 to the 10th?"
FAILURES=0
fail() { echo "FAIL: $case: $*" >&2; FAILURES=$((FAILURES + 1)); }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
size() { wc -c <"$1" | tr -d ' '; }

gen() { # ID: the log of session ID
    "$GEN" -o "$TMP/sessions/$1.jsonl" --session "$1" --turns "$TURNS" --tool-bytes "$TOOL_BYTES" \
        --checkpoint-bytes 0 2>"$TMP/gen.err" || {
        echo "FAIL: gen $1: $(cat "$TMP/gen.err")" >&2
        exit 1
    }
}

# term: SIGTERM to $PID, then wait (bounded) until it is gone; sets MS (the
# signal to the process's end) and RC
term() {
    t0=$(now_ms)
    kill -TERM "$PID"
    i=0
    while kill -0 "$PID" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 600 ] && { kill -9 "$PID"; break; } # 30 s: a hang, not a slow exit
        sleep 0.05
    done
    MS=$(($(now_ms) - t0))
    wait "$PID"
    RC=$?
    PID=
    [ "$MS" -le "$LIMIT_MS" ] || fail "the process took $MS ms to end after SIGTERM (limit $LIMIT_MS)"
    grep -q 'Sanitizer\|runtime error' "$TMP/$case.err" && fail "sanitizer: $(cat "$TMP/$case.err")"
}

# after ID: the log checks clean (an open last turn would be reported as
# open, not as an error; a cancelled turn is closed) and a further resume
# completes its turn
after() {
    log=$TMP/sessions/$1.jsonl
    "$WEIR" log "$log" --check >"$TMP/check" 2>&1 || fail "log --check: $(cat "$TMP/check")"
    grep -q '^error:' "$TMP/check" && fail "log --check: $(cat "$TMP/check")"
    "$WEIR" resume -c default "$1" "$PROMPT" >"$TMP/again.out" 2>"$TMP/again.err" ||
        fail "the next resume failed: $(tail -n 5 "$TMP/again.err")"
    grep -q 1024 "$TMP/again.out" ||
        fail "the next resume did not complete its turn: $(tail -n 3 "$TMP/again.out" "$TMP/again.err")"
}

# --- SIGTERM during the open ----------------------------------------------
case=open
gen sigopen
LOG=$TMP/sessions/sigopen.jsonl
bytes=$(size "$LOG")
cp "$LOG" "$TMP/sigopen.before"
"$WEIR" resume -c default -c "$TMP/nocompact.json" sigopen "$PROMPT" >"$TMP/$case.out" \
    2>"$TMP/$case.err" &
PID=$!
sleep "$OPEN_DELAY"
if ! kill -0 "$PID" 2>/dev/null; then
    fail "weir resume ended within ${OPEN_DELAY}s: the open is too short to be signalled (raise SIGTERM_BIGLOG_TURNS or SIGTERM_BIGLOG_TOOL_BYTES)"
    wait "$PID"
    PID=
elif [ "$(size "$LOG")" != "$bytes" ]; then
    fail "weir resume appended within ${OPEN_DELAY}s: the open is over (raise the sizes)"
    kill -9 "$PID"
    wait "$PID"
    PID=
else
    term
    # the default action of SIGTERM: the handler comes after the open
    [ "$RC" -eq 143 ] || fail "exit $RC, want 143 ($(cat "$TMP/$case.err"))"
    cmp -s "$LOG" "$TMP/sigopen.before" || fail "the open wrote to the log before it was signalled"
    echo "sigterm_biglog case=open ms=$MS rc=$RC bytes=$bytes"
    after sigopen
fi

# --- SIGTERM during a compaction of the whole history ----------------------
case=compaction
gen sigcmp
LOG=$TMP/sessions/sigcmp.jsonl
bytes=$(size "$LOG")
grep -q '"type":"compaction/start"' "$LOG" && fail "the generated log already compacts"
"$WEIR" resume -c default sigcmp "$PROMPT" >"$TMP/$case.out" 2>"$TMP/$case.err" &
PID=$!
started=0
i=0
while kill -0 "$PID" 2>/dev/null; do
    if grep -q '"type":"compaction/start"' "$LOG"; then
        started=1
        break
    fi
    i=$((i + 1))
    [ $i -gt 6000 ] && break # 120 s
    sleep 0.02
done
if [ $started -eq 0 ]; then
    fail "no compaction started: $(tail -n 5 "$TMP/$case.err")"
    kill -9 "$PID" 2>/dev/null
    wait "$PID"
    PID=
else
    term
    [ "$RC" -eq 143 ] || fail "exit $RC, want 143 ($(cat "$TMP/$case.err"))"
    grep -q '"type":"turn/end","data":{"turn":[0-9]*,"reason":{"kind":"aborted","cause":"disposed"}}' \
        "$LOG" || fail "the cancelled turn is not closed as aborted (disposed): $(tail -c 600 "$LOG")"
    grep -q '"type":"compaction/end"' "$LOG" || fail "the compaction was not closed"
    echo "sigterm_biglog case=compaction ms=$MS rc=$RC bytes=$bytes"
    after sigcmp
fi

[ $FAILURES -eq 0 ] && echo "sigterm_biglog: ok"
exit $FAILURES
