#!/usr/bin/env bash
# make test: set up a throwaway cluster, then run pg_regress, the isolation
# specs and the pgTAP suites. Exits non-zero on any failure; the cluster is
# stopped on the way out either way.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

# shellcheck disable=SC1091
. scripts/setup.sh || exit 1
trap 'bash "$ROOT/scripts/cluster.sh" stop' EXIT

# The suites inject a clock and reset state between cases; both settings are
# superuser-only and off by default in production.
psql -X -q -v ON_ERROR_STOP=1 \
    -c "ALTER DATABASE $PGDATABASE SET sandbox_persist.allow_client_clock = on" \
    -c "ALTER DATABASE $PGDATABASE SET sandbox_persist.allow_test_reset = on" || exit 1

status=0

echo "== pg_regress and isolation specs"
if ! make -s installcheck; then
    status=1
    for f in regression.diffs output_iso/regression.diffs; do
        [ -f "$f" ] && cat "$f"
    done
fi

echo "== pgTAP suites"
# Sorted, so zz_* (the pg_cron run, which waits for the scheduler) comes last.
if ! pg_prove -f -d "$PGDATABASE" $(ls test/pgtap/*.sql | LC_ALL=C sort); then
    status=1
fi

if [ -f clients/node/test.sh ]; then
    echo "== Node adapter (clients/node)"
    if ! bash clients/node/test.sh; then
        status=1
    fi
fi

exit $status
