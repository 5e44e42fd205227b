#!/bin/sh
# tests/scripts/cli_log_events.sh WEIR - `weir log` prints a readable line
# for the events weir and its shipped plugins log besides the conversation
# (issue #37 item 13), never a bare "[type]":
#   - compaction-basic: "(compacting (pressure): N tokens, ...)", "(compaction
#     summary: ...)", "(compaction pruned the tool result at seq N: ...)",
#     "(compacted: A → B tokens (1 summary, 1 pruned))"; the summary and the
#     pruned result say which seqs they replace;
#   - the provenance records: "(hook system-prompt/assemble: plugin
#     system-prompt@V (row prompt) decided rewrite)";
#   - another plugin's event (drvtest-hooks' drvtest/request): "(drvtest:
#     request {...})", its data cut short;
#   - `weir log --json` stays the raw events.
WEIR=${1:?usage: $0 path/to/weir}
TOOLS="$WEIR_TEST_DRIVER_PLUGIN_DIR/weir-drvtest-tools.so"
HOOKS="$WEIR_TEST_DRIVER_PLUGIN_DIR/weir-drvtest-hooks.so"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-log-events.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= NO_COLOR=1
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

big=$(i=1; while [ $i -le 3000 ]; do printf 'line %d\\n' $i; i=$((i + 1)); done)
cat >"$TMP/c.json" <<JSON
{"agent": {"provider": "scripted", "model": "small", "max_tokens": 256},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"models": {"small": {"context_window": 16000, "max_output": 256}},
                         "replies": [{"tool_calls": [{"id": "c1", "name": "big", "arguments": "{}"}]},
                                     {"text": "done"}, {"text": "again"}, {"text": "more"}]}},
             {"id": "prompt", "plugin": "system-prompt", "config": {"text": "Be brief."}},
             {"id": "tools", "plugin": "$TOOLS", "config": {"tools": [{"name": "big", "reply": "$big"}]}},
             {"id": "rec", "plugin": "$HOOKS", "config": {"record_requests": true}},
             {"id": "compaction", "plugin": "compaction-basic", "config": {}}]}
JSON
# two runs: the second one's pressure summarizes the first and prunes its big result
"$WEIR" run -c "$TMP/c.json" -s s "go" >/dev/null 2>"$TMP/err" || fail "run: $(cat "$TMP/err")"
"$WEIR" resume -c "$TMP/c.json" s "next" >/dev/null 2>"$TMP/err" || fail "resume: $(cat "$TMP/err")"
grep -q '"type":"compaction/prune"' "$TMP/sessions/s.jsonl" || fail "no prune: the test needs one"

"$WEIR" log -c "$TMP/c.json" s >"$TMP/log" 2>&1 || fail "weir log: $(cat "$TMP/log")"
grep -n '^\[[a-z-]*/[a-z/-]*\]$' "$TMP/log" && fail "a bare [type] line"
grep -qx '(compacting (pressure): [0-9,]* tokens, over the threshold 12,800 of 16,000)' "$TMP/log" ||
    fail "no compacting line"
grep -qx '(compaction summary: [0-9]* events, [0-9,]* tokens → [0-9,]* tokens (by scripted/small))' "$TMP/log" ||
    fail "no summary line"
grep -qx '(compaction pruned the tool result at seq [0-9]*: [0-9,]* characters, [0-9,]* → [0-9,]* tokens)' "$TMP/log" ||
    fail "no prune line"
grep -qx '(compacted: [0-9,]* → [0-9,]* tokens (1 summary, 1 pruned))' "$TMP/log" || fail "no compacted line"
grep -q '^user (replaces seq [0-9]*-[0-9]*): This checkpoint' "$TMP/log" || fail "the summary's replace"
grep -q '^tool big (replaces seq [0-9]*): line 1' "$TMP/log" || fail "the pruned result's replace"
grep -qx '(hook system-prompt/assemble: plugin system-prompt@[0-9.]* (row prompt) decided rewrite)' "$TMP/log" ||
    fail "no hook decision line"
grep -qx '(drvtest: request {.*…)' "$TMP/log" || fail "no generic plugin event line"
[ $FAILURES -eq 0 ] || cat "$TMP/log" | cut -c1-160 | grep -v '^line' >&2

"$WEIR" log -c "$TMP/c.json" s --json >"$TMP/json" 2>&1 || fail "weir log --json"
grep -q '"type":"compaction/end"' "$TMP/json" && grep -q '"type":"drvtest/request"' "$TMP/json" ||
    fail "--json is not the raw events"
grep -q '^(' "$TMP/json" && fail "--json has transcript lines"

[ $FAILURES -eq 0 ] && echo "cli_log_events: ok"
exit $FAILURES
