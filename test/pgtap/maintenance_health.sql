-- pgTAP: maintenance that never runs is reported (docs/contract/maintenance.md
-- §7, cases M26-M28; issue 20 item 2).
--  * M26: pg_cron's latest finished run of the job failed and maintain() has
--    not completed since: maintenance_health() is failing with pg_cron's
--    message, attention_list() holds maintenance_failing, the overview says
--    so; a completed maintain() ends it.
--  * M27: maintain() has not completed within the bound: twice the
--    schedule's longest gap plus one minute, or
--    sandbox_persist.maintenance_overdue_after; maintenance_overdue.
--  * M28: what is read, and as whom: the job's record survives a role that
--    pg_cron hides the job from, an inactive or vanished job is named, and
--    unschedule_maintenance forgets the record.
--
-- pg_cron's failing runs are simulated by inserting rows into
-- cron.job_run_details (as the superuser running this file) for a job
-- scheduled inside this transaction: pg_cron's launcher only sees committed
-- jobs, so it never runs it, and everything is rolled back at the end. The
-- real failing cluster (pg_hba.conf refusing pg_cron's connection) is
-- test/scripts/cron_unreachable.sh. Times are set in the stored rows
-- (scheduled_at, last_run_at, start_time), never waited for.
--
-- Run with: pg_prove -d <db> test/pgtap/maintenance_health.sql (pg_cron
-- installed in that database, allow_test_reset on).
BEGIN;
SELECT plan(45);
SET LOCAL client_min_messages = warning;
SELECT sandbox_persist._reset_for_tests();
DO $$ BEGIN PERFORM cron.unschedule(jobid) FROM cron.job WHERE jobname = 'sandbox_persist_maintenance'; END $$;

CREATE FUNCTION pg_temp.now_ms() RETURNS bigint LANGUAGE sql AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
CREATE FUNCTION pg_temp.h() RETURNS json LANGUAGE sql AS $$
    SELECT sandbox_persist.maintenance_health() $$;
-- The maintenance items of attention_list(), by kind.
CREATE FUNCTION pg_temp.items(kind text) RETURNS SETOF json LANGUAGE sql AS $$
    SELECT i FROM json_array_elements(sandbox_persist.attention_list()) i WHERE i->>'kind' = kind $$;
-- A finished pg_cron run of the job, started `ago_ms` before now.
CREATE FUNCTION pg_temp.cron_run(status text, message text, ago_ms bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO cron.job_run_details (jobid, job_pid, database, username, command, status,
                                      return_message, start_time, end_time)
    SELECT jobid, 0, database, username, command, status, message,
           clock_timestamp() - make_interval(secs => ago_ms / 1000.0),
           clock_timestamp() - make_interval(secs => ago_ms / 1000.0)
      FROM cron.job WHERE jobname = 'sandbox_persist_maintenance' $$;

------------------------------------------------------------------------------
-- Nothing scheduled.
------------------------------------------------------------------------------
SELECT is(pg_temp.h()->>'ok', 'true', 'M27.1 nothing scheduled, never run: ok');
SELECT is(pg_temp.h()->>'scheduled', 'false', 'M27.2 (not scheduled)');
SELECT is((SELECT count(*) FROM json_array_elements(sandbox_persist.attention_list())), 0::bigint,
    'M27.3 and attention_list() is empty');

------------------------------------------------------------------------------
-- Scheduled: the record, the derived bound.
------------------------------------------------------------------------------
SELECT sandbox_persist.schedule_maintenance() AS job \gset
SELECT is((SELECT job_id FROM sandbox_persist.maintenance_schedule), :job::bigint,
    'M28.1 schedule_maintenance() records the pg_cron job it created');
SELECT is((SELECT username FROM sandbox_persist.maintenance_schedule), current_user::text,
    'M28.2 with the role the job runs as');
SELECT ok((pg_temp.h()->>'scheduled')::boolean AND (pg_temp.h()->>'jobId')::bigint = :job
          AND pg_temp.h()->>'schedule' = '* * * * *',
    'M28.3 maintenance_health(): scheduled, the job id and its schedule');
SELECT is((pg_temp.h()->>'boundMs')::bigint, 180000::bigint,
    'M27.4 every minute: the bound is 2 x 1 min + 1 min');
SELECT is(pg_temp.h()->>'boundFrom', 'schedule', 'M27.5 (derived from the schedule)');
SELECT is(pg_temp.h()->>'ok', 'true', 'M27.6 just scheduled, no run yet, within the bound: ok');

-- The bound follows the job's schedule as pg_cron holds it.
CREATE FUNCTION pg_temp.bound_for(schedule text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cron.alter_job((SELECT job_id FROM sandbox_persist.maintenance_schedule), schedule => schedule);
    RETURN (pg_temp.h()->>'boundMs')::bigint;
END $$;
SELECT is(pg_temp.bound_for('*/5 * * * *'), (2 * 5 + 1) * 60000::bigint, 'M27.7 */5: 11 min');
SELECT is(pg_temp.bound_for('0 * * * *'), (2 * 60 + 1) * 60000::bigint, 'M27.8 hourly: 2 h 1 min');
SELECT is(pg_temp.bound_for('15,45 3 * * *'), (2 * (24 * 60 - 30) + 1) * 60000::bigint,
    'M27.9 03:15 and 03:45 daily: the longest gap is 23 h 30 min');
SELECT is(pg_temp.bound_for('0 3 * * 1-5'), (2 * 3 * 24 * 60 + 1) * 60000::bigint,
    'M27.10 weekdays at 03:00: the longest gap is Friday to Monday, 3 days');
SELECT is(pg_temp.bound_for('0 0 1 * *'), (2 * 31 * 24 * 60 + 1) * 60000::bigint,
    'M27.11 monthly: the longest gap is 31 days');
SELECT is(pg_temp.bound_for('@daily'), (2 * 24 * 60 + 1) * 60000::bigint, 'M27.12 @daily: 2 days 1 min');
SELECT is(pg_temp.bound_for('* * * * *'), 180000::bigint, 'M27.13 (back to every minute)');

------------------------------------------------------------------------------
-- M26: failing runs.
------------------------------------------------------------------------------
SELECT pg_temp.cron_run('failed', 'connection failed', 1000);
SELECT is(pg_temp.h()->>'failing', 'true',
    'M26.1 pg_cron''s last run failed and maintain() never completed: failing');
SELECT is(pg_temp.h()->>'lastFailureMessage', 'connection failed', 'M26.2 with pg_cron''s message');
SELECT is(pg_temp.h()->>'ok', 'false', 'M26.3 (not ok)');
SELECT matches(pg_temp.h()->>'problem', 'connection failed.*cron\.host',
    'M26.4 the problem sentence names the failure and where to look');
SELECT is((SELECT count(*) FROM pg_temp.items('maintenance_failing')), 1::bigint,
    'M26.5 attention_list() holds one maintenance_failing item');
SELECT is((SELECT i->'detail'->>'lastFailureMessage' FROM pg_temp.items('maintenance_failing') i),
    'connection failed', 'M26.6 its detail carries the failure message');
SELECT ok((SELECT (i->>'firstSeen')::bigint <= (i->>'lastSeen')::bigint AND i->>'runId' IS NULL
             FROM pg_temp.items('maintenance_failing') i),
    'M26.7 firstSeen (the first failure) <= lastSeen, about no run');
SELECT is((SELECT row(maintenance_scheduled, maintenance_failing, maintenance_last_failure, attention_items)::text
             FROM sandbox_persist.overview),
    '(t,t,"connection failed",1)', 'M26.8 the overview: scheduled, failing, the message, one attention item');
SELECT pg_temp.cron_run('failed', 'connection failed', 500);
SELECT is((pg_temp.h()->>'failuresSinceSuccess')::int, 2, 'M26.9 failures since pg_cron''s last success are counted');
SELECT ok(sandbox_persist.maintain() IS NOT NULL, 'M26.10 (maintain() completes, by hand)');
SELECT is(pg_temp.h()->>'failing', 'false', 'M26.11 a maintain() completed after the failure: no longer failing');
SELECT is((SELECT count(*) FROM pg_temp.items('maintenance_failing')), 0::bigint, 'M26.12 and the item is gone');
SELECT pg_temp.cron_run('succeeded', '1 row', 0);
SELECT pg_temp.cron_run('failed', 'canceling statement due to lock timeout', 0);
SELECT is(pg_temp.h()->>'failing', 'true', 'M26.13 a later failed run is failing again');
SELECT is((pg_temp.h()->>'failuresSinceSuccess')::int, 1, 'M26.14 (one failure since the success)');
DELETE FROM cron.job_run_details WHERE jobid = :job;

------------------------------------------------------------------------------
-- M27: overdue.
------------------------------------------------------------------------------
UPDATE sandbox_persist.maintenance_schedule SET scheduled_at = pg_temp.now_ms() - 3600000;
UPDATE sandbox_persist.maintenance_state SET last_run_at = pg_temp.now_ms() - 170000;
SELECT is(pg_temp.h()->>'overdue', 'false', 'M27.14 last run 170 s ago, bound 180 s: not overdue');
UPDATE sandbox_persist.maintenance_state SET last_run_at = pg_temp.now_ms() - 190000;
SELECT is(pg_temp.h()->>'overdue', 'true', 'M27.15 last run 190 s ago: overdue');
SELECT ok((SELECT (i->'detail'->>'boundMs')::bigint = 180000 AND (i->>'firstSeen')::bigint <= (i->>'lastSeen')::bigint
             FROM pg_temp.items('maintenance_overdue') i),
    'M27.16 attention_list() holds maintenance_overdue with the bound');
SELECT is((SELECT row(maintenance_overdue, attention_items)::text FROM sandbox_persist.overview), '(t,1)',
    'M27.17 the overview says overdue and counts it');
DELETE FROM sandbox_persist.maintenance_state;
UPDATE sandbox_persist.maintenance_schedule SET scheduled_at = pg_temp.now_ms() - 190000;
SELECT is(pg_temp.h()->>'overdue', 'true', 'M27.18 never run, scheduled 190 s ago: overdue (pg_cron never ran it)');
SET LOCAL sandbox_persist.maintenance_overdue_after = '10min';
SELECT is(row(pg_temp.h()->>'overdue', pg_temp.h()->>'boundMs', pg_temp.h()->>'boundFrom')::text,
    '(false,600000,setting)', 'M27.19 maintenance_overdue_after sets the bound (10 min: not overdue)');

------------------------------------------------------------------------------
-- M28: as whom, and what the record says when pg_cron cannot tell.
------------------------------------------------------------------------------
RESET sandbox_persist.maintenance_overdue_after;
CREATE ROLE sp_health_app;
SELECT sandbox_persist.grant_app_role('sp_health_app');
-- asked as that role (pgTAP's own bookkeeping stays the superuser's)
SET LOCAL ROLE sp_health_app;
SELECT sandbox_persist.maintenance_health() AS app_health \gset
RESET ROLE;
SELECT is(:'app_health'::json->>'cronVisible', 'false', 'M28.4 a role without USAGE on schema cron cannot read pg_cron');
SELECT matches(:'app_health'::json->>'cronNote', 'GRANT USAGE ON SCHEMA cron', 'M28.5 and is told why');
SELECT is(row(:'app_health'::json->>'scheduled', :'app_health'::json->>'overdue')::text, '(true,true)',
    'M28.6 the record still says scheduled, and overdue');
SELECT cron.alter_job(:job, active => false);
SELECT matches(pg_temp.h()->>'cronNote', 'inactive', 'M28.7 an inactive job is named');
SELECT cron.unschedule(:job);
SELECT matches(pg_temp.h()->>'cronNote', 'no longer exists', 'M28.8 a job unscheduled behind our back is named');
UPDATE sandbox_persist.maintenance_schedule SET schedule = 'not a schedule';
SELECT ok(pg_temp.h()->>'boundMs' IS NULL AND pg_temp.h()->>'overdue' = 'false',
    'M27.20 a schedule that cannot be read gives no derived bound (set maintenance_overdue_after)');
SELECT sandbox_persist.schedule_maintenance() AS job2 \gset
SELECT ok(sandbox_persist.unschedule_maintenance(), 'M28.9 (unschedule_maintenance removes the job)');
SELECT is((SELECT count(*) FROM sandbox_persist.maintenance_schedule), 0::bigint, 'M28.10 and forgets the record');
SELECT is(pg_temp.h()->>'scheduled', 'false', 'M28.11 maintenance is no longer expected');

SELECT * FROM finish();
ROLLBACK;
