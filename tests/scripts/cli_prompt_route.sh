#!/bin/sh
# tests/scripts/cli_prompt_route.sh WEIR - what a run is sent and where it
# goes (issue #37 items 5 and 9):
#   - an empty or white-space prompt (argument, pipe, resume) is a usage
#     error (exit 2) and creates no session;
#   - one stderr line names the route before the turn, "weir: model M,
#     provider P (PLUGIN at URL)", never a URL's userinfo; not with
#     --json;
#   - -m/--model and --provider set agent.model and agent.provider for run
#     and resume (the request the mock server gets names the model); a
#     --provider that names no plugin row is a usage error that lists them.
WEIR=${1:?usage: $0 path/to/weir}
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-prompt.XXXXXX") || exit 1
MOCK_PID=
trap '[ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY= NO_COLOR=1
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# empty prompts: exit 2, nothing written
for p in "" "   " "$(printf '\t\n ')"; do
    "$WEIR" run -s empty "$p" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ $rc -eq 2 ] || fail "run '$p': exit $rc, want 2"
    grep -q '^weir run: the prompt is empty' "$TMP/err" || fail "run '$p': $(cat "$TMP/err")"
done
printf '  \n\n' | "$WEIR" run -s empty >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] || fail "a blank piped prompt: not a usage error ($(cat "$TMP/err"))"
[ -e "$WEIR_SESSION_DIR/empty.jsonl" ] && fail "an empty prompt created a session"
"$WEIR" run -s kept "hello" >/dev/null 2>&1 || fail "run hello"
"$WEIR" resume kept " " >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] || fail "resume with a blank prompt: not a usage error ($(cat "$TMP/err"))"
[ "$(grep -c '"type":"user/message"' "$WEIR_SESSION_DIR/kept.jsonl")" -eq 1 ] ||
    fail "resume with a blank prompt sent it"

# the route line: the demo
"$WEIR" run "hi" >/dev/null 2>"$TMP/err" || fail "run hi"
grep -qx 'weir: model demo, provider scripted (provider-scripted)' "$TMP/err" ||
    fail "no route line: $(cat "$TMP/err")"
"$WEIR" run --json "hi" >"$TMP/out" 2>"$TMP/err" || fail "run --json"
grep -q 'weir: model' "$TMP/err" "$TMP/out" && fail "--json prints the route line"

# the mock server: --model reaches the request
printf '{"loop": true, "requests": [{"text": "fine"}]}\n' >"$TMP/script.json"
"$MOCK" --script "$TMP/script.json" --port-file "$TMP/port" --timeout-s 60 >"$TMP/mock.out" 2>&1 &
MOCK_PID=$!
i=0
while [ ! -s "$TMP/port" ]; do
    i=$((i + 1))
    [ $i -gt 100 ] && { echo "FAIL: weir-mock-llm did not start: $(cat "$TMP/mock.out")" >&2; exit 1; }
    sleep 0.1
done
PORT=$(cat "$TMP/port")
cat >"$TMP/c.json" <<JSON
{"agent": {"provider": "llm", "model": "file-model", "max_tokens": 64},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "other", "plugin": "provider-scripted", "config": {"replies": [{"text": "x"}]}},
             {"id": "llm", "plugin": "provider-openai",
              "config": {"base_url": "http://user:secret@127.0.0.1:$PORT/v1",
                         "api_key": "k", "probe_windows": false,
                         "models": {"flag-model": {"context_window": 8192, "max_output": 64},
                                    "file-model": {"context_window": 8192, "max_output": 64}}}}]}
JSON
"$WEIR" run -c "$TMP/c.json" -s routed -m flag-model --provider llm "hi" >"$TMP/out" 2>"$TMP/err" ||
    fail "run -m: exit $? $(cat "$TMP/err")"
grep -qx "weir: model flag-model, provider llm (provider-openai at http://127.0.0.1:$PORT/v1)" "$TMP/err" ||
    fail "route line: $(cat "$TMP/err")"
grep -q 'secret' "$TMP/err" && fail "the route line shows a secret: $(cat "$TMP/err")"
grep -q '"model":"flag-model"' "$WEIR_SESSION_DIR/routed.jsonl" || fail "the request did not use --model"
"$WEIR" resume -c "$TMP/c.json" --model file-model routed "again" >"$TMP/out" 2>"$TMP/err" ||
    fail "resume --model: exit $? $(cat "$TMP/err")"
grep -q 'weir: model file-model, provider llm' "$TMP/err" || fail "resume route line: $(cat "$TMP/err")"
"$WEIR" run -c "$TMP/c.json" --provider other "hi" >"$TMP/out" 2>"$TMP/err" || fail "--provider other"
grep -q 'provider other (provider-scripted)' "$TMP/err" && grep -qx x "$TMP/out" ||
    fail "--provider other: $(cat "$TMP/out" "$TMP/err")"
"$WEIR" run -c "$TMP/c.json" --provider nope "hi" >"$TMP/out" 2>"$TMP/err"
[ $? -eq 2 ] || fail "--provider nope: not a usage error"
grep -q "no plugin row with that id (its rows: other, llm)" "$TMP/err" || fail "--provider nope: $(cat "$TMP/err")"
"$WEIR" run -m "" "hi" >/dev/null 2>&1
[ $? -eq 2 ] || fail "-m '': not a usage error"
grep -q 'Sanitizer\|runtime error' "$TMP/err" && fail "sanitizer: $(cat "$TMP/err")"

[ $FAILURES -eq 0 ] && echo "cli_prompt_route: ok"
exit $FAILURES
