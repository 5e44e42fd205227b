#!/bin/sh
# tests/scripts/cli_repl.sh WEIR - `weir run` without a prompt on a terminal
# is a REPL: one turn per non-empty line, "> " prompts on stderr, the
# session line first, end of input quits with 0.  script(1) (util-linux,
# Essential on Debian) gives weir a pseudo-terminal.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-repl.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }

printf 'what is 2 to the 10th?\n\nand again?\n' |
    timeout 30 script -qec "\"$WEIR\" run -s repl" /dev/null >"$TMP/raw" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "exit $rc: $(cat "$TMP/raw")"
tr -d '\r' <"$TMP/raw" >"$TMP/out"
grep -q "^weir: session repl (.*/repl.jsonl)$" "$TMP/out" || fail "session line: $(cat "$TMP/out")"
[ "$(grep -c '2 to the power 10 is 1024\.$' "$TMP/out")" -eq 2 ] ||
    fail "two answers: $(cat "$TMP/out")"
grep -q '^> Hello!' "$TMP/out" || fail "prompt: $(cat "$TMP/out")"
"$WEIR" log repl --check >"$TMP/check" 2>&1 || fail "check: $(cat "$TMP/check")"
[ "$(grep -c '"type":"turn/start"' "$WEIR_SESSION_DIR/repl.jsonl")" -eq 2 ] ||
    fail "the empty line started a turn"

[ $FAILURES -eq 0 ] && echo "cli_repl: ok"
exit $FAILURES
