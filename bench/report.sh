#!/bin/sh
# bench/report.sh [OUT] [BUILD_DIR] - run bench/run.sh and write its figures
# as Markdown to OUT (default bench/results.md): the machine, the date, the
# commit, run.sh's summary lines, then one table per bench with every figure
# and every ratio to the floor that bench measured in the same run.
# `make bench` runs it.  The exit status is run.sh's.  See bench/README.md.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
out=${1:-$here/results.md}
build=${2:-$src/build-bench-release}
summary=$(mktemp "${TMPDIR:-/tmp}/weir-bench.XXXXXX") || exit 2
trap 'rm -f "$summary"' EXIT INT TERM

sh "$here/run.sh" "$build" >"$summary"
status=$?
cat "$summary"

# key=value lines -> Markdown tables: a new table whenever the row's label
# (its first word without '=') or its set of keys changes.
tables() {
    awk '
        {
            label = ""; n = 0; sig = ""
            for (i = 1; i <= NF; i++) {
                eq = index($i, "=")
                if (eq == 0) { if (n == 0) label = label (label == "" ? "" : " ") $i; continue }
                n++; key[n] = substr($i, 1, eq - 1); val[n] = substr($i, eq + 1)
                sig = sig " " key[n]
            }
            if (n == 0) { if (open) print ""; open = 0; print "    " $0; print ""; prev = ""; next }
            sig = label "|" sig
            if (sig != prev) {
                if (open) print ""
                head = "| " (label == "" ? "run" : label); rule = "|---"
                for (i = 1; i <= n; i++) { head = head " | " key[i]; rule = rule "|---:" }
                print head " |"; print rule "|"
                prev = sig; open = 1
            }
            row = "| " (label == "" ? "" : label)
            for (i = 1; i <= n; i++) row = row " | " val[i]
            print row " |"
        }
        END { if (open) print "" }
    '
}

# describe the machine without naming its paths or its host name
cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo "?")
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo "unknown")
if [ "$commit" != unknown ] && ! git -C "$src" diff --quiet HEAD -- 2>/dev/null; then
    commit="$commit (with uncommitted changes)"
fi
cc_version=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n 1)
cc_version=$([ -n "$cc_version" ] && "$cc_version" --version 2>/dev/null | head -n 1)

{
    echo "# weir benchmark results"
    echo
    echo "Written by \`make bench\` (bench/report.sh). Each figure is a ratio to a floor measured in"
    echo "the same run on the same machine; compare ratios, not times, across machines and runs"
    echo "(bench/README.md says how to read each table)."
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- commit: $commit"
    echo "- machine: $(uname -srm), ${cpu:-unknown CPU}, $cores online CPUs, ${mem:-? GiB} RAM"
    echo "- compiler: ${cc_version:-unknown}; build type Release, no sanitizers"
    echo "- run.sh exit status: $status"
    echo
    echo "## Summary (bench/run.sh)"
    echo
    grep -v '^==' "$summary" | sed "s|$src/||g; s/^/    /"
    echo
    echo "## bench_overhead: host overhead per step (weir vs raw libcurl client)"
    echo
    if [ -s "$build/bench-overhead.txt" ]; then tables <"$build/bench-overhead.txt"; fi
    sed -n 's/^bench_overhead (callgrind): /callgrind_instructions /p' "$summary" | tables
    echo "## check_instructions: instructions per step, default chain (vs raw floor), start-up"
    echo
    if [ -s "$build/bench-instructions.txt" ]; then tables <"$build/bench-instructions.txt"; fi
    echo "## bench_log: append throughput (vs write(2)) and derive cost (vs deep copy)"
    echo
    if [ -s "$build/bench-log.txt" ]; then tables <"$build/bench-log.txt"; fi
    echo "## bench_load: loading time, 4096 vs 1024 plugin rows (vs json_load_file)"
    echo
    if [ -s "$build/bench-load.txt" ]; then tables <"$build/bench-load.txt"; fi
    echo "## bench_compaction: the pre-step check at 100, 1,000 and 10,000 nodes"
    echo
    if [ -s "$build/bench-compaction.txt" ]; then tables <"$build/bench-compaction.txt"; fi
    echo "## bench_sessions: RSS after 3,000 sequential sessions vs after 200"
    echo
    if [ -s "$build/bench-sessions.txt" ]; then tables <"$build/bench-sessions.txt"; fi
    echo "## bench_agents: 1,000 agents open at once (RSS per agent beyond its history, steps/s)"
    echo
    if [ -s "$build/bench-agents.txt" ]; then tables <"$build/bench-agents.txt"; fi
    echo "## weir_run_rss: peak RSS of a 50-step \`weir run\` (vs a plain libcurl client)"
    echo
    if [ -s "$build/bench-rss.txt" ]; then tables <"$build/bench-rss.txt"; fi
    echo "## bench_peers: loop ms/step, weir embedded vs a raw Python client, the C floor and pi-agent-core (bench/peers)"
    echo
    if [ -s "$build/bench-peers.txt" ]; then tables <"$build/bench-peers.txt"; fi
    echo "## bench_connections: TCP connections per request"
    echo
    if [ -s "$build/bench-connections.txt" ]; then tail -n 1 "$build/bench-connections.txt" | tables; fi
    # any other bench run.sh ran (its full output in bench-NAME.txt)
    for f in "$build"/bench-*.txt; do
        name=$(basename "$f" .txt)
        case $name in
        bench-build | bench-overhead | bench-log | bench-load | bench-compaction | bench-connections | \
            bench-instructions | bench-sessions | bench-agents | bench-rss | bench-peers) continue ;;
        esac
        [ -s "$f" ] || continue
        echo "## bench_${name#bench-}"
        echo
        tables <"$f"
    done
} | sed "s|$src/||g" >"$out"
echo "bench: wrote $out"
exit $status
