#!/usr/bin/env bash
# make torture: the long modes of the reliability suites, run by hand (not in
# CI): the torture load with kill -9 crash cycles, the fuzzer with at least
# 10^5 inputs, the C paths under valgrind in a cluster of its own, and the
# high-availability suite (synchronous and asynchronous replication, 5 kill -9
# failovers and a switchover each under the torture load, 3 under the adapter). Each
# prints one "summary:" line; they are repeated at the end with one closing
# "N passed, N failed" line. Exits non-zero when any suite fails.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

# SANDBOX_PERSIST_CPU_HOG=N: N busy processes for the whole run (scripts/cpu_hog.sh).
stop_cluster=""
on_exit() {
    # A second INT or TERM (make passes one on to its child after the one the
    # process group got) must not cut the clean-up short.
    trap '' INT TERM
    cpu_hog_stop
    [ -z "$stop_cluster" ] || bash "$ROOT/scripts/cluster.sh" stop
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# shellcheck disable=SC1091
. scripts/cpu_hog.sh
cpu_hog_start || exit 2

bash scripts/setup.sh || { echo "set-up failed: no suite was run" >&2; exit 1; }
stop_cluster=1
# psql and the other client programs: the binaries of PG_CONFIG's major.
PATH="$("${PG_CONFIG:-pg_config}" --bindir):$PATH"
export PATH
# shellcheck disable=SC1091
. "${SANDBOX_PERSIST_STATE:-$ROOT/.cluster}/env"
export SP_CLUSTER_DIR

# shellcheck disable=SC1091
. scripts/suites.sh

run_suite "torture (long, with crash cycles)" bash test/torture/run.sh --long
run_suite "fuzz (long)" bash test/fuzz/run.sh --long
run_suite "valgrind" bash test/valgrind/run.sh
run_suite "high availability (long)" bash test/ha/run.sh --long

suites_close
