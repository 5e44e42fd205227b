#!/bin/sh
# tests/pg/server.sh start|restart|stop DIR - a throwaway PostgreSQL server for the
# store-postgres tests.  The server lives in a new temporary folder (data
# and Unix socket: short paths, reachable by the postgres user whatever
# DIR's parents are) with no TCP listener (listen_addresses='') and a
# database "weir"; fsync is off unless WEIR_PG_FSYNC=on (benches want it).
# DIR keeps the conninfo (DIR/conninfo, also printed) and that folder's
# name.  As root the server runs as the postgres user (initdb
# refuses root).  `restart` stops the server (fast: open connections are
# cut, as in a crash of the connections) and starts it again on the same
# data and socket.  `stop` stops it and removes both.  Fails, never skips,
# when PostgreSQL is missing: .ci/run installs it (cmake/install-deps.sh).
set -eu
cmd=${1:?usage: $0 start|restart|stop DIR}
dir=${2:?usage: $0 start|restart|stop DIR}
bindir=${WEIR_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
[ -x "$bindir/initdb" ] || { echo "pg server: no initdb (install postgresql)" >&2; exit 1; }
as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
stop() {
    [ -f "$dir/base" ] || return 0
    base=$(cat "$dir/base")
    [ -d "$base/data" ] && as "$bindir/pg_ctl" -D "$base/data" -m fast -w stop >/dev/null 2>&1
    rm -rf "$base"
    rm -f "$dir/base" "$dir/conninfo"
}
case $cmd in
start)
    mkdir -p "$dir"
    stop || true
    base=$(mktemp -d "${TMPDIR:-/tmp}/weir-pg.XXXXXX")
    echo "$base" >"$dir/base"
    mkdir "$base/sock"
    [ "$(id -u)" = 0 ] && chown -R postgres "$base"
    as "$bindir/initdb" -D "$base/data" -A trust -U weir --no-sync >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; exit 1; }
    as "$bindir/pg_ctl" -D "$base/data" -l "$base/server.log" -w -t 30 \
        -o "-c listen_addresses='' -k $base/sock -c fsync=${WEIR_PG_FSYNC:-off} -c max_connections=100" start \
        >/dev/null || { cat "$base/server.log" >&2; exit 1; }
    as "$bindir/createdb" -h "$base/sock" -U weir weir
    echo "host=$base/sock user=weir dbname=weir" | tee "$dir/conninfo"
    ;;
restart)
    [ -f "$dir/base" ] || { echo "pg server: none started in $dir" >&2; exit 1; }
    base=$(cat "$dir/base")
    as "$bindir/pg_ctl" -D "$base/data" -l "$base/server.log" -m fast -w -t 30 restart \
        >/dev/null || { cat "$base/server.log" >&2; exit 1; }
    ;;
stop) stop ;;
*) echo "usage: $0 start|restart|stop DIR" >&2; exit 2 ;;
esac
