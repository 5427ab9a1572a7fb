#!/usr/bin/env bash
# Shared set-up for make run and make test: install missing packages, build and
# install the extension, start a throwaway cluster and create the extensions in
# its database. Sourced, so the caller keeps PGHOST/PGPORT/PGUSER/PGDATABASE.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

bash scripts/deps.sh
make -s
make -s install >/dev/null
bash scripts/cluster.sh start
# shellcheck disable=SC1091
. "${SANDBOX_PERSIST_STATE:-$ROOT/.cluster}/env"

psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION IF NOT EXISTS pg_cron;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS sandbox_persist;
SQL
