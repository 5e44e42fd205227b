#!/bin/sh
# tests/scripts/cli_session_trust.sh WEIR - what a session log trusts at its
# edges (issue #8 items 1, 2, 6 and 7), each from its reproducer:
#   1. one writer per session: a live `weir run -s same` makes `weir resume
#      same` and a second run fail at once (exit 4, naming the pid), readers
#      still work, and 20 concurrent runs leave a log that checks;
#   2. a session id is an id: `-s ../../evil` and `-s a/b` are usage errors
#      that write nothing; --log PATH names a file; a file whose first line
#      is not a log event is refused and left byte for byte as it was;
#   6. logs are private: directories 0700, logs 0600, a looser existing
#      directory gets a warning;
#   7. one reader: a log without integer times fails --check, --derive,
#      the transcript and resume alike; /dev/zero and FIFOs are refused.
# Every process runs under `timeout`; sessions live in a temp dir.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-trust.XXXXXX") || exit 1
PIDS=
trap 'for p in $PIDS; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT INT TERM
export WEIR_SESSION_DIR="$TMP/sessions" OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
w() { timeout 60 "$WEIR" "$@"; }

# A slow scripted deployment: one reply streamed over ~2 s.
cat >"$TMP/script.json" <<'JSON'
{"loop": true,
 "replies": [{"text": "a slow answer that takes its time to arrive in full", "chunks": 40,
              "chunk_delay_ms": 50}]}
JSON
cat >"$TMP/slow.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"script": "$TMP/script.json"}}]}
JSON

# --- 1. one writer per session -------------------------------------------
timeout 60 "$WEIR" run -c "$TMP/slow.json" -s same "first" >"$TMP/first.out" 2>&1 &
RUN=$!
PIDS="$RUN"
i=0
until grep -q '"type":"turn/start"' "$TMP/sessions/same.jsonl" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 200 ] || { fail "the first run never started its turn"; break; }
    sleep 0.05
done
# `timeout` is the parent; the writer is its child
WRITER=$(pgrep -P "$RUN" | head -n 1)
w resume -c "$TMP/slow.json" same >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "resume of a live session: exit $rc, want 4: $(cat "$TMP/out")"
grep -q "session same is open for writing by pid $WRITER" "$TMP/out" ||
    fail "resume of a live session does not name pid $WRITER: $(cat "$TMP/out")"
w run -c "$TMP/slow.json" -s same "second" >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "a second writer: exit $rc, want 4: $(cat "$TMP/out")"
grep -q 'is open for writing by pid' "$TMP/out" || fail "a second writer: $(cat "$TMP/out")"
# readers need no lock and read a consistent prefix
w log -c "$TMP/slow.json" same --check >"$TMP/out" 2>&1 || fail "check of a live log: $(cat "$TMP/out")"
w log -c "$TMP/slow.json" same --derive >/dev/null 2>&1 || fail "derive of a live log"
w log -c "$TMP/slow.json" same >/dev/null 2>&1 || fail "transcript of a live log"
wait "$RUN" || fail "the first run failed: $(cat "$TMP/first.out")"
PIDS=
w log -c "$TMP/slow.json" same --check >"$TMP/out" 2>&1 || fail "check after the refusals: $(cat "$TMP/out")"
grep -q '^open:' "$TMP/out" && fail "a refused writer left a turn open: $(cat "$TMP/out")"
w resume -c "$TMP/slow.json" same "again" >"$TMP/out" 2>&1 || fail "resume after the run: $(cat "$TMP/out")"
w log -c "$TMP/slow.json" same --check >"$TMP/out" 2>&1 || fail "check after resume: $(cat "$TMP/out")"

# 20 concurrent writers of one session: each runs or is refused; the log checks
cat >"$TMP/fast.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions", "fsync": "none"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"script": "$TMP/fast-script.json"}}]}
JSON
echo '{"loop": true, "replies": [{"text": "ok", "chunks": 4, "chunk_delay_ms": 20}]}' >"$TMP/fast-script.json"
n=0
while [ $n -lt 20 ]; do
    n=$((n + 1))
    (w run -c "$TMP/fast.json" -s crowd "hello $n" >/dev/null 2>"$TMP/crowd.$n"; echo $? >"$TMP/crowd.$n.rc") &
done
wait
ran=0 busy=0
n=0
while [ $n -lt 20 ]; do
    n=$((n + 1))
    case $(cat "$TMP/crowd.$n.rc") in
    0) ran=$((ran + 1)) ;;
    4) grep -q 'is open for writing by' "$TMP/crowd.$n" || fail "crowd $n: $(cat "$TMP/crowd.$n")"
       busy=$((busy + 1)) ;;
    *) fail "crowd $n: exit $(cat "$TMP/crowd.$n.rc"): $(cat "$TMP/crowd.$n")" ;;
    esac
done
[ $ran -ge 1 ] || fail "no crowd writer ran"
w log -c "$TMP/fast.json" crowd --check >"$TMP/out" 2>&1 || fail "crowd log: $(cat "$TMP/out")"
turns=$(grep -c '"type":"turn/end"' "$TMP/sessions/crowd.jsonl")
[ "$turns" -eq $ran ] || fail "crowd: $ran runs but $turns turns in the log"

# --- 2. ids are ids ----------------------------------------------------------
mkdir -p "$TMP/cwd/a/b" && cd "$TMP/cwd" || exit 1
for bad in ../../evil a/b .hidden '' "$(printf 'x%.0s' $(seq 1 129))" 'a b' 'x.jsonl/'; do
    w run -s "$bad" "hi" >"$TMP/out" 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "run -s '$bad': exit $rc, want 2: $(cat "$TMP/out")"
done
grep -q 'is not a session id' "$TMP/out" || fail "the usage error does not say why: $(cat "$TMP/out")"
[ -e "$TMP/evil.jsonl" ] || [ -e "$TMP/cwd/a/b.jsonl" ] && fail "a bad id wrote a file"
w serve --stdio -s ../x </dev/null >"$TMP/out" 2>&1
[ $? -eq 2 ] || fail "serve -s ../x is not a usage error: $(cat "$TMP/out")"
w run -s "$(printf 'x%.0s' $(seq 1 128))" "hi" >/dev/null 2>&1 || fail "a 128-character id is an id"
w run --log "$TMP/files/explicit.jsonl" "hi" >/dev/null 2>&1 || fail "run --log PATH"
w log "$TMP/files/explicit.jsonl" --check >/dev/null 2>&1 || fail "the --log file checks"
w run -s x --log "$TMP/y.jsonl" "hi" >/dev/null 2>&1
[ $? -eq 2 ] || fail "-s and --log together: want a usage error"
cd "$TMP" || exit 1
# a file that is not a weir log is refused, never repaired or rewritten
printf 'my precious notes, one line' >"$TMP/notes.txt"
printf '{"name":"package.json-like"}\n' >"$TMP/pkg.jsonl"
printf 'line one\nline two\n' >"$TMP/two.jsonl"
for f in notes.txt pkg.jsonl two.jsonl; do
    cp "$TMP/$f" "$TMP/$f.orig"
    w run --log "$TMP/$f" "hi" >"$TMP/out" 2>&1
    rc=$?
    [ $rc -ne 0 ] || fail "run --log $f accepted a foreign file"
    grep -q 'not a weir session log' "$TMP/out" || fail "run --log $f: $(cat "$TMP/out")"
    grep -q "$f" "$TMP/out" || fail "the refusal does not name $f: $(cat "$TMP/out")"
    w resume "$TMP/$f" >/dev/null 2>&1 && fail "resume $f accepted a foreign file"
    cmp -s "$TMP/$f" "$TMP/$f.orig" || fail "$f was changed"
done
# a symbolic link in the session folder is never followed by a writer: a
# dangling one is not created through, a live one is not appended to
# (issue #31 item 11)
ln -s "$TMP/planted-target.jsonl" "$TMP/sessions/dangling.jsonl"
w run -s dangling "hi" >"$TMP/out" 2>&1 && fail "run -s through a dangling symlink succeeded"
grep -q 'symbolic link' "$TMP/out" || fail "the refusal does not say symbolic link: $(cat "$TMP/out")"
[ -e "$TMP/planted-target.jsonl" ] && fail "run -s created the dangling symlink's target"
w run --log "$TMP/sessions/dangling.jsonl" "hi" >/dev/null 2>&1 && fail "run --log through a symlink"
[ -e "$TMP/planted-target.jsonl" ] && fail "run --log created the dangling symlink's target"
printf 'keep me\n' >"$TMP/precious.txt"
ln -s "$TMP/precious.txt" "$TMP/sessions/live.jsonl"
w run -s live "hi" >/dev/null 2>&1 && fail "run -s through a symlink to a file succeeded"
[ "$(cat "$TMP/precious.txt")" = "keep me" ] || fail "run -s wrote through a symlink"
# a crash while writing the very first line is still a torn tail
printf '{"seq":0,"time":17' >"$TMP/torn.jsonl"
w resume "$TMP/torn.jsonl" >"$TMP/out" 2>&1 || fail "a torn first event: $(cat "$TMP/out")"

# --- 6. private logs -------------------------------------------------------
mode() { stat -c %a "$1"; }
[ "$(mode "$TMP/sessions")" = 700 ] || fail "session dir mode $(mode "$TMP/sessions"), want 700"
[ "$(mode "$TMP/sessions/same.jsonl")" = 600 ] || fail "log mode $(mode "$TMP/sessions/same.jsonl")"
[ "$(mode "$TMP/files")" = 700 ] || fail "--log parent mode $(mode "$TMP/files"), want 700"
mkdir -m 755 "$TMP/loose"
w run --log "$TMP/loose/s.jsonl" "hi" >/dev/null 2>"$TMP/out" || fail "run in a loose dir"
grep -q "warning: session directory $TMP/loose can be read by others (mode 0755)" "$TMP/out" ||
    fail "no warning for a 0755 session dir: $(cat "$TMP/out")"
w run -s private "hi" >/dev/null 2>"$TMP/out"
grep -q warning "$TMP/out" && fail "a warning for a 0700 dir: $(cat "$TMP/out")"

# --- 7. one reader ---------------------------------------------------------
sed 's/"time":[0-9]*/"time":"noon"/' "$TMP/sessions/private.jsonl" >"$TMP/notime.jsonl"
w log "$TMP/notime.jsonl" --check >"$TMP/out" 2>&1
[ $? -eq 1 ] || fail "--check passes a log without integer times: $(cat "$TMP/out")"
grep -q 'time must be an integer' "$TMP/out" || fail "--check does not say why: $(cat "$TMP/out")"
w log "$TMP/notime.jsonl" --derive >/dev/null 2>&1 && fail "--derive accepted it"
w log "$TMP/notime.jsonl" >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "the transcript of an invalid log exits $rc, want 1"
grep -q 'time must be an integer' "$TMP/out" || fail "the transcript does not say why: $(cat "$TMP/out")"
w resume "$TMP/notime.jsonl" >/dev/null 2>&1 && fail "resume accepted it"
for dev in /dev/zero; do
    timeout 10 "$WEIR" log "$dev" --check >"$TMP/out" 2>&1
    rc=$?
    [ $rc -eq 4 ] || fail "--check $dev: exit $rc, want 4: $(cat "$TMP/out")"
    grep -q 'not a regular file' "$TMP/out" || fail "--check $dev: $(cat "$TMP/out")"
    timeout 10 "$WEIR" log "$dev" --derive >/dev/null 2>&1 && fail "--derive $dev"
done
mkfifo "$TMP/fifo.jsonl"
timeout 10 "$WEIR" log "$TMP/fifo.jsonl" --check >"$TMP/out" 2>&1
[ $? -eq 4 ] || fail "--check of a FIFO: $(cat "$TMP/out")"
timeout 10 "$WEIR" run --log "$TMP/fifo.jsonl" "hi" >"$TMP/out" 2>&1
[ $? -eq 4 ] || fail "run --log of a FIFO: $(cat "$TMP/out")"

if [ $FAILURES -gt 0 ]; then
    echo "cli_session_trust: $FAILURES failure(s)"
    exit 1
fi
echo "cli_session_trust: ok"
