#!/bin/sh
# pg_worker.sh WEIR CONNINFO_FILE SERVER_DIR - weir worker and weir send
# against a real PostgreSQL server (the pg_server fixture; SERVER_DIR is
# the fixture's tests/pg/server.sh folder, restarted by one case), in a
# database of its own (weir_worker):
#   - weir send to a session no one runs (a worker, or weir run -s, takes
#     it), and to one a worker runs;
#   - weir send --mode steer while a worker runs the turn: spliced into that
#     turn before its next step, once; a followup sent mid-turn is the next
#     turn of the same claim;
#   - a session whose log the reader refuses, queued beside a healthy one:
#     the healthy one finishes, the bad one is held back (backoff: at most
#     3 failures in 4 s) and the worker goes on claiming;
#   - kill -9 of a worker mid-stream: another worker takes the session over,
#     repairs it and finishes the request, the user's message logged once;
#   - a SIGSTOPped worker past its lease, a takeover, SIGCONT: the frozen
#     worker's appends are refused, it stops the session, exits 0 on
#     SIGTERM, and the log holds one answer;
#   - two workers with --concurrency 4 and 100 queued sessions: each run
#     exactly once, none ever leased twice (the store's epochs);
#   - SIGTERM: a running turn finishes within the grace, or is cancelled
#     after it; the lease is released;
#   - the server restarted mid-turn: the worker fails the turn cleanly,
#     reconnects, takes the session over and finishes it; weir log --check
#     passes (nothing half-written).
# Every wait is bounded.
WEIR=${1:?usage: $0 path/to/weir CONNINFO_FILE SERVER_DIR}
CI_FILE=${2:?usage: $0 path/to/weir CONNINFO_FILE SERVER_DIR}
SERVER_DIR=${3:?usage: $0 path/to/weir CONNINFO_FILE SERVER_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
[ -s "$CI_FILE" ] || { echo "FAIL: no PostgreSQL server ($CI_FILE)" >&2; exit 1; }
command -v psql >/dev/null 2>&1 || { echo "FAIL: psql is missing (postgresql-client)" >&2; exit 1; }
ADMIN=$(cat "$CI_FILE")
CONNINFO=$(echo "$ADMIN" | sed 's/dbname=[^ ]*/dbname=weir_worker/')
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-pg-worker.XXXXXX") || exit 1
PIDS=
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
sql() { psql "$CONNINFO" -Atc "$1"; }
psql "$ADMIN" -qAtc "DROP DATABASE IF EXISTS weir_worker" >/dev/null 2>&1
psql "$ADMIN" -qAtc "CREATE DATABASE weir_worker" >/dev/null || { echo "FAIL: createdb" >&2; exit 1; }

# wait_sql QUERY [TENTHS]: until QUERY prints t (TENTHS/10 s, default 20 s)
wait_sql() {
    i=0
    until [ "$(sql "$1" 2>/dev/null)" = t ]; do
        i=$((i + 1)); [ $i -gt "${2:-200}" ] && return 1; sleep 0.1
    done
}
# wait_line FILE PATTERN [TENTHS]: until FILE has a line matching PATTERN
wait_line() {
    i=0
    until grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt "${3:-200}" ] && return 1; sleep 0.1
    done
}
# stop_worker PID ERRFILE WHAT: SIGTERM, exit 0 within 20 s
stop_worker() {
    kill -TERM "$1" 2>/dev/null
    i=0
    while kill -0 "$1" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 200 ]; then
            fail "$3: the worker did not exit 20 s after SIGTERM: $(cat "$2")"
            kill -9 "$1"
            break
        fi
        sleep 0.1
    done
    wait "$1"
    rc=$?
    [ $rc -eq 0 ] || fail "$3: the worker exited $rc after SIGTERM: $(cat "$2")"
}
# events SESSION TYPE: how many events of TYPE the session has
events() { sql "SELECT count(*) FROM weir_events WHERE session_id = '$1' AND event->>'type' = '$2'"; }
# user_msgs SESSION TEXT: user/message events carrying TEXT
user_msgs() {
    sql "SELECT count(*) FROM weir_events WHERE session_id = '$1' AND event->>'type' = 'user/message'
         AND event->'data'->'message'->'content'->0->>'text' = '$2'"
}
last_end() {
    sql "SELECT event->'data'->'reason'->>'kind' FROM weir_events WHERE session_id = '$1'
         AND event->>'type' = 'turn/end' ORDER BY seq DESC LIMIT 1"
}
check_log() { # check_log SESSION WHAT
    "$WEIR" log -c default -c "$TMP/pg.json" "$1" --check >"$TMP/check" 2>&1 ||
        fail "$2: weir log --check $1: $(cat "$TMP/check")"
}
store() { # store FILE LEASE_MS
    cat >"$1" <<JSON
{"session": {"store": "pg"},
 "plugins": [{"id": "pg", "plugin": "store-postgres",
              "config": {"conninfo": "$CONNINFO", "lease_ms": $2}}]}
JSON
}
provider() { # provider FILE REPLIES_JSON
    cat >"$1" <<JSON
{"agent": {"provider": "p", "model": "demo"},
 "plugins": [{"id": "p", "plugin": "provider-scripted", "config": {"replies": $2, "loop": true}}]}
JSON
}
store "$TMP/pg.json" 3000
store "$TMP/short.json" 600
provider "$TMP/slow.json" '[{"text": "a slow answer", "chunks": 3, "chunk_delay_ms": 1500}]'
provider "$TMP/fast.json" '[{"text": "the finished answer"}]'
provider "$TMP/slowfast.json" '[{"text": "a slow answer", "chunks": 3, "chunk_delay_ms": 1500}, {"text": "the recovered answer"}]'
# exec: a background W is the weir process itself (kill and wait reach it)
W() { exec "$WEIR" worker --poll-ms 200 "$@"; }

# --- usage -----------------------------------------------------------------------
"$WEIR" worker --help | grep -q 'usage: weir worker \[-c FILE\]... \[--concurrency N\]' || fail "worker --help"
"$WEIR" worker --help | grep -q -- '--grace-ms MS' || fail "worker --help: --grace-ms"
"$WEIR" worker --concurrency 0 >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] || fail "--concurrency 0: exit $rc"
grep -q 'concurrency: expected 1-64' "$TMP/err" || fail "--concurrency 0: $(cat "$TMP/err")"
"$WEIR" worker -c default extra >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "an extra argument: exit $rc"
timeout 20 "$WEIR" worker -c default >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 3 ] || fail "worker on the file store: exit $rc, want 3"
grep -q "store 'file' cannot claim sessions" "$TMP/err" || fail "worker on the file store: $(cat "$TMP/err")"

# --- weir send to a session no worker runs, then a worker runs it -------------
"$WEIR" send -c default -c "$TMP/pg.json" -s e1 "what is 2 to the 10th?" >"$TMP/out" 2>"$TMP/err" ||
    fail "send (no worker): $(cat "$TMP/err")"
grep -q 'queued for e1' "$TMP/out" || fail "send output: $(cat "$TMP/out")"
[ "$(sql "SELECT count(*) FROM weir_inbox WHERE session_id = 'e1'")" = 1 ] || fail "send: no inbox row"
[ "$(events e1 turn/start)" = 0 ] || fail "send ran the session"
# the same input id again is acknowledged once; another text under it is refused
"$WEIR" send -c default -c "$TMP/pg.json" -s e1 --input-id same "hello" >/dev/null 2>&1 || fail "send --input-id"
"$WEIR" send -c default -c "$TMP/pg.json" -s e1 --input-id same "hello" >"$TMP/out" 2>&1 || fail "resend"
grep -q 'already queued' "$TMP/out" || fail "resend not acknowledged: $(cat "$TMP/out")"
"$WEIR" send -c default -c "$TMP/pg.json" -s e1 --input-id same "not hello" >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "same id, other text: exit $rc: $(cat "$TMP/out")"
timeout 60 "$WEIR" worker -c default -c "$TMP/pg.json" --exit-when-idle 2>"$TMP/w.err" ||
    fail "worker --exit-when-idle: $(cat "$TMP/w.err")"
grep -q 'weir worker: claimed e1 (epoch [0-9]*)' "$TMP/w.err" || fail "claim line: $(cat "$TMP/w.err")"
grep -q 'weir worker: finished e1 (2 turns)' "$TMP/w.err" || fail "finish line: $(cat "$TMP/w.err")"
[ "$(user_msgs e1 'what is 2 to the 10th?')" = 1 ] || fail "e1: the first input is not logged once"
[ "$(user_msgs e1 hello)" = 1 ] || fail "e1: the second input is not logged once"
sql "SELECT event::text FROM weir_events WHERE session_id = 'e1' AND event->>'type' = 'assistant/message'" |
    grep -q 1024 || fail "e1: no answer"
[ "$(sql "SELECT count(*) FROM weir_inbox WHERE session_id = 'e1'")" = 0 ] || fail "e1: the inbox was not emptied"
[ "$(sql "SELECT owner IS NULL FROM weir_sessions WHERE session_id = 'e1'")" = t ] || fail "e1: lease not released"
check_log e1 "send"

# weir run -s of a session with queued input takes it before its prompt
"$WEIR" send -c default -c "$TMP/pg.json" -s e3 "what is 2 to the 10th?" >/dev/null 2>"$TMP/err" || fail "send e3: $(cat "$TMP/err")"
"$WEIR" run -c default -c "$TMP/pg.json" -s e3 "and hello" >"$TMP/out" 2>"$TMP/err" || fail "run e3: $(cat "$TMP/err")"
grep -q 1024 "$TMP/out" || fail "run e3 did not answer the queued input: $(cat "$TMP/out")"
[ "$(user_msgs e3 'what is 2 to the 10th?')" = 1 ] || fail "e3: the queued input is not logged once"
[ "$(sql "SELECT count(*) FROM weir_inbox WHERE session_id = 'e3'")" = 0 ] || fail "e3: the inbox was not emptied"

# --- weir send while a worker runs the session --------------------------------
W -c "$TMP/slowfast.json" -c "$TMP/pg.json" 2>"$TMP/w.err" &
w1=$!
PIDS="$w1"
"$WEIR" send -c default -c "$TMP/pg.json" -s e2 "first question" >/dev/null 2>"$TMP/err" || fail "send e2: $(cat "$TMP/err")"
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 'e2' AND event->>'type' = 'request/context')" ||
    fail "e2: the worker never sent its request"
[ "$(sql "SELECT owner IS NOT NULL AND lease_expires > now() FROM weir_sessions WHERE session_id = 'e2'")" = t ] ||
    fail "e2: no live lease while the worker runs it"
"$WEIR" send -c default -c "$TMP/pg.json" -s e2 "second question" >"$TMP/out" 2>"$TMP/err" ||
    fail "send while a worker runs the session: $(cat "$TMP/err")"
wait_line "$TMP/w.err" 'finished e2' 300 || fail "e2 never finished: $(cat "$TMP/w.err")"
grep -q 'finished e2 (2 turns)' "$TMP/w.err" || fail "e2: both inputs in this run: $(cat "$TMP/w.err")"
[ "$(user_msgs e2 'first question')" = 1 ] || fail "e2: first input not logged once"
[ "$(user_msgs e2 'second question')" = 1 ] || fail "e2: second input not logged once"
check_log e2 "send while running"

# --- SIGTERM: the running turn finishes within the grace ----------------------
"$WEIR" send -c default -c "$TMP/pg.json" -s g1 "finish me" >/dev/null 2>"$TMP/err" || fail "send g1: $(cat "$TMP/err")"
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 'g1' AND event->>'type' = 'request/context')" ||
    fail "g1: the worker never sent its request"
stop_worker $w1 "$TMP/w.err" "grace"
PIDS=
grep -q 'finished g1 (1 turns)' "$TMP/w.err" || fail "g1 did not finish in the grace: $(cat "$TMP/w.err")"
[ "$(last_end g1)" = completed ] || fail "g1: last turn $(last_end g1)"
[ "$(sql "SELECT owner IS NULL FROM weir_sessions WHERE session_id = 'g1'")" = t ] || fail "g1: lease not released"
# ... or is cancelled when the grace is over
W -c "$TMP/slow.json" -c "$TMP/pg.json" --grace-ms 300 2>"$TMP/w.err" &
w1=$!
PIDS="$w1"
"$WEIR" send -c default -c "$TMP/pg.json" -s g2 "too slow" >/dev/null 2>"$TMP/err" || fail "send g2: $(cat "$TMP/err")"
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 'g2' AND event->>'type' = 'request/context')" ||
    fail "g2: the worker never sent its request"
stop_worker $w1 "$TMP/w.err" "grace over"
PIDS=
grep -q 'cancelling 1 running session' "$TMP/w.err" || fail "g2 not cancelled: $(cat "$TMP/w.err")"
[ "$(last_end g2)" = aborted ] || fail "g2: last turn $(last_end g2), want aborted"
[ "$(sql "SELECT owner IS NULL FROM weir_sessions WHERE session_id = 'g2'")" = t ] || fail "g2: lease not released"
check_log g2 "cancelled"

# --- steering while a worker runs the turn -------------------------------------
# a steer sent mid-turn reaches the running turn at its next step (the
# model's second request carries it: `expect`), a followup sent mid-turn
# is the next turn, both in the same claim, each logged once
provider "$TMP/steer.json" '[{"text": "a slow answer", "chunks": 3, "chunk_delay_ms": 1500},
  {"text": "the steered answer", "expect": {"message_contains": "mention the steer"}},
  {"text": "the followup answer", "expect": {"message_contains": "then a followup"}}]'
W -c "$TMP/steer.json" -c "$TMP/pg.json" 2>"$TMP/w.err" &
w1=$!
PIDS="$w1"
"$WEIR" send -c default -c "$TMP/pg.json" -s s1 "start slowly" >/dev/null 2>"$TMP/err" || fail "send s1: $(cat "$TMP/err")"
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 's1' AND event->>'type' = 'request/context')" ||
    fail "s1: the worker never sent its request"
"$WEIR" send -c default -c "$TMP/pg.json" -s s1 --mode steer --input-id st1 "also mention the steer" \
    >/dev/null 2>"$TMP/err" || fail "send --mode steer mid-turn: $(cat "$TMP/err")"
"$WEIR" send -c default -c "$TMP/pg.json" -s s1 --input-id fu1 "then a followup" \
    >/dev/null 2>"$TMP/err" || fail "send a followup mid-turn: $(cat "$TMP/err")"
# taken while the first step still streams (the helper polls every 250 ms)
wait_sql "SELECT NOT EXISTS (SELECT 1 FROM weir_inbox WHERE session_id = 's1')" 30 ||
    fail "s1: the input sent mid-turn was not taken within 3 s"
[ "$(events s1 assistant/message)" = 0 ] || fail "s1: the first step ended before the input was taken"
wait_line "$TMP/w.err" 'finished s1' 300 || fail "s1 never finished: $(cat "$TMP/w.err")"
stop_worker $w1 "$TMP/w.err" "steering"
PIDS=
[ "$(grep -c 'claimed s1 ' "$TMP/w.err")" = 1 ] || fail "s1: not one claim: $(cat "$TMP/w.err")"
grep -q 'finished s1 (2 turns)' "$TMP/w.err" || fail "s1: not two turns in the claim: $(cat "$TMP/w.err")"
"$WEIR" log -c default -c "$TMP/pg.json" s1 --json >"$TMP/s1.jsonl" 2>"$TMP/err" || fail "log s1 --json: $(cat "$TMP/err")"
# seq of the first event matching a jq filter ("" when none)
seq_of() { jq -r "select($1) | .seq" "$TMP/s1.jsonl" | head -n 1; }
n_of() { jq -c "select($1)" "$TMP/s1.jsonl" | wc -l | tr -d ' '; }
steer_msg='.type == "user/message" and .data.message.id == "st1"'
[ "$(n_of "$steer_msg")" = 1 ] || fail "s1: the steer is not logged once ($(n_of "$steer_msg"))"
[ "$(jq -r "select($steer_msg) | .data.turn" "$TMP/s1.jsonl")" = 1 ] || fail "s1: the steer is not in turn 1"
spliced=$(seq_of '.type == "agent/inbox/spliced" and .data.target == "next-step" and any(.data.inserted[]; .id == "st1")')
first_answer=$(seq_of '.type == "assistant/message"')
steer=$(seq_of "$steer_msg")
step2=$(seq_of '.type == "step/start" and .data.turn == 1 and .data.step == 2')
end1=$(seq_of '.type == "turn/end" and .data.turn == 1')
[ -n "$spliced" ] && [ -n "$first_answer" ] && [ "$spliced" -lt "$first_answer" ] ||
    fail "s1: the steer was not queued while step 1 ran (spliced at '$spliced', step 1 answered at '$first_answer')"
[ -n "$step2" ] && [ -n "$end1" ] && [ "$steer" -lt "$end1" ] && [ "$step2" -lt "$end1" ] ||
    fail "s1: the steer did not start a next step of turn 1 (message $steer, step 2 '$step2', turn/end '$end1')"
[ "$(n_of '.type == "user/message" and .data.message.id == "fu1"')" = 1 ] || fail "s1: the followup is not logged once"
[ "$(jq -r 'select(.type == "user/message" and .data.message.id == "fu1") | .data.turn' "$TMP/s1.jsonl")" = 2 ] ||
    fail "s1: the followup is not turn 2"
[ "$(n_of '.type == "turn/end" and .data.reason.kind == "completed"')" = 2 ] ||
    fail "s1: not two completed turns: $(jq -c 'select(.type == "turn/end") | .data.reason' "$TMP/s1.jsonl")"
grep -q 'the steered answer' "$TMP/s1.jsonl" || fail "s1: no answer to the steer"
grep -q 'the followup answer' "$TMP/s1.jsonl" || fail "s1: no answer to the followup"
check_log s1 "steering"

# --- backoff: a session that fails at once does not hold the others up -----------
# h1's log is hostile (a seq gap: the reader refuses it at every open) and
# it has input queued; h2 is healthy.  h2 finishes, h1 fails at most 3
# times in 4 s (held back 1 s, then 2 s, then 4 s), the worker runs on and
# still claims h3, sent while h1 is held back; h1's input stays queued
"$WEIR" send -c default -c "$TMP/pg.json" -s h1 "never answered" >/dev/null 2>"$TMP/err" || fail "send h1: $(cat "$TMP/err")"
"$WEIR" send -c default -c "$TMP/pg.json" -s h2 "what is 2 to the 10th?" >/dev/null 2>"$TMP/err" || fail "send h2: $(cat "$TMP/err")"
sql "UPDATE weir_sessions SET next_seq = 3 WHERE session_id = 'h1';
     INSERT INTO weir_events VALUES
       ('h1', 0, '{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}'),
       ('h1', 2, '{\"seq\":2,\"time\":1,\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"stop\"}}}')" >/dev/null ||
    fail "h1: inserting the hostile rows"
W -c default -c "$TMP/pg.json" 2>"$TMP/w.err" &
w1=$!
PIDS="$w1"
wait_line "$TMP/w.err" 'failed h1' 100 || fail "h1 never failed: $(cat "$TMP/w.err")"
sleep 4
n=$(grep -c 'failed h1' "$TMP/w.err")
[ "$n" -ge 2 ] && [ "$n" -le 3 ] || fail "h1: $n failures in 4 s, want 2 or 3 (backoff 1 s, 2 s): $(cat "$TMP/w.err")"
grep -q 'failed h1: cannot open it: .*(not claimed again for 1000 ms)' "$TMP/w.err" ||
    fail "h1: the failure does not say how long it is held back: $(cat "$TMP/w.err")"
grep -q 'failed h1: .*(not claimed again for 2000 ms)' "$TMP/w.err" || fail "h1: the delay did not double: $(cat "$TMP/w.err")"
grep -q 'finished h2 (1 turns)' "$TMP/w.err" || fail "h2 did not finish beside the failing h1: $(cat "$TMP/w.err")"
kill -0 $w1 2>/dev/null || fail "the worker stopped with a failing session"
"$WEIR" send -c default -c "$TMP/pg.json" -s h3 "what is 2 to the 10th?" >/dev/null 2>"$TMP/err" || fail "send h3: $(cat "$TMP/err")"
wait_line "$TMP/w.err" 'finished h3' 100 || fail "h3 not claimed while h1 is held back: $(cat "$TMP/w.err")"
stop_worker $w1 "$TMP/w.err" "backoff"
PIDS=
[ "$(sql "SELECT count(*) FROM weir_inbox WHERE session_id = 'h1'")" = 1 ] || fail "h1: its queued input was dropped"
[ "$(events h1 turn/start)" = 1 ] || fail "h1: a failing open appended to the hostile log"

# the operator's fix: h1 goes (the later workers would hold it back too)
sql "DELETE FROM weir_inbox WHERE session_id = 'h1'; DELETE FROM weir_events WHERE session_id = 'h1';
     DELETE FROM weir_sessions WHERE session_id = 'h1'" >/dev/null || fail "h1: removing it"

# --- kill -9 of a worker mid-stream; another one finishes the request ---------
"$WEIR" send -c default -c "$TMP/short.json" -s k1 "take your time" >/dev/null 2>"$TMP/err" || fail "send k1: $(cat "$TMP/err")"
W -c "$TMP/slow.json" -c "$TMP/short.json" 2>"$TMP/w1.err" &
w1=$!
PIDS="$w1"
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 'k1' AND event->>'type' = 'request/context')" ||
    fail "k1: the worker never sent its request"
kill -9 $w1
wait $w1 2>/dev/null
W -c "$TMP/fast.json" -c "$TMP/short.json" 2>"$TMP/w2.err" &
w2=$!
PIDS="$w2"
wait_line "$TMP/w2.err" 'finished k1' 300 || fail "k1: not finished by the second worker: $(cat "$TMP/w2.err")"
grep -q 'took over k1 from [^ ]* (repaired [1-9][0-9]*)' "$TMP/w2.err" || fail "k1: takeover line: $(cat "$TMP/w2.err")"
stop_worker $w2 "$TMP/w2.err" "kill -9"
PIDS=
[ "$(user_msgs k1 'take your time')" = 1 ] || fail "k1: the user's message is not logged once ($(user_msgs k1 'take your time'))"
[ "$(sql "SELECT count(*) FROM weir_events WHERE session_id = 'k1' AND event->>'type' = 'user/message'
          AND event->'data'->'message'->'source'->>'kind' = 'service'
          AND event->'data'->'message'->'source'->>'name' = 'resume'")" = 1 ] || fail "k1: not one service:resume continuation"
[ "$(events k1 assistant/message)" = 1 ] || fail "k1: $(events k1 assistant/message) answers"
sql "SELECT event::text FROM weir_events WHERE session_id = 'k1' AND event->>'type' = 'assistant/message'" |
    grep -q 'the finished answer' || fail "k1: not the second worker's answer"
[ "$(last_end k1)" = completed ] || fail "k1: last turn $(last_end k1)"
check_log k1 "kill -9"

# --- a frozen worker past its lease is fenced after a takeover ----------------
"$WEIR" send -c default -c "$TMP/short.json" -s f1 "take your time" >/dev/null 2>"$TMP/err" || fail "send f1: $(cat "$TMP/err")"
W -c "$TMP/slow.json" -c "$TMP/short.json" 2>"$TMP/w1.err" &
w1=$!
PIDS="$w1"
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 'f1' AND event->>'type' = 'request/context')" ||
    fail "f1: the worker never sent its request"
kill -STOP $w1
W -c "$TMP/fast.json" -c "$TMP/short.json" 2>"$TMP/w2.err" &
w2=$!
PIDS="$w1 $w2"
wait_line "$TMP/w2.err" 'finished f1' 300 || fail "f1: no takeover: $(cat "$TMP/w2.err")"
grep -q 'took over f1 from' "$TMP/w2.err" || fail "f1: takeover line: $(cat "$TMP/w2.err")"
before=$(sql "SELECT count(*) FROM weir_events WHERE session_id = 'f1'")
kill -CONT $w1
wait_line "$TMP/w1.err" 'lost f1' 300 || fail "f1: the frozen worker did not stop the session: $(cat "$TMP/w1.err")"
after=$(sql "SELECT count(*) FROM weir_events WHERE session_id = 'f1'")
[ "$before" = "$after" ] || fail "f1: the fenced worker appended: $before -> $after events"
stop_worker $w1 "$TMP/w1.err" "fenced worker"
stop_worker $w2 "$TMP/w2.err" "taking worker"
PIDS=
sql "SELECT event::text FROM weir_events WHERE session_id = 'f1'" | grep -q 'a slow answer' &&
    fail "f1: the frozen worker's answer is in the log"
[ "$(events f1 assistant/message)" = 1 ] || fail "f1: $(events f1 assistant/message) answers, want 1"
[ "$(user_msgs f1 'take your time')" = 1 ] || fail "f1: the user's message is not logged once"
check_log f1 "fencing"

# --- two workers, --concurrency 4, 100 queued sessions -------------------------
# queued as weir send queues them (one row each, an input id each)
sql "INSERT INTO weir_sessions (session_id) SELECT 'b' || i FROM generate_series(1, 100) i;
     INSERT INTO weir_inbox (session_id, input_id, mode, message)
       SELECT 'b' || i, 'in-b' || i, 'followup', '{\"role\":\"user\",\"content\":\"what is 2 to the 10th?\"}'
       FROM generate_series(1, 100) i" >/dev/null || fail "queueing 100 sessions"
W -c default -c "$TMP/pg.json" --concurrency 4 --exit-when-idle 2>"$TMP/a.err" &
wa=$!
W -c default -c "$TMP/pg.json" --concurrency 4 --exit-when-idle 2>"$TMP/b.err" &
wb=$!
PIDS="$wa $wb"
i=0
while kill -0 $wa 2>/dev/null || kill -0 $wb 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 1800 ] && { fail "100 sessions: the workers did not finish in 180 s"; break; }
    sleep 0.1
done
wait $wa || fail "worker a: $(tail -5 "$TMP/a.err")"
wait $wb || fail "worker b: $(tail -5 "$TMP/b.err")"
PIDS=
na=$(grep -c 'claimed b[0-9]' "$TMP/a.err")
nb=$(grep -c 'claimed b[0-9]' "$TMP/b.err")
echo "pg_worker: 100 sessions: worker a ran $na, worker b $nb"
[ $((na + nb)) = 100 ] || fail "100 sessions: $na + $nb claims"
dups=$(cat "$TMP/a.err" "$TMP/b.err" | sed -n 's/^weir worker: claimed \(b[0-9]*\) .*/\1/p' | sort | uniq -d)
[ -z "$dups" ] || fail "sessions claimed twice: $dups"
[ "$(cat "$TMP/a.err" "$TMP/b.err" | grep -c 'finished b[0-9]* (1 turns)')" = 100 ] ||
    fail "100 sessions: not each finished with one turn"
grep -q 'lost\|failed' "$TMP/a.err" "$TMP/b.err" && fail "100 sessions: $(grep 'lost\|failed' "$TMP/a.err" "$TMP/b.err")"
# one lease ever per session: the claim and its open are the only epochs
[ "$(sql "SELECT count(*) FROM weir_sessions WHERE session_id LIKE 'b%' AND epoch = 2 AND owner IS NULL")" = 100 ] ||
    fail "100 sessions: leased more than once: $(sql "SELECT session_id, epoch, owner FROM weir_sessions WHERE session_id LIKE 'b%' AND (epoch <> 2 OR owner IS NOT NULL)")"
[ "$(sql "SELECT count(*) FROM (SELECT session_id FROM weir_events WHERE session_id LIKE 'b%'
          AND event->>'type' = 'user/message' GROUP BY session_id HAVING count(*) = 1) x")" = 100 ] ||
    fail "100 sessions: not one user message each"
[ "$(sql "SELECT count(*) FROM (SELECT session_id FROM weir_events WHERE session_id LIKE 'b%'
          AND event->>'type' = 'turn/end' AND event->'data'->'reason'->>'kind' = 'completed'
          GROUP BY session_id HAVING count(*) = 1) x")" = 100 ] || fail "100 sessions: not one completed turn each"
[ "$(sql "SELECT count(*) FROM weir_inbox WHERE session_id LIKE 'b%'")" = 0 ] || fail "100 sessions: input left queued"
check_log b17 "100 sessions"

# --- the server restarted mid-turn ---------------------------------------------
"$WEIR" send -c default -c "$TMP/short.json" -s r1 "survive a restart" >/dev/null 2>"$TMP/err" || fail "send r1: $(cat "$TMP/err")"
W -c "$TMP/slowfast.json" -c "$TMP/short.json" 2>"$TMP/w.err" &
w1=$!
PIDS="$w1"
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 'r1' AND event->>'type' = 'request/context')" ||
    fail "r1: the worker never sent its request"
sh "$HERE/../pg/server.sh" restart "$SERVER_DIR" || fail "restarting the server"
wait_line "$TMP/w.err" 'finished r1' 400 || fail "r1: not finished after the restart: $(cat "$TMP/w.err")"
grep -q 'failed r1' "$TMP/w.err" || fail "r1: the restart did not fail the turn: $(cat "$TMP/w.err")"
grep -q 'took over r1' "$TMP/w.err" || fail "r1: the worker did not take the session back: $(cat "$TMP/w.err")"
stop_worker $w1 "$TMP/w.err" "restart"
PIDS=
check_log r1 "restart"
[ "$(user_msgs r1 'survive a restart')" = 1 ] || fail "r1: the user's message is not logged once"
[ "$(last_end r1)" = completed ] || fail "r1: last turn $(last_end r1)"
sql "SELECT event::text FROM weir_events WHERE session_id = 'r1' AND event->>'type' = 'assistant/message'" |
    grep -q 'the recovered answer' || fail "r1: no answer after the restart"

[ $FAILURES -eq 0 ] && echo "pg_worker: ok"
exit $FAILURES
