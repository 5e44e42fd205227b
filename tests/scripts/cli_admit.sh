#!/bin/sh
# tests/scripts/cli_admit.sh WEIR - agent/admit through `weir run`
# (docs/lifecycle.md, "Input", issue #36): a guard that redacts e-mail
# addresses at admission keeps them out of the session log file, and the
# model sees the redacted text; a refused prompt is a clear error on stderr,
# exit 1, and nothing of it in any file (the session, in which nothing
# reached the model, is not kept).  The guard is drvtest-hooks
# (tests/driver-plugins), config admit.
WEIR=${1:?usage: $0 path/to/weir}
PLUGINS=${WEIR_TEST_DRIVER_PLUGIN_DIR:?}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-admit.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# config FILE ACTION: the scripted provider checks that it sees the redaction
config() {
    cat >"$1" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugin_path": ["$PLUGINS"],
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "Noted.",
                                      "expect": {"message_contains": "mail [redacted] today"}}]}},
             {"id": "pii", "plugin": "drvtest-hooks",
              "config": {"admit": {"action": "$2", "reason": "no addresses, please"}}}]}
JSON
}

config "$TMP/redact.json" redact
timeout 30 "$WEIR" run -c "$TMP/redact.json" -s redact "mail alice@example.com today" \
    >"$TMP/redact.out" 2>"$TMP/redact.err" || fail "redact run: $(cat "$TMP/redact.err")"
[ "$(cat "$TMP/redact.out")" = "Noted." ] || fail "redact stdout: $(cat "$TMP/redact.out")"
grep -q 'alice' "$TMP/sessions/redact.jsonl" && fail "the address is in the log"
grep -q '"text":"mail \[redacted\] today"' "$TMP/sessions/redact.jsonl" || fail "no redacted message in the log"
grep -q '"type":"hook/decision".*"hook":"agent/admit".*"decision":"rewrite"' "$TMP/sessions/redact.jsonl" ||
    fail "no rewrite decision: $(cat "$TMP/sessions/redact.jsonl")"

config "$TMP/refuse.json" refuse
timeout 30 "$WEIR" run -c "$TMP/refuse.json" -s refuse "mail bob@example.com today" \
    >"$TMP/refuse.out" 2>"$TMP/refuse.err"
rc=$?
[ $rc -eq 1 ] || fail "refuse: exit $rc, want 1: $(cat "$TMP/refuse.err")"
grep -q "^weir: send: input '[^']*' refused by plugin pii: no addresses, please\$" "$TMP/refuse.err" ||
    fail "refuse: stderr: $(cat "$TMP/refuse.err")"
[ -s "$TMP/refuse.out" ] && fail "refuse: stdout: $(cat "$TMP/refuse.out")"
# a session in which nothing reached the model is not kept (docs/cli.md):
# no file holds anything of the prompt
[ -e "$TMP/sessions/refuse.jsonl" ] && fail "the refused session was kept: $(cat "$TMP/sessions/refuse.jsonl")"
grep -q "^weir: session refuse not kept: nothing reached the model\$" "$TMP/refuse.err" ||
    fail "refuse: no 'not kept' line: $(cat "$TMP/refuse.err")"
grep -rq 'bob' "$TMP/sessions" && fail "the refused prompt is in a file"

for s in redact; do
    timeout 20 "$WEIR" log "$TMP/sessions/$s.jsonl" --check >"$TMP/check" 2>&1 ||
        fail "$s: weir log --check: $(cat "$TMP/check")"
done
[ $FAILURES -eq 0 ] && echo "cli_admit: ok"
exit $FAILURES
