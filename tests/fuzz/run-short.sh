#!/bin/sh
# Run every built fuzz target for SECONDS each (a smoke run, e.g. in CI):
#   tests/fuzz/run-short.sh BUILD_DIR SECONDS
# Targets are <BUILD_DIR>/fuzz/fuzz_*; each starts from a scratch copy of
# tests/fuzz/corpus/<target>/ (the seed corpus is never modified).
# Crash reproducers are kept as <BUILD_DIR>/fuzz/<target>-crash-*.
# The run is a regression gate, so it is reproducible: libFuzzer's seed is
# fixed (WEIR_FUZZ_SEED, default 1) and a slower machine explores a prefix
# of what a faster one does.  Exploration is a campaign, not CI: set
# WEIR_FUZZ_SEED=0 (a random seed) and a long SECONDS, and add what it finds
# to the seed corpus (docs/reliability.md).
# Exit status: 0 when every target ran clean, 1 on the first crash, 2 on usage.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR SECONDS" >&2
    exit 2
fi
build=$1
secs=$2
seed=${WEIR_FUZZ_SEED:-1}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
found=0
for bin in "$build"/fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    found=1
    name=$(basename "$bin")
    mkdir -p "$work/$name"
    if [ -d "$here/corpus/$name" ]; then
        cp "$here/corpus/$name"/* "$work/$name"/ 2>/dev/null || true
    fi
    echo "== $name ($secs s, seed $seed)"
    if ! "$bin" -seed="$seed" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
            -artifact_prefix="$build/fuzz/$name-" "$work/$name"; then
        echo "!! $name failed; reproducer: $build/fuzz/$name-*" >&2
        exit 1
    fi
done
if [ "$found" -eq 0 ]; then
    echo "no fuzz targets in $build/fuzz (configure with CC=clang -DWEIR_BUILD_FUZZ=ON)" >&2
    exit 2
fi
echo "all fuzz targets ran clean"
