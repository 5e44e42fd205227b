# tests/scripts/providers_lib.sh - shared by providers_run.sh and
# providers_secrets.sh (sourced, not run): a private temp dir, the standalone
# mock LLM (weir-mock-llm) on 127.0.0.1, and a deployment config for one
# provider plugin pointed at it.
#
# Needs: WEIR_TEST_BIN_DIR (weir, weir-mock-llm), WEIR_TEST_PLUGIN_DIR (the
# built plugins).  $1 of the calling script: openai | anthropic.

PROVIDER=${1:?usage: $0 openai|anthropic}
WEIR=${WEIR_TEST_BIN_DIR:?}/weir
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
PLUGINS=${WEIR_TEST_PLUGIN_DIR:?}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-providers.XXXXXX") || exit 1
MOCK_PID=
cleanup() {
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

FAILURES=0
fail() {
    echo "FAIL: $*" >&2
    FAILURES=$((FAILURES + 1))
}

# A missing weir or mock is a failure: a full build has both.
require_weir_run() {
    [ -x "$WEIR" ] && [ -x "$MOCK" ] || { echo "FAIL: weir or weir-mock-llm not built"; exit 1; }
    # a config file that does not exist: nothing can reach the network
    if "$WEIR" run -c "$TMP/absent.json" x 2>&1 | grep -q "not built yet"; then
        echo "FAIL: weir run is not built yet"
        exit 1
    fi
}

# start_mock SCRIPT_JSON: run weir-mock-llm on the script; sets PORT, MOCK_PID.
start_mock() {
    printf '%s\n' "$1" > "$TMP/script.json"
    rm -f "$TMP/port"
    "$MOCK" --script "$TMP/script.json" --port-file "$TMP/port" --timeout-s 60 \
        > "$TMP/mock.out" 2>&1 &
    MOCK_PID=$!
    i=0
    while [ ! -s "$TMP/port" ]; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$MOCK_PID" 2>/dev/null; then
            echo "weir-mock-llm did not start:" >&2
            cat "$TMP/mock.out" >&2
            exit 1
        fi
        sleep 0.1
    done
    PORT=$(cat "$TMP/port")
}

stop_mock() {
    [ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null && wait "$MOCK_PID" 2>/dev/null
    MOCK_PID=
}

# write_config FILE API_KEY_EXPR [EXTRA_ROWS]: a deployment with the
# provider row "llm" (and EXTRA_ROWS, e.g. the tools-ffi math row); the
# row's config gets $ROW_EXTRA (", <member>: <value>"...) when set.
write_config() {
    if [ "$PROVIDER" = openai ]; then base="http://127.0.0.1:$PORT/v1"; else base="http://127.0.0.1:$PORT"; fi
    cat > "$1" <<EOF
{
  "agent": {"provider": "llm", "model": "test-model", "max_tokens": 256},
  "session": {"dir": "$TMP/sessions", "fsync": "step"},
  "plugin_path": ["$PLUGINS"],
  "plugins": [
    {"id": "llm", "plugin": "provider-$PROVIDER",
     "config": {"base_url": "$base", "api_key": "$2", "stream_idle_timeout_ms": 1000${ROW_EXTRA:-},
                "models": {"test-model": {"context_window": 100000, "max_output": 256}}}}$3
  ]
}
EOF
}

# The log line of the first event of TYPE in a --json output file.
event_line() {
    grep "\"type\":\"$2\"" "$1" | head -n 1
}

count_events() {
    grep -c "\"type\":\"$2\"" "$1"
}
