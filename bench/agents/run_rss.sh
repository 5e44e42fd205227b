#!/bin/sh
# bench/agents/run_rss.sh BUILD_DIR - peak RSS of a 50-step `weir run`
# (issue #15: <= 8 MB) against floors measured in the same run:
#   - bench_rss_floor: a plain libcurl client (curl_global_init, one
#     keep-alive handle) making as many requests to the same mock;
#   - `weir --version`: the weir binary with its libraries mapped, no work.
# The run: the default policy chain of issue #15 (tools-ffi with libm's pow,
# inline as in the built-in default deployment,
# compaction-basic with a known window, retry), fsync none, against
# weir-mock-llm answering 49 tool calls (3-character argument deltas) and
# then a text: 50 steps in one turn.  Peak RSS is GNU time's %M (VmHWM).
# One line:
#   weir_run_rss steps=50 weir_hwm_kb=... floor_hwm_kb=... ratio=...
#                version_hwm_kb=... over_floor_kb=... target_kb=8192
# A measurement: exit 0 when every run completed, 2 otherwise (never on the
# figures).  See bench/README.md.
set -u
build=${1:?usage: run_rss.sh BUILD_DIR}
bin=$build/bin
steps=50
time_bin=/usr/bin/time
[ -x "$time_bin" ] || { echo "run_rss: needs GNU time ($time_bin)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-rss.XXXXXX") || exit 2
mock_pid=
cleanup() {
    [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# 49 tool calls, then the answer: weir asks 50 times (the loop serves the floor too)
i=0
reqs=
while [ $i -lt $((steps - 1)) ]; do
    reqs="$reqs{\"tool_calls\":[{\"id\":\"call_$i\",\"name\":\"pow\",\"arguments\":\"{\\\"x\\\":2,\\\"y\\\":$((i % 10))}\"}],\"chunk_size\":3},"
    i=$((i + 1))
done
printf '{"loop":true,"requests":[%s{"text":"Done: all the powers are computed.","chunk_size":3}]}\n' \
    "$reqs" >"$work/script.json"
"$bin/weir-mock-llm" --script "$work/script.json" --port-file "$work/port" --timeout-s 300 \
    >"$work/mock.out" 2>&1 &
mock_pid=$!
i=0
while [ ! -s "$work/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
port=$(cat "$work/port" 2>/dev/null)
[ -n "$port" ] || { echo "run_rss: the mock did not start" >&2; exit 2; }
cat >"$work/deploy.json" <<EOF
{
  "agent": {"provider": "llm", "model": "m", "max_tokens": 256},
  "session": {"dir": "$work/sessions", "fsync": "none"},
  "plugin_path": ["$build/lib/weir/plugins"],
  "plugins": [
    {"id": "llm", "plugin": "provider-openai",
     "config": {"base_url": "http://127.0.0.1:$port/v1", "api_key": "k",
                "models": {"m": {"context_window": 100000, "max_output": 256}}}},
    {"id": "math", "plugin": "tools-ffi",
     "config": {"tools": [{"library": "libm.so.6", "symbol": "pow",
                           "prototype": "double pow(double x, double y)",
                           "description": "x raised to the power y", "inline": true}]}},
    {"id": "compaction", "plugin": "compaction-basic", "after": "llm", "config": {}},
    {"id": "retry", "plugin": "retry", "after": "compaction", "config": {"max_retries": 2}}
  ]
}
EOF
# peak RSS in kB of a command (GNU time's %M), empty when it failed
hwm() {
    "$time_bin" -f '%M' -o "$work/hwm" "$@" >"$work/cmd.out" 2>"$work/cmd.err" &&
        tail -n 1 "$work/hwm"
}
w=$(hwm "$bin/weir" run -c "$work/deploy.json" "compute powers")
calls=$(grep -c '^\[tool\] pow' "$work/cmd.err" 2>/dev/null)
if [ -z "$w" ] || [ "${calls:-0}" -ne $((steps - 1)) ]; then
    echo "run_rss: weir run failed or did not take $steps steps:" >&2
    tail -n 5 "$work/cmd.err" >&2
    exit 2
fi
f=$(hwm "$bin/bench_rss_floor" --url "http://127.0.0.1:$port/v1/chat/completions" \
    --requests $steps) || { echo "run_rss: the floor failed" >&2; exit 2; }
v=$(hwm "$bin/weir" --version) || { echo "run_rss: weir --version failed" >&2; exit 2; }
echo "weir_run_rss steps=$steps weir_hwm_kb=$w floor_hwm_kb=$f" \
     "ratio=$(awk -v w="$w" -v f="$f" 'BEGIN { printf "%.2f", w / f }')" \
     "version_hwm_kb=$v over_floor_kb=$((w - f)) target_kb=8192"
