#!/bin/sh
# tests/scripts/cli_wait_status.sh WEIR - a stalled turn says what it waits
# for (issue 31 item 11): `weir run --help` names the default stream idle
# limit (300 s) and hook timeout (600 s), and on a terminal (script(1)
# gives weir one) the status line on stderr shows the wait, its seconds and
# the deployment's limit:
#   - a pre-step hook that takes 2.5 s (drvtest-hooks "hang"), with a
#     hooks-shell row: "weir: waiting for the agent/pre-step hooks… 2 s
#     (hook timeout 30 s)" (UserPromptSubmit's default);
#   - an agent/request hook that sleeps 2.5 s before the provider is called
#     (provider-openai, stream_idle_timeout_ms 90000, a closed loopback
#     port): "weir: waiting for the model… 2 s (stream idle limit 90 s)".
# Nothing leaves 127.0.0.1; every run is bounded by timeout(1).
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-wait.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= NO_COLOR=1 TERM=xterm
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }
HOOKS="$WEIR_TEST_DRIVER_PLUGIN_DIR/weir-drvtest-hooks.so"

"$WEIR" run --help >"$TMP/help" 2>&1 || fail "run --help"
grep -q 'silent for 300 s' "$TMP/help" || fail "--help does not name the 300 s stream idle limit"
grep -q 'may run 600 s' "$TMP/help" || fail "--help does not name the 600 s hook timeout"

# on_tty CONFIG: weir run under script(1); the terminal's bytes in $TMP/raw
on_tty() {
    timeout 60 script -qec "exec \"$WEIR\" run -c \"$1\" -s \"$2\" hi" /dev/null \
        </dev/null >"$TMP/raw" 2>&1
}

cat >"$TMP/hook.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "fine"}]}},
             {"id": "cc", "plugin": "hooks-shell", "config": {"hooks": {}}},
             {"id": "hang", "plugin": "$HOOKS",
              "config": {"pre_step": {"action": "hang", "ms": 2500}}}]}
JSON
on_tty "$TMP/hook.json" hook || fail "hook run: exit $? $(cat "$TMP/raw")"
grep -q 'weir: waiting for the agent/pre-step hooks… 2 s (hook timeout 30 s)' "$TMP/raw" ||
    fail "no hook wait line: $(cat -v "$TMP/raw")"
grep -q 'weir: waiting for the model…' "$TMP/raw" && grep -q 'fine' "$TMP/raw" || fail "hook run: no answer: $(cat -v "$TMP/raw")"

cat >"$TMP/model.json" <<JSON
{"agent": {"provider": "llm", "model": "m"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "llm", "plugin": "provider-openai",
              "config": {"base_url": "http://127.0.0.1:1/v1", "api_key": "k",
                         "stream_idle_timeout_ms": 90000}},
             {"id": "slow", "plugin": "$HOOKS", "config": {"request_sleep_ms": 2500}}]}
JSON
on_tty "$TMP/model.json" model # the turn fails: nothing listens on port 1
grep -q 'weir: waiting for the model… 2 s (stream idle limit 90 s)' "$TMP/raw" ||
    fail "no model wait line: $(cat -v "$TMP/raw")"
grep -q 'Sanitizer\|runtime error' "$TMP/raw" && fail "sanitizer: $(cat "$TMP/raw")"

[ $FAILURES -eq 0 ] && echo "cli_wait_status: ok"
exit $FAILURES
