#!/bin/sh
# tests/scripts/cli_wait_first_token.sh WEIR - with a real provider the
# "waiting for the model…" line stays until the first text or tool delta
# (issue #37 item 2): the stream's start frame (sent when the request
# begins) and the frames that carry no answer neither erase it nor restart
# its seconds.  weir-mock-llm answers at once with the stream's head and
# sends its first delta 3.2 s later; on a terminal (script(1)) stderr then
# shows the line drawn once and redrawn in place with "1 s" and "2 s"
# (never erased to a blank line first), then the answer.
WEIR=${1:?usage: $0 path/to/weir}
MOCK=${WEIR_TEST_BIN_DIR:?}/weir-mock-llm
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-wait1.XXXXXX") || exit 1
MOCK_PID=
trap '[ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= NO_COLOR=1 TERM=xterm
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is missing (util-linux)" >&2; exit 1; }

printf '{"requests": [{"text": "fine answer", "chunk_size": 64, "chunk_delay_ms": 3200}]}\n' \
    >"$TMP/script.json"
"$MOCK" --script "$TMP/script.json" --port-file "$TMP/port" --timeout-s 60 >"$TMP/mock.out" 2>&1 &
MOCK_PID=$!
i=0
while [ ! -s "$TMP/port" ]; do
    i=$((i + 1))
    [ $i -gt 100 ] && { echo "FAIL: weir-mock-llm did not start: $(cat "$TMP/mock.out")" >&2; exit 1; }
    sleep 0.1
done
cat >"$TMP/c.json" <<JSON
{"agent": {"provider": "llm", "model": "m", "max_tokens": 64},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "llm", "plugin": "provider-openai",
              "config": {"base_url": "http://127.0.0.1:$(cat "$TMP/port")/v1", "api_key": "k",
                         "probe_windows": false,
                         "models": {"m": {"context_window": 8192, "max_output": 64}}}}]}
JSON
timeout 60 script -qec "exec \"$WEIR\" run -c \"$TMP/c.json\" -s w hi" /dev/null \
    </dev/null >"$TMP/raw" 2>&1 || fail "run: exit $? $(cat -v "$TMP/raw")"
grep -q 'fine answer' "$TMP/raw" || fail "no answer: $(cat -v "$TMP/raw")"
# the bytes from the first wait line to the answer, one escape per line
esc=$(printf '\033')
sed -n '/waiting for the model/,/fine answer/p' "$TMP/raw" | tr '\r' '\n' >"$TMP/wait"
grep -q 'waiting for the model… 1 s' "$TMP/wait" || fail "no '1 s': $(cat -v "$TMP/wait")"
grep -q 'waiting for the model… 2 s' "$TMP/wait" || fail "no '2 s': $(cat -v "$TMP/wait")"
# an erase with nothing drawn after it on its line: the line went blank
grep -qx "${esc}\[K" "$TMP/wait" && fail "the wait line was erased before the answer: $(cat -v "$TMP/wait")"
grep -q 'Sanitizer\|runtime error' "$TMP/raw" && fail "sanitizer: $(cat "$TMP/raw")"

[ $FAILURES -eq 0 ] && echo "cli_wait_first_token: ok"
exit $FAILURES
