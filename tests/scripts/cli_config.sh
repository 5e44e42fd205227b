#!/bin/sh
# tests/scripts/cli_config.sh WEIR - composing deployments from the command
# line (issue #14 items 2 and 3):
#   - `-c default` names the built-in deployment: `-c default -c overlay.json`
#     changes it;
#   - `agent` and `session` always start from the documented defaults, so a
#     config without a `session` object (an overlay alone) still runs;
#   - a config with no provider row says how to start from the default;
#   - `weir config` prints secrets as "***", `--show-secrets` shows them;
#   - `weir config` prints the defaults the plugins' schemas give;
#   - config errors name the file once ("weir: config FILE: ...").
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-config.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

echo '{"agent": {"max_tokens": 100}}' >"$TMP/overlay.json"

# -c default -c overlay: the default's rows, the overlay's value
"$WEIR" config -c default -c "$TMP/overlay.json" >"$TMP/out" 2>"$TMP/err" ||
    fail "config -c default -c overlay: $(cat "$TMP/err")"
grep -q '"max_tokens": 100' "$TMP/out" || fail "overlay value: $(cat "$TMP/out")"
grep -q '"plugin": "provider-scripted"' "$TMP/out" || fail "the default's rows are gone"
grep -q '"max_parallel_tool_calls": 10' "$TMP/out" || fail "the default's other agent keys"
"$WEIR" config >"$TMP/plain" 2>&1 || fail "config"
"$WEIR" config -c default >"$TMP/named" 2>&1 || fail "config -c default"
cmp -s "$TMP/plain" "$TMP/named" || fail "-c default differs from no -c"
"$WEIR" run -c default -c "$TMP/overlay.json" -s over "what is 2 to the power 10?" \
    >"$TMP/out" 2>"$TMP/err" || fail "run -c default -c overlay: $(cat "$TMP/err")"
grep -qx '2 to the power 10 is 1024.' "$TMP/out" || fail "run answer: $(cat "$TMP/out")"
grep -q 'using the built-in scripted demo provider' "$TMP/err" ||
    fail "-c default: no demo notice: $(cat "$TMP/err")"
grep -q '"max_tokens":100' "$WEIR_SESSION_DIR/over.jsonl" || fail "the request lacks max_tokens 100"
# a file named "default" is ./default
mkdir "$TMP/cwd"
echo '{"agent": {"max_tokens": 7}}' >"$TMP/cwd/default"
(cd "$TMP/cwd" && "$WEIR" config -c ./default) | grep -q '"max_tokens": 7' || fail "./default"

# the overlay alone: no session object, the documented defaults
"$WEIR" config -c "$TMP/overlay.json" >"$TMP/out" 2>"$TMP/err" || fail "overlay alone: $(cat "$TMP/err")"
grep -q "\"dir\": \"$WEIR_SESSION_DIR\"" "$TMP/out" || fail "session.dir default: $(cat "$TMP/out")"
grep -q '"fsync": "step"' "$TMP/out" || fail "session.fsync default"
grep -q '"max_parallel_tool_calls": 10' "$TMP/out" || fail "agent default"
cat >"$TMP/nosession.json" <<'JSON'
{"agent": {"provider": "s", "model": "m"},
 "plugins": [{"id": "s", "plugin": "provider-scripted", "config": {"replies": [{"text": "fine"}]}}]}
JSON
"$WEIR" run -c "$TMP/nosession.json" -s nosession hi >"$TMP/out" 2>"$TMP/err" ||
    fail "a config without session: $(cat "$TMP/err")"
grep -qx fine "$TMP/out" || fail "nosession answer: $(cat "$TMP/out")"
[ -s "$WEIR_SESSION_DIR/nosession.jsonl" ] || fail "nosession log is not in \$WEIR_SESSION_DIR"
"$WEIR" log -c "$TMP/nosession.json" nosession --check >/dev/null 2>&1 || fail "log by id without session.dir"
# a file's own session.dir still wins, and HOME is needed only for the default
echo '{"session": {"dir": "'"$TMP"'/own"}}' >"$TMP/own.json"
env -u HOME -u WEIR_SESSION_DIR "$WEIR" config -c "$TMP/own.json" 2>&1 | grep -q "\"dir\": \"$TMP/own\"" ||
    fail "a file's session.dir without HOME"

# no provider row: the turn fails, and says how to start from the default
"$WEIR" run -c "$TMP/overlay.json" hi >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "no provider: want exit 1"
grep -q '^weir: hint: .*no provider row.*-c default -c FILE' "$TMP/err" ||
    fail "no provider hint: $(cat "$TMP/err")"
# ... and leaves no session behind: nothing reached a model (issue #37 item 15)
ls "$WEIR_SESSION_DIR" | grep -v '^nosession.jsonl$' | grep -v '^over.jsonl$' >"$TMP/left"
[ -s "$TMP/left" ] && fail "a session with no model request is kept: $(cat "$TMP/left")"
# an unknown agent.provider is a load error (exit 3), with a "did you mean"
# and the provider rows, before any session exists (issue #37 item 8)
echo '{"agent": {"provider": "nosuch"}}' >"$TMP/nosuch.json"
"$WEIR" run -c "$TMP/nosuch.json" -c "$TMP/nosession.json" -c "$TMP/nosuch.json" -s nosuch hi >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 3 ] || fail "unknown provider: want exit 3, got $rc"
grep -qx "weir: load: agent.provider 'nosuch': no plugin row with that id registered a provider (provider rows: s)" "$TMP/err" ||
    fail "unknown provider error: $(cat "$TMP/err")"
echo '{"agent": {"provider": "scriptd"}}' >"$TMP/typo-provider.json"
"$WEIR" run -c default -c "$TMP/typo-provider.json" -s typoprov hi >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 3 ] || fail "misspelt provider: want exit 3, got $rc"
grep -q "^weir: load: agent.provider 'scriptd': .*; did you mean 'scripted'? (provider rows: scripted)\$" "$TMP/err" ||
    fail "misspelt provider: no did you mean: $(cat "$TMP/err")"
[ -e "$WEIR_SESSION_DIR/nosuch.jsonl" ] || [ -e "$WEIR_SESSION_DIR/typoprov.jsonl" ] &&
    fail "a load error left a session behind"
# a typo in agent or session is a load error naming the file and the key
echo '{"agent": {"max_token": 100}}' >"$TMP/typo.json"
"$WEIR" run -c default -c "$TMP/typo.json" -s typo hi >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 3 ] || fail "agent.max_token: want exit 3, got $rc"
grep -q "^weir: config $TMP/typo.json: \$.agent: unknown key \"max_token\"; did you mean \"max_tokens\"?" "$TMP/err" ||
    fail "agent.max_token: $(cat "$TMP/err")"
[ -e "$WEIR_SESSION_DIR/typo.jsonl" ] && fail "a config error left a session behind"

# redaction (item 3): the default deployment's key, and --show-secrets
OPENAI_API_KEY=sk-secret-value "$WEIR" config >"$TMP/out" 2>&1 || fail "config with a key"
grep -q '"api_key": "\*\*\*"' "$TMP/out" || fail "api_key is not ***: $(grep api_key "$TMP/out")"
grep -q 'sk-secret-value' "$TMP/out" && fail "the key is printed in clear"
OPENAI_API_KEY=sk-secret-value "$WEIR" config --show-secrets | grep -q '"api_key": "sk-secret-value"' ||
    fail "--show-secrets does not show the key"
cat >"$TMP/headers.json" <<'JSON'
{"plugins": [{"id": "o", "plugin": "provider-openai",
              "config": {"api_key": "k1", "headers": {"Authorization": "Bearer k2", "X-Plain": "v"}}}]}
JSON
"$WEIR" config -c "$TMP/headers.json" >"$TMP/out" 2>&1 || fail "config headers"
grep -q '"Authorization": "\*\*\*"' "$TMP/out" || fail "Authorization is not ***"
grep -q '"X-Plain": "v"' "$TMP/out" || fail "a plain header is hidden"
# the values as printed (bare k1/k2 could be in the temp dir's random name)
grep -qE '"k1"|Bearer k2' "$TMP/out" && fail "a secret shows: $(cat "$TMP/out")"

# the plugins' defaults (issue #35): provider-openai's api, responses at
# OpenAI's own base_url, chat elsewhere; --show-secrets opens no plugin
cat >"$TMP/api.json" <<'JSON'
{"plugins": [{"id": "o", "plugin": "provider-openai", "config": {"base_url": "https://api.openai.com/v1"}},
             {"id": "l", "plugin": "provider-openai", "config": {"base_url": "http://127.0.0.1:9/v1"}}]}
JSON
"$WEIR" config -c "$TMP/api.json" >"$TMP/out" 2>&1 || fail "config api: $(cat "$TMP/out")"
[ "$(grep -c '"api": "responses"' "$TMP/out")" = 1 ] && [ "$(grep -c '"api": "chat"' "$TMP/out")" = 1 ] ||
    fail "api defaults: $(cat "$TMP/out")"
"$WEIR" config -c "$TMP/api.json" --show-secrets | grep -q '"api"' && fail "--show-secrets filled a default"
# compaction-basic's chain of strategies: the default deployment's row shows it
"$WEIR" config >"$TMP/out" 2>&1 || fail "config: $(cat "$TMP/out")"
tr -d ' \n' <"$TMP/out" | grep -q '"strategies":\["summary","prune"\]' ||
    fail "the default compaction strategies do not show: $(cat "$TMP/out")"

# a URL's userinfo is a credential: hidden, the rest of the URL kept
# (issue 31 item 6); --show-secrets shows it
cat >"$TMP/userinfo.json" <<'JSON'
{"plugins": [{"id": "openai", "plugin": "provider-openai",
              "config": {"base_url": "http://u:sk-userinfo-1@127.0.0.1:9/v1"}},
             {"id": "x", "plugin": "no-such-plugin",
              "config": {"args": ["--db", "postgresql://weir:pw-userinfo-2@db:5432/weir"]}}]}
JSON
"$WEIR" config -c "$TMP/userinfo.json" >"$TMP/out" 2>&1 || fail "config userinfo: $(cat "$TMP/out")"
grep -q 'userinfo-' "$TMP/out" && fail "a URL's credentials show: $(cat "$TMP/out")"
grep -q '"base_url": "http://\*\*\*@127.0.0.1:9/v1"' "$TMP/out" || fail "base_url: $(cat "$TMP/out")"
grep -q '"postgresql://\*\*\*@db:5432/weir"' "$TMP/out" || fail "args: $(cat "$TMP/out")"
"$WEIR" config -c "$TMP/userinfo.json" --show-secrets 2>&1 | grep -q 'u:sk-userinfo-1@' ||
    fail "--show-secrets hides the userinfo"

# errors name the file once
"$WEIR" config -c "$TMP/missing.json" >/dev/null 2>"$TMP/err"
[ $? -eq 4 ] || fail "missing config: want exit 4"
grep -qx "weir: config $TMP/missing.json: cannot open: No such file or directory" "$TMP/err" ||
    fail "missing config text: $(cat "$TMP/err")"
echo '{"agent": 3}' >"$TMP/bad.json"
"$WEIR" run -c "$TMP/bad.json" hi >/dev/null 2>"$TMP/err"
[ $? -eq 3 ] || fail "bad config: want exit 3"
grep -q '^weir: config .*bad.json: \$.agent: ' "$TMP/err" || fail "bad config text: $(cat "$TMP/err")"
grep -q 'config: config' "$TMP/err" && fail "stutter: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_config: ok"
exit $FAILURES
