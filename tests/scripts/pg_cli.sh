#!/bin/sh
# pg_cli.sh WEIR CONNINFO_FILE - the CLI against the PostgreSQL store (a real
# server: the pg_server fixture): a turn, a second process continuing it; a
# second writer refused while the first is live; log, sessions and compact
# on the store; hostile rows refused; a writer frozen (SIGSTOP)
# past its lease, a takeover, then SIGCONT: the frozen writer stops within
# 2 s (exit 4), its appends are refused and the log holds the new owner's
# answer only.
WEIR=${1:?usage: $0 path/to/weir CONNINFO_FILE}
CI_FILE=${2:?usage: $0 path/to/weir CONNINFO_FILE}
[ -s "$CI_FILE" ] || { echo "FAIL: no PostgreSQL server ($CI_FILE)" >&2; exit 1; }
command -v psql >/dev/null 2>&1 || { echo "FAIL: psql is missing (postgresql-client)" >&2; exit 1; }
CONNINFO=$(cat "$CI_FILE")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-pg-cli.XXXXXX") || exit 1
trap '[ -n "$slow" ] && kill -9 $slow 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
slow=
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
sql() { psql "$CONNINFO" -Atc "$1"; }
# wait_sql QUERY: until QUERY prints t (10 s at most)
wait_sql() {
    i=0
    until [ "$(sql "$1")" = t ]; do
        i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.1
    done
}
store() { # store FILE LEASE_MS [PROVIDER_JSON]
    cat >"$1" <<JSON
{"session": {"store": "pg"},
 "plugins": [{"id": "pg", "plugin": "store-postgres",
              "config": {"conninfo": "$CONNINFO", "lease_ms": $2}}]}
JSON
}
store "$TMP/pg.json" 3000
cat >"$TMP/slow.json" <<'JSON'
{"agent": {"provider": "slow", "model": "demo"},
 "plugins": [{"id": "slow", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "a slow answer", "chunks": 2, "chunk_delay_ms": 2500}]}}]}
JSON

# a server used before (by hand): start from no such sessions
sql "DELETE FROM weir_sessions WHERE session_id IN ('c1', 'c2', 'c3', 'bad')" >/dev/null 2>&1

# --- a turn, then a second process continues it -------------------------------
"$WEIR" run -c default -c "$TMP/pg.json" -s c1 "what is 2 to the 10th?" >"$TMP/out" 2>"$TMP/err" ||
    fail "run: $(cat "$TMP/err")"
grep -q '1024' "$TMP/out" || fail "run answer: $(cat "$TMP/out")"
grep -q 'session c1 (pg:c1)' "$TMP/err" || fail "session line: $(cat "$TMP/err")"
[ -e "$WEIR_SESSION_DIR/c1.jsonl" ] && fail "the pg store wrote a log file"
"$WEIR" resume -c default -c "$TMP/pg.json" c1 "and 2 to the power 3?" >"$TMP/out" 2>"$TMP/err" ||
    fail "resume: $(cat "$TMP/err")"
[ "$(sql "SELECT count(*) FROM weir_events WHERE session_id = 'c1' AND event->>'type' = 'turn/end'")" = 2 ] ||
    fail "two turns: $(sql "SELECT seq, event->>'type' FROM weir_events WHERE session_id = 'c1'")"
[ "$(sql "SELECT max(seq) + 1 = count(*) FROM weir_events WHERE session_id = 'c1'")" = t ] ||
    fail "seqs are not contiguous"
[ "$(sql "SELECT owner IS NULL FROM weir_sessions WHERE session_id = 'c1'")" = t ] ||
    fail "the lease was not released"

# weir log reads the session from the store, with the one reader
"$WEIR" log -c default -c "$TMP/pg.json" c1 --check >"$TMP/out" 2>&1 || fail "log --check: $(cat "$TMP/out")"
grep -q '^pg:c1: ok' "$TMP/out" || fail "log --check: $(cat "$TMP/out")"
"$WEIR" log -c default -c "$TMP/pg.json" c1 --derive >"$TMP/out" 2>&1 || fail "log --derive"
grep -q '2 to the power 3' "$TMP/out" || fail "log --derive: $(cat "$TMP/out")"
[ "$("$WEIR" log -c default -c "$TMP/pg.json" c1 --json | wc -l)" = "$(sql "SELECT count(*) FROM weir_events WHERE session_id = 'c1'")" ] ||
    fail "log --json: not every event"
"$WEIR" log -c default -c "$TMP/pg.json" c1 >"$TMP/out" 2>&1 || fail "log: $(cat "$TMP/out")"
grep -q '^user: what is 2 to the 10th?' "$TMP/out" || fail "transcript: $(cat "$TMP/out")"
# hostile rows: a gap in the seqs is refused by the reader, as in a file
sql "INSERT INTO weir_sessions (session_id, next_seq) VALUES ('bad', 3)" >/dev/null
sql "INSERT INTO weir_events VALUES ('bad', 0, '{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}'),
     ('bad', 2, '{\"seq\":2,\"time\":1,\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"stop\"}}}')" >/dev/null
"$WEIR" log -c default -c "$TMP/pg.json" bad --check >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "hostile rows: log --check exit $rc: $(cat "$TMP/out")"
grep -q 'seq 2 breaks contiguity\|contiguity' "$TMP/out" || fail "hostile rows: $(cat "$TMP/out")"
"$WEIR" resume -c default -c "$TMP/pg.json" bad "hello" >/dev/null 2>"$TMP/err" && fail "resumed a corrupt session"
# weir sessions lists the store's sessions; weir compact works on them
"$WEIR" sessions -c default -c "$TMP/pg.json" --json >"$TMP/out" 2>&1 || fail "sessions: $(cat "$TMP/out")"
grep -q '"id":"c1","path":"pg:c1",.*"turns":2,.*"state":"idle"' "$TMP/out" || fail "sessions c1: $(cat "$TMP/out")"
grep -q '"id":"bad",.*"state":"invalid"' "$TMP/out" || fail "sessions bad: $(cat "$TMP/out")"
"$WEIR" compact -c default -c "$TMP/pg.json" c1 >"$TMP/out" 2>&1 || fail "compact: $(cat "$TMP/out")"
"$WEIR" log -c default -c "$TMP/pg.json" c1 --check >/dev/null 2>&1 || fail "log --check after compact"

# --- a second writer is refused while the first is live --------------------------
"$WEIR" run -c "$TMP/slow.json" -c "$TMP/pg.json" -s c2 "take your time" >/dev/null 2>"$TMP/slow.err" &
slow=$!
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 'c2' AND event->>'type' = 'request/context')" ||
    fail "the slow run never sent its request"
"$WEIR" run -c default -c "$TMP/pg.json" -s c2 "me too" >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 4 ] || fail "second writer: exit $rc, want 4 ($(cat "$TMP/err"))"
grep -q 'open for writing' "$TMP/err" || fail "second writer message: $(cat "$TMP/err")"
wait $slow || fail "the slow run: $(cat "$TMP/slow.err")"
slow=

# --- a frozen writer past its lease is fenced after a takeover ------------------
store "$TMP/short.json" 600
# a 15 s stream: without the lease check the frozen run would stream on for
# seconds after SIGCONT before an append found the lease lost
cat >"$TMP/frozen.json" <<'JSON'
{"agent": {"provider": "slow", "model": "demo"},
 "plugins": [{"id": "slow", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "a slow answer", "chunks": 3, "chunk_delay_ms": 5000}]}}]}
JSON
"$WEIR" run -c "$TMP/frozen.json" -c "$TMP/short.json" -s c3 "take your time" >"$TMP/frozen.out" 2>"$TMP/frozen.err" &
slow=$!
wait_sql "SELECT EXISTS (SELECT 1 FROM weir_events WHERE session_id = 'c3' AND event->>'type' = 'request/context')" ||
    fail "the frozen run never sent its request"
kill -STOP $slow
sleep 1.5 # past its 600 ms lease
"$WEIR" resume -c default -c "$TMP/short.json" c3 "2 to the power 5?" >"$TMP/out" 2>"$TMP/err" ||
    fail "takeover: $(cat "$TMP/err")"
grep -q '32' "$TMP/out" || fail "takeover answer: $(cat "$TMP/out")"
before=$(sql "SELECT count(*) FROM weir_events WHERE session_id = 'c3'")
kill -CONT $slow
# it stops within 2 s of SIGCONT (its heartbeat finds the lease lost, the
# run cancels the turn), not at the end of its stream
i=0
while kill -0 $slow 2>/dev/null; do
    i=$((i + 1))
    if [ $i -gt 20 ]; then
        fail "the fenced writer still ran 2 s after SIGCONT: $(cat "$TMP/frozen.err")"
        kill -9 $slow
        break
    fi
    sleep 0.1
done
wait $slow
rc=$?
slow=
[ $rc -eq 4 ] || fail "the fenced writer exited $rc, want 4 (the session was taken over)"
grep -q 'run: session c3: the lease was taken over by another writer' "$TMP/frozen.err" ||
    fail "the fenced writer did not say why, naming the session: $(cat "$TMP/frozen.err")"
after=$(sql "SELECT count(*) FROM weir_events WHERE session_id = 'c3'")
[ "$before" = "$after" ] || fail "the fenced writer appended: $before -> $after events"
sql "SELECT event::text FROM weir_events WHERE session_id = 'c3'" | grep -q 'a slow answer' &&
    fail "the frozen writer's answer is in the log"

[ $FAILURES -eq 0 ] && echo "pg_cli: ok"
exit $FAILURES
