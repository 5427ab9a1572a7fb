#!/usr/bin/env bash
# Start, stop or describe a loopback sharded set-up for sandbox_persist: one
# router cluster (PL/Proxy, the router schema of router/) and N shard clusters
# (the extension itself), each its own data directory, socket directory and
# port, all started as the postgres user through scripts/cluster.sh.
#
#   scripts/shards.sh start [N]   N shard clusters (a power of 2, default 2)
#   scripts/shards.sh stop        stop every cluster and remove their directories
#   scripts/shards.sh env         print export lines: PGHOST/PGPORT/... name the
#                                 router, SHARD_<i>_HOST/PORT the shards
#
# Ports: the router on SANDBOX_PERSIST_SHARDS_PORT (default 54351), shard i on
# that port + 1 + i. State lives in SANDBOX_PERSIST_SHARDS_STATE (default
# .shards/ in the checkout), so two checkouts on one machine choose their own
# state directory and base port. The extension must be built; `start` installs
# it (and PL/Proxy when missing) into PG_CONFIG's tree under the same lock as
# scripts/setup.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${SANDBOX_PERSIST_SHARDS_STATE:-"$ROOT/.shards"}
BASE_PORT=${SANDBOX_PERSIST_SHARDS_PORT:-54351}
PG_CONFIG=${PG_CONFIG:-pg_config}
export PG_CONFIG
PGBIN=$("$PG_CONFIG" --bindir)
PATH="$PGBIN:$PATH"
export PATH

# ensure_plproxy: PL/Proxy in PG_CONFIG's tree. Debian's package installs into
# /usr; a relocated tree (a private copy of the server) gets the same files.
ensure_plproxy() {
    local lib share major
    lib=$("$PG_CONFIG" --pkglibdir)
    share=$("$PG_CONFIG" --sharedir)
    [ -f "$lib/plproxy.so" ] && [ -f "$share/extension/plproxy.control" ] && return 0
    major=$("$PG_CONFIG" --version | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p')
    if [ ! -f "/usr/lib/postgresql/$major/lib/plproxy.so" ]; then
        local sudo=
        [ "$(id -u)" = 0 ] || sudo=sudo
        $sudo apt-get install -y "postgresql-$major-plproxy" >/dev/null \
            || { $sudo apt-get update >/dev/null && $sudo apt-get install -y "postgresql-$major-plproxy" >/dev/null; }
    fi
    if [ "$lib" != "/usr/lib/postgresql/$major/lib" ]; then
        cp "/usr/lib/postgresql/$major/lib/plproxy.so" "$lib/"
        cp /usr/share/postgresql/"$major"/extension/plproxy* "$share/extension/"
    fi
}

# cluster NAME PORT ARGS...: scripts/cluster.sh for one member of the set.
# Shards commit synchronously: the cross-shard suite kills one with -9 and then
# relies on every commit it was answered (XS5's lease, XS6's copies) surviving,
# which synchronous_commit = off does not promise.
cluster() {
    local name=$1 port=$2
    shift 2
    local sync=off
    [ "$name" = router ] || sync=on
    SANDBOX_PERSIST_STATE="$STATE/$name" SANDBOX_PERSIST_PORT=$port SANDBOX_PERSIST_SYNCHRONOUS_COMMIT=$sync bash "$ROOT/scripts/cluster.sh" "$@"
}

# dsn NAME: the libpq connection string of a member (its socket directory).
dsn() {
    # shellcheck disable=SC1090
    (. "$STATE/$1/env" && echo "host=$PGHOST port=$PGPORT dbname=postgres user=postgres")
}

stop_all() {
    local d
    for d in "$STATE"/*/; do
        [ -f "$d/env" ] || continue
        cluster "$(basename "$d")" 0 stop
    done
    rm -f "$STATE/env"
}

start_all() {
    local n=${1:-2} i
    case "$n" in 1 | 2 | 4 | 8) ;; *) echo "shards.sh: N must be 1, 2, 4 or 8 (PL/Proxy wants a power of 2)" >&2; exit 2 ;; esac
    stop_all
    mkdir -p "$STATE"
    ensure_plproxy
    flock /tmp/sandbox_persist.install.lock sh -c "cd '$ROOT' && make -s && make -s install >/dev/null"
    local shard_dsns=()
    for ((i = 0; i < n; i++)); do
        cluster "shard$i" $((BASE_PORT + 1 + i)) start
        local d
        d=$(dsn "shard$i")
        psql -X -q -v ON_ERROR_STOP=1 -d "$d" <<'SQL'
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS sandbox_persist;
ALTER DATABASE postgres SET sandbox_persist.allow_client_clock = on;
ALTER DATABASE postgres SET sandbox_persist.allow_test_reset = on;
SQL
        shard_dsns+=("$d")
    done
    cluster router "$BASE_PORT" start
    psql -X -q -v ON_ERROR_STOP=1 -d "$(dsn router)" -c 'CREATE EXTENSION IF NOT EXISTS pgtap'
    bash "$ROOT/router/install.sh" "$(dsn router)" "${shard_dsns[@]}"
    {
        grep '^export' "$STATE/router/env"
        echo "export SHARD_COUNT=$n"
        for ((i = 0; i < n; i++)); do
            # shellcheck disable=SC1090
            (. "$STATE/shard$i/env" && echo "export SHARD_${i}_HOST='$PGHOST' SHARD_${i}_PORT='$PGPORT' SHARD_${i}_DSN='${shard_dsns[$i]}'")
        done
        echo "export ROUTER_DSN='$(dsn router)'"
    } >"$STATE/env"
    echo "shards started: router port $BASE_PORT, $n shard(s); . $STATE/env"
}

case "${1:-}" in
    start) start_all "${2:-2}" ;;
    stop) stop_all ;;
    env) cat "$STATE/env" ;;
    *) echo "usage: $0 start [N]|stop|env" >&2; exit 2 ;;
esac
