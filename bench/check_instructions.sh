#!/bin/sh
# bench/check_instructions.sh [options] - the deterministic cost check of
# issue #15: instructions per step of the host against the raw libcurl floor
# (callgrind), with the default policy chain, and the start-up instructions
# of `weir run` until its first request.  See bench/README.md.
#
#   bench/check_instructions.sh                 # Release tree ./build-bench-release, target 4
#   bench/check_instructions.sh --target 3.5    # fail when weir/raw > 3.5
#   bench/check_instructions.sh --flat "20 200 2000"   # history-length flatness
#
# Options:
#   --build DIR      the Release tree (configured and built unless --no-build)
#   --no-build       use DIR as it is (bench_overhead, weir_cli, weir-mock-llm built)
#   --target R       the highest weir/raw ratio that passes (default 4)
#   --steps N        steps of the ratio check (default 50)
#   --chain C        default (tools-ffi, compaction-basic with a known window,
#                    retry) or none (provider-openai alone); default: default
#   --flat "N..."    step counts of the flatness table (default "20 200";
#                    "" skips it; 2000 steps take minutes under callgrind)
#   --startup-target I   start-up instructions shown as the target (3000000)
#
# Prints key=value lines (bench/report.sh turns them into tables):
#   instructions chain=default steps=50 weir_ir_per_step=... raw_ir_per_step=...
#       ratio=... target=4 pass=yes min_ir_per_step=... min_ratio=...
# (min: the second floor, a minimal correct streaming client that builds
# each body and parses each delta with jansson; min_ratio = weir / min)
#   instructions_tools steps=22 weir_ir_per_step=... raw_ir_per_step=... ratio=...
#       min_ir_per_step=... min_ratio=...
# (the set-up of issue #15: --shape tools, one turn of 22 steps with a tool
# call each but the last; a figure, not the exit status)
#   split steps=50 total=... http=... decode=... emit=... request=... log=...
#       derive=... hooks=... tools=... compaction=... policy=... lifecycle=...
#       malloc=...
#   split_tools steps=22 total=... (the same for the tools shape)
# (with --chain default: weir's instructions per step by part of the host,
# bench/split.py: each function's own instructions go to the part of its
# source file, shared code (libc, jansson, weir's helpers) to the part that
# called it, so the parts add up to total; malloc is how much of total is
# malloc and free, whoever called them.  The tree is built with -g for it:
# debug information does not change the code.  Needs python3.)
#   flat steps=20 weir_ir_per_step=... raw_ir_per_step=... ratio=...
#       weir_ratio_to_first=1.00 raw_ratio_to_first=1.00 excess_ir_per_step=...
#       excess_ratio_to_first=1.00
# (the mean per step over N steps; both sides grow with N, since the request
# bodies grow with the history; excess = weir - raw, the host beyond the bytes)
#   startup ir_to_first_request=... target=3000000 pass=no loader_ir=...
#       curl_global_init_ir=... rest_ir=... floor_ir=... over_floor_ir=...
#       over_floor_pass=yes
# (loader: ld.so's start, the relocation of every library weir links, libcurl's
# dependency closure included; curl_global_init: libcurl's and OpenSSL's
# initialization; rest: weir itself, its plugins' dlopen included; floor: the
# same count for bench_rss_floor, a plain libcurl client, to its first
# request; over_floor: weir's start-up beyond that floor, against the target)
# The exit status: 0 when the ratio is at most the target, 1 when it exceeds
# it, 2 when something could not be built or run (valgrind missing included).
# Only the per-step ratio decides the status; the other lines are figures.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=$src/build-bench-release
do_build=1
target=4
steps=50
chain=default
flat="20 200"
startup_target=3000000
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?}; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --target) target=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --chain) chain=${2:?}; shift 2 ;;
    --flat) flat=${2?}; shift 2 ;;
    --startup-target) startup_target=${2:?}; shift 2 ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
command -v valgrind >/dev/null 2>&1 || { echo "check_instructions: valgrind is not installed" >&2; exit 2; }
if [ $do_build = 1 ]; then
    if ! cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
            -DCMAKE_C_FLAGS_RELEASE="-O3 -DNDEBUG -g" -DWEIR_SANITIZE= \
            -DWEIR_BUILD_TESTS=ON >"$build.configure.log" 2>&1; then
        echo "check_instructions: configure failed; see $build.configure.log" >&2
        exit 2
    fi
    rm -f "$build.configure.log"
    if ! cmake --build "$build" -j"${BENCH_JOBS:-2}" --target bench_overhead bench_rss_floor weir_cli weir-mock-llm \
            >"$build/check-instructions-build.txt" 2>&1; then
        tail -n 20 "$build/check-instructions-build.txt" >&2
        echo "check_instructions: build failed" >&2
        exit 2
    fi
fi
bin=$build/bin
work=$(mktemp -d "${TMPDIR:-/tmp}/weir-check-ir.XXXXXX") || exit 2
mock_pid=
cleanup() {
    [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# ir PHASE STEPS: instructions callgrind collects inside function PHASE
ir() {
    out="$work/cg.$1.$2"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$1" \
        "$bin/bench_overhead" --steps "$2" --rounds 1 --fsync none --chain "$chain" \
        >/dev/null 2>"$work/cg.err" || { cat "$work/cg.err" >&2; return 1; }
    sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$out" | head -n 1
}
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

status=0
w=$(ir weir_phase "$steps") && r=$(ir raw_phase "$steps") && [ -n "$w" ] && [ -n "$r" ] ||
    { echo "check_instructions: bench_overhead failed under callgrind" >&2; exit 2; }
ratio=$(div "$w" "$r")
pass=$(awk -v x="$ratio" -v t="$target" 'BEGIN { print (x <= t ? "yes" : "no") }')
[ "$pass" = yes ] || status=1
m=$(ir min_phase "$steps") || m=
echo "instructions chain=$chain steps=$steps weir_ir_per_step=$((w / steps))" \
     "raw_ir_per_step=$((r / steps)) ratio=$ratio target=$target pass=$pass" \
     "min_ir_per_step=$((${m:-0} / steps)) min_ratio=$(div "$w" "${m:-0}")"

# the set-up of issue #15 (bench_overhead --shape tools: one turn of 22
# steps, a tool call in 3-character deltas at each but the last)
tools_ir() { # tools_ir PHASE: instructions inside PHASE, 22 steps of the tools shape
    out="$work/cg.tools.$1"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$1" \
        "$bin/bench_overhead" --shape tools --steps 22 --rounds 1 --fsync none \
        >/dev/null 2>"$work/cg.err" || { cat "$work/cg.err" >&2; return 1; }
    sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$out" | head -n 1
}
if tw=$(tools_ir weir_phase) && tr_=$(tools_ir raw_phase) && tm=$(tools_ir min_phase) &&
    [ -n "$tw" ] && [ -n "$tr_" ]; then
    echo "instructions_tools steps=22 weir_ir_per_step=$((tw / 22)) raw_ir_per_step=$((tr_ / 22))" \
         "ratio=$(div "$tw" "$tr_") min_ir_per_step=$((${tm:-0} / 22)) min_ratio=$(div "$tw" "${tm:-0}")"
else
    echo "check_instructions: the tools shape failed under callgrind" >&2
    status=2
fi

# where weir's instructions go, per step, by part of the host (bench/split.py:
# every function's own instructions go to its source file's part, shared code
# to its caller's; the parts add up to the total)
split_of() { # split_of PROFILE STEPS LABEL
    if command -v python3 >/dev/null 2>&1; then
        python3 "$here/split.py" "$1" "$2" "$3" ||
            { echo "check_instructions: bench/split.py failed on $1" >&2; status=2; }
    else
        echo "check_instructions: python3 is not installed: no $3 line" >&2
    fi
}
[ "$chain" = default ] && split_of "$work/cg.weir_phase.$steps" "$steps" split
[ -s "$work/cg.tools.weir_phase" ] && split_of "$work/cg.tools.weir_phase" 22 split_tools

# history-length flatness: the per-step mean at each step count
w0=
for n in $flat; do
    fw=$(ir weir_phase "$n") && fr=$(ir raw_phase "$n") && [ -n "$fw" ] && [ -n "$fr" ] ||
        { echo "check_instructions: flatness run of $n steps failed" >&2; status=2; break; }
    fw=$((fw / n)); fr=$((fr / n)); fx=$((fw - fr))
    [ -n "$w0" ] || { w0=$fw; r0=$fr; x0=$fx; }
    echo "flat steps=$n weir_ir_per_step=$fw raw_ir_per_step=$fr ratio=$(div "$fw" "$fr")" \
         "weir_ratio_to_first=$(div "$fw" "$w0") raw_ratio_to_first=$(div "$fr" "$r0")" \
         "excess_ir_per_step=$fx excess_ratio_to_first=$(div "$fx" "$x0")"
done

# start-up: `weir run` with a one-step answer from weir-mock-llm; callgrind
# dumps its counts at the first curl_multi_add_handle (the first request), so
# the first dump holds everything from exec to the request.
printf '%s\n' '{"loop":true,"requests":[{"text":"ok"}]}' >"$work/script.json"
"$bin/weir-mock-llm" --script "$work/script.json" --port-file "$work/port" --timeout-s 120 \
    >"$work/mock.out" 2>&1 &
mock_pid=$!
i=0
while [ ! -s "$work/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
port=$(cat "$work/port" 2>/dev/null)
cat >"$work/deploy.json" <<EOF
{
  "agent": {"provider": "llm", "model": "m", "max_tokens": 256},
  "session": {"dir": "$work/sessions", "fsync": "none"},
  "plugin_path": ["$build/lib/weir/plugins"],
  "plugins": [
    {"id": "llm", "plugin": "provider-openai",
     "config": {"base_url": "http://127.0.0.1:$port/v1", "api_key": "k",
                "models": {"m": {"context_window": 100000, "max_output": 256}}}}
  ]
}
EOF
if [ -n "$port" ] &&
    valgrind --tool=callgrind --callgrind-out-file="$work/start.%p" \
        --dump-before=curl_multi_add_handle "$bin/weir" run -c "$work/deploy.json" hello \
        >"$work/run.out" 2>"$work/run.err"; then
    first=$(ls "$work"/start.*.1 2>/dev/null | head -n 1)
    s=$([ -n "$first" ] && sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' \
        "$first" | head -n 1)
    spass=$(awk -v x="${s:-0}" -v t="$startup_target" 'BEGIN { print (x <= t ? "yes" : "no") }')
    # what the count holds: the dynamic loader's start (relocating libcurl's
    # dependency closure), libcurl's global init (OpenSSL's), and the rest
    incl() {
        callgrind_annotate --inclusive=yes "$first" 2>/dev/null |
            awk -v f="$1" '$0 ~ f { gsub(",", "", $1); print $1; exit }'
    }
    ld=$(incl ':_dl_start ')
    tls=$(incl ':curl_global_init ')
    own=$((${s:-0} - ${ld:-0} - ${tls:-0}))
    # the floor: a plain libcurl client (as Debian builds libcurl) to its
    # first request, counted the same way
    fl=
    if valgrind --tool=callgrind --callgrind-out-file="$work/floor.%p" \
            --dump-before=curl_multi_add_handle "$bin/bench_rss_floor" --requests 1 \
            --url "http://127.0.0.1:$port/v1/chat/completions" >/dev/null 2>"$work/floor.err"; then
        ffirst=$(ls "$work"/floor.*.1 2>/dev/null | head -n 1)
        fl=$([ -n "$ffirst" ] && sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' \
            "$ffirst" | head -n 1)
    fi
    over=$(( ${s:-0} - ${fl:-0} ))
    opass=$(awk -v x="$over" -v t="$startup_target" 'BEGIN { print (x <= t ? "yes" : "no") }')
    echo "startup ir_to_first_request=${s:-?} target=$startup_target pass=$spass" \
         "loader_ir=${ld:-?} curl_global_init_ir=${tls:-?} rest_ir=$own" \
         "floor_ir=${fl:-?} over_floor_ir=$over over_floor_pass=$opass"
else
    echo "check_instructions: weir run under callgrind failed:" >&2
    tail -n 5 "$work/run.err" >&2
    [ $status = 0 ] && status=2
fi
exit $status
