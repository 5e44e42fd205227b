#!/bin/sh
# bench/run.sh [BUILD_DIR] - build every bench in a Release tree and run it,
# printing one summary line per bench (full output in BUILD_DIR/bench-*.txt).
#
#   bench/run.sh                      # builds ./build-bench-release
#   BENCH_STEPS=500 bench/run.sh      # more steps for bench_overhead
#   BENCH_CALLGRIND=0 bench/run.sh    # skip the callgrind instruction counts
#   BENCH_FLAT="20 200" bench/run.sh  # history lengths of check_instructions.sh
#   BENCH_BIGLOG=full bench/run.sh    # the big-log bench at full size (about
#                                     # 20 minutes; default: quick; 0 skips it)
#
# Benches never fail on timing: they print ratios to a floor measured in the
# same run.  The exit status is non-zero only when a bench could not be built
# or did not complete its work.  See bench/README.md.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-$src/build-bench-release}
steps=${BENCH_STEPS:-200}
jobs=${BENCH_JOBS:-2}
status=0

echo "== configure + build (Release) in $build"
# -g: callgrind's split needs every function's source file; it does not
# change the code (bench/check_instructions.sh)
if ! cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS_RELEASE="-O3 -DNDEBUG -g" -DWEIR_SANITIZE= \
        -DWEIR_BUILD_TESTS=ON >"$build.configure.log" 2>&1; then
    echo "configure failed; see $build.configure.log" >&2
    exit 2
fi
rm -f "$build.configure.log"
if ! cmake --build "$build" -j"$jobs" --target bench_overhead bench_log bench_connections bench_load \
        bench_compaction bench_sessions bench_agents bench_rss_floor bench_peers bench_store_postgres weir_cli \
        bench_cache bench_strategies bench_telemetry weir-mock-llm weir-provider-openai weir-provider-anthropic weir-tools-ffi \
        weir-compaction-basic weir-retry weir-system-prompt weir-drvtest-tools \
        >"$build/bench-build.txt" 2>&1; then
    tail -n 30 "$build/bench-build.txt" >&2
    echo "build failed; see $build/bench-build.txt" >&2
    exit 2
fi
bin=$build/bin

# bench_overhead: its output is already one line
if "$bin/bench_overhead" --steps "$steps" --rounds 5 >"$build/bench-overhead.txt" \
        2>"$build/bench-overhead.err"; then
    echo "bench_overhead: $(cat "$build/bench-overhead.txt")"
else
    echo "bench_overhead: FAILED ($(tail -n 3 "$build/bench-overhead.err"))"
    status=1
fi
# the set-up of issue #15: the default chain, one turn of 22 steps, a tool
# call in 3-character deltas at each step but the last; fsync none, then step
for fs in none step; do
    if line=$("$bin/bench_overhead" --shape tools --steps 22 --rounds 9 --fsync "$fs" \
            2>>"$build/bench-overhead.err"); then
        echo "tools_fsync_$fs $line" >>"$build/bench-overhead.txt"
        echo "bench_overhead (tools, fsync $fs): $line"
    else
        echo "bench_overhead (tools, fsync $fs): FAILED ($(tail -n 3 "$build/bench-overhead.err"))"
        status=1
    fi
done

# deterministic instruction counts of each phase (callgrind, if present)
if [ "${BENCH_CALLGRIND:-1}" != 0 ] && command -v valgrind >/dev/null 2>&1; then
    cg_steps=50
    ir() { # ir PHASE: instructions collected inside function PHASE
        out="$build/callgrind.$1.out"
        rm -f "$out"
        valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$1" \
            "$bin/bench_overhead" --steps $cg_steps --rounds 1 >/dev/null 2>"$build/callgrind.$1.err" &&
            sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$out" | head -n 1
    }
    w=$(ir weir_phase)
    r=$(ir raw_phase)
    if [ -n "$w" ] && [ -n "$r" ] && [ "$r" -gt 0 ]; then
        echo "bench_overhead (callgrind): steps=$cg_steps weir_ir_per_step=$((w / cg_steps))" \
             "raw_ir_per_step=$((r / cg_steps))" \
             "ratio=$(awk -v w="$w" -v r="$r" 'BEGIN { printf "%.2f", w / r }')"
    else
        echo "bench_overhead (callgrind): FAILED (see $build/callgrind.*.err)"
        status=1
    fi
fi

# the instruction check of issue #15 (bench/check_instructions.sh): the default
# chain's instructions per step against the floor, their flatness in the
# history length and the start-up of `weir run`.  Over the target is a figure
# here, not a failure; only a run that could not complete fails.
if [ "${BENCH_CALLGRIND:-1}" != 0 ] && command -v valgrind >/dev/null 2>&1; then
    sh "$here/check_instructions.sh" --build "$build" --no-build \
        --target "${BENCH_IR_TARGET:-4}" --flat "${BENCH_FLAT:-20 200 2000}" \
        >"$build/bench-instructions.txt" 2>"$build/bench-instructions.err"
    case $? in
    0 | 1) sed 's/^/check_instructions: /' "$build/bench-instructions.txt" ;;
    *) echo "check_instructions: FAILED ($(tail -n 3 "$build/bench-instructions.err"))"
       status=1 ;;
    esac
fi

# bench_log: condense the append and derive lines into one
if "$bin/bench_log" >"$build/bench-log.txt" 2>"$build/bench-log.err"; then
    awk '
        /^append/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                    app = app sprintf(" %s=%s/s(x%s)", f["fsync"], f["weir_events_per_s"], f["ratio"]) }
        /^derive/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                    if (first == "") first = f["n"]; last = f["n"]; fold = f["fold_ratio_to_first"]
                    dc = f["derive_ratio_to_copy"]; fu = f["fold_us"]; ru = f["refold_us"] }
        END { printf "bench_log: append%s; derive n=%s..%s fold_us=%s fold_ratio_to_first=%s" \
                     " derive_ratio_to_copy=%s refold_us=%s\n", app, first, last, fu, fold, dc, ru }
    ' "$build/bench-log.txt"
else
    echo "bench_log: FAILED ($(tail -n 3 "$build/bench-log.err"))"
    status=1
fi

# bench_load: loading time against the number of plugin rows (1024 vs 4096)
if "$bin/bench_load" >"$build/bench-load.txt" 2>"$build/bench-load.err"; then
    awk '
        { for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
          line = line sprintf(" %s=%sus(x%s,floor x%s)", f["kind"], f["large_us"], f["ratio"],
                              f["parse_ratio"]) }
        END { printf "bench_load: %s rows vs %s:%s\n", f["large"], f["small"], line }
    ' "$build/bench-load.txt"
else
    echo "bench_load: FAILED ($(tail -n 3 "$build/bench-load.err"))"
    status=1
fi

# bench_compaction: the pre-step pressure check at 100, 1,000 and 10,000 nodes
if "$bin/bench_compaction" >"$build/bench-compaction.txt" 2>"$build/bench-compaction.err"; then
    awk '
        { for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
          line = line sprintf(" n=%s:%sus(x%s,walk x%s)", f["nodes"], f["check_us"],
                              f["ratio_to_first"], f["walk_ratio_to_first"]) }
        END { printf "bench_compaction: pre-step check%s\n", line }
    ' "$build/bench-compaction.txt"
else
    echo "bench_compaction: FAILED ($(tail -n 3 "$build/bench-compaction.err"))"
    status=1
fi

# bench_cache: billed input cost of a 40-step session against the append-only
# ideal (Anthropic) and the cached share of prompt tokens (OpenAI), token
# counts from the mock's cache accounting; each ratio marked against its target
if "$bin/bench_cache" >"$build/bench-cache.txt" 2>"$build/bench-cache.err"; then
    sed 's/^/bench_cache: /' "$build/bench-cache.txt"
else
    sed 's/^/bench_cache: /' "$build/bench-cache.txt"
    echo "bench_cache: FAILED ($(tail -n 3 "$build/bench-cache.err"))"
    status=1
fi

# bench_strategies: billed input cost of a 60-step session compacted under
# pressure, per compaction strategy chain and provider, against the
# append-only ideal (token counts from the mock's cache accounting)
if "$bin/bench_strategies" >"$build/bench-strategies.txt" 2>"$build/bench-strategies.err"; then
    sed 's/^/bench_strategies: /' "$build/bench-strategies.txt"
else
    sed 's/^/bench_strategies: /' "$build/bench-strategies.txt"
    echo "bench_strategies: FAILED ($(tail -n 3 "$build/bench-strategies.err"))"
    status=1
fi

# bench_sessions: RSS after 3,000 sequential sessions against after 200 (a ratio)
if "$bin/bench_sessions" >"$build/bench-sessions.txt" 2>"$build/bench-sessions.err"; then
    echo "bench_sessions: $(cat "$build/bench-sessions.txt")"
else
    echo "bench_sessions: FAILED ($(tail -n 3 "$build/bench-sessions.err"))"
    status=1
fi

# bench_agents: 1,000 agents open in one process (RSS per agent beyond its
# history, aggregate steps/s against sequential sessions)
if "$bin/bench_agents" >"$build/bench-agents.txt" 2>"$build/bench-agents.err"; then
    echo "bench_agents: $(cat "$build/bench-agents.txt")"
else
    echo "bench_agents: FAILED ($(tail -n 3 "$build/bench-agents.err"))"
    status=1
fi

# peak RSS of a 50-step `weir run` against a plain libcurl client's
if sh "$here/agents/run_rss.sh" "$build" >"$build/bench-rss.txt" 2>"$build/bench-rss.err"; then
    echo "weir_run_rss: $(cat "$build/bench-rss.txt")"
else
    echo "weir_run_rss: FAILED ($(tail -n 3 "$build/bench-rss.err"))"
    status=1
fi

# bench/peers: the peer benchmark's loop (weir embedded vs a raw Python
# client, the C floor and pi-agent-core); the rows that ran, even when one failed
if sh "$here/peers/run.sh" "$build" >"$build/bench-peers.txt" 2>"$build/bench-peers.err"; then
    sed 's/^/bench_peers: /' "$build/bench-peers.txt"
else
    sed 's/^/bench_peers: /' "$build/bench-peers.txt"
    echo "bench_peers: FAILED ($(grep '^peers:' "$build/bench-peers.err" | tail -n 3))"
    status=1
fi

# bench_store_postgres: a throwaway server (tests/pg/server.sh, fsync on)
pgdir=$build/bench-pg
if WEIR_PG_FSYNC=on sh "$src/tests/pg/server.sh" start "$pgdir" >/dev/null 2>"$build/bench-pg.err" &&
        "$bin/bench_store_postgres" --conninfo "$(cat "$pgdir/conninfo")" \
            >"$build/bench-store.txt" 2>>"$build/bench-pg.err"; then
    sed 's/^/bench_store_postgres: /' "$build/bench-store.txt"
else
    echo "bench_store_postgres: FAILED ($(tail -n 3 "$build/bench-pg.err"))"
    status=1
fi
sh "$src/tests/pg/server.sh" stop "$pgdir" >/dev/null 2>&1

# bench/biglog: the readers of a long-lived session's log (issue #34); its
# own lines, `biglog log=...`, quick (about 20 MB) unless BENCH_BIGLOG=full
case ${BENCH_BIGLOG:-quick} in
0) ;;
*)
    mode=--quick
    [ "${BENCH_BIGLOG:-quick}" = full ] && mode=
    if sh "$here/biglog/run.sh" "$build" $mode >"$build/bench-biglog.txt" 2>"$build/bench-biglog.err"; then
        grep '^biglog ' "$build/bench-biglog.txt"
    else
        echo "biglog: FAILED ($(tail -n 3 "$build/bench-biglog.err"))"
        status=1
    fi
    ;;
esac

# bench_telemetry: a turn with telemetry pointed at a collector that never
# answers, against the same turn without telemetry (issue #38)
if "$bin/bench_telemetry" --turns 100 --rounds 5 >"$build/bench-telemetry.txt" \
        2>"$build/bench-telemetry.err"; then
    echo "bench_telemetry: $(cat "$build/bench-telemetry.txt")"
else
    echo "bench_telemetry: FAILED ($(tail -n 3 "$build/bench-telemetry.err"))"
    status=1
fi

# bench_connections: a count (also a ctest)
if "$bin/bench_connections" >"$build/bench-connections.txt" 2>&1; then
    echo "bench_connections: $(tail -n 1 "$build/bench-connections.txt")"
else
    echo "bench_connections: FAILED ($(tail -n 1 "$build/bench-connections.txt"))"
    status=1
fi
exit $status
