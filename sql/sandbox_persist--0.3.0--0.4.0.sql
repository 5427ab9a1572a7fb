-- sandbox_persist 0.3.0 -> 0.4.0. ALTER EXTENSION sandbox_persist UPDATE runs
-- it on a 0.3.0 database (after the earlier scripts on older ones); a fresh
-- install runs the full script of its version, built from
-- sql/sandbox_persist.sql, instead.
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

------------------------------------------------------------------------------
-- Monitoring (issue 19, item 4): metrics() for Prometheus.
--
-- What: metrics(metric_names) returns one row per Prometheus sample (name with
-- its unit, gauge or counter, labels as a JSON object, value, help text);
-- monitoring/postgres_exporter.yml maps them onto prometheus-postgres-exporter
-- and monitoring/alerts.yml alerts on them (docs/monitoring.md). To make the
-- values agree with the overview view by construction, metrics() reads
-- overview and nothing else for what overview shows; overview gains the
-- columns the metrics need (appended: its existing columns are unchanged):
--   * checkpoint_leases_held: checkpoint writer leases not yet expired;
--   * event_logs_producer_lost: kept logs maintenance ended because their
--     producer was gone (last chunk RUN_ERROR with code PRODUCER_LOST, A10);
--   * checkpoint_writer_takeovers, lock_takeovers: a durable count of the
--     acquires that took over an expired lease (lease_takeovers, written by
--     the C acquire functions from 0.4.0 on);
--   * maintenance_last_duration_ms: maintain() now records how long its last
--     round took (maintenance_state.last_duration_ms);
--   * gc_backlog: what maintain() would collect now, action by action
--     (_maintenance_backlog(), whose conditions are the actions' own).
-- Table sizes are read from the catalog (every table pg_dump keeps).
--
-- Who may read them: metrics() is SECURITY DEFINER and returns aggregates
-- only. grant_monitor_role(role) gives a monitoring role (the exporter's)
-- USAGE on the schema and EXECUTE on metrics() and nothing else. It is not
-- a store function: grant_app_role leaves it out (an app server needs none of
-- it, and an app role granted before an upgrade gets nothing new by itself
-- anyway). The overview view stays superuser-only, as before.
------------------------------------------------------------------------------
CREATE TABLE lease_takeovers (
    kind      text COLLATE "C" NOT NULL,   -- checkpoint_writer | lock (src/contract.h)
    slot      smallint NOT NULL,           -- backend pid mod 16: spreads concurrent counts
    takeovers bigint NOT NULL,
    PRIMARY KEY (kind, slot)
);
SELECT pg_catalog.pg_extension_config_dump('lease_takeovers', '');
COMMENT ON TABLE lease_takeovers IS
    'Durable count of lease takeovers (an acquire granted over an expired checkpoint writer lease or lock of another owner), by kind, spread over per-backend slots; summed by the overview view.';

ALTER TABLE maintenance_state ADD COLUMN last_duration_ms bigint;
COMMENT ON COLUMN maintenance_state.last_duration_ms IS
    'Wall-clock milliseconds the last maintain() round took; NULL until a round runs under 0.4.0.';

CREATE FUNCTION _maintenance_backlog(now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', '_maintenance_backlog' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION _maintenance_backlog(bigint) IS
    'Internal, for the overview view: how many rows each collecting action of maintain() (A1 blobs, A2 uploads, A3 locks, A5 event logs, A6 runs, A11 conversation blocks) would delete at now_ms under the current settings, without the max_rows bound, as json {blobs, uploads, locks, eventLogs, runs, conversationBlocks}. Reads only.';

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
    (SELECT count(*) FROM checkpoint_threads, now_ms
      WHERE owner_token IS NOT NULL AND lease_expires_at > now)          AS checkpoint_leases_held,
    (SELECT count(*) FROM event_logs l
       JOIN event_log_entries e ON e.log_id = l.log_id AND e.seq = l.tail_seq
      WHERE l.closed_at IS NOT NULL
        AND e.chunk->>'type' = 'RUN_ERROR' AND e.chunk->>'code' = 'PRODUCER_LOST')
                                                                          AS event_logs_producer_lost,
    (SELECT coalesce(sum(takeovers), 0) FROM lease_takeovers WHERE kind = 'checkpoint_writer')
                                                                          AS checkpoint_writer_takeovers,
    (SELECT coalesce(sum(takeovers), 0) FROM lease_takeovers WHERE kind = 'lock')
                                                                          AS lock_takeovers,
    (SELECT last_duration_ms FROM maintenance_state)                      AS maintenance_last_duration_ms,
    sandbox_persist._maintenance_backlog()                                AS gc_backlog,
    (SELECT (h->>'scheduled')::boolean FROM health)                       AS maintenance_scheduled,
    (SELECT (h->>'overdue')::boolean FROM health)                         AS maintenance_overdue,
    (SELECT (h->>'failing')::boolean FROM health)                         AS maintenance_failing,
    (SELECT h->>'lastFailureMessage' FROM health)                         AS maintenance_last_failure,
    (SELECT h FROM health)                                                AS maintenance_health;
COMMENT ON COLUMN overview.checkpoint_leases_held IS 'Checkpoint writer leases not yet expired.';
COMMENT ON COLUMN overview.event_logs_producer_lost IS 'Kept event logs that maintenance ended because their producer was gone (their last chunk is the RUN_ERROR with code PRODUCER_LOST).';
COMMENT ON COLUMN overview.checkpoint_writer_takeovers IS 'Checkpoint writer acquires that took over an expired lease of another owner, ever (since 0.4.0).';
COMMENT ON COLUMN overview.lock_takeovers IS 'Lock acquires that took over an expired lock of another owner, ever (since 0.4.0).';
COMMENT ON COLUMN overview.maintenance_last_duration_ms IS 'How long the last maintain() round took, in wall-clock milliseconds; NULL if none has run since 0.4.0.';
COMMENT ON COLUMN overview.gc_backlog IS 'What maintain() would collect now, by action: json {blobs, uploads, locks, eventLogs, runs, conversationBlocks} (see _maintenance_backlog()).';
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
COMMENT ON VIEW overview IS
    'One row for operators: runs by status, detached runs, held locks and leases, lease takeovers, open and producer-lost logs, blob counts and bytes, blobs awaiting collection, the GC backlog, open uploads, watchdog items, the last maintenance run and whether scheduled maintenance really runs (maintenance_health()).';

CREATE FUNCTION metrics(metric_names text[] DEFAULT NULL)
RETURNS TABLE (name text, type text, labels json, value double precision, help text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    -- Each branch is one metric family; its WHERE clause names no column, so
    -- a family not asked for is never computed (a gating one-time filter).
    SELECT 'sandbox_persist_runs', 'gauge', json_build_object('status', v.status), v.n::float8,
           'Runs by status.'
      FROM sandbox_persist.overview o,
           LATERAL (VALUES ('running', o.runs_running), ('interrupted', o.runs_interrupted),
                           ('completed', o.runs_completed), ('failed', o.runs_failed),
                           ('aborted', o.runs_aborted)) v(status, n)
     WHERE metric_names IS NULL OR 'sandbox_persist_runs' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_runs_detached', 'gauge', '{}', o.runs_detached::float8,
           'Running runs whose client went away (detachedSince set).'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_runs_detached' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_runs_detached_past_ttl', 'gauge', '{}', o.runs_detached_past_ttl::float8,
           'Detached running runs older than sandbox_persist.reaper_ttl (0 while it is 0): the reaper is behind.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_runs_detached_past_ttl' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_checkpoint_leases_held', 'gauge', '{}', o.checkpoint_leases_held::float8,
           'Checkpoint writer leases not yet expired.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_checkpoint_leases_held' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_locks_held', 'gauge', '{}', o.locks_held::float8,
           'Durable locks not yet expired.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_locks_held' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_lease_takeovers_total', 'counter', json_build_object('kind', v.kind), v.n::float8,
           'Acquires that took over an expired checkpoint writer lease or lock of another owner.'
      FROM sandbox_persist.overview o,
           LATERAL (VALUES ('checkpoint_writer', o.checkpoint_writer_takeovers),
                           ('lock', o.lock_takeovers)) v(kind, n)
     WHERE metric_names IS NULL OR 'sandbox_persist_lease_takeovers_total' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_event_logs_open', 'gauge', '{}', o.event_logs_open::float8,
           'Durable event logs not closed yet.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_event_logs_open' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_event_logs_producer_lost', 'gauge', '{}', o.event_logs_producer_lost::float8,
           'Kept event logs that maintenance ended with PRODUCER_LOST because their producer was gone.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_event_logs_producer_lost' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_blobs', 'gauge', '{}', o.blobs::float8,
           'Stored blob objects.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_blobs' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_blob_raw_bytes', 'gauge', '{}', o.blob_raw_bytes::float8,
           'Total size of the blob objects, uncompressed, in bytes.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_blob_raw_bytes' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_blob_stored_bytes', 'gauge', '{}', o.blob_stored_bytes::float8,
           'Bytes the blob contents take in storage after compression.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_blob_stored_bytes' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_blobs_awaiting_gc', 'gauge', '{}', o.blobs_awaiting_gc::float8,
           'Content-addressed blobs nothing references; collected once past sandbox_persist.blob_gc_grace.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_blobs_awaiting_gc' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_uploads_open', 'gauge', '{}', o.uploads_open::float8,
           'Streamed uploads begun and not yet committed or aborted.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_uploads_open' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_gc_backlog_rows', 'gauge', json_build_object('action', b.key), b.value::float8,
           'Rows maintain() would delete now, by action (not bounded by max_rows).'
      FROM sandbox_persist.overview o, json_each_text(o.gc_backlog) b
     WHERE metric_names IS NULL OR 'sandbox_persist_gc_backlog_rows' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_attention_items', 'gauge', '{}', o.attention_items::float8,
           'Current watchdog items (attention_list()).'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_attention_items' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_maintenance_last_run_age_seconds', 'gauge', '{}',
           coalesce(extract(epoch FROM clock_timestamp() - o.maintenance_last_run)::float8,
                    'Infinity'::float8),
           'Seconds since maintain() last ran; +Inf if it never ran.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_maintenance_last_run_age_seconds' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_maintenance_last_duration_seconds', 'gauge', '{}',
           coalesce(o.maintenance_last_duration_ms / 1000.0, 'NaN')::float8,
           'How long the last maintain() round took, in seconds; NaN if unknown.'
      FROM sandbox_persist.overview o
     WHERE metric_names IS NULL OR 'sandbox_persist_maintenance_last_duration_seconds' = ANY (metric_names)
    UNION ALL
    SELECT 'sandbox_persist_table_size_bytes', 'gauge', json_build_object('table', c.relname::text),
           pg_catalog.pg_total_relation_size(c.oid)::float8,
           'On-disk size of each table of the extension with its indexes and TOAST, in bytes.'
      FROM pg_catalog.pg_extension e, unnest(e.extconfig) AS t(oid)
      JOIN pg_catalog.pg_class c ON c.oid = t.oid AND c.relkind = 'r'
     WHERE e.extname = 'sandbox_persist'
       AND (metric_names IS NULL OR 'sandbox_persist_table_size_bytes' = ANY (metric_names))
$$;
COMMENT ON FUNCTION metrics(text[]) IS
    'Monitoring: one row per Prometheus sample (name with its unit, type gauge or counter, labels as a json object, value, help), read from the overview view so the two agree; metric_names limits the families computed (NULL: all). See docs/monitoring.md.';

CREATE FUNCTION grant_monitor_role(monitor_role regrole) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF monitor_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE oid = monitor_role) THEN
        RAISE EXCEPTION 'role % does not exist', coalesce(monitor_role::oid::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'grant_monitor_role gives an existing role the metrics.';
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA sandbox_persist TO %s', monitor_role);
    EXECUTE format('GRANT EXECUTE ON FUNCTION sandbox_persist.metrics(text[]) TO %s', monitor_role);
END
$$;
COMMENT ON FUNCTION grant_monitor_role(regrole) IS
    'Administration: grants monitor_role (for instance the Prometheus exporter''s login role) USAGE on the schema and EXECUTE on metrics(), nothing else; revoke_app_role withdraws it. Superuser only.';

-- grant_monitor_role is administration and metrics() is monitoring:
-- grant_app_role gives neither.
CREATE OR REPLACE FUNCTION _app_functions() RETURNS SETOF regprocedure
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT p.oid::regprocedure
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_depend d ON d.objid = p.oid AND d.classid = 'pg_catalog.pg_proc'::regclass
      JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
     WHERE e.extname = 'sandbox_persist'
       AND p.proname !~ '^_'
       AND p.proname NOT IN ('grant_app_role', 'revoke_app_role', 'grant_monitor_role',
                             'schedule_maintenance', 'unschedule_maintenance', 'metrics')
$$;

-- Failover safety (issue 19). An asynchronous standby promoted after a crash
-- of its primary can lack commits the primary acknowledged. Two promises are
-- kept across that:
-- * Fences never repeat. They now carry the timeline they were granted on
--   (fence = (timeline - 1) * 2^40 + counter, see docs/contract/failover.md
--   §1); that needs no schema change, only the library. Nothing is
--   rewritten here: a fence granted before the upgrade is a plain counter
--   and every later one is at least as large plus one.
-- * Event-log offsets are vouched for. Every entry gets a running digest (the
--   XOR of a 64-bit hash of (seq, chunk text) over the entries up to it), the
--   log row keeps the tail's, and event_log_read_verified refuses a resume
--   token (seq + digest) past the tail or naming other content (SP405)
--   instead of continuing a different stream. The digests of existing
--   entries are computed here, by the same hash the library uses.
ALTER TABLE event_log_entries ADD COLUMN digest bigint;
UPDATE event_log_entries e SET digest = d.digest
  FROM (SELECT h.log_id, h.seq,
               pg_catalog.bit_xor(h.h) OVER (PARTITION BY h.log_id ORDER BY h.seq) AS digest
          FROM (SELECT x.log_id, x.seq,
                       ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(
                           pg_catalog.int8send(x.seq) || pg_catalog.convert_to(x.chunk::text, 'UTF8')),
                           1, 8), 'hex'))::pg_catalog.bit(64)::bigint AS h
                  FROM event_log_entries x) h) d
 WHERE e.log_id = d.log_id AND e.seq = d.seq;
ALTER TABLE event_log_entries ALTER COLUMN digest SET NOT NULL;
ALTER TABLE event_logs ADD COLUMN tail_digest bigint NOT NULL DEFAULT 0;
UPDATE event_logs l SET tail_digest = e.digest
  FROM event_log_entries e
 WHERE e.log_id = l.log_id AND e.seq = l.tail_seq;
COMMENT ON COLUMN event_log_entries.digest IS
    'Running digest of the log up to this entry: XOR over entries 1..seq of the first 8 bytes of sha256(int8send(seq) || chunk text); the second half of a resume token.';
COMMENT ON COLUMN event_logs.tail_digest IS
    'The running digest of the entry at tail_seq (0 for an empty log), continued by the next append.';

CREATE FUNCTION event_log_read_verified(run_id text, after_seq bigint, after_digest text,
                                        max_rows integer DEFAULT 1000) RETURNS json
    AS 'MODULE_PATHNAME', 'event_log_read_verified' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION event_log_read_verified(text, bigint, text, integer) IS
    'Durable event log read of a resume token: like event_log_read, with tailDigest and each entry''s digest; with after_digest, an offset past the tail or whose entry has another digest is SP405 (EVENT_LOG_OFFSET_DIVERGED), never a different stream.';
-- A thread moved to another shard (_thread_import) takes its event logs
-- along: their digests are computed there from (seq, chunk), so they equal
-- the source's and the readers' tokens stay valid. The body is 0.3.0's but
-- for the two statements after "the running digests".
CREATE OR REPLACE FUNCTION _thread_import(thread_id text, from_shard integer, doc json) RETURNS json
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t constant text := thread_id;
    m sandbox_persist.thread_moves%ROWTYPE;
    clash text;
    missing text;
BEGIN
    IF doc IS NULL OR doc->>'threadId' IS DISTINCT FROM t OR from_shard IS NULL THEN
        RAISE EXCEPTION 'invalid thread import'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The document must be _thread_export(%L) of the source shard.', t);
    END IF;
    IF octet_length(t) > 1024 THEN   -- the identifier limit of every store
        RAISE EXCEPTION 'thread_id is too long'
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = format('It has %s UTF-8 bytes; the limit is 1024.', octet_length(t));
    END IF;
    -- The move lock (class 5314, per thread, exclusively) serialises
    -- two imports of one thread and lets _thread_move_imported wait for an
    -- import still in flight before it answers.
    PERFORM pg_catalog.pg_advisory_xact_lock(5314, pg_catalog.hashtext(t));
    SELECT * INTO m FROM sandbox_persist.thread_moves x WHERE x.thread_id = t FOR UPDATE;
    IF FOUND AND m.state = 'imported' THEN
        RETURN json_build_object('imported', false, 'alreadyImported', true);
    ELSIF FOUND AND m.state <> 'moved' THEN
        PERFORM sandbox_persist._thread_move_refuse(t, 'it is moving out of this shard');
    END IF;
    SELECT string_agg(DISTINCT source, ', ') INTO clash
      FROM sandbox_persist.thread_owned_state s WHERE s.thread_id = t;
    IF clash IS NULL THEN
        SELECT string_agg(what, ', ') INTO clash FROM (
            SELECT 'checkpoint ' || c.checkpoint_id AS what FROM sandbox_persist.checkpoints c
             WHERE c.checkpoint_id IN (SELECT x->>'checkpointId' FROM json_array_elements(doc->'checkpoints') x)
            UNION ALL SELECT 'run ' || r.run_id FROM sandbox_persist.runs r
             WHERE r.run_id IN (SELECT x->>'runId' FROM json_array_elements(doc->'runs') x)
            UNION ALL SELECT 'interrupt ' || i.interrupt_id FROM sandbox_persist.interrupts i
             WHERE i.interrupt_id IN (SELECT x->>'interruptId' FROM json_array_elements(doc->'interrupts') x)
            UNION ALL SELECT 'generation run ' || g.run_id FROM sandbox_persist.generation_runs g
             WHERE g.run_id IN (SELECT x->>'runId' FROM json_array_elements(doc->'generationRuns') x)
            UNION ALL SELECT 'artifact ' || a.artifact_id FROM sandbox_persist.artifacts a
             WHERE a.artifact_id IN (SELECT x->>'artifactId' FROM json_array_elements(doc->'artifacts') x)
            UNION ALL SELECT 'event log ' || l.run_id FROM sandbox_persist.event_logs l
             WHERE l.run_id IN (SELECT x->>'runId' FROM json_array_elements(doc->'eventLogs') x)) c;
        IF clash IS NOT NULL THEN
            clash := 'ids already used here: ' || clash;
        END IF;
    ELSE
        clash := 'state already here: ' || clash;
    END IF;
    IF clash IS NOT NULL THEN
        PERFORM sandbox_persist._thread_move_refuse(t, clash);
    END IF;
    -- every blob the source holds must be here, held until commit (as append)
    PERFORM 1 FROM sandbox_persist.blobs b
     WHERE b.blob_key IN (SELECT json_array_elements_text(doc->'blobKeys'))
     ORDER BY b.blob_key FOR KEY SHARE;
    SELECT string_agg(k, ', ' ORDER BY k) INTO missing
      FROM json_array_elements_text(doc->'blobKeys') k
     WHERE k NOT IN (SELECT json_array_elements_text(doc->'absentBlobKeys'))
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b WHERE b.blob_key = k);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'thread import blob missing on the destination shard'
            USING ERRCODE = 'SP015',
                  DETAIL = format('Thread "%s" references blobs this shard does not hold: %s.', t, missing),
                  HINT = 'Copy the missing blobs to this shard first, then import the thread again.';
    END IF;

    -- a tombstone of an earlier move out of this shard gives way
    DELETE FROM sandbox_persist.thread_moves x WHERE x.thread_id = t;
    IF doc->'thread' IS NOT NULL AND json_typeof(doc->'thread') = 'object' THEN
        INSERT INTO sandbox_persist.checkpoint_threads AS x
               (thread_id, fence, owner_token, lease_expires_at, head_id, conv_log_end)
        SELECT t, (doc->'thread'->>'fence')::bigint, (doc->'thread'->>'ownerToken')::uuid,
               (doc->'thread'->>'leaseExpiresAt')::bigint, doc->'thread'->>'headId',
               coalesce((doc->'thread'->>'convLogEnd')::bigint, 0)
        ON CONFLICT ON CONSTRAINT checkpoint_threads_pkey DO UPDATE
           SET fence = greatest(x.fence, excluded.fence), owner_token = excluded.owner_token,
               lease_expires_at = excluded.lease_expires_at, head_id = excluded.head_id,
               conv_log_end = excluded.conv_log_end;
    END IF;
    IF doc->'transcript' IS NOT NULL AND json_typeof(doc->'transcript') = 'object' THEN
        INSERT INTO sandbox_persist.messages (thread_id, transcript, updated_at)
        VALUES (t, (doc->'transcript'->>'transcript')::json, (doc->'transcript'->>'updatedAt')::bigint);
    END IF;
    -- conversation messages get new ids here; the log is renumbered through
    -- each message's hash (unique per thread) and keeps its positions, so the
    -- checkpoints' ranges are copied as they are
    INSERT INTO sandbox_persist.conversation_messages (thread_id, hash, body)
    SELECT t, decode(x.hash, 'hex'), x.body
      FROM json_to_recordset(doc->'conversationMessages') AS x("messageId" bigint, hash text, body text)
     ORDER BY x."messageId";
    WITH im AS MATERIALIZED (
        SELECT x."messageId" AS old_id, cm.message_id AS new_id
          FROM json_to_recordset(doc->'conversationMessages') AS x("messageId" bigint, hash text)
          JOIN sandbox_persist.conversation_messages cm
            ON cm.thread_id = t AND cm.hash = decode(x.hash, 'hex')
    )
    INSERT INTO sandbox_persist.conversation_log (thread_id, pos, message_id)
    SELECT t, (l.v->>0)::bigint, im.new_id
      FROM json_array_elements(doc->'conversationLog') AS l(v)
      JOIN im ON im.old_id = (l.v->>1)::bigint;
    INSERT INTO sandbox_persist.conversation_garbage (thread_id, block)
    SELECT t, g::int8range FROM json_array_elements_text(doc->'conversationGarbage') AS g;
    INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at, reason,
                                             label, source_run_id, files, artifacts,
                                             conv_ranges, conv_block, conv_len, conv_digest)
    SELECT x."checkpointId", t, x."parentId", x."createdAt", x.reason, x.label, x."sourceRunId",
           x.files::json, x.artifacts::json, x."convRanges"::int8multirange,
           x."convBlock"::int8range, x."convLen", decode(x."convDigest", 'hex')
      FROM json_array_elements(doc->'checkpoints') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("checkpointId" text,
           "parentId" text, "createdAt" float8, reason text, label text, "sourceRunId" text,
           files text, artifacts text, "convRanges" text, "convBlock" text, "convLen" integer,
           "convDigest" text)
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.checkpoint_blob_refs (checkpoint_id, blob_key)
    SELECT x."checkpointId", x."blobKey"
      FROM json_to_recordset(doc->'references') AS x("checkpointId" text, "blobKey" text);
    INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, finished_at, error,
                                      usage, sandbox_key, detached_since, cancel_requested,
                                      driver_epoch, changed_at, status_changed_at)
    SELECT x."runId", t, x.status, x."startedAt", x."finishedAt", x.error::json, x.usage::json,
           x."sandboxKey", x."detachedSince", x."cancelRequested", x."driverEpoch", x."changedAt",
           coalesce(x."statusChangedAt", x."changedAt")
      FROM json_array_elements(doc->'runs') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("runId" text, status text,
           "startedAt" bigint, "finishedAt" bigint, error text, usage text, "sandboxKey" text,
           "detachedSince" bigint, "cancelRequested" boolean, "driverEpoch" bigint,
           "changedAt" bigint, "statusChangedAt" bigint)
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.interrupts (interrupt_id, run_id, thread_id, status, requested_at,
                                            resolved_at, payload, response)
    SELECT x."interruptId", x."runId", t, x.status, x."requestedAt", x."resolvedAt",
           x.payload::json, x.response::json
      FROM json_array_elements(doc->'interrupts') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("interruptId" text,
           "runId" text, status text, "requestedAt" bigint, "resolvedAt" bigint, payload text,
           response text)
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.generation_runs (run_id, thread_id, activity, provider, model,
                                                 status, started_at, finished_at, error, result,
                                                 artifacts, usage)
    SELECT x."runId", t, x.activity, x.provider, x.model, x.status, x."startedAt", x."finishedAt",
           x.error::json, x.result::json, x.artifacts::json, x.usage::json
      FROM json_array_elements(doc->'generationRuns') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("runId" text,
           activity text, provider text, model text, status text, "startedAt" bigint,
           "finishedAt" bigint, error text, result text, artifacts text, usage text)
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.artifacts (artifact_id, run_id, thread_id, blob_key, name,
                                           mime_type, size, source_url, created_at)
    SELECT x."artifactId", x."runId", t, x."blobKey", x.name, x."mimeType", x.size, x."sourceUrl",
           x."createdAt"
      FROM json_to_recordset(doc->'artifacts') AS x("artifactId" text, "runId" text,
           "blobKey" text, name text, "mimeType" text, size bigint, "sourceUrl" text,
           "createdAt" float8);
    -- event logs get new log ids here; entries and producers follow by run id
    INSERT INTO sandbox_persist.event_logs (run_id, tail_seq, created_at, last_append_at, closed_at,
                                            appends_after_close)
    SELECT x."runId", x."tailSeq", x."createdAt", x."lastAppendAt", x."closedAt", x."appendsAfterClose"
      FROM json_array_elements(doc->'eventLogs') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("runId" text, "tailSeq" bigint, "createdAt" bigint,
                                            "lastAppendAt" bigint, "closedAt" bigint,
                                            "appendsAfterClose" bigint)
     ORDER BY e.ord;
    -- the running digests follow from (seq, chunk) alone: the same as on the source
    INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk, digest)
    SELECT h.log_id, h.seq, h.chunk::json,
           pg_catalog.bit_xor(h.h) OVER (PARTITION BY h.log_id ORDER BY h.seq)
      FROM (SELECT l.log_id, (en->>0)::bigint AS seq, en->>1 AS chunk,
                   ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(
                       pg_catalog.int8send((en->>0)::bigint) || pg_catalog.convert_to(en->>1, 'UTF8')),
                       1, 8), 'hex'))::pg_catalog.bit(64)::bigint AS h
              FROM json_array_elements(doc->'eventLogs') AS e(v)
              JOIN sandbox_persist.event_logs l ON l.run_id = e.v->>'runId',
                   LATERAL json_array_elements(e.v->'entries') AS en) h;
    UPDATE sandbox_persist.event_logs l SET tail_digest = x.digest
      FROM sandbox_persist.event_log_entries x
     WHERE x.log_id = l.log_id AND x.seq = l.tail_seq
       AND l.run_id IN (SELECT e.v->>'runId' FROM json_array_elements(doc->'eventLogs') AS e(v));
    INSERT INTO sandbox_persist.event_log_producers (log_id, producer_id, producer_seq, first_seq,
                                                     chunk_count)
    SELECT l.log_id, (p->>0)::uuid, (p->>1)::bigint, (p->>2)::bigint, (p->>3)::integer
      FROM json_array_elements(doc->'eventLogs') AS e(v)
      JOIN sandbox_persist.event_logs l ON l.run_id = e.v->>'runId',
           LATERAL json_array_elements(e.v->'producers') AS p;
    INSERT INTO sandbox_persist.thread_moves VALUES
        (t, 'imported', from_shard, (extract(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint);
    RETURN json_build_object('imported', true, 'alreadyImported', false);
END
$$;
COMMENT ON FUNCTION event_log_append(text, json, json) IS
    'Durable event log append: adds the chunks array to the log of run_id; options {producerId, producerSeq, fenceEpoch?, withDigests?} make it idempotent and fenced (SP403, SP404). Returns the sequence numbers given, or [{seq, digest}] with withDigests.';

-- * Run-claim epochs carry the timeline (docs/contract/failover.md §1,
--   cases T23, T24): run_claim sets driverEpoch to
--   max(driverEpoch + 1, (timeline - 1) * 2^40 + 1), like a writer fence,
--   so an epoch claimed in a window an asynchronous failover lost is never
--   claimed again. Only the library and this description change.
COMMENT ON FUNCTION run_claim(text) IS
    'Claim step of withRunClaim: raises driverEpoch of an unfinished run to max(driverEpoch + 1, (timeline - 1) * 2^40 + 1) and returns {outcome: claimed, epoch, threadId}, or {outcome: unknown | terminal} with nothing changed. Call it under the run-driver:<runId> lock.';

------------------------------------------------------------------------------
-- Stable C symbols (issue 21, item 2; docs/architecture.md, "Stable C
-- symbols"). 0.3.0 pointed eight functions at *_v3 symbols, the C code
-- keeping the 0.1.0-0.2.0 layout behind the original names. The library now
-- serves only the current layout, under the names of the SQL functions, and
-- refuses an older schema (55000, "Run ALTER EXTENSION sandbox_persist
-- UPDATE"); the *_v3 symbols stay in src/released_symbols.c because the
-- 0.2.0--0.3.0 script names them. Every other attribute is unchanged, and so
-- are owners, grants and comments (CREATE OR REPLACE keeps them).
------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION sandbox_persist.blob_get(blob_key text, range_offset bigint DEFAULT NULL::bigint, range_length bigint DEFAULT NULL::bigint) RETURNS TABLE(record json, body bytea)
    LANGUAGE c STABLE SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_get';

CREATE OR REPLACE FUNCTION sandbox_persist.blob_put(blob_key text, body bytea, options json DEFAULT NULL::json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_put';

CREATE OR REPLACE FUNCTION sandbox_persist.blob_upload_commit(upload_id text, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'blob_upload_commit';

CREATE OR REPLACE FUNCTION sandbox_persist.checkpoint_append(input json, conversation json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_append';

CREATE OR REPLACE FUNCTION sandbox_persist.checkpoint_delete_head(input json, now_ms bigint DEFAULT NULL::bigint) RETURNS void
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_delete_head';

CREATE OR REPLACE FUNCTION sandbox_persist.checkpoint_fork_from_checkpoint(input json, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_fork_from_checkpoint';

CREATE OR REPLACE FUNCTION sandbox_persist.checkpoint_get(checkpoint_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_get';

CREATE OR REPLACE FUNCTION sandbox_persist.checkpoint_list(thread_id text) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'checkpoint_list';

------------------------------------------------------------------------------
-- Table comments that 0.3.0 left describing the 0.2.0 layout (issue 21,
-- item 8): checkpoints no longer hold message-id arrays, the conversation
-- log names the messages.
------------------------------------------------------------------------------
COMMENT ON TABLE conversation_messages IS
    'Each distinct conversation message of a checkpoint thread, stored once and keyed by the SHA-256 of its exact text; the thread''s conversation log names these rows by id.';
COMMENT ON TABLE checkpoints IS
    'Sandbox checkpoints: parent link, reason, label, canonical file entries and artifacts, and the conversation they captured as ranges of their thread''s conversation log, with its length and digest.';


------------------------------------------------------------------------------
-- The SQLSTATE is the key (issue 21 item 3). A class-SP error's DETAIL no
-- longer starts with its code name: the SQLSTATE names the code, through the
-- one error table of src/errors.h, which error_codes() shows in SQL (and
-- scripts/gen_error_codes.sh writes into the Node adapter). The error's HINT,
-- from the same table, says what the caller can do. _thread_import above
-- raises SP015 this way.
------------------------------------------------------------------------------
CREATE FUNCTION error_codes() RETURNS json
    AS 'MODULE_PATHNAME', 'error_codes' LANGUAGE C IMMUTABLE PARALLEL SAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION error_codes() IS
    'The error table of src/errors.h: a json array of {sqlstate, codeName, hint}, one entry per class-SP SQLSTATE with its contract code name and the hint its errors carry (null when only the input can be fixed).';

-- Delta appends (issue 22, item 1). checkpoint_append_delta takes only the
-- messages after the parent's conversation, with a claim about that prefix
-- (its length and digest); the claim is checked against the parent's stored
-- conv_len and conv_digest and a false one is SP016
-- (SANDBOX_SNAPSHOT_PREFIX_MISMATCH), nothing written. To extend a digest by
-- the tail alone, conv_digest becomes a chain over the message hashes:
-- d0 = sha256(''), di = sha256(d(i-1) || sha256(mi)) (it was
-- sha256(sha256(m1) || ... || sha256(mN))). The digests of existing
-- checkpoints are recomputed here, by the same chain the library uses.
DO $$
DECLARE
    c record;
    h bytea;
    d bytea;
BEGIN
    FOR c IN SELECT checkpoint_id, thread_id, conv_ranges FROM checkpoints LOOP
        d := pg_catalog.sha256(''::bytea);
        FOR h IN SELECT m.hash
                   FROM unnest(c.conv_ranges) AS r(rg)
                   JOIN conversation_log l ON l.thread_id = c.thread_id
                    AND l.pos >= lower(r.rg) AND l.pos < upper(r.rg)
                   JOIN conversation_messages m ON m.message_id = l.message_id
                  ORDER BY l.pos LOOP
            d := pg_catalog.sha256(d || h);
        END LOOP;
        UPDATE checkpoints SET conv_digest = d WHERE checkpoint_id = c.checkpoint_id;
    END LOOP;
END
$$;

CREATE FUNCTION checkpoint_append_delta(input json, tail json, prefix_len bigint,
                                        prefix_digest bytea, now_ms bigint DEFAULT NULL)
    RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_append_delta' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION checkpoint_append_delta(json, json, bigint, bytea, bigint) IS
    'Checkpoint append shipping only the new messages: the conversation is the parent''s first prefix_len messages (their digest prefix_digest, checked against the parent: SP016 SANDBOX_SNAPSHOT_PREFIX_MISMATCH when false, nothing written) followed by tail; otherwise checkpoint_append.';

------------------------------------------------------------------------------
-- _harden() and PostgreSQL 17's initial-privilege dependencies (issue 21,
-- item 6; docs/architecture.md, "Initial privileges"). On 17 and later
-- pg_shdepend names every role of an object's initial privileges (type
-- 'i'). An upgrade from 0.1.0 recorded the schema's whole ACL as initial,
-- the application role's USAGE included; _harden() rewrote the row without
-- it but left the role's entry, so DROP ROLE of that role failed. It now
-- removes the entries its rows no longer back. The rest is unchanged.
------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION sandbox_persist._harden() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    ext oid;
    r pg_catalog.pg_roles%ROWTYPE;
    problems text[] := '{}';
    obj record;
    pinned constant text := 'search_path=pg_catalog, pg_temp';
    left_open text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles
                    WHERE rolname = current_user AND rolsuper) THEN
        RAISE EXCEPTION 'sandbox_persist._harden() must be run by a superuser'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'It changes the owners of the extension''s objects and their initial privileges.',
                  HINT = 'It runs at the end of the extension''s install and upgrade scripts.';
    END IF;
    SELECT oid INTO ext FROM pg_catalog.pg_extension WHERE extname = 'sandbox_persist';

    -- Objects of a kind this routine does not know how to close are refused:
    -- the upgrade that adds one must extend the routine first. The row types
    -- of tables and views, and their array types, follow their relation
    -- (owner included); PostgreSQL 17 and later list them as extension
    -- members of their own.
    SELECT string_agg(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), ', ')
      INTO left_open
      FROM pg_catalog.pg_depend d
      LEFT JOIN pg_catalog.pg_class c ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
     WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
       AND d.deptype = 'e'
       AND NOT (d.classid = 'pg_catalog.pg_proc'::regclass
                OR (d.classid = 'pg_catalog.pg_class'::regclass AND c.relkind IN ('r', 'v', 'S'))
                OR (d.classid = 'pg_catalog.pg_type'::regclass AND EXISTS (
                        SELECT 1
                          FROM pg_catalog.pg_type t
                          LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem
                          JOIN pg_catalog.pg_class tc
                            ON tc.oid = coalesce(nullif(t.typrelid, 0::oid), e.typrelid)
                         WHERE t.oid = d.objid AND tc.relkind IN ('r', 'v', 'S'))));
    IF left_open IS NOT NULL THEN
        RAISE EXCEPTION 'sandbox_persist._harden() does not know how to secure %', left_open
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'It secures functions, tables, views and sequences only.',
                  HINT = 'Extend sandbox_persist._harden() in the upgrade script that adds such an object.';
    END IF;

    -- The owner role: created when missing, refused when it has more rights.
    SELECT * INTO r FROM pg_catalog.pg_roles WHERE rolname = 'sandbox_persist_owner';
    IF NOT FOUND THEN
        CREATE ROLE sandbox_persist_owner NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE
            NOREPLICATION NOBYPASSRLS NOINHERIT;
        COMMENT ON ROLE sandbox_persist_owner IS
            'Owner of the sandbox_persist extension''s objects: its SECURITY DEFINER functions run as this role. Not a login role; never grant it to anyone.';
    ELSE
        IF r.rolsuper THEN problems := problems || 'is a superuser'::text; END IF;
        IF r.rolcanlogin THEN problems := problems || 'can log in'::text; END IF;
        IF r.rolcreatedb THEN problems := problems || 'can create databases'::text; END IF;
        IF r.rolcreaterole THEN problems := problems || 'can create roles'::text; END IF;
        IF r.rolreplication THEN problems := problems || 'is a replication role'::text; END IF;
        IF r.rolbypassrls THEN problems := problems || 'bypasses row-level security'::text; END IF;
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members WHERE member = r.oid) THEN
            problems := problems || 'is a member of other roles'::text;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members WHERE roleid = r.oid) THEN
            problems := problems || 'has members'::text;
        END IF;
        IF cardinality(problems) > 0 THEN
            RAISE EXCEPTION 'role sandbox_persist_owner exists and %', array_to_string(problems, ', ')
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'The extension''s functions run as this role, so it must be a NOLOGIN role without SUPERUSER, CREATEDB, CREATEROLE, REPLICATION, BYPASSRLS or role memberships.',
                      HINT = 'Drop that role, or make it NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS without memberships, and run the command again.';
        END IF;
    END IF;

    -- The schema: nothing for PUBLIC; the role reaches its tables through it,
    -- and the grant option lets grant_app_role (which runs as the role) pass
    -- USAGE on to an application role.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
                WHERE n.nspname = 'sandbox_persist' AND a.grantee = 0) THEN
        REVOKE ALL ON SCHEMA sandbox_persist FROM PUBLIC;
    END IF;
    IF NOT pg_catalog.has_schema_privilege('sandbox_persist_owner', 'sandbox_persist',
                                           'USAGE WITH GRANT OPTION') THEN
        GRANT USAGE ON SCHEMA sandbox_persist TO sandbox_persist_owner WITH GRANT OPTION;
    END IF;

    -- Every object to the role: tables (their indexes and identity sequences
    -- follow), the explicit sequences, the views, the functions. Privileges
    -- granted to application roles move with them.
    FOR obj IN
        SELECT c.oid::regclass AS rel, c.relkind
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_class c ON c.oid = d.objid
         WHERE d.classid = 'pg_catalog.pg_class'::regclass
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
           AND c.relowner <> 'sandbox_persist_owner'::regrole
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend i
                            WHERE i.classid = 'pg_catalog.pg_class'::regclass AND i.objid = c.oid
                              AND i.refclassid = 'pg_catalog.pg_class'::regclass
                              AND i.deptype = 'i')
         ORDER BY c.relname
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO sandbox_persist_owner',
                       CASE obj.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW'
                                        ELSE 'TABLE' END, obj.rel);
    END LOOP;
    FOR obj IN
        SELECT p.oid::regprocedure AS fn
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_proc p ON p.oid = d.objid
         WHERE d.classid = 'pg_catalog.pg_proc'::regclass
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
           AND p.proowner <> 'sandbox_persist_owner'::regrole
         ORDER BY p.proname
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO sandbox_persist_owner', obj.fn);
    END LOOP;

    -- A SECURITY DEFINER function resolves names in pg_catalog, then pg_temp,
    -- never in a schema a caller can write to. Other settings stay.
    FOR obj IN
        SELECT p.oid::regprocedure AS fn
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_proc p ON p.oid = d.objid
         WHERE d.classid = 'pg_catalog.pg_proc'::regclass
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e' AND p.prosecdef
           AND NOT coalesce(p.proconfig @> ARRAY[pinned], false)
         ORDER BY p.proname
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', obj.fn);
    END LOOP;

    -- Nothing for PUBLIC. An object whose ACL is still the default (NULL)
    -- gets an explicit one as well: a function's default lets PUBLIC execute.
    FOR obj IN
        SELECT format('%s %s', CASE WHEN d.classid = 'pg_catalog.pg_proc'::regclass THEN 'FUNCTION'
                                    WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                      CASE WHEN d.classid = 'pg_catalog.pg_proc'::regclass
                           THEN d.objid::regprocedure::text ELSE d.objid::regclass::text END) AS target
          FROM pg_catalog.pg_depend d
          LEFT JOIN pg_catalog.pg_class c ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
          LEFT JOIN pg_catalog.pg_proc p ON d.classid = 'pg_catalog.pg_proc'::regclass AND p.oid = d.objid
         WHERE d.classid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
           AND (coalesce(c.relacl, p.proacl) IS NULL
                OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(coalesce(c.relacl, p.proacl)) a
                            WHERE a.grantee = 0))
         ORDER BY 1
    LOOP
        EXECUTE format('REVOKE ALL ON %s FROM PUBLIC CASCADE', obj.target);
    END LOOP;

    -- The initial privileges, as an installation sets them up (see above):
    -- the owner's own on every object, its USAGE on the schema too; rows
    -- missing for an object are added.
    FOR obj IN
        SELECT d.classid AS classoid, d.objid AS objoid,
               ARRAY(SELECT a FROM unnest(pg_catalog.acldefault(
                         CASE WHEN d.classid = 'pg_catalog.pg_proc'::regclass THEN 'f'
                              WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char",
                         'sandbox_persist_owner'::regrole::oid)) AS a
                       WHERE a::text !~ '^=') AS initprivs   -- no PUBLIC entry
          FROM pg_catalog.pg_depend d
          LEFT JOIN pg_catalog.pg_class c ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
         WHERE d.classid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
        UNION ALL
        SELECT 'pg_catalog.pg_namespace'::regclass, n.oid,
               pg_catalog.acldefault('n'::"char", n.nspowner)
               || pg_catalog.makeaclitem('sandbox_persist_owner'::regrole::oid, n.nspowner,
                                         'USAGE', true)
          FROM pg_catalog.pg_namespace n WHERE n.nspname = 'sandbox_persist'
    LOOP
        UPDATE pg_catalog.pg_init_privs ip
           SET initprivs = obj.initprivs, privtype = 'e'
         WHERE ip.classoid = obj.classoid AND ip.objoid = obj.objoid AND ip.objsubid = 0
           AND (ip.initprivs IS DISTINCT FROM obj.initprivs OR ip.privtype <> 'e');
        INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
        SELECT obj.objoid, obj.classoid, 0, 'e', obj.initprivs
         WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs ip
                            WHERE ip.classoid = obj.classoid AND ip.objoid = obj.objoid
                              AND ip.objsubid = 0);
    END LOOP;

    -- PostgreSQL 17 and later also name the roles of initial privileges in
    -- pg_shdepend (type 'i'). A GRANT inside an upgrade recorded the whole ACL
    -- of the moment as initial, an application role's grant included (0.1.0's
    -- grant_app_role gave it USAGE on the schema), and the rows rewritten
    -- above no longer name that role: its entry goes too, or DROP ROLE of it
    -- would fail for an object it has no privilege on.
    IF pg_catalog.current_setting('server_version_num')::int >= 170000 THEN
        DELETE FROM pg_catalog.pg_shdepend s
         WHERE s.dbid = (SELECT d.oid FROM pg_catalog.pg_database d
                          WHERE d.datname = pg_catalog.current_database())
           AND s.deptype = 'i'
           AND (s.classid, s.objid) IN (
                   SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
                    WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass
                      AND d.refobjid = ext AND d.deptype = 'e'
                   UNION ALL
                   SELECT 'pg_catalog.pg_namespace'::regclass, n.oid
                     FROM pg_catalog.pg_namespace n WHERE n.nspname = 'sandbox_persist')
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs ip,
                                         pg_catalog.aclexplode(ip.initprivs) a
                            WHERE ip.classoid = s.classid AND ip.objoid = s.objid
                              AND ip.objsubid = s.objsubid
                              AND s.refobjid IN (a.grantor, a.grantee));
    END IF;

    -- What the routine promises, checked: a failure here is a defect in it.
    SELECT string_agg(x, ', ') INTO left_open FROM (
        SELECT pg_catalog.pg_describe_object(d.classid, d.objid, 0) AS x
          FROM pg_catalog.pg_depend d
          LEFT JOIN pg_catalog.pg_class c ON d.classid = 'pg_catalog.pg_class'::regclass AND c.oid = d.objid
          LEFT JOIN pg_catalog.pg_proc p ON d.classid = 'pg_catalog.pg_proc'::regclass AND p.oid = d.objid
         WHERE d.classid IN ('pg_catalog.pg_class'::regclass, 'pg_catalog.pg_proc'::regclass)
           AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
           AND d.deptype = 'e'
           AND (coalesce(c.relacl, p.proacl) IS NULL
                OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(coalesce(c.relacl, p.proacl)) a
                            WHERE a.grantee = 0)
                OR coalesce(c.relowner, p.proowner) <> 'sandbox_persist_owner'::regrole
                OR (p.prosecdef AND NOT coalesce(p.proconfig @> ARRAY[pinned], false)))
         ORDER BY 1) open_objects;
    IF left_open IS NOT NULL THEN
        RAISE EXCEPTION 'sandbox_persist._harden() left objects open: %', left_open
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Each is usable by PUBLIC, owned by another role, or a SECURITY DEFINER function without a pinned search_path.';
    END IF;
END
$$;

------------------------------------------------------------------------------
-- Blobs written with lz4 (issue 22 item 3). sandbox_persist.blob_codec picks
-- the codec of new chunks and inline objects, zstd (1, as before) or lz4
-- (2), and each row records its own, so the two constraints that admitted
-- only raw (0) and zstd (1) now admit 2 as well. Rows already stored keep
-- their codec and read as before. The constraint re-checks and the two index
-- builds below each scan blob_chunks or blobs once (not their TOAST) under
-- this update's locks. The library refuses to write lz4 into a schema older
-- than this one (BLOB_LZ4_SINCE in src/blobs.h).
------------------------------------------------------------------------------
ALTER TABLE blob_chunks
    DROP CONSTRAINT blob_chunks_codec_check,
    ADD CONSTRAINT blob_chunks_codec_check CHECK (codec IN (0, 1, 2));
ALTER TABLE blobs
    DROP CONSTRAINT blobs_inline_codec,
    ADD CONSTRAINT blobs_inline_codec CHECK (inline_codec IN (0, 1, 2));
COMMENT ON TABLE blob_chunks IS
    'The bytes of blob versions, cut into chunks each stored raw, zstd- or lz4-compressed (the codec recorded per chunk); a range read decodes only the chunks it overlaps.';
-- maintain() rewrites lz4 rows as zstd when sandbox_persist.blob_recompress
-- is on (A12): two partial indexes find them without scanning the tables,
-- and stay empty in a database that does not use lz4.
CREATE INDEX blob_chunks_lz4 ON blob_chunks (version, chunk_offset) WHERE codec = 2;
COMMENT ON INDEX blob_chunks_lz4 IS
    'The lz4 chunks (codec 2), in key order: what maintain() rewrites as zstd under blob_recompress (A12); empty when lz4 is not used.';
CREATE INDEX blobs_inline_lz4 ON blobs (blob_key) WHERE inline_codec = 2;
COMMENT ON INDEX blobs_inline_lz4 IS
    'The lz4 inline objects (inline_codec 2): what maintain() rewrites as zstd under blob_recompress (A12); empty when lz4 is not used.';

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
