#!/bin/sh
# tests/scripts/cli_send.sh WEIR - `weir send`: input queued for a session
# that no process holds is logged as an inbox splice (the log checks clean)
# and `weir resume` runs it; a session another process holds is refused
# with exit 4 and nothing is logged; usage errors and --help.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-send.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

cat >"$TMP/w.json" <<EOF
{"agent": {"provider": "s", "model": "m"},
 "session": {"dir": "\${WEIR_SESSION_DIR}"},
 "plugins": [{"id": "s", "plugin": "provider-scripted", "config": {"loop": true,
    "replies": [{"text": "ok"}]}}]}
EOF
LOG="$TMP/sessions/a.jsonl"

"$WEIR" run -c "$TMP/w.json" -s a "first" >/dev/null 2>&1 || fail "run"
out=$("$WEIR" send -c "$TMP/w.json" -s a --input-id in-7 "queued words" 2>&1)
[ $? -eq 0 ] || fail "send: $out"
case $out in *"queued for a (followup)"*) ;; *) fail "send output: $out" ;; esac
grep -q '"type":"agent/inbox/spliced"' "$LOG" || fail "no inbox splice in the log"
grep -q 'queued words' "$LOG" || fail "the text is not in the log"
"$WEIR" log -c "$TMP/w.json" a --check >/dev/null 2>&1 || fail "log --check after send"
# the same id and text again: acknowledged, nothing queued twice
"$WEIR" send -c "$TMP/w.json" -s a --input-id in-7 "queued words" >/dev/null 2>&1 ||
    fail "resend of the same id"
n=$(grep -c 'queued words' "$LOG")
[ "$n" -eq 1 ] || fail "the input was logged $n times"

# a live writer: refused, nothing logged
cat >"$TMP/slow.json" <<JSON
{"agent": {"provider": "s", "model": "m"},
 "session": {"dir": "\${WEIR_SESSION_DIR}"},
 "plugins": [{"id": "s", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "slow", "chunks": 2, "chunk_delay_ms": 60000}]}}]}
JSON
"$WEIR" run -c "$TMP/slow.json" -s busy "hold it" >/dev/null 2>&1 &
PID=$!
i=0
until grep -q '"type":"request/context"' "$WEIR_SESSION_DIR/busy.jsonl" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 300 ] && { fail "the slow turn never started"; break; }
    sleep 0.1
done
before=$(wc -c <"$WEIR_SESSION_DIR/busy.jsonl")
out=$("$WEIR" send -c "$TMP/slow.json" -s busy "while busy" 2>&1)
rc=$?
[ $rc -eq 4 ] || fail "send to a live session exited $rc: $out"
case $out in *"refused: session busy is open for writing by pid $PID"*) ;; *) fail "busy message: $out" ;; esac
[ "$(wc -c <"$WEIR_SESSION_DIR/busy.jsonl")" -eq "$before" ] || fail "a refused send changed the log"
kill "$PID" 2>/dev/null
wait "$PID" 2>/dev/null

# usage
"$WEIR" send -c "$TMP/w.json" "no session" >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing -s is not a usage error"
"$WEIR" send -c "$TMP/w.json" -s a --mode sideways "x" >/dev/null 2>&1
[ $? -eq 2 ] || fail "a bad --mode is not a usage error"
"$WEIR" send -c "$TMP/w.json" -s a >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing TEXT is not a usage error"
"$WEIR" send --help | grep -q 'usage: weir send' || fail "--help"

[ $FAILURES -eq 0 ] && echo "cli_send: ok"
exit $FAILURES
