#!/bin/sh
# tests/scripts/cli_demo.sh WEIR - the first hour's first command (issue #14
# item 7): `make demo` on a built tree prints at most 15 lines (the build
# goes quietly to BUILD/build.log), shows the demo's answer, then two "next"
# lines (weir sessions, weir log ID) that work as printed; `weir compact ID`
# works with the default deployment; the README starts with the two set-up
# commands.  The build tree is the one WEIR belongs to;
# the source tree is this script's.  Without an API key, as a new user.
WEIR=${1:?usage: $0 path/to/weir}
SRC=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
BUILD=$(cd "$(dirname "$WEIR")/.." && pwd) || exit 1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-demo.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
unset WEIR_PLUGIN_PATH MAKEFLAGS MAKELEVEL
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v make >/dev/null 2>&1 || { echo "FAIL: make is missing" >&2; exit 1; }

[ -f "$BUILD/CMakeCache.txt" ] || { echo "FAIL: $BUILD is not a build tree" >&2; exit 1; }
# `make demo`, not -s: what a new user types (the tree is built already)
timeout 600 make -C "$SRC" --no-print-directory BUILD="$BUILD" demo >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "make demo: exit $rc: $(tail -n 20 "$TMP/out")"
n=$(wc -l <"$TMP/out")
[ "$n" -le 15 ] || fail "make demo printed $n lines (at most 15): $(cat "$TMP/out")"
grep -qx 'Hello! Let me work that out with the pow tool.' "$TMP/out" || fail "demo answer: $(cat "$TMP/out")"
grep -qx '2 to the power 10 is 1024.' "$TMP/out" || fail "demo result: $(cat "$TMP/out")"
grep -q 'using the built-in scripted demo provider' "$TMP/out" || fail "the demo notice"
grep -q '^next: .*/bin/weir sessions  *# ' "$TMP/out" || fail "no 'next: weir sessions' line"
logline=$(grep '^      .*/bin/weir log ' "$TMP/out")
id=$(printf '%s\n' "$logline" | sed 's|.*/bin/weir log \([^ ]*\).*|\1|')
[ -n "$id" ] || fail "no 'weir log ID' line: $(cat "$TMP/out")"
grep -q "^weir: session $id " "$TMP/out" || fail "the log line does not name the demo's session"
grep -qi 'entering directory\|Building C\|Linking\|Scanning' "$TMP/out" && fail "build chatter: $(cat "$TMP/out")"
# the next lines work as printed
"$WEIR" sessions >"$TMP/list" 2>&1 || fail "weir sessions: $(cat "$TMP/list")"
grep -q "^$id " "$TMP/list" || fail "weir sessions lacks $id: $(cat "$TMP/list")"
"$WEIR" log "$id" >"$TMP/log" 2>&1 || fail "weir log $id: $(cat "$TMP/log")"
grep -qx 'tool pow: 1024' "$TMP/log" || fail "weir log $id: $(cat "$TMP/log")"
# `weir compact ID` with the default deployment (compaction-basic is in it):
# the demo session is all recent tail, so nothing is compactable yet
"$WEIR" compact "$id" >"$TMP/compact" 2>&1 || fail "weir compact $id: $(cat "$TMP/compact")"
grep -qx 'declined: nothing compactable' "$TMP/compact" || fail "weir compact: $(cat "$TMP/compact")"
# ten long turns are more than the kept tail (16% of the demo's 32768-token
# window): the older ones are summarized (by the demo), and the session goes on
P=$(printf 'background sentence number %.0s for the record. ' $(seq 1 80))
for i in 1 2 3 4 5 6 7 8 9 10; do
    "$WEIR" run -s long "$i. $P" >/dev/null 2>&1 || fail "long turn $i"
done
"$WEIR" compact long >"$TMP/compact" 2>&1 || fail "weir compact long: $(cat "$TMP/compact")"
grep -q '^compacted: 0 tool result(s) pruned, 1 summary, [0-9]* -> [0-9]* tokens (cmp-' "$TMP/compact" ||
    fail "weir compact long: $(cat "$TMP/compact")"
"$WEIR" log long --check >"$TMP/check" 2>&1 || fail "log --check after compact: $(cat "$TMP/check")"
"$WEIR" run -s long "what is 2^2?" 2>/dev/null | grep -qx '2 to the power 2 is 4.' ||
    fail "the turn after weir compact"

# the README starts with exactly the two set-up commands
awk '/^```/ { n++; next } n == 1' "$SRC/README.md" >"$TMP/readme"
[ "$(wc -l <"$TMP/readme")" -eq 2 ] && [ "$(sed -n 1p "$TMP/readme" | cut -c1-10)" = "make demo " ] &&
    [ "$(sed -n 2p "$TMP/readme" | cut -c1-10)" = "make test " ] ||
    fail "README's first commands: $(cat "$TMP/readme")"
[ "$(grep -m1 -n '^```' "$SRC/README.md" | cut -d: -f1)" -le 4 ] || fail "README: the commands do not come first"

[ $FAILURES -eq 0 ] && echo "cli_demo: ok"
exit $FAILURES
