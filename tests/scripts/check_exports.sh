#!/bin/sh
# check_exports.sh LIBWEIR PLUGIN_DIR [TESTKIT]
#
# libweir may export only weir_* symbols, and no weir_tk_* (the test kit is
# its own library, issue #33).  TESTKIT (libweir-testkit.so), when given,
# must export exactly the functions weir/testkit.h declares: none of the
# libweir core linked into it.  Every weir-*.so in PLUGIN_DIR may
# export only weir_plugin_describe, and none may import __tls_get_addr
# (dynamic TLS: a plugin's thread-locals are initial-exec, see
# docs/plugins.md, rule 10).  Linker-provided symbols (_init, _fini, _edata,
# _end, __bss_start ...) are ignored.  Prints each offender and exits 1 if
# there is any.
set -u
if [ $# -ne 2 ] && [ $# -ne 3 ]; then
    echo "usage: $0 LIBWEIR PLUGIN_DIR [TESTKIT]" >&2
    exit 2
fi
lib=$1
dir=$2
kit=${3:-}
status=0

# Defined dynamic symbols of $1, minus the linker's own.
exports() {
    nm -D --defined-only "$1" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' |
        grep -Ev '^(_init|_fini|_edata|_end|__bss_start|__data_start|_IO_stdin_used)$'
}

if [ ! -f "$lib" ]; then
    echo "check_exports: $lib: no such file" >&2
    exit 2
fi
bad=$(exports "$lib" | grep -v '^weir_')
if [ -n "$bad" ]; then
    echo "$lib exports symbols outside weir_*:"
    echo "$bad" | sed 's/^/    /'
    status=1
fi
count=$(exports "$lib" | grep -c '^weir_')
if [ "$count" -eq 0 ]; then
    echo "$lib exports no weir_* symbol"
    status=1
fi
bad=$(exports "$lib" | grep '^weir_tk_')
if [ -n "$bad" ]; then
    echo "$lib exports the test kit (libweir-testkit's):"
    echo "$bad" | sed 's/^/    /'
    status=1
fi

kitcount=0
if [ -n "$kit" ]; then
    if [ ! -f "$kit" ]; then
        echo "check_exports: $kit: no such file" >&2
        exit 2
    fi
    header=$(dirname "$0")/../../include/weir/testkit.h
    want=$(sed -n 's/^WEIR_API .*[ *]\(weir_tk_[a-z_]*\)(.*/\1/p' "$header" | sort)
    got=$(exports "$kit" | sort)
    if [ -z "$want" ] || [ "$got" != "$want" ]; then
        echo "$kit must export exactly the functions of $header:"
        printf '%s\n' "$want" >"${TMPDIR:-/tmp}/weir-exports-want.$$"
        printf '%s\n' "$got" | diff "${TMPDIR:-/tmp}/weir-exports-want.$$" - |
            sed -n 's/^[<>] /    &/p'
        rm -f "${TMPDIR:-/tmp}/weir-exports-want.$$"
        status=1
    fi
    kitcount=$(printf '%s\n' "$got" | grep -c '^weir_tk_')
fi

nplugins=0
for so in "$dir"/weir-*.so; do
    [ -e "$so" ] || continue
    nplugins=$((nplugins + 1))
    syms=$(exports "$so")
    if [ "$syms" != "weir_plugin_describe" ]; then
        echo "$so must export exactly weir_plugin_describe; it exports:"
        echo "$syms" | sed 's/^/    /'
        status=1
    fi
    if nm -D --undefined-only "$so" | grep -q '__tls_get_addr'; then
        echo "$so uses dynamic TLS (__tls_get_addr): declare its thread-locals initial-exec"
        status=1
    fi
done
if [ "$nplugins" -eq 0 ]; then
    echo "no weir-*.so in $dir (build the plugins first)"
    status=1
fi
[ $status -eq 0 ] && echo "exports ok: $lib ($count weir_* symbols, no weir_tk_*)," \
    "${kit:+$kit ($kitcount weir_tk_* symbols), }$nplugins plugins in $dir"
exit $status
