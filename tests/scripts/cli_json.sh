#!/bin/sh
# tests/scripts/cli_json.sh WEIR - `weir run --json` prints every event as
# one JSON line and nothing else, the live session event first; a two-step
# tool turn shows the seed's order (docs/lifecycle.md, docs/cli.md).
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-json.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

"$WEIR" run -s j1 --json "what is 2 to the 10th?" >"$TMP/out" 2>"$TMP/err" || fail "exit $?: $(cat "$TMP/err")"
grep -qv '^{.*}$' "$TMP/out" && fail "a stdout line is not a JSON object: $(grep -v '^{.*}$' "$TMP/out" | head -n 1)"
types() { sed 's/^{\("seq":[0-9]*,"time":[0-9]*,\)\{0,1\}"type":"\([^"]*\)".*/\2/' "$@"; }

# durable events: the log envelopes, in the lifecycle's order (hook/decision:
# the default deployment's system prompt rewrites the assembly, docs/hooks.md)
grep '^{"seq":' "$TMP/out" | types | tr '\n' ' ' >"$TMP/durable"
want="session/start agent/inbox/spliced turn/start agent/inbox/spliced hook/decision step/start system/message user/message \
request/header request/context assistant/message tool/call tool/result step/end step/start \
assistant/message step/end turn/end "
[ "$(cat "$TMP/durable")" = "$want" ] || fail "durable order:
  got:  $(cat "$TMP/durable")
  want: $want"

# every event, consecutive repeats collapsed (stream frames)
types "$TMP/out" | uniq | tr '\n' ' ' >"$TMP/all"
want="session session/start agent/inbox/spliced agent/inbox/inserted agent/status turn/start agent/inbox/spliced \
agent/inbox/claimed hook/decision step/start system/message user/message request/header request/context \
agent/assistant-stream assistant/message agent/assistant-stream tool/call tool/result step/end \
step/start agent/assistant-stream assistant/message agent/assistant-stream step/end turn/end \
agent/status "
[ "$(cat "$TMP/all")" = "$want" ] || fail "event order:
  got:  $(cat "$TMP/all")
  want: $want"

# the first line is the live session event
head -n 1 "$TMP/out" | grep -qx '{"type":"session","time":[0-9]*,"data":{"session_id":"j1","log":"'"$WEIR_SESSION_DIR"'/j1.jsonl"}}' ||
    fail "first line: $(head -n 1 "$TMP/out")"
# live events are {type, time, data}; turn/end carries {turn, reason:{kind}}
grep -q '^{"type":"agent/status","time":[0-9]*,"data":{"status":"running"}}$' "$TMP/out" ||
    fail "agent/status running line"
grep -q '"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}' "$TMP/out" ||
    fail "turn/end line"
grep -q '"type":"tool/result","data":{"turn":1,"step":1,"message":{"role":"tool"' "$TMP/out" ||
    fail "tool/result carries data.message"
# seq is contiguous from 0
seqs=$(grep -o '^{"seq":[0-9]*' "$TMP/out" | sed 's/.*://' | tr '\n' ' ')
[ "$seqs" = "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 " ] || fail "seqs: $seqs"
# a new session's header: the deployment it was created with (issue #37)
grep -q '^{"seq":0,"time":[0-9]*,"type":"session/start","data":{"deployment":{"files":\[\],"config_hash":"fnv1a64:[0-9a-f]*",.*"cwd":"[^"]*"},"ignorable":true}$' "$TMP/out" ||
    fail "no session/start header: $(head -n 2 "$TMP/out")"
# stderr holds only the notice
[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "stderr: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_json: ok"
exit $FAILURES
