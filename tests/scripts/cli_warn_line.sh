#!/bin/sh
# tests/scripts/cli_warn_line.sh WEIR - a warning never breaks a line of the
# streamed answer (issue #37 item 12): a plugin that warns at the second
# text delta (drvtest-hooks stream_warn) gets its line after the answer's
# line ends, on a terminal (script(1): stdout and stderr on one screen) and
# off one; --json leaves stderr to the warnings as they come.
WEIR=${1:?usage: $0 path/to/weir}
HOOKS="$WEIR_TEST_DRIVER_PLUGIN_DIR/weir-drvtest-hooks.so"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-warn.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= NO_COLOR=1 TERM=xterm
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }

cat >"$TMP/c.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "one two three four five six", "chunks": 4}]}},
             {"id": "warn", "plugin": "$HOOKS", "config": {"stream_warn": 2}}]}
JSON
timeout 60 script -qec "exec \"$WEIR\" run -c \"$TMP/c.json\" hi" /dev/null </dev/null >"$TMP/raw" 2>&1 ||
    fail "run on a terminal: exit $? $(cat -v "$TMP/raw")"
tr -d '\r' <"$TMP/raw" | sed 's/.*\x1b\[K//' >"$TMP/lines"
grep -qx 'one two three four five six' "$TMP/lines" || fail "the answer's line was broken: $(cat -v "$TMP/raw")"
grep -qx 'weir\[warn\]: warning: drvtest: a warning in the middle of the answer' "$TMP/lines" ||
    fail "no warning line of its own: $(cat -v "$TMP/raw")"
[ "$(grep -n 'one two' "$TMP/lines" | cut -d: -f1)" -lt "$(grep -n 'drvtest: a warning' "$TMP/lines" | cut -d: -f1)" ] ||
    fail "the warning came before the answer's line ended: $(cat -v "$TMP/raw")"

"$WEIR" run -c "$TMP/c.json" hi >"$TMP/out" 2>"$TMP/err" || fail "run: exit $? $(cat "$TMP/err")"
grep -qx 'one two three four five six' "$TMP/out" || fail "stdout: $(cat "$TMP/out")"
grep -qx 'weir\[warn\]: warning: drvtest: a warning in the middle of the answer' "$TMP/err" ||
    fail "stderr: $(cat "$TMP/err")"
"$WEIR" run --json -c "$TMP/c.json" hi >"$TMP/out" 2>"$TMP/err" || fail "run --json: exit $?"
grep -q 'drvtest: a warning' "$TMP/err" || fail "--json: no warning on stderr: $(cat "$TMP/err")"
grep -q 'Sanitizer\|runtime error' "$TMP/raw" "$TMP/err" && fail "sanitizer"

[ $FAILURES -eq 0 ] && echo "cli_warn_line: ok"
exit $FAILURES
