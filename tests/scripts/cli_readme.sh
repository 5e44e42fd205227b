#!/bin/sh
# tests/scripts/cli_readme.sh WEIR - every command of README.md's "Using it"
# block works as written on a fresh machine (issue #37 item 3): no API key
# in the environment, an empty HOME, the commands run from a folder that has
# the repository's examples/ and build/bin/weir; each exits 0.  The REPL
# line gets a terminal (script(1)) and /quit; serve gets an empty stdin;
# <session-id> is the session the first run made.  Also: `weir config` on
# prod.json without OPENAI_API_KEY prints the config with the key shown as
# "(unset: OPENAI_API_KEY)" and says so on stderr.
WEIR=${1:?usage: $0 path/to/weir}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-readme.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
unset OPENAI_API_KEY ANTHROPIC_API_KEY OPENAI_BASE_URL ANTHROPIC_BASE_URL WEIR_MODEL WEIR_SESSION_DIR
export HOME="$TMP/home" NO_COLOR=1 TERM=xterm
mkdir -p "$HOME" "$TMP/cwd/build/bin"
ln -s "$SRC/examples" "$TMP/cwd/examples"
ln -s "$(cd "$(dirname "$WEIR")" && pwd)/$(basename "$WEIR")" "$TMP/cwd/build/bin/weir"
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }

# the block's lines, their comments cut ("  # ...")
sed -n '/^## Using it/,/^## /p' "$SRC/README.md" | sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' |
    sed 's/  *# .*$//' >"$TMP/cmds"
[ "$(wc -l <"$TMP/cmds")" -ge 10 ] || fail "too few commands in README.md: $(cat "$TMP/cmds")"
cd "$TMP/cwd" || exit 1
id=
n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    case $cmd in '' | *[!\ ]*) ;; *) continue ;; esac # a comment's own line
    [ -z "$cmd" ] && continue
    case $cmd in
    *=*) case ${cmd%%=*} in *' '*) ;; *) eval "$cmd"; continue ;; esac ;; # D=...
    esac
    case $cmd in
    *'<session-id>'*)
        [ -n "$id" ] || { fail "line $n: no session yet for <session-id>"; continue; }
        cmd=$(printf '%s' "$cmd" | sed "s/<session-id>/$id/g")
        ;;
    esac
    if [ "$cmd" = "build/bin/weir run" ]; then # the REPL: a terminal, then /quit
        printf '/quit\n' | timeout 60 script -qec "$cmd" /dev/null >"$TMP/out" 2>&1
    else
        eval "timeout 60 $cmd" </dev/null >"$TMP/out" 2>"$TMP/err"
    fi
    rc=$?
    [ $rc -eq 0 ] || fail "README line '$cmd': exit $rc: $(cat "$TMP/out" "$TMP/err" 2>/dev/null | head -n 20)"
    if [ -z "$id" ]; then
        id=$(sed -n 's/^weir: session \([^ ]*\) (.*/\1/p' "$TMP/err" 2>/dev/null | head -n 1)
    fi
    : >"$TMP/err"
done <"$TMP/cmds"

D="$SRC/examples/deployments"
build/bin/weir config -c "$D/base.json" -c "$D/prod.json" >"$TMP/out" 2>"$TMP/err" ||
    fail "config prod.json without a key: exit $? $(cat "$TMP/err")"
grep -q '"api_key": "(unset: OPENAI_API_KEY)"' "$TMP/out" || fail "the unset key: $(cat "$TMP/out")"
grep -q '^weir config: not set: OPENAI_API_KEY' "$TMP/err" || fail "stderr: $(cat "$TMP/err")"
build/bin/weir config --show-secrets -c "$D/base.json" -c "$D/prod.json" >"$TMP/out" 2>&1 ||
    fail "config --show-secrets without a key"
build/bin/weir run -c "$D/base.json" -c "$D/prod.json" hi >"$TMP/out" 2>"$TMP/err"
[ $? -eq 3 ] || fail "run prod.json without a key: not a config error ($(cat "$TMP/err"))"
grep -q 'OPENAI_API_KEY is not set' "$TMP/err" || fail "run: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_readme: ok"
exit $FAILURES
