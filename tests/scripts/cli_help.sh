#!/bin/sh
# tests/scripts/cli_help.sh WEIR - every command's help (issue #37 items 5
# and 16):
#   - `weir help CMD` prints what `weir CMD --help` prints, for every command
#     `weir --help` lists (not the general help), and exits 0; `weir help
#     nope` is a usage error;
#   - serve's --help and its op errors name every op, approve among them;
#   - every --help ends with the environment variables the command reads:
#     the variables the sources read (getenv in cli/, core/, plugins/; the
#     ${VAR} of the built-in default and of examples/deployments) are all
#     named by `weir run --help`, and each command names at least
#     WEIR_ALLOW_COREDUMP (read by every command).
WEIR=${1:?usage: $0 path/to/weir}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-help.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= WEIR_SESSION_DIR="$TMP/sessions"
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

"$WEIR" --help >"$TMP/general" || fail "weir --help"
# the commands: the first word of each line of the list
sed -n '/^commands:/,/^$/p' "$TMP/general" | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' |
    grep -v '^help$' >"$TMP/cmds"
[ "$(wc -l <"$TMP/cmds")" -ge 14 ] || fail "weir --help lists too few commands: $(cat "$TMP/cmds")"
while read -r cmd; do
    "$WEIR" help "$cmd" >"$TMP/a" 2>&1 || fail "weir help $cmd: exit $?"
    "$WEIR" "$cmd" --help >"$TMP/b" 2>&1 || fail "weir $cmd --help: exit $?"
    cmp -s "$TMP/a" "$TMP/b" || fail "weir help $cmd differs from weir $cmd --help: $(cat "$TMP/a")"
    cmp -s "$TMP/a" "$TMP/general" && fail "weir help $cmd prints the general help"
    grep -q "^usage: weir $cmd" "$TMP/a" || fail "weir help $cmd: no usage line: $(head -n 3 "$TMP/a")"
    grep -q '^environment' "$TMP/a" && grep -q 'WEIR_ALLOW_COREDUMP' "$TMP/a" ||
        fail "weir $cmd --help names no environment variable"
done <"$TMP/cmds"
"$WEIR" help nope >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] || fail "weir help nope: not a usage error"
grep -q "unknown command 'nope'" "$TMP/err" || fail "weir help nope: $(cat "$TMP/err")"

# every variable the sources read, named by run's help (the command that
# reads them all; PATH: the shell's, NAME: the config error's example,
# WEIR_TEMPLATE_DIR: new-plugin's, checked below)
"$WEIR" run --help >"$TMP/run"
{
    grep -rhoE 'getenv\("[A-Z_]+"\)' "$SRC/cli" "$SRC/core" "$SRC/plugins" |
        sed 's/getenv("\(.*\)")/\1/'
    grep -hoE '"\$\{[A-Z_]+' "$SRC/core/format/config.c" | sed 's/^"\${//'
    grep -hoE '\$\{[A-Z_]+' "$SRC"/examples/deployments/*.json | sed 's/^\${//'
} | sort -u | grep -vx 'PATH\|NAME\|WEIR_TEMPLATE_DIR' >"$TMP/vars"
[ "$(wc -l <"$TMP/vars")" -ge 10 ] || fail "too few variables found in the sources: $(cat "$TMP/vars")"
while read -r v; do
    grep -q "$v" "$TMP/run" || fail "weir run --help does not name $v"
done <"$TMP/vars"
"$WEIR" new-plugin --help | grep -q WEIR_TEMPLATE_DIR || fail "new-plugin --help: no WEIR_TEMPLATE_DIR"
"$WEIR" plugins --help | grep -q WEIR_PLUGIN_PATH || fail "plugins --help: no WEIR_PLUGIN_PATH"

# serve: approve in the help and in the op errors
"$WEIR" serve --help >"$TMP/serve"
grep -q '"op":"approve"' "$TMP/serve" || fail "serve --help does not name approve"
printf '{"op":"fly"}\n{}\n' | timeout 30 "$WEIR" serve --stdio >"$TMP/out" 2>"$TMP/err" ||
    fail "serve: exit $? $(cat "$TMP/err")"
[ "$(grep -c '\\"approve\\"' "$TMP/out")" -eq 2 ] || fail "serve op errors: $(cat "$TMP/out")"

[ $FAILURES -eq 0 ] && echo "cli_help: ok"
exit $FAILURES
