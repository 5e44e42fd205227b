#!/bin/sh
# tests/scripts/cli_log_prefix.sh WEIR - `weir log --check`'s prefix report
# (issue #32 item 4; docs/session-log.md, "The append-only prefix"): a clean
# log is all append-only, a compaction's surface replace is one named break,
# and a break is a report, not an error (exit 0). A demo session run twice
# keeps its prefix.
WEIR=${1:?usage: $0 path/to/weir}
DATA=${WEIR_TEST_DATA_DIR:?WEIR_TEST_DATA_DIR is not set}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-prefix.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

"$WEIR" log "$DATA/logs/good.jsonl" --check >"$TMP/out" 2>&1 || fail "good: exit $?: $(cat "$TMP/out")"
grep -qx 'prefix: 2 requests, 2 append-only, 0 breaks' "$TMP/out" ||
    fail "good: no clean prefix summary: $(cat "$TMP/out")"
grep -q '^prefix break:' "$TMP/out" && fail "good: a break line: $(cat "$TMP/out")"

"$WEIR" log "$DATA/logs/prefix_break.jsonl" --check >"$TMP/out" 2>&1 ||
    fail "a prefix break is not an error: exit $?: $(cat "$TMP/out")"
grep -qx 'prefix: 3 requests, 2 append-only, 1 break' "$TMP/out" ||
    fail "break: summary: $(cat "$TMP/out")"
grep -qx 'prefix break: request 3 (answered at seq 21): messages\[1\] differs, caused by seq 17 user/message (replace) during compaction/start (seq 16), hook agent/pre-step by plugin compaction-basic@0.1.0 (row compaction)' "$TMP/out" ||
    fail "break: the break line: $(cat "$TMP/out")"

# a session of two turns (the demo's tool loop): every request append-only
"$WEIR" run -s p1 "first: 2 to the power 10?" >/dev/null 2>&1 || fail "run p1"
"$WEIR" run -s p1 "second: 3 to the power 2?" >/dev/null 2>&1 || fail "run p1 again"
"$WEIR" log p1 --check >"$TMP/out" 2>&1 || fail "p1: exit $?: $(cat "$TMP/out")"
grep -q '^prefix: [0-9]* requests, [0-9]* append-only, 0 breaks$' "$TMP/out" ||
    fail "p1: not all append-only: $(cat "$TMP/out")"

[ $FAILURES -eq 0 ] && echo "cli_log_prefix: ok"
exit $FAILURES
