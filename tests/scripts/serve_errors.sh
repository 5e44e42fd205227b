#!/bin/sh
# tests/scripts/serve_errors.sh WEIR - every stdin line of `weir serve
# --stdio` is validated: malformed or hostile lines each produce one
# {"type":"error","line":N,"message":...} event and serving goes on; end of
# input is a shutdown, and input still queued is reported input.held.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-serve-err.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="${WEIR_SESSION_DIR:-$TMP/sessions}" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
name="serve-err-$$"

{
    echo 'garbage'                                                         # 1
    echo '[1,2]'                                                           # 2
    echo '{}'                                                              # 3
    echo '{"op":"fly"}'                                                    # 4
    echo '{"op":"send"}'                                                   # 5
    echo '{"op":"send","text":"  "}'                                       # 6
    echo '{"op":"send","text":"x","mode":"sideways"}'                      # 7
    echo '{"op":"send","text":"x","bogus":1}'                              # 8
    echo '{"op":"send","input_id":"","text":"x"}'                          # 9
    echo '{"op":"send","text":"x","message":{"role":"user","content":"y"}}' # 10
    echo '{"op":"send","message":{"role":"assistant","content":"y"}}'      # 11
    echo '{"op":"cancel","cause":"nope"}'                                  # 12
    echo '{"op":"cancel","keep_inbox":"yes"}'                              # 13
    echo '{"op":"shutdown","now":true}'                                    # 14
    echo '{"op":"send","op":"send","text":"x"}'                            # 15
    printf '{"op":"send","text":"\377"}\n'                                 # 16
    printf '{"op":"send","text":"a\\u0000b"}\n'                            # 17
    head -c 1100000 /dev/zero | tr '\0' 'x'; echo                          # 18
    echo ''                                                                # 19 (ignored)
    echo '{"op":"cancel"}'                                                 # 20 (idle: no-op)
    echo '{"op":"send","input_id":"h1","text":"held","mode":"inject"}'     # 21
    echo '{"op":"send","input_id":"h1","text":"other","mode":"inject"}'    # 22
    echo '{"op":"compact","bogus":1}'                                      # 23
    echo '{"op":"compact","instructions":5}'                               # 24
} >"$TMP/in"

timeout 30 "$WEIR" serve --stdio -s "$name" <"$TMP/in" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -qv '^{.*}$' "$TMP/out" && fail "a stdout line is not a JSON object"

# expect LINE MESSAGE: the error event for input line LINE
expect() {
    line=$(grep "\"type\":\"error\"" "$TMP/out" | grep -F "\"line\":$1," | head -n 1)
    msg=$(printf '%s' "$line" | sed 's/.*"message":"\(.*\)"}$/\1/')
    [ "$msg" = "$2" ] || fail "line $1: got '$msg', want '$2'"
}
expect 1 "invalid JSON at column 7: '[' or '{' expected near 'garbage'"
expect 2 'expected a JSON object'
expect 3 'missing \"op\" (\"send\", \"cancel\", \"cancel_job\", \"compact\", \"approve\" or \"shutdown\")'
expect 4 'unknown op \"fly\" (expected \"send\", \"cancel\", \"cancel_job\", \"compact\", \"approve\" or \"shutdown\")'
expect 5 'send: expected exactly one of \"text\" and \"message\"'
expect 6 'send: text: expected a non-blank string'
expect 7 'send: mode: expected \"followup\", \"steer\" or \"inject\"'
expect 8 'send: unknown field \"bogus\"'
expect 9 'send: input_id: expected a string of 1 to 128 characters'
expect 10 'send: expected exactly one of \"text\" and \"message\"'
expect 11 'send: message.role: expected \"user\", got \"assistant\"'
expect 12 'cancel: cause \"nope\": expected \"user\", \"parent\", \"hook:<reason>\" or \"disposed\"'
expect 13 'cancel: keep_inbox: expected true or false'
expect 14 'shutdown: unknown field \"now\"'
expect 15 "invalid JSON at column 17: duplicate object key near '\\\"op\\\"'"
expect 16 'invalid JSON at column 21: unable to decode byte 0xff near '"'"'\"'"'"
expect 17 "invalid JSON at column 30: \\\\u0000 is not allowed without JSON_ALLOW_NUL near '\\\"a\\\\u0000b\\\"'"
expect 18 'line too long (more than 1048576 bytes)'
expect 22 "send: inbox: input id 'h1' was already used with different content"
expect 23 'compact: unknown field \"bogus\"'
expect 24 'compact: instructions: expected a string'
[ "$(grep -c '"type":"error"' "$TMP/out")" -eq 21 ] ||
    fail "error count: $(grep -c '"type":"error"' "$TMP/out")"
# line 21 was queued without waking; end of input held it.  Its delivery
# never became known (no turn claimed it), so it got no input.queued.
grep -q '"type":"input.queued".*"h1"' "$TMP/out" && fail "input.queued h1: its delivery is unknown"
grep -q '^{"type":"input.held","time":[0-9]*,"data":{"input_id":"h1","source":"steer","reason":"shutdown"}}$' "$TMP/out" ||
    fail "input.held h1"
grep -q '"type":"generation' "$TMP/out" && fail "no generation should start"
tail -n 1 "$TMP/out" | grep -q '^{"type":"session.closed","time":[0-9]*,"status":"completed"}$' ||
    fail "last line: $(tail -n 1 "$TMP/out")"

# the held input is gone from the session: resuming replays nothing
printf '{"op":"shutdown"}\n' | timeout 30 "$WEIR" serve --stdio -s "$name" --events all \
    >"$TMP/out2" 2>/dev/null || fail "resume exit $?"
grep -q '"turn/start"\|"input\.' "$TMP/out2" && fail "resume replayed input: $(cat "$TMP/out2")"

# usage errors
"$WEIR" serve >/dev/null 2>&1
[ $? -eq 2 ] || fail "serve without --stdio should exit 2"
"$WEIR" serve --stdio --events some >/dev/null 2>&1
[ $? -eq 2 ] || fail "--events some should exit 2"

rm -f "$WEIR_SESSION_DIR/$name.jsonl"
[ $FAILURES -eq 0 ] && echo "serve_errors: ok"
exit $FAILURES
