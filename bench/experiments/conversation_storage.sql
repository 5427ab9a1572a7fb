-- bench/experiments/conversation_storage.sql: benchmark (a), conversation storage.
--
-- 200 automatic checkpoints on one thread over a transcript that grows by two
-- ~1 KB messages per run: checkpoint k carries messages 1..2k, and every
-- append passes the whole transcript as its conversation with
-- expectedHeadId = the previous checkpoint (the automatic-checkpoint flow of
-- docs/contract/checkpoint-store.md §9). Each append is its own transaction.
-- Results go to bench.conv_result; checkpoints.sh prints them and applies the
-- threshold.

\set ncheckpoints 200
\set thread 'bench-conversation'

CREATE TABLE bench.transcript AS
    SELECT k, bench.message(k) AS body FROM generate_series(1, 2 * :ncheckpoints) AS k;
ALTER TABLE bench.transcript ADD PRIMARY KEY (k);

-- One row per append: the conversation text it passed and how long it took.
CREATE TABLE bench.conv_appends (
    k             int PRIMARY KEY,
    checkpoint_id text NOT NULL,
    conv_bytes    bigint NOT NULL,   -- octet_length of the conversation json text
    append_ms     float8 NOT NULL
);

SET bench.ncheckpoints = :ncheckpoints;
SET bench.thread = :'thread';

DO $$
DECLARE
    n        int := current_setting('bench.ncheckpoints')::int;
    thread   text := current_setting('bench.thread');
    writer   json;
    head     text := NULL;
    id       text;
    files    text;
    conv     text;
    input    json;
    conv_j   json;
    result   json;
    t0       timestamptz;
    t1       timestamptz;
BEGIN
    -- A small, fixed workspace: the files are not what this benchmark measures.
    files := '[{"path":"README.md","kind":"file","blobKey":"sandbox-files/sha256/'
             || encode(sha256('readme'::bytea), 'hex') || '","size":1200},'
             || '{"path":"src/index.ts","kind":"file","blobKey":"sandbox-files/sha256/'
             || encode(sha256('index'::bytea), 'hex') || '","size":5400},'
             || '{"path":"tmp/cache","kind":"dir"}]';
    -- One lease for the whole run (an hour, so a slow machine cannot lose it).
    writer := sandbox_persist.checkpoint_acquire_writer(thread, 3600000, NULL);
    COMMIT;
    FOR i IN 1..n LOOP
        SELECT '[' || string_agg(body, ',' ORDER BY t.k) || ']' INTO conv
            FROM bench.transcript t WHERE t.k <= 2 * i;
        id := 'checkpoint-run-' || i;
        input := ('{"checkpoint":{"id":' || to_json(id)
                  || ',"threadId":' || to_json(thread)
                  || ',"parentCheckpointId":' || coalesce(to_json(head)::text, 'null')
                  || ',"createdAt":' || (1700000000000 + i * 60000)
                  || ',"reason":"automatic","sourceRunId":' || to_json('run-' || i)
                  || ',"files":' || files || ',"artifacts":[]}'
                  || ',"expectedHeadId":' || coalesce(to_json(head)::text, 'null')
                  || ',"writer":' || writer::text || '}')::json;
        conv_j := conv::json;
        t0 := clock_timestamp();
        result := sandbox_persist.checkpoint_append(input, conv_j, NULL);
        t1 := clock_timestamp();
        IF result->>'headId' IS DISTINCT FROM id THEN
            RAISE EXCEPTION 'append % returned %', i, result;
        END IF;
        INSERT INTO bench.conv_appends
            VALUES (i, id, octet_length(conv), extract(epoch FROM t1 - t0) * 1000);
        head := id;
        COMMIT;
    END LOOP;
    PERFORM sandbox_persist.checkpoint_release_writer(writer);
END
$$;

CREATE TABLE bench.conv_result AS
SELECT
    (SELECT conv_bytes FROM bench.conv_appends WHERE k = :ncheckpoints) AS final_bytes,
    -- 0.5.0: one block per append (the messages it added, their text joined
    -- by commas and compressed), keyed by thread and first position
    (SELECT coalesce(sum(message_count), 0) FROM sandbox_persist.conversation_blocks
      WHERE thread_id = :'thread') AS messages,
    (SELECT count(*) FROM sandbox_persist.conversation_blocks WHERE thread_id = :'thread') AS blocks,
    (SELECT sum(pg_column_size(bodies)) FROM sandbox_persist.conversation_blocks
      WHERE thread_id = :'thread') AS body_bytes,
    (SELECT sum(pg_column_size(thread_id) + pg_column_size(first_pos) + pg_column_size(message_count))
       FROM sandbox_persist.conversation_blocks WHERE thread_id = :'thread') AS block_key_bytes,
    -- the per-checkpoint references (log ranges, block, length, digest); 0.2.0
    -- stored one bigint[] per checkpoint here
    (SELECT sum(pg_column_size(conv_ranges) + pg_column_size(conv_block)
                + pg_column_size(conv_len) + pg_column_size(conv_digest))
       FROM sandbox_persist.checkpoints WHERE thread_id = :'thread') AS reference_bytes,
    (SELECT sum(conv_bytes) FROM bench.conv_appends) AS naive_bytes,
    (SELECT count(*) FROM sandbox_persist.checkpoints WHERE thread_id = :'thread') AS checkpoints,
    pg_total_relation_size('sandbox_persist.conversation_blocks') AS blocks_relation_bytes,
    (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY append_ms)
       FROM bench.conv_appends WHERE k <= 20) AS first20_median_ms,
    (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY append_ms)
       FROM bench.conv_appends WHERE k > :ncheckpoints - 20) AS last20_median_ms,
    (SELECT avg(conv_bytes) FROM bench.conv_appends WHERE k <= 20) AS first20_conv_bytes,
    (SELECT avg(conv_bytes) FROM bench.conv_appends WHERE k > :ncheckpoints - 20) AS last20_conv_bytes;

-- Sanity: checkpoint_get of the final checkpoint gives back exactly the final
-- transcript, message by message (only the separators between elements may be
-- normalised). Run after the numbers are saved, and catching errors, so a
-- read-path bug is reported as such instead of aborting the benchmark.
ALTER TABLE bench.conv_result ADD COLUMN roundtrip text;
DO $$
DECLARE
    n     int := current_setting('bench.ncheckpoints')::int;
    got   text[];
    want  text[];
    verdict text;
BEGIN
    BEGIN
        SELECT array_agg(e::text ORDER BY o) INTO got
            FROM json_array_elements(
                     sandbox_persist.checkpoint_get('checkpoint-run-' || n) -> 'conversation')
                 WITH ORDINALITY AS x(e, o);
        SELECT array_agg(body ORDER BY k) INTO want FROM bench.transcript;
        verdict := CASE WHEN got = want THEN 'exact'
                        ELSE format('NOT EXACT (%s messages back, %s sent)',
                                    coalesce(array_length(got, 1), 0), array_length(want, 1)) END;
    EXCEPTION WHEN OTHERS THEN
        verdict := 'ERROR: ' || SQLERRM;
    END;
    UPDATE bench.conv_result SET roundtrip = verdict;
END
$$;
