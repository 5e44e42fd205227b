#!/bin/sh
# bench/peers/run.sh [BUILD_DIR] - the peer benchmark's table (issue #15): S
# sessions x K steps in one process against one weir-mock-llm, loop time
# only, for a raw Python http.client (the floor), the same loop in C with
# libcurl and jansson (c-raw: what the bytes cost from C, the lowest a host
# built on libcurl can reach) and weir embedded (plain, with compaction and
# retry, with fsync step), and pi-agent-core (pi_client.mjs: the fastest
# agent framework of issue #15's table, at the version package-lock.json
# pins, installed by cmake/npm-ci.sh into BUILD_DIR/bench/peers-node).
# Each row's ratio_to_python is to the Python client's loop ms/step measured
# in the same run, ratio_to_c_raw to the C floor's and ratio_to_pi to pi's.
# The other frameworks of that table (@openai/agents, Vercel ai, LangGraph)
# are not installed here; their figures came from an outside run of the same
# loop.  The peers take turns for PEERS_REPS rounds and each row is its best
# round (best_of=N says how many it ran), as bench_overhead's best_* figures.
# Every row that ran is printed, then a peer_parts row for each weir row: where
# its loop went (the agent's open and close per session, the send and the run
# of a turn per step).  The exit status is 2 when one failed.
#   PEERS_SESSIONS (200), PEERS_STEPS (5), PEERS_REPS (3)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "$(dirname "$here")")/build-bench-release}
S=${PEERS_SESSIONS:-200}
K=${PEERS_STEPS:-5}
REPS=${PEERS_REPS:-3}
command -v python3 >/dev/null 2>&1 || { echo "peers: python3 is not installed" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-peers.XXXXXX")
mock=
trap '[ -n "$mock" ] && kill "$mock" 2>/dev/null; rm -rf "$work"' EXIT INT TERM
printf '%s\n' '{"loop":true,"requests":[{"text":"Peers answer the same: this reply streams in a few pieces and is folded into the history.","chunk_size":24,"usage":{"input_tokens":100,"output_tokens":30}}]}' >"$work/script.json"
"$build/bin/weir-mock-llm" --script "$work/script.json" --port-file "$work/port" --timeout-s 3600 \
    >"$work/mock.out" 2>&1 &
mock=$!
i=0
while [ ! -s "$work/port" ]; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "peers: the mock did not start" >&2; exit 2; }
    sleep 0.1
done
base="http://127.0.0.1:$(cat "$work/port")/v1"
node_dir=$build/bench/peers-node
pi_ok=0
if sh "$here/../../cmake/npm-ci.sh" "$here" "$node_dir" \
        node_modules/@mariozechner/pi-agent-core/package.json >&2 &&
        cp "$here/pi_client.mjs" "$node_dir/"; then
    pi_ok=1
else
    echo "peers: pi-agent-core could not be installed (cmake/npm-ci.sh)" >&2
fi
rc=0
r=0
all=$work/all
: >"$all"
# The peers take turns, REPS rounds of all of them, so a busy spell of the
# machine falls on every row alike; each row keeps its best round.
while [ $r -lt "$REPS" ]; do
    r=$((r + 1))
    python3 "$here/raw_client.py" "$base" "$S" "$K" >>"$all" ||
        { echo "peers: python-raw failed" >&2; rc=2; }
    for v in raw plain policy fsync-step; do
        rm -rf "$work/s-$v"
        mkdir -m 700 "$work/s-$v"
        "$build/bin/bench_peers" --base-url "$base" --dir "$work/s-$v" --sessions "$S" \
            --steps "$K" --variant "$v" >>"$all" ||
            { echo "peers: bench_peers --variant $v failed" >&2; rc=2; }
    done
    if [ $pi_ok = 1 ]; then
        node "$node_dir/pi_client.mjs" "$base" "$S" "$K" >>"$all" ||
            { echo "peers: pi-agent-core failed" >&2; rc=2; }
    else
        rc=2
    fi
done
# the best round of each row, in the order the rows first ran
out=$work/rows
awk -v reps="$REPS" '{
    name = $0; sub(/.*name=/, "", name); sub(/ .*/, "", name)
    ms = $0; sub(/.*loop_ms_per_step=/, "", ms); sub(/ .*/, "", ms)
    if (!(name in best)) { order[++n] = name; best[name] = $0; low[name] = ms + 0 }
    else if (ms + 0 < low[name]) { best[name] = $0; low[name] = ms + 0 }
    runs[name]++
} END { for (i = 1; i <= n; i++) print best[order[i]] " best_of=" runs[order[i]] }' "$all" >"$out"
# ms NAME: the loop ms/step of row NAME, or 0
ms() { sed -n "s/.*name=$1 .*loop_ms_per_step=\([0-9.]*\).*/\1/p" "$out"; }
floor=$(ms python-raw)
cfloor=$(ms c-raw)
pi=$(ms pi-agent-core)
parts=$work/parts
: >"$parts"
while read -r line; do
    v=$(echo "$line" | sed 's/.*loop_ms_per_step=\([0-9.]*\).*/\1/')
    # weir's rows say where their loop went: those fields get a table of their own
    case $line in
    *open_us_per_session=*)
        echo "peer_parts $(echo "$line" | sed 's/^peer \(name=[^ ]*\).* \(open_us_per_session=.*\)/\1 \2/;
                                                s/ best_of=[0-9]*$//')" >>"$parts"
        line=$(echo "$line" | sed 's/ open_us_per_session=.* \(best_of=\)/ \1/') ;;
    esac
    echo "$line $(awk -v a="$v" -v b="${floor:-0}" -v c="${cfloor:-0}" -v p="${pi:-0}" 'BEGIN {
        printf "ratio_to_python=%.2f ratio_to_c_raw=%.2f", (b > 0 ? a / b : 0), (c > 0 ? a / c : 0)
        if (p > 0) printf " ratio_to_pi=%.2f", a / p }')"
done <"$out"
cat "$parts"
exit $rc
