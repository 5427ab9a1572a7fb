-- sandbox_persist 0.3.0 -> 0.4.0. CREATE EXTENSION runs 0.1.0, the upgrade
-- scripts up to 0.3.0 and then this one; ALTER EXTENSION sandbox_persist
-- UPDATE runs it on a 0.3.0 database (after the earlier scripts on older ones).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

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
    (SELECT count(*) FROM attention)                                      AS attention_items,
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
    sandbox_persist._maintenance_backlog()                                AS gc_backlog;
COMMENT ON COLUMN overview.checkpoint_leases_held IS 'Checkpoint writer leases not yet expired.';
COMMENT ON COLUMN overview.event_logs_producer_lost IS 'Kept event logs that maintenance ended because their producer was gone (their last chunk is the RUN_ERROR with code PRODUCER_LOST).';
COMMENT ON COLUMN overview.checkpoint_writer_takeovers IS 'Checkpoint writer acquires that took over an expired lease of another owner, ever (since 0.4.0).';
COMMENT ON COLUMN overview.lock_takeovers IS 'Lock acquires that took over an expired lock of another owner, ever (since 0.4.0).';
COMMENT ON COLUMN overview.maintenance_last_duration_ms IS 'How long the last maintain() round took, in wall-clock milliseconds; NULL if none has run since 0.4.0.';
COMMENT ON COLUMN overview.gc_backlog IS 'What maintain() would collect now, by action: json {blobs, uploads, locks, eventLogs, runs, conversationBlocks} (see _maintenance_backlog()).';
COMMENT ON VIEW overview IS
    'One row for operators: runs by status, detached runs, held locks and leases, lease takeovers, open and producer-lost logs, blob counts and bytes, blobs awaiting collection, the GC backlog, open uploads, watchdog items and the last maintenance run.';

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

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
