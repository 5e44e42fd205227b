#!/bin/sh
# quiet_build.sh SRC_DIR - `make demo` and `make test` build quietly
# (issue #37 item 4) through cmake/quiet-build.sh, tried on a small CMake
# project:
#   - off a terminal: exactly one stderr line, "weir: building… (log:
#     B/build.log)", nothing on stdout, CMake's output in the log;
#   - on a terminal (script(1)): the percentage redrawn in place, ending
#     "weir: built (log: ...)";
#   - a failed build: the log's tail with the compiler's error, where the
#     log is, exit 1;
#   - the Makefile's demo and test targets use it (test then runs ctest).
SRC=${1:?usage: $0 SRC_DIR}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-quiet-build.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }
Q="$SRC/cmake/quiet-build.sh"

cd "$TMP" || exit 1
printf 'cmake_minimum_required(VERSION 3.25)\nproject(q C)\nadd_executable(a a.c)\nadd_executable(b b.c)\n' \
    >CMakeLists.txt
echo 'int main(void) { return 0; }' >a.c
cp a.c b.c
cmake -S . -B b >/dev/null 2>&1 || { echo "FAIL: configure" >&2; exit 1; }
sh "$Q" b 2 >out 2>err || fail "build: exit $? $(cat err)"
[ ! -s out ] || fail "stdout: $(cat out)"
[ "$(cat err)" = "weir: building… (log: b/build.log)" ] || fail "stderr: $(cat err)"
grep -q 'Built target b' b/build.log || fail "the log: $(cat b/build.log)"
# nothing to rebuild: still one line
sh "$Q" b 2 >out 2>err || fail "rebuild: exit $?"
[ "$(wc -l <err)" -eq 1 ] && [ ! -s out ] || fail "rebuild output: $(cat out err)"

rm -rf b
cmake -S . -B b >/dev/null 2>&1
TERM=xterm script -qec "sh '$Q' b 2" /dev/null </dev/null >raw 2>&1 || fail "tty build: $(cat -v raw)"
# a percentage between 0 and 100 drawn in place (which ones depends on how
# make interleaves the two targets' steps: 25, 50, 75 or 25, 75 with -j2)
grep -qE 'weir: building… ([1-9]|[1-9][0-9])% \(log: b/build.log\)' raw ||
    fail "no percentage: $(cat -v raw)"
grep -q 'weir: built (log: b/build.log)' raw || fail "no end line: $(cat -v raw)"

echo 'int main(void) { return nope; }' >b.c
sh "$Q" b 2 >out 2>err
[ $? -eq 1 ] || fail "a failed build: not exit 1"
grep -q "'nope' undeclared\|‘nope’ undeclared" err || fail "the error is not shown: $(cat err)"
grep -q '^weir: the build failed; its whole output is in b/build.log$' err || fail "no log line: $(cat err)"

grep -A2 '^demo:' "$SRC/Makefile" | grep -q 'sh cmake/quiet-build.sh' || fail "make demo does not build quietly"
grep -A3 '^test:' "$SRC/Makefile" | grep -q 'sh cmake/quiet-build.sh' || fail "make test does not build quietly"
grep -A3 '^test:' "$SRC/Makefile" | grep -q 'ctest ' || fail "make test runs no ctest"

[ $FAILURES -eq 0 ] && echo "quiet_build: ok"
exit $FAILURES
