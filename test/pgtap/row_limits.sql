-- pgTAP: the one row-limit rule (docs/architecture.md, "Row limits").
-- Every function with a row-limit argument (max_rows, page_limit) reads it
-- the same way: SQL NULL means the documented default, exactly as if the
-- argument were left out; zero asks for no rows; a negative limit is 22023 and
-- changes nothing. Cases RL1 (event_log_read), RL2 (instance_gc_candidates),
-- RL3 (maintain), RL4 (blob_list), RL5 (schedule_maintenance).
-- Run with: pg_prove -d <db> test/pgtap/row_limits.sql (needs allow_test_reset
-- and allow_client_clock; RL5 needs pg_cron in the database and skips without it).
BEGIN;
SELECT plan(30);
SELECT sandbox_persist._reset_for_tests();

-- Every row a rejected call could have touched, in a fixed order.
CREATE FUNCTION pg_temp.state() RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(E'\n',
        (SELECT count(*) || ' entries' FROM sandbox_persist.event_log_entries),
        (SELECT count(*) || ' instances' FROM sandbox_persist.instances),
        (SELECT count(*) || ' locks' FROM sandbox_persist.locks),
        (SELECT count(*) || ' blobs' FROM sandbox_persist.blobs),
        (SELECT string_agg(m::text, E'\n' ORDER BY m::text) FROM sandbox_persist.maintenance_state m))
$$;

-- A negative limit: 22023 (throws_ok) and nothing changed.
CREATE FUNCTION pg_temp.refused(sql text, descr text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.state();
BEGIN
    RETURN NEXT throws_ok(sql, '22023', NULL, descr || ' -> 22023');
    RETURN NEXT is(pg_temp.state(), before, descr || ': nothing changed');
END
$$;

SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now \gset

------------------------------------------------------------------------------
-- RL1 event_log_read(run_id, after_seq, max_rows DEFAULT 1000)
------------------------------------------------------------------------------
SELECT sandbox_persist.event_log_append('rl1-run',
    (SELECT json_agg(json_build_object('i', i)) FROM generate_series(1, 1001) AS i));
SELECT is(json_array_length(sandbox_persist.event_log_read('rl1-run', 0)->'entries'), 1000,
    'RL1.1 left out, max_rows is 1000');
SELECT is(sandbox_persist.event_log_read('rl1-run', 0, NULL)::text,
          sandbox_persist.event_log_read('rl1-run', 0)::text,
    'RL1.2 max_rows NULL reads exactly what the default reads');
SELECT is(sandbox_persist.event_log_read('rl1-run', 0, 0)::jsonb - 'logId',
          '{"exists":true,"closed":false,"tail":1001,"entries":[]}'::jsonb,
    'RL1.3 max_rows 0 returns no entries, just the tail');
SELECT is(json_array_length(sandbox_persist.event_log_read('rl1-run', 0, 2147483647)->'entries'), 1001,
    'RL1.4 the largest integer limit reads everything');
SELECT * FROM pg_temp.refused($$SELECT sandbox_persist.event_log_read('rl1-run', 0, -1)$$,
    'RL1.5 event_log_read max_rows -1');

------------------------------------------------------------------------------
-- RL2 instance_gc_candidates(retention_ms, max_rows DEFAULT 100, now_ms)
------------------------------------------------------------------------------
INSERT INTO sandbox_persist.instances (instance_key, provider, provider_sandbox_id, thread_id, updated_at)
    SELECT format('rl2-%s', lpad(i::text, 3, '0')), 'fake', 'sb', 't', i FROM generate_series(1, 101) AS i;
SELECT is(json_array_length(sandbox_persist.instance_gc_candidates(0, now_ms => :now)), 100,
    'RL2.1 left out, max_rows is 100');
SELECT is(sandbox_persist.instance_gc_candidates(0, NULL, :now)::text,
          sandbox_persist.instance_gc_candidates(0, now_ms => :now)::text,
    'RL2.2 max_rows NULL returns exactly what the default returns');
SELECT is(sandbox_persist.instance_gc_candidates(0, 0, :now)::text, '[]',
    'RL2.3 max_rows 0 returns no candidates');
SELECT * FROM pg_temp.refused(format($$SELECT sandbox_persist.instance_gc_candidates(0, -1, %s)$$, :now),
    'RL2.4 instance_gc_candidates max_rows -1');
SELECT throws_ok(format($$SELECT sandbox_persist.instance_gc_candidates(NULL, 5, %s)$$, :now), '22004', NULL,
    'RL2.5 retention_ms is no row limit: NULL stays 22004');

------------------------------------------------------------------------------
-- RL3 maintain(max_rows DEFAULT 100000, now_ms) (1000 before 0.5.0)
------------------------------------------------------------------------------
-- 100001 lock rows expired long before the purge threshold; no time budget,
-- so the round takes what max_rows allows however busy the machine is.
SET sandbox_persist.maintenance_time_budget = 0;
INSERT INTO sandbox_persist.locks (lock_key, owner_token, fence, acquired_at, expires_at)
    SELECT format('rl3-%s', i), gen_random_uuid(), i, 0, 1 FROM generate_series(1, 100001) AS i;
SELECT is((sandbox_persist.maintain(0, :now)->>'locksPurged')::int, 0,
    'RL3.1 max_rows 0 purges nothing');
SELECT is((sandbox_persist.maintain(NULL, :now)->>'locksPurged')::int, 100000,
    'RL3.2 max_rows NULL purges at most the default 100000');
SELECT is((SELECT count(*)::int FROM sandbox_persist.locks WHERE lock_key LIKE 'rl3-%'), 1,
    'RL3.3 one expired lock row is left for the next round');
SELECT is((sandbox_persist.maintain(now_ms => :now)->>'locksPurged')::int, 1,
    'RL3.4 maintain() with the limit left out takes the rest');
SELECT * FROM pg_temp.refused(format($$SELECT sandbox_persist.maintain(-1, %s)$$, :now),
    'RL3.5 maintain max_rows -1');
RESET sandbox_persist.maintenance_time_budget;

------------------------------------------------------------------------------
-- RL4 blob_list(prefix, list_cursor, page_limit DEFAULT NULL = no limit)
------------------------------------------------------------------------------
SELECT count(sandbox_persist.blob_put(format('rl4/%s', i), '\x00'::bytea)) FROM generate_series(1, 3) AS i;
SELECT is(json_array_length(sandbox_persist.blob_list('rl4/', NULL, NULL)->'objects'), 3,
    'RL4.1 page_limit NULL lists every object');
SELECT is(sandbox_persist.blob_list('rl4/', NULL, NULL)->>'truncated', 'false',
    'RL4.2 and is not truncated');
SELECT is(sandbox_persist.blob_list('rl4/', NULL, NULL)::text, sandbox_persist.blob_list('rl4/')::text,
    'RL4.3 page_limit NULL lists exactly what the default lists');
SELECT is(sandbox_persist.blob_list('rl4/', NULL, 0)::jsonb, '{"objects":[],"truncated":false}'::jsonb,
    'RL4.4 page_limit 0 returns no objects, untruncated');
SELECT * FROM pg_temp.refused($$SELECT sandbox_persist.blob_list('rl4/', NULL, -1)$$,
    'RL4.5 blob_list page_limit -1');

------------------------------------------------------------------------------
-- RL5 schedule_maintenance(schedule, max_rows DEFAULT 1000)
------------------------------------------------------------------------------
SELECT throws_ok($$SELECT sandbox_persist.schedule_maintenance('* * * * *', -1)$$, '22023', NULL,
    'RL5.1 schedule_maintenance max_rows -1 -> 22023 (before pg_cron is looked for)');
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') AS has_cron \gset
\if :has_cron
SELECT sandbox_persist.unschedule_maintenance();
SELECT isnt(sandbox_persist.schedule_maintenance('* * * * *', NULL), NULL,
    'RL5.2 schedule_maintenance max_rows NULL schedules the job');
SELECT is((SELECT command FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'),
    'SELECT sandbox_persist.maintain()',
    'RL5.3 which calls maintain() with its own default');
SELECT sandbox_persist.schedule_maintenance('* * * * *', 0);
SELECT is((SELECT command FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'),
    'SELECT sandbox_persist.maintain(0)', 'RL5.4 max_rows 0 is passed on');
SELECT sandbox_persist.schedule_maintenance();
SELECT is((SELECT command FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'),
    'SELECT sandbox_persist.maintain(100000)', 'RL5.5 left out, the documented 100000 is passed on');
SELECT ok(sandbox_persist.unschedule_maintenance(), 'RL5.6 the job is removed again');
\else
SELECT skip('pg_cron is not installed in this database', 5);
\endif

SELECT * FROM finish();
ROLLBACK;
