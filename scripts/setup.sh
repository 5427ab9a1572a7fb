#!/usr/bin/env bash
# Shared set-up for make run and make test: install missing packages, build and
# install the extension, start a throwaway cluster and create the extensions in
# its database. Run it as a command, never sourced: a sourced script's `set -e`
# is ignored when its caller writes `. setup.sh || exit`, and a failed build
# would then go unnoticed. Callers source the cluster's env file afterwards.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# The packages of PG_CONFIG's major when that pg_config runs already, else
# PG_MAJOR's or the distribution's.
if [ -z "${PG_MAJOR:-}" ] && major=$("${PG_CONFIG:-pg_config}" --version 2>/dev/null); then
    PG_MAJOR=$(echo "$major" | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p')
    export PG_MAJOR
fi
bash scripts/deps.sh
# psql and the other client programs: the binaries of PG_CONFIG's major.
PATH="$("${PG_CONFIG:-pg_config}" --bindir):$PATH"
export PATH
# The system-wide install is shared by every checkout on the machine: build
# and install under one lock so two checkouts never interleave their copies.
flock /tmp/sandbox_persist.install.lock sh -c 'make -s && make -s install >/dev/null'
bash scripts/cluster.sh start
# shellcheck disable=SC1091
. "${SANDBOX_PERSIST_STATE:-$ROOT/.cluster}/env"

psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION IF NOT EXISTS pg_cron;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS sandbox_persist;
SQL
