#!/bin/sh
# tests/scripts/cli_compact_status.sh WEIR - a compaction during `weir run`
# (issue #9 item 6): on a terminal, one status line on stderr while it runs
# ("weir: compacting N messages…"), replaced by its outcome; off a terminal
# nothing extra; with --json the compaction events as they are.
# script(1) (util-linux, Essential on Debian) gives weir a pseudo-terminal.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-compact-status.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }

# A small window: the long prompts of the demo conversation press on it by
# the third turn, and a summary (the demo's short reply) shrinks them.
cat >"$TMP/small.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"script": "builtin:demo",
                         "models": {"demo": {"context_window": 1000, "max_output": 50}}}},
             {"id": "compaction", "plugin": "compaction-basic"},
             {"id": "math", "plugin": "tools-ffi",
              "config": {"tools": [{"library": "libm.so.6", "symbol": "pow",
                                    "prototype": "double pow(double x, double y)",
                                    "description": "x raised to the power y"}]}}]}
JSON
ask() {
    printf 'Please keep in mind all of the following background before you answer: '
    printf 'the quick brown fox jumps over the lazy dog and keeps running through the field. %.0s' \
        1 2 3 4 5 6 7 8
    echo 'Now say hello, then tell me what 2 to the power 10 is.'
}

for i in 1 2 3; do
    timeout 30 "$WEIR" run -c "$TMP/small.json" -s plain "$(ask)" >/dev/null 2>"$TMP/plain.$i" ||
        fail "plain run $i: $(cat "$TMP/plain.$i")"
done
timeout 30 script -qec "exec \"$WEIR\" run -c \"$TMP/small.json\" -s plain \"$(ask)\"" /dev/null \
    >"$TMP/raw" 2>&1 || fail "tty run: $(cat "$TMP/raw")"
grep -q '"type":"compaction/start"' "$TMP/sessions/plain.jsonl" ||
    fail "the fixture never compacted: $(grep -o '"type":"[a-z/]*"' "$TMP/sessions/plain.jsonl" | sort | uniq -c)"
grep -q 'weir: compacting [0-9][0-9]* messages…' "$TMP/raw" || fail "no status line: $(cat "$TMP/raw")"
grep -q 'weir: compacted: [0-9][0-9]* -> [0-9][0-9]* tokens' "$TMP/raw" ||
    fail "no outcome line: $(cat "$TMP/raw")"
# the outcome overwrites the status line: carriage return, then clear to end of line
grep -q "$(printf '\r\033\\[K')weir: compacted" "$TMP/raw" || fail "the outcome does not replace the status line"
# off a terminal: no status line
grep -q 'compacting\|compacted' "$TMP/plain.1" "$TMP/plain.2" "$TMP/plain.3" &&
    fail "status lines off a terminal: $(cat "$TMP/plain.3")"
# --json: the events, nothing else (the window fills again within a few turns;
# how many depends on the checkpoint's size, so run until one compacts)
for i in 1 2 3 4; do
    timeout 30 "$WEIR" run -c "$TMP/small.json" -s plain --json "$(ask)" >"$TMP/json" 2>"$TMP/json.err" ||
        fail "json run: $(cat "$TMP/json.err")"
    grep -q '"type":"compaction/end"' "$TMP/json" && break
done
grep -q '"type":"compaction/end"' "$TMP/json" || fail "--json shows no compaction/end"
grep -qv '^{.*}$' "$TMP/json" && fail "--json printed a line that is not an event"
grep -q 'compacting' "$TMP/json.err" && fail "--json printed a status line"
timeout 20 "$WEIR" log "$TMP/sessions/plain.jsonl" --check >"$TMP/check" 2>&1 || fail "check: $(cat "$TMP/check")"

[ $FAILURES -eq 0 ] && echo "cli_compact_status: ok"
exit $FAILURES
