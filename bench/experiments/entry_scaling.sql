-- bench/experiments/entry_scaling.sql: benchmark (b), entry scaling.
--
-- Appends one checkpoint with 100, 1000 or 10000 file entries on a fresh
-- thread each time (15, 15 and 9 measured repetitions, after one unmeasured
-- warm-up per size; odd counts, so each median is a measured value). For
-- every append the complete input is built first as text, then two steps are
-- timed separately with clock_timestamp() inside this one backend (no client
-- round trip, no transfer):
--   parse_ms   the baseline: text -> json, i.e. json_in over the same input
--              text, exactly what `SELECT $1::json` costs the server;
--   append_ms  checkpoint_append(input, '[]', NULL) given that already
--              parsed json value (validation, canonical rewrite, the SPI
--              inserts of the checkpoint row and its reference rows).
-- Diagnostics recorded around the append (read outside the timed interval):
-- the backend's minor page faults (fresh memory touched) and its on-CPU and
-- run-queue time from /proc/self/schedstat (how much of the wall-clock time
-- was spent waiting for a CPU that other processes held).
-- Sizes are interleaved within each repetition, alternating direction, so
-- drift on a shared machine spreads over all sizes. Each append commits
-- separately (the commit is not timed). Results go to bench.entry_timing.

CREATE TABLE bench.entry_timing (
    n           int NOT NULL,       -- entries in the checkpoint
    rep         int NOT NULL,       -- 0 = warm-up, not reported
    input_bytes int NOT NULL,
    keys        int NOT NULL,       -- distinct blob keys (reference rows)
    parse_ms    float8 NOT NULL,
    append_ms   float8 NOT NULL,
    faults      bigint,             -- minor page faults during the append (NULL: unknown)
    cpu_ms      float8,             -- on-CPU time of the backend during the append
    wait_ms     float8,             -- run-queue wait of the backend during the append
    PRIMARY KEY (n, rep)
);

DO $$
DECLARE
    sizes   int[] := ARRAY[100, 1000, 10000];
    reps    int[] := ARRAY[15, 15, 9];
    order_  int[];
    s       int;       -- index into sizes/reps
    thread  text;
    writer  json;
    files   text;
    txt     text;
    input   json;
    result  json;
    t0      timestamptz;
    t1      timestamptz;
    t2      timestamptz;
    t3      timestamptz;
    f0      bigint;
    f1      bigint;
    s0      bigint[];
    s1      bigint[];
BEGIN
    FOR rep IN 0..15 LOOP
        order_ := CASE WHEN rep % 2 = 0 THEN ARRAY[1, 2, 3] ELSE ARRAY[3, 2, 1] END;
        FOREACH s IN ARRAY order_ LOOP
            CONTINUE WHEN rep > reps[s];
            thread := format('bench-entries-%s-rep-%s', sizes[s], rep);
            writer := sandbox_persist.checkpoint_acquire_writer(thread, 3600000, NULL);
            files := bench.files_json(sizes[s], thread);
            txt := '{"checkpoint":{"id":' || to_json(thread || '-ckpt')
                   || ',"threadId":' || to_json(thread)
                   || ',"parentCheckpointId":null,"createdAt":1700000000000.5'
                   || ',"reason":"named","label":"bench","sourceRunId":"run-bench"'
                   || ',"files":' || files
                   || ',"artifacts":[{"artifactId":"a1","name":"report.md","mimeType":"text/markdown"'
                   || ',"size":2048,"blobKey":"sandbox-artifacts/sha256/'
                   || encode(sha256(convert_to(thread, 'UTF8')), 'hex')
                   || '","createdAt":1700000000000}]}'
                   || ',"expectedHeadId":null,"writer":' || writer::text || '}';
            -- baseline: json_in over the same text
            t0 := clock_timestamp();
            input := txt::json;
            t1 := clock_timestamp();
            -- the measured call, with nothing else inside its interval
            f0 := bench.minflt();
            s0 := bench.schedstat();
            t2 := clock_timestamp();
            result := sandbox_persist.checkpoint_append(input, '[]'::json, NULL);
            t3 := clock_timestamp();
            s1 := bench.schedstat();
            f1 := bench.minflt();
            IF result->>'headId' IS DISTINCT FROM thread || '-ckpt' THEN
                RAISE EXCEPTION 'append on % returned %', thread, result;
            END IF;
            INSERT INTO bench.entry_timing
                SELECT sizes[s], rep, octet_length(txt),
                       (SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs r
                         WHERE r.checkpoint_id = thread || '-ckpt'),
                       extract(epoch FROM t1 - t0) * 1000,
                       extract(epoch FROM t3 - t2) * 1000,
                       f1 - f0,
                       (s1[1] - s0[1]) / 1e6,
                       (s1[2] - s0[2]) / 1e6;
            COMMIT;
        END LOOP;
    END LOOP;
END
$$;

CREATE TABLE bench.entry_result AS
SELECT n,
       count(*) AS reps,
       max(input_bytes) AS input_bytes,
       max(keys) AS keys,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY append_ms) AS append_ms,
       min(append_ms) AS append_min_ms,
       max(append_ms) AS append_max_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY parse_ms) AS parse_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY append_ms) * 1000 / n AS append_us_per_entry,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY parse_ms) * 1000 / n AS parse_us_per_entry,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY faults) / n AS faults_per_entry,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY cpu_ms) AS cpu_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY cpu_ms) * 1000 / n AS cpu_us_per_entry,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY wait_ms / append_ms) AS wait_share
FROM bench.entry_timing
WHERE rep > 0
GROUP BY n;
