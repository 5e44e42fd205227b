#!/bin/sh
# tests/scripts/providers_secrets.sh openai|anthropic - the API key never
# leaves the request headers:
#   1. a streamed answer and failing turns (401, malformed stream) with
#      api_key sk-test-SECRET-12345 and WEIR_TRACE=1;
#   2. a server that quotes the key back (weir-mock-llm "echo_key": a 401
#      "Incorrect API key provided: <key>", an in-band error event, a
#      malformed chunk), each run plain, with --json and with WEIR_TRACE=1:
#      the failure is still reported (code, status) with the key replaced by
#      [redacted];
#   3. `weir config` prints api_key and the secret headers as "***", and
#      `--show-secrets` prints them;
# then search the session logs, stdout, stderr (the trace goes there) and
# every file the runs wrote (HOME and the session dir point into a private
# temp dir) for the key.
. "$(dirname "$0")/providers_lib.sh"
require_weir_run

KEY=sk-test-SECRET-12345
export WEIR_TEST_API_KEY=$KEY
export HOME="$TMP/home"
mkdir -p "$HOME" "$TMP/out"

n=0
for script in '{"requests":[{"text":"Hello from the mock.","reasoning":"thinking"}]}' \
              '{"requests":[{"fault":"auth"}]}' \
              '{"requests":[{"text":"x","fault":"malformed"}]}'; do
    n=$((n + 1))
    start_mock "$script"
    # the key comes from the environment, so the config file holds no secret
    write_config "$TMP/config$n.json" '${WEIR_TEST_API_KEY}'
    WEIR_TRACE=1 "$WEIR" run -c "$TMP/config$n.json" -s "secret$n" --json "Say hello" \
        > "$TMP/out/stdout$n" 2> "$TMP/out/stderr$n"
    stop_mock
    [ -s "$TMP/sessions/secret$n.jsonl" ] || fail "run $n wrote no session log"
    [ -s "$TMP/out/stdout$n" ] || fail "run $n printed nothing"
done

# 2. Servers that echo the key.  FAULT CODE STATUS (no status: in-band).
for c in "auth AUTH 401" "inband_error OVERLOADED" "malformed TRANSPORT"; do
    set -- $c
    fault=$1 code=$2 status=${3:-}
    for mode in plain json trace; do
        n=$((n + 1))
        id="echo-$fault-$mode"
        start_mock "{\"requests\":[{\"text\":\"Hello there\",\"fault\":\"$fault\",\"echo_key\":true}]}"
        write_config "$TMP/config$n.json" '${WEIR_TEST_API_KEY}'
        case $mode in
        plain) WEIR_TRACE=0 "$WEIR" run -c "$TMP/config$n.json" -s "$id" "Say hello" ;;
        json) WEIR_TRACE=0 "$WEIR" run -c "$TMP/config$n.json" -s "$id" --json "Say hello" ;;
        trace) WEIR_TRACE=1 "$WEIR" run -c "$TMP/config$n.json" -s "$id" --json "Say hello" ;;
        esac > "$TMP/out/stdout-$id" 2> "$TMP/out/stderr-$id"
        rc=$?
        stop_mock
        log="$TMP/sessions/$id.jsonl"
        [ "$rc" = 1 ] || fail "$id: exit $rc, expected 1 (turn failed)"
        [ -s "$log" ] || { fail "$id: no session log"; continue; }
        # The server did quote the key, and the provider scrubbed it.
        grep -q '\[redacted\]' "$log" || fail "$id: no [redacted] in the session log"
        # The failure is still reported: code (and status) in the log and
        # in --json's turn/end, or in the error line on stderr.
        turn_end="\"type\":\"turn/end\".*\"code\":\"$code\".*\\[redacted\\]"
        [ -z "$status" ] || turn_end="$turn_end.*\"status\":$status"
        grep -q "$turn_end" "$log" || fail "$id: no turn/end with $code ${status:+$status }in the log"
        if [ "$mode" = plain ]; then
            grep -q "turn failed: $code: .*\[redacted\]" "$TMP/out/stderr-$id" ||
                fail "$id: stderr does not report the $code failure"
        else
            grep -q "$turn_end" "$TMP/out/stdout-$id" ||
                fail "$id: --json stdout has no turn/end with $code"
        fi
        if [ "$mode" = trace ]; then
            grep -q '^weir-trace: ' "$TMP/out/stderr-$id" || fail "$id: WEIR_TRACE=1 traced nothing"
        fi
    done
done

# 3. weir config hides the key and the secret headers unless asked.
if [ "$PROVIDER" = openai ]; then hdr=Authorization val='Bearer ${WEIR_TEST_API_KEY}'
else hdr=x-api-key val='${WEIR_TEST_API_KEY}'; fi
write_config "$TMP/config-shown.json" '${WEIR_TEST_API_KEY}'
# the same row with headers: a secret one, the same name in lower case, and a plain one
sed "s|\"stream_idle_timeout_ms\"|\"headers\": {\"$hdr\": \"$val\", \"api-key\": \"\${WEIR_TEST_API_KEY}\", \"X-Title\": \"weir tests\"}, \"stream_idle_timeout_ms\"|" \
    "$TMP/config-shown.json" > "$TMP/config-headers.json"
shown=$("$WEIR" config -c "$TMP/config-headers.json" 2> "$TMP/out/config.err") ||
    fail "weir config failed: $(cat "$TMP/out/config.err")"
printf '%s\n' "$shown" > "$TMP/out/config.out"
printf '%s\n' "$shown" | grep -q '"api_key": "\*\*\*"' || fail "weir config: api_key is not ***"
printf '%s\n' "$shown" | grep -q "\"$hdr\": \"\\*\\*\\*\"" || fail "weir config: headers.$hdr is not ***"
printf '%s\n' "$shown" | grep -q '"api-key": "\*\*\*"' || fail "weir config: headers.api-key is not ***"
printf '%s\n' "$shown" | grep -q '"X-Title": "weir tests"' || fail "weir config: hid a plain header"
printf '%s\n' "$shown" | grep -q '"base_url": "http://127.0.0.1' || fail "weir config: hid base_url"
revealed=$("$WEIR" config --show-secrets -c "$TMP/config-headers.json") ||
    fail "weir config --show-secrets failed"
printf '%s\n' "$revealed" | grep -q "\"api_key\": \"$KEY\"" ||
    fail "weir config --show-secrets: api_key is not the key"
printf '%s\n' "$revealed" | grep -q "\"$hdr\": \"[A-Za-z ]*$KEY\"" ||
    fail "weir config --show-secrets: headers.$hdr is not the key"

# The scripts and the mock's output are ours, not the run's: leave them out.
if grep -rl -e "$KEY" -e "SECRET-12345" "$TMP" --exclude=script.json --exclude=mock.out; then
    fail "the API key appears in the files above"
fi
# The configs name ${WEIR_TEST_API_KEY} only (test_provider_* check that the
# expanded key does reach the server's header).
grep -q "$KEY" "$TMP/config1.json" && fail "the config file holds the key itself"

[ "$FAILURES" = 0 ] || exit 1
echo "providers_secrets $PROVIDER: ok"
