#!/bin/sh
# tests/scripts/crash_kill9.sh WEIR [ITERATIONS] - the crash campaign of
# docs/reliability.md: "kill -9 at any point leaves a log that opens, and resumes to
# the same derived history".
#
# Each iteration starts `weir run` on a scripted deployment whose replies
# stream slowly (20 chunks, 5 ms apart) and call a tool (pow through
# tools-ffi), kills it with SIGKILL after a delay that sweeps the whole run
# (model streaming, tool execution, the second step, turn end), and then:
#   1. `weir log --check` passes (an open turn is reported as `open:`);
#   2. `weir log --derive` works (the pre-crash history H);
#   3. `weir resume ID "continue"` closes an open turn as interrupted and
#      runs a new turn to completion;
#   4. the log checks clean with nothing open, and the derived history after
#      the resume starts with H.
# The fsync policy rotates over step/always/none.  A log/checkpoint follows
# every turn (session.checkpoint_bytes 1), so kills land on them too: each
# resumed log ends its new turn with one, and weir_log_summary (`weir
# sessions --json`) reads the turns the log has.  The delays are a fixed
# sweep (iteration i sleeps (i * 37) mod 500 ms), so a failing iteration can
# be rerun alone with CRASH_ONLY=i; its log is printed on failure.
# Every other process runs under `timeout`; sessions live in a temp WEIR_SESSION_DIR.
WEIR=${1:?usage: $0 path/to/weir [ITERATIONS]}
ITER=${2:-30}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-crash.XXXXXX") || exit 1
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; [ -n "${CRASH_KEEP:-}" ] || rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= WEIR_SESSION_DIR="$TMP/sessions"
command -v jq >/dev/null 2>&1 || { echo "crash_kill9: jq not found (make deps installs it)"; exit 1; }
FAILURES=0
fail() { echo "FAIL: iteration $i (delay ${delay}ms, fsync $fsync): $*" >&2; FAILURES=$((FAILURES + 1)); }

cat >"$TMP/script.json" <<'JSON'
{"loop": true,
 "replies": [
  {"text": "Let me work that out with the pow tool, one small piece at a time.",
   "chunks": 20, "chunk_delay_ms": 5,
   "tool_calls": [{"id": "call_pow", "name": "pow", "arguments": {"x": 2, "y": 10}}]},
  {"text": "2 to the power 10 is 1024, and that is the whole answer.",
   "chunks": 20, "chunk_delay_ms": 5}]}
JSON
for fsync in step always none; do
    cat >"$TMP/$fsync.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "$fsync", "checkpoint_bytes": 1},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"script": "$TMP/script.json"}},
             {"id": "math", "plugin": "tools-ffi",
              "config": {"tools": [{"library": "libm.so.6", "symbol": "pow",
                                    "prototype": "double pow(double x, double y)",
                                    "description": "x raised to the power y"}]}}]}
JSON
done

# ms -> "S.mmm" for sleep(1)
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

open_turns=0 finished=0 no_log=0
i=0
while [ $i -lt "$ITER" ]; do
    i=$((i + 1))
    delay=$(((i * 37) % 500))
    case $((i % 3)) in 0) fsync=step ;; 1) fsync=always ;; *) fsync=none ;; esac
    [ -n "${CRASH_ONLY:-}" ] && [ "$CRASH_ONLY" != $i ] && continue
    cfg="$TMP/$fsync.json"
    id="crash$i"
    log="$TMP/sessions/$id.jsonl"

    # no `timeout` here: killing it would not kill weir; the kill -9 below
    # bounds this process
    "$WEIR" run -c "$cfg" -s "$id" "what is 2 to the 10?" >/dev/null 2>"$TMP/run.err" &
    PID=$!
    sleep "$(secs $delay)"
    kill -9 "$PID" 2>/dev/null
    wait "$PID" 2>/dev/null
    PID=

    if [ ! -e "$log" ]; then
        # killed before the session was created: nothing to check, but a
        # run under the same id must still work
        no_log=$((no_log + 1))
        timeout 20 "$WEIR" run -c "$cfg" -s "$id" "again" >/dev/null 2>"$TMP/run.err" ||
            fail "run after an early kill: $(cat "$TMP/run.err")"
        continue
    fi

    if ! timeout 20 "$WEIR" log -c "$cfg" "$log" --check >"$TMP/check1" 2>&1; then
        fail "log --check after kill -9: $(cat "$TMP/check1")"
        cat "$log" >&2
        continue
    fi
    if grep -q '^open:' "$TMP/check1"; then
        was_open=1
        open_turns=$((open_turns + 1))
    else
        was_open=0
        finished=$((finished + 1))
    fi
    if ! timeout 20 "$WEIR" log -c "$cfg" "$log" --derive >"$TMP/before.json" 2>"$TMP/derive.err"; then
        fail "log --derive after kill -9: $(cat "$TMP/derive.err")"
        continue
    fi
    ends_before=$(grep -c '"type":"turn/end"' "$log")

    if ! timeout 30 "$WEIR" resume -c "$cfg" "$id" "continue" >/dev/null 2>"$TMP/resume.err"; then
        fail "weir resume: exit $? ($(cat "$TMP/resume.err"))"
        cat "$log" >&2
        continue
    fi
    if ! timeout 20 "$WEIR" log -c "$cfg" "$log" --check >"$TMP/check2" 2>&1; then
        fail "log --check after resume: $(cat "$TMP/check2")"
        continue
    fi
    grep -q '^open:' "$TMP/check2" && fail "still open after resume: $(cat "$TMP/check2")"
    if [ $was_open -eq 1 ]; then
        # the open turn was closed as interrupted, before the new turn
        grep '"type":"turn/end"' "$log" | sed -n "$((ends_before + 1))p" |
            grep -q '"kind":"interrupted"' ||
            fail "the open turn was not closed as interrupted"
    fi
    [ "$(grep -c '"type":"turn/end"' "$log")" -ge $((ends_before + 1 + was_open)) ] ||
        fail "resume did not run a new turn"
    tail -n 1 "$log" | grep -q '"type":"log/checkpoint"' ||
        fail "the resumed turn did not end with a checkpoint: $(tail -n 1 "$log")"
    turns=$(grep -c '"type":"turn/start"' "$log")
    WEIR_SESSION_DIR="$TMP/sessions" timeout 20 "$WEIR" sessions --json |
        grep "\"id\":\"$id\"" | grep -q "\"turns\":$turns," ||
        fail "weir sessions does not count $turns turns: $(WEIR_SESSION_DIR="$TMP/sessions" "$WEIR" sessions --json | grep "\"id\":\"$id\"")"
    if ! timeout 20 "$WEIR" log -c "$cfg" "$log" --derive >"$TMP/after.json" 2>"$TMP/derive.err"; then
        fail "log --derive after resume: $(cat "$TMP/derive.err")"
        continue
    fi
    prefix=$(jq -n --slurpfile a "$TMP/before.json" --slurpfile b "$TMP/after.json" \
        '($a[0] | length) as $n | ($b[0] | length) > $n and $b[0][0:$n] == $a[0]')
    if [ "$prefix" != true ]; then
        fail "the derived history before the crash is not a prefix of the one after resume"
        echo "before: $(cat "$TMP/before.json")" >&2
        echo "after:  $(cat "$TMP/after.json")" >&2
    fi
done

echo "crash_kill9: $ITER iterations: $open_turns killed mid-turn, $finished finished first," \
     "$no_log killed before the log existed; $FAILURES failures"
exit $((FAILURES > 0))
