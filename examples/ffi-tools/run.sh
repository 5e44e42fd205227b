#!/bin/sh
# Run the ffi-tools example against a build tree:  examples/ffi-tools/run.sh [BUILD_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
export WEIR_EXAMPLE_DIR="$here"
export WEIR_EXAMPLE_LIB_DIR="$build/lib"
export WEIR_PLUGIN_PATH="$build/lib/weir/plugins"
export WEIR_SESSION_DIR="${WEIR_SESSION_DIR:-$(mktemp -d)}"
exec "$build/bin/weir" run -c "$here/deployment.json" --json \
    "What are 2^10, hypot(3, 4) and cbrt(27)? Shout hello, divide 17 by 5, and list the first 8 primes."
