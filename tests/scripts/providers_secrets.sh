#!/bin/sh
# tests/scripts/providers_secrets.sh openai|anthropic - the API key never
# leaves the request headers: run a streamed answer and a failing (401)
# turn with api_key sk-test-SECRET-12345 and WEIR_TRACE=1, then search the
# session log, stdout, stderr and every file the runs wrote (HOME and the
# session dir point into a private temp dir) for the key.
. "$(dirname "$0")/providers_lib.sh"
require_weir_run

KEY=sk-test-SECRET-12345
export WEIR_TEST_API_KEY=$KEY
export HOME="$TMP/home"
export WEIR_TRACE=1
mkdir -p "$HOME" "$TMP/out"

n=0
for script in '{"requests":[{"text":"Hello from the mock.","reasoning":"thinking"}]}' \
              '{"requests":[{"fault":"auth"}]}' \
              '{"requests":[{"text":"x","fault":"malformed"}]}'; do
    n=$((n + 1))
    start_mock "$script"
    # the key comes from the environment, so the config file holds no secret
    write_config "$TMP/config$n.json" '${WEIR_TEST_API_KEY}'
    "$WEIR" run -c "$TMP/config$n.json" -s "secret$n" --json "Say hello" \
        > "$TMP/out/stdout$n" 2> "$TMP/out/stderr$n"
    stop_mock
    [ -s "$TMP/sessions/secret$n.jsonl" ] || fail "run $n wrote no session log"
    [ -s "$TMP/out/stdout$n" ] || fail "run $n printed nothing"
done

# The scripts and the mock's output are ours, not the run's: leave them out.
if grep -rl -e "$KEY" -e "SECRET-12345" "$TMP" --exclude=script.json --exclude=mock.out; then
    fail "the API key appears in the files above"
fi
# The configs name ${WEIR_TEST_API_KEY} only (test_provider_* check that the
# expanded key does reach the server's header).
grep -q "$KEY" "$TMP/config1.json" && fail "the config file holds the key itself"

[ "$FAILURES" = 0 ] || exit 1
echo "providers_secrets $PROVIDER: ok"
