#!/bin/sh
# cmake/quiet-build.sh BUILD_DIR JOBS - `make demo` and `make test` build
# quietly: CMake's output goes to BUILD_DIR/build.log and stderr gets one
# line, "weir: building… (log: BUILD_DIR/build.log)".  On a terminal that
# line shows the build's progress, the percentage CMake prints ("[ 45%]";
# Ninja's "[12/200]" as its share), redrawn in place, and ends as "weir:
# built (log: ...)"; elsewhere (a CI log) it is printed once.  A failed
# build shows the log's last 40 lines and where the rest is, and exits 1.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR JOBS" >&2
    exit 2
fi
build=$1
jobs=$2
log=$build/build.log
rcfile=$build/.build-rc
tty=0
[ -t 2 ] && tty=1
if [ $tty -eq 1 ]; then
    printf 'weir: building\342\200\246 (log: %s)' "$log" >&2
else
    printf 'weir: building\342\200\246 (log: %s)\n' "$log" >&2
fi
rm -f "$rcfile"
{
    cmake --build "$build" -j"$jobs" 2>&1
    echo $? >"$rcfile"
} | awk -v tty=$tty -v logf="$log" '
    BEGIN { last = -1; printf "" > logf }
    {
        print >> logf
        fflush(logf)
        if (tty != 1)
            next
        p = -1
        if (match($0, /^\[ *[0-9]+%\]/)) {
            s = substr($0, 2, RLENGTH - 3)
            gsub(/ /, "", s)
            p = s + 0
        } else if (match($0, /^\[[0-9]+\/[0-9]+\]/)) {
            split(substr($0, 2, RLENGTH - 2), a, "/")
            if (a[2] > 0)
                p = int(100 * a[1] / a[2])
        }
        if (p >= 0 && p != last) {
            printf "\r\033[Kweir: building\342\200\246 %d%% (log: %s)", p, logf > "/dev/stderr"
            fflush("/dev/stderr")
            last = p
        }
    }'
rc=$(cat "$rcfile" 2>/dev/null || echo 1)
rm -f "$rcfile"
if [ "$rc" -ne 0 ]; then
    [ $tty -eq 1 ] && printf '\n' >&2
    tail -n 40 "$log" >&2
    echo "weir: the build failed; its whole output is in $log" >&2
    exit 1
fi
[ $tty -eq 1 ] && printf '\r\033[Kweir: built (log: %s)\n' "$log" >&2
exit 0
