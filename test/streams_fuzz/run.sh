#!/usr/bin/env bash
# The hostile-HTTP suite, run by make test: serveStreams (clients/node, built
# dist) in a child process on a database of its own, sent at least 10 000
# seeded hostile requests through fetch and raw sockets while a well-behaved
# writer appends to three target streams (test/streams_fuzz/fuzz.mjs says
# what is sent and what is checked). The server must never crash, answer no
# 5xx but the designed 503s, put nosniff on every response, and the targets
# must hold exactly the acknowledged appends.
#   SEED=N bash test/streams_fuzz/run.sh          reproduce a run's requests
#   STREAMS_FUZZ_REQUESTS=N                        how many (default 10000)
# Uses the running test cluster (PGHOST/PGPORT/PGUSER, as set by
# scripts/test.sh); creates and drops the database sp_streams_fuzz_<pid>.
# Builds clients/node when its node_modules or dist are missing. Prints one
# "summary: streams fuzz: ..." line.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DB=sp_streams_fuzz_$$

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
cleanup() { q -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1; }
trap cleanup EXIT

cd "$ROOT/clients/node" || exit 1
if [ ! -d node_modules/pg ]; then
    npm ci --no-audit --no-fund --prefer-offline --loglevel=error || { echo "summary: streams fuzz: not run (npm ci failed)"; exit 1; }
fi
if [ ! -f dist/index.js ]; then
    npm run --silent build || { echo "summary: streams fuzz: not run (build failed)"; exit 1; }
fi

q -d postgres -c "CREATE DATABASE $DB" || { echo "summary: streams fuzz: not run (createdb failed)"; exit 1; }
q -d "$DB" -c "CREATE EXTENSION sandbox_persist" || { echo "summary: streams fuzz: not run (CREATE EXTENSION failed)"; exit 1; }

PGDATABASE=$DB timeout --kill-after=10 170 node "$HERE/fuzz.mjs"
