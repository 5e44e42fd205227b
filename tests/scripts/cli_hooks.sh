#!/bin/sh
# tests/scripts/cli_hooks.sh WEIR - `weir hooks -c ...` prints each chain in
# the order it runs for the deployment (issue #36): the composed row order
# (a row's "before"/"after" in the config files) and then the listeners'
# own before/after constraints, each entry with its row id, plugin, version
# and roles.  The fixtures fx-alpha, fx-beta and fx-gamma put one listener
# on agent/pre-step, placed by their config.
WEIR=${1:?usage: $0 path/to/weir}
FX=${WEIR_TEST_FIXTURE_DIR:?}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-hooks.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# the pre-step chain of `weir hooks` on the files given
chain() { "$WEIR" hooks "$@" 2>"$TMP/err" | sed -n '/^agent\/pre-step /,/^[^ ]/p' | grep '^  '; }

cat >"$TMP/base.json" <<JSON
{"plugin_path": ["$FX"],
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "a", "plugin": "fx-alpha", "config": {"after": ["b"], "roles": ["audit"]}},
             {"id": "b", "plugin": "fx-beta"},
             {"id": "c", "plugin": "fx-gamma"}]}
JSON
# rows a, b, c; a's listener runs after b's
want="  1. b  fx-beta 1.0.0  [middle] before=- after=-
  2. a  fx-alpha 1.0.0  roles=audit  [middle] before=- after=b
  3. c  fx-gamma 1.0.0  [middle] before=- after=-"
got=$(chain -c "$TMP/base.json")
[ "$got" = "$want" ] || fail "base: $(cat "$TMP/err")
got:
$got
want:
$want"

# an overlay moves row c before row a: c runs first
echo '{"plugins": [{"id": "c", "before": "a"}]}' >"$TMP/move.json"
want="  1. c  fx-gamma 1.0.0  [middle] before=- after=-
  2. b  fx-beta 1.0.0  [middle] before=- after=-
  3. a  fx-alpha 1.0.0  roles=audit  [middle] before=- after=b"
got=$(chain -c "$TMP/base.json" -c "$TMP/move.json")
[ "$got" = "$want" ] || fail "moved: $(cat "$TMP/err")
got:
$got
want:
$want"

# a row placed after another by the config, and a first-placed listener
cat >"$TMP/after.json" <<'JSON'
{"plugins": [{"id": "b", "after": "c"},
             {"id": "a", "config": {"order": -10, "roles": ["audit", "retry"]}}]}
JSON
want="  1. a  fx-alpha 1.0.0  roles=audit,retry  [first] before=- after=-
  2. c  fx-gamma 1.0.0  [middle] before=- after=-
  3. b  fx-beta 1.0.0  [middle] before=- after=-"
got=$(chain -c "$TMP/base.json" -c "$TMP/after.json")
[ "$got" = "$want" ] || fail "after: $(cat "$TMP/err")
got:
$got
want:
$want"

[ $FAILURES -eq 0 ] && echo "cli_hooks: ok"
exit $FAILURES
