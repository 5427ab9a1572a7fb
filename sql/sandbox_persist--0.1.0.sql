-- sandbox_persist 0.1.0: TanStack AI store contracts inside PostgreSQL.
\echo Use "CREATE EXTENSION sandbox_persist" to load this file. \quit

DO $$
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        RAISE EXCEPTION 'sandbox_persist requires a UTF8 database'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Identifier order is the byte order of UTF-8, which COLLATE "C" gives only in a UTF8 database.';
    END IF;
END
$$;

------------------------------------------------------------------------------
-- Tables. Identifiers are text COLLATE "C" (bytewise UTF-8 order); payloads
-- are json (exact text). A hidden seq column breaks ties in insertion order.
------------------------------------------------------------------------------

-- Sandbox instance store: compound key -> provider sandbox to resume.
CREATE TABLE instances (
    instance_key        text COLLATE "C" PRIMARY KEY,
    provider            text NOT NULL,
    provider_sandbox_id text NOT NULL,
    latest_snapshot_id  text,
    thread_id           text COLLATE "C" NOT NULL,
    latest_run_id       text COLLATE "C",
    updated_at          bigint NOT NULL
);

-- Run store, with the four durable fields.
CREATE TABLE runs (
    seq              bigint GENERATED ALWAYS AS IDENTITY,
    run_id           text COLLATE "C" PRIMARY KEY,
    thread_id        text COLLATE "C" NOT NULL,
    status           text NOT NULL
                     CHECK (status IN ('running', 'interrupted', 'completed', 'failed', 'aborted')),
    started_at       bigint NOT NULL,
    finished_at      bigint,
    error            json,
    usage            json,
    sandbox_key      text,
    detached_since   bigint,
    cancel_requested boolean,
    driver_epoch     bigint CHECK (driver_epoch >= 0),
    changed_at       bigint NOT NULL   -- server clock of the last write, for retention
);
CREATE INDEX runs_thread_started ON runs (thread_id, started_at, seq);
CREATE INDEX runs_reclaimable ON runs (detached_since, seq)
    WHERE status = 'running' AND detached_since IS NOT NULL;

-- Message store: one transcript per thread, replaced whole.
CREATE TABLE messages (
    thread_id  text COLLATE "C" PRIMARY KEY,
    transcript json NOT NULL,
    updated_at bigint NOT NULL
);

-- One row per checkpoint thread: its lock point, writer lease and head.
-- The fence only ever grows; maintenance never deletes these rows.
CREATE TABLE checkpoint_threads (
    thread_id        text COLLATE "C" PRIMARY KEY,
    fence            bigint NOT NULL DEFAULT 0,
    owner_token      uuid,
    lease_expires_at bigint,
    head_id          text COLLATE "C"
);

-- Each distinct conversation message of a thread, stored once and shared by
-- every checkpoint that carries it (keyed by the SHA-256 of its exact text).
-- Scoped by thread, so two threads never wait on each other's new messages
-- and a thread's rows stay together when sharding by thread.
CREATE TABLE conversation_messages (
    message_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id  text COLLATE "C" NOT NULL,
    hash       bytea NOT NULL,
    body       text NOT NULL,
    UNIQUE (thread_id, hash)
);

CREATE TABLE checkpoints (
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    checkpoint_id text COLLATE "C" PRIMARY KEY,
    thread_id     text COLLATE "C" NOT NULL,
    parent_id     text COLLATE "C",
    created_at    double precision NOT NULL,
    reason        text NOT NULL,
    label         text,
    source_run_id text,
    files         json NOT NULL,     -- canonical entries, in the caller's order
    artifacts     json NOT NULL,     -- canonical artifacts, in the caller's order
    conversation  bigint[] NOT NULL  -- conversation_messages ids, in order
);
CREATE INDEX checkpoints_thread_order ON checkpoints (thread_id, created_at, checkpoint_id);

-- One row per (checkpoint, distinct blob key): reference counts are derived
-- from these rows, so no shared counter becomes a hot row.
CREATE TABLE checkpoint_blob_refs (
    checkpoint_id text COLLATE "C" NOT NULL REFERENCES checkpoints ON DELETE CASCADE,
    blob_key      text COLLATE "C" NOT NULL,
    PRIMARY KEY (checkpoint_id, blob_key)
);
CREATE INDEX checkpoint_blob_refs_key ON checkpoint_blob_refs (blob_key);

-- Interrupt store. resolved_at is set exactly when the status is not pending;
-- response is SQL NULL when none is stored, the json text null when JSON null is.
CREATE TABLE interrupts (
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    interrupt_id text COLLATE "C" PRIMARY KEY,
    run_id       text COLLATE "C" NOT NULL,
    thread_id    text COLLATE "C" NOT NULL,
    status       text NOT NULL CHECK (status IN ('pending', 'resolved', 'cancelled')),
    requested_at bigint NOT NULL,
    resolved_at  bigint,
    payload      json NOT NULL,
    response     json,
    CHECK ((status = 'pending') = (resolved_at IS NULL))
);
CREATE INDEX interrupts_thread_order ON interrupts (thread_id, requested_at, seq);
CREATE INDEX interrupts_run_order ON interrupts (run_id, requested_at, seq);

-- Metadata store: two independent key columns, any JSON value but null.
CREATE TABLE metadata (
    namespace text COLLATE "C" NOT NULL,
    meta_key  text COLLATE "C" NOT NULL,
    value     json NOT NULL,
    PRIMARY KEY (namespace, meta_key)
);

-- Generation run store. result is SQL NULL when unset, the json text null when
-- a null result was stored. activity is free text and never checked.
CREATE TABLE generation_runs (
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    run_id      text COLLATE "C" PRIMARY KEY,
    thread_id   text COLLATE "C" NOT NULL,
    activity    text NOT NULL,
    provider    text NOT NULL,
    model       text NOT NULL,
    status      text NOT NULL
                CHECK (status IN ('running', 'interrupted', 'completed', 'failed', 'aborted')),
    started_at  bigint NOT NULL,
    finished_at bigint,
    error       json,
    result      json,
    artifacts   json,
    usage       json
);
CREATE INDEX generation_runs_thread_started ON generation_runs (thread_id, started_at, seq);

-- Artifact store. (created_at, artifact_id) is unique per list, so no seq is
-- needed; the two order indexes serve list and listForThread without a sort.
CREATE TABLE artifacts (
    artifact_id text COLLATE "C" PRIMARY KEY,
    run_id      text COLLATE "C" NOT NULL,
    thread_id   text COLLATE "C" NOT NULL,
    blob_key    text COLLATE "C",
    name        text NOT NULL,
    mime_type   text NOT NULL,
    size        bigint NOT NULL CHECK (size >= 0),
    source_url  text,
    created_at  double precision NOT NULL
                CHECK (created_at <> 'Infinity' AND created_at <> '-Infinity' AND created_at <> 'NaN')
);
CREATE INDEX artifacts_thread_order ON artifacts (thread_id, created_at, artifact_id);
CREATE INDEX artifacts_run_order ON artifacts (run_id, created_at, artifact_id);
-- blob garbage collection asks whether any artifact record names a key
CREATE INDEX artifacts_blob_key ON artifacts (blob_key) WHERE blob_key IS NOT NULL;

SELECT pg_catalog.pg_extension_config_dump('interrupts', '');
SELECT pg_catalog.pg_extension_config_dump('metadata', '');
SELECT pg_catalog.pg_extension_config_dump('generation_runs', '');
SELECT pg_catalog.pg_extension_config_dump('artifacts', '');

-- Blob store. An object is a blobs row pointing at a version of chunks; a
-- write stages a new version and publishes it by repointing the row.
CREATE SEQUENCE blob_versions;
CREATE SEQUENCE blob_etags;
CREATE TABLE blobs (
    blob_key         text COLLATE "C" PRIMARY KEY,
    version          bigint NOT NULL,
    size             bigint NOT NULL CHECK (size >= 0),
    etag             text NOT NULL,
    content_type     text,
    custom_metadata  json,
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL,
    relied_on_at     bigint,   -- content-addressed keys: last put/head, for the GC grace
    replaced_version bigint    -- bookkeeping: the version the last overwrite replaced
);
CREATE TABLE blob_chunks (
    version      bigint NOT NULL,
    chunk_offset bigint NOT NULL,
    raw_length   integer NOT NULL CHECK (raw_length > 0),
    codec        smallint NOT NULL CHECK (codec IN (0, 1)),   -- 0 raw, 1 zstd
    data         bytea NOT NULL,
    PRIMARY KEY (version, chunk_offset)
);
-- chunks are compressed by the extension; TOAST must not compress them again
ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE TABLE blob_uploads (
    upload_id       uuid PRIMARY KEY,
    blob_key        text COLLATE "C" NOT NULL,
    version         bigint NOT NULL,
    content_type    text,
    custom_metadata json,
    chunk_size      integer NOT NULL,
    received        bigint NOT NULL DEFAULT 0,
    tail            bytea NOT NULL DEFAULT '',   -- received bytes not yet filling a chunk
    created_at      bigint NOT NULL,
    touched_at      bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('blob_versions', '');
SELECT pg_catalog.pg_extension_config_dump('blob_etags', '');
SELECT pg_catalog.pg_extension_config_dump('blobs', '');
SELECT pg_catalog.pg_extension_config_dump('blob_chunks', '');
SELECT pg_catalog.pg_extension_config_dump('blob_uploads', '');

-- LockStore: one lease row per held key; fences from one global sequence, so
-- they keep growing across release, takeover and the purge of expired rows.
CREATE SEQUENCE lock_fences;
CREATE TABLE locks (
    lock_key    text COLLATE "C" PRIMARY KEY,
    owner_token uuid NOT NULL,
    fence       bigint NOT NULL,
    acquired_at bigint NOT NULL,
    expires_at  bigint NOT NULL
);
CREATE INDEX locks_expiry ON locks (expires_at);

-- Durable event log: one log per run (no foreign key to runs: a plain chat
-- run may have a log and no run record), entries numbered densely from 1.
CREATE TABLE event_logs (
    log_id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id              text COLLATE "C" NOT NULL UNIQUE,
    tail_seq            bigint NOT NULL DEFAULT 0,
    created_at          bigint NOT NULL,
    last_append_at      bigint NOT NULL,
    closed_at           bigint,
    appends_after_close bigint NOT NULL DEFAULT 0
);
CREATE INDEX event_logs_closed ON event_logs (closed_at) WHERE closed_at IS NOT NULL;
CREATE INDEX event_logs_open ON event_logs (log_id) WHERE closed_at IS NULL;
CREATE TABLE event_log_entries (
    log_id bigint NOT NULL,
    seq    bigint NOT NULL,
    chunk  json NOT NULL,
    PRIMARY KEY (log_id, seq)
);
-- (producerId, producerSeq) of every append, so a retry returns the same numbers
CREATE TABLE event_log_producers (
    log_id       bigint NOT NULL,
    producer_id  uuid NOT NULL,
    producer_seq bigint NOT NULL,
    first_seq    bigint NOT NULL,
    chunk_count  integer NOT NULL,
    PRIMARY KEY (log_id, producer_id, producer_seq)
);

-- Maintenance bookkeeping: watchdog items, reaper heartbeats, the last run.
CREATE TABLE attention (
    kind       text NOT NULL,
    run_id     text COLLATE "C" NOT NULL,   -- '' for items about no single run
    first_seen bigint NOT NULL,
    last_seen  bigint NOT NULL,
    detail     json,
    PRIMARY KEY (kind, run_id)
);
CREATE TABLE reaper_heartbeats (
    replica text COLLATE "C" PRIMARY KEY,
    seen_at bigint NOT NULL,
    summary json
);
CREATE TABLE maintenance_state (
    id           integer PRIMARY KEY CHECK (id = 1),
    last_run_at  bigint NOT NULL,
    last_summary json NOT NULL
);

-- Indexes the maintenance and GC queries rely on.
CREATE INDEX blobs_gc ON blobs (relied_on_at) WHERE relied_on_at IS NOT NULL;
CREATE INDEX instances_latest_run ON instances (latest_run_id);
CREATE INDEX runs_running ON runs (changed_at) WHERE status = 'running';
CREATE INDEX runs_terminal ON runs (changed_at) WHERE status IN ('completed', 'failed', 'aborted');
CREATE INDEX runs_sandbox_key ON runs (sandbox_key) WHERE sandbox_key IS NOT NULL;

SELECT pg_catalog.pg_extension_config_dump('lock_fences', '');
SELECT pg_catalog.pg_extension_config_dump('locks', '');
SELECT pg_catalog.pg_extension_config_dump('event_logs', '');
SELECT pg_catalog.pg_extension_config_dump('event_log_entries', '');
SELECT pg_catalog.pg_extension_config_dump('event_log_producers', '');
SELECT pg_catalog.pg_extension_config_dump('attention', '');
SELECT pg_catalog.pg_extension_config_dump('reaper_heartbeats', '');
SELECT pg_catalog.pg_extension_config_dump('maintenance_state', '');

-- The registry of thread-owned state that blocks a fork destination. A store
-- that keeps rows per thread adds a branch here (row existence, not content).
-- Lease rows, metadata, blobs and instance rows deliberately do not count.
CREATE VIEW thread_owned_state AS
    SELECT thread_id, 'transcript'::text AS source FROM messages
    UNION ALL SELECT thread_id, 'run' FROM runs
    UNION ALL SELECT thread_id, 'checkpoint' FROM checkpoints
    UNION ALL SELECT thread_id, 'head' FROM checkpoint_threads WHERE head_id IS NOT NULL
    UNION ALL SELECT thread_id, 'generation run' FROM generation_runs
    UNION ALL SELECT thread_id, 'interrupt' FROM interrupts
    UNION ALL SELECT thread_id, 'artifact' FROM artifacts;

SELECT pg_catalog.pg_extension_config_dump('instances', '');
SELECT pg_catalog.pg_extension_config_dump('runs', '');
SELECT pg_catalog.pg_extension_config_dump('messages', '');
SELECT pg_catalog.pg_extension_config_dump('checkpoint_threads', '');
SELECT pg_catalog.pg_extension_config_dump('conversation_messages', '');
SELECT pg_catalog.pg_extension_config_dump('checkpoints', '');
SELECT pg_catalog.pg_extension_config_dump('checkpoint_blob_refs', '');

------------------------------------------------------------------------------
-- Functions. One per store method, named <store>_<method>, equal to its C
-- symbol. All run as the extension owner with a pinned search_path.
------------------------------------------------------------------------------

-- sandbox instances
CREATE FUNCTION instance_get(instance_key text) RETURNS json
    AS 'MODULE_PATHNAME', 'instance_get' LANGUAGE C STABLE;
CREATE FUNCTION instance_upsert(record json) RETURNS void
    AS 'MODULE_PATHNAME', 'instance_upsert' LANGUAGE C VOLATILE;
CREATE FUNCTION instance_delete(instance_key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'instance_delete' LANGUAGE C VOLATILE;

-- runs
CREATE FUNCTION run_create_or_resume(input json) RETURNS json
    AS 'MODULE_PATHNAME', 'run_create_or_resume' LANGUAGE C VOLATILE;
CREATE FUNCTION run_update(run_id text, patch json) RETURNS boolean
    AS 'MODULE_PATHNAME', 'run_update' LANGUAGE C VOLATILE;
CREATE FUNCTION run_get(run_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'run_get' LANGUAGE C STABLE;
CREATE FUNCTION run_find_active_run(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'run_find_active_run' LANGUAGE C STABLE;
CREATE FUNCTION run_list_by_thread(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'run_list_by_thread' LANGUAGE C STABLE;
CREATE FUNCTION run_list_reclaimable(caller_now_ms bigint, ttl_ms bigint) RETURNS json
    AS 'MODULE_PATHNAME', 'run_list_reclaimable' LANGUAGE C STABLE;

-- messages
CREATE FUNCTION message_load_thread(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'message_load_thread' LANGUAGE C STABLE;
CREATE FUNCTION message_save_thread(thread_id text, messages json) RETURNS void
    AS 'MODULE_PATHNAME', 'message_save_thread' LANGUAGE C VOLATILE;

-- interrupts
CREATE FUNCTION interrupt_create(record json) RETURNS boolean
    AS 'MODULE_PATHNAME', 'interrupt_create' LANGUAGE C VOLATILE;
CREATE FUNCTION interrupt_resolve(interrupt_id text, response json DEFAULT NULL,
                                  now_ms bigint DEFAULT NULL) RETURNS boolean
    AS 'MODULE_PATHNAME', 'interrupt_resolve' LANGUAGE C VOLATILE;
CREATE FUNCTION interrupt_cancel(interrupt_id text, now_ms bigint DEFAULT NULL) RETURNS boolean
    AS 'MODULE_PATHNAME', 'interrupt_cancel' LANGUAGE C VOLATILE;
CREATE FUNCTION interrupt_commit_batch(entries json, now_ms bigint DEFAULT NULL) RETURNS void
    AS 'MODULE_PATHNAME', 'interrupt_commit_batch' LANGUAGE C VOLATILE;
CREATE FUNCTION interrupt_get(interrupt_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'interrupt_get' LANGUAGE C STABLE;
CREATE FUNCTION interrupt_list(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'interrupt_list' LANGUAGE C STABLE;
CREATE FUNCTION interrupt_list_pending(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'interrupt_list_pending' LANGUAGE C STABLE;
CREATE FUNCTION interrupt_list_by_run(run_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'interrupt_list_by_run' LANGUAGE C STABLE;
CREATE FUNCTION interrupt_list_pending_by_run(run_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'interrupt_list_pending_by_run' LANGUAGE C STABLE;

-- metadata
CREATE FUNCTION metadata_get(namespace text, meta_key text) RETURNS json
    AS 'MODULE_PATHNAME', 'metadata_get' LANGUAGE C STABLE;
CREATE FUNCTION metadata_set(namespace text, meta_key text, value json) RETURNS void
    AS 'MODULE_PATHNAME', 'metadata_set' LANGUAGE C VOLATILE;
CREATE FUNCTION metadata_delete(namespace text, meta_key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'metadata_delete' LANGUAGE C VOLATILE;

-- generation runs
CREATE FUNCTION generation_run_create_or_resume(input json) RETURNS json
    AS 'MODULE_PATHNAME', 'generation_run_create_or_resume' LANGUAGE C VOLATILE;
CREATE FUNCTION generation_run_update(run_id text, patch json, clear json DEFAULT NULL)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'generation_run_update' LANGUAGE C VOLATILE;
CREATE FUNCTION generation_run_get(run_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'generation_run_get' LANGUAGE C STABLE;
CREATE FUNCTION generation_run_find_latest_for_thread(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'generation_run_find_latest_for_thread' LANGUAGE C STABLE;

-- artifacts
CREATE FUNCTION artifact_save(record json) RETURNS void
    AS 'MODULE_PATHNAME', 'artifact_save' LANGUAGE C VOLATILE;
CREATE FUNCTION artifact_get(artifact_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'artifact_get' LANGUAGE C STABLE;
CREATE FUNCTION artifact_list(run_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'artifact_list' LANGUAGE C STABLE;
CREATE FUNCTION artifact_list_for_thread(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'artifact_list_for_thread' LANGUAGE C STABLE;
CREATE FUNCTION artifact_delete(artifact_id text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'artifact_delete' LANGUAGE C VOLATILE;
CREATE FUNCTION artifact_delete_for_run(run_id text) RETURNS integer
    AS 'MODULE_PATHNAME', 'artifact_delete_for_run' LANGUAGE C VOLATILE;

-- blobs
CREATE FUNCTION blob_put(blob_key text, body bytea, options json DEFAULT NULL,
                         now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'blob_put' LANGUAGE C VOLATILE;
CREATE FUNCTION blob_get(blob_key text, range_offset bigint DEFAULT NULL,
                         range_length bigint DEFAULT NULL)
    RETURNS TABLE (record json, body bytea)
    AS 'MODULE_PATHNAME', 'blob_get' LANGUAGE C STABLE ROWS 1;
CREATE FUNCTION blob_head(blob_key text, now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'blob_head' LANGUAGE C VOLATILE;
CREATE FUNCTION blob_delete(blob_key text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'blob_delete' LANGUAGE C VOLATILE;
CREATE FUNCTION blob_list(prefix text DEFAULT NULL, list_cursor text DEFAULT NULL,
                          page_limit integer DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'blob_list' LANGUAGE C STABLE;
CREATE FUNCTION blob_upload_begin(blob_key text, options json DEFAULT NULL,
                                  now_ms bigint DEFAULT NULL) RETURNS text
    AS 'MODULE_PATHNAME', 'blob_upload_begin' LANGUAGE C VOLATILE;
CREATE FUNCTION blob_upload_append(upload_id text, at_offset bigint, bytes bytea,
                                   now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'blob_upload_append' LANGUAGE C VOLATILE;
CREATE FUNCTION blob_upload_commit(upload_id text, now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'blob_upload_commit' LANGUAGE C VOLATILE;
CREATE FUNCTION blob_upload_abort(upload_id text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'blob_upload_abort' LANGUAGE C VOLATILE;

-- durable runs: claims, locks, event log
CREATE FUNCTION run_claim(run_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'run_claim' LANGUAGE C VOLATILE;
CREATE FUNCTION lock_acquire(lock_key text, ttl_ms bigint, now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'lock_acquire' LANGUAGE C VOLATILE;
CREATE FUNCTION lock_renew(lock_key text, owner_token text, ttl_ms bigint,
                           now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'lock_renew' LANGUAGE C VOLATILE;
CREATE FUNCTION lock_renew_many(leases json, ttl_ms bigint, now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'lock_renew_many' LANGUAGE C VOLATILE;
CREATE FUNCTION lock_release(lock_key text, owner_token text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'lock_release' LANGUAGE C VOLATILE;
CREATE FUNCTION lock_check(lock_key text, owner_token text, fence bigint,
                           now_ms bigint DEFAULT NULL) RETURNS boolean
    AS 'MODULE_PATHNAME', 'lock_check' LANGUAGE C STABLE;
CREATE FUNCTION lock_holder(lock_key text, now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'lock_holder' LANGUAGE C STABLE;
CREATE FUNCTION event_log_append(run_id text, chunks json, options json DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'event_log_append' LANGUAGE C VOLATILE;
CREATE FUNCTION event_log_read(run_id text, after_seq bigint, max_rows integer DEFAULT 1000)
    RETURNS json
    AS 'MODULE_PATHNAME', 'event_log_read' LANGUAGE C STABLE;
CREATE FUNCTION event_log_close(run_id text) RETURNS void
    AS 'MODULE_PATHNAME', 'event_log_close' LANGUAGE C VOLATILE;
CREATE FUNCTION event_log_snapshot(run_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'event_log_snapshot' LANGUAGE C STABLE;
CREATE FUNCTION instance_gc_candidates(retention_ms bigint, max_rows integer DEFAULT 100,
                                       now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'instance_gc_candidates' LANGUAGE C STABLE;

-- maintenance
CREATE FUNCTION maintain(max_rows integer DEFAULT 1000, now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'maintain' LANGUAGE C VOLATILE;
CREATE FUNCTION attention_list() RETURNS json
    AS 'MODULE_PATHNAME', 'attention_list' LANGUAGE C STABLE;
CREATE FUNCTION reaper_heartbeat(replica text, summary json DEFAULT NULL,
                                 now_ms bigint DEFAULT NULL) RETURNS void
    AS 'MODULE_PATHNAME', 'reaper_heartbeat' LANGUAGE C VOLATILE;

-- checkpoints, writer leases and fork
CREATE FUNCTION checkpoint_acquire_writer(thread_id text, lease_ms bigint DEFAULT NULL,
                                          now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_acquire_writer' LANGUAGE C VOLATILE;
CREATE FUNCTION checkpoint_renew_writer(writer json, lease_ms bigint DEFAULT NULL,
                                        now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_renew_writer' LANGUAGE C VOLATILE;
CREATE FUNCTION checkpoint_release_writer(writer json) RETURNS boolean
    AS 'MODULE_PATHNAME', 'checkpoint_release_writer' LANGUAGE C VOLATILE;
CREATE FUNCTION checkpoint_append(input json, conversation json,
                                  now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_append' LANGUAGE C VOLATILE;
CREATE FUNCTION checkpoint_delete_head(input json, now_ms bigint DEFAULT NULL) RETURNS void
    AS 'MODULE_PATHNAME', 'checkpoint_delete_head' LANGUAGE C VOLATILE;
CREATE FUNCTION checkpoint_get(checkpoint_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_get' LANGUAGE C STABLE;
CREATE FUNCTION checkpoint_list(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_list' LANGUAGE C STABLE;
CREATE FUNCTION checkpoint_get_head(thread_id text) RETURNS text
    AS 'MODULE_PATHNAME', 'checkpoint_get_head' LANGUAGE C STABLE;
CREATE FUNCTION checkpoint_list_blob_references() RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_list_blob_references' LANGUAGE C STABLE;
CREATE FUNCTION checkpoint_fork_from_checkpoint(input json, now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_fork_from_checkpoint' LANGUAGE C VOLATILE;

-- administration
CREATE FUNCTION _reset_for_tests() RETURNS void
    AS 'MODULE_PATHNAME', '_reset_for_tests' LANGUAGE C VOLATILE;

-- The watchdog's current items (docs/contract/maintenance.md §3), for maintain().
-- Read-only: an item only reports, it never acts on a run.
CREATE FUNCTION _watchdog_items(now_ms bigint, reaper_ttl_ms bigint, sweep_interval_ms bigint,
                                idle_ms bigint)
RETURNS TABLE (kind text, run_id text, detail json)
LANGUAGE sql STABLE AS $$
    SELECT 'reaper_missing', r.run_id, json_build_object('detachedSince', r.detached_since)
      FROM sandbox_persist.runs r
     WHERE reaper_ttl_ms > 0 AND sweep_interval_ms > 0
       AND r.status = 'running' AND r.detached_since IS NOT NULL
       AND r.detached_since < now_ms - (reaper_ttl_ms + 2 * sweep_interval_ms)
    UNION ALL
    SELECT 'reaper_missing', '', json_build_object('detachedRuns', count(*))
      FROM sandbox_persist.runs r
     WHERE sweep_interval_ms > 0 AND r.status = 'running' AND r.detached_since IS NOT NULL
    HAVING count(*) > 0
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.reaper_heartbeats h
                        WHERE h.seen_at >= now_ms - 2 * sweep_interval_ms)
    UNION ALL
    SELECT 'invisible_run', r.run_id, NULL
      FROM sandbox_persist.runs r
     WHERE r.status = 'running' AND r.detached_since IS NULL AND r.changed_at < now_ms - idle_ms
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks l
                        WHERE l.lock_key = 'run-driver:' || r.run_id AND l.expires_at > now_ms)
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.event_logs e
                        WHERE e.run_id = r.run_id AND e.last_append_at >= now_ms - idle_ms)
    UNION ALL
    SELECT 'stuck_cancel', r.run_id, NULL
      FROM sandbox_persist.runs r
     WHERE r.status = 'running' AND r.cancel_requested AND r.changed_at < now_ms - idle_ms
    UNION ALL
    SELECT 'append_after_close', e.run_id,
           json_build_object('appendsAfterClose', e.appends_after_close)
      FROM sandbox_persist.event_logs e
     WHERE e.appends_after_close > 0
$$;

-- The reaper TTL in milliseconds, for the overview view.
CREATE FUNCTION _reaper_ttl_ms() RETURNS bigint
    AS 'MODULE_PATHNAME', '_reaper_ttl_ms' LANGUAGE C STABLE;

-- Register maintenance as a named pg_cron job in this database. SECURITY
-- INVOKER: the job runs as the role that scheduled it. cron.schedule upserts
-- by name, so calling this twice keeps one job.
CREATE FUNCTION schedule_maintenance(schedule text DEFAULT '* * * * *',
                                     max_rows integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    command text := format('SELECT sandbox_persist.maintain(%s)', max_rows);
BEGIN
    IF max_rows IS NULL OR max_rows < 0 THEN
        RAISE EXCEPTION 'max_rows must be a non-negative integer'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
        RAISE EXCEPTION 'pg_cron is not installed in database %', current_database()
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'pg_cron runs jobs only from the database named by cron.database_name.',
                  HINT = format('In that database run: SELECT cron.schedule_in_database(%L, %L, %L, %L);',
                                'sandbox_persist_maintenance', schedule, command, current_database());
    END IF;
    RETURN cron.schedule('sandbox_persist_maintenance', schedule, command);
END
$$;

-- Remove the maintenance job; false when there was none.
CREATE FUNCTION unschedule_maintenance() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_cron') THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM cron.job WHERE jobname = 'sandbox_persist_maintenance') THEN
        RETURN false;
    END IF;
    RETURN cron.unschedule('sandbox_persist_maintenance');
END
$$;

-- What an operator wants at a glance, in one row.
CREATE VIEW overview AS
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
       FROM blob_chunks c JOIN blobs b ON b.version = c.version)          AS blob_stored_bytes,
    (SELECT count(*) FROM blobs b
      WHERE b.relied_on_at IS NOT NULL
        AND b.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$'
        AND NOT EXISTS (SELECT 1 FROM checkpoint_blob_refs r WHERE r.blob_key = b.blob_key)
        AND NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.blob_key = b.blob_key))
                                                                          AS blobs_awaiting_gc,
    (SELECT count(*) FROM blob_uploads)                                   AS uploads_open,
    (SELECT count(*) FROM attention)                                      AS attention_items,
    (SELECT to_timestamp(last_run_at / 1000.0) FROM maintenance_state)    AS maintenance_last_run,
    (SELECT last_summary FROM maintenance_state)                          AS maintenance_last_summary;

-- Grant an application role everything a TanStack AI app server needs: the
-- schema and EXECUTE on every store function (never the administration ones).
CREATE FUNCTION grant_app_role(app_role regrole) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    fn regprocedure;
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA sandbox_persist TO %s', app_role);
    FOR fn IN
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_depend d ON d.objid = p.oid AND d.classid = 'pg_catalog.pg_proc'::regclass
        JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
        WHERE e.extname = 'sandbox_persist'
          AND p.proname !~ '^_'
          AND p.proname NOT IN ('grant_app_role', 'schedule_maintenance', 'unschedule_maintenance')
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, app_role);
    END LOOP;
END
$$;

-- Every function runs as the extension owner with a pinned search_path, and
-- nothing is callable or readable by PUBLIC until a DBA grants an app role.
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'sandbox_persist'::regnamespace
          AND p.proname NOT IN ('schedule_maintenance', 'unschedule_maintenance')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', fn);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
    END LOOP;
END
$$;
-- maintain() never waits long on application locks; the SET clause scopes it to the call.
ALTER FUNCTION maintain(integer, bigint) SET lock_timeout = '2s';
REVOKE ALL ON FUNCTION schedule_maintenance(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION unschedule_maintenance() FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA sandbox_persist FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA sandbox_persist FROM PUBLIC;
REVOKE ALL ON SCHEMA sandbox_persist FROM PUBLIC;
