#!/bin/sh
# tests/scripts/log_stream_memory.sh WEIR GEN RSS - issue #34: `weir log FILE
# --json`, the transcript and `--why` read the log as a stream, so their
# peak RSS is bounded by the longest line and the check's surface, not by
# the file.  GEN is bench_biglog_gen (a ~36 MB valid log that compacts every
# 50 turns, so its surface stays small), RSS is bench_biglog_rss (peak RSS
# of a command, in KB).
#
# The bound: the peak RSS of the same command on a 2-turn log (the process
# itself: libraries, the sanitizers' shadow) + 16 MiB + the longest line.
# The 16 MiB cover the stream's window (1 MiB, grown to the longest line),
# the checker's surface (about 0.6 MB of JSON here, a few times that as
# jansson trees), stdio buffers and allocator slack; the file is more than
# twice that, so a reader that held the file (weir_log_events collects
# about 7 times the file as trees) cannot pass.
WEIR=${1:?usage: $0 path/to/weir path/to/bench_biglog_gen path/to/bench_biglog_rss}
GEN=${2:?usage: $0 WEIR GEN RSS}
RSS=${3:?usage: $0 WEIR GEN RSS}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-log-stream.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
# ASan keeps freed blocks in a quarantine (256 MB by default): every line
# freed would count.  A small one measures what the reader holds.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
export LC_ALL=C

"$GEN" -o "$TMP/big.jsonl" --turns 2600 --tool-bytes 10000 --compact-every 50 \
    --session big 2>"$TMP/gen" || { cat "$TMP/gen" >&2; exit 1; }
"$GEN" -o "$TMP/small.jsonl" --turns 2 --tool-bytes 10000 --session small 2>/dev/null ||
    exit 1
file_kb=$(($(wc -c <"$TMP/big.jsonl") / 1024))
line_kb=$(awk '{ if (length($0) > m) m = length($0) } END { print int(m / 1024) + 1 }' \
    "$TMP/big.jsonl")
events=$(wc -l <"$TMP/big.jsonl")
slack_kb=16384
[ "$file_kb" -gt $((2 * (slack_kb + line_kb))) ] ||
    fail "the log ($file_kb KB) is not twice the bound's slack: the test proves nothing"

# PEAK: the peak RSS (KB) of `weir log FILE ARGS...`, its stdout in $TMP/out
peak() {
    f=$1
    shift
    "$RSS" "$TMP/rss" "$WEIR" log "$f" "$@" >"$TMP/out" 2>"$TMP/err" ||
        fail "weir log $f $*: exit $? $(head -c 300 "$TMP/err")"
    PEAK=$(cut -d' ' -f2 "$TMP/rss")
}

small_events=$(wc -l <"$TMP/small.jsonl")
for mode in --json transcript --why; do
    case $mode in
    --json) small=--json big=--json ;;
    transcript) small= big= ;;
    --why) small="--why $((small_events - 1))" big="--why $((events - 1))" ;;
    esac
    # shellcheck disable=SC2086 # one or two words
    peak "$TMP/small.jsonl" $small
    base=$PEAK
    # shellcheck disable=SC2086
    peak "$TMP/big.jsonl" $big
    got=$PEAK
    bound=$((base + slack_kb + line_kb))
    echo "weir log FILE $mode: peak ${got} KB (2-turn log ${base} KB, bound ${bound} KB," \
        "file ${file_kb} KB, longest line ${line_kb} KB)"
    [ "$got" -le "$bound" ] || fail "$mode: peak RSS $got KB is over $bound KB (file $file_kb KB)"
    case $mode in
    --json) cmp -s "$TMP/out" "$TMP/big.jsonl" || fail "--json is not the log's lines" ;;
    transcript)
        grep -qx -- '--- turn 2600 ended: completed' "$TMP/out" ||
            fail "the transcript lacks the last turn: $(tail -3 "$TMP/out")"
        tail -1 "$TMP/out" | grep -q '^total usage (2600 turns): ' ||
            fail "the transcript lacks the total: $(tail -1 "$TMP/out")"
        ;;
    --why) grep -q "^decisions before seq $((events - 1)) " "$TMP/out" ||
        fail "--why: $(head -2 "$TMP/out")" ;;
    esac
done

# `weir log FILE --check` of a log that never compacts, whose surface is its
# whole history (8,001 nodes): the check holds each node as a stub and
# reads its line again when it needs the message, so it stays within the
# same slack plus 1 KiB a node (a stub is about 0.7 KB; 1.6 KB under ASan;
# ThreadSanitizer's allocator costs about three times that: 6 KiB a node
# there, WEIR_TEST_SANITIZE).  A check that held the nodes' messages (even
# with long strings hashed, as before: about 2.5 KB a node, twice at the
# end) needs about twice the bound.
"$GEN" -o "$TMP/flat.jsonl" --turns 2000 --tool-bytes 2000 --session flat 2>/dev/null || exit 1
nodes=$(grep -c '"surface_op"' "$TMP/flat.jsonl")
flat_line_kb=$(awk '{ if (length($0) > m) m = length($0) } END { print int(m / 1024) + 1 }' \
    "$TMP/flat.jsonl")
peak "$TMP/small.jsonl" --check
base=$PEAK
peak "$TMP/flat.jsonl" --check
got=$PEAK
case "${WEIR_TEST_SANITIZE:-}" in
*thread*) node_kb=6 ;;
*) node_kb=1 ;;
esac
bound=$((base + slack_kb + flat_line_kb + node_kb * nodes))
echo "weir log FILE --check (never compacts): peak ${got} KB (2-turn log ${base} KB," \
    "bound ${bound} KB, $nodes surface nodes)"
[ "$got" -le "$bound" ] || fail "--check: peak RSS $got KB is over $bound KB ($nodes nodes)"
grep -q ': ok (' "$TMP/out" || fail "--check: $(head -3 "$TMP/out")"

[ "$FAILURES" -eq 0 ] || exit 1
echo "log_stream_memory: ok"
