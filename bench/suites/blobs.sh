#!/usr/bin/env bash
# bench/suites/blobs.sh: the blob store against PostgreSQL's own bytea
# column, in the same run (format: bench/README.md, "make bench" suites).
#
# Baselines: a table (k text PRIMARY KEY, b bytea) with default STORAGE and
# column compression lz4, and the same with pglz. Workloads, each object put
# and then read whole by its own statement and transaction (prepared, through
# psql, the body returned to the client as bytea text, as a client sees it):
#   source files     C headers: the server's, then the rest of /usr/include,
#                    in byte order, distinct contents, keyed by content
#                    address (sandbox-files/sha256/<hex>) on both sides
#   shared libraries /usr/lib/x86_64-linux-gnu/*.so* (regular files of at
#                    most 8 MiB, byte order) up to a total of 40 MB
#   4 KiB, 1 MiB, 64 MiB objects cut from those files (64 MiB skipped by QUICK)
# Figures: put and whole get MB/s (raw bytes / client wall time), plotted as
# ratios against bytea lz4 by mean object size (blob_ratio), stored bytes
# (pg_total_relation_size of every blob table, indexes and TOAST included)
# and a 64 KiB range read of the largest object against bytea substring;
# under lz4 also the stored bytes once maintain() has rewritten the objects
# as zstd (blob_recompress) and the time that took.
#
# QUICK=1 shrinks every workload (whole suite well under a minute);
# BENCH_SYNC=on|off sets synchronous_commit (default off); BENCH_BLOB_CODECS
# the codecs of ours to measure, each a full pass (default "zstd lz4"). Works in its own
# database (sp_bench_suite_blobs), dropped at the end. Needs a superuser
# (pg_read_binary_file, TRUNCATE of the extension's tables).
set -euo pipefail
# Every variant commits once per object, so the flush adds the same to each:
# measured with synchronous_commit off only (make bench's sync_sensitive fact).
printf 'fact\tsync_sensitive\tno\n'

DB=sp_bench_suite_blobs
ADMIN_DB=${PGDATABASE:-postgres}
[ "$ADMIN_DB" = "$DB" ] && ADMIN_DB=postgres
QUICK=${QUICK:-0}
SYNC=${BENCH_SYNC:-off}
if [ "$QUICK" = 1 ]; then
    REPS=3 SRC_FILES=200 LIB_BYTES=$((4 * 1000 * 1000)) N4K=150 N1M=4 N64M=0 RANGE_READS=10
else
    REPS=3 SRC_FILES=2000 LIB_BYTES=$((40 * 1000 * 1000)) N4K=1000 N1M=24 N64M=1 RANGE_READS=30
fi
LIB_MAX=$((8 * 1024 * 1024))
CODECS=${BENCH_BLOB_CODECS:-zstd lz4}
export PGOPTIONS="${PGOPTIONS:-} -c synchronous_commit=$SYNC -c client_min_messages=warning"

log() { echo "blobs: $*" >&2; }
admin() { psql -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_DB" "$@"; }
db() { psql -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
val() { db -At -c "$1"; }

WORK=$(mktemp -d /tmp/sp_bench_suite_blobs.XXXXXX)
chmod 755 "$WORK"
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
-- the baselines: bytea with default storage, one per TOAST compression
CREATE TABLE bench.lz4 (k text PRIMARY KEY, b bytea);
ALTER TABLE bench.lz4 ALTER COLUMN b SET COMPRESSION lz4;
CREATE TABLE bench.pglz (k text PRIMARY KEY, b bytea);
ALTER TABLE bench.pglz ALTER COLUMN b SET COMPRESSION pglz;
-- inputs, stored uncompressed so reading them costs every system the same
CREATE TABLE bench.stage (w text, i int, k text NOT NULL, body bytea NOT NULL, PRIMARY KEY (w, i));
ALTER TABLE bench.stage ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE TABLE bench.paths (w text, path text);
SQL

# ------------------------------------------------------------------ inputs
log "staging inputs (QUICK=$QUICK)"
{
    find /usr/include/postgresql/15/server -type f \( -name '*.h' -o -name '*.c' \) | LC_ALL=C sort
    find /usr/include -type f \( -name '*.h' -o -name '*.c' \) -not -path '/usr/include/postgresql/15/server/*' | LC_ALL=C sort
} | awk -v w=src '{print w "\t" $0}' >"$WORK/paths"
total=0
while IFS= read -r f; do
    s=$(stat -c %s "$f")
    if [ "$s" -gt 0 ] && [ "$s" -le "$LIB_MAX" ] && [ $((total + s)) -le "$LIB_BYTES" ]; then
        printf 'lib\t%s\n' "$f" >>"$WORK/paths"
        total=$((total + s))
    fi
done < <(find /usr/lib/x86_64-linux-gnu -maxdepth 1 -type f -name '*.so*' | LC_ALL=C sort)

db >/dev/null <<SQL
\\copy bench.paths (w, path) FROM '$WORK/paths'
-- source files: distinct contents (a content address is one object), first $SRC_FILES
INSERT INTO bench.stage
SELECT 'src', row_number() OVER (ORDER BY ord), 'sandbox-files/sha256/' || encode(sha256(body), 'hex'), body
FROM (SELECT DISTINCT ON (sha256(body)) ord, body
        FROM (SELECT row_number() OVER () AS ord, pg_read_binary_file(path) AS body
                FROM bench.paths WHERE w = 'src') f
       ORDER BY sha256(body), ord) d
ORDER BY ord LIMIT $SRC_FILES;
INSERT INTO bench.stage
SELECT 'lib', row_number() OVER (), 'lib/' || regexp_replace(path, '^.*/', ''), pg_read_binary_file(path)
FROM bench.paths WHERE w = 'lib';
-- a pool of real bytes (libraries, then sources) to cut fixed-size objects from
CREATE TABLE bench.pool AS
SELECT string_agg(body, ''::bytea ORDER BY w, i) AS p FROM bench.stage;
ALTER TABLE bench.pool ALTER COLUMN p SET STORAGE EXTERNAL;
INSERT INTO bench.stage
SELECT '4k', i, 'x4k/' || i, substring(p FROM 1 + (i * 40009) % (octet_length(p) - 4096) FOR 4096)
FROM bench.pool, generate_series(1, $N4K) i;
INSERT INTO bench.stage
SELECT '1m', i, 'x1m/' || i, substring(p FROM 1 + (i * 1999993) % (octet_length(p) - 1048576) FOR 1048576)
FROM bench.pool, generate_series(1, $N1M) i;
INSERT INTO bench.stage
SELECT '64m', i, 'x64m/' || i, substring(p || p FROM 1 FOR 67108864)
FROM bench.pool, generate_series(1, $N64M) i;
DROP TABLE bench.pool;
VACUUM ANALYZE bench.stage;
SQL

# --------------------------------------------------------------- measuring
# The machine is shared and its load moves by the second, so the three
# systems are interleaved object by object in one session (which goes first
# rotates per object and per repetition): each sees the same load. Every
# statement is its own transaction; its client-side time (psql \timing:
# sent, executed, result received) is summed per system, so connection
# set-up is not counted.
SYSTEMS=(ours lz4 pglz)
label() { case $1 in ours) echo sandbox_persist ;; *) echo "bytea $1" ;; esac; }
prepare_all() {  # w
    local w=$1
    echo "PREPARE p_ours(int) AS SELECT sandbox_persist.blob_put(k, body) FROM bench.stage WHERE w = '$w' AND i = \$1;"
    echo "PREPARE g_ours(int) AS SELECT g.body FROM bench.stage s, LATERAL sandbox_persist.blob_get(s.k) g WHERE s.w = '$w' AND s.i = \$1;"
    echo "PREPARE r_ours(bigint) AS SELECT g.body FROM bench.stage s, LATERAL sandbox_persist.blob_get(s.k, \$1, 65536) g WHERE s.w = '$w' AND s.i = 1;"
    for sys in lz4 pglz; do
        echo "PREPARE p_$sys(int) AS INSERT INTO bench.$sys (k, b) SELECT k, body FROM bench.stage WHERE w = '$w' AND i = \$1;"
        echo "PREPARE g_$sys(int) AS SELECT t.b FROM bench.stage s JOIN bench.$sys t ON t.k = s.k WHERE s.w = '$w' AND s.i = \$1;"
        echo "PREPARE r_$sys(bigint) AS SELECT substring(t.b FROM (\$1 + 1)::int FOR 65536) FROM bench.stage s JOIN bench.$sys t ON t.k = s.k WHERE s.w = '$w' AND s.i = 1;"
    done
}
truncate_all() {
    echo "TRUNCATE sandbox_persist.blobs, sandbox_persist.blob_chunks, sandbox_persist.blob_uploads;"
    echo "TRUNCATE bench.lz4; TRUNCATE bench.pglz; CHECKPOINT;"
}
stored_sql() {
    case $1 in
    ours) echo "SELECT pg_total_relation_size('sandbox_persist.blobs') + pg_total_relation_size('sandbox_persist.blob_chunks') + pg_total_relation_size('sandbox_persist.blob_uploads')" ;;
    *) echo "SELECT pg_total_relation_size('bench.$1')" ;;
    esac
}
# interleaved OP ARGS...: one line per statement "<sys> EXECUTE <op>_<sys>(<arg>);"
# for every arg, systems rotated; writes $WORK/run.sql and $WORK/run.sys
interleave() {  # op rep args...
    local op=$1 r=$2 j x=0 sys
    shift 2
    : >"$WORK/run.sys"
    { echo '\timing on'
      for a in "$@"; do
          for ((j = 0; j < 3; j++)); do
              sys=${SYSTEMS[$(((r + x + j) % 3))]}
              echo "EXECUTE ${op}_$sys($a);"
              echo "$sys" >>"$WORK/run.sys"
          done
          x=$((x + 1))
      done
    } >"$WORK/run.sql"
}
# run $WORK/run.sql after the prepared statements of workload w; append each
# system's total ms to $WORK/<op>_<sys>.ms
run_interleaved() {  # w op
    local w=$1 op=$2
    { prepare_all "$w"; cat "$WORK/run.sql"; } >"$WORK/run.full.sql"
    db -At -o /dev/null -f "$WORK/run.full.sql" | awk '/^Time: / {print $2}' >"$WORK/run.ms"
    [ "$(wc -l <"$WORK/run.ms")" = "$(wc -l <"$WORK/run.sys")" ] || { log "lost timings"; exit 1; }
    paste "$WORK/run.sys" "$WORK/run.ms" | awk -v dir="$WORK" -v op="$op" \
        '{t[$1] += $2} END {for (s in t) printf "%.3f\n", t[s] >> (dir "/" op "_" s ".ms")}'
}
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}'; }

workload() {  # w name
    local w=$1 name=$2 n raw sys r
    n=$(val "SELECT count(*) FROM bench.stage WHERE w = '$w'")
    [ "$n" -gt 0 ] || return 0
    raw=$(val "SELECT sum(octet_length(body)) FROM bench.stage WHERE w = '$w'")
    log "$name: $n objects, $raw bytes"
    echo -e "fact\t$name objects\t$n"
    echo -e "fact\t$name raw bytes\t$raw"
    for sys in "${SYSTEMS[@]}"; do : >"$WORK/p_$sys.ms"; : >"$WORK/g_$sys.ms"; done
    for ((r = 0; r < REPS; r++)); do
        db -c "$(truncate_all)" >/dev/null
        interleave p "$r" $(seq 1 "$n")
        run_interleaved "$w" p
    done
    for sys in "${SYSTEMS[@]}"; do
        val "$(stored_sql "$sys")" >"$WORK/stored_$sys"
    done
    # every system gives back exactly what was put
    bad=$(val "SELECT count(*) FROM bench.stage s LEFT JOIN LATERAL sandbox_persist.blob_get(s.k) g ON true
                LEFT JOIN bench.lz4 l ON l.k = s.k LEFT JOIN bench.pglz p ON p.k = s.k
               WHERE s.w = '$w' AND (g.body IS DISTINCT FROM s.body OR l.b IS DISTINCT FROM s.body
                                     OR p.b IS DISTINCT FROM s.body)")
    if [ "$bad" != 0 ]; then log "$name: $bad objects read back wrong"; exit 1; fi
    for ((r = 0; r < REPS; r++)); do
        interleave g "$r" $(seq 1 "$n")
        run_interleaved "$w" g
    done
    local op ours base mo mb
    for op in p g; do
        ours=$(median <"$WORK/${op}_ours.ms")
        for sys in lz4 pglz; do
            base=$(median <"$WORK/${op}_$sys.ms")
            mo=$(awk -v b="$raw" -v ms="$ours" 'BEGIN {printf "%.1f", b / 1e6 / (ms / 1000)}')
            mb=$(awk -v b="$raw" -v ms="$base" 'BEGIN {printf "%.1f", b / 1e6 / (ms / 1000)}')
            echo -e "row\t$([ $op = p ] && echo put || echo get)\t$name\tMB/s\t$mo\t$(label "$sys")\t$mb\t$(ratio "$mo" "$mb")\thigher"
            # the plot: each ratio against bytea lz4 by mean object size, a series per op and codec
            # (printed at the end, each series in size order)
            if [ "$sys" = lz4 ]; then
                echo -e "series\tblob_ratio\t$([ $op = p ] && echo put || echo get), blob_codec $codec\t$((raw / n))\t$(ratio "$mo" "$mb")" >>"$WORK/series"
            fi
        done
        log "$name $op ms: ours $(tr '\n' ' ' <"$WORK/${op}_ours.ms")| lz4 $(tr '\n' ' ' <"$WORK/${op}_lz4.ms")| pglz $(tr '\n' ' ' <"$WORK/${op}_pglz.ms")"
    done
    for sys in lz4 pglz; do
        echo -e "row\tstored bytes\t$name\tbytes\t$(cat "$WORK/stored_ours")\t$(label "$sys")\t$(cat "$WORK/stored_$sys")\t$(ratio "$(cat "$WORK/stored_ours")" "$(cat "$WORK/stored_$sys")")\tlower"
    done
}

# recompressed name: after a workload under lz4, what maintain() makes of it
# with blob_recompress on (A12): the time to rewrite every lz4 row as zstd,
# then the stored bytes once VACUUM FULL has compacted the tables (the
# baselines' tables were written once and hold no dead rows, so their sizes
# from workload() compare with a compacted one).
recompressed() {  # name
    local name=$1 ms raw after sys
    raw=$(val "SELECT coalesce(sum(raw_length), 0) FROM sandbox_persist.blob_chunks WHERE codec = 2")
    raw=$((raw + $(val "SELECT coalesce(sum(size), 0) FROM sandbox_persist.blobs WHERE inline_codec = 2")))
    # maintain() rounds until one rewrites nothing, timed as one statement
    ms=$(db -At -c "SET sandbox_persist.blob_recompress = on" -c '\timing on' \
            -c "DO \$\$BEGIN LOOP EXIT WHEN (sandbox_persist.maintain(1000000)->>'blobsRecompressed')::bigint = 0; END LOOP; END\$\$" \
         | awk '/^Time: / {print $2}')
    [ "$(val "SELECT count(*) FROM sandbox_persist.blob_chunks WHERE codec = 2")" = 0 ] \
        || { log "$name: lz4 chunks left after maintain()"; exit 1; }
    echo -e "fact\t$name: maintain() rewrote as zstd\t$(awk -v b="$raw" -v ms="$ms" 'BEGIN {printf "%.1f MB in %.0f ms, %.1f MB/s", b / 1e6, ms, b / 1e6 / (ms / 1e3)}')"
    db -c "VACUUM FULL sandbox_persist.blobs" -c "VACUUM FULL sandbox_persist.blob_chunks" >/dev/null
    after=$(val "$(stored_sql ours)")
    for sys in lz4 pglz; do
        echo -e "row\tstored bytes\t$name, after maintain() rewrote it as zstd\tbytes\t$after\t$(label "$sys")\t$(cat "$WORK/stored_$sys")\t$(ratio "$after" "$(cat "$WORK/stored_$sys")")\tlower"
    done
}

range_reads() {  # w name: 64 KiB reads of object 1 of workload w, left in place by workload()
    local w=$1 name=$2 size sys k r ours base
    size=$(val "SELECT octet_length(body) FROM bench.stage WHERE w = '$w' AND i = 1")
    [ -n "$size" ] || return 0
    local offs=()
    for ((k = 1; k <= RANGE_READS; k++)); do offs+=($(((k * 7919 * 65537) % (size - 65536)))); done
    for sys in "${SYSTEMS[@]}"; do : >"$WORK/r_$sys.ms"; done
    for ((r = 0; r < REPS; r++)); do
        interleave r "$r" "${offs[@]}"
        run_interleaved "$w" r
    done
    ours=$(median <"$WORK/r_ours.ms")
    ours=$(awk -v ms="$ours" -v n="$RANGE_READS" 'BEGIN {printf "%.3f", ms / n}')
    for sys in lz4 pglz; do
        base=$(median <"$WORK/r_$sys.ms")
        base=$(awk -v ms="$base" -v n="$RANGE_READS" 'BEGIN {printf "%.3f", ms / n}')
        echo -e "row\trange read\t64 KiB of $name\tms/op\t$ours\t$(label "$sys") substring\t$base\t$(ratio "$ours" "$base")\tlower"
    done
}

printf 'plot\tblob_ratio\tBlob put and whole get against bytea lz4 (MB/s ratio; the target is 0.9)\tmean object size (bytes)\tours / bytea lz4\t1\n'
echo -e "fact\tblob settings\t$(val "LOAD 'sandbox_persist'; SELECT format('chunk %s, zstd level %s, synchronous_commit %s', current_setting('sandbox_persist.blob_chunk_size'), current_setting('sandbox_persist.zstd_level'), current_setting('synchronous_commit'))")"
# Every workload once per codec of ours (sandbox_persist.blob_codec), the
# baselines measured again beside each: the default zstd under the plain
# workload names, lz4 under "<name> (lz4)".
BASE_PGOPTIONS=$PGOPTIONS
for codec in $CODECS; do
    export PGOPTIONS="$BASE_PGOPTIONS -c sandbox_persist.blob_codec=$codec"
    suffix=$([ "$codec" = zstd ] || echo " ($codec)")
    log "codec $codec"
    # under lz4, each workload is also rewritten by maintain() (recompressed)
    rewrite_if_lz4() { if [ "$codec" = lz4 ]; then recompressed "$1"; fi; }
    workload src "source files$suffix"; rewrite_if_lz4 "source files$suffix"
    workload lib "shared libraries$suffix"; rewrite_if_lz4 "shared libraries$suffix"
    workload 4k "4 KiB objects$suffix"; rewrite_if_lz4 "4 KiB objects$suffix"
    workload 1m "1 MiB objects$suffix"
    if [ "$N64M" -gt 0 ]; then
        rewrite_if_lz4 "1 MiB objects$suffix"
        workload 64m "64 MiB objects$suffix"
        range_reads 64m "a 64 MiB object$suffix"
        rewrite_if_lz4 "64 MiB objects$suffix"
    else
        range_reads 1m "a 1 MiB object$suffix"
        rewrite_if_lz4 "1 MiB objects$suffix"
    fi
done
# the target as a series of its own, across the sizes measured
for x in 4096 $((64 * 1024 * 1024)); do printf 'series\tblob_ratio\ttarget 0.9\t%s\t0.9\n' "$x" >>"$WORK/series"; done
sort -t$'\t' -s -k3,3 -k4,4n "$WORK/series"
log done
