#!/usr/bin/env bash
# bench/suites/streams.sh: durable streams through the Node adapter (format:
# bench/README.md, "Suite format"). The measuring script is
# streams/streams.mjs: resume of 1 000 chunks against the server's read of
# them, follower latency against the append call, producer chunks/s with
# micro-batching on and off at 1 / 8 / 32 concurrent streams. Runs with
# BENCH_SYNC's synchronous_commit (make bench runs it off, then on). Builds
# the adapter (clients/node/dist) first; works in a scratch database.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck disable=SC1091
. "$ROOT/bench/suites/_common.bash"
say "streams: building the adapter (clients/node/dist)"
( cd "$ROOT/clients/node" && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error >&2; } \
    && npm run --silent build >&2 ) || { say "streams: cannot build clients/node"; exit 2; }
bench_db sp_bench_streams
PGDATABASE=$DB PGOPTIONS= QUICK=$QUICK BENCH_SYNC=$BENCH_SYNC node "$ROOT/bench/suites/streams/streams.mjs"
say "streams: done"
