-- sandbox_persist 0.2.0 -> 0.3.0. CREATE EXTENSION runs 0.1.0, 0.1.0--0.2.0
-- and then this script; ALTER EXTENSION sandbox_persist UPDATE runs it on a
-- 0.2.0 database (and after 0.1.0--0.2.0 on a 0.1.0 one).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

------------------------------------------------------------------------------
-- revoke_app_role: withdraw what grant_app_role gave. grant_app_role runs as
-- sandbox_persist_owner, so that role is the grantor of the application's
-- USAGE on the schema; the schema itself belongs to the superuser who
-- installed the extension, and DROP OWNED BY (run by a superuser) revokes only
-- grants made by an object's owner: the schema grant survived it and DROP ROLE
-- of the application role failed. The functions an application may execute
-- get one home, _app_functions(), read by both routines.
------------------------------------------------------------------------------
CREATE FUNCTION _app_functions() RETURNS SETOF regprocedure
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT p.oid::regprocedure
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_depend d ON d.objid = p.oid AND d.classid = 'pg_catalog.pg_proc'::regclass
      JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
     WHERE e.extname = 'sandbox_persist'
       AND p.proname !~ '^_'
       AND p.proname NOT IN ('grant_app_role', 'revoke_app_role',
                             'schedule_maintenance', 'unschedule_maintenance')
$$;
COMMENT ON FUNCTION _app_functions() IS
    'Internal: the store functions an application role may execute (everything but the administration routines and the internal ones), as grant_app_role gives them.';

-- CREATE OR REPLACE resets what 0.1.0--0.2.0 set with ALTER FUNCTION, so the
-- definition repeats it: it runs as sandbox_persist_owner, the grantor.
CREATE OR REPLACE FUNCTION grant_app_role(app_role regrole) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fn regprocedure;
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA sandbox_persist TO %s', app_role);
    FOR fn IN SELECT f FROM sandbox_persist._app_functions() f LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', fn, app_role);
    END LOOP;
END
$$;

CREATE FUNCTION revoke_app_role(app_role regrole) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fn regprocedure;
BEGIN
    IF app_role IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE oid = app_role) THEN
        RAISE EXCEPTION 'role % does not exist', coalesce(app_role::oid::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'revoke_app_role withdraws the grants of an existing role.';
    END IF;
    IF app_role = 'sandbox_persist_owner'::regrole THEN
        RAISE EXCEPTION 'cannot revoke the privileges of sandbox_persist_owner'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The extension''s functions run as that role and own every object.';
    END IF;
    FOR fn IN
        SELECT p.oid::regprocedure
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_depend d ON d.objid = p.oid AND d.classid = 'pg_catalog.pg_proc'::regclass
          JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND d.deptype = 'e'
         WHERE e.extname = 'sandbox_persist'
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %s', fn, app_role);
    END LOOP;
    EXECUTE format('REVOKE USAGE ON SCHEMA sandbox_persist FROM %s', app_role);
    -- A grant made by another role (0.1.0's grant_app_role ran as the
    -- installing superuser) is that role's to withdraw.
    IF pg_catalog.has_schema_privilege(app_role, 'sandbox_persist', 'USAGE') THEN
        RAISE WARNING 'role % still has USAGE on schema sandbox_persist', app_role
            USING DETAIL = 'That grant was made by another role than sandbox_persist_owner (0.1.0 granted as the installing superuser), or comes through a role membership.',
                  HINT = 'As a superuser: REVOKE USAGE ON SCHEMA sandbox_persist FROM the role, or DROP OWNED BY it.';
    END IF;
END
$$;
COMMENT ON FUNCTION revoke_app_role(regrole) IS
    'Withdraws from an application role everything grant_app_role gave it (USAGE on the schema, EXECUTE on the store functions), so the role can be dropped. Superuser only.';
-- Self-describing objects (issue 12, item 6). Every function (each overload),
-- table, view and explicit sequence of the extension, and its schema, carries
-- a COMMENT that says what it is for, its key arguments and what it returns,
-- so \df+ sandbox_persist.* and \d+ explain themselves to an operator who has
-- never read the sources. Settings cannot take COMMENT ON: their short and
-- long descriptions are set where the C code defines them. A comment changes
-- no behaviour and no data; CREATE EXTENSION and ALTER EXTENSION UPDATE both
-- run this section, so fresh and upgraded databases carry the same text.
-- test/pgtap/self_describing.sql fails when an object of the extension lacks
-- one: a section that adds an object comments it too.

COMMENT ON SCHEMA sandbox_persist IS
    'TanStack AI agent state (runs, messages, checkpoints, blobs, locks, event logs) kept by the sandbox_persist extension. Call the functions; the tables are private to them.';

-- tables
COMMENT ON TABLE instances IS
    'Sandbox instance store: one row per instance key naming the provider sandbox to resume, its thread, latest snapshot and latest run.';
COMMENT ON TABLE runs IS
    'Run store: one row per agent run with its status, timing, error and usage, plus the durable fields (sandbox key, detachedSince, cancelRequested, driverEpoch) used for takeover.';
COMMENT ON TABLE messages IS
    'Message store: the whole transcript of each chat thread as the exact JSON text last saved.';
COMMENT ON TABLE checkpoint_threads IS
    'One row per checkpoint thread: its lock point, writer lease (owner token, expiry, ever-growing fence) and head checkpoint. Never deleted by maintenance, so the fence never restarts.';
-- The next two comments describe the 0.2.0 layout (message-id arrays per
-- checkpoint), which this same script replaces by the conversation log below;
-- 0.3.0 shipped them so, and the 0.3.0--0.4.0 script corrects them.
COMMENT ON TABLE conversation_messages IS
    'Each distinct conversation message of a checkpoint thread, stored once and keyed by the SHA-256 of its exact text; checkpoints refer to these rows by id.';
COMMENT ON TABLE checkpoints IS
    'Sandbox checkpoints: parent link, reason, label, canonical file entries and artifacts, and the ordered ids of the conversation messages they captured.';
COMMENT ON TABLE checkpoint_blob_refs IS
    'One row per (checkpoint, distinct blob key) it references; blob reference counts and blob garbage collection are derived from these rows.';
COMMENT ON TABLE interrupts IS
    'Interrupt store: human-in-the-loop requests of a run, pending until resolved (with an optional response) or cancelled.';
COMMENT ON TABLE metadata IS
    'Metadata store: any non-null JSON value under a (namespace, key) pair.';
COMMENT ON TABLE generation_runs IS
    'Generation run store: one row per media generation run (activity, provider, model) with its status, result, artifacts and usage.';
COMMENT ON TABLE artifacts IS
    'Artifact store: records of files a run produced (name, MIME type, size, optional blob key or source URL).';
COMMENT ON TABLE blobs IS
    'Blob store objects: one row per key with size, etag, content type and custom metadata, pointing at the version whose chunks hold the bytes.';
COMMENT ON TABLE blob_chunks IS
    'The bytes of blob versions, cut into chunks each stored raw or zstd-compressed; a range read decodes only the chunks it overlaps.';
COMMENT ON TABLE blob_uploads IS
    'Streamed uploads in progress: the staged version, the bytes received so far and the tail not yet filling a chunk. Invisible to readers until commit; idle ones are removed by maintenance.';
COMMENT ON TABLE locks IS
    'LockStore leases: one row per held key with its owner token, fence and server-clock expiry. Expired rows are purged by maintenance.';
COMMENT ON TABLE event_logs IS
    'Durable event log headers: one log per run with its last sequence number, last append time, close time and the count of appends accepted after close.';
COMMENT ON TABLE event_log_entries IS
    'Event log chunks, numbered densely from 1 per log and stored as their exact JSON text.';
COMMENT ON TABLE event_log_producers IS
    'The sequence numbers handed to each (producerId, producerSeq) append, so a retried append gets the same numbers instead of a duplicate.';
COMMENT ON TABLE attention IS
    'Watchdog items maintenance currently reports (a missing reaper, invisible runs, stuck cancels, appends after close), with when each was first and last seen.';
COMMENT ON TABLE reaper_heartbeats IS
    'The last heartbeat of each application reaper replica, with the summary it sent; the watchdog reports detached runs when none is recent.';
COMMENT ON TABLE maintenance_state IS
    'A single row: when maintain() last ran and the counts it returned, shown by the overview view.';

-- sequences
COMMENT ON SEQUENCE blob_versions IS
    'Numbers each staged blob version (a put or an upload), so a new version never reuses the chunks of an old one.';
COMMENT ON SEQUENCE blob_etags IS
    'Source of blob etags: every write of a key gets a new one.';
COMMENT ON SEQUENCE lock_fences IS
    'Lock fences for every key: one global sequence, so a fence keeps growing across release, takeover and purge.';

-- views
COMMENT ON VIEW thread_owned_state IS
    'Registry of thread-scoped state (thread_id, source) that makes a fork destination not empty. A store that keeps rows per thread adds a branch here.';
COMMENT ON VIEW overview IS
    'One row for operators: runs by status, detached runs, held locks, open logs, blob counts and bytes, blobs awaiting collection, open uploads, watchdog items and the last maintenance run.';

-- the columns of the views, which operators read directly
COMMENT ON COLUMN thread_owned_state.thread_id IS 'A thread that holds state a fork destination must not have.';
COMMENT ON COLUMN thread_owned_state.source IS 'What the state is: transcript, run, checkpoint, head, generation run, interrupt or artifact.';
COMMENT ON COLUMN overview.runs_running IS 'Runs whose status is running.';
COMMENT ON COLUMN overview.runs_interrupted IS 'Runs paused for a person (status interrupted).';
COMMENT ON COLUMN overview.runs_completed IS 'Runs whose status is completed.';
COMMENT ON COLUMN overview.runs_failed IS 'Runs whose status is failed.';
COMMENT ON COLUMN overview.runs_aborted IS 'Runs whose status is aborted.';
COMMENT ON COLUMN overview.runs_detached IS 'Running runs whose client went away (detachedSince set), waiting for a takeover or the reaper.';
COMMENT ON COLUMN overview.runs_detached_past_ttl IS 'Detached running runs older than the reaper TTL (sandbox_persist.reaper_ttl); 0 while that setting is 0.';
COMMENT ON COLUMN overview.locks_held IS 'Lock leases not yet expired.';
COMMENT ON COLUMN overview.event_logs_open IS 'Event logs not closed yet.';
COMMENT ON COLUMN overview.blobs IS 'Stored blob objects.';
COMMENT ON COLUMN overview.blob_raw_bytes IS 'Total size of the blob objects, uncompressed.';
COMMENT ON COLUMN overview.blob_stored_bytes IS 'Bytes the current blob chunks take in storage, after compression.';
COMMENT ON COLUMN overview.blobs_awaiting_gc IS 'Content-addressed blobs no checkpoint or artifact references: maintenance deletes them once past sandbox_persist.blob_gc_grace.';
COMMENT ON COLUMN overview.uploads_open IS 'Streamed uploads begun and not yet committed or aborted.';
COMMENT ON COLUMN overview.attention_items IS 'Current watchdog items (see attention_list()).';
COMMENT ON COLUMN overview.maintenance_last_run IS 'When maintain() last ran; NULL if never.';
COMMENT ON COLUMN overview.maintenance_last_summary IS 'The counts the last maintain() returned.';

-- sandbox instances
COMMENT ON FUNCTION instance_get(text) IS
    'Sandbox instance store get: the instance record stored under instance_key as json, or NULL.';
COMMENT ON FUNCTION instance_upsert(json) IS
    'Sandbox instance store put: replaces the whole record given as json {key, provider, providerSandboxId, threadId, updatedAt, latestSnapshotId?, latestRunId?}.';
COMMENT ON FUNCTION instance_delete(text) IS
    'Sandbox instance store delete: removes the record of instance_key; true when a row was removed, false (no error) for an unknown key.';
COMMENT ON FUNCTION instance_gc_candidates(bigint, integer, bigint) IS
    'Instances unchanged for retention_ms that no unfinished run refers to and whose sandbox:<key> lock is free, oldest first, at most max_rows, as json records the application may destroy and then delete. Deletes nothing.';

-- runs
COMMENT ON FUNCTION run_create_or_resume(json) IS
    'Run store createOrResume: inserts {runId, threadId, startedAt, status?} unless the run exists (status defaults to running) and returns the stored run record as json.';
COMMENT ON FUNCTION run_update(text, json) IS
    'Run store update: applies a key-presence-aware patch (absent keys kept, null clears) to run_id; refuses a driverEpoch that does not grow (SP201). True when a row changed.';
COMMENT ON FUNCTION run_get(text) IS
    'Run store get: the run record of run_id as json, or NULL.';
COMMENT ON FUNCTION run_find_active_run(text) IS
    'Run store findActiveRun: the newest running run of thread_id as json, or NULL.';
COMMENT ON FUNCTION run_list_by_thread(text) IS
    'Run store listByThread: the runs of thread_id as a json array, by startedAt then insertion order.';
COMMENT ON FUNCTION run_list_reclaimable(bigint, bigint) IS
    'Run store listReclaimable: running runs detached at or before caller_now_ms - ttl_ms, oldest first, as a json array.';
COMMENT ON FUNCTION run_claim(text) IS
    'Claim step of withRunClaim: bumps driverEpoch of an unfinished run and returns {outcome: claimed, epoch, threadId}, or {outcome: unknown | terminal} with nothing changed. Call it under the run-driver:<runId> lock.';

-- messages
COMMENT ON FUNCTION message_load_thread(text) IS
    'Message store loadThread: the transcript of thread_id as the exact JSON array saved, [] when never saved.';
COMMENT ON FUNCTION message_save_thread(text, json) IS
    'Message store saveThread: replaces the whole transcript of thread_id with the messages array, kept byte for byte.';

-- interrupts
COMMENT ON FUNCTION interrupt_create(json) IS
    'Interrupt store create: inserts a pending interrupt {interruptId, runId, threadId, requestedAt, payload} unless the id exists (never clobbers); true when inserted.';
COMMENT ON FUNCTION interrupt_resolve(text, json, bigint) IS
    'Interrupt store resolve: marks interrupt_id resolved with the response (SQL NULL clears it); true when a row changed. now_ms is a test clock.';
COMMENT ON FUNCTION interrupt_cancel(text, bigint) IS
    'Interrupt store cancel: marks interrupt_id cancelled, keeping any stored response; true when a row changed. now_ms is a test clock.';
COMMENT ON FUNCTION interrupt_commit_batch(json, bigint) IS
    'Interrupt store commitBatch: resolves or cancels every entry of the json array atomically; a duplicate, missing or non-pending id fails the whole batch (SP101-SP103).';
COMMENT ON FUNCTION interrupt_get(text) IS
    'Interrupt store get: the interrupt record of interrupt_id as json, or NULL.';
COMMENT ON FUNCTION interrupt_list(text) IS
    'Interrupt store list: every interrupt of thread_id as a json array, in request order.';
COMMENT ON FUNCTION interrupt_list_pending(text) IS
    'Interrupt store listPending: the pending interrupts of thread_id as a json array, in request order.';
COMMENT ON FUNCTION interrupt_list_by_run(text) IS
    'Interrupt store listByRun: every interrupt of run_id as a json array, in request order.';
COMMENT ON FUNCTION interrupt_list_pending_by_run(text) IS
    'Interrupt store: the pending interrupts of run_id as a json array, in request order.';

-- metadata
COMMENT ON FUNCTION metadata_get(text, text) IS
    'Metadata store get: the JSON value stored under (namespace, meta_key), or NULL.';
COMMENT ON FUNCTION metadata_set(text, text, json) IS
    'Metadata store set: stores value (any JSON but null, kept as sent) under (namespace, meta_key), replacing any previous one.';
COMMENT ON FUNCTION metadata_delete(text, text) IS
    'Metadata store delete: removes (namespace, meta_key); true when a row was removed.';

-- generation runs
COMMENT ON FUNCTION generation_run_create_or_resume(json) IS
    'Generation run store createOrResume: inserts {runId, threadId, activity, provider, model, startedAt, status?} unless the run exists and returns the stored record as json.';
COMMENT ON FUNCTION generation_run_update(text, json, json) IS
    'Generation run store update: applies patch to run_id, then clears the fields named in the clear array (so a null result can be stored as a value); true when a row changed.';
COMMENT ON FUNCTION generation_run_get(text) IS
    'Generation run store get: the generation run record of run_id as json, or NULL.';
COMMENT ON FUNCTION generation_run_find_latest_for_thread(text) IS
    'Generation run store findLatestForThread: the generation run of thread_id with the greatest startedAt (earliest inserted on ties) as json, or NULL.';

-- artifacts
COMMENT ON FUNCTION artifact_save(json) IS
    'Artifact store save: stores the artifact record {artifactId, runId, threadId, name, mimeType, size, createdAt, blobKey?, sourceUrl?}, replacing any record with that id.';
COMMENT ON FUNCTION artifact_get(text) IS
    'Artifact store get: the artifact record of artifact_id as json, or NULL.';
COMMENT ON FUNCTION artifact_list(text) IS
    'Artifact store list: the artifacts of run_id as a json array, by createdAt then id.';
COMMENT ON FUNCTION artifact_list_for_thread(text) IS
    'Artifact store listForThread: the artifacts of thread_id as a json array, by createdAt then id.';
COMMENT ON FUNCTION artifact_delete(text) IS
    'Artifact store delete: removes the record of artifact_id (not its blob); true when a row was removed.';
COMMENT ON FUNCTION artifact_delete_for_run(text) IS
    'Artifact store deleteForRun: removes every artifact record of run_id and returns how many.';

-- blobs
COMMENT ON FUNCTION blob_put(text, bytea, json, bigint) IS
    'Blob store put: writes body under blob_key with options {contentType?, customMetadata?} and returns the object record as json. A content-addressed key must match the SHA-256 of the bytes (SP301).';
COMMENT ON FUNCTION blob_get(text, bigint, bigint) IS
    'Blob store get: one row (record json, body bytea) for blob_key, or none when absent; range_offset and range_length read a slice.';
COMMENT ON FUNCTION blob_head(text, bigint) IS
    'Blob store head: the object record of blob_key as json without its bytes, or NULL; refreshes the garbage-collection time of a content-addressed key.';
COMMENT ON FUNCTION blob_delete(text) IS
    'Blob store delete: removes blob_key and its chunks; true when an object was removed.';
COMMENT ON FUNCTION blob_list(text, text, integer) IS
    'Blob store list: objects whose key starts with prefix, in key order after list_cursor, at most page_limit, as json {objects, truncated, cursor?}.';
COMMENT ON FUNCTION blob_upload_begin(text, json, bigint) IS
    'Streamed upload begin: starts an upload to blob_key with options {contentType?, customMetadata?} and returns its upload id.';
COMMENT ON FUNCTION blob_upload_append(text, bigint, bytea, bigint) IS
    'Streamed upload append: adds bytes to upload_id; at_offset must equal the bytes received so far (SP303). Returns json {received}.';
COMMENT ON FUNCTION blob_upload_commit(text, bigint) IS
    'Streamed upload commit: publishes the uploaded bytes as the object (checking a content address, SP301) and returns its record as json.';
COMMENT ON FUNCTION blob_upload_abort(text) IS
    'Streamed upload abort: discards upload_id and its staged bytes, keeping any existing object; true when an upload was removed.';

-- locks
COMMENT ON FUNCTION lock_acquire(text, bigint, bigint) IS
    'LockStore acquire: takes lock_key for ttl_ms when free or expired and returns {ownerToken, fence, expiresAt}, or NULL at once when another holder is live.';
COMMENT ON FUNCTION lock_renew(text, text, bigint, bigint) IS
    'LockStore renew: extends the lease of lock_key held with owner_token by ttl_ms and returns {expiresAt}, or NULL when the lease is lost.';
COMMENT ON FUNCTION lock_renew_many(json, bigint, bigint) IS
    'LockStore renew of many leases [{key, ownerToken}] in one statement, each by ttl_ms; returns json {renewed: [{key, expiresAt}], lost: [key]}.';
COMMENT ON FUNCTION lock_release(text, text) IS
    'LockStore release: drops lock_key when owner_token holds it and notifies sandbox_persist_lock with the MD5 of the key; true when released.';
COMMENT ON FUNCTION lock_check(text, text, bigint, bigint) IS
    'LockStore check: true while owner_token holds lock_key with that fence and the lease has not expired.';
COMMENT ON FUNCTION lock_holder(text, bigint) IS
    'Diagnostics: the lease row of lock_key as json {fence, acquiredAt, expiresAt, expired}, never the owner token; NULL when there is none.';

-- event log
COMMENT ON FUNCTION event_log_append(text, json, json) IS
    'Durable event log append: adds the chunks array to the log of run_id; options {producerId, producerSeq, fenceEpoch?} make it idempotent and fenced (SP403, SP404). Returns the sequence numbers given.';
COMMENT ON FUNCTION event_log_read(text, bigint, integer) IS
    'Durable event log read: up to max_rows chunks of run_id after after_seq, as json {logId, exists, closed, tail, entries: [{seq, chunk}]}.';
COMMENT ON FUNCTION event_log_close(text) IS
    'Durable event log close: marks the log of run_id closed (idempotent) and notifies its readers on sandbox_persist_event_log.';
COMMENT ON FUNCTION event_log_snapshot(text) IS
    'Durable event log snapshot: every chunk of run_id as a json array [{seq, chunk}], [] for an unknown run.';

-- maintenance
COMMENT ON FUNCTION maintain(integer, bigint) IS
    'One round of safe maintenance, at most max_rows rows per action: collects unreferenced content-addressed blobs, idle uploads, expired locks and old logs and runs, closes finished logs, updates watchdog items. Returns the counts as json.';
COMMENT ON FUNCTION attention_list() IS
    'The current watchdog items as a json array [{kind, runId?, firstSeen, lastSeen, detail?}], oldest first.';
COMMENT ON FUNCTION reaper_heartbeat(text, json, bigint) IS
    'Records that the application reaper of replica just swept, with an optional summary; the watchdog reports detached runs when no heartbeat is recent.';
COMMENT ON FUNCTION schedule_maintenance(text, integer) IS
    'Administration: registers maintain(max_rows) as the pg_cron job sandbox_persist_maintenance on the given cron schedule and returns its job id. Runs as its caller; needs pg_cron in this database.';
COMMENT ON FUNCTION unschedule_maintenance() IS
    'Administration: removes the pg_cron job sandbox_persist_maintenance; false when there was none.';

-- checkpoints
COMMENT ON FUNCTION checkpoint_acquire_writer(text, bigint, bigint) IS
    'Checkpoint store: takes the single writer lease of thread_id for lease_ms (default: the writer_lease_duration setting) and returns the writer {threadId, ownerToken, fence, expiresAt}; SP005 while another lease is live.';
COMMENT ON FUNCTION checkpoint_renew_writer(json, bigint, bigint) IS
    'Checkpoint store: extends the lease of writer by lease_ms and returns {expiresAt}; SP006 once it is lost.';
COMMENT ON FUNCTION checkpoint_release_writer(json) IS
    'Checkpoint store: releases the lease of writer; false (no error) when it is not the holder.';
COMMENT ON FUNCTION checkpoint_append(json, json, bigint) IS
    'Checkpoint store append: adds input.checkpoint after input.expectedHeadId under the held writer lease, capturing the conversation array; returns json {headId}. Refuses a stale head, a parent mismatch or a duplicate id (SP001-SP003).';
COMMENT ON FUNCTION checkpoint_delete_head(json, bigint) IS
    'Checkpoint store deleteHead: removes the head checkpoint named by input {threadId, checkpointId, writer}, making its parent the head; SP004 when it is not the head.';
COMMENT ON FUNCTION checkpoint_get(text) IS
    'Checkpoint store get: the checkpoint of checkpoint_id as json, or NULL.';
COMMENT ON FUNCTION checkpoint_list(text) IS
    'Checkpoint store list: the checkpoints of thread_id as a json array, by createdAt then id.';
COMMENT ON FUNCTION checkpoint_get_head(text) IS
    'Checkpoint store getHead: the id of the head checkpoint of thread_id, or NULL.';
COMMENT ON FUNCTION checkpoint_list_blob_references() IS
    'Checkpoint store: every blob key checkpoints reference with its count, as a json array [{key, references}], read in one snapshot.';
COMMENT ON FUNCTION checkpoint_fork_from_checkpoint(json, bigint) IS
    'Checkpoint store forkFromCheckpoint: copies a source checkpoint and its conversation into an empty destination thread as a new root, under the destination writer lease; returns json {checkpoint}.';

-- administration and internals
COMMENT ON FUNCTION grant_app_role(regrole) IS
    'Administration: grants app_role USAGE on the schema and EXECUTE on every store function (never the administration ones). Run again after an upgrade adds functions.';
COMMENT ON FUNCTION _reset_for_tests() IS
    'Internal, tests only: empties every store. Refused (SP902) unless a superuser set sandbox_persist.allow_test_reset.';
COMMENT ON FUNCTION _watchdog_items(bigint, bigint, bigint, bigint) IS
    'Internal, for maintain(): the watchdog items current at now_ms (kind, run_id, detail), judged with the reaper TTL, sweep interval and idle time given. Reports only, never acts.';
COMMENT ON FUNCTION _reaper_ttl_ms() IS
    'Internal, for the overview view: the sandbox_persist.reaper_ttl setting in milliseconds (0 = unknown).';
-- ---------------------------------------------------------------------------
-- Checkpoint conversations as a per-thread log (issue 13, item 1).
--
-- What: each thread gets an append-only log of message ids (conversation_log,
-- one row per position; positions are handed out from
-- checkpoint_threads.conv_log_end and never reused). A checkpoint's
-- conversation is a set of ranges of its thread's log (conv_ranges, in
-- position order), almost always its parent's ranges plus the block it
-- appended itself (conv_block). conv_len and conv_digest (SHA-256 over the
-- SHA-256 of each message, in order) let an append tell cheaply whether its
-- transcript extends the parent's: then only the new tail is hashed into
-- conversation_messages and logged. deleteHead queues the block its
-- checkpoint appended (conversation_garbage); maintain() action A11 deletes
-- those positions and then the messages no position refers to any more.
-- A fork root gets its own copy of the source's messages in its thread, so
-- every message row belongs to the thread whose log uses it.
--
-- Why: 0.2.0 kept per checkpoint the bigint[] of all its message ids, so K
-- automatic checkpoints of an N-message transcript stored K x N ids, every
-- append hashed and looked up all N messages (drawing N identity values),
-- and unreferenced messages were never collected.
--
-- Data: every 0.2.0 checkpoint is migrated in insertion order; one whose id
-- array starts with its parent's array extends the parent's ranges, any
-- other (a fork root, a rewritten transcript) gets a block of its own.
-- Messages no checkpoint refers to are dropped. The functions that read or
-- write conversations move to new C symbols, so one shared library serves
-- databases at 0.2.0 (old symbols, old layout) and at 0.3.0 alike.
--
-- The identity column checkpoints.seq goes too: nothing reads it (lists
-- order by createdAt and id); this script reads it one last time to migrate
-- in insertion order.
-- ---------------------------------------------------------------------------
ALTER TABLE checkpoint_threads ADD COLUMN conv_log_end bigint NOT NULL DEFAULT 0;

-- One row per position of a thread's conversation log; positions only grow.
CREATE TABLE conversation_log (
    thread_id  text COLLATE "C" NOT NULL,
    pos        bigint NOT NULL,
    message_id bigint NOT NULL,   -- conversation_messages of the same thread
    PRIMARY KEY (thread_id, pos)
);

-- Log blocks of deleted checkpoints, waiting for maintain() (A11).
CREATE TABLE conversation_garbage (
    thread_id text COLLATE "C" NOT NULL,
    block     int8range NOT NULL,
    PRIMARY KEY (thread_id, block)
);

ALTER TABLE checkpoints
    ADD COLUMN conv_ranges int8multirange,  -- log positions of the conversation
    ADD COLUMN conv_block  int8range,       -- the positions this checkpoint appended
    ADD COLUMN conv_len    integer,         -- number of messages
    ADD COLUMN conv_digest bytea;           -- sha256(sha256(m1) || ... || sha256(mN))

DO $migrate$
DECLARE
    c        record;
    p        record;
    base     int8multirange;
    tail     bigint[];
    log_end  bigint;
    n        integer;
BEGIN
    FOR c IN SELECT checkpoint_id, thread_id, parent_id, conversation
               FROM checkpoints ORDER BY thread_id, seq
    LOOP
        SELECT x.conversation, x.conv_ranges INTO p
          FROM checkpoints x WHERE x.checkpoint_id = c.parent_id AND x.thread_id = c.thread_id;
        IF FOUND AND c.conversation[1:cardinality(p.conversation)] = p.conversation THEN
            base := p.conv_ranges;
            tail := c.conversation[cardinality(p.conversation) + 1:];
        ELSE
            base := '{}';
            tail := c.conversation;
        END IF;
        n := coalesce(cardinality(tail), 0);
        SELECT coalesce(max(pos) + 1, 0) INTO log_end
          FROM conversation_log WHERE thread_id = c.thread_id;
        -- a message of another thread (a fork root's) is copied into this one
        INSERT INTO conversation_messages (thread_id, hash, body)
            SELECT DISTINCT ON (m.hash) c.thread_id, m.hash, m.body
              FROM unnest(tail) AS u(id)
              JOIN conversation_messages m ON m.message_id = u.id
             WHERE m.thread_id <> c.thread_id
               AND NOT EXISTS (SELECT 1 FROM conversation_messages o
                                WHERE o.thread_id = c.thread_id AND o.hash = m.hash);
        INSERT INTO conversation_log (thread_id, pos, message_id)
            SELECT c.thread_id, log_end + u.ord - 1, o.message_id
              FROM unnest(tail) WITH ORDINALITY AS u(id, ord)
              JOIN conversation_messages m ON m.message_id = u.id
              JOIN conversation_messages o ON o.thread_id = c.thread_id AND o.hash = m.hash;
        UPDATE checkpoints x
           SET conv_ranges = base + int8multirange(int8range(log_end, log_end + n)),
               conv_block = int8range(log_end, log_end + n),
               conv_len = coalesce(cardinality(c.conversation), 0),
               conv_digest = (SELECT pg_catalog.sha256(coalesce(string_agg(m.hash, ''::bytea ORDER BY u.ord), ''::bytea))
                                FROM unnest(c.conversation) WITH ORDINALITY AS u(id, ord)
                                JOIN conversation_messages m ON m.message_id = u.id)
         WHERE x.checkpoint_id = c.checkpoint_id;
    END LOOP;
    UPDATE checkpoint_threads t SET conv_log_end = l.log_end
      FROM (SELECT thread_id, max(pos) + 1 AS log_end FROM conversation_log GROUP BY thread_id) l
     WHERE t.thread_id = l.thread_id;
    DELETE FROM conversation_messages m
     WHERE NOT EXISTS (SELECT 1 FROM conversation_log l
                        WHERE l.thread_id = m.thread_id AND l.message_id = m.message_id);
END
$migrate$;

ALTER TABLE checkpoints
    ALTER COLUMN conv_ranges SET NOT NULL,
    ALTER COLUMN conv_block SET NOT NULL,
    ALTER COLUMN conv_len SET NOT NULL,
    ALTER COLUMN conv_digest SET NOT NULL,
    DROP COLUMN conversation,
    DROP COLUMN seq;

SELECT pg_catalog.pg_extension_config_dump('conversation_log', '');
SELECT pg_catalog.pg_extension_config_dump('conversation_garbage', '');
COMMENT ON TABLE conversation_log IS
    'Each thread''s conversation log: one row per position (only ever growing) naming a stored message of that thread; a checkpoint''s conversation is a set of ranges of it.';
COMMENT ON TABLE conversation_garbage IS
    'Log blocks appended by checkpoints that deleteHead removed, queued for maintain() (action A11) to delete with the messages nothing names any more.';

-- The functions that read or write conversations, on their 0.3.0 symbols
-- (CREATE OR REPLACE resets the attributes, so they are restated).
CREATE OR REPLACE FUNCTION checkpoint_append(input json, conversation json,
                                             now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_append_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION checkpoint_delete_head(input json, now_ms bigint DEFAULT NULL) RETURNS void
    AS 'MODULE_PATHNAME', 'checkpoint_delete_head_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION checkpoint_get(checkpoint_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_get_v3' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION checkpoint_list(thread_id text) RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_list_v3' LANGUAGE C STABLE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION checkpoint_fork_from_checkpoint(input json, now_ms bigint DEFAULT NULL)
    RETURNS json
    AS 'MODULE_PATHNAME', 'checkpoint_fork_from_checkpoint_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
-- Row limits: one rule for every function with a row-limit argument
-- (docs/architecture.md, "Row limits"). SQL NULL means the documented
-- default, exactly as if the argument were left out; zero asks for no rows; a
-- negative limit is 22023. maintain, instance_gc_candidates and blob_list
-- follow it in C; schedule_maintenance refused NULL (22023) and now schedules
-- maintain() with its own default, so that default is written in one place.
-- Only the body changes: signature, owner, grants and settings stay.
CREATE OR REPLACE FUNCTION schedule_maintenance(schedule text DEFAULT '* * * * *',
                                                max_rows integer DEFAULT 1000) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    command text := CASE WHEN max_rows IS NULL THEN 'SELECT sandbox_persist.maintain()'
                         ELSE format('SELECT sandbox_persist.maintain(%s)', max_rows) END;
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
    RETURN cron.schedule('sandbox_persist_maintenance', schedule, command);
END
$$;
-- Small blobs inline (issue 13). A non-empty object of at most one chunk
-- (and at most sandbox_persist.blob_inline_max bytes) is kept in its blobs
-- row: inline_codec and inline_data hold what its one chunk row would hold
-- (zstd or raw, compressed by the extension, so TOAST must not compress it
-- again: STORAGE EXTERNAL, which also lets a ranged read of a raw object
-- fetch only the TOAST pieces it needs). A put of such an object is one
-- statement and leaves one heap row and one primary-key entry instead of two
-- rows and two index entries. Both are NULL for a chunked (or empty) object;
-- existing objects stay chunked and read as before, so nothing is migrated.
-- blob_put, blob_get and blob_upload_commit now run the library's _v3
-- entry points, which know the columns (the previous ones keep serving
-- databases not yet updated); attributes are those 0.1.0 gave them.
------------------------------------------------------------------------------
ALTER TABLE blobs
    ADD COLUMN inline_codec smallint,
    ADD COLUMN inline_data bytea,
    ADD CONSTRAINT blobs_inline_codec CHECK (inline_codec IN (0, 1)),   -- 0 raw, 1 zstd
    ADD CONSTRAINT blobs_inline_whole CHECK ((inline_codec IS NULL) = (inline_data IS NULL));
ALTER TABLE blobs ALTER COLUMN inline_data SET STORAGE EXTERNAL;

CREATE OR REPLACE FUNCTION blob_put(blob_key text, body bytea, options json DEFAULT NULL,
                                    now_ms bigint DEFAULT NULL) RETURNS json
    AS 'MODULE_PATHNAME', 'blob_put_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION blob_get(blob_key text, range_offset bigint DEFAULT NULL,
                                    range_length bigint DEFAULT NULL)
    RETURNS TABLE (record json, body bytea)
    AS 'MODULE_PATHNAME', 'blob_get_v3' LANGUAGE C STABLE ROWS 1
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
CREATE OR REPLACE FUNCTION blob_upload_commit(upload_id text, now_ms bigint DEFAULT NULL)
    RETURNS json
    AS 'MODULE_PATHNAME', 'blob_upload_commit_v3' LANGUAGE C VOLATILE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

------------------------------------------------------------------------------
-- overview.blob_stored_bytes counts inline objects too (the section above):
-- their compressed bytes live in blobs.inline_data, not in chunk rows. The
-- view is otherwise the one 0.1.0 created, column for column.
------------------------------------------------------------------------------
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
    (SELECT last_summary FROM maintenance_state)                          AS maintenance_last_summary;
-- Cross-shard fork and thread moves (docs/architecture.md "Cross-shard fork
-- and thread moves"). With the stores spread over several servers behind a
-- PL/Proxy router, a fork may have its source on one shard and its
-- destination on another, and a whole thread may be moved to rebalance. The
-- router (router/cross_shard.sql) orchestrates; these are the shard halves.
--
--   * _checkpoint_export_fork / _checkpoint_import_fork: a fork whose source is
--     read on its shard and given to the destination's shard as data. The
--     import keeps the local fork's check order and contract errors and
--     publishes through the same C routine; it also requires every blob the
--     root references on its own shard (SP015), so reference counts and GC
--     stay exact per shard.
--   * thread_moves: one row per thread being moved out of, moved out of, or
--     imported into this shard. While a thread is 'moving' (or after it has
--     'moved'), every write to its thread-owned rows here is refused with
--     SP014 by a row trigger, so the exported copy cannot go stale and a
--     stale route cannot recreate the thread on the old shard.
--   * _thread_move_begin, _thread_export, _thread_import, _thread_drop,
--     _thread_move_finish, _thread_move_imported, _thread_move_abort: the steps of a move, each
--     idempotent, so a router that died mid-move resumes by calling
--     thread_move again. Internal (leading underscore): grant_app_role never
--     passes them on.
------------------------------------------------------------------------------
CREATE TABLE thread_moves (
    thread_id  text COLLATE "C" PRIMARY KEY,
    -- moving: marked on the source, writes refused, export under way;
    -- dropping: only ever seen inside _thread_drop's own transaction;
    -- moved: the source copy is gone (a tombstone that keeps refusing writes);
    -- imported: on the destination, the import committed, finish pending
    state      text NOT NULL CHECK (state IN ('moving', 'dropping', 'moved', 'imported')),
    peer_shard integer NOT NULL,   -- the other end: destination on a source, source on a destination
    since      bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('thread_moves', '');

-- The write guard of a moving thread (src/thread_moves.c), a row trigger on
-- every table a thread owns. Every writer of a thread-owned row first takes a
-- shared transaction-level advisory lock on the thread's bucket (class 5316,
-- key hashtext(thread_id) & 255: a bulk write over many threads holds at most
-- 256 of them, never enough to exhaust the lock table); _thread_move_begin
-- takes it exclusively before it marks the thread, so it waits for writes
-- already past this check and every later write sees the mark, read with a
-- fresh snapshot. 'dropping' is never
-- committed, so only _thread_drop's own deletes pass. Deletes by maintenance
-- (run retention) are not guarded: they remove nothing a reader of the moved
-- thread could miss, and a refusal would fail the whole maintenance call.
-- Without arguments a row's thread_id names its thread; with 'run'
-- (event_logs) its run_id does, through the run record: a log without one
-- belongs to no thread and is never refused. Every append updates the log
-- row, so that trigger guards the creation of a log and every append. A close
-- (closed_at set) passes: maintenance closes idle logs and must not fail on a
-- moving thread; a close lost with the source copy leaves the log open on the
-- destination, where maintenance closes it again.
CREATE FUNCTION _thread_write_guard() RETURNS trigger
    AS 'MODULE_PATHNAME', '_thread_write_guard' LANGUAGE C VOLATILE SECURITY DEFINER;
CREATE TRIGGER event_log_write_guard BEFORE INSERT OR UPDATE ON event_logs
    FOR EACH ROW EXECUTE FUNCTION _thread_write_guard('run');
CREATE TRIGGER thread_write_guard BEFORE INSERT OR UPDATE ON checkpoint_threads
    FOR EACH ROW EXECUTE FUNCTION _thread_write_guard();
CREATE TRIGGER thread_write_guard BEFORE INSERT OR UPDATE OR DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION _thread_write_guard();
CREATE TRIGGER thread_write_guard BEFORE INSERT OR UPDATE ON runs
    FOR EACH ROW EXECUTE FUNCTION _thread_write_guard();
CREATE TRIGGER thread_write_guard BEFORE INSERT OR UPDATE OR DELETE ON interrupts
    FOR EACH ROW EXECUTE FUNCTION _thread_write_guard();
CREATE TRIGGER thread_write_guard BEFORE INSERT OR UPDATE OR DELETE ON generation_runs
    FOR EACH ROW EXECUTE FUNCTION _thread_write_guard();
CREATE TRIGGER thread_write_guard BEFORE INSERT OR UPDATE OR DELETE ON artifacts
    FOR EACH ROW EXECUTE FUNCTION _thread_write_guard();

-- What a fork needs from the source's shard: the checkpoint as
-- checkpoint_get returns it (files, artifacts and conversation included),
-- whether its reference rows cover every distinct key (the local fork's
-- integrity check, step 9), its distinct keys, and those of them this shard
-- holds no bytes for (the contract lets a checkpoint name such keys; the
-- import then does not require them either). No row when no checkpoint has
-- the id. The checkpoint is immutable, so this read cannot go stale. A row,
-- not one JSON document: a router reads the keys without parsing the
-- conversation (json operators refuse a \u0000 in it) and passes the
-- checkpoint on byte for byte.
CREATE FUNCTION _checkpoint_export_fork(checkpoint_id text)
RETURNS TABLE (checkpoint json, references_complete boolean, blob_keys text[],
               absent_blob_keys text[])
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH c AS (
        SELECT c.checkpoint_id, c.files, c.artifacts
          FROM sandbox_persist.checkpoints c WHERE c.checkpoint_id = $1
    ), k AS (
        SELECT DISTINCT e->>'blobKey' AS key
          FROM c, LATERAL (SELECT json_array_elements(c.files) AS e
                           UNION ALL SELECT json_array_elements(c.artifacts)) x
         WHERE e->>'blobKey' IS NOT NULL
    )
    SELECT sandbox_persist.checkpoint_get($1),
           (SELECT count(*) FROM k) = (SELECT count(*) FROM sandbox_persist.checkpoint_blob_refs r
                                        WHERE r.checkpoint_id = $1
                                          AND r.blob_key IN (SELECT key FROM k)),
           ARRAY(SELECT key FROM k ORDER BY key),
           ARRAY(SELECT key FROM k
                  WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b WHERE b.blob_key = k.key)
                  ORDER BY key)
      FROM c
$$;

-- The destination half of a cross-shard fork (src/checkpoint_import.c).
CREATE FUNCTION _checkpoint_import_fork(input json, source json, now_ms bigint DEFAULT NULL)
RETURNS json
    AS 'MODULE_PATHNAME', '_checkpoint_import_fork' LANGUAGE C VOLATILE SECURITY DEFINER;

-- Raise 55000 for a move step called in the wrong state.
CREATE FUNCTION _thread_move_refuse(thread_id text, what text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'thread move step refused: %', what
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = format('Thread "%s": %s.', thread_id, what);
END
$$;

-- Step 1, on the source: mark the thread moving to `to_shard`, after every
-- write already under way has committed (the guard's advisory lock). Returns
-- {state}: 'moving' (marked now or before), or 'moved' when an earlier run of
-- the same move already dropped the source copy.
CREATE FUNCTION _thread_move_begin(thread_id text, to_shard integer) RETURNS json
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    m sandbox_persist.thread_moves%ROWTYPE;
BEGIN
    IF thread_id IS NULL OR thread_id = '' OR to_shard IS NULL OR to_shard < 0 THEN
        RAISE EXCEPTION 'invalid thread move'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A move needs a non-empty thread id and a shard number >= 0.';
    END IF;
    IF octet_length(thread_id) > 1024 THEN   -- the identifier limit of every store
        RAISE EXCEPTION 'thread_id is too long'
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = format('It has %s UTF-8 bytes; the limit is 1024.', octet_length(thread_id));
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(5314, pg_catalog.hashtext(thread_id));
    -- the write guard's bucket (src/thread_moves.c), exclusively
    PERFORM pg_catalog.pg_advisory_xact_lock(5316, pg_catalog.hashtext(thread_id) & 255);
    SELECT * INTO m FROM sandbox_persist.thread_moves t WHERE t.thread_id = _thread_move_begin.thread_id;
    IF NOT FOUND THEN
        INSERT INTO sandbox_persist.thread_moves VALUES
            (thread_id, 'moving', to_shard,
             (extract(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint);
        RETURN json_build_object('state', 'moving');
    ELSIF m.state IN ('moving', 'moved') AND m.peer_shard = to_shard THEN
        RETURN json_build_object('state', m.state);
    ELSIF m.state = 'imported' THEN
        PERFORM sandbox_persist._thread_move_refuse(thread_id,
            'its move into this shard has not been finished yet');
    END IF;
    PERFORM sandbox_persist._thread_move_refuse(thread_id,
        format('it is already %s shard %s', CASE m.state WHEN 'moving' THEN 'moving to' ELSE 'on' END,
               m.peer_shard));
    RETURN NULL;
END
$$;

-- Step 2, on the source: everything the thread owns here, as one document
-- read in one snapshot. json columns travel as their exact text (a JSON
-- string), so SQL NULL and a stored JSON null stay distinct; rows keep their
-- insertion order. The event logs of the thread's runs travel with them
-- (the router places a run's log with the run's thread); a log without a run
-- record here belongs to no thread and stays. Instances, metadata and locks
-- are not thread-owned (contract §7.2) and stay where their keys place them;
-- a run-driver lock lapses and is taken again on the new shard.
CREATE FUNCTION _thread_export(thread_id text) RETURNS json
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t constant text := thread_id;
    doc json;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM sandbox_persist.thread_moves m
                    WHERE m.thread_id = t AND m.state = 'moving') THEN
        PERFORM sandbox_persist._thread_move_refuse(t, 'it is not marked as moving on this shard');
    END IF;
    WITH keys AS (
        SELECT DISTINCT key FROM (
            SELECT r.blob_key AS key FROM sandbox_persist.checkpoint_blob_refs r
              JOIN sandbox_persist.checkpoints c USING (checkpoint_id) WHERE c.thread_id = t
            UNION ALL
            SELECT a.blob_key FROM sandbox_persist.artifacts a
             WHERE a.thread_id = t AND a.blob_key ~ '^sandbox-(files|artifacts)/sha256/[0-9a-f]{64}$') k
    )
    SELECT json_build_object(
        'threadId', t,
        'thread', (SELECT json_build_object('fence', x.fence, 'ownerToken', x.owner_token,
                                            'leaseExpiresAt', x.lease_expires_at, 'headId', x.head_id,
                                            'convLogEnd', x.conv_log_end)
                     FROM sandbox_persist.checkpoint_threads x WHERE x.thread_id = t),
        'transcript', (SELECT json_build_object('transcript', x.transcript::text, 'updatedAt', x.updated_at)
                         FROM sandbox_persist.messages x WHERE x.thread_id = t),
        'conversationMessages', (SELECT coalesce(json_agg(json_build_object(
                 'messageId', x.message_id, 'hash', encode(x.hash, 'hex'), 'body', x.body)
                 ORDER BY x.message_id), '[]')
               FROM sandbox_persist.conversation_messages x WHERE x.thread_id = t),
        -- the conversation log moves whole, so positions and ranges stay valid
        'conversationLog', (SELECT coalesce(json_agg(json_build_array(x.pos, x.message_id)
                 ORDER BY x.pos), '[]')
               FROM sandbox_persist.conversation_log x WHERE x.thread_id = t),
        'conversationGarbage', (SELECT coalesce(json_agg(x.block::text ORDER BY x.block), '[]')
               FROM sandbox_persist.conversation_garbage x WHERE x.thread_id = t),
        'checkpoints', (SELECT coalesce(json_agg(json_build_object(
                 'checkpointId', x.checkpoint_id, 'parentId', x.parent_id, 'createdAt', x.created_at,
                 'reason', x.reason, 'label', x.label, 'sourceRunId', x.source_run_id,
                 'files', x.files::text, 'artifacts', x.artifacts::text,
                 'convRanges', x.conv_ranges::text, 'convBlock', x.conv_block::text,
                 'convLen', x.conv_len, 'convDigest', encode(x.conv_digest, 'hex'))
                 ORDER BY x.created_at, x.checkpoint_id), '[]')
               FROM sandbox_persist.checkpoints x WHERE x.thread_id = t),
        'references', (SELECT coalesce(json_agg(json_build_object(
                 'checkpointId', r.checkpoint_id, 'blobKey', r.blob_key)
                 ORDER BY r.checkpoint_id, r.blob_key), '[]')
               FROM sandbox_persist.checkpoint_blob_refs r
               JOIN sandbox_persist.checkpoints c USING (checkpoint_id) WHERE c.thread_id = t),
        'runs', (SELECT coalesce(json_agg(json_build_object(
                 'runId', x.run_id, 'status', x.status, 'startedAt', x.started_at,
                 'finishedAt', x.finished_at, 'error', x.error::text, 'usage', x.usage::text,
                 'sandboxKey', x.sandbox_key, 'detachedSince', x.detached_since,
                 'cancelRequested', x.cancel_requested, 'driverEpoch', x.driver_epoch,
                 'changedAt', x.changed_at, 'statusChangedAt', x.status_changed_at)
                 ORDER BY x.seq), '[]')
               FROM sandbox_persist.runs x WHERE x.thread_id = t),
        'interrupts', (SELECT coalesce(json_agg(json_build_object(
                 'interruptId', x.interrupt_id, 'runId', x.run_id, 'status', x.status,
                 'requestedAt', x.requested_at, 'resolvedAt', x.resolved_at,
                 'payload', x.payload::text, 'response', x.response::text) ORDER BY x.seq), '[]')
               FROM sandbox_persist.interrupts x WHERE x.thread_id = t),
        'generationRuns', (SELECT coalesce(json_agg(json_build_object(
                 'runId', x.run_id, 'activity', x.activity, 'provider', x.provider,
                 'model', x.model, 'status', x.status, 'startedAt', x.started_at,
                 'finishedAt', x.finished_at, 'error', x.error::text, 'result', x.result::text,
                 'artifacts', x.artifacts::text, 'usage', x.usage::text) ORDER BY x.seq), '[]')
               FROM sandbox_persist.generation_runs x WHERE x.thread_id = t),
        'artifacts', (SELECT coalesce(json_agg(json_build_object(
                 'artifactId', x.artifact_id, 'runId', x.run_id, 'blobKey', x.blob_key,
                 'name', x.name, 'mimeType', x.mime_type, 'size', x.size,
                 'sourceUrl', x.source_url, 'createdAt', x.created_at)
                 ORDER BY x.created_at, x.artifact_id), '[]')
               FROM sandbox_persist.artifacts x WHERE x.thread_id = t),
        'eventLogs', (SELECT coalesce(json_agg(json_build_object(
                 'runId', l.run_id, 'tailSeq', l.tail_seq, 'createdAt', l.created_at,
                 'lastAppendAt', l.last_append_at, 'closedAt', l.closed_at,
                 'appendsAfterClose', l.appends_after_close,
                 'entries', (SELECT coalesce(json_agg(json_build_array(e.seq, e.chunk::text)
                                                      ORDER BY e.seq), '[]')
                               FROM sandbox_persist.event_log_entries e WHERE e.log_id = l.log_id),
                 'producers', (SELECT coalesce(json_agg(json_build_array(p.producer_id, p.producer_seq,
                                                                         p.first_seq, p.chunk_count)
                                                        ORDER BY p.producer_id, p.producer_seq), '[]')
                                 FROM sandbox_persist.event_log_producers p WHERE p.log_id = l.log_id))
                 ORDER BY l.log_id), '[]')
               FROM sandbox_persist.event_logs l
               JOIN sandbox_persist.runs r ON r.run_id = l.run_id WHERE r.thread_id = t),
        'blobKeys', (SELECT coalesce(json_agg(key ORDER BY key), '[]') FROM keys),
        'absentBlobKeys', (SELECT coalesce(json_agg(key ORDER BY key), '[]') FROM keys
                            WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.blobs b
                                               WHERE b.blob_key = keys.key)))
      INTO doc;
    RETURN doc;
END
$$;

-- Step 4, on the destination (after the router copied the blobs): insert
-- the exported thread in one transaction, or nothing. Refused (55000) when
-- this shard already holds state of the thread or one of its ids; SP015 when
-- a blob the source holds is not here. Idempotent: a second call after a
-- committed import finds the 'imported' mark and changes nothing. The fence
-- never goes back: an older lease row here keeps the larger fence.
CREATE FUNCTION _thread_import(thread_id text, from_shard integer, doc json) RETURNS json
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
                  DETAIL = format('SANDBOX_SNAPSHOT_FORK_BLOB_MISSING: Thread "%s" references blobs this shard does not hold: %s.', t, missing);
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
    INSERT INTO sandbox_persist.event_log_entries (log_id, seq, chunk)
    SELECT l.log_id, (en->>0)::bigint, (en->>1)::json
      FROM json_array_elements(doc->'eventLogs') AS e(v)
      JOIN sandbox_persist.event_logs l ON l.run_id = e.v->>'runId',
           LATERAL json_array_elements(e.v->'entries') AS en;
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

-- Step 6, on the source (after the router wrote the placement override):
-- delete the source copy and leave a 'moved' tombstone that keeps refusing
-- writes a stale route might still send here. Idempotent.
CREATE FUNCTION _thread_drop(thread_id text) RETURNS json
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t constant text := thread_id;
    m sandbox_persist.thread_moves%ROWTYPE;
BEGIN
    SELECT * INTO m FROM sandbox_persist.thread_moves x WHERE x.thread_id = t FOR UPDATE;
    IF FOUND AND m.state = 'moved' THEN
        RETURN json_build_object('dropped', false);
    ELSIF NOT FOUND OR m.state <> 'moving' THEN
        PERFORM sandbox_persist._thread_move_refuse(t, 'it is not marked as moving on this shard');
    END IF;
    -- the guard lets this transaction's own deletes through ('dropping' is never committed)
    UPDATE sandbox_persist.thread_moves x SET state = 'dropping' WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.checkpoints x WHERE x.thread_id = t;   -- references cascade
    DELETE FROM sandbox_persist.conversation_log x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.conversation_garbage x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.conversation_messages x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.messages x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.interrupts x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.artifacts x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.generation_runs x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.event_log_entries e USING sandbox_persist.event_logs l, sandbox_persist.runs r
     WHERE e.log_id = l.log_id AND l.run_id = r.run_id AND r.thread_id = t;
    DELETE FROM sandbox_persist.event_log_producers p USING sandbox_persist.event_logs l, sandbox_persist.runs r
     WHERE p.log_id = l.log_id AND l.run_id = r.run_id AND r.thread_id = t;
    DELETE FROM sandbox_persist.event_logs l USING sandbox_persist.runs r
     WHERE l.run_id = r.run_id AND r.thread_id = t;
    DELETE FROM sandbox_persist.runs x WHERE x.thread_id = t;
    DELETE FROM sandbox_persist.checkpoint_threads x WHERE x.thread_id = t;
    UPDATE sandbox_persist.thread_moves x
       SET state = 'moved', since = (extract(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint
     WHERE x.thread_id = t;
    RETURN json_build_object('dropped', true);
END
$$;

-- Step 7, on the destination: the move is complete; forget the 'imported'
-- mark (so the thread can later move on). Idempotent.
CREATE FUNCTION _thread_move_finish(thread_id text) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH d AS (DELETE FROM sandbox_persist.thread_moves x
                WHERE x.thread_id = $1 AND x.state = 'imported' RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM d)
$$;

-- On the destination, for a router deciding after a failed import call
-- whether the import committed (then the move goes on) or not (then the
-- source may be released): waits for an import of the thread still in
-- flight, then reports the 'imported' mark.
CREATE FUNCTION _thread_move_imported(thread_id text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(5314, pg_catalog.hashtext(thread_id));
    RETURN EXISTS (SELECT 1 FROM sandbox_persist.thread_moves x
                    WHERE x.thread_id = _thread_move_imported.thread_id AND x.state = 'imported');
END
$$;

-- On the source, when a move gives up before its import committed: the
-- thread is writable here again. Refuses nothing; false when not marked.
CREATE FUNCTION _thread_move_abort(thread_id text) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH d AS (DELETE FROM sandbox_persist.thread_moves x
                WHERE x.thread_id = $1 AND x.state = 'moving' RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM d)
$$;

-- What each object of the move and cross-shard fork section is for.
COMMENT ON TABLE thread_moves IS
    'Threads moving out of this shard (''moving''), moved out (''moved'': a tombstone that keeps refusing writes a stale route sends here) or imported into it (''imported'' until the router finishes the move); the write guard reads it.';
COMMENT ON FUNCTION _thread_write_guard() IS
    'Internal: the row trigger on every thread-owned table that refuses a write to a moving or moved thread with SP014 (SANDBOX_THREAD_MOVING).';
COMMENT ON FUNCTION _checkpoint_export_fork(text) IS
    'Internal, called by the router on the source shard of a cross-shard fork: the checkpoint as checkpoint_get returns it, whether its reference rows are complete, its distinct blob keys and those this shard holds no bytes for.';
COMMENT ON FUNCTION _checkpoint_import_fork(json, json, bigint) IS
    'Internal, called by the router on the destination shard of a cross-shard fork: the local fork''s checks and publish step with the source checkpoint given as data; SP015 when a referenced blob is not on this shard.';
COMMENT ON FUNCTION _thread_move_refuse(text, text) IS
    'Internal: raises the error of a move step that cannot run (the thread''s move state, or its data here, does not allow it).';
COMMENT ON FUNCTION _thread_move_begin(text, integer) IS
    'Internal, move step 1 on the source shard: waits for writes in flight, then marks the thread as moving so every later write to it is refused (SP014). Idempotent.';
COMMENT ON FUNCTION _thread_export(text) IS
    'Internal, move step 2 on the source shard: everything the moving thread owns (lease and head, transcript, conversation log and messages, checkpoints and references, runs, interrupts, generation runs, artifacts, event logs) and its blob keys, as one JSON document.';
COMMENT ON FUNCTION _thread_import(text, integer, json) IS
    'Internal, move step 4 on the destination shard: inserts an exported thread in one transaction or nothing; refused when this shard already holds state or ids of the thread, SP015 when a blob is missing. Idempotent.';
COMMENT ON FUNCTION _thread_drop(text) IS
    'Internal, move step 6 on the source shard: deletes the moved thread''s rows and leaves a ''moved'' tombstone. Idempotent.';
COMMENT ON FUNCTION _thread_move_finish(text) IS
    'Internal, move step 7 on the destination shard: forgets the ''imported'' mark once the move is complete. Idempotent.';
COMMENT ON FUNCTION _thread_move_imported(text) IS
    'Internal: whether an import of the thread has committed on this shard (waits for one still in flight), so a resumed move knows where it stopped.';
COMMENT ON FUNCTION _thread_move_abort(text) IS
    'Internal: ends a move that has not been imported, on the source shard: the thread takes writes again.';

-- runs: updates that can be HOT (heap-only tuples).
-- Every write sets runs.changed_at (the server clock of the last write: the
-- watchdog's "row activity", A4's and A6's "unchanged that long"), and
-- runs_running and runs_terminal were keyed on it, so no update of a run could
-- be HOT: each rewrote all six indexes. The two partial indexes are now keyed
-- on a new column, status_changed_at, the server clock of the last change of
-- status (set at creation and when a patch changes the status, never by a
-- durable-field, usage, error or finishedAt patch). It is never later than
-- changed_at, so "status_changed_at < cutoff" is a safe bound for a scan
-- that then tests changed_at itself: A6 (maintain) walks runs_terminal in
-- status_changed_at order, and the watchdog's invisible_run and stuck_cancel
-- bound their runs_running scan the same way (their conditions unchanged).
-- Existing rows take their changed_at (the latest their status can have
-- changed); 0, the default, means "unknown, as old as possible", which keeps
-- the bound safe for a writer that does not set it. fillfactor 90 leaves
-- room on each page for the new version of a row, so an update stays on its
-- page; it applies to pages written from now on.
------------------------------------------------------------------------------
ALTER TABLE runs ADD COLUMN status_changed_at bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN runs.status_changed_at IS
    'Server clock (epoch ms) of the last change of status; never later than changed_at. 0 = unknown.';
UPDATE runs SET status_changed_at = changed_at;
DROP INDEX runs_running;
DROP INDEX runs_terminal;
CREATE INDEX runs_running ON runs (status_changed_at) WHERE status = 'running';
CREATE INDEX runs_terminal ON runs (status_changed_at)
    WHERE status IN ('completed', 'failed', 'aborted');
ALTER TABLE runs SET (fillfactor = 90);

-- _watchdog_items keeps its signature and, like every function of the
-- extension, SECURITY DEFINER with the pinned search_path (CREATE OR REPLACE
-- would otherwise reset both).
CREATE OR REPLACE FUNCTION _watchdog_items(now_ms bigint, reaper_ttl_ms bigint,
                                           sweep_interval_ms bigint, idle_ms bigint)
RETURNS TABLE (kind text, run_id text, detail json)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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
     WHERE r.status = 'running' AND r.detached_since IS NULL
       AND r.status_changed_at < now_ms - idle_ms AND r.changed_at < now_ms - idle_ms
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.locks l
                        WHERE l.lock_key = 'run-driver:' || r.run_id AND l.expires_at > now_ms)
       AND NOT EXISTS (SELECT 1 FROM sandbox_persist.event_logs e
                        WHERE e.run_id = r.run_id AND e.last_append_at >= now_ms - idle_ms)
    UNION ALL
    SELECT 'stuck_cancel', r.run_id, NULL
      FROM sandbox_persist.runs r
     WHERE r.status = 'running' AND r.cancel_requested
       AND r.status_changed_at < now_ms - idle_ms AND r.changed_at < now_ms - idle_ms
    UNION ALL
    SELECT 'append_after_close', e.run_id,
           json_build_object('appendsAfterClose', e.appends_after_close)
      FROM sandbox_persist.event_logs e
     WHERE e.appends_after_close > 0
$$;

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
