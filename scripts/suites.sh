#!/usr/bin/env bash
# Sourced by scripts/test.sh and scripts/torture.sh: run suites one after the
# other, keep each suite's "summary:" line, and close with the summaries and
# one "suites: N passed, N failed" line.

suites_log=$(mktemp)
suites_passed=0
suites_failed=0
# The suites started by run_suite_background: "pid|name|output file" each.
suites_background=()

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

# run_suite_background NAME COMMAND...: start a suite that spends its time
# waiting on something outside the run (pg_cron's next minute, a promotion)
# and needs little CPU meanwhile, beside the suites that follow; suites_close
# collects it. It must use its own clusters and ports and nothing a later
# suite rewrites (node_modules), as cron_unreachable and timeline_loss do.
run_suite_background() {
    local name=$1 out
    shift
    out=$(mktemp)
    echo "== $name: started beside the other suites, reported at the end"
    (
        started=$SECONDS
        # Stopped early (suites_stop_background), pass the TERM on, so the
        # suite's own EXIT trap stops its cluster.
        trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 143' TERM
        "$@" >"$out" 2>&1 &
        child=$!
        status=0
        wait "$child" || status=$?
        echo "suite-time: $((SECONDS - started)) s  $name (beside the others)" >>"$out.time"
        exit $status
    ) &
    suites_background+=("$!|$name|$out")
}

# suites_collect_background: wait for each background suite, print its output
# and count it as run_suite does.
suites_collect_background() {
    local entry pid name out
    for entry in "${suites_background[@]}"; do
        IFS='|' read -r pid name out <<<"$entry"
        echo "== $name"
        if wait "$pid"; then
            suites_passed=$((suites_passed + 1))
            tee -a "$suites_log" <"$out"
        else
            suites_failed=$((suites_failed + 1))
            tee -a "$suites_log" <"$out"
            echo "summary: $name: FAILED" | tee -a "$suites_log"
        fi
        cat "$out.time" >>"$suites_log" 2>/dev/null
        rm -f "$out" "$out.time"
    done
    suites_background=()
}

# suites_stop_background: end the background suites still running (the run
# is being cut short); each one's own EXIT trap stops what it started.
suites_stop_background() {
    local entry pid rest
    for entry in "${suites_background[@]}"; do
        IFS='|' read -r pid rest <<<"$entry"
        kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    suites_background=()
}

# suites_close: collect the background suites, print the summaries; succeed
# only when every suite passed.
suites_close() {
    suites_collect_background
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
