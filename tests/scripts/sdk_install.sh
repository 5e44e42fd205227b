#!/bin/sh
# sdk_install.sh BUILD_DIR SOURCE_DIR [SANITIZE]
#
# The installed tree is relocatable and is a usable SDK (docs/sdk.md):
#  1. `cmake --install BUILD_DIR` into a temp prefix, then move the prefix
#     elsewhere: nothing may depend on where it was installed.
#  2. The layout: bin/weir, lib/libweir.so*, lib/libweir-testkit.so*,
#     lib/weir/plugins/weir-*.so, include/weir/*.h (+ version.h, testkit.h),
#     lib/pkgconfig/{weir,weir-testkit}.pc,
#     lib/cmake/weir/{weirConfig,weirConfigVersion,weirTargets,WeirPlugin}.cmake;
#     the installed libweir exports no weir_tk_* (the test kit is
#     libweir-testkit's, issue #33).
#  3. `weir version` and `weir plugins` run with an empty environment and
#     find libweir and the installed plugins.
#  4. pkg-config resolves --cflags, --libs and pluginsdir inside the prefix,
#     and those flags build a plugin that `weir plugins DIR` loads;
#     weir-testkit's --libs name libweir-testkit (and libweir) there.
#  5. sdk/template, examples/hook-plugin and the three policy examples
#     (examples/pii-guard, ratelimit-retry, window-compaction: issue #36)
#     configure against the prefix (CMAKE_PREFIX_PATH), build, and their
#     test-kit tests pass: they link the installed weir::testkit
#     (libweir-testkit).
#  6. issue #14, the first hour of a plugin author and an embedder:
#     a. libweir's soname is libweir.so.<abi_major>;
#     b. a two-line program built with `pkg-config --cflags --libs weir`
#        runs with no LD_LIBRARY_PATH (an empty environment);
#     c. the public headers compile and link in every order
#        (tests/sdk/header_order_*.c), macros and all, with
#        `pkg-config --cflags --libs weir-testkit`;
#     d. a plugin without WEIR_PLUGIN_INIT_API loads (no signal) and one
#        without WEIR_PLUGIN_DEFINE fails its link naming the macro;
#     e. `weir new-plugin` writes a plugin that builds out of the tree
#        against the prefix, and its test passes;
#     f. a test-kit test runs one scripted turn (weir_tk_run_turn) with
#        the installed provider-scripted.
# SANITIZE is the build's WEIR_SANITIZE: out-of-tree builds then use the
# same -fsanitize flags (libweir carries the sanitizer runtime's symbols).
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 BUILD_DIR SOURCE_DIR [SANITIZE]" >&2
    exit 2
fi
build=$1
src=$2
san=${3:-}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weir-sdk.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() {
    echo "sdk_install: FAIL: $*" >&2
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

# 1. install, then move
run_logged install cmake --install "$build" --prefix "$tmp/first"
mv "$tmp/first" "$tmp/moved"
prefix=$tmp/moved
echo "sdk_install: installed and moved to $prefix"

# 2. layout
for f in bin/weir lib/libweir.so lib/libweir-testkit.so include/weir/plugin.h \
    include/weir/host.h include/weir/testkit.h include/weir/version.h \
    lib/pkgconfig/weir.pc lib/pkgconfig/weir-testkit.pc \
    lib/cmake/weir/weirConfig.cmake lib/cmake/weir/weirConfigVersion.cmake \
    lib/cmake/weir/weirTargets.cmake lib/cmake/weir/WeirPlugin.cmake; do
    [ -e "$prefix/$f" ] || fail "missing $f"
done
ls "$prefix"/lib/libweir.so.* >/dev/null 2>&1 || fail "missing lib/libweir.so.<version>"
ls "$prefix"/lib/libweir-testkit.so.* >/dev/null 2>&1 ||
    fail "missing lib/libweir-testkit.so.<version>"
if nm -D --defined-only "$prefix/lib/libweir.so" | grep -q ' weir_tk_'; then
    fail "the installed libweir exports weir_tk_*: $(nm -D --defined-only "$prefix/lib/libweir.so" | grep ' weir_tk_')"
fi
nm -D --defined-only "$prefix/lib/libweir-testkit.so" | grep -q ' T weir_tk_run_turn$' ||
    fail "the installed libweir-testkit does not export weir_tk_run_turn"
ls "$prefix"/lib/weir/plugins/weir-*.so >/dev/null 2>&1 || fail "no lib/weir/plugins/weir-*.so"
[ ! -e "$prefix/lib/weir/plugins/weir-example-guard.so" ] || fail "an example plugin was installed"
if grep -rl "$tmp/first" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
    fail "the files above name the install prefix: not relocatable"
fi

# 3. the installed CLI with an empty environment
out=$(env -i "$prefix/bin/weir" version) || fail "weir version failed"
case $out in
weir\ *) ;;
*) fail "weir version printed: $out" ;;
esac
out=$(env -i "$prefix/bin/weir" plugins) || fail "weir plugins failed"
case $out in
*"$prefix/lib/weir/plugins/weir-"*.so*) ;;
*) fail "weir plugins does not list $prefix/lib/weir/plugins: $out" ;;
esac
echo "sdk_install: installed weir runs with no environment"

# 4. pkg-config
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
real_prefix=$(cd "$prefix" && pwd -P)
inside() { # inside PATH: PATH resolves inside the prefix
    r=$(cd "$1" 2>/dev/null && pwd -P) || fail "pkg-config path $1 does not exist"
    case $r in
    "$real_prefix"/*) ;;
    *) fail "pkg-config path $1 resolves outside the prefix ($r)" ;;
    esac
}
flags=$(pkg-config --cflags --libs weir) || fail "pkg-config --cflags --libs weir"
found_i=0
found_l=0
for f in $flags; do
    case $f in
    -I*) inside "${f#-I}" && [ -f "${f#-I}/weir/plugin.h" ] && found_i=1 ;;
    -L*) inside "${f#-L}" && [ -f "${f#-L}/libweir.so" ] && found_l=1 ;;
    esac
done
[ $found_i = 1 ] || fail "--cflags has no -I with weir/plugin.h: $flags"
[ $found_l = 1 ] || fail "--libs has no -L with libweir.so: $flags"
case " $flags " in *" -lweir "*) ;; *) fail "--libs lacks -lweir: $flags" ;; esac
kflags=$(pkg-config --libs weir-testkit) || fail "pkg-config --libs weir-testkit"
found_l=0
for f in $kflags; do
    case $f in
    -L*) inside "${f#-L}" && [ -f "${f#-L}/libweir-testkit.so" ] && found_l=1 ;;
    esac
done
[ $found_l = 1 ] || fail "weir-testkit's --libs has no -L with libweir-testkit.so: $kflags"
case " $kflags " in *" -lweir-testkit "*" -lweir "*) ;;
*) fail "weir-testkit's --libs lacks -lweir-testkit then -lweir: $kflags" ;; esac
pdir=$(pkg-config --variable=pluginsdir weir)
inside "$pdir"
[ "$(cd "$pdir" && pwd -P)" = "$real_prefix/lib/weir/plugins" ] ||
    fail "pluginsdir is $pdir"
mkdir "$tmp/pc"
cc_flags="-std=c17 -shared -fPIC -fvisibility=hidden"
[ -z "$san" ] || cc_flags="$cc_flags -fsanitize=$(echo "$san" | tr ';' ',')"
# shellcheck disable=SC2046,SC2086
run_logged pc-plugin ${CC:-cc} $cc_flags $(pkg-config --cflags weir) \
    -o "$tmp/pc/weir-example-guard.so" "$src/examples/hook-plugin/guard.c" \
    $(pkg-config --libs jansson)
out=$(env -i "$prefix/bin/weir" plugins "$tmp/pc") || fail "weir plugins $tmp/pc"
case $out in
example-guard*) ;;
*) fail "a plugin built with pkg-config flags does not load: $out" ;;
esac
echo "sdk_install: pkg-config resolves inside the prefix and builds a plugin"

# 5. the template, out of tree, with find_package(weir)
set -- -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug
if [ -n "$san" ]; then
    sf="-fsanitize=$(echo "$san" | tr ';' ',') -fno-omit-frame-pointer"
    set -- "$@" -DWEIR_SANITIZE="$san" -DCMAKE_C_FLAGS="$sf" \
        -DCMAKE_EXE_LINKER_FLAGS="$sf" -DCMAKE_MODULE_LINKER_FLAGS="$sf"
fi
examples="examples/hook-plugin examples/pii-guard examples/ratelimit-retry examples/window-compaction"
for project in sdk/template $examples; do
    name=$(basename "$project")
    run_logged "$name-configure" cmake -S "$src/$project" -B "$tmp/$name" "$@"
    run_logged "$name-build" cmake --build "$tmp/$name" -j2
    run_logged "$name-test" ctest --test-dir "$tmp/$name" --output-on-failure
    grep -q "100% tests passed, 0 tests failed out of 1" "$tmp/$name-test.log" ||
        fail "$project: its test did not run: $(cat "$tmp/$name-test.log")"
    echo "sdk_install: $project builds against the prefix and its test passes"
done
[ -f "$tmp/template/weir-myplugin.so" ] || fail "the template did not build weir-myplugin.so"
for t in template/test_myplugin hook-plugin/test_example_guard pii-guard/test_pii_guard \
    ratelimit-retry/test_ratelimit_retry window-compaction/test_window_compaction; do
    readelf -d "$tmp/$t" | grep -q 'NEEDED.*\[libweir-testkit\.so\.' ||
        fail "$t does not link libweir-testkit: $(readelf -d "$tmp/$t" | grep NEEDED)"
done
echo "sdk_install: their tests link the installed weir::testkit (libweir-testkit)"

# 6a. the soname carries the ABI major
abi_major=$(pkg-config --variable=abi_major weir)
soname=$(readelf -d "$prefix/lib/libweir.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libweir.so.$abi_major" ] || fail "soname is '$soname', not libweir.so.$abi_major"
[ -e "$prefix/lib/libweir.so.$abi_major" ] || fail "no lib/libweir.so.$abi_major"
echo "sdk_install: soname $soname"

# 6b. pkg-config: an embedder's program runs without LD_LIBRARY_PATH
san_flags=
[ -z "$san" ] || san_flags="-fsanitize=$(echo "$san" | tr ';' ',')"
mkdir "$tmp/hello"
printf '#include <weir/weir.h>\nint main(void) { return puts(weir_strerror(WEIR_OK)) < 0; }\n' \
    >"$tmp/hello/hello.c"
# shellcheck disable=SC2046,SC2086
run_logged hello-build ${CC:-cc} -std=c17 $san_flags $(pkg-config --cflags weir) \
    -o "$tmp/hello/hello" "$tmp/hello/hello.c" $(pkg-config --libs weir)
out=$(env -i "$tmp/hello/hello" 2>&1) || fail "the pkg-config program does not start: $out"
[ "$out" = "success" ] || fail "the pkg-config program printed: $out"
echo "sdk_install: a program built with pkg-config --cflags --libs weir runs with no environment"

# 6c. the headers in every order
# shellcheck disable=SC2046,SC2086
run_logged headers-build ${CC:-cc} -std=c17 -Wall -Werror $san_flags -I"$src/tests/sdk" \
    $(pkg-config --cflags weir-testkit) -o "$tmp/hello/header_order" \
    "$src/tests/sdk/header_order_a.c" "$src/tests/sdk/header_order_b.c" \
    "$src/tests/sdk/header_order_c.c" $(pkg-config --libs weir-testkit)
run_logged headers-run env -i "$tmp/hello/header_order"
echo "sdk_install: testkit.h, host.h, weir.h and plugin.h compile and link in any order (weir-testkit.pc)"

# 6d. a plugin that skips a line of its set-up gets a message, not a signal
mkdir "$tmp/setup"
# shellcheck disable=SC2046,SC2086
run_logged noapi-build ${CC:-cc} $cc_flags -DFX_NAME='"fx-no-init-api"' -I"$src/tests/plugins" \
    $(pkg-config --cflags weir) -o "$tmp/setup/weir-fx-no-init-api.so" \
    "$src/tests/plugins/fx_no_init_api.c" $(pkg-config --libs jansson)
printf '{"plugins": [{"id": "noapi", "plugin": "fx-no-init-api", "config": {}}],\n "plugin_path": ["%s"], "session": {"dir": "%s/sessions"}}\n' \
    "$tmp/setup" "$tmp/setup" >"$tmp/setup/deploy.json"
rc=0
env -i "$prefix/bin/weir" hooks -c "$tmp/setup/deploy.json" >"$tmp/setup/hooks.out" 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "weir hooks with a plugin without WEIR_PLUGIN_INIT_API exited $rc: $(cat "$tmp/setup/hooks.out")"
grep -q "1\. noapi" "$tmp/setup/hooks.out" || fail "its listener is not listed: $(cat "$tmp/setup/hooks.out")"
# shellcheck disable=SC2046,SC2086
if ${CC:-cc} $cc_flags $(pkg-config --cflags weir) -o "$tmp/setup/weir-no-define.so" \
    "$src/tests/sdk/no_define_plugin.c" >"$tmp/setup/cc.out" 2>&1; then
    fail "a plugin without WEIR_PLUGIN_DEFINE linked"
fi
grep -q WEIR_PLUGIN_DEFINE "$tmp/setup/cc.out" ||
    fail "the link error does not name WEIR_PLUGIN_DEFINE: $(cat "$tmp/setup/cc.out")"
echo "sdk_install: no WEIR_PLUGIN_INIT_API loads; no WEIR_PLUGIN_DEFINE fails its link naming it"

# 6e. weir new-plugin, built and tested out of the tree against the prefix
for f in share/weir/template/myplugin.c share/weir/examples/hook-plugin/guard.c \
    share/weir/examples/pii-guard/pii_guard.c share/weir/examples/ratelimit-retry/ratelimit_retry.c \
    share/weir/examples/window-compaction/window_compaction.c \
    share/doc/weir/sdk.md share/doc/weir/testing.md share/doc/weir/events.md; do
    [ -f "$prefix/$f" ] || fail "missing $f"
done
out=$(cd "$tmp" && env -i "$prefix/bin/weir" new-plugin rate-cap np 2>&1) ||
    fail "weir new-plugin: $out"
case $out in
*"-DCMAKE_PREFIX_PATH=$real_prefix"*) ;;
*) fail "weir new-plugin does not name the prefix: $out" ;;
esac
run_logged np-configure cmake -S "$tmp/np" -B "$tmp/np/build" "$@"
run_logged np-build cmake --build "$tmp/np/build" -j2
run_logged np-test ctest --test-dir "$tmp/np/build" --output-on-failure
grep -q "100% tests passed, 0 tests failed out of 1" "$tmp/np-test.log" ||
    fail "the new plugin's test did not run: $(cat "$tmp/np-test.log")"
[ -f "$tmp/np/build/weir-rate-cap.so" ] || fail "weir new-plugin's project built no weir-rate-cap.so"
out=$(env -i "$prefix/bin/weir" plugins "$tmp/np/build") || fail "weir plugins $tmp/np/build"
case $out in
rate-cap*) ;;
*) fail "the new plugin does not load: $out" ;;
esac
echo "sdk_install: weir new-plugin writes a plugin that builds against the prefix and passes its test"

# 6f. a scripted turn with the test kit: the new project's test runs one
# (weir_tk_run_turn) with the installed provider-scripted, with no environment
out=$(env -i "$tmp/np/build/test_rate_cap" "$tmp/np/build/weir-rate-cap.so" 2>&1) ||
    fail "test_rate_cap: $out"
case $out in
*"[       OK ] caps_the_request_of_a_scripted_turn"*) ;;
*) fail "the scripted turn did not run: $out" ;;
esac
echo "sdk_install: the test kit runs a scripted turn with the installed provider-scripted"
echo "sdk_install: ok"
