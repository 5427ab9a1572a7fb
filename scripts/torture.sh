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

# One EXIT trap for everything this script starts (the hogs of
# SANDBOX_PERSIST_CPU_HOG, the cluster once stop_cluster is set); INT and TERM
# end the script through it too.
# shellcheck disable=SC1091
. scripts/cpu_hog.sh
run_guard_start || exit 2

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
