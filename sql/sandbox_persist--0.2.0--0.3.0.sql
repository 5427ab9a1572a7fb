-- sandbox_persist 0.2.0 -> 0.3.0. CREATE EXTENSION runs 0.1.0, 0.1.0--0.2.0
-- and then this script; ALTER EXTENSION sandbox_persist UPDATE runs it on a
-- 0.2.0 database (and after 0.1.0--0.2.0 on a 0.1.0 one).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

------------------------------------------------------------------------------
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
-- shared transaction-level advisory lock on the thread (class 5314, key
-- hashtext(thread_id)); _thread_move_begin takes it exclusively before it
-- marks the thread, so it waits for writes already past this check and every
-- later write sees the mark, read with a fresh snapshot. 'dropping' is never
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
                                            'leaseExpiresAt', x.lease_expires_at, 'headId', x.head_id)
                     FROM sandbox_persist.checkpoint_threads x WHERE x.thread_id = t),
        'transcript', (SELECT json_build_object('transcript', x.transcript::text, 'updatedAt', x.updated_at)
                         FROM sandbox_persist.messages x WHERE x.thread_id = t),
        'conversationMessages', (SELECT coalesce(json_agg(json_build_object(
                 'messageId', x.message_id, 'hash', encode(x.hash, 'hex'), 'body', x.body)
                 ORDER BY x.message_id), '[]')
               FROM sandbox_persist.conversation_messages x WHERE x.thread_id = t),
        'checkpoints', (SELECT coalesce(json_agg(json_build_object(
                 'checkpointId', x.checkpoint_id, 'parentId', x.parent_id, 'createdAt', x.created_at,
                 'reason', x.reason, 'label', x.label, 'sourceRunId', x.source_run_id,
                 'files', x.files::text, 'artifacts', x.artifacts::text,
                 'conversation', x.conversation) ORDER BY x.seq), '[]')
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
                 'changedAt', x.changed_at) ORDER BY x.seq), '[]')
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
    -- The move lock (the write guard's advisory lock, exclusively) serialises
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
               (thread_id, fence, owner_token, lease_expires_at, head_id)
        SELECT t, (doc->'thread'->>'fence')::bigint, (doc->'thread'->>'ownerToken')::uuid,
               (doc->'thread'->>'leaseExpiresAt')::bigint, doc->'thread'->>'headId'
        ON CONFLICT ON CONSTRAINT checkpoint_threads_pkey DO UPDATE
           SET fence = greatest(x.fence, excluded.fence), owner_token = excluded.owner_token,
               lease_expires_at = excluded.lease_expires_at, head_id = excluded.head_id;
    END IF;
    IF doc->'transcript' IS NOT NULL AND json_typeof(doc->'transcript') = 'object' THEN
        INSERT INTO sandbox_persist.messages (thread_id, transcript, updated_at)
        VALUES (t, (doc->'transcript'->>'transcript')::json, (doc->'transcript'->>'updatedAt')::bigint);
    END IF;
    -- conversation messages get new ids here; checkpoints are renumbered
    -- through each message's hash (unique per thread)
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
    INSERT INTO sandbox_persist.checkpoints (checkpoint_id, thread_id, parent_id, created_at, reason,
                                             label, source_run_id, files, artifacts, conversation)
    SELECT x."checkpointId", t, x."parentId", x."createdAt", x.reason, x.label, x."sourceRunId",
           x.files::json, x.artifacts::json,
           ARRAY(SELECT im.new_id
                   FROM unnest(x.conversation) WITH ORDINALITY AS u(id, ord)
                   JOIN im ON im.old_id = u.id
                  ORDER BY u.ord)
      FROM json_array_elements(doc->'checkpoints') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("checkpointId" text,
           "parentId" text, "createdAt" float8, reason text, label text, "sourceRunId" text,
           files text, artifacts text, conversation bigint[])
     ORDER BY e.ord;
    INSERT INTO sandbox_persist.checkpoint_blob_refs (checkpoint_id, blob_key)
    SELECT x."checkpointId", x."blobKey"
      FROM json_to_recordset(doc->'references') AS x("checkpointId" text, "blobKey" text);
    INSERT INTO sandbox_persist.runs (run_id, thread_id, status, started_at, finished_at, error,
                                      usage, sandbox_key, detached_since, cancel_requested,
                                      driver_epoch, changed_at)
    SELECT x."runId", t, x.status, x."startedAt", x."finishedAt", x.error::json, x.usage::json,
           x."sandboxKey", x."detachedSince", x."cancelRequested", x."driverEpoch", x."changedAt"
      FROM json_array_elements(doc->'runs') WITH ORDINALITY AS e(v, ord),
           LATERAL json_to_record(e.v) AS x("runId" text, status text,
           "startedAt" bigint, "finishedAt" bigint, error text, usage text, "sandboxKey" text,
           "detachedSince" bigint, "cancelRequested" boolean, "driverEpoch" bigint,
           "changedAt" bigint)
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

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
