-- bench/experiments/durable_read_explain.sql (run by durable.sh after the timed reads):
-- where does a read's time go? EXPLAIN (ANALYZE, BUFFERS) of the entries
-- query event_log_read runs (src/event_log.c, log_entries), at 50 fresh
-- offsets per case, with track_io_timing: shared buffers hit and read (a
-- read is a miss served by the kernel), pages dirtied, time in reads.
\set ON_ERROR_STOP 1
SET track_io_timing = on;
SELECT setseed(0.17);
TRUNCATE bench_durable.read_buffers;
DO $$
DECLARE
    runs  text[] := ARRAY['bench-read-small', 'bench-read-big'];
    sizes text[] := ARRAY['small', 'big'];
    r     json;
    plan  json;
    tail  bigint;
    logid bigint;
    after bigint;
BEGIN
    FOR i IN 1..50 LOOP
        FOR s IN 1..2 LOOP
            r := sandbox_persist.event_log_read(runs[s], 0, 0);
            tail := (r->>'tail')::bigint;
            logid := (r->>'logId')::bigint;
            FOR p IN 1..2 LOOP
                IF p = 1 THEN
                    after := tail - 100 - floor(random() * 100)::bigint;
                ELSE
                    after := tail / 4 + floor(random() * (tail / 2 - 100))::bigint;
                END IF;
                EXECUTE format('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)'
                               ' SELECT seq, chunk::text FROM sandbox_persist.event_log_entries'
                               ' WHERE log_id = %s AND seq > %s ORDER BY seq LIMIT 100', logid, after)
                    INTO plan;
                plan := plan->0;
                INSERT INTO bench_durable.read_buffers
                VALUES (sizes[s], CASE p WHEN 1 THEN 'tail' ELSE 'middle' END,
                        (plan->'Plan'->>'Shared Hit Blocks')::int,
                        (plan->'Plan'->>'Shared Read Blocks')::int,
                        (plan->'Plan'->>'Shared Dirtied Blocks')::int,
                        coalesce((plan->'Plan'->>'I/O Read Time')::float8, 0) * 1000,
                        (plan->>'Execution Time')::float8 * 1000);
            END LOOP;
        END LOOP;
    END LOOP;
END
$$;
