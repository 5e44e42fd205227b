#!/bin/sh
# tests/scripts/crash_tool_rerun.sh WEIR PLUGIN_DIR FFI_LIB - tools across a crash
# (docs/tools.md, "Tools across a crash"), end to end with kill -9.
#
# A scripted reply calls two drvtest-tools tools side by side: `book`
# (idempotent) and `charge` (not).  Each body appends "<call id> <key>
# <attempt>" to its record file and then waits for a gate file.  While both
# wait, `weir run` is killed with SIGKILL.  Then the gate is opened and
# `weir resume` (no input) must:
#   - run book once more with the same idempotency key (attempt 2) and log
#     its real result, with one tool/rerun event;
#   - not run charge again, and answer it INTERRUPTED with the text that it
#     may or may not have run;
#   - close the turn as interrupted, leaving a log that checks clean.
# A second session is also killed during the re-run (the gate still closed):
# the next resume runs book a third time, same key, attempt 3.
# Last, the same through tools-ffi: t_book of FFI_LIB (libweirffitest.so)
# gets the key as its declared `const char *key` parameter.
# PLUGIN_DIR holds weir-drvtest-tools.so.  Needs jq (cmake/install-deps.sh).
WEIR=${1:?usage: $0 path/to/weir PLUGIN_DIR FFI_LIB}
PLUGIN_DIR=${2:?usage: $0 path/to/weir PLUGIN_DIR FFI_LIB}
FFI_LIB=${3:?usage: $0 path/to/weir PLUGIN_DIR FFI_LIB}
command -v jq >/dev/null 2>&1 || { echo "crash_tool_rerun: jq not found" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-rerun.XXXXXX") || exit 1
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY= WEIR_SESSION_DIR="$TMP/sessions"
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

cat >"$TMP/script.json" <<'JSON'
{"loop": true,
 "replies": [
  {"text": "booking the seat and charging the card",
   "tool_calls": [{"id": "call_book", "name": "book", "arguments": {"seat": "12A"}},
                  {"id": "call_charge", "name": "charge", "arguments": {"amount": 5}}]},
  {"text": "all done"}]}
JSON
cat >"$TMP/cfg.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "step"},
 "plugin_path": ["$PLUGIN_DIR"],
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"script": "$TMP/script.json"}},
             {"id": "tools", "plugin": "drvtest-tools",
              "config": {"tools": [
                {"name": "book", "idempotent": true, "reply": "booked 12A",
                 "record": "$TMP/book.log", "wait_for_file": "$TMP/gate"},
                {"name": "charge", "reply": "charged 5",
                 "record": "$TMP/charge.log", "wait_for_file": "$TMP/gate"}]}}]}
JSON
CFG="$TMP/cfg.json"

lines() { if [ -f "$1" ]; then wc -l <"$1" | tr -d ' '; else echo 0; fi; }
# wait (at most 10 s) until file $1 has at least $2 lines
wait_lines() {
    n=0
    while [ "$(lines "$1")" -lt "$2" ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
    [ "$(lines "$1")" -ge "$2" ]
}
kill_it() { kill -9 "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=; }
# the events of type $2 in log $1, one compact JSON object per line (checks
# pipe these into `jq -e`: jq 1.6 -e fails when the last input was filtered out)
events() { jq -c --arg t "$2" 'select(.type == $t)' "$1"; }
# the tool/result of call $2 in log $1
result_of() {
    jq -c --arg id "$2" 'select(.type == "tool/result" and
        .data.message.content[0].call_id == $id)' "$1"
}

# --- 1. kill -9 while both bodies run, then resume ---------------------------
"$WEIR" run -c "$CFG" -s trip "book it" >/dev/null 2>"$TMP/run.err" &
PID=$!
wait_lines "$TMP/book.log" 1 && wait_lines "$TMP/charge.log" 1 ||
    fail "the bodies did not start: $(cat "$TMP/run.err")"
kill_it
LOG="$TMP/sessions/trip.jsonl"
timeout 20 "$WEIR" log -c "$CFG" "$LOG" --check >"$TMP/check" 2>&1 || fail "check after kill: $(cat "$TMP/check")"
grep -q '^open:' "$TMP/check" || fail "the killed turn is not open: $(cat "$TMP/check")"
touch "$TMP/gate"
timeout 30 "$WEIR" resume -c "$CFG" trip >/dev/null 2>"$TMP/resume.err" ||
    fail "weir resume: $(cat "$TMP/resume.err")"

[ "$(cat "$TMP/book.log")" = "call_book trip:1:1:call_book 1
call_book trip:1:1:call_book 2" ] || fail "book ran $(lines "$TMP/book.log") times: $(cat "$TMP/book.log")"
[ "$(cat "$TMP/charge.log")" = "call_charge trip:1:1:call_charge 1" ] ||
    fail "charge ran again: $(cat "$TMP/charge.log")"
[ "$(events "$LOG" tool/rerun | wc -l)" -eq 1 ] || fail "want one tool/rerun: $(events "$LOG" tool/rerun)"
events "$LOG" tool/rerun | jq -e '.ignorable == true and .data.call_id == "call_book" and
    .data.attempt == 2 and .data.idempotency_key == "trip:1:1:call_book"' >/dev/null ||
    fail "tool/rerun: $(events "$LOG" tool/rerun)"
result_of "$LOG" call_book | jq -e '.data.message.content[0].content[0].text == "booked 12A" and
    (.data.message.content[0].is_error | not) and (.data.error | not)' >/dev/null ||
    fail "book's result is not its real one: $(result_of "$LOG" call_book)"
result_of "$LOG" call_charge | jq -e '.data.error.code == "INTERRUPTED" and
    .data.message.content[0].is_error == true and
    (.data.message.content[0].content[0].text | contains("may or may not have run"))' >/dev/null ||
    fail "charge's result is not INTERRUPTED: $(result_of "$LOG" call_charge)"
events "$LOG" turn/end | tail -n 1 | jq -e '.data.reason.kind == "interrupted"' >/dev/null ||
    fail "the turn was not closed as interrupted"
events "$LOG" tool/call | head -n 1 | jq -e '.data.call_id == "call_book" and
    .data.idempotency_key == "trip:1:1:call_book"' >/dev/null ||
    fail "tool/call does not log the key"
timeout 20 "$WEIR" log -c "$CFG" "$LOG" --check >"$TMP/check" 2>&1 || fail "check after resume: $(cat "$TMP/check")"
grep -q '^open:' "$TMP/check" && fail "still open after resume: $(cat "$TMP/check")"
timeout 20 "$WEIR" log -c "$CFG" "$LOG" --derive | grep -q '"text":"booked 12A"' ||
    fail "the derived history lacks book's result"
# the conversation goes on
timeout 30 "$WEIR" resume -c "$CFG" trip "thanks" >/dev/null 2>"$TMP/resume.err" ||
    fail "resume with input: $(cat "$TMP/resume.err")"
timeout 20 "$WEIR" log -c "$CFG" "$LOG" --check >"$TMP/check" 2>&1 || fail "check after the next turn: $(cat "$TMP/check")"

# --- 2. a second kill -9 during the re-run --------------------------------
rm -f "$TMP/gate" "$TMP/book.log" "$TMP/charge.log"
"$WEIR" run -c "$CFG" -s trip2 "book it" >/dev/null 2>"$TMP/run.err" &
PID=$!
wait_lines "$TMP/book.log" 1 && wait_lines "$TMP/charge.log" 1 ||
    fail "trip2: the bodies did not start: $(cat "$TMP/run.err")"
kill_it
"$WEIR" resume -c "$CFG" trip2 >/dev/null 2>"$TMP/resume.err" &
PID=$!
wait_lines "$TMP/book.log" 2 || fail "trip2: the resume did not run book again"
kill_it
LOG="$TMP/sessions/trip2.jsonl"
timeout 20 "$WEIR" log -c "$CFG" "$LOG" --check >"$TMP/check" 2>&1 || fail "trip2: check after the second kill: $(cat "$TMP/check")"
grep -q '^open:' "$TMP/check" || fail "trip2: the turn is not open after the second kill"
touch "$TMP/gate"
timeout 30 "$WEIR" resume -c "$CFG" trip2 >/dev/null 2>"$TMP/resume.err" ||
    fail "trip2: weir resume: $(cat "$TMP/resume.err")"
[ "$(cat "$TMP/book.log")" = "call_book trip2:1:1:call_book 1
call_book trip2:1:1:call_book 2
call_book trip2:1:1:call_book 3" ] || fail "trip2: book.log: $(cat "$TMP/book.log")"
[ "$(lines "$TMP/charge.log")" -eq 1 ] || fail "trip2: charge ran again: $(cat "$TMP/charge.log")"
[ "$(events "$LOG" tool/rerun | jq -s -c 'map(.data.attempt)')" = "[2,3]" ] ||
    fail "trip2: tool/rerun attempts: $(events "$LOG" tool/rerun)"
result_of "$LOG" call_book | jq -e '.data.message.content[0].content[0].text == "booked 12A"' >/dev/null ||
    fail "trip2: book's result: $(result_of "$LOG" call_book)"
[ "$(result_of "$LOG" call_charge | wc -l)" -eq 1 ] || fail "trip2: charge has $(result_of "$LOG" call_charge | wc -l) results"
timeout 20 "$WEIR" log -c "$CFG" "$LOG" --check >"$TMP/check" 2>&1 || fail "trip2: check after resume: $(cat "$TMP/check")"
grep -q '^open:' "$TMP/check" && fail "trip2: still open after resume: $(cat "$TMP/check")"

# --- 3. tools-ffi: the key as a declared parameter -------------------------
mkdir -p "$TMP/ffi"
cat >"$TMP/ffi-script.json" <<JSON
{"loop": true,
 "replies": [
  {"text": "booking", "tool_calls": [{"id": "call_ffi", "name": "t_book",
                                      "arguments": {"dir": "$TMP/ffi"}}]},
  {"text": "booked"}]}
JSON
cat >"$TMP/ffi.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"script": "$TMP/ffi-script.json"}},
             {"id": "ffi", "plugin": "tools-ffi",
              "config": {"tools": [{"library": "$FFI_LIB", "symbol": "t_book",
                                    "prototype": "int t_book(const char *dir, const char *key)",
                                    "idempotency_key": "key", "idempotent": true}]}}]}
JSON
"$WEIR" run -c "$TMP/ffi.json" -s ffi "book it" >/dev/null 2>"$TMP/run.err" &
PID=$!
wait_lines "$TMP/ffi/ffi.log" 1 || fail "ffi: t_book did not start: $(cat "$TMP/run.err")"
kill_it
touch "$TMP/ffi/gate"
timeout 30 "$WEIR" resume -c "$TMP/ffi.json" ffi >/dev/null 2>"$TMP/resume.err" ||
    fail "ffi: weir resume: $(cat "$TMP/resume.err")"
[ "$(cat "$TMP/ffi/ffi.log")" = "ffi:1:1:call_ffi
ffi:1:1:call_ffi" ] || fail "ffi: t_book saw: $(cat "$TMP/ffi/ffi.log")"
LOG="$TMP/sessions/ffi.jsonl"
result_of "$LOG" call_ffi | jq -e '.data.message.content[0].content[0].text == "1"' >/dev/null ||
    fail "ffi: t_book's result: $(result_of "$LOG" call_ffi)"
events "$LOG" request/header | head -n 1 |
    jq -e '.data.header.tools[0].parameters.required == ["dir"]' >/dev/null ||
    fail "ffi: the model sees the key parameter: $(events "$LOG" request/header | head -n 1)"
timeout 20 "$WEIR" log -c "$TMP/ffi.json" "$LOG" --check >"$TMP/check" 2>&1 || fail "ffi: check: $(cat "$TMP/check")"

[ $FAILURES -eq 0 ] && echo "crash_tool_rerun: ok"
exit $((FAILURES > 0))
