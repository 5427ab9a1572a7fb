-- sandbox_persist 0.3.0 -> 0.4.0. CREATE EXTENSION runs 0.1.0, the upgrade
-- scripts up to 0.3.0 and then this one; ALTER EXTENSION sandbox_persist
-- UPDATE runs it on a 0.3.0 database (after the earlier scripts on older ones).
-- What it changes is listed, section by section, below and in CHANGELOG.md.
\echo Use "ALTER EXTENSION sandbox_persist UPDATE" to load this file. \quit

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

-- Sections are added above this line, one per change, each opened by a
-- comment block that says what it changes and why.

-- Every upgrade script ends with the hardening (see the 0.1.0--0.2.0 header).
SELECT sandbox_persist._harden();
