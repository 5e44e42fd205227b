#!/bin/sh
# tests/scripts/serve_jobs.sh WEIR - background jobs over `weir serve
# --stdio` (docs/stdio-protocol.md, docs/tools.md "Background tools"), with
# a scripted provider and a tools-ffi tool declared "background": true
# (t_sleep_ms of tests/tool-plugins/weirffitest.c, which sleeps and cannot
# see a cancel):
#   1. the call gets a receipt at once (job.queued, generation.finished
#      lists the job in active_job_ids); its result arrives while the agent
#      is idle and starts a generation on its own, whose input_ids carry the
#      job's service input (job.returned, then generation.started with the
#      job id as initial_input_id);
#   2. cancel_job of a running job gives job.cancelled (effects
#      "not_rolled_back") once the function returned, and never
#      job.returned; the model is told in a generation of its own;
#   3. cancel_job of an unknown or finished job is an error event;
#   4. a crash (SIGKILL) while a job runs: serving the session again prints
#      job.failed with error_type INTERRUPTED and a message that says so,
#      and the model is told in a generation of its own.
# The session log passes `weir log --check`.  Every wait is bounded.
WEIR=${1:?usage: $0 path/to/weir}
LIB="${WEIR_TEST_BINARY_DIR:?}/tests/tool-plugins/libweirffitest.so"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-serve-jobs.XXXXXX") || exit 1
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
[ -f "$LIB" ] || { echo "FAIL: no $LIB" >&2; exit 1; }

cat >"$TMP/jobs.json" <<CONF
{"agent": {"provider": "scripted", "model": "demo", "max_background_jobs": 2},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugins": [
  {"id": "scripted", "plugin": "provider-scripted",
   "config": {"replies": [
     {"text": "Starting the job.", "tool_calls": [{"id": "c1", "name": "t_sleep_ms",
                                                  "arguments": {"ms": 1000}}]},
     {"text": "It runs in the background."},
     {"text": "The job is done.", "expect": {"message_contains": "finished:"}},
     {"text": "Starting a long one.", "tool_calls": [{"id": "c2", "name": "t_sleep_ms",
                                                     "arguments": {"ms": 1500}}]},
     {"text": "It runs too."},
     {"text": "Cancelled, then.", "expect": {"message_contains": "was cancelled"}}]}},
  {"id": "ffi", "plugin": "tools-ffi",
   "config": {"tools": [{"library": "$LIB", "symbol": "t_sleep_ms",
                         "prototype": "int t_sleep_ms(int ms)",
                         "description": "sleep ms milliseconds", "background": true}]}}]}
CONF

mkfifo "$TMP/in" || exit 1
timeout 60 "$WEIR" serve --stdio -c "$TMP/jobs.json" -s jobs <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
pid=$!
exec 3>"$TMP/in"

# 1. a job whose result arrives while the agent is idle
echo '{"op":"send","input_id":"q1","text":"run the job"}' >&3
wait_for "$TMP/out" '"type":"generation.finished".*"gen-1"' ||
    fail "no gen-1: $(cat "$TMP/out" "$TMP/err")"
job1=$(sed -n 's/^{"type":"job.queued".*"job_id":"\([^"]*\)".*/\1/p' "$TMP/out" | head -n 1)
[ -n "$job1" ] || fail "no job.queued: $(cat "$TMP/out")"
grep -q "^{\"type\":\"generation.finished\",\"time\":[0-9]*,\"data\":{\"generation_id\":\"gen-1\",\"input_ids\":\[\"q1\"\],.*\"active_job_ids\":\[\"$job1\"\]" "$TMP/out" ||
    fail "gen-1 does not list the job: $(grep finished "$TMP/out")"
# no input from the host: the job's result starts gen-2 by itself
wait_for "$TMP/out" '"type":"generation.finished".*"gen-2"' ||
    fail "the idle job result started no generation: $(cat "$TMP/out" "$TMP/err")"
grep -q "^{\"type\":\"job.returned\",\"time\":[0-9]*,\"data\":{\"job_id\":\"$job1\",\"call_id\":\"c1\",\"tool\":\"t_sleep_ms\",\"outcome\":\"tool_report\",\"effects\":\"not_rolled_back\"}}$" "$TMP/out" ||
    fail "job.returned: $(grep 'job\.' "$TMP/out")"
grep -q "^{\"type\":\"generation.started\",\"time\":[0-9]*,\"data\":{\"generation_id\":\"gen-2\",\"initial_input_id\":\"$job1\"" "$TMP/out" ||
    fail "gen-2 started: $(grep started "$TMP/out")"
grep -q "^{\"type\":\"input.delivered\",\"time\":[0-9]*,\"data\":{\"input_id\":\"$job1\",\"delivery\":\"new_turn\",\"source\":\"service:jobs\",\"generation_id\":\"gen-2\"}}$" "$TMP/out" ||
    fail "the job's input was not delivered: $(grep delivered "$TMP/out")"
grep -q "^{\"type\":\"generation.finished\",\"time\":[0-9]*,\"data\":{\"generation_id\":\"gen-2\",\"input_ids\":\[\"$job1\"\],\"accepted_input_ids\":\[\],\"text\":\"The job is done.\",\"active_job_ids\":\[\]" "$TMP/out" ||
    fail "gen-2 finished: $(grep finished "$TMP/out")"
# the job's receipt came before its result (job.queued in gen-1)
sed -n '/"job.queued"/=;/"job.returned"/=' "$TMP/out" | tr '\n' ' ' >"$TMP/order"
[ "$(cut -d' ' -f1 "$TMP/order")" -lt "$(cut -d' ' -f2 "$TMP/order")" ] ||
    fail "job.queued after job.returned"

# 2. cancel a running job
echo '{"op":"send","input_id":"q2","text":"run a long one"}' >&3
wait_for "$TMP/out" '"type":"generation.finished".*"gen-3"' ||
    fail "no gen-3: $(cat "$TMP/out" "$TMP/err")"
job2=$(sed -n 's/^{"type":"job.queued".*"job_id":"\([^"]*\)".*/\1/p' "$TMP/out" | sed -n 2p)
[ -n "$job2" ] || fail "no second job.queued: $(cat "$TMP/out")"
echo "{\"op\":\"cancel_job\",\"job_id\":\"$job2\"}" >&3
wait_for "$TMP/out" '"type":"job.cancelled"' || fail "no job.cancelled: $(cat "$TMP/out")"
grep -q "^{\"type\":\"job.cancelled\",\"time\":[0-9]*,\"data\":{\"job_id\":\"$job2\",\"call_id\":\"c2\",\"tool\":\"t_sleep_ms\",\"outcome\":\"cancelled\",\"effects\":\"not_rolled_back\",\"cause\":\"user\"}}$" "$TMP/out" ||
    fail "job.cancelled: $(grep 'job\.cancelled' "$TMP/out")"
wait_for "$TMP/out" '"type":"generation.finished".*"gen-4"' ||
    fail "the cancel was not delivered: $(cat "$TMP/out" "$TMP/err")"
grep -q "^{\"type\":\"generation.finished\",\"time\":[0-9]*,\"data\":{\"generation_id\":\"gen-4\",\"input_ids\":\[\"$job2\"\],\"accepted_input_ids\":\[\],\"text\":\"Cancelled, then.\"" "$TMP/out" ||
    fail "gen-4: $(grep finished "$TMP/out")"

# 3. nothing to cancel
echo "{\"op\":\"cancel_job\",\"job_id\":\"$job2\"}" >&3
echo '{"op":"cancel_job","job_id":"job-nope"}' >&3
echo '{"op":"cancel_job"}' >&3
echo '{"op":"shutdown"}' >&3
exec 3>&-
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -q "^{\"type\":\"error\",\"time\":[0-9]*,\"line\":4,\"message\":\"cancel_job: no queued or running job '$job2'\"}$" "$TMP/out" ||
    fail "line 4: $(grep '"line":4' "$TMP/out")"
grep -q "^{\"type\":\"error\",\"time\":[0-9]*,\"line\":5,\"message\":\"cancel_job: no queued or running job 'job-nope'\"}$" "$TMP/out" ||
    fail "line 5: $(grep '"line":5' "$TMP/out")"
grep -q '^{"type":"error","time":[0-9]*,"line":6,"message":"cancel_job: job_id: expected a string of 1 to 128 characters"}$' "$TMP/out" ||
    fail "line 6: $(grep '"line":6' "$TMP/out")"
[ "$(grep -c '"type":"job.returned"' "$TMP/out")" -eq 1 ] || fail "a cancelled job returned"
grep -q "\"type\":\"job.returned\".*\"$job2\"" "$TMP/out" && fail "job.returned for the cancelled job"
[ "$(grep -c '"type":"generation.started"' "$TMP/out")" -eq 4 ] || fail "four generations"
grep -qv '^{.*}$' "$TMP/out" && fail "a stdout line is not a JSON object"
tail -n 1 "$TMP/out" | grep -q '^{"type":"session.closed","time":[0-9]*,"status":"completed"}$' ||
    fail "last line: $(tail -n 1 "$TMP/out")"
"$WEIR" log --check "$TMP/sessions/jobs.jsonl" >"$TMP/check" 2>&1 || fail "weir log --check: $(cat "$TMP/check")"


# 4. a crash while a job runs
cat >"$TMP/crash.json" <<CONF
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "always"},
 "plugins": [
  {"id": "scripted", "plugin": "provider-scripted",
   "config": {"replies": [
     {"text": "Starting the job.", "tool_calls": [{"id": "c1", "name": "t_sleep_ms",
                                                  "arguments": {"ms": 20000}}]},
     {"text": "It runs in the background."},
     {"text": "Lost it.", "expect": {"message_contains": "interrupted by a crash"}}]}},
  {"id": "ffi", "plugin": "tools-ffi",
   "config": {"tools": [{"library": "$LIB", "symbol": "t_sleep_ms",
                         "prototype": "int t_sleep_ms(int ms)",
                         "description": "sleep ms milliseconds", "background": true}]}}]}
CONF
rm -f "$TMP/in"
mkfifo "$TMP/in" || exit 1
# serve itself (not timeout) is the process the crash kills: the shell
# writes its pid, then becomes it
timeout 60 sh -c 'echo $$ >"$1"; exec "$2" serve --stdio -c "$3" -s crash' sh "$TMP/crash.pid" \
    "$WEIR" "$TMP/crash.json" <"$TMP/in" >"$TMP/out1" 2>"$TMP/err1" &
pid=$!
exec 3>"$TMP/in"
echo '{"op":"send","input_id":"c1","text":"run the job"}' >&3
wait_for "$TMP/out1" '"type":"generation.finished".*"gen-1"' ||
    fail "crash: no gen-1: $(cat "$TMP/out1" "$TMP/err1")"
kill -KILL "$(cat "$TMP/crash.pid")" 2>/dev/null
wait $pid 2>/dev/null
exec 3>&-
cjob=$(sed -n 's/^{"type":"job.queued".*"job_id":"\([^"]*\)".*/\1/p' "$TMP/out1" | head -n 1)
[ -n "$cjob" ] || fail "crash: no job.queued: $(cat "$TMP/out1")"
# the replies go on from the third: the reopened serve is another process
sed 's/"replies": \[/"replies": [{"text": "Lost it.", "expect": {"message_contains": "interrupted by a crash"}}, /' \
    "$TMP/crash.json" >"$TMP/crash2.json"
rm -f "$TMP/in"
mkfifo "$TMP/in" || exit 1
timeout 60 "$WEIR" serve --stdio -c "$TMP/crash2.json" -s crash <"$TMP/in" >"$TMP/out2" 2>"$TMP/err2" &
pid=$!
exec 3>"$TMP/in"
wait_for "$TMP/out2" '"type":"generation.finished"' ||
    fail "crash: no generation after the reopen: $(cat "$TMP/out2" "$TMP/err2")"
echo '{"op":"shutdown"}' >&3
exec 3>&-
wait $pid || fail "crash: the reopened serve failed: $(cat "$TMP/err2")"
grep -q "^{\"type\":\"job.failed\",\"time\":[0-9]*,\"data\":{\"job_id\":\"$cjob\",\"call_id\":\"c1\",\"tool\":\"t_sleep_ms\",\"outcome\":\"failed\",\"effects\":\"not_rolled_back\",\"error_type\":\"INTERRUPTED\",\"error_message\":\"interrupted by a crash: the background job may or may not have run; do not assume either\"}}$" "$TMP/out2" ||
    fail "crash: job.failed: $(grep 'job\.' "$TMP/out2")"
grep -q "^{\"type\":\"generation.finished\",\"time\":[0-9]*,\"data\":{\"generation_id\":\"gen-[0-9]*\",\"input_ids\":\[\"$cjob\"\],\"accepted_input_ids\":\[\],\"text\":\"Lost it.\"" "$TMP/out2" ||
    fail "crash: the model was not told: $(cat "$TMP/out2" "$TMP/err2")"
"$WEIR" log --check "$TMP/sessions/crash.jsonl" >"$TMP/check" 2>&1 || fail "crash: weir log --check: $(cat "$TMP/check")"

[ $FAILURES -eq 0 ] && echo "serve_jobs: ok"
exit $FAILURES
