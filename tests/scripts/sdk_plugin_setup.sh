#!/bin/sh
# sdk_plugin_setup.sh WEIR FIXTURE_DIR CC CFLAGS...
#
# A plugin that skips a line of its set-up gets a message, never a signal
# (issue #14 item 9):
#  1. without WEIR_PLUGIN_INIT_API(api) (fx-no-init-api): WEIR_PLUGIN_DEFINE
#     sets the table before init, so `weir hooks` loads it and lists its
#     listener (it used to die of SIGSEGV, exit 139);
#  2. without WEIR_PLUGIN_DEFINE (tests/sdk/no_define_plugin.c): the link
#     fails, and the linker's message names WEIR_PLUGIN_DEFINE.
# CFLAGS are the compiler flags that find weir/plugin.h and jansson.h.
set -u
if [ $# -lt 3 ]; then
    echo "usage: $0 WEIR FIXTURE_DIR CC [CFLAGS...]" >&2
    exit 2
fi
weir=$1
fixtures=$2
cc=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/weir-setup.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() {
    echo "sdk_plugin_setup: FAIL: $*" >&2
    exit 1
}

# 1. no WEIR_PLUGIN_INIT_API
printf '{"plugins": [{"id": "noapi", "plugin": "%s/weir-fx-no-init-api.so"}],\n "session": {"dir": "%s/sessions"}}\n' \
    "$fixtures" "$tmp" >"$tmp/deploy.json"
"$weir" hooks -c "$tmp/deploy.json" >"$tmp/hooks.out" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "weir hooks exited $rc (>128: a signal): $(cat "$tmp/hooks.out")"
grep -q "agent/pre-step (waterfall)" "$tmp/hooks.out" && grep -q "1\. noapi" "$tmp/hooks.out" ||
    fail "weir hooks does not list the listener: $(cat "$tmp/hooks.out")"
echo "sdk_plugin_setup: a plugin without WEIR_PLUGIN_INIT_API loads and registers"

# 2. no WEIR_PLUGIN_DEFINE
if "$cc" -std=c17 -shared -fPIC -fvisibility=hidden "$@" -o "$tmp/weir-no-define.so" \
    "$here/../sdk/no_define_plugin.c" -Wl,-z,defs >"$tmp/cc.out" 2>&1; then
    fail "a plugin without WEIR_PLUGIN_DEFINE linked"
fi
grep -q "WEIR_PLUGIN_DEFINE" "$tmp/cc.out" ||
    fail "the link error does not name WEIR_PLUGIN_DEFINE: $(cat "$tmp/cc.out")"
echo "sdk_plugin_setup: without WEIR_PLUGIN_DEFINE the link fails naming the macro"
echo "sdk_plugin_setup: ok"
