#!/bin/sh
# tests/scripts/cli_coredump.sh WEIR - a weir process holds API keys, so it is
# not dumpable (issue 31 item 6): no core file, and other processes of the
# same user cannot read its memory.  The probe: a running `weir run`'s
# /proc/PID/maps is readable by a process of the same user without
# CAP_SYS_PTRACE only when weir is dumpable.  As root, weir and the reader
# both run with every capability dropped (setpriv), so root's CAP_SYS_PTRACE
# does not hide the answer.  With WEIR_ALLOW_COREDUMP=1 the same probe reads
# the file (the control: the probe works here).  Every wait is bounded.
WEIR=${1:?usage: $0 path/to/weir}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weir-cli-coredump.XXXXXX") || exit 1
PID=
trap '[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT INT TERM
export OPENAI_API_KEY= ANTHROPIC_API_KEY=
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }
if [ "$(id -u)" = 0 ]; then
    command -v setpriv >/dev/null || { echo "FAIL: setpriv (util-linux) is needed as root" >&2; exit 1; }
    NOCAPS="setpriv --inh-caps=-all --bounding-set=-all"
else
    NOCAPS=
fi
chmod 755 "$TMP"

cat >"$TMP/slow.json" <<JSON
{"agent": {"provider": "scripted", "model": "demo"},
 "session": {"dir": "$TMP/sessions"},
 "plugins": [{"id": "scripted", "plugin": "provider-scripted",
              "config": {"replies": [{"text": "a very slow answer", "chunks": 4,
                                      "chunk_delay_ms": 60000}]}}]}
JSON

# probe ALLOW WANT: start weir (WEIR_ALLOW_COREDUMP=ALLOW), read its maps;
# WANT is "readable" or "refused".
probe() {
    id=probe-$1
    WEIR_ALLOW_COREDUMP=$1 $NOCAPS "$WEIR" run -c "$TMP/slow.json" -s "$id" hi \
        >"$TMP/out" 2>"$TMP/err" &
    PID=$!
    i=0
    until grep -q '"type":"request/context"' "$TMP/sessions/$id.jsonl" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "$1: the request was never logged: $(cat "$TMP/err")"; break; }
        sleep 0.1
    done
    if $NOCAPS cat "/proc/$PID/maps" >/dev/null 2>"$TMP/cat.err"; then
        got=readable
    else
        got=refused
    fi
    [ "$got" = "$2" ] || fail "WEIR_ALLOW_COREDUMP=$1: /proc/PID/maps $got, want $2 ($(cat "$TMP/cat.err"))"
    kill -TERM "$PID"
    i=0
    while kill -0 "$PID" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 300 ] && { fail "$1: weir run did not exit"; kill -9 "$PID"; break; }
        sleep 0.1
    done
    wait "$PID"
    rc=$?
    PID=
    [ $rc -eq 143 ] || fail "$1: exit $rc, want 143: $(cat "$TMP/err")"
    grep -q 'Sanitizer\|runtime error\|warning: cannot' "$TMP/err" && fail "$1: $(cat "$TMP/err")"
}
probe 1 readable
probe "" refused
probe 0 refused

[ $FAILURES -eq 0 ] && echo "cli_coredump: ok"
exit $FAILURES
