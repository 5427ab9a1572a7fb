-- bench/experiments/durable_read_build.sql (run by durable.sh): build the two logs of
-- benchmark (2) through the public API, in the one shared entries table.
--   bench-read-small: 1 000 chunks, one append of 1000
--   bench-read-big:   1 000 000 chunks, 1000 appends of the same kind of
--                     1000-chunk batch inside one DO loop
-- and copy the entries into bench_durable.plain_log, the baseline (same
-- rows, same primary key, same physical order). Then CHECKPOINT and VACUUM
-- ANALYZE, leaving the tables as autovacuum eventually would (hint bits set,
-- pages all-visible, statistics current) so the measurement does not depend
-- on when autovacuum happens to run. The CHECKPOINT flushes the WAL first:
-- with synchronous_commit = off the build's commit record may not be on disk
-- yet, and until it is VACUUM may neither set hint bits nor mark pages
-- all-visible (the first reader of each page would then dirty it).
\set ON_ERROR_STOP 1
TRUNCATE sandbox_persist.event_logs, sandbox_persist.event_log_entries,
         sandbox_persist.event_log_producers, bench_durable.plain_log;

SELECT sandbox_persist.event_log_append('bench-read-small',
                                        bench_durable.batch('bench-read-small', 0, 1000)::json)
       IS NOT NULL AS small_built;

DO $$
DECLARE
    b json;
BEGIN
    -- 1000 distinct chunks, appended 1000 times (the text repeats every
    -- 1000 seqs; the rows, index entries and sizes are what matter here)
    b := bench_durable.batch('bench-read-big', 0, 1000)::json;
    FOR k IN 1..1000 LOOP
        PERFORM sandbox_persist.event_log_append('bench-read-big', b);
    END LOOP;
END
$$;

INSERT INTO bench_durable.plain_log (log_id, seq, chunk)
    SELECT log_id, seq, chunk FROM sandbox_persist.event_log_entries;

CHECKPOINT;
VACUUM ANALYZE sandbox_persist.event_logs, sandbox_persist.event_log_entries,
               bench_durable.plain_log;
