#!/usr/bin/env bash
# bench/experiments/planner_alternatives.sh: how the kept statements avoid plans made
# against "empty" statistics (docs/architecture.md, "Kept plans"), compared
# with the plain alternatives, in one run:
#   hook      the library as built: a planner hook plans our kept statements
#             with enable_seqscan and jit off (src/spi_util.c)
#   none      the same library without the hook (the problem: the baseline)
#   funcset   without the hook, every C function of the extension given
#             SET enable_seqscan = off SET jit = off (a function-level SET)
#   custom    without the hook, plan_cache_mode = force_custom_plan for the
#             session (re-planned at every execution, with current statistics)
# Two figures per set-up: bench/suites/empty_stats.sh (the load after VACUUM
# of the empty tables against a never-vacuumed database; ratio, lower is
# better, 1 is the target), and the per-call cost, pgbench -T 8 of
# run_get + metadata_set on a populated database (transactions/s, median of
# REPS interleaved runs). Statistics re-planning (ANALYZE while loading) is
# not a set-up: nothing re-plans a kept plan inside one long statement.
#
# Never touches the install PG_CONFIG names: it runs in a private copy of it
# with a throwaway cluster of its own (test/upgrade/release_lib.sh,
# release_lib_private_start), whose library it swaps. QUICK=1 (default):
# empty_stats at R = 2000. Needs the tree built (make) and installed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REPS=${REPS:-5}
export QUICK=${QUICK:-1}
# shellcheck disable=SC1091
. "$ROOT/test/upgrade/release_lib.sh"
WORK=$(mktemp -d /tmp/sp_planner_alternatives.XXXXXX)
cleanup() { release_lib_private_stop; rm -rf "$WORK"; }
trap cleanup EXIT
release_lib_private_start >/dev/null
LIB=$(release_lib_private_pkglib)/sandbox_persist.so
cp "$RELEASE_LIB_PREFIX/current.so" "$WORK/hook.so"

# The library without the hook: the same sources, the hook left uninstalled.
mkdir -p "$WORK/src"
(cd "$ROOT" && git ls-files -z -c -o --exclude-standard | tar --null -T - -cf - 2>/dev/null) | tar -xf - -C "$WORK/src"
sed -i 's/^\tplanner_hook = SpPlanner;/\t(void) SpPlanner;/' "$WORK/src/src/spi_util.c"
grep -q '(void) SpPlanner;' "$WORK/src/src/spi_util.c" || { echo "planner_alternatives: the hook installation was not found" >&2; exit 1; }
make -s -C "$WORK/src" -j2 PG_CONFIG="$RELEASE_LIB_BUILD_PG_CONFIG" >/dev/null
cp "$WORK/src/sandbox_persist.so" "$WORK/nohook.so"

FUNCSET="DO \$\$ DECLARE f regprocedure; BEGIN
 FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
           WHERE p.pronamespace = 'sandbox_persist'::regnamespace
             AND p.prolang = (SELECT oid FROM pg_catalog.pg_language WHERE lanname = 'c')
 LOOP EXECUTE format('ALTER FUNCTION %s SET enable_seqscan = off SET jit = off', f); END LOOP; END \$\$"
declare -A LIBS=([hook]=hook [none]=nohook [funcset]=nohook [custom]=nohook)
declare -A EXTRA=([hook]="" [none]="" [funcset]="$FUNCSET" [custom]="")
declare -A OPTS=([hook]="" [none]="" [funcset]="" [custom]="-c plan_cache_mode=force_custom_plan")
SETUPS=(hook none funcset custom)

cat >"$WORK/call.pgbench" <<'SQL'
\set i random(1, 5000)
SELECT sandbox_persist.run_get('run-' || :i);
SELECT sandbox_persist.metadata_set('ns', 'k' || :i, '{"v":1}');
SQL
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

for s in "${SETUPS[@]}"; do
    install -m 755 "$WORK/${LIBS[$s]}.so" "$LIB"
    EMPTY_STATS_EXTRA_SQL="${EXTRA[$s]}" PGOPTIONS="${OPTS[$s]}" bash "$ROOT/bench/suites/empty_stats.sh" 2>/dev/null \
        | awk -F '\t' -v s="$s" '$1 == "row" && $3 ~ /^whole load/ {print s "\t" $5 "\t" $7 "\t" $8}' >>"$WORK/empty"
done
for r in $(seq 1 "$REPS"); do
    for s in "${SETUPS[@]}"; do
        install -m 755 "$WORK/${LIBS[$s]}.so" "$LIB"
        psql -X -q -d postgres -c "DROP DATABASE IF EXISTS sp_bench_percall" -c "CREATE DATABASE sp_bench_percall" >/dev/null
        psql -X -q -d sp_bench_percall -c "CREATE EXTENSION sandbox_persist" >/dev/null
        [ -z "${EXTRA[$s]}" ] || psql -X -q -d sp_bench_percall -c "${EXTRA[$s]}" >/dev/null
        psql -X -q -d sp_bench_percall -c "SELECT count(sandbox_persist.run_create_or_resume(json_build_object('runId', 'run-' || i, 'threadId', 't', 'startedAt', i))) FROM generate_series(1, 5000) i" -c "VACUUM ANALYZE" >/dev/null
        PGOPTIONS="${OPTS[$s]}" pgbench -n -c 1 -T 8 -f "$WORK/call.pgbench" sp_bench_percall 2>/dev/null \
            | sed -n "s/^tps = \([0-9.]*\).*/$s \1/p" >>"$WORK/tps"
    done
done
hook_tps=$(awk '$1 == "hook" {print $2}' "$WORK/tps" | median)
printf 'set-up\tempty_stats vacuumed ms\tnever-vacuumed ms\tratio\tcalls tps (median of %s)\tvs hook\n' "$REPS"
for s in "${SETUPS[@]}"; do
    t=$(awk -v s="$s" '$1 == s {print $2}' "$WORK/tps" | median)
    awk -F '\t' -v s="$s" -v t="$t" -v h="$hook_tps" '$1 == s {printf "%s\t%s\t%s\t%s\t%s\t%.3f\n", s, $2, $3, $4, t, t / h}' "$WORK/empty"
done
