#!/bin/sh
# tests/scripts/cli_compact.sh WEIR - `weir compact`: a manual compaction
# between turns with compaction-basic and a scripted summarizer (the extra
# instructions reach it), the declined and failed outcomes and their exit
# codes, the log checking clean afterwards and the next turn seeing the
# summary; usage errors.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-compact.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

LONG=$(printf 'The quick brown fox jumps over the lazy dog. %.0s' $(seq 1 30))
# the conversation: every reply is long; the window is known
cat >"$TMP/talk.json" <<EOF
{"agent": {"provider": "s", "model": "m"},
 "session": {"dir": "\${WEIR_SESSION_DIR}"},
 "plugins": [
  {"id": "s", "plugin": "provider-scripted", "config": {"loop": true,
    "models": {"m": {"context_window": 100000, "max_output": 1000}},
    "replies": [{"text": "$LONG", "usage": {"input_tokens": 400, "output_tokens": 300}}]}},
  {"id": "compact", "plugin": "compaction-basic", "config": {"keep_recent_tokens": 10}}]}
EOF
# the summarizer: one short reply, only when the instructions reached it
cat >"$TMP/summarize.json" <<EOF
{"plugins": [
  {"id": "s", "config": {"models": {"m": {"context_window": 100000, "max_output": 1000}},
    "replies": [{"text": "The user asked twice; the answers were about a fox.",
                 "expect": {"message_contains": "KEEP-NAMES"}},
                {"text": "after the summary",
                 "expect": {"message_contains": "answers were about a fox"}}]}}]}
EOF
# the same deployment without a compaction plugin
cat >"$TMP/plain.json" <<EOF
{"plugins": [{"id": "compact", "disabled": true}]}
EOF

"$WEIR" run -c "$TMP/talk.json" -s c1 "first question" >/dev/null 2>&1 || fail "run 1"
"$WEIR" run -c "$TMP/talk.json" -s c1 "second question" >/dev/null 2>&1 || fail "run 2"

# no compaction plugin: declined, exit 0
"$WEIR" compact -c "$TMP/talk.json" -c "$TMP/plain.json" c1 >"$TMP/out" 2>&1 ||
    fail "declined without a plugin: want 0 ($(cat "$TMP/out"))"
grep -qx 'declined: no plugin compacts (add compaction-basic to the deployment)' "$TMP/out" ||
    fail "declined text: $(cat "$TMP/out")"

# the summarizer refuses a request without the instructions: failed, exit 1, surface unchanged
before=$("$WEIR" log c1 --derive)
"$WEIR" compact -c "$TMP/talk.json" -c "$TMP/summarize.json" c1 >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] || fail "failed compaction: want exit 1"
grep -q '^failed: the summarizer failed: INVALID_REQUEST: expected a message containing "KEEP-NAMES"$' \
    "$TMP/err" || fail "failed text: $(cat "$TMP/err")"
[ "$("$WEIR" log c1 --derive)" = "$before" ] || fail "a failed compaction changed the history"

# with the instructions: compacted, and the log checks clean
"$WEIR" compact -c "$TMP/talk.json" -c "$TMP/summarize.json" -i "KEEP-NAMES" c1 >"$TMP/out" 2>&1 ||
    fail "compact: $(cat "$TMP/out")"
grep -q '^compacted: 0 tool result(s) pruned, 1 summary, [0-9]* -> [0-9]* tokens (cmp-[0-9a-f]*)$' \
    "$TMP/out" || fail "compacted text: $(cat "$TMP/out")"
"$WEIR" log c1 --check >"$TMP/check" 2>&1 || fail "check after compact: $(cat "$TMP/check")"
"$WEIR" log c1 --derive | grep -q '<compacted-summary>\\nThe user asked twice' ||
    fail "the derived history lacks the summary"
grep -q '"type":"compaction/start".*"trigger":"manual"' "$WEIR_SESSION_DIR/c1.jsonl" ||
    fail "compaction/start is not trigger manual"

# the next turn's request carries the summary (the second scripted reply expects it)
cat >"$TMP/next.json" <<EOF
{"plugins": [{"id": "s", "config": {"replies": [{"text": "after the summary",
    "expect": {"message_contains": "answers were about a fox"}}]}}]}
EOF
"$WEIR" run -c "$TMP/talk.json" -c "$TMP/next.json" -s c1 "third question" >"$TMP/out" 2>&1 ||
    fail "the turn after compaction: $(cat "$TMP/out")"

# --json prints the result object
"$WEIR" compact --json -c "$TMP/talk.json" -c "$TMP/plain.json" c1 >"$TMP/out" 2>&1 || fail "--json"
grep -qx '{"kind":"declined","message":"no plugin compacts (add compaction-basic to the deployment)"}' \
    "$TMP/out" || fail "--json output: $(cat "$TMP/out")"

# usage and I/O errors
"$WEIR" compact >/dev/null 2>&1; [ $? -eq 2 ] || fail "no ID: want 2"
"$WEIR" compact a b >/dev/null 2>&1; [ $? -eq 2 ] || fail "two IDs: want 2"
"$WEIR" compact --bogus c1 >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option: want 2"
"$WEIR" compact -c "$TMP/talk.json" nosuch >"$TMP/out" 2>&1; [ $? -eq 4 ] || fail "missing session: want 4"
grep -q '^weir compact: no session log at ' "$TMP/out" || fail "missing session text: $(cat "$TMP/out")"
"$WEIR" compact --help | grep -q '^usage: weir compact' || fail "--help"
"$WEIR" compact -c "$TMP/talk.json" -i "$(printf 'bad \377 text')" c1 >"$TMP/out" 2>&1
[ $? -eq 2 ] || fail "non-UTF-8 instructions: want 2"
grep -qx 'weir: compact: instructions: not valid UTF-8' "$TMP/out" || fail "UTF-8 text: $(cat "$TMP/out")"

[ $FAILURES -eq 0 ] && echo "cli_compact: ok"
exit $FAILURES
