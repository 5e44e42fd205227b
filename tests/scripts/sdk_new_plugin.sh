#!/bin/sh
# sdk_new_plugin.sh WEIR CC CFLAGS...
#
# `weir new-plugin NAME [DIR]` (issue #14 item 12) writes the template with
# the name filled in: weir-NAME.so's target and descriptor name, NAME's C
# identifier in file names and code; the plugin source compiles (CFLAGS find
# the weir headers and jansson).  It refuses a bad name and a non-empty DIR
# (exit 2) without writing anything, and `weir --help` lists it.  Building
# and testing the result against an installed prefix is sdk_install's.
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 WEIR CC [CFLAGS...]" >&2
    exit 2
fi
weir=$1
cc=$2
shift 2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weir-newplugin.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() {
    echo "sdk_new_plugin: FAIL: $*" >&2
    exit 1
}

"$weir" --help | grep -q "new-plugin \[--kind K\] NAME \[DIR\]" || fail "weir --help does not list new-plugin"

cd "$tmp" || exit 1
out=$("$weir" new-plugin rate-cap 2>&1) || fail "weir new-plugin rate-cap: $out"
case $out in
*"wrote rate-cap: plugin 'rate-cap' (weir-rate-cap.so)"*) ;;
*) fail "unexpected output: $out" ;;
esac
for f in CMakeLists.txt README.md rate_cap.c test_rate_cap.c; do
    [ -f "rate-cap/$f" ] || fail "missing rate-cap/$f"
done
! grep -rqi myplugin rate-cap || fail "the template's name is left: $(grep -rni myplugin rate-cap)"
grep -q '\.name = "rate-cap"' rate-cap/rate_cap.c || fail "descriptor name"
grep -q 'WEIR_PLUGIN_DEFINE(rate_cap_desc)' rate-cap/rate_cap.c || fail "identifier"
grep -q 'weir_add_plugin(rate-cap SOURCES rate_cap.c)' rate-cap/CMakeLists.txt || fail "target"
grep -q 'option(RATE_CAP_TESTS' rate-cap/CMakeLists.txt || fail "option"
grep -q "plugin 'rate-cap' (row 'cap')" rate-cap/test_rate_cap.c || fail "test message"
"$cc" -std=c17 -Wall -Wextra -Werror -fsyntax-only "$@" rate-cap/rate_cap.c ||
    fail "rate_cap.c does not compile"

# an explicit DIR, existing and empty
mkdir empty
"$weir" new-plugin x1 empty >/dev/null 2>&1 || fail "into an empty directory"
[ -f empty/x1.c ] || fail "empty/x1.c"

# refusals: nothing written
for bad in Bad 1x "a b" "" x/y; do
    rc=0
    "$weir" new-plugin "$bad" "d-$bad" >/dev/null 2>"$tmp/err" || rc=$?
    [ $rc -eq 2 ] || fail "name '$bad': exit $rc, not 2"
    grep -q "is not a plugin name" "$tmp/err" || fail "name '$bad': $(cat "$tmp/err")"
done
rc=0
"$weir" new-plugin again rate-cap >/dev/null 2>"$tmp/err" || rc=$?
[ $rc -eq 2 ] && grep -q "rate-cap exists and is not empty" "$tmp/err" ||
    fail "a non-empty DIR: exit $rc: $(cat "$tmp/err")"
[ ! -e rate-cap/again.c ] || fail "wrote into a non-empty DIR"
rc=0
"$weir" new-plugin >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "no NAME: exit $rc"
rc=0
WEIR_TEMPLATE_DIR=$tmp/none "$weir" new-plugin y >/dev/null 2>"$tmp/err" || rc=$?
[ $rc -eq 4 ] && grep -q "template was not found" "$tmp/err" && [ ! -e y ] ||
    fail "no template: exit $rc: $(cat "$tmp/err")"
echo "sdk_new_plugin: ok"
