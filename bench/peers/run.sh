#!/bin/sh
# bench/peers/run.sh [BUILD_DIR] - the peer benchmark's table (issue #15): S
# sessions x K steps in one process against one weir-mock-llm, loop time
# only, for a raw Python http.client (the floor), the same loop in C with
# libcurl and jansson (c-raw: what the bytes cost from C, the lowest a host
# built on libcurl can reach) and weir embedded (plain, with compaction and
# retry, with fsync step).  Each row's ratio is to the Python client's loop
# ms/step measured in the same run, and ratio_to_c_raw to the C floor's.  Peers written in
# other languages (pi-agent-core, @openai/agents, ...) are not installed
# here; their figures in issue #15 came from an outside run of the same loop.
#   PEERS_SESSIONS (200), PEERS_STEPS (5)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "$(dirname "$here")")/build-bench-release}
S=${PEERS_SESSIONS:-200}
K=${PEERS_STEPS:-5}
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
out=$work/rows
python3 "$here/raw_client.py" "$base" "$S" "$K" >"$out"
for v in raw plain policy fsync-step; do
    mkdir -m 700 "$work/s-$v"
    "$build/bin/bench_peers" --base-url "$base" --dir "$work/s-$v" --sessions "$S" --steps "$K" \
        --variant "$v" >>"$out"
done
floor=$(sed -n 's/.*name=python-raw .*loop_ms_per_step=\([0-9.]*\).*/\1/p' "$out")
cfloor=$(sed -n 's/.*name=c-raw .*loop_ms_per_step=\([0-9.]*\).*/\1/p' "$out")
while read -r line; do
    ms=$(echo "$line" | sed 's/.*loop_ms_per_step=\([0-9.]*\).*/\1/')
    echo "$line $(awk -v a="$ms" -v b="$floor" -v c="$cfloor" \
        'BEGIN { printf "ratio_to_python=%.2f ratio_to_c_raw=%.2f", (b > 0 ? a / b : 0), (c > 0 ? a / c : 0) }')"
done <"$out"
