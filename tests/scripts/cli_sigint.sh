#!/bin/sh
# tests/scripts/cli_sigint.sh WEIR - SIGINT during `weir run` cancels the
# running turn (turn/end aborted, cause user), exits 1, and leaves a log that
# passes `weir log --check`.  The scripted reply streams slowly; the script
# waits (bounded) until the request is logged, then sends SIGINT.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-sigint.XXXXXX") || exit 1
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

cat >"$TMP/slow.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "a very slow answer", "chunks": 4,
                                      "chunk_delay_ms": 60000}]}}]}
JSON
"$WEIR" run -c "$TMP/slow.json" -s slow "hi" >"$TMP/out" 2>"$TMP/err" &
PID=$!
LOG="$TMP/sessions/slow.jsonl"
i=0
until grep -q '"type":"request/context"' "$LOG" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 300 ] && { fail "the request was never logged"; break; }
    sleep 0.1
done
kill -INT "$PID"
wait "$PID"
rc=$?
PID=
[ $rc -eq 1 ] || fail "exit $rc, want 1 ($(cat "$TMP/err"))"
grep -q '"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","cause":"user"}}' "$LOG" ||
    fail "no aborted turn/end in the log"
grep -q '^weir: turn cancelled (user)$' "$TMP/err" || fail "stderr: $(cat "$TMP/err")"
"$WEIR" log -c "$TMP/slow.json" slow --check >/dev/null || fail "log check after SIGINT"

[ $FAILURES -eq 0 ] && echo "cli_sigint: ok"
exit $FAILURES
