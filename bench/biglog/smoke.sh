#!/bin/sh
# bench/biglog/smoke.sh WEIR GEN - the ctest bench_biglog_quick: small logs
# from bench_biglog_gen (big tool results; many small turns with compactions)
# pass `weir log --check`, derive, list in `weir sessions` and resume with one
# turn of the built-in scripted demo (no network). Correctness only, no timing.
WEIR=${1:?usage: $0 path/to/weir path/to/bench_biglog_gen}
GEN=${2:?usage: $0 path/to/weir path/to/bench_biglog_gen}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-biglog-smoke.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= WEIR_SESSION_DIR="$TMP/sessions"
mkdir -m 700 "$WEIR_SESSION_DIR" || exit 1
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
echo '{"plugins": [{"id": "compaction", "disabled": true}]}' >"$TMP/nocompact.json"

check_log() { # ID TURNS GEN-OPTIONS...
    id=$1 turns=$2
    shift 2
    log="$WEIR_SESSION_DIR/$id.jsonl"
    "$GEN" -o "$log" --session "$id" "$@" 2>"$TMP/gen.err" || { fail "$id: gen: $(cat "$TMP/gen.err")"; return; }
    "$WEIR" log "$log" --check >"$TMP/check" 2>&1 || fail "$id: --check: $(head -n 5 "$TMP/check")"
    grep -q ": ok ([0-9]* events)$" "$TMP/check" || fail "$id: --check output: $(head -n 3 "$TMP/check")"
    "$WEIR" log "$log" --derive >"$TMP/derive" 2>&1 || fail "$id: --derive: $(head -c 300 "$TMP/derive")"
    grep -q '"role":"tool"' "$TMP/derive" || fail "$id: the derived history has no tool result"
    "$WEIR" sessions --json >"$TMP/list" 2>&1 || fail "$id: sessions: $(cat "$TMP/list")"
    grep "\"id\":\"$id\"" "$TMP/list" | grep -q "\"turns\":$turns,.*\"state\":\"idle\"" ||
        fail "$id: sessions does not list $turns idle turns: $(cat "$TMP/list")"
    # resume with one turn: the demo calls pow and answers
    "$WEIR" resume -c default -c "$TMP/nocompact.json" "$id" "what is 2 to the 10th?" \
        >"$TMP/out" 2>"$TMP/err" || fail "$id: resume: $(cat "$TMP/err")"
    grep -q "1024" "$TMP/out" || fail "$id: the resumed turn did not answer: $(cat "$TMP/out")"
    "$WEIR" log "$log" --check >"$TMP/check" 2>&1 || fail "$id: --check after resume: $(head -n 5 "$TMP/check")"
    n=$(grep -c '"type":"turn/end"' "$log")
    [ "$n" -eq $((turns + 1)) ] || fail "$id: $n turns after resume, want $((turns + 1))"
}

check_log big 20 --turns 20 --tool-bytes 50000
check_log many 500 --turns 500 --compact-every 100
grep -c '"type":"compaction/summary"' "$WEIR_SESSION_DIR/many.jsonl" | grep -qx 4 ||
    fail "many: want 4 compactions"
# --size stops at the turn that reaches it
"$GEN" -o "$TMP/sized.jsonl" --size 200000 --tool-bytes 1000 2>/dev/null || fail "gen --size"
size=$(wc -c <"$TMP/sized.jsonl")
[ "$size" -ge 200000 ] && [ "$size" -lt 210000 ] || fail "--size 200000 wrote $size bytes"
"$WEIR" log "$TMP/sized.jsonl" --check >/dev/null 2>&1 || fail "--size log does not check"

[ $FAILURES -eq 0 ] && echo "bench_biglog_quick: ok"
exit $FAILURES
