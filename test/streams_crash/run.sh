#!/usr/bin/env bash
# The stream server's crash suite, run by make test: kill -9 of PostgreSQL
# under concurrent appends over HTTP loses no acknowledged append and leaves
# none partial or twice (test/streams_crash/crash.mjs says what is sent and
# what is checked, SC1-SC7).
#
#  1. A private cluster (initdb in a temp directory, unix socket there only,
#     fsync and synchronous_commit on: the defaults), the extension in its
#     postgres database. The extension needs no shared_preload_libraries.
#  2. crash.mjs starts the stream server, the built adapter's CLI
#     (clients/node/dist/streams/cli.js --insecure-local, port 0), in a child
#     process, runs 4 idempotent producers against it, and on the 400th and
#     again the ~900th acknowledged append kills the postmaster and every
#     process of this data directory with SIGKILL, then starts the cluster
#     again (crash recovery) while the writers retry. The server is never
#     restarted: it has to reconnect by itself.
#  3. Optional, report-only: the same workload against the reference server
#     (@durable-streams/server, file-backed, from bench/suites/ds_server)
#     killed with SIGKILL; skipped when that package is not installed.
#
# Self-contained: PostgreSQL 15 with the extension installed (PG_CONFIG names
# it), Node and clients/node's build (built here when dist is missing). Port
# (for the socket's name): SP_CRASH_PORT (default 55261). Runs as root
# (servers as the postgres user) or as a user who can run initdb.
# Prints one "summary: streams crash: ..." line; exits non-zero on a failed check.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
BIN=$("$PG_CONFIG" --bindir)
PORT=${SP_CRASH_PORT:-55261}
DIR=$(mktemp -d /tmp/sp_streams_crash.XXXXXX)
chmod 755 "$DIR"

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
[ "$(id -u)" = 0 ] && chown postgres: "$DIR"

# crash.mjs stops its servers itself; the pid files are for a run cut short
# (timeout), so that no server outlives the suite. Only our own pids.
cleanup() {
    for f in "$DIR"/*.server.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    [ -f "$DIR/data/postmaster.pid" ] && as_postgres "$BIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT

cd "$ROOT/clients/node" || exit 1
if [ ! -d node_modules/pg ]; then
    npm ci --no-audit --no-fund --prefer-offline --loglevel=error || { echo "summary: streams crash: not run (npm ci failed)"; exit 1; }
fi
if [ ! -f dist/streams/cli.js ]; then
    npm run --silent build || { echo "summary: streams crash: not run (build failed)"; exit 1; }
fi

as_postgres "$BIN/initdb" -D "$DIR/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 \
    || { cat "$DIR/initdb.log"; echo "summary: streams crash: not run (initdb failed)"; exit 1; }
# fsync and synchronous_commit are spelt out: the defaults, which this suite is about.
cat >>"$DIR/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $PORT
fsync = on
synchronous_commit = on
full_page_writes = on
CONF
as_postgres "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" -w start >/dev/null \
    || { cat "$DIR/postgres.log"; echo "summary: streams crash: not run (the cluster did not start)"; exit 1; }
"$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres -d postgres -c "CREATE EXTENSION sandbox_persist" \
    || { echo "summary: streams crash: not run (CREATE EXTENSION failed)"; exit 1; }

SC_DIR=$DIR SC_PORT=$PORT SC_BIN=$BIN SC_AS_POSTGRES=$([ "$(id -u)" = 0 ] && echo runuser || echo) \
    timeout --kill-after=10 170 node "$HERE/crash.mjs"
status=$?
[ $status -eq 124 ] && echo "summary: streams crash: timed out after 170 s"
exit $status
