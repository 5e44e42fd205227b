#!/bin/sh
# tests/scripts/cli_example_pii_guard.sh WEIR - the PII guard example
# (examples/pii-guard) redacts e-mail addresses at admission (agent/admit,
# issue #36): the session log of a `weir run` holds no address, not even the
# ones the guard redacted, and the model receives the placeholder (the
# scripted provider answers only a prompt that holds it).
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-pii-guard.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

cat >"$TMP/pii.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "Will do.",
                  "expect": {"message_contains": "write to [email] and [email] today"}}]}},
             {"id": "pii", "plugin": "pii-guard", "config": {}}]}
JSON
timeout 30 "$WEIR" run -c "$TMP/pii.json" -s pii "write to ann@example.com and bo.b@mail.example.org today" \
    >"$TMP/out" 2>"$TMP/err" || fail "run: $(cat "$TMP/err")"
[ "$(cat "$TMP/out")" = "Will do." ] || fail "stdout: $(cat "$TMP/out")"
LOG="$TMP/sessions/pii.jsonl"
[ -s "$LOG" ] || fail "no session log"
# an address: name@domain.tld (the provenance's plugin@version is not one)
grep -qE '[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+\.[A-Za-z]' "$LOG" &&
    fail "an address is in the log: $(grep -E '@[A-Za-z]' "$LOG")"
grep -q 'ann\|bo\.b' "$LOG" && fail "a redacted name is in the log"
grep -q 'example\.' "$LOG" && fail "a domain is in the log"
grep -q '"text":"write to \[email\] and \[email\] today"' "$LOG" || fail "no redacted prompt in the log"
grep -q '"hook":"agent/admit","plugin":"pii-guard@1.0.0","row":"pii","decision":"rewrite"' "$LOG" ||
    fail "no rewrite decision: $(grep hook/decision "$LOG")"
timeout 20 "$WEIR" log "$LOG" --check >"$TMP/check" 2>&1 || fail "weir log --check: $(cat "$TMP/check")"
[ $FAILURES -eq 0 ] && echo "cli_example_pii_guard: ok"
exit $FAILURES
