#!/usr/bin/env bash
# Torture and crash suites for sandbox_persist (see torture.mjs for what runs).
#   bash test/torture/run.sh --short   load, invariant checks and the checker's self-test (no crash)
#   bash test/torture/run.sh --long    longer load plus kill -9 crash cycles (needs SP_CLUSTER_DIR)
# Runs against the started cluster named by PGHOST/PGPORT/PGUSER/PGDATABASE;
# creates and drops its own database (sp_torture). Extra arguments are passed
# on (--seed N, --clients N, --load-ms N, --cycles N). Ends with one summary line.
set -euo pipefail
cd "$(dirname "$0")"
if [ -z "${SP_CLUSTER_DIR:-}" ] && [ -f ../../.cluster/env ]; then
    # shellcheck disable=SC1091
    . ../../.cluster/env
    export SP_CLUSTER_DIR
fi
export SP_CLUSTER_DIR="${SP_CLUSTER_DIR:-}"
npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null
exec node torture.mjs "${@:---short}"
