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

-- Each distinct conversation message, stored once and shared by every
-- checkpoint that carries it (keyed by the SHA-256 of its exact text).
CREATE TABLE conversation_messages (
    message_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hash       bytea NOT NULL UNIQUE,
    body       text NOT NULL
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
    LOOP
        EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', fn);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
    END LOOP;
END
$$;
REVOKE ALL ON ALL TABLES IN SCHEMA sandbox_persist FROM PUBLIC;
REVOKE ALL ON SCHEMA sandbox_persist FROM PUBLIC;
