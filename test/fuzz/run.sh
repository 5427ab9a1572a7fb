#!/usr/bin/env bash
# Fuzz every sandbox_persist function with hostile arguments.
#   bash test/fuzz/run.sh --short          a few thousand inputs (make test)
#   bash test/fuzz/run.sh --long           100 000 inputs (make torture)
#   bash test/fuzz/run.sh --self-test      only prove the oracle flags failures
# Options: --seed N (reproduce a run), --inputs N, --only fn1,fn2 (restrict),
#          --strict (findings fail the run too), --compare-every N.
# Needs a running cluster: PGHOST/PGPORT/PGUSER (a superuser) exported.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null
exec node fuzz.js "$@"
