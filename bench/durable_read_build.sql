-- bench/durable_read_build.sql (run by durable.sh): build the two logs of
-- benchmark (2) through the public API, in the one shared entries table.
--   bench-read-small: 1 000 chunks, one append of 1000
--   bench-read-big:   1 000 000 chunks, 1000 appends of the same kind of
--                     1000-chunk batch inside one DO loop
-- then VACUUM ANALYZE the log tables, as autovacuum eventually would, so
-- the measurement does not depend on when autovacuum happens to run.
\set ON_ERROR_STOP 1
TRUNCATE sandbox_persist.event_logs, sandbox_persist.event_log_entries,
         sandbox_persist.event_log_producers;

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

VACUUM ANALYZE sandbox_persist.event_logs, sandbox_persist.event_log_entries;
