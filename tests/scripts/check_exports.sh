#!/bin/sh
# check_exports.sh LIBWEIR PLUGIN_DIR
#
# libweir may export only weir_* symbols; every weir-*.so in PLUGIN_DIR may
# export only weir_plugin_describe, and none may import __tls_get_addr
# (dynamic TLS: a plugin's thread-locals are initial-exec, see
# docs/plugins.md, rule 10).  Linker-provided symbols (_init, _fini, _edata,
# _end, __bss_start ...) are ignored.  Prints each offender and exits 1 if
# there is any.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 LIBWEIR PLUGIN_DIR" >&2
    exit 2
fi
lib=$1
dir=$2
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
[ $status -eq 0 ] && echo "exports ok: $lib ($count weir_* symbols), $nplugins plugins in $dir"
exit $status
