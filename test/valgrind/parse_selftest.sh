#!/usr/bin/env bash
# Check how test/valgrind/run.sh reads valgrind logs, without valgrind: run
# its --logs mode on hand-made logs in test/valgrind/fixtures and compare the
# summary line and exit status. "ours" holds a use-after-free through a frame
# named by source file (seen in two processes: counted once), an
# uninitialised value whose origin is in sandbox_persist.so, a PostgreSQL-only
# error, a warning with a stack (not an error) and an empty log; "clean" has
# the PostgreSQL-only error and the empty log only.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FIX="$ROOT/test/valgrind/fixtures"
failed=0

# check NAME EXPECTED_STATUS EXPECTED_SUMMARY: one fixture directory.
check() {
    local out status=0 got line
    out=$(bash "$ROOT/test/valgrind/run.sh" --logs "$FIX/$1" 2>&1) || status=$?
    got=$(grep '^summary: ' <<<"$out")
    if [ "$status" = "$2" ] && [ "$got" = "$3" ]; then
        echo "ok - $1"
    else
        echo "not ok - $1: exit $status, $got"
        while IFS= read -r line; do echo "#   $line"; done <<<"$out"
        failed=$((failed + 1))
    fi
}

check ours 1 "summary: valgrind: 0 suites run, 4 backend processes checked, 2 errors in sandbox_persist frames, 1 other errors (suppressed: 7)"
check clean 0 "summary: valgrind: 0 suites run, 2 backend processes checked, 0 errors in sandbox_persist frames, 1 other errors (suppressed: 2)"
echo "summary: valgrind log parser: 2 fixtures, $failed failed"
[ "$failed" = 0 ]
