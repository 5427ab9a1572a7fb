#!/usr/bin/env bash
# bench/suites/ds_server.sh: our Durable Streams server (serveStreams of the
# Node adapter, clients/node/src/streams/, over the bench cluster's database)
# against the protocol's reference server, @durable-streams/server 0.3.7, in
# memory and file-backed (dataDir: a log file per stream, fdatasync per
# append, LMDB metadata), in the same run (format: bench/README.md, "Suite
# format"). Every server runs in a child process of its own; one client
# process drives all three with the same code (plain fetch), rounds
# interleaved (ours, in memory, file-backed, repeat), medians of 3 rounds:
#
# 1. sequential appends, one writer, 1 000 x 100 B (QUICK 200), appends/s;
# 2. 16 writers on 16 streams, 100 x 100 B each (QUICK 20), appends/s total;
# 3. append-to-reader latency p50 / p99, a long-poll and separately an SSE
#    reader waiting at the tail (60 samples a round, QUICK 25); plot
#    ds_server_latency;
# 4. catch-up read of a 10^4-message JSON stream from -1, following
#    Stream-Next-Offset (the stream built one append a message; QUICK: 10
#    messages an append);
# 5. fork creation at the source's tail, sources of 10, 10^3, 10^4 messages
#    (plot ds_server_fork, fact: ours 10^4 / 10);
# 6. server RSS delta with 1 000 idle SSE readers (ours vs in memory, fresh
#    server processes).
# The measuring scripts are ds_server/bench.mjs and ds_server/server.mjs.
#
# Ours runs with BENCH_SYNC's synchronous_commit (make bench runs the suite
# with it off and on); the file-backed reference writes to a scratch directory
# under /tmp (same file system as the cluster here), removed at the end. What
# it needs it installs itself: the npm packages of ds_server/package.json into
# bench/suites/ds_server/node_modules (npm ci, never into clients/node's
# dependencies) and the adapter's build (clients/node: npm ci when its
# node_modules is missing, then npm run build). Works in one scratch
# database, dropped at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/bench/suites/ds_server
# shellcheck disable=SC1091
. "$ROOT/bench/suites/_common.bash"

say "ds_server: installing the reference server (bench/suites/ds_server/node_modules)"
( cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >&2 ) || { say "ds_server: npm ci failed"; exit 2; }
say "ds_server: building the adapter (clients/node/dist)"
( cd "$ROOT/clients/node" && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error >&2; } \
    && npm run --silent build >&2 ) || { say "ds_server: cannot build clients/node"; exit 2; }

DATA_DIR=$(mktemp -d /tmp/sp_bench_ds_server.XXXXXX)
bench_db sp_bench_ds_server
trap 'psql -X -q -d "$ADMIN_DB" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1; rm -rf "$DATA_DIR"' EXIT

say "ds_server: synchronous_commit $BENCH_SYNC, QUICK=$QUICK"
PGDATABASE=$DB QUICK=$QUICK BENCH_SYNC=$BENCH_SYNC ADAPTER=$ROOT/clients/node/dist/index.js PGOPTIONS= \
    DATA_DIR=$DATA_DIR REF_VERSION=$(node -p "require('$HERE/node_modules/@durable-streams/server/package.json').version") \
    node "$HERE/bench.mjs"
say "ds_server: done"
