-- router/cross_shard.sql: cross-shard fork and thread moves, on the router.
--
-- Installed into the router database after the generated router functions
-- (it needs sandbox_persist._shard_of_thread and sandbox_persist.thread_placement
-- from there). What it owns:
--   * _fork_across_shards(input, now_ms): the router's
--     checkpoint_fork_from_checkpoint calls it when the source and the
--     destination thread live on different shards;
--   * thread_move(thread_id, to_shard): a procedure (CALL it outside a
--     transaction block: it commits between its steps) that moves everything
--     a thread owns to another shard and points the thread's placement there;
--   * thread_move_cancel(thread_id): gives a failed move up when its import
--     never committed;
--   * the PL/Proxy functions both use, each run on one shard by number
--     (RUN ON shard: the partition is shard & (partitions - 1), and shard
--     numbers are 0 .. partitions - 1), named _on_shard_<shard function>.
-- Locking: a move holds a session advisory lock on the router per thread, so
-- two movers of one thread never interleave; everything else is the shards'
-- (docs/architecture.md "Cross-shard fork and thread moves").

-- The PL/Proxy cluster these functions run on. The router's generated part
-- may define it first; this default is the cluster router/install.sh creates.
DO $$
BEGIN
    IF to_regprocedure('sandbox_persist._cluster_name()') IS NULL THEN
        CREATE FUNCTION sandbox_persist._cluster_name() RETURNS text
        LANGUAGE sql IMMUTABLE AS $f$ SELECT 'sandbox_persist_shards'::text $f$;
    END IF;
END
$$;

-- How many partitions the cluster has (a power of two), and the shard number
-- a hash value lands on (PL/Proxy's rule: hash & (partitions - 1)). Defaults
-- read the cluster's SQL/MED server (options p0, p1, ...) when the router's
-- generated part did not define them.
DO $$
BEGIN
    IF to_regprocedure('sandbox_persist._partition_count()') IS NULL THEN
        CREATE FUNCTION sandbox_persist._partition_count() RETURNS integer
        LANGUAGE sql STABLE AS $f$
            SELECT count(*)::integer
              FROM pg_catalog.pg_foreign_server s, unnest(s.srvoptions) AS o
             WHERE s.srvname = sandbox_persist._cluster_name() AND o ~ '^p[0-9]+='
        $f$;
    END IF;
END
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._shard_number(hash integer) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT hash & (sandbox_persist._partition_count() - 1)
$$;

------------------------------------------------------------------------------
-- One shard, by number.
------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_checkpoint_export_fork(shard integer, checkpoint_id text)
RETURNS TABLE (checkpoint json, references_complete boolean, blob_keys text[], absent_blob_keys text[])
LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT * FROM sandbox_persist._checkpoint_export_fork(checkpoint_id);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_all_checkpoint_export_fork(checkpoint_id text)
RETURNS TABLE (checkpoint json, references_complete boolean, blob_keys text[], absent_blob_keys text[])
LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON ALL;
    SELECT * FROM sandbox_persist._checkpoint_export_fork(checkpoint_id);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_all_checkpoint_exists(checkpoint_id text)
RETURNS SETOF boolean LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON ALL;
    SELECT sandbox_persist.checkpoint_get(checkpoint_id) IS NOT NULL;
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_checkpoint_import_fork(shard integer, input json,
                                                                            source json, now_ms bigint)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist._checkpoint_import_fork(input, source, now_ms);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_blob_head(shard integer, blob_key text)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist.blob_head(blob_key);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_blob_get(shard integer, blob_key text,
                                                              range_offset bigint, range_length bigint)
RETURNS TABLE (record json, body bytea) LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT record, body FROM sandbox_persist.blob_get(blob_key, range_offset, range_length);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_blob_put(shard integer, blob_key text, body bytea,
                                                              options json)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist.blob_put(blob_key, body, options);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_blob_upload_begin(shard integer, blob_key text,
                                                                       options json)
RETURNS text LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist.blob_upload_begin(blob_key, options);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_blob_upload_append(shard integer, upload_id text,
                                                                        at_offset bigint, bytes bytea)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist.blob_upload_append(upload_id, at_offset, bytes);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_blob_upload_commit(shard integer, upload_id text)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist.blob_upload_commit(upload_id);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_thread_move_begin(shard integer, thread_id text,
                                                                       to_shard integer)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist._thread_move_begin(thread_id, to_shard);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_thread_export(shard integer, thread_id text)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist._thread_export(thread_id);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_thread_import(shard integer, thread_id text,
                                                                   from_shard integer, doc json)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist._thread_import(thread_id, from_shard, doc);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_thread_move_imported(shard integer, thread_id text)
RETURNS boolean LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist._thread_move_imported(thread_id);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_thread_drop(shard integer, thread_id text)
RETURNS json LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist._thread_drop(thread_id);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_thread_move_finish(shard integer, thread_id text)
RETURNS boolean LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist._thread_move_finish(thread_id);
$$;
CREATE OR REPLACE FUNCTION sandbox_persist._on_shard_thread_move_abort(shard integer, thread_id text)
RETURNS boolean LANGUAGE plproxy AS $$
    CLUSTER sandbox_persist._cluster_name(); RUN ON shard;
    SELECT sandbox_persist._thread_move_abort(thread_id);
$$;

------------------------------------------------------------------------------
-- Blob copies. Content-addressed keys name their bytes, so a copy is
-- idempotent: a key the destination holds is kept (its head refreshes the
-- GC grace until the import references it); otherwise the bytes are read on
-- the source in pieces of at most 8 MiB and written through a streamed upload
-- (one blob_put when it fits one piece). The destination verifies the hash.
-- Returns the number of blobs copied.
------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION sandbox_persist._copy_blobs(from_shard integer, to_shard integer,
                                                       keys text[], absent text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    piece constant bigint := 8 * 1024 * 1024;
    k text;
    head json;
    options json;
    size bigint;
    upload text;
    at bigint;
    chunk bytea;
    copied integer := 0;
BEGIN
    FOR k IN SELECT unnest(keys) EXCEPT SELECT unnest(absent) ORDER BY 1
    LOOP
        IF sandbox_persist._on_shard_blob_head(to_shard, k) IS NOT NULL THEN
            CONTINUE;
        END IF;
        head := sandbox_persist._on_shard_blob_head(from_shard, k);
        IF head IS NULL THEN
            CONTINUE;   -- collected on the source meanwhile: the import names it
        END IF;
        size := (head->>'size')::bigint;
        options := json_strip_nulls(json_build_object('contentType', head->'contentType',
                                                      'customMetadata', head->'customMetadata'));
        IF size <= piece THEN
            SELECT g.body INTO chunk FROM sandbox_persist._on_shard_blob_get(from_shard, k, NULL, NULL) g;
            PERFORM sandbox_persist._on_shard_blob_put(to_shard, k, chunk, options);
        ELSE
            upload := sandbox_persist._on_shard_blob_upload_begin(to_shard, k, options);
            at := 0;
            WHILE at < size LOOP
                SELECT g.body INTO chunk
                  FROM sandbox_persist._on_shard_blob_get(from_shard, k, at, least(piece, size - at)) g;
                PERFORM sandbox_persist._on_shard_blob_upload_append(to_shard, upload, at, chunk);
                at := at + length(chunk);
            END LOOP;
            PERFORM sandbox_persist._on_shard_blob_upload_commit(to_shard, upload);
        END IF;
        copied := copied + 1;
    END LOOP;
    RETURN copied;
END
$$;

------------------------------------------------------------------------------
-- A fork whose destination thread lives on another shard than its source.
-- The source checkpoint is read on its shard (immutable: the read cannot go
-- stale, and appends to the source thread meanwhile are not blocked), its
-- blobs are copied, and the destination shard imports it in one transaction
-- with the local fork's checks and errors. A missing source is sent as NULL,
-- so the destination raises SP007, SP008 and SP010 before SP009, as a local
-- fork orders them. Two contract checks are global where a shard sees only
-- itself, so they ask every shard: a source id absent from the source
-- thread's shard may belong to a thread elsewhere (SP010, not SP009), and a
-- destination checkpoint id used on any shard is SP011; the import raises
-- both at their place in the check order. Returns {checkpoint}.
------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION sandbox_persist._fork_across_shards(input json, now_ms bigint)
RETURNS json LANGUAGE plpgsql AS $$
DECLARE
    source_thread text;
    source_id text;
    dest_thread text;
    dest_id text;
    src_shard integer;
    dst_shard integer;
    e record;
    doc json;
BEGIN
    -- Malformed input is the destination shard's to report; text it cannot
    -- give as SQL text (\u0000) counts as absent here.
    BEGIN
        source_thread := input->>'sourceThreadId';
        source_id := input->>'sourceCheckpointId';
        dest_thread := input->>'destinationThreadId';
        dest_id := input->>'destinationCheckpointId';
    EXCEPTION WHEN untranslatable_character OR invalid_parameter_value
                   OR wrong_object_type OR invalid_text_representation THEN
        source_thread := NULL;
        source_id := NULL;
    END;
    dst_shard := sandbox_persist._shard_number(sandbox_persist._shard_of_thread(coalesce(dest_thread, '')));
    IF source_thread IS NOT NULL AND source_id IS NOT NULL THEN
        src_shard := sandbox_persist._shard_number(sandbox_persist._shard_of_thread(source_thread));
        SELECT * INTO e FROM sandbox_persist._on_shard_checkpoint_export_fork(src_shard, source_id);
        IF NOT FOUND THEN
            -- only a failing fork pays for this fan-out: the id may belong
            -- to a thread on another shard (SP010 rather than SP009)
            SELECT * INTO e FROM sandbox_persist._on_all_checkpoint_export_fork(source_id) LIMIT 1;
        ELSIF src_shard <> dst_shard THEN
            PERFORM sandbox_persist._copy_blobs(src_shard, dst_shard, e.blob_keys, e.absent_blob_keys);
        END IF;
        IF e.checkpoint IS NOT NULL THEN
            -- json_build_object embeds json values verbatim: the conversation keeps its bytes
            doc := json_build_object(
                'checkpoint', e.checkpoint, 'referencesComplete', e.references_complete,
                'blobKeys', to_json(e.blob_keys), 'absentBlobKeys', to_json(e.absent_blob_keys),
                'destinationIdTaken',
                dest_id IS NOT NULL AND true = ANY (ARRAY(
                    SELECT sandbox_persist._on_all_checkpoint_exists(dest_id))));
        END IF;
    END IF;
    RETURN sandbox_persist._on_shard_checkpoint_import_fork(dst_shard, input, doc, now_ms);
END
$$;

------------------------------------------------------------------------------
-- Thread moves. The journal row is the router's memory of a move under
-- way, committed before the first shard step, so a router that died mid-move
-- resumes it: CALL thread_move again with the same arguments.
--
-- Steps (each idempotent on its shard):
--   1. journal 'begun' (commit);
--   2. source: _thread_move_begin marks the thread moving (after the writes
--      in flight): from here writes to it are refused with SP014;
--   3. source: _thread_export; blobs copied to the destination;
--   4. destination: _thread_import, one transaction (an earlier committed
--      import is recognised and kept);
--   5. router: thread_placement override written, journal 'placed' (commit):
--      from here the router sends the thread's calls to the destination;
--   6. source: _thread_drop deletes the source copy, leaves a tombstone;
--   7. destination: _thread_move_finish; journal row deleted (commit).
-- The write window is steps 2-5. If step 3 or 4 fails and the destination
-- confirms no import committed, the source is released (writable again) and
-- the error raised; if the destination cannot answer, the journal stays and
-- writes stay refused until thread_move is called again (or
-- thread_move_cancel once the destination is back).
------------------------------------------------------------------------------
CREATE TABLE IF NOT EXISTS sandbox_persist.thread_move_journal (
    thread_id  text COLLATE "C" PRIMARY KEY,
    from_shard integer NOT NULL,
    to_shard   integer NOT NULL,
    step       text NOT NULL CHECK (step IN ('begun', 'placed')),
    started_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE OR REPLACE PROCEDURE sandbox_persist.thread_move(thread_id text, to_shard integer)
LANGUAGE plpgsql AS $$
DECLARE
    t constant text := thread_id;
    j sandbox_persist.thread_move_journal%ROWTYPE;
    state json;
    doc json;
    imported boolean;
    e_state text;
    e_msg text;
    e_detail text;
BEGIN
    IF t IS NULL OR t = '' OR to_shard IS NULL OR to_shard < 0
       OR to_shard >= sandbox_persist._partition_count() THEN
        RAISE EXCEPTION 'invalid thread move'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('A move needs a non-empty thread id and a shard number from 0 to %s.',
                                  sandbox_persist._partition_count() - 1);
    END IF;
    PERFORM pg_advisory_lock(5315, hashtext(t));
    SELECT * INTO j FROM sandbox_persist.thread_move_journal m WHERE m.thread_id = t;
    IF NOT FOUND THEN
        j.from_shard := sandbox_persist._shard_number(sandbox_persist._shard_of_thread(t));
        IF j.from_shard = to_shard THEN
            PERFORM pg_advisory_unlock(5315, hashtext(t));
            RETURN;   -- already there
        END IF;
        INSERT INTO sandbox_persist.thread_move_journal (thread_id, from_shard, to_shard, step)
        VALUES (t, j.from_shard, to_shard, 'begun')
        RETURNING * INTO j;
        COMMIT;
    ELSIF j.to_shard <> to_shard THEN
        PERFORM pg_advisory_unlock(5315, hashtext(t));
        RAISE EXCEPTION 'another move of this thread is under way'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Thread "%s" is being moved from shard %s to shard %s.',
                                  t, j.from_shard, j.to_shard),
                  HINT = format('CALL sandbox_persist.thread_move(%L, %s) to finish it first.', t, j.to_shard);
    END IF;

    IF j.step = 'begun' THEN
        BEGIN
            state := sandbox_persist._on_shard_thread_move_begin(j.from_shard, t, j.to_shard);
            IF state->>'state' = 'moving' THEN
                doc := sandbox_persist._on_shard_thread_export(j.from_shard, t);
                PERFORM sandbox_persist._copy_blobs(j.from_shard, j.to_shard,
                    ARRAY(SELECT json_array_elements_text(doc->'blobKeys')),
                    ARRAY(SELECT json_array_elements_text(doc->'absentBlobKeys')));
                PERFORM sandbox_persist._on_shard_thread_import(j.to_shard, t, j.from_shard, doc);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_msg = MESSAGE_TEXT,
                                    e_detail = PG_EXCEPTION_DETAIL;
        END;
        IF e_state IS NOT NULL THEN
            BEGIN
                imported := sandbox_persist._on_shard_thread_move_imported(j.to_shard, t);
            EXCEPTION WHEN OTHERS THEN
                imported := NULL;   -- the destination cannot say: keep everything
            END;
            IF imported IS FALSE THEN
                BEGIN
                    PERFORM sandbox_persist._on_shard_thread_move_abort(j.from_shard, t);
                    DELETE FROM sandbox_persist.thread_move_journal m WHERE m.thread_id = t;
                EXCEPTION WHEN OTHERS THEN
                    NULL;   -- the source cannot be released now: resume later
                END;
            END IF;
            IF imported IS NOT TRUE THEN
                COMMIT;
                PERFORM pg_advisory_unlock(5315, hashtext(t));
                RAISE EXCEPTION 'thread move failed: %', e_msg
                    USING ERRCODE = e_state,
                          DETAIL = coalesce(e_detail, ''),
                          HINT = CASE WHEN imported IS FALSE
                                 THEN 'Nothing was moved; the thread stays where it was.'
                                 ELSE format('The move is kept; CALL sandbox_persist.thread_move(%L, %s) again to resume it.',
                                             t, j.to_shard) END;
            END IF;
        END IF;
        INSERT INTO sandbox_persist.thread_placement (thread_id, shard) VALUES (t, j.to_shard)
        ON CONFLICT ON CONSTRAINT thread_placement_pkey DO UPDATE SET shard = excluded.shard;
        UPDATE sandbox_persist.thread_move_journal m SET step = 'placed' WHERE m.thread_id = t;
        COMMIT;
    END IF;

    PERFORM sandbox_persist._on_shard_thread_drop(j.from_shard, t);
    PERFORM sandbox_persist._on_shard_thread_move_finish(j.to_shard, t);
    DELETE FROM sandbox_persist.thread_move_journal m WHERE m.thread_id = t;
    COMMIT;
    PERFORM pg_advisory_unlock(5315, hashtext(t));
END
$$;

-- Give up a move whose import never committed: the source is released and
-- the journal row removed. Refused (55000) once the destination holds the
-- import (resume with thread_move instead) or while it cannot be asked.
CREATE OR REPLACE FUNCTION sandbox_persist.thread_move_cancel(thread_id text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    j sandbox_persist.thread_move_journal%ROWTYPE;
BEGIN
    SELECT * INTO j FROM sandbox_persist.thread_move_journal m
     WHERE m.thread_id = thread_move_cancel.thread_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF j.step <> 'begun' OR sandbox_persist._on_shard_thread_move_imported(j.to_shard, j.thread_id) THEN
        RAISE EXCEPTION 'the thread move cannot be cancelled'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Thread "%s" has been imported into shard %s.', j.thread_id, j.to_shard),
                  HINT = format('CALL sandbox_persist.thread_move(%L, %s) to finish it.', j.thread_id, j.to_shard);
    END IF;
    PERFORM sandbox_persist._on_shard_thread_move_abort(j.from_shard, j.thread_id);
    DELETE FROM sandbox_persist.thread_move_journal m WHERE m.thread_id = j.thread_id;
    RETURN true;
END
$$;
