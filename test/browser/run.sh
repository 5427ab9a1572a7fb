#!/usr/bin/env bash
# The browser suite, run by make test: the official Durable Streams client
# (@durable-streams/client, bundled with esbuild) in Debian's headless
# Chromium reads a live JSON stream served by serveStreams (clients/node) from
# a database of its own, across two reloads of the page mid-stream, once over
# SSE and once over long-poll, and keeps exactly the messages written: no gap,
# no duplicate (test/browser/drive.mjs). Installs chromium when
# /usr/bin/chromium (or $CHROMIUM) is missing; builds clients/node when its
# node_modules or dist are missing. Uses the running test cluster
# (PGHOST/PGPORT/PGUSER, as set by scripts/test.sh); creates and drops the
# database sp_browser_<pid>. Prints one "summary: browser: ..." line.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DB=sp_browser_$$
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
export CHROMIUM

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
cleanup() { q -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1; }
trap cleanup EXIT

# --- packages -----------------------------------------------------------------
if [ ! -x "$CHROMIUM" ]; then
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    echo "installing: chromium"
    export DEBIAN_FRONTEND=noninteractive
    { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends chromium; } \
        || { echo "browser: could not install chromium" >&2; echo "summary: browser: not run (no chromium)"; exit 1; }
fi
cd "$ROOT/clients/node" || exit 1
if [ ! -d node_modules/playwright-core ] || [ ! -d node_modules/esbuild ] || [ ! -d node_modules/@durable-streams/client ]; then
    npm ci --no-audit --no-fund --prefer-offline --loglevel=error || { echo "summary: browser: not run (npm ci failed)"; exit 1; }
fi
if [ ! -f dist/index.js ]; then
    npm run --silent build || { echo "summary: browser: not run (build failed)"; exit 1; }
fi

# --- a database of its own ------------------------------------------------------
q -d postgres -c "CREATE DATABASE $DB" || { echo "summary: browser: not run (createdb failed)"; exit 1; }
q -d "$DB" -c "CREATE EXTENSION sandbox_persist" || { echo "summary: browser: not run (CREATE EXTENSION failed)"; exit 1; }

PGDATABASE=$DB node "$HERE/drive.mjs"
