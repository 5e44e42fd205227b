#!/bin/sh
# check_rpath.sh BUILD_DIR [--install]
#
# No built binary searches the current directory, or any place named
# relative to it, for its libraries (issue #8, item 3).  Every binary the
# build makes (bin/, lib/, lib/weir/plugins/, the test fixtures and tool
# libraries, the examples) may carry only RPATH/RUNPATH entries that are
# absolute or start with $ORIGIN.  An empty entry (`a::b`, a leading or
# trailing `:`) means the current directory to ld.so, and a relative one is
# resolved against it.
#
# The binaries are the ones the build names, never a walk of the tree (the
# MCP servers' node_modules are thousands of files, issue #37 item 1):
# BUILD_DIR/built-binaries.txt, the file of every executable and library
# target (tests/cmake/build.cmake writes it at generate time); a listed file
# the build has not made (a target outside `all`) is passed over.
#
# With --install, BUILD_DIR is also installed (`cmake --install`) into a
# temporary prefix, and the files it installed (its install_manifest.txt)
# may in addition not name the build tree or the prefix: the installed tree
# is relocatable and finds its own libraries through $ORIGIN (an absolute
# directory outside both, where a plugin's third-party library lives, is
# fine).
#
# Prints each offender as `FILE: KIND entry 'ENTRY' ...` and exits 1 if
# there is any.
set -u
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 BUILD_DIR [--install]" >&2
    exit 2
fi
build=$1
install=${2:-}
if [ ! -d "$build/bin" ]; then
    echo "check_rpath: $build/bin: no such directory (build first)" >&2
    exit 2
fi
if [ ! -f "$build/built-binaries.txt" ]; then
    echo "check_rpath: $build/built-binaries.txt: no such file (configure with CMake first)" >&2
    exit 2
fi
build_abs=$(cd "$build" && pwd)
build_real=$(cd "$build" && pwd -P)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weir-rpath.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0

# is_elf FILE: FILE starts with the ELF magic.
is_elf() {
    [ "$(od -An -c -N4 "$1" 2>/dev/null | tr -d ' ')" = '177ELF' ]
}

# check_files LIST DIR MODE: the files named in LIST (one a line; those
# that are not there or not ELF are passed over).  MODE is build (absolute or
# $ORIGIN) or install (the same, but not inside the build tree or DIR).
# Counts files in $nfiles, sets status=1 on an offender.
check_files() {
    list=$1
    dir=$2
    mode=$3
    while IFS= read -r f || [ -n "$f" ]; do # the last line may have no newline
        [ -f "$f" ] && [ ! -L "$f" ] && is_elf "$f" || continue # a link: its target is listed
        nfiles=$((nfiles + 1))
        # "  0x... (RUNPATH)  Library runpath: [a:b]" -> "RUNPATH a:b"
        readelf -d "$f" 2>/dev/null |
            sed -n 's/.*(\(RPATH\|RUNPATH\)).*: \[\(.*\)\]$/\1 \2/p' >"$tmp/paths"
        while read -r kind value; do
            # Split on ':' keeping empty fields: a trailing ':' is one.
            echo "$value" | awk -F: '{ for (i = 1; i <= NF; i++) print $i }' >"$tmp/entries"
            while IFS= read -r e; do
                # shellcheck disable=SC2016 # a literal $ORIGIN
                case $e in
                '$ORIGIN' | '$ORIGIN/'* | '${ORIGIN}' | '${ORIGIN}/'*) continue ;;
                esac
                case $mode:$e in
                install:"$build_abs" | install:"$build_abs"/* | \
                    install:"$build_real" | install:"$build_real"/*)
                    why="the build tree, in the installed tree" ;;
                install:"$dir" | install:"$dir"/*)
                    why="the install prefix (not relocatable)" ;;
                *:/*) continue ;;
                *:) why="empty (the current directory)" ;;
                *) why="relative (to the current directory)" ;;
                esac
                echo "$f: $kind entry '$e' is $why; $kind is [$value]"
                status=1
            done <"$tmp/entries"
        done <"$tmp/paths"
    done <"$list"
}

nfiles=0
check_files "$build/built-binaries.txt" "$build" build
if [ "$nfiles" -eq 0 ]; then
    echo "check_rpath: none of the binaries $build/built-binaries.txt names is built (build first)"
    exit 1
fi
echo "check_rpath: $nfiles built binaries ($build/built-binaries.txt)"

if [ "$install" = --install ]; then
    # the manifest goes to the current directory's install_manifest.txt
    # (the build tree's, when run there): run in $tmp, keep it there
    if ! (cd "$tmp" && cmake --install "$build_abs" --prefix "$tmp/prefix") >"$tmp/install.log" 2>&1; then
        cat "$tmp/install.log"
        echo "check_rpath: cmake --install $build failed"
        exit 1
    fi
    manifest=$tmp/install_manifest.txt
    [ -f "$manifest" ] || manifest=$build/install_manifest.txt
    if [ ! -f "$manifest" ]; then
        echo "check_rpath: cmake --install wrote no install_manifest.txt"
        exit 1
    fi
    nbuild=$nfiles
    nfiles=0
    check_files "$manifest" "$tmp/prefix" install
    echo "check_rpath: $nfiles ELF files in the installed tree"
    if [ "$nfiles" -eq 0 ]; then
        echo "check_rpath: the installed tree has no ELF file"
        status=1
    fi
    nfiles=$nbuild
elif [ -n "$install" ]; then
    echo "usage: $0 BUILD_DIR [--install]" >&2
    exit 2
fi
[ $status -eq 0 ] && echo "check_rpath: ok"
exit $status
