-- sandbox_persist 0.4.0 -> 0.5.0. ALTER EXTENSION sandbox_persist UPDATE runs
-- it on a 0.4.0 database (after the earlier scripts on older ones); a fresh
-- install runs the full script built from sql/sandbox_persist.sql instead.
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

------------------------------------------------------------------------------
-- One collation for every text column (issue 31 item 3). runs.sandbox_key
-- had the database collation while the instance key it names is COLLATE "C",
-- so `r.sandbox_key = i.instance_key` could use neither runs_sandbox_key nor
-- instances_pkey: instance_gc_candidates rechecked every running run for each
-- idle instance (425 s at 10^6 rows), and A6 probed instances once per run.
-- Every other text column of the tables with the database collation moves to
-- "C" too, so no comparison between two columns can meet the mismatch again
-- (test/pgtap/schema_scale.sql, case SC1, fails on any text column that is
-- not "C"). A collation change rewrites no table: PostgreSQL rebuilds the
-- indexes on those columns (runs_sandbox_key and the runs partial indexes
-- whose predicate names status) and re-checks their constraints, one scan
-- each. The overview view reads runs.status, so it is dropped here and
-- created again below, with the grants a DBA gave on it carried over.
------------------------------------------------------------------------------
SELECT pg_catalog.set_config('sandbox_persist_upgrade.overview_acl',
                             coalesce((SELECT relacl::text FROM pg_catalog.pg_class
                                        WHERE oid = 'overview'::regclass), ''), true);
DROP VIEW overview;
ALTER TABLE artifacts
    ALTER COLUMN name TYPE text COLLATE "C",
    ALTER COLUMN mime_type TYPE text COLLATE "C",
    ALTER COLUMN source_url TYPE text COLLATE "C";
ALTER TABLE attention
    ALTER COLUMN kind TYPE text COLLATE "C";
ALTER TABLE blob_uploads
    ALTER COLUMN content_type TYPE text COLLATE "C";
ALTER TABLE blobs
    ALTER COLUMN etag TYPE text COLLATE "C",
    ALTER COLUMN content_type TYPE text COLLATE "C";
ALTER TABLE checkpoints
    ALTER COLUMN reason TYPE text COLLATE "C",
    ALTER COLUMN label TYPE text COLLATE "C",
    ALTER COLUMN source_run_id TYPE text COLLATE "C";
ALTER TABLE conversation_messages
    ALTER COLUMN body TYPE text COLLATE "C";
ALTER TABLE generation_runs
    ALTER COLUMN activity TYPE text COLLATE "C",
    ALTER COLUMN provider TYPE text COLLATE "C",
    ALTER COLUMN model TYPE text COLLATE "C",
    ALTER COLUMN status TYPE text COLLATE "C";
ALTER TABLE instances
    ALTER COLUMN provider TYPE text COLLATE "C",
    ALTER COLUMN provider_sandbox_id TYPE text COLLATE "C",
    ALTER COLUMN latest_snapshot_id TYPE text COLLATE "C";
ALTER TABLE interrupts
    ALTER COLUMN status TYPE text COLLATE "C";
ALTER TABLE maintenance_schedule
    ALTER COLUMN schedule TYPE text COLLATE "C",
    ALTER COLUMN username TYPE text COLLATE "C";
ALTER TABLE runs
    ALTER COLUMN status TYPE text COLLATE "C",
    ALTER COLUMN sandbox_key TYPE text COLLATE "C";
ALTER TABLE thread_moves
    ALTER COLUMN state TYPE text COLLATE "C";

------------------------------------------------------------------------------
-- Blob collection proportional to its work (issue 31 item 2). A1 walked the
-- blobs_gc index, which kept every content-addressed blob ever put (its
-- relied_on_at was never cleared), and re-read each referenced one at every
-- round: 6.8 s of a maintain() with nothing to do at 10^5 referenced blobs.
-- Now a blob found referenced is settled (blobs.gc_settled) and leaves
-- blobs_gc, whose predicate excludes it, while its relied_on_at keeps the
-- grace; it comes back when a reference to it goes away: statement triggers on
-- checkpoint_blob_refs (deletes, cascaded from checkpoints too) and artifacts
-- (deletes and updates) queue its key in blob_gc_queue, insert-only so that
-- no two transactions wait on one row. The overview's blobs_awaiting_gc and
-- the backlog count only those two sets (_blobs_awaiting_gc), with no regular
-- expression over every blob. Blobs within their grace that something
-- references are settled by each round too, so blobs_gc holds only what may
-- yet be collected. The referenced blobs of an existing database are settled
-- here, once.
------------------------------------------------------------------------------
CREATE TABLE sandbox_persist.blob_gc_queue (
    blob_key text COLLATE pg_catalog."C" NOT NULL,
    queued_at bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.blob_gc_queue IS 'Content-addressed blob keys that lost a checkpoint reference or an artifact record, with when: maintenance (A1) looks at each such blob again, oldest first, and drops the entry. Duplicates are allowed, so removing references never waits on another transaction.';

CREATE INDEX blob_gc_queue_order ON sandbox_persist.blob_gc_queue USING btree (queued_at);

COMMENT ON INDEX sandbox_persist.blob_gc_queue_order IS 'The queue in arrival order: maintenance takes the oldest entries first.';

CREATE FUNCTION sandbox_persist._blob_gc_enqueue() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- Every content address that lost a reference, whether or not others
    -- remain: a concurrent removal of the other reference may not be visible
    -- here, and maintenance checks again before it deletes anything.
    INSERT INTO sandbox_persist.blob_gc_queue (blob_key, queued_at)
    SELECT DISTINCT gone.blob_key, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
      FROM gone
     WHERE gone.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$';
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION sandbox_persist._blob_gc_enqueue() IS 'Internal, statement trigger of checkpoint_blob_refs and artifacts: queues each content-addressed blob key that lost a reference (blob_gc_queue), so maintenance looks at that blob again without walking the referenced ones.';

CREATE FUNCTION sandbox_persist._blobs_awaiting_gc(cutoff bigint, max_count bigint) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    -- Only the blobs maintenance may yet collect, the oldest max_count of
    -- each kind: those not settled (blobs_gc) and those that lost a
    -- reference since (blob_gc_queue). A blob something references is
    -- settled by the next round, so the count never walks them for long.
    SELECT count(*)
      FROM ((SELECT g.blob_key FROM sandbox_persist.blobs g
              WHERE g.relied_on_at < coalesce(cutoff, 9223372036854775807) AND NOT g.gc_settled
              ORDER BY g.relied_on_at LIMIT max_count)
            UNION
            (SELECT q.blob_key FROM sandbox_persist.blob_gc_queue q ORDER BY q.queued_at LIMIT max_count)) k,
           LATERAL (SELECT FROM sandbox_persist.blobs b
                     WHERE b.blob_key = k.blob_key
                       AND b.relied_on_at < coalesce(cutoff, 9223372036854775807)
                       AND b.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$'
                       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)
                       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.artifacts a WHERE a.blob_key = b.blob_key)) c
$$;

COMMENT ON FUNCTION sandbox_persist._blobs_awaiting_gc(cutoff bigint, max_count bigint) IS 'Internal, for the overview view and _maintenance_backlog(): the content-addressed blobs nothing references that maintenance (A1) would collect with this grace cutoff (NULL: whatever their grace), counted among the oldest max_count candidates of each kind (a lower bound when more wait).';

CREATE TRIGGER blob_gc_reference_deleted AFTER DELETE ON sandbox_persist.checkpoint_blob_refs REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sandbox_persist._blob_gc_enqueue();
CREATE TRIGGER blob_gc_artifact_deleted AFTER DELETE ON sandbox_persist.artifacts REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sandbox_persist._blob_gc_enqueue();
CREATE TRIGGER blob_gc_artifact_updated AFTER UPDATE ON sandbox_persist.artifacts REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION sandbox_persist._blob_gc_enqueue();
SELECT pg_catalog.pg_extension_config_dump('blob_gc_queue', '');
ALTER TABLE blobs ADD COLUMN gc_settled boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN sandbox_persist.blobs.gc_settled IS 'True once maintenance (A1) found the blob referenced: it leaves the blobs_gc index until a reference to it goes away (blob_gc_queue).';
UPDATE sandbox_persist.blobs b SET gc_settled = true
 WHERE b.relied_on_at IS NOT NULL
   AND (EXISTS (SELECT 1 FROM sandbox_persist.checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)
        OR EXISTS (SELECT 1 FROM sandbox_persist.artifacts a WHERE a.blob_key = b.blob_key));
DROP INDEX blobs_gc;
CREATE INDEX blobs_gc ON sandbox_persist.blobs USING btree (relied_on_at) WHERE ((relied_on_at IS NOT NULL) AND (NOT gc_settled));
COMMENT ON INDEX sandbox_persist.blobs_gc IS 'The content-addressed blobs maintenance (A1) may yet collect, by when they were last put or headed: settled ones (referenced when last looked at) are left out.';

------------------------------------------------------------------------------
-- Monitoring that costs the same at any size (issue 31 item 1). The overview
-- (and metrics(), which reads it) counted runs by status and blobs by
-- scanning runs, blobs and blob_chunks; it now reads counters kept by row
-- triggers in row_counts, one row per counter and backend, folded by
-- maintain(). They are built here from the rows as they are. The
-- producer-lost count parsed the last chunk of every closed log; A10 now
-- records the sequence number of the chunk it wrote (lost_tail_seq), and the
-- logs it ended before are found here once, by that same test. Checkpoint
-- leases are counted from a partial index. The backlog counts stop at 10 000
-- per action, so a large backlog costs a scrape no more than a small one.
-- The library refuses maintain() and _maintenance_backlog() on an older
-- schema (MAINT_LAYOUT_SINCE).
------------------------------------------------------------------------------
CREATE TABLE sandbox_persist.row_counts (
    counter text COLLATE pg_catalog."C" NOT NULL,
    backend_pid integer NOT NULL,
    value bigint NOT NULL
);

COMMENT ON TABLE sandbox_persist.row_counts IS 'Counters the overview reads instead of counting tables: runs by status, blob objects and bytes. Triggers add each change to the changing backend''s own row (backend_pid), so no two transactions wait on one row; maintain() folds the rows of backends that have exited into backend_pid 0. Not dumped: a restore rebuilds them as it loads the tables.';

ALTER TABLE ONLY sandbox_persist.row_counts
    ADD CONSTRAINT row_counts_pkey PRIMARY KEY (counter, backend_pid);

CREATE FUNCTION sandbox_persist._row_count(counter text) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT coalesce(sum(c.value), 0)::bigint FROM sandbox_persist.row_counts c WHERE c.counter = $1
$$;

COMMENT ON FUNCTION sandbox_persist._row_count(counter text) IS 'Internal, for the overview view: the current value of one counter of row_counts (its folded row plus the deltas of backends not folded yet).';

CREATE FUNCTION sandbox_persist._row_count_trigger() RETURNS trigger
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', '_row_count_trigger';

COMMENT ON FUNCTION sandbox_persist._row_count_trigger() IS 'Internal, row trigger: adds the change of the counters its arguments name (NAME counts rows, NAME+COLUMN sums a column, NAME#COLUMN sums its stored size, and {COLUMN} in NAME stands for the column''s value) to the calling backend''s row of row_counts.';

CREATE TRIGGER row_count_deleted AFTER DELETE ON sandbox_persist.runs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('runs.{status}');
CREATE TRIGGER row_count_inserted AFTER INSERT ON sandbox_persist.runs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('runs.{status}');
CREATE TRIGGER row_count_updated AFTER UPDATE OF status ON sandbox_persist.runs FOR EACH ROW WHEN ((old.status <> new.status)) EXECUTE FUNCTION sandbox_persist._row_count_trigger('runs.{status}');
CREATE TRIGGER row_count_deleted AFTER DELETE ON sandbox_persist.blobs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('blobs', 'blob_raw_bytes+size', 'blob_stored_bytes#inline_data');
CREATE TRIGGER row_count_inserted AFTER INSERT ON sandbox_persist.blobs FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('blobs', 'blob_raw_bytes+size', 'blob_stored_bytes#inline_data');
CREATE TRIGGER row_count_updated AFTER UPDATE OF size, inline_data ON sandbox_persist.blobs FOR EACH ROW WHEN (((old.size <> new.size) OR (pg_column_size(old.inline_data) IS DISTINCT FROM pg_column_size(new.inline_data)))) EXECUTE FUNCTION sandbox_persist._row_count_trigger('blobs', 'blob_raw_bytes+size', 'blob_stored_bytes#inline_data');
CREATE TRIGGER row_count_deleted AFTER DELETE ON sandbox_persist.blob_chunks FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('blob_stored_bytes#data');
CREATE TRIGGER row_count_inserted AFTER INSERT ON sandbox_persist.blob_chunks FOR EACH ROW EXECUTE FUNCTION sandbox_persist._row_count_trigger('blob_stored_bytes#data');
CREATE TRIGGER row_count_updated AFTER UPDATE OF data ON sandbox_persist.blob_chunks FOR EACH ROW WHEN ((pg_column_size(old.data) <> pg_column_size(new.data))) EXECUTE FUNCTION sandbox_persist._row_count_trigger('blob_stored_bytes#data');
-- row_counts is emptied by _reset_for_tests() but dumps no row: the triggers
-- rebuild it while a restore loads the counted tables.
SELECT pg_catalog.pg_extension_config_dump('row_counts', 'WHERE false');
INSERT INTO sandbox_persist.row_counts (counter, backend_pid, value)
SELECT 'runs.' || status, 0, count(*) FROM sandbox_persist.runs GROUP BY status
UNION ALL
SELECT 'blobs', 0, count(*) FROM sandbox_persist.blobs
UNION ALL
SELECT 'blob_raw_bytes', 0, coalesce(sum(size), 0) FROM sandbox_persist.blobs
UNION ALL
SELECT 'blob_stored_bytes', 0,
       (SELECT coalesce(sum(pg_catalog.pg_column_size(data)), 0) FROM sandbox_persist.blob_chunks)
       + (SELECT coalesce(sum(pg_catalog.pg_column_size(inline_data)), 0) FROM sandbox_persist.blobs);

ALTER TABLE event_logs ADD COLUMN lost_tail_seq bigint;
COMMENT ON COLUMN sandbox_persist.event_logs.lost_tail_seq IS 'The sequence number of the PRODUCER_LOST chunk maintenance (A10) ended the log with; NULL for a log it never ended. The log still ends that way while this equals tail_seq.';
UPDATE sandbox_persist.event_logs l SET lost_tail_seq = l.tail_seq
  FROM sandbox_persist.event_log_entries e
 WHERE e.log_id = l.log_id AND e.seq = l.tail_seq AND l.closed_at IS NOT NULL
   AND (e.chunk ->> 'type') = 'RUN_ERROR' AND (e.chunk ->> 'code') = 'PRODUCER_LOST';
CREATE INDEX event_logs_producer_lost ON sandbox_persist.event_logs USING btree (log_id) WHERE (lost_tail_seq IS NOT NULL);

COMMENT ON INDEX sandbox_persist.event_logs_producer_lost IS 'The logs maintenance ended with PRODUCER_LOST (A10): the overview counts them without reading any entry.';

CREATE INDEX checkpoint_threads_leased ON sandbox_persist.checkpoint_threads USING btree (lease_expires_at) WHERE (owner_token IS NOT NULL);

COMMENT ON INDEX sandbox_persist.checkpoint_threads_leased IS 'Threads with a writer lease recorded: the overview counts the unexpired ones without reading every thread.';

-- instance_gc_candidates walked every instance and sorted them by age.
CREATE INDEX instances_updated ON sandbox_persist.instances USING btree (updated_at, instance_key);

COMMENT ON INDEX sandbox_persist.instances_updated IS 'Instances by age: instance_gc_candidates walks the oldest first and stops at max_rows, instead of sorting every row.';

------------------------------------------------------------------------------
-- A backlog drains at a rate that scales (issue 31 item 2). maintain() took
-- at most 1000 rows per action per call, so 95 000 expired runs needed 96
-- calls, 1.6 h at pg_cron's once a minute. The collecting actions now take
-- up to max_rows rows in statements of at most 1000 and start no new one once
-- the round has run for sandbox_persist.maintenance_time_budget (5 s), and
-- the default max_rows of maintain() and schedule_maintenance() is 100 000.
-- A job scheduled before keeps the command it was given (maintain(1000));
-- schedule_maintenance() again to take the new default.
------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION sandbox_persist.maintain(max_rows integer DEFAULT 100000, now_ms bigint DEFAULT NULL::bigint) RETURNS json
    LANGUAGE c SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '2s'
    AS 'MODULE_PATHNAME', 'maintain';

COMMENT ON FUNCTION sandbox_persist.maintain(max_rows integer, now_ms bigint) IS 'One round of safe maintenance, at most max_rows rows per action, taken in batches of 1000 until sandbox_persist.maintenance_time_budget is spent: collects unreferenced content-addressed blobs, idle uploads, expired locks and old logs and runs, closes finished logs, updates watchdog items. Returns the counts as json.';

CREATE OR REPLACE FUNCTION sandbox_persist.schedule_maintenance(schedule text DEFAULT '* * * * *'::text, max_rows integer DEFAULT 100000) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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

COMMENT ON FUNCTION sandbox_persist.schedule_maintenance(schedule text, max_rows integer) IS 'Administration: registers maintain(max_rows) as the pg_cron job sandbox_persist_maintenance on the given cron schedule and returns its job id. Runs as its caller; needs pg_cron in this database.';

------------------------------------------------------------------------------
-- A bounded watchdog (issue 31 item 2). Each round judged every item twice
-- (_watchdog_items over all runs and logs) and recorded 1 000 more, so 94 000
-- invisible runs made attention 9.8 MB and cost 2.4 s a round. Each kind now
-- lists its oldest 100 items, walking an index in that order (a new partial
-- index finds the logs with appends after close), and attention holds only
-- those: the first round after this update removes the rest.
------------------------------------------------------------------------------
DROP FUNCTION _watchdog_items(bigint, bigint, bigint, bigint);
CREATE FUNCTION sandbox_persist._watchdog_items(now_ms bigint, reaper_ttl_ms bigint, sweep_interval_ms bigint, idle_ms bigint, per_kind integer) RETURNS TABLE(kind text, run_id text, detail json)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    -- Each kind lists its oldest items first and stops at per_kind, walking
    -- an index in that order, so a large population costs no more than a
    -- small one.
    (SELECT 'reaper_missing', r.run_id, json_build_object('detachedSince', r.detached_since)
       FROM sandbox_persist.runs r
      WHERE reaper_ttl_ms > 0 AND sweep_interval_ms > 0
        AND r.status = 'running' AND r.detached_since IS NOT NULL
        AND r.detached_since < now_ms - (reaper_ttl_ms + 2 * sweep_interval_ms)
      ORDER BY r.detached_since, r.seq LIMIT per_kind)
    UNION ALL
    SELECT 'reaper_missing', '', json_build_object('detachedRuns', count(*))
      FROM sandbox_persist.runs r
     WHERE sweep_interval_ms > 0 AND r.status = 'running' AND r.detached_since IS NOT NULL
    HAVING count(*) > 0
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.reaper_heartbeats h
                        WHERE h.seen_at >= now_ms - 2 * sweep_interval_ms)
    UNION ALL
    (SELECT 'invisible_run', r.run_id, NULL
       FROM sandbox_persist.runs r
      WHERE r.status = 'running' AND r.detached_since IS NULL
        AND r.status_changed_at < now_ms - idle_ms AND r.changed_at < now_ms - idle_ms
        AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks l
                         WHERE l.lock_key = 'run-driver:' || r.run_id AND l.expires_at > now_ms)
        -- a probe per run (run_id is unique), never a join over every log
        AND coalesce((SELECT e.last_append_at FROM sandbox_persist.event_logs e WHERE e.run_id = r.run_id),
                     now_ms - idle_ms - 1) < now_ms - idle_ms
      ORDER BY r.status_changed_at, r.run_id LIMIT per_kind)
    UNION ALL
    (SELECT 'stuck_cancel', r.run_id, NULL
       FROM sandbox_persist.runs r
      WHERE r.status = 'running' AND r.cancel_requested
        AND r.status_changed_at < now_ms - idle_ms AND r.changed_at < now_ms - idle_ms
      ORDER BY r.status_changed_at, r.run_id LIMIT per_kind)
    UNION ALL
    (SELECT 'append_after_close', e.run_id,
            json_build_object('appendsAfterClose', e.appends_after_close)
       FROM sandbox_persist.event_logs e
      WHERE e.appends_after_close > 0
      ORDER BY e.log_id LIMIT per_kind)
$$;

COMMENT ON FUNCTION sandbox_persist._watchdog_items(now_ms bigint, reaper_ttl_ms bigint, sweep_interval_ms bigint, idle_ms bigint, per_kind integer) IS 'Internal, for maintain(): the watchdog items current at now_ms (kind, run_id, detail), judged with the reaper TTL, sweep interval and idle time given, at most per_kind of each kind, the oldest first. Reports only, never acts.';

CREATE INDEX event_logs_appended_after_close ON sandbox_persist.event_logs USING btree (log_id) WHERE (appends_after_close > 0);

COMMENT ON INDEX sandbox_persist.event_logs_appended_after_close IS 'The logs that counted appends after close: the watchdog lists them (append_after_close) without reading every log.';

COMMENT ON TABLE sandbox_persist.attention IS 'Watchdog items maintenance currently reports (a missing reaper, invisible runs, stuck cancels, appends after close), with when each was first and last seen: at most 100 of each kind, the oldest (an item also leaves when older ones fill its kind).';

------------------------------------------------------------------------------
-- run_list_reclaimable with a limit (issue 31 item 5): a reaper that works in
-- batches reads only what it takes. Left out (NULL), max_rows keeps the
-- contract's listReclaimable (every reclaimable run). The grants given on the
-- two-argument function are given on the new one below.
------------------------------------------------------------------------------
SELECT pg_catalog.set_config('sandbox_persist_upgrade.reclaimable_acl',
                             coalesce((SELECT proacl::text FROM pg_catalog.pg_proc
                                        WHERE oid = 'run_list_reclaimable(bigint, bigint)'::regprocedure), ''), true);
DROP FUNCTION run_list_reclaimable(bigint, bigint);
CREATE FUNCTION sandbox_persist.run_list_reclaimable(caller_now_ms bigint, ttl_ms bigint, max_rows integer DEFAULT NULL::integer) RETURNS json
    LANGUAGE c STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS 'MODULE_PATHNAME', 'run_list_reclaimable';

COMMENT ON FUNCTION sandbox_persist.run_list_reclaimable(caller_now_ms bigint, ttl_ms bigint, max_rows integer) IS 'Run store listReclaimable: running runs detached at or before caller_now_ms - ttl_ms, oldest first, as a json array; all of them (max_rows NULL, the contract''s call) or the first max_rows, for reapers that work in batches (negative is 22023).';

------------------------------------------------------------------------------
-- The overview again (dropped above for the collation change): the same
-- columns, now read from the counters and partial indexes; the grants a DBA
-- gave on it are given back.
------------------------------------------------------------------------------
CREATE VIEW sandbox_persist.overview AS
 WITH now_ms AS (
         SELECT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint AS now,
            sandbox_persist._reaper_ttl_ms() AS reaper_ttl
        ), health AS (
         SELECT sandbox_persist.maintenance_health() AS h
        )
 SELECT sandbox_persist._row_count('runs.running'::text) AS runs_running,
    sandbox_persist._row_count('runs.interrupted'::text) AS runs_interrupted,
    sandbox_persist._row_count('runs.completed'::text) AS runs_completed,
    sandbox_persist._row_count('runs.failed'::text) AS runs_failed,
    sandbox_persist._row_count('runs.aborted'::text) AS runs_aborted,
    ( SELECT count(*) AS count
           FROM sandbox_persist.runs
          WHERE ((runs.status = 'running'::text) AND (runs.detached_since IS NOT NULL))) AS runs_detached,
    ( SELECT count(*) AS count
           FROM sandbox_persist.runs,
            now_ms
          WHERE ((runs.status = 'running'::text) AND (runs.detached_since IS NOT NULL) AND (now_ms.reaper_ttl > 0) AND (runs.detached_since <= (now_ms.now - now_ms.reaper_ttl)))) AS runs_detached_past_ttl,
    ( SELECT count(*) AS count
           FROM sandbox_persist.locks,
            now_ms
          WHERE (locks.expires_at > now_ms.now)) AS locks_held,
    ( SELECT count(*) AS count
           FROM sandbox_persist.event_logs
          WHERE (event_logs.closed_at IS NULL)) AS event_logs_open,
    sandbox_persist._row_count('blobs'::text) AS blobs,
    (sandbox_persist._row_count('blob_raw_bytes'::text))::numeric AS blob_raw_bytes,
    sandbox_persist._row_count('blob_stored_bytes'::text) AS blob_stored_bytes,
    sandbox_persist._blobs_awaiting_gc(NULL::bigint, 10000) AS blobs_awaiting_gc,
    ( SELECT count(*) AS count
           FROM sandbox_persist.blob_uploads) AS uploads_open,
    (( SELECT count(*) AS count
           FROM sandbox_persist.attention) + ( SELECT ((((health.h ->> 'overdue'::text))::boolean)::integer + (((health.h ->> 'failing'::text))::boolean)::integer)
           FROM health)) AS attention_items,
    ( SELECT to_timestamp((((maintenance_state.last_run_at)::numeric / 1000.0))::double precision) AS to_timestamp
           FROM sandbox_persist.maintenance_state) AS maintenance_last_run,
    ( SELECT maintenance_state.last_summary
           FROM sandbox_persist.maintenance_state) AS maintenance_last_summary,
    ( SELECT count(*) AS count
           FROM sandbox_persist.checkpoint_threads,
            now_ms
          WHERE ((checkpoint_threads.owner_token IS NOT NULL) AND (checkpoint_threads.lease_expires_at > now_ms.now))) AS checkpoint_leases_held,
    ( SELECT count(*) AS count
           FROM sandbox_persist.event_logs l
          WHERE ((l.lost_tail_seq IS NOT NULL) AND (l.lost_tail_seq = l.tail_seq) AND (l.closed_at IS NOT NULL))) AS event_logs_producer_lost,
    ( SELECT COALESCE(sum(lease_takeovers.takeovers), (0)::numeric) AS "coalesce"
           FROM sandbox_persist.lease_takeovers
          WHERE (lease_takeovers.kind = 'checkpoint_writer'::text)) AS checkpoint_writer_takeovers,
    ( SELECT COALESCE(sum(lease_takeovers.takeovers), (0)::numeric) AS "coalesce"
           FROM sandbox_persist.lease_takeovers
          WHERE (lease_takeovers.kind = 'lock'::text)) AS lock_takeovers,
    ( SELECT maintenance_state.last_duration_ms
           FROM sandbox_persist.maintenance_state) AS maintenance_last_duration_ms,
    sandbox_persist._maintenance_backlog() AS gc_backlog,
    ( SELECT ((health.h ->> 'scheduled'::text))::boolean AS bool
           FROM health) AS maintenance_scheduled,
    ( SELECT ((health.h ->> 'overdue'::text))::boolean AS bool
           FROM health) AS maintenance_overdue,
    ( SELECT ((health.h ->> 'failing'::text))::boolean AS bool
           FROM health) AS maintenance_failing,
    ( SELECT (health.h ->> 'lastFailureMessage'::text)
           FROM health) AS maintenance_last_failure,
    ( SELECT health.h
           FROM health) AS maintenance_health;

COMMENT ON VIEW sandbox_persist.overview IS 'One row for operators: runs by status, detached runs, held locks and leases, lease takeovers, open and producer-lost logs, blob counts and bytes, blobs awaiting collection, the GC backlog, open uploads, watchdog items, the last maintenance run and whether scheduled maintenance really runs (maintenance_health()).';

COMMENT ON COLUMN sandbox_persist.overview.runs_running IS 'Runs whose status is running.';

COMMENT ON COLUMN sandbox_persist.overview.runs_interrupted IS 'Runs paused for a person (status interrupted).';

COMMENT ON COLUMN sandbox_persist.overview.runs_completed IS 'Runs whose status is completed.';

COMMENT ON COLUMN sandbox_persist.overview.runs_failed IS 'Runs whose status is failed.';

COMMENT ON COLUMN sandbox_persist.overview.runs_aborted IS 'Runs whose status is aborted.';

COMMENT ON COLUMN sandbox_persist.overview.runs_detached IS 'Running runs whose client went away (detachedSince set), waiting for a takeover or the reaper.';

COMMENT ON COLUMN sandbox_persist.overview.runs_detached_past_ttl IS 'Detached running runs older than the reaper TTL (sandbox_persist.reaper_ttl); 0 while that setting is 0.';

COMMENT ON COLUMN sandbox_persist.overview.locks_held IS 'Lock leases not yet expired.';

COMMENT ON COLUMN sandbox_persist.overview.event_logs_open IS 'Event logs not closed yet.';

COMMENT ON COLUMN sandbox_persist.overview.blobs IS 'Stored blob objects.';

COMMENT ON COLUMN sandbox_persist.overview.blob_raw_bytes IS 'Total size of the blob objects, uncompressed.';

COMMENT ON COLUMN sandbox_persist.overview.blob_stored_bytes IS 'Bytes the blob chunks (those of uploads in progress included) and inline objects take in storage, after compression; kept as a counter (row_counts).';

COMMENT ON COLUMN sandbox_persist.overview.blobs_awaiting_gc IS 'Content-addressed blobs no checkpoint or artifact references, within their grace or past it: maintenance deletes them once past sandbox_persist.blob_gc_grace. Counted among the oldest 10000 blobs maintenance has yet to look at and the oldest 10000 queued keys, so a lower bound when more wait.';

COMMENT ON COLUMN sandbox_persist.overview.uploads_open IS 'Streamed uploads begun and not yet committed or aborted.';

COMMENT ON COLUMN sandbox_persist.overview.attention_items IS 'Current watchdog items (see attention_list()): the recorded ones plus maintenance_failing and maintenance_overdue, judged now.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_last_run IS 'When maintain() last ran; NULL if never.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_last_summary IS 'The counts the last maintain() returned.';

COMMENT ON COLUMN sandbox_persist.overview.checkpoint_leases_held IS 'Checkpoint writer leases not yet expired.';

COMMENT ON COLUMN sandbox_persist.overview.event_logs_producer_lost IS 'Kept event logs that maintenance ended because their producer was gone (their last chunk is the RUN_ERROR with code PRODUCER_LOST).';

COMMENT ON COLUMN sandbox_persist.overview.checkpoint_writer_takeovers IS 'Checkpoint writer acquires that took over an expired lease of another owner, ever (since 0.4.0).';

COMMENT ON COLUMN sandbox_persist.overview.lock_takeovers IS 'Lock acquires that took over an expired lock of another owner, ever (since 0.4.0).';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_last_duration_ms IS 'How long the last maintain() round took, in wall-clock milliseconds; NULL if none has run since 0.4.0.';

COMMENT ON COLUMN sandbox_persist.overview.gc_backlog IS 'What maintain() would collect now, by action: json {blobs, uploads, locks, eventLogs, runs, conversationBlocks} (see _maintenance_backlog()).';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_scheduled IS 'Whether maintenance is scheduled: recorded by schedule_maintenance, or a pg_cron job of that name for this database.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_overdue IS 'True when maintain() has not completed within the bound although maintenance is scheduled (maintenance_health().boundMs).';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_failing IS 'True when pg_cron''s latest finished run of the maintenance job failed and maintain() has not completed since.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_last_failure IS 'The message of pg_cron''s latest failed run of the maintenance job (cron.job_run_details), when visible to this role.';

COMMENT ON COLUMN sandbox_persist.overview.maintenance_health IS 'The whole maintenance_health() report: schedule, bound, last run, pg_cron''s last runs and what is wrong.';

-- The grants a DBA or grant_app_role gave on the two objects this update
-- re-created (the overview, run_list_reclaimable), given again.
DO $$
DECLARE
    o record;
    g record;
BEGIN
    FOR o IN SELECT * FROM (VALUES
                 ('overview_acl', 'TABLE sandbox_persist.overview'),
                 ('reclaimable_acl', 'FUNCTION sandbox_persist.run_list_reclaimable(bigint, bigint, integer)')) v(setting, object)
    LOOP
        FOR g IN SELECT a.grantee, a.privilege_type, a.is_grantable
                   FROM pg_catalog.aclexplode(nullif(pg_catalog.current_setting('sandbox_persist_upgrade.' || o.setting, true), '')::pg_catalog.aclitem[]) a
                  WHERE a.grantee <> 'sandbox_persist_owner'::pg_catalog.regrole AND a.grantee <> a.grantor
        LOOP
            EXECUTE pg_catalog.format('GRANT %s ON %s TO %s%s', g.privilege_type, o.object,
                                      CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::pg_catalog.regrole::text END,
                                      CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
    END LOOP;
END
$$;

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
