#!/bin/sh
# layer_check_negative.sh SOURCE_DIR OBJECT_DIR PROBE_OBJECT CC
#
# layer_check.sh catches what it must, and passes what it must:
#  1. a copy of weir_core's objects (OBJECT_DIR) and of core/ and cli/ with
#     the probe (tests/support/layer_probe.c, compiled: PROBE_OBJECT) added
#     to base/: the check exits 1 and names the probe's call of
#     weir_agent_close (api) and its include of agent.h (api);
#  2. a synthetic clean tree of two floors (base, api; compiled with CC),
#     with downward calls and includes, struct weir_agent in api/, cli/
#     including system, weir/ and its own headers, and an upward include and
#     struct weir_agent inside comments: exit 0;
#  3. the same tree with one violation of each kind: exit 1, each one named;
#  4. an empty object directory, a missing one: exit 2.
set -u
if [ $# -ne 4 ]; then
    echo "usage: $0 SOURCE_DIR OBJECT_DIR PROBE_OBJECT CC" >&2
    exit 2
fi
src=$1
obj=$2
probe=$3
cc=$4
check="$(dirname "$0")/layer_check.sh"
fail=0
bad() {
    echo "layer_check_negative: FAIL: $*" >&2
    fail=1
}
t=$(mktemp -d "${TMPDIR:-/tmp}/layer_negative.XXXXXX") || exit 2
trap 'rm -rf "$t"' EXIT
trap 'exit 2' HUP INT TERM

# run NAME SRC OBJ: the check's exit status in $rc, its output in $t/NAME.out
run() {
    sh "$check" "$2" "$3" >"$t/$1.out" 2>&1
    rc=$?
    sed "s/^/    [$1] /" "$t/$1.out"
}
# want NAME LINE: the output of NAME has LINE, whole
want() {
    grep -qxF -- "$2" "$t/$1.out" || bad "$1: no line: $2"
}

# 1. the real objects and sources, plus the probe on the base floor
[ -f "$probe" ] || { echo "layer_check_negative: $probe: no such file" >&2; exit 2; }
mkdir -p "$t/real/src" "$t/real/obj"
cp -R "$src/core" "$src/cli" "$t/real/src/" || exit 2
for d in "$obj"/*/; do
    f=$(basename "$d")
    set -- "$d"*.o
    [ -e "$1" ] || continue
    mkdir -p "$t/real/obj/$f"
    cp "$@" "$t/real/obj/$f/" || exit 2
done
[ -d "$t/real/obj/base" ] || { echo "layer_check_negative: no base/*.o under $obj" >&2; exit 2; }
cp "$src/tests/support/layer_probe.c" "$t/real/src/core/base/layer_probe.c" || exit 2
cp "$probe" "$t/real/obj/base/layer_probe.c.o" || exit 2
run probe "$t/real/src" "$t/real/obj"
[ "$rc" -eq 1 ] || bad "probe: exit $rc, want 1"
want probe "layer: core/base/layer_probe.c (1 base) calls weir_agent_close, defined in core/api/agent.c (6 api)"
want probe "layer: core/base/layer_probe.c (1 base) includes agent.h (core/api, 6 api)"

# 2. a synthetic clean tree of two floors
s=$t/clean/src
mkdir -p "$s/core/base" "$s/core/api" "$s/cli" "$t/clean/obj/base" "$t/clean/obj/api"
echo 'set(WEIR_FLOORS base api)' >"$s/core/CMakeLists.txt"
cat >"$s/core/base/low.h" <<'EOF'
int low_value(void);
EOF
cat >"$s/core/base/low.c" <<'EOF'
#include "low.h"
/* not an include: #include "high.h"; nor a type: struct weir_agent */
// #include "high.h" struct weir_agent
int low_value(void) { return 1; }
EOF
cat >"$s/core/api/high.h" <<'EOF'
#include "low.h"
struct weir_agent { int n; };
int high_value(struct weir_agent *a);
EOF
cat >"$s/core/api/high.c" <<'EOF'
#include <stdio.h>
#include "high.h"
#if 0 /* not compiled; the check reads it all the same (weir/... is public) */
#include "weir/host.h"
#endif
int high_value(struct weir_agent *a) { return a->n + low_value(); }
EOF
cat >"$s/cli/cli.h" <<'EOF'
#include <weir/host.h>
EOF
cat >"$s/cli/main.c" <<'EOF'
#include <stdio.h>
#include "cli.h"
#include "weir/host.h"
/*
#include "high.h"
struct weir_agent
*/
const char *s = "/* struct weir_agent */";
int main(void) { return 0; }
EOF
for f in base/low api/high; do
    "$cc" -c -I"$s/core/base" -I"$s/core/api" -o "$t/clean/obj/$f.c.o" "$s/core/$f.c" ||
        { echo "layer_check_negative: $cc cannot compile $f.c" >&2; exit 2; }
done
run clean "$s" "$t/clean/obj"
[ "$rc" -eq 0 ] || bad "clean: exit $rc, want 0"
grep -q '^layer_check: ok: 2 floors, 2 objects' "$t/clean.out" || bad "clean: no summary of 2 floors, 2 objects"

# 3. the same tree with one violation of each kind
cp -R "$t/clean" "$t/dirty"
s=$t/dirty/src
cat >"$s/core/base/up.c" <<'EOF'
#include "high.h"
int up_value(void);
int up_value(void) { struct weir_agent a = {0}; return high_value(&a); }
EOF
"$cc" -c -I"$s/core/base" -I"$s/core/api" -o "$t/dirty/obj/base/up.c.o" "$s/core/base/up.c" || exit 2
printf '#include "high.h"\n#include "nowhere.h"\n' >"$s/cli/up.c"
echo 'int stray;' >"$s/core/stray.c"
run dirty "$s" "$t/dirty/obj"
[ "$rc" -eq 1 ] || bad "dirty: exit $rc, want 1"
want dirty "layer: core/base/up.c (1 base) calls high_value, defined in core/api/high.c (2 api)"
want dirty "layer: core/base/up.c (1 base) includes high.h (core/api, 2 api)"
want dirty "layer: core/base/up.c:3 (1 base) names struct weir_agent (core/api/ only)"
want dirty "layer: cli/up.c:1 (cli) includes high.h (core/api, 2 api): cli/ may include weir/... and its own headers only"
want dirty "layer: cli/up.c:2 (cli) includes \"nowhere.h\": cli/ may include weir/... and its own headers only"
want dirty "layer: core/stray.c is not in a floor folder (core/<floor>/: base api)"
n=$(grep -c '^layer: ' "$t/dirty.out")
[ "$n" -eq 6 ] || bad "dirty: $n violations, want 6"

# 4. usage errors
mkdir -p "$t/empty/base"
run empty "$t/clean/src" "$t/empty"
[ "$rc" -eq 2 ] || bad "empty object dir: exit $rc, want 2"
run missing "$t/clean/src" "$t/nowhere"
[ "$rc" -eq 2 ] || bad "missing object dir: exit $rc, want 2"
run foreign "$t/clean/src" "$t/real/obj"
[ "$rc" -eq 2 ] || bad "objects of another tree: exit $rc, want 2"

[ $fail -eq 0 ] && echo "layer_check_negative: ok"
exit $fail
