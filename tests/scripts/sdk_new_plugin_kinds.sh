#!/bin/sh
# sdk_new_plugin_kinds.sh BUILD_DIR [SANITIZE]
#
# `weir new-plugin --kind compaction|retry|guard` (issue #36) writes a
# working skeleton of each kind: installed into a temp prefix, the weir
# there writes each kind into a temp dir, the project builds against the
# prefix (find_package(weir)) and its own test-kit test passes.  An unknown
# kind is refused (exit 2) without writing anything; without --kind the
# template's plugin is written as before (sdk_new_plugin, sdk_install).
# SANITIZE is the build's WEIR_SANITIZE (the projects build with it).
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [SANITIZE]" >&2
    exit 2
fi
build=$1
san=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weir-kinds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() {
    echo "sdk_new_plugin_kinds: FAIL: $*" >&2
    exit 1
}
run_logged() { # run_logged LOG CMD...: output in $tmp/LOG.log, shown if it fails
    log=$1
    shift
    if ! "$@" >"$tmp/$log.log" 2>&1; then
        cat "$tmp/$log.log" >&2
        fail "$log: $*"
    fi
}

run_logged install cmake --install "$build" --prefix "$tmp/prefix"
prefix=$tmp/prefix
weir=$prefix/bin/weir

set -- -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug
if [ -n "$san" ]; then
    sf="-fsanitize=$(echo "$san" | tr ';' ',') -fno-omit-frame-pointer"
    set -- "$@" -DWEIR_SANITIZE="$san" -DCMAKE_C_FLAGS="$sf" \
        -DCMAKE_EXE_LINKER_FLAGS="$sf" -DCMAKE_MODULE_LINKER_FLAGS="$sf"
fi

for kind in compaction retry guard; do
    name=my-$kind
    out=$(cd "$tmp" && env -i "$weir" new-plugin --kind "$kind" "$name" 2>&1) ||
        fail "weir new-plugin --kind $kind: $out"
    case $out in
    *"wrote $name: plugin '$name' (weir-$name.so, a $kind)"*) ;;
    *) fail "--kind $kind: unexpected output: $out" ;;
    esac
    ident=my_$kind
    for f in CMakeLists.txt README.md "$ident.c" "test_$ident.c"; do
        [ -f "$tmp/$name/$f" ] || fail "--kind $kind: missing $f"
    done
    ! grep -rqi myplugin "$tmp/$name" || fail "--kind $kind: the template's name is left"
    grep -q "\.name = \"$name\"" "$tmp/$name/$ident.c" || fail "--kind $kind: descriptor name"
    grep -q "weir-$name.so, $kind\|($kind)" "$tmp/$name/README.md" || fail "--kind $kind: README"
    # strict C17 and picky warnings: an author's -Werror build takes it
    cflags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags weir cmocka)
    for f in "$ident.c" "test_$ident.c"; do
        # shellcheck disable=SC2086
        run_logged "$kind-strict" cc -std=c17 -Wall -Wextra -Wpedantic -Wshadow -Wconversion \
            -Werror -fsyntax-only $cflags "$tmp/$name/$f"
    done
    run_logged "$kind-configure" cmake -S "$tmp/$name" -B "$tmp/$name/build" "$@"
    run_logged "$kind-build" cmake --build "$tmp/$name/build" -j2
    run_logged "$kind-test" ctest --test-dir "$tmp/$name/build" --output-on-failure
    grep -q "100% tests passed, 0 tests failed out of 1" "$tmp/$kind-test.log" ||
        fail "--kind $kind: its test did not run: $(cat "$tmp/$kind-test.log")"
    out=$(env -i "$weir" plugins "$tmp/$name/build") || fail "weir plugins ($kind)"
    case $out in
    "$name"*) ;;
    *) fail "--kind $kind: the plugin does not load: $out" ;;
    esac
    echo "sdk_new_plugin_kinds: --kind $kind builds against the prefix and its test passes"
done

# the default stays the template's plugin
(cd "$tmp" && env -i "$weir" new-plugin plain >/dev/null 2>&1) || fail "new-plugin without --kind"
grep -q "max_tokens_cap" "$tmp/plain/plain.c" || fail "without --kind: not the template's plugin"

# refusals: nothing written
rc=0
(cd "$tmp" && env -i "$weir" new-plugin --kind nope x >/dev/null 2>"$tmp/err") || rc=$?
[ $rc -eq 2 ] && grep -q "unknown kind 'nope'" "$tmp/err" && [ ! -e "$tmp/x" ] ||
    fail "an unknown kind: exit $rc: $(cat "$tmp/err")"
rc=0
(cd "$tmp" && env -i "$weir" new-plugin --kind >/dev/null 2>&1) || rc=$?
[ $rc -eq 2 ] || fail "--kind without a value: exit $rc"
env -i "$weir" new-plugin --help | grep -q "compaction  stubs old tool results" ||
    fail "new-plugin --help does not list the kinds"
echo "sdk_new_plugin_kinds: ok"
