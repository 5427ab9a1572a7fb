-- sandbox_persist 0.3.0 -> 0.4.0. CREATE EXTENSION runs 0.1.0, the upgrade
-- scripts up to 0.3.0 and then this one; ALTER EXTENSION sandbox_persist
-- UPDATE runs it on a 0.3.0 database (after the earlier scripts on older ones).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

------------------------------------------------------------------------------
-- Maintenance that never runs is reported (issue 20 item 2). A pg_cron job
-- that cannot connect (pg_hba.conf asking a password on 127.0.0.1 while
-- cron.use_background_workers is off) fails every minute in
-- cron.job_run_details, but maintain() never runs, so nothing of ours
-- recorded it: schedule_maintenance() returned the job id, the overview
-- showed maintenance_last_run NULL and attention_list() was empty, and the
-- logs of dead producers were never ended.
--
--   * maintenance_schedule: the one job schedule_maintenance created (id,
--     schedule, role, when), removed by unschedule_maintenance. It is what
--     says that maintenance is expected even to a role pg_cron hides the job
--     from (pg_cron's tables are row-level secured by job owner).
--   * maintenance_health(): judged at each call (maintenance_health.c):
--     "failing" when pg_cron's latest finished run of the job failed and
--     maintain() has not completed since, "overdue" when maintain() has not
--     completed within the bound (sandbox_persist.maintenance_overdue_after,
--     else twice the schedule's longest gap plus one minute). pg_cron's
--     tables are read as the calling role, only when pg_cron is installed
--     here and that role may read them.
--   * attention_list() runs the library's _v4 entry point, which appends the
--     items maintenance_failing and maintenance_overdue to the recorded ones
--     (the previous entry point keeps serving databases not yet updated).
--   * the overview view gains maintenance_scheduled, maintenance_overdue,
--     maintenance_failing, maintenance_last_failure and maintenance_health,
--     and counts those items in attention_items.
--   * schedule_maintenance records the job, unschedule_maintenance forgets it
--     (same signatures, owners, grants and settings).
------------------------------------------------------------------------------
CREATE TABLE maintenance_schedule (
    id           integer PRIMARY KEY CHECK (id = 1),
    job_id       bigint NOT NULL,
    schedule     text NOT NULL,
    username     text NOT NULL,
    scheduled_at bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('maintenance_schedule', '');
COMMENT ON TABLE maintenance_schedule IS
    'A single row: the pg_cron job schedule_maintenance created (job id, schedule, the role it runs as, when), read by maintenance_health() to tell when maintenance is expected but not running.';

CREATE FUNCTION _maintenance_scheduled(job_id bigint, schedule text, username text) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO sandbox_persist.maintenance_schedule (id, job_id, schedule, username, scheduled_at)
    VALUES (1, job_id, schedule, username, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
    ON CONFLICT (id) DO UPDATE SET job_id = EXCLUDED.job_id, schedule = EXCLUDED.schedule,
        username = EXCLUDED.username, scheduled_at = EXCLUDED.scheduled_at
$$;
COMMENT ON FUNCTION _maintenance_scheduled(bigint, text, text) IS
    'Internal, for schedule_maintenance: records the pg_cron job it created, so maintenance_health() knows maintenance is expected.';

CREATE FUNCTION _maintenance_unscheduled() RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    DELETE FROM sandbox_persist.maintenance_schedule
$$;
COMMENT ON FUNCTION _maintenance_unscheduled() IS
    'Internal, for unschedule_maintenance: forgets the recorded pg_cron job, so maintenance is no longer expected.';

CREATE FUNCTION maintenance_health() RETURNS json
    AS 'MODULE_PATHNAME', 'maintenance_health' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION maintenance_health() IS
    'Whether scheduled maintenance really runs: {ok, scheduled, overdue, failing, problem, jobId, schedule, lastRunAt, boundMs, lastFailureAt, lastFailureMessage, ...}; reads pg_cron''s job and run details as the caller when pg_cron is installed here.';

CREATE OR REPLACE FUNCTION attention_list() RETURNS json
    AS 'MODULE_PATHNAME', 'attention_list_v4' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE OR REPLACE FUNCTION schedule_maintenance(schedule text DEFAULT '* * * * *',
                                                max_rows integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    command text := CASE WHEN max_rows IS NULL THEN 'SELECT sandbox_persist.maintain()'
                         ELSE format('SELECT sandbox_persist.maintain(%s)', max_rows) END;
    job bigint;
BEGIN
    IF max_rows < 0 THEN
        RAISE EXCEPTION 'max_rows must not be negative'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A value of %s was given.', max_rows);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %', current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'pg_cron runs jobs only from the database named by cron.database_name.',
                  HINT = format('In that database run: SELECT cron.schedule_in_database(%L, %L, %L, %L);',
                                'sandbox_persist_maintenance', schedule, command, current_database());
    END IF;
    job := cron.schedule('sandbox_persist_maintenance', schedule, command);
    PERFORM sandbox_persist._maintenance_scheduled(job, schedule, current_user::text);
    RETURN job;
END
$$;

CREATE OR REPLACE FUNCTION unschedule_maintenance() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM sandbox_persist._maintenance_unscheduled();
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM cron.job WHERE jobname = 'sandbox_persist_maintenance') THEN
        RETURN false;
    END IF;
    RETURN cron.unschedule('sandbox_persist_maintenance');
END
$$;

CREATE OR REPLACE VIEW overview AS
WITH now_ms AS (
    SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now,
           sandbox_persist._reaper_ttl_ms() AS reaper_ttl
), health AS (
    SELECT sandbox_persist.maintenance_health() AS h
)
SELECT
    (SELECT count(*) FROM runs WHERE status = 'running')                 AS runs_running,
    (SELECT count(*) FROM runs WHERE status = 'interrupted')             AS runs_interrupted,
    (SELECT count(*) FROM runs WHERE status = 'completed')               AS runs_completed,
    (SELECT count(*) FROM runs WHERE status = 'failed')                  AS runs_failed,
    (SELECT count(*) FROM runs WHERE status = 'aborted')                 AS runs_aborted,
    (SELECT count(*) FROM runs WHERE status = 'running' AND detached_since IS NOT NULL)
                                                                          AS runs_detached,
    (SELECT count(*) FROM runs, now_ms
      WHERE status = 'running' AND detached_since IS NOT NULL AND reaper_ttl > 0
        AND detached_since <= now - reaper_ttl)                          AS runs_detached_past_ttl,
    (SELECT count(*) FROM locks, now_ms WHERE expires_at > now)          AS locks_held,
    (SELECT count(*) FROM event_logs WHERE closed_at IS NULL)            AS event_logs_open,
    (SELECT count(*) FROM blobs)                                          AS blobs,
    (SELECT coalesce(sum(size), 0) FROM blobs)                            AS blob_raw_bytes,
    (SELECT coalesce(sum(pg_column_size(c.data)), 0)
       FROM blob_chunks c JOIN blobs b ON b.version = c.version)
      + (SELECT coalesce(sum(pg_column_size(inline_data)), 0) FROM blobs) AS blob_stored_bytes,
    (SELECT count(*) FROM blobs b
      WHERE b.relied_on_at IS NOT NULL
        AND b.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$'
        AND NOT EXISTS (SELECT 1 FROM checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)
        AND NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.blob_key = b.blob_key))
                                                                          AS blobs_awaiting_gc,
    (SELECT count(*) FROM blob_uploads)                                   AS uploads_open,
    (SELECT count(*) FROM attention)
      + (SELECT ((h->>'overdue')::boolean)::int + ((h->>'failing')::boolean)::int FROM health)
                                                                          AS attention_items,
    (SELECT to_timestamp(last_run_at / 1000.0) FROM maintenance_state)    AS maintenance_last_run,
    (SELECT last_summary FROM maintenance_state)                          AS maintenance_last_summary,
    (SELECT (h->>'scheduled')::boolean FROM health)                       AS maintenance_scheduled,
    (SELECT (h->>'overdue')::boolean FROM health)                         AS maintenance_overdue,
    (SELECT (h->>'failing')::boolean FROM health)                         AS maintenance_failing,
    (SELECT h->>'lastFailureMessage' FROM health)                         AS maintenance_last_failure,
    (SELECT h FROM health)                                                AS maintenance_health;
COMMENT ON COLUMN overview.attention_items IS
    'Current watchdog items (see attention_list()): the recorded ones plus maintenance_failing and maintenance_overdue, judged now.';
COMMENT ON COLUMN overview.maintenance_scheduled IS
    'Whether maintenance is scheduled: recorded by schedule_maintenance, or a pg_cron job of that name for this database.';
COMMENT ON COLUMN overview.maintenance_overdue IS
    'True when maintain() has not completed within the bound although maintenance is scheduled (maintenance_health().boundMs).';
COMMENT ON COLUMN overview.maintenance_failing IS
    'True when pg_cron''s latest finished run of the maintenance job failed and maintain() has not completed since.';
COMMENT ON COLUMN overview.maintenance_last_failure IS
    'The message of pg_cron''s latest failed run of the maintenance job (cron.job_run_details), when visible to this role.';
COMMENT ON COLUMN overview.maintenance_health IS
    'The whole maintenance_health() report: schedule, bound, last run, pg_cron''s last runs and what is wrong.';

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
