#!/usr/bin/env bash
# bench/suites/empty_stats.sh: a bulk load through the API in one backend,
# on a database whose empty tables were vacuumed (statistics say "empty")
# against the same load on a database never vacuumed, in the same run
# (format: bench/README.md, "make bench" suites).
#
# Why: a statement's kept plan is made against the statistics of its first
# calls. VACUUM or ANALYZE of an empty table records 0 rows, which the
# planner believes (it assumes 10 pages only for a table never vacuumed), so
# a plan made then may read the table by sequential scan for every later key
# lookup while the table grows. Application backends live for days; the
# extension plans its kept statements with sequential scans disabled
# (src/spi_util.c), so the two databases should load alike.
#
# Each round: two fresh databases with the extension, autovacuum off on its
# tables in both (nothing re-plans behind the load's back); in one, VACUUM
# ANALYZE of every (empty) table. Then, in one psql session per database,
# five statements of R calls each (5 R rows in all: 10^5, QUICK 10^4):
#   blobs      blob_put of distinct content-addressed objects (the key is
#              looked up first, as for every content-addressed put)
#   runs       run_create_or_resume, then run_update of the same run
#   locks      lock_acquire of distinct keys
#   instances  instance_upsert of distinct keys
#   event log  event_log_append of one chunk to the log of each of R runs
# Figures: ms per statement (median of the rounds) on the vacuumed database,
# against the never-vacuumed one; and the whole load.
#
# QUICK=1: R = 2000 (~30 s); EMPTY_STATS_EXTRA_SQL: a statement run in both
# databases after CREATE EXTENSION (bench/experiments/planner_alternatives.sh); BENCH_SYNC=on|off sets synchronous_commit
# (default off). Works in its own databases (sp_bench_suite_empty_vac,
# sp_bench_suite_empty_new), dropped at the end. Needs a superuser.
set -euo pipefail
# Both loads commit alike; what differs is planning: measured with
# synchronous_commit off only (make bench's sync_sensitive fact).
printf 'fact\tsync_sensitive\tno\n'

VAC=sp_bench_suite_empty_vac
NEW=sp_bench_suite_empty_new
ADMIN_DB=${PGDATABASE:-postgres}
case "$ADMIN_DB" in "$VAC" | "$NEW") ADMIN_DB=postgres ;; esac
QUICK=${QUICK:-0}
SYNC=${BENCH_SYNC:-off}
if [ "$QUICK" = 1 ]; then R=2000 REPS=3; else R=20000 REPS=3; fi
export PGOPTIONS="${PGOPTIONS:-} -c synchronous_commit=$SYNC -c client_min_messages=warning"

log() { echo "empty_stats: $*" >&2; }
admin() { psql -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_DB" "$@"; }
median() { sort -g | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", (b == 0 ? 0 : a / b)}'; }

WORK=$(mktemp -d /tmp/sp_bench_suite_empty_stats.XXXXXX)
cleanup() {
    admin -c "DROP DATABASE IF EXISTS $VAC WITH (FORCE)" >/dev/null 2>&1 || true
    admin -c "DROP DATABASE IF EXISTS $NEW WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

WORKLOADS=(blobs runs locks instances "event log")
cat >"$WORK/load.sql" <<SQL
\\timing on
SELECT count(sandbox_persist.blob_put(
           'sandbox-files/sha256/' || encode(sha256(convert_to('body ' || i, 'UTF8')), 'hex'),
           convert_to('body ' || i, 'UTF8'), NULL, NULL))
  FROM generate_series(1, $R) i;
SELECT count(sandbox_persist.run_create_or_resume(json_build_object(
           'runId', 'run-' || i, 'threadId', 'thread-' || (i % 997), 'startedAt', i))),
       count(sandbox_persist.run_update('run-' || i, '{"driverEpoch":1,"usage":{"totalTokens":1}}'))
  FROM generate_series(1, $R) i;
SELECT count(sandbox_persist.lock_acquire('lock-' || i, 600000, NULL))
  FROM generate_series(1, $R) i;
SELECT count(sandbox_persist.instance_upsert(json_build_object(
           'key', 'inst-' || i, 'provider', 'fake', 'providerSandboxId', 'sb-' || i,
           'threadId', 'thread-' || i, 'latestRunId', 'run-' || i, 'updatedAt', i)))
  FROM generate_series(1, $R) i;
SELECT count(sandbox_persist.event_log_append('run-' || i, '[{"type":"RUN_STARTED"}]', NULL))
  FROM generate_series(1, $R) i;
SQL

# A fresh database with the extension, autovacuum off on its tables; the
# empty tables vacuumed and analysed when $2 = vacuum.
fresh_db() {
    admin -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" >/dev/null
    psql -X -q -v ON_ERROR_STOP=1 -d "$1" >/dev/null <<'SQL'
CREATE EXTENSION sandbox_persist;
DO $$
DECLARE t regclass;
BEGIN
    FOR t IN SELECT c.oid FROM pg_class c
              WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'r'
    LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', t);
    END LOOP;
END
$$;
SQL
    # bench/experiments/planner_alternatives.sh: the same load with other planning set-ups.
    if [ -n "${EMPTY_STATS_EXTRA_SQL:-}" ]; then
        psql -X -q -v ON_ERROR_STOP=1 -d "$1" -c "$EMPTY_STATS_EXTRA_SQL" >/dev/null
    fi
    if [ "$2" = vacuum ]; then
        psql -X -q -v ON_ERROR_STOP=1 -d "$1" -At >/dev/null <<'SQL'
SELECT format('VACUUM ANALYZE %s', c.oid::regclass) FROM pg_class c
 WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'r' \gexec
SQL
    fi
}

# The load in one session; appends each statement's ms to $WORK/<db>.<i>.
load() {
    local i=0 ms
    psql -X -q -v ON_ERROR_STOP=1 -d "$1" -f "$WORK/load.sql" >"$WORK/out" 2>&1 \
        || { cat "$WORK/out" >&2; exit 1; }
    while read -r ms; do
        echo "$ms" >>"$WORK/$1.$i"
        i=$((i + 1))
    done < <(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' "$WORK/out")
    [ "$i" = "${#WORKLOADS[@]}" ] || { log "expected ${#WORKLOADS[@]} timings, got $i"; exit 1; }
}

log "$REPS rounds of ${#WORKLOADS[@]} x $R calls (QUICK=$QUICK, synchronous_commit=$SYNC)"
for r in $(seq 1 "$REPS"); do
    fresh_db "$VAC" vacuum
    fresh_db "$NEW" none
    # alternate which database loads first
    if [ $((r % 2)) = 1 ]; then load "$VAC"; load "$NEW"; else load "$NEW"; load "$VAC"; fi
    log "round $r: vacuumed $(tail -qn1 "$WORK/$VAC".* | paste -sd' ') ms;" \
        "never vacuumed $(tail -qn1 "$WORK/$NEW".* | paste -sd' ') ms"
done

tv=0 tn=0
for i in "${!WORKLOADS[@]}"; do
    v=$(median <"$WORK/$VAC.$i"); n=$(median <"$WORK/$NEW.$i")
    tv=$(awk -v a="$tv" -v b="$v" 'BEGIN {print a + b}'); tn=$(awk -v a="$tn" -v b="$n" 'BEGIN {print a + b}')
    printf 'row\tempty statistics\t%s: %s calls in one statement, empty tables vacuumed first\tms\t%s\tnever-vacuumed database\t%s\t%s\tlower\n' \
        "${WORKLOADS[$i]}" "$R" "$v" "$n" "$(ratio "$v" "$n")"
done
printf 'row\tempty statistics\twhole load: %s rows through the API in one backend\tms\t%s\tnever-vacuumed database\t%s\t%s\tlower\n' \
    "$((R * ${#WORKLOADS[@]}))" "$tv" "$tn" "$(ratio "$tv" "$tn")"
