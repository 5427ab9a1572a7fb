#!/usr/bin/env bash
# bench/experiments/durable.sh: benchmarks of the durable-runs stores (event log, locks);
# see bench/README.md, section "Durable runs".
#
#   (1) event-log append throughput, chunks/s, for batches of 1 and 32
#       ~200-byte AG-UI chunks at 1 and 2 pgbench clients, against a plain
#       INSERT of the same chunks into a (log_id, seq, chunk json) table.
#   (2) read-after-offset latency of event_log_read(..., 100) on a log of
#       10^3 and one of 10^6 chunks, offsets near the tail and in the middle.
#       Fails if median(10^6)/median(10^3) > 2 near the tail or for warm
#       middle reads; cold middle reads are reported against the baseline.
#   (3) lock_acquire + lock_release pairs/s, random key among 1000 and one
#       hot key, 2 clients, against a plain INSERT/DELETE lease row and a
#       session advisory lock (try-lock + unlock).
#
# Throughputs are medians of SP_DURABLE_RUNS runs (default 3) of
# SP_DURABLE_SECONDS each (default 5), baseline and sandbox_persist
# alternating within each run, so ratios compare like with like on a noisy
# machine. The whole script takes about 4-5 minutes with the defaults.
#
# Needs a running cluster reachable through PGHOST/PGPORT/PGUSER (a
# superuser) with sandbox_persist installed, and pgbench (PGBENCH, else on
# PATH, else in pg_config --bindir). Works in its own scratch database
# (SP_DURABLE_DB, default sp_bench_durable), created fresh and dropped at the
# end (kept when SP_DURABLE_KEEP=1).
#
# Exit status: 0 thresholds met, 1 a threshold or a consistency check failed,
# 2 the benchmark could not run.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_DB=${SP_DURABLE_DB:-sp_bench_durable}
ADMIN_DB=${PGDATABASE:-postgres}
[ "$ADMIN_DB" = "$BENCH_DB" ] && ADMIN_DB=postgres
DURATION=${SP_DURABLE_SECONDS:-5}
RUNS=${SP_DURABLE_RUNS:-3}
READ_SAMPLES=${SP_DURABLE_READ_SAMPLES:-500}
READ_WARMUP=50
SECTIONS=" ${SP_DURABLE_SECTIONS:-1 2 3} "
LOCK_KEYS=1000
if [ -z "${PGBENCH:-}" ]; then
    PGBENCH=$(command -v pgbench || echo "$("${PG_CONFIG:-pg_config}" --bindir 2>/dev/null)/pgbench")
fi
# Bound every statement so a pathological build cannot run for ever.
export PGOPTIONS="${PGOPTIONS:-} -c statement_timeout=150s -c client_min_messages=warning"

admin() { psql -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_DB" "$@"; }
bench() { psql -X -q -v ON_ERROR_STOP=1 -d "$BENCH_DB" "$@"; }
value() { bench -At -c "$1"; }
die() { echo "$*" >&2; exit 2; }

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    if [ "${SP_DURABLE_KEEP:-0}" = 1 ]; then
        echo "(kept database $BENCH_DB)"
    else
        admin -c "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" >/dev/null 2>&1 || true
    fi
}

# median of the numbers in the arguments (space-separated lists)
median() {
    tr ' ' '\n' <<<"$*" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) printf "%.6g\n", v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# a / b with two decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f\n", a / b }'; }
# the ratios a_i / b_i of two equally long space-separated lists, as "min..max"
ratio_range() {
    awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) { r = x[i] / y[i]; if (i == 1 || r < lo) lo = r; if (i == 1 || r > hi) hi = r }
        printf "%.2f..%.2f\n", lo, hi }'
}
# a number rounded to an integer
num() { printf '%.0f' "$1"; }

# run_pgbench SCRIPT CLIENTS [pgbench args...]: sets PB_TPS and PB_TXNS
run_pgbench() {
    local script=$1 clients=$2 out
    shift 2
    if ! out=$("$PGBENCH" -n -M prepared -c "$clients" -j "$clients" -T "$DURATION" \
                 -f "$HERE/$script" "$@" "$BENCH_DB" 2>&1) \
       || grep -q 'aborted' <<<"$out"; then
        echo "pgbench $script with $clients client(s) failed:" >&2
        echo "$out" | tail -n 20 >&2
        exit 2
    fi
    PB_TPS=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out")
    PB_TXNS=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    if [ -z "$PB_TPS" ] || [ -z "$PB_TXNS" ]; then die "cannot parse pgbench output: $out"; fi
}

start=$(date +%s)
export LC_NUMERIC=C
[ -x "$PGBENCH" ] || die "pgbench not found (set PGBENCH; it ships with postgresql-client)"
if ! avail=$(admin -At -c "SELECT default_version FROM pg_available_extensions WHERE name = 'sandbox_persist'"); then
    die "cannot reach the cluster (PGHOST=${PGHOST:-} PGPORT=${PGPORT:-})"
fi
[ -n "$avail" ] || die "sandbox_persist is not installed in this cluster (make install)"

admin -c "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" >/dev/null
admin -c "CREATE DATABASE $BENCH_DB" >/dev/null
trap cleanup EXIT
bench -f "$HERE/durable_setup.sql" >/dev/null \
    || die "could not create sandbox_persist in $BENCH_DB (is the installed build consistent? make install)"

cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)
echo "sandbox_persist durable-runs benchmarks"
echo "machine: $(uname -m), $(nproc) CPUs (${cpu:-unknown}), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server:  $(value "SELECT split_part(version(), ' on ', 1)"), sandbox_persist $(value "SELECT extversion FROM pg_extension WHERE extname = 'sandbox_persist'"), database $BENCH_DB"
echo "         fsync=$(value "SHOW fsync"), synchronous_commit=$(value "SHOW synchronous_commit"), shared_buffers=$(value "SHOW shared_buffers")"
echo "client:  $("$PGBENCH" --version), -M prepared, $RUNS runs x $DURATION s per measurement"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"

status=0

# ---------------------------------------------------------------- (1)
section_start=$(date +%s)
section_done() { echo "    [section took $(( $(date +%s) - section_start )) s]"; section_start=$(date +%s); }
if [[ $SECTIONS == *" 1 "* ]]; then
echo
echo "(1) event-log append throughput, chunks/s: each client appends batches to its"
echo "    own run's log; baseline INSERTs the same JSON array's elements into a plain"
echo "    (log_id, seq, chunk json) table with the same primary key. Median of $RUNS runs."

declare -A batch_json
for b in 1 32; do
    batch_json[$b]=$(value "SELECT bench_durable.batch('run-1', 0, $b)")
done
chunk_avg=$(value "SELECT round(avg(length(bench_durable.chunk('run-1', i)))) FROM generate_series(0, 31) i")
echo "    chunk: ~$chunk_avg bytes, e.g. $(value "SELECT bench_durable.chunk('run-1', 0)")"

reset_append() {
    bench -c "TRUNCATE sandbox_persist.event_logs, sandbox_persist.event_log_entries,
                       sandbox_persist.event_log_producers, bench_durable.plain_log" \
          -c "CHECKPOINT" >/dev/null
}

declare -A append_res append_bad
for run in $(seq 1 "$RUNS"); do
    for b in 1 32; do
        for c in 1 2; do
            if [ $((run % 2)) = 1 ]; then order="plain sp"; else order="sp plain"; fi
            for v in $order; do
                reset_append
                run_pgbench "durable_append_$v.pgbench" "$c" \
                    -D "chunks=${batch_json[$b]}" -D batch="$b" -D seq=0
                append_res[$v,$b,$c]+=" $(awk -v t="$PB_TPS" -v b="$b" 'BEGIN { printf "%.1f", t * b }')"
                # every log dense from 1 and as long as the work pgbench did
                if [ "$v" = sp ]; then
                    check=$(value "SELECT count(*) FILTER (WHERE n <> tail_seq OR mx <> tail_seq) || ' ' || coalesce(sum(n), 0)
                                   FROM (SELECT l.tail_seq, count(e.seq) AS n, coalesce(max(e.seq), 0) AS mx
                                         FROM sandbox_persist.event_logs l
                                         LEFT JOIN sandbox_persist.event_log_entries e USING (log_id)
                                         GROUP BY l.log_id, l.tail_seq) s")
                else
                    check="0 $(value "SELECT count(*) FROM bench_durable.plain_log")"
                fi
                read -r gaps rows <<<"$check"
                if [ "$gaps" != 0 ] || [ "$rows" -lt $((PB_TXNS * b)) ]; then
                    append_bad[$v,$b,$c]="run $run: $gaps logs not dense, $rows rows for $PB_TXNS appends of $b"
                fi
            done
        done
    done
done

printf '    %5s %7s | %16s | %16s | %9s %12s\n' batch clients 'baseline INSERT' 'sandbox_persist' 'ratio' 'per run'
printf '    %5s %7s | %16s | %16s | %9s %12s\n' '' '' 'chunks/s' 'chunks/s' 'sp/base' 'sp/base'
for b in 1 32; do
    for c in 1 2; do
        mp=$(median "${append_res[plain,$b,$c]}")
        ms=$(median "${append_res[sp,$b,$c]}")
        printf '    %5s %7s | %16s | %16s | %9s %12s\n' "$b" "$c" "$(num "$mp")" "$(num "$ms")" \
            "$(ratio "$ms" "$mp")" "$(ratio_range "${append_res[sp,$b,$c]}" "${append_res[plain,$b,$c]}")"
    done
done
for k in "${!append_bad[@]}"; do
    echo "    FAIL: consistency ($k): ${append_bad[$k]}"
    status=1
done
echo "    info: batch-32 gain over batch-1 (median chunks/s, 1 client): sandbox_persist" \
     "$(ratio "$(median "${append_res[sp,32,1]}")" "$(median "${append_res[sp,1,1]}")")x," \
     "baseline $(ratio "$(median "${append_res[plain,32,1]}")" "$(median "${append_res[plain,1,1]}")")x"
section_done
fi

# ---------------------------------------------------------------- (2)
if [[ $SECTIONS == *" 2 "* ]]; then
echo
echo "(2) read-after-offset latency, 100 entries per read, timed server-side"
echo "    (clock_timestamp around each call in a DO loop). Baseline: the same index range"
echo "    scan in PL/pgSQL, SELECT ... WHERE log_id = \$1 AND seq > \$2 ORDER BY seq LIMIT 100,"
echo "    over a plain table holding the same rows; reads each chunk's text, builds no JSON."
echo "    $READ_SAMPLES reads per case after $READ_WARMUP warm-up rounds, all cases interleaved."
t0=$(date +%s.%N)
bench -f "$HERE/durable_read_build.sql" >/dev/null || die "could not build the read benchmark's logs"
t1=$(date +%s.%N)
echo "    built logs of 10^3 and 10^6 chunks (1000 appends of 1000), the baseline copy," \
     "CHECKPOINT, VACUUM ANALYZE: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
echo "    entries table $(value "SELECT pg_size_pretty(pg_relation_size('sandbox_persist.event_log_entries'))")" \
     "+ index $(value "SELECT pg_size_pretty(pg_relation_size('sandbox_persist.event_log_entries_pkey'))")," \
     "the same again for the baseline; shared_buffers $(value "SHOW shared_buffers")"
bench -v samples="$READ_SAMPLES" -v warmup="$READ_WARMUP" -f "$HERE/durable_read_measure.sql" >/dev/null \
    || die "the read benchmark failed"
bench -At <<'SQL'
WITH q AS (
    SELECT impl, size, pos,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY us) AS med,
           percentile_cont(0.9) WITHIN GROUP (ORDER BY us) AS p90
    FROM bench_durable.read_latency GROUP BY impl, size, pos),
w AS (
    SELECT pos,
           max(med) FILTER (WHERE impl = 'sp' AND size = 'small') AS sp_s,
           max(p90) FILTER (WHERE impl = 'sp' AND size = 'small') AS sp_s90,
           max(med) FILTER (WHERE impl = 'sp' AND size = 'big') AS sp_b,
           max(p90) FILTER (WHERE impl = 'sp' AND size = 'big') AS sp_b90,
           max(med) FILTER (WHERE impl = 'plain' AND size = 'small') AS pl_s,
           max(med) FILTER (WHERE impl = 'plain' AND size = 'big') AS pl_b
    FROM q GROUP BY pos)
SELECT format('    %-19s| %-40s| %-26s| %s', '', 'sandbox_persist: median (p90) us', 'baseline: median us', 'ratio sp/base')
    || E'\n' || format('    %-19s| %13s %13s %12s | %7s %7s %10s | %6s %6s',
                        'offset', '10^3', '10^6', 'big/small', '10^3', '10^6', 'big/small', '10^3', '10^6')
UNION ALL
SELECT * FROM (
    SELECT format('    %-19s| %13s %13s %12s | %7s %7s %10s | %6s %6s',
                  CASE pos WHEN 'tail' THEN 'near the tail' WHEN 'middle' THEN 'middle (random)'
                           ELSE 'middle, re-read' END,
                  format('%s (%s)', round(sp_s::numeric, 1), round(sp_s90::numeric)),
                  format('%s (%s)', round(sp_b::numeric, 1), round(sp_b90::numeric)),
                  to_char(sp_b / sp_s, 'FM990.00') || CASE WHEN pos = 'middle' THEN ' info' ELSE ' <=2' END,
                  round(pl_s::numeric, 1), round(pl_b::numeric, 1), to_char(pl_b / pl_s, 'FM990.00'),
                  to_char(sp_s / pl_s, 'FM990.00'), to_char(sp_b / pl_b, 'FM990.00'))
    FROM w ORDER BY array_position(ARRAY['tail', 'middle', 'reread'], pos)) t;
SQL
bench -f "$HERE/durable_read_explain.sql" >/dev/null || die "the read diagnosis failed"
echo "    where the time goes: EXPLAIN (ANALYZE, BUFFERS) of event_log_read's entries query"
echo "    at 50 fresh offsets per case, averages per read (read = shared_buffers miss):"
bench -At <<'SQL'
SELECT format('      %-20s hit %5s  read %5s  dirtied %4s  read time %7s us  execution %7s us',
              CASE size WHEN 'small' THEN '10^3' ELSE '10^6' END
              || CASE pos WHEN 'tail' THEN ', near the tail' ELSE ', middle' END,
              round(avg(hit), 1), round(avg(read), 1), round(avg(dirtied), 1),
              round(avg(io_us)::numeric, 1), round(avg(exec_us)::numeric, 1))
FROM bench_durable.read_buffers GROUP BY size, pos ORDER BY pos DESC, size DESC;
SQL
# Gated: reads near the tail (what a following reader does) and warm reads in
# the middle. A cold random read in the middle of a log larger than
# shared_buffers pays buffer misses and first touches of uncached pages, which
# the plain-table baseline pays the same way; it is reported, not gated.
failed_pos=$(value "WITH q AS (SELECT size, pos, percentile_cont(0.5) WITHIN GROUP (ORDER BY us) AS med
                              FROM bench_durable.read_latency WHERE impl = 'sp' AND pos <> 'middle'
                              GROUP BY size, pos)
                    SELECT coalesce(string_agg(s.pos, ', '), '') FROM q s JOIN q b ON b.pos = s.pos
                    WHERE s.size = 'small' AND b.size = 'big' AND b.med / s.med > 2")
if [ -n "$failed_pos" ]; then
    echo "    FAIL: event_log_read median(10^6)/median(10^3) > 2 for offsets: $failed_pos"
    status=1
else
    echo "    PASS: event_log_read median(10^6)/median(10^3) <= 2 near the tail and for warm middle reads"
fi
echo "    info: cold random middle reads are bound by buffer misses on a log larger than shared_buffers (see the baseline column)"
section_done

fi

# ---------------------------------------------------------------- (3)
if [[ $SECTIONS == *" 3 "* ]]; then
echo
echo "(3) lock acquire + release pairs/s, 2 clients, 30 s leases: sandbox_persist"
echo "    lock_acquire then lock_release with the returned token; baselines: a plain"
echo "    INSERT ... ON CONFLICT DO NOTHING / DELETE of a (key, owner) row, and"
echo "    pg_try_advisory_lock / pg_advisory_unlock. A pair counts only when the"
echo "    acquire succeeded (the hot key is often held by the other client)."
bench -c "TRUNCATE bench_durable.plain_log, sandbox_persist.event_logs, sandbox_persist.event_log_entries" \
      -c "CHECKPOINT" >/dev/null

reset_locks() {
    bench -c "DELETE FROM sandbox_persist.locks" -c "TRUNCATE bench_durable.plain_locks" \
          -c "VACUUM sandbox_persist.locks" -c "SELECT setval('bench_durable.pairs', 1, false)" >/dev/null
}

declare -A lock_pairs lock_tps
variants=(sp table advisory)
for run in $(seq 1 "$RUNS"); do
    for nkeys in $LOCK_KEYS 1; do
        # rotate the order of the three variants from run to run
        case $((run % 3)) in
            1) order="sp table advisory" ;; 2) order="table advisory sp" ;; 0) order="advisory sp table" ;;
        esac
        for v in $order; do
            reset_locks
            run_pgbench "durable_lock_$v.pgbench" 2 -D nkeys="$nkeys"
            pairs=$(value "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM bench_durable.pairs")
            lock_tps[$v,$nkeys]+=" $PB_TPS"
            lock_pairs[$v,$nkeys]+=" $(awk -v t="$PB_TPS" -v p="$pairs" -v n="$PB_TXNS" 'BEGIN { printf "%.1f", t * p / n }')"
        done
    done
done
if [ "$(value "SELECT count(*) FROM sandbox_persist.locks WHERE lock_key LIKE 'bench-lock:%'")" -gt 2 ]; then
    echo "    FAIL: consistency: more lease rows left than clients (a release did not delete its row)"
    status=1
fi

printf '    %-20s | %-18s | %-18s | %-18s | %8s %8s\n' \
    '' 'sandbox_persist' 'baseline: table' 'baseline: advisory' 'ratio' 'ratio'
printf '    %-20s | %10s %7s | %10s %7s | %10s %7s | %8s %8s\n' \
    'keys' 'pairs/s' 'granted' 'pairs/s' 'granted' 'pairs/s' 'granted' 'sp/table' 'sp/adv'
for nkeys in $LOCK_KEYS 1; do
    cells=()
    for v in "${variants[@]}"; do
        mp=$(median "${lock_pairs[$v,$nkeys]}")
        mt=$(median "${lock_tps[$v,$nkeys]}")
        cells+=("$(num "$mp")" "$(awk -v p="$mp" -v t="$mt" 'BEGIN { printf "%.0f%%", 100 * p / t }')")
        eval "med_$v=$mp"
    done
    label="random among $nkeys"
    [ "$nkeys" = 1 ] && label="one hot key"
    # shellcheck disable=SC2154
    printf '    %-20s | %10s %7s | %10s %7s | %10s %7s | %8s %8s\n' "$label" "${cells[@]}" \
        "$(ratio "$med_sp" "$med_table")" "$(ratio "$med_sp" "$med_advisory")"
    printf '    %-20s   per-run ratios: sp/table %s, sp/advisory %s\n' '' \
        "$(ratio_range "${lock_pairs[sp,$nkeys]}" "${lock_pairs[table,$nkeys]}")" \
        "$(ratio_range "${lock_pairs[sp,$nkeys]}" "${lock_pairs[advisory,$nkeys]}")"
done
echo "    (granted: share of acquire attempts that got the lock; pairs/s counts only those)"
section_done
fi

echo
echo "total bench time: $(( $(date +%s) - start )) s; exit status $status"
exit $status
