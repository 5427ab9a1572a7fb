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
# What it needs it installs itself: the npm packages of peers/package.json
# into bench/suites/peers/node_modules (npm ci, from peers/package-lock.json;
# never into clients/node's dependencies), and the adapter's build
# (clients/node: npm ci when its node_modules is missing, then npm run build).
# Works in two scratch databases, dropped at the end. Measured once, with
# synchronous_commit on (every call of both systems commits, as in
# production; make bench's sync_sensitive fact), whatever BENCH_SYNC says.
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

drop_dbs() {
    for d in "$DB_A" "$DB_B"; do
        psql -X -q -d "$ADMIN_DB" -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1 || true
    done
}
trap drop_dbs EXIT
drop_dbs
for d in "$DB_A" "$DB_B"; do
    psql -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_DB" -c "CREATE DATABASE $d" >/dev/null || exit 2
    psql -X -q -v ON_ERROR_STOP=1 -d "$d" -c "CREATE EXTENSION sandbox_persist" >/dev/null || exit 2
done

LG_VERSION=$(node -p "require('$HERE/node_modules/@langchain/langgraph-checkpoint-postgres/package.json').version")
say "peers: K = $KS, synchronous_commit on, LangGraph checkpointer $LG_VERSION"
DB_A=$DB_A DB_B=$DB_B KS=$KS BENCH_SYNC=on LG_VERSION=$LG_VERSION \
    ADAPTER=$ROOT/clients/node/dist/index.js PGOPTIONS= \
    node --expose-gc "$HERE/checkpoints.mjs"
say "peers: done"
