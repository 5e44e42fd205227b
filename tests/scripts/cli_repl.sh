#!/bin/sh
# tests/scripts/cli_repl.sh WEIR - `weir run` without a prompt on a terminal
# is a REPL (issue #14 item 6): the session line and a hint first, one turn
# per non-empty line, "> " prompts on stderr, /help, /session, /compact and
# /quit; Ctrl-C cancels the running turn (cause user) and the next prompt
# follows; Ctrl-C twice while idle quits with 0, as /quit and end of input
# do; line editing (the keys are bytes on the terminal) and history; one
# status line while waiting for the first token; colour on a terminal only,
# off with NO_COLOR.  script(1) (util-linux, Essential on Debian) gives weir a
# pseudo-terminal; input is fed through a pipe, paced by what the log shows
# (every wait is bounded).
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-repl.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }
# wait_for FILE PATTERN [COUNT]: until FILE has COUNT lines matching (10 s at most)
wait_for() {
    i=0
    while n=$(grep -c "$2" "$1" 2>/dev/null); [ "${n:-0}" -lt "${3:-1}" ]; do
        i=$((i + 1))
        [ $i -gt 100 ] && return 1
        sleep 0.1
    done
}
# repl ARGS...: weir run ARGS under script(1); stdin is the input, the
# terminal's output (stdout and stderr) lands in $TMP/raw and, without CRs,
# $TMP/out; the exit code is weir's.  script runs "$SHELL -c"; exec makes
# weir the only process on the terminal: a shell left waiting (dash does
# not exec the last command) gets each Ctrl-C too and, once weir exits,
# kills itself with SIGINT (exit 130 whatever weir returned)
repl() {
    timeout 60 script -qec "exec \"$WEIR\" run $*" /dev/null >"$TMP/raw" 2>&1
    rc=$?
    # the line editor's redraws (CR, erase to the end, cursor moves) out
    tr -d '\r' <"$TMP/raw" | sed "s/$(printf '\033')\\[[0-9]*[KCD]//g" >"$TMP/out"
    return $rc
}
# ready N: until the REPL has shown its Nth prompt (input typed before
# that is echoed by the terminal itself)
PROMPT_RE="^$(printf '\r')*\\($(printf '\033')\\[1m\\)*>"
ready() { wait_for "$TMP/raw" "$PROMPT_RE" "${1:-1}" || echo "timeout" >&2; }
# at_prompt: until the terminal's output ends with a prompt (the REPL reads a
# line); keys sent then reach the line editor, never the terminal's own
# line discipline (where Ctrl-D ends a read)
at_prompt() {
    i=0
    until tail -c 6 "$TMP/raw" 2>/dev/null | grep -q '> $\|\[0m $'; do
        i=$((i + 1))
        [ $i -gt 100 ] && { echo "timeout" >&2; return 1; }
        sleep 0.1
    done
}

# --- turns, commands and the end of input (no colour) ------------------------
rm -f "$TMP/raw" # each block its own terminal output: ready never reads the last one's
{
    ready
    printf 'what is 2 to the 10th?\n\n'
    wait_for "$WEIR_SESSION_DIR/r1.jsonl" '"type":"turn/end"' || echo "timeout" >&2
    at_prompt
    printf '/help\n/session\n/bogus\nand again, 2 to the power 10?\n'
    wait_for "$WEIR_SESSION_DIR/r1.jsonl" '"type":"turn/end"' 2 || echo "timeout" >&2
    at_prompt
    printf '\004' # Ctrl-D quits
} | NO_COLOR=1 repl -s r1
rc=$?
[ $rc -eq 0 ] || fail "exit $rc: $(cat "$TMP/out")"
grep -q "^weir: session r1 (.*/r1.jsonl)$" "$TMP/out" || fail "session line: $(cat "$TMP/out")"
grep -q '^weir: /help lists the commands; /quit or Ctrl-D quits$' "$TMP/out" || fail "quit hint"
[ "$(grep -c '2 to the power 10 is 1024\.$' "$TMP/out")" -eq 2 ] ||
    fail "two answers: $(cat "$TMP/out")"
grep -q '^> what is 2 to the 10th?$' "$TMP/out" || fail "prompt and echo: $(cat "$TMP/out")"
grep -q '^  /compact \[TEXT\]' "$TMP/out" || fail "/help text: $(cat "$TMP/out")"
[ "$(grep -c '^weir: session r1 ' "$TMP/out")" -eq 2 ] || fail "/session"
grep -q '^weir: unknown command /bogus (/help lists them)$' "$TMP/out" || fail "unknown command"
grep -q "$(printf '\033\\[[0-9;]*m')" "$TMP/raw" && fail "NO_COLOR: colour codes in the output"
"$WEIR" log r1 --check >"$TMP/check" 2>&1 || fail "check: $(cat "$TMP/check")"
[ "$(grep -c '"type":"turn/start"' "$WEIR_SESSION_DIR/r1.jsonl")" -eq 2 ] ||
    fail "the empty line or a command started a turn"

# --- colour on a terminal; the waiting line; /compact; /quit -----------------------
rm -f "$TMP/raw" # each block its own terminal output: ready never reads the last one's
{
    ready
    printf '2 to the power 3?\n'
    wait_for "$WEIR_SESSION_DIR/r2.jsonl" '"type":"turn/end"' || echo "timeout" >&2
    at_prompt
    printf '/compact\n'
    sleep 0.5
    at_prompt
    printf '/quit\nnever sent\n'
} | repl -s r2
rc=$?
[ $rc -eq 0 ] || fail "/quit: exit $rc: $(cat "$TMP/out")"
grep -q "$(printf '\033\\[2m')\\[tool\\] pow" "$TMP/raw" || fail "no colour on a terminal: $(cat -v "$TMP/raw")"
grep -q "weir: waiting for the model…$(printf '\033\\[0m\r\033\\[K')" "$TMP/raw" ||
    fail "no waiting line replaced by the answer: $(cat -v "$TMP/raw")"
grep -q '^declined: \|^compacted: \|^failed: ' "$TMP/out" || fail "/compact result: $(cat "$TMP/out")"
grep -q 'never sent' "$WEIR_SESSION_DIR/r2.jsonl" && fail "a line after /quit was sent"
# off a terminal: no colour and no waiting line (stderr to a file)
"$WEIR" run -s r3 "2 to the power 3?" >/dev/null 2>"$TMP/err" || fail "plain run"
grep -q "$(printf '\033')" "$TMP/err" && fail "escape codes off a terminal: $(cat -v "$TMP/err")"

# --- editing and history: Left, Backspace, Ctrl-A, Ctrl-K; Up recalls --------------
rm -f "$TMP/raw" # each block its own terminal output: ready never reads the last one's
{
    ready
    printf '2 to the power 9X\033[D\177\n' # Left, then Backspace erases the 9
    wait_for "$WEIR_SESSION_DIR/r4.jsonl" '"type":"turn/end"' || echo "timeout" >&2
    at_prompt
    printf 'junk\001\013hello there\n' # Ctrl-A, Ctrl-K erase "junk"
    wait_for "$WEIR_SESSION_DIR/r4.jsonl" '"type":"turn/end"' 2 || echo "timeout" >&2
    at_prompt
    printf '\033[A\033[A\n' # Up twice: the first line again
    wait_for "$WEIR_SESSION_DIR/r4.jsonl" '"type":"turn/end"' 3 || echo "timeout" >&2
    at_prompt
    printf '\004'
} | NO_COLOR=1 repl -s r4
"$WEIR" log r4 >"$TMP/transcript" 2>&1
grep -qx 'user: 2 to the power X' "$TMP/transcript" || fail "Left + Backspace: $(grep '^user' "$TMP/transcript")"
grep -qx 'user: hello there' "$TMP/transcript" || fail "Ctrl-A + Ctrl-K: $(grep '^user' "$TMP/transcript")"
[ "$(grep -c '^user: 2 to the power X$' "$TMP/transcript")" -eq 2 ] ||
    fail "Up did not recall the first line: $(grep '^user' "$TMP/transcript")"

# --- Ctrl-C cancels the running turn; Ctrl-C twice while idle quits ------------------
cat >"$TMP/slow.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"loop": true, "replies": [{"text": "a very slow answer", "chunks": 4,
                                                    "chunk_delay_ms": 60000}]}}]}
JSON
LOG="$WEIR_SESSION_DIR/slow.jsonl"
rm -f "$TMP/raw" # each block its own terminal output: ready never reads the last one's
{
    ready
    printf 'take your time\n'
    wait_for "$LOG" '"type":"request/context"' || echo "timeout" >&2
    sleep 0.3
    printf '\003'
    wait_for "$LOG" '"type":"turn/end"' || echo "timeout" >&2
    ready 2
    printf '\003'
    ready 3
    printf '\003'
} | NO_COLOR=1 repl -c "$TMP/slow.json" -s slow
rc=$?
[ $rc -eq 0 ] || fail "Ctrl-C twice while idle: exit $rc, want 0 ($(cat "$TMP/out"))"
grep -q '"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","cause":"user"}}' "$LOG" ||
    fail "no aborted turn/end (cause user): $(grep turn/end "$LOG")"
grep -q '^weir: interrupted by Ctrl-C$' "$TMP/out" || fail "cancel line: $(cat "$TMP/out")"
grep -q '^weir: press Ctrl-C again or type /quit to quit$' "$TMP/out" || fail "idle Ctrl-C hint"
"$WEIR" log -c "$TMP/slow.json" slow --check >"$TMP/check" 2>&1 || fail "check: $(cat "$TMP/check")"
grep -q '^open:' "$TMP/check" && fail "left open: $(cat "$TMP/check")"
# a SIGINT while idle (kill -INT) and a Ctrl-C key count together: two quit with 0
rm -f "$TMP/raw" # each block its own terminal output: ready never reads the last one's
{
    ready
    pid=$(pgrep -f -n "run -c $TMP/slow.json -s slow2")
    [ -n "$pid" ] && kill -INT "$pid"
    wait_for "$TMP/raw" 'press Ctrl-C again' || echo "timeout" >&2
    at_prompt
    printf '\003'
    sleep 1
} | NO_COLOR=1 repl -c "$TMP/slow.json" -s slow2
rc=$?
[ $rc -eq 0 ] || fail "SIGINT then Ctrl-C while idle: exit $rc, want 0 ($(cat "$TMP/out"))"
[ "$(grep -c 'press Ctrl-C again' "$TMP/out")" -eq 1 ] || fail "SIGINT then Ctrl-C: $(cat "$TMP/out")"
# Ctrl-C, then a line: the count starts again, the REPL goes on
rm -f "$TMP/raw" # each block its own terminal output: ready never reads the last one's
{
    ready
    printf '\003'
    ready 2
    printf '/session\n'
    ready 3
    printf '\003'
    ready 4
    printf '/quit\n'
} | NO_COLOR=1 repl -c "$TMP/slow.json" -s slow
[ $? -eq 0 ] || fail "Ctrl-C, line, Ctrl-C, /quit: exit"
grep -q '^weir: session slow ' "$TMP/out" && [ "$(grep -c '^weir: session slow ' "$TMP/out")" -eq 2 ] ||
    fail "the REPL quit early: $(cat "$TMP/out")"

# --- resume shows the conversation so far (issue #37 item 6) ----------------------
# `weir resume ID` and `weir resume --last` on a terminal: the last prompts and
# their answers, one compact line each, before the first prompt
term() {
    timeout 60 script -qec "exec \"$WEIR\" $*" /dev/null >"$TMP/raw" 2>&1
    rc=$?
    tr -d '\r' <"$TMP/raw" | sed "s/$(printf '\033')\\[[0-9]*[KCD]//g" >"$TMP/out"
    return $rc
}
for how in "resume r1" "resume --last"; do
    [ "$how" = "resume --last" ] && touch "$WEIR_SESSION_DIR/r1.jsonl" &&
        "$WEIR" run -s r1 "2 to the power 5?" >/dev/null 2>&1 # r1 is the newest again
    rm -f "$TMP/raw"
    {
        ready
        printf '/quit\n'
    } | NO_COLOR=1 term "$how"
    rc=$?
    [ $rc -eq 0 ] || fail "$how: exit $rc: $(cat "$TMP/out")"
    grep -q '^weir: the conversation so far (the last [23] prompts; `weir log r1` prints it all):$' "$TMP/out" ||
        fail "$how: no recap: $(cat "$TMP/out")"
    grep -q '^  user: and again, 2 to the power 10?$' "$TMP/out" || fail "$how: the last prompt: $(cat "$TMP/out")"
    grep -q '^  assistant -> pow {"x":2,"y":10}$' "$TMP/out" || fail "$how: the tool call: $(cat "$TMP/out")"
    grep -q '^  assistant: 2 to the power 10 is 1024\.$' "$TMP/out" || fail "$how: the answer: $(cat "$TMP/out")"
    # the recap comes before the prompt
    awk '/^weir: the conversation so far/ {r = NR} /^> / && !p {p = NR} END {exit !(r && p && r < p)}' \
        "$TMP/out" || fail "$how: the recap is not before the prompt: $(cat "$TMP/out")"
done
# a new session has nothing to recap
rm -f "$TMP/raw"
{
    ready
    printf '/quit\n'
} | NO_COLOR=1 repl -s fresh
grep -q 'the conversation so far' "$TMP/out" && fail "a new session shows a recap: $(cat "$TMP/out")"

[ $FAILURES -eq 0 ] && echo "cli_repl: ok"
exit $FAILURES
