#!/usr/bin/env bash
# bench/suites/peers.sh: sandbox_persist against the stores other projects
# use, in the same cluster and run (format: bench/README.md, "Suite format").
#
# Checkpoints against LangGraph's PostgreSQL checkpointer
# (@langchain/langgraph-checkpoint-postgres 1.0.5): a thread growing by two
# ~1 KB messages a turn, one checkpoint a turn, through our Node adapter
# (deltaAppends 'identity', 'verified' and 'off') and through PostgresSaver
# (putWrites + put of the full message list, as a graph with a `messages`
# channel writes it). Figures at K = 10 / 100 / 300 / 1000 turns (QUICK: 10 /
# 100): append ms, latest-checkpoint load ms, stored bytes / transcript; plots
# peers_append and peers_storage. The measuring script is peers/checkpoints.mjs.
#
# Durable streams against resumable-stream 2.2.13 on Redis (Debian's
# redis-server, two servers started here on loopback: `appendonly yes,
# appendfsync always` beside ours with synchronous_commit on, no persistence
# beside ours with it off): producer chunks/s, follower latency, a late
# reader, a killed producer, and the capacity at 50 chunks/s a stream (plot
# peers_stream_capacity). The measuring script is peers/streams.mjs.
#
# What it needs it installs itself: redis-server (apt-get, when missing), the npm packages of peers/package.json
# into bench/suites/peers/node_modules (npm ci, from peers/package-lock.json;
# never into clients/node's dependencies), and the adapter's build
# (clients/node: npm ci when its node_modules is missing, then npm run build).
# Works in two scratch databases, dropped at the end, and in the Redis
# servers' temp directory (SANDBOX_PERSIST_REDIS_PORT, default PGPORT + 2000,
# and the port after it), removed at the end. Checkpoints are measured with
# synchronous_commit on (every call of both systems commits, as in
# production), streams with it on and off, whatever BENCH_SYNC says: the
# suite runs once (make bench's sync_sensitive fact).
set -euo pipefail
printf 'fact\tsync_sensitive\tno\n'
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/bench/suites/peers
# shellcheck disable=SC1091
. "$ROOT/bench/suites/_common.bash"

if [ "$QUICK" = 1 ]; then KS="10 100"; else KS="10 100 300 1000"; fi
DB_A=sp_bench_peers_a
DB_B=sp_bench_peers_b

say "peers: installing the peers' packages (bench/suites/peers/node_modules)"
( cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >&2 ) || { say "peers: npm ci failed"; exit 2; }
say "peers: building the adapter (clients/node/dist)"
( cd "$ROOT/clients/node" && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error >&2; } \
    && npm run --silent build >&2 ) || { say "peers: cannot build clients/node"; exit 2; }

command -v redis-server >/dev/null || { say "peers: installing redis-server"; apt-get install -y -q redis-server >&2; } \
    || { say "peers: cannot install redis-server"; exit 2; }
REDIS_DIR=$(mktemp -d /tmp/sp_bench_redis.XXXXXX)
REDIS_ALWAYS_PORT=${SANDBOX_PERSIST_REDIS_PORT:-$((${PGPORT:-5432} + 2000))}
REDIS_NONE_PORT=$((REDIS_ALWAYS_PORT + 1))

drop_dbs() {
    for d in "$DB_A" "$DB_B"; do
        psql -X -q -d "$ADMIN_DB" -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true
    done
}
cleanup() {
    drop_dbs
    for port in "$REDIS_ALWAYS_PORT" "$REDIS_NONE_PORT"; do
        if [ -f "$REDIS_DIR/$port/pid" ]; then kill "$(cat "$REDIS_DIR/$port/pid")" 2>/dev/null || true; fi
    done
    rm -rf "$REDIS_DIR"
}
trap cleanup EXIT
drop_dbs
for d in "$DB_A" "$DB_B"; do
    psql -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_DB" -c "CREATE DATABASE $d" >/dev/null || exit 2
    psql -X -q -v ON_ERROR_STOP=1 -d "$d" -c "CREATE EXTENSION sandbox_persist" >/dev/null || exit 2
done

# start_redis PORT ARGS...: a redis-server on 127.0.0.1:PORT, its files in $REDIS_DIR/PORT
start_redis() {
    local port=$1
    shift
    if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then say "peers: port $port is taken (SANDBOX_PERSIST_REDIS_PORT)"; exit 2; fi
    mkdir -p "$REDIS_DIR/$port"
    redis-server --bind 127.0.0.1 --port "$port" --dir "$REDIS_DIR/$port" --save '' --daemonize yes \
        --pidfile "$REDIS_DIR/$port/pid" --logfile "$REDIS_DIR/$port/log" "$@" \
        || { say "peers: redis-server on port $port did not start"; exit 2; }
    for _ in $(seq 100); do redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    say "peers: redis-server on port $port does not answer"; cat "$REDIS_DIR/$port/log" >&2; exit 2
}
start_redis "$REDIS_ALWAYS_PORT" --appendonly yes --appendfsync always
start_redis "$REDIS_NONE_PORT" --appendonly no

LG_VERSION=$(node -p "require('$HERE/node_modules/@langchain/langgraph-checkpoint-postgres/package.json').version")
say "peers: K = $KS, synchronous_commit on, LangGraph checkpointer $LG_VERSION"
DB_A=$DB_A DB_B=$DB_B KS=$KS BENCH_SYNC=on LG_VERSION=$LG_VERSION \
    ADAPTER=$ROOT/clients/node/dist/index.js PGOPTIONS= \
    node --expose-gc "$HERE/checkpoints.mjs"

say "peers: streams against resumable-stream on Redis (ports $REDIS_ALWAYS_PORT, $REDIS_NONE_PORT)"
PGDATABASE=$DB_B QUICK=$QUICK ADAPTER=$ROOT/clients/node/dist/index.js PGOPTIONS= \
    REDIS_ALWAYS_URL=redis://127.0.0.1:$REDIS_ALWAYS_PORT REDIS_NONE_URL=redis://127.0.0.1:$REDIS_NONE_PORT \
    RS_VERSION=$(node -p "require('$HERE/node_modules/resumable-stream/package.json').version") \
    REDIS_CLIENT_VERSION=$(node -p "require('$HERE/node_modules/redis/package.json').version") \
    REDIS_VERSION=$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p') \
    node "$HERE/streams.mjs"
say "peers: done"
