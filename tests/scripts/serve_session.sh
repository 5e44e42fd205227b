#!/bin/sh
# tests/scripts/serve_session.sh WEIR - `weir serve --stdio` against the
# default deployment (the built-in scripted demo): a prompt gets
# generation.started ... generation.finished with the demo answer, then a
# shutdown closes the session; --events all adds the agent's own events;
# the transcript of docs/stdio-protocol.md is what serve prints.
# stdout holds JSON lines only.  Every wait is bounded (timeout 30).
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-serve.XXXXXX") || exit 1
trap 'exec 3>&- 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="${WEIR_SESSION_DIR:-$TMP/sessions}" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# wait_for FILE PATTERN: until a line of FILE matches (at most 30 s)
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && return 1
        sleep 0.1
    done
}
types() { sed 's/^{\("seq":[0-9]*,"time":[0-9]*,\)\{0,1\}"type":"\([^"]*\)".*/\2/' "$@"; }

# session NAME [ARGS...]: prompt, wait for the answer, shut down.
session() {
    name=$1
    shift
    rm -f "$TMP/in"
    mkfifo "$TMP/in" || exit 1
    timeout 30 "$WEIR" serve --stdio -s "$name" "$@" <"$TMP/in" >"$TMP/$name.out" \
        2>"$TMP/$name.err" &
    pid=$!
    exec 3>"$TMP/in"
    echo '{"op":"send","input_id":"q1","text":"what is 2 to the 10th?"}' >&3
    wait_for "$TMP/$name.out" '"type":"generation\.finished"' ||
        fail "$name: no generation.finished: $(cat "$TMP/$name.out" "$TMP/$name.err")"
    # compact between turns: the default deployment's compaction-basic declines
    # a session this short
    echo '{"op":"compact","instructions":"keep names"}' >&3
    wait_for "$TMP/$name.out" '"type":"compaction"' ||
        fail "$name: no compaction event: $(cat "$TMP/$name.out" "$TMP/$name.err")"
    echo '{"op":"shutdown"}' >&3
    exec 3>&-
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || fail "$name: exit $rc: $(cat "$TMP/$name.err")"
    grep -qv '^{.*}$' "$TMP/$name.out" &&
        fail "$name: a stdout line is not a JSON object: $(grep -v '^{.*}$' "$TMP/$name.out" | head -n 1)"
    [ -f "$WEIR_SESSION_DIR/$name.jsonl" ] || fail "$name: no session log"
    # stderr holds only the demo notice
    [ "$(wc -l <"$TMP/$name.err")" -eq 1 ] || fail "$name: stderr: $(cat "$TMP/$name.err")"
}

# 1. generation events only (the default)
session "serve-gen-$$"
out="$TMP/serve-gen-$$.out"
types "$out" | tr '\n' ' ' >"$TMP/types"
want="session.ready input.queued generation.started input.delivered assistant.message \
assistant.message generation.finished compaction session.closed "
[ "$(cat "$TMP/types")" = "$want" ] || fail "event order:
  got:  $(cat "$TMP/types")
  want: $want"
grep -q '^{"type":"session.ready","time":[0-9]*,"session_id":"serve-gen-'$$'","log":"' "$out" ||
    fail "session.ready line"
grep -q '^{"type":"compaction","time":[0-9]*,"line":2,"result":{"kind":"declined","message":"nothing compactable"}}$' "$out" ||
    fail "compaction line: $(grep '"compaction"' "$out")"
grep -q '^{"type":"input.queued","time":[0-9]*,"data":{"input_id":"q1","delivery":"new_turn","source":"human"}}$' "$out" ||
    fail "input.queued line"
grep -q '^{"type":"generation.started","time":[0-9]*,"data":{"generation_id":"gen-1","initial_input_id":"q1","turn":1}}$' "$out" ||
    fail "generation.started line"
grep -q '"type":"input.delivered","time":[0-9]*,"data":{"input_id":"q1","delivery":"new_turn","source":"human","generation_id":"gen-1"}}$' "$out" ||
    fail "input.delivered line"
grep -q '"type":"assistant.message","time":[0-9]*,"data":{"generation_id":"gen-1","input_ids":\["q1"\],"accepted_input_ids":\[\],"text":"Let me work that out with the pow tool.","turn":1,"step":1}}$' "$out" ||
    fail "provisional assistant.message line"
grep -q '"type":"generation.finished","time":[0-9]*,"data":{"generation_id":"gen-1","input_ids":\["q1"\],"accepted_input_ids":\[\],"text":"2 to the power 10 is 1024.","active_job_ids":\[\],"disposition":"manager_turn_finished","usage":{"input_tokens":[0-9]*,"output_tokens":[0-9]*},"reason":{"kind":"completed"}}}$' "$out" ||
    fail "generation.finished line: $(grep generation.finished "$out")"
grep -q '^{"type":"session.closed","time":[0-9]*,"status":"completed"}$' "$out" ||
    fail "session.closed line"
"$WEIR" log --check "serve-gen-$$" >/dev/null 2>&1 || fail "weir log --check"

# 2. --events all: the agent's events too, each before what it caused
session "serve-all-$$" --events all
out="$TMP/serve-all-$$.out"
grep -q '^{"seq":0,"time":[0-9]*,"type":"agent/inbox/spliced"' "$out" || fail "all: no log envelope"
grep -q '^{"type":"agent/status","time":[0-9]*,"data":{"status":"running"}}$' "$out" ||
    fail "all: no live agent/status"
types "$out" | grep -n -e '^turn/end$' -e '^generation.finished$' | tr '\n' ' ' >"$TMP/order"
case "$(cat "$TMP/order")" in
*turn/end*generation.finished*) ;;
*) fail "all: turn/end should precede generation.finished: $(cat "$TMP/order")" ;;
esac
[ "$(grep -c '"type":"generation.finished"' "$out")" -eq 1 ] || fail "all: one generation.finished"

# 3. end of input right after a prompt: however far the turn got, q1 ends
# exactly once: held (unconsumed at the shutdown, also when its generation
# had started but not claimed it yet), or in the input_ids of a generation
# that finished or was detached; and a generation that started ends once
printf '%s\n' '{"op":"send","input_id":"q1","text":"what is 2 to the 10th?"}' |
    timeout 30 "$WEIR" serve --stdio -s "serve-eof-$$" >"$TMP/eof.out" 2>/dev/null ||
    fail "eof: exit $?"
gen_ends='"type":"generation.finished"\|"type":"generation.detached"'
q1_ends=$(($(grep -c '"type":"input.held".*"input_id":"q1"' "$TMP/eof.out") +
    $(grep "$gen_ends" "$TMP/eof.out" | grep -c '"input_ids":\[[^]]*"q1"')))
starts=$(grep -c '"type":"generation.started"' "$TMP/eof.out")
[ "$q1_ends" -eq 1 ] && [ "$(grep -c "$gen_ends" "$TMP/eof.out")" -eq "$starts" ] &&
    [ "$starts" -le 1 ] || fail "eof: $(cat "$TMP/eof.out")"
tail -n 1 "$TMP/eof.out" | grep -q '"type":"session.closed"' || fail "eof: last line"

# The transcript of docs/stdio-protocol.md is what serve prints: its ">"
# lines are sent, one after the "<" lines before the next one came, and
# the output equals its "<" lines (times and the log path aside).
DOC="${WEIR_TEST_SOURCE_DIR:?}/docs/stdio-protocol.md"
awk '/^## Transcript/ {t = 1} t && /^```$/ {n++; if (n == 2) exit; next} t && n == 1' "$DOC" \
    >"$TMP/transcript"
norm() { sed -e 's/"time":[0-9]*/"time":0/g' -e 's/"log":"[^"]*"/"log":""/' "$@"; }
sed -n 's/^< //p' "$TMP/transcript" | norm >"$TMP/transcript.want"
[ -s "$TMP/transcript.want" ] || fail "transcript: none in $DOC"
rm -f "$TMP/in"
mkfifo "$TMP/in" || exit 1
(cd "$TMP" && HOME="$TMP" WEIR_SESSION_DIR="$TMP/transcript-sessions" timeout 30 "$WEIR" serve \
    --stdio -s demo <"$TMP/in" >"$TMP/transcript.out" 2>"$TMP/transcript.err") &
pid=$!
exec 3>"$TMP/in"
seen=0
while IFS= read -r line; do
    case $line in
    "< "*) seen=$((seen + 1)) ;;
    "> "*)
        i=0
        while [ "$(wc -l <"$TMP/transcript.out")" -lt $seen ] && [ $i -lt 100 ]; do
            i=$((i + 1))
            sleep 0.1
        done
        echo "${line#> }" >&3
        ;;
    esac
done <"$TMP/transcript"
exec 3>&-
wait $pid || fail "transcript: serve failed: $(cat "$TMP/transcript.err")"
norm "$TMP/transcript.out" >"$TMP/transcript.got"
cmp -s "$TMP/transcript.want" "$TMP/transcript.got" ||
    fail "transcript: docs/stdio-protocol.md says
$(cat "$TMP/transcript.want")
serve printed
$(cat "$TMP/transcript.got")"

rm -f "$WEIR_SESSION_DIR/serve-gen-$$.jsonl" "$WEIR_SESSION_DIR/serve-all-$$.jsonl" \
    "$WEIR_SESSION_DIR/serve-eof-$$.jsonl"
[ $FAILURES -eq 0 ] && echo "serve_session: ok"
exit $FAILURES
