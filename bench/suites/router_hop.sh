#!/usr/bin/env bash
# bench/suites/router_hop.sh: what the PL/Proxy router (router/, docs/sharding.md)
# costs and how load spreads over shards.
#
#   (1) hop: a store call through the router against the same call on the
#       shard directly, in the same run (pgbench, one client, prepared
#       statements, medians of REPS runs interleaved): one-shard reads and
#       writes, a fan-out read, a write routed through the run cache.
#   (2) fan-out against shard count: the same router calls with 2, 4 and 8
#       shard databases (spread over the two shard clusters; QUICK: 2 and 4).
#   (3) balance: hashtext of 10^6 thread ids (UUIDs, and sequential
#       "thread-<n>" ids) bucketed as PL/Proxy does (hash & (n - 1)) for 2..64
#       shards: the fullest shard over the mean, against a uniformly random
#       placement of the same count (QUICK: 10^5 ids).
#
# Starts its own router and two shard clusters with scripts/shards.sh (state
# .shards-bench/, ports SANDBOX_PERSIST_BENCH_SHARDS_PORT, default PGPORT + 22
# and up) and stops them at the end; PGHOST/PGPORT name the runner's cluster,
# used only to pick the ports. BENCH_SYNC=on|off sets synchronous_commit on
# every cluster. Prints row/series/plot/fact lines (bench/README.md).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export LC_ALL=C LC_NUMERIC=C
QUICK=${QUICK:-0}
SYNC=${BENCH_SYNC:-off}
PATH="$("${PG_CONFIG:-pg_config}" --bindir):$PATH"
export PATH
PGBENCH=${PGBENCH:-$(command -v pgbench)}
export SANDBOX_PERSIST_SHARDS_STATE=$ROOT/.shards-bench
export SANDBOX_PERSIST_SHARDS_PORT=${SANDBOX_PERSIST_BENCH_SHARDS_PORT:-$((${PGPORT:-54329} + 22))}
if [ "$QUICK" = 1 ]; then
    REPS=3 TX=300 COUNTS="2 4" THREADS=100000
else
    REPS=5 TX=2000 COUNTS="2 4 8" THREADS=1000000
fi
log() { echo "router_hop: $*" >&2; }

bash scripts/shards.sh start 2 >&2
trap 'bash "$ROOT/scripts/shards.sh" stop >/dev/null 2>&1' EXIT
# shellcheck disable=SC1091
. "$SANDBOX_PERSIST_SHARDS_STATE/env"
unset PGOPTIONS
for d in "$ROUTER_DSN" "$SHARD_0_DSN" "$SHARD_1_DSN"; do
    psql -X -q -d "$d" -c "ALTER DATABASE postgres SET synchronous_commit = $SYNC" \
        -c "ALTER DATABASE postgres SET client_min_messages = warning"
done
psql -X -q -v ON_ERROR_STOP=1 -d "$ROUTER_DSN" -f test/shards/helpers_router.sql >/dev/null

# median of numbers on stdin.
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# latency DSN SQL: ms/op of one pgbench run of SQL (one client, prepared).
latency() {
    local f
    f=$(mktemp)
    printf '%s\n' "$2" >"$f"
    "$PGBENCH" -n -M prepared -c 1 -t "$TX" -f "$f" -d "$1" 2>/dev/null \
        | sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p'
    rm -f "$f"
}

# Keys on partition 0, so the direct baseline calls the shard that owns them.
read -r T0 K0 < <(psql -X -At -F' ' -d "$ROUTER_DSN" -c \
    "SELECT shard_test.id_on('bench-thread-', 0), shard_test.key_on('bench-key-', 0)")
psql -X -q -v ON_ERROR_STOP=1 -d "$ROUTER_DSN" >/dev/null <<SQL
SELECT sandbox_persist.message_save_thread('$T0', '[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"}]');
SELECT sandbox_persist.run_create_or_resume('{"runId":"bench-run","threadId":"$T0","startedAt":1}');
SQL

# (1) hop
declare -A WORK=(
    [message_load_thread]="SELECT sandbox_persist.message_load_thread('$T0');"
    [checkpoint_get_head]="SELECT sandbox_persist.checkpoint_get_head('$T0');"
    [metadata_set]="SELECT sandbox_persist.metadata_set('bench', '$K0', '{\"v\":1}');"
    [event_log_append]="SELECT sandbox_persist.event_log_append('bench-run', '[{\"type\":\"TEXT\"}]');"
    [run_get]="SELECT sandbox_persist.run_get('bench-run');"
)
declare -A KIND=(
    [message_load_thread]="one shard, read" [checkpoint_get_head]="one shard, read"
    [metadata_set]="one shard, write" [event_log_append]="one shard via the run cache, write"
    [run_get]="fan-out to 2 shards, read"
)
for m in message_load_thread checkpoint_get_head metadata_set event_log_append run_get; do
    r=() d=()
    latency "$ROUTER_DSN" "${WORK[$m]}" >/dev/null    # warm the router's connections and plans
    for ((i = 0; i < REPS; i++)); do
        r+=("$(latency "$ROUTER_DSN" "${WORK[$m]}")")
        d+=("$(latency "$SHARD_0_DSN" "${WORK[$m]}")")
    done
    rm_=$(printf '%s\n' "${r[@]}" | median)
    dm=$(printf '%s\n' "${d[@]}" | median)
    ratio=$(awk -v a="$rm_" -v b="$dm" 'BEGIN { printf "%.2f", a / b }')
    log "$m: router $rm_ ms, shard $dm ms, x$ratio"
    printf 'row\thop\t%s (%s)\tms/op\t%s\tthe shard directly\t%s\t%s\tlower\n' "$m" "${KIND[$m]}" "$rm_" "$dm" "$ratio"
    printf 'fact\thop_ratio_%s\t%s\n' "$m" "$ratio"
done

# (2) fan-out against shard count: shard databases spread over the two
# clusters (made from one template with the extension), one router database
# per count.
max=0
for n in $COUNTS; do [ "$n" -gt "$max" ] && max=$n; done
for c in 0 1; do
    dsn_var="SHARD_${c}_DSN"
    psql -X -q -d "${!dsn_var}" -c "CREATE DATABASE bench_tmpl" -c "ALTER DATABASE bench_tmpl SET synchronous_commit = $SYNC"
    psql -X -q -d "${!dsn_var/dbname=postgres/dbname=bench_tmpl}" -c "CREATE EXTENSION sandbox_persist"
done
shard_dsns=()
for ((i = 0; i < max; i++)); do
    dsn_var="SHARD_$((i % 2))_DSN"
    psql -X -q -d "${!dsn_var}" -c "CREATE DATABASE bench_s$i TEMPLATE bench_tmpl"
    shard_dsns+=("${!dsn_var/dbname=postgres/dbname=bench_s$i}")
done
printf 'plot\trouter_fanout\tRouter call time against shard count\tshard databases\tms/op\t0\n'
for n in $COUNTS; do
    rdsn=${ROUTER_DSN/dbname=postgres/dbname=bench_r$n}
    psql -X -q -d "$ROUTER_DSN" -c "CREATE DATABASE bench_r$n"
    psql -X -q -d "$rdsn" -c "ALTER DATABASE bench_r$n SET client_min_messages = warning"
    bash router/install.sh "$rdsn" "${shard_dsns[@]:0:$n}" >/dev/null 2>&1
    for m in run_get message_load_thread; do
        sql=${WORK[$m]}
        [ "$m" = run_get ] && sql="SELECT sandbox_persist.run_get('bench-missing');"
        latency "$rdsn" "$sql" >/dev/null
        v=()
        for ((i = 0; i < REPS; i++)); do v+=("$(latency "$rdsn" "$sql")"); done
        med=$(printf '%s\n' "${v[@]}" | median)
        label="fan-out read (run_get)"
        [ "$m" = message_load_thread ] && label="one-shard read (message_load_thread)"
        log "$n shards, $m: $med ms"
        printf 'series\trouter_fanout\t%s\t%s\t%s\n' "$label" "$n" "$med"
        printf 'fact\tfanout_ms_%s_%s_shards\t%s\n' "$m" "$n" "$med"
    done
done
d=()
for ((i = 0; i < REPS; i++)); do d+=("$(latency "${shard_dsns[0]}" "SELECT sandbox_persist.run_get('bench-missing');")"); done
dm=$(printf '%s\n' "${d[@]}" | median)
for n in $COUNTS; do printf 'series\trouter_fanout\trun_get on one shard directly\t%s\t%s\n' "$n" "$dm"; done

# (3) balance: PL/Proxy's placement of THREADS thread ids.
printf 'plot\tshard_balance\tFullest shard over the mean (%s thread ids)\tshards\tmax / mean\t1\n' "$THREADS"
psql -X -q -At -F $'\t' -v ON_ERROR_STOP=1 -d "$ROUTER_DSN" <<SQL
CREATE TEMP TABLE ids AS
SELECT g,
       pg_catalog.hashtext(pg_catalog.gen_random_uuid()::text) AS h_uuid,
       pg_catalog.hashtext('thread-' || g) AS h_seq,
       pg_catalog.random() AS u
FROM generate_series(1, $THREADS) AS g;
-- per shard count: max/mean of the shards' thread counts (an empty shard counts as 0)
CREATE TEMP TABLE balance AS
SELECT n, kind, max(c)::numeric / ($THREADS::numeric / n) AS max_over_mean
FROM (SELECT 1 << k AS n FROM generate_series(1, 6) AS k) s
CROSS JOIN LATERAL (
    SELECT 'UUID ids (hashtext)' AS kind, count(*) AS c FROM ids GROUP BY h_uuid & (n - 1)
    UNION ALL
    SELECT 'sequential ids thread-<n> (hashtext)', count(*) FROM ids GROUP BY h_seq & (n - 1)
    UNION ALL
    SELECT 'uniformly random placement', count(*) FROM ids GROUP BY floor(u * n)
) c
GROUP BY n, kind;
SELECT 'series', 'shard_balance', kind, n, round(max_over_mean, 4) FROM balance ORDER BY kind, n;
SELECT 'row', 'balance', format('%s %s, %s shards', $THREADS, replace(o.kind, ' (hashtext)', ''), o.n), 'max/mean',
       round(o.max_over_mean, 4), 'uniformly random placement', round(b.max_over_mean, 4),
       round(o.max_over_mean / b.max_over_mean, 4), 'lower'
FROM balance o JOIN balance b ON b.n = o.n AND b.kind = 'uniformly random placement'
WHERE o.kind <> 'uniformly random placement' AND o.n IN (2, 8, 64)
ORDER BY o.kind, o.n;
SELECT 'fact', 'balance_uuid_max_over_mean_' || n || '_shards', round(max_over_mean, 4)
FROM balance WHERE kind = 'UUID ids (hashtext)' ORDER BY n;
SQL
printf 'fact\tsync_sensitive\tno\n'
log done
