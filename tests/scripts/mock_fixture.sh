#!/bin/sh
# tests/scripts/mock_fixture.sh - the loopback mock LLM as a ctest fixture.
#   mock_fixture.sh start DIR   start weir-mock-llm on 127.0.0.1 (FIXTURES_SETUP);
#                               it exits by itself after 4 requests or 120 s
#   mock_fixture.sh run DIR     `weir run` twice against it through provider-openai
#   mock_fixture.sh stop DIR    stop it and check what it served (FIXTURES_CLEANUP)
# Each run is one process, so its provider row asks the server for the
# model's window once (GET /v1/models, docs/providers.md "Model table"):
# 2 requests a run, and the window reaches the log's request/context.
# Needs WEIR_TEST_BIN_DIR and WEIR_TEST_PLUGIN_DIR (ctest sets them).
set -eu
cmd=$1
dir=$2
bin=${WEIR_TEST_BIN_DIR:?}
case $cmd in
start)
    rm -rf "$dir" && mkdir -p "$dir"
    printf '%s\n' '{"loop":true,"models":[{"id":"m","object":"model","max_model_len":8192}],"requests":[{"text":"Fixture answer.","usage":{"input_tokens":5,"output_tokens":2}}]}' \
        > "$dir/script.json"
    # Detached from ctest's pipes, so this setup test ends while the server runs.
    nohup "$bin/weir-mock-llm" --script "$dir/script.json" --port-file "$dir/port" \
        --max-requests 4 --timeout-s 120 > "$dir/mock.out" 2>&1 < /dev/null &
    echo $! > "$dir/pid"
    i=0
    while [ ! -s "$dir/port" ]; do
        i=$((i + 1))
        [ $i -le 100 ] || { echo "weir-mock-llm did not start" >&2; cat "$dir/mock.out" >&2; exit 1; }
        sleep 0.1
    done
    echo "mock on 127.0.0.1:$(cat "$dir/port")"
    ;;
run)
    port=$(cat "$dir/port")
    cat > "$dir/deploy.json" <<JSON
{
  "agent": {"provider": "llm", "model": "m"},
  "session": {"dir": "$dir/sessions", "fsync": "none"},
  "plugin_path": ["${WEIR_TEST_PLUGIN_DIR:?}"],
  "plugins": [{"id": "llm", "plugin": "provider-openai",
               "config": {"base_url": "http://127.0.0.1:$port/v1", "api_key": ""}}]
}
JSON
    for n in 1 2; do
        out=$(timeout 30 "$bin/weir" run -c "$dir/deploy.json" -s "fixture-$n" "hello $n")
        [ "$out" = "Fixture answer." ] || { echo "run $n printed: $out" >&2; exit 1; }
        timeout 30 "$bin/weir" log -c "$dir/deploy.json" "fixture-$n" --check > /dev/null
        grep '"request/context"' "$dir/sessions/fixture-$n.jsonl" | grep -q '"context_window": *8192' ||
            { echo "run $n: request/context has not the server's window 8192" >&2; exit 1; }
    done
    echo "two sessions answered by the fixture server (window 8192 from GET /v1/models)"
    ;;
stop)
    # It exits by itself once it has served its 4 requests; give it 5 s,
    # then stop it (a server still running means it was not used as planned).
    pid=$(cat "$dir/pid" 2>/dev/null || true)
    i=0
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
        i=$((i + 1))
        sleep 0.1
    done
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        echo "weir-mock-llm was still running; stopped it" >&2
        exit 1
    fi
    cat "$dir/mock.out"
    grep -q '^requests=4$' "$dir/mock.out" || { echo "expected requests=4" >&2; exit 1; }
    ;;
*)
    echo "usage: $0 start|run|stop DIR" >&2
    exit 2
    ;;
esac
