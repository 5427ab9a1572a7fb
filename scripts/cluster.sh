#!/usr/bin/env bash
# Start, stop or describe a throwaway PostgreSQL cluster for sandbox_persist.
#
# The cluster runs as the postgres user (initdb and postgres refuse root) on a
# private unix socket inside a temp directory, with pg_cron preloaded. Its
# location is remembered in .cluster/env at the top of the checkout, which
# other scripts source to reach it.
#
#   scripts/cluster.sh start   create and start a new cluster (stops an old one)
#   scripts/cluster.sh stop    stop the cluster and remove its directory
#   scripts/cluster.sh env     print the export lines for PGHOST/PGPORT/PGUSER
#
# fsync and full_page_writes are off (a throwaway cluster never survives an OS
# crash), and so is synchronous_commit unless SANDBOX_PERSIST_SYNCHRONOUS_COMMIT=on:
# with it off a kill -9 may lose commits already answered (PostgreSQL's promise
# for that setting), so a cluster a test kills and then reads must start with
# it on. fsync = off keeps that promise for a process crash: a commit has
# written its WAL to the kernel, which outlives the server.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${SANDBOX_PERSIST_STATE:-"$ROOT/.cluster"}
PORT=${SANDBOX_PERSIST_PORT:-54329}
DB=${SANDBOX_PERSIST_DB:-postgres}
SYNC_COMMIT=${SANDBOX_PERSIST_SYNCHRONOUS_COMMIT:-off}
case "$SYNC_COMMIT" in on | off) ;; *) echo "cluster.sh: SANDBOX_PERSIST_SYNCHRONOUS_COMMIT must be on or off" >&2; exit 2 ;; esac
PGBIN=$("${PG_CONFIG:-pg_config}" --bindir)

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

stop_cluster() {
    if [ -f "$STATE/env" ]; then
        # shellcheck disable=SC1091
        . "$STATE/env"
        if [ -d "$SP_CLUSTER_DIR/data" ]; then
            as_postgres "$PGBIN/pg_ctl" -D "$SP_CLUSTER_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
        fi
        rm -rf "$SP_CLUSTER_DIR"
        rm -f "$STATE/env"
    fi
}

start_cluster() {
    stop_cluster
    mkdir -p "$STATE"
    local dir
    dir=$(mktemp -d /tmp/sandbox_persist.XXXXXX)
    chmod 755 "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
    as_postgres "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
        --locale=C.UTF-8 -N --no-instructions >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log"; exit 1; }
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir'
port = $PORT
shared_preload_libraries = 'pg_cron'
cron.database_name = '$DB'
cron.use_background_workers = on
max_worker_processes = 16
max_prepared_transactions = 10
fsync = off
synchronous_commit = $SYNC_COMMIT
full_page_writes = off
CONF
    if ! as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null; then
        cat "$dir/server.log"
        exit 1
    fi
    cat >"$STATE/env" <<ENV
export PGHOST='$dir' PGPORT='$PORT' PGUSER=postgres PGDATABASE='$DB'
SP_CLUSTER_DIR='$dir'
ENV
    echo "cluster started: socket $dir, port $PORT"
}

case "${1:-}" in
    start) start_cluster ;;
    stop) stop_cluster ;;
    env) grep '^export' "$STATE/env" ;;
    *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
