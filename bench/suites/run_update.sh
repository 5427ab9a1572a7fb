#!/usr/bin/env bash
# bench/suites/run_update.sh: run_update (a durable-field patch) against a
# bare UPDATE of a plain table with the same columns, in the same run
# (format: bench/README.md, "make bench" suites).
#
# The patch is the one a driver writes on every claim, {"driverEpoch": e,
# "cancelRequested": false} (e from one sequence, so it always increases;
# json_build_object, as pgbench reads ":name" in a literal as a variable).
# The baseline, bench.plain_runs, has the columns, constraints and indexes of
# sandbox_persist.runs (CREATE TABLE ... LIKE ... INCLUDING INDEXES: what the
# same reads and clean-ups need), the same rows, and the default fillfactor
# (100). Its statement sets the same two fields and the write time:
#   UPDATE bench.plain_runs SET driver_epoch = nextval(..), cancel_requested =
#   false, changed_at = <clock ms> WHERE run_id = $1
# Both run through pgbench -M prepared, 2 clients, one transaction per update,
# random runs, alternating ours/baseline, REPS times each (medians).
# Figures:
#   * throughput (tx/s) of each, and the ratio;
#   * HOT updates of sandbox_persist.runs during those runs
#     (pg_stat_user_tables n_tup_hot_upd / n_tup_upd), and the baseline's;
#   * storage after exactly 5 updates per run (every run, one transaction per
#     update, autovacuum off on both tables so neither is vacuumed in
#     between): pg_total_relation_size of each table (heap, TOAST, indexes).
#
# QUICK=1: fewer runs, shorter runs (~30 s); BENCH_SYNC=on|off sets
# synchronous_commit (default off). Works in its own database
# (sp_bench_suite_run_update), dropped at the end. Needs a superuser.
set -euo pipefail
# The target is defined with synchronous_commit off (2 clients): measured
# that way only (make bench's sync_sensitive fact).
printf 'fact\tsync_sensitive\tno\n'

DB=sp_bench_suite_run_update
ADMIN_DB=${PGDATABASE:-postgres}
[ "$ADMIN_DB" = "$DB" ] && ADMIN_DB=postgres
QUICK=${QUICK:-0}
SYNC=${BENCH_SYNC:-off}
if [ "$QUICK" = 1 ]; then
    RUNS=5000 SECS=2 REPS=3 STORE_RUNS=1000 STORE_REPS=3
else
    RUNS=50000 SECS=10 REPS=5 STORE_RUNS=5000 STORE_REPS=3
fi
CLIENTS=2
export PGOPTIONS="${PGOPTIONS:-} -c synchronous_commit=$SYNC -c client_min_messages=warning"

log() { echo "run_update: $*" >&2; }
admin() { psql -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_DB" "$@"; }
db() { psql -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
val() { db -At -c "$1"; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", (b == 0 ? 0 : a / b)}'; }

WORK=$(mktemp -d /tmp/sp_bench_suite_run_update.XXXXXX)
cleanup() {
    admin -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
admin -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
admin -c "CREATE DATABASE $DB" >/dev/null

db >/dev/null <<'SQL'
CREATE EXTENSION sandbox_persist;
CREATE SCHEMA bench;
CREATE SEQUENCE bench.epoch;
CREATE SEQUENCE bench.turn;
CREATE TABLE bench.plain_runs
    (LIKE sandbox_persist.runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);
-- Both tables filled with n runs: created through the API, each with a
-- sandbox key and a usage record (the shape of a run a driver claims), the
-- plain table a copy.
CREATE FUNCTION bench.fill(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sandbox_persist._reset_for_tests();
    TRUNCATE bench.plain_runs;
    PERFORM sandbox_persist.run_create_or_resume(json_build_object(
                'runId', 'run-' || i, 'threadId', 'thread-' || (i % 997), 'startedAt', 1700000000000 + i)),
            sandbox_persist.run_update('run-' || i, json_build_object(
                'sandboxKey', 'sandbox-' || i, 'usage', json_build_object('totalTokens', i)))
       FROM generate_series(1, n) i;
    INSERT INTO bench.plain_runs SELECT * FROM sandbox_persist.runs;
END
$$;

SQL
db -c "ALTER DATABASE $DB SET sandbox_persist.allow_test_reset = on" >/dev/null

# Both tables compacted (VACUUM FULL: each at its own fillfactor) and analysed.
fill() {
    db -c "SELECT bench.fill($1)" >/dev/null
    db -c "VACUUM FULL ANALYZE sandbox_persist.runs" -c "VACUUM FULL ANALYZE bench.plain_runs" >/dev/null
}

# Client c patches only runs c+1, c+3, ... so two clients never race one
# run's epoch (a lower epoch committed second would be refused, SP201).
cat >"$WORK/ours.sql" <<'SQL'
\set id random(0, :runs / 2 - 1) * 2 + :client_id + 1
SELECT sandbox_persist.run_update('run-' || :id, json_build_object('driverEpoch', nextval('bench.epoch'), 'cancelRequested', false));
SQL
cat >"$WORK/plain.sql" <<'SQL'
\set id random(0, :runs / 2 - 1) * 2 + :client_id + 1
UPDATE bench.plain_runs SET driver_epoch = nextval('bench.epoch'), cancel_requested = false,
    changed_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint WHERE run_id = 'run-' || :id;
SQL
# The storage round: turns 1..5n, turn t updates run (7919 t mod n) + 1: each
# n consecutive turns update every run once (7919 is a prime, n not a multiple
# of it), so every run is updated exactly 5 times, and consecutive turns land
# on distant rows, as updates of unrelated runs do (two clients updating
# neighbours on one page keep each other from pruning it). The baseline takes
# its turn in a sub-select, evaluated once (nextval in the WHERE clause itself
# would be evaluated for every row).
cat >"$WORK/ours_turn.sql" <<'SQL'
SELECT sandbox_persist.run_update('run-' || (nextval('bench.turn') * 7919 % :runs + 1), json_build_object('driverEpoch', nextval('bench.epoch'), 'cancelRequested', false));
SQL
cat >"$WORK/plain_turn.sql" <<'SQL'
UPDATE bench.plain_runs SET driver_epoch = nextval('bench.epoch'), cancel_requested = false,
    changed_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint
 WHERE run_id = (SELECT 'run-' || (nextval('bench.turn') * 7919 % :runs + 1));
SQL

# tps of one pgbench run
bench_tps() {
    if ! pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" -D runs="$RUNS" -f "$1" "$DB" \
            >"$WORK/pgbench.out" 2>&1; then
        cat "$WORK/pgbench.out" >&2
        return 1
    fi
    sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$WORK/pgbench.out"
}
# "n_tup_upd n_tup_hot_upd" of a table, from the cumulative statistics
upd_stats() {
    val "SELECT n_tup_upd || ' ' || n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = '$1'::regclass"
}

# ------------------------------------------------------------ throughput
log "filling $RUNS runs (QUICK=$QUICK, synchronous_commit=$SYNC)"
fill "$RUNS"
read -r ou0 oh0 <<<"$(upd_stats sandbox_persist.runs)"
read -r pu0 ph0 <<<"$(upd_stats bench.plain_runs)"
: >"$WORK/ours.tps"; : >"$WORK/plain.tps"
for r in $(seq 1 "$REPS"); do
    o=$(bench_tps "$WORK/ours.sql"); p=$(bench_tps "$WORK/plain.sql")
    [ -n "$o" ] && [ -n "$p" ] || { log "pgbench failed"; exit 1; }
    echo "$o" >>"$WORK/ours.tps"; echo "$p" >>"$WORK/plain.tps"
    ratio "$o" "$p" >>"$WORK/round.ratio"; echo >>"$WORK/round.ratio"
    log "round $r: run_update $o tx/s, bare UPDATE $p tx/s"
done
sleep 1   # the clients' statistics are flushed when they exit
read -r ou1 oh1 <<<"$(upd_stats sandbox_persist.runs)"
read -r pu1 ph1 <<<"$(upd_stats bench.plain_runs)"
o=$(median <"$WORK/ours.tps"); p=$(median <"$WORK/plain.tps")
printf 'row\truns\trun_update durable patch, %s clients, %s runs\ttx/s\t%s\tbare UPDATE, plain table\t%s\t%s\thigher\n' \
    "$CLIENTS" "$RUNS" "$o" "$p" "$(ratio "$o" "$p")"
# the machine is shared: the ratio within each round (ours and the baseline
# back to back) is steadier than the ratio of the medians
printf 'fact\trun_update / bare UPDATE tx/s, median of the per-round ratios\t%s\n' "$(median <"$WORK/round.ratio")"
ou=$((ou1 - ou0)); oh=$((oh1 - oh0)); pu=$((pu1 - pu0)); ph=$((ph1 - ph0))
printf 'fact\trun_update HOT updates (sandbox_persist.runs)\t%s of %s (%s%%)\n' "$oh" "$ou" \
    "$(awk -v a="$oh" -v b="$ou" 'BEGIN {printf "%.1f", (b ? 100 * a / b : 0)}')"
printf 'fact\tbare UPDATE HOT updates (plain table)\t%s of %s (%s%%)\n' "$ph" "$pu" \
    "$(awk -v a="$ph" -v b="$pu" 'BEGIN {printf "%.1f", (b ? 100 * a / b : 0)}')"
printf 'fact\tindexes on sandbox_persist.runs\t%s\n' \
    "$(val "SELECT count(*) FROM pg_index WHERE indrelid = 'sandbox_persist.runs'::regclass")"

# ------------------------------------------------------------ storage
db -c "ALTER TABLE sandbox_persist.runs SET (autovacuum_enabled = off)" \
   -c "ALTER TABLE bench.plain_runs SET (autovacuum_enabled = off)" >/dev/null
: >"$WORK/ours.bytes"; : >"$WORK/plain.bytes"
turns=$((5 * STORE_RUNS / CLIENTS))
for r in $(seq 1 "$STORE_REPS"); do
    fill "$STORE_RUNS"
    ob0=$(val "SELECT pg_total_relation_size('sandbox_persist.runs')")
    pb0=$(val "SELECT pg_total_relation_size('bench.plain_runs')")
    read -r su0 sh0 <<<"$(upd_stats sandbox_persist.runs)"
    read -r qu0 qh0 <<<"$(upd_stats bench.plain_runs)"
    db -c "SELECT setval('bench.turn', 1, false)" >/dev/null
    pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -t "$turns" -D runs="$STORE_RUNS" \
        -f "$WORK/ours_turn.sql" "$DB" >/dev/null 2>&1
    db -c "SELECT setval('bench.turn', 1, false)" >/dev/null
    pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -t "$turns" -D runs="$STORE_RUNS" \
        -f "$WORK/plain_turn.sql" "$DB" >/dev/null 2>&1
    ob=$(val "SELECT pg_total_relation_size('sandbox_persist.runs')")
    pb=$(val "SELECT pg_total_relation_size('bench.plain_runs')")
    echo "$ob" >>"$WORK/ours.bytes"; echo "$pb" >>"$WORK/plain.bytes"
    sleep 2
    read -r su1 sh1 <<<"$(upd_stats sandbox_persist.runs)"
    read -r qu1 qh1 <<<"$(upd_stats bench.plain_runs)"
    log "storage round $r: runs $ob0 -> $ob bytes ($((sh1 - sh0)) of $((su1 - su0)) HOT)," \
        "plain $pb0 -> $pb bytes ($((qh1 - qh0)) of $((qu1 - qu0)) HOT)"
done
ob=$(median <"$WORK/ours.bytes"); pb=$(median <"$WORK/plain.bytes")
printf 'row\truns\tstorage after 5 updates per run, %s runs\tbytes\t%s\tplain table, same updates\t%s\t%s\tlower\n' \
    "$STORE_RUNS" "$ob" "$pb" "$(ratio "$ob" "$pb")"
