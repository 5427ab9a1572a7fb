#!/usr/bin/env bash
# Torture and crash suites for sandbox_persist (see torture.mjs for what runs).
#   bash test/torture/run.sh --short   load, invariant checks and the checker's self-test (no crash)
#   bash test/torture/run.sh --long    longer load plus kill -9 crash cycles (needs SP_CLUSTER_DIR)
# Runs against the started cluster named by PGHOST/PGPORT/PGUSER/PGDATABASE;
# creates and drops its own database (sp_torture). Extra arguments are passed
# on (--seed N, --clients N, --load-ms N, --cycles N). Ends with one summary line.
set -euo pipefail
cd "$(dirname "$0")"
# Crash cycles need the cluster directory; the cluster env file names it
# (callers that source that file do not export it).
env_file="${SANDBOX_PERSIST_STATE:-$(cd ../.. && pwd)/.cluster}/env"
if [ -z "${SP_CLUSTER_DIR:-}" ] && [ -f "$env_file" ]; then
    SP_CLUSTER_DIR=$(sed -n "s/^SP_CLUSTER_DIR='\(.*\)'\$/\1/p" "$env_file")
fi
export SP_CLUSTER_DIR="${SP_CLUSTER_DIR:-}"
npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null
exec node torture.mjs "${@:---short}"
