#!/bin/sh
# tests/scripts/cli_roles.sh WEIR - policy roles (issue #36, docs/plugins.md
# "Roles"): an overlay that adds a second compaction row to a deployment
# that has one is refused when it loads (`weir hooks`, `weir run`: exit 3,
# before any session), naming both rows and their plugins; with
# "share_roles" on both rows it loads and `weir hooks` shows both, with
# their plugin, version and roles; a row that shares a role it does not
# fill is refused.
WEIR=${1:?usage: $0 path/to/weir}
SRC=$(cd "$(dirname "$0")/../.." && pwd) || exit 1
D="$SRC/examples/deployments"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-roles.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# the dev deployment with one compaction policy, then an overlay with a second
cat >"$TMP/compact.json" <<'JSON'
{"plugins": [{"id": "compaction", "plugin": "compaction-basic", "after": "scripted"}]}
JSON
cat >"$TMP/second.json" <<'JSON'
{"plugins": [{"id": "compaction2", "plugin": "compaction-basic",
              "config": {"recall": {"enabled": false}}}]}
JSON
set -- -c "$D/base.json" -c "$D/dev.json" -c "$TMP/compact.json"
"$WEIR" hooks "$@" >"$TMP/one.out" 2>"$TMP/err" || fail "one compaction row: $(cat "$TMP/err")"

want="role 'compaction' is filled by two rows: 'compaction' (plugin compaction-basic "
rc=0
"$WEIR" hooks "$@" -c "$TMP/second.json" >"$TMP/out" 2>"$TMP/err" || rc=$?
[ $rc -eq 3 ] || fail "weir hooks with two compaction rows: exit $rc, not 3: $(cat "$TMP/err")"
grep -qF "$want" "$TMP/err" || fail "the error does not name the first row: $(cat "$TMP/err")"
grep -qF "and 'compaction2' (plugin compaction-basic " "$TMP/err" ||
    fail "the error does not name the second row: $(cat "$TMP/err")"
grep -qF '"share_roles": ["compaction"]' "$TMP/err" || fail "the error does not say how to opt in"
[ -s "$TMP/out" ] && fail "weir hooks printed chains of a refused deployment: $(cat "$TMP/out")"

rc=0
"$WEIR" run "$@" -c "$TMP/second.json" "hello" >"$TMP/out" 2>"$TMP/err" || rc=$?
[ $rc -eq 3 ] || fail "weir run with two compaction rows: exit $rc, not 3: $(cat "$TMP/err")"
grep -qF "$want" "$TMP/err" || fail "weir run does not name both rows: $(cat "$TMP/err")"
[ -d "$TMP/sessions" ] && [ -n "$(ls -A "$TMP/sessions")" ] &&
    fail "weir run opened a session for a refused deployment"

# the deployment says it wants both: each row shares the role
cat >"$TMP/share.json" <<'JSON'
{"plugins": [{"id": "compaction", "share_roles": ["compaction"]},
             {"id": "compaction2", "plugin": "compaction-basic", "share_roles": ["compaction"],
              "config": {"recall": {"enabled": false}}}]}
JSON
"$WEIR" hooks "$@" -c "$TMP/share.json" >"$TMP/both.out" 2>"$TMP/err" ||
    fail "two rows sharing the role do not load: $(cat "$TMP/err")"
ver=$("$WEIR" plugins | awk '$1 == "compaction-basic" { print $2 }')
[ -n "$ver" ] || fail "weir plugins does not list compaction-basic"
grep -qF "1. compaction  compaction-basic $ver  roles=compaction" "$TMP/both.out" ||
    fail "weir hooks does not show the first row: $(cat "$TMP/both.out")"
grep -qF "2. compaction2  compaction-basic $ver  roles=compaction" "$TMP/both.out" ||
    fail "weir hooks does not show the second row: $(cat "$TMP/both.out")"
"$WEIR" config "$@" -c "$TMP/share.json" >"$TMP/config.out" 2>"$TMP/err" ||
    fail "weir config: $(cat "$TMP/err")"
[ "$(grep -c '"share_roles"' "$TMP/config.out")" -eq 2 ] ||
    fail "weir config does not keep share_roles on both rows: $(cat "$TMP/config.out")"

# one row sharing is not the deployment wanting both
cat >"$TMP/half.json" <<'JSON'
{"plugins": [{"id": "compaction2", "plugin": "compaction-basic", "share_roles": ["compaction"],
              "config": {"recall": {"enabled": false}}}]}
JSON
rc=0
"$WEIR" hooks "$@" -c "$TMP/half.json" >/dev/null 2>"$TMP/err" || rc=$?
[ $rc -eq 3 ] && grep -qF "$want" "$TMP/err" ||
    fail "one sharing row loads (exit $rc): $(cat "$TMP/err")"

# sharing a role the row does not fill is a mistake
cat >"$TMP/stray.json" <<'JSON'
{"plugins": [{"id": "compaction", "share_roles": ["retry"]}]}
JSON
rc=0
"$WEIR" hooks "$@" -c "$TMP/stray.json" >/dev/null 2>"$TMP/err" || rc=$?
[ $rc -eq 3 ] || fail "a stray share_roles loads (exit $rc)"
grep -qF "row 'compaction' (plugin compaction-basic): share_roles names role 'retry', which the plugin does not fill (its roles: compaction)" "$TMP/err" ||
    fail "the stray share_roles error: $(cat "$TMP/err")"
# and the composer checks the key's shape, naming the file and the path
echo '{"plugins": [{"id": "compaction", "share_roles": "compaction"}]}' >"$TMP/shape.json"
rc=0
"$WEIR" config "$@" -c "$TMP/shape.json" >/dev/null 2>"$TMP/err" || rc=$?
[ $rc -eq 3 ] || fail "a share_roles string composes (exit $rc)"
grep -qF 'shape.json: $.plugins[0].share_roles: expected an array of role names, got a string' "$TMP/err" ||
    fail "the shape error: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_roles: ok"
exit $FAILURES
