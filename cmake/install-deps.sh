#!/bin/sh
# Install the build dependencies that are missing (Debian 12), Node
# (nodejs, npm) for the tools-mcp tests, and PostgreSQL (libpq-dev for
# store-postgres, the postgresql server for its tests: tests/pg/server.sh).
# Uses apt-get when root, sudo -n when available; otherwise prints the one
# line to run.
PKGS="build-essential cmake pkg-config libjansson-dev libffi-dev libcurl4-openssl-dev libcmocka-dev jq libpq-dev postgresql"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node for the tools-mcp tests (they run the MCP reference servers, installed
# with npm ci into the build tree): Debian's nodejs and npm, unless a node and
# an npm are already on PATH (from any source: they are kept).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  for p in nodejs npm; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
fi
[ -z "$missing" ] && exit 0
echo "weir: installing missing build dependencies:$missing"
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "weir: cannot install packages (not root, no sudo). Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq && $SUDO apt-get install -y -qq $missing
