#!/bin/sh
# bench/biglog/run.sh BUILD_DIR [--quick] - what a long-lived session's log
# costs its readers (issue #34). Generates two logs with bench_biglog_gen:
#
#   1g     20,000 turns, each with a 50 KB tool result (about 1.1 GB)
#   turns  200,000 small turns, a pressure compaction every 100 turns (~0.8 GB)
#
# and for each measures wall time and peak RSS of a plain parse pass over the
# file (bench_biglog_parse: getline + json_loadb per line, the floor), `weir
# sessions` over a folder holding only that log, `weir log FILE --check`, and
# `weir resume ID PROMPT` with one turn of the built-in scripted demo (no
# network). One key=value line per log, every figure also as a ratio to the
# parse pass and to the file's size, and pass=yes|no for the issue's targets.
# --quick: small logs (400 big turns, about 20 MB; 5,000 small turns), a
# smoke run in well under a minute.
#
# Every measured command runs under `timeout` (BIGLOG_TIMEOUT seconds, 300)
# and `ulimit -v` (BIGLOG_MEM_MB, 16384): a figure reads `timeout` or
# `fail(CODE)` (a memory cap hit shows as a failure) rather than hanging the
# machine. Other knobs: BIGLOG_TURNS (200000), BIGLOG_COMPACT_EVERY (100),
# BIGLOG_1G_TURNS (20000), BIGLOG_TOOL_BYTES (50000), BIGLOG_ONLY (1g or
# turns: run one log), BIGLOG_KEEP=1 (keep the temp dir), TMPDIR.
set -u
build=${1:?usage: bench/biglog/run.sh BUILD_DIR [--quick]}
quick=0
[ "${2:-}" = "--quick" ] && quick=1
timeout_s=${BIGLOG_TIMEOUT:-300}
mem_mb=${BIGLOG_MEM_MB:-16384}
turns_n=${BIGLOG_TURNS:-200000}
compact_every=${BIGLOG_COMPACT_EVERY:-100}
big_turns=${BIGLOG_1G_TURNS:-20000}
tool_bytes=${BIGLOG_TOOL_BYTES:-50000}
if [ $quick -eq 1 ]; then
    turns_n=${BIGLOG_TURNS:-5000}
    big_turns=${BIGLOG_1G_TURNS:-400}
    timeout_s=${BIGLOG_TIMEOUT:-60}
fi

[ -f "$build/CMakeCache.txt" ] || {
    echo "run.sh: $build is not a configured build tree (cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DWEIR_SANITIZE=)" >&2
    exit 2
}
if ! cmake --build "$build" -j"${BENCH_JOBS:-2}" --target weir_cli bench_biglog_gen bench_biglog_parse \
        bench_biglog_rss weir-provider-scripted weir-tools-ffi weir-compaction-basic weir-retry \
        weir-system-prompt >"$build/bench-biglog-build.txt" 2>&1; then
    tail -n 30 "$build/bench-biglog-build.txt" >&2
    echo "run.sh: build failed; see $build/bench-biglog-build.txt" >&2
    exit 2
fi
bin=$(cd "$build/bin" && pwd)
weir=$bin/weir
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build/CMakeCache.txt" ||
    echo "run.sh: warning: $build is not a Release build; the figures are not comparable" >&2

TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-biglog.XXXXXX") || exit 1
if [ "${BIGLOG_KEEP:-0}" = 1 ]; then
    echo "run.sh: keeping $TMP" >&2
else
    trap 'rm -rf "$TMP"' EXIT INT TERM
fi
export OPENAI_API_KEY= ANTHROPIC_API_KEY= WEIR_LOG_LEVEL=error
# the built-in deployment (scripted demo, pow, system prompt, retry), with or
# without compaction-basic
echo '{"plugins": [{"id": "compaction", "disabled": true}]}' >"$TMP/nocompact.json"

# The meter: GNU time when installed, else bench_biglog_rss. Writes
# "WALL_S MAXRSS_KB EXIT" to $TMP/m.
if [ -x /usr/bin/time ] && /usr/bin/time -o "$TMP/m" -f "%e %M %x" true 2>/dev/null; then
    meter() { /usr/bin/time -o "$TMP/m" -f "%e %M %x" "$@"; }
    meter_name=gnu-time
else
    meter() { "$bin/bench_biglog_rss" "$TMP/m" "$@"; }
    meter_name=bench_biglog_rss
fi

# measure NAME CMD... : sets NAME_s, NAME_rss_mb (a number, or timeout /
# fail(CODE)) and NAME_ok; the command's output goes to $TMP/NAME.out/.err
measure() {
    name=$1
    shift
    rm -f "$TMP/m"
    (ulimit -v $((mem_mb * 1024)) && meter timeout -k 10 "$timeout_s" "$@") \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    set -- $(tail -n 1 "$TMP/m" 2>/dev/null) x x x
    wall=$1 kb=$2 code=$3
    # GNU time reports a signalled child as "Command terminated by signal"
    case $code in [0-9]*) ;; *) code=1 ;; esac
    if [ "$code" = 124 ] || [ "$code" = 137 ]; then
        # the peak RSS until the kill, a lower bound
        s=timeout rss=timeout ok=0
        case $kb in [0-9]*) rss=$(awk -v k="$kb" 'BEGIN { printf "timeout(%.1f)", k / 1024 }') ;; esac
    elif [ "$code" != 0 ]; then
        s="fail($code)" rss="fail($code)" ok=0
    else
        s=$wall rss=$(awk -v k="$kb" 'BEGIN { printf "%.1f", k / 1024 }') ok=1
    fi
    eval "${name}_s=\$s ${name}_rss_mb=\$rss ${name}_ok=\$ok ${name}_wall=\$wall ${name}_kb=\$kb"
}

# ratio A B: A / B to 2 decimals, or - when either is not a number
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b + 0 == 0) { print "-"; exit }
        printf "%.2f", a / b }'
}
# le A B: yes when A <= B (numbers), else no
le() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/) { print "no"; exit }
        print (a + 0 <= b + 0) ? "yes" : "no" }'
}

run_case() { # LABEL ID RESUME-OVERLAY GEN-OPTIONS...
    label=$1 id=$2 overlay=$3
    shift 3
    dir=$TMP/$label
    mkdir -m 700 "$dir" || return 1
    log=$dir/$id.jsonl
    export WEIR_SESSION_DIR="$dir"
    t0=$(date +%s.%N)
    if ! "$bin/bench_biglog_gen" -o "$log" --session "$id" "$@" 2>"$TMP/gen.err"; then
        echo "biglog log=$label FAILED: gen: $(cat "$TMP/gen.err")"
        return 1
    fi
    gen_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    # gen's own line: bytes events turns compactions surface_bytes
    stats=$(sed -n 's/^gen file=[^ ]* bytes=[0-9]* //p' "$TMP/gen.err")
    bytes=$(wc -c <"$log")
    surface=$(echo "$stats" | sed -n 's/.*surface_bytes=\([0-9]*\).*/\1/p')
    file_mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
    surface_mb=$(awk -v b="$surface" 'BEGIN { printf "%.1f", b / 1048576 }')
    # the page cache holds the file now: every reader below reads it warm

    measure parse "$bin/bench_biglog_parse" "$log"
    measure sessions "$weir" sessions
    [ "$sessions_ok" = 1 ] && ! grep -q "^$id .* idle " "$TMP/sessions.out" && {
        sessions_s="bad" sessions_ok=0
        echo "biglog log=$label: weir sessions did not list the log idle: $(tail -n 2 "$TMP/sessions.out")" >&2
    }
    measure check "$weir" log "$log" --check
    [ "$check_ok" = 1 ] || [ "$check_s" = timeout ] || [ "$check_s" = "fail(124)" ] ||
        echo "biglog log=$label: weir log --check: $(head -n 3 "$TMP/check.out" "$TMP/check.err")" >&2
    if [ -n "$overlay" ]; then
        measure resume "$weir" resume -c default -c "$overlay" "$id" \
            "what is 2 to the 10th?"
    else
        measure resume "$weir" resume -c default "$id" "what is 2 to the 10th?"
    fi
    if [ "$resume_ok" = 1 ] && ! grep -q 1024 "$TMP/resume.out"; then
        resume_s="bad" resume_ok=0
        echo "biglog log=$label: the resumed turn did not answer: $(tail -n 3 "$TMP/resume.err")" >&2
    fi

    line="biglog log=$label bytes=$bytes file_mb=$file_mb $stats surface_mb=$surface_mb gen_s=$gen_s"
    line="$line parse_s=$parse_s parse_rss_mb=$parse_rss_mb"
    for m in sessions check resume; do
        eval "s=\$${m}_s rss=\$${m}_rss_mb"
        line="$line ${m}_s=$s ${m}_rss_mb=$rss ${m}_ratio_parse=$(ratio "$s" "$parse_s")"
        line="$line ${m}_rss_ratio_parse=$(ratio "$rss" "$parse_rss_mb")"
        line="$line ${m}_s_per_gb=$(ratio "$s" "$(awk -v b="$bytes" 'BEGIN { printf "%.6f", b / 1e9 }')")"
        line="$line ${m}_rss_ratio_file=$(ratio "$rss" "$file_mb")"
    done
    # the targets of issue #34
    p_sessions=no
    [ "$(le "$sessions_s" 1)" = yes ] && [ "$(le "$sessions_rss_mb" 64)" = yes ] && p_sessions=yes
    p_check=$(le "$check_rss_mb" 128)
    resume_cap_s=$(awk -v p="$parse_s" 'BEGIN { if (p !~ /^[0-9.]+$/) print "-"; else printf "%.2f", 2 * p }')
    resume_cap_mb=$(awk -v s="$surface_mb" 'BEGIN { printf "%.1f", 2 * s + 64 }')
    p_resume=no
    [ "$(le "$resume_s" "$resume_cap_s")" = yes ] && [ "$(le "$resume_rss_mb" "$resume_cap_mb")" = yes ] &&
        p_resume=yes
    line="$line sessions_target=1s/64MB sessions_pass=$p_sessions check_target=128MB check_pass=$p_check"
    line="$line resume_target=${resume_cap_s}s/${resume_cap_mb}MB resume_pass=$p_resume"
    echo "$line"
    rm -f "$log"
}

echo "biglog meter=$meter_name timeout_s=$timeout_s mem_cap_mb=$mem_mb quick=$quick"
status=0
if [ "${BIGLOG_ONLY:-1g}" = 1g ]; then
    run_case 1g big "$TMP/nocompact.json" --turns "$big_turns" --tool-bytes "$tool_bytes" || status=1
fi
if [ "${BIGLOG_ONLY:-turns}" = turns ]; then
    run_case turns turns "" --turns "$turns_n" --compact-every "$compact_every" || status=1
fi
exit $status
