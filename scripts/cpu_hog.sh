#!/usr/bin/env bash
# Sourced by scripts/test.sh and scripts/torture.sh: deliberate CPU contention,
# and the one EXIT trap of those scripts (run_guard_start).
# SANDBOX_PERSIST_CPU_HOG=N starts N busy processes for the whole run, so a
# suite that passes only when the machine is idle (a sleep standing in for an
# event, a margin smaller than a descheduled process needs) fails here rather
# than at random in CI. Unset or 0: no contention.
#
# The hogs are stopped by cpu_hog_stop, which the caller's EXIT trap runs (a
# normal end, a failure, Ctrl-C or kill). Each hog also watches the shell that
# started it and exits on its own within a fraction of a second once that shell
# is gone, so not even a kill -9 of the run leaves one behind.

cpu_hog_pids=()

# cpu_hog_start: start SANDBOX_PERSIST_CPU_HOG busy processes (none when unset).
cpu_hog_start() {
    local n=${SANDBOX_PERSIST_CPU_HOG:-0} i
    case "$n" in
        '' | *[!0-9]*) echo "SANDBOX_PERSIST_CPU_HOG must be a whole number, not '$n'" >&2; return 2 ;;
    esac
    [ "$n" -gt 0 ] || return 0
    for ((i = 0; i < n; i++)); do
        # Spin in user space; between rounds of ~10^5 iterations check that the
        # starting shell ($$, passed in) still lives.
        bash -c 'while kill -0 "$1" 2>/dev/null; do for ((j = 0; j < 100000; j++)); do :; done; done' \
            cpu_hog "$$" </dev/null >/dev/null 2>&1 &
        cpu_hog_pids+=($!)
    done
    echo "cpu hog: $n busy process(es) for the whole run (pids ${cpu_hog_pids[*]})"
}

# cpu_hog_stop: stop the busy processes this shell started; safe to call twice.
cpu_hog_stop() {
    [ ${#cpu_hog_pids[@]} -gt 0 ] || return 0
    kill "${cpu_hog_pids[@]}" 2>/dev/null || true
    wait "${cpu_hog_pids[@]}" 2>/dev/null || true
    echo "cpu hog: ${#cpu_hog_pids[@]} busy process(es) stopped"
    cpu_hog_pids=()
}

# The caller sets stop_cluster=1 once it has started the throwaway cluster.
stop_cluster=""

# run_guard_on_exit: the EXIT trap: stop the hogs, the background suites
# (scripts/suites.sh) and the cluster when asked.
run_guard_on_exit() {
    # A second INT or TERM (make passes one on to its child after the one the
    # process group got) must not cut the clean-up short.
    trap '' INT TERM
    cpu_hog_stop
    if declare -F suites_stop_background >/dev/null; then suites_stop_background; fi
    [ -z "$stop_cluster" ] || bash "$ROOT/scripts/cluster.sh" stop
}

# run_guard_start: install the EXIT trap (INT and TERM exit through it), then
# start the hogs.
run_guard_start() {
    trap run_guard_on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    cpu_hog_start
}
