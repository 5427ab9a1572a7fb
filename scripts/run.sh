#!/usr/bin/env bash
# make run: install what is missing, build, install, start a throwaway cluster
# with pg_cron, create the extension and walk through every store. The cluster
# keeps running afterwards; `make stop` ends it, and a second `make run`
# replaces it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

bash scripts/setup.sh
# psql and the other client programs: the binaries of PG_CONFIG's major.
PATH="$("${PG_CONFIG:-pg_config}" --bindir):$PATH"
export PATH
# shellcheck disable=SC1091
. "${SANDBOX_PERSIST_STATE:-$ROOT/.cluster}/env"

psql -X -q -v ON_ERROR_STOP=1 -f scripts/walkthrough.sql

cat <<EOF_HELP

sandbox_persist is running in a throwaway cluster.
Connect with:
    $(bash scripts/cluster.sh env)
    psql
Stop it with: make stop
EOF_HELP
