#!/usr/bin/env bash
# bench/experiments/node_blobs.sh: the Node adapter's blob put and streamed get of a large
# object (SP_BENCH_NODE_BLOBS_MB, default 200) against a plain SELECT of a
# bytea column through pg, in the same run: median MB/s and peak RSS of each
# (every case in its own child process; see node_blobs.mjs). Thresholds: get
# peak RSS <= 2x put's, get MB/s >= the plain select's.
#
# Needs PGHOST/PGPORT/PGUSER of a running cluster (a superuser) with
# sandbox_persist installed, Node >= 20 and npm. Works in its own scratch
# database (SP_BENCH_NODE_BLOBS_DB, default sp_bench_node_blobs), dropped at
# the end unless SP_BENCH_KEEP=1. About 1-2 min and 1 GB of disk at 200 MiB.
# Exit status: 0 thresholds met, 1 missed (or a read-back mismatch), 2 could not run.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DB=${SP_BENCH_NODE_BLOBS_DB:-sp_bench_node_blobs}
ADMIN_DB=${PGDATABASE:-postgres}
[ "$ADMIN_DB" = "$DB" ] && ADMIN_DB=postgres

(cd "$HERE/../../clients/node" && { [ -d node_modules ] || npm ci --no-audit --no-fund --prefer-offline --loglevel=error; } \
  && npm run --silent build) || exit 2
psql -X -q -d "$ADMIN_DB" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" || exit 2
cleanup() {
  [ "${SP_BENCH_KEEP:-0}" = 1 ] || psql -X -q -d "$ADMIN_DB" -c "DROP DATABASE IF EXISTS $DB" || true
}
trap cleanup EXIT
psql -X -q -d "$DB" -c "CREATE EXTENSION sandbox_persist CASCADE" || exit 2
status=0
PGDATABASE=$DB node "$HERE/node_blobs.mjs" || status=$?
exit $status
