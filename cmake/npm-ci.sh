#!/bin/sh
# cmake/npm-ci.sh SRC_DIR DEST_DIR FILE... - install the npm packages
# SRC_DIR/package.json names, pinned by its committed package-lock.json, into
# DEST_DIR (in a build tree, never the source tree) with `npm ci`.  Each
# FILE (a path under DEST_DIR) must exist afterwards; a DEST_DIR whose
# lockfile matches and whose FILEs exist is left as it is.  Used for the MCP
# reference servers of the tools-mcp tests (tests/mcp) and the peers of the
# peer benchmark (bench/peers).  Node and npm are required: without them
# this fails (cmake/install-deps.sh installs them).
SRC=${1:?usage: $0 SRC_DIR DEST_DIR FILE...}
DEST=${2:?usage: $0 SRC_DIR DEST_DIR FILE...}
shift 2
[ $# -gt 0 ] || { echo "usage: $0 SRC_DIR DEST_DIR FILE..." >&2; exit 2; }
what=$(basename "$SRC")
for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "npm-ci ($what): $tool not found (make deps installs nodejs and npm)" >&2
        exit 1
    }
done
# all_there: every FILE exists under DEST
all_there() {
    for f in "$@"; do
        [ -f "$DEST/$f" ] || return 1
    done
}
mkdir -p "$DEST" && DEST=$(cd "$DEST" && pwd) || exit 1
if [ -f "$DEST/.installed-lock" ] && cmp -s "$SRC/package-lock.json" "$DEST/.installed-lock" &&
    all_there "$@"; then
    echo "npm-ci ($what): already installed in $DEST"
    exit 0
fi
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/" || exit 1
cd "$DEST" || exit 1
rm -f .installed-lock
# a bounded install: npm retries on its own; 10 minutes at most
if ! timeout 600 npm ci --no-audit --no-fund --ignore-scripts --loglevel=error; then
    echo "npm-ci ($what): npm ci failed in $DEST" >&2
    exit 1
fi
all_there "$@" || { echo "npm-ci ($what): npm ci left out one of: $*" >&2; exit 1; }
cp package-lock.json .installed-lock
echo "npm-ci ($what): installed in $DEST ($(node --version))"
