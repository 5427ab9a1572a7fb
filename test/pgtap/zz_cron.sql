-- pgTAP: M22 end to end (docs/contract/maintenance.md §1).
--  * pg_cron really runs the scheduled maintenance: a lock row that expired
--    long ago is purged by the job, not by us, and maintenance_state records
--    the run.
--  * In a database without pg_cron, schedule_maintenance raises 55000 with a
--    hint giving the exact cron.schedule_in_database(...) call, and that call
--    works in the cron database.
--
-- NOT wrapped in a transaction: the scheduled job must see committed rows,
-- and CREATE/DROP DATABASE cannot run inside one. It must run in the
-- database named by cron.database_name (postgres in the throwaway cluster),
-- after every other suite (it resets the tables, and pg_cron has minute
-- granularity, so the wait can take up to ~70 s; it gives up after 150 s).
-- The "no pg_cron" database is visited with \c before the TAP plan starts;
-- what it answered is carried back in psql variables, so every assertion
-- runs in this one session. Errors do not stop the file, so the clean-up at
-- the end (unschedule, drop the database) always runs.
--
-- Run with: pg_prove -d postgres test/pgtap/zz_cron.sql
-- (needs pg_cron and pgtap in that database and allow_test_reset on).
\set ON_ERROR_STOP 0
\set QUIET 1
\set origdb :DBNAME
SET client_min_messages = warning;

------------------------------------------------------------------------------
-- A database without pg_cron: ask it, remember the answers, drop it later.
------------------------------------------------------------------------------
DROP DATABASE IF EXISTS sp_nocron WITH (FORCE);
CREATE DATABASE sp_nocron;
\c sp_nocron
CREATE EXTENSION sandbox_persist;
CREATE FUNCTION pg_temp.try_schedule() RETURNS TABLE (has_cron boolean, st text, msg text, hint text, unscheduled boolean)
LANGUAGE plpgsql AS $$
BEGIN
    has_cron := EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron');
    BEGIN
        PERFORM sandbox_persist.schedule_maintenance();
        st := 'no error';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    END;
    unscheduled := sandbox_persist.unschedule_maintenance();
    RETURN NEXT;
END
$$;
SELECT * FROM pg_temp.try_schedule() \gset nocron_
\c :origdb

------------------------------------------------------------------------------
-- The TAP session.
------------------------------------------------------------------------------
SET client_min_messages = warning;
SELECT plan(19);
SELECT sandbox_persist._reset_for_tests();
DO $$ BEGIN PERFORM sandbox_persist.unschedule_maintenance(); END $$;   -- a leftover of an aborted run

-- What the database without pg_cron answered.
SELECT is(:'nocron_has_cron'::text, 'f', 'M22.20 (the second database sp_nocron has no pg_cron)');
SELECT is(:'nocron_st'::text, '55000', 'M22.21 schedule_maintenance() in a database without pg_cron -> 55000');
SELECT matches(:'nocron_hint'::text, 'cron\.schedule_in_database\(',
    'M22.22 the error carries a hint naming cron.schedule_in_database');
SELECT ok(strpos(:'nocron_hint',
        $$cron.schedule_in_database('sandbox_persist_maintenance', '* * * * *', 'SELECT sandbox_persist.maintain(100000)', 'sp_nocron')$$) > 0,
    'M22.23 the hint gives the exact call: job name, schedule, command and the database sp_nocron');
SELECT is(:'nocron_unscheduled'::text, 'f', 'M22.24 unschedule_maintenance() there returns false');
SELECT is((SELECT count(*) FROM cron.job WHERE jobname = 'sandbox_persist_maintenance' OR database = 'sp_nocron'),
    0::bigint, 'M22.36 the refused call scheduled nothing anywhere (no job in the cron database)');

-- The hint's call works as given in the cron database (undone at once).
CREATE FUNCTION pg_temp.run_hint(hint text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    call text := substring(hint FROM '(SELECT cron\.schedule_in_database\(.*\))');
    job text;
BEGIN
    BEGIN
        EXECUTE call;
        SELECT format('%s|%s|%s', schedule, command, database) INTO job
          FROM cron.job WHERE jobname = 'sandbox_persist_maintenance';
        RAISE EXCEPTION USING ERRCODE = 'ZZ999', MESSAGE = 'undo';
    EXCEPTION WHEN SQLSTATE 'ZZ999' THEN
        NULL;
    END;
    RETURN job;
END
$$;
SELECT is(pg_temp.run_hint(:'nocron_hint'), '* * * * *|SELECT sandbox_persist.maintain(100000)|sp_nocron',
    'M22.25 run in the cron database, the hint''s call schedules maintain(100000) for sp_nocron');
SELECT is((SELECT count(*) FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'), 0::bigint,
    'M22.26 (that trial job was undone)');

-- pg_cron runs the scheduled maintenance.
SELECT is(current_setting('cron.database_name'), current_database()::text,
    'M22.27 (this is the database pg_cron reads its jobs from)');
SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS t0, clock_timestamp() AS t0_ts \gset
SELECT ok(sandbox_persist.lock_acquire('zz-cron:expired', 1000, :t0 - 3 * 3600 * 1000) IS NOT NULL
          AND sandbox_persist.lock_acquire('zz-cron:live', 600000) IS NOT NULL,
    'M22.28 (a lock row expired 3 h ago, older than lock_purge_after, and a live one)');
SELECT sandbox_persist.schedule_maintenance('* * * * *') AS job \gset
SELECT is((SELECT count(*) FROM cron.job WHERE jobname = 'sandbox_persist_maintenance' AND jobid = :job), 1::bigint,
    'M22.29 schedule_maintenance(''* * * * *'') registered the job');

-- Poll cron.job_run_details once a second (each statement of this volatile
-- function sees the latest commits) until a run that started after t0 ended.
CREATE FUNCTION pg_temp.wait_for_run(job bigint, since timestamptz, max_seconds int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    outcome text;
BEGIN
    FOR i IN 1 .. max_seconds LOOP
        SELECT d.status || coalesce(': ' || d.return_message, '') INTO outcome
          FROM cron.job_run_details d
         WHERE d.jobid = job AND d.start_time >= since AND d.status IN ('succeeded', 'failed')
         ORDER BY d.runid LIMIT 1;
        IF outcome IS NOT NULL THEN
            RETURN outcome;
        END IF;
        PERFORM pg_sleep(1);
    END LOOP;
    RETURN 'no finished run within ' || max_seconds || ' s';
END
$$;
SELECT pg_temp.wait_for_run(:job, :'t0_ts', 150) AS outcome \gset
SELECT matches(:'outcome'::text, '^succeeded', 'M22.30 pg_cron ran the maintenance job and it succeeded');
SELECT ok(sandbox_persist.lock_holder('zz-cron:expired') IS NULL, 'M22.31 the job purged the long-expired lock row');
SELECT ok(sandbox_persist.lock_holder('zz-cron:live') IS NOT NULL, 'M22.32 and left the live lock alone');
SELECT ok((SELECT last_run_at >= :t0 AND last_run_at <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint
             FROM sandbox_persist.maintenance_state),
    'M22.33 maintenance_state.last_run_at is the job''s recent run');
SELECT cmp_ok((SELECT (last_summary->>'locksPurged')::int FROM sandbox_persist.maintenance_state), '>=', 1,
    'M22.34 its summary counts the purged lock');

SELECT is((SELECT row(h->>'ok', h->>'scheduled', h->>'jobId', h->>'lastCronStatus')::text
             FROM (SELECT sandbox_persist.maintenance_health() AS h) x),
    row('true', 'true', :'job', 'succeeded')::text,
    'M22.37 after the job''s run, maintenance_health() is ok, names the job and pg_cron''s success (M26, M27)');

-- Clean up: the job, the second database, the rows.
SELECT ok(sandbox_persist.unschedule_maintenance(), 'M22.35 unschedule_maintenance() removes the job');
SELECT is(sandbox_persist.maintenance_health()->>'scheduled', 'false',
    'M22.38 and maintenance is no longer expected (M28)');
DROP DATABASE IF EXISTS sp_nocron WITH (FORCE);
SELECT sandbox_persist._reset_for_tests();
SELECT * FROM finish();
