#!/usr/bin/env bash
# make test: set up a throwaway cluster, then run every suite: pg_regress and
# the isolation specs, the pgTAP suites, the Node adapter, the dump/restore
# round trip, the fuzzer and the torture run (short modes), the high-availability
# suite (short mode: Patroni, etcd and HAProxy on loopback, one kill -9 failover
# under the torture load and one under the adapter), and the check that a
# broken build fails this very script. Each suite prints one "summary:" line
# with its figures; they are repeated at the end, followed by one closing
# "N passed, N failed" line. Exits non-zero when any step fails, set-up
# included; the cluster is stopped on the way out either way.
#
# For make test-matrix (scripts/matrix.sh), three settings split one run:
#   SANDBOX_PERSIST_SUITES    the suites to run, from: regress pgtap node browser streams_fuzz streams_crash backup upgrade
#                             fuzz torture ha broken_build stands_alone vocabulary file_cycles shards
#                             timeline_loss monitoring pitr conformance dist cron_unreachable
#                             (packaging: not by default; root, slow) (default: all)
#   SANDBOX_PERSIST_KEEP_CLUSTER=1   leave the cluster running on exit
#   SANDBOX_PERSIST_USE_CLUSTER=1    no set-up: use the running cluster named
#                             by PGHOST/PGPORT/PGUSER/PGDATABASE, and leave it running
#
# SANDBOX_PERSIST_CPU_HOG=N starts N busy processes for the whole run (scripts/cpu_hog.sh),
# stopped however the run ends: no suite may depend on an idle machine.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SUITES=" ${SANDBOX_PERSIST_SUITES:-regress pgtap node browser streams_fuzz streams_crash backup upgrade fuzz torture ha broken_build stands_alone vocabulary file_cycles shards timeline_loss monitoring pitr conformance dist cron_unreachable} "

# One EXIT trap for everything this script starts (the hogs of
# SANDBOX_PERSIST_CPU_HOG, the cluster once stop_cluster is set); INT and TERM
# end the script through it too.
# shellcheck disable=SC1091
. scripts/cpu_hog.sh
run_guard_start || exit 2

if [ -n "${SANDBOX_PERSIST_USE_CLUSTER:-}" ]; then
    export PGHOST PGPORT PGUSER PGDATABASE
else
    bash scripts/setup.sh || { echo "set-up failed: no suite was run" >&2; exit 1; }
    [ -n "${SANDBOX_PERSIST_KEEP_CLUSTER:-}" ] || stop_cluster=1
    # shellcheck disable=SC1091
    . "${SANDBOX_PERSIST_STATE:-$ROOT/.cluster}/env"
    export SP_CLUSTER_DIR
fi
# psql, pg_prove's psql, pg_dump and pg_restore: the binaries of PG_CONFIG's major
# (with SANDBOX_PERSIST_USE_CLUSTER there may be no pg_config: then psql from PATH).
if bindir=$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null); then
    PATH="$bindir:$PATH"
    export PATH
fi

# The suites inject a clock and reset state between cases; both settings are
# superuser-only and off by default in production.
psql -X -q -v ON_ERROR_STOP=1 \
    -c "ALTER DATABASE $PGDATABASE SET sandbox_persist.allow_client_clock = on" \
    -c "ALTER DATABASE $PGDATABASE SET sandbox_persist.allow_test_reset = on" || exit 1

# shellcheck disable=SC1091
. scripts/suites.sh

regress() {
    local out status=0
    out=$(mktemp)
    make -s installcheck >"$out" 2>&1 || status=$?
    cat "$out"
    if [ $status -ne 0 ]; then
        for f in regression.diffs output_iso/regression.diffs; do
            [ -f "$f" ] && cat "$f"
        done
    fi
    # PostgreSQL 15 prints "test NAME ... ok", 16 and later "ok N - NAME".
    echo "summary: pg_regress + isolation: $(grep -Ec '^test .* \.\.\. |^(not )?ok [0-9]+ ' "$out") tests," \
        "$(grep -Eic '^test .* \.\.\. +failed|^not ok [0-9]+ ' "$out") failed"
    rm -f "$out"
    return $status
}

pgtap() {
    local out status=0
    out=$(mktemp)
    # Sorted, so zz_* (the pg_cron run, which waits for the scheduler) comes last.
    pg_prove -f -d "$PGDATABASE" $(ls test/pgtap/*.sql | LC_ALL=C sort) >"$out" 2>&1 || status=$?
    cat "$out"
    echo "summary: pgTAP: $(grep -E '^Files=' "$out" | sed 's/,  *[0-9]* wallclock.*//')," \
        "result $(grep -E '^Result:' "$out" | awk '{print $2}')"
    rm -f "$out"
    return $status
}

# chosen NAME: is suite NAME among SANDBOX_PERSIST_SUITES?
chosen() { [[ "$SUITES" == *" $1 "* ]]; }

# First, and beside the rest, on clusters of their own: cron_unreachable waits two
# of pg_cron's minutes; timeline_loss mostly waits for a standby and a promotion
# (it needs no Node module, so nothing the later suites reinstall).
chosen cron_unreachable && run_suite_background "maintenance pg_cron cannot run is reported (own cluster, pg_hba)" \
    bash test/scripts/cron_unreachable.sh
chosen timeline_loss && run_suite_background "lost-commit failover: primary, async standby, kill -9, promote" \
    env SP_HA_PRIMARY_PORT=$((${SANDBOX_PERSIST_SHARDS_PORT:-54351} + 31)) SP_HA_STANDBY_PORT=$((${SANDBOX_PERSIST_SHARDS_PORT:-54351} + 32)) \
    bash test/ha/timeline_loss.sh
chosen regress && run_suite "pg_regress and isolation specs" regress
chosen pgtap && run_suite "pgTAP suites" pgtap
chosen node && run_suite "Node adapter (clients/node)" bash clients/node/test.sh
chosen browser && run_suite "a browser reads a live stream across a reload (Chromium)" bash test/browser/run.sh
chosen streams_fuzz && run_suite "hostile HTTP against the stream server" bash test/streams_fuzz/run.sh
chosen streams_crash && run_suite "kill -9 of PostgreSQL under appends to the stream server (own cluster)" bash test/streams_crash/run.sh
chosen backup && run_suite "dump and restore" bash test/backup/run.sh
chosen upgrade && run_suite "upgrade from each release" bash test/upgrade/run.sh
chosen fuzz && run_suite "fuzz (short)" bash test/fuzz/run.sh --short --strict
chosen torture && run_suite "torture (short)" bash test/torture/run.sh --short
chosen ha && run_suite "high availability (short: Patroni, etcd, HAProxy)" bash test/ha/run.sh --short
chosen broken_build && run_suite "a broken build fails make test" bash test/scripts/broken_build.sh
chosen stands_alone && run_suite "the repository stands alone" bash test/scripts/stands_alone.sh
chosen vocabulary && run_suite "one vocabulary: C, SQL, Node, docs" bash test/scripts/vocabulary.sh
chosen shards && run_suite "router and two shards (PL/Proxy, loopback)" bash test/shards/run.sh
chosen conformance && run_suite "scripts/conformance.sh against an installed database" bash test/conformance/run.sh
chosen dist && run_suite "PGXN META.json and make dist" bash test/dist/run.sh
chosen packaging && run_suite "Debian package in a clean chroot" bash test/packaging/run.sh
chosen file_cycles && run_suite "no two C files call each other in a loop" bash test/scripts/file_cycles.sh
chosen monitoring && run_suite "Prometheus: exporter scrape against overview, alert rules" bash test/monitoring/run.sh
chosen pitr && run_suite "point-in-time recovery with pgBackRest, standby rebuild" bash test/pitr/run.sh

suites_close
