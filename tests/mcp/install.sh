#!/bin/sh
# tests/mcp/install.sh SRC_DIR DEST_DIR - install the MCP reference servers
# the tools-mcp tests run (tests/mcp/package.json, pinned by the committed
# package-lock.json) into DEST_DIR (in the build tree, never the source
# tree) with `npm ci`.  A DEST_DIR whose lockfile matches is left as it is.
# Node and npm are required: without them this fails (the tests need them;
# cmake/install-deps.sh installs them).
SRC=${1:?usage: $0 SRC_DIR DEST_DIR}
DEST=${2:?usage: $0 SRC_DIR DEST_DIR}
for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "mcp servers: $tool not found (make deps installs nodejs and npm)" >&2
        exit 1
    }
done
mkdir -p "$DEST" || exit 1
if [ -f "$DEST/.installed-lock" ] && cmp -s "$SRC/package-lock.json" "$DEST/.installed-lock" &&
    [ -f "$DEST/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ] &&
    [ -f "$DEST/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ]; then
    echo "mcp servers: already installed in $DEST"
    exit 0
fi
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/" || exit 1
cd "$DEST" || exit 1
rm -f .installed-lock
# a bounded install: npm retries on its own; 10 minutes at most
if ! timeout 600 npm ci --no-audit --no-fund --ignore-scripts --loglevel=error; then
    echo "mcp servers: npm ci failed in $DEST" >&2
    exit 1
fi
cp package-lock.json .installed-lock
echo "mcp servers: installed in $DEST ($(node --version))"
