#!/usr/bin/env bash
# bench/suites/stores.sh: the store methods of the TanStack flow against three
# baselines, each run through pgbench (prepared statements, real round trips):
#   client   the statements an app would send through a driver for the same
#            method on the same tables, one transaction per method
#            (bench/suites/stores/<workload>.client.pgbench)
#   plpgsql  a PL/pgSQL implementation of the same contract on the same tables
#            (bench/baselines/plpgsql.sql, schema bench_plpgsql)
#   floor    single-row INSERT ... ON CONFLICT / UPDATE / SELECT / DELETE on a
#            two-column table (what touching one row costs at all)
# Workloads (bench/suites/stores/<workload>.<variant>.pgbench): instance upsert
# and get, lock acquire + release, event-log append (1 chunk, with producer
# ids) and read (100 entries of 10 000), the automatic-checkpoint cycle
# (acquire, head, append, release), fork (acquire, fork, release), and the hot
# shared keys: 4 clients asking blob_head for one content-addressed key, and 4
# clients running checkpoint cycles on their own threads whose files all name
# the same 10 blob keys.
#
# Prints rows (ms/op, lower is better; ops/s for the 4-client workloads,
# higher is better) with the writing commits per operation (transaction ids
# drawn) of ours and of the baseline. Median of BENCH_REPS (3) runs of
# BENCH_SECONDS (1) each, the variants in a rotating order; QUICK=1: 3 runs of
# BENCH_TXNS (150) transactions per client. With BENCH_SYNC=on the read-only
# workloads are skipped (they commit nothing). Works in its own database,
# dropped at the end; it checks at the end that what every variant wrote reads
# back consistently through the API.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=bench/suites/_common.bash
. "$HERE/_common.bash"
W=$HERE/stores
REPS=${BENCH_REPS:-3}
[ -x "$PGBENCH" ] || { say "pgbench not found"; exit 2; }

bench_db sp_bench_stores
say "stores: setting up (sync $BENCH_SYNC, QUICK=$QUICK)"
q -f "$ROOT/bench/baselines/plpgsql.sql" >/dev/null
# the baseline must implement the contract it is measured against
q -f "$ROOT/bench/baselines/plpgsql_check.sql" >/dev/null 2>"$DB.check.log" \
    || { say "the PL/pgSQL baseline disagrees with sandbox_persist:"; say "$(cat "$DB.check.log")"; rm -f "$DB.check.log"; exit 2; }
rm -f "$DB.check.log"
q >/dev/null <<'SQL'
CREATE SCHEMA bench_floor;
CREATE TABLE bench_floor.kv (k text COLLATE "C" PRIMARY KEY, v text);
CREATE TABLE bench_floor.log (log_id bigint, seq bigint, chunk json NOT NULL, PRIMARY KEY (log_id, seq));
-- instances and their floor rows
INSERT INTO sandbox_persist.instances
SELECT 'inst-' || i, 'e2b', 'sbx-' || i, 'snap-' || i, 'thread-' || i, 'run-' || i, 1767225600000
  FROM generate_series(1, 1000) i;
INSERT INTO bench_floor.kv SELECT 'inst-' || i, 'sbx-' || i FROM generate_series(1, 1000) i;
INSERT INTO bench_floor.kv VALUES ('hot', 'x');
-- a 10 000-entry log for reads, through the API, and the same chunks in the floor table
CREATE FUNCTION pg_temp.chunk(i int) RETURNS text LANGUAGE sql AS $$
    SELECT format('{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-%s","delta":"%s","timestamp":%s}',
                  i / 50, repeat(md5(i::text), 3), 1767225600000 + i) $$;
SELECT sandbox_persist.event_log_append('bench-read',
       (SELECT json_agg(pg_temp.chunk(i)::json) FROM generate_series(b, b + 999) i))
  FROM generate_series(1, 9001, 1000) b;
INSERT INTO bench_floor.log SELECT 0, i, pg_temp.chunk(i)::json FROM generate_series(1, 10000) i;
-- the hot content-addressed blob
SELECT sandbox_persist.blob_put('sandbox-files/sha256/' || encode(sha256('hot blob'::bytea), 'hex'), 'hot blob'::bytea);
ANALYZE;
SQL
hot_key=$(val "SELECT 'sandbox-files/sha256/' || encode(sha256('hot blob'::bytea), 'hex')")
chunk=$(val "SELECT pg_temp_chunk FROM (SELECT format('{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"msg-1\",\"delta\":\"%s\",\"timestamp\":1767225600000}', repeat(md5('x'), 3)) AS pg_temp_chunk) s")
# 11 file entries (a directory and 10 files) naming 10 content-addressed keys
files=$(val "SELECT json_agg(e ORDER BY o)::text FROM (
    SELECT 0 AS o, json_build_object('path', 'src', 'kind', 'dir') AS e
    UNION ALL SELECT i, json_build_object('path', 'src/file' || i || '.ts', 'kind', 'file',
        'blobKey', 'sandbox-files/sha256/' || encode(sha256(('file ' || i)::bytea), 'hex'), 'size', 1000 + i)
      FROM generate_series(1, 10) i) s")
# the 4 earlier messages of the transcript (~300 bytes each), joined by commas
conv=$(val "SELECT string_agg(json_build_object('id', 'm' || i, 'role', CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
    'parts', json_build_array(json_build_object('type', 'text', 'content', repeat('lorem ipsum ' || i || ' ', 20))))::text, ',' ORDER BY i)
    FROM generate_series(1, 4) i")
# the fork source: one checkpoint with the same files and a 20-message transcript
q >/dev/null <<SQL
SELECT sandbox_persist.checkpoint_append(json_build_object(
         'checkpoint', json_build_object('id', 'fork-src-cp', 'threadId', 'fork-src', 'createdAt', 1, 'reason', 'automatic',
                                         'files', '$files'::json, 'artifacts', '[]'::json),
         'expectedHeadId', NULL, 'writer', w),
       (SELECT json_agg(json_build_object('id', 'fm' || i, 'role', 'user', 'parts',
                json_build_array(json_build_object('type', 'text', 'content', repeat('fork source ' || i || ' ', 20))))) FROM generate_series(1, 20) i)),
       sandbox_persist.checkpoint_release_writer(w)
  FROM (SELECT sandbox_persist.checkpoint_acquire_writer('fork-src') AS w) s;
SQL

declare -A RES COM
# measure WORKLOAD VARIANT CLIENTS REP: one pgbench run; records ms/op (1
# client) or ops/s (more) and commits/op.
measure() {
    local w=$1 v=$2 c=$3 rep=$4 tag="${1:0:2}-$2-$4-"
    local args=(-D "now=1767225600000" -D "tag=$tag" -D n=0 -D s=0 -D "key=$hot_key" -D "files=$files" -D "conv=$conv")
    case $w in
        event_append)
            local run="ev-$v-$rep" pid
            pid=$(cat /proc/sys/kernel/random/uuid)
            # the stream's log exists after its first chunk: create it for every client
            for i in $(seq 0 $((c - 1))); do
                val "SELECT sandbox_persist.event_log_append('$run-$i', '[{\"type\":\"RUN_STARTED\"}]')" >/dev/null
            done
            args+=(-D "run=$run" -D "pid=$pid" -D "chunks=[$chunk]" -D "chunk=$chunk" -D "lid=$((rep * 10 + ${#v}))")   # the floor's log: one per run (variant names differ in length)
            ;;
    esac
    pgb "$W/$w.$v.pgbench" "$c" "${args[@]}" || return 1
    if [ "$c" = 1 ]; then
        RES[$w,$v]+=" $(awk -v t="$PB_TPS" 'BEGIN { printf "%.4f", 1000 / t }')"
    else
        RES[$w,$v]+=" $PB_TPS"
    fi
    COM[$w,$v]+=" $PB_COMMITS"
}

# workload:clients:section:description
WORKLOADS=(
    "instance_upsert:1:Stores, one client:instance upsert (existing key, full replace)"
    "instance_get:1:Stores, one client:instance get"
    "lock_pair:1:Stores, one client:lock acquire + release"
    "event_append:1:Stores, one client:event-log append, 1 chunk, producer ids"
    "event_read:1:Stores, one client:event-log read, 100 entries of 10 000"
    "ckpt_cycle:1:Stores, one client:checkpoint cycle: acquire, head, append, release"
    "fork:1:Stores, one client:fork cycle: acquire, fork (20 messages, 11 entries), release"
    "hot_head:4:Hot shared keys, 4 clients:blob_head of one content-addressed key"
    "ckpt_cycle:4:Hot shared keys, 4 clients:checkpoint cycles, every file naming the same 10 keys"
)
VARIANTS=(ours client plpgsql floor)
declare -A BNAME=([client]="client-side SQL" [plpgsql]="PL/pgSQL" [floor]="floor: single-row statements")
status=0
for spec in "${WORKLOADS[@]}"; do
    IFS=: read -r w c section desc <<<"$spec"
    # reads commit nothing: synchronous_commit cannot change them
    if [ "$BENCH_SYNC" = on ] && [[ " instance_get event_read hot_head " == *" $w "* ]]; then continue; fi
    key=$w; [ "$c" != 1 ] && key=$w@$c
    say "stores: $desc"
    for rep in $(seq 1 "$REPS"); do
        # rotate the order so no variant always runs first (or last)
        order=("${VARIANTS[@]:$((rep % 4))}" "${VARIANTS[@]:0:$((rep % 4))}")
        for v in "${order[@]}"; do
            if ! measure "$w" "$v" "$c" "$rep"; then status=1; continue 2; fi
        done
    done
    # results under the key that separates the 4-client run of a workload
    if [ "$key" != "$w" ]; then
        for v in "${VARIANTS[@]}"; do
            RES[$key,$v]=${RES[$w,$v]:-}; COM[$key,$v]=${COM[$w,$v]:-}; unset "RES[$w,$v]" "COM[$w,$v]"
        done
    fi
    if [ "$c" = 1 ]; then metric=ms/op; good=lower; else metric=ops/s; good=higher; fi
    ours=$(median ${RES[$key,ours]:-})
    ours_c=$(median ${COM[$key,ours]:-})
    for v in client plpgsql floor; do
        base=$(median ${RES[$key,$v]:-})
        printf 'row\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$section" "$desc" "$metric" "$ours" \
            "${BNAME[$v]}" "$base" "$(ratio "$ours" "$base")" "$good" "$ours_c" "$(median ${COM[$key,$v]:-})"
    done
done
# What every variant wrote must be what the contract says: ours reads the
# baselines' checkpoints back whole, references and logs are consistent.
bad=$(val "SELECT
    (SELECT count(*) FROM sandbox_persist.checkpoint_threads t
      WHERE t.thread_id ~ '^(ck|fo)-' AND t.head_id IS NOT NULL
        AND json_array_length(sandbox_persist.checkpoint_get(t.head_id) -> 'conversation')
            <> CASE WHEN t.thread_id LIKE 'ck-%' THEN 6 ELSE 20 END)
  + (SELECT count(*) FROM sandbox_persist.checkpoints c
      WHERE c.thread_id ~ '^(ck|fo)-'
        AND (SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs r WHERE r.checkpoint_id = c.checkpoint_id) <> 10)
  + (SELECT count(*) FROM sandbox_persist.checkpoint_threads t WHERE t.thread_id ~ '^(ck|fo)-' AND t.owner_token IS NOT NULL)
  + (SELECT count(*) FROM sandbox_persist.event_logs l
      WHERE l.tail_seq <> (SELECT count(*) FROM sandbox_persist.event_log_entries e WHERE e.log_id = l.log_id))
  + (SELECT count(*) FROM sandbox_persist.locks WHERE lock_key LIKE 'lk-%')
  + (SELECT count(*) FROM sandbox_persist.checkpoint_threads t
      WHERE t.thread_id LIKE 'fo-%' AND t.head_id IS NOT NULL
        AND json_array_length((SELECT transcript FROM sandbox_persist.messages m WHERE m.thread_id = t.thread_id)) <> 20)")
checked=$(val "SELECT count(*) FROM sandbox_persist.checkpoints WHERE thread_id ~ '^(ck|fo)-'")
if [ "$bad" = 0 ]; then
    echo -e "fact\tstores: checkpoints written by all four variants, read back through the API and checked\t$checked, all consistent"
else
    say "stores: $bad inconsistencies in what the variants wrote"
    echo -e "fact\tstores: inconsistencies in what the variants wrote\t$bad"
    status=1
fi
say "stores: done"
exit $status
