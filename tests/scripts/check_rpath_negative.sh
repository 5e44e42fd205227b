#!/bin/sh
# check_rpath_negative.sh CHECK_RPATH CC - check_rpath.sh still finds what
# it must when it reads the build's list of binaries instead of walking the
# tree (issue #37 item 1): in a fake build tree, a listed binary with a
# relative RUNPATH entry and one with an empty entry are reported (exit 1),
# a listed $ORIGIN one and a listed file that is not built pass, and a
# binary the list does not name is not read (the tree's other files, like
# node_modules, are not the build's).
CHECK=${1:?usage: $0 check_rpath.sh CC}
CC=${2:?usage: $0 check_rpath.sh CC}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-rpath-neg.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

b=$TMP/build
mkdir -p "$b/bin" "$b/node_modules/x"
printf 'int main(void) { return 0; }\n' >"$TMP/m.c"
# shellcheck disable=SC2016 # a literal $ORIGIN
"$CC" -o "$b/bin/good" "$TMP/m.c" -Wl,-rpath,'$ORIGIN/../lib' || fail "cc good"
"$CC" -o "$b/bin/rel" "$TMP/m.c" -Wl,-rpath,lib/weir || fail "cc rel"
"$CC" -o "$b/bin/empty" "$TMP/m.c" -Wl,-rpath,/usr/lib: || fail "cc empty"
"$CC" -o "$b/node_modules/x/other" "$TMP/m.c" -Wl,-rpath,other/lib || fail "cc other"
printf '%s\n' "$b/bin/good" "$b/bin/rel" "$b/bin/empty" "$b/bin/not-built" >"$b/built-binaries.txt"

sh "$CHECK" "$b" >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "exit $rc, want 1: $(cat "$TMP/out")"
grep -q "^$b/bin/rel: RUNPATH entry 'lib/weir' is relative" "$TMP/out" ||
    grep -q "^$b/bin/rel: RPATH entry 'lib/weir' is relative" "$TMP/out" ||
    fail "the relative entry is not reported: $(cat "$TMP/out")"
grep -q "^$b/bin/empty: [A-Z]* entry '' is empty" "$TMP/out" ||
    fail "the empty entry is not reported: $(cat "$TMP/out")"
grep -q 'bin/good\|not-built\|node_modules' "$TMP/out" && fail "reported more: $(cat "$TMP/out")"
grep -q '^check_rpath: 3 built binaries' "$TMP/out" || fail "count: $(cat "$TMP/out")"

# all good: exit 0
printf '%s\n' "$b/bin/good" >"$b/built-binaries.txt"
sh "$CHECK" "$b" >"$TMP/out" 2>&1 || fail "a good tree fails: $(cat "$TMP/out")"

[ $FAILURES -eq 0 ] && echo "check_rpath_negative: ok"
exit $FAILURES
