#!/usr/bin/env bash
# bench/suites/scaling.sh: per-operation time of the main read and write
# methods against the size of their table: 10^3, 10^4, 10^5 and 10^6 rows
# (QUICK=1: 10^3 and 10^4). The tables grow in place between sizes, filled
# fast with INSERT ... SELECT as superuser (rows of the shape the API writes);
# every timing goes through the API with pgbench (one client, prepared
# statements, random existing keys), median of BENCH_REPS (3) runs.
# Baselines: single-row SELECT and INSERT ... ON CONFLICT on a two-column
# table of the same size (the floor).
#
# Prints two log-x plots (scaling_reads, scaling_writes: ms/op against rows,
# one series per method), a row per method comparing the largest size with
# 10^3 rows (ratio 1 = flat) and one comparing that growth with the floor's
# growth, and `fact sync_sensitive no`: the reads commit nothing and the
# writes' commit cost does not depend on the table size, so the runner runs
# it once, with synchronous_commit off. The runs of one size go round robin
# over the methods, so a burst of load from elsewhere hits them all alike.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/suites/_common.bash
. "$HERE/_common.bash"
W=$HERE/scaling
REPS=${BENCH_REPS:-3}
if [ "$QUICK" = 1 ]; then SIZES=(1000 10000); else SIZES=(1000 10000 100000 1000000); fi
[ -x "$PGBENCH" ] || { say "pgbench not found"; exit 2; }
echo -e "fact\tsync_sensitive\tno"

bench_db sp_bench_scaling
q >/dev/null <<'SQL'
CREATE SCHEMA bench_floor;
CREATE TABLE bench_floor.kv (k text COLLATE "C" PRIMARY KEY, v text);
-- the six messages every loaded checkpoint's conversation holds, appended
-- once through the API as one block of 'scale-thread' (so its text is
-- compressed as the API compresses it); grow copies that block into each
-- checkpoint thread's log
SELECT sandbox_persist.checkpoint_append(json_build_object(
         'checkpoint', json_build_object('id', 'scale-template', 'threadId', 'scale-thread', 'createdAt', 0,
                                         'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
         'expectedHeadId', NULL, 'writer', w),
       (SELECT json_agg(format('{"id":"m%s","role":"user","parts":[{"type":"text","content":"%s"}]}', i, repeat('lorem ipsum ', 20))::json
                        ORDER BY i) FROM generate_series(1, 6) i)),
       sandbox_persist.checkpoint_release_writer(w)
  FROM (SELECT sandbox_persist.checkpoint_acquire_writer('scale-thread') AS w) s;
-- the log the reads page through
SELECT sandbox_persist.event_log_close('scale-log');
SQL

# grow FROM TO: add rows FROM+1..TO to every table the methods read.
grow() {
    local a=$(($1 + 1)) b=$2
    q >/dev/null <<SQL
INSERT INTO sandbox_persist.instances
SELECT 'inst-' || i, 'e2b', 'sbx-' || i, 'snap-' || i, 'thread-' || i, 'run-' || i, 1767225600000
  FROM generate_series($a, $b) i;
INSERT INTO bench_floor.kv SELECT 'inst-' || i, 'sbx-' || i FROM generate_series($a, $b) i;
INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, changed_at)
SELECT 'run-' || i, 'thread-' || (i / 10), 'running', 1767225600000 + i, 1767225600000 + i
  FROM generate_series($a, $b) i;
-- each checkpoint thread's conversation log: one block, the six messages at positions 0-5
INSERT INTO sandbox_persist.conversation_blocks (thread_id, first_pos, message_count, bodies)
SELECT 'scale-thread-' || t, 0, b.message_count, b.bodies
  FROM generate_series($a / 100, $b / 100) t,
       (SELECT message_count, bodies FROM sandbox_persist.conversation_blocks WHERE thread_id = 'scale-thread') b
ON CONFLICT DO NOTHING;
INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at, reason, files, artifacts,
                                         conv_ranges, conv_block, conv_len, conv_digest)
SELECT 'cp-' || i, 'scale-thread-' || (i / 100), NULL, i, 'automatic',
       format('[{"path":"src/f%s.ts","kind":"file","blobKey":"sandbox-files/sha256/%s","size":%s}]',
              i, encode(sha256(convert_to(i::text, 'UTF8')), 'hex'), i)::json,
       '[]'::json, '{[0,6)}', 'empty', 6, '\\x00'::bytea
  FROM generate_series($a, $b) i;
INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk, digest)
SELECT l.log_id, i, format('{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-%s","delta":"%s"}', i / 50, repeat(md5(i::text), 3))::json, 0
  FROM sandbox_persist.event_logs l, generate_series($a, $b) i WHERE l.run_id = 'scale-log';
UPDATE sandbox_persist.event_logs SET tail_seq = $b WHERE run_id = 'scale-log';
INSERT INTO sandbox_persist.locks (lock_key, owner_token, fence, acquired_at, expires_at)
SELECT 'held-' || i, gen_random_uuid(), nextval('sandbox_persist.lock_fences'), 1767225600000, 9007199254740991
  FROM generate_series($a, $b) i;
INSERT INTO sandbox_persist.blobs (blob_key, version, size, etag, created_at, updated_at, relied_on_at)
SELECT 'sandbox-files/sha256/' || encode(sha256(convert_to(i::text, 'UTF8')), 'hex'),
       nextval('sandbox_persist.blob_versions'), 100, 'e' || nextval('sandbox_persist.blob_etags'),
       1767225600000, 1767225600000, 9007199254740991
  FROM generate_series($a, $b) i;
SQL
    q -c "VACUUM ANALYZE" >/dev/null
}

# method:plot:label (a label of "floor: ..." marks a baseline series)
METHODS=(
    "instance_get:scaling_reads:instance_get" "run_get:scaling_reads:run_get"
    "checkpoint_get:scaling_reads:checkpoint_get" "event_log_read:scaling_reads:event_log_read (100 entries)"
    "blob_head:scaling_reads:blob_head" "floor_select:scaling_reads:floor: single-row SELECT"
    "instance_upsert:scaling_writes:instance_upsert" "run_update:scaling_writes:run_update"
    "lock_pair:scaling_writes:lock_acquire + release" "floor_upsert:scaling_writes:floor: single-row upsert"
)
for p in reads writes; do
    echo -e "plot\tscaling_$p\tPer-operation time against table size: $p (1 client, median of $REPS)\trows in the table\tms per operation\t1"
done
declare -A T
status=0
prev=0
for n in "${SIZES[@]}"; do
    t0=$(date +%s)
    grow "$prev" "$n"
    say "scaling: $n rows (loaded in $(( $(date +%s) - t0 )) s)"
    prev=$n
    declare -A RES=()
    for _ in $(seq 1 "$REPS"); do
        for spec in "${METHODS[@]}"; do
            m=${spec%%:*}
            pgb "$W/$m.pgbench" 1 -D "rows=$n" || { status=1; continue; }
            RES[$m]+=" $(awk -v t="$PB_TPS" 'BEGIN { printf "%.4f", 1000 / t }')"
        done
    done
    for spec in "${METHODS[@]}"; do
        IFS=: read -r m plot label <<<"$spec"
        [ -n "${RES[$m]:-}" ] || continue
        T[$m,$n]=$(median ${RES[$m]})
        echo -e "series\t$plot\t$label\t$n\t${T[$m,$n]}"
    done
    unset RES
done

first=${SIZES[0]}
last=${SIZES[-1]}
for spec in "${METHODS[@]}"; do
    IFS=: read -r m plot label <<<"$spec"
    [ -n "${T[$m,$first]:-}" ] && [ -n "${T[$m,$last]:-}" ] || continue
    echo -e "row\tScaling with table size\t$label\tms/op at $last rows\t${T[$m,$last]}\tsame at $first rows\t${T[$m,$first]}\t$(ratio "${T[$m,$last]}" "${T[$m,$first]}")\tlower"
    # the same growth of a plain primary-key statement: how much of it is the
    # table size itself (and the machine's mood) rather than our method
    case $m in floor_*) continue ;; esac
    if [ "$plot" = scaling_reads ]; then f=floor_select; else f=floor_upsert; fi
    [ -n "${T[$f,$first]:-}" ] && [ -n "${T[$f,$last]:-}" ] || continue
    g=$(ratio "${T[$m,$last]}" "${T[$m,$first]}")
    gf=$(ratio "${T[$f,$last]}" "${T[$f,$first]}")
    echo -e "row\tScaling with table size\t$label\tgrowth $first to $last rows (x)\t$g\tthe floor's growth (SELECT for reads, upsert for writes)\t$gf\t$(ratio "$g" "$gf")\tlower"
done
say "scaling: done"
exit $status
