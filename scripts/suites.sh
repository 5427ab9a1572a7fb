#!/usr/bin/env bash
# Sourced by scripts/test.sh and scripts/torture.sh: run suites one after the
# other, keep each suite's "summary:" line, and close with the summaries and
# one "suites: N passed, N failed" line.

suites_log=$(mktemp)
suites_passed=0
suites_failed=0

# run_suite NAME COMMAND...: run one suite; a non-zero exit counts as a failure.
# Each suite's wall time is kept for the closing list (make test has a budget).
run_suite() {
    local name=$1 started=$SECONDS
    shift
    echo "== $name"
    if "$@" 2>&1 | tee -a "$suites_log"; then
        suites_passed=$((suites_passed + 1))
    else
        suites_failed=$((suites_failed + 1))
        echo "summary: $name: FAILED" | tee -a "$suites_log"
    fi
    echo "suite-time: $((SECONDS - started)) s  $name" >>"$suites_log"
}

# suites_close: print the summaries; succeed only when every suite passed.
suites_close() {
    echo
    echo "== summaries"
    grep -E '^(summary: |vitest: )' "$suites_log"
    echo
    echo "== wall time per suite (seconds)"
    grep -E "^suite-time: " "$suites_log" | sed "s/^suite-time: //"
    rm -f "$suites_log"
    echo "suites: $suites_passed passed, $suites_failed failed"
    [ "$suites_failed" -eq 0 ]
}
