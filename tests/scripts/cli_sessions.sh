#!/bin/sh
# tests/scripts/cli_sessions.sh WEIR - which session did I just write
# (issue #14 item 1):
#   - plain `weir run` prints "weir: session ID (LOG)" on stderr, for an
#     argument prompt and a piped one;
#   - `weir run --json` starts with the live event
#     {"type":"session","time":N,"data":{"session_id","log"}};
#   - `weir sessions [--json]` lists them newest first with the id, last
#     activity, turns, size, state (idle, open turn, live, invalid) and the
#     first prompt cut short; a foreign file is listed as invalid.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-sessions.XXXXXX") || exit 1
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# --- the session line --------------------------------------------------------
"$WEIR" run "what is 2 to the power 10?" >"$TMP/out" 2>"$TMP/err" || fail "run: $(cat "$TMP/err")"
line=$(grep '^weir: session ' "$TMP/err")
id=$(printf '%s\n' "$line" | sed -n 's/^weir: session \(s-[0-9a-f]*\) (\(.*\))$/\1/p')
log=$(printf '%s\n' "$line" | sed -n 's/^weir: session \(s-[0-9a-f]*\) (\(.*\))$/\2/p')
[ -n "$id" ] || fail "no session line: $(cat "$TMP/err")"
[ "$log" = "$WEIR_SESSION_DIR/$id.jsonl" ] || fail "the line names $log"
[ -s "$log" ] || fail "no log at $log"
"$WEIR" log "$id" --check >/dev/null 2>&1 || fail "weir log $id --check"
grep -q '^weir: session ' "$TMP/out" && fail "the session line went to stdout"
echo "piped prompt" | "$WEIR" run -s piped >/dev/null 2>"$TMP/err" || fail "piped run"
grep -qx "weir: session piped ($WEIR_SESSION_DIR/piped.jsonl)" "$TMP/err" ||
    fail "piped session line: $(cat "$TMP/err")"

# --- the session event ---------------------------------------------------------
"$WEIR" run --json "hello" >"$TMP/json" 2>"$TMP/err" || fail "run --json: $(cat "$TMP/err")"
first=$(head -n 1 "$TMP/json")
printf '%s\n' "$first" |
    grep -qx '{"type":"session","time":[0-9]*,"data":{"session_id":"s-[0-9a-f]*","log":"[^"]*"}}' ||
    fail "the first --json line is not the session event: $first"
jid=$(printf '%s\n' "$first" | sed 's/.*"session_id":"\([^"]*\)".*/\1/')
jlog=$(printf '%s\n' "$first" | sed 's/.*"log":"\([^"]*\)".*/\1/')
[ "$jlog" = "$WEIR_SESSION_DIR/$jid.jsonl" ] && [ -s "$jlog" ] || fail "session event log: $jlog"
[ "$(grep -c '"type":"session"' "$TMP/json")" -eq 1 ] || fail "more than one session event"
grep -q '^weir: session' "$TMP/err" && fail "--json printed the session line on stderr"
# resuming: the session event still comes first, before what opening logs
head -n 12 "$jlog" >"$WEIR_SESSION_DIR/cut.jsonl"
"$WEIR" run --json -s cut "again" >"$TMP/json" 2>/dev/null
head -n 1 "$TMP/json" | grep -q '^{"type":"session",.*"session_id":"cut"' ||
    fail "resumed --json does not start with the session event: $(head -n 2 "$TMP/json")"

# --- weir sessions ---------------------------------------------------------------
rm -rf "$WEIR_SESSION_DIR"
"$WEIR" sessions >"$TMP/out" 2>"$TMP/err" || fail "sessions without a directory: exit $?"
[ -s "$TMP/out" ] && fail "sessions without a directory printed: $(cat "$TMP/out")"
grep -q 'no sessions' "$TMP/err" || fail "no-sessions note: $(cat "$TMP/err")"
LONG="Please keep in mind all of the following background before you answer this one"
(cd "$TMP" && "$WEIR" run -s older "first of two") >/dev/null 2>&1 || fail "run older"
"$WEIR" run -s older "second of two" >/dev/null 2>&1 || fail "run older again"
sleep 1.1 # last activity is kept in milliseconds; the listing shows minutes
"$WEIR" run -s newer "$LONG" >/dev/null 2>&1 || fail "run newer"
# a crash mid-turn (older's first turn without its end): the open turn shows
head -n 10 "$WEIR_SESSION_DIR/older.jsonl" >"$WEIR_SESSION_DIR/crashed.jsonl"
# files the reader refuses: listed as invalid, by their mtime
printf 'not a weir log\n' >"$WEIR_SESSION_DIR/foreign.jsonl"
sed '3s/.*/{"seq":2,"broken/' "$WEIR_SESSION_DIR/older.jsonl" >"$WEIR_SESSION_DIR/damaged.jsonl"
touch -d '2001-01-01' "$WEIR_SESSION_DIR/foreign.jsonl" "$WEIR_SESSION_DIR/damaged.jsonl"
echo ignored >"$WEIR_SESSION_DIR/notes.txt"
"$WEIR" sessions >"$TMP/out" 2>"$TMP/err" || fail "sessions: exit $? ($(cat "$TMP/err"))"
head -n 1 "$TMP/out" | grep -q '^ID  *LAST ACTIVITY  *TURNS  *SIZE  *STATE  *TOKENS/COST  *DEPLOYMENT  *CWD  *FIRST PROMPT$' ||
    fail "header: $(head -n 1 "$TMP/out")"
ids=$(sed 1d "$TMP/out" | awk '{print $1}' | tr '\n' ' ')
case "$ids" in
"newer older "*) ;;
*) fail "not newest first: $ids" ;;
esac
for s in newer older crashed foreign damaged; do
    grep -q "^$s " "$TMP/out" || fail "$s is not listed: $(cat "$TMP/out")"
done
grep -q '^notes' "$TMP/out" && fail "a file that is not .jsonl is listed"
grep -q '^older  *[0-9-]* [0-9:]*  *2  *[0-9.]*[BK]  *idle  *[0-9][0-9]*  *(built-in)  *[^ ]*  *first of two$' "$TMP/out" ||
    fail "older row: $(grep '^older' "$TMP/out")"
grep -q '^newer .* 1 .* idle  *[0-9][0-9]*  *(built-in)  *[^ ]*  *Please keep in mind all of the following…$' "$TMP/out" ||
    fail "newer row (prompt cut at 40 characters): $(grep '^newer' "$TMP/out")"
grep -q '^crashed .* open turn ' "$TMP/out" || fail "crashed row: $(grep '^crashed' "$TMP/out")"
grep -q '^foreign .* invalid  *-  *-  *-  *.*not a weir session log' "$TMP/out" ||
    fail "foreign row: $(grep '^foreign' "$TMP/out")"
grep -q '^damaged .* invalid ' "$TMP/out" || fail "damaged row: $(grep '^damaged' "$TMP/out")"

# --json: one object per line, the same order
"$WEIR" sessions --json >"$TMP/json" 2>"$TMP/err" || fail "sessions --json: $(cat "$TMP/err")"
grep -qv '^{.*}$' "$TMP/json" && fail "--json line that is not an object: $(grep -v '^{' "$TMP/json")"
[ "$(head -n 1 "$TMP/json" | sed 's/^{"id":"\([^"]*\)".*/\1/')" = newer ] ||
    fail "--json order: $(head -n 1 "$TMP/json")"
grep -q '^{"id":"older","path":"'"$WEIR_SESSION_DIR"'/older.jsonl","last_activity":[0-9]*,"turns":2,"events":[0-9]*,"size":[0-9]*,"state":"idle","first_prompt":"first of two","usage":{"input_tokens":[0-9]*,"cache_read_tokens":0,"cache_write_tokens":0,"output_tokens":[0-9]*},"deployment":{"files":\[\],"config_hash":"fnv1a64:[0-9a-f]*","rows":\["scripted","compaction","retry","prompt","math"\],"provider":"scripted","model":"demo"},"cwd":"'"$TMP"'"}$' \
    "$TMP/json" || fail "older object: $(grep '"older"' "$TMP/json")"
grep -q '"id":"crashed".*"state":"open turn"' "$TMP/json" || fail "crashed object"
grep -q '"id":"foreign".*"state":"invalid".*"error":"' "$TMP/json" || fail "foreign object"

# live: a writer holds the session
cat >"$TMP/slow.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
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
"$WEIR" sessions >"$TMP/out" 2>&1 || fail "sessions while live"
grep -q '^busy .* live ' "$TMP/out" || fail "busy row: $(grep '^busy' "$TMP/out")"
"$WEIR" sessions --json | grep -q '"id":"busy".*"state":"live","pid":'"$PID" ||
    fail "busy object: $("$WEIR" sessions --json | grep busy)"
kill -TERM "$PID"
wait "$PID"
PID=
"$WEIR" sessions | grep -q '^busy .* idle ' || fail "busy is not idle after the writer left"

# --- checkpoints (issue #34): a log read from its head and last checkpoint --------
printf '{"session":{"checkpoint_bytes":1}}\n' >"$TMP/ckpt.json"
for q in "2 to the 10th" "2 to the 5th" "3 to the 3rd"; do
    "$WEIR" run -c default -c "$TMP/ckpt.json" -s ckpt "$q" >/dev/null 2>&1 || fail "run ckpt: $q"
done
ck="$WEIR_SESSION_DIR/ckpt.jsonl"
[ "$(grep -c '"type":"log/checkpoint"' "$ck")" -eq 3 ] ||
    fail "checkpoints: $(grep -c '"type":"log/checkpoint"' "$ck") of 3"
"$WEIR" log ckpt --check >/dev/null 2>&1 || fail "weir log ckpt --check"
row=$("$WEIR" sessions --json | grep '"id":"ckpt"')
printf '%s\n' "$row" | grep -q '"turns":3,"events":'"$(wc -l <"$ck" | tr -d ' ')"',' ||
    fail "ckpt row: $row"
printf '%s\n' "$row" | grep -q '"state":"idle".*"first_prompt":"2 to the 10th"' ||
    fail "ckpt row state or prompt: $row"
# the same figures as a fold of the whole log: the rows of a copy without its checkpoints
grep -v '"type":"log/checkpoint"' "$ck" | awk '{ sub(/^\{"seq":[0-9]*,/, "{\"seq\":" NR-1 ","); print }' \
    >"$WEIR_SESSION_DIR/plain.jsonl"
prow=$("$WEIR" sessions --json | grep '"id":"plain"')
u1=$(printf '%s\n' "$row" | sed -n 's/.*"usage":\({[^}]*}\).*/\1/p')
u2=$(printf '%s\n' "$prow" | sed -n 's/.*"usage":\({[^}]*}\).*/\1/p')
[ -n "$u1" ] && [ "$u1" = "$u2" ] || fail "usage from the checkpoint ($u1) != from the whole log ($u2)"
# a checkpoint that does not add up is refused by the check
sed '0,/"type":"log\/checkpoint","data":{"events":[0-9]*,"turns":1/s//&1/' "$ck" >"$WEIR_SESSION_DIR/badck.jsonl"
"$WEIR" log "$WEIR_SESSION_DIR/badck.jsonl" --check >"$TMP/out" 2>&1 && fail "a bad checkpoint passes --check"
grep -q 'log/checkpoint does not add up' "$TMP/out" || fail "bad checkpoint: $(head -n 3 "$TMP/out")"

# the deployment and cwd columns: the -c files' base names, the cwd from ~
mkdir -p "$TMP/home/proj"
echo '{"agent": {"max_tokens": 50}}' >"$TMP/home/proj/small.json"
(cd "$TMP/home/proj" && HOME="$TMP/home" "$WEIR" run -c default -c ./small.json -s deployed "2 to the power 2?") \
    >/dev/null 2>&1 || fail "run deployed"
HOME="$TMP/home" "$WEIR" sessions >"$TMP/out" 2>&1
grep -q '^deployed .* idle  *[0-9][0-9]*  *default+small.json  *~/proj  *2 to the power 2?$' "$TMP/out" ||
    fail "deployed row: $(grep '^deployed' "$TMP/out")"

# --- no session left behind (issue #37 item 15) ---------------------------------
ls "$WEIR_SESSION_DIR" >"$TMP/before"
echo '{"agent": {"max_tokens": 50}}' >"$TMP/noprov.json"
"$WEIR" run -c "$TMP/noprov.json" -s noprov "hi" >/dev/null 2>"$TMP/err" # no provider row: fails
[ $? -eq 1 ] || fail "no provider: want exit 1"
grep -qx 'weir: session noprov not kept: nothing reached the model' "$TMP/err" ||
    fail "no 'not kept': $(cat "$TMP/err")"
"$WEIR" run -c "$TMP/noprov.json" >/dev/null 2>&1 </dev/null # no prompt
"$WEIR" run -c default -c "$TMP/nosuch-file.json" "hi" >/dev/null 2>&1 # a missing file
ls "$WEIR_SESSION_DIR" | cmp -s - "$TMP/before" ||
    fail "a failed attempt left a session: $(ls "$WEIR_SESSION_DIR" | grep -vxF -f "$TMP/before")"
# a turn a plugin blocked keeps its session (the decision is on record)
cat >"$TMP/block.json" <<'JSON'
{"plugins": [{"id": "gate", "plugin": "hooks-shell",
              "config": {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
                         "command": "echo '{\"decision\":\"block\",\"reason\":\"no\"}'"}]}]}}}]}
JSON
"$WEIR" run -c default -c "$TMP/block.json" -s blocked "hi" >/dev/null 2>"$TMP/err"
grep -q 'blocked' "$TMP/err" || fail "the gate did not block: $(cat "$TMP/err")"
[ -s "$WEIR_SESSION_DIR/blocked.jsonl" ] || fail "a blocked turn's session was removed"

# --- rm and prune ------------------------------------------------------------------
"$WEIR" run -s gone-one "2 to the power 2?" >/dev/null 2>&1 || fail "run gone-one"
"$WEIR" run -s gone-two "2 to the power 2?" >/dev/null 2>&1 || fail "run gone-two"
"$WEIR" sessions rm gone- >"$TMP/out" 2>"$TMP/err"
[ $? -eq 2 ] || fail "rm of an ambiguous prefix: want 2"
grep -qx "weir: session id prefix 'gone-' is ambiguous: 2 sessions start with it: gone-one, gone-two" "$TMP/err" ||
    fail "rm ambiguous: $(cat "$TMP/err")"
[ -e "$WEIR_SESSION_DIR/gone-one.jsonl" ] && [ -e "$WEIR_SESSION_DIR/gone-two.jsonl" ] ||
    fail "an ambiguous rm removed something"
: >"$WEIR_SESSION_DIR/gone-one.jsonl.held" # a shutdown's hold marker goes with its log
"$WEIR" sessions rm gone-o gone-two >"$TMP/out" 2>"$TMP/err" || fail "rm: $(cat "$TMP/err")"
[ -e "$WEIR_SESSION_DIR/gone-one.jsonl.held" ] && fail "rm left the log's .held marker"
grep -qx "removed gone-one ($WEIR_SESSION_DIR/gone-one.jsonl)" "$TMP/out" || fail "rm line: $(cat "$TMP/out")"
grep -qx "removed gone-two ($WEIR_SESSION_DIR/gone-two.jsonl)" "$TMP/out" || fail "rm line 2: $(cat "$TMP/out")"
[ -e "$WEIR_SESSION_DIR/gone-one.jsonl" ] || [ -e "$WEIR_SESSION_DIR/gone-two.jsonl" ] && fail "rm left a file"
"$WEIR" sessions rm nosuch >/dev/null 2>"$TMP/err"
[ $? -eq 4 ] || fail "rm of a missing session: want 4"
"$WEIR" sessions rm ../x >/dev/null 2>&1
[ $? -eq 2 ] || fail "rm of a path: want 2"
# a live session is refused and kept
"$WEIR" run -c "$TMP/slow.json" -s held "hold it" >/dev/null 2>&1 &
PID=$!
i=0
until grep -q '"type":"request/context"' "$WEIR_SESSION_DIR/held.jsonl" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 300 ] && { fail "the held turn never started"; break; }
    sleep 0.1
done
"$WEIR" sessions rm held >/dev/null 2>"$TMP/err"
[ $? -eq 4 ] || fail "rm of a live session: want 4"
grep -qx "weir sessions rm: session held is open for writing by pid $PID; not removed" "$TMP/err" ||
    fail "rm live: $(cat "$TMP/err")"
[ -e "$WEIR_SESSION_DIR/held.jsonl" ] || fail "a live session was removed"
"$WEIR" sessions prune --older-than 0s >"$TMP/out" 2>"$TMP/err" || fail "prune while live: $(cat "$TMP/err")"
grep -qx "weir sessions prune: kept held: open for writing by pid $PID" "$TMP/err" ||
    fail "prune live: $(cat "$TMP/err")"
[ -e "$WEIR_SESSION_DIR/held.jsonl" ] || fail "prune removed a live session"
kill -TERM "$PID"
wait "$PID"
PID=
# prune: by last activity; --dry-run removes nothing; a foreign file is kept
"$WEIR" run -s fresh "2 to the power 2?" >/dev/null 2>&1 || fail "run fresh"
printf 'not a weir log\n' >"$WEIR_SESSION_DIR/foreign.jsonl"
"$WEIR" sessions prune --older-than 1h --dry-run >"$TMP/out" 2>"$TMP/err" || fail "prune --dry-run"
[ -s "$TMP/out" ] && fail "nothing is an hour old, yet: $(cat "$TMP/out")"
sleep 1.1
"$WEIR" sessions prune --older-than 1s --dry-run >"$TMP/out" 2>"$TMP/err" || fail "prune --dry-run 1s"
grep -q '^would remove fresh (last activity [0-9-]* [0-9:]*)$' "$TMP/out" || fail "dry run: $(cat "$TMP/out")"
[ -e "$WEIR_SESSION_DIR/fresh.jsonl" ] || fail "--dry-run removed"
"$WEIR" sessions prune --older-than 1s >"$TMP/out" 2>"$TMP/err" || fail "prune: $(cat "$TMP/err")"
grep -q '^removed fresh (last activity ' "$TMP/out" || fail "prune: $(cat "$TMP/out")"
[ -e "$WEIR_SESSION_DIR/fresh.jsonl" ] && fail "prune left fresh"
[ -e "$WEIR_SESSION_DIR/foreign.jsonl" ] || fail "prune removed a file that is not a weir log"
grep -q '^weir sessions prune: kept foreign: not a weir session log' "$TMP/err" || fail "foreign: $(cat "$TMP/err")"
grep -q '^weir sessions prune: removed [0-9]* sessions\{0,1\} older than 1s in ' "$TMP/err" ||
    fail "prune summary: $(cat "$TMP/err")"
"$WEIR" sessions prune --older-than 30x >/dev/null 2>&1
[ $? -eq 2 ] || fail "a bad AGE: want 2"
"$WEIR" sessions prune >/dev/null 2>&1
[ $? -eq 2 ] || fail "prune without --older-than: want 2"
printf '{"session":{"store":"memory"}}\n' >"$TMP/mem.json"
"$WEIR" sessions rm -c default -c "$TMP/mem.json" x >/dev/null 2>"$TMP/err"
[ $? -eq 1 ] || fail "rm on the memory store: want 1"
grep -q "session.store 'memory' cannot remove sessions" "$TMP/err" || fail "rm memory: $(cat "$TMP/err")"

"$WEIR" sessions --help | grep -q '^usage: weir sessions' || fail "--help"
"$WEIR" sessions rm --help | grep -q '^usage: weir sessions rm' || fail "rm --help"
"$WEIR" sessions prune --help | grep -q '^usage: weir sessions prune' || fail "prune --help"
"$WEIR" sessions extra >/dev/null 2>&1; [ $? -eq 2 ] || fail "extra argument: want 2"

[ $FAILURES -eq 0 ] && echo "cli_sessions: ok"
exit $FAILURES
