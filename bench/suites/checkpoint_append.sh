#!/usr/bin/env bash
# bench/suites/checkpoint_append.sh: checkpoint_append of automatic checkpoints
# (the whole transcript passed every time, almost always extending the
# parent's) against plain append-only tables, in the format of every
# `make bench` suite (bench/README.md): tab-separated row/series/plot/fact
# lines on stdout, progress on stderr.
#
# Baseline "plain append-only tables": plain_messages (thread, ordinal, body
# json) stores each message once and plain_checkpoints (thread, length) one
# row per checkpoint; an append is two statements (PL/pgSQL, so prepared and
# kept) that insert the elements of the passed transcript beyond the thread's
# current length and the checkpoint row. It trusts the caller: it never checks
# that the transcript extends the stored one, which sandbox_persist must.
#
# Measured, each in its own scratch database:
#   * append time (ms/op, median of 21 appends, one transaction each, commit
#     included, the two sides alternating in one backend) of a transcript of N messages (~1 KB each) when the thread
#     already holds K checkpoints whose transcripts grew to N, for N = 400 and
#     2000, K = 10, 100, 1000 (QUICK: N = 400, K = 10, 100);
#   * catalog growth / final transcript bytes after 200 and 1000 automatic
#     checkpoints growing by 2 messages each (QUICK: 50 and 200);
#   * over the latter, the conversation blocks stored (one per append that
#     added messages) and the messages they hold (each message once).
# The transcript handed to an append is built in the server before the clock
# starts, so both sides are timed on the append alone.
#
# Environment: PGHOST/PGPORT/PGUSER/PGDATABASE (a superuser), QUICK=1,
# BENCH_SYNC=on|off (synchronous_commit, default off).
set -euo pipefail
# Both designs commit once per append; what differs is the work per append:
# measured with synchronous_commit off only (make bench's sync_sensitive fact).
printf 'fact\tsync_sensitive\tno\n'

ADMIN_DB=${PGDATABASE:-postgres}
BENCH_DB=sp_bench_checkpoint_append
SYNC=${BENCH_SYNC:-off}
export PGOPTIONS="${PGOPTIONS:-} -c synchronous_commit=$SYNC -c client_min_messages=warning -c statement_timeout=600s"

if [ "${QUICK:-0}" = 1 ]; then
    SIZES="400"; COUNTS="10 100"; GROWTH="50 200"
else
    SIZES="400 2000"; COUNTS="10 100 1000"; GROWTH="200 1000"
fi
REPS=21
# to rerun one configuration: CKPT_SIZES="400" CKPT_COUNTS="1000" CKPT_GROWTH=""
SIZES=${CKPT_SIZES-$SIZES}; COUNTS=${CKPT_COUNTS-$COUNTS}; GROWTH=${CKPT_GROWTH-$GROWTH}

admin() { psql -X -q -v ON_ERROR_STOP=1 -d "$ADMIN_DB" "$@"; }
db() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$BENCH_DB" "$@"; }
log() { echo "checkpoint_append: $*" >&2; }

cleanup() { admin -c "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# A fresh database with the extension, the baseline tables and the drivers.
fresh_db() {
    admin -c "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" >/dev/null
    admin -c "CREATE DATABASE $BENCH_DB" >/dev/null
    db >/dev/null <<'SQL'
CREATE EXTENSION sandbox_persist CASCADE;
-- ~1 KB messages, alternating user and assistant, each distinct.
CREATE TABLE bench_msgs (i int PRIMARY KEY, body text NOT NULL);
INSERT INTO bench_msgs
SELECT i, json_build_object('id', 'msg-' || i, 'role', CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
                            'content', (SELECT string_agg(md5(i::text || ':' || j), ' ') FROM generate_series(1, 29) j))::text
  FROM generate_series(1, 2400) i;
CREATE FUNCTION bench_transcript(n int) RETURNS json LANGUAGE sql STABLE AS $$
    SELECT ('[' || coalesce(string_agg(body, ',' ORDER BY i), '') || ']')::json FROM bench_msgs WHERE i <= n $$;

-- The baseline, written as well as we can.
CREATE TABLE plain_messages (
    thread_id text COLLATE "C" NOT NULL,
    ordinal   integer NOT NULL,
    body      json NOT NULL,
    PRIMARY KEY (thread_id, ordinal)
);
CREATE TABLE plain_checkpoints (
    checkpoint_id text COLLATE "C" PRIMARY KEY,
    thread_id     text COLLATE "C" NOT NULL,
    parent_id     text COLLATE "C",
    created_at    double precision NOT NULL,
    reason        text NOT NULL,
    length        integer NOT NULL,
    files         json NOT NULL,
    artifacts     json NOT NULL
);
CREATE INDEX plain_checkpoints_thread ON plain_checkpoints (thread_id, created_at, checkpoint_id);
CREATE FUNCTION plain_append(thread text, id text, parent text, conv json) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO plain_messages (thread_id, ordinal, body)
    SELECT thread, e.ord - 1, e.value FROM json_array_elements(conv) WITH ORDINALITY AS e(value, ord)
     WHERE e.ord > (SELECT coalesce(max(ordinal) + 1, 0) FROM plain_messages WHERE thread_id = thread);
    INSERT INTO plain_checkpoints VALUES (id, thread, parent, 1, 'automatic', json_array_length(conv),
                                          '[]', '[]');
END $$;

CREATE TABLE bench_times (side text, n int, k int, ms double precision);
CREATE TABLE bench_writer (thread text PRIMARY KEY, writer json NOT NULL);

-- Append checkpoints from..upto of `thread` on both sides, alternating which
-- goes first (checkpoint i carries transcript_len(i) messages), one
-- transaction each; record the time of those from `timed_from` on. Both sides
-- run in one backend, so both are timed with their statements prepared.
CREATE PROCEDURE bench_run(sides text[], thread text, from_i int, upto int, n int, k int, timed_from int)
LANGUAGE plpgsql AS $$
DECLARE
    conv json;
    t0 timestamptz;
    len int;
    w json;
    side text;
BEGIN
    FOR i IN from_i..upto LOOP
        len := CASE WHEN i <= k THEN greatest(1, (n::bigint * i / k)::int) ELSE n + 2 * (i - k) END;
        conv := bench_transcript(len);
        w := (SELECT writer FROM bench_writer b WHERE b.thread = bench_run.thread);
        IF w IS NULL AND 'ours' = ANY (sides) THEN
            w := sandbox_persist.checkpoint_acquire_writer(thread, 36000000);
            INSERT INTO bench_writer VALUES (thread, w);
        END IF;
        COMMIT;
        FOREACH side IN ARRAY CASE WHEN i % 2 = 0 THEN sides ELSE array_reverse(sides) END LOOP
            t0 := clock_timestamp();
            IF side = 'ours' THEN
                PERFORM sandbox_persist.checkpoint_append(json_build_object(
                    'checkpoint', json_build_object('id', thread || '-' || i, 'threadId', thread,
                        'parentCheckpointId', CASE WHEN i > 1 THEN thread || '-' || (i - 1) END,
                        'createdAt', i, 'reason', 'automatic', 'files', '[]'::json, 'artifacts', '[]'::json),
                    'expectedHeadId', CASE WHEN i > 1 THEN thread || '-' || (i - 1) END,
                    'writer', w), conv);
            ELSE
                PERFORM plain_append(thread, thread || '-' || i, CASE WHEN i > 1 THEN thread || '-' || (i - 1) END, conv);
            END IF;
            COMMIT;
            IF i >= timed_from THEN
                INSERT INTO bench_times VALUES (side, n, k, extract(epoch FROM clock_timestamp() - t0) * 1000);
                COMMIT;
            END IF;
        END LOOP;
    END LOOP;
END $$;
CREATE FUNCTION array_reverse(a text[]) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT array_agg(a[i] ORDER BY i DESC) FROM generate_subscripts(a, 1) i $$;

CREATE FUNCTION bench_median(s text, nn int, kk int) RETURNS double precision LANGUAGE sql AS $$
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) FROM bench_times WHERE side = s AND n = nn AND k = kk $$;
-- Bytes of every table (indexes and TOAST included) of one side.
CREATE FUNCTION bench_bytes(s text) RETURNS bigint LANGUAGE sql AS $$
    SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c
     WHERE c.relkind = 'r' AND CASE WHEN s = 'ours' THEN c.relnamespace = 'sandbox_persist'::regnamespace
                                    ELSE c.relname IN ('plain_messages', 'plain_checkpoints') END $$;
SQL
}

fmt() { awk -v a="$1" 'BEGIN { printf "%.3f", a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "inf" }'; }

fresh_db
printf 'plot\tcheckpoint_append_time\tcheckpoint_append of an automatic checkpoint vs checkpoints already in the thread\tcheckpoints in the thread\tms/op\t1\n'

# --- append time ------------------------------------------------------------
for n in $SIZES; do
    for k in $COUNTS; do
        log "N=$n K=$k: $k checkpoints on each side, then $REPS timed appends each, alternating"
        db -c "CALL bench_run('{ours,plain}', 't-$n-$k', 1, $((k + REPS)), $n, $k, $((k + 1)))"
        ours=$(db -c "SELECT bench_median('ours', $n, $k)")
        base=$(db -c "SELECT bench_median('plain', $n, $k)")
        printf 'row\tcheckpoint_append\tautomatic checkpoint, %s messages, %s checkpoints in the thread\tms/op\t%s\tplain append-only tables\t%s\t%s\tlower\n' \
            "$n" "$k" "$(fmt "$ours")" "$(fmt "$base")" "$(ratio "$ours" "$base")"
        printf 'series\tcheckpoint_append_time\tsandbox_persist, %s messages\t%s\t%s\n' "$n" "$k" "$(fmt "$ours")"
        printf 'series\tcheckpoint_append_time\tplain append-only, %s messages\t%s\t%s\n' "$n" "$k" "$(fmt "$base")"
    done
    first=$(echo "$COUNTS" | awk '{print $1}'); last=$(echo "$COUNTS" | awk '{print $NF}')
    flat=$(db -c "SELECT round((bench_median('ours', $n, $last) / bench_median('ours', $n, $first))::numeric, 2)")
    printf 'fact\tcheckpoint_append %s messages: time at %s checkpoints / at %s\t%s\n' "$n" "$last" "$first" "$flat"
done

# --- storage and conversation blocks ---------------------------------------
for k in $GROWTH; do
    fresh_db
    log "storage: $k automatic checkpoints growing by 2 messages"
    read -r ours0 base0 <<<"$(db -F ' ' -c "SELECT bench_bytes('ours'), bench_bytes('plain')")"
    # transcript_len(i) = n * i / k with n = 2k: two messages per checkpoint
    db -c "CALL bench_run('{ours,plain}', 't-storage', 1, $k, $((2 * k)), $k, $((k + 1)))"
    read -r ours1 base1 final <<<"$(db -F ' ' -c "SELECT bench_bytes('ours'), bench_bytes('plain'),
        octet_length(bench_transcript($((2 * k)))::text)")"
    # every append extends its parent's conversation: one block of its two new messages
    read -r blocks messages <<<"$(db -F ' ' -c "SELECT count(*), coalesce(sum(message_count), 0)
        FROM sandbox_persist.conversation_blocks")"
    og=$(awk -v a="$ours1" -v b="$ours0" -v f="$final" 'BEGIN { printf "%.2f", (a - b) / f }')
    bg=$(awk -v a="$base1" -v b="$base0" -v f="$final" 'BEGIN { printf "%.2f", (a - b) / f }')
    printf 'row\tstorage\t%s automatic checkpoints, transcript of %s messages\tx transcript\t%s\tplain append-only tables\t%s\t%s\tlower\n' \
        "$k" "$((2 * k))" "$og" "$bg" "$(ratio "$og" "$bg")"
    printf 'series\tcheckpoint_storage\tsandbox_persist\t%s\t%s\n' "$k" "$og"
    printf 'series\tcheckpoint_storage\tplain append-only\t%s\t%s\n' "$k" "$bg"
    printf 'row\tconversation blocks\t%s automatic checkpoints, transcript of %s messages\tmessages stored\t%s\tone per transcript message\t%s\t%s\tlower\n' \
        "$k" "$((2 * k))" "$messages" "$((2 * k))" "$(ratio "$messages" "$((2 * k))")"
    printf 'row\tconversation blocks\t%s automatic checkpoints, transcript of %s messages\tblocks stored\t%s\tone per checkpoint\t%s\t%s\tlower\n' \
        "$k" "$((2 * k))" "$blocks" "$k" "$(ratio "$blocks" "$k")"
    printf 'fact\tfinal transcript bytes after %s checkpoints\t%s\n' "$k" "$final"
done
printf 'plot\tcheckpoint_storage\tcatalog growth / final transcript bytes\tautomatic checkpoints\tx transcript\t1\n'
log "done"
