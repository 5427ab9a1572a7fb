#!/usr/bin/env bash
# bench/suites/scale.sh: the extension at production size against the same
# shapes 100 times smaller. Two databases of one cluster, `large` (SCALE_LARGE,
# default 1: 10^6 runs, 10^6 instances, 4 * 10^6 conversation messages,
# 5 * 10^6 event-log entries, ~6 GB) and `small` (SCALE_SMALL, default 0.01),
# are built by bench/suites/scale/build.sql through the extension's own
# functions (BUILD_JOBS parallel sessions, default 2; a NOTICE per build step
# on stderr), with a mix of live, finished, detached, expired and orphaned
# records (see build.sql), then measured alternately, round by round, so
# machine noise hits both alike:
#   - every hot call, per call time through pgbench (one client, prepared
#     statements, random existing keys; bench/suites/scale/<call>.pgbench):
#     large / small, median of BENCH_REPS runs (5; QUICK 3) of BENCH_SECONDS (1)
#   - overview, metrics(), _maintenance_backlog(vnow), maintenance_health(),
#     attention_list(), instance_gc_candidates(7 days, 100, vnow),
#     run_list_reclaimable(vnow, 5 min): ms, median of BENCH_REPS calls (3)
#   - maintain(default max_rows, vnow) draining the backlog, once (it is destructive),
#     with run_get traffic alongside: the calls, their median time, the
#     minutes at pg_cron's once-a-minute schedule (a minute a call plus the
#     calls' own time); run_get latency (p50, p99) on large during the drain
#     against idle after it; maintain() with nothing left to do; then, after
#     VACUUM ANALYZE (the steady state), maintain() with nothing to do and
#     overview, metrics() and _maintenance_backlog() again
#   - storage per record kind on large: pg_total_relation_size of each table
#     of the extension (and of its largest index) per row; the build times.
# vnow, the virtual now, is 7 days after the expired runs were written (runs
# and logs carry server-clock times; build.sql places everything else around
# vnow): the databases run with sandbox_persist.allow_client_clock,
# run_retention 7 days and reaper_ttl 5 min. Every measured statement runs
# under SCALE_STATEMENT_TIMEOUT (120 s): a timeout prints nan and a note on
# stderr and skips that database's remaining runs of the measurement. The
# measurements stop SCALE_BUDGET seconds (1140) after the build, whatever is
# left. QUICK=1: scales 0.01 and 0.001, pgbench runs of BENCH_TXNS (1000)
# transactions. SCALE_BUILD_ONLY=1 stops after the build (for build rates),
# SCALE_KEEP=1 keeps both databases. Prints `fact sync_sensitive no`: the
# ratios do not depend on the commit mode.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/suites/_common.bash
. "$HERE/_common.bash"
W=$HERE/scale
REPS=${BENCH_REPS:-3}
if [ "$QUICK" = 1 ]; then
    SCALE_LARGE=${SCALE_LARGE:-0.01} SCALE_SMALL=${SCALE_SMALL:-0.001} HOT_REPS=$REPS
else
    SCALE_LARGE=${SCALE_LARGE:-1} SCALE_SMALL=${SCALE_SMALL:-0.01} HOT_REPS=${BENCH_REPS:-5}
fi
# QUICK: pgbench runs of 1 000 transactions (150 are too few to compare calls)
[ "$QUICK" = 1 ] && export BENCH_TXNS=${BENCH_TXNS:-1000}
BUILD_JOBS=${BUILD_JOBS:-2}
STMT_TIMEOUT=${SCALE_STATEMENT_TIMEOUT:-120}
BUDGET=${SCALE_BUDGET:-1140}
[ -x "$PGBENCH" ] || { say "pgbench not found"; exit 2; }
echo -e "fact\tsync_sensitive\tno"

KINDS=(large small)
declare -A DBN=([large]=sp_bench_scale_large [small]=sp_bench_scale_small)
declare -A SCALE=([large]=$SCALE_LARGE [small]=$SCALE_SMALL)
TMP=$(mktemp -d)
BG=()
# shellcheck disable=SC2317  # (run by the trap)
cleanup() {
    local p
    for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
    [ "${SCALE_KEEP:-0}" = 1 ] && { say "scale: kept ${DBN[*]}"; return; }
    for k in "${KINDS[@]}"; do
        psql -X -q -d "$ADMIN_DB" -c "DROP DATABASE IF EXISTS ${DBN[$k]} WITH (FORCE)" >/dev/null 2>&1 || true
    done
}
for k in "${KINDS[@]}"; do bench_db "${DBN[$k]}"; done
trap cleanup EXIT

# psql on database KIND, quiet, stopping at the first error
qk() { local k=$1; shift; psql -X -q -At -v ON_ERROR_STOP=1 -d "${DBN[$k]}" "$@"; }
# the two kinds in the order of round REP (alternating which goes first)
order() { if (( $1 % 2 )); then echo large small; else echo small large; fi; }
over_budget() { (( $(date +%s) >= DEADLINE )); }
# median that prints nan, never fails, for no numbers (_common's fails then)
med() { median "$@" || true; }

# timed KIND SQL: run SQL once on database KIND under the statement timeout;
# sets T_MS (psql's \timing) and T_OUT (the result), T_MS=nan on a timeout.
timed() {
    local out rc=0
    out=$(qk "$1" -c "SET statement_timeout = '${STMT_TIMEOUT}s'" -c '\timing on' -c "$2" 2>&1) || rc=$?
    T_OUT=$(grep -v '^Time: ' <<<"$out" || true)
    if [ "$rc" != 0 ]; then
        if grep -q 'statement timeout' <<<"$out"; then
            say "scale: $1: no answer within ${STMT_TIMEOUT} s, reported as nan: $2"
            T_MS=nan
            return 0
        fi
        say "scale: $1: failed: $2"; say "$out"
        return 1
    fi
    T_MS=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out" | tail -n 1)
}

# timed_row SECTION LABEL SQL: BENCH_REPS alternated runs of SQL (VNOW stands
# for the database's virtual now) on both databases, a row large / small; the
# last result of each database is left in OUT[kind].
declare -A OUT
timed_row() {
    local section=$1 label=$2 sql=$3 rep k
    local -A ms=() dead=()
    for rep in $(seq 1 "$REPS"); do
        (( rep > 1 )) && over_budget && { say "scale: out of time budget, $label: $((rep - 1)) runs"; break; }
        for k in $(order "$rep"); do
            [ -z "${dead[$k]:-}" ] || continue
            timed "$k" "${sql//VNOW/${VNOW[$k]}}" || return 1
            if [ "$T_MS" = nan ]; then dead[$k]=1; OUT[$k]=nan; else ms[$k]+=" $T_MS"; OUT[$k]=$T_OUT; fi
        done
    done
    local l s
    l=$(med "${ms[large]:-}") s=$(med "${ms[small]:-}")
    echo -e "row\t$section\t$label\tms\t$l\tsmall\t$s\t$(ratio "$l" "$s")\tlower"
}

# ------------------------------------------------------------------ build
# fill KIND PHASE: the phase of build.sql in BUILD_JOBS parallel sessions.
# The first session's NOTICEs (a line per step and its time) are the progress.
fill() {
    local part pids=() p
    for part in $(seq 0 $((BUILD_JOBS - 1))); do
        PGOPTIONS="$PGOPTIONS -c statement_timeout=0 -c client_min_messages=$( ((part)) && echo warning || echo notice)" \
            qk "$1" -c "CALL bench_scale.fill('$2', $part, $BUILD_JOBS)" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || return 1; done
}
declare -A VNOW PARAMS
for k in small large; do
    say "scale: building $k (scale ${SCALE[$k]}, $BUILD_JOBS sessions)"
    t0=$(date +%s.%N)
    for s in "allow_client_clock = on" "run_retention = '7d'" "reaper_ttl = '5min'"; do
        psql -X -q -d "$ADMIN_DB" -c "ALTER DATABASE ${DBN[$k]} SET sandbox_persist.$s" >/dev/null
    done
    qk "$k" -v scale="${SCALE[$k]}" -f "$W/build.sql" >/dev/null
    fill "$k" old
    # the expired runs are written: the virtual now is 7 days later
    qk "$k" -c "SELECT pg_sleep(0.01)" \
        -c "UPDATE bench_scale.params SET vnow = (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 7 * 86400000" >/dev/null
    fill "$k" new
    PGOPTIONS="$PGOPTIONS -c statement_timeout=0" qk "$k" -c "VACUUM (ANALYZE)"
    t1=$(date +%s.%N)
    echo -e "fact\tscale_build_seconds_$k\t$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')"
    echo -e "fact\tscale_database_bytes_$k\t$(qk "$k" -c "SELECT pg_database_size(current_database())")"
    VNOW[$k]=$(qk "$k" -c "SELECT vnow FROM bench_scale.params")
    # the sizes, the conversation template and a chunk, as pgbench variables
    PARAMS[$k]=$(qk "$k" -c "SELECT key || '=' || value FROM bench_scale.params p, json_each_text(row_to_json(p))")
    say "scale: $k built in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }') s"
done
echo -e "fact\tscale_factors\tlarge ${SCALE[large]}, small ${SCALE[small]}"
[ "${SCALE_BUILD_ONLY:-0}" = 1 ] && exit 0
CONV=$(qk small -c "SELECT string_agg(bench_scale.msg(i), ',' ORDER BY i) FROM generate_series(1, 40) i")
CHUNKS=$(qk small -c "SELECT '[' || bench_scale.chunk(1, 10, false, 0) || ']'")
DEADLINE=$(( $(date +%s) + BUDGET ))

# ---------------------------------------------------------------- storage
# Each table of the extension holding at least 10 000 rows per unit of scale
# (the record stores, 20 000 or more; bookkeeping tables hold a few): bytes
# per row of the table with its indexes and TOAST, and of its largest index;
# on large.
say "scale: storage per record"
while IFS='|' read -r rel rows total idx ibytes; do
    kind=$(sed -E 's/ies$/y/; s/([^s])s$/\1/' <<<"$rel")
    echo -e "fact\tstorage_bytes_per_$kind\t$(awk -v t="$total" -v n="$rows" 'BEGIN { printf "%.0f", t / n }')"
    echo -e "fact\tstorage_largest_index_bytes_per_$kind\t$idx $(awk -v t="$ibytes" -v n="$rows" 'BEGIN { printf "%.0f", t / n }')"
done < <(qk large -c "SELECT c.relname, n.rows, pg_total_relation_size(c.oid), i.name, i.bytes
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'sandbox_persist',
  LATERAL (SELECT (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %s', c.oid::regclass),
                                                         false, true, '')))[1]::text::bigint AS rows) n,
  LATERAL (SELECT ci.relname AS name, pg_relation_size(ci.oid) AS bytes
             FROM pg_index x JOIN pg_class ci ON ci.oid = x.indexrelid
            WHERE x.indrelid = c.oid ORDER BY 2 DESC LIMIT 1) i
 WHERE c.relkind = 'r' AND n.rows >= 10000 * ${SCALE[large]} ORDER BY c.relname")
# a conversation block holds the messages of one append: per message too
echo -e "fact\tstorage_bytes_per_conversation_message\t$(qk large -c "SELECT round(pg_total_relation_size('sandbox_persist.conversation_blocks') / sum(message_count)) FROM sandbox_persist.conversation_blocks")"

# -------------------------------------------------------------- hot calls
CALLS=(instance_get instance_upsert run_get run_update run_create_or_resume checkpoint_get checkpoint_cycle
       event_log_read event_log_append lock_pair blob_head blob_get interrupt_get metadata_get run_list_by_thread)
declare -A LABEL=(
    [checkpoint_get]="checkpoint_get (40-message conversation)"
    [checkpoint_cycle]="checkpoint_append cycle (acquire, head, append of 40 + 2 messages, release)"
    [event_log_read]="event_log_read (up to 100 entries: a whole 50-chunk log)"
    [event_log_append]="event_log_append (1 chunk, producer ids)"
    [lock_pair]="lock_acquire + release" [blob_get]="blob_get (small blob)"
    [run_create_or_resume]="run_create_or_resume (existing run)")
# pgbench_args KIND: the -D arguments of database KIND's scripts
pgbench_args() {
    local kv
    ARGS=(-D "conv=$CONV" -D "chunks=$CHUNKS" -D s=0 -D "pid=$(cat /proc/sys/kernel/random/uuid)")
    while read -r kv; do ARGS+=(-D "$kv"); done <<<"${PARAMS[$1]}"
}
declare -A RES
status=0
for rep in $(seq 1 "$HOT_REPS"); do
    (( rep > 1 )) && over_budget && { say "scale: out of time budget, hot calls: $((rep - 1)) rounds"; break; }
    say "scale: hot calls, round $rep"
    for c in "${CALLS[@]}"; do
        for k in $(order "$rep"); do
            DB=${DBN[$k]}
            pgbench_args "$k"
            pgb "$W/$c.pgbench" 1 "${ARGS[@]}" || { status=1; continue; }
            RES[$c,$k]+=" $(awk -v t="$PB_TPS" 'BEGIN { printf "%.4f", 1000 / t }')"
        done
    done
done
for c in "${CALLS[@]}"; do
    l=$(med "${RES[$c,large]:-}") s=$(med "${RES[$c,small]:-}")
    echo -e "row\tScale: hot calls, large / small\t${LABEL[$c]:-$c}\tms/op\t$l\tsmall\t$s\t$(ratio "$l" "$s")\tlower"
done

# ------------------------------------------------------------- monitoring
say "scale: monitoring and clean-up reads"
MON="Scale: monitoring and clean-up reads, backlog pending"
for spec in "SELECT * FROM overview|SELECT * FROM sandbox_persist.overview" \
            "SELECT * FROM metrics()|SELECT * FROM sandbox_persist.metrics()" \
            "_maintenance_backlog(vnow)|SELECT sandbox_persist._maintenance_backlog(VNOW)" \
            "maintenance_health()|SELECT sandbox_persist.maintenance_health()" \
            "attention_list(), before any maintain()|SELECT sandbox_persist.attention_list()"; do
    timed_row "$MON" "${spec%%|*}" "${spec#*|}" || status=1
done
for k in "${KINDS[@]}"; do
    echo -e "fact\tscale_backlog_$k\t$(qk "$k" -c "SELECT sandbox_persist._maintenance_backlog(${VNOW[$k]})")"
done
timed_row "$MON" "instance_gc_candidates(7 days, 100, vnow)" \
    "SELECT json_array_length(sandbox_persist.instance_gc_candidates(604800000, 100, VNOW))" || status=1
for k in "${KINDS[@]}"; do echo -e "fact\tscale_instance_gc_candidates_rows_$k\t${OUT[$k]}"; done
timed_row "$MON" "run_list_reclaimable(vnow, 5 min)" \
    "SELECT json_array_length(sandbox_persist.run_list_reclaimable(VNOW, 300000))" || status=1
for k in "${KINDS[@]}"; do echo -e "fact\tscale_run_list_reclaimable_rows_$k\t${OUT[$k]}"; done

# ------------------------------------------------------------ maintenance
# One maintain() call at vnow, answering "<rows it collected> <its counts>".
MAINTAIN="SELECT w || ' ' || m::text
  FROM (SELECT m, (SELECT coalesce(sum(value::bigint), 0) FROM json_each_text(m)
                    WHERE key NOT IN ('detachedRuns', 'dueRuns')) AS w
          FROM (SELECT sandbox_persist.maintain(NULL, VNOW) AS m) a) b"
# drain KIND: maintain(default max_rows, vnow) until a call collects nothing (or the
# budget ends); writes "<drained yes|no> <calls> <ms of each call>..." to
# $TMP/drain.KIND and each call's counts to $TMP/counts.KIND.
drain() {
    local k=$1 calls=0 list="" drained=no
    : >"$TMP/counts.$k"
    while ! over_budget; do
        timed "$k" "${MAINTAIN//VNOW/${VNOW[$k]}}" || return 1
        [ "$T_MS" != nan ] || break
        [ "${T_OUT%% *}" != 0 ] || { drained=yes; break; }
        calls=$((calls + 1)) list+=" $T_MS"
        echo "${T_OUT#* }" >>"$TMP/counts.$k"
    done
    echo "$drained $calls$list" >"$TMP/drain.$k"
}
# run_get_latency KIND PREFIX: one 1-s pgbench run of run_get on KIND, each
# transaction's latency logged to PREFIX.<pid>
run_get_latency() {
    pgbench_args "$1"
    "$PGBENCH" -n -M prepared -c 1 -j 1 -T 1 -l --log-prefix="$2" -f "$W/run_get.pgbench" \
        "${ARGS[@]}" "${DBN[$1]}" >/dev/null 2>&1
}
# percentile P FILES...: the P-th percentile of the logged latencies, in ms
percentile() {
    local p=$1; shift
    { cat "$@" 2>/dev/null || true; } | awk '{ print $3 }' | sort -n |
        awk -v p="$p" '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else { i = int(p / 100 * NR + 0.999999); if (i < 1) i = 1; printf "%.3f\n", v[i] / 1000 } }'
}

# Each database drains with run_get traffic alongside (so both drains pay the
# same load); on large, run_get is then measured idle as long again (3 to 10 s).
for k in small large; do
    say "scale: maintain() draining $k's backlog, run_get alongside"
    drain "$k" & dpid=$!
    BG+=("$dpid")
    runs=0
    while :; do
        run_get_latency "$k" "$TMP/during_$k" || status=1
        runs=$((runs + 1))
        kill -0 "$dpid" 2>/dev/null || break
    done
    wait "$dpid" || status=1
done
for _ in $(seq 1 $(( runs < 3 ? 3 : runs > 10 ? 10 : runs ))); do run_get_latency large "$TMP/idle" || status=1; done
for p in 50 99; do
    d=$(percentile "$p" "$TMP"/during_large.*) i=$(percentile "$p" "$TMP"/idle.*)
    echo -e "row\tScale: maintenance\trun_get on large while maintain() drains its backlog\tp$p ms\t$d\tidle, after the drain\t$i\t$(ratio "$d" "$i")\tlower"
done

# collected KIND: what the drain's calls collected, summed by count name
collected() {
    qk "$1" -v c="[$(paste -sd, "$TMP/counts.$1")]" <<'SQL'
SELECT coalesce(string_agg(key || ' ' || s, ', ' ORDER BY key), 'nothing')
  FROM (SELECT key, sum(value::bigint) AS s FROM json_array_elements(:'c'::json) e(m), json_each_text(e.m)
         WHERE key NOT IN ('detachedRuns', 'dueRuns') GROUP BY key HAVING sum(value::bigint) > 0) x
SQL
}
declare -A BACKLOG_MS=([large]=nan [small]=nan)
for k in "${KINDS[@]}"; do
    [ -s "$TMP/drain.$k" ] || { status=1; continue; }
    read -r drained calls list <"$TMP/drain.$k"
    BACKLOG_MS[$k]=$(med "$list")
    seconds=$(tr ' ' '\n' <<<"$list" | awk '{ s += $1 } END { printf "%.1f", s / 1000 }')
    if [ "$drained" = yes ]; then
        minutes=$(awk -v c="$calls" -v s="$seconds" 'BEGIN { printf "%.1f", c + s / 60 }')
    else
        minutes=nan
        say "scale: $k: the backlog was not drained (time budget or statement timeout) after $calls calls"
    fi
    echo -e "fact\tscale_drain_calls_$k\t$calls"
    echo -e "fact\tscale_drain_seconds_$k\t$seconds"
    echo -e "fact\tscale_drain_minutes_at_one_call_a_minute_$k\t$minutes"
    what=$(collected "$k") || status=1
    echo -e "fact\tscale_drain_collected_$k\t$what"
done
echo -e "row\tScale: maintenance\tmaintain(default max_rows, vnow) with a backlog (median call of the drain)\tms\t${BACKLOG_MS[large]}\tsmall\t${BACKLOG_MS[small]}\t$(ratio "${BACKLOG_MS[large]}" "${BACKLOG_MS[small]}")\tlower"
timed_row "Scale: maintenance" "maintain(default max_rows, vnow), nothing left to do" \
    "SELECT sandbox_persist.maintain(NULL, VNOW)" || status=1
for k in "${KINDS[@]}"; do
    echo -e "fact\tscale_attention_items_$k\t$(qk "$k" -c "SELECT json_array_length(sandbox_persist.attention_list())")"
done
timed_row "Scale: maintenance" "attention_list() after the drain" "SELECT sandbox_persist.attention_list()" || status=1
# The steady state: the drain's dead rows vacuumed, as autovacuum would, and
# maintenance caught up; what a scrape and an idle round cost then.
for k in "${KINDS[@]}"; do qk "$k" -c "VACUUM ANALYZE" >/dev/null || status=1; done
timed_row "Scale: steady state (drained, vacuumed)" "maintain(default max_rows, vnow), nothing to do" \
    "SELECT sandbox_persist.maintain(NULL, VNOW)" || status=1
timed_row "Scale: steady state (drained, vacuumed)" "SELECT * FROM overview" "SELECT * FROM sandbox_persist.overview" || status=1
timed_row "Scale: steady state (drained, vacuumed)" "SELECT * FROM metrics()" "SELECT * FROM sandbox_persist.metrics()" || status=1
timed_row "Scale: steady state (drained, vacuumed)" "_maintenance_backlog(vnow)" \
    "SELECT sandbox_persist._maintenance_backlog(VNOW)" || status=1
say "scale: done"
exit $status
